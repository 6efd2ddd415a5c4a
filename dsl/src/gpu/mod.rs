//! The CUDA backend: a program's [generated kernels](crate::codegen) compiled
//! at run time by NVRTC and run on the GPU, behind the `cuda` feature.
//!
//! # Design
//!
//! [`GpuProgram::new`] lowers the program to the stage IR, emits its CUDA
//! source ([`codegen::emit_cuda`]: one kernel per fused elementwise stage, a
//! warp-per-group segmented reduction per group stage, a fixed-grid two-kernel
//! reduction per batch stage), probes for the driver and NVRTC libraries
//! (`is_culib_present`, so a machine without them gets
//! [`GpuError::NoDriver`] / [`GpuError::NoNvrtc`], never a panic; with the
//! `cuda-linked` feature the binary links them, so it cannot start without
//! them and there is no probe), queries the
//! device's compute capability and compiles with
//! `--gpu-architecture=sm_XY`. Compiled modules are cached process-wide by
//! the source's hash and the architecture, so a study that builds the same
//! program many times compiles it once.
//!
//! [`GpuProgram::eval`] checks the table exactly as the CPU backend does
//! (missing features, group sizes), converts the features it reads to `f32`
//! and uploads each once, with the group offsets, a group id per row and
//! the params; then runs the launches in order on one stream and downloads
//! `reward`, `adv` and `advantage`, widened back to `f64`. Everything on the
//! device is structure-of-arrays (see [`codegen`] for the kernel parameters).
//!
//! # Agreement with the CPU backend
//!
//! The device computes in `f32` (reductions accumulate in `f64`), the CPU in
//! `f64`, so results are compared with [`close`]: `|gpu - cpu| <= 1e-5 ·
//! max(|cpu|, 1)` — relative above magnitude 1, absolute below it, because a
//! relative bound is meaningless for values that should be 0 (an `adv` of a
//! group whose rewards are all equal) — and NaN equals NaN. NaN semantics are
//! the CPU's operator by operator. When an output is non-finite and
//! [`NonFinite::Error`] is asked for, the interpreter names the definition
//! that went non-finite first, exactly as the CPU backend reports it.
//!
//! Without the `cuda` feature the module is swapped for a stub whose
//! constructor returns [`GpuError::NotCompiled`]; callers never need a `cfg`.

#[cfg(feature = "cuda")]
#[path = "cuda.rs"]
mod imp;
#[cfg(not(feature = "cuda"))]
#[path = "disabled.rs"]
mod imp;

use crate::codegen::{self, CudaProgram, Fusion};
use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::Program;
use crate::interp::{self, Reach};
use crate::ir::{self, IrProgram};
use crate::table::{FeatureTable, Outputs};

/// The agreement bound with the CPU backend (see [`close`]).
pub const TOLERANCE: f64 = 1e-5;

/// Why the GPU backend could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// The crate was built without the `cuda` feature.
    #[error("this build has no CUDA support; rebuild with `--features cuda` (or use `--device cpu`)")]
    NotCompiled,
    /// libcuda could not be loaded.
    #[error(
        "no CUDA driver: libcuda could not be loaded, so this machine has no usable NVIDIA GPU or driver (use `--device cpu`)"
    )]
    NoDriver,
    /// libnvrtc could not be loaded.
    #[error("NVRTC (libnvrtc of the CUDA 13 toolkit) could not be loaded; install it or use `--device cpu`")]
    NoNvrtc,
    #[error("CUDA driver error while {during}: {message}")]
    /// A CUDA driver call failed.
    Driver {
        /// What the backend was doing (e.g. a copy or a launch).
        during: String,
        /// The driver's error text.
        message: String,
    },
    #[error("NVRTC could not compile the reward kernels for {arch}: {log}")]
    /// NVRTC rejected the generated source.
    Compile {
        /// The target architecture, e.g. `sm_90`.
        arch: String,
        /// NVRTC's compile log.
        log: String,
    },
    /// An evaluation error (missing feature, non-finite value, group size).
    #[error(transparent)]
    Eval(#[from] EvalError),
}

