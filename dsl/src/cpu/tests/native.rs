//! Native kernels against the block interpreter and the interpreter: the
//! same bits on random programs and tables, the same errors, reused
//! buffers, thread counts, and the fallbacks (unsupported programs, no
//! compiler, turned off).
//!
//! These tests need the system C compiler (`cc`), as the C twin's do.

use std::path::PathBuf;

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::differential::{Gen, agrees_with_the_interpreter};
use super::*;

/// Test kernels are cached apart from the user's.
fn cache() -> PathBuf {
    std::env::temp_dir().join("rewardlab-native-tests")
}

fn native(program: &crate::hir::Program) -> CompiledProgram {
    let options = CompileOptions { native: NativeMode::Always, cache_dir: Some(cache()), ..CompileOptions::default() };
    CompiledProgram::with_options(program, &options)
}

fn blocks(program: &crate::hir::Program) -> CompiledProgram {
    CompiledProgram::with_options(program, &CompileOptions { native: NativeMode::Off, ..CompileOptions::default() })
}

/// The same bits, except that any NaN equals any NaN: the C compiler may
/// rewrite `a - (-b)` as `a + b`, which is the same value for every
/// number but can give a NaN result another sign bit (IEEE 754 leaves a
/// NaN's sign and payload unspecified).
fn same_values(a: &Outputs, b: &Outputs) -> bool {
    let eq = |x: &[f64], y: &[f64]| {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()))
    };
    eq(&a.reward, &b.reward) && eq(&a.adv, &b.adv) && eq(&a.advantage, &b.advantage)
}

/// The kernel was built, or the test says why not and fails.
fn assert_native(compiled: &CompiledProgram) {
    match compiled.backend() {
        Backend::Native(path) => assert!(path.is_file(), "{}", path.display()),
        other => panic!("no native kernel: {other:?}"),
    }
}

/// The C source of a compiled program's kernel, which the builder keeps beside its library.
fn kernel_source(compiled: &CompiledProgram) -> String {
    assert_native(compiled);
    let Backend::Native(library) = compiled.backend() else { unreachable!("checked") };
    std::fs::read_to_string(library.with_extension("c")).expect("the kernel's source beside it")
}

/// GRPO with a gate and a discount: the shape of the shipped reward files.
#[test]
fn the_gated_program_runs_natively_with_the_interpreters_bits() {
    let p = gated_program();
    let compiled = native(&p);
    assert_native(&compiled);
    let tables = [
        big_table(|g| 1 + g % 11, 700),
        big_table(|_| 8, 3000),
        big_table(|_| 4, 3000),
        big_table(|_| 16, 1000),
        big_table(|g| 5000 + g, 3),
    ];
    for t in tables {
        let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
        let got = compiled.eval(&t, &EvalOptions::default()).expect("finite");
        assert!(same_bits(&got, &want));
        assert!(same_bits(&got, &blocks(&p).eval(&t, &EvalOptions::default()).expect("finite")));
    }
}

/// Every group reduction, masked and not, over groups that are tiny and
/// longer than a sum chunk (`ops::SUM_CHUNK` rows, summed in chunks), in runs
/// of one size and alone, of powers of two and not (the kernel keeps the last
/// size's reciprocal for `mean` and `std`, so a size that returns after
/// another must get its own back).
#[test]
fn every_group_reduction_matches_bit_for_bit() {
    let ops = [ReduceOp::Mean, ReduceOp::Std, ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Count];
    let t = big_table(|g| [8, 8, 1, 3, 3, 8, 9000, 4097, 4096, 4096, 2, 2][g % 12], 24);
    for op in ops {
        for is_masked in [false, true] {
            let mut b = Builder::default();
            let x = b.feature("grade(word)");
            let c = b.feature("cost");
            let arg = (op != ReduceOp::Count).then(|| x.clone());
            let reduced = if is_masked {
                masked(Scope::Group, op, arg, bin(BinOp::Gt, c.clone(), num(4.0)))
            } else {
                Expr::Reduce(Scope::Group, op, arg.map(Box::new), None)
            };
            let adv = move |r: Expr| bin(BinOp::Add, bin(BinOp::Mul, r, c.clone()), reduced.clone());
            let p = b.finish(x, Some(&adv), None);
            let compiled = native(&p);
            assert_native(&compiled);
            let allow = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
            let want = interp::eval(&p, &t, &allow).expect("features present");
            let got = compiled.eval(&t, &allow).expect("features present");
            assert!(same_values(&got, &want), "{op:?} masked: {is_masked}\n{}", compiled.ir());
        }
    }
}

