//! rewardlab-models: the token-level policy — Qwen3 with LoRA adapters, written on candle.
//!
//! The model has two forward paths over one set of weights:
//! - a **training path** ([`Qwen3Model::forward_train`]) built only from differentiable
//!   primitives (plain softmax, RMSNorm and RoPE from elementwise ops, an additive causal mask),
//!   because candle-nn's fused kernels have no backward pass;
//! - a **cached sampling path** ([`Qwen3Model::forward_cached`]) with fused kernels — candle-nn's
//!   RoPE and RMSNorm, and on the CPU this crate's one-pass scale + causal/padding mask + softmax
//!   and `silu(gate) * up`, which split work in rayon chunks instead of candle's spinning pool —
//!   and a preallocated per-batch KV cache with per-row positions.
//!
//! LoRA ([`lora`]) wraps every linear projection; the frozen base weights are plain tensors and
//! only the adapters are `Var`s. Reference log-probs come from the same model with the adapters
//! switched off per call ([`Pass`]), so no second copy of the weights exists.
//!
//! Around the model: sharded mmap'd safetensors loading ([`checkpoint`]), the tokenizer
//! ([`tokenizer`]), Qwen3's chat template with grep/glob/read tools and loss masks
//! ([`template`]), batched sampling ([`sampling`]), the policy facade ([`policy`]), the GRPO
//! engine's token-level policy ([`agent_qwen3`]: a unit is a generated token), PEFT adapter
//! files ([`peft`]), SFT warm start ([`sft`]) and tiny test checkpoints ([`tiny`]). Nothing
//! here knows about studies or rewards.

#![warn(missing_docs)]

pub mod agent;
pub mod agent_qwen3;
pub mod checkpoint;
mod error;
pub mod lora;
pub mod peft;
pub mod policy;
pub mod proxy;
pub mod qwen3;
pub mod sampling;
pub mod sft;
pub mod state_tensors;
pub mod template;
pub mod threads;
pub mod tiny;
pub mod tokenizer;

pub use agent_qwen3::{AgentOptions, Qwen3Agent, Qwen3AgentState, Qwen3Episode};
pub use candle_core::{DType, Device, Tensor, Var};
pub use error::{Error, Result};
pub use lora::{LoraConfig, LoraLinear, TargetModule};
pub use policy::{Generation, PolicyOptions, Qwen3Policy};
pub use qwen3::{KvCache, Mode, Pass, Qwen3Config, Qwen3Model, RowCache};
pub use sampling::{FinishReason, SamplingParams};
pub use tokenizer::QwenTokenizer;

/// Whether this build has candle's CUDA backend (`--features cuda` of this crate).
pub fn cuda_compiled() -> bool {
    candle_core::utils::cuda_is_available()
}

/// Opens CUDA device `ordinal` ([`Device::new_cuda`]). Its error is the driver's alone: candle
/// attaches a backtrace to errors when `RUST_BACKTRACE` is set, which a refusal printed to the
/// user (no GPU, a driver stub, a build without CUDA) does not need.
pub fn open_cuda(ordinal: usize) -> candle_core::Result<Device> {
    Device::new_cuda(ordinal).map_err(|e| match e {
        candle_core::Error::WithBacktrace { inner, .. } => *inner,
        e => e,
    })
}
