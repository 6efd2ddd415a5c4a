//! A finished (or partly finished) study's results, read back from disk:
//! `manifest.json` (written before the runs start), each run's `metrics.csv`,
//! and baseline rows (`baseline_bm25.csv`: the file keeps the name it had when
//! BM25 was the only baseline, and holds every baseline's row, the grep
//! heuristic's included). Reading from disk rather than from memory lets a
//! later `study merge` summarise runs that ran elsewhere.
//!
//! The per-task records (each run's `eval.jsonl`, the study's
//! `baseline_tasks.jsonl`) feed the per-repository tables ([`super::by_repo`]);
//! a study without them (trained before they existed) still summarises.
//!
//! Per run, the held-out columns come from the last evaluated row of
//! `metrics.csv` (the engine evaluates on the last step), and the training
//! columns (reward, KL, completion length, clip ratio) from the last row.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::baseline::BaselineTask;
use super::by_repo::{self, RepoSummary};
use super::load::{RunSpec, Study};
use super::paired::{self, PairedDiff};
use super::stats::MeanCi;
use crate::engine::alerts::read_alerts;
use crate::engine::{ALERTS_FILE, EvalRecord, FiredAlert, MetricsRow};
use crate::markdown::Table;

/// File names under `results/<study>/`: the [`Manifest`].
pub const MANIFEST_FILE: &str = "manifest.json";
/// Every baseline's row ([`BaselineRow`]); named when BM25 was the only one.
pub const BASELINE_FILE: &str = "baseline_bm25.csv";
/// The baselines' per-task records ([`BaselineTask`], one JSON line each).
pub const BASELINE_TASKS_FILE: &str = "baseline_tasks.jsonl";
/// The overall table as CSV.
pub const SUMMARY_CSV: &str = "summary.csv";
/// The overall table as markdown.
pub const SUMMARY_MD: &str = "summary.md";
/// The paired differences against the reference variant, one row per variant and metric.
pub const SUMMARY_PAIRED_CSV: &str = "summary_paired.csv";

/// What the runner records before training: enough to summarise without the study file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The study's name.
    pub name: String,
    /// The held-out precision a variant must reach to pass.
    pub precision_gate: f64,
    /// The k of the BM25 top-k baseline.
    pub bm25_k: usize,
    /// Variant names in study order.
    pub variants: Vec<String>,
    /// Every run of the study.
    pub runs: Vec<ManifestRun>,
    /// The reference of the paired differences (`[summary] reference`; `None`: the first variant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// One run of a [`Manifest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ManifestRun {
    /// The run's variant name.
    pub variant: String,
    /// Which of the study's seeds (0-based).
    pub seed_index: usize,
    /// The engine seed.
    pub seed: u64,
    /// Relative to the study directory.
    pub dir: PathBuf,
}

/// A baseline's held-out scores (one row of `baseline_bm25.csv`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineRow {
    /// The row's name (`BM25 top-2`, `grep heuristic top-1`).
    pub name: String,
    /// File-level F_β (β = 0.5), mean over tasks.
    pub fb_mean: f64,
    /// File-level F_β, median over tasks.
    pub fb_median: f64,
    /// File-level precision, mean over tasks.
    pub precision: f64,
    /// File-level recall, mean over tasks.
    pub recall: f64,
    /// Share of tasks with F_β ≥ 0.8.
    pub fb_ge_0_8: f64,
    /// Tasks scored.
    pub tasks: usize,
}

/// The summary columns, in table order: (key, header).
pub const COLUMNS: [(&str, &str); 10] = [
    ("fb_mean", "F_β mean"),
    ("fb_median", "F_β median"),
    ("precision", "precision"),
    ("recall", "recall"),
    ("fb_ge_0_8", "F_β ≥ 0.8"),
    ("turns", "turns"),
    ("reward", "final reward"),
    ("kl", "KL"),
    ("completion_len", "completion len"),
    ("clip_ratio", "clip ratio"),
];

/// One run's metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// Which of the study's seeds (0-based).
    pub seed_index: usize,
    /// Its `metrics.csv` rows.
    pub rows: Vec<MetricsRow>,
}

/// One variant: its runs and the per-column statistics over seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantSummary {
    /// The variant's name.
    pub name: String,
    /// Its runs with metrics, in manifest order.
    pub runs: Vec<RunResult>,
    /// Aligned with [`COLUMNS`]; `None` where no run has the value.
    pub stats: Vec<Option<MeanCi>>,
    /// Whether the mean held-out precision reaches the gate (`None` without an evaluation).
    pub passes_gate: Option<bool>,
}

