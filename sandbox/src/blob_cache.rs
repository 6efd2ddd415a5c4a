//! A byte-bounded LRU of blob contents, shared by every tree of one repository.
//!
//! A blob id names its content, so one entry serves every commit that contains the blob: the
//! zero-disk views of 50 commits of one repository decompress a shared file once. With the
//! content goes whether it holds a NUL byte (binary, as `git grep -I` decides), found once when
//! the blob is inflated, so no later grep of any commit scans it for one again.

use std::sync::{Arc, Mutex, MutexGuard};

use gix::ObjectId;
use lru::LruCache;

/// Blob contents keyed by id, evicting least-recently-used entries beyond a byte budget.
/// Blobs larger than an eighth of the budget are not cached, so one huge file cannot flush it.
#[derive(Debug)]
pub struct BlobCache {
    inner: Mutex<Inner>,
    capacity_bytes: usize,
}

/// A blob's content and whether it is text (holds no NUL byte).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// The content.
    pub data: Arc<[u8]>,
    /// No NUL byte anywhere in `data`.
    pub text: bool,
}

impl Blob {
    /// A freshly inflated blob, checked for NUL bytes once.
    pub fn new(data: Arc<[u8]>) -> Blob {
        let text = memchr::memchr(0, &data).is_none();
        Blob { data, text }
    }
}

/// Counters for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlobCacheStats {
    /// Lookups that found the blob.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Blobs held now.
    pub entries: usize,
    /// Bytes held now.
    pub bytes: usize,
}

#[derive(Debug)]
struct Inner {
    /// Keyed through foldhash: a grep looks up every candidate file, and SipHash over 20-byte
    /// ids was a visible share of a cold commit's greps.
    map: LruCache<ObjectId, Blob, foldhash::fast::RandomState>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

impl BlobCache {
    /// A cache holding at most `capacity_bytes` of blob content.
    pub fn new(capacity_bytes: usize) -> Self {
        BlobCache {
            inner: Mutex::new(Inner {
                map: LruCache::unbounded_with_hasher(foldhash::fast::RandomState::default()),
                bytes: 0,
                hits: 0,
                misses: 0,
            }),
            capacity_bytes,
        }
    }

    /// The blob if cached, marking it most recently used.
    pub fn get(&self, id: &ObjectId) -> Option<Blob> {
        let mut inner = self.lock();
        let found = inner.map.get(id).cloned();
        match found {
            Some(_) => inner.hits += 1,
            None => inner.misses += 1,
        }
        found
    }

    /// Checks freshly inflated `data` for NUL bytes ([`Blob::new`]) and caches it under `id`
    /// unless it is too large, evicting old entries to stay in budget; the blob either way.
    pub fn insert(&self, id: ObjectId, data: Arc<[u8]>) -> Blob {
        let blob = Blob::new(data);
        let len = blob.data.len();
        if len > self.capacity_bytes / 8 {
            return blob;
        }
        let mut inner = self.lock();
        if let Some(old) = inner.map.put(id, blob.clone()) {
            inner.bytes -= old.data.len();
        }
        inner.bytes += len;
        while inner.bytes > self.capacity_bytes {
            match inner.map.pop_lru() {
                Some((_, evicted)) => inner.bytes -= evicted.data.len(),
                None => break,
            }
        }
        blob
    }

    /// Current counters.
    pub fn stats(&self) -> BlobCacheStats {
        let inner = self.lock();
        BlobCacheStats { hits: inner.hits, misses: inner.misses, entries: inner.map.len(), bytes: inner.bytes }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the map consistent (every mutation is a single
        // call), so a poisoned lock is still safe to use.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    #[test]
    fn evicts_least_recently_used_beyond_budget() {
        let cache = BlobCache::new(800);
        for n in 0..10 {
            cache.insert(id(n), vec![n; 100].into());
        }
        let stats = cache.stats();
        assert_eq!(stats.bytes, 800);
        assert_eq!(stats.entries, 8);
        assert!(cache.get(&id(0)).is_none(), "oldest entries are evicted");
        assert_eq!(cache.get(&id(9)).map(|b| b.data).as_deref(), Some(&[9u8; 100][..]));
        // Touch 2, then insert one more: 3 (now the oldest) goes, 2 stays.
        assert!(cache.get(&id(2)).is_some());
        cache.insert(id(10), vec![10; 100].into());
        assert!(cache.get(&id(2)).is_some());
        assert!(cache.get(&id(3)).is_none());
    }

    #[test]
    fn huge_blobs_are_not_cached() {
        let cache = BlobCache::new(800);
        cache.insert(id(1), vec![1; 101].into());
        assert_eq!(cache.stats().entries, 0);
    }

    #[test]
    fn a_blob_is_text_exactly_when_it_holds_no_nul() {
        let cache = BlobCache::new(800);
        assert!(cache.insert(id(1), b"plain\n".to_vec().into()).text);
        assert!(!cache.insert(id(2), b"late \0 nul".to_vec().into()).text);
        assert!(!cache.insert(id(3), vec![0; 101].into()).text, "also for a blob too large to cache");
        assert_eq!(cache.get(&id(1)).map(|b| b.text), Some(true));
        assert_eq!(cache.get(&id(2)).map(|b| b.text), Some(false));
    }
}
