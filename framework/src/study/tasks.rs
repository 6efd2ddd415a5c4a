//! A study's tasks and the repository store their rollouts search, built
//! from its training sources (`[tasks]` or `[[tasks]]`) and its evaluation
//! source (`[eval]`), before any run starts.
//!
//! **Sources.**
//! - **synthetic**: the repository is regenerated each time (it is
//!   deterministic in its seed and takes well under a second) into a fresh
//!   directory that then replaces `<study>/data/repo.git` unless an identical
//!   one is there ([`publish::publish_dir`]: concurrent runners keep theirs),
//!   so a half-written one from a killed run is never reused.
//! - **swebench**: JSONL instances name repositories `owner/name`, whose bare
//!   clones `owner__name.git` sit in the source's `repos` directory.
//! - **commits**: tasks mined from a repository's history (commits, merged
//!   pull requests, with the table's filters), cached under
//!   `<study>/cache/mined/` per (repository, resolved tip, filters), so a
//!   rerun or another Slurm array task reads them instead of mining again.
//!
//! **Split.** Without `[eval]`, each source holds out its own
//! `held_out_fraction` (a single source splits exactly as it always did).
//! With `[eval]`, every training task trains and every evaluation task is
//! held out: held-out evaluation and the baselines then measure the
//! evaluation source alone.
//!
//! **No leakage.** With `[eval]`, a training task whose change descends from
//! an evaluation instance's base commit in the same repository (the same
//! canonical git directory) and touches a file of that instance's gold patch
//! is dropped before training ([`rewardlab_rewards::tasks::leakage`]); the
//! [`TaskReport`] says how many, for which instances.
//!
//! **Store.** Every study has one store, `<study>/store`. A bare repository
//! (a SWE-bench mirror, a bare commits source) is linked into it by a
//! symbolic link under its store name, so it is read in place and nothing is
//! copied; a repository with a working tree is cloned bare on first use
//! ([`RepoStore::repo_at`]). Tasks name their repository by store name.
//!
//! Before training, every task's repository is opened and its commit
//! resolved, so a missing clone or commit is one clear error up front, naming
//! the repository, the commit and the fix, rather than a failure in every
//! run's first step.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rewardlab_rewards::tasks::{
    CommitError, CommitOptions, EvalCommit, LeakageError, MineStats, RepoRef, Task, TaskKind, TrainChange, find_leaks,
    load_swebench, mine_cached,
};
use rewardlab_sandbox::{RepoStore, StoreOptions, component_store_name, local_mirror_name, mirror_name};

use super::publish::{self, PublishError};
use super::spec::{CommitsSpec, SandboxSpec, TaskSpec};
use super::{Study, StudyTasks};
use crate::engine::tasks::TaskSetError;
use crate::engine::{EngineTask, TaskSet};
use crate::synthetic;

/// Auxiliary files weighing at least this much count as targets (seed 000's threshold).
pub const AUX_MIN_WEIGHT: f64 = 0.15;

/// Where mined tasks are cached, under the study's results directory.
pub const MINED_CACHE_DIR: &str = "cache/mined";

