//! `study`: run a grid of reward variants × seeds with the GRPO engine, check a
//! study file, replay variants on logged rollouts, or re-summarise results.
//!
//! A thin layer over `rewardlab_framework::study`: parsing arguments and printing.

mod run;
mod slurm;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use rewardlab_framework::study::{self, Study, StudyError};
use std::fs;

/// mimalloc instead of the system allocator: the same results, less time in `malloc`/`free`
/// (README, "Session 37").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Run GRPO studies: every variant of a study file × every seed, then summary
/// tables (mean ± 95% CI over seeds), a BM25 baseline and per-step plots under
/// `results/<study>/`.
///
/// All variants share the task order and sampling seeds at each seed index
/// (common random numbers), so differences between variants are the rewards'.
#[derive(Debug, Parser)]
#[command(name = "study", version, about, long_about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The study file.
    #[arg(default_value = "studies/codegrep.toml")]
    study: PathBuf,
    /// Runs trained at once. Default: one per core for the proxy policy (a run is
    /// single-threaded apart from tool calls), 1 for Qwen3 (each run loads its model).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Where `<study>/` goes.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Train every variant, also those proved to give the same advantages as an earlier one
    /// (by default such grid cells are merged before launch and the reason printed).
    #[arg(long)]
    no_merge: bool,
    /// Score every run's rollouts with every other variant too and write `shadow.csv`
    /// (what `[training] shadow = true` does).
    #[arg(long)]
    shadow: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a study file (TOML, every variant's reward program), prepare its tasks (mining and
    /// caching commits, opening every repository and commit, applying the leakage rule) and
    /// report them, report which variants give the same advantages (proved, equal up to ε,
    /// equal on generated groups, or different with a witness), and list its runs; exit 1 on
    /// errors.
    Check {
        /// The study file.
        #[arg(default_value = "studies/codegrep.toml")]
        study: PathBuf,
        /// Where `<study>/` goes (the task sources' caches and generated repositories live there).
        #[arg(long, default_value = "results")]
        results: PathBuf,
        /// Check the file only: do not prepare the tasks.
        #[arg(long)]
        no_tasks: bool,
    },
    /// Evaluate every variant's reward and advantage on the same logged rollouts
    /// and compare each with the first: Kendall τ-b of within-group rankings,
    /// advantage sign flips, zero-variance groups, mean |advantage|.
    Replay {
        /// The study file.
        study: PathBuf,
        /// Rollout JSONL (the contract's schema; e.g. a run's `rollouts.jsonl`).
        #[arg(long)]
        rollouts: PathBuf,
        /// Also write the table as CSV here.
        #[arg(long)]
        csv: Option<PathBuf>,
    },
    /// Write a Slurm array job for a study: one task per run (`study run-one`), a
    /// run manifest, and print the `sbatch` command. See the README's Slurm section.
    Slurm(slurm::SlurmArgs),
    /// Train one run of a study (what each Slurm array task runs): skipped when
    /// finished, resumed from its checkpoint; writes the shared manifest and baseline too.
    RunOne(slurm::RunOneArgs),
    /// Check that every run of a study finished (exit 1 and list the others with
    /// the command that resubmits them, unless `--partial`), then write
    /// `summary.csv`, `summary.md` and `plots/` as a local run does.
    Merge(slurm::MergeArgs),
    /// Re-read a study's results directory and rewrite `summary.csv`, `summary.md`, `phases.md` and `plots/`.
    Summarize {
        /// `results/<study>`.
        dir: PathBuf,
        /// Compare every variant with this one in the paired-differences table (default: the
        /// study's `[summary] reference`, else its first variant).
        #[arg(long)]
        reference: Option<String>,
    },
}

fn main() -> ExitCode {
    // SAFETY: first thing in `main`, before any thread is spawned.
    unsafe { rewardlab_models::threads::set_thread_count_env() };
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Check { study, results, no_tasks }) => check(&study, (!no_tasks).then_some(results.as_path())),
        Some(Command::Replay { study, rollouts, csv }) => replay(&study, &rollouts, csv.as_deref()),
        Some(Command::Summarize { dir, reference }) => summarize_with(&dir, reference.as_deref()).map(|()| 0),
        Some(Command::Slurm(args)) => slurm::slurm(&args),
        Some(Command::RunOne(args)) => slurm::run_one(&args),
        Some(Command::Merge(args)) => slurm::merge(&args),
        None => run::run(&cli.run.study, cli.run.jobs, &cli.run.results, !cli.run.no_merge, cli.run.shadow),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Reads and checks a study file (and the reward files it names), printing
