//! The fast path of [`read_features_file`](super::read_features_file) and of
//! writing its outputs: plain CSV (no quotes, no padding, one record a line)
//! parsed in parallel chunks straight from the file's bytes, no string per
//! field, and the outputs written by re-reading the file's lines and
//! appending the formatted values, in parallel batches of lines.
//!
//! The fast path only ever *declines*: whenever the input is not plain (a quote
//! anywhere below the header, a `\r`, a blank line, a padded field) or is bad
//! (a missing field, an empty group, a number that does not parse, invalid
//! UTF-8), it returns `None` and the caller runs the general reader on the
//! same bytes, so errors keep their exact text and `line N`, and odd but valid
//! input reads exactly as before. On plain input both readers agree: a field
//! without quotes or padding is its text either way, and the writer's lines
//! equal what the `csv` crate writes for those fields (it quotes only fields
//! with a quote, a delimiter or a line break, and plain fields have none).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::number::write_f64;
use super::{CsvError, CsvFeatures, GROUP_COLUMN, MappedFile, OUTPUT_COLUMNS, RowOrder, RunGrouping};
use crate::table::{FeatureTable, Outputs};

/// Input bytes per parallel parse task: large enough that a task's overhead
/// vanishes, small enough that two cores share the work evenly.
const PARSE_CHUNK: usize = 1 << 20;
/// Lines per parallel formatting task when writing.
const WRITE_LINES: usize = 8192;
/// Bytes of the input re-read per piece when writing.
const WRITE_PIECE: usize = 2 << 20;
/// Lines formatted per round when writing from the table alone: 4 tasks
/// keep the cores busy, and the round's text (a few MB) is all the output
/// held at once.
const WRITE_ROUND: usize = 4 * WRITE_LINES;

/// What the fast reader found.
pub(super) struct Plain {
    pub table: FeatureTable,
    pub order: RowOrder,
    pub headers: Vec<String>,
    /// Byte offset of the first data line in the file.
    pub data_start: u64,
}

/// Reads `data` (a whole features CSV) when it is plain; `None` sends the
/// caller to the general reader.
/// `release` is called with each chunk once it is counted and again once it
/// is parsed: the file's pages can go (the parse maps them back, and only the
/// group names are read again after it), so the input is never held whole.
pub(super) fn read_plain(data: &[u8], columns: Option<&[&str]>, release: impl Fn(&[u8]) + Sync) -> Option<Plain> {
    let header_end = data.iter().position(|&b| b == b'\n')? + 1;
    let header_line = &data[..header_end];
    // A header with an odd number of quotes continues on the next line.
    if header_line.iter().filter(|&&b| b == b'"').count() % 2 == 1 || header_line.contains(&b'\r') {
        return None;
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(header_line);
    let headers: Vec<String> = reader.headers().ok()?.iter().map(str::to_string).collect();
    let mut seen = HashMap::new();
    for (i, h) in headers.iter().enumerate() {
        if seen.insert(h.as_str(), i).is_some() {
            return None;
        }
    }
    let group_col = *seen.get(GROUP_COLUMN)?;
    let numeric: Vec<usize> = match columns {
        Some(keys) => keys.iter().map(|k| seen.get(k).copied()).collect::<Option<_>>()?,
        None => (0..headers.len()).filter(|&i| i != group_col).collect(),
    };
    let body = &data[header_end..];
    let chunks = split_lines(body, PARSE_CHUNK);
    // Pass 1: lines per chunk, so that each chunk parses into its own slice
    // of full-length columns (no per-chunk vectors to concatenate).
    let counts: Vec<usize> = chunks
        .par_iter()
        .map(|c| {
            let n = line_count(c);
            release(c);
            n
        })
        .collect();
    let rows: usize = counts.iter().sum();
    let mut values: Vec<Vec<f64>> = vec![vec![0.0; rows]; numeric.len()];
    let mut slices: Vec<Vec<&mut [f64]>> = chunks.iter().map(|_| Vec::with_capacity(numeric.len())).collect();
    for column in values.iter_mut() {
        let mut rest: &mut [f64] = column;
        for (chunk_slices, &n) in slices.iter_mut().zip(&counts) {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
            chunk_slices.push(head);
            rest = tail;
        }
    }
    let layout = Layout { fields: headers.len(), group: group_col, numeric: &numeric };
    let runs: Vec<Runs> = chunks
        .par_iter()
        .zip(slices.into_par_iter())
        .map(|(chunk, mut out)| {
            let runs = parse_chunk(chunk, &layout, &mut out);
            release(chunk);
            runs
        })
        .collect::<Option<_>>()?;

    let runs: Vec<(&str, usize)> = runs.iter().flat_map(Runs::iter).collect();
    let RunGrouping { first_runs, sizes, order } = RunGrouping::of(runs.iter().copied());
    let names = first_runs.iter().map(|&r| runs[r].0.to_string());
    let mut table = FeatureTable::new(names.zip(sizes)).ok()?;
    for (column, &i) in values.into_iter().zip(&numeric) {
        table.add_column(headers[i].clone(), order.permute(column)).ok()?;
    }
    Some(Plain { table, order, headers, data_start: header_end as u64 })
}

/// Where a line's fields are.
struct Layout<'a> {
    fields: usize,
    group: usize,
    numeric: &'a [usize],
}

