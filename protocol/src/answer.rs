//! The answer schema, `<answer>{"files": [...], "line_ranges": [...]}</answer>`, and its one
//! parser. Every reader of an answer goes through here: the Qwen3 agent deciding whether a turn
//! answered, the engine turning a policy's answer into a prediction, the warm start's filter and
//! the rewards' `valid` feature, which is 1 exactly when [`parse_answer`] accepts the text.
//!
//! # The rule
//!
//! The answer is read from the *reply*: the text after the last `</think>`, or all of it when
//! there is none ([`reply_text`]); reasoning is not an answer, so a block the model drafted while
//! thinking neither counts nor spoils the reply. The reply must hold **exactly one**
//! `<answer>` … `</answer>` block; text around it is free. Two blocks are an invalid answer
//! rather than "the last one counts": an answer is what the reward scores, and picking one of
//! several would let a policy hedge (write candidates and let the parser choose) at no cost, and
//! make `valid` depend on which one the parser happened to prefer.
//!
//! The block's body (each failure is an [`AnswerError`] whose message is the reason):
//! - is one JSON object with `files` (array of strings) and `line_ranges` (array of
//!   `path:start-end` strings), and optionally `functions` (array of `path::Qualified.name`
//!   strings); any other key is rejected;
//! - paths are normalised (`./a/b.py` → `a/b.py`); absolute paths, `..` and directories
//!   (trailing `/`) are rejected;
//! - a file listed twice (after normalisation) is rejected, and so is a repeated line range or
//!   function.
//!
//! A line range need not name a file of `files`: the schema has no such rule, and F-beta at each
//! level scores each list on its own. A policy that decides its answer as data rather than text
//! (the proxy) is checked by [`Answer::from_lists`], the same rules without the JSON layer.

use serde_json::Value;

use crate::LineRange;
use crate::paths;

/// A parsed, normalised answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Normalised paths, each once.
    pub files: Vec<String>,
    /// Parsed ranges with normalised paths, each once.
    pub line_ranges: Vec<LineRange>,
    /// Present only when the answer had a `functions` key.
    pub functions: Option<Vec<String>>,
}

