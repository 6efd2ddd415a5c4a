//! The fused CPU backend: a program compiled to [stages](crate::ir) and run
//! block by block, checked against the [interpreter](crate::interp).
//!
//! # Design
//!
//! [`CompiledProgram::new`] lowers the program to the stage IR (definitions
//! inlined, common subexpressions shared, constants folded), then plans each
//! elementwise stage's registers (linear-scan allocation onto chunk-sized
//! buffers; feature and column loads are read in place, constants and params
//! get a buffer filled once) and cuts the stage list into passes at batch
//! stages (`plan`).
//!
//! [`CompiledProgram::eval`] runs the passes in order. A pass walks the table
//! in blocks of whole groups (about `exec::BLOCK` rows); rayon runs blocks
//! in parallel. Within a block each stage of the pass runs in turn: an
//! elementwise stage loops over chunks of `exec::CHUNK` rows, each op a
//! tight `r3[i] = r1[i] * r2[i]` loop over register buffers that stay in L1
//! (`kernels`), and stores only the columns later stages or the caller need;
//! a group reduction reduces each group of the block while its argument is
//! still in cache; the next elementwise stage reads the group's values back
//! at once. So GRPO's `reward`, `group.mean`/`group.std` and `adv` are one
//! pass, with no full-length temporary per operator. A batch reduction needs
//! its whole argument column, so it runs between passes.
//!
//! # Determinism
//!
//! Results are bit-identical whatever the thread count: each row's ops are
//! the interpreter's scalar functions in the same order, group reductions run
//! left to right within a group, and batch reductions use the fixed-chunk sum
//! of [`ops::sum`](crate::interp::ops::sum). Since the interpreter uses the
//! same scalar functions and summation, compiled results also equal the
//! interpreter's bit for bit in practice (the differential tests allow 1e-6).
//!
//! # Errors
//!
//! The same as the interpreter, by construction: the same up-front checks
//! (missing feature, group size; see `interp::prepare`). Each block checks
//! its output values for NaN and infinities while they are still in cache;
//! when one is found, the interpreter is re-run on the table to name the
//! definition that went non-finite first, with the rollout's details. That
//! costs an interpreter run, but only on failure.

mod alerts;
mod exec;
mod kernels;
mod plan;

pub use alerts::CompiledAlerts;

use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::Program;
use crate::interp::{self, Reach};
use crate::ir::{self, IrProgram, Stage};
use crate::table::{FeatureTable, Outputs};
use plan::{StagePlan, Step};

/// A program ready to evaluate many tables.
#[derive(Clone, Debug)]
pub struct CompiledProgram {
    program: Program,
    ir: IrProgram,
    reach: Reach,
    /// Register plans, indexed by stage (`None` for reduction stages).
    plans: Vec<Option<StagePlan>>,
    steps: Vec<Step>,
}

impl CompiledProgram {
    /// Lowers a checked program to the stage IR and plans its fused passes.
    pub fn new(program: &Program) -> CompiledProgram {
        let ir = ir::lower(program);
        let plans = ir
            .stages
            .iter()
            .map(|s| match s {
                Stage::Elementwise(e) => Some(StagePlan::new(e)),
                _ => None,
            })
            .collect();
        let steps = plan::steps(&ir);
        let reach = Reach::outputs(program);
        CompiledProgram { program: program.clone(), ir, reach, plans, steps }
    }

    /// The stage IR (`rewardlab compile --emit ir` prints it).
    pub fn ir(&self) -> &IrProgram {
        &self.ir
    }

    /// The checked program this was compiled from.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Overrides a `param` without recompiling (params are loads, never
    /// folded). Returns false when the program declares no such param.
    pub fn set_param(&mut self, name: &str, value: f64) -> bool {
        self.ir.set_param(name, value) && self.program.set_param(name, value)
    }

    /// Evaluates `reward`, `adv` and `advantage` for every row, in table order.
    pub fn eval(&self, table: &FeatureTable, options: &EvalOptions) -> Result<Outputs, EvalError> {
        let features = interp::prepare(&self.program, table, options, &self.reach)?;
        let run = exec::run(self, table, &features);
        self.finish(table, options, run)
    }
}

impl CompiledProgram {
    /// Evaluates several programs on one table, one result per program in
    /// order, each the same as its own [`CompiledProgram::eval`]. Programs
    /// without batch reductions (GRPO-style estimators are such) run in one
    /// fused pass over the table's blocks: each block runs every program in
    /// turn, so the feature columns they share, computed once by the caller,
    /// are read from memory once. Otherwise each program runs on its own.
    pub fn eval_many(
        programs: &[&CompiledProgram],
        table: &FeatureTable,
        options: &EvalOptions,
    ) -> Vec<Result<Outputs, EvalError>> {
        let prepared: Result<Vec<_>, EvalError> =
            programs.iter().map(|p| interp::prepare(&p.program, table, options, &p.reach)).collect();
        let runs = match prepared {
            Ok(features) => exec::run_fused(programs, table, &features),
            Err(_) => None,
        };
        let Some(runs) = runs else {
            return programs.iter().map(|p| p.eval(table, options)).collect();
        };
        programs.iter().zip(runs).map(|(p, run)| p.finish(table, options, run)).collect()
    }

    /// The outputs of a run, or the interpreter's account of its first non-finite value.
    fn finish(&self, table: &FeatureTable, options: &EvalOptions, run: exec::Run) -> Result<Outputs, EvalError> {
        let exec::Run { mut columns, non_finite } = run;
        let o = self.ir.outputs;
        // Outputs may share a column (`advantage = adv`): clone only then.
        let mut take = |c: usize, later: &[usize]| {
            if later.contains(&c) { columns[c].clone() } else { std::mem::take(&mut columns[c]) }
        };
        let reward = take(o.reward, &[o.adv, o.advantage]);
        let adv = take(o.adv, &[o.advantage]);
        let advantage = take(o.advantage, &[]);
        let outputs = Outputs { reward, adv, advantage };
        if options.non_finite == NonFinite::Error && non_finite {
            return Err(interp::explain_non_finite(&self.program, table, &outputs));
        }
        Ok(outputs)
    }
}

#[cfg(test)]
mod tests;
