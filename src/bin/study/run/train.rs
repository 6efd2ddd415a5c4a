//! Training a study's runs with the GRPO engine, whatever the policy: the task
//! source and reward variants are built once and shared; runs are pulled from
//! a shared queue by at most `--jobs` worker threads, each engine with its own
//! tokio runtime and its own policy from `make_policy`. Finished runs are
//! skipped and checkpointed runs resume, so an interrupted `study` can simply
//! be started again; a run that fails is reported and the others go on.
//!
//! A run is finished when its `metrics.csv` holds the last step *and* its
//! [`DONE_FILE`] marker exists. The marker is written after the policy's
//! `after_run` hook (e.g. saving an adapter), so a kill between the last step
//! and the hook re-enters the run from its last checkpoint and runs the hook.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rewardlab_framework::engine::{
    Engine, EngineError, METRICS_FILE, RewardVariant, StepReport, TaskSource, latest_checkpoint,
};
use rewardlab_framework::study::{PolicySpec, RunSpec, Study, bm25_baseline_with, summary};
use rewardlab_models::agent::Policy;
use rewardlab_models::proxy::ProxyPolicy;
use rewardlab_sandbox::{Limits, Sandbox};

use super::tasks;

/// Written into a run's directory once it is complete (after `after_run`).
pub const DONE_FILE: &str = "done";

/// Trains every run (see `super::run_study`) with the study's policy.
pub fn train(study: &Study, runs: &[RunSpec], jobs: usize, study_dir: &Path) -> Result<()> {
    match &study.policy {
        PolicySpec::Proxy(config) => {
            let config = *config;
            train_with(study, runs, jobs, study_dir, |_, _| Ok(ProxyPolicy::new(config)), |_, _, _| Ok(()))
        }
        PolicySpec::Qwen3(spec) => super::qwen3::train(study, spec, runs, jobs, study_dir),
    }
}

/// What `make_policy` may use besides the run: the study's tasks and a
/// sandbox over its repositories (a warm start trains on them), and whether
/// the run resumes from a checkpoint (which then overwrites the policy's state,
/// so preparing it would be wasted).
pub struct PolicyContext<'a> {
    pub tasks: &'a dyn TaskSource,
    pub sandbox: &'a Sandbox,
    pub resuming: bool,
}

