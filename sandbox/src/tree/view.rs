//! The zero-disk tree: a path index of one commit, contents read from the object store.
//!
//! Symlinks are resolved inside the index, never on the filesystem: a link's blob holds its
//! target, which is spliced into the remaining path and resolved again from the root, so `..`
//! in a target is resolved physically (relative to where the link lives) as POSIX does.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
};

use gix::ObjectId;

use super::{AccessError, EntryKind, FileEntry, Reader, listing::ItemKind};
use crate::{
    blob_cache::{Blob, inflated},
    error::Error,
    grep_memo::GrepMemo,
    index::{BlobEntry, ContentIndex},
    path::is_git_dir,
    store::RepoShared,
};

/// Index entries of a view's files, aligned with [`super::Tree::files`] (`None`: no entry).
pub(crate) type Entries = Arc<[Option<Arc<BlobEntry>>]>;

/// The index of one commit's tree and a handle on the repository's objects and blob cache.
pub(crate) struct View {
    shared: Arc<RepoShared>,
    /// The blob of each symlink (its target), by its position in the sorted file list; a path
    /// is looked up in that list ([`super::Tree::files`]) by binary search.
    links: HashMap<usize, ObjectId>,
    dirs: HashSet<String>,
    /// The blob of each listed file, aligned with the sorted file list; `None` for symlinks,
    /// which grep does not search.
    ids: Vec<Option<ObjectId>>,
    /// Whether the background index build was started, and whether it has finished.
    index_requested: AtomicBool,
    index_done: Arc<AtomicBool>,
    /// Once every file has an entry (or the build is over), the entries, kept for the view's life.
    index_snapshot: OnceLock<Entries>,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("repo", &self.shared.name)
            .field("links", &self.links.len())
            .field("dirs", &self.dirs.len())
            .finish()
    }
}

impl View {
    /// Walks the commit's tree once and indexes every path. Non-UTF-8 paths and submodules are
    /// left out (the worktree kind leaves them out too, so both kinds list the same paths).
    pub(crate) fn build(shared: Arc<RepoShared>, commit: ObjectId) -> Result<(View, Vec<FileEntry>), Error> {
        let repo = shared.thread_local();
        let tree_error = |source| Error::TreeRead { repo: shared.name.clone(), commit, source };
        let root = repo.find_commit(commit).and_then(|c| c.tree_id()).map_err(tree_error)?.detach();
        let mut dirs = HashSet::new();
        let mut files: Vec<(FileEntry, ObjectId)> = Vec::new();
        let walked = shared.trees.walk(&repo, root, |path, id, kind| match kind {
            ItemKind::Dir => {
                dirs.insert(path);
            }
            ItemKind::File(kind) => files.push((FileEntry { path, kind }, id)),
        });
        walked.map_err(tree_error)?;
        files.sort_unstable_by(|a, b| a.0.path.cmp(&b.0.path));
        let ids = files.iter().map(|(entry, id)| (entry.kind != EntryKind::Symlink).then_some(*id)).collect();
        let links = files
            .iter()
            .enumerate()
            .filter(|(_, (entry, _))| entry.kind == EntryKind::Symlink)
            .map(|(slot, (_, id))| (slot, *id))
            .collect();
        let files = files.into_iter().map(|(entry, _)| entry).collect();
        let view = View {
            shared,
            links,
            dirs,
            ids,
            index_requested: AtomicBool::new(false),
            index_done: Arc::new(AtomicBool::new(false)),
            index_snapshot: OnceLock::new(),
        };
        Ok((view, files))
    }

    /// The index entries of this view's files, starting the background build on first use
    /// (see [`crate::index`]); `None` when the repository's index is disabled.
    pub(crate) fn index_entries(&self) -> Option<(&ContentIndex, Entries)> {
        let index = &self.shared.index;
        if !index.enabled() {
            return None;
        }
        if let Some(entries) = self.index_snapshot.get() {
            return Some((index, entries.clone()));
        }
        let (found, complete) = index.lookup(&self.ids);
        // Only a view with blobs the index lacks starts a build, and only for those blobs: the
        // build's threads run at a low priority, and one preempted while it holds the index's
        // lock (even to find which blobs are new) made every grep of the repository give up on
        // the index meanwhile (see `GREP_PATIENCE`).
        if !complete && !self.index_requested.swap(true, Ordering::SeqCst) {
            let shared = self.shared.clone();
            let ids: Vec<ObjectId> =
                self.ids.iter().zip(&found).filter(|(_, entry)| entry.is_none()).filter_map(|(id, _)| *id).collect();
            let done = self.index_done.clone();
            crate::index::spawn_background(move || {
                shared.index.build(&shared, &ids, false, None);
                done.store(true, Ordering::SeqCst);
            });
        }
        let entries: Entries = found.into();
        if complete || self.index_done.load(Ordering::SeqCst) {
            let _ = self.index_snapshot.set(entries.clone());
        }
        Some((index, entries))
    }

    /// The repository's grep memo and the blob of each listed file (`None` for symlinks).
    pub(crate) fn grep_memo(&self) -> (&GrepMemo, &[Option<ObjectId>]) {
        (&self.shared.memo, &self.ids)
    }

    /// The blobs of this view's regular files, for an explicit index build.
    pub(crate) fn blob_ids(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.ids.iter().flatten().copied()
    }

