//! A trained policy as a retriever: predictions on any SWE-bench-style
//! instances, scored like the seeds' Table 2 (file-level F_β with β = 0.5,
//! mean and median, precision, recall, the share with F_β ≥ 0.8, turns)
//! beside BM25 top-k, overall and per repository.
//!
//! The policy runs one greedy episode per instance
//! ([`crate::engine::greedy::run_episodes`]); the baseline is the study's
//! BM25 top-k ([`crate::study::baseline::bm25_tasks`]). Both are scored and
//! aggregated as the study's baseline rows are, so the rows compare like for like.
//!
//! [`reach`] says where a miss was lost: it runs the policy's first-turn calls on their own and
//! compares the gold files they name with what the episode saw and answered. [`ranking`] says how
//! a proxy policy's answer ranked the files it could answer, with the features it scored them by.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rewardlab_models::proxy::{RARE_FILES, RankedFile};
use rewardlab_rewards::rollout::Rollout;
use rewardlab_sandbox::{Entity, Error as SandboxError, Sandbox, Status, ToolCall, TreeKind};
use serde::{Deserialize, Serialize};

use crate::bm25::{Bm25Error, TermCache};
use crate::engine::{EngineTask, TaskSet};
use crate::markdown::{Align, Table};
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
    use Align::{Left as L, Right as R};
    let header = ["scope", "method", "tasks", "F_β mean", "F_β median", "P", "R", "F_β ≥ 0.8", "turns"];
    let mut table = Table::aligned(header, &[L, L, R, R, R, R, R, R, R]);
    let cell = |x: f64| format!("{x:.3}");
    for r in rows {
        table.row([
            r.scope.clone(),
            r.method.clone(),
            r.tasks.to_string(),
            cell(r.fb_mean),
            cell(r.fb_median),
            cell(r.precision),
            cell(r.recall),
            cell(r.fb_ge_0_8),
            format!("{:.2}", r.turns),
        ]);
    }
    table.finish()
}

/// Where an instance's answer was lost (`rewardlab locate --reach`): whether one of the policy's
/// first-turn calls, run on its own, names a gold file; whether the policy's episode named one in
/// any tool result; whether its answer named one. An instance lost with a reachable gold file was
/// lost to the choice of calls or to the ranking; an unreachable one, to the calls on offer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reach {
    /// The instance's id.
    pub instance_id: String,
    /// The repository (`owner/name` or a store name).
    pub repo: String,
    /// First-turn calls run.
    pub calls: usize,
    /// The gold files some first-turn call named (a grep or read line, a glob hit), sorted.
    pub reachable: Vec<String>,
    /// The first-turn calls that named one, in the policy's candidate order.
    pub reaching: Vec<ReachingCall>,
    /// The gold files the policy's episode named in any tool result, sorted.
    pub seen: Vec<String>,
    /// Whether the answer named a gold file (recall above 0).
    pub answered: bool,
}

/// A first-turn call that named a gold file ([`Reach::reaching`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReachingCall {
    /// The call.
    pub call: ToolCall,
    /// Distinct files its result named, gold or not.
    pub files: usize,
    /// Whether its output was complete (not cut at the output limit, no timeout).
    pub complete: bool,
}

impl ReachingCall {
    /// A complete result naming at most [`RARE_FILES`] files (the proxy's "rare hit" bound): the
    /// call points at the gold file rather than listing it among many (a grep of `returns` names
    /// hundreds).
    pub fn selective(&self) -> bool {
        self.complete && self.files <= RARE_FILES
    }
}

/// The gold files among the paths `named`, sorted and deduplicated.
fn gold_among<'a>(task: &EngineTask, named: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let gold = task.target.files.as_deref().unwrap_or_default();
    let found: std::collections::BTreeSet<&str> = named.into_iter().filter(|p| gold.iter().any(|g| g == p)).collect();
    found.into_iter().map(str::to_owned).collect()
}

