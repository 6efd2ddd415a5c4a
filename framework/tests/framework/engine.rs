//! The GRPO engine end to end on a generated repository with the toy policy:
//! metrics, determinism across thread counts, bit-identical resume, the
//! policy-units-only loss, and the failure modes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use rewardlab_framework::engine::loss::{LossConfig, SequenceInput, grpo_loss};
use rewardlab_framework::engine::{
    EVAL_FILE, Engine, EngineConfig, EngineError, EvalRecord, LrSchedule, OptimConfig, Phase, RewardDevice,
    RewardVariant, TaskSet, TaskSource, latest_checkpoint,
};
use rewardlab_framework::study::error_chain;
use rewardlab_framework::synthetic::{self, SyntheticConfig};
use rewardlab_models::agent::{OptimStep, Policy, Sampling, StepStats, TaskPrompt, TurnInfo, TurnOutput};
use rewardlab_sandbox::{Entity, Limits, RepoStore, Sandbox, Status, ToolResult};

use crate::common::scratch;
use crate::toy::{ToyEpisode, ToyPolicy};

const REWARD: &str = "# file-level F-beta, degenerate rollouts masked\nreward = Fb(file) * mask(c > 0)\n";

/// A small generated source shared by the tests of this module.
fn tasks() -> Arc<TaskSet> {
    static TASKS: OnceLock<Arc<TaskSet>> = OnceLock::new();
    TASKS
        .get_or_init(|| {
            let config = SyntheticConfig { seed: 5, files: 60, commits: 2, tasks: 16, held_out_fraction: 0.25 };
            let source = synthetic::generate(&config, &scratch("engine-source")).expect("generate a small source");
            Arc::new(TaskSet::from_synthetic(&source, 0.15).expect("synthetic tasks convert"))
        })
        .clone()
}

fn sandbox(name: &str) -> Sandbox {
    let store = RepoStore::open(scratch(&format!("engine-store-{name}"))).expect("open a repo store");
    Sandbox::new(Arc::new(store), Limits::default())
}

fn variant(group_size: usize) -> Arc<RewardVariant> {
    Arc::new(RewardVariant::compile("fb-masked", REWARD, group_size, &[]).expect("the reward compiles"))
}

/// Small and fast, with two mini-batches so that ratios leave 1 and the optimiser state matters.
fn config() -> EngineConfig {
    EngineConfig {
        seed: 11,
        group_size: 4,
        prompts_per_step: 4,
        total_steps: 4,
        minibatches: 2,
        checkpoint_every: 0,
        eval_every: 2,
        eval_tasks: Some(3),
        optim: OptimConfig { lr: 0.05, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..EngineConfig::default()
    }
}

fn engine(config: EngineConfig, name: &str) -> Engine<ToyPolicy> {
    let g = config.group_size;
    Engine::new(config, ToyPolicy::default(), tasks(), sandbox(name), variant(g)).expect("engine starts")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run_to_end(config: EngineConfig, name: &str) -> PathBuf {
    let dir = scratch(name);
    let mut steps = Vec::new();
    engine(config, name).run(&dir, |r| steps.push(r.step)).expect("run completes");
    assert_eq!(steps, (1..=steps.len()).collect::<Vec<_>>(), "the callback sees every step in order");
    dir
}

#[test]
fn a_run_writes_one_flushed_row_per_step_with_eval_columns_on_eval_steps() {
    let dir = run_to_end(config(), "engine-basic");
    let mut reader = csv::Reader::from_path(dir.join("metrics.csv")).expect("metrics.csv");
    let header = reader.headers().expect("header").clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), 4);
    let col = |row: &csv::StringRecord, name: &str| -> String {
        row[header.iter().position(|h| h == name).unwrap_or_else(|| panic!("column {name}"))].to_owned()
    };
    let num = |row: &csv::StringRecord, name: &str| -> f64 { col(row, name).parse().expect("a number") };
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(num(row, "step"), (i + 1) as f64);
        for rate in ["valid_rate", "truncated_rate", "fb_file", "zero_std_groups", "clip_ratio"] {
            let v = num(row, rate);
            assert!((0.0..=1.0).contains(&v), "{rate} = {v}");
        }
        assert!(num(row, "turns") >= 1.0 && num(row, "turns") <= 4.0);
        assert!(num(row, "calls") > 0.0, "the toy policy searches");
        assert!(num(row, "units") > 0.0 && num(row, "entropy") > 0.0);
        assert!(num(row, "kl") >= 0.0, "k3 is non-negative");
        let eval = col(row, "eval_fb_mean");
        if (i + 1) % 2 == 0 {
            let v: f64 = eval.parse().expect("eval on eval steps");
            assert!((0.0..=1.0).contains(&v));
        } else {
            assert_eq!(eval, "", "no eval off eval steps");
        }
    }
    // After the first mini-batch update, the second sees a policy away from its reference.
    assert!(rows.iter().any(|r| num(r, "kl") > 0.0), "the policy moves away from its reference");
    let timings = read(&dir.join("timings.csv"));
    assert_eq!(timings.lines().count(), 5, "header and one row per step");
    assert!(timings.starts_with("step,rollout_s,tools_s,reward_s,update_s,eval_s,shadow_s,eval_tools_s\n"));
}

