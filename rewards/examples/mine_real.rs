//! Mines commits and merged pull requests from real repositories and
//! compares the two kinds as training data.
//!
//! ```text
//! cargo run -p rewardlab-rewards --example mine_real -- MIRRORS_DIR [NAME.git ...]
//! ```
//!
//! For each repository: commits/s of a full walk (both kinds, first parent
//! off), then per kind the task count, issue-text words (mean, median), target
//! files per task, and how much of the text's vocabulary is in the target
//! files at the base commit: the share of tasks where at least one
//! code-shaped identifier of the text (an inner `_` or capital) occurs in a
//! target file, and the mean share of the text's words of 5+ letters that do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rewardlab_rewards::tasks::{CommitOptions, MinedTask, TaskKind, TaskKinds, mine};

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

fn code_shaped(word: &str) -> bool {
    let w = word.trim_matches('_');
    w.len() >= 4 && (w.contains('_') || w.chars().skip(1).any(char::is_uppercase))
}

/// The text of `path` at commit `base`, empty when absent or unreadable.
fn file_at(repo: &gix::Repository, base: &str, path: &str) -> String {
    let read = || -> Option<String> {
        let id = gix::ObjectId::from_hex(base.as_bytes()).ok()?;
        let tree = repo.find_commit(id).ok()?.tree().ok()?;
        let entry = tree.lookup_entry_by_path(path).ok()??;
        let blob = repo.find_blob(entry.object_id()).ok()?;
        Some(String::from_utf8_lossy(&blob.data).into_owned())
    };
    read().unwrap_or_default()
}

#[derive(Default)]
struct KindStats {
    words: Vec<usize>,
    files: Vec<usize>,
    with_identifier: usize,
    vocabulary_share: Vec<f64>,
}

fn describe(repo: &gix::Repository, tasks: &[&MinedTask]) -> KindStats {
    let mut stats = KindStats::default();
    for mined in tasks {
        let task = &mined.task;
        stats.words.push(words(&task.prompt).count());
        stats.files.push(task.targets.files.len());
        let content: String = task.targets.files.iter().map(|f| file_at(repo, &task.base_commit, f)).collect();
        let present: BTreeSet<&str> = words(&content).collect();
        if words(&task.prompt).any(|w| code_shaped(w) && present.contains(w)) {
            stats.with_identifier += 1;
        }
        let long: BTreeSet<String> =
            words(&task.prompt).filter(|w| w.chars().count() >= 5).map(str::to_lowercase).collect();
        if !long.is_empty() {
            let lower: BTreeSet<String> = present.iter().map(|w| w.to_lowercase()).collect();
            stats.vocabulary_share.push(long.iter().filter(|w| lower.contains(*w)).count() as f64 / long.len() as f64);
        }
    }
    stats
}

fn mean<T: Copy + Into<f64>>(v: &[T]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().map(|&x| x.into()).sum::<f64>() / v.len() as f64 }
}

fn median(v: &[usize]) -> usize {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(mirrors) = args.next().map(PathBuf::from) else {
        eprintln!("usage: mine_real MIRRORS_DIR [NAME.git ...]");
        return ExitCode::from(2);
    };
    let mut names: Vec<String> = args.collect();
    if names.is_empty() {
        let Ok(entries) = std::fs::read_dir(&mirrors) else {
            eprintln!("cannot read {}", mirrors.display());
            return ExitCode::FAILURE;
        };
        names = entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
    }
    println!(
        "{:<24} {:>7} {:>8} {:>6} {:>9} | kind   {:>6} {:>6} {:>5} {:>5} {:>6} {:>6}",
        "repository", "walked", "commit/s", "s", "threads", "tasks", "words", "med", "files", "ident", "vocab"
    );
    for name in names {
        let path: &Path = &mirrors.join(&name);
        let options = CommitOptions { kinds: TaskKinds::Both, ..CommitOptions::default() };
        let mined = match mine(path, &options) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("{name}: {e}");
                continue;
            }
        };
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let rate = mined.stats.walked as f64 / mined.seconds.max(1e-9);
        let Ok(repo) = gix::open(path) else { continue };
        let mut by_kind: BTreeMap<TaskKind, Vec<&MinedTask>> = BTreeMap::new();
        for t in &mined.tasks {
            by_kind.entry(t.kind).or_default().push(t);
        }
        for (i, (kind, tasks)) in by_kind.iter().enumerate() {
            let s = describe(&repo, tasks);
            let head = if i == 0 {
                format!("{name:<24} {:>7} {rate:>8.0} {:>6.1} {threads:>9}", mined.stats.walked, mined.seconds)
            } else {
                format!("{:<24} {:>7} {:>8} {:>6} {:>9}", "", "", "", "", "")
            };
            println!(
                "{head} | {:<6} {:>6} {:>6.1} {:>5} {:>5.2} {:>6.2} {:>6.2}",
                if *kind == TaskKind::Commit { "commit" } else { "PR" },
                tasks.len(),
                mean(&s.words.iter().map(|&w| w as u32).collect::<Vec<_>>()),
                median(&s.words),
                mean(&s.files.iter().map(|&w| w as u32).collect::<Vec<_>>()),
                s.with_identifier as f64 / tasks.len().max(1) as f64,
                mean(&s.vocabulary_share),
            );
        }
        println!("{:<24} stats: {:?}", "", mined.stats);
    }
    ExitCode::SUCCESS
}
