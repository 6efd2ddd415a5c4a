//! Parquet through the `parquet` crate's Arrow reader and writer.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;
use rewardlab_dsl::FeatureTable;
use rewardlab_dsl::csv_table::{CsvFeatures, GROUP_COLUMN, OUTPUT_COLUMNS, RowOrder, RunGrouping};
use rewardlab_dsl::table::Outputs;
use serde_json::{Map, Value};

use super::{ParquetError, Streamed};

/// Rows per record batch read and written.
const BATCH_ROWS: usize = 64 * 1024;

fn format_err(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> ParquetError + '_ {
    move |e| ParquetError::Format { path: path.to_path_buf(), message: e.to_string() }
}

fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ParquetError> {
    let file = File::open(path).map_err(|error| ParquetError::Io { path: path.to_path_buf(), error })?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| format_err(path)(&e))
}

pub(super) fn holds_rollouts(path: &Path) -> Result<bool, ParquetError> {
    let builder = open(path)?;
    Ok(builder.schema().fields().iter().any(|f| {
        matches!(f.name().as_str(), "predicted" | "target" | "turns")
            || matches!(f.data_type(), DataType::List(_) | DataType::LargeList(_) | DataType::Struct(_))
    }))
}

/// The group runs of one row group: `(group, rows)` for each stretch of
/// consecutive rows of one group, names copied out so that the decoded
/// batches can go at once.
type Runs = Vec<(String, usize)>;

/// Decodes the row groups in parallel, each by its own reader over the
/// layout's columns, writing feature `k` of row group `g` straight into
/// `columns[k][bases[g]..]` (no per-part buffers to grow and merge), and
/// returns each row group's runs. The first error in row order is the error.
fn read_parts(path: &Path, layout: &Layout, columns: &mut [Vec<f64>]) -> Result<Vec<Runs>, ParquetError> {
    let (features, lengths) = (layout.features(), &layout.lengths);
    // Row group `g`'s slice of every column.
    let mut slices: Vec<Vec<&mut [f64]>> = lengths.iter().map(|_| Vec::with_capacity(columns.len())).collect();
    for column in columns.iter_mut() {
        let mut rest = column.as_mut_slice();
        for (g, &n) in lengths.iter().enumerate() {
            let (head, tail) = rest.split_at_mut(n);
            slices[g].push(head);
            rest = tail;
        }
    }
    let runs: Vec<Result<Runs, ParquetError>> = slices
        .into_par_iter()
        .enumerate()
        .map(|(g, mut out)| decode_row_group(path, &features, layout.row_group(g), &mut out))
        .collect();
    runs.into_iter().collect()
}

/// Decodes row group `g` of `rows` rows, whose first row is file row `base`
/// (0-based, for errors), by its own reader over the `group` and feature
/// columns, writing feature `k` into `out[k]` (`rows` places), and returns its
/// runs.
fn decode_row_group(
    path: &Path,
    features: &[&str],
    (g, base, rows): (usize, usize, usize),
    out: &mut [&mut [f64]],
) -> Result<Runs, ParquetError> {
    let builder = open(path)?;
    let group = GROUP_COLUMN;
    let indices: Vec<usize> = std::iter::once(group)
        .chain(features.iter().copied())
        .map(|n| builder.schema().index_of(n).expect("the caller checked the column is present"))
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder
        .with_projection(mask)
        .with_row_groups(vec![g])
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| format_err(path)(&e))?;
    let mut runs = Runs::new();
    let mut done = 0;
    for batch in reader {
        let batch = batch.map_err(|e| format_err(path)(&e))?;
        let row = base + done;
        let n = batch.num_rows();
        if done + n > rows {
            return Err(format_err(path)(&format!("row group {g} holds more rows than its metadata says")));
        }
        let texts = GroupText::of(path, batch.column_by_name(group).expect("projected"))?;
        for i in 0..n {
            let name = texts.get(i).ok_or_else(|| ParquetError::Null {
                path: path.to_path_buf(),
                row: row + i + 1,
                column: group.to_string(),
            })?;
            if name.is_empty() {
                return Err(ParquetError::EmptyGroup { path: path.to_path_buf(), row: row + i + 1 });
            }
            push_run(&mut runs, name, 1);
        }
        for (column, key) in out.iter_mut().zip(features) {
            let array = batch.column_by_name(key).expect("projected");
            put_numbers(path, key, array, row, &mut column[done..done + n])?;
        }
        done += n;
    }
    if done != rows {
        return Err(format_err(path)(&format!("row group {g} holds fewer rows than its metadata says")));
    }
    Ok(runs)
}

