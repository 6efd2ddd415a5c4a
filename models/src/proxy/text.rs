//! Search terms from an issue's text, extracted deterministically.
//!
//! The issue is scanned line by line, tracking fenced code blocks (and
//! whether a block is a Python traceback) and the title (the first line with
//! text: a SWE-bench problem statement's title, a commit's subject, a pull
//! request's title; a Markdown `# ` is optional). A dotted name whose first
//! part is a variable (`self`, `cls`, one or two lowercase letters: `e.subs`,
//! `sy.Matrix.hstack`) is taken without it. E-mail addresses and git trailer lines
//! (`Co-authored-by: …`, which end many pull-request texts) give no terms. Each term carries
//! what the proxy policy's features need: its source kind, where it first
//! occurs, how often, and whether it was seen in a traceback, a code block
//! or the title. Terms are returned in order of first occurrence (ties by
//! kind), each `(kind, text)` once.

use std::collections::HashMap;

/// Where a term comes from; it decides which tools can use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Source {
    /// A multi-word string quoted in backticks or double quotes.
    Phrase,
    /// The constant head of an error message (`ValueError: <head>: <value>`).
    MessageHead,
    /// A whole error message after `Exception: `.
    MessageFull,
    /// An identifier: dotted, snake_case, CamelCase, with digits, or a name written as code
    /// (called, `name(`, or alone in backticks).
    Identifier,
    /// A plain lowercase prose word (a paraphrase of what the code says).
    Word,
    /// A file path (from a traceback or the prose).
    Path,
    /// A function or class defined in a file the policy read (not from the issue).
    ResultName,
}

/// One extracted term.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Term {
    pub source: Source,
    pub text: String,
    /// Byte offset of the first occurrence divided by the text's length, in [0, 1].
    pub position: f64,
    /// Occurrences of this `(source, text)` in the issue.
    pub count: usize,
    pub in_traceback: bool,
    pub in_code: bool,
    pub in_title: bool,
}

/// Caps that keep the candidate set small (the first terms by position are kept).
const MAX_IDENTIFIERS: usize = 24;
const MAX_WORDS: usize = 24;
const MAX_PATHS: usize = 8;
const MIN_WORD_LEN: usize = 4;
const MAX_TERM_LEN: usize = 120;
/// Shortest called or backticked plain name taken as an identifier.
const MIN_CODE_NAME_LEN: usize = 3;

/// Python builtins: called everywhere, defined nowhere in a repository.
const BUILTINS: &[&str] = &[
    "abs",
    "all",
    "any",
    "bool",
    "bytes",
    "callable",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "filter",
    "float",
    "format",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "locals",
    "map",
    "max",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
];

/// Words too common in issue prose to be worth a grep.
const STOP_WORDS: &[&str] = &[
    "about",
    "after",
    "again",
    "also",
    "because",
    "been",
    "before",
    "being",
    "calling",
    "called",
    "could",
    "does",
    "each",
    "every",
    "expected",
    "fail",
    "fails",
    "first",
    "from",
    "have",
    "here",
    "into",
    "instead",
    "just",
    "last",
    "line",
    "most",
    "none",
    "only",
    "other",
    "over",
    "rest",
    "same",
    "seems",
    "should",
    "since",
    "some",
    "such",
    "than",
    "that",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "time",
    "traceback",
    "under",
    "unusual",
    "upgrade",
    "upgrading",
    "value",
    "very",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "will",
    "with",
    "without",
    "would",
    "your",
    "python",
    "true",
    "false",
    "self",
    "import",
    "return",
    "raise",
];

