//! The Qwen3 agent's two costs around a turn, each beside its baseline in one run, on the tiny
//! checkpoint (`rewardlab model tiny`: hidden 64, 2 layers) with the seeds' adapters (LoRA
//! r = 32, α = 64 on all seven projections):
//!
//! - `qwen3_rollout_4turns_b8`: one group of 8 rollouts of one issue, 4 turns (the last one
//!   forced), sampled in one batch of 8, with a tool response of ~10 grep lines after each
//!   turn. `kv_reuse` keeps each rollout's KV cache between turns (the default); `full_prefill`
//!   re-prefills the whole conversation every turn. Before measuring, one play of each is run:
//!   both must draw the same tokens, and their prefilled prompt tokens are printed.
//! - `qwen3_checkpoint_tiny`: the agent's state after one AdamW step with the SFT reference
//!   frozen (what a study checkpoints), saved and loaded as the engine does now
//!   (`policy.json` + `policy.safetensors`) and as the old single JSON of f32 bit patterns.
//!   Sizes are printed, with the same count applied to Qwen3-14B's shape; the count is checked
//!   against the tiny agent's real state first.

use std::path::Path;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group};
use rewardlab_framework::engine::checkpoint::{POLICY_JSON, POLICY_TENSORS, read_policy_state};
use rewardlab_models::agent::{OptimStep, Policy, PolicyState, Sampling, TaskPrompt, TurnInfo};
use rewardlab_models::lora::LoraConfig;
use rewardlab_models::policy::PolicyOptions;
use rewardlab_models::qwen3::Qwen3Config;
use rewardlab_models::state_tensors::write_state_tensors;
use rewardlab_models::tiny::{tiny_config, write_tiny_checkpoint};
use rewardlab_models::{AgentOptions, Qwen3Agent, Qwen3AgentState, Qwen3Episode};
use rewardlab_sandbox::{Status, ToolResult};

const ROLLOUTS: usize = 8;
const TURNS: usize = 4;
const TURN_TOKENS: usize = 32;
const ISSUE: &str = "Saving a session loses its cookies when the session is reused after a redirect.";

fn agent(dir: &Path, reuse_kv: bool, score_batch: usize) -> Qwen3Agent {
    let options = AgentOptions {
        max_new_tokens: TURN_TOKENS,
        max_completion_tokens: TURNS * TURN_TOKENS,
        sample_batch: ROLLOUTS,
        score_batch,
        gradient_checkpointing: false,
        reuse_kv,
        ..AgentOptions::default()
    };
    let policy = PolicyOptions { lora: LoraConfig { seed: 1, ..LoraConfig::default() }, ..PolicyOptions::default() };
    Qwen3Agent::load(dir, &policy, options).expect("load the tiny agent")
}

/// A grep result of ten lines, different per rollout and turn (so the caches differ in length).
fn tool_response(rollout: usize, turn: usize) -> ToolResult {
    let output: String = (0..10 + rollout % 3)
        .map(|i| format!("requests/sessions.py:{}:        self.cookies = cookiejar_from_dict({{}}) # {turn}\n", 40 + i))
        .collect();
    ToolResult { output, entities: vec![], status: Status::Ok }
}

/// One group: `ROLLOUTS` rollouts of the issue, `TURNS` turns, a tool response after each turn
/// but the last whatever the turn produced (the two KV paths must agree either way).
fn play(agent: &Qwen3Agent) -> Vec<Qwen3Episode> {
    let task = TaskPrompt { id: "bench".into(), text: ISSUE.into() };
    let mut episodes: Vec<Qwen3Episode> = (0..ROLLOUTS as u64)
        .map(|seed| agent.begin(&task, Sampling::Sample { temperature: 1.0 }, seed).expect("begin"))
        .collect();
    for t in 0..TURNS {
        let turn = TurnInfo { index: t, max_turns: TURNS, max_calls_per_turn: 8, must_answer: t + 1 == TURNS };
        let mut refs: Vec<&mut Qwen3Episode> = episodes.iter_mut().collect();
        agent.act(&mut refs, turn).expect("act");
        if t + 1 < TURNS {
            for (k, e) in episodes.iter_mut().enumerate() {
                agent.observe(e, &[tool_response(k, t)]).expect("observe");
            }
        }
    }
    episodes
}

/// LoRA parameters of `r`-rank adapters on all seven projections of `cfg`: `r · (in + out)` each.
fn lora_parameters(cfg: &Qwen3Config, r: usize) -> usize {
    let (h, q, kv, i) = (
        cfg.hidden_size,
        cfg.num_attention_heads * cfg.head_dim(),
        cfg.num_key_value_heads * cfg.head_dim(),
        cfg.intermediate_size,
    );
    let per_layer = [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)];
    cfg.num_hidden_layers * per_layer.iter().map(|(a, b)| r * (a + b)).sum::<usize>()
}

/// As the engine writes a checkpoint's policy part: the arrays to safetensors, the rest to JSON.
fn save_binary(dir: &Path, mut state: Qwen3AgentState) {
    let tensors = state.take_tensors();
    write_state_tensors(&dir.join(POLICY_TENSORS), &tensors).expect("write the binary part");
    std::fs::write(dir.join(POLICY_JSON), serde_json::to_vec(&state).expect("json")).expect("write the JSON part");
}

