//! `rewardlab._core`: the compiled half of the `rewardlab` Python package.
//!
//! Bindings are thin: every function here converts Python values to the
//! crates' types, releases the GIL while the crates work, and converts the
//! results back. The reward language is `rewardlab-dsl`, rollout features are
//! `rewardlab-rewards`, the tools are `rewardlab-sandbox`, and answers are
//! parsed by `rewardlab-protocol`; nothing is re-implemented. The pure-Python
//! package (`python/python/rewardlab`) builds the trainer-facing objects on
//! top, because trainers inspect those with `inspect`, which sees no methods
//! on compiled classes.

use pyo3::prelude::*;

mod answer;
mod errors;
mod features;
mod program;
mod sandbox;

pub use errors::RewardError;

/// The module `rewardlab._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RewardError", m.py().get_type::<RewardError>())?;
    m.add_class::<program::Program>()?;
    m.add_class::<sandbox::Sandbox>()?;
    m.add_class::<sandbox::Tree>()?;
    m.add_function(wrap_pyfunction!(program::load_source, m)?)?;
    m.add_function(wrap_pyfunction!(features::rollout_features, m)?)?;
    m.add_function(wrap_pyfunction!(answer::parse_answer, m)?)?;
    Ok(())
}
