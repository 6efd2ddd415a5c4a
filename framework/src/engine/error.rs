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
    Config(String),
    #[error("the task source has no training tasks")]
    NoTrainingTasks,
    #[error(transparent)]
    Tasks(#[from] TaskSetError),
    #[error(transparent)]
    Variant(#[from] VariantError),
    /// The rewards crate's schema lacks a feature the step's summary metrics read.
    #[error("the summary metrics cannot be read from the feature schema")]
    Summary(#[source] rewardlab_rewards::SummaryError),
    #[error("task `{task}`: cannot open commit {commit} of {repo}")]
    Tree { task: String, repo: String, commit: String, source: Box<rewardlab_sandbox::Error> },
    /// A policy method returned an error.
    #[error("step {step}, {phase} phase: the policy's `{method}` failed")]
    Policy { step: usize, phase: Phase, method: &'static str, source: Box<dyn std::error::Error + Send + Sync> },
    /// A policy method returned something the trait's contract rules out.
    #[error("step {step}, {phase} phase: the policy broke its contract: {detail}")]
    Contract { step: usize, phase: Phase, detail: String },
    /// The policy refused the state saved in a checkpoint.
    #[error("checkpoint {path}: the policy cannot restore its state")]
    Restore { path: PathBuf, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("step {step}: rollout features")]
    Features { step: usize, source: Box<rewardlab_rewards::FeatureError> },
    #[error("step {step}: reward program `{variant}`")]
    Reward { step: usize, variant: String, source: Box<rewardlab_dsl::EvalError> },
    /// `reward_device = "cuda"` was asked for and the GPU backend cannot run.
    #[error("reward_device = \"cuda\"")]
    RewardDevice { source: Box<rewardlab_dsl::gpu::GpuError> },
    #[error("step {step}: loss")]
    Loss { step: usize, source: LossError },
    #[error("cannot start the engine's tokio runtime")]
    Runtime(#[source] std::io::Error),
    #[error("{path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}")]
    Csv { path: PathBuf, source: csv::Error },
    #[error("{path}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("checkpoint {path}: {reason}")]
    Checkpoint { path: PathBuf, reason: String },
    #[error("the run is complete: {steps} of {steps} steps done")]
    Finished { steps: usize },
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
