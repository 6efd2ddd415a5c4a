//! A non-learned grep heuristic: the second baseline beside BM25 that a
//! learned locator has to beat (issue 14, item 4).
//!
//! It does what a developer does first with an issue: take the identifiers
//! it names, grep the tree for each, trust the rare ones, and open the file
//! that *defines* the name. Concretely, for a commit's files:
//!
//! ```text
//! score(f) = Σ_{t ∈ T(issue) ∩ T(f)} w(t) · idf(t)  +  bonus · Σ_{t ∈ T(issue) ∩ D(f)} w(t) · idf(t)
//! idf(t)   = ln(N / n(t))          n(t): files containing t, N: files
//! w(t)     = code_weight when the issue writes t like code, else 1
//! ```
//!
//! - `T(x)` is the *set* of tokens of `x`, from BM25's tokenizer
//!   ([`crate::bm25::tokenize`]: whole identifiers and their subwords,
//!   lowercase, stopwords dropped); a file's tokens include its path. Term
//!   frequency is ignored on purpose: a grep hit is a hit.
//! - A term is written *like code* when the issue word it is the whole of
//!   has an inner `_` or capital, a digit, is called (`name(`), dotted
//!   (`a.name`, `name.b`) or in backticks.
//! - `D(f)` are the names `f` defines: `def name`, `async def name` and
//!   `class name` at any indentation, and `name =` / `name:` at column 0
//!   (module-level assignments), lowercased. Defining a name the issue uses
//!   is the strongest single signal of the file to change.
//! - A term in every file has idf 0 and counts for nothing.
//! - Only *source files* are answers by default
//!   ([`HeuristicParams::source_files_only`]): files with a programming
//!   language's extension that are not tests (a `test`/`tests`/`testing`
//!   directory, `test_*`, `*_test.*`, `*_tests.*`, `conftest.py`). Every file
//!   still counts for idf. A developer greps the code, not the changelog: on
//!   real repositories a changelog or a long documentation page mentions most
//!   of an issue's words and would otherwise win nearly every time (on
//!   pytest's SWE-bench Lite instances, `CHANGELOG.rst` was the top-1 of 7 of
//!   the first 8), and SWE-bench's gold patches never change tests.
//!
//! The API mirrors [`crate::bm25::Bm25Index`] (`from_documents`, `scores`,
//! `top_k` returning [`Hit`]s, ties broken by path, and the commit reading of
//! [`FileIndex`] they share), so a study prints its row beside BM25's; the heuristic's own answer size
//! is [`HeuristicParams::top_k`] (1 by default).

use std::collections::HashSet;
use std::sync::Arc;

use crate::bm25::{BlobTerms, CommitFile, FileIndex, Hit, Postings, tokenize, top_hits};
/// The source-file rule (one definition, in the protocol crate, shared with the proxy policy).
pub use rewardlab_protocol::paths::is_source_file;

/// The heuristic's knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeuristicParams {
    /// Weight of a defined term relative to a mere mention (added on top of it).
    pub definition_bonus: f64,
    /// Weight of a term the issue writes like code, relative to a prose word.
    pub code_weight: f64,
    /// How many files the heuristic answers with.
    pub top_k: usize,
    /// Answer with source files only (see the module docs); all files when false.
    pub source_files_only: bool,
}

impl Default for HeuristicParams {
    fn default() -> Self {
        HeuristicParams { definition_bonus: 2.0, code_weight: 2.0, top_k: 1, source_files_only: true }
    }
}

/// A grep-and-definition index over the files of one commit.
#[derive(Clone, Debug)]
pub struct GrepHeuristic {
    params: HeuristicParams,
    paths: Vec<String>,
    /// Whether each document is a source file (see the module docs), in index order.
    source: Vec<bool>,
    /// Term → the documents containing it (in content or path), in document order: queries
    /// read only their terms' lists (see [`crate::bm25::Bm25Index`]).
    containing: Postings<()>,
    /// Defined name (lowercase) → the documents defining it, in document order.
    defining: Postings<()>,
}

impl GrepHeuristic {
    /// Indexes `(path, content)` documents (the path is tokenized with the content).
    pub fn from_documents<I, P, T>(documents: I, params: HeuristicParams) -> GrepHeuristic
    where
        I: IntoIterator<Item = (P, T)>,
        P: Into<String>,
        T: AsRef<str>,
    {
        let files: Vec<CommitFile> = documents
            .into_iter()
            .map(|(path, text)| CommitFile { path: path.into(), terms: Some(Arc::new(BlobTerms::of(text.as_ref()))) })
            .collect();
        GrepHeuristic::from_files(&files, params)
    }

