//! Random programs for the C twin's differential tests: a random reward
//! expression over three features, an advantage from a random template over
//! group and batch reductions, and an optional random discount. `wild`
//! admits the ill-conditioned operators (pow, exp, log, division by a
//! computed value, batch rank), which the double twin must still match.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::ast::{BinOp, UnOp};
use crate::hir::{Expr, Func, Program, ReduceOp, Scope};
use crate::interp::testkit::*;

const FEATURES: [(&str, f64, f64); 3] = [("grade(word)", 0.0, 1.0), ("cost", 0.0, 8.0), ("x", -4.0, 4.0)];

struct Gen {
    rng: ChaCha8Rng,
    wild: bool,
    features: Vec<Expr>,
    w: Expr,
}

impl Gen {
    fn leaf(&mut self) -> Expr {
        match self.rng.random_range(0..10) {
            0..=5 => self.features[self.rng.random_range(0..3)].clone(),
            6 => self.w.clone(),
            _ => num([0.0, 0.5, 1.0, 2.0, -1.0, 0.25][self.rng.random_range(0..6)]),
        }
    }

    /// A comparison of a feature with a constant inside its range: exact in
    /// f32, so the float twin takes the same branch as the interpreter.
    fn boolean(&mut self) -> Expr {
        let i = self.rng.random_range(0..3);
        let (_, lo, hi) = FEATURES[i];
        let k = lo + (hi - lo) * f64::from(self.rng.random_range(1..8u8)) / 8.0;
        let f = self.features[i].clone();
        match self.rng.random_range(0..5) {
            0 => bin(BinOp::Gt, f, num(k)),
            1 => bin(BinOp::Le, f, num(k)),
            2 => bin(BinOp::Ne, f, num(k)),
            3 => bin(BinOp::And, bin(BinOp::Ge, f.clone(), num(lo)), un(UnOp::Not, bin(BinOp::Eq, f, num(k)))),
            _ => Expr::In(Box::new(f), Box::new(num(lo)), Box::new(num(k))),
        }
    }

    fn num(&mut self, depth: u32) -> Expr {
        if depth == 0 || self.rng.random_range(0..100) < 20 {
            return self.leaf();
        }
        let d = depth - 1;
        let pick = self.rng.random_range(0..if self.wild { 12 } else { 9 });
        match pick {
            0 => un(UnOp::Neg, self.num(d)),
            1 | 2 => {
                let op = [BinOp::Add, BinOp::Sub, BinOp::Mul][self.rng.random_range(0..3)];
                bin(op, self.num(d), self.num(d))
            }
            3 => {
                let f = [Func::Min, Func::Max][self.rng.random_range(0..2)];
                let n = self.rng.random_range(1..4);
                call(f, (0..n).map(|_| self.num(d)).collect())
            }
            4 => call(Func::Clip, vec![self.num(d), self.num(d), self.num(d)]),
            5 => {
                let fs = [Func::Abs, Func::Sign, Func::Sigmoid, Func::Tanh];
                call(fs[self.rng.random_range(0..fs.len())], vec![self.num(d)])
            }
            6 => call(Func::Sqrt, vec![call(Func::Abs, vec![self.num(d)])]),
            7 => call(Func::Mask, vec![self.boolean()]),
            8 => call(Func::If, vec![self.boolean(), self.num(d), self.num(d)]),
            9 => bin(BinOp::Div, self.num(d), self.num(d)),
            10 => bin(BinOp::Pow, self.num(d), self.num(d)),
            _ => {
                let fs = [Func::Exp, Func::Log, Func::Sqrt];
                call(fs[self.rng.random_range(0..fs.len())], vec![self.num(d)])
            }
        }
    }

