//! Mining at scale against `git` itself: a repository this test builds with
//! plain commits, a pull request merged with `--no-ff`, a squash merge, a
//! plain merge, renames, deletions, a binary file and test/doc files. The
//! mined set is checked against `git log` (with `--first-parent`, a range,
//! `--since`/`--until`, `-n`), every target against `git diff` (default
//! hunks and `--unified=0`), path globs against git's own pathspec globs, and
//! the cache by deleting the repository's objects.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use rewardlab_rewards::diff::patch_targets;
use rewardlab_rewards::tasks::{
    CommitError, CommitOptions, MinedTask, RepoRef, TaskKind, TaskKinds, mine, mine_cached, parse_time,
};

/// Every commit of the fixture is committed on this day of January 2021, at noon UTC, in order.
fn date(day: u32) -> String {
    format!("2021-01-{day:02}T12:00:00+0000")
}

fn git_at(dir: &Path, day: Option<u32>, args: &[&str]) -> String {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir);
    if let Some(day) = day {
        cmd.env("GIT_AUTHOR_DATE", date(day)).env("GIT_COMMITTER_DATE", date(day));
    }
    let out = cmd.output().expect("the git binary runs (it is the oracle of this test)");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 git output")
}

fn git(dir: &Path, args: &[&str]) -> String {
    git_at(dir, None, args)
}

fn write(dir: &Path, path: &str, bytes: impl AsRef<[u8]>) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().expect("file has a parent")).expect("mkdir");
    std::fs::write(p, bytes).expect("write file");
}

fn lines(n: usize, tag: &str) -> String {
    (1..=n).map(|i| format!("{tag} line {i}\n")).collect()
}

/// The fixture: the repository, and the commit ids by name.
struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ids: Vec<(&'static str, String)>,
}

impl Fixture {
    fn id(&self, name: &str) -> &str {
        &self.ids.iter().find(|(n, _)| *n == name).expect("a named fixture commit").1
    }

    fn name_of(&self, id: &str) -> &'static str {
        self.ids.iter().find(|(_, i)| i == id).map_or("?", |(n, _)| *n)
    }

    fn names(&self, tasks: &[MinedTask]) -> BTreeSet<&'static str> {
        tasks.iter().map(|t| self.name_of(&t.commit)).collect()
    }
}

