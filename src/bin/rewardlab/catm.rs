//! `rewardlab catm`: mine CATM relevance labels from agent trajectories.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rewardlab_rewards::catm::http::{HttpJudge, HttpJudgeConfig};
use rewardlab_rewards::catm::judge::{HeuristicJudge, Judge, judge_all};
use rewardlab_rewards::catm::mine::Trajectory;
use rewardlab_rewards::catm::{CatmOptions, finish, prepare};
use rewardlab_rewards::rollout::{Loaded, RecordError, load_jsonl};
use rewardlab_rewards::tasks::swebench::load_instances;

/// Mine file-relevance labels from OpenHands-style trajectories (CATM).
///
/// Stage 1 collects every `str_replace_editor view` of a source file and the
/// length of the reasoning after it; stage 2 asks a judge (conservatively:
/// anything not clearly NOT_RELEVANT is RELEVANT); stage 3 weighs files by
/// reasoning length and keeps those with weight >= --min-weight. Each output
/// line holds an instance's patch files, its judged files with weights, and
/// the label set `files` = patch files + kept files.
#[derive(Debug, clap::Args)]
pub struct CatmArgs {
    /// Trajectory JSONL: {"instance_id", "messages": [OpenAI-style chat messages with tool_calls]}.
    #[arg(long, value_name = "PATH")]
    trajectories: PathBuf,
    /// SWE-bench-style instance JSONL (instance_id, repo, base_commit, problem_statement, patch).
    #[arg(long, value_name = "PATH")]
    instances: PathBuf,
    /// Where to write the labels (JSONL, one instance a line).
    #[arg(long, value_name = "PATH")]
    out: PathBuf,
    /// The judge: `heuristic` (offline, deterministic) or `http` (OpenAI-compatible, needs --judge-url).
    #[arg(long, default_value = "heuristic", value_parser = ["heuristic", "http"])]
    judge: String,
    /// Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (http only; use a local proxy for https).
    #[arg(long, value_name = "URL")]
    judge_url: Option<String>,
    /// Model name sent to the judge server.
    #[arg(long, default_value = "judge")]
    judge_model: String,
    /// Environment variable holding the judge's API key, if it needs one.
    #[arg(long, value_name = "VAR")]
    judge_key_env: Option<String>,
    /// Judge requests in flight at once.
    #[arg(long, default_value_t = 16)]
    parallel: usize,
    /// Retries per judge request (connection errors, 429, 5xx).
    #[arg(long, default_value_t = 3)]
    retries: usize,
    /// Seconds before a judge request times out.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Reasoning tokens a file needs to be judged at all.
    #[arg(long, default_value_t = 30)]
    min_tokens: usize,
    /// Weight a mined file needs to join the label set.
    #[arg(long, default_value_t = 0.15)]
    min_weight: f64,
    /// Skip bad input lines (reported) instead of stopping.
    #[arg(long)]
    skip_bad: bool,
}

pub fn run(args: CatmArgs) -> anyhow::Result<u8> {
    let trajectories = read_jsonl(&args.trajectories, "trajectories", args.skip_bad, |text| {
        serde_json::from_str::<Trajectory>(text).map_err(|e| e.to_string())
    })?;
    let Some(trajectories) = trajectories else {
        return Ok(1);
    };
    let file = File::open(&args.instances).with_context(|| format!("opening {}", args.instances.display()))?;
    let instances = load_instances(BufReader::new(file))?;
    let Some(instances) = records_or_report(instances, &args.instances.display().to_string(), args.skip_bad) else {
        return Ok(1);
    };

    let judge: Box<dyn Judge> = match args.judge.as_str() {
        "http" => {
            let Some(url) = &args.judge_url else {
                bail!("--judge http needs --judge-url");
            };
            let api_key = match &args.judge_key_env {
                Some(var) => Some(std::env::var(var).with_context(|| format!("reading the judge key from ${var}"))?),
                None => None,
            };
            let config = HttpJudgeConfig {
                api_key,
                timeout: Duration::from_secs(args.timeout),
                retries: args.retries,
                ..HttpJudgeConfig::new(url, &args.judge_model)
            };
            Box::new(HttpJudge::new(config)?)
        }
        _ => Box::new(HeuristicJudge),
    };

    let options = CatmOptions { min_tokens: args.min_tokens, min_weight: args.min_weight, ..CatmOptions::default() };
    let prepared = prepare(&trajectories, &instances, &options)?;
    let bar = ProgressBar::new(prepared.requests.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("judging {bar:40} {pos}/{len} files ({per_sec}, eta {eta})")
            .expect("the progress template is valid"),
    );
    let verdicts = judge_all(judge.as_ref(), &prepared.requests, args.parallel, &|| bar.inc(1));
    bar.finish_and_clear();
    let (labels, summary) = finish(prepared, verdicts, &options);

    let out = File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut out = BufWriter::new(out);
    for label in &labels {
        serde_json::to_writer(&mut out, label)?;
        out.write_all(b"\n")?;
    }
    out.flush().with_context(|| format!("writing {}", args.out.display()))?;
    eprint!("{}", summary.render());
    eprintln!("wrote {} labels to {}", labels.len(), args.out.display());
    Ok(0)
}

/// Reads a JSONL file; prints bad lines. `None` when there were errors and `--skip-bad` is off.
fn read_jsonl<T>(
    path: &PathBuf,
    what: &str,
    skip_bad: bool,
    parse: impl FnMut(&str) -> Result<T, String>,
) -> anyhow::Result<Option<Vec<T>>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let loaded = load_jsonl(BufReader::new(file), what, parse)?;
    Ok(records_or_report(loaded, &path.display().to_string(), skip_bad))
}

fn records_or_report<T>(loaded: Loaded<T>, name: &str, skip_bad: bool) -> Option<Vec<T>> {
    report(name, &loaded.errors);
    if !loaded.errors.is_empty() && !skip_bad {
        eprintln!("{name}: {} bad line(s); nothing mined (pass --skip-bad to skip them)", loaded.errors.len());
        return None;
    }
    Some(loaded.records.into_iter().map(|(_, r)| r).collect())
}

fn report(name: &str, errors: &[RecordError]) {
    for e in errors.iter().take(20) {
        eprintln!("{name}: {e}");
    }
    if errors.len() > 20 {
        eprintln!("{name}: ... and {} more bad lines", errors.len() - 20);
    }
}
