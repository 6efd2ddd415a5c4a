//! Sandbox performance, each beside its baseline in the same group, on a generated repository
//! of 2,000 Python files and 50 commits (cached under `target/rewardlab-bench/`):
//!
//! - tree set-up per commit: the zero-disk view and gix's linked worktree (add + remove) vs
//!   `git worktree add` (+ `git worktree remove`) as subprocesses;
//! - grep over the whole tree: the sandbox on a view (warm blob cache) and on a worktree vs
//!   `grep -rn -E --include='*.py'` as a subprocess (seed 000's choice) and `rg` when installed;
//! - glob over the whole tree: the sandbox's glob tool (a literal prefilter before globset's
//!   matcher, compiled on demand) vs globset's `GlobMatcher` compiled and tried on every path,
//!   as the tool ran before;
//! - 64 concurrent mixed calls (grep/glob/read over 8 commits) through `Sandbox::run_call`
//!   under the global semaphore, result cache off: batch time here, per-call p50/p99 and
//!   throughput printed.
//! - a GRPO group of 8 rollouts (`sandbox_result_cache`): the same 15 calls (greps of an
//!   issue's terms, globs, reads) made by 8 rollouts in their own orders, 3 turns of 5 calls,
//!   each turn's 40 calls at once through `Sandbox::run_call` as the engine runs them; with the
//!   result cache off, on and fresh for each group (training), and on and kept (evaluation
//!   repeating the same episodes). Hit rates printed.
//!
//! The content index beside `git grep -n` is `benches/sandbox_index.rs`.
//!
//! Targets: zero-disk set-up < 5 ms per commit; grep ≥ 2× faster than the `grep -rn` subprocess.

