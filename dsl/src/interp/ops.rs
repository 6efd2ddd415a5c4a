//! The scalar and reduction semantics of the reward language, defined once.
//!
//! Every backend (the interpreter, the fused CPU backend, and the CUDA codegen,
//! which must mirror these formulas) computes each operator with exactly these
//! f64 operations, so that compiled results agree with the oracle bit for bit
//! wherever the evaluation order is the same. Summation order is part of the
//! semantics: group sums run left to right over the group's rows; batch sums
//! add fixed-size chunks left to right and then combine the chunk sums left to
//! right ([`sum`]), which makes them independent of the thread count.

use rayon::prelude::*;

use crate::ast::{BinOp, UnOp};
use crate::hir::{Func, ReduceOp};

/// Rows per chunk of a batch sum. Fixed (never derived from the thread count)
/// so that a batch reduction's result depends only on its input.
pub const SUM_CHUNK: usize = 4096;

/// Bools are numbers 1.0 and 0.0.
#[inline]
pub fn from_bool(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// Any non-zero value (NaN included) is true. Bool values are only ever made
/// by comparisons, literals and bool features, so this only matters for a bool
/// feature column holding something other than 0 or 1.
#[inline]
pub fn truthy(x: f64) -> bool {
    x != 0.0
}

/// `min` that propagates NaN (`f64::min` drops it, which would hide a fault).
#[inline]
pub fn min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b < a {
        b
    } else {
        a
    }
}

/// `max` that propagates NaN.
#[inline]
pub fn max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

/// `sign(0) = 0`, `sign(NaN) = NaN` (unlike `f64::signum`, which gives ±1 for ±0).
#[inline]
pub fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else if x == 0.0 {
        0.0
    } else {
        f64::NAN
    }
}

/// The logistic function `1 / (1 + e^-x)`, in (0, 1).
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Applies a prefix operator; `!` treats nonzero as true and returns 1.0/0.0.
#[inline]
pub fn unary(op: UnOp, x: f64) -> f64 {
    match op {
        UnOp::Neg => -x,
        UnOp::Not => from_bool(!truthy(x)),
    }
}

/// Applies an infix operator; comparisons and logic return 1.0/0.0.
#[inline]
pub fn binary(op: BinOp, a: f64, b: f64) -> f64 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Pow => a.powf(b),
        BinOp::Lt => from_bool(a < b),
        BinOp::Le => from_bool(a <= b),
        BinOp::Gt => from_bool(a > b),
        BinOp::Ge => from_bool(a >= b),
        BinOp::Eq => from_bool(a == b),
        BinOp::Ne => from_bool(a != b),
        BinOp::And => from_bool(truthy(a) && truthy(b)),
        BinOp::Or => from_bool(truthy(a) || truthy(b)),
    }
}

/// `x in [lo, hi]`, inclusive.
#[inline]
pub fn in_range(x: f64, lo: f64, hi: f64) -> f64 {
    from_bool(lo <= x && x <= hi)
}

/// `clip(x, lo, hi) = min(max(x, lo), hi)`.
#[inline]
pub fn clip(x: f64, lo: f64, hi: f64) -> f64 {
    min(max(x, lo), hi)
}

/// `if(b, x, y)`.
#[inline]
pub fn select(b: f64, x: f64, y: f64) -> f64 {
    if truthy(b) { x } else { y }
}

/// A one-argument built-in. Panics for the others: callers dispatch by arity.
#[inline]
pub fn func1(f: Func, x: f64) -> f64 {
    match f {
        Func::Sqrt => x.sqrt(),
        Func::Exp => x.exp(),
        Func::Log => x.ln(),
        Func::Abs => x.abs(),
        Func::Sign => sign(x),
        Func::Sigmoid => sigmoid(x),
        Func::Tanh => x.tanh(),
        Func::Mask => from_bool(truthy(x)),
        // n-ary min/max of one argument is the argument.
        Func::Min | Func::Max => x,
        Func::Clip | Func::If => unreachable!("{} takes three arguments", f.name()),
    }
}

/// Applies a built-in to its evaluated arguments (the interpreter's entry).
pub fn call(f: Func, args: &[f64]) -> f64 {
    match (f, args) {
        (Func::Min, [first, rest @ ..]) => rest.iter().fold(*first, |a, &b| min(a, b)),
        (Func::Max, [first, rest @ ..]) => rest.iter().fold(*first, |a, &b| max(a, b)),
        (Func::Clip, [x, lo, hi]) => clip(*x, *lo, *hi),
        (Func::If, [b, x, y]) => select(*b, *x, *y),
        (f, [x]) => func1(f, *x),
        (f, args) => panic!("{}() with {} arguments reached evaluation; the checker rejects it", f.name(), args.len()),
    }
}

