//! Tasks mined from the history of a local git repository, read with gix:
//! plain commits and merged pull requests.
//!
//! **Commits.** A commit with exactly one parent becomes a task when its
//! message is not trivial and it touches between `min_files` and `max_files`
//! target files (source files once tests, docs, vendored paths and the
//! caller's globs are filtered out). The message is the issue text, the
//! parent is the base commit, the target files are the changed files and the
//! target line ranges the pre-image lines of their changes.
//!
//! **Pull requests.** A merge commit whose message is GitHub's `Merge pull
//! request #N from user/branch` followed by the PR title (and body) becomes a
//! task whose issue text is the title and body and whose target is the
//! merge's first-parent diff (`merge^1..merge`, base commit `merge^1`). A
//! squash merge, a one-parent commit whose subject ends in `(#N)`, is a pull
//! request too when pull requests are selected (issue text: the title without
//! the suffix, then the body); when only commits are selected it stays the
//! plain commit it always was. Merges of anything else and root commits are
//! never tasks.
//!
//! **Scale.** The walk (cheap: commit objects only) runs on one thread and
//! applies the message, date and kind filters; the survivors are diffed in
//! batches on `threads` threads, each with its own thread-local repository
//! handle, and the batch results are appended in walk order, so the output is
//! the same for any thread count. With `max_tasks` set, mining stops at the
//! first batch that reaches it.
//!
//! **Diffs** are computed in-process: gix's tree diff (with rename tracking,
//! so a renamed file's target is its pre-image path) finds the changed files,
//! and gix's blob diff (imara-diff, Myers with git's slider heuristics) finds
//! the changed lines. Changes closer than `2 * CONTEXT` unchanged lines are
//! merged into one range, as `git diff`'s default three context lines would
//! put them in one hunk, so targets equal [`crate::diff::patch_targets`] of
//! `git diff parent commit` (tests check exactly that).
//!
//! Commits that add a target file are skipped by default: the file does not
//! exist at the base commit, so no retriever can find it (FuseSearch filters
//! these samples too). Mined tasks carry no function labels (`functions: None`).
//!
//! **Test snippets** (`test_snippet_lines`, off by default): the lines a task's commit adds
//! to its test files, calls and assertions only, appended to the issue text as a code block
//! ([`test_snippet`]), as a user's report shows a reproduction.
//!
//! A walk that yields no task is an error ([`CommitError::NoUsableCommits`])
//! that names the repository, the range and how many commits each filter
//! removed, with a hint at the filter to loosen.

use std::path::{Path, PathBuf};
use std::time::Instant;

use gix::bstr::ByteSlice;
use gix::diff::blob::{Algorithm, InternedInput};
use serde::{Deserialize, Serialize};

use super::filters::{GlobError, PathFilter, merge_pull_request, squash_pull_request};
use super::{RepoRef, Targets, Task};
use crate::metrics::LineRange;

pub use super::filters::{is_excluded_path, is_test_path, is_trivial_message};

/// Lines of context `git diff` uses by default; changes at most twice this apart share a hunk.
const CONTEXT: u32 = 3;

/// Candidates diffed per thread in one batch.
const BATCH_PER_THREAD: usize = 256;

/// How commits are selected. Every field but `threads` is part of the cache key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CommitOptions {
    /// Where the walk starts: `HEAD`, a full hex id, a reference name, or a
    /// range `A..B` (the history of `B` without that of `A`; either side as
    /// before, an empty side meaning `HEAD`).
    pub rev: String,
    /// Stop after this many tasks.
    pub max_tasks: usize,
    /// Stop after looking at this many commits (of the walk, filtered or not).
    pub max_commits: usize,
    /// Follow only first parents (`git log --first-parent`): the mainline's
    /// own commits and its merges, not the commits of merged branches.
    pub first_parent: bool,
    /// Only commits whose committer time is at least this (seconds since the
    /// Unix epoch; [`super::filters::parse_time`] reads dates).
    pub since: Option<i64>,
    /// Only commits whose committer time is at most this.
    pub until: Option<i64>,
    /// Skip commits with fewer target files than this (after the path filters).
    pub min_files: usize,
    /// Skip commits with more target files than this (after the path filters).
    pub max_files: usize,
    /// Skip commits that change more paths than this, counting every changed
    /// file (tests, docs and non-source files too): sweeping refactors make poor tasks.
    pub max_changed_paths: usize,
    /// Messages with fewer words than this are trivial.
    pub min_message_words: usize,
    /// Messages (issue texts, for pull requests) shorter than this many characters are skipped.
    pub min_message_chars: usize,
    /// File extensions (without the dot) that count as source.
    pub source_extensions: Vec<String>,
    /// Apply the built-in test/doc/vendor rule ([`is_excluded_path`]).
    pub builtin_excludes: bool,
    /// When not empty, a target file must match one of these globs.
    pub include_paths: Vec<String>,
    /// A file matching one of these globs is never a target (`**/tests/**`, `doc/**`).
    pub exclude_paths: Vec<String>,
    /// Keep commits that add a target file (the added file becomes a target with no range).
    pub allow_added_files: bool,
    /// Plain commits, pull requests, or both.
    pub kinds: TaskKinds,
    /// Skip (and count in [`MineStats::missing_objects`]) a commit whose diff needs an object
    /// the repository lacks (a snapshot without its largest files, an incomplete clone) instead
    /// of failing the mining. Off by default: a missing object is an error. Left out of the
    /// cache key while off, so the caches mined before the option existed stay valid.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skip_missing_objects: bool,
    /// Append up to this many lines that the commit adds to its test files to the issue text, as
    /// a code block ([`test_snippet`]): the calls and assertions a user's report would show as
    /// its reproduction, which a fixer's commit message seldom has. 0 (the default) leaves the
    /// message as it is, and is left out of the cache key.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub test_snippet_lines: usize,
    /// Threads that diff commits; 0 means the machine's available parallelism.
    #[serde(skip)]
    pub threads: usize,
}

