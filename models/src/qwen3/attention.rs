//! Grouped-query self-attention with per-head q/k RMSNorm and RoPE.
//!
//! One code path serves training and sampling: the caller supplies an additive mask (causal
//! for training; causal plus key validity for the padded, cached batch) and, when sampling, the
//! layer's KV cache. Grouped heads are never materialised: queries are reshaped to
//! `(batch, kv_heads, groups * len, head_dim)` so each key/value head is multiplied once.
//! Sampling on the CPU replaces scale, mask and softmax by one fused pass over the scores
//! ([`super::softmax`]) that reads causality and padding from the chunk's shape and the
//! host-side key bias, so no mask tensor is built.

use candle_core::{D, DType, Tensor};
use candle_nn::VarBuilder;

use super::cache::{AttnMask, LayerKv};
use super::norm::RmsNorm;
use super::{Mode, Pass, Qwen3Config};
use super::{rope, softmax};
use crate::lora::{AdapterInit, LoraLinear, TargetModule};

#[derive(Debug, Clone)]
pub(crate) struct Attention {
    pub(crate) q_proj: LoraLinear,
    pub(crate) k_proj: LoraLinear,
    pub(crate) v_proj: LoraLinear,
    pub(crate) o_proj: LoraLinear,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    num_heads: usize,
    num_kv_heads: usize,
    head_dim: usize,
}

impl Attention {
    pub(crate) fn new(cfg: &Qwen3Config, vb: VarBuilder, init: &mut AdapterInit) -> crate::Result<Self> {
        let (h, d) = (cfg.hidden_size, cfg.head_dim());
        let (nq, nkv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
        let bias = cfg.attention_bias;
        Ok(Self {
            q_proj: LoraLinear::load(h, nq * d, bias, vb.pp("q_proj"), TargetModule::QProj, init)?,
            k_proj: LoraLinear::load(h, nkv * d, bias, vb.pp("k_proj"), TargetModule::KProj, init)?,
            v_proj: LoraLinear::load(h, nkv * d, bias, vb.pp("v_proj"), TargetModule::VProj, init)?,
            o_proj: LoraLinear::load(nq * d, h, bias, vb.pp("o_proj"), TargetModule::OProj, init)?,
            q_norm: RmsNorm::new(d, cfg.rms_norm_eps, vb.pp("q_norm"))?,
            k_norm: RmsNorm::new(d, cfg.rms_norm_eps, vb.pp("k_norm"))?,
            num_heads: nq,
            num_kv_heads: nkv,
            head_dim: d,
        })
    }

    /// `x`: `(batch, len, hidden)`; `mask`: additive f32 masks over the keys; `cache`: the
    /// layer's KV cache when sampling.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        cos_sin: &(Tensor, Tensor),
        mask: &AttnMask,
        cache: Option<&mut LayerKv>,
        pass: Pass,
    ) -> candle_core::Result<Tensor> {
        let (b, l, _) = x.dims3()?;
        let heads = |t: Tensor, n: usize| t.reshape((b, l, n, self.head_dim));
        let q = heads(self.q_proj.forward(x, pass)?, self.num_heads)?;
        let k = heads(self.k_proj.forward(x, pass)?, self.num_kv_heads)?;
        let v = heads(self.v_proj.forward(x, pass)?, self.num_kv_heads)?;
        let q = self.q_norm.forward(&q, pass.mode)?.transpose(1, 2)?.contiguous()?;
        let k = self.k_norm.forward(&k, pass.mode)?.transpose(1, 2)?.contiguous()?;
        let v = v.transpose(1, 2)?.contiguous()?;
        let (cos, sin) = cos_sin;
        let q = rope::apply(&q, cos, sin, pass.mode)?;
        let k = rope::apply(&k, cos, sin, pass.mode)?;
        let (k, v) = match cache {
            Some(cache) => cache.append(&k, &v)?,
            None => (k, v),
        };
        let ctx = self.attend(&q, &k, &v, mask, pass.mode)?;
        let ctx = ctx.transpose(1, 2)?.reshape((b, l, self.num_heads * self.head_dim))?;
        self.o_proj.forward(&ctx, pass)
    }

    fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor, mask: &AttnMask, mode: Mode) -> candle_core::Result<Tensor> {
        let (b, h, l, d) = q.dims4()?;
        let (_, hkv, t, _) = k.dims4()?;
        let groups = h / hkv;
        let q = q.reshape((b, hkv, groups * l, d))?;
        let scale = 1.0 / (d as f64).sqrt();
        if mode == Mode::Infer && q.device().is_cpu() {
            let probs = softmax::causal_softmax(&q.matmul(&k.t()?)?, scale as f32, l, mask.key_bias())?;
            return probs.to_dtype(v.dtype())?.matmul(v)?.reshape((b, h, l, d));
        }
        let scores = (q.matmul(&k.t()?)? * scale)?;
        // Softmax in f32 whatever the weights' dtype: bf16 exponentials lose too much.
        let scores = scores.to_dtype(DType::F32)?.reshape((b, hkv, groups, l, t))?.broadcast_add(mask.causal()?)?;
        let scores = match mask.keys()? {
            Some(keys) => scores.broadcast_add(keys)?,
            None => scores,
        };
        let probs = softmax_last(&scores, mode)?.to_dtype(v.dtype())?.reshape((b, hkv, groups * l, t))?;
        probs.matmul(v)?.reshape((b, h, l, d))
    }
}

/// Softmax over the last dimension; the training form is `exp(x - max) / sum`, built from
/// primitives with a backward pass (the max is detached: softmax is shift invariant).
pub(crate) fn softmax_last(x: &Tensor, mode: Mode) -> candle_core::Result<Tensor> {
    match mode {
        Mode::Infer => candle_nn::ops::softmax_last_dim(&x.contiguous()?),
        Mode::Train => {
            let max = x.max_keepdim(D::Minus1)?.detach();
            let e = x.broadcast_sub(&max)?.exp()?;
            e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
        }
    }
}
