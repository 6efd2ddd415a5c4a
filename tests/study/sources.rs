//! Studies on the real task sources (SWE-bench JSONL, commits mined from a
//! repository) over a small git repository built here, a failing run that
//! does not stop the others, and finished runs that a rerun skips.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::{assert_ok, steps, study, synthetic_study, write};

/// `git ARGS...` in `dir`; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

fn python_file(name: &str, n: usize) -> String {
    (0..n).map(|i| format!("def {name}_{i}(x):\n    return x + {i}\n\n")).collect()
}

/// A repository `widgets/` with a root commit and two fixes, each a task:
/// returns the (parent, commit) pairs of the fixes.
fn widgets_repo(dir: &Path) -> Vec<(String, String)> {
    let repo = dir.join("widgets");
    fs::create_dir_all(repo.join("src")).expect("mkdir");
    git(&repo, &["init", "-q"]);
    for name in ["parser", "render", "config"] {
        fs::write(repo.join(format!("src/{name}.py")), python_file(name, 12)).expect("write");
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "Initial import of the widgets package"]);
    let mut fixes = Vec::new();
    for (files, message) in [
        (&["parser"][..], "Fix the parser crash when a line is empty"),
        (&["render", "config"][..], "Render widgets with the configured default width"),
    ] {
        let parent = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
        for f in files {
            let path = repo.join(format!("src/{f}.py"));
            let text = fs::read_to_string(&path).expect("read").replace("return x + 5", "return x - 5");
            fs::write(&path, text).expect("write");
        }
        git(&repo, &["commit", "-q", "-am", message]);
        fixes.push((parent, git(&repo, &["rev-parse", "HEAD"]).trim().to_owned()));
    }
    fixes
}

fn study_file(tasks: &str) -> String {
    format!(
        r#"seeds = 1
{tasks}
held_out_fraction = 0.5

[policy]
kind = "proxy"

[training]
total_steps = 2
prompts_per_step = 2
group_size = 2
eval_every = 2

[[variants]]
name = "fb"
reward = 'Fb(file)'
"#
    )
}

/// `study check` lists the run; two training steps write both rows and a summary.
fn check_and_train(dir: &Path, file: &str, name: &str) {
    let out = study(dir, &["check", file]);
    assert_ok(&out, "study check");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains(&format!("{name}: 1 variants × 1 seeds = 1 runs")), "{listed}");
    assert_ok(&study(dir, &[file, "--results", "results"]), "study");
    let run = dir.join("results").join(name).join("runs/fb/seed-000");
    assert_eq!(steps(&run.join("metrics.csv")), [1, 2]);
    let summary = fs::read_to_string(dir.join("results").join(name).join("summary.md")).expect("summary.md");
    assert!(summary.contains("| fb |") && summary.contains("BM25"), "{summary}");
}

#[test]
fn study_commits_source_checks_and_trains() {
    let tmp = tempfile::tempdir().expect("tempdir");
    widgets_repo(tmp.path());
    let file = write(tmp.path(), "mined.toml", &study_file("[tasks]\nsource = \"commits\"\nrepo = \"widgets\""));
    check_and_train(tmp.path(), file.to_str().expect("utf-8"), "mined");
}

#[test]
fn study_swebench_source_checks_and_trains_from_a_repos_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let fixes = widgets_repo(dir);
    fs::create_dir(dir.join("repos")).expect("mkdir");
    git(dir, &["clone", "-q", "--bare", "widgets", "repos/acme__widgets.git"]);
    let lines: Vec<String> = fixes
        .iter()
        .enumerate()
        .map(|(i, (parent, commit))| {
            let patch = git(&dir.join("widgets"), &["diff", parent, commit]);
            serde_json::json!({
                "instance_id": format!("acme__widgets-{i}"),
                "repo": "acme/widgets",
                "base_commit": parent,
                "problem_statement": format!("Issue {i}: the widget output is off by ten."),
                "patch": patch,
            })
            .to_string()
        })
        .collect();
    write(dir, "instances.jsonl", &(lines.join("\n") + "\n"));
    let tasks = "[tasks]\nsource = \"swebench\"\npath = \"instances.jsonl\"\nrepos = \"repos\"";
    let file = write(dir, "bench.toml", &study_file(tasks));
    let file = file.to_str().expect("utf-8");
    check_and_train(dir, file, "bench");
    // Nothing was cloned: the study's store links the clone of the repos directory.
    let link = dir.join("results/bench/store/acme__widgets.git");
    assert_eq!(fs::read_link(&link).expect("a link"), dir.join("repos/acme__widgets.git").canonicalize().expect("abs"));
    let entries: Vec<_> = fs::read_dir(dir.join("results/bench/store"))
        .expect("store")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".trees")
        .collect();
    assert_eq!(entries, ["acme__widgets.git"], "nothing else in the store");

    // An instance naming a repository without a clone is refused up front, by name.
    let missing = lines[0].replace("acme/widgets", "acme/gadgets");
    write(dir, "missing.jsonl", &format!("{missing}\n{}\n", lines[1]));
    let file = write(dir, "missing.toml", &study_file(&tasks.replace("instances.jsonl", "missing.jsonl")));
    let out = study(dir, &[file.to_str().expect("utf-8"), "--results", "results"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`acme/gadgets` (1 task(s))") && err.contains("acme__gadgets.git"), "{err}");
    assert!(err.contains("git clone --bare https://github.com/acme/gadgets"), "{err}");
    assert!(!dir.join("results/missing/runs").exists(), "nothing trained");
}

#[test]
fn study_a_failing_run_does_not_stop_the_others_and_finished_runs_are_skipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    // `log(Fb(file))` is -inf for any rollout that misses every file: a
    // non-finite reward stops that run at its first step.
    // It comes first, so with one job the other runs start after it failed.
    let broken = "[[variants]]\nname = \"broken\"\nreward = 'log(Fb(file))'\n\n[[variants]]";
    let text = synthetic_study("mixed", 2, 1).replacen("[[variants]]", broken, 1);
    let file = write(dir, "mixed.toml", &text);
    let file = file.to_str().expect("utf-8");
    let out = study(dir, &[file, "--jobs", "1", "--results", "results"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("1 of 3 runs failed") && err.contains("runs/broken/seed-000"), "{err}");
    let runs = dir.join("results/mixed/runs");
    for good in ["fb", "gated"] {
        assert_eq!(steps(&runs.join(good).join("seed-000/metrics.csv")), [1, 2], "{good}");
        assert!(runs.join(good).join("seed-000/done").is_file(), "{good}");
    }
    assert!(!runs.join("broken/seed-000/done").exists());
    // The summary is still written for the runs that finished.
    assert!(dir.join("results/mixed/summary.md").is_file());

    // A rerun skips the finished runs: their files are not rewritten.
    let metrics = runs.join("fb/seed-000/metrics.csv");
    let before = fs::metadata(&metrics).and_then(|m| m.modified()).expect("mtime");
    let out = study(dir, &[file, "--jobs", "2", "--results", "results"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(fs::metadata(&metrics).and_then(|m| m.modified()).expect("mtime"), before);
}
