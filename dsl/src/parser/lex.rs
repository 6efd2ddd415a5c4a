//! The lexical layer: whitespace and comments, names, numbers and operator
//! tokens, written as nom parsers over `&str`, plus the token descriptions
//! that error messages quote ("found `)`").
//!
//! Every parser here is a leaf (it never recurses into expressions), so the
//! combinators' stack frames never pile up on deep inputs.
//!
//! nom 8.0.0's `&str` parsers that run to the end of their input
//! (`digit0`, `take_while`, ... in `complete`) return an empty rest that
//! points at the *start* of the input (nom issue #1808, fixed upstream but
//! unreleased), which breaks nom's pointer-based `recognize`. So this module
//! recognizes by length ([`consumed`]) and re-slices every rest it returns
//! from its own input; the rest of the parser only ever uses lengths.

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, digit0, digit1, multispace1, one_of, satisfy};
use nom::combinator::opt;
use nom::multi::many0_count;
use nom::{IResult, Parser};

use super::error::SyntaxError;

/// The result of a parser over a statement's text.
pub(crate) type PResult<'a, T> = IResult<&'a str, T, SyntaxError>;

/// Words that cannot be used as names.
pub(crate) const KEYWORDS: [&str; 6] = ["let", "param", "check", "in", "true", "false"];

pub(crate) fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

pub(crate) fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(crate) fn is_name_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whitespace as the statement splitter sees it. Newlines only ever reach
/// the expression parser from inside brackets, where they are plain space.
pub(crate) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// `(rest, recognized)` for a parser's result on `i`, computed from the
/// rest's length (see the module doc for why not from its pointer).
pub(crate) fn consumed<'a, O>(i: &'a str, result: PResult<'a, O>) -> PResult<'a, &'a str> {
    let (rest, _) = result?;
    let used = i.len() - rest.len();
    Ok((&i[used..], &i[..used]))
}

/// Skips whitespace and `#` comments. Never fails.
pub(crate) fn ws(i: &str) -> &str {
    // Fast path: most calls find a token right away.
    if !i.starts_with(|c: char| is_space(c) || c == '#') {
        return i;
    }
    let comment = (char('#'), take_while(|c| c != '\n'));
    let skipped: PResult<'_, usize> = many0_count(alt((multispace1.map(|_| ()), comment.map(|_| ())))).parse(i);
    match consumed(i, skipped) {
        Ok((rest, _)) => rest,
        // Both alternatives consume input when they succeed, so `many0_count`
        // cannot report an infinite loop; keep the input as it was if it does.
        Err(_) => i,
    }
}

/// A plain name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn name(i: &str) -> PResult<'_, &str> {
    consumed(i, (satisfy(is_name_start), take_while(is_name_continue)).parse(i))
}

/// A possibly dotted name such as `group.mean`: names joined by `.` with no
/// space around the dots.
pub(crate) fn dotted_name(i: &str) -> PResult<'_, &str> {
    consumed(i, (name, many0_count((char('.'), name))).parse(i))
}

/// The text of a number literal: `1`, `0.5`, `.5`, `5.`, `1e-4`, `2.5E+3`.
/// An exponent marker without digits is left unconsumed, so that `1e` is
/// caught as a malformed literal by [`number_tail`].
pub(crate) fn number_text(i: &str) -> PResult<'_, &str> {
    let mantissa = alt(((digit1, opt((char('.'), digit0))).map(|_| ()), (char('.'), digit1).map(|_| ())));
    let exponent = (one_of("eE"), opt(one_of("+-")), digit1);
    consumed(i, (mantissa, opt(exponent)).parse(i))
}

/// The run of name characters and dots glued to a number literal (`2c`,
/// `1.2.3`, `1e`): such a run makes the literal malformed.
pub(crate) fn number_tail(i: &str) -> &str {
    let tail: PResult<'_, &str> = take_while(|c: char| is_name_continue(c) || c == '.').parse(i);
    consumed(i, tail).map_or("", |(_, t)| t)
}

/// Whether `i` starts with a keyword `word` (not merely a name beginning with it).
pub(crate) fn keyword<'a>(i: &'a str, word: &str) -> Option<&'a str> {
    if !i.starts_with(word) {
        return None;
    }
    let (rest, found) = name(i).ok()?;
    (found == word).then_some(rest)
}

/// A comparison operator token.
pub(crate) fn comparison(i: &str) -> PResult<'_, crate::ast::BinOp> {
    use crate::ast::BinOp;
    if !i.starts_with(['<', '>', '=', '!']) {
        return Err(super::error::no_match(i));
    }
    alt((
        tag("<=").map(|_| BinOp::Le),
        tag(">=").map(|_| BinOp::Ge),
        tag("==").map(|_| BinOp::Eq),
        tag("!=").map(|_| BinOp::Ne),
        tag("<").map(|_| BinOp::Lt),
        tag(">").map(|_| BinOp::Gt),
    ))
    .parse(i)
}