impl Default for CommitOptions {
    fn default() -> CommitOptions {
        let exts = [
            "py", "rs", "go", "c", "h", "cc", "cpp", "hpp", "cxx", "java", "kt", "scala", "js", "jsx", "ts", "tsx",
            "rb", "php", "cs", "swift", "m", "mm", "lua", "pl", "sh", "hs", "ml", "ex", "erl", "clj", "dart", "r",
            "jl", "zig", "sql",
        ];
        CommitOptions {
            rev: "HEAD".to_string(),
            max_tasks: usize::MAX,
            max_commits: usize::MAX,
            first_parent: false,
            since: None,
            until: None,
            min_files: 1,
            max_files: 5,
            max_changed_paths: usize::MAX,
            min_message_words: 4,
            min_message_chars: 0,
            source_extensions: exts.iter().map(|s| s.to_string()).collect(),
            builtin_excludes: true,
            include_paths: Vec::new(),
            exclude_paths: Vec::new(),
            allow_added_files: false,
            kinds: TaskKinds::Commits,
            skip_missing_objects: false,
            test_snippet_lines: 0,
            threads: 0,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Which kinds of task to mine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKinds {
    /// Every one-parent commit, squash merges included (mining as it always was).
    #[default]
    Commits,
    /// Merged pull requests only: GitHub merge commits and squash merges.
    PullRequests,
    /// Both; a squash merge is mined once, as a pull request.
    Both,
}

impl TaskKinds {
    fn commits(self) -> bool {
        matches!(self, TaskKinds::Commits | TaskKinds::Both)
    }

    fn pull_requests(self) -> bool {
        matches!(self, TaskKinds::PullRequests | TaskKinds::Both)
    }
}

/// What a mined task came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// A one-parent commit, its message the issue text.
    Commit,
    /// A merged pull request: a GitHub merge commit or a squash merge.
    PullRequest,
}

/// A mined task and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MinedTask {
    /// The task; its `repo` is the mined repository's path.
    pub task: Task,
    /// Whether it came from a plain commit or a pull request.
    pub kind: TaskKind,
    /// The commit whose change is the target (the merge commit of a merged pull request).
    pub commit: String,
    /// The pull request's number (`None` for plain commits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<u64>,
    /// Committer time of `commit`, seconds since the Unix epoch.
    pub time: i64,
}

/// How many commits the walk saw and what each filter removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MineStats {
    /// Commits the walk produced (before any filter).
    pub walked: usize,
    /// Commits whose trees were diffed.
    pub diffed: usize,
    /// Tasks mined (after every filter and the `max_tasks` cut).
    pub tasks: usize,
    /// Commits with no parent, which have no change to use as a target.
    pub root_commits: usize,
    /// Merges that are not a selected pull request.
    pub merges: usize,
    /// One-parent commits when only pull requests are selected (squash merges aside).
    pub kind_not_selected: usize,
    /// Committer time before `since` or after `until`.
    pub outside_dates: usize,
    /// Too few words or a routine-upkeep subject.
    pub trivial_message: usize,
    /// Shorter than `min_message_chars`.
    pub short_message: usize,
    /// Changed more than `max_changed_paths` paths.
    pub too_many_paths: usize,
    /// Fewer than `min_files` target files (often none: tests, docs or non-source only).
    pub too_few_files: usize,
    /// More than `max_files` target files.
    pub too_many_files: usize,
    /// Added a target file.
    pub added_files: usize,
    /// Needed an object missing from the repository (only with
    /// [`CommitOptions::skip_missing_objects`]; otherwise such a commit fails the mining).
    #[serde(default)]
    pub missing_objects: usize,
    /// True when the tasks were read from the cache and no history was walked.
    pub from_cache: bool,
}

