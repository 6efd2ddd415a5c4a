//! Where a run of a study stands, read from its directory, and the protocol
//! that makes a study restartable: finished runs are skipped, checkpointed
//! runs resume, and the rest start fresh.
//!
//! A run is finished when its `metrics.csv` holds the last step *and* its
//! [`DONE_FILE`] marker exists, or when the marker says an alert stopped it
//! (`on_alert = "stop"`: it ended early, cleanly, with a checkpoint; delete
//! the marker to resume it). The marker is written after the policy's
//! `after_run` hook (saving an adapter, say), so a kill between the last step
//! and the hook re-enters the run from its last checkpoint and runs the hook.
//! Resuming from a checkpoint replaces the run's `metrics.csv` and
//! `timings.csv` with the checkpoint's copies (the engine's
//! [`crate::engine::Engine::resume`]), so a SIGKILL loses no completed row and
//! repeats none.

use std::fs;
use std::path::{Path, PathBuf};

use super::error_chain;
use super::summary::read_metrics;
use super::{RunSpec, Study};
use crate::engine::{METRICS_FILE, latest_checkpoint};

/// Written into a run's directory once it is complete (after `after_run`).
pub const DONE_FILE: &str = "done";

/// What a runner does with a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Nothing: the run is finished.
    Skip,
    /// Resume from this checkpoint directory.
    Resume(PathBuf),
    /// Start from step 0.
    Fresh,
}

impl Start {
    /// The decision for the run in `run_dir` of `total_steps` steps.
    pub fn of(run_dir: &Path, total_steps: usize) -> Start {
        if run_finished(run_dir, total_steps) {
            return Start::Skip;
        }
        latest_checkpoint(run_dir).map_or(Start::Fresh, Start::Resume)
    }
}

/// The second line of a [`DONE_FILE`] that an alert's stop wrote.
const STOPPED: &str = "stopped by alert";

/// Whether the run in `run_dir` is finished: complete metrics and the
/// marker, or a marker saying an alert stopped it.
pub fn run_finished(run_dir: &Path, total_steps: usize) -> bool {
    run_dir.join(DONE_FILE).is_file()
        && (metrics_complete(&run_dir.join(METRICS_FILE), total_steps) || stopped_by_alert(run_dir))
}

/// Whether an alert ended the run in `run_dir` early (its marker says so).
pub fn stopped_by_alert(run_dir: &Path) -> bool {
    fs::read_to_string(run_dir.join(DONE_FILE)).is_ok_and(|t| t.lines().nth(1).is_some_and(|l| l.starts_with(STOPPED)))
}

/// Marks the run in `run_dir` finished early after `steps` steps because `fired` stopped it.
pub fn mark_stopped(run_dir: &Path, steps: usize, fired: &crate::engine::FiredAlert) -> std::io::Result<()> {
    let text = format!("{steps}\n{STOPPED} at step {}: {} (`{}`)\n", fired.step, fired.message, fired.condition);
    fs::write(run_dir.join(DONE_FILE), text)
}

/// Whether `metrics.csv` already holds the run's last step.
pub fn metrics_complete(path: &Path, total_steps: usize) -> bool {
    path.exists() && read_metrics(path).is_ok_and(|rows| rows.last().is_some_and(|r| r.step >= total_steps))
}

/// Marks the run in `run_dir` finished after `steps` steps (writes `run_dir/`[`DONE_FILE`]).
pub fn mark_done(run_dir: &Path, steps: usize) -> std::io::Result<()> {
    fs::write(run_dir.join(DONE_FILE), format!("{steps}\n"))
}

/// Where a run stands, read from its directory.
#[derive(Clone, Debug, PartialEq)]
pub enum RunStatus {
    /// The run has its done marker and `metrics.csv` holds its last step.
    Finished,
    /// No `metrics.csv`: never started, or failed before its first step.
    NotStarted,
    /// Some steps done; `checkpoint`: whether it would resume from one.
    Stopped {
        /// The last step in `metrics.csv`.
        steps: usize,
        /// The steps the run is configured for.
        total: usize,
        /// Whether a checkpoint exists to resume from (otherwise the run restarts).
        checkpoint: bool,
    },
    /// `metrics.csv` cannot be read (the error and its causes).
    Unreadable(String),
}