/// Cuts `body` into pieces of about `size` bytes that end at line ends.
fn split_lines(body: &[u8], size: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let cut = if rest.len() <= size {
            rest.len()
        } else {
            match rest[size..].iter().position(|&b| b == b'\n') {
                Some(p) => size + p + 1,
                None => rest.len(),
            }
        };
        let (head, tail) = rest.split_at(cut);
        out.push(head);
        rest = tail;
    }
    out
}

/// Lines in a chunk: its newlines, plus a last line without one.
fn line_count(chunk: &[u8]) -> usize {
    let newlines = chunk.iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(chunk.last().is_some_and(|&b| b != b'\n'))
}

/// A chunk's groups as runs of rows, the names copied out of the file (so
/// that its pages can be released once the chunk is parsed).
#[derive(Default)]
struct Runs {
    names: String,
    /// Where each run's name ends in `names`, and its rows.
    ends: Vec<(usize, usize)>,
}

impl Runs {
    /// One more row of group `name`: the last run grows, or a new one starts.
    fn push(&mut self, name: &str) {
        // The last run's name is the tail of `names`.
        let last_start = match self.ends.len() {
            0 | 1 => 0,
            n => self.ends[n - 2].0,
        };
        if let Some((_, n)) = self.ends.last_mut()
            && self.names[last_start..] == *name
        {
            *n += 1;
            return;
        }
        self.names.push_str(name);
        self.ends.push((self.names.len(), 1));
    }

    /// `(name, rows)` per run, in order.
    fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        let mut start = 0;
        self.ends.iter().map(move |&(end, n)| {
            let name = &self.names[start..end];
            start = end;
            (name, n)
        })
    }
}

/// Parses one chunk's lines into its column slices; returns its group runs,
/// or `None` when a line is not plain or not good.
fn parse_chunk(chunk: &[u8], layout: &Layout<'_>, out: &mut [&mut [f64]]) -> Option<Runs> {
    let text = std::str::from_utf8(chunk).ok()?;
    if text.bytes().any(|b| b == b'"' || b == b'\r') {
        return None;
    }
    let mut runs = Runs::default();
    let mut fields: Vec<&str> = Vec::with_capacity(layout.fields);
    for (row, line) in text.strip_suffix('\n').unwrap_or(text).split('\n').enumerate() {
        fields.clear();
        fields.extend(line.split(','));
        // A blank line, a short or long record, or a padded field: the general reader decides.
        if fields.len() != layout.fields || fields.iter().any(|f| f.trim().len() != f.len()) {
            return None;
        }
        let group = fields[layout.group];
        if group.is_empty() {
            return None;
        }
        runs.push(group);
        for (column, &i) in out.iter_mut().zip(layout.numeric) {
            column[row] = super::parse_number(fields[i])?;
        }
    }
    Some(runs)
}

