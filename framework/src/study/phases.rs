//! Where a study's training time goes: each variant's mean wall-clock seconds
//! per step by phase, from its runs' `timings.csv`, written as `phases.csv`
//! and `phases.md` beside the summary.
//!
//! Wall-clock times differ from run to run of the same study, so they stay out
//! of `summary.md`, which a rerun reproduces byte for byte. Only each run's own
//! `timings.csv` is read, not the copies its checkpoints keep.
//!
//! The tools' time depends on the sandbox's content index and blob cache, so
//! the training process also writes their counters per repository
//! (`index.json`, [`write_index_counters`]), and `phases.md` shows them under
//! the split: how many blobs were indexed, loaded from the persisted index or
//! evicted at the memory bound, how often the lists were compacted, how many
//! files greps skipped thanks to the index, and the blob cache's hits and misses.
//! They are the last training process's (each process of a Slurm array writes
//! its own over the file).

use std::fs;
use std::path::Path;

use rewardlab_sandbox::{BlobCacheStats, IndexStats, RepoStore, SandboxStats};
use serde::{Deserialize, Serialize};

use super::publish::{PublishError, publish_file};
use super::summary::{Manifest, SummaryError, io, write_csv};
use crate::engine::{TIMINGS_FILE, Timings};
use crate::markdown::Table;

/// The phase split as CSV.
pub const PHASES_CSV: &str = "phases.csv";
/// The phase split as markdown.
pub const PHASES_MD: &str = "phases.md";
/// The content index's and blob cache's counters of the last training process.
pub const INDEX_JSON: &str = "index.json";
/// The tool calls' counters of the last training process (its sandbox's result cache).
pub const SANDBOX_JSON: &str = "sandbox.json";

/// One repository's content index and blob cache counters at the end of a training process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRow {
    /// The store name (`owner__name`).
    pub repository: String,
    /// Its content index's counters.
    pub index: IndexStats,
    /// Its blob cache's counters.
    pub blob_cache: BlobCacheStats,
}

/// The counters of every repository `store` opened.
pub fn index_counters(store: &RepoStore) -> Vec<IndexRow> {
    store
        .open_repos()
        .iter()
        .map(|repo| IndexRow {
            repository: repo.name().to_owned(),
            index: repo.index_stats(),
            blob_cache: repo.blob_cache().stats(),
        })
        .collect()
}

/// Publishes `index.json` (nothing when no repository was opened): written privately and renamed
/// into place, so that a reader, or another process of a Slurm array, never sees half of it.
pub fn write_index_counters(study_dir: &Path, rows: &[IndexRow]) -> Result<(), PublishError> {
    if rows.is_empty() {
        return Ok(());
    }
    publish_file(study_dir, INDEX_JSON, |dir| {
        let text = serde_json::to_string_pretty(rows).map_err(std::io::Error::other)?;
        fs::write(dir.join(INDEX_JSON), text + "\n")
    })
}

/// Publishes `sandbox.json`, the training process's tool-call counters, like [`write_index_counters`].
pub fn write_sandbox_counters(study_dir: &Path, stats: &SandboxStats) -> Result<(), PublishError> {
    publish_file(study_dir, SANDBOX_JSON, |dir| {
        let text = serde_json::to_string_pretty(stats).map_err(std::io::Error::other)?;
        fs::write(dir.join(SANDBOX_JSON), text + "\n")
    })
}

/// The counters a training process wrote to `file` in `study_dir`, if any (an unreadable file
/// counts as none: the counters only explain the times).
fn read_counters<T: serde::de::DeserializeOwned>(study_dir: &Path, file: &str) -> Option<T> {
    fs::read_to_string(study_dir.join(file)).ok().and_then(|text| serde_json::from_str(&text).ok())
}

