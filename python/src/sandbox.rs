//! The read-only sandbox: a store of bare mirrors, trees at commits, and tool
//! calls that return exactly the text a rewardlab policy sees.
//!
//! A call arrives as the contract's JSON (`{"tool": "grep", "args": {...}}`)
//! and is validated by `ToolCall::from_json`, so a malformed call from a model
//! becomes the same error response a rewardlab policy would read, never an
//! exception. Each call also returns its rollout record (`LoggedCall`), which
//! is what the `c`, `C`, `T` and `e` features are computed from.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use rewardlab_protocol::error_chain;
use rewardlab_rewards::rollout::LoggedCall;
use rewardlab_sandbox::{Limits, RepoStore, Status, StoreOptions, ToolCall, TreeKind};

use crate::errors::{from_error, reward_error};

/// A sandbox over one store directory, with the seed's limits unless overridden.
#[pyclass(module = "rewardlab._core", frozen)]
#[derive(Debug)]
pub struct Sandbox {
    inner: rewardlab_sandbox::Sandbox,
}

#[pymethods]
impl Sandbox {
    /// Opens (creating if needed) the store at `store`. `None` keeps a limit's default.
    #[new]
    #[pyo3(signature = (
        store,
        *,
        max_output_chars = None,
        grep_timeout_s = None,
        glob_timeout_s = None,
        read_timeout_s = None,
        max_calls_per_turn = None,
        result_cache_bytes = None,
        index = true,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: PathBuf,
        max_output_chars: Option<usize>,
        grep_timeout_s: Option<f64>,
        glob_timeout_s: Option<f64>,
        read_timeout_s: Option<f64>,
        max_calls_per_turn: Option<usize>,
        result_cache_bytes: Option<usize>,
        index: bool,
    ) -> PyResult<Sandbox> {
        let defaults = Limits::default();
        let seconds = |name: &str, value: Option<f64>, default: Duration| -> PyResult<Duration> {
            match value {
                None => Ok(default),
                Some(s) => Duration::try_from_secs_f64(s)
                    .map_err(|_| reward_error(format!("{name}: expected a non-negative number of seconds, got {s}"))),
            }
        };
        let limits = Limits {
            max_output_chars: max_output_chars.unwrap_or(defaults.max_output_chars),
            grep_timeout: seconds("grep_timeout_s", grep_timeout_s, defaults.grep_timeout)?,
            glob_timeout: seconds("glob_timeout_s", glob_timeout_s, defaults.glob_timeout)?,
            read_timeout: seconds("read_timeout_s", read_timeout_s, defaults.read_timeout)?,
            max_calls_per_turn: max_calls_per_turn.unwrap_or(defaults.max_calls_per_turn),
            result_cache_bytes: result_cache_bytes.unwrap_or(defaults.result_cache_bytes),
            ..defaults
        };
        let options = StoreOptions {
            index_bytes: if index { StoreOptions::default().index_bytes } else { 0 },
            ..StoreOptions::default()
        };
        let store = py
            .detach(|| RepoStore::open_with(&store, options))
            .map_err(|e| reward_error(format!("opening the store at {}: {}", store.display(), error_chain(&e))))?;
        Ok(Sandbox { inner: rewardlab_sandbox::Sandbox::new(Arc::new(store), limits) })
    }

    /// The tree of `commit` in `repo` (a local path or URL, cloned bare into the
    /// store on first use, or `owner/name` of a mirror already there).
    #[pyo3(signature = (repo, commit = "HEAD", kind = "view"))]
    fn tree(&self, py: Python<'_>, repo: &str, commit: &str, kind: &str) -> PyResult<Tree> {
        let kind: TreeKind = kind.parse().map_err(reward_error)?;
        let tree = py
            .detach(|| self.inner.tree(repo, commit, kind))
            .map_err(|e| reward_error(format!("preparing {repo} at {commit}: {}", error_chain(&e))))?;
        Ok(Tree { sandbox: self.inner.clone(), tree })
    }

    /// Calls honoured per turn (later calls of a turn get an error response).
    #[getter]
    fn max_calls_per_turn(&self) -> usize {
        self.inner.limits().max_calls_per_turn
    }

    /// Characters a tool's output is cut at.
    #[getter]
    fn max_output_chars(&self) -> usize {
        self.inner.limits().max_output_chars
    }

    /// The store's root directory.
    #[getter]
    fn store(&self) -> PathBuf {
        self.inner.store().root().to_path_buf()
    }
}

/// One repository at one commit, ready for tool calls.
#[pyclass(module = "rewardlab._core", frozen)]
#[derive(Debug)]
pub struct Tree {
    sandbox: rewardlab_sandbox::Sandbox,
    tree: Arc<rewardlab_sandbox::Tree>,
}

#[pymethods]
impl Tree {
    /// The commit id, in hex.
    #[getter]
    fn commit(&self) -> String {
        self.tree.commit().to_string()
    }

    /// The repository's store name (`owner__name`).
    #[getter]
    fn repo(&self) -> &str {
        self.tree.repo_name()
    }

    /// Runs one call given as JSON text. Returns `(output, status, record)`:
    /// the text the policy reads, the status (`ok`, `truncated`, `timeout` or
    /// `error:<kind>`) and the rollout record of the call as JSON text.
    fn call(&self, py: Python<'_>, call: &str) -> PyResult<(String, String, String)> {
        let (result, record) = py.detach(|| match ToolCall::from_json_str(call) {
            Ok(call) => {
                let result = self.sandbox.call(&self.tree, &call);
                let record = LoggedCall::of(&call, &result);
                (result, record)
            }
            Err(result) => (result, LoggedCall::invalid()),
        });
        let record = serde_json::to_string(&record).map_err(|e| from_error(&e))?;
        Ok((result.output, status_text(&result.status), record))
    }

    fn __repr__(&self) -> String {
        format!("<rewardlab Tree {} at {}>", self.tree.repo_name(), self.tree.commit())
    }
}

fn status_text(status: &Status) -> String {
    match status {
        Status::Ok => "ok".to_string(),
        Status::Truncated => "truncated".to_string(),
        Status::Timeout => "timeout".to_string(),
        Status::Error(kind) => match serde_json::to_value(kind) {
            Ok(serde_json::Value::String(s)) => format!("error:{s}"),
            _ => format!("error:{kind:?}"),
        },
        _ => format!("{status:?}"),
    }
}
