//! The leakage rule between training tasks and evaluation instances of the
//! same repository.
//!
//! An evaluation instance asks for the files its gold patch changes at its
//! base commit `B`. A training task *leaks* it when the training task's change
//! happened after `B` (its commit descends from `B`) and touches any file of
//! that gold patch: training on it would show the policy the files the fix
//! lands in (often the fix itself, which is the commit right after `B`).
//! Changes before `B`, or to other files, are history the evaluation may
//! legitimately rest on.
//!
//! "After `B`" is graph ancestry, not time: a [`TrainChange`] names the
//! commit its change produced and whether that commit itself counts
//! (`inclusive`). A mined commit `C` changed its parent's tree, so it descends
//! from `B` when `B` is a proper ancestor of `C` (`inclusive = false`); a
//! SWE-bench training instance at base `B2` is fixed by a later, unknown
//! commit, so it descends from `B` when `B` is an ancestor of `B2` or `B2`
//! itself (`inclusive = true`).
//!
//! [`find_leaks`] first pairs tasks and instances by file overlap (cheap) and
//! walks history only when a pair exists: one memoised walk over the ancestry
//! of the paired tasks' commits computes, for every commit, which evaluation
//! bases it descends from (a bit set over the instances), so each commit is
//! read once whatever the number of pairs.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use gix::ObjectId;

/// One evaluation instance: its base commit and the files its gold patch changes.
#[derive(Clone, Copy, Debug)]
pub struct EvalCommit<'a> {
    /// The instance's id, for reports.
    pub id: &'a str,
    /// The base commit (any revision the repository resolves, usually a full hex id).
    pub base: &'a str,
    /// The gold patch's files.
    pub files: &'a [String],
}

/// One training task's change: the commit it produced and the files it changes.
#[derive(Clone, Copy, Debug)]
pub struct TrainChange<'a> {
    /// The commit (see the module docs for which commit that is).
    pub commit: &'a str,
    /// Whether `commit` itself counts as descending from an evaluation base
    /// equal to it (`true` for base commits, `false` for change commits).
    pub inclusive: bool,
    /// The files the change touches (the task's target files).
    pub files: &'a [String],
}

/// Why the rule could not be applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeakageError {
    /// The repository does not open.
    #[error("opening git repository {path}")]
    Open {
        /// The repository's path.
        path: PathBuf,
        /// gix's error.
        #[source]
        source: gix::Error,
    },
    /// A commit does not resolve or cannot be read.
    #[error(
        "{what} `{commit}` ({owner}) is not a readable commit of {path}; fetch it into that clone \
         (`git -C {path} fetch origin {commit}`) or leave {owner} out"
    )]
    Commit {
        /// The repository's path.
        path: PathBuf,
        /// `evaluation base` or `training commit`.
        what: &'static str,
        /// The revision as given.
        commit: String,
        /// The instance or task it belongs to.
        owner: String,
        /// gix's error.
        #[source]
        source: gix::Error,
    },
}

