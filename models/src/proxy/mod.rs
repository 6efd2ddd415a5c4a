//! The CPU proxy policy: a small log-linear stochastic policy over structured
//! tool-use actions, trained by the same GRPO engine as the LLM (seed 000
//! §2.2 setting) but cheap enough for CI and laptops.
//!
//! The tool results are the policy's only view of the repository, so what it
//! knows about a file is what greps, globs and reads said: how many lines and
//! terms hit it, how rare those terms are in the tree, whether a hit line or a
//! read shows it *defining* a name the issue uses, and whether its path is one
//! the issue names.
//!
//! # Decisions (the rollout's units, in order)
//!
//! Every turn opens with
//!
//! 0. **Thinking** (with [`ProxyConfig::think`], on by default) — up to
//!    [`ProxyConfig::max_think_chunks`] stop/continue decisions, each
//!    "continue" one chunk of [`TOKENS_PER_THINK_CHUNK`] token equivalents.
//!    "Stop" has no features (logit 0); "continue" has the turn state, an
//!    "answer turn" flag and the share of the cap already thought, so the
//!    length may depend on the situation (nothing seen yet, a rare hit) and
//!    on how long it thought. Thinking shows nothing and changes no call,
//!    ranking or answer: it only lengthens the completion (`len`, completion
//!    length) and adds units to the loss. So only the reward (a `len` term)
//!    and the loss aggregation can push it up or down — the lever through
//!    which an LLM's length drifts: under `seq-mean-token-mean` a long
//!    sequence's units each weigh less, so a wrong answer's thinking is
//!    penalised less per unit the longer it is, which `seq-mean-token-sum-norm`
//!    (a constant divisor) removes (Dr. GRPO). A rollout whose tokens would
//!    pass [`ProxyConfig::max_completion_tokens`] is cut there without an
//!    answer (`truncated`), like an LLM at its generation budget. A greedy
//!    turn thinks the likeliest number of chunks of that chain (its mode,
//!    [`ProxyConfig::greedy_think_length`]), not each decision at its argmax,
//!    which would think to the cap once "continue" passes ½. At θ = 0 a
//!    sampled turn thinks one chunk on average and a greedy one none.
//!
//! Then each turn that is not the forced last one:
//!
//! 1. **How many** — a softmax over {answer now, 1, …, min(max calls, candidates
//!    left)}: a bias per option, the turn state on "answer", the turn state
//!    scaled by n/8 on "n calls" (`features::state`: turn one-hot, files seen
//!    bucketed, any grep hit, a message grep hit, candidates left bucketed, new
//!    files last turn, a seen file defines an issue name, a rare hit).
//! 2. **Which call**, n times without replacement — a softmax over the calls not
//!    yet made in this rollout: grep of every issue term (quoted phrases, error
//!    message heads and whole messages escaped as regex literals, identifiers —
//!    names shaped like code, and plain names the issue writes as code, called
//!    (`bell(n)`, `trigsimp(f)`) or alone in backticks, Python builtins aside,
//!    and dotted names without a variable receiver (`e.subs` → `subs`,
//!    `self._print` → `_print`) — and prose words, capitalised ones lowercase:
//!    `Mathematica` → `mathematica`); for identifiers also a **definition grep**
//!    `(?:def|class) name\b` of the last dotted part and of each CamelCase part
//!    (`Session.resolve_redirects` → `Session`, `resolve_redirects`); glob of
//!    identifiers (`**/pkg/sub*`, `**/*retry_policy*`, an acronym's lowercase
//!    whole: `LaTeX` → `**/*latex*`), of **prose words** (`**/*cache*`: modules
//!    are named after what they do), of **dotted module
//!    paths** (`sympy.core.basic.Basic` → `**/sympy/core/basic.py`,
//!    `**/sympy/core.py`) and of paths, traceback frames included (`File
//!    "…/site-packages/pkg/mod.py", line N` → `**/pkg/mod.py`); read of the six
//!    unread seen source files with the most grep hits (±20 lines around the hits;
//!    tests, docs and changelogs are not read); and
//!    — when [`ProxyConfig::mine_result_names`] is on — grep of `name\(` for each
//!    function or class defined in what was read; and, once a grep's output was
//!    cut at the output limit, the **same grep over source files only**
//!    (`path = "*.EXT"`, the extension most seen source files have; before any
//!    seen file has one, every source extension, `*.{py,pyi,…}`, with
//!    [`ProxyConfig::hidden_source`]), since on a real repository a common term's
//!    hits in changelogs, docs and tests fill the output first and hide the
//!    source files behind them. Features: tool × source
//!    one-hot, length bucket, position in the issue, rare-looking, in a
//!    traceback / code block / title, word count, occurrences, earlier calls
//!    with the same term, term in a seen path, the term's rarity from an earlier
//!    grep, a seen file already defines it, an earlier grep of it found nothing
//!    (the issue's own name: a variable, a package the repository lacks), a
//!    source-only repeat of a grep whose cut output showed no source code; for
//!    reads: hits, distinct terms, hit by a message grep, rank, defines an issue
//!    name, rarity, named path.
//! 3. **Answer** — a **ranking, then a size**. Up to K =
//!    [`ProxyConfig::max_answer_size`] files are picked one at a time from the
//!    seen source files (tests, docs and changelogs are never answered once a
//!    source file was seen, [`ProxyConfig::code_answers`]; the first
//!    [`ProxyConfig::max_answer_files`], 64, by grep hits; on real repositories a
//!    cap of 16 left the gold file out of the candidates in 31 of the 79 episodes
//!    that had seen it): each pick is a softmax over the
//!    files not yet picked, with logits `θ_rank · φ_file` (a Plackett–Luce
//!    ranking, so greedy is "sort by the learned score"). Then a softmax over
//!    k = 1 … K answers the first k: option k has a bias of its own and the sum
//!    of the file features of picks 2 … k in a separate block, so it learns both
//!    a size prior and what makes a further file worth adding. Included files
//!    with grep hits get line ranges spanning their hits ±3 lines (merged when
//!    they touch); that is deterministic, not a decision. The answer is
//!    [`Answer::Structured`]. With [`ProxyConfig::answer_size`] off the answer
//!    is the older Bernoulli include/exclude per file (an ablation).
//!
//! A decision with a single option is taken without a unit (its log-prob is 0
//! under every θ). The last turn answers without a count decision.
//!
//! # File features
//!
//! One vector per seen file (`features::file_features`), used by the rank
//! picks, the size options and the Bernoulli include, each in its own block:
//! hits and distinct terms (log), read, hit by a message / identifier / only
//! prose-word grep, glob-only, the hit rank (1/(1+r) and r = 0), **not source
//! code** (a test, doc or example path, or not a source file by
//! `rewardlab_protocol::paths::is_source_file`: changelogs, docs pages), stem is an issue word, share of all hits, hit by a title term;
//! **rarity** — Σ and max over the terms that hit it of
//! `1 / (1 + ln(1 + lines the grep hit))`, counting the lines cut at the output
//! limit (the cut notice says how many), and "hit by a grep naming ≤ 3 files";
//! **definitions** — defines an issue name, defines a name of the title, how
//! many issue names it defines (log), how early the issue names the earliest
//! of them (1 − its position), names compared without case (`LaTeX`, `def latex`);
//! **named paths** — found by a glob of a path or module the issue names
//! (with [`ProxyConfig::issue_paths`]: its path is one the issue names, as
//! that glob would find it, whether or not the glob was called);
//! **path overlap** — ln(1 + directories and stem that are issue words),
//! ln(1 + depth), the stem holds an issue word without being one (`cacheprovider.py`
//! for "cache") or is part of one; **what reads showed** — the share of the issue's words
//! (its terms' words and identifier parts) that the file's reads showed, the file that holds
//! most of what the issue talks about (the grep heuristic's coverage score, from the reads).
//! Each group has a [`ProxyConfig`] switch (default on) for
//! ablations; a switched-off group is all zeros and its candidates are not
//! offered.
//!
//! # Parameter layout
//!
//! One flat θ of [`DIM`] parameters, in blocks (sizes and indices in
//! `features.rs`): count bias (answer, 1 … 8 calls); the turn state on
//! "answer now" and, scaled by n/8, on "n calls"; the call kind (tool × source,
//! 13 kinds); grep-term and glob-term features (18 each); read features (9);
//! the rank block (25 file features); the size biases (k = 1 … 8); the size ×
//! files block (25, the summed features of picks 2 … k); and the Bernoulli
//! include block (a bias and 25 file features) that only the ablation without
//! a learned size uses; and the thinking block (the turn state, "answer turn",
//! chunks so far over the cap) on the "continue" option.
//!
//! # Ablation switches
//!
//! | switch | off means |
//! |---|---|
//! | [`ProxyConfig::rarity`] | no rarity file or term features, no "rare hit" state |
//! | [`ProxyConfig::definitions`] | no `def`/`class` greps, no "defines an issue name" features |
//! | [`ProxyConfig::top_definitions`] (off by default) | on: a method named like a class the issue names stops counting once the module-level definition is seen |
//! | [`ProxyConfig::module_paths`] | no dotted-module globs, no "path named by the issue" feature |
//! | [`ProxyConfig::issue_paths`] (off by default) | on: a seen file whose path the issue names is "named" however it was found |
//! | [`ProxyConfig::path_overlap`] | no path/issue-word overlap or depth features |
//! | [`ProxyConfig::code_names`] | called or backticked plain names (`bell(n)`) are not identifiers |
//! | [`ProxyConfig::answer_size`] | a Bernoulli include per seen file instead of ranking + size |
//! | [`ProxyConfig::ranking_prior`] (off by default) | on: the ranking starts from the grep heuristic's bias |
//! | [`ProxyConfig::source_greps`] | no source-only repeat of a grep whose output was cut |
//! | [`ProxyConfig::hidden_source`] (off by default) | on: a cut grep is repeated over every source extension before a source file is seen, and a repeat whose cut showed no source code is marked |
//! | [`ProxyConfig::source_word_greps`] (off by default) | on: prose words are grepped in source files only, as CodeGrep's `grep --include=*.py` |
//! | [`ProxyConfig::source_identifier_greps`] (off by default) | on: identifiers are grepped in source files only |
//! | [`ProxyConfig::word_globs`] | no glob of the issue's prose words (`**/*cache*`) |
//! | [`ProxyConfig::read_words`] | no "share of the issue's words its reads showed" file feature |
//! | [`ProxyConfig::capitalised_words`] | capitalised words (`Mathematica`, `Zarr`) give no term |
//! | [`ProxyConfig::eval_average`] (0, off, by default) | β > 0: greedy episodes use the moving average θ̄ of θ |
//! | [`ProxyConfig::think`] | no thinking decisions: the length is a fixed count per action |
//! | [`ProxyConfig::code_reads`] | reads of any seen file (source code first), not of source code only |
//! | [`ProxyConfig::code_answers`] | any seen file may be answered, not source code only |
//! | [`ProxyConfig::greedy_think_length`] | off: greedy episodes take each thinking stop/continue at its argmax (chunk by chunk), not the likeliest number of chunks |
//! | [`ProxyConfig::greedy_answer_mass`] | off: a greedy turn's count decision is the argmax over {answer, 1 … n calls}, not "answer" only at half the mass |
//!
//! A study sets them under `[policy]` (`kind = "proxy"`, then e.g.
//! `definitions = false`), or per variant (`policy = { definitions = false }`),
//! so one study holds the whole ablation table.
//!
//! # Model
//!
//! `p(a) ∝ exp(θ · φ(a) / T)` with one flat `θ` (`features` has the layout,
//! [`DIM`] parameters). Units keep their options' features, so log-probs under
//! θ or the frozen reference θ_ref are a recomputation and the gradient of
//! `Σ_u coeff_u · log p_u` is closed-form (`loglinear`). [`Policy::step`] is
//! AdamW with global-norm clipping. Everything is `f64` and single-threaded per
//! episode: the same seed gives the same rollout bit for bit.
//!
//! Greedy decisions take the argmax with ties to the first option; option order
//! is "answer" first, then 1…n calls; candidates in issue order; files in hit
//! order; "include" before "exclude". Two decisions are taken as a whole instead:
//! a turn's thinking (its likeliest length, [`ProxyConfig::greedy_think_length`])
//! and its count (answer only at half the mass, else the likeliest count,
//! [`ProxyConfig::greedy_answer_mass`]).
//!
//! # Initialisation
//!
//! θ = 0 (uniform choices) except two documented priors: −0.5 on "answer now"
//! in turn 0, so a fresh policy usually searches before answering, and +1 on
//! answer size 1 (F_β with β = 0.5 weighs precision, and most issues change one
//! file). Greedy evaluation at the start makes one call a turn (the issue's first
//! candidates) and answers in the last turn with the file hit most (flat argmax of the
//! count decision: one call, then the answer). The ranking starts at
//! θ = 0 (hit order), so what the new features are worth is learned, not
//! built in, and learning is visible. With [`ProxyConfig::ranking_prior`] the
//! ranking starts from the non-learned grep heuristic's bias instead (rarity,
//! definitions, anything that is not source code last), and GRPO refines it from there.
//!
//! # Token equivalents
//!
//! [`Policy::completion_tokens`] counts [`TOKENS_PER_TURN`] per turn,
//! [`TOKENS_PER_THINK_CHUNK`] per thinking chunk, [`TOKENS_PER_CALL`] per call
//! and [`TOKENS_PER_FILE`] per answered file, at most
//! [`ProxyConfig::max_completion_tokens`], so the `len` feature and
//! completion-length metrics grow with what the policy did and chose to think.
//!
//! What it does not do (yet): choose its own path filters (the only filtered grep is the
//! source-only repeat of a cut one), or choose line ranges itself.

