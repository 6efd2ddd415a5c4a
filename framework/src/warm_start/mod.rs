//! The SFT warm start of the Qwen3 policy (seed 002, FuseSearch's first stage): a scripted
//! searcher ([`ScriptedSearcher`]) explores each training task through the real sandbox a few
//! times with different seeds; each trajectory is scored with the reward features `F1(file)`
//! and `e` and kept only when F1 ≥ ρ_F and e ≥ ρ_e ([`JointFilter`]); the kept ones are
//! rendered in Qwen3's chat template with the loss on the assistant's tokens only
//! ([`render()`]) and trained on with [`rewardlab_models::sft`] (AdamW on the LoRA adapters).
//! GRPO then starts from the adapted model: its reference log-probs still come from the base
//! weights (adapters off).
//!
//! Invariants: the searcher's tool calls are rendered in the template, parsed back with the
//! policy's parser and only then run, so the text trained on is the text executed; the filter
//! reads the same feature functions as the reward programs; held-out tasks must not be passed
//! in (the caller hands over the train split).

mod filter;
mod render;
mod scripted;
mod spec;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rewardlab_models::sft::{SftOptions, SftTrainer, mean_nll, target_count};
use rewardlab_models::{Qwen3Model, QwenTokenizer};
use rewardlab_sandbox::{Sandbox, TreeKind};

use crate::engine::EngineTask;

pub use filter::{JointFilter, TrajectoryScore, record, score};
pub use render::{Conversation, DEFAULT_INSTRUCTIONS, SftExample, render};
pub use scripted::{
    IssueLiteral, IssuePattern, ScriptedSearcher, SearchTurn, SearcherOptions, Trajectory, escape_regex,
    issue_literals, issue_patterns, parse_calls, render_calls,
};
pub use spec::{WarmStartKind, WarmStartSpec};

/// Why a warm start failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WarmStartError {
    #[error("invalid warm start settings: {0}")]
    /// The warm start spec is out of range; the message names the field.
    Invalid(String),
    #[error("no tasks to warm start on")]
    /// The task list passed in is empty.
    NoTasks,
    #[error("task `{task}`: cannot open {repo} at {commit}")]
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
    #[error("scripted searcher: {0}")]
    /// The scripted searcher made a call the chat template cannot render or parse back.
    Render(String),
    #[error("task `{task}`: scoring the trajectory")]
    /// A trajectory's `F1(file)` or `e` could not be computed.
    Feature {
        /// The task's id.
        task: String,
        /// The feature error.
        source: Box<rewardlab_rewards::FeatureError>,
    },
    #[error("the joint filter (F1 >= {rho_f}, e >= {rho_e}) kept none of {total} trajectories")]
    /// No trajectory passed the joint filter.
    NothingKept {
        /// Trajectories scored.
        total: usize,
        /// The filter's ρ_F.
        rho_f: f64,
        /// The filter's ρ_e.
        rho_e: f64,
    },
    #[error("all {kept} kept trajectories are longer than {max_tokens} tokens")]
    /// Every kept trajectory is too long to train on.
    AllTooLong {
        /// Trajectories the filter kept.
        kept: usize,
        /// The token limit ([`WarmStartSpec::max_tokens`]).
        max_tokens: usize,
    },
    #[error("task `{task}`: rendering the trajectory")]
    /// A trajectory could not be rendered into tokens with the chat template.
    Template {
        /// The task's id.
        task: String,
        /// The model crate's error (usually the tokenizer's).
        source: rewardlab_models::Error,
    },
    #[error("SFT")]
    /// Supervised fine-tuning itself failed.
    Model(#[from] rewardlab_models::Error),
}

/// A scored trajectory of one task.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Index into the tasks passed in.
    pub task: usize,
    /// The scripted searcher's trajectory.
    pub trajectory: Trajectory,
    /// What the joint filter sees of it.
    pub score: TrajectoryScore,
}

/// One pass over the kept trajectories.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct EpochReport {
    /// Token-weighted mean of the batch losses during the pass (each before its own update).
    pub train_loss: f64,
    /// Mean loss over the whole kept set after the pass.
    pub loss_after: f64,
}

/// What a warm start did (serialisable, for a run's `warm_start.json`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SftReport {
    /// Trajectories drawn, and how many the joint filter kept.
    pub total: usize,
    /// Trajectories the joint filter kept.
    pub kept: usize,
    /// Kept trajectories dropped for length (see [`WarmStartSpec::max_tokens`]); the rest
    /// (`kept - too_long`) were trained on.
    pub too_long: usize,
    /// Mean `F1(file)` and `e` over all trajectories and over the kept ones.
    pub mean_f1_all: f64,
    /// Mean `e` over all trajectories.
    pub mean_e_all: f64,
    /// Mean `F1(file)` over the kept trajectories.
    pub mean_f1_kept: f64,
    /// Mean `e` over the kept trajectories.
    pub mean_e_kept: f64,
    /// Assistant tokens trained on, per epoch.
    pub trained_tokens: usize,
    /// Mean masked-token loss over the kept set before training.
    pub loss_before: f64,
    /// One report per epoch, in order.
    pub epochs: Vec<EpochReport>,
}

impl SftReport {
    /// The kept-set loss after the last epoch.
    pub fn loss_after(&self) -> f64 {
        self.epochs.last().map_or(self.loss_before, |e| e.loss_after)
    }
}

