//! The generated CUDA and C source of the shipped reward files, as
//! snapshots (`snapshots/*.cu`, `snapshots/*.c`): a change to code generation
//! shows up here as a diff of what the GPU would run for the formulas the
//! studies train with.

use expect_test::expect_file;
use rewardlab_dsl::codegen::{Fusion, emit_c, emit_cuda, source_hash};
use rewardlab_dsl::hir::Program;
use rewardlab_dsl::{SourceFile, ir};

use super::reward_files::{SHIPPED, shipped};

fn compile(name: &str, text: &str) -> Program {
    let source = SourceFile::new(format!("{name}.reward"), text.to_string());
    match rewardlab_dsl::check::compile_source(
        &source,
        &rewardlab_rewards::feature_schema(),
        &rewardlab_dsl::check::CheckOptions::default(),
    ) {
        Ok((program, _warnings)) => program,
        Err(diags) => panic!("{name}.reward does not check: {diags:?}"),
    }
}

#[test]
fn cuda_kernels_of_the_shipped_reward_files() {
    for (name, text) in SHIPPED {
        let ir = ir::lower(&compile(name, text));
        let code = emit_cuda(&ir, Fusion::Fused);
        expect_file![format!("snapshots/{name}.cu")].assert_eq(&code.kernels);
        assert!(code.source.ends_with(&code.kernels), "the source is the prelude then the kernels");
        assert_eq!(code.temps, 0);
    }
}

#[test]
fn unfused_kernels_of_codegrep_v3() {
    let ir = ir::lower(&compile("codegrep_v3", shipped("codegrep_v3")));
    let code = emit_cuda(&ir, Fusion::Unfused);
    expect_file!["snapshots/codegrep_v3.unfused.cu"].assert_eq(&code.kernels);
    let fused = emit_cuda(&ir, Fusion::Fused);
    assert!(code.launches.len() > fused.launches.len());
}

#[test]
fn c_twin_of_codegrep_v3() {
    let ir = ir::lower(&compile("codegrep_v3", shipped("codegrep_v3")));
    let c = emit_c(&ir, Fusion::Fused);
    let kernels = &c[c.find("\nstatic void s0").expect("a first stage")..];
    expect_file!["snapshots/codegrep_v3.c"].assert_eq(kernels);
}

#[test]
fn source_hash_separates_programs() {
    let a = emit_cuda(&ir::lower(&compile("grpo", shipped("grpo"))), Fusion::Fused).source;
    let b = emit_cuda(&ir::lower(&compile("rloo", shipped("rloo"))), Fusion::Fused).source;
    assert_eq!(source_hash(&a), source_hash(&a.clone()));
    assert_ne!(source_hash(&a), source_hash(&b));
}