/// The sum that every reduction uses: left to right within [`SUM_CHUNK`]-row
/// chunks, chunk sums left to right. Chunks run in parallel (rayon) but the
/// combination order is fixed, so the result does not depend on the thread count.
#[inline]
pub fn sum(xs: &[f64]) -> f64 {
    if xs.len() <= SUM_CHUNK { sum_seq(xs) } else { sum_chunked(xs, sum_seq) }
}

/// [`sum`] of the squared deviations from `mean`, in the same order.
#[inline]
pub fn sum_sq_dev(xs: &[f64], mean: f64) -> f64 {
    if xs.len() <= SUM_CHUNK { sum_sq_dev_seq(xs, mean) } else { sum_chunked(xs, |chunk| sum_sq_dev_seq(chunk, mean)) }
}

// The sequential kernels are plain monomorphic loops: a group reduction is a
// handful of values, so the call must cost nothing.
#[inline]
fn sum_seq(xs: &[f64]) -> f64 {
    let mut acc = 0.0;
    for &x in xs {
        acc += x;
    }
    acc
}

#[inline]
fn sum_sq_dev_seq(xs: &[f64], mean: f64) -> f64 {
    let mut acc = 0.0;
    for &x in xs {
        acc += (x - mean) * (x - mean);
    }
    acc
}

#[cold]
fn sum_chunked(xs: &[f64], chunk_sum: impl Fn(&[f64]) -> f64 + Sync + Send) -> f64 {
    let partial: Vec<f64> = xs.par_chunks(SUM_CHUNK).map(chunk_sum).collect();
    sum_seq(&partial)
}

/// A reduction of `xs` to one value (every op but `rank`). `count` ignores the values.
#[inline]
pub fn reduce(op: ReduceOp, xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    match op {
        ReduceOp::Sum => sum(xs),
        ReduceOp::Mean => sum(xs) / n,
        ReduceOp::Std => {
            // Two passes (mean, then squared deviations): the textbook
            // E[x²] - E[x]² loses everything to cancellation on near-constant groups.
            let mean = sum(xs) / n;
            (sum_sq_dev(xs, mean) / n).sqrt()
        }
        ReduceOp::Max => fold_extreme(xs, max),
        ReduceOp::Min => fold_extreme(xs, min),
        ReduceOp::Count => n,
        ReduceOp::Rank => panic!("rank is not a scalar reduction; use `rank_into`"),
    }
}

/// A masked reduction: only the rows whose mask is truthy enter, and a
/// masked-out row's value is never read (a NaN there does not leak). An
/// empty selection gives 0 for every op (`count` included), so nothing
/// downstream divides by an empty count.
///
/// The summation order is [`sum`]'s over the *whole* slice, a masked-out row
/// adding `+0.0`: the accumulator starts at `+0.0` and so is never `-0.0`,
/// which makes adding `+0.0` exact, and the result equals the sum of the
/// selected values in order. The generated kernels sum `m != 0 ? x : 0`
/// the same way.
#[inline]
pub fn reduce_masked(op: ReduceOp, xs: &[f64], mask: &[f64]) -> f64 {
    debug_assert_eq!(xs.len(), mask.len());
    let n = count_masked(mask);
    if n == 0.0 {
        return 0.0;
    }
    match op {
        ReduceOp::Count => n,
        ReduceOp::Sum => sum_masked(xs, mask, 0.0, false),
        ReduceOp::Mean => sum_masked(xs, mask, 0.0, false) / n,
        ReduceOp::Std => {
            let mean = sum_masked(xs, mask, 0.0, false) / n;
            (sum_masked(xs, mask, mean, true) / n).sqrt()
        }
        ReduceOp::Max => fold_selected(xs, mask, max),
        ReduceOp::Min => fold_selected(xs, mask, min),
        ReduceOp::Rank => panic!("rank is not a scalar reduction; use `rank_masked_into`"),
    }
}

/// How many mask values are truthy, as an `f64` (exact below 2^53).
#[inline]
pub fn count_masked(mask: &[f64]) -> f64 {
    let mut n = 0.0;
    for &m in mask {
        n += from_bool(truthy(m));
    }
    n
}

