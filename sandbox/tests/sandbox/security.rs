//! Hostile paths and patterns never reach anything outside the tree, on both tree kinds; in-repo
//! symlinks that stay inside work.

use std::path::Path;

use rewardlab_sandbox::{ErrorKind, RepoStore, Status, StoreOptions, ToolResult, Tree, TreeKind};
use serde_json::{Value, json};

use crate::sandbox::helpers::{Fixture, call, commit_all, init, symlink, write};

const SENTINEL: &str = "SENTINEL-OUTSIDE-7f3a";

/// A repository full of symlinks, good and bad, next to an `outside/` directory holding secrets.
fn hostile_repo(fx: &Fixture) -> std::path::PathBuf {
    let outside = fx.path("outside");
    write(&outside, "secret.txt", format!("{SENTINEL} secret\n"));
    write(&outside, "certs/ca.pem", format!("-----BEGIN CERTIFICATE-----\n{SENTINEL}\n"));
    let outside = std::fs::canonicalize(&outside).expect("outside exists");
    let outside_abs = outside.to_str().expect("utf-8");
    let outside_rel = format!("{}{}", "../".repeat(24), outside_abs.trim_start_matches('/'));

    let src = fx.path("evil/corp");
    init(&src);
    write(&src, "README.md", "hello from inside\n");
    write(&src, "docs/guide.md", "guide inside\n");
    write(&src, "src/app.py", "print('inside')\n");
    // Symlinks that stay inside.
    symlink(&src, "link_readme", "README.md");
    symlink(&src, "docs_link", "docs");
    symlink(&src, "chain1", "chain2");
    symlink(&src, "chain2", "docs_link/guide.md");
    symlink(&src, "src/up", "../README.md");
    symlink(&src, "self_dir", ".");
    // Symlinks that leave: directly, relatively, through chains and through directories.
    symlink(&src, "passwd", "/etc/passwd");
    symlink(&src, "rel_passwd", &format!("{}etc/passwd", "../".repeat(24)));
    symlink(&src, "secret_abs", &format!("{outside_abs}/secret.txt"));
    symlink(&src, "secret_rel", &format!("{outside_rel}/secret.txt"));
    symlink(&src, "certs", &format!("{outside_abs}/certs"));
    symlink(&src, "certs_rel", &format!("{outside_rel}/certs"));
    symlink(&src, "chain_out1", "chain_out2");
    symlink(&src, "chain_out2", "passwd");
    symlink(&src, "src/escape", "../../outside/secret.txt");
    symlink(&src, "inner_up", "src/../..");
    symlink(&src, "dotgit", ".git");
    symlink(&src, "dotgit_config", ".git/config");
    // Loops.
    symlink(&src, "loop_a", "loop_b");
    symlink(&src, "loop_b", "loop_a");
    symlink(&src, "loop_self", "loop_self");
    symlink(&src, "loop_dir", "loop_dir/x");
    commit_all(&src, "hostile");
    src
}

/// Reads, globs and greps that must not reach outside the tree.
fn hostile_calls() -> Vec<Value> {
    let reads = [
        "../README.md",
        "../../etc/passwd",
        "/etc/passwd",
        "//etc/passwd",
        "src/../../etc/passwd",
        "a\0b",
        "README.md\0.png",
        ".git/config",
        ".git/HEAD",
        "./.git/config",
        "src/../.git/config",
        ".GIT/config",
        "passwd",
        "rel_passwd",
        "secret_abs",
        "secret_rel",
        "certs/ca.pem",
        "certs_rel/ca.pem",
        "certs",
        "chain_out1",
        "chain_out2",
        "src/escape",
        "inner_up/etc/passwd",
        "inner_up/outside/secret.txt",
        "dotgit/config",
        "dotgit_config",
        "loop_a",
        "loop_b",
        "loop_self",
        "loop_dir",
        "loop_a/x",
        "self_dir/passwd",
        "self_dir/certs/ca.pem",
        "self_dir/../../etc/passwd",
        "src/up/../../etc/passwd",
        "..\\..\\etc\\passwd",
        "%2e%2e/%2e%2e/etc/passwd",
        "~/.ssh/id_rsa",
        "docs_link/../../etc/passwd",
    ];
    let mut calls: Vec<Value> = reads.iter().map(|p| json!({"tool": "read", "args": {"path": p}})).collect();
    for pattern in
        ["../*", "/etc/*", "certs/*", "certs/**", "certs_rel/**", "**/../*", "self_dir/**", ".git/*", "loop_a/**"]
    {
        calls.push(json!({"tool": "glob", "args": {"pattern": pattern}}));
    }
    for (pattern, path) in [
        ("root", Some("../*")),
        ("root", Some("/etc/*")),
        ("BEGIN CERT", Some("certs/**")),
        (SENTINEL, None),
        ("root:x", None),
        (SENTINEL, Some("secret_abs")),
        (SENTINEL, Some("certs_rel")),
        ("core", Some(".git/**")),
    ] {
        calls.push(json!({"tool": "grep", "args": {"pattern": pattern, "path": path}}));
    }
    calls
}

