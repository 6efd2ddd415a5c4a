//! CATM stage 3: intensity-aware weights from post-reasoning lengths,
//! `w̃ = 1 − exp(−ln2 · l / β)` with `β` the median of `l` (so a file at the
//! median length scores ½ before normalisation), normalised so the weights
//! have mean 1.
//!
//! The median and the mean are taken over every file passed in (the CLI passes
//! all files the judge kept, across instances), as the seed normalises
//! `E[w] ≈ 1` over the corpus. The median of an even count is the mean of the
//! two middle values.

/// Normalised weights, one per length, in input order. Empty in, empty out.
/// Lengths must be positive (CATM keeps only files with ≥ 30 reasoning tokens).
pub fn catm_weights(lengths: &[f64]) -> Vec<f64> {
    if lengths.is_empty() {
        return Vec::new();
    }
    let beta = median(lengths);
    if beta.is_nan() || beta <= 0.0 {
        // Every length is 0: no file carries reasoning; all weigh the same.
        return vec![1.0; lengths.len()];
    }
    let raw: Vec<f64> = lengths.iter().map(|&l| 1.0 - (-std::f64::consts::LN_2 * l / beta).exp()).collect();
    let mean = raw.iter().sum::<f64>() / raw.len() as f64;
    if mean.is_nan() || mean <= 0.0 {
        return vec![1.0; lengths.len()];
    }
    raw.into_iter().map(|w| w / mean).collect()
}

/// The median (mean of the middle two for an even count). NaNs sort last.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_length_scores_half_before_normalising() {
        let w = catm_weights(&[30.0, 60.0, 90.0]);
        // β = 60: raw weights 1 - 2^-0.5, 1/2, 1 - 2^-1.5.
        let raw = [1.0 - 0.5f64.sqrt(), 0.5, 1.0 - 0.5f64.powf(1.5)];
        let mean = raw.iter().sum::<f64>() / 3.0;
        for (got, r) in w.iter().zip(raw) {
            assert!((got - r / mean).abs() < 1e-12);
        }
        assert!((w.iter().sum::<f64>() / 3.0 - 1.0).abs() < 1e-12);
        assert!(w[0] < w[1] && w[1] < w[2]);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(catm_weights(&[]).is_empty());
        assert_eq!(catm_weights(&[0.0, 0.0]), vec![1.0, 1.0]);
        assert_eq!(catm_weights(&[42.0]), vec![1.0]);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
