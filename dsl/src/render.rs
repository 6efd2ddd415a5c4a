//! Caret rendering of diagnostics (the implementation behind
//! [`crate::diag::render`] and [`crate::diag::render_all`]).
//!
//! ```text
//! rewards/v1.reward:3:10: error: unknown function `grades`
//!   |
//! 3 | reward = grades(word)
//!   |          ^^^^^^
//!   = help: did you mean `grade`?
//! ```
//!
//! Lines and columns are 1-based and columns count characters. The gutter is
//! as wide as the line number. Tabs become [`TAB_WIDTH`] spaces in both the
//! quoted line and the caret line, so the carets stay under the span. A span
//! always gets at least one caret (an empty span marks a position, such as
//! the end of a line); a span running over several lines is underlined to
//! the end of its first line. Spans that fall outside the text or inside a
//! character are clamped rather than trusted.
//!
//! Control characters never reach the terminal raw: a crafted file could
//! otherwise write escape sequences through its own source line. A C0
//! control character or DEL in the quoted line (and in the file name,
//! message, help and notes) is shown as `\x1b`, a C1 control character as
//! `\u{9b}`, as ripgrep shows them; the carets count the escaped width, so
//! they stay under the span of the *rendered* line. The `line:col` header
//! keeps counting the source's characters, as editors do.

use std::fmt::Write;

use crate::diag::{Diagnostic, Severity};
use crate::span::SourceFile;

/// Columns a tab takes in the rendered source line.
const TAB_WIDTH: usize = 4;

pub(crate) fn render(source: &SourceFile, diag: &Diagnostic) -> String {
    let text = source.text();
    let start = floor_boundary(text, diag.span.start as usize);
    let end = floor_boundary(text, (diag.span.end as usize).max(start));
    let (line, col) = source.line_col(start);
    let severity = match diag.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };

    let mut out = String::new();
    let _ = writeln!(out, "{}:{line}:{col}: {severity}: {}", escape(source.name()), escape(&diag.message));

    let width = line.to_string().len();
    let pad = " ".repeat(width);
    let line_text = source.line_text(line);
    let line_start = text[..start].rfind('\n').map_or(0, |p| p + 1);
    // The span's part on its first line; `start` may sit just past the
    // line's text (an end-of-line position, or the `\r` of a CRLF).
    let line_end = line_start + line_text.len();
    let prefix = text.get(line_start..start.min(line_end)).unwrap_or("");
    let underlined = text.get(start.min(line_end)..end.clamp(start.min(line_end), line_end)).unwrap_or("");
    let carets = display_width(underlined).max(1);

    let _ = writeln!(out, "{pad} |");
    if line_text.is_empty() {
        let _ = writeln!(out, "{line} |");
    } else {
        let _ = writeln!(out, "{line} | {}", escape(line_text));
    }
    let _ = writeln!(out, "{pad} | {}{}", " ".repeat(display_width(prefix)), "^".repeat(carets));
    if let Some(help) = &diag.help {
        write_annotation(&mut out, &pad, "help", help);
    }
    for note in &diag.notes {
        write_annotation(&mut out, &pad, "note", note);
    }
    out
}

pub(crate) fn render_all(source: &SourceFile, diags: &[Diagnostic]) -> String {
    if diags.is_empty() {
        return String::new();
    }
    let mut sorted: Vec<&Diagnostic> = diags.iter().collect();
    // Stable: diagnostics at one position keep the order they were reported in.
    sorted.sort_by_key(|d| (d.span.start, d.span.end));
    let mut out = sorted.iter().map(|d| render(source, d)).collect::<Vec<_>>().join("\n");
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let summary = match (errors, warnings) {
        (0, w) => format!("warning: {} emitted", count(w, "warning")),
        (e, 0) => format!("error: {} emitted", count(e, "error")),
        (e, w) => format!("error: {}, {} emitted", count(e, "error"), count(w, "warning")),
    };
    let _ = writeln!(out, "\n{summary}");
    out
}

/// `  = help: text`, with any further lines of the text aligned under its first.
fn write_annotation(out: &mut String, pad: &str, kind: &str, text: &str) {
    let indent = format!("{pad}   {}", " ".repeat(kind.len() + 2));
    for (n, line) in text.lines().enumerate() {
        let line = escape(line);
        if n == 0 {
            let _ = writeln!(out, "{pad} = {kind}: {line}");
        } else {
            let _ = writeln!(out, "{indent}{line}");
        }
    }
    if text.is_empty() {
        let _ = writeln!(out, "{pad} = {kind}:");
    }
}

/// The columns `s` takes once rendered: tabs expanded, control characters escaped.
fn display_width(s: &str) -> usize {
    s.chars().map(|c| rendered(c).map_or(1, |r| r.chars().count())).sum()
}

/// `s` as it is written to the terminal: tabs expanded, control characters escaped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match rendered(c) {
            Some(r) => out.push_str(&r),
            None => out.push(c),
        }
    }
    out
}

/// What a character that cannot be shown as itself is rendered as; `None`
/// for the characters written as they are.
fn rendered(c: char) -> Option<String> {
    match c {
        '\t' => Some(" ".repeat(TAB_WIDTH)),
        // C0 controls and DEL: one byte each, shown as a byte escape.
        '\0'..='\x1f' | '\x7f' => Some(format!("\\x{:02x}", u32::from(c))),
        // C1 controls (U+0080 to U+009F, CSI among them).
        c if c.is_control() => Some(format!("\\u{{{:x}}}", u32::from(c))),
        _ => None,
    }
}

/// The largest character boundary at or below `offset`, within the text.
fn floor_boundary(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

#[cfg(test)]
mod tests;
