//! CATM stage 1: mine the files an agent read, and the reasoning it wrote
//! right after, from OpenHands-style trajectories.
//!
//! # Trajectory JSONL
//!
//! One record per trajectory (several may share an instance), with the
//! OpenAI chat-message shape OpenHands logs:
//!
//! ```json
//! {"instance_id": "psf__requests-863",
//!  "messages": [
//!   {"role": "user", "content": "Allow lists in the dict values of the hooks argument ..."},
//!   {"role": "assistant", "content": "Let me look at the request model.",
//!    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "str_replace_editor",
//!      "arguments": "{\"command\": \"view\", \"path\": \"/workspace/psf__requests__1.0/requests/models.py\"}"}}]},
//!   {"role": "tool", "tool_call_id": "call_1", "content": "Here's the result of running `cat -n` ..."},
//!   {"role": "assistant", "content": "register_hook appends the list itself, so a list of hooks ..."}
//!  ]}
//! ```
//!
//! `content` may be a string or a list of `{"type": "text", "text": ...}`
//! parts; an assistant message's `reasoning_content` (if any) counts as
//! reasoning too; `arguments` may be a JSON string or an object. Only
//! `str_replace_editor` calls with `"command": "view"` are reads.
//!
//! # Decisions
//!
//! - Paths: an absolute path is made repository-relative by stripping the
//!   first matching root (`/testbed/`, `/workspace/*/`, `/repo/`; `*` is one
//!   component); an absolute path under no root is dropped. Then the path is
//!   normalised; one with `..` is dropped.
//! - Dropped: directories (a trailing `/`, or a tool result that lists
//!   "files and directories"), docs (`.md`, `.rst`, `.txt`, `.adoc`, and
//!   `README*`, `CHANGELOG*`, `LICENSE*`, `CONTRIBUTING*`, `AUTHORS*`,
//!   `HISTORY*`, `CHANGES*` of any extension), and extensionless files.
//! - `l(f)` is the token length of the first assistant message after the
//!   read's message. A file read several times keeps its longest post-reasoning.
//! - Token length is a proxy, not a model tokenizer: every maximal run of
//!   letters, digits and `_` counts one token per started 6 characters, and
//!   every other non-space character counts one. On English prose it lands
//!   within about 20% of BPE counts, which is all a length threshold (30) and
//!   a median-normalised weight need.

use serde::Deserialize;
use serde_json::Value;

/// One trajectory record.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Trajectory {
    /// The SWE-bench instance the agent worked on.
    pub instance_id: String,
    /// The conversation in order; also read from `history` or `trajectory`.
    #[serde(alias = "history", alias = "trajectory")]
    pub messages: Vec<Message>,
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Message {
    /// `user`, `assistant`, `tool` or `system`; only `assistant` messages are mined.
    pub role: String,
    /// A string or a list of `{"type": "text", "text": ...}` parts; `null` when absent.
    #[serde(default)]
    pub content: Value,
    /// A reasoning model's separate thinking text, counted as reasoning.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// The tool calls an assistant message makes; empty for other roles.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallMsg>,
    /// On a `tool` message, the id of the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// An OpenAI-style tool call.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ToolCallMsg {
    /// The call's id, matched by the answering tool message's `tool_call_id`.
    #[serde(default)]
    pub id: Option<String>,
    /// The function called and its arguments.
    pub function: FunctionCall,
}

/// The function part of a tool call.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct FunctionCall {
    /// The tool's name; only `str_replace_editor` calls can be reads.
    pub name: String,
    /// A JSON-encoded string (OpenAI) or an object.
    #[serde(default)]
    pub arguments: Value,
}

/// Stage-1 options.
#[derive(Clone, Debug)]
pub struct MineOptions {
    /// Roots stripped from absolute paths; `*` matches one path component.
    pub roots: Vec<String>,
}

impl Default for MineOptions {
    fn default() -> MineOptions {
        MineOptions { roots: vec!["/testbed/".into(), "/workspace/*/".into(), "/repo/".into()] }
    }
}

/// A file read and the reasoning after it.
#[derive(Clone, Debug, PartialEq)]
pub struct MinedRead {
    /// The file, repository-relative and normalised.
    pub path: String,
    /// `l(f)`: proxy tokens of the post-reasoning.
    pub tokens: usize,
    /// The assistant text after the read; empty when no assistant message follows.
    pub reasoning: String,
}

