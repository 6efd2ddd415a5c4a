//! A study killed with SIGKILL in the middle of a run and started again ends
//! with exactly the rows of an uninterrupted run: none lost, none repeated.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{assert_ok, steps, study, synthetic_study, write};

const STEPS: usize = 12;
const EVERY: usize = 2;

/// Lines of a file that may be mid-write (0 when it does not exist yet).
fn complete_rows(path: &Path) -> usize {
    fs::read_to_string(path).map_or(0, |t| t.lines().count().saturating_sub(1))
}

fn checkpoint_steps(run_dir: &Path) -> Vec<usize> {
    let Ok(entries) = fs::read_dir(run_dir.join("checkpoints")) else { return Vec::new() };
    let mut out: Vec<usize> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("step-")?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn study_sigkill_mid_run_then_rerun_equals_an_uninterrupted_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let file = write(dir, "resume.toml", &synthetic_study("resume", STEPS, EVERY));
    let file = file.to_str().expect("utf-8 path");
    let run = dir.join("killed/resume/runs/fb/seed-000");
    let metrics = run.join("metrics.csv");

    // Start, and kill once the first run is past a checkpoint with rows after it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_study"))
        .args([file, "--jobs", "1", "--results", "killed"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the study binary starts");
    let start = Instant::now();
    let rows_at_kill = loop {
        let rows = complete_rows(&metrics);
        let ckpt = checkpoint_steps(&run).last().copied();
        if ckpt.is_some_and(|c| rows > c) && rows + 4 < STEPS {
            child.kill().expect("SIGKILL");
            break rows;
        }
        assert!(rows + 4 < STEPS, "the run got to {rows} of {STEPS} steps before it could be killed mid-run");
        assert!(start.elapsed() < Duration::from_secs(300), "no checkpoint after 300 s");
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("the study exited ({status}) before it was killed");
        }
        sleep(Duration::from_millis(5));
    };
    let status = child.wait().expect("reap");
    assert!(!status.success(), "killed, not finished: {status}");
    let killed_rows = steps(&metrics).len();
    assert!(killed_rows >= rows_at_kill && killed_rows < STEPS, "{killed_rows} rows after the kill");
    let resumed_from = *checkpoint_steps(&run).last().expect("a checkpoint survived");
    assert!(resumed_from > 0 && resumed_from < STEPS);
    let timings_before = fs::read_to_string(run.join("timings.csv")).expect("timings.csv");

    // Start again: it resumes and finishes every run.
    assert_ok(&study(dir, &[file, "--jobs", "2", "--results", "killed"]), "the rerun");
    // The same study, never interrupted.
    assert_ok(&study(dir, &[file, "--jobs", "1", "--results", "clean"]), "the uninterrupted run");

    for variant in ["fb", "gated"] {
        let rel = format!("resume/runs/{variant}/seed-000");
        let resumed = dir.join("killed").join(&rel);
        let clean = dir.join("clean").join(&rel);
        let got = steps(&resumed.join("metrics.csv"));
        assert_eq!(got, (1..=STEPS).collect::<Vec<_>>(), "{variant}: every step exactly once");
        assert_eq!(steps(&resumed.join("timings.csv")), got, "{variant}: timings.csv");
        // Deterministic columns only live in metrics.csv: byte-identical.
        let a = fs::read_to_string(resumed.join("metrics.csv")).expect("metrics");
        let b = fs::read_to_string(clean.join("metrics.csv")).expect("metrics");
        assert_eq!(a, b, "{variant}: resumed metrics differ from the uninterrupted run");
        assert!(resumed.join("done").is_file());
        // Old checkpoints are pruned: only the final one remains.
        assert_eq!(checkpoint_steps(&resumed), [STEPS], "{variant}");
    }
    // The killed run continued from its checkpoint rather than starting over:
    // the wall-clock rows up to the checkpoint are the first process's own.
    let timings_after = fs::read_to_string(run.join("timings.csv")).expect("timings.csv");
    let head = |t: &str| t.lines().take(resumed_from + 1).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(head(&timings_after), head(&timings_before), "rows 1..={resumed_from} were recomputed");
    for out in ["killed", "clean"] {
        let summary = dir.join(out).join("resume/summary.csv");
        let text = fs::read_to_string(&summary).unwrap_or_else(|e| panic!("{}: {e}", summary.display()));
        assert!(text.lines().count() >= 3, "a row per variant and the baseline: {text}");
    }
}