    pub(crate) fn read(
        &self,
        reader: &Reader<'_>,
        user_path: &str,
        components: &[&str],
        max_bytes: u64,
        max_hops: u32,
    ) -> Result<(String, Arc<[u8]>), AccessError> {
        let (resolved, id) = self.resolve(reader, user_path, components, max_hops)?;
        let blob = self.blob(reader, id, user_path, max_bytes)?;
        Ok((resolved, blob.data))
    }

    /// Reads the listed file at `slot` by its blob id (no path lookup: greps read every file).
    pub(crate) fn read_listed(
        &self,
        reader: &Reader<'_>,
        slot: usize,
        entry: &FileEntry,
        max_bytes: u64,
    ) -> Result<Blob, AccessError> {
        match self.ids.get(slot) {
            Some(Some(id)) => self.blob(reader, *id, &entry.path, max_bytes),
            _ => Err(AccessError::NotFound { path: entry.path.clone() }),
        }
    }

    /// Resolves a normalised path to a regular file's blob, following symlinks in the index.
    fn resolve(
        &self,
        reader: &Reader<'_>,
        user_path: &str,
        components: &[&str],
        max_hops: u32,
    ) -> Result<(String, ObjectId), AccessError> {
        let mut pending: VecDeque<String> = components.iter().map(|c| (*c).to_owned()).collect();
        let mut resolved: Vec<String> = Vec::new();
        let mut hops = 0u32;
        while let Some(component) = pending.pop_front() {
            match component.as_str() {
                "" | "." => continue,
                ".." => {
                    // Only link targets get here: user paths with `..` were refused earlier.
                    if resolved.pop().is_none() {
                        return Err(AccessError::refused(user_path, "a symlink on the way leaves the repository"));
                    }
                    continue;
                }
                c if is_git_dir(c) => {
                    return Err(AccessError::refused(user_path, "a symlink on the way points into `.git`"));
                }
                _ => {}
            }
            resolved.push(component);
            let joined = resolved.join("/");
            if self.dirs.contains(&joined) {
                continue;
            }
            let files = reader.files();
            let found = files.binary_search_by(|f| f.path.as_str().cmp(&joined)).ok();
            match found.map(|slot| (slot, files[slot].kind)) {
                None => {
                    return Err(AccessError::NotFound { path: user_path.to_owned() });
                }
                Some((slot, EntryKind::Symlink)) => {
                    let Some(&id) = self.links.get(&slot) else {
                        return Err(AccessError::NotFound { path: user_path.to_owned() });
                    };
                    hops += 1;
                    if hops > max_hops {
                        return Err(AccessError::refused(
                            user_path,
                            format!("more than {max_hops} symlinks on the way (a symlink loop?)"),
                        ));
                    }
                    let target = self.blob(reader, id, user_path, 4096)?.data;
                    let target = std::str::from_utf8(&target)
                        .map_err(|_| AccessError::refused(user_path, "a symlink on the way has a non-UTF-8 target"))?;
                    if target.contains('\0') {
                        return Err(AccessError::refused(
                            user_path,
                            "a symlink on the way has a NUL byte in its target",
                        ));
                    }
                    if target.starts_with('/') {
                        return Err(AccessError::refused(
                            user_path,
                            "a symlink on the way points to an absolute path outside the repository",
                        ));
                    }
                    // The link is replaced by its target, relative to the link's directory.
                    resolved.pop();
                    for part in target.split('/').rev() {
                        pending.push_front(part.to_owned());
                    }
                }
                Some((slot, _)) => {
                    if pending.iter().any(|c| !c.is_empty() && c != ".") {
                        return Err(AccessError::NotFound { path: user_path.to_owned() });
                    }
                    let Some(Some(id)) = self.ids.get(slot) else {
                        return Err(AccessError::NotFound { path: user_path.to_owned() });
                    };
                    return Ok((joined, *id));
                }
            }
        }
        // Every component was a directory (or there were none: the root).
        Err(AccessError::IsDirectory {
            path: if user_path.is_empty() { ".".to_owned() } else { user_path.trim_end_matches('/').to_owned() },
        })
    }

    /// The blob's content from the shared cache or the object store (inflated by one caller at a
    /// time, [`crate::blob_cache::BlobCache::get_or_load`]). Sizes are checked against the object
    /// header before decompressing, so a huge blob costs nothing to refuse.
    fn blob(&self, reader: &Reader<'_>, id: ObjectId, path: &str, max_bytes: u64) -> Result<Blob, AccessError> {
        let too_large = |size: u64| AccessError::TooLarge { path: path.to_owned(), size, cap: max_bytes };
        let blob = self.shared.blobs.get_or_load(&id, || {
            let missing = |_| AccessError::MissingObject { path: path.to_owned(), id };
            let repo = reader.shared_repo(&self.shared);
            let size = repo.find_header(id).map_err(missing)?.size();
            if size > max_bytes {
                return Err(too_large(size));
            }
            Ok(inflated(repo.find_blob(id).map_err(missing)?))
        })?;
        // A blob another caller loaded (or cached) under a larger cap than this one's.
        let size = blob.data.len() as u64;
        if size > max_bytes { Err(too_large(size)) } else { Ok(blob) }
    }
}
