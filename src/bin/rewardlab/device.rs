//! `--device cpu|cuda`: which backend evaluates a program.

use anyhow::Context;
use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::gpu::GpuProgram;
use rewardlab_dsl::{EvalOptions, FeatureTable, Outputs, Program};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// The fused CPU backend (f64).
    Cpu,
    /// The CUDA backend (f32 kernels compiled by NVRTC); needs a build with `--features cuda`.
    Cuda,
}

/// A compiled program on one backend.
#[derive(Debug)]
pub enum Backend {
    Cpu(Box<CompiledProgram>),
    Cuda(Box<GpuProgram>),
}

impl Backend {
    pub fn new(device: Device, program: &Program) -> anyhow::Result<Backend> {
        Ok(match device {
            Device::Cpu => Backend::Cpu(Box::new(CompiledProgram::new(program))),
            Device::Cuda => Backend::Cuda(Box::new(GpuProgram::new(program).context("--device cuda")?)),
        })
    }

    pub fn eval(&self, table: &FeatureTable, options: &EvalOptions) -> anyhow::Result<Outputs> {
        Ok(match self {
            Backend::Cpu(p) => p.eval(table, options)?,
            Backend::Cuda(p) => p.eval(table, options)?,
        })
    }
}
