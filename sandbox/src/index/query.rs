//! From a grep pattern to the trigrams any match must contain (Russ Cox's trigram query).
//!
//! The pattern is parsed into the same HIR the matcher compiles (grep-regex's translator
//! settings: `utf8(false)`, Unicode on, the call's case sensitivity, the nest limit), then
//! walked bottom-up. Each node yields an [`Info`]: when small, the *exact* set of (folded)
//! strings it can match, and a [`Query`] every match satisfies. Concatenations multiply exact
//! sets while they stay small and otherwise turn them into queries; alternations unite them;
//! classes become sets when they have few members; look-arounds (`^`, `$`, `\b`) match the
//! empty string. Anything the walk cannot bound becomes [`Query::All`], so the query is only
//! ever weaker than the regex, never stronger: a file the scan would match always passes it.
//! grep-regex then strips `\n` from the pattern, which only removes matches.

use std::collections::BTreeSet;

use regex_syntax::hir::{Class, Hir, HirKind};

use super::grams::{code, fold};

/// Largest exact set kept; beyond it a set becomes a query.
const MAX_EXACT: usize = 64;
/// Classes with more members than this (before folding) are not enumerated.
const MAX_CLASS: u32 = 128;
/// Copies of a repeated sub-expression spelled out; a match of `x{1000}` contains `x{16}`.
const MAX_COPIES: u32 = 16;
/// Trigrams taken from one exact string; more add little selectivity and cost lookups.
const MAX_GRAMS_PER_STRING: usize = 16;

/// A boolean formula over trigrams that every matching file satisfies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Query {
    /// Every file may match: the index cannot narrow this pattern.
    All,
    /// No file can match (an empty class, say).
    Nothing,
    /// The file contains this folded trigram.
    Gram(u32),
    /// All of these hold.
    And(Vec<Query>),
    /// At least one of these holds.
    Or(Vec<Query>),
}

impl Query {
    /// The query of a grep pattern, or [`Query::All`] when it does not parse here (the matcher
    /// reports the error) or yields no trigram.
    pub(crate) fn plan(pattern: &str, case_insensitive: bool, nest_limit: u32) -> Query {
        match parse(pattern, case_insensitive, nest_limit) {
            Some(hir) => walk(&hir).best(),
            None => Query::All,
        }
    }

    /// Whether a file with these sorted, distinct trigrams may match: the plain definition the
    /// posting lists are tested against.
    #[cfg(test)]
    pub(crate) fn matches(&self, grams: &[u32]) -> bool {
        match self {
            Query::All => true,
            Query::Nothing => false,
            Query::Gram(g) => grams.binary_search(g).is_ok(),
            Query::And(qs) => qs.iter().all(|q| q.matches(grams)),
            Query::Or(qs) => qs.iter().any(|q| q.matches(grams)),
        }
    }

    pub(crate) fn is_all(&self) -> bool {
        *self == Query::All
    }

    fn and(self, other: Query) -> Query {
        match (self, other) {
            (Query::All, q) | (q, Query::All) => q,
            (Query::Nothing, _) | (_, Query::Nothing) => Query::Nothing,
            (a, b) => Query::And(flattened(a, b, |q| if let Query::And(v) = q { Ok(v) } else { Err(q) })),
        }
    }

    fn or(self, other: Query) -> Query {
        match (self, other) {
            (Query::All, _) | (_, Query::All) => Query::All,
            (Query::Nothing, q) | (q, Query::Nothing) => q,
            (a, b) => Query::Or(flattened(a, b, |q| if let Query::Or(v) = q { Ok(v) } else { Err(q) })),
        }
    }
}

/// The operands of `a ∘ b` with nested `∘`s flattened one level: `operands` takes a query of the
/// same operation apart (`Ok`) and hands any other back (`Err`). A nested side's operands come
/// first, in order; a plain side follows them.
fn flattened(a: Query, b: Query, operands: fn(Query) -> Result<Vec<Query>, Query>) -> Vec<Query> {
    match (operands(a), operands(b)) {
        (Ok(mut x), Ok(y)) => {
            x.extend(y);
            x
        }
        (Ok(mut x), Err(q)) | (Err(q), Ok(mut x)) => {
            x.push(q);
            x
        }
        (Err(a), Err(b)) => vec![a, b],
    }
}

/// Parses as grep-regex does (see the module docs), so both see the same language.
fn parse(pattern: &str, case_insensitive: bool, nest_limit: u32) -> Option<Hir> {
    let ast = regex_syntax::ast::parse::ParserBuilder::new()
        .nest_limit(nest_limit)
        .octal(false)
        .ignore_whitespace(false)
        .build()
        .parse(pattern)
        .ok()?;
    regex_syntax::hir::translate::TranslatorBuilder::new()
        .utf8(false)
        .case_insensitive(case_insensitive)
        .multi_line(false)
        .dot_matches_new_line(false)
        .crlf(false)
        .unicode(true)
        .build()
        .translate(pattern, &ast)
        .ok()
}

