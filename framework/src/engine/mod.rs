//! The GRPO engine: rollouts through the sandbox, rewards from a compiled
//! reward program, the clipped surrogate with a KL penalty, and the policy's
//! optimiser step — with per-step metrics, checkpoints and bit-identical resume.
//!
//! # One step
//!
//! [`Engine::step`] runs the phases of [`Phase`] in order, each a method with
//! its own inputs and outputs in its own file:
//!
//! 1. **Rollout** (`sample.rs`, `rollout.rs`): P training tasks from the data
//!    cursor (the train split in a seeded permutation per epoch, `seed.rs`),
//!    then P × G episodes, each seeded from (seed, step, prompt slot,
//!    rollout), run turn-synchronously: every active episode acts, all their
//!    tool calls run concurrently on the engine's tokio runtime (under the
//!    sandbox's 64-way limit), then each observes its results. Sampling and
//!    tools interleave turn by turn (a turn's calls come from that turn's
//!    sampling, the next turn's sampling from their results), so they are one
//!    phase. The last of `max_turns` turns forces an answer; answers are
//!    parsed strictly. Out: a `RolloutBatch` (episodes, rollout records,
//!    tool counts, policy and tool seconds).
//! 2. **Score** (`score.rs`): rollout records →
//!    [`rewardlab_rewards::feature_table`] → the variant's compiled program
//!    ([`RewardVariant`], compiled once; CPU plan or GPU kernels) → `reward`,
//!    `adv`, `advantage` back in rollout order, the share of zero-variance
//!    groups, and the summary columns ([`rewardlab_rewards::SummaryFeatures`],
//!    resolved from the schema's declarations and roles in [`Engine::new`]).
//!    Every group must have exactly G rollouts (`EvalOptions::group_size`),
//!    and a NaN is an error naming the rollout.
//! 3. **Update** (`update.rs`): for each of `epochs` × `minibatches` (whole
//!    groups): current, sampling and reference log-probs per unit →
//!    [`loss::grpo_loss`] (f64, analytic `∂loss/∂logp` per unit) →
//!    [`Policy::backward`] → [`Policy::step`] with the scheduled learning rate.
//! 4. **Evaluate** (`evaluate.rs`): every `eval_every` steps and at the last,
//!    one rollout per held-out task into the `eval_*` columns and one
//!    [`EvalRecord`] per task.
//! 5. **Alerts** (`alerts.rs`): the variant's `alert` statements on the
//!    step's feature table and metrics row; what fires goes to `alerts.csv`
//!    and the [`StepReport`], and with `on_alert = "stop"` ends the run after
//!    this step, with a checkpoint.
//! 6. **Record** (`record.rs`): one row of `metrics.csv` and of `timings.csv`,
//!    the step's [`EvalRecord`]s (`eval.jsonl`), the logged rollouts, and (in
//!    [`Engine::run`]) the checkpoint when due.
//!
//! A policy error is an [`EngineError::Policy`] naming the step, the phase and
//! the method; a policy that breaks the trait's contract (wrong number of
//! outputs) is an [`EngineError::Contract`].
//!
//! # Invariants
//!
//! - Determinism: the same seed gives the same `metrics.csv` bytes whatever the
//!   tokio or rayon thread counts. Randomness is counter-based, tool results are
//!   placed by index, and wall-clock timings live in `timings.csv` alone.
//! - Only policy units enter the loss: the engine sees units only through the
//!   policy's log-prob vectors; tool responses have none.
//! - A resumed run continues bit for bit: a checkpoint holds the policy state
//!   (optimiser included), the step and the data cursor, and the engine has no
//!   other state ([`checkpoint`]).
//! - The engine never prints; callers get a [`StepReport`] per step.
//!
//! The engine's methods are synchronous and block on its own runtime: call
//! them from plain threads, not from inside an async task.

