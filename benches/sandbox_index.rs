//! The sandbox's content index beside `git grep -n`, in one run.
//!
//! On a generated repository of sympy's size (1,500 Python-like files, ~22 MB, 8 commits that
//! each rewrite 20 files, so neighbouring commits share most blobs; cached under
//! `target/rewardlab-bench/`):
//!
//! - `sandbox_index_vs_git_grep`: per pattern of a fixed mix of selective and common ones
//!   (literals, an alternation, a case-insensitive word, classes, `\b`, escapes, and one
//!   pattern without a usable literal that falls back to the scan), one grep call in steady
//!   state (index built, blob cache warm, result cache and grep memo not involved: `RunTool::run`
//!   on the tree, the memo off, since it would replay every blob of a commit grepped before) on an indexed view, on a scanning view (index off), and `git grep -n` on a checked
//!   out worktree of the same commit (a subprocess, as a policy's tool would be). The median per
//!   call of each over the mix and the ratios are printed after the group.
//! - `sandbox_index_build`: the index build of one commit on a fresh store (cold: the first
//!   commit; warm: the next commit once its parent is indexed) beside `git worktree add` (+
//!   remove) of a commit, and the same commit's index loaded from the file an earlier process
//!   persisted under the store.
//!
//! - `sandbox_tree_open`: opening views of consecutive commits (oldest first) on a fresh store,
//!   where each view decodes only the tree objects the repository's tree cache lacks, and the
//!   same commits opened again (every tree decoded), beside the walk views did before session
//!   36: gix's breadth-first traversal of each commit's whole tree. Per commit.
//!
//! With `REWARDLAB_MIRRORS=<dir of bare mirrors>` the grep group also runs on a real repository
//! (`REWARDLAB_BENCH_REPO`, default `sympy__sympy`, at `REWARDLAB_BENCH_REV`, default `HEAD`),
//! shared-cloned (no copy of its objects) under `target/rewardlab-bench/real/`, with a mix of
//! sympy-flavoured patterns, and the tree group on its 50 first-parent commits up to that one.
//!
//! Target (issue 15): the indexed grep's median per call over the mix ≥ 10× `git grep -n`'s.
//!
//! ```text
//! cargo bench -j 1 --bench sandbox_index
//! REWARDLAB_MIRRORS=/work/mirrors REWARDLAB_BENCH_REV=8dcb12a6cf50 cargo bench -j 1 --bench sandbox_index
//! ```

