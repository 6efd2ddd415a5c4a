//! A hand-written reader of the common rollout line, for [`RolloutRef::parse`].
//!
//! `serde_json` spends most of a big log's time dispatching through its
//! visitors; this reader knows the record's shape and walks the bytes once,
//! borrowing every string. It is a fast path only: it accepts a strict subset
//! of what `serde_json` accepts and gives up (`None`) on anything outside it,
//! and the caller then reads the line with `serde_json` as before, so every
//! verdict and message stays `serde_json`'s. What it gives up on:
//!
//! - any backslash in a string it keeps (group, paths, entities, tools) or in
//!   a key; in a skipped value (`args`, unknown keys), `\u` escapes (the
//!   others are checked as JSON defines them);
//! - numbers with an exponent or more than 15 digits in skipped values (so
//!   each is a finite `f64`, as `serde_json` requires), and any
//!   `completion_tokens` but a plain `u64`;
//! - a struct written as an array, a duplicated key of the record, a
//!   selection or a call, an unknown key of a selection, a missing `group` or
//!   `tool`, a line range that does not parse, nesting deeper than
//!   [`MAX_DEPTH`], and everything that is not JSON.
//!
//! It also reads the record's `step` as [`super::logged_step`] does (for
//! `study replay`'s alerts) and, for a reader that needs no line ranges
//! ([`super::Keep`]), checks them without building them.
//!
//! The differential tests in `rollout`'s tests check that whatever it accepts
//! `serde_json` reads into the same record and the same step, and that the
//! reader keeping no line ranges takes exactly the same lines.

use std::borrow::Cow;

use super::{CallRef, Keep, RolloutRef, SelectionRef, Text};
use crate::metrics::LineRange;

/// Deepest nesting of a skipped value this reader follows (`serde_json`
/// allows 128 levels in all, of which the record uses at most 5).
const MAX_DEPTH: usize = 64;

/// The record of one line, or `None` where `serde_json` must decide.
pub(super) fn scan(text: &str) -> Option<RolloutRef<'_>> {
    scan_with_step(text).map(|(r, _)| r)
}

/// [`scan`] and the line's step as [`super::logged_step`] reads it: the
/// value of the record's one `step` key when it is a plain unsigned integer,
/// else 0 (no `step`, another type, a negative or fractional number, or a
/// duplicated `step`, which `serde_json` rejects). The scanner declines every
/// key with an escape, so a line it takes has a `step` key exactly when one
/// is spelt so.
pub(super) fn scan_with_step(text: &str) -> Option<(RolloutRef<'_>, u64)> {
    scan_keeping(text, Keep::ALL)
}

/// [`scan_with_step`] keeping only what `keep` asks for: the rest is checked
/// exactly as before (the same lines are taken) and read as absent.
pub(super) fn scan_keeping(text: &str, keep: Keep) -> Option<(RolloutRef<'_>, u64)> {
    let mut s = Scanner { text, bytes: text.as_bytes(), at: 0, keep };
    let r = s.record()?;
    s.ws();
    (s.at == s.bytes.len()).then_some(r)
}

/// A skipped value's text read as `serde_json::Value::as_u64` reads it:
/// digits only, no leading zero (the scanner has checked it is a JSON value,
/// and a number of at most 15 digits, so it fits).
fn plain_u64(value: &str) -> Option<u64> {
    let digits = value.as_bytes();
    let plain = !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) && (digits.len() == 1 || digits[0] != b'0');
    plain.then(|| value.parse().ok()).flatten()
}

/// The offset of the first `"`, `\\` or control character of `bytes`: a
/// string's body is scanned for its end this way, sixteen bytes at a time
/// with SSE2 (part of every x86-64 CPU), the rest eight at a time ([`swar`]).
#[cfg(target_arch = "x86_64")]
fn special(bytes: &[u8]) -> Option<usize> {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut at = 0;
    while let Some(block) = bytes.get(at..at + 16) {
        // SAFETY: SSE2 is enabled on every x86-64 target, and the unaligned
        // load reads `block`'s 16 bytes.
        let hits = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
            let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `x < 0x20` is `min(x, 0x1f) == x`.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
        };
        if hits != 0 {
            return Some(at + hits.trailing_zeros() as usize);
        }
        at += 16;
    }
    swar(&bytes[at..]).map(|p| at + p)
}

/// [`swar`] where there is no SSE2.
#[cfg(not(target_arch = "x86_64"))]
fn special(bytes: &[u8]) -> Option<usize> {
    swar(bytes)
}

