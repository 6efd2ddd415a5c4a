//! AdamW over the LoRA variables, with global-norm clipping and moments this module owns, so a
//! checkpoint holds exactly what the next step needs (parameters, both moments, step count).
//!
//! The update matches the proxy policy's AdamW (`proxy::AdamW`) term for term — bias-corrected
//! moments and decoupled weight decay — but runs on the variables' device in f32, since the
//! adapters of a 14B model (~128M values at r = 32) should not round-trip through the host.

use candle_core::{Tensor, Var};
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::agent::OptimStep;

/// First and second moments of every variable, and the steps taken.
#[derive(Debug)]
pub(crate) struct AdamW {
    pub(crate) m: Vec<Tensor>,
    pub(crate) v: Vec<Tensor>,
    pub(crate) t: u64,
}

/// One variable of a checkpoint: its value and moments as f32 bit patterns (a JSON number
/// may not parse back to the same f32, and a resumed run must continue bit for bit). In an
/// engine checkpoint the three arrays travel in the binary part
/// ([`PolicyState::take_tensors`](crate::agent::PolicyState::take_tensors)) and are empty, so
/// omitted, in the JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarState {
    /// `model.layers.0.self_attn.q_proj.lora_A` and so on.
    pub name: String,
    /// The tensor's dimensions (`[r, in]` for `lora_A`, `[out, r]` for `lora_B`).
    pub shape: Vec<usize>,
    /// The variable's values, row-major.
    #[serde(with = "bits32", default, skip_serializing_if = "Vec::is_empty")]
    pub value: Vec<f32>,
    /// AdamW's first moment, laid out like `value`.
    #[serde(with = "bits32", default, skip_serializing_if = "Vec::is_empty")]
    pub m: Vec<f32>,
    /// AdamW's second moment, laid out like `value`.
    #[serde(with = "bits32", default, skip_serializing_if = "Vec::is_empty")]
    pub v: Vec<f32>,
}

impl AdamW {
    /// Zero moments shaped like `vars`.
    pub(crate) fn new(vars: &[Var]) -> Result<Self> {
        let zeros = vars.iter().map(|v| v.as_tensor().zeros_like()).collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Self { m: zeros.clone(), v: zeros, t: 0 })
    }

    /// One step with `grads` (`None`: no gradient reached that variable, i.e. zero), clipped
    /// to the global norm first; returns the norm before clipping.
    pub(crate) fn step(&mut self, vars: &[Var], grads: &[Option<Tensor>], optim: &OptimStep) -> Result<f64> {
        let mut sq = 0.0f64;
        for g in grads.iter().flatten() {
            sq += f64::from(g.sqr()?.sum_all()?.to_scalar::<f32>()?);
        }
        let norm = sq.sqrt();
        let clip = match optim.max_grad_norm {
            Some(max) if norm > max && norm > 0.0 => max / norm,
            _ => 1.0,
        };
        self.t += 1;
        let t = i32::try_from(self.t).unwrap_or(i32::MAX);
        let correction1 = 1.0 - optim.beta1.powi(t);
        let correction2 = 1.0 - optim.beta2.powi(t);
        for (i, var) in vars.iter().enumerate() {
            let theta = var.as_tensor();
            let g = match &grads[i] {
                Some(g) => g.affine(clip, 0.0)?,
                None => theta.zeros_like()?,
            };
            let m = ((&self.m[i] * optim.beta1)? + (&g * (1.0 - optim.beta1))?)?;
            let v = ((&self.v[i] * optim.beta2)? + (g.sqr()? * (1.0 - optim.beta2))?)?;
            let m_hat = (&m / correction1)?;
            let v_hat = (&v / correction2)?;
            let adam = (m_hat / (v_hat.sqrt()? + optim.eps)?)?;
            // Decoupled weight decay (Loshchilov & Hutter): shrink θ, not the gradient.
            let update = (adam + (theta * optim.weight_decay)?)?;
            var.set(&(theta - (update * optim.lr)?)?)?;
            self.m[i] = m;
            self.v[i] = v;
        }
        Ok(norm)
    }
}

/// Serialises `f32`s as their IEEE-754 bit patterns.
pub(in crate::agent_qwen3) mod bits32 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(in crate::agent_qwen3) fn serialize<S: Serializer>(values: &[f32], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|v| v.to_bits()))
    }

    pub(in crate::agent_qwen3) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<f32>, D::Error> {
        Ok(Vec::<u32>::deserialize(deserializer)?.into_iter().map(f32::from_bits).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::AdamW as Reference;
    use candle_core::Device;

    /// The tensor AdamW follows the proxy's f64 AdamW (the engine-tested one) to f32 precision.
    #[test]
    fn matches_the_proxy_adamw_step_for_step() {
        let theta0 = [0.5f32, -1.0, 2.0, 0.0];
        let var = Var::from_slice(&theta0, 4, &Device::Cpu).expect("var");
        let mut ours = AdamW::new(std::slice::from_ref(&var)).expect("adamw");
        let mut theirs = Reference::new(4);
        let mut theta: Vec<f64> = theta0.iter().map(|&x| f64::from(x)).collect();
        let optim =
            OptimStep { lr: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.1, max_grad_norm: Some(1.5) };
        for k in 0..5 {
            let g: Vec<f32> = [1.0f32, -2.0, 0.5, 3.0].iter().map(|x| x * (k as f32 + 1.0) * 0.3).collect();
            let grad = Tensor::from_slice(&g, 4, &Device::Cpu).expect("grad");
            let norm = ours.step(std::slice::from_ref(&var), &[Some(grad)], &optim).expect("step");
            let mut g64: Vec<f64> = g.iter().map(|&x| f64::from(x)).collect();
            let norm64 = theirs.step(&mut theta, &mut g64, &optim);
            assert!((norm - norm64).abs() < 1e-5, "norm {norm} vs {norm64}");
            let now = var.as_tensor().to_vec1::<f32>().expect("values");
            for (a, b) in now.iter().zip(&theta) {
                assert!((f64::from(*a) - b).abs() < 1e-5, "step {k}: {now:?} vs {theta:?}");
            }
        }
        assert_eq!(ours.t, 5);
    }
}
