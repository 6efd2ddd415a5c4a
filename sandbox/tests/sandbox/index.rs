//! The content index against the scan it replaces: the scan is the oracle. Two stores on the
//! same source, one with the index off, must give identical results for every grep.

use std::{path::Path, sync::Arc};

use proptest::prelude::*;
use rewardlab_sandbox::{Limits, Repo, RepoStore, StoreOptions, ToolResult, Tree, TreeKind};
use serde_json::json;

use crate::sandbox::helpers::{
    Fixture, call, commit_all, fast_import_bare, fast_import_commit, generated_repo, symlink, write,
};

/// Literals the patterns draw on: words of the generated files, case variants, Unicode whose
/// case folding leaves ASCII (the Kelvin sign, long s), bytes of the binary and non-UTF-8 files.
const WORDS: &[&str] = &[
    "request",
    "Request",
    "RESPONSE",
    "session",
    "header",
    "Content-Length",
    "content",
    "TODO",
    "FIXME",
    "handle",
    "compute",
    "value_1",
    "def",
    "class",
    "import",
    "return",
    "str(x)",
    "ünïcode",
    "ÜNÏCODE",
    "données",
    "kelvin",
    "\u{212A}elvin",
    "ſtop",
    "stop",
    "binary",
    "latin",
    "empty",
    "no_such_thing",
    "é",
    "x",
    "Guide",
    "setup",
    "echo",
    "shared",
    "line",
];

/// Regex shapes around one or two literals (`{0}`, `{1}`; literals are escaped).
const SHAPES: &[&str] = &[
    "{0}",
    "{0}|{1}",
    r"\b{0}\b",
    "^{0}",
    "{0}$",
    "{0}.*{1}",
    "{0}[a-z]+",
    "[A-Z]{0}",
    "(?i){0}",
    "{0}s?",
    "({0}){{2}}",
    "{0}(_[0-9]+)?",
    r"{0}\w*\(",
    "(?:{0}|{1}) = ",
    "[^ ]{0}",
    "{0}{{1,3}}",
    "(?-u:{0})",
    "x*",
    "{0}?",
];

/// The source repository: several commits sharing blobs, a binary, an empty file, a non-UTF-8
/// file, Unicode case-folding text, symlinks (file and directory).
fn source(fx: &Fixture) -> (std::path::PathBuf, Vec<String>) {
    let src = fx.path("acme/indexed");
    let mut ids = generated_repo(&src, 11, 4);
    write(&src, "empty.txt", "");
    write(&src, "latin1.txt", b"caf\xe9 latin line\nstop \xff\xfe request\n".as_slice());
    write(&src, "fold.txt", "\u{212A}elvin and ſtop\nKELVIN STOP\nstraße\n");
    write(&src, "data/more.bin", b"shared\x00binary request\n".as_slice());
    write(&src, "two.txt", "ab\nabc\n");
    symlink(&src, "fold_link.txt", "fold.txt");
    ids.push(commit_all(&src, "odd files"));
    write(&src, "fold.txt", "kelvin only\n");
    ids.push(commit_all(&src, "change fold"));
    (src, ids)
}

struct Pair {
    _scan_store: RepoStore,
    _index_store: RepoStore,
    scan: Vec<Arc<Tree>>,
    indexed: Vec<Arc<Tree>>,
    index_repo: Arc<Repo>,
}

fn pair(fx: &Fixture, src: &Path, ids: &[String], index_bytes: usize) -> Pair {
    let scan_store = RepoStore::open_with(
        fx.path("scan"),
        StoreOptions { index_bytes: 0, grep_memo_bytes: 0, ..StoreOptions::default() },
    )
    .expect("store");
    let index_store = RepoStore::open_with(fx.path("indexed"), StoreOptions { index_bytes, ..StoreOptions::default() })
        .expect("store");
    let spec = src.to_str().expect("utf-8");
    let scan_repo = scan_store.repo(spec).expect("clone");
    let index_repo = index_store.repo(spec).expect("clone");
    let commits: Vec<_> = ids.iter().map(|id| index_repo.resolve(id).expect("commit")).collect();
    index_repo.build_index(&commits, None).expect("index builds");
    let scan = ids.iter().map(|id| scan_repo.tree(id, TreeKind::View).expect("view")).collect();
    let indexed = ids.iter().map(|id| index_repo.tree(id, TreeKind::View).expect("view")).collect();
    Pair { _scan_store: scan_store, _index_store: index_store, scan, indexed, index_repo }
}

