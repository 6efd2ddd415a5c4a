//! Line ranges `path:start-end`, the unit of line-level answers and targets.
//!
//! A range is 1-based and inclusive; `path:n` means `n-n`. The text form is the wire form: a
//! range serialises to `path:start-end` and deserialises by [`LineRange::parse`], so a malformed
//! range in a record is a bad record.

use std::fmt;
use std::str::FromStr;

/// A line range `path:start-end`, 1-based and inclusive.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LineRange {
    /// The file, normalised (see [`crate::paths::normalize`]).
    pub path: String,
    /// First line, at least 1.
    pub start: u32,
    /// Last line, at least `start`.
    pub end: u32,
}

/// Why a line range does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineRangeError {
    /// The text is not of the form `path:start-end` or `path:n`.
    #[error("line range `{0}` is not `path:start-end`")]
    Shape(String),
    /// The start line is 0; lines are numbered from 1.
    #[error("line range `{0}`: lines are 1-based, start must be at least 1")]
    ZeroStart(String),
    /// The end line is smaller than the start line.
    #[error("line range `{0}`: end is before start")]
    Reversed(String),
    /// The path part is not a valid repository-relative path.
    #[error("line range `{text}`: {reason}")]
    Path {
        /// The range as written.
        text: String,
        /// Why its path part is not a valid path (its message ends this one's, so it is not a
        /// `source()`).
        reason: crate::paths::PathError,
    },
}

impl LineRange {
    /// A range from its parts, taken as they are (no normalisation, no checks).
    pub fn new(path: impl Into<String>, start: u32, end: u32) -> LineRange {
        LineRange { path: path.into(), start, end }
    }

    /// Number of lines covered.
    pub fn len(&self) -> u32 {
        self.end - self.start + 1
    }

    /// A range always covers at least one line.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Lines shared with `other` (0 for different files).
    pub fn overlap(&self, other: &LineRange) -> u32 {
        if self.path != other.path {
            return 0;
        }
        let lo = self.start.max(other.start);
        let hi = self.end.min(other.end);
        if hi >= lo { hi - lo + 1 } else { 0 }
    }

    /// Whether [`LineRange::parse`] accepts `text`, without building the
    /// range: a reader that checks ranges it does not keep allocates nothing
    /// for a normal path.
    pub fn is_valid(text: &str) -> bool {
        let Some((path, span)) = text.rsplit_once(':') else {
            return false;
        };
        let (start, end) = match span.split_once('-') {
            Some((a, b)) => (parse_line(a), parse_line(b)),
            None => (parse_line(span), parse_line(span)),
        };
        let (Some(start), Some(end)) = (start, end) else {
            return false;
        };
        // A normal path is kept as it is by `normalize`; the rest are rare.
        start > 0 && end >= start && (crate::paths::is_normal(path) || crate::paths::normalize(path).is_ok())
    }

    /// Parses `path:start-end` (a single line `path:n` is accepted as `n-n`),
    /// normalising the path. The split is at the last `:` so paths may contain colons.
    pub fn parse(text: &str) -> Result<LineRange, LineRangeError> {
        let shape = || LineRangeError::Shape(text.to_string());
        let (path, span) = text.rsplit_once(':').ok_or_else(shape)?;
        let (start, end) = match span.split_once('-') {
            Some((a, b)) => (parse_line(a).ok_or_else(shape)?, parse_line(b).ok_or_else(shape)?),
            None => {
                let n = parse_line(span).ok_or_else(shape)?;
                (n, n)
            }
        };
        if start == 0 {
            return Err(LineRangeError::ZeroStart(text.to_string()));
        }
        if end < start {
            return Err(LineRangeError::Reversed(text.to_string()));
        }
        let path =
            crate::paths::normalize(path).map_err(|reason| LineRangeError::Path { text: text.to_string(), reason })?;
        Ok(LineRange { path, start, end })
    }
}

fn parse_line(s: &str) -> Option<u32> {
    // `u32::from_str` accepts a leading `+`; a line number never has one.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for LineRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}-{}", self.path, self.start, self.end)
    }
}

impl FromStr for LineRange {
    type Err = LineRangeError;
    fn from_str(s: &str) -> Result<LineRange, LineRangeError> {
        LineRange::parse(s)
    }
}

impl serde::Serialize for LineRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for LineRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LineRange, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        LineRange::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lr(s: &str) -> LineRange {
        LineRange::parse(s).expect("test range parses")
    }

    #[test]
    fn overlap_and_length() {
        assert_eq!(lr("a.py:3-7").len(), 5);
        assert_eq!(lr("a.py:3-7").overlap(&lr("a.py:6-9")), 2);
        assert_eq!(lr("a.py:3-7").overlap(&lr("b.py:3-7")), 0);
        assert_eq!(lr("a.py:3-4").overlap(&lr("a.py:5-9")), 0);
    }

    #[test]
    fn serde_uses_the_text_form() {
        let json = serde_json::to_string(&lr("./a.py:3-7")).expect("serialises");
        assert_eq!(json, "\"a.py:3-7\"");
        let back: LineRange = serde_json::from_str(&json).expect("parses back");
        assert_eq!(back, LineRange::new("a.py", 3, 7));
        assert!(serde_json::from_str::<LineRange>("\"a.py:0-1\"").is_err());
    }

    #[test]
    fn is_valid_is_exactly_what_parse_accepts() {
        // Every text of up to 6 characters over the bytes that matter to a
        // range, and some longer ones with each byte replaced.
        let alphabet = ['a', '.', '/', ':', '-', '0', '1', '9', '+', ' '];
        let mut texts = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..6 {
            last = last.iter().flat_map(|t| alphabet.map(|c| format!("{t}{c}"))).collect();
            texts.extend(last.iter().cloned());
        }
        for base in ["src/a.py:10-20", "./a/../b.py:3", "a:b.py:4294967295-4294967295", "/x.py:1-2", "x/:1"] {
            for at in 0..base.len() {
                for c in alphabet {
                    texts.push(format!("{}{c}{}", &base[..at], &base[at + 1..]));
                }
            }
            texts.push(base.to_string());
        }
        let mut valid = 0;
        for t in &texts {
            assert_eq!(LineRange::is_valid(t), LineRange::parse(t).is_ok(), "{t:?}");
            valid += usize::from(LineRange::is_valid(t));
        }
        assert!(valid > 1000, "{valid} valid of {}", texts.len());
    }
}