/// One variant's mean seconds per step by phase, over all steps of all its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseRow {
    /// The variant.
    pub variant: String,
    /// Runs with a `timings.csv`.
    pub runs: usize,
    /// Steps timed, summed over those runs.
    pub steps: usize,
    /// Policy time during rollouts, tools excluded.
    pub rollout_s: f64,
    /// Waiting for the training rollouts' tool calls.
    pub tools_s: f64,
    /// Features and the reward program.
    pub reward_s: f64,
    /// The policy update.
    pub update_s: f64,
    /// Held-out evaluation, amortised over all steps.
    pub eval_s: f64,
    /// The part of `eval_s` spent waiting for the held-out episodes' tool calls.
    pub eval_tools_s: f64,
    /// Shadow variants' scoring.
    pub shadow_s: f64,
    /// The sum of the phases (`eval_tools_s` is inside `eval_s`).
    pub step_s: f64,
    /// `tools_s / step_s`.
    pub tools_share: f64,
    /// `(tools_s + eval_tools_s) / step_s`: every tool call's share of a step.
    pub all_tools_share: f64,
}

/// Each variant's row, in manifest order; a variant none of whose runs has a
/// `timings.csv` yet has none.
pub fn phase_split(study_dir: &Path, manifest: &Manifest) -> Result<Vec<PhaseRow>, SummaryError> {
    let mut rows = Vec::new();
    for variant in &manifest.variants {
        let mut runs = 0;
        let mut steps = Vec::new();
        for run in manifest.runs.iter().filter(|r| &r.variant == variant) {
            let path = study_dir.join(&run.dir).join(TIMINGS_FILE);
            if !path.exists() {
                continue;
            }
            let csv_err = |source| SummaryError::Csv { path: path.clone(), source };
            let mut reader = csv::Reader::from_path(&path).map_err(csv_err)?;
            for row in reader.deserialize::<Timings>() {
                steps.push(row.map_err(csv_err)?);
            }
            runs += 1;
        }
        if let Some(row) = mean_row(variant, runs, &steps) {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The per-step means of `steps`; `None` when there are none.
fn mean_row(variant: &str, runs: usize, steps: &[Timings]) -> Option<PhaseRow> {
    if steps.is_empty() {
        return None;
    }
    let mean = |f: fn(&Timings) -> f64| steps.iter().map(f).sum::<f64>() / steps.len() as f64;
    let (rollout_s, tools_s, reward_s, update_s) =
        (mean(|t| t.rollout_s), mean(|t| t.tools_s), mean(|t| t.reward_s), mean(|t| t.update_s));
    let (eval_s, eval_tools_s, shadow_s) = (mean(|t| t.eval_s), mean(|t| t.eval_tools_s), mean(|t| t.shadow_s));
    let step_s = rollout_s + tools_s + reward_s + update_s + eval_s + shadow_s;
    let share = |x: f64| if step_s > 0.0 { x / step_s } else { 0.0 };
    Some(PhaseRow {
        variant: variant.to_string(),
        runs,
        steps: steps.len(),
        rollout_s,
        tools_s,
        reward_s,
        update_s,
        eval_s,
        eval_tools_s,
        shadow_s,
        step_s,
        tools_share: share(tools_s),
        all_tools_share: share(tools_s + eval_tools_s),
    })
}

/// Writes `phases.csv` and `phases.md` (nothing when `rows` is empty).
pub fn write(study_dir: &Path, name: &str, rows: &[PhaseRow]) -> Result<(), SummaryError> {
    if rows.is_empty() {
        return Ok(());
    }
    write_csv(&study_dir.join(PHASES_CSV), rows)?;
    let path = study_dir.join(PHASES_MD);
    let index: Vec<IndexRow> = read_counters(study_dir, INDEX_JSON).unwrap_or_default();
    let text = render(name, rows, read_counters(study_dir, SANDBOX_JSON).as_ref(), &index);
    fs::write(&path, text).map_err(io(&path))
}

/// The markdown tables: seconds per step, then the tools' shares; below, the tool calls' and the
/// index's counters.
pub fn render(name: &str, rows: &[PhaseRow], calls: Option<&SandboxStats>, index: &[IndexRow]) -> String {
    let mut out = format!("# Study `{name}`: time per step by phase\n\n");
    out.push_str(
        "Mean wall-clock seconds per training step over every step of the variant's runs (`timings.csv`); \
         held-out evaluation is amortised over all steps, and its tool calls are counted inside it. \
         Times vary from run to run; `summary.md` holds the reproducible results.\n\n",
    );
    let mut table = Table::new([
        "variant",
        "runs",
        "steps",
        "rollout",
        "tools",
        "reward",
        "update",
        "eval (its tools)",
        "shadow",
        "step",
        "tools share",
        "with eval's tools",
    ]);
    let seconds = |s: f64| format!("{s:.3} s");
    let percent = |share: f64| format!("{:.0}%", 100.0 * share);
    for r in rows {
        table.row([
            r.variant.clone(),
            r.runs.to_string(),
            r.steps.to_string(),
            seconds(r.rollout_s),
            seconds(r.tools_s),
            seconds(r.reward_s),
            seconds(r.update_s),
            format!("{} ({})", seconds(r.eval_s), seconds(r.eval_tools_s)),
            seconds(r.shadow_s),
            seconds(r.step_s),
            percent(r.tools_share),
            percent(r.all_tools_share),
        ]);
    }
    out.push_str(&table.finish());
    if let Some(calls) = calls {
        out.push_str(&render_calls(calls));
    }
    if !index.is_empty() {
        out.push_str(&render_index(index));
    }
    out
}

/// The tool calls' counters: how many the result cache answered.
fn render_calls(s: &SandboxStats) -> String {
    let share = |n: u64| if s.calls > 0 { 100.0 * n as f64 / s.calls as f64 } else { 0.0 };
    let mut table = Table::new([
        "calls",
        "answered from the result cache",
        "joined a call in flight",
        "timeouts",
        "errors",
        "results loaded",
        "results cached",
        "cache",
    ]);
    table.row([
        s.calls.to_string(),
        format!("{} ({:.0}%)", s.cache_hits, share(s.cache_hits)),
        format!("{} ({:.0}%)", s.joined, share(s.joined)),
        s.timeouts.to_string(),
        s.errors.to_string(),
        s.loaded.to_string(),
        s.cache_entries.to_string(),
        mib(s.cache_bytes),
    ]);
    format!(
        "\n## Tool calls\n\n\
         Counters of the last training process (`sandbox.json`), every run of it together: one result \
         cache serves them all (`[sandbox] result_cache_mib`), filled first with the results the \
         study's previous process (the same binary) left in the store (loaded).\n\n{}",
        table.finish()
    )
}

/// `bytes` in whole MiB, as the counters' tables show sizes.
fn mib(bytes: usize) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1 << 20))
}

