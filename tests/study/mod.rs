//! `study` runs as a process: resume after SIGKILL, the real task sources,
//! failing runs and skipped runs.

mod merge;
mod paired;
mod resume;
mod shadow;
mod sources;

use std::path::Path;
use std::process::{Command, Output};

pub use crate::cli::write;
use crate::cli::{stderr, stdout};

/// `study ARGS...` in `cwd`, to completion.
pub fn study(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_study")).args(args).current_dir(cwd).output().expect("the study binary runs")
}

/// Panics with both streams unless the command (`what`) exited 0.
pub fn assert_ok(o: &Output, what: &str) {
    assert!(o.status.success(), "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{}", o.status.code(), stdout(o), stderr(o));
}

/// The `step` column of a `metrics.csv`.
pub fn steps(metrics: &Path) -> Vec<usize> {
    let text = std::fs::read_to_string(metrics).unwrap_or_else(|e| panic!("{}: {e}", metrics.display()));
    text.lines().skip(1).map(|l| l.split(',').next().and_then(|s| s.parse().ok()).expect("a step number")).collect()
}

/// A proxy-policy study on a small synthetic source, two variants × one seed.
pub fn synthetic_study(name: &str, total_steps: usize, checkpoint_every: usize) -> String {
    let variants = r#"[[variants]]
name = "fb"
reward = 'Fb(file)'

[[variants]]
name = "gated"
reward = 'Fb(file) * mask(c > 0)'
advantage = 'adv * sqrt(min(c / 4, 1))'
"#;
    proxy_study(name, 1, total_steps, checkpoint_every, variants)
}

/// A proxy-policy study on a small synthetic source (seconds per run) with
/// the given `[[variants]]` tables.
pub fn proxy_study(name: &str, seeds: usize, total_steps: usize, checkpoint_every: usize, variants: &str) -> String {
    format!(
        r#"name = "{name}"
seeds = {seeds}

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

{variants}"#
    )
}
