//! Scoring rollouts: the log-prob of every generated token under the current adapters or the
//! frozen reference, and the adapter gradient of `Σ coeff · logp`.
//!
//! Rollouts are right-padded into one `(batch, len)` id tensor and run through the training
//! path; only the rows of the logits that predict a generated token are gathered before the
//! log-softmax, so the vocabulary-sized work and memory scale with generated tokens, not
//! with the whole context. Each token's log-prob is taken at its episode's sampling
//! temperature, so it is comparable with the log-prob recorded at sampling time.

use candle_core::backprop::GradStore;
use candle_core::{D, Tensor};

use crate::qwen3::{Pass, Qwen3Model};
use crate::{Error, Result};

/// A right-padded batch and the positions of its generated tokens.
#[derive(Debug)]
pub(crate) struct ScoreBatch {
    ids: Tensor,
    /// Flat rows `b * len + (t - 1)` of the logits that predict generated token `t` of row `b`.
    rows: Tensor,
    /// The generated tokens, in the same order.
    targets: Tensor,
    /// `(n, 1)` sampling temperature of each generated token's episode.
    temperatures: Tensor,
    /// Generated tokens per sequence, to split the flat result.
    counts: Vec<usize>,
}

/// One sequence to score: its tokens, the loss mask (true at generated tokens) and the
/// temperature it was sampled at (1 for greedy).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sequence<'a> {
    pub tokens: &'a [u32],
    pub mask: &'a [bool],
    pub temperature: f32,
}

impl ScoreBatch {
    pub(crate) fn new(sequences: &[Sequence<'_>], model: &Qwen3Model) -> Result<Self> {
        let device = model.device();
        let len = sequences.iter().map(|s| s.tokens.len()).max().unwrap_or(0);
        if sequences.is_empty() || len < 2 {
            return Err(Error::Invalid("scoring needs at least one sequence of two or more tokens".into()));
        }
        let mut ids = Vec::with_capacity(sequences.len() * len);
        let (mut rows, mut targets, mut temperatures, mut counts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (b, s) in sequences.iter().enumerate() {
            if s.mask.len() != s.tokens.len() {
                return Err(Error::Invalid(format!(
                    "sequence {b} has {} tokens but a mask of {}",
                    s.tokens.len(),
                    s.mask.len()
                )));
            }
            if s.mask.first() == Some(&true) {
                return Err(Error::Invalid(format!("sequence {b} marks its first token as generated")));
            }
            ids.extend_from_slice(s.tokens);
            ids.extend(std::iter::repeat_n(0u32, len - s.tokens.len()));
            let mut count = 0;
            for (t, (&tok, _)) in s.tokens.iter().zip(s.mask).enumerate().filter(|(_, (_, m))| **m) {
                rows.push((b * len + t - 1) as u32);
                targets.push(tok);
                temperatures.push(s.temperature);
                count += 1;
            }
            counts.push(count);
        }
        let n = rows.len();
        Ok(Self {
            ids: Tensor::from_vec(ids, (sequences.len(), len), device)?,
            rows: Tensor::from_vec(rows, n, device)?,
            targets: Tensor::from_vec(targets, (n, 1), device)?,
            temperatures: Tensor::from_vec(temperatures, (n, 1), device)?,
            counts,
        })
    }

    /// Generated tokens in the batch.
    pub(crate) fn generated(&self) -> usize {
        self.counts.iter().sum()
    }

    /// `(n,)` log-probs of the generated tokens from `(batch, len, vocab)` logits.
    fn logprobs_of(&self, logits: &Tensor) -> Result<Tensor> {
        let (batch, len, vocab) = logits.dims3()?;
        let picked_rows = logits.reshape((batch * len, vocab))?.index_select(&self.rows, 0)?;
        let scaled = picked_rows.broadcast_div(&self.temperatures)?;
        // The max is a constant shift: detaching it keeps the gradient exact and the graph small.
        let max = scaled.max_keepdim(D::Minus1)?.detach();
        let shifted = scaled.broadcast_sub(&max)?;
        let log_z = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
        let picked = shifted.gather(&self.targets, D::Minus1)?;
        Ok((picked - log_z)?.squeeze(D::Minus1)?)
    }

    /// Per-sequence log-probs of the generated tokens under `pass`, in f64.
    pub(crate) fn logprobs(&self, model: &Qwen3Model, pass: Pass) -> Result<Vec<Vec<f64>>> {
        if self.generated() == 0 {
            return Ok(self.counts.iter().map(|_| Vec::new()).collect());
        }
        // Never differentiated: nothing is recorded, so each layer's intermediates are freed as
        // the pass goes instead of living until the log-probs are read.
        let pass = Pass { grad: false, ..pass };
        let flat = self.logprobs_of(&model.forward_train(&self.ids, pass)?)?.to_vec1::<f32>()?;
        let mut out = Vec::with_capacity(self.counts.len());
        let mut at = 0;
        for &c in &self.counts {
            out.push(flat[at..at + c].iter().map(|&x| f64::from(x)).collect());
            at += c;
        }
        Ok(out)
    }

    /// Adapter gradients of `Σ coeff · logp` (adapters on), `coeffs` per sequence. With
    /// `checkpointed`, activations are recomputed layer by layer in the backward pass.
    pub(crate) fn backward(&self, model: &Qwen3Model, coeffs: &[Vec<f64>], checkpointed: bool) -> Result<GradStore> {
        if coeffs.len() != self.counts.len() {
            return Err(Error::Invalid(format!(
                "{} coefficient rows for {} sequences",
                coeffs.len(),
                self.counts.len()
            )));
        }
        let mut flat = Vec::with_capacity(self.generated());
        for (i, (c, &n)) in coeffs.iter().zip(&self.counts).enumerate() {
            if c.len() != n {
                return Err(Error::Invalid(format!(
                    "sequence {i} has {n} generated tokens but {} coefficients",
                    c.len()
                )));
            }
            flat.extend(c.iter().map(|&x| x as f32));
        }
        let n = flat.len();
        let weights = Tensor::from_vec(flat, n, model.device())?;
        let loss_of = |logits: &Tensor| -> Result<Tensor> { Ok((self.logprobs_of(logits)? * &weights)?.sum_all()?) };
        if checkpointed {
            Ok(model.backward_checkpointed(&self.ids, Pass::TRAIN, loss_of)?.1)
        } else {
            Ok(loss_of(&model.forward_train(&self.ids, Pass::TRAIN)?)?.backward()?)
        }
    }
}
