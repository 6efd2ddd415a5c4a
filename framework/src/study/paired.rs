//! Paired differences between variants over seeds.
//!
//! Every variant runs at the same seed indices with the same task order and
//! sampling streams (common random numbers, [`super::load::RunSpec`]), so run
//! `i` of variant A and run `i` of the reference variant differ only by the
//! variant. The difference `dᵢ = Aᵢ − refᵢ` per seed index removes what the
//! seed index shares (which tasks came first, which draws were lucky), and its
//! spread is usually far smaller than that of either variant alone.
//!
//! For each variant other than the reference and each metric of [`METRICS`]:
//! the mean of `dᵢ` over the seed indices both ran, its 95% Student-t interval
//! (n − 1 dof), and the two-sided p-value of an exact sign-flip permutation
//! test of "mean difference 0" (every one of the 2ⁿ sign patterns for n ≤
//! [`EXACT_UP_TO`], else [`MONTE_CARLO_FLIPS`] seeded random ones). A
//! difference is **significant** when both agree: the interval excludes 0 and
//! p < 0.05. With 5 seeds the smallest possible p is 2/32 = 0.0625, so nothing
//! can be significant; fidelity studies run 6 seeds (smallest p 2/64).
//!
//! Held-out metrics (F_β, turns) come from each run's last evaluation, as in
//! the main table. Training metrics (KL, completion length, wrong answers'
//! length, truncation) are the mean over the run's last [`TAIL_SHARE`] of
//! steps (at least one): a single step's batch is noisy, and the tail is what
//! the run converged to.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::stats::{MeanCi, t_975};
use super::summary::VariantSummary;
use crate::engine::MetricsRow;
use crate::markdown::Table;

/// The metrics compared, in table order: (key, header).
pub const METRICS: [(&str, &str); 6] = [
    ("fb", "F_β"),
    ("kl", "KL"),
    ("turns", "turns"),
    ("completion_len", "completion len"),
    ("wrong_len", "wrong answers' len"),
    ("truncated", "truncated"),
];

/// Training metrics average over this share of a run's last steps.
pub const TAIL_SHARE: f64 = 0.1;
/// Up to this many pairs, the permutation test enumerates every sign pattern.
pub const EXACT_UP_TO: usize = 16;
/// Random sign patterns beyond [`EXACT_UP_TO`] pairs.
pub const MONTE_CARLO_FLIPS: usize = 1 << 16;

/// One variant's difference to the reference on one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedDiff {
    /// The variant compared.
    pub variant: String,
    /// The reference variant.
    pub reference: String,
    /// The metric's key ([`METRICS`]).
    pub metric: String,
    /// Seed indices where both have the value.
    pub pairs: usize,
    /// Mean of `variant − reference` over the pairs.
    pub mean: f64,
    /// The 95% t-interval's half-width; `None` with one pair.
    pub ci95: Option<f64>,
    /// Two-sided p of the sign-flip permutation test; `None` with one pair.
    pub p_value: Option<f64>,
    /// The interval excludes 0 and p < 0.05.
    pub significant: bool,
}

/// One run's values of [`METRICS`].
pub fn run_values(rows: &[MetricsRow]) -> [Option<f64>; 6] {
    let eval = rows.iter().rev().find(|r| r.eval_fb_mean.is_some());
    let tail = ((rows.len() as f64 * TAIL_SHARE).ceil() as usize).max(1).min(rows.len());
    let tail = &rows[rows.len() - tail..];
    let mean_of = |f: &dyn Fn(&MetricsRow) -> Option<f64>| {
        let xs: Vec<f64> = tail.iter().filter_map(f).collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    };
    [
        eval.and_then(|r| r.eval_fb_mean),
        mean_of(&|r| Some(r.kl)),
        eval.and_then(|r| r.eval_turns),
        mean_of(&|r| Some(r.completion_len)),
        mean_of(&|r| r.wrong_len),
        mean_of(&|r| Some(r.truncated_rate)),
    ]
}