/// Extracts the terms of `text`; with [`super::ProxyConfig::code_names`], plain names the text
/// writes as code (called or alone in backticks) are identifiers too, and with
/// [`super::ProxyConfig::capitalised_words`] capitalised words (`Mathematica`) are prose words.
pub(crate) fn extract(text: &str, config: &super::ProxyConfig) -> Vec<Term> {
    let (code_names, capitalised_words) = (config.code_names, config.capitalised_words);
    let mut out =
        Collector { terms: Vec::new(), index: HashMap::new(), len: text.len().max(1), code_names, capitalised_words };
    let mut offset = 0usize;
    let mut in_code = false;
    let mut traceback = false;
    let mut seen_text = false;
    let lines: Vec<&str> = text.split('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let start = offset;
        offset += line.len() + 1;
        i += 1;
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            // A block is a traceback when one of its lines says so.
            traceback = in_code
                && lines[i..]
                    .iter()
                    .take_while(|l| !l.trim_start().starts_with("```"))
                    .any(|l| l.contains("Traceback (most recent call last)") || l.trim_start().starts_with("File \""));
            continue;
        }
        // The title is the first line with text: a SWE-bench problem statement, a commit subject
        // or a pull request's title come first, with or without a Markdown heading's `# `.
        let has_text = !line.trim().is_empty();
        let in_title = !seen_text && !in_code && has_text;
        seen_text |= has_text;
        if !in_code && is_trailer(line) {
            // `Co-authored-by: Name <id+user@users.noreply.github.com>`: people, not the issue.
            continue;
        }
        let ctx = Ctx { in_code, in_traceback: in_code && traceback, in_title };
        scan_line(&mut out, line, start, ctx);
    }
    finish(out.terms)
}

#[derive(Clone, Copy)]
struct Ctx {
    in_code: bool,
    in_traceback: bool,
    in_title: bool,
}

struct Collector {
    terms: Vec<Term>,
    index: HashMap<(Source, String), usize>,
    len: usize,
    /// Take names written as code as identifiers ([`code_name`]).
    code_names: bool,
    /// Take capitalised words (`Mathematica`) as prose words, lowercase ([`is_capitalised`]).
    capitalised_words: bool,
}

impl Collector {
    fn add(&mut self, source: Source, text: &str, at: usize, ctx: Ctx) {
        let text = text.trim();
        if text.is_empty() || text.len() > MAX_TERM_LEN {
            return;
        }
        let key = (source, text.to_owned());
        if let Some(&i) = self.index.get(&key) {
            let term = &mut self.terms[i];
            term.count += 1;
            term.in_traceback |= ctx.in_traceback;
            term.in_code |= ctx.in_code;
            term.in_title |= ctx.in_title;
            return;
        }
        self.index.insert(key, self.terms.len());
        self.terms.push(Term {
            source,
            text: text.to_owned(),
            position: (at as f64 / self.len as f64).min(1.0),
            count: 1,
            in_traceback: ctx.in_traceback,
            in_code: ctx.in_code,
            in_title: ctx.in_title,
        });
    }
}

fn scan_line(out: &mut Collector, line: &str, start: usize, ctx: Ctx) {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    // `File "/x/site-packages/pkg/mod.py", line 12, in method`
    if let Some(rest) = trimmed.strip_prefix("File \"")
        && let Some((path, tail)) = rest.split_once('"')
    {
        out.add(Source::Path, &relative_path(path), start + indent, ctx);
        if let Some(name) = tail.rsplit_once(" in ").map(|(_, n)| n.trim()) {
            scan_tokens(out, name, start + indent, ctx);
        }
        return;
    }
    // `ValueError: invalid retry budget: 'x'` in a code block.
    if ctx.in_code
        && let Some((exception, message)) = trimmed.split_once(": ")
        && is_exception_name(exception)
    {
        out.add(Source::Identifier, exception, start + indent, ctx);
        out.add(Source::MessageFull, message, start + indent + exception.len() + 2, ctx);
        if let Some((head, _)) = message.split_once(": ") {
            out.add(Source::MessageHead, head, start + indent + exception.len() + 2, ctx);
        } else {
            out.add(Source::MessageHead, message, start + indent + exception.len() + 2, ctx);
        }
        return;
    }
    for (open, close) in [('`', '`'), ('"', '"')] {
        for (at, quoted) in delimited(line, open, close) {
            if quoted.contains(' ') {
                out.add(Source::Phrase, quoted, start + at, ctx);
            } else if open == '`' && out.code_names && is_name(quoted) {
                // A single name in backticks is written as code (`Permutation`, `bell`).
                code_name(out, quoted, start + at, ctx);
            }
        }
    }
    scan_tokens(out, line, start, ctx);
}

