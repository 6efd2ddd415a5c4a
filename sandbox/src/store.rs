//! The repository store: one bare clone per repository, and the trees made from it.

use std::{
    collections::HashMap,
    fs,
    num::NonZeroUsize,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, MutexGuard, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use gix::ObjectId;
use lru::LruCache;

use crate::{
    blob_cache::BlobCache,
    error::Error,
    grep_memo::GrepMemo,
    index::{ContentIndex, IndexProgress, IndexStats},
    tree::{Backend, Checkout, DEFAULT_TREE_CACHE_BYTES, Tree, TreeCache, TreeCacheStats, TreeKind, View},
};

/// Options of a [`RepoStore`] that have good defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Byte budget of the store's blob cache, one for all its repositories' zero-disk views
    /// (the largest repository takes the room the others leave).
    pub blob_cache_bytes: usize,
    /// Trees kept alive per repository after their last user drops them, most recent first,
    /// so that sequential rollouts of one commit reuse a tree. 0 keeps none.
    pub keep_recent_trees: usize,
    /// Byte bound of each repository's content index (entries and posting lists, see the crate
    /// docs); 0 disables the index and every grep scans.
    pub index_bytes: usize,
    /// Keep each repository's content index in `<root>/.index/<name>.trigrams` and its grep
    /// memo in `<root>/.index/<name>.grepmemo` between processes: read before the first build
    /// (the memo: before the first grep), written when the repository is dropped (or by
    /// [`Repo::save_index`]) if they grew. A missing, old or corrupt file is ignored and rebuilt.
    /// Off by default (a store's directory then holds only mirrors and trees); `rewardlab
    /// sandbox --store` turns it on.
    pub persist_index: bool,
    /// Byte bound of each repository's grep memo (what a pattern matched in each blob it was
    /// searched in, shared by every commit; see the crate docs); 0 disables it and every grep
    /// scans the files the index leaves.
    pub grep_memo_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            blob_cache_bytes: 1 << 30,
            keep_recent_trees: 16,
            index_bytes: 256 << 20,
            persist_index: false,
            grep_memo_bytes: 64 << 20,
        }
    }
}

/// One directory of bare mirrors (`<root>/owner__name.git`), shared by every rollout.
/// See the crate documentation for the layout.
#[derive(Debug)]
pub struct RepoStore {
    root: PathBuf,
    options: StoreOptions,
    repos: Mutex<HashMap<String, RepoSlot>>,
    seq: Arc<AtomicU64>,
    /// Shared with every repository ([`BlobCache::share`]).
    blobs: BlobCache,
}

/// A repository's place in the store: filled once it is cloned or adopted.
type RepoSlot = Arc<Mutex<Option<Arc<Repo>>>>;

/// The store name of a repository: `owner__name` from the last two components of a URL or
/// path (`https://github.com/psf/requests.git` → `psf__requests`), or a name already in that
/// form (`psf__requests`, `psf__requests.git`). Components may use `A-Z a-z 0-9 . _ -`.
pub fn mirror_name(spec: &str) -> Result<String, Error> {
    let invalid = |reason| Error::InvalidName { spec: spec.to_owned(), reason };
    let trimmed = spec.trim_end_matches('/');
    // Drop a URL scheme and host, or the `host:` of scp-like syntax, keeping the path.
    let path = match trimmed.split_once("://") {
        Some((_, rest)) => rest.split_once('/').map_or("", |(_, p)| p),
        None => match trimmed.split_once(':') {
            Some((host, rest)) if !host.contains('/') => rest,
            _ => trimmed,
        },
    };
    let mut parts = path.rsplit('/').filter(|p| !p.is_empty());
    let last = parts.next().ok_or_else(|| invalid("it has no path components"))?;
    let last = last.strip_suffix(".git").unwrap_or(last);
    let name = if last.contains("__") {
        last.to_owned()
    } else {
        let owner = parts.next().ok_or_else(|| invalid("it needs an owner and a name (owner/name)"))?;
        format!("{owner}__{last}")
    };
    if !is_store_name(&name) {
        return Err(invalid("components must be non-empty, use only A-Z a-z 0-9 . _ -, and not start with `.`"));
    }
    Ok(name)
}

