//! Closed intervals of reals, the domain of the checker's range analysis.
//!
//! The arithmetic on intervals (sound over-approximations of `+ - * / ^` and
//! every built-in function) lives in the checker; this is the value type that
//! the schema, the checker and the caller share.

/// A closed interval `[lo, hi]`; either end may be infinite.
///
/// `lo <= hi` always holds for a non-empty interval. Bools are the interval
/// `[0, 1]` (or `[0, 0]`, `[1, 1]` when known).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    pub const REAL: Interval = Interval { lo: f64::NEG_INFINITY, hi: f64::INFINITY };
    pub const UNIT: Interval = Interval { lo: 0.0, hi: 1.0 };
    pub const NON_NEGATIVE: Interval = Interval { lo: 0.0, hi: f64::INFINITY };

    pub fn new(lo: f64, hi: f64) -> Interval {
        debug_assert!(lo <= hi, "empty interval [{lo}, {hi}]");
        Interval { lo, hi }
    }

    pub fn point(x: f64) -> Interval {
        Interval { lo: x, hi: x }
    }

    pub fn contains(self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    pub fn is_point(self) -> bool {
        self.lo == self.hi
    }

    pub fn hull(self, other: Interval) -> Interval {
        Interval { lo: self.lo.min(other.lo), hi: self.hi.max(other.hi) }
    }
}

impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = |x: f64| {
            if x == f64::INFINITY {
                "inf".to_string()
            } else if x == f64::NEG_INFINITY {
                "-inf".to_string()
            } else {
                crate::schema::format_number(x)
            }
        };
        write!(f, "[{}, {}]", end(self.lo), end(self.hi))
    }
}
