//! The Qwen3 agent's checkpoint split: adapter values and AdamW moments go to the binary part
//! (safetensors), the adapter shape, names and step count stay in JSON.
//!
//! Tensor names follow the variables' (`<module>.lora_A`) with torch's AdamW names for the
//! moments (`.exp_avg`, `.exp_avg_sq`), so the file reads naturally in any safetensors viewer;
//! the frozen SFT reference, when there is one, is `<module>.lora_A.reference`.

use candle_core::{Device, Tensor, Var};
use serde::{Deserialize, Serialize};

use crate::agent::{PolicyState, StateTensor};
use crate::{Error, Result};

use super::Qwen3AgentState;

const FIRST_MOMENT: &str = ".exp_avg";
const SECOND_MOMENT: &str = ".exp_avg_sq";
const REFERENCE: &str = ".reference";

/// One frozen reference adapter matrix of a checkpoint (f32 bit patterns in JSON, like
/// [`super::VarState`]; in the binary part in an engine checkpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceState {
    /// The variable it stands in for (`model.layers.0.self_attn.q_proj.lora_A`, ...).
    pub name: String,
    /// Its dimensions, the variable's.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    #[serde(with = "super::adamw::bits32", default, skip_serializing_if = "Vec::is_empty")]
    pub value: Vec<f32>,
}

/// The reference pairs `(A, B)` per adapter that `state` holds, checked against the agent's
/// variables (`None`: the reference is the base model).
pub(super) fn reference_tensors(
    state: &Qwen3AgentState,
    vars: &[(String, Var)],
    device: &Device,
) -> Result<Option<Vec<(Tensor, Tensor)>>> {
    if state.reference.is_empty() {
        return Ok(None);
    }
    if state.reference.len() != vars.len() {
        return Err(Error::Invalid(format!(
            "agent state has {} reference matrices for {} adapter matrices",
            state.reference.len(),
            vars.len()
        )));
    }
    let mut tensors = Vec::with_capacity(vars.len());
    for ((name, var), r) in vars.iter().zip(&state.reference) {
        check_saved_matrix("reference ", &r.name, &r.shape, name, var)?;
        tensors.push(Tensor::from_slice(&r.value, r.shape.as_slice(), device)?);
    }
    let mut pairs = Vec::with_capacity(vars.len() / 2);
    let mut it = tensors.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        pairs.push((a, b));
    }
    Ok(Some(pairs))
}

/// Refuses a saved matrix (`kind` says which: empty for a variable, `"reference "`) whose name
/// or shape is not that of the model variable `name` it is restored into.
pub(super) fn check_saved_matrix(kind: &str, saved: &str, shape: &[usize], name: &str, var: &Var) -> Result<()> {
    if name != saved || var.dims() != shape {
        return Err(Error::Invalid(format!(
            "agent state holds {kind}{saved} {shape:?} where the model has {name} {:?}",
            var.dims()
        )));
    }
    Ok(())
}

impl PolicyState for Qwen3AgentState {
    fn take_tensors(&mut self) -> Vec<StateTensor> {
        let mut out = Vec::with_capacity(3 * self.vars.len());
        for var in &mut self.vars {
            for (suffix, data) in [("", &mut var.value), (FIRST_MOMENT, &mut var.m), (SECOND_MOMENT, &mut var.v)] {
                out.push(StateTensor {
                    name: format!("{}{suffix}", var.name),
                    shape: var.shape.clone(),
                    data: std::mem::take(data),
                });
            }
        }
        for r in &mut self.reference {
            out.push(StateTensor {
                name: format!("{}{REFERENCE}", r.name),
                shape: r.shape.clone(),
                data: std::mem::take(&mut r.value),
            });
        }
        out
    }

    fn put_tensors(&mut self, tensors: Vec<StateTensor>) -> std::result::Result<(), String> {
        let mut by_name: std::collections::HashMap<String, StateTensor> =
            tensors.into_iter().map(|t| (t.name.clone(), t)).collect();
        // Everything is looked up and checked before anything is put back, so a refused file
        // leaves the state as the JSON gave it.
        let mut found = Vec::with_capacity(self.vars.len());
        for var in &self.vars {
            let mut three = Vec::with_capacity(3);
            for suffix in ["", FIRST_MOMENT, SECOND_MOMENT] {
                let name = format!("{}{suffix}", var.name);
                let t = by_name.remove(&name).ok_or_else(|| format!("the binary part lacks {name}"))?;
                if t.shape != var.shape {
                    return Err(format!("{name} has shape {:?} where the JSON part says {:?}", t.shape, var.shape));
                }
                three.push(t.data);
            }
            found.push(three);
        }
        let mut frozen = Vec::with_capacity(self.reference.len());
        for r in &self.reference {
            let name = format!("{}{REFERENCE}", r.name);
            let t = by_name.remove(&name).ok_or_else(|| format!("the binary part lacks {name}"))?;
            if t.shape != r.shape {
                return Err(format!("{name} has shape {:?} where the JSON part says {:?}", t.shape, r.shape));
            }
            frozen.push(t.data);
        }
        if let Some(extra) = by_name.keys().min() {
            return Err(format!(
                "the binary part holds {} tensors the state does not name (first: {extra})",
                by_name.len()
            ));
        }
        for (var, three) in self.vars.iter_mut().zip(found) {
            let [value, m, v]: [Vec<f32>; 3] = three.try_into().expect("three arrays per variable, pushed above");
            var.value = value;
            var.m = m;
            var.v = v;
        }
        for (r, data) in self.reference.iter_mut().zip(frozen) {
            r.value = data;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::DType;

    use super::*;

    #[test]
    fn a_saved_matrix_of_another_name_or_shape_is_refused_naming_both() {
        let var = Var::zeros((2, 3), DType::F32, &Device::Cpu).expect("var");
        let name = "m.lora_A";
        assert!(check_saved_matrix("", name, &[2, 3], name, &var).is_ok());
        let shape = check_saved_matrix("", name, &[3, 2], name, &var).expect_err("shape differs");
        assert_eq!(
            shape.to_string(),
            "invalid argument: agent state holds m.lora_A [3, 2] where the model has m.lora_A [2, 3]"
        );
        let other = check_saved_matrix("reference ", "m.lora_B", &[2, 3], name, &var).expect_err("name differs");
        assert_eq!(
            other.to_string(),
            "invalid argument: agent state holds reference m.lora_B [2, 3] where the model has m.lora_A [2, 3]"
        );
    }
}
