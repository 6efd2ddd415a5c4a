//! Differential property test: random well-typed programs over random grouped
//! data, compiled == interpreted (within 1e-6 relative, NaN == NaN, the same
//! errors), and the compiled results bitwise equal across thread counts.

use std::sync::OnceLock;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::ast::UnOp;

/// Number features with their ranges, and one bool feature.
const NUMBERS: [(&str, f64, f64); 3] = [("grade(word)", 0.0, 1.0), ("cost", 0.0, 8.0), ("x", -5.0, 5.0)];
const BOOL: &str = "ok";
const CONSTS: [f64; 8] = [0.0, 1.0, 0.5, 2.0, -1.0, 4.0, 1e-4, 3.0];

/// What an expression may refer to where it is generated.
struct Ctx {
    numbers: Vec<Expr>,
    bools: Vec<Expr>,
    /// Reductions are allowed (the advantage layer).
    reductions: bool,
}

pub(super) struct Gen {
    pub(super) rng: ChaCha8Rng,
}

impl Gen {
    fn num(&mut self, s: &Ctx, depth: u32) -> Expr {
        let r = self.rng.random_range(0..100);
        if depth == 0 || r < 25 {
            return self.leaf(s);
        }
        let d = depth - 1;
        match self.rng.random_range(0..11) {
            0 => un(UnOp::Neg, self.num(s, d)),
            1..=3 => {
                let op = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Pow][self.rng.random_range(0..5)];
                bin(op, self.num(s, d), self.num(s, d))
            }
            4 => {
                let f = [Func::Min, Func::Max][self.rng.random_range(0..2)];
                let n = self.rng.random_range(1..4);
                call(f, (0..n).map(|_| self.num(s, d)).collect())
            }
            5 => call(Func::Clip, vec![self.num(s, d), self.num(s, d), self.num(s, d)]),
            6 => {
                let fs = [Func::Sqrt, Func::Exp, Func::Log, Func::Abs, Func::Sign, Func::Sigmoid, Func::Tanh];
                call(fs[self.rng.random_range(0..fs.len())], vec![self.num(s, d)])
            }
            7 => call(Func::Mask, vec![self.boolean(s, d)]),
            8 => call(Func::If, vec![self.boolean(s, d), self.num(s, d), self.num(s, d)]),
            _ if s.reductions => self.reduction(s, d),
            _ => self.leaf(s),
        }
    }

    fn reduction(&mut self, s: &Ctx, d: u32) -> Expr {
        let batch_scope = self.rng.random_range(0..3) == 0;
        let ops = if batch_scope {
            &[ReduceOp::Mean, ReduceOp::Std, ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Count][..]
        } else {
            &[
                ReduceOp::Mean,
                ReduceOp::Std,
                ReduceOp::Sum,
                ReduceOp::Max,
                ReduceOp::Min,
                ReduceOp::Count,
                ReduceOp::Rank,
            ][..]
        };
        let op = ops[self.rng.random_range(0..ops.len())];
        let scope = if batch_scope { Scope::Batch } else { Scope::Group };
        let arg = (op != ReduceOp::Count).then(|| Box::new(self.num(s, d)));
        // Half the reductions are masked, some by masks that select nothing
        // in some groups (a bool feature, a comparison of a random value).
        let mask = (self.rng.random_range(0..2) == 0).then(|| Box::new(self.boolean(s, d)));
        Expr::Reduce(scope, op, arg, mask)
    }

    fn leaf(&mut self, s: &Ctx) -> Expr {
        match self.rng.random_range(0..10) {
            0..=1 => num(CONSTS[self.rng.random_range(0..CONSTS.len())]),
            _ => s.numbers[self.rng.random_range(0..s.numbers.len())].clone(),
        }
    }

    fn boolean(&mut self, s: &Ctx, depth: u32) -> Expr {
        let d = depth.saturating_sub(1);
        match self.rng.random_range(0..8) {
            0 if depth > 0 => {
                bin([BinOp::And, BinOp::Or][self.rng.random_range(0..2)], self.boolean(s, d), self.boolean(s, d))
            }
            1 if depth > 0 => un(UnOp::Not, self.boolean(s, d)),
            2 => Expr::In(Box::new(self.num(s, d)), Box::new(self.num(s, d)), Box::new(self.num(s, d))),
            3 => Expr::Bool(self.rng.random_range(0..2) == 0),
            4 => s.bools[self.rng.random_range(0..s.bools.len())].clone(),
            _ => {
                let ops = [BinOp::Lt, BinOp::Le, BinOp::Gt, BinOp::Ge, BinOp::Eq, BinOp::Ne];
                bin(ops[self.rng.random_range(0..ops.len())], self.num(s, d), self.num(s, d))
            }
        }
    }

    pub(super) fn program(&mut self) -> crate::hir::Program {
        let mut b = Builder::default();
        let mut s = Ctx { numbers: Vec::new(), bools: vec![b.feature(BOOL)], reductions: false };
        for (key, _, _) in NUMBERS {
            s.numbers.push(b.feature(key));
        }
        for i in 0..self.rng.random_range(0..3) {
            s.numbers.push(b.param(&format!("p{i}"), CONSTS[self.rng.random_range(0..CONSTS.len())]));
        }
        for i in 0..self.rng.random_range(0..3) {
            let e = self.num(&s, 3);
            s.numbers.push(b.let_(&format!("l{i}"), Layer::Reward, e));
        }
        if self.rng.random_range(0..2) == 0 {
            let e = self.boolean(&s, 2);
            s.bools.push(b.let_bool("flag", Layer::Reward, e));
        }
        let e = self.num(&s, 4);
        let reward = b.reward(e);
        s.numbers.push(reward);
        s.reductions = true;
        for i in 0..self.rng.random_range(0..3) {
            let e = self.num(&s, 3);
            s.numbers.push(b.let_(&format!("a{i}"), Layer::Advantage, e));
        }
        if self.rng.random_range(0..3) > 0 {
            let e = self.num(&s, 4);
            s.numbers.push(b.adv(e));
        }
        if self.rng.random_range(0..2) == 0 {
            let e = self.num(&s, 4);
            b.advantage(e);
        }
        b.build()
    }

    /// Groups of random sizes; sometimes big enough for many blocks and a
    /// chunked batch sum. Values are often repeated (ties for `rank`).
    pub(super) fn table(&mut self) -> FeatureTable {
        let groups = match self.rng.random_range(0..10) {
            0 => self.rng.random_range(300..700),
            1..=3 => self.rng.random_range(20..200),
            _ => self.rng.random_range(1..8),
        };
        let uniform = self.rng.random_range(0..2) == 0;
        let sizes: Vec<usize> = (0..groups).map(|_| if uniform { 8 } else { self.rng.random_range(1..12) }).collect();
        let rows: usize = sizes.iter().sum();
        let mut t = FeatureTable::new(sizes.iter().enumerate().map(|(g, &n)| (format!("g{g}"), n))).expect("non-empty");
        for (key, lo, hi) in NUMBERS {
            let values = (0..rows)
                .map(|_| {
                    if self.rng.random_range(0..2) == 0 {
                        lo + (hi - lo) * self.rng.random_range(0..5) as f64 / 4.0
                    } else {
                        self.rng.random_range(lo..=hi)
                    }
                })
                .collect();
            t.add_column(key, values).expect("fresh column");
        }
        t.add_column(BOOL, (0..rows).map(|_| self.rng.random_range(0..2) as f64).collect()).expect("fresh column");
        t
    }
}

