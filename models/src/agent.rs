//! The `Policy` trait: what the GRPO engine asks of any policy, the CPU proxy
//! policy and Qwen3 + LoRA alike.
//!
//! A rollout is a conversation of turns. At each turn the policy either issues
//! up to `max_calls_per_turn` tool calls (answered by the sandbox and handed
//! back through [`Policy::observe`]) or answers. The policy keeps everything it
//! needs for training in its own [`Policy::Episode`]: the engine never looks
//! inside, it only asks for per-*unit* log-probabilities (a unit is a sampled
//! decision for the proxy policy, a generated token for an LLM) and hands back
//! per-unit loss coefficients.
//!
//! The loss is computed once, in the engine, in `f64`: the clipped surrogate and
//! the KL penalty are functions of each unit's current log-prob, so their
//! gradient is `Σ_u coeff_u · ∇θ logp_u` with `coeff_u = ∂loss/∂logp_u`
//! computed analytically by the engine. A policy therefore only implements
//! [`Policy::backward`] for a weighted sum of its own log-probs — for candle
//! models a `backward()` on `(coeff ⊙ logp).sum()`, for the log-linear proxy
//! policy the closed-form gradient of a log-softmax. Tool-response content never
//! enters the loss except through the decisions the policy made after seeing it.

pub use crate::state_tensors::StateTensor;
use rewardlab_sandbox::{ToolCall, ToolResult};

/// What the policy is asked: the task's text, and where it may search.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskPrompt {
    /// Stable task id (the group name in rollout logs).
    pub id: String,
    /// The issue text.
    pub text: String,
}

/// How to sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// Training: draw from the policy at this temperature.
    Sample {
        /// Softmax temperature, > 0; 1 samples the model's own distribution.
        temperature: f64,
    },
    /// Evaluation: take the most likely choice everywhere.
    Greedy,
}

/// Where a turn stands in the rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnInfo {
    /// 0-based turn index.
    pub index: usize,
    /// Turns the rollout may take, the answer turn included.
    pub max_turns: usize,
    /// Tool calls one turn may make.
    pub max_calls_per_turn: usize,
    /// The last turn: the policy must answer now.
    pub must_answer: bool,
}

/// The final answer of a rollout, as the policy gave it. Both forms are checked by the one
/// answer parser of `rewardlab-protocol`: text by `parse_answer`, lists by `Answer::from_lists`
/// (the same rules without the JSON), so both obey the same schema.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A policy that decides files directly (the proxy policy): files and `path:start-end` ranges.
    Structured {
        /// Predicted repository-relative file paths.
        files: Vec<String>,
        /// Predicted line ranges as `path:start-end` text, 1-based and inclusive.
        line_ranges: Vec<String>,
    },
    /// Generated text that should hold `<answer>{...}</answer>`; the engine parses it strictly.
    Text(String),
}

/// What the policy did in one turn.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnOutput {
    /// Tool calls to run concurrently. A malformed call the policy generated is
    /// passed as `Err(result)`: the engine shows that error as the call's response.
    Calls(Vec<Result<ToolCall, ToolResult>>),
    /// The rollout ends with this answer.
    Answer(Answer),
    /// The policy ran out of its generation budget without answering.
    Truncated,
}

/// Gradient and optimiser bookkeeping returned by [`Policy::step`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepStats {
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
}

/// AdamW settings for one [`Policy::step`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptimStep {
    /// The learning rate of this step (after any schedule).
    pub lr: f64,
    /// Decay rate of the first-moment estimate, in [0, 1).
    pub beta1: f64,
    /// Decay rate of the second-moment estimate, in [0, 1).
    pub beta2: f64,
    /// Added to the second moment's square root to keep the update finite.
    pub eps: f64,
    /// Decoupled weight decay, applied as `θ -= lr · weight_decay · θ`.
    pub weight_decay: f64,
    /// Clip the global gradient norm to this (no clipping when `None`).
    pub max_grad_norm: Option<f64>,
}

