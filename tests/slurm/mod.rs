//! `study slurm`, `study run-one` and `study merge` without a Slurm cluster:
//! the generated script and run manifest, array tasks simulated as concurrent
//! `run-one` processes on one results directory, and merging. The real
//! cluster test is `scripts/slurm-test.sh`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use expect_test::expect;

use crate::cli::{root, stderr, stdout, write};
use crate::study::{assert_ok, proxy_study, study};

/// A study small enough to train in seconds: 2 variants × 2 seeds, 4 steps.
fn tiny_study(dir: &Path) -> PathBuf {
    let rewards = root().join("rewards");
    let variants = format!(
        "[[variants]]\nname = \"v2\"\nfile = \"{}\"\n\n[[variants]]\nname = \"v3\"\nfile = \"{}\"\n",
        rewards.join("codegrep_v2.reward").display(),
        rewards.join("codegrep_v3.reward").display()
    );
    write(dir, "tiny.toml", &proxy_study("tiny", 2, 4, 2, &variants))
}

#[test]
fn slurm_writes_an_array_script_with_absolute_paths_and_a_run_manifest() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().canonicalize().expect("canonical temp dir");
    tiny_study(&dir);
    // Relative paths on the command line: the script must not depend on this working directory.
    let out = study(
        &dir,
        &["slurm", "tiny.toml", "--results", "res", "--partition", "debug", "--time", "5", "--cpus-per-task", "1"],
    );
    assert_ok(&out, "study slurm");
    let script_path = dir.join("res/tiny/slurm/tiny.sbatch");
    assert_eq!(stdout(&out), format!("sbatch {}\n", script_path.display()));
    let bin = Path::new(env!("CARGO_BIN_EXE_study")).canonicalize().expect("binary path");
    let script = fs::read_to_string(&script_path).expect("the script exists");
    let script = script.replace(&bin.display().to_string(), "$STUDY").replace(&dir.display().to_string(), "$TMP");
    expect![[r#"
        #!/bin/bash
        # Slurm array job of study `tiny`, written by `study slurm`: 4 runs (2 variants x 2 seeds).
        # Array task i trains run i of the run manifest beside this file. Finished runs are
        # skipped and checkpointed ones resume, so resubmitting any task is safe:
        #   sbatch --array=3,5 $TMP/res/tiny/slurm/tiny.sbatch
        # When the tasks are done, summarise (it lists runs that did not finish):
        #   $STUDY merge $TMP/tiny.toml --results $TMP/res
        #SBATCH --job-name=study-tiny
        #SBATCH --array=0-3
        #SBATCH --output=$TMP/res/tiny/slurm/logs/tiny-%A_%a.out
        #SBATCH --partition=debug
        #SBATCH --time=5
        #SBATCH --cpus-per-task=1

        set -euo pipefail
        exec $STUDY run-one $TMP/tiny.toml --index "${SLURM_ARRAY_TASK_ID:?run this script with sbatch}" --results $TMP/res
    "#]]
    .assert_eq(&script);
    assert!(dir.join("res/tiny/slurm/logs").is_dir(), "Slurm needs the log directory to exist");

    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("res/tiny/slurm/tiny.runs.json")).expect("run manifest"))
            .expect("run manifest is JSON");
    let runs = manifest["runs"].as_array().expect("runs");
    let rows: Vec<String> = runs
        .iter()
        .map(|r| format!("{} {} {} {} {}", r["index"], r["variant"], r["seed_index"], r["seed"], r["dir"]))
        .collect();
    assert_eq!(
        rows,
        [
            r#"0 "v2" 0 0 "runs/v2/seed-000""#,
            r#"1 "v2" 1 1 "runs/v2/seed-001""#,
            r#"2 "v3" 0 0 "runs/v3/seed-000""#,
            r#"3 "v3" 1 1 "runs/v3/seed-001""#
        ]
    );
    assert_eq!(manifest["study_file"], serde_json::json!(dir.join("tiny.toml")));
    // The shared pieces are prepared at submission, so a broken task source fails here.
    for piece in ["manifest.json", "baseline_bm25.csv", "data/repo.git"] {
        assert!(dir.join("res/tiny").join(piece).exists(), "{piece} is prepared");
    }

    let out = study(&dir, &["slurm", "tiny.toml", "--results", "res", "--only", "3,1", "--max-running", "1"]);
    assert_ok(&out, "study slurm --only");
    let script = fs::read_to_string(&script_path).expect("the script exists");
    assert!(script.contains("#SBATCH --array=1,3%1\n"), "{script}");
    assert!(!script.contains("--partition"), "options not given this time draw no directive:\n{script}");

    let out = study(&dir, &["slurm", "tiny.toml", "--results", "res", "--only", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("run index 4 is out of range: the study has 4 runs (0-3)"), "{}", stderr(&out));
}

