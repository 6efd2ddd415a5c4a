//! `rewardlab locate`: a trained run's policy as a retriever over any SWE-bench-style JSONL.
//!
//! ```text
//! rewardlab locate --run results/real/runs/v3/seed-000 --instances lite.jsonl --repos /data/mirrors \
//!     --out predictions.jsonl
//! ```
//!
//! The run's latest checkpoint gives the policy (its `policy.json`) and the engine settings the
//! episodes run under (turn limits, the evaluation sampling: greedy by default). A proxy run
//! needs nothing else; a Qwen3 run also needs its study file (`--study`) for the base model and
//! adapter shape. Prints the seeds' Table 2 beside BM25 top-k, overall and per repository.
//! `--rollouts` also writes the episodes themselves (calls, the entities they returned, answers).
//! `--reach FILE` (proxy policies) also runs every call the policy could make in its first turn
//! and tells, per instance and in a table, whether one of them names a gold file, whether the
//! episode's results named one, and whether the answer did: where the misses are lost.
//! `--ranking FILE` (proxy policies) writes, per instance, every file the answer could have named,
//! best first, with its score and the features the ranking scored it by, and prints where the gold
//! file ranked: where the ranking lost the misses the calls did not.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rewardlab_framework::bm25::TermCache;
use rewardlab_framework::engine::checkpoint::{checkpoint_config, read_policy_state};
use rewardlab_framework::engine::greedy::{Episodes, run_episodes};
use rewardlab_framework::engine::{EngineConfig, EngineTask, latest_checkpoint};
use rewardlab_framework::locate::{self, Prediction, Ranking, Reach};
use rewardlab_framework::study::{self, PolicySpec, StudyError, StudyTasks};
use rewardlab_models::agent::Policy;
use rewardlab_models::proxy::{ProxyPolicy, ProxyState};
use rewardlab_rewards::rollout::Rollout;
use rewardlab_sandbox::{Limits, Sandbox};

/// Run a trained checkpoint greedily over SWE-bench-style instances and score it beside BM25.
#[derive(Debug, clap::Args)]
pub struct LocateArgs {
    /// The run directory (`results/<study>/runs/<variant>/seed-NNN`); its latest checkpoint is used.
    #[arg(long, required_unless_present = "fresh_proxy")]
    run: Option<PathBuf>,
    /// Use an untrained proxy policy (the `--study`'s proxy settings, or the defaults; the
    /// engine's default evaluation) instead of a run: the "step 0" row of a learning curve.
    #[arg(long, conflicts_with = "run")]
    fresh_proxy: bool,
    /// SWE-bench-style JSONL (instance_id, repo, base_commit, problem_statement, patch).
    #[arg(long)]
    instances: PathBuf,
    /// Bare clones named `owner__name.git`, one per repository the instances name.
    #[arg(long)]
    repos: PathBuf,
    /// Write one prediction per instance here (JSONL: files, line ranges, turns, calls, scores).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write the policy's rollouts here (rollout JSONL: each turn's tool calls and the
    /// entities their results named, the answer, the target), to see what it did or to re-score
    /// them under another formula with `rewardlab eval`.
    #[arg(long)]
    rollouts: Option<PathBuf>,
    /// Proxy policies: also run every call the policy could make in an episode's first turn (the
    /// greps and globs of the issue's terms), write per instance whether one of them names a gold
    /// file, whether the episode's results named one and whether the answer did (JSONL), and
    /// print their counts: a miss with a reachable gold file was lost to the policy's choice of
    /// calls or its ranking, one without, to the calls it has on offer.
    #[arg(long)]
    reach: Option<PathBuf>,
    /// Proxy policies: also write per instance every file the answer could have named, best
    /// first, with its score and the file features the ranking scored it by (JSONL), and print
    /// where the gold file ranked among them: a gold file among the candidates but not first is
    /// a miss of the ranking. `scripts/ranker-ceiling.sh` fits rankers to these features.
    #[arg(long)]
    ranking: Option<PathBuf>,
    /// The study file the run belongs to: needed for Qwen3 runs (the base model), optional for proxy runs.
    #[arg(long)]
    study: Option<PathBuf>,
    /// Files the BM25 baseline returns per instance.
    #[arg(long, default_value_t = 2)]
    bm25_k: usize,
    /// Where worktrees and links go (default: a temporary directory, removed afterwards).
    #[arg(long)]
    store: Option<PathBuf>,
    /// Skip files whose blob is missing from a repository (an incomplete clone, a snapshot
    /// without its largest files): grep says how many it skipped and BM25 reads them as files
    /// without terms, as a study's `[sandbox] skip_missing_blobs = true` does. Without it, such
    /// a grep fails and so does BM25.
    #[arg(long)]
    skip_missing_blobs: bool,
}