/// Paired differences of every variant but `reference` against it, variant-major in study order.
/// Empty when no variant has that name.
pub fn paired_differences(variants: &[VariantSummary], reference: &str) -> Vec<PairedDiff> {
    let Some(base) = variants.iter().find(|v| v.name == reference) else { return Vec::new() };
    let values = |v: &VariantSummary| -> Vec<(usize, [Option<f64>; 6])> {
        v.runs.iter().map(|r| (r.seed_index, run_values(&r.rows))).collect()
    };
    let base_values = values(base);
    let mut out = Vec::new();
    for v in variants.iter().filter(|v| v.name != reference) {
        let own = values(v);
        for (m, (key, _)) in METRICS.iter().enumerate() {
            let diffs: Vec<f64> = own
                .iter()
                .filter_map(|(seed, x)| {
                    let (_, y) = base_values.iter().find(|(s, _)| s == seed)?;
                    Some(x[m]? - y[m]?)
                })
                .collect();
            let Some(ci) = MeanCi::of(&diffs) else { continue };
            let p_value = (diffs.len() > 1).then(|| sign_flip_p(&diffs));
            let significant = match (ci.half_width, p_value) {
                (Some(h), Some(p)) => ci.mean.abs() > h && p < 0.05,
                _ => false,
            };
            out.push(PairedDiff {
                variant: v.name.clone(),
                reference: reference.to_owned(),
                metric: key.to_string(),
                pairs: diffs.len(),
                mean: ci.mean,
                ci95: ci.half_width,
                p_value,
                significant,
            });
        }
    }
    out
}

/// Two-sided p-value of the sign-flip permutation test of mean 0: the share of sign patterns
/// whose |mean| is at least the observed one (the observed pattern included, so p ≥ 2⁻ⁿ·2 for
/// a non-zero mean). All-zero differences give 1.
pub fn sign_flip_p(diffs: &[f64]) -> f64 {
    let n = diffs.len();
    let observed = diffs.iter().sum::<f64>().abs();
    // A relative tolerance, so that the observed pattern always counts itself.
    let at_least = |sum: f64| sum.abs() >= observed * (1.0 - 1e-12);
    if n <= EXACT_UP_TO {
        let hits = (0u32..1 << n)
            .filter(|mask| {
                at_least(diffs.iter().enumerate().map(|(i, d)| if mask >> i & 1 == 1 { -d } else { *d }).sum())
            })
            .count();
        hits as f64 / (1u64 << n) as f64
    } else {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let hits = (0..MONTE_CARLO_FLIPS)
            .filter(|_| at_least(diffs.iter().map(|d| if rng.random::<bool>() { -d } else { *d }).sum()))
            .count();
        (hits + 1) as f64 / (MONTE_CARLO_FLIPS + 1) as f64
    }
}

