//! The one exception type of the package, and how the crates' errors become it.
//!
//! Every failure a user can act on (diagnostics of a reward file, a run-time
//! fault, a feature a rollout cannot provide) is a `RewardError` whose message
//! is the text the `rewardlab` CLI prints for the same failure, so a message
//! seen in a trainer's log can be looked up exactly as the CLI's.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use rewardlab_protocol::error_chain;

create_exception!(
    _core,
    RewardError,
    PyException,
    "A reward file that does not check, or a fault while computing features or rewards."
);

/// A `RewardError` carrying `message`.
pub fn reward_error(message: impl Into<String>) -> PyErr {
    RewardError::new_err(message.into())
}

/// A `RewardError` whose message is an error's text with its causes, as the CLI's
/// `{:#}` prints them (`outer: inner: innermost`).
pub fn from_error(err: &(dyn std::error::Error + 'static)) -> PyErr {
    reward_error(error_chain(err))
}
