//! A byte-bounded LRU of blob contents, shared by every tree of every repository of a store.
//!
//! A blob id names its content, so one entry serves every commit that contains the blob: the
//! zero-disk views of 50 commits of one repository decompress a shared file once. One budget
//! serves all repositories ([`BlobCache::share`]): a study over five repositories gives the
//! largest one the room the others leave, instead of a fixed share each (sympy's commits reach
//! more content than a 256 MiB share held, and churned through it). With the
//! content goes whether it holds a NUL byte (binary, as `git grep -I` decides), found once when
//! the blob is inflated, so no later grep of any commit scans it for one again.
//!
//! A blob is also inflated once *at a time* ([`BlobCache::get_or_load`]): the first greps of a
//! commit nobody has read yet run side by side (a GRPO group's rollouts issue theirs together,
//! and the content index builds beside them), all walking the same files in the same order, so
//! without this each would inflate every blob of the commit itself. A caller that finds another
//! one loading the same blob waits for its result instead ([`BlobCacheStats::joined`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use gix::ObjectId;
use lru::LruCache;

/// Blob contents keyed by id, evicting least-recently-used entries beyond a byte budget.
/// Blobs larger than an eighth of the budget are not cached, so one huge file cannot flush it.
/// [`BlobCache::share`] gives another user (a repository) the same entries and budget with
/// counters of its own.
#[derive(Debug)]
pub struct BlobCache {
    shared: Arc<Shared>,
    counters: Counters,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Inner>,
    capacity_bytes: usize,
}

/// One sharer's lookups.
#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    joined: AtomicU64,
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

/// Counters for tests, benchmarks and a study's `phases.md`: the lookups are this sharer's
/// own, the entries and bytes those of the whole cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlobCacheStats {
    /// Lookups that found the blob.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Misses answered by waiting for another caller's load of the same blob
    /// ([`BlobCache::get_or_load`]), which inflated it once for both.
    pub joined: u64,
    /// Blobs held now (by every sharer together).
    pub entries: usize,
    /// Bytes held now (by every sharer together).
    pub bytes: usize,
}

#[derive(Debug)]
struct Inner {
    /// Keyed through foldhash: a grep looks up every candidate file, and SipHash over 20-byte
    /// ids was a visible share of a cold commit's greps.
    map: LruCache<ObjectId, Blob, foldhash::fast::RandomState>,
    bytes: usize,
    /// Blobs some caller of [`BlobCache::get_or_load`] is loading now.
    loading: HashMap<ObjectId, Arc<Flight>, foldhash::fast::RandomState>,
}

/// One load in progress: its outcome once published (`Some(None)` when it failed).
#[derive(Debug, Default)]
struct Flight {
    outcome: Mutex<Option<Option<Blob>>>,
    done: Condvar,
}

impl Flight {
    fn publish(&self, outcome: Option<Blob>) {
        *self.outcome.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(outcome);
        self.done.notify_all();
    }

    fn wait(&self) -> Option<Blob> {
        let mut outcome = self.outcome.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        loop {
            match &*outcome {
                Some(result) => return result.clone(),
                None => outcome = self.done.wait(outcome).unwrap_or_else(|poisoned| poisoned.into_inner()),
            }
        }
    }
}

/// Takes a load's flight out of the cache's table and publishes its outcome, also when the
/// loader unwinds (waiters then load for themselves), so no waiter is left waiting.
struct Publish<'a> {
    cache: &'a BlobCache,
    id: ObjectId,
    flight: Arc<Flight>,
    outcome: Option<Blob>,
}

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        self.cache.shared.lock().loading.remove(&self.id);
        self.flight.publish(self.outcome.take());
    }
}

impl BlobCache {
    /// A cache holding at most `capacity_bytes` of blob content.
    pub fn new(capacity_bytes: usize) -> Self {
        let shared = Shared {
            inner: Mutex::new(Inner {
                map: LruCache::unbounded_with_hasher(foldhash::fast::RandomState::default()),
                bytes: 0,
                loading: HashMap::with_hasher(foldhash::fast::RandomState::default()),
            }),
            capacity_bytes,
        };
        BlobCache { shared: Arc::new(shared), counters: Counters::default() }
    }

    /// The same entries and budget, with lookup counters of its own (a store gives one to each
    /// repository, so `phases.md` can say which one missed).
    pub fn share(&self) -> Self {
        BlobCache { shared: self.shared.clone(), counters: Counters::default() }
    }

    /// The blob if cached, marking it most recently used.
    pub fn get(&self, id: &ObjectId) -> Option<Blob> {
        let found = self.shared.lock().map.get(id).cloned();
        bump(if found.is_some() { &self.counters.hits } else { &self.counters.misses });
        found
    }

    /// The blob from the cache, or else from `load` (which inflates it), cached as
    /// [`BlobCache::insert`] does. One caller at a time loads a given blob: a caller that finds
    /// another one loading it (through any sharer) waits for that load and shares its blob. When
    /// that load fails, each waiter runs its own `load` (whose error, say a size cap lower than
    /// the other caller's, may be its own).
    pub fn get_or_load<E>(&self, id: &ObjectId, load: impl FnOnce() -> Result<Arc<[u8]>, E>) -> Result<Blob, E> {
        let flight = {
            let mut inner = self.shared.lock();
            if let Some(blob) = inner.map.get(id).cloned() {
                drop(inner);
                bump(&self.counters.hits);
                return Ok(blob);
            }
            let flight = match inner.loading.get(id) {
                Some(flight) => Err(flight.clone()),
                None => {
                    let flight = Arc::new(Flight::default());
                    inner.loading.insert(*id, flight.clone());
                    Ok(flight)
                }
            };
            drop(inner);
            bump(&self.counters.misses);
            flight
        };
        match flight {
            Ok(flight) => {
                let mut publish = Publish { cache: self, id: *id, flight, outcome: None };
                let blob = self.insert(*id, load()?);
                publish.outcome = Some(blob.clone());
                Ok(blob)
            }
            Err(theirs) => match theirs.wait() {
                Some(blob) => {
                    bump(&self.counters.joined);
                    Ok(blob)
                }
                None => load().map(|data| self.insert(*id, data)),
            },
        }
    }

