//! Batched sampling through the KV-cached path: temperature, top-k, top-p, stop tokens, and
//! the log-prob of every sampled token.
//!
//! Batching: prompts are **left-padded** to a common length, padding slots are marked invalid
//! in the [`KvCache`](crate::KvCache) (masked as keys, skipped by the per-row RoPE
//! positions), so each row sees exactly its own unpadded sequence. Rows that stop early keep
//! feeding one invalid padding slot per step until every row is done or the token budget
//! runs out.

use candle_core::Tensor;
use rand::Rng;

use crate::qwen3::{Pass, Qwen3Model};
use crate::{Error, Result};

/// Sampling settings; the defaults are the seeds' (T = 1.0, top-p 0.9, top-k 50, 4096 tokens).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// Nucleus mass kept (1.0 = off).
    pub top_p: f32,
    /// Most likely tokens kept (0 = off).
    pub top_k: usize,
    /// The most tokens one continuation may generate, the stop token included.
    pub max_new_tokens: usize,
    /// Tokens that end a turn (they are kept as the last generated token).
    pub stop_tokens: Vec<u32>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 1.0, top_p: 0.9, top_k: 50, max_new_tokens: 4096, stop_tokens: Vec::new() }
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token was sampled (it is the last token).
    Stop,
    /// `max_new_tokens` or the model's context ran out.
    Length,
}

/// One sampled continuation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated tokens, prompt excluded; ends with the stop token when `finish` is `Stop`.
    pub tokens: Vec<u32>,
    /// `log π(token | prefix)` under the temperature-scaled distribution before top-k/top-p
    /// truncation (at T = 1 this is the model's own log-prob, comparable to
    /// [`token_logprobs`](crate::policy::token_logprobs)).
    pub logprobs: Vec<f32>,
    /// Why generation ended.
    pub finish: FinishReason,
}

/// Samples one continuation per prompt, all rows in one batch.
pub fn generate<R: Rng>(
    model: &Qwen3Model,
    prompts: &[Vec<u32>],
    params: &SamplingParams,
    pass: Pass,
    rng: &mut R,
) -> Result<Vec<Generation>> {
    let batch = prompts.len();
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    if batch == 0 || prompts.iter().any(Vec::is_empty) {
        return Err(Error::Invalid("generate needs at least one non-empty prompt".into()));
    }
    let device = model.device();
    let max_pos = model.config().max_position_embeddings;
    let pad = 0u32;
    let mut ids = Vec::with_capacity(batch * longest);
    let mut valid = Vec::with_capacity(batch);
    for p in prompts {
        let padding = longest - p.len();
        ids.extend(std::iter::repeat_n(pad, padding));
        ids.extend_from_slice(p);
        valid.push((0..longest).map(|i| i >= padding).collect::<Vec<bool>>());
    }
    let mut cache = model.new_cache_with_capacity(batch, (longest + params.max_new_tokens).min(max_pos));
    let ids = Tensor::from_vec(ids, (batch, longest), device)?;
    let mut logits = model.forward_cached(&ids, &valid, &mut cache, pass, true)?;
    let mut out: Vec<Generation> = (0..batch)
        .map(|_| Generation { tokens: Vec::new(), logprobs: Vec::new(), finish: FinishReason::Length })
        .collect();
    let mut active = vec![true; batch];
    for step in 0..params.max_new_tokens {
        let rows = logits.squeeze(1)?.to_vec2::<f32>()?;
        let mut next = vec![pad; batch];
        for (row, row_logits) in rows.iter().enumerate() {
            if !active[row] {
                continue;
            }
            let (token, logprob) = sample_token(row_logits, params, rng);
            let generation = &mut out[row];
            generation.tokens.push(token);
            generation.logprobs.push(logprob);
            next[row] = token;
            let at_limit = prompts[row].len() + generation.tokens.len() >= max_pos;
            if params.stop_tokens.contains(&token) {
                generation.finish = FinishReason::Stop;
                active[row] = false;
            } else if at_limit {
                active[row] = false;
            }
        }
        if step + 1 == params.max_new_tokens || !active.iter().any(|&a| a) {
            break;
        }
        let step_valid: Vec<Vec<bool>> = active.iter().map(|&a| vec![a]).collect();
        let ids = Tensor::from_vec(next, (batch, 1), device)?;
        logits = model.forward_cached(&ids, &step_valid, &mut cache, pass, true)?;
    }
    Ok(out)
}

