//! rewardlab-sandbox: a read-only code sandbox for retrieval agents.
//!
//! A policy explores a repository at one commit through three read-only tools — `grep`, `glob`
//! and `read` — and this crate runs those tools fast, deterministically, and without letting a
//! single path or pattern escape the tree or stall the run. It is a leaf: it knows nothing about
//! rewards, policies or GRPO.
//!
//! # Store layout
//!
//! A [`RepoStore`] owns one directory:
//!
//! ```text
//! <root>/
//!   owner__name.git/              one bare clone per repository (`git clone --bare` layout)
//!     worktrees/<id>/             git's admin entry for each linked worktree we added
//!   .trees/owner__name.git/<pid>-<seq>-<commit12>/
//!                                 linked worktrees, one per (commit, live tree); <pid> is the
//!                                 process that made it, so a later run can tell a crashed
//!                                 run's leftovers from a live neighbour's
//!   .tmp/<pid>-<name>/            clones in progress, renamed into place when complete
//!   .index/owner__name.trigrams   the repository's content index, when persisted between processes
//!   .index/owner__name.grepmemo   its grep memo, persisted with it
//!   .index/tool-results           the sandbox's result cache, when saved between processes
//! ```
//!
//! A repository is named `owner__name` after the last two components of its URL or path
//! (`https://github.com/psf/requests` → `psf__requests.git`). A local path is accepted whatever
//! its characters: it is made canonical, and when its last two components are not a valid
//! `owner__name` the name is `local__<sanitised stem>-<hash of the canonical path>`
//! ([`local_mirror_name`]); names that reach the filesystem are always validated. An existing bare mirror placed at
//! `<root>/owner__name.git` is adopted as is, with no network access; anything else is cloned
//! bare with gix (`prepare_clone_bare(..).fetch_only(..)`; local paths go through `git
//! upload-pack`). On [`RepoStore::open`] the store prunes what a crashed run left behind:
//! worktree directories whose process is gone, admin entries under `worktrees/` whose checkout
//! is missing (only those pointing into this store's `.trees/`), and half-done clones.
//!
//! # Trees
//!
//! [`Repo::tree`] gives a [`Tree`] for a commit, in one of two [`TreeKind`]s behind one type:
//!
//! - [`TreeKind::View`]: zero disk. The path index is built from the commit's tree objects
//!   once; file contents are read straight from the object store through the store's
//!   [`BlobCache`] (LRU, one byte bound for all repositories), so blobs shared by many commits
//!   are decompressed once. Symlinks are resolved *within the index*: the link's target blob is
//!   read, joined and normalised, chains are followed up to a hop limit, and anything leaving the
//!   root is refused.
//!   The filesystem is never touched.
//! - [`TreeKind::Worktree`]: `git worktree add --detach` semantics through gix's
//!   `Repository::add_worktree` (admin entry in the bare repo, files checked out on disk). The
//!   file list comes from walking the checkout (never following symlinks); reads resolve with
//!   `canonicalize` and a component-wise prefix check against the canonical root.
//!
//! Trees are created on demand and cached per (commit, kind): live trees are shared through
//! weak references, and the most recently used ones are kept alive by a small LRU
//! ([`StoreOptions::keep_recent_trees`]) so sequential rollouts of one commit reuse them. A
//! worktree removes its directory and its admin entry when the last reference drops.
//!
//! # Content index
//!
//! Each repository keeps a trigram index over *blobs* (`index`): built lazily, in the
//! background and in parallel, for the blobs a view reaches, and shared by every commit that
//! contains them. Each text blob gets a slot in the repository's posting lists (trigram → the
//! slots of the blobs that contain it); entries and lists are bounded together by
//! [`StoreOptions::index_bytes`], evicting least recently used blobs and compacting the lists.
//! grep on a view turns its pattern into the trigrams every match must contain (from the same
//! HIR the matcher compiles), evaluates that query once over the posting lists into the set of
//! blobs that cannot match, and reads only the other files; files not indexed yet are scanned,
//! so results are identical to the scan's (a property test checks it) and a call never waits
//! for a build. Worktrees always scan. [`Repo::build_index`] builds ahead of time with progress
//! reports. The index can be persisted under the store ([`StoreOptions::persist_index`]): read before
//! the first build, written atomically when the repository is dropped or by
//! [`Repo::save_index`]; a missing, old or corrupt file is ignored and rebuilt.
//!
//! # Grep memo
//!
//! A trigram query cannot rule out a file that holds a common word, or the trigrams of
//! `def`, `class` and a name without defining it. But what a pattern matches in a blob does not
//! depend on the commit, so each repository also keeps, per grep pattern (with its case flag and
//! the line and file caps), what it matched in every blob it was searched in (`grep_memo`):
//! nothing, binary, or the matching lines' counts (and their texts when few). A grep on a view
//! replays the entries of the blobs it finds there instead of reading and scanning them, and
//! records the blobs it scans; a study that asks one pattern at many commits scans each blob
//! once. Replays are exactly the scan's output (tests compare both on every commit of built
//! repositories); past [`StoreOptions::grep_memo_bytes`] (64 MiB) least recently used patterns
//! are dropped whole, and 0 turns the memo off. [`IndexStats::memo_files`] counts the files
//! served. Worktrees always scan. With [`StoreOptions::persist_index`] the memo is kept beside
//! the index (`.index/owner__name.grepmemo`) and read back by the next process, so a rerun or
//! another Slurm task of a study replays what earlier ones searched.
//!
//! # Tools and limits
//!
//! [`ToolCall`] is `{"tool": "grep"|"glob"|"read", "args": {...}}`; [`ToolCall::from_json`]
//! validates untrusted calls and turns every problem into a [`ToolResult`] the policy reads.
//! These types are `rewardlab-protocol`'s, re-exported here; [`RunTool::run`] executes a call.
//! Every call returns its text `output`, the [`Entity`]s it showed (a path and line for grep and
//! read, a path for glob; `path:line` and `path` on the wire) and a [`Status`]. [`Limits`] holds the seed defaults: output cut at
//! 4096 characters with a closing line saying how much was cut and how to narrow; grep/glob 10 s
//! and read 5 s, enforced by deadlines checked *inside* the work (between files, between 32 KiB
//! chunks of a file, and per match), so a call returns soon after its budget and stops working;
//! 64 calls in flight across all rollouts ([`Sandbox`]'s tokio semaphore); 8 calls per turn;
//! bounded regex pattern length, compiled size, DFA size and nesting; binary files (a NUL byte)
//! skipped by grep and refused by read; a size cap for read. None of these fail a run: each is a
//! message in the tool response. A missing blob (incomplete clone) fails only the call that met it.
//!
//! # Result cache
//!
//! A call on a tree is a pure function of the repository, the commit, the tree kind, the call
//! and the limits, and the 8 rollouts of a GRPO group (and evaluation's repeated greedy
//! episodes) make the same calls again and again. So [`Sandbox`] keeps the results it computed
//! in an LRU shared by all its clones, keyed by the tree's identity and the call's canonical
//! JSON, bounded in bytes by [`Limits::result_cache_bytes`] (64 MiB by default, 0 turns it off).
//! A hit is exactly the result a fresh run gives, answered without a permit or a thread;
//! [`SandboxStats::cache_hits`] counts them. Results that depend on load or on the store's
//! state (timeouts, missing objects, I/O and internal errors) are never kept.
//! [`Sandbox::save_results`] writes the cache to `<store>/.index/tool-results` when the store
//! persists its indexes, and [`Sandbox::load_results`] reads it back in the next process, but
//! only in the executable that wrote it and under the same limits (the file is stamped with a
//! hash of both): a result depends on every line of the tools' code. Through
//! [`Sandbox::run_call`] (the engine's way in) an identical call that arrives while one is
//! queued or running waits for that one's result instead of running again
//! ([`SandboxStats::joined`]); it is held no longer than its own deadline, since the run it waits
//! for started first under the same budget. [`RunTool::run`] itself never caches.
//!
//! # Security model
//!
//! Tools are read-only and see only tracked content of one commit. Every user path is normalised
//! first: empty components and `.` are dropped; `..`, absolute paths, NUL bytes and any `.git`
//! component are refused outright. Then the path is resolved inside the tree: in the view by
//! walking the index and following symlink blobs (absolute targets, `..` above the root and
//! chains longer than [`Limits::max_symlink_hops`] are refused); in a worktree by
//! `canonicalize` (the kernel follows the chain; loops fail with `ELOOP`) and a prefix check on
//! path components (so `/tree_x` is not inside `/tree`). Symlinks that stay inside the tree work
//! on both kinds. `grep` searches regular files only and `glob` lists tracked paths only, so
//! neither ever descends through a symlinked directory.

#![warn(missing_docs)]

mod blob_cache;
mod deadline;
mod disk;
mod error;
mod grep_memo;
mod index;
mod limits;
mod path;
mod result_cache;
mod sandbox;
mod store;
mod tools;
mod tree;

pub use blob_cache::{Blob, BlobCache, BlobCacheStats};
pub use error::Error;
pub use gix::ObjectId;
pub use index::{IndexProgress, IndexStats};
pub use limits::Limits;
pub use rewardlab_protocol::{MAX_CALLS_PER_TURN, escape_regex};
pub use sandbox::{Sandbox, SandboxStats};
pub use store::{Repo, RepoStore, StoreOptions, component_store_name, local_mirror_name, mirror_name};
pub use tools::{Entity, ErrorKind, GlobArgs, GrepArgs, ReadArgs, RunTool, Status, ToolCall, ToolResult};
pub use tree::{AccessError, EntryKind, FileEntry, Tree, TreeCacheStats, TreeKind};
