//! The non-learned baselines on a study's held-out tasks, scored like the
//! policy's answers (file-level F_β with β = 0.5, precision, recall):
//!
//! - **BM25 top-k** (seed 000, Table 2's "BM25 top-2"): each task's issue text
//!   queries a BM25 index of its commit, and the top k files are the answer.
//! - **grep heuristic top-1** ([`crate::heuristic`], issue 14): the issue's
//!   identifiers weighted by rarity in the tree, a bonus for the files that
//!   define them, and the best file is the answer. A learned locator that does
//!   not beat it has learned nothing a developer's first grep would not find.
//!
//! Each baseline is scored task by task ([`BaselineTask`], the study's
//! `baseline_tasks.jsonl`) so a summary can break it down by repository; a
//! [`BaselineRow`] is the aggregate of those records ([`baseline_row`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use rewardlab_rewards::metrics::Counts;
use serde::{Deserialize, Serialize};

use super::summary::BaselineRow;
use crate::bm25::{Bm25Error, Bm25Index, Bm25Params, FileIndex, TermCache};
use crate::engine::{EngineTask, TaskSource};
use crate::heuristic::{GrepHeuristic, HeuristicParams};

/// β of the summary's F_β (file level), as in the engine's `fb_file`.
const BETA: f64 = 0.5;

/// One baseline's answer to one held-out task: a line of `baseline_tasks.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineTask {
    /// The baseline's row name (`BM25 top-2`, `grep heuristic top-1`).
    pub baseline: String,
    /// The task's id.
    pub task: String,
    /// The task's repository as the task source names it.
    pub repo: String,
    /// File-level F_β (β = 0.5).
    pub fb: f64,
    /// File-level precision.
    pub precision: f64,
    /// File-level recall.
    pub recall: f64,
    /// The files the baseline answered, best first.
    pub files: Vec<String>,
}

/// The row name of the BM25 top-`k` baseline.
pub fn bm25_name(k: usize) -> String {
    format!("BM25 top-{k}")
}

/// The row name of the grep heuristic with `params`.
pub fn heuristic_name(params: &HeuristicParams) -> String {
    format!("grep heuristic top-{}", params.top_k)
}

/// Scores BM25 top-`k` on the held-out split of `tasks`. Task repositories
/// must be local paths (synthetic sources' are); see [`bm25_baseline_with`]
/// for repositories named in a store.
pub fn bm25_baseline(tasks: &dyn TaskSource, k: usize) -> Result<BaselineRow, Bm25Error> {
    bm25_baseline_with(tasks, k, &|repo| PathBuf::from(repo))
}

/// [`bm25_baseline`] with `repo_dir` mapping a task's `repo` (a store name
/// such as `owner/name`, say) to the git directory holding it.
pub fn bm25_baseline_with(
    tasks: &dyn TaskSource,
    k: usize,
    repo_dir: &dyn Fn(&str) -> PathBuf,
) -> Result<BaselineRow, Bm25Error> {
    Ok(baseline_row(bm25_name(k), &bm25_tasks(tasks, k, repo_dir)?))
}

/// BM25 top-`k`'s record of every held-out task of `tasks`, in held-out order.
pub fn bm25_tasks(
    tasks: &dyn TaskSource,
    k: usize,
    repo_dir: &dyn Fn(&str) -> PathBuf,
) -> Result<Vec<BaselineTask>, Bm25Error> {
    bm25_tasks_cached(tasks, k, repo_dir, &TermCache::default())
}

/// [`bm25_tasks`] with the blobs' terms in `cache` (a [`TermCache::skipping_missing`] one reads
/// blobs missing from the store as files without terms).
pub fn bm25_tasks_cached(
    tasks: &dyn TaskSource,
    k: usize,
    repo_dir: &dyn Fn(&str) -> PathBuf,
    cache: &TermCache,
) -> Result<Vec<BaselineTask>, Bm25Error> {
    let name = bm25_name(k);
    score_held_out(
        tasks,
        &name,
        |task| Bm25Index::from_commit_cached(&repo_dir(&task.repo), &task.commit, Bm25Params::default(), cache),
        |index, task| index.top_k(&task.prompt, k).into_iter().map(|h| h.path).collect(),
    )
}

/// Scores the grep heuristic (default parameters: top-1) on the held-out
/// split of `tasks`, with `repo_dir` as in [`bm25_baseline_with`].
pub fn heuristic_baseline_with(
    tasks: &dyn TaskSource,
    repo_dir: &dyn Fn(&str) -> PathBuf,
) -> Result<BaselineRow, Bm25Error> {
    let params = HeuristicParams::default();
    Ok(baseline_row(heuristic_name(&params), &heuristic_tasks(tasks, params, repo_dir)?))
}

