//! Expressions: one method per precedence level, lowest first, as
//! documented on [`crate::ast::BinOp::precedence`].
//!
//! Conventions shared by every level:
//! - a level takes input that may start with whitespace and returns the
//!   rest right after its last token (trailing whitespace is left for the
//!   caller, so "expected ..." carets can sit right after that token);
//! - `Err::Error` means "no expression starts here" and lets the caller say
//!   what it needed; `Err::Failure` carries a finished diagnostic (nom's
//!   `cut`, raised once a token has committed the parser);
//! - `depth` counts the recursive constructs entered (parentheses, calls,
//!   ranges, unary operands, exponents) and is capped at [`MAX_DEPTH`], so
//!   the parser's own recursion is bounded; every result carries its tree
//!   height, capped at [`MAX_HEIGHT`] (long operator chains are built by
//!   loops, not recursion), so later recursive passes are bounded too.
//!
//! Stack discipline: one level of parentheses puts every precedence level's
//! frame on the stack (measured: 6 to 8 KiB per level in an unoptimised
//! build, 1 to 2 KiB optimised), so those frames are kept small and
//! `MAX_DEPTH` (128 levels, under 1 MiB unoptimised) fits a 2 MiB test
//! thread with room to spare.
//! Results are boxed (`Sub` is two words), the recursive calls are plain
//! method calls rather than nom combinators wrapping closures, `?` is
//! spelled out (its `Try` temporaries are not free at `opt-level = 0`), and
//! every diagnostic is built in a separate `#[cold]` function so its
//! temporaries never sit in a recursive frame.

use super::cx::{Cx, SYNTAX};
use super::error::{SyntaxError, failure, no_match};
use super::lex::{PResult, comparison, dotted_name, is_keyword, keyword, number_tail, number_text, ws};
use super::{MAX_DEPTH, MAX_HEIGHT};
use crate::ast::{BinOp, Expr, ExprKind, Ident, NamedArg, UnOp};
use crate::diag::Diagnostic;
use crate::span::Span;

/// A parsed expression and the height of its tree (an atom has height 1).
#[derive(Debug)]
pub(crate) struct Sub {
    pub expr: Box<Expr>,
    pub height: usize,
}

impl Sub {
    fn leaf(kind: ExprKind, span: Span) -> Sub {
        Sub { expr: Box::new(Expr { kind, span }), height: 1 }
    }
}

type Fail = nom::Err<SyntaxError>;

/// `?` without the `Try` machinery, whose temporaries bloat unoptimised
/// frames on the recursive path.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}

/// A binary operator token: the operator and its length in bytes.
type OpToken = Option<(BinOp, usize)>;

fn or_op(j: &str) -> OpToken {
    j.starts_with("||").then_some((BinOp::Or, 2))
}

fn and_op(j: &str) -> OpToken {
    j.starts_with("&&").then_some((BinOp::And, 2))
}

fn add_op(j: &str) -> OpToken {
    match j.as_bytes().first() {
        Some(b'+') => Some((BinOp::Add, 1)),
        Some(b'-') => Some((BinOp::Sub, 1)),
        _ => None,
    }
}

fn mul_op(j: &str) -> OpToken {
    match j.as_bytes().first() {
        Some(b'*') => Some((BinOp::Mul, 1)),
        Some(b'/') => Some((BinOp::Div, 1)),
        _ => None,
    }
}

impl<'a> Cx<'a> {
    /// A whole expression.
    pub fn expr(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        self.or(i, depth)
    }

    /// `and { "||" and }`
    fn or(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        self.left_assoc(i, depth, Self::and, or_op)
    }

    /// `cmp { "&&" cmp }`
    fn and(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        self.left_assoc(i, depth, Self::cmp, and_op)
    }

    /// `add [ CMP add | "in" "[" expr "," expr "]" ]`, non-associative: a
    /// second comparison right after the first is an error.
    fn cmp(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        let (i, lhs) = tri!(self.add(i, depth));
        let j = ws(i);
        if let Ok((k, op)) = comparison(j) {
            let (k, rhs) = tri!(self.operand(self.add(k, depth), k, op.symbol()));
            let mid = rhs.expr.span;
            let result = tri!(self.binary(op, lhs, rhs, j));
            tri!(self.no_chain(k, &result.expr, op.symbol(), mid));
            return Ok((k, result));
        }
        if let Some(k) = keyword(j, "in") {
            let (k, result) = tri!(self.range(k, lhs, j, depth));
            tri!(self.no_chain(k, &result.expr, "in", result.expr.span));
            return Ok((k, result));
        }
        Ok((i, lhs))
    }

