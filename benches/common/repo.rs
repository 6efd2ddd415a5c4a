//! What the sandbox benches share: a generated repository's paths, `git` run without the
//! user's configuration, and a deterministic generator (so a cached repository is the same on
//! every machine).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A generated repository: its store, its bare repository, a checkout for `git grep`, a
/// scratch directory, and its commits in order.
pub struct Fixture {
    pub store_dir: PathBuf,
    pub bare: PathBuf,
    pub checkout: PathBuf,
    pub scratch: PathBuf,
    pub commits: Vec<String>,
}

/// `git ARGS` in `dir`; panics with git's stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A `git` command in `dir` that reads no global or system configuration.
pub fn git_cmd(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir).env("GIT_CONFIG_GLOBAL", "/dev/null").env("GIT_CONFIG_NOSYSTEM", "1");
    c
}

/// xorshift64: deterministic, so the cached repository is the same on every machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    #[allow(dead_code, reason = "one of the two benches picks words")]
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}