use std::{
    hint::black_box,
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rewardlab_sandbox::{
    GlobArgs, GrepArgs, Limits, ObjectId, ReadArgs, RepoStore, RunTool, Sandbox, Status, StoreOptions, ToolCall, Tree,
    TreeKind,
};

/// Bump to regenerate the cached repository.
const VERSION: &str = "sandbox-v1";
const FILES: usize = 2000;
const COMMITS: usize = 50;
const GREPS: &[(&str, &str)] = &[("literal", "Content-Length"), ("regex", r"def [a-z]+_[0-9]+\(self, x\)")];
/// The proxy's kinds of glob: a file name, a word of the issue, a dotted module's path.
const GLOBS: &[(&str, &str)] =
    &[("name", "**/mod123.py"), ("word", "**/*od12*"), ("module", "**/pkg07/sub1/mod047.py"), ("none", "**/*cache*")];

#[path = "common/repo.rs"]
mod repo;
use repo::{Fixture, Generated, Rng, generated_fixture, git};

const WORDS: &[&str] = &[
    "request", "response", "session", "adapter", "header", "cookie", "timeout", "retry", "proxy", "stream", "auth",
    "cache",
];

fn python(rng: &mut Rng, salt: usize) -> String {
    let mut s = format!("import {}\n\n", WORDS[rng.below(WORDS.len())]);
    for i in 0..60 {
        let w = WORDS[rng.below(WORDS.len())];
        match rng.below(10) {
            0 => s.push_str(&format!("class {}{}{i}:\n", w[..1].to_uppercase(), &w[1..])),
            1 => s.push_str(&format!("def {w}_{i}(self, x):\n")),
            2 => s.push_str(&format!("    # TODO: {w} {salt}\n")),
            3 => s.push_str("    headers['Content-Length'] = str(len(body))\n"),
            _ => s.push_str(&format!("    value_{i} = compute({w:?}, {}, {salt})\n", rng.below(1000))),
        }
    }
    s
}

fn path_of(i: usize) -> String {
    format!("src/pkg{:02}/sub{}/mod{:03}.py", i % 40, (i / 40) % 5, i)
}

/// Generates (once) a bare repository with `git fast-import` and a checkout for the baselines.
fn fixture() -> Fixture {
    let fx = generated_fixture(&Generated {
        version: VERSION,
        name: "bench__repo",
        seed: 0x5eed_1234_5678_9abc,
        commits: COMMITS,
        files: FILES,
        touched_per_commit: 25,
        body: &|rng, _, c| python(rng, c),
        path: &path_of,
        readme: true,
    });
    assert_eq!(fx.commits.len(), COMMITS);
    fx
}

fn has_rg() -> bool {
    Command::new("rg").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn bench(c: &mut Criterion) {
    let fx = fixture();
    let options = StoreOptions { keep_recent_trees: 0, ..StoreOptions::default() };
    let store = Arc::new(RepoStore::open_with(&fx.store_dir, options).expect("store"));
    let repo = store.repo("bench/repo").expect("adopted");
    let ids: Vec<ObjectId> = fx.commits.iter().map(|c| repo.resolve(c).expect("commit")).collect();
    let files = git(&fx.bare, &["ls-tree", "-r", "--name-only", "main"]).lines().count();
    println!("sandbox bench: {files} files, {} commits, store {}", ids.len(), fx.store_dir.display());

    // Tree set-up per commit, cycling through all 50 commits.
    let mut group = c.benchmark_group("sandbox_tree_setup");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    let mut next = 0usize;
    group.bench_function("view (zero disk)", |b| {
        b.iter(|| {
            next += 1;
            drop(black_box(repo.tree_at(ids[next % ids.len()], TreeKind::View).expect("view")))
        })
    });
    group.bench_function("gix worktree (add + remove)", |b| {
        b.iter(|| {
            next += 1;
            drop(black_box(repo.tree_at(ids[next % ids.len()], TreeKind::Worktree).expect("worktree")))
        })
    });
    group.bench_function("baseline: git worktree add (+ remove), subprocess", |b| {
        b.iter(|| {
            next += 1;
            let dir = fx.scratch.join(format!("wt-{next}"));
            let dir = dir.to_str().expect("utf-8");
            git(&fx.bare, &["worktree", "add", "-q", "--detach", dir, &fx.commits[next % fx.commits.len()]]);
            git(&fx.bare, &["worktree", "remove", "--force", dir]);
        })
    });
    group.finish();

    // Grep over the whole tree at the last commit.
    let limits = Limits::default();
    let head = *ids.last().expect("commits");
    let view = repo.tree_at(head, TreeKind::View).expect("view");
    let worktree = repo.tree_at(head, TreeKind::Worktree).expect("worktree");
    let rg = has_rg();
    if !rg {
        println!("sandbox bench: `rg` is not installed; the ripgrep baseline is skipped");
    }
    for (name, pattern) in GREPS {
        let call = ToolCall::Grep(GrepArgs {
            pattern: (*pattern).to_owned(),
            path: Some("*.py".to_owned()),
            case_sensitive: None,
        });
        let first = call.run(&view, &limits);
        println!(
            "sandbox bench: grep {name} {pattern:?}: {} matches shown, status {:?}",
            first.entities.len(),
            first.status
        );
        let mut group = c.benchmark_group(format!("sandbox_grep_{name}"));
        group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        group.throughput(Throughput::Elements(files as u64));
        group
            .bench_function("sandbox grep, view (warm blob cache)", |b| b.iter(|| black_box(call.run(&view, &limits))));
        group.bench_function("sandbox grep, worktree", |b| b.iter(|| black_box(call.run(&worktree, &limits))));
        let checkout = &fx.checkout;
        let subprocess = |program: &'static str, args: [&'static str; 3]| {
            move |b: &mut criterion::Bencher<'_>| {
                b.iter(|| {
                    let out = Command::new(program)
                        .args(args)
                        .args([pattern, "."])
                        .current_dir(checkout)
                        .output()
                        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
                    black_box(out.stdout.len())
                })
            }
        };
        group.bench_function(
            "baseline: grep -rn -E --include='*.py', subprocess",
            subprocess("grep", ["-rn", "-E", "--include=*.py"]),
        );
        if rg {
            group.bench_function("baseline: rg -n --type py, subprocess", subprocess("rg", ["-n", "--type", "py"]));
        }
        group.finish();
    }

    // Glob over the whole tree at the last commit, beside globset's matcher on every path.
    let paths: Vec<String> = view.files().iter().map(|f| f.path.clone()).collect();
    for (name, pattern) in GLOBS {
        let call = ToolCall::Glob(GlobArgs { pattern: (*pattern).to_owned() });
        let compile = || {
            globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .expect("glob")
                .compile_matcher()
        };
        let matcher = compile();
        let listed: Vec<&String> = paths.iter().filter(|p| matcher.is_match(p.as_str())).collect();
        assert_eq!(
            call.run(&view, &limits).entities.len(),
            listed.len(),
            "{pattern}: the tool lists what globset does"
        );
        println!("sandbox bench: glob {name} {pattern:?}: {} of {} paths", listed.len(), paths.len());
        let mut group = c.benchmark_group(format!("sandbox_glob_{name}"));
        group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
        group.throughput(Throughput::Elements(paths.len() as u64));
        group.bench_function("sandbox glob, view", |b| b.iter(|| black_box(call.run(&view, &limits))));
        group.bench_function("baseline: globset GlobMatcher compiled, on every path", |b| {
            b.iter(|| {
                let matcher = compile();
                black_box(paths.iter().filter(|p| matcher.is_match(p.as_str())).cloned().collect::<Vec<String>>())
            })
        });
        group.finish();
    }

    // 64 concurrent mixed calls over 8 commits, through the async API and the semaphore. The
    // batch repeats the same calls, so the result cache is off: this measures running them.
    let sandbox = Sandbox::new(store.clone(), Limits { result_cache_bytes: 0, ..limits.clone() });
    let trees: Vec<_> = ids.iter().rev().take(8).map(|id| repo.tree_at(*id, TreeKind::View).expect("view")).collect();
    let mut rng = Rng(99);
    let calls: Vec<(usize, ToolCall)> = (0..64)
        .map(|i| {
            let call = match i % 4 {
                0 => ToolCall::Grep(GrepArgs {
                    pattern: format!("def {}_[0-9]+", WORDS[rng.below(WORDS.len())]),
                    path: Some(format!("src/pkg{:02}", rng.below(40))),
                    case_sensitive: None,
                }),
                1 => ToolCall::Grep(GrepArgs {
                    pattern: "TODO: retry".to_owned(),
                    path: Some("*.py".to_owned()),
                    case_sensitive: None,
                }),
                2 => ToolCall::Glob(GlobArgs { pattern: format!("src/pkg{:02}/**/*.py", rng.below(40)) }),
                _ => ToolCall::Read(ReadArgs { path: path_of(rng.below(FILES)), start: Some(10), end: Some(40) }),
            };
            (i % trees.len(), call)
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().build().expect("runtime");
    let batch = |latencies: Option<&mut Vec<Duration>>| {
        let timed = runtime.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for (t, call) in &calls {
                let (sandbox, tree, call) = (sandbox.clone(), trees[*t].clone(), call.clone());
                set.spawn(async move {
                    let started = Instant::now();
                    let result = sandbox.run_call(tree, call).await;
                    assert!(!result.is_error(), "{}", result.output);
                    started.elapsed()
                });
            }
            set.join_all().await
        });
        if let Some(latencies) = latencies {
            latencies.extend(timed);
        }
    };
    let mut group = c.benchmark_group("sandbox_concurrent");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(calls.len() as u64));
    group.bench_function("64 mixed calls, 8 commits, view", |b| b.iter(|| batch(None)));
    group.finish();
    let mut latencies = Vec::new();
    let started = Instant::now();
    let rounds = 20;
    for _ in 0..rounds {
        batch(Some(&mut latencies));
    }
    let wall = started.elapsed();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "sandbox bench: 64 concurrent mixed calls × {rounds}: {:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms (peak in flight {})",
        latencies.len() as f64 / wall.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        sandbox.stats().peak_in_flight,
    );

    group_of_rollouts(c, &runtime, &store, &view);
}

