//! LoRA: a linear layer with an optional low-rank update `W x + (α/r) · B A x`.
//!
//! The base weight is a plain tensor (frozen by construction: candle only tracks gradients of
//! `Var`s); A and B are `Var`s kept in f32 whatever the base dtype, so AdamW's state and the
//! small updates stay precise under bf16 weights. The model code calls
//! [`LoraLinear::forward`] and never asks whether an adapter is present; whether it
//! contributes is a per-call switch ([`Pass::lora`]), which is how the reference policy is the
//! same model with adapters off — or, after [`LoraAdapter::freeze_reference`] (the SFT
//! reference), with a frozen copy of the adapters in their place.

use std::sync::{Arc, RwLock};

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarBuilder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::qwen3::Pass;

/// The projections an adapter can sit on, named as in checkpoints and PEFT's `target_modules`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TargetModule {
    /// Attention's query projection, `q_proj`.
    QProj,
    /// Attention's key projection, `k_proj`.
    KProj,
    /// Attention's value projection, `v_proj`.
    VProj,
    /// Attention's output projection, `o_proj`.
    OProj,
    /// The MLP's gate projection, `gate_proj`.
    GateProj,
    /// The MLP's up projection, `up_proj`.
    UpProj,
    /// The MLP's down projection, `down_proj`.
    DownProj,
}

impl TargetModule {
    /// All seven linear projections of a Qwen3 layer.
    pub const ALL: [TargetModule; 7] = [
        TargetModule::QProj,
        TargetModule::KProj,
        TargetModule::VProj,
        TargetModule::OProj,
        TargetModule::GateProj,
        TargetModule::UpProj,
        TargetModule::DownProj,
    ];

    /// The module's name in checkpoints (`q_proj`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TargetModule::QProj => "q_proj",
            TargetModule::KProj => "k_proj",
            TargetModule::VProj => "v_proj",
            TargetModule::OProj => "o_proj",
            TargetModule::GateProj => "gate_proj",
            TargetModule::UpProj => "up_proj",
            TargetModule::DownProj => "down_proj",
        }
    }

    /// Parses a checkpoint module name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Adapter shape and placement. Defaults follow the seeds: r = 32, α = 64, all projections.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraConfig {
    /// The adapters' rank.
    pub r: usize,
    /// The scale numerator: adapters add `(alpha / r) · B A x`.
    pub alpha: f64,
    /// The projections of every layer that get an adapter.
    pub targets: Vec<TargetModule>,
    /// Seeds A's initialisation (B starts at zero, so the initial model equals the base).
    pub seed: u64,
}

impl Default for LoraConfig {
    fn default() -> Self {
        Self { r: 32, alpha: 64.0, targets: TargetModule::ALL.to_vec(), seed: 0 }
    }
}

impl LoraConfig {
    /// The factor applied to `B A x` (PEFT's `lora_alpha / r`).
    pub fn scale(&self) -> f64 {
        self.alpha / self.r as f64
    }
}

/// The trainable pair of one projection: A `(r, in)`, B `(out, r)`, both f32 `Var`s.
#[derive(Debug, Clone)]
pub struct LoraAdapter {
    /// The down-projection `A`, `(r, in)`, randomly initialised.
    pub a: Var,
    /// The up-projection `B`, `(out, r)`, zero at initialisation.
    pub b: Var,
    /// The factor on `B A x`, `alpha / r`.
    pub scale: f64,
    /// The reference's `(A, B)`: `None` means the reference is the base model. Shared by
    /// clones of the model, like the `Var`s.
    reference: Arc<RwLock<Option<(Tensor, Tensor)>>>,
}

impl LoraAdapter {
    /// Makes the adapters' current values the reference policy's: passes with
    /// [`Pass::lora`] off use a frozen copy of them from now on instead of no adapter.
    pub fn freeze_reference(&self) -> Result<()> {
        let frozen = (self.a.as_tensor().copy()?, self.b.as_tensor().copy()?);
        self.set_reference(Some(frozen))
    }

    /// The frozen reference `(A, B)`, or `None` when the reference is the base model.
    pub fn reference(&self) -> Result<Option<(Tensor, Tensor)>> {
        let slot = self.reference.read().map_err(|_| crate::Error::Invalid("a reference lock was poisoned".into()))?;
        Ok(slot.clone())
    }

    /// Replaces the frozen reference (`None`: back to the base model). The shapes must be A's and B's.
    pub fn set_reference(&self, reference: Option<(Tensor, Tensor)>) -> Result<()> {
        if let Some((a, b)) = &reference
            && (a.dims() != self.a.dims() || b.dims() != self.b.dims())
        {
            return Err(crate::Error::Invalid(format!(
                "reference adapter {:?}/{:?} where the adapter is {:?}/{:?}",
                a.dims(),
                b.dims(),
                self.a.dims(),
                self.b.dims()
            )));
        }
        let mut slot =
            self.reference.write().map_err(|_| crate::Error::Invalid("a reference lock was poisoned".into()))?;
        *slot = reference;
        Ok(())
    }
}

