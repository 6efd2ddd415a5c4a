//! The record phase of a step: its `metrics.csv` row (deterministic), its
//! `timings.csv` row (wall clock), its held-out records (`eval.jsonl`,
//! deterministic), the logged rollouts, and the checkpoint when one is due.
//! [`outcome`] builds the rows without writing; [`Engine::record`] writes them.
//!
//! A resumed run continues from its checkpoint's step `n`, so every file must
//! hold exactly the rows of steps `1..=n` again: `metrics.csv` and
//! `timings.csv` are restored from the checkpoint's copies, `rollouts.jsonl`
//! is cut at the byte length the checkpoint recorded, and `eval.jsonl` keeps
//! its lines whose `step` is at most `n` (rows of a step are complete before
//! its checkpoint is written, so only rows a killed run wrote after the
//! checkpoint, and a line it left half-written, go).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use rewardlab_models::agent::Policy;

use super::alerts::{ALERTS_FILE, alerts_header};
use super::checkpoint::{self, EngineState};
use super::error::{EngineError, Phase};
use super::evaluate::Evaluation;
use super::metrics::{self, CsvLog, JsonlLog, mean, mean_std};
use super::rollout::RolloutBatch;
use super::score::Scores;
use super::update::UpdateStats;
use super::{
    EVAL_FILE, Engine, LoggedRollout, METRICS_FILE, MetricsRow, ROLLOUTS_FILE, StepOutcome, TIMINGS_FILE, Timings,
};

/// The run's open log files.
pub(super) struct Logs {
    pub dir: PathBuf,
    pub metrics: CsvLog,
    pub timings: CsvLog,
    pub eval: JsonlLog,
    pub rollouts: Option<JsonlLog>,
    pub rollouts_bytes: u64,
    /// `alerts.csv`, when the variant declares alerts.
    pub alerts: Option<CsvLog>,
}

/// Mean completion length of the rollouts whose file F_β is 0; `None` when there are none.
fn wrong_len(len: &[f64], fb: &[f64]) -> Option<f64> {
    let wrong: Vec<f64> = len.iter().zip(fb).filter(|(_, f)| **f == 0.0).map(|(l, _)| *l).collect();
    (!wrong.is_empty()).then(|| mean(&wrong))
}

/// The rows of step `step_no` from what its phases produced. The rollouts are
/// kept (for `rollouts.jsonl`) only when `log_rollouts`.
pub(super) fn outcome<E>(
    step_no: usize,
    batch: RolloutBatch<E>,
    scores: Scores,
    update: UpdateStats,
    eval: Evaluation,
    log_rollouts: bool,
) -> StepOutcome {
    let summary = &scores.summary;
    let (reward_mean, reward_std) = mean_std(&scores.reward);
    let (advantage_mean, advantage_std) = mean_std(&scores.advantage);
    let mut metrics = MetricsRow {
        step: step_no,
        lr: update.lr,
        loss: update.loss,
        reward_mean,
        reward_std,
        advantage_mean,
        advantage_std,
        zero_std_groups: scores.zero_std_groups,
        kl: update.kl,
        clip_ratio: update.clip_ratio,
        updates: update.updates,
        kl_last: update.kl_last,
        clip_ratio_last: update.clip_ratio_last,
        entropy: update.entropy,
        grad_norm: update.grad_norm,
        units: update.units,
        turns: mean(&summary.turns),
        c: mean(&summary.c),
        calls: mean(&summary.calls),
        completion_len: mean(&summary.len),
        wrong_len: wrong_len(&summary.len, &summary.fb),
        valid_rate: mean(&summary.valid),
        truncated_rate: mean(&summary.truncated),
        fb_file: mean(&summary.fb),
        precision_file: mean(&summary.precision),
        recall_file: mean(&summary.recall),
        e: mean(&summary.e),
        tool_errors: batch.tool_errors,
        tool_timeouts: batch.tool_timeouts,
        ..MetricsRow::default()
    };
    if let Some(columns) = eval.columns {
        metrics.eval_fb_mean = Some(columns.fb_mean);
        metrics.eval_fb_median = columns.fb_median;
        metrics.eval_precision = Some(columns.precision);
        metrics.eval_recall = Some(columns.recall);
        metrics.eval_fb_ge_0_8 = Some(columns.fb_ge_0_8);
        metrics.eval_turns = Some(columns.turns);
    }
    let timings = Timings {
        step: step_no,
        rollout_s: batch.policy_seconds,
        tools_s: batch.tool_seconds,
        reward_s: scores.seconds,
        update_s: update.seconds,
        eval_s: eval.seconds,
        shadow_s: 0.0,
        eval_tools_s: eval.tool_seconds,
    };
    let rollouts = if log_rollouts {
        batch
            .records
            .into_iter()
            .enumerate()
            .map(|(i, rollout)| LoggedRollout {
                step: step_no,
                rollout,
                reward: scores.reward[i],
                adv: scores.adv[i],
                advantage: scores.advantage[i],
            })
            .collect()
    } else {
        Vec::new()
    };
    StepOutcome { metrics, timings, eval: eval.records, rollouts, alerts: Vec::new(), shadow: Vec::new() }
}