/// Mined tasks and the statistics of the mining.
#[derive(Clone, Debug, PartialEq)]
pub struct Mined {
    /// Newest first (walk order).
    pub tasks: Vec<MinedTask>,
    /// What the walk saw and what each filter removed.
    pub stats: MineStats,
    /// Wall-clock seconds mining took (0 for a cache hit's walk).
    pub seconds: f64,
}

/// Why mining failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The path is not a git repository gix can open.
    #[error("opening git repository {path}")]
    Open {
        /// The repository path as given.
        path: PathBuf,
        /// Why gix could not open it.
        #[source]
        source: gix::Error,
    },
    /// A git operation failed in an open repository: resolving a revision, walking, reading or diffing.
    #[error("{context} in {path}")]
    Git {
        /// The repository path as given.
        path: PathBuf,
        /// What was being done, such as resolving `main`.
        context: String,
        /// The error gix reported.
        #[source]
        source: gix::Error,
    },
    /// An include or exclude glob of the options does not compile.
    #[error("mining {path}")]
    Glob {
        /// The repository path as given.
        path: PathBuf,
        /// Which glob failed and why.
        #[source]
        source: GlobError,
    },
    #[error(
        "no usable commits in {path} at `{rev}`: of {} commit(s) walked, {summary}; {hint}",
        stats.walked
    )]
    /// The walk finished without a single task.
    NoUsableCommits {
        /// The repository path as given.
        path: PathBuf,
        /// The revision or range walked, as given in the options.
        rev: String,
        /// What each filter removed (boxed: it is large and errors should stay small).
        stats: Box<MineStats>,
        /// The non-zero filter counts in words, comma-separated (`none` when nothing was walked).
        summary: String,
        /// What to change: the option behind the filter that removed the most commits, or why
        /// the range is empty.
        hint: String,
    },
    /// Reading or writing the mining cache failed.
    #[error("mining cache {path}: {message}")]
    Cache {
        /// The cache file or directory concerned.
        path: PathBuf,
        /// What went wrong, such as `writing: ...`.
        message: String,
    },
}

/// Mines tasks from the history of the repository at `repo_path`, newest
/// first; the tasks only (see [`mine`] for kinds and statistics).
pub fn mine_commits(repo_path: &Path, options: &CommitOptions) -> Result<Vec<Task>, CommitError> {
    Ok(mine(repo_path, options)?.tasks.into_iter().map(|m| m.task).collect())
}

/// The commit range of `options.rev`, resolved: the tip and the commits whose history is excluded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedRange {
    /// The commit the walk starts from (full hex id).
    pub tip: String,
    /// Commits whose history the walk leaves out (`A` of `A..B`); empty for a single revision.
    pub hidden: Vec<String>,
}

/// Resolves `options.rev` in an open repository.
pub fn resolve_range(repo_path: &Path, rev: &str) -> Result<ResolvedRange, CommitError> {
    let repo = open(repo_path)?;
    resolve_in(&repo, repo_path, rev)
}

fn resolve_in(repo: &gix::Repository, repo_path: &Path, rev: &str) -> Result<ResolvedRange, CommitError> {
    let one = |text: &str| {
        let text = if text.is_empty() { "HEAD" } else { text };
        resolve_rev(repo, text).map(|id| id.to_hex().to_string()).map_err(|source| CommitError::Git {
            path: repo_path.to_path_buf(),
            context: format!("resolving `{text}`"),
            source,
        })
    };
    match rev.split_once("..") {
        Some((from, to)) => Ok(ResolvedRange { tip: one(to)?, hidden: vec![one(from)?] }),
        None => Ok(ResolvedRange { tip: one(rev)?, hidden: Vec::new() }),
    }
}

fn open(repo_path: &Path) -> Result<gix::Repository, CommitError> {
    let mut repo =
        gix::open(repo_path).map_err(|source| CommitError::Open { path: repo_path.to_path_buf(), source })?;
    // The walk reads each commit once for its parents and again for its message.
    repo.object_cache_size_if_unset(8 << 20);
    Ok(repo)
}

/// The directory name of the repository, the prefix of task ids.
pub(crate) fn repo_name(repo_path: &Path) -> String {
    repo_path
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "repo".to_string())
}

/// Mines tasks with kinds and statistics; an empty result is
/// [`CommitError::NoUsableCommits`].
pub fn mine(repo_path: &Path, options: &CommitOptions) -> Result<Mined, CommitError> {
    let repo = open(repo_path)?;
    let range = resolve_in(&repo, repo_path, &options.rev)?;
    mine_range(repo, repo_path, options, &range)
}

