//! The generator of test cases: groups of rollouts whose feature values come
//! from the declared ranges, biased hard towards the values that break
//! formulas — range ends, 0, 1, small integers, ties within a group and
//! groups whose rollouts are all equal.
//!
//! Deterministic: everything is drawn from a seeded ChaCha stream.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::interval::Interval;
use crate::schema::{FeatureDecl, Type};
use crate::table::{FeatureTable, TableError};

/// How far past 0 an unbounded range is explored.
const CAP: f64 = 1000.0;

/// One feature column to generate.
#[derive(Clone, Debug)]
pub(crate) struct Column {
    pub key: String,
    /// The declared range, for checking shrunk values.
    pub range: Interval,
    /// The range values are drawn from: the declared one with infinite ends capped.
    pub lo: f64,
    pub hi: f64,
    pub integer: bool,
    pub per_group: bool,
    /// Values drawn often: ends, 0, 1, small integers.
    pub specials: Vec<f64>,
}

impl Column {
    pub fn new(key: &str, decl: &FeatureDecl) -> Column {
        let boolean = decl.ty == Type::Bool;
        let range = if boolean { Interval::UNIT } else { decl.range };
        Column::with_range(key, range, decl.integer || boolean, decl.per_group)
    }

    pub fn with_range(key: &str, range: Interval, integer: bool, per_group: bool) -> Column {
        let lo = if range.lo.is_finite() { range.lo } else { range.hi.min(0.0) - CAP };
        let hi = if range.hi.is_finite() { range.hi } else { lo.max(0.0) + CAP };
        let mut col = Column { key: key.to_string(), range, lo, hi, integer, per_group, specials: Vec::new() };
        let mut specials = vec![lo, hi, 0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 4.0, 8.0, 10.0, 100.0, (lo + hi) / 2.0];
        specials.retain(|&x| col.accepts(x));
        specials.sort_by(f64::total_cmp);
        specials.dedup();
        col.specials = specials;
        col
    }

    /// Whether `x` is a value this column may hold.
    pub fn accepts(&self, x: f64) -> bool {
        x.is_finite() && self.range.contains(x) && self.lo <= x && x <= self.hi && (!self.integer || x == x.trunc())
    }

    pub fn draw(&self, rng: &mut ChaCha8Rng) -> f64 {
        let p: f64 = rng.random();
        let x = if p < 0.5 && !self.specials.is_empty() {
            self.specials[rng.random_range(0..self.specials.len())]
        } else if p < 0.75 {
            // Most interesting behaviour sits near the low end of a long range.
            uniform(rng, self.lo, self.hi.min(self.lo + 10.0))
        } else {
            uniform(rng, self.lo, self.hi)
        };
        let x = if self.integer { x.round().clamp(self.lo.ceil(), self.hi.floor()) } else { x };
        if self.accepts(x) { x } else { self.lo }
    }
}

fn uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    if hi > lo { lo + (hi - lo) * rng.random::<f64>() } else { lo }
}

/// Rows of one group: `rows[i][c]` is column `c` of rollout `i`.
pub(crate) type Group = Vec<Vec<f64>>;

/// One test case: the groups of a batch (a single group unless the program
/// reads batch reductions).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Case {
    pub groups: Vec<Group>,
}

/// The group sizes to draw: the checked range, clamped to `1..=max`.
pub(crate) fn size_range(group_size: Interval, max: usize) -> (usize, usize) {
    let lo = if group_size.lo.is_finite() { group_size.lo.ceil().max(1.0) as usize } else { 1 };
    let hi = if group_size.hi.is_finite() { (group_size.hi.floor() as usize).min(max) } else { max };
    (lo, hi.max(lo))
}

pub(crate) fn draw_group(rng: &mut ChaCha8Rng, columns: &[Column], sizes: (usize, usize)) -> Group {
    let size = if rng.random_bool(0.3) { sizes.0 } else { rng.random_range(sizes.0..=sizes.1) };
    if rng.random_bool(0.1) {
        // Every rollout alike: the degenerate group where spreads vanish.
        let row: Vec<f64> = columns.iter().map(|c| c.draw(rng)).collect();
        return vec![row; size];
    }
    let mut rows = vec![vec![0.0; columns.len()]; size];
    for (j, col) in columns.iter().enumerate() {
        let mode: f64 = rng.random();
        if col.per_group || mode < 0.25 {
            let x = col.draw(rng);
            rows.iter_mut().for_each(|r| r[j] = x);
        } else if mode < 0.5 {
            // Two values shared out: ties across the group.
            let pair = [col.draw(rng), col.draw(rng)];
            rows.iter_mut().for_each(|r| r[j] = pair[usize::from(rng.random_bool(0.5))]);
        } else {
            rows.iter_mut().for_each(|r| r[j] = col.draw(rng));
        }
    }
    rows
}

/// Lays cases out as one table: every group of every case, in order.
pub(crate) fn table(columns: &[Column], cases: &[&Case]) -> Result<FeatureTable, TableError> {
    let groups: Vec<&Group> = cases.iter().flat_map(|c| &c.groups).collect();
    let mut table = FeatureTable::new(groups.iter().enumerate().map(|(i, g)| (i.to_string(), g.len())))?;
    for (j, col) in columns.iter().enumerate() {
        let values: Vec<f64> = groups.iter().flat_map(|g| g.iter().map(move |r| r[j])).collect();
        table.add_column(col.key.clone(), values)?;
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn draws_stay_in_range_and_respect_integers() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let cols = [
            Column::with_range("c", Interval::new(0.0, 8.0), false, false),
            Column::with_range("T", Interval::new(1.0, f64::INFINITY), true, false),
            Column::with_range("x", Interval::REAL, false, false),
            Column::with_range("d", Interval::UNIT, false, true),
        ];
        let mut saw_zero = false;
        for _ in 0..500 {
            let g = draw_group(&mut rng, &cols, (2, 8));
            assert!((2..=8).contains(&g.len()));
            for row in &g {
                for (col, &x) in cols.iter().zip(row) {
                    assert!(col.accepts(x), "{} = {x}", col.key);
                }
                saw_zero |= row[0] == 0.0;
                assert_eq!(row[3], g[0][3], "per-group feature varies");
            }
        }
        assert!(saw_zero, "0 is a special value and must come up");
    }

    #[test]
    fn size_range_clamps() {
        assert_eq!(size_range(Interval::new(2.0, f64::INFINITY), 8), (2, 8));
        assert_eq!(size_range(Interval::point(4.0), 8), (4, 4));
        assert_eq!(size_range(Interval::new(16.0, 32.0), 8), (16, 16));
    }
}
