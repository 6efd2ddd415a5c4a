//! Robustness properties of the parser on hostile input: arbitrary strings
//! and "token soups" (random sequences of the language's tokens and
//! near-tokens). No panic; an input either parses cleanly (no error
//! diagnostic, no `Error` node) or yields at least one error diagnostic;
//! every span lies within the input on character boundaries; every tree is
//! within the height limit; and whatever parses cleanly survives a
//! print/parse round trip.

use proptest::prelude::*;

use super::{MAX_HEIGHT, parse, parse_expr};
use crate::ast::{Expr, ExprKind, File, ItemKind};
use crate::diag::Diagnostic;
use crate::printer;
use crate::span::Span;

/// Tokens, near-tokens and layout the soups are made of.
const TOKENS: &[&str] = &[
    "reward",
    "adv",
    "advantage",
    "let",
    "param",
    "check",
    "in",
    "true",
    "false",
    "x",
    "c",
    "grade",
    "file",
    "group.mean",
    "batch.count",
    "group.",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "^",
    "!",
    "&&",
    "||",
    "&",
    "|",
    "**",
    "=>",
    "1",
    "0.5",
    ".5",
    "5.",
    "1e-4",
    "2.5E+3",
    "1e",
    "2c",
    "1e999",
    ".",
    "#",
    "# note\n",
    "\n",
    "\r\n",
    "\r",
    " ",
    "\t",
    "$",
    "@",
    "×",
    "é",
    "🎉",
    "\u{0}",
    ";",
];

fn soup() -> impl Strategy<Value = String> {
    proptest::collection::vec((proptest::sample::select(TOKENS), any::<bool>()), 0..40).prop_map(|parts| {
        parts.into_iter().map(|(tok, spaced)| if spaced { format!("{tok} ") } else { tok.to_string() }).collect()
    })
}

/// A printed random program with a few random edits: near-valid input, the
/// kind a user produces, which reaches deep into the grammar.
fn mutated() -> impl Strategy<Value = String> {
    let edit = (any::<proptest::sample::Index>(), 0usize..3, proptest::sample::select(TOKENS), 0u8..3);
    (proptest::collection::vec(crate::printer::tests::item(), 1..4), proptest::collection::vec(edit, 0..3)).prop_map(
        |(items, edits)| {
            let mut text = printer::print(&File { items });
            for (at, len, tok, kind) in edits {
                let mut p = at.index(text.len() + 1);
                while !text.is_char_boundary(p) {
                    p -= 1;
                }
                let mut end = (p + len).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                match kind {
                    0 => text.replace_range(p..end, ""),
                    1 => text.insert_str(p, tok),
                    _ => text.replace_range(p..end, tok),
                }
            }
            text
        },
    )
}

/// A soup that starts like a statement, so the expression grammar gets exercised.
fn statement_soup() -> impl Strategy<Value = String> {
    (prop_oneof![Just("reward = "), Just("check "), Just("let s = "), Just("param p = ")], soup())
        .prop_map(|(head, body)| format!("{head}{body}"))
}

fn has_error_node(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Error => true,
        ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Name(_) => false,
        ExprKind::Unary { expr, .. } => has_error_node(expr),
        ExprKind::Binary { lhs, rhs, .. } => has_error_node(lhs) || has_error_node(rhs),
        ExprKind::Call { args, named, .. } => args.iter().chain(named.iter().map(|n| &n.value)).any(has_error_node),
        ExprKind::In { expr, lo, hi } => has_error_node(expr) || has_error_node(lo) || has_error_node(hi),
    }
}

fn height(e: &Expr) -> usize {
    1 + match &e.kind {
        ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Name(_) | ExprKind::Error => 0,
        ExprKind::Unary { expr, .. } => height(expr),
        ExprKind::Binary { lhs, rhs, .. } => height(lhs).max(height(rhs)),
        ExprKind::Call { args, named, .. } => {
            args.iter().chain(named.iter().map(|n| &n.value)).map(height).max().unwrap_or(0)
        }
        ExprKind::In { expr, lo, hi } => height(expr).max(height(lo)).max(height(hi)),
    }
}

fn check_span(text: &str, span: Span, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(span.start <= span.end && span.end as usize <= text.len(), "{what} span {span:?} outside {text:?}");
    prop_assert!(
        text.is_char_boundary(span.start as usize) && text.is_char_boundary(span.end as usize),
        "{what} span {span:?} not on char boundaries of {text:?}"
    );
    Ok(())
}

fn exprs(file: &File) -> Vec<&Expr> {
    file.items
        .iter()
        .filter_map(|i| match &i.kind {
            ItemKind::Def { value, .. } | ItemKind::Let { value, .. } => Some(value),
            ItemKind::Check { cond } | ItemKind::Alert { cond, .. } => Some(cond),
            ItemKind::Param { .. } => None,
        })
        .collect()
}

/// Every property the parser promises, on one input.
fn check_file(text: &str) -> Result<(), TestCaseError> {
    let (file, diags) = parse(text);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let error_nodes = exprs(&file).into_iter().any(has_error_node);
    prop_assert!(errors > 0 || !error_nodes, "Error node without an error diagnostic in {text:?}");
    for d in &diags {
        check_span(text, d.span, &d.message)?;
    }
    for item in &file.items {
        check_span(text, item.span, "item")?;
    }
    for e in exprs(&file) {
        check_span(text, e.span, "expression")?;
        prop_assert!(height(e) <= MAX_HEIGHT);
    }
    if errors == 0 {
        // A clean parse is a tree the printer must reproduce.
        let printed = printer::print(&file);
        let (again, diags) = parse(&printed);
        prop_assert!(diags.is_empty(), "{diags:?} reprinting {text:?} as {printed:?}");
        prop_assert_eq!(again.without_spans(), file.without_spans());
    }
    Ok(())
}

fn check_expr(text: &str) -> Result<(), TestCaseError> {
    let (expr, diags): (Option<Expr>, Vec<Diagnostic>) = parse_expr(text);
    prop_assert_eq!(expr.is_some(), diags.is_empty());
    for d in &diags {
        check_span(text, d.span, &d.message)?;
    }
    if let Some(e) = expr {
        prop_assert!(!has_error_node(&e));
        check_span(text, e.span, "expression")?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings_never_break_the_parser(text in any::<String>()) {
        check_file(&text)?;
        check_expr(&text)?;
    }

    #[test]
    fn printable_ascii_never_breaks_the_parser(text in "[ -~\n\t]{0,80}") {
        check_file(&text)?;
        check_expr(&text)?;
    }

    #[test]
    fn token_soups_never_break_the_parser(text in soup()) {
        check_file(&text)?;
        check_expr(&text)?;
    }

    #[test]
    fn statement_soups_never_break_the_parser(text in statement_soup()) {
        check_file(&text)?;
    }

    #[test]
    fn edited_programs_never_break_the_parser(text in mutated()) {
        check_file(&text)?;
    }
}

/// The generators must reach both sides of the property (clean parses and
/// errors), or the tests above would hold vacuously.
#[test]
fn generators_reach_clean_and_broken_inputs() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let soups = {
        let s = statement_soup();
        (0..1000).filter(|_| parse(&s.new_tree(&mut runner).expect("a soup").current()).1.is_empty()).count()
    };
    let edited = {
        let s = mutated();
        (0..1000).filter(|_| parse(&s.new_tree(&mut runner).expect("a program").current()).1.is_empty()).count()
    };
    assert!(soups > 0, "no statement soup parsed");
    assert!((100..900).contains(&edited), "{edited} of 1000 edited programs parsed");
}
