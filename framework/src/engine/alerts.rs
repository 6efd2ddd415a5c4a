//! Tripwires: the reward program's `alert` statements, evaluated once per
//! step after the update, when the step's metrics exist.
//!
//! An alert's condition reads batch reductions of the step's features and
//! outputs, params, and the step metrics (`step.kl`, `step.turns`, ...: the
//! names and ranges are declared in `rewardlab_rewards::schema::STEP_METRICS`,
//! the values come from the step's [`MetricsRow`] through [`metric_value`]).
//! It is evaluated by the DSL's interpreter on the step's feature table, not
//! by the fused kernel: a batch of a few hundred rows costs microseconds.
//!
//! `alert C for N steps` fires at the step where `C` has held for N
//! consecutive steps, and again only after `C` has stopped holding and held
//! for N steps anew, so a lasting collapse is one row of `alerts.csv`, not one
//! per step. The streaks are engine state: a checkpoint keeps them, so a
//! resumed run fires exactly where the uninterrupted one would.

use std::path::Path;

use rewardlab_dsl::interp::alerts::eval_alerts;
use rewardlab_dsl::{EvalError, FeatureTable, Program};
use serde::{Deserialize, Serialize};

use super::metrics::MetricsRow;

/// The fired-alert log of a run directory ([`FiredAlert`] rows), written when
/// the variant declares alerts.
pub const ALERTS_FILE: &str = "alerts.csv";

/// What a run does when an alert fires (`[training] on_alert`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnAlert {
    /// Log it (`alerts.csv`, the progress line, the summary) and go on.
    #[default]
    Warn,
    /// Log it, write a checkpoint and end the run after this step.
    Stop,
}

/// One row of `alerts.csv`: an alert that fired at a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiredAlert {
    /// The step it fired at, 1-based.
    pub step: usize,
    /// Its index among the program's alerts, in source order.
    pub alert: usize,
    /// Consecutive steps its condition had held (its `for N steps`, or 1).
    pub held: u32,
    /// The condition's source text.
    pub condition: String,
    /// The message.
    pub message: String,
}

/// The column names of `alerts.csv`, in order.
pub fn alerts_header() -> Vec<&'static str> {
    vec!["step", "alert", "held", "condition", "message"]
}

/// The value of the step metric `name` (`step.kl`) in a step's row, or `None`
/// for a name the engine does not compute.
pub fn metric_value(name: &str, m: &MetricsRow) -> Option<f64> {
    Some(match name.strip_prefix(rewardlab_dsl::schema::METRIC_PREFIX)? {
        "kl" => m.kl,
        "entropy" => m.entropy,
        "clip_ratio" => m.clip_ratio,
        "grad_norm" => m.grad_norm,
        "loss" => m.loss,
        "lr" => m.lr,
        "units" => m.units,
        "turns" => m.turns,
        "calls" => m.calls,
        "calls_per_turn" => m.c,
        "completion_len" => m.completion_len,
        "valid_rate" => m.valid_rate,
        "truncated_rate" => m.truncated_rate,
        "zero_std_groups" => m.zero_std_groups,
        "tool_errors" => m.tool_errors as f64,
        "tool_timeouts" => m.tool_timeouts as f64,
        _ => return None,
    })
}

/// Evaluates `program`'s alerts on one step's feature table and metrics row,
/// advancing `streaks` (one per alert: consecutive steps each has held), and
/// returns the alerts that fire at this step.
pub fn step_alerts(
    program: &Program,
    table: &FeatureTable,
    metrics: &MetricsRow,
    streaks: &mut Vec<u32>,
) -> Result<Vec<FiredAlert>, EvalError> {
    if program.alerts.is_empty() {
        return Ok(Vec::new());
    }
    let values: Vec<f64> = program.metrics.iter().map(|m| metric_value(m, metrics).unwrap_or(f64::NAN)).collect();
    let holds = eval_alerts(program, table, &values)?;
    Ok(advance(program, &holds, metrics.step, streaks))
}

/// Advances the streaks by one step's truth values and returns what fires.
pub(crate) fn advance(program: &Program, holds: &[bool], step: usize, streaks: &mut Vec<u32>) -> Vec<FiredAlert> {
    streaks.resize(program.alerts.len(), 0);
    let mut fired = Vec::new();
    for (i, (alert, &h)) in program.alerts.iter().zip(holds).enumerate() {
        streaks[i] = if h { streaks[i].saturating_add(1) } else { 0 };
        if streaks[i] == alert.steps {
            fired.push(FiredAlert {
                step,
                alert: i,
                held: streaks[i],
                condition: alert.text.clone(),
                message: alert.message.clone(),
            });
        }
    }
    fired
}

/// Reads a run's `alerts.csv`; a missing file (a variant without alerts) is no rows.
pub fn read_alerts(path: &Path) -> Result<Vec<FiredAlert>, csv::Error> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    csv::Reader::from_path(path)?.deserialize().collect()
}

#[cfg(test)]
mod tests {
    use rewardlab_dsl::SourceFile;
    use rewardlab_dsl::check::{CheckOptions, compile_source};

    use super::*;

    #[test]
    fn the_engine_computes_every_declared_step_metric() {
        let row = MetricsRow { kl: 0.5, c: 2.0, tool_timeouts: 3, ..MetricsRow::default() };
        for (name, _, _) in rewardlab_rewards::schema::STEP_METRICS {
            assert!(metric_value(name, &row).is_some(), "{name} has no value");
        }
        assert_eq!(metric_value("step.kl", &row), Some(0.5));
        assert_eq!(metric_value("step.calls_per_turn", &row), Some(2.0));
        assert_eq!(metric_value("step.tool_timeouts", &row), Some(3.0));
        assert_eq!(metric_value("step.nope", &row), None);
        assert_eq!(metric_value("kl", &row), None);
    }

    #[test]
    fn an_alert_fires_once_per_streak_of_its_length() {
        let text = "reward = Fb(file)\nalert step.kl > 1 for 2 steps : \"drift\"\nalert step.kl > 1 : \"now\"\n";
        let (program, _) = compile_source(
            &SourceFile::new("a.reward", text),
            &rewardlab_rewards::feature_schema(),
            &CheckOptions::default(),
        )
        .expect("compiles");
        let holds = [false, true, true, true, false, true, true];
        let mut streaks = Vec::new();
        let fired: Vec<(usize, usize, u32)> = holds
            .iter()
            .enumerate()
            .flat_map(|(i, &h)| advance(&program, &[h, h], i + 1, &mut streaks))
            .map(|f| (f.step, f.alert, f.held))
            .collect();
        assert_eq!(fired, [(2, 1, 1), (3, 0, 2), (6, 1, 1), (7, 0, 2)]);
        assert_eq!(streaks, [2, 2]);
    }
}
