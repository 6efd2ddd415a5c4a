//! The content index: the trigrams of every blob a tree reaches, shared by every commit.
//!
//! A blob id names its content, so the index is kept per *blob*, not per commit: the first
//! commit of a repository pays for its blobs, and a neighbouring commit only for the blobs it
//! changed. Each entry holds the blob's size and whether it is binary (a NUL byte, which grep
//! skips whole); a text blob's distinct folded trigrams ([`grams`]) go into the repository's
//! posting lists ([`postings`]: trigram → the slots of the blobs that contain it). A grep turns
//! its pattern into a trigram [`Query`] ([`query`]), evaluates it once over the lists into the
//! set of blobs that cannot match ([`ContentIndex::skip_set`]), and reads only the other files;
//! a file without an entry (not built yet, evicted, too large) is simply read and scanned, so
//! the index changes what is read, never what is found.
//!
//! # Building
//!
//! The first grep on a zero-disk view whose blobs the index lacks starts a background job that
//! builds those entries, in parallel, on a pool of its own ([`spawn_background`]) whose threads
//! run at a lower scheduling priority: tool calls and the policy, which a training step waits
//! for, get the cores first, and the builds take what they leave idle. A view whose blobs all
//! have entries starts no job. The grep itself, and every one after it until the job is done,
//! use whatever entries exist and scan the rest, so a build never holds a call past its
//! deadline. Greps evaluate their queries side by side under a read lock; a grep that finds the
//! index write-locked by a build (inserting a blob's trigrams, compacting the lists) sleeps at
//! most [`GREP_PATIENCE`] for it, then goes on without the index for that call. (A low-priority
//! builder preempted inside its critical section holds the lock for as long as the scheduler
//! keeps it off the cores: on a real study that made one grep in twenty give up, which is why
//! a warm view starts no build at all.) [`crate::Repo::build_index`] builds for a list of commits in the calling
//! thread (parallel too), reporting progress, for callers that want the index ready before a run.
//!
//! # Memory bound
//!
//! The entries and the lists are counted against [`crate::StoreOptions::index_bytes`]: 4 bytes
//! per element of a list's capacity (one element per distinct trigram of each text blob; a 15 KB
//! Python file has a few thousand), a fixed overhead per list and per entry, and a bit per slot
//! ever handed out. When an insertion takes the count past the bound, least recently used
//! entries are evicted until the live part is at most three quarters of it (and by at least an
//! eighth of the bound), and the lists are compacted (their dead slots dropped, each list shrunk
//! to its length) in the same step, so the count is back under the bound and a compaction's cost
//! is spread over an eighth of the bound's worth of insertions or more. A full list grows by a
//! quarter, not twice: code shares most trigrams between files, so the lists of common trigrams
//! are as long as the index holds blobs, and doubling them all after a compaction took the count
//! straight back past the bound (an eviction and a full compaction per insertion). A
//! repository with thousands of commits evicts its least recently used blobs beyond the bound.
//! Once a view has looked up all its files it keeps its own list of entries (shared `Arc`s, a
//! few dozen bytes each: sizes and slots, no trigrams) for its lifetime; an entry evicted since
//! keeps its size and binary flag but no longer narrows greps (its file is read).
//!
//! # Persistence
//!
//! With [`crate::StoreOptions::persist_index`] (off by default) the index is kept in one versioned
//! file per repository under the store (`<store>/.index/<name>.trigrams`, [`persist`]): read
//! before the first build, written (atomically) when the repository is dropped or by
//! [`crate::Repo::save_index`] if entries were built since. A file that is missing, of another
//! version or corrupt is ignored, the index is rebuilt and the file written over.

pub(crate) mod grams;
mod persist;
pub(crate) mod postings;
pub(crate) mod query;

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use gix::ObjectId;
use lru::LruCache;
use rayon::prelude::*;

pub(crate) use postings::SkipSet;
use postings::{Postings, Slot};
pub(crate) use query::Query;

use crate::store::RepoShared;

/// Scheduling priority (nice value) of the background builders' threads: below the default 0,
/// so that the threads a step waits for preempt them.
const BACKGROUND_NICE: i32 = 10;

/// Runs `job` on the pool background index builds use (created on first use, with as many
/// threads as rayon's global pool: `RAYON_NUM_THREADS`, else one per core). Its threads lower their own priority to [`BACKGROUND_NICE`] as they start (Linux keeps
/// a nice value per thread; elsewhere they run at the normal priority). A build's parallel loop
/// runs on the pool it was spawned on, so none of its work lands on rayon's global pool, which
/// reward evaluation and feature extraction use. If the pool's threads cannot be started, the
/// job runs on the global pool.
pub(crate) fn spawn_background(job: impl FnOnce() + Send + 'static) {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("rewardlab-index-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .ok()
    });
    match pool {
        Some(pool) => pool.spawn(job),
        None => rayon::spawn(job),
    }
}

