//! The per-statement parsing context: where the statement lies in the file,
//! and the builders for the diagnostics every grammar rule shares.
//!
//! Parsers run on suffixes of one statement's text, so the byte offset of
//! any remaining input `rest` is `end - rest.len()`; spans are computed that
//! way rather than by threading positions through every combinator.

use std::cell::OnceCell;

use super::error::{SyntaxError, failure};
use super::lex::{describe, is_known_char, lookalike_hint, token_len, ws};
use super::{MAX_DEPTH, MAX_HEIGHT};
use crate::diag::Diagnostic;
use crate::span::Span;

/// Line starts of the whole file, computed only when a message needs a
/// line number (most parses need none).
#[derive(Debug, Default)]
pub(crate) struct Lines(OnceCell<Vec<usize>>);

impl Lines {
    /// 1-based line and column (in characters) of `offset` in `text`.
    fn line_col(&self, text: &str, offset: usize) -> (usize, usize) {
        let starts = self.0.get_or_init(|| {
            let mut v = vec![0];
            v.extend(text.match_indices('\n').map(|(i, _)| i + 1));
            v
        });
        let line = starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let start = starts.get(line).copied().unwrap_or(0);
        let col = text.get(start..offset).map_or(0, |s| s.chars().count());
        (line + 1, col + 1)
    }
}

#[derive(Debug)]
pub(crate) struct Cx<'a> {
    /// The whole source text.
    pub text: &'a str,
    /// Byte offset where the current statement's text ends.
    pub end: usize,
    lines: &'a Lines,
}

/// The code of every syntax diagnostic.
pub(crate) const SYNTAX: &str = "syntax";

