//! The parameter layout and the feature maps of the three decision kinds.
//!
//! One flat `θ` holds every block; a feature is a `(global index, value)`
//! pair, so the log-linear math never needs to know which decision it serves.
//!
//! | block | size | used by |
//! |---|---|---|
//! | count bias | 9 | one per option: answer, 1 … 8 calls |
//! | count × answer | [`STATE`] | the turn state, on the "answer now" option |
//! | count × calls | [`STATE`] | the turn state × n/8, on every "n calls" option |
//! | call kind | 9 | tool × source one-hot |
//! | grep text | [`TEXT`] | term features of grep candidates |
//! | glob text | [`TEXT`] | term features of glob candidates |
//! | read | [`READ`] | what results said about a file to read |
//! | include | [`INCLUDE`] | per seen file, the "include" option of a Bernoulli |

use super::episode::{CALL_KINDS, CallKind, Candidate, ProxyEpisode, SeenFile};
use super::loglinear::Features;
use super::text::looks_rare;

/// Options of the count decision: answer, then 1 … `MAX_CALLS` calls.
pub(crate) const MAX_CALLS: usize = rewardlab_sandbox::MAX_CALLS_PER_TURN;
/// Size of the turn-state vector.
pub(crate) const STATE: usize = 14;
/// Term features of a grep or glob candidate.
pub(crate) const TEXT: usize = 14;
/// Features of a read candidate.
pub(crate) const READ: usize = 6;
/// Features of the include option.
pub(crate) const INCLUDE: usize = 14;

pub(crate) const COUNT_BIAS: usize = 0;
pub(crate) const COUNT_ANSWER: usize = COUNT_BIAS + MAX_CALLS + 1;
pub(crate) const COUNT_CALLS: usize = COUNT_ANSWER + STATE;
pub(crate) const CALL_KIND: usize = COUNT_CALLS + STATE;
pub(crate) const GREP_TEXT: usize = CALL_KIND + CALL_KINDS;
pub(crate) const GLOB_TEXT: usize = GREP_TEXT + TEXT;
pub(crate) const READ_FILE: usize = GLOB_TEXT + TEXT;
pub(crate) const INCLUDE_FILE: usize = READ_FILE + READ;
/// Number of parameters.
pub const DIM: usize = INCLUDE_FILE + INCLUDE;

/// Index of "turn 0" in the state vector (the prior uses it).
pub(crate) const STATE_TURN0: usize = 1;

/// The turn state: `[1, turn 0, turn 1, turn ≥ 2, no file seen, 1–3, 4–10, > 10,
/// any grep hit, a message grep hit, ≤ 2 candidates left, 3–8, > 8, new files last turn]`.
pub(crate) fn state(episode: &ProxyEpisode, turn: usize, available: usize) -> [f64; STATE] {
    let mut s = [0.0; STATE];
    s[0] = 1.0;
    s[1 + turn.min(2)] = 1.0;
    let seen = episode.seen.len();
    s[4 + match seen {
        0 => 0,
        1..=3 => 1,
        4..=10 => 2,
        _ => 3,
    }] = 1.0;
    s[8] = flag(episode.seen.iter().any(|f| f.hits > 0));
    s[9] = flag(episode.seen.iter().any(|f| f.by_message));
    s[10 + match available {
        0..=2 => 0,
        3..=8 => 1,
        _ => 2,
    }] = 1.0;
    s[13] = flag(episode.new_files_last_turn);
    s
}

/// The options of the count decision for up to `max_calls` calls.
pub(crate) fn count_options(state: &[f64; STATE], max_calls: usize) -> Vec<Features> {
    let mut options = Vec::with_capacity(max_calls + 1);
    let mut answer = vec![(COUNT_BIAS, 1.0)];
    answer.extend(state.iter().enumerate().filter(|(_, x)| **x != 0.0).map(|(i, x)| (COUNT_ANSWER + i, *x)));
    options.push(answer);
    for n in 1..=max_calls.min(MAX_CALLS) {
        let scale = n as f64 / MAX_CALLS as f64;
        let mut calls = vec![(COUNT_BIAS + n, 1.0)];
        calls.extend(state.iter().enumerate().filter(|(_, x)| **x != 0.0).map(|(i, x)| (COUNT_CALLS + i, x * scale)));
        options.push(calls);
    }
    options
}

