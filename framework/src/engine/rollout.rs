//! Running a batch of rollouts turn-synchronously against the sandbox.
//!
//! Every active episode acts (one [`Policy::act`] call for all of them, so a
//! batched policy batches), then every tool call of the turn runs concurrently
//! on the engine's tokio runtime under the sandbox's global limit, then each
//! episode observes its results in call order. The last turn forces an answer:
//! a policy that still calls tools then is truncated. Results are placed by
//! index, never by completion order, so the batch is deterministic whatever
//! the thread count.
//!
//! Sampling and tool calls cannot be two phases of a step: turn t's calls are
//! what the policy sampled at turn t, and what it samples at turn t + 1 depends
//! on their results. So one step phase, [`Phase::Rollout`], holds both; the
//! batch's timings still split policy time from tool time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use rewardlab_models::agent::{Answer, Policy, Sampling, TaskPrompt, TurnInfo, TurnOutput};
use rewardlab_rewards::rollout::{LoggedCall, Rollout, Selection};
use rewardlab_sandbox::{ErrorKind, Sandbox, Status, ToolCall, ToolResult, Tree, TreeKind};
use tokio::runtime::Runtime;

use super::error::{EngineError, Phase};
use super::tasks::EngineTask;

/// The tokio runtime tool calls run on: `threads` workers and as many
/// blocking threads as the sandbox runs calls at once.
pub(crate) fn tool_runtime(threads: usize, sandbox: &Sandbox, name: &str) -> Result<Runtime, EngineError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .max_blocking_threads(sandbox.limits().max_concurrent_calls.max(1))
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(EngineError::Runtime)
}

/// One rollout to run.
pub(crate) struct EpisodeSpec<'a> {
    pub task: &'a EngineTask,
    /// The rollout's `group` (the task id, made unique within the batch).
    pub group: String,
    pub seed: u64,
}

/// The finished batch, in spec order.
pub(crate) struct RolloutBatch<E> {
    pub episodes: Vec<E>,
    pub records: Vec<Rollout>,
    pub tool_errors: usize,
    pub tool_timeouts: usize,
    /// Wall seconds spent opening the batch's trees and waiting for tool calls.
    pub tool_seconds: f64,
    /// Wall seconds spent in the policy (begin, act, observe) and bookkeeping.
    pub policy_seconds: f64,
}

/// Turn limits of a batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TurnLimits {
    pub max_turns: usize,
    pub max_calls_per_turn: usize,
}

/// An episode's record while it runs.
#[derive(Default)]
struct Progress {
    turns: Vec<Vec<LoggedCall>>,
    done: bool,
    predicted: Option<Selection>,
    valid: bool,
    truncated: bool,
}