/// One GRPO group's tool calls: 8 rollouts of one issue at one commit, each making the same 15
/// calls in its own order over 3 turns; every turn's calls of all rollouts run at once.
fn group_of_rollouts(c: &mut Criterion, runtime: &tokio::runtime::Runtime, store: &Arc<RepoStore>, tree: &Arc<Tree>) {
    const ROLLOUTS: usize = 8;
    const TURNS: usize = 3;
    let grep = |pattern: &str, path: Option<&str>| {
        ToolCall::Grep(GrepArgs { pattern: pattern.to_owned(), path: path.map(str::to_owned), case_sensitive: None })
    };
    // The candidate calls of one issue ("retry on a session timeout drops the Content-Length
    // header"): greps of its terms, a few narrowed by path, globs and reads of likely files.
    let calls = vec![
        grep("Content-Length", None),
        grep("retry", None),
        grep("timeout", None),
        grep("session", Some("*.py")),
        grep(r"def retry_[0-9]+\(", None),
        grep(r"def timeout_[0-9]+\(", None),
        grep("TODO: retry", None),
        grep("headers\\[", Some("src/pkg07")),
        grep("class Session", None),
        ToolCall::Glob(GlobArgs { pattern: "src/pkg07/**/*.py".to_owned() }),
        ToolCall::Glob(GlobArgs { pattern: "**/mod01*.py".to_owned() }),
        ToolCall::Read(ReadArgs { path: path_of(7), start: None, end: None }),
        ToolCall::Read(ReadArgs { path: path_of(47), start: Some(1), end: Some(30) }),
        ToolCall::Read(ReadArgs { path: path_of(1207), start: Some(20), end: Some(60) }),
        ToolCall::Read(ReadArgs { path: "README.md".to_owned(), start: None, end: None }),
    ];
    let per_turn = calls.len().div_ceil(TURNS);
    // Each rollout's own order of the 15 calls (a Fisher-Yates shuffle), cut into turns.
    let orders: Vec<Vec<ToolCall>> = (0..ROLLOUTS)
        .map(|r| {
            let mut rng = Rng(0x9e37_79b9 + r as u64);
            let mut order = calls.clone();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            order
        })
        .collect();
    let run_group = |sandbox: &Sandbox| {
        runtime.block_on(async {
            for turn in 0..TURNS {
                let mut set = tokio::task::JoinSet::new();
                for order in &orders {
                    for call in order.iter().skip(turn * per_turn).take(per_turn) {
                        let (sandbox, tree, call) = (sandbox.clone(), tree.clone(), call.clone());
                        set.spawn(async move { sandbox.run_call(tree, call).await });
                    }
                }
                for result in set.join_all().await {
                    assert!(!result.is_error() && result.status != Status::Timeout, "{}", result.output);
                }
            }
        })
    };
    let off = Limits { result_cache_bytes: 0, ..Limits::default() };
    let on = Limits::default();
    let kept = Sandbox::new(store.clone(), on.clone());
    run_group(&kept);
    let mut group = c.benchmark_group("sandbox_result_cache");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements((ROLLOUTS * calls.len()) as u64));
    group.bench_function("baseline: group of 8 rollouts x 15 calls, cache off", |b| {
        b.iter(|| run_group(&Sandbox::new(store.clone(), off.clone())))
    });
    group.bench_function("group of 8 rollouts x 15 calls, cache on, fresh per group", |b| {
        b.iter(|| run_group(&Sandbox::new(store.clone(), on.clone())))
    });
    group
        .bench_function("group of 8 rollouts x 15 calls, cache on, kept (evaluation)", |b| b.iter(|| run_group(&kept)));
    group.finish();
    let fresh = Sandbox::new(store.clone(), on.clone());
    run_group(&fresh);
    let (stats, kept_stats) = (fresh.stats(), kept.stats());
    println!(
        "sandbox bench: group of {ROLLOUTS} rollouts x {} calls: fresh cache {} hits of {} calls ({:.0}%), {} entries, {:.1} KB; kept cache {:.1}% hits over {} calls",
        calls.len(),
        stats.cache_hits,
        stats.calls,
        100.0 * stats.cache_hits as f64 / stats.calls as f64,
        stats.cache_entries,
        stats.cache_bytes as f64 / 1e3,
        100.0 * kept_stats.cache_hits as f64 / kept_stats.calls as f64,
        kept_stats.calls,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
