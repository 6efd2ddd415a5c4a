//! Small statistics for study summaries: means with Student-t 95% confidence
//! intervals over seeds, and Kendall's τ-b for replay's ranking comparisons.

/// A mean over seeds with its 95% CI half-width (`None` with one seed).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanCi {
    /// The sample mean.
    pub mean: f64,
    /// `t(0.975, n−1) · s / √n`, with `s` the sample standard deviation; `None` when `n` is 1.
    pub half_width: Option<f64>,
    /// Values averaged, ≥ 1.
    pub n: usize,
}

impl MeanCi {
    /// `mean ± t(0.975, n−1) · s / √n`; `None` for no values.
    pub fn of(values: &[f64]) -> Option<MeanCi> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let half_width = (n > 1).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            t_975(n - 1) * (var / n as f64).sqrt()
        });
        Some(MeanCi { mean, half_width, n })
    }

    /// `0.612 ± 0.034`, or `0.612 (n=1)`.
    pub fn display(&self, decimals: usize) -> String {
        match self.half_width {
            Some(h) => format!("{:.*} ± {:.*}", decimals, self.mean, decimals, h),
            None => format!("{:.*} (n={})", decimals, self.mean, self.n),
        }
    }
}

/// The two-sided 95% quantile of Student's t with `dof` degrees of freedom.
pub fn t_975(dof: usize) -> f64 {
    // Exact table values to 3 decimals for small dof, where the asymptotic series is poor.
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match dof {
        0 => f64::NAN,
        1..=30 => TABLE[dof - 1],
        _ => {
            // Cornish–Fisher expansion around the normal quantile.
            let z: f64 = 1.959_963_984_540_054;
            let d = dof as f64;
            z + (z.powi(3) + z) / (4.0 * d) + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

/// Kendall's τ-b of two equally long samples; `None` when either is constant
/// (or shorter than 2), where τ is undefined.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Option<f64> {
    assert_eq!(x.len(), y.len(), "kendall_tau_b needs paired samples");
    let n = x.len();
    let (mut concordant, mut discordant, mut ties_x, mut ties_y) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..n {
        for j in i + 1..n {
            let dx = x[i].total_cmp(&x[j]) as i64;
            let dy = y[i].total_cmp(&y[j]) as i64;
            if dx == 0 {
                ties_x += 1;
            }
            if dy == 0 {
                ties_y += 1;
            }
            match dx * dy {
                1 => concordant += 1,
                -1 => discordant += 1,
                _ => {}
            }
        }
    }
    let pairs = (n * n.saturating_sub(1) / 2) as i64;
    let denom = (((pairs - ties_x) * (pairs - ties_y)) as f64).sqrt();
    (denom > 0.0).then(|| (concordant - discordant) as f64 / denom)
}

/// How a second vector of advantages over the same rows agrees with a reference, as `study
/// replay` and shadow variants report it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Agreement {
    /// Mean Kendall τ-b of the within-group rankings, over the groups where it is defined.
    pub kendall_tau_b: Option<f64>,
    /// How many groups that mean is over (groups where either side is constant are left out).
    pub tau_groups: usize,
    /// Share of rows whose advantage has another sign (positive, negative, zero) than the
    /// reference's.
    pub sign_flips: f64,
    /// Share of groups where the second vector is constant (it teaches that group nothing).
    pub zero_variance_groups: f64,
}

impl Agreement {
    /// The agreement of `other` with `reference`, both in table-row order, `groups` the rows
    /// of each group.
    pub fn of(reference: &[f64], other: &[f64], groups: &[std::ops::Range<usize>]) -> Agreement {
        let taus: Vec<f64> =
            groups.iter().filter_map(|g| kendall_tau_b(&reference[g.clone()], &other[g.clone()])).collect();
        let sign = |x: f64| {
            if x > 0.0 {
                1
            } else if x < 0.0 {
                -1
            } else {
                0
            }
        };
        let flips = reference.iter().zip(other).filter(|(a, b)| sign(**a) != sign(**b)).count();
        let flat = groups.iter().filter(|g| other[(*g).clone()].iter().all(|x| *x == other[g.start])).count();
        Agreement {
            kendall_tau_b: (!taus.is_empty()).then(|| taus.iter().sum::<f64>() / taus.len() as f64),
            tau_groups: taus.len(),
            sign_flips: flips as f64 / reference.len().max(1) as f64,
            zero_variance_groups: flat as f64 / groups.len().max(1) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn study_mean_ci_uses_student_t() {
        // Mean 2, s = 1, n = 3: half-width 4.303 / √3.
        let ci = MeanCi::of(&[1.0, 2.0, 3.0]).expect("values");
        assert_eq!(ci.mean, 2.0);
        assert!((ci.half_width.expect("n > 1") - 4.303 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(ci.display(2), "2.00 ± 2.48");
        let one = MeanCi::of(&[0.5]).expect("one value");
        assert_eq!((one.half_width, one.display(3)), (None, "0.500 (n=1)".to_string()));
        assert_eq!(MeanCi::of(&[]), None);
        // The series continues the table smoothly: t(31) just under t(30), above z.
        assert!(t_975(31) < t_975(30) && t_975(31) > 2.03 && t_975(1000) > 1.96 && t_975(1000) < 1.963);
    }

    #[test]
    fn study_kendall_tau_b_by_hand() {
        assert_eq!(kendall_tau_b(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
        assert_eq!(kendall_tau_b(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // x = (1, 2, 2), y = (1, 2, 3): nc = 2, nd = 0, n0 = 3, ties_x = 1, ties_y = 0 → 2 / √(2·3).
        let t = kendall_tau_b(&[1.0, 2.0, 2.0], &[1.0, 2.0, 3.0]).expect("defined");
        assert!((t - 2.0 / 6f64.sqrt()).abs() < 1e-12, "{t}");
        assert_eq!(kendall_tau_b(&[1.0, 1.0], &[1.0, 2.0]), None);
    }
}
