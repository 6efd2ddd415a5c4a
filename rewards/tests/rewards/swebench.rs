//! Every instance of the shared SWE-bench Lite file parses into a task whose
//! target files are exactly the files its patch's `diff --git` headers name.

use std::path::PathBuf;

use rewardlab_rewards::tasks::load_swebench;

/// `shared/` sits beside the repository in CI (`<repo>/../shared`) and inside
/// it in some checkouts (`<repo>/shared`).
fn data_file() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [root.join("../shared/data/swebench_lite.jsonl"), root.join("shared/data/swebench_lite.jsonl")];
    for c in &candidates {
        if c.is_file() {
            return c.clone();
        }
    }
    panic!(
        "SWE-bench Lite data not found; looked at {:?}. The tests need shared/data/swebench_lite.jsonl beside the repository.",
        candidates
    );
}

/// The `a/` paths of `diff --git a/X b/Y` lines, read independently of the parser
/// (every path in this data set is free of spaces, so a split at ` b/` is exact).
fn header_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git a/") {
            let (a, _) = rest.split_once(" b/").expect("header has a b/ side");
            if !out.iter().any(|p| p == a) {
                out.push(a.to_string());
            }
        }
    }
    out
}

#[test]
fn every_swebench_lite_instance_has_targets_matching_its_headers() {
    let path = data_file();
    let text = std::fs::read_to_string(&path).expect("data file is readable");
    let loaded = load_swebench(text.as_bytes()).expect("in-memory read");
    assert!(loaded.errors.is_empty(), "bad instances: {:?}", loaded.errors);
    assert_eq!(loaded.records.len(), 300);
    let raw: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("valid JSON line")).collect();
    let mut with_ranges = 0;
    let mut functions = 0;
    for ((_, task), raw) in loaded.records.iter().zip(&raw) {
        let patch = raw["patch"].as_str().expect("patch is a string");
        assert!(!task.targets.files.is_empty(), "{}", task.id);
        assert_eq!(task.targets.files, header_paths(patch), "{}", task.id);
        for r in &task.targets.line_ranges {
            assert!(task.targets.files.contains(&r.path), "{}: range {r} outside the target files", task.id);
        }
        with_ranges += usize::from(!task.targets.line_ranges.is_empty());
        let spans = raw["expected_spans"].as_object().expect("expected_spans is an object");
        let want: usize = spans.values().map(|v| v.as_array().map_or(0, Vec::len)).sum();
        let got = task.targets.functions.as_ref().expect("spans present").len();
        assert_eq!(got, want, "{}", task.id);
        functions += got;
    }
    assert_eq!(with_ranges, 300, "every Lite patch edits existing lines");
    assert!(functions >= 300, "{functions} function targets");
    let first = &loaded.records[0].1;
    assert_eq!(first.id, "psf__requests-863");
    assert_eq!(
        first.targets.functions.as_deref(),
        Some(&["requests/models.py::Request.register_hook".to_string()][..])
    );
}
