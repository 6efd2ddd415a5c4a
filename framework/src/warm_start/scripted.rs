//! A scripted searcher: the teacher whose trajectories the SFT warm start imitates.
//!
//! It searches the way the synthetic tasks are meant to be solved (and the way the retrieval
//! baseline test shows beats BM25): grep for the issue's error messages, quoted fragments and
//! identifiers; rank files by how specifically the patterns hit them; optionally look up the
//! function around the best hit and grep for its callers; answer with the top files. Every call
//! is a real sandbox call, and every assistant turn is written in Qwen3's template format and
//! parsed back with the policy's own parser before it is run, so what is trained on is exactly
//! what was executed.
//!
//! A seed varies the strategy (how many patterns, in which order, redundant repeats, whether
//! to look up the function, how many files to answer), so the trajectories range from precise
//! and efficient to sloppy and redundant: the joint filter then has something to choose from.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rewardlab_models::template;
use rewardlab_rewards::rollout::LoggedCall;
pub use rewardlab_sandbox::escape_regex;
use rewardlab_sandbox::{Entity, GrepArgs, ReadArgs, Sandbox, ToolCall, ToolResult, Tree};
use serde::Serialize;

use super::WarmStartError;
use crate::engine::EngineTask;

/// How the scripted searcher behaves. The probabilities are what make trajectories differ
/// in quality from one seed to the next.
#[derive(Clone, Debug, PartialEq)]
pub struct SearcherOptions {
    /// Path filter of every grep (`grep --include` style).
    pub grep_path: Option<String>,
    /// Patterns hitting more distinct files than this say nothing and are not ranked on.
    pub max_files_per_pattern: usize,
    /// At most this many patterns are grepped in the first turn.
    pub max_patterns: usize,
    /// Chance of taking the patterns in a random order instead of most specific first.
    pub shuffle_probability: f64,
    /// Chance, per pattern, of also grepping it case-insensitively: a call that mostly
    /// returns lines already seen, the redundancy tool efficiency `e` penalises.
    pub redundant_probability: f64,
    /// Chance of looking up the function around the best hit and grepping for its users.
    pub follow_probability: f64,
    /// Lines shown on either side of the best hit when it is read.
    pub read_context: u64,
    /// The answer lists between 1 and this many files.
    pub max_answer_files: usize,
}

impl Default for SearcherOptions {
    fn default() -> Self {
        SearcherOptions {
            grep_path: Some("*.py".to_owned()),
            max_files_per_pattern: 12,
            max_patterns: 6,
            shuffle_probability: 0.3,
            redundant_probability: 0.3,
            follow_probability: 0.6,
            read_context: 3,
            max_answer_files: 3,
        }
    }
}

/// One exploration turn: the assistant's text (with its `<tool_call>` blocks), the calls it
/// holds, and what the sandbox returned for each.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchTurn {
    /// The assistant's text, `<tool_call>` blocks included.
    pub text: String,
    /// The calls the text holds, in order.
    pub calls: Vec<ToolCall>,
    /// The sandbox's result of each call, in call order.
    pub results: Vec<ToolResult>,
}

/// A finished scripted rollout.
#[derive(Clone, Debug, PartialEq)]
pub struct Trajectory {
    /// The task's id.
    pub task_id: String,
    /// The user turn: the issue text.
    pub prompt: String,
    /// Exploration turns, in order.
    pub turns: Vec<SearchTurn>,
    /// The final assistant turn, holding `<answer>{...}</answer>`.
    pub answer: String,
}

impl Trajectory {
    /// Every assistant turn's text, the answer last.
    pub fn assistant_texts(&self) -> Vec<&str> {
        self.turns.iter().map(|t| t.text.as_str()).chain(std::iter::once(self.answer.as_str())).collect()
    }

    /// The calls of each turn as rollout records log them (tool, arguments, entities shown),
    /// with the answer turn's empty list last, as the GRPO engine logs its own rollouts.
    pub fn logged_turns(&self) -> Vec<Vec<LoggedCall>> {
        let mut turns: Vec<Vec<LoggedCall>> = self
            .turns
            .iter()
            .map(|t| t.calls.iter().zip(&t.results).map(|(call, result)| LoggedCall::of(call, result)).collect())
            .collect();
        turns.push(Vec::new());
        turns
    }
}

