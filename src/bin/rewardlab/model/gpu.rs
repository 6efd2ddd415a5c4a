//! `rewardlab model gpu-step`: the Qwen3 part of `scripts/gpu-check.sh`. On a checkpoint (a
//! random one with Qwen3-0.6B's shapes), with the seeds' adapters (r = 32 on every
//! projection): one batched turn of sampling, one scoring pass over those rollouts and the
//! update's backward pass and AdamW step on them, timed directly (tokens/s; the gradient norm
//! must come out finite and positive), then one GRPO step of the real engine on a small
//! synthetic task set (sandbox tools included), whose phase split is printed. Peak GPU memory
//! is the script's to measure (`nvidia-smi`), since it covers the whole process.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use rewardlab_framework::engine::{Engine, EngineConfig, LrSchedule, OptimConfig, RewardVariant, TaskSet};
use rewardlab_framework::synthetic::{self, SyntheticConfig};
use rewardlab_models::agent::{Policy, Sampling, TaskPrompt, TurnInfo};
use rewardlab_models::agent_qwen3::{AgentOptions, Qwen3Agent};
use rewardlab_models::policy::PolicyOptions;
use rewardlab_models::{DType, Device, LoraConfig};
use rewardlab_sandbox::{Limits, RepoStore, Sandbox};

/// The reward of the engine step: CodeGrep's v3 needs the whole feature pipeline.
const REWARD: &str = include_str!("../../../../rewards/codegrep_v3.reward");

