//! Logits against candle-transformers' Qwen3 on the same weights (the independent oracle).

use candle_nn::VarBuilder;
use candle_transformers::models::qwen3 as oracle;
use rewardlab_models::checkpoint::ShardedSafetensors;
use rewardlab_models::tiny::tiny_config;
use rewardlab_models::{DType, Device, Pass, Tensor};

use super::common::{checkpoint, ids, load, max_abs, max_diff, tokens};

fn compare(tie: bool, shards: usize) {
    let mut cfg = tiny_config();
    cfg.tie_word_embeddings = tie;
    let dir = checkpoint(&cfg, shards, 11);
    let ours = load(dir.path(), None);
    let text = std::fs::read_to_string(dir.path().join("config.json")).expect("config");
    let ocfg: oracle::Config = serde_json::from_str(&text).expect("oracle parses our config.json");
    let weights = ShardedSafetensors::open(dir.path()).expect("weights");
    assert_eq!(weights.shard_count(), shards);
    assert_eq!(dir.path().join("model.safetensors.index.json").exists(), shards > 1);
    let lm_head = if tie {
        weights.load("model.embed_tokens.weight", &Device::Cpu).expect("embed")
    } else {
        weights.load("lm_head.weight", &Device::Cpu).expect("head")
    };
    let vb = VarBuilder::from_backend(Box::new(weights), DType::F32, Device::Cpu);
    let mut base = oracle::Model::new(&ocfg, vb.clone()).expect("oracle model");
    let mut causal = oracle::ModelForCausalLM::new(&ocfg, vb).expect("oracle lm");

    let rows = vec![tokens(23, 1, 480), tokens(23, 5, 480)];
    let input = ids(&rows);
    let hidden = base.forward(&input, 0).expect("oracle forward");
    let (b, l, h) = hidden.dims3().expect("dims");
    let expected = hidden
        .reshape((b * l, h))
        .and_then(|x| x.matmul(&lm_head.t()?))
        .and_then(|x| x.reshape((b, l, cfg.vocab_size)))
        .expect("oracle logits");
    assert!(max_abs(&expected) > 1.0, "logits are not trivially small");

    let train = ours.forward_train(&input, Pass::REFERENCE).expect("train path");
    let d = max_diff(&train, &expected);
    assert!(d < 1e-3, "training path differs from the oracle by {d}");
    let fused = ours
        .forward_train(&input, Pass { mode: rewardlab_models::Mode::Infer, lora: false, grad: false })
        .expect("fused kernels without cache");
    let d = max_diff(&fused, &expected);
    assert!(d < 1e-3, "fused kernels differ from the oracle by {d}");

    // Cached path, last position, against the oracle's causal-LM head.
    let expected_last = causal.forward(&input, 0).expect("oracle lm forward");
    let mut cache = ours.new_cache(2);
    let valid = vec![vec![true; 23]; 2];
    let last = ours.forward_cached(&input, &valid, &mut cache, Pass::SAMPLE, true).expect("cached");
    let d = max_diff(&last, &expected_last);
    assert!(d < 1e-3, "cached path differs from the oracle by {d}");
}

#[test]
fn logits_match_candle_transformers_untied() {
    compare(false, 1);
}

#[test]
fn logits_match_candle_transformers_tied_and_sharded() {
    compare(true, 3);
}

#[test]
fn bf16_load_runs_and_tracks_f32() {
    let dir = super::common::tiny();
    let f32_model = load(dir.path(), None);
    let bf16 = rewardlab_models::Qwen3Model::load(dir.path(), DType::BF16, &Device::Cpu, None).expect("bf16 load");
    assert_eq!(bf16.dtype(), DType::BF16);
    let input = ids(&[tokens(16, 2, 480)]);
    let a = f32_model.forward_train(&input, Pass::REFERENCE).expect("f32");
    let b = bf16.forward_train(&input, Pass::REFERENCE).expect("bf16");
    assert_eq!(b.dtype(), DType::F32, "logits come back in f32");
    let scale = max_abs(&a);
    let d = max_diff(&a, &b);
    assert!(d < 0.1 * scale, "bf16 logits drift {d} against scale {scale}");
    // The sampling path runs in bf16 as well.
    let mut cache = bf16.new_cache(1);
    let out = bf16.forward_cached(&input, &[vec![true; 16]], &mut cache, Pass::SAMPLE, true).expect("bf16 cached");
    assert_eq!(out.dims(), &[1, 1, 512]);
    let _ = Tensor::zeros(1, DType::F32, &Device::Cpu);
}