/// Everything the tables and plots show.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The study's name.
    pub name: String,
    /// The held-out precision a variant must reach to pass.
    pub precision_gate: f64,
    /// In study order.
    pub variants: Vec<VariantSummary>,
    /// In the order of `baseline_bm25.csv`.
    pub baselines: Vec<BaselineRow>,
    /// The held-out table per repository (empty when no run or baseline left
    /// per-task records).
    pub by_repo: Vec<RepoSummary>,
    /// Runs of the manifest with no `metrics.csv` yet (not started or failed early).
    pub missing: Vec<PathBuf>,
    /// Every alert the runs fired (their `alerts.csv`), by variant and seed, in step order.
    pub alerts: Vec<RunAlert>,
    /// The variant the paired differences compare with (the first when the study names none).
    pub reference: Option<String>,
    /// Every other variant minus the reference, per seed index ([`super::paired`]).
    pub paired: Vec<PairedDiff>,
    /// Variants not trained because an earlier one is proved equivalent (`merged.json`).
    pub merged: Vec<super::equiv::MergedVariant>,
    /// Each trained variant against each shadow variant (runs' `shadow.csv`; empty without shadows).
    pub shadow: Vec<super::shadow::ShadowPair>,
    /// Each variant's time per step by phase (runs' `timings.csv`; written to `phases.md`, not
    /// to `summary.md`, whose results a rerun reproduces).
    pub phases: Vec<super::phases::PhaseRow>,
}

/// An alert a run fired, for the summary's list.
#[derive(Clone, Debug, PartialEq)]
pub struct RunAlert {
    /// The run's variant.
    pub variant: String,
    /// The run's seed index.
    pub seed_index: usize,
    /// The `alerts.csv` row.
    pub fired: FiredAlert,
}

/// Reading results failed.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    /// Reading or writing the file at `path`.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A CSV file at `path` is malformed or cannot be written.
    #[error("{}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: csv::Error,
    },
    /// A JSON (or JSON-lines) file at `path` is malformed or cannot be written.
    #[error("{}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Drawing the plot at `path` failed.
    #[error("plotting {path}: {message}")]
    Plot {
        /// The plot's file.
        path: PathBuf,
        /// What the plotting library said.
        message: String,
    },
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SummaryError + '_ {
    move |source| SummaryError::Io { path: path.to_owned(), source }
}

/// Writes `records` as the CSV file at `path`: how every study table is
/// written. Records that are structs get a header of their field names;
/// rows of cells carry their own header as the first row.
pub(super) fn write_csv<T: Serialize>(path: &Path, records: impl IntoIterator<Item = T>) -> Result<(), SummaryError> {
    let csv_err = |source| SummaryError::Csv { path: path.to_owned(), source };
    let mut w = csv::Writer::from_path(path).map_err(csv_err)?;
    for record in records {
        w.serialize(record).map_err(csv_err)?;
    }
    w.flush().map_err(io(path))
}

/// The header of a CSV table of statistics over seeds: `lead`, a `<key>_mean`
/// and a `<key>_ci95` column per entry of `columns`, then `tail`.
pub(super) fn stats_header(lead: &[&str], columns: &[(&str, &str)], tail: &str) -> Vec<String> {
    let mut header: Vec<String> = lead.iter().map(|c| c.to_string()).collect();
    for (key, _) in columns {
        header.push(format!("{key}_mean"));
        header.push(format!("{key}_ci95"));
    }
    header.push(tail.to_string());
    header
}

/// The CSV cells of statistics over seeds: each mean and CI half-width, empty where there is none.
pub(super) fn stats_cells(stats: &[Option<MeanCi>]) -> impl Iterator<Item = String> + '_ {
    stats.iter().flat_map(|s| [cell(s.map(|s| s.mean)), cell(s.and_then(|s| s.half_width))])
}

/// The CSV cells of a baseline's held-out values, each with an empty CI (a baseline has no seeds).
pub(super) fn baseline_cells(b: &BaselineRow) -> impl Iterator<Item = String> {
    b.held_out().into_iter().flat_map(|x| [cell(Some(x)), String::new()])
}

/// A CSV number cell, empty for none.
fn cell(x: Option<f64>) -> String {
    x.map_or(String::new(), |x| format!("{x}"))
}

impl Summary {
    /// Compares every variant with `reference` in the paired differences instead of the
    /// study's reference; false (nothing changed) when no variant has that name.
    pub fn set_reference(&mut self, reference: &str) -> bool {
        if !self.variants.iter().any(|v| v.name == reference) {
            return false;
        }
        self.paired = paired::paired_differences(&self.variants, reference);
        self.reference = Some(reference.to_owned());
        true
    }
}