/// Draws a token from one row of logits; returns it with its (tempered, untruncated) log-prob.
pub fn sample_token<R: Rng>(logits: &[f32], params: &SamplingParams, rng: &mut R) -> (u32, f32) {
    let greedy = params.temperature <= 0.0;
    let t = if greedy { 1.0 } else { params.temperature };
    let scaled: Vec<f32> = logits.iter().map(|l| l / t).collect();
    let max = scaled.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_z = max + scaled.iter().map(|s| (s - max).exp()).sum::<f32>().ln();
    let logprob = |i: usize| scaled[i] - log_z;
    if greedy {
        let best = argmax(&scaled);
        return (best as u32, logprob(best));
    }
    let mut order: Vec<usize> = (0..scaled.len()).collect();
    let by_score_desc = |a: &usize, b: &usize| scaled[*b].total_cmp(&scaled[*a]);
    if params.top_k > 0 && params.top_k < order.len() {
        order.select_nth_unstable_by(params.top_k - 1, by_score_desc);
        order.truncate(params.top_k);
    }
    order.sort_unstable_by(by_score_desc);
    let mut kept = 0;
    let mut mass = 0f32;
    for &i in &order {
        mass += logprob(i).exp();
        kept += 1;
        if mass >= params.top_p {
            break;
        }
    }
    order.truncate(kept.max(1));
    let weights: Vec<f32> = order.iter().map(|&i| logprob(i).exp()).collect();
    let total: f32 = weights.iter().sum();
    let mut u = rng.random::<f32>() * total;
    for (&i, w) in order.iter().zip(&weights) {
        if u < *w {
            return (i as u32, logprob(i));
        }
        u -= w;
    }
    let last = *order.last().expect("at least one token kept");
    (last as u32, logprob(last))
}

fn argmax(xs: &[f32]) -> usize {
    xs.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn top_k_and_top_p_restrict_the_support() {
        let logits = [4.0f32, 3.0, 2.0, 1.0, 0.0, -1.0];
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let k2 = SamplingParams { top_k: 2, top_p: 1.0, ..SamplingParams::default() };
        let p_small = SamplingParams { top_k: 0, top_p: 0.5, ..SamplingParams::default() };
        for _ in 0..500 {
            assert!(sample_token(&logits, &k2, &mut rng).0 < 2);
            // p(token 0) ≈ 0.64 ≥ 0.5, so the nucleus is token 0 alone.
            assert_eq!(sample_token(&logits, &p_small, &mut rng).0, 0);
        }
        let all = SamplingParams { top_k: 0, top_p: 1.0, ..SamplingParams::default() };
        let seen: std::collections::HashSet<u32> = (0..2000).map(|_| sample_token(&logits, &all, &mut rng).0).collect();
        assert_eq!(seen.len(), 6);
    }

    #[test]
    fn logprob_is_the_tempered_log_softmax() {
        let logits = [1.0f32, 2.0, 0.5];
        let params = SamplingParams { temperature: 0.5, top_k: 0, top_p: 1.0, ..SamplingParams::default() };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (tok, lp) = sample_token(&logits, &params, &mut rng);
        let z: f32 = logits.iter().map(|l| (l / 0.5).exp()).sum();
        assert!((lp - ((logits[tok as usize] / 0.5).exp() / z).ln()).abs() < 1e-5);
        let greedy = SamplingParams { temperature: 0.0, ..params };
        assert_eq!(sample_token(&logits, &greedy, &mut rng).0, 1);
    }
}
