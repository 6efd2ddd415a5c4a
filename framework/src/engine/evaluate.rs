//! The evaluate phase of a step: on eval steps, one rollout per held-out task
//! (the first `eval_tasks`) under the evaluation sampling, summarised into the
//! `eval_*` columns.

use std::collections::HashSet;
use std::time::Instant;

use rewardlab_models::agent::Policy;

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

/// What the phase produced: columns on eval steps with held-out tasks.
pub(super) struct Evaluation {
    pub columns: Option<EvalColumns>,
    /// Wall seconds of the phase.
    pub seconds: f64,
}

impl<P: Policy> Engine<P> {
    /// Evaluates after step `step_no`'s update when it is an eval step (every
    /// `eval_every` steps, and the last). Seeds come from (seed, step, task).
    pub(super) fn evaluate(&self, step_no: usize) -> Result<Evaluation, EngineError> {
        let start = Instant::now();
        let c = &self.config;
        let due = c.eval_every > 0 && (step_no.is_multiple_of(c.eval_every) || step_no == c.total_steps);
        let columns = if due { self.held_out(step_no)? } else { None };
        Ok(Evaluation { columns, seconds: start.elapsed().as_secs_f64() })
    }

    /// The held-out rollouts and their columns; `None` without held-out tasks.
    fn held_out(&self, step_no: usize) -> Result<Option<EvalColumns>, EngineError> {
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
        Ok(Some(EvalColumns {
            fb_mean: mean(&summary.fb),
            fb_median: median(&summary.fb),
            precision: mean(&summary.precision),
            recall: mean(&summary.recall),
            fb_ge_0_8: summary.fb.iter().filter(|&&f| f >= 0.8).count() as f64 / summary.fb.len() as f64,
            turns: mean(&summary.turns),
        }))
    }
}
