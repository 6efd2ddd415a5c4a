//! Splitting a file into statements before parsing them.
//!
//! A newline ends a statement unless it is inside `(...)` or `[...]`. Doing
//! this in a separate linear pass (it only needs bracket depth and comments)
//! gives error recovery for free: a statement that fails to parse is
//! reported and skipped, and the next one starts fresh.
//!
//! One heuristic keeps an unclosed bracket from swallowing the rest of the
//! file: inside brackets, a line that begins like a statement (`let`,
//! `param`, `check`, or `NAME =` with a single `=`) starts a new statement
//! anyway. None of those can continue an expression (`=` alone is never an
//! operator, and the three words are keywords), so this never splits a valid
//! statement — except a keyword argument (`where = m`) on a line of its
//! own, so `where` is exempt.

use super::lex::{is_name_continue, is_name_start};

/// A statement's extent: from its first token to the end of its last token,
/// with no surrounding whitespace or comments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Extent {
    pub start: usize,
    pub end: usize,
}

/// Splits `text` into statement extents. With `by_line` false the whole
/// text is one statement (for a single formula).
pub(crate) fn statements(text: &str, by_line: bool) -> Vec<Extent> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start: Option<usize> = None;
    let mut last_end = 0;
    // A byte-order mark (some Windows editors write one) is not content.
    let mut i = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    while i < bytes.len() {
        match bytes[i] {
            b'#' => {
                // Skip to the newline, which the next iteration handles.
                i = memchr_newline(bytes, i).unwrap_or(bytes.len());
                continue;
            }
            b'\n' => {
                if by_line && start.is_some() && (depth == 0 || starts_statement(&bytes[i + 1..])) {
                    if let Some(s) = start.take() {
                        out.push(Extent { start: s, end: last_end });
                    }
                    depth = 0;
                }
            }
            b' ' | b'\t' | b'\r' => {}
            b'"' => {
                // An alert's message: a `#` or bracket inside it is text. It
                // ends at its closing quote or, unclosed, before the newline
                // (the parser reports it).
                start.get_or_insert(i);
                i = string_end(bytes, i);
                last_end = i;
                continue;
            }
            b => {
                start.get_or_insert(i);
                match b {
                    b'(' | b'[' => depth += 1,
                    b')' | b']' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                // Bytes of a multi-byte character are all non-space, so
                // `last_end` lands on a character boundary once the
                // character is complete.
                last_end = i + 1;
            }
        }
        i += 1;
    }
    if let Some(s) = start {
        out.push(Extent { start: s, end: last_end });
    }
    out
}

/// The offset just past the string literal opening at `from` (`\\` escapes
/// the next byte), or of the newline or end that cuts it short.
fn string_end(bytes: &[u8], from: usize) -> usize {
    let mut i = from + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return i + 1,
            b'\n' => return i,
            b'\\' if bytes.get(i + 1).is_some_and(|&b| b != b'\n') => i += 2,
            _ => i += 1,
        }
    }
    bytes.len()
}

fn memchr_newline(bytes: &[u8], from: usize) -> Option<usize> {
    bytes[from..].iter().position(|&b| b == b'\n').map(|p| from + p)
}

/// Whether a line (given from its start) begins like a new statement.
pub(crate) fn starts_statement(line: &[u8]) -> bool {
    let mut i = line.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    let word_start = i;
    if !line.get(i).is_some_and(|&b| is_name_start(b as char)) {
        return false;
    }
    while line.get(i).is_some_and(|&b| is_name_continue(b as char)) {
        i += 1;
    }
    let word = &line[word_start..i];
    if matches!(word, b"let" | b"param" | b"check") {
        return true;
    }
    let mut after = i;
    while line.get(after).is_some_and(|&b| b == b' ' || b == b'\t') {
        after += 1;
    }
    // `alert COND : "..."`, unless it is `alert = ...` (a definition).
    if word == b"alert" && after > i && line.get(after).is_some_and(|&b| b != b'=' && b != b'\n' && b != b'\r') {
        return true;
    }
    // `where = m` on a line of its own is a reduction's keyword argument
    // continuing the call, never a definition (no output is named `where`).
    if word == b"where" {
        return false;
    }
    while line.get(i).is_some_and(|&b| b == b' ' || b == b'\t') {
        i += 1;
    }
    line.get(i) == Some(&b'=') && line.get(i + 1) != Some(&b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<&str> {
        statements(src, true).iter().map(|e| &src[e.start..e.end]).collect()
    }

    #[test]
    fn newlines_end_statements_outside_brackets() {
        let src = "# head\nreward = (a +\n  b) # tail\r\n\n  check x in [0,\n 1]\n";
        assert_eq!(texts(src), ["reward = (a +\n  b)", "check x in [0,\n 1]"]);
    }

    #[test]
    fn a_statement_start_ends_an_unclosed_bracket() {
        let src = "reward = f(c > 0\nadvantage = adv\nlet x = (1\n  + 2\ncheck x > 0";
        assert_eq!(texts(src), ["reward = f(c > 0", "advantage = adv", "let x = (1\n  + 2", "check x > 0"]);
        // `==` on the next line is a comparison, not a definition.
        assert_eq!(texts("check (a\n b == c)"), ["check (a\n b == c)"]);
    }

    #[test]
    fn a_message_keeps_its_hash_and_brackets() {
        let src = "alert batch.mean(T) < 2 : \"turns # (collapsed\" # note\nreward = 1";
        assert_eq!(texts(src), ["alert batch.mean(T) < 2 : \"turns # (collapsed\"", "reward = 1"]);
        // An alert line ends an unclosed bracket like any statement start.
        assert_eq!(texts("reward = (1\nalert x > 1 : \"m\""), ["reward = (1", "alert x > 1 : \"m\""]);
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        assert_eq!(texts("\u{feff}reward = 1\n"), ["reward = 1"]);
    }

    #[test]
    fn a_single_formula_ignores_newlines() {
        let src = " a +\n b # c\n";
        assert_eq!(statements(src, false), [Extent { start: 1, end: 7 }]);
    }
}