/// Runs every spec to its answer (or truncation). A policy error or broken
/// contract is reported with `step` and `phase` (the step's rollouts or its evaluation).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_batch<P: Policy>(
    policy: &P,
    sandbox: &Sandbox,
    runtime: &Runtime,
    specs: &[EpisodeSpec<'_>],
    sampling: Sampling,
    limits: TurnLimits,
    step: usize,
    phase: Phase,
) -> Result<RolloutBatch<P::Episode>, EngineError> {
    let started = Instant::now();
    // Opening the commits' trees is the sandbox's work too (a view decodes the tree objects its
    // repository has not met yet): it counts as the tools' time.
    let trees = open_trees(sandbox, specs)?;
    let open_seconds = started.elapsed().as_secs_f64();
    let max_calls = limits.max_calls_per_turn.min(sandbox.limits().max_calls_per_turn);
    let mut episodes: Vec<P::Episode> = specs
        .iter()
        .map(|s| policy.begin(&TaskPrompt { id: s.task.id.clone(), text: s.task.prompt.clone() }, sampling, s.seed))
        .collect::<Result<_, _>>()
        .map_err(EngineError::policy(step, phase, "begin"))?;
    let mut progress: Vec<Progress> = specs.iter().map(|_| Progress::default()).collect();
    let mut batch_tool_seconds = open_seconds;
    let (mut tool_errors, mut tool_timeouts) = (0, 0);
    for turn in 0..limits.max_turns {
        let active: Vec<usize> = (0..specs.len()).filter(|&i| !progress[i].done).collect();
        if active.is_empty() {
            break;
        }
        let info = TurnInfo {
            index: turn,
            max_turns: limits.max_turns,
            max_calls_per_turn: max_calls,
            must_answer: turn + 1 == limits.max_turns,
        };
        let outputs = {
            let mut refs: Vec<&mut P::Episode> =
                episodes.iter_mut().enumerate().filter(|(i, _)| !progress[*i].done).map(|(_, e)| e).collect();
            policy.act(&mut refs, info).map_err(EngineError::policy(step, phase, "act"))?
        };
        if outputs.len() != active.len() {
            return Err(EngineError::Contract {
                step,
                phase,
                detail: format!("act returned {} outputs for {} episodes", outputs.len(), active.len()),
            });
        }
        let mut pending: Vec<(usize, Vec<Result<ToolCall, ToolResult>>)> = Vec::new();
        for (&i, output) in active.iter().zip(outputs) {
            let p = &mut progress[i];
            match output {
                TurnOutput::Calls(calls) if !info.must_answer => pending.push((i, calls)),
                TurnOutput::Calls(_) | TurnOutput::Truncated => {
                    // Out of turns (or budget) without an answer: the turn is
                    // counted, its calls are not run, nothing was predicted.
                    p.turns.push(Vec::new());
                    p.done = true;
                    p.truncated = true;
                }
                TurnOutput::Answer(answer) => {
                    p.turns.push(Vec::new());
                    p.done = true;
                    match parse(&answer) {
                        Some(selection) => {
                            p.predicted = Some(selection);
                            p.valid = true;
                        }
                        None => p.valid = false,
                    }
                }
            }
        }
        let tool_start = Instant::now();
        let results = run_calls(sandbox, runtime, &trees, specs, &pending, max_calls);
        batch_tool_seconds += tool_start.elapsed().as_secs_f64();
        for ((i, calls), results) in pending.iter().zip(results) {
            let logged = calls
                .iter()
                .zip(&results)
                .take(max_calls)
                .map(|(call, result)| {
                    match result.status {
                        Status::Timeout => tool_timeouts += 1,
                        Status::Error(_) => tool_errors += 1,
                        _ => {}
                    }
                    log_call(call, result)
                })
                .collect();
            progress[*i].turns.push(logged);
            policy.observe(&mut episodes[*i], &results).map_err(EngineError::policy(step, phase, "observe"))?;
        }
    }
    let records = specs
        .iter()
        .zip(&episodes)
        .zip(progress)
        .map(|((spec, episode), p)| Rollout {
            group: spec.group.clone(),
            predicted: p.predicted,
            target: Some(spec.task.target.clone()),
            turns: Some(p.turns),
            completion_tokens: Some(policy.completion_tokens(episode) as u64),
            valid: Some(p.valid),
            truncated: Some(p.truncated),
        })
        .collect();
    Ok(RolloutBatch {
        episodes,
        records,
        tool_errors,
        tool_timeouts,
        tool_seconds: batch_tool_seconds,
        policy_seconds: started.elapsed().as_secs_f64() - batch_tool_seconds,
    })
}