    /// `mul { ("+" | "-") mul }`
    fn add(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        self.left_assoc(i, depth, Self::mul, add_op)
    }

    /// `unary { ("*" | "/") unary }`
    fn mul(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        self.left_assoc(i, depth, Self::unary, mul_op)
    }

    /// `("-" | "!") unary | pow`
    fn unary(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        let j = ws(i);
        let op = match j.as_bytes() {
            [b'-', ..] => UnOp::Neg,
            // `!=` is never a prefix: let the caller report it as found.
            [b'!', next, ..] if *next != b'=' => UnOp::Not,
            [b'!'] => UnOp::Not,
            _ => return self.pow(j, depth),
        };
        let depth = tri!(self.enter(depth, j));
        let k = &j[1..];
        let symbol = if op == UnOp::Neg { "-" } else { "!" };
        let (k, operand) = tri!(self.operand(self.unary(k, depth), k, symbol));
        if operand.height >= MAX_HEIGHT {
            return Err(self.too_long(self.span(j, 1)));
        }
        let span = self.span(j, 1).to(operand.expr.span);
        let expr = Box::new(Expr { kind: ExprKind::Unary { op, expr: operand.expr }, span });
        Ok((k, Sub { expr, height: operand.height + 1 }))
    }

    /// `atom [ "^" unary ]`: right-associative, and the exponent may carry
    /// its own sign (`2^-1`).
    fn pow(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        let (i, base) = tri!(self.atom(i, depth));
        let j = ws(i);
        if !j.starts_with('^') {
            return Ok((i, base));
        }
        let depth = tri!(self.enter(depth, j));
        let k = &j[1..];
        let (k, exponent) = tri!(self.operand(self.unary(k, depth), k, "^"));
        Ok((k, tri!(self.binary(BinOp::Pow, base, exponent, j))))
    }

