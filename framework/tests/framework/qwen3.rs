//! The Qwen3 + LoRA agent (`rewardlab_models::agent_qwen3`) on a tiny checkpoint written by
//! the test: loss masks, tool responses as context, checkpoints of adapters and AdamW,
//! determinism per seed whatever the batch, one full GRPO step of the real engine on CPU, and
//! the `studies/qwen3_tiny.toml` study file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rewardlab_framework::engine::{Engine, EngineConfig, LrSchedule, OptimConfig, RewardVariant, TaskSet};
use rewardlab_framework::synthetic::{self, SyntheticConfig};
use rewardlab_models::Tensor;
use rewardlab_models::agent::{OptimStep, Policy, Sampling, TaskPrompt, TurnInfo, TurnOutput};
use rewardlab_models::agent_qwen3::{AgentOptions, Qwen3Agent, Qwen3Episode};
use rewardlab_models::lora::{LoraConfig, TargetModule};
use rewardlab_models::policy::PolicyOptions;
use rewardlab_models::tiny::write_tiny_checkpoint;
use rewardlab_sandbox::{ErrorKind, Limits, RepoStore, Sandbox, Status, ToolResult};

use crate::common::scratch;

/// Generated tokens per turn and per rollout: small, so the tests stay fast in debug builds.
const TURN_TOKENS: usize = 24;
const ROLLOUT_TOKENS: usize = 40;

fn checkpoint() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("qwen3-tiny");
        write_tiny_checkpoint(&dir, 3).expect("write the tiny checkpoint");
        dir
    })
}

fn agent() -> Qwen3Agent {
    let lora = LoraConfig { r: 4, alpha: 8.0, targets: TargetModule::ALL.to_vec(), seed: 1 };
    let options = AgentOptions {
        max_new_tokens: TURN_TOKENS,
        max_completion_tokens: ROLLOUT_TOKENS,
        // Two rows per generation: a batch of three is sampled in two chunks.
        sample_batch: 2,
        score_batch: 4,
        // Short instructions keep the tiny model's prompts (mostly the tool schemas) short.
        instructions: "Find the files to change.".into(),
        gradient_checkpointing: false,
        ..AgentOptions::default()
    };
    Qwen3Agent::load(checkpoint(), &PolicyOptions { lora, ..PolicyOptions::default() }, options).expect("load")
}

fn prompt(text: &str) -> TaskPrompt {
    TaskPrompt { id: "t".into(), text: text.into() }
}

fn turn(index: usize, max_turns: usize) -> TurnInfo {
    TurnInfo { index, max_turns, max_calls_per_turn: 8, must_answer: index + 1 == max_turns }
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().and_then(|t| t.to_vec1::<f32>()).expect("f32 values")
}

fn lora_values(agent: &Qwen3Agent) -> Vec<Vec<f32>> {
    agent.model().lora_vars().iter().map(|v| values(v.as_tensor())).collect()
}

/// Gives every adapter's B small random values, so the policy differs from its reference.
fn perturb_b(agent: &Qwen3Agent) {
    for (i, (_, linear)) in agent.model().linears().into_iter().enumerate() {
        let b = &linear.adapter().expect("every projection has an adapter").b;
        let n = b.elem_count();
        let data: Vec<f32> = (0..n).map(|k| (((k * 7919 + i * 104_729) % 2001) as f32 / 1000.0 - 1.0) * 0.05).collect();
        b.set(&Tensor::from_vec(data, b.dims(), b.device()).expect("tensor")).expect("set B");
    }
}

fn optim() -> OptimStep {
    OptimStep { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, max_grad_norm: Some(1.0) }
}