/// Opens each distinct (repository, commit) once; the store caches trees across batches.
fn open_trees(
    sandbox: &Sandbox,
    specs: &[EpisodeSpec<'_>],
) -> Result<HashMap<(String, String), Arc<Tree>>, EngineError> {
    let mut trees = HashMap::new();
    for spec in specs {
        let key = (spec.task.repo.clone(), spec.task.commit.clone());
        if trees.contains_key(&key) {
            continue;
        }
        let tree = sandbox.tree(&key.0, &key.1, TreeKind::View).map_err(|source| EngineError::Tree {
            task: spec.task.id.clone(),
            repo: key.0.clone(),
            commit: key.1.clone(),
            source: Box::new(source),
        })?;
        trees.insert(key, tree);
    }
    Ok(trees)
}

/// Runs the calls of every pending episode concurrently and returns, per
/// episode, one result per call in call order. Calls past `max_calls` are
/// answered with a call-limit error without running; malformed calls with
/// their own error.
fn run_calls(
    sandbox: &Sandbox,
    runtime: &Runtime,
    trees: &HashMap<(String, String), Arc<Tree>>,
    specs: &[EpisodeSpec<'_>],
    pending: &[(usize, Vec<Result<ToolCall, ToolResult>>)],
    max_calls: usize,
) -> Vec<Vec<ToolResult>> {
    let mut results: Vec<Vec<Option<ToolResult>>> = pending.iter().map(|(_, calls)| vec![None; calls.len()]).collect();
    let mut jobs = Vec::new();
    for (k, (i, calls)) in pending.iter().enumerate() {
        let task = specs[*i].task;
        let tree = &trees[&(task.repo.clone(), task.commit.clone())];
        for (j, call) in calls.iter().enumerate() {
            if j >= max_calls {
                results[k][j] = Some(ToolResult::call_limit(j, max_calls));
                continue;
            }
            match call {
                Err(invalid) => results[k][j] = Some(invalid.clone()),
                Ok(call) => jobs.push((k, j, tree.clone(), call.clone())),
            }
        }
    }
    if !jobs.is_empty() {
        let done = runtime.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for (k, j, tree, call) in jobs {
                let sandbox = sandbox.clone();
                set.spawn(async move { (k, j, sandbox.run_call(tree, call).await) });
            }
            let mut done = Vec::new();
            while let Some(joined) = set.join_next().await {
                // A panicked task leaves its slot empty; it is answered below.
                if let Ok(result) = joined {
                    done.push(result);
                }
            }
            done
        });
        for (k, j, result) in done {
            results[k][j] = Some(result);
        }
    }
    results
        .into_iter()
        .map(|calls| {
            calls
                .into_iter()
                .map(|r| {
                    r.unwrap_or_else(|| {
                        ToolResult::error(ErrorKind::Internal, "the sandbox failed on this call".into())
                    })
                })
                .collect()
        })
        .collect()
}

/// The rollout-log form of a call: a malformed call is logged as tool `invalid` with no entities.
fn log_call(call: &Result<ToolCall, ToolResult>, result: &ToolResult) -> LoggedCall {
    match call {
        Ok(call) => LoggedCall::of(call, result),
        Err(_) => LoggedCall::invalid(),
    }
}

/// The prediction of an answer under the strict answer schema, or `None`
/// when it is invalid. A structured answer is checked by the same rules as
/// text (`Answer::from_lists`), so both kinds obey them (no duplicates, no absolute paths).
pub(crate) fn parse(answer: &Answer) -> Option<Selection> {
    let parsed = match answer {
        Answer::Text(text) => rewardlab_rewards::parse_answer(text),
        Answer::Structured { files, line_ranges } => rewardlab_rewards::Answer::from_lists(files, line_ranges, None),
    }
    .ok()?;
    Some(Selection { files: Some(parsed.files), line_ranges: Some(parsed.line_ranges), functions: parsed.functions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_and_text_answers_obey_the_same_schema() {
        let ok = parse(&Answer::Structured { files: vec!["./a.py".into()], line_ranges: vec!["a.py:3-5".into()] })
            .expect("valid structured answer");
        assert_eq!(ok.files, Some(vec!["a.py".to_string()]));
        assert_eq!(ok.line_ranges.as_ref().map(Vec::len), Some(1));
        assert!(
            parse(&Answer::Structured { files: vec!["a.py".into(), "a.py".into()], line_ranges: vec![] }).is_none()
        );
        assert!(parse(&Answer::Structured { files: vec!["/etc/passwd".into()], line_ranges: vec![] }).is_none());
        assert!(parse(&Answer::Text("no block".into())).is_none());
        let text = parse(&Answer::Text(r#"I think <answer>{"files": ["b.py"], "line_ranges": []}</answer>"#.into()))
            .expect("valid text answer");
        assert_eq!(text.files, Some(vec!["b.py".to_string()]));
    }
}
