//! Tasks mined from the commits of a local git repository, read with gix.
//!
//! A commit becomes a task when it has exactly one parent (merges and root
//! commits are skipped), its message is not trivial, and it touches between
//! `min_files` and `max_files` source files once tests, docs and vendored
//! paths are filtered out. The message is the issue text, the parent is the
//! base commit, the changed source files are the target files and the
//! pre-image lines of their changes the target line ranges.
//!
//! Diffs are computed in-process: gix's tree diff (with rename tracking, so
//! a renamed file's target is its pre-image path) finds the changed files,
//! and gix's blob diff (imara-diff, Myers with git's slider heuristics) finds
//! the changed lines. Changes closer than `2 * CONTEXT` unchanged lines are
//! merged into one range, as `git diff`'s default three context lines would
//! put them in one hunk, so targets equal [`crate::diff::patch_targets`] of
//! `git diff parent commit` (a test checks exactly that).
//!
//! Commits that add a source file are skipped by default: the file does not
//! exist at the base commit, so no retriever can find it (FuseSearch filters
//! these samples too). Commit tasks carry no function labels (`functions: None`).

use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;
use gix::diff::blob::{Algorithm, InternedInput};

use super::{RepoRef, Targets, Task};
use crate::metrics::LineRange;

/// Lines of context `git diff` uses by default; changes at most twice this apart share a hunk.
const CONTEXT: u32 = 3;

/// How commits are selected.
#[derive(Clone, Debug)]
pub struct CommitOptions {
    /// Where the walk starts (any revision gix can parse).
    pub rev: String,
    /// Stop after this many tasks.
    pub max_tasks: usize,
    /// Stop after looking at this many commits.
    pub max_commits: usize,
    pub min_files: usize,
    pub max_files: usize,
    /// Messages with fewer words than this are trivial.
    pub min_message_words: usize,
    /// File extensions (without the dot) that count as source.
    pub source_extensions: Vec<String>,
    /// Keep commits that add a source file (the added file becomes a target with no range).
    pub allow_added_files: bool,
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
            min_files: 1,
            max_files: 5,
            min_message_words: 4,
            source_extensions: exts.iter().map(|s| s.to_string()).collect(),
            allow_added_files: false,
        }
    }
}

/// Why mining failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    #[error("opening git repository {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("{context} in {path}: {source}")]
    Git {
        path: PathBuf,
        context: String,
        #[source]
        source: gix::Error,
    },
}

/// Mines tasks from the history of the repository at `repo_path`, newest first.
pub fn mine_commits(repo_path: &Path, options: &CommitOptions) -> Result<Vec<Task>, CommitError> {
    let repo = gix::open(repo_path).map_err(|source| CommitError::Open { path: repo_path.to_path_buf(), source })?;
    let git = |context: String| {
        let path = repo_path.to_path_buf();
        move |source: gix::Error| CommitError::Git { path, context, source }
    };
    let tip = resolve_rev(&repo, &options.rev).map_err(git(format!("resolving `{}`", options.rev)))?;
    let walk = repo.rev_walk([tip]).all().map_err(git("walking history".into()))?;
    let repo_name = repo_path
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "repo".to_string());
    let mut tasks = Vec::new();
    for (seen, info) in walk.enumerate() {
        if seen >= options.max_commits || tasks.len() >= options.max_tasks {
            break;
        }
        let info = info.map_err(git("walking history".into()))?;
        let commit = info.object().map_err(git(format!("reading commit {}", info.id)))?;
        let parents: Vec<gix::ObjectId> = commit.parent_ids().map(|id| id.detach()).collect();
        let [parent_id] = parents[..] else {
            continue;
        };
        let message = commit.message_raw_sloppy().to_str_lossy().trim().to_string();
        if is_trivial_message(&message, options.min_message_words) {
            continue;
        }
        let ctx = format!("diffing commit {}", info.id);
        let parent = repo.find_commit(parent_id).map_err(git(ctx.clone()))?;
        let old_tree = parent.tree().map_err(git(ctx.clone()))?;
        let new_tree = commit.tree().map_err(git(ctx.clone()))?;
        let opts = gix::diff::Options::default().with_rewrites(Some(gix::diff::Rewrites::default()));
        let changes = repo.diff_tree_to_tree(&old_tree, &new_tree, opts).map_err(git(ctx.clone()))?;
        let Some(targets) = commit_targets(&repo, &changes, options).map_err(git(ctx))? else {
            continue;
        };
        tasks.push(Task {
            id: format!("{repo_name}@{}", &info.id.to_hex().to_string()[..12]),
            repo: RepoRef::Path(repo_path.to_path_buf()),
            base_commit: parent_id.to_hex().to_string(),
            prompt: message,
            targets,
            auxiliary: Vec::new(),
        });
    }
    Ok(tasks)
}

