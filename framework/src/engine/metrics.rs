//! Per-step metrics: `metrics.csv` (deterministic: the same seed gives the
//! same bytes whatever the thread count) and `timings.csv` (wall-clock seconds
//! per phase, which never repeat, kept apart so the first file can be
//! compared byte for byte). Rows are written and flushed as each step
//! completes, so a killed run loses no completed row.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::EngineError;

/// One training step's row of `metrics.csv`. Means are over the step's
/// rollouts unless named otherwise; `eval_*` columns are empty except on eval steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsRow {
    /// 1-based: the number of optimiser updates of the policy after this row.
    pub step: usize,
    /// The scheduled learning rate of the step.
    pub lr: f64,
    /// The loss, mean over the step's optimiser updates.
    pub loss: f64,
    /// Mean of the reward program's `reward` output.
    pub reward_mean: f64,
    /// Population standard deviation of `reward` over the step's rollouts.
    pub reward_std: f64,
    /// The `advantage` output (what the loss uses).
    pub advantage_mean: f64,
    /// Population standard deviation of `advantage` over the step's rollouts.
    pub advantage_std: f64,
    /// Share of groups whose rewards are all equal (no learning signal under GRPO).
    pub zero_std_groups: f64,
    /// Mean KL estimate per unit (the configured estimator), mean over the step's optimiser updates.
    pub kl: f64,
    /// Share of units whose gradient the ratio clip removed (mean over the step's optimiser updates).
    pub clip_ratio: f64,
    /// Optimiser updates of the step: `epochs × minibatches`. With more than one, every update
    /// after the first sees a policy that moved since sampling, so the ratio leaves 1.
    pub updates: usize,
    /// The mean KL estimate of the step's last update (the pass furthest from the sampling policy).
    pub kl_last: f64,
    /// The clip ratio of the step's last update (0 with a single on-policy update).
    pub clip_ratio_last: f64,
    /// Mean of the policy's per-episode mean unit entropy.
    pub entropy: f64,
    /// Global gradient norm before clipping (mean over the step's optimiser updates).
    pub grad_norm: f64,
    /// Mean units (decisions or tokens) per rollout.
    pub units: f64,
    /// Feature `T`.
    pub turns: f64,
    /// Feature `c` (calls per turn).
    pub c: f64,
    /// Feature `C` (calls per rollout).
    pub calls: f64,
    /// Feature `len`.
    pub completion_len: f64,
    /// Mean `len` of the step's wrong rollouts (file F_β = 0); empty when none was wrong.
    /// Under `seq-mean-token-mean` a wrong answer's units weigh less the longer it is,
    /// so this is where a length bias of the loss aggregation shows first (Dr. GRPO).
    pub wrong_len: Option<f64>,
    /// Share of rollouts whose answer parsed (feature `valid`).
    pub valid_rate: f64,
    /// Share of rollouts that ran out of turns or tokens (feature `truncated`).
    pub truncated_rate: f64,
    /// Feature `Fb(file)` at the schema's default β (0.5).
    pub fb_file: f64,
    /// Feature `P(file)`, file-level precision.
    pub precision_file: f64,
    /// Feature `R(file)`, file-level recall.
    pub recall_file: f64,
    /// Feature `e` (tool efficiency).
    pub e: f64,
    /// Tool calls of the step that ended in an error result.
    pub tool_errors: usize,
    /// Tool calls of the step that timed out.
    pub tool_timeouts: usize,
    // Held-out evaluation after the step's update (empty on other steps). The
    // columns are inline rather than a flattened struct: the csv crate cannot
    // serialise serde's flattened maps.
    /// Mean `Fb(file)` over the held-out rollouts.
    pub eval_fb_mean: Option<f64>,
    /// Median `Fb(file)` over the held-out rollouts (the mean of the middle two for an even count).
    pub eval_fb_median: Option<f64>,
    /// Mean `P(file)` over the held-out rollouts.
    pub eval_precision: Option<f64>,
    /// Mean `R(file)` over the held-out rollouts.
    pub eval_recall: Option<f64>,
    /// Share of held-out rollouts with `Fb(file) ≥ 0.8`.
    pub eval_fb_ge_0_8: Option<f64>,
    /// Mean turns of the held-out rollouts.
    pub eval_turns: Option<f64>,
}

/// Wall-clock seconds of one step's phases (`timings.csv`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// The step, 1-based, as in `metrics.csv`.
    pub step: usize,
    /// Policy time during rollouts (begin, act, observe), tools excluded.
    pub rollout_s: f64,
    /// Opening the rollouts' trees and waiting for the sandbox's tool calls (before session 36,
    /// opening the trees counted as `rollout_s`).
    pub tools_s: f64,
    /// Features and the reward program.
    pub reward_s: f64,
    /// Log-probs, loss, backward and optimiser step.
    pub update_s: f64,
    /// Held-out evaluation (0 on other steps).
    pub eval_s: f64,
    /// Scoring the rollouts with the shadow variants (0 without shadows; issue 17).
    pub shadow_s: f64,
    /// The part of `eval_s` spent waiting for the held-out episodes' tool calls (so the tools'
    /// whole share of a step is `tools_s + eval_tools_s`). Absent (0) in files written before it.
    #[serde(default)]
    pub eval_tools_s: f64,
}

