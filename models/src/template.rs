//! Qwen3's chat template with the grep/glob/read tools, tool-call and answer parsing, and the
//! token sequence of a multi-turn rollout with its loss mask.
//!
//! Rendering follows Qwen3's Jinja template: `<|im_start|>role\n…<|im_end|>\n` turns, tool
//! signatures inside `<tools></tools>` in the system turn, tool results as
//! `<tool_response>` blocks in one user turn. A rollout is assembled from token pieces rather
//! than re-tokenised text, so the tokens the policy sampled are kept exactly and the loss mask
//! covers exactly those (its closing `<|im_end|>` included).
//!
//! The calls parsed here are `rewardlab-protocol`'s [`ToolCall`]s, the sandbox's own type; an
//! answer is read by the protocol's one parser, `rewardlab_protocol::parse_answer` (exactly one
//! `<answer>` block in the reply after the last `</think>`).

pub use rewardlab_protocol::{MAX_CALLS_PER_TURN, reply_text};
use rewardlab_protocol::{ReadArgs, ToolCall};
use serde_json::{Value, json};

use crate::Result;
use crate::tokenizer::QwenTokenizer;

/// What opens an assistant turn; generation starts right after it.
pub const GENERATION_PROMPT: &str = "<|im_start|>assistant\n";

/// Why a `<tool_call>` block was not a valid call. Its `Display` is what the policy is told
/// in the tool response, so it names the problem in the model's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolCallError {
    #[error("tool call is not closed with </tool_call>")]
    /// A `<tool_call>` has no `</tool_call>` after it.
    Unterminated,
    #[error("tool call is not valid JSON: {0}")]
    /// The block (or its string-encoded arguments) is not JSON; holds the parser's message.
    Json(String),
    #[error("tool call must be an object with \"name\" and \"arguments\"")]
    /// The JSON has no string `name`, or its `arguments` are not an object.
    Shape,
    #[error("unknown tool {0:?}; the tools are grep, glob and read")]
    /// The named tool (given) is not grep, glob or read.
    UnknownTool(String),
    #[error("invalid arguments for {tool}: {message}")]
    /// The arguments do not fit the tool's schema.
    Arguments {
        /// The tool called.
        tool: String,
        /// What is wrong with its arguments.
        message: String,
    },
    #[error("too many tool calls: {found} in one turn, at most {limit} are run")]
    /// The turn holds more calls than are run; the first `limit` are kept.
    TooMany {
        /// `<tool_call>` blocks in the turn.
        found: usize,
        /// Calls run per turn ([`MAX_CALLS_PER_TURN`]).
        limit: usize,
    },
}

/// The JSON schemas of grep, glob and read in the function-calling format Qwen3 was tuned on.
pub fn tool_schemas() -> Vec<Value> {
    let f = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required}}})
    };
    vec![
        f(
            "grep",
            "Search file contents with a regular expression. Returns matching lines as path:line: text.",
            json!({"pattern": {"type": "string", "description": "Regular expression to search for."},
                   "path": {"type": "string", "description": "Directory or file to search in; the repository root when omitted."},
                   "case_sensitive": {"type": "boolean", "description": "Match case exactly (default true)."}}),
            &["pattern"],
        ),
        f(
            "glob",
            "List files whose path matches a glob pattern such as src/**/*.rs.",
            json!({"pattern": {"type": "string", "description": "Glob pattern over repository paths."}}),
            &["pattern"],
        ),
        f(
            "read",
            "Read a file, optionally only lines start..=end (1-based).",
            json!({"path": {"type": "string", "description": "File path relative to the repository root."},
                   "start": {"type": "integer", "description": "First line to show (1-based)."},
                   "end": {"type": "integer", "description": "Last line to show (inclusive)."}}),
            &["path"],
        ),
    ]
}