/// The old format: everything in `policy.json`, each f32 as its bit pattern.
fn save_json(dir: &Path, state: &Qwen3AgentState) {
    std::fs::write(dir.join(POLICY_JSON), serde_json::to_vec(state).expect("json")).expect("write the JSON");
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn rollouts(c: &mut Criterion, dir: &Path) {
    let with = agent(dir, true, ROLLOUTS);
    let without = agent(dir, false, ROLLOUTS);
    let (a, b) = (play(&with), play(&without));
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.rollout().tokens(), y.rollout().tokens(), "reuse must draw the tokens a full prefill draws");
    }
    let (reused, full) = (with.prefilled_tokens(), without.prefilled_tokens());
    let generated: usize = a.iter().map(|e| with.completion_tokens(e)).sum();
    println!(
        "qwen3_rollout_4turns_b8: prefilled prompt tokens per group: {reused} with KV reuse, {full} with a full \
         prefill each turn ({:.2}x fewer); {generated} tokens generated, {} tokens in the final transcripts",
        full as f64 / reused as f64,
        a.iter().map(|e| e.rollout().tokens().len()).sum::<usize>()
    );
    let mut g = c.benchmark_group("qwen3_rollout_4turns_b8");
    g.warm_up_time(Duration::from_secs(2)).measurement_time(Duration::from_secs(10)).sample_size(10);
    g.bench_function("kv_reuse", |bench| bench.iter(|| play(&with)));
    g.bench_function("full_prefill", |bench| bench.iter(|| play(&without)));
    g.finish();
}

fn checkpoints(c: &mut Criterion, dir: &Path) {
    // Scored one rollout at a time, on two rollouts: a 2.9k-token batch of 8 in one backward
    // pass would need several GB for its attention scores.
    let mut agent = agent(dir, true, 1);
    let episodes = play(&agent);
    let refs: Vec<&Qwen3Episode> = episodes.iter().take(2).collect();
    let coeffs: Vec<Vec<f64>> =
        refs.iter().enumerate().map(|(k, e)| vec![0.1 * (k as f64 - 3.5); agent.completion_tokens(e)]).collect();
    agent.backward(&refs, &coeffs).expect("backward");
    let optim =
        OptimStep { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, max_grad_norm: Some(1.0) };
    agent.step(&optim).expect("step");
    agent.freeze_reference().expect("freeze the SFT reference");
    let state = agent.state().expect("state");

    let lora = agent.lora_config().clone();
    let values: usize = state.vars.iter().map(|v| v.value.len()).sum();
    assert_eq!(values, lora_parameters(&tiny_config(), lora.r), "the count below follows the agent's real state");

    let tmp = tempfile::tempdir().expect("temp dir");
    let (binary, json) = (tmp.path().join("binary"), tmp.path().join("json"));
    std::fs::create_dir_all(&binary).expect("mkdir");
    std::fs::create_dir_all(&json).expect("mkdir");
    save_binary(&binary, state.clone());
    save_json(&json, &state);
    assert_eq!(read_policy_state::<Qwen3AgentState>(&binary).expect("load binary"), state, "binary round trip");
    assert_eq!(read_policy_state::<Qwen3AgentState>(&json).expect("load json"), state, "JSON round trip");
    let (bin_json, bin_tensors, old) =
        (size(&binary.join(POLICY_JSON)), size(&binary.join(POLICY_TENSORS)), size(&json.join(POLICY_JSON)));
    // Arrays: value and two moments per adapter matrix, plus the frozen reference.
    let arrays = 4 * values;
    println!(
        "qwen3_checkpoint_tiny (r = {}, {values} adapter values, {arrays} f32 with moments and reference): \
         binary {} B ({bin_tensors} B safetensors + {bin_json} B JSON), old JSON {old} B ({:.2}x; {:.2} B per value)",
        lora.r,
        bin_json + bin_tensors,
        old as f64 / (bin_json + bin_tensors) as f64,
        old as f64 / arrays as f64
    );
    let big = lora_parameters(&Qwen3Config::qwen3_14b(), lora.r);
    let gb = |bytes: f64| bytes / 1e9;
    println!(
        "  at Qwen3-14B, r = {}: {:.2} M adapter values; binary {:.2} GB ({:.2} GB with the SFT reference); \
         old JSON at the bytes per value above ≈ {:.2} GB ({:.2} GB with the reference)",
        lora.r,
        big as f64 / 1e6,
        gb(12.0 * big as f64),
        gb(16.0 * big as f64),
        gb(3.0 * big as f64 * old as f64 / arrays as f64),
        gb(4.0 * big as f64 * old as f64 / arrays as f64),
    );

    let mut g = c.benchmark_group("qwen3_checkpoint_tiny");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(30);
    g.bench_function("save_binary", |b| {
        b.iter_batched(|| state.clone(), |s| save_binary(&binary, s), BatchSize::LargeInput)
    });
    g.bench_function("save_json", |b| b.iter(|| save_json(&json, &state)));
    g.bench_function("load_binary", |b| b.iter(|| read_policy_state::<Qwen3AgentState>(&binary).expect("load binary")));
    g.bench_function("load_json", |b| b.iter(|| read_policy_state::<Qwen3AgentState>(&json).expect("load json")));
    g.finish();
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    write_tiny_checkpoint(dir.path(), 3).expect("tiny checkpoint");
    rollouts(c, dir.path());
    checkpoints(c, dir.path());
}

criterion_group!(benches, bench);

/// As the binaries do (`threads::set_thread_count_env`): without it candle reads
/// `/proc/cpuinfo` on every matmul.
fn main() {
    // SAFETY: first thing in `main`, before criterion or candle start threads.
    unsafe { rewardlab_models::threads::set_thread_count_env() };
    benches();
    Criterion::default().configure_from_args().final_summary();
}
