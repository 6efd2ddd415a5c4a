//! The evaluate phase of a step: on eval steps, one rollout per held-out task
//! (the first `eval_tasks`) under the evaluation sampling, summarised into the
//! `eval_*` columns and kept task by task as [`EvalRecord`]s (the run's
//! `eval.jsonl`), so a summary can break the held-out scores down by
//! repository or by task.

use std::collections::HashSet;
use std::time::Instant;

use rewardlab_models::agent::Policy;
use serde::{Deserialize, Serialize};

use super::Engine;
use super::error::{EngineError, Phase};
use super::metrics::{mean, median};
use super::rollout::{EpisodeSpec, TurnLimits, run_batch};
use super::seed::{Stream, derive};

/// The held-out columns of a metrics row.
pub(super) struct EvalColumns {
    pub fb_mean: f64,
    pub fb_median: Option<f64>,
    pub precision: f64,
    pub recall: f64,
    /// Share of rollouts with `Fb(file) ≥ 0.8`.
    pub fb_ge_0_8: f64,
    pub turns: f64,
}

/// One held-out task's greedy rollout at one eval step: a line of `eval.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    /// The step after whose update the task was evaluated.
    pub step: usize,
    /// The task's id ([`super::EngineTask::id`]).
    pub task: String,
    /// The task's repository as the task source names it ([`super::EngineTask::repo`]).
    pub repo: String,
    /// `Fb(file)` with β = 0.5.
    pub fb: f64,
    /// `P(file)`.
    pub precision: f64,
    /// `R(file)`.
    pub recall: f64,
    /// Feature `T`: turns the rollout took.
    pub turns: f64,
    /// The files the answer named (empty for an invalid answer).
    pub files: Vec<String>,
}

/// What the phase produced: columns on eval steps with held-out tasks.
pub(super) struct Evaluation {
    pub columns: Option<EvalColumns>,
    /// The per-task records behind `columns`, in held-out order (empty off eval steps).
    pub records: Vec<EvalRecord>,
    /// Wall seconds of the phase.
    pub seconds: f64,
    /// The part of `seconds` spent waiting for the held-out episodes' tool calls.
    pub tool_seconds: f64,
}

impl<P: Policy> Engine<P> {
    /// Evaluates after step `step_no`'s update when it is an eval step (every
    /// `eval_every` steps, and the last). Seeds come from (seed, step, task).
    pub(super) fn evaluate(&self, step_no: usize) -> Result<Evaluation, EngineError> {
        let start = Instant::now();
        let c = &self.config;
        let due = c.eval_every > 0 && (step_no.is_multiple_of(c.eval_every) || step_no == c.total_steps);
        let held = if due { self.held_out(step_no)? } else { None };
        let (columns, records, tool_seconds) =
            held.map_or((None, Vec::new(), 0.0), |(columns, records, tools)| (Some(columns), records, tools));
        Ok(Evaluation { columns, records, seconds: start.elapsed().as_secs_f64(), tool_seconds })
    }

    /// The held-out rollouts, their columns and per-task records, and the
    /// seconds spent waiting for their tool calls; `None` without held-out tasks.
    fn held_out(&self, step_no: usize) -> Result<Option<(EvalColumns, Vec<EvalRecord>, f64)>, EngineError> {
        let c = &self.config;
        let tasks = self.tasks.clone();
        let all = tasks.tasks();
        let limit = c.eval_tasks.unwrap_or(usize::MAX);
        let held: Vec<usize> = tasks.held_out().iter().copied().take(limit).collect();
        if held.is_empty() {
            return Ok(None);
        }
        let mut ids = HashSet::new();
        let specs: Vec<EpisodeSpec<'_>> = held
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                let task = &all[t];
                let group = if ids.insert(task.id.as_str()) { task.id.clone() } else { format!("{}#{k}", task.id) };
                EpisodeSpec { task, group, seed: derive(c.seed, Stream::Eval, &[step_no as u64, t as u64]) }
            })
            .collect();
        let limits = TurnLimits { max_turns: c.max_turns, max_calls_per_turn: c.max_calls_per_turn };
        let sampling = c.eval_sampling.sampling();
        let batch =
            run_batch(&self.policy, &self.sandbox, &self.runtime, &specs, sampling, limits, step_no, Phase::Evaluate)?;
        let summary = self.summarise(&batch.records, step_no)?;
        // The batch is in spec order, and the summary columns in batch order.
        let records = held
            .iter()
            .zip(&batch.records)
            .enumerate()
            .map(|(k, (&t, rollout))| EvalRecord {
                step: step_no,
                task: all[t].id.clone(),
                repo: all[t].repo.clone(),
                fb: summary.fb[k],
                precision: summary.precision[k],
                recall: summary.recall[k],
                turns: summary.turns[k],
                files: rollout.predicted.as_ref().and_then(|p| p.files.clone()).unwrap_or_default(),
            })
            .collect();
        let columns = EvalColumns {
            fb_mean: mean(&summary.fb),
            fb_median: median(&summary.fb),
            precision: mean(&summary.precision),
            recall: mean(&summary.recall),
            fb_ge_0_8: summary.fb.iter().filter(|&&f| f >= 0.8).count() as f64 / summary.fb.len() as f64,
            turns: mean(&summary.turns),
        };
        Ok(Some((columns, records, batch.tool_seconds)))
    }
}
