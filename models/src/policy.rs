//! The token-level policy facade (wrapped for the GRPO engine by `agent_qwen3`): sample groups of rollouts, score
//! sequences (differentiably with adapters on, as the frozen reference with them off), and
//! hand its trainable variables to the optimizer.

use std::path::Path;

use candle_core::{D, DType, Device, Tensor, Var};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::lora::LoraConfig;
use crate::qwen3::{Pass, Qwen3Model};
use crate::sampling::{self, SamplingParams};
use crate::tokenizer::QwenTokenizer;
use crate::{Error, Result};

pub use crate::sampling::Generation;

/// How to load a [`Qwen3Policy`].
#[derive(Debug, Clone)]
pub struct PolicyOptions {
    /// The dtype the base weights are loaded in (adapters are always f32).
    pub dtype: DType,
    /// Where the model runs.
    pub device: Device,
    /// The adapters to create on load.
    pub lora: LoraConfig,
    /// Stop tokens are filled in from the tokenizer (`<|im_end|>`, `<|endoftext|>`) when empty.
    pub sampling: SamplingParams,
    /// Seeds the sampler.
    pub seed: u64,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        Self {
            dtype: DType::F32,
            device: Device::Cpu,
            lora: LoraConfig::default(),
            sampling: SamplingParams::default(),
            seed: 0,
        }
    }
}

/// Qwen3 + LoRA + tokenizer + sampler.
#[derive(Debug)]
pub struct Qwen3Policy {
    model: Qwen3Model,
    tokenizer: QwenTokenizer,
    sampling: SamplingParams,
    rng: ChaCha8Rng,
}

impl Qwen3Policy {
    /// Loads a Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json).
    pub fn load(dir: &Path, options: PolicyOptions) -> Result<Self> {
        let model = Qwen3Model::load(dir, options.dtype, &options.device, Some(&options.lora))?;
        let tokenizer = QwenTokenizer::from_file(&dir.join("tokenizer.json"))?;
        Ok(Self::from_parts(model, tokenizer, options.sampling, options.seed))
    }