fn grep(tree: &Tree, limits: &Limits, pattern: &str, path: Option<&str>, case_sensitive: bool) -> ToolResult {
    call(
        tree,
        limits,
        json!({"tool": "grep", "args": {"pattern": pattern, "path": path, "case_sensitive": case_sensitive}}),
    )
}

fn escape(literal: &str) -> String {
    literal.chars().map(|c| if "\\.+*?()|[]{}^$".contains(c) { format!("\\{c}") } else { c.to_string() }).collect()
}

fn compare(pair: &Pair, limits: &Limits, pattern: &str, path: Option<&str>, case_sensitive: bool) {
    for (scan, indexed) in pair.scan.iter().zip(&pair.indexed) {
        let expected = grep(scan, limits, pattern, path, case_sensitive);
        let got = grep(indexed, limits, pattern, path, case_sensitive);
        assert_eq!(
            got,
            expected,
            "grep {pattern:?} path {path:?} case_sensitive {case_sensitive} at {}",
            scan.commit()
        );
    }
}

#[test]
fn indexed_grep_is_identical_to_the_scan_on_fixed_cases() {
    let fx = Fixture::new();
    let (src, ids) = source(&fx);
    let pair = pair(&fx, &src, &ids, 256 << 20);
    let stats = pair.index_repo.index_stats();
    assert!(stats.blobs > 20 && stats.bytes > 0, "{stats:?}");
    let limits = Limits::default();
    let tight = Limits { max_output_chars: 300, max_grep_file_bytes: 40, ..Limits::default() };
    for pattern in [
        "request",
        "Content-Length",
        "kelvin",
        "ſtop",
        "STRASSE",
        "caf\u{e9}",
        "latin line",
        "(?-u:\\xff\\xfe)",
        "binary request",
        "TODO|FIXME",
        r"def [a-z_]+_[0-9]+\(",
        "no_such_text",
        "abc",
        "^abc$",
        "[",
        "a{2000000}",
    ] {
        for case_sensitive in [true, false] {
            for path in [None, Some("*.py"), Some("src"), Some("*.txt")] {
                compare(&pair, &limits, pattern, path, case_sensitive);
                compare(&pair, &tight, pattern, path, case_sensitive);
            }
        }
    }
    let after = pair.index_repo.index_stats();
    assert!(after.indexed_greps > 0 && after.files_skipped > 0, "the index did narrow greps: {after:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn indexed_grep_is_identical_to_the_scan_on_random_patterns(
        shape in 0..SHAPES.len(),
        a in 0..WORDS.len(),
        b in 0..WORDS.len(),
        cut in 0usize..4,
        case_sensitive in any::<bool>(),
        path in prop::sample::select(vec![None, Some("*.py"), Some("src/pkg1"), Some("docs"), Some("*.txt")]),
    ) {
        let pair = shared_pair();
        // Literals cut short at the front exercise trigrams that do not start at a word.
        let word = |i: usize| {
            let w = WORDS[i];
            let skip = w.char_indices().nth(cut.min(w.chars().count().saturating_sub(1))).map_or(0, |(b, _)| b);
            escape(&w[skip..])
        };
        let pattern = SHAPES[shape].replace("{0}", &word(a)).replace("{1}", &word(b)).replace("{{", "{").replace("}}", "}");
        let limits = Limits::default();
        compare(pair, &limits, &pattern, path, case_sensitive);
    }
}

/// One pair of stores for all property cases (building them is the slow part). The temporary
/// directory lives as long as the test binary.
fn shared_pair() -> &'static Pair {
    static PAIR: std::sync::OnceLock<(Pair, Fixture)> = std::sync::OnceLock::new();
    &PAIR
        .get_or_init(|| {
            let fx = Fixture::new();
            let (src, ids) = source(&fx);
            (pair(&fx, &src, &ids, 256 << 20), fx)
        })
        .0
}

