//! Tiny Qwen3 checkpoints written from scratch: config, random weights, and a byte-level BPE
//! tokenizer trained in-process on a small corpus, so tests and demos need no download.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::checkpoint::write_checkpoint;
use crate::qwen3::Qwen3Config;
use crate::tokenizer::SPECIAL_TOKENS;
use crate::{Error, Result};

/// BPE vocabulary learned for tiny checkpoints (256 byte tokens plus merges).
pub const TINY_BPE_VOCAB: usize = 480;
/// The tiny model's `vocab_size`: the tokenizer's ids plus headroom, as Qwen pads its own.
pub const TINY_VOCAB: usize = 512;

/// Qwen2/3's pre-tokenization regex (contractions, letters, single digits, punctuation runs,
/// newlines, spaces).
const QWEN_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Text the tiny tokenizer learns its merges from: the template, tool calls and code.
const CORPUS: &[&str] = &[
    "You are a code search agent. Find the files and line ranges relevant to the issue.",
    "You may call one or more functions to assist with the user query.",
    "You are provided with function signatures within <tools></tools> XML tags:",
    "For each function call, return a json object with function name and arguments",
    r#"{"name": "grep", "arguments": {"pattern": "def parse_args", "path": "src"}}"#,
    r#"{"name": "glob", "arguments": {"pattern": "**/*.py"}}"#,
    r#"{"name": "read", "arguments": {"path": "src/main.rs", "start": 10, "end": 40}}"#,
    r#"<answer>{"files": ["requests/models.py"], "line_ranges": ["requests/models.py:386-399"]}</answer>"#,
    "fn main() { let args = std::env::args().collect::<Vec<String>>(); println!(\"{args:?}\"); }",
    "def parse_args(argv):\n    parser = argparse.ArgumentParser()\n    return parser.parse_args(argv)\n",
    "import os\nimport sys\nfrom pathlib import Path\n\nclass Session(object):\n    def request(self, method, url):\n        return self.send(method, url)\n",
    "The issue reports that the session does not keep cookies between requests.",
    "src/lib.rs:12: pub fn search(pattern: &str, path: &Path) -> Result<Vec<Match>, Error> {",
    "tests/test_models.py:88:    def test_prepared_request_hook(self):",
    "error: expected one of `,` or `)`, found `;` at line 42 column 17",
    "Let me search for the function definition first, then read the surrounding lines.",
    "The relevant code is in the models module, where the request is prepared and sent.",
];

/// The tiny config's hidden width.
const TINY_WIDTH: usize = 64;

/// The default tiny shape: hidden 64, 2 layers, 4 query heads over 2 KV heads of width 16.
pub fn tiny_config() -> Qwen3Config {
    Qwen3Config {
        model_type: "qwen3".to_owned(),
        vocab_size: TINY_VOCAB,
        hidden_size: TINY_WIDTH,
        intermediate_size: 128,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        head_dim: Some(16),
        rms_norm_eps: 1e-6,
        rope_theta: 1_000_000.0,
        tie_word_embeddings: false,
        max_position_embeddings: 4096,
        attention_bias: false,
        hidden_act: "silu".to_owned(),
        use_sliding_window: false,
        sliding_window: None,
        max_window_layers: 2,
        rope_scaling: None,
        torch_dtype: Some("float32".to_owned()),
        bos_token_id: None,
        eos_token_id: None,
    }
}

/// Writes the default tiny checkpoint (config, single-file f32 weights, tokenizer) into `dir`.
pub fn write_tiny_checkpoint(dir: &Path, seed: u64) -> Result<()> {
    write_checkpoint_with(dir, seed, &tiny_config(), 1)
}

/// Writes a checkpoint of any Qwen3 shape with random weights, split into `shards` files.
/// `cfg.vocab_size` must be at least the tiny tokenizer's size.
pub fn write_checkpoint_with(dir: &Path, seed: u64, cfg: &Qwen3Config, shards: usize) -> Result<()> {
    cfg.validate()?;
    let tokenizer = build_tokenizer()?;
    let needed = tokenizer.get_vocab_size(true);
    if cfg.vocab_size < needed {
        return Err(Error::Config(format!("vocab_size {} is below the tiny tokenizer's {needed} ids", cfg.vocab_size)));
    }
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let config_path = dir.join("config.json");
    let text = serde_json::to_string_pretty(cfg).map_err(Error::json(&config_path))?;
    std::fs::write(&config_path, text).map_err(Error::io(&config_path))?;
    let tok_path = dir.join("tokenizer.json");
    tokenizer.save(&tok_path, true).map_err(|e| Error::Tokenizer(format!("writing {}: {e}", tok_path.display())))?;
    write_checkpoint(dir, &random_weights(cfg, seed)?, shards)
}