/// The system turn's content: `instructions`, then the tool block of Qwen3's template.
pub fn system_prompt(instructions: &str) -> String {
    let mut s = String::new();
    s.push_str(instructions.trim_end());
    s.push_str(
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for tool in tool_schemas() {
        s.push('\n');
        s.push_str(&tool.to_string());
    }
    s.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and \
         arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n\
         {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    s
}

/// One complete turn: `<|im_start|>{role}\n{content}<|im_end|>\n`.
pub fn render_turn(role: &str, content: &str) -> String {
    format!("<|im_start|>{role}\n{content}<|im_end|>\n")
}

/// The user turn carrying tool results, one `<tool_response>` block each.
pub fn render_tool_responses(responses: &[String]) -> String {
    let mut s = String::from("<|im_start|>user");
    for r in responses {
        s.push_str("\n<tool_response>\n");
        s.push_str(r);
        s.push_str("\n</tool_response>");
    }
    s.push_str("<|im_end|>\n");
    s
}

/// Extracts the tool calls of an assistant turn (its reply part), at most
/// [`MAX_CALLS_PER_TURN`]; each malformed block becomes an error in its place, and extra
/// blocks add one [`ToolCallError::TooMany`].
pub fn parse_tool_calls(generated: &str) -> Vec<std::result::Result<ToolCall, ToolCallError>> {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut rest = reply_text(generated);
    let mut out = Vec::new();
    let mut found = 0;
    while let Some(start) = rest.find(OPEN) {
        found += 1;
        let body_start = start + OPEN.len();
        let Some(len) = rest[body_start..].find(CLOSE) else {
            if out.len() < MAX_CALLS_PER_TURN {
                out.push(Err(ToolCallError::Unterminated));
            }
            break;
        };
        if out.len() < MAX_CALLS_PER_TURN {
            out.push(parse_one_call(&rest[body_start..body_start + len]));
        }
        rest = &rest[body_start + len + CLOSE.len()..];
    }
    if found > MAX_CALLS_PER_TURN {
        out.push(Err(ToolCallError::TooMany { found, limit: MAX_CALLS_PER_TURN }));
    }
    out
}

fn parse_one_call(body: &str) -> std::result::Result<ToolCall, ToolCallError> {
    let value: Value = serde_json::from_str(body.trim()).map_err(|e| ToolCallError::Json(e.to_string()))?;
    let name = value.get("name").and_then(Value::as_str).ok_or(ToolCallError::Shape)?;
    let mut args = value.get("arguments").cloned().unwrap_or(Value::Null);
    // Some models emit the arguments as a JSON string; accept that encoding too.
    if let Value::String(s) = &args {
        args = serde_json::from_str(s).map_err(|e| ToolCallError::Json(e.to_string()))?;
    }
    if !args.is_object() {
        return Err(ToolCallError::Shape);
    }
    let bad = |e: serde_json::Error| ToolCallError::Arguments { tool: name.to_owned(), message: e.to_string() };
    match name {
        "grep" => Ok(ToolCall::Grep(serde_json::from_value(args).map_err(bad)?)),
        "glob" => Ok(ToolCall::Glob(serde_json::from_value(args).map_err(bad)?)),
        "read" => {
            let a: ReadArgs = serde_json::from_value(args).map_err(bad)?;
            if let (Some(s), Some(e)) = (a.start, a.end)
                && (s == 0 || e < s)
            {
                return Err(ToolCallError::Arguments {
                    tool: "read".to_owned(),
                    message: format!("need 1 <= start <= end, got start {s}, end {e}"),
                });
            }
            Ok(ToolCall::Read(a))
        }
        other => Err(ToolCallError::UnknownTool(other.to_owned())),
    }
}

/// The tokens of a multi-turn rollout, with the loss mask and the sampler's log-probs.
///
/// Invariant: `loss_mask[i]` is true exactly for tokens the policy generated (pushed through
/// [`Rollout::push_generation`]), and `sampled_logprobs[i]` is their sampling log-prob (0
/// elsewhere).
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    tokens: Vec<u32>,
    loss_mask: Vec<bool>,
    sampled_logprobs: Vec<f32>,
    /// Whether the last piece is an assistant turn that never produced `<|im_end|>`.
    open_turn: bool,
}

impl Rollout {
    /// Starts a rollout with the system turn (instructions and tools) and the task's user turn.
    pub fn new(tok: &QwenTokenizer, instructions: &str, user: &str) -> Result<Self> {
        let mut r = Self { tokens: Vec::new(), loss_mask: Vec::new(), sampled_logprobs: Vec::new(), open_turn: false };
        r.push_context(tok, &render_turn("system", &system_prompt(instructions)))?;
        r.push_context(tok, &render_turn("user", user))?;
        Ok(r)
    }

    /// The tokens to sample the next assistant turn from (the rollout plus the generation prompt).
    pub fn prompt(&self, tok: &QwenTokenizer) -> Result<Vec<u32>> {
        let mut p = self.tokens.clone();
        if self.open_turn {
            p.extend(self.close_ids(tok)?);
        }
        p.extend(tok.encode(GENERATION_PROMPT)?);
        Ok(p)
    }

    /// Appends an assistant turn: the generation prompt (context), then `generated` with its
    /// log-probs (trained on), then the template's newline when it ended with `<|im_end|>`.
    pub fn push_generation(&mut self, tok: &QwenTokenizer, generated: &[u32], logprobs: &[f32]) -> Result<()> {
        if generated.len() != logprobs.len() {
            return Err(crate::Error::Invalid(format!(
                "{} generated tokens but {} log-probs",
                generated.len(),
                logprobs.len()
            )));
        }
        self.close_open_turn(tok)?;
        self.push_context(tok, GENERATION_PROMPT)?;
        self.tokens.extend_from_slice(generated);
        self.loss_mask.extend(std::iter::repeat_n(true, generated.len()));
        self.sampled_logprobs.extend_from_slice(logprobs);
        if generated.last() == Some(&tok.special().im_end) {
            self.push_context(tok, "\n")?;
        } else {
            self.open_turn = true;
        }
        Ok(())
    }

    /// Appends a plain user turn (context, not trained on), e.g. a note that the next turn
    /// must answer.
    pub fn push_user(&mut self, tok: &QwenTokenizer, content: &str) -> Result<()> {
        self.close_open_turn(tok)?;
        self.push_context(tok, &render_turn("user", content))
    }

    /// Appends the tool results of the last turn as one user turn.
    pub fn push_tool_responses(&mut self, tok: &QwenTokenizer, responses: &[String]) -> Result<()> {
        self.close_open_turn(tok)?;
        self.push_context(tok, &render_tool_responses(responses))
    }

    /// Every token of the rollout so far, prompt and tool responses included.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// True exactly at generated tokens.
    pub fn loss_mask(&self) -> &[bool] {
        &self.loss_mask
    }

    /// The sampler's log-prob at generated tokens, 0 elsewhere.
    pub fn sampled_logprobs(&self) -> &[f32] {
        &self.sampled_logprobs
    }

    /// How many tokens the policy generated over all turns.
    pub fn generated_len(&self) -> usize {
        self.loss_mask.iter().filter(|&&m| m).count()
    }

    fn push_context(&mut self, tok: &QwenTokenizer, text: &str) -> Result<()> {
        let ids = tok.encode(text)?;
        self.loss_mask.extend(std::iter::repeat_n(false, ids.len()));
        self.sampled_logprobs.extend(std::iter::repeat_n(0.0, ids.len()));
        self.tokens.extend(ids);
        Ok(())
    }

    /// A turn cut by the token limit is closed by the template (not by the policy) before
    /// anything follows it, so the next turn's context is well formed.
    fn close_open_turn(&mut self, tok: &QwenTokenizer) -> Result<()> {
        if self.open_turn {
            let ids = self.close_ids(tok)?;
            self.loss_mask.extend(std::iter::repeat_n(false, ids.len()));
            self.sampled_logprobs.extend(std::iter::repeat_n(0.0, ids.len()));
            self.tokens.extend(ids);
            self.open_turn = false;
        }
        Ok(())
    }

    fn close_ids(&self, tok: &QwenTokenizer) -> Result<Vec<u32>> {
        tok.encode("<|im_end|>\n")
    }
}

#[cfg(test)]
mod tests {
    use rewardlab_protocol::GrepArgs;

    use super::*;

    #[test]
    fn tool_calls_parse_with_errors_in_place() {
        let text = r#"<think>maybe <tool_call>{"name": "glob"}</tool_call></think>
<tool_call>
{"name": "grep", "arguments": {"pattern": "fn main", "path": "src"}}
</tool_call>
<tool_call>{"name": "read", "arguments": "{\"path\": \"a.rs\", \"start\": 3, \"end\": 9}"}</tool_call>
<tool_call>{"name": "glob", "arguments": {"pattern": "*.rs", "extra": 1}}</tool_call>
<tool_call>{"name": "rm", "arguments": {}}</tool_call>
<tool_call>{not json}</tool_call>
<tool_call>{"name": "read", "arguments": {"path": "a", "start": 5, "end": 2}}</tool_call>
<tool_call>{"name": "glob", "arguments": {"pattern": "**/*.py"}"#;
        let calls = parse_tool_calls(text);
        assert_eq!(calls.len(), 7);
        assert_eq!(
            calls[0],
            Ok(ToolCall::Grep(GrepArgs { pattern: "fn main".into(), path: Some("src".into()), case_sensitive: None }))
        );
        assert_eq!(calls[1], Ok(ToolCall::Read(ReadArgs { path: "a.rs".into(), start: Some(3), end: Some(9) })));
        assert!(matches!(&calls[2], Err(ToolCallError::Arguments { tool, .. }) if tool == "glob"));
        assert_eq!(calls[3], Err(ToolCallError::UnknownTool("rm".into())));
        assert!(matches!(calls[4], Err(ToolCallError::Json(_))));
        assert!(matches!(&calls[5], Err(ToolCallError::Arguments { tool, .. }) if tool == "read"));
        assert_eq!(calls[6], Err(ToolCallError::Unterminated));
    }

    #[test]
    fn more_than_eight_calls_are_cut_with_an_error() {
        let one = r#"<tool_call>{"name": "glob", "arguments": {"pattern": "*"}}</tool_call>"#;
        let calls = parse_tool_calls(&one.repeat(10));
        assert_eq!(calls.len(), MAX_CALLS_PER_TURN + 1);
        assert!(calls[..8].iter().all(|c| c.is_ok()));
        assert_eq!(calls[8], Err(ToolCallError::TooMany { found: 10, limit: 8 }));
    }

    #[test]
    fn answers_parse_and_validate_line_ranges() {
        use rewardlab_protocol::{AnswerError, LineRange, LineRangeError, parse_answer};
        let ok = r#"done <answer>{"files": ["a/b.py"], "line_ranges": ["a/b.py:3-9"]}</answer>"#;
        let a = parse_answer(ok).expect("valid");
        assert_eq!(a.files, vec!["a/b.py"]);
        assert_eq!(a.line_ranges, vec![LineRange::new("a/b.py", 3, 9)]);
        assert_eq!(parse_answer("no answer here"), Err(AnswerError::MissingOpenTag));
        let bad = r#"<answer>{"files": ["x"], "line_ranges": ["x:9-3"]}</answer>"#;
        assert_eq!(parse_answer(bad), Err(AnswerError::LineRange(LineRangeError::Reversed("x:9-3".into()))));
        assert!(matches!(parse_answer(r#"<answer>{"file": []}</answer>"#), Err(AnswerError::UnknownKey(_))));
        assert_eq!(parse_answer("<answer>{\"files\": []}"), Err(AnswerError::MissingCloseTag));
    }

    #[test]
    fn system_prompt_lists_the_three_tools_as_json() {
        let s = system_prompt("Find the files.");
        let tools: Vec<Value> = s
            .lines()
            .filter(|l| l.starts_with("{\"function\"") || l.starts_with("{\"type\""))
            .map(|l| serde_json::from_str(l).expect("each tool line is JSON"))
            .collect();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["function"]["name"].as_str()).collect();
        assert_eq!(names, ["grep", "glob", "read"]);
        assert_eq!(tools[0]["function"]["parameters"]["required"], json!(["pattern"]));
        assert!(s.starts_with("Find the files.\n\n# Tools"));
        assert!(s.ends_with("</tool_call>"));
    }
}