/// An escape is any sign of outside content, or an entity naming a path the tree does not track.
fn escaped(tree: &Tree, result: &ToolResult) -> bool {
    let tracked: Vec<&str> = tree.files().iter().map(|f| f.path.as_str()).collect();
    let outside_content =
        result.output.contains(SENTINEL) || result.output.contains("root:x:0:0") || result.output.contains("[core]");
    let foreign_entity = result.entities.iter().any(|e| !tracked.contains(&e.path()));
    outside_content || foreign_entity
}

#[test]
fn hostile_inputs_never_escape_either_tree_kind() {
    let fx = Fixture::new();
    let src = hostile_repo(&fx);
    let store = RepoStore::open_with(fx.path("store"), StoreOptions::default()).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let limits = rewardlab_sandbox::Limits::default();
    let calls = hostile_calls();
    assert!(calls.len() >= 40, "the corpus has {} inputs", calls.len());
    for kind in [TreeKind::View, TreeKind::Worktree] {
        let tree = repo.tree("HEAD", kind).expect("tree");
        let mut escapes = Vec::new();
        for input in &calls {
            let result = call(&tree, &limits, input.clone());
            if escaped(&tree, &result) {
                escapes.push(format!("{input} -> {:?}", result.output));
            }
            if input["tool"] == "read" {
                assert!(
                    matches!(
                        result.status,
                        Status::Error(ErrorKind::Refused | ErrorKind::NotFound | ErrorKind::IsDirectory)
                    ),
                    "{kind}: {input} gave {:?}: {}",
                    result.status,
                    result.output
                );
            }
        }
        assert!(escapes.is_empty(), "{kind}: {} escapes:\n{}", escapes.len(), escapes.join("\n"));
        // The specific refusals carry a reason a policy can act on.
        let loop_msg = call(&tree, &limits, json!({"tool": "read", "args": {"path": "loop_a"}}));
        assert_eq!(loop_msg.status, Status::Error(ErrorKind::Refused), "{kind}: {}", loop_msg.output);
        let passwd = call(&tree, &limits, json!({"tool": "read", "args": {"path": "passwd"}}));
        assert_eq!(passwd.status, Status::Error(ErrorKind::Refused), "{kind}: {}", passwd.output);
        let certs = call(&tree, &limits, json!({"tool": "read", "args": {"path": "certs/ca.pem"}}));
        assert_eq!(certs.status, Status::Error(ErrorKind::Refused), "{kind}: {}", certs.output);
        let dotdot = call(&tree, &limits, json!({"tool": "read", "args": {"path": "../x"}}));
        assert!(dotdot.output.contains("`..` is refused"), "{}", dotdot.output);
    }
}

#[test]
fn symlinks_that_stay_inside_work_on_both_kinds() {
    let fx = Fixture::new();
    let src = hostile_repo(&fx);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let limits = rewardlab_sandbox::Limits::default();
    for kind in [TreeKind::View, TreeKind::Worktree] {
        let tree = repo.tree("HEAD", kind).expect("tree");
        for (path, expected) in [
            ("link_readme", "hello from inside"),
            ("docs_link/guide.md", "guide inside"),
            ("chain1", "guide inside"),
            ("src/up", "hello from inside"),
            ("self_dir/README.md", "hello from inside"),
            ("self_dir/self_dir/docs_link/guide.md", "guide inside"),
            ("./src//app.py", "print('inside')"),
        ] {
            let result = call(&tree, &limits, json!({"tool": "read", "args": {"path": path}}));
            assert_eq!(result.status, Status::Ok, "{kind}: {path}: {}", result.output);
            assert_eq!(result.output, format!("     1\t{expected}"), "{kind}: {path}");
        }
        let dir = call(&tree, &limits, json!({"tool": "read", "args": {"path": "docs_link"}}));
        assert_eq!(dir.status, Status::Error(ErrorKind::IsDirectory), "{kind}: {}", dir.output);
        // Glob lists the links themselves (they are tracked paths) but never what they point at.
        let listed = call(&tree, &limits, json!({"tool": "glob", "args": {"pattern": "docs_link/*"}}));
        assert!(listed.entities.is_empty(), "{kind}: {:?}", listed.entities);
        let grep = call(&tree, &limits, json!({"tool": "grep", "args": {"pattern": "inside"}}));
        assert_eq!(grep.entities, ["README.md:1", "docs/guide.md:1", "src/app.py:1"], "{kind}: grep skips symlinks");
    }
}

#[test]
fn both_kinds_list_the_same_paths() {
    let fx = Fixture::new();
    let src = hostile_repo(&fx);
    let store = RepoStore::open(fx.path("store")).expect("store");
    let repo = store.repo(src.to_str().expect("utf-8")).expect("clone");
    let view = repo.tree("HEAD", TreeKind::View).expect("view");
    let worktree = repo.tree("HEAD", TreeKind::Worktree).expect("worktree");
    assert_eq!(view.files(), worktree.files());
    assert!(Path::new(worktree.root().expect("on disk")).join("passwd").is_symlink());
}
