//! A byte-bounded LRU of tool results, shared by every clone of one [`Sandbox`](crate::Sandbox).
//!
//! A call on a tree is a pure function of the tree (repository, commit, kind), the call and the
//! limits, and the limits are fixed for a sandbox's life. So the 8 rollouts of a GRPO group,
//! which see one issue at one commit and choose among the same few greps, and the greedy
//! episodes that held-out evaluation repeats every time, can be answered from an earlier run of
//! the same call. Only results that depend on nothing else are kept (see [`cacheable`]): a
//! timeout depends on load, a missing object or an I/O error on the state of the store, and an
//! internal error on the sandbox itself.
//!
//! The cache itself never makes a caller wait: two identical calls that miss at the same time
//! both run, and the second to finish replaces the first's (equal) entry; it is
//! [`Sandbox::run_call`](crate::Sandbox::run_call) that joins identical calls in flight. Lookups
//! and inserts hold one mutex for a hash-map operation and never while a call runs.

mod persist;

use std::{
    mem::size_of,
    path::Path,
    sync::{Arc, Mutex, MutexGuard},
};

use gix::ObjectId;
use lru::LruCache;

use crate::{
    tools::{Entity, ErrorKind, Status, ToolCall, ToolResult},
    tree::{Tree, TreeKind},
};

pub(crate) use persist::stamp;

/// What one cached result is filed under: the tree's identity and the call's canonical JSON.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    repo: String,
    commit: ObjectId,
    kind: TreeKind,
    call: String,
}

impl Key {
    /// The key of `call` on `tree`; `None` if the call does not serialise (it always does for
    /// the plain-data calls of the protocol, but a cache must not be a reason to fail a call).
    pub(crate) fn new(tree: &Tree, call: &ToolCall) -> Option<Key> {
        // The same JSON shape as `ToolCall::to_json`, written straight to a string: struct
        // fields serialise in declaration order, so equal calls give equal text.
        let call = serde_json::to_string(call).ok()?;
        Some(Key { repo: tree.repo_name().to_owned(), commit: tree.commit(), kind: tree.kind(), call })
    }
}

/// Counters for [`SandboxStats`](crate::SandboxStats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResultCacheStats {
    pub(crate) hits: u64,
    pub(crate) entries: usize,
    pub(crate) bytes: usize,
}

/// Results by key, evicting least-recently-used entries beyond a byte budget. A budget of 0
/// disables the cache: nothing is looked up and nothing is stored.
#[derive(Debug)]
pub(crate) struct ResultCache {
    inner: Mutex<Inner>,
    capacity_bytes: usize,
}

#[derive(Debug)]
struct Inner {
    map: LruCache<Key, Entry>,
    bytes: usize,
    hits: u64,
}

#[derive(Debug)]
struct Entry {
    result: Arc<ToolResult>,
    bytes: usize,
}

impl ResultCache {
    /// A cache holding at most `capacity_bytes` (as [`entry_bytes`] counts them).
    pub(crate) fn new(capacity_bytes: usize) -> Self {
        ResultCache { inner: Mutex::new(Inner { map: LruCache::unbounded(), bytes: 0, hits: 0 }), capacity_bytes }
    }

    /// Whether the cache is on (a non-zero budget).
    pub(crate) fn enabled(&self) -> bool {
        self.capacity_bytes > 0
    }

    /// The cached result for `key`, marking it most recently used and counting a hit.
    pub(crate) fn get(&self, key: &Key) -> Option<ToolResult> {
        let found = {
            let mut inner = self.lock();
            let found = inner.map.get(key).map(|entry| entry.result.clone());
            if found.is_some() {
                inner.hits += 1;
            }
            found
        };
        // The copy handed to the caller is made outside the lock.
        found.map(|result| ToolResult::clone(&result))
    }

    /// Stores `result` under `key` if it is [`cacheable`] and fits, evicting old entries to stay
    /// within the budget.
    pub(crate) fn insert(&self, key: Key, result: &ToolResult) {
        if self.enabled() && cacheable(result) {
            self.put(key, Arc::new(result.clone()));
        }
    }

