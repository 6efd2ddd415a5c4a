//! Studies on a Slurm cluster, without a scheduler of our own: the sbatch
//! array script (`#SBATCH` directives only for the options given, besides the
//! array, job name and log files, then one `exec` of `study run-one` with
//! absolute paths, so a task runs the same from whatever directory Slurm
//! starts it in), the run manifest `<study>.runs.json` (array index → run),
//! and Slurm's index-list syntax.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{RunSpec, Study};

/// Run manifest beside the script: which array index trains which run.
pub const RUN_MANIFEST_SUFFIX: &str = ".runs.json";

/// A script or an index list that cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SlurmError {
    /// sbatch splits `#SBATCH` lines at blanks and has no quoting that survives every version.
    #[error("`{directive}` contains white space, which an #SBATCH line cannot hold; use paths and values without it")]
    WhiteSpace {
        /// The directive, without `#SBATCH`.
        directive: String,
    },
    #[error("`{part}` in `{text}` is not a run index")]
    /// Part of an index list is not a number.
    NotAnIndex {
        /// The offending part.
        part: String,
        /// The whole list.
        text: String,
    },
    #[error("`{part}` in `{text}` is an empty range")]
    /// A range `a-b` of an index list has `a > b`.
    EmptyRange {
        /// The offending range.
        part: String,
        /// The whole list.
        text: String,
    },
    #[error("run index {index} is out of range: the study has {runs} runs (0-{})", runs.saturating_sub(1))]
    /// An index list names a run the study does not have.
    OutOfRange {
        /// The offending index (a range's upper end).
        index: usize,
        /// Runs of the study.
        runs: usize,
    },
    #[error("the run manifest (paths must be UTF-8)")]
    /// The run manifest could not be serialised (a path that is not UTF-8).
    Manifest(#[source] serde_json::Error),
}

/// Resource and scheduling options, each written as an `#SBATCH` line when set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SbatchOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--time`, in any format Slurm accepts (`4:00:00`, `1-0`).
    pub time: Option<String>,
    /// `--gpus-per-task`.
    pub gpus_per_task: Option<u32>,
    /// `--cpus-per-task`.
    pub cpus_per_task: Option<u32>,
    /// Further options verbatim (`--account=lab`, `--mem=16G`).
    pub extra: Vec<String>,
    /// Array tasks to submit; `None`: every run.
    pub only: Option<Vec<usize>>,
    /// At most this many tasks at once (`--array=...%N`).
    pub max_running: Option<u32>,
}

/// Everything the script names.
#[derive(Clone, Debug)]
pub struct Script<'a> {
    /// The study's name, used in the job name and log file names.
    pub study_name: &'a str,
    /// Runs of the expanded grid (array indices `0..runs`).
    pub runs: usize,
    /// Reward variants of the study, for the script's header comment.
    pub variants: usize,
    /// Seeds per variant, for the script's header comment.
    pub seeds: usize,
    /// Variants not trained because an earlier one is proved equivalent (`study::equiv`), for
    /// the header comment; `runs` already leaves their runs out.
    pub merged: usize,
    /// Whether the study was submitted with `--no-merge`, which `run-one` and `merge` then get
    /// too, so that every task numbers the runs alike.
    pub no_merge: bool,
    /// Absolute paths.
    pub study_bin: &'a Path,
    /// The study file, absolute.
    pub study_file: &'a Path,
    /// The results root passed as `--results`, absolute (the study's directory is below it).
    pub results: &'a Path,
    /// Where the script itself is written, absolute.
    pub script: &'a Path,
    /// The directory of the tasks' log files, absolute.
    pub log_dir: &'a Path,
    /// The `#SBATCH` options.
    pub options: &'a SbatchOptions,
}

