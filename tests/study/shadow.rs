//! `study --shadow`: every run writes `shadow.csv` with a row per step and
//! other variant, and the summary gains the shadow-agreement table and plot.

use std::fs;

use super::{assert_ok, study, synthetic_study, write};
use crate::cli::stdout;

#[test]
fn a_study_with_shadows_writes_rows_a_table_and_a_plot() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let file = write(dir, "sh.toml", &synthetic_study("sh", 3, 0));
    let o = study(dir, &[file.to_str().expect("utf-8 path"), "--jobs", "1", "--shadow"]);
    assert_ok(&o, "study --shadow");
    let results = dir.join("results/sh");
    for (trained, shadow) in [("fb", "gated"), ("gated", "fb")] {
        let text = fs::read_to_string(results.join(format!("runs/{trained}/seed-000/shadow.csv"))).expect("shadow.csv");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "step,variant,kendall_tau_b,tau_groups,sign_flips,zero_variance_groups,pearson");
        let keys: Vec<String> = lines[1..].iter().map(|l| l.split(',').take(2).collect::<Vec<_>>().join(",")).collect();
        assert_eq!(keys, (1..=3).map(|s| format!("{s},{shadow}")).collect::<Vec<_>>(), "{text}");
    }
    let summary = fs::read_to_string(results.join("summary.md")).expect("summary.md");
    assert!(summary.contains("## Shadow agreement"), "{summary}");
    assert!(summary.contains("| fb | gated |") && summary.contains("| gated | fb |"), "{summary}");
    assert!(results.join("plots/shadow_tau.png").is_file());
    assert!(stdout(&o).contains("Shadow agreement"), "the summary is printed too");
}