/// Resolves `HEAD`, a full hex object id, or a reference name (`main`,
/// `refs/tags/v1`). gix's full rev-parse needs its `revision` feature, which the
/// workspace does not enable; these three forms are what a miner needs.
fn resolve_rev(repo: &gix::Repository, rev: &str) -> Result<gix::ObjectId, gix::Error> {
    if rev == "HEAD" {
        return Ok(repo.head_id()?.detach());
    }
    if rev.len() == 40
        && let Ok(id) = gix::ObjectId::from_hex(rev.as_bytes())
    {
        return Ok(id);
    }
    Ok(repo.find_reference(rev)?.into_fully_peeled_id()?.detach())
}

/// Is the path a test, doc or vendored file (never a target)?
pub fn is_excluded_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let dirs = [
        "test",
        "tests",
        "testing",
        "__tests__",
        "spec",
        "specs",
        "doc",
        "docs",
        "documentation",
        "examples",
        "vendor",
        "vendored",
        "third_party",
        "third-party",
        "thirdparty",
        "node_modules",
        "external",
        "extern",
        "_vendor",
        "benchmarks",
    ];
    let mut components: Vec<&str> = lower.split('/').collect();
    let name = components.pop().unwrap_or("");
    if components.iter().any(|c| dirs.contains(c)) {
        return true;
    }
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || stem.ends_with(".test")
        || stem.ends_with(".spec")
        || stem == "conftest"
        || stem == "setup"
}

/// Trivial messages: too few words, or a subject that names routine upkeep.
pub fn is_trivial_message(message: &str, min_words: usize) -> bool {
    if message.split_whitespace().count() < min_words {
        return true;
    }
    let subject = message.lines().next().unwrap_or("").trim().to_ascii_lowercase();
    let prefixes = [
        "merge ",
        "revert ",
        "bump ",
        "release ",
        "version ",
        "wip",
        "fixup!",
        "squash!",
        "typo",
        "fix typo",
        "format",
        "reformat",
        "lint",
        "style:",
        "chore",
        "update changelog",
        "update readme",
    ];
    prefixes.iter().any(|p| subject.starts_with(p))
}

fn is_source(path: &str, options: &CommitOptions) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((_, ext)) = name.rsplit_once('.') else {
        return false;
    };
    let ext = ext.to_ascii_lowercase();
    options.source_extensions.contains(&ext) && !is_excluded_path(path)
}

/// Targets of one commit's changes, or `None` when the commit is filtered out.
fn commit_targets(
    repo: &gix::Repository,
    changes: &[gix::object::tree::diff::ChangeDetached],
    options: &CommitOptions,
) -> Result<Option<Targets>, gix::Error> {
    use gix::object::tree::diff::ChangeDetached as Change;
    let mut targets = Targets { files: Vec::new(), line_ranges: Vec::new(), functions: None };
    for change in changes {
        let (old, new) = match change {
            Change::Addition { location, entry_mode, id, .. } => {
                if !entry_mode.is_blob() || !is_source(&location.to_str_lossy(), options) {
                    continue;
                }
                if !options.allow_added_files {
                    return Ok(None);
                }
                // An added file has no pre-image lines: a target file without a range.
                let _ = id;
                targets.files.push(location.to_str_lossy().into_owned());
                continue;
            }
            Change::Deletion { location, entry_mode, id, .. } => {
                if !entry_mode.is_blob() {
                    continue;
                }
                ((location, *id), None)
            }
            Change::Modification { location, previous_id, id, entry_mode, previous_entry_mode } => {
                if !entry_mode.is_blob() || !previous_entry_mode.is_blob() {
                    continue;
                }
                ((location, *previous_id), Some(*id))
            }
            Change::Rewrite { source_location, source_id, id, entry_mode, copy, .. } => {
                if !entry_mode.is_blob() {
                    continue;
                }
                if *copy {
                    // A copy leaves its source untouched: the new file is an addition.
                    if !options.allow_added_files && is_source(&source_location.to_str_lossy(), options) {
                        return Ok(None);
                    }
                    continue;
                }
                ((source_location, *source_id), Some(*id))
            }
        };
        let path = old.0.to_str_lossy().into_owned();
        if !is_source(&path, options) {
            continue;
        }
        let before = repo.find_blob(old.1)?.take_data();
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
    let n = targets.files.len();
    Ok((n >= options.min_files && n <= options.max_files).then_some(targets))
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
    fn path_filters() {
        assert!(is_excluded_path("tests/test_x.py"));
        assert!(is_excluded_path("pkg/test_x.py"));
        assert!(is_excluded_path("pkg/x_test.go"));
        assert!(is_excluded_path("web/app.spec.ts"));
        assert!(is_excluded_path("vendor/lib/a.go"));
        assert!(is_excluded_path("docs/conf.py"));
        assert!(is_excluded_path("pkg/testing/x.py"));
        assert!(!is_excluded_path("src/contest.py"));
        let opts = CommitOptions::default();
        assert!(is_source("src/a.py", &opts));
        assert!(!is_source("README.md", &opts));
        assert!(!is_source("Makefile", &opts));
    }

    #[test]
    fn trivial_messages() {
        assert!(is_trivial_message("fix", 4));
        assert!(is_trivial_message("Merge branch 'x' into main now", 4));
        assert!(is_trivial_message("Bump version to 1.2.3 for release", 4));
        assert!(!is_trivial_message("Handle empty headers in the request parser", 4));
    }

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
}
