//! Interval analysis: a sound over-approximation of every value an expression
//! can take, given the declared feature ranges, the params' current values and
//! the range of group sizes.
//!
//! "Sound" is over the reals: every non-NaN result of evaluating the
//! expression on inputs inside their ranges lies inside the computed interval.
//! A NaN (`0 / 0`, `sqrt(-1)`, `log(-1)`) lies in no interval, so alongside the
//! interval the analysis tracks whether a NaN may arise: a comparison with a
//! NaN is false (and `!=` true), so a bool computed from a possible NaN is
//! never decided by the interval alone. Bools are `[0, 1]`, or a point when decided.

use crate::ast::{BinOp, UnOp};
use crate::hir::{Def, Expr, Func, ReduceOp, Scope};
use crate::interp::ops::{sigmoid, sign};
use crate::interval::Interval;

/// What the leaves of an expression range over.
#[derive(Clone, Debug)]
pub(crate) struct Env<'a> {
    /// By feature id.
    pub features: &'a [Interval],
    /// Current param values, by param id.
    pub params: &'a [f64],
    /// Intervals of the definitions an expression may refer to, by the ids it uses.
    pub defs: &'a [Interval],
    /// Whether each of those definitions may be NaN (a missing entry counts as "may").
    pub def_nans: &'a [bool],
    /// The group sizes `group.count()` ranges over.
    pub group_size: Interval,
}

/// The values an expression may take: an interval for its non-NaN values and
/// whether it may be NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Range {
    pub iv: Interval,
    pub nan: bool,
}

/// The interval of `expr` under `env`.
pub(crate) fn eval(expr: &Expr, env: &Env<'_>) -> Interval {
    range(expr, env).iv
}

/// The range of each of `defs` (in dependency order), each under `leaves`
/// with the ranges of the definitions before it: the intervals and the
/// may-be-NaN flags, by definition id. `leaves`' own `defs` are not read.
pub(crate) fn def_ranges(defs: &[Def], leaves: &Env<'_>) -> (Vec<Interval>, Vec<bool>) {
    let mut intervals = Vec::with_capacity(defs.len());
    let mut nans = Vec::with_capacity(defs.len());
    for def in defs {
        let r = range(&def.expr, &Env { defs: &intervals, def_nans: &nans, ..*leaves });
        intervals.push(r.iv);
        nans.push(r.nan);
    }
    (intervals, nans)
}

