//! Supervised warm start: cross-entropy on the generated (masked) tokens of given
//! trajectories, optimised with AdamW on the LoRA variables only.

use candle_nn::{AdamW, Optimizer, ParamsAdamW};

use crate::policy::{backward_checkpointed, token_logprobs};
use crate::qwen3::{Pass, Qwen3Model};
use crate::{Error, Result};

/// Optimiser settings for SFT.
#[derive(Debug, Clone, PartialEq)]
pub struct SftOptions {
    /// AdamW's learning rate, constant over the run.
    pub learning_rate: f64,
    /// AdamW's decoupled weight decay on the adapters.
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
    let count: usize = masks.iter().map(|m| target_count(m)).sum();
    if count == 0 {
        return Err(Error::Invalid("SFT batch has no masked tokens".into()));
    }
    Ok((lp.sum_all()?.neg()? / count as f64)?)
}

/// Masked target tokens of a sequence: the positions `t ≥ 1` with `mask[t]` (position 0 is
/// never predicted, so it never counts).
pub fn target_count(mask: &[bool]) -> usize {
    mask.iter().skip(1).filter(|&&b| b).count()
}

/// Token-weighted mean negative log-likelihood of the masked tokens of a whole data set,
/// scored `batch_size` sequences at a time, with no update. Weighting by tokens (not by batch)
/// makes the number independent of how the set is cut into batches.
pub fn mean_nll(model: &Qwen3Model, sequences: &[Vec<u32>], masks: &[Vec<bool>], batch_size: usize) -> Result<f64> {
    check_dataset(sequences, masks, batch_size)?;
    let mut total = 0.0;
    let mut count = 0usize;
    for (seqs, ms) in sequences.chunks(batch_size).zip(masks.chunks(batch_size)) {
        let n: usize = ms.iter().map(|m| target_count(m)).sum();
        if n == 0 {
            continue;
        }
        let loss = sft_loss(model, seqs, ms)?.detach().to_scalar::<f32>()?;
        total += f64::from(loss) * n as f64;
        count += n;
    }
    if count == 0 {
        return Err(Error::Invalid("SFT data set has no masked tokens".into()));
    }
    Ok(total / count as f64)
}

fn check_dataset(sequences: &[Vec<u32>], masks: &[Vec<bool>], batch_size: usize) -> Result<()> {
    if batch_size == 0 {
        return Err(Error::Invalid("SFT batch size must be at least 1".into()));
    }
    if sequences.is_empty() || sequences.len() != masks.len() {
        return Err(Error::Invalid(format!(
            "{} SFT sequences but {} masks (need equal, non-zero)",
            sequences.len(),
            masks.len()
        )));
    }
    Ok(())
}

/// AdamW over a model's adapters.
#[derive(Debug)]
pub struct SftTrainer {
    optimizer: AdamW,
    /// Recompute activations layer by layer in the backward pass (what a 14B model needs).
    gradient_checkpointing: bool,
}

impl SftTrainer {
    /// A trainer over `model`'s LoRA adapters, with gradient checkpointing off; fails when
    /// the model has no adapters.
    pub fn new(model: &Qwen3Model, options: &SftOptions) -> Result<Self> {
        let vars = model.lora_vars();
        if vars.is_empty() {
            return Err(Error::Invalid("the model has no LoRA adapters to train".into()));
        }
        let params =
            ParamsAdamW { lr: options.learning_rate, weight_decay: options.weight_decay, ..ParamsAdamW::default() };
        Ok(Self { optimizer: AdamW::new(vars, params)?, gradient_checkpointing: false })
    }

    /// Turns per-layer gradient checkpointing on or off: the same gradients for one more
    /// forward pass and activation memory of one layer instead of all (see
    /// [`Qwen3Model::backward_checkpointed`]).
    pub fn with_gradient_checkpointing(mut self, on: bool) -> Self {
        self.gradient_checkpointing = on;
        self
    }

    /// One step on a batch; returns the loss before the update.
    pub fn step(&mut self, model: &Qwen3Model, sequences: &[Vec<u32>], masks: &[Vec<bool>]) -> Result<f32> {
        if !self.gradient_checkpointing {
            let loss = sft_loss(model, sequences, masks)?;
            self.optimizer.backward_step(&loss)?;
            return Ok(loss.to_scalar::<f32>()?);
        }
        let count: usize = masks.iter().map(|m| target_count(m)).sum();
        if count == 0 {
            return Err(Error::Invalid("SFT batch has no masked tokens".into()));
        }
        let (loss, grads) =
            backward_checkpointed(model, sequences, masks, |lp| Ok((lp.sum_all()?.neg()? / count as f64)?))?;
        self.optimizer.step(&grads)?;
        Ok(loss.to_scalar::<f32>()?)
    }

