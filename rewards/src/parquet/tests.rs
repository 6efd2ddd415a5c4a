//! Parquet files the tests write themselves: a features round trip, the
//! errors of a wrong or missing column, and rollout records with nested lists.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field};
use parquet::arrow::ArrowWriter;
use rewardlab_dsl::csv_table::{CsvFeatures, RowOrder};
use rewardlab_dsl::table::Outputs;

use super::*;
use crate::rollout::{Rollout, map_jsonl};

fn write(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    let batch = RecordBatch::try_from_iter(columns).expect("a batch");
    let file = std::fs::File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

fn strings(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

fn floats(values: &[f64]) -> ArrayRef {
    Arc::new(Float64Array::from(values.to_vec()))
}

/// A list column: row `r` holds `values[offsets[r]..offsets[r + 1]]`.
fn list(values: ArrayRef, offsets: &[i32]) -> ArrayRef {
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    Arc::new(ListArray::new(field, OffsetBuffer::new(ScalarBuffer::from(offsets.to_vec())), values, None))
}

fn structure(fields: Vec<(&str, ArrayRef)>) -> ArrayRef {
    let pairs: Vec<(Arc<Field>, ArrayRef)> =
        fields.into_iter().map(|(name, a)| (Arc::new(Field::new(name, a.data_type().clone(), true)), a)).collect();
    Arc::new(StructArray::from(pairs))
}

#[test]
fn features_round_trip_grouped_as_csv_and_written_back_in_input_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("features.parquet");
    write(
        &input,
        vec![
            ("group", strings(&["b", "a", "b", "a"])),
            ("Fb(file)", floats(&[0.5, 1.0, 0.25, 0.0])),
            ("c", Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef),
            ("valid", Arc::new(BooleanArray::from(vec![true, false, true, true])) as ArrayRef),
            ("note", strings(&["x", "y", "z", "w"])),
        ],
    );
    assert!(is_parquet(&input));
    assert!(!holds_rollouts(&input).expect("schema"));
    let features = read_features(&input, Some(&["c", "Fb(file)", "valid"])).expect("read");
    let table = &features.table;
    // Groups by first appearance, input order within a group.
    assert_eq!((0..2).map(|g| table.group_name(g)).collect::<Vec<_>>(), ["b", "a"]);
    assert_eq!(features.order, vec![0, 2, 1, 3]);
    assert_eq!(table.column("c"), Some(&[1.0, 3.0, 2.0, 4.0][..]));
    assert_eq!(table.column("Fb(file)"), Some(&[0.5, 0.25, 1.0, 0.0][..]));
    assert_eq!(table.column("valid"), Some(&[1.0, 1.0, 0.0, 1.0][..]));
    assert_eq!(table.column("note"), None);

    // Outputs come in table order; the file holds them in input order.
    let outputs = Outputs {
        reward: vec![10.0, 11.0, 12.0, 13.0],
        adv: vec![0.0, -0.0, 1.0, 2.0],
        advantage: vec![20.0, 21.0, 22.0, 23.0],
    };
    let out = dir.path().join("out.parquet");
    write_outputs(&out, &features, &outputs).expect("write");
    let back = read_features(&out, None).expect("read back");
    assert_eq!(back.order, vec![0, 2, 1, 3]);
    let keys: Vec<&str> = back.table.column_keys().collect();
    assert_eq!(keys, ["c", "Fb(file)", "valid", "reward", "adv", "advantage"]);
    assert_eq!(back.table.column("reward"), Some(&[10.0, 11.0, 12.0, 13.0][..]));
    assert_eq!(back.table.column("c"), table.column("c"));
    let adv = back.table.column("adv").expect("adv");
    assert!(adv.iter().all(|v| v.is_sign_positive() || *v < 0.0), "-0 is written as 0: {adv:?}");
}

/// Writes `columns` in row groups of `rows_per_group` rows.
fn write_in_row_groups(path: &Path, columns: Vec<(&str, ArrayRef)>, rows_per_group: usize) {
    let batch = RecordBatch::try_from_iter(columns).expect("a batch");
    let file = std::fs::File::create(path).expect("create");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .build();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

#[test]
fn row_groups_decoded_in_parallel_give_what_the_csv_reader_gives() {
    // Groups run across row-group boundaries, and one comes back after
    // another group's rows (so the table must reorder the rows).
    let groups: Vec<String> = (0..1000).map(|r| format!("g{}", if r % 97 == 5 { 3 } else { r / 7 })).collect();
    let fb: Vec<f64> = (0..1000).map(|r| f64::from(r) / 1000.0).collect();
    let c: Vec<i64> = (0..1000).map(|r| r % 5).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("features.parquet");
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    write_in_row_groups(
        &path,
        vec![
            ("group", strings(&names)),
            ("Fb(file)", floats(&fb)),
            ("c", Arc::new(Int64Array::from(c.clone())) as ArrayRef),
        ],
        64,
    );
    let mut csv = String::from("group,Fb(file),c\n");
    for r in 0..1000 {
        csv.push_str(&format!("{},{},{}\n", groups[r], fb[r], c[r]));
    }
    let want = rewardlab_dsl::csv_table::read_features(csv.as_bytes(), None).expect("csv");
    let got = read_features(&path, None).expect("parquet");
    assert_eq!(got.table, want.table);
    assert_eq!(got.order, want.order);
    assert!(matches!(got.order, rewardlab_dsl::csv_table::RowOrder::Permuted(_)));

    // A null in a later row group is named by its row in the whole file.
    let mut with_null: Vec<Option<f64>> = fb.iter().copied().map(Some).collect();
    with_null[700] = None;
    write_in_row_groups(
        &path,
        vec![("group", strings(&names)), ("c", Arc::new(Float64Array::from(with_null)) as ArrayRef)],
        64,
    );
    let err = read_features(&path, None).expect_err("a null");
    assert_eq!(err.to_string(), format!("{}: row 701: `c` is null", path.display()));
}

/// The chunks [`stream_features`] hands on, or how it ended without them.
fn chunks(path: &Path, columns: &[&str]) -> (Vec<CsvFeatures>, Result<Streamed, ParquetError>) {
    let mut got = Vec::new();
    let end = stream_features(path, columns, |chunk| {
        got.push(chunk);
        Ok::<(), ParquetError>(())
    });
    (got, end)
}

#[test]
fn streamed_chunks_are_whole_groups_that_join_into_the_whole_table() {
    // Groups of 1 to 9 rows across row groups of 16 rows (one group longer
    // than a row group), and a single-row last group.
    let mut groups: Vec<String> = Vec::new();
    for g in 0..120 {
        let size = if g == 40 { 37 } else { 1 + (g * 7) % 9 };
        groups.extend(std::iter::repeat_n(format!("g{g}"), size));
    }
    groups.push("last".into());
    let rows = groups.len();
    let fb: Vec<f64> = (0..rows).map(|r| r as f64 / rows as f64).collect();
    let c: Vec<i64> = (0..rows as i64).map(|r| r % 5).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("features.parquet");
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    write_in_row_groups(
        &path,
        vec![("group", strings(&names)), ("Fb(file)", floats(&fb)), ("c", Arc::new(Int64Array::from(c)) as ArrayRef)],
        16,
    );
    let whole = read_features(&path, Some(&["c", "Fb(file)"])).expect("read whole");
    // Waves of two row groups, whatever the machine's cores.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool");
    let (got, end) = pool.install(|| chunks(&path, &["c", "Fb(file)"]));
    assert_eq!(end.expect("streamed"), Streamed::Done);
    assert!(got.len() > 1, "several chunks: {}", got.len());
    let mut group = 0;
    let mut row = 0;
    for chunk in &got {
        let table = &chunk.table;
        assert_eq!(chunk.order, RowOrder::Identity(table.rows()));
        for g in 0..table.groups() {
            // The same group, whole, as in the table read at once.
            assert_eq!(table.group_name(g), whole.table.group_name(group));
            assert_eq!(
                table.group_rows(g),
                whole.table.group_rows(group).start - row..whole.table.group_rows(group).end - row
            );
            group += 1;
        }
        for key in ["c", "Fb(file)"] {
            let want = &whole.table.column(key).expect("read")[row..row + table.rows()];
            assert_eq!(table.column(key), Some(want), "{key}");
        }
        row += table.rows();
    }
    assert_eq!((group, row), (whole.table.groups(), rows));
}

#[test]
fn streaming_stops_at_a_group_that_comes_back_and_reports_the_files_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("features.parquet");
    // `a` comes back after `b` and `c`, two row groups later.
    let groups = ["a", "a", "b", "b", "c", "c", "a", "d"];
    write_in_row_groups(&path, vec![("group", strings(&groups)), ("c", floats(&[1.0; 8]))], 2);
    let (_, end) = chunks(&path, &["c"]);
    assert_eq!(end.expect("read"), Streamed::NotGrouped);

    // The errors of reading the file whole, whichever chunk they fall in.
    let with_null: ArrayRef = Arc::new(Float64Array::from(vec![Some(1.0), Some(2.0), Some(3.0), None]));
    write_in_row_groups(&path, vec![("group", strings(&["a", "a", "b", "b"])), ("c", with_null)], 2);
    let (_, end) = chunks(&path, &["c"]);
    let whole = read_features(&path, Some(&["c"])).expect_err("a null");
    assert_eq!(end.expect_err("a null").to_string(), whole.to_string());
    let (_, end) = chunks(&path, &["Fb(file)"]);
    assert!(matches!(end, Err(ParquetError::MissingColumn { .. })), "{end:?}");
}

#[test]
fn output_written_a_chunk_at_a_time_is_the_file_written_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("features.parquet");
    let groups: Vec<String> = (0..300).map(|r| format!("g{}", r / 6)).collect();
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let fb: Vec<f64> = (0..300).map(|r| f64::from(r) / 7.0).collect();
    write_in_row_groups(&input, vec![("group", strings(&names)), ("Fb(file)", floats(&fb))], 32);
    let outputs_of = |features: &CsvFeatures| {
        let column = features.table.column("Fb(file)").expect("read");
        Outputs {
            reward: column.to_vec(),
            adv: column.iter().map(|v| -v).collect(),
            advantage: vec![0.5; column.len()],
        }
    };
    let at_once = dir.path().join("at_once.parquet");
    let whole = read_features(&input, None).expect("read");
    write_outputs(&at_once, &whole, &outputs_of(&whole)).expect("write");
    let chunked = dir.path().join("chunked.parquet");
    let mut writer: Option<OutputWriter> = None;
    let end = stream_features(&input, &["Fb(file)"], |chunk| {
        let w = match &mut writer {
            Some(w) => w,
            None => writer.insert(OutputWriter::create(&chunked, &chunk)?),
        };
        w.write(&chunk, &outputs_of(&chunk))
    });
    assert_eq!(end.expect("streamed"), Streamed::Done);
    writer.expect("a chunk").finish().expect("finish");
    let (a, b) = (read_features(&at_once, None).expect("read"), read_features(&chunked, None).expect("read"));
    assert_eq!(a.table, b.table);
    assert_eq!(a.order, b.order);
}

