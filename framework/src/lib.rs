//! rewardlab-framework.

#![warn(missing_docs)]

pub mod bm25;
pub mod engine;
pub mod study;
pub mod synthetic;
pub mod warm_start;