/// What a read of a features file covers: the feature columns (`columns`,
/// each checked present, or every column but `group`) and each row group's
/// row count and first row.
struct Layout {
    features: Vec<String>,
    lengths: Vec<usize>,
    bases: Vec<usize>,
}

impl Layout {
    /// Reads `path`'s footer; errors when the file has no `group` column, lacks
    /// a column asked for, or has no rows.
    fn of(path: &Path, columns: Option<&[&str]>) -> Result<Layout, ParquetError> {
        let builder = open(path)?;
        let names: Vec<&str> = builder.schema().fields().iter().map(|f| f.name().as_str()).collect();
        if !names.contains(&GROUP_COLUMN) {
            return Err(ParquetError::NoGroupColumn { path: path.to_path_buf() });
        }
        let mut features: Vec<String> = Vec::new();
        match columns {
            Some(keys) => {
                for &k in keys {
                    if !names.contains(&k) {
                        return Err(ParquetError::MissingColumn { path: path.to_path_buf(), column: k.to_string() });
                    }
                    if !features.iter().any(|f| f == k) {
                        features.push(k.to_string());
                    }
                }
            }
            None => features.extend(names.iter().filter(|&&n| n != GROUP_COLUMN).map(|n| n.to_string())),
        }
        let meta = builder.metadata();
        let lengths: Vec<usize> =
            (0..meta.num_row_groups()).map(|g| usize::try_from(meta.row_group(g).num_rows()).unwrap_or(0)).collect();
        if lengths.iter().sum::<usize>() == 0 {
            return Err(ParquetError::Empty { path: path.to_path_buf() });
        }
        let bases = lengths.iter().scan(0, |sum, &n| Some(std::mem::replace(sum, *sum + n))).collect();
        Ok(Layout { features, lengths, bases })
    }

    fn features(&self) -> Vec<&str> {
        self.features.iter().map(String::as_str).collect()
    }

    fn rows(&self) -> usize {
        self.lengths.iter().sum()
    }

    /// Row group `g`, its first row and its row count, as [`decode_row_group`] takes them.
    fn row_group(&self, g: usize) -> (usize, usize, usize) {
        (g, self.bases[g], self.lengths[g])
    }
}

pub(super) fn read_features(path: &Path, columns: Option<&[&str]>) -> Result<CsvFeatures, ParquetError> {
    let layout = Layout::of(path, columns)?;
    let features = layout.features();
    let mut values: Vec<Vec<f64>> = features.iter().map(|_| vec![0.0; layout.rows()]).collect();
    // Groups by first appearance, as the CSV reader orders them.
    let mut runs: Runs = read_parts(path, &layout, &mut values)?.into_iter().flatten().collect();
    let RunGrouping { first_runs, sizes, order } = RunGrouping::of(runs.iter().map(|(name, n)| (name.as_str(), *n)));
    // Each group's name moves out of its first run: no second copy.
    let group_names: Vec<String> = first_runs.iter().map(|&r| std::mem::take(&mut runs[r].0)).collect();
    drop(runs);
    let mut table = FeatureTable::new(group_names.into_iter().zip(sizes))?;
    for (key, column) in features.iter().zip(values) {
        table.add_column(key.to_string(), order.permute(column))?;
    }
    Ok(CsvFeatures::from_table(table, order))
}

/// Adds `n` rows of group `name` after `runs`: to the last run when it is that group's.
fn push_run(runs: &mut Runs, name: std::borrow::Cow<'_, str>, n: usize) {
    match runs.last_mut() {
        Some((last, count)) if *last == name => *count += n,
        _ => runs.push((name.into_owned(), n)),
    }
}

/// A row group's runs and its feature columns.
type Part = (Runs, Vec<Vec<f64>>);