#[test]
fn the_same_seed_gives_byte_identical_metrics_whatever_the_thread_counts() {
    let run = |threads: usize, name: &str| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool");
        let dir = pool.install(|| run_to_end(EngineConfig { runtime_threads: threads, ..config() }, name));
        read(&dir.join("metrics.csv"))
    };
    let one = run(1, "engine-threads-1");
    let four = run(4, "engine-threads-4");
    assert_eq!(one, four);
    let other_seed = read(&run_to_end(EngineConfig { seed: 12, ..config() }, "engine-seed-12").join("metrics.csv"));
    assert_ne!(one, other_seed, "the seed matters");
}

#[test]
fn resuming_from_a_checkpoint_continues_bit_identically() {
    let config = EngineConfig { checkpoint_every: 2, log_rollouts: true, ..config() };
    let straight = run_to_end(config.clone(), "engine-straight");

    // Interrupted: 3 steps (a checkpoint after step 2, then one more row, as
    // if killed), then a fresh engine resumed from the checkpoint.
    let dir = scratch("engine-interrupted");
    let mut first = engine(config.clone(), "engine-interrupted");
    let done = first.run_steps(&dir, 3, |_| {}).expect("three steps");
    assert_eq!(done.steps_done, 3);
    drop(first);
    let checkpoint = latest_checkpoint(&dir).expect("a checkpoint exists");
    assert!(checkpoint.ends_with("step-000002"), "{}", checkpoint.display());
    assert_eq!(read(&dir.join("metrics.csv")).lines().count(), 4, "the killed run wrote row 3");
    let mut resumed = Engine::resume(
        &checkpoint,
        ToyPolicy::default(),
        tasks(),
        sandbox("engine-resumed"),
        variant(config.group_size),
    )
    .expect("resume");
    assert_eq!(resumed.steps_done(), 2);
    let summary = resumed.run(&dir, |_| {}).expect("the rest of the run");
    assert_eq!((summary.steps_run, summary.steps_done), (2, 4));

    assert_eq!(read(&straight.join("metrics.csv")), read(&dir.join("metrics.csv")));
    assert_eq!(read(&straight.join("rollouts.jsonl")), read(&dir.join("rollouts.jsonl")));
    assert_eq!(read(&straight.join(EVAL_FILE)), read(&dir.join(EVAL_FILE)));
    let a = std::fs::read(straight.join("checkpoints/step-000004/policy.json")).expect("final policy");
    let b = std::fs::read(dir.join("checkpoints/step-000004/policy.json")).expect("final policy");
    assert_eq!(a, b, "the final parameters and optimiser state are identical");
    // No temporary checkpoint directories are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("checkpoints"))
        .expect("checkpoints")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The lines of a run's `eval.jsonl`.
fn eval_records(dir: &Path) -> Vec<EvalRecord> {
    read(&dir.join(EVAL_FILE)).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

#[test]
fn eval_records_are_the_held_out_tasks_behind_the_eval_columns() {
    let dir = run_to_end(config(), "engine-eval-records");
    let records = eval_records(&dir);
    let set = tasks();
    let held: Vec<&str> = set.held_out().iter().take(3).map(|&i| set.tasks()[i].id.as_str()).collect();
    // `eval_every = 2` of 4 steps, `eval_tasks = 3`: the first three held-out tasks at steps 2 and 4.
    assert_eq!(records.len(), 6);
    for (k, r) in records.iter().enumerate() {
        assert_eq!((r.step, r.task.as_str()), (2 * (k / 3 + 1), held[k % 3]), "{r:?}");
        let task = set.tasks().iter().find(|t| t.id == r.task).expect("a task of the set");
        assert_eq!(r.repo, task.repo);
        // The scores are those of the answered files against the task's targets.
        let target = task.target.files.clone().unwrap_or_default();
        let (precision, recall, fb) = crate::common::file_scores(&r.files, &target);
        assert!((r.precision - precision).abs() < 1e-12 && (r.recall - recall).abs() < 1e-12, "{r:?}");
        assert!((r.fb - fb).abs() < 1e-12 && r.turns >= 1.0, "{r:?}");
    }
    // Their means are the metrics row's eval columns.
    let mut reader = csv::Reader::from_path(dir.join("metrics.csv")).expect("metrics.csv");
    let rows: Vec<rewardlab_framework::engine::MetricsRow> = reader.deserialize().map(|r| r.expect("row")).collect();
    for row in rows.iter().filter(|r| r.eval_fb_mean.is_some()) {
        let of_step: Vec<&EvalRecord> = records.iter().filter(|r| r.step == row.step).collect();
        let mean = |f: fn(&EvalRecord) -> f64| of_step.iter().map(|r| f(r)).sum::<f64>() / of_step.len() as f64;
        assert!((mean(|r| r.fb) - row.eval_fb_mean.expect("fb")).abs() < 1e-12);
        assert!((mean(|r| r.precision) - row.eval_precision.expect("p")).abs() < 1e-12);
        assert!((mean(|r| r.turns) - row.eval_turns.expect("turns")).abs() < 1e-12);
    }
    // Without eval steps the file is there, and empty.
    let none = run_to_end(EngineConfig { total_steps: 1, eval_every: 0, ..config() }, "engine-eval-none");
    assert_eq!(read(&none.join(EVAL_FILE)), "");
}

#[test]
fn a_killed_run_resumes_without_duplicated_or_lost_eval_records() {
    let config = EngineConfig { checkpoint_every: 2, eval_every: 1, ..config() };
    let straight = run_to_end(config.clone(), "engine-eval-straight");
    assert_eq!(eval_records(&straight).len(), 4 * 3, "three tasks at every step");

    // Killed after step 3 (checkpoint at 2) while writing a fourth line.
    let dir = scratch("engine-eval-killed");
    let mut first = engine(config.clone(), "engine-eval-killed");
    first.run_steps(&dir, 3, |_| {}).expect("three steps");
    drop(first);
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.join(EVAL_FILE)).expect("eval.jsonl");
    std::io::Write::write_all(&mut file, b"{\"step\":4,\"task\":\"half").expect("a torn line");
    drop(file);
    assert_eq!(complete_lines(&dir.join(EVAL_FILE)), 9, "rows of steps 1 to 3 before the resume");
    let checkpoint = latest_checkpoint(&dir).expect("a checkpoint exists");
    let mut resumed =
        Engine::resume(&checkpoint, ToyPolicy::default(), tasks(), sandbox("engine-eval-resumed"), variant(4))
            .expect("resume");
    resumed.run(&dir, |_| {}).expect("the rest of the run");
    assert_eq!(read(&straight.join(EVAL_FILE)), read(&dir.join(EVAL_FILE)), "step 3 once, step 4 complete");
}

/// How many complete (newline-terminated) lines the file at `path` holds.
fn complete_lines(path: &Path) -> usize {
    read(path).matches('\n').count()
}

#[test]
fn rollout_log_follows_the_contract() {
    let dir = run_to_end(EngineConfig { total_steps: 1, log_rollouts: true, eval_every: 0, ..config() }, "engine-log");
    let text = read(&dir.join("rollouts.jsonl"));
    let loaded = rewardlab_rewards::load_rollouts(text.as_bytes()).expect("read");
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.records.len(), 16, "4 prompts × 4 rollouts");
    for (_, r) in &loaded.records {
        let turns = r.turns.as_ref().expect("turns");
        assert!(!turns.is_empty() && turns.len() <= 4);
        assert!(turns.last().expect("a last turn").is_empty(), "the answer turn has no calls");
        assert!(r.target.as_ref().and_then(|t| t.files.as_ref()).is_some_and(|f| !f.is_empty()));
        assert!(r.completion_tokens.is_some() && r.valid.is_some() && r.truncated.is_some());
        for call in turns.iter().flatten() {
            assert!(["grep", "glob", "read"].contains(&call.tool.as_str()), "{}", call.tool);
            assert!(call.entities.is_some());
        }
    }
    let value: serde_json::Value = serde_json::from_str(text.lines().next().expect("a line")).expect("json");
    for key in ["step", "reward", "adv", "advantage", "group"] {
        assert!(value.get(key).is_some(), "{key}");
    }
}

