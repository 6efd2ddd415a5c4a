//! The grep memo against the scan it replaces: two stores on one source, one without the memo
//! (and both without the index, so the memo does all the narrowing), must give identical
//! results for every grep on every commit, in the order a study asks them: the first commit
//! fills the memo, the later ones replay it.

use std::path::Path;

use rewardlab_sandbox::{Limits, RepoStore, StoreOptions, ToolResult, Tree, TreeKind};
use serde_json::json;

use crate::sandbox::helpers::{Fixture, call, commit_all, generated_repo, write};

/// Greps the test asks: a common word, a rare one, a definition, case-insensitive ones, a
/// pattern of the non-UTF-8 file and of the long lines.
const PATTERNS: &[(&str, bool)] = &[
    ("def", true),
    ("request", true),
    ("REQUEST", false),
    ("(?:def|class) [a-z_]+_1\\b", true),
    ("wide", true),
    ("caf", true),
    ("\\bx\\b", false),
    ("no_such_thing", true),
    ("shared", true),
];

/// A source whose commits share most blobs, with lines of every length class against a line cap
/// of 300: short, over the cap less the memo's path room (256), over the cap itself; a path longer
/// than the path room; a non-UTF-8 file; a binary file; a file of many matching lines.
fn source(fx: &Fixture) -> (std::path::PathBuf, Vec<String>) {
    let src = fx.path("acme/memo");
    let mut ids = generated_repo(&src, 5, 2);
    let wide = |n: usize| format!("wide {} request\n", "é".repeat(n));
    let lines: String = [10, 40, 60, 250, 280, 400].iter().map(|&n| wide(n)).collect();
    write(&src, "src/wide.py", &lines);
    let deep = format!("{}/deep.py", ["nested_directory_name"; 14].join("/"));
    assert!(deep.chars().count() > 256);
    write(&src, &deep, &lines);
    write(&src, "latin1.txt", b"caf\xe9 request\nshared \xff\xfe line\n".as_slice());
    write(&src, "data/blob.bin", b"shared\x00request\n".as_slice());
    // More matching lines than an entry keeps texts of: replayed from counts alone.
    write(&src, "src/many.py", (0..40).map(|i| format!("def request_{i}(): shared\n")).collect::<String>());
    ids.push(commit_all(&src, "wide lines"));
    write(&src, "src/wide.py", format!("{lines}def x(): request\n"));
    ids.push(commit_all(&src, "one file changed"));
    (src, ids)
}

fn store(fx: &Fixture, name: &str, grep_memo_bytes: usize) -> RepoStore {
    RepoStore::open_with(fx.path(name), StoreOptions { index_bytes: 0, grep_memo_bytes, ..StoreOptions::default() })
        .expect("store")
}

fn grep(tree: &Tree, limits: &Limits, pattern: &str, case_sensitive: bool, path: Option<&str>) -> ToolResult {
    call(
        tree,
        limits,
        json!({"tool": "grep", "args": {"pattern": pattern, "case_sensitive": case_sensitive, "path": path}}),
    )
}

fn trees(store: &RepoStore, src: &Path, ids: &[String]) -> Vec<std::sync::Arc<Tree>> {
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    ids.iter().map(|id| repo.tree(id, TreeKind::View).expect("view")).collect()
}

#[test]
fn memo_replays_are_identical_to_the_scan_on_every_commit() {
    let fx = Fixture::new();
    let (src, ids) = source(&fx);
    let scan_store = store(&fx, "scan", 0);
    let memo_store = store(&fx, "memo", 64 << 20);
    let scan = trees(&scan_store, &src, &ids);
    let memo = trees(&memo_store, &src, &ids);
    let limits = [
        Limits { max_line_chars: 300, ..Limits::default() },
        // Cut early: most files are only counted, long lines shortened whatever their path.
        Limits { max_line_chars: 300, max_output_chars: 400, ..Limits::default() },
        Limits { max_line_chars: 30, max_output_chars: 200, ..Limits::default() },
    ];
    for limits in &limits {
        for &(pattern, case_sensitive) in PATTERNS {
            for path in [None, Some("*.py"), Some("nested_directory_name")] {
                // Twice over the commits: the second round replays blobs of every commit.
                for round in 0..2 {
                    for (s, m) in scan.iter().zip(&memo) {
                        let expected = grep(s, limits, pattern, case_sensitive, path);
                        let got = grep(m, limits, pattern, case_sensitive, path);
                        assert_eq!(
                            got,
                            expected,
                            "grep {pattern:?} case_sensitive {case_sensitive} path {path:?} round {round} at {} with {limits:?}",
                            s.commit()
                        );
                    }
                }
            }
        }
    }
    let repo = memo_store.repo(src.to_str().expect("utf-8")).expect("open");
    let stats = repo.index_stats();
    // One memo per pattern, case flag and line cap (the output limit does not change a file's lines).
    assert!(stats.memo_files > 1000 && stats.memo_patterns == PATTERNS.len() * 2, "{stats:?}");
    let off = scan_store.repo(src.to_str().expect("utf-8")).expect("open").index_stats();
    assert_eq!((off.memo_files, off.memo_patterns, off.memo_bytes), (0, 0, 0), "a bound of 0 turns the memo off");
}

