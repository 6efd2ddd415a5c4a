//! The shipped reward files (`rewards/*.reward`) against the real schema:
//! they check clean, draw exactly the lint warnings (with the seed notes the
//! schema supplies) that their history calls for, render as a user reads
//! them, verify their `check`s, and round-trip through the printer.

use std::time::Instant;

use rewardlab_dsl::check::{CheckOptions, CheckOutcome, VerifyOptions, check, compile_source, verify};
use rewardlab_dsl::hir::Program;
use rewardlab_dsl::{Diagnostic, FeatureSchema, Interval, SourceFile, parser, printer};
use rewardlab_rewards::feature_schema as schema;

/// The shipped reward files, by name, in name order.
pub(super) const SHIPPED: [(&str, &str); 12] = [
    ("codegrep_v1", include_str!("../../codegrep_v1.reward")),
    ("codegrep_v2", include_str!("../../codegrep_v2.reward")),
    ("codegrep_v3", include_str!("../../codegrep_v3.reward")),
    ("dr_grpo", include_str!("../../dr_grpo.reward")),
    ("dr_grpo_valid", include_str!("../../dr_grpo_valid.reward")),
    ("fusesearch_f1", include_str!("../../fusesearch_f1.reward")),
    ("fusesearch_f1_plus_e", include_str!("../../fusesearch_f1_plus_e.reward")),
    ("fusesearch_f1_times_e", include_str!("../../fusesearch_f1_times_e.reward")),
    ("grpo", include_str!("../../grpo.reward")),
    ("grpo_valid", include_str!("../../grpo_valid.reward")),
    ("rloo", include_str!("../../rloo.reward")),
    ("rloo_valid", include_str!("../../rloo_valid.reward")),
];

/// A shipped reward file's text.
pub(super) fn shipped(name: &str) -> &'static str {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).expect("a shipped file")
}

/// Parses (asserting no syntax error) and checks `text` against `schema`.
fn check_with(text: &str, schema: &FeatureSchema) -> (Option<Program>, Vec<Diagnostic>) {
    let (file, parse_diags) = parser::parse(text);
    assert!(parse_diags.is_empty(), "syntax errors in {text:?}: {parse_diags:?}");
    check(&file, schema, &CheckOptions::default())
}

fn check_text(text: &str) -> (Option<Program>, Vec<Diagnostic>) {
    check_with(text, &schema())
}

/// A compact view of one diagnostic: code, message, the text under its span, help.
#[derive(Debug, PartialEq)]
struct Seen {
    code: &'static str,
    message: String,
    at: String,
    help: String,
}

/// The warnings of a file that must check without errors.
fn warnings(text: &str) -> Vec<Seen> {
    let (program, diags) = check_text(text);
    assert!(program.is_some(), "expected a program for {text:?}, got {diags:#?}");
    diags
        .iter()
        .map(|d| Seen {
            code: d.code,
            message: d.message.clone(),
            at: text[d.span.range()].to_string(),
            help: d.help.clone().unwrap_or_default(),
        })
        .collect()
}

fn codes(ws: &[Seen]) -> Vec<&'static str> {
    ws.iter().map(|w| w.code).collect()
}

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

// ---- lints ----

#[test]
fn shipped_files_check_without_errors() {
    for (name, text) in SHIPPED {
        let (program, diags) = check_with(text, &schema());
        assert!(program.is_some(), "{name}: {diags:#?}");
        assert!(diags.iter().all(|d| !d.is_error()), "{name}: {diags:#?}");
    }
}

#[test]
fn codegrep_v1_draws_reward_layer_scaling_at_its_divisor() {
    let ws = warnings(shipped("codegrep_v1"));
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "max(1, c / 4)");
    assert_eq!(
        ws[0].message,
        "`reward` is divided by a factor of the efficiency feature `c`, which varies within a group: it rescales \
         the group's rewards and distorts GRPO's advantages"
    );
    assert!(ws[0].help.contains("`advantage = adv * ...`"), "{}", ws[0].help);
    let (_, diags) = check_with(shipped("codegrep_v1"), &schema());
    assert!(diags[0].notes[0].contains("3.4x"), "{:?}", diags[0].notes);
}

