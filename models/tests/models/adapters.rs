//! PEFT adapter files round-trip; SFT lowers its loss; the policy facade works end to end.

use rewardlab_models::peft::{self, AdapterConfig};
use rewardlab_models::sft::{SftOptions, SftTrainer, sft_loss};
use rewardlab_models::{Device, LoraConfig, Pass, PolicyOptions, Qwen3Policy, SamplingParams, Tensor};

use super::common::{ids, load, max_diff, tiny, tokens};

#[test]
fn peft_adapter_round_trips() {
    let dir = tiny();
    let cfg = LoraConfig { r: 4, alpha: 8.0, seed: 9, ..LoraConfig::default() };
    let model = load(dir.path(), Some(&cfg));
    for (_, l) in model.linears() {
        let b = &l.adapter().expect("adapter").b;
        b.set(&Tensor::randn(0f32, 0.1, b.dims(), &Device::Cpu).expect("randn")).expect("set");
    }
    let out = tempfile::tempdir().expect("tmp");
    peft::save_adapter(&model, out.path(), Some("Qwen/Qwen3-14B")).expect("save");

    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join(peft::ADAPTER_CONFIG)).expect("read"))
            .expect("json");
    assert_eq!(config["peft_type"], "LORA");
    assert_eq!(config["task_type"], "CAUSAL_LM");
    assert_eq!(config["r"], 4);
    assert_eq!(config["base_model_name_or_path"], "Qwen/Qwen3-14B");
    let tensors = candle_core::safetensors::load(out.path().join(peft::ADAPTER_WEIGHTS), &Device::Cpu).expect("load");
    assert_eq!(tensors.len(), 2 * 7 * 2);
    let a = &tensors["base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"];
    let b = &tensors["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"];
    assert_eq!(a.dims(), &[4, 64], "A is [r, in]");
    assert_eq!(b.dims(), &[64, 4], "B is [out, r]");

    // A fresh model (different A init, B = 0) becomes the saved one after loading.
    let read = peft::read_adapter_config(out.path()).expect("config");
    let mut fresh_cfg = read.lora_config(out.path()).expect("lora config");
    fresh_cfg.seed = 1234;
    assert_eq!(read, AdapterConfig::new(&cfg, Some("Qwen/Qwen3-14B")));
    let fresh = load(dir.path(), Some(&fresh_cfg));
    let input = ids(&[tokens(10, 3, 480)]);
    let want = model.forward_train(&input, Pass::TRAIN).expect("orig");
    assert!(max_diff(&fresh.forward_train(&input, Pass::TRAIN).expect("fresh"), &want) > 1e-4);
    peft::load_adapter(&fresh, out.path()).expect("load adapter");
    assert_eq!(max_diff(&fresh.forward_train(&input, Pass::TRAIN).expect("loaded"), &want), 0.0);

    // A mismatched rank is refused with a clear error.
    let wrong = load(dir.path(), Some(&LoraConfig { r: 2, ..cfg }));
    let err = peft::load_adapter(&wrong, out.path()).expect_err("rank mismatch");
    assert!(err.to_string().contains("r=4"), "{err}");
}

#[test]
fn sft_warm_start_lowers_the_loss() {
    let dir = tiny();
    let model = load(dir.path(), Some(&LoraConfig { r: 8, alpha: 16.0, ..LoraConfig::default() }));
    // Two fixed trajectories; only their "generated" halves are trained on.
    let seqs = vec![tokens(24, 1, 480), tokens(18, 2, 480)];
    let masks: Vec<Vec<bool>> = seqs.iter().map(|s| (0..s.len()).map(|i| i >= s.len() / 2).collect()).collect();
    let mut trainer = SftTrainer::new(&model, &SftOptions { learning_rate: 1e-2, weight_decay: 0.0 }).expect("trainer");
    let before = sft_loss(&model, &seqs, &masks).expect("loss").to_scalar::<f32>().expect("scalar");
    let mut losses = Vec::new();
    for _ in 0..8 {
        losses.push(trainer.step(&model, &seqs, &masks).expect("step"));
    }
    let after = sft_loss(&model, &seqs, &masks).expect("loss").to_scalar::<f32>().expect("scalar");
    assert!((losses[0] - before).abs() < 1e-5);
    assert!(after < before - 0.5, "SFT loss {before} -> {after} ({losses:?})");
}

#[test]
fn policy_generates_and_scores_with_and_without_lora() {
    let dir = tiny();
    let options = PolicyOptions {
        lora: LoraConfig { r: 4, alpha: 8.0, ..LoraConfig::default() },
        sampling: SamplingParams { max_new_tokens: 6, ..SamplingParams::default() },
        seed: 3,
        ..PolicyOptions::default()
    };
    let mut policy = Qwen3Policy::load(dir.path(), options).expect("policy");
    let im_end = policy.tokenizer().special().im_end;
    assert!(policy.sampling().stop_tokens.contains(&im_end));
    let prompt = policy.tokenizer().encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n").expect("enc");
    let gens = policy.generate(&vec![prompt.clone(); 4]).expect("generate");
    assert_eq!(gens.len(), 4);
    let seqs: Vec<Vec<u32>> = gens.iter().map(|g| [prompt.clone(), g.tokens.clone()].concat()).collect();
    let masks: Vec<Vec<bool>> = seqs.iter().map(|s| (0..s.len()).map(|i| i >= prompt.len()).collect()).collect();
    let on = policy.logprobs(&seqs, &masks, true).expect("on");
    let off = policy.logprobs(&seqs, &masks, false).expect("off");
    let longest = seqs.iter().map(Vec::len).max().expect("non-empty");
    assert_eq!(on.dims(), &[4, longest]);
    // B = 0 at start: the policy equals its reference exactly.
    assert_eq!(max_diff(&on, &off), 0.0);
    assert_eq!(policy.lora_vars().len(), 28);
    let grads = on.sum_all().expect("sum").backward().expect("backward");
    assert!(policy.lora_vars().iter().any(|v| grads.get(v.as_tensor()).is_some()));
    assert!(off.sum_all().expect("sum").backward().expect("detached").get(policy.lora_vars()[1].as_tensor()).is_none());
}
