//! grep, glob and read agree with `git grep -n`, `git ls-files` and `git show REV:PATH` on a
//! generated repository at several commits, on both tree kinds.

use std::path::Path;

use rewardlab_sandbox::{RepoStore, Status, Tree, TreeKind};
use serde_json::json;

use crate::sandbox::helpers::{Fixture, call, generated_repo, git, git_command, unlimited_output};

/// (pattern, our `path` filter, the equivalent git pathspecs, case-insensitive). Patterns stay
/// within what Rust regex and PCRE agree on for this data (ASCII classes, no Unicode folding).
const GREPS: &[(&str, Option<&str>, &[&str], bool)] = &[
    (r"def [a-z_]+_[0-9]+\(", None, &[], false),
    ("TODO|FIXME", None, &[], false),
    ("import", Some("*.py"), &[":(glob)**/*.py"], false),
    ("class [A-Z][a-z]+[0-9]+", Some("src/**"), &[":(glob)src/**"], false),
    ("content-length", None, &[], true),
    ("value_[0-9]+ = compute", Some("src/pkg1"), &[":(glob)src/pkg1/**"], false),
    ("^$", Some("tests/*.py"), &[":(glob)tests/*.py"], false),
    ("ünïcode|données", None, &[], false),
    (r"\)$", None, &[], false),
    ("request", Some("*.sh"), &[":(glob)**/*.sh"], false),
    ("binary", None, &[], false),
    ("no_such_text_anywhere", None, &[], false),
];

const GLOBS: &[&str] = &[
    "*",
    "**",
    "*.py",
    "**/*.py",
    "src/*",
    "src/*/*.py",
    "src/**/*.py",
    "src/**",
    "**/test_*.py",
    "docs/*.md",
    "src/pkg?/mod[0-2].py",
    "**/ünï.md",
    "docs_link",
    "src/current.py",
    "scripts/*.sh",
    "no_such_dir/*",
];

#[test]
fn grep_glob_and_read_agree_with_git_at_several_commits() {
    let fx = Fixture::new();
    let source = fx.path("acme/oracle");
    let ids = generated_repo(&source, 7, 6);
    let store = RepoStore::open(fx.path("store")).expect("store opens");
    let repo = store.repo(source.to_str().expect("utf-8 temp path")).expect("clone");
    let limits = unlimited_output();
    let mut compared = 0;
    for (n, id) in [&ids[0], &ids[3], &ids[5]].into_iter().enumerate() {
        let index = fx.path(&format!("index-{n}"));
        git_command(&source).env("GIT_INDEX_FILE", &index).args(["read-tree", id]).status().expect("read-tree runs");
        for kind in [TreeKind::View, TreeKind::Worktree] {
            let tree = repo.tree(id, kind).expect("tree");
            assert_eq!(paths(&tree), ls_files(&source, &index, &[]), "{kind} listing at {id}");
            for pattern in GLOBS {
                let result = call(&tree, &limits, json!({"tool": "glob", "args": {"pattern": pattern}}));
                let pathspec = format!(":(glob){pattern}");
                let expected = ls_files(&source, &index, &[&pathspec]);
                assert_eq!(result.entities, expected, "glob {pattern:?} on {kind} at {id}");
                if !expected.is_empty() {
                    assert_eq!(result.output, expected.join("\n"));
                }
                compared += 1;
            }
            for (pattern, filter, pathspecs, insensitive) in GREPS {
                let result = call(
                    &tree,
                    &limits,
                    json!({"tool": "grep", "args": {"pattern": pattern, "path": filter, "case_sensitive": !insensitive}}),
                );
                assert_eq!(result.status, Status::Ok, "{}", result.output);
                let ours: Vec<&str> = result.output.lines().filter(|l| !l.starts_with('[')).collect();
                let expected = git_grep(&source, id, pattern, pathspecs, *insensitive);
                assert_eq!(ours, expected, "grep {pattern:?} {filter:?} on {kind} at {id}");
                let entities: Vec<String> =
                    ours.iter().map(|l| l.splitn(3, ':').take(2).collect::<Vec<_>>().join(":")).collect();
                assert_eq!(result.entities, entities);
                compared += 1;
            }
            for path in regular_files(&source, id) {
                let expected = git(&source, &["show", &format!("{id}:{path}")]);
                let result = call(&tree, &limits, json!({"tool": "read", "args": {"path": path}}));
                if path.ends_with(".bin") {
                    assert!(result.is_error(), "binary files are refused: {}", result.output);
                    continue;
                }
                assert_eq!(numbered_text(&result.output), lines(&expected), "read {path} on {kind} at {id}");
                if lines(&expected).len() >= 4 {
                    let range =
                        call(&tree, &limits, json!({"tool": "read", "args": {"path": path, "start": 2, "end": 4}}));
                    assert_eq!(numbered_text(&range.output), lines(&expected)[1..4].to_vec());
                    assert_eq!(range.entities, [2, 3, 4].map(|n| format!("{path}:{n}")));
                }
                compared += 1;
            }
        }
    }
    assert!(compared > 200, "compared only {compared} calls");
}

fn paths(tree: &Tree) -> Vec<String> {
    tree.files().iter().map(|f| f.path.clone()).collect()
}

/// `git ls-files` of a temporary index holding the commit's tree.
fn ls_files(source: &Path, index: &Path, pathspecs: &[&str]) -> Vec<String> {
    let output = git_command(source)
        .env("GIT_INDEX_FILE", index)
        .args(["ls-files", "-z", "--"])
        .args(pathspecs)
        .output()
        .expect("ls-files runs");
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .expect("utf-8 paths")
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

fn git_grep(source: &Path, id: &str, pattern: &str, pathspecs: &[&str], insensitive: bool) -> Vec<String> {
    let mut command = git_command(source);
    command.args(["grep", "-n", "-I", "-P", "--no-color"]);
    if insensitive {
        command.arg("-i");
    }
    let output = command.args(["-e", pattern, id, "--"]).args(pathspecs).output().expect("git grep runs");
    assert!(output.status.code() != Some(128), "git grep failed: {}", String::from_utf8_lossy(&output.stderr));
    let prefix = format!("{id}:");
    String::from_utf8(output.stdout)
        .expect("utf-8 output")
        .lines()
        .map(|l| l.strip_prefix(&prefix).expect("git grep prefixes the revision").to_owned())
        .collect()
}

/// Regular files (not symlinks) of a commit.
fn regular_files(source: &Path, id: &str) -> Vec<String> {
    git(source, &["ls-tree", "-r", "-z", id])
        .split('\0')
        .filter(|l| l.starts_with("100"))
        .filter_map(|l| l.split_once('\t').map(|(_, p)| p.to_owned()))
        .collect()
}

fn lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    if text.ends_with('\n') || text.is_empty() {
        lines.pop();
    }
    lines
}

/// The text of `read`'s numbered lines, checking the numbering is 1, 2, 3, ... from the first.
fn numbered_text(output: &str) -> Vec<String> {
    if output.starts_with('[') {
        return Vec::new();
    }
    let mut previous = None;
    output
        .split('\n')
        .filter(|l| !l.starts_with('['))
        .map(|l| {
            let (number, text) = l.split_once('\t').expect("numbered line");
            let number: u64 = number.trim().parse().expect("line number");
            if let Some(p) = previous {
                assert_eq!(number, p + 1, "consecutive numbering");
            }
            previous = Some(number);
            text.to_owned()
        })
        .collect()
}
