//! Rollout records to feature columns: `rewardlab-rewards`' `feature_table`
//! over records in the contract's JSON shape.
//!
//! Records arrive as JSON text (the Python side serialises its dicts with
//! `json.dumps`), so they go through the same `Rollout::from_json_line` as a
//! rollout JSONL line does in `rewardlab eval`: the same normalisation, the
//! same strictness, the same messages.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rewardlab_rewards::features::{FeatureOptions, feature_table};
use rewardlab_rewards::metrics::LineMatch;
use rewardlab_rewards::rollout::Rollout;

use crate::errors::{from_error, reward_error};
use crate::program::{Program, arrays_dict};

/// The features `program` reads, one float64 array per key, rows in the order of `rollouts`.
///
/// `line_match` is `coverage` (the contract's rule) or `jaccard`; `source`
/// names the data in error messages.
#[pyfunction]
#[pyo3(signature = (program, rollouts, line_match = "coverage", source = "rollouts"))]
pub fn rollout_features<'py>(
    py: Python<'py>,
    program: PyRef<'py, Program>,
    rollouts: Vec<String>,
    line_match: &str,
    source: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let line_match = match line_match {
        "coverage" => LineMatch::Coverage,
        "jaccard" => LineMatch::Jaccard,
        other => return Err(reward_error(format!("line_match: expected `coverage` or `jaccard`, got `{other}`"))),
    };
    let options = FeatureOptions { line_match, source: source.to_string(), ..FeatureOptions::default() };
    let features = &program.compiled().program().features;
    let columns = py.detach(|| -> Result<Vec<(String, Vec<f64>)>, PyErr> {
        let mut records = Vec::with_capacity(rollouts.len());
        for (i, text) in rollouts.iter().enumerate() {
            records.push(Rollout::from_json_line(text).map_err(|m| reward_error(format!("{source}[{i}]: {m}")))?);
        }
        let grouped = feature_table(features, &records, &options).map_err(|e| from_error(&e))?;
        let mut columns = Vec::with_capacity(features.len());
        for f in features {
            let Some(column) = grouped.table.column(&f.key) else {
                continue;
            };
            let mut values = vec![0.0; column.len()];
            for (row, &input) in grouped.order.iter().enumerate() {
                values[input] = column[row];
            }
            columns.push((f.key.clone(), values));
        }
        Ok(columns)
    })?;
    arrays_dict(py, columns)
}