#[test]
fn gated_and_advantage_layer_discounts_draw_no_scaling_warning() {
    for name in ["grpo", "dr_grpo", "rloo", "fusesearch_f1", "fusesearch_f1_plus_e"] {
        let ws = warnings(shipped(name));
        assert!(ws.is_empty(), "{name}: {ws:#?}");
    }
    // v2's and v3's discount is no reward-layer scaling; what they do draw is the advantage-layer
    // idle-outranks warning (`only_the_codegrep_advantage_discount_...`).
    for name in ["codegrep_v2", "codegrep_v3"] {
        assert_eq!(codes(&warnings(shipped(name))), ["idle-outranks"], "{name}");
    }
    assert!(warnings("reward = Fb(file) * if(c > 0, 1, 0)\n").is_empty());
    assert!(warnings("let keep = mask(c > 0 && len < 4000)\nreward = Fb(file) * keep\n").is_empty());
}

#[test]
fn fusesearch_bonus_term_warns_as_a_term_not_as_the_whole_reward() {
    let ws = warnings(shipped("fusesearch_f1_times_e"));
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "e");
    assert!(
        ws[0].message.starts_with("a term of `reward` is scaled by the efficiency feature `e`"),
        "{}",
        ws[0].message
    );
    assert!(ws[0].help.contains("FuseSearch"), "{}", ws[0].help);
}

/// The masked-baseline estimators draw no warning: their masked spreads and
/// counts are guarded, and doing nothing earns them the least.
#[test]
fn masked_baseline_variants_check_clean() {
    for name in ["grpo_valid", "dr_grpo_valid", "rloo_valid"] {
        let ws = warnings(shipped(name));
        assert!(ws.is_empty(), "{name}: {ws:#?}");
    }
}

/// No shipped reward lets a rollout that made no call and gave no answer outrank a sibling with
/// positive quality by its reward (they are gated on quality or on `c > 0`, and their estimators
/// rank a group by reward); CodeGrep v2 and v3 do at the advantage layer: `adv * sqrt(min(c / 4,
/// 1))` is 0 for a rollout with no call, above a weak sibling's negative advantage.
#[test]
fn only_the_codegrep_advantage_discount_lets_an_idle_rollout_outrank_a_working_one() {
    for (name, text) in SHIPPED {
        let ws = warnings(text);
        let idle: Vec<_> = ws.iter().filter(|w| w.code == "idle-outranks").collect();
        if matches!(name, "codegrep_v2" | "codegrep_v3") {
            assert_eq!(idle.len(), 1, "{name}: {ws:#?}");
            assert!(idle[0].message.contains("higher `advantage`"), "{name}: {ws:#?}");
            assert_eq!(idle[0].at, "adv * sqrt(min(c / 4, 1))", "{name}");
        } else {
            assert!(idle.is_empty(), "{name}: {ws:#?}");
        }
    }
    // Discounting only positive advantages keeps the penalty.
    let fixed = "reward = Fb(file) * mask(c > 0)\nadvantage = if(adv > 0, adv * sqrt(min(c / 4, 1)), adv)\n";
    assert!(warnings(fixed).iter().all(|w| w.code != "idle-outranks"), "{:#?}", warnings(fixed));
}

#[test]
fn an_ungated_length_penalty_draws_idle_outranks_with_the_pair_and_the_citations() {
    let text = "reward = Fb(file) - 0.0001 * len\n";
    let (_, diags) = check_text(text);
    let d = diags.iter().find(|d| d.code == "idle-outranks").unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(
        d.message,
        "a rollout that made no tool call and gave no answer can get a higher advantage than a sibling whose \
         quality is positive"
    );
    assert_eq!(
        d.notes[0],
        "in one group of two, the idle rollout (Fb(file) = 0, len = 0) earns reward = 0, adv = 0.998, and the \
         sibling (Fb(file) = 0.001, len = 1000) earns reward = -0.099, adv = -0.998"
    );
    assert!(d.notes[2].contains("TRL PRs #6427/#6430") && d.notes[2].contains("prime-rl PR #3376"), "{:?}", d.notes);
    // A default reward for "never answered" above a weak answer's.
    let ws = warnings("reward = if(valid > 0, Fb(file), 0.25)\n");
    assert_eq!(codes(&ws), ["idle-outranks"], "{ws:#?}");
    // Gating the penalty on success makes doing nothing the worst outcome
    // (the reward-layer scaling lint still has its say about the factor).
    let ws = warnings("reward = Fb(file) * (1 - 0.0001 * min(len, 4000))\n");
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
}