#[test]
fn masks_cover_exactly_the_generated_tokens_and_tool_responses_are_context() {
    let agent = agent();
    let mut episode = agent
        .begin(&prompt("The parser crashes on empty input."), Sampling::Sample { temperature: 1.0 }, 7)
        .expect("begin");
    let context = episode.rollout().tokens().len();
    assert_eq!(agent.completion_tokens(&episode), 0);
    assert!(episode.rollout().loss_mask().iter().all(|&m| !m), "the prompt is context");

    let out = agent.act(&mut [&mut episode], turn(0, 3)).expect("act").remove(0);
    let first = agent.completion_tokens(&episode);
    assert!((1..=TURN_TOKENS).contains(&first), "{first} tokens in the first turn");
    assert_eq!(episode.turn_texts().len(), 1);
    // A random model almost never closes a call or an answer; whatever it did, the output
    // follows from its text (the parsing rules have unit tests in the models crate).
    assert!(matches!(out, TurnOutput::Truncated | TurnOutput::Answer(_) | TurnOutput::Calls(_)));

    // A tool response (here: the error a malformed call gets) is appended as context only.
    let before = episode.rollout().tokens().len();
    let error = ToolResult::error(ErrorKind::InvalidCall, "tool call is not valid JSON: EOF".into());
    let ok =
        ToolResult { output: "src/parse.rs:12: fn parse(input: &str)".into(), entities: vec![], status: Status::Ok };
    agent.observe(&mut episode, &[error, ok]).expect("observe");
    let rollout = episode.rollout();
    assert!(rollout.tokens().len() > before + 10);
    assert!(rollout.loss_mask()[before..].iter().all(|&m| !m), "tool responses are not trained on");
    let shown = agent.tokenizer().decode(&rollout.tokens()[before..]).expect("decode");
    assert!(shown.contains("<tool_response>\ntool call is not valid JSON: EOF\n</tool_response>"), "{shown}");
    assert!(shown.contains("src/parse.rs:12"), "{shown}");

    // The last turn: the agent is told to answer, then generates within the rollout budget.
    let _ = agent.act(&mut [&mut episode], turn(2, 3)).expect("act");
    let total = agent.completion_tokens(&episode);
    assert!(total > first && total <= ROLLOUT_TOKENS, "{first} then {total} tokens");
    let rollout = episode.rollout();
    let note = agent.tokenizer().decode(&rollout.tokens()[before..]).expect("decode");
    assert!(note.contains("This is your last turn"), "{note}");

    // The mask marks exactly the generated tokens; their sampling log-probs line up.
    let masked = rollout.loss_mask().iter().filter(|&&m| m).count();
    assert_eq!(masked, total);
    assert!(rollout.loss_mask()[..context].iter().all(|&m| !m));
    let sampled = agent.sampled_logprobs(&episode);
    assert_eq!(sampled.len(), total);
    assert!(sampled.iter().all(|&lp| lp <= 0.0 && lp.is_finite()));
    let entropy = agent.entropy(&episode);
    assert!(entropy > 0.0 && entropy <= (512f64).ln() + 1e-9, "entropy {entropy}");

    // Rescored through the training path: the sampler's log-probs (cached, fused kernels)
    // agree, and with B = 0 the adapters change nothing, so the reference is identical.
    let current = agent.logprobs(&[&episode]).expect("logprobs").remove(0);
    let reference = agent.reference_logprobs(&[&episode]).expect("reference_logprobs").remove(0);
    assert_eq!(current.len(), total);
    assert_eq!(current, reference);
    for (a, b) in current.iter().zip(&sampled) {
        assert!((a - b).abs() < 1e-3, "scored {a} vs sampled {b}");
    }
}

#[test]
fn a_spent_budget_truncates_without_generating() {
    let agent = agent();
    let mut episode =
        agent.begin(&prompt("Where is the config loaded?"), Sampling::Sample { temperature: 1.0 }, 3).expect("begin");
    // Whatever each turn did, keep the rollout going until its token budget is spent.
    let mut turns = 0;
    while agent.completion_tokens(&episode) < ROLLOUT_TOKENS && turns < 8 {
        if let TurnOutput::Calls(calls) = agent.act(&mut [&mut episode], turn(turns, 16)).expect("act").remove(0) {
            let results: Vec<ToolResult> =
                calls.iter().map(|_| ToolResult::error(ErrorKind::NotFound, "no such file".into())).collect();
            agent.observe(&mut episode, &results).expect("observe");
        }
        turns += 1;
        let per_turn = episode.turn_texts().len();
        assert_eq!(per_turn, turns, "every turn with budget left generates");
    }
    assert_eq!(agent.completion_tokens(&episode), ROLLOUT_TOKENS, "no turn goes past the rollout budget");
    let out = agent.act(&mut [&mut episode], turn(turns, 16)).expect("act").remove(0);
    assert_eq!(out, TurnOutput::Truncated);
    assert_eq!(agent.completion_tokens(&episode), ROLLOUT_TOKENS, "nothing generated past the budget");
    assert_eq!(episode.turn_texts().len(), turns);
}

