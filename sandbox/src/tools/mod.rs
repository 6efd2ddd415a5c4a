//! The three tools, their calls and their results.
//!
//! A call is `{"tool": "grep"|"glob"|"read", "args": {...}}`. Calls from a policy are untrusted:
//! [`ToolCall::from_json`] checks them field by field and answers every problem with a
//! [`ToolResult`] the policy can read, never with an error that would stop the rollout.

mod filter;
mod glob;
mod grep;
mod output;
mod read;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Limits,
    deadline::Deadline,
    tree::{AccessError, Tree},
};

/// One tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tool", content = "args", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolCall {
    /// Regex search over the tree's files.
    Grep(GrepArgs),
    /// Tracked paths matching a shell glob.
    Glob(GlobArgs),
    /// Numbered lines of one file.
    Read(ReadArgs),
}

/// Arguments of `grep`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// A regular expression (Rust `regex` syntax), matched line by line.
    pub pattern: String,
    /// Glob filter on paths (see the crate docs): `*.py`, `src/**/*.py`, `src/pkg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Case-sensitive unless `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_sensitive: Option<bool>,
}

/// Arguments of `glob`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// A shell glob relative to the root: `*` never crosses `/`, `**` does.
    pub pattern: String,
}

/// Arguments of `read`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file, relative to the root.
    pub path: String,
    /// First line shown, 1-based; defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// Last line shown, inclusive; defaults to the end of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
}

/// What a call returned: the text the policy sees, the entities it showed, and how it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// At most [`Limits::max_output_chars`] characters.
    pub output: String,
    /// `path:line` for each grep match or read line shown, `path` for each glob path shown.
    pub entities: Vec<String>,
    /// How the call went.
    pub status: Status,
}

/// How a call went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// Complete output.
    Ok,
    /// Output cut at the character limit; the last line says how much and how to narrow.
    Truncated,
    /// The call ran out of time; what it found so far is shown, then a note.
    Timeout,
    /// The call did nothing useful; the output says why.
    Error(ErrorKind),
}

/// Why a call failed. Each is a message to the policy, not a failure of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// Malformed call: not an object, missing, unknown or mistyped arguments, bad line range.
    InvalidCall,
    /// A tool name other than grep, glob and read.
    UnknownTool,
    /// More calls in one turn than [`Limits::max_calls_per_turn`].
    CallLimit,
    /// A regex or glob longer than [`Limits::max_pattern_len`].
    PatternTooLong,
    /// A regex or glob that does not compile.
    InvalidPattern,
    /// A regex over the compiled-size, DFA or nesting limits.
    PatternTooComplex,
    /// A path or pattern that would leave the tree (or loops).
    Refused,
    /// No tracked file at that path.
    NotFound,
    /// The path is a directory.
    IsDirectory,
    /// The file contains NUL bytes.
    Binary,
    /// The file is over the size cap.
    TooLarge,
    /// The content is missing from the object store (an incomplete clone).
    MissingObject,
    /// Reading a worktree file failed.
    Io,
    /// The sandbox itself failed (a panicked worker); the run goes on.
    Internal,
}