/// Why a study's tasks could not be prepared. Every message names the
/// source, the repository or commit at fault and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// A file-system operation, described by `what`.
    #[error("{what}")]
    Io {
        /// What was being done (`creating /x`).
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The repository store failed (opening, cloning, resolving).
    #[error("{what}")]
    Store {
        /// What was being done.
        what: String,
        /// The sandbox's error.
        #[source]
        source: Box<rewardlab_sandbox::Error>,
    },
    /// Generating the synthetic repository failed.
    #[error("generating the synthetic tasks into {}", path.display())]
    Synthetic {
        /// The fresh directory being generated.
        path: PathBuf,
        /// The generator's error.
        #[source]
        source: synthetic::Error,
    },
    /// Publishing the synthetic repository failed.
    #[error("publishing the synthetic repository")]
    Publish(#[source] PublishError),
    /// A SWE-bench file holds bad lines or nothing.
    #[error("{source_name}: {message}")]
    Swebench {
        /// `tasks`, `tasks[1]` or `eval`.
        source_name: String,
        /// The file's problems, one per line.
        message: String,
    },
    /// Repositories a SWE-bench file names are missing.
    #[error("{source_name}: {count} repositor(ies) of {} are missing from {}:\n  {}", jsonl.display(), repos.display(), lines.join("\n  "))]
    MissingMirrors {
        /// `tasks`, `tasks[1]` or `eval`.
        source_name: String,
        /// The JSONL file.
        jsonl: PathBuf,
        /// The `repos` directory.
        repos: PathBuf,
        /// How many are missing.
        count: usize,
        /// One line per repository, with the command that makes its clone.
        lines: Vec<String>,
    },
    /// Mining a commits source failed (no usable commits among them).
    #[error("{source_name}: mining {}", repo.display())]
    Mining {
        /// `tasks`, `tasks[1]` or `eval`.
        source_name: String,
        /// The repository.
        repo: PathBuf,
        /// The miner's error (it names the range and what each filter removed).
        #[source]
        source: Box<CommitError>,
    },
    /// The leakage rule could not read a repository's history.
    #[error("applying the leakage rule in {}", repo.display())]
    Leakage {
        /// The repository.
        repo: PathBuf,
        /// The rule's error (it names the commit and the instance).
        #[source]
        source: Box<LeakageError>,
    },
    /// Two different repositories would share a store name.
    #[error(
        "{} and {} would both be the store's `{name}`; rename one directory (store names come from \
         the last two path components)",
        first.display(),
        second.display()
    )]
    NameClash {
        /// The store name.
        name: String,
        /// The repository that took it first.
        first: PathBuf,
        /// The other repository.
        second: PathBuf,
    },
    /// A task's commit is not in its repository.
    #[error(
        "task `{task}`: commit {commit} is not in {} (repository `{repo}`); fetch it into that clone \
         (`git -C {} fetch origin {commit}`) or remove the clone to refresh it",
        path.display(),
        path.display()
    )]
    MissingCommit {
        /// The task's id.
        task: String,
        /// The repository's store name.
        repo: String,
        /// The commit.
        commit: String,
        /// The git directory searched.
        path: PathBuf,
        /// The sandbox's error.
        #[source]
        source: Box<rewardlab_sandbox::Error>,
    },
    /// The task list of a source could not become engine tasks.
    #[error("{source_name}: building the task set")]
    TaskSet {
        /// `tasks`, `tasks[1]` or `eval`.
        source_name: String,
        /// Why.
        #[source]
        source: TaskSetError,
    },
    /// Nothing is left to train on.
    #[error("no training task is left: {why}")]
    NoTraining {
        /// What removed them and how to get some back.
        why: String,
    },
}

fn io(what: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> TaskError {
    move |source| TaskError::Io { what: what(), source }
}

/// What preparing the tasks found: counts per source, mining statistics and
/// the training tasks the leakage rule dropped. `study check` prints it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskReport {
    /// The training sources, in study order.
    pub sources: Vec<SourceReport>,
    /// The evaluation source, when the study has one.
    pub eval: Option<SourceReport>,
    /// Per evaluation instance that leaked, the ids of the training tasks dropped for it.
    pub leaks: BTreeMap<String, Vec<String>>,
    /// Training tasks dropped by the leakage rule (a task leaking several instances counts once).
    pub dropped: usize,
    /// Training tasks after the rule.
    pub train: usize,
    /// Held-out tasks.
    pub held_out: usize,
    /// Held-out tasks per repository (store name).
    pub held_out_by_repo: BTreeMap<String, usize>,
}