mod episode;
mod features;
mod loglinear;
#[cfg(test)]
mod tests;
mod text;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::agent::{Answer, OptimStep, Policy, PolicyState, Sampling, StepStats, TaskPrompt, TurnInfo, TurnOutput};
use rewardlab_sandbox::ToolResult;

pub use episode::{ProxyEpisode, RARE_FILES};
pub use features::DIM;
pub use loglinear::Adam as AdamW;
use loglinear::{Adam, Draw, decide};

/// One answer candidate of a finished episode as the ranking scored it
/// ([`ProxyPolicy::answer_ranking`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankedFile {
    /// The file's path.
    pub path: String,
    /// Its rank logit under the greedy parameters.
    pub score: f64,
    /// Its file features by name (the module docs' "File features").
    pub features: std::collections::BTreeMap<String, f64>,
}

/// Recommended peak learning rate for the proxy policy (the LLM's 5e-6 would
/// not move a log-linear model in 100 steps).
pub const RECOMMENDED_LR: f64 = 0.05;
/// Token equivalents per turn (the turn's framing).
pub const TOKENS_PER_TURN: usize = 8;
/// Token equivalents per tool call.
pub const TOKENS_PER_CALL: usize = 12;
/// Token equivalents per answered file.
pub const TOKENS_PER_FILE: usize = 6;
/// Token equivalents per thinking chunk (one stop/continue decision each).
pub const TOKENS_PER_THINK_CHUNK: usize = 16;