/// See [`super::stream_features`]. Row groups are decoded in waves of one per
/// thread; the rows of a wave's last group wait for the next wave, which may
/// hold more of that group.
pub(super) fn stream_features<E: From<ParquetError>>(
    path: &Path,
    columns: &[&str],
    mut chunk: impl FnMut(CsvFeatures) -> Result<(), E>,
) -> Result<Streamed, E> {
    let layout = Layout::of(path, Some(columns))?;
    let features = layout.features();
    // Read and not yet handed on: runs of one group each (adjacent runs of one group merged)
    // and their rows' values.
    let mut runs = Runs::new();
    let mut values: Vec<Vec<f64>> = features.iter().map(|_| Vec::new()).collect();
    // The groups handed on, by a hash of their name: a name that comes back means the rows
    // are not grouped (a collision can only say so wrongly, and then the caller reads the
    // file whole, which is always right).
    let hashes = std::hash::RandomState::new();
    let mut finished: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let row_groups: Vec<usize> = (0..layout.lengths.len()).collect();
    let waves = row_groups.chunks(rayon::current_num_threads().max(1));
    let last_wave = waves.len() - 1;
    for (w, wave) in waves.enumerate() {
        let parts: Vec<Result<Part, ParquetError>> = wave
            .par_iter()
            .map(|&g| {
                let mut part: Vec<Vec<f64>> = features.iter().map(|_| vec![0.0; layout.lengths[g]]).collect();
                let mut out: Vec<&mut [f64]> = part.iter_mut().map(Vec::as_mut_slice).collect();
                let runs = decode_row_group(path, &features, layout.row_group(g), &mut out)?;
                Ok((runs, part))
            })
            .collect();
        for part in parts {
            let (part_runs, part_values) = part?;
            for (name, n) in part_runs {
                push_run(&mut runs, std::borrow::Cow::Owned(name), n);
            }
            for (column, part) in values.iter_mut().zip(part_values) {
                column.extend_from_slice(&part);
            }
        }
        // Every run is a whole group but the last, until the last wave.
        let whole = if w == last_wave { runs.len() } else { runs.len() - 1 };
        if whole == 0 {
            continue;
        }
        let held = runs.split_off(whole);
        if !runs.iter().all(|(name, _)| finished.insert(std::hash::BuildHasher::hash_one(&hashes, name))) {
            return Ok(Streamed::NotGrouped);
        }
        let rows: usize = runs.iter().map(|(_, n)| n).sum();
        let mut table = FeatureTable::new(std::mem::replace(&mut runs, held)).map_err(ParquetError::from)?;
        for (key, column) in features.iter().zip(values.iter_mut()) {
            let rest = column.split_off(rows);
            table.add_column(key.to_string(), std::mem::replace(column, rest)).map_err(ParquetError::from)?;
        }
        chunk(CsvFeatures::from_table(table, RowOrder::Identity(rows)))?;
    }
    Ok(Streamed::Done)
}

