//! The grep heuristic on a repository this test builds, with known answers:
//! the file that defines the identifier an issue names wins over files that
//! only mention it, rare terms outweigh common ones, and the commit index
//! holds exactly the files `git ls-tree` lists.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use rewardlab_framework::bm25::{FileIndex, TermCache};
use rewardlab_framework::heuristic::{GrepHeuristic, HeuristicParams, issue_terms};

fn run_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Files of the fixture: `compute_overlap` is defined in `geometry/overlap.py`,
/// called (with more of the issue's words) in `frames/helpers.py`.
fn files() -> Vec<(String, String)> {
    let mut files = vec![
        (
            "geometry/overlap.py".to_string(),
            "import math\n\n\ndef compute_overlap(a, b):\n    return math.inf\n".to_string(),
        ),
        (
            "frames/helpers.py".to_string(),
            "from geometry.overlap import compute_overlap\n\n\ndef empty_frame_overlap(frame):\n    # an empty frame raises\n    return compute_overlap(frame, frame)\n".to_string(),
        ),
        ("geometry/__init__.py".to_string(), "DEFAULT_TOLERANCE = 1e-9\n".to_string()),
        ("assets/logo.png".to_string(), "\u{0}binary".to_string()),
    ];
    for i in 0..8 {
        files.push((
            format!("misc/module_{i}.py"),
            format!("def helper_{i}(frame):\n    return frame  # raises nothing\n"),
        ));
    }
    files
}

#[test]
fn the_defining_file_wins_top_1() {
    let index = GrepHeuristic::from_documents(files(), HeuristicParams::default());
    let issue = "Calling `compute_overlap` on an empty frame raises ZeroDivisionError.";
    assert_eq!(index.locate(issue), ["geometry/overlap.py"]);
    assert_eq!(index.definers("compute_overlap"), ["geometry/overlap.py"]);
    assert_eq!(index.definers("DEFAULT_TOLERANCE"), ["geometry/__init__.py"], "module-level assignment");
    // Without the bonus, the file that calls it and shares more words of the issue wins.
    let mut plain = index.clone();
    plain.set_params(HeuristicParams { definition_bonus: 0.0, ..HeuristicParams::default() });
    assert_eq!(plain.locate(issue), ["frames/helpers.py"]);
    let two = index.top_k(issue, 2);
    assert_eq!(two.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), ["geometry/overlap.py", "frames/helpers.py"]);
    assert!(two[0].score > two[1].score);
}

#[test]
fn changelogs_and_tests_count_for_rarity_but_are_never_the_answer() {
    let mut docs = files();
    // A changelog names everything, and a test defines and calls things: both
    // outscore the defining module, and neither is the file to change.
    docs.push((
        "CHANGELOG.rst".to_string(),
        "- compute_overlap on an empty frame raises ZeroDivisionError (fixed)\n- empty frame overlap\n".to_string(),
    ));
    docs.push((
        "tests/test_overlap.py".to_string(),
        "from geometry.overlap import compute_overlap\n\ndef test_empty_frame():\n    frame = []\n    compute_overlap(frame, frame)  # raises ZeroDivisionError\n".to_string(),
    ));
    let index = GrepHeuristic::from_documents(docs, HeuristicParams::default());
    let issue = "Calling `compute_overlap` on an empty frame raises ZeroDivisionError.";
    let any = HeuristicParams { source_files_only: false, ..HeuristicParams::default() };
    let mut anything = index.clone();
    anything.set_params(any);
    let mut ranked: Vec<String> = anything.top_k(issue, 3).into_iter().map(|h| h.path).collect();
    assert_eq!(ranked.pop().as_deref(), Some("geometry/overlap.py"), "third when anything may be answered");
    ranked.sort();
    assert_eq!(ranked, ["CHANGELOG.rst", "tests/test_overlap.py"]);
    assert_eq!(index.locate(issue), ["geometry/overlap.py"]);
    assert_eq!(
        index.top_k(issue, 2).iter().map(|h| h.path.as_str()).collect::<Vec<_>>(),
        ["geometry/overlap.py", "frames/helpers.py"]
    );
    // Scores are the same either way: the filter only decides what may be answered.
    assert_eq!(index.scores(issue), anything.scores(issue));
}

#[test]
fn rare_terms_weigh_more_and_ubiquitous_ones_nothing() {
    let index = GrepHeuristic::from_documents(files(), HeuristicParams::default());
    assert_eq!(index.idf("nonexistent"), 0.0);
    assert!(index.idf("compute_overlap") > index.idf("frame"));
    assert!(index.idf("frame") > 0.0);
    // `return` is in every Python file but not in the binary one; `raises` in most.
    assert!(index.idf("return") < index.idf("raises"));
    assert!(index.top_k("", 3).is_empty());
    assert!(index.top_k("the of and", 3).is_empty(), "stopwords only");
    let terms = issue_terms("`compute_overlap` fails");
    assert!(terms.contains(&("compute_overlap".to_string(), true)));
    assert!(terms.contains(&("fails".to_string(), false)));
}