/// The grep heuristic's record of every held-out task of `tasks`, in held-out order.
pub fn heuristic_tasks(
    tasks: &dyn TaskSource,
    params: HeuristicParams,
    repo_dir: &dyn Fn(&str) -> PathBuf,
) -> Result<Vec<BaselineTask>, Bm25Error> {
    let name = heuristic_name(&params);
    let cache = TermCache::default();
    score_held_out(
        tasks,
        &name,
        |task| GrepHeuristic::from_commit_cached(&repo_dir(&task.repo), &task.commit, params, &cache),
        |index, task| index.locate(&task.prompt),
    )
}

/// BM25 top-`k`'s and the grep heuristic's records of every held-out task of `tasks`, in
/// held-out order, as [`bm25_tasks`] and [`heuristic_tasks`] give them, from one reading of each
/// commit: every blob is read and tokenized once for both (in parallel within a commit), then
/// the commits are scored in parallel. `progress(done, total)` is called as commits finish
/// (each commit counts twice: read, then scored). `cache` holds the blobs' terms (a
/// [`TermCache::skipping_missing`] one reads blobs missing from the store as files without terms).
pub fn baseline_tasks(
    tasks: &dyn TaskSource,
    k: usize,
    params: HeuristicParams,
    repo_dir: &(dyn Fn(&str) -> PathBuf + Sync),
    cache: &TermCache,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<(Vec<BaselineTask>, Vec<BaselineTask>), Bm25Error> {
    let (bm25, heuristic) = (bm25_name(k), heuristic_name(&params));
    let groups = held_out_groups(tasks);
    let total = 2 * groups.len();
    let done = AtomicUsize::new(0);
    let tick = || progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
    // Reading commit by commit lets each one find the blobs the previous ones read. The file
    // lists share their blobs' terms, so keeping one per commit costs little beside the cache.
    let mut read = Vec::with_capacity(groups.len());
    for positions in groups {
        let task = &tasks.tasks()[tasks.held_out()[positions[0]]];
        read.push((cache.commit_files(&repo_dir(&task.repo), &task.commit)?, positions));
        tick();
    }
    let scored: Vec<Vec<(usize, BaselineTask, BaselineTask)>> = read
        .into_par_iter()
        .map(|(files, positions)| {
            let index = Bm25Index::from_files(&files, Bm25Params::default());
            let grep = GrepHeuristic::from_files(&files, params);
            drop(files);
            let records = positions
                .iter()
                .map(|&position| {
                    let task = &tasks.tasks()[tasks.held_out()[position]];
                    let bm25_files = index.top_k(&task.prompt, k).into_iter().map(|h| h.path).collect();
                    (position, record(&bm25, task, bm25_files), record(&heuristic, task, grep.locate(&task.prompt)))
                })
                .collect();
            tick();
            records
        })
        .collect();
    let mut records: Vec<(usize, BaselineTask, BaselineTask)> = scored.into_iter().flatten().collect();
    records.sort_by_key(|(position, _, _)| *position);
    Ok(records.into_iter().map(|(_, bm25, heuristic)| (bm25, heuristic)).unzip())
}

/// The file beside `baseline_tasks.jsonl` that says which inputs its records were computed from
/// (see [`cache_key`]).
pub const CACHE_KEY_FILE: &str = "baseline.key";

/// What the baselines' records depend on, as a fingerprint: `k`, the heuristic's parameters and
/// every held-out task's id, repository, commit, issue text and target (not where the repository
/// lies: a full object id names the same tree in any clone). A study that finds this key beside its `baseline_tasks.jsonl` (a rerun, a resumed
/// run, another Slurm array task) reads the records instead of reading every held-out commit
/// again, which on real repositories takes minutes. `None` — never cached — when a task's commit
/// is not a full object id: a branch or tag name may move between two processes.
pub fn cache_key(tasks: &dyn TaskSource, k: usize, params: &HeuristicParams) -> Option<String> {
    let mut text = format!("baselines v1\nk={k}\n{params:?}\n");
    for &i in tasks.held_out() {
        let task = &tasks.tasks()[i];
        if task.commit.len() != 40 || !task.commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let target = serde_json::to_string(&task.target).ok()?;
        // Lengths first, so no two different task lists write the same text.
        for field in [task.id.as_str(), &task.repo, &task.commit, &task.prompt, &target] {
            text.push_str(&format!("{}:{field}\n", field.len()));
        }
    }
    Some(format!("{:016x}\n", crate::engine::seed::fnv1a(text.as_bytes())))
}

/// The BM25 and heuristic records of `study_dir`'s `baseline_tasks.jsonl` when its
/// [`CACHE_KEY_FILE`] holds `key`, split as [`baseline_tasks`] returns them; `None` when the key
/// differs or is missing, or the records do not read back whole (`held` of each baseline, one per
/// held-out task).
pub fn cached(
    study_dir: &std::path::Path,
    key: &str,
    k: usize,
    params: &HeuristicParams,
    held: usize,
) -> Option<(Vec<BaselineTask>, Vec<BaselineTask>)> {
    let stored = std::fs::read_to_string(study_dir.join(CACHE_KEY_FILE)).ok()?;
    if stored != key {
        return None;
    }
    let path = study_dir.join(super::summary::BASELINE_TASKS_FILE);
    let records = super::by_repo::read_jsonl::<BaselineTask>(&path).ok()??;
    let (bm25, heuristic) = (bm25_name(k), heuristic_name(params));
    let (first, rest): (Vec<_>, Vec<_>) = records.into_iter().partition(|r| r.baseline == bm25);
    (first.len() == held && rest.len() == held && rest.iter().all(|r| r.baseline == heuristic)).then_some((first, rest))
}

/// Positions in the held-out split, grouped by (repository, commit) in order of first
/// appearance.
fn held_out_groups(tasks: &dyn TaskSource) -> Vec<Vec<usize>> {
    let held = tasks.held_out();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: HashMap<(&str, &str), usize> = HashMap::new();
    for (position, &i) in held.iter().enumerate() {
        let task = &tasks.tasks()[i];
        let g = *group_of.entry((task.repo.as_str(), task.commit.as_str())).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(position);
    }
    groups
}

/// The record of baseline `name` answering `task` with `files`.
fn record(name: &str, task: &EngineTask, files: Vec<String>) -> BaselineTask {
    let (fb, precision, recall) = file_scores(&files, task);
    BaselineTask {
        baseline: name.to_owned(),
        task: task.id.clone(),
        repo: task.repo.clone(),
        fb,
        precision,
        recall,
        files,
    }
}

/// Answers every held-out task with `answer` over an index per (repository,
/// commit), built once by `build`, and scores the answers. Tasks are answered
/// commit by commit and each index is dropped before the next is built: on a
/// real repository an index holds the whole tree's postings, and SWE-bench
/// instances rarely share a base commit, so keeping them all would hold
/// gigabytes for nothing.
fn score_held_out<I>(
    tasks: &dyn TaskSource,
    name: &str,
    build: impl Fn(&EngineTask) -> Result<I, Bm25Error>,
    answer: impl Fn(&I, &EngineTask) -> Vec<String>,
) -> Result<Vec<BaselineTask>, Bm25Error> {
    let held = tasks.held_out();
    let mut records: Vec<Option<BaselineTask>> = vec![None; held.len()];
    for positions in held_out_groups(tasks) {
        let index = build(&tasks.tasks()[held[positions[0]]])?;
        for position in positions {
            let task = &tasks.tasks()[held[position]];
            records[position] = Some(record(name, task, answer(&index, task)));
        }
    }
    Ok(records.into_iter().flatten().collect())
}

/// File-level F_β (β = 0.5), precision and recall of the answer `files`
/// against `task`'s target files: how every baseline and `locate` score.
pub(crate) fn file_scores(files: &[String], task: &EngineTask) -> (f64, f64, f64) {
    let target = task.target.files.as_deref().unwrap_or_default();
    let counts = Counts::of_sets(files, target);
    (counts.f_beta(BETA), counts.precision(), counts.recall())
}

/// The row `name` from per-task records (all of one baseline).
pub fn baseline_row(name: String, records: &[BaselineTask]) -> BaselineRow {
    let column = |f: fn(&BaselineTask) -> f64| records.iter().map(f).collect::<Vec<_>>();
    row(name, &column(|r| r.fb), &column(|r| r.precision), &column(|r| r.recall))
}

/// A baseline row from per-task scores.
pub(crate) fn row(name: String, fb: &[f64], precision: &[f64], recall: &[f64]) -> BaselineRow {
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    let mut sorted = fb.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    };
    BaselineRow {
        name,
        fb_mean: mean(fb),
        fb_median: median,
        precision: mean(precision),
        recall: mean(recall),
        fb_ge_0_8: mean(&fb.iter().map(|&x| f64::from(u8::from(x >= 0.8))).collect::<Vec<_>>()),
        tasks: fb.len(),
    }
}