#[test]
fn wrong_types_nulls_and_missing_columns_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.parquet");
    write(&path, vec![("group", strings(&["g", "g"])), ("c", strings(&["1", "2"]))]);
    let err = read_features(&path, Some(&["c"])).expect_err("a string feature");
    assert_eq!(err.to_string(), format!("{}: column `c` is Utf8, not a number or bool column", path.display()));
    let err = read_features(&path, Some(&["Fb(file)"])).expect_err("no such column");
    assert_eq!(err.to_string(), format!("{}: no column `Fb(file)`", path.display()));

    write(&path, vec![("grp", strings(&["g"])), ("c", floats(&[1.0]))]);
    let err = read_features(&path, None).expect_err("no group");
    assert!(matches!(err, ParquetError::NoGroupColumn { .. }), "{err}");

    let with_null: ArrayRef = Arc::new(Float64Array::from(vec![Some(1.0), None]));
    write(&path, vec![("group", strings(&["g", "g"])), ("c", with_null)]);
    let err = read_features(&path, None).expect_err("a null");
    assert_eq!(err.to_string(), format!("{}: row 2: `c` is null", path.display()));

    std::fs::write(&path, b"group,c\ng,1\n").expect("write");
    let err = read_features(&path, None).expect_err("not parquet");
    assert!(matches!(err, ParquetError::Format { .. }), "{err}");
}

