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

use std::borrow::Cow;
use std::io::BufRead;

use serde::{Deserialize, Serialize};

use rewardlab_protocol::{Entity, ToolCall, ToolResult};

use crate::metrics::LineRange;

mod scan;

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
            for f in files.iter_mut().filter(|f| !crate::paths::is_normal(f)) {
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

impl Rollout {
    /// [`Rollout::from_json_line`] for callers that never read the calls'
    /// `args` (features do not): `args` are checked exactly as JSON values
    /// are, but not kept (`null`), which spares the allocations of a
    /// `serde_json::Value` per call. A line it rejects is re-read by
    /// [`Rollout::from_json_line`], so the error message is the same.
    pub fn from_json_line_without_args(text: &str) -> Result<Rollout, String> {
        let Ok(lean) = serde_json::from_str::<LeanRollout>(text) else {
            return Rollout::from_json_line(text);
        };
        let turns = lean.turns.map(|turns| {
            turns
                .into_iter()
                .map(|turn| {
                    turn.into_iter()
                        .map(|c| LoggedCall { tool: c.tool, args: serde_json::Value::Null, entities: c.entities })
                        .collect()
                })
                .collect()
        });
        let mut r = Rollout {
            group: lean.group,
            predicted: lean.predicted,
            target: lean.target,
            turns,
            completion_tokens: lean.completion_tokens,
            valid: lean.valid,
            truncated: lean.truncated,
        };
        if r.group.is_empty() || r.turns.as_ref().is_some_and(Vec::is_empty) {
            return Rollout::from_json_line(text);
        }
        for sel in [&mut r.predicted, &mut r.target].into_iter().flatten() {
            sel.normalize();
        }
        Ok(r)
    }
}

/// A rollout record read in place: the strings of `group`, the selections'
/// files and functions and the calls' tools and entities borrowed from the
/// line (owned only where JSON escapes or path normalisation change them),
/// `args` checked but dropped. It accepts exactly the lines
/// [`Rollout::from_json_line`] accepts (the same keys and types, a `Cow` in
/// place of each `String`), so a loader that computes features as it reads
/// ([`crate::features::RowFeatures::values_of`]) needs no record of its own
/// per line; on a line it rejects, ask [`Rollout::from_json_line`] for the
/// message. Lines with JSON escapes in a string may be declined (`None`) even
/// when they are good: a caller then reads them as a [`Rollout`].
#[derive(Debug, PartialEq, Deserialize)]
pub struct RolloutRef<'a> {
    #[serde(borrow)]
    pub(crate) group: Text<'a>,
    #[serde(default, borrow)]
    pub(crate) predicted: Option<SelectionRef<'a>>,
    #[serde(default, borrow)]
    pub(crate) target: Option<SelectionRef<'a>>,
    #[serde(default, borrow)]
    pub(crate) turns: Option<Vec<Vec<CallRef<'a>>>>,
    #[serde(default)]
    pub(crate) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) valid: Option<bool>,
    #[serde(default)]
    pub(crate) truncated: Option<bool>,
}

/// What a reader of [`RolloutRef::parse_keeping`] needs kept. The rest is
/// checked as always but not built: a big log's line ranges are a `String`
/// each, which a formula without a line-range feature never reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    /// The selections' `line_ranges`.
    pub line_ranges: bool,
}

impl Keep {
    /// Everything, as [`RolloutRef::parse`] keeps it.
    pub const ALL: Keep = Keep { line_ranges: true };
}

/// [`Selection`] read in place.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SelectionRef<'a> {
    #[serde(default, borrow)]
    pub(crate) files: Option<Vec<Text<'a>>>,
    #[serde(default)]
    pub(crate) line_ranges: Option<Vec<LineRange>>,
    #[serde(default, borrow)]
    pub(crate) functions: Option<Vec<Text<'a>>>,
}

