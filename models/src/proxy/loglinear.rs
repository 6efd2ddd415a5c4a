//! The log-linear decision model: a softmax over options whose logits are
//! `θ · φ(option) / T`, with sparse features, closed-form gradients and AdamW.
//!
//! Every decision the proxy policy samples is one [`Unit`]: the feature rows
//! of its options (global parameter indices, so one flat `θ` serves every
//! decision kind), the chosen index and the temperature it was sampled at.
//! Storing the whole context makes log-probs under any `θ` (current,
//! reference) a pure recomputation, and the gradient of `log p(chosen)` is
//! `(φ(chosen) − Σ_a p(a) φ(a)) / T`.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::agent::OptimStep;

/// Sparse features of one option: `(parameter index, value)` pairs.
pub(crate) type Features = Vec<(usize, f64)>;

/// One sampled decision with everything needed to recompute its log-prob.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Unit {
    pub options: Vec<Features>,
    pub chosen: usize,
    pub temperature: f64,
    /// Log-prob of `chosen` when it was sampled.
    pub logp: f64,
    /// Entropy of the distribution it was sampled from.
    pub entropy: f64,
}

/// How a decision is taken.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Draw {
    /// Sample at this temperature.
    Sample(f64),
    /// Argmax; ties go to the lowest index, so option order is part of the design.
    Greedy,
}

/// The logits `θ · φ / T` of every option.
pub(crate) fn logits(theta: &[f64], options: &[Features], temperature: f64) -> Vec<f64> {
    options.iter().map(|phi| phi.iter().map(|&(i, x)| theta[i] * x).sum::<f64>() / temperature).collect()
}

/// Numerically stable log-softmax.
pub(crate) fn log_softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_z = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
    logits.iter().map(|l| l - log_z).collect()
}

/// Takes one decision over `options` (at least one) and records it.
pub(crate) fn decide(theta: &[f64], options: Vec<Features>, draw: Draw, rng: &mut ChaCha8Rng) -> Unit {
    // Greedy episodes are never trained on; their log-probs are reported at T = 1.
    let temperature = match draw {
        Draw::Sample(t) => t,
        Draw::Greedy => 1.0,
    };
    let logp = log_softmax(&logits(theta, &options, temperature));
    let chosen = match draw {
        Draw::Greedy => argmax(&logp),
        Draw::Sample(_) => {
            let u: f64 = rng.random();
            let mut acc = 0.0;
            let mut chosen = logp.len() - 1;
            for (i, l) in logp.iter().enumerate() {
                acc += l.exp();
                if u < acc {
                    chosen = i;
                    break;
                }
            }
            chosen
        }
    };
    unit(options, &logp, chosen, temperature)
}

/// The most likely option, ties to the first: how greedy episodes decide.
pub(crate) fn argmax(logp: &[f64]) -> usize {
    let mut best = 0;
    for (i, l) in logp.iter().enumerate() {
        if *l > logp[best] {
            best = i;
        }
    }
    best
}

/// The unit of a decision taken as `chosen` whatever the draw (a greedy plan made over
/// several decisions at once), with its log-probability and entropy under `theta`.
pub(crate) fn forced(theta: &[f64], options: Vec<Features>, chosen: usize) -> Unit {
    let logp = log_softmax(&logits(theta, &options, 1.0));
    unit(options, &logp, chosen, 1.0)
}

fn unit(options: Vec<Features>, logp: &[f64], chosen: usize, temperature: f64) -> Unit {
    let entropy = -logp.iter().map(|l| l.exp() * l).sum::<f64>();
    Unit { logp: logp[chosen], options, chosen, temperature, entropy }
}

impl Unit {
    /// The log-prob of the recorded choice under `theta`.
    pub(crate) fn logprob(&self, theta: &[f64]) -> f64 {
        log_softmax(&logits(theta, &self.options, self.temperature))[self.chosen]
    }

    /// Adds `coeff · ∇θ log p(chosen)` to `grad`.
    pub(crate) fn accumulate(&self, theta: &[f64], coeff: f64, grad: &mut [f64]) {
        if coeff == 0.0 {
            return;
        }
        let logp = log_softmax(&logits(theta, &self.options, self.temperature));
        let scale = coeff / self.temperature;
        for (a, phi) in self.options.iter().enumerate() {
            let weight = if a == self.chosen { 1.0 } else { 0.0 } - logp[a].exp();
            for &(i, x) in phi {
                grad[i] += scale * weight * x;
            }
        }
    }
}

/// AdamW over flat `f64` parameters: the moments and the step count. Shared by
/// every policy whose gradients are closed-form (this one and the engine's toy policy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Adam {
    /// First-moment estimates, one per parameter.
    #[serde(with = "bits")]
    pub m: Vec<f64>,
    /// Second-moment estimates, one per parameter.
    #[serde(with = "bits")]
    pub v: Vec<f64>,
    /// Steps taken.
    pub t: u64,
}

impl Adam {
    /// Zero moments for `dim` parameters, no step taken.
    pub fn new(dim: usize) -> Self {
        Adam { m: vec![0.0; dim], v: vec![0.0; dim], t: 0 }
    }

    /// One AdamW step on `theta` with `grad` (clipped to the global norm
    /// first); returns the norm before clipping and leaves `grad` zeroed.
    pub fn step(&mut self, theta: &mut [f64], grad: &mut [f64], optim: &OptimStep) -> f64 {
        let norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        let clip = match optim.max_grad_norm {
            Some(max) if norm > max && norm > 0.0 => max / norm,
            _ => 1.0,
        };
        self.t += 1;
        let t = self.t as i32;
        let correction1 = 1.0 - optim.beta1.powi(t);
        let correction2 = 1.0 - optim.beta2.powi(t);
        for i in 0..theta.len() {
            let g = grad[i] * clip;
            self.m[i] = optim.beta1 * self.m[i] + (1.0 - optim.beta1) * g;
            self.v[i] = optim.beta2 * self.v[i] + (1.0 - optim.beta2) * g * g;
            let m_hat = self.m[i] / correction1;
            let v_hat = self.v[i] / correction2;
            // Decoupled weight decay (Loshchilov & Hutter): shrink θ, not the gradient.
            theta[i] -= optim.lr * (m_hat / (v_hat.sqrt() + optim.eps) + optim.weight_decay * theta[i]);
            grad[i] = 0.0;
        }
        norm
    }
}

/// Serialises `f64`s as their IEEE-754 bit patterns: serde_json's default
/// float parsing may be off by an ulp, and a checkpoint must restore bit for bit.
pub(crate) mod bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(values: &[f64], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|v| v.to_bits()))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f64>, D::Error> {
        Ok(Vec::<u64>::deserialize(deserializer)?.into_iter().map(f64::from_bits).collect())
    }
}
