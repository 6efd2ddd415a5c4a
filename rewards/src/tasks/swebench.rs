//! SWE-bench-style JSONL: one instance a line with `instance_id`, `repo`,
//! `base_commit`, `problem_statement`, `patch` and optionally `expected_spans`.
//!
//! Targets: files and pre-image line ranges come from the gold patch
//! ([`crate::diff`]). `expected_spans` maps a file to span names as SWE-bench
//! Lite's localisation labels write them: `Class.method`, `function`, and a
//! few non-function spans (`imports`, `imports:5`, `impl:105`, `Class:32`).
//! Each becomes the function-level target `path::span`, verbatim, so a policy
//! is scored against exactly the published labels. A file with an empty span
//! list contributes no function target. An instance without `expected_spans`
//! has `functions: None` (function-level features are then unavailable);
//! `"expected_spans": {}` gives an empty function set.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Deserialize;

use super::{RepoRef, Targets, Task};
use crate::rollout::{Loaded, ReadError, load_jsonl};

/// One line of a SWE-bench-style file (other keys are ignored).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct SwebenchInstance {
    /// The instance's id, such as `psf__requests-2317`; it becomes the task id.
    pub instance_id: String,
    /// The repository's name, such as `psf/requests`.
    pub repo: String,
    /// The commit the gold patch applies to (full hex id).
    pub base_commit: String,
    /// The issue text, shown to the policy as the prompt.
    pub problem_statement: String,
    /// The gold patch, a unified diff; its files and pre-image lines are the targets.
    pub patch: String,
    /// Span names per file (SWE-bench Lite's localisation labels); `None` when the key is absent.
    #[serde(default)]
    pub expected_spans: Option<BTreeMap<String, Vec<String>>>,
}

impl SwebenchInstance {
    /// The task of this instance. Fails when the patch does not parse or names no file.
    pub fn to_task(&self) -> Result<Task, String> {
        let targets = crate::diff::patch_targets(&self.patch).map_err(|e| format!("{}: {e}", self.instance_id))?;
        if targets.files.is_empty() {
            return Err(format!("{}: the patch changes no file", self.instance_id));
        }
        let functions = self.expected_spans.as_ref().map(|spans| {
            spans
                .iter()
                .flat_map(|(file, names)| {
                    let file = crate::paths::normalize_lossy(file);
                    names.iter().map(move |n| format!("{file}::{n}"))
                })
                .collect()
        });
        Ok(Task {
            id: self.instance_id.clone(),
            repo: RepoRef::Name(self.repo.clone()),
            base_commit: self.base_commit.clone(),
            prompt: self.problem_statement.clone(),
            targets: Targets { files: targets.files, line_ranges: targets.line_ranges, functions },
            auxiliary: Vec::new(),
        })
    }
}

/// Reads SWE-bench-style JSONL into tasks; bad lines become `line N: ...` errors.
pub fn load_swebench(reader: impl BufRead) -> Result<Loaded<Task>, ReadError> {
    load_jsonl(reader, "SWE-bench instances", |text| {
        let instance: SwebenchInstance = serde_json::from_str(text).map_err(|e| e.to_string())?;
        instance.to_task()
    })
}

/// Reads SWE-bench-style JSONL as raw instances (CATM needs the patch itself).
pub fn load_instances(reader: impl BufRead) -> Result<Loaded<SwebenchInstance>, ReadError> {
    load_jsonl(reader, "SWE-bench instances", |text| serde_json::from_str(text).map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_to_task() {
        let line = r#"{"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc", "problem_statement": "It breaks.",
            "patch": "diff --git a/r/m.py b/r/m.py\n--- a/r/m.py\n+++ b/r/m.py\n@@ -5,3 +5,3 @@\n a\n-b\n+c\n d\n",
            "expected_spans": {"r/m.py": ["A.f", "imports"], "r/n.py": []}}"#;
        let loaded = load_swebench(line.replace('\n', " ").as_bytes()).expect("in-memory read");
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let task = &loaded.records[0].1;
        assert_eq!(task.repo, RepoRef::Name("o/r".into()));
        assert_eq!(task.targets.files, vec!["r/m.py"]);
        assert_eq!(task.targets.line_ranges, vec![crate::metrics::LineRange::new("r/m.py", 6, 6)]);
        assert_eq!(task.targets.functions, Some(vec!["r/m.py::A.f".to_string(), "r/m.py::imports".to_string()]));
    }
}
