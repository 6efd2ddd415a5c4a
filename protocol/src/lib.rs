//! rewardlab-protocol: the vocabulary the policies, the sandbox, the engine and the rewards
//! share, defined once.
//!
//! - [`tools`]: tool calls ([`ToolCall`] with [`GrepArgs`], [`GlobArgs`], [`ReadArgs`]), their
//!   validation from untrusted JSON, results ([`ToolResult`], [`Status`], [`ErrorKind`]) with
//!   typed [`Entity`]s, and the per-turn call limit [`MAX_CALLS_PER_TURN`].
//! - [`answer`]: the answer schema and its one parser, [`parse_answer`], with its one rule
//!   (exactly one `<answer>` block in the reply after any `</think>`).
//! - [`line_range`]: [`LineRange`], `path:start-end`.
//! - [`paths`]: repository-relative path normalisation.
//! - [`regex`]: [`escape_regex`], literal text as a pattern for the sandbox's grep.
//! - [`error_text`]: [`error_chain`], an error and its causes as one line of text.
//!
//! A leaf with no workspace dependencies and nothing to run: the sandbox executes calls, the
//! rewards score answers, the models produce both. Wire forms (tool results, rollout records)
//! are fixed here, so every crate reads and writes the same JSON.

#![warn(missing_docs)]

pub mod answer;
pub mod error_text;
pub mod line_range;
pub mod paths;
pub mod regex;
pub mod tools;

pub use answer::{Answer, AnswerError, parse_answer, parse_body, reply_text};
pub use error_text::error_chain;
pub use line_range::{LineRange, LineRangeError};
pub use regex::escape_regex;
pub use tools::{Entity, ErrorKind, GlobArgs, GrepArgs, MAX_CALLS_PER_TURN, ReadArgs, Status, ToolCall, ToolResult};
