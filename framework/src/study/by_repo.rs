//! The held-out table broken down by repository (`summary_by_repo.md` and
//! `summary_by_repo.csv` beside `summary.md`).
//!
//! A study's held-out tasks may come from several repositories, and a mean
//! over all of them can hide a variant that wins on one repository and loses
//! on another. The breakdown reads the per-task records the runs and the
//! baselines left behind — each run's `eval.jsonl` ([`EvalRecord`]) and the
//! study's `baseline_tasks.jsonl` ([`BaselineTask`]) — and, per repository:
//!
//! - per run, takes the records of its last eval step (the step whose
//!   `metrics.csv` row the overall table reads) and computes the same
//!   columns as the overall table (F_β mean and median, precision, recall,
//!   the share with F_β ≥ 0.8, turns) over that repository's tasks;
//! - per variant, shows the mean over seeds ± the 95% CI half-width, as the
//!   overall table does, and how many of the repository's tasks were evaluated;
//! - per baseline, the row of its records of that repository's tasks.
//!
//! A run without `eval.jsonl` (trained before the file existed) has no
//! breakdown and is left out of it; the overall table is unaffected.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::baseline::{BaselineTask, baseline_row};
use super::stats::MeanCi;
use super::summary::{BaselineRow, COLUMNS, SummaryError, baseline_cells, io, stats_cells, stats_header, write_csv};
use crate::engine::EvalRecord;
use crate::markdown::Table;

/// File names under `results/<study>/`.
pub const SUMMARY_BY_REPO_CSV: &str = "summary_by_repo.csv";
/// The markdown per-repository tables.
pub const SUMMARY_BY_REPO_MD: &str = "summary_by_repo.md";

/// The per-repository columns of a variant, in table order: (key, header).
/// They are the held-out columns that lead [`COLUMNS`] (F_β … turns); a
/// repository's share of the training columns would mean nothing.
pub const REPO_COLUMNS: [(&str, &str); 6] = match COLUMNS.first_chunk() {
    Some(held_out) => *held_out,
    None => panic!("COLUMNS starts with the six held-out columns"),
};

/// One variant's held-out scores on one repository's tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct RepoVariant {
    /// The variant's name.
    pub name: String,
    /// Runs (seeds) that evaluated tasks of the repository.
    pub seeds: usize,
    /// Aligned with [`REPO_COLUMNS`]: mean over seeds with its CI.
    pub stats: Vec<Option<MeanCi>>,
    /// Tasks of the repository each run evaluated at its last eval step
    /// (the largest count when seeds differ).
    pub tasks: usize,
}

/// Every variant and baseline on one repository's held-out tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct RepoSummary {
    /// The repository as the task source names it.
    pub repo: String,
    /// In the study's variant order; variants with no run evaluating this
    /// repository are left out.
    pub variants: Vec<RepoVariant>,
    /// In the order of `baseline_tasks.jsonl`.
    pub baselines: Vec<BaselineRow>,
}

/// Reads a JSON-lines file of `T` (a run's `eval.jsonl`, the study's
/// `baseline_tasks.jsonl`); a missing file reads as `None`.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<Vec<T>>, SummaryError> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SummaryError::Io { path: path.to_owned(), source }),
    };
    let mut rows = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|source| SummaryError::Io { path: path.to_owned(), source })?;
        if line.trim().is_empty() {
            continue;
        }
        rows.push(serde_json::from_str(&line).map_err(|source| SummaryError::Json { path: path.to_owned(), source })?);
    }
    Ok(Some(rows))
}

/// The per-repository breakdown of `variants` (name, then each run's
/// records of its last evaluation) and of `baselines`' per-task records.
/// Repositories come sorted by name.
pub fn breakdown(variants: &[(String, Vec<Vec<EvalRecord>>)], baselines: &[BaselineTask]) -> Vec<RepoSummary> {
    let mut repos: BTreeMap<&str, RepoSummary> = BTreeMap::new();
    for (name, runs) in variants {
        // Per repository: each run's column values and task count.
        let mut per_repo: BTreeMap<&str, (Vec<[f64; 6]>, usize)> = BTreeMap::new();
        for run in runs {
            let mut by_repo: BTreeMap<&str, Vec<&EvalRecord>> = BTreeMap::new();
            for record in run {
                by_repo.entry(record.repo.as_str()).or_default().push(record);
            }
            for (repo, records) in by_repo {
                let slot = per_repo.entry(repo).or_default();
                slot.0.push(columns(&records));
                slot.1 = slot.1.max(records.len());
            }
        }
        for (repo, (values, tasks)) in per_repo {
            let stats =
                (0..REPO_COLUMNS.len()).map(|c| MeanCi::of(&values.iter().map(|v| v[c]).collect::<Vec<_>>())).collect();
            let summary = repos.entry(repo).or_insert_with(|| empty(repo));
            summary.variants.push(RepoVariant { name: name.clone(), seeds: values.len(), stats, tasks });
        }
    }
    // Baselines in the order the file lists them, each split by repository.
    let mut names: Vec<&str> = Vec::new();
    for record in baselines {
        if !names.contains(&record.baseline.as_str()) {
            names.push(&record.baseline);
        }
    }
    for name in names {
        let mut by_repo: BTreeMap<&str, Vec<BaselineTask>> = BTreeMap::new();
        for record in baselines.iter().filter(|r| r.baseline == name) {
            by_repo.entry(record.repo.as_str()).or_default().push(record.clone());
        }
        for (repo, records) in by_repo {
            let summary = repos.entry(repo).or_insert_with(|| empty(repo));
            summary.baselines.push(baseline_row(name.to_owned(), &records));
        }
    }
    repos.into_values().collect()
}