/// Trains every run of `runs` (at most `jobs` at once) with policies from
/// `make_policy` (called once per run that trains; a resumed run's policy is
/// then restored from its checkpoint), and calls `after_run` with the finished
/// engine and the run's directory when a run completes. Writes the BM25
/// baseline of the study's held-out tasks first.
///
/// Errors of single runs are collected and reported together at the end,
/// after every other run had its turn.
pub fn train_with<P: Policy>(
    study: &Study,
    runs: &[RunSpec],
    jobs: usize,
    study_dir: &Path,
    make_policy: impl Fn(&RunSpec, &PolicyContext<'_>) -> Result<P> + Sync,
    after_run: impl Fn(&RunSpec, &Engine<P>, &Path) -> Result<()> + Sync,
) -> Result<()> {
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let prepared = tasks::prepare(study, study_dir)?;
    let (store, repo_dirs) = (prepared.store, prepared.repo_dirs);
    let tasks: Arc<dyn TaskSource> = Arc::new(prepared.tasks);
    let repo_dir = |repo: &str| repo_dirs.get(repo).cloned().unwrap_or_else(|| repo.into());
    let baseline = bm25_baseline_with(tasks.as_ref(), study.summary.bm25_k, &repo_dir).context("BM25 baseline")?;
    // Atomically: concurrent runners of the study (Slurm array tasks) all write it.
    crate::publish::write_baseline(study_dir, &[baseline])?;

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

    let multi = MultiProgress::new();
    let overall = multi.add(ProgressBar::new(runs.len() as u64));
    overall.set_style(
        ProgressStyle::with_template("{prefix:>24} {bar:30} {pos}/{len} runs [{elapsed_precise}]")
            .expect("static template"),
    );
    overall.set_prefix(study.name.clone());
    overall.enable_steady_tick(Duration::from_millis(500));

    let ctx = Ctx {
        study,
        tasks,
        variants,
        store,
        multi,
        overall,
        study_dir,
        make_policy: &make_policy,
        after_run: &after_run,
    };
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(runs.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(run) = runs.get(i) else { break };
                    // A run's failure (a policy error such as a Qwen3 tensor failure
                    // is an `EngineError::Policy`) fails that run; the others go on.
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

/// Whether the run in `run_dir` is finished: complete metrics and the marker.
pub fn run_finished(run_dir: &Path, total_steps: usize) -> bool {
    run_dir.join(DONE_FILE).is_file() && metrics_complete(&run_dir.join(METRICS_FILE), total_steps)
}

/// Whether `metrics.csv` already holds the run's last step.
pub fn metrics_complete(path: &Path, total_steps: usize) -> bool {
    path.exists() && summary::read_metrics(path).is_ok_and(|rows| rows.last().is_some_and(|r| r.step >= total_steps))
}

/// What every worker shares.
struct Ctx<'a, M, A> {
    study: &'a Study,
    tasks: Arc<dyn TaskSource>,
    variants: Vec<Arc<RewardVariant>>,
    store: Arc<rewardlab_sandbox::RepoStore>,
    multi: MultiProgress,
    overall: ProgressBar,
    study_dir: &'a Path,
    make_policy: &'a M,
    after_run: &'a A,
}

impl<P, M, A> Ctx<'_, M, A>
where
    P: Policy,
    M: Fn(&RunSpec, &PolicyContext<'_>) -> Result<P> + Sync,
    A: Fn(&RunSpec, &Engine<P>, &Path) -> Result<()> + Sync,
{
    fn train_one(&self, run: &RunSpec) -> Result<()> {
        let config = self.study.engine_config(run);
        let total = config.total_steps;
        let dir = self.study_dir.join(&run.dir);
        if run_finished(&dir, total) {
            return Ok(());
        }
        let variant = self.variants[run.variant].clone();
        let sandbox = Sandbox::new(self.store.clone(), Limits::default());
        let checkpoint = latest_checkpoint(&dir);
        let context = PolicyContext { tasks: self.tasks.as_ref(), sandbox: &sandbox, resuming: checkpoint.is_some() };
        let policy =
            (self.make_policy)(run, &context).with_context(|| format!("making the policy of {}", run.dir.display()))?;
        let engine = match checkpoint {
            Some(ckpt) => Engine::resume(&ckpt, policy, self.tasks.clone(), sandbox, variant),
            None => Engine::new(config, policy, self.tasks.clone(), sandbox, variant),
        };
        let mut engine = engine.with_context(|| format!("starting run {}", run.dir.display()))?;

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
            Ok(_) | Err(EngineError::Finished { .. }) => {}
            Err(e) => return Err(e).with_context(|| format!("training {}", run.dir.display())),
        }
        (self.after_run)(run, &engine, &dir).with_context(|| format!("finishing {}", run.dir.display()))?;
        let done = dir.join(DONE_FILE);
        fs::write(&done, format!("{}\n", engine.steps_done())).with_context(|| format!("writing {}", done.display()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use rewardlab_framework::engine::MetricsRow;
    use rewardlab_framework::engine::metrics::metrics_header;
    use rewardlab_framework::study::parse_study;

    use super::*;

    /// A two-variant proxy study of `steps` steps on a small synthetic source.
    fn study(dir: &Path, steps: usize) -> Study {
        let text = format!(
            "seeds = 1\n[tasks]\nsource = \"synthetic\"\nseed = 1\nfiles = 40\ncommits = 2\ntasks = 12\n\
             [policy]\nkind = \"proxy\"\n[training]\ntotal_steps = {steps}\nprompts_per_step = 2\ngroup_size = 2\n\
             eval_every = 0\n[[variants]]\nname = \"fb\"\nreward = 'Fb(file)'\n\
             [[variants]]\nname = \"recall\"\nreward = 'R(file)'\n"
        );
        parse_study(&dir.join("t.toml"), &text).expect("a valid study")
    }

    fn write_metrics(path: &Path, steps: &[usize]) {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_path(path).expect("create");
        w.write_record(metrics_header()).expect("header");
        for &step in steps {
            w.serialize(MetricsRow { step, ..MetricsRow::default() }).expect("row");
        }
        w.flush().expect("flush");
    }

    #[test]
    fn metrics_complete_needs_the_last_step_and_finished_needs_the_marker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let metrics = dir.path().join(METRICS_FILE);
        assert!(!metrics_complete(&metrics, 3), "no file");
        write_metrics(&metrics, &[]);
        assert!(!metrics_complete(&metrics, 3), "header only");
        write_metrics(&metrics, &[1, 2]);
        assert!(!metrics_complete(&metrics, 3));
        write_metrics(&metrics, &[1, 2, 3]);
        assert!(metrics_complete(&metrics, 3));
        fs::write(&metrics, "not,a\nmetrics file\n").expect("write");
        assert!(!metrics_complete(&metrics, 3), "unreadable");
        write_metrics(&metrics, &[1, 2, 3]);
        assert!(!run_finished(dir.path(), 3), "no marker");
        fs::write(dir.path().join(DONE_FILE), "3\n").expect("write");
        assert!(run_finished(dir.path(), 3));
        assert!(!run_finished(dir.path(), 4), "a longer run is not finished by a shorter one's rows");
    }

    #[test]
    fn the_synthetic_repository_is_regenerated_over_a_broken_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = study(dir.path(), 1);
        let first = tasks::prepare(&s, dir.path()).expect("tasks").tasks;
        // What a run killed while writing the repository might leave.
        let repo = dir.path().join("data/repo.git");
        fs::remove_dir_all(&repo).expect("remove");
        fs::create_dir_all(repo.join("objects")).expect("mkdir");
        fs::write(repo.join("HEAD"), "garbage").expect("write");
        let again = tasks::prepare(&s, dir.path()).expect("tasks over a broken repository");
        assert_eq!(again.tasks, first);
        assert_eq!(again.tasks.tasks.len(), 12);
        // Every task's commit resolves in the regenerated repository.
        for t in &again.tasks.tasks {
            again.store.repo(&t.repo).and_then(|r| r.resolve(&t.commit)).expect("resolves");
        }
    }

    #[test]
    fn finished_runs_are_skipped_and_a_failed_hook_is_retried_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = study(dir.path(), 2);
        let runs = s.runs();
        let calls = AtomicUsize::new(0);
        let policy = |_: &RunSpec, _: &PolicyContext<'_>| Ok(ProxyPolicy::default());
        // The `fb` run's hook fails once; the `recall` run is not held up by it.
        let fail_fb = AtomicUsize::new(1);
        let hook = |run: &RunSpec, engine: &Engine<ProxyPolicy>, out: &Path| {
            assert_eq!(engine.steps_done(), 2);
            assert!(out.join(METRICS_FILE).is_file());
            calls.fetch_add(1, Ordering::SeqCst);
            if run.variant_name == "fb" && fail_fb.fetch_sub(1, Ordering::SeqCst) == 1 {
                bail!("the adapter could not be saved");
            }
            Ok(())
        };
        let err = train_with(&s, &runs, 2, dir.path(), policy, hook).expect_err("one run fails");
        let msg = format!("{err:#}");
        assert!(msg.contains("1 of 2 runs failed") && msg.contains("the adapter could not be saved"), "{msg}");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let (fb, recall) = (dir.path().join(&runs[0].dir), dir.path().join(&runs[1].dir));
        assert!(!run_finished(&fb, 2) && run_finished(&recall, 2));
        let before = fs::read(fb.join(METRICS_FILE)).expect("metrics");

        // Again: `recall` is skipped; `fb` resumes from its final checkpoint,
        // trains nothing and only runs its hook.
        train_with(&s, &runs, 1, dir.path(), policy, hook).expect("the rest finishes");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert!(run_finished(&fb, 2));
        assert_eq!(fs::read(fb.join(METRICS_FILE)).expect("metrics"), before);
        // And once more: nothing to do at all.
        train_with(&s, &runs, 2, dir.path(), policy, hook).expect("nothing to do");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    /// Out of memory, as a Qwen3 tensor operation might report it.
    #[derive(Debug)]
    struct OutOfMemory;

    impl std::fmt::Display for OutOfMemory {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("out of memory in the policy")
        }
    }

    impl std::error::Error for OutOfMemory {}

    /// The proxy policy, except that `act` fails when `fail` is set.
    struct Failing {
        inner: ProxyPolicy,
        fail: bool,
    }

    impl Policy for Failing {
        type Episode = <ProxyPolicy as Policy>::Episode;
        type State = <ProxyPolicy as Policy>::State;
        type Error = OutOfMemory;

        fn begin(
            &self,
            task: &rewardlab_models::agent::TaskPrompt,
            sampling: rewardlab_models::agent::Sampling,
            seed: u64,
        ) -> Result<Self::Episode, OutOfMemory> {
            Ok(self.inner.begin(task, sampling, seed).expect("the proxy's begin cannot fail"))
        }

        fn act(
            &self,
            episodes: &mut [&mut Self::Episode],
            turn: rewardlab_models::agent::TurnInfo,
        ) -> Result<Vec<rewardlab_models::agent::TurnOutput>, OutOfMemory> {
            if self.fail {
                return Err(OutOfMemory);
            }
            Ok(self.inner.act(episodes, turn).expect("the proxy's act cannot fail"))
        }

        fn observe(
            &self,
            episode: &mut Self::Episode,
            results: &[rewardlab_sandbox::ToolResult],
        ) -> Result<(), OutOfMemory> {
            self.inner.observe(episode, results).expect("the proxy's observe cannot fail");
            Ok(())
        }

        fn completion_tokens(&self, episode: &Self::Episode) -> usize {
            self.inner.completion_tokens(episode)
        }

        fn sampled_logprobs(&self, episode: &Self::Episode) -> Vec<f64> {
            self.inner.sampled_logprobs(episode)
        }

        fn entropy(&self, episode: &Self::Episode) -> f64 {
            self.inner.entropy(episode)
        }

        fn logprobs(&self, episodes: &[&Self::Episode]) -> Result<Vec<Vec<f64>>, OutOfMemory> {
            Ok(self.inner.logprobs(episodes).expect("the proxy's logprobs cannot fail"))
        }

        fn reference_logprobs(&self, episodes: &[&Self::Episode]) -> Result<Vec<Vec<f64>>, OutOfMemory> {
            Ok(self.inner.reference_logprobs(episodes).expect("the proxy's logprobs cannot fail"))
        }

        fn backward(&mut self, episodes: &[&Self::Episode], coeffs: &[Vec<f64>]) -> Result<(), OutOfMemory> {
            self.inner.backward(episodes, coeffs).expect("the proxy's backward cannot fail");
            Ok(())
        }

        fn step(
            &mut self,
            optim: &rewardlab_models::agent::OptimStep,
        ) -> Result<rewardlab_models::agent::StepStats, OutOfMemory> {
            Ok(self.inner.step(optim).expect("the proxy's step cannot fail"))
        }

        fn state(&self) -> Result<Self::State, OutOfMemory> {
            Ok(self.inner.state().expect("the proxy's state cannot fail"))
        }

        fn restore(&mut self, state: Self::State) -> Result<(), OutOfMemory> {
            self.inner.restore(state).map_err(|_| OutOfMemory)
        }
    }

    #[test]
    fn a_failing_policy_fails_its_run_with_its_error_chain_and_the_others_finish() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = study(dir.path(), 1);
        let runs = s.runs();
        let policy = |run: &RunSpec, _: &PolicyContext<'_>| {
            Ok(Failing { inner: ProxyPolicy::default(), fail: run.variant_name == "fb" })
        };
        let err = train_with(&s, &runs, 2, dir.path(), policy, |_, _, _| Ok(())).expect_err("one run fails");
        let msg = format!("{err:#}");
        assert!(msg.contains("1 of 2 runs failed"), "{msg}");
        assert!(msg.contains("step 1, rollout phase: the policy's `act` failed: out of memory in the policy"), "{msg}");
        assert_eq!(msg.matches("out of memory").count(), 1, "each cause is printed once: {msg}");
        assert!(run_finished(&dir.path().join(&runs[1].dir), 1), "the other run trained");
        assert!(!run_finished(&dir.path().join(&runs[0].dir), 1));
    }
}
