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

    /// Whether `pattern` matches `text` entirely, as a whole-string search would.
    fn matches_exactly(pattern: &str, text: &str) -> bool {
        let anchored = format!("^(?:{pattern})$");
        regex::Regex::new(&anchored).unwrap_or_else(|e| panic!("{pattern:?} does not compile: {e}")).is_match(text)
    }

    #[test]
    fn every_ascii_punctuation_character_matches_itself() {
        let punctuation: Vec<char> = (0u8..128).map(char::from).filter(char::is_ascii_punctuation).collect();
        assert_eq!(punctuation.len(), 32);
        for c in &punctuation {
            let text = c.to_string();
            let pattern = escape_regex(&text);
            assert!(matches_exactly(&pattern, &text), "{c:?} escaped as {pattern:?}");
            // Inside a class too, where `-`, `&` and `~` are operators.
            assert!(regex::Regex::new(&format!("^[{pattern}]$")).is_ok_and(|r| r.is_match(&text)), "[{pattern}]");
        }
        let all: String = punctuation.iter().collect();
        assert!(matches_exactly(&escape_regex(&all), &all));
        // Under verbose mode `#` and spaces would be syntax; escaped `#` still matches.
        assert!(regex::Regex::new(&format!("(?x)^{}$", escape_regex("#"))).is_ok_and(|r| r.is_match("#")));
    }

    #[test]
    fn literal_text_and_near_misses() {
        let text = "load(x)[0] + y.z ~ é & a-b #1 \\d $^|?*{2}";
        let pattern = escape_regex(text);
        assert!(matches_exactly(&pattern, text));
        assert!(!matches_exactly(&pattern, "load(x)[0] + yaz ~ é & a-b #1 \\d $^|?*{2}"));
        assert_eq!(escape_regex("plain_text 12"), "plain_text 12");
        assert_eq!(escape_regex("a.b(c)"), "a\\.b\\(c\\)");
    }
}
