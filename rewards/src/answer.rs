//! The answer schema: `<answer>{"files": [...], "line_ranges": [...]}</answer>`
//! parsed strictly from a model's text. `valid` is 1 exactly when this parser
//! accepts the text.
//!
//! Rules (each failure is an [`AnswerError`] whose message is the reason):
//! - exactly one `<answer>` … `</answer>` block; text around it is free;
//! - its body is one JSON object with `files` (array of strings) and
//!   `line_ranges` (array of `path:start-end` strings), and optionally
//!   `functions` (array of `path::Qualified.name` strings); any other key is rejected;
//! - paths are normalised (`./a/b.py` → `a/b.py`); absolute paths, `..` and
//!   directories (trailing `/`) are rejected;
//! - a file listed twice (after normalisation) is rejected, and so is a
//!   repeated line range or function.
//!
//! A line range need not name a file of `files`: the schema has no such rule,
//! and F-beta at each level scores each list on its own.

use serde_json::Value;

use crate::metrics::LineRange;
use crate::paths;

/// A parsed, normalised answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub files: Vec<String>,
    pub line_ranges: Vec<LineRange>,
    /// Present only when the answer had a `functions` key.
    pub functions: Option<Vec<String>>,
}

/// Why a text is not a valid answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    #[error("no `<answer>` block")]
    MissingOpenTag,
    #[error("`<answer>` is never closed by `</answer>`")]
    MissingCloseTag,
    #[error("{0} `<answer>` blocks; exactly one is allowed")]
    ManyBlocks(usize),
    #[error("answer body is not valid JSON: {0}")]
    Json(String),
    #[error("answer body must be a JSON object")]
    NotObject,
    #[error("answer has no `{0}` key")]
    MissingKey(&'static str),
    #[error("unknown key `{0}` in the answer (allowed: files, line_ranges, functions)")]
    UnknownKey(String),
    #[error("`{key}` must be an array of strings (item {index} is {found})")]
    WrongType { key: &'static str, index: usize, found: &'static str },
    #[error("`{0}` must be an array")]
    NotArray(&'static str),
    #[error("`{key}` lists `{item}` twice")]
    Duplicate { key: &'static str, item: String },
    #[error("file `{text}`: {source}")]
    Path { text: String, source: paths::PathError },
    #[error(transparent)]
    LineRange(#[from] crate::metrics::LineRangeError),
    #[error("function `{0}` is not `path::name`")]
    Function(String),
}

const OPEN: &str = "<answer>";
const CLOSE: &str = "</answer>";

/// Parses the answer block of a model's completion.
pub fn parse_answer(text: &str) -> Result<Answer, AnswerError> {
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
    let files_raw = strings(&map, "files")?.ok_or(AnswerError::MissingKey("files"))?;
    let ranges_raw = strings(&map, "line_ranges")?.ok_or(AnswerError::MissingKey("line_ranges"))?;
    let functions_raw = strings(&map, "functions")?;

    let mut files = Vec::with_capacity(files_raw.len());
    for f in files_raw {
        let p = paths::normalize(f).map_err(|source| AnswerError::Path { text: f.to_string(), source })?;
        push_unique(&mut files, p, "files")?;
    }
    let mut line_ranges = Vec::with_capacity(ranges_raw.len());
    for r in ranges_raw {
        let range = LineRange::parse(r)?;
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
                let (path, name) = f.split_once("::").ok_or_else(|| AnswerError::Function(f.to_string()))?;
                if name.is_empty() {
                    return Err(AnswerError::Function(f.to_string()));
                }
                let path =
                    paths::normalize(path).map_err(|source| AnswerError::Path { text: f.to_string(), source })?;
                push_unique(&mut out, format!("{path}::{name}"), "functions")?;
            }
            Some(out)
        }
    };
    Ok(Answer { files, line_ranges, functions })
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
}