/// A linear projection `y = x Wᵀ (+ bias)` with an optional LoRA adapter.
#[derive(Debug, Clone)]
pub struct LoraLinear {
    weight: Tensor,
    bias: Option<Tensor>,
    adapter: Option<LoraAdapter>,
}

impl LoraLinear {
    /// Wraps a frozen `(out, in)` weight.
    pub fn new(weight: Tensor, bias: Option<Tensor>, adapter: Option<LoraAdapter>) -> Self {
        Self { weight, bias, adapter }
    }

    /// Loads `weight` (and `bias`) under `vb` and adds an adapter when `init` targets `target`.
    pub(crate) fn load(
        in_dim: usize,
        out_dim: usize,
        bias: bool,
        vb: VarBuilder,
        target: TargetModule,
        init: &mut AdapterInit,
    ) -> Result<Self> {
        let weight = vb.get((out_dim, in_dim), "weight")?;
        let bias = if bias { Some(vb.get(out_dim, "bias")?) } else { None };
        let adapter = init.adapter(target, in_dim, out_dim)?;
        Ok(Self::new(weight, bias, adapter))
    }

    /// The frozen base weight `(out, in)`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The trainable adapter, `None` for a projection without one.
    pub fn adapter(&self) -> Option<&LoraAdapter> {
        self.adapter.as_ref()
    }

    /// `x`: `(..., in)` → `(..., out)`; the adapter contributes when `pass.lora`.
    pub fn forward(&self, x: &Tensor, pass: Pass) -> candle_core::Result<Tensor> {
        let dims = x.dims().to_vec();
        let (&in_dim, lead) = dims.split_last().ok_or_else(|| candle_core::Error::Msg("linear on a scalar".into()))?;
        let rows: usize = lead.iter().product();
        let x2 = x.reshape((rows, in_dim))?;
        let mut y = x2.matmul(&self.weight.t()?)?;
        if let Some(bias) = &self.bias {
            y = y.broadcast_add(bias)?;
        }
        if let Some(ad) = &self.adapter {
            let frozen;
            let pair = if pass.lora && pass.grad {
                Some((ad.a.as_tensor(), ad.b.as_tensor()))
            } else if pass.lora {
                frozen = Some((ad.a.as_tensor().detach(), ad.b.as_tensor().detach()));
                frozen.as_ref().map(|(a, b)| (a, b))
            } else {
                frozen =
                    ad.reference.read().map_err(|_| candle_core::Error::Msg("reference lock poisoned".into()))?.clone();
                frozen.as_ref().map(|(a, b)| (a, b))
            };
            if let Some((a, b)) = pair {
                let delta = x2.to_dtype(DType::F32)?.matmul(&a.t()?)?.matmul(&b.t()?)?;
                let delta = (delta * ad.scale)?.to_dtype(y.dtype())?;
                y = (y + delta)?;
            }
        }
        let mut out_dims = lead.to_vec();
        out_dims.push(y.dim(1)?);
        y.reshape(out_dims)
    }
}

/// Creates adapters in construction order from one seeded stream, so a seed fixes them all.
#[derive(Debug)]
pub(crate) struct AdapterInit {
    config: Option<LoraConfig>,
    rng: ChaCha8Rng,
    device: Device,
}

impl AdapterInit {
    pub(crate) fn new(config: Option<&LoraConfig>, device: &Device) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(config.map_or(0, |c| c.seed)),
            config: config.cloned(),
            device: device.clone(),
        }
    }

    /// A (Kaiming-uniform with PEFT's `a = √5`, i.e. U(±1/√in)) and B = 0, when targeted.
    fn adapter(&mut self, target: TargetModule, in_dim: usize, out_dim: usize) -> Result<Option<LoraAdapter>> {
        let Some(cfg) = &self.config else {
            return Ok(None);
        };
        if !cfg.targets.contains(&target) {
            return Ok(None);
        }
        let bound = 1.0 / (in_dim as f32).sqrt();
        let a: Vec<f32> = (0..cfg.r * in_dim).map(|_| self.rng.random_range(-bound..bound)).collect();
        let a = Var::from_tensor(&Tensor::from_vec(a, (cfg.r, in_dim), &self.device)?)?;
        let b = Var::zeros((out_dim, cfg.r), DType::F32, &self.device)?;
        Ok(Some(LoraAdapter { a, b, scale: cfg.scale(), reference: Arc::default() }))
    }
}
