//! Parquet, the format of Hugging Face datasets and many rollout logs, as an
//! input of `rewardlab eval` and `study replay` and as the output of
//! `rewardlab eval --out x.parquet`.
//!
//! A Parquet file holds one of two things, told apart by its schema
//! ([`holds_rollouts`]):
//! - **features**, flat columns named as in a features CSV (`group`,
//!   `Fb(file)`, `c`, ...): `group` a string (or integer) column, each feature
//!   a number or bool column, no nulls. [`read_features`] reads them into the
//!   same [`CsvFeatures`] the CSV reader gives, grouped the same way.
//! - **rollout records**, the contract's JSONL record as columns: `group`,
//!   `predicted` and `target` structs of string lists, `turns` a list of lists
//!   of `{tool, args, entities}` structs, and the scalar keys. [`rollout_lines`]
//!   turns each row into the record's JSON line, so that the JSONL loader
//!   checks them with the same rules and messages (`line N` is row `N`,
//!   1-based).
//!
//! [`write_outputs`] writes `group`, the table's feature columns and
//! `reward,adv,advantage`, one row per input row in input order.
//!
//! The Parquet crates are behind the `parquet` cargo feature (on for the
//! `rewardlab` binaries): without it every function returns
//! [`ParquetError::NotCompiled`], and the Python extension builds without them.

use std::path::{Path, PathBuf};

use rewardlab_dsl::csv_table::CsvFeatures;
use rewardlab_dsl::table::{Outputs, TableError};

#[cfg(feature = "parquet")]
#[path = "arrow.rs"]
mod imp;
#[cfg(not(feature = "parquet"))]
#[path = "disabled.rs"]
mod imp;

/// The first (and last) four bytes of every Parquet file.
pub const MAGIC: &[u8; 4] = b"PAR1";

/// Why a Parquet file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParquetError {
    /// This build has no Parquet support.
    #[error("{}: this build of rewardlab has no Parquet support (rebuild with the `parquet` feature)", path.display())]
    NotCompiled {
        /// The file that was to be read or written.
        path: PathBuf,
    },
    /// The file could not be opened or created.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error (its message ends this one's, so it is not a
        /// `source()`).
        error: std::io::Error,
    },
    /// The Parquet or Arrow library rejected the file (not Parquet, corrupt,
    /// an unsupported encoding) or the data written.
    #[error("{}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// The library's message.
        message: String,
    },
    /// The file has no `group` column.
    #[error("{}: no `group` column (columns are named as in a features CSV: `group`, `Fb(file)`, `c`, ...)", path.display())]
    NoGroupColumn {
        /// The file.
        path: PathBuf,
    },
    /// A feature the program reads is not a column of the file.
    #[error("{}: no column `{column}`", path.display())]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The missing feature key.
        column: String,
    },
    /// A column has a type that cannot hold what it must.
    #[error("{}: column `{column}` is {found}, not {expected}", path.display())]
    ColumnType {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
        /// The column's Arrow type, as Arrow prints it.
        found: String,
        /// What the column must be.
        expected: &'static str,
    },
    /// A value is missing (null) where one is required.
    #[error("{}: row {row}: `{column}` is null", path.display())]
    Null {
        /// The file.
        path: PathBuf,
        /// The 1-based row.
        row: usize,
        /// The column.
        column: String,
    },
    /// A row's group name is empty.
    #[error("{}: row {row}: the group name is empty", path.display())]
    EmptyGroup {
        /// The file.
        path: PathBuf,
        /// The 1-based row.
        row: usize,
    },
    /// The file holds no rows.
    #[error("{}: no rows", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The outputs do not have one value per row.
    #[error("{got} output rows for a table of {want} rows")]
    OutputLength {
        /// Output rows given.
        got: usize,
        /// Rows in the table.
        want: usize,
    },
    /// The columns did not form a valid feature table.
    #[error(transparent)]
    Table(#[from] TableError),
}