/// The column names of `metrics.csv`, in order.
pub fn metrics_header() -> Vec<&'static str> {
    vec![
        "step",
        "lr",
        "loss",
        "reward_mean",
        "reward_std",
        "advantage_mean",
        "advantage_std",
        "zero_std_groups",
        "kl",
        "clip_ratio",
        "updates",
        "kl_last",
        "clip_ratio_last",
        "entropy",
        "grad_norm",
        "units",
        "turns",
        "c",
        "calls",
        "completion_len",
        "wrong_len",
        "valid_rate",
        "truncated_rate",
        "fb_file",
        "precision_file",
        "recall_file",
        "e",
        "tool_errors",
        "tool_timeouts",
        "eval_fb_mean",
        "eval_fb_median",
        "eval_precision",
        "eval_recall",
        "eval_fb_ge_0_8",
        "eval_turns",
    ]
}

/// The column names of `timings.csv`, in order.
pub fn timings_header() -> Vec<&'static str> {
    vec!["step", "rollout_s", "tools_s", "reward_s", "update_s", "eval_s", "shadow_s", "eval_tools_s"]
}

/// Appends rows to a CSV file, flushing after each.
pub(crate) struct CsvLog {
    path: PathBuf,
    writer: csv::Writer<File>,
}

impl CsvLog {
    /// Creates (truncating) `path` and writes the header.
    pub fn create(path: &Path, header: &[&str]) -> Result<CsvLog, EngineError> {
        let file = File::create(path).map_err(|e| EngineError::io(path, e))?;
        let mut log = CsvLog::wrap(path, file);
        log.writer.write_record(header).map_err(|source| EngineError::Csv { path: path.to_owned(), source })?;
        log.flush()?;
        Ok(log)
    }

    /// Opens `path` for appending rows (its header is already there).
    pub fn append(path: &Path) -> Result<CsvLog, EngineError> {
        let file = OpenOptions::new().append(true).open(path).map_err(|e| EngineError::io(path, e))?;
        Ok(CsvLog::wrap(path, file))
    }

    fn wrap(path: &Path, file: File) -> CsvLog {
        CsvLog { path: path.to_owned(), writer: csv::WriterBuilder::new().has_headers(false).from_writer(file) }
    }

    pub fn write<T: Serialize>(&mut self, row: &T) -> Result<(), EngineError> {
        self.writer.serialize(row).map_err(|source| EngineError::Csv { path: self.path.clone(), source })?;
        self.flush()
    }

    fn flush(&mut self) -> Result<(), EngineError> {
        self.writer.flush().map_err(|e| EngineError::io(&self.path, e))
    }
}

/// Appends JSON lines, flushing after each batch.
pub(crate) struct JsonlLog {
    path: PathBuf,
    file: File,
}

impl JsonlLog {
    pub fn open(path: &Path, truncate_to: Option<u64>) -> Result<JsonlLog, EngineError> {
        let file = match truncate_to {
            None => File::create(path),
            Some(len) => OpenOptions::new().write(true).create(true).truncate(false).open(path).and_then(|f| {
                f.set_len(len)?;
                Ok(f)
            }),
        }
        .map_err(|e| EngineError::io(path, e))?;
        let mut log = JsonlLog { path: path.to_owned(), file };
        use std::io::Seek;
        log.file.seek(std::io::SeekFrom::End(0)).map_err(|e| EngineError::io(path, e))?;
        Ok(log)
    }

    /// Writes `rows` and returns the bytes written.
    pub fn write_all<T: Serialize>(&mut self, rows: &[T]) -> Result<u64, EngineError> {
        let mut text = Vec::new();
        for row in rows {
            serde_json::to_writer(&mut text, row)
                .map_err(|source| EngineError::Json { path: self.path.clone(), source })?;
            text.push(b'\n');
        }
        self.file.write_all(&text).and_then(|()| self.file.flush()).map_err(|e| EngineError::io(&self.path, e))?;
        Ok(text.len() as u64)
    }
}

/// Population mean and standard deviation (0 and 0 for no values).
pub(crate) fn mean_std(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The mean (0 for no values).
pub(crate) fn mean(values: &[f64]) -> f64 {
    mean_std(values).0
}

/// The median (the mean of the middle two for an even count; `None` when empty).
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    Some(if n % 2 == 1 { sorted[n / 2] } else { 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_the_serialised_fields() {
        let mut w = csv::WriterBuilder::new().has_headers(true).from_writer(Vec::new());
        w.serialize(MetricsRow::default()).expect("serialise");
        let text = String::from_utf8(w.into_inner().expect("flush")).expect("utf-8");
        assert_eq!(text.lines().next(), Some(metrics_header().join(",").as_str()));
        let mut w = csv::WriterBuilder::new().has_headers(true).from_writer(Vec::new());
        w.serialize(Timings::default()).expect("serialise");
        let text = String::from_utf8(w.into_inner().expect("flush")).expect("utf-8");
        assert_eq!(text.lines().next(), Some(timings_header().join(",").as_str()));
    }

    #[test]
    fn eval_columns_are_empty_off_eval_steps() {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        w.serialize(MetricsRow { step: 3, ..MetricsRow::default() }).expect("serialise");
        let text = String::from_utf8(w.into_inner().expect("flush")).expect("utf-8");
        assert!(text.trim_end().ends_with(",0,0,,,,,,"), "{text}");
    }

    #[test]
    fn summary_statistics() {
        assert_eq!(mean_std(&[1.0, 3.0]), (2.0, 1.0));
        assert_eq!(mean_std(&[]), (0.0, 0.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