/// The counters' table: one row per repository.
fn render_index(rows: &[IndexRow]) -> String {
    let mut out = String::from(
        "\n## Content index and blob cache\n\n\
         Counters of the last training process, per repository (`index.json`). Evictions mean the \
         index reached its bound (`[sandbox] index_mib` in the study file) and greps read the evicted \
         blobs' files again; a compaction follows each round of evictions. Memo files: files greps took \
         from the grep memo (what the pattern matched in the blob at an earlier grep) instead of reading \
         them (memo loaded: entries read back from the file an earlier process of the study wrote); its \
         size is bounded by `[sandbox] grep_memo_mib`.\n\n",
    );
    let mut table = Table::new([
        "repository",
        "blobs",
        "index",
        "bound",
        "built",
        "loaded",
        "evicted",
        "compactions",
        "files skipped",
        "indexed greps",
        "memo files",
        "memo loaded",
        "memo",
        "blob cache hits",
        "misses",
    ]);
    for IndexRow { repository, index: i, blob_cache: b } in rows {
        table.row([
            repository.clone(),
            i.blobs.to_string(),
            mib(i.bytes),
            mib(i.capacity_bytes),
            i.built.to_string(),
            i.loaded.to_string(),
            i.evicted.to_string(),
            i.compactions.to_string(),
            i.files_skipped.to_string(),
            i.indexed_greps.to_string(),
            i.memo_files.to_string(),
            i.memo_loaded.to_string(),
            mib(i.memo_bytes),
            b.hits.to_string(),
            b.misses.to_string(),
        ]);
    }
    out.push_str(&table.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timings(step: usize, tools_s: f64, eval_s: f64, eval_tools_s: f64) -> Timings {
        Timings { step, rollout_s: 1.0, tools_s, reward_s: 0.5, update_s: 0.5, eval_s, shadow_s: 0.0, eval_tools_s }
    }

    #[test]
    fn a_variants_row_is_the_mean_over_every_step_of_its_runs() {
        let steps = [timings(1, 2.0, 0.0, 0.0), timings(2, 4.0, 4.0, 3.0)];
        let row = mean_row("v3", 1, &steps).expect("steps");
        assert_eq!((row.runs, row.steps), (1, 2));
        assert_eq!((row.tools_s, row.eval_s, row.eval_tools_s), (3.0, 2.0, 1.5));
        // rollout 1 + tools 3 + reward 0.5 + update 0.5 + eval 2 = 7 s a step.
        assert_eq!(row.step_s, 7.0);
        assert_eq!(row.tools_share, 3.0 / 7.0);
        assert_eq!(row.all_tools_share, 4.5 / 7.0);
        assert_eq!(mean_row("v3", 0, &[]), None);
        let md = render("s", &[row], None, &[]);
        assert!(md.contains("| v3 | 1 | 2 | 1.000 s | 3.000 s | 0.500 s | 0.500 s | 2.000 s (1.500 s) | 0.000 s | 7.000 s | 43% | 64% |"), "{md}");
        assert!(!md.contains("Content index") && !md.contains("Tool calls"), "no counters, no table: {md}");
    }

    #[test]
    fn index_counters_round_trip_through_the_study_directory_into_the_markdown() {
        let dir = tempfile::tempdir().expect("tempdir");
        let row = IndexRow {
            repository: "psf__requests".into(),
            index: IndexStats {
                blobs: 1462,
                bytes: 14 << 20,
                capacity_bytes: 256 << 20,
                built: 12,
                loaded: 1450,
                evicted: 0,
                compactions: 0,
                files_skipped: 31569,
                indexed_greps: 351,
                memo_files: 20417,
                memo_patterns: 233,
                memo_bytes: 3 << 20,
                memo_loaded: 18000,
            },
            blob_cache: BlobCacheStats { hits: 6911, misses: 1232, ..BlobCacheStats::default() },
        };
        let read_index = |dir: &Path| read_counters::<Vec<IndexRow>>(dir, INDEX_JSON);
        assert_eq!(read_index(dir.path()), None, "no file yet");
        write_index_counters(dir.path(), std::slice::from_ref(&row)).expect("writes");
        let left: Vec<_> = fs::read_dir(dir.path()).expect("lists").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from(INDEX_JSON)], "no private copy left behind");
        assert_eq!(read_index(dir.path()), Some(vec![row.clone()]));
        let calls = SandboxStats {
            calls: 2000,
            cache_hits: 1500,
            joined: 100,
            cache_entries: 400,
            cache_bytes: 3 << 20,
            loaded: 300,
            ..SandboxStats::default()
        };
        write_sandbox_counters(dir.path(), &calls).expect("writes");
        assert_eq!(read_counters(dir.path(), SANDBOX_JSON), Some(calls));
        let phase = mean_row("v3", 1, &[timings(1, 2.0, 0.0, 0.0)]).expect("a step");
        write(dir.path(), "s", &[phase]).expect("writes");
        let md = fs::read_to_string(dir.path().join(PHASES_MD)).expect("phases.md");
        assert!(
            md.contains("| psf__requests | 1462 | 14 MiB | 256 MiB | 12 | 1450 | 0 | 0 | 31569 | 351 | 20417 | 18000 | 3 MiB | 6911 | 1232 |"),
            "{md}"
        );
        assert!(md.contains("| 2000 | 1500 (75%) | 100 (5%) | 0 | 0 | 300 | 400 | 3 MiB |"), "{md}");
    }
}