impl<P: Policy> Engine<P> {
    /// Writes the step's rows (flushed) and, every `checkpoint_every` steps and
    /// at the last, its checkpoint; returns the checkpoint's directory.
    pub(super) fn record(&mut self, outcome: &StepOutcome) -> Result<Option<PathBuf>, EngineError> {
        let logs = self.logs.as_mut().expect("open_logs opened the logs");
        logs.metrics.write(&outcome.metrics)?;
        logs.timings.write(&outcome.timings)?;
        logs.eval.write_all(&outcome.eval)?;
        if let Some(log) = logs.alerts.as_mut() {
            for fired in &outcome.alerts {
                log.write(fired)?;
            }
        }
        if let Some(log) = logs.rollouts.as_mut() {
            logs.rollouts_bytes += log.write_all(&outcome.rollouts)?;
        }
        let every = self.config.checkpoint_every;
        if every > 0 && (self.step.is_multiple_of(every) || self.step == self.config.total_steps) {
            Ok(Some(self.write_checkpoint()?))
        } else {
            Ok(None)
        }
    }

    /// Opens (or, after a resume, restores) the run's log files under `out_dir`.
    pub(super) fn open_logs(&mut self, out_dir: &Path) -> Result<(), EngineError> {
        if self.logs.as_ref().is_some_and(|l| l.dir == out_dir) {
            return Ok(());
        }
        fs::create_dir_all(out_dir).map_err(|e| EngineError::io(out_dir, e))?;
        let metrics_path = out_dir.join(METRICS_FILE);
        let timings_path = out_dir.join(TIMINGS_FILE);
        let rollouts_path = out_dir.join(ROLLOUTS_FILE);
        let eval_path = out_dir.join(EVAL_FILE);
        let alerts_path = out_dir.join(ALERTS_FILE);
        let has_alerts = !self.variant.compiled().program().alerts.is_empty();
        let resumed = self.resumed.is_some();
        // A checkpoint holds the alert rows of its steps; one written before
        // alerts existed (or by a variant without them) holds none.
        let alerts = match (&self.resumed, has_alerts) {
            (_, false) => None,
            (Some((checkpoint_dir, _)), true) if checkpoint_dir.join(ALERTS_FILE).is_file() => {
                restore_file(&checkpoint_dir.join(ALERTS_FILE), &alerts_path)?;
                Some(CsvLog::append(&alerts_path)?)
            }
            (_, true) => Some(CsvLog::create(&alerts_path, &alerts_header())?),
        };
        let (metrics, timings, rollouts, rollouts_bytes) = match self.resumed.take() {
            Some((checkpoint_dir, bytes)) => {
                // The checkpoint's copies hold exactly the rows of its steps;
                // rows a killed run wrote after it are dropped.
                restore_file(&checkpoint_dir.join(METRICS_FILE), &metrics_path)?;
                restore_file(&checkpoint_dir.join(TIMINGS_FILE), &timings_path)?;
                let rollouts = if self.config.log_rollouts {
                    let existing = fs::metadata(&rollouts_path).map(|m| m.len()).unwrap_or(0);
                    let keep = if existing >= bytes { Some(bytes) } else { None };
                    Some((JsonlLog::open(&rollouts_path, keep)?, keep.unwrap_or(0)))
                } else {
                    None
                };
                let (rollouts, bytes) = rollouts.map_or((None, 0), |(log, b)| (Some(log), b));
                (CsvLog::append(&metrics_path)?, CsvLog::append(&timings_path)?, rollouts, bytes)
            }
            None => {
                let rollouts =
                    if self.config.log_rollouts { Some(JsonlLog::open(&rollouts_path, None)?) } else { None };
                (
                    CsvLog::create(&metrics_path, &metrics::metrics_header())?,
                    CsvLog::create(&timings_path, &metrics::timings_header())?,
                    rollouts,
                    0,
                )
            }
        };
        let eval = if resumed {
            keep_eval_rows_up_to(&eval_path, self.step)?;
            JsonlLog::open(&eval_path, Some(fs::metadata(&eval_path).map_or(0, |m| m.len())))?
        } else {
            JsonlLog::open(&eval_path, None)?
        };
        self.logs = Some(Logs { dir: out_dir.to_owned(), metrics, timings, eval, rollouts, rollouts_bytes, alerts });
        Ok(())
    }

