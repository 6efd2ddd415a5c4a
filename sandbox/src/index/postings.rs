//! Posting lists: for each trigram, the index slots of the blobs that contain it.
//!
//! Every text blob the index holds gets a *slot*, a number handed out in increasing order and
//! never reused, and each of its distinct trigrams gets the slot appended to that trigram's
//! list; lists are therefore sorted without sorting. A grep evaluates its [`Query`] once over
//! the lists, as bitsets over slots (AND and OR become word-wise `&` and `|`), instead of
//! testing every file's trigram set one by one, so a selective pattern costs a few list reads
//! whatever the number of files.
//!
//! Evicting a blob only marks its slot dead: its slot stays in the lists until a compaction
//! drops every dead slot from every list at once (see [`Postings::compact`]), which the index
//! runs when it must give memory back. A dead slot is never reported as "cannot match"
//! ([`Postings::skip_set`] masks with the live slots), so a tree that still holds an evicted
//! blob's entry reads and scans that file: stale lists only ever cost reads, never matches.

use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
};

use super::query::Query;

/// Bytes counted per posting list besides its elements: the map's key, the `Vec` header and
/// the table's control byte and slack, rounded up.
pub(crate) const LIST_OVERHEAD: usize = 40;

/// The number of an indexed text blob in the posting lists.
pub(crate) type Slot = u32;

/// The slots a grep may skip: live blobs that cannot match its query.
#[derive(Debug)]
pub(crate) struct SkipSet {
    words: Vec<u64>,
}

impl SkipSet {
    /// Whether the blob at `slot` cannot match.
    pub(crate) fn contains(&self, slot: Slot) -> bool {
        let (word, bit) = (slot as usize / 64, slot % 64);
        self.words.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }
}

/// A hasher for trigram codes (24 bits of a `u32`): one multiply, folded so the table's low
/// bits depend on every input bit. The standard SipHash was a visible share of index builds.
#[derive(Default)]
pub(crate) struct GramHasher(u64);

impl Hasher for GramHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b) ^ self.0.rotate_left(8));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
}

/// The posting lists of one repository's index and the liveness of every slot.
#[derive(Debug, Default)]
pub(crate) struct Postings {
    lists: HashMap<u32, Vec<Slot>, BuildHasherDefault<GramHasher>>,
    /// One bit per slot ever handed out: set while the blob is held.
    live: Vec<u64>,
    next: Slot,
    /// Bytes the lists take now: their elements' capacity and [`LIST_OVERHEAD`] each.
    list_bytes: usize,
    /// Elements of the lists that belong to dead slots.
    dead_elements: usize,
}

impl Postings {
    /// Adds a blob with these distinct trigrams; `None` when the slots ran out (the blob is then
    /// left unindexed and always read).
    pub(crate) fn insert(&mut self, grams: &[u32]) -> Option<Slot> {
        let slot = self.next;
        self.next = self.next.checked_add(1)?;
        let word = slot as usize / 64;
        if self.live.len() <= word {
            self.live.push(0);
        }
        self.live[word] |= 1 << (slot % 64);
        for &gram in grams {
            let list = self.lists.entry(gram).or_insert_with(|| {
                self.list_bytes += LIST_OVERHEAD;
                Vec::new()
            });
            let before = list.capacity();
            if list.len() == before {
                // A quarter more, not twice: after a compaction every list is full, and doubling
                // the long lists of common trigrams would take the count past the bound within
                // a few insertions (see `ContentIndex`'s memory bound).
                list.reserve_exact(list.len() / 4 + 4);
            }
            list.push(slot);
            self.list_bytes += (list.capacity() - before) * 4;
        }
        Some(slot)
    }

    /// Marks a blob's slot dead; its `grams` elements stay in the lists until [`Self::compact`].
    pub(crate) fn remove(&mut self, slot: Slot, grams: usize) {
        if let Some(word) = self.live.get_mut(slot as usize / 64) {
            *word &= !(1 << (slot % 64));
        }
        self.dead_elements += grams;
    }

    /// Drops every dead slot from every list, and lists left empty, giving their memory back.
    pub(crate) fn compact(&mut self) {
        if self.dead_elements == 0 {
            return;
        }
        let live = &self.live;
        let is_live = |slot: Slot| live.get(slot as usize / 64).is_some_and(|w| w & (1 << (slot % 64)) != 0);
        let mut bytes = 0;
        self.lists.retain(|_, list| {
            list.retain(|&slot| is_live(slot));
            if list.is_empty() {
                return false;
            }
            list.shrink_to_fit();
            bytes += LIST_OVERHEAD + list.capacity() * 4;
            true
        });
        self.lists.shrink_to_fit();
        self.list_bytes = bytes;
        self.dead_elements = 0;
    }

    /// The first slot not handed out yet.
    pub(crate) fn next_slot(&self) -> Slot {
        self.next
    }

    /// Every list restricted to the live slots, lists left empty omitted, sorted by trigram (so
    /// a saved file does not depend on the hash map's order).
    pub(crate) fn live_lists(&self) -> Vec<(u32, Vec<Slot>)> {
        let mut lists: Vec<(u32, Vec<Slot>)> = self
            .lists
            .iter()
            .map(|(&gram, list)| (gram, list.iter().copied().filter(|&slot| self.is_live(slot)).collect::<Vec<_>>()))
            .filter(|(_, list)| !list.is_empty())
            .collect();
        lists.sort_unstable_by_key(|(gram, _)| *gram);
        lists
    }

