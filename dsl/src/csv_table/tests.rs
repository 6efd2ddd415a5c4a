use super::*;

fn read(text: &str) -> Result<CsvFeatures, CsvError> {
    read_features(text.as_bytes(), None)
}

#[test]
fn groups_reorder_stably_by_first_appearance() {
    let csv = "group,\"grade(word, 1)\",cost\nb,0.5,1\na,1,2\nb,0.25,3\na,0,4\nc,true,5\n";
    let f = read(csv).expect("well-formed");
    assert_eq!(f.table.groups(), 3);
    assert_eq!((0..3).map(|g| f.table.group_name(g)).collect::<Vec<_>>(), ["b", "a", "c"]);
    assert_eq!(f.table.group_offsets(), &[0, 2, 4, 5]);
    assert_eq!(f.order, vec![0, 2, 1, 3, 4]);
    assert_eq!(f.table.column("grade(word, 1)"), Some(&[0.5, 0.25, 1.0, 0.0, 1.0][..]));
    assert_eq!(f.table.column("cost"), Some(&[1.0, 3.0, 2.0, 4.0, 5.0][..]));
}

#[test]
fn writer_keeps_input_order_and_columns() {
    let csv = "group,id,cost\nb,x1,1\na,x2,2\nb,x3,3\n";
    let f = read_features(csv.as_bytes(), Some(&["cost"])).expect("only cost is numeric");
    // Table order: b(rows 0, 2), a(row 1): outputs are in table order.
    let outputs =
        Outputs { reward: vec![10.0, 30.0, 20.0], adv: vec![0.5, -0.5, 0.0], advantage: vec![1.0, f64::NAN, 2.0] };
    let mut out = Vec::new();
    write_outputs(&mut out, &f, &outputs).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(text, "group,id,cost,reward,adv,advantage\nb,x1,1,10,0.5,1\na,x2,2,20,0,2\nb,x3,3,30,-0.5,NaN\n");
}

#[test]
fn quoted_keys_with_commas_survive_a_round_trip() {
    let csv = "group,\"grade(word, 1)\",reward\ng,0.5,9\n";
    let f = read_features(csv.as_bytes(), Some(&["grade(word, 1)"])).expect("well-formed");
    let outputs = Outputs { reward: vec![1.0], adv: vec![0.0], advantage: vec![0.0] };
    let mut out = Vec::new();
    write_outputs(&mut out, &f, &outputs).expect("writes");
    // The old `reward` column is replaced, not duplicated.
    assert_eq!(String::from_utf8(out).expect("utf-8"), "group,\"grade(word, 1)\",reward,adv,advantage\ng,0.5,1,0,0\n");
}

#[test]
fn errors_carry_line_numbers() {
    let err = read("group,cost\na,1\nb,x\n").expect_err("bad number");
    assert_eq!(err.to_string(), "line 3: `cost` is \"x\", not a number");
    let err = read("group,cost\na,1\nb,\n").expect_err("empty cell");
    assert!(matches!(err, CsvError::BadNumber { line: 3, .. }), "{err}");
    let err = read("group,cost\na,1,2\n").expect_err("too many fields");
    assert_eq!(err.to_string(), "line 2: 3 fields, the header has 2");
    let err = read("prompt,cost\na,1\n").expect_err("no group column");
    assert!(matches!(err, CsvError::NoGroupColumn), "{err}");
    let err = read_features("group,cost\na,1\n".as_bytes(), Some(&["grade(word)"])).expect_err("missing column");
    assert_eq!(err.to_string(), "line 1: no column `grade(word)`");
    let err = read("group,cost,cost\na,1,2\n").expect_err("duplicate");
    assert!(matches!(err, CsvError::DuplicateColumn { .. }), "{err}");
    let err = read("group,cost\n,1\n").expect_err("empty group");
    assert!(matches!(err, CsvError::EmptyGroup { line: 2 }), "{err}");
}

#[test]
fn output_length_must_match() {
    let f = read("group,cost\na,1\n").expect("well-formed");
    let err = write_outputs(Vec::new(), &f, &Outputs::default()).expect_err("no rows");
    assert!(matches!(err, CsvError::OutputLength { got: 0, want: 1 }), "{err}");
}