/// The prior on "answer now" in turn 0.
const PRIOR_ANSWER_TURN0: f64 = -0.5;
/// The prior on answer size 1 (the other sizes start at 0).
const PRIOR_SIZE_ONE: f64 = 1.0;
/// With [`ProxyConfig::ranking_prior`]: rank weight of a file's summed term rarity.
pub const PRIOR_RANK_RARITY: f64 = 1.0;
/// With [`ProxyConfig::ranking_prior`]: rank weight of "defines a name the issue uses"
/// (the grep heuristic's definition bonus).
pub const PRIOR_RANK_DEFINES: f64 = 2.0;
/// With [`ProxyConfig::ranking_prior`]: rank weight of a file that is not source code (the
/// heuristic answers with source files only, and mined targets are source files).
pub const PRIOR_RANK_NOT_SOURCE: f64 = -2.0;

/// Shape settings of the proxy policy (saved with its state).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// Read candidates offered per turn (unread seen files with the most hits).
    pub max_read_candidates: usize,
    /// Seen files considered for the answer (by rank).
    pub max_answer_files: usize,
    /// Lines of context around grep hits in answered line ranges.
    pub line_margin: u64,
    /// Offer `name\(` greps for functions and classes defined in read files.
    /// Off by default: in the 100-step engine test it slowed learning (held-out
    /// F_β 0.58 against 0.75 at step 100, one seed) because the extra
    /// candidates dilute exploration early on.
    pub mine_result_names: bool,
    /// Answer with a learned ranking of the seen files and a learned answer size
    /// (k = 1 … [`ProxyConfig::max_answer_size`]); off: a Bernoulli include per file.
    pub answer_size: bool,
    /// Largest answer size offered (at most 8).
    pub max_answer_size: usize,
    /// Rarity of grep terms in the tree (from the lines each grep hit) as file and call features.
    pub rarity: bool,
    /// `def`/`class` greps of the issue's names, and "defines an issue name" features.
    pub definitions: bool,
    /// With [`ProxyConfig::definitions`]: once a seen file defines an issue name at module level
    /// (`class MatrixSymbol(…)` without indentation), files that define only a method of that
    /// name (`    def MatrixSymbol(expr, assumptions):`, a handler or printer) no longer count
    /// as defining it. Off by default.
    pub top_definitions: bool,
    /// Globs of dotted module paths (`pkg.sub.mod` → `**/pkg/sub/mod.py`) and
    /// "found by a path the issue names" features.
    pub module_paths: bool,
    /// With [`ProxyConfig::module_paths`]: a seen file whose path the issue names (a path in
    /// prose or a traceback frame, a dotted module) is "named by the issue" however it was found
    /// (a grep hit, a read), not only when the glob of that path or module found it. Off by
    /// default for now: it changes greedy numbers of the synthetic source, whose tracebacks
    /// name paths, and the default study has not been rerun with it (README, "Session 14").
    pub issue_paths: bool,
    /// Path/issue-word overlap and directory depth as file features.
    pub path_overlap: bool,
    /// Plain names the issue writes as code — called (`bell(n)`) or alone in backticks — are
    /// identifiers (grep, definition grep, glob candidates); off: only names shaped like code
    /// (`snake_case`, `CamelCase`, dotted, with digits) are.
    pub code_names: bool,
    /// Start the answer ranking from the grep heuristic's inductive bias instead of hit order:
    /// +[`PRIOR_RANK_RARITY`] per unit of a file's summed term rarity, +[`PRIOR_RANK_DEFINES`]
    /// when it defines a name the issue uses, [`PRIOR_RANK_NOT_SOURCE`] for files that are not source code.
    /// Off by default, so the ranking's worth is learned from θ = 0 unless a study asks.
    pub ranking_prior: bool,
    /// After a grep whose output was cut at the limit, offer the same grep over the source files
    /// of the repository's language only (`path = "*.py"`, the extension most seen source files
    /// have): on real repositories a common word's hits in changelogs, docs and tests fill the
    /// output and hide the source files behind them.
    pub source_greps: bool,
    /// With [`ProxyConfig::source_greps`]: a cut grep's source-only repeat is offered even before
    /// any seen file says which language the repository is in, over every source extension
    /// (`path = "*.{py,pyi,…}"`), and a grep-term feature marks the repeat of a grep whose cut
    /// output showed no line of source code (pytest's docs and changelogs fill a common word's
    /// output before `src/` is reached, so no source extension is ever seen). Off by default: it
    /// lifts both real-repository development splits (+0.015 and +0.010 over twelve seeds) but
    /// lowers SWE-bench Lite (−0.024 ± 0.020, twelve seeds; README, "Session 30").
    pub hidden_source: bool,
    /// Greps of the issue's prose words search source files only (`path = "*.{py,pyi,…}"`),
    /// as CodeGrep's environment greps (`grep -rn --include=*.py`). Off by default: on both
    /// real-repository development splits it was lower (README, "Session 30"); what a word hits
    /// in docs and changelogs is evidence too (its rarity, the cut that offers the repeat).
    pub source_word_greps: bool,
    /// Greps of the issue's identifiers search source files only. Off by default.
    pub source_identifier_greps: bool,
    /// Offer a glob of each prose word of the issue (`**/*cache*`): a module named after what
    /// it does (`cacheprovider.py`, `writers/latex.py`) is found by its name where the word's
    /// grep output is filled by changelogs and docs.
    pub word_globs: bool,
    /// Remember which of the issue's words each read showed: a file feature is the share of
    /// them (the file that holds most of what the issue talks about, as the grep heuristic's
    /// coverage score finds it, but from what the policy read).
    pub read_words: bool,
    /// A capitalised word (`Mathematica`, `Zarr`: an uppercase letter, then lowercase) is a
    /// prose word, lowercase; off: such words give no term.
    pub capitalised_words: bool,
    /// Greedy episodes (held-out evaluation, `locate`) act with an exponential moving average
    /// of θ over the optimiser steps, `θ̄ ← β·θ̄ + (1 − β)·θ` with this β, instead of the last θ
    /// (Polyak averaging: the last iterate of a noisy policy gradient jumps from step to step;
    /// the average keeps what the steps agree on). 0 turns it off; sampled (training) episodes
    /// always use θ. Must lie in [0, 1).
    #[serde(deserialize_with = "averaging_decay")]
    pub eval_average: f64,
    /// Each turn opens with thinking: a stop/continue decision per chunk of
    /// [`TOKENS_PER_THINK_CHUNK`] token equivalents, at most [`ProxyConfig::max_think_chunks`]
    /// a turn. Thinking shows nothing and changes no call or answer; it only adds to the
    /// completion length, so only the reward (`len`) and the loss aggregation move it.
    /// Off: no thinking units (the layout before issue 19).
    pub think: bool,
    /// Read candidates are source code only (`features::is_code`: a source file outside test, doc
    /// and example paths). Off: any seen file may be read, source code first. A read shows the
    /// policy one file's lines, and a changelog or docs page is never an answer worth its call.
    pub code_reads: bool,
    /// Answers name source code only (`features::is_code`) once any seen file is code: mined
    /// targets are source files by construction (`tasks::commits` keeps source extensions outside
    /// tests and docs), and so are SWE-bench gold patches. Off: any seen file may be answered,
    /// and the "not source code" file feature is all the ranking has against a changelog.
    pub code_answers: bool,
    /// Thinking chunks a turn may hold.
    pub max_think_chunks: usize,
    /// Greedy episodes think the most likely number of chunks (the mode of the length the
    /// stop/continue chain samples) instead of taking each decision at its argmax. On by
    /// default (since session 12). Chunk by chunk (off), a "continue" just above ½ makes every
    /// greedy turn think to the cap, so greedy episodes run out of budget while sampled ones stay
    /// short (README, "Session 11"); the mode of that chain is no thinking at all.
    pub greedy_think_length: bool,
    /// A greedy turn answers only when "answer now" holds at least half of the count decision's
    /// probability (answering against searching at all), and otherwise makes the likeliest number
    /// of calls. Off: the argmax of the flat softmax over {answer, 1, …, n calls}, which answers
    /// whenever "answer" beats each call count alone, so a policy that searches with probability
    /// ⅔ spread over eight counts still answers greedily (README, "Session 27").
    pub greedy_answer_mass: bool,
    /// The rollout's generation budget in token equivalents (`max_completion_tokens` of an LLM
    /// rollout): a rollout that would exceed it is cut there, without an answer (`truncated`).
    pub max_completion_tokens: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            max_read_candidates: 6,
            max_answer_files: 64,
            line_margin: 3,
            mine_result_names: false,
            answer_size: true,
            max_answer_size: 4,
            rarity: true,
            definitions: true,
            top_definitions: false,
            module_paths: true,
            issue_paths: false,
            path_overlap: true,
            code_names: true,
            ranking_prior: false,
            source_greps: true,
            hidden_source: false,
            source_word_greps: false,
            source_identifier_greps: false,
            word_globs: true,
            read_words: true,
            capitalised_words: true,
            eval_average: 0.0,
            think: true,
            code_reads: true,
            code_answers: true,
            max_think_chunks: 16,
            greedy_think_length: true,
            greedy_answer_mass: true,
            max_completion_tokens: 1024,
        }
    }
}