fn build() -> Fixture {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("fixture");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let d = dir.as_path();
    git(d, &["init", "-q", "-b", "main"]);
    let mut ids = Vec::new();
    let mut day = 0;
    write(d, "pkg/core.py", lines(40, "core"));
    write(d, "pkg/util.py", lines(12, "util"));
    write(d, "pkg/old_name.py", lines(20, "old"));
    write(d, "pkg/extra.py", lines(30, "extra"));
    write(d, "pkg/tests/test_core.py", lines(5, "test"));
    write(d, "doc/guide.py", lines(5, "guide"));
    write(d, "README.md", "readme\n");
    write(d, "assets/logo.png", b"\x89PNG\0\0\x01binary");
    commit(d, &mut day, "root", "Initial import of the package sources", &mut ids);

    let core = lines(40, "core").replace("core line 5\n", "five\n").replace("core line 9\n", "nine\n");
    let core = core.replace("core line 30\n", "core line 30\ninserted\n");
    write(d, "pkg/core.py", &core);
    write(d, "pkg/tests/test_core.py", lines(6, "test"));
    write(d, "assets/logo.png", b"\x89PNG\0\0\x02binary");
    commit(d, &mut day, "edit", "Fix the parser when headers are empty\n\nLonger body text.", &mut ids);

    let renamed = lines(20, "old").replace("old line 10\n", "ten\n");
    std::fs::remove_file(d.join("pkg/old_name.py")).expect("rm");
    write(d, "pkg/new_name.py", &renamed);
    std::fs::remove_file(d.join("pkg/util.py")).expect("rm");
    commit(d, &mut day, "rename", "Rename the old module and drop the unused util helpers", &mut ids);

    write(d, "pkg/core.py", core.replace("nine\n", "NINE\n"));
    commit(d, &mut day, "typo", "typo", &mut ids);

    write(d, "pkg/core.py", core.replace("core line 20\n", "twenty\n"));
    write(d, "pkg/extra.py", lines(30, "extra").replace("extra line 2\n", "two\n"));
    write(d, "pkg/new_name.py", renamed.replace("old line 3\n", "three\n"));
    commit(d, &mut day, "wide", "Touch three modules of the package at once", &mut ids);
    let core = core.replace("core line 20\n", "twenty\n");

    // A pull request: a feature branch merged with GitHub's message while main moved on.
    git(d, &["checkout", "-q", "-b", "feature"]);
    let extra = lines(30, "extra").replace("extra line 2\n", "two\n");
    write(d, "pkg/extra.py", extra.replace("extra line 15\n", "fifteen\n"));
    commit(d, &mut day, "feature1", "Teach the lexer about unicode escapes", &mut ids);
    let extra = extra.replace("extra line 15\n", "fifteen\n").replace("extra line 28\n", "twenty-eight\n");
    write(d, "pkg/extra.py", &extra);
    commit(d, &mut day, "feature2", "Handle the trailing newline in the lexer", &mut ids);
    git(d, &["checkout", "-q", "main"]);
    write(d, "pkg/core.py", core.replace("core line 35\n", "thirty-five\n"));
    commit(d, &mut day, "mainline", "Tweak the core defaults for more speed", &mut ids);
    let core = core.replace("core line 35\n", "thirty-five\n");
    let message = "Merge pull request #7 from alice/lexer\n\nTeach the lexer about unicode escapes\n\nThe lexer rejected escapes.";
    merge(d, &mut day, "pr7", message, "feature", &mut ids);

    write(d, "pkg/core.py", core.replace("core line 38\n", "thirty-eight\n"));
    commit(d, &mut day, "squash", "Speed up the config loader (#9)\n\nLoads lazily now.", &mut ids);

    // A plain merge of a side branch: the merge is no task, its branch commit is.
    git(d, &["checkout", "-q", "-b", "side"]);
    write(d, "pkg/new_name.py", renamed.replace("old line 3\n", "three\n").replace("old line 18\n", "eighteen\n"));
    commit(d, &mut day, "side", "Side branch change to the renamed module", &mut ids);
    git(d, &["checkout", "-q", "main"]);
    merge(d, &mut day, "merge", "Merge branch 'side' into main", "side", &mut ids);

    write(d, "doc/guide.py", lines(6, "guide"));
    write(d, "README.md", "readme v2\n");
    commit(d, &mut day, "docs", "Document the parser in the user guide", &mut ids);
    write(d, "pkg/tests/test_core.py", lines(7, "test"));
    commit(d, &mut day, "tests", "Extend the tests of the core parser", &mut ids);
    write(d, "pkg/fresh.py", "x = 1\n");
    write(d, "pkg/core.py", core.replace("core line 1\n", "one\n"));
    commit(d, &mut day, "adds", "Add a fresh module alongside a core tweak", &mut ids);
    Fixture { _tmp: tmp, dir, ids }
}

/// Commits everything on the next day and records the commit under `name`.
fn commit(d: &Path, day: &mut u32, name: &'static str, message: &str, ids: &mut Vec<(&'static str, String)>) {
    *day += 1;
    git(d, &["add", "-A"]);
    git_at(d, Some(*day), &["commit", "-q", "-m", message]);
    ids.push((name, git(d, &["rev-parse", "HEAD"]).trim().to_string()));
}

