//! Task sources: retrieval tasks (an issue text at a base commit, with target
//! files, line ranges and functions) read from SWE-bench-style JSONL or mined
//! from the history of a local git repository (commits and merged pull
//! requests, with filters and a cache). Shared by the GRPO engine and the
//! CATM pipeline.

use serde::{Deserialize, Serialize};

use crate::metrics::LineRange;
use crate::rollout::Selection;

pub mod cache;
pub mod commits;
pub mod filters;
pub mod leakage;
pub mod swebench;

pub use cache::{CacheKey, mine_cached};
pub use commits::{
    CommitError, CommitOptions, MineStats, Mined, MinedTask, TaskKind, TaskKinds, mine, mine_commits, resolve_range,
};
pub use filters::parse_time;
pub use leakage::{EvalCommit, LeakageError, TrainChange, find_leaks};
pub use swebench::{SwebenchInstance, load_swebench};

/// One retrieval task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// `instance_id` for SWE-bench, `<repo dir>@<short sha>` for mined commits and pull requests.
    pub id: String,
    /// The repository the task's commit belongs to.
    pub repo: RepoRef,
    /// The commit the retriever searches (full hex id).
    pub base_commit: String,
    /// The issue text the policy sees.
    pub prompt: String,
    /// The files, line ranges and functions a correct answer names.
    pub targets: Targets,
    /// Extra relevant files with weights (CATM labels); empty when none were mined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auxiliary: Vec<WeightedFile>,
}

/// Where a task's repository lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepoRef {
    /// A name such as `psf/requests`, resolved by the caller's repo store.
    Name(String),
    /// A local repository.
    Path(std::path::PathBuf),
}

/// What a correct answer names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    /// Repository-relative paths of the files the fix changes (a renamed file's pre-image path).
    pub files: Vec<String>,
    /// Pre-image line ranges of the fix's changes (a file added by the fix has none).
    pub line_ranges: Vec<LineRange>,
    /// `path::Qualified.name`; `None` when the source has no function labels
    /// (mined commits), so `Fb(func)` on such tasks is an error, not a zero.
    pub functions: Option<Vec<String>>,
}

/// A file with a relevance weight (CATM's normalised `w`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightedFile {
    /// Repository-relative path of the file.
    pub path: String,
    /// The file's relevance, non-negative (CATM weights have mean 1 over a run's relevant files);
    /// [`Task::target_selection`] keeps the file when this is at least its threshold.
    pub weight: f64,
}

impl Task {
    /// The rollout `target` of this task: the target files plus every
    /// auxiliary file whose weight is at least `min_weight` (CATM's
    /// `G = G_patch ∪ {f : w_f ≥ 0.15}`; pass `f64::INFINITY` for patch files only).
    pub fn target_selection(&self, min_weight: f64) -> Selection {
        let mut files = self.targets.files.clone();
        for aux in &self.auxiliary {
            if aux.weight >= min_weight && !files.contains(&aux.path) {
                files.push(aux.path.clone());
            }
        }
        Selection {
            files: Some(files),
            line_ranges: Some(self.targets.line_ranges.clone()),
            functions: self.targets.functions.clone(),
        }
    }
}
