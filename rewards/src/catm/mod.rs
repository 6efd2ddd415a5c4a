//! CATM (Code Agent Trajectory Mining, seed 000 §2.4 / seed 001): relevance
//! labels from past agents' file reads.
//!
//! 1. [`mine`]: every `str_replace_editor view` of a source file, with the
//!    token length `l(f)` of the assistant message that follows it. Several
//!    trajectories of one instance are merged, keeping each file's longest
//!    post-reasoning.
//! 2. Files with fewer than `min_tokens` (30) reasoning tokens are dropped
//!    (no non-trivial reasoning to judge); the rest go to a [`judge::Judge`]
//!    with the conservative rule.
//! 3. [`weights::catm_weights`] over all RELEVANT files; the label of an
//!    instance is `G = G_patch ∪ {f : w_f ≥ min_weight}` (0.15).
//!
//! Retention is reported two ways: files kept / files mined, and instances
//! with at least one kept file / instances mined (the seed's 47.7% is the
//! share of trajectories that became training samples).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub mod http;
pub mod judge;
pub mod mine;
pub mod weights;

use judge::{JudgeError, JudgeRequest, Verdict};
use mine::{MineOptions, MineStats, MinedRead, Trajectory};

use crate::tasks::SwebenchInstance;

/// Pipeline settings (seed defaults).
#[derive(Clone, Debug)]
pub struct CatmOptions {
    /// Stage-1 options (the roots stripped from absolute paths).
    pub mine: MineOptions,
    /// Files whose post-reasoning has fewer proxy tokens than this are not judged (30).
    pub min_tokens: usize,
    /// The weight a RELEVANT file needs to join an instance's label `G` (0.15).
    pub min_weight: f64,
}

impl Default for CatmOptions {
    fn default() -> CatmOptions {
        CatmOptions { mine: MineOptions::default(), min_tokens: 30, min_weight: 0.15 }
    }
}

/// One instance's label, a line of `labels.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Label {
    /// The SWE-bench instance labelled.
    pub instance_id: String,
    /// `G_patch`: the gold patch's files.
    pub patch_files: Vec<String>,
    /// Every RELEVANT mined file with its length and weight (kept or not).
    pub catm: Vec<LabelFile>,
    /// `G`: patch files, then CATM files with `weight >= min_weight`.
    pub files: Vec<String>,
}

/// One RELEVANT mined file of a [`Label`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelFile {
    /// The file, repository-relative.
    pub path: String,
    /// `l(f)`: proxy tokens of its longest post-reasoning.
    pub tokens: usize,
    /// Its CATM weight; weights have mean 1 over all RELEVANT files of the run.
    pub weight: f64,
}

impl Label {
    /// Attaches this label's mined files to a task as weighted auxiliary
    /// files (patch files are already targets); the task's target selection
    /// then applies `w >= min_weight` ([`crate::tasks::Task::target_selection`]).
    pub fn attach_to(&self, task: &mut crate::tasks::Task) {
        task.auxiliary = self
            .catm
            .iter()
            .filter(|f| !task.targets.files.contains(&f.path))
            .map(|f| crate::tasks::WeightedFile { path: f.path.clone(), weight: f.weight })
            .collect();
    }
}

/// What each stage kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Trajectory records read.
    pub trajectories: usize,
    /// Trajectories whose instance is not in the instance file (skipped).
    pub unknown_instance: usize,
    /// Instances with at least one trajectory.
    pub instances: usize,
    /// Stage 1's counts, summed over trajectories.
    pub mine: MineStats,
    /// Distinct (instance, file) pairs after stage 1.
    pub files_mined: usize,
    /// Mined files dropped for reasoning shorter than `min_tokens`.
    pub too_short: usize,
    /// Files sent to the judge.
    pub judged: usize,
    /// Files the judge classified NOT_RELEVANT.
    pub not_relevant: usize,
    /// Requests that failed after retries (counted RELEVANT).
    pub judge_errors: usize,
    /// Files with `w >= min_weight`.
    pub kept: usize,
    /// Instances with at least one kept file.
    pub instances_with_catm: usize,
    /// The first judge error, to show the user.
    pub first_error: Option<String>,
}

impl Summary {
    /// Files kept / files mined, in [0, 1]; 0 when nothing was mined.
    pub fn file_retention(&self) -> f64 {
        ratio(self.kept, self.files_mined)
    }

    /// Instances with a kept file / instances mined, in [0, 1]; 0 when none was mined.
    pub fn instance_retention(&self) -> f64 {
        ratio(self.instances_with_catm, self.instances)
    }

    /// A short report for humans.
    pub fn render(&self) -> String {
        let mut s = format!(
            "trajectories: {} ({} with no instance, skipped)\n\
             view calls: {}; dropped: {} outside the repo, {} directories, {} docs, {} extensionless\n\
             files mined: {} over {} instances\n\
             reasoning < min tokens: {}; judged: {}; NOT_RELEVANT: {}; judge errors (counted RELEVANT): {}\n\
             kept (w >= min weight): {}\n\
             retention: {:.1}% of mined files, {:.1}% of instances have a CATM file (seed: 47.7%)\n",
            self.trajectories,
            self.unknown_instance,
            self.mine.view_calls,
            self.mine.dropped_outside_repo,
            self.mine.dropped_directory,
            self.mine.dropped_doc,
            self.mine.dropped_extensionless,
            self.files_mined,
            self.instances,
            self.too_short,
            self.judged,
            self.not_relevant,
            self.judge_errors,
            self.kept,
            100.0 * self.file_retention(),
            100.0 * self.instance_retention(),
        );
        if let Some(e) = &self.first_error {
            s.push_str(&format!("first judge error: {e}\n"));
        }
        s
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Stage 1 done: the judge requests, and what is needed to finish.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// One request per file to judge, grouped by instance.
    pub requests: Vec<JudgeRequest>,
    tokens: Vec<usize>,
    /// Instances in instance-file order: (id, patch files).
    instances: Vec<(String, Vec<String>)>,
    summary: Summary,
}

/// A CATM failure that stops the run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatmError {
    #[error("instance `{id}`: its patch does not parse: {message}")]
    /// An instance's gold patch is not a unified diff [`crate::diff::patch_targets`] can read.
    Patch {
        /// The instance's id.
        id: String,
        /// Why the patch did not parse.
        message: String,
    },
}

