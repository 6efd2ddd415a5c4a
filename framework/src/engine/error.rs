//! Why a run stopped. Tool problems never appear here: they are messages to
//! the policy inside its rollout. These are faults of the setup, the policy's
//! contract, the reward program, or the disk.

use std::path::PathBuf;

use super::loss::LossError;
use super::tasks::TaskSetError;
use super::variant::VariantError;

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
    #[error("task `{task}`: cannot open commit {commit} of {repo}")]
    Tree { task: String, repo: String, commit: String, source: Box<rewardlab_sandbox::Error> },
    #[error("step {step}: the policy broke its contract: {detail}")]
    Policy { step: usize, detail: String },
    #[error("step {step}: rollout features: {source}")]
    Features { step: usize, source: Box<rewardlab_rewards::FeatureError> },
    #[error("step {step}: reward program `{variant}`: {source}")]
    Reward { step: usize, variant: String, source: Box<rewardlab_dsl::EvalError> },
    /// `reward_device = "cuda"` was asked for and the GPU backend cannot run.
    #[error("reward_device = \"cuda\": {source}")]
    RewardDevice { source: Box<rewardlab_dsl::gpu::GpuError> },
    #[error("step {step}: loss: {source}")]
    Loss { step: usize, source: LossError },
    #[error("cannot start the engine's tokio runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Csv { path: PathBuf, source: csv::Error },
    #[error("{path}: {source}")]
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
}
