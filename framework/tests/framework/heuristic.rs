//! The grep heuristic on a repository this test builds, with known answers:
//! the file that defines the identifier an issue names wins over files that
//! only mention it, rare terms outweigh common ones, and the commit index
//! holds exactly the files `git ls-tree` lists.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

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

#[test]
fn from_commit_indexes_the_tree_and_answers_the_same() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    run_git(dir, &["init", "-q", "-b", "main"]);
    for (path, text) in files() {
        let p = dir.join(&path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    run_git(dir, &["add", "-A"]);
    run_git(dir, &["commit", "-q", "-m", "fixture"]);
    let head = run_git(dir, &["rev-parse", "HEAD"]).trim().to_string();
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
