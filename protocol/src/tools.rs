//! The three tools' calls and their results, as every crate names them.
//!
//! A call is `{"tool": "grep"|"glob"|"read", "args": {...}}`. Calls from a policy are untrusted:
//! [`ToolCall::from_json`] checks them field by field and answers every problem with a
//! [`ToolResult`] the policy can read, never with an error that would stop the rollout. Running a
//! call is the sandbox's business (`rewardlab_sandbox::RunTool`); this module only names things.
//!
//! A result's entities are typed ([`Entity`]): a path (a glob hit) or a path and a line (a grep
//! match, a read line). On the wire, in tool results and rollout records alike, an entity is the
//! string `path` or `path:line`, so records written before the type existed read as they did.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Tool calls honoured per turn (seed 000's limit): the sandbox's default, the Qwen3 template's
/// cut-off, the proxy policy's largest count and the engine's upper bound (the reward schema
/// declares `c = C / T` in [0, 8]).
pub const MAX_CALLS_PER_TURN: usize = 8;

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
    /// The text the policy reads (the sandbox keeps it within its output budget).
    pub output: String,
    /// A path and line for each grep match or read line shown, a path for each glob path shown.
    pub entities: Vec<Entity>,
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
    /// More calls in one turn than the turn allows ([`MAX_CALLS_PER_TURN`] by default).
    CallLimit,
    /// A regex or glob longer than the sandbox's pattern-length limit.
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

/// What one line of a tool's output showed: a file, or a line of a file.
///
/// Serialised as `path` or `path:line`. Parsing that text back is [`Entity::parse`]: it is a
/// line when the text after the last `:` is a line number in canonical form (decimal digits, no
/// sign, no leading zero) and the path before it is not empty, and a path otherwise. So every
/// string reads back as itself, and two strings are equal exactly when their entities are.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entity {
    /// A file (a glob hit).
    Path(String),
    /// A line of a file (a grep match or a line shown by read), 1-based.
    Line {
        /// The file.
        path: String,
        /// The line number.
        line: u64,
    },
}

impl Entity {
    /// A line entity.
    pub fn line(path: impl Into<String>, line: u64) -> Entity {
        Entity::Line { path: path.into(), line }
    }

    /// A path entity.
    pub fn path_only(path: impl Into<String>) -> Entity {
        Entity::Path(path.into())
    }

    /// The file this entity names.
    pub fn path(&self) -> &str {
        match self {
            Entity::Path(path) | Entity::Line { path, .. } => path,
        }
    }

    /// The line, for a line entity.
    pub fn line_number(&self) -> Option<u64> {
        match self {
            Entity::Path(_) => None,
            Entity::Line { line, .. } => Some(*line),
        }
    }

    /// Reads the wire form `path` or `path:line` (see the type's docs for the rule).
    pub fn parse(text: &str) -> Entity {
        let line = text.rsplit_once(':').and_then(|(path, digits)| {
            let canonical = !path.is_empty()
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'));
            canonical.then(|| digits.parse::<u64>().ok().map(|line| (path, line))).flatten()
        });
        match line {
            Some((path, line)) => Entity::line(path, line),
            None => Entity::Path(text.to_owned()),
        }
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entity::Path(path) => f.write_str(path),
            Entity::Line { path, line } => write!(f, "{path}:{line}"),
        }
    }
}

impl From<&str> for Entity {
    fn from(text: &str) -> Entity {
        Entity::parse(text)
    }
}

/// Compares with the wire form, so `entity == "a.py:3"` reads as the text it stands for.
impl PartialEq<str> for Entity {
    fn eq(&self, other: &str) -> bool {
        match self {
            Entity::Path(path) => path == other,
            Entity::Line { path, line } => other
                .strip_prefix(path.as_str())
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|digits| digits == line.to_string()),
        }
    }
}

impl PartialEq<&str> for Entity {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl PartialEq<String> for Entity {
    fn eq(&self, other: &String) -> bool {
        *self == *other.as_str()
    }
}

impl Serialize for Entity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Entity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entity, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Entity::parse(&text))
    }
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
}

impl ToolResult {
    /// An error result with no entities.
    pub fn error(kind: ErrorKind, message: String) -> Self {
        ToolResult { output: message, entities: Vec::new(), status: Status::Error(kind) }
    }

    /// The answer to call `index` (0-based) of a turn that allows only `allowed` calls: it is
    /// not run, and the policy is told why.
    pub fn call_limit(index: usize, allowed: usize) -> Self {
        Self::error(
            ErrorKind::CallLimit,
            format!("call {} of this turn was not run: at most {allowed} calls per turn", index + 1),
        )
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

    #[test]
    fn entities_keep_their_wire_form() {
        for text in ["a.py:3", "a.py", "dir/b c.py:0", "c:/x.py:12", "a.py:07", "a.py:+7", ":5", "a.py:", "x:y"] {
            let entity = Entity::parse(text);
            assert_eq!(entity.to_string(), text);
            assert_eq!(entity, text);
            let json = serde_json::to_string(&entity).expect("serialises");
            assert_eq!(json, serde_json::to_string(text).expect("a string"));
            assert_eq!(serde_json::from_str::<Entity>(&json).expect("reads back"), entity);
        }
        assert_eq!(Entity::parse("a/b.py:12"), Entity::line("a/b.py", 12));
        assert_eq!(Entity::parse("c:/x.py:12").path(), "c:/x.py");
        assert_eq!(Entity::parse("a.py:07"), Entity::path_only("a.py:07"));
        assert_eq!(Entity::parse("a.py").line_number(), None);
        assert_ne!(Entity::line("a.py", 7), "a.py:07");
        assert_ne!(Entity::line("a.py", 7), "a.py:+7");
        assert_ne!(Entity::line("a.py", 7), "b.py:7");
        assert_ne!(Entity::path_only("a.py"), "a.py:1");
    }

    #[test]
    fn results_serialise_entities_as_strings() {
        let result = ToolResult {
            output: "a.py:3:x".into(),
            entities: vec![Entity::line("a.py", 3), Entity::path_only("b.py")],
            status: Status::Ok,
        };
        let json = serde_json::to_value(&result).expect("serialises");
        assert_eq!(json, json!({"output": "a.py:3:x", "entities": ["a.py:3", "b.py"], "status": "ok"}));
        assert_eq!(serde_json::from_value::<ToolResult>(json).expect("reads back"), result);
        let limit = ToolResult::call_limit(8, 8);
        assert_eq!(limit.status, Status::Error(ErrorKind::CallLimit));
        assert_eq!(limit.output, "call 9 of this turn was not run: at most 8 calls per turn");
    }
}
