//! The inner loops of elementwise ops: one tight loop per op over a chunk of
//! rows, each a monomorphised closure over `ops`' scalar functions with the
//! operator fixed, so the compiler can vectorise what is vectorisable (the
//! arithmetic, comparisons, min/max, select) and the result is bit-identical
//! to the interpreter's.

use crate::ast::{BinOp, UnOp};
use crate::hir::Func;
use crate::interp::ops;

#[inline(always)]
fn map1(d: &mut [f64], a: &[f64], f: impl Fn(f64) -> f64) {
    for (d, &a) in d.iter_mut().zip(a) {
        *d = f(a);
    }
}

#[inline(always)]
fn map2(d: &mut [f64], a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) {
    for ((d, &a), &b) in d.iter_mut().zip(a).zip(b) {
        *d = f(a, b);
    }
}

#[inline(always)]
fn map3(d: &mut [f64], a: &[f64], b: &[f64], c: &[f64], f: impl Fn(f64, f64, f64) -> f64) {
    for (((d, &a), &b), &c) in d.iter_mut().zip(a).zip(b).zip(c) {
        *d = f(a, b, c);
    }
}

pub(crate) fn unary(op: UnOp, d: &mut [f64], a: &[f64]) {
    match op {
        UnOp::Neg => map1(d, a, |x| ops::unary(UnOp::Neg, x)),
        UnOp::Not => map1(d, a, |x| ops::unary(UnOp::Not, x)),
    }
}

pub(crate) fn binary(op: BinOp, d: &mut [f64], a: &[f64], b: &[f64]) {
    macro_rules! each {
        ($($op:ident),*) => {
            match op {
                $(BinOp::$op => map2(d, a, b, |x, y| ops::binary(BinOp::$op, x, y)),)*
            }
        };
    }
    each!(Add, Sub, Mul, Div, Pow, Lt, Le, Gt, Ge, Eq, Ne, And, Or)
}

pub(crate) fn min(d: &mut [f64], a: &[f64], b: &[f64]) {
    map2(d, a, b, ops::min)
}

pub(crate) fn max(d: &mut [f64], a: &[f64], b: &[f64]) {
    map2(d, a, b, ops::max)
}

pub(crate) fn func(f: Func, d: &mut [f64], a: &[f64]) {
    macro_rules! each {
        ($($f:ident),*) => {
            match f {
                $(Func::$f => map1(d, a, |x| ops::func1(Func::$f, x)),)*
                Func::Clip | Func::If => unreachable!("lowered to min/max and select"),
            }
        };
    }
    each!(Min, Max, Sqrt, Exp, Log, Abs, Sign, Sigmoid, Tanh, Mask)
}

pub(crate) fn select(d: &mut [f64], b: &[f64], x: &[f64], y: &[f64]) {
    map3(d, b, x, y, ops::select)
}

pub(crate) fn in_range(d: &mut [f64], x: &[f64], lo: &[f64], hi: &[f64]) {
    map3(d, x, lo, hi, ops::in_range)
}

/// `x * k`: a division by a power of two whose reciprocal `k` is exact (see
/// `plan::StagePlan::scale`), the same values as `ops::binary(Div, ..)`.
pub(crate) fn scale(d: &mut [f64], a: &[f64], k: f64) {
    map1(d, a, |x| x * k)
}
