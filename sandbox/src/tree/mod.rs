//! Trees: one commit of one repository, as the tools see it.
//!
//! Both kinds expose the same things: a sorted list of tracked paths ([`Tree::files`]) and
//! reads of file contents by a policy-supplied path, normalised and resolved inside the tree.

mod listing;
mod view;
mod worktree;

use std::{cell::OnceCell, path::Path, sync::Arc};

use gix::ObjectId;
use serde::{Deserialize, Serialize};

use crate::{grep_memo::GrepMemo, index::ContentIndex, path, store::RepoShared};

pub use listing::TreeCacheStats;
pub(crate) use listing::{DEFAULT_TREE_CACHE_BYTES, TreeCache};
pub(crate) use view::{Entries, View};
pub(crate) use worktree::Checkout;

/// How a commit's files are materialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TreeKind {
    /// Zero disk: contents read from the object store through the shared blob cache.
    View,
    /// A linked worktree (`git worktree add --detach`), files on disk.
    Worktree,
}

impl std::fmt::Display for TreeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TreeKind::View => "view",
            TreeKind::Worktree => "worktree",
        })
    }
}

impl std::str::FromStr for TreeKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "view" => Ok(TreeKind::View),
            "worktree" => Ok(TreeKind::Worktree),
            other => Err(format!("unknown tree kind {other:?}; expected `view` or `worktree`")),
        }
    }
}

/// The kind of a tracked path. Submodules are not listed: their contents are not in the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A regular file with the executable bit.
    Executable,
    /// A symbolic link; its target may or may not resolve inside the tree.
    Symlink,
}

/// One tracked path of a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// Slash-separated, relative to the root, valid UTF-8 (other paths are not listed).
    pub path: String,
    /// What the path is.
    pub kind: EntryKind,
}

/// Why a path could not be read. The message is what a policy sees.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The path was refused by normalisation or resolution (it would leave the tree, loops, …).
    #[error("{path}: refused: {reason}")]
    Refused {
        /// The path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// Nothing is tracked at the path.
    #[error("{path}: no such file in the repository")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The path names a directory.
    #[error("{path}: is a directory; list its files with glob (e.g. \"{path}/*\")")]
    IsDirectory {
        /// The path as given.
        path: String,
    },
    /// The file is over the size cap.
    #[error("{path}: {size} bytes is over the {cap}-byte limit for this tool")]
    TooLarge {
        /// The path as given.
        path: String,
        /// The file's size in bytes.
        size: u64,
        /// The cap in force.
        cap: u64,
    },
    /// The blob is missing from the object store (an incomplete clone).
    #[error("{path}: the file's content (blob {id}) is missing from the repository store")]
    MissingObject {
        /// The path as given.
        path: String,
        /// The blob that could not be found.
        id: ObjectId,
    },
    /// Reading a worktree file failed.
    #[error("{path}: could not be read: {error}")]
    Io {
        /// The path as given.
        path: String,
        /// The underlying error (its message ends this one's, so it is not a `source()`).
        error: std::io::Error,
    },
}

impl AccessError {
    pub(crate) fn refused(path: &str, reason: impl Into<String>) -> Self {
        AccessError::Refused { path: path.to_owned(), reason: reason.into() }
    }
}

/// One commit of one repository, materialised as a [`TreeKind`]. Shared by `Arc` between
/// rollouts; a worktree is removed from disk (directory and admin entry) when the last
/// reference drops.
#[derive(Debug)]
pub struct Tree {
    commit: ObjectId,
    repo_name: String,
    files: Vec<FileEntry>,
    backend: Backend,
}

#[derive(Debug)]
pub(crate) enum Backend {
    View(View),
    Worktree(Checkout),
}

impl Tree {
    /// The commit this tree shows.
    pub fn commit(&self) -> ObjectId {
        self.commit
    }

    /// The kind of tree.
    pub fn kind(&self) -> TreeKind {
        match self.backend {
            Backend::View(_) => TreeKind::View,
            Backend::Worktree(_) => TreeKind::Worktree,
        }
    }

