//! Building a tool's text output under the character budget.
//!
//! Lines are kept in order while they fit; the rest are only counted, so the closing line can say
//! exactly how much was cut. Entities are recorded beside their lines, so a call reports as
//! entities exactly what the policy was shown.

use crate::{
    Limits,
    tools::{Entity, Status, ToolResult},
};

pub(crate) struct Output {
    max_chars: usize,
    max_line_chars: usize,
    kept: Vec<(String, Option<Entity>)>,
    kept_chars: usize,
    overflowed: bool,
    total_lines: usize,
    total_chars: usize,
    notes: Vec<String>,
}

impl Output {
    pub(crate) fn new(limits: &Limits) -> Self {
        Output {
            max_chars: limits.max_output_chars,
            max_line_chars: limits.max_line_chars,
            kept: Vec::new(),
            kept_chars: 0,
            overflowed: false,
            total_lines: 0,
            total_chars: 0,
            notes: Vec::new(),
        }
    }

    /// Adds one line (no trailing newline) and the entity it shows, if any.
    pub(crate) fn line(&mut self, text: &str, entity: Option<Entity>) {
        let text = shorten(text, self.max_line_chars);
        // Each line costs its characters plus the newline that separates it from the next.
        let cost = text.chars().count() + 1;
        self.total_lines += 1;
        self.total_chars += cost;
        if !self.overflowed && self.kept_chars + cost <= self.max_chars + 1 {
            self.kept_chars += cost;
            self.kept.push((text, entity));
        } else {
            self.overflowed = true;
        }
    }

    /// Adds grep's line for a match at `line` of `path`, `path:line:text`, and its entity (the
    /// scan and a grep memo's replay both write matches through this).
    pub(crate) fn match_line(&mut self, path: &str, line: u64, text: &str) {
        self.line(&format!("{path}:{line}:{text}"), Some(Entity::line(path, line)));
    }

    /// Whether further lines can still be shown. Once not, callers may use [`Output::count`]
    /// instead of building lines nobody will see.
    pub(crate) fn showing(&self) -> bool {
        !self.overflowed
    }

    /// Counts a line of `chars` characters that is not shown, exactly as [`Output::line`] would.
    pub(crate) fn count(&mut self, chars: usize) {
        let shown = if chars > self.max_line_chars {
            self.max_line_chars + cut_marker(chars - self.max_line_chars).chars().count()
        } else {
            chars
        };
        self.total_lines += 1;
        self.total_chars += shown + 1;
        self.overflowed = true;
    }

    /// Counts `lines` lines that are not shown, none longer than the line cap, of `chars`
    /// characters in all: [`Output::count`] for each, at once.
    pub(crate) fn count_many(&mut self, lines: u64, chars: u64) {
        if lines > 0 {
            self.total_lines += lines as usize;
            self.total_chars += (chars + lines) as usize;
            self.overflowed = true;
        }
    }

    /// Adds a closing note (`[...]`) that is always shown, after the lines.
    pub(crate) fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    pub(crate) fn lines(&self) -> usize {
        self.total_lines
    }