impl Script<'_> {
    /// The `--array` value: every index, or the chosen ones, throttled when asked.
    pub fn array(&self) -> String {
        let list = match &self.options.only {
            Some(only) => index_list(only),
            None => format!("0-{}", self.runs.saturating_sub(1)),
        };
        match self.options.max_running {
            Some(n) => format!("{list}%{n}"),
            None => list,
        }
    }

    /// Where task `%a` of job `%A` logs (stdout and stderr together).
    pub fn log_pattern(&self) -> PathBuf {
        self.log_dir.join(format!("{}-%A_%a.out", self.study_name))
    }

    /// The script's text. Fails on values that would break out of their `#SBATCH` line.
    pub fn render(&self) -> Result<String, SlurmError> {
        let o = self.options;
        let mut directives = vec![
            format!("--job-name=study-{}", self.study_name),
            format!("--array={}", self.array()),
            format!("--output={}", self.log_pattern().display()),
        ];
        directives.extend(o.partition.as_ref().map(|p| format!("--partition={p}")));
        directives.extend(o.time.as_ref().map(|t| format!("--time={t}")));
        directives.extend(o.gpus_per_task.map(|n| format!("--gpus-per-task={n}")));
        directives.extend(o.cpus_per_task.map(|n| format!("--cpus-per-task={n}")));
        directives.extend(o.extra.iter().cloned());
        if let Some(d) = directives.iter().find(|d| d.chars().any(char::is_whitespace)) {
            return Err(SlurmError::WhiteSpace { directive: d.clone() });
        }
        let bin = shell_quote(self.study_bin);
        let study = shell_quote(self.study_file);
        let results = shell_quote(self.results);
        let mut s = String::new();
        s.push_str("#!/bin/bash\n");
        let merged = match self.merged {
            0 => String::new(),
            n => format!(", less {n} variant(s) proved equivalent to an earlier one"),
        };
        s.push_str(&format!(
            "# Slurm array job of study `{}`, written by `study slurm`: {} runs ({} variants x {} seeds{merged}).\n",
            self.study_name, self.runs, self.variants, self.seeds
        ));
        s.push_str(
            "# Array task i trains run i of the run manifest beside this file. Finished runs are\n\
             # skipped and checkpointed ones resume, so resubmitting any task is safe:\n",
        );
        s.push_str(&format!("#   sbatch --array=3,5 {}\n", shell_quote(self.script)));
        s.push_str("# When the tasks are done, summarise (it lists runs that did not finish):\n");
        let no_merge = if self.no_merge { " --no-merge" } else { "" };
        s.push_str(&format!("#   {bin} merge {study} --results {results}{no_merge}\n"));
        for d in &directives {
            s.push_str(&format!("#SBATCH {d}\n"));
        }
        s.push_str("\nset -euo pipefail\n");
        s.push_str(&format!(
            "exec {bin} run-one {study} --index \"${{SLURM_ARRAY_TASK_ID:?run this script with sbatch}}\" --results {results}{no_merge}\n"
        ));
        Ok(s)
    }
}

/// One line of the run manifest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArrayRun {
    /// The array index, 0-based.
    pub index: usize,
    /// The reward variant's name.
    pub variant: String,
    /// The seed's position in the study's seed list, 0-based.
    pub seed_index: usize,
    /// The engine seed of the run.
    pub seed: u64,
    /// Relative to `results`.
    pub dir: PathBuf,
}

/// `<study>.runs.json`: the array job's index → run map, with the paths the tasks use.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArrayManifest {
    /// The study's name.
    pub study: String,
    /// The study file, absolute.
    pub study_file: PathBuf,
    /// The `study` binary the script runs, absolute.
    pub study_bin: PathBuf,
    /// The study's results directory (`<results>/<study>`).
    pub results: PathBuf,
    /// The sbatch script.
    pub script: PathBuf,
    /// Every run, array index `i` at position `i`.
    pub runs: Vec<ArrayRun>,
}

impl ArrayManifest {
    /// The manifest of `runs` (array task i = `runs[i]`) under `script`.
    pub fn new(study: &Study, runs: &[RunSpec], script: &Script<'_>) -> ArrayManifest {
        ArrayManifest {
            study: study.name.clone(),
            study_file: script.study_file.to_owned(),
            study_bin: script.study_bin.to_owned(),
            results: script.results.join(&study.name),
            script: script.script.to_owned(),
            runs: runs
                .iter()
                .enumerate()
                .map(|(index, r)| ArrayRun {
                    index,
                    variant: r.variant_name.clone(),
                    seed_index: r.seed_index,
                    seed: r.seed,
                    dir: r.dir.clone(),
                })
                .collect(),
        }
    }

    /// The JSON text written to `<study>.runs.json`.
    pub fn to_json(&self) -> Result<String, SlurmError> {
        let json = serde_json::to_string_pretty(self).map_err(SlurmError::Manifest)?;
        Ok(json + "\n")
    }
}