/// The text of a `group` column's rows, whatever string or integer type it has.
enum GroupText<'a> {
    Utf8(&'a arrow_array::StringArray),
    LargeUtf8(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
    Int(Vec<Option<i64>>),
    UInt(Vec<Option<u64>>),
    Dictionary(Vec<Option<usize>>, Box<GroupText<'a>>),
}

impl<'a> GroupText<'a> {
    fn of(path: &Path, array: &'a ArrayRef) -> Result<GroupText<'a>, ParquetError> {
        Self::of_dyn(path, array.as_ref())
    }

    fn of_dyn(path: &Path, array: &'a dyn Array) -> Result<GroupText<'a>, ParquetError> {
        macro_rules! ints {
            ($variant:ident, $t:ty, $into:ty) => {
                GroupText::$variant(array.as_primitive::<$t>().iter().map(|v| v.map(<$into>::from)).collect())
            };
        }
        Ok(match array.data_type() {
            DataType::Utf8 => GroupText::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => GroupText::LargeUtf8(array.as_string::<i64>()),
            DataType::Utf8View => GroupText::View(array.as_string_view()),
            DataType::Int8 => ints!(Int, Int8Type, i64),
            DataType::Int16 => ints!(Int, Int16Type, i64),
            DataType::Int32 => ints!(Int, Int32Type, i64),
            DataType::Int64 => ints!(Int, Int64Type, i64),
            DataType::UInt8 => ints!(UInt, UInt8Type, u64),
            DataType::UInt16 => ints!(UInt, UInt16Type, u64),
            DataType::UInt32 => ints!(UInt, UInt32Type, u64),
            DataType::UInt64 => ints!(UInt, UInt64Type, u64),
            DataType::Dictionary(_, _) => {
                let dict = array.as_any_dictionary();
                let keys = dict.normalized_keys();
                let valid: Vec<Option<usize>> =
                    keys.iter().enumerate().map(|(i, &k)| dict.keys().is_valid(i).then_some(k)).collect();
                GroupText::Dictionary(valid, Box::new(GroupText::of_dyn(path, dict.values().as_ref())?))
            }
            other => {
                return Err(ParquetError::ColumnType {
                    path: path.to_path_buf(),
                    column: GROUP_COLUMN.to_string(),
                    found: other.to_string(),
                    expected: "a string or integer column",
                });
            }
        })
    }

    /// Row `i`'s text; `None` when it is null.
    fn get(&self, i: usize) -> Option<std::borrow::Cow<'a, str>> {
        use std::borrow::Cow;
        match self {
            GroupText::Utf8(a) => a.is_valid(i).then(|| Cow::Borrowed(a.value(i))),
            GroupText::LargeUtf8(a) => a.is_valid(i).then(|| Cow::Borrowed(a.value(i))),
            GroupText::View(a) => a.is_valid(i).then(|| Cow::Borrowed(a.value(i))),
            GroupText::Int(v) => v[i].map(|n| Cow::Owned(n.to_string())),
            GroupText::UInt(v) => v[i].map(|n| Cow::Owned(n.to_string())),
            GroupText::Dictionary(keys, values) => values.get(keys[i]?),
        }
    }
}

/// Writes a number or bool column's values (bools as 1/0) into `out`, which
/// has one place per row of `array`; `base` is its first row (0-based), for
/// errors.
fn put_numbers(path: &Path, key: &str, array: &ArrayRef, base: usize, out: &mut [f64]) -> Result<(), ParquetError> {
    if array.null_count() > 0 {
        let i = (0..array.len()).find(|&i| array.is_null(i)).expect("a null is there");
        return Err(ParquetError::Null { path: path.to_path_buf(), row: base + i + 1, column: key.to_string() });
    }
    fn put<T: Copy>(out: &mut [f64], values: &[T], f: impl Fn(T) -> f64) {
        for (o, &v) in out.iter_mut().zip(values) {
            *o = f(v);
        }
    }
    macro_rules! numbers {
        ($t:ty) => {
            put(out, array.as_primitive::<$t>().values(), |v| v as f64)
        };
    }
    match array.data_type() {
        DataType::Float64 => out.copy_from_slice(array.as_primitive::<Float64Type>().values()),
        DataType::Float32 => numbers!(Float32Type),
        DataType::Int8 => numbers!(Int8Type),
        DataType::Int16 => numbers!(Int16Type),
        DataType::Int32 => numbers!(Int32Type),
        DataType::Int64 => numbers!(Int64Type),
        DataType::UInt8 => numbers!(UInt8Type),
        DataType::UInt16 => numbers!(UInt16Type),
        DataType::UInt32 => numbers!(UInt32Type),
        DataType::UInt64 => numbers!(UInt64Type),
        DataType::Boolean => {
            for (o, b) in out.iter_mut().zip(array.as_boolean().values().iter()) {
                *o = if b { 1.0 } else { 0.0 };
            }
        }
        other => {
            return Err(ParquetError::ColumnType {
                path: path.to_path_buf(),
                column: key.to_string(),
                found: other.to_string(),
                expected: "a number or bool column",
            });
        }
    }
    Ok(())
}

pub(super) fn rollout_lines(path: &Path) -> Result<Vec<u8>, ParquetError> {
    let builder = open(path)?;
    let names: Vec<String> = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
    let reader = builder.with_batch_size(BATCH_ROWS).build().map_err(|e| format_err(path)(&e))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| format_err(path)(&e))?;
        for i in 0..batch.num_rows() {
            let mut record = Map::new();
            for (name, column) in names.iter().zip(batch.columns()) {
                if let Some(v) = json_value(path, name, column.as_ref(), i)? {
                    record.insert(name.clone(), v);
                }
            }
            serde_json::to_writer(&mut out, &Value::Object(record)).map_err(|e| format_err(path)(&e))?;
            out.push(b'\n');
        }
    }
    Ok(out)
}

/// Row `i` of `array` as JSON; `None` when null. `name` names the top-level
/// column in errors.
fn json_value(path: &Path, name: &str, array: &dyn Array, i: usize) -> Result<Option<Value>, ParquetError> {
    if array.is_null(i) {
        return Ok(None);
    }
    macro_rules! number {
        ($t:ty) => {
            Value::from(array.as_primitive::<$t>().value(i))
        };
    }
    let list = |values: ArrayRef| -> Result<Option<Value>, ParquetError> {
        let items = (0..values.len())
            .map(|k| Ok(json_value(path, name, values.as_ref(), k)?.unwrap_or(Value::Null)))
            .collect::<Result<Vec<_>, ParquetError>>()?;
        Ok(Some(Value::Array(items)))
    };
    Ok(Some(match array.data_type() {
        DataType::Utf8 => Value::from(array.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Value::from(array.as_string::<i64>().value(i)),
        DataType::Utf8View => Value::from(array.as_string_view().value(i)),
        DataType::Boolean => Value::from(array.as_boolean().value(i)),
        DataType::Int8 => number!(Int8Type),
        DataType::Int16 => number!(Int16Type),
        DataType::Int32 => number!(Int32Type),
        DataType::Int64 => number!(Int64Type),
        DataType::UInt8 => number!(UInt8Type),
        DataType::UInt16 => number!(UInt16Type),
        DataType::UInt32 => number!(UInt32Type),
        DataType::UInt64 => number!(UInt64Type),
        DataType::Float32 => number!(Float32Type),
        DataType::Float64 => number!(Float64Type),
        DataType::List(_) => return list(array.as_list::<i32>().value(i)),
        DataType::LargeList(_) => return list(array.as_list::<i64>().value(i)),
        DataType::Struct(fields) => {
            let s = array.as_struct();
            let mut object = Map::new();
            for (field, column) in fields.iter().zip(s.columns()) {
                if let Some(v) = json_value(path, name, column.as_ref(), i)? {
                    object.insert(field.name().clone(), v);
                }
            }
            Value::Object(object)
        }
        DataType::Dictionary(_, _) => {
            let dict = array.as_any_dictionary();
            let key = dict.normalized_keys()[i];
            return json_value(path, name, dict.values().as_ref(), key);
        }
        other => {
            return Err(ParquetError::ColumnType {
                path: path.to_path_buf(),
                column: name.to_string(),
                found: other.to_string(),
                expected: "strings, numbers, bools, lists or structs (a rollout record's types)",
            });
        }
    }))
}

/// See [`super::OutputWriter`].
pub(super) struct Writer {
    path: PathBuf,
    schema: Arc<Schema>,
    writer: ArrowWriter<File>,
}

impl Writer {
    pub(super) fn create(path: &Path, features: &CsvFeatures) -> Result<Writer, ParquetError> {
        let mut fields = vec![Field::new(GROUP_COLUMN, DataType::Utf8, false)];
        fields.extend(kept_keys(features).chain(OUTPUT_COLUMNS).map(|k| Field::new(k, DataType::Float64, false)));
        let schema = Arc::new(Schema::new(fields));
        let file = File::create(path).map_err(|error| ParquetError::Io { path: path.to_path_buf(), error })?;
        // Row groups of `BATCH_ROWS` rows: a reader decodes them in parallel. Dictionary encoding
        // only for `group` (a handful of values a row group): the number columns hardly repeat,
        // and a dictionary per column held while a row group is written was a sixth of the peak
        // memory.
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(BATCH_ROWS))
            .set_dictionary_enabled(false)
            .set_column_dictionary_enabled(ColumnPath::from(GROUP_COLUMN), true)
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| format_err(path)(&e))?;
        Ok(Writer { path: path.to_path_buf(), schema, writer })
    }

    pub(super) fn write(&mut self, features: &CsvFeatures, outputs: &Outputs) -> Result<(), ParquetError> {
        let table = &features.table;
        let keys: Vec<&str> = kept_keys(features).collect();
        if keys.len() + 1 + OUTPUT_COLUMNS.len() != self.schema.fields().len() {
            return Err(format_err(&self.path)(&"a chunk's columns differ from the first chunk's"));
        }
        let columns: Vec<&[f64]> = keys.iter().map(|k| table.column(k).expect("a key of the table")).collect();
        let rows = features.order.len();
        let table_row = features.order.table_rows();
        let err = format_err(&self.path);
        let mut group_of = table.group_finder();
        for start in (0..rows).step_by(BATCH_ROWS) {
            let inputs = start..(start + BATCH_ROWS).min(rows);
            let table_rows: Vec<usize> = match &table_row {
                Some(inverse) => inverse[inputs].to_vec(),
                None => inputs.collect(),
            };
            let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
            arrays.push(Arc::new(StringArray::from_iter_values(
                table_rows.iter().map(|&t| table.group_name(group_of(t))),
            )));
            let output_columns = [&outputs.reward[..], &outputs.adv[..], &outputs.advantage[..]];
            for column in columns.iter().chain(&output_columns) {
                let values: Vec<f64> = table_rows.iter().map(|&t| column[t] + 0.0).collect();
                arrays.push(Arc::new(Float64Array::from(values)));
            }
            let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| err(&e))?;
            self.writer.write(&batch).map_err(|e| err(&e))?;
        }
        Ok(())
    }

    pub(super) fn finish(self) -> Result<(), ParquetError> {
        self.writer.close().map_err(|e| format_err(&self.path)(&e))?;
        Ok(())
    }
}

/// The feature columns written beside the outputs: the table's, but `group`
/// and any named like an output (an output file re-evaluated).
fn kept_keys(features: &CsvFeatures) -> impl Iterator<Item = &str> {
    features.table.column_keys().filter(|k| !OUTPUT_COLUMNS.contains(k) && *k != GROUP_COLUMN)
}
