//! Throwaway git repositories for the tests, made with the `git` CLI.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use rewardlab_sandbox::{Limits, RunTool, ToolCall, ToolResult, Tree};

/// Runs `git` in `dir` with a fixed identity and no user or system configuration, returning
/// stdout; panics with stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_command(dir).args(args).output().expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?} failed in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("git prints UTF-8 here")
}

pub fn git_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .args(["-c", "core.quotepath=false", "-c", "init.defaultBranch=main"]);
    command
}

pub fn write(root: &Path, path: &str, content: impl AsRef<[u8]>) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("files have a parent")).expect("mkdir -p");
    std::fs::write(full, content).expect("write file");
}

pub fn symlink(root: &Path, path: &str, target: &str) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("links have a parent")).expect("mkdir -p");
    std::os::unix::fs::symlink(target, full).expect("symlink");
}

pub fn init(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir repo");
    git(dir, &["init", "-q"]);
}

/// Stages everything and commits; returns the commit id.
pub fn commit_all(dir: &Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
    git(dir, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// A tiny deterministic generator, so generated repositories are the same on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "request",
    "response",
    "session",
    "adapter",
    "header",
    "cookie",
    "timeout",
    "retry",
    "proxy",
    "stream",
    "encode",
    "decode",
    "Content-Length",
    "auth",
    "token",
    "cache",
    "url",
    "json",
    "ünïcode",
    "données",
];

/// A Python-ish source file with functions, classes, imports and the odd TODO.
pub fn python_file(rng: &mut Rng, lines: usize) -> String {
    let mut out = String::new();
    out.push_str(&format!("import {}\n", rng.pick(WORDS).to_lowercase().replace('-', "_")));
    for i in 0..lines {
        let word = rng.pick(WORDS);
        match rng.below(9) {
            0 => out.push_str(&format!("def {}_{i}(x, y):\n", word.to_lowercase().replace('-', "_"))),
            1 => out.push_str(&format!("class {}{i}:\n", capitalise(word))),
            2 => out.push_str(&format!("    # TODO: handle {word} {i}\n")),
            3 => out.push_str(&format!("    return {word:?} + str(x)\n")),
            4 => out.push('\n'),
            5 => out.push_str(&format!("    # FIXME {word}\n")),
            _ => out.push_str(&format!("    value_{i} = compute({word:?}, {})\n", rng.below(1000))),
        }
    }
    out
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// A repository with `commits` commits over nested packages, tests, docs, an executable, a
/// binary file, an empty file, a file without a final newline, in-repo symlinks and non-ASCII
/// names. Returns the commit ids, oldest first.
pub fn generated_repo(dir: &Path, seed: u64, commits: usize) -> Vec<String> {
    init(dir);
    let mut rng = Rng::new(seed);
    for p in 0..3 {
        for m in 0..4 {
            let lines = 5 + rng.below(40) as usize;
            write(dir, &format!("src/pkg{p}/mod{m}.py"), python_file(&mut rng, lines));
        }
        write(dir, &format!("src/pkg{p}/__init__.py"), "");
    }
    for t in 0..3 {
        let lines = 10 + rng.below(20) as usize;
        write(dir, &format!("tests/test_{t}.py"), python_file(&mut rng, lines));
    }
    write(dir, "README.md", "# Demo\n\nA request/response library.\nTODO: docs\n");
    write(dir, "docs/guide.md", "Guide\n=====\n\nUse the session.\n");
    write(dir, "docs/ünï.md", "Ünïcode names work.\n");
    write(dir, "setup.py", "from setuptools import setup\nsetup(name='demo')");
    write(dir, "scripts/run.sh", "#!/bin/sh\necho run request\n");
    std::fs::set_permissions(dir.join("scripts/run.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    write(dir, "data/blob.bin", b"\x00\x01binary request\x00\n".repeat(4));
    symlink(dir, "src/current.py", "pkg0/mod0.py");
    symlink(dir, "docs_link", "docs");
    let mut ids = vec![commit_all(dir, "initial")];
    for c in 1..commits {
        // Each commit edits a few files, adds one and deletes one, so trees differ.
        for _ in 0..3 {
            let p = rng.below(3);
            let m = rng.below(4);
            let lines = 5 + rng.below(40) as usize;
            write(dir, &format!("src/pkg{p}/mod{m}.py"), python_file(&mut rng, lines));
        }
        let lines = 5 + rng.below(10) as usize;
        write(dir, &format!("src/extra/c{c}.py"), python_file(&mut rng, lines));
        if c % 2 == 0 {
            let _ = std::fs::remove_file(dir.join(format!("src/extra/c{}.py", c - 1)));
        }
        ids.push(commit_all(dir, &format!("commit {c}")));
    }
    ids
}

/// Feeds a `git fast-import` stream to a new bare repository at `dir` (fast for big data).
pub fn fast_import_bare(dir: &Path, stream: &[u8]) {
    std::fs::create_dir_all(dir).expect("mkdir bare");
    git(dir, &["init", "-q", "--bare"]);
    let mut child =
        git_command(dir).args(["fast-import", "--quiet"]).stdin(Stdio::piped()).spawn().expect("git fast-import runs");
    child.stdin.take().expect("stdin").write_all(stream).expect("write stream");
    assert!(child.wait().expect("fast-import finishes").success());
}

/// A fast-import commit on `refs/heads/main` with the given files (path, content).
pub fn fast_import_commit(stream: &mut Vec<u8>, mark: usize, parent: Option<usize>, files: &[(String, Vec<u8>)]) {
    let message = format!("commit {mark}");
    stream.extend_from_slice(
        format!(
            "commit refs/heads/main\nmark :{mark}\ncommitter Test <test@example.com> 1767225600 +0000\ndata {}\n{message}\n",
            message.len()
        )
        .as_bytes(),
    );
    if let Some(parent) = parent {
        stream.extend_from_slice(format!("from :{parent}\n").as_bytes());
    }
    for (path, content) in files {
        stream.extend_from_slice(format!("M 100644 inline {path}\ndata {}\n", content.len()).as_bytes());
        stream.extend_from_slice(content);
        stream.push(b'\n');
    }
}

/// Limits under which output is never cut, for comparing against git.
pub fn unlimited_output() -> Limits {
    Limits { max_output_chars: 1 << 40, max_line_chars: 1 << 20, ..Limits::default() }
}

pub fn call(tree: &Tree, limits: &Limits, json: serde_json::Value) -> ToolResult {
    let call = ToolCall::from_json(&json).unwrap_or_else(|r| panic!("invalid test call {json}: {}", r.output));
    call.run(tree, limits)
}

/// A store in its own temp dir, and the directory of a source repository beside it.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Fixture { tmp: tempfile::tempdir().expect("tempdir") }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
}
