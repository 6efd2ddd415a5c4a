//! `study` runs as a process: resume after SIGKILL, the real task sources,
//! failing runs and skipped runs.

mod resume;
mod sources;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `study ARGS...` in `cwd`, to completion.
pub fn study(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_study")).args(args).current_dir(cwd).output().expect("the study binary runs")
}

/// Panics with both streams unless the command exited 0.
pub fn assert_ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path
}

/// The `step` column of a `metrics.csv`.
pub fn steps(metrics: &Path) -> Vec<usize> {
    let text = std::fs::read_to_string(metrics).unwrap_or_else(|e| panic!("{}: {e}", metrics.display()));
    text.lines().skip(1).map(|l| l.split(',').next().and_then(|s| s.parse().ok()).expect("a step number")).collect()
}

/// A proxy-policy study on a small synthetic source, two variants × one seed.
pub fn synthetic_study(name: &str, total_steps: usize, checkpoint_every: usize) -> String {
    format!(
        r#"name = "{name}"
seeds = 1

[tasks]
source = "synthetic"
seed = 3
files = 40
commits = 2
tasks = 16
held_out_fraction = 0.25

[policy]
kind = "proxy"

[training]
total_steps = {total_steps}
prompts_per_step = 2
group_size = 4
eval_every = 4
checkpoint_every = {checkpoint_every}

[training.optim]
lr = 0.05
schedule = {{ kind = "constant" }}

[[variants]]
name = "fb"
reward = 'Fb(file)'

[[variants]]
name = "gated"
reward = 'Fb(file) * mask(c > 0)'
advantage = 'adv * sqrt(min(c / 4, 1))'
"#
    )
}
