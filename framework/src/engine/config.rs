//! The engine's settings, with the seed papers' defaults, and the learning-rate schedule.

use rewardlab_models::agent::{OptimStep, Sampling};
use rewardlab_sandbox::MAX_CALLS_PER_TURN;
use serde::{Deserialize, Serialize};

use super::alerts::OnAlert;
use super::loss::LossConfig;

/// Everything that shapes a GRPO run. `Default` follows `/work/shared/design.md`
/// (seed 000): G = 8, 64 prompts per step, 4 turns (3 exploring + 1 answering),
/// ≤ 8 calls per turn, β = 0.02 with k3, ε = 0.2, LR 5e-6 cosine with 5%
/// warmup, grad-norm clip 1.0, AdamW (0.9, 0.999), sampling temperature 1.0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Seed of everything random: the data order and every rollout's sampling.
    pub seed: u64,
    /// Rollouts per prompt (G). Every group must have exactly this many.
    pub group_size: usize,
    /// Prompts per step (P); a step trains on P × G rollouts.
    pub prompts_per_step: usize,
    /// Steps of a full run.
    pub total_steps: usize,
    /// Turns per rollout, the answer turn included; the last turn forces an answer.
    pub max_turns: usize,
    /// Tool calls honoured per turn (at most 8: the feature `c` is declared in [0, 8]).
    pub max_calls_per_turn: usize,
    /// Sampling temperature of training rollouts.
    pub temperature: f64,
    /// The GRPO objective: advantage scaling, clipping and the KL penalty.
    pub loss: LossConfig,
    /// AdamW and its learning-rate schedule.
    pub optim: OptimConfig,
    /// Optimiser steps per engine step: the step's groups are split into this
    /// many contiguous mini-batches (whole groups each), each one backward + step.
    pub minibatches: usize,
    /// Passes over the step's rollouts; with more than one pass (or mini-batch)
    /// the ratio departs from 1 and clipping matters.
    pub epochs: usize,
    /// Write a checkpoint every this many steps (0: never; the last step always gets one when > 0).
    pub checkpoint_every: usize,
    /// After writing a checkpoint, delete the older ones (and temporaries a
    /// killed process left): a run resumes only from its latest.
    pub keep_only_latest_checkpoint: bool,
    /// Evaluate on the held-out split every this many steps (0: never; the last step too when > 0).
    pub eval_every: usize,
    /// How held-out rollouts sample.
    pub eval_sampling: EvalSampling,
    /// Evaluate on at most this many held-out tasks (in split order); `None`: all.
    pub eval_tasks: Option<usize>,
    /// Where the compiled reward program runs.
    pub reward_device: RewardDevice,
    /// Also write every training rollout to `rollouts.jsonl` (the contract's schema plus `step`, `reward`, `advantage`).
    pub log_rollouts: bool,
    /// What a fired `alert` does: `warn` logs it, `stop` also ends the run
    /// after the step with a checkpoint.
    pub on_alert: OnAlert,
    /// Also score every step's rollouts with the study's other variants and
    /// write `shadow.csv` (issue 17; the study runner hands the engine its
    /// shadows through `Engine::with_shadows`).
    pub shadow: bool,
    /// Tokio worker threads of the engine's runtime. Tool calls themselves run
    /// on its blocking pool under the sandbox's global limit. Results never
    /// depend on this number.
    pub runtime_threads: usize,
}

/// AdamW and the learning-rate schedule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimConfig {
    /// Peak learning rate.
    pub lr: f64,
    /// How the learning rate moves from step to step relative to `lr`.
    pub schedule: LrSchedule,
    /// Decay rate of AdamW's first-moment estimate, in [0, 1).
    pub beta1: f64,
    /// Decay rate of AdamW's second-moment estimate, in [0, 1).
    pub beta2: f64,
    /// Added to the second moment's square root to keep the update finite.
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Global gradient-norm clip; `None` disables it.
    pub max_grad_norm: Option<f64>,
}

/// How the learning rate moves over the run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum LrSchedule {
    /// `lr` at every step.
    Constant,
    /// Linear warmup from `lr / warmup_steps` to `lr` over the first
    /// `ceil(warmup_fraction · total_steps)` steps, then a half cosine down to
    /// `min_lr_ratio · lr` at the last step.
    Cosine {
        /// The share of the run spent warming up, in [0, 1].
        warmup_fraction: f64,
        /// The final learning rate as a share of the peak, in [0, 1].
        min_lr_ratio: f64,
    },
}