/// A division by a group constant in a stage that also takes a square root is multiplied out in
/// tiles of 4-, 8- and 16-row groups (`rl_div_by`): it gives the division's bits for numerators and
/// divisors of every magnitude, signed zeros, subnormals, infinities and NaN, where the
/// multiplication holds and where its rows are divided again.
#[test]
fn a_division_by_a_group_constant_keeps_its_bits_at_every_magnitude() {
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(34);
    let value = |rng: &mut ChaCha8Rng| -> f64 {
        let sign = if rng.random_range(0..2) == 0 { 1.0 } else { -1.0 };
        match rng.random_range(0..40) {
            0 => 0.0,
            1 => -0.0,
            2 => f64::INFINITY * sign,
            3 => f64::NAN,
            4 => sign * f64::from_bits(rng.random_range(1..1u64 << 52)),
            5..=14 => sign * rng.random_range(1.0..2.0) * 2f64.powi(rng.random_range(-1074..1024)),
            15..=19 => sign * rng.random_range(1.0..2.0) * 2f64.powi(rng.random_range(-420..-380)),
            _ => sign * rng.random_range(1.0..2.0) * 2f64.powi(rng.random_range(-60..60)),
        }
    };
    let rows = 160_000;
    let x: Vec<f64> = (0..rows).map(|_| value(&mut rng)).collect();
    let y: Vec<f64> = (0..rows).map(|_| value(&mut rng)).collect();
    let mut b = Builder::default();
    let (xe, ye) = (b.feature("grade(word)"), b.feature("cost"));
    // adv = x / group.max(cost); advantage = adv * sqrt(|cost|).
    let adv = move |_r: Expr| bin(BinOp::Div, xe.clone(), group(ReduceOp::Max, ye.clone()));
    let c = b.feature("cost");
    let discount =
        move |_r: Expr, a: Expr| bin(BinOp::Mul, a, call(Func::Sqrt, vec![call(Func::Abs, vec![c.clone()])]));
    let x0 = b.feature("grade(word)");
    let p = b.finish(x0, Some(&adv), Some(&discount));
    let compiled = native(&p);
    assert_native(&compiled);
    let source = kernel_source(&compiled);
    assert!(source.contains("rl_div_by(s"), "the kernel does not multiply the division out:\n{source}");
    let allow = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
    for size in [4, 8, 16] {
        let t = table(&vec![size; rows / size], &[("grade(word)", &x), ("cost", &y)]);
        let want = interp::eval(&p, &t, &allow).expect("features present");
        let got = compiled.eval(&t, &allow).expect("features present");
        for (i, (g, w)) in got.adv.iter().zip(&want.adv).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "row {i}: x = {:e}: compiled {g:e}, interpreted {w:e}",
                x[i]
            );
        }
        assert!(same_values(&got, &want), "groups of {size}");
    }
}