/// One commit that passed the walk's filters, waiting for its diff.
struct Candidate {
    id: gix::ObjectId,
    base: gix::ObjectId,
    kind: TaskKind,
    pull_request: Option<u64>,
    prompt: String,
    time: i64,
}

/// Why a diffed candidate is not a task.
enum Skip {
    TooManyPaths,
    TooFewFiles,
    TooManyFiles,
    AddedFile,
    MissingObject,
}

pub(crate) fn mine_range(
    repo: gix::Repository,
    repo_path: &Path,
    options: &CommitOptions,
    range: &ResolvedRange,
) -> Result<Mined, CommitError> {
    let started = Instant::now();
    let git = |context: String| {
        let path = repo_path.to_path_buf();
        move |source: gix::Error| CommitError::Git { path, context, source }
    };
    let filter = PathFilter::new(
        &options.source_extensions,
        options.builtin_excludes,
        &options.include_paths,
        &options.exclude_paths,
    )
    .map_err(|source| CommitError::Glob { path: repo_path.to_path_buf(), source })?;
    let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).map_err(|e| git(format!("reading `{hex}`"))(e));
    // Annotated tags name tag objects; the walk starts from their commits.
    let peel = |hex: &str| -> Result<gix::ObjectId, CommitError> {
        let object = repo.find_object(id(hex)?).map_err(|e| git(format!("reading `{hex}`"))(e))?;
        Ok(object.peel_to_commit().map_err(|e| git(format!("peeling `{hex}` to a commit"))(e))?.id)
    };
    let tip = peel(&range.tip)?;
    let hidden = range.hidden.iter().map(|h| peel(h)).collect::<Result<Vec<_>, _>>()?;
    let mut platform = repo
        .rev_walk([tip])
        .sorting(gix::revision::walk::Sorting::ByCommitTime(
            gix::traverse::commit::simple::CommitTimeOrder::NewestFirst,
        ))
        .with_hidden(hidden);
    if options.first_parent {
        platform = platform.first_parent_only();
    }
    let walk = platform.all().map_err(|e| git("walking history".into())(e))?;
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let name = repo_name(repo_path);
    let mut stats = MineStats::default();
    let mut tasks: Vec<MinedTask> = Vec::new();
    let mut batch: Vec<Candidate> = Vec::new();
    let batch_size = threads * BATCH_PER_THREAD;
    let mut walk = walk;
    loop {
        let info = match walk.next() {
            Some(info) if stats.walked < options.max_commits => {
                Some(info.map_err(|e| git("walking history".into())(e))?)
            }
            _ => None,
        };
        if let Some(info) = info {
            stats.walked += 1;
            let commit = info.object().map_err(|e| git(format!("reading commit {}", info.id))(e))?;
            if let Some(candidate) =
                classify(&commit, options, &mut stats).map_err(git(format!("reading commit {}", info.id)))?
            {
                batch.push(candidate);
            }
            if batch.len() < batch_size {
                continue;
            }
        }
        if batch.is_empty() {
            break;
        }
        let outcomes = diff_batch(repo_path, &batch, options, &filter, threads)?;
        for (candidate, outcome) in batch.drain(..).zip(outcomes) {
            stats.diffed += 1;
            let outcome = outcome.map_err(git(format!("diffing commit {}", candidate.id)))?;
            match outcome {
                Ok((targets, snippet)) => tasks.push(MinedTask {
                    task: Task {
                        id: format!("{name}@{}", &candidate.id.to_hex().to_string()[..12]),
                        repo: RepoRef::Path(repo_path.to_path_buf()),
                        base_commit: candidate.base.to_hex().to_string(),
                        prompt: match snippet {
                            Some(code) => format!("{}\n\n```\n{code}\n```", candidate.prompt),
                            None => candidate.prompt,
                        },
                        targets,
                        auxiliary: Vec::new(),
                    },
                    kind: candidate.kind,
                    commit: candidate.id.to_hex().to_string(),
                    pull_request: candidate.pull_request,
                    time: candidate.time,
                }),
                Err(Skip::TooManyPaths) => stats.too_many_paths += 1,
                Err(Skip::TooFewFiles) => stats.too_few_files += 1,
                Err(Skip::TooManyFiles) => stats.too_many_files += 1,
                Err(Skip::AddedFile) => stats.added_files += 1,
                Err(Skip::MissingObject) => stats.missing_objects += 1,
            }
        }
        if tasks.len() >= options.max_tasks {
            tasks.truncate(options.max_tasks);
            break;
        }
    }
    stats.tasks = tasks.len();
    if tasks.is_empty() {
        let (summary, hint) = explain_empty(&stats, options);
        return Err(CommitError::NoUsableCommits {
            path: repo_path.to_path_buf(),
            rev: options.rev.clone(),
            stats: Box::new(stats),
            summary,
            hint,
        });
    }
    Ok(Mined { tasks, stats, seconds: started.elapsed().as_secs_f64() })
}