pub mod alerts;
pub mod checkpoint;
pub mod config;
mod error;
mod evaluate;
pub mod greedy;
pub mod loss;
pub mod metrics;
mod record;
mod rollout;
mod sample;
mod score;
pub(crate) mod seed;
// Shadow variants (issue 17): scored beside the trained one, `shadow.csv`.
pub mod shadow;
pub mod tasks;
mod update;
mod variant;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rewardlab_dsl::gpu::GpuProgram;
use rewardlab_models::agent::Policy;
use rewardlab_rewards::SummaryFeatures;
use rewardlab_rewards::rollout::Rollout;
use rewardlab_sandbox::Sandbox;
use serde::Serialize;
use tokio::runtime::Runtime;

pub use alerts::{ALERTS_FILE, FiredAlert, OnAlert};
pub use checkpoint::latest_checkpoint;
pub use config::{EngineConfig, EvalSampling, LrSchedule, OptimConfig, RewardDevice};
pub use error::{EngineError, Phase};
pub use evaluate::EvalRecord;
pub use loss::{Aggregation, KlEstimator, LossConfig, LossOutput, grpo_loss};
pub use metrics::{MetricsRow, Timings};
pub use shadow::{SHADOW_FILE, ShadowRow};
pub use tasks::{EngineTask, TaskSet, TaskSource};
pub use variant::{RewardVariant, VariantError};

use record::Logs;

/// Files of a run directory.
pub const METRICS_FILE: &str = "metrics.csv";
/// The per-step wall-clock file of a run directory ([`Timings`] rows).
pub const TIMINGS_FILE: &str = "timings.csv";
/// The training-rollout log of a run directory, written when `log_rollouts` is set.
pub const ROLLOUTS_FILE: &str = "rollouts.jsonl";
/// Per-task held-out records ([`EvalRecord`], one JSON line per task per eval step).
pub const EVAL_FILE: &str = "eval.jsonl";

/// A GRPO run over one policy, one task source and one reward variant.
pub struct Engine<P: Policy> {
    config: EngineConfig,
    policy: P,
    tasks: Arc<dyn TaskSource>,
    sandbox: Sandbox,
    variant: Arc<RewardVariant>,
    /// The variant's kernels when `reward_device = "cuda"`, compiled once per engine.
    gpu: Option<GpuProgram>,
    /// The feature columns of the summary metrics, resolved from the rewards schema.
    summary: SummaryFeatures,
    runtime: Runtime,
    /// Steps completed.
    step: usize,
    /// Training prompts drawn so far.
    cursor: u64,
    /// The permutation of the train split for one epoch, cached.
    epoch_order: Option<(u64, Vec<usize>)>,
    /// Set by [`Engine::resume`] until the first [`Engine::run_steps`] restores the logs.
    resumed: Option<(PathBuf, u64)>,
    logs: Option<Logs>,
    /// Consecutive steps each alert has held (checkpointed).
    alert_streaks: Vec<u32>,
    /// Variants scored beside the trained one ([`Engine::with_shadows`]).
    shadows: Option<shadow::Shadows>,
}

/// What one step produced.
#[derive(Clone, Debug)]
pub struct StepOutcome {
    /// The step's `metrics.csv` row.
    pub metrics: MetricsRow,
    /// The step's `timings.csv` row.
    pub timings: Timings,
    /// The held-out records of an eval step, in held-out order (empty on other steps).
    pub eval: Vec<EvalRecord>,
    /// The step's rollouts with their rewards (empty unless `log_rollouts`).
    pub rollouts: Vec<LoggedRollout>,
    /// The alerts that fired at this step, in source order.
    pub alerts: Vec<FiredAlert>,
    /// The shadow variants' agreement rows (empty without shadows).
    pub shadow: Vec<ShadowRow>,
}

/// A training rollout as logged to `rollouts.jsonl`: the contract's record plus the step and its outputs.
#[derive(Clone, Debug, Serialize)]
pub struct LoggedRollout {
    /// The engine step that sampled the rollout, 1-based.
    pub step: usize,
    /// The contract's rollout record, flattened into the same JSON object.
    #[serde(flatten)]
    pub rollout: Rollout,
    /// The reward program's `reward` for the rollout.
    pub reward: f64,
    /// The base advantage estimate `adv`.
    pub adv: f64,
    /// The final `advantage` the loss used (defaults to `adv`).
    pub advantage: f64,
}

