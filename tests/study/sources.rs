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
    // The run's two timed steps, by phase, beside the summary.
    let phases = fs::read_to_string(dir.join("results").join(name).join("phases.md")).expect("phases.md");
    assert!(phases.contains("| fb | 1 | 2 | "), "{phases}");
}

#[test]
fn study_commits_source_checks_and_trains() {
    let tmp = tempfile::tempdir().expect("tempdir");
    widgets_repo(tmp.path());
    let file = write(tmp.path(), "mined.toml", &study_file("[tasks]\nsource = \"commits\"\nrepo = \"widgets\""));
    check_and_train(tmp.path(), file.to_str().expect("utf-8"), "mined");
}

/// A commits source over a snapshot that lacks a blob: the study stops naming the commit, unless
/// `[sandbox] skip_missing_blobs` lets the miner skip it, which `study check` reports.
#[test]
fn study_commits_source_skips_a_commit_whose_blob_is_missing_only_when_asked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let fixes = widgets_repo(dir);
    let repo = dir.join("widgets");
    let path = repo.join("src/render.py");
    fs::write(&path, fs::read_to_string(&path).expect("read").replace("return x + 7", "return x - 7")).expect("write");
    git(&repo, &["commit", "-q", "-am", "Round the rendered width down to whole cells"]);
    // A bare snapshot (the store links a bare repository instead of cloning it) without the
    // parser module as imported, which only the first fix's diff reads.
    git(dir, &["clone", "-q", "--bare", "widgets", "widgets.git"]);
    let blob = git(&repo, &["rev-parse", &format!("{}:src/parser.py", fixes[0].0)]).trim().to_owned();
    fs::remove_file(dir.join("widgets.git/objects").join(&blob[..2]).join(&blob[2..])).expect("a loose object");

    let tasks = "[tasks]\nsource = \"commits\"\nrepo = \"widgets.git\"";
    let strict = write(dir, "strict.toml", &study_file(tasks));
    let out = study(dir, &["check", strict.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("diffing commit {}", fixes[0].1)), "{err}");

    let lenient = write(dir, "lenient.toml", &(study_file(tasks) + "\n[sandbox]\nskip_missing_blobs = true\n"));
    let out = study(dir, &["check", lenient.to_str().expect("utf-8")]);
    assert_ok(&out, "study check");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("2 commit(s), 0 pull request(s); 1 commit(s) skipped for objects missing"), "{report}");
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
        .filter(|name| name != ".trees" && name != ".index")
        .collect();
    assert_eq!(entries, ["acme__widgets.git"], "nothing else in the store");
    // What the runs' greps indexed and searched is kept for the study's next process (a rerun,
    // a Slurm task).
    let index = dir.join("results/bench/store/.index/acme__widgets.trigrams");
    assert!(index.is_file(), "the content index is persisted under the store");
    assert!(index.with_extension("grepmemo").is_file(), "so is the grep memo");
    assert!(dir.join("results/bench/store/.index/tool-results").is_file(), "and the tool results");
    let phases = fs::read_to_string(dir.join("results/bench/phases.md")).expect("phases.md");
    assert!(phases.contains("## Tool calls"), "{phases}");

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

/// A study of `sources` (training tables and an `[eval]` table) without a split of its own.
fn eval_study(sources: &str) -> String {
    study_file(sources).replace("held_out_fraction = 0.5\n", "")
}

/// The widgets repository, its bare clone in `repos/`, and one SWE-bench
/// line per fix (instance `acme__widgets-<i>` at the fix's parent).
fn widgets_instances(dir: &Path) -> Vec<String> {
    let fixes = widgets_repo(dir);
    fs::create_dir(dir.join("repos")).expect("mkdir");
    git(dir, &["clone", "-q", "--bare", "widgets", "repos/acme__widgets.git"]);
    fixes
        .iter()
        .enumerate()
        .map(|(i, (parent, commit))| {
            serde_json::json!({
                "instance_id": format!("acme__widgets-{i}"),
                "repo": "acme/widgets",
                "base_commit": parent,
                "problem_statement": format!("Issue {i}: the widget output is off by ten."),
                "patch": git(&dir.join("widgets"), &["diff", parent, commit]),
            })
            .to_string()
        })
        .collect()
}