/// What stage 1 saw and dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MineStats {
    /// `str_replace_editor view` calls seen.
    pub view_calls: usize,
    /// Views of an absolute path under no known root, or of a path with `..`.
    pub dropped_outside_repo: usize,
    /// Views of a directory.
    pub dropped_directory: usize,
    /// Views of a documentation file (`.md`, `README*`, ...).
    pub dropped_doc: usize,
    /// Views of a file without an extension.
    pub dropped_extensionless: usize,
    /// Distinct files kept (per trajectory).
    pub files: usize,
}

impl MineStats {
    /// Adds `o`'s counts to these, field by field.
    pub fn add(&mut self, o: &MineStats) {
        self.view_calls += o.view_calls;
        self.dropped_outside_repo += o.dropped_outside_repo;
        self.dropped_directory += o.dropped_directory;
        self.dropped_doc += o.dropped_doc;
        self.dropped_extensionless += o.dropped_extensionless;
        self.files += o.files;
    }

    /// The count of views dropped for `why`.
    fn dropped(&mut self, why: Drop) -> &mut usize {
        match why {
            Drop::Outside => &mut self.dropped_outside_repo,
            Drop::Directory => &mut self.dropped_directory,
            Drop::Doc => &mut self.dropped_doc,
            Drop::Extensionless => &mut self.dropped_extensionless,
        }
    }
}

/// Mines one trajectory: distinct files in first-read order, each with its longest post-reasoning.
pub fn mine(trajectory: &Trajectory, options: &MineOptions) -> (Vec<MinedRead>, MineStats) {
    let mut stats = MineStats::default();
    let mut out: Vec<MinedRead> = Vec::new();
    let msgs = &trajectory.messages;
    for (m, msg) in msgs.iter().enumerate() {
        if msg.role != "assistant" {
            continue;
        }
        for call in &msg.tool_calls {
            let Some(path) = view_path(call) else {
                continue;
            };
            stats.view_calls += 1;
            let listed_dir = call.id.as_deref().is_some_and(|id| {
                msgs[m + 1..].iter().any(|r| {
                    r.tool_call_id.as_deref() == Some(id) && text_of(&r.content).contains("files and directories")
                })
            });
            let path = match classify(&path, listed_dir, options) {
                Ok(p) => p,
                Err(why) => {
                    *stats.dropped(why) += 1;
                    continue;
                }
            };
            let reasoning = msgs[m + 1..].iter().find(|r| r.role == "assistant").map(reasoning_of).unwrap_or_default();
            let tokens = token_len(&reasoning);
            match out.iter_mut().find(|r| r.path == path) {
                Some(prev) if prev.tokens >= tokens => {}
                Some(prev) => {
                    prev.tokens = tokens;
                    prev.reasoning = reasoning;
                }
                None => out.push(MinedRead { path, tokens, reasoning }),
            }
        }
    }
    stats.files = out.len();
    (out, stats)
}

/// The proxy token length (see the module docs).
pub fn token_len(text: &str) -> usize {
    let mut n = 0;
    let mut run = 0usize;
    for ch in text.chars() {
        if ch.is_alphanumeric() || ch == '_' {
            run += 1;
            continue;
        }
        n += run.div_ceil(6);
        run = 0;
        if !ch.is_whitespace() {
            n += 1;
        }
    }
    n + run.div_ceil(6)
}

/// Why a view is not mined: each reason has its count in [`MineStats`].
enum Drop {
    Outside,
    Directory,
    Doc,
    Extensionless,
}

fn view_path(call: &ToolCallMsg) -> Option<String> {
    if call.function.name != "str_replace_editor" {
        return None;
    }
    let parsed;
    let args = match &call.function.arguments {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).ok()?;
            &parsed
        }
        v => v,
    };
    if args.get("command")?.as_str()? != "view" {
        return None;
    }
    args.get("path")?.as_str().map(str::to_string)
}