/// Reads [`ProxyConfig::eval_average`], refusing a decay outside [0, 1) (1 would never move θ̄).
fn averaging_decay<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let beta = f64::deserialize(deserializer)?;
    if (0.0..1.0).contains(&beta) {
        Ok(beta)
    } else {
        Err(serde::de::Error::custom(format!("eval_average must lie in [0, 1), got {beta}")))
    }
}

/// The proxy policy: parameters, the frozen reference, AdamW state and the gradient.
#[derive(Clone, Debug, PartialEq)]
pub struct ProxyPolicy {
    config: ProxyConfig,
    theta: Vec<f64>,
    /// θ̄, the moving average greedy episodes use when [`ProxyConfig::eval_average`] is on.
    average: Vec<f64>,
    reference: Vec<f64>,
    grad: Vec<f64>,
    adam: Adam,
}

/// Checkpoint of a [`ProxyPolicy`]: config, θ, θ_ref and AdamW moments (floats as
/// IEEE-754 bit patterns, so a restore is exact).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProxyState {
    config: ProxyConfig,
    #[serde(with = "loglinear::bits")]
    theta: Vec<f64>,
    #[serde(with = "loglinear::bits")]
    reference: Vec<f64>,
    /// θ̄ (see [`ProxyConfig::eval_average`]).
    #[serde(with = "loglinear::bits")]
    average: Vec<f64>,
    adam: Adam,
}

