//! The study runner's library half: study files (a grid of reward variants ×
//! seeds) checked before anything runs ([`load`]), offline replay of variants on
//! logged rollouts ([`replay`]), and the outputs of a finished study — summary
//! tables with confidence intervals, baselines and plots ([`summary`], [`plots`]).
//!
//! Training itself is the engine's ([`crate::engine`]); the `study` binary joins the two.

pub mod baseline;
pub mod load;
pub mod spec;
mod synth;

pub use load::{RunSpec, Study, StudyError, Variant, load_study, parse_study, run_dir};
pub use spec::{GridSpec, PolicySpec, Qwen3Spec, StudyFile, SummarySpec, TaskSpec, VariantSpec};
pub mod plots;
pub mod replay;
pub mod stats;
pub mod summary;

pub use baseline::{bm25_baseline, bm25_baseline_with};
pub use plots::write_plots;
pub use replay::{ReplayRow, replay, replay_markdown};
pub use summary::{Manifest, Summary, SummaryError, summarize, write_tables};

#[cfg(test)]
mod tests;