    /// Assembles a policy from a loaded model and tokenizer.
    pub fn from_parts(model: Qwen3Model, tokenizer: QwenTokenizer, mut sampling: SamplingParams, seed: u64) -> Self {
        if sampling.stop_tokens.is_empty() {
            sampling.stop_tokens = vec![tokenizer.special().im_end, tokenizer.special().endoftext];
        }
        Self { model, tokenizer, sampling, rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// The model, adapters included.
    pub fn model(&self) -> &Qwen3Model {
        &self.model
    }

    /// The tokenizer prompts are encoded with.
    pub fn tokenizer(&self) -> &QwenTokenizer {
        &self.tokenizer
    }

    /// The sampling settings, stop tokens filled in.
    pub fn sampling(&self) -> &SamplingParams {
        &self.sampling
    }

    /// Samples one assistant turn per prompt (a group is the same prompt repeated), in one batch.
    pub fn generate(&mut self, prompts: &[Vec<u32>]) -> Result<Vec<Generation>> {
        sampling::generate(&self.model, prompts, &self.sampling, Pass::SAMPLE, &mut self.rng)
    }

    /// Per-token log-probs `(batch, max_len)`: entry `[b, t]` is `log π(seq[t] | seq[..t])`
    /// where `masks[b][t]`, and 0 elsewhere (position 0 has no prediction). Differentiable in
    /// the adapters when `lora_on`; with adapters off it is the detached reference.
    pub fn logprobs(&self, sequences: &[Vec<u32>], masks: &[Vec<bool>], lora_on: bool) -> Result<Tensor> {
        let pass = if lora_on { Pass::TRAIN } else { Pass::REFERENCE };
        let lp = token_logprobs(&self.model, sequences, masks, pass)?;
        Ok(if lora_on { lp } else { lp.detach() })
    }

    /// Adapter gradients of `loss_of_logprobs(self.logprobs(sequences, masks, true))` with
    /// per-layer gradient checkpointing (the memory-lean form for long rollouts).
    pub fn backward_checkpointed(
        &self,
        sequences: &[Vec<u32>],
        masks: &[Vec<bool>],
        loss_of_logprobs: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<(Tensor, candle_core::backprop::GradStore)> {
        backward_checkpointed(&self.model, sequences, masks, loss_of_logprobs)
    }

    /// The model and tokenizer, e.g. to hand an SFT-trained policy to the GRPO agent
    /// ([`crate::agent_qwen3::Qwen3Agent::from_policy`]).
    pub fn into_parts(self) -> (Qwen3Model, QwenTokenizer) {
        (self.model, self.tokenizer)
    }

    /// The trainable adapter matrices.
    pub fn lora_vars(&self) -> Vec<Var> {
        self.model.lora_vars()
    }
}

/// Masked per-token log-probs of right-padded `sequences` under `model` (see
/// [`Qwen3Policy::logprobs`]); the log-softmax is built from primitives so it differentiates.
pub fn token_logprobs(model: &Qwen3Model, sequences: &[Vec<u32>], masks: &[Vec<bool>], pass: Pass) -> Result<Tensor> {
    let batch = ScoringBatch::new(sequences, masks, model.device())?;
    batch.logprobs(&model.forward_train(&batch.ids, pass)?)
}

/// Adapter gradients of `loss_of_logprobs(token_logprobs(...))` with per-layer gradient
/// checkpointing (see [`Qwen3Model::backward_checkpointed`]); returns the loss value too.
pub fn backward_checkpointed(
    model: &Qwen3Model,
    sequences: &[Vec<u32>],
    masks: &[Vec<bool>],
    loss_of_logprobs: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<(Tensor, candle_core::backprop::GradStore)> {
    let batch = ScoringBatch::new(sequences, masks, model.device())?;
    model.backward_checkpointed(&batch.ids, Pass::TRAIN, |logits| loss_of_logprobs(&batch.logprobs(logits)?))
}

/// Right-padded ids and the per-target weights of a scoring batch.
struct ScoringBatch {
    ids: Tensor,
    weight: Tensor,
}

impl ScoringBatch {
    fn new(sequences: &[Vec<u32>], masks: &[Vec<bool>], device: &Device) -> Result<Self> {
        let batch = sequences.len();
        if batch == 0 || masks.len() != batch {
            return Err(Error::Invalid(format!("{batch} sequences but {} masks (need equal, non-zero)", masks.len())));
        }
        let len = sequences.iter().map(Vec::len).max().unwrap_or(0);
        if len < 2 {
            return Err(Error::Invalid("sequences need at least two tokens to score".into()));
        }
        let mut ids = Vec::with_capacity(batch * len);
        let mut weight = Vec::with_capacity(batch * (len - 1));
        for (i, (seq, mask)) in sequences.iter().zip(masks).enumerate() {
            if mask.len() != seq.len() {
                return Err(Error::Invalid(format!(
                    "sequence {i} has {} tokens but its mask {}",
                    seq.len(),
                    mask.len()
                )));
            }
            ids.extend_from_slice(seq);
            ids.extend(std::iter::repeat_n(0u32, len - seq.len()));
            weight.extend((1..len).map(|t| if mask.get(t).copied().unwrap_or(false) { 1f32 } else { 0.0 }));
        }
        Ok(Self {
            ids: Tensor::from_vec(ids, (batch, len), device)?,
            weight: Tensor::from_vec(weight, (batch, len - 1), device)?,
        })
    }

    /// `(batch, len)` log-probs of each next token, weighted by the mask, 0 in column 0.
    fn logprobs(&self, logits: &Tensor) -> Result<Tensor> {
        let (batch, len) = self.ids.dims2()?;
        let logits = logits.narrow(1, 0, len - 1)?;
        let targets = self.ids.narrow(1, 1, len - 1)?.contiguous()?;
        let max = logits.max_keepdim(D::Minus1)?.detach();
        let shifted = logits.broadcast_sub(&max)?;
        let log_z = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
        let picked = shifted.gather(&targets.unsqueeze(D::Minus1)?, D::Minus1)?;
        let lp = ((picked - log_z)?.squeeze(D::Minus1)? * &self.weight)?;
        let device = self.ids.device();
        Ok(Tensor::cat(&[&Tensor::zeros((batch, 1), DType::F32, device)?, &lp], 1)?)
    }
}
