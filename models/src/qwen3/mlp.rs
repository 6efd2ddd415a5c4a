//! SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use candle_core::Tensor;
use candle_nn::VarBuilder;

use super::{Pass, Qwen3Config};
use crate::lora::{AdapterInit, LoraLinear, TargetModule};

#[derive(Debug, Clone)]
pub(crate) struct Mlp {
    pub(crate) gate_proj: LoraLinear,
    pub(crate) up_proj: LoraLinear,
    pub(crate) down_proj: LoraLinear,
}

impl Mlp {
    pub(crate) fn new(cfg: &Qwen3Config, vb: VarBuilder, init: &mut AdapterInit) -> crate::Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Self {
            gate_proj: LoraLinear::load(h, i, false, vb.pp("gate_proj"), TargetModule::GateProj, init)?,
            up_proj: LoraLinear::load(h, i, false, vb.pp("up_proj"), TargetModule::UpProj, init)?,
            down_proj: LoraLinear::load(i, h, false, vb.pp("down_proj"), TargetModule::DownProj, init)?,
        })
    }

    pub(crate) fn forward(&self, x: &Tensor, pass: Pass) -> candle_core::Result<Tensor> {
        let gate = self.gate_proj.forward(x, pass)?.silu()?;
        let up = self.up_proj.forward(x, pass)?;
        self.down_proj.forward(&(gate * up)?, pass)
    }
}