impl ToolCall {
    /// The tool's name as it appears in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::Grep(_) => "grep",
            ToolCall::Glob(_) => "glob",
            ToolCall::Read(_) => "read",
        }
    }

    /// Checks an untrusted call; every problem becomes an [`ErrorKind::InvalidCall`] or
    /// [`ErrorKind::UnknownTool`] result naming the tool, the argument and what was expected.
    pub fn from_json(value: &Value) -> Result<ToolCall, ToolResult> {
        let invalid = |message: String| ToolResult::error(ErrorKind::InvalidCall, message);
        let Some(object) = value.as_object() else {
            return Err(invalid(format!(
                "a tool call is a JSON object {{\"tool\": ..., \"args\": {{...}}}}, not {}",
                type_name(value)
            )));
        };
        if let Some(key) = object.keys().find(|k| *k != "tool" && *k != "args") {
            return Err(invalid(format!("unknown key {key:?} in a tool call; a call has `tool` and `args`")));
        }
        let tool = match object.get("tool") {
            Some(Value::String(tool)) => tool.as_str(),
            Some(other) => {
                return Err(invalid(format!("`tool` must be a string, not {}", type_name(other))));
            }
            None => {
                return Err(invalid("a tool call needs `tool`: one of grep, glob, read".to_owned()));
            }
        };
        let empty = Map::new();
        let args = match object.get("args") {
            Some(Value::Object(args)) => args,
            None | Some(Value::Null) => &empty,
            Some(other) => {
                return Err(invalid(format!("{tool}: `args` must be an object, not {}", type_name(other))));
            }
        };
        match tool {
            "grep" => {
                let mut args = Args::new("grep", args, &["pattern", "path", "case_sensitive"])?;
                Ok(ToolCall::Grep(GrepArgs {
                    pattern: args.string("pattern")?.ok_or_else(|| args.missing("pattern", "a string"))?,
                    path: args.string("path")?,
                    case_sensitive: args.boolean("case_sensitive")?,
                }))
            }
            "glob" => {
                let mut args = Args::new("glob", args, &["pattern"])?;
                Ok(ToolCall::Glob(GlobArgs {
                    pattern: args.string("pattern")?.ok_or_else(|| args.missing("pattern", "a string"))?,
                }))
            }
            "read" => {
                let mut args = Args::new("read", args, &["path", "start", "end"])?;
                Ok(ToolCall::Read(ReadArgs {
                    path: args.string("path")?.ok_or_else(|| args.missing("path", "a string"))?,
                    start: args.line("start")?,
                    end: args.line("end")?,
                }))
            }
            other => Err(ToolResult::error(
                ErrorKind::UnknownTool,
                format!("unknown tool {other:?}; the tools are grep, glob and read"),
            )),
        }
    }

    /// Like [`ToolCall::from_json`] for JSON text.
    pub fn from_json_str(text: &str) -> Result<ToolCall, ToolResult> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| ToolResult::error(ErrorKind::InvalidCall, format!("the tool call is not valid JSON: {e}")))?;
        Self::from_json(&value)
    }

    /// The call as JSON, in the same shape [`ToolCall::from_json`] accepts.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("tool calls are plain data and always serialise")
    }

    /// The time budget of this call under `limits`.
    pub fn timeout(&self, limits: &Limits) -> std::time::Duration {
        match self {
            ToolCall::Grep(_) => limits.grep_timeout,
            ToolCall::Glob(_) => limits.glob_timeout,
            ToolCall::Read(_) => limits.read_timeout,
        }
    }

    /// Runs the call on `tree` on this thread, its deadline starting now.
    pub fn run(&self, tree: &Tree, limits: &Limits) -> ToolResult {
        let deadline = Deadline::after(self.timeout(limits));
        match self {
            ToolCall::Grep(args) => grep::run(tree, args, limits, deadline),
            ToolCall::Glob(args) => glob::run(tree, args, limits, deadline),
            ToolCall::Read(args) => read::run(tree, args, limits, deadline),
        }
    }
}

impl ToolResult {
    /// An error result with no entities.
    pub fn error(kind: ErrorKind, message: String) -> Self {
        ToolResult { output: message, entities: Vec::new(), status: Status::Error(kind) }
    }

    pub(crate) fn access_error(tool: &str, error: &AccessError) -> Self {
        let kind = match error {
            AccessError::Refused { .. } => ErrorKind::Refused,
            AccessError::NotFound { .. } => ErrorKind::NotFound,
            AccessError::IsDirectory { .. } => ErrorKind::IsDirectory,
            AccessError::TooLarge { .. } => ErrorKind::TooLarge,
            AccessError::MissingObject { .. } => ErrorKind::MissingObject,
            AccessError::Io { .. } => ErrorKind::Io,
        };
        Self::error(kind, format!("{tool}: {error}"))
    }

    /// Whether the call failed (as opposed to completing, being cut or timing out).
    pub fn is_error(&self) -> bool {
        matches!(self.status, Status::Error(_))
    }
}

