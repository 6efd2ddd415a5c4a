//! `compile_source`: parsing and checking together, as the binaries call it.

use super::{sample, schema};
use crate::check::{CheckOptions, compile_source};
use crate::span::SourceFile;

#[test]
fn a_good_file_compiles_with_its_warnings_and_verbatim_check_texts() {
    let source = SourceFile::new("scaled.reward", sample("scaled"));
    let (program, warnings) = compile_source(&source, &schema(), &CheckOptions::default()).expect("compiles");
    assert_eq!(warnings.iter().map(|w| w.code).collect::<Vec<_>>(), ["reward-layer-scaling"]);
    let texts: Vec<&str> = program.checks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["reward in [0, 1]", "reward <= score"]);
}

#[test]
fn errors_from_both_stages_are_returned_in_source_order() {
    let source = SourceFile::new("bad.reward", "let s = grade(fil)\nreward = s * (\ncheck reward > 2\n");
    let diags = compile_source(&source, &schema(), &CheckOptions::default()).expect_err("has errors");
    assert!(diags.iter().any(|d| d.code == "unknown-level"), "{diags:#?}");
    assert!(diags.len() >= 2, "the parse error is kept too: {diags:#?}");
    assert!(diags.windows(2).all(|w| w[0].span.start <= w[1].span.start), "{diags:#?}");
    // The broken `reward` line must not also be reported as a missing `reward`.
    assert!(diags.iter().all(|d| d.code != "missing-reward"), "{diags:#?}");
}

#[test]
fn group_size_options_reach_the_interval_analysis() {
    // With groups of one, RLOO's `group.count() - 1` can be 0.
    let source = SourceFile::new("rloo.reward", sample("rloo"));
    let options = CheckOptions { group_size: crate::interval::Interval::new(1.0, 8.0), ..CheckOptions::default() };
    let (_, warnings) = compile_source(&source, &schema(), &options).expect("compiles");
    assert_eq!(warnings.iter().map(|w| w.code).collect::<Vec<_>>(), ["denominator-contains-zero"]);
    let quiet = CheckOptions { lints: false, ..options };
    let (_, warnings) = compile_source(&source, &schema(), &quiet).expect("compiles");
    assert!(warnings.is_empty());
}

/// What a user reads: the scaling warning and the gated sample's counterexample, rendered.
#[test]
fn rendered_diagnostics_snapshot() {
    let schema = schema();
    let v1 = SourceFile::new("scaled.reward", sample("scaled"));
    let (_, warnings) = compile_source(&v1, &schema, &CheckOptions::default()).expect("compiles");
    expect_test::expect![[r#"
        scaled.reward:3:18: warning: `reward` is divided by a factor of the efficiency feature `cost`, which varies within a group: it rescales the group's rewards and distorts GRPO's advantages
          |
        3 | reward = score / max(1, cost / 4)
          |                  ^^^^^^^^^^^^^^^^
          = help: apply the discount at the advantage layer instead, e.g. `advantage = adv * ...`; a bool gate such as `mask(cost > 0)` is fine in `reward`

        warning: 1 warning emitted
    "#]].assert_eq(&crate::diag::render_all(&v1, &warnings));

    let text = format!("{}check sign(advantage) == sign(adv)\n", sample("gated"));
    let v3 = SourceFile::new("gated_sign.reward", text);
    let (program, _) = compile_source(&v3, &schema, &CheckOptions::default()).expect("compiles");
    let outcomes = crate::check::verify(&program, &schema, &crate::check::VerifyOptions::default()).expect("runs");
    let crate::check::CheckOutcome::Failed { diagnostic } = &outcomes[3] else { panic!("{outcomes:?}") };
    expect_test::expect![[r#"
        gated_sign.reward:8:1: error: check `sign(advantage) == sign(adv)` fails
          |
        8 | check sign(advantage) == sign(adv)
          | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
          = help: found by property testing after 5 generated cases; shrunk to a minimal counterexample
          = note: counterexample: group of 2 rollouts: #0: grade(word) = 1, cost = 1; #1: grade(word) = 0, cost = 0
          = note: there: #0: reward = 1, adv = 0.9998, advantage = 0.4999; #1: reward = 0, adv = -0.9998, advantage = 0
    "#]]
    .assert_eq(&crate::diag::render(&v3, diagnostic));
}

/// The mistakes a `where` mask invites, rendered: a number for a bool, a
/// misspelt keyword, a keyword on a function that takes none, a repeat.
#[test]
fn rendered_mask_errors_snapshot() {
    let text = "reward = grade(word) * mask(cost > 0)\n\
                adv = reward - group.mean(reward, where = ok)\n\
                let n = group.count(wher = ok > 0)\n\
                let m = min(reward, 1, where = ok > 0)\n\
                let s = batch.std(reward, where = ok > 0, where = cut > 0)\n";
    let source = SourceFile::new("masks.reward", text);
    let diags = compile_source(&source, &schema(), &CheckOptions::default()).expect_err("has errors");
    expect_test::expect![[r#"
        masks.reward:2:43: error: a number is used as a bool; compare it, e.g. `x > 0`
          |
        2 | adv = reward - group.mean(reward, where = ok)
          |                                           ^^
          = help: the `where` mask of `group.mean` takes a bool: the rows where it holds are reduced

        masks.reward:3:21: error: `group.count` has no keyword argument `wher`
          |
        3 | let n = group.count(wher = ok > 0)
          |                     ^^^^
          = help: did you mean `where`? (`where = BOOL` keeps the rows where it holds)

        masks.reward:4:24: error: `min` takes no keyword arguments, but `where` is given
          |
        4 | let m = min(reward, 1, where = ok > 0)
          |                        ^^^^^
          = help: only the group and batch reductions take one: `where = BOOL`, e.g. `group.mean(x, where = ok > 0)`

        masks.reward:5:43: error: `where` is given twice to `batch.std`
          |
        5 | let s = batch.std(reward, where = ok > 0, where = cut > 0)
          |                                           ^^^^^
          = help: join the conditions with `&&`: `where = a && b`

        error: 4 errors emitted
    "#]]
    .assert_eq(&crate::diag::render_all(&source, &diags));
}