/// One source's part of a [`TaskReport`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceReport {
    /// `tasks`, `tasks[1]` or `eval`.
    pub name: String,
    /// What it is (`commits of /m/psf__requests.git`).
    pub describe: String,
    /// Its tasks, before any split or leakage filter.
    pub tasks: usize,
    /// Mined plain commits and pull requests (commits sources only).
    pub commits: usize,
    /// Mined pull requests (commits sources only).
    pub pull_requests: usize,
    /// Mining statistics (commits sources only).
    pub mining: Option<MineStats>,
    /// Seconds mining took (0 when read from the cache).
    pub mining_seconds: f64,
}

impl TaskReport {
    /// The report as `study check` prints it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |s: &SourceReport| {
            let mut text = format!("  {:<9} {:>6} task(s)  {}", s.name, s.tasks, s.describe);
            if let Some(stats) = &s.mining {
                if stats.from_cache {
                    text.push_str(" (from the cache)");
                } else {
                    let rate = if s.mining_seconds > 0.0 { stats.walked as f64 / s.mining_seconds } else { 0.0 };
                    text.push_str(&format!(
                        " ({} commits walked in {:.1} s, {rate:.0} commits/s)",
                        stats.walked, s.mining_seconds
                    ));
                }
                text.push_str(&format!(": {} commit(s), {} pull request(s)", s.commits, s.pull_requests));
                if stats.missing_objects > 0 {
                    text.push_str(&format!(
                        "; {} commit(s) skipped for objects missing from the repository",
                        stats.missing_objects
                    ));
                }
            }
            text + "\n"
        };
        out.push_str("task sources:\n");
        for s in self.sources.iter().chain(&self.eval) {
            out.push_str(&line(s));
        }
        if self.eval.is_some() {
            out.push_str(&format!(
                "leakage: {} training task(s) dropped for {} evaluation instance(s)\n",
                self.dropped,
                self.leaks.len()
            ));
            for (instance, tasks) in &self.leaks {
                let shown: Vec<&str> = tasks.iter().take(3).map(String::as_str).collect();
                let more = if tasks.len() > 3 { format!(", … {} more", tasks.len() - 3) } else { String::new() };
                out.push_str(&format!("  {instance}: {} ({}{more})\n", tasks.len(), shown.join(", ")));
            }
        }
        out.push_str(&format!("{} training task(s), {} held out", self.train, self.held_out));
        let repos: Vec<String> = self.held_out_by_repo.iter().map(|(r, n)| format!("{r} {n}")).collect();
        if repos.len() > 1 {
            out.push_str(&format!(" ({})", repos.join(", ")));
        }
        out.push('\n');
        out
    }
}

/// The prepared tasks and what preparing them found.
#[derive(Debug)]
pub struct PreparedTasks {
    /// What the runner trains on.
    pub tasks: StudyTasks,
    /// Counts, mining statistics, leakage.
    pub report: TaskReport,
}

/// One task with what the leakage rule needs.
struct Sourced {
    task: EngineTask,
    /// The canonical git directory the task's repository is.
    repo_path: PathBuf,
    /// The store name the source would give the repository (the first
    /// source naming a repository names it for all).
    name: String,
    /// The commit whose ancestry decides "after an evaluation base", and
    /// whether it counts itself (see [`TrainChange`]); `None` for synthetic tasks.
    change: Option<(String, bool)>,
    /// The gold patch's files (without auxiliary files).
    gold: Vec<String>,
}

/// A source's tasks and split.
struct Loaded {
    tasks: Vec<Sourced>,
    train: Vec<usize>,
    held_out: Vec<usize>,
    report: SourceReport,
}