    /// A number, `true`/`false`, a name, a call, or a parenthesised expression.
    fn atom(&self, i: &'a str, depth: usize) -> PResult<'a, Sub> {
        let j = ws(i);
        let Some(&first) = j.as_bytes().first() else {
            return Err(no_match(j));
        };
        if first.is_ascii_digit() || (first == b'.' && j.as_bytes().get(1).is_some_and(u8::is_ascii_digit)) {
            return self.number(j);
        }
        if first == b'(' {
            return self.paren(j, depth);
        }
        let Ok((k, word)) = dotted_name(j) else {
            return Err(no_match(j));
        };
        let span = self.span(j, word.len());
        match word {
            "true" => return Ok((k, Sub::leaf(ExprKind::Bool(true), span))),
            "false" => return Ok((k, Sub::leaf(ExprKind::Bool(false), span))),
            w if is_keyword(w) => return Err(no_match(j)),
            _ => {}
        }
        let after = ws(k);
        if after.starts_with('(') {
            return self.call(after, Ident { name: word.to_string(), span }, depth);
        }
        // `step.kl` names a step metric (only alerts may read one); every
        // other dotted name is a reduction and must be called.
        let metric = word.strip_prefix(crate::schema::METRIC_PREFIX).is_some_and(|m| !m.contains('.'));
        if (word.contains('.') && !metric) || k.starts_with('.') {
            return Err(self.bad_dotted(word, span, k));
        }
        Ok((k, Sub::leaf(ExprKind::Name(Ident { name: word.to_string(), span }), span)))
    }

    /// `"(" expr ")"`; `j` starts at the `(`. The tree keeps no node for
    /// the parentheses: the span of what they enclose widens instead.
    fn paren(&self, j: &'a str, depth: usize) -> PResult<'a, Sub> {
        let depth = tri!(self.enter(depth, j));
        let k = &j[1..];
        let (k, mut inner) = match self.expr(k, depth) {
            Err(nom::Err::Error(_)) => return Err(self.empty_paren(j, k)),
            other => other?,
        };
        let k = tri!(self.close(k, j, ')', "`)` or an operator"));
        inner.expr.span = Span::new(self.pos(j), self.pos(k));
        Ok((k, inner))
    }

    /// The argument list of a call; `i` starts at its `(`. Positional
    /// arguments come first, then keyword arguments `NAME = expr`.
    fn call(&self, i: &'a str, callee: Ident, depth: usize) -> PResult<'a, Sub> {
        let depth = tri!(self.enter(depth, i));
        let mut k = &i[1..];
        let mut args = Vec::new();
        let mut named: Vec<NamedArg> = Vec::new();
        let mut height = 1;
        if let Some(rest) = ws(k).strip_prefix(')') {
            k = rest;
        } else {
            let mut after = "(";
            loop {
                let rest = if let Some((name, value_at)) = self.keyword(k) {
                    let (rest, value) = tri!(self.operand(self.expr(value_at, depth), value_at, "="));
                    height = height.max(value.height + 1);
                    named.push(NamedArg { name, value: *value.expr });
                    rest
                } else {
                    let (rest, arg) = tri!(self.operand(self.expr(k, depth), k, after));
                    if let Some(first) = named.first() {
                        return Err(self.positional_after_keyword(arg.expr.span, &first.name.name));
                    }
                    height = height.max(arg.height + 1);
                    args.push(*arg.expr);
                    rest
                };
                if let Some(next) = ws(rest).strip_prefix(',') {
                    k = next;
                    after = ",";
                    continue;
                }
                k = tri!(self.close(rest, i, ')', "`,` or `)` after the argument"));
                break;
            }
        }
        if height > MAX_HEIGHT {
            return Err(self.too_long(self.span(i, 1)));
        }
        let span = Span::new(callee.span.start as usize, self.pos(k));
        Ok((k, Sub { expr: Box::new(Expr { kind: ExprKind::Call { callee, args, named }, span }), height }))
    }

    /// `NAME =` (a single `=`) at the start of an argument: the keyword and
    /// where its value starts.
    fn keyword(&self, k: &'a str) -> Option<(Ident, &'a str)> {
        let j = ws(k);
        let (rest, word) = dotted_name(j).ok()?;
        if word.contains('.') || is_keyword(word) {
            return None;
        }
        let after = ws(rest);
        let value = after.strip_prefix('=').filter(|v| !v.starts_with('='))?;
        Some((Ident { name: word.to_string(), span: self.span(j, word.len()) }, value))
    }

    /// The `[lo, hi]` after `in`; `in_at` starts at the `in`.
    fn range(&self, i: &'a str, expr: Sub, in_at: &'a str, depth: usize) -> PResult<'a, Sub> {
        let j = ws(i);
        let Some(k) = j.strip_prefix('[') else {
            return Err(self.range_error(i, RangePart::Open));
        };
        let depth = tri!(self.enter(depth, j));
        let (k, lo) = tri!(self.operand(self.expr(k, depth), k, "["));
        let Some(k) = ws(k).strip_prefix(',') else {
            return Err(self.range_error(k, RangePart::Comma));
        };
        let (k, hi) = tri!(self.operand(self.expr(k, depth), k, ","));
        let Some(end) = ws(k).strip_prefix(']') else {
            return Err(self.range_error(k, RangePart::Close));
        };
        let height = expr.height.max(lo.height).max(hi.height) + 1;
        if height > MAX_HEIGHT {
            return Err(self.too_long(self.span(in_at, 2)));
        }
        let span = Span::new(expr.expr.span.start as usize, self.pos(end));
        let kind = ExprKind::In { expr: expr.expr, lo: lo.expr, hi: hi.expr };
        Ok((end, Sub { expr: Box::new(Expr { kind, span }), height }))
    }

    /// `next { OP next }` for the left-associative levels.
    fn left_assoc(
        &self,
        i: &'a str,
        depth: usize,
        next: fn(&Self, &'a str, usize) -> PResult<'a, Sub>,
        op_at: fn(&str) -> OpToken,
    ) -> PResult<'a, Sub> {
        let (mut i, mut lhs) = tri!(next(self, i, depth));
        loop {
            let j = ws(i);
            let Some((op, len)) = op_at(j) else { break };
            if op == BinOp::Mul && j.starts_with("**") {
                return Err(self.double_star(j));
            }
            let k = &j[len..];
            let (k, rhs) = tri!(self.operand(next(self, k, depth), k, op.symbol()));
            lhs = tri!(self.binary(op, lhs, rhs, j));
            i = k;
        }
        Ok((i, lhs))
    }

    /// A number literal; `j` starts at its first character.
    fn number(&self, j: &'a str) -> PResult<'a, Sub> {
        let (k, (value, span)) = tri!(self.literal(j));
        Ok((k, Sub::leaf(ExprKind::Number(value), span)))
    }

    /// The value and span of a number literal starting `j`; a literal with
    /// name characters glued to it (`2c`, `1e`) or too large for an `f64` is
    /// an error.
    pub(super) fn literal(&self, j: &'a str) -> PResult<'a, (f64, Span)> {
        let (k, text) = number_text(j)?;
        if !number_tail(k).is_empty() {
            return Err(self.bad_number(j, text, number_tail(k)));
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok((k, (v, self.span(j, text.len())))),
            _ => Err(self.bad_number(j, text, "")),
        }
    }

    /// Commits to an operand after the token `token`: "nothing starts here"
    /// becomes "expected an expression after `*`".
    fn operand(&self, r: PResult<'a, Sub>, after_token: &'a str, token: &str) -> PResult<'a, Sub> {
        match r {
            Err(nom::Err::Error(_)) => Err(self.expected_operand(after_token, token)),
            other => other,
        }
    }

    /// A binary node, within the height limit; `op_at` starts at the operator.
    fn binary(&self, op: BinOp, lhs: Sub, rhs: Sub, op_at: &'a str) -> Result<Sub, Fail> {
        let height = lhs.height.max(rhs.height) + 1;
        if height > MAX_HEIGHT {
            return Err(self.too_long(self.span(op_at, op.symbol().len())));
        }
        let span = lhs.expr.span.to(rhs.expr.span);
        let expr = Box::new(Expr { kind: ExprKind::Binary { op, lhs: lhs.expr, rhs: rhs.expr }, span });
        Ok(Sub { expr, height })
    }

    /// One level deeper into a recursive construct whose first token starts `at`.
    fn enter(&self, depth: usize, at: &'a str) -> Result<usize, Fail> {
        if depth >= MAX_DEPTH { Err(self.too_deep(self.span(at, 1))) } else { Ok(depth + 1) }
    }

    /// Expects `close` after whitespace; reports an unclosed bracket (opened
    /// at the start of `open_at`) at the end of the statement and
    /// `expected` otherwise.
    fn close(&self, i: &'a str, open_at: &'a str, close: char, expected: &str) -> Result<&'a str, Fail> {
        match ws(i).strip_prefix(close) {
            Some(rest) => Ok(rest),
            None => Err(self.not_closed(i, open_at, close, expected)),
        }
    }
}

/// Which part of `in [lo, hi]` is missing.
#[derive(Clone, Copy, Debug)]
enum RangePart {
    Open,
    Comma,
    Close,
}

/// The diagnostics of the expression grammar, kept out of the recursive
/// frames (see the module doc).
impl<'a> Cx<'a> {
    #[cold]
    #[inline(never)]
    fn expected_operand(&self, after_token: &'a str, token: &str) -> Fail {
        let e = self.expected(after_token, &format!("an expression after `{token}`"));
        // A formula broken after an operator outside parentheses: the next
        // line was meant to continue it.
        let next_line = self.text[self.end..].split('\n').nth(1).unwrap_or("");
        let continues = !next_line.trim().is_empty()
            && !next_line.trim_start().starts_with('#')
            && !super::split::starts_statement(next_line.as_bytes());
        if ws(after_token).is_empty() && continues {
            return with_help(
                e,
                "a line break ends a statement; to continue the formula on the next line, wrap it in `( )`",
            );
        }
        e
    }

    #[cold]
    #[inline(never)]
    fn positional_after_keyword(&self, span: Span, keyword: &str) -> Fail {
        failure(
            Diagnostic::error(
                SYNTAX,
                span,
                format!("a positional argument cannot follow the keyword argument `{keyword}`"),
            )
            .with_help(format!("write the positional arguments first, then `{keyword} = ...`")),
        )
    }

    #[cold]
    #[inline(never)]
    fn not_closed(&self, i: &'a str, open_at: &'a str, close: char, expected: &str) -> Fail {
        let j = ws(i);
        if j.is_empty() {
            return self.unclosed(self.span(open_at, 1), close);
        }
        let e = self.unexpected(j, expected);
        if j.starts_with(',') && expected.starts_with("`)` or") {
            return with_help(e, "a comma separates a function's arguments; is the function name missing?");
        }
        let starts_operand = j.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '(' || c == '.');
        if expected.starts_with("`,`") && starts_operand {
            return replace_help(e, "is a `,` missing between two arguments?");
        }
        e
    }

    #[cold]
    #[inline(never)]
    fn empty_paren(&self, open_at: &'a str, k: &'a str) -> Fail {
        let close = ws(k);
        if close.starts_with(')') {
            let span = self.span(open_at, 1).to(self.span(close, 1));
            return failure(Diagnostic::error(SYNTAX, span, "empty parentheses `()` are not an expression"));
        }
        self.expected_operand(k, "(")
    }

    #[cold]
    #[inline(never)]
    fn bad_dotted(&self, word: &str, span: Span, k: &'a str) -> Fail {
        if word.contains('.') {
            return failure(
                Diagnostic::error(SYNTAX, span, format!("expected `(` after `{word}`"))
                    .with_help(format!("`{word}` is a function: call it as `{word}(...)`")),
            );
        }
        self.expected(&k[1..], "a function name after `.`")
    }

    #[cold]
    #[inline(never)]
    fn bad_number(&self, j: &'a str, text: &str, tail: &str) -> Fail {
        if tail.is_empty() {
            return failure(Diagnostic::error(
                "invalid-number",
                self.span(j, text.len()),
                format!("number `{text}` is too large for a 64-bit float"),
            ));
        }
        let span = self.span(j, text.len() + tail.len());
        let d = Diagnostic::error("invalid-number", span, format!("invalid number `{text}{tail}`"));
        failure(if format!("{text}{tail}").contains("..") {
            d.with_help("a range is written `x in [lo, hi]`")
        } else if tail.starts_with(['e', 'E']) {
            d.with_help("an exponent needs digits, e.g. `1e-4`")
        } else if tail.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            d.with_help(format!("to multiply, write `{text} * {tail}`"))
        } else {
            d
        })
    }