/// Applies the filters that need only the commit object; `None` when one removes it.
fn classify(
    commit: &gix::Commit<'_>,
    options: &CommitOptions,
    stats: &mut MineStats,
) -> Result<Option<Candidate>, gix::Error> {
    let parents: Vec<gix::ObjectId> = commit.parent_ids().map(|id| id.detach()).collect();
    let Some(&base) = parents.first() else {
        stats.root_commits += 1;
        return Ok(None);
    };
    let message = commit.message_raw_sloppy().to_str_lossy().trim().to_string();
    let (kind, pull_request, prompt) = if parents.len() > 1 {
        match merge_pull_request(&message).filter(|_| options.kinds.pull_requests()) {
            Some(pr) => (TaskKind::PullRequest, Some(pr.number), pr.text),
            None => {
                stats.merges += 1;
                return Ok(None);
            }
        }
    } else {
        match squash_pull_request(&message).filter(|_| options.kinds.pull_requests()) {
            Some(pr) => (TaskKind::PullRequest, Some(pr.number), pr.text),
            None if options.kinds.commits() => (TaskKind::Commit, None, message),
            None => {
                stats.kind_not_selected += 1;
                return Ok(None);
            }
        }
    };
    let time = commit.time()?.seconds;
    if options.since.is_some_and(|s| time < s) || options.until.is_some_and(|u| time > u) {
        stats.outside_dates += 1;
        return Ok(None);
    }
    if is_trivial_message(&prompt, options.min_message_words) {
        stats.trivial_message += 1;
        return Ok(None);
    }
    if prompt.chars().count() < options.min_message_chars {
        stats.short_message += 1;
        return Ok(None);
    }
    Ok(Some(Candidate { id: commit.id, base, kind, pull_request, prompt, time }))
}

/// A diffed candidate: its targets and the test lines for its issue text, or why it is skipped.
type Outcome = Result<Result<(Targets, Option<String>), Skip>, gix::Error>;

/// Diffs a batch on `threads` threads; outcomes in batch order. Each thread
/// opens the repository itself: without gix's `parallel` feature a
/// repository handle cannot cross threads, and opening is cheap next to a batch of diffs.
fn diff_batch(
    repo_path: &Path,
    batch: &[Candidate],
    options: &CommitOptions,
    filter: &PathFilter,
    threads: usize,
) -> Result<Vec<Outcome>, CommitError> {
    let threads = threads.clamp(1, batch.len().max(1));
    let chunk = batch.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let repo = open(repo_path)?;
                    Ok(part.iter().map(|c| diff_candidate(&repo, c, options, filter)).collect::<Vec<_>>())
                })
            })
            .collect();
        let mut out = Vec::with_capacity(batch.len());
        for handle in handles {
            let part: Result<Vec<Outcome>, CommitError> =
                handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            out.extend(part?);
        }
        Ok(out)
    })
}

fn diff_candidate(
    repo: &gix::Repository,
    candidate: &Candidate,
    options: &CommitOptions,
    filter: &PathFilter,
) -> Outcome {
    match diff_targets(repo, candidate, options, filter) {
        Err(_) if options.skip_missing_objects && lacks_objects(repo, candidate) => Ok(Err(Skip::MissingObject)),
        outcome => outcome,
    }
}

/// The targets of a candidate's change (renames tracked), or why it is filtered out.
fn diff_targets(
    repo: &gix::Repository,
    candidate: &Candidate,
    options: &CommitOptions,
    filter: &PathFilter,
) -> Outcome {
    let (old_tree, new_tree) = trees(repo, candidate)?;
    let opts = gix::diff::Options::default().with_rewrites(Some(gix::diff::Rewrites::default()));
    let changes = repo.diff_tree_to_tree(&old_tree, &new_tree, opts)?;
    commit_targets(repo, &changes, options, filter)
}

/// The trees of a candidate's parent and commit.
fn trees<'repo>(
    repo: &'repo gix::Repository,
    candidate: &Candidate,
) -> Result<(gix::Tree<'repo>, gix::Tree<'repo>), gix::Error> {
    let old = repo.find_commit(candidate.base)?.tree()?;
    let new = repo.find_commit(candidate.id)?.tree()?;
    Ok((old, new))
}

