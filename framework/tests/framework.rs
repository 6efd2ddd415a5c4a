//! Integration tests of rewardlab-framework: one binary, a module per area
//! under `tests/framework/`.

#[path = "framework/common.rs"]
mod common;
#[path = "framework/engine.rs"]
mod engine;
#[path = "framework/heuristic.rs"]
mod heuristic;
#[path = "framework/proxy.rs"]
mod proxy;
#[path = "framework/qwen3.rs"]
mod qwen3;
#[path = "framework/retrieval.rs"]
mod retrieval;
#[path = "framework/shadow.rs"]
mod shadow;
#[path = "framework/synthetic.rs"]
mod synthetic;
#[path = "framework/toy.rs"]
mod toy;
#[path = "framework/warm_start.rs"]
mod warm_start;