/// Random f32 weights for every tensor of `cfg`, under checkpoint names.
///
/// Scales keep activations O(1) through the stack (uniform ±1/√fan_in for projections),
/// embeddings spread so logits differ visibly, norm gains near 1 but not equal to it (so a
/// forgotten gain shows up in the oracle test). The embeddings' bound is ±1 at the tiny
/// config's width (64) and shrinks as 1/√hidden beyond it, so a published shape's tied logits
/// keep the tiny config's spread instead of growing with √hidden (at ±1, Qwen3-0.6B's shape
/// gave logits up to |251|, where float32 sums over 28 layers differ by 2e-4).
pub fn random_weights(cfg: &Qwen3Config, seed: u64) -> Result<BTreeMap<String, Tensor>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dev = Device::Cpu;
    let mut out = BTreeMap::new();
    let uniform = |shape: (usize, usize), bound: f32, rng: &mut ChaCha8Rng| -> Result<Tensor> {
        let data: Vec<f32> = (0..shape.0 * shape.1).map(|_| rng.random_range(-bound..bound)).collect();
        Ok(Tensor::from_vec(data, shape, &dev)?)
    };
    let (h, i, d) = (cfg.hidden_size, cfg.intermediate_size, cfg.head_dim());
    let (nq, nkv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
    let embed_bound = (TINY_WIDTH as f32 / h.max(TINY_WIDTH) as f32).sqrt();
    out.insert("model.embed_tokens.weight".to_owned(), uniform((cfg.vocab_size, h), embed_bound, &mut rng)?);
    let gain = |n: usize, rng: &mut ChaCha8Rng| -> Result<Tensor> {
        let data: Vec<f32> = (0..n).map(|_| 1.0 + rng.random_range(-0.2f32..0.2)).collect();
        Ok(Tensor::from_vec(data, n, &Device::Cpu)?)
    };
    for l in 0..cfg.num_hidden_layers {
        let p = format!("model.layers.{l}");
        for (name, out_dim, in_dim) in [
            ("self_attn.q_proj", nq * d, h),
            ("self_attn.k_proj", nkv * d, h),
            ("self_attn.v_proj", nkv * d, h),
            ("self_attn.o_proj", h, nq * d),
            ("mlp.gate_proj", i, h),
            ("mlp.up_proj", i, h),
            ("mlp.down_proj", h, i),
        ] {
            let bound = 1.0 / (in_dim as f32).sqrt();
            out.insert(format!("{p}.{name}.weight"), uniform((out_dim, in_dim), bound, &mut rng)?);
            if cfg.attention_bias && name.starts_with("self_attn") {
                let b = uniform((1, out_dim), 0.1, &mut rng)?.reshape(out_dim)?;
                out.insert(format!("{p}.{name}.bias"), b);
            }
        }
        out.insert(format!("{p}.self_attn.q_norm.weight"), gain(d, &mut rng)?);
        out.insert(format!("{p}.self_attn.k_norm.weight"), gain(d, &mut rng)?);
        out.insert(format!("{p}.input_layernorm.weight"), gain(h, &mut rng)?);
        out.insert(format!("{p}.post_attention_layernorm.weight"), gain(h, &mut rng)?);
    }
    out.insert("model.norm.weight".to_owned(), gain(h, &mut rng)?);
    if !cfg.tie_word_embeddings {
        let bound = 1.0 / (h as f32).sqrt();
        out.insert("lm_head.weight".to_owned(), uniform((cfg.vocab_size, h), bound * 4.0, &mut rng)?);
    }
    debug_assert!(out.values().all(|t| t.dtype() == DType::F32));
    Ok(out)
}

/// A byte-level BPE tokenizer shaped like Qwen's (NFC, Qwen's split regex, byte-level
/// mapping, byte-level decoder) with [`TINY_BPE_VOCAB`] tokens learned from a small corpus and
/// Qwen's special tokens appended after them.
pub fn build_tokenizer() -> Result<Tokenizer> {
    let terr = |e: tokenizers::Error| Error::Tokenizer(e.to_string());
    let split = Split::new(SplitPattern::Regex(QWEN_SPLIT.to_owned()), SplitDelimiterBehavior::Isolated, false)
        .map_err(terr)?;
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_normalizer(Some(NFC)).map_err(terr)?;
    tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![split.into(), ByteLevel::new(false, false, false).into()])));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    let mut trainer = TrainerWrapper::BpeTrainer(
        BpeTrainerBuilder::new()
            .vocab_size(TINY_BPE_VOCAB)
            .min_frequency(1)
            .show_progress(false)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build(),
    );
    tokenizer.train(&mut trainer, CORPUS.iter().copied()).map_err(terr)?;
    // Qwen marks the chat delimiters special and the tool/think tags as plain added tokens.
    let (special, plain) = SPECIAL_TOKENS.split_at(3);
    tokenizer.add_special_tokens(special.iter().map(|t| AddedToken::from(*t, true))).map_err(terr)?;
    tokenizer.add_tokens(plain.iter().map(|t| AddedToken::from(*t, false))).map_err(terr)?;
    Ok(tokenizer)
}