/// The byte length of the token at the start of `i` (0 at the end), used to
/// underline what an error found. Tokens are judged loosely: a run of name
/// characters, a number with whatever is glued to it, a two-character
/// operator, or else one character.
pub(crate) fn token_len(i: &str) -> usize {
    if i.is_empty() {
        return 0;
    }
    if let Ok((_, n)) = number_text(i) {
        return n.len() + number_tail(&i[n.len()..]).len();
    }
    let run: PResult<'_, &str> = take_while1(is_name_continue).parse(i);
    if let Ok((_, w)) = consumed(i, run) {
        return w.len();
    }
    const TWO: [&str; 10] = ["<=", ">=", "==", "!=", "&&", "||", "**", "=>", "=<", "<>"];
    if TWO.iter().any(|t| i.starts_with(t)) {
        return 2;
    }
    i.chars().next().map_or(0, char::len_utf8)
}

/// How an error message names the token at the start of `i`.
pub(crate) fn describe(i: &str) -> String {
    let len = token_len(i);
    if len == 0 {
        return "the end of the statement".to_string();
    }
    let tok = &i[..len];
    if is_keyword(tok) { format!("keyword `{tok}`") } else { format!("`{tok}`") }
}

/// Characters that can start or continue some token of the language.
pub(crate) fn is_known_char(c: char) -> bool {
    is_name_continue(c) || is_space(c) || "#.,()[]+-*/^<>=!&|".contains(c)
}

/// A hint for a character that is not part of the language but looks like an
/// operator from mathematics or another language.
pub(crate) fn lookalike_hint(c: char) -> Option<&'static str> {
    Some(match c {
        '×' | '·' | '∙' => "write `*` to multiply",
        '÷' => "write `/` to divide",
        '−' | '–' | '—' => "write `-` (ASCII hyphen-minus) for minus",
        '≤' => "write `<=`",
        '≥' => "write `>=`",
        '≠' => "write `!=`",
        '%' => "there is no modulo operator",
        '?' => "a conditional is written `if(cond, then, else)`",
        ';' => "statements end at the end of the line; no `;` is needed",
        '{' | '}' => "group with parentheses `(...)`",
        '"' | '\'' | '`' => "the language has no strings; feature and level names are written bare, e.g. `f(level)`",
        '$' | '@' => "names are written bare, e.g. `x` or `f(level)`",
        ':' => "definitions use `=`, e.g. `reward = x * 2`",
        '\u{a0}' | '\u{2009}' | '\u{200b}' | '\u{feff}' => "an invisible space character; use a plain space",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_take_every_documented_form() {
        for text in ["1", "0.5", ".5", "5.", "1e-4", "2.5E+3", "1.e5"] {
            let (rest, n) = number_text(text).expect(text);
            assert_eq!((rest, n), ("", text));
            assert!(n.parse::<f64>().is_ok(), "{n} must be accepted by f64::from_str");
        }
        // An exponent without digits stays behind for the malformed-literal check.
        assert_eq!(number_text("1e+").ok(), Some(("e+", "1")));
        assert_eq!(number_tail("c + 1"), "c");
    }

    #[test]
    fn rests_point_into_the_input_even_at_its_end() {
        let text = "abc";
        let (rest, found) = name(text).expect("a name");
        assert_eq!((found, rest.as_ptr()), ("abc", text[3..].as_ptr()));
        let digits = "12";
        let (rest, found) = number_text(digits).expect("a number");
        assert_eq!((found, rest.as_ptr()), ("12", digits[2..].as_ptr()));
        let space = "  ";
        assert_eq!(ws(space).as_ptr(), space[2..].as_ptr());
    }

    #[test]
    fn whitespace_skips_comments_and_newlines() {
        assert_eq!(ws("  # note\n\t x"), "x");
        assert_eq!(ws("# only a comment"), "");
        assert_eq!(ws("x"), "x");
    }

    #[test]
    fn tokens_are_described_for_messages() {
        assert_eq!(describe(""), "the end of the statement");
        assert_eq!(describe(") + 1"), "`)`");
        assert_eq!(describe("let x"), "keyword `let`");
        assert_eq!(describe("2c + 1"), "`2c`");
        assert_eq!(describe("== 3"), "`==`");
        assert_eq!(describe("×2"), "`×`");
    }

    #[test]
    fn dotted_names_need_a_name_after_each_dot() {
        assert_eq!(dotted_name("group.mean(x)").ok(), Some(("(x)", "group.mean")));
        assert_eq!(dotted_name("x.5").ok(), Some((".5", "x")));
        assert_eq!(keyword("in [0, 1]", "in"), Some(" [0, 1]"));
        assert_eq!(keyword("index", "in"), None);
    }
}
