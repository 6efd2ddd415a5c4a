//! `rewardlab model`: checkpoints for tests and the oracle check against Hugging Face
//! `transformers` (`scripts/transformers-oracle.sh`).
//!
//! - `tiny DIR`: a tiny random Qwen3 checkpoint (config.json, model.safetensors,
//!   tokenizer.json) for smoke tests.
//! - `random DIR --shape 0.6b|14b`: random f32 weights with a published Qwen3 shape.
//! - `train-adapter CHECKPOINT OUT`: fresh LoRA adapters trained by a few SFT steps on a
//!   fixed token sequence, saved in PEFT format.
//! - `logits CHECKPOINT OUT`: one token sequence's logits and per-token log-probs through the
//!   training path and through the KV-cached sampling path (a prefill, then one token at a
//!   time), optionally with a PEFT adapter, as a safetensors file.
//! - `gpu-step CHECKPOINT`: one GRPO step on a device (`model/gpu.rs`).

mod gpu;

use std::path::{Path, PathBuf};

use anyhow::Context;
use rewardlab_models::qwen3::Qwen3Config;
use rewardlab_models::state_tensors::{StateTensor, write_state_tensors};
use rewardlab_models::{DType, Device, LoraConfig, Pass, Qwen3Model, Tensor};

#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Shape {
    /// Qwen3-0.6B (hidden 1024, 28 layers, tied embeddings).
    #[value(name = "0.6b")]
    Qwen3_0_6b,
    /// Qwen3-14B (hidden 5120, 40 layers): ~59 GB of f32 weights.
    #[value(name = "14b")]
    Qwen3_14b,
}

