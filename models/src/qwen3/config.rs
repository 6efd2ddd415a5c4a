//! Qwen3's `config.json`, as Hugging Face writes it, and the checks this implementation needs.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The fields of a Hugging Face Qwen3 `config.json` that shape the network.
///
/// Unknown fields are ignored, so a real checkpoint's config deserialises as is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qwen3Config {
    /// Must be `"qwen3"`.
    pub model_type: String,
    /// Rows of the embedding and of the LM head.
    pub vocab_size: usize,
    /// The residual stream's width.
    pub hidden_size: usize,
    /// The MLP's inner width (of `gate_proj` and `up_proj`).
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads per layer; a positive multiple of `num_key_value_heads`.
    pub num_attention_heads: usize,
    /// Key/value heads per layer (grouped-query attention), ≥ 1.
    pub num_key_value_heads: usize,
    /// Qwen3 states it explicitly (128 for every released size); older configs derive it.
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// The ε added to the mean square in every RMSNorm.
    pub rms_norm_eps: f64,
    /// RoPE's base frequency.
    pub rope_theta: f64,
    /// The LM head reuses the embedding matrix (small Qwen3 sizes) instead of its own weight.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// The longest sequence, in tokens, the model accepts.
    pub max_position_embeddings: usize,
    /// The q/k/v/o projections carry biases.
    #[serde(default)]
    pub attention_bias: bool,
    /// The MLP's activation; only `silu` (the default) is implemented.
    #[serde(default = "default_act")]
    pub hidden_act: String,
    /// Sliding-window attention is off in every released Qwen3; refused when on.
    #[serde(default)]
    pub use_sliding_window: bool,
    /// The sliding window's width; kept for round trips, unused since the window is off.
    #[serde(default)]
    pub sliding_window: Option<usize>,
    /// Layers that would use the sliding window; kept for round trips, unused.
    #[serde(default)]
    pub max_window_layers: usize,
    /// RoPE scaling (YaRN) is not implemented; refused when present.
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    /// The dtype the checkpoint was saved in (`bfloat16`); informational, the loader's dtype wins.
    #[serde(default)]
    pub torch_dtype: Option<String>,
    /// The beginning-of-sequence token id; informational (the tokenizer's special tokens are used).
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// The end-of-sequence token id; informational (the tokenizer's special tokens are used).
    #[serde(default)]
    pub eos_token_id: Option<u32>,
}

fn default_act() -> String {
    "silu".to_owned()
}

impl Qwen3Config {
    /// Reads and validates `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
        let cfg: Self = serde_json::from_str(&text).map_err(Error::json(path))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The per-head width (explicit `head_dim`, else `hidden_size / num_attention_heads`).
    pub fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// Query heads that share one key/value head.
    pub fn kv_groups(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads.max(1)
    }

    /// Refuses configurations whose math this implementation does not reproduce.
    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(Error::Config(m));
        if self.model_type != "qwen3" {
            return fail(format!("model_type is {:?}; only \"qwen3\" is implemented", self.model_type));
        }
        if self.hidden_act != "silu" {
            return fail(format!("hidden_act {:?} (only silu)", self.hidden_act));
        }
        if self.num_attention_heads == 0
            || self.num_key_value_heads == 0
            || !self.num_attention_heads.is_multiple_of(self.num_key_value_heads)
        {
            return fail(format!(
                "num_attention_heads {} is not a positive multiple of num_key_value_heads {}",
                self.num_attention_heads, self.num_key_value_heads
            ));
        }
        if self.head_dim() == 0 || !self.head_dim().is_multiple_of(2) {
            return fail(format!("head_dim {} must be even and positive", self.head_dim()));
        }
        if self.use_sliding_window {
            return fail("use_sliding_window = true is not implemented".to_owned());
        }
        if self.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return fail("rope_scaling is not implemented".to_owned());
        }
        Ok(())
    }

    /// Qwen3-0.6B's published shape (tied embeddings; for random checkpoints of that shape).
    pub fn qwen3_0_6b() -> Self {
        Self {
            hidden_size: 1024,
            intermediate_size: 3072,
            num_hidden_layers: 28,
            num_attention_heads: 16,
            num_key_value_heads: 8,
            tie_word_embeddings: true,
            max_window_layers: 28,
            ..Self::qwen3_14b()
        }
    }

    /// Qwen3-14B's published shape (for memory planning and docs; no weights involved).
    pub fn qwen3_14b() -> Self {
        Self {
            model_type: "qwen3".to_owned(),
            vocab_size: 151_936,
            hidden_size: 5120,
            intermediate_size: 17_408,
            num_hidden_layers: 40,
            num_attention_heads: 40,
            num_key_value_heads: 8,
            head_dim: Some(128),
            rms_norm_eps: 1e-6,
            rope_theta: 1_000_000.0,
            tie_word_embeddings: false,
            max_position_embeddings: 40_960,
            attention_bias: false,
            hidden_act: default_act(),
            use_sliding_window: false,
            sliding_window: None,
            max_window_layers: 40,
            rope_scaling: None,
            torch_dtype: Some("bfloat16".to_owned()),
            bos_token_id: Some(151_643),
            eos_token_id: Some(151_645),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_14b_config_parses_and_validates() {
        let json = r#"{"architectures":["Qwen3ForCausalLM"],"attention_bias":false,
            "attention_dropout":0.0,"bos_token_id":151643,"eos_token_id":151645,"head_dim":128,
            "hidden_act":"silu","hidden_size":5120,"initializer_range":0.02,
            "intermediate_size":17408,"max_position_embeddings":40960,"max_window_layers":40,
            "model_type":"qwen3","num_attention_heads":40,"num_hidden_layers":40,
            "num_key_value_heads":8,"rms_norm_eps":1e-06,"rope_scaling":null,
            "rope_theta":1000000,"sliding_window":null,"tie_word_embeddings":false,
            "torch_dtype":"bfloat16","transformers_version":"4.51.0","use_cache":true,
            "use_sliding_window":false,"vocab_size":151936}"#;
        let cfg: Qwen3Config = serde_json::from_str(json).expect("parses");
        cfg.validate().expect("valid");
        assert_eq!(cfg, Qwen3Config::qwen3_14b());
        assert_eq!(cfg.kv_groups(), 5);
    }

    #[test]
    fn other_model_types_are_refused() {
        let mut cfg = Qwen3Config::qwen3_14b();
        cfg.model_type = "qwen2".to_owned();
        assert!(matches!(cfg.validate(), Err(Error::Config(m)) if m.contains("qwen2")));
        let mut cfg = Qwen3Config::qwen3_14b();
        cfg.num_key_value_heads = 7;
        assert!(cfg.validate().is_err());
    }
}