#[test]
fn a_task_drawn_twice_in_a_step_gets_its_own_group() {
    let train = tasks().train().len();
    let config =
        EngineConfig { prompts_per_step: train + 2, total_steps: 1, eval_every: 0, minibatches: 1, ..config() };
    let outcome = engine(config, "engine-wrap").step().expect("a step across the epoch boundary");
    assert_eq!(outcome.metrics.step, 1);
}

#[test]
fn errors_are_loud_and_specific() {
    let err = RewardVariant::compile("bad", "reward = Fbeta(file)\n", 4, &[]).expect_err("unknown feature");
    assert!(err.to_string().contains("bad"), "{err}");
    assert!(!err.errors.is_empty());
    let err = RewardVariant::compile("p", REWARD, 4, &[("nope".into(), 1.0)]).expect_err("unknown param");
    assert!(err.to_string().contains("nope"), "{err}");

    let bad = EngineConfig { max_calls_per_turn: 9, ..config() };
    let err = Engine::new(bad, ToyPolicy::default(), tasks(), sandbox("bad"), variant(4)).expect_err("bad config");
    assert!(matches!(err, EngineError::Config(_)), "{err}");

    // A reward that is NaN or infinite at run time (the checker only warns
    // about a denominator that may be 0) stops the step, naming it.
    let nan = Arc::new(
        RewardVariant::compile("nan", "reward = Fb(file) / (c - c)\n", 4, &[]).expect("compiles with warnings"),
    );
    let mut e =
        Engine::new(EngineConfig { eval_every: 0, ..config() }, ToyPolicy::default(), tasks(), sandbox("nan"), nan)
            .expect("engine");
    let err = e.step().expect_err("non-finite reward");
    assert!(matches!(err, EngineError::Reward { step: 1, .. }), "{err}");

    // Resuming under another reward is refused.
    let dir =
        run_to_end(EngineConfig { total_steps: 1, checkpoint_every: 1, eval_every: 0, ..config() }, "engine-ckpt");
    let other = Arc::new(RewardVariant::compile("other", "reward = Fb(file)\n", 4, &[]).expect("compiles"));
    let err = Engine::resume(
        &latest_checkpoint(&dir).expect("checkpoint"),
        ToyPolicy::default(),
        tasks(),
        sandbox("other"),
        other,
    )
    .expect_err("another reward");
    assert!(matches!(err, EngineError::Checkpoint { .. }), "{err}");
    let mut finished = Engine::resume(
        &latest_checkpoint(&dir).expect("checkpoint"),
        ToyPolicy::default(),
        tasks(),
        sandbox("finished"),
        variant(4),
    )
    .expect("resume a finished run");
    assert!(matches!(finished.step(), Err(EngineError::Finished { steps: 1 })));
}

