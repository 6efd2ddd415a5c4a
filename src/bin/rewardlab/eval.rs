//! `rewardlab eval FILE --rollouts PATH`: evaluate a reward file on logged
//! rollouts (the contract's rollout JSONL, or a features CSV).

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use rewardlab_dsl::csv_table::{
    CsvFeatures, MappedFile, RowOrder, read_features_file, write_outputs, write_table_chunk,
};
use rewardlab_dsl::{EvalOptions, FeatureTable, NonFinite, Program};
use rewardlab_rewards::features::{FeatureOptions, RowFeatures, feature_table, group_order_of, group_sizes_of};
use rewardlab_rewards::metrics::LineMatch;
use rewardlab_rewards::parquet;
use rewardlab_rewards::rollout::{Rollout, RolloutRef, load_rollouts, map_jsonl};

use crate::common::load_with_params;
use crate::device::{Backend, Device};

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// The reward file to evaluate.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Logged rollouts: a rollout JSONL (`*.jsonl`), a features CSV whose header names
    /// features exactly as the DSL writes them, with a `group` column, or a Parquet file
    /// (`*.parquet`) of either: feature columns named as in the CSV, or rollout records.
    #[arg(long, value_name = "PATH")]
    rollouts: PathBuf,
    /// Where to write the output CSV (default: standard output). It keeps the input's
    /// columns (for JSONL and Parquet: `group` and the features the file reads) and adds
    /// `reward,adv,advantage`. A path ending in `.parquet` writes Parquet, with `group`,
    /// the features read and the outputs. From a Parquet features file whose rows are
    /// grouped, a program without batch reductions is evaluated and written a few row
    /// groups at a time (into `.PATH.partial-PID`, renamed at the end).
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
    let Some(loaded) = load_with_params(&args.file, &args.params)? else {
        return Ok(1);
    };
    let options = EvalOptions {
        group_size: args.group_size,
        non_finite: if args.allow_non_finite { NonFinite::Allow } else { NonFinite::Error },
    };
    let compiled = Backend::new(args.device, &loaded.program)?;
    let path = &args.rollouts;
    let keys: Vec<&str> = loaded.program.features.iter().map(|f| f.key.as_str()).collect();
    let input = if parquet::is_parquet(path) {
        if parquet::holds_rollouts(path)? {
            // Each row becomes its record's JSON line: the same checks and
            // messages as a JSONL file, `line N` being row N.
            jsonl_input(&args, &loaded.program, &parquet::rollout_lines(path)?)?
        } else {
            if let Some(out) = &args.out
                && !loaded.program.reads_batch()
                && stream_parquet(&compiled, &options, path, &keys, out)?
            {
                return Ok(0);
            }
            Some(parquet::read_features(path, Some(&keys))?)
        }
    } else if is_jsonl(path)? {
        let data = MappedFile::open(path).with_context(|| format!("reading {}", path.display()))?;
        jsonl_input(&args, &loaded.program, &data)?
    } else {
        Some(read_features_file(path, Some(&keys))?)
    };
    let Some(input) = input else {
        return Ok(1);
    };
    release_freed_memory();
    let outputs = compiled.eval(&input.table, &options)?;
    match &args.out {
        Some(out) if is_parquet_out(out) => parquet::write_outputs(out, &input, &outputs)?,
        out => write_outputs(open_out(out)?, &input, &outputs)?,
    }
    Ok(0)
}

/// Evaluates a Parquet features file a chunk of whole groups at a time
/// ([`parquet::stream_features`]), in memory for a few row groups instead of
/// the whole table, for a program without batch reductions (each group's
/// outputs are then its own rows' alone, so the values are those of the whole
/// table). Chunks are written to a file beside `out` that becomes `out` once
/// all are written. Returns false, leaving nothing behind, when the file must
/// be read whole instead: `out` is not a regular file (standard output, a
/// pipe, a link), the partial file cannot be created, the rows are not
/// grouped, or reading or evaluating a chunk failed, which the whole-file path
/// then reports exactly as it always has.
fn stream_parquet(
    compiled: &Backend,
    options: &EvalOptions,
    path: &Path,
    keys: &[&str],
    out: &Path,
) -> anyhow::Result<bool> {
    let regular = std::fs::symlink_metadata(out).map_or(true, |m| m.file_type().is_file());
    let Some(name) = out.file_name().filter(|_| regular) else {
        return Ok(false);
    };
    let partial = out.with_file_name(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id()));
    let as_parquet = is_parquet_out(out);
    let written = write_streamed(compiled, options, path, keys, (&partial, as_parquet));
    if !matches!(written, Ok(true)) {
        let _ = std::fs::remove_file(&partial);
        return written;
    }
    std::fs::rename(&partial, out).with_context(|| format!("moving {} to {}", partial.display(), out.display()))?;
    Ok(true)
}

