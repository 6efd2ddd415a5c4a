//! Retrieval metrics: precision, recall and F-beta over sets (files,
//! functions) and over line ranges matched one-to-one.
//!
//! Edge cases (the contract's, extended to P and R): both sets empty gives 1
//! for every metric; exactly one empty gives 0 for every metric. F-beta is
//! computed from counts, `(1+β²)·tp / ((1+β²)·tp + β²·fn + fp)`, which is
//! defined for every β ≥ 0 (β = 0 is precision) and needs no special case
//! when precision and recall are both 0.

use std::collections::HashSet;

pub use rewardlab_protocol::{LineRange, LineRangeError};

/// Match counts of a prediction against a target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Predicted items that matched a target item.
    pub tp: usize,
    /// Number of (distinct) predicted items.
    pub predicted: usize,
    /// Number of (distinct) target items.
    pub target: usize,
}

impl Counts {
    /// Counts for two sets of strings; duplicates count once.
    pub fn of_sets<S: AsRef<str>>(predicted: &[S], target: &[S]) -> Counts {
        // Small sets (a handful of files) are the common case: a linear scan
        // beats hashing there, and the result is the same.
        if predicted.len() * target.len() <= 64 {
            // Count first occurrences only, without allocating.
            let first = |items: &[S], i: usize| !items[..i].iter().any(|y| y.as_ref() == items[i].as_ref());
            let mut c = Counts::default();
            for i in 0..predicted.len() {
                if first(predicted, i) {
                    c.predicted += 1;
                    c.tp += usize::from(target.iter().any(|y| y.as_ref() == predicted[i].as_ref()));
                }
            }
            c.target = (0..target.len()).filter(|&j| first(target, j)).count();
            return c;
        }
        let p: HashSet<&str> = predicted.iter().map(AsRef::as_ref).collect();
        let t: HashSet<&str> = target.iter().map(AsRef::as_ref).collect();
        let tp = p.intersection(&t).count();
        Counts { tp, predicted: p.len(), target: t.len() }
    }

    /// `tp / predicted`, in [0, 1]; 1 when both sides are empty, 0 when exactly one is.
    pub fn precision(self) -> f64 {
        match (self.predicted, self.target) {
            (0, 0) => 1.0,
            (0, _) | (_, 0) => 0.0,
            (p, _) => self.tp as f64 / p as f64,
        }
    }

    /// `tp / target`, in [0, 1]; 1 when both sides are empty, 0 when exactly one is.
    pub fn recall(self) -> f64 {
        match (self.predicted, self.target) {
            (0, 0) => 1.0,
            (0, _) | (_, 0) => 0.0,
            (_, t) => self.tp as f64 / t as f64,
        }
    }

    /// F-beta for any `beta >= 0`.
    pub fn f_beta(self, beta: f64) -> f64 {
        match (self.predicted, self.target) {
            (0, 0) => return 1.0,
            (0, _) | (_, 0) => return 0.0,
            _ => {}
        }
        if self.tp == 0 {
            return 0.0;
        }
        let b2 = beta * beta;
        let tp = self.tp as f64;
        let false_neg = (self.target - self.tp) as f64;
        let false_pos = (self.predicted - self.tp) as f64;
        let num = (1.0 + b2) * tp;
        num / (num + b2 * false_neg + false_pos)
    }

    /// F-beta with β = 1, the harmonic mean of precision and recall.
    pub fn f1(self) -> f64 {
        self.f_beta(1.0)
    }
}

/// When a predicted line range counts as matching a target range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LineMatch {
    /// The contract's rule: same file, and the prediction covers at least 50%
    /// of the target range (`overlap / len(target) >= 0.5`).
    #[default]
    Coverage,
    /// Seed 001's Table 6: same file and `overlap / len(union) >= 0.5`, which
    /// also penalises predictions far wider than the target.
    Jaccard,
}

impl LineMatch {
    /// The match score of a pair, or `None` when they do not match. Candidates
    /// are taken largest score first: lines of overlap for `Coverage` (the
    /// contract's "largest overlap first"), the Jaccard index for `Jaccard`.
    fn score(self, predicted: &LineRange, target: &LineRange) -> Option<f64> {
        let overlap = predicted.overlap(target);
        if overlap == 0 {
            return None;
        }
        match self {
            LineMatch::Coverage => (2 * overlap >= target.len()).then_some(f64::from(overlap)),
            LineMatch::Jaccard => {
                let union = predicted.len() + target.len() - overlap;
                (2 * overlap >= union).then_some(f64::from(overlap) / f64::from(union))
            }
        }
    }
}