/// A git trailer line (`Co-authored-by: …`, `Signed-off-by: …`): a capitalised word, more
/// dash-joined words, the last `by`, then `: `.
fn is_trailer(line: &str) -> bool {
    let Some((key, _)) = line.trim_start().split_once(": ") else { return false };
    key.starts_with(|c: char| c.is_ascii_uppercase())
        && key.ends_with("-by")
        && key.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-')
}

/// `name` is a plain identifier (letters, digits, `_`; not starting with a digit).
fn is_name(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A name the issue writes as code (called, or in backticks) is an identifier even when it
/// reads like a word (`bell(n)`, `trigsimp(f)`, `Permutation(...)`), unless it is a Python
/// builtin or too short to grep for.
fn code_name(out: &mut Collector, name: &str, at: usize, ctx: Ctx) {
    if name.len() >= MIN_CODE_NAME_LEN && !BUILTINS.contains(&name) && !STOP_WORDS.contains(&name) {
        out.add(Source::Identifier, name, at, ctx);
    }
}

/// Identifier-like tokens, prose words and paths of one line.
fn scan_tokens(out: &mut Collector, line: &str, start: usize, ctx: Ctx) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if !(c.is_ascii_alphabetic() || c == b'_') {
            i += 1;
            continue;
        }
        // A token: identifier characters, dots and slashes between them.
        let begin = i;
        while i < bytes.len()
            && (bytes[i].is_ascii_alphanumeric()
                || bytes[i] == b'_'
                || ((bytes[i] == b'.' || bytes[i] == b'/')
                    && i + 1 < bytes.len()
                    && (bytes[i + 1].is_ascii_alphabetic() || bytes[i + 1] == b'_')))
        {
            i += 1;
        }
        let token = &line[begin..i];
        // A token glued to a preceding digit or dot (`3.11`, `.venv`) is not a name.
        if begin > 0 && (bytes[begin - 1].is_ascii_digit() || bytes[begin - 1] == b'.') {
            continue;
        }
        // Nor is either side of an e-mail address (`jane@example.com` would be a dotted module
        // `example.com`). An `@` after anything else (a space, a backtick) is a decorator or a
        // mention: kept.
        let in_address = begin > 1
            && bytes[begin - 1] == b'@'
            && (bytes[begin - 2].is_ascii_alphanumeric() || matches!(bytes[begin - 2], b'.' | b'_' | b'+' | b'-'));
        if bytes.get(i) == Some(&b'@') || in_address {
            continue;
        }
        if out.code_names && bytes.get(i) == Some(&b'(') && !looks_rare(token) && is_name(token) {
            code_name(out, token, start + begin, ctx);
            continue;
        }
        classify(out, token, start + begin, ctx);
    }
}

fn classify(out: &mut Collector, token: &str, at: usize, ctx: Ctx) {
    if token.contains('/') {
        if token.rsplit('/').next().is_some_and(|f| f.contains('.')) {
            out.add(Source::Path, &relative_path(token), at, ctx);
        }
        return;
    }
    // `e.subs`, `self._print`, `sy.Matrix.hstack`: the receiver is the issue's own variable (or
    // its alias of the package), which no file of the repository names; the attribute is the name.
    if let Some((receiver, attribute)) = token.split_once('.')
        && is_receiver(receiver)
    {
        let at = at + receiver.len() + 1;
        if looks_rare(attribute) {
            out.add(Source::Identifier, attribute, at, ctx);
        } else if is_name(attribute) {
            code_name(out, attribute, at, ctx);
        }
        return;
    }
    if looks_rare(token) {
        out.add(Source::Identifier, token, at, ctx);
    } else if token.len() >= MIN_WORD_LEN
        && token.bytes().all(|b| b.is_ascii_lowercase())
        && !STOP_WORDS.contains(&token)
    {
        out.add(Source::Word, token, at, ctx);
    } else if out.capitalised_words && token.len() >= MIN_WORD_LEN && is_capitalised(token) {
        // `Mathematica parser`, `Zarr stores`: a proper noun (or a sentence's first word) is a
        // word too, as code spells it (`mathematica.py`, `backends/zarr.py`).
        let lower = token.to_ascii_lowercase();
        if !STOP_WORDS.contains(&lower.as_str()) {
            out.add(Source::Word, &lower, at, ctx);
        }
    }
}