/// [`sum`] of the selected `x` (or of their squared deviations from `mean`,
/// when `squares`), masked-out rows adding `+0.0`, in [`sum`]'s order.
#[inline]
fn sum_masked(xs: &[f64], mask: &[f64], mean: f64, squares: bool) -> f64 {
    let seq = |xs: &[f64], mask: &[f64]| {
        let mut acc = 0.0;
        for (&x, &m) in xs.iter().zip(mask) {
            let term = if squares { (x - mean) * (x - mean) } else { x };
            acc += if truthy(m) { term } else { 0.0 };
        }
        acc
    };
    if xs.len() <= SUM_CHUNK {
        return seq(xs, mask);
    }
    let partial: Vec<f64> = xs.par_chunks(SUM_CHUNK).zip(mask.par_chunks(SUM_CHUNK)).map(|(x, m)| seq(x, m)).collect();
    sum_seq(&partial)
}

/// The extreme of the selected values, folded left to right from the first.
fn fold_selected(xs: &[f64], mask: &[f64], pick: fn(f64, f64) -> f64) -> f64 {
    let mut selected = xs.iter().zip(mask).filter(|&(_, &m)| truthy(m)).map(|(&x, _)| x);
    match selected.next() {
        Some(first) => selected.fold(first, pick),
        None => 0.0,
    }
}

/// Ranks among the selected rows (1 for the lowest to k for the highest,
/// ties averaged) written to `out`; a masked-out row's rank is 0. A NaN
/// among the selected values makes every selected rank NaN, as in
/// [`rank_into`]; masked-out rows stay 0.
pub fn rank_masked_into(xs: &[f64], mask: &[f64], out: &mut [f64]) {
    debug_assert_eq!(xs.len(), out.len());
    let rows: Vec<usize> = (0..xs.len()).filter(|&i| truthy(mask[i])).collect();
    let selected: Vec<f64> = rows.iter().map(|&i| xs[i]).collect();
    let mut ranks = vec![0.0; rows.len()];
    rank_into(&selected, &mut ranks);
    out.fill(0.0);
    for (&i, &r) in rows.iter().zip(&ranks) {
        out[i] = r;
    }
}

fn fold_extreme(xs: &[f64], pick: fn(f64, f64) -> f64) -> f64 {
    match xs.split_first() {
        Some((first, rest)) => rest.iter().fold(*first, |a, &b| pick(a, b)),
        // An empty batch has no extreme; NaN, like the mean of nothing.
        None => f64::NAN,
    }
}