/// Plays one episode with a fixed seed, answering every call with `output`
/// and the same entities, and returns it.
fn play(policy: &ToyPolicy, output: &str) -> ToyEpisode {
    let prompt = TaskPrompt {
        id: "t".into(),
        text: "Calling `Settings.load_profile` raises \"profile name must be a string\" in config.loader".into(),
    };
    let mut episode = policy.begin(&prompt, Sampling::Sample { temperature: 1.0 }, 42).expect("begin");
    for index in 0..4 {
        let info = TurnInfo { index, max_turns: 4, max_calls_per_turn: 8, must_answer: index == 3 };
        match policy.act(&mut [&mut episode], info).expect("act").remove(0) {
            TurnOutput::Calls(calls) => {
                let results: Vec<ToolResult> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, _)| ToolResult {
                        output: format!("{output} (call {i})"),
                        entities: vec![
                            Entity::line(format!("pkg/mod{i}.py"), 10 + i as u64),
                            Entity::line("pkg/config.py", 3),
                        ],
                        status: Status::Ok,
                    })
                    .collect();
                policy.observe(&mut episode, &results).expect("observe");
            }
            _ => break,
        }
    }
    episode
}

#[test]
fn only_policy_units_enter_the_loss_tool_response_content_changes_nothing() {
    let mut theta = ToyPolicy::default().params().to_vec();
    theta[0] = 3.0; // search on every turn before the last, so responses are observed
    let mut policy = ToyPolicy::with_params(theta);
    let short = play(&policy, "x");
    let long = play(&policy, &"a very different and much longer tool response\n".repeat(40));
    assert!(long.context_chars() > short.context_chars() + 1000, "the responses differ and were observed");
    assert_eq!(short.choices(), long.choices(), "the same decisions");
    assert!(short.choices().len() > 5, "the episodes have units");
    assert_eq!(policy.completion_tokens(&short), policy.completion_tokens(&long), "responses are not completion");
    // Move the policy so that ratios and KL are not trivial.
    policy.backward(&[&short], &[vec![0.3; short.choices().len()]]).expect("backward");
    policy
        .step(&rewardlab_models::agent::OptimStep {
            lr: 0.2,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_grad_norm: None,
        })
        .expect("step");
    let loss_of = |e: &ToyEpisode| {
        let logp = policy.logprobs(&[e]).expect("logprobs").remove(0);
        let old = policy.sampled_logprobs(e);
        let reference = policy.reference_logprobs(&[e]).expect("reference_logprobs").remove(0);
        let out = grpo_loss(
            &LossConfig::default(),
            &[SequenceInput { advantage: 0.7, logp: &logp, logp_old: &old, logp_ref: &reference }],
        )
        .expect("valid");
        (logp, old, reference, out)
    };
    let (a, b) = (loss_of(&short), loss_of(&long));
    assert_eq!(a.0, b.0, "current log-probs");
    assert_eq!(a.1, b.1, "sampling log-probs");
    assert_eq!(a.2, b.2, "reference log-probs");
    assert_eq!(a.3, b.3, "loss, coefficients, clip ratio and KL");
    assert!(a.3.coeffs[0].iter().any(|&c| c != 0.0));
}

