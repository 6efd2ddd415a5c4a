//! `rewardlab eval` and `study replay` on Parquet files the tests write: a
//! features file, and rollout records with nested lists.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use arrow_array::{ArrayRef, ListArray, RecordBatch, StringArray, StructArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::Field;
use parquet::arrow::ArrowWriter;

use super::{rewardlab, root, stderr, stdout, write};

/// Two groups of two rollouts, as JSONL and as the same records in Parquet.
const ROLLOUTS: &str = r#"{"group": "g1", "predicted": {"files": ["a.py"]}, "target": {"files": ["a.py", "b.py"]}, "turns": [[{"tool": "grep", "entities": ["a.py:3", "b.py:4"]}], []]}
{"group": "g2", "predicted": {"files": ["a.py"]}, "target": {"files": ["a.py"]}, "turns": [[]]}
{"group": "g1", "predicted": {"files": ["c.py"]}, "target": {"files": ["a.py", "b.py"]}, "turns": [[{"tool": "grep", "entities": ["a.py:3"]}, {"tool": "glob", "entities": ["a.py", "c.py"]}], []]}
{"group": "g2", "predicted": {"files": ["./a.py"]}, "target": {"files": ["a.py"]}, "turns": [[{"tool": "read", "entities": ["a.py:1"]}], []]}
"#;

fn strings(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

fn list(values: ArrayRef, offsets: &[i32]) -> ArrayRef {
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    Arc::new(ListArray::new(field, OffsetBuffer::new(ScalarBuffer::from(offsets.to_vec())), values, None))
}

fn structure(fields: Vec<(&str, ArrayRef)>) -> ArrayRef {
    let pairs: Vec<(Arc<Field>, ArrayRef)> =
        fields.into_iter().map(|(name, a)| (Arc::new(Field::new(name, a.data_type().clone(), true)), a)).collect();
    Arc::new(StructArray::from(pairs))
}

/// [`ROLLOUTS`] as Parquet columns.
fn write_rollouts(path: &Path) {
    let predicted = structure(vec![("files", list(strings(&["a.py", "a.py", "c.py", "./a.py"]), &[0, 1, 2, 3, 4]))]);
    let target =
        structure(vec![("files", list(strings(&["a.py", "b.py", "a.py", "a.py", "b.py", "a.py"]), &[0, 2, 3, 5, 6]))]);
    let calls = structure(vec![
        ("tool", strings(&["grep", "grep", "glob", "read"])),
        ("entities", list(strings(&["a.py:3", "b.py:4", "a.py:3", "a.py", "c.py", "a.py:1"]), &[0, 2, 3, 5, 6])),
    ]);
    // Turns: [grep] [] | [] | [grep, glob] [] | [read] [].
    let turns = list(list(calls, &[0, 1, 1, 1, 3, 3, 4, 4]), &[0, 2, 3, 5, 7]);
    let columns = vec![
        ("group", strings(&["g1", "g2", "g1", "g2"])),
        ("predicted", predicted),
        ("target", target),
        ("turns", turns),
    ];
    let batch = RecordBatch::try_from_iter(columns).expect("a batch");
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(path).expect("create"), batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

fn eval(reward: &str, rollouts: &Path, out: Option<&Path>) -> String {
    let mut args = vec!["eval", reward, "--rollouts", rollouts.to_str().expect("utf-8")];
    if let Some(out) = out {
        args.extend(["--out", out.to_str().expect("utf-8")]);
    }
    let o = rewardlab(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn rollout_records_in_parquet_evaluate_as_their_jsonl() {
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = write(dir.path(), "r.jsonl", ROLLOUTS);
    let parquet = dir.path().join("r.parquet");
    write_rollouts(&parquet);
    // `e` reads every call's entities, `Fb(file)` the normalised paths.
    let efficiency = write(dir.path(), "e.reward", "reward = Fb(file) * (0.5 + 0.5 * e) * mask(c > 0)\n");
    for reward in ["rewards/codegrep_v3.reward", efficiency.to_str().expect("utf-8")] {
        let from_jsonl = eval(reward, &jsonl, None);
        assert_eq!(eval(reward, &parquet, None), from_jsonl, "{reward}");
    }
}

#[test]
fn parquet_output_read_back_as_features_gives_the_same_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = write(dir.path(), "r.jsonl", ROLLOUTS);
    let out = dir.path().join("out.parquet");
    let as_csv = eval("rewards/codegrep_v3.reward", &jsonl, None);
    assert_eq!(eval("rewards/codegrep_v3.reward", &jsonl, Some(&out)), "", "Parquet goes to the file");
    // The written file is a features file (group, the features, the outputs):
    // evaluated again, it reproduces the CSV of the first run.
    assert_eq!(eval("rewards/codegrep_v3.reward", &out, None), as_csv);
}

/// Features `group`, `Fb(file)` and `c` of `groups` (one name per row), as a
/// CSV and as Parquet in row groups of 8 rows; `fb(r)` is row `r`'s `Fb(file)`.
fn write_features(
    dir: &Path,
    groups: &[String],
    fb: impl Fn(usize) -> f64,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let fb: Vec<f64> = (0..groups.len()).map(fb).collect();
    let c: Vec<f64> = (0..groups.len()).map(|r| (r % 6) as f64).collect();
    let mut csv = String::from("group,Fb(file),c\n");
    for r in 0..groups.len() {
        csv.push_str(&format!("{},{},{}\n", groups[r], fb[r], c[r]));
    }
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let batch = RecordBatch::try_from_iter(vec![
        ("group", strings(&names)),
        ("Fb(file)", Arc::new(arrow_array::Float64Array::from(fb)) as ArrayRef),
        ("c", Arc::new(arrow_array::Float64Array::from(c)) as ArrayRef),
    ])
    .expect("a batch");
    let parquet = dir.join("features.parquet");
    let props = parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(8)).build();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(&parquet).expect("create"), batch.schema(), Some(props))
            .expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    (write(dir, "features.csv", &csv), parquet)
}

/// The names of the files in `dir`.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).expect("list").map(|e| e.expect("entry").file_name().to_string_lossy().into()).collect();
    names.sort();
    names
}