#[test]
fn rollout_records_with_nested_lists_read_as_their_jsonl_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rollouts.parquet");
    // Two rollouts: the first with two turns (two calls, then the answer
    // turn), the second with the answer turn only and no `target.line_ranges`.
    let predicted = structure(vec![("files", list(strings(&["./a.py", "b.py", "a.py"]), &[0, 2, 3]))]);
    let target = structure(vec![
        ("files", list(strings(&["a.py", "a.py"]), &[0, 1, 2])),
        ("line_ranges", {
            let values = strings(&["a.py:1-9"]);
            let field = Arc::new(Field::new_list_field(DataType::Utf8, true));
            let offsets = OffsetBuffer::new(ScalarBuffer::from(vec![0, 1, 1]));
            let nulls = arrow_buffer::NullBuffer::from(vec![true, false]);
            Arc::new(ListArray::new(field, offsets, values, Some(nulls))) as ArrayRef
        }),
    ]);
    let calls = structure(vec![
        ("tool", strings(&["grep", "read"])),
        ("entities", list(strings(&["a.py:3", "b.py:1", "a.py:3", "a.py:4"]), &[0, 2, 4])),
    ]);
    let turns = list(list(calls, &[0, 2, 2, 2]), &[0, 2, 3]);
    write(
        &path,
        vec![
            ("group", strings(&["g", "g"])),
            ("predicted", predicted),
            ("target", target),
            ("turns", turns),
            ("completion_tokens", Arc::new(Int64Array::from(vec![Some(120), None])) as ArrayRef),
            ("valid", Arc::new(BooleanArray::from(vec![true, true])) as ArrayRef),
        ],
    );
    assert!(holds_rollouts(&path).expect("schema"));
    let lines = rollout_lines(&path).expect("lines");
    let loaded = map_jsonl(&lines, "rollouts", Rollout::from_json_line).expect("utf-8");
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let got: Vec<Rollout> = loaded.records.into_iter().map(|(_, r)| r).collect();
    let want: Vec<Rollout> = [
        r#"{"group": "g", "predicted": {"files": ["./a.py", "b.py"]}, "target": {"files": ["a.py"], "line_ranges": ["a.py:1-9"]},
           "turns": [[{"tool": "grep", "entities": ["a.py:3", "b.py:1"]}, {"tool": "read", "entities": ["a.py:3", "a.py:4"]}], []],
           "completion_tokens": 120, "valid": true}"#,
        r#"{"group": "g", "predicted": {"files": ["a.py"]}, "target": {"files": ["a.py"]}, "turns": [[]], "valid": true}"#,
    ]
    .iter()
    .map(|line| Rollout::from_json_line(line).expect("the expected record parses"))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn a_bad_rollout_row_is_reported_at_its_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rollouts.parquet");
    let turns = list(list(structure(vec![("tool", strings(&["grep"]))]), &[0, 1]), &[0, 0, 1]);
    write(&path, vec![("group", strings(&["g", "g"])), ("turns", turns)]);
    let lines = rollout_lines(&path).expect("lines");
    let loaded = map_jsonl(&lines, "rollouts", Rollout::from_json_line).expect("utf-8");
    assert_eq!(loaded.records.len(), 1);
    assert_eq!(loaded.errors.len(), 1);
    assert_eq!(loaded.errors[0].line, 1, "{}", loaded.errors[0]);
    assert!(loaded.errors[0].message.contains("`turns` is empty"), "{}", loaded.errors[0]);
}