/// Whether `name` is a store name: `__`-separated components, each non-empty, of
/// `A-Z a-z 0-9 . _ -`, not starting with `.` (so it is one safe directory name).
fn is_store_name(name: &str) -> bool {
    name.contains("__")
        && name.split("__").all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        })
}

/// The store name of a local repository directory, whatever characters its path holds.
///
/// The path is made canonical first (so `../requests`, a symlinked directory and the real
/// directory name one repository). When the canonical path's last two components make a valid
/// `owner__name` (as [`mirror_name`] would derive), that is the name, so a store's existing
/// mirrors keep their names. Otherwise the name is `local__<stem>-<hash>`: the last component
/// with every character outside `A-Z a-z 0-9 . _ -` replaced by `-`, and the 64-bit FNV-1a hash
/// of the canonical path's bytes, so two directories with the same stem never share a mirror and
/// no name is ever taken from unvalidated text.
pub fn local_mirror_name(path: &Path) -> Result<String, Error> {
    let canonical = fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    if let Some(name) = component_store_name(&canonical) {
        return Ok(name);
    }
    let raw = canonical.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let raw = raw.strip_suffix(".git").unwrap_or(&raw);
    let mut stem: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' }).take(40).collect();
    while stem.contains("__") {
        stem = stem.replace("__", "_");
    }
    let stem = stem.trim_start_matches(['.', '_']).trim_end_matches('_');
    let stem = if stem.is_empty() { "repo" } else { stem };
    Ok(format!("local__{stem}-{:016x}", fnv1a(canonical.as_os_str().as_encoded_bytes())))
}

/// The `owner__name` store name that `path`'s last two components make, as written (no
/// canonicalisation): `mirrors/psf__requests.git` → `psf__requests`, `psf/requests` →
/// `psf__requests`; `None` when they make no valid store name.
pub fn component_store_name(path: &Path) -> Option<String> {
    fn component(path: Option<&Path>) -> Option<&str> {
        path.and_then(Path::file_name).and_then(|n| n.to_str())
    }
    let (last, owner) = (component(Some(path))?, component(path.parent())?);
    let last = last.strip_suffix(".git").unwrap_or(last);
    let name = if last.contains("__") { last.to_owned() } else { format!("{owner}__{last}") };
    is_store_name(&name).then_some(name)
}

/// 64-bit FNV-1a: stable across Rust versions and platforms, unlike the standard hasher, so a
/// store name derived from a path is the same in every run.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Where a repository is cloned from.
enum Source<'a> {
    /// A canonical local directory.
    Path(&'a Path),
    /// A URL, scp-like address or path as text.
    Spec(&'a str),
}

impl Source<'_> {
    fn describe(&self) -> String {
        match self {
            Source::Path(path) => path.display().to_string(),
            Source::Spec(spec) => (*spec).to_owned(),
        }
    }
}

