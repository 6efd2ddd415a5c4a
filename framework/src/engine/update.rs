//! The update phase of a step: for each of `epochs` × `minibatches` (whole
//! groups), current and reference log-probs per unit → [`grpo_loss`] (f64,
//! analytic `∂loss/∂logp`) → [`Policy::backward`] → [`Policy::step`].
//!
//! The sampling log-probs are read once, before the first update, so every
//! later update is off-policy: its ratio `exp(lp − lp_old)` departs from 1 and
//! the clipped surrogate acts. KL and the clip ratio are computed per update;
//! the metrics row reports their mean over the step's updates and the last
//! update's values (`kl_last`, `clip_ratio_last`).

use std::time::Instant;

use rewardlab_models::agent::Policy;

use super::Engine;
use super::error::{EngineError, Phase};
use super::loss::{self, grpo_loss};
use super::metrics::mean;

/// Means over the step's optimiser updates, and the phase's time.
pub(super) struct UpdateStats {
    /// The scheduled learning rate of the step.
    pub lr: f64,
    /// Mean of the episodes' mean unit entropy (read before the update).
    pub entropy: f64,
    pub loss: f64,
    pub kl: f64,
    pub clip_ratio: f64,
    /// Optimiser updates made (`epochs × minibatches`).
    pub updates: usize,
    /// KL and clip ratio of the last update alone.
    pub kl_last: f64,
    pub clip_ratio_last: f64,
    pub grad_norm: f64,
    /// Mean units per rollout.
    pub units: f64,
    /// Wall seconds of the phase.
    pub seconds: f64,
}

impl<P: Policy> Engine<P> {
    /// Trains on `episodes` (in spec order, G per group) with their `advantage`s.
    /// Runs before the step counter moves, so the schedule reads the step's own rate.
    pub(super) fn update(
        &mut self,
        episodes: &[P::Episode],
        advantage: &[f64],
        step_no: usize,
    ) -> Result<UpdateStats, EngineError> {
        let start = Instant::now();
        let entropy = mean(&episodes.iter().map(|e| self.policy.entropy(e)).collect::<Vec<_>>());
        let c = &self.config;
        let optim = c.optim_step(self.step);
        let old: Vec<Vec<f64>> = episodes.iter().map(|e| self.policy.sampled_logprobs(e)).collect();
        let g = c.group_size;
        let p = c.prompts_per_step;
        let (mut loss, mut kl, mut clip, mut grad) = (0.0, 0.0, 0.0, 0.0);
        let mut updates = 0usize;
        let (mut kl_last, mut clip_last) = (0.0, 0.0);
        let failed = |method| EngineError::policy(step_no, Phase::Update, method);
        for _ in 0..c.epochs {
            for mb in 0..c.minibatches {
                let lo = mb * p / c.minibatches * g;
                let hi = (mb + 1) * p / c.minibatches * g;
                let refs: Vec<&P::Episode> = episodes[lo..hi].iter().collect();
                let logp = self.policy.logprobs(&refs).map_err(failed("logprobs"))?;
                let logp_ref = self.policy.reference_logprobs(&refs).map_err(failed("reference_logprobs"))?;
                if logp.len() != refs.len() || logp_ref.len() != refs.len() {
                    return Err(EngineError::Contract {
                        step: step_no,
                        phase: Phase::Update,
                        detail: format!(
                            "logprobs gave {} and reference_logprobs {} sequences for {} episodes",
                            logp.len(),
                            logp_ref.len(),
                            refs.len()
                        ),
                    });
                }
                let inputs: Vec<loss::SequenceInput<'_>> = (lo..hi)
                    .map(|i| loss::SequenceInput {
                        advantage: advantage[i],
                        logp: &logp[i - lo],
                        logp_old: &old[i],
                        logp_ref: &logp_ref[i - lo],
                    })
                    .collect();
                let out = grpo_loss(&c.loss, &inputs).map_err(|source| EngineError::Loss { step: step_no, source })?;
                self.policy.backward(&refs, &out.coeffs).map_err(failed("backward"))?;
                let stats = self.policy.step(&optim).map_err(failed("step"))?;
                loss += out.loss;
                kl += out.mean_kl;
                clip += out.clip_ratio;
                (kl_last, clip_last) = (out.mean_kl, out.clip_ratio);
                grad += stats.grad_norm;
                updates += 1;
            }
        }
        let per = updates.max(1) as f64;
        let units = old.iter().map(Vec::len).sum::<usize>() as f64 / episodes.len().max(1) as f64;
        Ok(UpdateStats {
            lr: optim.lr,
            entropy,
            loss: loss / per,
            kl: kl / per,
            clip_ratio: clip / per,
            updates,
            kl_last,
            clip_ratio_last: clip_last,
            grad_norm: grad / per,
            units,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}
