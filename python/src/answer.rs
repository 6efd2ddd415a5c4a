//! The strict answer schema, `<answer>{"files": [...], "line_ranges": [...]}</answer>`,
//! parsed by `rewardlab-protocol`'s one parser.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Parses a generated text's answer. Returns `(answer, None)` with the answer
/// as a dict in the rollout record's `predicted` shape, or `(None, reason)`
/// when the text holds no valid answer.
#[pyfunction]
pub fn parse_answer<'py>(py: Python<'py>, text: &str) -> PyResult<(Option<Bound<'py, PyDict>>, Option<String>)> {
    match rewardlab_protocol::answer::parse_answer(text) {
        Ok(answer) => {
            let dict = PyDict::new(py);
            dict.set_item("files", answer.files)?;
            dict.set_item("line_ranges", answer.line_ranges.iter().map(ToString::to_string).collect::<Vec<_>>())?;
            if let Some(functions) = answer.functions {
                dict.set_item("functions", functions)?;
            }
            Ok((Some(dict), None))
        }
        Err(reason) => Ok((None, Some(reason.to_string()))),
    }
}