impl RepoStore {
    /// Opens (creating if needed) the store at `root` with default options, pruning what a
    /// crashed run left behind.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(root, StoreOptions::default())
    }

    /// Opens the store with explicit options.
    pub fn open_with(root: impl AsRef<Path>, options: StoreOptions) -> Result<Self, Error> {
        let root = root.as_ref();
        fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let root = fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
        let blobs = BlobCache::new(options.blob_cache_bytes);
        let store =
            RepoStore { root, options, repos: Mutex::new(HashMap::new()), seq: Arc::new(AtomicU64::new(0)), blobs };
        store.prune()?;
        Ok(store)
    }

    /// Writes every open repository's content index that grew since it was read or last
    /// written (see [`StoreOptions::persist_index`] and [`Repo::save_index`]); the number
    /// written. Dropping a repository saves too, but a process that ends with repositories
    /// still shared (a study's store outlives its runs) should call this before it exits.
    pub fn save_indexes(&self) -> Result<usize, Error> {
        let mut written = 0;
        for repo in self.open_repos() {
            written += usize::from(repo.save_index()?);
        }
        Ok(written)
    }

    /// The repositories opened so far, by name (for their counters: [`Repo::index_stats`],
    /// [`Repo::blob_cache`]).
    pub fn open_repos(&self) -> Vec<Arc<Repo>> {
        let slots: Vec<_> = lock(&self.repos).values().cloned().collect();
        let mut repos: Vec<Arc<Repo>> = slots.iter().filter_map(|slot| lock(slot).clone()).collect();
        repos.sort_by(|a, b| a.name().cmp(b.name()));
        repos
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The store's canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where worktrees are checked out (`<root>/.trees`).
    pub fn trees_root(&self) -> PathBuf {
        self.root.join(".trees")
    }

    /// Where the bare mirror of `name` lives (`<root>/<name>.git`).
    pub fn mirror_path(&self, name: &str) -> PathBuf {
        self.root.join(format!("{name}.git"))
    }

    /// The repository for `spec`: a URL or local path (cloned bare on first use unless its
    /// mirror already exists) or a store name (`owner/name`, `owner__name`) of an existing mirror.
    /// An existing local path is taken as a path whatever its characters (see [`RepoStore::repo_at`]).
    pub fn repo(&self, spec: &str) -> Result<Arc<Repo>, Error> {
        if !spec.contains("://") && Path::new(spec).exists() {
            return self.repo_at(Path::new(spec));
        }
        let name = mirror_name(spec)?;
        let is_source = spec.contains("://") || spec.contains('@');
        self.repo_named(&name, is_source.then_some(spec))
    }

    /// The repository at a local directory (any path: spaces, `+`, Unicode, symlinks), cloned
    /// bare on first use under the name [`local_mirror_name`] gives it.
    pub fn repo_at(&self, path: &Path) -> Result<Arc<Repo>, Error> {
        let canonical = fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
        let name = local_mirror_name(&canonical)?;
        self.repo_from(&name, Some(Source::Path(&canonical)))
    }

    /// The repository stored as `name` (a valid store name, see [`mirror_name`]), cloned from
    /// `source` if its mirror does not exist yet.
    pub fn repo_named(&self, name: &str, source: Option<&str>) -> Result<Arc<Repo>, Error> {
        self.repo_from(name, source.map(Source::Spec))
    }

    fn repo_from(&self, name: &str, source: Option<Source<'_>>) -> Result<Arc<Repo>, Error> {
        // The name becomes directory names in the store: never let one escape it.
        if !is_store_name(name) {
            return Err(Error::InvalidName {
                spec: name.to_owned(),
                reason: "store names are `owner__name` with components of A-Z a-z 0-9 . _ - not starting with `.`",
            });
        }
        let slot = {
            let mut repos = lock(&self.repos);
            repos.entry(name.to_owned()).or_default().clone()
        };
        // One lock per name: a clone of one repository does not hold up the others.
        let mut slot = lock(&slot);
        if let Some(repo) = slot.as_ref() {
            return Ok(repo.clone());
        }
        let path = self.mirror_path(name);
        if !path.exists() {
            let Some(source) = source else {
                return Err(Error::InvalidName {
                    spec: name.to_owned(),
                    reason: "no mirror of that name in the store, and no URL or path to clone from",
                });
            };
            self.clone_into(&source, name, &path)?;
        }
        let git = open_bare(&path)?;
        let persisted =
            |kind: &str| self.options.persist_index.then(|| self.root.join(".index").join(format!("{name}.{kind}")));
        let repo = Arc::new(Repo {
            shared: Arc::new(RepoShared {
                name: name.to_owned(),
                path: path.clone(),
                git,
                blobs: self.blobs.share(),
                index: ContentIndex::new(self.options.index_bytes, persisted("trigrams")),
                memo: GrepMemo::new(self.options.grep_memo_bytes, persisted("grepmemo")),
                trees: TreeCache::new(DEFAULT_TREE_CACHE_BYTES),
                admin: Mutex::new(()),
            }),
            trees_dir: self.trees_root().join(format!("{name}.git")),
            seq: self.seq.clone(),
            slots: Mutex::new(HashMap::new()),
            recent: Mutex::new(NonZeroUsize::new(self.options.keep_recent_trees).map(LruCache::new)),
        });
        *slot = Some(repo.clone());
        Ok(repo)
    }

    /// Clones `source` bare into a temporary directory and renames it into place, so a crash
    /// never leaves a half-cloned mirror under its final name.
    fn clone_into(&self, source: &Source<'_>, name: &str, dest: &Path) -> Result<(), Error> {
        let tmp_root = self.root.join(".tmp");
        let tmp = tmp_root.join(format!("{}-{name}.git", std::process::id()));
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        fs::create_dir_all(&tmp_root).map_err(|e| Error::io(&tmp_root, e))?;
        let clone_error = |err| Error::Clone { url: source.describe(), dest: dest.to_owned(), source: err };
        let url = match source {
            Source::Path(path) => gix::Url::try_from(*path),
            Source::Spec(spec) => match fs::canonicalize(spec) {
                Ok(local) => gix::Url::try_from(local.as_path()),
                Err(_) => gix::Url::try_from(*spec),
            },
        }
        .map_err(|e| clone_error(gix::Error::from_error(e)))?;
        let mut prepare = gix::prepare_clone_bare(url, &tmp).map_err(clone_error)?;
        let never = AtomicBool::new(false);
        let (repo, _outcome) = prepare.fetch_only(gix::progress::Discard, &never).map_err(clone_error)?;
        drop(repo);
        drop(prepare);
        match fs::rename(&tmp, dest) {
            Ok(()) => Ok(()),
            // Another process on the same store (a concurrent run of the study) cloned it first;
            // renaming onto its non-empty directory fails, and its clone serves us as well.
            Err(_) if dest.join("HEAD").is_file() => {
                fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
                Ok(())
            }
            Err(e) => Err(Error::io(dest, e)),
        }
    }

    /// Removes leftovers of crashed runs: worktree directories made by processes that are gone,
    /// admin entries whose checkout under `.trees/` is missing, and abandoned clones.
    fn prune(&self) -> Result<(), Error> {
        let trees_root = self.trees_root();
        for repo_dir in read_dir_paths(&trees_root)? {
            for tree_dir in read_dir_paths(&repo_dir)? {
                if made_by_dead_process(&tree_dir) {
                    fs::remove_dir_all(&tree_dir).map_err(|e| Error::io(&tree_dir, e))?;
                }
            }
        }
        for mirror in read_dir_paths(&self.root)? {
            if mirror.extension().is_some_and(|e| e == "git") && mirror.is_dir() {
                prune_admin_entries(&mirror, &trees_root)?;
            }
        }
        for tmp in read_dir_paths(&self.root.join(".tmp"))? {
            if made_by_dead_process(&tmp) {
                fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
            }
        }
        Ok(())
    }
}

