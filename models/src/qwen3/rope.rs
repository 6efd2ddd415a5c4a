//! Rotary position embeddings (rotate-half convention, as in Hugging Face's Qwen3).

use candle_core::{D, DType, Device, Tensor};

use super::{Mode, Qwen3Config};

/// Where the tokens of a forward call sit in their sequences.
#[derive(Debug, Clone)]
pub(crate) enum Positions {
    /// Every row holds positions `start..start + len` (the training path, right-padded
    /// batches; the cached path before any padding).
    Range { start: usize, len: usize },
    /// One position per (row, slot): `(batch, len)` u32 tensor (the cached path with padding).
    PerRow(Tensor),
}

/// Precomputed cos/sin tables of shape `(max_position_embeddings, head_dim / 2)`.
#[derive(Debug, Clone)]
pub(crate) struct Rope {
    cos: Tensor,
    sin: Tensor,
}

impl Rope {
    pub(crate) fn new(cfg: &Qwen3Config, dtype: DType, device: &Device) -> candle_core::Result<Self> {
        let dim = cfg.head_dim();
        let half = dim / 2;
        let max = cfg.max_position_embeddings;
        // Computed in f32 like the reference implementation so bf16 tables round identically.
        let inv_freq: Vec<f32> =
            (0..half).map(|i| 1.0 / (cfg.rope_theta.powf((2 * i) as f64 / dim as f64) as f32)).collect();
        let mut angles = Vec::with_capacity(max * half);
        for p in 0..max {
            angles.extend(inv_freq.iter().map(|f| p as f32 * f));
        }
        let angles = Tensor::from_vec(angles, (max, half), device)?;
        Ok(Self { cos: angles.cos()?.to_dtype(dtype)?, sin: angles.sin()?.to_dtype(dtype)? })
    }

    /// The cos/sin rows for `positions`: `(len, half)` for a prefix, `(batch, len, half)` per row.
    pub(crate) fn tables(&self, positions: &Positions) -> candle_core::Result<(Tensor, Tensor)> {
        match positions {
            Positions::Range { start, len } => {
                Ok((self.cos.narrow(0, *start, *len)?.contiguous()?, self.sin.narrow(0, *start, *len)?.contiguous()?))
            }
            Positions::PerRow(pos) => {
                let (b, l) = pos.dims2()?;
                let flat = pos.flatten_all()?;
                let half = self.cos.dim(1)?;
                Ok((
                    self.cos.index_select(&flat, 0)?.reshape((b, l, half))?,
                    self.sin.index_select(&flat, 0)?.reshape((b, l, half))?,
                ))
            }
        }
    }
}

/// Rotates `x` of shape `(batch, heads, len, head_dim)` by the given tables.
pub(crate) fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor, mode: Mode) -> candle_core::Result<Tensor> {
    match mode {
        Mode::Infer => candle_nn::rotary_emb::rope(&x.contiguous()?, cos, sin),
        Mode::Train => {
            // Built from cat/mul/add so the backward pass exists (the fused kernel has none).
            let cos = Tensor::cat(&[cos, cos], D::Minus1)?;
            let sin = Tensor::cat(&[sin, sin], D::Minus1)?;
            let (cos, sin) = if cos.rank() == 2 {
                (cos.unsqueeze(0)?.unsqueeze(0)?, sin.unsqueeze(0)?.unsqueeze(0)?)
            } else {
                (cos.unsqueeze(1)?, sin.unsqueeze(1)?)
            };
            x.broadcast_mul(&cos)? + rotate_half(x)?.broadcast_mul(&sin)?
        }
    }
}

fn rotate_half(x: &Tensor) -> candle_core::Result<Tensor> {
    let d = x.dim(D::Minus1)?;
    let first = x.narrow(D::Minus1, 0, d / 2)?;
    let second = x.narrow(D::Minus1, d / 2, d - d / 2)?;
    Tensor::cat(&[&second.neg()?, &first], D::Minus1)
}
