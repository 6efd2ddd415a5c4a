//! Retrieval rewards: the rollout features of the reward language, computed
//! from rollout records, and the data formats they come from.
//!
//! - [`schema`]: the feature schema reward files are checked against.
//! - [`rollout`]: the contract's rollout JSONL record and a loader that
//!   reports bad lines as `line N: ...`.
//! - [`features`]: [`feature_table`] turns rollouts into the DSL's
//!   [`rewardlab_dsl::FeatureTable`], one column per requested feature.
//! - [`metrics`]: P, R, F-beta over sets and line ranges; [`efficiency`]: `c`, `C`, `T`, `e`.
//! - [`parquet`]: features and rollout records from Parquet, outputs to Parquet.
//! - [`summary`]: which features a run's summary metrics read ([`SummaryFeatures`]),
//!   resolved from a schema's declarations and roles.
//! - [`answer`]: the strict `<answer>{...}</answer>` parser behind `valid` (defined once, in
//!   `rewardlab-protocol`, with [`paths`] and [`LineRange`]; re-exported here).
//! - [`diff`]: unified diffs → target files and pre-image line ranges.
//! - [`tasks`]: SWE-bench JSONL and commit-mined tasks (gix).
//! - [`catm`]: CATM labels from agent trajectories (mine, judge, weigh).
//!
//! # Edge-case decisions
//!
//! Metrics ([`metrics`]):
//! - Sets are sets: a file (or function, or exact line range) listed twice counts once.
//! - Both prediction and target empty: P = R = F_β = 1. Exactly one empty: P = R = F_β = 0.
//! - F_β is computed from counts, `(1+β²)tp / ((1+β²)tp + β²fn + fp)`, for any β ≥ 0
//!   (β = 0 is precision); `tp = 0` gives 0.
//! - Line ranges `path:start-end` are 1-based and inclusive; `path:n` means `n-n`;
//!   `start = 0` or `end < start` is malformed. A predicted range matches a target
//!   range in the same file when it covers ≥ 50% of the target's lines
//!   ([`LineMatch::Coverage`], the contract's rule) or, selectable, when their
//!   Jaccard index is ≥ 50% ([`LineMatch::Jaccard`], seed 001 Table 6). Matching
//!   is greedy one-to-one, largest overlap (Jaccard: largest index) first, ties by
//!   target then prediction order.
//! - `e`: a call's entities are de-duplicated; an empty result scores 0; calls of
//!   a turn count in listed order; no calls gives 0. `c = C / T` with `T` the
//!   number of turns listed (the answer turn included).
//!
//! Rollout records ([`rollout`], [`features`]):
//! - Every key is optional. An **absent** key means the source did not record
//!   it: a feature that needs it is an error naming the feature, the source, the
//!   rollout and the key (`Fb(func)` with no `target.functions`). A **present,
//!   empty** list is an empty set. One exception: a rollout with `"valid": false`
//!   and no `predicted` predicted nothing (empty sets), since an unparsable
//!   answer has no prediction to log.
//! - `predicted`/`target` reject unknown keys (typos would read as "absent");
//!   other levels accept extra keys. `turns: []` is malformed (the answer turn is
//!   always there). Paths are normalised on load (`./a.py` → `a.py`).
//! - A computed value outside the feature's declared range (e.g. `c > 8`) is an
//!   error: the checker's interval proofs assume the declared ranges.
//! - Rows are grouped by `group` in order of first appearance, input order within
//!   a group; [`GroupedTable::order`] maps rows back to input positions.
//!
//! Answers ([`answer`]): exactly one block in the reply (after any `</think>`); `files` and `line_ranges` required,
//! `functions` optional, other keys rejected; duplicates, absolute paths, `..`
//! and wrong JSON types make the answer invalid with a reason.
//!
//! Patches ([`diff`]): targets are pre-image paths (an added file's new path);
//! ranges span a hunk's changed pre-image lines (an insertion anchors to the
//! line before it); deleted files cover the whole file; added and binary files
//! have no range. SWE-bench `expected_spans` become `path::span` verbatim.

#![warn(missing_docs)]

pub mod catm;
pub mod diff;
pub mod efficiency;
pub mod features;
pub mod metrics;
pub mod parquet;
pub mod rollout;
pub mod schema;
pub mod summary;
pub mod tasks;

pub use rewardlab_protocol::{answer, paths};

pub use answer::{Answer, AnswerError, parse_answer};
pub use features::{FeatureError, FeatureOptions, GroupedTable, feature_table};
pub use metrics::{Counts, LineMatch, LineRange};
pub use rollout::{Loaded, LoggedCall, RecordError, Rollout, Selection, load_rollouts};
pub use schema::feature_schema;
pub use summary::{SummaryColumns, SummaryError, SummaryFeatures, SummaryMetric};
pub use tasks::{Targets, Task};