/// Issue texts of different lengths, so batched prompts are left-padded.
const ISSUES: [&str; 3] =
    ["Saving a session loses cookies.", "The CLI ignores --verbose when a config file also sets it.", "Timeouts."];

/// Begins one episode per `(issue index, seed)` and plays their first turn in one batch.
fn play(agent: &Qwen3Agent, episodes: &[(usize, u64)]) -> Vec<Qwen3Episode> {
    let mut episodes: Vec<Qwen3Episode> = episodes
        .iter()
        .map(|&(issue, seed)| {
            agent.begin(&prompt(ISSUES[issue]), Sampling::Sample { temperature: 1.0 }, seed).expect("begin")
        })
        .collect();
    let mut refs: Vec<&mut Qwen3Episode> = episodes.iter_mut().collect();
    let _ = agent.act(&mut refs, turn(0, 2)).expect("act");
    episodes
}

#[test]
fn a_rollout_depends_on_its_seed_not_on_the_batch_it_was_sampled_in() {
    let agent = agent();
    let alone = play(&agent, &[(0, 11)]).remove(0);
    // Played with two other prompts (sampled two rows at a time, beside a longer prompt, so
    // it is left-padded) the episode draws the same tokens from its own RNG; log-probs agree
    // to float rounding.
    let mut batched = play(&agent, &[(1, 5), (0, 11), (2, 6)]);
    let in_batch = batched.remove(1);
    assert_eq!(alone.rollout().tokens(), in_batch.rollout().tokens());
    assert_eq!(alone.rollout().loss_mask(), in_batch.rollout().loss_mask());
    for (a, b) in agent.sampled_logprobs(&alone).iter().zip(agent.sampled_logprobs(&in_batch)) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
    assert_ne!(alone.rollout().tokens(), batched[0].rollout().tokens(), "another seed, another rollout");
    // Scoring in a batch of three equals scoring alone, to float rounding.
    let together = agent.logprobs(&[&batched[0], &alone, &batched[1]]).expect("logprobs");
    let single = agent.logprobs(&[&alone]).expect("logprobs").remove(0);
    assert_eq!(together[1].len(), single.len());
    for (a, b) in together[1].iter().zip(&single) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
}