/// Merges `branch` into the current branch on the next day.
fn merge(
    d: &Path,
    day: &mut u32,
    name: &'static str,
    message: &str,
    branch: &str,
    ids: &mut Vec<(&'static str, String)>,
) {
    *day += 1;
    git_at(d, Some(*day), &["merge", "-q", "--no-ff", "-m", message, branch]);
    ids.push((name, git(d, &["rev-parse", "HEAD"]).trim().to_string()));
}

fn options() -> CommitOptions {
    CommitOptions { threads: 2, ..CommitOptions::default() }
}

fn set(names: &[&'static str]) -> BTreeSet<&'static str> {
    names.iter().copied().collect()
}

/// `git log ARGS --format=%H` as a set of fixture names.
fn log(fx: &Fixture, args: &[&str]) -> BTreeSet<&'static str> {
    let mut all = vec!["log", "--format=%H"];
    all.extend_from_slice(args);
    git(&fx.dir, &all).lines().map(|id| fx.name_of(id)).collect()
}

/// Each task's base, and its targets equal to `git diff base commit -- PATHSPEC`, default hunks and `-U0`.
fn check_targets(fx: &Fixture, tasks: &[MinedTask], pathspec: &[&str]) {
    for mined in tasks {
        let task = &mined.task;
        let first_parent = git(&fx.dir, &["rev-parse", &format!("{}^1", mined.commit)]);
        assert_eq!(task.base_commit, first_parent.trim(), "{}", task.prompt);
        assert_eq!(task.repo, RepoRef::Path(fx.dir.clone()));
        assert_eq!(task.id, format!("fixture@{}", &mined.commit[..12]));
        let mut args = vec!["diff", "-M", &task.base_commit, &mined.commit, "--"];
        args.extend_from_slice(pathspec);
        let mut want = patch_targets(&git(&fx.dir, &args)).expect("git's diff parses");
        want.files.sort();
        want.line_ranges.sort();
        let mut got = task.targets.line_ranges.clone();
        got.sort();
        assert_eq!(task.targets.files, want.files, "{}", task.prompt);
        assert_eq!(got, want.line_ranges, "{}", task.prompt);
        // Every change `--unified=0` shows lies inside one mined range, and each range starts and ends at one.
        let mut exact_args = vec!["diff", "-M", "--unified=0", &task.base_commit, &mined.commit, "--"];
        exact_args.extend_from_slice(pathspec);
        let exact = unified_zero_changes(&git(&fx.dir, &exact_args));
        for (path, lo, hi) in &exact {
            let inside = got.iter().any(|r| &r.path == path && r.start <= *lo && *hi <= r.end);
            assert!(inside, "{path}:{lo}-{hi} of {}", task.prompt);
        }
        for range in &got {
            assert!(exact.iter().any(|(p, lo, _)| *p == range.path && *lo == range.start), "{range}");
            assert!(exact.iter().any(|(p, _, hi)| *p == range.path && *hi == range.end), "{range}");
        }
    }
}

/// The pre-image changes of a `--unified=0` diff read straight from its hunk
/// headers: `-a,b` with `b > 0` is lines `a..a+b-1`; `-a,0` is an insertion
/// after line `a`, anchored there (line 1 at the top). Added files have none.
fn unified_zero_changes(diff: &str) -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    let mut path: Option<String> = None;
    for line in diff.lines() {
        if let Some(p) = line.strip_prefix("--- ") {
            path = p.strip_prefix("a/").map(str::to_string);
        } else if let Some(header) = line.strip_prefix("@@ -")
            && let Some(path) = &path
        {
            let old = header.split(' ').next().expect("a hunk range");
            let (a, b) = old.split_once(',').unwrap_or((old, "1"));
            let (a, b): (u32, u32) = (a.parse().expect("start"), b.parse().expect("length"));
            let (lo, hi) = if b == 0 { (a.max(1), a.max(1)) } else { (a, a + b - 1) };
            out.push((path.clone(), lo, hi));
        }
    }
    out
}

const SOURCE: &[&str] = &[":(glob)pkg/*.py"];

#[test]
fn commits_prs_and_their_targets_match_git() {
    let fx = build();
    let commits = mine(&fx.dir, &options()).expect("mining works");
    let want_commits = set(&["edit", "rename", "wide", "feature1", "feature2", "mainline", "squash", "side"]);
    assert_eq!(fx.names(&commits.tasks), want_commits);
    assert!(commits.tasks.iter().all(|t| t.kind == TaskKind::Commit && t.pull_request.is_none()));
    let no_merges = log(&fx, &["--no-merges"]);
    assert!(fx.names(&commits.tasks).is_subset(&no_merges));
    // Newest first, the order of `git log`.
    let order: Vec<&str> = git(&fx.dir, &["log", "--format=%H"]).lines().map(|id| fx.name_of(id)).collect();
    let mined_order: Vec<&str> = commits.tasks.iter().map(|t| fx.name_of(&t.commit)).collect();
    let expected_order: Vec<&str> = order.iter().copied().filter(|n| want_commits.contains(n)).collect();
    assert_eq!(mined_order, expected_order);
    check_targets(&fx, &commits.tasks, SOURCE);
    let stats = &commits.stats;
    assert_eq!((stats.walked, stats.root_commits, stats.merges, stats.trivial_message), (15, 1, 2, 1));
    assert_eq!((stats.too_few_files, stats.added_files, stats.tasks, stats.from_cache), (2, 1, 8, false));

    let edit = commits.tasks.iter().find(|t| t.commit == fx.id("edit")).expect("edit task");
    let shown: Vec<String> = edit.task.targets.line_ranges.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["pkg/core.py:5-9", "pkg/core.py:30-30"], "the binary and test files are no targets");
    let rename = commits.tasks.iter().find(|t| t.commit == fx.id("rename")).expect("rename task");
    assert_eq!(rename.task.targets.files, ["pkg/old_name.py", "pkg/util.py"]);

    let prs = mine(&fx.dir, &CommitOptions { kinds: TaskKinds::PullRequests, ..options() }).expect("PRs");
    assert_eq!(fx.names(&prs.tasks), set(&["pr7", "squash"]));
    assert!(prs.tasks.iter().all(|t| t.kind == TaskKind::PullRequest));
    let pr7 = prs.tasks.iter().find(|t| t.pull_request == Some(7)).expect("PR 7");
    assert_eq!(pr7.task.prompt, "Teach the lexer about unicode escapes\n\nThe lexer rejected escapes.");
    assert_eq!(pr7.task.targets.files, ["pkg/extra.py"], "the first-parent diff holds the branch's changes only");
    let squash = prs.tasks.iter().find(|t| t.pull_request == Some(9)).expect("PR 9");
    assert_eq!(squash.task.prompt, "Speed up the config loader\n\nLoads lazily now.");
    check_targets(&fx, &prs.tasks, SOURCE);
    assert_eq!(prs.stats.merges, 1, "the plain merge of `side`");

    let both = mine(&fx.dir, &CommitOptions { kinds: TaskKinds::Both, ..options() }).expect("both");
    let mut want_both = want_commits.clone();
    want_both.insert("pr7");
    assert_eq!(fx.names(&both.tasks), want_both);
    assert_eq!(both.tasks.len(), 9, "the squash merge is mined once");
    let kind_of = |name: &str| both.tasks.iter().find(|t| t.commit == fx.id(name)).map(|t| t.kind);
    assert_eq!(kind_of("squash"), Some(TaskKind::PullRequest));
    assert_eq!(kind_of("edit"), Some(TaskKind::Commit));

    // Thread count never changes the output.
    let serial = mine(&fx.dir, &CommitOptions { kinds: TaskKinds::Both, threads: 1, ..options() }).expect("serial");
    assert_eq!(serial.tasks, both.tasks);
}