pub(super) fn close(a: &[f64], b: &[f64]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} rows vs {}", a.len(), b.len()));
    }
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let same = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-6 * x.abs().max(y.abs());
        if !same {
            return Err(format!("row {i}: compiled {x} vs interpreted {y}"));
        }
    }
    Ok(())
}

pub(super) fn pools() -> &'static [rayon::ThreadPool; 3] {
    static POOLS: OnceLock<[rayon::ThreadPool; 3]> = OnceLock::new();
    POOLS
        .get_or_init(|| [1, 2, 4].map(|n| rayon::ThreadPoolBuilder::new().num_threads(n).build().expect("thread pool")))
}

/// What the property tests of both backends check of `compiled`, the program `program`, on
/// `table` (drawn from `data_seed`): its values within the interpreter's tolerance, the same bits
/// whatever the thread count and after evaluating into buffers that other tables (larger or
/// smaller) left behind, and with the default policy the same failure (or both succeed).
/// Returns the one-thread values.
pub(super) fn agrees_with_the_interpreter(
    program: &Program,
    compiled: &CompiledProgram,
    table: &FeatureTable,
    data_seed: u64,
) -> Result<Outputs, TestCaseError> {
    let allow = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
    let want = interp::eval(program, table, &allow).expect("every feature is present");
    let [one, two, four] = pools();
    let got = one.install(|| compiled.eval(table, &allow)).expect("every feature is present");
    let ir = compiled.ir().to_string();
    close(&got.reward, &want.reward).map_err(|e| TestCaseError::fail(format!("reward {e}\n{ir}")))?;
    close(&got.adv, &want.adv).map_err(|e| TestCaseError::fail(format!("adv {e}\n{ir}")))?;
    close(&got.advantage, &want.advantage).map_err(|e| TestCaseError::fail(format!("advantage {e}\n{ir}")))?;
    for pool in [two, four] {
        let other = pool.install(|| compiled.eval(table, &allow)).expect("same as one thread");
        prop_assert!(same_bits(&got, &other), "thread count changed the results");
    }
    let (mut space, mut outputs) = (Workspace::default(), Outputs::default());
    for seed in [1, 2] {
        let other = Gen { rng: ChaCha8Rng::seed_from_u64(data_seed ^ seed) }.table();
        let _ = compiled.eval_into(&other, &allow, &mut space, &mut outputs);
        one.install(|| compiled.eval_into(table, &allow, &mut space, &mut outputs)).expect("every feature is present");
        prop_assert!(same_bits(&got, &outputs), "reused buffers changed the results");
    }
    let strict = EvalOptions::default();
    let want = interp::eval(program, table, &strict);
    let failed = compiled.eval(table, &strict);
    match (&failed, &want) {
        (Ok(_), Ok(_)) => {}
        _ => prop_assert_eq!(format!("{failed:?}"), format!("{want:?}")),
    }
    Ok(got)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn compiled_equals_interpreted(program_seed in any::<u64>(), data_seed in any::<u64>()) {
        let program = Gen { rng: ChaCha8Rng::seed_from_u64(program_seed) }.program();
        let table = Gen { rng: ChaCha8Rng::seed_from_u64(data_seed) }.table();
        let compiled = CompiledProgram::new(&program);
        agrees_with_the_interpreter(&program, &compiled, &table, data_seed)?;
    }
}