#[test]
fn grpo_moves_the_policy_towards_what_the_reward_asks() {
    // A reward for issuing many tool calls: the toy policy can learn it
    // through its search/answer and call-count decisions within a few steps.
    let reward = "reward = min(C, 12) / 12\n";
    let config = EngineConfig {
        total_steps: 8,
        eval_every: 0,
        minibatches: 1,
        loss: LossConfig { kl_beta: 0.0, ..LossConfig::default() },
        optim: OptimConfig { lr: 0.2, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..config()
    };
    let variant = Arc::new(RewardVariant::compile("calls", reward, config.group_size, &[]).expect("compiles"));
    let mut e = Engine::new(config, ToyPolicy::default(), tasks(), sandbox("learn"), variant).expect("engine");
    let calls: Vec<f64> = (0..8).map(|_| e.step().expect("step").metrics.calls).collect();
    let first = (calls[0] + calls[1]) / 2.0;
    let last = (calls[6] + calls[7]) / 2.0;
    assert!(last > first + 1.0, "mean calls per rollout went from {first} to {last}: {calls:?}");
}

#[test]
fn keeping_only_the_latest_checkpoint_prunes_the_older_ones() {
    let checkpoints = |config: EngineConfig, name: &str| -> Vec<String> {
        let dir = run_to_end(EngineConfig { checkpoint_every: 1, eval_every: 0, ..config }, name);
        let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
            .expect("checkpoints")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(checkpoints(config(), "engine-keep-all").len(), 4, "every checkpoint by default");
    let latest = EngineConfig { keep_only_latest_checkpoint: true, ..config() };
    assert_eq!(checkpoints(latest, "engine-keep-latest"), ["step-000004"]);
}

/// `reward_device = "cuda"`: on a machine with a GPU (and a `--features cuda`
/// build) a step's metrics equal the CPU backend's to the backends'
/// tolerance; everywhere else the engine refuses to start with the reason,
/// never a panic.
#[test]
fn the_cuda_reward_device_matches_the_cpu_or_refuses_to_start() {
    let cuda = EngineConfig { reward_device: RewardDevice::Cuda, eval_every: 0, total_steps: 1, ..config() };
    let g = cuda.group_size;
    match Engine::new(cuda.clone(), ToyPolicy::default(), tasks(), sandbox("cuda"), variant(g)) {
        Err(err) => {
            assert!(matches!(err, EngineError::RewardDevice { .. }), "{err}");
            let msg = error_chain(&err);
            assert!(msg.starts_with("reward_device = \"cuda\": "), "{msg}");
            assert!(msg.contains("CUDA"), "the reason names what is missing: {msg}");
        }
        Ok(mut on_gpu) => {
            let cpu = EngineConfig { reward_device: RewardDevice::Cpu, ..cuda };
            let mut on_cpu = Engine::new(cpu, ToyPolicy::default(), tasks(), sandbox("cuda-cpu"), variant(g))
                .expect("engine starts");
            let (gpu, cpu) = (on_gpu.step().expect("GPU step"), on_cpu.step().expect("CPU step"));
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b.abs().max(1.0);
            assert!(close(gpu.metrics.reward_mean, cpu.metrics.reward_mean), "{gpu:?} vs {cpu:?}");
            assert!(close(gpu.metrics.advantage_std, cpu.metrics.advantage_std), "{gpu:?} vs {cpu:?}");
            assert!(close(gpu.metrics.loss, cpu.metrics.loss), "{gpu:?} vs {cpu:?}");
        }
    }
}

/// The error [`Faulty`] injects.
#[derive(Debug, PartialEq)]
struct Injected(&'static str);

impl std::fmt::Display for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "injected failure in {}", self.0)
    }
}