/// A few hundred numbers: the whole state stays JSON.
impl PolicyState for ProxyState {}

/// Why a proxy-policy method failed: only a restored state can be wrong (the
/// rest is closed-form arithmetic that cannot fail).
#[derive(Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum ProxyError {
    /// A vector of the state has another length than this build's [`DIM`].
    #[error("proxy state has {field} of length {got}, expected {expected} (a checkpoint of another layout)")]
    Dimension {
        /// Which vector (`theta`, `reference`, `average`, `m`, `v`).
        field: &'static str,
        /// Its length in the state.
        got: usize,
        /// [`DIM`].
        expected: usize,
    },
}

impl Default for ProxyPolicy {
    fn default() -> Self {
        ProxyPolicy::new(ProxyConfig::default())
    }
}

impl ProxyPolicy {
    /// A fresh policy: θ = θ_ref = the documented prior.
    pub fn new(config: ProxyConfig) -> Self {
        let mut theta = vec![0.0; DIM];
        theta[features::COUNT_ANSWER + features::STATE_TURN0] = PRIOR_ANSWER_TURN0;
        theta[features::SIZE_BIAS] = PRIOR_SIZE_ONE;
        if config.ranking_prior {
            theta[features::RANK_FILE + features::FILE_RARITY_SUM] = PRIOR_RANK_RARITY;
            theta[features::RANK_FILE + features::FILE_DEFINES] = PRIOR_RANK_DEFINES;
            theta[features::RANK_FILE + features::FILE_NOT_SOURCE] = PRIOR_RANK_NOT_SOURCE;
        }
        ProxyPolicy::with_theta(config, theta)
    }