fn empty(repo: &str) -> RepoSummary {
    RepoSummary { repo: repo.to_owned(), variants: Vec::new(), baselines: Vec::new() }
}

/// [`REPO_COLUMNS`] of one run's records of one repository (not empty).
fn columns(records: &[&EvalRecord]) -> [f64; 6] {
    let n = records.len() as f64;
    let mean = |f: fn(&EvalRecord) -> f64| records.iter().map(|r| f(r)).sum::<f64>() / n;
    let mut fb: Vec<f64> = records.iter().map(|r| r.fb).collect();
    fb.sort_by(f64::total_cmp);
    let k = fb.len();
    let median = if k % 2 == 1 { fb[k / 2] } else { 0.5 * (fb[k / 2 - 1] + fb[k / 2]) };
    [
        mean(|r| r.fb),
        median,
        mean(|r| r.precision),
        mean(|r| r.recall),
        mean(|r| f64::from(u8::from(r.fb >= 0.8))),
        mean(|r| r.turns),
    ]
}

/// Writes `summary_by_repo.csv` and `summary_by_repo.md` into `study_dir`.
pub fn write_repo_tables(name: &str, repos: &[RepoSummary], study_dir: &Path) -> Result<(), SummaryError> {
    let header = stats_header(&["repo", "variant", "seeds"], &REPO_COLUMNS, "tasks");
    let mut records = vec![header];
    for r in repos {
        for v in &r.variants {
            let mut record = vec![r.repo.clone(), v.name.clone(), v.seeds.to_string()];
            record.extend(stats_cells(&v.stats));
            record.push(v.tasks.to_string());
            records.push(record);
        }
        for b in &r.baselines {
            let mut record = vec![r.repo.clone(), b.name.clone(), String::new()];
            record.extend(baseline_cells(b));
            // Baselines take no turns.
            record.extend([String::new(), String::new(), b.tasks.to_string()]);
            records.push(record);
        }
    }
    write_csv(&study_dir.join(SUMMARY_BY_REPO_CSV), records)?;

    let md_path = study_dir.join(SUMMARY_BY_REPO_MD);
    fs::write(&md_path, render_repo_markdown(name, repos)).map_err(io(&md_path))
}

/// The markdown breakdown: one table per repository, variants then baselines.
pub fn render_repo_markdown(name: &str, repos: &[RepoSummary]) -> String {
    let mut out = format!("# Study `{name}` by repository\n\n");
    out.push_str(
        "Held-out columns per repository of the held-out tasks, from each run's last evaluation \
         (`eval.jsonl`) and the baselines' per-task records (`baseline_tasks.jsonl`). Cells are the mean over \
         seeds ± the 95% CI half-width (Student t, n − 1 dof); `tasks` is how many of the repository's tasks \
         were evaluated.\n",
    );
    let mut header = vec!["variant".to_string(), "seeds".to_string()];
    header.extend(REPO_COLUMNS.iter().map(|(_, h)| h.to_string()));
    header.push("tasks".to_string());
    for r in repos {
        out.push_str(&format!("\n## `{}`\n\n", r.repo));
        let mut table = Table::new(&header);
        for v in &r.variants {
            let mut cells = vec![v.name.clone(), v.seeds.to_string()];
            for (s, (key, _)) in v.stats.iter().zip(REPO_COLUMNS) {
                let decimals = if key == "turns" { 1 } else { 3 };
                cells.push(s.map_or("–".to_string(), |s| s.display(decimals)));
            }
            cells.push(v.tasks.to_string());
            table.row(cells);
        }
        for b in &r.baselines {
            let mut cells = vec![b.name.clone(), "–".to_string()];
            cells.extend(b.held_out().iter().map(|x| format!("{x:.3}")));
            cells.extend(["–".to_string(), b.tasks.to_string()]);
            table.row(cells);
        }
        out.push_str(&table.finish());
    }
    out
}
