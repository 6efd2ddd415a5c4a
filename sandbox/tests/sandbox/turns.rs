//! Turns: at most 8 calls each, run concurrently, under the global concurrency limit.

use std::sync::Arc;

use rewardlab_sandbox::{ErrorKind, GrepArgs, Limits, RepoStore, Sandbox, Status, ToolCall, TreeKind};
use serde_json::json;

use crate::sandbox::helpers::{Fixture, generated_repo};

fn grep(pattern: &str) -> ToolCall {
    ToolCall::Grep(GrepArgs { pattern: pattern.to_owned(), path: None, case_sensitive: None })
}

fn sandbox(fx: &Fixture, limits: Limits) -> (Sandbox, String) {
    let src = fx.path("acme/turns");
    generated_repo(&src, 8, 3);
    let sandbox = Sandbox::new(Arc::new(RepoStore::open(fx.path("store")).expect("store")), limits);
    (sandbox, src.to_str().expect("utf-8").to_owned())
}

#[test]
fn calls_beyond_the_turn_limit_get_a_message_and_results_keep_call_order() {
    let fx = Fixture::new();
    let (sandbox, src) = sandbox(&fx, Limits::default());
    let tree = sandbox.tree(&src, "HEAD", TreeKind::View).expect("tree");
    let calls: Vec<ToolCall> = (0..10).map(|i| grep(&format!("value_{i}\\b"))).collect();
    let blocking = sandbox.run_turn_blocking(&tree, &calls);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("runtime");
    let concurrent = runtime.block_on(sandbox.run_turn(&tree, calls.clone()));
    assert_eq!(blocking, concurrent);
    for (i, result) in concurrent.iter().enumerate() {
        if i < 8 {
            assert_eq!(*result, sandbox.call(&tree, &calls[i]), "result {i} belongs to call {i}");
        } else {
            assert_eq!(result.status, Status::Error(ErrorKind::CallLimit));
            assert!(result.output.contains("at most 8 calls per turn"), "{}", result.output);
        }
    }
}

#[test]
fn json_turns_answer_invalid_calls_in_place() {
    let fx = Fixture::new();
    let (sandbox, src) = sandbox(&fx, Limits::default());
    let tree = sandbox.tree(&src, "HEAD", TreeKind::Worktree).expect("tree");
    let calls = [
        json!({"tool": "glob", "args": {"pattern": "docs/*.md"}}),
        json!({"tool": "delete", "args": {"path": "README.md"}}),
        json!({"tool": "read", "args": {"path": "README.md", "end": 1}}),
        json!({"tool": "read", "args": {"start": 1}}),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let results = runtime.block_on(sandbox.run_turn_json(&tree, &calls));
    assert_eq!(results[0].entities, ["docs/guide.md", "docs/ünï.md"]);
    assert_eq!(results[1].status, Status::Error(ErrorKind::UnknownTool));
    assert_eq!(results[2].output, "     1\t# Demo");
    assert_eq!(results[2].entities, ["README.md:1"]);
    assert_eq!(results[3].status, Status::Error(ErrorKind::InvalidCall));
    assert!(results[3].output.contains("missing required argument `path`"), "{}", results[3].output);
}

#[test]
fn the_global_semaphore_bounds_calls_in_flight_across_rollouts() {
    let fx = Fixture::new();
    let limits = Limits { max_concurrent_calls: 3, ..Limits::default() };
    let (sandbox, src) = sandbox(&fx, limits);
    let view = sandbox.tree(&src, "HEAD", TreeKind::View).expect("view");
    let worktree = sandbox.tree(&src, "HEAD~1", TreeKind::Worktree).expect("worktree");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().expect("runtime");
    let results = runtime.block_on(async {
        let mut rollouts = tokio::task::JoinSet::new();
        for r in 0..12 {
            let sandbox = sandbox.clone();
            let tree = if r % 2 == 0 { view.clone() } else { worktree.clone() };
            rollouts.spawn(async move {
                let calls = (0..8).map(|i| grep(&format!("(?i)[a-z]+_{i}[0-9]*\\(|TODO|{r}"))).collect();
                sandbox.run_turn(&tree, calls).await
            });
        }
        let mut all = Vec::new();
        while let Some(turn) = rollouts.join_next().await {
            all.extend(turn.expect("rollout task"));
        }
        all
    });
    assert_eq!(results.len(), 96);
    assert!(results.iter().all(|r| !r.is_error()));
    let stats = sandbox.stats();
    assert_eq!(stats.calls, 96);
    assert_eq!(stats.in_flight, 0);
    assert!(stats.peak_in_flight <= 3, "peak {} calls in flight with a limit of 3", stats.peak_in_flight);
    assert!(stats.peak_in_flight >= 1);
}