pub fn run(args: LocateArgs) -> Result<u8> {
    let checkpoint = match &args.run {
        Some(run) => {
            let checkpoint = latest_checkpoint(run).with_context(|| {
                format!("{} holds no checkpoint (checkpoints/step-NNNNNN/engine.json)", run.display())
            })?;
            if !run.join("done").is_file() {
                eprintln!("note: {} has not finished training; using {}", run.display(), checkpoint.display());
            }
            Some(checkpoint)
        }
        None => None,
    };
    let config = match &checkpoint {
        Some(checkpoint) => checkpoint_config(checkpoint)?,
        None => EngineConfig::default(),
    };
    let (store_dir, temporary) = match &args.store {
        Some(dir) => (dir.clone(), None),
        None => {
            let dir = std::env::temp_dir().join(format!("rewardlab-locate-{}", std::process::id()));
            (dir.clone(), Some(crate::common::TempStore(dir)))
        }
    };
    let prepared = study::prepare_instances(&args.instances, &args.repos, &store_dir)?;
    let tasks = prepared.tasks.tasks().to_vec();
    let limits = Limits { skip_missing_blobs: args.skip_missing_blobs, ..Limits::default() };
    let sandbox = Sandbox::new(prepared.store.clone(), limits);
    let started = std::time::Instant::now();
    let Some(checkpoint) = checkpoint else {
        eprintln!("locating {} instance(s) with an untrained proxy policy", tasks.len());
        let settings = match policy_spec(args.study.as_deref())? {
            Some(PolicySpec::Proxy(settings)) => settings,
            Some(PolicySpec::Qwen3(_)) => bail!("--fresh-proxy takes a proxy study's settings"),
            None => Default::default(),
        };
        let located = proxy_episodes(&args, &ProxyPolicy::new(settings), &sandbox, &tasks, &config)?;
        return finish(&args, located, &tasks, prepared, started, (sandbox, temporary));
    };
    eprintln!("locating {} instance(s) with {}", tasks.len(), checkpoint.display());
    let located = match policy_spec(args.study.as_deref())? {
        None | Some(PolicySpec::Proxy(_)) => {
            let state: ProxyState = read_policy_state(&checkpoint).with_context(|| {
                format!(
                    "{} is not a proxy policy's state; pass the run's study file with --study",
                    checkpoint.display()
                )
            })?;
            // `restore` takes the state's own config.
            let mut policy = ProxyPolicy::default();
            policy.restore(state)?;
            proxy_episodes(&args, &policy, &sandbox, &tasks, &config)?
        }
        Some(PolicySpec::Qwen3(spec)) => {
            if args.reach.is_some() {
                bail!("--reach runs a proxy policy's first-turn calls; {} is a Qwen3 run", checkpoint.display());
            }
            if args.ranking.is_some() {
                bail!("--ranking shows a proxy policy's answer ranking; {} is a Qwen3 run", checkpoint.display());
            }
            let device = study::qwen3::device(&spec)?;
            let mut agent = study::qwen3::load_agent(&spec, &device, config.seed)
                .with_context(|| format!("loading the Qwen3 checkpoint {}", spec.model.display()))?;
            agent.restore(read_policy_state(&checkpoint)?)?;
            let Episodes { rollouts, .. } = run_episodes(&agent, &sandbox, &tasks, &config)?;
            Located { predictions: locate::from_rollouts(&tasks, &rollouts), rollouts, reach: None, ranking: None }
        }
    };
    finish(&args, located, &tasks, prepared, started, (sandbox, temporary))
}

/// What the policy's episodes gave, and a proxy policy's diagnostics when asked for.
struct Located {
    predictions: Vec<Prediction>,
    rollouts: Vec<Rollout>,
    reach: Option<Vec<Reach>>,
    ranking: Option<Vec<Ranking>>,
}

