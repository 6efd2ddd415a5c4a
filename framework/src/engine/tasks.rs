//! What the engine trains and evaluates on: tasks with a repository, a commit,
//! an issue text and targets, split into train and held-out.
//!
//! [`TaskSource`] is the interface; [`TaskSet`] is the one implementation the
//! shipped sources convert into (synthetic repositories, commit-mined tasks,
//! SWE-bench JSONL), so a study never cares where its tasks came from.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rewardlab_rewards::LineRange;
use rewardlab_rewards::rollout::Selection;
use rewardlab_rewards::tasks::{RepoRef, Task};

use crate::synthetic::SyntheticSource;

/// One task as the engine needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineTask {
    /// Stable id: the rollout's `group`.
    pub id: String,
    /// What [`rewardlab_sandbox::Sandbox::tree`] takes: a local path or URL
    /// (cloned into the store on first use) or a store name (`owner__name`).
    pub repo: String,
    /// The commit searched (any revision the repository resolves).
    pub commit: String,
    /// The issue text.
    pub prompt: String,
    /// The rollout's `target`.
    pub target: Selection,
}

/// A set of tasks and its split.
pub trait TaskSource: Send + Sync {
    /// Every task, in a fixed order the splits index into.
    fn tasks(&self) -> &[EngineTask];
    /// Indices into [`TaskSource::tasks`] used for training.
    fn train(&self) -> &[usize];
    /// Indices into [`TaskSource::tasks`] used for held-out evaluation.
    fn held_out(&self) -> &[usize];
}

/// Tasks with a train/held-out split.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskSet {
    /// Every task of both splits.
    pub tasks: Vec<EngineTask>,
    /// Indices into `tasks` of the training split.
    pub train: Vec<usize>,
    /// Indices into `tasks` of the held-out split.
    pub held_out: Vec<usize>,
}

/// A task source that cannot be turned into engine tasks.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskSetError {
    #[error("task `{task}`: line range {text:?} is malformed: {reason}")]
    /// A task's target line range does not parse.
    LineRange {
        /// The task's id.
        task: String,
        /// The range as written.
        text: String,
        /// Why it does not parse.
        reason: String,
    },
    #[error("task index {index} of the {split} split is out of range ({len} tasks)")]
    /// A split names a task index past the end of the task list.
    Index {
        /// The index.
        index: usize,
        /// `train` or `held-out`.
        split: &'static str,
        /// Tasks in the list.
        len: usize,
    },
    #[error("held_out_fraction must be in [0, 1], got {0}")]
    /// The held-out fraction (given) is outside [0, 1].
    Fraction(f64),
}

impl TaskSource for TaskSet {
    fn tasks(&self) -> &[EngineTask] {
        &self.tasks
    }
    fn train(&self) -> &[usize] {
        &self.train
    }
    fn held_out(&self) -> &[usize] {
        &self.held_out
    }
}

impl TaskSet {
    /// Checks that the split indexes existing tasks.
    pub fn validate(&self) -> Result<(), TaskSetError> {
        for (split, indices) in [("train", &self.train), ("held-out", &self.held_out)] {
            if let Some(&index) = indices.iter().find(|&&i| i >= self.tasks.len()) {
                return Err(TaskSetError::Index { index, split, len: self.tasks.len() });
            }
        }
        Ok(())
    }

    /// The tasks of a generated synthetic repository, with its split. The
    /// target files are the patch's files plus auxiliary files weighing at
    /// least `aux_min_weight` (seed 000 uses 0.15; `f64::INFINITY` keeps the
    /// patch only); line ranges and functions are the patch's.
    pub fn from_synthetic(source: &SyntheticSource, aux_min_weight: f64) -> Result<TaskSet, TaskSetError> {
        let repo = source.repo_path.to_string_lossy().into_owned();
        let tasks = source
            .tasks
            .iter()
            .map(|t| {
                let line_ranges = t
                    .targets
                    .line_ranges
                    .iter()
                    .map(|text| {
                        LineRange::parse(text).map_err(|e| TaskSetError::LineRange {
                            task: t.id.clone(),
                            text: text.clone(),
                            reason: e.to_string(),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(EngineTask {
                    id: t.id.clone(),
                    repo: repo.clone(),
                    commit: t.base_commit.clone(),
                    prompt: t.prompt.clone(),
                    target: Selection {
                        files: Some(t.relevant_files(aux_min_weight)),
                        line_ranges: Some(line_ranges),
                        functions: Some(t.targets.functions.clone()),
                    },
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let set = TaskSet { tasks, train: source.train.clone(), held_out: source.held_out.clone() };
        set.validate()?;
        Ok(set)
    }

    /// Tasks from SWE-bench JSONL or mined commits, split by a seeded shuffle:
    /// the first `held_out_fraction` (rounded) are held out. Targets as in
    /// [`Task::target_selection`] with `aux_min_weight`.
    pub fn from_tasks(
        tasks: &[Task],
        held_out_fraction: f64,
        seed: u64,
        aux_min_weight: f64,
    ) -> Result<TaskSet, TaskSetError> {
        if !(0.0..=1.0).contains(&held_out_fraction) {
            return Err(TaskSetError::Fraction(held_out_fraction));
        }
        let engine_tasks = tasks
            .iter()
            .map(|t| EngineTask {
                id: t.id.clone(),
                repo: match &t.repo {
                    RepoRef::Name(name) => name.clone(),
                    RepoRef::Path(path) => path.to_string_lossy().into_owned(),
                },
                commit: t.base_commit.clone(),
                prompt: t.prompt.clone(),
                target: t.target_selection(aux_min_weight),
            })
            .collect();
        let mut order: Vec<usize> = (0..tasks.len()).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let held = (tasks.len() as f64 * held_out_fraction).round() as usize;
        let mut held_out = order[..held].to_vec();
        let mut train = order[held..].to_vec();
        held_out.sort_unstable();
        train.sort_unstable();
        Ok(TaskSet { tasks: engine_tasks, train, held_out })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rewardlab_rewards::Targets;

    fn task(i: usize) -> Task {
        Task {
            id: format!("t{i}"),
            repo: RepoRef::Name("o/r".into()),
            base_commit: "abc".into(),
            prompt: format!("issue {i}"),
            targets: Targets {
                files: vec![format!("f{i}.py")],
                line_ranges: vec![LineRange::new(format!("f{i}.py"), 1, 2)],
                functions: None,
            },
            auxiliary: Vec::new(),
        }
    }

    #[test]
    fn from_tasks_splits_deterministically_and_completely() {
        let tasks: Vec<Task> = (0..10).map(task).collect();
        let a = TaskSet::from_tasks(&tasks, 0.3, 5, f64::INFINITY).expect("valid");
        let b = TaskSet::from_tasks(&tasks, 0.3, 5, f64::INFINITY).expect("valid");
        assert_eq!(a, b);
        assert_eq!((a.train.len(), a.held_out.len()), (7, 3));
        let mut all: Vec<usize> = a.train.iter().chain(&a.held_out).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(a.tasks[4].repo, "o/r");
        assert_eq!(a.tasks[4].target.files.as_deref(), Some(&["f4.py".to_string()][..]));
        assert!(TaskSet::from_tasks(&tasks, 1.5, 5, 0.0).is_err());
        let broken = TaskSet { train: vec![10], ..a };
        assert!(matches!(broken.validate(), Err(TaskSetError::Index { index: 10, .. })));
    }
}
