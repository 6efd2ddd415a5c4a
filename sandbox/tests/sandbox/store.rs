//! The repository store: cloning, adopting, sharing trees, cleaning up and pruning.

use std::{
    path::Path,
    sync::{Arc, Barrier},
};

use rewardlab_sandbox::{Error, RepoStore, RunTool, StoreOptions, TreeKind};

use crate::sandbox::helpers::{Fixture, commit_all, generated_repo, git, init, write};

fn admin_entries(mirror: &Path) -> Vec<String> {
    match std::fs::read_dir(mirror.join("worktrees")) {
        Ok(entries) => entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    }
}

fn dir_entries(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut names: Vec<String> =
                entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
            names.sort();
            names
        }
        Err(_) => Vec::new(),
    }
}

#[test]
fn clones_a_local_repository_bare_once_and_resolves_revisions() {
    let fx = Fixture::new();
    let src = fx.path("acme/demo");
    let ids = generated_repo(&src, 1, 4);
    git(&src, &["tag", "v1", &ids[1]]);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    assert_eq!(repo.name(), "acme__demo");
    assert_eq!(repo.path(), store.root().join("acme__demo.git"));
    assert_eq!(git(repo.path(), &["rev-parse", "--is-bare-repository"]).trim(), "true");
    assert!(Arc::ptr_eq(&repo, &store.repo("acme/demo").expect("by name")), "one Repo per name");
    for id in &ids {
        assert_eq!(repo.resolve(id).expect("full id").to_string(), *id);
        assert_eq!(repo.resolve(&id[..10]).expect("short id").to_string(), *id);
    }
    assert_eq!(repo.resolve("HEAD~1").expect("HEAD~1").to_string(), ids[2]);
    assert_eq!(repo.resolve("v1").expect("tag").to_string(), ids[1]);
    assert!(matches!(repo.resolve("no-such-branch"), Err(Error::Revision { .. })));
    assert!(
        !store.root().join(".tmp").read_dir().map(|mut d| d.next().is_some()).unwrap_or(false),
        "no clone leftovers"
    );
    // A new store on the same directory adopts the mirror: no source needed.
    drop(repo);
    drop(store);
    let store = RepoStore::open(fx.path("store")).expect("reopen");
    assert_eq!(store.repo("acme__demo").expect("adopted").resolve("HEAD").expect("HEAD").to_string(), ids[3]);
    // URLs go through the same clone; a `file://` URL needs no network.
    let moved = fx.path("acme/demo2");
    std::fs::rename(&src, &moved).expect("rename source");
    let url = format!("file://{}", std::fs::canonicalize(&moved).expect("canonical").display());
    let by_url = store.repo(&url).expect("clone by URL");
    assert_eq!(by_url.name(), "acme__demo2");
    assert_eq!(by_url.resolve("HEAD").expect("HEAD").to_string(), ids[3]);
}

#[test]
fn adopts_bare_mirrors_and_rejects_what_is_not_one() {
    let fx = Fixture::new();
    let src = fx.path("acme/demo");
    let ids = generated_repo(&src, 2, 2);
    let root = fx.path("mirrors");
    std::fs::create_dir_all(&root).expect("mkdir");
    git(&root, &["clone", "-q", "--bare", src.to_str().expect("utf-8"), "octo__mirror.git"]);
    git(&root, &["init", "-q", "bad__worktree.git"]);
    let store = RepoStore::open(&root).expect("store");
    let repo = store.repo("octo/mirror").expect("adopted by owner/name");
    assert!(Arc::ptr_eq(&repo, &store.repo("octo__mirror.git").expect("adopted by dir name")));
    assert_eq!(repo.resolve("HEAD").expect("HEAD").to_string(), ids[1]);
    assert!(matches!(store.repo("nobody/here"), Err(Error::InvalidName { .. })));
    assert!(matches!(store.repo("bad/worktree"), Err(Error::NotBare { .. })));
    assert!(matches!(store.repo("justaname"), Err(Error::InvalidName { .. })));
}

