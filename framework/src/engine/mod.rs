//! The GRPO engine: rollouts through the sandbox, rewards from a compiled
//! reward program, the clipped surrogate with a KL penalty, and the policy's
//! optimiser step — with per-step metrics, checkpoints and bit-identical resume.
//!
//! # One step
//!
//! 1. **Prompts.** P training tasks from the data cursor: the train split in a
//!    seeded permutation per epoch ([`seed`]), continued across epochs.
//! 2. **Rollouts** ([`rollout`]). P × G episodes, each seeded from (seed,
//!    step, prompt slot, rollout), run turn-synchronously: every active episode
//!    acts, all their tool calls run concurrently on the engine's tokio runtime
//!    (under the sandbox's 64-way limit), then each observes its results. The
//!    last of `max_turns` turns forces an answer; answers are parsed strictly.
//! 3. **Rewards.** Rollout records → [`rewardlab_rewards::feature_table`] →
//!    the variant's compiled program ([`RewardVariant`], compiled once) →
//!    `reward`, `adv`, `advantage` per rollout. Every group must have exactly
//!    G rollouts (`EvalOptions::group_size`), and a NaN is an error naming the rollout.
//! 4. **Update.** For each of `epochs` × `minibatches` (whole groups): current,
//!    sampling and reference log-probs per unit → [`loss::grpo_loss`] (f64,
//!    analytic `∂loss/∂logp` per unit) → [`Policy::backward`] →
//!    [`Policy::step`] with the scheduled learning rate.
//! 5. **Metrics** ([`metrics`]): one row of `metrics.csv` (and `timings.csv`),
//!    with held-out evaluation columns every `eval_every` steps.
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

pub mod checkpoint;
pub mod config;
mod error;
pub mod loss;
pub mod metrics;
mod rollout;
pub(crate) mod seed;
pub mod tasks;
pub mod toy;
mod variant;

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rewardlab_dsl::gpu::{GpuError, GpuProgram};
use rewardlab_dsl::{EvalOptions, FeatureRef, NonFinite};
use rewardlab_models::agent::{Policy, Sampling};
use rewardlab_rewards::rollout::Rollout;
use rewardlab_rewards::{FeatureOptions, feature_table};
use rewardlab_sandbox::Sandbox;
use serde::Serialize;
use tokio::runtime::Runtime;

pub use checkpoint::latest_checkpoint;
pub use config::{EngineConfig, EvalSampling, LrSchedule, OptimConfig, RewardDevice};
pub use error::EngineError;
pub use loss::{Aggregation, KlEstimator, LossConfig, LossOutput, grpo_loss};
pub use metrics::{MetricsRow, Timings};
pub use tasks::{EngineTask, TaskSet, TaskSource};
pub use variant::{RewardVariant, VariantError};

use checkpoint::EngineState;
use metrics::{CsvLog, JsonlLog, mean, mean_std, median};
use rollout::{EpisodeSpec, RolloutBatch, TurnLimits, run_batch};
use seed::{Stream, derive};

/// Files of a run directory.
pub const METRICS_FILE: &str = "metrics.csv";
pub const TIMINGS_FILE: &str = "timings.csv";
pub const ROLLOUTS_FILE: &str = "rollouts.jsonl";

/// A GRPO run over one policy, one task source and one reward variant.
pub struct Engine<P: Policy> {
    config: EngineConfig,
    policy: P,
    tasks: Arc<dyn TaskSource>,
    sandbox: Sandbox,
    variant: Arc<RewardVariant>,
    /// The variant's kernels when `reward_device = "cuda"`, compiled once per engine.
    gpu: Option<GpuProgram>,
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
}

/// What one step produced.
#[derive(Clone, Debug)]
pub struct StepOutcome {
    pub metrics: MetricsRow,
    pub timings: Timings,
    /// The step's rollouts with their rewards (empty unless `log_rollouts`).
    pub rollouts: Vec<LoggedRollout>,
}

/// A training rollout as logged to `rollouts.jsonl`: the contract's record plus the step and its outputs.
#[derive(Clone, Debug, Serialize)]
pub struct LoggedRollout {
    pub step: usize,
    #[serde(flatten)]
    pub rollout: Rollout,
    pub reward: f64,
    pub adv: f64,
    pub advantage: f64,
}

