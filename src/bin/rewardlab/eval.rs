//! `rewardlab eval FILE --rollouts PATH`: evaluate a reward file on logged
//! rollouts (the contract's rollout JSONL, or a features CSV).

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use rewardlab_dsl::check::CheckOptions;
use rewardlab_dsl::csv_table::{CsvFeatures, read_features_file, write_outputs};
use rewardlab_dsl::{EvalOptions, NonFinite, Program};
use rewardlab_rewards::features::{FeatureOptions, feature_table};
use rewardlab_rewards::metrics::LineMatch;
use rewardlab_rewards::rollout::load_rollouts;

use crate::common::{apply_params, load_reward_file};
use crate::device::{Backend, Device};

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// The reward file to evaluate.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Logged rollouts: a rollout JSONL (`*.jsonl`) or a features CSV whose header names
    /// features exactly as the DSL writes them, with a `group` column.
    #[arg(long, value_name = "PATH")]
    rollouts: PathBuf,
    /// Where to write the output CSV (default: standard output). It keeps the input's
    /// columns (for JSONL: `group` and the features the file reads) and adds `reward,adv,advantage`.
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// Evaluate the good records of a rollout JSONL even when some lines are bad (they are still reported).
    #[arg(long)]
    skip_bad: bool,
    /// Require every group to have exactly this many rollouts.
    #[arg(long, value_name = "G")]
    group_size: Option<usize>,
    /// Let NaN and infinities through instead of failing on the first one.
    #[arg(long)]
    allow_non_finite: bool,
    /// Line-range matching rule of the `lr` level: the contract's coverage ≥ 50%, or Jaccard ≥ 50% (seed 001).
    #[arg(long, value_enum, default_value_t = LineRule::Coverage)]
    line_match: LineRule,
    /// Override a `param`, e.g. `--param gamma=0.25` (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Evaluate on the CPU or on the GPU (`cuda` needs a build with `--features cuda`).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LineRule {
    Coverage,
    Jaccard,
}

pub fn run(args: EvalArgs) -> anyhow::Result<u8> {
    let schema = rewardlab_rewards::feature_schema();
    let Some(mut loaded) = load_reward_file(&args.file, &schema, &CheckOptions::default())? else {
        return Ok(1);
    };
    apply_params(&mut loaded.program, &args.params)?;
    let options = EvalOptions {
        group_size: args.group_size,
        non_finite: if args.allow_non_finite { NonFinite::Allow } else { NonFinite::Error },
    };
    let compiled = Backend::new(args.device, &loaded.program)?;
    if is_jsonl(&args.rollouts)? {
        let Some(input) = jsonl_input(&args, &loaded.program)? else {
            return Ok(1);
        };
        let outputs = compiled.eval(&input.table, &options)?;
        write_outputs(open_out(&args.out)?, &input, &outputs)?;
    } else {
        let keys: Vec<&str> = loaded.program.features.iter().map(|f| f.key.as_str()).collect();
        let features = read_features_file(&args.rollouts, Some(&keys))?;
        let outputs = compiled.eval(&features.table, &options)?;
        write_outputs(open_out(&args.out)?, &features, &outputs)?;
    }
    Ok(0)
}

fn open_out(out: &Option<PathBuf>) -> anyhow::Result<Box<dyn Write>> {
    Ok(match out {
        Some(path) => Box::new(File::create(path).with_context(|| format!("creating {}", path.display()))?),
        None => Box::new(std::io::stdout().lock()),
    })
}

fn is_jsonl(path: &Path) -> anyhow::Result<bool> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl") | Some("json") => Ok(true),
        Some("csv") => Ok(false),
        _ => {
            // Sniff: a JSONL file's first non-blank byte opens an object.
            let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Ok(text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{'))
        }
    }
}

fn jsonl_input(args: &EvalArgs, program: &Program) -> anyhow::Result<Option<CsvFeatures>> {
    let path = &args.rollouts;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let loaded = load_rollouts(BufReader::new(file))?;
    for err in &loaded.errors {
        eprintln!("{}:{err}", path.display());
    }
    if !loaded.errors.is_empty() && !args.skip_bad {
        eprintln!(
            "error: {} bad record{} in {}; nothing was evaluated (pass --skip-bad to evaluate the {} good ones)",
            loaded.errors.len(),
            if loaded.errors.len() == 1 { "" } else { "s" },
            path.display(),
            loaded.records.len()
        );
        return Ok(None);
    }
    let rollouts: Vec<_> = loaded.records.into_iter().map(|(_, r)| r).collect();
    if rollouts.is_empty() {
        bail!("{} holds no rollouts", path.display());
    }
    let options = FeatureOptions {
        line_match: match args.line_match {
            LineRule::Coverage => LineMatch::Coverage,
            LineRule::Jaccard => LineMatch::Jaccard,
        },
        source: path.display().to_string(),
        ..FeatureOptions::default()
    };
    let grouped = feature_table(&program.features, &rollouts, &options)?;
    let mut header = vec!["group".to_string()];
    header.extend(program.features.iter().map(|f| f.key.clone()));
    let mut rows: Vec<Vec<String>> = vec![Vec::new(); rollouts.len()];
    for (row, &input) in grouped.order.iter().enumerate() {
        let mut fields = vec![rollouts[input].group.clone()];
        for f in &program.features {
            let column = grouped.table.column(&f.key).expect("feature_table computes every requested column");
            fields.push(column[row].to_string());
        }
        rows[input] = fields;
    }
    Ok(Some(CsvFeatures::from_rows(grouped.table, grouped.order, header, rows)))
}
