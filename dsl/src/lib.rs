//! The reward language: a small, checked language for reward and advantage formulas.
//!
//! Pipeline: [`parser::parse`] turns text into an [`ast::File`] and diagnostics
//! (it recovers after errors); [`check::check`] resolves names against a
//! caller-supplied [`schema::FeatureSchema`], type-checks, orders definitions,
//! runs interval analysis and the lints, and lowers to a [`hir::Program`];
//! [`cpu::CompiledProgram`] evaluates a program over a [`table::FeatureTable`]
//! with fused passes, checked against the tree-walking [`interp`] oracle.
//! [`codegen`] emits the same stages as CUDA kernels (and their C twin), and
//! [`gpu::GpuProgram`] runs them through NVRTC behind the `cuda` feature.
//!
//! This crate is a leaf: it knows nothing about retrieval, GRPO or models.

#![warn(missing_docs)]

pub mod ast;
pub mod check;
pub mod codegen;
pub mod cpu;
pub mod csv_table;
pub mod diag;
pub mod equiv;
pub mod eval;
pub mod gpu;
pub mod hir;
pub mod interp;
pub mod interval;
pub mod ir;
pub mod parser;
pub mod printer;
mod render;
pub mod schema;
pub mod span;
pub mod table;
#[cfg(test)]
mod testing;

pub use diag::{Diagnostic, Severity};
pub use eval::{EvalError, EvalOptions, NonFinite};
pub use hir::Program;
pub use interval::Interval;
pub use schema::{FeatureDecl, FeatureRef, FeatureSchema, IdleCase, LintCase, LintText, MetricDecl, Role, Type};
pub use span::{SourceFile, Span};
pub use table::{FeatureTable, Outputs};