type Strings = BTreeSet<Vec<u8>>;

/// What a node tells about its matches: every match `m` has `fold(m)` in `exact` (when known)
/// and satisfies `query`.
struct Info {
    exact: Option<Strings>,
    query: Query,
}

impl Info {
    fn exact(strings: Strings) -> Self {
        Info { exact: Some(strings), query: Query::All }
    }

    fn empty_string() -> Self {
        Info::exact(BTreeSet::from([Vec::new()]))
    }

    fn unknown(query: Query) -> Self {
        Info { exact: None, query }
    }

    /// The strongest query this node guarantees.
    fn best(self) -> Query {
        match &self.exact {
            Some(strings) => self.query.and(strings_query(strings)),
            None => self.query,
        }
    }
}

fn walk(hir: &Hir) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::empty_string(),
        HirKind::Literal(literal) => Info::exact(BTreeSet::from([literal.0.iter().copied().map(fold).collect()])),
        HirKind::Class(class) => class_strings(class).map_or(Info::unknown(Query::All), Info::exact),
        HirKind::Capture(capture) => walk(&capture.sub),
        HirKind::Repetition(rep) => {
            if rep.max == Some(0) {
                return Info::empty_string();
            }
            let sub = walk(&rep.sub);
            if rep.min == 0 {
                // `x?` is `x` or nothing; any other optional repetition is unbounded.
                return match (rep.max, sub.exact) {
                    (Some(1), Some(mut strings)) => {
                        strings.insert(Vec::new());
                        Info::exact(strings)
                    }
                    _ => Info::unknown(Query::All),
                };
            }
            // At least `min` matches of the sub-expression, one after another.
            let Some(strings) = &sub.exact else {
                return Info::unknown(sub.query);
            };
            let mut repeated = BTreeSet::from([Vec::new()]);
            for _ in 0..rep.min.min(MAX_COPIES) {
                match cross(&repeated, strings) {
                    Some(next) => repeated = next,
                    None => return Info::unknown(sub.best()),
                }
            }
            if rep.max == Some(rep.min) && rep.min <= MAX_COPIES {
                Info { exact: Some(repeated), query: sub.query }
            } else {
                Info::unknown(sub.query.and(strings_query(&repeated)))
            }
        }
        HirKind::Concat(parts) => {
            let mut query = Query::All;
            let mut run = BTreeSet::from([Vec::new()]);
            let mut whole = true;
            for part in parts {
                let info = walk(part);
                query = query.and(info.query);
                match info.exact {
                    Some(strings) => match cross(&run, &strings) {
                        Some(next) => run = next,
                        None => {
                            query = query.and(strings_query(&run));
                            run = strings;
                            whole = false;
                        }
                    },
                    None => {
                        query = query.and(strings_query(&run));
                        run = BTreeSet::from([Vec::new()]);
                        whole = false;
                    }
                }
            }
            if whole { Info { exact: Some(run), query } } else { Info::unknown(query.and(strings_query(&run))) }
        }
        HirKind::Alternation(alternatives) => {
            let infos: Vec<Info> = alternatives.iter().map(walk).collect();
            let union_size: Option<usize> = infos.iter().map(|i| i.exact.as_ref().map(BTreeSet::len)).sum();
            if union_size.is_some_and(|n| n <= MAX_EXACT) {
                let mut union = BTreeSet::new();
                let mut query = Query::Nothing;
                for info in infos {
                    query = query.or(info.query);
                    union.extend(info.exact.unwrap_or_default());
                }
                Info { exact: Some(union), query }
            } else {
                Info::unknown(infos.into_iter().fold(Query::Nothing, |q, info| q.or(info.best())))
            }
        }
    }
}

/// Every concatenation of a string of `left` with one of `right`, if there are few enough.
fn cross(left: &Strings, right: &Strings) -> Option<Strings> {
    if left.len() * right.len() > MAX_EXACT {
        return None;
    }
    let mut out = BTreeSet::new();
    for l in left {
        for r in right {
            let mut s = l.clone();
            s.extend_from_slice(r);
            out.insert(s);
        }
    }
    Some(out)
}

