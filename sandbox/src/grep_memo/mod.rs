//! A per-repository memo of what one grep pattern matched in one blob, shared by every commit.
//!
//! Training visits a repository at many commits and asks the same patterns at most of them (a
//! common word, `(?:def|class) Name\b` for a name many issues mention), and neighbouring
//! commits share most blobs. A grep's lines in a file are a pure function of the pattern, the
//! case flag, the blob's bytes and two limits (the line cap and the file-size cap), except for
//! the `path:` in front of each line. So once a grep has scanned a blob, the next grep of the
//! same pattern on any commit that holds the blob replays the memo instead of inflating and
//! scanning it. The trigram index ([`crate::index`]) rules out the blobs that cannot contain the
//! pattern's trigrams; the memo serves the ones that could and were already searched: a common
//! word's trigrams are in almost every file, and a definition's (`def`, `class`, the name) in
//! many files that do not define it.
//!
//! What a blob's entry keeps:
//! - *no match* or *binary*: the common case, a few dozen bytes;
//! - *matches*: how many lines and their characters without the `path:` (a line longer than the
//!   line cap less [`PATH_ROOM`] keeps its own length, since whether it is shortened depends on
//!   the path in front of it), and the lines' texts when there are at most [`MAX_TEXT_LINES`] of
//!   them in at most [`MAX_TEXT_BYTES`]. Past the output limit only the counts are needed; before
//!   it, an entry without texts (or a path longer than [`PATH_ROOM`]) is not used and the blob is
//!   scanned again.
//!
//! Replaying an entry adds exactly the lines, entities and counts the scan would, so a grep's
//! result does not depend on the memo (the oracle tests compare greps with and without it on
//! every commit of a built repository). A file whose scan a deadline stopped is not recorded.
//!
//! # Memory bound
//!
//! Entries are counted (key, value and heap parts, plus the hash table's control byte) against
//! [`crate::StoreOptions::grep_memo_bytes`]; past the bound, the least recently used *patterns*
//! are dropped whole. A grep takes its pattern's memo once, looks blobs up under a read lock (one
//! per file, never held across a scan), and inserts what it scanned in one batch at the end,
//! under the memo's mutex, so lookups never wait for a scan and inserts for no lookup longer
//! than a hash-map probe.
//!
//! # Between processes
//!
//! With [`crate::StoreOptions::persist_index`] the memo is kept beside the content index
//! (`<store>/.index/<name>.grepmemo`, [`persist`]): read once, before the first grep that asks
//! for a pattern (or by [`crate::Repo::load_index`]), and written atomically with the index when
//! it changed. A study's next process (a rerun, another Slurm task, another seed) then replays
//! what the last one searched instead of scanning it again.

mod persist;

use std::{
    mem::size_of,
    path::PathBuf,
    sync::{
        Arc, Mutex, Once,
        atomic::{AtomicU64, Ordering},
    },
};

use gix::ObjectId;
use lru::LruCache;
use parking_lot::RwLock;

use crate::tools::output::Output;

/// Characters of a path that a counts-only entry allows in front of its lines: up to this, a
/// line not in the entry's `long` list fits the line cap whatever the path.
pub(crate) const PATH_ROOM: usize = 256;
/// Lines whose texts an entry keeps, at most.
const MAX_TEXT_LINES: usize = 16;
/// Bytes of text an entry keeps, at most.
const MAX_TEXT_BYTES: usize = 2048;

/// What a grep's lines in a file depend on, besides the blob.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PatternKey {
    pub(crate) pattern: String,
    pub(crate) case_insensitive: bool,
    pub(crate) max_line_chars: usize,
    pub(crate) max_file_bytes: u64,
}

/// One blob's entry.
#[derive(Debug)]
pub(crate) enum BlobMatches {
    /// The blob holds a NUL byte: grep skips it whole.
    Binary,
    /// A text blob with no matching line.
    NoMatch,
    /// A text blob with matching lines.
    Matched(Box<Matched>),
}

/// The matching lines of one blob, without the path in front of them.
#[derive(Debug, Default)]
pub(crate) struct Matched {
    /// Matching lines.
    lines: u64,
    /// Characters of the lines not in `long`: `line:text` and the colon after the path.
    short_chars: u64,
    /// The same count for each line longer than the line cap less [`PATH_ROOM`], in order.
    long: Vec<u32>,
    /// `(line number, text)` of every matching line, when there are few.
    texts: Option<Vec<(u64, Box<str>)>>,
}

