//! The SFT warm start end to end on a small generated repository and a tiny Qwen3
//! checkpoint: scripted trajectories are real sandbox rollouts in the template's format, the
//! joint filter keeps exactly what meets both thresholds (checked against hand-computed F1
//! and e), the loss mask covers exactly the assistant's text, SFT lowers the loss, and one
//! GRPO step of the engine continues from the warm-started adapters.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rewardlab_framework::engine::{Engine, EngineConfig, EngineTask, LrSchedule, OptimConfig, RewardVariant, TaskSet};
use rewardlab_framework::study::PolicySpec;
use rewardlab_framework::synthetic::{self, SyntheticConfig};
use rewardlab_framework::warm_start::{
    self, Candidate, Conversation, DEFAULT_INSTRUCTIONS, JointFilter, ScriptedSearcher, SearcherOptions,
    WarmStartError, WarmStartSpec, escape_regex, parse_calls, render,
};
use rewardlab_models::agent_qwen3::{AgentOptions, LAST_TURN_NOTE, Qwen3Agent};
use rewardlab_models::qwen3::Qwen3Config;
use rewardlab_models::template::{self, GENERATION_PROMPT, render_tool_responses, render_turn, system_prompt};
use rewardlab_models::tiny::{build_tokenizer, tiny_config, write_checkpoint_with};
use rewardlab_models::{DType, Device, LoraConfig, Qwen3Model, QwenTokenizer};
use rewardlab_sandbox::{GrepArgs, Limits, RepoStore, Sandbox, ToolCall, TreeKind};

use crate::common::{git, scratch};

/// Tool output is cut short so that sequences (and the tests) stay small.
const MAX_OUTPUT_CHARS: usize = 300;
const SAMPLES: usize = 4;

/// A small generated source as a task set.
fn task_set() -> Arc<TaskSet> {
    static SET: OnceLock<Arc<TaskSet>> = OnceLock::new();
    SET.get_or_init(|| {
        let config = SyntheticConfig { seed: 7, files: 60, commits: 2, tasks: 12, held_out_fraction: 0.25 };
        let source = synthetic::generate(&config, &scratch("warm-start-source")).expect("generate a small source");
        Arc::new(TaskSet::from_synthetic(&source, 0.15).expect("synthetic tasks convert"))
    })
    .clone()
}

/// Its train tasks: the only ones a warm start may see.
fn tasks() -> &'static [EngineTask] {
    static TASKS: OnceLock<Vec<EngineTask>> = OnceLock::new();
    TASKS.get_or_init(|| {
        let set = task_set();
        set.train.iter().map(|&i| set.tasks[i].clone()).collect()
    })
}

fn sandbox() -> Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let store = RepoStore::open(scratch("warm-start-store")).expect("open a repo store");
            Sandbox::new(Arc::new(store), Limits { max_output_chars: MAX_OUTPUT_CHARS, ..Limits::default() })
        })
        .clone()
}

/// Scored trajectories of the first tasks, drawn once.
fn candidates() -> &'static [Candidate] {
    static CANDIDATES: OnceLock<Vec<Candidate>> = OnceLock::new();
    CANDIDATES.get_or_init(|| {
        warm_start::collect(&ScriptedSearcher::default(), &sandbox(), &tasks()[..6], SAMPLES, 4, 42)
            .expect("scripted trajectories")
    })
}

/// The tiny checkpoints' tokenizer.
fn tokenizer() -> QwenTokenizer {
    QwenTokenizer::new(build_tokenizer().expect("tiny tokenizer")).expect("Qwen's special tokens")
}