    /// Checks freshly inflated `data` for NUL bytes ([`Blob::new`]) and caches it under `id`
    /// unless it is too large, evicting old entries to stay in budget; the blob either way.
    pub fn insert(&self, id: ObjectId, data: Arc<[u8]>) -> Blob {
        let blob = Blob::new(data);
        let len = blob.data.len();
        let capacity = self.shared.capacity_bytes;
        if len > capacity / 8 {
            return blob;
        }
        let mut inner = self.shared.lock();
        if let Some(old) = inner.map.put(id, blob.clone()) {
            inner.bytes -= old.data.len();
        }
        inner.bytes += len;
        while inner.bytes > capacity {
            match inner.map.pop_lru() {
                Some((_, evicted)) => inner.bytes -= evicted.data.len(),
                None => break,
            }
        }
        blob
    }

    /// This sharer's lookups, and what the whole cache holds.
    pub fn stats(&self) -> BlobCacheStats {
        let inner = self.shared.lock();
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        BlobCacheStats {
            hits: load(&self.counters.hits),
            misses: load(&self.counters.misses),
            joined: load(&self.counters.joined),
            entries: inner.map.len(),
            bytes: inner.bytes,
        }
    }
}

/// A freshly inflated blob's content for the cache. Copied out rather than taken
/// (`Blob::take_data`), so that dropping gix's blob hands its buffer back to the repository
/// handle's free list and the next blob that handle inflates reuses it: taking it left every
/// inflation a fresh allocation, whose pages the kernel faulted in and zeroed first (in a first
/// Lite process, `clear_page_erms` fell from 7.1% of the samples to 0.4%).
pub(crate) fn inflated(blob: gix::Blob<'_>) -> Arc<[u8]> {
    Arc::from(blob.data.as_slice())
}

/// Counts one lookup of a sharer ([`Counters`]).
fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Shared {
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
    fn concurrent_loads_of_one_blob_inflate_it_once() {
        use std::sync::Barrier;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let cache = BlobCache::new(1 << 20);
        let loads = AtomicUsize::new(0);
        let start = Barrier::new(8);
        let blobs: Vec<Blob> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        cache
                            .get_or_load(&id(7), || {
                                loads.fetch_add(1, Ordering::SeqCst);
                                // Long enough that the other callers arrive while it loads.
                                std::thread::sleep(std::time::Duration::from_millis(50));
                                Ok::<_, ()>(Arc::from(&b"shared\n"[..]))
                            })
                            .expect("loads")
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("no panic")).collect()
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1, "one inflation for eight callers");
        assert!(blobs.iter().all(|b| &*b.data == b"shared\n" && b.text));
        let stats = cache.stats();
        // Callers slower than the load (a loaded machine) hit the cache instead of joining.
        assert_eq!((stats.hits + stats.misses, stats.joined + 1, stats.entries), (8, stats.misses, 1), "{stats:?}");
        // Later callers hit the cache and never load.
        let hit = cache.get_or_load(&id(7), || -> Result<Arc<[u8]>, ()> { panic!("cached") });
        assert_eq!(hit.map(|b| b.data), Ok(Arc::from(&b"shared\n"[..])));
    }

    #[test]
    fn a_failed_or_unwound_load_leaves_each_waiter_to_load_for_itself() {
        use std::sync::Barrier;

        let cache = BlobCache::new(1 << 20);
        let started = Barrier::new(2);
        std::thread::scope(|scope| {
            let failing = scope.spawn(|| {
                cache.get_or_load(&id(1), || {
                    started.wait();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Err("too large for this caller")
                })
            });
            started.wait();
            // Arrives while the first load runs: waits for it, sees it fail, loads itself.
            let own = cache.get_or_load(&id(1), || Ok::<_, &str>(Arc::from(&b"mine"[..])));
            assert_eq!(own.map(|b| b.data), Ok(Arc::from(&b"mine"[..])));
            assert_eq!(failing.join().expect("no panic").map(|b| b.data), Err("too large for this caller"));
        });
        // A loader that panics publishes nothing, yet nobody is left waiting and the next one loads.
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cache.get_or_load(&id(2), || -> Result<Arc<[u8]>, ()> { panic!("inflate failed") })
        }));
        assert!(unwound.is_err());
        assert!(cache.shared.lock().loading.is_empty());
        assert_eq!(
            cache.get_or_load(&id(2), || Ok::<_, ()>(Arc::from(&b"again"[..]))).map(|b| b.data),
            Ok(Arc::from(&b"again"[..]))
        );
    }

    #[test]
    fn sharers_see_one_budget_and_count_their_own_lookups() {
        let a = BlobCache::new(800);
        let b = a.share();
        a.insert(id(1), vec![1; 100].into());
        assert_eq!(b.get(&id(1)).map(|blob| blob.data.len()), Some(100), "an entry one sharer cached");
        assert!(b.get(&id(2)).is_none());
        for n in 3..11 {
            b.insert(id(n), vec![n; 100].into());
        }
        assert!(a.get(&id(1)).is_none(), "evicted by the other sharer's entries: one budget");
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!((sa.hits, sa.misses, sb.hits, sb.misses), (0, 1, 1, 1));
        assert_eq!((sa.entries, sa.bytes), (8, 800));
        assert_eq!((sb.entries, sb.bytes), (8, 800));
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