impl BlobMatches {
    /// Adds this entry's lines for the file at `path` to `out`; `false` (and nothing added) when
    /// the entry cannot say what the scan would (see the module docs), so the blob is scanned.
    /// A binary entry adds nothing: the caller counts it.
    pub(crate) fn replay(&self, path: &str, path_chars: usize, out: &mut Output) -> bool {
        let BlobMatches::Matched(matched) = self else { return true };
        if let Some(texts) = &matched.texts {
            for (line, text) in texts {
                if out.showing() {
                    out.match_line(path, *line, text);
                } else {
                    out.count(path_chars + line_chars(*line, text.chars().count()));
                }
            }
            return true;
        }
        if out.showing() || path_chars > PATH_ROOM {
            return false;
        }
        let short = matched.lines - matched.long.len() as u64;
        out.count_many(short, short * path_chars as u64 + matched.short_chars);
        for &chars in &matched.long {
            out.count(path_chars + chars as usize);
        }
        true
    }

    /// What the entry is counted at against the memo's bound.
    fn counted_bytes(&self) -> usize {
        ENTRY_BYTES + self.heap_bytes()
    }

    fn heap_bytes(&self) -> usize {
        match self {
            BlobMatches::Binary | BlobMatches::NoMatch => 0,
            BlobMatches::Matched(m) => {
                size_of::<Matched>()
                    + m.long.capacity() * size_of::<u32>()
                    + m.texts.as_ref().map_or(0, |t| {
                        t.capacity() * size_of::<(u64, Box<str>)>() + t.iter().map(|(_, s)| s.len()).sum::<usize>()
                    })
            }
        }
    }
}

/// The characters of a matching line past its path: `:line:` and the text.
pub(crate) fn line_chars(line: u64, text_chars: usize) -> usize {
    digits(line) + 2 + text_chars
}

/// Decimal digits of `n`.
pub(crate) fn digits(mut n: u64) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// Builds one blob's entry while the scan goes.
#[derive(Debug)]
pub(crate) struct Recorder {
    matched: Matched,
    long_over: usize,
    text_bytes: usize,
}

impl Recorder {
    pub(crate) fn new(max_line_chars: usize) -> Self {
        Recorder {
            matched: Matched { texts: Some(Vec::new()), ..Matched::default() },
            long_over: max_line_chars.saturating_sub(PATH_ROOM),
            text_bytes: 0,
        }
    }

    /// Whether the entry still keeps texts (the scan then builds each line's text for it).
    pub(crate) fn wants_text(&self) -> bool {
        self.matched.texts.is_some()
    }

    /// Records a matching line of `text_chars` characters; `text`, when given, is kept while
    /// there is room.
    pub(crate) fn line(&mut self, line: u64, text_chars: usize, text: Option<&str>) {
        let m = &mut self.matched;
        m.lines += 1;
        let chars = line_chars(line, text_chars);
        if chars > self.long_over {
            m.long.push(u32::try_from(chars).unwrap_or(u32::MAX));
        } else {
            m.short_chars += chars as u64;
        }
        if let Some(texts) = &mut m.texts {
            match text {
                Some(text) if texts.len() < MAX_TEXT_LINES && self.text_bytes + text.len() <= MAX_TEXT_BYTES => {
                    self.text_bytes += text.len();
                    texts.push((line, text.into()));
                }
                _ => m.texts = None,
            }
        }
    }

    pub(crate) fn finish(self) -> BlobMatches {
        if self.matched.lines == 0 {
            BlobMatches::NoMatch
        } else {
            let mut matched = self.matched;
            matched.long.shrink_to_fit();
            if let Some(texts) = &mut matched.texts {
                texts.shrink_to_fit();
            }
            BlobMatches::Matched(Box::new(matched))
        }
    }
}

/// Bytes one entry is counted at besides its heap part: the key, the value and the table's
/// control byte.
const ENTRY_BYTES: usize = size_of::<ObjectId>() + size_of::<BlobMatches>() + 1;
/// Bytes one pattern is counted at besides its key's text and its entries.
const PATTERN_BYTES: usize = 128;