/// Why a text is not a valid answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The reply has no `<answer>` opening tag.
    #[error("no `<answer>` block")]
    MissingOpenTag,
    /// An `<answer>` tag is opened but no `</answer>` follows it.
    #[error("`<answer>` is never closed by `</answer>`")]
    MissingCloseTag,
    /// The reply holds this many `<answer>` blocks (more than one).
    #[error("{0} `<answer>` blocks; exactly one is allowed")]
    ManyBlocks(usize),
    /// The block body is not JSON; carries the parser's message.
    #[error("answer body is not valid JSON: {0}")]
    Json(String),
    /// The block body is JSON but not an object.
    #[error("answer body must be a JSON object")]
    NotObject,
    /// A required key (`files` or `line_ranges`) is absent.
    #[error("answer has no `{0}` key")]
    MissingKey(&'static str),
    /// The object has a key outside `files`, `line_ranges`, `functions`.
    #[error("unknown key `{0}` in the answer (allowed: files, line_ranges, functions)")]
    UnknownKey(String),
    /// An array item is not a string.
    #[error("`{key}` must be an array of strings (item {index} is {found})")]
    WrongType {
        /// The key whose array holds the item.
        key: &'static str,
        /// The item's 0-based position in the array.
        index: usize,
        /// The JSON type found instead of a string (`number`, `null`, ...).
        found: &'static str,
    },
    /// A key's value is not a JSON array.
    #[error("`{0}` must be an array")]
    NotArray(&'static str),
    /// An array names the same item twice after normalisation.
    #[error("`{key}` lists `{item}` twice")]
    Duplicate {
        /// The key whose array repeats the item.
        key: &'static str,
        /// The repeated item, normalised.
        item: String,
    },
    /// A `files` entry is not a valid repository-relative path.
    #[error("file `{text}`: {reason}")]
    Path {
        /// The entry as written in the answer.
        text: String,
        /// Why it is not a valid path (its message ends this one's, so it is not a `source()`).
        reason: paths::PathError,
    },
    /// A `line_ranges` entry does not parse as `path:start-end`.
    #[error(transparent)]
    LineRange(#[from] crate::LineRangeError),
    /// A `functions` entry is not of the form `path::name`.
    #[error("function `{0}` is not `path::name`")]
    Function(String),
}

const OPEN: &str = "<answer>";
const CLOSE: &str = "</answer>";
const THINK_END: &str = "</think>";

/// The part of a generation that is the reply: after the last `</think>` when there is one.
pub fn reply_text(generated: &str) -> &str {
    generated.rfind(THINK_END).map_or(generated, |i| &generated[i + THINK_END.len()..])
}

/// Parses the answer of a model's completion under the module's rule: exactly one block in the
/// reply ([`reply_text`]).
pub fn parse_answer(text: &str) -> Result<Answer, AnswerError> {
    let text = reply_text(text);
    let opens = text.matches(OPEN).count();
    match opens {
        0 => return Err(AnswerError::MissingOpenTag),
        1 => {}
        n => return Err(AnswerError::ManyBlocks(n)),
    }
    let start = text.find(OPEN).expect("one opening tag was counted") + OPEN.len();
    let rest = &text[start..];
    let end = rest.find(CLOSE).ok_or(AnswerError::MissingCloseTag)?;
    if rest[end + CLOSE.len()..].contains(CLOSE) {
        return Err(AnswerError::ManyBlocks(rest.matches(CLOSE).count()));
    }
    parse_body(&rest[..end])
}

/// Parses the JSON body of an answer block.
pub fn parse_body(body: &str) -> Result<Answer, AnswerError> {
    let value: Value = serde_json::from_str(body.trim()).map_err(|e| AnswerError::Json(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(AnswerError::NotObject);
    };
    if let Some(key) = map.keys().find(|k| !matches!(k.as_str(), "files" | "line_ranges" | "functions")) {
        return Err(AnswerError::UnknownKey(key.clone()));
    }
    let files = strings(&map, "files")?.ok_or(AnswerError::MissingKey("files"))?;
    let line_ranges = strings(&map, "line_ranges")?.ok_or(AnswerError::MissingKey("line_ranges"))?;
    let functions = strings(&map, "functions")?;
    Answer::from_lists(&files, &line_ranges, functions.as_deref())
}

impl Answer {
    /// Checks and normalises an answer given as lists (files, `path:start-end` ranges and
    /// optionally `path::name` functions): the body rules of [`parse_body`] without the JSON.
    pub fn from_lists<S: AsRef<str>>(
        files_raw: &[S],
        ranges_raw: &[S],
        functions_raw: Option<&[S]>,
    ) -> Result<Answer, AnswerError> {
        let mut files = Vec::with_capacity(files_raw.len());
        for f in files_raw {
            let f = f.as_ref();
            let p = paths::normalize(f).map_err(|reason| AnswerError::Path { text: f.to_string(), reason })?;
            push_unique(&mut files, p, "files")?;
        }
        let mut line_ranges = Vec::with_capacity(ranges_raw.len());
        for r in ranges_raw {
            let range = LineRange::parse(r.as_ref())?;
            if line_ranges.contains(&range) {
                return Err(AnswerError::Duplicate { key: "line_ranges", item: range.to_string() });
            }
            line_ranges.push(range);
        }
        let functions = match functions_raw {
            None => None,
            Some(raw) => {
                let mut out = Vec::with_capacity(raw.len());
                for f in raw {
                    let f = f.as_ref();
                    let (path, name) = f.split_once("::").ok_or_else(|| AnswerError::Function(f.to_string()))?;
                    if name.is_empty() {
                        return Err(AnswerError::Function(f.to_string()));
                    }
                    let path =
                        paths::normalize(path).map_err(|reason| AnswerError::Path { text: f.to_string(), reason })?;
                    push_unique(&mut out, format!("{path}::{name}"), "functions")?;
                }
                Some(out)
            }
        };
        Ok(Answer { files, line_ranges, functions })
    }
}

fn strings<'a>(
    map: &'a serde_json::Map<String, Value>,
    key: &'static str,
) -> Result<Option<Vec<&'a str>>, AnswerError> {
    let Some(v) = map.get(key) else {
        return Ok(None);
    };
    let Value::Array(items) = v else {
        return Err(AnswerError::NotArray(key));
    };
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match item {
            Value::String(s) => out.push(s.as_str()),
            other => {
                return Err(AnswerError::WrongType { key, index, found: json_kind(other) });
            }
        }
    }
    Ok(Some(out))
}