#[test]
fn walk_filters_match_git_log() {
    let fx = build();
    let all = mine(&fx.dir, &CommitOptions { kinds: TaskKinds::Both, ..options() }).expect("all");
    let all_names = fx.names(&all.tasks);
    let restricted = |options: CommitOptions, log_args: &[&str]| {
        let mined = mine(&fx.dir, &options).expect("mining works");
        let want: BTreeSet<&str> = all_names.intersection(&log(&fx, log_args)).copied().collect();
        assert_eq!(fx.names(&mined.tasks), want, "{log_args:?}");
        mined
    };
    let first =
        restricted(CommitOptions { first_parent: true, kinds: TaskKinds::Both, ..options() }, &["--first-parent"]);
    assert!(!fx.names(&first.tasks).contains("feature1"));
    assert!(fx.names(&first.tasks).contains("pr7"));

    let since = parse_time("2021-01-03").expect("a date");
    let until = parse_time("2021-01-09T12:00:00Z").expect("a date");
    let dated = CommitOptions { since: Some(since), until: Some(until), kinds: TaskKinds::Both, ..options() };
    let mined = restricted(dated, &["--since=2021-01-03T00:00:00+0000", "--until=2021-01-09T12:00:00+0000"]);
    assert_eq!(fx.names(&mined.tasks), set(&["rename", "wide", "feature1", "feature2", "mainline", "pr7"]));

    let range = format!("{}..main", fx.id("wide"));
    let ranged = restricted(CommitOptions { rev: range.clone(), kinds: TaskKinds::Both, ..options() }, &[&range]);
    assert!(!fx.names(&ranged.tasks).contains("wide"));
    let branch = restricted(CommitOptions { rev: "side".into(), kinds: TaskKinds::Both, ..options() }, &["side"]);
    assert!(!fx.names(&branch.tasks).contains("adds"));

    let counted = CommitOptions { max_commits: 6, kinds: TaskKinds::Both, ..options() };
    let mined = restricted(counted, &["-n", "6"]);
    assert_eq!(mined.stats.walked, 6);
    let capped = mine(&fx.dir, &CommitOptions { max_tasks: 2, kinds: TaskKinds::Both, ..options() }).expect("capped");
    let newest: Vec<&str> = all.tasks[..2].iter().map(|t| fx.name_of(&t.commit)).collect();
    assert_eq!(capped.tasks.iter().map(|t| fx.name_of(&t.commit)).collect::<Vec<_>>(), newest);
}

