//! Tokenization for code search: identifiers are split into their subwords
//! (`snake_case`, `camelCase`, `HTTPServer`) and also kept whole, all
//! lowercase; a small list of English and Python stopwords is dropped.
//!
//! Keeping the whole identifier lets an exact mention (`backoff_delay`)
//! outrank a paraphrase (`backoff delay`), while the subwords let the
//! paraphrase match at all.

/// Words too common to carry signal, in English prose and in Python source (sorted, so a
/// token is looked up by binary search: the tokenizer asks once per token of every file).
pub const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "def", "for", "from", "has", "have", "if", "in", "into",
    "is", "it", "its", "not", "of", "on", "or", "self", "so", "that", "the", "this", "to", "was", "we", "were", "with",
];

/// Tokens of `text`, in order, duplicates kept (term frequency matters).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, |token| out.push(token.to_owned()));
    out
}

/// Calls `f` with each token of `text`, in [`tokenize`]'s order, from one reused buffer: a
/// caller that counts tokens allocates only for the distinct ones.
pub fn for_each_token(text: &str, mut f: impl FnMut(&str)) {
    let mut lower = String::new();
    let mut emit = |part: &str| {
        lower.clear();
        if part.is_ascii() {
            lower.extend(part.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            // `str::to_lowercase` knows context (a final sigma), which per-char mapping does not.
            lower.push_str(&part.to_lowercase());
        }
        if lower.chars().nth(1).is_some() && STOPWORDS.binary_search(&lower.as_str()).is_err() {
            f(&lower);
        }
    };
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let word = word.trim_matches('_');
        if word.is_empty() {
            continue;
        }
        let parts = subwords(word);
        if parts.len() > 1 {
            emit(word);
        }
        for part in parts {
            emit(part);
        }
    }
}

/// Splits one identifier at underscores and case changes: `parseHTTPHeader`
/// gives `parse`, `HTTP`, `Header`. Digits stay with what precedes them
/// (`oauth2`, `sha1`).
fn subwords(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        // Most words of code and prose are all lowercase (or digits): one subword, no scan.
        if piece.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
            parts.push(piece);
            continue;
        }
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
    fn the_stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]), "{STOPWORDS:?}");
    }

    #[test]
    fn digits_stay_attached() {
        assert_eq!(tokenize("oauth2 token"), ["oauth2", "token"]);
    }
}
