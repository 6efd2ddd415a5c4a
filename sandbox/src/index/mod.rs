//! The content index: the trigrams of every blob a tree reaches, shared by every commit.
//!
//! A blob id names its content, so the index is kept per *blob*, not per commit: the first
//! commit of a repository pays for its blobs, and a neighbouring commit only for the blobs it
//! changed. Each entry holds the blob's size, whether it is binary (a NUL byte, which grep skips
//! whole) and the sorted set of its distinct folded trigrams ([`grams`]). A grep turns its
//! pattern into a trigram [`Query`] ([`query`]) and reads only the files whose entries may
//! match; a file without an entry (not built yet, evicted, too large) is simply read and
//! scanned, so the index changes what is read, never what is found.
//!
//! # Building
//!
//! The first grep on a zero-disk view starts a background job (on rayon's pool) that builds
//! the entries the view's blobs lack, in parallel; the grep itself, and every one after it until
//! the job is done, use whatever entries exist and scan the rest, so a build never holds a call
//! past its deadline. [`crate::Repo::build_index`] builds for a list of commits in the calling
//! thread (parallel too), reporting progress, for callers that want the index ready before a run.
//!
//! # Memory bound
//!
//! Entries live in an LRU bounded by [`crate::StoreOptions::index_bytes`] (4 bytes per distinct
//! trigram plus a fixed overhead per blob; a 15 KB Python file has a few thousand trigrams). A
//! repository with thousands of commits evicts its least recently used blobs beyond the bound.
//! Once a view has looked up all its files it keeps its own list of entries (shared `Arc`s) for
//! its lifetime, so live trees can pin entries evicted from the LRU: the total is at most the
//! bound plus the entries of the trees alive at the time (`keep_recent_trees` plus those in use),
//! which share most blobs between commits. Nothing is persisted: a new process rebuilds.

pub(crate) mod grams;
pub(crate) mod query;

use std::{
    collections::HashSet,
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
};

use gix::ObjectId;
use lru::LruCache;
use rayon::prelude::*;

use crate::store::RepoShared;

pub(crate) use query::Query;

/// Blobs larger than this get an entry without trigrams: they are always read (and the grep's
/// size cap usually skips them anyway).
const MAX_INDEXED_BLOB: u64 = 16 << 20;
/// Fixed cost counted per entry besides its trigrams.
const ENTRY_OVERHEAD: usize = 64;

/// What the index knows of one blob.
#[derive(Debug)]
pub(crate) struct BlobEntry {
    /// The blob's size in bytes.
    pub(crate) size: u64,
    pub(crate) content: Content,
}

#[derive(Debug)]
pub(crate) enum Content {
    /// Text: its sorted, distinct, folded trigrams.
    Text(Box<[u32]>),
    /// It contains a NUL byte.
    Binary,
    /// Too large to index; always read.
    Unindexed,
}

impl BlobEntry {
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD + if let Content::Text(grams) = &self.content { grams.len() * 4 } else { 0 }
    }
}

/// Counters of one repository's content index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Blobs with an entry now.
    pub blobs: usize,
    /// Bytes the entries are counted at now (see the memory bound in the crate docs).
    pub bytes: usize,
    /// The bound on `bytes`.
    pub capacity_bytes: usize,
    /// Entries built over the index's life.
    pub built: u64,
    /// Entries evicted to stay within the bound.
    pub evicted: u64,
    /// Files greps did not read because their entry ruled them out.
    pub files_skipped: u64,
    /// Greps whose pattern gave a usable query.
    pub indexed_greps: u64,
}

/// Progress of [`crate::Repo::build_index`]: blobs done of the blobs to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexProgress {
    /// Blobs built (or found missing) so far.
    pub done: usize,
    /// Blobs this build had to do.
    pub total: usize,
}

/// The index of one repository (see the module docs).
#[derive(Debug)]
pub(crate) struct ContentIndex {
    capacity: usize,
    inner: Mutex<Inner>,
    /// Signalled whenever pending blobs finish, for builds waiting on another build's blobs.
    settled: Condvar,
    files_skipped: AtomicU64,
    indexed_greps: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    map: LruCache<ObjectId, Arc<BlobEntry>>,
    bytes: usize,
    built: u64,
    evicted: u64,
    /// Blobs some build is working on now.
    pending: HashSet<ObjectId>,
}