impl std::error::Error for Injected {}

/// Where [`Faulty`] fails.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The `n`-th call of `begin` (1-based) and every later one.
    Begin(usize),
    Backward,
    State,
}

/// The toy policy, failing at one chosen point.
struct Faulty {
    inner: ToyPolicy,
    fault: Fault,
    begins: AtomicUsize,
}

impl Faulty {
    fn new(fault: Fault) -> Faulty {
        Faulty { inner: ToyPolicy::default(), fault, begins: AtomicUsize::new(0) }
    }
}

// The toy policy's error type is `Infallible`, so its results are unwrapped with `match x {}`.
impl Policy for Faulty {
    type Episode = ToyEpisode;
    type State = <ToyPolicy as Policy>::State;
    type Error = Injected;

    fn begin(&self, task: &TaskPrompt, sampling: Sampling, seed: u64) -> Result<ToyEpisode, Injected> {
        let n = self.begins.fetch_add(1, Ordering::SeqCst) + 1;
        if matches!(self.fault, Fault::Begin(at) if n >= at) {
            return Err(Injected("begin"));
        }
        self.inner.begin(task, sampling, seed).map_err(|e| match e {})
    }

    fn act(&self, episodes: &mut [&mut ToyEpisode], turn: TurnInfo) -> Result<Vec<TurnOutput>, Injected> {
        self.inner.act(episodes, turn).map_err(|e| match e {})
    }

