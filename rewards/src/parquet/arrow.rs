//! Parquet through the `parquet` crate's Arrow reader and writer.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
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
use rayon::prelude::*;
use rewardlab_dsl::FeatureTable;
use rewardlab_dsl::csv_table::{CsvFeatures, GROUP_COLUMN, OUTPUT_COLUMNS};
use rewardlab_dsl::table::Outputs;
use serde_json::{Map, Value};

use super::ParquetError;

/// Rows per record batch read and written.
const BATCH_ROWS: usize = 64 * 1024;

fn format_err(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> ParquetError + '_ {
    move |e| ParquetError::Format { path: path.to_path_buf(), message: e.to_string() }
}

fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ParquetError> {
    let file = File::open(path).map_err(|source| ParquetError::Io { path: path.to_path_buf(), source })?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| format_err(path)(&e))
}

pub(super) fn holds_rollouts(path: &Path) -> Result<bool, ParquetError> {
    let builder = open(path)?;
    Ok(builder.schema().fields().iter().any(|f| {
        matches!(f.name().as_str(), "predicted" | "target" | "turns")
            || matches!(f.data_type(), DataType::List(_) | DataType::LargeList(_) | DataType::Struct(_))
    }))
}

/// One row group's share of a features file: its group runs (names copied
/// out, so the decoded batches can go at once) and its feature values.
struct Part {
    /// `(group, rows)`: consecutive rows of one group.
    runs: Vec<(String, usize)>,
    values: Vec<Vec<f64>>,
}

/// Decodes the row groups in parallel, each by its own reader over the named
/// root columns, and turns each into a [`Part`]. The first error in row
/// order is the error.
fn read_parts(path: &Path, group: &str, features: &[&str]) -> Result<Vec<Part>, ParquetError> {
    let meta = open(path)?.metadata().clone();
    let mut bases = Vec::with_capacity(meta.num_row_groups());
    let mut rows = 0usize;
    for g in 0..meta.num_row_groups() {
        bases.push(rows);
        rows += usize::try_from(meta.row_group(g).num_rows()).unwrap_or(0);
    }
    let parts: Vec<Result<Part, ParquetError>> = bases
        .par_iter()
        .enumerate()
        .map(|(g, &base)| {
            let builder = open(path)?;
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
            let mut part = Part { runs: Vec::new(), values: vec![Vec::new(); features.len()] };
            let mut row = base;
            for batch in reader {
                let batch = batch.map_err(|e| format_err(path)(&e))?;
                let texts = GroupText::of(path, batch.column_by_name(group).expect("projected"))?;
                for i in 0..batch.num_rows() {
                    let name = texts.get(i).ok_or_else(|| ParquetError::Null {
                        path: path.to_path_buf(),
                        row: row + i + 1,
                        column: group.to_string(),
                    })?;
                    if name.is_empty() {
                        return Err(ParquetError::EmptyGroup { path: path.to_path_buf(), row: row + i + 1 });
                    }
                    match part.runs.last_mut() {
                        Some((last, n)) if *last == name => *n += 1,
                        _ => part.runs.push((name.into_owned(), 1)),
                    }
                }
                for (column, key) in part.values.iter_mut().zip(features) {
                    push_numbers(path, key, batch.column_by_name(key).expect("projected"), row, column)?;
                }
                row += batch.num_rows();
            }
            Ok(part)
        })
        .collect();
    parts.into_iter().collect()
}