    /// The documents containing an already tokenized `term` (in content or path).
    fn containing(&self, term: &str) -> impl Iterator<Item = usize> + '_ {
        self.containing.get(term).iter().map(|&(doc, ())| doc as usize)
    }

    /// The documents defining `name` (lowercase).
    fn defining(&self, name: &str) -> impl Iterator<Item = usize> + '_ {
        self.defining.get(name).iter().map(|&(doc, ())| doc as usize)
    }

    /// Changes the knobs without reindexing (the index does not depend on them).
    pub fn set_params(&mut self, params: HeuristicParams) {
        self.params = params;
    }

    /// `ln(N / n(t))` of an already tokenized term; 0 for a term in no file or in every file.
    pub fn idf(&self, term: &str) -> f64 {
        let n = self.containing.get(term).len();
        if n == 0 {
            return 0.0;
        }
        (self.paths.len() as f64 / n as f64).ln()
    }

    /// The files that define `name` (compared lowercased).
    pub fn definers(&self, name: &str) -> Vec<&str> {
        let name = name.to_lowercase();
        self.defining(&name).map(|d| self.paths[d].as_str()).collect()
    }

    /// The score of every document for `issue`, in index order.
    pub fn scores(&self, issue: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.paths.len()];
        for (term, code_like) in issue_terms(issue) {
            let weight = self.idf(&term) * if code_like { self.params.code_weight } else { 1.0 };
            if weight <= 0.0 {
                continue;
            }
            for doc in self.containing(&term) {
                scores[doc] += weight;
            }
            for doc in self.defining(&term) {
                scores[doc] += self.params.definition_bonus * weight;
            }
        }
        scores
    }

    /// The `k` best documents with a positive score, best first, ties by
    /// path; only source files when [`HeuristicParams::source_files_only`].
    pub fn top_k(&self, issue: &str, k: usize) -> Vec<Hit> {
        let scored = self.scores(issue).into_iter().zip(&self.paths).zip(&self.source);
        let answers = scored.filter(|(_, source)| **source || !self.params.source_files_only).map(|(hit, _)| hit);
        top_hits(answers, k)
    }

    /// The heuristic's answer: its [`HeuristicParams::top_k`] best files.
    pub fn locate(&self, issue: &str) -> Vec<String> {
        self.top_k(issue, self.params.top_k).into_iter().map(|h| h.path).collect()
    }
}

impl FileIndex for GrepHeuristic {
    type Params = HeuristicParams;

    /// Indexes the text files of a commit: a file's terms are its path's tokens and its content's.
    fn from_files(files: &[CommitFile], params: HeuristicParams) -> GrepHeuristic {
        let mut index = GrepHeuristic {
            params,
            paths: Vec::new(),
            source: Vec::new(),
            containing: Postings::default(),
            defining: Postings::default(),
        };
        for file in files {
            let Some(terms) = &file.terms else { continue };
            let doc = u32::try_from(index.paths.len()).unwrap_or(u32::MAX);
            // A term in both content and path is one entry: the second add meets the first.
            for (term, _) in &terms.counts {
                index.containing.add(term, doc, (), |_, _| {});
            }
            for token in tokenize(&file.path) {
                index.containing.add(&token, doc, (), |_, _| {});
            }
            for name in &terms.defined {
                index.defining.add(name, doc, (), |_, _| {});
            }
            index.source.push(is_source_file(&file.path));
            index.paths.push(file.path.clone());
        }
        index
    }

    fn paths(&self) -> &[String] {
        &self.paths
    }
}

/// The distinct tokens of an issue, each with whether the issue writes it like code.
pub fn issue_terms(issue: &str) -> Vec<(String, bool)> {
    let mut code: HashSet<String> = HashSet::new();
    let bytes = issue.as_bytes();
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut in_backticks = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            in_backticks = !in_backticks;
            i += 1;
            continue;
        }
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        let word = &issue[start..i];
        let before = start.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i).copied();
        let dotted_before = before == Some(b'.') && start >= 2 && is_word(bytes[start - 2]);
        let dotted_after = after == Some(b'.') && bytes.get(i + 1).copied().is_some_and(is_word);
        let trimmed = word.trim_matches('_');
        let shaped = trimmed.contains('_')
            || trimmed.bytes().skip(1).any(|c| c.is_ascii_uppercase())
            || trimmed.bytes().any(|c| c.is_ascii_digit());
        if in_backticks || shaped || after == Some(b'(') || dotted_before || dotted_after {
            // The whole identifier is the first token whenever the word has several parts.
            if let Some(whole) = tokenize(word).into_iter().next() {
                code.insert(whole);
            }
        }
    }
    let mut seen = HashSet::new();
    tokenize(issue)
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .map(|t| {
            let like_code = code.contains(&t);
            (t, like_code)
        })
        .collect()
}

/// Names a file defines: `def`/`async def`/`class` names at any indentation,
/// and module-level `name =` or `name:` assignments.
pub(crate) fn defined_names(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let stripped = line.trim_start();
        let indented = stripped.len() != line.len();
        let rest = stripped.strip_prefix("async ").unwrap_or(stripped);
        if let Some(rest) = rest.strip_prefix("def ").or_else(|| rest.strip_prefix("class ")) {
            return identifier_prefix(rest.trim_start());
        }
        if indented {
            return None;
        }
        let name = identifier_prefix(line)?;
        let after = line[name.len()..].trim_start();
        let assigns = (after.starts_with('=') && !after.starts_with("==")) || after.starts_with(':');
        let keyword = matches!(name, "if" | "else" | "elif" | "for" | "while" | "try" | "except" | "finally" | "with");
        (assigns && !keyword).then_some(name)
    })
}

/// The identifier at the start of `text`, if it starts with one.
fn identifier_prefix(text: &str) -> Option<&str> {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    let name = &text[..end];
    (!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit())).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_and_module_assignments() {
        let text = "import os\nclass Widget(Base):\n    def render(self):\n        x = 1\nasync def fetch():\n    pass\nMAX_SIZE = 3\nname: int = 4\nif a == b:\n    y = 2\nelse:\n    pass\n";
        let names: Vec<&str> = defined_names(text).collect();
        assert_eq!(names, ["Widget", "render", "fetch", "MAX_SIZE", "name"]);
    }

    #[test]
    fn code_shaped_words_are_marked() {
        let terms = issue_terms("Calling `frobnicate` on a SafeDict breaks parse_headers(x) and os.path here.");
        let code: Vec<&str> = terms.iter().filter(|(_, c)| *c).map(|(t, _)| t.as_str()).collect();
        assert_eq!(code, ["frobnicate", "safedict", "parse_headers", "os", "path"]);
        assert!(terms.iter().any(|(t, c)| t == "calling" && !c));
        assert!(terms.iter().any(|(t, c)| t == "here" && !c), "a sentence's full stop is not a dot");
    }
}