/// Runs each of `calls` (the policy's first-turn calls for the task) at the task's commit and
/// compares what they and the episode (`rollout`, `prediction`) named with the gold files.
pub fn reach(
    sandbox: &Sandbox,
    task: &EngineTask,
    calls: &[ToolCall],
    rollout: &Rollout,
    prediction: &Prediction,
) -> Result<Reach, SandboxError> {
    let tree = sandbox.tree(&task.repo, &task.commit, TreeKind::View)?;
    let mut reachable = Vec::new();
    let mut reaching = Vec::new();
    for call in calls {
        let result = sandbox.call(&tree, call);
        let files: std::collections::HashSet<&str> = result.entities.iter().map(Entity::path).collect();
        let found = gold_among(task, files.iter().copied());
        if !found.is_empty() {
            reachable.extend(found);
            let complete = result.status == Status::Ok;
            reaching.push(ReachingCall { call: call.clone(), files: files.len(), complete });
        }
    }
    reachable.sort();
    reachable.dedup();
    let logged = rollout.turns.iter().flatten().flatten();
    let seen = gold_among(task, logged.flat_map(|call| call.entities.iter().flatten().map(Entity::path)));
    Ok(Reach {
        instance_id: task.id.clone(),
        repo: task.repo.clone(),
        calls: calls.len(),
        reachable,
        reaching,
        seen,
        answered: prediction.recall > 0.0,
    })
}

/// Counts of [`Reach`] records as a markdown table: instances, reachable by one first-turn call
/// (and by a [selective](ReachingCall::selective) one), seen by the episode, answered, and the
/// answered share of the seen; overall, then per repository (sorted) when there are several.
pub fn reach_markdown(reach: &[Reach]) -> String {
    use Align::{Left as L, Right as R};
    let header = [
        "scope",
        "instances",
        "reachable in one call",
        "by a selective call",
        "seen by the episode",
        "answered",
        "answered of seen",
    ];
    let mut table = Table::aligned(header, &[L, R, R, R, R, R, R]);
    for (scope, records) in scopes(reach, |r| &r.repo) {
        let count = |f: fn(&Reach) -> bool| records.iter().filter(|r| f(r)).count();
        let (reachable, seen, answered) =
            (count(|r| !r.reachable.is_empty()), count(|r| !r.seen.is_empty()), count(|r| r.answered));
        let selective = count(|r| r.reaching.iter().any(ReachingCall::selective));
        let share = if seen == 0 { 0.0 } else { count(|r| r.answered && !r.seen.is_empty()) as f64 / seen as f64 };
        table.row([
            scope.to_owned(),
            records.len().to_string(),
            reachable.to_string(),
            selective.to_string(),
            seen.to_string(),
            answered.to_string(),
            format!("{share:.2}"),
        ]);
    }
    table.finish()
}

/// The records of every scope of a table: all of them, then each repository's (sorted) when
/// there are several.
fn scopes<T>(records: &[T], repo: impl Fn(&T) -> &str) -> Vec<(&str, Vec<&T>)> {
    let mut scopes: Vec<(&str, Vec<&T>)> = vec![("all", records.iter().collect())];
    let repos: std::collections::BTreeSet<&str> = records.iter().map(&repo).collect();
    if repos.len() > 1 {
        scopes.extend(repos.into_iter().map(|name| (name, records.iter().filter(|r| repo(r) == name).collect())));
    }
    scopes
}

/// How a proxy policy's answer ranked the files it could answer in one instance's episode
/// (`rewardlab locate --ranking`): every candidate, best first, with its score and its features.
/// Where the gold file is among them but not first, the miss was the ranking's; where it is
/// not among them, the calls'.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// The instance's id.
    pub instance_id: String,
    /// The repository (`owner/name` or a store name).
    pub repo: String,
    /// The instance's gold files.
    pub gold: Vec<String>,
    /// The best rank (1 = first) of a gold file among the candidates; none when no gold file is
    /// one.
    pub gold_rank: Option<usize>,
    /// The candidates, best first.
    pub candidates: Vec<RankedFile>,
}

/// The ranking record of `task`'s episode, from the policy's ranked candidates.
pub fn ranking(task: &EngineTask, candidates: Vec<RankedFile>) -> Ranking {
    let gold = task.target.files.clone().unwrap_or_default();
    let gold_rank = candidates.iter().position(|c| gold.contains(&c.path)).map(|i| i + 1);
    Ranking { instance_id: task.id.clone(), repo: task.repo.clone(), gold, gold_rank, candidates }
}