impl<'a> Cx<'a> {
    pub fn new(text: &'a str, end: usize, lines: &'a Lines) -> Cx<'a> {
        Cx { text, end, lines }
    }

    /// Byte offset of the remaining input `rest`.
    pub fn pos(&self, rest: &str) -> usize {
        self.end - rest.len()
    }

    /// The span of `len` bytes at the start of `rest`.
    pub fn span(&self, rest: &str, len: usize) -> Span {
        let p = self.pos(rest);
        Span::new(p, p + len)
    }

    /// The span of the token at the start of `rest` (empty at the end).
    pub fn token(&self, rest: &str) -> Span {
        self.span(rest, token_len(rest))
    }

    /// The source text of a span, shortened for quoting in a message.
    pub fn snippet(&self, span: Span) -> String {
        let s = self.text.get(span.range()).unwrap_or("");
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if s.chars().count() > 32 { format!("{}…", s.chars().take(30).collect::<String>()) } else { s }
    }

    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        self.lines.line_col(self.text, offset)
    }

    /// "expected WHAT": the input after a committed token (`before`, not
    /// yet past whitespace) does not continue as it must. At the end of the
    /// statement the caret goes right after the committed token.
    pub fn expected(&self, before: &'a str, what: &str) -> nom::Err<SyntaxError> {
        let j = ws(before);
        if j.is_empty() {
            let at = self.span(before, 0);
            return failure(Diagnostic::error(SYNTAX, at, format!("expected {what}")));
        }
        if let Some(d) = self.unknown_char(j) {
            return failure(d);
        }
        let mut d = Diagnostic::error(SYNTAX, self.token(j), format!("expected {what}, found {}", describe(j)));
        if j.starts_with('[') {
            d = d.with_help("brackets only appear in a range: `x in [lo, hi]`");
        } else if ["let", "param", "check"].iter().any(|k| super::lex::keyword(j, k).is_some()) {
            d = d.with_help("each statement goes on its own line");
        } else if j.starts_with("**") {
            d = d.with_help("`**` is not an operator; write `^` for a power");
        }
        failure(d)
    }

    /// Something other than an operator or the expected closer follows a
    /// complete expression. `expected` names what could have come, e.g.
    /// "`)` or an operator".
    pub fn unexpected(&self, j: &'a str, expected: &str) -> nom::Err<SyntaxError> {
        if let Some(d) = self.unknown_char(j) {
            return failure(d);
        }
        let tok = self.token(j);
        let (message, help): (String, Option<String>) = if j.starts_with("=>") {
            ("`=>` is not an operator; did you mean `>=`?".into(), None)
        } else if j.starts_with("=<") {
            ("`=<` is not an operator; did you mean `<=`?".into(), None)
        } else if j.starts_with('=') {
            (
                "`=` in an expression; did you mean `==`?".into(),
                Some("`==` compares two values; a single `=` only defines a name at the start of a statement".into()),
            )
        } else if j.starts_with("<>") {
            ("`<>` is not an operator; did you mean `!=`?".into(), None)
        } else if j.starts_with('&') {
            ("`&` is not an operator; did you mean `&&`?".into(), None)
        } else if j.starts_with('|') {
            ("`|` is not an operator; did you mean `||`?".into(), None)
        } else {
            let found = describe(j);
            let word = &self.text[tok.range()];
            let help = match word {
                "and" => Some("write `&&` for \"and\"".to_string()),
                "or" => Some("write `||` for \"or\"".to_string()),
                "not" => Some("write `!` for \"not\"".to_string()),
                "if" => Some("a conditional is written `if(cond, then, else)`".to_string()),
                "let" | "param" | "check" => Some("each statement goes on its own line".to_string()),
                _ if j.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '(') => {
                    Some("is an operator missing? Multiplication is written `*`".to_string())
                }
                _ => None,
            };
            (format!("expected {expected}, found {found}"), help)
        };
        let d = Diagnostic::error(SYNTAX, tok, message);
        failure(match help {
            Some(h) => d.with_help(h),
            None => d,
        })
    }

    /// "unknown character" when `j` starts with a character that no token uses.
    pub fn unknown_char(&self, j: &str) -> Option<Diagnostic> {
        let c = j.chars().next()?;
        if is_known_char(c) {
            return None;
        }
        let d = Diagnostic::error(
            "unknown-character",
            self.span(j, c.len_utf8()),
            if c.is_control() || c.is_whitespace() || matches!(c, '\u{200b}' | '\u{feff}') {
                // Invisible: name it by code point.
                format!("unknown character `{}`", c.escape_unicode())
            } else {
                format!("unknown character `{c}`")
            },
        );
        Some(match lookalike_hint(c) {
            Some(h) => d.with_help(h),
            None => d,
        })
    }

    /// An opening bracket that the statement ends without closing.
    pub fn unclosed(&self, open: Span, close: char) -> nom::Err<SyntaxError> {
        let open_char = &self.text[open.range()];
        let (line, col) = self.line_col(self.end);
        failure(
            Diagnostic::error("unclosed-delimiter", open, format!("unclosed `{open_char}`"))
                .with_help(format!("add `{close}` to close it: the statement ends at line {line}, column {col}")),
        )
    }

    /// The nesting limit was reached at `at`.
    #[cold]
    #[inline(never)]
    pub fn too_deep(&self, at: Span) -> nom::Err<SyntaxError> {
        failure(Diagnostic::error("too-deep", at, "expression nested too deeply").with_help(format!(
            "the limit is {MAX_DEPTH} levels of parentheses, calls, ranges and operators; \
             split the formula with `let` definitions"
        )))
    }

    /// The tree-height limit was reached at `at` (a long operator chain).
    #[cold]
    #[inline(never)]
    pub fn too_long(&self, at: Span) -> nom::Err<SyntaxError> {
        failure(Diagnostic::error("too-deep", at, "expression nested too deeply").with_help(format!(
            "a chain of operators nests one level per operator, and the limit is {MAX_HEIGHT}; \
             split the formula with `let` definitions"
        )))
    }

    /// Turns any error into its diagnostic: a bare nom position becomes
    /// "unexpected ..." (a safety net; the grammar reports its own messages).
    pub fn to_diag(&self, err: nom::Err<SyntaxError>) -> Diagnostic {
        match err {
            nom::Err::Error(e) | nom::Err::Failure(e) => match e {
                SyntaxError::Diag(d) => *d,
                SyntaxError::Nom { rest_len } => {
                    let p = self.end - rest_len.min(self.end);
                    let rest = &self.text[p..self.end];
                    self.unknown_char(rest).unwrap_or_else(|| {
                        Diagnostic::error(SYNTAX, self.token(rest), format!("unexpected {}", describe(rest)))
                    })
                }
            },
            nom::Err::Incomplete(_) => {
                Diagnostic::error(SYNTAX, Span::new(self.end, self.end), "unexpected end of the statement")
            }
        }
    }
}
