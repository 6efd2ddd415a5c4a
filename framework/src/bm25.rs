//! BM25 over the files of a commit: the lexical baseline ("BM25 top-2" in
//! seed 000, Table 2) that retrieval policies are compared against.
//!
//! Each file is one document: its path followed by its content (path tokens
//! count, as in SWE-bench's BM25 retrieval). Scoring is Okapi BM25,
//!
//! ```text
//! score(D, Q) = Σ_{t ∈ Q} idf(t) · tf(t, D) · (k1 + 1) / (tf(t, D) + k1 · (1 − b + b · |D| / avgdl))
//! idf(t)      = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))
//! ```
//!
//! with `k1 = 1.2` and `b = 0.75` by default. The sum runs over query tokens
//! with repetition, so a term the issue repeats weighs more. This idf (Lucene's)
//! is positive even for a term in every document, so no term ever lowers a
//! score; a term in no document contributes nothing. Tokens come from
//! [`tokenize`].

pub mod corpus;
mod tokenize;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use corpus::{BlobTerms, CommitFile, FileIndex, TermCache};
pub use tokenize::{STOPWORDS, for_each_token, tokenize};

/// BM25's free parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f64,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// A ranked file.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The file's path as indexed (repository-relative for [`FileIndex::from_commit`]).
    pub path: String,
    /// Its BM25 score for the query, ≥ 0.
    pub score: f64,
}

/// BM25 over documents, inverted when built: each term maps to the documents containing it
/// with its frequency there (content and path together), in document order. A query then reads
/// only its terms' postings. (Scanning every document for every query term, as this index did
/// first, cost two string binary searches per document and term, over a hundred distinct terms
/// per SWE-bench issue: most of a real study's baseline time.)
#[derive(Clone, Debug)]
pub struct Bm25Index {
    params: Bm25Params,
    paths: Vec<String>,
    lengths: Vec<f64>,
    average_length: f64,
    postings: Postings<u32>,
}

/// Term → the documents containing it, each with a value (a frequency, or nothing), in
/// document order: the inverted form both baselines index a commit in.
#[derive(Clone, Debug)]
pub(crate) struct Postings<V> {
    lists: foldhash::HashMap<String, Vec<(u32, V)>>,
}

impl<V> Default for Postings<V> {
    fn default() -> Self {
        Postings { lists: foldhash::HashMap::default() }
    }
}

impl<V> Postings<V> {
    /// Records `term` in document `doc` with `value`. Documents are added in order, so a second
    /// entry for the same document (its path after its content) meets the first at the end of
    /// the list and is combined into it with `merge`.
    pub(crate) fn add(&mut self, term: &str, doc: u32, value: V, merge: impl FnOnce(&mut V, V)) {
        match self.lists.get_mut(term) {
            Some(list) => match list.last_mut() {
                Some((last, current)) if *last == doc => merge(current, value),
                _ => list.push((doc, value)),
            },
            None => {
                self.lists.insert(term.to_owned(), vec![(doc, value)]);
            }
        }
    }

    /// The documents containing `term`, in document order.
    pub(crate) fn get(&self, term: &str) -> &[(u32, V)] {
        self.lists.get(term).map_or(&[], Vec::as_slice)
    }
}

/// Errors of reading a commit's files ([`FileIndex::from_commit`], [`TermCache::commit_files`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Bm25Error {
    #[error("cannot open repository {path}: {detail}")]
    /// The path is not a git repository gix can open.
    Open {
        /// The repository path.
        path: PathBuf,
        /// gix's message.
        detail: String,
    },
    #[error("cannot read revision `{rev}` of {path}: {detail}")]
    /// The revision does not name a commit, or its tree cannot be walked.
    Revision {
        /// The repository path.
        path: PathBuf,
        /// The revision asked for.
        rev: String,
        /// gix's message.
        detail: String,
    },
    #[error("cannot read `{file}` at `{rev}` of {path}: {detail}")]
    /// A file of the commit's tree cannot be read.
    Blob {
        /// The repository path.
        path: PathBuf,
        /// The revision being indexed.
        rev: String,
        /// The file's path in the tree.
        file: String,
        /// gix's message.
        detail: String,
    },
}

impl Bm25Index {
    /// Indexes `(path, text)` documents; the text is indexed as given.
    pub fn from_documents<I, P, T>(documents: I, params: Bm25Params) -> Bm25Index
    where
        I: IntoIterator<Item = (P, T)>,
        P: Into<String>,
        T: AsRef<str>,
    {
        let docs = documents.into_iter().map(|(path, text)| {
            let terms = Arc::new(BlobTerms::of(text.as_ref()));
            (path.into(), terms, Vec::new())
        });
        Bm25Index::build(docs, params)
    }

    fn build(
        docs: impl Iterator<Item = (String, Arc<BlobTerms>, Vec<(String, u32)>)>,
        params: Bm25Params,
    ) -> Bm25Index {
        let mut index = Bm25Index {
            params,
            paths: Vec::new(),
            lengths: Vec::new(),
            average_length: 0.0,
            postings: Postings::default(),
        };
        for (path, terms, path_counts) in docs {
            let doc = u32::try_from(index.paths.len()).unwrap_or(u32::MAX);
            for (term, count) in terms.counts.iter().chain(&path_counts) {
                index.postings.add(term, doc, *count, |n, more| *n += more);
            }
            let path_length: u32 = path_counts.iter().map(|(_, n)| n).sum();
            index.lengths.push(f64::from(terms.length + path_length));
            index.paths.push(path);
        }
        let total: f64 = index.lengths.iter().sum();
        index.average_length = if index.lengths.is_empty() { 0.0 } else { total / index.lengths.len() as f64 };
        index
    }

