//! Training a study's runs with the Qwen3 + LoRA policy (`policy = { kind = "qwen3", ... }`):
//! each run loads the checkpoint with fresh adapters seeded by the run's seed, trains through
//! the generic runner (`train::train_with`) and saves its adapter in PEFT format under
//! `results/<study>/<run>/adapter/` when it completes.
//!
//! With `warm_start = "sft"` a fresh run first fine-tunes its adapters on the
//! scripted searcher's filtered trajectories (`framework::warm_start`), then GRPO
//! continues from them; the KL reference is then those adapters, frozen
//! (`reference = "sft"`, the default), or the base model (`reference = "base"`).
//! A resumed run gets its reference back from the checkpoint.
//!
//! With `tiny_if_missing = true` a missing checkpoint is written first (the tiny random model
//! of `rewardlab model tiny`), so `studies/qwen3_tiny.toml` runs anywhere.

use std::path::Path;

use anyhow::{Context, Result, bail};
use rewardlab_framework::study::qwen3::KlReference;
use rewardlab_framework::study::{PolicyContext, Qwen3Spec, RunSpec, Study};
use rewardlab_framework::warm_start::{self, Conversation, ScriptedSearcher, WarmStartSpec};
use rewardlab_models::agent_qwen3::Qwen3Agent;

use super::train::train_with;

/// The SFT warm start's report, inside a run's directory.
pub const WARM_START_REPORT: &str = "warm_start.json";

/// Where a run's trained adapter goes, inside its run directory.
pub const ADAPTER_DIR: &str = "adapter";

/// Trains every run of `runs` with the Qwen3 policy of `spec` (see the module docs).
pub fn train(study: &Study, spec: &Qwen3Spec, runs: &[RunSpec], jobs: usize, study_dir: &Path) -> Result<()> {
    ensure_checkpoint(spec)?;
    let device = rewardlab_framework::study::qwen3::device(spec).context("the model's device")?;
    let make_policy = |run: &RunSpec, context: &PolicyContext<'_>| -> Result<Qwen3Agent> {
        // The adapters' initial A is drawn from the run's seed, so variants at one seed index
        // start from the same adapters (common random numbers, like the rollouts).
        let agent = rewardlab_framework::study::qwen3::load_agent(spec, &device, run.seed)
            .with_context(|| format!("loading the Qwen3 checkpoint {}", spec.model.display()))?;
        if let Some(warm) = &spec.warm_start
            && !context.resuming
        {
            warm_start(study, run, &agent, warm, context, study_dir)?;
            if spec.reference == KlReference::Sft {
                agent.freeze_reference().context("freezing the SFT adapters as the KL reference")?;
            }
        }
        Ok(agent)
    };
    let save_adapter = |_: &RunSpec, engine: &rewardlab_framework::engine::Engine<Qwen3Agent>, dir: &Path| {
        let adapter = dir.join(ADAPTER_DIR);
        engine.policy().save_adapter(&adapter).with_context(|| format!("saving the adapter to {}", adapter.display()))
    };
    train_with(study, runs, jobs, study_dir, make_policy, save_adapter)
}

/// Seed 002's stage 1 before GRPO: the scripted searcher's trajectories on the
/// training tasks, kept by the joint filter (F1 ≥ ρ_F and e ≥ ρ_e), train the
/// run's fresh adapters in place; the report goes to `<run>/warm_start.json`.
/// A resumed run skips this: its checkpoint holds the adapters.
fn warm_start(
    study: &Study,
    run: &RunSpec,
    agent: &Qwen3Agent,
    spec: &WarmStartSpec,
    context: &PolicyContext<'_>,
    study_dir: &Path,
) -> Result<()> {
    let all = context.tasks.tasks();
    let train: Vec<_> = context.tasks.train().iter().map(|&i| all[i].clone()).collect();
    let conversation =
        Conversation { instructions: agent.options().instructions.clone(), max_turns: study.training.max_turns };
    let searcher = ScriptedSearcher::default();
    let report = warm_start::sft(
        &searcher,
        agent.model(),
        agent.tokenizer(),
        &conversation,
        &train,
        context.sandbox,
        spec,
        run.seed,
    )
    .with_context(|| format!("SFT warm start of {}", run.dir.display()))?;
    let dir = study_dir.join(&run.dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(WARM_START_REPORT);
    let json = serde_json::to_string_pretty(&report).context("serialising the warm-start report")?;
    std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))
}

/// Checks that `spec.model` holds a checkpoint, writing the tiny one there first when it is
/// missing and `tiny_if_missing` is set.
fn ensure_checkpoint(spec: &Qwen3Spec) -> Result<()> {
    if spec.model.join("config.json").exists() {
        return Ok(());
    }
    if !spec.tiny_if_missing {
        bail!(
            "no Qwen3 checkpoint at {} (config.json missing); point `model` at a Hugging Face \
             checkpoint directory, or set `tiny_if_missing = true` for a tiny random one",
            spec.model.display()
        );
    }
    // Written beside the target and renamed into place, so a killed write leaves no half checkpoint.
    let parent = spec.model.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = parent.join(format!(".tiny-checkpoint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    rewardlab_models::tiny::write_tiny_checkpoint(&tmp, 0)
        .with_context(|| format!("writing a tiny checkpoint to {}", tmp.display()))?;
    match std::fs::rename(&tmp, &spec.model) {
        Ok(()) => Ok(()),
        // Another runner (a concurrent Slurm task) won the race: its checkpoint is identical.
        Err(_) if spec.model.join("config.json").exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("moving the tiny checkpoint to {}", spec.model.display())),
    }
}
