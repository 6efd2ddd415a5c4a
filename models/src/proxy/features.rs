//! The parameter layout and the feature maps of the decision kinds.
//!
//! One flat `θ` holds every block; a feature is a `(global index, value)`
//! pair, so the log-linear math never needs to know which decision it serves.
//!
//! | block | size | used by |
//! |---|---|---|
//! | count bias | 9 | one per option: answer, 1 … 8 calls |
//! | count × answer | [`STATE`] | the turn state, on the "answer now" option |
//! | count × calls | [`STATE`] | the turn state × n/8, on every "n calls" option |
//! | call kind | 13 | tool × source one-hot |
//! | grep text | [`TEXT`] | term features of grep candidates |
//! | glob text | [`TEXT`] | term features of glob candidates |
//! | read | [`READ`] | what results said about a file to read |
//! | rank | [`FILE`] | per seen file, its score in the answer ranking (Plackett–Luce picks) |
//! | size bias | [`MAX_ANSWER`] | one per answer size k = 1 … 8 |
//! | size × files | [`FILE`] | Σ over ranked files 2 … k of their file features, on option k |
//! | include | 1 + [`FILE`] | per seen file, the "include" option of a Bernoulli (answer size off) |
//! | think | [`THINK`] | the "continue" option of a thinking chunk: the turn state, "answer turn", chunks so far / the cap |
//!
//! File features ([`file_features`], shared by rank, size and include):
//! `[ln(1+hits), ln(1+distinct terms), read, hit by a message grep, hit by an
//! identifier grep, hit by prose words only, glob-only, 1/(1+hit rank), hit
//! rank 0, not source code (a test, doc or example path, or no source
//! extension: changelogs, docs pages, data), stem is an issue word, share of all hits, hit by a
//! title term, Σ rarity, max rarity, rare hit (≤ 3 files), defines an issue
//! name, defines a title name, path named by the issue (a path or module), ln(1+path parts
//! that are issue words), ln(1+directory depth), ln(1+issue names it defines),
//! how early the issue names what it defines, the stem holds an issue word or is part of
//! one, share of the issue's words its reads showed]`. Names are compared without case. Rarity
//! of a grep is `1 / (1 + ln(1 + lines it hit))`, the cut lines included.

use super::episode::{CALL_KINDS, CallKind, Candidate, ProxyEpisode, SeenFile};
use super::loglinear::Features;
use super::text::looks_rare;
use rewardlab_protocol::paths::is_source_file;

/// Options of the count decision: answer, then 1 … `MAX_CALLS` calls.
pub(crate) const MAX_CALLS: usize = rewardlab_sandbox::MAX_CALLS_PER_TURN;
/// Largest answer size the size decision offers.
pub(crate) const MAX_ANSWER: usize = 8;
/// Size of the turn-state vector.
pub(crate) const STATE: usize = 16;
/// Term features of a grep or glob candidate.
pub(crate) const TEXT: usize = 18;
/// Features of a read candidate.
pub(crate) const READ: usize = 9;
/// Features of a seen file in the answer decisions.
pub(crate) const FILE: usize = 25;

pub(crate) const COUNT_BIAS: usize = 0;
pub(crate) const COUNT_ANSWER: usize = COUNT_BIAS + MAX_CALLS + 1;
pub(crate) const COUNT_CALLS: usize = COUNT_ANSWER + STATE;
pub(crate) const CALL_KIND: usize = COUNT_CALLS + STATE;
pub(crate) const GREP_TEXT: usize = CALL_KIND + CALL_KINDS;
pub(crate) const GLOB_TEXT: usize = GREP_TEXT + TEXT;
pub(crate) const READ_FILE: usize = GLOB_TEXT + TEXT;
pub(crate) const RANK_FILE: usize = READ_FILE + READ;
pub(crate) const SIZE_BIAS: usize = RANK_FILE + FILE;
pub(crate) const SIZE_FILE: usize = SIZE_BIAS + MAX_ANSWER;
pub(crate) const INCLUDE_FILE: usize = SIZE_FILE + FILE;
/// Features of the "continue thinking" option: the turn state, "this is the answer turn" and
/// the share of the turn's chunk cap already thought.
pub(crate) const THINK: usize = STATE + 2;
pub(crate) const THINK_CONTINUE: usize = INCLUDE_FILE + 1 + FILE;
/// Number of parameters.
pub const DIM: usize = THINK_CONTINUE + THINK;

