//! Why a run stopped. Tool problems never appear here: they are messages to
//! the policy inside its rollout. These are faults of the setup, the policy
//! (its errors and its contract), the reward program, or the disk.
//!
//! Messages say what the engine was doing and never repeat their `source`:
//! print an error with its chain (`{:#}` under anyhow, or walk
//! [`std::error::Error::source`]) to see every cause exactly once.

use std::fmt;
use std::path::PathBuf;

use super::loss::LossError;
use super::tasks::TaskSetError;
use super::variant::VariantError;

/// The phases of one engine step, in order (see the [engine docs](super)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Drawing the step's prompts and running its rollouts: the policy acts, the
    /// sandbox answers the calls, the policy observes, turn by turn.
    Rollout,
    /// Rollout features, the reward program, and the summary columns.
    Score,
    /// Log-probs, the loss, the policy's backward pass and optimiser step.
    Update,
    /// Held-out rollouts after the update.
    Evaluate,
    /// The metrics and timings rows, the rollout log and the checkpoint.
    Record,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Rollout => "rollout",
            Phase::Score => "score",
            Phase::Update => "update",
            Phase::Evaluate => "evaluate",
            Phase::Record => "record",
        })
    }
}

/// A fault of the GRPO engine, with the step (1-based) and rollout where it applies.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error("invalid engine config: {0}")]
    /// [`EngineConfig::validate`](super::EngineConfig::validate) refused the config; holds its message.
    Config(String),
    #[error("the task source has no training tasks")]
    /// The task source's training split is empty.
    NoTrainingTasks,
    #[error(transparent)]
    /// The task set could not be built or read.
    Tasks(#[from] TaskSetError),
    #[error(transparent)]
    /// The reward variant does not compile or does not fit the engine.
    Variant(#[from] VariantError),
    /// The rewards crate's schema lacks a feature the step's summary metrics read.
    #[error("the summary metrics cannot be read from the feature schema")]
    Summary(#[source] rewardlab_rewards::SummaryError),
    #[error("task `{task}`: cannot open commit {commit} of {repo}")]
    /// The sandbox cannot check out a task's repository at its commit.
    Tree {
        /// The task's id.
        task: String,
        /// The task's repository.
        repo: String,
        /// The commit asked for.
        commit: String,
        /// The sandbox's error.
        source: Box<rewardlab_sandbox::Error>,
    },
    /// A policy method returned an error.
    #[error("step {step}, {phase} phase: the policy's `{method}` failed")]
    Policy {
        /// The engine step, 1-based.
        step: usize,
        /// The phase the step was in.
        phase: Phase,
        /// The [`Policy`](rewardlab_models::agent::Policy) method that failed (`act`, `backward`, ...).
        method: &'static str,
        /// The policy's own error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A policy method returned something the trait's contract rules out.
    #[error("step {step}, {phase} phase: the policy broke its contract: {detail}")]
    Contract {
        /// The engine step, 1-based.
        step: usize,
        /// The phase the step was in.
        phase: Phase,
        /// What the policy returned and what was expected.
        detail: String,
    },
    /// The policy refused the state saved in a checkpoint.
    #[error("checkpoint {path}: the policy cannot restore its state")]
    Restore {
        /// The checkpoint directory.
        path: PathBuf,
        /// The policy's own error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("step {step}: rollout features")]
    /// The step's rollout features could not be computed.
    Features {
        /// The engine step, 1-based.
        step: usize,
        /// Which feature failed, for which rollout.
        source: Box<rewardlab_rewards::FeatureError>,
    },
    #[error("step {step}: reward program `{variant}`")]
    /// The reward program failed on the step's feature table.
    Reward {
        /// The engine step, 1-based.
        step: usize,
        /// The reward variant's name.
        variant: String,
        /// The evaluation fault, naming the group, rollout and definition.
        source: Box<rewardlab_dsl::EvalError>,
    },
    /// `reward_device = "cuda"` was asked for and the GPU backend cannot run.
    #[error("reward_device = \"cuda\"")]
    RewardDevice {
        /// Why the GPU backend cannot run (not compiled in, no device, NVRTC failed).
        source: Box<rewardlab_dsl::gpu::GpuError>,
    },
    #[error("step {step}: loss")]
    /// The loss could not be computed from the step's log-probs and advantages.
    Loss {
        /// The engine step, 1-based.
        step: usize,
        /// What was wrong with the loss inputs.
        source: LossError,
    },
    #[error("cannot start the engine's tokio runtime")]
    /// The tokio runtime could not be built.
    Runtime(#[source] std::io::Error),
    #[error("{path}")]
    /// Reading or writing a file or directory of the run failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    #[error("{path}")]
    /// Writing a metrics CSV failed.
    Csv {
        /// The CSV file.
        path: PathBuf,
        /// The CSV writer's error.
        source: csv::Error,
    },
    #[error("{path}")]
    /// A JSON file of the run (a checkpoint part, the rollout log) could not be read or written.
    Json {
        /// The JSON file.
        path: PathBuf,
        /// The serde error.
        source: serde_json::Error,
    },
    #[error("checkpoint {path}: {reason}")]
    /// A checkpoint cannot be resumed (another format version or reward variant).
    Checkpoint {
        /// The checkpoint directory.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    #[error("the run is complete: {steps} of {steps} steps done")]
    /// A step was asked of a run that has done all its steps.
    Finished {
        /// The run's total steps.
        steps: usize,
    },
}

// Sources are boxed where they are large, so a `Result<_, EngineError>` stays small on the happy path.
impl EngineError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> EngineError {
        EngineError::Io { path: path.into(), source }
    }

    /// Wraps a policy error with the step, phase and method it came from:
    /// `policy.act(..).map_err(EngineError::policy(step, Phase::Rollout, "act"))`.
    pub(crate) fn policy<E: std::error::Error + Send + Sync + 'static>(
        step: usize,
        phase: Phase,
        method: &'static str,
    ) -> impl FnOnce(E) -> EngineError {
        move |source| EngineError::Policy { step, phase, method, source: Box::new(source) }
    }
}