    /// [`ResultCache::insert`] of a result the caller no longer needs.
    fn put(&self, key: Key, result: Arc<ToolResult>) {
        let bytes = entry_bytes(&key, &result);
        if bytes > self.capacity_bytes {
            return;
        }
        let entry = Entry { result, bytes };
        let mut inner = self.lock();
        if let Some(old) = inner.map.put(key, entry) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        while inner.bytes > self.capacity_bytes {
            match inner.map.pop_lru() {
                Some((_, evicted)) => inner.bytes -= evicted.bytes,
                None => break,
            }
        }
    }

    /// Writes every entry to `path` under `stamp` ([`persist`]); how many were written.
    pub(crate) fn save(&self, path: &Path, stamp: u64) -> std::io::Result<usize> {
        // Copied out under the lock (the results are shared, not cloned), written without it.
        let entries: Vec<(Key, Arc<ToolResult>)> =
            self.lock().map.iter().rev().map(|(key, entry)| (key.clone(), entry.result.clone())).collect();
        persist::save(&entries, stamp, path)?;
        Ok(entries.len())
    }

    /// Adds the entries of the file at `path` if an earlier [`ResultCache::save`] wrote it under
    /// `stamp`, oldest first and within the budget; how many the cache holds afterwards that it
    /// did not hold before.
    pub(crate) fn load(&self, path: &Path, stamp: u64) -> usize {
        if !self.enabled() {
            return 0;
        }
        let Some(entries) = persist::load(path, stamp) else {
            return 0;
        };
        let before = self.stats().entries;
        for (key, result) in entries {
            if cacheable(&result) {
                self.put(key, Arc::new(result));
            }
        }
        self.stats().entries.saturating_sub(before)
    }