/// Builds the study's tasks and opens its store (see the module docs).
pub fn prepare_tasks(study: &Study, study_dir: &Path) -> Result<PreparedTasks, TaskError> {
    let store = open_store(&study_dir.join("store"), study.sandbox.store_options())?;
    let with_eval = study.eval.is_some();
    let name_of = |i: usize| if study.tasks.len() == 1 { "tasks".to_owned() } else { format!("tasks[{i}]") };
    let mut report = TaskReport::default();
    let mut all: Vec<Sourced> = Vec::new();
    let (mut train, mut held_out) = (Vec::new(), Vec::new());
    let mut append = |loaded: Loaded, all: &mut Vec<Sourced>| {
        let offset = all.len();
        train.extend(loaded.train.iter().map(|i| i + offset));
        held_out.extend(loaded.held_out.iter().map(|i| i + offset));
        all.extend(loaded.tasks);
        loaded.report
    };
    for (i, source) in study.tasks.iter().enumerate() {
        let fraction = if with_eval { 0.0 } else { source.held_out_fraction() };
        let loaded = load_source(source, &name_of(i), fraction, study_dir, study.sandbox.skip_missing_blobs)?;
        report.sources.push(append(loaded, &mut all));
    }
    if let Some(eval) = &study.eval {
        let loaded = load_source(eval, "eval", 1.0, study_dir, study.sandbox.skip_missing_blobs)?;
        report.eval = Some(append(loaded, &mut all));
    }
    if with_eval {
        let dropped = leaking(&all, &train, &held_out, &mut report)?;
        train.retain(|i| !dropped.contains(i));
    }
    if train.is_empty() {
        let why = if report.dropped > 0 {
            format!(
                "the leakage rule dropped all {} training task(s) ({} evaluation instance(s) leaked); train on \
                 history before the evaluation instances (e.g. `rev = \"<oldest base commit>\"` or `until = \"<date>\"` \
                 in the commits source) or on other repositories",
                report.dropped,
                report.leaks.len()
            )
        } else {
            format!("the training sources hold {} task(s), {} of them held out", all.len(), held_out.len())
        };
        return Err(TaskError::NoTraining { why });
    }
    let repo_dirs = link_repositories(&mut all, &store)?;
    check_commits(&all, &store)?;
    report.train = train.len();
    report.held_out = held_out.len();
    for &i in &held_out {
        *report.held_out_by_repo.entry(all[i].task.repo.clone()).or_default() += 1;
    }
    let tasks = TaskSet { tasks: all.into_iter().map(|s| s.task).collect(), train, held_out };
    tasks.validate().map_err(|source| TaskError::TaskSet { source_name: "the study".into(), source })?;
    Ok(PreparedTasks { tasks: StudyTasks { tasks: Arc::new(tasks), store: Arc::new(store), repo_dirs }, report })
}

/// Every instance of a SWE-bench-style JSONL as a held-out task (nothing
/// trains), over a store at `store_dir` that links the `repos` mirrors in: what
/// `rewardlab locate` runs a trained policy on. Missing mirrors and commits
/// are errors, as for a study's sources.
pub fn prepare_instances(jsonl: &Path, repos: &Path, store_dir: &Path) -> Result<StudyTasks, TaskError> {
    let store = open_store(store_dir, SandboxSpec::default().store_options())?;
    let source =
        TaskSpec::Swebench { path: jsonl.to_owned(), repos: repos.to_owned(), seed: 0, held_out_fraction: None };
    let loaded = load_source(&source, "instances", 1.0, store_dir, false)?;
    let mut all = loaded.tasks;
    let repo_dirs = link_repositories(&mut all, &store)?;
    check_commits(&all, &store)?;
    let tasks =
        TaskSet { tasks: all.into_iter().map(|s| s.task).collect(), train: Vec::new(), held_out: loaded.held_out };
    Ok(StudyTasks { tasks: Arc::new(tasks), store: Arc::new(store), repo_dirs })
}

/// Opens a study's store with `options` ([`SandboxSpec::store_options`]: the content indexes
/// persisted under `<store>/.index/`).
fn open_store(root: &Path, options: StoreOptions) -> Result<RepoStore, TaskError> {
    RepoStore::open_with(root, options).map_err(|source| TaskError::Store {
        what: format!("opening the store {}", root.display()),
        source: Box::new(source),
    })
}