/// Handed to the progress callback after every step.
#[derive(Clone, Copy, Debug)]
pub struct StepReport<'a> {
    /// Steps completed (1-based index of this step).
    pub step: usize,
    /// Steps of the full run.
    pub total_steps: usize,
    /// The step's `metrics.csv` row.
    pub metrics: &'a MetricsRow,
    /// The step's `timings.csv` row.
    pub timings: &'a Timings,
    /// The checkpoint written after this step, if one was.
    pub checkpoint: Option<&'a Path>,
    /// The alerts that fired at this step (written to `alerts.csv`).
    pub alerts: &'a [FiredAlert],
    /// True when a fired alert ends the run after this step (`on_alert = "stop"`).
    pub stopping: bool,
}

/// The end of [`Engine::run`] or [`Engine::run_steps`].
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// Steps run by this call.
    pub steps_run: usize,
    /// Steps completed in total.
    pub steps_done: usize,
    /// The metrics row of the last step this call ran; `None` when it ran none.
    pub last: Option<MetricsRow>,
    /// The alert that ended the run early (`on_alert = "stop"`); `None` when
    /// it ran its steps.
    pub stopped_by: Option<FiredAlert>,
}

impl<P: Policy> fmt::Debug for Engine<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("variant", &self.variant.name())
            .field("step", &self.step)
            .field("cursor", &self.cursor)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<P: Policy> Engine<P> {
    /// A fresh run at step 0. `variant` is compiled once and may be shared by many engines.
    pub fn new(
        config: EngineConfig,
        policy: P,
        tasks: Arc<dyn TaskSource>,
        sandbox: Sandbox,
        variant: Arc<RewardVariant>,
    ) -> Result<Engine<P>, EngineError> {
        config.validate().map_err(EngineError::Config)?;
        if tasks.train().is_empty() {
            return Err(EngineError::NoTrainingTasks);
        }
        let n = tasks.tasks().len();
        for (split, indices) in [("train", tasks.train()), ("held-out", tasks.held_out())] {
            if let Some(&index) = indices.iter().find(|&&i| i >= n) {
                return Err(tasks::TaskSetError::Index { index, split, len: n }.into());
            }
        }
        let gpu = match config.reward_device {
            RewardDevice::Cpu => None,
            RewardDevice::Cuda => Some(
                GpuProgram::new(variant.compiled().program())
                    .map_err(|e| EngineError::RewardDevice { source: Box::new(e) })?,
            ),
        };
        let summary =
            SummaryFeatures::from_schema(&rewardlab_rewards::feature_schema()).map_err(EngineError::Summary)?;
        let runtime = rollout::tool_runtime(config.runtime_threads, &sandbox, "rewardlab-engine")?;
        Ok(Engine {
            config,
            policy,
            tasks,
            sandbox,
            variant,
            gpu,
            summary,
            runtime,
            step: 0,
            cursor: 0,
            epoch_order: None,
            resumed: None,
            logs: None,
            alert_streaks: Vec::new(),
            shadows: None,
        })
    }

    /// Continues the run saved in `checkpoint_dir` (see [`latest_checkpoint`]):
    /// the config comes from the checkpoint, `policy` is restored from it, and
    /// `variant` must be the reward the run was started with. The next
    /// [`Engine::run`] restores the metrics files to the checkpoint's rows.
    pub fn resume(
        checkpoint_dir: &Path,
        mut policy: P,
        tasks: Arc<dyn TaskSource>,
        sandbox: Sandbox,
        variant: Arc<RewardVariant>,
    ) -> Result<Engine<P>, EngineError> {
        let state = checkpoint::read_engine(checkpoint_dir)?;
        if state.variant_fingerprint != variant.fingerprint() {
            return Err(EngineError::Checkpoint {
                path: checkpoint_dir.to_owned(),
                reason: format!(
                    "it was written under reward variant `{}`; the given variant `{}` differs (source or params)",
                    state.variant,
                    variant.name()
                ),
            });
        }
        let policy_state: P::State = checkpoint::read_policy_state(checkpoint_dir)?;
        policy
            .restore(policy_state)
            .map_err(|source| EngineError::Restore { path: checkpoint_dir.to_owned(), source: Box::new(source) })?;
        let mut engine = Engine::new(state.config, policy, tasks, sandbox, variant)?;
        engine.step = state.step;
        engine.cursor = state.cursor;
        engine.resumed = Some((checkpoint_dir.to_owned(), state.rollouts_bytes));
        engine.alert_streaks = state.alert_streaks;
        Ok(engine)
    }

    /// The run's settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The policy being trained, in its current state.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// Steps completed.
    pub fn steps_done(&self) -> usize {
        self.step
    }

    /// Runs the remaining steps, writing `metrics.csv`, `timings.csv`, the
    /// optional `rollouts.jsonl` and checkpoints under `out_dir`.
    pub fn run(&mut self, out_dir: &Path, progress: impl FnMut(&StepReport<'_>)) -> Result<RunSummary, EngineError> {
        self.run_steps(out_dir, usize::MAX, progress)
    }

    /// Like [`Engine::run`], but stops after at most `max_steps` steps.
    pub fn run_steps(
        &mut self,
        out_dir: &Path,
        max_steps: usize,
        mut progress: impl FnMut(&StepReport<'_>),
    ) -> Result<RunSummary, EngineError> {
        self.open_logs(out_dir)?;
        self.open_shadow(out_dir)?;
        let mut summary = RunSummary { steps_run: 0, steps_done: self.step, last: None, stopped_by: None };
        while self.step < self.config.total_steps && summary.steps_run < max_steps {
            let outcome = self.step()?;
            // Shadow rows go out before the step's checkpoint, so a resume keeps them.
            self.write_shadow(&outcome.shadow)?;
            let mut checkpoint = self.record(&outcome)?;
            let stop = if self.config.on_alert == OnAlert::Stop { outcome.alerts.first().cloned() } else { None };
            if stop.is_some() && checkpoint.is_none() {
                // A stopped run ends cleanly: resumable, and with the state it stopped in.
                checkpoint = Some(self.write_checkpoint()?);
            }
            progress(&StepReport {
                step: self.step,
                total_steps: self.config.total_steps,
                metrics: &outcome.metrics,
                timings: &outcome.timings,
                checkpoint: checkpoint.as_deref(),
                alerts: &outcome.alerts,
                stopping: stop.is_some(),
            });
            summary.steps_run += 1;
            summary.steps_done = self.step;
            summary.last = Some(outcome.metrics);
            if stop.is_some() {
                summary.stopped_by = stop;
                break;
            }
        }
        Ok(summary)
    }

    /// Runs one step and returns its rows, without writing anything: the
    /// phases of [`Phase`] in order (see the module docs).
    pub fn step(&mut self) -> Result<StepOutcome, EngineError> {
        if self.step >= self.config.total_steps {
            return Err(EngineError::Finished { steps: self.config.total_steps });
        }
        let step_no = self.step + 1;
        let batch = self.sample(step_no)?;
        let mut scores = self.score(&batch.records, step_no)?;
        let shadow_start = std::time::Instant::now();
        let shadow = self.shadow_rows(&batch.records, &scores.advantage, step_no)?;
        let shadow_s = shadow_start.elapsed().as_secs_f64();
        let update = self.update(&batch.episodes, &scores.advantage, step_no)?;
        self.step = step_no;
        let eval = self.evaluate(step_no)?;
        let table = std::mem::take(&mut scores.table);
        let mut outcome = record::outcome(step_no, batch, scores, update, eval, self.config.log_rollouts);
        outcome.shadow = shadow;
        outcome.timings.shadow_s = shadow_s;
        let program = self.variant.compiled().program();
        outcome.alerts =
            alerts::step_alerts(program, &table, &outcome.metrics, &mut self.alert_streaks).map_err(|source| {
                EngineError::Reward { step: step_no, variant: self.variant.name().to_owned(), source: Box::new(source) }
            })?;
        Ok(outcome)
    }
}