/// What a pattern is counted at before its entries.
fn pattern_bytes(key: &PatternKey) -> usize {
    PATTERN_BYTES + key.pattern.len()
}

/// The entries of one pattern.
#[derive(Debug, Default)]
pub(crate) struct PatternMemo {
    blobs: RwLock<gix::hashtable::HashMap<ObjectId, BlobMatches>>,
}

impl PatternMemo {
    /// Runs `f` on the entry of `id`, if there is one.
    pub(crate) fn with<R>(&self, id: &ObjectId, f: impl FnOnce(&BlobMatches) -> R) -> Option<R> {
        self.blobs.read().get(id).map(f)
    }
}

/// Counters for [`crate::IndexStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemoStats {
    pub(crate) served: u64,
    pub(crate) patterns: usize,
    pub(crate) bytes: usize,
    pub(crate) loaded: usize,
}

/// The memo of one repository (see the module docs). A bound of 0 disables it.
#[derive(Debug)]
pub(crate) struct GrepMemo {
    capacity_bytes: usize,
    inner: Mutex<Inner>,
    served: AtomicU64,
    /// Where the memo is persisted, if it is.
    file: Option<PathBuf>,
    /// Reads the file once.
    load: Once,
}

#[derive(Debug)]
struct Inner {
    patterns: LruCache<PatternKey, (Arc<PatternMemo>, usize)>,
    bytes: usize,
    /// Batches inserted since the memo was created; compared with `saved` to skip a save that
    /// would write what the file already holds.
    inserted: u64,
    saved: u64,
    /// Entries read from the file.
    loaded: usize,
}

impl GrepMemo {
    /// A memo bounded by `capacity_bytes` (0 disables it), persisted at `file` if given.
    pub(crate) fn new(capacity_bytes: usize, file: Option<PathBuf>) -> Self {
        GrepMemo {
            capacity_bytes,
            inner: Mutex::new(Inner { patterns: LruCache::unbounded(), bytes: 0, inserted: 0, saved: 0, loaded: 0 }),
            served: AtomicU64::new(0),
            file: file.filter(|_| capacity_bytes > 0),
            load: Once::new(),
        }
    }

    /// Reads the persisted file, once; a missing, old or corrupt file leaves the memo as it is.
    /// A pattern a grep created before the read (none, when the first grep reads it) is kept
    /// over the file's.
    pub(crate) fn ensure_loaded(&self) {
        let Some(file) = &self.file else { return };
        self.load.call_once_force(|_| {
            let Some(patterns) = persist::load(file) else { return };
            let mut inner = self.lock();
            for (key, entries) in patterns {
                if inner.patterns.contains(&key) {
                    continue;
                }
                let bytes = pattern_bytes(&key) + entries.iter().map(|(_, e)| e.counted_bytes()).sum::<usize>();
                inner.loaded += entries.len();
                let memo = PatternMemo { blobs: RwLock::new(entries.into_iter().collect()) };
                inner.patterns.put(key, (Arc::new(memo), bytes));
                inner.bytes += bytes;
            }
            // The file may have been written under a larger bound.
            self.evict(&mut inner);
        });
    }

    /// Writes the memo to its file if it is persisted and grew since it was read or last
    /// written; `Ok(false)` when there was nothing to write.
    pub(crate) fn save(&self) -> std::io::Result<bool> {
        let Some(file) = &self.file else { return Ok(false) };
        let mut inner = self.lock();
        if inner.inserted == inner.saved {
            return Ok(false);
        }
        // Least recently used first, each pattern's entries under its read lock.
        let locked: Vec<_> = inner.patterns.iter().rev().map(|(key, (memo, _))| (key, memo.blobs.read())).collect();
        let patterns = locked.iter().map(|(key, blobs)| (*key, blobs.iter().map(|(id, e)| (*id, e)).collect()));
        persist::save(patterns, file)?;
        drop(locked);
        inner.saved = inner.inserted;
        Ok(true)
    }