/// [`LoggedCall`] read in place, `args` checked and dropped. An entity's text
/// stands for its [`Entity`]: two texts name the same entity exactly when they
/// are equal (`Entity::parse` reads a line number only in its one canonical
/// spelling), so comparing texts is comparing entities.
#[derive(Debug, PartialEq, Deserialize)]
pub(crate) struct CallRef<'a> {
    #[serde(borrow, rename = "tool")]
    _tool: Text<'a>,
    #[serde(default, rename = "args")]
    _args: AnyJson,
    #[serde(default, borrow)]
    pub(crate) entities: Option<Vec<Text<'a>>>,
}

/// A JSON string borrowed from the line when it has no escapes (a `Cow<str>`
/// inside a `Vec` would always be copied): accepted exactly where a `String` is.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Text<'a>(pub(crate) Cow<'a, str>);

impl AsRef<str> for Text<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Cow<'de, str>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(Visitor).map(Text)
    }
}

impl<'a> RolloutRef<'a> {
    /// Reads one JSONL line as [`Rollout::from_json_line`] does (paths
    /// normalised, a non-empty group and `turns`); `None` whenever that
    /// function would reject the line (and possibly on some good lines; see
    /// the type's documentation).
    pub fn parse(text: &'a str) -> Option<RolloutRef<'a>> {
        // The hand-written reader takes the common lines (several times
        // faster); it declines the rest, which `serde_json` reads as before.
        let r: RolloutRef<'a> = scan::scan(text).or_else(|| serde_json::from_str(text).ok())?;
        r.checked()
    }

    /// [`RolloutRef::parse`] and the line's [`logged_step`], read in the same
    /// pass where the hand-written reader takes the line.
    pub fn parse_with_step(text: &'a str) -> Option<(RolloutRef<'a>, u64)> {
        RolloutRef::parse_keeping(text, Keep::ALL)
    }

    /// [`RolloutRef::parse_with_step`] for a reader that needs only what
    /// `keep` names: the same lines are accepted, and what is not kept may
    /// read as absent (it is where the hand-written reader takes the line).
    pub fn parse_keeping(text: &'a str, keep: Keep) -> Option<(RolloutRef<'a>, u64)> {
        let (r, step) = match scan::scan_keeping(text, keep) {
            Some(read) => read,
            None => (serde_json::from_str(text).ok()?, logged_step(text)),
        };
        Some((r.checked()?, step))
    }

    /// What [`Rollout::from_json_line`] checks beyond serde, and its path normalisation.
    fn checked(mut self) -> Option<RolloutRef<'a>> {
        let r = &mut self;
        if r.group.0.is_empty() || r.turns.as_ref().is_some_and(Vec::is_empty) {
            return None;
        }
        for sel in [&mut r.predicted, &mut r.target].into_iter().flatten() {
            for f in sel.files.iter_mut().flatten().filter(|f| !crate::paths::is_normal(&f.0)) {
                f.0 = Cow::Owned(crate::paths::normalize_lossy(&f.0));
            }
            for f in sel.functions.iter_mut().flatten() {
                if f.0.split_once("::").is_some_and(|(path, _)| !crate::paths::is_normal(path)) {
                    f.0 = Cow::Owned(normalize_function(&f.0));
                }
            }
        }
        Some(self)
    }

    /// The group (prompt) the rollout belongs to.
    pub fn group(&self) -> &str {
        &self.group.0
    }

    /// The group, borrowed from the line where it had no escapes.
    pub fn into_group(self) -> Cow<'a, str> {
        self.group.0
    }
}

/// The training step a rollout log's line was logged at, as `study replay`'s
/// alert replay reads it: the record's `step` when it is an unsigned integer,
/// else 0 (no `step`, a `step` of another type, or a line that is not JSON).
pub fn logged_step(text: &str) -> u64 {
    /// A record's `step`, whatever its type; every other key skipped unread.
    #[derive(Deserialize)]
    struct StepOf {
        #[serde(default)]
        step: serde_json::Value,
    }
    serde_json::from_str::<StepOf>(text).ok().and_then(|s| s.step.as_u64()).unwrap_or(0)
}

