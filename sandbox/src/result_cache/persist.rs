//! The result cache on disk: one file per store (`<store>/.index/tool-results`), so that the next
//! process of a study (a rerun with another variant, a resumed run, another Slurm task) answers
//! the calls an earlier one made without running them.
//!
//! ```text
//! magic "RLRCACHE", version u32, stamp u64, entries u32
//! entries × (repository bytes, commit [20], tree kind u8 (0 view, 1 worktree), call bytes,
//!            result bytes (the ToolResult's JSON))
//! checksum (crate::disk)
//! ```
//!
//! A result is a pure function of the tree, the call, the limits and *the code that ran it*: the
//! text of every tool's output, its cut notices and errors. Unlike the grep memo, whose entries
//! depend only on how grep matches lines, nearly any change to the tools changes some result, so
//! a version number bumped by hand would be forgotten. The file is therefore stamped with a hash
//! of the running executable and of the limits (the cache's own bound aside): only the very
//! binary that wrote it, under the same limits, reads it back; any other finds a different stamp
//! and starts empty. Entries are written least recently used first, so reading them in order
//! restores the LRU order. A missing, foreign, old or corrupt file is ignored (and written over).

use std::{
    hash::{Hash, Hasher},
    path::Path,
    sync::{Arc, OnceLock},
};

use gix::ObjectId;

use super::Key;
use crate::{
    Limits,
    disk::{Reader, len32, put_bytes, put_id, read_checked, write_checked},
    tools::ToolResult,
    tree::TreeKind,
};

const MAGIC: &[u8; 8] = b"RLRCACHE";
/// Bump when the layout changes (what the results say is covered by the stamp).
const VERSION: u32 = 1;

/// The stamp of results computed by this executable under `limits`; `None` when the executable
/// cannot be read (nothing is persisted then).
pub(crate) fn stamp(limits: &Limits) -> Option<u64> {
    static EXECUTABLE: OnceLock<Option<u64>> = OnceLock::new();
    let executable = (*EXECUTABLE.get_or_init(|| {
        let bytes = std::fs::read(std::env::current_exe().ok()?).ok()?;
        let mut hasher = std::hash::DefaultHasher::new();
        bytes.hash(&mut hasher);
        Some(hasher.finish())
    }))?;
    // The cache's own bound changes which results are kept, not what they say.
    let limits = Limits { result_cache_bytes: 0, ..limits.clone() };
    let mut hasher = std::hash::DefaultHasher::new();
    executable.hash(&mut hasher);
    format!("{limits:?}").hash(&mut hasher);
    Some(hasher.finish())
}

/// Writes `entries` (least recently used first) under `stamp` to `path` atomically.
pub(super) fn save(entries: &[(Key, Arc<ToolResult>)], stamp: u64, path: &Path) -> std::io::Result<()> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&stamp.to_le_bytes());
    out.extend_from_slice(&len32(entries.len())?.to_le_bytes());
    for (key, result) in entries {
        put_bytes(&mut out, key.repo.as_bytes())?;
        put_id(&mut out, &key.commit)?;
        out.push(match key.kind {
            TreeKind::View => 0,
            TreeKind::Worktree => 1,
        });
        put_bytes(&mut out, key.call.as_bytes())?;
        put_bytes(&mut out, &serde_json::to_vec(result.as_ref()).map_err(std::io::Error::other)?)?;
    }
    write_checked(path, out)
}

/// Reads `path`: its entries, least recently used first; `None` when it is missing, corrupt, of
/// another version or written under another stamp.
pub(super) fn load(path: &Path, stamp: u64) -> Option<Vec<(Key, ToolResult)>> {
    let data = read_checked(path)?;
    let mut r = Reader::new(&data);
    if r.take(8)? != MAGIC || r.u32()? != VERSION || r.u64()? != stamp {
        return None;
    }
    let count = r.u32()? as usize;
    let mut entries = Vec::with_capacity(count.min(r.remaining()));
    for _ in 0..count {
        let repo = String::from_utf8(r.bytes()?.to_vec()).ok()?;
        let commit: ObjectId = r.id()?;
        let kind = match r.u8()? {
            0 => TreeKind::View,
            1 => TreeKind::Worktree,
            _ => return None,
        };
        let call = String::from_utf8(r.bytes()?.to_vec()).ok()?;
        let result: ToolResult = serde_json::from_slice(r.bytes()?).ok()?;
        entries.push((Key { repo, commit, kind, call }, result));
    }
    (r.remaining() == 0).then_some(entries)
}
