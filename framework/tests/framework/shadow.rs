//! Shadow variants in the engine: every step writes one `shadow.csv` row per
//! shadow variant, the rows are deterministic, the trained run is unchanged by
//! its shadows, and a killed run resumes with no duplicated or lost row.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rewardlab_framework::engine::shadow::read_shadow;
use rewardlab_framework::engine::{
    Engine, EngineConfig, LrSchedule, METRICS_FILE, OptimConfig, RewardVariant, SHADOW_FILE, TaskSet, latest_checkpoint,
};
use rewardlab_framework::synthetic::{self, SyntheticConfig};
use rewardlab_sandbox::{Limits, RepoStore, Sandbox};

use crate::common::scratch;
use crate::toy::ToyPolicy;

fn tasks() -> Arc<TaskSet> {
    static TASKS: OnceLock<Arc<TaskSet>> = OnceLock::new();
    TASKS
        .get_or_init(|| {
            let config = SyntheticConfig { seed: 5, files: 60, commits: 2, tasks: 16, held_out_fraction: 0.25 };
            let source = synthetic::generate(&config, &scratch("shadow-source")).expect("generate a small source");
            Arc::new(TaskSet::from_synthetic(&source, 0.15).expect("synthetic tasks convert"))
        })
        .clone()
}

fn sandbox(name: &str) -> Sandbox {
    let store = RepoStore::open(scratch(&format!("shadow-store-{name}"))).expect("open a repo store");
    Sandbox::new(Arc::new(store), Limits::default())
}

fn variant(name: &str, source: &str) -> Arc<RewardVariant> {
    Arc::new(RewardVariant::compile(name, source, 4, &[]).expect("the reward compiles"))
}

fn trained() -> Arc<RewardVariant> {
    variant("trained", "reward = Fb(file) * mask(c > 0)\n")
}

/// The trained variant among them (skipped), its scaled twin, its negation and a centred F1.
fn shadows() -> Vec<Arc<RewardVariant>> {
    vec![
        trained(),
        variant("double", "reward = 2 * Fb(file) * mask(c > 0)\n"),
        variant("negated", "reward = -Fb(file) * mask(c > 0)\n"),
        variant("f1", "reward = F1(file)\nadv = reward - group.mean(reward)\n"),
    ]
}

fn config(shadow: bool) -> EngineConfig {
    EngineConfig {
        seed: 11,
        group_size: 4,
        prompts_per_step: 4,
        total_steps: 4,
        checkpoint_every: 2,
        eval_every: 2,
        eval_tasks: Some(3),
        shadow,
        optim: OptimConfig { lr: 0.05, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..EngineConfig::default()
    }
}

fn engine(shadow: bool, name: &str) -> Engine<ToyPolicy> {
    let e = Engine::new(config(shadow), ToyPolicy::default(), tasks(), sandbox(name), trained()).expect("starts");
    if shadow { e.with_shadows(shadows()) } else { e }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn shadows_write_one_row_per_step_and_variant_and_change_no_training() {
    let dir = scratch("shadow-on");
    engine(true, "shadow-on").run(&dir, |_| {}).expect("runs");
    let rows = read_shadow(&dir.join(SHADOW_FILE)).expect("shadow.csv parses");
    let keys: Vec<(usize, &str)> = rows.iter().map(|r| (r.step, r.variant.as_str())).collect();
    let expected: Vec<(usize, &str)> = (1..=4).flat_map(|s| ["double", "negated", "f1"].map(|v| (s, v))).collect();
    assert_eq!(keys, expected, "the trained variant is not its own shadow");
    for r in &rows {
        match r.variant.as_str() {
            // Same ranking within each group (up to the epsilon, which never reorders).
            "double" => {
                assert!(r.kendall_tau_b.is_none_or(|t| t == 1.0) && r.sign_flips == 0.0, "{r:?}");
                assert!(r.pearson.is_none_or(|p| p > 0.9), "{r:?}");
            }
            // Every non-zero advantage changes sign, rankings reverse.
            "negated" => assert!(r.kendall_tau_b.is_none_or(|t| t == -1.0), "{r:?}"),
            _ => {}
        }
    }
    assert!(rows.iter().any(|r| r.variant == "negated" && r.sign_flips > 0.0), "{rows:?}");

    let plain = scratch("shadow-off");
    engine(false, "shadow-off").run(&plain, |_| {}).expect("runs");
    assert_eq!(read(&dir.join(METRICS_FILE)), read(&plain.join(METRICS_FILE)), "shadows train nothing");
    assert!(!plain.join(SHADOW_FILE).exists());

    let again = scratch("shadow-again");
    engine(true, "shadow-again").run(&again, |_| {}).expect("runs");
    assert_eq!(read(&dir.join(SHADOW_FILE)), read(&again.join(SHADOW_FILE)), "deterministic");
}

#[test]
fn a_killed_run_resumes_without_duplicated_or_lost_shadow_rows() {
    let straight = scratch("shadow-straight");
    engine(true, "shadow-straight").run(&straight, |_| {}).expect("runs");

    // Killed after step 3 (checkpoint at 2) while writing a row of step 4.
    let dir = scratch("shadow-killed");
    let mut first = engine(true, "shadow-killed");
    first.run_steps(&dir, 3, |_| {}).expect("three steps");
    drop(first);
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.join(SHADOW_FILE)).expect("shadow.csv");
    std::io::Write::write_all(&mut file, b"4,double,0.5").expect("a torn line");
    drop(file);
    assert_eq!(read(&dir.join(SHADOW_FILE)).matches('\n').count(), 1 + 3 * 3, "header and steps 1 to 3");
    let checkpoint = latest_checkpoint(&dir).expect("a checkpoint exists");
    let resumed = Engine::resume(&checkpoint, ToyPolicy::default(), tasks(), sandbox("shadow-resumed"), trained())
        .expect("resume");
    let mut resumed = resumed.with_shadows(shadows());
    assert_eq!(resumed.steps_done(), 2);
    resumed.run(&dir, |_| {}).expect("the rest of the run");
    assert_eq!(read(&straight.join(SHADOW_FILE)), read(&dir.join(SHADOW_FILE)), "step 3 once, step 4 complete");
}