#[test]
fn errors_match_the_interpreter() {
    let p = gated_program();
    let compiled = native(&p);
    let missing = table(&[2], &[("cost", &[1.0, 2.0])]);
    assert_eq!(
        compiled.eval(&missing, &EvalOptions::default()),
        Err(EvalError::MissingFeature { key: "grade(word)".into() })
    );
    let t = big_table(|g| 8 + (g == 3) as usize, 5);
    let options = EvalOptions { group_size: Some(8), ..EvalOptions::default() };
    assert!(matches!(compiled.eval(&t, &options), Err(EvalError::GroupSize { got: 9, .. })));

    // Without the epsilon, a group with no spread divides 0 by 0.
    let mut b = Builder::default();
    let c = b.feature("cost");
    let adv = |r: Expr| {
        bin(BinOp::Div, bin(BinOp::Sub, r.clone(), group(ReduceOp::Mean, r.clone())), group(ReduceOp::Std, r))
    };
    let p = b.finish(c, Some(&adv), None);
    let t = table(&[3, 2, 2], &[("cost", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 6.0])]);
    let compiled = native(&p);
    assert_native(&compiled);
    let got = compiled.eval(&t, &EvalOptions::default());
    assert_eq!(format!("{got:?}"), format!("{:?}", interp::eval(&p, &t, &EvalOptions::default())));
    assert!(matches!(&got, Err(EvalError::NonFinite { def, row: 5, .. }) if def == "adv"), "{got:?}");
    let allow = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
    assert!(compiled.eval(&t, &allow).expect("allowed").adv[6].is_nan());
}

/// A reward column that GRPO's `group.mean` sums is checked through the mean, once a group: a
/// NaN or an infinity among the rows still stops the evaluation with the interpreter's error,
/// and a sum that overflows over finite rows (the kernel's flag raised, every output finite)
/// is no error, in the fixed-size path (groups of 8) and the general one (a group of 3).
#[test]
fn a_reward_checked_through_its_group_mean_reports_what_the_interpreter_does() {
    let mut b = Builder::default();
    let x = b.feature("grade(word)");
    let adv = |r: Expr| call(Func::Mask, vec![bin(BinOp::Gt, group(ReduceOp::Mean, r), num(0.0))]);
    let p = b.finish(bin(BinOp::Mul, x, num(0.5)), Some(&adv), None);
    let compiled = native(&p);
    assert_native(&compiled);
    let source = kernel_source(&compiled);
    assert!(source.contains("bad |= rl_bad(G"), "the reward is checked row by row:\n{source}");
    let sizes: Vec<usize> = [8; 40].into_iter().chain([3]).chain([8; 7]).collect();
    let rows: usize = sizes.iter().sum();
    for (what, group_rows) in [("the 8-row path", 8..16), ("the general path", 320..323)] {
        // Finite rows whose sum overflows: 8 × 1.6e308 / 2.
        let mut grades: Vec<f64> = (0..rows).map(|i| (i % 7) as f64 / 7.0).collect();
        grades[group_rows.clone()].fill(1.6e308);
        let t = table(&sizes, &[("grade(word)", &grades)]);
        let want = interp::eval(&p, &t, &EvalOptions::default()).expect("every output finite");
        let got = compiled.eval(&t, &EvalOptions::default());
        assert!(same_bits(&got.expect("an overflowing sum of finite rows is no error"), &want), "{what}");
        // An infinite reward in that group.
        grades[group_rows.start + 1] = f64::INFINITY;
        let t = table(&sizes, &[("grade(word)", &grades)]);
        let want = interp::eval(&p, &t, &EvalOptions::default());
        assert!(matches!(&want, Err(EvalError::NonFinite { def, .. }) if def == "reward"), "{want:?}");
        assert_eq!(format!("{:?}", compiled.eval(&t, &EvalOptions::default())), format!("{want:?}"), "{what}");
    }
}

#[test]
fn eval_into_and_params_work_natively() {
    let mut b = Builder::default();
    let x = b.feature("grade(word)");
    let c = b.feature("cost");
    let w = b.param("w", 0.5);
    let reward = bin(BinOp::Add, bin(BinOp::Mul, w.clone(), x), bin(BinOp::Mul, bin(BinOp::Sub, num(1.0), w), c));
    let mut p = b.finish(reward, None, None);
    let mut compiled = native(&p);
    assert_native(&compiled);
    let (mut space, mut outputs) = (Workspace::default(), Outputs::default());
    for (groups, w) in [(900, 0.5), (3, 0.25), (500, 0.9), (900, 0.1)] {
        assert!(compiled.set_param("w", w) && p.set_param("w", w));
        let t = big_table(|g| 1 + g % 9, groups);
        let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
        eval_into_poisoned(&compiled, &t, &mut space, &mut outputs);
        assert!(same_bits(&outputs, &want), "{groups} groups, w = {w}");
    }
}

