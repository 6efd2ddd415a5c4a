//! rewardlab-framework.

pub mod bm25;
pub mod engine;
pub mod heuristic;
pub mod study;
pub mod synthetic;
pub mod warm_start;