use std::{
    hint::black_box,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rewardlab_sandbox::{GrepArgs, Limits, Repo, RepoStore, RunTool, StoreOptions, ToolCall, TreeKind};

/// Bump to regenerate the cached repository.
const VERSION: &str = "sandbox-index-v3";
const FILES: usize = 1500;
const COMMITS: usize = 8;
const TOUCHED_PER_COMMIT: usize = 20;

/// The generated repository's mix: (name, pattern, case-sensitive).
const GENERATED_MIX: &[(&str, &str, bool)] = &[
    ("selective literal", "lambdify_kernel", true),
    ("selective regex", r"def handler_12[0-9]\(", true),
    ("case-insensitive word", "retry_policy", false),
    ("alternation", "TODO|FIXME", true),
    ("word boundary", r"\bNotImplementedError\b", true),
    ("escaped literal", r"self\.args\[0\]", true),
    ("class", r"def _eval_[a-z]+\(", true),
    ("common literal", "raise ValueError", true),
    ("very common literal", "import", true),
    ("no usable literal (scan)", r"\w+_\d{4}\b", true),
];

/// The real repository's mix (sympy's vocabulary; the script `scripts/sandbox-greps.sh` uses
/// the same patterns).
const REAL_MIX: &[(&str, &str, bool)] = &[
    ("def simplify", "def simplify", true),
    ("class Matrix", "class Matrix", true),
    ("import", "import", true),
    ("raise ValueError", "raise ValueError", true),
    ("TODO|FIXME", "TODO|FIXME", true),
    ("_eval_ class", r"def _eval_[a-z]+\(", true),
    ("NotImplementedError", "NotImplementedError", true),
    ("self.args[0]", r"self\.args\[0\]", true),
    ("lambdify", "lambdify", true),
    ("return S.Zero", r"return S\.Zero", true),
    ("\\bMatrix\\b, any case", r"\bmatrix\b", false),
];

#[path = "common/repo.rs"]
mod repo;
use repo::{Fixture, Generated, Rng, generated_fixture, git};

const STEMS: &[&str] = &[
    "expr",
    "symbol",
    "matrix",
    "poly",
    "series",
    "limit",
    "integral",
    "deriv",
    "subs",
    "coeff",
    "term",
    "factor",
    "root",
    "solve",
    "domain",
    "ring",
    "field",
    "order",
    "power",
    "atom",
    "basic",
    "number",
    "rational",
    "float",
    "complex",
    "real",
    "sign",
    "abs",
    "log",
    "exp",
    "trig",
    "sqrt",
    "gamma",
    "zeta",
    "sum",
    "product",
    "piece",
    "relational",
    "boolean",
    "set",
    "interval",
    "union",
    "printer",
    "latex",
    "pretty",
    "code",
    "cache",
    "assume",
];
const SUFFIXES: &[&str] =
    &["", "_args", "_hint", "_kind", "_value", "_list", "_dict", "_map", "_rule", "_table", "_count", "_base", "_flag"];
const MODULES: &[&str] = &[
    "sympy.core",
    "sympy.core.compatibility",
    "sympy.matrices",
    "sympy.polys",
    "sympy.utilities",
    "sympy.functions",
    "sympy.simplify",
    "sympy.solvers",
    "sympy.printing",
    "sympy.sets",
    "sympy.logic",
    "sympy.series",
];
const EXCEPTIONS: &[&str] = &["ValueError", "TypeError", "NotImplementedError", "IndexError", "KeyError"];

fn ident(rng: &mut Rng) -> String {
    format!("{}{}", rng.pick(STEMS), rng.pick(SUFFIXES))
}

fn camel(rng: &mut Rng) -> String {
    let stem = rng.pick(STEMS);
    format!("{}{}{}", stem[..1].to_uppercase(), &stem[1..], ["", "Base", "Expr", "Kind", "Matrix"][rng.below(5)])
}

/// A Python-like module of about `target` bytes: imports, classes with methods, functions,
/// docstrings, comments, raises. File `file` at commit `commit` holds a unique `handler_<file>`
/// function; a few files hold rare words (`lambdify_kernel`, `RETRY_POLICY`). As in a real code
/// base, constructs cluster by file: each kind of statement below appears in a share of the
/// files (about sympy's share of files with `raise ValueError`, `TODO`, `self.args[0]`,
/// `_eval_` methods), and there, often.
fn module(rng: &mut Rng, file: usize, commit: usize) -> String {
    let target = 2_000 + rng.below(26_000);
    // Which statement kinds this file uses: raises, TODO comments, `self.args[0]`,
    // `return S.Zero`, `_eval_` methods.
    let uses = [rng.below(100) < 20, rng.below(100) < 13, rng.below(100) < 8, rng.below(100) < 5, rng.below(100) < 7];
    let mut s = format!("\"\"\"Module {file}: {} helpers (revision {commit}).\"\"\"\n\n", rng.pick(STEMS));
    for _ in 0..1 + rng.below(6) {
        s.push_str(&format!("from {} import {}, {}\n", rng.pick(MODULES), camel(rng), ident(rng)));
    }
    s.push_str(&format!("import {}\n\n", rng.pick(MODULES)));
    if file.is_multiple_of(97) {
        s.push_str("RETRY_POLICY = None\n");
    }
    if file.is_multiple_of(113) {
        s.push_str("def lambdify_kernel(expr, modules=None):\n    return expr\n");
    }
    s.push_str(&format!("\ndef handler_{file}(request):\n    return request\n\n"));
    while s.len() < target {
        let class = camel(rng);
        s.push_str(&format!(
            "class {class}({}):\n    \"\"\"The {} of a {}.\"\"\"\n\n",
            camel(rng),
            ident(rng),
            ident(rng)
        ));
        for _ in 0..2 + rng.below(6) {
            let method = if uses[4] && rng.below(4) == 0 { format!("_eval_{}", rng.pick(STEMS)) } else { ident(rng) };
            s.push_str(&format!("    def {method}(self, {}, {}=None):\n", ident(rng), ident(rng)));
            for _ in 0..2 + rng.below(8) {
                match rng.below(12) {
                    0 if uses[0] => {
                        s.push_str(&format!("        raise {}(\"bad {}\")\n", rng.pick(EXCEPTIONS), ident(rng)))
                    }
                    1 if uses[1] => s.push_str(&format!("        # TODO: handle {} here\n", ident(rng))),
                    2 if uses[2] => s.push_str("        arg = self.args[0]\n"),
                    3 if uses[3] => {
                        s.push_str(&format!("        if {} is None:\n            return S.Zero\n", ident(rng)))
                    }
                    4 => s.push_str(&format!("        for {} in {}:\n", ident(rng), ident(rng))),
                    _ => s.push_str(&format!(
                        "        {} = {}({}, {}_{})\n",
                        ident(rng),
                        ident(rng),
                        ident(rng),
                        ident(rng),
                        rng.below(10_000)
                    )),
                }
            }
            s.push('\n');
        }
    }
    s
}

fn path_of(i: usize) -> String {
    format!("pkg/{}/sub{}/{}_{i:04}.py", STEMS[i % STEMS.len()], (i / STEMS.len()) % 4, STEMS[(i * 7) % STEMS.len()])
}

/// Generates (once) the repository under `target/rewardlab-bench/<VERSION>`: `FILES` files in
/// the first commit, then commits that each rewrite `TOUCHED_PER_COMMIT` of them, and a
/// checkout of the last commit for `git grep`.
fn generated() -> Fixture {
    generated_fixture(&Generated {
        version: VERSION,
        name: "bench__index",
        seed: 0x1dec_5eed_0000_0015,
        commits: COMMITS,
        files: FILES,
        touched_per_commit: TOUCHED_PER_COMMIT,
        body: &|rng, i, c| module(rng, i, c),
        path: &path_of,
        readme: false,
    })
}

/// A real mirror from `REWARDLAB_MIRRORS`, shared-cloned (objects through alternates) into a
/// store and a checkout under `target/`; `None` when the variable is unset or the mirror absent.
fn real() -> Option<(String, Fixture)> {
    let mirrors = std::env::var_os("REWARDLAB_MIRRORS")?;
    let name = std::env::var("REWARDLAB_BENCH_REPO").unwrap_or_else(|_| "sympy__sympy".to_owned());
    let rev = std::env::var("REWARDLAB_BENCH_REV").unwrap_or_else(|_| "HEAD".to_owned());
    let mirror = Path::new(&mirrors).join(format!("{name}.git"));
    if !mirror.is_dir() {
        println!("sandbox_index bench: no mirror at {}; the real-repository group is skipped", mirror.display());
        return None;
    }
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/rewardlab-bench/real").join(&name);
    let store_dir = base.join("store");
    let bare = store_dir.join(format!("{name}.git"));
    let checkout = base.join("checkout");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&store_dir).expect("mkdir");
    let mirror = mirror.to_str().expect("utf-8 mirror path");
    git(&store_dir, &["clone", "-q", "--bare", "--shared", mirror, bare.to_str().expect("utf-8")]);
    git(&base, &["clone", "-q", "--shared", "--no-checkout", mirror, checkout.to_str().expect("utf-8")]);
    let commit = git(&bare, &["rev-parse", &format!("{rev}^{{commit}}")]).trim().to_owned();
    git(&checkout, &["checkout", "-q", "--detach", &commit]);
    Some((name, Fixture { store_dir, bare, checkout, scratch: base.join("scratch"), commits: vec![commit] }))
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The median of `runs` timed calls of `f`.
fn time(runs: usize, f: &mut dyn FnMut()) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The grep group on `fx`'s last commit: indexed view, scanning view, `git grep -n`.
fn greps(c: &mut Criterion, label: &str, fx: &Fixture, repo_spec: &str, mix: &[(&str, &str, bool)]) {
    let limits = Limits::default();
    // Not persisted, so the build below is a build on every run of the bench.
    let indexed_store = RepoStore::open_with(
        &fx.store_dir,
        StoreOptions { persist_index: false, grep_memo_bytes: 0, ..StoreOptions::default() },
    )
    .expect("store");
    let scan_dir = fx.scratch.join("scan-store");
    let _ = std::fs::remove_dir_all(&scan_dir);
    std::fs::create_dir_all(&scan_dir).expect("mkdir");
    let mirror_name = fx.bare.file_name().expect("name").to_owned();
    std::os::unix::fs::symlink(&fx.bare, scan_dir.join(&mirror_name)).expect("symlink the mirror");
    let scan_store =
        RepoStore::open_with(&scan_dir, StoreOptions { index_bytes: 0, grep_memo_bytes: 0, ..StoreOptions::default() })
            .expect("store");
    let indexed_repo = indexed_store.repo(repo_spec).expect("adopt");
    let scan_repo = scan_store.repo(repo_spec).expect("adopt");
    let head = fx.commits.last().expect("a commit");
    let head_id = indexed_repo.resolve(head).expect("commit");
    let started = Instant::now();
    indexed_repo.build_index(&[head_id], None).expect("index");
    let built = started.elapsed();
    let stats = indexed_repo.index_stats();
    println!(
        "sandbox_index [{label}]: index of one commit built in {:.0} ms: {} blobs, {:.1} MB counted",
        ms(built),
        stats.blobs,
        stats.bytes as f64 / 1e6
    );
    let indexed = indexed_repo.tree(head, TreeKind::View).expect("view");
    let scanned = scan_repo.tree(head, TreeKind::View).expect("view");
    let calls: Vec<ToolCall> = mix
        .iter()
        .map(|(_, pattern, case_sensitive)| {
            ToolCall::Grep(GrepArgs {
                pattern: (*pattern).to_owned(),
                path: None,
                case_sensitive: (!case_sensitive).then_some(false),
            })
        })
        .collect();
    let git_grep = |pattern: &str, case_sensitive: bool| {
        let mut command = Command::new("git");
        command.current_dir(&fx.checkout).args(["grep", "-n", "-I", "-P"]);
        if !case_sensitive {
            command.arg("-i");
        }
        command.args(["-e", pattern]).output().expect("git grep runs").stdout.len()
    };
    for ((_, pattern, _), call) in mix.iter().zip(&calls) {
        // The index changes what is read, never what is found.
        assert_eq!(
            call.run(&indexed, &limits),
            call.run(&scanned, &limits),
            "indexed and scanned agree on {pattern:?}"
        );
    }
    let mut group = c.benchmark_group(format!("sandbox_index_vs_git_grep/{label}"));
    group.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_millis(1500));
    for ((name, pattern, case_sensitive), call) in mix.iter().zip(&calls) {
        group.bench_function(BenchmarkId::new("indexed view", name), |b| {
            b.iter(|| black_box(call.run(&indexed, &limits)))
        });
        group.bench_function(BenchmarkId::new("scanning view", name), |b| {
            b.iter(|| black_box(call.run(&scanned, &limits)))
        });
        group.bench_function(BenchmarkId::new("baseline: git grep -n, worktree", name), |b| {
            b.iter(|| black_box(git_grep(pattern, *case_sensitive)))
        });
    }
    group.finish();
    // Medians per call from one more pass, all three paths interleaved per pattern.
    let mut mix_times = [Vec::new(), Vec::new(), Vec::new()];
    for ((name, pattern, case_sensitive), call) in mix.iter().zip(&calls) {
        let result = call.run(&indexed, &limits);
        let times = [
            time(15, &mut || drop(black_box(call.run(&indexed, &limits)))),
            time(15, &mut || drop(black_box(call.run(&scanned, &limits)))),
            time(15, &mut || {
                black_box(git_grep(pattern, *case_sensitive));
            }),
        ];
        println!(
            "sandbox_index [{label}]: {name:<26} {pattern:<26} {:>3} shown {:<9}: indexed {:7.3} ms, scan {:7.3} ms, git grep -n {:7.3} ms: {:5.1}× git grep, {:4.1}× scan",
            result.entities.len(),
            format!("{:?}", result.status),
            ms(times[0]),
            ms(times[1]),
            ms(times[2]),
            times[2].as_secs_f64() / times[0].as_secs_f64(),
            times[1].as_secs_f64() / times[0].as_secs_f64(),
        );
        for (all, t) in mix_times.iter_mut().zip(times) {
            all.push(t);
        }
    }
    let [indexed_mix, scan_mix, git_mix] = mix_times.map(median);
    println!(
        "sandbox_index [{label}]: mix of {} patterns, median per call: indexed {:.3} ms, scan {:.3} ms, git grep -n {:.3} ms: {:.1}× git grep (target ≥ 10×), {:.1}× scan; {:?}",
        mix.len(),
        ms(indexed_mix),
        ms(scan_mix),
        ms(git_mix),
        git_mix.as_secs_f64() / indexed_mix.as_secs_f64(),
        scan_mix.as_secs_f64() / indexed_mix.as_secs_f64(),
        indexed_repo.index_stats(),
    );
}