/// A greedy one-to-one matching of predicted to target ranges: pairs are
/// taken largest score first (ties by target index, then predicted index, so
/// the result is deterministic), and each range is used at most once.
/// Exact duplicate ranges count once on either side. Returns the counts and the
/// matched `(predicted, target)` index pairs into the deduplicated lists.
pub fn match_line_ranges(
    predicted: &[LineRange],
    target: &[LineRange],
    rule: LineMatch,
) -> (Counts, Vec<(usize, usize)>) {
    let p = dedup_ranges(predicted);
    let t = dedup_ranges(target);
    let mut candidates: Vec<(f64, usize, usize)> = Vec::new();
    for (j, tr) in t.iter().enumerate() {
        for (i, pr) in p.iter().enumerate() {
            if let Some(score) = rule.score(pr, tr) {
                candidates.push((score, j, i));
            }
        }
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut p_used = vec![false; p.len()];
    let mut t_used = vec![false; t.len()];
    let mut pairs = Vec::new();
    for (_, j, i) in candidates {
        if !p_used[i] && !t_used[j] {
            p_used[i] = true;
            t_used[j] = true;
            pairs.push((i, j));
        }
    }
    (Counts { tp: pairs.len(), predicted: p.len(), target: t.len() }, pairs)
}

fn dedup_ranges(ranges: &[LineRange]) -> Vec<&LineRange> {
    let mut out: Vec<&LineRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lr(s: &str) -> LineRange {
        LineRange::parse(s).expect("test range parses")
    }

    #[test]
    fn edge_cases_of_empty_sets() {
        let empty: [&str; 0] = [];
        let c = Counts::of_sets(&empty, &empty);
        assert_eq!((c.precision(), c.recall(), c.f_beta(0.5)), (1.0, 1.0, 1.0));
        let c = Counts::of_sets(&["a"], &empty);
        assert_eq!((c.precision(), c.recall(), c.f_beta(0.5)), (0.0, 0.0, 0.0));
        let c = Counts::of_sets(&empty, &["a"]);
        assert_eq!((c.precision(), c.recall(), c.f_beta(0.5)), (0.0, 0.0, 0.0));
    }

    #[test]
    fn f_beta_matches_the_precision_recall_formula() {
        // 2 of 3 predicted are right, 2 of 4 targets found: P = 2/3, R = 1/2.
        let c = Counts::of_sets(&["a", "b", "x"], &["a", "b", "c", "d"]);
        let (p, r) = (2.0 / 3.0, 0.5);
        for beta in [0.0, 0.5, 1.0, 2.0] {
            let b2: f64 = beta * beta;
            let want = (1.0 + b2) * p * r / (b2 * p + r);
            assert!((c.f_beta(beta) - want).abs() < 1e-12, "beta {beta}");
        }
        assert!((c.f_beta(0.0) - p).abs() < 1e-12);
    }

    #[test]
    fn duplicates_count_once() {
        let c = Counts::of_sets(&["a", "a", "b"], &["a"]);
        assert_eq!(c, Counts { tp: 1, predicted: 2, target: 1 });
    }

    #[test]
    fn line_range_parsing() {
        assert_eq!(lr("./a/b.py:3-7"), LineRange::new("a/b.py", 3, 7));
        assert_eq!(lr("a.py:5"), LineRange::new("a.py", 5, 5));
        assert_eq!(lr("c:/x.py:1-2").path, "c:/x.py");
        assert!(matches!(LineRange::parse("a.py:0-2"), Err(LineRangeError::ZeroStart(_))));
        assert!(matches!(LineRange::parse("a.py:5-2"), Err(LineRangeError::Reversed(_))));
        assert!(matches!(LineRange::parse("a.py"), Err(LineRangeError::Shape(_))));
        assert!(matches!(LineRange::parse("a.py:+1-2"), Err(LineRangeError::Shape(_))));
        assert!(matches!(LineRange::parse("/a.py:1-2"), Err(LineRangeError::Path { .. })));
        assert_eq!(lr("a.py:3-7").to_string(), "a.py:3-7");
    }

    #[test]
    fn coverage_rule_needs_half_of_the_target() {
        let t = [lr("a.py:10-19")];
        let half = match_line_ranges(&[lr("a.py:15-30")], &t, LineMatch::Coverage).0;
        assert_eq!(half.tp, 1);
        let less = match_line_ranges(&[lr("a.py:16-30")], &t, LineMatch::Coverage).0;
        assert_eq!(less.tp, 0);
        let other_file = match_line_ranges(&[lr("b.py:10-19")], &t, LineMatch::Coverage).0;
        assert_eq!(other_file.tp, 0);
        // A wide prediction covers the target fully: a match under coverage, not under Jaccard.
        let wide = [lr("a.py:1-100")];
        assert_eq!(match_line_ranges(&wide, &t, LineMatch::Coverage).0.tp, 1);
        assert_eq!(match_line_ranges(&wide, &t, LineMatch::Jaccard).0.tp, 0);
    }

    #[test]
    fn matching_is_greedy_by_overlap_and_one_to_one() {
        // One prediction covers both targets: it may match only one, the larger overlap.
        let p = [lr("a.py:1-20")];
        let t = [lr("a.py:1-4"), lr("a.py:10-19")];
        let (c, pairs) = match_line_ranges(&p, &t, LineMatch::Coverage);
        assert_eq!(c, Counts { tp: 1, predicted: 1, target: 2 });
        assert_eq!(pairs, vec![(0, 1)]);
        // Two identical predictions are one.
        let (c, _) = match_line_ranges(&[lr("a.py:1-4"), lr("a.py:1-4")], &t, LineMatch::Coverage);
        assert_eq!(c, Counts { tp: 1, predicted: 1, target: 2 });
    }
}
