//! Running tool calls for many rollouts at once, under the global concurrency limit, with a
//! bounded cache of their results.
//!
//! Every way in ([`Sandbox::call`], [`Sandbox::run_call`], the `run_turn*` methods) first looks
//! the call up in the sandbox's result cache ([`Limits::result_cache_bytes`]), keyed by the
//! tree's identity (repository, commit, [`TreeKind`]) and the call's canonical JSON. A hit is
//! answered at once: it takes no permit of the global limit and no blocking thread, and it is
//! not "in flight". A miss is looked up once more when it gets its permit (an identical call may
//! have finished while it queued), runs, and stores its result unless the result depends on
//! load or on the store's state (a timeout, a missing object, an I/O or internal error).
//!
//! [`Sandbox::run_call`] also runs each call *once at a time*: an identical call (same tree, same
//! JSON) that arrives while one is queued or running does not start a second run but waits for
//! the first one's result (a "join", counted in [`SandboxStats::joined`]). The 8 rollouts of a
//! GRPO group issue their first greps together, so without this they would all miss the cache
//! and run the same search side by side. A joined call is held no longer than its own deadline
//! allows: the run it waits for started no later than it would have (it queued first for the
//! same permits) and stops at the same budget, and a timeout it ends in is what this call, run
//! at the same moment under the same load, would have met. The blocking entry points
//! ([`Sandbox::call`], [`Sandbox::run_turn_blocking`]) do not join.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
};

use serde_json::Value;
use tokio::sync::{OnceCell, Semaphore};

use crate::{
    Error, Limits, RepoStore,
    result_cache::{self, Key, ResultCache},
    tools::{ErrorKind, RunTool, Status, ToolCall, ToolResult},
    tree::{Tree, TreeKind},
};

/// The tool runner shared by every rollout: the store, the limits, a semaphore allowing
/// [`Limits::max_concurrent_calls`] calls at once and the result cache. Cloning is cheap and
/// shares them all.
#[derive(Clone, Debug)]
pub struct Sandbox {
    store: Arc<RepoStore>,
    limits: Arc<Limits>,
    permits: Arc<Semaphore>,
    counters: Arc<Counters>,
    cache: Arc<ResultCache>,
    in_flight: Arc<InFlight>,
}

/// The calls queued or running in [`Sandbox::run_call`], each with the cell its result will be
/// published in, so an identical call can wait for it instead of running again.
#[derive(Debug, Default)]
struct InFlight {
    calls: Mutex<HashMap<Key, Arc<OnceCell<ToolResult>>>>,
}

impl InFlight {
    /// The cell of the identical call in flight, or a new one registered for this call.
    fn join(&self, key: &Key) -> Arc<OnceCell<ToolResult>> {
        let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.entry(key.clone()).or_default().clone()
    }

    /// Forgets `cell` once its result is out (later calls go to the result cache, or run again
    /// if the result was not cacheable); a newer cell under the same key is left alone.
    fn finish(&self, key: &Key, cell: &Arc<OnceCell<ToolResult>>) {
        let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if calls.get(key).is_some_and(|current| Arc::ptr_eq(current, cell)) {
            calls.remove(key);
        }
    }
}

/// Counters over the sandbox's life, for tests, benchmarks and a study's `phases.md`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SandboxStats {
    /// Calls running now.
    pub in_flight: usize,
    /// Most calls ever running at once.
    pub peak_in_flight: usize,
    /// Calls completed, cache hits included.
    pub calls: u64,
    /// Calls that timed out.
    pub timeouts: u64,
    /// Calls that ended in an error result (cached errors included).
    pub errors: u64,
    /// Calls answered from the result cache without running.
    pub cache_hits: u64,
    /// Calls answered by waiting for an identical call in flight (see the module docs).
    pub joined: u64,
    /// Results held in the cache now.
    pub cache_entries: usize,
    /// Bytes the cache holds now, as [`Limits::result_cache_bytes`] counts them.
    pub cache_bytes: usize,
    /// Results read back by [`Sandbox::load_results`] from the file an earlier process wrote.
    pub loaded: u64,
}

#[derive(Debug, Default)]
struct Counters {
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    calls: AtomicU64,
    timeouts: AtomicU64,
    errors: AtomicU64,
    joined: AtomicU64,
    loaded: AtomicU64,
}

impl Sandbox {
    /// A sandbox over `store` with `limits`.
    pub fn new(store: Arc<RepoStore>, limits: Limits) -> Self {
        Sandbox {
            permits: Arc::new(Semaphore::new(limits.max_concurrent_calls.max(1))),
            cache: Arc::new(ResultCache::new(limits.result_cache_bytes)),
            store,
            limits: Arc::new(limits),
            counters: Arc::default(),
            in_flight: Arc::default(),
        }
    }