    pub(crate) fn with_theta(config: ProxyConfig, theta: Vec<f64>) -> Self {
        ProxyPolicy {
            config,
            reference: theta.clone(),
            average: theta.clone(),
            grad: vec![0.0; theta.len()],
            adam: Adam::new(theta.len()),
            theta,
        }
    }

    /// The shape settings it was built with.
    pub fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// The current parameters.
    pub fn theta(&self) -> &[f64] {
        &self.theta
    }

    /// Every call this policy can make in the first turn of an episode on `issue`, before any
    /// result has come back: the greps and globs of the issue's terms, in candidate order (reads,
    /// source-only repeats and names from results are offered later). A diagnostic
    /// (`rewardlab locate --reach`): run them all to learn whether a single call could have shown
    /// the files the answer needs.
    pub fn first_turn_calls(&self, issue: &str) -> Vec<rewardlab_sandbox::ToolCall> {
        let episode = ProxyEpisode::new(issue, ChaCha8Rng::seed_from_u64(0), None, self.config);
        episode.available(0).into_iter().map(|candidate| candidate.call).collect()
    }

    fn draw(episode: &ProxyEpisode) -> Draw {
        episode.temperature.map_or(Draw::Greedy, Draw::Sample)
    }

    /// The parameters greedy episodes act with: θ̄ under [`ProxyConfig::eval_average`], else θ.
    fn greedy_params(&self) -> &[f64] {
        if self.config.eval_average > 0.0 { &self.average } else { &self.theta }
    }

    /// Takes one decision, recording a unit unless it had a single option.
    fn decide(&self, episode: &mut ProxyEpisode, options: Vec<loglinear::Features>) -> usize {
        if options.len() == 1 {
            return 0;
        }
        let draw = Self::draw(episode);
        let params = if draw == Draw::Greedy { self.greedy_params() } else { &self.theta };
        let unit = decide(params, options, draw, &mut episode.rng);
        let chosen = unit.chosen;
        episode.units.push(unit);
        chosen
    }

    fn act_one(&self, episode: &mut ProxyEpisode, turn: TurnInfo) -> TurnOutput {
        if !episode.spend(TOKENS_PER_TURN) {
            return TurnOutput::Truncated;
        }
        let mut available = episode.available(self.config.max_read_candidates);
        let max_calls = turn.max_calls_per_turn.min(features::MAX_CALLS).min(available.len());
        let state = features::state(episode, turn.index, available.len());
        let answer_turn = turn.must_answer || max_calls == 0;
        if self.config.think && !self.think(episode, &state, answer_turn) {
            return TurnOutput::Truncated;
        }
        if answer_turn {
            return self.finish(episode);
        }
        let options = features::count_options(&state, max_calls);
        let n = if self.config.greedy_answer_mass && Self::draw(episode) == Draw::Greedy && options.len() > 1 {
            let chosen = search_or_answer(self.greedy_params(), &options);
            episode.units.push(loglinear::forced(self.greedy_params(), options, chosen));
            chosen
        } else {
            self.decide(episode, options)
        };
        if n == 0 {
            return self.finish(episode);
        }
        let mut calls = Vec::with_capacity(n);
        for _ in 0..n {
            let options = available.iter().map(|c| features::call_features(episode, c)).collect();
            let chosen = self.decide(episode, options);
            let candidate = available.remove(chosen);
            episode.mark_called(&candidate);
            calls.push(Ok(candidate.call.clone()));
            episode.pending.push(candidate);
        }
        if !episode.spend(TOKENS_PER_CALL * n) {
            episode.pending.clear();
            return TurnOutput::Truncated;
        }
        TurnOutput::Calls(calls)
    }

    /// The turn's thinking: stop/continue decisions, one chunk of [`TOKENS_PER_THINK_CHUNK`]
    /// per "continue", up to [`ProxyConfig::max_think_chunks`]. False when a chunk ran past the
    /// generation budget (the rollout is cut inside it).
    fn think(&self, episode: &mut ProxyEpisode, state: &[f64; features::STATE], answer_turn: bool) -> bool {
        let cap = self.config.max_think_chunks;
        let planned = (self.config.greedy_think_length && Self::draw(episode) == Draw::Greedy)
            .then(|| likeliest_length(self.greedy_params(), state, answer_turn, cap));
        for chunk in 0..cap {
            let options = features::think_options(state, answer_turn, chunk, cap);
            let go_on = match planned {
                Some(n) => {
                    let unit = loglinear::forced(self.greedy_params(), options, usize::from(chunk < n));
                    episode.units.push(unit);
                    chunk < n
                }
                None => self.decide(episode, options) == 1,
            };
            if !go_on {
                break;
            }
            if !episode.spend(TOKENS_PER_THINK_CHUNK) {
                return false;
            }
        }
        true
    }

