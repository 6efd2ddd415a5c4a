//! Greedy shrinking of a failing case: fewer groups, fewer rollouts, then
//! every feature value towards the simplest value that still fails (0, 1, the
//! range ends, small integers, short decimals).

use super::cases::{Case, Column};

/// Shrinks `case` while `fails` holds, spending at most `budget` calls of `fails`.
pub(crate) fn shrink(
    case: Case,
    columns: &[Column],
    min_size: usize,
    budget: usize,
    fails: &mut dyn FnMut(&Case) -> bool,
) -> Case {
    let mut best = case;
    let mut calls = 0usize;
    let mut attempt = |candidate: &Case, calls: &mut usize| -> bool {
        if *calls >= budget {
            return false;
        }
        *calls += 1;
        fails(candidate)
    };
    loop {
        let before = best.clone();
        // Fewer groups.
        let mut g = 0;
        while best.groups.len() > 1 && g < best.groups.len() {
            let mut c = best.clone();
            c.groups.remove(g);
            if attempt(&c, &mut calls) { best = c } else { g += 1 }
        }
        // Fewer rollouts per group.
        for g in 0..best.groups.len() {
            let mut i = 0;
            while best.groups[g].len() > min_size.max(1) && i < best.groups[g].len() {
                let mut c = best.clone();
                c.groups[g].remove(i);
                if attempt(&c, &mut calls) { best = c } else { i += 1 }
            }
        }
        // Simpler values.
        for g in 0..best.groups.len() {
            for (j, col) in columns.iter().enumerate() {
                let rows: Vec<Option<usize>> =
                    if col.per_group { vec![None] } else { (0..best.groups[g].len()).map(Some).collect() };
                for row in rows {
                    let current = best.groups[g][row.unwrap_or(0)][j];
                    for v in candidates(current, col) {
                        let mut c = best.clone();
                        match row {
                            Some(i) => c.groups[g][i][j] = v,
                            None => c.groups[g].iter_mut().for_each(|r| r[j] = v),
                        }
                        if attempt(&c, &mut calls) {
                            best = c;
                            break;
                        }
                    }
                }
            }
        }
        if best == before || calls >= budget {
            return best;
        }
    }
}

/// Values simpler than `x` that the column accepts, simplest first.
fn candidates(x: f64, col: &Column) -> Vec<f64> {
    let mut out: Vec<f64> = [
        0.0,
        1.0,
        col.range.lo,
        col.range.hi,
        -1.0,
        2.0,
        3.0,
        4.0,
        0.5,
        x.trunc(),
        x.round(),
        (x * 10.0).round() / 10.0,
        (x * 100.0).round() / 100.0,
        (x * 1000.0).round() / 1000.0,
    ]
    .into_iter()
    .filter(|&v| col.accepts(v) && complexity(v) < complexity(x))
    .collect();
    out.sort_by(|a, b| complexity(*a).total_cmp(&complexity(*b)));
    out.dedup();
    out
}

/// How complicated a value reads: 0, then 1, then other integers by size,
/// then decimals by their number of digits; negatives a little after positives.
pub(crate) fn complexity(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    let size = x.abs().ln_1p() + if x < 0.0 { 0.5 } else { 0.0 };
    if x == x.trunc() {
        return 1.0 + size;
    }
    let digits = (1..=6).find(|&d| {
        let p = 10f64.powi(d);
        (x * p).round() / p == x
    });
    10.0 * f64::from(digits.unwrap_or(15)) + size
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interval::Interval;

    #[test]
    fn complexity_orders_round_numbers_first() {
        assert!(complexity(0.0) < complexity(1.0));
        assert!(complexity(1.0) < complexity(2.0));
        assert!(complexity(4.0) < complexity(0.5));
        assert!(complexity(0.5) < complexity(0.25));
        assert!(complexity(0.25) < complexity(0.123_456_789));
        assert!(complexity(3.0) < complexity(-3.0));
    }

    #[test]
    fn shrinks_to_the_smallest_failing_case() {
        let col = Column::with_range("x", Interval::new(0.0, 8.0), false, false);
        let case = Case { groups: vec![vec![vec![7.3], vec![2.9], vec![5.55]], vec![vec![1.1]]] };
        // Fails when some rollout has x > 2.5: the minimum is one group of 2, a 0 and a 3.
        let mut fails = |c: &Case| c.groups.iter().flatten().any(|r| r[0] > 2.5);
        let out = shrink(case, std::slice::from_ref(&col), 2, 1000, &mut fails);
        assert_eq!(out.groups, vec![vec![vec![0.0], vec![3.0]]]);
    }
}