/// Sampling of held-out evaluation rollouts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum EvalSampling {
    /// The most likely choice everywhere.
    Greedy,
    /// Sampling at a (low) temperature, seeded like training rollouts.
    Temperature {
        /// The softmax temperature, > 0.
        temperature: f64,
    },
}

/// Where the reward program runs each step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RewardDevice {
    /// The compiled CPU plan (`rewardlab_dsl::cpu`), in `f64`.
    Cpu,
    /// The fused NVRTC kernels (`rewardlab_dsl::gpu`), in `f32` with `f64`
    /// reductions. Needs a build with `--features cuda` and a GPU at run time;
    /// [`Engine::new`](super::Engine::new) fails with a clear error otherwise.
    Cuda,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            seed: 0,
            group_size: 8,
            prompts_per_step: 64,
            total_steps: 100,
            max_turns: 4,
            max_calls_per_turn: MAX_CALLS_PER_TURN,
            temperature: 1.0,
            loss: LossConfig::default(),
            optim: OptimConfig::default(),
            minibatches: 1,
            epochs: 1,
            checkpoint_every: 50,
            eval_every: 10,
            eval_sampling: EvalSampling::Greedy,
            eval_tasks: None,
            reward_device: RewardDevice::Cpu,
            keep_only_latest_checkpoint: false,
            log_rollouts: false,
            on_alert: OnAlert::Warn,
            shadow: false,
            runtime_threads: 1,
        }
    }
}

impl Default for OptimConfig {
    fn default() -> Self {
        OptimConfig {
            lr: 5e-6,
            schedule: LrSchedule::Cosine { warmup_fraction: 0.05, min_lr_ratio: 0.0 },
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_grad_norm: Some(1.0),
        }
    }
}

impl EvalSampling {
    /// The policy-level [`Sampling`] this setting asks for.
    pub fn sampling(self) -> Sampling {
        match self {
            EvalSampling::Greedy => Sampling::Greedy,
            EvalSampling::Temperature { temperature } => Sampling::Sample { temperature },
        }
    }
}

impl EngineConfig {
    /// Checks ranges and consistency; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("group_size", self.group_size),
            ("prompts_per_step", self.prompts_per_step),
            ("total_steps", self.total_steps),
            ("max_turns", self.max_turns),
            ("max_calls_per_turn", self.max_calls_per_turn),
            ("minibatches", self.minibatches),
            ("epochs", self.epochs),
            ("runtime_threads", self.runtime_threads),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        if self.group_size < 2 {
            return Err("group_size must be at least 2: a group of one has no baseline".into());
        }
        if self.max_calls_per_turn > MAX_CALLS_PER_TURN {
            return Err(format!(
                "max_calls_per_turn is {}, but the feature `c` is declared in [0, {MAX_CALLS_PER_TURN}]",
                self.max_calls_per_turn
            ));
        }
        if self.minibatches > self.prompts_per_step {
            return Err(format!(
                "minibatches ({}) exceeds prompts_per_step ({}): a mini-batch holds whole groups",
                self.minibatches, self.prompts_per_step
            ));
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(format!("temperature must be positive, got {}", self.temperature));
        }
        if let EvalSampling::Temperature { temperature } = self.eval_sampling
            && !(temperature.is_finite() && temperature > 0.0)
        {
            return Err(format!("eval_sampling.temperature must be positive, got {temperature}"));
        }
        self.loss.validate().map_err(|e| e.to_string())?;
        self.optim.validate()
    }

    /// The AdamW step for engine step `step` (0-based).
    pub fn optim_step(&self, step: usize) -> OptimStep {
        let o = &self.optim;
        OptimStep {
            lr: o.schedule.lr(o.lr, step, self.total_steps),
            beta1: o.beta1,
            beta2: o.beta2,
            eps: o.eps,
            weight_decay: o.weight_decay,
            max_grad_norm: o.max_grad_norm,
        }
    }
}

