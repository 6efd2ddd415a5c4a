//! Statements: `NAME = E`, `let NAME = E`, `param NAME = NUMBER`, `check E`,
//! `alert E [for N steps] : "message"`.
//!
//! A statement that fails still yields an item where its name is known
//! (with an [`ExprKind::Error`] value), so that later uses of the name do not
//! cascade into "unknown name" errors. A `param` whose value is not a number
//! becomes a `let` bound to an `Error` expression for the same reason.

use super::cx::{Cx, SYNTAX};
use super::lex::{describe, is_keyword, keyword, name, ws};
use crate::ast::{Count, Expr, ExprKind, Ident, Item, ItemKind};
use crate::diag::Diagnostic;
use crate::span::Span;

/// Whether `i` starts with the statement keyword `alert`: the word and a
/// condition after it, not `alert = ...` (which is a definition with an
/// unknown name). `alert` is not reserved, so no existing file breaks.
fn alert_keyword(i: &str) -> Option<&str> {
    let k = keyword(i, "alert")?;
    let j = ws(k);
    (!j.is_empty() && (!j.starts_with('=') || j.starts_with("=="))).then_some(k)
}

/// What one statement produced.
pub(crate) type Outcome = (Option<Item>, Option<Diagnostic>);

impl<'a> Cx<'a> {
    /// Parses the statement whose text is `self.text[start..self.end]`.
    pub fn statement(&self, start: usize) -> Outcome {
        let i = &self.text[start..self.end];
        if let Some(k) = keyword(i, "let") {
            return match self.binding_name(k, "let") {
                Ok((k, name)) => self.definition(i, name.clone(), k, &format!("let {}", name.name), true),
                Err(d) => (None, Some(d)),
            };
        }
        if let Some(k) = keyword(i, "param") {
            return self.param(i, k);
        }
        if let Some(k) = keyword(i, "check") {
            return match self.full_expr(k, "a condition after `check`") {
                Ok(cond) => {
                    let span = self.span(i, 0).to(cond.span);
                    (Some(Item { kind: ItemKind::Check { cond }, span }), None)
                }
                Err(d) => {
                    let cond = self.error_expr(k);
                    let span = self.span(i, 0).to(cond.span);
                    (Some(Item { kind: ItemKind::Check { cond }, span }), Some(d))
                }
            };
        }
        if let Some(k) = alert_keyword(i) {
            return self.alert(i, k);
        }
        if let Ok((k, word)) = name(i)
            && !is_keyword(word)
            && !k.starts_with('.')
        {
            let ident = Ident { name: word.to_string(), span: self.span(i, word.len()) };
            let j = ws(k);
            let is_output = matches!(word, "reward" | "adv" | "advantage");
            // `reward == ...` is a definition with a typo, not a bare comparison.
            if j.starts_with('=') || is_output {
                return self.definition(i, ident, k, word, false);
            }
        }
        (None, Some(self.bad_start(i)))
    }

    /// The name after `let` or `param`.
    fn binding_name(&self, k: &'a str, keyword_text: &str) -> Result<(&'a str, Ident), Diagnostic> {
        let j = ws(k);
        match name(j) {
            Ok((_, word)) if is_keyword(word) => Err(Diagnostic::error(
                SYNTAX,
                self.span(j, word.len()),
                format!("`{word}` is a keyword and cannot be used as a name"),
            )),
            Ok((rest, word)) => Ok((rest, Ident { name: word.to_string(), span: self.span(j, word.len()) })),
            Err(_) => {
                let e = self.expected(k, &format!("a name after `{keyword_text}`"));
                let d = self.to_diag(e);
                Err(d.with_help(format!("write `{keyword_text} NAME = ...`")))
            }
        }
    }

    /// `= EXPR` after a name; `what` is how the message quotes the head.
    fn definition(&self, stmt: &'a str, name: Ident, k: &'a str, what: &str, is_let: bool) -> Outcome {
        let make = |name: Ident, value: Expr| {
            let span = self.span(stmt, 0).to(name.span).to(value.span);
            let kind = if is_let { ItemKind::Let { name, value } } else { ItemKind::Def { name, value } };
            Some(Item { kind, span })
        };
        let j = ws(k);
        if let Some(value_text) = j.strip_prefix('=').filter(|v| !v.starts_with('=')) {
            return match self.full_expr(value_text, "an expression after `=`") {
                Ok(value) => (make(name, value), None),
                Err(d) => (make(name, self.error_expr(value_text)), Some(d)),
            };
        }
        let d = if j.starts_with("==") {
            Diagnostic::error(SYNTAX, self.span(j, 2), format!("expected `=` after `{what}`, found `==`"))
                .with_help("`==` compares two values; a definition uses a single `=`")
        } else {
            self.to_diag(self.expected(k, &format!("`=` after `{what}`")))
        };
        (make(name, self.error_expr(k)), Some(d))
    }

