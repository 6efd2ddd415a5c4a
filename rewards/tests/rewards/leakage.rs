//! The leakage rule against `git merge-base --is-ancestor` on a repository
//! this test builds: a mainline with a fix after the evaluation base, a
//! branch forked before the base and merged after it, and more evaluation
//! instances than one 64-bit word of the ancestry bit sets holds.

use std::path::Path;
use std::process::Command;

use rewardlab_rewards::tasks::{EvalCommit, LeakageError, TrainChange, find_leaks};

fn git(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("the git binary runs (it is the oracle of this test)");
    (out.status.success(), String::from_utf8(out.stdout).expect("utf-8").trim().to_owned())
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (success, out) = git(dir, args);
    assert!(success, "git {args:?} failed");
    out
}

/// Changes `file` and commits; returns the new commit's id.
fn change(dir: &Path, file: &str, message: &str) -> String {
    let path = dir.join(file);
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&format!("# {message}\n"));
    std::fs::write(&path, text).expect("write");
    ok(dir, &["commit", "-qam", message]);
    ok(dir, &["rev-parse", "HEAD"])
}

#[test]
fn leaks_are_later_changes_to_gold_files_exactly_as_git_ancestry_says() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    ok(d, &["init", "-q"]);
    for f in ["a.py", "b.py", "c.py"] {
        std::fs::write(d.join(f), (0..12).map(|i| format!("# {f} {i}\n")).collect::<String>()).expect("write");
    }
    ok(d, &["add", "."]);
    ok(d, &["commit", "-qm", "root"]);
    let root = ok(d, &["rev-parse", "HEAD"]);
    ok(d, &["checkout", "-qb", "side"]);
    // The side branch edits the top of `a.py`, the mainline appends: the merge is clean.
    let text = std::fs::read_to_string(d.join("a.py")).expect("read");
    std::fs::write(d.join("a.py"), text.replacen("# a.py 0", "# side", 1)).expect("write");
    ok(d, &["commit", "-qam", "side branch edits a"]);
    let side = ok(d, &["rev-parse", "HEAD"]);
    ok(d, &["checkout", "-q", "main"]);
    let base = change(d, "a.py", "the evaluation base edits a");
    let fix = change(d, "a.py", "the fix of the instance");
    let other = change(d, "b.py", "later, b only");
    ok(d, &["merge", "-q", "--no-ff", "-m", "Merge pull request #1 from t/side", "side"]);
    let merge = ok(d, &["rev-parse", "HEAD"]);
    let late = change(d, "c.py", "later still, c only");

    let (a, b, ab, c) =
        (vec!["a.py".to_owned()], vec!["b.py".to_owned()], vec!["a.py".into(), "b.py".into()], vec!["c.py".to_owned()]);
    // 70 instances (two words of bits), cycling over bases and gold files.
    let kinds: [(&str, &Vec<String>); 4] = [(&base, &a), (&other, &b), (&side, &a), (&root, &c)];
    let ids: Vec<String> = (0..70).map(|i| format!("inst-{i}")).collect();
    let eval: Vec<EvalCommit<'_>> = (0..70)
        .map(|i| {
            let (base, files) = kinds[i % 4];
            EvalCommit { id: &ids[i], base, files }
        })
        .collect();
    let train: Vec<TrainChange<'_>> = vec![
        TrainChange { commit: &fix, inclusive: false, files: &a },
        TrainChange { commit: &other, inclusive: false, files: &b },
        TrainChange { commit: &base, inclusive: false, files: &a },
        TrainChange { commit: &side, inclusive: false, files: &a },
        TrainChange { commit: &merge, inclusive: false, files: &a },
        TrainChange { commit: &late, inclusive: false, files: &c },
        TrainChange { commit: &fix, inclusive: true, files: &ab },
        TrainChange { commit: &base, inclusive: true, files: &a },
        TrainChange { commit: &root, inclusive: true, files: &ab },
        TrainChange { commit: &other, inclusive: true, files: &b },
    ];
    let leaks = find_leaks(d, &eval, &train).expect("the rule applies");
    assert_eq!(leaks.len(), train.len());
    let mut total = 0;
    for (t, change) in train.iter().enumerate() {
        for (e, instance) in eval.iter().enumerate() {
            let overlap = change.files.iter().any(|f| instance.files.contains(f));
            let (ancestor, _) = git(d, &["merge-base", "--is-ancestor", instance.base, change.commit]);
            let descends = ancestor && (change.inclusive || instance.base != change.commit);
            assert_eq!(leaks[t].contains(&e), overlap && descends, "train {t} ({}), instance {e}", change.commit);
            total += usize::from(overlap && descends);
        }
    }
    // The fix, the merge (which brings the side branch's change to `a.py` after the base) and
    // the base-commit tasks at or after the base leak the `a.py` instances; `late` (c.py, after
    // the root instance's base) leaks the root's `c.py` instances.
    assert!(leaks[0].contains(&0) && leaks[4].contains(&0) && leaks[7].contains(&0));
    assert!(leaks[2].is_empty() && !leaks[3].contains(&0), "no change before or beside the base leaks it");
    assert!(leaks[5].contains(&3) && leaks[5].contains(&67));
    assert!(total > 20, "{total}");
}

#[test]
fn an_unknown_base_names_the_instance_and_the_commit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    ok(d, &["init", "-q"]);
    std::fs::write(d.join("a.py"), "x\n").expect("write");
    ok(d, &["add", "."]);
    ok(d, &["commit", "-qm", "root"]);
    let head = change(d, "a.py", "an edit");
    let files = vec!["a.py".to_owned()];
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let eval = [EvalCommit { id: "psf__requests-1", base: missing, files: &files }];
    let train = [TrainChange { commit: &head, inclusive: false, files: &files }];
    let err = find_leaks(d, &eval, &train).expect_err("the base is not in the repository");
    assert!(matches!(err, LeakageError::Commit { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(missing) && text.contains("psf__requests-1"), "{text}");
    // Without a shared file the repository is not even read.
    let other = vec!["b.py".to_owned()];
    let train = [TrainChange { commit: &head, inclusive: false, files: &other }];
    assert_eq!(find_leaks(d, &eval, &train).expect("no pair, no walk"), vec![Vec::<usize>::new()]);
}