pub fn gpu_step(
    checkpoint: &Path,
    device: &str,
    bf16: bool,
    rollouts: usize,
    turn_tokens: usize,
) -> anyhow::Result<()> {
    let device = match device {
        "cpu" => Device::Cpu,
        "cuda" => rewardlab_models::open_cuda(0).map_err(|e| {
            anyhow::anyhow!("opening CUDA device 0: {e} (this needs a GPU and a build with `--features model-cuda`)")
        })?,
        other => anyhow::bail!("--device must be cpu or cuda, not {other}"),
    };
    let dtype = if bf16 { DType::BF16 } else { DType::F32 };
    let lora = LoraConfig { r: 32, alpha: 64.0, seed: 1, ..LoraConfig::default() };
    let options = AgentOptions {
        max_new_tokens: turn_tokens,
        max_completion_tokens: 2 * turn_tokens,
        sample_batch: rollouts,
        score_batch: rollouts.min(4),
        instructions: "Find the files to change.".into(),
        ..AgentOptions::default()
    };
    let load = || -> anyhow::Result<Qwen3Agent> {
        let policy = PolicyOptions { dtype, device: device.clone(), lora: lora.clone(), ..PolicyOptions::default() };
        Qwen3Agent::load(checkpoint, &policy, options.clone())
            .with_context(|| format!("loading {}", checkpoint.display()))
    };
    // The engine step's settings; the direct update below takes its optimiser step from them.
    let group = rollouts.div_ceil(2).max(2);
    let engine_config = EngineConfig {
        seed: 1,
        group_size: group,
        prompts_per_step: 2,
        total_steps: 1,
        max_turns: 2,
        minibatches: 1,
        checkpoint_every: 1,
        eval_every: 0,
        optim: OptimConfig { lr: 1e-5, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..EngineConfig::default()
    };
    let start = Instant::now();
    let mut agent = load()?;
    let load_s = start.elapsed().as_secs_f64();

    // Sampling: one turn of `rollouts` rows together; then scoring every rollout's tokens.
    let task = TaskPrompt { id: "t".into(), text: "Saving a session loses the cookies the login handler set.".into() };
    let mut episodes = (0..rollouts as u64)
        .map(|seed| agent.begin(&task, Sampling::Sample { temperature: 1.0 }, seed))
        .collect::<Result<Vec<_>, _>>()?;
    let info = TurnInfo { index: 0, max_turns: 2, max_calls_per_turn: 8, must_answer: false };
    let start = Instant::now();
    agent.act(&mut episodes.iter_mut().collect::<Vec<_>>(), info)?;
    let sample_s = start.elapsed().as_secs_f64();
    let generated: usize = episodes.iter().map(|e| agent.completion_tokens(e)).sum();
    let scored: usize = episodes.iter().map(|e| e.rollout().tokens().len()).sum();
    let refs: Vec<_> = episodes.iter().collect();
    let start = Instant::now();
    let logprobs = agent.logprobs(&refs)?;
    let score_s = start.elapsed().as_secs_f64();
    // The update's backward pass and AdamW step, with coefficients ±1 on every generated token
    // (alternating by rollout) so that every adapter gets a gradient: the engine step below
    // cannot promise one, since a random model's rollouts all earn 0 and equal rewards give
    // zero advantages, whose backward pass the policy skips.
    let coeffs: Vec<Vec<f64>> =
        logprobs.iter().enumerate().map(|(i, lp)| vec![if i % 2 == 0 { 1.0 } else { -1.0 }; lp.len()]).collect();
    let start = Instant::now();
    agent.backward(&refs, &coeffs)?;
    let stats = agent.step(&engine_config.optim_step(0))?;
    let backward_s = start.elapsed().as_secs_f64();
    let trained: usize = logprobs.iter().map(Vec::len).sum();
    drop(refs);
    drop(episodes);
    // The rows so far go out now: a failing engine step below must not hide them.
    let shape = agent.model().config();
    println!(
        "| Qwen3 on {device:?} ({dtype:?}, hidden {}, {} layers, LoRA r = 32) | value |",
        shape.hidden_size, shape.num_hidden_layers
    );
    println!("|---|---|");
    println!("| load (s) | {load_s:.1} |");
    println!(
        "| sampling, {rollouts} rows × ≤{turn_tokens} tokens | {:.0} tokens/s ({generated} in {sample_s:.2} s) |",
        generated as f64 / sample_s
    );
    println!(
        "| scoring (training path), {rollouts} rollouts | {:.0} tokens/s ({scored} in {score_s:.2} s) |",
        scored as f64 / score_s
    );
    println!(
        "| backward + AdamW step (checkpointed, micro-batch {}), {rollouts} rollouts | {:.0} generated tokens/s \
         ({trained} in {backward_s:.2} s; grad norm {:.3e}) |",
        options.score_batch,
        trained as f64 / backward_s,
        stats.grad_norm
    );
    anyhow::ensure!(
        stats.grad_norm.is_finite() && stats.grad_norm > 0.0,
        "the backward pass gave a gradient norm of {} (expected finite and positive)",
        stats.grad_norm
    );

    // One GRPO step of the engine on a small synthetic task set.
    let work = WorkDir::new()?;
    let config = SyntheticConfig { seed: 1, files: 60, commits: 2, tasks: 8, held_out_fraction: 0.25 };
    let source = synthetic::generate(&config, &work.0.join("source")).context("a synthetic task source")?;
    let tasks = Arc::new(TaskSet::from_synthetic(&source, 0.15).context("synthetic tasks")?);
    let store = Arc::new(RepoStore::open(work.0.join("store")).context("a repo store")?);
    let sandbox = Sandbox::new(store, Limits::default());
    let variant = Arc::new(RewardVariant::compile("codegrep_v3", REWARD, group, &[]).context("the reward")?);
    let mut engine = Engine::new(engine_config, agent, tasks, sandbox, variant).context("the engine")?;
    let mut timings = None;
    let start = Instant::now();
    let summary =
        engine.run(&work.0.join("run"), |report| timings = Some(report.timings.clone())).context("one GRPO step")?;
    let step_s = start.elapsed().as_secs_f64();
    let t = timings.context("the step reported no timings")?;
    let row = summary.last.context("the step wrote no metrics row")?;
    let engine_generated = row.completion_len * (2 * group) as f64;

    println!("| GRPO step, 2 prompts × {group}, 2 turns | {step_s:.1} s, {engine_generated:.0} tokens generated |");
    println!(
        "| phase split (s) | rollout {:.2}, tools {:.2}, reward {:.3}, update {:.2}, checkpoint and rest {:.2} |",
        t.rollout_s,
        t.tools_s,
        t.reward_s,
        t.update_s,
        (step_s - t.rollout_s - t.tools_s - t.reward_s - t.update_s - t.eval_s).max(0.0)
    );
    println!("| step metrics | loss {:.4}, kl {:.2e}, grad norm {:.3e} |", row.loss, row.kl, row.grad_norm);
    Ok(())
}

/// A scratch directory removed on drop.
struct WorkDir(std::path::PathBuf);

impl WorkDir {
    fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("rewardlab-gpu-step-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
