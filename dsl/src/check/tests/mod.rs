//! Tests of the checker: a copy of the real feature schema, helpers that
//! parse and check a text, and one module per concern.

mod errors;
mod lints;
mod programs;
mod soundness;
mod source;
mod verify;

use super::{CheckOptions, check};
use crate::diag::Diagnostic;
use crate::hir::Program;
use crate::interval::Interval;
use crate::schema::{FeatureDecl, FeatureSchema, Role};

/// The rollout schema of `rewardlab-rewards` (`rewards/src/schema.rs`),
/// copied here because that crate depends on this one.
pub(super) fn schema() -> FeatureSchema {
    let unit = Interval::UNIT;
    let counts = Interval::NON_NEGATIVE;
    let levels = ["file", "lr", "func"];
    FeatureSchema::new()
        .with(
            FeatureDecl::number("Fb", unit, "F-beta at a level")
                .with_levels(&levels)
                .with_param("beta", 0.5, Interval::new(0.0, f64::INFINITY))
                .with_role(Role::Quality),
        )
        .with(FeatureDecl::number("P", unit, "precision").with_levels(&levels).with_role(Role::Quality))
        .with(FeatureDecl::number("R", unit, "recall").with_levels(&levels).with_role(Role::Quality))
        .with(FeatureDecl::number("F1", unit, "F1").with_levels(&levels).with_role(Role::Quality))
        .with(FeatureDecl::number("c", Interval::new(0.0, 8.0), "calls per turn").with_role(Role::Efficiency))
        .with(FeatureDecl::number("C", counts, "tool calls").integer().with_role(Role::Efficiency))
        .with(
            FeatureDecl::number("T", Interval::new(1.0, f64::INFINITY), "turns").integer().with_role(Role::Efficiency),
        )
        .with(FeatureDecl::number("e", unit, "tool efficiency").with_role(Role::Efficiency))
        .with(FeatureDecl::number("len", counts, "completion tokens").integer().with_role(Role::Length))
        .with(FeatureDecl::number("valid", unit, "answer parsed").integer().with_role(Role::Quality))
        .with(FeatureDecl::number("truncated", unit, "ran out").integer())
}

/// The schema plus a per-group feature, for the centering lint.
pub(super) fn schema_with_difficulty() -> FeatureSchema {
    schema().with(FeatureDecl::number("difficulty", Interval::UNIT, "task difficulty").per_group())
}

/// The shipped reward files, by name.
pub(super) const SHIPPED: [(&str, &str); 9] = [
    ("codegrep_v1", include_str!("../../../../rewards/codegrep_v1.reward")),
    ("codegrep_v2", include_str!("../../../../rewards/codegrep_v2.reward")),
    ("codegrep_v3", include_str!("../../../../rewards/codegrep_v3.reward")),
    ("dr_grpo", include_str!("../../../../rewards/dr_grpo.reward")),
    ("grpo", include_str!("../../../../rewards/grpo.reward")),
    ("rloo", include_str!("../../../../rewards/rloo.reward")),
    ("fusesearch_f1", include_str!("../../../../rewards/fusesearch_f1.reward")),
    ("fusesearch_f1_plus_e", include_str!("../../../../rewards/fusesearch_f1_plus_e.reward")),
    ("fusesearch_f1_times_e", include_str!("../../../../rewards/fusesearch_f1_times_e.reward")),
];

pub(super) fn shipped(name: &str) -> &'static str {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).expect("a shipped file")
}

/// Parses (asserting no syntax error) and checks `text` against `schema`.
pub(super) fn check_with(text: &str, schema: &FeatureSchema) -> (Option<Program>, Vec<Diagnostic>) {
    let (file, parse_diags) = crate::parser::parse(text);
    assert!(parse_diags.is_empty(), "syntax errors in test input {text:?}: {parse_diags:?}");
    check(&file, schema, &CheckOptions::default())
}

pub(super) fn check_text(text: &str) -> (Option<Program>, Vec<Diagnostic>) {
    check_with(text, &schema())
}

/// A compact view of one diagnostic: code, message, the text under its span, help.
#[derive(Debug, PartialEq)]
pub(super) struct Seen {
    pub code: &'static str,
    pub message: String,
    pub at: String,
    pub help: String,
}

pub(super) fn seen(text: &str, d: &Diagnostic) -> Seen {
    Seen {
        code: d.code,
        message: d.message.clone(),
        at: text[d.span.range()].to_string(),
        help: d.help.clone().unwrap_or_default(),
    }
}

/// The single error `text` must produce (and no program).
pub(super) fn only_error(text: &str) -> Seen {
    let (program, diags) = check_text(text);
    let errors: Vec<&Diagnostic> = diags.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "expected exactly one error for {text:?}, got {diags:#?}");
    assert!(program.is_none(), "a file with errors must not produce a program");
    seen(text, errors[0])
}

/// The warnings of a file that must check without errors.
pub(super) fn warnings_with(text: &str, schema: &FeatureSchema) -> Vec<Seen> {
    let (program, diags) = check_with(text, schema);
    assert!(program.is_some(), "expected a program for {text:?}, got {diags:#?}");
    diags.iter().map(|d| seen(text, d)).collect()
}

pub(super) fn warnings(text: &str) -> Vec<Seen> {
    warnings_with(text, &schema())
}

pub(super) fn codes(ws: &[Seen]) -> Vec<&'static str> {
    ws.iter().map(|w| w.code).collect()
}