    /// One pass over a data set: a step per batch of `batch_size` sequences taken in `order`
    /// (indices into `sequences`; the caller shuffles). Batches without masked tokens are
    /// skipped. Returns the token-weighted mean of the batch losses, each measured before its
    /// own update.
    pub fn epoch(
        &mut self,
        model: &Qwen3Model,
        sequences: &[Vec<u32>],
        masks: &[Vec<bool>],
        order: &[usize],
        batch_size: usize,
    ) -> Result<f64> {
        check_dataset(sequences, masks, batch_size)?;
        if let Some(&bad) = order.iter().find(|&&i| i >= sequences.len()) {
            return Err(Error::Invalid(format!("SFT order names sequence {bad} of {}", sequences.len())));
        }
        let (mut total, mut count) = (0.0, 0usize);
        for batch in order.chunks(batch_size) {
            let seqs: Vec<Vec<u32>> = batch.iter().map(|&i| sequences[i].clone()).collect();
            let ms: Vec<Vec<bool>> = batch.iter().map(|&i| masks[i].clone()).collect();
            let n: usize = ms.iter().map(|m| target_count(m)).sum();
            if n == 0 {
                continue;
            }
            total += f64::from(self.step(model, &seqs, &ms)?) * n as f64;
            count += n;
        }
        if count == 0 {
            return Err(Error::Invalid("SFT data set has no masked tokens".into()));
        }
        Ok(total / count as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, LoraConfig, tiny};

    fn model() -> (tempfile::TempDir, Qwen3Model) {
        let dir = tempfile::tempdir().expect("tmp");
        tiny::write_tiny_checkpoint(dir.path(), 3).expect("tiny checkpoint");
        let lora = LoraConfig { r: 4, alpha: 8.0, ..LoraConfig::default() };
        let model = Qwen3Model::load(dir.path(), candle_core::DType::F32, &Device::Cpu, Some(&lora)).expect("load");
        (dir, model)
    }

    fn data() -> (Vec<Vec<u32>>, Vec<Vec<bool>>) {
        let seqs: Vec<Vec<u32>> =
            (0..5u32).map(|k| (0..(12 + 3 * k)).map(|i| (i * 7 + k * 13 + 5) % 480).collect()).collect();
        // Odd masks on purpose: one sequence trains on nothing, one on everything but the first.
        let masks = seqs
            .iter()
            .enumerate()
            .map(|(k, s)| (0..s.len()).map(|i| if k == 1 { false } else { k == 2 || i >= s.len() / 2 }).collect())
            .collect();
        (seqs, masks)
    }

    #[test]
    fn mean_nll_is_token_weighted_whatever_the_batch_size() {
        let (_dir, model) = model();
        let (seqs, masks) = data();
        let one = mean_nll(&model, &seqs, &masks, 1).expect("batch 1");
        let all = mean_nll(&model, &seqs, &masks, 5).expect("batch 5");
        let whole = sft_loss(&model, &seqs, &masks).expect("loss").to_scalar::<f32>().expect("scalar");
        assert!((one - all).abs() < 1e-4, "{one} vs {all}");
        assert!((all - f64::from(whole)).abs() < 1e-4, "{all} vs {whole}");
        assert!(mean_nll(&model, &seqs, &masks, 0).is_err());
        assert!(mean_nll(&model, &seqs[..1], &masks, 1).is_err());
    }

    #[test]
    fn epochs_lower_the_data_set_loss() {
        let (_dir, model) = model();
        let (seqs, masks) = data();
        let mut trainer = SftTrainer::new(&model, &SftOptions { learning_rate: 1e-2, weight_decay: 0.0 }).expect("new");
        let before = mean_nll(&model, &seqs, &masks, 2).expect("before");
        let order: Vec<usize> = vec![4, 0, 3, 1, 2];
        let first = trainer.epoch(&model, &seqs, &masks, &order, 2).expect("epoch 1");
        trainer.epoch(&model, &seqs, &masks, &order, 2).expect("epoch 2");
        let after = mean_nll(&model, &seqs, &masks, 2).expect("after");
        assert!(first.is_finite() && first > 0.0, "epoch loss {first}");
        assert!(after < before - 0.1, "SFT loss {before} -> {after}");
        assert!(trainer.epoch(&model, &seqs, &masks, &[9], 2).is_err());
    }

    #[test]
    fn checkpointed_steps_match_plain_ones() {
        let (seqs, masks) = data();
        let (_d1, plain) = model();
        let (_d2, lean) = model();
        let options = SftOptions { learning_rate: 1e-2, weight_decay: 0.0 };
        let mut a = SftTrainer::new(&plain, &options).expect("plain");
        let mut b = SftTrainer::new(&lean, &options).expect("lean").with_gradient_checkpointing(true);
        for _ in 0..3 {
            let (la, lb) = (a.step(&plain, &seqs, &masks).expect("a"), b.step(&lean, &seqs, &masks).expect("b"));
            assert!((la - lb).abs() < 1e-4, "loss {la} vs {lb}");
        }
        for (va, vb) in plain.lora_vars().iter().zip(lean.lora_vars()) {
            let diff = (va.as_tensor() - vb.as_tensor()).and_then(|d| d.abs()).and_then(|d| d.max_all());
            let diff = diff.and_then(|d| d.to_scalar::<f32>()).expect("diff");
            assert!(diff < 1e-4, "adapters differ by {diff}");
        }
        let none = vec![vec![false; 5]];
        assert!(b.step(&lean, &[vec![1, 2, 3, 4, 5]], &none).is_err());
    }
}