    /// Writes the checkpoint of the current step under the open logs' directory.
    pub(super) fn write_checkpoint(&self) -> Result<PathBuf, EngineError> {
        let logs = self.logs.as_ref().expect("checkpoints are written while running");
        let dir = logs.dir.join("checkpoints").join(checkpoint::dir_name(self.step));
        let state = EngineState {
            version: checkpoint::VERSION,
            step: self.step,
            cursor: self.cursor,
            config: self.config.clone(),
            variant: self.variant.name().to_owned(),
            variant_fingerprint: self.variant.fingerprint(),
            rollouts_bytes: logs.rollouts_bytes,
            alert_streaks: self.alert_streaks.clone(),
        };
        let metrics = logs.dir.join(METRICS_FILE);
        let timings = logs.dir.join(TIMINGS_FILE);
        let policy = self.policy.state().map_err(EngineError::policy(self.step, Phase::Record, "state"))?;
        let alerts = logs.dir.join(ALERTS_FILE);
        let mut copies = vec![(METRICS_FILE, metrics.as_path()), (TIMINGS_FILE, timings.as_path())];
        if logs.alerts.is_some() {
            copies.push((ALERTS_FILE, alerts.as_path()));
        }
        checkpoint::write(&dir, &state, policy, &copies)?;
        if self.config.keep_only_latest_checkpoint {
            checkpoint::prune_checkpoints(&logs.dir)?;
        }
        Ok(dir)
    }
}

/// Rewrites `eval.jsonl` at `path` (atomically) keeping its complete lines of
/// steps up to `step`; a missing file (a run started before the file existed)
/// becomes an empty one.
fn keep_eval_rows_up_to(path: &Path, step: usize) -> Result<(), EngineError> {
    /// The one field the filter reads.
    #[derive(serde::Deserialize)]
    struct Step {
        step: usize,
    }
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(EngineError::io(path, e)),
    };
    let mut kept = Vec::new();
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| EngineError::io(path, e))?;
        // End of file, or a last line the killed run did not finish.
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        let row: Step =
            serde_json::from_slice(&line).map_err(|source| EngineError::Json { path: path.to_owned(), source })?;
        if row.step <= step {
            kept.extend_from_slice(&line);
        }
    }
    let tmp = path.with_extension(format!("restore-{}", std::process::id()));
    let mut out = fs::File::create(&tmp).map_err(|e| EngineError::io(&tmp, e))?;
    out.write_all(&kept).and_then(|()| out.flush()).map_err(|e| EngineError::io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| EngineError::io(path, e))
}

/// Copies `from` over `to` atomically (temporary file + rename).
fn restore_file(from: &Path, to: &Path) -> Result<(), EngineError> {
    let tmp = to.with_extension(format!("restore-{}", std::process::id()));
    fs::copy(from, &tmp).map_err(|e| EngineError::io(from, e))?;
    fs::rename(&tmp, to).map_err(|e| EngineError::io(to, e))
}