#[test]
fn concurrent_array_tasks_then_merge_equal_a_local_run() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    tiny_study(dir);
    // Every task at once on a fresh results directory, as an array job starts: they race to
    // generate the task repository, clone it into the store and write the manifest and baseline.
    let children: Vec<_> = (0..4)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_study"))
                .args(["run-one", "tiny.toml", "--index", &i.to_string(), "--results", "array"])
                .current_dir(dir)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run-one starts")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("run-one finishes");
        assert_ok(&out, &format!("run-one --index {i}"));
        assert!(stderr(&out).contains(&format!("tiny: run {i} is finished")), "{}", stderr(&out));
    }
    let leftovers: Vec<_> = fs::read_dir(dir.join("array/tiny/data"))
        .expect("data dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(leftovers, ["repo.git"], "losing copies of the repository are removed");
    let out = study(dir, &["merge", "tiny.toml", "--results", "array"]);
    assert_ok(&out, "study merge");

    let out = study(dir, &["tiny.toml", "--results", "local", "--jobs", "2"]);
    assert_ok(&out, "local study");
    for file in ["summary.csv", "summary.md", "baseline_bm25.csv", "manifest.json"] {
        let array = fs::read_to_string(dir.join("array/tiny").join(file)).expect(file);
        let local = fs::read_to_string(dir.join("local/tiny").join(file)).expect(file);
        assert_eq!(array, local, "{file} differs between the array and the local run");
    }
    for run in ["v2/seed-000", "v2/seed-001", "v3/seed-000", "v3/seed-001"] {
        let path = |r: &str| dir.join(r).join("tiny/runs").join(run).join("metrics.csv");
        let (array, local) = (fs::read(path("array")).expect("metrics"), fs::read(path("local")).expect("metrics"));
        assert!(array == local, "{run}: metrics.csv differs");
    }
}

#[test]
fn merge_lists_unfinished_runs_and_a_resubmitted_task_completes_the_study() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    tiny_study(dir);
    assert_ok(&study(dir, &["slurm", "tiny.toml", "--results", "res"]), "study slurm");
    for i in 0..4 {
        assert_ok(&study(dir, &["run-one", "tiny.toml", "--index", &i.to_string(), "--results", "res"]), "run-one");
    }
    // Task 2 "failed" at step 2, before its first checkpoint: two metrics rows, no marker.
    let run2 = dir.join("res/tiny/runs/v3/seed-000");
    let metrics = fs::read_to_string(run2.join("metrics.csv")).expect("metrics");
    let truncated: String = metrics.lines().take(3).map(|l| format!("{l}\n")).collect();
    fs::write(run2.join("metrics.csv"), &truncated).expect("truncate metrics");
    fs::remove_file(run2.join("done")).expect("the done marker exists");
    fs::remove_dir_all(run2.join("checkpoints")).expect("the run has checkpoints");
    // Task 1 never ran.
    fs::remove_dir_all(dir.join("res/tiny/runs/v2/seed-001")).expect("remove run 1");

    let out = study(dir, &["merge", "tiny.toml", "--results", "res"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let se = stderr(&out);
    assert!(se.contains("2 of 4 runs are not finished"), "{se}");
    assert!(se.contains("     1  runs/v2/seed-001         not started (no metrics.csv)"), "{se}");
    assert!(se.contains("     2  runs/v3/seed-000         stopped at step 2 of 4 (no checkpoint: restarts)"), "{se}");
    let script = dir.canonicalize().expect("canonical").join("res/tiny/slurm/tiny.sbatch");
    assert!(se.contains(&format!("sbatch --array=1-2 {}", script.display())), "{se}");
    assert!(!dir.join("res/tiny/summary.csv").exists(), "no summary without --partial");

    let out = study(dir, &["merge", "tiny.toml", "--results", "res", "--partial"]);
    assert_ok(&out, "merge --partial");
    let md = fs::read_to_string(dir.join("res/tiny/summary.md")).expect("summary.md");
    assert!(md.contains("1 run(s) have no metrics yet"), "{md}");

    // Resubmitting: finished runs are untouched, the others complete.
    let finished = fs::read(dir.join("res/tiny/runs/v2/seed-000/metrics.csv")).expect("metrics");
    for i in [0, 1, 2] {
        assert_ok(&study(dir, &["run-one", "tiny.toml", "--index", &i.to_string(), "--results", "res"]), "resubmit");
    }
    assert_eq!(fs::read(dir.join("res/tiny/runs/v2/seed-000/metrics.csv")).expect("metrics"), finished);
    assert_ok(&study(dir, &["merge", "tiny.toml", "--results", "res"]), "merge after resubmitting");
    let local = study(dir, &["tiny.toml", "--results", "local"]);
    assert_ok(&local, "local study");
    assert_eq!(
        fs::read_to_string(dir.join("res/tiny/summary.csv")).expect("merged"),
        fs::read_to_string(dir.join("local/tiny/summary.csv")).expect("local"),
        "a resumed run ends where an uninterrupted one does"
    );

    let out = study(dir, &["run-one", "tiny.toml", "--index", "4", "--results", "res"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--index 4 is out of range: study `tiny` has 4 runs (0-3)"), "{}", stderr(&out));
}