impl OptimConfig {
    fn validate(&self) -> Result<(), String> {
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return Err(format!("optim.lr must be >= 0, got {}", self.lr));
        }
        for (name, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                return Err(format!("optim.{name} must be in [0, 1), got {b}"));
            }
        }
        if let Some(clip) = self.max_grad_norm
            && !(clip.is_finite() && clip > 0.0)
        {
            return Err(format!("optim.max_grad_norm must be positive, got {clip}"));
        }
        if let LrSchedule::Cosine { warmup_fraction, min_lr_ratio } = self.schedule
            && !((0.0..=1.0).contains(&warmup_fraction) && (0.0..=1.0).contains(&min_lr_ratio))
        {
            return Err("optim.schedule: warmup_fraction and min_lr_ratio must be in [0, 1]".into());
        }
        Ok(())
    }
}

impl LrSchedule {
    /// The learning rate of step `step` (0-based) of `total` with peak `lr`.
    pub fn lr(self, lr: f64, step: usize, total: usize) -> f64 {
        match self {
            LrSchedule::Constant => lr,
            LrSchedule::Cosine { warmup_fraction, min_lr_ratio } => {
                let warmup = (warmup_fraction * total as f64).ceil() as usize;
                if step < warmup {
                    return lr * (step + 1) as f64 / warmup as f64;
                }
                let decay = total.saturating_sub(warmup);
                // Progress reaches 1 at the last step, so the floor is actually used.
                let progress =
                    if decay <= 1 { 0.0 } else { (step - warmup).min(decay - 1) as f64 / (decay - 1) as f64 };
                let floor = min_lr_ratio * lr;
                floor + 0.5 * (lr - floor) * (1.0 + (std::f64::consts::PI * progress).cos())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_warms_up_linearly_then_decays_to_the_floor() {
        let s = LrSchedule::Cosine { warmup_fraction: 0.05, min_lr_ratio: 0.1 };
        let total = 100;
        // ceil(0.05 · 100) = 5 warmup steps: 0.2, 0.4, ... 1.0 of the peak.
        let lrs: Vec<f64> = (0..total).map(|i| s.lr(1.0, i, total)).collect();
        for (i, lr) in lrs.iter().take(5).enumerate() {
            assert!((lr - (i + 1) as f64 / 5.0).abs() < 1e-15, "warmup step {i}: {lr}");
        }
        assert_eq!(lrs[5], 1.0, "the first decay step is the peak");
        assert!((lrs[99] - 0.1).abs() < 1e-15, "the last step reaches the floor");
        assert!(lrs[5..].windows(2).all(|w| w[1] <= w[0]), "monotone decay");
        // Halfway through the decay the cosine is at its midpoint.
        let mid = LrSchedule::Cosine { warmup_fraction: 0.0, min_lr_ratio: 0.0 }.lr(2.0, 50, 101);
        assert!((mid - 1.0).abs() < 1e-12, "{mid}");
        assert_eq!(LrSchedule::Constant.lr(0.3, 7, 10), 0.3);
    }

    #[test]
    fn defaults_follow_the_design_and_validate() {
        let c = EngineConfig::default();
        assert_eq!((c.group_size, c.prompts_per_step, c.max_turns, c.max_calls_per_turn), (8, 64, 4, 8));
        assert_eq!((c.loss.kl_beta, c.loss.clip_eps, c.optim.max_grad_norm), (0.02, 0.2, Some(1.0)));
        assert_eq!((c.optim.beta1, c.optim.beta2), (0.9, 0.999));
        c.validate().expect("defaults are valid");
        let bad = EngineConfig { max_calls_per_turn: 9, ..EngineConfig::default() };
        assert!(bad.validate().expect_err("c > 8").contains("[0, 8]"));
        let bad = EngineConfig { group_size: 1, ..EngineConfig::default() };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn config_round_trips_through_toml_like_serde_and_rejects_unknown_keys() {
        let c = EngineConfig {
            seed: 7,
            eval_sampling: EvalSampling::Temperature { temperature: 0.3 },
            ..EngineConfig::default()
        };
        let json = serde_json::to_string(&c).expect("serialise");
        let back: EngineConfig = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, c);
        let partial: EngineConfig = serde_json::from_str(r#"{"prompts_per_step": 8}"#).expect("defaults fill in");
        assert_eq!(partial.prompts_per_step, 8);
        assert_eq!(partial.group_size, 8);
        assert!(serde_json::from_str::<EngineConfig>(r#"{"prompt_per_step": 8}"#).is_err());
    }
}