#[test]
fn memory_stays_within_the_bound_over_thousands_of_commits() {
    let fx = Fixture::new();
    let bare = fx.path("acme/many.git");
    let mut stream = Vec::new();
    let commits = 2000;
    for c in 1..=commits {
        // Each commit rewrites two of 40 files, so every commit reaches new blobs.
        let mut files = Vec::new();
        if c == 1 {
            for f in 0..40 {
                files.push((format!("f{f:02}.txt"), format!("file {f} start\n").into_bytes()));
            }
        }
        for f in [c % 40, (c * 7) % 40] {
            files.push((format!("f{f:02}.txt"), format!("file {f} commit {c} marker{c}x\nshared line\n").into_bytes()));
        }
        fast_import_commit(&mut stream, c, (c > 1).then_some(c - 1), &files);
    }
    fast_import_bare(&bare, &stream);
    let bound = 64 << 10;
    let options = StoreOptions { index_bytes: bound, keep_recent_trees: 0, ..StoreOptions::default() };
    let store = RepoStore::open_with(fx.path("store"), options).expect("store");
    let scan_store = RepoStore::open_with(
        fx.path("scan"),
        StoreOptions { index_bytes: 0, grep_memo_bytes: 0, ..StoreOptions::default() },
    )
    .expect("store");
    let repo = store.repo(bare.to_str().expect("utf-8")).expect("adopt");
    let scan_repo = scan_store.repo(bare.to_str().expect("utf-8")).expect("adopt");
    let revs: Vec<String> = (0..commits).map(|back| format!("main~{back}")).collect();
    let ids: Vec<_> = revs.iter().map(|r| repo.resolve(r).expect("commit")).collect();
    for chunk in ids.chunks(100) {
        repo.build_index(chunk, None).expect("build");
        let stats = repo.index_stats();
        assert!(stats.bytes <= bound, "{stats:?}");
    }
    let stats = repo.index_stats();
    assert!(stats.built > 2000 && stats.evicted > 0, "thousands of blobs went through a small bound: {stats:?}");
    let limits = Limits::default();
    for rev in ["main", "main~1", "main~999", "main~1999"] {
        let indexed = repo.tree(rev, TreeKind::View).expect("view");
        let scanned = scan_repo.tree(rev, TreeKind::View).expect("view");
        for pattern in ["marker1x", "marker1999x", "shared line", "commit 2000 ", "file 3 start"] {
            assert_eq!(grep(&indexed, &limits, pattern, None, true), grep(&scanned, &limits, pattern, None, true));
        }
    }
    assert!(repo.index_stats().bytes <= bound);
}

#[test]
fn a_grep_before_the_index_is_built_scans_and_agrees() {
    let fx = Fixture::new();
    let (src, ids) = source(&fx);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let scan_store = RepoStore::open_with(
        fx.path("scan"),
        StoreOptions { index_bytes: 0, grep_memo_bytes: 0, ..StoreOptions::default() },
    )
    .expect("store");
    let spec = src.to_str().expect("utf-8");
    let (repo, scan_repo) = (store.repo(spec).expect("clone"), scan_store.repo(spec).expect("clone"));
    let limits = Limits::default();
    // The first grep starts the background build and does not wait for it: whatever part of the
    // index exists when each call runs, the results are the scan's.
    let tree = repo.tree(&ids[0], TreeKind::View).expect("view");
    let scanned = scan_repo.tree(&ids[0], TreeKind::View).expect("view");
    for _ in 0..20 {
        for pattern in ["request", "TODO", "no_such_thing"] {
            assert_eq!(grep(&tree, &limits, pattern, None, true), grep(&scanned, &limits, pattern, None, true));
        }
    }
    // A worktree never uses the index (checkout filters could make its files differ).
    let worktree = repo.tree(&ids[0], TreeKind::Worktree).expect("worktree");
    let before = repo.index_stats().indexed_greps;
    assert_eq!(grep(&worktree, &limits, "request", None, true), grep(&scanned, &limits, "request", None, true));
    assert_eq!(repo.index_stats().indexed_greps, before);
}