/// Index of "turn 0" in the state vector (the prior uses it).
pub(crate) const STATE_TURN0: usize = 1;
/// Index of "hit by a message grep" in the file features (the tests check it is learned).
#[cfg(test)]
pub(crate) const FILE_BY_MESSAGE: usize = 3;
/// Index of "defines an issue name" in the file features.
pub(crate) const FILE_DEFINES: usize = 16;
/// Index of "not source code" (a test or doc path, or not a source file) in the file features.
pub(crate) const FILE_NOT_SOURCE: usize = 9;
/// Index of the summed term rarity in the file features.
pub(crate) const FILE_RARITY_SUM: usize = 13;
/// The file features' names, by index (`rewardlab locate --ranking` writes them; see the module
/// docs of [`super`] for what each measures).
pub(crate) const FILE_NAMES: [&str; FILE] = [
    "hits",
    "terms",
    "read",
    "by_message",
    "by_identifier",
    "prose_only",
    "glob_only",
    "hit_rank_inverse",
    "hit_rank_first",
    "not_source",
    "stem_is_issue_word",
    "hit_share",
    "by_title",
    "rarity_sum",
    "rarity_max",
    "rare_hit",
    "defines",
    "defines_title_name",
    "named_path",
    "path_overlap",
    "depth",
    "definitions",
    "earliest_definition",
    "stem_holds_issue_word",
    "read_words",
];

/// The turn state: `[1, turn 0, turn 1, turn ≥ 2, no file seen, 1–3, 4–10, > 10,
/// any grep hit, a message grep hit, ≤ 2 candidates left, 3–8, > 8, new files
/// last turn, a seen file defines an issue name, a rare hit]`.
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
    s[14] = flag(episode.config.definitions && episode.seen.iter().any(|f| !f.defines.is_empty()));
    s[15] = flag(episode.config.rarity && episode.seen.iter().any(|f| f.rare_hit));
    s
}

/// The non-zero entries of the turn state as features of the block at `base`, scaled by `scale`.
fn on_block(state: &[f64; STATE], base: usize, scale: f64) -> impl Iterator<Item = (usize, f64)> + '_ {
    state.iter().enumerate().filter(|(_, x)| **x != 0.0).map(move |(i, x)| (base + i, x * scale))
}

/// The options of one thinking decision: stop (no features, logit 0), then continue with the
/// turn state, whether this is the answer turn, and `chunk / max_chunks` (chunks already
/// thought this turn over the cap), so the stop hazard may depend on how long it thought.
pub(crate) fn think_options(state: &[f64; STATE], answer_turn: bool, chunk: usize, max_chunks: usize) -> Vec<Features> {
    let mut think: Features = on_block(state, THINK_CONTINUE, 1.0).collect();
    if answer_turn {
        think.push((THINK_CONTINUE + STATE, 1.0));
    }
    if chunk > 0 {
        think.push((THINK_CONTINUE + STATE + 1, chunk as f64 / max_chunks.max(1) as f64));
    }
    vec![Vec::new(), think]
}

/// The options of the count decision for up to `max_calls` calls.
pub(crate) fn count_options(state: &[f64; STATE], max_calls: usize) -> Vec<Features> {
    let mut options = Vec::with_capacity(max_calls + 1);
    let mut answer = vec![(COUNT_BIAS, 1.0)];
    answer.extend(on_block(state, COUNT_ANSWER, 1.0));
    options.push(answer);
    for n in 1..=max_calls.min(MAX_CALLS) {
        let scale = n as f64 / MAX_CALLS as f64;
        let mut calls = vec![(COUNT_BIAS + n, 1.0)];
        calls.extend(on_block(state, COUNT_CALLS, scale));
        options.push(calls);
    }
    options
}