#[test]
fn rloo_divides_safely_by_its_leave_one_out_count() {
    assert!(warnings(shipped("rloo")).is_empty());
}

/// The schema's help for a constant reward names the feature most rewards start from.
#[test]
fn a_constant_reward_is_told_to_read_file_level_f_beta() {
    let (_, diags) = check_text("reward = 1\n");
    assert_eq!(diags[0].code, "cancels-under-centering");
    assert_eq!(diags[0].help.as_deref(), Some("make the reward depend on the rollout, e.g. on `Fb(file)`"));
}

// ---- compile_source and rendering ----

#[test]
fn a_good_file_compiles_with_its_warnings_and_verbatim_check_texts() {
    let source = SourceFile::new("codegrep_v1.reward", shipped("codegrep_v1"));
    let (program, warnings) = compile_source(&source, &schema(), &CheckOptions::default()).expect("compiles");
    assert_eq!(warnings.iter().map(|w| w.code).collect::<Vec<_>>(), ["reward-layer-scaling"]);
    let texts: Vec<&str> = program.checks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["reward in [0, 1]", "reward <= score"]);
}

#[test]
fn group_size_options_reach_the_interval_analysis() {
    // With groups of one, RLOO's `group.count() - 1` can be 0.
    let source = SourceFile::new("rloo.reward", shipped("rloo"));
    let options = CheckOptions { group_size: Interval::new(1.0, 8.0), ..CheckOptions::default() };
    let (_, warnings) = compile_source(&source, &schema(), &options).expect("compiles");
    assert_eq!(warnings.iter().map(|w| w.code).collect::<Vec<_>>(), ["denominator-contains-zero"]);
    let quiet = CheckOptions { lints: false, ..options };
    let (_, warnings) = compile_source(&source, &schema(), &quiet).expect("compiles");
    assert!(warnings.is_empty());
}

