//! `rewardlab compile FILE --emit ir|c|cuda`: print what a reward file
//! compiles to — the stage IR, the C twin of its kernels, or the CUDA source
//! that NVRTC compiles for `--device cuda`.

use std::path::PathBuf;

use rewardlab_dsl::codegen::{self, Fusion};
use rewardlab_dsl::ir;

use crate::common::load_with_params;

#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The reward file to compile.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// What to print: the stage IR, the C twin of the kernels, or the CUDA source.
    #[arg(long, value_enum, default_value_t = Emit::Ir)]
    emit: Emit,
    /// Emit one kernel per operator instead of one per fused stage (c and cuda only).
    #[arg(long)]
    unfused: bool,
    /// Override a `param`, e.g. `--param gamma=0.25` (repeatable); params are
    /// kernel inputs, so this changes only the IR's listing of values.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Emit {
    Ir,
    C,
    Cuda,
}

pub fn run(args: CompileArgs) -> anyhow::Result<u8> {
    let Some(loaded) = load_with_params(&args.file, &args.params)? else {
        return Ok(1);
    };
    let ir = ir::lower(&loaded.program);
    let fusion = if args.unfused { Fusion::Unfused } else { Fusion::Fused };
    let text = match args.emit {
        Emit::Ir => ir.to_string(),
        Emit::C => codegen::emit_c(&ir, fusion),
        Emit::Cuda => codegen::emit_cuda(&ir, fusion).source,
    };
    print!("{text}");
    Ok(0)
}