/// Programs the kernel does not express run on the block interpreter, and
/// say why; so do programs whose compiler is missing or that are turned off.
#[test]
fn fallbacks_say_why_and_give_the_same_results() {
    let p = layered();
    let compiled = native(&p);
    assert!(
        matches!(compiled.backend(), Backend::Blocks(NativeError::Unsupported(what)) if what.contains("rank")),
        "{:?}",
        compiled.backend()
    );
    let t = big_table(|g| 1 + g % 9, 900);
    let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
    assert!(same_bits(&compiled.eval(&t, &EvalOptions::default()).expect("finite"), &want));

    let p = gated_program();
    let options = CompileOptions {
        native: NativeMode::Always,
        compiler: Some(PathBuf::from("/nonexistent/rewardlab-cc")),
        cache_dir: Some(cache()),
    };
    let missing = CompiledProgram::with_options(&p, &options);
    let Backend::Blocks(why) = missing.backend() else { panic!("{:?}", missing.backend()) };
    assert!(matches!(why, NativeError::NoCompiler { .. }) && why.to_string().contains("rewardlab-cc"), "{why}");
    let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
    assert!(same_bits(&missing.eval(&t, &EvalOptions::default()).expect("finite"), &want));

    let off = blocks(&p);
    assert!(matches!(off.backend(), Backend::Blocks(NativeError::Off)));
    assert!(same_bits(&off.eval(&t, &EvalOptions::default()).expect("finite"), &want));

    // `Auto` waits for a large table.
    let auto = CompiledProgram::with_options(&p, &CompileOptions { cache_dir: Some(cache()), ..Default::default() });
    assert!(matches!(auto.backend(), Backend::Pending));
    assert!(same_bits(&auto.eval(&t, &EvalOptions::default()).expect("finite"), &want));
    assert!(matches!(auto.backend(), Backend::Pending), "{} rows are few", t.rows());
    let large = big_table(|_| 8, NATIVE_MIN_ROWS / 8);
    let want = interp::eval(&p, &large, &EvalOptions::default()).expect("finite");
    assert!(same_bits(&auto.eval(&large, &EvalOptions::default()).expect("finite"), &want));
    assert_native(&auto);
}

#[test]
fn eval_many_runs_native_programs_one_by_one() {
    let (gated, other) = (native(&gated_program()), native(&gated_program()));
    let t = big_table(|g| 1 + g % 7, 400);
    for (got, p) in
        CompiledProgram::eval_many(&[&gated, &other], &t, &EvalOptions::default()).iter().zip([&gated, &other])
    {
        let want = interp::eval(p.program(), &t, &EvalOptions::default()).expect("finite");
        assert!(same_bits(got.as_ref().expect("finite"), &want));
    }
}

proptest! {
    // Each case runs the C compiler once (unless cached), so fewer cases
    // than the block interpreter's test.
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    /// Native results equal the block interpreter's bit for bit, NaNs aside
    /// (see `same_values`), and so the interpreter's within the differential
    /// test's tolerance, whatever the thread count and the buffers reused,
    /// with the same errors.
    #[test]
    fn native_equals_blocks_and_interpreted(program_seed in any::<u64>(), data_seed in any::<u64>()) {
        let program = Gen { rng: ChaCha8Rng::seed_from_u64(program_seed) }.program();
        let table = Gen { rng: ChaCha8Rng::seed_from_u64(data_seed) }.table();
        let compiled = native(&program);
        let ir = compiled.ir().to_string();
        if crate::cpu::native::unsupported(compiled.ir()).is_none() {
            prop_assert!(matches!(compiled.backend(), Backend::Native(_)), "{:?}\n{ir}", compiled.backend());
        }
        let got = agrees_with_the_interpreter(&program, &compiled, &table, data_seed)?;
        let allow = EvalOptions { non_finite: NonFinite::Allow, ..EvalOptions::default() };
        let interpreted = blocks(&program).eval(&table, &allow).expect("every feature is present");
        prop_assert!(same_values(&got, &interpreted), "native and block results differ\n{ir}");
    }
}
