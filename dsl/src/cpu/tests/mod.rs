//! The compiled backend against the interpreter: hand-written programs, the
//! IR's text form, errors, params, and (in `differential`) random programs.

mod differential;
mod native;

use expect_test::expect;

use super::*;
use crate::ast::BinOp;
use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::{Expr, Func, Layer, ReduceOp, Scope};
use crate::interp::testkit::*;

fn same_bits(a: &Outputs, b: &Outputs) -> bool {
    let eq = |x: &[f64], y: &[f64]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
    eq(&a.reward, &b.reward) && eq(&a.adv, &b.adv) && eq(&a.advantage, &b.advantage)
}

/// Groups of mixed sizes, large enough for several blocks and chunks.
fn big_table(rows_per_group: impl Fn(usize) -> usize, groups: usize) -> FeatureTable {
    let sizes: Vec<usize> = (0..groups).map(rows_per_group).collect();
    let n: usize = sizes.iter().sum();
    let fb: Vec<f64> = (0..n).map(|i| ((i * 7919) % 13) as f64 / 12.0).collect();
    let c: Vec<f64> = (0..n).map(|i| ((i * 104_729) % 17) as f64 / 2.0).collect();
    table(&sizes, &[("grade(word)", &fb), ("cost", &c)])
}

#[test]
fn the_gated_program_matches_the_interpreter_bit_for_bit() {
    let p = gated_program();
    let t = big_table(|g| 1 + g % 11, 700);
    let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
    let got = CompiledProgram::new(&p).eval(&t, &EvalOptions::default()).expect("finite");
    assert!(same_bits(&got, &want));
}