#[test]
fn scripted_trajectories_are_sandbox_rollouts_in_the_template_format() {
    let candidates = candidates();
    assert_eq!(candidates.len(), 6 * SAMPLES);
    let mut distinct = HashSet::new();
    for c in candidates {
        let t = &c.trajectory;
        assert!((1..=3).contains(&t.turns.len()), "{} exploration turns", t.turns.len());
        for turn in &t.turns {
            // What is trained on is what ran: the text parses back to the calls, each answered.
            assert_eq!(parse_calls(&turn.text).expect("parses"), turn.calls);
            assert_eq!(template::parse_tool_calls(&turn.text).len(), turn.calls.len());
            assert_eq!(turn.results.len(), turn.calls.len());
            assert!(turn.calls.len() <= 8);
            for r in &turn.results {
                assert!(r.output.chars().count() <= MAX_OUTPUT_CHARS, "output over the limit: {}", r.output);
            }
        }
        // The policy, the engine and the rewards read answers with one parser.
        let answer = rewardlab_rewards::parse_answer(&t.answer).expect("valid for the policy and the rewards");
        assert!((1..=3).contains(&answer.files.len()) || answer.files.is_empty());
        assert!(t.answer.contains("<answer>{\"files\": ["), "{}", t.answer);
        assert!((0.0..=1.0).contains(&c.score.f1) && (0.0..=1.0).contains(&c.score.e), "{:?}", c.score);
        distinct.insert(t.assistant_texts().join("\n"));
    }
    // The searcher leaves the last turn for the answer whatever the limit.
    for max_turns in [2, 3] {
        let short =
            warm_start::collect(&ScriptedSearcher::default(), &sandbox(), &tasks()[..2], SAMPLES, max_turns, 42)
                .expect("scripted trajectories");
        assert!(short.iter().all(|c| c.trajectory.turns.len() < max_turns));
        assert!(short.iter().any(|c| c.trajectory.turns.len() == max_turns - 1));
    }
    // Seeds change the strategy: the samples of one task are not all alike.
    assert!(distinct.len() > candidates.len() / 2, "{} distinct of {}", distinct.len(), candidates.len());
    // Greps find the code: some answers are right, some calls bring new entities.
    assert!(candidates.iter().any(|c| c.score.f1 >= 0.5), "no trajectory found its files");
    assert!(candidates.iter().any(|c| c.score.e > 0.5));
    let f1s: Vec<f64> = candidates.iter().map(|c| c.score.f1).collect();
    let es: Vec<f64> = candidates.iter().map(|c| c.score.e).collect();
    eprintln!("F1 {f1s:.2?}\ne  {es:.2?}");
}

#[test]
fn escaped_patterns_find_exactly_their_literal_text() {
    // Lines full of regex metacharacters, grepped through the sandbox as escaped regexes,
    // are found on the same lines as `git grep -F` finds them.
    let task = &tasks()[0];
    let file = task.target.files.as_ref().expect("target files")[0].clone();
    let sandbox = sandbox();
    let tree = sandbox.tree(&task.repo, &task.commit, TreeKind::View).expect("tree");
    let text = git(Path::new(&task.repo), &["show", &format!("{}:{file}", task.commit)]);
    let lines: BTreeSet<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.len() >= 8 && l.contains(['(', '.', '[', '*', '+', '?', '{', '|']))
        .take(6)
        .collect();
    assert!(lines.len() >= 3, "{file} has lines with metacharacters");
    for line in lines {
        let call =
            ToolCall::Grep(GrepArgs { pattern: escape_regex(line), path: Some(file.clone()), case_sensitive: None });
        let found: BTreeSet<String> = sandbox.call(&tree, &call).entities.iter().map(ToString::to_string).collect();
        let listing = git(Path::new(&task.repo), &["grep", "-n", "-F", "-e", line, &task.commit, "--", &file]);
        let expected: BTreeSet<String> = listing
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&format!("{}:{file}:", task.commit))?;
                Some(format!("{file}:{}", rest.split_once(':')?.0))
            })
            .collect();
        assert!(!expected.is_empty(), "git finds {line:?}");
        assert_eq!(found, expected, "{line:?}");
    }
}

/// File-level F1 by hand: sets, `2|P∩T| / (|P| + |T|)`, both empty 1, one empty 0.
fn oracle_f1(predicted: &[String], target: &[String]) -> f64 {
    let p: BTreeSet<&String> = predicted.iter().collect();
    let t: BTreeSet<&String> = target.iter().collect();
    match (p.is_empty(), t.is_empty()) {
        (true, true) => 1.0,
        (true, false) | (false, true) => 0.0,
        _ => 2.0 * p.intersection(&t).count() as f64 / (p.len() + t.len()) as f64,
    }
}

