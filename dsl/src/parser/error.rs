//! The parser's nom error type.
//!
//! nom's own errors only say *which combinator* failed; users need to hear
//! *what they wrote wrong*. So a failure either still is a bare nom position
//! (an `Err::Error`: "nothing of this shape starts here", which the caller
//! turns into a message that knows the context, e.g. "expected an expression
//! after `*`"), or already is the finished [`Diagnostic`] (an
//! `Err::Failure`, raised after a committed token, where the parser knows
//! exactly what went wrong).

use nom::error::{ErrorKind, ParseError};

use crate::diag::Diagnostic;

#[derive(Debug)]
pub(crate) enum SyntaxError {
    /// A leaf parser did not match; `rest_len` is the length of the input it
    /// was given, which locates it within the statement.
    Nom { rest_len: usize },
    /// A finished diagnostic (boxed: errors travel through every `Result`).
    Diag(Box<Diagnostic>),
}

impl ParseError<&str> for SyntaxError {
    fn from_error_kind(input: &str, _kind: ErrorKind) -> Self {
        SyntaxError::Nom { rest_len: input.len() }
    }

    fn append(_input: &str, _kind: ErrorKind, other: Self) -> Self {
        other
    }
}

/// A committed failure carrying its diagnostic.
pub(crate) fn failure(diag: Diagnostic) -> nom::Err<SyntaxError> {
    nom::Err::Failure(SyntaxError::Diag(Box::new(diag)))
}

/// A recoverable "nothing starts here" at `input`.
pub(crate) fn no_match(input: &str) -> nom::Err<SyntaxError> {
    nom::Err::Error(SyntaxError::Nom { rest_len: input.len() })
}
