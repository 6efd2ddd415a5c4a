//! Checkpoints: everything needed to continue a run bit for bit.
//!
//! A checkpoint is a directory `checkpoints/step-NNNNNN/` under the run's
//! output directory holding `engine.json` (step, data cursor, seed, config,
//! reward fingerprint, how much of the rollout log belongs to it),
//! `policy.json` ([`Policy::state`](rewardlab_models::agent::Policy::state),
//! optimiser included) and copies of `metrics.csv` and `timings.csv` as they
//! were. It is written into a temporary sibling and renamed into place, so a
//! crash never leaves a half-written checkpoint under a final name.
//!
//! The engine has no RNG state to save: every random choice is seeded from
//! (seed, step, prompt slot, rollout) ([`super::seed`]), so the seed, the step
//! and the data cursor determine the rest of the run.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::config::EngineConfig;
use super::error::EngineError;

/// Format version of `engine.json`.
pub(crate) const VERSION: u32 = 1;

/// The engine's part of a checkpoint (`engine.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct EngineState {
    pub version: u32,
    /// Steps completed.
    pub step: usize,
    /// Training prompts drawn so far (position in the seeded epoch permutations).
    pub cursor: u64,
    pub config: EngineConfig,
    pub variant: String,
    pub variant_fingerprint: String,
    /// Length of `rollouts.jsonl` at this step (when rollouts are logged).
    pub rollouts_bytes: u64,
}

/// The directory name of the checkpoint after `step` steps.
pub(crate) fn dir_name(step: usize) -> String {
    format!("step-{step:06}")
}

/// The most recent complete checkpoint under `out_dir/checkpoints`, if any.
pub fn latest_checkpoint(out_dir: &Path) -> Option<PathBuf> {
    let entries = fs::read_dir(out_dir.join("checkpoints")).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let step: usize = name.strip_prefix("step-")?.parse().ok()?;
            e.path().join("engine.json").is_file().then(|| (step, e.path()))
        })
        .max_by_key(|(step, _)| *step)
        .map(|(_, path)| path)
}

/// Writes a checkpoint atomically: files go into `<final>.tmp-<pid>`, which is renamed to `final`.
pub(crate) fn write(
    final_dir: &Path,
    engine: &EngineState,
    policy: &impl Serialize,
    logs: &[(&str, &Path)],
) -> Result<(), EngineError> {
    let parent = final_dir.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(|e| EngineError::io(parent, e))?;
    let name = final_dir.file_name().and_then(|n| n.to_str()).unwrap_or("checkpoint");
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(|e| EngineError::io(&tmp, e))?;
    }
    fs::create_dir_all(&tmp).map_err(|e| EngineError::io(&tmp, e))?;
    write_json(&tmp.join("engine.json"), engine)?;
    write_json(&tmp.join("policy.json"), policy)?;
    for (file, source) in logs {
        let dest = tmp.join(file);
        fs::copy(source, &dest).map_err(|e| EngineError::io(source, e))?;
    }
    if final_dir.exists() {
        fs::remove_dir_all(final_dir).map_err(|e| EngineError::io(final_dir, e))?;
    }
    fs::rename(&tmp, final_dir).map_err(|e| EngineError::io(final_dir, e))
}

/// Reads `engine.json` and checks its version.
pub(crate) fn read_engine(dir: &Path) -> Result<EngineState, EngineError> {
    let state: EngineState = read_json(&dir.join("engine.json"))?;
    if state.version != VERSION {
        return Err(EngineError::Checkpoint {
            path: dir.to_owned(),
            reason: format!("format version {} is not the supported {VERSION}", state.version),
        });
    }
    Ok(state)
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EngineError> {
    let text = fs::read(path).map_err(|e| EngineError::io(path, e))?;
    serde_json::from_slice(&text).map_err(|source| EngineError::Json { path: path.to_owned(), source })
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), EngineError> {
    let text = serde_json::to_vec(value).map_err(|source| EngineError::Json { path: path.to_owned(), source })?;
    fs::write(path, text).map_err(|e| EngineError::io(path, e))
}
