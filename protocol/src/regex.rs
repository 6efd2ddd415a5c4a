//! Escaping text so that the sandbox's grep matches it literally.

/// `text` as a regular expression that matches exactly `text`, in the syntax the sandbox's grep
/// takes (grep-regex, which parses with Rust's `regex-syntax`).
///
/// The escaped set is that syntax's meta characters, `\ . + * ? ( ) | [ ] { } ^ $ # & - ~`: the
/// first fourteen have a meaning anywhere, `#` starts a comment under the `x` flag, and `&`, `-`
/// and `~` are operators inside classes (`&&`, ranges, `~~`). Escaping the last four everywhere
/// costs nothing and keeps a literal literal whatever flags or brackets surround it. Any other
/// character (letters, digits, spaces, the remaining punctuation, non-ASCII) stands for itself;
/// escaping a letter or digit would change its meaning (`\d`, `\1`), so nothing else is escaped.
pub fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' | '#' | '&' | '-' | '~'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // That every escaped punctuation character compiles and matches itself is tested where the
    // regex engine is, in the sandbox (`tools::tests` and the `escape` integration test).
    #[test]
    fn only_meta_characters_are_escaped() {
        assert_eq!(escape_regex("plain_text 12 é"), "plain_text 12 é");
        assert_eq!(escape_regex("a.b(c)"), "a\\.b\\(c\\)");
        assert_eq!(escape_regex("#&-~!%"), "\\#\\&\\-\\~!%");
    }
}