#[test]
fn path_message_and_size_filters() {
    let fx = build();
    let names = |options: CommitOptions| fx.names(&mine(&fx.dir, &options).expect("mining works").tasks);
    let excluded = CommitOptions { exclude_paths: vec!["**/extra.py".into()], ..options() };
    let mined = mine(&fx.dir, &excluded).expect("mining works");
    assert_eq!(fx.names(&mined.tasks), set(&["edit", "rename", "wide", "mainline", "squash", "side"]));
    check_targets(&fx, &mined.tasks, &[":(glob)pkg/*.py", ":(exclude,glob)**/extra.py"]);

    let included = CommitOptions { include_paths: vec!["pkg/core.py".into()], ..options() };
    let mined = mine(&fx.dir, &included).expect("mining works");
    assert_eq!(fx.names(&mined.tasks), set(&["edit", "wide", "mainline", "squash", "adds"]), "fresh.py is no target");
    check_targets(&fx, &mined.tasks, &[":(glob)pkg/core.py"]);

    // Without the built-in rule, the test file is a target like any other; the doc glob still drops the guide.
    let tests_in = CommitOptions { builtin_excludes: false, exclude_paths: vec!["doc/**".into()], ..options() };
    let mined = mine(&fx.dir, &tests_in).expect("mining works");
    assert_eq!(
        fx.names(&mined.tasks),
        set(&["edit", "rename", "wide", "feature1", "feature2", "mainline", "squash", "side", "tests"])
    );
    check_targets(&fx, &mined.tasks, &[":(glob)**/*.py", ":(exclude,glob)doc/**"]);

    assert!(!names(CommitOptions { max_files: 2, ..options() }).contains("wide"));
    assert_eq!(names(CommitOptions { min_files: 2, ..options() }), set(&["rename", "wide"]));
    assert_eq!(
        names(CommitOptions { max_changed_paths: 2, ..options() }),
        set(&["rename", "feature1", "feature2", "mainline", "squash", "side"]),
        "the edit changes three paths (a test and a binary file too), the wide commit three"
    );
    assert_eq!(names(CommitOptions { min_message_words: 8, ..options() }), set(&["edit", "rename", "wide", "squash"]));
    assert_eq!(
        names(CommitOptions { min_message_chars: 42, ..options() }),
        set(&["edit", "rename", "wide", "squash"]),
        "42 characters or more"
    );
    let added = mine(&fx.dir, &CommitOptions { allow_added_files: true, ..options() }).expect("mining works");
    let adds = added.tasks.iter().find(|t| t.commit == fx.id("adds")).expect("the adding commit is kept");
    assert_eq!(adds.task.targets.files, ["pkg/core.py", "pkg/fresh.py"]);
    assert!(adds.task.targets.line_ranges.iter().all(|r| r.path == "pkg/core.py"), "an added file has no range");

    let err = mine(&fx.dir, &CommitOptions { include_paths: vec!["pkg/[".into()], ..options() }).expect_err("bad glob");
    assert!(matches!(err, CommitError::Glob { .. }), "{err}");
}