/// [`special`] eight bytes at a time in a `u64` (SWAR).
fn swar(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        // The high bit of each byte that is zero after the xor (or below
        // 0x20): exact up to the first such byte, which is all that is read.
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        let hits = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if hits != 0 {
            return Some(at + hits.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    words.remainder().iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).map(|p| at + p)
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    keep: Keep,
}

/// Sets a field once: a second value of the same key is `serde_json`'s
/// "duplicate field" error, so the scanner gives up.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

impl<'a> Scanner<'a> {
    /// JSON's whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// After an element of an object or array: `true` at a comma (another
    /// element follows), `false` at `close` (consumed).
    fn more(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.at += 1;
                Some(true)
            }
            b if b == close => {
                self.at += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// Opens `open`; `false` when `close` follows at once (empty, consumed).
    fn open(&mut self, open: u8, close: u8) -> Option<bool> {
        self.eat(open)?;
        if self.peek()? == close {
            self.at += 1;
            return Some(false);
        }
        Some(true)
    }

    /// A string with no escapes or control characters, borrowed.
    fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        self.at += special(&self.bytes[self.at..])?;
        if self.bytes[self.at] != b'"' {
            return None;
        }
        self.at += 1;
        // The quotes are ASCII, so these are char boundaries of the `str`.
        Some(&self.text[start..self.at - 1])
    }

    /// `null` (consumed, `true`) or something else (`false`, not consumed).
    fn null(&mut self) -> Option<bool> {
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal(b"null")?;
        Some(true)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    fn bool(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| Some(true)),
            b'f' => self.literal(b"false").map(|()| Some(false)),
            b'n' => self.literal(b"null").map(|()| None),
            _ => None,
        }
    }

    /// `null` or a plain unsigned integer that fits a `u64`.
    fn u64(&mut self) -> Option<Option<u64>> {
        if self.null()? {
            return Some(None);
        }
        let start = self.at;
        let mut n: u64 = 0;
        while let Some(&d @ b'0'..=b'9') = self.bytes.get(self.at) {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        // No leading zero, and no fraction or exponent (a float is not a u64).
        if digits == 0 || (digits > 1 && self.bytes[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.bytes.get(self.at) {
            return None;
        }
        Some(Some(n))
    }

    /// `null` or an array of strings.
    fn texts(&mut self) -> Option<Option<Vec<Text<'a>>>> {
        if self.null()? {
            return Some(None);
        }
        // Room for a typical list at once (an entity list is often ten long):
        // one allocation rather than one per doubling.
        let mut out = Vec::with_capacity(8);
        self.array(|s| {
            out.push(Text(Cow::Borrowed(s.str()?)));
            Some(())
        })?;
        Some(Some(out))
    }

    fn line_ranges(&mut self) -> Option<Option<Vec<LineRange>>> {
        if self.null()? {
            return Some(None);
        }
        if !self.keep.line_ranges {
            // Checked as `LineRange::parse` checks them, nothing built.
            self.array(|s| LineRange::is_valid(s.str()?).then_some(()))?;
            return Some(None);
        }
        let mut out = Vec::new();
        self.array(|s| {
            out.push(LineRange::parse(s.str()?).ok()?);
            Some(())
        })?;
        Some(Some(out))
    }

    /// Each element of an array in turn (`item(self)` reads it).
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if self.open(b'[', b']')? {
            loop {
                item(self)?;
                if !self.more(b']')? {
                    break;
                }
            }
        }
        Some(())
    }

    /// A key: one of `known` compared in place (a record's keys are few and
    /// come in much the same order, so this is cheaper than finding the
    /// string's end), else any string as [`Scanner::str`] reads it. Either
    /// way the same slice of the line.
    ///
    /// `next` is where to start looking in `known`: just after the key last
    /// found, so that keys in the expected order are each found at once.
    fn key(&mut self, known: &[&str], next: &mut usize) -> Option<&'a str> {
        if self.peek()? == b'"' {
            let start = self.at + 1;
            let rest = &self.bytes[start..];
            for i in 0..known.len() {
                let j = if *next + i < known.len() { *next + i } else { *next + i - known.len() };
                // Bytes compared in a loop: a key is short, and `memcmp`'s
                // call cost more than the comparison.
                let k = known[j].as_bytes();
                if rest.get(k.len()) == Some(&b'"') && rest.iter().zip(k).all(|(a, b)| a == b) {
                    self.at = start + k.len() + 1;
                    *next = if j + 1 < known.len() { j + 1 } else { 0 };
                    return Some(&self.text[start..start + k.len()]);
                }
            }
        }
        self.str()
    }

    /// Each key of an object in turn (`field(self, key)` reads its value);
    /// `known` are the keys the caller expects (see [`Scanner::key`]).
    fn object(&mut self, known: &[&str], mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        if !self.open(b'{', b'}')? {
            return Some(());
        }
        let mut next = 0;
        loop {
            let key = self.key(known, &mut next)?;
            self.eat(b':')?;
            field(self, key)?;
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    /// The record and its step (see [`scan_with_step`]).
    fn record(&mut self) -> Option<(RolloutRef<'a>, u64)> {
        let (mut group, mut predicted, mut target, mut turns) = (None, None, None, None);
        let (mut tokens, mut valid, mut truncated) = (None, None, None);
        let (mut steps, mut step) = (0, None);
        const KEYS: [&str; 8] =
            ["group", "predicted", "target", "turns", "completion_tokens", "valid", "truncated", "step"];
        self.object(&KEYS, |s, key| match key {
            "group" => once(&mut group, Text(Cow::Borrowed(s.str()?))),
            "predicted" => once(&mut predicted, s.selection()?),
            "target" => once(&mut target, s.selection()?),
            "turns" => once(&mut turns, s.turns()?),
            "completion_tokens" => once(&mut tokens, s.u64()?),
            "valid" => once(&mut valid, s.bool()?),
            "truncated" => once(&mut truncated, s.bool()?),
            "step" => {
                s.ws();
                let start = s.at;
                s.skip(1)?;
                steps += 1;
                step = plain_u64(&s.text[start..s.at]);
                Some(())
            }
            _ => s.skip(1),
        })?;
        let record = RolloutRef {
            group: group?,
            predicted: predicted.flatten(),
            target: target.flatten(),
            turns: turns.flatten(),
            completion_tokens: tokens.flatten(),
            valid: valid.flatten(),
            truncated: truncated.flatten(),
        };
        // A duplicated key is `serde_json`'s error, which reads as step 0.
        Some((record, if steps == 1 { step.unwrap_or(0) } else { 0 }))
    }

    fn selection(&mut self) -> Option<Option<SelectionRef<'a>>> {
        if self.null()? {
            return Some(None);
        }
        let (mut files, mut line_ranges, mut functions) = (None, None, None);
        self.object(&["files", "line_ranges", "functions"], |s, key| match key {
            "files" => once(&mut files, s.texts()?),
            "line_ranges" => once(&mut line_ranges, s.line_ranges()?),
            "functions" => once(&mut functions, s.texts()?),
            // `deny_unknown_fields`: `serde_json` rejects the line.
            _ => None,
        })?;
        Some(Some(SelectionRef {
            files: files.flatten(),
            line_ranges: line_ranges.flatten(),
            functions: functions.flatten(),
        }))
    }

    fn turns(&mut self) -> Option<Option<Vec<Vec<CallRef<'a>>>>> {
        if self.null()? {
            return Some(None);
        }
        let mut turns = Vec::with_capacity(8);
        self.array(|s| {
            let mut calls = Vec::new();
            s.array(|s| {
                calls.push(s.call()?);
                Some(())
            })?;
            turns.push(calls);
            Some(())
        })?;
        Some(Some(turns))
    }

    fn call(&mut self) -> Option<CallRef<'a>> {
        let (mut tool, mut args, mut entities) = (None, None, None);
        self.object(&["tool", "args", "entities"], |s, key| match key {
            "tool" => once(&mut tool, Text(Cow::Borrowed(s.str()?))),
            "args" => once(&mut args, s.skip(1)?),
            "entities" => once(&mut entities, s.texts()?),
            _ => s.skip(1),
        })?;
        Some(CallRef { _tool: tool?, _args: super::AnyJson, entities: entities.flatten() })
    }

    /// Any JSON value, checked and not kept, at nesting `depth`.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => self.object(&[], |s, _| s.skip(depth + 1)),
            b'[' => self.array(|s| s.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            _ => None,
        }
    }

    /// A string, escapes checked (`\u` gives up: its surrogate rules are
    /// `serde_json`'s to apply).
    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            // Plain bytes are passed over [`special`]'s way, many at a time.
            self.at += special(&self.bytes[self.at..])?;
            match self.bytes[self.at] {
                b'"' => break,
                b'\\' => {
                    match *self.bytes.get(self.at + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        _ => return None,
                    }
                    self.at += 2;
                }
                _ => return None,
            }
        }
        self.at += 1;
        Some(())
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?` with at most 15 digits: always a finite `f64`.
    fn skip_number(&mut self) -> Option<()> {
        if self.bytes[self.at] == b'-' {
            self.at += 1;
        }
        let digits = |s: &mut Self| {
            let start = s.at;
            while let Some(b'0'..=b'9') = s.bytes.get(s.at) {
                s.at += 1;
            }
            s.at - start
        };
        let start = self.at;
        let int = digits(self);
        if int == 0 || (int > 1 && self.bytes[start] == b'0') {
            return None;
        }
        let mut frac = 0;
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            frac = digits(self);
            if frac == 0 {
                return None;
            }
        }
        if int + frac > 15 || matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            return None;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::{special, swar};

    #[test]
    fn special_finds_the_first_quote_backslash_or_control_byte() {
        let naive = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
        let alphabet = [b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0x9f, 0xa0, 0xff, b'!', b'#', b'[', b']'];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for len in 0..70 {
            for _ in 0..400 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        // Mostly plain bytes, so the special one lands anywhere.
                        if state.is_multiple_of(8) {
                            alphabet[(state >> 8) as usize % alphabet.len()]
                        } else {
                            b'a' + (state >> 8) as u8 % 26
                        }
                    })
                    .collect();
                assert_eq!(special(&bytes), naive(&bytes), "{bytes:?}");
                assert_eq!(swar(&bytes), naive(&bytes), "{bytes:?}");
            }
        }
    }
}