/// The members of a small class as folded strings (UTF-8 for a Unicode class).
fn class_strings(class: &Class) -> Option<Strings> {
    let mut out = BTreeSet::new();
    match class {
        Class::Unicode(class) => {
            let members: u32 = class.ranges().iter().map(|r| u32::from(r.end()) - u32::from(r.start()) + 1).sum();
            if members > MAX_CLASS {
                return None;
            }
            for range in class.ranges() {
                for c in (u32::from(range.start())..=u32::from(range.end())).filter_map(char::from_u32) {
                    let mut buf = [0; 4];
                    out.insert(c.encode_utf8(&mut buf).bytes().map(fold).collect());
                }
            }
        }
        Class::Bytes(class) => {
            let members: u32 = class.ranges().iter().map(|r| u32::from(r.end()) - u32::from(r.start()) + 1).sum();
            if members > MAX_CLASS {
                return None;
            }
            for range in class.ranges() {
                for b in range.start()..=range.end() {
                    out.insert(vec![fold(b)]);
                }
            }
        }
    }
    (out.len() <= MAX_EXACT).then_some(out)
}

/// The query of "the match is one of these strings": an OR over the strings of the AND of
/// their trigrams, with the trigrams all of them share pulled out in front.
fn strings_query(strings: &Strings) -> Query {
    if strings.is_empty() {
        return Query::Nothing;
    }
    if strings.iter().any(|s| s.len() < 3) {
        return Query::All;
    }
    let sets: Vec<Vec<u32>> = strings.iter().map(|s| string_grams(s)).collect();
    let common: Vec<u32> =
        sets[0].iter().copied().filter(|g| sets[1..].iter().all(|s| s.binary_search(g).is_ok())).collect();
    let mut query = common.iter().fold(Query::All, |q, &g| q.and(Query::Gram(g)));
    if sets.len() > 1 {
        let mut any = Query::Nothing;
        for set in &sets {
            let rest =
                set.iter().filter(|g| common.binary_search(g).is_err()).fold(Query::All, |q, &g| q.and(Query::Gram(g)));
            any = any.or(rest);
        }
        query = query.and(any);
    }
    query
}

/// The sorted distinct trigrams of one string, at most [`MAX_GRAMS_PER_STRING`] spread over it.
fn string_grams(s: &[u8]) -> Vec<u32> {
    let mut grams: Vec<u32> = s.windows(3).map(|w| code(w[0], w[1], w[2])).collect();
    grams.sort_unstable();
    grams.dedup();
    if grams.len() > MAX_GRAMS_PER_STRING {
        let step = grams.len() as f64 / MAX_GRAMS_PER_STRING as f64;
        grams = (0..MAX_GRAMS_PER_STRING).map(|i| grams[(i as f64 * step) as usize]).collect();
    }
    grams
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::grams::of_text;

    fn q(pattern: &str) -> Query {
        Query::plan(pattern, false, 32)
    }

    fn passes(pattern: &str, insensitive: bool, text: &str) -> bool {
        Query::plan(pattern, insensitive, 32).matches(&of_text(text.as_bytes()))
    }

    #[test]
    fn literals_need_their_trigrams() {
        assert!(passes("Content-Length", false, "x Content-Length: 3"));
        assert!(!passes("Content-Length", false, "Content-Type"));
        assert!(passes("content-length", true, "CONTENT-LENGTH"));
        assert!(passes(r"def [a-z]+_[0-9]+\(self", false, "def foo_1(self"));
        assert!(!passes(r"def [a-z]+_[0-9]+\(self", false, "def foo_1(this"));
        assert!(passes(r"\bimport\b", false, "import os"));
        assert!(passes("^class ", false, "class A"));
        assert!(passes("colou?r", false, "color"));
        assert!(passes("colou?r", false, "colour"));
        assert!(!passes("colou?r", false, "colr"));
        assert!(passes("TODO|FIXME", false, "# FIXME"));
        assert!(!passes("TODO|FIXME", false, "# NOTE"));
        assert!(passes("(ab){2}c", false, "ababc"));
    }

    #[test]
    fn unbounded_patterns_scan_everything() {
        for p in ["a", "ab", ".*", r"\w+", "x*y*z*", "[a-z]{2}", "^$", "(?s).", "a|bcd"] {
            assert!(q(p).is_all(), "{p}: {:?}", q(p));
        }
        assert!(q("(").is_all(), "a pattern that does not parse is left to the matcher");
        assert_eq!(q("[^\\x00-\\x{10FFFF}]abc"), Query::Nothing);
    }

    #[test]
    fn unicode_case_folding_is_kept() {
        // The Kelvin sign folds to `k` in a case-insensitive regex; the class keeps it.
        assert!(passes("kelvin", true, "\u{212A}elvin"));
        assert!(passes("straße", true, "STRASSE straße"));
        assert!(passes("ſtop", true, "stop"));
    }
}
