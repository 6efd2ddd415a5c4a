//! The rollout record of the contract's JSONL (one rollout a line) and its loader.
//!
//! Every key of the contract is optional in the record, because a data source
//! may log only some of them; a feature that needs an absent key is an error
//! at feature time ([`crate::features::FeatureError::Unavailable`]), never a
//! silent zero. A key that is present but empty (`"functions": []`) is an
//! empty set and follows the metrics' empty-set rules.
//!
//! Strictness: `predicted` and `target` reject unknown keys (a typo such as
//! `"line_range"` would otherwise become "absent"); the top level and tool calls
//! accept extra keys (loggers add ids, rewards, outputs). Line ranges are
//! parsed when the record is read, so a malformed range is a bad record.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use rewardlab_protocol::{Entity, ToolCall, ToolResult};

use crate::metrics::LineRange;

/// One rollout: a group (prompt) id, the prediction, the target, the tool
/// calls per turn, and the generation's bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    /// The group (prompt) the rollout belongs to; never empty once loaded.
    pub group: String,
    /// What the answer named; absent when not logged (or when an invalid answer predicted nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Selection>,
    /// The ground truth the prediction is scored against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Selection>,
    /// The tool calls of each turn; the answer turn has none (`[]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Vec<Vec<LoggedCall>>>,
    /// Tokens the policy generated, tool responses excluded (the `len` feature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Whether the final answer parsed (the `valid` feature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// Whether the rollout ran out of turns or tokens without an answer (the `truncated` feature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// Files, line ranges and functions: the shape of both `predicted` and `target`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// Repository-relative file paths, normalised on load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    /// `path:start-end` ranges, 1-based and inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_ranges: Option<Vec<LineRange>>,
    /// `path::Class.method` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<String>>,
}

/// One tool call as a rollout record logs it: the tool's name, its arguments and the entities
/// its result named.
///
/// Looser than [`ToolCall`] on purpose: a record may come from another logger with other tools,
/// and a malformed call a policy made is logged as tool `invalid` with no arguments
/// ([`LoggedCall::invalid`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoggedCall {
    /// The tool's name (`grep`, `glob`, `read`, or whatever the logger's tools are).
    pub tool: String,
    /// The call's arguments as JSON (absent or `null` when none).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub args: serde_json::Value,
    /// A path and line for grep and read hits, a path for glob (see [`crate::efficiency::entity`]);
    /// `path:line` and `path` on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entities: Option<Vec<Entity>>,
}

impl LoggedCall {
    /// The record of a call the sandbox ran, with the entities its result showed.
    pub fn of(call: &ToolCall, result: &ToolResult) -> LoggedCall {
        LoggedCall {
            tool: call.name().to_owned(),
            args: call.to_json().get("args").cloned().unwrap_or_default(),
            entities: Some(result.entities.clone()),
        }
    }

    /// The record of a malformed call: tool `invalid`, no arguments, no entities.
    pub fn invalid() -> LoggedCall {
        LoggedCall { tool: "invalid".to_owned(), args: serde_json::Value::Null, entities: Some(Vec::new()) }
    }
}

/// A record of a JSONL file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct RecordError {
    /// 1-based line number in the file.
    pub line: usize,
    /// Why the line is not a good record.
    pub message: String,
}

/// The records of a JSONL file and the errors of the lines that failed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loaded<T> {
    /// Good records with their 1-based line numbers, in file order.
    pub records: Vec<(usize, T)>,
    /// One error per bad line, in file order; empty when every line parsed.
    pub errors: Vec<RecordError>,
}