#[test]
fn ir_of_the_gated_program() {
    let ir = CompiledProgram::new(&gated_program()).ir().to_string();
    expect![[r#"
        feature f0 = grade(word)
        feature f1 = cost
        stage 0: elementwise
          r0 = feature f0
          r1 = feature f1
          r2 = const 0
          r3 = gt r1 r2
          r4 = mul r0 r3
          store c0:reward = r4
        stage 1: group g0 = mean(c0:reward)
        stage 2: group g1 = std(c0:reward)
        stage 3: elementwise
          r0 = column c0
          r1 = group g0
          r2 = sub r0 r1
          r3 = group g1
          r4 = const 0.0001
          r5 = add r3 r4
          r6 = div r2 r5
          r7 = feature f1
          r8 = const 4
          r9 = div r7 r8
          r10 = const 1
          r11 = min r9 r10
          r12 = sqrt r11
          r13 = mul r6 r12
          store c1:adv = r6
          store c2:advantage = r13
        outputs reward = c0:reward, adv = c1:adv, advantage = c2:advantage
    "#]]
    .assert_eq(&ir);
}

/// A program that uses a batch reduction between group reductions, a rank,
/// `count`, an advantage-layer let, params and foldable constants.
fn layered() -> crate::hir::Program {
    let mut b = Builder::default();
    let fb = b.feature("grade(word)");
    let c = b.feature("cost");
    let w = b.param("w", 0.5);
    let score =
        b.let_("score", Layer::Reward, bin(BinOp::Add, bin(BinOp::Mul, w, fb), bin(BinOp::Mul, num(2.0), num(0.25))));
    let r = b.reward(bin(BinOp::Div, score, call(Func::Max, vec![num(1.0), bin(BinOp::Div, c.clone(), num(4.0))])));
    let centred = b.let_("centred", Layer::Advantage, bin(BinOp::Sub, r.clone(), group(ReduceOp::Mean, r)));
    let a = b.adv(bin(
        BinOp::Add,
        bin(BinOp::Div, centred.clone(), bin(BinOp::Add, batch(ReduceOp::Std, centred), num(1e-3))),
        bin(BinOp::Div, group(ReduceOp::Rank, c), Expr::Reduce(Scope::Group, ReduceOp::Count, None, None)),
    ));
    b.advantage(bin(BinOp::Sub, a.clone(), batch(ReduceOp::Mean, a)));
    b.build()
}

#[test]
fn layered_program_matches_and_folds() {
    let p = layered();
    let t = big_table(|g| 1 + g % 9, 900);
    let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
    let compiled = CompiledProgram::new(&p);
    let got = compiled.eval(&t, &EvalOptions::default()).expect("finite");
    assert!(same_bits(&got, &want));
    let ir = compiled.ir().to_string();
    // `2 * 0.25` is folded; the param is not.
    assert!(ir.contains("const 0.5") && ir.contains("param p0"), "{ir}");
    assert!(ir.contains(": batch b0 = std(") && ir.contains(": group c"), "{ir}");
}

/// `eval_into` with one workspace and one `Outputs` over tables of 900, 3
/// and 500 groups (growing, shrinking, growing within the kept capacity),
/// the outputs filled with garbage before each call: every call equals a
/// fresh `eval` bit for bit. `layered` has batch steps between its passes and
/// a group rank; `ranked` outputs one batch rank three times, so its outputs
/// share a column and two are copied.
#[test]
fn eval_into_reused_buffers_give_a_fresh_evaluations_bits() {
    let mut b = Builder::default();
    let c = b.feature("cost");
    let r = b.reward(batch(ReduceOp::Rank, c));
    b.adv(r);
    let ranked = b.build();
    for program in [layered(), gated_program(), ranked] {
        let compiled = CompiledProgram::new(&program);
        let (mut space, mut outputs) = (Workspace::default(), Outputs::default());
        for groups in [900, 3, 500, 900] {
            let t = big_table(|g| 1 + g % 9, groups);
            let want = compiled.eval(&t, &EvalOptions::default()).expect("finite");
            eval_into_poisoned(&compiled, &t, &mut space, &mut outputs);
            assert!(same_bits(&outputs, &want), "{groups} groups");
        }
    }
}

#[test]
fn eval_into_keeps_the_output_allocations() {
    let compiled = CompiledProgram::new(&gated_program());
    let (mut space, mut outputs) = (Workspace::default(), Outputs::default());
    let t = big_table(|_| 8, 400);
    compiled.eval_into(&t, &EvalOptions::default(), &mut space, &mut outputs).expect("finite");
    let pointers = |o: &Outputs| [o.reward.as_ptr(), o.adv.as_ptr(), o.advantage.as_ptr()];
    let before = pointers(&outputs);
    let smaller = big_table(|_| 8, 100);
    compiled.eval_into(&smaller, &EvalOptions::default(), &mut space, &mut outputs).expect("finite");
    assert_eq!(pointers(&outputs), before);
    assert_eq!(outputs.reward.len(), smaller.rows());
    compiled.eval_into(&t, &EvalOptions::default(), &mut space, &mut outputs).expect("finite");
    assert_eq!(pointers(&outputs), before);
}

#[test]
fn eval_into_reports_the_errors_eval_does() {
    let p = gated_program();
    let compiled = CompiledProgram::new(&p);
    let (mut space, mut outputs) = (Workspace::default(), Outputs::default());
    let missing = table(&[2], &[("cost", &[1.0, 2.0])]);
    assert_eq!(
        compiled.eval_into(&missing, &EvalOptions::default(), &mut space, &mut outputs),
        Err(EvalError::MissingFeature { key: "grade(word)".into() })
    );
    let t = big_table(|_| 8, 20);
    compiled.eval_into(&t, &EvalOptions::default(), &mut space, &mut outputs).expect("finite after an error");
    assert!(same_bits(&outputs, &compiled.eval(&t, &EvalOptions::default()).expect("finite")));
}

#[test]
fn set_param_takes_effect_without_recompiling() {
    let mut p = layered();
    let mut compiled = CompiledProgram::new(&p);
    assert!(compiled.set_param("w", 0.9));
    assert!(!compiled.set_param("nope", 1.0));
    assert!(p.set_param("w", 0.9));
    let t = big_table(|_| 8, 50);
    let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
    assert!(same_bits(&compiled.eval(&t, &EvalOptions::default()).expect("finite"), &want));
}

#[test]
fn errors_match_the_interpreter() {
    let p = gated_program();
    let compiled = CompiledProgram::new(&p);
    let missing = table(&[2], &[("cost", &[1.0, 2.0])]);
    assert_eq!(
        compiled.eval(&missing, &EvalOptions::default()),
        Err(EvalError::MissingFeature { key: "grade(word)".into() })
    );
    let t = big_table(|g| 8 + (g == 3) as usize, 5);
    let options = EvalOptions { group_size: Some(8), ..EvalOptions::default() };
    assert_eq!(compiled.eval(&t, &options), interp::eval(&p, &t, &options));
    assert!(matches!(compiled.eval(&t, &options), Err(EvalError::GroupSize { got: 9, .. })));

    // Without the epsilon, a group with no spread divides 0 by 0.
    let mut b = Builder::default();
    let c = b.feature("cost");
    let adv = |r: Expr| {
        bin(BinOp::Div, bin(BinOp::Sub, r.clone(), group(ReduceOp::Mean, r.clone())), group(ReduceOp::Std, r))
    };
    let p = b.finish(c, Some(&adv), None);
    let t = table(&[3, 2, 2], &[("cost", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 6.0])]);
    let got = CompiledProgram::new(&p).eval(&t, &EvalOptions::default());
    assert_eq!(format!("{got:?}"), format!("{:?}", interp::eval(&p, &t, &EvalOptions::default())));
    assert!(matches!(&got, Err(EvalError::NonFinite { def, row: 5, .. }) if def == "adv"), "{got:?}");
    let allow = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
    assert!(CompiledProgram::new(&p).eval(&t, &allow).expect("allowed").adv[6].is_nan());
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let p = layered();
    let t = big_table(|g| 1 + g % 13, 3000);
    let compiled = CompiledProgram::new(&p);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
        pool.install(|| compiled.eval(&t, &EvalOptions::default()).expect("finite"))
    };
    let one = run(1);
    assert!(same_bits(&one, &run(2)));
    assert!(same_bits(&one, &run(4)));
}

