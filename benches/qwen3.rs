//! Qwen3 throughput: this project's implementation beside candle-transformers' qwen3 on the
//! same weights (hidden 256, 4 layers, 4 query / 2 KV heads of 64, vocab 512).
//!
//! - `qwen3_prefill_128`, `qwen3_prefill_512`: one prompt of that many tokens → next-token
//!   logits (tokens/s); ours through the KV-cached sampling path, and (128 only) the
//!   differentiable training path with all logits, for scale.
//! - `qwen3_decode_64`: prompt of 16, then 64 sampled tokens with the KV cache (tokens/s),
//!   top-k 50 / top-p 0.9 / T 1.0 for both; ours also with a batch of 8 rows.

use std::time::Duration;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::generation::{LogitsProcessor, Sampling};
use candle_transformers::models::qwen3 as oracle;
use criterion::{Criterion, Throughput, criterion_group};
use rand::SeedableRng;
use rewardlab_models::checkpoint::ShardedSafetensors;
use rewardlab_models::sampling::{SamplingParams, generate};
use rewardlab_models::tiny::{tiny_config, write_checkpoint_with};
use rewardlab_models::{Pass, Qwen3Model};

/// Prompt lengths of the prefill groups.
const PROMPTS: [usize; 2] = [128, 512];
const NEW: usize = 64;

struct Fixture {
    _dir: tempfile::TempDir,
    ours: Qwen3Model,
    theirs: oracle::ModelForCausalLM,
}

fn fixture() -> Fixture {
    let mut cfg = tiny_config();
    cfg.hidden_size = 256;
    cfg.intermediate_size = 768;
    cfg.num_hidden_layers = 4;
    cfg.num_attention_heads = 4;
    cfg.num_key_value_heads = 2;
    cfg.head_dim = Some(64);
    let dir = tempfile::tempdir().expect("temp dir");
    write_checkpoint_with(dir.path(), 1, &cfg, 1).expect("checkpoint");
    let ours = Qwen3Model::load(dir.path(), DType::F32, &Device::Cpu, None).expect("ours");
    let text = std::fs::read_to_string(dir.path().join("config.json")).expect("config");
    let ocfg: oracle::Config = serde_json::from_str(&text).expect("oracle config");
    let weights = ShardedSafetensors::open(dir.path()).expect("weights");
    let vb = VarBuilder::from_backend(Box::new(weights), DType::F32, Device::Cpu);
    let theirs = oracle::ModelForCausalLM::new(&ocfg, vb).expect("theirs");
    Fixture { _dir: dir, ours, theirs }
}

fn prompt(len: usize) -> Vec<u32> {
    (0..len as u32).map(|i| (i * 131 + 7) % 480).collect()
}

fn bench(c: &mut Criterion) {
    let mut f = fixture();
    for len in PROMPTS {
        let ids = Tensor::from_vec(prompt(len), (1, len), &Device::Cpu).expect("ids");
        let mut g = c.benchmark_group(format!("qwen3_prefill_{len}"));
        g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(20);
        g.throughput(Throughput::Elements(len as u64));
        g.bench_function("rewardlab_cached", |b| {
            b.iter(|| {
                let mut cache = f.ours.new_cache(1);
                f.ours.forward_cached(&ids, &[vec![true; len]], &mut cache, Pass::SAMPLE, true).expect("forward")
            })
        });
        g.bench_function("candle_transformers", |b| {
            b.iter(|| {
                f.theirs.clear_kv_cache();
                f.theirs.forward(&ids, 0).expect("forward")
            })
        });
        if len == PROMPTS[0] {
            g.bench_function("rewardlab_train_path_all_logits", |b| {
                b.iter(|| f.ours.forward_train(&ids, Pass::REFERENCE).expect("forward"))
            });
        }
        g.finish();
    }

    let params = SamplingParams { max_new_tokens: NEW, ..SamplingParams::default() };
    let short = prompt(16);
    let mut g = c.benchmark_group("qwen3_decode_64");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    g.throughput(Throughput::Elements(NEW as u64));
    g.bench_function("rewardlab_generate_b1", |b| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        b.iter(|| generate(&f.ours, std::slice::from_ref(&short), &params, Pass::SAMPLE, &mut rng).expect("generate"))
    });
    g.bench_function("candle_transformers_b1", |b| {
        let mut lp = LogitsProcessor::from_sampling(1, Sampling::TopKThenTopP { k: 50, p: 0.9, temperature: 1.0 });
        b.iter(|| {
            f.theirs.clear_kv_cache();
            let input = Tensor::from_vec(short.clone(), (1, short.len()), &Device::Cpu).expect("ids");
            let mut logits = f.theirs.forward(&input, 0).expect("prefill");
            let mut out = Vec::with_capacity(NEW);
            for step in 0..NEW {
                let row = logits.squeeze(0).and_then(|l| l.squeeze(0)).expect("row");
                let tok = lp.sample(&row).expect("sample");
                out.push(tok);
                if step + 1 == NEW {
                    break;
                }
                let next = Tensor::new(&[[tok]], &Device::Cpu).expect("ids");
                logits = f.theirs.forward(&next, short.len() + step).expect("decode");
            }
            out
        })
    });
    g.throughput(Throughput::Elements((8 * NEW) as u64));
    g.bench_function("rewardlab_generate_b8", |b| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let group = vec![short.clone(); 8];
        b.iter(|| generate(&f.ours, &group, &params, Pass::SAMPLE, &mut rng).expect("generate"))
    });
    g.finish();
}

criterion_group!(benches, bench);

/// As the binaries do (`threads::set_thread_count_env`): without it candle
/// reads `/proc/cpuinfo` on every matmul, for both models alike. Set
/// `RAYON_NUM_THREADS` yourself to measure another count.
fn main() {
    // SAFETY: first thing in `main`, before criterion or candle start threads.
    unsafe { rewardlab_models::threads::set_thread_count_env() };
    benches();
    Criterion::default().configure_from_args().final_summary();
}
