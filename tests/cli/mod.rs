//! `rewardlab` subcommands run as processes.

mod check;
mod eval;
mod help;
mod parquet;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (where `rewards/` lives).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn rewardlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rewardlab"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the rewardlab binary runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path
}
