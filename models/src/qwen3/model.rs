//! The decoder stack: embeddings, layers, final norm and LM head, with both forward paths.

use std::path::Path;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarBuilder;

use super::attention::Attention;
use super::cache::{AttnMask, KvCache};
use super::mlp::Mlp;
use super::norm::RmsNorm;
use super::rope::{Positions, Rope};
use super::{Pass, Qwen3Config};
use crate::checkpoint::ShardedSafetensors;
use crate::lora::{AdapterInit, LoraConfig, LoraLinear};
use crate::{Error, Result};

/// A Qwen3 causal language model whose linear projections may carry LoRA adapters.
///
/// All weights except the adapters are plain tensors: nothing in the base model can receive a
/// gradient. Methods take `&self`; the per-batch state of sampling lives in [`KvCache`].
#[derive(Debug, Clone)]
pub struct Qwen3Model {
    cfg: Qwen3Config,
    embed_tokens: Tensor,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    lm_head: Tensor,
    rope: Rope,
    device: Device,
    dtype: DType,
    lora: Option<LoraConfig>,
}

impl Qwen3Model {
    /// Builds the model from weights named as in Hugging Face checkpoints (`model.layers.0...`).
    /// With `lora`, adapters are created on the targeted projections (A random, B zero).
    pub fn new(cfg: &Qwen3Config, vb: VarBuilder, lora: Option<&LoraConfig>) -> Result<Self> {
        cfg.validate()?;
        let mut init = AdapterInit::new(lora, vb.device());
        let embed_tokens = vb.get((cfg.vocab_size, cfg.hidden_size), "model.embed_tokens.weight")?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            layers.push(DecoderLayer::new(cfg, vb.pp(format!("model.layers.{i}")), &mut init)?);
        }
        let norm = RmsNorm::new(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("model.norm"))?;
        let lm_head = if cfg.tie_word_embeddings {
            embed_tokens.clone()
        } else {
            vb.get((cfg.vocab_size, cfg.hidden_size), "lm_head.weight")?
        };
        Ok(Self {
            cfg: cfg.clone(),
            embed_tokens,
            layers,
            norm,
            lm_head,
            rope: Rope::new(cfg, vb.dtype(), vb.device())?,
            device: vb.device().clone(),
            dtype: vb.dtype(),
            lora: lora.cloned(),
        })
    }

    /// Loads `config.json` and the (possibly sharded) safetensors of a Hugging Face checkpoint
    /// directory, memory-mapped, converting weights to `dtype` on `device`.
    pub fn load(dir: &Path, dtype: DType, device: &Device, lora: Option<&LoraConfig>) -> Result<Self> {
        let cfg = Qwen3Config::from_file(&dir.join("config.json"))?;
        let weights = ShardedSafetensors::open(dir)?;
        let vb = VarBuilder::from_backend(Box::new(weights), dtype, device.clone());
        Self::new(&cfg, vb, lora)
    }

    /// The config the model was built from.
    pub fn config(&self) -> &Qwen3Config {
        &self.cfg
    }

    /// The device holding the weights.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The dtype of the base weights and activations (adapters are f32).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The adapter configuration, when the model carries adapters.
    pub fn lora_config(&self) -> Option<&LoraConfig> {
        self.lora.as_ref()
    }

    /// Logits `(batch, len, vocab)` in f32 for right-padded `ids` `(batch, len)`, every
    /// position at once (no cache). With [`Pass::TRAIN`] the result is differentiable in
    /// the adapters.
    pub fn forward_train(&self, ids: &Tensor, pass: Pass) -> Result<Tensor> {
        let (_, len) = ids.dims2()?;
        if len == 0 || len > self.cfg.max_position_embeddings {
            return Err(Error::Invalid(format!(
                "sequence length {len} outside 1..={}",
                self.cfg.max_position_embeddings
            )));
        }
        let tables = self.rope.tables(&Positions::Range { start: 0, len })?;
        let mask = AttnMask::new(len, 0, &self.device, None);
        let mut h = self.embed(ids)?;
        for layer in &self.layers {
            h = layer.forward(&h, &tables, &mask, None, pass)?;
        }
        self.head(&self.norm.forward(&h, pass.mode)?)
    }

    /// Appends a chunk `ids` `(batch, len)` to the cached sequences and returns logits in f32:
    /// `(batch, 1, vocab)` for the chunk's last slot when `last_only`, else `(batch, len, vocab)`.
    /// `valid[row][slot]` marks real tokens; padding must sit before a row's real tokens in
    /// the chunk (left padding) for the last slot to be that row's next-token distribution.
    pub fn forward_cached(
        &self,
        ids: &Tensor,
        valid: &[Vec<bool>],
        cache: &mut KvCache,
        pass: Pass,
        last_only: bool,
    ) -> Result<Tensor> {
        let (batch, len) = ids.dims2()?;
        if cache.batch() != batch || cache.layers.len() != self.layers.len() {
            return Err(Error::Invalid(format!(
                "cache holds {} rows and {} layers; call has {batch} rows for {} layers",
                cache.batch(),
                cache.layers.len(),
                self.layers.len()
            )));
        }
        let (positions, mask) = cache.admit(valid, &self.device)?;
        if cache.row_tokens().iter().any(|&p| p as usize > self.cfg.max_position_embeddings) {
            return Err(Error::Invalid(format!(
                "a row passed max_position_embeddings = {}",
                self.cfg.max_position_embeddings
            )));
        }
        let tables = self.rope.tables(&positions)?;
        let mut h = self.embed(ids)?;
        for (layer, kv) in self.layers.iter().zip(cache.layers.iter_mut()) {
            h = layer.forward(&h, &tables, &mask, Some(kv), pass)?;
        }
        let h = if last_only { h.narrow(1, len - 1, 1)? } else { h };
        self.head(&self.norm.forward(&h, pass.mode)?)
    }

    /// The gradient of `loss_of_logits(forward_train(ids))` with respect to the adapters,
    /// computed with per-layer gradient checkpointing: the forward pass keeps only each
    /// layer's input, and the backward pass recomputes one layer at a time, so activation
    /// memory is one layer's worth plus `layers × len × hidden` instead of all layers'.
    /// Costs one extra forward pass. Returns the loss and a store holding only adapter grads.
    pub fn backward_checkpointed(
        &self,
        ids: &Tensor,
        pass: Pass,
        loss_of_logits: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<(Tensor, GradStore)> {
        let (_, len) = ids.dims2()?;
        let tables = self.rope.tables(&Positions::Range { start: 0, len })?;
        let mask = AttnMask::new(len, 0, &self.device, None);
        let adapter_ids: Vec<Var> = self.lora_vars();
        let keep = |from: GradStore, into: &mut GradStore| -> Result<()> {
            let mut from = from;
            let mut only = GradStore::default();
            for v in &adapter_ids {
                if let Some(g) = from.remove(v.as_tensor()) {
                    only.insert(v.as_tensor(), g);
                }
            }
            Ok(into.extend(only)?)
        };
        // Forward, keeping each layer's (detached) input only.
        let mut inputs = Vec::with_capacity(self.layers.len());
        let mut h = self.embed(ids)?;
        for layer in &self.layers {
            let out = layer.forward(&h, &tables, &mask, None, pass)?.detach();
            inputs.push(h);
            h = out;
        }
        // The head: final norm, LM head and the caller's loss, differentiated down to `h`.
        let top = Var::from_tensor(&h)?;
        let loss = loss_of_logits(&self.head(&self.norm.forward(top.as_tensor(), pass.mode)?)?)?;
        let mut grads = loss.backward()?;
        let mut upstream = grads
            .remove(top.as_tensor())
            .ok_or_else(|| Error::Invalid("the loss does not depend on the model's output".into()))?;
        let mut total = GradStore::default();
        keep(grads, &mut total)?;
        // Backward through the layers, recomputing each from its saved input.
        for (layer, input) in self.layers.iter().zip(inputs).rev() {
            let x = Var::from_tensor(&input)?;
            let out = layer.forward(x.as_tensor(), &tables, &mask, None, pass)?;
            let surrogate = (out * upstream.detach())?.sum_all()?;
            let mut grads = surrogate.backward()?;
            upstream = grads
                .remove(x.as_tensor())
                .ok_or_else(|| Error::Invalid("layer output does not depend on its input".into()))?;
            keep(grads, &mut total)?;
        }
        Ok((loss.detach(), total))
    }

    /// A fresh cache for `batch` sequences.
    pub fn new_cache(&self, batch: usize) -> KvCache {
        KvCache::new(batch, self.layers.len())
    }

    /// A fresh cache for `batch` sequences that allocates `slots` slots up front.
    pub fn new_cache_with_capacity(&self, batch: usize, slots: usize) -> KvCache {
        KvCache::with_capacity(batch, self.layers.len(), slots)
    }

    /// Every adapter matrix (A then B per module, layer by layer), for the optimizer.
    pub fn lora_vars(&self) -> Vec<Var> {
        self.linears().into_iter().filter_map(|(_, l)| l.adapter()).flat_map(|a| [a.a.clone(), a.b.clone()]).collect()
    }

    /// Every linear projection under its checkpoint name (`model.layers.3.mlp.up_proj`).
    pub fn linears(&self) -> Vec<(String, &LoraLinear)> {
        let mut out = Vec::with_capacity(self.layers.len() * 7);
        for (i, layer) in self.layers.iter().enumerate() {
            let a = &layer.self_attn;
            let m = &layer.mlp;
            for (name, lin) in [
                ("self_attn.q_proj", &a.q_proj),
                ("self_attn.k_proj", &a.k_proj),
                ("self_attn.v_proj", &a.v_proj),
                ("self_attn.o_proj", &a.o_proj),
                ("mlp.gate_proj", &m.gate_proj),
                ("mlp.up_proj", &m.up_proj),
                ("mlp.down_proj", &m.down_proj),
            ] {
                out.push((format!("model.layers.{i}.{name}"), lin));
            }
        }
        out
    }

    /// Makes the adapters' current values the reference policy (the SFT reference): passes
    /// with [`Pass::lora`] off then use a frozen copy of them instead of the base model.
    pub fn freeze_reference(&self) -> Result<()> {
        for (_, linear) in self.linears() {
            if let Some(ad) = linear.adapter() {
                ad.freeze_reference()?;
            }
        }
        Ok(())
    }

    /// Whether the reference is the base model (no adapters frozen as the reference).
    pub fn reference_is_base(&self) -> Result<bool> {
        for (_, linear) in self.linears() {
            if let Some(ad) = linear.adapter()
                && ad.reference()?.is_some()
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The frozen tensors a gradient must never reach (embeddings, projections, LM head).
    pub fn base_weights(&self) -> Vec<Tensor> {
        let mut out = vec![self.embed_tokens.clone(), self.lm_head.clone()];
        out.extend(self.linears().into_iter().map(|(_, l)| l.weight().clone()));
        out
    }

    fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        let (b, l) = ids.dims2()?;
        let flat = ids.flatten_all()?;
        Ok(self.embed_tokens.index_select(&flat, 0)?.reshape((b, l, self.cfg.hidden_size))?)
    }

    fn head(&self, h: &Tensor) -> Result<Tensor> {
        let (b, l, d) = h.dims3()?;
        let logits = h.reshape((b * l, d))?.matmul(&self.lm_head.t()?)?;
        Ok(logits.to_dtype(DType::F32)?.reshape((b, l, self.cfg.vocab_size))?)
    }
}

#[derive(Debug, Clone)]
struct DecoderLayer {
    self_attn: Attention,
    mlp: Mlp,
    input_layernorm: RmsNorm,
    post_attention_layernorm: RmsNorm,
}

impl DecoderLayer {
    fn new(cfg: &Qwen3Config, vb: VarBuilder, init: &mut AdapterInit) -> Result<Self> {
        Ok(Self {
            self_attn: Attention::new(cfg, vb.pp("self_attn"), init)?,
            mlp: Mlp::new(cfg, vb.pp("mlp"), init)?,
            input_layernorm: RmsNorm::new(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("input_layernorm"))?,
            post_attention_layernorm: RmsNorm::new(
                cfg.hidden_size,
                cfg.rms_norm_eps,
                vb.pp("post_attention_layernorm"),
            )?,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        tables: &(Tensor, Tensor),
        mask: &AttnMask,
        cache: Option<&mut super::cache::LayerKv>,
        pass: Pass,
    ) -> candle_core::Result<Tensor> {
        let h = self.input_layernorm.forward(x, pass.mode)?;
        let x = (x + self.self_attn.forward(&h, tables, mask, cache, pass)?)?;
        let h = self.post_attention_layernorm.forward(&x, pass.mode)?;
        x + self.mlp.forward(&h, pass)?
    }
}