/// Field-by-field checking of one call's `args`.
struct Args<'a> {
    tool: &'static str,
    args: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(tool: &'static str, args: &'a Map<String, Value>, known: &[&str]) -> Result<Self, ToolResult> {
        if let Some(unknown) = args.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ToolResult::error(
                ErrorKind::InvalidCall,
                format!("{tool}: unknown argument {unknown:?}; {tool} takes {}", known.join(", ")),
            ));
        }
        Ok(Args { tool, args })
    }

    fn missing(&self, name: &str, expected: &str) -> ToolResult {
        ToolResult::error(
            ErrorKind::InvalidCall,
            format!("{}: missing required argument `{name}` ({expected})", self.tool),
        )
    }

    fn mistyped(&self, name: &str, expected: &str, got: &Value) -> ToolResult {
        ToolResult::error(
            ErrorKind::InvalidCall,
            format!("{}: argument `{name}` must be {expected}, not {}", self.tool, type_name(got)),
        )
    }

    /// `null` counts as absent, so `{"path": null}` means "no filter".
    fn get(&mut self, name: &str) -> Option<&'a Value> {
        self.args.get(name).filter(|v| !v.is_null())
    }

    fn string(&mut self, name: &str) -> Result<Option<String>, ToolResult> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.mistyped(name, "a string", other)),
        }
    }

    fn boolean(&mut self, name: &str) -> Result<Option<bool>, ToolResult> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.mistyped(name, "true or false", other)),
        }
    }

    fn line(&mut self, name: &str) -> Result<Option<u64>, ToolResult> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Ok(Some(n)),
                _ => Err(self.mistyped(name, "a line number (an integer, 1 or more)", v)),
            },
        }
    }
}

fn type_name(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) if s.chars().count() <= 40 => format!("a string ({s:?})"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rejected(value: Value) -> ToolResult {
        match ToolCall::from_json(&value) {
            Ok(call) => panic!("accepted {value}: {call:?}"),
            Err(result) => result,
        }
    }

    #[test]
    fn valid_calls_parse_and_round_trip() {
        let call = ToolCall::from_json(
            &json!({"tool": "grep", "args": {"pattern": "x", "path": "*.py", "case_sensitive": false}}),
        )
        .unwrap_or_else(|r| panic!("{}", r.output));
        assert_eq!(
            call,
            ToolCall::Grep(GrepArgs { pattern: "x".into(), path: Some("*.py".into()), case_sensitive: Some(false) })
        );
        assert_eq!(ToolCall::from_json(&call.to_json()).ok(), Some(call));
        let read = ToolCall::from_json(&json!({"tool": "read", "args": {"path": "a.py", "start": 3, "end": null}}))
            .unwrap_or_else(|r| panic!("{}", r.output));
        assert_eq!(read, ToolCall::Read(ReadArgs { path: "a.py".into(), start: Some(3), end: None }));
        let serde_way: ToolCall = serde_json::from_value(read.to_json()).expect("serde agrees");
        assert_eq!(serde_way, read);
    }

    #[test]
    fn invalid_calls_become_tool_responses() {
        let unknown = rejected(json!({"tool": "rm", "args": {"path": "/"}}));
        assert_eq!(unknown.status, Status::Error(ErrorKind::UnknownTool));
        assert!(unknown.output.contains("grep, glob and read"), "{}", unknown.output);

        let missing = rejected(json!({"tool": "grep", "args": {}}));
        assert_eq!(missing.status, Status::Error(ErrorKind::InvalidCall));
        assert!(missing.output.contains("missing required argument `pattern`"), "{}", missing.output);

        let mistyped = rejected(json!({"tool": "read", "args": {"path": "a", "start": "ten"}}));
        assert!(mistyped.output.contains("`start` must be a line number"), "{}", mistyped.output);
        let zero = rejected(json!({"tool": "read", "args": {"path": "a", "start": 0}}));
        assert!(zero.output.contains("`start`"), "{}", zero.output);
        let case = rejected(json!({"tool": "grep", "args": {"pattern": "a", "case_sensitive": "no"}}));
        assert!(case.output.contains("must be true or false"), "{}", case.output);
        let extra = rejected(json!({"tool": "glob", "args": {"pattern": "*", "recursive": true}}));
        assert!(extra.output.contains("unknown argument \"recursive\""), "{}", extra.output);
        assert!(rejected(json!(["grep"])).output.contains("JSON object"));
        assert!(rejected(json!({"tool": 3})).output.contains("`tool` must be a string"));
        assert!(rejected(json!({"tool": "glob", "args": "*"})).output.contains("`args` must be an object"));
        let bad_json = ToolCall::from_json_str("{\"tool\": ").err().map(|r| r.output).unwrap_or_default();
        assert!(bad_json.contains("not valid JSON"), "{bad_json}");
        for result in [unknown, missing, mistyped] {
            assert!(result.entities.is_empty());
        }
    }
}