/// The interval of `expr` under `env`, and whether it may be NaN.
pub(crate) fn range(expr: &Expr, env: &Env<'_>) -> Range {
    let exact = |iv| Range { iv, nan: false };
    match expr {
        Expr::Number(x) => Range { iv: if x.is_nan() { Interval::REAL } else { Interval::point(*x) }, nan: x.is_nan() },
        Expr::Bool(b) => exact(Interval::point(f64::from(u8::from(*b)))),
        Expr::Feature(id) => exact(env.features.get(*id).copied().unwrap_or(Interval::REAL)),
        Expr::Param(id) => match env.params.get(*id) {
            Some(v) if !v.is_nan() => exact(Interval::point(*v)),
            _ => Range { iv: Interval::REAL, nan: true },
        },
        Expr::Def(id) => Range {
            iv: env.defs.get(*id).copied().unwrap_or(Interval::REAL),
            nan: env.def_nans.get(*id).copied().unwrap_or(true),
        },
        Expr::Unary(UnOp::Neg, x) => {
            let x = range(x, env);
            Range { iv: neg(x.iv), nan: x.nan }
        }
        // `!NaN` is 0 (NaN is truthy).
        Expr::Unary(UnOp::Not, x) => exact(not(truthy(range(x, env)))),
        Expr::Binary(op, a, b) => {
            let (a, b) = (range(a, env), range(b, env));
            match op {
                BinOp::And | BinOp::Or => exact(binary(*op, truthy(a), truthy(b))),
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                    let decided = binary(*op, a.iv, b.iv);
                    // A comparison with NaN is false, except `!=`, which is true.
                    let with_nan = if *op == BinOp::Ne { TRUE } else { FALSE };
                    exact(if a.nan || b.nan { decided.hull(with_nan) } else { decided })
                }
                _ => Range { iv: binary(*op, a.iv, b.iv), nan: a.nan || b.nan || arith_nan(*op, a.iv, b.iv) },
            }
        }
        Expr::Call(func, args) => {
            let args: Vec<Range> = args.iter().map(|a| range(a, env)).collect();
            call_range(*func, &args)
        }
        Expr::In(x, lo, hi) => {
            let (x, lo, hi) = (range(x, env), range(lo, env), range(hi, env));
            let decided = within(x.iv, lo.iv, hi.iv);
            exact(if x.nan || lo.nan || hi.nan { decided.hull(FALSE) } else { decided })
        }
        Expr::Reduce(scope, op, arg, mask) => {
            let arg = arg.as_ref().map_or(exact(Interval::REAL), |a| range(a, env));
            let selected = mask.as_ref().map_or(TRUE, |m| truthy(range(m, env)));
            if selected.hi == 0.0 {
                // No row is ever selected: every reduction of nothing is 0.
                return exact(FALSE);
            }
            let x = arg.iv;
            let unbounded = x.lo == f64::NEG_INFINITY || x.hi == f64::INFINITY;
            // Infinite values make `inf - inf` in sums and spreads.
            let nan = arg.nan
                || match op {
                    ReduceOp::Count => false,
                    ReduceOp::Max | ReduceOp::Min | ReduceOp::Rank => false,
                    ReduceOp::Mean | ReduceOp::Sum => x.lo == f64::NEG_INFINITY && x.hi == f64::INFINITY,
                    ReduceOp::Std => unbounded,
                };
            let iv = reduce(*scope, *op, x, env.group_size);
            // A selection that may be empty gives 0 (and ranks of masked-out rows are 0).
            let iv = if selected.lo == 1.0 { iv } else { reduce_masked(*op, iv) };
            Range { iv, nan }
        }
    }
}

/// Whether every value of `expr` is certainly NaN or infinite, for every
/// input in range (`sqrt(-1)`, `log(0)`, `x / 0`, or arithmetic on such a
/// value). `defs` says which definitions are known to be never finite. Sound
/// in the other direction only: `false` means "not shown", so it is used to
/// raise an error, never to prove a value finite.
pub(crate) fn never_finite(expr: &Expr, env: &Env<'_>, defs: &[bool]) -> bool {
    let nf = |e: &Expr| never_finite(e, env, defs);
    let point_inf = |iv: Interval| iv.is_point() && iv.lo.is_infinite();
    match expr {
        Expr::Number(x) => !x.is_finite(),
        Expr::Def(id) => defs.get(*id).copied().unwrap_or(false),
        Expr::Bool(_) | Expr::Feature(_) | Expr::Param(_) | Expr::In(..) => false,
        // `-x` and `|x|` keep NaN and infinity.
        Expr::Unary(UnOp::Neg, x) => nf(x),
        Expr::Unary(UnOp::Not, _) => false,
        Expr::Binary(op, a, b) => match op {
            // NaN or ±inf on either side stays non-finite (`inf - inf` and `0 * inf` are NaN).
            BinOp::Add | BinOp::Sub | BinOp::Mul => {
                nf(a) || nf(b) || (point_inf(range(expr, env).iv) && !range(expr, env).nan)
            }
            // `x / 0` is ±inf or NaN; `x / inf` may be 0, so only the numerator propagates.
            BinOp::Div => nf(a) || (range(b, env).iv == Interval::point(0.0) && !range(b, env).nan),
            // `NaN ^ 0` and `1 ^ NaN` are 1: nothing propagates for sure.
            BinOp::Pow => point_inf(range(expr, env).iv) && !range(expr, env).nan,
            _ => false,
        },
        Expr::Call(func, args) => {
            let arg = |i: usize| args.get(i).map_or(Interval::REAL, |a| range(a, env).iv);
            match func {
                Func::Sqrt => nf(&args[0]) || arg(0).hi < 0.0,
                // `log(0)` is -inf and `log` of a negative number NaN.
                Func::Log => nf(&args[0]) || arg(0).hi <= 0.0,
                Func::Abs => nf(&args[0]),
                Func::Exp => point_inf(range(expr, env).iv),
                _ => false,
            }
        }
        // A reduction of never-finite values is never finite (`count` reads
        // no value, and ranks of infinities are finite), unless a mask may
        // select nothing: the empty reductions are 0.
        Expr::Reduce(_, op, arg, mask) => {
            mask.is_none() && !matches!(op, ReduceOp::Count | ReduceOp::Rank) && arg.as_ref().is_some_and(|a| nf(a))
        }
    }
}