/// For each of `train`, the indices into `eval` of the instances it leaks
/// (empty for most tasks), by the rule of the module docs. All commits are
/// in the repository at `repo_path`.
pub fn find_leaks(
    repo_path: &Path,
    eval: &[EvalCommit<'_>],
    train: &[TrainChange<'_>],
) -> Result<Vec<Vec<usize>>, LeakageError> {
    let mut leaks = vec![Vec::new(); train.len()];
    // (train, eval) pairs that share a file: the only ones ancestry can condemn.
    let eval_files: Vec<BTreeSet<&str>> = eval.iter().map(|e| e.files.iter().map(String::as_str).collect()).collect();
    let pairs: Vec<(usize, usize)> = train
        .iter()
        .enumerate()
        .flat_map(|(t, change)| {
            let eval_files = &eval_files;
            (0..eval.len())
                .filter_map(move |e| change.files.iter().any(|f| eval_files[e].contains(f.as_str())).then_some((t, e)))
        })
        .collect();
    if pairs.is_empty() {
        return Ok(leaks);
    }
    let repo = gix::open(repo_path).map_err(|source| LeakageError::Open { path: repo_path.to_path_buf(), source })?;
    let resolve = |what: &'static str, commit: &str, owner: &str| -> Result<ObjectId, LeakageError> {
        let error = |source: gix::Error| LeakageError::Commit {
            path: repo_path.to_path_buf(),
            what,
            commit: commit.to_owned(),
            owner: owner.to_owned(),
            source,
        };
        let id = super::commits::resolve_rev(&repo, commit).map_err(error)?;
        let object = repo.find_object(id).map_err(error)?;
        Ok(object.peel_to_commit().map_err(error)?.id)
    };
    let mut bases: HashMap<ObjectId, Vec<usize>> = HashMap::new();
    for (e, instance) in eval.iter().enumerate() {
        bases.entry(resolve("evaluation base", instance.base, instance.id)?).or_default().push(e);
    }
    let mut walk =
        Ancestry { repo: &repo, repo_path, bases: &bases, words: eval.len().div_ceil(64), memo: HashMap::new() };
    let mut reached: HashMap<usize, Vec<u64>> = HashMap::new();
    for &(t, e) in &pairs {
        let bits = match reached.entry(t) {
            std::collections::hash_map::Entry::Occupied(bits) => bits.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let change = &train[t];
                let id = resolve("training commit", change.commit, change.commit)?;
                slot.insert(walk.descends_from(id, change.inclusive)?)
            }
        };
        if bits[e / 64] & (1 << (e % 64)) != 0 {
            leaks[t].push(e);
        }
    }
    Ok(leaks)
}

/// The memoised walk: for each commit, the evaluation bases among its
/// ancestors (itself included), as a bit set over the instances.
struct Ancestry<'a> {
    repo: &'a gix::Repository,
    repo_path: &'a Path,
    bases: &'a HashMap<ObjectId, Vec<usize>>,
    words: usize,
    memo: HashMap<ObjectId, Vec<u64>>,
}

impl Ancestry<'_> {
    /// The instances whose base `id` descends from: every base among its
    /// ancestors, and `id` itself when `inclusive`.
    fn descends_from(&mut self, id: ObjectId, inclusive: bool) -> Result<Vec<u64>, LeakageError> {
        if inclusive {
            self.closure(id)?;
            return Ok(self.memo[&id].clone());
        }
        let mut bits = vec![0; self.words];
        for parent in self.parents(id)? {
            self.closure(parent)?;
            or_into(&mut bits, &self.memo[&parent]);
        }
        Ok(bits)
    }

    /// Fills `memo` for `id` and all its ancestors, iteratively (histories are
    /// far deeper than the stack).
    fn closure(&mut self, id: ObjectId) -> Result<(), LeakageError> {
        // (commit, its parents once read)
        let mut stack: Vec<(ObjectId, Option<Vec<ObjectId>>)> = vec![(id, None)];
        while let Some((commit, parents)) = stack.pop() {
            if self.memo.contains_key(&commit) {
                continue;
            }
            match parents {
                None => {
                    let parents = self.parents(commit)?;
                    let pending: Vec<ObjectId> =
                        parents.iter().copied().filter(|p| !self.memo.contains_key(p)).collect();
                    stack.push((commit, Some(parents)));
                    stack.extend(pending.into_iter().map(|p| (p, None)));
                }
                Some(parents) => {
                    let mut bits = vec![0; self.words];
                    for e in self.bases.get(&commit).into_iter().flatten() {
                        bits[e / 64] |= 1 << (e % 64);
                    }
                    for parent in &parents {
                        or_into(&mut bits, &self.memo[parent]);
                    }
                    self.memo.insert(commit, bits);
                }
            }
        }
        Ok(())
    }

    fn parents(&self, id: ObjectId) -> Result<Vec<ObjectId>, LeakageError> {
        let commit = self.repo.find_commit(id).map_err(|source| LeakageError::Commit {
            path: self.repo_path.to_path_buf(),
            what: "training commit",
            commit: id.to_string(),
            owner: "an ancestor".to_owned(),
            source,
        })?;
        Ok(commit.parent_ids().map(|p| p.detach()).collect())
    }
}

fn or_into(bits: &mut [u64], other: &[u64]) {
    for (b, o) in bits.iter_mut().zip(other) {
        *b |= o;
    }
}
