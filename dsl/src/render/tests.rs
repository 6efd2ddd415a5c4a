//! Rendering tests: snapshots (expect-test) of the parser's real diagnostics
//! on realistic bad reward files, and the layout rules (gutter, tabs, empty
//! and multi-line spans, notes, the summary line).

use expect_test::{Expect, expect};

use crate::diag::{Diagnostic, render, render_all};
use crate::parser::parse;
use crate::span::{SourceFile, Span};

/// Parses `text` as `rewards/bad.reward` and renders every diagnostic.
fn check(text: &str, expected: Expect) {
    let (_, diags) = parse(text);
    let source = SourceFile::new("rewards/bad.reward", text);
    expected.assert_eq(&render_all(&source, &diags));
}

#[test]
fn unclosed_paren_in_a_reward() {
    check(
        "# v3 with a typo\nreward = grade(word) * (c > 0\n",
        expect![[r#"
            rewards/bad.reward:2:24: error: unclosed `(`
              |
            2 | reward = grade(word) * (c > 0
              |                        ^
              = help: add `)` to close it: the statement ends at line 2, column 30

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn unclosed_call_does_not_swallow_the_next_line() {
    check(
        "reward = grade(word)\nadvantage = adv * sqrt(min(c / 4, 1)\ncheck advantage * adv >= 0\n",
        expect![[r#"
            rewards/bad.reward:2:23: error: unclosed `(`
              |
            2 | advantage = adv * sqrt(min(c / 4, 1)
              |                       ^
              = help: add `)` to close it: the statement ends at line 2, column 37

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn let_without_a_name() {
    check(
        "let = 3\n",
        expect![[r#"
            rewards/bad.reward:1:5: error: expected a name after `let`, found `=`
              |
            1 | let = 3
              |     ^
              = help: write `let NAME = ...`

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn unclosed_range() {
    check(
        "reward = grade(word)\ncheck reward in [0, 1\n",
        expect![[r#"
            rewards/bad.reward:2:22: error: expected `]` to close the range
              |
            2 | check reward in [0, 1
              |                      ^
              = help: a range is written `x in [lo, hi]`

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn double_equals_in_a_definition() {
    check(
        "reward == grade(word)\n",
        expect![[r#"
            rewards/bad.reward:1:8: error: expected `=` after `reward`, found `==`
              |
            1 | reward == grade(word)
              |        ^^
              = help: `==` compares two values; a definition uses a single `=`

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn single_equals_in_a_check() {
    check(
        "reward = grade(word)\ncheck c = 0\n",
        expect![[r#"
            rewards/bad.reward:2:9: error: `=` in an expression; did you mean `==`?
              |
            2 | check c = 0
              |         ^
              = help: `==` compares two values; a single `=` only defines a name at the start of a statement

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn chained_comparison() {
    check(
        "reward = grade(word)\ncheck 0 <= reward <= 1\n",
        expect![[r#"
            rewards/bad.reward:2:19: error: comparison operators cannot be chained
              |
            2 | check 0 <= reward <= 1
              |                   ^^
              = help: to test both, join two comparisons with `&&`: `0 <= reward && reward <= ...`

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn dangling_operator_and_a_bare_formula() {
    check(
        "reward = grade(word) *\ngrade(line) * mask(c > 0)\n",
        expect![[r#"
            rewards/bad.reward:1:23: error: expected an expression after `*`
              |
            1 | reward = grade(word) *
              |                       ^
              = help: a line break ends a statement; to continue the formula on the next line, wrap it in `( )`

            rewards/bad.reward:2:1: error: a statement must start with `let`, `param`, `check` or `NAME =`
              |
            2 | grade(line) * mask(c > 0)
              | ^^^^^
              = help: to make this formula the reward, write `reward = ...`

            error: 2 errors emitted
        "#]],
    );
}

#[test]
fn unknown_characters_and_lookalikes() {
    check(
        "reward = grade(word) × 2\nlet s = $c\n",
        expect![[r#"
            rewards/bad.reward:1:22: error: unknown character `×`
              |
            1 | reward = grade(word) × 2
              |                      ^
              = help: write `*` to multiply

            rewards/bad.reward:2:9: error: unknown character `$`
              |
            2 | let s = $c
              |         ^
              = help: names are written bare, e.g. `x` or `f(level)`

            error: 2 errors emitted
        "#]],
    );
}

#[test]
fn python_habits() {
    check(
        "param alpha = 0.5\nreward = alpha * x ** 2 and valid\ncheck reward >= 0 & reward <= 1\n",
        expect![[r#"
            rewards/bad.reward:2:20: error: `**` is not an operator
              |
            2 | reward = alpha * x ** 2 and valid
              |                    ^^
              = help: write `^` for a power, e.g. `x ^ 2`

            rewards/bad.reward:3:19: error: `&` is not an operator; did you mean `&&`?
              |
            3 | check reward >= 0 & reward <= 1
              |                   ^

            error: 2 errors emitted
        "#]],
    );
}

#[test]
fn param_with_a_formula_and_a_juxtaposed_number() {
    check(
        "param w = 1 / 3\nreward = 2c\n",
        expect![[r#"
            rewards/bad.reward:1:13: error: a `param` value must be a single number, found `/`
              |
            1 | param w = 1 / 3
              |             ^
              = help: a `param` is a plain number; use `let NAME = EXPR` for a formula

            rewards/bad.reward:2:10: error: invalid number `2c`
              |
            2 | reward = 2c
              |          ^^
              = help: to multiply, write `2 * c`

            error: 2 errors emitted
        "#]],
    );
}

#[test]
fn stray_closing_paren_and_missing_comma() {
    check(
        "reward = (grade(word) + grade(line)) / 2)\nadvantage = adv * clip(c / 4 0, 1)\n",
        expect![[r#"
            rewards/bad.reward:1:41: error: unexpected `)`
              |
            1 | reward = (grade(word) + grade(line)) / 2)
              |                                         ^
              = help: there is no `(` for it to close

            rewards/bad.reward:2:30: error: expected `,` or `)` after the argument, found `0`
              |
            2 | advantage = adv * clip(c / 4 0, 1)
              |                              ^
              = help: is a `,` missing between two arguments?

            error: 2 errors emitted
        "#]],
    );
}

#[test]
fn a_wrapped_formula_reports_on_the_right_line() {
    check(
        "let score = (grade(word)\n             + grade(line) +) / 2\nreward = score\n",
        expect![[r#"
            rewards/bad.reward:2:29: error: expected an expression after `+`, found `)`
              |
            2 |              + grade(line) +) / 2
              |                             ^

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn ten_lines_widen_the_gutter() {
    let text = format!("{}reward = f(a b)\n", "# filler\n".repeat(11));
    check(
        &text,
        expect![[r#"
            rewards/bad.reward:12:14: error: expected `,` or `)` after the argument, found `b`
               |
            12 | reward = f(a b)
               |              ^
               = help: is a `,` missing between two arguments?

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn tabs_expand_in_the_line_and_under_it() {
    let source = SourceFile::new("t.reward", "\treward =\t$\n");
    let d = Diagnostic::error("x", Span::new(10, 11), "unknown character `$`");
    expect![[r#"
        t.reward:1:11: error: unknown character `$`
          |
        1 |     reward =    $
          |                 ^
    "#]]
    .assert_eq(&render(&source, &d));
}

/// A crafted file cannot write terminal escape sequences through the quoted
/// line: ESC, NUL, DEL and C1 controls are escaped, and the carets count the
/// escaped width, so they still sit under the span.
#[test]
fn control_characters_are_escaped_and_carets_follow_them() {
    let text = "reward = \u{1b}[2J\0 + \u{9b}31m + $ # \u{7f}\n";
    let at = text.find('$').expect("a dollar");
    let source = SourceFile::new("t.reward", text);
    let d = Diagnostic::error("x", Span::new(at, at + 1), "unknown character `$`")
        .with_help("the line held \u{1b}[31m, shown escaped");
    let out = render(&source, &d);
    expect![[r#"
        t.reward:1:25: error: unknown character `$`
          |
        1 | reward = \x1b[2J\x00 + \u{9b}31m + $ # \x7f
          |                                    ^
          = help: the line held \x1b[31m, shown escaped
    "#]]
    .assert_eq(&out);
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
}

/// The parser's own diagnostic about a control character quotes it escaped.
#[test]
fn a_stray_escape_character_is_reported_escaped() {
    check(
        "reward = grade(word) \u{1b}[31m\n",
        expect![[r#"
            rewards/bad.reward:1:22: error: unknown character `\u{1b}`
              |
            1 | reward = grade(word) \x1b[31m
              |                      ^^^^

            error: 1 error emitted
        "#]],
    );
}

#[test]
fn empty_multiline_and_out_of_range_spans() {
    let source = SourceFile::new("t.reward", "let é = (a +\r\n  b)\n");
    // An empty span at the end of a CRLF line still gets one caret.
    let end = Diagnostic::error("x", Span::new(12, 12), "here");
    // A span over two lines is underlined to the end of the first.
    let multi = Diagnostic::warning("y", Span::new(9, 18), "wraps").with_note("first\nsecond");
    // A span past the end (or inside a character) is clamped, not trusted.
    let wild = Diagnostic::error("z", Span::new(5, 99), "inside é");
    let all = [end.clone(), multi.clone(), wild.clone()].map(|d| render(&source, &d)).join("");
    expect![[r#"
        t.reward:1:12: error: here
          |
        1 | let é = (a +
          |            ^
        t.reward:1:9: warning: wraps
          |
        1 | let é = (a +
          |         ^^^^
          = note: first
                  second
        t.reward:1:5: error: inside é
          |
        1 | let é = (a +
          |     ^^^^^^^^
    "#]]
    .assert_eq(&all);
}

#[test]
fn summary_counts_and_order() {
    let source = SourceFile::new("t.reward", "a\nb\n");
    let late = Diagnostic::warning("w", Span::new(2, 3), "second line");
    let early = Diagnostic::error("e", Span::new(0, 1), "first line");
    let both = render_all(&source, &[late.clone(), early.clone()]);
    assert!(both.find("first line") < both.find("second line"), "{both}");
    assert!(both.ends_with("\nerror: 1 error, 1 warning emitted\n"), "{both}");
    assert!(render_all(&source, &[late.clone(), late]).ends_with("\nwarning: 2 warnings emitted\n"));
    assert_eq!(render_all(&source, &[]), "");
}