/// One source's tasks; `skip_missing_objects` (the study's `[sandbox] skip_missing_blobs`) lets
/// a commits source skip the commits whose diff needs an object the repository lacks.
fn load_source(
    source: &TaskSpec,
    name: &str,
    fraction: f64,
    study_dir: &Path,
    skip_missing_objects: bool,
) -> Result<Loaded, TaskError> {
    let set_error = |source| TaskError::TaskSet { source_name: name.to_owned(), source };
    match source {
        TaskSpec::Synthetic { .. } => {
            let mut config = source.synthetic_config().expect("a synthetic source has a config");
            config.held_out_fraction = fraction;
            let (set, repo_path) = synthetic_tasks(&config, study_dir)?;
            let report = SourceReport {
                name: name.to_owned(),
                describe: format!("synthetic (seed {}, {} files)", config.seed, config.files),
                tasks: set.tasks.len(),
                ..SourceReport::default()
            };
            let name = preferred_name(&repo_path)?;
            let tasks = set
                .tasks
                .into_iter()
                .map(|task| {
                    let gold = task.target.files.clone().unwrap_or_default();
                    Sourced { task, repo_path: repo_path.clone(), name: name.clone(), change: None, gold }
                })
                .collect();
            Ok(Loaded { tasks, train: set.train, held_out: set.held_out, report })
        }
        TaskSpec::Swebench { path, repos, seed, .. } => {
            let tasks = swebench_tasks(path, name)?;
            let mirrors = check_mirrors(&tasks, repos, path, name)?;
            let set = TaskSet::from_tasks(&tasks, fraction, *seed, AUX_MIN_WEIGHT).map_err(set_error)?;
            let report = SourceReport {
                name: name.to_owned(),
                describe: format!("swebench {}", path.display()),
                tasks: tasks.len(),
                ..SourceReport::default()
            };
            let sourced = set
                .tasks
                .into_iter()
                .zip(&tasks)
                .map(|(task, t)| {
                    let (name, repo_path) = mirrors[&task.repo].clone();
                    let (change, gold) = (Some((t.base_commit.clone(), true)), t.targets.files.clone());
                    Sourced { change, gold, repo_path, name, task }
                })
                .collect();
            Ok(Loaded { tasks: sourced, train: set.train, held_out: set.held_out, report })
        }
        TaskSpec::Commits(spec) => commit_source(spec, name, fraction, study_dir, skip_missing_objects),
    }
}

fn commit_source(
    spec: &CommitsSpec,
    name: &str,
    fraction: f64,
    study_dir: &Path,
    skip_missing_objects: bool,
) -> Result<Loaded, TaskError> {
    let repo = fs::canonicalize(&spec.repo)
        .map_err(io(|| format!("{name}: the commits source's repository {}", spec.repo.display())))?;
    let store_name = preferred_name(&spec.repo)?;
    // The dates were checked when the study was loaded.
    let options = spec.options().map_err(|message| TaskError::NoTraining { why: format!("{name}.{message}") })?;
    let options = CommitOptions { skip_missing_objects, ..options };
    let cache = study_dir.join(MINED_CACHE_DIR);
    let mined = mine_cached(&repo, &options, &cache).map_err(|source| TaskError::Mining {
        source_name: name.to_owned(),
        repo: repo.clone(),
        source: Box::new(source),
    })?;
    let tasks: Vec<Task> = mined.tasks.iter().map(|m| m.task.clone()).collect();
    let set = TaskSet::from_tasks(&tasks, fraction, spec.seed, AUX_MIN_WEIGHT)
        .map_err(|source| TaskError::TaskSet { source_name: name.to_owned(), source })?;
    let pull_requests = mined.tasks.iter().filter(|m| m.kind == TaskKind::PullRequest).count();
    let report = SourceReport {
        name: name.to_owned(),
        describe: format!("commits of {} at `{}`", spec.repo.display(), spec.rev),
        tasks: tasks.len(),
        commits: tasks.len() - pull_requests,
        pull_requests,
        mining_seconds: mined.seconds,
        mining: Some(mined.stats),
    };
    let sourced = set
        .tasks
        .into_iter()
        .zip(&mined.tasks)
        .map(|(mut task, m)| {
            // Mined ids are `<directory>@<short id>`; the store name tells repositories apart.
            if let Some((_, short)) = task.id.split_once('@') {
                task.id = format!("{store_name}@{short}");
            }
            Sourced {
                task,
                repo_path: repo.clone(),
                name: store_name.clone(),
                change: Some((m.commit.clone(), false)),
                gold: m.task.targets.files.clone(),
            }
        })
        .collect();
    Ok(Loaded { tasks: sourced, train: set.train, held_out: set.held_out, report })
}

