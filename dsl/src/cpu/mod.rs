//! The fused CPU backend: a program compiled to [stages](crate::ir) and run
//! as native code generated per program, or by a block interpreter,
//! checked against the [interpreter](crate::interp).
//!
//! # Design
//!
//! [`CompiledProgram::new`] lowers the program to the stage IR (definitions
//! inlined, common subexpressions shared, constants folded). Two executors
//! run the stages; both give the interpreter's values bit for bit.
//!
//! **Native kernels** (`native`, for one-pass programs: elementwise stages
//! and group reductions, masked or not — every GRPO-style estimator and
//! every shipped reward file). The program becomes one C function that runs
//! all its stages over a range of whole groups, shaped like a hand-written
//! loop: the reward stage is one fused loop over the rows, each row's values
//! in registers from the feature loads to the stores; then, group by group,
//! the reductions and the advantage rows, with the group-constant
//! subexpressions (`group.std(r) + 1e-4`) computed once per group and the
//! param-only ones (`1 - w`) once per call, outside every loop. The system C
//! compiler builds it (`-O3`, no fast math, no FMA contraction, the CPU's
//! x86-64 level so the row loops vectorise 4 doubles wide) into a shared
//! library, cached on disk under a hash of the source, the compiler's
//! `--version` and the flags, and loaded with `libloading` after checking
//! its ABI. [`NativeMode::Auto`] (the default) builds it on the first table
//! of [`NATIVE_MIN_ROWS`] rows, so small tables (a training step's batch,
//! alerts, tests) never wait for the compiler; the build takes about 0.2 s
//! once (the `native_build` bench), then is a cache hit for every later
//! process.
//!
//! Why generated C rather than a faster interpreter or a JIT: profiling the
//! block interpreter on the shipped formulas (1M rows, groups of 8) put its
//! time in the interpretive structure itself — every op a loop through an L1
//! buffer, each stage's stores a copy, a dispatch per group — at 0.2-0.3× a
//! hand-written loop, and only fusing a whole group's pass removes that. The
//! crate already emits (and tests) a C twin of its CUDA kernels, and `cc`
//! is present wherever the crate builds; a JIT (cranelift) would be a large
//! new dependency emitting scalar code unless vectorised by hand.
//!
//! **The block interpreter** (`plan`, `exec`, `kernels`) runs everything
//! else, and every program when there is no native kernel: turned off
//! ([`NativeMode::Off`] or `REWARDLAB_NATIVE=off`), a program with a batch
//! stage or a rank, no C compiler, a failed build. [`CompiledProgram::backend`]
//! says which runs and why. It plans each elementwise stage's registers
//! (linear-scan allocation onto chunk-sized buffers; feature and column
//! loads are read in place, constants and params get a buffer filled once)
//! and cuts the stage list into passes at batch stages (`plan`). A pass walks
//! the table in blocks of whole groups (about `exec::BLOCK` rows); within a
//! block each stage runs in turn: an elementwise stage loops over chunks of
//! `exec::CHUNK` rows, each op a tight `r3[i] = r1[i] * r2[i]` loop over
//! register buffers that stay in L1 (`kernels`), and stores the columns
//! later stages or the caller need; a group reduction reduces each group of
//! the block while its argument is still in cache. A batch reduction needs
//! its whole argument column, so it runs between passes.
//!
//! Both executors run the table's blocks of whole groups in parallel with
//! rayon; a native call writes only its block's rows and groups.
//!
//! # Determinism
//!
//! Results are bit-identical whatever the thread count and the executor
//! (NaNs aside, below):
//! each row's ops are the interpreter's scalar functions (in C, the same
//! IEEE operations and the same libm calls) in the same order, group
//! reductions run left to right within a group (in `ops::sum`'s chunks past
//! `ops::SUM_CHUNK` rows), and batch reductions use the fixed-chunk sum of
//! [`ops::sum`](crate::interp::ops::sum). Since the interpreter uses the
//! same scalar functions and summation, compiled results also equal the
//! interpreter's bit for bit in practice (the differential tests allow 1e-6;
//! the native tests require the block interpreter's bits exactly). One
//! exception: a NaN result of a native kernel may carry another sign bit
//! (the C compiler may rewrite `a - (-b)` as `a + b`, the same value for
//! every number; IEEE 754 leaves a NaN's sign unspecified). A NaN is still
//! a NaN: it is reported as the same error, and prints the same.
//!
//! # Errors
//!
//! The same as the interpreter, by construction: the same up-front checks
//! (missing feature, group size; see `interp::prepare`). The output values
//! are checked for NaN and infinities while they are still in cache (the
//! block executor as each is stored, a native kernel once per tile of groups;
//! a native kernel checks an output column that an unmasked group `sum`,
//! `mean` or `std` reads through that one value per group, so its flag may
//! be raised with every row finite, and the outputs are then scanned before
//! anything is reported); when one is found, the interpreter is
//! re-run on the table to name the definition that went non-finite first,
//! with the rollout's details. That costs an interpreter run, but only on
//! failure.

mod alerts;
mod exec;
mod kernels;
mod native;
mod plan;

pub use alerts::CompiledAlerts;
pub use native::NativeError;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::Program;
use crate::interp::{self, Reach};
use crate::ir::{self, IrProgram, Stage};
use crate::table::{FeatureTable, Outputs};
use plan::{StagePlan, Step};

