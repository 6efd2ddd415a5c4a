//! The GRPO loss in `f64`, per unit, with its analytic gradient.
//!
//! A *unit* is one sampled decision (proxy policy) or token (LLM). For unit `u`
//! of sequence `i` with advantage `A_i`, current log-prob `lp`, sampling
//! ("old") log-prob `lp_old` and reference log-prob `lp_ref`:
//!
//! ```text
//! ratio  = exp(lp − lp_old)
//! surr   = min(ratio · A, clip(ratio, 1 − ε, 1 + ε_high) · A)
//! kl     = k1: lp − lp_ref
//!          k2: ½ (lp − lp_ref)²
//!          k3: exp(lp_ref − lp) − (lp_ref − lp) − 1
//! obj_u  = surr − β · kl
//! loss   = − Σ_u w_u · obj_u
//! ```
//!
//! The weights `w_u` are the aggregation ([`Aggregation`]). Everything a
//! policy needs for its backward pass is `coeff_u = ∂loss/∂lp_u`, computed here
//! in closed form:
//!
//! ```text
//! ∂surr/∂lp = ratio · A   unless the clipped branch is the minimum and ratio is
//!                         outside [1 − ε, 1 + ε_high] (then 0: "clipping is active")
//! ∂kl/∂lp   = k1: 1     k2: lp − lp_ref     k3: 1 − exp(lp_ref − lp)
//! coeff_u   = − w_u · (∂surr/∂lp − β · ∂kl/∂lp)
//! ```
//!
//! At a tie between the two branches the unclipped gradient is used (the
//! subgradient PyTorch's `torch.min` picks too when ratio is inside the range).
//! Only units enter the loss: tool responses, prompts and anything else the
//! policy did not sample have no unit and so no coefficient.

use serde::{Deserialize, Serialize};

/// The KL estimator of the penalty to the reference policy (Schulman's k1, k2, k3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KlEstimator {
    /// `lp − lp_ref`: unbiased, high variance, can be negative.
    K1,
    /// `½ (lp − lp_ref)²`: low variance, biased.
    K2,
    /// `exp(lp_ref − lp) − (lp_ref − lp) − 1`: unbiased and non-negative (GRPO's choice).
    K3,
}

/// How per-unit objectives are averaged into one loss.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum Aggregation {
    /// Mean over every unit of the batch: long sequences weigh more (DAPO).
    TokenMean,
    /// Mean over sequences of each sequence's unit mean (the original GRPO).
    /// A sequence with no units has no mean and is left out of the outer mean.
    SeqMeanTokenMean,
    /// Mean over sequences of each sequence's unit *sum* divided by a constant
    /// `norm` (Dr. GRPO). Dr. GRPO divides by a constant that does not depend
    /// on the batch — the generation budget (max tokens) — so no sequence's
    /// per-unit weight changes with its own length or its neighbours'. With
    /// `norm = None` the constant is the most units of any sequence in the
    /// batch (what a padded batch's width gives). Sequences with no units count
    /// in the outer mean (their sum is 0).
    SeqMeanTokenSumNorm {
        /// The constant divisor (typically the generation budget); `None`: the batch's longest sequence in units.
        norm: Option<f64>,
    },
}

/// The loss settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossConfig {
    /// Lower clip range ε: ratios below `1 − ε` are clipped for negative advantages.
    pub clip_eps: f64,
    /// Upper clip range; `None` uses `clip_eps` (symmetric). DAPO's "clip-higher" sets it larger.
    pub clip_eps_high: Option<f64>,
    /// KL coefficient β (0 disables the penalty; the reference log-probs are then unused).
    pub kl_beta: f64,
    /// How the KL to the reference is estimated per unit.
    pub kl_estimator: KlEstimator,
    /// How per-unit objectives are averaged into the loss.
    pub aggregation: Aggregation,
}

impl Default for LossConfig {
    /// The design defaults: ε = 0.2 (symmetric), β = 0.02 with k3, sequence mean of unit means.
    fn default() -> Self {
        LossConfig {
            clip_eps: 0.2,
            clip_eps_high: None,
            kl_beta: 0.02,
            kl_estimator: KlEstimator::K3,
            aggregation: Aggregation::SeqMeanTokenMean,
        }
    }
}

