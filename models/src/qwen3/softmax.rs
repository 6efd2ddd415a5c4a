//! Causal, padding-aware softmax of raw attention scores in one pass (sampling path, CPU).
//!
//! The generic path scales the scores, adds a materialised causal mask and a key-padding bias,
//! then runs a softmax: three full passes over the `rows × keys` scores, each a separate
//! allocation, and from 64 Ki scores on candle splits the elementwise ones over its spinning
//! barrier pool. This kernel reads each score once, skips keys after the query entirely
//! (their probability is exactly zero, as `exp(-inf)` gives) and writes each probability once.

use candle_core::{CpuStorage, DType, Layout, Shape, Tensor};
use rayon::prelude::*;

/// Scores per parallel work unit; below two units the kernel runs on the calling thread.
const PARALLEL_UNIT: usize = 16 * 1024;

/// Attention probabilities from raw scores `q·kᵀ` of shape `(batch, kv_heads, rows, keys)`,
/// rows being `groups × len` queries (query `r % len` of the chunk), the chunk's queries
/// being the last `len` of the `keys` slots. `key_bias`, `batch × keys` values added to each
/// row's scores (0 for real keys, a large negative number for padding), or none.
/// Returns f32 probabilities of the same shape. CPU storage only.
pub(crate) fn causal_softmax(
    scores: &Tensor,
    scale: f32,
    len: usize,
    key_bias: Option<&[f32]>,
) -> candle_core::Result<Tensor> {
    let scores = scores.to_dtype(DType::F32)?.contiguous()?;
    scores.apply_op1_no_bwd(&CausalSoftmax { scale, len, key_bias })
}

struct CausalSoftmax<'a> {
    scale: f32,
    len: usize,
    key_bias: Option<&'a [f32]>,
}

impl candle_core::CustomOp1 for CausalSoftmax<'_> {
    fn name(&self) -> &'static str {
        "causal-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(all), Some((start, end))) = (storage, layout.contiguous_offsets()) else {
            candle_core::bail!("causal-softmax needs contiguous f32 scores")
        };
        let (batch, heads, rows, keys) = layout.shape().dims4()?;
        if self.len == 0 || rows % self.len != 0 || keys < self.len {
            candle_core::bail!("causal-softmax: {rows} rows, {keys} keys do not fit chunks of {}", self.len)
        }
        if let Some(bias) = self.key_bias
            && bias.len() != batch * keys
        {
            candle_core::bail!("causal-softmax: key bias has {} values for {batch} × {keys}", bias.len())
        }
        let scores = &all[start..end];
        let base = keys - self.len;
        let row = |(index, (src, dst)): (usize, (&[f32], &mut [f32]))| {
            let b = index / (heads * rows);
            // Keys up to and including the query's own slot; later ones stay exactly zero.
            let visible = base + index % self.len + 1;
            let (src, dst) = (&src[..visible], &mut dst[..visible]);
            match self.key_bias {
                Some(bias) => {
                    let bias = &bias[b * keys..b * keys + visible];
                    dst.iter_mut().zip(src).zip(bias).for_each(|((d, &s), &k)| *d = s * self.scale + k);
                }
                None => dst.iter_mut().zip(src).for_each(|(d, &s)| *d = s * self.scale),
            }
            let max = dst.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for d in dst.iter_mut() {
                *d = (*d - max).exp();
                sum += *d;
            }
            let inv = 1.0 / sum;
            dst.iter_mut().for_each(|d| *d *= inv);
        };
        let mut out = vec![0f32; scores.len()];
        if scores.len() < 2 * PARALLEL_UNIT {
            scores.chunks_exact(keys).zip(out.chunks_exact_mut(keys)).enumerate().for_each(row);
        } else {
            // Rayon chunks: the calling thread steals back the rows of a worker that has no core.
            let rows_per_unit = (PARALLEL_UNIT / keys).max(1);
            scores
                .par_chunks_exact(keys)
                .zip(out.par_chunks_exact_mut(keys))
                .enumerate()
                .with_min_len(rows_per_unit)
                .for_each(row);
        }
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{D, Device, Tensor};

    use super::causal_softmax;

    /// Equals scale → additive causal mask (and key bias) → softmax built from candle's ops,
    /// for a chunk that follows earlier slots (base > 0) and grouped query rows.
    #[test]
    fn equals_masked_softmax_from_primitives() {
        check(2, 2, 3, 4, 7);
        // Enough scores for the parallel path.
        check(2, 2, 2, 48, 160);
    }

    fn check(batch: usize, heads: usize, groups: usize, len: usize, keys: usize) {
        let dev = Device::Cpu;
        let n = batch * heads * groups * len * keys;
        let raw: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 9.0).collect();
        let scores = Tensor::from_vec(raw, (batch, heads, groups * len, keys), &dev).expect("scores");
        let bias: Vec<f32> = (0..batch * keys).map(|i| if i == 1 || i == keys + 5 { -1e9 } else { 0.0 }).collect();
        let base = keys - len;
        let causal: Vec<f32> = (0..len)
            .flat_map(|i| (0..keys).map(move |j| if j <= base + i { 0.0 } else { f32::NEG_INFINITY }))
            .collect();
        let causal = Tensor::from_vec(causal, (1, 1, 1, len, keys), &dev).expect("causal");
        let reference = |bias: Option<&[f32]>| {
            let mut s = (scores.reshape((batch, heads, groups, len, keys))? * 0.125)?.broadcast_add(&causal)?;
            if let Some(bias) = bias {
                s = s.broadcast_add(&Tensor::from_slice(bias, (batch, 1, 1, 1, keys), &dev)?)?;
            }
            candle_nn::ops::softmax(&s, D::Minus1)?.reshape((batch, heads, groups * len, keys))
        };
        for bias in [Some(bias.as_slice()), None] {
            let want = reference(bias).expect("reference");
            let got = causal_softmax(&scores, 0.125, len, bias).expect("kernel");
            let diff = (got - want).and_then(|d| d.abs()?.max_all()?.to_scalar::<f32>()).expect("diff");
            assert!(diff < 1e-6, "fused causal softmax differs by {diff} (bias: {})", bias.is_some());
        }
    }

    #[test]
    fn rejects_shapes_that_do_not_fit() {
        let scores = Tensor::zeros((1, 1, 5, 3), candle_core::DType::F32, &Device::Cpu).expect("zeros");
        assert!(causal_softmax(&scores, 1.0, 2, None).is_err(), "5 rows are not chunks of 2");
        assert!(causal_softmax(&scores, 1.0, 5, None).is_err(), "more queries than keys");
        assert!(causal_softmax(&scores, 1.0, 1, Some(&[0.0; 2])).is_err(), "bias of the wrong length");
    }
}