    /// Lists read back from disk, with `live` the slots of the entries that came with them.
    pub(crate) fn from_parts(lists: Vec<(u32, Vec<Slot>)>, next: Slot, live: impl Iterator<Item = Slot>) -> Self {
        let mut postings = Postings { next, live: vec![0; (next as usize).div_ceil(64)], ..Postings::default() };
        for slot in live {
            postings.live[slot as usize / 64] |= 1 << (slot % 64);
        }
        for (gram, mut list) in lists {
            list.shrink_to_fit();
            postings.list_bytes += LIST_OVERHEAD + list.capacity() * 4;
            postings.lists.insert(gram, list);
        }
        postings
    }

    fn is_live(&self, slot: Slot) -> bool {
        self.live.get(slot as usize / 64).is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }

    /// Bytes counted for the lists and the liveness bits.
    pub(crate) fn bytes(&self) -> usize {
        self.list_bytes + self.live.len() * 8
    }

    /// The live slots whose blobs cannot satisfy `query`.
    pub(crate) fn skip_set(&self, query: &Query) -> SkipSet {
        let words = match self.eval(query) {
            Eval::All => vec![0; self.live.len()],
            Eval::Set(may) => self.live.iter().zip(may).map(|(live, may)| live & !may).collect(),
        };
        SkipSet { words }
    }

    /// The slots whose trigrams satisfy `query`, as a bitset the length of [`Self::live`].
    fn eval(&self, query: &Query) -> Eval {
        let n = self.live.len();
        match query {
            Query::All => Eval::All,
            Query::Nothing => Eval::Set(vec![0; n]),
            Query::Gram(gram) => {
                let mut words = vec![0u64; n];
                for &slot in self.lists.get(gram).map_or(&[][..], Vec::as_slice) {
                    words[slot as usize / 64] |= 1 << (slot % 64);
                }
                Eval::Set(words)
            }
            Query::And(parts) => {
                let mut acc = Eval::All;
                for part in parts {
                    acc = match (acc, self.eval(part)) {
                        (Eval::All, other) | (other, Eval::All) => other,
                        (Eval::Set(mut a), Eval::Set(b)) => {
                            a.iter_mut().zip(b).for_each(|(a, b)| *a &= b);
                            Eval::Set(a)
                        }
                    };
                    // Nothing left to narrow: the other parts cannot add slots back.
                    if matches!(&acc, Eval::Set(words) if words.iter().all(|&w| w == 0)) {
                        break;
                    }
                }
                acc
            }
            Query::Or(parts) => {
                let mut acc = Eval::Set(vec![0; n]);
                for part in parts {
                    acc = match (acc, self.eval(part)) {
                        (Eval::All, _) | (_, Eval::All) => return Eval::All,
                        (Eval::Set(mut a), Eval::Set(b)) => {
                            a.iter_mut().zip(b).for_each(|(a, b)| *a |= b);
                            Eval::Set(a)
                        }
                    };
                }
                acc
            }
        }
    }
}

/// A query's value over the slots: every slot, or a bitset.
enum Eval {
    All,
    Set(Vec<u64>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::grams::of_text;

    const TEXTS: &[&str] = &[
        "def handler(request): return Content-Length",
        "class Matrix: TODO fix",
        "import os\nimport sys",
        "FIXME later; content-length",
        "",
        "ab",
        "lambdify(x) raise ValueError",
    ];

    const PATTERNS: &[(&str, bool)] = &[
        ("Content-Length", false),
        ("content-length", true),
        ("TODO|FIXME", false),
        (r"\bimport\b", false),
        ("def [a-z]+\\(", false),
        ("[Mm]atrix", false),
        ("no_such_thing", false),
        ("raise (ValueError|TypeError)", false),
    ];

    /// Differential: the lists answer exactly as testing each blob's trigram set, and dead
    /// slots are never skipped, before and after a compaction.
    #[test]
    fn skip_sets_agree_with_per_blob_tests_and_never_skip_dead_slots() {
        let mut postings = Postings::default();
        // Many copies so the slots span several bitset words.
        let mut slots = Vec::new();
        for round in 0..40 {
            for (i, text) in TEXTS.iter().enumerate() {
                let grams = of_text(text.as_bytes());
                let slot = postings.insert(&grams).expect("slots left");
                slots.push((slot, i, grams.len(), round % 3 == 0));
            }
        }
        let check = |postings: &Postings, dead: bool| {
            for (pattern, insensitive) in PATTERNS {
                let query = Query::plan(pattern, *insensitive, 32);
                let skip = postings.skip_set(&query);
                for &(slot, i, _, evicted) in &slots {
                    // A dead slot is never skipped; a live one exactly when its trigrams fail.
                    let is_dead = dead && evicted;
                    let expect_skip = !is_dead && !query.matches(&of_text(TEXTS[i].as_bytes()));
                    assert_eq!(skip.contains(slot), expect_skip, "{pattern:?} on {:?} (slot {slot})", TEXTS[i]);
                }
            }
        };
        check(&postings, false);
        let before = postings.bytes();
        for &(slot, _, grams, evicted) in &slots {
            if evicted {
                postings.remove(slot, grams);
            }
        }
        check(&postings, true);
        postings.compact();
        check(&postings, true);
        assert!(postings.bytes() < before, "compaction gave memory back: {} -> {}", before, postings.bytes());
    }

    #[test]
    fn compaction_of_everything_leaves_only_the_liveness_bits() {
        let mut postings = Postings::default();
        let grams = of_text(b"some text here");
        let slot = postings.insert(&grams).expect("a slot");
        postings.remove(slot, grams.len());
        postings.compact();
        assert_eq!(postings.bytes(), 8);
        assert!(!postings.skip_set(&Query::plan("some", false, 32)).contains(slot));
    }
}
