use super::*;
use crate::ast::BinOp;
use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::{Func, Layer, ReduceOp};
use crate::interp::testkit::*;

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs()))
}

#[test]
fn the_gated_program_by_hand() {
    let p = gated_program();
    let t = table(&[2, 2], &[("grade(word)", &[1.0, 0.5, 0.8, 0.8]), ("cost", &[2.0, 0.0, 8.0, 1.0])]);
    let out = eval(&p, &t, &EvalOptions::default()).expect("finite");
    assert_eq!(out.reward, vec![1.0, 0.0, 0.8, 0.8]);
    // Group 0: mean 0.5, std 0.5; group 1: no spread.
    let a0 = 0.5 / (0.5 + 1e-4);
    assert!(close(&out.adv, &[a0, -a0, 0.0, 0.0]));
    assert!(close(&out.advantage, &[a0 * 0.5f64.sqrt(), -a0 * 0.0, 0.0, 0.0]));
}

#[test]
fn group_and_batch_reductions_broadcast() {
    let mut b = Builder::default();
    let x = b.feature("x");
    let sum = b.let_("s", Layer::Advantage, group(ReduceOp::Sum, x.clone()));
    let rank = b.let_("k", Layer::Advantage, group(ReduceOp::Rank, x.clone()));
    let count = b.let_("n", Layer::Advantage, Expr::Reduce(Scope::Group, ReduceOp::Count, None, None));
    let bmax = b.let_("m", Layer::Advantage, batch(ReduceOp::Max, x.clone()));
    let bcount = b.let_("bn", Layer::Advantage, Expr::Reduce(Scope::Batch, ReduceOp::Count, None, None));
    let adv = move |_r: Expr| bin(BinOp::Add, bin(BinOp::Mul, sum.clone(), num(100.0)), rank.clone());
    let advantage = move |_r: Expr, _a: Expr| {
        bin(BinOp::Add, bin(BinOp::Mul, count.clone(), num(100.0)), bin(BinOp::Mul, bmax.clone(), bcount.clone()))
    };
    let p = b.finish(x, Some(&adv), Some(&advantage));
    let t = table(&[3, 1], &[("x", &[2.0, 1.0, 2.0, 5.0])]);
    let out = eval(&p, &t, &EvalOptions::default()).expect("finite");
    assert_eq!(out.adv, vec![502.5, 501.0, 502.5, 501.0]);
    assert_eq!(out.advantage, vec![320.0, 320.0, 320.0, 120.0]);
}

#[test]
fn functions_follow_the_language() {
    let mut b = Builder::default();
    let x = b.feature("x");
    let p = b.finish(x.clone(), None, None);
    let cases: Vec<(Expr, Vec<f64>)> = vec![
        (call(Func::Sign, vec![x.clone()]), vec![-1.0, 0.0, 1.0]),
        (call(Func::Clip, vec![x.clone(), num(-0.5), num(0.5)]), vec![-0.5, 0.0, 0.5]),
        (call(Func::Max, vec![x.clone(), num(0.0), num(-7.0)]), vec![0.0, 0.0, 2.0]),
        (Expr::In(Box::new(x.clone()), Box::new(num(0.0)), Box::new(num(2.0))), vec![0.0, 1.0, 1.0]),
        (call(Func::If, vec![bin(BinOp::Lt, x.clone(), num(0.0)), num(10.0), x.clone()]), vec![10.0, 0.0, 2.0]),
        (bin(BinOp::Pow, x.clone(), num(2.0)), vec![1.0, 0.0, 4.0]),
        (call(Func::Mask, vec![bin(BinOp::Ne, x.clone(), num(0.0))]), vec![1.0, 0.0, 1.0]),
    ];
    let t = table(&[3], &[("x", &[-1.0, 0.0, 2.0])]);
    for (expr, want) in cases {
        let got = eval_expr(&p, &t, &expr, &EvalOptions::default()).expect("evaluates");
        assert_eq!(got, want, "{expr:?}");
    }
}