/// The scripted searcher.
#[derive(Clone, Debug, Default)]
pub struct ScriptedSearcher {
    /// How the searcher explores and answers.
    pub options: SearcherOptions,
}

impl ScriptedSearcher {
    /// A searcher with these options.
    pub fn new(options: SearcherOptions) -> Self {
        ScriptedSearcher { options }
    }

    /// Searches `tree` (the task's repository at its commit) for `task` within `max_turns`
    /// turns (the answer's included; at least 2) and returns the trajectory. `seed` fixes
    /// every choice.
    pub fn run(
        &self,
        sandbox: &Sandbox,
        tree: &Tree,
        task: &EngineTask,
        max_turns: usize,
        seed: u64,
    ) -> Result<Trajectory, WarmStartError> {
        let o = &self.options;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut turns = Vec::new();

        // Turn 1: grep the issue's patterns, most specific first unless the seed shuffles.
        let mut patterns = issue_patterns(&task.prompt);
        patterns.sort_by(|a, b| b.weight.total_cmp(&a.weight));
        if rng.random_bool(o.shuffle_probability.clamp(0.0, 1.0)) {
            patterns.shuffle(&mut rng);
        }
        let limit = o.max_patterns.min(sandbox.limits().max_calls_per_turn).max(1);
        let take = if patterns.is_empty() { 0 } else { rng.random_range(1..=patterns.len().min(limit)) };
        patterns.truncate(take);
        let mut calls = Vec::new();
        let mut weights = Vec::new();
        for p in &patterns {
            if calls.len() >= limit {
                break;
            }
            calls.push(self.grep(&p.regex, true));
            weights.push(p.weight);
            if calls.len() < limit && rng.random_bool(o.redundant_probability.clamp(0.0, 1.0)) {
                // The same search again, case-insensitively: it mostly returns what the first
                // call showed, so it buys little information.
                calls.push(self.grep(&p.regex, false));
                weights.push(0.0);
            }
        }
        if calls.is_empty() {
            // Nothing specific in the issue: fall back to a listing of the source files.
            calls.push(ToolCall::Glob(rewardlab_sandbox::GlobArgs { pattern: "**/*.py".to_owned() }));
            weights.push(0.0);
        }
        let intro = if patterns.is_empty() {
            "The issue names nothing specific to search for; I will list the source files first."
        } else {
            "I will search for the error message, quoted text and identifiers from the issue."
        };
        let first = run_turn(sandbox, tree, task, intro, calls)?;
        let ranking = rank_files(&first, &weights, o.max_files_per_pattern);
        let best_hit = best_hit(&first, &weights, ranking.first().map(String::as_str));
        turns.push(first);

        // Turns 2 and 3: the function around the best hit, then its users.
        let mut answer: Vec<String> = ranking.iter().take(1).cloned().collect();
        let mut range = None;
        // The seed decides first, so that the turn limit changes no other choice; each
        // follow-up turn runs only while a turn is left for the answer.
        let follow = rng.random_bool(o.follow_probability.clamp(0.0, 1.0));
        if let Some((path, line)) = best_hit
            && follow
            && max_turns >= 3
        {
            let start = line.saturating_sub(o.read_context).max(1);
            let lookup = vec![
                ToolCall::Grep(GrepArgs {
                    pattern: r"^\s*(async\s+)?def \w+".to_owned(),
                    path: Some(path.clone()),
                    case_sensitive: None,
                }),
                ToolCall::Read(ReadArgs { path: path.clone(), start: Some(start), end: Some(line + o.read_context) }),
            ];
            let text = format!("The best match is {path}:{line}; I will find the function around it and read it.");
            let second = run_turn(sandbox, tree, task, &text, lookup)?;
            let enclosing = enclosing_function(&second.results[0].output, &path, line);
            turns.push(second);
            if let Some((_, def_line)) = &enclosing {
                range = Some(format!("{path}:{def_line}-{}", line.max(*def_line)));
            }
            if let Some((name, _)) = enclosing.filter(|_| max_turns >= 4) {
                let text = format!("The hit is inside `{name}`; I will look for the code that uses it.");
                let users = vec![self.grep(&format!(r"\b{}\b", escape_regex(&name)), true)];
                let third = run_turn(sandbox, tree, task, &text, users)?;
                let mut counts: BTreeMap<String, usize> = BTreeMap::new();
                for entity in &third.results[0].entities {
                    let file = entity.path();
                    if file != path {
                        *counts.entry(file.to_owned()).or_default() += 1;
                    }
                }
                let mut users: Vec<(String, usize)> = counts.into_iter().collect();
                users.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                answer.extend(users.into_iter().take(1).map(|(p, _)| p));
                turns.push(third);
            }
        }
        for file in ranking.iter().skip(1) {
            if !answer.contains(file) {
                answer.push(file.clone());
            }
        }
        let keep = rng.random_range(1..=o.max_answer_files.max(1));
        answer.truncate(keep);

        let body = AnswerBody { files: &answer, line_ranges: range.iter().collect() };
        let json = to_qwen_json(&body)?;
        let answer = if answer.is_empty() {
            format!("I could not find the relevant code.\n<answer>{json}</answer>")
        } else {
            format!("The relevant files are {}.\n<answer>{json}</answer>", answer.join(", "))
        };
        Ok(Trajectory { task_id: task.id.clone(), prompt: task.prompt.clone(), turns, answer })
    }

