//! Loading the Qwen3 + LoRA policy a study's `[policy]` table describes, for
//! training (the `study` binary) and for using a trained run (`rewardlab locate`).

use rewardlab_models::agent_qwen3::{AgentOptions, Qwen3Agent};
use rewardlab_models::lora::{LoraConfig, TargetModule};
use rewardlab_models::policy::PolicyOptions;
use rewardlab_models::{DType, Device};

use super::spec::{ModelDevice, ModelDtype, Qwen3Spec};

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

/// The device `spec` asks for (CUDA device 0 needs a build with `--features model-cuda`).
pub fn device(spec: &Qwen3Spec) -> Result<Device, rewardlab_models::Error> {
    Ok(match spec.device {
        ModelDevice::Cpu => Device::Cpu,
        ModelDevice::Cuda => Device::new_cuda(0)?,
    })
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