/// Whether a commit whose diff failed lacks an object: one of its or its parent's commit or tree
/// objects, or a blob the change touches (the tree diff without rename tracking reads no blob).
fn lacks_objects(repo: &gix::Repository, candidate: &Candidate) -> bool {
    use gix::object::tree::diff::ChangeDetached as Change;
    let Ok((old, new)) = trees(repo, candidate) else { return true };
    let Ok(changes) = repo.diff_tree_to_tree(&old, &new, gix::diff::Options::default()) else { return true };
    changes.iter().any(|change| {
        let ids = match change {
            Change::Addition { id, entry_mode, .. } | Change::Deletion { id, entry_mode, .. } => {
                (entry_mode.is_blob().then_some(*id), None)
            }
            Change::Modification { previous_id, id, entry_mode, previous_entry_mode, .. } => {
                (previous_entry_mode.is_blob().then_some(*previous_id), entry_mode.is_blob().then_some(*id))
            }
            Change::Rewrite { source_id, id, entry_mode, .. } => {
                (entry_mode.is_blob().then_some(*source_id), entry_mode.is_blob().then_some(*id))
            }
        };
        [ids.0, ids.1].into_iter().flatten().any(|id| !repo.has_object(id))
    })
}

/// Targets of one commit's changes, or why the commit is filtered out.
fn commit_targets(
    repo: &gix::Repository,
    changes: &[gix::object::tree::diff::ChangeDetached],
    options: &CommitOptions,
    filter: &PathFilter,
) -> Outcome {
    use gix::object::tree::diff::ChangeDetached as Change;
    let blob_changes = changes
        .iter()
        .filter(|c| match c {
            Change::Addition { entry_mode, .. }
            | Change::Deletion { entry_mode, .. }
            | Change::Modification { entry_mode, .. }
            | Change::Rewrite { entry_mode, .. } => entry_mode.is_blob(),
        })
        .count();
    if blob_changes > options.max_changed_paths {
        return Ok(Err(Skip::TooManyPaths));
    }
    // First the cheap checks over paths, then the blob diffs of what survives.
    let mut added = Vec::new();
    let mut edits: Vec<(String, gix::ObjectId, Option<gix::ObjectId>)> = Vec::new();
    for change in changes {
        match change {
            Change::Addition { location, entry_mode, .. } => {
                let path = location.to_str_lossy();
                if entry_mode.is_blob() && filter.accepts(&path) {
                    if !options.allow_added_files {
                        return Ok(Err(Skip::AddedFile));
                    }
                    added.push(path.into_owned());
                }
            }
            Change::Deletion { location, entry_mode, id, .. } => {
                if entry_mode.is_blob() {
                    edits.push((location.to_str_lossy().into_owned(), *id, None));
                }
            }
            Change::Modification { location, previous_id, id, entry_mode, previous_entry_mode } => {
                if entry_mode.is_blob() && previous_entry_mode.is_blob() {
                    edits.push((location.to_str_lossy().into_owned(), *previous_id, Some(*id)));
                }
            }
            Change::Rewrite { source_location, location, source_id, id, entry_mode, copy, .. } => {
                if !entry_mode.is_blob() {
                    continue;
                }
                if *copy {
                    // A copy leaves its source untouched: the new file is an addition.
                    let path = location.to_str_lossy();
                    if filter.accepts(&path) {
                        if !options.allow_added_files {
                            return Ok(Err(Skip::AddedFile));
                        }
                        added.push(path.into_owned());
                    }
                    continue;
                }
                edits.push((source_location.to_str_lossy().into_owned(), *source_id, Some(*id)));
            }
        }
    }
    edits.retain(|(path, _, _)| filter.accepts(path));
    let n = edits.len() + added.len();
    if n < options.min_files {
        return Ok(Err(Skip::TooFewFiles));
    }
    if n > options.max_files {
        return Ok(Err(Skip::TooManyFiles));
    }
    let mut targets = Targets { files: added, line_ranges: Vec::new(), functions: None };
    for (path, old, new) in edits {
        let before = repo.find_blob(old)?.take_data();
        let after = match new {
            Some(id) => repo.find_blob(id)?.take_data(),
            None => Vec::new(),
        };
        targets
            .line_ranges
            .extend(changed_ranges(&before, &after).into_iter().map(|(a, b)| LineRange::new(path.clone(), a, b)));
        targets.files.push(path);
    }
    // Path order, as `git diff` prints files (gix reports rewrites after the other changes).
    targets.files.sort();
    targets.line_ranges.sort_by(|a, b| a.path.cmp(&b.path).then(a.start.cmp(&b.start)));
    let snippet = match options.test_snippet_lines {
        0 => None,
        n => test_snippet(repo, changes, filter, n)?,
    };
    Ok(Ok((targets, snippet)))
}