/// A bool operand as its truth value: a possible NaN counts as true, as the backends read it.
fn truthy(r: Range) -> Interval {
    if r.nan { r.iv.hull(TRUE) } else { r.iv }
}

/// Whether `a op b` may be NaN for non-NaN operands in those ranges.
fn arith_nan(op: BinOp, a: Interval, b: Interval) -> bool {
    let inf = |x: Interval| x.lo == f64::NEG_INFINITY || x.hi == f64::INFINITY;
    match op {
        BinOp::Add => {
            (a.hi == f64::INFINITY && b.lo == f64::NEG_INFINITY) || (a.lo == f64::NEG_INFINITY && b.hi == f64::INFINITY)
        }
        BinOp::Sub => {
            (a.hi == f64::INFINITY && b.hi == f64::INFINITY) || (a.lo == f64::NEG_INFINITY && b.lo == f64::NEG_INFINITY)
        }
        BinOp::Mul => (a.contains(0.0) && inf(b)) || (b.contains(0.0) && inf(a)),
        BinOp::Div => (a.contains(0.0) && b.contains(0.0)) || (inf(a) && inf(b)),
        // `powf` of a negative base and a non-integer exponent.
        BinOp::Pow => a.lo < 0.0 && !(b.is_point() && b.lo == b.lo.trunc()),
        _ => false,
    }
}

fn call_range(func: Func, args: &[Range]) -> Range {
    let ivs: Vec<Interval> = args.iter().map(|a| a.iv).collect();
    let any_nan = args.iter().any(|a| a.nan);
    let x = args.first().map_or(Range { iv: Interval::REAL, nan: true }, |a| *a);
    match func {
        // `mask(NaN)` is 1: NaN is truthy.
        Func::Mask => Range { iv: call(func, &[truthy(x)]), nan: false },
        Func::If => {
            let cond = truthy(x);
            let pick = |i: usize| args.get(i).copied().unwrap_or(Range { iv: Interval::REAL, nan: true });
            let (then, other) = (pick(1), pick(2));
            let iv = call(func, &[cond, then.iv, other.iv]);
            let nan = (cond.hi > 0.0 && then.nan) || (cond.lo == 0.0 && other.nan);
            Range { iv, nan }
        }
        Func::Sqrt | Func::Log => Range { iv: call(func, &ivs), nan: any_nan || x.iv.lo < 0.0 },
        _ => Range { iv: call(func, &ivs), nan: any_nan },
    }
}

/// Builds an interval from two ends, mapping a NaN end (an `inf - inf` or
/// `0 * inf` the formulas could not rule out) to the unbounded side.
fn make(lo: f64, hi: f64) -> Interval {
    let lo = if lo.is_nan() { f64::NEG_INFINITY } else { lo };
    let hi = if hi.is_nan() { f64::INFINITY } else { hi };
    if lo > hi { Interval::REAL } else { Interval { lo, hi } }
}

const BOOL: Interval = Interval::UNIT;
const TRUE: Interval = Interval { lo: 1.0, hi: 1.0 };
const FALSE: Interval = Interval { lo: 0.0, hi: 0.0 };

