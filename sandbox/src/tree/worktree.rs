//! The on-disk tree: a linked worktree of the store's bare clone, added with gix.
//!
//! Registration and checkout follow `git worktree add --detach`: gix writes the admin entry
//! `<bare>/worktrees/<id>/{gitdir,HEAD,commondir}` and checks the commit's tree out into a
//! directory under the store's `.trees/`. Dropping the [`Checkout`] deletes both again.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::{Arc, atomic::AtomicBool},
};

use gix::ObjectId;

use super::{AccessError, EntryKind, FileEntry};
use crate::{error::Error, path::is_git_dir, store::RepoShared};

/// A checked-out linked worktree, removed from disk on drop.
pub(crate) struct Checkout {
    shared: Arc<RepoShared>,
    /// Canonical path of the checkout; every read must resolve below it.
    root: PathBuf,
    /// The admin entry `<bare>/worktrees/<id>`.
    admin: PathBuf,
}

impl std::fmt::Debug for Checkout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkout")
            .field("repo", &self.shared.name)
            .field("root", &self.root)
            .field("admin", &self.admin)
            .finish()
    }
}

impl Checkout {
    /// Adds a detached worktree for `commit` at `dir` (which must not exist yet) and lists it.
    pub(crate) fn create(
        shared: Arc<RepoShared>,
        dir: PathBuf,
        commit: ObjectId,
    ) -> Result<(Checkout, Vec<FileEntry>), Error> {
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let add_error = |source| Error::AddWorktree { path: dir.clone(), commit, source };
        let repo = shared.thread_local();
        let never = AtomicBool::new(false);
        // gix reads every registered worktree while preparing; a concurrent removal could make
        // that read fail, so registration and removal take the repository's admin lock. The
        // checkout itself (the slow part) runs outside it.
        let prepared = {
            let _admin = shared.admin_lock();
            repo.prepare_add_worktree(&dir, gix::worktree::add::Head::Detached(commit), &never).map_err(add_error)?
        };
        let admin = prepared.repo().git_dir().to_owned();
        let (worktree_repo, _outcome) = prepared.checkout(gix::progress::Discard, &never).map_err(add_error)?;
        drop(worktree_repo);
        // From here on `checkout` owns the directory and admin entry: an error below removes
        // both on drop.
        let mut checkout = Checkout { root: dir.clone(), shared, admin };
        checkout.root = fs::canonicalize(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut files = Vec::new();
        walk(&checkout.root, "", &mut files).map_err(|e| Error::io(&dir, e))?;
        files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok((checkout, files))
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a normalised path with the kernel (`canonicalize` follows every symlink and
    /// fails on loops), then requires the result to lie below the canonical root, compared
    /// component by component so `/tree_x` is not inside `/tree`.
    pub(crate) fn read(
        &self,
        user_path: &str,
        components: &[&str],
        max_bytes: u64,
    ) -> Result<(String, Arc<[u8]>), AccessError> {
        let mut joined = self.root.clone();
        joined.extend(components);
        let canonical = match fs::canonicalize(&joined) {
            Ok(path) => path,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(AccessError::NotFound { path: user_path.to_owned() });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(AccessError::NotFound { path: user_path.to_owned() });
            }
            // ELOOP ("too many levels of symbolic links") and anything else odd.
            Err(e) => {
                return Err(AccessError::refused(user_path, format!("cannot be resolved: {e}")));
            }
        };
        let Some(relative) = inside(&self.root, &canonical) else {
            return Err(AccessError::refused(user_path, "resolves to a location outside the repository"));
        };
        let metadata =
            fs::metadata(&canonical).map_err(|error| AccessError::Io { path: user_path.to_owned(), error })?;
        if metadata.is_dir() {
            return Err(AccessError::IsDirectory {
                path: if user_path.is_empty() { ".".to_owned() } else { user_path.trim_end_matches('/').to_owned() },
            });
        }
        if !metadata.is_file() {
            return Err(AccessError::refused(user_path, "is not a regular file"));
        }
        let data = read_capped(&canonical, metadata.len(), user_path, max_bytes)?;
        Ok((relative, data))
    }

    /// Reads a listed regular file. Listed paths come from a walk that never follows symlinks,
    /// so they contain no symlink component; the `symlink_metadata` check keeps it that way for
    /// the last component too.
    pub(crate) fn read_listed(&self, entry: &FileEntry, max_bytes: u64) -> Result<Arc<[u8]>, AccessError> {
        let path = self.root.join(&entry.path);
        let io = |error| AccessError::Io { path: entry.path.clone(), error };
        let metadata = fs::symlink_metadata(&path).map_err(io)?;
        if !metadata.is_file() {
            return Err(AccessError::refused(&entry.path, "is not a regular file"));
        }
        read_capped(&path, metadata.len(), &entry.path, max_bytes)
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let _admin = self.shared.admin_lock();
        // Best effort: a leftover is pruned by the next `RepoStore::open`. `remove_dir_all`
        // does not follow symlinks, so links pointing out of the tree are removed, not their
        // targets.
        let _ = fs::remove_dir_all(&self.root);
        let _ = fs::remove_dir_all(&self.admin);
    }
}

/// `path` relative to `root` when it lies strictly below it and not inside `.git`, as a
/// slash-separated string.
pub(crate) fn inside(root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?;
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            std::path::Component::Normal(part) => {
                let part = part.to_str()?;
                if is_git_dir(part) {
                    return None;
                }
                parts.push(part);
            }
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

fn read_capped(path: &Path, size: u64, user_path: &str, max_bytes: u64) -> Result<Arc<[u8]>, AccessError> {
    if size > max_bytes {
        return Err(AccessError::TooLarge { path: user_path.to_owned(), size, cap: max_bytes });
    }
    let data = fs::read(path).map_err(|error| AccessError::Io { path: user_path.to_owned(), error })?;
    Ok(Arc::from(data))
}

/// Lists files and symlinks below `dir`, never following symlinks and skipping the root's
/// `.git` file (the link back to the admin entry). Non-UTF-8 names are left out, as in the view.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<FileEntry>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if prefix.is_empty() && is_git_dir(&name) {
            continue;
        }
        let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            walk(&entry.path(), &path, out)?;
        } else if file_type.is_symlink() {
            out.push(FileEntry { path, kind: EntryKind::Symlink });
        } else if file_type.is_file() {
            let kind = if is_executable(&entry.metadata()?) { EntryKind::Executable } else { EntryKind::File };
            out.push(FileEntry { path, kind });
        }
    }
    Ok(())
}