    /// The file the memo is persisted in.
    pub(crate) fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// The memo of `key` (created empty), marked most recently used; `None` when disabled.
    pub(crate) fn pattern(&self, key: &PatternKey) -> Option<Arc<PatternMemo>> {
        if self.capacity_bytes == 0 {
            return None;
        }
        self.ensure_loaded();
        let mut inner = self.lock();
        if let Some((memo, _)) = inner.patterns.get(key) {
            return Some(memo.clone());
        }
        let memo = Arc::new(PatternMemo::default());
        let bytes = pattern_bytes(key);
        inner.patterns.put(key.clone(), (memo.clone(), bytes));
        inner.bytes += bytes;
        self.evict(&mut inner);
        Some(memo)
    }

    /// Files a grep took from the memo instead of scanning.
    pub(crate) fn record_served(&self, files: usize) {
        if files > 0 {
            self.served.fetch_add(files as u64, Ordering::Relaxed);
        }
    }

    /// Adds what a grep of `key` scanned to `memo`, unless the pattern was dropped meanwhile
    /// (then the entries are dropped too, so the count stays exact), and drops least recently
    /// used patterns past the bound.
    pub(crate) fn insert(&self, key: &PatternKey, memo: &Arc<PatternMemo>, fresh: Vec<(ObjectId, BlobMatches)>) {
        if fresh.is_empty() {
            return;
        }
        let mut inner = self.lock();
        let Some((current, bytes)) = inner.patterns.peek_mut(key) else { return };
        if !Arc::ptr_eq(current, memo) {
            return;
        }
        let mut added = 0;
        {
            let mut blobs = memo.blobs.write();
            for (id, entry) in fresh {
                let entry_bytes = entry.counted_bytes();
                if let Some(old) = blobs.insert(id, entry) {
                    added -= old.counted_bytes() as isize;
                }
                added += entry_bytes as isize;
            }
        }
        *bytes = bytes.saturating_add_signed(added);
        inner.bytes = inner.bytes.saturating_add_signed(added);
        inner.inserted += 1;
        self.evict(&mut inner);
    }

    fn evict(&self, inner: &mut Inner) {
        while inner.bytes > self.capacity_bytes {
            let Some((_, (_, bytes))) = inner.patterns.pop_lru() else { break };
            inner.bytes -= bytes;
        }
    }