/// Stage 1 and the length filter: mines the trajectories and builds the judge requests.
pub fn prepare(
    trajectories: &[Trajectory],
    instances: &[SwebenchInstance],
    options: &CatmOptions,
) -> Result<Prepared, CatmError> {
    let mut summary = Summary { trajectories: trajectories.len(), ..Summary::default() };
    let index: HashMap<&str, usize> = instances.iter().enumerate().map(|(i, x)| (x.instance_id.as_str(), i)).collect();
    let mut mined: Vec<Option<Vec<MinedRead>>> = vec![None; instances.len()];
    for t in trajectories {
        let Some(&i) = index.get(t.instance_id.as_str()) else {
            summary.unknown_instance += 1;
            continue;
        };
        let (reads, stats) = mine::mine(t, &options.mine);
        summary.mine.add(&stats);
        let slot = mined[i].get_or_insert_with(Vec::new);
        for r in reads {
            match slot.iter_mut().find(|p| p.path == r.path) {
                Some(prev) if prev.tokens >= r.tokens => {}
                Some(prev) => *prev = r,
                None => slot.push(r),
            }
        }
    }
    let mut requests = Vec::new();
    let mut tokens = Vec::new();
    let mut kept_instances = Vec::new();
    for (inst, reads) in instances.iter().zip(mined) {
        let Some(reads) = reads else {
            continue;
        };
        summary.instances += 1;
        summary.files_mined += reads.len();
        let patch = crate::diff::patch_targets(&inst.patch)
            .map_err(|e| CatmError::Patch { id: inst.instance_id.clone(), message: e.to_string() })?;
        for r in reads {
            if r.tokens < options.min_tokens {
                summary.too_short += 1;
                continue;
            }
            tokens.push(r.tokens);
            requests.push(JudgeRequest {
                instance_id: inst.instance_id.clone(),
                issue: Some(inst.problem_statement.clone()),
                path: r.path,
                reasoning: r.reasoning,
            });
        }
        kept_instances.push((inst.instance_id.clone(), patch.files));
    }
    summary.judged = requests.len();
    Ok(Prepared { requests, tokens, instances: kept_instances, summary })
}

/// Stages 2 (verdicts given) and 3: weights and labels.
pub fn finish(
    prepared: Prepared,
    verdicts: Vec<Result<Verdict, JudgeError>>,
    options: &CatmOptions,
) -> (Vec<Label>, Summary) {
    assert_eq!(verdicts.len(), prepared.requests.len(), "one verdict per judge request");
    let mut summary = prepared.summary;
    let mut relevant: Vec<usize> = Vec::new();
    for (i, v) in verdicts.into_iter().enumerate() {
        match v {
            Ok(Verdict::NotRelevant) => summary.not_relevant += 1,
            Ok(Verdict::Relevant) => relevant.push(i),
            Err(e) => {
                summary.judge_errors += 1;
                summary.first_error.get_or_insert_with(|| e.to_string());
                relevant.push(i);
            }
        }
    }
    let lengths: Vec<f64> = relevant.iter().map(|&i| prepared.tokens[i] as f64).collect();
    let w = weights::catm_weights(&lengths);
    let mut by_instance: HashMap<&str, Vec<LabelFile>> = HashMap::new();
    for (k, &i) in relevant.iter().enumerate() {
        let req = &prepared.requests[i];
        by_instance.entry(req.instance_id.as_str()).or_default().push(LabelFile {
            path: req.path.clone(),
            tokens: prepared.tokens[i],
            weight: w[k],
        });
    }
    let mut labels = Vec::with_capacity(prepared.instances.len());
    for (id, patch_files) in &prepared.instances {
        let catm = by_instance.remove(id.as_str()).unwrap_or_default();
        let mut files = patch_files.clone();
        let mut any = false;
        for f in &catm {
            if f.weight >= options.min_weight {
                summary.kept += 1;
                any = true;
                if !files.contains(&f.path) {
                    files.push(f.path.clone());
                }
            }
        }
        summary.instances_with_catm += usize::from(any);
        labels.push(Label { instance_id: id.clone(), patch_files: patch_files.clone(), catm, files });
    }
    (labels, summary)
}

/// The whole pipeline with one judge, `parallelism` requests in flight.
pub fn run(
    trajectories: &[Trajectory],
    instances: &[SwebenchInstance],
    judge: &dyn judge::Judge,
    parallelism: usize,
    options: &CatmOptions,
) -> Result<(Vec<Label>, Summary), CatmError> {
    let prepared = prepare(trajectories, instances, options)?;
    let verdicts = judge::judge_all(judge, &prepared.requests, parallelism, &|| {});
    Ok(finish(prepared, verdicts, options))
}