/// Up to `max_lines` lines that `changes` add to test files with one of `filter`'s source
/// extensions ([`PathFilter::has_source_extension`]), in path
/// order, as the body of a code block: each trimmed, without blank lines, comments, docstring
/// quotes, decorators, `def`/`class` lines (a test's name is the fixer's, not a user's words) and
/// imports (a user's report seldom imports the module to fix; a test always does), and without
/// lines of punctuation alone. `None` when no such line is added.
pub fn test_snippet(
    repo: &gix::Repository,
    changes: &[gix::object::tree::diff::ChangeDetached],
    filter: &PathFilter,
    max_lines: usize,
) -> Result<Option<String>, gix::Error> {
    use gix::object::tree::diff::ChangeDetached as Change;
    let mut files: Vec<(String, Option<gix::ObjectId>, gix::ObjectId)> = changes
        .iter()
        .filter_map(|change| match change {
            Change::Addition { location, entry_mode, id, .. } if entry_mode.is_blob() => {
                Some((location.to_str_lossy().into_owned(), None, *id))
            }
            Change::Modification { location, previous_id, id, entry_mode, previous_entry_mode }
                if entry_mode.is_blob() && previous_entry_mode.is_blob() =>
            {
                Some((location.to_str_lossy().into_owned(), Some(*previous_id), *id))
            }
            Change::Rewrite { location, source_id, id, entry_mode, copy, .. } if entry_mode.is_blob() => {
                Some((location.to_str_lossy().into_owned(), (!copy).then_some(*source_id), *id))
            }
            _ => None,
        })
        .filter(|(path, _, _)| is_test_path(path) && filter.has_source_extension(path))
        .collect();
    files.sort();
    let mut lines = Vec::new();
    for (_, old, new) in files {
        let before = match old {
            Some(id) => repo.find_blob(id)?.take_data(),
            None => Vec::new(),
        };
        let after = repo.find_blob(new)?.take_data();
        for line in added_lines(&before, &after) {
            if lines.len() == max_lines {
                break;
            }
            if reads_like_a_reproduction(&line) {
                lines.push(line);
            }
        }
    }
    Ok((!lines.is_empty()).then(|| lines.join("\n")))
}

/// The lines of `after` that a line diff from `before` adds, trimmed; none for binary content.
fn added_lines(before: &[u8], after: &[u8]) -> Vec<String> {
    if before.contains(&0) || after.contains(&0) {
        return Vec::new();
    }
    let input = InternedInput::new(before, after);
    let diff = gix::diff::blob::diff_with_slider_heuristics(Algorithm::Myers, &input);
    let after_lines: Vec<&[u8]> = after.lines_with_terminator().collect();
    diff.hunks()
        .flat_map(|hunk| hunk.after.start as usize..hunk.after.end as usize)
        .filter_map(|i| after_lines.get(i))
        .map(|line| String::from_utf8_lossy(line).trim().to_string())
        .collect()
}

/// Whether a trimmed added test line is a call or an assertion a reproduction would show.
fn reads_like_a_reproduction(line: &str) -> bool {
    let skipped_starts = ["#", "//", "@", "\"\"\"", "'''", "def ", "async def ", "class ", "import ", "from "];
    !line.is_empty()
        && line.chars().count() <= 200
        && line.chars().any(char::is_alphanumeric)
        && !skipped_starts.iter().any(|s| line.starts_with(s))
}

/// What removed the commits of an empty walk, and which filter to loosen first.
fn explain_empty(stats: &MineStats, options: &CommitOptions) -> (String, String) {
    if stats.walked == 0 {
        return (
            "none".to_string(),
            "the range is empty: in `A..B`, `B` must have commits that `A` lacks, and `max_commits` must be above 0"
                .to_string(),
        );
    }
    let counts = [
        (stats.root_commits, "root commit(s)".to_string(), "widen the range".to_string()),
        (
            stats.merges,
            "merge(s) that are not a selected pull request".to_string(),
            "select pull requests (kinds = both) or drop `first_parent`".to_string(),
        ),
        (
            stats.kind_not_selected,
            "plain commit(s) while only pull requests are selected".to_string(),
            "select commits too (kinds = both): this history has no GitHub merge or squash messages".to_string(),
        ),
        (
            stats.outside_dates,
            format!("outside the dates (since {:?}, until {:?})", options.since, options.until),
            "widen `since`/`until`".to_string(),
        ),
        (
            stats.trivial_message,
            format!("trivial message(s) (under {} words or routine upkeep)", options.min_message_words),
            "lower `min_message_words`".to_string(),
        ),
        (
            stats.short_message,
            format!("message(s) under {} characters", options.min_message_chars),
            "lower `min_message_chars`".to_string(),
        ),
        (
            stats.too_many_paths,
            format!("over {} changed paths", options.max_changed_paths),
            "raise `max_changed_paths`".to_string(),
        ),
        (
            stats.too_few_files,
            format!(
                "fewer than {} target file(s) after the path filters (extensions, built-in test/doc rule {}, include {:?}, exclude {:?})",
                options.min_files,
                if options.builtin_excludes { "on" } else { "off" },
                options.include_paths,
                options.exclude_paths
            ),
            "check `source_extensions`, `include_paths` and `exclude_paths`".to_string(),
        ),
        (stats.too_many_files, format!("over {} target files", options.max_files), "raise `max_files`".to_string()),
        (stats.added_files, "added a target file".to_string(), "set `allow_added_files`".to_string()),
        (
            stats.missing_objects,
            "needed an object missing from the repository".to_string(),
            "mine a complete clone of the repository".to_string(),
        ),
    ];
    let summary: Vec<String> =
        counts.iter().filter(|(n, _, _)| *n > 0).map(|(n, what, _)| format!("{n} {what}")).collect();
    let hint = counts
        .iter()
        .max_by_key(|(n, _, _)| *n)
        .map(|(_, _, hint)| format!("fix: {hint}, or widen the range"))
        .unwrap_or_default();
    (summary.join(", "), hint)
}

