//! The crate's error type: every failure names what it was doing (a path, a tensor, a field).

use std::path::PathBuf;

/// Errors from loading, running, training or saving a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tensor operation failed (shape mismatch, dtype, device).
    #[error("tensor operation failed")]
    Candle(#[from] candle_core::Error),
    /// A file could not be read or written.
    #[error("cannot access {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A JSON file (config, index, adapter config, tokenizer) did not parse.
    #[error("invalid JSON in {path}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error, with its line and column.
        source: serde_json::Error,
    },
    /// A safetensors file is malformed.
    #[error("safetensors file {path}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What the safetensors reader found wrong.
        source: safetensors::SafeTensorError,
    },
    /// A checkpoint is inconsistent (missing tensor, shard, unexpected shape).
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// The checkpoint directory or file.
        path: PathBuf,
        /// What is inconsistent.
        message: String,
    },
    /// The model config asks for something this implementation does not support.
    #[error("unsupported model config: {0}")]
    Config(String),
    /// The tokenizer failed or lacks a token the template needs.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A LoRA adapter is inconsistent with the model or its own config.
    #[error("adapter {path}: {message}")]
    Adapter {
        /// The adapter directory or file.
        path: PathBuf,
        /// What does not fit.
        message: String,
    },
    /// A caller passed arguments that cannot work together (empty batch, mismatched lengths).
    #[error("invalid argument: {0}")]
    Invalid(String),
}

/// Shorthand for results carrying [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }

    pub(crate) fn json(path: impl Into<PathBuf>) -> impl FnOnce(serde_json::Error) -> Error {
        let path = path.into();
        move |source| Error::Json { path, source }
    }
}
