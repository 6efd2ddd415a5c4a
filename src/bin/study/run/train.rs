//! Training a study's runs with the GRPO engine: the task source, policy and
//! reward variants are built once and shared; runs are pulled from a shared
//! queue by at most `--jobs` worker threads, each engine with its own tokio
//! runtime. Finished runs are skipped and checkpointed runs resume, so an
//! interrupted `study` can simply be started again.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rewardlab_framework::engine::{
    Engine, EngineError, METRICS_FILE, RewardVariant, StepReport, TaskSet, TaskSource, latest_checkpoint,
};
use rewardlab_framework::study::{PolicySpec, RunSpec, Study, TaskSpec, bm25_baseline, summary};
use rewardlab_framework::synthetic;
use rewardlab_models::proxy::{ProxyConfig, ProxyPolicy};
use rewardlab_sandbox::{Limits, RepoStore, Sandbox};

/// Auxiliary files weighing at least this much count as targets (seed 000's threshold).
const AUX_MIN_WEIGHT: f64 = 0.15;

/// Trains every run (see `super::run_study`).
pub fn train(study: &Study, runs: &[RunSpec], jobs: usize, study_dir: &Path) -> Result<()> {
    let proxy = match &study.policy {
        PolicySpec::Proxy(config) => *config,
        PolicySpec::Qwen3(_) => bail!("the Qwen3 policy is not wired to the engine yet; use `kind = \"proxy\"`"),
    };
    let tasks: Arc<dyn TaskSource> = Arc::new(task_set(study, study_dir)?);
    let baseline = bm25_baseline(tasks.as_ref(), study.summary.bm25_k).context("BM25 baseline")?;
    summary::write_baselines(study_dir, &[baseline])?;

    let group_size = study.training.group_size;
    let variants = study
        .variants
        .iter()
        .map(|v| {
            RewardVariant::compile(&v.name, &v.source, group_size, &v.params)
                .map(Arc::new)
                .map_err(|e| anyhow!("variant `{}` ({}): {e}", v.name, v.origin))
        })
        .collect::<Result<Vec<_>>>()?;
    let store_dir = study_dir.join("store");
    let store = Arc::new(RepoStore::open(&store_dir).with_context(|| format!("opening {}", store_dir.display()))?);

    let multi = MultiProgress::new();
    let overall = multi.add(ProgressBar::new(runs.len() as u64));
    overall.set_style(
        ProgressStyle::with_template("{prefix:>24} {bar:30} {pos}/{len} runs [{elapsed_precise}]")
            .expect("static template"),
    );
    overall.set_prefix(study.name.clone());
    overall.enable_steady_tick(Duration::from_millis(500));

    let ctx = Ctx { study, tasks, variants, store, multi, overall, study_dir, proxy };
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(runs.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(run) = runs.get(i) else { break };
                    if let Err(e) = ctx.train_one(run) {
                        let msg = format!("{}: {e:#}", run.dir.display());
                        ctx.multi.suspend(|| eprintln!("run failed: {msg}"));
                        failures.lock().expect("no worker panics while holding the lock").push(msg);
                    }
                    ctx.overall.inc(1);
                }
            });
        }
    });
    ctx.overall.finish();
    let failures = failures.into_inner().expect("workers are joined");
    if !failures.is_empty() {
        bail!("{} of {} runs failed:\n  {}", failures.len(), runs.len(), failures.join("\n  "));
    }
    Ok(())
}

/// What every worker shares.
struct Ctx<'a> {
    study: &'a Study,
    tasks: Arc<dyn TaskSource>,
    variants: Vec<Arc<RewardVariant>>,
    store: Arc<RepoStore>,
    multi: MultiProgress,
    overall: ProgressBar,
    study_dir: &'a Path,
    proxy: ProxyConfig,
}

impl Ctx<'_> {
    fn train_one(&self, run: &RunSpec) -> Result<()> {
        let config = self.study.engine_config(run);
        let total = config.total_steps;
        let dir = self.study_dir.join(&run.dir);
        if metrics_complete(&dir.join(METRICS_FILE), total) {
            return Ok(());
        }
        let variant = self.variants[run.variant].clone();
        let sandbox = Sandbox::new(self.store.clone(), Limits::default());
        let policy = ProxyPolicy::new(self.proxy);
        let engine = match latest_checkpoint(&dir) {
            Some(ckpt) => Engine::resume(&ckpt, policy, self.tasks.clone(), sandbox, variant),
            None => Engine::new(config, policy, self.tasks.clone(), sandbox, variant),
        };
        let mut engine = match engine {
            Err(EngineError::Finished { .. }) => return Ok(()),
            other => other.with_context(|| format!("starting run {}", run.dir.display()))?,
        };

        let bar = self.multi.insert_before(&self.overall, ProgressBar::new(total as u64));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>24} {bar:30} {pos}/{len} steps {msg}").expect("static template"),
        );
        bar.set_prefix(format!("{}/seed-{:03}", run.variant_name, run.seed_index));
        bar.set_position(engine.steps_done() as u64);
        let mut eval = None;
        let result = engine.run(&dir, |r: &StepReport<'_>| {
            eval = r.metrics.eval_fb_mean.or(eval);
            let eval = eval.map_or_else(|| "-".to_string(), |f| format!("{f:.3}"));
            bar.set_message(format!("reward {:.3}  held-out Fβ {eval}", r.metrics.reward_mean));
            bar.set_position(r.step as u64);
        });
        bar.finish_and_clear();
        self.multi.remove(&bar);
        match result {
            Ok(_) | Err(EngineError::Finished { .. }) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("training {}", run.dir.display())),
        }
    }
}

/// Whether `metrics.csv` already holds the run's last step.
fn metrics_complete(path: &Path, total_steps: usize) -> bool {
    path.exists() && summary::read_metrics(path).is_ok_and(|rows| rows.last().is_some_and(|r| r.step >= total_steps))
}

/// The study's tasks. A synthetic repository is regenerated each time (it is
/// deterministic in its seed and takes well under a second), into a fresh
/// directory that then replaces `data/repo.git`, so a half-written one from a
/// killed run is never reused.
fn task_set(study: &Study, study_dir: &Path) -> Result<TaskSet> {
    let config = match &study.tasks {
        TaskSpec::Synthetic { .. } => study.tasks.synthetic_config().expect("a synthetic source has a config"),
        TaskSpec::Swebench { .. } => bail!("SWE-bench task sources are not wired to the study runner yet"),
        TaskSpec::Commits { .. } => bail!("commit-mined task sources are not wired to the study runner yet"),
    };
    let data = study_dir.join("data");
    let repo = data.join("repo.git");
    let fresh = data.join(format!("repo.git.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&fresh);
    fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    let mut source =
        synthetic::generate(&config, &fresh).with_context(|| format!("generating tasks into {}", fresh.display()))?;
    if repo.exists() {
        fs::remove_dir_all(&repo).with_context(|| format!("removing {}", repo.display()))?;
    }
    fs::rename(&fresh, &repo).with_context(|| format!("renaming {} to {}", fresh.display(), repo.display()))?;
    // Absolute, so the sandbox finds the repository whatever the working directory.
    source.repo_path = repo.canonicalize().with_context(|| format!("resolving {}", repo.display()))?;
    TaskSet::from_synthetic(&source, AUX_MIN_WEIGHT).context("building the task set")
}
