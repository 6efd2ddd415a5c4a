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

#[test]
fn slurm_tasks_merge_the_same_proved_cells_as_a_local_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write(dir, "eq.toml", &proxy_study("eq", 1, 2, 0, VARIANTS));

    // The array covers the trained runs only: base and double (shift is merged into base).
    let o = study(dir, &["slurm", "eq.toml", "--results", "array"]);
    assert_ok(&o, "study slurm");
    assert!(stderr(&o).contains("merged shift into base: proved: a group-constant term"), "{}", stderr(&o));
    let script = fs::read_to_string(dir.join("array/eq/slurm/eq.sbatch")).expect("script");
    assert!(script.contains("#SBATCH --array=0-1\n"), "{script}");
    assert!(script.contains("2 runs (3 variants x 1 seeds, less 1 variant(s) proved equivalent"), "{script}");
    assert!(!script.contains("--no-merge"), "{script}");
    for i in ["0", "1"] {
        assert_ok(&study(dir, &["run-one", "eq.toml", "--index", i, "--results", "array"]), "run-one");
    }
    let o = study(dir, &["run-one", "eq.toml", "--index", "2", "--results", "array"]);
    assert!(stderr(&o).contains("--index 2 is out of range: study `eq` has 2 runs"), "{}", stderr(&o));
    assert_ok(&study(dir, &["merge", "eq.toml", "--results", "array"]), "study merge");
    assert!(!dir.join("array/eq/runs/shift").exists(), "a merged cell is not trained");

    // The same tables as a local run, merged row included.
    assert_ok(&study(dir, &["eq.toml", "--jobs", "1", "--results", "local"]), "local study");
    for file in ["summary.csv", "summary.md", "manifest.json", "merged.json"] {
        let array = fs::read_to_string(dir.join("array/eq").join(file)).expect(file);
        let local = fs::read_to_string(dir.join("local/eq").join(file)).expect(file);
        assert_eq!(array, local, "{file} differs between the array and the local run");
    }
    let summary = fs::read_to_string(dir.join("array/eq/summary.md")).expect("summary.md");
    assert!(summary.contains("| shift | = base (proved: a group-constant term) |"), "{summary}");

    // `--no-merge` numbers every cell, and the script hands the flag on to its tasks.
    let o = study(dir, &["slurm", "eq.toml", "--results", "all", "--no-merge"]);
    assert_ok(&o, "study slurm --no-merge");
    let script = fs::read_to_string(dir.join("all/eq/slurm/eq.sbatch")).expect("script");
    assert!(script.contains("#SBATCH --array=0-2\n") && script.contains("--results"), "{script}");
    assert!(script.lines().last().is_some_and(|l| l.ends_with(" --no-merge")), "{script}");
    assert!(script.contains(" merge ") && script.contains("--no-merge\n#SBATCH"), "{script}");
}
