//! Running the three tools. Their calls and results are [`rewardlab_protocol`]'s vocabulary
//! (re-exported by this crate); this module adds what needs a tree: [`RunTool`] runs a call
//! under its deadline, and an access error becomes the result the policy reads.

mod filter;
mod glob;
mod grep;
pub(crate) mod output;
mod read;

pub use rewardlab_protocol::{Entity, ErrorKind, GlobArgs, GrepArgs, ReadArgs, Status, ToolCall, ToolResult};

use crate::{
    Limits,
    deadline::Deadline,
    tree::{AccessError, Tree},
};

/// Running a [`ToolCall`] on a tree: the sandbox's half of a call.
pub trait RunTool {
    /// The time budget of this call under `limits`.
    fn timeout(&self, limits: &Limits) -> std::time::Duration;

    /// Runs the call on `tree` on this thread, its deadline starting now.
    fn run(&self, tree: &Tree, limits: &Limits) -> ToolResult;
}

impl RunTool for ToolCall {
    fn timeout(&self, limits: &Limits) -> std::time::Duration {
        match self {
            ToolCall::Grep(_) => limits.grep_timeout,
            ToolCall::Glob(_) => limits.glob_timeout,
            ToolCall::Read(_) => limits.read_timeout,
            // A tool this sandbox does not know gets no time: it answers at once.
            _ => std::time::Duration::ZERO,
        }
    }

    fn run(&self, tree: &Tree, limits: &Limits) -> ToolResult {
        let deadline = Deadline::after(self.timeout(limits));
        match self {
            ToolCall::Grep(args) => grep::run(tree, args, limits, deadline),
            ToolCall::Glob(args) => glob::run(tree, args, limits, deadline),
            ToolCall::Read(args) => read::run(tree, args, limits, deadline),
            other => ToolResult::error(
                ErrorKind::UnknownTool,
                format!("unknown tool {:?}; the tools are grep, glob and read", other.name()),
            ),
        }
    }
}

/// The result of a call whose path could not be resolved, for a crate-internal caller.
pub(crate) trait AccessErrorResult {
    fn access_error(tool: &str, error: &AccessError) -> Self;
}

impl AccessErrorResult for ToolResult {
    fn access_error(tool: &str, error: &AccessError) -> Self {
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
}

#[cfg(test)]
mod tests {
    use grep_matcher::Matcher;
    use grep_regex::RegexMatcherBuilder;

    /// Whether `pattern`, compiled as the sandbox's grep compiles it, matches all of `text`.
    fn matches_exactly(pattern: &str, text: &str) -> bool {
        let anchored = format!("^(?:{pattern})$");
        let matcher = RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(&anchored)
            .unwrap_or_else(|e| panic!("{pattern:?} does not compile: {e}"));
        matcher.is_match(text.as_bytes()).expect("in-memory match")
    }

    #[test]
    fn every_escaped_ascii_punctuation_character_matches_itself() {
        let punctuation: Vec<char> = (0u8..128).map(char::from).filter(char::is_ascii_punctuation).collect();
        assert_eq!(punctuation.len(), 32);
        for c in &punctuation {
            let text = c.to_string();
            let pattern = rewardlab_protocol::escape_regex(&text);
            assert!(matches_exactly(&pattern, &text), "{c:?} escaped as {pattern:?}");
            // Inside a class too, where `-`, `&` and `~` are operators.
            assert!(matches_exactly(&format!("[{pattern}]"), &text), "[{pattern}]");
            assert!(!matches_exactly(&pattern, "x"), "{pattern:?} matches only itself");
        }
        let all: String = punctuation.iter().collect();
        assert!(matches_exactly(&rewardlab_protocol::escape_regex(&all), &all));
        let text = "load(x)[0] + y.z ~ é & a-b #1 \\d $^|?*{2}";
        let pattern = rewardlab_protocol::escape_regex(text);
        assert!(matches_exactly(&pattern, text));
        assert!(!matches_exactly(&pattern, &text.replace("y.z", "yaz")));
    }
}