impl BaselineRow {
    /// The first five held-out columns ([`COLUMNS`], [`super::by_repo::REPO_COLUMNS`]):
    /// F_β mean and median, precision, recall and the share with F_β ≥ 0.8.
    pub fn held_out(&self) -> [f64; 5] {
        [self.fb_mean, self.fb_median, self.precision, self.recall, self.fb_ge_0_8]
    }
}

impl Manifest {
    /// The manifest of `runs` of `study`.
    pub fn new(study: &Study, runs: &[RunSpec]) -> Manifest {
        Manifest {
            name: study.name.clone(),
            precision_gate: study.summary.precision_gate,
            bm25_k: study.summary.bm25_k,
            reference: study.summary.reference.clone(),
            variants: study.variants.iter().map(|v| v.name.clone()).collect(),
            runs: runs
                .iter()
                .map(|r| ManifestRun {
                    variant: r.variant_name.clone(),
                    seed_index: r.seed_index,
                    seed: r.seed,
                    dir: r.dir.clone(),
                })
                .collect(),
        }
    }

    /// Writes `manifest.json` into `study_dir` (see [`super::publish::write_manifest`] for concurrent runners).
    pub fn write(&self, study_dir: &Path) -> Result<(), SummaryError> {
        fs::create_dir_all(study_dir).map_err(io(study_dir))?;
        let path = study_dir.join(MANIFEST_FILE);
        let json =
            serde_json::to_string_pretty(self).map_err(|source| SummaryError::Json { path: path.clone(), source })?;
        fs::write(&path, json + "\n").map_err(io(&path))
    }

    /// Reads `manifest.json` from `study_dir`.
    pub fn read(study_dir: &Path) -> Result<Manifest, SummaryError> {
        let path = study_dir.join(MANIFEST_FILE);
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        serde_json::from_str(&text).map_err(|source| SummaryError::Json { path, source })
    }
}

/// Reads a run's `metrics.csv`.
pub fn read_metrics(path: &Path) -> Result<Vec<MetricsRow>, SummaryError> {
    let csv_err = |source| SummaryError::Csv { path: path.to_owned(), source };
    let mut reader = csv::Reader::from_path(path).map_err(csv_err)?;
    reader.deserialize().collect::<Result<Vec<MetricsRow>, _>>().map_err(csv_err)
}

/// Writes baseline rows (`baseline_bm25.csv`).
pub fn write_baselines(study_dir: &Path, rows: &[BaselineRow]) -> Result<(), SummaryError> {
    write_csv(&study_dir.join(BASELINE_FILE), rows)
}

/// Writes the baselines' per-task records (`baseline_tasks.jsonl`).
pub fn write_baseline_records(study_dir: &Path, records: &[BaselineTask]) -> Result<(), SummaryError> {
    let path = study_dir.join(BASELINE_TASKS_FILE);
    let mut text = Vec::new();
    for record in records {
        serde_json::to_writer(&mut text, record).map_err(|source| SummaryError::Json { path: path.clone(), source })?;
        text.push(b'\n');
    }
    fs::write(&path, text).map_err(io(&path))
}

