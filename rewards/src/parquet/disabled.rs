//! Parquet without the Parquet crates: every call says to rebuild.

use std::path::Path;

use rewardlab_dsl::csv_table::CsvFeatures;
use rewardlab_dsl::table::Outputs;

use super::ParquetError;

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

pub(super) fn write_outputs(path: &Path, _features: &CsvFeatures, _outputs: &Outputs) -> Result<(), ParquetError> {
    Err(not_compiled(path))
}