fn truth(always: bool, never: bool) -> Interval {
    if always {
        TRUE
    } else if never {
        FALSE
    } else {
        BOOL
    }
}

pub(crate) fn neg(a: Interval) -> Interval {
    make(-a.hi, -a.lo)
}

fn not(a: Interval) -> Interval {
    truth(a.hi == 0.0, a.lo == 1.0)
}

pub(crate) fn add(a: Interval, b: Interval) -> Interval {
    make(a.lo + b.lo, a.hi + b.hi)
}

pub(crate) fn sub(a: Interval, b: Interval) -> Interval {
    add(a, neg(b))
}

/// The product of two ends, where `0 * inf` is 0: the ends stand for finite
/// values, and 0 times any finite value is 0.
fn mul_end(x: f64, y: f64) -> f64 {
    if x == 0.0 || y == 0.0 { 0.0 } else { x * y }
}

pub(crate) fn mul(a: Interval, b: Interval) -> Interval {
    let p = [mul_end(a.lo, b.lo), mul_end(a.lo, b.hi), mul_end(a.hi, b.lo), mul_end(a.hi, b.hi)];
    make(p.iter().copied().fold(f64::INFINITY, f64::min), p.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

pub(crate) fn div(a: Interval, b: Interval) -> Interval {
    if b.contains(0.0) {
        // Dividing by a value that may be 0 (or come arbitrarily close to it) is unbounded.
        return Interval::REAL;
    }
    mul(a, make(1.0 / b.hi, 1.0 / b.lo))
}

/// `a ^ b`, as `f64::powf` computes it.
pub(crate) fn pow(a: Interval, b: Interval) -> Interval {
    if b.is_point() && b.lo == b.lo.trunc() && b.lo.is_finite() {
        let n = b.lo;
        if n == 0.0 {
            // `powf(x, 0)` is 1 for every x, NaN included.
            return TRUE;
        }
        if n < 0.0 {
            return div(TRUE, pow(a, Interval::point(-n)));
        }
        let odd = n % 2.0 == 1.0;
        let (pl, ph) = (a.lo.powf(n), a.hi.powf(n));
        return if odd {
            make(pl, ph)
        } else if a.contains(0.0) {
            make(0.0, pl.max(ph))
        } else if a.lo > 0.0 {
            make(pl, ph)
        } else {
            make(ph, pl)
        };
    }
    if a.lo < 0.0 {
        // A negative base with a non-integer exponent is NaN, and with an
        // integer one of unknown parity its sign is unknown.
        return Interval::REAL;
    }
    // For x >= 0, x^y is monotone in each argument separately, so its extremes
    // over the box are at the corners (powf(0, y < 0) is +inf, which is sound).
    // The corners take a zero end as +0: an interval does not know the sign of
    // its zeros, and powf(-0, y) is -0 or -inf for an odd integer y but +0, +inf
    // or 1 for every other y (so -0's own corners can miss powf(-0, 0) = 1).
    let (lo, hi) = (a.lo + 0.0, a.hi + 0.0);
    let corners = [lo.powf(b.lo), lo.powf(b.hi), hi.powf(b.lo), hi.powf(b.hi)];
    if corners.iter().any(|c| c.is_nan()) {
        return Interval::REAL;
    }
    // A zero base, if it is -0, gives -inf for a negative odd exponent.
    let minus_infinity = lo == 0.0 && holds_negative_odd_integer(b);
    make(
        if minus_infinity { f64::NEG_INFINITY } else { corners.iter().copied().fold(f64::INFINITY, f64::min) },
        corners.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

/// Whether `b` holds an odd integer below zero.
fn holds_negative_odd_integer(b: Interval) -> bool {
    let top = b.hi.min(-1.0).floor();
    // `top` or the integer below it is odd; either is in `b` when it is not below `b.lo`.
    let odd = if top % 2.0 == 0.0 { top - 1.0 } else { top };
    top.is_finite() && odd >= b.lo
}

fn compare(op: BinOp, a: Interval, b: Interval) -> Interval {
    match op {
        BinOp::Lt => truth(a.hi < b.lo, a.lo >= b.hi),
        BinOp::Le => truth(a.hi <= b.lo, a.lo > b.hi),
        BinOp::Gt => truth(a.lo > b.hi, a.hi <= b.lo),
        BinOp::Ge => truth(a.lo >= b.hi, a.hi < b.lo),
        BinOp::Eq => truth(a.is_point() && b.is_point() && a.lo == b.lo, a.hi < b.lo || b.hi < a.lo),
        BinOp::Ne => truth(a.hi < b.lo || b.hi < a.lo, a.is_point() && b.is_point() && a.lo == b.lo),
        _ => BOOL,
    }
}

pub(crate) fn binary(op: BinOp, a: Interval, b: Interval) -> Interval {
    match op {
        BinOp::Add => add(a, b),
        BinOp::Sub => sub(a, b),
        BinOp::Mul => mul(a, b),
        BinOp::Div => div(a, b),
        BinOp::Pow => pow(a, b),
        BinOp::And => truth(a.lo == 1.0 && b.lo == 1.0, a.hi == 0.0 || b.hi == 0.0),
        BinOp::Or => truth(a.lo == 1.0 || b.lo == 1.0, a.hi == 0.0 && b.hi == 0.0),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => compare(op, a, b),
    }
}

/// `x in [lo, hi]`.
fn within(x: Interval, lo: Interval, hi: Interval) -> Interval {
    truth(x.lo >= lo.hi && x.hi <= hi.lo, x.hi < lo.lo || x.lo > hi.hi || lo.lo > hi.hi)
}

fn monotone(a: Interval, f: impl Fn(f64) -> f64) -> Interval {
    make(f(a.lo), f(a.hi))
}

pub(crate) fn call(func: Func, args: &[Interval]) -> Interval {
    let arg = |i: usize| args.get(i).copied().unwrap_or(Interval::REAL);
    match func {
        Func::Min => args.iter().copied().reduce(|a, b| make(a.lo.min(b.lo), a.hi.min(b.hi))).unwrap_or(Interval::REAL),
        Func::Max => args.iter().copied().reduce(|a, b| make(a.lo.max(b.lo), a.hi.max(b.hi))).unwrap_or(Interval::REAL),
        Func::Clip => {
            let (x, lo, hi) = (arg(0), arg(1), arg(2));
            // Whether a backend clamps below first or above first only matters
            // when lo > hi; the hull of both orders is sound for either.
            let low_first = make(x.lo.max(lo.lo).min(hi.lo), x.hi.max(lo.hi).min(hi.hi));
            let high_first = make(x.lo.min(hi.lo).max(lo.lo), x.hi.min(hi.hi).max(lo.hi));
            low_first.hull(high_first)
        }
        Func::Sqrt => {
            let x = arg(0);
            make(x.lo.max(0.0).sqrt(), x.hi.max(0.0).sqrt())
        }
        Func::Exp => monotone(arg(0), f64::exp),
        Func::Log => {
            let x = arg(0);
            // log(0) = -inf and log(< 0) is NaN: the lower end is -inf as soon as 0 is in reach.
            make(x.lo.max(0.0).ln(), x.hi.max(0.0).ln())
        }
        Func::Abs => {
            let x = arg(0);
            if x.contains(0.0) {
                make(0.0, x.lo.abs().max(x.hi.abs()))
            } else {
                make(x.lo.abs().min(x.hi.abs()), x.lo.abs().max(x.hi.abs()))
            }
        }
        Func::Sign => {
            // `sign` is non-decreasing, so its ends are the signs of the ends.
            monotone(arg(0), sign)
        }
        Func::Sigmoid => monotone(arg(0), sigmoid),
        Func::Tanh => monotone(arg(0), f64::tanh),
        Func::Mask => {
            let b = arg(0);
            make(b.lo.clamp(0.0, 1.0), b.hi.clamp(0.0, 1.0))
        }
        Func::If => {
            let (b, x, y) = (arg(0), arg(1), arg(2));
            if b.lo == 1.0 {
                x
            } else if b.hi == 0.0 {
                y
            } else {
                x.hull(y)
            }
        }
    }
}

/// How far above half the width a computed `std` can land, relative to the
/// largest magnitude of its values. Every backend sums left to right in
/// chunks of at most [`crate::interp::ops::SUM_CHUNK`] rows and then sums the
/// chunks, so the mean of n values carries a relative error of at most about
/// (4096 + n / 4096) ε, which is below 2^-40 for any n under 2^24 rows; 2^-32
/// leaves a wide margin and is far below anything a lint reads.
pub(crate) const STD_ROUNDING: f64 = 1.0 / (1u64 << 32) as f64;

pub(crate) fn reduce(scope: Scope, op: ReduceOp, x: Interval, group_size: Interval) -> Interval {
    // A batch holds at least one group, so it has at least as many rollouts
    // as the smallest group and no upper bound.
    let count = match scope {
        Scope::Group => group_size,
        Scope::Batch => make(group_size.lo.max(1.0), f64::INFINITY),
    };
    match op {
        ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min => x,
        ReduceOp::Sum => mul(x, count),
        // The population standard deviation of values in [lo, hi] is at most
        // half the width (half the values at each end). In floating point the
        // mean is off by a few ulps (the sum of n equal values divided by n
        // need not give the value back), so a group of equal values can come
        // out a few ulps above 0: the bound allows for that, relative to the
        // values' magnitude (see [`STD_ROUNDING`]).
        ReduceOp::Std => make(0.0, (x.hi - x.lo) / 2.0 + x.lo.abs().max(x.hi.abs()) * STD_ROUNDING),
        ReduceOp::Count => count,
        ReduceOp::Rank => make(1.0, count.hi),
    }
}

/// The range of a masked reduction whose selection may be empty, from the
/// range `iv` of the same reduction over a non-empty selection: an empty
/// selection gives 0 (a masked-out row's rank is 0), and a non-empty one
/// may hold a single row (a count or rank of 1 or more, a sum of one value).
pub(crate) fn reduce_masked(op: ReduceOp, iv: Interval) -> Interval {
    match op {
        // A selection of 1 to G rows: counts and ranks from 1, or the 0 of nothing.
        ReduceOp::Count | ReduceOp::Rank => make(0.0, iv.hi.max(1.0)),
        _ => iv.hull(FALSE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(lo: f64, hi: f64) -> Interval {
        Interval::new(lo, hi)
    }

    #[test]
    fn division_by_a_range_containing_zero_is_unbounded() {
        assert_eq!(div(iv(0.0, 1.0), iv(0.0, 2.0)), Interval::REAL);
        assert_eq!(div(iv(1.0, 2.0), iv(1.0, 4.0)), iv(0.25, 2.0));
        assert_eq!(div(iv(-1.0, 1.0), iv(1e-4, f64::INFINITY)), iv(-1e4, 1e4));
    }

    #[test]
    fn products_treat_zero_times_infinity_as_zero() {
        assert_eq!(mul(iv(0.0, 1.0), iv(0.0, f64::INFINITY)), iv(0.0, f64::INFINITY));
        assert_eq!(mul(iv(-2.0, 3.0), iv(-1.0, 4.0)), iv(-8.0, 12.0));
    }

    #[test]
    fn powers_handle_negative_bases_and_fractional_exponents() {
        assert_eq!(pow(iv(-2.0, 3.0), Interval::point(2.0)), iv(0.0, 9.0));
        assert_eq!(pow(iv(-2.0, -1.0), Interval::point(2.0)), iv(1.0, 4.0));
        assert_eq!(pow(iv(-2.0, 3.0), Interval::point(3.0)), iv(-8.0, 27.0));
        assert_eq!(pow(iv(-2.0, 3.0), Interval::point(0.5)), Interval::REAL);
        assert_eq!(pow(iv(0.0, 4.0), Interval::point(0.5)), iv(0.0, 2.0));
        assert_eq!(pow(iv(0.0, 4.0), Interval::point(-1.0)), Interval::REAL);
        assert_eq!(pow(iv(1.0, 4.0), iv(-1.0, 2.0)), iv(0.25, 16.0));
        assert_eq!(pow(iv(-5.0, 5.0), Interval::point(0.0)), TRUE);
    }

    #[test]
    fn reductions_follow_their_arguments() {
        let g = iv(2.0, f64::INFINITY);
        assert_eq!(reduce(Scope::Group, ReduceOp::Std, iv(0.0, 1.0), g), iv(0.0, 0.5 + STD_ROUNDING));
        // A constant has no spread, up to the mean's rounding.
        assert_eq!(reduce(Scope::Group, ReduceOp::Std, iv(-4.0, -4.0), g), iv(0.0, 4.0 * STD_ROUNDING));
        assert_eq!(reduce(Scope::Group, ReduceOp::Sum, iv(0.0, 1.0), iv(2.0, 8.0)), iv(0.0, 8.0));
        assert_eq!(reduce(Scope::Group, ReduceOp::Rank, iv(0.0, 1.0), iv(2.0, 8.0)), iv(1.0, 8.0));
        assert_eq!(sub(reduce(Scope::Group, ReduceOp::Count, Interval::REAL, g), TRUE), iv(1.0, f64::INFINITY));
    }

    #[test]
    fn a_possible_nan_keeps_comparisons_undecided() {
        let env = Env { features: &[Interval::UNIT], params: &[], defs: &[], def_nans: &[], group_size: iv(2.0, 8.0) };
        let f = || Box::new(Expr::Feature(0));
        // log(-2.5) is NaN, and NaN < 1 is false, although the interval of log(-2.5) is [-inf, -inf].
        let log = Expr::Call(Func::Log, vec![Expr::Number(-2.5)]);
        let lt = Expr::Binary(BinOp::Lt, Box::new(log.clone()), Box::new(Expr::Number(1.0)));
        assert_eq!(eval(&lt, &env), BOOL);
        let ne = Expr::Binary(BinOp::Ne, Box::new(log), Box::new(Expr::Number(1.0)));
        assert_eq!(eval(&ne, &env), TRUE);
        // sqrt(f - 0.5) >= 0 is false where the square root is NaN.
        let root = Expr::Call(Func::Sqrt, vec![Expr::Binary(BinOp::Sub, f(), Box::new(Expr::Number(0.5)))]);
        assert!(range(&root, &env).nan);
        let ge = Expr::Binary(BinOp::Ge, Box::new(root), Box::new(Expr::Number(0.0)));
        assert_eq!(eval(&ge, &env), BOOL);
        // 0 / 0 is NaN; 1 / f is not (it may be infinite).
        let zero_over = Expr::Binary(BinOp::Div, f(), f());
        assert!(range(&zero_over, &env).nan);
        let one_over = Expr::Binary(BinOp::Div, Box::new(Expr::Number(1.0)), f());
        assert!(!range(&one_over, &env).nan);
    }

    #[test]
    fn comparisons_decide_when_ranges_are_apart() {
        assert_eq!(compare(BinOp::Gt, iv(1.0, 2.0), iv(0.0, 0.5)), TRUE);
        assert_eq!(compare(BinOp::Gt, iv(0.0, 2.0), iv(0.0, 0.5)), BOOL);
        assert_eq!(compare(BinOp::Le, iv(0.0, 2.0), iv(2.0, 3.0)), TRUE);
        assert_eq!(within(iv(0.0, 1.0), Interval::point(0.0), Interval::point(1.0)), TRUE);
        assert_eq!(within(iv(2.0, 3.0), Interval::point(0.0), Interval::point(1.0)), FALSE);
        assert_eq!(call(Func::Sign, &[iv(0.0, 3.0)]), iv(0.0, 1.0));
        assert_eq!(call(Func::Log, &[iv(0.0, 1.0)]), iv(f64::NEG_INFINITY, 0.0));
    }
}