/// 64-bit FNV-1a, the persisted file's checksum, to forge a valid file of another version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[test]
fn the_index_persists_across_processes_and_bad_files_are_ignored_and_rebuilt() {
    let fx = Fixture::new();
    let (src, ids) = source(&fx);
    let spec = src.to_str().expect("utf-8");
    let store_dir = fx.path("store");
    let scan_store = RepoStore::open_with(
        fx.path("scan"),
        StoreOptions { index_bytes: 0, grep_memo_bytes: 0, ..StoreOptions::default() },
    )
    .expect("store");
    let scan_repo = scan_store.repo(spec).expect("clone");
    let limits = Limits::default();
    let patterns = ["request", "TODO|FIXME", r"\bdef\b", "(?i)kelvin", "no_such_thing", "binary"];
    // Each store below stands for a new process: a fresh `RepoStore` on the same directory.
    let open = || {
        let options = StoreOptions { persist_index: true, ..StoreOptions::default() };
        let store = RepoStore::open_with(&store_dir, options).expect("store");
        let repo = store.repo(spec).expect("clone or adopt");
        let commits: Vec<_> = ids.iter().map(|id| repo.resolve(id).expect("commit")).collect();
        repo.build_index(&commits, None).expect("build");
        for id in &ids {
            let (indexed, scanned) =
                (repo.tree(id, TreeKind::View).expect("view"), scan_repo.tree(id, TreeKind::View).expect("view"));
            for pattern in patterns {
                assert_eq!(grep(&indexed, &limits, pattern, None, true), grep(&scanned, &limits, pattern, None, true));
            }
        }
        (store, repo)
    };
    let (store, repo) = open();
    let first = repo.index_stats();
    assert!(first.built > 0 && first.loaded == 0, "{first:?}");
    assert_eq!(store.save_indexes().expect("saved"), 1, "the store writes its one repository's built index");
    assert!(!repo.save_index().expect("no error"), "an unchanged index is not written again");
    assert_eq!(store.save_indexes().expect("no error"), 0, "nor by the store");
    let file = store_dir.join(".index").join(format!("{}.trigrams", repo.name()));
    drop((repo, store));
    let good = std::fs::read(&file).expect("the file is there");
    assert!(good.starts_with(b"RLTRIGX\0"), "a versioned file");

    // A second process reads it and builds nothing.
    let (store, repo) = open();
    let stats = repo.index_stats();
    assert_eq!((stats.loaded, stats.built), (first.blobs, 0), "{stats:?}");
    assert!(!repo.save_index().expect("no error"), "nothing new to write");
    drop((repo, store));

    // `load_index` reads the file in the caller's thread before any grep or build, so the very
    // first grep of a commit is narrowed by it and starts no build (its blobs all have entries).
    {
        let store = RepoStore::open_with(&store_dir, StoreOptions { persist_index: true, ..StoreOptions::default() })
            .expect("store");
        let repo = store.repo(spec).expect("adopt");
        assert_eq!(repo.index_stats().loaded, 0, "nothing is read on opening");
        assert_eq!(repo.load_index(), first.blobs);
        assert_eq!(repo.load_index(), first.blobs, "read once");
        let tree = repo.tree(&ids[0], TreeKind::View).expect("view");
        let scanned = scan_repo.tree(&ids[0], TreeKind::View).expect("view");
        assert_eq!(
            grep(&tree, &limits, "no_such_thing", None, true),
            grep(&scanned, &limits, "no_such_thing", None, true)
        );
        let stats = repo.index_stats();
        assert!(stats.files_skipped > 0, "the first grep used the loaded index: {stats:?}");
        assert_eq!((stats.loaded, stats.built), (first.blobs, 0), "{stats:?}");
    }

    // Bad files are ignored: the index is rebuilt, greps still agree, and a good file replaces it.
    let mut old_version = good.clone();
    old_version[8..12].copy_from_slice(&0u32.to_le_bytes());
    let body = old_version.len() - 8;
    let sum = fnv1a(&old_version[..body]);
    old_version[body..].copy_from_slice(&sum.to_le_bytes());
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x40;
    let bad: [(&str, Vec<u8>); 5] = [
        ("truncated", good[..good.len() - 13].to_vec()),
        ("a flipped byte", flipped),
        ("another version", old_version),
        ("empty", Vec::new()),
        ("not an index", b"hello world, this is not an index at all".to_vec()),
    ];
    for (what, bytes) in bad {
        std::fs::write(&file, &bytes).expect("write");
        let (store, repo) = open();
        let stats = repo.index_stats();
        assert_eq!((stats.loaded, stats.built), (0, first.blobs as u64), "{what}: {stats:?}");
        assert!(repo.save_index().expect("saved"), "{what}: rebuilt and written over");
        drop((repo, store));
        let (store, repo) = open();
        let stats = repo.index_stats();
        assert_eq!((stats.loaded, stats.built), (first.blobs, 0), "{what}: the rewritten file is read back: {stats:?}");
        drop((repo, store));
    }
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().expect("dir"))
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n != file.file_name().expect("name") && !n.to_string_lossy().ends_with(".grepmemo"))
        .collect();
    assert!(leftovers.is_empty(), "writes are atomic renames, no temporary files left: {leftovers:?}");

    // Dropping the repository saves too (a store that never calls `save_index`).
    std::fs::remove_file(&file).expect("remove");
    let (store, repo) = open();
    drop((repo, store));
    // A background build started by a grep may hold the repository a moment longer.
    let started = std::time::Instant::now();
    while !file.exists() && started.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(file.exists(), "saved on drop");
    let (_store, repo) = open();
    assert_eq!(repo.index_stats().loaded, first.blobs);
}
