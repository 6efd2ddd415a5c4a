//! Checkpoints: everything needed to continue a run bit for bit.
//!
//! A checkpoint is a directory `checkpoints/step-NNNNNN/` under the run's
//! output directory holding `engine.json` (step, data cursor, seed, config,
//! reward fingerprint, how much of the rollout log belongs to it),
//! `policy.json` ([`Policy::state`](rewardlab_models::agent::Policy::state),
//! optimiser included), the binary part `policy.safetensors` when the state has
//! large arrays ([`PolicyState::take_tensors`]: a Qwen3 policy's adapters and
//! AdamW moments, which as JSON bit patterns would be ~4 GB at 14B, r = 32) and
//! copies of `metrics.csv` and `timings.csv` as they were. It is written into a temporary sibling and renamed into place, so a
//! crash never leaves a half-written checkpoint under a final name.
//!
//! The engine has no RNG state to save: every random choice is seeded from
//! (seed, step, prompt slot, rollout) (`engine::seed`), so the seed, the step
//! and the data cursor determine the rest of the run.

use std::fs;
use std::path::{Path, PathBuf};

use rewardlab_models::agent::PolicyState;
use rewardlab_models::state_tensors::{read_state_tensors, write_state_tensors};
use rewardlab_protocol::error_chain;
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
    /// Consecutive steps each `alert` had held (absent in checkpoints written
    /// before alerts existed: none had).
    #[serde(default)]
    pub alert_streaks: Vec<u32>,
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

/// Removes every checkpoint under `out_dir/checkpoints` but the latest complete
/// one, and the temporary directories of checkpoints a killed process was
/// writing (another process id than this one's). Returns how many directories
/// went. A run resumes only from its latest checkpoint, so the older ones are
/// dead weight; the latest is kept whole because it was renamed into place.
pub(crate) fn prune_checkpoints(out_dir: &Path) -> Result<usize, EngineError> {
    let root = out_dir.join("checkpoints");
    let latest = latest_checkpoint(out_dir);
    let entries = match fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(EngineError::io(&root, e)),
    };
    let own_tmp = format!(".tmp-{}", std::process::id());
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|e| EngineError::io(&root, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let old_checkpoint = name.starts_with("step-") && latest.as_deref() != Some(path.as_path());
        let stale_tmp = name.starts_with('.') && name.contains(".tmp-") && !name.ends_with(&own_tmp);
        if (old_checkpoint || stale_tmp) && path.is_dir() {
            fs::remove_dir_all(&path).map_err(|e| EngineError::io(&path, e))?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The policy state's JSON part inside a checkpoint.
pub const POLICY_JSON: &str = "policy.json";
/// The policy state's binary part inside a checkpoint (absent when it has none).
pub const POLICY_TENSORS: &str = "policy.safetensors";

/// Writes a checkpoint atomically: files go into `<final>.tmp-<pid>`, which is renamed to `final`.
pub(crate) fn write(
    final_dir: &Path,
    engine: &EngineState,
    mut policy: impl PolicyState,
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
    let tensors = policy.take_tensors();
    if !tensors.is_empty() {
        let path = tmp.join(POLICY_TENSORS);
        write_state_tensors(&path, &tensors)
            .map_err(|e| EngineError::Checkpoint { path: path.clone(), reason: error_chain(&e) })?;
    }
    write_json(&tmp.join(POLICY_JSON), &policy)?;
    for (file, source) in logs {
        let dest = tmp.join(file);
        fs::copy(source, &dest).map_err(|e| EngineError::io(source, e))?;
    }
    if final_dir.exists() {
        fs::remove_dir_all(final_dir).map_err(|e| EngineError::io(final_dir, e))?;
    }
    fs::rename(&tmp, final_dir).map_err(|e| EngineError::io(final_dir, e))
}

/// The engine settings a checkpoint was written under (its `engine.json`).
pub fn checkpoint_config(dir: &Path) -> Result<EngineConfig, EngineError> {
    Ok(read_engine(dir)?.config)
}

/// The policy state a checkpoint holds (its `policy.json` and, when present, the binary
/// part `policy.safetensors`), as the policy's
/// [`Policy::State`](rewardlab_models::agent::Policy::State) type reads it.
pub fn read_policy_state<T: PolicyState>(dir: &Path) -> Result<T, EngineError> {
    let mut state: T = read_json(&dir.join(POLICY_JSON))?;
    let path = dir.join(POLICY_TENSORS);
    if path.is_file() {
        let tensors = read_state_tensors(&path)
            .map_err(|e| EngineError::Checkpoint { path: path.clone(), reason: error_chain(&e) })?;
        state.put_tensors(tensors).map_err(|reason| EngineError::Checkpoint { path, reason })?;
    }
    Ok(state)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_keeps_the_latest_complete_checkpoint_and_live_temporaries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("checkpoints");
        let complete = |name: &str| {
            fs::create_dir_all(root.join(name)).expect("mkdir");
            fs::write(root.join(name).join("engine.json"), "{}").expect("write");
        };
        complete("step-000002");
        complete("step-000004");
        // Newer but incomplete (no engine.json): not a checkpoint, not the latest.
        fs::create_dir_all(root.join("step-000006")).expect("mkdir");
        let dead = root.join(".step-000006.tmp-4000000001");
        let live = root.join(format!(".step-000006.tmp-{}", std::process::id()));
        fs::create_dir_all(&dead).expect("mkdir");
        fs::create_dir_all(&live).expect("mkdir");
        assert_eq!(prune_checkpoints(dir.path()).expect("prune"), 3);
        let mut left: Vec<String> = fs::read_dir(&root)
            .expect("list")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        left.sort();
        assert_eq!(left, [format!(".step-000006.tmp-{}", std::process::id()), "step-000004".to_string()]);
        assert_eq!(latest_checkpoint(dir.path()), Some(root.join("step-000004")));
        // Nothing to prune, and no checkpoints directory at all, are both fine.
        assert_eq!(prune_checkpoints(dir.path()).expect("prune"), 0);
        assert_eq!(prune_checkpoints(&dir.path().join("absent")).expect("prune"), 0);
    }
}