impl ContentIndex {
    /// An index bounded by `capacity` bytes; 0 disables it.
    pub(crate) fn new(capacity: usize) -> Self {
        ContentIndex {
            capacity,
            inner: Mutex::new(Inner {
                map: LruCache::unbounded(),
                bytes: 0,
                built: 0,
                evicted: 0,
                pending: HashSet::new(),
            }),
            settled: Condvar::new(),
            files_skipped: AtomicU64::new(0),
            indexed_greps: AtomicU64::new(0),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    pub(crate) fn stats(&self) -> IndexStats {
        let inner = self.lock();
        IndexStats {
            blobs: inner.map.len(),
            bytes: inner.bytes,
            capacity_bytes: self.capacity,
            built: inner.built,
            evicted: inner.evicted,
            files_skipped: self.files_skipped.load(Ordering::Relaxed),
            indexed_greps: self.indexed_greps.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn record_grep(&self, skipped: usize) {
        self.indexed_greps.fetch_add(1, Ordering::Relaxed);
        self.files_skipped.fetch_add(skipped as u64, Ordering::Relaxed);
    }

    /// The entries of `ids` (in order) that exist now, and whether all of them do.
    pub(crate) fn lookup(&self, ids: &[Option<ObjectId>]) -> (Vec<Option<Arc<BlobEntry>>>, bool) {
        let mut inner = self.lock();
        let mut complete = true;
        let found = ids
            .iter()
            .map(|id| {
                let entry = id.as_ref().and_then(|id| inner.map.get(id).cloned());
                complete &= entry.is_some() || id.is_none();
                entry
            })
            .collect();
        (found, complete)
    }

    /// Builds the entries `ids` lack, in parallel on rayon's pool, then, when `wait`, waits for
    /// blobs another build was already doing. Blobs missing from the object store get no entry
    /// (a grep reading them reports the missing object, as without the index). Background builds
    /// run on the pool and never wait: a pool thread blocked on blobs that need a pool thread to
    /// finish would deadlock a one-thread pool.
    pub(crate) fn build(
        &self,
        shared: &RepoShared,
        ids: &[ObjectId],
        wait: bool,
        progress: Option<&(dyn Fn(IndexProgress) + Sync)>,
    ) {
        if !self.enabled() {
            return;
        }
        let (mine, theirs) = {
            let mut inner = self.lock();
            let mut mine = Vec::new();
            let mut theirs = Vec::new();
            let mut seen = HashSet::new();
            for id in ids {
                if !seen.insert(*id) || inner.map.contains(id) {
                    continue;
                }
                if inner.pending.insert(*id) { mine.push(*id) } else { theirs.push(*id) }
            }
            (mine, theirs)
        };
        let total = mine.len();
        let done = AtomicUsize::new(0);
        let report_every = (total / 20).max(64);
        mine.par_iter().for_each_init(
            || (shared.thread_local(), grams::Extractor::new()),
            |(repo, extractor), id| {
                let entry = build_entry(repo, extractor, shared, *id);
                self.finish(*id, entry);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(progress) = progress
                    && (n.is_multiple_of(report_every) || n == total)
                {
                    progress(IndexProgress { done: n, total });
                }
            },
        );
        if !wait {
            return;
        }
        let mut inner = self.lock();
        while theirs.iter().any(|id| inner.pending.contains(id)) {
            inner = self.settled.wait(inner).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn finish(&self, id: ObjectId, entry: Option<BlobEntry>) {
        let mut inner = self.lock();
        inner.pending.remove(&id);
        if let Some(entry) = entry {
            let cost = entry.cost();
            if let Some(old) = inner.map.put(id, Arc::new(entry)) {
                inner.bytes -= old.cost();
            }
            inner.bytes += cost;
            inner.built += 1;
            while inner.bytes > self.capacity {
                match inner.map.pop_lru() {
                    Some((_, evicted)) => {
                        inner.bytes -= evicted.cost();
                        inner.evicted += 1;
                    }
                    None => break,
                }
            }
        }
        drop(inner);
        self.settled.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves the map and its byte count consistent.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Reads one blob (through the blob cache, which a grep of the same tree then hits) and
/// indexes it; `None` when it is missing from the object store.
fn build_entry(
    repo: &gix::Repository,
    extractor: &mut grams::Extractor,
    shared: &RepoShared,
    id: ObjectId,
) -> Option<BlobEntry> {
    let data = match shared.blobs.get(&id) {
        Some(data) => data,
        None => {
            let size = repo.find_header(id).ok()?.size();
            if size > MAX_INDEXED_BLOB {
                return Some(BlobEntry { size, content: Content::Unindexed });
            }
            let data: Arc<[u8]> = Arc::from(repo.find_blob(id).ok()?.take_data());
            shared.blobs.insert(id, data.clone());
            data
        }
    };
    let content = if data.contains(&0) { Content::Binary } else { Content::Text(extractor.grams(&data)) };
    Some(BlobEntry { size: data.len() as u64, content })
}
