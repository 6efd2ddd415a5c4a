//! Feature tables from CSV, and the outputs written back beside them.
//!
//! The header names features exactly as a reward file writes them
//! (`group,grade(word),grade(line),cost,steps`); a key with arguments contains a comma
//! (`grade(word, 1)`) and arrives quoted, as every CSV writer quotes it. A
//! `group` column is required. Rows of one group need not be adjacent: the
//! table orders groups by first appearance and keeps each group's rows in
//! input order, and [`CsvFeatures::order`] remembers the permutation so that
//! [`write_outputs`] writes rows back in input order. Values are numbers
//! (`true`/`false` read as 1/0); an empty or malformed cell is an error with
//! its line, never a silent zero.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::table::{FeatureTable, Outputs, TableError};

mod fast;
mod mapped;
mod number;
mod order;

pub use mapped::MappedFile;
pub use number::write_f64;
pub use order::{RowOrder, RunGrouping};

/// The name of the column that says which group (prompt) a rollout belongs to.
pub const GROUP_COLUMN: &str = "group";
/// The columns [`write_outputs`] appends.
pub const OUTPUT_COLUMNS: [&str; 3] = ["reward", "adv", "advantage"];

/// A features CSV read into a table, with what it takes to write it back.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvFeatures {
    /// Groups in order of first appearance, each group's rows in input order.
    pub table: FeatureTable,
    /// Table row `i` is input row `order[i]` (0-based, header excluded).
    pub order: RowOrder,
    headers: Vec<String>,
    /// What [`write_outputs`] copies beside the outputs.
    rows: Rows,
}

/// The input rows [`write_outputs`] writes back.
#[derive(Clone, Debug, PartialEq)]
enum Rows {
    /// Every input record as read, in input order.
    Records(Vec<Vec<String>>),
    /// The plain lines of a file, re-read when writing: holding a big file's
    /// text (or a string per field) would take several times its size.
    File(fast::PlainSource),
    /// No input text: the `group` column and the table's feature columns
    /// are the input columns (features computed from rollout records).
    Table,
}

impl CsvFeatures {
    /// Features that came from elsewhere (e.g. rollout JSONL), to be written
    /// back by [`write_outputs`]: `records` are the input rows in input order,
    /// `order[i]` the input row of table row `i`.
    pub fn from_rows(
        table: FeatureTable,
        order: Vec<usize>,
        headers: Vec<String>,
        records: Vec<Vec<String>>,
    ) -> CsvFeatures {
        CsvFeatures { table, order: RowOrder::new(order), headers, rows: Rows::Records(records) }
    }

    /// Features computed elsewhere (rollout JSONL, Parquet records) whose
    /// input columns are `group` and the table's columns, in the table's
    /// column order: [`write_outputs`] writes them from the table itself,
    /// with no string kept per field. `order` gives the input row of each table row.
    pub fn from_table(table: FeatureTable, order: RowOrder) -> CsvFeatures {
        let mut headers = vec![GROUP_COLUMN.to_string()];
        headers.extend(table.column_keys().map(str::to_string));
        CsvFeatures { table, order, headers, rows: Rows::Table }
    }

    /// The input's column names, as [`write_outputs`] copies them.
    pub fn headers(&self) -> &[String] {
        &self.headers
    }
}