/// Features of calling `candidate` now.
pub(crate) fn call_features(episode: &ProxyEpisode, candidate: &Candidate) -> Features {
    let config = &episode.config;
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
        let previous = episode.calls_per_term.get(&term.text).copied().unwrap_or(0);
        // What an earlier grep of the same term said about its rarity in the tree.
        let rarity = if config.rarity { episode.term_rarity.get(&term.text).copied().unwrap_or(0.0) } else { 0.0 };
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
            (12, flag(episode.term_in_path[t])),
            // A name found in a read file that the issue also mentions (the method in the title).
            (13, flag(candidate.kind == CallKind::GrepResultName && named_in_issue(episode, &term.text))),
            (14, rarity),
            // Some seen file already defines a name of this term: a definition grep would repeat it.
            (
                15,
                flag(
                    config.definitions
                        && super::episode::definable_names(&term.text).any(|n| {
                            let n = n.to_ascii_lowercase();
                            episode.seen.iter().any(|f| f.defines.contains(&n))
                        }),
                ),
            ),
            // An earlier grep of the term itself found nothing in the tree.
            (16, flag(episode.found_nothing.contains(&term.text))),
            // The source-only repeat of a grep whose cut output showed no source code at all.
            (17, flag(candidate.kind == CallKind::GrepSource && episode.hid_source.contains(&term.text))),
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
            (6, flag(config.definitions && !file.defines.is_empty())),
            (7, if config.rarity { file.rarity_max } else { 0.0 }),
            (8, flag(config.module_paths && file.by_named_path)),
        ];
        phi.extend(values.iter().filter(|(_, x)| *x != 0.0).map(|&(i, x)| (READ_FILE + i, x)));
    }
    phi
}

/// The [`FILE`] features of the seen file at hit rank `rank`, indices relative
/// to a block, zero ones left out (see the module docs for the layout).
pub(crate) fn file_features(episode: &ProxyEpisode, file: &SeenFile, rank: usize) -> Vec<(usize, f64)> {
    let config = &episode.config;
    let total_hits: usize = episode.seen.iter().map(|f| f.hits).sum();
    let defines_title = file.defines.iter().any(|n| episode.title_names.contains(n));
    let values = [
        (0, ln1p(file.hits)),
        (1, ln1p(file.terms.len())),
        (2, flag(file.read)),
        (3, flag(file.by_message)),
        (4, flag(file.by_identifier)),
        (5, flag(file.hits > 0 && !file.by_message && !file.by_identifier)),
        (6, flag(file.by_glob && file.hits == 0)),
        (7, 1.0 / (1.0 + rank as f64)),
        (8, flag(rank == 0)),
        (FILE_NOT_SOURCE, flag(!is_code(&file.path))),
        (10, flag(stem_matches(episode, &file.path))),
        (11, if total_hits > 0 { file.hits as f64 / total_hits as f64 } else { 0.0 }),
        (12, flag(file.by_title)),
        (FILE_RARITY_SUM, if config.rarity { file.rarity_sum } else { 0.0 }),
        (14, if config.rarity { file.rarity_max } else { 0.0 }),
        (15, flag(config.rarity && file.rare_hit)),
        (FILE_DEFINES, flag(config.definitions && !file.defines.is_empty())),
        (17, flag(config.definitions && defines_title)),
        (18, flag(config.module_paths && file.by_named_path)),
        (19, if config.path_overlap { ln1p(path_overlap(episode, &file.path)) } else { 0.0 }),
        (20, if config.path_overlap { ln1p(file.path.matches('/').count()) } else { 0.0 }),
        (21, if config.definitions { ln1p(file.defines.len()) } else { 0.0 }),
        (22, if config.definitions { earliest_definition(episode, file) } else { 0.0 }),
        (23, flag(config.path_overlap && stem_contains_word(episode, &file.path))),
        (
            24,
            if episode.issue_words.is_empty() {
                0.0
            } else {
                file.read_words.len() as f64 / episode.issue_words.len() as f64
            },
        ),
    ];
    values.into_iter().filter(|(_, x)| *x != 0.0).collect()
}