#[test]
fn gradients_accumulate_adamw_descends_and_state_round_trips_bit_for_bit() {
    let mut trained = agent();
    perturb_b(&trained);
    let episodes = play(&trained, &[(0, 1), (2, 2)]);
    let refs: Vec<&Qwen3Episode> = episodes.iter().collect();
    let coeffs: Vec<Vec<f64>> = refs
        .iter()
        .map(|e| (0..trained.completion_tokens(e)).map(|i| if i % 2 == 0 { 1.0 } else { -0.5 }).collect())
        .collect();
    let objective = |a: &Qwen3Agent| -> f64 {
        a.logprobs(&refs)
            .expect("logprobs")
            .iter()
            .zip(&coeffs)
            .flat_map(|(lp, c)| lp.iter().zip(c))
            .map(|(lp, c)| lp * c)
            .sum()
    };
    // Sign descent (AdamW's first step with β = 0) by a small step, without clipping: it must
    // lower the objective whose gradient `backward` accumulated, over two half-weight calls.
    let sign_step = OptimStep { lr: 1e-3, beta1: 0.0, beta2: 0.0, eps: 1e-12, weight_decay: 0.0, max_grad_norm: None };
    let f0 = objective(&trained);
    let half: Vec<Vec<f64>> = coeffs.iter().map(|c| c.iter().map(|x| x * 0.5).collect()).collect();
    let before = lora_values(&trained);
    trained.backward(&refs, &half).expect("backward");
    trained.backward(&refs, &half).expect("backward");
    let stats = trained.step(&sign_step).expect("step");
    assert!(stats.grad_norm > 0.0 && stats.grad_norm.is_finite(), "grad norm {}", stats.grad_norm);
    assert_ne!(before, lora_values(&trained), "the step moved the adapters");
    let f1 = objective(&trained);
    assert!(f1 < f0, "Σ coeff·logp went from {f0} to {f1}: the step must descend it");

    // Through JSON into a fresh agent: adapters, moments and step count, bit for bit.
    let json = serde_json::to_string(&trained.state().expect("state")).expect("serialise");
    let mut restored = agent();
    restored.restore(serde_json::from_str(&json).expect("deserialise")).expect("restore");
    assert_eq!(lora_values(&trained), lora_values(&restored));
    assert_eq!(trained.state().expect("state"), restored.state().expect("state"));
    assert_eq!(trained.logprobs(&refs).expect("logprobs"), restored.logprobs(&refs).expect("logprobs"));

    // The next step agrees too (the moments came along): two half-weight calls on one side,
    // one full call on the other, so accumulation is checked against a single call.
    trained.backward(&refs, &half).expect("backward");
    trained.backward(&refs, &half).expect("backward");
    restored.backward(&refs, &coeffs).expect("backward");
    let (a, b) = (trained.step(&optim()).expect("step").grad_norm, restored.step(&optim()).expect("step").grad_norm);
    assert!(((a - b) / a).abs() < 1e-5, "two half calls {a}, one full call {b}");
    for (x, y) in lora_values(&trained).iter().flatten().zip(lora_values(&restored).iter().flatten()) {
        assert!((x - y).abs() < 1e-6, "{x} vs {y}");
    }

    // A state of another adapter shape is refused, and changes nothing.
    let lora = LoraConfig { r: 2, alpha: 4.0, targets: TargetModule::ALL.to_vec(), seed: 1 };
    let mut other =
        Qwen3Agent::load(checkpoint(), &PolicyOptions { lora, ..PolicyOptions::default() }, AgentOptions::default())
            .expect("load");
    let untouched = lora_values(&other);
    let err = other.restore(trained.state().expect("state")).expect_err("another rank");
    assert!(err.to_string().contains("r=4"), "{err}");
    assert_eq!(untouched, lora_values(&other));
}

/// A small generated source shared by the engine tests (generated once: the tests run in
/// parallel and `scratch` clears its directory).
fn tasks() -> Arc<TaskSet> {
    static TASKS: OnceLock<Arc<TaskSet>> = OnceLock::new();
    TASKS
        .get_or_init(|| {
            let config = SyntheticConfig { seed: 9, files: 40, commits: 2, tasks: 8, held_out_fraction: 0.25 };
            let source = synthetic::generate(&config, &scratch("qwen3-source")).expect("generate a small source");
            Arc::new(TaskSet::from_synthetic(&source, 0.15).expect("synthetic tasks convert"))
        })
        .clone()
}

fn sandbox(name: &str) -> Sandbox {
    let store = Arc::new(RepoStore::open(scratch(name)).expect("open a repo store"));
    Sandbox::new(store, Limits::default())
}

