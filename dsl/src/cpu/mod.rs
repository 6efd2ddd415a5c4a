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
        let mut outputs = Outputs::default();
        self.eval_into(table, options, &mut Workspace::default(), &mut outputs)?;
        Ok(outputs)
    }

    /// [`CompiledProgram::eval`] into buffers kept between calls: `outputs`'
    /// three vectors are overwritten (resized to the table's rows, their
    /// allocations reused when large enough) and the columns and group values
    /// the passes write in between live in `space`, which keeps them for the
    /// next call. The values are bit for bit those of `eval`, whatever the
    /// buffers held before and whatever table they last saw. Evaluating many
    /// tables this way (training steps, re-scoring runs) allocates nothing per
    /// call once the buffers have grown to the largest table, so no fresh
    /// pages are faulted in and unmapped per evaluation.
    ///
    /// On an error `outputs` is left unspecified (sized to the table, or as
    /// it was when the features were missing).
    pub fn eval_into(
        &self,
        table: &FeatureTable,
        options: &EvalOptions,
        space: &mut Workspace,
        outputs: &mut Outputs,
    ) -> Result<(), EvalError> {
        let features = interp::prepare(&self.program, table, options, &self.reach)?;
        // The output columns are written into the caller's own buffers: lent
        // to the workspace for the run, taken back after it.
        space.columns.resize_with(self.ir.columns.len(), Vec::new);
        let o = self.ir.outputs;
        for (c, buffer, later) in [
            (o.advantage, &mut outputs.advantage, &[][..]),
            (o.adv, &mut outputs.adv, &[o.advantage][..]),
            (o.reward, &mut outputs.reward, &[o.adv, o.advantage][..]),
        ] {
            if !later.contains(&c) && buffer.capacity() > space.columns[c].capacity() {
                space.columns[c] = std::mem::take(buffer);
            }
        }
        let non_finite = exec::run(self, table, &features, space);
        self.finish(table, options, &mut space.columns, non_finite, outputs)
    }
}

/// The buffers [`CompiledProgram::eval_into`] evaluates in, kept from call to
/// call: the full-length columns and per-group values that one pass writes and
/// a later one reads. Any program may use any workspace (it is resized to the
/// program's columns), but one per program avoids regrowing.
#[derive(Clone, Debug, Default)]
pub struct Workspace {
    /// By [`ir::ColumnId`]; the outputs' columns are lent by the caller's
    /// [`Outputs`] during a run and are empty between runs.
    columns: Vec<Vec<f64>>,
    /// By [`ir::GroupValueId`], one value per group.
    group_values: Vec<Vec<f64>>,
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
        programs
            .iter()
            .zip(runs)
            .map(|(p, mut run)| {
                let mut outputs = Outputs::default();
                p.finish(table, options, &mut run.columns, run.non_finite, &mut outputs).map(|()| outputs)
            })
            .collect()
    }

    /// Moves a run's output columns into `outputs`, or returns the
    /// interpreter's account of its first non-finite value.
    fn finish(
        &self,
        table: &FeatureTable,
        options: &EvalOptions,
        columns: &mut [Vec<f64>],
        non_finite: bool,
        outputs: &mut Outputs,
    ) -> Result<(), EvalError> {
        let o = self.ir.outputs;
        // Outputs share a column only when a rank is output twice: copied then
        // (into the buffer the output already has), moved otherwise.
        for (c, buffer, later) in [
            (o.reward, &mut outputs.reward, &[o.adv, o.advantage][..]),
            (o.adv, &mut outputs.adv, &[o.advantage][..]),
            (o.advantage, &mut outputs.advantage, &[][..]),
        ] {
            if later.contains(&c) {
                buffer.clone_from(&columns[c]);
            } else {
                *buffer = std::mem::take(&mut columns[c]);
            }
        }
        if options.non_finite == NonFinite::Error && non_finite {
            return Err(interp::explain_non_finite(&self.program, table, outputs));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
