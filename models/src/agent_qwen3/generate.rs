//! One batched, KV-cached generation per turn over every episode at that turn.
//!
//! Unlike [`crate::sampling::generate`], which draws every row from one shared RNG, each row
//! here draws from its own episode's RNG, has its own token limit and temperature, and records
//! the entropy of the distribution it sampled from. A row's draws therefore depend only on its
//! own RNG and its own logits, never on which other episodes share the batch (the logits
//! themselves agree across batch compositions to float rounding: left padding is masked).

use candle_core::Tensor;
use rand_chacha::ChaCha8Rng;

use crate::qwen3::{Pass, Qwen3Model};
use crate::sampling::{SamplingParams, sample_token};
use crate::{Error, Result};

/// One row of a batched generation.
#[derive(Debug)]
pub(crate) struct Row<'a> {
    pub prompt: Vec<u32>,
    /// Tokens this row may generate (at least 1).
    pub limit: usize,
    /// 0 means greedy.
    pub temperature: f32,
    pub rng: &'a mut ChaCha8Rng,
}

/// What one row generated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sampled {
    pub tokens: Vec<u32>,
    /// Tempered, untruncated log-prob of each token (see [`sample_token`]).
    pub logprobs: Vec<f32>,
    /// Entropy (nats) of the tempered, untruncated distribution at each token.
    pub entropies: Vec<f64>,
    /// Ended on a stop token (rather than on its limit).
    pub stopped: bool,
}

/// Samples every row in one left-padded batch; rows finish independently.
pub(crate) fn generate_rows(model: &Qwen3Model, rows: &mut [Row<'_>], params: &SamplingParams) -> Result<Vec<Sampled>> {
    let batch = rows.len();
    if batch == 0 || rows.iter().any(|r| r.prompt.is_empty() || r.limit == 0) {
        return Err(Error::Invalid("generation needs non-empty prompts and positive token limits".into()));
    }
    let device = model.device();
    let longest = rows.iter().map(|r| r.prompt.len()).max().unwrap_or(0);
    let most = rows.iter().map(|r| r.limit).max().unwrap_or(0);
    // The padding id is never attended to (its slots are invalid), so any id works.
    let pad = 0u32;
    let mut ids = Vec::with_capacity(batch * longest);
    let mut valid = Vec::with_capacity(batch);
    for r in rows.iter() {
        let padding = longest - r.prompt.len();
        ids.extend(std::iter::repeat_n(pad, padding));
        ids.extend_from_slice(&r.prompt);
        valid.push((0..longest).map(|i| i >= padding).collect::<Vec<bool>>());
    }
    let row_params: Vec<SamplingParams> =
        rows.iter().map(|r| SamplingParams { temperature: r.temperature, ..params.clone() }).collect();
    let mut cache = model.new_cache_with_capacity(batch, longest + most);
    let ids = Tensor::from_vec(ids, (batch, longest), device)?;
    let mut logits = model.forward_cached(&ids, &valid, &mut cache, Pass::SAMPLE, true)?;
    let mut out: Vec<Sampled> = (0..batch)
        .map(|_| Sampled { tokens: Vec::new(), logprobs: Vec::new(), entropies: Vec::new(), stopped: false })
        .collect();
    let mut active = vec![true; batch];
    loop {
        let rows_logits = logits.squeeze(1)?.to_vec2::<f32>()?;
        let mut next = vec![pad; batch];
        for (i, row_logits) in rows_logits.iter().enumerate() {
            if !active[i] {
                continue;
            }
            let row = &mut rows[i];
            let (token, logprob) = sample_token(row_logits, &row_params[i], row.rng);
            let sampled = &mut out[i];
            sampled.tokens.push(token);
            sampled.logprobs.push(logprob);
            sampled.entropies.push(entropy(row_logits, row.temperature));
            next[i] = token;
            if params.stop_tokens.contains(&token) {
                sampled.stopped = true;
                active[i] = false;
            } else if sampled.tokens.len() >= row.limit {
                active[i] = false;
            }
        }
        if !active.iter().any(|&a| a) {
            break;
        }
        let step_valid: Vec<Vec<bool>> = active.iter().map(|&a| vec![a]).collect();
        let ids = Tensor::from_vec(next, (batch, 1), device)?;
        logits = model.forward_cached(&ids, &step_valid, &mut cache, Pass::SAMPLE, true)?;
    }
    Ok(out)
}

/// Entropy of `softmax(logits / T)` in f64 (T = 1 when greedy, matching the recorded log-probs).
pub(crate) fn entropy(logits: &[f32], temperature: f32) -> f64 {
    let t = if temperature <= 0.0 { 1.0 } else { f64::from(temperature) };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let max = f64::from(max) / t;
    let (mut z, mut weighted) = (0.0f64, 0.0f64);
    for &l in logits {
        let s = f64::from(l) / t - max;
        let e = s.exp();
        z += e;
        weighted += e * s;
    }
    // H = log Z − E[s] with s the shifted logits.
    z.ln() - weighted / z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_is_log_n_for_uniform_and_zero_for_a_point_mass() {
        let uniform = [0.5f32; 8];
        assert!((entropy(&uniform, 1.0) - 8f64.ln()).abs() < 1e-12);
        assert!(entropy(&[0.0, -1e4, -1e4], 1.0) < 1e-12);
        // A lower temperature sharpens the distribution.
        let logits = [1.0f32, 0.0, -1.0];
        assert!(entropy(&logits, 0.5) < entropy(&logits, 1.0));
        assert_eq!(entropy(&logits, 0.0), entropy(&logits, 1.0));
    }
}