/// Writes the header and every data line of `path` (from `data_start`), each
/// with `reward,adv,advantage` appended; columns named like an output are dropped.
///
/// The file is mapped again and written in pieces: each piece's lines are
/// formatted in parallel batches into buffers reused from piece to piece (no
/// fresh pages to fault in), written, and the piece's input pages released,
/// so that neither the input nor the output is ever held whole.
pub(super) fn write_plain(
    output: &mut impl Write,
    path: &Path,
    data_start: u64,
    headers: &[String],
    order: &RowOrder,
    outputs: &Outputs,
) -> Result<(), CsvError> {
    let map = MappedFile::open(path).map_err(|error| CsvError::Open { path: path.to_path_buf(), error })?;
    let kept: Vec<bool> = headers.iter().map(|h| !OUTPUT_COLUMNS.contains(&h.as_str())).collect();
    let names = headers.iter().zip(&kept).filter(|(_, k)| **k).map(|(h, _)| h.as_str()).chain(OUTPUT_COLUMNS);
    output.write_all(&header_line(names)?)?;

    let table_row = order.table_rows();
    let all_kept = kept.iter().all(|k| *k);
    let changed =
        || CsvError::Write(std::io::Error::other(format!("{} changed while it was evaluated", path.display())));
    let start = usize::try_from(data_start).ok().filter(|&s| s <= map.len()).ok_or_else(changed)?;
    let mut row = 0;
    let mut pos = start;
    let mut buffers: Vec<Vec<u8>> = Vec::new();
    while pos < map.len() {
        let rest = &map[pos..];
        let cut = if rest.len() <= WRITE_PIECE {
            rest.len()
        } else {
            rest[WRITE_PIECE..].iter().position(|&b| b == b'\n').map_or(rest.len(), |p| WRITE_PIECE + p + 1)
        };
        let text = &rest[..cut];
        let lines: Vec<&[u8]> = text.strip_suffix(b"\n").unwrap_or(text).split(|&b| b == b'\n').collect();
        if row + lines.len() > order.len() {
            return Err(changed());
        }
        let base = row;
        format_batches(&mut buffers, lines.len(), |range, buf| {
            for (input, line) in (base + range.start..).zip(&lines[range]) {
                let t = table_row.as_ref().map_or(input, |inv| inv[input]);
                if all_kept {
                    buf.extend_from_slice(line);
                } else {
                    let mut first = true;
                    for (field, _) in line.split(|&c| c == b',').zip(&kept).filter(|(_, k)| **k) {
                        if !first {
                            buf.push(b',');
                        }
                        first = false;
                        buf.extend_from_slice(field);
                    }
                }
                push_outputs(buf, outputs, t);
            }
        });
        for buf in &buffers[..lines.len().div_ceil(WRITE_LINES)] {
            output.write_all(buf)?;
        }
        row += lines.len();
        pos += cut;
        map.release(text);
    }
    if row != order.len() {
        return Err(changed());
    }
    output.flush()?;
    Ok(())
}

