//! Tokenization for code search: identifiers are split into their subwords
//! (`snake_case`, `camelCase`, `HTTPServer`) and also kept whole, all
//! lowercase; a small list of English and Python stopwords is dropped.
//!
//! Keeping the whole identifier lets an exact mention (`backoff_delay`)
//! outrank a paraphrase (`backoff delay`), while the subwords let the
//! paraphrase match at all.

/// Words too common to carry signal, in English prose and in Python source.
pub const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "def", "for", "from", "has", "have", "if", "in", "into",
    "is", "it", "its", "not", "of", "on", "or", "self", "so", "that", "the", "this", "to", "was", "we", "were", "with",
];

/// Tokens of `text`, in order, duplicates kept (term frequency matters).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let word = word.trim_matches('_');
        if word.is_empty() {
            continue;
        }
        let parts = subwords(word);
        if parts.len() > 1 {
            push(&mut out, word.to_lowercase());
        }
        for part in parts {
            push(&mut out, part.to_lowercase());
        }
    }
    out
}

fn push(out: &mut Vec<String>, token: String) {
    if token.chars().count() >= 2 && !STOPWORDS.contains(&token.as_str()) {
        out.push(token);
    }
}

/// Splits one identifier at underscores and case changes: `parseHTTPHeader`
/// gives `parse`, `HTTP`, `Header`. Digits stay with what precedes them
/// (`oauth2`, `sha1`).
fn subwords(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<(usize, char)> = piece.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (at, c) = chars[i];
            let prev = chars[i - 1].1;
            let next_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
            let boundary = c.is_uppercase()
                && (prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower));
            if boundary {
                parts.push(&piece[start..at]);
                start = at;
            }
        }
        parts.push(&piece[start..]);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_snake_and_camel_and_keeps_the_whole_identifier() {
        assert_eq!(
            tokenize("RetryPolicy.backoff_delay"),
            ["retrypolicy", "retry", "policy", "backoff_delay", "backoff", "delay"]
        );
        assert_eq!(tokenize("parseHTTPHeader"), ["parsehttpheader", "parse", "http", "header"]);
    }

    #[test]
    fn drops_stopwords_short_tokens_and_punctuation() {
        assert_eq!(tokenize("the retry of a x: budget!"), ["retry", "budget"]);
        assert_eq!(tokenize("__init__ self"), ["init"]);
    }

    #[test]
    fn digits_stay_attached() {
        assert_eq!(tokenize("oauth2 token"), ["oauth2", "token"]);
    }
}
