//! Decoded tree objects, cached per repository by tree id, and the walk of a commit's paths.
//!
//! A view of a commit needs every path of its tree. Walking the tree objects of each commit
//! again (what `gix`'s traversal does) found, inflated and parsed ~150 objects per sympy commit,
//! an eighth of a real-repository study's CPU. A tree id names its content, so a decoded tree
//! serves every commit that contains it: neighbouring commits share all but the few trees on the
//! paths they changed, and a commit opened again (the held-out instances, at every evaluation)
//! decodes nothing. Only a tree's own entries are kept (not the paths below it), so the cache
//! costs about as much as the distinct tree objects it holds.
//!
//! Non-UTF-8 names are left out with everything below them, and submodules are left out, as the
//! views always did. The walk keeps its own stack, so a deep tree cannot overflow the thread's.

use std::sync::{Arc, Mutex, MutexGuard};

use gix::{ObjectId, objs::tree::EntryKind as GitKind};
use lru::LruCache;

use super::EntryKind;

/// What a walked path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemKind {
    /// A directory (a tree entry).
    Dir,
    /// A file of the given kind.
    File(EntryKind),
}

/// One entry of a decoded tree.
#[derive(Debug)]
struct Entry {
    name: Box<str>,
    id: ObjectId,
    kind: ItemKind,
}

/// A tree object's entries that a view lists, in the tree's order.
#[derive(Debug)]
struct Node {
    entries: Vec<Entry>,
}

impl Node {
    /// An estimate of the memory the node holds, for the cache's bound.
    fn bytes(&self) -> usize {
        self.entries.iter().map(|entry| entry.name.len() + size_of::<Entry>()).sum::<usize>() + size_of::<Node>()
    }
}

/// Lookups of a repository's decoded trees ([`crate::Repo::tree_cache_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeCacheStats {
    /// Trees found decoded.
    pub hits: u64,
    /// Tree objects read and decoded.
    pub decoded: u64,
}

/// A byte-bounded LRU of decoded trees, keyed by tree id.
#[derive(Debug)]
pub(crate) struct TreeCache {
    inner: Mutex<Inner>,
    capacity_bytes: usize,
}

#[derive(Debug)]
struct Inner {
    map: LruCache<ObjectId, (Arc<Node>, usize), foldhash::fast::RandomState>,
    bytes: usize,
    stats: TreeCacheStats,
}

impl TreeCache {
    pub(crate) fn new(capacity_bytes: usize) -> TreeCache {
        TreeCache {
            inner: Mutex::new(Inner {
                map: LruCache::unbounded_with_hasher(foldhash::fast::RandomState::default()),
                bytes: 0,
                stats: TreeCacheStats::default(),
            }),
            capacity_bytes,
        }
    }

    pub(crate) fn stats(&self) -> TreeCacheStats {
        self.lock().stats
    }

    /// Calls `visit` with every path below the tree `root` (`/`-separated, relative to it), its
    /// object id and its kind, each directory before what it holds. Trees the cache lacks are
    /// read and decoded once.
    pub(crate) fn walk(
        &self,
        repo: &gix::Repository,
        root: ObjectId,
        mut visit: impl FnMut(String, ObjectId, ItemKind),
    ) -> gix::Result<()> {
        // Each frame: a tree, the path it is at (with a trailing `/`, empty at the root) and the
        // next entry to visit.
        let mut stack = vec![(self.node(repo, root)?, String::new(), 0usize)];
        while let Some((node, prefix, next)) = stack.last_mut() {
            let Some(entry) = node.entries.get(*next) else {
                stack.pop();
                continue;
            };
            *next += 1;
            let path = format!("{prefix}{}", entry.name);
            let (id, kind) = (entry.id, entry.kind);
            if kind == ItemKind::Dir {
                let child = self.node(repo, id)?;
                stack.push((child, format!("{path}/"), 0));
            }
            visit(path, id, kind);
        }
        Ok(())
    }

    fn node(&self, repo: &gix::Repository, id: ObjectId) -> gix::Result<Arc<Node>> {
        if let Some(hit) = self.get(id) {
            return Ok(hit);
        }
        let tree = repo.find_tree(id)?;
        let entries = tree
            .decode()?
            .entries
            .iter()
            .filter_map(|entry| {
                let kind = match entry.mode.kind() {
                    GitKind::Tree => ItemKind::Dir,
                    GitKind::Blob => ItemKind::File(EntryKind::File),
                    GitKind::BlobExecutable => ItemKind::File(EntryKind::Executable),
                    GitKind::Link => ItemKind::File(EntryKind::Symlink),
                    GitKind::Commit => return None,
                };
                let name = std::str::from_utf8(entry.filename).ok()?;
                Some(Entry { name: name.into(), id: entry.oid.to_owned(), kind })
            })
            .collect();
        Ok(self.insert(id, Node { entries }))
    }

    fn get(&self, id: ObjectId) -> Option<Arc<Node>> {
        let mut inner = self.lock();
        let hit = inner.map.get(&id).map(|(node, _)| node.clone());
        if hit.is_some() {
            inner.stats.hits += 1;
        }
        hit
    }

    fn insert(&self, id: ObjectId, node: Node) -> Arc<Node> {
        let bytes = node.bytes();
        let node = Arc::new(node);
        let mut inner = self.lock();
        inner.stats.decoded += 1;
        if bytes > self.capacity_bytes {
            return node;
        }
        if let Some((_, old)) = inner.map.put(id, (node.clone(), bytes)) {
            inner.bytes -= old;
        }
        inner.bytes += bytes;
        while inner.bytes > self.capacity_bytes {
            let Some((_, (_, freed))) = inner.map.pop_lru() else { break };
            inner.bytes -= freed;
        }
        node
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each critical section leaves the map and its byte count consistent.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The bound of a repository's decoded trees: sympy's ~150 trees a commit take ~200 KiB, and
/// neighbouring commits share most of them.
pub(crate) const DEFAULT_TREE_CACHE_BYTES: usize = 16 << 20;
