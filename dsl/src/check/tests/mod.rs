//! Tests of the checker: helpers that
//! parse and check a text, and one module per concern.

mod alerts;
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
use crate::schema::{FeatureDecl, FeatureSchema};

pub(super) use crate::testing::{SAMPLES, sample, schema};

/// The schema plus a per-group feature, for the centering lint.
pub(super) fn schema_with_difficulty() -> FeatureSchema {
    schema().with(FeatureDecl::number("difficulty", Interval::UNIT, "task difficulty").per_group())
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
