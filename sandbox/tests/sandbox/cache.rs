//! The sandbox's result cache: a hit is exactly the result a fresh run gives, entries never
//! cross trees, load-dependent results are not kept, and the byte budget holds.

use std::{sync::Arc, time::Duration};

use rewardlab_sandbox::{
    ErrorKind, GlobArgs, GrepArgs, Limits, ReadArgs, RepoStore, RunTool, Sandbox, Status, StoreOptions, ToolCall,
    TreeKind,
};

use crate::sandbox::helpers::{Fixture, commit_all, generated_repo, init, write};

fn grep(pattern: &str, path: Option<&str>) -> ToolCall {
    ToolCall::Grep(GrepArgs { pattern: pattern.to_owned(), path: path.map(str::to_owned), case_sensitive: None })
}

fn glob(pattern: &str) -> ToolCall {
    ToolCall::Glob(GlobArgs { pattern: pattern.to_owned() })
}

fn read(path: &str, start: Option<u64>, end: Option<u64>) -> ToolCall {
    ToolCall::Read(ReadArgs { path: path.to_owned(), start, end })
}

fn store(fx: &Fixture) -> Arc<RepoStore> {
    Arc::new(RepoStore::open(fx.path("store")).expect("store"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("runtime")
}

/// Calls that cover every tool, output cut at the limit, and errors the call itself causes.
fn mixed_calls() -> Vec<ToolCall> {
    vec![
        grep("TODO", None),
        grep(r"def [a-z]+_\d+", Some("src/**")),
        grep("(?i)request", None),
        grep("(unclosed", None),
        grep("no such text anywhere", None),
        glob("src/**/*.py"),
        glob("docs/*"),
        read("src/pkg0/mod0.py", None, None),
        read("src/pkg1/mod2.py", Some(3), Some(9)),
        read("src/current.py", None, None),
        read("missing/file.py", None, None),
        read("../outside", None, None),
        read("data/blob.bin", None, None),
        read("docs", None, None),
    ]
}

#[test]
fn a_store_that_persists_its_indexes_keeps_the_results_for_the_next_process() {
    let fx = Fixture::new();
    let src = fx.path("acme/cache");
    generated_repo(&src, 22, 2);
    let persisting = StoreOptions { persist_index: true, ..StoreOptions::default() };
    let open =
        |options: &StoreOptions| Arc::new(RepoStore::open_with(fx.path("store"), options.clone()).expect("store"));
    let calls = mixed_calls();
    let first = Sandbox::new(open(&persisting), Limits::default());
    let tree = first.tree(src.to_str().expect("utf-8"), "HEAD", TreeKind::View).expect("tree");
    let fresh: Vec<_> = calls.iter().map(|call| first.call(&tree, call)).collect();
    assert_eq!(first.load_results(), 0, "no earlier process");
    assert_eq!(first.save_results().expect("saves"), calls.len());
    drop((tree, first));

    // The next process: every call is answered from the file, exactly as it ran.
    let next = Sandbox::new(open(&persisting), Limits::default());
    assert_eq!(next.load_results(), calls.len());
    let tree = next.tree(src.to_str().expect("utf-8"), "HEAD", TreeKind::View).expect("tree");
    let again: Vec<_> = calls.iter().map(|call| next.call(&tree, call)).collect();
    assert_eq!(again, fresh);
    let stats = next.stats();
    assert_eq!((stats.loaded, stats.cache_hits), (calls.len() as u64, calls.len() as u64));

    // Other limits give other results (here: other cut points): the file is not theirs.
    let other = Sandbox::new(open(&persisting), Limits { max_output_chars: 400, ..Limits::default() });
    assert_eq!(other.load_results(), 0);
    // A store that does not persist its indexes neither reads nor writes the file.
    let plain = Sandbox::new(open(&StoreOptions::default()), Limits::default());
    assert_eq!((plain.load_results(), plain.save_results().expect("nothing to do")), (0, 0));
}

#[test]
fn cached_results_equal_fresh_runs_exactly_and_the_second_call_is_a_hit() {
    let fx = Fixture::new();
    let src = fx.path("acme/cache");
    generated_repo(&src, 21, 2);
    // A small output budget, so several results are cut and their closing lines are cached too.
    let limits = Limits { max_output_chars: 400, ..Limits::default() };
    let sandbox = Sandbox::new(store(&fx), limits.clone());
    let calls = mixed_calls();
    let runtime = runtime();
    let mut expected_hits = 0;
    for kind in [TreeKind::View, TreeKind::Worktree] {
        let tree = sandbox.tree(src.to_str().expect("utf-8"), "HEAD", kind).expect("tree");
        let fresh: Vec<_> = calls.iter().map(|call| call.run(&tree, &limits)).collect();
        let statuses: Vec<Status> = fresh.iter().map(|r| r.status).collect();
        assert!(statuses.contains(&Status::Truncated), "{kind}: some output is cut: {statuses:?}");
        for kind in [ErrorKind::NotFound, ErrorKind::InvalidPattern, ErrorKind::Refused, ErrorKind::Binary] {
            assert!(statuses.contains(&Status::Error(kind)), "{kind:?} is among {statuses:?}");
        }

        let before = sandbox.stats();
        let first: Vec<_> = calls.iter().map(|call| sandbox.call(&tree, call)).collect();
        assert_eq!(first, fresh, "{kind}: a miss runs the call");
        assert_eq!(sandbox.stats().cache_hits, before.cache_hits, "{kind}: distinct calls all miss");
        assert_eq!(sandbox.stats().cache_entries, before.cache_entries + calls.len());

        let second: Vec<_> = calls.iter().map(|call| sandbox.call(&tree, call)).collect();
        assert_eq!(second, fresh, "{kind}: a hit is exactly the fresh result");
        expected_hits += calls.len() as u64;
        assert_eq!(sandbox.stats().cache_hits, expected_hits, "{kind}: every repeated call is a hit");

        // The async turn and a clone of the sandbox see the same cache.
        let clone = sandbox.clone();
        let turn = runtime.block_on(clone.run_turn(&tree, calls[..8].to_vec()));
        assert_eq!(turn, fresh[..8], "{kind}: a turn's hits are the fresh results, in call order");
        expected_hits += 8;
        let single = runtime.block_on(clone.run_call(tree.clone(), calls[10].clone()));
        assert_eq!(single, fresh[10]);
        expected_hits += 1;
        let stats = sandbox.stats();
        assert_eq!(stats.cache_hits, expected_hits);
        assert_eq!(stats.in_flight, 0);
    }
    let stats = sandbox.stats();
    assert_eq!(stats.calls, 2 * (2 * calls.len() as u64 + 9), "hits count as completed calls");
    assert!(stats.cache_bytes > 0 && stats.cache_bytes <= limits.result_cache_bytes);
}

#[test]
fn a_different_commit_kind_or_repository_is_not_served_from_anothers_entry() {
    let fx = Fixture::new();
    let one = fx.path("acme/one");
    init(&one);
    write(&one, "a.py", "x = 1\n");
    let first = commit_all(&one, "first");
    write(&one, "a.py", "x = 2\n");
    let second = commit_all(&one, "second");
    let two = fx.path("acme/two");
    init(&two);
    write(&two, "a.py", "x = 3\n");
    commit_all(&two, "other repo");

    let limits = Limits::default();
    let sandbox = Sandbox::new(store(&fx), limits.clone());
    let one = one.to_str().expect("utf-8");
    let two = two.to_str().expect("utf-8");
    let trees = [
        sandbox.tree(one, &first, TreeKind::View).expect("tree"),
        sandbox.tree(one, &second, TreeKind::View).expect("tree"),
        sandbox.tree(one, &second, TreeKind::Worktree).expect("tree"),
        sandbox.tree(two, "HEAD", TreeKind::View).expect("tree"),
    ];
    let calls = [grep("x = ", None), read("a.py", None, None)];
    for (t, tree) in trees.iter().enumerate() {
        for call in &calls {
            let hits = sandbox.stats().cache_hits;
            let result = sandbox.call(tree, call);
            assert_eq!(result, call.run(tree, &limits), "tree {t}: {call:?}");
            assert_eq!(sandbox.stats().cache_hits, hits, "tree {t} misses: no other tree's entry serves it");
        }
    }
    assert_eq!(sandbox.call(&trees[0], &calls[1]).output, "     1\tx = 1");
    assert_eq!(sandbox.call(&trees[1], &calls[1]).output, "     1\tx = 2");
    assert_eq!(sandbox.call(&trees[3], &calls[1]).output, "     1\tx = 3");
    let stats = sandbox.stats();
    assert_eq!(stats.cache_hits, 3);
    assert_eq!(stats.cache_entries, trees.len() * calls.len(), "one entry per tree and call");
}

#[test]
fn identical_calls_in_flight_run_once_and_all_get_the_result() {
    let fx = Fixture::new();
    let src = fx.path("acme/joined");
    generated_repo(&src, 21, 2);
    let limits = Limits::default();
    let sandbox = Sandbox::new(store(&fx), limits.clone());
    let tree = sandbox.tree(src.to_str().expect("utf-8"), "HEAD", TreeKind::View).expect("tree");
    let runtime = runtime();
    // Eight rollouts of one group asking the same greps at once, twice over, plus a distinct call.
    let same = grep(r"def [a-z]+_\d+", None);
    let other = grep("TODO", None);
    let fresh_same = same.run(&tree, &limits);
    let fresh_other = other.run(&tree, &limits);
    let results = runtime.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..17 {
            let (sandbox, tree) = (sandbox.clone(), tree.clone());
            let call = if i == 16 { other.clone() } else { same.clone() };
            set.spawn(async move { (i, sandbox.run_call(tree, call).await) });
        }
        let mut results = set.join_all().await;
        results.sort_by_key(|(i, _)| *i);
        results
    });
    for (i, result) in &results {
        let expected = if *i == 16 { &fresh_other } else { &fresh_same };
        assert_eq!(result, expected, "call {i} got the fresh result");
    }
    let stats = sandbox.stats();
    assert_eq!(stats.calls, 17);
    assert_eq!(stats.calls - stats.cache_hits - stats.joined, 2, "each distinct call ran once: {stats:?}");
    assert_eq!(stats.in_flight, 0);

    // With the cache off nothing is joined either: every call runs (`--no-cache` measures that).
    let uncached = Sandbox::new(store(&fx), Limits { result_cache_bytes: 0, ..limits });
    let turn = runtime.block_on(uncached.run_turn(&tree, vec![same.clone(); 4]));
    assert!(turn.iter().all(|r| *r == fresh_same));
    assert_eq!((uncached.stats().joined, uncached.stats().cache_hits), (0, 0));
}