    pub(crate) fn stats(&self) -> MemoStats {
        let inner = self.lock();
        MemoStats {
            served: self.served.load(Ordering::Relaxed),
            patterns: inner.patterns.len(),
            bytes: inner.bytes,
            loaded: inner.loaded,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for GrepMemo {
    /// Saves what was searched, so the next process starts from it. A failure only costs that
    /// process the scans; [`crate::Repo::save_index`] reports it.
    fn drop(&mut self) {
        let _ = self.save();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pattern: &str) -> PatternKey {
        PatternKey {
            pattern: pattern.to_owned(),
            case_insensitive: false,
            max_line_chars: 300,
            max_file_bytes: 1 << 20,
        }
    }

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    #[test]
    fn the_count_stays_exact_and_within_the_bound() {
        let memo = GrepMemo::new(4096, None);
        let a = memo.pattern(&key("a")).expect("enabled");
        memo.insert(&key("a"), &a, (0..10).map(|n| (id(n), BlobMatches::NoMatch)).collect());
        let one = memo.stats().bytes;
        assert_eq!(one, PATTERN_BYTES + 1 + 10 * ENTRY_BYTES);
        // The same blobs again replace their entries: nothing is counted twice.
        memo.insert(&key("a"), &a, (0..10).map(|n| (id(n), BlobMatches::NoMatch)).collect());
        assert_eq!(memo.stats().bytes, one);
        // More patterns than fit: the least recently used go, and the count stays under the bound.
        for p in 0..100 {
            let k = key(&format!("p{p}"));
            let m = memo.pattern(&k).expect("enabled");
            memo.insert(&k, &m, (0..20).map(|n| (id(n), BlobMatches::Binary)).collect());
            assert!(memo.stats().bytes <= 4096, "{:?}", memo.stats());
        }
        assert!(memo.stats().patterns < 100);
        // A pattern dropped while a grep held it takes none of that grep's entries.
        let before = memo.stats();
        memo.insert(&key("a"), &a, vec![(id(99), BlobMatches::NoMatch)]);
        assert_eq!(memo.stats(), before);
    }

    /// Every kind of entry, under two patterns; `b` used last.
    fn filled(memo: &GrepMemo) {
        let a = memo.pattern(&key("a")).expect("enabled");
        let mut texts = Recorder::new(500);
        texts.line(3, 5, Some("héllo"));
        texts.line(10, 300, Some(&"y".repeat(300)));
        let mut counts = Recorder::new(300);
        for line in 1..=40 {
            counts.line(line, 100 + line as usize, None);
        }
        let entries = vec![
            (id(1), BlobMatches::NoMatch),
            (id(2), BlobMatches::Binary),
            (id(3), texts.finish()),
            (id(4), counts.finish()),
        ];
        memo.insert(&key("a"), &a, entries);
        let b = memo.pattern(&key("b")).expect("enabled");
        memo.insert(&key("b"), &b, vec![(id(1), BlobMatches::Binary)]);
    }

    /// Each pattern (most recently used first) and its entries, sorted, as text.
    fn contents(memo: &GrepMemo) -> Vec<String> {
        let inner = memo.lock();
        inner
            .patterns
            .iter()
            .map(|(key, (m, _))| {
                let mut entries: Vec<String> = m.blobs.read().iter().map(|e| format!("{e:?}")).collect();
                entries.sort();
                format!("{key:?} {entries:?}")
            })
            .collect()
    }

    #[test]
    fn a_persisted_memo_reads_back_whole_and_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("repo.grepmemo");
        let memo = GrepMemo::new(1 << 20, Some(file.clone()));
        filled(&memo);
        assert!(memo.save().expect("save"));
        assert!(!memo.save().expect("save"), "nothing new, nothing written");
        let again = GrepMemo::new(1 << 20, Some(file.clone()));
        again.ensure_loaded();
        assert_eq!(contents(&again), contents(&memo));
        let (stats, before) = (again.stats(), memo.stats());
        assert_eq!((stats.bytes, stats.patterns, stats.loaded), (before.bytes, before.patterns, 5));
        assert!(!again.save().expect("save"), "what was read is not written back");
        // Read under a smaller bound: the least recently used pattern goes.
        let small = GrepMemo::new(stats.bytes - 1, Some(file.clone()));
        small.ensure_loaded();
        assert_eq!(contents(&small), contents(&memo)[..1]);
        // Damaged or foreign files are ignored: the memo starts empty.
        let full = std::fs::read(&file).expect("read");
        for damaged in [full[..full.len() / 2].to_vec(), b"not a memo".to_vec()] {
            std::fs::write(&file, damaged).expect("write");
            let fresh = GrepMemo::new(1 << 20, Some(file.clone()));
            fresh.ensure_loaded();
            assert_eq!(fresh.stats().patterns, 0);
        }
        // Dropping a memo that grew writes it over the damaged file.
        let grown = GrepMemo::new(1 << 20, Some(file.clone()));
        filled(&grown);
        drop(grown);
        let read = GrepMemo::new(1 << 20, Some(file));
        read.ensure_loaded();
        assert_eq!(contents(&read), contents(&memo));
    }

    #[test]
    fn a_disabled_memo_hands_out_nothing() {
        assert!(GrepMemo::new(0, None).pattern(&key("a")).is_none());
    }

    #[test]
    fn the_recorder_keeps_texts_while_few_and_counts_long_lines_apart() {
        let mut r = Recorder::new(500);
        r.line(7, 3, Some("abc"));
        r.line(12, 60, Some(&"x".repeat(60)));
        let BlobMatches::Matched(m) = r.finish() else { panic!("matched") };
        assert_eq!((m.lines, m.short_chars, m.long.as_slice()), (2, 1 + 2 + 3 + 2 + 2 + 60, &[][..]));
        assert_eq!(m.texts.as_ref().map(Vec::len), Some(2));

        let mut r = Recorder::new(500);
        for line in 1..=(MAX_TEXT_LINES as u64 + 1) {
            r.line(line, 10, Some("0123456789"));
        }
        // A line past the cap less the path room keeps its own count.
        r.line(99, 300, None);
        let BlobMatches::Matched(m) = r.finish() else { panic!("matched") };
        assert!(m.texts.is_none());
        assert_eq!(m.long, [2 + 2 + 300]);
        assert_eq!(Recorder::new(300).finish().heap_bytes(), 0);
    }
}