/// Counts of [`Ranking`] records as a markdown table: instances, those with a gold file among
/// the answer's candidates, ranked first, ranked in the first three, and the gold file's mean
/// rank where it is a candidate; overall, then per repository (sorted) when there are several.
pub fn ranking_markdown(rankings: &[Ranking]) -> String {
    use Align::{Left as L, Right as R};
    let header = ["scope", "instances", "gold among candidates", "ranked first", "in the first 3", "mean rank"];
    let mut table = Table::aligned(header, &[L, R, R, R, R, R]);
    for (scope, records) in scopes(rankings, |r| &r.repo) {
        let ranks: Vec<usize> = records.iter().filter_map(|r| r.gold_rank).collect();
        let mean = if ranks.is_empty() { 0.0 } else { ranks.iter().sum::<usize>() as f64 / ranks.len() as f64 };
        table.row([
            scope.to_owned(),
            records.len().to_string(),
            ranks.len().to_string(),
            ranks.iter().filter(|&&r| r == 1).count().to_string(),
            ranks.iter().filter(|&&r| r <= 3).count().to_string(),
            format!("{mean:.1}"),
        ]);
    }
    table.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(repo: &str, reaching: Vec<(usize, bool)>, seen: bool, answered: bool) -> Reach {
        let call = ToolCall::Glob(rewardlab_sandbox::GlobArgs { pattern: "**/a.py".into() });
        Reach {
            instance_id: format!("{repo}-1"),
            repo: repo.into(),
            calls: 5,
            reachable: if reaching.is_empty() { vec![] } else { vec!["a.py".into()] },
            reaching: reaching
                .into_iter()
                .map(|(files, complete)| ReachingCall { call: call.clone(), files, complete })
                .collect(),
            seen: if seen { vec!["a.py".into()] } else { vec![] },
            answered,
        }
    }

    #[test]
    fn reach_table_counts_overall_and_per_repository() {
        let records = [
            // Reached only by a call listing many files; seen and answered.
            record("x", vec![(40, true)], true, true),
            // Reached by a selective call, never seen.
            record("x", vec![(40, false), (2, true)], false, false),
            // A cut output naming one file is not selective.
            record("y", vec![(1, false)], true, false),
            // Unreachable, unseen, not answered.
            record("y", vec![], false, false),
        ];
        let table = reach_markdown(&records);
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(
            rows,
            [
                "| all | 4 | 3 | 1 | 2 | 1 | 0.50 |",
                "| x | 2 | 2 | 1 | 1 | 1 | 1.00 |",
                "| y | 2 | 1 | 0 | 1 | 0 | 0.00 |"
            ]
        );
        // One repository: no per-repository rows.
        assert_eq!(reach_markdown(&records[..2]).lines().count(), 3);
    }

    #[test]
    fn ranking_finds_the_gold_rank_and_the_table_counts_it() {
        let task = |id: &str, repo: &str| EngineTask {
            id: id.into(),
            repo: repo.into(),
            commit: "c".into(),
            prompt: "issue".into(),
            target: rewardlab_rewards::rollout::Selection { files: Some(vec!["g.py".into()]), ..Default::default() },
        };
        let candidates = |paths: &[&str]| -> Vec<RankedFile> {
            paths
                .iter()
                .enumerate()
                .map(|(i, p)| RankedFile { path: (*p).into(), score: -(i as f64), features: BTreeMap::new() })
                .collect()
        };
        let records = [
            ranking(&task("x-1", "x"), candidates(&["g.py", "a.py"])),
            ranking(&task("x-2", "x"), candidates(&["a.py", "b.py", "c.py", "g.py"])),
            ranking(&task("y-1", "y"), candidates(&["a.py", "g.py"])),
            ranking(&task("y-2", "y"), candidates(&["a.py"])),
        ];
        let ranks: Vec<Option<usize>> = records.iter().map(|r| r.gold_rank).collect();
        assert_eq!(ranks, [Some(1), Some(4), Some(2), None]);
        assert_eq!(records[0].gold, ["g.py"]);
        let table = ranking_markdown(&records);
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(
            rows,
            ["| all | 4 | 3 | 1 | 2 | 2.3 |", "| x | 2 | 2 | 1 | 1 | 2.5 |", "| y | 2 | 1 | 0 | 1 | 2.0 |"]
        );
    }
}
