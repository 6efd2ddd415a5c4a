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
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::number::write_f64;
use super::{CsvError, GROUP_COLUMN, OUTPUT_COLUMNS};
use crate::table::{FeatureTable, Outputs};

/// Input bytes per parallel parse task: large enough that a task's overhead
/// vanishes, small enough that two cores share the work evenly.
const PARSE_CHUNK: usize = 1 << 20;
/// Lines per parallel formatting task when writing.
const WRITE_LINES: usize = 8192;
/// Bytes of the input re-read per batch when writing.
const WRITE_PIECE: usize = 8 << 20;

/// What the fast reader found.
pub(super) struct Plain {
    pub table: FeatureTable,
    pub order: Vec<usize>,
    pub headers: Vec<String>,
    /// Byte offset of the first data line in the file.
    pub data_start: u64,
}

/// Reads `data` (a whole features CSV) when it is plain; `None` sends the
/// caller to the general reader.
pub(super) fn read_plain(data: &[u8], columns: Option<&[&str]>) -> Option<Plain> {
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
    let counts: Vec<usize> = chunks.par_iter().map(|c| line_count(c)).collect();
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
    let runs: Vec<Vec<(&str, usize)>> = chunks
        .par_iter()
        .zip(slices.into_par_iter())
        .map(|(chunk, mut out)| parse_chunk(chunk, &layout, &mut out))
        .collect::<Option<_>>()?;

    // Groups by first appearance; a run is a stretch of rows of one group.
    let mut group_index: HashMap<&str, usize> = HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    let mut sizes: Vec<usize> = Vec::new();
    let mut run_groups: Vec<(usize, usize)> = Vec::new();
    let mut in_order = true;
    for &(name, n) in runs.iter().flatten() {
        let next = names.len();
        let g = *group_index.entry(name).or_insert_with(|| {
            names.push(name);
            sizes.push(0);
            next
        });
        // Rows are already grouped iff every run starts a new group (or
        // continues the previous run's group across a chunk boundary).
        in_order &= g == next || run_groups.last().is_some_and(|&(last, _)| last == g);
        sizes[g] += n;
        run_groups.push((g, n));
    }
    let order: Vec<usize> = if in_order {
        (0..rows).collect()
    } else {
        let mut next_row = Vec::with_capacity(sizes.len());
        let mut acc = 0;
        for &size in &sizes {
            next_row.push(acc);
            acc += size;
        }
        let mut order = vec![0; rows];
        let mut input_row = 0;
        for &(g, n) in &run_groups {
            for _ in 0..n {
                order[next_row[g]] = input_row;
                next_row[g] += 1;
                input_row += 1;
            }
        }
        order
    };
    let mut table = FeatureTable::new(names.iter().map(|n| n.to_string()).zip(sizes)).ok()?;
    for (column, &i) in values.into_iter().zip(&numeric) {
        let column = if in_order { column } else { order.par_iter().map(|&r| column[r]).collect() };
        table.add_column(headers[i].clone(), column).ok()?;
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

/// Parses one chunk's lines into its column slices; returns its group runs,
/// or `None` when a line is not plain or not good.
fn parse_chunk<'a>(chunk: &'a [u8], layout: &Layout<'_>, out: &mut [&mut [f64]]) -> Option<Vec<(&'a str, usize)>> {
    let text = std::str::from_utf8(chunk).ok()?;
    if text.bytes().any(|b| b == b'"' || b == b'\r') {
        return None;
    }
    let mut runs: Vec<(&str, usize)> = Vec::new();
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
        match runs.last_mut() {
            Some((name, n)) if *name == group => *n += 1,
            _ => runs.push((group, 1)),
        }
        for (column, &i) in out.iter_mut().zip(layout.numeric) {
            column[row] = super::parse_number(fields[i])?;
        }
    }
    Some(runs)
}

/// Writes the header and every data line of `path` (from `data_start`), each
/// with `reward,adv,advantage` appended; columns named like an output are dropped.
pub(super) fn write_plain(
    output: &mut impl Write,
    path: &Path,
    data_start: u64,
    headers: &[String],
    order: &[usize],
    outputs: &Outputs,
) -> Result<(), CsvError> {
    let open_err = |source: std::io::Error| CsvError::Open { path: path.to_path_buf(), source };
    let mut file = std::fs::File::open(path).map_err(open_err)?;
    file.seek(SeekFrom::Start(data_start)).map_err(open_err)?;
    let kept: Vec<bool> = headers.iter().map(|h| !OUTPUT_COLUMNS.contains(&h.as_str())).collect();
    let mut header = csv::Writer::from_writer(Vec::new());
    let names = headers.iter().zip(&kept).filter(|(_, k)| **k).map(|(h, _)| h.as_str()).chain(OUTPUT_COLUMNS);
    header.write_record(names).map_err(|e| CsvError::Write(std::io::Error::other(e.to_string())))?;
    let header = header.into_inner().map_err(|e| CsvError::Write(std::io::Error::other(e.to_string())))?;
    output.write_all(&header)?;

    let identity = order.iter().enumerate().all(|(t, &i)| t == i);
    let table_row: Vec<usize> = if identity {
        Vec::new()
    } else {
        let mut inverse = vec![0; order.len()];
        for (t, &input) in order.iter().enumerate() {
            inverse[input] = t;
        }
        inverse
    };
    let all_kept = kept.iter().all(|k| *k);
    let changed =
        || CsvError::Write(std::io::Error::other(format!("{} changed while it was evaluated", path.display())));
    let mut row = 0;
    let mut carry: Vec<u8> = Vec::new();
    let mut piece = vec![0u8; WRITE_PIECE];
    loop {
        let n = read_full(&mut file, &mut piece).map_err(CsvError::Write)?;
        let at_end = n < piece.len();
        carry.extend_from_slice(&piece[..n]);
        // Lines complete in this batch: up to the last newline (all at the end).
        let complete = if at_end { carry.len() } else { carry.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) };
        let text = &carry[..complete];
        let mut lines: Vec<&[u8]> = text.strip_suffix(b"\n").unwrap_or(text).split(|&b| b == b'\n').collect();
        if text.is_empty() {
            lines.clear();
        }
        if row + lines.len() > order.len() {
            return Err(changed());
        }
        let base = row;
        let batches: Vec<Vec<u8>> = lines
            .par_chunks(WRITE_LINES)
            .enumerate()
            .map(|(b, batch)| {
                let mut buf = Vec::with_capacity(batch.len() * 96);
                for (k, line) in batch.iter().enumerate() {
                    let input = base + b * WRITE_LINES + k;
                    let t = if identity { input } else { table_row[input] };
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
                    for v in [outputs.reward[t], outputs.adv[t], outputs.advantage[t]] {
                        buf.push(b',');
                        write_f64(&mut buf, v + 0.0); // -0 prints as 0
                    }
                    buf.push(b'\n');
                }
                buf
            })
            .collect();
        for batch in &batches {
            output.write_all(batch)?;
        }
        row += lines.len();
        carry.drain(..complete);
        if at_end {
            break;
        }
    }
    if row != order.len() {
        return Err(changed());
    }
    output.flush()?;
    Ok(())
}

/// Fills `buf` unless the file ends first; returns the bytes read.
fn read_full(file: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The file a plain table was read from, for [`write_plain`].
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PlainSource {
    pub path: PathBuf,
    pub data_start: u64,
}
