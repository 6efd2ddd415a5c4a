//! Proved-equivalent variants: `study check` reports the pairs, a run merges
//! the proved cells before launch (and the summary still lists them), and
//! `--no-merge` trains every cell.

use std::fs;

use super::{assert_ok, proxy_study, study, write};
use crate::cli::{stderr, stdout};

/// `base` and `shift` differ by a group constant (proved under GRPO);
/// `double` is `base` scaled, equal only up to GRPO's epsilon (trained).
const VARIANTS: &str = r#"[[variants]]
name = "base"
reward = 'Fb(file) * mask(c > 0)'

[[variants]]
name = "shift"
reward = 'mask(0 < c) * Fb(file) + group.mean(c) / 4'

[[variants]]
name = "double"
reward = '2 * Fb(file) * mask(c > 0)'
"#;

#[test]
fn check_reports_pairs_and_a_run_merges_proved_cells() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let file = write(dir, "eq.toml", &proxy_study("eq", 1, 2, 0, VARIANTS));
    let file = file.to_str().expect("utf-8 path");

    let o = study(dir, &["check", "--no-tasks", file]);
    assert_ok(&o, "study check");
    let out = stdout(&o);
    assert!(out.contains("base ≡ shift: proved: a group-constant term"), "{out}");
    assert!(out.contains("base ≈ double: equal up to ε, not proved (positive scaling (×2)"), "{out}");
    assert!(out.contains("merged before launch: shift = base"), "{out}");

    let o = study(dir, &[file, "--jobs", "1", "--results", "merged"]);
    assert_ok(&o, "study");
    assert!(stderr(&o).contains("merged shift into base: proved: a group-constant term"), "{}", stderr(&o));
    let results = dir.join("merged/eq");
    assert!(results.join("runs/base/seed-000/metrics.csv").exists());
    assert!(results.join("runs/double/seed-000/metrics.csv").exists(), "equal up to ε is trained");
    assert!(!results.join("runs/shift").exists(), "a merged cell is not trained");
    let summary = fs::read_to_string(results.join("summary.md")).expect("summary.md");
    assert!(summary.contains("| shift | = base (proved: a group-constant term) |"), "{summary}");
    let csv = fs::read_to_string(results.join("summary.csv")).expect("summary.csv");
    assert!(csv.lines().any(|l| l.starts_with("shift,0,") && l.contains("= base")), "{csv}");

    let o = study(dir, &[file, "--jobs", "1", "--results", "all", "--no-merge"]);
    assert_ok(&o, "study --no-merge");
    assert!(!stderr(&o).contains("merged shift"), "{}", stderr(&o));
    let results = dir.join("all/eq");
    assert!(results.join("runs/shift/seed-000/metrics.csv").exists(), "--no-merge trains every cell");
    let summary = fs::read_to_string(results.join("summary.md")).expect("summary.md");
    assert!(summary.contains("| shift | 1 |") && !summary.contains("= base"), "{summary}");
}