    #[cold]
    #[inline(never)]
    fn double_star(&self, j: &'a str) -> Fail {
        failure(
            Diagnostic::error(SYNTAX, self.span(j, 2), "`**` is not an operator")
                .with_help("write `^` for a power, e.g. `x ^ 2`"),
        )
    }

    #[cold]
    #[inline(never)]
    fn range_error(&self, i: &'a str, part: RangePart) -> Fail {
        let help = "a range is written `x in [lo, hi]`";
        let j = ws(i);
        let e = match part {
            RangePart::Open => self.expected(i, "`[` after `in`"),
            RangePart::Comma if j.starts_with(']') => {
                failure(Diagnostic::error(SYNTAX, self.span(j, 1), "a range needs two bounds"))
            }
            RangePart::Comma if j.is_empty() => self.expected(i, "`,` between the bounds of the range"),
            RangePart::Comma => self.unexpected(j, "`,` between the bounds of the range"),
            RangePart::Close if j.is_empty() => self.expected(i, "`]` to close the range"),
            RangePart::Close => self.unexpected(j, "`]` to close the range"),
        };
        with_help(e, help)
    }

    /// After a comparison, another comparison (or `in`) is an error.
    #[inline(never)]
    fn no_chain(&self, i: &'a str, first: &Expr, first_op: &str, mid: Span) -> Result<(), Fail> {
        let j = ws(i);
        let second = match comparison(j) {
            Ok((_, op)) => op.symbol(),
            Err(_) if keyword(j, "in").is_some() => "in",
            Err(_) => return Ok(()),
        };
        Err(self.chained(j, first, first_op, second, mid))
    }

