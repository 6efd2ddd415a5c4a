//! Running a study: check it, write the manifest, train every run, then
//! summarise. Training itself lives in `train`.

use std::path::Path;

use anyhow::{Result, bail};
use rewardlab_framework::study::equiv::MergedVariant;
use rewardlab_framework::study::{self, Manifest, PolicySpec, RunSpec, Study};

mod qwen3;
mod train;

/// `study [STUDY.toml]`. Without `--jobs`, proxy-policy runs train one per
/// core (each is single-threaded but for tool calls) and Qwen3 runs one at a
/// time (each loads its own model). With `merge`, variants proved to give an
/// earlier variant's advantages are not trained (`study::equiv`); with
/// `shadow`, every run also scores its rollouts with the other variants.
pub fn run(path: &Path, jobs: Option<usize>, results: &Path, merge: bool, shadow: bool) -> Result<u8> {
    if jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let Some(mut s) = super::load(path)? else { return Ok(1) };
    s.training.shadow |= shadow;
    let jobs = jobs.unwrap_or_else(|| match s.policy {
        PolicySpec::Proxy(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        PolicySpec::Qwen3(_) => 1,
    });
    let dir = results.join(&s.name);
    let (runs, merged) = planned_runs(&s, merge)?;
    for m in &merged {
        eprintln!("merged {} into {}: {} (--no-merge trains it)", m.variant, m.into, m.reason);
    }
    study::equiv::write_merged(&dir, &merged)?;
    study::publish::write_manifest(&dir, &Manifest::new(&s, &runs))?;
    // The other runs' results are worth a summary even when some run failed.
    let trained = run_study(&s, &runs, jobs, &dir);
    let summarized = super::summarize(&dir);
    trained?;
    summarized?;
    Ok(0)
}

/// The runs a study trains and the variants it merges: every run of its grid, less the runs of
/// variants proved to give an earlier variant's advantages (`study::equiv`) unless `merge` is
/// off. `study`, `study slurm`, `study run-one` and `study merge` each compute it from the study
/// file, so an array index names the same run in every task.
pub fn planned_runs(s: &Study, merge: bool) -> Result<(Vec<RunSpec>, Vec<MergedVariant>)> {
    let merged = if merge { study::equiv::merge_plan(s, &study::equiv::compare_variants(s)?) } else { Vec::new() };
    Ok((study::equiv::without_merged(&s.runs(), &merged), merged))
}

/// Trains every run of `runs` (at most `jobs` at once), each into
/// `study_dir.join(&run.dir)` with `metrics.csv`, and writes the BM25 baseline
/// (`study::bm25_baseline` + `study::summary::write_baselines`) on the study's
/// held-out tasks.
///
/// Finished runs are skipped and checkpointed ones resume, so rerunning an
/// interrupted study continues it.
pub fn run_study(study: &Study, runs: &[RunSpec], jobs: usize, study_dir: &Path) -> Result<()> {
    train::train(study, runs, jobs, study_dir)
}