    /// The repository store.
    pub fn store(&self) -> &Arc<RepoStore> {
        &self.store
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The tree of `rev` in repository `repo` (see [`RepoStore::repo`] and [`crate::Repo::tree`]).
    pub fn tree(&self, repo: &str, rev: &str, kind: TreeKind) -> Result<Arc<Tree>, Error> {
        self.store.repo(repo)?.tree(rev, kind)
    }

    /// Current counters.
    pub fn stats(&self) -> SandboxStats {
        let cache = self.cache.stats();
        SandboxStats {
            in_flight: self.counters.in_flight.load(Ordering::Relaxed),
            peak_in_flight: self.counters.peak.load(Ordering::Relaxed),
            calls: self.counters.calls.load(Ordering::Relaxed),
            timeouts: self.counters.timeouts.load(Ordering::Relaxed),
            errors: self.counters.errors.load(Ordering::Relaxed),
            cache_hits: cache.hits,
            joined: self.counters.joined.load(Ordering::Relaxed),
            cache_entries: cache.entries,
            cache_bytes: cache.bytes,
            loaded: self.counters.loaded.load(Ordering::Relaxed),
        }
    }

    /// Where the result cache is kept between processes (`<store>/.index/tool-results`) and the
    /// stamp its results carry, when the store persists its indexes
    /// ([`crate::StoreOptions::persist_index`]) and the cache is on; the stamp (a hash of the
    /// executable) is only computed then.
    fn results_file(&self) -> Option<(PathBuf, u64)> {
        if !(self.store.options().persist_index && self.cache.enabled()) {
            return None;
        }
        let stamp = result_cache::stamp(&self.limits)?;
        Some((self.store.root().join(".index").join("tool-results"), stamp))
    }

    /// Fills the result cache from the file an earlier process of *this executable* wrote under
    /// the same limits (see `result_cache::persist`: any other file is ignored); how many results
    /// it added. Nothing happens when the store does not persist its indexes.
    pub fn load_results(&self) -> usize {
        let Some((path, stamp)) = self.results_file() else { return 0 };
        let loaded = self.cache.load(&path, stamp);
        self.counters.loaded.fetch_add(loaded as u64, Ordering::Relaxed);
        loaded
    }

    /// Writes the result cache where [`Sandbox::load_results`] reads it, atomically; how many
    /// results were written (0, and nothing written, when the store does not persist its indexes).
    pub fn save_results(&self) -> Result<usize, Error> {
        let Some((path, stamp)) = self.results_file() else { return Ok(0) };
        self.cache.save(&path, stamp).map_err(|source| Error::Io { path, source })
    }

    /// Runs one call on this thread, now, outside the semaphore (for tests and the CLI), or
    /// answers it from the result cache.
    pub fn call(&self, tree: &Tree, call: &ToolCall) -> ToolResult {
        let key = self.cache_key(tree, call);
        if let Some(hit) = key.as_ref().and_then(|key| self.cached(key)) {
            return hit;
        }
        run_counted(&self.counters, &self.cache, key, tree, call, &self.limits)
    }

    /// Runs one call on tokio's blocking pool once a permit of the global limit is free, or
    /// answers it from the result cache without waiting for one. The call's deadline starts
    /// when it starts running, not while it waits for a permit.
    pub async fn run_call(&self, tree: Arc<Tree>, call: ToolCall) -> ToolResult {
        let Some(key) = self.cache_key(&tree, &call) else {
            return self.run_permitted(None, tree, call).await;
        };
        if let Some(hit) = self.cached(&key) {
            return hit;
        }
        let cell = self.in_flight.join(&key);
        let ran = AtomicBool::new(false);
        let result = cell
            .get_or_init(|| {
                ran.store(true, Ordering::Relaxed);
                self.run_permitted(Some(key.clone()), tree, call)
            })
            .await
            .clone();
        self.in_flight.finish(&key, &cell);
        if !ran.load(Ordering::Relaxed) {
            self.counters.joined.fetch_add(1, Ordering::Relaxed);
            count_result(&self.counters, &result);
        }
        result
    }

    /// Runs `call` on tokio's blocking pool under a permit of the global limit, caching its
    /// result under `key`.
    async fn run_permitted(&self, key: Option<Key>, tree: Arc<Tree>, call: ToolCall) -> ToolResult {
        let Ok(permit) = self.permits.clone().acquire_owned().await else {
            return ToolResult::error(ErrorKind::Internal, "the sandbox is shutting down".to_owned());
        };
        let sandbox = self.clone();
        let work = tokio::task::spawn_blocking(move || {
            // An identical call may have finished while this one waited for its permit.
            if let Some(hit) = key.as_ref().and_then(|key| sandbox.cached(key)) {
                drop(permit);
                return hit;
            }
            let result = run_counted(&sandbox.counters, &sandbox.cache, key, &tree, &call, &sandbox.limits);
            drop(permit);
            result
        });
        work.await
            .unwrap_or_else(|e| ToolResult::error(ErrorKind::Internal, format!("the sandbox failed on this call: {e}")))
    }

    /// Runs one turn: the first [`Limits::max_calls_per_turn`] calls concurrently (each under
    /// the global limit), the rest answered with [`ErrorKind::CallLimit`]. Results are in call
    /// order.
    pub async fn run_turn(&self, tree: &Arc<Tree>, calls: Vec<ToolCall>) -> Vec<ToolResult> {
        self.run_validated_turn(tree, calls.into_iter().map(Ok).collect()).await
    }

    /// [`Sandbox::run_turn`] for untrusted JSON calls: invalid ones are answered with their
    /// validation error (and still count towards the per-turn limit).
    pub async fn run_turn_json(&self, tree: &Arc<Tree>, calls: &[Value]) -> Vec<ToolResult> {
        self.run_validated_turn(tree, calls.iter().map(ToolCall::from_json).collect()).await
    }

    /// Runs one turn on scoped threads, without tokio: the same per-turn limit, concurrency
    /// within the turn, but outside the global semaphore (for tests and the CLI).
    pub fn run_turn_blocking(&self, tree: &Tree, calls: &[ToolCall]) -> Vec<ToolResult> {
        let allowed = self.limits.max_calls_per_turn;
        std::thread::scope(|scope| {
            let handles: Vec<_> =
                calls.iter().take(allowed).map(|call| scope.spawn(move || self.call(tree, call))).collect();
            let mut results: Vec<ToolResult> = handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        ToolResult::error(ErrorKind::Internal, "the sandbox failed on this call".to_owned())
                    })
                })
                .collect();
            results.extend((allowed..calls.len()).map(|i| over_limit(i, allowed)));
            results
        })
    }

    /// The cache key of `call` on `tree`, or `None` when the cache is off.
    fn cache_key(&self, tree: &Tree, call: &ToolCall) -> Option<Key> {
        if self.cache.enabled() { Key::new(tree, call) } else { None }
    }

    /// A cached result, counted as a completed call (and an error, if it is one).
    fn cached(&self, key: &Key) -> Option<ToolResult> {
        let hit = self.cache.get(key)?;
        count_result(&self.counters, &hit);
        Some(hit)
    }

    async fn run_validated_turn(&self, tree: &Arc<Tree>, calls: Vec<Result<ToolCall, ToolResult>>) -> Vec<ToolResult> {
        let allowed = self.limits.max_calls_per_turn;
        let mut results: Vec<Option<ToolResult>> = vec![None; calls.len()];
        let mut running = tokio::task::JoinSet::new();
        for (i, call) in calls.into_iter().enumerate() {
            if i >= allowed {
                results[i] = Some(over_limit(i, allowed));
                continue;
            }
            match call {
                Err(invalid) => results[i] = Some(invalid),
                Ok(call) => {
                    let sandbox = self.clone();
                    let tree = tree.clone();
                    running.spawn(async move { (i, sandbox.run_call(tree, call).await) });
                }
            }
        }
        while let Some(done) = running.join_next().await {
            if let Ok((i, result)) = done {
                results[i] = Some(result);
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    ToolResult::error(ErrorKind::Internal, "the sandbox failed on this call".to_owned())
                })
            })
            .collect()
    }
}

fn over_limit(index: usize, allowed: usize) -> ToolResult {
    ToolResult::call_limit(index, allowed)
}

/// Runs `call`, counting it in flight while it runs, and caches its result under `key`.
fn run_counted(
    counters: &Counters,
    cache: &ResultCache,
    key: Option<Key>,
    tree: &Tree,
    call: &ToolCall,
    limits: &Limits,
) -> ToolResult {
    let now = counters.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    counters.peak.fetch_max(now, Ordering::SeqCst);
    let result = call.run(tree, limits);
    counters.in_flight.fetch_sub(1, Ordering::SeqCst);
    if let Some(key) = key {
        cache.insert(key, &result);
    }
    count_result(counters, &result);
    result
}

/// Counts a completed call by how it ended.
fn count_result(counters: &Counters, result: &ToolResult) {
    counters.calls.fetch_add(1, Ordering::Relaxed);
    match result.status {
        Status::Timeout => {
            counters.timeouts.fetch_add(1, Ordering::Relaxed);
        }
        Status::Error(_) => {
            counters.errors.fetch_add(1, Ordering::Relaxed);
        }
        _ => {}
    }
}