/// A repository in `dir` on branch `main` whose one commit holds [`files`]; its id.
fn commit_fixture(dir: &Path) -> String {
    run_git(dir, &["init", "-q", "-b", "main"]);
    for (path, text) in files() {
        let p = dir.join(&path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    run_git(dir, &["add", "-A"]);
    run_git(dir, &["commit", "-q", "-m", "fixture"]);
    run_git(dir, &["rev-parse", "HEAD"]).trim().to_string()
}

#[test]
fn from_commit_indexes_the_tree_and_answers_the_same() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let head = commit_fixture(dir);
    let index = GrepHeuristic::from_commit(dir, &head, HeuristicParams::default()).expect("index");
    let listed = run_git(dir, &["ls-tree", "-r", "--name-only", "HEAD"]);
    let mut want: BTreeSet<&str> = listed.lines().collect();
    want.remove("assets/logo.png");
    assert_eq!(index.paths().iter().map(String::as_str).collect::<BTreeSet<_>>(), want, "binary files are skipped");
    assert_eq!(index.locate("Calling `compute_overlap` on an empty frame"), ["geometry/overlap.py"]);
    let by_branch = GrepHeuristic::from_commit(dir, "refs/heads/main", HeuristicParams::default()).expect("by ref");
    assert_eq!(by_branch.len(), index.len());
    assert!(GrepHeuristic::from_commit(dir, "refs/heads/nope", HeuristicParams::default()).is_err());
}

#[test]
fn a_blob_missing_from_the_store_fails_the_commit_unless_the_cache_skips_it() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let head = commit_fixture(dir);
    // A fresh commit's objects are loose, so one blob can be deleted (a snapshot without it).
    let lost = run_git(dir, &["rev-parse", "HEAD:geometry/__init__.py"]);
    let lost = lost.trim();
    std::fs::remove_file(dir.join(".git/objects").join(&lost[..2]).join(&lost[2..])).expect("a loose object");
    let strict = TermCache::default();
    let err = strict.commit_files(dir, &head).expect_err("a missing blob is an error by default");
    assert!(err.to_string().contains("geometry/__init__.py"), "{err}");
    let skipping = TermCache::skipping_missing();
    let files = skipping.commit_files(dir, &head).expect("skipped");
    assert_eq!(skipping.missing(), 1);
    let lost_file = files.iter().find(|f| f.path == "geometry/__init__.py").expect("still listed");
    assert!(lost_file.terms.is_none(), "read as a file without terms");
    let index = GrepHeuristic::from_files(&files, HeuristicParams::default());
    assert!(!index.paths().iter().any(|p| p == "geometry/__init__.py"));
    assert_eq!(index.locate("Calling `compute_overlap` on an empty frame"), ["geometry/overlap.py"]);
}

#[test]
fn the_study_baseline_row_scores_the_heuristic_answers_task_by_task() {
    use rewardlab_framework::engine::{EngineTask, TaskSet};
    use rewardlab_framework::study::baseline::{heuristic_baseline_with, heuristic_tasks};
    use rewardlab_rewards::rollout::Selection;

    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let head = commit_fixture(dir);
    // A second commit, so that held-out tasks interleave two commits' indexes.
    std::fs::write(dir.join("geometry/extra.py"), "MAGIC_CONSTANT = 7\n").expect("write");
    run_git(dir, &["add", "-A"]);
    run_git(dir, &["commit", "-q", "-m", "extra"]);
    let second = run_git(dir, &["rev-parse", "HEAD"]).trim().to_string();
    let at = |commit: &str, id: &str, prompt: &str, target: &[&str]| EngineTask {
        id: id.into(),
        repo: "fixture".into(),
        commit: commit.to_owned(),
        prompt: prompt.into(),
        target: Selection { files: Some(target.iter().map(|t| t.to_string()).collect()), ..Selection::default() },
    };
    let task = |id: &str, prompt: &str, target: &[&str]| at(&head, id, prompt, target);
    let set = TaskSet {
        tasks: vec![
            task("train", "unused", &["misc/module_0.py"]),
            task("defined", "Calling `compute_overlap` on an empty frame", &["geometry/overlap.py"]),
            at(&second, "later", "MAGIC_CONSTANT is wrong", &["geometry/extra.py"]),
            // The one file answered is right, the second target is missed: P 1, R 1/2.
            task("half", "DEFAULT_TOLERANCE is too small", &["geometry/__init__.py", "frames/helpers.py"]),
            task("nothing", "the of and", &["geometry/overlap.py"]),
        ],
        train: vec![0],
        held_out: vec![1, 2, 3, 4],
    };
    // Task repositories are store names; the caller maps them to git directories.
    let repo_dir = |repo: &str| {
        assert_eq!(repo, "fixture");
        dir.to_path_buf()
    };
    let records = heuristic_tasks(&set, HeuristicParams::default(), &repo_dir).expect("records");
    let answers: Vec<(&str, Vec<&str>)> =
        records.iter().map(|r| (r.task.as_str(), r.files.iter().map(String::as_str).collect())).collect();
    assert_eq!(
        answers,
        [
            ("defined", vec!["geometry/overlap.py"]),
            ("later", vec!["geometry/extra.py"]),
            ("half", vec!["geometry/__init__.py"]),
            ("nothing", vec![])
        ]
    );
    let fb_half = 1.25 * 0.5 / (0.25 + 0.5);
    let scores: Vec<(f64, f64, f64)> = records.iter().map(|r| (r.fb, r.precision, r.recall)).collect();
    assert_eq!(scores, [(1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (fb_half, 1.0, 0.5), (0.0, 0.0, 0.0)]);
    assert!(records.iter().all(|r| r.baseline == "grep heuristic top-1" && r.repo == "fixture"));
    let row = heuristic_baseline_with(&set, &repo_dir).expect("row");
    assert_eq!((row.name.as_str(), row.tasks), ("grep heuristic top-1", 4));
    assert!((row.fb_mean - (2.0 + fb_half) / 4.0).abs() < 1e-12, "{row:?}");
    assert!((row.precision - 0.75).abs() < 1e-12 && (row.recall - 2.5 / 4.0).abs() < 1e-12, "{row:?}");
    assert_eq!((row.fb_median, row.fb_ge_0_8), ((1.0 + fb_half) / 2.0, 0.75));
}