/// The training indices the leakage rule drops; fills the report's leak lines.
fn leaking(
    all: &[Sourced],
    train: &[usize],
    held_out: &[usize],
    report: &mut TaskReport,
) -> Result<BTreeSet<usize>, TaskError> {
    let repos: BTreeSet<&Path> = held_out.iter().map(|&i| all[i].repo_path.as_path()).collect();
    let mut dropped = BTreeSet::new();
    for repo in repos {
        let eval_ids: Vec<usize> = held_out.iter().copied().filter(|&i| all[i].repo_path == repo).collect();
        let train_ids: Vec<usize> =
            train.iter().copied().filter(|&i| all[i].repo_path == repo && all[i].change.is_some()).collect();
        let eval: Vec<EvalCommit<'_>> = eval_ids
            .iter()
            .map(|&i| EvalCommit { id: &all[i].task.id, base: &all[i].task.commit, files: &all[i].gold })
            .collect();
        let changes: Vec<TrainChange<'_>> = train_ids
            .iter()
            .map(|&i| {
                let (commit, inclusive) = all[i].change.as_ref().expect("filtered on `change`");
                TrainChange { commit, inclusive: *inclusive, files: &all[i].gold }
            })
            .collect();
        let leaks = find_leaks(repo, &eval, &changes)
            .map_err(|source| TaskError::Leakage { repo: repo.to_owned(), source: Box::new(source) })?;
        for (k, instances) in leaks.iter().enumerate() {
            if instances.is_empty() {
                continue;
            }
            dropped.insert(train_ids[k]);
            for &e in instances {
                report.leaks.entry(eval[e].id.to_owned()).or_default().push(all[train_ids[k]].task.id.clone());
            }
        }
    }
    report.dropped = dropped.len();
    Ok(dropped)
}

/// Gives every task's repository its place in the store and the task its
/// store name; returns each store name's git directory (what BM25 indexes).
fn link_repositories(all: &mut [Sourced], store: &RepoStore) -> Result<BTreeMap<String, PathBuf>, TaskError> {
    let mut names: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut taken: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut dirs = BTreeMap::new();
    for sourced in all.iter_mut() {
        let path = sourced.repo_path.clone();
        if let Some(name) = names.get(&path) {
            sourced.task.repo = name.clone();
            continue;
        }
        let name = if is_bare(&path) {
            link_mirror(store, &sourced.name, &path)?;
            sourced.name.clone()
        } else {
            // A repository with a working tree is cloned bare: the sandbox's worktrees must not
            // write into the user's checkout.
            let repo = store.repo_at(&path).map_err(|source| TaskError::Store {
                what: format!("cloning {} into the store", path.display()),
                source: Box::new(source),
            })?;
            repo.name().to_owned()
        };
        if let Some(first) = taken.get(&name)
            && *first != path
        {
            return Err(TaskError::NameClash { name, first: first.clone(), second: path });
        }
        taken.insert(name.clone(), path.clone());
        names.insert(path, name.clone());
        dirs.insert(name.clone(), store.mirror_path(&name));
        sourced.task.repo = name;
    }
    Ok(dirs)
}

/// The store name of the repository at `path` as the study names it: its
/// last two components as they are written (`mirrors/psf__requests.git` is
/// `psf__requests`, even when `mirrors` holds symbolic links), or, when those
/// do not make a store name, [`local_mirror_name`]'s.
fn preferred_name(path: &Path) -> Result<String, TaskError> {
    if let Some(name) = component_store_name(path) {
        return Ok(name);
    }
    local_mirror_name(path)
        .map_err(|source| TaskError::Store { what: format!("naming {}", path.display()), source: Box::new(source) })
}