/// Handed to the progress callback after every step.
#[derive(Clone, Copy, Debug)]
pub struct StepReport<'a> {
    /// Steps completed (1-based index of this step).
    pub step: usize,
    pub total_steps: usize,
    pub metrics: &'a MetricsRow,
    pub timings: &'a Timings,
    /// The checkpoint written after this step, if one was.
    pub checkpoint: Option<&'a Path>,
}

/// The end of [`Engine::run`] or [`Engine::run_steps`].
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// Steps run by this call.
    pub steps_run: usize,
    /// Steps completed in total.
    pub steps_done: usize,
    pub last: Option<MetricsRow>,
}

/// Per-rollout summary columns, computed for the metrics whatever the reward reads.
struct Summary {
    fb: Vec<f64>,
    precision: Vec<f64>,
    recall: Vec<f64>,
    c: Vec<f64>,
    calls: Vec<f64>,
    turns: Vec<f64>,
    e: Vec<f64>,
    len: Vec<f64>,
    valid: Vec<f64>,
    truncated: Vec<f64>,
}

struct UpdateStats {
    loss: f64,
    kl: f64,
    clip_ratio: f64,
    grad_norm: f64,
    units: f64,
}

struct Logs {
    dir: PathBuf,
    metrics: CsvLog,
    timings: CsvLog,
    rollouts: Option<JsonlLog>,
    rollouts_bytes: u64,
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
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.runtime_threads)
            .max_blocking_threads(sandbox.limits().max_concurrent_calls.max(1))
            .thread_name("rewardlab-engine")
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        Ok(Engine {
            config,
            policy,
            tasks,
            sandbox,
            variant,
            gpu,
            runtime,
            step: 0,
            cursor: 0,
            epoch_order: None,
            resumed: None,
            logs: None,
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
        let policy_state: P::State = checkpoint::read_json(&checkpoint_dir.join("policy.json"))?;
        policy.restore(policy_state);
        let mut engine = Engine::new(state.config, policy, tasks, sandbox, variant)?;
        engine.step = state.step;
        engine.cursor = state.cursor;
        engine.resumed = Some((checkpoint_dir.to_owned(), state.rollouts_bytes));
        Ok(engine)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

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
        let mut summary = RunSummary { steps_run: 0, steps_done: self.step, last: None };
        while self.step < self.config.total_steps && summary.steps_run < max_steps {
            let outcome = self.step()?;
            let logs = self.logs.as_mut().expect("open_logs opened the logs");
            logs.metrics.write(&outcome.metrics)?;
            logs.timings.write(&outcome.timings)?;
            if let Some(log) = logs.rollouts.as_mut() {
                logs.rollouts_bytes += log.write_all(&outcome.rollouts)?;
            }
            let every = self.config.checkpoint_every;
            let checkpoint = if every > 0 && (self.step.is_multiple_of(every) || self.step == self.config.total_steps) {
                Some(self.write_checkpoint()?)
            } else {
                None
            };
            progress(&StepReport {
                step: self.step,
                total_steps: self.config.total_steps,
                metrics: &outcome.metrics,
                timings: &outcome.timings,
                checkpoint: checkpoint.as_deref(),
            });
            summary.steps_run += 1;
            summary.steps_done = self.step;
            summary.last = Some(outcome.metrics);
        }
        Ok(summary)
    }

    /// Runs one step and returns its metrics, without writing anything.
    pub fn step(&mut self) -> Result<StepOutcome, EngineError> {
        let c = self.config.clone();
        if self.step >= c.total_steps {
            return Err(EngineError::Finished { steps: c.total_steps });
        }
        let step_no = self.step + 1;
        let prompts = self.next_prompts();
        let tasks = self.tasks.clone();
        let all = tasks.tasks();
        let mut ids = HashSet::new();
        let mut specs = Vec::with_capacity(prompts.len() * c.group_size);
        for (slot, &t) in prompts.iter().enumerate() {
            let task = &all[t];
            // A task drawn twice in one step (at an epoch boundary) gets its own group.
            let group = if ids.insert(task.id.as_str()) { task.id.clone() } else { format!("{}#{slot}", task.id) };
            for g in 0..c.group_size {
                let seed = derive(c.seed, Stream::Rollout, &[self.step as u64, slot as u64, g as u64]);
                specs.push(EpisodeSpec { task, group: group.clone(), seed });
            }
        }
        let limits = TurnLimits { max_turns: c.max_turns, max_calls_per_turn: c.max_calls_per_turn };
        let sampling = Sampling::Sample { temperature: c.temperature };
        let batch = run_batch(&self.policy, &self.sandbox, &self.runtime, &specs, sampling, limits, step_no)?;
        drop(specs);

        let reward_start = Instant::now();
        let options = FeatureOptions { source: "the GRPO engine".into(), ..FeatureOptions::default() };
        let table = feature_table(self.variant.features(), &batch.records, &options)
            .map_err(|source| EngineError::Features { step: step_no, source: Box::new(source) })?;
        let eval_options = EvalOptions { group_size: Some(c.group_size), non_finite: NonFinite::Error };
        let reward_error = |source| EngineError::Reward {
            step: step_no,
            variant: self.variant.name().to_owned(),
            source: Box::new(source),
        };
        let outputs = match &self.gpu {
            None => self.variant.compiled().eval(&table.table, &eval_options).map_err(reward_error)?,
            Some(gpu) => gpu.eval(&table.table, &eval_options).map_err(|e| match e {
                GpuError::Eval(source) => reward_error(source),
                other => EngineError::RewardDevice { source: Box::new(other) },
            })?,
        };
        let n = batch.records.len();
        let (mut reward, mut adv, mut advantage) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        for (row, &i) in table.order.iter().enumerate() {
            reward[i] = outputs.reward[row];
            adv[i] = outputs.adv[row];
            advantage[i] = outputs.advantage[row];
        }
        let groups = table.table.groups();
        let zero_std = (0..groups)
            .filter(|&g| {
                let rows = &outputs.reward[table.table.group_rows(g)];
                rows.iter().all(|&r| r == rows[0])
            })
            .count();
        let summary = summarise(&batch.records, step_no)?;
        let reward_s = reward_start.elapsed().as_secs_f64();

        let update_start = Instant::now();
        let entropy = mean(&batch.episodes.iter().map(|e| self.policy.entropy(e)).collect::<Vec<_>>());
        let update = self.update(&batch.episodes, &advantage, step_no)?;
        let update_s = update_start.elapsed().as_secs_f64();
        let lr = c.optim_step(self.step).lr;
        self.step = step_no;

        let (reward_mean, reward_std) = mean_std(&reward);
        let (advantage_mean, advantage_std) = mean_std(&advantage);
        let mut metrics = MetricsRow {
            step: step_no,
            lr,
            loss: update.loss,
            reward_mean,
            reward_std,
            advantage_mean,
            advantage_std,
            zero_std_groups: zero_std as f64 / groups.max(1) as f64,
            kl: update.kl,
            clip_ratio: update.clip_ratio,
            entropy,
            grad_norm: update.grad_norm,
            units: update.units,
            turns: mean(&summary.turns),
            c: mean(&summary.c),
            calls: mean(&summary.calls),
            completion_len: mean(&summary.len),
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
        let eval_start = Instant::now();
        if c.eval_every > 0 && (step_no.is_multiple_of(c.eval_every) || step_no == c.total_steps) {
            self.evaluate(&mut metrics)?;
        }
        let eval_s = eval_start.elapsed().as_secs_f64();
        let timings = Timings {
            step: step_no,
            rollout_s: batch.policy_seconds,
            tools_s: batch.tool_seconds,
            reward_s,
            update_s,
            eval_s,
        };
        let rollouts = if c.log_rollouts {
            let RolloutBatch { records, .. } = batch;
            records
                .into_iter()
                .enumerate()
                .map(|(i, rollout)| LoggedRollout {
                    step: step_no,
                    rollout,
                    reward: reward[i],
                    adv: adv[i],
                    advantage: advantage[i],
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(StepOutcome { metrics, timings, rollouts })
    }

    /// The next P training tasks (indices into the task list).
    fn next_prompts(&mut self) -> Vec<usize> {
        let train = self.tasks.train().to_vec();
        let len = train.len() as u64;
        let mut out = Vec::with_capacity(self.config.prompts_per_step);
        for k in 0..self.config.prompts_per_step as u64 {
            let n = self.cursor + k;
            let epoch = n / len;
            if self.epoch_order.as_ref().is_none_or(|(e, _)| *e != epoch) {
                let mut order = train.clone();
                order.shuffle(&mut ChaCha8Rng::seed_from_u64(derive(self.config.seed, Stream::Data, &[epoch])));
                self.epoch_order = Some((epoch, order));
            }
            let (_, order) = self.epoch_order.as_ref().expect("set just above");
            out.push(order[(n % len) as usize]);
        }
        self.cursor += self.config.prompts_per_step as u64;
        out
    }

    /// Epochs × mini-batches of loss, backward and optimiser step.
    fn update(
        &mut self,
        episodes: &[P::Episode],
        advantage: &[f64],
        step_no: usize,
    ) -> Result<UpdateStats, EngineError> {
        let c = &self.config;
        let optim = c.optim_step(self.step);
        let old: Vec<Vec<f64>> = episodes.iter().map(|e| self.policy.sampled_logprobs(e)).collect();
        let g = c.group_size;
        let p = c.prompts_per_step;
        let (mut loss, mut kl, mut clip, mut grad) = (0.0, 0.0, 0.0, 0.0);
        let mut updates = 0usize;
        for _ in 0..c.epochs {
            for mb in 0..c.minibatches {
                let lo = mb * p / c.minibatches * g;
                let hi = (mb + 1) * p / c.minibatches * g;
                let refs: Vec<&P::Episode> = episodes[lo..hi].iter().collect();
                let logp = self.policy.logprobs(&refs);
                let logp_ref = self.policy.reference_logprobs(&refs);
                if logp.len() != refs.len() || logp_ref.len() != refs.len() {
                    return Err(EngineError::Policy {
                        step: step_no,
                        detail: format!(
                            "logprobs gave {} and reference_logprobs {} sequences for {} episodes",
                            logp.len(),
                            logp_ref.len(),
                            refs.len()
                        ),
                    });
                }
                let inputs: Vec<loss::SequenceInput<'_>> = (lo..hi)
                    .map(|i| loss::SequenceInput {
                        advantage: advantage[i],
                        logp: &logp[i - lo],
                        logp_old: &old[i],
                        logp_ref: &logp_ref[i - lo],
                    })
                    .collect();
                let out = grpo_loss(&c.loss, &inputs).map_err(|source| EngineError::Loss { step: step_no, source })?;
                self.policy.backward(&refs, &out.coeffs);
                let stats = self.policy.step(&optim);
                loss += out.loss;
                kl += out.mean_kl;
                clip += out.clip_ratio;
                grad += stats.grad_norm;
                updates += 1;
            }
        }
        let per = updates.max(1) as f64;
        let units = old.iter().map(Vec::len).sum::<usize>() as f64 / episodes.len().max(1) as f64;
        Ok(UpdateStats { loss: loss / per, kl: kl / per, clip_ratio: clip / per, grad_norm: grad / per, units })
    }

    /// Held-out evaluation (one rollout per task) into `metrics`'s eval columns.
    fn evaluate(&mut self, metrics: &mut MetricsRow) -> Result<(), EngineError> {
        let c = &self.config;
        let tasks = self.tasks.clone();
        let all = tasks.tasks();
        let limit = c.eval_tasks.unwrap_or(usize::MAX);
        let held: Vec<usize> = tasks.held_out().iter().copied().take(limit).collect();
        if held.is_empty() {
            return Ok(());
        }
        let mut ids = HashSet::new();
        let specs: Vec<EpisodeSpec<'_>> = held
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                let task = &all[t];
                let group = if ids.insert(task.id.as_str()) { task.id.clone() } else { format!("{}#{k}", task.id) };
                EpisodeSpec { task, group, seed: derive(c.seed, Stream::Eval, &[self.step as u64, t as u64]) }
            })
            .collect();
        let limits = TurnLimits { max_turns: c.max_turns, max_calls_per_turn: c.max_calls_per_turn };
        let batch = run_batch(
            &self.policy,
            &self.sandbox,
            &self.runtime,
            &specs,
            c.eval_sampling.sampling(),
            limits,
            self.step,
        )?;
        let summary = summarise(&batch.records, self.step)?;
        metrics.eval_fb_mean = Some(mean(&summary.fb));
        metrics.eval_fb_median = median(&summary.fb);
        metrics.eval_precision = Some(mean(&summary.precision));
        metrics.eval_recall = Some(mean(&summary.recall));
        metrics.eval_fb_ge_0_8 =
            Some(summary.fb.iter().filter(|&&f| f >= 0.8).count() as f64 / summary.fb.len() as f64);
        metrics.eval_turns = Some(mean(&summary.turns));
        Ok(())
    }

    /// Opens (or, after a resume, restores) the run's log files under `out_dir`.
    fn open_logs(&mut self, out_dir: &Path) -> Result<(), EngineError> {
        if self.logs.as_ref().is_some_and(|l| l.dir == out_dir) {
            return Ok(());
        }
        fs::create_dir_all(out_dir).map_err(|e| EngineError::io(out_dir, e))?;
        let metrics_path = out_dir.join(METRICS_FILE);
        let timings_path = out_dir.join(TIMINGS_FILE);
        let rollouts_path = out_dir.join(ROLLOUTS_FILE);
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
        self.logs = Some(Logs { dir: out_dir.to_owned(), metrics, timings, rollouts, rollouts_bytes });
        Ok(())
    }

    /// Writes the checkpoint of the current step under the open logs' directory.
    fn write_checkpoint(&self) -> Result<PathBuf, EngineError> {
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
        };
        let metrics = logs.dir.join(METRICS_FILE);
        let timings = logs.dir.join(TIMINGS_FILE);
        checkpoint::write(&dir, &state, &self.policy.state(), &[(METRICS_FILE, &metrics), (TIMINGS_FILE, &timings)])?;
        if self.config.keep_only_latest_checkpoint {
            checkpoint::prune_checkpoints(&logs.dir)?;
        }
        Ok(dir)
    }
}

/// Copies `from` over `to` atomically (temporary file + rename).
fn restore_file(from: &Path, to: &Path) -> Result<(), EngineError> {
    let tmp = to.with_extension(format!("restore-{}", std::process::id()));
    fs::copy(from, &tmp).map_err(|e| EngineError::io(from, e))?;
    fs::rename(&tmp, to).map_err(|e| EngineError::io(to, e))
}

/// The summary features of every rollout, in rollout order.
fn summarise(records: &[Rollout], step: usize) -> Result<Summary, EngineError> {
    let schema = rewardlab_rewards::feature_schema();
    let decl = |name: &str| schema.get(name).expect("the rewards schema declares every summary feature");
    let fb = decl("Fb");
    let fb_args = fb.params.iter().map(|p| p.default).collect();
    let refs = [
        FeatureRef::new(fb, Some("file"), fb_args),
        FeatureRef::new(decl("P"), Some("file"), Vec::new()),
        FeatureRef::new(decl("R"), Some("file"), Vec::new()),
        FeatureRef::new(decl("c"), None, Vec::new()),
        FeatureRef::new(decl("C"), None, Vec::new()),
        FeatureRef::new(decl("T"), None, Vec::new()),
        FeatureRef::new(decl("e"), None, Vec::new()),
        FeatureRef::new(decl("len"), None, Vec::new()),
        FeatureRef::new(decl("valid"), None, Vec::new()),
        FeatureRef::new(decl("truncated"), None, Vec::new()),
    ];
    let options = FeatureOptions { source: "the GRPO engine".into(), ..FeatureOptions::default() };
    let table = feature_table(&refs, records, &options)
        .map_err(|source| EngineError::Features { step, source: Box::new(source) })?;
    let column = |r: &FeatureRef| {
        let values = table.table.column(&r.key).expect("feature_table computed every requested column");
        let mut out = vec![0.0; values.len()];
        for (row, &i) in table.order.iter().enumerate() {
            out[i] = values[row];
        }
        out
    };
    Ok(Summary {
        fb: column(&refs[0]),
        precision: column(&refs[1]),
        recall: column(&refs[2]),
        c: column(&refs[3]),
        calls: column(&refs[4]),
        turns: column(&refs[5]),
        e: column(&refs[6]),
        len: column(&refs[7]),
        valid: column(&refs[8]),
        truncated: column(&refs[9]),
    })
}
