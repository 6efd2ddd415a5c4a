//! LoRA adapters in Hugging Face PEFT's on-disk format: `adapter_config.json` plus
//! `adapter_model.safetensors` with keys such as
//! `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight` (A: `[r, in]`,
//! B: `[out, r]`), so adapters trained here load in PEFT/vLLM and vice versa.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};

use crate::checkpoint::save;
use crate::lora::{LoraConfig, TargetModule};
use crate::qwen3::Qwen3Model;
use crate::{Error, Result};

/// The file name of an adapter's PEFT config inside its directory.
pub const ADAPTER_CONFIG: &str = "adapter_config.json";
/// The file name of an adapter's weights inside its directory.
pub const ADAPTER_WEIGHTS: &str = "adapter_model.safetensors";
const KEY_PREFIX: &str = "base_model.model.";

/// The fields of PEFT's `adapter_config.json` for a plain LoRA.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterConfig {
    /// The adapter method; only `LORA` loads.
    pub peft_type: String,
    /// PEFT's task type; written `CAUSAL_LM`, not checked on load.
    pub task_type: String,
    /// The adapters' rank.
    pub r: usize,
    /// LoRA's `α`; adapters add `(lora_alpha / r) · B A x`.
    pub lora_alpha: f64,
    /// Dropout on the adapter input while training; written 0 and ignored on load.
    #[serde(default)]
    pub lora_dropout: f64,
    /// Checkpoint names of the adapted projections (`q_proj`, ...).
    pub target_modules: Vec<String>,
    /// The base model the adapter was trained on, when recorded.
    #[serde(default)]
    pub base_model_name_or_path: Option<String>,
    /// Which biases were trained; only `none` loads.
    #[serde(default = "none")]
    pub bias: String,
    /// Whether the base weights are stored `(in, out)`; only `false` loads.
    #[serde(default)]
    pub fan_in_fan_out: bool,
    /// PEFT's inference-only flag; written `true`, not checked on load.
    #[serde(default)]
    pub inference_mode: bool,
    /// Rank-stabilised LoRA (scale `α / √r`); only `false` loads.
    #[serde(default)]
    pub use_rslora: bool,
    /// DoRA's weight decomposition; only `false` loads.
    #[serde(default)]
    pub use_dora: bool,
    /// Extra fully trained modules saved with the adapter; written `None`, not read.
    #[serde(default)]
    pub modules_to_save: Option<Vec<String>>,
}

fn none() -> String {
    "none".to_owned()
}

impl AdapterConfig {
    /// The config describing `lora` on top of `base_model`.
    pub fn new(lora: &LoraConfig, base_model: Option<&str>) -> Self {
        Self {
            peft_type: "LORA".to_owned(),
            task_type: "CAUSAL_LM".to_owned(),
            r: lora.r,
            lora_alpha: lora.alpha,
            lora_dropout: 0.0,
            target_modules: lora.targets.iter().map(|t| t.name().to_owned()).collect(),
            base_model_name_or_path: base_model.map(str::to_owned),
            bias: none(),
            fan_in_fan_out: false,
            inference_mode: true,
            use_rslora: false,
            use_dora: false,
            modules_to_save: None,
        }
    }

    /// The equivalent [`LoraConfig`]; refuses PEFT variants whose math differs.
    pub fn lora_config(&self, path: &Path) -> Result<LoraConfig> {
        let fail = |message: String| Error::Adapter { path: path.to_path_buf(), message };
        if self.peft_type != "LORA" {
            return Err(fail(format!("peft_type {:?} is not LORA", self.peft_type)));
        }
        if self.use_rslora || self.use_dora || self.bias != "none" || self.fan_in_fan_out {
            return Err(fail("rsLoRA, DoRA, trained biases and fan_in_fan_out are not supported".into()));
        }
        let targets = self
            .target_modules
            .iter()
            .map(|n| TargetModule::from_name(n).ok_or_else(|| fail(format!("unknown target module {n:?}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(LoraConfig { r: self.r, alpha: self.lora_alpha, targets, seed: 0 })
    }
}

/// Reads `dir/adapter_config.json`.
pub fn read_adapter_config(dir: &Path) -> Result<AdapterConfig> {
    let path = dir.join(ADAPTER_CONFIG);
    let text = std::fs::read_to_string(&path).map_err(Error::io(&path))?;
    serde_json::from_str(&text).map_err(Error::json(&path))
}

/// Writes the model's adapters (f32) and config into `dir`.
pub fn save_adapter(model: &Qwen3Model, dir: &Path, base_model: Option<&str>) -> Result<()> {
    let lora = model.lora_config().ok_or_else(|| Error::Adapter {
        path: dir.to_path_buf(),
        message: "the model has no adapters to save".into(),
    })?;
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let mut tensors: BTreeMap<String, Tensor> = BTreeMap::new();
    for (name, linear) in model.linears() {
        if let Some(ad) = linear.adapter() {
            tensors.insert(format!("{KEY_PREFIX}{name}.lora_A.weight"), ad.a.as_tensor().copy()?);
            tensors.insert(format!("{KEY_PREFIX}{name}.lora_B.weight"), ad.b.as_tensor().copy()?);
        }
    }
    save(&dir.join(ADAPTER_WEIGHTS), tensors.iter())?;
    let cfg_path = dir.join(ADAPTER_CONFIG);
    let text = serde_json::to_string_pretty(&AdapterConfig::new(lora, base_model)).map_err(Error::json(&cfg_path))?;
    std::fs::write(&cfg_path, text).map_err(Error::io(&cfg_path))
}

/// Loads adapter weights from `dir` into `model`, whose adapters must have the same rank,
/// α and targets (build it with [`AdapterConfig::lora_config`] of the same directory).
pub fn load_adapter(model: &Qwen3Model, dir: &Path) -> Result<()> {
    let cfg_path = dir.join(ADAPTER_CONFIG);
    let saved = read_adapter_config(dir)?.lora_config(&cfg_path)?;
    let fail = |message: String| Error::Adapter { path: dir.to_path_buf(), message };
    let ours = model.lora_config().ok_or_else(|| fail("the model was built without adapters".into()))?;
    if ours.r != saved.r || ours.alpha != saved.alpha || !same_targets(&ours.targets, &saved.targets) {
        return Err(fail(format!(
            "adapter is r={} α={} on {:?}; the model's is r={} α={} on {:?}",
            saved.r, saved.alpha, saved.targets, ours.r, ours.alpha, ours.targets
        )));
    }
    let path = dir.join(ADAPTER_WEIGHTS);
    let tensors =
        candle_core::safetensors::load(&path, model.device()).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    let mut used = 0;
    for (name, linear) in model.linears() {
        let Some(ad) = linear.adapter() else { continue };
        for (suffix, var) in [("lora_A", &ad.a), ("lora_B", &ad.b)] {
            let key = format!("{KEY_PREFIX}{name}.{suffix}.weight");
            let t = tensors.get(&key).ok_or_else(|| fail(format!("missing {key}")))?;
            if t.dims() != var.dims() {
                return Err(fail(format!("{key} has shape {:?}, expected {:?}", t.dims(), var.dims())));
            }
            var.set(&t.to_dtype(DType::F32)?)?;
            used += 1;
        }
    }
    if used != tensors.len() {
        return Err(fail(format!("{} tensors in the file, {used} matched the model's adapters", tensors.len())));
    }
    Ok(())
}

fn same_targets(a: &[TargetModule], b: &[TargetModule]) -> bool {
    a.len() == b.len() && a.iter().all(|t| b.contains(t))
}