/// Why a features CSV could not be read or written. Line numbers are 1-based
/// and count the header.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CsvError {
    // The wrapped errors below are part of the message and not a `source()`, so that
    // printing the chain (`{:#}`) says each cause once.
    /// A failure inside a named file, wrapping the error that caused it.
    #[error("{}: {error}", path.display())]
    File {
        /// The CSV file being read or written.
        path: PathBuf,
        /// The underlying error (its message ends this one's).
        error: Box<CsvError>,
    },
    /// The file could not be opened or created.
    #[error("{}: {error}", path.display())]
    Open {
        /// The path that failed to open.
        path: PathBuf,
        /// The operating system's error (its message ends this one's).
        error: std::io::Error,
    },
    /// The CSV reader rejected a record (bad quoting, invalid UTF-8, ...).
    #[error("line {line}: {error}")]
    Csv {
        /// 1-based line of the bad record.
        line: u64,
        /// The reader's error (its message ends this one's).
        error: csv::Error,
    },
    /// The header has no `group` column naming each row's group.
    #[error("line 1: no `group` column (the header names features as a reward file does: `group,x,f(level),...`)")]
    NoGroupColumn,
    /// A header names the same column twice.
    #[error("line 1: column `{column}` appears twice")]
    DuplicateColumn {
        /// The repeated column name.
        column: String,
    },
    /// The program reads a feature the header does not provide.
    #[error("line 1: no column `{column}`")]
    MissingColumn {
        /// The missing feature key.
        column: String,
    },
    #[error("line {line}: {got} fields, the header has {expected}")]
    /// A record has a different number of fields than the header.
    FieldCount {
        /// 1-based line of the record.
        line: u64,
        /// Number of header columns.
        expected: usize,
        /// Number of fields on the line.
        got: usize,
    },
    #[error("line {line}: `{column}` is {value:?}, not a number")]
    /// A feature field does not parse as a number.
    BadNumber {
        /// 1-based line of the record.
        line: u64,
        /// The column the field is in.
        column: String,
        /// The field's text as written.
        value: String,
    },
    #[error("line {line}: the group name is empty")]
    /// A record's `group` field is empty.
    EmptyGroup {
        /// 1-based line of the record.
        line: u64,
    },
    #[error("{got} output rows for a table of {want} rows")]
    /// The outputs to write do not have one row per table row.
    OutputLength {
        /// Number of output rows given.
        got: usize,
        /// Number of rows in the table.
        want: usize,
    },
    /// Writing the output CSV failed.
    #[error("writing the output")]
    Write(#[from] std::io::Error),
    /// The parsed columns did not form a valid feature table.
    #[error(transparent)]
    Table(#[from] TableError),
}

/// Reads a features CSV. With `columns`, only those are parsed as numbers
/// (each must be in the header; other columns are kept as text, for the
/// writer); without, every column but `group` is.
pub fn read_features(input: impl Read, columns: Option<&[&str]>) -> Result<CsvFeatures, CsvError> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(input);
    let headers: Vec<String> =
        reader.headers().map_err(|error| CsvError::Csv { line: 1, error })?.iter().map(str::to_string).collect();
    let mut seen = HashMap::new();
    for (i, h) in headers.iter().enumerate() {
        if seen.insert(h.as_str(), i).is_some() {
            return Err(CsvError::DuplicateColumn { column: h.clone() });
        }
    }
    let group_col = *seen.get(GROUP_COLUMN).ok_or(CsvError::NoGroupColumn)?;
    let numeric: Vec<usize> = match columns {
        Some(keys) => keys
            .iter()
            .map(|k| seen.get(k).copied().ok_or_else(|| CsvError::MissingColumn { column: k.to_string() }))
            .collect::<Result<_, _>>()?,
        None => (0..headers.len()).filter(|&i| i != group_col).collect(),
    };

    let mut records = Vec::new();
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); numeric.len()];
    // `(group, rows)` per stretch of rows of one group, and each group's size.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut sizes: Vec<usize> = Vec::new();
    let mut group_index: HashMap<String, usize> = HashMap::new();
    let mut group_names: Vec<String> = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        let more = reader.read_record(&mut record).map_err(|error| {
            let line = error.position().map_or(0, |p| p.line());
            CsvError::Csv { line, error }
        })?;
        if !more {
            break;
        }
        let line = record.position().map_or(0, |p| p.line());
        if record.len() != headers.len() {
            return Err(CsvError::FieldCount { line, expected: headers.len(), got: record.len() });
        }
        let group = &record[group_col];
        if group.is_empty() {
            return Err(CsvError::EmptyGroup { line });
        }
        let next = group_names.len();
        let g = *group_index.entry(group.to_string()).or_insert_with(|| {
            group_names.push(group.to_string());
            sizes.push(0);
            next
        });
        sizes[g] += 1;
        match runs.last_mut() {
            Some((last, n)) if *last == g => *n += 1,
            _ => runs.push((g, 1)),
        }
        for (column, &i) in values.iter_mut().zip(&numeric) {
            let text = &record[i];
            let value = parse_number(text).ok_or_else(|| CsvError::BadNumber {
                line,
                column: headers[i].clone(),
                value: text.to_string(),
            })?;
            column.push(value);
        }
        records.push(record.iter().map(str::to_string).collect());
    }

    // Stable reorder: groups by first appearance, rows in input order within.
    let order = RowOrder::new(grouping_order(&sizes, &runs));
    let mut table = FeatureTable::new(group_names.into_iter().zip(sizes))?;
    for (column, &i) in values.into_iter().zip(&numeric) {
        table.add_column(headers[i].clone(), order.permute(column))?;
    }
    Ok(CsvFeatures { table, order, headers, rows: Rows::Records(records) })
}

/// [`read_features`] from a file; errors name the file.
///
/// A plain file (no quotes below the header, no padding, one record a line:
/// what writers of big feature logs produce) is parsed in parallel chunks
/// without a string per field, and [`write_outputs`] re-reads its lines
/// rather than keeping them. Anything else, and every error, goes through
/// [`read_features`], so the result and the errors are the same either way.
pub fn read_features_file(path: &Path, columns: Option<&[&str]>) -> Result<CsvFeatures, CsvError> {
    let data = MappedFile::open(path).map_err(|error| CsvError::Open { path: path.to_path_buf(), error })?;
    if let Some(plain) = fast::read_plain(&data, columns, |chunk| data.release(chunk)) {
        let source = fast::PlainSource { path: path.to_path_buf(), data_start: plain.data_start };
        return Ok(CsvFeatures {
            table: plain.table,
            order: plain.order,
            headers: plain.headers,
            rows: Rows::File(source),
        });
    }
    read_features(&data[..], columns)
        .map_err(|error| CsvError::File { path: path.to_path_buf(), error: Box::new(error) })
}