/// FuseSearch's e by hand: per call, the share of its distinct entities no earlier call showed.
fn oracle_e(c: &Candidate) -> f64 {
    let mut seen: HashSet<String> = HashSet::new();
    let mut gains = Vec::new();
    for turn in &c.trajectory.turns {
        for r in &turn.results {
            let mine: BTreeSet<String> = r.entities.iter().map(ToString::to_string).collect();
            let new = mine.iter().filter(|e| !seen.contains(*e)).count();
            gains.push(if mine.is_empty() { 0.0 } else { new as f64 / mine.len() as f64 });
            seen.extend(mine);
        }
    }
    if gains.is_empty() { 0.0 } else { gains.iter().sum::<f64>() / gains.len() as f64 }
}

#[test]
fn the_joint_filter_keeps_exactly_the_trajectories_meeting_both_thresholds() {
    let candidates = candidates();
    let tasks = tasks();
    for c in candidates {
        let task = &tasks[c.task];
        let answer = rewardlab_rewards::parse_answer(&c.trajectory.answer).expect("valid");
        let target = task.target.files.as_ref().expect("target files");
        assert!((c.score.f1 - oracle_f1(&answer.files, target)).abs() < 1e-12, "F1 {:?}", c.score);
        assert!((c.score.e - oracle_e(c)).abs() < 1e-12, "e {:?} vs {}", c.score, oracle_e(c));
    }
    // Thresholds between the observed values, so that each condition rejects something.
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let filter = JointFilter {
        rho_f: median(candidates.iter().map(|c| c.score.f1).collect()),
        rho_e: median(candidates.iter().map(|c| c.score.e).collect()),
    };
    let kept: Vec<&Candidate> = candidates.iter().filter(|c| filter.keeps(&c.score)).collect();
    let low_f1 = candidates.iter().filter(|c| c.score.f1 < filter.rho_f).count();
    let low_e = candidates.iter().filter(|c| c.score.e < filter.rho_e).count();
    eprintln!(
        "rho_F {:.3} rho_e {:.3}: kept {}/{}, F1 below {low_f1}, e below {low_e}",
        filter.rho_f,
        filter.rho_e,
        kept.len(),
        candidates.len()
    );
    assert!(!kept.is_empty() && kept.len() < candidates.len());
    assert!(low_f1 > 0 && low_e > 0, "both thresholds must bite");
    for c in candidates {
        let both = c.score.f1 >= filter.rho_f && c.score.e >= filter.rho_e;
        assert_eq!(filter.keeps(&c.score), both, "{:?}", c.score);
    }
    // A trajectory passing one threshold only is rejected (whichever exists in this sample).
    let one_only = candidates.iter().filter(|c| (c.score.f1 >= filter.rho_f) != (c.score.e >= filter.rho_e));
    assert!(one_only.clone().count() > 0);
    assert!(one_only.into_iter().all(|c| !filter.keeps(&c.score)));
}

#[test]
fn rendered_masks_cover_exactly_the_assistant_text() {
    let tok = tokenizer();
    let c = candidates().iter().max_by_key(|c| c.trajectory.turns.len()).expect("candidates");
    let t = &c.trajectory;
    assert_eq!(t.turns.len(), 3, "the longest trajectory answers on the last of 4 turns");
    let example = render(t, &tok, &Conversation::default()).expect("render");
    assert_eq!(example.tokens.len(), example.mask.len());

    // The whole sequence is the chat template's text of the conversation.
    let mut expected = render_turn("system", &system_prompt(DEFAULT_INSTRUCTIONS)) + &render_turn("user", &t.prompt);
    for turn in &t.turns {
        let outputs: Vec<String> = turn.results.iter().map(|r| r.output.clone()).collect();
        expected += &format!("{GENERATION_PROMPT}{}<|im_end|>\n", turn.text);
        expected += &render_tool_responses(&outputs);
    }
    expected += &render_turn("user", LAST_TURN_NOTE);
    expected += &format!("{GENERATION_PROMPT}{}<|im_end|>\n", t.answer);
    assert_eq!(tok.decode(&example.tokens).expect("decode"), expected);

    // Each maximal masked run is one assistant turn and its `<|im_end|>`, nothing more.
    let mut runs: Vec<Vec<u32>> = Vec::new();
    let mut previous = false;
    for (&id, &m) in example.tokens.iter().zip(&example.mask) {
        if m && !previous {
            runs.push(Vec::new());
        }
        if m {
            runs.last_mut().expect("a run").push(id);
        }
        previous = m;
    }
    let decoded: Vec<String> = runs.iter().map(|r| tok.decode(r).expect("decode")).collect();
    let wanted: Vec<String> = t.assistant_texts().iter().map(|s| format!("{s}<|im_end|>")).collect();
    assert_eq!(decoded, wanted);
    let sys = tok.encode(&render_turn("system", &system_prompt(DEFAULT_INSTRUCTIONS))).expect("enc").len();
    let user = tok.encode(&render_turn("user", &t.prompt)).expect("enc").len();
    eprintln!("system {sys} tokens, user {user} tokens ({} chars)", t.prompt.len());
    eprintln!("sequence of {} tokens, {} trained on", example.tokens.len(), runs.iter().map(Vec::len).sum::<usize>());
}

