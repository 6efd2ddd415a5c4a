//! Evaluating a program's `alert` conditions over one batch.
//!
//! An alert reads only batch-level values (the checker sees to it), so its
//! condition, with the step metrics substituted, is a plain expression whose
//! column is the same on every row: it is evaluated by this interpreter over
//! the batch's table and read at row 0. The definitions it reads (`reward`,
//! lets) are evaluated once for all alerts. This runs after the program's
//! outputs, once per batch. The backends that compile programs evaluate the
//! same conditions through [`crate::hir::Program::alert_program`] (each
//! condition a program of its own, its step metrics params):
//! [`crate::cpu::CompiledAlerts`] on the fused CPU plan, and the C twin and
//! CUDA codegen of that program; tests hold them to this oracle.

use super::ops::truthy;
use super::{Interp, Reach, prepare};
use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::{Expr, Program};
use crate::table::FeatureTable;

/// Whether each of `program.alerts` holds on `table` (one batch), in order.
///
/// `metrics[i]` is the value of the step metric `program.metrics[i]`; a
/// missing one reads as NaN, which no comparison holds for. A condition
/// whose value is NaN holds, as every NaN is truthy in the language. On an
/// empty table no alert holds. The only error is a feature an alert reads
/// that the table lacks.
pub fn eval_alerts(program: &Program, table: &FeatureTable, metrics: &[f64]) -> Result<Vec<bool>, EvalError> {
    if program.alerts.is_empty() {
        return Ok(Vec::new());
    }
    if table.rows() == 0 {
        return Ok(vec![false; program.alerts.len()]);
    }
    let conds: Vec<Expr> = program.alerts.iter().map(|a| a.cond.with_metrics(metrics)).collect();
    let roots: Vec<&Expr> = conds.iter().collect();
    let reach = Reach::of(program, &roots);
    let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
    let features = prepare(program, table, &options, &reach)?;
    let mut interp = Interp::new(program, table, features);
    Ok(conds.iter().map(|c| interp.expr(c).first().is_some_and(|&v| truthy(v))).collect())
}
