//! CATM stage 3: intensity-aware weights from post-reasoning lengths,
//! `w̃ = 1 − exp(−ln2 · l / β)` with `β` the median of `l` (so a file at the
//! median length scores ½ before normalisation), normalised so the weights
//! have mean 1.
//!
//! The median and the mean are taken over every file passed in (the CLI passes
//! all files the judge kept, across instances), as the seed normalises
//! `E[w] ≈ 1` over the corpus. The median of an even count is the mean of the
//! two middle values; [`Median::Upper`] takes the upper one instead, for callers whose numbers
//! were fixed with that convention (the synthetic task source).

/// Which middle value `β` is for an even number of lengths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Median {
    /// The mean of the two middle values (the usual median; the CLI's).
    #[default]
    Middle,
    /// The upper of the two middle values (`sorted[n / 2]`), as the synthetic source has always
    /// weighted its simulated reads; kept so its tasks stay byte-identical.
    Upper,
}

/// Normalised weights, one per length, in input order. Empty in, empty out.
/// Lengths must be positive (CATM keeps only files with ≥ 30 reasoning tokens).
pub fn catm_weights(lengths: &[f64]) -> Vec<f64> {
    catm_weights_with(lengths, Median::Middle)
}

/// [`catm_weights`] with `β` taken by `median`.
pub fn catm_weights_with(lengths: &[f64], median_kind: Median) -> Vec<f64> {
    if lengths.is_empty() {
        return Vec::new();
    }
    let beta = match median_kind {
        Median::Middle => median(lengths),
        Median::Upper => upper_median(lengths),
    };
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

/// The upper middle value, `sorted[n / 2]` (the median for an odd count). NaN for none.
pub fn upper_median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
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
        assert_eq!(upper_median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(upper_median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(upper_median(&[]).is_nan());
    }

    #[test]
    fn the_median_convention_only_matters_for_even_counts() {
        let odd = [30.0, 60.0, 90.0];
        assert_eq!(catm_weights_with(&odd, Median::Upper), catm_weights(&odd));
        let even = [30.0, 60.0, 90.0, 120.0];
        let upper = catm_weights_with(&even, Median::Upper);
        // β = 90 for the upper median: the third length scores exactly half before normalising.
        let raw: Vec<f64> = even.iter().map(|l| 1.0 - (-std::f64::consts::LN_2 * l / 90.0).exp()).collect();
        let mean = raw.iter().sum::<f64>() / 4.0;
        assert!((upper[2] - 0.5 / mean).abs() < 1e-12);
        assert_ne!(upper, catm_weights(&even));
    }
}