/// The tiny shape cut to one layer of two heads: the system turn alone (tool schemas) is about
/// 1100 tokens for the tiny tokenizer, and training-path attention is quadratic.
fn small_model() -> (tempfile::TempDir, Qwen3Model, QwenTokenizer) {
    let cfg = Qwen3Config { num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, ..tiny_config() };
    let dir = tempfile::tempdir().expect("temp dir");
    write_checkpoint_with(dir.path(), 3, &cfg, 1).expect("tiny checkpoint");
    let tok = QwenTokenizer::from_file(&dir.path().join("tokenizer.json")).expect("tokenizer");
    let lora = LoraConfig { r: 4, alpha: 8.0, ..LoraConfig::default() };
    let model = Qwen3Model::load(dir.path(), DType::F32, &Device::Cpu, Some(&lora)).expect("load");
    (dir, model, tok)
}

/// Short system instructions and two turns, shared by the warm start and GRPO, keep the
/// sequences short.
fn conversation() -> Conversation {
    Conversation { instructions: "Find the files to change.".to_owned(), max_turns: 2 }
}

/// Settings small enough for a quick test; fewer greps per turn keep the sequences short.
fn quick() -> (WarmStartSpec, ScriptedSearcher) {
    let spec = WarmStartSpec {
        rho_f: 0.5,
        rho_e: 0.5,
        epochs: 2,
        lr: 2e-2,
        samples_per_task: 3,
        batch_size: 4,
        max_tasks: Some(3),
        max_tokens: Some(2500),
        // The memory-lean backward is the one a real run uses.
        gradient_checkpointing: true,
        ..WarmStartSpec::default()
    };
    (spec, ScriptedSearcher::new(SearcherOptions { max_patterns: 3, ..SearcherOptions::default() }))
}