/// One sequence's inputs: its advantage and, per unit, the three log-probs.
#[derive(Clone, Copy, Debug)]
pub struct SequenceInput<'a> {
    /// The sequence's advantage `A_i`, shared by all its units; must be finite.
    pub advantage: f64,
    /// Current log-probs.
    pub logp: &'a [f64],
    /// Log-probs recorded at sampling time.
    pub logp_old: &'a [f64],
    /// Reference log-probs; may be empty when `kl_beta` is 0.
    pub logp_ref: &'a [f64],
}

/// The loss, its gradient with respect to every unit's log-prob, and diagnostics.
#[derive(Clone, Debug, PartialEq)]
pub struct LossOutput {
    /// The batch's loss, `− Σ_u w_u · obj_u`.
    pub loss: f64,
    /// `coeffs[i][u] = ∂loss/∂logp` of unit `u` of sequence `i`.
    pub coeffs: Vec<Vec<f64>>,
    /// Share of units whose gradient the clip removed (0 when there are no units).
    pub clip_ratio: f64,
    /// Mean over units of the KL estimate (0 when there are no units or β = 0
    /// and no reference log-probs were given).
    pub mean_kl: f64,
    /// Units in the batch.
    pub units: usize,
}

/// Inputs that do not fit together.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LossError {
    #[error("sequence {sequence}: {what} has {got} log-probs, the current policy has {want} units")]
    /// A sequence's old or reference log-probs differ in length from its current ones.
    Length {
        /// The sequence's index in the batch, 0-based.
        sequence: usize,
        /// Which log-probs are off (`the sampling (old) policy`, ...).
        what: &'static str,
        /// Log-probs given.
        got: usize,
        /// Units of the sequence under the current policy.
        want: usize,
    },
    #[error("sequence {sequence}, unit {unit}: {what} is {value}, not a finite number")]
    /// A log-prob or an advantage is NaN or infinite.
    NonFinite {
        /// The sequence's index in the batch, 0-based.
        sequence: usize,
        /// The unit's index in the sequence, 0-based (0 for the advantage).
        unit: usize,
        /// Which input is not finite (`the current log-prob`, `the advantage`, ...).
        what: &'static str,
        /// The value found.
        value: f64,
    },
    #[error("invalid loss settings: {0}")]
    /// [`LossConfig::validate`] refused the settings; holds its message.
    Config(String),
}

impl LossConfig {
    /// Checks the ranges of the settings.
    pub fn validate(&self) -> Result<(), LossError> {
        let bad = |m: String| Err(LossError::Config(m));
        if !(self.clip_eps > 0.0 && self.clip_eps < 1.0) {
            return bad(format!("clip_eps must be in (0, 1), got {}", self.clip_eps));
        }
        if let Some(high) = self.clip_eps_high
            && !(high.is_finite() && high > 0.0)
        {
            return bad(format!("clip_eps_high must be positive, got {high}"));
        }
        if !(self.kl_beta.is_finite() && self.kl_beta >= 0.0) {
            return bad(format!("kl_beta must be >= 0, got {}", self.kl_beta));
        }
        if let Aggregation::SeqMeanTokenSumNorm { norm: Some(n) } = self.aggregation
            && !(n.is_finite() && n > 0.0)
        {
            return bad(format!("the seq-mean-token-sum-norm constant must be positive, got {n}"));
        }
        Ok(())
    }
}