/// A program compiled for the GPU.
#[derive(Debug)]
pub struct GpuProgram {
    program: Program,
    ir: IrProgram,
    reach: Reach,
    fused: CudaProgram,
    backend: imp::Backend,
}

/// What [`GpuProgram::bench`] measured, times per evaluation (inputs
/// already on the device).
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// The GPU's name as the driver reports it.
    pub device: String,
    /// Rows (rollouts) in the benchmarked table.
    pub rows: usize,
    /// Milliseconds per evaluation with fused kernels.
    pub fused_ms: f64,
    /// Device launches per evaluation with fused kernels.
    pub fused_launches: usize,
    /// Milliseconds per evaluation with one kernel per stage.
    pub unfused_ms: f64,
    /// Device launches per evaluation with one kernel per stage.
    pub unfused_launches: usize,
    /// A device-to-device copy of [`BenchReport::bytes`] (half read, half written).
    pub copy_ms: f64,
    /// The least traffic an evaluation needs: every feature it reads once and
    /// every output column written once, 4 bytes a value.
    pub bytes: u64,
}

impl BenchReport {
    /// Achieved bandwidth of the fused kernels, GB/s.
    pub fn fused_gbps(&self) -> f64 {
        gbps(self.bytes, self.fused_ms)
    }

    /// Achieved bandwidth of the unfused kernels, GB/s.
    pub fn unfused_gbps(&self) -> f64 {
        gbps(self.bytes, self.unfused_ms)
    }

    /// Bandwidth of the reference device-to-device copy, GB/s.
    pub fn copy_gbps(&self) -> f64 {
        gbps(self.bytes, self.copy_ms)
    }
}

fn gbps(bytes: u64, ms: f64) -> f64 {
    if ms > 0.0 { bytes as f64 / (ms * 1e-3) / 1e9 } else { f64::NAN }
}

impl GpuProgram {
    /// Compiles the program's kernels for the first GPU.
    pub fn new(program: &Program) -> Result<GpuProgram, GpuError> {
        let ir = ir::lower(program);
        let fused = codegen::emit_cuda(&ir, Fusion::Fused);
        let backend = imp::Backend::new(&fused)?;
        Ok(GpuProgram { program: program.clone(), reach: Reach::outputs(program), ir, fused, backend })
    }

    /// The device's name and architecture, e.g. `NVIDIA H200 (sm_90)`.
    pub fn device(&self) -> String {
        self.backend.device()
    }

    /// The generated CUDA source.
    pub fn source(&self) -> &CudaProgram {
        &self.fused
    }

    /// Overrides a `param` without recompiling (params are kernel inputs).
    pub fn set_param(&mut self, name: &str, value: f64) -> bool {
        self.ir.set_param(name, value) && self.program.set_param(name, value)
    }

    /// Evaluates `reward`, `adv` and `advantage` for every row, in table order.
    pub fn eval(&self, table: &FeatureTable, options: &EvalOptions) -> Result<Outputs, GpuError> {
        let inputs = HostInputs::new(&self.program, &self.ir, table, options, &self.reach)?;
        let outputs = self.backend.run(&self.ir, &self.fused, &inputs)?;
        if options.non_finite == NonFinite::Error && !interp::failing_rows(&outputs).is_empty() {
            return Err(interp::explain_non_finite(&self.program, table, &outputs).into());
        }
        Ok(outputs)
    }

    /// Evaluates with one kernel per operator (the unfused baseline), for
    /// comparison; non-finite values are let through.
    pub fn eval_unfused(&self, table: &FeatureTable, options: &EvalOptions) -> Result<Outputs, GpuError> {
        let inputs = HostInputs::new(&self.program, &self.ir, table, options, &self.reach)?;
        let unfused = codegen::emit_cuda(&self.ir, Fusion::Unfused);
        self.backend.run(&self.ir, &unfused, &inputs)
    }

