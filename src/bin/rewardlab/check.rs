//! `rewardlab check FILE...`: parse, type-check, lint, and prove or
//! property-test every `check` statement.

use std::path::PathBuf;

use rewardlab_dsl::check::{CheckOptions, CheckOutcome, VerifyOptions, verify};
use rewardlab_dsl::diag::render;

use crate::common::{apply_params, load_reward_file, with_newline};

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Reward files (`*.reward`) to check.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Generated groups per property-tested `check`.
    #[arg(long, default_value_t = VerifyOptions::default().cases)]
    cases: usize,
    /// Seed of the property-test generator (the same seed finds the same counterexamples).
    #[arg(long, default_value_t = VerifyOptions::default().seed)]
    seed: u64,
    /// Override a `param` before checking, e.g. `--param gamma=0.25` (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Print only diagnostics, not the per-file summary.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(args: CheckArgs) -> anyhow::Result<u8> {
    let schema = rewardlab_rewards::feature_schema();
    let options = CheckOptions::default();
    let verify_options = VerifyOptions { cases: args.cases, seed: args.seed, ..VerifyOptions::default() };
    let mut failed_files = 0;
    for path in &args.files {
        let Some(mut loaded) = load_reward_file(path, &schema, &options)? else {
            failed_files += 1;
            continue;
        };
        apply_params(&mut loaded.program, &args.params)?;
        let outcomes = verify(&loaded.program, &schema, &verify_options)?;
        let (mut proved, mut passed, mut failed) = (0, 0, 0);
        for outcome in &outcomes {
            match outcome {
                CheckOutcome::Proved => proved += 1,
                CheckOutcome::Passed { .. } => passed += 1,
                CheckOutcome::Failed { diagnostic } => {
                    failed += 1;
                    eprint!("{}", with_newline(render(&loaded.source, diagnostic)));
                }
                _ => {}
            }
        }
        if failed > 0 {
            failed_files += 1;
        }
        if !args.quiet {
            let warnings = loaded.warnings.len();
            let status = if failed > 0 { "FAILED" } else { "ok" };
            println!(
                "{}: {status}: {} check{}: {proved} proved by intervals, {passed} passed on {} generated groups, {failed} failed; {warnings} warning{}",
                path.display(),
                outcomes.len(),
                plural(outcomes.len()),
                args.cases,
                plural(warnings),
            );
        }
    }
    Ok(if failed_files > 0 { 1 } else { 0 })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