    fn adv(&mut self, r: Expr) -> Expr {
        let grp = |op, e: Expr| group(op, e);
        let count = || Expr::Reduce(Scope::Group, ReduceOp::Count, None, None);
        let x = self.features[2].clone();
        let c = self.features[1].clone();
        let m = self.boolean();
        let gm = |op, e: Expr| masked(Scope::Group, op, Some(e), m.clone());
        let bm = |op, e: Expr| masked(Scope::Batch, op, Some(e), m.clone());
        match self.rng.random_range(0..if self.wild { 14 } else { 12 }) {
            0 => grpo(r),
            1 => bin(BinOp::Sub, r.clone(), grp(ReduceOp::Mean, r)),
            2 => bin(
                BinOp::Div,
                bin(BinOp::Sub, r.clone(), batch(ReduceOp::Mean, r.clone())),
                bin(BinOp::Add, batch(ReduceOp::Std, r), num(1e-4)),
            ),
            3 => bin(BinOp::Div, grp(ReduceOp::Rank, r), count()),
            4 => bin(
                BinOp::Add,
                bin(BinOp::Sub, grp(ReduceOp::Max, r.clone()), r.clone()),
                bin(BinOp::Mul, grp(ReduceOp::Min, r), self.w.clone()),
            ),
            5 => bin(
                BinOp::Sub,
                r.clone(),
                bin(
                    BinOp::Div,
                    bin(BinOp::Sub, grp(ReduceOp::Sum, r.clone()), r),
                    call(Func::Max, vec![bin(BinOp::Sub, count(), num(1.0)), num(1.0)]),
                ),
            ),
            6 => bin(
                BinOp::Mul,
                bin(BinOp::Sub, r.clone(), grp(ReduceOp::Mean, r)),
                bin(BinOp::Sub, batch(ReduceOp::Max, x.clone()), batch(ReduceOp::Min, x)),
            ),
            7 => bin(
                BinOp::Add,
                grpo(r),
                bin(
                    BinOp::Mul,
                    grp(ReduceOp::Std, c.clone()),
                    batch(ReduceOp::Sum, Expr::Reduce(Scope::Batch, ReduceOp::Count, None, None)),
                ),
            ),
            // Masked baselines: the mask may select nothing in a group (or the batch).
            8 => bin(
                BinOp::Div,
                bin(BinOp::Sub, r.clone(), gm(ReduceOp::Mean, r.clone())),
                bin(BinOp::Add, gm(ReduceOp::Std, r), num(1e-4)),
            ),
            9 => bin(
                BinOp::Div,
                gm(ReduceOp::Rank, r),
                call(Func::Max, vec![masked(Scope::Group, ReduceOp::Count, None, m.clone()), num(1.0)]),
            ),
            10 => bin(
                BinOp::Sub,
                gm(ReduceOp::Sum, r.clone()),
                bin(BinOp::Mul, gm(ReduceOp::Max, r), gm(ReduceOp::Min, x.clone())),
            ),
            11 => bin(
                BinOp::Add,
                bin(
                    BinOp::Div,
                    bin(BinOp::Sub, r.clone(), bm(ReduceOp::Mean, r.clone())),
                    bin(BinOp::Add, bm(ReduceOp::Std, r), num(1e-4)),
                ),
                bin(
                    BinOp::Mul,
                    bin(BinOp::Sub, bm(ReduceOp::Max, c.clone()), bm(ReduceOp::Min, x)),
                    masked(Scope::Batch, ReduceOp::Count, None, m.clone()),
                ),
            ),
            12 => bin(BinOp::Div, masked(Scope::Batch, ReduceOp::Rank, Some(r), m.clone()), batch(ReduceOp::Max, c)),
            _ => bin(
                BinOp::Div,
                Expr::Reduce(Scope::Batch, ReduceOp::Rank, Some(Box::new(r)), None),
                batch(ReduceOp::Max, c),
            ),
        }
    }
}

pub(super) fn program(seed: u64, wild: bool) -> Program {
    let mut b = Builder::default();
    let features = FEATURES.iter().map(|(k, _, _)| b.feature(k)).collect();
    let w = b.param("w", 0.5);
    let mut g = Gen { rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed), wild, features, w };
    let reward = g.num(3);
    let discount = if g.rng.random_range(0..2) == 0 { Some(g.num(2)) } else { None };
    let adv = |r: Expr| gen_adv(seed, wild, r);
    match discount {
        Some(d) => {
            let advantage = move |_r: Expr, a: Expr| bin(BinOp::Mul, a, d.clone());
            b.finish(reward, Some(&adv), Some(&advantage))
        }
        None => b.finish(reward, Some(&adv), None),
    }
}

/// The advantage template for a seed (a fresh generator: `finish` takes the
/// closure by shared reference).
fn gen_adv(seed: u64, wild: bool, r: Expr) -> Expr {
    let mut b = Builder::default();
    let features = FEATURES.iter().map(|(k, _, _)| b.feature(k)).collect();
    let w = Expr::Param(0);
    let mut g = Gen { rng: ChaCha8Rng::seed_from_u64(seed ^ 0xad), wild, features, w };
    g.adv(r)
}