    fn observe(&self, episode: &mut ToyEpisode, results: &[ToolResult]) -> Result<(), Injected> {
        self.inner.observe(episode, results).map_err(|e| match e {})
    }

    fn completion_tokens(&self, episode: &ToyEpisode) -> usize {
        self.inner.completion_tokens(episode)
    }

    fn sampled_logprobs(&self, episode: &ToyEpisode) -> Vec<f64> {
        self.inner.sampled_logprobs(episode)
    }

    fn entropy(&self, episode: &ToyEpisode) -> f64 {
        self.inner.entropy(episode)
    }

    fn logprobs(&self, episodes: &[&ToyEpisode]) -> Result<Vec<Vec<f64>>, Injected> {
        self.inner.logprobs(episodes).map_err(|e| match e {})
    }

    fn reference_logprobs(&self, episodes: &[&ToyEpisode]) -> Result<Vec<Vec<f64>>, Injected> {
        self.inner.reference_logprobs(episodes).map_err(|e| match e {})
    }

    fn backward(&mut self, episodes: &[&ToyEpisode], coeffs: &[Vec<f64>]) -> Result<(), Injected> {
        if matches!(self.fault, Fault::Backward) {
            return Err(Injected("backward"));
        }
        self.inner.backward(episodes, coeffs).map_err(|e| match e {})
    }

    fn step(&mut self, optim: &OptimStep) -> Result<StepStats, Injected> {
        self.inner.step(optim).map_err(|e| match e {})
    }

    fn state(&self) -> Result<Self::State, Injected> {
        if matches!(self.fault, Fault::State) {
            return Err(Injected("state"));
        }
        self.inner.state().map_err(|e| match e {})
    }

    fn restore(&mut self, state: Self::State) -> Result<(), Injected> {
        self.inner.restore(state).map_err(|e| match e {})
    }
}

/// The policy error a faulty engine stops with: step, phase, method and the injected source.
fn policy_error(err: &EngineError) -> (usize, Phase, &'static str, String) {
    match err {
        EngineError::Policy { step, phase, method, source } => (*step, *phase, *method, source.to_string()),
        other => panic!("expected a policy error, got {other:?}"),
    }
}

#[test]
fn a_policy_error_stops_the_run_naming_the_step_the_phase_and_the_method() {
    let faulty = |config: EngineConfig, fault: Fault, name: &str| {
        let g = config.group_size;
        Engine::new(config, Faulty::new(fault), tasks(), sandbox(name), variant(g)).expect("engine starts")
    };
    let quiet = EngineConfig { eval_every: 0, ..config() };
    // 4 prompts × 4 rollouts begin in each step's rollout phase: the 17th begin is step 2's.
    let mut e = faulty(quiet.clone(), Fault::Begin(17), "fault-rollout");
    assert_eq!(e.step().expect("step 1 runs").metrics.step, 1);
    let err = e.step().expect_err("step 2 fails");
    assert_eq!(policy_error(&err), (2, Phase::Rollout, "begin", "injected failure in begin".into()));
    // Display names the step, phase and method; the cause is the source, not repeated.
    assert_eq!(err.to_string(), "step 2, rollout phase: the policy's `begin` failed");
    assert_eq!(e.steps_done(), 1, "a failed step does not count");

    // With evaluation after every step, the 17th begin is step 1's first held-out rollout.
    let mut e = faulty(EngineConfig { eval_every: 1, ..config() }, Fault::Begin(17), "fault-eval");
    let err = e.step().expect_err("evaluation fails");
    assert_eq!(policy_error(&err), (1, Phase::Evaluate, "begin", "injected failure in begin".into()));

    let err = faulty(quiet.clone(), Fault::Backward, "fault-update").step().expect_err("the update fails");
    assert_eq!(policy_error(&err), (1, Phase::Update, "backward", "injected failure in backward".into()));

    // The checkpoint after step 1 asks for the policy's state.
    let dir = scratch("engine-fault-record");
    let err = faulty(EngineConfig { checkpoint_every: 1, ..quiet }, Fault::State, "fault-record")
        .run(&dir, |_| {})
        .expect_err("the checkpoint fails");
    assert_eq!(policy_error(&err), (1, Phase::Record, "state", "injected failure in state".into()));
    assert_eq!(read(&dir.join("metrics.csv")).lines().count(), 2, "the step's row was written before the checkpoint");
}