/// What a user reads: the v1 warning and the v3 counterexample, rendered.
#[test]
fn rendered_diagnostics_snapshot() {
    let schema = schema();
    let v1 = SourceFile::new("rewards/codegrep_v1.reward", shipped("codegrep_v1"));
    let (_, warnings) = compile_source(&v1, &schema, &CheckOptions::default()).expect("compiles");
    expect_test::expect![[r#"
        rewards/codegrep_v1.reward:6:18: warning: `reward` is divided by a factor of the efficiency feature `c`, which varies within a group: it rescales the group's rewards and distorts GRPO's advantages
          |
        6 | reward = score / max(1, c / 4)
          |                  ^^^^^^^^^^^^^
          = help: apply the discount at the advantage layer instead, e.g. `advantage = adv * ...`; a bool gate such as `mask(c > 0)` is fine in `reward`
          = note: CodeGrep v1 (seed 000) scaled its reward by 1/max(1, c/4) this way: KL drift rose about 3.4x and downstream efficiency did not improve; v2 moved the discount to the advantage layer

        warning: 1 warning emitted
    "#]]
    .assert_eq(&rewardlab_dsl::diag::render_all(&v1, &warnings));

    let text = format!("{}check sign(advantage) == sign(adv)\n", shipped("codegrep_v3"));
    let v3 = SourceFile::new("v3_sign.reward", text);
    let (program, _) = compile_source(&v3, &schema, &CheckOptions::default()).expect("compiles");
    let outcomes = verify(&program, &schema, &VerifyOptions::default()).expect("runs");
    let CheckOutcome::Failed { diagnostic } = &outcomes[3] else { panic!("{outcomes:?}") };
    expect_test::expect![[r#"
        v3_sign.reward:13:1: error: check `sign(advantage) == sign(adv)` fails
           |
        13 | check sign(advantage) == sign(adv)
           | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
           = help: found by property testing after 5 generated cases; shrunk to a minimal counterexample
           = note: counterexample: group of 2 rollouts: #0: Fb(file) = 1, c = 1; #1: Fb(file) = 0, c = 0
           = note: there: #0: reward = 1, adv = 0.9998, advantage = 0.4999; #1: reward = 0, adv = -0.9998, advantage = 0
    "#]]
    .assert_eq(&rewardlab_dsl::diag::render(&v3, diagnostic));
}

// ---- the lowered program ----

#[test]
fn params_checks_and_intervals_of_shipped_files() {
    let (program, _) = check_text(shipped("fusesearch_f1_times_e"));
    let p = program.expect("checks");
    assert_eq!(p.params.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["w_file", "alpha", "gamma"]);
    assert_eq!(p.def(p.reward).interval, Interval::new(0.0, 1.5));
    assert_eq!(p.checks.len(), 3);
    assert_eq!(p.checks[0].text, "reward in [0, 1.5]");
    let (program, _) = check_text(shipped("codegrep_v3"));
    let p = program.expect("checks");
    assert_eq!(p.def(p.advantage).interval, Interval::new(-1e4, 1e4));
    assert_eq!(p.features.iter().map(|f| f.key.as_str()).collect::<Vec<_>>(), ["Fb(file)", "c"]);
}

// ---- verification of the checks ----

#[test]
fn every_shipped_check_is_proved_or_passes() {
    for (name, text) in SHIPPED {
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
    let results = outcomes(shipped("codegrep_v3"));
    assert_eq!(results[0], CheckOutcome::Proved, "reward in [0, 1] follows from the ranges");
    assert_eq!(results[1], CheckOutcome::Passed { cases: VerifyOptions::default().cases });
}

#[test]
fn sign_check_fails_for_codegrep_v3_at_zero_calls() {
    let text = format!("{}check sign(advantage) == sign(adv)\n", shipped("codegrep_v3"));
    let results = outcomes(&text);
    let d = failure(&results[3]);
    assert_eq!(d.code, "check-failed");
    assert!(d.is_error());
    assert_eq!(&text[d.span.range()], "check sign(advantage) == sign(adv)");
    assert_eq!(d.message, "check `sign(advantage) == sign(adv)` fails");
    // The minimal counterexample: two rollouts, one that scores and one with no tool calls.
    assert_eq!(d.notes[0], "counterexample: group of 2 rollouts: #0: Fb(file) = 1, c = 1; #1: Fb(file) = 0, c = 0");
    assert_eq!(
        d.notes[1],
        "there: #0: reward = 1, adv = 0.9998, advantage = 0.4999; #1: reward = 0, adv = -0.9998, advantage = 0"
    );
}

#[test]
fn codegrep_v1_scale_is_a_discount_but_not_a_sign_keeper_for_negative_scores() {
    let results = outcomes("let score = Fb(file) - 0.5\nreward = score / max(1, c / 4)\ncheck reward <= score\n");
    let d = failure(&results[0]);
    assert!(d.notes[0].contains("c = 8") || d.notes[0].contains("c = 5"), "{:?}", d.notes);
    assert!(d.notes[1].contains("score = -0.5"), "{:?}", d.notes);
}

#[test]
fn verification_of_codegrep_v2_is_deterministic() {
    let text = format!("{}check sign(advantage) == sign(adv)\n", shipped("codegrep_v2"));
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
    eprintln!("codegrep_v2 with 4 checks: {elapsed:?}");
}

// ---- the printer ----

#[test]
fn shipped_reward_files_round_trip() {
    for (_, text) in SHIPPED {
        let (file, diags) = parser::parse(text);
        assert!(diags.is_empty(), "{diags:?}\n{text}");
        let printed = printer::print(&file);
        let (again, diags) = parser::parse(&printed);
        assert!(diags.is_empty(), "{diags:?}\n{printed}");
        assert_eq!(again.without_spans(), file.without_spans());
        assert_eq!(printer::print(&again), printed);
    }
}
