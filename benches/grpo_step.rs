//! One GRPO step — 8 prompts × 8 rollouts × ≤ 4 turns — on a generated
//! repository (the synthetic source's default size: ~300 files, 8 commits)
//! with the CPU proxy policy (`models::proxy`) and the CodeGrep-style reward
//! `Fb(file) * mask(c > 0)`. Target: under 2 s on 2 cores.
//!
//! The group puts the engine beside its baseline: the same step with the
//! sandbox limited to one tool call in flight (`serial-tools`), which is what
//! running the rollouts' calls one after another costs. Before measuring, one
//! step of each is timed by phase (rollout policy time, tools, reward, update)
//! and printed, since criterion reports only the total.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rewardlab_framework::engine::{Engine, EngineConfig, LrSchedule, OptimConfig, RewardVariant, TaskSet};
use rewardlab_framework::synthetic::{self, SyntheticConfig};
use rewardlab_models::proxy::{ProxyPolicy, RECOMMENDED_LR};
use rewardlab_sandbox::{Limits, RepoStore, Sandbox};

const REWARD: &str = "reward = Fb(file) * mask(c > 0)\n";

struct Setup {
    _dir: tempfile::TempDir,
    tasks: Arc<TaskSet>,
    store: Arc<RepoStore>,
    variant: Arc<RewardVariant>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = synthetic::generate(&SyntheticConfig::default(), &dir.path().join("synthetic").join("repo.git"))
        .expect("generate");
    let tasks = Arc::new(TaskSet::from_synthetic(&source, 0.15).expect("tasks"));
    let store = Arc::new(RepoStore::open(dir.path().join("store")).expect("store"));
    let variant = Arc::new(RewardVariant::compile("codegrep", REWARD, 8, &[]).expect("reward compiles"));
    Setup { _dir: dir, tasks, store, variant }
}

fn engine(s: &Setup, concurrent_calls: usize) -> Engine<ProxyPolicy> {
    let config = EngineConfig {
        group_size: 8,
        prompts_per_step: 8,
        total_steps: 1_000_000,
        eval_every: 0,
        checkpoint_every: 0,
        runtime_threads: 2,
        optim: OptimConfig { lr: RECOMMENDED_LR, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..EngineConfig::default()
    };
    let limits = Limits { max_concurrent_calls: concurrent_calls, ..Limits::default() };
    let sandbox = Sandbox::new(s.store.clone(), limits);
    Engine::new(config, ProxyPolicy::default(), s.tasks.clone(), sandbox, s.variant.clone()).expect("engine")
}

fn grpo_step(c: &mut Criterion) {
    let s = setup();
    for (name, calls) in [("engine", 64), ("serial-tools", 1)] {
        let mut e = engine(&s, calls);
        // Warm the tree index and blob cache, then time one step by phase.
        e.step().expect("warm-up step");
        let t = e.step().expect("timed step").timings;
        let m = e.step().expect("step").metrics;
        println!(
            "grpo_step/{name}: rollout {:.3} s, tools {:.3} s, reward {:.4} s, update {:.4} s; {:.1} calls and {:.2} turns per rollout",
            t.rollout_s, t.tools_s, t.reward_s, t.update_s, m.calls, m.turns
        );
    }
    let mut group = c.benchmark_group("grpo_step");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for (name, calls) in [("engine", 64), ("serial-tools", 1)] {
        let mut e = engine(&s, calls);
        e.step().expect("warm-up step");
        group.bench_function(name, |b| b.iter(|| e.step().expect("step")));
    }
    group.finish();
}

criterion_group!(benches, grpo_step);
criterion_main!(benches);
