//! Every limit is a message to the policy, never a failed run.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use rewardlab_sandbox::{ErrorKind, Limits, RepoStore, Sandbox, Status, StoreOptions, ToolCall, TreeKind};
use serde_json::json;

use crate::sandbox::helpers::{
    Fixture, Rng, call, commit_all, fast_import_bare, fast_import_commit, git, init, python_file, write,
};

fn small_repo(fx: &Fixture) -> std::path::PathBuf {
    let src = fx.path("acme/limits");
    init(&src);
    let mut rng = Rng::new(3);
    let mut many = String::new();
    for i in 0..2000 {
        many.push_str(&format!("match line {i} with some text\n"));
    }
    write(&src, "many.txt", &many);
    write(&src, "big.txt", "x".repeat(5000));
    write(&src, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR match".as_slice());
    write(&src, "late_nul.txt", b"match before\nmore\n\x00after match\n".as_slice());
    write(&src, "code.py", python_file(&mut rng, 30));
    commit_all(&src, "limits");
    src
}

#[test]
fn output_is_cut_at_the_limit_with_a_closing_line() {
    let fx = Fixture::new();
    let src = small_repo(&fx);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let tree = store.repo(src.to_str().expect("utf-8")).expect("clone").tree("HEAD", TreeKind::View).expect("tree");
    let limits = Limits::default();

    let grep = call(&tree, &limits, json!({"tool": "grep", "args": {"pattern": "match line"}}));
    assert_eq!(grep.status, Status::Truncated);
    assert!(grep.output.chars().count() <= 4096, "{}", grep.output.chars().count());
    let last = grep.output.lines().last().expect("closing line");
    assert!(last.starts_with("[output cut at 4096 characters: "), "{last}");
    assert!(last.contains(&format!("{} more lines", 2000 - grep.entities.len())), "{last}");
    assert!(last.contains("`path` glob filter"), "{last}");
    let shown: Vec<&str> = grep.output.lines().filter(|l| !l.starts_with('[')).collect();
    assert_eq!(shown.len(), grep.entities.len(), "one entity per shown match");
    assert!(grep.output.contains("[skipped 2 binary files]\n[output cut"), "notes come before the cut notice");
    assert_eq!(grep.entities[0], "many.txt:1");

    let read = call(&tree, &limits, json!({"tool": "read", "args": {"path": "many.txt"}}));
    assert_eq!(read.status, Status::Truncated);
    assert!(read.output.chars().count() <= 4096);
    let shown = read.entities.len();
    let last = read.output.lines().last().expect("closing line");
    assert!(last.contains(&format!("start={}, end=2000", shown + 1)), "{last}");
    // Following the advice continues exactly where the cut was.
    let next = call(
        &tree,
        &limits,
        json!({"tool": "read", "args": {"path": "many.txt", "start": shown + 1, "end": shown + 3}}),
    );
    assert_eq!(next.entities, (shown + 1..=shown + 3).map(|n| format!("many.txt:{n}")).collect::<Vec<_>>());

    // A single huge line is shortened rather than blowing the budget.
    let long = call(&tree, &limits, json!({"tool": "read", "args": {"path": "big.txt"}}));
    assert_eq!(long.status, Status::Ok);
    assert!(long.output.ends_with("more characters on this line]"), "{}", long.output);
}

#[test]
fn binary_files_are_skipped_by_grep_and_refused_by_read() {
    let fx = Fixture::new();
    let src = small_repo(&fx);
    let limits = Limits::default();
    // With the content index and without it: the blob cache remembers which blobs hold a NUL
    // byte, so repeated greps of one tree must keep skipping exactly the binary ones.
    for (name, index_bytes) in [("store", StoreOptions::default().index_bytes), ("scan", 0)] {
        let store = RepoStore::open_with(fx.path(name), StoreOptions { index_bytes, ..StoreOptions::default() })
            .expect("store");
        let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
        for kind in [TreeKind::View, TreeKind::Worktree] {
            let tree = repo.tree("HEAD", kind).expect("tree");
            let args = json!({"tool": "grep", "args": {"pattern": "match", "path": "*.{png,txt}"}});
            let grep = call(&tree, &limits, args.clone());
            assert!(!grep.output.contains("image.png") && !grep.output.contains("late_nul.txt:"), "{}", grep.output);
            assert!(grep.output.contains("[skipped 2 binary files]"), "{}", grep.output);
            for _ in 0..2 {
                assert_eq!(call(&tree, &limits, args.clone()).output, grep.output, "{name} {kind}: a repeated grep");
            }
            let read = call(&tree, &limits, json!({"tool": "read", "args": {"path": "image.png"}}));
            assert_eq!(read.status, Status::Error(ErrorKind::Binary));
            assert!(read.output.contains("binary file"), "{}", read.output);
        }
    }
}

#[test]
fn read_refuses_files_over_the_size_cap() {
    let fx = Fixture::new();
    let src = small_repo(&fx);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let limits = Limits { max_read_bytes: 1000, max_grep_file_bytes: 1000, ..Limits::default() };
    for kind in [TreeKind::View, TreeKind::Worktree] {
        let tree = repo.tree("HEAD", kind).expect("tree");
        let read = call(&tree, &limits, json!({"tool": "read", "args": {"path": "big.txt"}}));
        assert_eq!(read.status, Status::Error(ErrorKind::TooLarge), "{kind}");
        assert!(read.output.contains("5000 bytes is over the 1000-byte limit"), "{}", read.output);
        let grep = call(&tree, &limits, json!({"tool": "grep", "args": {"pattern": "x", "path": "big.txt"}}));
        assert!(grep.output.contains("[skipped 1 file over 1000 bytes]"), "{}", grep.output);
    }
}

#[test]
fn regex_limits_are_messages() {
    let fx = Fixture::new();
    let src = small_repo(&fx);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let tree = store.repo(src.to_str().expect("utf-8")).expect("clone").tree("HEAD", TreeKind::View).expect("tree");
    let limits = Limits::default();
    let grep = |pattern: String| call(&tree, &limits, json!({"tool": "grep", "args": {"pattern": pattern}}));

    let long = grep("a".repeat(limits.max_pattern_len + 1));
    assert_eq!(long.status, Status::Error(ErrorKind::PatternTooLong), "{}", long.output);
    let nested = grep(format!("{}a{}", "(".repeat(60), ")".repeat(60)));
    assert_eq!(nested.status, Status::Error(ErrorKind::PatternTooComplex), "{}", nested.output);
    let huge = grep(r"(\w{100}){100}".to_owned());
    assert_eq!(huge.status, Status::Error(ErrorKind::PatternTooComplex), "{}", huge.output);
    assert!(huge.output.contains("size limit"), "{}", huge.output);
    let invalid = grep("(unclosed".to_owned());
    assert_eq!(invalid.status, Status::Error(ErrorKind::InvalidPattern), "{}", invalid.output);
    let empty = grep(String::new());
    assert_eq!(empty.status, Status::Error(ErrorKind::InvalidPattern));
    // A pattern within the limits still works.
    assert_eq!(grep(r"line \d+ with".to_owned()).status, Status::Truncated);
}

/// A pathological-but-allowed search over many large blobs, with a tiny budget, stops within
/// 10% of its budget, and would have taken at least twice as long without it.
#[test]
fn timeouts_stop_the_work_within_ten_percent_of_the_budget() {
    let fx = Fixture::new();
    let bare = fx.path("store/slow__corpus.git");
    let mut stream = Vec::new();
    let mut rng = Rng::new(11);
    // 48 files of ~384 KiB of word soup (each more than one 256 KiB search chunk), and one
    // 30 MiB file with matches throughout (a full search of it takes a second or more in any
    // build). It stays under the blob cache's largest entry (an eighth of 256 MiB), so
    // the timed calls search it from memory: inflating a blob is not interruptible, and a
    // deadline that fell while a larger blob inflated would be overshot by the inflation.
    let mut files = Vec::new();
    for f in 0..48 {
        let mut text = String::new();
        while text.len() < 384 << 10 {
            text.push_str(&python_file(&mut rng, 50));
        }
        files.push((format!("soup/f{f:02}.py"), text.into_bytes()));
    }
    let mut big = String::new();
    while big.len() < 30 << 20 {
        big.push_str(&python_file(&mut rng, 50));
        // A line the pattern below matches, so every chunk of the file has matches to report
        // and lines to count: without them grep skips through a large file too fast for the
        // budget to matter.
        big.push_str("value = compute(items, total, 12345)\n");
    }
    files.push(("soup/zz_big.py".to_owned(), big.into_bytes()));
    fast_import_commit(&mut stream, 1, None, &files);
    fast_import_bare(&bare, &stream);

    // Without the grep memo: the untimed full search below would record every file, and the
    // timed calls of the same pattern would replay them instead of searching.
    let options = StoreOptions { grep_memo_bytes: 0, ..StoreOptions::default() };
    let store = Arc::new(RepoStore::open_with(fx.path("store"), options).expect("store"));
    let repo = store.repo("slow/corpus").expect("adopted mirror");
    // The content index is built first, so no background build shares the cores with the
    // timed calls (the index never holds a call past its deadline; that is tested apart).
    let head = repo.resolve("HEAD").expect("HEAD");
    repo.build_index(&[head], None).expect("index");
    // No literal to skip ahead with and a large Unicode-aware automaton: slow per byte, but
    // legal. A lazy-DFA cache of 1 KiB is too small for any, so the regex engine simulates the
    // NFA instead: slow in an optimised build too (`cargo test --release`), where with the
    // default cache the 30 MiB file was searched in 0.1 s, too fast for the budgets below.
    let pattern = r"(?i)\w+\s*=\s*\w+\(\w+\W+\w{3,}\W+\d{5}\)|\w{3,}\s*\.\s*\w{3,}\(\w+\W+\d{4,}\W+\w+\)";
    let generous = Limits {
        grep_timeout: Duration::from_secs(120),
        max_grep_file_bytes: 64 << 20,
        regex_dfa_size_limit: 1 << 10,
        ..Limits::default()
    };
    for kind in [TreeKind::View, TreeKind::Worktree] {
        let tree = repo.tree("HEAD", kind).expect("tree");
        let mut args = json!({"tool": "grep", "args": {"pattern": pattern}});
        let mut budget = Duration::from_millis(200);
        let mut tight = Limits { grep_timeout: budget, ..generous.clone() };
        for path in [None, Some("soup/zz_big.py")] {
            args = json!({"tool": "grep", "args": {"pattern": pattern, "path": path}});
            let started = Instant::now();
            let full = call(&tree, &generous, args.clone());
            let full_time = started.elapsed();
            assert_ne!(full.status, Status::Timeout);
            // The budget is a third of the full search, between 100 and 200 ms: a quiet machine
            // searches the 30 MiB file in about 1 s (release build) to 1.5 s (debug build), a
            // loaded one in more.
            budget = (full_time / 3).clamp(Duration::from_millis(100), Duration::from_millis(200));
            tight = Limits { grep_timeout: budget, ..generous.clone() };
            assert!(
                full_time > budget * 2,
                "{kind} {path:?}: the full search took only {full_time:?}; make the corpus slower"
            );
            let notice = format!("[timeout: grep stopped at its {:.1} s budget", budget.as_secs_f64());
            let took = best_of_three(|| {
                let result = call(&tree, &tight, args.clone());
                assert_eq!(result.status, Status::Timeout, "{kind} {path:?}: {}", result.output);
                assert!(result.output.contains(&notice), "{}", result.output);
            });
            eprintln!("{kind} {path:?}: full search {full_time:?}, with a {budget:?} budget {took:?}");
            assert!(took <= budget * 11 / 10, "{kind} {path:?}: took {took:?} for a {budget:?} budget");
        }
        // Through the async API the same: the turn returns on time and nothing is left running.
        let sandbox = Sandbox::new(store.clone(), tight.clone());
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("runtime");
        let calls = vec![ToolCall::from_json(&args).expect("valid"); 2];
        let took = best_of_three(|| {
            let turn = runtime.block_on(sandbox.run_turn(&tree, calls.clone()));
            assert!(turn.iter().all(|r| r.status == Status::Timeout));
            assert_eq!(sandbox.stats().in_flight, 0, "the work stopped");
        });
        eprintln!("{kind}: async turn of two calls with a {budget:?} budget {took:?}");
        assert!(took <= budget * 11 / 10, "{kind}: an async turn took {took:?} for a {budget:?} budget");
    }
}

/// The shortest of three timed runs: the tests share two cores with other builds, and one
/// descheduled run says nothing about whether the deadline is enforced.
fn best_of_three(mut run: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .min()
        .expect("three runs")
}

/// A store whose `acme/holes` lacks the blob of `lost.py` (a loose object deleted from a bare
/// clone); the blob's id.
fn holed_store(fx: &Fixture) -> String {
    let src = fx.path("acme/holes");
    init(&src);
    write(&src, "present.py", "here = 1\n");
    write(&src, "lost.py", "gone = 1\n");
    commit_all(&src, "two files");
    // A local `git clone --bare` keeps loose objects loose, so one can be deleted.
    let mirror = fx.path("store/acme__holes.git");
    git(fx.tmp.path(), &["clone", "-q", "--bare", src.to_str().expect("utf-8"), mirror.to_str().expect("utf-8")]);
    let lost = git(&src, &["rev-parse", "HEAD:lost.py"]);
    let lost = lost.trim();
    let object = mirror.join("objects").join(&lost[..2]).join(&lost[2..]);
    std::fs::remove_file(&object).expect("the blob is a loose object");
    lost.to_owned()
}

/// A blob missing from the store (an incomplete clone) fails the calls that need it, only.
#[test]
fn a_missing_blob_fails_only_that_call() {
    let fx = Fixture::new();
    let lost = holed_store(&fx);
    let lost = lost.as_str();

    let store = Arc::new(RepoStore::open(fx.path("store")).expect("store"));
    let sandbox = Sandbox::new(store.clone(), Limits::default());
    let tree = sandbox.tree("acme/holes", "HEAD", TreeKind::View).expect("the tree objects are intact");
    let results = sandbox.run_turn_blocking(
        &tree,
        &[
            ToolCall::from_json(&json!({"tool": "read", "args": {"path": "lost.py"}})).expect("valid"),
            ToolCall::from_json(&json!({"tool": "read", "args": {"path": "present.py"}})).expect("valid"),
            ToolCall::from_json(&json!({"tool": "grep", "args": {"pattern": "="}})).expect("valid"),
            ToolCall::from_json(&json!({"tool": "glob", "args": {"pattern": "*.py"}})).expect("valid"),
        ],
    );
    assert_eq!(results[0].status, Status::Error(ErrorKind::MissingObject), "{}", results[0].output);
    assert!(results[0].output.contains(lost), "{}", results[0].output);
    assert_eq!(results[1].status, Status::Ok);
    assert_eq!(results[1].output, "     1\there = 1");
    assert_eq!(results[2].status, Status::Error(ErrorKind::MissingObject), "{}", results[2].output);
    assert_eq!(results[3].entities, ["lost.py", "present.py"]);
    // The worktree kind cannot check the commit out at all: an error for the caller, not a panic.
    assert!(store.repo("acme/holes").expect("adopted").tree("HEAD", TreeKind::Worktree).is_err());
    assert!(!store.trees_root().join("acme__holes.git").read_dir().map(|mut d| d.next().is_some()).unwrap_or(false));
}

/// With `skip_missing_blobs`, grep searches what the store has and says what it skipped; a read
/// of the missing file still fails.
#[test]
fn grep_may_skip_a_missing_blob_and_say_so() {
    let fx = Fixture::new();
    holed_store(&fx);
    let store = Arc::new(RepoStore::open(fx.path("store")).expect("store"));
    let sandbox = Sandbox::new(store, Limits { skip_missing_blobs: true, ..Limits::default() });
    let tree = sandbox.tree("acme/holes", "HEAD", TreeKind::View).expect("the tree objects are intact");
    let results = sandbox.run_turn_blocking(
        &tree,
        &[
            ToolCall::from_json(&json!({"tool": "grep", "args": {"pattern": "="}})).expect("valid"),
            ToolCall::from_json(&json!({"tool": "read", "args": {"path": "lost.py"}})).expect("valid"),
        ],
    );
    assert_eq!(results[0].status, Status::Ok, "{}", results[0].output);
    assert_eq!(results[0].output, "present.py:1:here = 1\n[skipped 1 file missing from the repository store]");
    assert_eq!(results[1].status, Status::Error(ErrorKind::MissingObject), "{}", results[1].output);
}