/// A git directory without a working tree.
fn is_bare(path: &Path) -> bool {
    !path.join(".git").exists() && path.join("HEAD").is_file() && path.join("objects").is_dir()
}

/// Makes `<store>/<name>.git` a symbolic link to `target`, replacing a link
/// elsewhere atomically (concurrent Slurm array tasks link the same mirrors).
fn link_mirror(store: &RepoStore, name: &str, target: &Path) -> Result<(), TaskError> {
    let link = store.mirror_path(name);
    match fs::read_link(&link) {
        Ok(existing) if existing == target => return Ok(()),
        Ok(_) => {}
        Err(_) if link.exists() => {
            // A real directory: a clone an earlier version of the runner made.
            if fs::canonicalize(&link).is_ok_and(|p| p == target) {
                return Ok(());
            }
            return Err(TaskError::Io {
                what: format!(
                    "the store holds a clone {} where a link to {} belongs; remove the clone",
                    link.display(),
                    target.display()
                ),
                source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            });
        }
        Err(_) => {}
    }
    let fresh = store.root().join(format!(".link-{name}-{}", publish::unique_tag()));
    let _ = fs::remove_file(&fresh);
    std::os::unix::fs::symlink(target, &fresh)
        .map_err(io(|| format!("linking {} to {}", fresh.display(), target.display())))?;
    fs::rename(&fresh, &link).map_err(io(|| format!("renaming {} to {}", fresh.display(), link.display())))
}

fn synthetic_tasks(config: &synthetic::SyntheticConfig, study_dir: &Path) -> Result<(TaskSet, PathBuf), TaskError> {
    let data = study_dir.join("data");
    let repo = data.join("repo.git");
    fs::create_dir_all(&data).map_err(io(|| format!("creating {}", data.display())))?;
    // Half-written repositories of killed processes (and our own, from an earlier call).
    // Concurrent runners of the study (Slurm array tasks) generate beside us right now, so
    // only copies older than any generation takes are theirs to lose.
    let fresh = data.join(format!("repo.git.tmp-{}", publish::unique_tag()));
    const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(600);
    for entry in fs::read_dir(&data).map_err(io(|| format!("listing {}", data.display())))? {
        let path = entry.map_err(io(|| format!("listing {}", data.display())))?.path();
        let abandoned = path == fresh
            || fs::metadata(&path)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > ABANDONED_AFTER));
        if abandoned && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("repo.git.tmp-")) {
            fs::remove_dir_all(&path).map_err(io(|| format!("removing {}", path.display())))?;
        }
    }
    let mut source =
        synthetic::generate(config, &fresh).map_err(|source| TaskError::Synthetic { path: fresh.clone(), source })?;
    // Published unless an identical repository is in place, which concurrent runners keep
    // reading; commit ids are a function of the whole content (fixed identities and dates).
    let stamp: String = source.commits.iter().map(|c| format!("{}\n", c.id)).collect();
    publish::publish_dir(&fresh, &repo, &stamp).map_err(TaskError::Publish)?;
    // Absolute, so the sandbox finds the repository whatever the working directory.
    source.repo_path = repo.canonicalize().map_err(io(|| format!("resolving {}", repo.display())))?;
    let set = TaskSet::from_synthetic(&source, AUX_MIN_WEIGHT)
        .map_err(|source| TaskError::TaskSet { source_name: "synthetic".into(), source })?;
    Ok((set, source.repo_path))
}