/// A repository of the store, with its trees. Cheap to share; trees hold what they need, so a
/// tree outlives neither more nor less than its own `Arc`s.
#[derive(Debug)]
pub struct Repo {
    shared: Arc<RepoShared>,
    trees_dir: PathBuf,
    seq: Arc<AtomicU64>,
    slots: Mutex<HashMap<TreeKey, Arc<Mutex<Weak<Tree>>>>>,
    recent: Mutex<Option<LruCache<TreeKey, Arc<Tree>>>>,
}

type TreeKey = (ObjectId, TreeKind);

impl Repo {
    /// The store name (`owner__name`).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The bare mirror's directory.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The blob cache of this repository's zero-disk views: the store's, with this repository's
    /// lookups counted apart.
    pub fn blob_cache(&self) -> &BlobCache {
        &self.shared.blobs
    }

    /// Counters of this repository's decoded trees, which views of every commit share.
    pub fn tree_cache_stats(&self) -> TreeCacheStats {
        self.shared.trees.stats()
    }

    /// Counters of this repository's content index.
    pub fn index_stats(&self) -> IndexStats {
        let memo = self.shared.memo.stats();
        IndexStats {
            memo_files: memo.served,
            memo_patterns: memo.patterns,
            memo_bytes: memo.bytes,
            memo_loaded: memo.loaded,
            ..self.shared.index.stats()
        }
    }

    /// Writes the content index and the grep memo to their files under the store now (see
    /// [`StoreOptions::persist_index`]); `Ok(false)` when they are not persisted or neither
    /// grew since it was read or last written. Dropping the repository does the same, silently.
    pub fn save_index(&self) -> Result<bool, Error> {
        let index = &self.shared.index;
        let wrote_index = index.save().map_err(|e| Error::io(index.file().unwrap_or(&self.shared.path), e))?;
        let memo = &self.shared.memo;
        let wrote_memo = memo.save().map_err(|e| Error::io(memo.file().unwrap_or(&self.shared.path), e))?;
        Ok(wrote_index || wrote_memo)
    }