/// With two optimisation passes a step (issue 19, item 2), so the second pass is off-policy.
#[test]
fn a_resumed_run_continues_bit_for_bit_from_the_binary_checkpoint() {
    let config = EngineConfig {
        seed: 5,
        group_size: 2,
        prompts_per_step: 1,
        total_steps: 2,
        max_turns: 2,
        minibatches: 1,
        epochs: 2,
        checkpoint_every: 1,
        eval_every: 0,
        optim: OptimConfig { lr: 1e-2, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..EngineConfig::default()
    };
    let variant = Arc::new(RewardVariant::compile("len", "reward = len / 40\n", 2, &[]).expect("compiles"));
    // Away from the reference, so the KL term moves the adapters whatever the rewards are.
    let started = || {
        let a = agent();
        perturb_b(&a);
        a
    };
    let straight_dir = scratch("qwen3-resume-straight");
    let mut straight =
        Engine::new(config.clone(), started(), tasks(), sandbox("qwen3-resume-s1"), variant.clone()).expect("engine");
    straight.run(&straight_dir, |_| {}).expect("two steps");

    let dir = scratch("qwen3-resume-killed");
    let mut first =
        Engine::new(config.clone(), started(), tasks(), sandbox("qwen3-resume-s2"), variant.clone()).expect("engine");
    first.run_steps(&dir, 1, |_| {}).expect("one step");
    drop(first);
    let saved = dir.join("checkpoints/step-000001");
    // The adapters and moments are in the binary part; the JSON keeps names, shapes and the step.
    let json = std::fs::read_to_string(saved.join("policy.json")).expect("policy.json");
    let binary = std::fs::metadata(saved.join("policy.safetensors")).expect("policy.safetensors").len();
    let state = trained_state_size(&straight);
    assert!(!json.contains("\"value\"") && !json.contains("\"m\""), "no arrays in the JSON part: {json}");
    assert!(binary as usize >= 3 * 4 * state, "{binary} bytes for {state} adapter values and two moments");
    assert!(json.len() < binary as usize / 4, "the JSON part is small: {} bytes", json.len());

    // A fresh agent (another seed's adapters, B zero) resumes and finishes the run.
    let fresh = {
        let lora = LoraConfig { r: 4, alpha: 8.0, targets: TargetModule::ALL.to_vec(), seed: 77 };
        Qwen3Agent::load(checkpoint(), &PolicyOptions { lora, ..PolicyOptions::default() }, agent().options().clone())
            .expect("load")
    };
    let mut resumed = Engine::resume(&saved, fresh, tasks(), sandbox("qwen3-resume-s3"), variant).expect("resume");
    resumed.run(&dir, |_| {}).expect("the second step");
    let read = |p: PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let last = "checkpoints/step-000002";
    assert_eq!(read(straight_dir.join("metrics.csv")), read(dir.join("metrics.csv")));
    let mut reader = csv::Reader::from_path(dir.join("metrics.csv")).expect("metrics.csv");
    let rows: Vec<rewardlab_framework::engine::MetricsRow> = reader.deserialize().map(|r| r.expect("row")).collect();
    assert!(rows.iter().all(|r| r.updates == 2 && r.kl_last.is_finite() && r.clip_ratio_last >= 0.0), "{rows:?}");
    // The second pass sees adapters the first moved: its KL differs from the first pass's.
    assert!(rows.iter().all(|r| r.kl_last != r.kl), "{rows:?}");
    for file in ["policy.json", "policy.safetensors"] {
        assert!(read(straight_dir.join(last).join(file)) == read(dir.join(last).join(file)), "{file} differs");
    }
    assert_eq!(straight.policy().state().expect("state"), resumed.policy().state().expect("state"));
    assert_ne!(lora_values(straight.policy()), lora_values(&started()), "the run trained the adapters");
}

/// Adapter values the agent holds (each has two AdamW moments beside it in a checkpoint).
fn trained_state_size(engine: &Engine<Qwen3Agent>) -> usize {
    lora_values(engine.policy()).iter().map(Vec::len).sum()
}

#[test]
fn one_grpo_step_of_the_engine_trains_the_adapters_and_nothing_else() {
    let plain = agent();
    assert!(!plain.options().gradient_checkpointing);
    let options = AgentOptions { gradient_checkpointing: true, ..plain.options().clone() };
    let (model, tokenizer) = (plain.model().clone(), plain.tokenizer().clone());
    // The memory-lean backward (per-layer recomputation) is the one a real run uses.
    let policy = Qwen3Agent::new(model, tokenizer, options).expect("agent");
    // Start away from the reference so the KL term has a gradient whatever the rewards are.
    perturb_b(&policy);
    let base_before: Vec<Vec<f32>> = policy.model().base_weights().iter().map(values).collect();
    let lora_before = lora_values(&policy);
    let config = EngineConfig {
        seed: 3,
        group_size: 2,
        prompts_per_step: 1,
        total_steps: 1,
        max_turns: 2,
        minibatches: 1,
        checkpoint_every: 1,
        eval_every: 1,
        eval_tasks: Some(1),
        optim: OptimConfig { lr: 1e-2, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..EngineConfig::default()
    };
    // Longer completions score higher: the random model's turns end at different lengths
    // only when it samples a stop token, so the KL term is what guarantees a gradient.
    let variant = Arc::new(RewardVariant::compile("len", "reward = len / 40\n", 2, &[]).expect("compiles"));
    let mut engine = Engine::new(config, policy, tasks(), sandbox("qwen3-store"), variant).expect("engine starts");
    let dir = scratch("qwen3-run");
    let summary = engine.run(&dir, |_| {}).expect("one step");
    assert_eq!(summary.steps_done, 1);
    let row = summary.last.expect("a metrics row");
    assert!(row.completion_len > 0.0 && row.completion_len <= ROLLOUT_TOKENS as f64);
    assert!(row.kl > 0.0 && row.grad_norm > 0.0 && row.entropy > 0.0, "{row:?}");
    assert!(row.eval_fb_mean.is_some(), "the held-out evaluation ran");
    let metrics = std::fs::read_to_string(dir.join("metrics.csv")).expect("metrics.csv");
    assert_eq!(metrics.lines().count(), 2, "header and one row:\n{metrics}");
    assert!(dir.join("checkpoints/step-000001/policy.json").exists());

    let trained = engine.policy();
    let lora_after = lora_values(trained);
    assert_eq!(lora_after.len(), lora_before.len());
    assert!(lora_after.iter().zip(&lora_before).all(|(a, b)| a != b), "every adapter matrix moved");
    let base_after: Vec<Vec<f32>> = trained.model().base_weights().iter().map(values).collect();
    assert!(base_after == base_before, "base weights are frozen");

    // The trained adapter is written in PEFT format and loads back.
    let adapter = dir.join("adapter");
    trained.save_adapter(&adapter).expect("save the adapter");
    let fresh = agent();
    rewardlab_models::peft::load_adapter(fresh.model(), &adapter).expect("load the adapter");
    assert_eq!(lora_values(&fresh), lora_after);
}

#[test]
fn the_tiny_qwen3_study_file_checks_and_selects_the_qwen3_policy() {
    use rewardlab_framework::study::spec::{ModelDevice, ModelDtype};
    use rewardlab_framework::study::{PolicySpec, parse_study};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../studies/qwen3_tiny.toml");
    let text = std::fs::read_to_string(&path).expect("the study file");
    let study = parse_study(&path, &text, &|p: &Path| std::fs::read_to_string(p))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let PolicySpec::Qwen3(spec) = &study.policy else { panic!("not the Qwen3 policy: {:?}", study.policy) };
    assert!(spec.tiny_if_missing);
    let warm = spec.warm_start.as_ref().expect("the tiny study warm-starts with SFT");
    assert_eq!((warm.rho_f, warm.rho_e, warm.max_tasks, warm.samples_per_task), (0.5, 0.5, Some(2), 2));
    assert!(spec.model.ends_with("target/qwen3-tiny"), "{}", spec.model.display());
    assert_eq!((spec.dtype, spec.device), (ModelDtype::F32, ModelDevice::Cpu));
    assert_eq!((spec.lora_rank, spec.max_new_tokens, spec.max_completion_tokens), (8, 24, 48));
    assert_eq!((spec.top_p, spec.top_k), (0.9, 50), "the seeds' sampling by default");
    assert_eq!(study.variants.len(), 2);
    assert_eq!(study.runs().len(), 2);
}

/// An agent whose adapters took two SFT steps on its own rollouts, as a warm start leaves them.
fn warm_started() -> Qwen3Agent {
    use rewardlab_models::sft::{SftOptions, SftTrainer};
    let agent = agent();
    let episodes = play(&agent, &[(0, 1), (1, 2)]);
    let sequences: Vec<Vec<u32>> = episodes.iter().map(|e| e.rollout().tokens().to_vec()).collect();
    let masks: Vec<Vec<bool>> = episodes.iter().map(|e| e.rollout().loss_mask().to_vec()).collect();
    let options = SftOptions { learning_rate: 1e-2, ..SftOptions::default() };
    let mut sft = SftTrainer::new(agent.model(), &options).expect("an SFT trainer");
    for _ in 0..2 {
        sft.step(agent.model(), &sequences, &masks).expect("an SFT step");
    }
    agent
}

#[test]
fn after_sft_the_first_grpo_step_has_zero_kl_to_the_sft_reference_and_positive_kl_to_base() {
    let first_step_kl = |freeze: bool, name: &str| -> f64 {
        let policy = warm_started();
        if freeze {
            policy.freeze_reference().expect("freeze the SFT adapters");
            assert!(!policy.model().reference_is_base().expect("reference"));
        }
        let config = EngineConfig {
            seed: 3,
            group_size: 2,
            prompts_per_step: 1,
            total_steps: 1,
            max_turns: 2,
            minibatches: 1,
            checkpoint_every: 1,
            eval_every: 0,
            ..EngineConfig::default()
        };
        let variant = Arc::new(RewardVariant::compile("len", "reward = len / 40\n", 2, &[]).expect("compiles"));
        let mut engine =
            Engine::new(config, policy, tasks(), sandbox(&format!("{name}-store")), variant).expect("engine starts");
        let summary = engine.run(&scratch(name), |_| {}).expect("one step");
        summary.last.expect("a metrics row").kl
    };
    let sft = first_step_kl(true, "qwen3-kl-sft");
    let base = first_step_kl(false, "qwen3-kl-base");
    assert!(sft.abs() < 1e-9, "KL to the SFT reference at the first step: {sft}");
    assert!(base > 1e-6, "KL to the base model after SFT: {base}");

    // The frozen reference is part of the state: through the binary split and into a fresh
    // agent, whose reference log-probs are then the SFT policy's.
    use rewardlab_models::agent::PolicyState;
    let sft_agent = warm_started();
    sft_agent.freeze_reference().expect("freeze");
    let state = sft_agent.state().expect("state");
    assert_eq!(state.reference.len(), state.vars.len());
    let mut split = state.clone();
    let tensors = split.take_tensors();
    assert_eq!(tensors.len(), 4 * state.vars.len(), "value, two moments and the reference per matrix");
    assert!(split.reference.iter().all(|r| r.value.is_empty()));
    split.put_tensors(tensors).expect("put back");
    assert_eq!(split, state);
    let mut fresh = agent();
    assert!(fresh.model().reference_is_base().expect("reference"));
    fresh.restore(state).expect("restore");
    let episodes = play(&fresh, &[(2, 4)]);
    let refs: Vec<&Qwen3Episode> = episodes.iter().collect();
    let want = sft_agent.logprobs(&refs).expect("logprobs");
    assert_eq!(fresh.reference_logprobs(&refs).expect("reference"), want);
    assert_eq!(sft_agent.reference_logprobs(&refs).expect("reference"), want);
    assert_ne!(agent().reference_logprobs(&refs).expect("base reference"), want);
}

/// Plays `turns` turns of every `(issue, seed)` together, observing one tool response after
/// each turn but the last whatever the turn produced (the engine would stop an answered
/// rollout; the two KV paths must agree either way).
fn play_turns(agent: &Qwen3Agent, episodes: &[(usize, u64)], turns: usize) -> Vec<Qwen3Episode> {
    let mut episodes: Vec<Qwen3Episode> = episodes
        .iter()
        .map(|&(issue, seed)| {
            agent.begin(&prompt(ISSUES[issue]), Sampling::Sample { temperature: 1.0 }, seed).expect("begin")
        })
        .collect();
    for t in 0..turns {
        let mut refs: Vec<&mut Qwen3Episode> = episodes.iter_mut().collect();
        let _ = agent.act(&mut refs, turn(t, turns)).expect("act");
        if t + 1 < turns {
            for (k, e) in episodes.iter_mut().enumerate() {
                // Responses of different lengths, so the rows' caches differ in length.
                let output = format!("src/mod{k}.rs:{}: fn f() {{}}\n", 10 * t + k).repeat(k + 1);
                let result = ToolResult { output, entities: vec![], status: Status::Ok };
                agent.observe(e, &[result]).expect("observe");
                assert_eq!(agent.options().reuse_kv, e.cached_tokens() > 0, "a cache is kept between turns");
            }
        }
    }
    episodes
}

#[test]
fn kv_caches_kept_across_turns_give_the_rollouts_of_a_full_prefill_with_far_fewer_prefilled_tokens() {
    let base = agent();
    let options = AgentOptions { max_new_tokens: 10, max_completion_tokens: 40, ..base.options().clone() };
    let (model, tokenizer) = (base.model().clone(), base.tokenizer().clone());
    let with = Qwen3Agent::new(model.clone(), tokenizer.clone(), options.clone()).expect("agent");
    let without = Qwen3Agent::new(model, tokenizer, AgentOptions { reuse_kv: false, ..options }).expect("agent");
    assert!(with.options().reuse_kv, "reuse is the default");
    // Three rollouts sampled two rows at a time: rows with caches of different lengths share
    // a batch, and the third sits alone.
    let seeds = [(0, 1), (1, 2), (2, 3)];
    let a = play_turns(&with, &seeds, 4);
    let b = play_turns(&without, &seeds, 4);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.rollout().tokens(), y.rollout().tokens(), "the same tokens drawn");
        assert_eq!(x.rollout().loss_mask(), y.rollout().loss_mask());
        assert_eq!(x.turn_texts().len(), 4, "every turn generated");
        for (p, q) in with.sampled_logprobs(x).iter().zip(without.sampled_logprobs(y)) {
            assert!((p - q).abs() < 1e-4, "reused {p} vs full prefill {q}");
        }
        assert_eq!(x.cached_tokens(), 0, "the forced last turn frees the cache");
    }
    // The sampler's log-probs (cached path, reused across turns) agree with the training path.
    let refs: Vec<&Qwen3Episode> = a.iter().collect();
    for (episode, scored) in a.iter().zip(with.logprobs(&refs).expect("logprobs")) {
        let sampled = with.sampled_logprobs(episode);
        assert_eq!(scored.len(), sampled.len());
        for (s, t) in scored.iter().zip(&sampled) {
            assert!((s - t).abs() < 1e-3, "scored {s} vs sampled {t}");
        }
    }
    let (reused, full) = (with.prefilled_tokens(), without.prefilled_tokens());
    assert!(reused * 2 < full, "{reused} prefilled tokens with reuse, {full} without");

    // An episode that stopped early keeps its cache only until it is scored.
    let mut early = play_turns(&with, &[(0, 9)], 2).remove(0);
    let _ = with.act(&mut [&mut early], turn(0, 4)).expect("act");
    assert!(early.cached_tokens() > 0);
    let _ = with.logprobs(&[&early]).expect("logprobs");
    assert_eq!(early.cached_tokens(), 0, "scoring frees the cache");
}