fn push_unique(out: &mut Vec<String>, item: String, key: &'static str) -> Result<(), AnswerError> {
    if out.contains(&item) {
        return Err(AnswerError::Duplicate { key, item });
    }
    out.push(item);
    Ok(())
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> String {
        parse_answer(text).expect_err("invalid answer").to_string()
    }

    #[test]
    fn parses_and_normalises_a_good_answer() {
        let text = "I looked at it.\n<answer>{\"files\": [\"./a/b.py\", \"c.py\"], \"line_ranges\": [\"./a/b.py:3-9\"]}</answer>\n";
        let a = parse_answer(text).expect("valid");
        assert_eq!(a.files, vec!["a/b.py", "c.py"]);
        assert_eq!(a.line_ranges, vec![LineRange::new("a/b.py", 3, 9)]);
        assert_eq!(a.functions, None);
        let a = parse_answer(r#"<answer>{"files": [], "line_ranges": [], "functions": ["./a.py::A.f"]}</answer>"#)
            .expect("valid");
        assert_eq!(a.functions, Some(vec!["a.py::A.f".to_string()]));
    }

    #[test]
    fn every_rule_has_a_reason() {
        let cases = [
            ("no tags", "no `<answer>` block"),
            ("<answer>{}", "`<answer>` is never closed by `</answer>`"),
            ("<answer>{}</answer><answer>{}</answer>", "2 `<answer>` blocks; exactly one is allowed"),
            ("<answer>{\"files\": [}</answer>", "answer body is not valid JSON: expected value at line 1 column 12"),
            ("<answer>[]</answer>", "answer body must be a JSON object"),
            ("<answer>{\"line_ranges\": []}</answer>", "answer has no `files` key"),
            ("<answer>{\"files\": []}</answer>", "answer has no `line_ranges` key"),
            (
                "<answer>{\"files\": [], \"line_ranges\": [], \"why\": 1}</answer>",
                "unknown key `why` in the answer (allowed: files, line_ranges, functions)",
            ),
            (
                "<answer>{\"files\": [1], \"line_ranges\": []}</answer>",
                "`files` must be an array of strings (item 0 is a number)",
            ),
            ("<answer>{\"files\": \"a.py\", \"line_ranges\": []}</answer>", "`files` must be an array"),
            ("<answer>{\"files\": [\"a.py\", \"./a.py\"], \"line_ranges\": []}</answer>", "`files` lists `a.py` twice"),
            (
                "<answer>{\"files\": [\"/a.py\"], \"line_ranges\": []}</answer>",
                "file `/a.py`: absolute path `/a.py`: paths must be relative to the repository root",
            ),
            (
                "<answer>{\"files\": [\"a/../b.py\"], \"line_ranges\": []}</answer>",
                "file `a/../b.py`: path `a/../b.py` leaves or climbs within the repository with `..`",
            ),
            (
                "<answer>{\"files\": [], \"line_ranges\": [\"a.py:9-3\"]}</answer>",
                "line range `a.py:9-3`: end is before start",
            ),
            (
                "<answer>{\"files\": [], \"line_ranges\": [\"a.py\"]}</answer>",
                "line range `a.py` is not `path:start-end`",
            ),
            (
                "<answer>{\"files\": [], \"line_ranges\": [\"a.py:1-2\", \"a.py:1-2\"]}</answer>",
                "`line_ranges` lists `a.py:1-2` twice",
            ),
            (
                "<answer>{\"files\": [], \"line_ranges\": [], \"functions\": [\"f\"]}</answer>",
                "function `f` is not `path::name`",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(reason(text), want, "for {text}");
        }
    }

    #[test]
    fn only_the_reply_after_thinking_is_read() {
        let drafted = "<think>maybe <answer>{\"files\": [\"x.py\"], \"line_ranges\": []}</answer></think>\n\
                       <answer>{\"files\": [\"a.py\"], \"line_ranges\": []}</answer>";
        assert_eq!(parse_answer(drafted).expect("one block in the reply").files, ["a.py"]);
        let only_thought = "<think><answer>{\"files\": [], \"line_ranges\": []}</answer></think> no answer";
        assert_eq!(parse_answer(only_thought), Err(AnswerError::MissingOpenTag));
        assert_eq!(reply_text("a</think>b</think>c"), "c");
        assert_eq!(reply_text("plain"), "plain");
    }

    #[test]
    fn lists_obey_the_same_rules_as_text() {
        let a = Answer::from_lists(&["./a.py", "b.py"], &["a.py:3-5"], None).expect("valid");
        assert_eq!(
            a,
            parse_answer(r#"<answer>{"files": ["a.py", "b.py"], "line_ranges": ["a.py:3-5"]}</answer>"#)
                .expect("valid")
        );
        let twice = Answer::from_lists(&["a.py", "./a.py"], &[], None).expect_err("duplicate");
        assert_eq!(twice.to_string(), "`files` lists `a.py` twice");
        assert!(matches!(Answer::from_lists(&["/etc/passwd"], &[], None), Err(AnswerError::Path { .. })));
        assert!(matches!(Answer::from_lists::<&str>(&[], &["a.py:9-3"], None), Err(AnswerError::LineRange(_))));
    }
}