/// A trainable, stochastic policy over multi-turn tool use.
///
/// Every method that runs the model, the tokenizer or the optimiser returns
/// [`Policy::Error`]; the engine wraps it with the step and the phase it was
/// in. The three plain reads of an episode (`completion_tokens`,
/// `sampled_logprobs`, `entropy`) cannot fail: they only look at what `act`
/// already recorded.
pub trait Policy: Send + Sync {
    /// One rollout's private record: its history as the policy sees it, the
    /// units it sampled with their sampling log-probs, and its RNG.
    type Episode: Send;
    /// Checkpoint of parameters and optimiser state: JSON, with the large arrays split out
    /// to a binary file (see [`PolicyState`]).
    type State: PolicyState;
    /// Why a method failed: a tensor or tokenizer error, a state of another
    /// layout. The engine boxes it as the `source` of its own error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Starts a rollout. `seed` fixes every random choice of this rollout, so
    /// results do not depend on scheduling or thread count.
    fn begin(&self, task: &TaskPrompt, sampling: Sampling, seed: u64) -> Result<Self::Episode, Self::Error>;

    /// Decides the next turn of each episode. The engine passes the rollouts
    /// that are at the same turn together so that a batched policy can batch.
    /// The result holds one output per episode, in order.
    fn act(&self, episodes: &mut [&mut Self::Episode], turn: TurnInfo) -> Result<Vec<TurnOutput>, Self::Error>;

    /// Hands the results of the last turn's calls back, in call order.
    fn observe(&self, episode: &mut Self::Episode, results: &[ToolResult]) -> Result<(), Self::Error>;

    /// Tokens (or token-equivalents) the policy generated in this episode: the
    /// `len` feature and the completion-length metric.
    fn completion_tokens(&self, episode: &Self::Episode) -> usize;

    /// The log-probs recorded when the units were sampled (the "old" policy).
    fn sampled_logprobs(&self, episode: &Self::Episode) -> Vec<f64>;

    /// Mean entropy of the sampled units' distributions, for the metrics.
    fn entropy(&self, episode: &Self::Episode) -> f64;

    /// Log-probs of every unit under the current parameters, one vector per episode.
    fn logprobs(&self, episodes: &[&Self::Episode]) -> Result<Vec<Vec<f64>>, Self::Error>;

    /// Log-probs of every unit under the frozen reference (the start of training).
    fn reference_logprobs(&self, episodes: &[&Self::Episode]) -> Result<Vec<Vec<f64>>, Self::Error>;

    /// Accumulates the gradient of `Σ_episodes Σ_u coeffs[e][u] · logp_u`.
    fn backward(&mut self, episodes: &[&Self::Episode], coeffs: &[Vec<f64>]) -> Result<(), Self::Error>;

    /// Applies the accumulated gradient (AdamW, with clipping) and clears it.
    fn step(&mut self, optim: &OptimStep) -> Result<StepStats, Self::Error>;

    /// Parameters and optimiser state, for checkpoints.
    fn state(&self) -> Result<Self::State, Self::Error>;

    /// Restores what [`Policy::state`] saved. A state that does not fit the
    /// policy (another parameter layout or adapter shape) is an error, and the
    /// policy is left as it was.
    fn restore(&mut self, state: Self::State) -> Result<(), Self::Error>;
}

/// A policy's checkpoint state. The small part is serialised as JSON; large f32 arrays (LoRA
/// adapters and AdamW moments of a Qwen3 policy: ~1.5 GB at 14B, r = 32) are moved out as
/// [`StateTensor`]s, which checkpoints store in a safetensors file beside the JSON. A state with
/// nothing large keeps the defaults and is pure JSON.
pub trait PolicyState: serde::Serialize + serde::de::DeserializeOwned {
    /// Moves the large arrays out, leaving what remains to be serialised as JSON.
    fn take_tensors(&mut self) -> Vec<StateTensor> {
        Vec::new()
    }

    /// Puts back what [`PolicyState::take_tensors`] moved out, after the JSON part was read.
    /// A missing, extra or misshapen tensor is an error message naming it.
    fn put_tensors(&mut self, tensors: Vec<StateTensor>) -> std::result::Result<(), String> {
        match tensors.first() {
            None => Ok(()),
            Some(t) => {
                Err(format!("this state has no binary part, but {} tensors came (first: {})", tensors.len(), t.name))
            }
        }
    }
}