impl RunStatus {
    /// The status of `run` of `study` under `study_dir`.
    pub fn of(study: &Study, run: &RunSpec, study_dir: &Path) -> RunStatus {
        let total = study.engine_config(run).total_steps;
        let dir = study_dir.join(&run.dir);
        if run_finished(&dir, total) {
            return RunStatus::Finished;
        }
        let metrics = dir.join(METRICS_FILE);
        if !metrics.is_file() {
            return RunStatus::NotStarted;
        }
        match read_metrics(&metrics) {
            Ok(rows) => RunStatus::Stopped {
                steps: rows.last().map_or(0, |r| r.step),
                total,
                checkpoint: latest_checkpoint(&dir).is_some(),
            },
            Err(e) => RunStatus::Unreadable(error_chain(&e)),
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunStatus::Finished => write!(f, "finished"),
            RunStatus::NotStarted => write!(f, "not started (no {METRICS_FILE})"),
            RunStatus::Stopped { steps, total, checkpoint: true } => {
                write!(f, "stopped at step {steps} of {total} (resumes from its last checkpoint)")
            }
            RunStatus::Stopped { steps, total, checkpoint: false } => {
                write!(f, "stopped at step {steps} of {total} (no checkpoint: restarts)")
            }
            RunStatus::Unreadable(e) => write!(f, "unreadable {METRICS_FILE}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MetricsRow;
    use crate::engine::metrics::metrics_header;

    fn write_metrics(path: &Path, steps: &[usize]) {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_path(path).expect("create");
        w.write_record(metrics_header()).expect("header");
        for &step in steps {
            w.serialize(MetricsRow { step, ..MetricsRow::default() }).expect("row");
        }
        w.flush().expect("flush");
    }

    /// A complete-looking checkpoint directory (what `latest_checkpoint` asks for).
    fn checkpoint(run: &Path, step: usize) -> PathBuf {
        let dir = run.join("checkpoints").join(format!("step-{step:06}"));
        fs::create_dir_all(&dir).expect("mkdir");
        fs::write(dir.join("engine.json"), "{}").expect("write");
        dir
    }

    #[test]
    fn metrics_complete_needs_the_last_step_and_finished_needs_the_marker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let metrics = dir.path().join(METRICS_FILE);
        assert!(!metrics_complete(&metrics, 3), "no file");
        write_metrics(&metrics, &[]);
        assert!(!metrics_complete(&metrics, 3), "header only");
        write_metrics(&metrics, &[1, 2]);
        assert!(!metrics_complete(&metrics, 3));
        write_metrics(&metrics, &[1, 2, 3]);
        assert!(metrics_complete(&metrics, 3));
        fs::write(&metrics, "not,a\nmetrics file\n").expect("write");
        assert!(!metrics_complete(&metrics, 3), "unreadable");
        write_metrics(&metrics, &[1, 2, 3]);
        assert!(!run_finished(dir.path(), 3), "no marker");
        fs::write(dir.path().join(DONE_FILE), "3\n").expect("write");
        assert!(run_finished(dir.path(), 3));
        assert!(!run_finished(dir.path(), 4), "a longer run is not finished by a shorter one's rows");
    }

    #[test]
    fn a_run_starts_fresh_resumes_from_its_latest_checkpoint_or_is_skipped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let run = tmp.path();
        assert_eq!(Start::of(run, 4), Start::Fresh, "an empty directory");
        write_metrics(&run.join(METRICS_FILE), &[1, 2, 3]);
        assert_eq!(Start::of(run, 4), Start::Fresh, "rows but no checkpoint: nothing to resume from");
        checkpoint(run, 1);
        let latest = checkpoint(run, 2);
        // A checkpoint still being written has no `engine.json` yet.
        fs::create_dir_all(run.join("checkpoints/step-000003")).expect("mkdir");
        assert_eq!(Start::of(run, 4), Start::Resume(latest.clone()));
        // All steps done but the hook never ran: resumed (and only the hook runs).
        write_metrics(&run.join(METRICS_FILE), &[1, 2, 3, 4]);
        let last = checkpoint(run, 4);
        assert_eq!(Start::of(run, 4), Start::Resume(last));
        mark_done(run, 4).expect("marker");
        assert_eq!(fs::read_to_string(run.join(DONE_FILE)).expect("read"), "4\n");
        assert_eq!(Start::of(run, 4), Start::Skip);
        assert_eq!(Start::of(run, 8), Start::Resume(run.join("checkpoints/step-000004")), "a longer study resumes");
        assert!(mark_done(&run.join("missing/dir"), 1).is_err(), "no such directory");
    }
}