/// Writes `group`, the table's columns and the outputs, rows in input order,
/// from the table alone ([`CsvFeatures::from_table`]); the header line first
/// when `header` (a table written in chunks has it once).
pub(super) fn write_table(
    output: &mut impl Write,
    features: &CsvFeatures,
    outputs: &Outputs,
    header: bool,
) -> Result<(), CsvError> {
    let table = &features.table;
    let keys: Vec<&str> = table.column_keys().filter(|k| !OUTPUT_COLUMNS.contains(k)).collect();
    let columns: Vec<&[f64]> = keys.iter().map(|k| table.column(k).expect("a key of the table")).collect();
    let names = std::iter::once(GROUP_COLUMN).chain(keys.iter().copied()).chain(OUTPUT_COLUMNS);
    if header {
        output.write_all(&header_line(names)?)?;
    }
    let table_row = features.order.table_rows();
    // Group names that need quoting as a CSV field (few or none); the others
    // are written as they are.
    let mut quoted = HashMap::new();
    for g in 0..table.groups() {
        let name = table.group_name(g);
        if needs_quotes(&name) {
            quoted.insert(g, csv_field(&name)?);
        }
    }
    let rows = features.order.len();
    let mut buffers: Vec<Vec<u8>> = Vec::new();
    let mut row = 0;
    while row < rows {
        let n = (rows - row).min(WRITE_ROUND);
        let base = row;
        format_batches(&mut buffers, n, |range, buf| {
            let mut group_of = table.group_finder();
            for input in base + range.start..base + range.end {
                let t = table_row.as_ref().map_or(input, |inv| inv[input]);
                let g = group_of(t);
                match quoted.get(&g) {
                    Some(field) => buf.extend_from_slice(field),
                    None => buf.extend_from_slice(table.group_name(g).as_bytes()),
                }
                for column in &columns {
                    buf.push(b',');
                    write_f64(buf, column[t]);
                }
                push_outputs(buf, outputs, t);
            }
        });
        for buf in &buffers[..n.div_ceil(WRITE_LINES)] {
            output.write_all(buf)?;
        }
        row += n;
    }
    output.flush()?;
    Ok(())
}

/// Formats `lines` lines in parallel batches of [`WRITE_LINES`]: `fill(range,
/// buf)` appends the lines `range` to the cleared buffer `buf`. The buffers
/// are kept for the next call.
fn format_batches(
    buffers: &mut Vec<Vec<u8>>,
    lines: usize,
    fill: impl Fn(std::ops::Range<usize>, &mut Vec<u8>) + Sync,
) {
    let batches = lines.div_ceil(WRITE_LINES);
    if buffers.len() < batches {
        buffers.resize_with(batches, Vec::new);
    }
    buffers[..batches].par_iter_mut().enumerate().for_each(|(b, buf)| {
        buf.clear();
        fill(b * WRITE_LINES..((b + 1) * WRITE_LINES).min(lines), buf);
    });
}

/// Appends `,reward,adv,advantage` of table row `t` and the line end.
fn push_outputs(buf: &mut Vec<u8>, outputs: &Outputs, t: usize) {
    for v in [outputs.reward[t], outputs.adv[t], outputs.advantage[t]] {
        buf.push(b',');
        write_f64(buf, v + 0.0); // -0 prints as 0
    }
    buf.push(b'\n');
}

/// A header line as the `csv` crate writes it (names with a comma quoted).
fn header_line<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Vec<u8>, CsvError> {
    let mut header = csv::Writer::from_writer(Vec::new());
    header.write_record(names).map_err(|e| CsvError::Write(std::io::Error::other(e.to_string())))?;
    header.into_inner().map_err(|e| CsvError::Write(std::io::Error::other(e.to_string())))
}

/// Whether a field must be quoted in CSV (the `csv` crate's rule: it holds
/// a delimiter, a quote or a line break).
fn needs_quotes(text: &str) -> bool {
    text.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
}

/// One field as the `csv` crate writes it in a record of several fields
/// (quoted only when [`needs_quotes`] says so).
fn csv_field(text: &str) -> Result<Vec<u8>, CsvError> {
    if !needs_quotes(text) {
        return Ok(text.as_bytes().to_vec());
    }
    let mut line = header_line([text, ""])?;
    line.truncate(line.len() - 2); // the empty second field's comma and the line end
    Ok(line)
}

/// The file a plain table was read from, for [`write_plain`].
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PlainSource {
    pub path: PathBuf,
    pub data_start: u64,
}