/// Reads the manifest, every run's metrics and the baselines under `study_dir`.
pub fn summarize(study_dir: &Path) -> Result<Summary, SummaryError> {
    let manifest = Manifest::read(study_dir)?;
    let mut variants = Vec::new();
    let mut records: Vec<(String, Vec<Vec<EvalRecord>>)> = Vec::new();
    let mut missing = Vec::new();
    let mut alerts = Vec::new();
    for name in &manifest.variants {
        let mut runs = Vec::new();
        let mut evals = Vec::new();
        for run in manifest.runs.iter().filter(|r| &r.variant == name) {
            let path = study_dir.join(&run.dir).join(crate::engine::METRICS_FILE);
            if !path.exists() {
                missing.push(path);
                continue;
            }
            let rows = read_metrics(&path)?;
            // The records of the evaluation the overall table reads, so the
            // repositories' rows add up to the run's.
            let last_eval = rows.iter().rev().find(|r| r.eval_fb_mean.is_some()).map(|r| r.step);
            let eval_path = study_dir.join(&run.dir).join(crate::engine::EVAL_FILE);
            if let (Some(step), Some(run_records)) = (last_eval, by_repo::read_jsonl::<EvalRecord>(&eval_path)?) {
                evals.push(run_records.into_iter().filter(|r| r.step == step).collect());
            }
            let alerts_path = study_dir.join(&run.dir).join(ALERTS_FILE);
            let fired = read_alerts(&alerts_path).map_err(|source| SummaryError::Csv { path: alerts_path, source })?;
            alerts.extend(fired.into_iter().map(|fired| RunAlert {
                variant: name.clone(),
                seed_index: run.seed_index,
                fired,
            }));
            runs.push(RunResult { seed_index: run.seed_index, rows });
        }
        records.push((name.clone(), evals));
        let per_run: Vec<[Option<f64>; 10]> = runs.iter().map(|r| final_values(&r.rows)).collect();
        let stats: Vec<Option<MeanCi>> =
            (0..COLUMNS.len()).map(|c| MeanCi::of(&per_run.iter().filter_map(|v| v[c]).collect::<Vec<_>>())).collect();
        let passes_gate = stats[2].map(|p| p.mean >= manifest.precision_gate);
        variants.push(VariantSummary { name: name.clone(), runs, stats, passes_gate });
    }
    let baseline_path = study_dir.join(BASELINE_FILE);
    let baselines = if baseline_path.exists() {
        let csv_err = |source| SummaryError::Csv { path: baseline_path.clone(), source };
        let mut reader = csv::Reader::from_path(&baseline_path).map_err(csv_err)?;
        reader.deserialize().collect::<Result<Vec<BaselineRow>, _>>().map_err(csv_err)?
    } else {
        Vec::new()
    };
    let baseline_tasks = by_repo::read_jsonl::<BaselineTask>(&study_dir.join(BASELINE_TASKS_FILE))?.unwrap_or_default();
    let by_repo = by_repo::breakdown(&records, &baseline_tasks);
    let reference = manifest.reference.clone().or_else(|| manifest.variants.first().cloned());
    let paired = reference.as_deref().map_or_else(Vec::new, |r| paired::paired_differences(&variants, r));
    let merged = super::equiv::read_merged(study_dir)?;
    let shadow = super::shadow::read_pairs(study_dir, &manifest)?;
    let phases = super::phases::phase_split(study_dir, &manifest)?;
    Ok(Summary {
        name: manifest.name,
        precision_gate: manifest.precision_gate,
        variants,
        baselines,
        by_repo,
        missing,
        alerts,
        reference,
        paired,
        merged,
        shadow,
        phases,
    })
}

/// A run's values of [`COLUMNS`].
fn final_values(rows: &[MetricsRow]) -> [Option<f64>; 10] {
    let eval = rows.iter().rev().find(|r| r.eval_fb_mean.is_some());
    let last = rows.last();
    [
        eval.and_then(|r| r.eval_fb_mean),
        eval.and_then(|r| r.eval_fb_median),
        eval.and_then(|r| r.eval_precision),
        eval.and_then(|r| r.eval_recall),
        eval.and_then(|r| r.eval_fb_ge_0_8),
        eval.and_then(|r| r.eval_turns),
        last.map(|r| r.reward_mean),
        last.map(|r| r.kl),
        last.map(|r| r.completion_len),
        last.map(|r| r.clip_ratio),
    ]
}

/// Writes `summary.csv` and `summary.md`, `summary_by_repo.{csv,md}`
/// when there are per-task records to break down, and `phases.{csv,md}` when
/// runs have timings.
pub fn write_tables(summary: &Summary, study_dir: &Path) -> Result<(), SummaryError> {
    fs::create_dir_all(study_dir).map_err(io(study_dir))?;
    let header = stats_header(&["variant", "seeds"], &COLUMNS, "precision_gate");
    let variants = summary.variants.iter().map(|v| {
        let mut record = vec![v.name.clone(), v.runs.len().to_string()];
        record.extend(stats_cells(&v.stats));
        record.push(v.passes_gate.map_or(String::new(), |p| if p { "pass" } else { "fail" }.to_string()));
        // A merged variant's row says which variant stands for it (equiv).
        if let Some(text) = merged_cell(summary, &v.name) {
            *record.last_mut().expect("the gate cell") = text;
        }
        record
    });
    let baselines = summary.baselines.iter().map(|b| {
        let mut record = vec![b.name.clone(), String::new()];
        record.extend(baseline_cells(b));
        record.extend(std::iter::repeat_n(String::new(), 2 * (COLUMNS.len() - 5)));
        record.push(if b.precision >= summary.precision_gate { "pass" } else { "fail" }.to_string());
        record
    });
    write_csv(&study_dir.join(SUMMARY_CSV), std::iter::once(header).chain(variants).chain(baselines))?;

    if !summary.paired.is_empty() {
        write_csv(&study_dir.join(SUMMARY_PAIRED_CSV), &summary.paired)?;
    }
    let md_path = study_dir.join(SUMMARY_MD);
    fs::write(&md_path, render_markdown(summary)).map_err(io(&md_path))?;
    if !summary.by_repo.is_empty() {
        by_repo::write_repo_tables(&summary.name, &summary.by_repo, study_dir)?;
    }
    super::phases::write(study_dir, &summary.name, &summary.phases)
}

