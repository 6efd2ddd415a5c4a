//! Supervised warm start: cross-entropy on the generated (masked) tokens of given
//! trajectories, optimised with AdamW on the LoRA variables only.

use candle_nn::{AdamW, Optimizer, ParamsAdamW};

use crate::policy::token_logprobs;
use crate::qwen3::{Pass, Qwen3Model};
use crate::{Error, Result};

/// Optimiser settings for SFT.
#[derive(Debug, Clone, PartialEq)]
pub struct SftOptions {
    pub learning_rate: f64,
    pub weight_decay: f64,
}

impl Default for SftOptions {
    fn default() -> Self {
        Self { learning_rate: 1e-4, weight_decay: 0.0 }
    }
}

/// Mean negative log-likelihood of the masked tokens (differentiable in the adapters).
pub fn sft_loss(model: &Qwen3Model, sequences: &[Vec<u32>], masks: &[Vec<bool>]) -> Result<candle_core::Tensor> {
    let lp = token_logprobs(model, sequences, masks, Pass::TRAIN)?;
    let count: usize = masks.iter().map(|m| m.iter().skip(1).filter(|&&b| b).count()).sum();
    if count == 0 {
        return Err(Error::Invalid("SFT batch has no masked tokens".into()));
    }
    Ok((lp.sum_all()?.neg()? / count as f64)?)
}

/// AdamW over a model's adapters.
#[derive(Debug)]
pub struct SftTrainer {
    optimizer: AdamW,
}

impl SftTrainer {
    pub fn new(model: &Qwen3Model, options: &SftOptions) -> Result<Self> {
        let vars = model.lora_vars();
        if vars.is_empty() {
            return Err(Error::Invalid("the model has no LoRA adapters to train".into()));
        }
        let params =
            ParamsAdamW { lr: options.learning_rate, weight_decay: options.weight_decay, ..ParamsAdamW::default() };
        Ok(Self { optimizer: AdamW::new(vars, params)? })
    }

    /// One step on a batch; returns the loss before the update.
    pub fn step(&mut self, model: &Qwen3Model, sequences: &[Vec<u32>], masks: &[Vec<bool>]) -> Result<f32> {
        let loss = sft_loss(model, sequences, masks)?;
        self.optimizer.backward_step(&loss)?;
        Ok(loss.to_scalar::<f32>()?)
    }
}