    /// Renders the output. When lines must be cut, the closing line says how many lines and
    /// characters were cut and `hint(first_cut_line_index)` says how to narrow the call.
    pub(crate) fn finish(mut self, timed_out: bool, hint: impl Fn(usize) -> String) -> ToolResult {
        let notes_chars: usize = self.notes.iter().map(|n| n.chars().count() + 1).sum();
        let fits = self.total_chars + notes_chars <= self.max_chars + 1;
        let mut cut_notice = None;
        if !fits {
            // Drop kept lines until the lines, the notes and the notice fit together. The notice
            // is measured after the counts are final, so a shorter count cannot overflow it.
            loop {
                let shown = self.kept.len();
                let notice = format!(
                    "[output cut at {} characters: {} more lines ({} characters) not shown; {}]",
                    self.max_chars,
                    self.total_lines - shown,
                    self.total_chars - self.kept_chars,
                    hint(shown),
                );
                if self.kept_chars + notes_chars + notice.chars().count() <= self.max_chars || self.kept.is_empty() {
                    cut_notice = Some(notice);
                    break;
                }
                if let Some((text, _)) = self.kept.pop() {
                    self.kept_chars -= text.chars().count() + 1;
                }
            }
        }
        let status = if timed_out {
            Status::Timeout
        } else if cut_notice.is_some() {
            Status::Truncated
        } else {
            Status::Ok
        };
        let mut lines = Vec::with_capacity(self.kept.len() + self.notes.len() + 1);
        let mut entities = Vec::new();
        for (text, entity) in self.kept {
            lines.push(text);
            entities.extend(entity);
        }
        // The notes come first so that the cut notice, when there is one, is the last line.
        lines.extend(self.notes);
        lines.extend(cut_notice);
        ToolResult { output: lines.join("\n"), entities, status }
    }
}

/// Shortens a line to `max` characters, saying how many were left out.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((byte, _)) => {
            format!("{}{}", &text[..byte], cut_marker(text[byte..].chars().count()))
        }
    }
}

fn cut_marker(rest: usize) -> String {
    format!(" …[{rest} more characters on this line]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_output_chars: usize) -> Limits {
        Limits { max_output_chars, max_line_chars: 40, ..Limits::default() }
    }

    #[test]
    fn short_output_is_complete() {
        let mut out = Output::new(&limits(100));
        out.line("a:1:x", Some(Entity::line("a", 1)));
        out.line("b:2:y", Some(Entity::line("b", 2)));
        let result = out.finish(false, |_| "narrow".into());
        assert_eq!(result.output, "a:1:x\nb:2:y");
        assert_eq!(result.entities, ["a:1", "b:2"]);
        assert_eq!(result.status, Status::Ok);
    }

    #[test]
    fn exactly_the_budget_is_not_cut() {
        let mut out = Output::new(&limits(11));
        out.line("a:1:x", None);
        out.line("b:2:y", None);
        assert_eq!(out.finish(false, |_| String::new()).status, Status::Ok);
    }

    #[test]
    fn long_output_is_cut_within_budget_and_says_how_much() {
        let mut out = Output::new(&limits(200));
        for i in 0..100 {
            out.line(&format!("file.py:{i}:some text"), Some(Entity::line("file.py", i)));
        }
        let result = out.finish(false, |first| format!("continue from line {first}"));
        assert_eq!(result.status, Status::Truncated);
        assert!(result.output.chars().count() <= 200, "{}", result.output);
        let shown = result.entities.len();
        let last = result.output.lines().last().expect("a closing line");
        assert!(last.contains(&format!("{} more lines", 100 - shown)), "{last}");
        assert!(last.contains(&format!("continue from line {shown}")), "{last}");
        assert_eq!(result.output.lines().count(), shown + 1);
    }

    #[test]
    fn counting_matches_building() {
        let lines = ["short", "a line that is longer than forty characters, by some way", "é"];
        let mut built = Output::new(&limits(10));
        let mut counted = Output::new(&limits(10));
        for line in lines {
            built.line(line, None);
            if counted.showing() {
                counted.line(line, None);
            } else {
                counted.count(line.chars().count());
            }
        }
        assert_eq!(built.total_chars, counted.total_chars);
        assert_eq!(built.total_lines, counted.total_lines);
        assert_eq!(built.finish(false, |_| String::new()), counted.finish(false, |_| String::new()));
    }

    #[test]
    fn long_lines_are_shortened() {
        let mut out = Output::new(&limits(4096));
        out.line(&"é".repeat(100), None);
        let result = out.finish(false, |_| String::new());
        assert!(result.output.starts_with(&"é".repeat(40)));
        assert!(result.output.ends_with("…[60 more characters on this line]"));
    }
}
