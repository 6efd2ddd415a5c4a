//! The files of a commit as the lexical baselines read them, with the work
//! per file shared across commits: SWE-bench instances and mined tasks sit
//! at many commits of the same repository, which share almost every blob, so
//! each blob is read, tokenized and scanned for definitions once
//! ([`TermCache`]) however many commits contain it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::{Bm25Error, tokenize::for_each_token};

/// What the baselines need of one blob's content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobTerms {
    /// Each token of the content with its count, sorted by token.
    pub counts: Vec<(String, u32)>,
    /// Tokens of the content, repetitions included.
    pub length: u32,
    /// Names the content defines (`def`/`class` lines), lowercased, sorted, once each.
    pub defined: Vec<String>,
}

/// One file of a commit: its path and its blob's terms (`None` for a binary file).
#[derive(Clone, Debug)]
pub struct CommitFile {
    /// Repository-relative path.
    pub path: String,
    /// The content's terms; binary blobs (a NUL byte) have none.
    pub terms: Option<Arc<BlobTerms>>,
}

/// A lexical index over the files of one commit: what BM25
/// ([`super::Bm25Index`]) and the grep heuristic
/// ([`crate::heuristic::GrepHeuristic`]) are both built from and both report,
/// so a baseline reads every commit the same way.
pub trait FileIndex: Sized {
    /// The index's knobs.
    type Params;

    /// Indexes the text files of a commit; files without terms (binary ones) are skipped.
    fn from_files(files: &[CommitFile], params: Self::Params) -> Self;

    /// Document paths in index order.
    fn paths(&self) -> &[String];

    /// Indexes every non-binary file of commit `rev` (a full hex id or a
    /// reference name) in the git repository at `repo` (bare or not), as
    /// [`TermCache::commit_files`] reads them.
    fn from_commit(repo: &Path, rev: &str, params: Self::Params) -> Result<Self, Bm25Error> {
        Self::from_commit_cached(repo, rev, params, &TermCache::default())
    }

    /// [`FileIndex::from_commit`] with each blob's terms taken from `cache`
    /// (and added to it): the same index, with each blob tokenized once
    /// however many commits contain it.
    fn from_commit_cached(repo: &Path, rev: &str, params: Self::Params, cache: &TermCache) -> Result<Self, Bm25Error> {
        Ok(Self::from_files(&cache.commit_files(repo, rev)?, params))
    }

    /// Number of documents.
    fn len(&self) -> usize {
        self.paths().len()
    }

    /// True when nothing is indexed.
    fn is_empty(&self) -> bool {
        self.paths().is_empty()
    }
}

/// Blob id → its terms, shared by every commit read through it. Memory grows
/// with the distinct blobs read (a few KiB each); drop it with the baseline.
#[derive(Debug, Default)]
pub struct TermCache {
    blobs: Mutex<HashMap<gix::ObjectId, Option<Arc<BlobTerms>>>>,
    /// Read a blob missing from the object store as a file without terms (counted) instead of
    /// failing: [`TermCache::skipping_missing`].
    skip_missing: bool,
    missing: AtomicUsize,
}

impl TermCache {
    /// A cache that reads a blob missing from the object store (an incomplete clone, a
    /// repository snapshot without its largest files) as a file without terms, as a binary one,
    /// and counts it ([`TermCache::missing`]), instead of failing the commit.
    pub fn skipping_missing() -> Self {
        TermCache { skip_missing: true, ..TermCache::default() }
    }

    /// Distinct blobs read as missing so far (only with [`TermCache::skipping_missing`]).
    pub fn missing(&self) -> usize {
        self.missing.load(Ordering::Relaxed)
    }

    /// Distinct blobs read so far.
    pub fn len(&self) -> usize {
        self.blobs.lock().map_or(0, |b| b.len())
    }

