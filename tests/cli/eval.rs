//! `rewardlab eval` on rollout JSONL and features CSV.

use super::{rewardlab, stderr, stdout, write};

const ROLLOUTS: &str = r#"{"group": "g1", "predicted": {"files": ["a.py"]}, "target": {"files": ["a.py", "b.py"]}, "turns": [[{"tool": "grep", "args": {"pattern": "x"}, "entities": ["a.py:3", "b.py:4"]}], []]}
{"group": "g2", "predicted": {"files": ["a.py"]}, "target": {"files": ["a.py"]}, "turns": [[]]}
{"group": "g1", "predicted": {"files": ["c.py"]}, "target": {"files": ["a.py", "b.py"]}, "turns": [[{"tool": "grep", "args": {"pattern": "x"}, "entities": ["a.py:3"]}, {"tool": "glob", "args": {"pattern": "*.py"}, "entities": ["a.py", "c.py"]}], []]}
{"group": "g2", "predicted": {"files": ["a.py"]}, "target": {"files": ["a.py"]}, "turns": [[{"tool": "read", "args": {"path": "a.py"}, "entities": ["a.py:1"]}], []]}
"#;

fn rows(csv: &str) -> Vec<Vec<String>> {
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let mut out = vec![reader.headers().expect("header").iter().map(String::from).collect()];
    out.extend(reader.records().map(|r| r.expect("record").iter().map(String::from).collect()));
    out
}

#[test]
fn jsonl_rows_come_back_in_input_order_with_reward_adv_advantage() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), "r.jsonl", ROLLOUTS);
    let out = rewardlab(&["eval", "rewards/codegrep_v3.reward", "--rollouts", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = rows(&stdout(&out));
    assert_eq!(rows[0], ["group", "Fb(file)", "c", "reward", "adv", "advantage"]);
    let groups: Vec<&str> = rows[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(groups, ["g1", "g2", "g1", "g2"], "input order is kept");
    // g2's first rollout made no call: v3 masks its reward and its advantage is 0.
    assert_eq!(rows[2][3], "0");
    let advantage: f64 = rows[2][5].parse().expect("number");
    assert_eq!(advantage, 0.0);
    // Fb(file) of g1's first rollout: P = 1, R = 1/2, beta = 0.5 → 1.25 * 0.5 / (0.25 + 0.5).
    let fb: f64 = rows[1][1].parse().expect("number");
    assert!((fb - 1.25 * 0.5 / 0.75).abs() < 1e-12, "{fb}");
}

#[test]
fn features_csv_gives_the_same_outputs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = write(dir.path(), "r.jsonl", ROLLOUTS);
    let out_csv = dir.path().join("out.csv");
    let first = rewardlab(&[
        "eval",
        "rewards/codegrep_v3.reward",
        "--rollouts",
        jsonl.to_str().expect("utf-8"),
        "--out",
        out_csv.to_str().expect("utf-8"),
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = rewardlab(&["eval", "rewards/codegrep_v3.reward", "--rollouts", out_csv.to_str().expect("utf-8")]);
    assert!(again.status.success(), "{}", stderr(&again));
    let written = std::fs::read_to_string(&out_csv).expect("output written");
    assert_eq!(rows(&stdout(&again)), rows(&written), "re-evaluating the output CSV reproduces it");
}

#[test]
fn bad_records_stop_evaluation_unless_skipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!("{ROLLOUTS}{{\"group\": \"g3\", \"turns\": []}}\nnot json\n");
    let path = write(dir.path(), "bad.jsonl", &text);
    let p = path.to_str().expect("utf-8");
    let out = rewardlab(&["eval", "rewards/codegrep_v3.reward", "--rollouts", p]);
    assert_eq!(out.status.code(), Some(1));
    let se = stderr(&out);
    assert!(se.contains("bad.jsonl:line 5:"), "{se}");
    assert!(se.contains("bad.jsonl:line 6:"), "{se}");
    assert!(stdout(&out).is_empty(), "nothing is evaluated");
    let skipped = rewardlab(&["eval", "rewards/codegrep_v3.reward", "--rollouts", p, "--skip-bad"]);
    assert!(skipped.status.success(), "{}", stderr(&skipped));
    assert_eq!(rows(&stdout(&skipped)).len(), 5, "header + the 4 good rollouts");
}

#[test]
fn a_feature_the_source_lacks_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), "r.jsonl", ROLLOUTS);
    let out = rewardlab(&["eval", "rewards/fusesearch_f1.reward", "--rollouts", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let se = stderr(&out);
    assert!(se.contains("F1(func)") || se.contains("functions"), "names the missing feature:\n{se}");
}

#[test]
fn a_features_csv_without_a_column_the_program_reads_names_it_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), "f.csv", "group,Fb(file),c\ng,1,2\n");
    let out = rewardlab(&["eval", "rewards/codegrep_v1.reward", "--rollouts", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let last = stderr(&out).lines().last().unwrap_or_default().to_string();
    // The file wraps the reader's message; the chain prints each cause once.
    assert_eq!(last, format!("error: {}: line 1: no column `Fb(lr)`", path.display()));
}

#[test]
fn wrong_group_size_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), "r.jsonl", ROLLOUTS);
    let out = rewardlab(&[
        "eval",
        "rewards/codegrep_v3.reward",
        "--rollouts",
        path.to_str().expect("utf-8"),
        "--group-size",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("group `g1` has 2 rollouts, 8 were declared"), "{}", stderr(&out));
}