/// A variant whose first alert holds at every step (so it fires exactly at
/// step 3, after three steps running) and whose second never holds.
fn alerting(group_size: usize) -> Arc<RewardVariant> {
    let source = format!(
        "{REWARD}alert batch.count() > 0 && step.turns >= 1 for 3 steps : \"always\"\n\
         alert batch.max(reward) > 1 : \"never\"\n"
    );
    Arc::new(RewardVariant::compile("alerting", &source, group_size, &[]).expect("the reward compiles"))
}

#[test]
fn alert_streaks_survive_a_resume_and_stop_ends_the_run_with_a_checkpoint() {
    let config = EngineConfig { total_steps: 6, eval_every: 0, checkpoint_every: 2, ..config() };
    let run = |config: EngineConfig, name: &str| {
        let dir = scratch(name);
        let mut e =
            Engine::new(config.clone(), ToyPolicy::default(), tasks(), sandbox(name), alerting(4)).expect("engine");
        let mut seen = Vec::new();
        let summary = e.run(&dir, |r| seen.extend(r.alerts.iter().map(|a| (r.step, a.message.clone())))).expect("runs");
        (dir, summary, seen)
    };
    let (straight, summary, seen) = run(config.clone(), "engine-alerts-straight");
    assert_eq!(seen, [(3, "always".to_string())]);
    assert_eq!(summary.stopped_by, None);
    let alerts = read(&straight.join(rewardlab_framework::engine::ALERTS_FILE));
    assert_eq!(alerts, "step,alert,held,condition,message\n3,0,3,batch.count() > 0 && step.turns >= 1,always\n");

    // Interrupted after step 2 (its checkpoint holds a streak of 2): the
    // resumed run fires at step 3 as well, not three steps after the resume.
    let dir = scratch("engine-alerts-resumed");
    let mut first = Engine::new(config.clone(), ToyPolicy::default(), tasks(), sandbox("alerts-first"), alerting(4))
        .expect("engine");
    first.run_steps(&dir, 2, |_| {}).expect("two steps");
    drop(first);
    let checkpoint = latest_checkpoint(&dir).expect("a checkpoint");
    let mut resumed =
        Engine::resume(&checkpoint, ToyPolicy::default(), tasks(), sandbox("alerts-resumed"), alerting(4))
            .expect("resume");
    resumed.run(&dir, |_| {}).expect("the rest");
    assert_eq!(read(&dir.join(rewardlab_framework::engine::ALERTS_FILE)), alerts);
    assert_eq!(read(&dir.join("metrics.csv")), read(&straight.join("metrics.csv")));

    // `stop`: the run ends after step 3, with a checkpoint of step 3.
    let stop = EngineConfig { on_alert: rewardlab_framework::engine::OnAlert::Stop, ..config };
    let (dir, summary, _) = run(stop, "engine-alerts-stop");
    assert_eq!((summary.steps_done, summary.stopped_by.map(|f| f.step)), (3, Some(3)));
    assert!(latest_checkpoint(&dir).expect("a checkpoint").ends_with("step-000003"));
    assert_eq!(read(&dir.join("metrics.csv")).lines().count(), 4);
}