/// Tables at least this long make [`NativeMode::Auto`] compile native code
/// (once per program; smaller tables run on the block interpreter, which
/// costs nothing to prepare).
pub const NATIVE_MIN_ROWS: usize = 1 << 14;

/// When a program gets a native kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum NativeMode {
    /// On the first evaluation of a table of [`NATIVE_MIN_ROWS`] rows or
    /// more; evaluations before it run on the block interpreter.
    #[default]
    Auto,
    /// In [`CompiledProgram::with_options`], so every evaluation runs
    /// native code when the program has it.
    Always,
    /// Never: every evaluation runs on the block interpreter.
    Off,
}

/// How [`CompiledProgram::with_options`] compiles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// When to build a native kernel (`REWARDLAB_NATIVE=off` turns it off
    /// whatever this says).
    pub native: NativeMode,
    /// The C compiler; `None` is `REWARDLAB_CC`, else `cc`.
    pub compiler: Option<PathBuf>,
    /// Where compiled kernels are cached; `None` is `REWARDLAB_CACHE_DIR`,
    /// else `$XDG_CACHE_HOME/rewardlab/native`, else
    /// `~/.cache/rewardlab/native`, else the system's temporary directory.
    pub cache_dir: Option<PathBuf>,
}

/// What evaluates a program's large tables ([`CompiledProgram::backend`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Backend<'a> {
    /// Its native kernel, loaded from this shared library.
    Native(&'a Path),
    /// The block interpreter, for this reason.
    Blocks(&'a NativeError),
    /// Not decided yet: [`NativeMode::Auto`] before the first large table.
    Pending,
}

/// A program ready to evaluate many tables.
#[derive(Clone, Debug)]
pub struct CompiledProgram {
    program: Program,
    ir: IrProgram,
    reach: Reach,
    /// Register plans, indexed by stage (`None` for reduction stages).
    plans: Vec<Option<StagePlan>>,
    steps: Vec<Step>,
    options: CompileOptions,
    /// The native kernel, or why there is none; built at most once.
    native: OnceLock<Result<Arc<native::Kernel>, NativeError>>,
}

impl CompiledProgram {
    /// Lowers a checked program to the stage IR and plans its fused passes,
    /// with the default [`CompileOptions`] (native code on the first large
    /// table).
    pub fn new(program: &Program) -> CompiledProgram {
        CompiledProgram::with_options(program, &CompileOptions::default())
    }

    /// [`CompiledProgram::new`] with explicit options.
    pub fn with_options(program: &Program, options: &CompileOptions) -> CompiledProgram {
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
        let compiled = CompiledProgram {
            program: program.clone(),
            ir,
            reach,
            plans,
            steps,
            options: options.clone(),
            native: OnceLock::new(),
        };
        let off = options.native == NativeMode::Off
            || std::env::var("REWARDLAB_NATIVE").is_ok_and(|v| ["off", "0", "false", "no"].contains(&v.as_str()));
        if off {
            let _ = compiled.native.set(Err(NativeError::Off));
        } else if let Some(what) = native::unsupported(&compiled.ir) {
            let _ = compiled.native.set(Err(NativeError::Unsupported(what)));
        } else if options.native == NativeMode::Always {
            compiled.native.get_or_init(|| compiled.build_native());
        }
        compiled
    }

    /// What runs this program's large tables, and if not native code, why.
    pub fn backend(&self) -> Backend<'_> {
        match self.native.get() {
            Some(Ok(kernel)) => Backend::Native(kernel.path()),
            Some(Err(e)) => Backend::Blocks(e),
            None => Backend::Pending,
        }
    }

    fn build_native(&self) -> Result<Arc<native::Kernel>, NativeError> {
        let cc = self.options.compiler.clone().unwrap_or_else(native::default_compiler);
        let cache = self.options.cache_dir.clone().unwrap_or_else(native::default_cache_dir);
        native::Kernel::new(&self.ir, &cc, &cache).map(Arc::new)
    }

    /// The native kernel that evaluates a table of `rows` rows, if any
    /// (built here the first time the options ask for it).
    fn kernel(&self, rows: usize) -> Option<&native::Kernel> {
        let now = match self.options.native {
            NativeMode::Off => false,
            NativeMode::Always => true,
            NativeMode::Auto => rows >= NATIVE_MIN_ROWS,
        };
        let slot = if now { Some(self.native.get_or_init(|| self.build_native())) } else { self.native.get() };
        slot?.as_ref().ok().map(|k| &**k)
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
        let non_finite = match self.kernel(table.rows()) {
            Some(kernel) => native::run(kernel, &self.ir, table, &features, space),
            None => exec::run(self, table, &features, space),
        };
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
        // Native kernels are faster one by one than the interpreted fused pass.
        if programs.iter().all(|p| p.kernel(table.rows()).is_some()) {
            return programs.iter().map(|p| p.eval(table, options)).collect();
        }
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
        // A native kernel's flag may be raised with every output finite (see
        // `native::emit::summed_by`), so the outputs have the last word.
        if options.non_finite == NonFinite::Error && non_finite && !interp::failing_rows(outputs).is_empty() {
            return Err(interp::explain_non_finite(&self.program, table, outputs));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