/// Scores BM25 beside the policy's predictions, writes them and prints the table; then drops the
/// sandbox, the store and the temporary store directory, in that order (trees before the store
/// they live in).
fn finish(
    args: &LocateArgs,
    Located { predictions: policy, rollouts, reach, ranking }: Located,
    tasks: &[EngineTask],
    prepared: StudyTasks,
    started: std::time::Instant,
    held: (Sandbox, Option<crate::common::TempStore>),
) -> Result<u8> {
    let seconds = started.elapsed().as_secs_f64();
    let repo_dir = |repo: &str| prepared.repo_dirs.get(repo).cloned().unwrap_or_else(|| repo.into());
    let cache = if args.skip_missing_blobs { TermCache::skipping_missing() } else { TermCache::default() };
    let bm25 = locate::bm25_predictions(tasks, args.bm25_k, &repo_dir, &cache)?;
    if let Some(out) = &args.out {
        write_jsonl(out, &policy)?;
    }
    if let Some(path) = &args.rollouts {
        write_jsonl(path, &rollouts)?;
    }
    let bm25_name = format!("BM25 top-{}", args.bm25_k);
    let rows = locate::table(&[("policy", &policy), (&bm25_name, &bm25)]);
    print!("{}", locate::markdown(&rows));
    if let (Some(path), Some(reach)) = (&args.reach, &reach) {
        write_jsonl(path, reach)?;
        println!();
        print!("{}", locate::reach_markdown(reach));
    }
    if let (Some(path), Some(ranking)) = (&args.ranking, &ranking) {
        write_jsonl(path, ranking)?;
        println!();
        print!("{}", locate::ranking_markdown(ranking));
    }
    eprintln!("{} episode(s) in {seconds:.1} s", tasks.len());
    let (sandbox, temporary) = held;
    drop(sandbox);
    drop(prepared);
    drop(temporary);
    Ok(0)
}

/// The policy of `--study`, when given.
fn policy_spec(study_file: Option<&Path>) -> Result<Option<PolicySpec>> {
    let Some(path) = study_file else { return Ok(None) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    match study::parse_study(path, &text, &|p: &Path| std::fs::read_to_string(p)) {
        Ok(s) => Ok(Some(s.policy)),
        Err(StudyError::Invalid { diagnostics }) => {
            eprint!("{}", diagnostics.render());
            bail!("{} does not check", path.display())
        }
        Err(e) => Err(e.into()),
    }
}

/// A proxy policy's episodes, with `--ranking`'s answer rankings and `--reach`'s first-turn calls.
fn proxy_episodes(
    args: &LocateArgs,
    policy: &ProxyPolicy,
    sandbox: &Sandbox,
    tasks: &[EngineTask],
    config: &EngineConfig,
) -> Result<Located> {
    let Episodes { rollouts, episodes } = run_episodes(policy, sandbox, tasks, config)?;
    let predictions = locate::from_rollouts(tasks, &rollouts);
    let ranking = args.ranking.as_ref().map(|_| {
        tasks
            .iter()
            .zip(&episodes)
            .map(|(task, episode)| locate::ranking(task, policy.answer_ranking(episode)))
            .collect()
    });
    let reach = reach(args, policy, sandbox, tasks, &predictions, &rollouts)?;
    Ok(Located { predictions, rollouts, reach, ranking })
}

/// With `--reach`: every instance's first-turn calls run beside its episode ([`locate::reach`]).
fn reach(
    args: &LocateArgs,
    policy: &ProxyPolicy,
    sandbox: &Sandbox,
    tasks: &[EngineTask],
    predictions: &[Prediction],
    rollouts: &[Rollout],
) -> Result<Option<Vec<Reach>>> {
    if args.reach.is_none() {
        return Ok(None);
    }
    let bar = ProgressBar::new(tasks.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("first-turn calls {bar:40} {pos}/{len} instances ({per_sec}, eta {eta})")
            .expect("the progress template is valid"),
    );
    let mut out = Vec::with_capacity(tasks.len());
    for ((task, rollout), prediction) in tasks.iter().zip(rollouts).zip(predictions) {
        let calls = policy.first_turn_calls(&task.prompt);
        out.push(
            locate::reach(sandbox, task, &calls, rollout, prediction)
                .with_context(|| format!("running the first-turn calls of {}", task.id))?,
        );
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(Some(out))
}

/// Writes one JSON line per record.
fn write_jsonl<T: serde::Serialize>(path: &Path, records: &[T]) -> Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    for p in records {
        serde_json::to_writer(&mut out, p).with_context(|| format!("serialising a record of {}", path.display()))?;
        out.write_all(b"\n").with_context(|| format!("writing {}", path.display()))?;
    }
    out.flush().with_context(|| format!("writing {}", path.display()))
}