    /// Inverse document frequency of an already tokenized `term`; 0 for a
    /// term no document contains.
    pub fn idf(&self, term: &str) -> f64 {
        let n = self.postings.get(term).len() as f64;
        if n == 0.0 {
            return 0.0;
        }
        let total = self.paths.len() as f64;
        (1.0 + (total - n + 0.5) / (n + 0.5)).ln()
    }

    /// BM25 score of every document for `query`, in index order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.paths.len()];
        let Bm25Params { k1, b } = self.params;
        for term in tokenize(query) {
            let tfs = self.postings.get(&term);
            if tfs.is_empty() {
                continue;
            }
            let total = self.paths.len() as f64;
            let n = tfs.len() as f64;
            let idf = (1.0 + (total - n + 0.5) / (n + 0.5)).ln();
            for &(doc, tf) in tfs {
                let doc = doc as usize;
                let tf = f64::from(tf);
                let relative = if self.average_length > 0.0 { self.lengths[doc] / self.average_length } else { 1.0 };
                scores[doc] += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * relative));
            }
        }
        scores
    }

    /// The `k` best documents with a positive score, best first; ties are
    /// broken by path so the ranking is deterministic.
    pub fn top_k(&self, query: &str, k: usize) -> Vec<Hit> {
        top_hits(self.scores(query).into_iter().zip(&self.paths), k)
    }
}

impl FileIndex for Bm25Index {
    type Params = Bm25Params;

    /// Indexes the text files of a commit, each as its path's tokens followed by its content's.
    fn from_files(files: &[CommitFile], params: Bm25Params) -> Bm25Index {
        let docs = files.iter().filter_map(|file| {
            let terms = file.terms.clone()?;
            let mut path_counts: HashMap<String, u32> = HashMap::new();
            for token in tokenize(&file.path) {
                *path_counts.entry(token).or_default() += 1;
            }
            let mut path_counts: Vec<(String, u32)> = path_counts.into_iter().collect();
            path_counts.sort_unstable();
            Some((file.path.clone(), terms, path_counts))
        });
        Bm25Index::build(docs, params)
    }

    fn paths(&self) -> &[String] {
        &self.paths
    }
}

/// The `k` best of `(score, path)` pairs with a positive score, best first,
/// ties broken by path so the ranking is deterministic: how every baseline
/// ranks its documents.
pub(crate) fn top_hits<'a>(scored: impl Iterator<Item = (f64, &'a String)>, k: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> =
        scored.filter(|(score, _)| *score > 0.0).map(|(score, path)| Hit { path: path.clone(), score }).collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)));
    hits.truncate(k);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Bm25Index {
        Bm25Index::from_documents(
            [
                ("retry.py", "def backoff_delay(budget): raise ValueError('invalid retry budget')"),
                ("cache.py", "class TokenCache: def refresh_entry(key): return key"),
                ("client.py", "retry retry retry client send request"),
                (
                    "long.py",
                    "retry plus a great many unrelated words about caching storage parsing and scheduling jobs",
                ),
            ],
            Bm25Params::default(),
        )
    }

    #[test]
    fn exact_identifier_ranks_its_file_first() {
        let index = corpus();
        let hits = index.top_k("backoff_delay fails", 2);
        assert_eq!(hits[0].path, "retry.py");
        assert_eq!(hits.len(), 1, "only retry.py mentions backoff or delay: {hits:?}");
    }

    #[test]
    fn term_frequency_saturates_and_length_normalises() {
        let index = corpus();
        let scores = index.scores("retry");
        let (retry, client, long) = (scores[0], scores[2], scores[3]);
        // client.py repeats the term, so it wins, but by less than 3x.
        assert!(client > retry && client < 3.0 * retry, "{scores:?}");
        // One mention in a long document counts less than in a short one.
        assert!(long < retry, "{scores:?}");
    }

    #[test]
    fn idf_edge_cases() {
        let index = corpus();
        assert_eq!(index.idf("nonexistent"), 0.0);
        let everywhere = Bm25Index::from_documents([("a", "common x1"), ("b", "common y1")], Bm25Params::default());
        let common = everywhere.idf("common");
        assert!(common > 0.0, "a term in every document keeps a small positive idf");
        assert!(everywhere.idf("x1") > common);
        assert!(index.idf("retry") < index.idf("backoff"));
    }

    #[test]
    fn empty_corpus_and_empty_query() {
        let empty = Bm25Index::from_documents(Vec::<(String, String)>::new(), Bm25Params::default());
        assert!(empty.is_empty());
        assert!(empty.top_k("anything", 3).is_empty());
        assert!(corpus().top_k("", 3).is_empty());
        assert!(corpus().top_k("the of and", 3).is_empty(), "stopwords only");
    }

    #[test]
    fn repeated_query_terms_weigh_more() {
        let index = corpus();
        let once = index.scores("refresh retry");
        let many = index.scores("refresh retry retry retry retry retry retry");
        assert!(once[1] > once[0], "{once:?}");
        assert!(many[0] > many[1], "{many:?}");
        assert!((many[0] - 6.0 * once[0]).abs() < 1e-9, "each repetition adds the same amount");
    }

    #[test]
    fn ties_break_by_path() {
        let index = Bm25Index::from_documents([("b.py", "token"), ("a.py", "token")], Bm25Params::default());
        let hits = index.top_k("token", 2);
        assert_eq!(hits[0].path, "a.py");
        assert_eq!(hits[0].score, hits[1].score);
    }
}
