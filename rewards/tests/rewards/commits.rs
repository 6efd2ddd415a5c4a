//! Commit mining (gix) against `git` itself: a throwaway repository with
//! commits of every kind, and targets checked against `git diff parent commit`
//! parsed by the crate's own diff parser.

use std::path::Path;
use std::process::Command;

use rewardlab_rewards::diff::patch_targets;
use rewardlab_rewards::tasks::{CommitOptions, RepoRef, mine_commits};

fn git(dir: &Path, args: &[&str]) -> String {
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
        .expect("the git binary runs (it is the oracle of this test)");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 git output")
}

fn write(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().expect("file has a parent")).expect("mkdir");
    std::fs::write(p, text).expect("write file");
}

fn lines(n: usize, tag: &str) -> String {
    (1..=n).map(|i| format!("{tag} line {i}\n")).collect()
}

fn commit(dir: &Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"]).trim().to_string()
}

#[test]
fn mined_targets_match_git_diff() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    write(dir, "pkg/core.py", &lines(40, "core"));
    write(dir, "pkg/util.py", &lines(12, "util"));
    write(dir, "pkg/old_name.py", &lines(20, "old"));
    write(dir, "README.md", "readme\n");
    write(dir, "tests/test_core.py", &lines(5, "test"));
    commit(dir, "Initial import of the package sources");

    // Two nearby edits (one hunk) and a far one in core.py, plus a test edit.
    let core = lines(40, "core").replace("core line 5\n", "five\n").replace("core line 9\n", "nine\n");
    let core = core.replace("core line 30\n", "core line 30\ninserted\n");
    write(dir, "pkg/core.py", &core);
    write(dir, "tests/test_core.py", &lines(6, "test"));
    let edit = commit(dir, "Fix the parser when headers are empty\n\nLonger body text.");

    // Rename with an edit, and delete util.py.
    let renamed = lines(20, "old").replace("old line 10\n", "ten\n");
    std::fs::remove_file(dir.join("pkg/old_name.py")).expect("rm");
    write(dir, "pkg/new_name.py", &renamed);
    std::fs::remove_file(dir.join("pkg/util.py")).expect("rm");
    let rename = commit(dir, "Rename the old module and drop the unused util helpers");

    // Filtered out: trivial message, tests/docs only, an added file.
    write(dir, "pkg/core.py", &core.replace("nine\n", "NINE\n"));
    commit(dir, "typo");
    write(dir, "tests/test_core.py", &lines(7, "test"));
    write(dir, "README.md", "readme v2\n");
    commit(dir, "Extend the test suite and the docs for the parser");
    write(dir, "pkg/fresh.py", "x = 1\n");
    write(dir, "pkg/core.py", &core.replace("nine\n", "nine!\n"));
    commit(dir, "Add a fresh module alongside a core tweak");

    // A merge commit.
    git(dir, &["checkout", "-q", "-b", "side", "HEAD~1"]);
    write(dir, "pkg/new_name.py", &renamed.replace("old line 1\n", "one\n"));
    commit(dir, "Side branch change to the renamed module");
    git(dir, &["checkout", "-q", "main"]);
    git(dir, &["merge", "-q", "--no-ff", "-m", "Merge the side branch into main", "side"]);

    let tasks = mine_commits(dir, &CommitOptions::default()).expect("mining works");
    let mut subjects: Vec<&str> = tasks.iter().map(|t| t.prompt.lines().next().unwrap_or("")).collect();
    subjects.sort_unstable();
    assert_eq!(
        subjects,
        vec![
            "Fix the parser when headers are empty",
            "Rename the old module and drop the unused util helpers",
            "Side branch change to the renamed module",
        ],
        "trivial, test/doc-only, file-adding and merge commits are skipped"
    );
    for task in &tasks {
        let sha = &task.id[task.id.len() - 12..];
        let full = git(dir, &["rev-parse", sha]).trim().to_string();
        assert_eq!(task.base_commit, git(dir, &["rev-parse", &format!("{full}^")]).trim());
        assert_eq!(task.repo, RepoRef::Path(dir.to_path_buf()));
        assert_eq!(task.targets.functions, None);
        let patch = git(dir, &["diff", "-M", &task.base_commit, &full, "--", "pkg"]);
        let mut want = patch_targets(&patch).expect("git's diff parses");
        want.files.sort();
        want.line_ranges.sort();
        let mut got = task.targets.line_ranges.clone();
        got.sort();
        assert_eq!(task.targets.files, want.files, "{}", task.prompt);
        assert_eq!(got, want.line_ranges, "{}", task.prompt);
    }
    let edit_task = tasks.iter().find(|t| t.id.ends_with(&edit[..12])).expect("edit task");
    let shown: Vec<String> = edit_task.targets.line_ranges.iter().map(ToString::to_string).collect();
    assert_eq!(shown, vec!["pkg/core.py:5-9", "pkg/core.py:30-30"]);
    let rename_task = tasks.iter().find(|t| t.id.ends_with(&rename[..12])).expect("rename task");
    assert_eq!(rename_task.targets.files, vec!["pkg/old_name.py", "pkg/util.py"]);
}
