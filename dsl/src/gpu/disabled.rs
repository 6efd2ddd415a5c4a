//! The GPU backend of a build without the `cuda` feature: it cannot be
//! constructed, and says how to get one that can.

use super::{BenchReport, GpuError, HostInputs};
use crate::codegen::CudaProgram;
use crate::ir::IrProgram;
use crate::table::Outputs;

/// Uninhabited: no value exists, so the methods below are never called.
#[derive(Debug)]
pub(crate) enum Backend {}

impl Backend {
    pub(crate) fn new(_code: &CudaProgram) -> Result<Backend, GpuError> {
        Err(GpuError::NotCompiled)
    }

    pub(crate) fn device(&self) -> String {
        match *self {}
    }

    pub(crate) fn run(&self, _ir: &IrProgram, _code: &CudaProgram, _inputs: &HostInputs) -> Result<Outputs, GpuError> {
        match *self {}
    }

    pub(crate) fn bench(
        &self,
        _ir: &IrProgram,
        _fused: &CudaProgram,
        _unfused: &CudaProgram,
        _inputs: &HostInputs,
        _reps: usize,
    ) -> Result<BenchReport, GpuError> {
        match *self {}
    }
}