/// Whether `--out` names a Parquet file (by its extension).
fn is_parquet_out(out: &Path) -> bool {
    out.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// Why [`write_streamed`] stopped early: to read the file whole, or an error
/// of the output.
enum Stop {
    Whole,
    Fail(anyhow::Error),
}

impl From<parquet::ParquetError> for Stop {
    fn from(_: parquet::ParquetError) -> Stop {
        Stop::Whole
    }
}

/// The chunks' rows and outputs, written to `to` as CSV, or as Parquet with
/// `as_parquet`; false when the file must be read whole.
fn write_streamed(
    compiled: &Backend,
    options: &EvalOptions,
    path: &Path,
    keys: &[&str],
    (to, as_parquet): (&Path, bool),
) -> anyhow::Result<bool> {
    enum Sink {
        Csv(std::io::BufWriter<File>),
        Parquet(Box<parquet::OutputWriter>),
    }
    let mut sink: Option<Sink> = None;
    let streamed = parquet::stream_features(path, keys, |chunk| {
        let outputs = compiled.eval(&chunk.table, options).map_err(|_| Stop::Whole)?;
        let fail = |e: anyhow::Error| Stop::Fail(e.context(format!("writing {}", to.display())));
        let header = sink.is_none();
        if header {
            // A partial file that cannot be made (a directory that takes no new file, where
            // `PATH` itself may still be written) leaves the work to the whole-file path.
            sink = Some(if as_parquet {
                Sink::Parquet(Box::new(parquet::OutputWriter::create(to, &chunk).map_err(|_| Stop::Whole)?))
            } else {
                Sink::Csv(std::io::BufWriter::new(File::create(to).map_err(|_| Stop::Whole)?))
            });
        }
        match sink.as_mut().expect("made above") {
            Sink::Csv(w) => write_table_chunk(w, &chunk, &outputs, header).map_err(|e| fail(e.into())),
            Sink::Parquet(w) => w.write(&chunk, &outputs).map_err(|e| fail(e.into())),
        }
    });
    match streamed {
        Ok(parquet::Streamed::Done) => {
            match sink {
                Some(Sink::Csv(mut w)) => w.flush()?,
                Some(Sink::Parquet(w)) => w.finish()?,
                None => return Ok(false),
            }
            Ok(true)
        }
        Ok(parquet::Streamed::NotGrouped) | Err(Stop::Whole) => Ok(false),
        Err(Stop::Fail(e)) => Err(e),
    }
}

/// Hands the allocator's free pages back to the system. Reading leaves the parsers' freed
/// buffers (Parquet's decoded pages, CSV chunks) in glibc's free lists, where the outputs, large
/// enough to be mapped on their own, never reuse them: without this the process's peak is the
/// reading phase's leftovers plus the evaluation, rather than the larger of the two.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's arenas to the system; it
    // touches no live allocation and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
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

/// The features of rollout records given as JSONL text (`data`), computed
/// line by line; `None` when bad records stop evaluation (reported here).
fn jsonl_input(args: &EvalArgs, program: &Program, data: &[u8]) -> anyhow::Result<Option<CsvFeatures>> {
    let path = &args.rollouts;
    let options = FeatureOptions {
        line_match: match args.line_match {
            LineRule::Coverage => LineMatch::Coverage,
            LineRule::Jaccard => LineMatch::Jaccard,
        },
        source: path.display().to_string(),
        ..FeatureOptions::default()
    };
    // Each line is parsed and its features computed at once, in parallel
    // chunks, keeping only the group and the values: the records themselves
    // would take many times the file's size.
    let row_features = RowFeatures::new(&program.features).ok();
    let keep = row_features.as_ref().map(RowFeatures::keep);
    let loaded = map_jsonl(data, "rollouts", |line| {
        // Read in place (no string copied per file or entity, nor for the
        // group unless it has escapes, and only what the features read
        // built) when it can be; a line it declines is read as a record,
        // with that reader's error.
        if let (Some(f), Some(keep)) = (row_features.as_ref(), keep)
            && let Some((r, _)) = RolloutRef::parse_keeping(line, keep)
        {
            let values = f.values_of(&r, &options);
            return Ok((r.into_group(), values));
        }
        let r = Rollout::from_json_line_without_args(line)?;
        let values = row_features.as_ref().and_then(|f| f.values(&r, &options));
        Ok((Cow::Owned(r.group), values))
    })?;
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
    let rows = &loaded.records;
    if rows.is_empty() {
        bail!("{} holds no rollouts", path.display());
    }
    let (Some(row_features), true) = (row_features, rows.iter().all(|(_, (_, v))| v.is_some())) else {
        // Some feature is unavailable or out of range: `feature_table` names
        // the first rollout in its order (on the good records, as before).
        let rollouts: Vec<Rollout> = load_rollouts(data)?.records.into_iter().map(|(_, r)| r).collect();
        let grouped = feature_table(&program.features, &rollouts, &options)?;
        return Ok(Some(CsvFeatures::from_table(grouped.table, RowOrder::new(grouped.order))));
    };
    let features = row_features.features();
    let order = group_order_of(rows.iter().map(|(_, (g, _))| g.as_ref()));
    let sizes = group_sizes_of(order.iter().map(|&i| rows[i].1.0.as_ref()));
    let mut table = FeatureTable::new(sizes)?;
    for (k, f) in features.iter().enumerate() {
        let column = order.iter().map(|&i| rows[i].1.1.as_ref().expect("checked above")[k]).collect();
        table.add_column(f.key.clone(), column)?;
    }
    Ok(Some(CsvFeatures::from_table(table, RowOrder::new(order))))
}

#[cfg(test)]
mod tests {
    use rewardlab_dsl::Outputs;

    use super::*;

    /// Groups `a` (2 rows) and `b` (3 rows) as a Parquet features file whose
    /// rows come in the order `order` gives (grouped for the identity).
    fn features_file(path: &Path, order: Vec<usize>) {
        let mut table = FeatureTable::new([("a".to_string(), 2), ("b".to_string(), 3)]).expect("a table");
        table.add_column("Fb(file)", vec![0.5, 1.0, 0.0, 0.25, 1.0]).expect("a column");
        table.add_column("c", vec![1.0, 4.0, 0.0, 2.0, 8.0]).expect("a column");
        let features = CsvFeatures::from_table(table, RowOrder::new(order));
        let outputs = Outputs { reward: vec![0.0; 5], adv: vec![0.0; 5], advantage: vec![0.0; 5] };
        parquet::write_outputs(path, &features, &outputs).expect("written");
    }

    #[test]
    fn grouped_parquet_streams_and_ungrouped_parquet_is_left_to_the_whole_file_path() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let reward = Path::new(env!("CARGO_MANIFEST_DIR")).join("rewards/codegrep_v3.reward");
        let program = load_with_params(&reward, &[]).expect("loads").expect("checks").program;
        assert!(!program.reads_batch());
        let backend = Backend::new(Device::Cpu, &program).expect("compiles");
        let options = EvalOptions::default();
        let keys = ["Fb(file)", "c"];
        let (input, streamed) = (dir.path().join("in.parquet"), dir.path().join("streamed.csv"));

        features_file(&input, vec![0, 1, 2, 3, 4]);
        let wrote = write_streamed(&backend, &options, &input, &keys, (&streamed, false)).expect("no error");
        assert!(wrote, "grouped rows stream");
        let whole = parquet::read_features(&input, Some(&keys)).expect("read");
        let mut want = Vec::new();
        write_outputs(&mut want, &whole, &backend.eval(&whole.table, &options).expect("evaluates")).expect("written");
        assert_eq!(std::fs::read(&streamed).expect("read"), want);

        // Rows a, b, a, b, b: `a` comes back.
        features_file(&input, vec![0, 2, 1, 3, 4]);
        let wrote = write_streamed(&backend, &options, &input, &keys, (&streamed, false)).expect("no error");
        assert!(!wrote, "a group that comes back is read whole");
    }
}