/// The markdown section: one row per variant, one column per metric, cells `+0.012 ± 0.030 (p
/// 0.41)`, a `*` on significant ones.
pub fn render_markdown(diffs: &[PairedDiff], reference: &str) -> String {
    if diffs.is_empty() {
        return String::new();
    }
    let pairs = diffs.iter().map(|d| d.pairs).max().unwrap_or(0);
    let mut out = format!(
        "\n## Paired differences against `{reference}`\n\n\
         Variant − `{reference}` per seed index (common random numbers), mean ± 95% CI over {pairs} seed \
         indices and the exact sign-flip permutation p; `*`: significant (the CI excludes 0 and p < 0.05; \
         with ≤ 5 seeds p cannot fall below 0.0625). Training columns average each run's last {:.0}% of \
         steps; t(0.975, {}) = {:.3}.\n\n",
        TAIL_SHARE * 100.0,
        pairs.saturating_sub(1),
        if pairs > 1 { t_975(pairs - 1) } else { f64::NAN },
    );
    let mut table = Table::new(std::iter::once("variant").chain(METRICS.map(|(_, header)| header)));
    let mut variants: Vec<&str> = Vec::new();
    for d in diffs {
        if !variants.contains(&d.variant.as_str()) {
            variants.push(&d.variant);
        }
    }
    for variant in variants {
        let cells = METRICS.into_iter().map(|(key, _)| {
            diffs.iter().find(|d| d.variant == variant && d.metric == key).map_or("–".to_owned(), |d| {
                let decimals = if matches!(key, "completion_len" | "wrong_len" | "turns") { 1 } else { 3 };
                let ci = d.ci95.map_or(String::new(), |h| format!(" ± {h:.decimals$}"));
                let p = d.p_value.map_or(String::new(), |p| format!(" (p {p:.3})"));
                format!("{:+.decimals$}{ci}{p}{}", d.mean, if d.significant { " *" } else { "" })
            })
        });
        table.row(std::iter::once(variant.to_owned()).chain(cells));
    }
    out.push_str(&table.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::summary::RunResult;

    #[test]
    fn sign_flip_p_counts_the_patterns_at_least_as_extreme() {
        // All positive: only the observed pattern and its mirror reach |sum|: 2 of 2^n.
        assert_eq!(sign_flip_p(&[1.0, 2.0, 3.0, 4.0, 5.0]), 2.0 / 32.0);
        assert_eq!(sign_flip_p(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]), 2.0 / 64.0);
        // Balanced: every pattern is at least as extreme as a zero sum.
        assert_eq!(sign_flip_p(&[1.0, -1.0]), 1.0);
        assert_eq!(sign_flip_p(&[0.0, 0.0, 0.0]), 1.0);
        // [3, 1]: sums ±4 (2 patterns) and ±2 (2 patterns) against observed 4.
        assert_eq!(sign_flip_p(&[3.0, 1.0]), 0.5);
        // Beyond the exact range the Monte Carlo estimate stays close to the exact 2/2^n ≈ 0.
        let many = vec![1.0; 20];
        assert!(sign_flip_p(&many) < 1e-3);
    }

    fn run(seed_index: usize, fb: f64, kl: f64) -> RunResult {
        let row = MetricsRow {
            step: 1,
            kl,
            completion_len: 100.0 + fb,
            eval_fb_mean: Some(fb),
            eval_turns: Some(2.0),
            ..MetricsRow::default()
        };
        RunResult { seed_index, rows: vec![row] }
    }

    fn variant(name: &str, runs: Vec<RunResult>) -> VariantSummary {
        VariantSummary { name: name.into(), runs, stats: Vec::new(), passes_gate: None }
    }

    #[test]
    fn differences_pair_runs_by_seed_index_and_mark_what_is_significant() {
        // Seeds vary a lot (0.2 … 0.7) but "b" is always 0.05 above "a": paired, that is clear.
        let seeds = [0.2, 0.5, 0.3, 0.7, 0.4, 0.6];
        let a = variant("a", seeds.iter().enumerate().map(|(i, &x)| run(i, x, 0.1)).collect());
        let b = variant(
            "b",
            // Written in another order: pairing goes by seed index, not position.
            seeds.iter().enumerate().rev().map(|(i, &x)| run(i, x + 0.05, 0.1 + 0.01 * (i % 2) as f64)).collect(),
        );
        let diffs = paired_differences(&[a.clone(), b.clone()], "a");
        let fb = diffs.iter().find(|d| d.metric == "fb").expect("an F_β row");
        assert_eq!((fb.variant.as_str(), fb.pairs), ("b", 6));
        assert!((fb.mean - 0.05).abs() < 1e-12 && fb.ci95.expect("a CI") < 1e-9, "{fb:?}");
        assert_eq!(fb.p_value, Some(2.0 / 64.0));
        assert!(fb.significant);
        // KL differs by 0 or 0.01 in alternation: positive mean, but a sign-flip p of 2/64 needs all
        // of one sign, and three are zero.
        let kl = diffs.iter().find(|d| d.metric == "kl").expect("a KL row");
        assert!(kl.mean > 0.0 && !kl.significant, "{kl:?}");
        // Turns are equal everywhere: mean 0, p 1.
        let turns = diffs.iter().find(|d| d.metric == "turns").expect("turns");
        assert_eq!((turns.mean, turns.p_value, turns.significant), (0.0, Some(1.0), false));
        // A missing seed of the reference leaves that seed out; an unknown reference gives nothing.
        let short = variant("a", seeds.iter().enumerate().take(4).map(|(i, &x)| run(i, x, 0.1)).collect());
        assert!(paired_differences(&[short, b.clone()], "a").iter().all(|d| d.pairs == 4));
        assert!(paired_differences(&[a.clone(), b.clone()], "nope").is_empty());
        let md = render_markdown(&diffs, "a");
        assert!(md.contains("| b | +0.050 ± 0.000 (p 0.031) * |"), "{md}");
    }

    #[test]
    fn training_metrics_average_the_last_tenth_of_the_steps() {
        let rows: Vec<MetricsRow> = (1..=20)
            .map(|step| MetricsRow { step, kl: step as f64, truncated_rate: 0.5, ..MetricsRow::default() })
            .collect();
        let values = run_values(&rows);
        assert_eq!(values[1], Some(19.5), "the mean KL of steps 19 and 20");
        assert_eq!(values[5], Some(0.5));
        assert_eq!(values[0], None, "no evaluation, no F_β");
        assert_eq!(values[4], None, "no wrong rollout recorded");
    }
}