const MINED: &str = "[[tasks]]\nsource = \"commits\"\nrepo = \"repos/acme__widgets.git\"\n";
const EVAL: &str = "[eval]\nsource = \"swebench\"\npath = \"eval.jsonl\"\nrepos = \"repos\"\n";

#[test]
fn study_an_eval_source_is_held_out_and_leaking_training_tasks_are_dropped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let instances = widgets_instances(dir);
    // Instance 0 asks for `src/parser.py` at the root commit: the mined fix of the parser is
    // its own fix, after its base, so training on it would leak the answer. The second fix
    // (render and config) changes other files and stays.
    write(dir, "eval.jsonl", &format!("{}\n", instances[0]));
    let synthetic = "[[tasks]]\nsource = \"synthetic\"\nseed = 1\nfiles = 40\ncommits = 2\ntasks = 6\n";
    let file = write(dir, "mix.toml", &eval_study(&format!("{MINED}{synthetic}{EVAL}")));
    let file = file.to_str().expect("utf-8");
    let out = study(dir, &["check", file, "--results", "results"]);
    assert_ok(&out, "study check");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("tasks[0]") && report.contains("2 task(s)  commits of"), "{report}");
    assert!(report.contains("tasks[1]") && report.contains("6 task(s)  synthetic"), "{report}");
    assert!(report.contains("eval           1 task(s)  swebench"), "{report}");
    assert!(report.contains("leakage: 1 training task(s) dropped for 1 evaluation instance(s)"), "{report}");
    assert!(report.contains("acme__widgets-0: 1 (acme__widgets@"), "{report}");
    // Every synthetic task trains (no split beside `[eval]`), the held-out task is the instance.
    assert!(report.contains("7 training task(s), 1 held out"), "{report}");
    // Mined once: the rerun reads the cache.
    let again = study(dir, &["check", file, "--results", "results"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("(from the cache)"), "{}", stdout_of(&again));

    assert_ok(&study(dir, &[file, "--results", "results"]), "study");
    let metrics = fs::read_to_string(dir.join("results/mix/runs/fb/seed-000/metrics.csv")).expect("metrics");
    assert_eq!(steps(&dir.join("results/mix/runs/fb/seed-000/metrics.csv")), [1, 2], "{metrics}");
    let baseline = fs::read_to_string(dir.join("results/mix/baseline_bm25.csv")).expect("baseline");
    // The baselines score the evaluation source: one task.
    assert!(baseline.lines().nth(1).is_some_and(|row| row.ends_with(",1")), "{baseline}");
}

/// `locate`'s mean F_β over `predictions` equals the held-out F_β of the run's last evaluation
/// (the same greedy episodes of the same checkpoint).
fn assert_locate_scores_the_last_evaluation(run: &Path, predictions: &[serde_json::Value]) {
    let metrics = fs::read_to_string(run.join("metrics.csv")).expect("metrics");
    let header: Vec<&str> = metrics.lines().next().expect("header").split(',').collect();
    let last: Vec<&str> = metrics.lines().last().expect("row").split(',').collect();
    let column = header.iter().position(|h| *h == "eval_fb_mean").expect("eval_fb_mean");
    let study_fb: f64 = last[column].parse().expect("a number");
    let locate_fb = predictions.iter().map(|p| p["fb"].as_f64().expect("fb")).sum::<f64>() / predictions.len() as f64;
    assert!((study_fb - locate_fb).abs() < 1e-12, "study {study_fb} vs locate {locate_fb}");
}