/// [`write_outputs`] for a table evaluated in chunks of whole groups (read
/// chunk by chunk, e.g. from a Parquet file): writes the header line only
/// with `header` (the first chunk), then the chunk's rows. Only for features
/// built by [`CsvFeatures::from_table`]; the others re-read their input.
pub fn write_table_chunk(
    output: &mut impl Write,
    features: &CsvFeatures,
    outputs: &Outputs,
    header: bool,
) -> Result<(), CsvError> {
    assert!(matches!(features.rows, Rows::Table), "write_table_chunk takes features built from a table");
    check_output_rows(features, outputs)?;
    fast::write_table(output, features, outputs, header)
}

/// Outputs must have one value per row of the features.
fn check_output_rows(features: &CsvFeatures, outputs: &Outputs) -> Result<(), CsvError> {
    let rows = features.order.len();
    for got in [outputs.reward.len(), outputs.adv.len(), outputs.advantage.len()] {
        if got != rows {
            return Err(CsvError::OutputLength { got, want: rows });
        }
    }
    Ok(())
}

/// Writes the input columns and `reward,adv,advantage`, rows in input order.
/// `outputs` are in table order (as evaluation returns them). Input columns
/// named like an output are replaced, so an output file can be re-evaluated.
pub fn write_outputs(mut output: impl Write, features: &CsvFeatures, outputs: &Outputs) -> Result<(), CsvError> {
    check_output_rows(features, outputs)?;
    let records = match &features.rows {
        Rows::Records(records) => records,
        Rows::Table => return fast::write_table(&mut output, features, outputs, true),
        Rows::File(source) => {
            return fast::write_plain(
                &mut output,
                &source.path,
                source.data_start,
                &features.headers,
                &features.order,
                outputs,
            )
            .map_err(|e| match e {
                CsvError::Write(_) => e,
                other => CsvError::File { path: source.path.clone(), error: Box::new(other) },
            });
        }
    };
    let kept: Vec<usize> =
        (0..features.headers.len()).filter(|&i| !OUTPUT_COLUMNS.contains(&features.headers[i].as_str())).collect();
    let table_row = features.order.table_rows();
    let mut writer = csv::Writer::from_writer(output);
    let csv_err = |e: csv::Error| match e.into_kind() {
        csv::ErrorKind::Io(io) => CsvError::Write(io),
        other => CsvError::Write(std::io::Error::other(format!("{other:?}"))),
    };
    let header = kept.iter().map(|&i| features.headers[i].as_str()).chain(OUTPUT_COLUMNS);
    writer.write_record(header).map_err(csv_err)?;
    let mut number = Vec::with_capacity(32);
    for (input, record) in records.iter().enumerate() {
        let t = table_row.as_ref().map_or(input, |inv| inv[input]);
        for &i in &kept {
            writer.write_field(&record[i]).map_err(csv_err)?;
        }
        for v in [outputs.reward[t], outputs.adv[t], outputs.advantage[t]] {
            number.clear();
            write_f64(&mut number, v + 0.0); // -0 prints as 0
            writer.write_field(&number).map_err(csv_err)?;
        }
        writer.write_record(None::<&[u8]>).map_err(csv_err)?;
    }
    writer.flush()?;
    Ok(())
}

pub(crate) fn parse_number(text: &str) -> Option<f64> {
    match text {
        "true" => Some(1.0),
        "false" => Some(0.0),
        _ => text.parse().ok(),
    }
}

/// The order that groups rows read in runs: `runs` lists `(group, rows)` in input order (a
/// group may come back in a later run), `sizes[g]` is group `g`'s total; entry `i` of the result
/// is the input row that becomes row `i` when groups follow their first appearance and rows keep
/// their input order within a group.
pub fn grouping_order(sizes: &[usize], runs: &[(usize, usize)]) -> Vec<usize> {
    let mut next_row = Vec::with_capacity(sizes.len());
    let mut acc = 0;
    for &size in sizes {
        next_row.push(acc);
        acc += size;
    }
    let mut order = vec![0; acc];
    let mut input_row = 0;
    for &(g, n) in runs {
        for _ in 0..n {
            order[next_row[g]] = input_row;
            next_row[g] += 1;
            input_row += 1;
        }
    }
    order
}

#[cfg(test)]
mod tests;
