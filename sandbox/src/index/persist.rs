//! The content index on disk: one versioned file per repository under the store.
//!
//! A file holds the live entries in LRU order (least recently used first) and the posting
//! lists restricted to their slots, then a checksum of everything before it:
//!
//! ```text
//! magic "RLTRIGX\0", version u32, entries u32, lists u32, next slot u32
//! entries × (blob id [20], size u64, kind u8 (0 text, 1 binary, 2 unindexed), slot u32, grams u32)
//! lists   × (trigram u32, length u32, slots u32 × length)
//! FNV-1a 64 of the bytes above
//! ```
//!
//! All integers are little-endian. A file that is missing, of another version, truncated, fails
//! its checksum or holds inconsistent numbers is ignored (the index starts empty and is rebuilt
//! as usual, then written over it). Files are written atomically ([`crate::disk`]).

use std::{collections::HashMap, path::Path, sync::Arc};

use gix::ObjectId;

use super::{BlobEntry, Content, Inner, postings::Postings};
use crate::disk::{Reader, len32, put_id, read_checked, write_checked};

const MAGIC: &[u8; 8] = b"RLTRIGX\0";
/// Bump when the layout or the meaning of a trigram changes.
const VERSION: u32 = 1;
const ENTRY_BYTES: usize = 20 + 8 + 1 + 4 + 4;

/// Writes `inner`'s live entries and lists to `path` atomically.
pub(super) fn save(inner: &Inner, path: &Path) -> std::io::Result<()> {
    let entries: Vec<(&ObjectId, &Arc<BlobEntry>)> = inner.map.iter().rev().collect();
    let lists = inner.postings.live_lists();
    let mut out = Vec::with_capacity(24 + entries.len() * ENTRY_BYTES + inner.live_grams * 4 + lists.len() * 8 + 8);
    out.extend_from_slice(MAGIC);
    for n in [VERSION, len32(entries.len())?, len32(lists.len())?, inner.postings.next_slot()] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    for (id, entry) in &entries {
        put_id(&mut out, id)?;
        out.extend_from_slice(&entry.size.to_le_bytes());
        let (kind, slot, grams) = match entry.content {
            Content::Text { slot, grams } => (0u8, slot, grams),
            Content::Binary => (1, 0, 0),
            Content::Unindexed => (2, 0, 0),
        };
        out.push(kind);
        out.extend_from_slice(&slot.to_le_bytes());
        out.extend_from_slice(&grams.to_le_bytes());
    }
    for (gram, slots) in &lists {
        out.extend_from_slice(&gram.to_le_bytes());
        out.extend_from_slice(&len32(slots.len())?.to_le_bytes());
        for slot in slots {
            out.extend_from_slice(&slot.to_le_bytes());
        }
    }
    write_checked(path, out)
}

/// What a valid file holds, ready to become the index's state.
pub(super) struct Loaded {
    /// Entries, least recently used first.
    pub(super) entries: Vec<(ObjectId, BlobEntry)>,
    pub(super) postings: Postings,
    pub(super) live_grams: usize,
}

/// Reads `path`; `None` when it is missing or not a valid file of this version.
pub(super) fn load(path: &Path) -> Option<Loaded> {
    let body = read_checked(path)?;
    let mut r = Reader::new(&body);
    if r.take(8)? != MAGIC || r.u32()? != VERSION {
        return None;
    }
    let (n_entries, n_lists, next_slot) = (r.u32()? as usize, r.u32()? as usize, r.u32()?);
    let mut entries = Vec::with_capacity(n_entries.min(body.len() / ENTRY_BYTES));
    // Each text slot's trigram count, to check the lists against.
    let mut grams_of: HashMap<u32, (u32, u32)> = HashMap::new();
    let mut live_grams = 0usize;
    for _ in 0..n_entries {
        let id = r.id()?;
        let size = r.u64()?;
        let (kind, slot, grams) = (r.u8()?, r.u32()?, r.u32()?);
        let content = match kind {
            0 => {
                if slot >= next_slot || grams_of.insert(slot, (grams, 0)).is_some() {
                    return None;
                }
                live_grams += grams as usize;
                Content::Text { slot, grams }
            }
            1 => Content::Binary,
            2 => Content::Unindexed,
            _ => return None,
        };
        entries.push((id, BlobEntry { size, content }));
    }
    let mut lists = Vec::with_capacity(n_lists.min(body.len() / 8));
    for _ in 0..n_lists {
        let gram = r.u32()?;
        let len = r.u32()? as usize;
        if gram >= 1 << 24 || len == 0 || len > r.remaining() / 4 {
            return None;
        }
        let mut slots = Vec::with_capacity(len);
        for _ in 0..len {
            let slot = r.u32()?;
            // Sorted, and only the slots of text entries, each counted against its entry.
            if slots.last().is_some_and(|&last| last >= slot) {
                return None;
            }
            grams_of.get_mut(&slot)?.1 += 1;
            slots.push(slot);
        }
        lists.push((gram, slots));
    }
    if r.remaining() != 0 || grams_of.values().any(|(want, got)| want != got) {
        return None;
    }
    let postings = Postings::from_parts(lists, next_slot, grams_of.keys().copied());
    Some(Loaded { entries, postings, live_grams })
}