    /// Reads the persisted content index and grep memo (see [`StoreOptions::persist_index`]) now,
    /// in the calling thread, unless they were read already; returns the index's entries
    /// afterwards. Without it the memo is read by the first grep (which waits for it) and the
    /// index by the first grep's background build, on the low-priority pool: under a step's
    /// tool calls that pool gets little CPU, and every grep until the read finishes scans
    /// all its files (a 230 MiB sympy index took 7 s of a 10 s study that way). Callers that
    /// are about to run many calls (a study, before its runs) read it first.
    pub fn load_index(&self) -> usize {
        self.shared.memo.ensure_loaded();
        self.shared.index.ensure_loaded();
        self.shared.index.stats().blobs
    }

    /// Builds the content index for every blob the given commits reach, now, in parallel on
    /// rayon's pool, calling `progress` every few percent. Greps build it lazily anyway; this is
    /// for callers that want it ready before a run (a study's task commits, a benchmark).
    pub fn build_index(
        &self,
        commits: &[ObjectId],
        progress: Option<&(dyn Fn(IndexProgress) + Sync)>,
    ) -> Result<(), Error> {
        let mut ids = Vec::new();
        for commit in commits {
            let tree = self.tree_at(*commit, TreeKind::View)?;
            ids.extend(tree.view().expect("a view tree has a view").blob_ids());
        }
        self.shared.index.build(&self.shared, &ids, true, progress);
        Ok(())
    }

    /// Resolves a revision (`HEAD~3`, a tag, a full or abbreviated id) to a commit id.
    pub fn resolve(&self, rev: &str) -> Result<ObjectId, Error> {
        let repo = self.shared.thread_local();
        repo.rev_parse_single(rev)
            .and_then(|id| id.object())
            .and_then(|object| object.peel_to_commit())
            .map(|commit| commit.id)
            .map_err(|source| Error::Revision { repo: self.shared.name.clone(), rev: rev.to_owned(), source })
    }

    /// The tree of `rev` of the given kind, created on demand or shared with its other users.
    pub fn tree(&self, rev: &str, kind: TreeKind) -> Result<Arc<Tree>, Error> {
        self.tree_at(self.resolve(rev)?, kind)
    }

    /// The tree of `commit` of the given kind, created on demand or shared with its other users.
    /// Concurrent requests for the same tree wait for one creation; other trees are not held up.
    pub fn tree_at(&self, commit: ObjectId, kind: TreeKind) -> Result<Arc<Tree>, Error> {
        let key = (commit, kind);
        let slot = {
            let mut slots = lock(&self.slots);
            // Forget slots of dropped trees, except one being created right now.
            slots.retain(|_, slot| {
                Arc::strong_count(slot) > 1 || slot.try_lock().map_or(true, |weak| weak.strong_count() > 0)
            });
            slots.entry(key).or_default().clone()
        };
        let mut weak = lock(&slot);
        let tree = match weak.upgrade() {
            Some(tree) => tree,
            None => {
                let tree = Arc::new(self.create(commit, kind)?);
                *weak = Arc::downgrade(&tree);
                tree
            }
        };
        if let Some(recent) = lock(&self.recent).as_mut() {
            recent.put(key, tree.clone());
        }
        Ok(tree)
    }

    /// Lets go of the trees kept alive for reuse; trees nobody else holds are dropped (and
    /// worktrees removed from disk) now.
    pub fn release_recent(&self) {
        if let Some(recent) = lock(&self.recent).as_mut() {
            recent.clear();
        }
    }

    fn create(&self, commit: ObjectId, kind: TreeKind) -> Result<Tree, Error> {
        let name = self.shared.name.clone();
        match kind {
            TreeKind::View => {
                let (view, files) = View::build(self.shared.clone(), commit)?;
                Ok(Tree::new(commit, name, files, Backend::View(view)))
            }
            TreeKind::Worktree => {
                let dir = self.trees_dir.join(format!(
                    "{}-{}-{}",
                    std::process::id(),
                    self.seq.fetch_add(1, Ordering::Relaxed),
                    commit.to_hex_with_len(12)
                ));
                let (checkout, files) = Checkout::create(self.shared.clone(), dir, commit)?;
                Ok(Tree::new(commit, name, files, Backend::Worktree(checkout)))
            }
        }
    }
}

