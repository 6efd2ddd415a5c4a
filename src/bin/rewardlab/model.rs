//! `rewardlab model tiny DIR`: write a tiny random Qwen3 checkpoint (config.json,
//! model.safetensors, tokenizer.json) for smoke tests.

use std::path::PathBuf;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ModelCommand {
    /// Write a tiny random Qwen3 checkpoint with a small byte-level BPE tokenizer that keeps Qwen's special tokens.
    Tiny {
        /// Directory to write into (created if missing).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Seed of the random weights and the tokenizer's training corpus.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

pub fn run(args: ModelArgs) -> anyhow::Result<u8> {
    match args.command {
        ModelCommand::Tiny { dir, seed } => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            rewardlab_models::tiny::write_tiny_checkpoint(&dir, seed)
                .with_context(|| format!("writing a tiny checkpoint to {}", dir.display()))?;
            println!("wrote a tiny Qwen3 checkpoint to {}", dir.display());
            Ok(0)
        }
    }
}
