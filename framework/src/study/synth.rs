//! Inline formulas of a study file become one reward program: the text is
//! synthesised line by line (`param`s, `reward = ...`, `adv = ...`,
//! `advantage = ...`) while a span map remembers where each piece came from in
//! the study file, so the checker's diagnostics point at the formula the user
//! wrote, not at a file that exists nowhere.

use std::ops::Range;

use rewardlab_dsl::Span;

/// A synthesised program text and the map of its pieces back to the study file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Synth {
    pub text: String,
    segments: Vec<Segment>,
}

#[derive(Clone, Debug)]
struct Segment {
    synth: Range<usize>,
    study: Range<usize>,
    /// Byte-for-byte copy: offsets shift. Otherwise the whole segment maps to `study`.
    exact: bool,
}

impl Synth {
    /// Appends text copied verbatim from the study file at `study_start`.
    pub fn push_exact(&mut self, text: &str, study_start: usize) {
        let start = self.text.len();
        self.text.push_str(text);
        self.segments.push(Segment {
            synth: start..self.text.len(),
            study: study_start..study_start + text.len(),
            exact: true,
        });
    }

    /// Appends generated text that stands for the study-file range `study`.
    pub fn push_for(&mut self, text: &str, study: Range<usize>) {
        let start = self.text.len();
        self.text.push_str(text);
        self.segments.push(Segment { synth: start..self.text.len(), study, exact: false });
    }

    /// Appends glue text (`reward = `, newlines) that maps to nothing.
    pub fn push_glue(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Maps a span of the synthesised text into the study file; spans that
    /// start in glue map to `fallback` (the variant's name, say).
    pub fn map(&self, span: Span, fallback: Range<usize>) -> Span {
        let span = span.range();
        let hit = self.segments.iter().find(|s| s.synth.contains(&span.start) || s.synth.end == span.start);
        match hit {
            Some(s) if s.exact => {
                let start = s.study.start + (span.start - s.synth.start);
                let end = s.study.start + (span.end.min(s.synth.end).max(span.start) - s.synth.start);
                Span::new(start, end.max(start))
            }
            Some(s) => Span::new(s.study.start, s.study.end),
            None => Span::new(fallback.start, fallback.end),
        }
    }
}

/// Where the value of a TOML string starts in the document, given the span of
/// the whole string token (quotes included) and its parsed value. `Err` when
/// the token's raw text differs from the value (escape sequences or line-ending
/// backslashes), because offsets inside it would no longer line up.
pub(crate) fn string_content_start(doc: &str, token: Range<usize>, value: &str) -> Result<usize, String> {
    let raw = doc.get(token.clone()).ok_or_else(|| "string span outside the document".to_string())?;
    for delim in ["\"\"\"", "'''", "\"", "'"] {
        let n = delim.len();
        if raw.len() >= 2 * n && raw.starts_with(delim) && raw.ends_with(delim) {
            let mut start = token.start + n;
            let mut inner = &raw[n..raw.len() - n];
            // A newline right after a multi-line string's opening delimiter is trimmed by TOML.
            if n == 3 {
                for nl in ["\r\n", "\n"] {
                    if let Some(rest) = inner.strip_prefix(nl) {
                        inner = rest;
                        start += nl.len();
                        break;
                    }
                }
            }
            return if inner == value {
                Ok(start)
            } else {
                Err("this formula uses escape sequences; write it as a literal string ('...') so \
                     diagnostics can point into it"
                    .to_string())
            };
        }
    }
    Err("not a string token".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn study_content_start_handles_every_string_form() {
        let doc = r#"a = "x + 1"
b = 'y'
c = """
z"""
d = "q\"q"
"#;
        let a = doc.find("\"x").expect("a");
        assert_eq!(string_content_start(doc, a..a + 7, "x + 1"), Ok(a + 1));
        let b = doc.find("'y").expect("b");
        assert_eq!(string_content_start(doc, b..b + 3, "y"), Ok(b + 1));
        let c = doc.find("\"\"\"").expect("c");
        assert_eq!(string_content_start(doc, c..c + 8, "z"), Ok(c + 4));
        let d = doc.find("\"q").expect("d");
        assert!(string_content_start(doc, d..d + 6, "q\"q").expect_err("escape").contains("literal string"));
    }

    #[test]
    fn study_synth_map_shifts_exact_segments_and_falls_back_elsewhere() {
        let mut s = Synth::default();
        s.push_for("param w = 1\n", 50..53);
        s.push_glue("reward = ");
        let at = s.text.len();
        s.push_exact("Fb(file) * w", 100);
        s.push_glue("\n");
        assert_eq!(s.map(Span::new(at + 11, at + 12), 0..4), Span::new(111, 112));
        assert_eq!(s.map(Span::new(2, 5), 0..4), Span::new(50, 53));
        assert_eq!(s.map(Span::new(at - 3, at - 1), 0..4), Span::new(0, 4));
        // A span running past the segment is clipped to it.
        assert_eq!(s.map(Span::new(at, at + 40), 0..4), Span::new(100, 112));
    }
}
