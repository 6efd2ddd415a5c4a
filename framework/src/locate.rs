//! A trained policy as a retriever: predictions on any SWE-bench-style
//! instances, scored like the seeds' Table 2 (file-level F_β with β = 0.5,
//! mean and median, precision, recall, the share with F_β ≥ 0.8, turns)
//! beside BM25 top-k, overall and per repository.
//!
//! The policy runs one greedy episode per instance
//! ([`crate::engine::greedy::run_episodes`]); the baseline is the study's
//! BM25 top-k ([`crate::study::baseline::bm25_tasks`]). Both are scored and
//! aggregated as the study's baseline rows are, so the rows compare like for like.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rewardlab_rewards::rollout::Rollout;
use serde::{Deserialize, Serialize};

use crate::bm25::{Bm25Error, TermCache};
use crate::engine::{EngineTask, TaskSet};
use crate::study::baseline::{self, bm25_tasks_cached, file_scores};

/// One instance's prediction and its scores (a line of `predictions.jsonl`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The instance's id.
    pub instance_id: String,
    /// The repository (`owner/name` or a store name).
    pub repo: String,
    /// The files the answer names, in its order.
    pub files: Vec<String>,
    /// The answer's line ranges, `path:start-end`.
    pub line_ranges: Vec<String>,
    /// Turns the episode took, the answer turn included (0 for baselines).
    pub turns: usize,
    /// Tool calls the episode made (0 for baselines).
    pub calls: usize,
    /// Whether the answer parsed (always true for baselines).
    pub valid: bool,
    /// File-level F_β (β = 0.5) against the gold files.
    pub fb: f64,
    /// File-level precision.
    pub precision: f64,
    /// File-level recall.
    pub recall: f64,
}

/// Scores `files` against a task's target files (as the study's baselines are scored).
pub fn score(
    task: &EngineTask,
    files: Vec<String>,
    line_ranges: Vec<String>,
    turns: usize,
    calls: usize,
    valid: bool,
) -> Prediction {
    let (fb, precision, recall) = file_scores(&files, task);
    Prediction {
        instance_id: task.id.clone(),
        repo: task.repo.clone(),
        fb,
        precision,
        recall,
        files,
        line_ranges,
        turns,
        calls,
        valid,
    }
}

/// The predictions of a policy's rollouts, one per task, in task order.
pub fn from_rollouts(tasks: &[EngineTask], rollouts: &[Rollout]) -> Vec<Prediction> {
    tasks
        .iter()
        .zip(rollouts)
        .map(|(task, rollout)| {
            let predicted = rollout.predicted.clone().unwrap_or_default();
            let turns = rollout.turns.as_ref().map_or(0, Vec::len);
            let calls = rollout.turns.as_ref().map_or(0, |t| t.iter().map(Vec::len).sum());
            let ranges = predicted.line_ranges.unwrap_or_default().iter().map(ToString::to_string).collect();
            score(task, predicted.files.unwrap_or_default(), ranges, turns, calls, rollout.valid.unwrap_or(false))
        })
        .collect()
}

/// BM25 top-`k` predictions, one per task, in task order: the study's BM25
/// baseline ([`crate::study::baseline::bm25_tasks`]) with every task held out; `repo_dir` maps a
/// task's `repo` to its git directory, and `cache` holds the blobs' terms.
pub fn bm25_predictions(
    tasks: &[EngineTask],
    k: usize,
    repo_dir: &dyn Fn(&str) -> PathBuf,
    cache: &TermCache,
) -> Result<Vec<Prediction>, Bm25Error> {
    let all = TaskSet { tasks: tasks.to_vec(), train: Vec::new(), held_out: (0..tasks.len()).collect() };
    let records = bm25_tasks_cached(&all, k, repo_dir, cache)?;
    Ok(records
        .into_iter()
        .map(|r| Prediction {
            instance_id: r.task,
            repo: r.repo,
            files: r.files,
            line_ranges: Vec::new(),
            turns: 0,
            calls: 0,
            valid: true,
            fb: r.fb,
            precision: r.precision,
            recall: r.recall,
        })
        .collect())
}

/// One row of Table 2.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableRow {
    /// The method (`policy`, `BM25 top-2`).
    pub method: String,
    /// `all`, or a repository.
    pub scope: String,
    /// Instances scored.
    pub tasks: usize,
    /// Mean F_β.
    pub fb_mean: f64,
    /// Median F_β.
    pub fb_median: f64,
    /// Mean precision.
    pub precision: f64,
    /// Mean recall.
    pub recall: f64,
    /// Share of instances with F_β ≥ 0.8.
    pub fb_ge_0_8: f64,
    /// Mean turns (0 for baselines).
    pub turns: f64,
}

fn row(method: &str, scope: &str, predictions: &[&Prediction]) -> TableRow {
    let column = |f: fn(&Prediction) -> f64| predictions.iter().map(|p| f(p)).collect::<Vec<_>>();
    let scores = baseline::row(method.to_owned(), &column(|p| p.fb), &column(|p| p.precision), &column(|p| p.recall));
    let turns = column(|p| p.turns as f64);
    TableRow {
        method: scores.name,
        scope: scope.to_owned(),
        tasks: scores.tasks,
        fb_mean: scores.fb_mean,
        fb_median: scores.fb_median,
        precision: scores.precision,
        recall: scores.recall,
        fb_ge_0_8: scores.fb_ge_0_8,
        turns: if turns.is_empty() { 0.0 } else { turns.iter().sum::<f64>() / turns.len() as f64 },
    }
}

/// Table 2 for each method's predictions (`(name, predictions)`, e.g. the
/// policy then BM25): the `all` rows first, then per repository (sorted), each
/// method in the order given.
pub fn table(methods: &[(&str, &[Prediction])]) -> Vec<TableRow> {
    let mut rows: Vec<TableRow> =
        methods.iter().map(|(name, preds)| row(name, "all", &preds.iter().collect::<Vec<_>>())).collect();
    let mut repos: BTreeMap<&str, ()> = BTreeMap::new();
    for (_, preds) in methods {
        for p in preds.iter() {
            repos.insert(&p.repo, ());
        }
    }
    if repos.len() > 1 {
        for repo in repos.keys() {
            for (name, preds) in methods {
                let of_repo: Vec<&Prediction> = preds.iter().filter(|p| p.repo == *repo).collect();
                rows.push(row(name, repo, &of_repo));
            }
        }
    }
    rows
}

/// The rows as a markdown table.
pub fn markdown(rows: &[TableRow]) -> String {
    let mut out = String::from(
        "| scope | method | tasks | F_β mean | F_β median | P | R | F_β ≥ 0.8 | turns |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} |\n",
            r.scope, r.method, r.tasks, r.fb_mean, r.fb_median, r.precision, r.recall, r.fb_ge_0_8, r.turns
        ));
    }
    out
}