#[test]
fn a_timed_out_result_is_not_cached() {
    let fx = Fixture::new();
    let src = fx.path("acme/slow");
    generated_repo(&src, 5, 1);
    // A zero grep budget: every grep stops at its first deadline check, whatever the load.
    let limits = Limits { grep_timeout: Duration::ZERO, ..Limits::default() };
    let sandbox = Sandbox::new(store(&fx), limits);
    let tree = sandbox.tree(src.to_str().expect("utf-8"), "HEAD", TreeKind::View).expect("tree");
    let timed_out = grep("TODO", None);
    let finished = read("README.md", None, None);
    for _ in 0..3 {
        let result = sandbox.call(&tree, &timed_out);
        assert_eq!(result.status, Status::Timeout, "{}", result.output);
        assert_eq!(sandbox.call(&tree, &finished).status, Status::Ok);
    }
    let turn = runtime().block_on(sandbox.run_turn(&tree, vec![timed_out.clone(); 4]));
    assert!(turn.iter().all(|r| r.status == Status::Timeout));
    let stats = sandbox.stats();
    assert_eq!(stats.timeouts, 7, "every timed-out grep ran again");
    assert_eq!(stats.cache_hits, 2, "only the read is served from the cache");
    assert_eq!(stats.cache_entries, 1);
}

