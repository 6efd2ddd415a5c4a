//! Generated code: snapshots of the CUDA source for the sample reward files,
//! the CUDA source type-checked by the host C++ compiler against a shim of
//! the CUDA built-ins, and the C twin compiled and run against the
//! interpreter (sample files and random programs).

mod c_twin;
mod random;
mod schema;

use expect_test::expect_file;

use super::*;
use crate::hir::Program;
use crate::ir;

pub(super) use crate::testing::{SAMPLES, sample};

pub(super) fn compile(name: &str, text: &str) -> Program {
    let source = crate::SourceFile::new(format!("{name}.reward"), text.to_string());
    match crate::check::compile_source(&source, &crate::testing::schema(), &crate::check::CheckOptions::default()) {
        Ok((program, _warnings)) => program,
        Err(diags) => panic!("{name}.reward does not check: {diags:?}"),
    }
}

#[test]
fn cuda_kernels_of_the_gated_sample() {
    let ir = ir::lower(&compile("gated", sample("gated")));
    let code = emit_cuda(&ir, Fusion::Fused);
    expect_file!["snapshots/gated.cu"].assert_eq(&code.kernels);
    assert!(code.source.ends_with(&code.kernels), "the source is the prelude then the kernels");
    assert_eq!(code.temps, 0);
}

/// A baseline masked to the well-formed rows: its group kernels read the
/// mask beside the argument and count the selected rows.
#[test]
fn cuda_kernels_of_the_masked_sample() {
    let ir = ir::lower(&compile("masked", sample("masked")));
    let code = emit_cuda(&ir, Fusion::Fused);
    expect_file!["snapshots/masked.cu"].assert_eq(&code.kernels);
    let c = emit_c(&ir, Fusion::Fused);
    assert!(c.contains("cnt += c3[j] != 0 ? 1.0 : 0.0;"), "the C twin counts the selected rows too:\n{c}");
}

#[test]
fn unfused_kernels_of_the_gated_sample() {
    let ir = ir::lower(&compile("gated", sample("gated")));
    let code = emit_cuda(&ir, Fusion::Unfused);
    expect_file!["snapshots/gated.unfused.cu"].assert_eq(&code.kernels);
    let fused = emit_cuda(&ir, Fusion::Fused);
    assert!(code.launches.len() > fused.launches.len());
}

#[test]
fn c_twin_of_the_gated_sample() {
    let ir = ir::lower(&compile("gated", sample("gated")));
    let c = emit_c(&ir, Fusion::Fused);
    let kernels = &c[c.find("\nstatic void s0").expect("a first stage")..];
    expect_file!["snapshots/gated.c"].assert_eq(kernels);
}

/// Every kernel body appears verbatim in both the CUDA and the C source.
#[test]
fn c_and_cuda_share_the_kernel_bodies() {
    for (name, text) in SAMPLES {
        let ir = ir::lower(&compile(name, text));
        for fusion in [Fusion::Fused, Fusion::Unfused] {
            let p = plan(&ir, fusion);
            let cuda = emit_cuda(&ir, fusion).source;
            let c = emit_c(&ir, fusion);
            for body in &p.bodies {
                assert!(cuda.contains(body.as_str()) && c.contains(body.as_str()), "{name}: body not shared:\n{body}");
            }
        }
    }
}

#[test]
fn source_hash_separates_programs() {
    let a = emit_cuda(&ir::lower(&compile("grpo", sample("grpo"))), Fusion::Fused).source;
    let b = emit_cuda(&ir::lower(&compile("rloo", sample("rloo"))), Fusion::Fused).source;
    assert_eq!(source_hash(&a), source_hash(&a.clone()));
    assert_ne!(source_hash(&a), source_hash(&b));
}

/// The device source of every sample file (fused and unfused) and of random
/// programs is valid C++ once the CUDA built-ins are declared: catches
/// syntax and type errors that NVRTC would report, without a GPU.
#[test]
fn cuda_source_type_checks_with_the_host_compiler() {
    let mut sources = Vec::new();
    for (name, text) in SAMPLES {
        let ir = ir::lower(&compile(name, text));
        sources.push((name.to_string(), emit_cuda(&ir, Fusion::Fused).source));
        sources.push((format!("{name}.unfused"), emit_cuda(&ir, Fusion::Unfused).source));
    }
    for seed in 0..8 {
        let ir = ir::lower(&random::program(seed, true));
        sources.push((format!("random{seed}"), emit_cuda(&ir, Fusion::Fused).source));
    }
    // Alert conditions compile to CUDA like any program (`hir::Program::alert_program`).
    let alerts = crate::testing::backend_alerts();
    for i in 0..alerts.alerts.len() {
        let ir = ir::lower(&alerts.alert_program(i));
        sources.push((format!("alert{i}"), emit_cuda(&ir, Fusion::Fused).source));
    }
    for (name, source) in sources {
        c_twin::syntax_check_cuda(&name, &source);
    }
}
