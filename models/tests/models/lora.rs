//! LoRA: gradients reach every adapter matrix and no base weight; off means the base model.

use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rewardlab_models::policy::token_logprobs;
use rewardlab_models::{Device, LoraConfig, Pass, Tensor};

use super::common::{ids, load, max_abs, max_diff, tiny, tokens};

fn lora() -> LoraConfig {
    LoraConfig { r: 8, alpha: 16.0, seed: 4, ..LoraConfig::default() }
}

fn batch() -> (Vec<Vec<u32>>, Vec<Vec<bool>>) {
    let seqs = vec![tokens(14, 3, 480), tokens(10, 6, 480)];
    let masks = seqs.iter().map(|s| (0..s.len()).map(|i| i >= 4).collect()).collect();
    (seqs, masks)
}

/// Sets every B to small random values so A's gradient (∝ Bᵀ) is non-zero from the start.
fn randomise_b(model: &rewardlab_models::Qwen3Model) {
    for (i, (_, linear)) in model.linears().into_iter().enumerate() {
        let b = &linear.adapter().expect("all targeted").b;
        let noise = Tensor::randn(0f32, 0.05, b.dims(), &Device::Cpu).expect("randn");
        let _ = i;
        b.set(&noise).expect("set B");
    }
}

#[test]
fn every_adapter_gets_a_gradient_and_no_base_weight_does() {
    // B is initialised non-zero here (at B = 0, A's gradient is exactly zero).
    let dir = tiny();
    let model = load(dir.path(), Some(&lora()));
    randomise_b(&model);
    let (seqs, masks) = batch();
    let loss = token_logprobs(&model, &seqs, &masks, Pass::TRAIN).expect("logprobs").sum_all().expect("sum");
    let grads = loss.backward().expect("backward");
    let vars = model.lora_vars();
    assert_eq!(vars.len(), 2 * 7 * 2, "A and B on 7 projections in 2 layers");
    for (k, v) in vars.iter().enumerate() {
        let g = grads.get(v.as_tensor()).unwrap_or_else(|| panic!("adapter {k} got no gradient"));
        assert!(max_abs(g) > 0.0, "adapter {k} got an all-zero gradient");
    }
    for w in model.base_weights() {
        assert!(grads.get(&w).is_none(), "a frozen base weight received a gradient");
    }
}

#[test]
fn from_zero_b_every_adapter_has_a_gradient_after_one_step() {
    // Standard init (B = 0): only B has a gradient at first; after one AdamW step all do.
    let dir = tiny();
    let model = load(dir.path(), Some(&lora()));
    let (seqs, masks) = batch();
    let lp = |m: &rewardlab_models::Qwen3Model| {
        token_logprobs(m, &seqs, &masks, Pass::TRAIN).expect("logprobs").sum_all().expect("sum")
    };
    let mut opt = AdamW::new(model.lora_vars(), ParamsAdamW { lr: 1e-2, ..ParamsAdamW::default() }).expect("adamw");
    let first = lp(&model).neg().expect("neg").backward().expect("backward");
    for (name, linear) in model.linears() {
        let ad = linear.adapter().expect("adapter");
        let ga = first.get(ad.a.as_tensor()).map_or(0.0, max_abs);
        let gb = first.get(ad.b.as_tensor()).map_or(0.0, max_abs);
        assert_eq!(ga, 0.0, "{name}: A's gradient is zero while B = 0");
        assert!(gb > 0.0, "{name}: B's gradient is non-zero");
    }
    opt.step(&first).expect("step");
    let second = lp(&model).neg().expect("neg").backward().expect("backward");
    for v in model.lora_vars() {
        let g = second.get(v.as_tensor()).expect("gradient present");
        assert!(max_abs(g) > 0.0);
    }
}

#[test]
fn lora_off_is_the_base_model_and_zero_b_changes_nothing() {
    let dir = tiny();
    let base = load(dir.path(), None);
    let model = load(dir.path(), Some(&lora()));
    let input = ids(&[tokens(12, 2, 480)]);
    let reference = base.forward_train(&input, Pass::REFERENCE).expect("base");
    // B = 0: adapters on and off give bit-identical logits, so the initial KL is exactly 0.
    let on = model.forward_train(&input, Pass::TRAIN).expect("on");
    assert_eq!(max_diff(&on, &reference), 0.0);
    randomise_b(&model);
    let on = model.forward_train(&input, Pass::TRAIN).expect("on");
    let off = model.forward_train(&input, Pass::REFERENCE).expect("off");
    assert_eq!(max_diff(&off, &reference), 0.0, "LoRA off must be exactly the base");
    assert!(max_diff(&on, &reference) > 1e-3, "LoRA on must change the logits");
}

#[test]
fn checkpointed_backward_equals_the_plain_one() {
    let dir = tiny();
    let model = load(dir.path(), Some(&lora()));
    randomise_b(&model);
    let (seqs, masks) = batch();
    let loss_of = |lp: &Tensor| -> rewardlab_models::Result<Tensor> { Ok(lp.sqr()?.sum_all()?) };
    let plain_loss = loss_of(&token_logprobs(&model, &seqs, &masks, Pass::TRAIN).expect("lp")).expect("loss");
    let plain = plain_loss.backward().expect("backward");
    let (loss, grads) =
        rewardlab_models::policy::backward_checkpointed(&model, &seqs, &masks, loss_of).expect("checkpointed");
    let (a, b) = (loss.to_scalar::<f32>().expect("s"), plain_loss.to_scalar::<f32>().expect("s"));
    assert!((a - b).abs() <= 1e-4 * b.abs());
    for v in model.lora_vars() {
        let want = plain.get(v.as_tensor()).expect("plain grad");
        let got = grads.get(v.as_tensor()).expect("checkpointed grad");
        let tol = 1e-4 * max_abs(want).max(1e-3);
        assert!(max_diff(got, want) <= tol, "gradient differs by {}", max_diff(got, want));
    }
    for w in model.base_weights() {
        assert!(grads.get(&w).is_none());
    }
}

#[test]
fn passes_without_a_gradient_record_no_graph_and_give_the_same_values() {
    let dir = tiny();
    let model = load(dir.path(), Some(&lora()));
    randomise_b(&model);
    let seq = tokens(12, 2, 480);
    let input = ids(std::slice::from_ref(&seq));
    let train = model.forward_train(&input, Pass::TRAIN).expect("train");
    assert!(train.track_op(), "the training pass records its graph for the backward pass");
    // Scoring without a gradient: the same kernels and values, nothing recorded (a recorded
    // graph keeps every layer's intermediates alive: on a GPU, scoring a batch of long
    // rollouts ran out of 139 GiB that way).
    let score = model.forward_train(&input, Pass { grad: false, ..Pass::TRAIN }).expect("score");
    assert!(!score.track_op(), "a pass without a gradient must not record its operands");
    assert_eq!(max_diff(&train, &score), 0.0);
    // Sampling through the KV cache: nothing recorded either, so the cache holds no graph.
    let mut cache = model.new_cache(1);
    let cached =
        model.forward_cached(&input, &[vec![true; seq.len()]], &mut cache, Pass::SAMPLE, false).expect("cached");
    assert!(!cached.track_op(), "sampling must not record its operands");
}