#[test]
fn an_empty_range_names_the_repository_range_and_filters() {
    let fx = build();
    let rev = format!("{}..{}", fx.id("rename"), fx.id("typo"));
    let err = mine(&fx.dir, &CommitOptions { rev: rev.clone(), ..options() }).expect_err("only a trivial commit");
    let text = err.to_string();
    assert!(matches!(err, CommitError::NoUsableCommits { .. }));
    assert!(text.contains(&fx.dir.display().to_string()), "{text}");
    assert!(text.contains(&format!("`{rev}`")), "{text}");
    assert!(text.contains("of 1 commit(s) walked, 1 trivial message(s) (under 4 words"), "{text}");
    assert!(text.contains("fix: lower `min_message_words`"), "{text}");

    let only_prs = CommitOptions { rev: fx.id("wide").to_string(), kinds: TaskKinds::PullRequests, ..options() };
    let text = mine(&fx.dir, &only_prs).expect_err("no PR before the merge").to_string();
    assert!(text.contains("plain commit(s) while only pull requests are selected"), "{text}");
    assert!(text.contains("fix: select commits too"), "{text}");

    let backwards = format!("main..{}", fx.id("wide"));
    let text = mine(&fx.dir, &CommitOptions { rev: backwards, ..options() }).expect_err("empty").to_string();
    assert!(text.contains("the range is empty"), "{text}");
}

#[test]
fn the_cache_answers_a_rerun_without_the_history() {
    let fx = build();
    let cache = tempfile::tempdir().expect("temp dir");
    let opts = CommitOptions { kinds: TaskKinds::Both, ..options() };
    let first = mine_cached(&fx.dir, &opts, cache.path()).expect("mining works");
    assert!(!first.stats.from_cache);
    let files: Vec<_> = std::fs::read_dir(cache.path()).expect("cache dir").map(|e| e.expect("entry").path()).collect();
    assert_eq!(files.len(), 1, "one entry, no temporary file left: {files:?}");
    let changed = CommitOptions { max_files: 4, ..opts.clone() };
    assert!(!mine_cached(&fx.dir, &changed, cache.path()).expect("mining works").stats.from_cache, "a filter misses");

    // Without its objects the repository cannot be walked; the cache still answers (any thread count).
    for entry in walk_files(&fx.dir.join(".git/objects")) {
        std::fs::remove_file(entry).expect("remove object file");
    }
    let again = mine_cached(&fx.dir, &CommitOptions { threads: 5, ..opts.clone() }, cache.path()).expect("cached");
    assert!(again.stats.from_cache);
    assert_eq!(again.tasks, first.tasks);
    let also = mine_cached(&fx.dir, &changed, cache.path()).expect("cached too");
    assert!(also.stats.from_cache);
    let other = CommitOptions { min_message_words: 2, ..opts };
    let err = mine_cached(&fx.dir, &other, cache.path()).expect_err("a miss must walk the missing history");
    assert!(matches!(err, CommitError::Git { .. }), "{err}");
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() { out.extend(walk_files(&path)) } else { out.push(path) }
    }
    out
}