pub(super) fn read_features(path: &Path, columns: Option<&[&str]>) -> Result<CsvFeatures, ParquetError> {
    let schema = open(path)?.schema().clone();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if !names.contains(&GROUP_COLUMN) {
        return Err(ParquetError::NoGroupColumn { path: path.to_path_buf() });
    }
    let mut features: Vec<&str> = Vec::new();
    match columns {
        Some(keys) => {
            for &k in keys {
                if !names.contains(&k) {
                    return Err(ParquetError::MissingColumn { path: path.to_path_buf(), column: k.to_string() });
                }
                if !features.contains(&k) {
                    features.push(k);
                }
            }
        }
        None => features.extend(names.iter().copied().filter(|&n| n != GROUP_COLUMN)),
    }
    let mut parts = read_parts(path, GROUP_COLUMN, &features)?;

    // Groups by first appearance, as the CSV reader orders them; a run is a
    // stretch of rows of one group.
    let mut group_index: HashMap<&str, usize> = HashMap::new();
    let mut group_names: Vec<&str> = Vec::new();
    let mut sizes: Vec<usize> = Vec::new();
    let mut run_groups: Vec<(usize, usize)> = Vec::new();
    let mut in_order = true;
    for (name, n) in parts.iter().flat_map(|p| &p.runs) {
        let next = group_names.len();
        let g = *group_index.entry(name.as_str()).or_insert_with(|| {
            group_names.push(name);
            sizes.push(0);
            next
        });
        // Rows are already grouped iff every run starts a new group (or
        // continues the previous run's group across a row-group boundary).
        in_order &= g == next || run_groups.last().is_some_and(|&(last, _)| last == g);
        sizes[g] += n;
        run_groups.push((g, *n));
    }
    let rows: usize = sizes.iter().sum();
    if rows == 0 {
        return Err(ParquetError::Empty { path: path.to_path_buf() });
    }
    let order: Vec<usize> =
        if in_order { (0..rows).collect() } else { rewardlab_dsl::csv_table::grouping_order(&sizes, &run_groups) };
    let mut table = FeatureTable::new(group_names.iter().map(|n| n.to_string()).zip(sizes))?;
    for (k, key) in features.iter().enumerate() {
        let mut column = Vec::with_capacity(rows);
        for part in parts.iter_mut() {
            column.extend_from_slice(&std::mem::take(&mut part.values[k]));
        }
        let column = if in_order { column } else { order.iter().map(|&r| column[r]).collect() };
        table.add_column(key.to_string(), column)?;
    }
    Ok(CsvFeatures::from_table(table, order))
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

/// Appends a number or bool column's values (bools as 1/0) to `out`.
fn push_numbers(path: &Path, key: &str, array: &ArrayRef, base: usize, out: &mut Vec<f64>) -> Result<(), ParquetError> {
    if array.null_count() > 0 {
        let i = (0..array.len()).find(|&i| array.is_null(i)).expect("a null is there");
        return Err(ParquetError::Null { path: path.to_path_buf(), row: base + i + 1, column: key.to_string() });
    }
    macro_rules! numbers {
        ($t:ty) => {
            out.extend(array.as_primitive::<$t>().values().iter().map(|&v| v as f64))
        };
    }
    match array.data_type() {
        DataType::Float64 => out.extend_from_slice(array.as_primitive::<Float64Type>().values()),
        DataType::Float32 => numbers!(Float32Type),
        DataType::Int8 => numbers!(Int8Type),
        DataType::Int16 => numbers!(Int16Type),
        DataType::Int32 => numbers!(Int32Type),
        DataType::Int64 => numbers!(Int64Type),
        DataType::UInt8 => numbers!(UInt8Type),
        DataType::UInt16 => numbers!(UInt16Type),
        DataType::UInt32 => numbers!(UInt32Type),
        DataType::UInt64 => numbers!(UInt64Type),
        DataType::Boolean => out.extend(array.as_boolean().values().iter().map(|b| if b { 1.0 } else { 0.0 })),
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

pub(super) fn write_outputs(path: &Path, features: &CsvFeatures, outputs: &Outputs) -> Result<(), ParquetError> {
    let table = &features.table;
    let keys: Vec<&str> = table.column_keys().filter(|k| !OUTPUT_COLUMNS.contains(k) && *k != GROUP_COLUMN).collect();
    let columns: Vec<&[f64]> = keys.iter().map(|k| table.column(k).expect("a key of the table")).collect();
    let mut fields = vec![Field::new(GROUP_COLUMN, DataType::Utf8, false)];
    fields.extend(keys.iter().chain(&OUTPUT_COLUMNS).map(|k| Field::new(*k, DataType::Float64, false)));
    let schema = Arc::new(Schema::new(fields));

    let rows = features.order.len();
    let mut table_row = vec![0; rows];
    for (t, &input) in features.order.iter().enumerate() {
        table_row[input] = t;
    }
    let mut group_of_row = vec![0usize; table.rows()];
    for g in 0..table.groups() {
        group_of_row[table.group_rows(g)].fill(g);
    }
    let file = File::create(path).map_err(|source| ParquetError::Io { path: path.to_path_buf(), source })?;
    // Row groups of `BATCH_ROWS` rows: a reader decodes them in parallel.
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(BATCH_ROWS))
        .build();
    let err = format_err(path);
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| err(&e))?;
    for start in (0..rows).step_by(BATCH_ROWS) {
        let inputs = &table_row[start..(start + BATCH_ROWS).min(rows)];
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        arrays.push(Arc::new(StringArray::from_iter_values(inputs.iter().map(|&t| table.group_name(group_of_row[t])))));
        let output_columns = [&outputs.reward[..], &outputs.adv[..], &outputs.advantage[..]];
        for column in columns.iter().chain(&output_columns) {
            let values: Vec<f64> = inputs.iter().map(|&t| column[t] + 0.0).collect();
            arrays.push(Arc::new(Float64Array::from(values)));
        }
        let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| err(&e))?;
        writer.write(&batch).map_err(|e| err(&e))?;
    }
    writer.close().map_err(|e| err(&e))?;
    Ok(())
}
