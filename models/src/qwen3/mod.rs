//! Qwen3, written for this project: configuration, the two forward paths and their parts.

mod attention;
mod cache;
mod config;
mod mlp;
mod model;
mod norm;
mod rope;
mod softmax;

pub use cache::{KvCache, RowCache};
pub use config::Qwen3Config;
pub use model::Qwen3Model;

/// Which kernels a forward pass may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Only ops with a backward pass (plain softmax, RMSNorm and RoPE from primitives).
    Train,
    /// Fused kernels, faster, but gradients stop at them: candle-nn's RMSNorm and RoPE, and on
    /// the CPU this crate's causal softmax (scale, causal and padding masks, softmax in one
    /// pass) and SwiGLU product; candle-nn's softmax elsewhere.
    Infer,
}

/// Per-call switches of a forward pass; passed down so the layers hold no mutable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Which kernels the pass uses: differentiable or fused.
    pub mode: Mode,
    /// Whether the trained LoRA adapters contribute. Off gives the GRPO reference: the base
    /// model, or the adapters frozen by [`Qwen3Model::freeze_reference`] (the SFT reference).
    pub lora: bool,
    /// Whether the pass is differentiated. Candle has no global no-grad switch: any op with a
    /// variable (the adapters) among its inputs records its operands, so a pass that is never
    /// differentiated would keep every intermediate tensor alive as long as its output (and,
    /// through the KV cache, as long as the rollout). Off, the adapters enter detached and
    /// nothing is recorded: same values, memory freed as the pass goes.
    pub grad: bool,
}

impl Pass {
    /// The policy being trained: differentiable, adapters on.
    pub const TRAIN: Pass = Pass { mode: Mode::Train, lora: true, grad: true };
    /// The frozen reference: same kernels as [`Pass::TRAIN`] so the KL starts at exactly zero
    /// (against the base model with fresh adapters, or against the frozen SFT adapters).
    pub const REFERENCE: Pass = Pass { mode: Mode::Train, lora: false, grad: false };
    /// Sampling: fused kernels, adapters on, nothing recorded for a backward pass.
    pub const SAMPLE: Pass = Pass { mode: Mode::Infer, lora: true, grad: false };
}