/// Resolves `HEAD`, a full hex object id, or a reference name (`main`,
/// `refs/tags/v1`) to the id the reference names, without reading objects (an
/// annotated tag stays the tag: the walk peels it), so a cache hit needs only
/// the references. gix's full rev-parse needs its `revision` feature, which
/// the workspace does not enable; these three forms are what a miner needs.
pub(crate) fn resolve_rev(repo: &gix::Repository, rev: &str) -> Result<gix::ObjectId, gix::Error> {
    if rev.len() == 40
        && let Ok(id) = gix::ObjectId::from_hex(rev.as_bytes())
    {
        return Ok(id);
    }
    let mut reference = if rev == "HEAD" {
        match repo.head()?.try_into_referent() {
            Some(reference) => reference,
            // A detached HEAD names its commit directly.
            None => return Ok(repo.head_id()?.detach()),
        }
    } else {
        repo.find_reference(rev)?
    };
    match reference.target().try_id() {
        Some(id) => Ok(id.to_owned()),
        None => Ok(reference.peel_to_id()?.detach()),
    }
}

/// Pre-image line ranges (1-based, inclusive) of the changes from `before`
/// to `after`, merged as `git diff -U3` would group them into hunks.
pub fn changed_ranges(before: &[u8], after: &[u8]) -> Vec<(u32, u32)> {
    if before.contains(&0) || after.contains(&0) {
        // Binary content: git shows no hunks, so there is no line range.
        return Vec::new();
    }
    if after.is_empty() {
        let lines = before.lines_with_terminator().count() as u32;
        return if lines > 0 { vec![(1, lines)] } else { Vec::new() };
    }
    let input = InternedInput::new(before, after);
    let diff = gix::diff::blob::diff_with_slider_heuristics(Algorithm::Myers, &input);
    // (first changed line, last changed line, first pre-image line after the change)
    let mut spans: Vec<(u32, u32, u32)> = Vec::new();
    for hunk in diff.hunks() {
        let (lo, hi) = if hunk.before.is_empty() {
            // An insertion after pre-image line `start` (0 = at the top) anchors to that line.
            let anchor = hunk.before.start.max(1);
            (anchor, anchor)
        } else {
            (hunk.before.start + 1, hunk.before.end)
        };
        let next = hunk.before.end + 1;
        if let Some(last) = spans.last_mut() {
            // Unchanged lines between the previous change and this one.
            let gap = hunk.before.start + 1 - last.2;
            if gap <= 2 * CONTEXT {
                last.0 = last.0.min(lo);
                last.1 = last.1.max(hi);
                last.2 = next;
                continue;
            }
        }
        spans.push((lo, hi, next));
    }
    spans.into_iter().map(|(a, b, _)| (a, b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_ranges_merge_like_git_hunks() {
        let before: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let mut after = before.replace("line 5\n", "five\n").replace("line 9\n", "nine\n");
        after = after.replace("line 25\n", "line 25\nnew\n");
        // 5 and 9 are 3 unchanged lines apart (one hunk); the insertion after 25 is far away.
        assert_eq!(changed_ranges(before.as_bytes(), after.as_bytes()), vec![(5, 9), (25, 25)]);
        assert_eq!(changed_ranges(before.as_bytes(), b""), vec![(1, 30)]);
        assert_eq!(changed_ranges(b"a\n", b"top\na\n"), vec![(1, 1)]);
    }

    #[test]
    fn an_empty_walk_names_the_biggest_filter() {
        let stats = MineStats { walked: 10, trivial_message: 7, too_few_files: 3, ..MineStats::default() };
        let (summary, hint) = explain_empty(&stats, &CommitOptions::default());
        assert!(summary.starts_with("7 trivial message(s) (under 4 words"), "{summary}");
        assert!(summary.contains("3 fewer than 1 target file(s)"), "{summary}");
        assert_eq!(hint, "fix: lower `min_message_words`, or widen the range");
    }
}