/// Parses `3,5` or `0-2,7` into ascending, distinct indices below `runs`.
pub fn parse_indices(text: &str, runs: usize) -> Result<Vec<usize>, SlurmError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let parse = |s: &str| -> Result<usize, SlurmError> {
            s.trim().parse().map_err(|_| SlurmError::NotAnIndex { part: s.to_owned(), text: text.to_owned() })
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => (parse(part)?, parse(part)?),
        };
        if lo > hi {
            return Err(SlurmError::EmptyRange { part: part.to_owned(), text: text.to_owned() });
        }
        if hi >= runs {
            return Err(SlurmError::OutOfRange { index: hi, runs });
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Ascending indices as Slurm's array syntax, runs of consecutive ones as ranges: `0-2,5,7-8`.
pub fn index_list(indices: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end += 1;
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// `path` as one POSIX shell word: bare when it is plain, single-quoted otherwise.
pub fn shell_quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,%@".contains(c)) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    #[test]
    fn indices_parse_normalise_and_print_as_ranges() {
        assert_eq!(parse_indices("5,3", 8).expect("ok"), vec![3, 5]);
        assert_eq!(parse_indices("0-2, 7,2", 8).expect("ok"), vec![0, 1, 2, 7]);
        assert!(parse_indices("8", 8).expect_err("out of range").to_string().contains("out of range"));
        assert!(parse_indices("3-1", 8).is_err());
        assert!(parse_indices("x", 8).is_err());
        assert!(parse_indices("", 8).is_err());
        assert_eq!(index_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(index_list(&[4]), "4");
        assert_eq!(index_list(&[]), "");
    }

    #[test]
    fn shell_quoting_survives_quotes_and_blanks() {
        assert_eq!(shell_quote(Path::new("/a/b-c_d.toml")), "/a/b-c_d.toml");
        assert_eq!(shell_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }

    fn script(options: &SbatchOptions) -> Result<String, SlurmError> {
        Script {
            study_name: "tiny",
            runs: 4,
            variants: 2,
            seeds: 2,
            merged: 0,
            no_merge: false,
            study_bin: Path::new("/opt/rl/study"),
            study_file: Path::new("/shared/tiny.toml"),
            results: Path::new("/shared/results"),
            script: Path::new("/shared/results/tiny/slurm/tiny.sbatch"),
            log_dir: Path::new("/shared/results/tiny/slurm/logs"),
            options,
        }
        .render()
    }

    #[test]
    fn only_given_options_become_directives() {
        let bare = script(&SbatchOptions::default()).expect("renders");
        let directives: Vec<&str> = bare.lines().filter(|l| l.starts_with("#SBATCH")).collect();
        assert_eq!(
            directives,
            [
                "#SBATCH --job-name=study-tiny",
                "#SBATCH --array=0-3",
                "#SBATCH --output=/shared/results/tiny/slurm/logs/tiny-%A_%a.out"
            ]
        );
        let full = SbatchOptions {
            partition: Some("gpu".into()),
            time: Some("1-00:00:00".into()),
            gpus_per_task: Some(1),
            cpus_per_task: Some(8),
            extra: vec!["--account=lab".into()],
            only: Some(vec![1, 2, 3]),
            max_running: Some(2),
        };
        let text = script(&full).expect("renders");
        for line in [
            "#SBATCH --array=1-3%2",
            "#SBATCH --partition=gpu",
            "#SBATCH --time=1-00:00:00",
            "#SBATCH --gpus-per-task=1",
            "#SBATCH --cpus-per-task=8",
            "#SBATCH --account=lab",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        let bad = SbatchOptions { partition: Some("a b".into()), ..SbatchOptions::default() };
        let err = script(&bad).expect_err("a blank in a directive");
        assert!(err.to_string().starts_with("`--partition=a b` contains white space"), "{err}");
    }

    #[test]
    fn the_script_snapshot() {
        let options = SbatchOptions {
            partition: Some("debug".into()),
            only: Some(vec![0, 2, 3]),
            max_running: Some(1),
            ..SbatchOptions::default()
        };
        expect![[r#"
            #!/bin/bash
            # Slurm array job of study `tiny`, written by `study slurm`: 4 runs (2 variants x 2 seeds).
            # Array task i trains run i of the run manifest beside this file. Finished runs are
            # skipped and checkpointed ones resume, so resubmitting any task is safe:
            #   sbatch --array=3,5 /shared/results/tiny/slurm/tiny.sbatch
            # When the tasks are done, summarise (it lists runs that did not finish):
            #   /opt/rl/study merge /shared/tiny.toml --results /shared/results
            #SBATCH --job-name=study-tiny
            #SBATCH --array=0,2-3%1
            #SBATCH --output=/shared/results/tiny/slurm/logs/tiny-%A_%a.out
            #SBATCH --partition=debug

            set -euo pipefail
            exec /opt/rl/study run-one /shared/tiny.toml --index "${SLURM_ARRAY_TASK_ID:?run this script with sbatch}" --results /shared/results
        "#]]
        .assert_eq(&script(&options).expect("renders"));
    }
}