    #[cold]
    #[inline(never)]
    fn chained(&self, j: &'a str, first: &Expr, first_op: &str, second: &str, mid: Span) -> Fail {
        let whole = self.snippet(first.span);
        let help = if matches!(second, "==" | "!=") {
            format!("to compare the result of a comparison, add parentheses: `({whole}) {second} ...`")
        } else if first_op == "in" {
            format!("add parentheses to say which comes first, e.g. `({whole}) {second} ...`")
        } else {
            let m = self.snippet(mid);
            format!("to test both, join two comparisons with `&&`: `{whole} && {m} {second} ...`")
        };
        failure(
            Diagnostic::error(SYNTAX, self.span(j, second.len()), "comparison operators cannot be chained")
                .with_help(help),
        )
    }
}

/// Replaces the help line of a finished diagnostic.
fn replace_help(e: Fail, help: &str) -> Fail {
    match e {
        nom::Err::Failure(SyntaxError::Diag(mut d)) => {
            d.help = Some(help.to_string());
            nom::Err::Failure(SyntaxError::Diag(d))
        }
        other => other,
    }
}

/// Adds a help line to a finished diagnostic that has none.
fn with_help(e: Fail, help: &str) -> Fail {
    match e {
        nom::Err::Failure(SyntaxError::Diag(mut d)) if d.help.is_none() => {
            d.help = Some(help.to_string());
            nom::Err::Failure(SyntaxError::Diag(d))
        }
        other => other,
    }
}