    /// The answer, unless writing it runs past the generation budget.
    fn finish(&self, episode: &mut ProxyEpisode) -> TurnOutput {
        let answer = self.answer(episode);
        if episode.over_budget { TurnOutput::Truncated } else { TurnOutput::Answer(answer) }
    }

    /// The answer's candidates (indices into `episode.seen`, in hit order) and their file features.
    fn answer_candidates(&self, episode: &ProxyEpisode) -> (Vec<usize>, Vec<Vec<(usize, f64)>>) {
        let mut ranked = episode.ranked_files();
        if self.config.code_answers {
            let code: Vec<usize> =
                ranked.iter().copied().filter(|&i| features::is_code(&episode.seen[i].path)).collect();
            if !code.is_empty() {
                ranked = code;
            }
        }
        ranked.truncate(self.config.max_answer_files);
        let phis = ranked
            .iter()
            .enumerate()
            .map(|(rank, &i)| features::file_features(episode, &episode.seen[i], rank))
            .collect();
        (ranked, phis)
    }

    /// The answer's candidates in a finished greedy episode as its ranking scored them, best
    /// first (a diagnostic: `rewardlab locate --ranking`). The score is a rank pick's logit
    /// under the greedy parameters; every pick of the Plackett–Luce ranking scores the files left
    /// the same way, so this order is the greedy ranking (ties to the file with more grep hits,
    /// as the greedy pick takes the first of equal options). The features are every file
    /// feature (the module docs' list), by name, zeros included. With [`ProxyConfig::answer_size`]
    /// off the answer includes or leaves out each candidate on its own and follows no ranking;
    /// the scores are still those the rank block gives.
    pub fn answer_ranking(&self, episode: &ProxyEpisode) -> Vec<RankedFile> {
        let (ranked, phis) = self.answer_candidates(episode);
        let scores = loglinear::logits(self.greedy_params(), &features::rank_options(&phis), 1.0);
        let mut out: Vec<RankedFile> = ranked
            .iter()
            .zip(&phis)
            .zip(scores)
            .map(|((&i, phi), score)| {
                let mut values = [0.0; features::FILE];
                for &(k, x) in phi {
                    values[k] = x;
                }
                RankedFile {
                    path: episode.seen[i].path.clone(),
                    score,
                    features: features::FILE_NAMES.iter().map(|name| (*name).to_owned()).zip(values).collect(),
                }
            })
            .collect();
        out.sort_by(|a, b| b.score.total_cmp(&a.score));
        out
    }

    fn answer(&self, episode: &mut ProxyEpisode) -> Answer {
        let (ranked, phis) = self.answer_candidates(episode);
        let chosen: Vec<usize> = if self.config.answer_size {
            self.ranked_answer(episode, phis)
        } else {
            let mut chosen = Vec::new();
            for (j, phi) in phis.iter().enumerate() {
                if self.decide(episode, vec![features::include_features(phi), Vec::new()]) == 0 {
                    chosen.push(j);
                }
            }
            chosen
        };
        let mut files = Vec::new();
        let mut line_ranges = Vec::new();
        for j in chosen {
            let file = &episode.seen[ranked[j]];
            files.push(file.path.clone());
            line_ranges
                .extend(ranges(&file.lines, self.config.line_margin).map(|(a, b)| format!("{}:{a}-{b}", file.path)));
        }
        episode.spend(TOKENS_PER_FILE * files.len());
        Answer::Structured { files, line_ranges }
    }

    /// Picks up to `max_answer_size` files one by one (a Plackett–Luce ranking:
    /// each pick a softmax over the files not yet picked), then how many of
    /// them to answer; returns indices into `phis` in answer order.
    fn ranked_answer(&self, episode: &mut ProxyEpisode, phis: Vec<Vec<(usize, f64)>>) -> Vec<usize> {
        let size = self.config.max_answer_size.clamp(1, features::MAX_ANSWER).min(phis.len());
        if size == 0 {
            return Vec::new();
        }
        let mut left: Vec<usize> = (0..phis.len()).collect();
        let mut picked = Vec::with_capacity(size);
        while picked.len() < size {
            let remaining: Vec<Vec<(usize, f64)>> = left.iter().map(|&j| phis[j].clone()).collect();
            let chosen = self.decide(episode, features::rank_options(&remaining));
            picked.push(left.remove(chosen));
        }
        let picked_phis: Vec<Vec<(usize, f64)>> = picked.iter().map(|&j| phis[j].clone()).collect();
        let k = self.decide(episode, features::size_options(&picked_phis)) + 1;
        picked.truncate(k);
        picked
    }
}

/// The most likely number of thinking chunks of a turn under `params`: the chain stops after
/// `n < cap` chunks with probability `p_0 ⋯ p_{n−1} (1 − p_n)` and thinks all `cap` with
/// `p_0 ⋯ p_{cap−1}`, where `p_i` is chunk `i`'s "continue" probability. Ties go to fewer chunks,
/// as a greedy decision's go to "stop".
fn likeliest_length(params: &[f64], state: &[f64; features::STATE], answer_turn: bool, cap: usize) -> usize {
    // log p_i and log(1 − p_i) from the two options' log-softmax ("stop" first).
    let steps: Vec<(f64, f64)> = (0..cap)
        .map(|chunk| {
            let logp = loglinear::log_softmax(&loglinear::logits(
                params,
                &features::think_options(state, answer_turn, chunk, cap),
                1.0,
            ));
            (logp[1], logp[0])
        })
        .collect();
    let (mut best, mut best_logp, mut prefix) = (0, f64::NEG_INFINITY, 0.0);
    for n in 0..=cap {
        let logp = prefix + steps.get(n).map_or(0.0, |&(_, stop)| stop);
        if logp > best_logp {
            (best, best_logp) = (n, logp);
        }
        if let Some(&(go_on, _)) = steps.get(n) {
            prefix += go_on;
        }
    }
    best
}