/// Lowers the calling thread's scheduling priority to [`BACKGROUND_NICE`], never raises it (a
/// thread starts at its creator's nice value, which may be above 10 already); a failure leaves
/// it as it was (the build is only slower to yield).
#[cfg(target_os = "linux")]
fn lower_priority() {
    // SAFETY: `getpriority` and `setpriority` read no memory of ours; on Linux, `PRIO_PROCESS`
    // with `who = 0` names the calling thread only. (`getpriority` may return -1 as a value;
    // it is below `BACKGROUND_NICE` either way.)
    unsafe {
        if libc::getpriority(libc::PRIO_PROCESS, 0) < BACKGROUND_NICE {
            let _ = libc::setpriority(libc::PRIO_PROCESS, 0, BACKGROUND_NICE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// Blobs larger than this get an entry without trigrams: they are always read (and the grep's
/// size cap usually skips them anyway).
const MAX_INDEXED_BLOB: u64 = 16 << 20;
/// Fixed cost counted per entry besides its trigrams: the entry, its `Arc` and its LRU node.
const ENTRY_OVERHEAD: usize = 96;
/// How long a grep waits for the index while a build holds it (inserting a blob's trigrams,
/// compacting the lists) before it goes on without it, reading what it cannot rule out.
const GREP_PATIENCE: Duration = Duration::from_millis(2);

/// What the index knows of one blob.
#[derive(Debug)]
pub(crate) struct BlobEntry {
    /// The blob's size in bytes.
    pub(crate) size: u64,
    pub(crate) content: Content,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Content {
    /// Text: its trigrams are in the posting lists under this slot, `grams` of them.
    Text { slot: Slot, grams: u32 },
    /// It contains a NUL byte.
    Binary,
    /// Too large to index (or the slots ran out); always read.
    Unindexed,
}

/// A blob as a build read it, before it joins the index.
struct Built {
    size: u64,
    content: BuiltContent,
}

enum BuiltContent {
    Text(Box<[u32]>),
    Binary,
    Unindexed,
}

/// Counters of one repository's content index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct IndexStats {
    /// Blobs with an entry now.
    pub blobs: usize,
    /// Bytes the entries and posting lists are counted at now (see the memory bound in the
    /// crate docs).
    pub bytes: usize,
    /// The bound on `bytes`.
    pub capacity_bytes: usize,
    /// Entries built over the index's life.
    pub built: u64,
    /// Entries read back from the persisted file (see [`crate::StoreOptions::persist_index`]).
    pub loaded: usize,
    /// Entries evicted to stay within the bound.
    pub evicted: u64,
    /// Compactions of the posting lists (each after a batch of evictions).
    pub compactions: u64,
    /// Files greps did not read because the index ruled them out.
    pub files_skipped: u64,
    /// Greps whose pattern gave a usable query.
    pub indexed_greps: u64,
    /// Files greps took from the repository's grep memo instead of reading them (see
    /// [`crate::StoreOptions::grep_memo_bytes`]).
    pub memo_files: u64,
    /// Patterns the grep memo holds now.
    pub memo_patterns: usize,
    /// Bytes the grep memo is counted at now.
    pub memo_bytes: usize,
    /// Grep memo entries read back from its persisted file (see
    /// [`crate::StoreOptions::persist_index`]).
    pub memo_loaded: usize,
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
    /// Where the index is persisted, if it is.
    file: Option<PathBuf>,
    /// Whether the persisted file was read (or there was none to read); builds take this lock
    /// first, greps never do.
    load: Mutex<bool>,
    /// The entries and lists. Greps evaluate their queries under the read lock, side by side;
    /// builds and a view's lookups (which mark its blobs used) take the write lock. A
    /// `parking_lot` lock for its timed waits: a grep that finds it held sleeps for it (up to
    /// [`GREP_PATIENCE`]) instead of spinning on the cores the holder needs.
    inner: parking_lot::RwLock<Inner>,
    /// Signalled (under `settle`) whenever pending blobs finish, for builds waiting on another
    /// build's blobs.
    settled: parking_lot::Condvar,
    settle: parking_lot::Mutex<()>,
    files_skipped: AtomicU64,
    indexed_greps: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    map: LruCache<ObjectId, Arc<BlobEntry>, foldhash::fast::RandomState>,
    postings: Postings,
    /// Trigrams of the live text entries: what the lists would hold after a compaction.
    live_grams: usize,
    built: u64,
    /// `built` when the index was last loaded or saved: a save is needed only past it.
    saved_built: u64,
    loaded: usize,
    evicted: u64,
    compactions: u64,
    /// Blobs some build is working on now.
    pending: HashSet<ObjectId>,
}

impl Inner {
    fn bytes(&self) -> usize {
        self.map.len() * ENTRY_OVERHEAD + self.postings.bytes()
    }

    /// Adds a built blob as the most recently used entry, then restores the bound.
    fn insert(&mut self, id: ObjectId, built: Built, capacity: usize) {
        let content = match built.content {
            BuiltContent::Text(grams) => match self.postings.insert(&grams) {
                Some(slot) => {
                    self.live_grams += grams.len();
                    Content::Text { slot, grams: u32::try_from(grams.len()).unwrap_or(u32::MAX) }
                }
                None => Content::Unindexed,
            },
            BuiltContent::Binary => Content::Binary,
            BuiltContent::Unindexed => Content::Unindexed,
        };
        if let Some(old) = self.map.put(id, Arc::new(BlobEntry { size: built.size, content })) {
            self.forget(&old);
        }
        self.built += 1;
        self.restore_bound(capacity);
    }

    /// Evicts and compacts until the count is within `capacity`.
    fn restore_bound(&mut self, capacity: usize) {
        // Evict down to three quarters of the bound (estimated as the entries and list elements
        // the live blobs will count after the compaction), and by at least an eighth of it (the
        // lists' spare capacity can take the count past the bound while the estimate is under the
        // target), then compact once, so that one compaction's cost is spread over many
        // insertions. The lists' fixed overheads are not in the estimate: when the compacted
        // count is still over the bound, the target halves, and every round evicts at least one
        // entry, so this ends.
        let mut target = capacity / 4 * 3;
        while self.bytes() > capacity && !self.map.is_empty() {
            let live = |inner: &Self| inner.map.len() * ENTRY_OVERHEAD + inner.live_grams * 4;
            let round_target = target.min(live(self).saturating_sub(capacity / 8));
            let mut evicted_any = false;
            while !evicted_any || live(self) > round_target {
                let Some((_, evicted)) = self.map.pop_lru() else { break };
                self.forget(&evicted);
                self.evicted += 1;
                evicted_any = true;
            }
            self.postings.compact();
            self.compactions += 1;
            target /= 2;
        }
    }

    /// Takes an entry that left the map out of the lists' live slots.
    fn forget(&mut self, entry: &BlobEntry) {
        if let Content::Text { slot, grams } = entry.content {
            self.postings.remove(slot, grams as usize);
            self.live_grams -= grams as usize;
        }
    }
}

impl ContentIndex {
    /// An index bounded by `capacity` bytes (0 disables it), persisted at `file` if given.
    pub(crate) fn new(capacity: usize, file: Option<PathBuf>) -> Self {
        ContentIndex {
            capacity,
            file,
            load: Mutex::new(false),
            inner: parking_lot::RwLock::new(Inner {
                map: LruCache::unbounded_with_hasher(foldhash::fast::RandomState::default()),
                postings: Postings::default(),
                live_grams: 0,
                built: 0,
                saved_built: 0,
                loaded: 0,
                evicted: 0,
                compactions: 0,
                pending: HashSet::new(),
            }),
            settled: parking_lot::Condvar::new(),
            settle: parking_lot::Mutex::new(()),
            files_skipped: AtomicU64::new(0),
            indexed_greps: AtomicU64::new(0),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    pub(crate) fn stats(&self) -> IndexStats {
        let inner = self.inner.read();
        IndexStats {
            blobs: inner.map.len(),
            bytes: inner.bytes(),
            capacity_bytes: self.capacity,
            built: inner.built,
            loaded: inner.loaded,
            evicted: inner.evicted,
            compactions: inner.compactions,
            files_skipped: self.files_skipped.load(Ordering::Relaxed),
            indexed_greps: self.indexed_greps.load(Ordering::Relaxed),
            ..IndexStats::default()
        }
    }

    pub(crate) fn record_grep(&self, skipped: usize) {
        self.indexed_greps.fetch_add(1, Ordering::Relaxed);
        self.files_skipped.fetch_add(skipped as u64, Ordering::Relaxed);
    }

    /// The live text blobs that cannot match `query`, evaluated once over the posting lists;
    /// `None` when a build held the index past [`GREP_PATIENCE`].
    pub(crate) fn skip_set(&self, query: &Query) -> Option<SkipSet> {
        Some(self.inner.try_read_for(GREP_PATIENCE)?.postings.skip_set(query))
    }

    /// The entries of `ids` (in order) that exist now, and whether all of them do. When a build
    /// holds the index past [`GREP_PATIENCE`], no entries (and not complete).
    pub(crate) fn lookup(&self, ids: &[Option<ObjectId>]) -> (Vec<Option<Arc<BlobEntry>>>, bool) {
        let Some(mut inner) = self.inner.try_write_for(GREP_PATIENCE) else {
            return (vec![None; ids.len()], false);
        };
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

    /// Builds the entries `ids` lack, in parallel on the rayon pool it is called on (the background
    /// pool for a view's lazy build, the caller's for an explicit one), then, when `wait`, waits for
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
        self.ensure_loaded();
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
        // Checked under `settle`, which `finish` takes to signal: no wake-up is lost.
        let mut settle = self.settle.lock();
        while theirs.iter().any(|id| self.inner.read().pending.contains(id)) {
            self.settled.wait(&mut settle);
        }
    }

    /// Reads the persisted file once, before the first build (greps use whatever exists and
    /// never wait for it). A missing, old or corrupt file leaves the index empty; it is written
    /// over at the next save. Called by the first build (on the low-priority pool) or, ahead of
    /// any grep, by [`crate::Repo::load_index`] in the caller's thread.
    pub(crate) fn ensure_loaded(&self) {
        let Some(file) = &self.file else { return };
        let mut done = self.load.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if *done {
            return;
        }
        *done = true;
        let Some(loaded) = persist::load(file) else { return };
        let mut inner = self.lock();
        // Builds load first, so nothing was inserted yet; never mix two states.
        if !inner.map.is_empty() {
            return;
        }
        inner.loaded = loaded.entries.len();
        for (id, entry) in loaded.entries {
            inner.map.put(id, Arc::new(entry));
        }
        inner.postings = loaded.postings;
        inner.live_grams = loaded.live_grams;
        inner.saved_built = inner.built;
        // The file may have been written under a larger bound.
        inner.restore_bound(self.capacity);
    }

    /// Writes the index to its file if it was persisted and has new entries since it was
    /// loaded or last saved; `Ok(false)` when there was nothing to write.
    pub(crate) fn save(&self) -> std::io::Result<bool> {
        let Some(file) = &self.file else { return Ok(false) };
        if !*self.load.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            // No build ran (every build loads first), so nothing is new.
            return Ok(false);
        }
        let mut inner = self.lock();
        if inner.built == inner.saved_built {
            return Ok(false);
        }
        persist::save(&inner, file)?;
        inner.saved_built = inner.built;
        Ok(true)
    }

    /// The file the index is persisted in.
    pub(crate) fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    fn finish(&self, id: ObjectId, built: Option<Built>) {
        let mut inner = self.lock();
        inner.pending.remove(&id);
        if let Some(built) = built {
            inner.insert(id, built, self.capacity);
        }
        drop(inner);
        let _settle = self.settle.lock();
        self.settled.notify_all();
    }

    /// The write lock, waited for without a bound: for builds, loads and saves, never for a grep
    /// (see [`GREP_PATIENCE`]).
    fn lock(&self) -> parking_lot::RwLockWriteGuard<'_, Inner> {
        self.inner.write()
    }
}

impl Drop for ContentIndex {
    /// Saves what was built, so the next process (a second run, a Slurm task) starts from it.
    /// A failure only costs that process a rebuild; [`crate::Repo::save_index`] reports it.
    fn drop(&mut self) {
        let _ = self.save();
    }
}

/// Reads one blob (through the blob cache, which a grep of the same tree then hits, and which
/// inflates it once when greps of the tree want it at the same time) and
/// extracts its trigrams; `None` when it is missing from the object store.
fn build_entry(
    repo: &gix::Repository,
    extractor: &mut grams::Extractor,
    shared: &RepoShared,
    id: ObjectId,
) -> Option<Built> {
    let loaded = shared.blobs.get_or_load(&id, || {
        let size = repo.find_header(id).map_err(|_| None)?.size();
        if size > MAX_INDEXED_BLOB {
            return Err(Some(size));
        }
        Ok(crate::blob_cache::inflated(repo.find_blob(id).map_err(|_| None)?))
    });
    let blob = match loaded {
        Ok(blob) => blob,
        Err(Some(size)) => return Some(Built { size, content: BuiltContent::Unindexed }),
        Err(None) => return None,
    };
    let content = if blob.text { BuiltContent::Text(extractor.grams(&blob.data)) } else { BuiltContent::Binary };
    Some(Built { size: blob.data.len() as u64, content })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::grams::of_text;

    fn id(n: u32) -> ObjectId {
        let mut bytes = [0u8; 20];
        bytes[..4].copy_from_slice(&n.to_be_bytes());
        ObjectId::from_bytes_or_panic(&bytes)
    }

    fn text(n: u32) -> Built {
        let body = format!("file {n} marker{n}x\nshared line\n{}", "filler text ".repeat(n as usize % 7));
        Built { size: body.len() as u64, content: BuiltContent::Text(of_text(body.as_bytes()).into()) }
    }

    #[test]
    fn thousands_of_blobs_stay_within_the_bound_and_never_hide_a_match() {
        let capacity = 32 << 10;
        let index = ContentIndex::new(capacity, None);
        let mut pinned = Vec::new();
        for n in 0..3000 {
            index.finish(id(n), Some(text(n)));
            let inner = index.lock();
            assert!(inner.bytes() <= capacity, "after blob {n}: {} bytes", inner.bytes());
            drop(inner);
            if n % 500 == 0 {
                // A tree that looked the blob up keeps its entry after eviction.
                pinned.push((n, index.lookup(&[Some(id(n))]).0.remove(0).expect("just built")));
            }
        }
        let stats = index.stats();
        assert!(stats.evicted > 2000 && stats.compactions > 1, "{stats:?}");
        let query = Query::plan("marker0x", false, 32);
        let skip = index.skip_set(&query).expect("no build holds the index");
        for (n, entry) in &pinned {
            let Content::Text { slot, .. } = entry.content else { panic!("text") };
            // Evicted entries (all but the last) are dead, so never skipped: their file is read.
            assert!(!skip.contains(slot), "blob {n} (marker{n}x) must be read, not skipped");
        }
        // A recent blob is live and does not contain `marker0x`: it is skipped.
        let (recent, _) = index.lookup(&[Some(id(2999))]);
        let Content::Text { slot, .. } = recent[0].as_ref().expect("recent blobs are held").content else {
            panic!("text")
        };
        assert!(skip.contains(slot));
        assert!(!index.skip_set(&Query::plan("marker2999x", false, 32)).expect("free").contains(slot));
    }

    /// Code shares most of its trigrams between files, so the lists of common trigrams are as
    /// long as the index holds blobs. Compaction shrinks every list to its length; growing
    /// them again by doubling took the count past the bound at once, so each insertion near the
    /// bound evicted one entry and compacted every list (16% of a real study's CPU, `perf`).
    /// A compaction must make room for many insertions.
    #[test]
    fn compactions_are_rare_when_blobs_share_their_trigrams() {
        let capacity = 256 << 10;
        let index = ContentIndex::new(capacity, None);
        let common: String = (0..400).map(|i| format!("def common_{i}(): pass\n")).collect();
        for n in 0..4000u32 {
            let body = format!("{common}unique_{n}_{}\n", n * 7919);
            index.finish(
                id(n),
                Some(Built { size: body.len() as u64, content: BuiltContent::Text(of_text(body.as_bytes()).into()) }),
            );
            assert!(index.lock().bytes() <= capacity, "after blob {n}");
        }
        let stats = index.stats();
        assert!(stats.evicted > 1000, "{stats:?}");
        // Each compaction frees at least an eighth of the bound: a dozen blobs of this size (the
        // bound holds about 100). Before, every eviction was a compaction.
        assert!(stats.compactions * 10 <= stats.evicted, "{stats:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn background_builds_run_below_the_callers_priority() {
        // SAFETY: `getpriority` reads no memory of ours; `who = 0` is the calling thread.
        let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let caller = nice();
        let (tx, rx) = std::sync::mpsc::channel();
        spawn_background(move || {
            // A build's parallel loop runs on the pool it was spawned on.
            let inner: Vec<i32> = (0..4).into_par_iter().map(|_| nice()).collect();
            tx.send((nice(), inner)).expect("the test waits");
        });
        let (builder, inner) = rx.recv().expect("the pool runs the job");
        // The pool's threads start at their creator's (this thread's) value and only ever lower it.
        let want = BACKGROUND_NICE.max(caller);
        assert_eq!(builder, want, "the caller runs at {caller}");
        assert!(inner.iter().all(|&n| n == want), "{inner:?}");
        assert_eq!(nice(), caller, "the caller's own priority is unchanged");
    }
}
