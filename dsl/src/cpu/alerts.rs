//! A program's `alert` conditions on the fused CPU backend: each condition is compiled as a
//! program of its own ([`Program::alert_program`]) whose step metrics are params, so one
//! compilation serves every step.

use super::CompiledProgram;
use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::Program;
use crate::interp::ops::truthy;
use crate::table::FeatureTable;

/// A program's alerts, compiled once (see [`crate::interp::alerts::eval_alerts`], the oracle).
#[derive(Clone, Debug)]
pub struct CompiledAlerts {
    metrics: Vec<String>,
    conditions: Vec<CompiledProgram>,
}

impl CompiledAlerts {
    /// Compiles every alert of `program` (none: nothing to evaluate).
    pub fn new(program: &Program) -> CompiledAlerts {
        CompiledAlerts {
            metrics: program.metrics.clone(),
            conditions: (0..program.alerts.len()).map(|i| CompiledProgram::new(&program.alert_program(i))).collect(),
        }
    }

    /// Whether each alert holds on `table` (one batch), with `metrics[i]` the value of the
    /// program's step metric `i` (a missing one reads as NaN): exactly what
    /// [`crate::interp::alerts::eval_alerts`] answers.
    pub fn eval(&mut self, table: &FeatureTable, metrics: &[f64]) -> Result<Vec<bool>, EvalError> {
        if table.rows() == 0 {
            return Ok(vec![false; self.conditions.len()]);
        }
        let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
        let mut holds = Vec::with_capacity(self.conditions.len());
        for condition in &mut self.conditions {
            for (i, name) in self.metrics.iter().enumerate() {
                condition.set_param(name, metrics.get(i).copied().unwrap_or(f64::NAN));
            }
            let out = condition.eval(table, &options)?;
            holds.push(out.reward.first().is_some_and(|&v| truthy(v)));
        }
        Ok(holds)
    }
}
