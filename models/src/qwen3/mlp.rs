//! SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, Shape, Tensor, WithDType};
use candle_nn::VarBuilder;
use rayon::prelude::*;

use super::{Mode, Pass, Qwen3Config};
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
        let gate = self.gate_proj.forward(x, pass)?;
        let up = self.up_proj.forward(x, pass)?;
        let hidden =
            if pass.mode == Mode::Infer && x.device().is_cpu() { silu_mul(&gate, &up)? } else { (gate.silu()? * up)? };
        self.down_proj.forward(&hidden, pass)
    }
}

/// `silu(gate) * up` in one pass over memory, without a backward pass (sampling only).
///
/// candle runs each of `silu` and `*` as its own elementwise op, and from 64 Ki elements on
/// (the MLP's `len × intermediate` activations of any real prompt) splits them statically
/// over its spinning barrier pool: on a loaded CPU the caller spins while a worker waits for
/// a core. Here large inputs are split into rayon chunks, which the calling thread steals
/// back when the other workers are busy, and each input is read once and the output written
/// once.
pub(crate) fn silu_mul(gate: &Tensor, up: &Tensor) -> candle_core::Result<Tensor> {
    gate.contiguous()?.apply_op2_no_bwd(&up.contiguous()?, &SiluMul)
}

/// Elements per parallel work unit; below two units the op runs on the calling thread.
const CHUNK: usize = 16 * 1024;

struct SiluMul;

impl candle_core::CustomOp2 for SiluMul {
    fn name(&self) -> &'static str {
        "silu-mul"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        if l1.shape() != l2.shape() {
            candle_core::bail!("silu-mul shapes differ: {:?} vs {:?}", l1.shape(), l2.shape())
        }
        let (Some((a0, a1)), Some((b0, b1))) = (l1.contiguous_offsets(), l2.contiguous_offsets()) else {
            candle_core::bail!("silu-mul needs contiguous inputs")
        };
        let out = match (s1, s2) {
            (CpuStorage::F32(g), CpuStorage::F32(u)) => CpuStorage::F32(map2(&g[a0..a1], &u[b0..b1], silu_mul_f32)),
            (CpuStorage::BF16(g), CpuStorage::BF16(u)) => CpuStorage::BF16(map2(&g[a0..a1], &u[b0..b1], via_f32)),
            (CpuStorage::F16(g), CpuStorage::F16(u)) => CpuStorage::F16(map2(&g[a0..a1], &u[b0..b1], via_f32)),
            (CpuStorage::F64(g), CpuStorage::F64(u)) => {
                CpuStorage::F64(map2(&g[a0..a1], &u[b0..b1], |g, u| g / (1.0 + (-g).exp()) * u))
            }
            _ => candle_core::bail!("silu-mul: unsupported or mismatched dtypes {:?}, {:?}", s1.dtype(), s2.dtype()),
        };
        Ok((out, l1.shape().clone()))
    }
}

fn silu_mul_f32(g: f32, u: f32) -> f32 {
    g / (1.0 + (-g).exp()) * u
}

/// Half precision computes in f32 and rounds once, at the end.
fn via_f32<T: WithDType>(g: T, u: T) -> T {
    T::from_f64(silu_mul_f32(g.to_f64() as f32, u.to_f64() as f32) as f64)
}

/// `f` over two equal-length slices, in parallel chunks when there are several.
fn map2<T: Copy + Send + Sync>(a: &[T], b: &[T], f: impl Fn(T, T) -> T + Sync) -> Vec<T> {
    let fill = |(out, (a, b)): (&mut [T], (&[T], &[T]))| {
        out.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&x, &y))| *o = f(x, y));
    };
    let mut out = a.to_vec();
    if a.len() < 2 * CHUNK {
        fill((&mut out, (a, b)));
    } else {
        out.par_chunks_mut(CHUNK).zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK))).for_each(fill);
    }
    out
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    use super::silu_mul;

    /// The fused kernel equals candle's two ops, in f32 and (within rounding) in bf16.
    #[test]
    fn silu_mul_matches_unfused_ops() {
        let dev = Device::Cpu;
        let gate = Tensor::arange(-300i64, 300, &dev).and_then(|t| t.to_dtype(DType::F32)).and_then(|t| t / 37.0);
        let gate = gate.and_then(|t| t.reshape((6, 100))).expect("gate");
        let up = (gate.cos().expect("cos") * 3.0).expect("up");
        let want = (gate.silu().expect("silu") * &up).expect("mul");
        let got = silu_mul(&gate, &up).expect("fused");
        assert_eq!(got.dims(), &[6, 100]);
        let diff = (got - &want).and_then(|d| d.abs()).and_then(|d| d.max_all()).and_then(|d| d.to_scalar::<f32>());
        assert!(diff.expect("diff") < 1e-5);
        let (g16, u16) = (gate.to_dtype(DType::BF16).expect("g"), up.to_dtype(DType::BF16).expect("u"));
        let got = silu_mul(&g16, &u16).and_then(|t| t.to_dtype(DType::F32)).expect("bf16 fused");
        let diff = (got - &want).and_then(|d| d.abs()).and_then(|d| d.max_all()).and_then(|d| d.to_scalar::<f32>());
        assert!(diff.expect("diff") < 0.1, "bf16 silu-mul drifts");
        // Large inputs take the parallel path and agree as well.
        let big = Tensor::arange(0u32, 80_000, &dev).and_then(|t| t.to_dtype(DType::F32)).expect("big");
        let (g, u) = (((&big / 7919.0).expect("g").sin().expect("sin") * 6.0).expect("g"), (&big / 1e4).expect("u"));
        let want_big = (g.silu().expect("silu") * &u).expect("mul");
        let diff = (silu_mul(&g, &u).expect("fused") - want_big).and_then(|d| d.abs()?.max_all()?.to_scalar::<f32>());
        assert!(diff.expect("diff") < 1e-5);
        // Strided views are read in logical order, and mismatched shapes are refused.
        let got = silu_mul(&gate.t().expect("t"), &up.t().expect("t")).expect("strided");
        let diff = (got - want.t().expect("t")).and_then(|d| d.abs()?.max_all()?.to_scalar::<f32>());
        assert!(diff.expect("diff") < 1e-5);
        assert!(silu_mul(&gate, &up.narrow(1, 0, 50).expect("narrow")).is_err());
    }
}
