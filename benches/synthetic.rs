//! The synthetic task source and the BM25 baseline, each beside a baseline
//! in the same group:
//!
//! - `synthetic_generate`: `synthetic::generate` with the default config
//!   (~300 files x 8 commits, 120 tasks) beside `git fast-import` alone
//!   replaying the same history (the floor set by git's own object writing).
//! - `bm25_top2`: top-2 files for all 120 issues at one commit with the
//!   inverted index beside a linear scan over per-document term counts.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rewardlab_framework::bm25::{Bm25Index, Bm25Params, FileIndex, tokenize};
use rewardlab_framework::synthetic::{self, SyntheticConfig, SyntheticSource};

fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn git");
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes).expect("write to git");
    }
    let output = child.wait_with_output().expect("wait for git");
    assert!(output.status.success(), "git {args:?} failed");
    output.stdout
}

fn generate(c: &mut Criterion) {
    let keep = tempfile::tempdir().expect("tempdir");
    let source = synthetic::generate(&SyntheticConfig::default(), &keep.path().join("repo")).expect("generate");
    let stream = git(&source.repo_path, &["fast-export", "--all"], None);
    let mut group = c.benchmark_group("synthetic_generate");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.bench_function("generate_default", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("tempdir"),
            |dir| {
                synthetic::generate(&SyntheticConfig::default(), &dir.path().join("repo")).expect("generate");
                dir
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("git_fast_import_only", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("tempdir"),
            |dir| {
                git(dir.path(), &["init", "--quiet", "--bare", "."], None);
                git(dir.path(), &["fast-import", "--quiet"], Some(&stream));
                dir
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// The baseline: per document a term-count map, scanned in full per query.
struct LinearScan {
    paths: Vec<String>,
    counts: Vec<HashMap<String, u32>>,
    lengths: Vec<f64>,
    document_frequency: HashMap<String, usize>,
}

impl LinearScan {
    fn new(documents: &[(String, String)]) -> LinearScan {
        let mut scan = LinearScan {
            paths: Vec::new(),
            counts: Vec::new(),
            lengths: Vec::new(),
            document_frequency: HashMap::new(),
        };
        for (path, text) in documents {
            let tokens = tokenize(text);
            let mut counts: HashMap<String, u32> = HashMap::new();
            for token in &tokens {
                *counts.entry(token.clone()).or_default() += 1;
            }
            for term in counts.keys() {
                *scan.document_frequency.entry(term.clone()).or_default() += 1;
            }
            scan.paths.push(path.clone());
            scan.lengths.push(tokens.len() as f64);
            scan.counts.push(counts);
        }
        scan
    }

    fn top_2(&self, query: &str) -> Vec<String> {
        let (k1, b) = (1.2, 0.75);
        let n = self.paths.len() as f64;
        let average = self.lengths.iter().sum::<f64>() / n;
        let terms = tokenize(query);
        let mut scored: Vec<(f64, &String)> = Vec::new();
        for (doc, counts) in self.counts.iter().enumerate() {
            let mut score = 0.0;
            for term in &terms {
                if let Some(&tf) = counts.get(term) {
                    let df = self.document_frequency[term] as f64;
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    let tf = f64::from(tf);
                    score += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * self.lengths[doc] / average));
                }
            }
            if score > 0.0 {
                scored.push((score, &self.paths[doc]));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.into_iter().take(2).map(|(_, p)| p.clone()).collect()
    }
}

fn documents(source: &SyntheticSource, commit: &str) -> Vec<(String, String)> {
    let listing =
        String::from_utf8(git(&source.repo_path, &["ls-tree", "-r", "--name-only", commit], None)).expect("utf-8");
    listing
        .lines()
        .map(|path| {
            let text =
                String::from_utf8(git(&source.repo_path, &["show", &format!("{commit}:{path}")], None)).expect("utf-8");
            (path.to_string(), format!("{path}\n{text}"))
        })
        .collect()
}

fn bm25(c: &mut Criterion) {
    let keep = tempfile::tempdir().expect("tempdir");
    let source = synthetic::generate(&SyntheticConfig::default(), &keep.path().join("repo")).expect("generate");
    let commit = source.commits.last().expect("commits").id.clone();
    let index = Bm25Index::from_commit(&source.repo_path, &commit, Bm25Params::default()).expect("index");
    let scan = LinearScan::new(&documents(&source, &commit));
    let prompts: Vec<&str> = source.tasks.iter().map(|t| t.prompt.as_str()).collect();
    // Both rank the same files: the baseline is the same function.
    for prompt in &prompts {
        let fast: Vec<String> = index.top_k(prompt, 2).into_iter().map(|h| h.path).collect();
        assert_eq!(fast, scan.top_2(prompt));
    }
    let mut group = c.benchmark_group("bm25_top2");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.bench_function("inverted_index_120_issues", |b| {
        b.iter(|| prompts.iter().map(|p| index.top_k(p, 2).len()).sum::<usize>())
    });
    group.bench_function("linear_scan_120_issues", |b| {
        b.iter(|| prompts.iter().map(|p| scan.top_2(p).len()).sum::<usize>())
    });
    group.bench_function("index_from_commit_gix", |b| {
        b.iter(|| Bm25Index::from_commit(&source.repo_path, &commit, Bm25Params::default()).expect("index").len())
    });
    group.finish();
}

criterion_group!(benches, generate, bm25);
criterion_main!(benches);