#[test]
fn missing_feature_and_group_size_are_errors() {
    let p = gated_program();
    let t = table(&[2], &[("cost", &[1.0, 2.0])]);
    assert_eq!(eval(&p, &t, &EvalOptions::default()), Err(EvalError::MissingFeature { key: "grade(word)".into() }));
    let t = table(&[2, 3], &[("grade(word)", &[0.0; 5]), ("cost", &[1.0; 5])]);
    let options = EvalOptions { group_size: Some(2), ..EvalOptions::default() };
    assert_eq!(eval(&p, &t, &options), Err(EvalError::GroupSize { group: "g1".into(), got: 3, want: 2 }));
    // Sizes that average the wanted one still fail, at the first group that differs.
    let t = table(&[4, 4, 3, 5, 4], &[("grade(word)", &[0.0; 20]), ("cost", &[1.0; 20])]);
    let options = EvalOptions { group_size: Some(4), ..EvalOptions::default() };
    assert_eq!(eval(&p, &t, &options), Err(EvalError::GroupSize { group: "g2".into(), got: 3, want: 4 }));
    assert!(eval(&p, &t, &EvalOptions::default()).is_ok());
}

#[test]
fn an_unused_let_is_not_evaluated() {
    let mut b = Builder::default();
    let x = b.feature("x");
    let absent = b.feature("absent");
    b.let_("unused", Layer::Reward, bin(BinOp::Div, absent, num(0.0)));
    let p = b.finish(x, None, None);
    let t = table(&[2], &[("x", &[0.0, 1.0])]);
    assert!(eval(&p, &t, &EvalOptions::default()).is_ok());
}

#[test]
fn non_finite_names_the_first_faulty_definition() {
    // Dr.-GRPO-like estimator without the epsilon: a group with no spread divides by zero.
    let mut b = Builder::default();
    let x = b.feature("x");
    let adv = |r: Expr| {
        bin(BinOp::Div, bin(BinOp::Sub, r.clone(), group(ReduceOp::Mean, r.clone())), group(ReduceOp::Std, r))
    };
    let p = b.finish(x, Some(&adv), None);
    let t = table(&[2, 2], &[("x", &[0.0, 1.0, 3.0, 3.0])]);
    let err = eval(&p, &t, &EvalOptions::default()).expect_err("0/0 in group g1");
    let EvalError::NonFinite { def, group, index_in_group, row, features, value } = err else { panic!("{err:?}") };
    assert_eq!((def.as_str(), group.as_str(), index_in_group, row), ("adv", "g1", 0, 2));
    assert!(value.is_nan());
    assert_eq!(features, vec![("x".to_string(), 3.0)]);
    let allow = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
    assert!(eval(&p, &t, &allow).expect("allowed").adv[2].is_nan());
}

#[test]
fn non_finite_in_a_let_is_named_after_the_let() {
    let mut b = Builder::default();
    let fb = b.feature("grade(word)");
    let c = b.feature("cost");
    let per_call = b.let_("per_call", Layer::Reward, bin(BinOp::Div, fb, c));
    let p = b.finish(per_call, None, None);
    // Row 1 divides by zero; through the group mean, `adv` of row 0 is NaN too,
    // but the let is the root of the fault.
    let t = table(&[2], &[("grade(word)", &[1.0, 1.0]), ("cost", &[1.0, 0.0])]);
    let err = eval(&p, &t, &EvalOptions::default()).expect_err("1/0");
    let EvalError::NonFinite { def, row, value, index_in_group, .. } = &err else { panic!("{err:?}") };
    assert_eq!((def.as_str(), *row, *index_in_group, *value), ("per_call", 1, 1, f64::INFINITY));
    assert!(err.to_string().contains("`per_call` is inf for rollout 1 of group `g0` (row 1)"), "{err}");
}

#[test]
fn a_guarded_non_finite_let_is_no_error() {
    let mut b = Builder::default();
    let fb = b.feature("grade(word)");
    let c = b.feature("cost");
    let per_call = b.let_("per_call", Layer::Reward, bin(BinOp::Div, fb, c.clone()));
    let reward = call(Func::If, vec![bin(BinOp::Gt, c, num(0.0)), per_call, num(0.0)]);
    let p = b.finish(reward, None, None);
    let t = table(&[2], &[("grade(word)", &[1.0, 1.0]), ("cost", &[1.0, 0.0])]);
    assert_eq!(eval(&p, &t, &EvalOptions::default()).expect("guarded").reward, vec![1.0, 0.0]);
}

#[test]
fn an_output_that_nothing_else_reads_is_blamed() {
    // `adv` does not read `reward`; the reward alone goes non-finite.
    let mut b = Builder::default();
    let x = b.feature("x");
    let r = b.reward(bin(BinOp::Div, num(1.0), x.clone()));
    let _ = r;
    b.adv(x);
    let p = b.build();
    let t = table(&[2], &[("x", &[1.0, 0.0])]);
    let err = eval(&p, &t, &EvalOptions::default()).expect_err("1/0");
    assert!(matches!(&err, EvalError::NonFinite { def, row: 1, .. } if def == "reward"), "{err:?}");
}

