//! The Hugging Face `tokenizer.json` (byte-level BPE) and the special tokens the template needs.

use std::path::Path;

use crate::{Error, Result};

/// The added tokens Qwen3's chat template and tool protocol are written with.
pub const SPECIAL_TOKENS: [&str; 9] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
];

/// Ids of the tokens the template and the sampler act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialIds {
    /// `<|endoftext|>`, a stop token.
    pub endoftext: u32,
    /// `<|im_start|>`, which opens a turn.
    pub im_start: u32,
    /// `<|im_end|>`, which closes a turn and stops generation.
    pub im_end: u32,
    /// `<tool_call>`.
    pub tool_call: u32,
    /// `</tool_call>`.
    pub tool_call_end: u32,
    /// `<tool_response>`.
    pub tool_response: u32,
    /// `</tool_response>`.
    pub tool_response_end: u32,
    /// `<think>`.
    pub think: u32,
    /// `</think>`.
    pub think_end: u32,
}

/// A Qwen tokenizer: text ↔ ids, special tokens resolved once.
#[derive(Debug, Clone)]
pub struct QwenTokenizer {
    inner: tokenizers::Tokenizer,
    special: SpecialIds,
}

impl QwenTokenizer {
    /// Reads `tokenizer.json`; fails when one of [`SPECIAL_TOKENS`] is missing.
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner =
            tokenizers::Tokenizer::from_file(path).map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))?;
        Self::new(inner)
    }

    /// Wraps an in-memory tokenizer.
    pub fn new(inner: tokenizers::Tokenizer) -> Result<Self> {
        let id = |t: &str| {
            inner
                .token_to_id(t)
                .ok_or_else(|| Error::Tokenizer(format!("special token {t:?} is not in the vocabulary")))
        };
        let special = SpecialIds {
            endoftext: id("<|endoftext|>")?,
            im_start: id("<|im_start|>")?,
            im_end: id("<|im_end|>")?,
            tool_call: id("<tool_call>")?,
            tool_call_end: id("</tool_call>")?,
            tool_response: id("<tool_response>")?,
            tool_response_end: id("</tool_response>")?,
            think: id("<think>")?,
            think_end: id("</think>")?,
        };
        Ok(Self { inner, special })
    }

    /// The ids of [`SPECIAL_TOKENS`].
    pub fn special(&self) -> &SpecialIds {
        &self.special
    }

    /// Encodes text; special-token strings in it become their single ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(format!("encoding {} bytes: {e}", text.len())))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Decodes ids, keeping special tokens (the tool-call parser needs them).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| Error::Tokenizer(format!("decoding {} ids: {e}", ids.len())))
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The wrapped `tokenizers` tokenizer, for what this type does not expose.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}
