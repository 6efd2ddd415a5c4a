//! The grep memo on disk: one versioned file per repository under the store, beside its content
//! index (`<store>/.index/<name>.grepmemo`).
//!
//! ```text
//! magic "RLGMEMO\0", version u32, patterns u32
//! patterns × (case-insensitive u8, line cap u64, file cap u64, pattern length u32, pattern,
//!             entries u32, entries × entry)
//! entry:   blob id [20], kind u8 (0 no match, 1 binary, 2 matched, 3 matched with texts)
//! matched: lines u64, short chars u64, long lines u32, long × u32,
//!          with texts: texts u32, texts × (line u64, length u32, text)
//! checksum (crate::disk)
//! ```
//!
//! Patterns are written least recently used first, so reading them back in order restores the
//! LRU order. An entry is a pure function of its blob, its pattern key and the grep code that
//! scanned it: bump [`VERSION`] whenever grep's matching or line accounting changes, or a file
//! written by an older build would replay what the new code no longer finds. A missing, old,
//! corrupt or inconsistent file is ignored (the memo starts empty and is written over).

use std::path::Path;

use gix::ObjectId;

use super::{BlobMatches, Matched, PatternKey};
use crate::disk::{Reader, len32, put_bytes, put_id, read_checked, write_checked};

const MAGIC: &[u8; 8] = b"RLGMEMO\0";
/// Bump when the layout changes, or what grep matches or counts in a blob does.
const VERSION: u32 = 1;

/// One pattern's entries as they are written and read.
pub(super) type PatternEntries = (PatternKey, Vec<(ObjectId, BlobMatches)>);

/// Writes `patterns` (least recently used first) to `path` atomically.
pub(super) fn save<'a>(
    patterns: impl Iterator<Item = (&'a PatternKey, Vec<(ObjectId, &'a BlobMatches)>)>,
    path: &Path,
) -> std::io::Result<()> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let count_at = out.len();
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut count = 0usize;
    for (key, entries) in patterns {
        count += 1;
        out.push(u8::from(key.case_insensitive));
        out.extend_from_slice(&(key.max_line_chars as u64).to_le_bytes());
        out.extend_from_slice(&key.max_file_bytes.to_le_bytes());
        put_bytes(&mut out, key.pattern.as_bytes())?;
        out.extend_from_slice(&len32(entries.len())?.to_le_bytes());
        for (id, entry) in entries {
            put_id(&mut out, &id)?;
            put_entry(&mut out, entry)?;
        }
    }
    out[count_at..count_at + 4].copy_from_slice(&len32(count)?.to_le_bytes());
    write_checked(path, out)
}

fn put_entry(out: &mut Vec<u8>, entry: &BlobMatches) -> std::io::Result<()> {
    let m = match entry {
        BlobMatches::NoMatch | BlobMatches::Binary => {
            out.push(u8::from(matches!(entry, BlobMatches::Binary)));
            return Ok(());
        }
        BlobMatches::Matched(m) => m,
    };
    out.push(if m.texts.is_some() { 3 } else { 2 });
    out.extend_from_slice(&m.lines.to_le_bytes());
    out.extend_from_slice(&m.short_chars.to_le_bytes());
    out.extend_from_slice(&len32(m.long.len())?.to_le_bytes());
    for chars in &m.long {
        out.extend_from_slice(&chars.to_le_bytes());
    }
    if let Some(texts) = &m.texts {
        out.extend_from_slice(&len32(texts.len())?.to_le_bytes());
        for (line, text) in texts {
            out.extend_from_slice(&line.to_le_bytes());
            put_bytes(out, text.as_bytes())?;
        }
    }
    Ok(())
}

/// Reads `path`: its patterns, least recently used first; `None` when it is missing or not a
/// valid file of this version.
pub(super) fn load(path: &Path) -> Option<Vec<PatternEntries>> {
    let body = read_checked(path)?;
    let mut r = Reader::new(&body);
    if r.take(8)? != MAGIC || r.u32()? != VERSION {
        return None;
    }
    let n_patterns = r.u32()? as usize;
    let mut patterns = Vec::with_capacity(n_patterns.min(r.remaining()));
    for _ in 0..n_patterns {
        let case_insensitive = match r.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let max_line_chars = usize::try_from(r.u64()?).ok()?;
        let max_file_bytes = r.u64()?;
        let pattern = text(&mut r)?;
        let n_entries = r.u32()? as usize;
        // Each entry takes at least 21 bytes: a count past what is left is corrupt.
        if n_entries > r.remaining() / 21 {
            return None;
        }
        let mut entries = Vec::with_capacity(n_entries);
        for _ in 0..n_entries {
            let id = r.id()?;
            entries.push((id, entry(&mut r)?));
        }
        patterns.push((PatternKey { pattern, case_insensitive, max_line_chars, max_file_bytes }, entries));
    }
    (r.remaining() == 0).then_some(patterns)
}

fn entry(r: &mut Reader<'_>) -> Option<BlobMatches> {
    let kind = r.u8()?;
    match kind {
        0 => return Some(BlobMatches::NoMatch),
        1 => return Some(BlobMatches::Binary),
        2 | 3 => {}
        _ => return None,
    }
    let (lines, short_chars) = (r.u64()?, r.u64()?);
    let n_long = r.u32()? as usize;
    if n_long as u64 > lines || n_long > r.remaining() / 4 || lines == 0 {
        return None;
    }
    let mut long = (0..n_long).map(|_| r.u32()).collect::<Option<Vec<u32>>>()?;
    // Sized as the recorder leaves them, so the entry counts the bytes it counted at when written.
    long.shrink_to_fit();
    let texts = if kind == 3 {
        let n_texts = r.u32()? as u64;
        // An entry with texts keeps every matching line's.
        if n_texts != lines {
            return None;
        }
        let mut texts =
            (0..n_texts).map(|_| Some((r.u64()?, text(r)?.into_boxed_str()))).collect::<Option<Vec<_>>>()?;
        texts.shrink_to_fit();
        Some(texts)
    } else {
        None
    };
    Some(BlobMatches::Matched(Box::new(Matched { lines, short_chars, long, texts })))
}

fn text(r: &mut Reader<'_>) -> Option<String> {
    String::from_utf8(r.bytes()?.to_vec()).ok()
}
