//! Diagnostics: errors and warnings with a span, and their rendering as
//! `file:line:col: error: message`, the source line, a caret underline and a help line.
//!
//! All rendering of carets lives here; the parser and checker only build
//! [`Diagnostic`] values.

use crate::span::{SourceFile, Span};

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The file still compiles.
    Warning,
    /// The file produces no program.
    Error,
}

/// One finding about a source text.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// Whether the finding stops compilation.
    pub severity: Severity,
    /// A short machine-readable code, e.g. `unknown-name`, `reward-layer-scaling`.
    pub code: &'static str,
    /// The one-line statement of the problem.
    pub message: String,
    /// Where in the source the problem is.
    pub span: Span,
    /// A hint shown as `help: ...` under the caret line.
    pub help: Option<String>,
    /// Further lines shown as `note: ...` (counterexamples, the interval found, ...).
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// An error with no help or notes yet.
    pub fn error(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Error, code, message: message.into(), span, help: None, notes: Vec::new() }
    }

    /// A warning with no help or notes yet.
    pub fn warning(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, code, message: message.into(), span, help: None, notes: Vec::new() }
    }

    /// Sets the help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Appends a note line.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Whether this is an error, not a warning.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Renders one diagnostic against its source.
///
/// ```text
/// rewards/v1.reward:3:14: error: unknown function `grades`
///   |
/// 3 | reward = 0.5 * grades(word)
///   |                ^^^^^^
///   = help: did you mean `grade`?
/// ```
pub fn render(source: &SourceFile, diag: &Diagnostic) -> String {
    crate::render::render(source, diag)
}

/// Renders every diagnostic, errors and warnings in source order, and a
/// closing count line (`2 errors, 1 warning`) when there is any.
pub fn render_all(source: &SourceFile, diags: &[Diagnostic]) -> String {
    crate::render::render_all(source, diags)
}
