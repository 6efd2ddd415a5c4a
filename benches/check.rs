//! The checker's costs on a shipped reward file, each beside its baseline in
//! the same group:
//!
//! - `check`: parse + check (names, types, intervals, lints) of CodeGrep v3,
//!   beside parsing alone;
//! - `verify`: property-testing v3's two untestable-by-intervals checks on
//!   2000 generated groups each, beside the interpreter evaluating the same
//!   number of rows once (the floor: what the oracle costs without drawing,
//!   packing and checking cases).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rewardlab_dsl::check::{CheckOptions, CheckOutcome, VerifyOptions, compile_source, verify};
use rewardlab_dsl::eval::{EvalOptions, NonFinite};
use rewardlab_dsl::{FeatureTable, SourceFile, interp, parser};
use rewardlab_rewards::feature_schema;

const V3: &str = include_str!("../rewards/codegrep_v3.reward");

fn bench_check(c: &mut Criterion) {
    let schema = feature_schema();
    let source = SourceFile::new("codegrep_v3.reward", V3);
    let mut group = c.benchmark_group("check");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.bench_function("parse_only", |b| b.iter(|| parser::parse(black_box(V3))));
    group.bench_function("parse_and_check", |b| {
        b.iter(|| compile_source(black_box(&source), &schema, &CheckOptions::default()).expect("v3 compiles"))
    });
    group.finish();
}

fn bench_verify(c: &mut Criterion) {
    let schema = feature_schema();
    let source = SourceFile::new("codegrep_v3.reward", V3);
    let (program, _) = compile_source(&source, &schema, &CheckOptions::default()).expect("v3 compiles");
    let options = VerifyOptions::default();
    let outcomes = verify(&program, &schema, &options).expect("verifies");
    let tested = outcomes.iter().filter(|o| matches!(o, CheckOutcome::Passed { .. })).count();
    assert_eq!(tested, 2, "v3 has two property-tested checks: {outcomes:?}");

    // The same number of rows the property tests evaluate: groups of 2..=8, about 5 on average.
    let groups = tested * options.cases;
    let sizes: Vec<usize> = (0..groups).map(|g| 2 + g % 7).collect();
    let mut table = FeatureTable::new(sizes.iter().enumerate().map(|(g, &s)| (g.to_string(), s))).expect("groups");
    let rows = table.rows();
    for f in &program.features {
        let values = (0..rows).map(|r| ((r * 7919) % 101) as f64 / 100.0).collect();
        table.add_column(f.key.clone(), values).expect("column");
    }
    let eval_options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };

    let mut group = c.benchmark_group("verify");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(20);
    group.bench_function("interp_eval_same_rows", |b| {
        b.iter(|| interp::eval(black_box(&program), &table, &eval_options).expect("evaluates"))
    });
    group.bench_function("verify_codegrep_v3", |b| {
        b.iter(|| verify(black_box(&program), &schema, &options).expect("verifies"))
    });
    group.finish();
}

criterion_group!(benches, bench_check, bench_verify);
criterion_main!(benches);