#[derive(Debug, clap::Subcommand)]
enum ModelCommand {
    /// Write a tiny random Qwen3 checkpoint with a small byte-level BPE tokenizer that keeps Qwen's special tokens.
    Tiny {
        /// Directory to write into (created if missing).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Seed of the random weights and the tokenizer's training corpus.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Write a random f32 checkpoint with a published Qwen3 shape (and the tiny tokenizer).
    Random {
        /// Directory to write into (created if missing).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Which shape.
        #[arg(long, value_enum, default_value = "0.6b")]
        shape: Shape,
        /// Seed of the random weights.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Safetensors shards to split the weights into.
        #[arg(long, default_value_t = 1)]
        shards: usize,
    },
    /// Train fresh LoRA adapters (all projections) for a few SFT steps and save them in PEFT format.
    TrainAdapter {
        /// A checkpoint directory.
        #[arg(value_name = "CHECKPOINT")]
        checkpoint: PathBuf,
        /// The adapter directory to write.
        #[arg(value_name = "OUT")]
        out: PathBuf,
        /// SFT steps.
        #[arg(long, default_value_t = 3)]
        steps: usize,
        /// The adapters' rank (α is twice it).
        #[arg(long, default_value_t = 4)]
        rank: usize,
        /// Seed of A's initialisation and of the training tokens.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// One GRPO step of the engine with the Qwen3 + LoRA agent on a device (for scripts/gpu-check.sh):
    /// sampling, scoring and backward + AdamW tokens/s measured directly, then the engine step's
    /// phase split.
    GpuStep {
        /// A checkpoint directory (e.g. written by `rewardlab model random`).
        #[arg(value_name = "CHECKPOINT")]
        checkpoint: PathBuf,
        /// `cuda` (device 0) or `cpu`.
        #[arg(long, default_value = "cuda")]
        device: String,
        /// Load the weights in bf16 (f32 otherwise).
        #[arg(long)]
        bf16: bool,
        /// Rollouts sampled together (the engine step: 2 prompts × this / 2).
        #[arg(long, default_value_t = 8)]
        rollouts: usize,
        /// Tokens per turn.
        #[arg(long, default_value_t = 256)]
        turn_tokens: usize,
    },
    /// Write one sequence's logits and log-probs, training path and cached path, to a safetensors file.
    Logits {
        /// A checkpoint directory.
        #[arg(value_name = "CHECKPOINT")]
        checkpoint: PathBuf,
        /// The safetensors file to write (`ids`, `train_logits`, `cached_logits`,
        /// `train_logprobs`, `cached_logprobs`, all f32).
        #[arg(value_name = "OUT")]
        out: PathBuf,
        /// A PEFT adapter directory to load onto the model.
        #[arg(long)]
        adapter: Option<PathBuf>,
        /// Tokens in the sequence.
        #[arg(long, default_value_t = 24)]
        len: usize,
        /// Seed of the token ids.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

pub fn run(args: ModelArgs) -> anyhow::Result<u8> {
    match args.command {
        ModelCommand::Tiny { dir, seed } => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            rewardlab_models::tiny::write_tiny_checkpoint(&dir, seed)
                .with_context(|| format!("writing a tiny checkpoint to {}", dir.display()))?;
            println!("wrote a tiny Qwen3 checkpoint to {}", dir.display());
        }
        ModelCommand::Random { dir, shape, seed, shards } => {
            let cfg = match shape {
                Shape::Qwen3_0_6b => Qwen3Config::qwen3_0_6b(),
                Shape::Qwen3_14b => Qwen3Config::qwen3_14b(),
            };
            let cfg = Qwen3Config { torch_dtype: Some("float32".to_owned()), ..cfg };
            rewardlab_models::tiny::write_checkpoint_with(&dir, seed, &cfg, shards)
                .with_context(|| format!("writing a random checkpoint to {}", dir.display()))?;
            println!("wrote a random Qwen3 checkpoint of shape {shape:?} to {}", dir.display());
        }
        ModelCommand::TrainAdapter { checkpoint, out, steps, rank, seed } => {
            train_adapter(&checkpoint, &out, steps, rank, seed)?;
            println!("wrote a trained adapter ({steps} SFT steps) to {}", out.display());
        }
        ModelCommand::GpuStep { checkpoint, device, bf16, rollouts, turn_tokens } => {
            gpu::gpu_step(&checkpoint, &device, bf16, rollouts, turn_tokens)?;
        }
        ModelCommand::Logits { checkpoint, out, adapter, len, seed } => {
            let (train, cached) = logits(&checkpoint, &out, adapter.as_deref(), len, seed)?;
            println!(
                "wrote {len} tokens' logits to {} (training vs cached path: max |Δ| {train:.3e}, log-probs {cached:.3e})",
                out.display()
            );
        }
    }
    Ok(0)
}

/// Deterministic pseudo-random token ids below `vocab`.
fn token_ids(len: usize, seed: u64, vocab: usize) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % vocab as u64) as u32
        })
        .collect()
}

fn train_adapter(checkpoint: &Path, out: &Path, steps: usize, rank: usize, seed: u64) -> anyhow::Result<()> {
    let lora = LoraConfig { r: rank, alpha: 2.0 * rank as f64, seed, ..LoraConfig::default() };
    let model = Qwen3Model::load(checkpoint, DType::F32, &Device::Cpu, Some(&lora))
        .with_context(|| format!("loading {}", checkpoint.display()))?;
    let vocab = model.config().vocab_size.min(480);
    let sequence = token_ids(32, seed, vocab);
    // The second half is the target, as an assistant turn after its prompt would be.
    let mask: Vec<bool> = (0..sequence.len()).map(|i| i >= sequence.len() / 2).collect();
    let options = rewardlab_models::sft::SftOptions { learning_rate: 1e-2, ..Default::default() };
    let mut sft = rewardlab_models::sft::SftTrainer::new(&model, &options).context("an SFT trainer")?;
    for _ in 0..steps {
        sft.step(&model, std::slice::from_ref(&sequence), std::slice::from_ref(&mask)).context("an SFT step")?;
    }
    rewardlab_models::peft::save_adapter(&model, out, Some(&checkpoint.display().to_string()))
        .with_context(|| format!("saving the adapter to {}", out.display()))
}

