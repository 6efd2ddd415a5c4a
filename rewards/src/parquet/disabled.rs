//! Parquet without the Parquet crates: every call says to rebuild.

use std::path::Path;

use rewardlab_dsl::csv_table::CsvFeatures;
use rewardlab_dsl::table::Outputs;

use super::{ParquetError, Streamed};

fn not_compiled(path: &Path) -> ParquetError {
    ParquetError::NotCompiled { path: path.to_path_buf() }
}

pub(super) fn holds_rollouts(path: &Path) -> Result<bool, ParquetError> {
    Err(not_compiled(path))
}

pub(super) fn read_features(path: &Path, _columns: Option<&[&str]>) -> Result<CsvFeatures, ParquetError> {
    Err(not_compiled(path))
}

pub(super) fn rollout_lines(path: &Path) -> Result<Vec<u8>, ParquetError> {
    Err(not_compiled(path))
}

pub(super) fn stream_features<E: From<ParquetError>>(
    path: &Path,
    _columns: &[&str],
    _chunk: impl FnMut(CsvFeatures) -> Result<(), E>,
) -> Result<Streamed, E> {
    Err(not_compiled(path).into())
}

/// Never made: creating one says to rebuild.
pub(super) struct Writer(std::convert::Infallible);

impl Writer {
    pub(super) fn create(path: &Path, _first: &CsvFeatures) -> Result<Writer, ParquetError> {
        Err(not_compiled(path))
    }

    pub(super) fn write(&mut self, _features: &CsvFeatures, _outputs: &Outputs) -> Result<(), ParquetError> {
        match self.0 {}
    }

    pub(super) fn finish(self) -> Result<(), ParquetError> {
        match self.0 {}
    }
}