/// Draws `samples_per_task` scripted trajectories per task (seeded by `seed`, the task's
/// position and the sample), each within `max_turns` turns (answer included), and scores each.
pub fn collect(
    searcher: &ScriptedSearcher,
    sandbox: &Sandbox,
    tasks: &[EngineTask],
    samples_per_task: usize,
    max_turns: usize,
    seed: u64,
) -> Result<Vec<Candidate>, WarmStartError> {
    if max_turns < 2 {
        return Err(WarmStartError::Invalid(format!(
            "max_turns must be at least 2 (search, then answer), got {max_turns}"
        )));
    }
    let mut out = Vec::with_capacity(tasks.len() * samples_per_task);
    for (t, task) in tasks.iter().enumerate() {
        let tree = sandbox.tree(&task.repo, &task.commit, TreeKind::View).map_err(|source| WarmStartError::Tree {
            task: task.id.clone(),
            repo: task.repo.clone(),
            commit: task.commit.clone(),
            source: Box::new(source),
        })?;
        for k in 0..samples_per_task {
            let trajectory = searcher.run(sandbox, &tree, task, max_turns, derive_seed(seed, t as u64, k as u64))?;
            let score = score(&trajectory, task)?;
            out.push(Candidate { task: t, trajectory, score });
        }
    }
    Ok(out)
}

/// The SFT warm start: collect `searcher`'s scripted trajectories on `tasks` (the train
/// split; a study's searcher is [`ScriptedSearcher::default`]), keep those passing the joint
/// filter of `spec`, and train the model's LoRA adapters on them in place. `conversation` must
/// be how GRPO will prompt the policy (its instructions and turn limit), so the warm-started
/// behaviour is asked for in the same way.
#[allow(clippy::too_many_arguments)] // The context is all required data; an options struct would only rename it.
pub fn sft(
    searcher: &ScriptedSearcher,
    model: &Qwen3Model,
    tokenizer: &QwenTokenizer,
    conversation: &Conversation,
    tasks: &[EngineTask],
    sandbox: &Sandbox,
    spec: &WarmStartSpec,
    seed: u64,
) -> Result<SftReport, WarmStartError> {
    spec.validate().map_err(WarmStartError::Invalid)?;
    let tasks = &tasks[..spec.max_tasks.map_or(tasks.len(), |m| m.min(tasks.len()))];
    if tasks.is_empty() {
        return Err(WarmStartError::NoTasks);
    }
    let candidates = collect(searcher, sandbox, tasks, spec.samples_per_task, conversation.max_turns, seed)?;
    let filter = JointFilter { rho_f: spec.rho_f, rho_e: spec.rho_e };
    let kept: Vec<&Candidate> = candidates.iter().filter(|c| filter.keeps(&c.score)).collect();
    if kept.is_empty() {
        return Err(WarmStartError::NothingKept { total: candidates.len(), rho_f: spec.rho_f, rho_e: spec.rho_e });
    }
    // A sequence the model cannot take in one forward pass cannot be trained on: drop it and
    // say so, rather than cut it (a cut conversation teaches an unfinished search).
    let context = model.config().max_position_embeddings;
    let max_tokens = spec.max_tokens.map_or(context, |m| m.min(context));
    let (mut sequences, mut masks) = (Vec::new(), Vec::new());
    let mut too_long = 0;
    for c in &kept {
        let example = render(&c.trajectory, tokenizer, conversation)?;
        if example.tokens.len() > max_tokens {
            too_long += 1;
            continue;
        }
        sequences.push(example.tokens);
        masks.push(example.mask);
    }
    if sequences.is_empty() {
        return Err(WarmStartError::AllTooLong { kept: kept.len(), max_tokens });
    }

    let loss_before = mean_nll(model, &sequences, &masks, spec.batch_size)?;
    let mut trainer = SftTrainer::new(model, &SftOptions { learning_rate: spec.lr, ..SftOptions::default() })?
        .with_gradient_checkpointing(spec.gradient_checkpointing);
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, u64::MAX, 0));
    let mut order: Vec<usize> = (0..sequences.len()).collect();
    let mut epochs = Vec::with_capacity(spec.epochs);
    for _ in 0..spec.epochs {
        order.shuffle(&mut rng);
        let train_loss = trainer.epoch(model, &sequences, &masks, &order, spec.batch_size)?;
        let loss_after = mean_nll(model, &sequences, &masks, spec.batch_size)?;
        epochs.push(EpochReport { train_loss, loss_after });
    }
    let mean = |items: &mut dyn Iterator<Item = f64>| {
        let (sum, n) = items.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        if n == 0 { 0.0 } else { sum / n as f64 }
    };
    Ok(SftReport {
        total: candidates.len(),
        kept: kept.len(),
        too_long,
        mean_f1_all: mean(&mut candidates.iter().map(|c| c.score.f1)),
        mean_e_all: mean(&mut candidates.iter().map(|c| c.score.e)),
        mean_f1_kept: mean(&mut kept.iter().map(|c| c.score.f1)),
        mean_e_kept: mean(&mut kept.iter().map(|c| c.score.e)),
        trained_tokens: masks.iter().map(|m| target_count(m)).sum(),
        loss_before,
        epochs,
    })
}

/// A trajectory's seed: SplitMix64 steps over the run seed and the trajectory's position, so
/// each depends only on where it is, never on how many were drawn before it.
fn derive_seed(seed: u64, task: u64, sample: u64) -> u64 {
    [task, sample].iter().fold(splitmix64(seed ^ 0x5746_5354_4152_5421), |acc, &x| splitmix64(acc ^ splitmix64(x)))
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
