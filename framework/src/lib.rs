//! The training side of rewardlab: the GRPO engine and what it trains on.
//!
//! - [`engine`]: one run of GRPO over a [`Policy`](rewardlab_models::agent::Policy), a task
//!   source and a compiled reward variant, step by step, with metrics, checkpoints and resume.
//! - [`study`]: study files (a grid of reward variants × seeds), training every run of one,
//!   Slurm array scripts, offline replay, and the summary tables and plots of a finished study.
//! - [`synthetic`]: the seeded synthetic repository and its issues, the offline task source.
//! - [`warm_start`]: the SFT warm start of the Qwen3 policy on filtered scripted trajectories.
//! - [`bm25`]: the lexical BM25 baseline that retrieval policies are compared against.
//! - [`heuristic`]: the non-learned grep heuristic, the second baseline row of every study.
//! - [`locate`]: a trained policy as a retriever on any SWE-bench-style instances (Table 2).

#![warn(missing_docs)]

pub mod bm25;
pub mod engine;
pub mod heuristic;
pub mod locate;
mod markdown;
pub mod study;
pub mod synthetic;
pub mod warm_start;
