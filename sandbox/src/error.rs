//! Errors of the store and tree layer. Tool calls never return these: a tool problem is a
//! message in its [`ToolResult`](crate::ToolResult); these are for the framework setting up
//! repositories and trees.

use std::path::PathBuf;

use gix::ObjectId;

/// Something went wrong while cloning, opening or materialising a repository or tree.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A directory of the store could not be created, read or removed.
    #[error("I/O error on {path}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The repository spec does not yield a usable `owner__name`.
    #[error("cannot derive a repository name from {spec:?}: {reason}")]
    InvalidName {
        /// What the caller passed.
        spec: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// Cloning failed.
    #[error("could not clone {url} into {dest}")]
    Clone {
        /// The URL or path cloned from.
        url: String,
        /// Where the bare clone was going.
        dest: PathBuf,
        /// gix's report.
        source: gix::Error,
    },
    /// An existing directory could not be opened as a repository.
    #[error("could not open the repository at {path}")]
    Open {
        /// The repository directory.
        path: PathBuf,
        /// gix's report.
        source: gix::Error,
    },
    /// A directory in the store's `owner__name.git` layout is not a bare repository.
    #[error("{path} is not a bare repository; the store holds bare mirrors only")]
    NotBare {
        /// The offending directory.
        path: PathBuf,
    },
    /// A revision did not resolve to a commit.
    #[error("revision {rev:?} does not name a commit in {repo}")]
    Revision {
        /// The repository name.
        repo: String,
        /// The revision as given.
        rev: String,
        /// gix's report.
        source: gix::Error,
    },
    /// The commit's tree objects could not be read (an incomplete clone, usually).
    #[error("could not read the tree of commit {commit} in {repo}")]
    TreeRead {
        /// The repository name.
        repo: String,
        /// The commit whose tree was walked.
        commit: ObjectId,
        /// gix's report.
        source: gix::Error,
    },
    /// gix could not add (register or check out) a linked worktree.
    #[error("could not add a worktree for commit {commit} at {path}")]
    AddWorktree {
        /// The worktree directory.
        path: PathBuf,
        /// The commit checked out.
        commit: ObjectId,
        /// gix's report.
        source: gix::Error,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