    /// True before any blob was read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every file of commit `rev` (a full hex id or a reference name) of the
    /// repository at `repo`, sorted by path.
    pub fn commit_files(&self, repo: &Path, rev: &str) -> Result<Vec<CommitFile>, Bm25Error> {
        let revision = |detail: String| Bm25Error::Revision { path: repo.to_path_buf(), rev: rev.to_string(), detail };
        let repository =
            gix::open(repo).map_err(|e| Bm25Error::Open { path: repo.to_path_buf(), detail: e.to_string() })?;
        // A full hex id or a reference name (`main`, `refs/tags/v0.2.0`):
        // full revision syntax would need gix's `revision` feature.
        let entries = {
            let commit = match gix::ObjectId::from_hex(rev.as_bytes()) {
                Ok(id) => repository.find_commit(id).map_err(|e| revision(e.to_string()))?,
                Err(_) => repository
                    .find_reference(rev)
                    .map_err(|e| revision(e.to_string()))?
                    .peel_to_commit()
                    .map_err(|e| revision(e.to_string()))?,
            };
            let tree = commit.tree().map_err(|e| revision(e.to_string()))?;
            let entries = tree.traverse().breadthfirst.files().map_err(|e| revision(e.to_string()))?;
            entries.into_iter().filter(|e| e.mode.is_blob()).collect::<Vec<_>>()
        };
        // The blobs not read yet are read and tokenized in parallel (each thread with its own
        // handle on the repository); a neighbouring commit then finds nearly all of them here.
        let missing: Vec<usize> = {
            let blobs = self.blobs.lock().map_err(|_| revision("the term cache is poisoned".to_owned()))?;
            let mut seen = std::collections::HashSet::new();
            (0..entries.len())
                .filter(|&i| !blobs.contains_key(&entries[i].oid) && seen.insert(entries[i].oid))
                .collect()
        };
        let shared = repository.into_sync();
        let read: Vec<(gix::ObjectId, Option<Arc<BlobTerms>>)> = missing
            .par_iter()
            .map_init(
                || shared.to_thread_local(),
                |repository, &i| {
                    let entry = &entries[i];
                    let blob = match repository.find_blob(entry.oid) {
                        Ok(blob) => blob,
                        // Asked only of a blob that failed to read: present blobs pay no lookup.
                        Err(_) if self.skip_missing && !repository.has_object(entry.oid) => {
                            self.missing.fetch_add(1, Ordering::Relaxed);
                            return Ok((entry.oid, None));
                        }
                        Err(e) => {
                            return Err(Bm25Error::Blob {
                                path: repo.to_path_buf(),
                                rev: rev.to_string(),
                                file: entry.filepath.to_string(),
                                detail: e.to_string(),
                            });
                        }
                    };
                    let terms = (!blob.data.contains(&0))
                        .then(|| Arc::new(BlobTerms::of(&String::from_utf8_lossy(&blob.data))));
                    Ok((entry.oid, terms))
                },
            )
            .collect::<Result<_, Bm25Error>>()?;
        let mut blobs = self.blobs.lock().map_err(|_| revision("the term cache is poisoned".to_owned()))?;
        blobs.extend(read);
        let mut files: Vec<CommitFile> = entries
            .iter()
            .map(|entry| CommitFile {
                path: entry.filepath.to_string(),
                terms: blobs.get(&entry.oid).cloned().flatten(),
            })
            .collect();
        drop(blobs);
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(files)
    }
}

impl BlobTerms {
    /// The terms of `text`.
    pub fn of(text: &str) -> BlobTerms {
        let mut length = 0u32;
        let mut counts: HashMap<String, u32> = HashMap::new();
        for_each_token(text, |token| {
            length = length.saturating_add(1);
            match counts.get_mut(token) {
                Some(count) => *count += 1,
                None => {
                    counts.insert(token.to_owned(), 1);
                }
            }
        });
        let mut counts: Vec<(String, u32)> = counts.into_iter().collect();
        counts.sort_unstable();
        let mut defined: Vec<String> = crate::heuristic::defined_names(text).map(str::to_lowercase).collect();
        defined.sort_unstable();
        defined.dedup();
        BlobTerms { counts, length, defined }
    }
}