/// [`Rollout`] with each call's `args` checked but dropped.
#[derive(Deserialize)]
struct LeanRollout {
    group: String,
    #[serde(default)]
    predicted: Option<Selection>,
    #[serde(default)]
    target: Option<Selection>,
    #[serde(default)]
    turns: Option<Vec<Vec<LeanCall>>>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    valid: Option<bool>,
    #[serde(default)]
    truncated: Option<bool>,
}

#[derive(Deserialize)]
struct LeanCall {
    tool: String,
    /// Checked, never read.
    #[serde(default, rename = "args")]
    _args: AnyJson,
    #[serde(default)]
    entities: Option<Vec<Entity>>,
}

/// Any JSON value, accepted exactly when `serde_json::Value` accepts it (the
/// same `deserialize_any`, so a number out of `f64` range fails alike), and
/// not stored.
#[derive(Debug, Default, PartialEq)]
struct AnyJson;

impl<'de> Deserialize<'de> for AnyJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AnyJson, D::Error> {
        d.deserialize_any(AnyJsonVisitor)
    }
}

struct AnyJsonVisitor;

impl<'de> serde::de::Visitor<'de> for AnyJsonVisitor {
    type Value = AnyJson;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_i64<E>(self, _: i64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_u64<E>(self, _: u64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_f64<E>(self, _: f64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_str<E>(self, _: &str) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_unit<E>(self) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_none<E>(self) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<AnyJson, D::Error> {
        AnyJson::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<AnyJson, A::Error> {
        while seq.next_element::<AnyJson>()?.is_some() {}
        Ok(AnyJson)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<AnyJson, A::Error> {
        while map.next_entry::<AnyJson, AnyJson>()?.is_some() {}
        Ok(AnyJson)
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

/// Bytes of JSONL per parallel task of [`map_jsonl`].
const JSONL_CHUNK: usize = 1 << 20;

/// [`load_jsonl`] over a whole file's bytes, in parallel chunks of lines
/// (rayon): the same records, errors and line numbers, and the same
/// [`ReadError`] at the first line that is not UTF-8. `parse` may turn each
/// line into something smaller than the record (the features a loader needs),
/// so that a big log never holds all its records at once; it may borrow from
/// `data` (a group name read in place).
pub fn map_jsonl<'d, T: Send>(
    data: &'d [u8],
    what: &str,
    parse: impl Fn(&'d str) -> Result<T, String> + Sync,
) -> Result<Loaded<T>, ReadError> {
    use rayon::prelude::*;
    let mut chunks = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let cut = match rest.get(JSONL_CHUNK..).and_then(|tail| memchr::memchr(b'\n', tail)) {
            Some(p) => JSONL_CHUNK + p + 1,
            None => rest.len(),
        };
        let (head, tail) = rest.split_at(cut);
        chunks.push(head);
        rest = tail;
    }
    /// A chunk's lines parsed, numbered from 1 within the chunk.
    struct Part<T> {
        loaded: Loaded<T>,
        lines: usize,
        bad_utf8: Option<usize>,
    }
    let parts: Vec<Part<T>> = chunks
        .par_iter()
        .map(|chunk: &&'d [u8]| {
            let mut part =
                Part { loaded: Loaded { records: Vec::new(), errors: Vec::new() }, lines: 0, bad_utf8: None };
            let body: &'d [u8] = chunk.strip_suffix(b"\n").unwrap_or(chunk);
            // The chunk is checked as UTF-8 once; where it is, its lines are
            // cut at the newlines memchr finds (each cut is at an ASCII byte,
            // so each line is a `str`). A chunk that is not is split as bytes
            // and each line checked, so its bad line is found (`None`).
            let text = std::str::from_utf8(body).ok();
            let mut start = 0;
            let mut line_no = 0;
            while start <= body.len() {
                let end = memchr::memchr(b'\n', &body[start..]).map_or(body.len(), |p| start + p);
                line_no += 1;
                part.lines = line_no;
                let line = match text {
                    Some(text) => Some(&text[start..end]),
                    None => std::str::from_utf8(&body[start..end]).ok(),
                };
                start = end + 1;
                let Some(text) = line else {
                    part.bad_utf8 = Some(line_no);
                    break;
                };
                let text = text.strip_suffix('\r').unwrap_or(text);
                if text.trim().is_empty() {
                    continue;
                }
                match parse(text) {
                    Ok(r) => part.loaded.records.push((line_no, r)),
                    Err(message) => part.loaded.errors.push(RecordError { line: line_no, message }),
                }
            }
            part
        })
        .collect();
    // Sized once: growing a big log's records by doubling copies them into
    // fresh pages, on one core, after the parallel part.
    let records = parts.iter().map(|p| p.loaded.records.len()).sum();
    let mut out = Loaded { records: Vec::with_capacity(records), errors: Vec::new() };
    let mut base = 0;
    for part in parts {
        if let Some(line) = part.bad_utf8 {
            let source = std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8");
            return Err(ReadError { what: what.to_string(), line: base + line, source });
        }
        out.records.extend(part.loaded.records.into_iter().map(|(line, r)| (base + line, r)));
        out.errors.extend(part.loaded.errors.into_iter().map(|e| RecordError { line: base + e.line, ..e }));
        base += part.lines;
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
    fn parallel_chunks_give_the_sequential_loaders_records_and_errors() {
        let good = r#"{"group": "a", "turns": [[]]}"#;
        let mut text = String::new();
        for i in 0..150_000 {
            text.push_str(match i % 7 {
                0 => "",
                3 => "not json",
                5 => "  ",
                _ => good,
            });
            text.push_str(if i % 11 == 0 { "\r\n" } else { "\n" });
        }
        text.push_str(good); // a last line without a newline
        assert!(text.len() > 2 * JSONL_CHUNK, "the test spans several chunks");
        let want = load_rollouts(text.as_bytes()).expect("in-memory read");
        let got = map_jsonl(text.as_bytes(), "rollouts", Rollout::from_json_line).expect("in-memory read");
        assert_eq!(got, want);
        assert!(!got.errors.is_empty() && got.records.len() > 80_000);
        // The first line that is not UTF-8 is a read error with its number, as for the sequential reader.
        let mut bad = text.into_bytes();
        let at = bad.len() - 3 * JSONL_CHUNK / 2;
        let line = bad[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        bad[at] = 0xff;
        let want = load_rollouts(bad.as_slice()).expect_err("bad utf-8");
        let got = map_jsonl(&bad, "rollouts", Rollout::from_json_line).expect_err("bad utf-8");
        assert_eq!(
            (got.line, got.to_string(), got.source.to_string()),
            (line, want.to_string(), want.source.to_string())
        );
    }

    #[test]
    fn dropping_args_changes_nothing_else() {
        let one_line = CONTRACT_EXAMPLE.replace('\n', " ");
        let mut want = Rollout::from_json_line(&one_line).expect("parses");
        for call in want.turns.iter_mut().flatten().flatten() {
            call.args = serde_json::Value::Null;
        }
        assert_eq!(Rollout::from_json_line_without_args(&one_line), Ok(want));
        // Lines the full reader rejects are rejected with its message, including
        // `args` that are not valid JSON values and checks serde cannot make.
        for line in [
            r#"{"group": "a", "turns": [[{"tool": "grep", "args": {"n": 1e400}}], []]}"#,
            r#"{"group": "a", "turns": [[{"tool": "grep", "args": [1, 2,]}], []]}"#,
            r#"{"group": "", "turns": [[]]}"#,
            r#"{"group": "a", "turns": []}"#,
            r#"{"group": "a", "predicted": {"files": ["x"], "line_range": []}}"#,
            r#"{"turns": [[]]}"#,
            "not json",
        ] {
            let want = Rollout::from_json_line(line).expect_err(line);
            assert_eq!(Rollout::from_json_line_without_args(line), Err(want), "{line}");
        }
    }

    /// Lines the hand-written reader is meant to take: the contract's
    /// example, a line shaped like `benches/eval_gen.py`'s (escapes in `args`),
    /// and one with nulls, unknown keys, empty lists and numbers to skip.
    fn scan_templates() -> Vec<String> {
        vec![
            CONTRACT_EXAMPLE.replace('\n', " "),
            r#"{"group": "repo__issue-3", "predicted": {"files": ["src/pkg1/module_2.py"], "line_ranges": ["src/pkg1/module_2.py:10-20"]}, "target": {"files": ["src/pkg1/module_2.py", "src/pkg3/module_9.py"], "line_ranges": ["src/pkg3/module_9.py:4-4"]}, "turns": [[{"tool": "grep", "args": {"pattern": "def handle_12\\b", "path": "src"}, "entities": ["src/pkg1/module_2.py:41", "src/pkg3/module_9.py:7"]}, {"tool": "read", "args": {"path": "src/pkg1/module_2.py", "start": 5, "end": 45}, "entities": ["src/pkg1/module_2.py:5"]}], []], "completion_tokens": 1234, "valid": true, "truncated": false}"#.to_string(),
            r#" {"step": 3, "group": "g", "predicted": null, "valid": false, "target": {"files": [], "functions": ["a.py::f"], "line_ranges": null}, "turns": [[{"tool": "glob", "args": [-0.5, 10, true, false, null, {}, [], "\t\"\/"], "entities": null, "id": 7}], []], "completion_tokens": null, "truncated": null, "reward": {"x": [1.25, -3]}} "#.to_string(),
        ]
    }

    #[test]
    fn the_hand_written_reader_takes_the_common_lines() {
        for line in scan_templates() {
            let want: RolloutRef<'_> = serde_json::from_str(&line).expect("serde_json reads it");
            assert_eq!(scan::scan(&line).as_ref(), Some(&want), "{line}");
        }
    }

    /// Every line the hand-written reader accepts, `serde_json` reads into the
    /// same record: each template with every byte deleted, doubled or replaced
    /// by a character that matters to JSON.
    #[test]
    fn the_hand_written_reader_accepts_only_what_serde_json_reads_alike() {
        let (mut accepted, mut declined) = (0, 0);
        for line in scan_templates() {
            let bytes = line.as_bytes();
            for at in 0..bytes.len() {
                let mut variants: Vec<Vec<u8>> =
                    vec![[&bytes[..at], &bytes[at + 1..]].concat(), [&bytes[..=at], &bytes[at..]].concat()];
                for &c in b"\"\\,:[]{}0-.e1 nutx/" {
                    variants.push([&bytes[..at], &[c][..], &bytes[at + 1..]].concat());
                }
                for v in variants {
                    let Ok(text) = std::str::from_utf8(&v) else { continue };
                    match scan::scan(text) {
                        Some(got) => {
                            let want = serde_json::from_str::<RolloutRef<'_>>(text);
                            assert_eq!(want.as_ref().ok(), Some(&got), "{text}");
                            accepted += 1;
                        }
                        None => declined += 1,
                    }
                }
            }
        }
        // Both sides are exercised.
        assert!(accepted > 1000 && declined > 1000, "{accepted} accepted, {declined} declined");
    }

    /// A reader that keeps no line ranges takes exactly the lines the full
    /// reader takes (bad ranges included: they are checked alike), and reads
    /// the same record but for the ranges; through `parse_keeping` too, where
    /// `serde_json` reads what the hand-written reader declines.
    #[test]
    fn not_keeping_line_ranges_accepts_the_same_lines() {
        let lean = Keep { line_ranges: false };
        let mut lines = scan_templates();
        lines.push(
            r#"{"group": "g", "predicted": {"line_ranges": ["./a/../b.py:3", "a:b.py:4-4", "x.py:2-1"]}}"#.into(),
        );
        let (mut accepted, mut compared) = (0, 0);
        for line in lines {
            let bytes = line.as_bytes();
            for at in 0..bytes.len() {
                for &c in b"\",:[]0-.1 /x" {
                    let v = [&bytes[..at], &[c][..], &bytes[at + 1..]].concat();
                    let Ok(text) = std::str::from_utf8(&v) else { continue };
                    let full = scan::scan_with_step(text);
                    let read = scan::scan_keeping(text, lean);
                    assert_eq!(full.is_some(), read.is_some(), "{text}");
                    if let (Some((mut want, step)), Some(got)) = (full, read) {
                        for sel in [&mut want.predicted, &mut want.target].into_iter().flatten() {
                            sel.line_ranges = None;
                        }
                        assert_eq!(Some((want, step)), Some(got), "{text}");
                        accepted += 1;
                    }
                    let full = RolloutRef::parse_with_step(text).map(|(r, _)| (r.group, r.turns.map(|t| t.len())));
                    let read = RolloutRef::parse_keeping(text, lean).map(|(r, _)| (r.group, r.turns.map(|t| t.len())));
                    assert_eq!(full, read, "{text}");
                    compared += 1;
                }
            }
        }
        assert!(accepted > 1000 && compared > 10_000, "{accepted} accepted, {compared} compared");
    }

    /// The step the hand-written reader reads with a record is
    /// [`logged_step`]'s (`serde_json`'s) on every line it takes: steps of
    /// every JSON type, duplicated, and each template mutated byte by byte.
    #[test]
    fn the_hand_written_reader_reads_the_step_as_serde_json_does() {
        let body = r#""group": "g", "turns": [[{"tool": "grep", "entities": ["a.py:3"]}], []]"#;
        let mut lines: Vec<String> = [
            "3",
            "0",
            "18446744073709551615",
            "123456789012345",
            "-2",
            "-0",
            "2.5",
            "4.0",
            "\"4\"",
            "null",
            "true",
            "[1]",
            "{\"step\": 2}",
        ]
        .iter()
        .flat_map(|v| [format!("{{{body}, \"step\": {v}}}"), format!("{{\"step\":{v} , {body}}}")])
        .collect();
        lines.push(format!("{{{body}}}"));
        lines.push(format!("{{\"step\": 2, {body}, \"step\": 2}}"));
        lines.push(format!("{{\"steps\": 2, {body}}}"));
        let (mut accepted, mut with_step) = (0, 0);
        for line in lines.clone() {
            let bytes = line.as_bytes();
            let mut variants = vec![bytes.to_vec()];
            for at in 0..bytes.len() {
                variants.push([&bytes[..at], &bytes[at + 1..]].concat());
                for &c in b"\"1-.0 " {
                    variants.push([&bytes[..at], &[c][..], &bytes[at + 1..]].concat());
                }
            }
            for v in variants {
                let Ok(text) = std::str::from_utf8(&v) else { continue };
                if let Some((_, step)) = scan::scan_with_step(text) {
                    assert_eq!(step, logged_step(text), "{text}");
                    accepted += 1;
                    with_step += usize::from(step > 0);
                }
                // The public reader agrees wherever it reads the line, whichever reader took it.
                if let Some((r, step)) = RolloutRef::parse_with_step(text) {
                    assert_eq!((Some(r), step), (RolloutRef::parse(text), logged_step(text)), "{text}");
                }
            }
        }
        assert!(accepted > 500 && with_step > 100, "{accepted} accepted, {with_step} with a step");
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