    fn grep(&self, pattern: &str, case_sensitive: bool) -> ToolCall {
        ToolCall::Grep(GrepArgs {
            pattern: pattern.to_owned(),
            path: self.options.grep_path.clone(),
            case_sensitive: if case_sensitive { None } else { Some(false) },
        })
    }
}

/// An assistant turn's text: a sentence, then one `<tool_call>` block per call in the layout
/// of Qwen3's chat template (`<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`).
pub fn render_calls(intro: &str, calls: &[ToolCall]) -> Result<String, WarmStartError> {
    let mut text = intro.to_owned();
    for call in calls {
        let arguments = match call {
            ToolCall::Grep(a) => to_qwen_json(a)?,
            ToolCall::Glob(a) => to_qwen_json(a)?,
            ToolCall::Read(a) => to_qwen_json(a)?,
            other => return Err(WarmStartError::Render(format!("no template form for tool {:?}", other.name()))),
        };
        let name = to_qwen_json(&call.name())?;
        text.push_str(&format!("\n<tool_call>\n{{\"name\": {name}, \"arguments\": {arguments}}}\n</tool_call>"));
    }
    Ok(text)
}

/// The calls of an assistant turn as the policy's parser reads them (the sandbox's own call
/// type). A malformed block is an error (the scripted searcher never writes one).
pub fn parse_calls(text: &str) -> Result<Vec<ToolCall>, WarmStartError> {
    template::parse_tool_calls(text)
        .into_iter()
        .map(|parsed| parsed.map_err(|e| WarmStartError::Render(format!("a rendered tool call does not parse: {e}"))))
        .collect()
}

/// Renders, parses back (it must give the planned calls) and runs one turn.
fn run_turn(
    sandbox: &Sandbox,
    tree: &Tree,
    task: &EngineTask,
    intro: &str,
    calls: Vec<ToolCall>,
) -> Result<SearchTurn, WarmStartError> {
    let text = render_calls(intro, &calls)?;
    let parsed = parse_calls(&text)?;
    if parsed != calls {
        return Err(WarmStartError::Render(format!(
            "task `{}`: the turn parses back to {parsed:?}, not the planned {calls:?}",
            task.id
        )));
    }
    let results = sandbox.run_turn_blocking(tree, &parsed);
    Ok(SearchTurn { text, calls: parsed, results })
}

#[derive(Serialize)]
struct AnswerBody<'a> {
    files: &'a [String],
    line_ranges: Vec<&'a String>,
}

/// JSON with the `", "` and `": "` separators of the `tojson` filter in Qwen's template.
fn to_qwen_json<T: Serialize + ?Sized>(value: &T) -> Result<String, WarmStartError> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, QwenFormatter);
    value.serialize(&mut ser).map_err(|e| WarmStartError::Render(e.to_string()))?;
    String::from_utf8(out).map_err(|e| WarmStartError::Render(e.to_string()))
}