#[test]
fn empty_table_gives_empty_outputs() {
    let t = FeatureTable::new(Vec::<(String, usize)>::new()).expect("no groups");
    let mut t = t;
    t.add_column("grade(word)", vec![]).expect("empty column");
    t.add_column("cost", vec![]).expect("empty column");
    let out = CompiledProgram::new(&layered()).eval(&t, &EvalOptions::default()).expect("nothing to fail");
    assert_eq!(out, Outputs::default());
}

/// A mask that folds to a constant never reaches a stage: `true` selects
/// every row (the plain reduction), `false` none (every reduction is 0).
#[test]
fn constant_masks_fold_away() {
    let mut b = Builder::default();
    let x = b.feature("grade(word)");
    let c = b.feature("cost");
    let always = bin(BinOp::Ge, num(1.0), num(0.0));
    let never = Expr::Bool(false);
    let kept = masked(Scope::Group, ReduceOp::Mean, Some(x.clone()), always);
    let dropped = masked(Scope::Batch, ReduceOp::Std, Some(c.clone()), never);
    let live = masked(Scope::Group, ReduceOp::Sum, Some(x.clone()), bin(BinOp::Gt, c, num(2.0)));
    let adv = move |_r: Expr| bin(BinOp::Add, bin(BinOp::Sub, kept.clone(), dropped.clone()), live.clone());
    let p = b.finish(x, Some(&adv), None);
    let ir = CompiledProgram::new(&p).ir().to_string();
    assert!(ir.contains("= mean(f0)\n"), "an always-true mask is dropped:\n{ir}");
    assert!(!ir.contains("std("), "an always-false mask folds the reduction to 0:\n{ir}");
    assert!(ir.contains("= sum(f0) where c"), "a live mask stays:\n{ir}");
    let t = big_table(|g| 1 + g % 5, 50);
    let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
    let got = CompiledProgram::new(&p).eval(&t, &EvalOptions::default()).expect("finite");
    assert!(same_bits(&got, &want));
}