#[cfg(unix)]
fn is_executable(metadata: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    metadata.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_metadata: &fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_check_is_by_component() {
        let root = Path::new("/tmp/t/tree");
        assert_eq!(inside(root, Path::new("/tmp/t/tree/a/b.py")).as_deref(), Some("a/b.py"));
        assert_eq!(inside(root, Path::new("/tmp/t/tree_x/secret")), None);
        assert_eq!(inside(root, Path::new("/tmp/t/tree/.git/config")), None);
        assert_eq!(inside(root, Path::new("/etc/passwd")), None);
    }

    #[cfg(unix)]
    #[test]
    fn sibling_with_common_prefix_is_outside() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = fs::canonicalize(tmp.path()).expect("canonical tempdir");
        let root = base.join("tree");
        let sibling = base.join("tree_x");
        fs::create_dir_all(&root).expect("mkdir tree");
        fs::create_dir_all(&sibling).expect("mkdir tree_x");
        fs::write(sibling.join("secret"), "SECRET").expect("write secret");
        std::os::unix::fs::symlink(sibling.join("secret"), root.join("link")).expect("symlink");
        let canonical = fs::canonicalize(root.join("link")).expect("resolves");
        assert!(canonical.to_string_lossy().starts_with(&*root.to_string_lossy()), "a string prefix check would pass");
        assert_eq!(inside(&root, &canonical), None, "the component check does not");
    }
}