    /// `param NAME = [-] NUMBER`; `k` follows the keyword.
    fn param(&self, stmt: &'a str, k: &'a str) -> Outcome {
        let (k, name) = match self.binding_name(k, "param") {
            Ok(found) => found,
            Err(d) => return (None, Some(d)),
        };
        let help = "a `param` is a plain number; use `let NAME = EXPR` for a formula";
        let as_let = |name: Ident, rest: &'a str, d: Diagnostic| {
            let value = self.error_expr(rest);
            let span = self.span(stmt, 0).to(value.span);
            (Some(Item { kind: ItemKind::Let { name, value }, span }), Some(d))
        };
        let j = ws(k);
        let Some(value_text) = j.strip_prefix('=').filter(|v| !v.starts_with('=')) else {
            let d = self.to_diag(self.expected(k, &format!("`=` after `param {}`", name.name)));
            return as_let(name, k, d);
        };
        let v = ws(value_text);
        let (negative, digits) = match v.strip_prefix('-') {
            Some(rest) => (true, ws(rest)),
            None => (false, v),
        };
        let starts_number = digits.starts_with(|c: char| c.is_ascii_digit())
            || (digits.starts_with('.') && digits[1..].starts_with(|c: char| c.is_ascii_digit()));
        if !starts_number {
            let what = if negative { "a number after `-`" } else { "a number after `=`" };
            let before = if negative { &v[1..] } else { value_text };
            let d = self.to_diag(self.expected(before, what));
            return as_let(name, value_text, if d.help.is_none() { d.with_help(help) } else { d });
        }
        let (rest, (magnitude, number_span)) = match self.literal(digits) {
            Ok(found) => found,
            Err(e) => return as_let(name, value_text, self.to_diag(e)),
        };
        let trailing = ws(rest);
        if !trailing.is_empty() {
            let d = Diagnostic::error(
                SYNTAX,
                self.token(trailing),
                format!("a `param` value must be a single number, found {}", describe(trailing)),
            )
            .with_help(help);
            return as_let(name, value_text, d);
        }
        let value_span = self.span(v, 0).to(number_span);
        let value = if negative { -magnitude } else { magnitude };
        let span = self.span(stmt, 0).to(value_span);
        (Some(Item { kind: ItemKind::Param { name, value, value_span }, span }), None)
    }

    /// `alert COND [for N steps] : "message"`; `k` follows the keyword. A
    /// failed alert keeps no item: nothing else can refer to it.
    fn alert(&self, stmt: &'a str, k: &'a str) -> Outcome {
        match self.alert_parts(k) {
            Ok((cond, steps, message, message_span)) => {
                let span = self.span(stmt, 0).to(message_span);
                (Some(Item { kind: ItemKind::Alert { cond, steps, message, message_span }, span }), None)
            }
            Err(d) => (None, Some(d)),
        }
    }

    fn alert_parts(&self, k: &'a str) -> Result<(Expr, Option<Count>, String, Span), Diagnostic> {
        const FORM: &str = "write `alert CONDITION : \"message\"`, or `alert CONDITION for N steps : \"message\"`";
        let (rest, cond) = match self.expr(k, 0) {
            Ok((rest, sub)) => (rest, *sub.expr),
            Err(nom::Err::Error(_)) => {
                return Err(self.to_diag(self.expected(k, "a condition after `alert`")).with_help(FORM));
            }
            Err(e) => return Err(self.to_diag(e)),
        };
        let mut j = ws(rest);
        let mut steps = None;
        if let Some(after_for) = super::lex::keyword(j, "for") {
            let n = ws(after_for);
            let digits = n.bytes().take_while(u8::is_ascii_digit).count();
            let value = n[..digits].parse::<u32>().ok().filter(|&v| v >= 1);
            let Some(value) = value else {
                let d = if digits == 0 {
                    self.to_diag(self.expected(after_for, "a whole number of steps after `for`"))
                } else {
                    Diagnostic::error(SYNTAX, self.span(n, digits), "the number of steps must be a whole number from 1")
                };
                return Err(d.with_help(FORM));
            };
            let count_span = self.span(n, digits);
            let unit = ws(&n[digits..]);
            let Some(after_unit) = super::lex::keyword(unit, "steps").or_else(|| super::lex::keyword(unit, "step"))
            else {
                return Err(self.found(unit, "`steps` after the number").with_help(FORM));
            };
            steps = Some(Count { value, span: count_span });
            j = ws(after_unit);
        }
        let Some(after_colon) = j.strip_prefix(':') else {
            let what = if steps.is_some() {
                "`:` and a quoted message"
            } else {
                "an operator, `for N steps`, or `:` and a quoted message"
            };
            let d = if j.is_empty() {
                Diagnostic::error(SYNTAX, self.span(j, 0), format!("expected {what} after the alert's condition"))
            } else {
                self.found(j, what)
            };
            return Err(d.with_help(FORM));
        };
        let q = ws(after_colon);
        let (message, len) = self.string(q).map_err(|d| d.with_help(FORM))?;
        let message_span = self.span(q, len);
        let trailing = ws(&q[len..]);
        if !trailing.is_empty() {
            return Err(Diagnostic::error(
                SYNTAX,
                self.token(trailing),
                format!("expected the end of the statement after the message, found {}", describe(trailing)),
            ));
        }
        Ok((cond, steps, message, message_span))
    }

    /// "expected WHAT, found TOKEN" at `j` (past whitespace), where `:` and
    /// `"` are tokens, not unknown characters.
    fn found(&self, j: &'a str, what: &str) -> Diagnostic {
        if j.is_empty() {
            return Diagnostic::error(SYNTAX, self.span(j, 0), format!("expected {what}"));
        }
        Diagnostic::error(SYNTAX, self.token(j), format!("expected {what}, found {}", describe(j)))
    }

    /// A `"..."` string at the start of `q` (`\"` and `\\` escape a quote and
    /// a backslash): its content and its length in bytes. Control characters
    /// are refused, since messages are printed to terminals.
    fn string(&self, q: &'a str) -> Result<(String, usize), Diagnostic> {
        let Some(body) = q.strip_prefix('"') else {
            return Err(if q.is_empty() {
                Diagnostic::error(SYNTAX, self.span(q, 0), "expected a quoted message after `:`")
            } else {
                self.found(q, "a quoted message")
            });
        };
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => return Ok((out, 1 + at + 1)),
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    Some((e_at, e)) => {
                        return Err(Diagnostic::error(
                            SYNTAX,
                            self.span(&body[at..], 1 + e.len_utf8()).to(self.span(&body[e_at..], e.len_utf8())),
                            format!("unknown escape `\\{}` in a message", e.escape_default()),
                        )
                        .with_help("a message may escape only `\\\"` and `\\\\`"));
                    }
                    None => break,
                },
                c if c.is_control() => {
                    return Err(Diagnostic::error(
                        "unknown-character",
                        self.span(&body[at..], c.len_utf8()),
                        format!("control character `{}` in a message", c.escape_unicode()),
                    )
                    .with_help(
                        "messages are printed to terminals; write them on one line, without control characters",
                    ));
                }
                c => out.push(c),
            }
        }
        Err(Diagnostic::error("unclosed-delimiter", self.span(q, 1), "unclosed `\"`")
            .with_help("end the message with `\"` on the same line"))
    }

    /// A whole expression that must run to the end of the statement.
    /// `what` names the expression for "expected ..." when none is there.
    pub fn full_expr(&self, i: &'a str, what: &str) -> Result<Expr, Diagnostic> {
        match self.expr(i, 0) {
            Ok((rest, sub)) => {
                let j = ws(rest);
                if j.is_empty() {
                    return Ok(*sub.expr);
                }
                let stray = |c: char, open: char| {
                    Diagnostic::error(SYNTAX, self.span(j, 1), format!("unexpected `{c}`"))
                        .with_help(format!("there is no `{open}` for it to close"))
                };
                Err(match j.as_bytes()[0] {
                    b')' => stray(')', '('),
                    b']' => stray(']', '['),
                    _ => self.to_diag(self.unexpected(j, "an operator or the end of the statement")),
                })
            }
            Err(nom::Err::Error(_)) => Err(self.to_diag(self.expected(i, what))),
            Err(e) => Err(self.to_diag(e)),
        }
    }

    /// The `Error` expression standing for everything from `i` to the end
    /// of the statement (an empty span at the end if nothing is left).
    fn error_expr(&self, i: &'a str) -> Expr {
        let j = ws(i);
        let start = if j.is_empty() { self.pos(i) } else { self.pos(j) };
        Expr { kind: ExprKind::Error, span: Span::new(start, self.end) }
    }

    /// A line that starts like no statement.
    fn bad_start(&self, i: &'a str) -> Diagnostic {
        if let Some(d) = self.unknown_char(i) {
            return d;
        }
        let first = self.token(i);
        let d = Diagnostic::error(SYNTAX, first, "a statement must start with `let`, `param`, `check` or `NAME =`");
        let word = &self.text[first.range()];
        let lower = word.to_ascii_lowercase();
        if matches!(lower.as_str(), "let" | "param" | "check") {
            d.with_help(format!("keywords are lower-case: `{lower}`"))
        } else if is_keyword(word) {
            d.with_help(format!("`{word}` is a keyword and cannot start a statement"))
        } else if word.starts_with(|c: char| c == '(' || c == '-' || c == '!' || c == '.' || c.is_ascii_alphanumeric())
        {
            d.with_help("to make this formula the reward, write `reward = ...`")
        } else {
            d
        }
    }
}
