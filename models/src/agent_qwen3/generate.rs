//! One batched, KV-cached generation per turn over every episode at that turn.
//!
//! Unlike [`crate::sampling::generate`], which draws every row from one shared RNG, each row
//! here draws from its own episode's RNG, has its own token limit and temperature, and records
//! the entropy of the distribution it sampled from. A row's draws therefore depend only on its
//! own RNG and its own logits, never on which other episodes share the batch (the logits
//! themselves agree across batch compositions to float rounding: left padding is masked).
//!
//! A row may bring the KV cache of its previous turns ([`Prefix`]): the batch then starts
//! from those caches ([`KvCache::from_rows`]) and prefills only the rest of each prompt (the
//! tool responses and the next turn's template tokens), and each row's cache is taken out
//! again at the end for its next turn. Positions and masks are the ones a full prefill
//! gives, so the logits agree with it to float rounding (the tests check < 1e-4).

use candle_core::Tensor;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::qwen3::{KvCache, Pass, Qwen3Model, RowCache};
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
    /// The cache of an earlier turn, if the row keeps one.
    pub prefix: Option<Prefix>,
}

/// A row's cached tokens and their keys and values (`kv.len() == tokens.len()`).
#[derive(Debug, Clone)]
pub(crate) struct Prefix {
    pub tokens: Vec<u32>,
    pub kv: RowCache,
}

impl Prefix {
    /// How much of this cache `prompt` can reuse: the common prefix, leaving at least the
    /// prompt's last token to prefill (its logits start the generation).
    fn reusable(&self, prompt: &[u32]) -> usize {
        let common = self.tokens.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        common.min(prompt.len().saturating_sub(1))
    }
}

/// What one row generated.
#[derive(Debug, Clone)]
pub(crate) struct Sampled {
    pub tokens: Vec<u32>,
    /// Tempered, untruncated log-prob of each token (see [`sample_token`]).
    pub logprobs: Vec<f32>,
    /// Entropy (nats) of the tempered, untruncated distribution at each token.
    pub entropies: Vec<f64>,
    /// Ended on a stop token (rather than on its limit).
    pub stopped: bool,
    /// Prompt tokens this row prefilled (the rest came from its cache).
    pub prefilled: usize,
    /// The row's cache for its next turn, when asked for: the prompt and every generated
    /// token but the last (which was sampled, never fed).
    pub prefix: Option<Prefix>,
}

/// Samples every row in one left-padded batch; rows finish independently. With `keep_cache`
/// each row's KV cache comes back in [`Sampled::prefix`] for its next turn.
pub(crate) fn generate_rows(
    model: &Qwen3Model,
    rows: &mut [Row<'_>],
    params: &SamplingParams,
    keep_cache: bool,
) -> Result<Vec<Sampled>> {
    let batch = rows.len();
    if batch == 0 || rows.iter().any(|r| r.prompt.is_empty() || r.limit == 0) {
        return Err(Error::Invalid("generation needs non-empty prompts and positive token limits".into()));
    }
    let device = model.device();
    // Each row's cached prefix (cut to what its prompt shares) and the suffix left to prefill.
    let mut cached = Vec::with_capacity(batch);
    let mut start = Vec::with_capacity(batch);
    for r in rows.iter_mut() {
        let kv = match r.prefix.take() {
            Some(mut p) => {
                let n = p.reusable(&r.prompt);
                p.kv.truncate(n)?;
                (n > 0).then_some(p.kv)
            }
            None => None,
        };
        start.push(kv.as_ref().map_or(0, RowCache::len));
        cached.push(kv);
    }
    let longest = rows.iter().zip(&start).map(|(r, &s)| r.prompt.len() - s).max().unwrap_or(0);
    let most = rows.iter().map(|r| r.limit).max().unwrap_or(0);
    // The padding id is never attended to (its slots are invalid), so any id works.
    let pad = 0u32;
    let mut ids = Vec::with_capacity(batch * longest);
    let mut valid = Vec::with_capacity(batch);
    for (r, &s) in rows.iter().zip(&start) {
        let suffix = &r.prompt[s..];
        let padding = longest - suffix.len();
        ids.extend(std::iter::repeat_n(pad, padding));
        ids.extend_from_slice(suffix);
        valid.push((0..longest).map(|i| i >= padding).collect::<Vec<bool>>());
    }
    let row_params: Vec<SamplingParams> =
        rows.iter().map(|r| SamplingParams { temperature: r.temperature, ..params.clone() }).collect();
    let mut cache = if cached.iter().any(Option::is_some) {
        KvCache::from_rows(&cached, model.config().num_hidden_layers, longest + most)?
    } else {
        model.new_cache_with_capacity(batch, longest + most)
    };
    drop(cached);
    let ids = Tensor::from_vec(ids, (batch, longest), device)?;
    let mut logits = model.forward_cached(&ids, &valid, &mut cache, Pass::SAMPLE, true)?;
    let mut out: Vec<Sampled> = rows
        .iter()
        .zip(&start)
        .map(|(r, &s)| Sampled {
            tokens: Vec::new(),
            logprobs: Vec::new(),
            entropies: Vec::new(),
            stopped: false,
            prefilled: r.prompt.len() - s,
            prefix: None,
        })
        .collect();
    let mut active = vec![true; batch];
    loop {
        let rows_logits = logits.squeeze(1)?.to_vec2::<f32>()?;
        // A row's draw depends only on its own logits and RNG, so rows draw in parallel: over
        // a 152k-token vocabulary each draw and entropy is a few milliseconds of CPU, which
        // made the draws, not the GPU, most of a decoding step (seen on an H200, 16 rows).
        let draws: Vec<Option<(u32, f32, f64)>> = rows_logits
            .par_iter()
            .zip(rows.par_iter_mut())
            .zip(row_params.par_iter())
            .zip(active.par_iter())
            .map(|(((row_logits, row), row_params), &on)| {
                on.then(|| {
                    let (token, logprob) = sample_token(row_logits, row_params, row.rng);
                    (token, logprob, entropy(row_logits, row.temperature))
                })
            })
            .collect();
        let mut next = vec![pad; batch];
        for (i, draw) in draws.into_iter().enumerate() {
            let Some((token, logprob, nats)) = draw else {
                continue;
            };
            let row = &rows[i];
            let sampled = &mut out[i];
            sampled.tokens.push(token);
            sampled.logprobs.push(logprob);
            sampled.entropies.push(nats);
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
    if keep_cache {
        for (i, (r, sampled)) in rows.iter().zip(&mut out).enumerate() {
            let kv = cache.take_row(i)?;
            let mut tokens = r.prompt.clone();
            tokens.extend_from_slice(&sampled.tokens[..sampled.tokens.len() - 1]);
            if kv.len() != tokens.len() {
                return Err(Error::Invalid(format!("row {i} cached {} slots for {} tokens", kv.len(), tokens.len())));
            }
            sampled.prefix = Some(Prefix { tokens, kv });
        }
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