/// Whether `path` is a Parquet file: its extension is `.parquet`, or it
/// starts with the Parquet magic bytes.
pub fn is_parquet(path: &Path) -> bool {
    if path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("parquet")) {
        return true;
    }
    let mut head = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).is_ok() && &head == MAGIC
}

/// Whether the file holds rollout records rather than features: its schema
/// has a `predicted`, `target` or `turns` column, or any nested column.
pub fn holds_rollouts(path: &Path) -> Result<bool, ParquetError> {
    imp::holds_rollouts(path)
}

/// Reads a features file. With `columns`, only those (and `group`) are read,
/// and each must be present; without, every column but `group` is a feature.
pub fn read_features(path: &Path, columns: Option<&[&str]>) -> Result<CsvFeatures, ParquetError> {
    imp::read_features(path, columns)
}

/// The rollout records of a file as JSONL text, one line per row in file
/// order: list and struct columns become arrays and objects, nulls are left
/// out (an absent key), and each line parses as the contract's record.
pub fn rollout_lines(path: &Path) -> Result<Vec<u8>, ParquetError> {
    imp::rollout_lines(path)
}

/// How [`stream_features`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streamed {
    /// Every row was handed on.
    Done,
    /// A group came back after another had begun: the rows are not grouped,
    /// so the chunks handed on are not whole groups after all. Discard what
    /// was made of them and read the file whole ([`read_features`]).
    NotGrouped,
}

/// Reads a features file in chunks of whole groups, in file order, handing
/// each to `chunk` as a table whose rows are in input order, so that a program
/// without batch reductions (`Program::reads_batch`) can be evaluated and
/// written a chunk at a time, in memory for a few row groups instead of the
/// whole file. `columns` are the features read (each must be present).
///
/// A chunk holds the rows of one or more row groups (one per thread), less
/// the last group's rows when the next row group may hold more of them; those
/// come with the next chunk. The file's errors (a null, a column's type, an
/// empty group name) are [`read_features`]'s, but may come after some chunks
/// were handed on.
pub fn stream_features<E: From<ParquetError>>(
    path: &Path,
    columns: &[&str],
    chunk: impl FnMut(CsvFeatures) -> Result<(), E>,
) -> Result<Streamed, E> {
    imp::stream_features(path, columns, chunk)
}

/// Writes `group`, the feature columns of `features.table` and
/// `reward,adv,advantage` to `path`, rows in input order. `outputs` are in
/// table order, as evaluation returns them.
pub fn write_outputs(path: &Path, features: &CsvFeatures, outputs: &Outputs) -> Result<(), ParquetError> {
    let mut writer = OutputWriter::create(path, features)?;
    writer.write(features, outputs)?;
    writer.finish()
}

/// [`write_outputs`] a chunk at a time: the chunks of [`stream_features`]
/// (or any tables with the same columns), each with its outputs, written one
/// after another into one file.
pub struct OutputWriter(imp::Writer);

impl std::fmt::Debug for OutputWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputWriter").finish_non_exhaustive()
    }
}

impl OutputWriter {
    /// Creates the file, its columns those of `first` (the first chunk).
    pub fn create(path: &Path, first: &CsvFeatures) -> Result<OutputWriter, ParquetError> {
        imp::Writer::create(path, first).map(OutputWriter)
    }

    /// Appends a chunk's rows, in its input order; `outputs` in table order.
    pub fn write(&mut self, features: &CsvFeatures, outputs: &Outputs) -> Result<(), ParquetError> {
        let rows = features.order.len();
        for got in [outputs.reward.len(), outputs.adv.len(), outputs.advantage.len()] {
            if got != rows {
                return Err(ParquetError::OutputLength { got, want: rows });
            }
        }
        self.0.write(features, outputs)
    }

    /// Writes the file's footer; the file is complete once this returns.
    pub fn finish(self) -> Result<(), ParquetError> {
        self.0.finish()
    }
}

#[cfg(all(test, feature = "parquet"))]
mod tests;
