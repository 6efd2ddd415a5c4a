//! Loading the Qwen3 + LoRA policy a study's `[policy]` table describes, for
//! training (the `study` binary) and for using a trained run (`rewardlab locate`).

use rewardlab_models::agent_qwen3::{AgentOptions, Qwen3Agent};
use rewardlab_models::lora::{LoraConfig, TargetModule};
use rewardlab_models::policy::PolicyOptions;
use rewardlab_models::{DType, Device};

use serde::Deserialize;

use super::spec::{ModelDevice, ModelDtype, Qwen3Spec};

/// What the GRPO KL term measures the policy against (`reference = "sft" | "base"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KlReference {
    /// The policy GRPO starts from: after a warm start, its adapters frozen (the default).
    /// Without a warm start the fresh adapters are the base model (B = 0), so the two agree.
    #[default]
    Sft,
    /// The base model, adapters off, whatever the warm start trained.
    Base,
}

/// The agent options (sampling budgets, batching) of `spec`.
pub fn agent_options(spec: &Qwen3Spec) -> AgentOptions {
    AgentOptions {
        top_p: spec.top_p,
        top_k: spec.top_k,
        max_new_tokens: spec.max_new_tokens,
        max_completion_tokens: spec.max_completion_tokens,
        sample_batch: spec.sample_batch,
        score_batch: spec.score_batch,
        gradient_checkpointing: spec.gradient_checkpointing,
        base_model: Some(spec.model.display().to_string()),
        ..AgentOptions::default()
    }
}

/// The device `spec` asks for. `device = "cuda"` is refused with an error saying what is
/// missing: a build with `--features model-cuda`, or (in such a build) a usable GPU 0.
pub fn device(spec: &Qwen3Spec) -> Result<Device, rewardlab_models::Error> {
    match spec.device {
        ModelDevice::Cpu => Ok(Device::Cpu),
        ModelDevice::Cuda if !rewardlab_models::cuda_compiled() => Err(rewardlab_models::Error::Invalid(
            "device = \"cuda\" needs rewardlab built with `--features model-cuda` (this build has no CUDA \
             support; scripts/cuda-toolchain.sh --build makes one), or set device = \"cpu\""
                .into(),
        )),
        ModelDevice::Cuda => rewardlab_models::open_cuda(0).map_err(|e| {
            rewardlab_models::Error::Invalid(format!(
                "device = \"cuda\": CUDA device 0 cannot be opened ({e}); it needs an NVIDIA GPU, its driver \
                 (libcuda.so.1) and the CUDA 13 libraries (cuBLAS, cuRAND, NVRTC)"
            ))
        }),
    }
}

/// Loads `spec.model` with fresh adapters whose initial A is drawn from `seed`.
pub fn load_agent(spec: &Qwen3Spec, device: &Device, seed: u64) -> Result<Qwen3Agent, rewardlab_models::Error> {
    let dtype = match spec.dtype {
        ModelDtype::F32 => DType::F32,
        ModelDtype::Bf16 => DType::BF16,
    };
    let lora = LoraConfig { r: spec.lora_rank, alpha: spec.lora_alpha, targets: TargetModule::ALL.to_vec(), seed };
    let load = PolicyOptions { dtype, device: device.clone(), lora, ..PolicyOptions::default() };
    Qwen3Agent::load(&spec.model, &load, agent_options(spec))
}