#[test]
fn eval_many_gives_each_programs_own_results() {
    let (gated, layered) = (CompiledProgram::new(&gated_program()), CompiledProgram::new(&layered()));
    let t = big_table(|g| 1 + g % 7, 400);
    let options = EvalOptions::default();
    // `layered` has batch stages, so these run one by one; the gated program
    // and one reading only `cost`, with a param, run in one fused pass.
    let mut b = Builder::default();
    let c = b.feature("cost");
    let w = b.param("w", 2.0);
    let mut scaled = CompiledProgram::new(&b.finish(bin(BinOp::Sub, w, c), None, None));
    assert!(scaled.set_param("w", 3.0));
    let sets: [&[&CompiledProgram]; 2] = [&[&gated, &layered, &gated], &[&gated, &scaled, &gated]];
    for programs in sets {
        let many = CompiledProgram::eval_many(programs, &t, &options);
        assert_eq!(many.len(), programs.len());
        for (got, p) in many.iter().zip(programs) {
            let want = interp::eval(p.program(), &t, &options).expect("finite");
            assert!(same_bits(got.as_ref().expect("finite"), &want));
        }
    }
    // A table without the features: every program's own error.
    let bare = table(&[2, 2], &[]);
    for got in CompiledProgram::eval_many(&[&gated, &gated], &bare, &options) {
        assert_eq!(got.expect_err("no features"), gated.eval(&bare, &options).expect_err("no features"));
    }
}

/// `compiled.eval_into` the outputs a previous table left, first set to NaN so that a value the
/// evaluation fails to write shows; the table's values must be finite.
fn eval_into_poisoned(compiled: &CompiledProgram, t: &FeatureTable, space: &mut Workspace, outputs: &mut Outputs) {
    for column in [&mut outputs.reward, &mut outputs.adv, &mut outputs.advantage] {
        column.iter_mut().for_each(|x| *x = f64::NAN);
    }
    compiled.eval_into(t, &EvalOptions::default(), space, outputs).expect("finite");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Blocks hold whole groups in order, each as many as fit in `BLOCK` rows (or one larger
    /// group); a table of one group size is cut by arithmetic as the walk cuts it.
    #[test]
    fn blocks_hold_as_many_whole_groups_as_fit(
        sizes in proptest::collection::vec(
            proptest::prop_oneof![1usize..=9, 1usize..=300, exec::BLOCK - 1..=exec::BLOCK + 1, 1usize..=3000],
            0..400,
        ),
        uniform in proptest::bool::ANY,
    ) {
        let sizes = if uniform { vec![sizes.first().copied().unwrap_or(8); sizes.len()] } else { sizes };
        let t = FeatureTable::new(sizes.iter().enumerate().map(|(g, &n)| (format!("g{g}"), n))).expect("non-empty groups");
        let one_size = sizes.first().filter(|&&n| sizes.iter().all(|&m| m == n)).copied();
        proptest::prop_assert_eq!(t.group_size(), one_size);
        let blocks = exec::blocks(&t);
        let offsets = t.group_offsets();
        let mut next = 0;
        for b in &blocks {
            proptest::prop_assert_eq!(b.groups.start, next);
            proptest::prop_assert!(b.groups.end > b.groups.start);
            proptest::prop_assert_eq!(b.rows.clone(), offsets[b.groups.start]..offsets[b.groups.end]);
            proptest::prop_assert!(b.rows.len() <= exec::BLOCK || b.groups.len() == 1, "{:?}", b);
            if b.groups.end < t.groups() {
                proptest::prop_assert!(offsets[b.groups.end + 1] - b.rows.start > exec::BLOCK, "{:?} could hold one more", b);
            }
            next = b.groups.end;
        }
        proptest::prop_assert_eq!(next, t.groups());
        proptest::prop_assert_eq!(&blocks, &exec::blocks_by_walk(&t));
    }
}