/// How early the issue names what `file` defines: 1 − the first position (in [0, 1]) of the
/// earliest issue name it defines, 0 when it defines none. Issues name the thing to fix first
/// (the title, the opening sentence) and mention callers and neighbours later.
fn earliest_definition(episode: &ProxyEpisode, file: &SeenFile) -> f64 {
    file.defines.iter().filter_map(|n| episode.issue_names.get(n)).map(|&at| 1.0 - at).fold(0.0, f64::max)
}

/// Options of one Plackett–Luce pick: each remaining file's features in the rank block.
pub(crate) fn rank_options(files: &[Vec<(usize, f64)>]) -> Vec<Features> {
    files.iter().map(|phi| phi.iter().map(|&(i, x)| (RANK_FILE + i, x)).collect()).collect()
}

/// Options of the size decision over files ranked in `picked` order: option k
/// (answer the first k) has the bias of k and the sum of the file features of
/// picks 2 … k (the first file is in every answer, so its features would cancel).
pub(crate) fn size_options(picked: &[Vec<(usize, f64)>]) -> Vec<Features> {
    let mut options = Vec::with_capacity(picked.len());
    let mut sum = [0.0; FILE];
    for (k, phi) in picked.iter().enumerate().take(MAX_ANSWER) {
        if k > 0 {
            for &(i, x) in phi {
                sum[i] += x;
            }
        }
        let mut option = vec![(SIZE_BIAS + k, 1.0)];
        option.extend(sum.iter().enumerate().filter(|(_, x)| **x != 0.0).map(|(i, &x)| (SIZE_FILE + i, x)));
        options.push(option);
    }
    options
}

/// Features of including a file (the Bernoulli answer): a bias and its file features.
pub(crate) fn include_features(phi: &[(usize, f64)]) -> Features {
    let mut out = vec![(INCLUDE_FILE, 1.0)];
    out.extend(phi.iter().map(|&(i, x)| (INCLUDE_FILE + 1 + i, x)));
    out
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn ln1p(n: usize) -> f64 {
    (n as f64).ln_1p()
}

/// A source file ([`is_source_file`]: a language's extension, not a test) outside doc and
/// example directories: what commit-mined targets and SWE-bench gold patches consist of.
pub(crate) fn is_code(path: &str) -> bool {
    is_source_file(path) && !is_test_or_doc(path)
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

/// Directories and the stem of `path` that are words or identifier parts of the
/// issue (`sympy/physics/units/util.py` for an issue about "units" → 1).
fn path_overlap(episode: &ProxyEpisode, path: &str) -> usize {
    let stem = stem(path);
    path.split('/')
        .take(path.matches('/').count())
        .chain(std::iter::once(stem))
        .filter(|part| part.len() >= 3 && episode.issue_words.contains(&part.to_ascii_lowercase()))
        .count()
}

/// The file's stem holds a word of the issue (of [`MIN_PART`] letters or more) without being one
/// (`cacheprovider.py` for "cache", `heuristicgcd.py` for "heuristic"), or is part of one
/// (`latex.py` for "latexwriter"): modules are named by gluing words.
fn stem_contains_word(episode: &ProxyEpisode, path: &str) -> bool {
    let stem = stem(path).to_ascii_lowercase();
    let stem = stem.trim_matches('_');
    stem.len() >= MIN_PART
        && !episode.issue_words.contains(stem)
        && episode
            .issue_words
            .iter()
            .any(|word| word.len() >= MIN_PART && (stem.contains(word.as_str()) || word.contains(stem)))
}

/// Shortest word [`stem_contains_word`] looks for inside a stem, or a stem inside a word.
const MIN_PART: usize = 4;

/// The file's stem is a word or identifier part of the issue (`retry.py` for "retry").
fn stem_matches(episode: &ProxyEpisode, path: &str) -> bool {
    let stem = stem(path).to_ascii_lowercase();
    stem.len() >= 3 && episode.issue_words.contains(&stem)
}

/// The file name of `path` up to its first dot (`pkg/retry.py` → `retry`).
fn stem(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.split('.').next().unwrap_or(name)
}
