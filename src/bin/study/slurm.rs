//! Studies on a Slurm cluster, without a scheduler of our own (the script,
//! the run manifest and run statuses are `rewardlab_framework::study`'s; this
//! module is the three subcommands' arguments and printing): `study slurm`
//! hands the expanded grid to Slurm as one array job (task i = run i),
//! `study run-one` is what each array task runs, and `study merge` checks
//! which runs finished and summarises them exactly as a local `study` does.
//!
//! Everything a task needs travels through shared storage: the study file,
//! the results directory (`<results>/<study>/`, holding runs, the shared task
//! repository and store, `manifest.json`, the baseline) and the study binary.
//! Tasks publish the shared pieces atomically (`study::publish`), so any
//! number of them may start at once, and any may be resubmitted.

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use rewardlab_framework::study::slurm::{
    ArrayManifest, RUN_MANIFEST_SUFFIX, SbatchOptions, Script, index_list, parse_indices, shell_quote,
};
use rewardlab_framework::study::summary::BASELINE_FILE;
use rewardlab_framework::study::{self, Manifest, RunSpec, RunStatus, publish};

/// `study slurm`.
#[derive(Debug, Args)]
pub struct SlurmArgs {
    /// The study file (it must stay where it is, on storage the compute nodes see).
    study: PathBuf,
    /// Where `<study>/` goes; on shared storage.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Where the script, run manifest and `logs/` go (default: `<results>/<study>/slurm`).
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// `#SBATCH --partition`.
    #[arg(long)]
    partition: Option<String>,
    /// `#SBATCH --time` per task (`HH:MM:SS`, `D-HH:MM:SS`, minutes).
    #[arg(long)]
    time: Option<String>,
    /// `#SBATCH --gpus-per-task`.
    #[arg(long)]
    gpus_per_task: Option<u32>,
    /// `#SBATCH --cpus-per-task`.
    #[arg(long)]
    cpus_per_task: Option<u32>,
    /// Any other sbatch option, written as an `#SBATCH` line (`--sbatch=--account=lab`); repeatable.
    #[arg(long = "sbatch", value_name = "OPTION", allow_hyphen_values = true)]
    extra: Vec<String>,
    /// Only these array tasks (`3,5` or `0-2,7`), e.g. to resubmit failed runs.
    #[arg(long)]
    only: Option<String>,
    /// At most this many tasks at once (`--array=...%N`).
    #[arg(long)]
    max_running: Option<u32>,
    /// Train every variant, also those proved to give the same advantages as an earlier one
    /// (as `study --no-merge`; give it to `slurm`, `run-one` and `merge` alike).
    #[arg(long)]
    no_merge: bool,
}

/// `study run-one`.
#[derive(Debug, Args)]
pub struct RunOneArgs {
    /// The study file.
    study: PathBuf,
    /// The run's index in the expanded grid (`study check` lists them; `$SLURM_ARRAY_TASK_ID`).
    #[arg(long)]
    index: usize,
    /// Where `<study>/` goes.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Train every variant, also those proved to give the same advantages as an earlier one
    /// (as `study --no-merge`; give it to `slurm`, `run-one` and `merge` alike).
    #[arg(long)]
    no_merge: bool,
}

/// `study merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The study file.
    study: PathBuf,
    /// Where `<study>/` is.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Summarise even when some runs did not finish (they are listed in `summary.md`).
    #[arg(long)]
    partial: bool,
    /// Train every variant, also those proved to give the same advantages as an earlier one
    /// (as `study --no-merge`; give it to `slurm`, `run-one` and `merge` alike).
    #[arg(long)]
    no_merge: bool,
}

/// `study slurm`: writes the script and run manifest, prepares the study's
/// shared pieces once (so a broken task source fails here, not in every task),
/// and prints the `sbatch` command on stdout.
pub fn slurm(args: &SlurmArgs) -> Result<u8> {
    let Some(s) = super::load(&args.study)? else { return Ok(1) };
    let (runs, merged) = super::run::planned_runs(&s, !args.no_merge)?;
    for m in &merged {
        eprintln!("merged {} into {}: {} (--no-merge trains it)", m.variant, m.into, m.reason);
    }
    let only = args.only.as_deref().map(|text| parse_indices(text, runs.len())).transpose()?;
    if args.max_running == Some(0) {
        bail!("--max-running must be at least 1");
    }
    let study_file =
        args.study.canonicalize().with_context(|| format!("resolving the study file {}", args.study.display()))?;
    let study_bin = std::env::current_exe().context("finding the study binary")?;
    fs::create_dir_all(&args.results).with_context(|| format!("creating {}", args.results.display()))?;
    let results = args.results.canonicalize().with_context(|| format!("resolving {}", args.results.display()))?;
    let study_dir = results.join(&s.name);
    let out_dir = match &args.output_dir {
        Some(d) => {
            fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.canonicalize().with_context(|| format!("resolving {}", d.display()))?
        }
        None => study_dir.join("slurm"),
    };
    // Slurm does not create the directory of `--output`; a task whose log cannot open fails unseen.
    let log_dir = out_dir.join("logs");
    fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let script_path = out_dir.join(format!("{}.sbatch", s.name));
    let options = SbatchOptions {
        partition: args.partition.clone(),
        time: args.time.clone(),
        gpus_per_task: args.gpus_per_task,
        cpus_per_task: args.cpus_per_task,
        extra: args.extra.clone(),
        only,
        max_running: args.max_running,
    };
    let script = Script {
        study_name: &s.name,
        runs: runs.len(),
        variants: s.variants.len(),
        seeds: s.seeds,
        merged: merged.len(),
        no_merge: args.no_merge,
        study_bin: &study_bin,
        study_file: &study_file,
        results: &results,
        script: &script_path,
        log_dir: &log_dir,
        options: &options,
    };
    let text = script.render()?;

    study::equiv::write_merged(&study_dir, &merged)?;
    publish::write_manifest(&study_dir, &Manifest::new(&s, &runs))?;
    // The task set, repository store and baseline, with no run to train.
    super::run::run_study(&s, &[], 1, &study_dir).context("preparing the study's tasks")?;

    let manifest_path = out_dir.join(format!("{}{RUN_MANIFEST_SUFFIX}", s.name));
    let json = ArrayManifest::new(&s, &runs, &script).to_json()?;
    let manifest_name = manifest_path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    publish::write_text(&out_dir, &manifest_name, &json, "the run manifest")?;
    let script_name = script_path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    publish::write_text(&out_dir, &script_name, &text, "the sbatch script")?;

    eprintln!(
        "{}: {} runs ({} variants × {} seeds) as array {}",
        s.name,
        runs.len(),
        s.variants.len(),
        s.seeds,
        script.array()
    );
    eprintln!("wrote {} and {}", script_path.display(), manifest_path.display());
    eprintln!("logs go to {}", script.log_pattern().display());
    eprintln!(
        "submit with the command below; afterwards: study merge {} --results {}",
        study_file.display(),
        results.display()
    );
    println!("sbatch {}", shell_quote(&script_path));
    Ok(0)
}

