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

#[test]
fn row_caches_carried_into_another_batch_continue_like_the_training_path() {
    use rewardlab_models::KvCache;
    let dir = tiny();
    let model = super::common::load(dir.path(), None);
    let layers = model.config().num_hidden_layers;
    let a = tokens(13, 3, 480);
    let b = tokens(5, 7, 480);
    let train = |seq: &[u32]| model.forward_train(&ids(&[seq.to_vec()]), Pass::REFERENCE).expect("train");
    // Turn 1: both prompts in one batch (b left-padded), two decode steps, b idle in the second.
    let mut cache = model.new_cache(2);
    let mut padded_b = vec![0u32; 8];
    padded_b.extend(&b);
    let valid = vec![vec![true; 13], (0..13).map(|i| i >= 8).collect()];
    model.forward_cached(&ids(&[a.clone(), padded_b]), &valid, &mut cache, Pass::SAMPLE, true).expect("prefill");
    model
        .forward_cached(&ids(&[vec![11], vec![12]]), &[vec![true], vec![true]], &mut cache, Pass::SAMPLE, true)
        .expect("step");
    model
        .forward_cached(&ids(&[vec![21], vec![22]]), &[vec![true], vec![false]], &mut cache, Pass::SAMPLE, true)
        .expect("step");
    let (row_a, row_b) = (cache.take_row(0).expect("row a"), cache.take_row(1).expect("row b"));
    assert_eq!((row_a.len(), row_b.len()), (15, 6), "only real tokens are kept");
    let mut seq_a = a.clone();
    seq_a.extend([11, 21]);
    let mut seq_b = b.clone();
    seq_b.push(12);

    // Turn 2, rows swapped: continuations of different lengths (a tool response and the next
    // turn's template), b's of 9 tokens, a's of 4 left-padded in the chunk.
    let (more_a, more_b) = (tokens(4, 9, 480), tokens(9, 5, 480));
    let mut next = KvCache::from_rows(&[Some(row_b), Some(row_a.clone())], layers, 16).expect("from rows");
    let mut padded_a = vec![0u32; 5];
    padded_a.extend(&more_a);
    let valid = vec![vec![true; 9], (0..9).map(|i| i >= 5).collect()];
    let out = model
        .forward_cached(&ids(&[more_b.clone(), padded_a]), &valid, &mut next, Pass::SAMPLE, false)
        .expect("turn 2");
    let full_a = [seq_a.clone(), more_a.clone()].concat();
    let full_b = [seq_b.clone(), more_b.clone()].concat();
    let want_a = train(&full_a).narrow(1, seq_a.len(), 4).expect("a's new positions");
    let want_b = train(&full_b).narrow(1, seq_b.len(), 9).expect("b's new positions");
    let got_a = out.narrow(0, 1, 1).and_then(|t| t.narrow(1, 5, 4)).expect("a");
    let got_b = out.narrow(0, 0, 1).expect("b");
    assert!(max_diff(&got_a, &want_a) < 1e-4, "a: {}", max_diff(&got_a, &want_a));
    assert!(max_diff(&got_b, &want_b) < 1e-4, "b: {}", max_diff(&got_b, &want_b));
    // And a decode step after it, where both rows continue from their second turn.
    let step = model
        .forward_cached(&ids(&[vec![30], vec![31]]), &[vec![true], vec![true]], &mut next, Pass::SAMPLE, true)
        .expect("step");
    let last = |seq: Vec<u32>| {
        let n = seq.len();
        train(&seq).narrow(1, n - 1, 1).expect("last")
    };
    assert!(max_diff(&step.narrow(0, 0, 1).expect("b"), &last([full_b.clone(), vec![30]].concat())) < 1e-4);
    assert!(max_diff(&step.narrow(0, 1, 1).expect("a"), &last([full_a.clone(), vec![31]].concat())) < 1e-4);

    // A prefix of a row's cache is the cache of that prefix; a row without a cache beside it
    // prefills from scratch in the same chunk.
    let mut cut = row_a;
    cut.truncate(10).expect("truncate");
    assert_eq!(cut.len(), 10);
    let mut mixed = KvCache::from_rows(&[Some(cut), None], layers, 8).expect("from rows");
    let tail = seq_a[10..].to_vec();
    let mut padded_tail = vec![0u32; 1];
    padded_tail.extend(&tail);
    let fresh = tokens(6, 2, 480);
    let valid = vec![(0..6).map(|i| i >= 1).collect(), vec![true; 6]];
    let out = model
        .forward_cached(&ids(&[padded_tail, fresh.clone()]), &valid, &mut mixed, Pass::SAMPLE, true)
        .expect("mixed");
    assert!(max_diff(&out.narrow(0, 0, 1).expect("a"), &last(seq_a)) < 1e-4);
    assert!(max_diff(&out.narrow(0, 1, 1).expect("fresh"), &last(fresh)) < 1e-4);
}