/// Reading the file itself failed (as opposed to a bad record).
#[derive(Debug, thiserror::Error)]
#[error("reading {what} at line {line}")]
pub struct ReadError {
    /// What was being read (`rollouts`, `trajectories`, ...), for the message.
    pub what: String,
    /// The 1-based line being read when reading failed.
    pub line: usize,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

impl Selection {
    /// Normalises file paths (`./a.py` → `a.py`) where they can be; a path that
    /// cannot be normalised is kept and simply matches nothing.
    fn normalize(&mut self) {
        if let Some(files) = &mut self.files {
            for f in files.iter_mut() {
                *f = crate::paths::normalize_lossy(f);
            }
        }
        if let Some(functions) = &mut self.functions {
            for f in functions.iter_mut() {
                *f = normalize_function(f);
            }
        }
    }
}

/// Normalises the path part of `path::Qualified.name`.
pub fn normalize_function(name: &str) -> String {
    match name.split_once("::") {
        Some((path, rest)) => format!("{}::{rest}", crate::paths::normalize_lossy(path)),
        None => name.to_string(),
    }
}

impl Rollout {
    /// Parses one JSONL line, normalises its paths and checks what serde cannot:
    /// a non-empty group and at least one turn (the answer turn) when `turns` is given.
    pub fn from_json_line(text: &str) -> Result<Rollout, String> {
        let mut r: Rollout = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if r.group.is_empty() {
            return Err("`group` is empty".to_string());
        }
        if let Some(turns) = &r.turns
            && turns.is_empty()
        {
            return Err("`turns` is empty; it must hold at least the answer turn (`[]`)".to_string());
        }
        for sel in [&mut r.predicted, &mut r.target].into_iter().flatten() {
            sel.normalize();
        }
        Ok(r)
    }
}

/// Reads rollout JSONL: every non-blank line is one rollout. Bad lines are
/// collected as `line N: ...` errors and reading continues, so a user sees all of them at once.
pub fn load_rollouts(reader: impl BufRead) -> Result<Loaded<Rollout>, ReadError> {
    load_jsonl(reader, "rollouts", Rollout::from_json_line)
}

/// Reads any JSONL file line by line with a record parser.
pub fn load_jsonl<T>(
    reader: impl BufRead,
    what: &str,
    mut parse: impl FnMut(&str) -> Result<T, String>,
) -> Result<Loaded<T>, ReadError> {
    let mut out = Loaded { records: Vec::new(), errors: Vec::new() };
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let text = line.map_err(|source| ReadError { what: what.to_string(), line: line_no, source })?;
        if text.trim().is_empty() {
            continue;
        }
        match parse(&text) {
            Ok(r) => out.records.push((line_no, r)),
            Err(message) => out.errors.push(RecordError { line: line_no, message }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTRACT_EXAMPLE: &str = r#"{"group": "psf__requests-1142",
 "predicted": {"files": ["requests/models.py"], "line_ranges": ["requests/models.py:386-399"]},
 "target":    {"files": ["requests/models.py"], "line_ranges": ["requests/models.py:388-397"],
               "functions": ["requests/models.py::PreparedRequest.prepare_content_length"]},
 "turns": [
   [{"tool": "grep", "args": {"pattern": "content-length"}, "entities": ["requests/models.py:390"]}],
   [{"tool": "read", "args": {"path": "requests/models.py", "start": 380, "end": 400}, "entities": ["requests/models.py:380", "..."]}]
 ],
 "completion_tokens": 312, "valid": true, "truncated": false}"#;

    #[test]
    fn reads_the_contract_example() {
        let one_line = CONTRACT_EXAMPLE.replace('\n', " ");
        let r = Rollout::from_json_line(&one_line).expect("contract example parses");
        assert_eq!(r.group, "psf__requests-1142");
        let target = r.target.as_ref().expect("target");
        assert_eq!(target.line_ranges.as_deref(), Some(&[LineRange::new("requests/models.py", 388, 397)][..]));
        assert_eq!(r.turns.as_ref().map(Vec::len), Some(2));
        assert_eq!(r.completion_tokens, Some(312));
        assert_eq!(r.predicted.as_ref().and_then(|p| p.functions.as_ref()), None);
    }

    #[test]
    fn bad_lines_are_reported_with_their_numbers() {
        let text = [
            r#"{"group": "a", "turns": [[]]}"#,
            "",
            r#"{"group": "b", "predicted": {"files": ["x"], "line_range": []}}"#,
            r#"{"group": "c", "target": {"line_ranges": ["x.py:0-3"]}}"#,
            r#"{"group": "d", "turns": []}"#,
            "not json",
        ]
        .join("\n");
        let loaded = load_rollouts(text.as_bytes()).expect("in-memory read");
        assert_eq!(loaded.records.len(), 1);
        assert_eq!(loaded.records[0].0, 1);
        let lines: Vec<usize> = loaded.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![3, 4, 5, 6]);
        assert!(loaded.errors[0].to_string().starts_with("line 3: unknown field `line_range`"), "{}", loaded.errors[0]);
        assert!(loaded.errors[1].message.contains("1-based"), "{}", loaded.errors[1]);
    }

    #[test]
    fn paths_are_normalised_on_load() {
        let r = Rollout::from_json_line(
            r#"{"group": "g", "predicted": {"files": ["./a/b.py"], "functions": ["./a/b.py::f"]}}"#,
        )
        .expect("parses");
        let p = r.predicted.expect("predicted");
        assert_eq!(p.files, Some(vec!["a/b.py".to_string()]));
        assert_eq!(p.functions, Some(vec!["a/b.py::f".to_string()]));
    }
}