struct QwenFormatter;

impl serde_json::ser::Formatter for QwenFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// A search pattern drawn from an issue: a regex matching the text literally, and how
/// specific it is (an error message says more than an identifier).
#[derive(Clone, Debug, PartialEq)]
pub struct IssuePattern {
    /// A regex that matches the literal's text (escaped, word-bounded for identifiers).
    pub regex: String,
    /// The literal's weight: higher is more specific.
    pub weight: f64,
}

/// A literal string worth searching for in an issue, before it becomes a regex.
#[derive(Clone, Debug, PartialEq)]
pub struct IssueLiteral {
    /// The text as the issue writes it.
    pub text: String,
    /// How specific it is: 4 for an error message, 3 for a quoted phrase, 1 for an identifier.
    pub weight: f64,
    /// Match whole words only (identifiers).
    pub whole_word: bool,
}

/// The patterns of an issue ([`issue_literals`], escaped; whole words between `\b`s).
pub fn issue_patterns(prompt: &str) -> Vec<IssuePattern> {
    issue_literals(prompt)
        .into_iter()
        .map(|l| {
            let escaped = escape_regex(&l.text);
            let regex = if l.whole_word { format!(r"\b{escaped}\b") } else { escaped };
            IssuePattern { regex, weight: l.weight }
        })
        .collect()
}

/// The literals of an issue: error messages after `SomethingError: ` (and their prefixes
/// before `: `, weight 4), quoted phrases (weight 3), compound identifiers in backticks or
/// code blocks (weight 1, whole words). Each literal once, at least 4 characters.
pub fn issue_literals(prompt: &str) -> Vec<IssueLiteral> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |literal: &str, weight: f64, whole_word: bool, out: &mut Vec<IssueLiteral>| {
        if literal.len() >= 4 && seen.insert(literal.to_owned()) {
            out.push(IssueLiteral { text: literal.to_owned(), weight, whole_word });
        }
    };
    let mut in_code = false;
    for line in prompt.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if let Some((exception, message)) = line.trim().split_once(": ")
            && exception.ends_with("Error")
            && exception.chars().all(char::is_alphanumeric)
        {
            let mut message = message;
            loop {
                add(message, 4.0, false, &mut out);
                match message.rsplit_once(": ") {
                    Some((head, _)) => message = head,
                    None => break,
                }
            }
        }
        if in_code {
            for identifier in identifiers(line) {
                add(identifier, 1.0, true, &mut out);
            }
            continue;
        }
        for (i, quoted) in line.split('"').enumerate() {
            if i % 2 == 1 && quoted.contains(' ') {
                add(quoted, 3.0, false, &mut out);
            }
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 {
                for identifier in identifiers(span) {
                    add(identifier, 1.0, true, &mut out);
                }
            }
        }
    }
    out
}

/// Compound identifiers (`snake_case` or `CamelCase`) of at least 4 characters.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.len() >= 4)
        .filter(|w| w.trim_matches('_').contains('_') || w.chars().skip(1).any(char::is_uppercase))
}

