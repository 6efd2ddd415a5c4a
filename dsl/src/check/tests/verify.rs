//! Verification of `check` statements: proofs, passes and shrunk counterexamples.

use std::time::Instant;

use super::{SAMPLES, check_text, sample, schema};
use crate::check::{CheckOutcome, VerifyOptions, verify};
use crate::diag::Diagnostic;

fn outcomes(text: &str) -> Vec<CheckOutcome> {
    let (program, diags) = check_text(text);
    let program = program.unwrap_or_else(|| panic!("{diags:#?}"));
    verify(&program, &schema(), &VerifyOptions::default()).expect("verification runs")
}

fn failure(outcome: &CheckOutcome) -> &Diagnostic {
    match outcome {
        CheckOutcome::Failed { diagnostic } => diagnostic,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn every_sample_check_is_proved_or_passes() {
    for (name, text) in SAMPLES {
        let started = Instant::now();
        let results = outcomes(text);
        for (i, r) in results.iter().enumerate() {
            assert!(matches!(r, CheckOutcome::Proved | CheckOutcome::Passed { .. }), "{name} check {i}: {r:#?}");
        }
        eprintln!("{name}: {results:?} in {:?}", started.elapsed());
    }
}

#[test]
fn interval_proofs_and_property_tests_are_told_apart() {
    let results = outcomes(sample("gated"));
    assert_eq!(results[0], CheckOutcome::Proved, "reward in [0, 1] follows from the ranges");
    assert_eq!(results[1], CheckOutcome::Passed { cases: VerifyOptions::default().cases });
}

#[test]
fn sign_check_fails_for_the_gated_sample_at_zero_cost() {
    let text = format!("{}check sign(advantage) == sign(adv)\n", sample("gated"));
    let results = outcomes(&text);
    let d = failure(&results[3]);
    assert_eq!(d.code, "check-failed");
    assert!(d.is_error());
    assert_eq!(&text[d.span.range()], "check sign(advantage) == sign(adv)");
    assert_eq!(d.message, "check `sign(advantage) == sign(adv)` fails");
    // The minimal counterexample: two rollouts, one that scores and one with no effort.
    assert_eq!(
        d.notes[0],
        "counterexample: group of 2 rollouts: #0: grade(word) = 1, cost = 1; #1: grade(word) = 0, cost = 0"
    );
    assert_eq!(
        d.notes[1],
        "there: #0: reward = 1, adv = 0.9998, advantage = 0.4999; #1: reward = 0, adv = -0.9998, advantage = 0"
    );
}

#[test]
fn an_effort_scale_is_a_discount_but_not_a_sign_keeper_for_negative_scores() {
    let results = outcomes("let score = grade(word) - 0.5\nreward = score / max(1, cost / 4)\ncheck reward <= score\n");
    let d = failure(&results[0]);
    assert!(d.notes[0].contains("cost = 8") || d.notes[0].contains("cost = 5"), "{:?}", d.notes);
    assert!(d.notes[1].contains("score = -0.5"), "{:?}", d.notes);
}

#[test]
fn non_finite_values_fail_the_checks_that_read_them() {
    let results = outcomes("reward = grade(word) / cost\ncheck reward >= 0\n");
    let d = failure(&results[0]);
    assert_eq!(
        d.notes[0],
        "counterexample: group of 2 rollouts: #0: grade(word) = 0, cost = 0; #1: grade(word) = 0, cost = 0"
    );
    assert!(d.notes[1].contains("reward = NaN"), "{:?}", d.notes);
}

#[test]
fn verification_is_deterministic() {
    let text = format!("{}check sign(advantage) == sign(adv)\n", sample("discounted"));
    let (program, _) = check_text(&text);
    let program = program.expect("checks");
    let started = Instant::now();
    let a = verify(&program, &schema(), &VerifyOptions::default()).expect("runs");
    let elapsed = started.elapsed();
    let b = verify(&program, &schema(), &VerifyOptions::default()).expect("runs");
    assert_eq!(a, b);
    let other = VerifyOptions { seed: 1, ..VerifyOptions::default() };
    let c = verify(&program, &schema(), &other).expect("runs");
    assert!(matches!(c[3], CheckOutcome::Failed { .. }), "another seed finds it too: {c:?}");
    eprintln!("the discounted sample with 4 checks: {elapsed:?}");
}

#[test]
fn batch_reductions_are_tested_on_whole_batches() {
    let results = outcomes(
        "reward = grade(word)\nadv = reward - batch.mean(reward)\ncheck abs(batch.sum(adv)) <= 1e-9\ncheck adv <= group.max(reward) - group.min(reward)\n",
    );
    assert!(matches!(results[0], CheckOutcome::Passed { .. }), "{results:?}");
    let d = failure(&results[1]);
    assert!(d.notes[0].starts_with("counterexample: batch of 2 groups"), "{:?}", d.notes);
}

#[test]
fn a_schema_without_the_programs_features_is_an_error_not_a_pass() {
    let (program, _) = check_text("reward = grade(word)\ncheck reward >= 0\n");
    let empty = crate::schema::FeatureSchema::new();
    let err = verify(&program.expect("checks"), &empty, &VerifyOptions::default()).expect_err("no schema for grade");
    assert_eq!(err.to_string(), "the program reads feature `grade(word)`, which the schema does not declare");
}

#[test]
fn a_check_that_a_nan_breaks_is_tested_not_proved() {
    // sqrt's interval is [0, 0.71], but below grade(word) = 0.5 the value is NaN and `>=` is false.
    let results = outcomes("reward = sqrt(grade(word) - 0.5)\ncheck reward >= 0\n");
    let d = failure(&results[0]);
    assert!(d.notes[0].contains("grade(word) = 0"), "{:?}", d.notes);
    assert!(d.notes[1].contains("reward = NaN"), "{:?}", d.notes);
}