/// Computes the loss and its per-unit coefficients for a batch of sequences.
pub fn grpo_loss(config: &LossConfig, batch: &[SequenceInput<'_>]) -> Result<LossOutput, LossError> {
    config.validate()?;
    let use_kl = config.kl_beta > 0.0 || batch.iter().any(|s| !s.logp_ref.is_empty());
    for (i, s) in batch.iter().enumerate() {
        let want = s.logp.len();
        let check_len = |what, got: usize| {
            if got == want { Ok(()) } else { Err(LossError::Length { sequence: i, what, got, want }) }
        };
        check_len("the sampling (old) policy", s.logp_old.len())?;
        if use_kl {
            check_len("the reference policy", s.logp_ref.len())?;
        }
        let finite = |what, values: &[f64]| match values.iter().position(|v| !v.is_finite()) {
            Some(u) => Err(LossError::NonFinite { sequence: i, unit: u, what, value: values[u] }),
            None => Ok(()),
        };
        finite("the current log-prob", s.logp)?;
        finite("the sampling log-prob", s.logp_old)?;
        finite("the reference log-prob", s.logp_ref)?;
        if !s.advantage.is_finite() {
            return Err(LossError::NonFinite { sequence: i, unit: 0, what: "the advantage", value: s.advantage });
        }
    }
    let weights = unit_weights(config.aggregation, batch);
    let eps_low = config.clip_eps;
    let eps_high = config.clip_eps_high.unwrap_or(config.clip_eps);
    let mut loss = 0.0;
    let mut clipped = 0usize;
    let mut kl_sum = 0.0;
    let mut units = 0usize;
    let mut coeffs = Vec::with_capacity(batch.len());
    for (s, &w) in batch.iter().zip(&weights) {
        let mut row = Vec::with_capacity(s.logp.len());
        for u in 0..s.logp.len() {
            let lp = s.logp[u];
            let ratio = (lp - s.logp_old[u]).exp();
            let a = s.advantage;
            let unclipped = ratio * a;
            let clipped_ratio = ratio.clamp(1.0 - eps_low, 1.0 + eps_high);
            let clipped_value = clipped_ratio * a;
            // The clipped branch wins the min only when it is strictly smaller,
            // and it is constant in lp only when the ratio is outside the range.
            let clip_active = clipped_value < unclipped && clipped_ratio != ratio;
            let (surr, d_surr) = if clip_active { (clipped_value, 0.0) } else { (unclipped, unclipped) };
            let (kl, d_kl) = if use_kl { kl_and_grad(config.kl_estimator, lp, s.logp_ref[u]) } else { (0.0, 0.0) };
            let objective = surr - config.kl_beta * kl;
            loss -= w * objective;
            row.push(-w * (d_surr - config.kl_beta * d_kl));
            clipped += usize::from(clip_active);
            kl_sum += kl;
            units += 1;
        }
        coeffs.push(row);
    }
    let per_unit = |x: f64| if units == 0 { 0.0 } else { x / units as f64 };
    Ok(LossOutput { loss, coeffs, clip_ratio: per_unit(clipped as f64), mean_kl: per_unit(kl_sum), units })
}

/// The KL estimate of one unit and its derivative with respect to `lp`.
pub fn kl_and_grad(estimator: KlEstimator, lp: f64, lp_ref: f64) -> (f64, f64) {
    let diff = lp - lp_ref;
    match estimator {
        KlEstimator::K1 => (diff, 1.0),
        KlEstimator::K2 => (0.5 * diff * diff, diff),
        KlEstimator::K3 => {
            let x = -diff;
            // exp_m1 keeps the estimate accurate (and exactly 0) near lp = lp_ref.
            (x.exp_m1() - x, -x.exp_m1())
        }
    }
}

/// The per-unit weight of each sequence under `aggregation`.
fn unit_weights(aggregation: Aggregation, batch: &[SequenceInput<'_>]) -> Vec<f64> {
    match aggregation {
        Aggregation::TokenMean => {
            let total: usize = batch.iter().map(|s| s.logp.len()).sum();
            let w = if total == 0 { 0.0 } else { 1.0 / total as f64 };
            vec![w; batch.len()]
        }
        Aggregation::SeqMeanTokenMean => {
            let sequences = batch.iter().filter(|s| !s.logp.is_empty()).count();
            batch
                .iter()
                .map(|s| if s.logp.is_empty() { 0.0 } else { 1.0 / (sequences as f64 * s.logp.len() as f64) })
                .collect()
        }
        Aggregation::SeqMeanTokenSumNorm { norm } => {
            let norm = norm.unwrap_or_else(|| batch.iter().map(|s| s.logp.len()).max().unwrap_or(0).max(1) as f64);
            let w = if batch.is_empty() { 0.0 } else { 1.0 / (batch.len() as f64 * norm) };
            vec![w; batch.len()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owned {
        advantage: f64,
        logp: Vec<f64>,
        old: Vec<f64>,
        reference: Vec<f64>,
    }

    fn inputs(owned: &[Owned]) -> Vec<SequenceInput<'_>> {
        owned
            .iter()
            .map(|o| SequenceInput { advantage: o.advantage, logp: &o.logp, logp_old: &o.old, logp_ref: &o.reference })
            .collect()
    }

    /// A batch with ratios inside and outside the clip range, both signs of advantage, and unequal lengths.
    fn batch() -> Vec<Owned> {
        vec![
            Owned {
                advantage: 1.3,
                logp: vec![-0.5, -1.2, -0.05],
                old: vec![-0.7, -1.1, -0.6],
                reference: vec![-0.4, -1.5, -0.2],
            },
            Owned { advantage: -0.8, logp: vec![-2.0, -0.3], old: vec![-1.5, -0.31], reference: vec![-2.2, -0.1] },
            Owned { advantage: 0.4, logp: vec![-0.9], old: vec![-0.95], reference: vec![-0.9] },
            Owned {
                advantage: -1.1,
                logp: vec![-0.2, -3.0, -1.0, -0.7],
                old: vec![-0.1, -2.5, -1.4, -0.71],
                reference: vec![-0.3, -2.9, -1.0, -0.6],
            },
        ]
    }

    fn all_configs() -> Vec<LossConfig> {
        let mut out = Vec::new();
        for est in [KlEstimator::K1, KlEstimator::K2, KlEstimator::K3] {
            for agg in [
                Aggregation::TokenMean,
                Aggregation::SeqMeanTokenMean,
                Aggregation::SeqMeanTokenSumNorm { norm: None },
                Aggregation::SeqMeanTokenSumNorm { norm: Some(16.0) },
            ] {
                for high in [None, Some(0.28)] {
                    out.push(LossConfig {
                        clip_eps: 0.2,
                        clip_eps_high: high,
                        kl_beta: 0.1,
                        kl_estimator: est,
                        aggregation: agg,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn coefficients_match_finite_differences() {
        let h = 1e-6;
        for config in all_configs() {
            let owned = batch();
            let out = grpo_loss(&config, &inputs(&owned)).expect("valid batch");
            for i in 0..owned.len() {
                for u in 0..owned[i].logp.len() {
                    let shifted = |delta: f64| {
                        let mut o = batch();
                        o[i].logp[u] += delta;
                        grpo_loss(&config, &inputs(&o)).expect("valid batch").loss
                    };
                    let numeric = (shifted(h) - shifted(-h)) / (2.0 * h);
                    let analytic = out.coeffs[i][u];
                    assert!(
                        (numeric - analytic).abs() < 1e-6,
                        "{config:?}: sequence {i} unit {u}: analytic {analytic}, numeric {numeric}"
                    );
                }
            }
        }
    }

    #[test]
    fn on_policy_ratio_is_one_and_nothing_is_clipped() {
        let logp = [-0.3, -1.0, -2.0];
        let config = LossConfig { kl_beta: 0.0, aggregation: Aggregation::TokenMean, ..LossConfig::default() };
        let out = grpo_loss(&config, &[SequenceInput { advantage: 2.0, logp: &logp, logp_old: &logp, logp_ref: &[] }])
            .expect("valid");
        // loss = −mean(ratio·A) = −A and every coefficient is −A/n.
        assert!((out.loss + 2.0).abs() < 1e-15);
        for c in &out.coeffs[0] {
            assert!((c + 2.0 / 3.0).abs() < 1e-15);
        }
        assert_eq!(out.clip_ratio, 0.0);
        assert_eq!(out.mean_kl, 0.0);
    }

    #[test]
    fn clipping_is_active_exactly_outside_the_range_on_the_advantage_side() {
        let config = LossConfig {
            kl_beta: 0.0,
            clip_eps_high: Some(0.3),
            aggregation: Aggregation::TokenMean,
            ..LossConfig::default()
        };
        let old = [-1.0];
        let case = |ratio: f64, advantage: f64| {
            let logp = [-1.0 + ratio.ln()];
            grpo_loss(&config, &[SequenceInput { advantage, logp: &logp, logp_old: &old, logp_ref: &[] }])
                .expect("valid")
        };
        // Positive advantage: clipped above 1 + ε_high = 1.3 only.
        assert_eq!(case(1.5, 1.0).clip_ratio, 1.0);
        assert_eq!(case(1.5, 1.0).coeffs[0][0], 0.0);
        assert_eq!(case(1.25, 1.0).clip_ratio, 0.0);
        assert_eq!(case(0.5, 1.0).clip_ratio, 0.0);
        // Negative advantage: clipped below 1 − ε = 0.8 only.
        assert_eq!(case(0.5, -1.0).clip_ratio, 1.0);
        assert_eq!(case(0.5, -1.0).coeffs[0][0], 0.0);
        assert_eq!(case(1.5, -1.0).clip_ratio, 0.0);
        assert!((case(1.5, -1.0).coeffs[0][0] - 1.5).abs() < 1e-12, "−(−ratio) = ratio");
        // Value of the clipped objective: −clip(ratio)·A.
        assert!((case(1.5, 1.0).loss + 1.3).abs() < 1e-12);
    }

    #[test]
    fn kl_estimators_have_their_textbook_values() {
        let (lp, lr) = (-1.0_f64, -1.5_f64);
        assert_eq!(kl_and_grad(KlEstimator::K1, lp, lr), (0.5, 1.0));
        assert_eq!(kl_and_grad(KlEstimator::K2, lp, lr), (0.125, 0.5));
        let (k3, d3) = kl_and_grad(KlEstimator::K3, lp, lr);
        assert!((k3 - ((-0.5_f64).exp() + 0.5 - 1.0)).abs() < 1e-15);
        assert!((d3 - (1.0 - (-0.5_f64).exp())).abs() < 1e-15);
        // k3 is non-negative and 0 at equality.
        assert_eq!(kl_and_grad(KlEstimator::K3, lr, lr), (0.0, 0.0));
        for d in [-3.0, -0.1, 0.2, 4.0] {
            assert!(kl_and_grad(KlEstimator::K3, lr + d, lr).0 > 0.0);
        }
    }

    #[test]
    fn aggregations_weigh_units_as_documented() {
        // Two sequences, 1 and 3 units, advantage 1, on-policy, no KL: loss = −Σ w_u.
        let one = [-1.0];
        let three = [-1.0, -1.0, -1.0];
        let seqs = [
            SequenceInput { advantage: 1.0, logp: &one, logp_old: &one, logp_ref: &[] },
            SequenceInput { advantage: 1.0, logp: &three, logp_old: &three, logp_ref: &[] },
            SequenceInput { advantage: 1.0, logp: &[], logp_old: &[], logp_ref: &[] },
        ];
        let run = |aggregation| {
            grpo_loss(&LossConfig { kl_beta: 0.0, aggregation, ..LossConfig::default() }, &seqs).expect("valid")
        };
        let token = run(Aggregation::TokenMean);
        assert_eq!(token.coeffs, vec![vec![-0.25], vec![-0.25; 3], vec![]]);
        let seq = run(Aggregation::SeqMeanTokenMean);
        assert_eq!(seq.coeffs, vec![vec![-0.5], vec![-0.5 / 3.0; 3], vec![]], "the empty sequence is left out");
        let norm = run(Aggregation::SeqMeanTokenSumNorm { norm: None });
        assert_eq!(norm.coeffs, vec![vec![-1.0 / 9.0], vec![-1.0 / 9.0; 3], vec![]], "3 sequences × max 3 units");
        let fixed = run(Aggregation::SeqMeanTokenSumNorm { norm: Some(10.0) });
        assert_eq!(fixed.coeffs[1], vec![-1.0 / 30.0; 3]);
        assert!((token.loss + 1.0).abs() < 1e-15 && (seq.loss + 1.0).abs() < 1e-15);
    }

    #[test]
    fn mismatched_or_non_finite_inputs_are_errors_naming_the_sequence() {
        let a = [-1.0, -2.0];
        let b = [-1.0];
        let err = grpo_loss(
            &LossConfig::default(),
            &[SequenceInput { advantage: 1.0, logp: &a, logp_old: &b, logp_ref: &a }],
        )
        .expect_err("length mismatch");
        assert_eq!(err, LossError::Length { sequence: 0, what: "the sampling (old) policy", got: 1, want: 2 });
        let nan = [f64::NAN, -1.0];
        let err = grpo_loss(
            &LossConfig::default(),
            &[
                SequenceInput { advantage: 1.0, logp: &a, logp_old: &a, logp_ref: &a },
                SequenceInput { advantage: 1.0, logp: &a, logp_old: &a, logp_ref: &nan },
            ],
        )
        .expect_err("NaN reference");
        assert!(matches!(err, LossError::NonFinite { sequence: 1, unit: 0, .. }), "{err}");
        let bad = LossConfig { clip_eps: 1.5, ..LossConfig::default() };
        assert!(matches!(grpo_loss(&bad, &[]), Err(LossError::Config(_))));
    }
}
