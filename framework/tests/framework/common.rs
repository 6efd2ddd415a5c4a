//! Shared fixtures: one generated source per test binary, git helpers, and
//! file-level retrieval metrics.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rewardlab_framework::synthetic::{self, SyntheticConfig, SyntheticSource};

/// The default-config source for seed 0, generated once per test binary
/// under Cargo's per-target scratch directory.
pub fn default_source() -> &'static SyntheticSource {
    static SOURCE: OnceLock<SyntheticSource> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let dir = scratch("default-seed0");
        synthetic::generate(&SyntheticConfig::default(), &dir).expect("generate the default source")
    })
}

/// A fresh, empty directory under `CARGO_TARGET_TMPDIR` unique to this process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("framework-{}-{name}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("remove a stale scratch directory");
    }
    dir
}

/// Runs git against the bare repository `repo` and returns stdout.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let output = Command::new("git").arg("--git-dir").arg(repo).args(args).output().expect("run git");
    assert!(output.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Precision, recall and F-beta (beta = 0.5) of predicted against target
/// files, with the reward language's edge cases (both empty: 1; one: 0).
pub fn file_scores(predicted: &[String], target: &[String]) -> (f64, f64, f64) {
    let predicted: BTreeSet<&String> = predicted.iter().collect();
    let target: BTreeSet<&String> = target.iter().collect();
    match (predicted.is_empty(), target.is_empty()) {
        (true, true) => return (1.0, 1.0, 1.0),
        (true, false) | (false, true) => return (0.0, 0.0, 0.0),
        _ => {}
    }
    let hits = predicted.intersection(&target).count() as f64;
    let precision = hits / predicted.len() as f64;
    let recall = hits / target.len() as f64;
    let beta2 = 0.25;
    let f = if hits == 0.0 { 0.0 } else { (1.0 + beta2) * precision * recall / (beta2 * precision + recall) };
    (precision, recall, f)
}

/// Mean precision, recall and F0.5 of `predict` over `tasks` of `source`
/// against the files chosen by `targets`.
pub fn evaluate(
    source: &SyntheticSource,
    tasks: &[usize],
    targets: impl Fn(&synthetic::Task) -> Vec<String>,
    mut predict: impl FnMut(&synthetic::Task) -> Vec<String>,
) -> (f64, f64, f64) {
    let mut sums = (0.0, 0.0, 0.0);
    for &index in tasks {
        let task = &source.tasks[index];
        let (p, r, f) = file_scores(&predict(task), &targets(task));
        sums = (sums.0 + p, sums.1 + r, sums.2 + f);
    }
    let n = tasks.len().max(1) as f64;
    (sums.0 / n, sums.1 / n, sums.2 / n)
}