#[test]
fn trees_are_shared_while_used_and_cleaned_up_after_drop() {
    let fx = Fixture::new();
    let src = fx.path("acme/demo");
    let ids = generated_repo(&src, 3, 3);
    let options = StoreOptions { keep_recent_trees: 0, ..StoreOptions::default() };
    let store = RepoStore::open_with(fx.path("store"), options).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let a = repo.tree(&ids[0], TreeKind::Worktree).expect("worktree");
    let b = repo.tree(&ids[0][..8], TreeKind::Worktree).expect("same worktree");
    assert!(Arc::ptr_eq(&a, &b), "reused across rollouts");
    let root = a.root().expect("on disk").to_owned();
    assert!(root.join("README.md").is_file());
    assert!(root.starts_with(store.trees_root()));
    assert_eq!(admin_entries(repo.path()).len(), 1);
    assert!(git(repo.path(), &["worktree", "list"]).contains(root.to_str().expect("utf-8")));
    let other = repo.tree(&ids[2], TreeKind::Worktree).expect("another commit");
    assert_eq!(admin_entries(repo.path()).len(), 2);
    let view = repo.tree(&ids[0], TreeKind::View).expect("view");
    assert_eq!(view.files(), a.files(), "both kinds list the same paths");
    assert!(view.root().is_none(), "a view is zero disk");
    drop((a, b, other));
    assert!(!root.exists(), "the worktree directory is removed with its last user");
    assert!(admin_entries(repo.path()).is_empty(), "and so is its admin entry");
    assert_eq!(git(repo.path(), &["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1);
    assert!(dir_entries(&store.trees_root().join("acme__demo.git")).is_empty());
}

#[test]
fn recent_trees_are_kept_for_reuse_until_released() {
    let fx = Fixture::new();
    let src = fx.path("acme/demo");
    let ids = generated_repo(&src, 4, 2);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let first = repo.tree(&ids[1], TreeKind::Worktree).expect("worktree");
    let root = first.root().expect("on disk").to_owned();
    drop(first);
    let again = repo.tree(&ids[1], TreeKind::Worktree).expect("worktree");
    assert_eq!(again.root(), Some(root.as_path()), "a sequential rollout reuses the kept tree");
    drop(again);
    repo.release_recent();
    assert!(!root.exists());
    assert!(admin_entries(repo.path()).is_empty());
    // Dropping the store (the last owner of its repos) cleans up kept trees too.
    let kept = repo.tree(&ids[0], TreeKind::Worktree).expect("worktree").root().expect("on disk").to_owned();
    assert!(kept.exists());
    let mirror = repo.path().to_owned();
    drop(repo);
    drop(store);
    assert!(!kept.exists());
    assert!(admin_entries(&mirror).is_empty());
}

#[test]
fn concurrent_requests_for_one_commit_share_one_worktree() {
    let fx = Fixture::new();
    let src = fx.path("acme/demo");
    let ids = generated_repo(&src, 5, 2);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let barrier = Barrier::new(8);
    let trees: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (repo, barrier, ids) = (&repo, &barrier, &ids);
                s.spawn(move || {
                    barrier.wait();
                    // Half ask for commit 0, half for commit 1, all at once.
                    repo.tree(&ids[i % 2], TreeKind::Worktree).expect("worktree")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    for (i, tree) in trees.iter().enumerate() {
        assert!(Arc::ptr_eq(tree, &trees[i % 2]));
    }
    assert_eq!(dir_entries(&store.trees_root().join("acme__demo.git")).len(), 2);
    assert_eq!(admin_entries(repo.path()).len(), 2);
}

#[test]
fn leftovers_of_crashed_runs_are_pruned_on_open() {
    let fx = Fixture::new();
    let src = fx.path("acme/demo");
    generated_repo(&src, 6, 2);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let mirror = store.repo(src.to_str().expect("utf-8")).expect("clone").path().to_owned();
    let trees = store.trees_root().join("acme__demo.git");
    let add = |dir: &Path| {
        git(&mirror, &["worktree", "add", "-q", "--detach", dir.to_str().expect("utf-8"), "HEAD"]);
    };
    // A crashed run (no such process) left a worktree...
    let dead = trees.join("4294967000-0-aaaaaaaaaaaa");
    add(&dead);
    // ...and another whose directory went but whose admin entry stayed.
    let half = trees.join("4294967001-0-bbbbbbbbbbbb");
    add(&half);
    std::fs::remove_dir_all(&half).expect("rm");
    // A live neighbour (this process) and a worktree outside the store are not ours to prune.
    let live = trees.join(format!("{}-999-cccccccccccc", std::process::id()));
    add(&live);
    let elsewhere = fx.path("elsewhere");
    add(&elsewhere);
    // A clone that died half-way.
    std::fs::create_dir_all(store.root().join(".tmp/4294967002-acme__other.git/objects")).expect("mkdir");
    assert_eq!(admin_entries(&mirror).len(), 4);
    drop(store);

    let store = RepoStore::open(fx.path("store")).expect("reopen prunes");
    assert!(!dead.exists());
    assert!(live.join("README.md").exists());
    assert!(elsewhere.join("README.md").exists());
    let mut remaining = admin_entries(&mirror);
    remaining.sort();
    let mut expected = vec![live.file_name().expect("name").to_string_lossy().into_owned(), "elsewhere".to_owned()];
    expected.sort();
    assert_eq!(remaining, expected);
    assert!(dir_entries(&store.root().join(".tmp")).is_empty());
    let listed = git(&mirror, &["worktree", "list", "--porcelain"]);
    assert!(!listed.contains("4294967000") && !listed.contains("4294967001"), "{listed}");
}

#[test]
fn any_local_path_is_accepted_and_named_safely() {
    use rewardlab_sandbox::{Limits, ToolCall, local_mirror_name, mirror_name};
    let fx = Fixture::new();
    let store = RepoStore::open(fx.path("store with space+plus/ünï")).expect("a store anywhere");
    let grep = ToolCall::from_json(&serde_json::json!({"tool": "grep", "args": {"pattern": "request"}}))
        .unwrap_or_else(|r| panic!("{}", r.output));
    let mut names = Vec::new();
    for (n, dir) in ["code/my repo/requests.git", "a+b/c+d", "données/dépôt", "x/.hidden", "other/my repo/requests.git"]
        .into_iter()
        .enumerate()
    {
        let src = fx.path(dir);
        generated_repo(&src, 20 + n as u64, 1);
        let repo = store.repo(src.to_str().expect("utf-8")).unwrap_or_else(|e| panic!("{dir}: {e}"));
        let name = repo.name().to_owned();
        assert_eq!(mirror_name(&name).expect("a valid store name"), name, "{dir}");
        assert!(name.starts_with("local__"), "{dir} → {name}");
        assert_eq!(local_mirror_name(&src).expect("named"), name, "one naming function");
        assert!(repo.path().starts_with(store.root()), "the mirror stays in the store");
        let tree = repo.tree("HEAD", TreeKind::View).expect("view");
        let found = grep.run(&tree, &Limits::default());
        assert!(!found.entities.is_empty(), "{dir}: {}", found.output);
        assert!(Arc::ptr_eq(&repo, &store.repo(&name).expect("by its store name")));
        names.push(name);
    }
    assert!(names[0].starts_with("local__requests-"), "{}", names[0]);
    assert_ne!(names[0], names[4], "the same stem in two places gives two mirrors");
    // A symlinked directory and a path with `..` name the same repository as the real path.
    let real = fx.path("acme/linked");
    generated_repo(&real, 30, 1);
    std::os::unix::fs::symlink(&real, fx.path("link to repo")).expect("symlink");
    let via_link = store.repo(fx.path("link to repo").to_str().expect("utf-8")).expect("through the link");
    assert_eq!(via_link.name(), "acme__linked");
    let dotted = fx.path("acme/../acme/linked");
    assert!(Arc::ptr_eq(&via_link, &store.repo(dotted.to_str().expect("utf-8")).expect("with ..")));
    // Names that are not store names never reach the filesystem.
    for bad in ["../escape", "a__../b", "__x", "x", "a/b__c", ".git__x"] {
        assert!(
            matches!(store.repo_named(bad, Some(real.to_str().expect("utf-8"))), Err(Error::InvalidName { .. })),
            "{bad}"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_non_utf8_path_is_accepted() {
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new();
    let src = fx.tmp.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9")).join("repo");
    generated_repo(&src, 40, 1);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let repo = store.repo_at(&src).expect("cloned from a non-UTF-8 path");
    assert!(repo.name().starts_with("local__repo-"), "{}", repo.name());
    assert!(repo.tree("HEAD", TreeKind::View).expect("view").files().iter().any(|f| f.path == "README.md"));
}

#[test]
fn views_decode_each_tree_object_once_and_list_what_git_lists() {
    let fx = Fixture::new();
    let src = fx.path("acme/trees");
    init(&src);
    for (path, text) in [
        ("README.md", "demo\n"),
        ("pkg/__init__.py", ""),
        ("pkg/core/a.py", "def a():\n    pass\n"),
        ("pkg/core/deep/b.py", "def b():\n    pass\n"),
        ("pkg/util/c.py", "def c():\n    pass\n"),
        ("docs/index.rst", "Demo\n"),
    ] {
        write(&src, path, text);
    }
    let first = commit_all(&src, "first");
    write(&src, "pkg/core/deep/b.py", "def b():\n    return 1\n");
    let second = commit_all(&src, "second");
    let trees_of =
        |id: &str| 1 + git(&src, &["ls-tree", "-r", "-t", id]).lines().filter(|l| l.contains(" tree ")).count();

    // No tree kept alive between opens: every open builds its view again.
    let options = StoreOptions { keep_recent_trees: 0, ..StoreOptions::default() };
    let store = RepoStore::open_with(fx.path("store"), options).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let listed = |id: &str| {
        let tree = repo.tree(id, TreeKind::View).expect("view");
        tree.files().iter().map(|f| f.path.clone()).collect::<Vec<_>>()
    };
    let git_files = |id: &str| {
        let mut files: Vec<String> =
            git(&src, &["ls-tree", "-r", "--name-only", id]).lines().map(String::from).collect();
        files.sort();
        files
    };
    assert_eq!(listed(&first), git_files(&first));
    assert_eq!(repo.tree_cache_stats().decoded, trees_of(&first) as u64, "each tree of the first commit once");
    // The second commit changed one file four levels down: the root, pkg, pkg/core and
    // pkg/core/deep are new trees; docs and pkg/util are shared.
    assert_eq!(listed(&second), git_files(&second));
    assert_eq!(repo.tree_cache_stats().decoded, trees_of(&first) as u64 + 4);
    // Opening a commit again decodes nothing.
    let decoded = repo.tree_cache_stats().decoded;
    assert_eq!(listed(&first), git_files(&first));
    assert_eq!(repo.tree_cache_stats().decoded, decoded);
    assert!(repo.tree_cache_stats().hits > 0);
}