/// Ranks of `xs` written to `out`: 1 for the lowest to `n` for the highest,
/// ties share their average rank. A NaN anywhere leaves the order undefined,
/// so every rank is NaN then (the fault surfaces instead of hiding).
pub fn rank_into(xs: &[f64], out: &mut [f64]) {
    debug_assert_eq!(xs.len(), out.len());
    if xs.iter().any(|x| x.is_nan()) {
        out.fill(f64::NAN);
        return;
    }
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].partial_cmp(&xs[b]).expect("NaNs were handled above"));
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && xs[order[end]] == xs[order[start]] {
            end += 1;
        }
        // Positions start..end (0-based) hold ranks start+1..=end; their mean.
        let rank = (start + end + 1) as f64 / 2.0;
        for &i in &order[start..end] {
            out[i] = rank;
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranks(xs: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; xs.len()];
        rank_into(xs, &mut out);
        out
    }

    #[test]
    fn rank_lowest_first_ties_average() {
        assert_eq!(ranks(&[3.0, 1.0, 2.0]), vec![3.0, 1.0, 2.0]);
        assert_eq!(ranks(&[0.5, 0.5, 0.0, 1.0]), vec![2.5, 2.5, 1.0, 4.0]);
        assert_eq!(ranks(&[7.0, 7.0, 7.0]), vec![2.0, 2.0, 2.0]);
        assert!(ranks(&[1.0, f64::NAN]).iter().all(|r| r.is_nan()));
    }

    #[test]
    fn sign_of_zero_is_zero() {
        assert_eq!(sign(0.0), 0.0);
        assert_eq!(sign(-0.0), 0.0);
        assert_eq!(sign(-3.0), -1.0);
        assert_eq!(sign(2.0), 1.0);
        assert!(sign(f64::NAN).is_nan());
    }

    #[test]
    fn min_max_clip_propagate_nan() {
        assert!(min(f64::NAN, 1.0).is_nan());
        assert!(max(1.0, f64::NAN).is_nan());
        assert_eq!(call(Func::Min, &[3.0, 1.0, 2.0]), 1.0);
        assert_eq!(call(Func::Max, &[3.0, 1.0, 2.0]), 3.0);
        assert_eq!(clip(5.0, 0.0, 1.0), 1.0);
        assert_eq!(clip(-5.0, 0.0, 1.0), 0.0);
        assert_eq!(clip(0.25, 0.0, 1.0), 0.25);
    }

    #[test]
    fn std_is_population() {
        assert_eq!(reduce(ReduceOp::Std, &[1.0, 3.0]), 1.0);
        assert_eq!(reduce(ReduceOp::Std, &[2.0, 2.0, 2.0]), 0.0);
        assert_eq!(reduce(ReduceOp::Count, &[9.0, 9.0]), 2.0);
        assert_eq!(reduce(ReduceOp::Mean, &[1.0, 2.0, 6.0]), 3.0);
    }

    #[test]
    fn masked_reductions_read_only_the_selected_rows() {
        let xs = [1.0, f64::NAN, 3.0, 10.0];
        let m = [1.0, 0.0, 1.0, 0.0];
        assert_eq!(reduce_masked(ReduceOp::Sum, &xs, &m), 4.0);
        assert_eq!(reduce_masked(ReduceOp::Mean, &xs, &m), 2.0);
        assert_eq!(reduce_masked(ReduceOp::Std, &xs, &m), 1.0);
        assert_eq!(reduce_masked(ReduceOp::Max, &xs, &m), 3.0);
        assert_eq!(reduce_masked(ReduceOp::Min, &xs, &m), 1.0);
        assert_eq!(reduce_masked(ReduceOp::Count, &xs, &m), 2.0);
        // NaN is truthy in a mask, as everywhere.
        assert_eq!(reduce_masked(ReduceOp::Count, &xs, &[f64::NAN, 0.0, 0.0, 0.0]), 1.0);
        let mut out = [9.0; 4];
        rank_masked_into(&[5.0, 1.0, 5.0, 0.0], &[1.0, 0.0, 1.0, 1.0], &mut out);
        assert_eq!(out, [2.5, 0.0, 2.5, 1.0]);
        rank_masked_into(&[f64::NAN, 1.0, 2.0, 0.0], &[0.0, 1.0, 1.0, 0.0], &mut out);
        assert_eq!(out, [0.0, 1.0, 2.0, 0.0], "a NaN in a masked-out row does not reach the ranks");
    }

    #[test]
    fn an_empty_selection_reduces_to_zero() {
        let xs = [f64::NAN, 2.0];
        let none = [0.0, 0.0];
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Std, ReduceOp::Max, ReduceOp::Min, ReduceOp::Count] {
            assert_eq!(reduce_masked(op, &xs, &none).to_bits(), 0.0f64.to_bits(), "{op:?}");
        }
        let mut out = [9.0; 2];
        rank_masked_into(&xs, &none, &mut out);
        assert_eq!(out, [0.0, 0.0]);
    }

    #[test]
    fn a_masked_sum_is_the_sum_of_the_selected_values_in_order() {
        let xs: Vec<f64> = (0..3 * SUM_CHUNK + 17).map(|i| (i as f64) * 0.1 - 7.0).collect();
        let mask: Vec<f64> = (0..xs.len()).map(|i| f64::from(u8::from(i % 3 != 1))).collect();
        let all = vec![1.0; xs.len()];
        assert_eq!(reduce_masked(ReduceOp::Sum, &xs, &all).to_bits(), sum(&xs).to_bits());
        assert_eq!(reduce_masked(ReduceOp::Std, &xs, &all).to_bits(), reduce(ReduceOp::Std, &xs).to_bits());
        let kept: Vec<f64> = xs[..SUM_CHUNK].iter().zip(&mask).filter(|&(_, &m)| m != 0.0).map(|(&x, _)| x).collect();
        assert_eq!(reduce_masked(ReduceOp::Sum, &xs[..SUM_CHUNK], &mask[..SUM_CHUNK]).to_bits(), sum(&kept).to_bits());
    }

    #[test]
    fn chunked_sum_is_the_sum() {
        let xs: Vec<f64> = (0..3 * SUM_CHUNK + 17).map(|i| i as f64).collect();
        let n = xs.len() as f64;
        assert_eq!(sum(&xs), n * (n - 1.0) / 2.0);
    }

    #[test]
    fn comparisons_and_logic_are_bools() {
        assert_eq!(binary(BinOp::Le, 1.0, 1.0), 1.0);
        assert_eq!(binary(BinOp::Lt, 1.0, 1.0), 0.0);
        assert_eq!(binary(BinOp::Ne, f64::NAN, f64::NAN), 1.0);
        assert_eq!(binary(BinOp::And, 1.0, 0.0), 0.0);
        assert_eq!(binary(BinOp::Or, 1.0, 0.0), 1.0);
        assert_eq!(unary(UnOp::Not, 0.0), 1.0);
        assert_eq!(in_range(1.0, 0.0, 1.0), 1.0);
        assert_eq!(in_range(1.5, 0.0, 1.0), 0.0);
        assert_eq!(binary(BinOp::Pow, 2.0, -1.0), 0.5);
        assert_eq!(sigmoid(0.0), 0.5);
    }
}