/// `study run-one`: trains run `index` (skipped when finished, resumed from its
/// checkpoint) after making sure the manifest and baseline exist.
pub fn run_one(args: &RunOneArgs) -> Result<u8> {
    let Some(s) = super::load(&args.study)? else { return Ok(1) };
    // The plan only numbers the runs here: `study slurm` and `study merge` write `merged.json`,
    // so concurrent tasks never write one file.
    let (runs, _merged) = super::run::planned_runs(&s, !args.no_merge)?;
    let Some(run) = runs.get(args.index) else {
        bail!(
            "--index {} is out of range: study `{}` has {} runs (0-{})",
            args.index,
            s.name,
            runs.len(),
            runs.len().saturating_sub(1)
        );
    };
    let study_dir = args.results.join(&s.name);
    publish::write_manifest(&study_dir, &Manifest::new(&s, &runs))?;
    let status = RunStatus::of(&s, run, &study_dir);
    eprintln!(
        "{}: run {} of {}: {} seed index {} (seed {}) in {}: {status}",
        s.name,
        args.index,
        runs.len(),
        run.variant_name,
        run.seed_index,
        run.seed,
        study_dir.join(&run.dir).display()
    );
    let start = Instant::now();
    super::run::run_study(&s, std::slice::from_ref(run), 1, &study_dir)?;
    eprintln!(
        "{}: run {} is {} ({:.1} s)",
        s.name,
        args.index,
        RunStatus::of(&s, run, &study_dir),
        start.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// `study merge`: lists unfinished runs with the command that resubmits them
/// (exit 1 unless `--partial`), then writes `summary.csv`, `summary.md` and
/// `plots/` exactly as a local `study` run does.
pub fn merge(args: &MergeArgs) -> Result<u8> {
    let Some(s) = super::load(&args.study)? else { return Ok(1) };
    let (runs, merged) = super::run::planned_runs(&s, !args.no_merge)?;
    let study_dir = args.results.join(&s.name);
    if !study_dir.is_dir() {
        bail!("{} does not exist: no run of study `{}` has written its results yet", study_dir.display(), s.name);
    }
    let study_dir = study_dir.canonicalize().with_context(|| format!("resolving {}", study_dir.display()))?;
    // The study file is the authority: summarise exactly its runs, in its order.
    study::equiv::write_merged(&study_dir, &merged)?;
    publish::write_manifest(&study_dir, &Manifest::new(&s, &runs))?;
    let unfinished: Vec<(usize, &RunSpec, RunStatus)> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (i, r, RunStatus::of(&s, r, &study_dir)))
        .filter(|(_, _, status)| *status != RunStatus::Finished)
        .collect();
    if !unfinished.is_empty() {
        eprintln!(
            "{} of {} runs are not finished (failed, cancelled, or still queued or running):",
            unfinished.len(),
            runs.len()
        );
        for (i, r, status) in &unfinished {
            eprintln!("  {i:>4}  {:<24} {status}", r.dir.display());
        }
        let list = index_list(&unfinished.iter().map(|(i, _, _)| *i).collect::<Vec<_>>());
        eprintln!("resubmit just these runs with:");
        let default_script = study_dir.join("slurm").join(format!("{}.sbatch", s.name));
        if default_script.is_file() {
            eprintln!("  sbatch --array={list} {}", shell_quote(&default_script));
        } else {
            eprintln!("  sbatch --array={list} <the study's .sbatch script>");
        }
        if !args.partial {
            eprintln!("not summarising; pass --partial to summarise the finished runs anyway");
            return Ok(1);
        }
    }
    if !study_dir.join(BASELINE_FILE).is_file() {
        eprintln!("warning: no {BASELINE_FILE}: the summary has no BM25 row (any `study run-one` writes it)");
    }
    super::summarize(&study_dir)?;
    Ok(0)
}
