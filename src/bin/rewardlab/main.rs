//! `rewardlab`: check, evaluate and compile reward files; drive the sandbox by
//! hand; mine CATM labels; write tiny model checkpoints.
//!
//! Only this binary (and `study`) parses command lines and prints for humans:
//! every subcommand is a thin layer over the library crates.

mod catm;
mod check;
mod common;
mod compile;
mod device;
mod eval;
mod gpu_check;
mod locate;
mod model;
mod sandbox;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: the same results, less time in `malloc`/`free`
/// (README, "Session 37").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Design, check and compile reward and advantage functions for agentic RL.
#[derive(Debug, Parser)]
#[command(name = "rewardlab", version, about, long_about = None, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse, type-check and lint reward files, then prove or property-test their `check`s.
    Check(check::CheckArgs),
    /// Evaluate `reward`, `adv` and `advantage` of a reward file on logged rollouts.
    Eval(eval::EvalArgs),
    /// Run the sandbox's grep, glob and read on one commit of a repository, as a policy would.
    Sandbox(sandbox::SandboxArgs),
    /// Print what a reward file compiles to: the stage IR, C, or CUDA.
    Compile(compile::CompileArgs),
    /// Mine CATM relevance labels from agent trajectories (seed 000 §2.4).
    Catm(catm::CatmArgs),
    /// Run a trained run's policy greedily over SWE-bench-style instances: predictions and Table 2 beside BM25.
    Locate(locate::LocateArgs),
    /// Model utilities: `model tiny DIR` writes a tiny Qwen3 checkpoint for smoke tests.
    Model(model::ModelArgs),
    /// Check the CUDA backend against the CPU on every shipped reward file and time it.
    #[command(hide = true)]
    GpuCheck(gpu_check::GpuCheckArgs),
}

fn main() -> ExitCode {
    // SAFETY: first thing in `main`, before any thread is spawned.
    unsafe { rewardlab_models::threads::set_thread_count_env() };
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Sandbox(args) => sandbox::run(args),
        Command::Compile(args) => compile::run(args),
        Command::Catm(args) => catm::run(args),
        Command::Locate(args) => locate::run(args),
        Command::Model(args) => model::run(args),
        Command::GpuCheck(args) => gpu_check::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