/// The tiny study file with `extra` added to its `[policy]` table.
fn tiny_study_with(extra: &str) -> rewardlab_framework::study::Study {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../studies/qwen3_tiny.toml");
    let text = std::fs::read_to_string(&path).expect("the study file");
    let text = text.replace("[policy]\nkind = \"qwen3\"\n", &format!("[policy]\nkind = \"qwen3\"\n{extra}\n"));
    assert!(text.contains(extra), "the [policy] table was found");
    rewardlab_framework::study::parse_study(&path, &text, &|p: &Path| std::fs::read_to_string(p))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_kl_reference_is_the_sft_policy_unless_the_study_says_base() {
    use rewardlab_framework::study::PolicySpec;
    use rewardlab_framework::study::qwen3::KlReference;
    let reference = |extra: &str| match tiny_study_with(extra).policy {
        PolicySpec::Qwen3(spec) => spec.reference,
        other => panic!("not the Qwen3 policy: {other:?}"),
    };
    assert_eq!(reference("# the default"), KlReference::Sft);
    assert_eq!(reference("reference = \"sft\""), KlReference::Sft);
    assert_eq!(reference("reference = \"base\""), KlReference::Base);
}

#[test]
fn a_cuda_study_is_refused_with_what_is_missing_when_there_is_no_cuda() {
    use rewardlab_framework::study::PolicySpec;
    use rewardlab_framework::study::spec::ModelDevice;
    let PolicySpec::Qwen3(spec) = tiny_study_with("device = \"cuda\"").policy else { panic!("not the Qwen3 policy") };
    assert_eq!(spec.device, ModelDevice::Cuda);
    match rewardlab_framework::study::qwen3::device(&spec) {
        Err(e) if !rewardlab_models::cuda_compiled() => {
            let message = e.to_string();
            assert!(message.contains("--features model-cuda") && message.contains("device = \"cpu\""), "{message}");
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("CUDA device 0 cannot be opened") && message.contains("GPU"), "{message}");
        }
        Ok(device) => {
            assert!(rewardlab_models::cuda_compiled() && device.is_cuda());
            eprintln!("a CUDA build on a machine with a GPU: device 0 opened, nothing to refuse");
        }
    }
}