/// A greedy count decision taken in two steps ([`ProxyConfig::greedy_answer_mass`]): option 0
/// ("answer now") when it holds at least half the probability, else the likeliest call count
/// (ties to fewer calls).
fn search_or_answer(params: &[f64], options: &[loglinear::Features]) -> usize {
    let logp = loglinear::log_softmax(&loglinear::logits(params, options, 1.0));
    if logp[0] >= 0.5f64.ln() { 0 } else { 1 + loglinear::argmax(&logp[1..]) }
}

/// Hit lines widened by `margin` and merged where they touch.
fn ranges(lines: &std::collections::BTreeSet<u64>, margin: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &line in lines {
        let (a, b) = (line.saturating_sub(margin).max(1), line + margin);
        match out.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out.into_iter()
}

impl Policy for ProxyPolicy {
    type Episode = ProxyEpisode;
    type State = ProxyState;
    type Error = ProxyError;

    fn begin(&self, task: &TaskPrompt, sampling: Sampling, seed: u64) -> Result<ProxyEpisode, ProxyError> {
        let temperature = match sampling {
            // A non-positive temperature would divide by zero; it means "greedy".
            Sampling::Sample { temperature } if temperature > 0.0 => Some(temperature),
            _ => None,
        };
        Ok(ProxyEpisode::new(&task.text, ChaCha8Rng::seed_from_u64(seed), temperature, self.config))
    }

    fn act(&self, episodes: &mut [&mut ProxyEpisode], turn: TurnInfo) -> Result<Vec<TurnOutput>, ProxyError> {
        Ok(episodes.iter_mut().map(|e| self.act_one(e, turn)).collect())
    }

    fn observe(&self, episode: &mut ProxyEpisode, results: &[ToolResult]) -> Result<(), ProxyError> {
        episode.observe(results);
        Ok(())
    }

    fn completion_tokens(&self, episode: &ProxyEpisode) -> usize {
        episode.tokens
    }

    fn sampled_logprobs(&self, episode: &ProxyEpisode) -> Vec<f64> {
        episode.units.iter().map(|u| u.logp).collect()
    }

    fn entropy(&self, episode: &ProxyEpisode) -> f64 {
        if episode.units.is_empty() {
            return 0.0;
        }
        episode.units.iter().map(|u| u.entropy).sum::<f64>() / episode.units.len() as f64
    }

    fn logprobs(&self, episodes: &[&ProxyEpisode]) -> Result<Vec<Vec<f64>>, ProxyError> {
        Ok(episodes.iter().map(|e| e.units.iter().map(|u| u.logprob(&self.theta)).collect()).collect())
    }

    fn reference_logprobs(&self, episodes: &[&ProxyEpisode]) -> Result<Vec<Vec<f64>>, ProxyError> {
        Ok(episodes.iter().map(|e| e.units.iter().map(|u| u.logprob(&self.reference)).collect()).collect())
    }

    fn backward(&mut self, episodes: &[&ProxyEpisode], coeffs: &[Vec<f64>]) -> Result<(), ProxyError> {
        for (episode, coeffs) in episodes.iter().zip(coeffs) {
            for (unit, &coeff) in episode.units.iter().zip(coeffs) {
                unit.accumulate(&self.theta, coeff, &mut self.grad);
            }
        }
        Ok(())
    }

    fn step(&mut self, optim: &OptimStep) -> Result<StepStats, ProxyError> {
        let grad_norm = self.adam.step(&mut self.theta, &mut self.grad, optim);
        let beta = self.config.eval_average;
        if beta > 0.0 {
            for (avg, &x) in self.average.iter_mut().zip(&self.theta) {
                *avg = beta * *avg + (1.0 - beta) * x;
            }
        }
        Ok(StepStats { grad_norm })
    }

    fn state(&self) -> Result<ProxyState, ProxyError> {
        Ok(ProxyState {
            config: self.config,
            theta: self.theta.clone(),
            reference: self.reference.clone(),
            average: self.average.clone(),
            adam: self.adam.clone(),
        })
    }

    /// Refuses a state of another parameter layout (a checkpoint of another
    /// build) with [`ProxyError::Dimension`], leaving the policy unchanged.
    fn restore(&mut self, state: ProxyState) -> Result<(), ProxyError> {
        for (field, got) in [
            ("theta", state.theta.len()),
            ("reference", state.reference.len()),
            ("m", state.adam.m.len()),
            ("v", state.adam.v.len()),
            ("average", state.average.len()),
        ] {
            if got != DIM {
                return Err(ProxyError::Dimension { field, got, expected: DIM });
            }
        }
        *self = ProxyPolicy {
            config: state.config,
            average: state.average,
            theta: state.theta,
            reference: state.reference,
            grad: vec![0.0; DIM],
            adam: state.adam,
        };
        Ok(())
    }
}
