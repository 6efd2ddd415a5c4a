//! The training path and the KV-cached path agree, including under left padding.

use rewardlab_models::{Pass, Tensor};

use super::common::{ids, max_diff, tiny, tokens};

#[test]
fn cached_chunks_equal_training_logits() {
    let dir = tiny();
    let model = super::common::load(dir.path(), None);
    let seq = tokens(20, 9, 480);
    let full = model.forward_train(&ids(std::slice::from_ref(&seq)), Pass::REFERENCE).expect("train");
    // Prefill 7 tokens, then 5, then one at a time.
    let mut cache = model.new_cache(1);
    let mut pieces = Vec::new();
    let mut at = 0;
    for len in [7usize, 5, 1, 1, 1, 1, 1, 1, 1, 1] {
        let chunk = ids(&[seq[at..at + len].to_vec()]);
        let out = model.forward_cached(&chunk, &[vec![true; len]], &mut cache, Pass::SAMPLE, false).expect("cached");
        pieces.push(out);
        at += len;
    }
    assert_eq!(at, seq.len());
    let cached = Tensor::cat(&pieces, 1).expect("cat");
    let d = max_diff(&full, &cached);
    assert!(d < 1e-4, "cached vs training logits differ by {d}");
}

#[test]
fn left_padding_in_a_batch_changes_nothing() {
    let dir = tiny();
    let model = super::common::load(dir.path(), None);
    let short = tokens(6, 4, 480);
    let long = tokens(11, 8, 480);
    let alone = |seq: &Vec<u32>| {
        let mut cache = model.new_cache(1);
        model
            .forward_cached(&ids(std::slice::from_ref(seq)), &[vec![true; seq.len()]], &mut cache, Pass::SAMPLE, true)
            .expect("alone")
    };
    let mut padded_short = vec![0u32; 5];
    padded_short.extend(&short);
    let mut cache = model.new_cache(2);
    let valid = vec![(0..11).map(|i| i >= 5).collect(), vec![true; 11]];
    let both = model
        .forward_cached(&ids(&[padded_short, long.clone()]), &valid, &mut cache, Pass::SAMPLE, true)
        .expect("batched");
    let row = |i: usize| both.narrow(0, i, 1).expect("row");
    assert!(max_diff(&row(0), &alone(&short)) < 1e-4);
    assert!(max_diff(&row(1), &alone(&long)) < 1e-4);
    // A decode step where only the second row is active leaves the first row's next step exact.
    let step = ids(&[vec![17], vec![23]]);
    let _ =
        model.forward_cached(&step, &[vec![false], vec![true]], &mut cache, Pass::SAMPLE, true).expect("row 0 idle");
    let step = ids(&[vec![42], vec![5]]);
    let out = model.forward_cached(&step, &[vec![true], vec![true]], &mut cache, Pass::SAMPLE, true).expect("both");
    let mut expect_short = short.clone();
    expect_short.push(42);
    let mut expect_long = long.clone();
    expect_long.extend([23, 5]);
    assert!(max_diff(&out.narrow(0, 0, 1).expect("r0"), &alone(&expect_short)) < 1e-4);
    assert!(max_diff(&out.narrow(0, 1, 1).expect("r1"), &alone(&expect_long)) < 1e-4);
}

#[test]
fn generate_samples_batches_and_records_logprobs() {
    use rand::SeedableRng;
    use rewardlab_models::sampling::{SamplingParams, generate};
    let dir = tiny();
    let model = super::common::load(dir.path(), None);
    let prompts = vec![tokens(9, 1, 480), tokens(4, 2, 480), tokens(9, 1, 480)];
    let params = SamplingParams { temperature: 1.0, top_p: 1.0, top_k: 0, max_new_tokens: 12, stop_tokens: vec![7] };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let gens = generate(&model, &prompts, &params, Pass::SAMPLE, &mut rng).expect("generate");
    assert_eq!(gens.len(), 3);
    for (p, g) in prompts.iter().zip(&gens) {
        assert!(!g.tokens.is_empty() && g.tokens.len() <= 12);
        assert_eq!(g.tokens.len(), g.logprobs.len());
        // The recorded log-probs equal a fresh scoring of prompt + generation (T = 1, no cut).
        let mut seq = p.clone();
        seq.extend(&g.tokens);
        let logits = model.forward_train(&ids(std::slice::from_ref(&seq)), Pass::REFERENCE).expect("score");
        let lsm = candle_nn::ops::log_softmax(&logits, 2).expect("lsm");
        for (k, (&tok, &lp)) in g.tokens.iter().zip(&g.logprobs).enumerate() {
            let pos = p.len() + k - 1;
            let want = lsm
                .get(0)
                .and_then(|t| t.get(pos))
                .and_then(|t| t.get(tok as usize))
                .and_then(|t| t.to_scalar::<f32>())
                .expect("value");
            assert!((want - lp).abs() < 1e-3, "token {k}: sampled lp {lp} vs scored {want}");
        }
        if g.finish == rewardlab_models::FinishReason::Stop {
            assert_eq!(g.tokens.last(), Some(&7));
        } else {
            assert_eq!(g.tokens.len(), 12);
        }
    }
}