/// A fresh store holding only a symlink to `fx`'s mirror (cold blob cache, empty index) and,
/// when given, a persisted index file.
fn fresh_store(fx: &Fixture, n: usize, index_file: Option<&[u8]>) -> (PathBuf, RepoStore) {
    let dir = fx.scratch.join(format!("build-store-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::os::unix::fs::symlink(&fx.bare, dir.join("bench__index.git")).expect("symlink");
    if let Some(bytes) = index_file {
        std::fs::create_dir_all(dir.join(".index")).expect("mkdir");
        std::fs::write(dir.join(".index/bench__index.trigrams"), bytes).expect("index file");
    }
    let options = StoreOptions { persist_index: index_file.is_some(), ..StoreOptions::default() };
    let store = RepoStore::open_with(&dir, options).expect("store");
    (dir, store)
}

/// Criterion's `iter_custom` over fresh stores: each of `iters` iterations opens a new store
/// (with `index_file` as its persisted index), hands the repository and the iteration number to
/// `work`, which returns the time it measured, then removes the store. Returns the sum.
fn on_fresh_stores(
    fx: &Fixture,
    n: &mut usize,
    index_file: Option<&[u8]>,
    iters: u64,
    mut work: impl FnMut(&Repo, u64) -> Duration,
) -> Duration {
    let mut total = Duration::ZERO;
    for i in 0..iters {
        *n += 1;
        let (dir, store) = fresh_store(fx, *n, index_file);
        let repo = store.repo("bench/index").expect("adopt");
        total += work(&repo, i);
        drop((repo, store));
        let _ = std::fs::remove_dir_all(dir);
    }
    total
}

fn builds(c: &mut Criterion, fx: &Fixture) {
    let ids = &fx.commits;
    let mut group = c.benchmark_group("sandbox_index_build");
    group.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(3));
    let mut n = 0;
    group.bench_function("index build, first commit (cold)", |b| {
        b.iter_custom(|iters| {
            on_fresh_stores(fx, &mut n, None, iters, |repo, _| {
                let id = repo.resolve(&ids[0]).expect("commit");
                let t = Instant::now();
                repo.build_index(&[id], None).expect("build");
                t.elapsed()
            })
        })
    });
    group.bench_function("index build, next commit (parent indexed)", |b| {
        b.iter_custom(|iters| {
            on_fresh_stores(fx, &mut n, None, iters, |repo, i| {
                let k = 1 + (i as usize % (ids.len() - 1));
                let parent = repo.resolve(&ids[k - 1]).expect("commit");
                let child = repo.resolve(&ids[k]).expect("commit");
                repo.build_index(&[parent], None).expect("build");
                let t = Instant::now();
                repo.build_index(&[child], None).expect("build");
                t.elapsed()
            })
        })
    });
    // The first commit's index as a second process finds it under the store.
    let persisted = {
        n += 1;
        let (dir, store) = fresh_store(fx, n, Some(b""));
        let repo = store.repo("bench/index").expect("adopt");
        repo.build_index(&[repo.resolve(&ids[0]).expect("commit")], None).expect("build");
        assert!(repo.save_index().expect("save"));
        let bytes = std::fs::read(dir.join(".index/bench__index.trigrams")).expect("saved");
        println!("sandbox_index: persisted index of one commit: {:.1} MB on disk", bytes.len() as f64 / 1e6);
        drop((repo, store));
        let _ = std::fs::remove_dir_all(dir);
        bytes
    };
    group.bench_function("index load, first commit (persisted by an earlier process)", |b| {
        b.iter_custom(|iters| {
            on_fresh_stores(fx, &mut n, Some(persisted.as_slice()), iters, |repo, _| {
                let id = repo.resolve(&ids[0]).expect("commit");
                let t = Instant::now();
                repo.build_index(&[id], None).expect("load");
                let elapsed = t.elapsed();
                assert_eq!(repo.index_stats().built, 0, "everything came from the file");
                elapsed
            })
        })
    });
    group.bench_function("baseline: git worktree add (+ remove), subprocess", |b| {
        b.iter(|| {
            n += 1;
            let dir = fx.scratch.join(format!("wt-{n}"));
            let dir = dir.to_str().expect("utf-8");
            git(&fx.bare, &["worktree", "add", "-q", "--detach", dir, &ids[n % ids.len()]]);
            git(&fx.bare, &["worktree", "remove", "--force", dir]);
        })
    });
    group.finish();
}

/// Views of `commits` (oldest first) on fresh stores, then opened again, beside gix's traversal.
fn tree_opens(c: &mut Criterion, label: &str, fx: &Fixture, commits: &[String]) {
    let mut group = c.benchmark_group(format!("sandbox_tree_open/{label}"));
    group.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(3));
    let per_commit = |total: Duration| total / commits.len() as u32;
    let mut n = 0;
    let open_all = |repo: &Repo| {
        for id in commits {
            black_box(repo.tree(id, TreeKind::View).expect("view").files().len());
        }
    };
    group.bench_function("view, consecutive commits, fresh store", |b| {
        b.iter_custom(|iters| {
            on_fresh_stores(fx, &mut n, None, iters, |repo, _| {
                let t = Instant::now();
                open_all(repo);
                per_commit(t.elapsed())
            })
        })
    });
    group.bench_function("view, the same commits opened again", |b| {
        b.iter_custom(|iters| {
            on_fresh_stores(fx, &mut n, None, iters, |repo, _| {
                open_all(repo);
                repo.release_recent();
                let t = Instant::now();
                open_all(repo);
                per_commit(t.elapsed())
            })
        })
    });
    let git_repo = gix::open(&fx.bare).expect("open the mirror");
    let ids: Vec<gix::ObjectId> = commits.iter().map(|id| id.parse().expect("commit id")).collect();
    group.bench_function("baseline: gix breadth-first traversal of each tree (views before session 36)", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                for id in &ids {
                    let tree = git_repo.find_commit(*id).and_then(|c| c.tree()).expect("tree");
                    black_box(tree.traverse().breadthfirst.files().expect("walk").len());
                }
            }
            per_commit(t.elapsed())
        })
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let fx = generated();
    let head = fx.commits.last().expect("a commit").clone();
    let files = git(&fx.bare, &["ls-tree", "-r", "--name-only", &head]).lines().count();
    let bytes: u64 = git(&fx.bare, &["ls-tree", "-r", "-l", &head])
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3).and_then(|n| n.parse::<u64>().ok()))
        .sum();
    println!(
        "sandbox_index: generated repository {files} files, {:.1} MB, {} commits",
        bytes as f64 / 1e6,
        fx.commits.len()
    );
    greps(c, "generated", &fx, "bench/index", GENERATED_MIX);
    builds(c, &fx);
    tree_opens(c, "generated", &fx, &fx.commits);
    if let Some((name, real)) = real() {
        let files = git(&real.bare, &["ls-tree", "-r", "--name-only", &real.commits[0]]).lines().count();
        println!("sandbox_index: real repository {name} at {} ({files} files)", &real.commits[0][..12]);
        greps(c, "real", &real, &name, REAL_MIX);
        let mut history: Vec<String> = git(&real.bare, &["rev-list", "--first-parent", "-n", "50", &real.commits[0]])
            .lines()
            .map(String::from)
            .collect();
        history.reverse();
        tree_opens(c, "real", &real, &history);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