fn swebench_tasks(path: &Path, name: &str) -> Result<Vec<Task>, TaskError> {
    let file = File::open(path).map_err(io(|| format!("{name}: opening the SWE-bench file {}", path.display())))?;
    let loaded = load_swebench(BufReader::new(file)).map_err(|e| TaskError::Swebench {
        source_name: name.to_owned(),
        message: format!("reading {}: {}", path.display(), super::error_chain(&e)),
    })?;
    if !loaded.errors.is_empty() {
        let lines: Vec<String> = loaded.errors.iter().map(|e| format!("{}:{e}", path.display())).collect();
        return Err(TaskError::Swebench {
            source_name: name.to_owned(),
            message: format!("{} bad SWE-bench instance(s):\n  {}", lines.len(), lines.join("\n  ")),
        });
    }
    if loaded.records.is_empty() {
        return Err(TaskError::Swebench {
            source_name: name.to_owned(),
            message: format!("{} holds no SWE-bench instance", path.display()),
        });
    }
    Ok(loaded.records.into_iter().map(|(_, t)| t).collect())
}

/// Every repository the instances name must have its bare clone in `repos`;
/// returns each name's store name and canonical clone.
fn check_mirrors(
    tasks: &[Task],
    repos: &Path,
    jsonl: &Path,
    name: &str,
) -> Result<BTreeMap<String, (String, PathBuf)>, TaskError> {
    let missing_dir = |line: String| TaskError::MissingMirrors {
        source_name: name.to_owned(),
        jsonl: jsonl.to_owned(),
        repos: repos.to_owned(),
        count: 1,
        lines: vec![line],
    };
    if !repos.is_dir() {
        return Err(missing_dir(format!(
            "the `repos` directory {} (bare clones `owner__name.git`) does not exist",
            repos.display()
        )));
    }
    // repository name → (mirror name, tasks naming it)
    let mut wanted: BTreeMap<&str, (String, usize)> = BTreeMap::new();
    for task in tasks {
        let repo = match &task.repo {
            RepoRef::Name(repo) => repo,
            RepoRef::Path(path) => {
                return Err(TaskError::Swebench {
                    source_name: name.to_owned(),
                    message: format!("task `{}` names a path ({}), not `owner/name`", task.id, path.display()),
                });
            }
        };
        let mirror = mirror_name(repo).map_err(|source| TaskError::Store {
            what: format!("{name}: task `{}`: repository `{repo}`", task.id),
            source: Box::new(source),
        })?;
        wanted.entry(repo).or_insert((mirror, 0)).1 += 1;
    }
    let mut found = BTreeMap::new();
    let mut missing = Vec::new();
    for (repo, (mirror, n)) in &wanted {
        let dir = repos.join(format!("{mirror}.git"));
        match fs::canonicalize(&dir) {
            Ok(canonical) if canonical.is_dir() => {
                found.insert((*repo).to_owned(), (mirror.clone(), canonical));
            }
            _ => missing.push(format!(
                "`{repo}` ({n} task(s)): no {}; make it with `git clone --bare https://github.com/{repo} {}`",
                dir.display(),
                dir.display()
            )),
        }
    }
    if !missing.is_empty() {
        return Err(TaskError::MissingMirrors {
            source_name: name.to_owned(),
            jsonl: jsonl.to_owned(),
            repos: repos.to_owned(),
            count: missing.len(),
            lines: missing,
        });
    }
    Ok(found)
}

/// Opens every task's repository in the store and resolves its commit.
fn check_commits(all: &[Sourced], store: &RepoStore) -> Result<(), TaskError> {
    let mut seen = BTreeSet::new();
    for sourced in all {
        let task = &sourced.task;
        if !seen.insert((task.repo.as_str(), task.commit.as_str())) {
            continue;
        }
        let repo = store.repo(&task.repo).map_err(|source| TaskError::Store {
            what: format!("task `{}`: opening repository `{}`", task.id, task.repo),
            source: Box::new(source),
        })?;
        repo.resolve(&task.commit).map_err(|source| TaskError::MissingCommit {
            task: task.id.clone(),
            repo: task.repo.clone(),
            commit: task.commit.clone(),
            path: sourced.repo_path.clone(),
            source: Box::new(source),
        })?;
    }
    Ok(())
}