/// Features of calling `candidate` now.
pub(crate) fn call_features(episode: &ProxyEpisode, candidate: &Candidate) -> Features {
    let mut phi = vec![(CALL_KIND + candidate.kind as usize, 1.0)];
    if let Some(t) = candidate.term {
        let term = &episode.terms[t];
        let base = if candidate.kind.is_grep() { GREP_TEXT } else { GLOB_TEXT };
        let len = term.text.chars().count();
        let bucket = match len {
            0..=4 => 0,
            5..=10 => 1,
            11..=24 => 2,
            _ => 3,
        };
        let lower = term.text.to_ascii_lowercase();
        let previous = episode.calls_per_term.get(&term.text).copied().unwrap_or(0);
        let values = [
            (bucket, 1.0),
            (4, term.position),
            (5, flag(looks_rare(&term.text))),
            (6, flag(term.in_traceback)),
            (7, flag(term.in_code)),
            (8, flag(term.in_title)),
            (9, ln1p(term.text.split_whitespace().count())),
            (10, ln1p(term.count)),
            (11, ln1p(previous)),
            (12, flag(episode.seen.iter().any(|f| f.path.to_ascii_lowercase().contains(&lower)))),
            // A name found in a read file that the issue also mentions (the method in the title).
            (13, flag(candidate.kind == CallKind::GrepResultName && named_in_issue(episode, &term.text))),
        ];
        phi.extend(values.iter().filter(|(_, x)| *x != 0.0).map(|&(i, x)| (base + i, x)));
    }
    if let Some(i) = candidate.seen {
        let file = &episode.seen[i];
        let rank = episode.ranked_files().iter().position(|&j| j == i).unwrap_or(episode.seen.len());
        let values = [
            (0, ln1p(file.hits)),
            (1, ln1p(file.terms.len())),
            (2, flag(file.by_message)),
            (3, 1.0 / (1.0 + rank as f64)),
            (4, flag(rank == 0)),
            (5, flag(file.by_glob && file.hits == 0)),
        ];
        phi.extend(values.iter().filter(|(_, x)| *x != 0.0).map(|&(i, x)| (READ_FILE + i, x)));
    }
    phi
}

/// Features of including the seen file at answer rank `rank`.
pub(crate) fn include_features(episode: &ProxyEpisode, file: &SeenFile, rank: usize) -> Features {
    let total_hits: usize = episode.seen.iter().map(|f| f.hits).sum();
    let values = [
        (0, 1.0),
        (1, ln1p(file.hits)),
        (2, ln1p(file.terms.len())),
        (3, flag(file.read)),
        (4, flag(file.by_message)),
        (5, flag(file.by_identifier)),
        (6, flag(file.hits > 0 && !file.by_message && !file.by_identifier)),
        (7, flag(file.by_glob && file.hits == 0)),
        (8, 1.0 / (1.0 + rank as f64)),
        (9, flag(rank == 0)),
        (10, flag(is_test_or_doc(&file.path))),
        (11, flag(stem_matches(episode, &file.path))),
        (12, ln1p(episode.seen.len())),
        (13, if total_hits > 0 { file.hits as f64 / total_hits as f64 } else { 0.0 }),
    ];
    values.iter().filter(|(_, x)| *x != 0.0).map(|&(i, x)| (INCLUDE_FILE + i, x)).collect()
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn ln1p(n: usize) -> f64 {
    (n as f64).ln_1p()
}

/// A path under a test, doc or example directory, or a `test_*` file.
fn is_test_or_doc(path: &str) -> bool {
    let mut parts = path.split('/').peekable();
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        let lower = part.to_ascii_lowercase();
        if (!last && matches!(lower.as_str(), "test" | "tests" | "testing" | "doc" | "docs" | "examples"))
            || (last && (lower.starts_with("test_") || lower.ends_with("_test.py") || lower.ends_with(".md")))
        {
            return true;
        }
    }
    false
}

/// Every part of `name` (`RetryPolicy` → retry, policy) is a word of the issue.
fn named_in_issue(episode: &ProxyEpisode, name: &str) -> bool {
    let snake = super::text::snake_case(name);
    let mut parts = snake.split('_').filter(|p| p.len() >= 3).peekable();
    parts.peek().is_some() && parts.all(|p| episode.issue_words.contains(&p.to_ascii_lowercase()))
}

/// The file's stem is a word or identifier part of the issue (`retry.py` for "retry").
fn stem_matches(episode: &ProxyEpisode, path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name).to_ascii_lowercase();
    stem.len() >= 3 && episode.issue_words.contains(&stem)
}
