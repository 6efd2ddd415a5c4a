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
    /// The lower bound (may be `-inf`).
    pub lo: f64,
    /// The upper bound (may be `inf`).
    pub hi: f64,
}

impl Interval {
    /// Every real number.
    pub const REAL: Interval = Interval { lo: f64::NEG_INFINITY, hi: f64::INFINITY };
    /// `[0, 1]`.
    pub const UNIT: Interval = Interval { lo: 0.0, hi: 1.0 };
    /// `[0, inf]`.
    pub const NON_NEGATIVE: Interval = Interval { lo: 0.0, hi: f64::INFINITY };

    /// The interval `[lo, hi]`.
    pub fn new(lo: f64, hi: f64) -> Interval {
        debug_assert!(lo <= hi, "empty interval [{lo}, {hi}]");
        Interval { lo, hi }
    }

    /// The single value `x`.
    pub fn point(x: f64) -> Interval {
        Interval { lo: x, hi: x }
    }

    /// Whether `x` lies inside, bounds included.
    pub fn contains(self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    /// Whether the interval holds exactly one value.
    pub fn is_point(self) -> bool {
        self.lo == self.hi
    }

    /// The smallest interval holding both.
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