/// Files ranked by the weight of the patterns that hit them, each pattern's weight spread
/// over the distinct files it hit; patterns hitting too many files are not counted.
fn rank_files(turn: &SearchTurn, weights: &[f64], max_files: usize) -> Vec<String> {
    let mut scores: BTreeMap<&str, f64> = BTreeMap::new();
    for (result, &weight) in turn.results.iter().zip(weights) {
        let files: BTreeSet<&str> = result.entities.iter().map(|e| e.path()).collect();
        if weight <= 0.0 || files.is_empty() || files.len() > max_files {
            continue;
        }
        for file in &files {
            *scores.entry(file).or_default() += weight / files.len() as f64;
        }
    }
    let mut ranked: Vec<(&str, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    ranked.into_iter().map(|(f, _)| f.to_owned()).collect()
}

/// The first line of `best` hit by the most specific pattern that hit it.
fn best_hit(turn: &SearchTurn, weights: &[f64], best: Option<&str>) -> Option<(String, u64)> {
    let best = best?;
    let mut order: Vec<usize> = (0..turn.results.len().min(weights.len())).collect();
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    order.into_iter().filter(|&i| weights[i] > 0.0).find_map(|i| {
        turn.results[i].entities.iter().find_map(|e| match e {
            Entity::Line { path, line } if path == best => Some((path.clone(), *line)),
            _ => None,
        })
    })
}

/// The name and line of the last `def` at or above `line`, from a grep's `path:line:text`
/// output over `path`.
fn enclosing_function(output: &str, path: &str, line: u64) -> Option<(String, u64)> {
    output
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(path)?.strip_prefix(':')?;
            let (n, text) = rest.split_once(':')?;
            let n: u64 = n.parse().ok()?;
            let def = text.trim_start().trim_start_matches("async").trim_start().strip_prefix("def ")?;
            let name = def.split(|c: char| !(c.is_alphanumeric() || c == '_')).next()?;
            (n <= line && !name.is_empty()).then(|| (name.to_owned(), n))
        })
        .max_by_key(|&(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_come_from_messages_quotes_and_identifiers() {
        let prompt = "# `Store.load_all` fails\nI see \"no such key here\" when calling `load_all(x)`.\n\
                      ```\nTraceback\nKeyError: missing key: cache_entry\n    store.fetch_item()\n```\n";
        let patterns = issue_patterns(prompt);
        let regexes: Vec<&str> = patterns.iter().map(|p| p.regex.as_str()).collect();
        assert_eq!(
            regexes,
            [
                r"\bload_all\b",
                "no such key here",
                "missing key: cache_entry",
                "missing key",
                r"\bKeyError\b",
                r"\bcache_entry\b",
                r"\bfetch_item\b"
            ],
            "`Store` is a plain word, not a compound identifier"
        );
        let weights: Vec<f64> = patterns.iter().map(|p| p.weight).collect();
        assert_eq!(weights, [1.0, 3.0, 4.0, 4.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn regex_escaping_covers_the_metacharacters() {
        assert_eq!(escape_regex("a.b(c)[d]{e}|f*g+h?i^j$k\\"), r"a\.b\(c\)\[d\]\{e\}\|f\*g\+h\?i\^j\$k\\");
        assert_eq!(escape_regex("plain_text 12"), "plain_text 12");
    }

    #[test]
    fn rendered_calls_parse_back_to_the_same_calls() {
        let calls = vec![
            ToolCall::Grep(GrepArgs {
                pattern: r#"say "hi" \(now\)"#.into(),
                path: Some("*.py".into()),
                case_sensitive: Some(false),
            }),
            ToolCall::Read(ReadArgs { path: "pkg/a.py".into(), start: Some(3), end: Some(9) }),
            ToolCall::Glob(rewardlab_sandbox::GlobArgs { pattern: "**/*.py".into() }),
            ToolCall::Grep(GrepArgs { pattern: "x".into(), path: None, case_sensitive: None }),
        ];
        let text = render_calls("Searching.", &calls).expect("render");
        assert!(text.starts_with(
            "Searching.\n<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"pattern\": \"say \\\"hi\\\" \\\\(now\\\\)\", \
             \"path\": \"*.py\", \"case_sensitive\": false}}\n</tool_call>\n<tool_call>\n"
        ));
        assert_eq!(parse_calls(&text).expect("parse"), calls);
        assert_eq!(template::parse_tool_calls(&text).len(), 4);
    }

    #[test]
    fn the_enclosing_function_is_the_last_def_above_the_line() {
        let out = "a.py:3:def first(x):\na.py:10:    def second(self):\na.py:20:async def third():\n";
        assert_eq!(enclosing_function(out, "a.py", 12), Some(("second".into(), 10)));
        assert_eq!(enclosing_function(out, "a.py", 25), Some(("third".into(), 20)));
        assert_eq!(enclosing_function(out, "a.py", 2), None);
        assert_eq!(Entity::parse("a/b.py:12").path(), "a/b.py");
        assert_eq!(Entity::parse("a/b.py").path(), "a/b.py");
    }
}
