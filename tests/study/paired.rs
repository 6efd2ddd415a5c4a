//! Paired differences over seeds (issue 19, item 3) and per-variant loss overrides, through the
//! `study` binary.

use super::{assert_ok, proxy_study, study, write};
use crate::cli::stderr;

#[test]
fn a_study_reports_paired_differences_and_summarize_takes_another_reference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let variants = r#"[[variants]]
name = "mean"
reward = 'Fb(file) * mask(c > 0)'

[[variants]]
name = "sum"
reward = 'Fb(file) * mask(c > 0)'
loss = { aggregation = { mode = "seq-mean-token-sum-norm", norm = 64.0 } }

[[variants]]
name = "fb"
reward = 'Fb(file)'
"#;
    let text = proxy_study("paired", 2, 4, 0, variants);
    let text = text.replacen("[training]\n", "[summary]\nreference = \"mean\"\n\n[training]\n", 1);
    write(dir.path(), "paired.toml", &text);
    let results = dir.path().join("results");
    let out = study(dir.path(), &["paired.toml", "--results", results.to_str().expect("utf-8"), "-j", "1"]);
    assert_ok(&out, "the study");
    let root = results.join("paired");
    let md = std::fs::read_to_string(root.join("summary.md")).expect("summary.md");
    assert!(md.contains("## Paired differences against `mean`"), "{md}");
    assert!(md.contains("| sum |") && md.contains("| fb |"), "{md}");
    let csv = std::fs::read_to_string(root.join("summary_paired.csv")).expect("summary_paired.csv");
    assert!(csv.starts_with("variant,reference,metric,pairs,mean,ci95,p_value,significant\n"), "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.contains(",mean,")), "{csv}");
    assert!(csv.contains("sum,mean,fb,2,"), "both seed indices pair up: {csv}");

    // Same reward, same seeds: the first step's rollouts are the same; the loss is not.
    let loss = |variant: &str| -> String {
        let text = std::fs::read_to_string(root.join(format!("runs/{variant}/seed-000/metrics.csv"))).expect("metrics");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        let row: Vec<&str> = lines.next().expect("row 1").split(',').collect();
        let at = |name: &str| header.iter().position(|h| *h == name).expect("column");
        format!("{} {}", row[at("reward_mean")], row[at("loss")])
    };
    let (mean, sum) = (loss("mean"), loss("sum"));
    assert_eq!(mean.split(' ').next(), sum.split(' ').next(), "same rollouts at step 1");
    assert_ne!(mean, sum, "the aggregation changed the loss");

    let out = study(dir.path(), &["summarize", root.to_str().expect("utf-8"), "--reference", "fb"]);
    assert_ok(&out, "summarize --reference fb");
    let md = std::fs::read_to_string(root.join("summary.md")).expect("summary.md");
    assert!(md.contains("## Paired differences against `fb`") && md.contains("| mean |"), "{md}");
    let out = study(dir.path(), &["summarize", root.to_str().expect("utf-8"), "--reference", "nope"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--reference nope: not a variant of the study (variants: mean, sum, fb)"),
        "{}",
        stderr(&out)
    );

    // A reference that is no variant, or a bad loss table, is a study error.
    let bad = text.replace("reference = \"mean\"", "reference = \"nope\"");
    write(dir.path(), "bad.toml", &bad);
    let out = study(dir.path(), &["check", "bad.toml", "--no-tasks"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("summary.reference `nope` is not a variant"), "{}", stderr(&out));
    let bad = text.replace("mode = \"seq-mean-token-sum-norm\"", "mode = \"sideways\"");
    write(dir.path(), "bad.toml", &bad);
    let out = study(dir.path(), &["check", "bad.toml", "--no-tasks"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("variant `sum`: invalid loss settings"), "{}", stderr(&out));
}