/// What trees need of their repository.
pub(crate) struct RepoShared {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    git: gix::ThreadSafeRepository,
    pub(crate) blobs: BlobCache,
    pub(crate) index: ContentIndex,
    pub(crate) memo: GrepMemo,
    /// Decoded tree objects by id, shared by the views of every commit.
    pub(crate) trees: TreeCache,
    /// Serialises worktree registration and removal (see `Checkout::create`).
    admin: Mutex<()>,
}

impl std::fmt::Debug for RepoShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepoShared").field("name", &self.name).field("path", &self.path).finish()
    }
}

impl RepoShared {
    pub(crate) fn thread_local(&self) -> gix::Repository {
        self.git.to_thread_local()
    }

    pub(crate) fn admin_lock(&self) -> MutexGuard<'_, ()> {
        lock(&self.admin)
    }
}

/// Opens a bare mirror with only its own configuration (no user or system config, no
/// environment), so the store behaves the same on every machine. The identity is only used for
/// worktree reflogs, which bare repositories do not write by default.
fn open_bare(path: &Path) -> Result<gix::ThreadSafeRepository, Error> {
    let options =
        gix::open::Options::isolated().config_overrides(["user.name=rewardlab", "user.email=rewardlab@localhost"]);
    let repo = gix::open_opts(path, options).map_err(|source| Error::Open { path: path.to_owned(), source })?;
    if !repo.is_bare() {
        return Err(Error::NotBare { path: path.to_owned() });
    }
    Ok(repo.into_sync())
}

/// Removes `<mirror>/worktrees/<id>` entries whose checkout (named by their `gitdir` file) lies
/// under this store's `trees_root` and no longer exists. Entries of worktrees elsewhere are
/// somebody else's and are left alone.
fn prune_admin_entries(mirror: &Path, trees_root: &Path) -> Result<(), Error> {
    for admin in read_dir_paths(&mirror.join("worktrees"))? {
        let Ok(gitdir) = fs::read_to_string(admin.join("gitdir")) else {
            continue;
        };
        let checkout_git = PathBuf::from(gitdir.trim_end());
        if checkout_git.starts_with(trees_root) && !checkout_git.exists() {
            fs::remove_dir_all(&admin).map_err(|e| Error::io(&admin, e))?;
        }
    }
    Ok(())
}

/// Entries of `dir`, or none if it does not exist.
fn read_dir_paths(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    match fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.map(|e| e.path()).map_err(|err| Error::io(dir, err))).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// Whether `path`'s name starts with the id of a process that no longer runs. Only answerable
/// where `/proc` exists; elsewhere every process counts as alive and nothing is pruned.
fn made_by_dead_process(path: &Path) -> bool {
    let Some(pid) =
        path.file_name().and_then(|n| n.to_str()).and_then(|n| n.split('-').next()).and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    let proc = Path::new("/proc");
    pid != std::process::id() && proc.is_dir() && !proc.join(pid.to_string()).exists()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here leaves its data consistent, so a panic elsewhere while holding
    // the lock does not make it unsafe to continue.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_names() {
        let ok = |spec: &str| mirror_name(spec).expect(spec);
        assert_eq!(ok("https://github.com/psf/requests"), "psf__requests");
        assert_eq!(ok("https://github.com/psf/requests.git/"), "psf__requests");
        assert_eq!(ok("git@github.com:psf/requests.git"), "psf__requests");
        assert_eq!(ok("/data/repos/psf/requests"), "psf__requests");
        assert_eq!(ok("psf/requests"), "psf__requests");
        assert_eq!(ok("psf__requests.git"), "psf__requests");
        assert_eq!(ok("/mirrors/psf__requests.git"), "psf__requests");
        assert!(mirror_name("requests").is_err());
        assert!(mirror_name("a/..").is_err());
        assert!(mirror_name("own er/name").is_err());
        assert!(mirror_name("").is_err());
    }

    #[test]
    fn dead_process_detection_reads_the_pid_prefix() {
        let ours = PathBuf::from(format!("/x/{}-0-abc", std::process::id()));
        assert!(!made_by_dead_process(&ours));
        assert!(!made_by_dead_process(Path::new("/x/not-a-pid")));
        if Path::new("/proc").is_dir() {
            // Linux pids stay below 2^22.
            assert!(made_by_dead_process(Path::new("/x/4294967000-0-abc")));
        }
    }
}