    /// The repository's store name (`owner__name`).
    pub fn repo_name(&self) -> &str {
        &self.repo_name
    }

    /// Every tracked path (files, executables and symlinks), sorted bytewise like `git ls-files`.
    pub fn files(&self) -> &[FileEntry] {
        &self.files
    }

    /// The checkout directory of a worktree; `None` for a zero-disk view.
    pub fn root(&self) -> Option<&Path> {
        match &self.backend {
            Backend::View(_) => None,
            Backend::Worktree(checkout) => Some(checkout.root()),
        }
    }

    /// Reads the file at a policy-supplied `path`, following in-tree symlinks at most
    /// `max_hops` times and refusing files over `max_bytes`. Returns the resolved path (relative
    /// to the root) and the content.
    pub fn read(&self, path: &str, max_bytes: u64, max_hops: u32) -> Result<(String, Arc<[u8]>), AccessError> {
        self.reader().read(path, max_bytes, max_hops)
    }

    pub(crate) fn new(commit: ObjectId, repo_name: String, files: Vec<FileEntry>, backend: Backend) -> Self {
        Tree { commit, repo_name, files, backend }
    }

    /// The content index and this tree's entries in it, aligned with [`Tree::files`]; `None`
    /// for a worktree (its files on disk may differ from the blobs, through checkout filters)
    /// or when the index is disabled.
    pub(crate) fn index_entries(&self) -> Option<(&ContentIndex, Entries)> {
        match &self.backend {
            Backend::View(view) => view.index_entries(),
            Backend::Worktree(_) => None,
        }
    }

    /// The repository's grep memo and the blob of each of [`Tree::files`]; `None` for a
    /// worktree (as for the index: its files may differ from the blobs).
    pub(crate) fn grep_memo(&self) -> Option<(&GrepMemo, &[Option<ObjectId>])> {
        self.view().map(View::grep_memo)
    }

    pub(crate) fn view(&self) -> Option<&View> {
        match &self.backend {
            Backend::View(view) => Some(view),
            Backend::Worktree(_) => None,
        }
    }

    pub(crate) fn reader(&self) -> Reader<'_> {
        Reader { tree: self, repo: OnceCell::new() }
    }
}

/// Reads from one tree on one thread. For a view it opens a thread-local gix handle on first
/// use and keeps it for the call, so a grep over thousands of blobs pays for it once.
pub(crate) struct Reader<'t> {
    tree: &'t Tree,
    repo: OnceCell<gix::Repository>,
}

impl Reader<'_> {
    /// Normalises and resolves a policy path, then reads the file it names.
    pub(crate) fn read(
        &self,
        user_path: &str,
        max_bytes: u64,
        max_hops: u32,
    ) -> Result<(String, Arc<[u8]>), AccessError> {
        let components = path::normalise(user_path).map_err(|r| AccessError::refused(user_path, r.message()))?;
        match &self.tree.backend {
            Backend::View(view) => view.read(self, user_path, &components, max_bytes, max_hops),
            Backend::Worktree(checkout) => checkout.read(user_path, &components, max_bytes),
        }
    }

    /// Reads a regular file taken from [`Tree::files`], `entry` at position `slot` (never a
    /// symlink: callers skip those), with whether it is known to hold no NUL byte: a view's
    /// blob is checked once when inflated ([`crate::Blob`]); a worktree's file, read from disk
    /// each time, is not known.
    pub(crate) fn read_listed(
        &self,
        slot: usize,
        entry: &FileEntry,
        max_bytes: u64,
    ) -> Result<(Arc<[u8]>, bool), AccessError> {
        match &self.tree.backend {
            Backend::View(view) => view.read_listed(self, slot, entry, max_bytes).map(|b| (b.data, b.text)),
            Backend::Worktree(checkout) => checkout.read_listed(entry, max_bytes).map(|data| (data, false)),
        }
    }

    /// The tree's sorted file list (a view looks paths up in it).
    fn files(&self) -> &[FileEntry] {
        &self.tree.files
    }

    fn shared_repo(&self, shared: &RepoShared) -> &gix::Repository {
        self.repo.get_or_init(|| shared.thread_local())
    }
}