    /// Times fused and unfused evaluation (`reps` runs each after a warm-up)
    /// and a device-to-device copy of the same bytes.
    pub fn bench(&self, table: &FeatureTable, reps: usize) -> Result<BenchReport, GpuError> {
        let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
        let inputs = HostInputs::new(&self.program, &self.ir, table, &options, &self.reach)?;
        let unfused = codegen::emit_cuda(&self.ir, Fusion::Unfused);
        self.backend.bench(&self.ir, &self.fused, &unfused, &inputs, reps.max(1))
    }
}

/// `got` agrees with the CPU's `want`: equal (infinities included), both
/// NaN, or both finite and within [`TOLERANCE`] relative to `max(|want|, 1)`.
pub fn close(got: f64, want: f64) -> bool {
    if got == want || (got.is_nan() && want.is_nan()) {
        return true;
    }
    // An infinity agrees only with itself (the bound below would be infinite).
    got.is_finite() && want.is_finite() && (got - want).abs() <= TOLERANCE * want.abs().max(1.0)
}

/// Where two evaluations disagree beyond [`close`].
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Which output disagrees (`reward`, `adv` or `advantage`).
    pub output: &'static str,
    /// 0-based table row of the disagreement.
    pub row: usize,
    /// The value under test.
    pub got: f64,
    /// The reference value.
    pub want: f64,
}

/// The first row where `got` and `want` disagree, output by output.
pub fn first_mismatch(got: &Outputs, want: &Outputs) -> Option<Mismatch> {
    let pairs = [
        ("reward", &got.reward, &want.reward),
        ("adv", &got.adv, &want.adv),
        ("advantage", &got.advantage, &want.advantage),
    ];
    for (output, g, w) in pairs {
        if g.len() != w.len() {
            return Some(Mismatch { output, row: g.len().min(w.len()), got: f64::NAN, want: f64::NAN });
        }
        if let Some(row) = (0..g.len()).find(|&i| !close(g[i], w[i])) {
            return Some(Mismatch { output, row, got: g[row], want: w[row] });
        }
    }
    None
}

/// Everything uploaded for one evaluation, prepared on the host.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HostInputs {
    pub rows: usize,
    pub groups: usize,
    /// Indexed by feature id; `None` for features no output reaches.
    pub features: Vec<Option<Vec<f32>>>,
    pub offsets: Vec<u64>,
    pub gid: Vec<u32>,
    pub params: Vec<f32>,
}

impl HostInputs {
    pub(crate) fn new(
        program: &Program,
        ir: &IrProgram,
        table: &FeatureTable,
        options: &EvalOptions,
        reach: &Reach,
    ) -> Result<HostInputs, EvalError> {
        let features = interp::prepare(program, table, options, reach)?;
        let features = features.iter().map(|f| f.map(|col| col.iter().map(|&x| x as f32).collect())).collect();
        let offsets: Vec<u64> = table.group_offsets().iter().map(|&o| o as u64).collect();
        let mut gid = Vec::with_capacity(table.rows());
        for g in 0..table.groups() {
            let id = u32::try_from(g).expect("fewer than 2^32 groups");
            gid.extend(std::iter::repeat_n(id, table.group_rows(g).len()));
        }
        let params = ir.params.iter().map(|(_, v)| *v as f32).collect();
        Ok(HostInputs { rows: table.rows(), groups: table.groups(), features, offsets, gid, params })
    }

    /// Values an evaluation must at least read and write (see [`BenchReport::bytes`]).
    // Only the CUDA runtime's bench reads it; the host-side tests check it.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn min_bytes(&self, ir: &IrProgram) -> u64 {
        let features = self.features.iter().filter(|f| f.is_some()).count();
        let o = ir.outputs;
        let mut outputs = vec![o.reward, o.adv, o.advantage];
        outputs.sort_unstable();
        outputs.dedup();
        (4 * self.rows * (features + outputs.len())) as u64
    }
}

#[cfg(test)]
mod tests;