/// its diagnostics; `None` when it is invalid.
fn load(path: &Path) -> Result<Option<Study>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    match study::parse_study(path, &text, &|reward: &Path| fs::read_to_string(reward)) {
        Ok(s) => {
            eprint!("{}", s.warnings.render());
            Ok(Some(s))
        }
        Err(StudyError::Invalid { diagnostics }) => {
            eprint!("{}", diagnostics.render());
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// `study check`; `results` is where the study's directory goes when its tasks are prepared.
fn check(path: &Path, results: Option<&Path>) -> Result<u8> {
    let Some(s) = load(path)? else { return Ok(1) };
    if let Some(results) = results {
        let prepared = study::prepare_tasks(&s, &results.join(&s.name))?;
        print!("{}", prepared.report.render());
    }
    let pairs = study::equiv::compare_variants(&s)?;
    print!("{}", study::equiv::render_pairs(&s, &pairs));
    let merged = study::equiv::merge_plan(&s, &pairs);
    for m in &merged {
        println!("  merged before launch: {} = {} ({}); `study --no-merge` trains it", m.variant, m.into, m.reason);
    }
    let runs = s.runs();
    println!("{}: {} variants × {} seeds = {} runs", s.name, s.variants.len(), s.seeds, runs.len());
    for r in &runs {
        println!("  {:<24} seed index {:>3}  seed {:>6}  {}", r.variant_name, r.seed_index, r.seed, r.dir.display());
    }
    Ok(0)
}

/// Every variant on the logged rollouts, then the variants' alerts on the
/// same log, one batch per logged step (a line without a `step` counts as
/// step 0). The log is read once, in parallel chunks, into the features both
/// need ([`study::replay_log`]).
fn replay(path: &Path, rollouts: &Path, csv: Option<&Path>) -> Result<u8> {
    let Some(s) = load(path)? else { return Ok(1) };
    let data = rollout_log(rollouts)?;
    let replayed = match study::replay_log::replay_log(&s.variants, &data) {
        Err(study::replay_log::ReplayLogError::BadRecords(errors)) => {
            for e in &errors {
                eprintln!("{}:{e}", rollouts.display());
            }
            bail!("{} bad rollout record(s) in {}", errors.len(), rollouts.display());
        }
        replayed => replayed?,
    };
    drop(data);
    let rows = replayed.rows;
    print!("{}", study::replay_markdown(&rows));
    if let Some(csv) = csv {
        study::replay::write_replay_csv(&rows, csv).with_context(|| format!("writing {}", csv.display()))?;
    }
    let found = replayed.alerts?;
    println!("\nalerts over {} logged step(s): {} fired", found.steps, found.fired.len());
    for (variant, f) in &found.fired {
        println!("  {variant} step {}: {} (`{}` held {} step(s))", f.step, f.message, f.condition, f.held);
    }
    for (variant, condition, metric) in &found.skipped {
        println!("  {variant}: `{condition}` not evaluated: `{metric}` is not in logged rollouts");
    }
    Ok(0)
}

/// The bytes of a rollout log as JSONL: a JSONL file as it is (mapped), a
/// Parquet file of rollout records one JSON line per row (so `line N` is row N).
fn rollout_log(rollouts: &Path) -> Result<LogBytes> {
    if rewardlab_rewards::parquet::is_parquet(rollouts) {
        return Ok(LogBytes::Lines(rewardlab_rewards::parquet::rollout_lines(rollouts)?));
    }
    let data = rewardlab_dsl::csv_table::MappedFile::open(rollouts)
        .with_context(|| format!("opening {}", rollouts.display()))?;
    Ok(LogBytes::Mapped(data))
}

/// What [`rollout_log`] gives.
enum LogBytes {
    Mapped(rewardlab_dsl::csv_table::MappedFile),
    Lines(Vec<u8>),
}

impl std::ops::Deref for LogBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            LogBytes::Mapped(m) => m,
            LogBytes::Lines(v) => v,
        }
    }
}

fn summarize(dir: &Path) -> Result<()> {
    summarize_with(dir, None)
}

/// Summarises `dir`, with the paired differences against `reference` when given.
fn summarize_with(dir: &Path, reference: Option<&str>) -> Result<()> {
    let mut summary = study::summarize(dir)?;
    if let Some(name) = reference
        && !summary.set_reference(name)
    {
        let names: Vec<&str> = summary.variants.iter().map(|v| v.name.as_str()).collect();
        bail!("--reference {name}: not a variant of the study (variants: {})", names.join(", "));
    }
    study::write_tables(&summary, dir)?;
    let plots = study::write_plots(&summary, dir)?;
    print!("{}", study::summary::render_markdown(&summary));
    eprintln!("wrote {} and {} plots under {}", study::summary::SUMMARY_MD, plots.len(), dir.join("plots").display());
    Ok(())
}