    /// Current counters.
    pub(crate) fn stats(&self) -> ResultCacheStats {
        let inner = self.lock();
        ResultCacheStats { hits: inner.hits, entries: inner.map.len(), bytes: inner.bytes }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every mutation under the lock is a single map call plus a counter update, so a panic
        // cannot leave the map half-changed; a poisoned lock is still safe to use.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether `result` is a function of the tree and the call alone. A timeout depends on how busy
/// the machine was; a missing object or an I/O error on the store (a later fetch or a retry may
/// succeed); an internal error or the per-turn limit on the sandbox, not the call. Errors the
/// call itself causes (a bad pattern, a path that is refused or not there, a binary or oversized
/// file) come out the same every time and are kept. An unknown future status is not kept.
pub(crate) fn cacheable(result: &ToolResult) -> bool {
    match result.status {
        Status::Ok | Status::Truncated => true,
        Status::Error(kind) => matches!(
            kind,
            ErrorKind::InvalidCall
                | ErrorKind::UnknownTool
                | ErrorKind::PatternTooLong
                | ErrorKind::InvalidPattern
                | ErrorKind::PatternTooComplex
                | ErrorKind::Refused
                | ErrorKind::NotFound
                | ErrorKind::IsDirectory
                | ErrorKind::Binary
                | ErrorKind::TooLarge
        ),
        _ => false,
    }
}

/// Fixed cost charged to every entry beyond its strings: the key and result structs, the two
/// `Arc` allocations' headers and the LRU's node and map slot, rounded up.
const ENTRY_OVERHEAD: usize = 160;

/// The bytes one entry is charged: its output and entity text (the bulk), the key's strings, one
/// `Entity` per entity shown, and a fixed per-entry overhead, so the budget tracks the memory
/// the entries really hold rather than their text alone.
pub(crate) fn entry_bytes(key: &Key, result: &ToolResult) -> usize {
    let entities: usize = result.entities.iter().map(|e| size_of::<Entity>() + e.path().len()).sum();
    ENTRY_OVERHEAD + key.repo.len() + key.call.len() + result.output.len() + entities
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> Key {
        Key {
            repo: "acme__demo".to_owned(),
            commit: ObjectId::from_bytes_or_panic(&[7; 20]),
            kind: TreeKind::View,
            call: format!("{{\"tool\":\"glob\",\"args\":{{\"pattern\":\"f{n:03}\"}}}}"),
        }
    }

    fn ok(text: &str) -> ToolResult {
        ToolResult { output: text.to_owned(), entities: vec![Entity::path_only(text)], status: Status::Ok }
    }

    #[test]
    fn evicts_least_recently_used_beyond_budget() {
        let one = entry_bytes(&key(0), &ok("x".repeat(100).as_str()));
        let cache = ResultCache::new(one * 4);
        for n in 0..6 {
            cache.insert(key(n), &ok(&"x".repeat(100)));
        }
        let stats = cache.stats();
        assert_eq!(stats.entries, 4);
        assert_eq!(stats.bytes, one * 4);
        assert!(cache.get(&key(0)).is_none(), "the oldest entries are evicted");
        assert!(cache.get(&key(1)).is_none());
        // Touch 2, then insert one more: 3 (now the oldest) goes, 2 stays.
        assert!(cache.get(&key(2)).is_some());
        cache.insert(key(6), &ok(&"x".repeat(100)));
        assert!(cache.get(&key(2)).is_some());
        assert!(cache.get(&key(3)).is_none());
        assert_eq!(cache.stats().hits, 2);
    }

    #[test]
    fn a_saved_cache_reads_back_in_lru_order_only_under_its_stamp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".index/tool-results");
        let cache = ResultCache::new(1 << 20);
        for n in 0..4 {
            cache.insert(key(n), &ok(&format!("result {n}")));
        }
        cache.insert(key(4), &ToolResult::error(ErrorKind::NotFound, "nope: no such file".to_owned()));
        assert!(cache.get(&key(0)).is_some(), "0 is now the most recently used");
        assert_eq!(cache.save(&path, 42).expect("saves"), 5);

        // Room for three entries: the three most recently used come back (0, 4, 3), 1 and 2 do not.
        let one = entry_bytes(&key(0), &ok("result 0"));
        let small = ResultCache::new(one * 3);
        assert_eq!(small.load(&path, 42), 3);
        assert!(small.get(&key(1)).is_none() && small.get(&key(2)).is_none());
        assert_eq!(small.get(&key(0)), Some(ok("result 0")));
        assert_eq!(small.get(&key(3)), Some(ok("result 3")));
        assert_eq!(small.get(&key(4)).map(|r| r.status), Some(Status::Error(ErrorKind::NotFound)));

        let other = ResultCache::new(1 << 20);
        assert_eq!(other.load(&path, 43), 0, "another binary's (or limits') results are not read");
        assert_eq!(ResultCache::new(0).load(&path, 42), 0, "a cache that is off reads nothing");
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 9;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).expect("write");
        assert_eq!(other.load(&path, 42), 0, "a damaged file is ignored");
        assert_eq!(other.load(&dir.path().join("missing"), 42), 0);
    }

    #[test]
    fn replacing_an_entry_keeps_the_byte_count_exact() {
        let cache = ResultCache::new(1 << 20);
        cache.insert(key(1), &ok("short"));
        cache.insert(key(1), &ok("a much longer output than before"));
        let stats = cache.stats();
        assert_eq!(stats.entries, 1);
        assert_eq!(stats.bytes, entry_bytes(&key(1), &ok("a much longer output than before")));
    }

    #[test]
    fn load_dependent_results_and_oversized_ones_are_not_kept() {
        let cache = ResultCache::new(1 << 20);
        for (n, status) in [
            Status::Timeout,
            Status::Error(ErrorKind::Internal),
            Status::Error(ErrorKind::MissingObject),
            Status::Error(ErrorKind::Io),
            Status::Error(ErrorKind::CallLimit),
        ]
        .into_iter()
        .enumerate()
        {
            cache.insert(key(n), &ToolResult { status, ..ok("partial") });
        }
        assert_eq!(cache.stats().entries, 0);
        cache.insert(key(9), &ToolResult::error(ErrorKind::NotFound, "nope: no such file".to_owned()));
        assert_eq!(cache.stats().entries, 1, "an error the call itself causes is kept");
        let small = ResultCache::new(100);
        small.insert(key(1), &ok(&"x".repeat(200)));
        assert_eq!(small.stats(), ResultCacheStats::default(), "an entry over the whole budget is not kept");
    }

    #[test]
    fn a_zero_budget_stores_nothing() {
        let cache = ResultCache::new(0);
        assert!(!cache.enabled());
        cache.insert(key(1), &ok("x"));
        assert!(cache.get(&key(1)).is_none());
        assert_eq!(cache.stats(), ResultCacheStats::default());
    }
}