/// The text standing in a merged variant's row: `= grpo (proved: positive scaling (×2))`.
fn merged_cell(summary: &Summary, variant: &str) -> Option<String> {
    let m = summary.merged.iter().find(|m| m.variant == variant)?;
    Some(format!("= {} ({})", m.into, m.reason))
}

/// The markdown summary: one row per variant, then the baselines.
pub fn render_markdown(summary: &Summary) -> String {
    let mut out = format!("# Study `{}`\n\n", summary.name);
    out.push_str(
        "Held-out columns (F_β … turns) come from each run's last evaluation; training columns from its last \
         step. Cells are the mean over seeds ± the 95% CI half-width (Student t, n − 1 dof).\n\n",
    );
    let mut header = vec!["variant".to_string(), "seeds".to_string()];
    header.extend(COLUMNS.iter().map(|(_, h)| h.to_string()));
    header.push(format!("precision ≥ {}", summary.precision_gate));
    let mut table = Table::new(header);
    let gate = |p: Option<bool>| match p {
        Some(true) => "pass",
        Some(false) => "fail",
        None => "–",
    };
    for v in &summary.variants {
        // A merged variant: no runs of its own, the proof in its row (equiv).
        if let Some(text) = merged_cell(summary, &v.name) {
            let mut cells = vec![v.name.clone(), text];
            cells.extend(std::iter::repeat_n("–".to_string(), COLUMNS.len() + 1));
            table.row(cells);
            continue;
        }
        let mut cells = vec![v.name.clone(), v.runs.len().to_string()];
        for (s, (key, _)) in v.stats.iter().zip(COLUMNS) {
            let decimals = if matches!(key, "completion_len" | "turns") { 1 } else { 3 };
            cells.push(s.map_or("–".to_string(), |s| s.display(decimals)));
        }
        cells.push(gate(v.passes_gate).to_string());
        table.row(cells);
    }
    for b in &summary.baselines {
        let mut cells = vec![b.name.clone(), "–".to_string()];
        cells.extend(b.held_out().iter().map(|x| format!("{x:.3}")));
        cells.extend(std::iter::repeat_n("–".to_string(), COLUMNS.len() - 5));
        cells.push(gate(Some(b.precision >= summary.precision_gate)).to_string());
        table.row(cells);
    }
    out.push_str(&table.finish());
    if let Some(reference) = &summary.reference {
        out.push_str(&paired::render_markdown(&summary.paired, reference));
    }
    if !summary.by_repo.is_empty() {
        out.push_str(&format!(
            "\nPer repository ({} of them): `{}`.\n",
            summary.by_repo.len(),
            by_repo::SUMMARY_BY_REPO_MD
        ));
    }
    if !summary.phases.is_empty() {
        out.push_str(&format!(
            "\nTime per step by phase (wall clock, so it varies between runs): `{}`.\n",
            super::phases::PHASES_MD
        ));
    }
    if !summary.alerts.is_empty() {
        out.push_str(&format!(
            "\n## Alerts\n\n{} alert(s) fired (each run's `{ALERTS_FILE}`):\n\n",
            summary.alerts.len()
        ));
        let mut table = Table::new(["variant", "seed", "step", "held", "condition", "message"]);
        for a in &summary.alerts {
            let f = &a.fired;
            let cell = |s: &str| s.replace('|', "\\|");
            table.row([
                a.variant.clone(),
                a.seed_index.to_string(),
                f.step.to_string(),
                f.held.to_string(),
                format!("`{}`", cell(&f.condition)),
                cell(&f.message),
            ]);
        }
        out.push_str(&table.finish());
    }
    out.push_str(&super::shadow::render(&summary.shadow));
    if !summary.missing.is_empty() {
        out.push_str(&format!("\n{} run(s) have no metrics yet:\n\n", summary.missing.len()));
        for m in &summary.missing {
            out.push_str(&format!("- `{}`\n", m.display()));
        }
    }
    out
}