#[test]
fn the_memo_stays_within_its_bound_and_still_agrees() {
    let fx = Fixture::new();
    let (src, ids) = source(&fx);
    let bound = 16 << 10;
    let scan_store = store(&fx, "scan", 0);
    let memo_store = store(&fx, "memo", bound);
    let scan = trees(&scan_store, &src, &ids);
    let memo = trees(&memo_store, &src, &ids);
    let repo = memo_store.repo(src.to_str().expect("utf-8")).expect("open");
    let limits = Limits { max_output_chars: 600, ..Limits::default() };
    for word in ["def", "request", "return", "import", "self", "value", "x", "e", "wide", "shared"] {
        for (s, m) in scan.iter().zip(&memo) {
            assert_eq!(grep(m, &limits, word, true, None), grep(s, &limits, word, true, None), "{word}");
            let stats = repo.index_stats();
            assert!(stats.memo_bytes <= bound, "{stats:?}");
        }
    }
    let stats = repo.index_stats();
    assert!(stats.memo_patterns < 10 && stats.memo_files > 0, "patterns were dropped, and some replayed: {stats:?}");
}

#[test]
fn a_persisted_memo_serves_the_next_process_and_still_agrees() {
    let fx = Fixture::new();
    let (src, ids) = source(&fx);
    let scan_store = store(&fx, "scan", 0);
    let scan = trees(&scan_store, &src, &ids);
    // One memo key (the line cap), cut early (most files only counted: the file's entries are
    // replayed before a shown grep would scan and replace them) and shown whole.
    let limits = [
        Limits { max_line_chars: 300, max_output_chars: 400, ..Limits::default() },
        Limits { max_line_chars: 300, ..Limits::default() },
    ];
    let persisted = || {
        let options = StoreOptions { index_bytes: 0, persist_index: true, ..StoreOptions::default() };
        RepoStore::open_with(fx.path("persisted"), options).expect("store")
    };
    // The first process greps the last commit (it has every special file); dropping its store
    // writes the memo.
    {
        let first = persisted();
        let tree = &trees(&first, &src, &ids[ids.len() - 1..])[0];
        for &(pattern, case_sensitive) in PATTERNS {
            grep(tree, &limits[0], pattern, case_sensitive, None);
        }
    }
    let files: Vec<_> = std::fs::read_dir(fx.path("persisted/.index")).expect("index dir").collect();
    assert_eq!(files.len(), 1, "one memo file, and no index file (the index is off): {files:?}");
    // The next process replays the last commit from the file, then the others, which share
    // some of its blobs and fill in the rest.
    let second = persisted();
    let memo = trees(&second, &src, &ids);
    let repo = second.repo(src.to_str().expect("utf-8")).expect("open");
    for (i, (s, m)) in scan.iter().zip(&memo).rev().enumerate() {
        for &(pattern, case_sensitive) in PATTERNS {
            for limits in &limits {
                let expected = grep(s, limits, pattern, case_sensitive, None);
                let got = grep(m, limits, pattern, case_sensitive, None);
                assert_eq!(got, expected, "{pattern:?} at {} with {limits:?}", s.commit());
            }
        }
        if i == 0 {
            let stats = repo.index_stats();
            assert!(stats.memo_loaded > 0 && stats.memo_files > 0, "the file was read and served: {stats:?}");
        }
    }
}