/// The JSON values of a JSONL file, one per line.
fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// `rewardlab locate` of `run` over `eval.jsonl` and the mirrors in `repos`, in `dir`.
fn locate(dir: &Path, run: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rewardlab"))
        .args(["locate", "--run", run.to_str().expect("utf-8"), "--instances", "eval.jsonl", "--repos", "repos"])
        .args(extra)
        .current_dir(dir)
        .output()
        .expect("rewardlab runs")
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn study_bad_sources_stop_before_training_naming_the_repository_the_commit_and_the_fix() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let instances = widgets_instances(dir);
    // Exit 2 for a source that fails when prepared, 1 for a study file that does not check.
    let refused_with = |code: i32, name: &str, text: &str| -> String {
        let file = write(dir, &format!("{name}.toml"), text);
        let out = study(dir, &[file.to_str().expect("utf-8"), "--results", "results"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{name}: {err}");
        assert!(!dir.join("results").join(name).join("runs").exists(), "{name}: nothing trained");
        err
    };
    let refused = |name: &str, text: &str| refused_with(2, name, text);

    // Every mined task leaks one of the two instances: nothing is left to train on.
    write(dir, "eval.jsonl", &(instances.join("\n") + "\n"));
    let err = refused("leaky", &eval_study(&format!("{MINED}{EVAL}")));
    assert!(err.contains("no training task is left: the leakage rule dropped all 2 training task(s)"), "{err}");
    assert!(err.contains("until = "), "the fix is named: {err}");

    // An instance whose base commit the clone lacks.
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let parent = serde_json::from_str::<serde_json::Value>(&instances[1]).expect("json")["base_commit"]
        .as_str()
        .expect("base")
        .to_owned();
    write(dir, "eval.jsonl", &format!("{}\n", instances[1].replace(&parent, missing)));
    let synthetic = "[[tasks]]\nsource = \"synthetic\"\nseed = 1\nfiles = 40\ncommits = 2\ntasks = 6\n";
    let err = refused("nocommit", &eval_study(&format!("{synthetic}{EVAL}")));
    assert!(err.contains(missing) && err.contains("acme__widgets-1") && err.contains("fetch"), "{err}");

    // An evaluation repository that is not there.
    write(dir, "eval.jsonl", &format!("{}\n", instances[0].replace("acme/widgets", "acme/gadgets")));
    let err = refused("norepo", &eval_study(&format!("{synthetic}{EVAL}")));
    assert!(err.contains("eval: 1 repositor(ies)") && err.contains("acme__gadgets.git"), "{err}");
    assert!(err.contains("git clone --bare https://github.com/acme/gadgets"), "{err}");

    // A mined range with no usable commit names the repository, the range and the filter.
    let late = format!("{MINED}since = \"2100-01-01\"\n");
    let err = refused("empty", &eval_study(&late).replace("[[tasks]]", "[tasks]"));
    assert!(err.contains("tasks: mining") && err.contains("no usable commits") && err.contains("HEAD"), "{err}");

    // A split beside `[eval]` is refused when the file is checked.
    write(dir, "eval.jsonl", &format!("{}\n", instances[0]));
    let err = refused_with(1, "split", &eval_study(&format!("{MINED}held_out_fraction = 0.3\n{EVAL}")));
    assert!(err.contains("held_out_fraction has no effect"), "{err}");
}

#[test]
fn locate_runs_a_trained_run_over_instances_and_scores_it_beside_bm25() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let instances = widgets_instances(dir);
    // Issue texts that name the functions the fixes change: BM25 top-2 finds every gold file.
    let texts =
        ["parser_5 returns x - 5 where x + 5 is expected", "render_5 and config_5 return x - 5 instead of x + 5"];
    let lines: Vec<String> = instances
        .iter()
        .zip(texts)
        .map(|(line, text)| {
            let mut value: serde_json::Value = serde_json::from_str(line).expect("json");
            value["problem_statement"] = text.into();
            value.to_string()
        })
        .collect();
    write(dir, "eval.jsonl", &(lines.join("\n") + "\n"));
    let synthetic = "[[tasks]]\nsource = \"synthetic\"\nseed = 1\nfiles = 40\ncommits = 2\ntasks = 6\n";
    let file = write(dir, "loc.toml", &eval_study(&format!("{synthetic}{EVAL}")));
    assert_ok(&study(dir, &[file.to_str().expect("utf-8"), "--results", "results"]), "study");

    let run = dir.join("results/loc/runs/fb/seed-000");
    let out = locate(dir, &run, &["--out", "predictions.jsonl"]);
    assert_ok(&out, "rewardlab locate");
    let table = stdout_of(&out);
    // BM25 ranks only files that share a term with the text: it names exactly the gold files.
    assert!(table.contains("| all | BM25 top-2 | 2 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 | 0.00 |"), "{table}");
    assert!(table.contains("| all | policy | 2 |"), "{table}");

    // One prediction per instance, with its files, turns and scores.
    let predictions = read_jsonl(&dir.join("predictions.jsonl"));
    assert_eq!(predictions.len(), 2);
    assert_eq!(predictions[0]["instance_id"], "acme__widgets-0");
    assert!(predictions.iter().all(|p| p["files"].is_array() && p["turns"].as_u64().is_some_and(|t| t >= 1)));
    // The same greedy episodes as the study's last evaluation: the same held-out F_β.
    assert_locate_scores_the_last_evaluation(&run, &predictions);

    // `--reach`: each issue names a function of each gold file, so a grep of that name (one of
    // the policy's first-turn calls) names the gold file and nothing else. What the episode saw
    // and answered agrees with its rollouts and predictions.
    let out = locate(dir, &run, &["--rollouts", "rollouts.jsonl", "--reach", "reach.jsonl"]);
    assert_ok(&out, "rewardlab locate --reach");
    let reach = read_jsonl(&dir.join("reach.jsonl"));
    let rollouts = read_jsonl(&dir.join("rollouts.jsonl"));
    assert_eq!(reach.len(), 2);
    assert_eq!(reach[0]["reachable"], serde_json::json!(["src/parser.py"]), "{reach:?}");
    assert_eq!(reach[1]["reachable"], serde_json::json!(["src/config.py", "src/render.py"]), "{reach:?}");
    for ((r, rollout), prediction) in reach.iter().zip(&rollouts).zip(&predictions) {
        assert!(r["calls"].as_u64().is_some_and(|n| n >= 2), "{r}");
        let name = if r["instance_id"] == "acme__widgets-0" { "parser_5" } else { "render_5" };
        let reaching = r["reaching"].as_array().expect("reaching calls");
        let grep = reaching.iter().find(|c| c["call"]["tool"] == "grep" && c["call"]["args"]["pattern"] == name);
        assert!(grep.is_some_and(|c| c["files"] == 1 && c["complete"] == true), "a grep of {name}: {r}");
        let gold: Vec<&str> = r["reachable"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
        let mut seen: Vec<&str> = rollout["turns"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t.as_array().unwrap())
            .flat_map(|call| call["entities"].as_array().unwrap())
            .map(|e| e.as_str().unwrap().split(':').next().unwrap())
            .filter(|p| gold.contains(p))
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(r["seen"], serde_json::json!(seen), "{r}");
        assert_eq!(r["answered"], serde_json::json!(prediction["recall"].as_f64().unwrap() > 0.0), "{r}");
    }
    let table = stdout_of(&out);
    assert!(table.contains("| all | 2 | 2 | 2 |"), "both reachable, by a call naming one or two files: {table}");

    // `--ranking`: every file the answer could name, best first; the answer is its first file(s),
    // and the gold rank and the table agree with the candidates.
    let out = locate(dir, &run, &["--ranking", "ranking.jsonl"]);
    assert_ok(&out, "rewardlab locate --ranking");
    let ranking = read_jsonl(&dir.join("ranking.jsonl"));
    assert_eq!(ranking.len(), 2);
    let mut first = 0;
    for (r, prediction) in ranking.iter().zip(&predictions) {
        assert_eq!(r["instance_id"], prediction["instance_id"]);
        let candidates = r["candidates"].as_array().expect("candidates");
        let paths: Vec<&str> = candidates.iter().map(|c| c["path"].as_str().unwrap()).collect();
        let answered: Vec<&str> = prediction["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        assert!(!answered.is_empty() && paths.starts_with(&answered), "{paths:?} vs {answered:?}");
        let scores: Vec<f64> = candidates.iter().map(|c| c["score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {scores:?}");
        assert!(candidates.iter().all(|c| c["features"].as_object().is_some_and(|f| f.len() == 25)), "{r}");
        let gold: Vec<&str> = r["gold"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
        let rank = paths.iter().position(|p| gold.contains(p)).map(|i| i as u64 + 1);
        assert_eq!(r["gold_rank"].as_u64(), rank, "{r}");
        first += usize::from(rank == Some(1));
    }
    let table = stdout_of(&out);
    assert!(table.contains("| scope | instances | gold among candidates | ranked first |"), "{table}");
    assert!(table.contains(&format!("| all | 2 | 2 | {first} |")), "both gold files are candidates: {table}");

    // A snapshot without one blob (the parser as instance 1's base has it): BM25 cannot read the
    // commit, so locate fails, unless it skips what the store lacks.
    let mirror = dir.join("repos/acme__widgets.git");
    let base: serde_json::Value = serde_json::from_str(&lines[1]).expect("json");
    let base = base["base_commit"].as_str().expect("a base commit");
    let lost = git(&mirror, &["rev-parse", &format!("{base}:src/parser.py")]);
    let lost = lost.trim();
    fs::remove_file(mirror.join("objects").join(&lost[..2]).join(&lost[2..])).expect("a loose object");
    let strict = locate(dir, &run, &[]);
    assert!(!strict.status.success(), "a missing blob is an error by default");
    assert!(String::from_utf8_lossy(&strict.stderr).contains("src/parser.py"), "names the file");
    let skipping = locate(dir, &run, &["--skip-missing-blobs"]);
    assert_ok(&skipping, "rewardlab locate --skip-missing-blobs");
    let table = stdout_of(&skipping);
    assert!(table.contains("| all | BM25 top-2 | 2 |") && table.contains("| all | policy | 2 |"), "{table}");
}

#[test]
fn locate_runs_a_trained_qwen3_run_with_its_study_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let instances = widgets_instances(dir);
    write(dir, "eval.jsonl", &(instances.join("\n") + "\n"));
    // One GRPO step of a tiny random Qwen3 (written on first use) on synthetic tasks; the
    // instances are its evaluation source.
    let file = r#"name = "qloc"
seeds = 1

[[tasks]]
source = "synthetic"
seed = 1
files = 40
commits = 1
tasks = 2

[eval]
source = "swebench"
path = "eval.jsonl"
repos = "repos"

[policy]
kind = "qwen3"
model = "tiny"
tiny_if_missing = true
lora_rank = 4
lora_alpha = 8
max_new_tokens = 16
max_completion_tokens = 32
gradient_checkpointing = false

[training]
total_steps = 1
prompts_per_step = 1
group_size = 2
max_turns = 2
eval_every = 1
checkpoint_every = 1

[training.optim]
lr = 1e-3
schedule = { kind = "constant" }

[[variants]]
name = "fb"
reward = 'Fb(file)'
"#;
    let file = write(dir, "qloc.toml", file);
    let file = file.to_str().expect("utf-8");
    assert_ok(&study(dir, &[file, "--results", "results"]), "study");
    let run = dir.join("results/qloc/runs/fb/seed-000");
    let locate = |extra: &[&str]| locate(dir, &run, extra);
    // Without the study file the checkpoint is not a proxy state, and the error says what to pass.
    let out = locate(&[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass the run's study file with --study"), "{out:?}");

    // `--reach` runs a proxy's candidate calls; a Qwen3 run has none to offer.
    let out = locate(&["--study", file, "--reach", "reach.jsonl"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a Qwen3 run"), "{out:?}");

    let out = locate(&["--study", file, "--out", "predictions.jsonl", "--rollouts", "rollouts.jsonl"]);
    assert_ok(&out, "rewardlab locate --study");
    let table = stdout_of(&out);
    assert!(table.contains("| all | policy | 2 |") && table.contains("| all | BM25 top-2 | 2 |"), "{table}");
    let predictions = read_jsonl(&dir.join("predictions.jsonl"));
    assert_eq!(predictions.len(), 2);
    assert!(predictions.iter().all(|p| p["turns"].as_u64().is_some_and(|t| (1..=2).contains(&t))), "{predictions:?}");
    // The rollouts are the episodes themselves: one per instance, each with its target.
    let rollouts = read_jsonl(&dir.join("rollouts.jsonl"));
    assert_eq!(rollouts.len(), 2);
    assert!(rollouts.iter().all(|r| r["target"]["files"].is_array() && r["turns"].is_array()), "{rollouts:?}");
    // Greedy episodes of the same checkpoint: locate scores what the study's evaluation scored.
    assert_locate_scores_the_last_evaluation(&run, &predictions);
}