#[test]
fn file_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("rewardlab-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("f.csv");
    std::fs::write(&path, "group,cost\na,oops\n").expect("write");
    let err = read_features_file(&path, None).expect_err("bad number");
    assert!(err.to_string().ends_with("f.csv: line 2: `cost` is \"oops\", not a number"), "{err}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn evaluates_end_to_end_through_the_interpreter() {
    let csv = "group,grade(word),cost\np2,1,8\np1,0.5,1\np2,0,2\np1,0.5,0\n";
    let f = read_features(csv.as_bytes(), None).expect("well-formed");
    let program = crate::interp::testkit::gated_program();
    let outputs = crate::interp::eval(&program, &f.table, &crate::EvalOptions::default()).expect("finite");
    let mut out = Vec::new();
    write_outputs(&mut out, &f, &outputs).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    let rewards: Vec<&str> = text.lines().skip(1).map(|l| l.split(',').nth(3).expect("reward field")).collect();
    assert_eq!(rewards, vec!["1", "0.5", "0", "0"]);
}

/// A file in the system's temp dir, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, text: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!("rewardlab-csv-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("temp file written");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn outputs_for(f: &CsvFeatures) -> Outputs {
    let n = f.table.rows();
    Outputs {
        reward: (0..n).map(|i| i as f64 / 3.0).collect(),
        adv: (0..n).map(|i| -(i as f64) * 1e-7).collect(),
        advantage: (0..n).map(|i| if i == 1 { f64::NAN } else { i as f64 * 0.5 }).collect(),
    }
}

/// Reads `text` through the file reader (fast path where it applies) and the
/// general reader, and checks that both give the same table and write the same output.
fn same_either_way(name: &str, text: &str, columns: Option<&[&str]>) -> (CsvFeatures, String) {
    let file = TempFile::new(name, text.as_bytes());
    let fast = read_features_file(&file.0, columns).expect("reads");
    let slow = read_features(text.as_bytes(), columns).expect("reads");
    assert_eq!((&fast.table, &fast.order, &fast.headers), (&slow.table, &slow.order, &slow.headers), "{name}");
    let outputs = outputs_for(&slow);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    write_outputs(&mut a, &fast, &outputs).expect("writes");
    write_outputs(&mut b, &slow, &outputs).expect("writes");
    let (a, b) = (String::from_utf8(a).expect("utf-8"), String::from_utf8(b).expect("utf-8"));
    assert_eq!(a, b, "{name}");
    (fast, a)
}

#[test]
fn plain_files_take_the_fast_path_and_match_the_general_reader() {
    let (f, _) = same_either_way("grouped.csv", "group,x,cost\na,0.5,1\na,0.25,2\nb,1,3\nb,true,4\n", None);
    assert!(matches!(f.rows, Rows::File(_)), "a plain file is re-read when writing");
    assert_eq!(f.order, vec![0, 1, 2, 3]);
    // Interleaved groups, no final newline, text columns kept as text.
    let text = "group,id,\"grade(word, 1)\",reward\nb,x1,0.5,9\na,x2,1,9\nb,x3,0,9\nc,x4,1e-3,9";
    let (f, out) = same_either_way("interleaved.csv", text, Some(&["grade(word, 1)"]));
    assert!(matches!(f.rows, Rows::File(_)));
    assert_eq!(f.order, vec![0, 2, 1, 3]);
    assert_eq!(f.table.column("grade(word, 1)"), Some(&[0.5, 0.0, 1.0, 0.001][..]));
    // The old `reward` column is dropped, the quoted key stays quoted, -0 prints as 0.
    assert!(out.starts_with("group,id,\"grade(word, 1)\",reward,adv,advantage\nb,x1,0.5,0,0,0\n"), "{out}");
    // Many rows over several parse chunks, groups crossing chunk boundaries.
    let mut big = String::from("group,x\n");
    for i in 0..300_000 {
        big.push_str(&format!("g{},{}\n", i / 7, i % 13));
    }
    let (f, _) = same_either_way("big.csv", &big, None);
    assert!(matches!(f.rows, Rows::File(_)));
    assert_eq!(f.table.groups(), 300_000usize.div_ceil(7));
}

#[test]
fn odd_but_valid_files_read_as_the_general_reader_reads_them() {
    for (name, text) in [
        ("quoted.csv", "group,x\n\"a\",1\n\"b,c\",2\n"),
        ("padded.csv", "group,x\n a ,1\nb, 2\n"),
        ("crlf.csv", "group,x\r\na,1\r\nb,2\r\n"),
        ("blank.csv", "group,x\na,1\n\nb,2\n"),
    ] {
        let (f, _) = same_either_way(name, text, None);
        assert!(matches!(f.rows, Rows::Records(_)), "{name} takes the general path");
    }
}

#[test]
fn errors_from_files_are_the_general_readers() {
    for (name, text) in [
        ("bad-number.csv", "group,x\na,1\nb,oops\n"),
        ("short.csv", "group,x\na,1\nb\n"),
        ("empty-group.csv", "group,x\na,1\n,2\n"),
        ("no-column.csv", "group,y\na,1\n"),
    ] {
        let file = TempFile::new(name, text.as_bytes());
        let fast = read_features_file(&file.0, Some(&["x"])).expect_err("bad input").to_string();
        let slow = read_features(text.as_bytes(), Some(&["x"])).expect_err("bad input").to_string();
        assert_eq!(fast, format!("{}: {slow}", file.0.display()), "{name}");
        assert!(fast.contains("line "), "{fast}");
    }
}