#[test]
fn parquet_features_evaluated_a_chunk_at_a_time_give_the_csv_inputs_outputs() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Groups of 1 to 11 rows across row groups of 8 rows: grouped, so `eval --out` streams.
    let mut grouped: Vec<String> = Vec::new();
    for g in 0..60 {
        grouped.extend(std::iter::repeat_n(format!("issue-{g}"), 1 + (g * 5) % 11));
    }
    // The same rows with group 0 coming back at the end: read whole.
    let mut regrouped = grouped.clone();
    regrouped.push("issue-0".into());
    let batch_reward = write(dir.path(), "batch.reward", "reward = Fb(file) * mask(c > 0) - batch.mean(Fb(file))\n");
    for (groups, rewards) in [
        (&grouped, vec!["rewards/codegrep_v3.reward", "rewards/grpo.reward", batch_reward.to_str().expect("utf-8")]),
        (&regrouped, vec!["rewards/codegrep_v3.reward"]),
    ] {
        let (csv, parquet) = write_features(dir.path(), groups, |r| ((r * 37) % 101) as f64 / 100.0);
        for reward in rewards {
            let want = eval(reward, &csv, None);
            let out_csv = dir.path().join("out.csv");
            eval(reward, &parquet, Some(&out_csv));
            assert_eq!(std::fs::read_to_string(&out_csv).expect("read"), want, "{reward}");
            let out_parquet = dir.path().join("out.parquet");
            eval(reward, &parquet, Some(&out_parquet));
            // Read back (its outputs are replaced by the new ones, the same values).
            assert_eq!(eval(reward, &out_parquet, None), want, "{reward}");
        }
    }
    assert_eq!(
        listing(dir.path()),
        ["batch.reward", "features.csv", "features.parquet", "out.csv", "out.parquet"],
        "no partial file left"
    );
}

#[test]
fn a_non_finite_value_in_a_later_chunk_fails_as_the_whole_file_does_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let groups: Vec<String> = (0..200).map(|r| format!("issue-{}", r / 8)).collect();
    let (csv, parquet) = write_features(dir.path(), &groups, |r| if r == 150 { -1.0 } else { 0.5 });
    let reward = write(dir.path(), "sqrt.reward", "reward = sqrt(Fb(file))\n");
    let reward = reward.to_str().expect("utf-8");
    let run = |input: &Path, out: &Path| {
        let o = rewardlab(&[
            "eval",
            reward,
            "--rollouts",
            input.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        stderr(&o)
    };
    let from_csv = run(&csv, &dir.path().join("a.csv"));
    assert!(from_csv.contains("(row 150)"), "{from_csv}");
    assert_eq!(run(&parquet, &dir.path().join("b.csv")), from_csv);
    assert_eq!(listing(dir.path()), ["features.csv", "features.parquet", "sqrt.reward"], "nothing written");
}

#[test]
fn a_parquet_feature_of_the_wrong_type_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("f.parquet");
    let batch = RecordBatch::try_from_iter(vec![
        ("group", strings(&["g", "g"])),
        ("Fb(file)", strings(&["0.5", "1"])),
        ("c", Arc::new(arrow_array::Int32Array::from(vec![1, 2])) as ArrayRef),
    ])
    .expect("a batch");
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(&path).expect("create"), batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let o = rewardlab(&["eval", "rewards/codegrep_v3.reward", "--rollouts", path.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("column `Fb(file)` is Utf8, not a number or bool column"), "{}", stderr(&o));
}

#[test]
fn study_replay_reads_parquet_rollouts_as_their_jsonl() {
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = write(dir.path(), "r.jsonl", ROLLOUTS);
    let parquet = dir.path().join("r.parquet");
    write_rollouts(&parquet);
    let replay = |log: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_study"))
            .args(["replay", "studies/equivalence.toml", "--rollouts", log.to_str().expect("utf-8")])
            .current_dir(root())
            .output()
            .expect("the study binary runs");
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let from_jsonl = replay(&jsonl);
    assert!(from_jsonl.contains("alerts over 1 logged step(s)"), "{from_jsonl}");
    assert_eq!(replay(&parquet), from_jsonl);
}