#[test]
fn diagnosis_of_another_backend_matches_the_interpreter() {
    let mut b = Builder::default();
    let x = b.feature("x");
    let adv = |r: Expr| bin(BinOp::Div, r.clone(), bin(BinOp::Sub, r, num(2.0)));
    let p = b.finish(x, Some(&adv), None);
    let t = table(&[2, 2], &[("x", &[0.0, 1.0, 3.0, 2.0])]);
    let err = eval(&p, &t, &EvalOptions::default()).expect_err("2/0");
    assert_eq!(diagnose_non_finite(&p, &t), Some(err));
}

/// Masked reductions read only the selected rows (a NaN elsewhere does not
/// reach them), and a group with nothing selected reduces to 0 for every op
/// (its masked ranks are 0): no NaN leaks out of an empty selection. The
/// fused CPU backend agrees bit for bit.
#[test]
fn masked_reductions_skip_masked_out_rows_and_empty_groups_give_zero() {
    let mut b = Builder::default();
    let x = b.feature("x");
    b.feature("ok");
    let m = || bin(BinOp::Gt, Expr::Feature(1), num(0.0));
    let ops = [ReduceOp::Mean, ReduceOp::Std, ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Rank];
    let mut lets: Vec<Expr> = ops
        .iter()
        .map(|&op| b.let_(op.name(), Layer::Advantage, masked(Scope::Group, op, Some(x.clone()), m())))
        .collect();
    lets.push(b.let_("count", Layer::Advantage, masked(Scope::Group, ReduceOp::Count, None, m())));
    lets.push(b.let_("bmean", Layer::Advantage, masked(Scope::Batch, ReduceOp::Mean, Some(x.clone()), m())));
    lets.push(b.let_("bcount", Layer::Advantage, masked(Scope::Batch, ReduceOp::Count, None, m())));
    let p = b.finish(x, None, None);
    let t = table(&[3, 2], &[("x", &[1.0, f64::NAN, 3.0, 5.0, 6.0]), ("ok", &[1.0, 0.0, 1.0, 0.0, 0.0])]);
    let want: [&[f64]; 9] = [
        &[2.0, 2.0, 2.0, 0.0, 0.0],
        &[1.0, 1.0, 1.0, 0.0, 0.0],
        &[4.0, 4.0, 4.0, 0.0, 0.0],
        &[3.0, 3.0, 3.0, 0.0, 0.0],
        &[1.0, 1.0, 1.0, 0.0, 0.0],
        &[1.0, 0.0, 2.0, 0.0, 0.0],
        &[2.0, 2.0, 2.0, 0.0, 0.0],
        &[2.0; 5],
        &[2.0; 5],
    ];
    let compiled_of = |e: &Expr| {
        let mut q = p.clone();
        q.defs[q.adv].expr = e.clone();
        let options = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
        let compiled = crate::cpu::CompiledProgram::new(&q).eval(&t, &options).expect("evaluates").adv;
        let interpreted = eval(&q, &t, &options).expect("evaluates").adv;
        (interpreted, compiled)
    };
    for (e, want) in lets.iter().zip(want) {
        let got = eval_expr(&p, &t, e, &EvalOptions::default()).expect("evaluates");
        assert_eq!(got, want, "{e:?}");
        let (interpreted, compiled) = compiled_of(e);
        assert_eq!(interpreted, want, "{e:?}");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&compiled), bits(&interpreted), "{e:?}");
    }
    // A masked GRPO baseline: the masked-out NaN row is NaN itself, and only it.
    let grpo_masked = bin(
        BinOp::Div,
        bin(BinOp::Sub, Expr::Feature(0), masked(Scope::Group, ReduceOp::Mean, Some(Expr::Feature(0)), m())),
        bin(BinOp::Add, masked(Scope::Group, ReduceOp::Std, Some(Expr::Feature(0)), m()), num(1e-4)),
    );
    let (adv, compiled) = compiled_of(&grpo_masked);
    assert!(adv[1].is_nan() && compiled[1].is_nan());
    let finite = [0, 2, 3, 4];
    assert!(finite.iter().all(|&i| adv[i].is_finite() && adv[i] == compiled[i]), "{adv:?} {compiled:?}");
    assert_eq!(adv[3], 5.0 / 1e-4, "an empty selection centres on 0 with no spread");
}