/// One test for both stages: SFT is the expensive part, and GRPO must start from its result.
#[test]
fn sft_lowers_the_loss_on_the_kept_set_then_grpo_continues_from_it() {
    let (_dir, model, tok) = small_model();
    let (spec, searcher) = quick();
    let base_before: Vec<Vec<f32>> = model.base_weights().iter().map(values).collect();
    let started = std::time::Instant::now();
    let report = warm_start::sft(&searcher, &model, &tok, &conversation(), tasks(), &sandbox(), &spec, 1).expect("sft");
    eprintln!("{report:#?}\nSFT in {:.1?}", started.elapsed());
    assert_eq!(report.total, 9);
    assert!(report.kept > 0 && report.kept < report.total, "kept {}/{}", report.kept, report.total);
    assert!(report.too_long < report.kept, "something is trained on");
    assert!(report.mean_f1_kept >= spec.rho_f && report.mean_e_kept >= spec.rho_e);
    assert!(report.mean_f1_kept > report.mean_f1_all, "the filter raises F1");
    assert_eq!(report.epochs.len(), 2);
    assert!(report.loss_after() < report.loss_before, "{} -> {}", report.loss_before, report.loss_after());

    // Fresh adapters have B = 0; SFT moved every B, so the policy now differs from its reference.
    let warm: Vec<Vec<f32>> = model.lora_vars().iter().map(|v| values(v.as_tensor())).collect();
    assert!(model.linears().iter().all(|(_, l)| values(&l.adapter().expect("adapter").b).iter().any(|&x| x != 0.0)));

    // The agent wraps the same model: GRPO starts from the warm-started adapters, not fresh ones.
    let options = AgentOptions {
        instructions: conversation().instructions,
        max_new_tokens: 16,
        max_completion_tokens: 24,
        score_batch: 4,
        gradient_checkpointing: false,
        ..AgentOptions::default()
    };
    let policy = Qwen3Agent::new(model, tok, options).expect("agent");
    let config = EngineConfig {
        seed: 5,
        group_size: 2,
        prompts_per_step: 2,
        total_steps: 1,
        max_turns: conversation().max_turns,
        minibatches: 1,
        checkpoint_every: 0,
        eval_every: 0,
        optim: OptimConfig { lr: 1e-2, schedule: LrSchedule::Constant, ..OptimConfig::default() },
        ..EngineConfig::default()
    };
    let variant = Arc::new(RewardVariant::compile("fb", "reward = Fb(file)\n", 2, &[]).expect("compiles"));
    let mut engine = Engine::new(config, policy, task_set(), sandbox(), variant).expect("engine starts");
    let summary = engine.run(&scratch("warm-start-grpo"), |_| {}).expect("one GRPO step");
    assert_eq!(summary.steps_done, 1);
    let row = summary.last.expect("a metrics row");
    // With fresh adapters the first step's KL is exactly 0; here it is not: the reference is
    // the base model and the policy is the warm-started one.
    assert!(row.kl > 0.0 && row.grad_norm > 0.0, "{row:?}");
    let trained = engine.policy().model();
    let after: Vec<Vec<f32>> = trained.lora_vars().iter().map(|v| values(v.as_tensor())).collect();
    assert!(after.iter().zip(&warm).any(|(a, w)| a != w), "GRPO moved the adapters on from the warm start");
    let base_after: Vec<Vec<f32>> = trained.base_weights().iter().map(values).collect();
    assert!(base_after == base_before, "base weights stay frozen through SFT and GRPO");
}

#[test]
fn a_filter_nothing_passes_is_an_error_not_an_empty_warm_start() {
    let (_dir, model, tok) = small_model();
    let (spec, searcher) = quick();
    let strict = WarmStartSpec { rho_f: 1.0, rho_e: 1.0, ..spec };
    let err = warm_start::sft(&searcher, &model, &tok, &conversation(), tasks(), &sandbox(), &strict, 1)
        .expect_err("nothing kept");
    assert!(matches!(err, WarmStartError::NothingKept { total: 9, .. }), "{err}");
    let no_tasks = warm_start::sft(&searcher, &model, &tok, &conversation(), &[], &sandbox(), &spec, 1);
    assert!(matches!(no_tasks, Err(WarmStartError::NoTasks)));
    let bad = WarmStartSpec { rho_e: 2.0, ..spec };
    let invalid = warm_start::sft(&searcher, &model, &tok, &conversation(), tasks(), &sandbox(), &bad, 1);
    assert!(matches!(invalid, Err(WarmStartError::Invalid(_))));
}

#[test]
fn study_files_select_the_sft_warm_start() {
    let policy: PolicySpec = toml::from_str(
        r#"kind = "qwen3"
model = "tiny"
warm_start = { kind = "sft", rho_f = 0.6, rho_e = 0.55, epochs = 3 }"#,
    )
    .expect("policy with a warm start");
    let PolicySpec::Qwen3(q) = policy else { panic!("a qwen3 policy") };
    let spec = q.warm_start.expect("warm start");
    assert_eq!((spec.rho_f, spec.rho_e, spec.epochs), (0.6, 0.55, 3));
    let plain: PolicySpec = toml::from_str("kind = \"qwen3\"\nmodel = \"tiny\"\nwarm_start = \"sft\"").expect("plain");
    let PolicySpec::Qwen3(q) = plain else { panic!("a qwen3 policy") };
    assert_eq!(q.warm_start, Some(WarmStartSpec::default()));
}

fn values(t: &rewardlab_models::Tensor) -> Vec<f32> {
    t.flatten_all().and_then(|t| t.to_vec1::<f32>()).expect("f32 values")
}