/// An uppercase letter, then lowercase letters only (`Mathematica`, not `LaTeX` or `ASCII`).
fn is_capitalised(token: &str) -> bool {
    let mut bytes = token.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase()) && bytes.all(|b| b.is_ascii_lowercase())
}

/// Keeps the first terms of each capped kind (by position), in position order.
fn finish(terms: Vec<Term>) -> Vec<Term> {
    let (mut identifiers, mut words, mut paths) = (0, 0, 0);
    terms
        .into_iter()
        .filter(|t| {
            let (counter, cap) = match t.source {
                Source::Identifier => (&mut identifiers, MAX_IDENTIFIERS),
                Source::Word => (&mut words, MAX_WORDS),
                Source::Path => (&mut paths, MAX_PATHS),
                _ => return true,
            };
            *counter += 1;
            *counter <= cap
        })
        .collect()
}

/// Whether a token looks like a code name rather than an English word:
/// an underscore, a dot, a digit, or an uppercase letter after the first.
pub(crate) fn looks_rare(token: &str) -> bool {
    token.contains('_')
        || token.contains('.')
        || token.bytes().any(|b| b.is_ascii_digit())
        || token.bytes().skip(1).any(|b| b.is_ascii_uppercase())
}

/// The first part of a dotted name that is a variable, not a module: `self`, `cls`, or a
/// lowercase name of one or two letters (`e`, `f`, `sy`, `np`).
fn is_receiver(part: &str) -> bool {
    matches!(part, "self" | "cls") || (part.len() <= 2 && part.bytes().all(|b| b.is_ascii_lowercase()))
}

/// `ValueError`, `KeyError`, `RetryTimeout`, `Exception`.
fn is_exception_name(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        && (name.ends_with("Error") || name.ends_with("Exception") || name.ends_with("Warning"))
}

/// The repository-relative part of a path from a traceback: what follows
/// `site-packages/`, else the last two components of an absolute path.
fn relative_path(path: &str) -> String {
    if let Some((_, rest)) = path.rsplit_once("site-packages/") {
        return rest.to_owned();
    }
    let trimmed = path.trim_start_matches("./");
    if trimmed.starts_with('/') {
        let parts: Vec<&str> = trimmed.split('/').filter(|p| !p.is_empty()).collect();
        return parts[parts.len().saturating_sub(2)..].join("/");
    }
    trimmed.to_owned()
}

/// The non-empty strings between `open` and `close` on one line, with their byte offsets.
fn delimited(line: &str, open: char, close: char) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut rest = line;
    let mut base = 0;
    while let Some(a) = rest.find(open) {
        let after = &rest[a + open.len_utf8()..];
        let Some(b) = after.find(close) else { break };
        if b > 0 {
            out.push((base + a + 1, &after[..b]));
        }
        let consumed = a + open.len_utf8() + b + close.len_utf8();
        base += consumed;
        rest = &rest[consumed..];
    }
    out
}

/// Escapes regex metacharacters so `text` matches itself literally: the one escaping function
/// of the workspace, under the name the proxy's call sites use.
pub(crate) use rewardlab_sandbox::escape_regex as regex_literal;

/// `RetryPolicy` → `retry_policy`; a run of capitals is one word (`HTTPAdapter` →
/// `http_adapter`, `ASCII` → `ascii`), its last capital starting the next word when a lowercase
/// letter follows.
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1);
            let starts_word = prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
                || (prev.is_some_and(|p| p.is_ascii_uppercase()) && next.is_some_and(|n| n.is_ascii_lowercase()));
            if starts_word && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