#[test]
fn a_commit_whose_blob_is_missing_fails_the_mining_unless_it_is_skipped_and_counted() {
    let fx = build();
    let complete = mine(&fx.dir, &options()).expect("mining works");
    // A snapshot without one blob: the core module as `edit` left it (`typo`, which replaces it,
    // is no task: its message is trivial, so it is never diffed).
    let blob = git(&fx.dir, &["rev-parse", &format!("{}:pkg/core.py", fx.id("edit"))]).trim().to_string();
    let (fan, rest) = blob.split_at(2);
    std::fs::remove_file(fx.dir.join(".git/objects").join(fan).join(rest)).expect("the blob is a loose object");

    let err = mine(&fx.dir, &options()).expect_err("a missing blob fails the mining by default");
    let text = format!("{err:#}");
    assert!(
        matches!(err, CommitError::Git { .. }) && text.contains(&format!("diffing commit {}", fx.id("edit"))),
        "{text}"
    );

    let skipping = mine(&fx.dir, &CommitOptions { skip_missing_objects: true, ..options() }).expect("skips");
    assert_eq!(skipping.stats.missing_objects, 1, "{:?}", skipping.stats);
    let others: Vec<MinedTask> = complete.tasks.iter().filter(|t| fx.name_of(&t.commit) != "edit").cloned().collect();
    assert_eq!(others.len() + 1, complete.tasks.len(), "`edit` was a task");
    assert_eq!(skipping.tasks, others, "every other task is mined as before");
}

/// `test_snippet_lines` appends what a commit adds to its test files to the issue text, as a
/// code block of calls and assertions (no test names, imports, decorators, comments,
/// docstrings or lone punctuation), up to the limit; 0 leaves the message alone and stays out
/// of the options' serialised form (the cache key).
#[test]
fn test_snippets_append_the_added_test_lines_a_reproduction_shows() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let d = tmp.path();
    git(d, &["init", "-q", "-b", "main"]);
    write(d, "pkg/mod.py", "def double(x):\n    return x + x\n");
    write(d, "tests/test_mod.py", "from pkg.mod import double\n\ndef test_double():\n    assert double(2) == 4\n");
    git_at(d, Some(1), &["add", "-A"]);
    git_at(d, Some(1), &["commit", "-q", "-m", "Add the double function to the package"]);
    write(d, "pkg/mod.py", "def double(x):\n    return 2 * x\n");
    write(
        d,
        "tests/test_mod.py",
        "from pkg.mod import double\nimport pytest\n\ndef test_double():\n    assert double(2) == 4\n\n\
         @pytest.mark.slow\ndef test_double_negative():\n    \"\"\"Negative numbers.\"\"\"\n    # the sign stays\n    \
         assert double(-2) == -4\n    x = double(\n        0,\n    )\n    assert x == 0\n",
    );
    git_at(d, Some(2), &["add", "-A"]);
    git_at(d, Some(2), &["commit", "-q", "-m", "Fix double for negative numbers in the package"]);
    let message = "Fix double for negative numbers in the package";
    let prompt = |lines: usize| {
        let mined = mine(d, &CommitOptions { test_snippet_lines: lines, ..options() }).expect("mining works");
        assert_eq!(mined.tasks.len(), 1, "only the fix has a one-file target after the first commit");
        assert_eq!(mined.tasks[0].task.targets.files, ["pkg/mod.py"]);
        mined.tasks[0].task.prompt.clone()
    };
    assert_eq!(prompt(0), message);
    assert_eq!(prompt(3), format!("{message}\n\n```\nassert double(-2) == -4\nx = double(\n0,\n```"));
    assert_eq!(prompt(9), format!("{message}\n\n```\nassert double(-2) == -4\nx = double(\n0,\nassert x == 0\n```"));
    let key = |lines: usize| serde_json::to_string(&CommitOptions { test_snippet_lines: lines, ..options() });
    assert!(!key(0).expect("serialises").contains("test_snippet_lines"));
    assert!(key(4).expect("serialises").contains("\"test_snippet_lines\":4"));
}