/// Writes the logits file; returns the largest differences between the two paths (logits,
/// log-probs), which the oracle script also checks against `transformers`.
fn logits(checkpoint: &Path, out: &Path, adapter: Option<&Path>, len: usize, seed: u64) -> anyhow::Result<(f32, f32)> {
    anyhow::ensure!(len >= 4, "--len must be at least 4");
    let lora = match adapter {
        Some(dir) => {
            let path = dir.join("adapter_config.json");
            Some(rewardlab_models::peft::read_adapter_config(dir)?.lora_config(&path)?)
        }
        None => None,
    };
    let model = Qwen3Model::load(checkpoint, DType::F32, &Device::Cpu, lora.as_ref())
        .with_context(|| format!("loading {}", checkpoint.display()))?;
    if let Some(dir) = adapter {
        rewardlab_models::peft::load_adapter(&model, dir).with_context(|| format!("loading {}", dir.display()))?;
    }
    let ids = token_ids(len, seed, model.config().vocab_size);
    let input = Tensor::from_slice(&ids, (1, len), &Device::Cpu)?;
    let train = model.forward_train(&input, Pass::TRAIN)?.squeeze(0)?;
    // The cached path: a prefill of half the sequence, then one token at a time.
    let mut cache = model.new_cache(1);
    let half = len / 2;
    let mut pieces = Vec::with_capacity(len - half + 1);
    let prefill = Tensor::from_slice(&ids[..half], (1, half), &Device::Cpu)?;
    pieces.push(model.forward_cached(&prefill, &[vec![true; half]], &mut cache, Pass::SAMPLE, false)?);
    for &id in &ids[half..] {
        let step = Tensor::from_slice(&[id], (1, 1), &Device::Cpu)?;
        pieces.push(model.forward_cached(&step, &[vec![true]], &mut cache, Pass::SAMPLE, false)?);
    }
    let cached = Tensor::cat(&pieces, 1)?.squeeze(0)?;
    let next: Vec<u32> = ids[1..].to_vec();
    let next = Tensor::from_slice(&next, (len - 1, 1), &Device::Cpu)?;
    let logprobs = |logits: &Tensor| -> anyhow::Result<Tensor> {
        let rows = logits.narrow(0, 0, len - 1)?;
        let shifted = rows.broadcast_sub(&rows.max_keepdim(1)?)?;
        let lsm = shifted.broadcast_sub(&shifted.exp()?.sum_keepdim(1)?.log()?)?;
        Ok(lsm.gather(&next, 1)?.squeeze(1)?)
    };
    let (train_lp, cached_lp) = (logprobs(&train)?, logprobs(&cached)?);
    let max_diff = |a: &Tensor, b: &Tensor| -> anyhow::Result<f32> {
        Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
    };
    let diffs = (max_diff(&train, &cached)?, max_diff(&train_lp, &cached_lp)?);
    let vocab = model.config().vocab_size;
    let flat = |t: &Tensor| -> anyhow::Result<Vec<f32>> { Ok(t.flatten_all()?.to_vec1::<f32>()?) };
    let tensors = vec![
        StateTensor { name: "ids".into(), shape: vec![len], data: ids.iter().map(|&i| i as f32).collect() },
        StateTensor { name: "train_logits".into(), shape: vec![len, vocab], data: flat(&train)? },
        StateTensor { name: "cached_logits".into(), shape: vec![len, vocab], data: flat(&cached)? },
        StateTensor { name: "train_logprobs".into(), shape: vec![len - 1], data: flat(&train_lp)? },
        StateTensor { name: "cached_logprobs".into(), shape: vec![len - 1], data: flat(&cached_lp)? },
    ];
    write_state_tensors(out, &tensors).with_context(|| format!("writing {}", out.display()))?;
    Ok(diffs)
}
