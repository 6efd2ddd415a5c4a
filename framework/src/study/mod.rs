//! The study runner's library half: study files (a grid of reward variants ×
//! seeds) checked before anything runs ([`load`], with structured
//! diagnostics the caller renders), training every run with restartable
//! runs ([`train`] over the worker [`pool`], the done/resume protocol in
//! [`runs`]), what concurrent runners share, published atomically
//! ([`publish`]), Slurm array scripts and run manifests ([`slurm`]), offline
//! replay of variants on logged rollouts ([`replay`](mod@replay), streamed over a whole log by
//! [`replay_log`]), and the outputs of a
//! finished study — summary tables with confidence intervals, baselines and
//! plots ([`summary`], [`by_repo`], [`plots`]).
//!
//! Training steps are the engine's ([`crate::engine`]); the `study` binary
//! reads files, parses arguments, draws progress bars and prints.

pub mod baseline;
pub mod by_repo;
pub mod equiv;
pub mod load;
pub mod paired;
pub mod phases;
pub mod pool;
pub mod publish;
pub mod qwen3;
pub mod runs;
pub mod shadow;
pub mod slurm;
pub mod spec;
mod synth;
pub mod tasks;
pub mod train;

pub use load::{
    FileDiagnostics, ReadFile, RunSpec, Study, StudyDiagnostics, StudyError, Variant, parse_study, run_dir,
};
pub use spec::{
    AlertSpec, CommitsSpec, GridSpec, PolicySpec, Qwen3Spec, SandboxSpec, StudyFile, SummarySpec, TaskSpec, VariantSpec,
};
pub mod plots;
pub mod replay;
pub mod replay_alerts;
pub mod replay_log;
pub mod stats;
pub mod summary;

pub use baseline::{BaselineTask, bm25_baseline, bm25_baseline_with, heuristic_baseline_with};
pub use plots::write_plots;
pub use replay::{ReplayRow, replay, replay_markdown};
pub use runs::{DONE_FILE, RunStatus, Start, run_finished};
pub use summary::{Manifest, Summary, SummaryError, summarize, write_tables};
pub use tasks::{PreparedTasks, SourceReport, TaskError, TaskReport, prepare_instances, prepare_tasks};
pub use train::{PolicyContext, Progress, RunError, RunProgress, StudyTasks, TrainError, train_runs};

/// An error and its causes on one line (`outer: inner`), as the study's reports write a failed
/// run or source; defined in `rewardlab_protocol` for every crate that writes errors.
pub use rewardlab_protocol::error_chain;

#[cfg(test)]
mod tests;