fn classify(raw: &str, listed_dir: bool, options: &MineOptions) -> Result<String, Drop> {
    if raw.ends_with('/') || listed_dir {
        return Err(Drop::Directory);
    }
    let rel = if raw.starts_with('/') {
        options.roots.iter().find_map(|root| strip_root(raw, root)).ok_or(Drop::Outside)?
    } else {
        raw
    };
    let path = crate::paths::normalize(rel).map_err(|_| Drop::Outside)?;
    let name = path.rsplit('/').next().unwrap_or(&path);
    let upper = name.to_ascii_uppercase();
    let doc_names = ["README", "CHANGELOG", "CHANGES", "LICENSE", "CONTRIBUTING", "AUTHORS", "HISTORY", "ISSUE"];
    if doc_names.iter().any(|d| upper.starts_with(d)) {
        return Err(Drop::Doc);
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return Err(Drop::Extensionless);
    };
    if stem.is_empty() || ext.is_empty() {
        // `.gitignore`-style dotfiles have no extension in the sense that matters here.
        return Err(Drop::Extensionless);
    }
    if ["md", "rst", "txt", "adoc", "markdown"].contains(&ext.to_ascii_lowercase().as_str()) {
        return Err(Drop::Doc);
    }
    Ok(path)
}

/// Strips `root` (with `*` matching one component) from `path`.
fn strip_root<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let mut rest = path;
    for part in root.trim_end_matches('/').split('/').skip(1) {
        rest = rest.strip_prefix('/')?;
        let end = rest.find('/')?;
        if part != "*" && &rest[..end] != part {
            return None;
        }
        rest = &rest[end..];
    }
    rest.strip_prefix('/')
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

fn reasoning_of(msg: &Message) -> String {
    let text = text_of(&msg.content);
    match &msg.reasoning_content {
        Some(r) if !r.is_empty() => format!("{r}\n{text}"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traj(json: &str) -> Trajectory {
        serde_json::from_str(json).expect("test trajectory parses")
    }

    #[test]
    fn token_proxy() {
        assert_eq!(token_len(""), 0);
        assert_eq!(token_len("the cat sat"), 3);
        assert_eq!(token_len("register_hook(event)"), 3 + 3);
        assert_eq!(token_len("a, b."), 4);
    }

    #[test]
    fn roots_are_stripped() {
        assert_eq!(
            strip_root("/workspace/psf__requests__1.0/requests/models.py", "/workspace/*/"),
            Some("requests/models.py")
        );
        assert_eq!(strip_root("/testbed/a.py", "/testbed/"), Some("a.py"));
        assert_eq!(strip_root("/other/a.py", "/testbed/"), None);
    }

    #[test]
    fn mines_views_and_drops_the_rest() {
        let t = traj(
            r#"{"instance_id": "i", "messages": [
            {"role": "user", "content": "issue"},
            {"role": "assistant", "content": "look", "tool_calls": [
              {"id": "1", "function": {"name": "str_replace_editor", "arguments": "{\"command\": \"view\", \"path\": \"/testbed/pkg/a.py\"}"}},
              {"id": "2", "function": {"name": "str_replace_editor", "arguments": {"command": "view", "path": "/testbed/pkg"}}},
              {"id": "3", "function": {"name": "str_replace_editor", "arguments": {"command": "view", "path": "/testbed/README.md"}}},
              {"id": "4", "function": {"name": "str_replace_editor", "arguments": {"command": "view", "path": "/testbed/Makefile"}}},
              {"id": "5", "function": {"name": "str_replace_editor", "arguments": {"command": "view", "path": "/etc/passwd"}}},
              {"id": "6", "function": {"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "/testbed/pkg/b.py"}}},
              {"id": "7", "function": {"name": "execute_bash", "arguments": {"command": "ls"}}}]},
            {"role": "tool", "tool_call_id": "2", "content": "Here's the files and directories up to 2 levels deep in /testbed/pkg"},
            {"role": "assistant", "content": [{"type": "text", "text": "a.py defines the hook registry"}]},
            {"role": "assistant", "content": "again", "tool_calls": [
              {"id": "8", "function": {"name": "str_replace_editor", "arguments": {"command": "view", "path": "pkg/./a.py"}}}]},
            {"role": "assistant", "content": "ok"}
            ]}"#,
        );
        let (reads, stats) = mine(&t, &MineOptions::default());
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].path, "pkg/a.py");
        assert_eq!(reads[0].reasoning, "a.py defines the hook registry");
        assert_eq!(reads[0].tokens, 9);
        assert_eq!(
            stats,
            MineStats {
                view_calls: 6,
                dropped_outside_repo: 1,
                dropped_directory: 1,
                dropped_doc: 1,
                dropped_extensionless: 1,
                files: 1
            }
        );
    }
}
