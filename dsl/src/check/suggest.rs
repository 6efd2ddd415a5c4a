//! "Did you mean": the closest known name to a misspelt one.
//!
//! Distance is the Damerau–Levenshtein edit distance in its optimal string
//! alignment form (insertions, deletions, substitutions and swaps of two
//! adjacent characters, each costing 1), computed on lowercased text so that
//! `gr` finds `Gr`. A case-only difference always wins; otherwise the
//! threshold grows with the length of the name, and a known name of two or
//! more characters that is a prefix of the typed one (`Grade` → `Gr`) counts too.

/// The best candidate for `typed`, if any is close enough.
pub(crate) fn did_you_mean<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = typed.to_lowercase();
    let mut best: Option<(u32, &'a str)> = None;
    for cand in candidates {
        if cand == typed {
            continue;
        }
        let cand_lower = cand.to_lowercase();
        let score = if cand_lower == lower {
            // Case-only differences are the likeliest slip of all.
            0
        } else {
            let d = edit_distance(&lower, &cand_lower) as u32;
            // Between equally close names, prefer the one whose case matches.
            let case_penalty = u32::from(edit_distance(typed, cand) as u32 > d);
            let prefix = cand.chars().count() >= 2 && lower.starts_with(&cand_lower);
            if d <= threshold(typed.chars().count().max(cand.chars().count())) {
                4 * d + case_penalty
            } else if prefix {
                // A prefix match is weaker evidence than a close edit.
                4 * threshold(typed.chars().count()) + 2
            } else {
                continue;
            }
        };
        if best.is_none_or(|(s, _)| score < s) {
            best = Some((score, cand));
        }
    }
    best.map(|(_, c)| c)
}

/// How many edits a name of `len` characters may be away from a suggestion.
fn threshold(len: usize) -> u32 {
    match len {
        0..=3 => 1,
        4..=7 => 2,
        _ => 3,
    }
}

/// Optimal-string-alignment edit distance between two strings, by characters.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    // d[i][j]: distance between a[..i] and b[..j], stored row-major.
    let mut d = vec![0usize; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in 0..=n {
        d[at(i, 0)] = i;
    }
    for j in 0..=m {
        d[at(0, j)] = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[at(i - 1, j)] + 1).min(d[at(i, j - 1)] + 1).min(d[at(i - 1, j - 1)] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[at(i - 2, j - 2)] + 1);
            }
            d[at(i, j)] = v;
        }
    }
    d[at(n, m)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_swaps_as_one_edit() {
        assert_eq!(edit_distance("reward", "rewrad"), 1);
        assert_eq!(edit_distance("rewrd", "reward"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions_cover_typos_case_and_prefixes() {
        let names = ["reward", "adv", "advantage", "Gr", "x", "X", "N", "group.mean", "min", "max"];
        assert_eq!(did_you_mean("rewrd", names), Some("reward"));
        assert_eq!(did_you_mean("gr", names), Some("Gr"));
        assert_eq!(did_you_mean("n", names), Some("N"));
        assert_eq!(did_you_mean("Grade", names), Some("Gr"));
        assert_eq!(did_you_mean("group.maen", names), Some("group.mean"));
        assert_eq!(did_you_mean("advantages", names), Some("advantage"));
        assert_eq!(did_you_mean("zzzzzz", names), None);
        // `x` and `X` differ only by case; the exact other one is suggested.
        assert_eq!(did_you_mean("x", ["x", "X"]), Some("X"));
        // Equally close by letters, the one with matching case wins.
        assert_eq!(did_you_mean("xx", ["X", "x"]), Some("x"));
    }
}