#[test]
fn the_cache_stays_within_its_byte_budget_and_evicts_the_oldest_entries() {
    let fx = Fixture::new();
    let src = fx.path("acme/bound");
    generated_repo(&src, 9, 1);
    let budget = 6000;
    let sandbox = Sandbox::new(store(&fx), Limits { result_cache_bytes: budget, ..Limits::default() });
    let tree = sandbox.tree(src.to_str().expect("utf-8"), "HEAD", TreeKind::View).expect("tree");
    let calls: Vec<ToolCall> = (0..120)
        .map(|i| match i % 3 {
            0 => grep(&format!("value_{i}\\b"), None),
            1 => read("src/pkg0/mod1.py", Some(1 + i / 3), Some(4 + i / 3)),
            _ => glob(&format!("src/pkg{}/*{}*", i % 3, i)),
        })
        .collect();
    let mut peak = 0;
    for call in &calls {
        let result = sandbox.call(&tree, call);
        assert!(!matches!(result.status, Status::Timeout), "{}", result.output);
        let stats = sandbox.stats();
        assert!(stats.cache_bytes <= budget, "{} bytes cached with a budget of {budget}", stats.cache_bytes);
        peak = peak.max(stats.cache_bytes);
    }
    let stats = sandbox.stats();
    assert_eq!(stats.cache_hits, 0, "120 distinct calls");
    assert!(stats.cache_entries > 0 && stats.cache_entries < calls.len(), "{} entries", stats.cache_entries);
    assert!(peak > budget / 2, "the budget is used ({peak} bytes at most)");
    // The newest entry is still there; the oldest was evicted and runs again.
    sandbox.call(&tree, &calls[calls.len() - 1]);
    assert_eq!(sandbox.stats().cache_hits, 1);
    sandbox.call(&tree, &calls[0]);
    assert_eq!(sandbox.stats().cache_hits, 1, "the oldest entry was evicted");
}

#[test]
fn a_zero_budget_never_hits() {
    let fx = Fixture::new();
    let src = fx.path("acme/off");
    generated_repo(&src, 13, 1);
    let limits = Limits { result_cache_bytes: 0, ..Limits::default() };
    let sandbox = Sandbox::new(store(&fx), limits.clone());
    let tree = sandbox.tree(src.to_str().expect("utf-8"), "HEAD", TreeKind::View).expect("tree");
    let calls = mixed_calls();
    let runtime = runtime();
    for _ in 0..3 {
        for call in &calls {
            assert_eq!(sandbox.call(&tree, call), call.run(&tree, &limits));
        }
        runtime.block_on(sandbox.run_turn(&tree, calls[..8].to_vec()));
    }
    let stats = sandbox.stats();
    assert_eq!(stats.calls, 3 * (calls.len() as u64 + 8));
    assert_eq!((stats.cache_hits, stats.cache_entries, stats.cache_bytes), (0, 0, 0));
}
