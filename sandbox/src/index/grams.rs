//! Trigrams of blob contents, folded to ASCII lower case.
//!
//! A trigram is three consecutive bytes packed into the low 24 bits of a `u32`. Both the index
//! and the queries fold ASCII letters to lower case, byte by byte: folding keeps lengths, so a
//! trigram of a matching substring, folded, is always a folded trigram of the file, whatever the
//! case sensitivity of the query. One index then serves case-sensitive and case-insensitive
//! greps, and a case-insensitive literal needs no expansion into its case variants.

/// ASCII lower case; every other byte is unchanged.
pub(crate) fn fold(byte: u8) -> u8 {
    byte.to_ascii_lowercase()
}

/// The trigram code of three (already folded) bytes.
pub(crate) fn code(a: u8, b: u8, c: u8) -> u32 {
    (u32::from(a) << 16) | (u32::from(b) << 8) | u32::from(c)
}

/// Every distinct folded trigram of `text`, sorted: the plain definition the tests check against.
#[cfg(test)]
pub(crate) fn of_text(text: &[u8]) -> Vec<u32> {
    let mut out: Vec<u32> = text.windows(3).map(|w| code(fold(w[0]), fold(w[1]), fold(w[2]))).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Extracts the sorted set of distinct trigrams of a blob. Reuses a 2 MiB bitmap of all 2^24
/// trigrams between blobs, so a blob costs one pass over its bytes plus a sort of its distinct
/// trigrams (a few thousand for a source file), not a sort of all its positions.
pub(crate) struct Extractor {
    seen: Vec<u64>,
    distinct: Vec<u32>,
}

impl Extractor {
    pub(crate) fn new() -> Self {
        Extractor { seen: vec![0; (1 << 24) / 64], distinct: Vec::new() }
    }

    pub(crate) fn grams(&mut self, data: &[u8]) -> Box<[u32]> {
        self.distinct.clear();
        if data.len() >= 3 {
            let mut a = fold(data[0]);
            let mut b = fold(data[1]);
            for &byte in &data[2..] {
                let c = fold(byte);
                let gram = code(a, b, c);
                let (word, bit) = ((gram >> 6) as usize, 1u64 << (gram & 63));
                if self.seen[word] & bit == 0 {
                    self.seen[word] |= bit;
                    self.distinct.push(gram);
                }
                a = b;
                b = c;
            }
        }
        // Clear only the bits this blob set, so the next blob starts from an empty bitmap.
        for &gram in &self.distinct {
            self.seen[(gram >> 6) as usize] = 0;
        }
        self.distinct.sort_unstable();
        self.distinct.as_slice().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extractor_agrees_with_the_plain_definition_and_resets_between_blobs() {
        let mut extractor = Extractor::new();
        for text in [&b"Hello, hello HELLO"[..], b"ab", b"", b"\xff\x00\xfeabcABC", b"Hello again"] {
            assert_eq!(&*extractor.grams(text), of_text(text).as_slice(), "{text:?}");
        }
        assert_eq!(
            &*extractor.grams(b"ABCabc"),
            &[code(b'a', b'b', b'c'), code(b'b', b'c', b'a'), code(b'c', b'a', b'b')]
        );
    }
}
