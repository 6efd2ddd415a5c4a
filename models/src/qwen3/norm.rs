//! RMSNorm: fused kernel for sampling, elementwise primitives for training.

use candle_core::{D, DType, Tensor};
use candle_nn::VarBuilder;

use super::Mode;

/// Root-mean-square normalisation over the last dimension, with a learned (frozen) gain.
#[derive(Debug, Clone)]
pub(crate) struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    pub(crate) fn new(dim: usize, eps: f64, vb: VarBuilder) -> candle_core::Result<Self> {
        Ok(Self { weight: vb.get(dim, "weight")?, eps })
    }

    /// Normalises in f32 and scales in the model's dtype, as Hugging Face's Qwen3RMSNorm does.
    pub(crate) fn forward(&self, x: &Tensor, mode: Mode) -> candle_core::Result<Tensor> {
        match mode {
            // candle-nn's kernel has no backward pass, so it is only used where no gradient flows.
            Mode::Infer => candle_nn::ops::rms_norm(&x.contiguous()?, &self.weight, self.eps as f32),
            Mode::Train => {
                let dtype = x.dtype();
                let xf = x.to_dtype(DType::F32)?;
                let mean_sq = xf.sqr()?.mean_keepdim(D::Minus1)?;
                let inv_rms = (mean_sq + self.eps)?.sqrt()?.recip()?;
                xf.broadcast_mul(&inv_rms)?.to_dtype(dtype)?.broadcast_mul(&self.weight)
            }
        }
    }
}
