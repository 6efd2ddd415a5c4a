//! Training a study's runs with the GRPO engine, whatever the policy: the
//! task source and reward variants are built once and shared; runs go
//! through the worker pool ([`super::pool`]), each engine with its own tokio
//! runtime and its own policy from `make_policy`. Finished runs are skipped
//! and checkpointed runs resume ([`super::runs`]), so an interrupted study can
//! simply be started again; a run that fails is reported and the others go on.
//!
//! The library prints nothing: progress goes to a [`Progress`] the caller
//! supplies (the binary's progress bars), errors come back as values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rewardlab_models::agent::Policy;
use rewardlab_sandbox::{RepoStore, Sandbox};

use super::baseline::{self, baseline_row};
use super::publish::{self, BoxError, PublishError};
use super::runs::{self, Start};
use super::{RunSpec, Study, error_chain};
use crate::bm25::Bm25Error;
use crate::engine::{Engine, EngineError, RewardVariant, StepReport, TaskSource, VariantError};

/// A study's tasks and the repository store their rollouts search.
#[derive(Clone)]
pub struct StudyTasks {
    /// The tasks and their train/held-out split, shared by every run.
    pub tasks: Arc<dyn TaskSource>,
    /// The store holding the tasks' repositories.
    pub store: Arc<RepoStore>,
    /// Each task `repo` → its bare clone in the store (what BM25 indexes).
    pub repo_dirs: BTreeMap<String, PathBuf>,
}

impl StudyTasks {
    /// Reads the persisted content index and grep memo of each of the tasks' repositories now,
    /// a thread per repository, so that the first step's greps find them (see `Repo::load_index`:
    /// read lazily, the index file is read by the low-priority build pool, which a step's tool
    /// calls starve). A repository the store cannot open is left to the runs, which report it.
    pub fn load_indexes(&self) {
        std::thread::scope(|scope| {
            for name in self.repo_dirs.keys() {
                scope.spawn(move || {
                    if let Ok(repo) = self.store.repo(name) {
                        repo.load_index();
                    }
                });
            }
        });
    }
}

impl std::fmt::Debug for StudyTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StudyTasks")
            .field("tasks", &self.tasks.tasks().len())
            .field("store", &self.store)
            .field("repo_dirs", &self.repo_dirs)
            .finish()
    }
}

/// What `make_policy` may use besides the run: the study's tasks and a
/// sandbox over its repositories (a warm start trains on them), and whether
/// the run resumes from a checkpoint (which then overwrites the policy's state,
/// so preparing it would be wasted).
#[allow(missing_debug_implementations)]
pub struct PolicyContext<'a> {
    /// The study's tasks.
    pub tasks: &'a dyn TaskSource,
    /// A sandbox over the study's repositories.
    pub sandbox: &'a Sandbox,
    /// The run resumes from a checkpoint, which will overwrite the policy's state.
    pub resuming: bool,
}

/// Where training reports to; called from the worker threads.
pub trait Progress: Sync {
    /// `run` starts training with `done` of `total` steps behind it; the
    /// returned observer sees each step and is dropped when training ends.
    fn run_started(&self, run: &RunSpec, done: usize, total: usize) -> Box<dyn RunProgress + '_>;
    /// `run` ended (skipped, finished or failed).
    fn run_ended(&self, run: &RunSpec, outcome: Result<(), &RunError>);
    /// The baselines of the held-out tasks have `done` of `total` units of work behind them
    /// (before any run starts; see [`baseline::baseline_tasks`]).
    fn baselines(&self, done: usize, total: usize) {
        let _ = (done, total);
    }
    /// A line for the user that is neither progress nor an error (a count of what was skipped).
    fn note(&self, line: &str) {
        let _ = line;
    }
}

/// Sees the steps of one run.
pub trait RunProgress {
    /// A step was completed.
    fn step(&mut self, report: &StepReport<'_>);
}

/// A [`Progress`] that reports nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn run_started(&self, _: &RunSpec, _: usize, _: usize) -> Box<dyn RunProgress + '_> {
        Box::new(Quiet)
    }
    fn run_ended(&self, _: &RunSpec, _: Result<(), &RunError>) {}
}

impl RunProgress for Quiet {
    fn step(&mut self, _: &StepReport<'_>) {}
}

/// Why one run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error("making the policy of {}", run.display())]
    /// The caller's `make_policy` failed.
    MakePolicy {
        /// The run's directory relative to the study's.
        run: PathBuf,
        /// The caller's error.
        #[source]
        source: BoxError,
    },
    #[error("starting run {}", run.display())]
    /// The engine could not be built or resumed for the run.
    Start {
        /// The run's directory relative to the study's.
        run: PathBuf,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    #[error("training {}", run.display())]
    /// A training step failed.
    Train {
        /// The run's directory relative to the study's.
        run: PathBuf,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// The caller's `after_run` hook failed.
    #[error("finishing {}", run.display())]
    Finish {
        /// The run's directory relative to the study's.
        run: PathBuf,
        /// The caller's error.
        #[source]
        source: BoxError,
    },
    #[error("writing {}", path.display())]
    /// The run's done marker could not be written.
    Done {
        /// The marker file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// One failed run of [`TrainError::RunsFailed`].
#[derive(Debug)]
pub struct RunFailure {
    /// The run's directory relative to the study's.
    pub dir: PathBuf,
    /// Why it failed.
    pub error: RunError,
}

/// Why training a study failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    #[error("at least one worker is needed")]
    /// `jobs` was 0.
    NoWorkers,
    #[error("the baselines (BM25 and the grep heuristic)")]
    /// The baselines could not read a held-out task's commit.
    Baseline(#[source] Bm25Error),
    #[error(transparent)]
    /// Publishing a shared file of the results directory failed.
    Publish(#[from] PublishError),
    #[error("variant `{name}` ({origin})")]
    /// A reward variant does not compile.
    Variant {
        /// The variant's name.
        name: String,
        /// Where its source came from: the reward file's path, or `STUDY.toml#name`.
        origin: String,
        /// The checker's diagnostics.
        #[source]
        source: VariantError,
    },
    /// Some runs failed; the others trained. Each failure is listed with its
    /// causes (an aggregate has no single `source`).
    #[error("{} of {total} runs failed:\n  {}", failed.len(), failed.iter().map(|f| format!("{}: {}", f.dir.display(), error_chain(&f.error))).collect::<Vec<_>>().join("\n  "))]
    RunsFailed {
        /// Every failed run with its error.
        failed: Vec<RunFailure>,
        /// Runs asked for.
        total: usize,
    },
}

/// Trains every run of `runs` (at most `jobs` at once), each into
/// `study_dir.join(&run.dir)`, with policies from `make_policy` (called once
/// per run that trains; a resumed run's policy is then restored from its
/// checkpoint), and calls `after_run` with the finished engine and the run's
/// directory when a run completes. Publishes the baselines of the study's
/// held-out tasks first (so `runs` may be empty to prepare a study): the BM25
/// and grep heuristic rows in `baseline_bm25.csv` (the file keeps its first
/// name so older studies and tools still find it) and their per-task records
/// in `baseline_tasks.jsonl`; when `baseline.key` says those records were
/// computed from the same held-out tasks ([`baseline::cache_key`]), they are
/// read back instead of recomputed (a rerun, a resumed run, a Slurm task).
///
/// Errors of single runs are collected and returned together
/// ([`TrainError::RunsFailed`]) after every other run had its turn.
// Each argument is data the runner needs, none has a default: a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub fn train_runs<P, M, A, E1, E2>(
    study: &Study,
    tasks: &StudyTasks,
    runs: &[RunSpec],
    jobs: usize,
    study_dir: &Path,
    make_policy: M,
    after_run: A,
    progress: &dyn Progress,
) -> Result<(), TrainError>
where
    P: Policy,
    M: Fn(&RunSpec, &PolicyContext<'_>) -> Result<P, E1> + Sync,
    A: Fn(&RunSpec, &Engine<P>, &Path) -> Result<(), E2> + Sync,
    E1: Into<BoxError>,
    E2: Into<BoxError>,
{
    if jobs == 0 {
        return Err(TrainError::NoWorkers);
    }
    let repo_dir = |repo: &str| tasks.repo_dirs.get(repo).cloned().unwrap_or_else(|| repo.into());
    let params = crate::heuristic::HeuristicParams::default();
    let key = baseline::cache_key(tasks.tasks.as_ref(), study.summary.bm25_k, &params);
    let (bm25, heuristic) = match key
        .as_deref()
        .and_then(|key| baseline::cached(study_dir, key, study.summary.bm25_k, &params, tasks.tasks.held_out().len()))
    {
        Some(records) => records,
        None => {
            let cache = if study.sandbox.skip_missing_blobs {
                crate::bm25::TermCache::skipping_missing()
            } else {
                crate::bm25::TermCache::default()
            };
            let records = baseline::baseline_tasks(
                tasks.tasks.as_ref(),
                study.summary.bm25_k,
                params,
                &repo_dir,
                &cache,
                &|done, total| progress.baselines(done, total),
            )
            .map_err(TrainError::Baseline)?;
            if cache.missing() > 0 {
                progress.note(&format!(
                    "baselines: {} blob(s) missing from the store read as files without terms ([sandbox] skip_missing_blobs)",
                    cache.missing()
                ));
            }
            records
        }
    };
    let rows = [
        baseline_row(baseline::bm25_name(study.summary.bm25_k), &bm25),
        baseline_row(baseline::heuristic_name(&params), &heuristic),
    ];
    // Atomically: concurrent runners of the study (Slurm array tasks) all write them.
    publish::write_baseline(study_dir, &rows)?;
    publish::write_baseline_tasks(study_dir, &[bm25, heuristic].concat())?;
    if let Some(key) = &key {
        // Written after the records it vouches for: a process killed between the two leaves an
        // old key (or none), which only costs the next process a recomputation.
        publish::write_text(study_dir, baseline::CACHE_KEY_FILE, key, "the baselines' cache key")?;
    }

    tasks.load_indexes();

    let group_size = study.training.group_size;
    let variants = study
        .variants
        .iter()
        .map(|v| {
            RewardVariant::compile(&v.name, &v.source, group_size, &v.params)
                .map(Arc::new)
                .map_err(|source| TrainError::Variant { name: v.name.clone(), origin: v.origin.clone(), source })
        })
        .collect::<Result<Vec<_>, _>>()?;

    // The workers see the caller's hooks with their errors boxed, so the worker code is generic over the policy alone.
    let make_policy: &MakePolicy<'_, P> = &|run, context| make_policy(run, context).map_err(Into::into);
    let after_run: &AfterRun<'_, P> = &|run, engine, dir| after_run(run, engine, dir).map_err(Into::into);
    // One sandbox for every run of this process: its result cache answers a call that another run
    // already made at the same commit (the runs of a study share their tasks, and every seed's
    // evaluation asks the same held-out instances), and its semaphore bounds the calls in flight
    // across them all. A cached result is exactly what running the call gives, so no run's
    // numbers depend on which others ran beside it.
    let sandbox = Sandbox::new(tasks.store.clone(), study.sandbox.limits());
    // And what the last process of this study (the same binary) had in it.
    sandbox.load_results();
    let trainer = Trainer { study, tasks, variants, study_dir, make_policy, after_run, sandbox: &sandbox };
    let failed = super::pool::run_pool(
        runs.len(),
        jobs,
        |i| trainer.train_one(&runs[i], progress),
        |i, outcome| progress.run_ended(&runs[i], outcome),
    );
    // What the runs' greps indexed and searched (the content index, the grep memo) serves the
    // next process of this study (a rerun, a resumed run, another Slurm task). A failed write
    // only costs that process a rebuild and scans, so it does not fail the study.
    let _ = tasks.store.save_indexes();
    let _ = sandbox.save_results();
    // Their counters explain the tools' time in `phases.md`; like the save, never fatal.
    let _ = super::phases::write_index_counters(study_dir, &super::phases::index_counters(&tasks.store));
    let _ = super::phases::write_sandbox_counters(study_dir, &sandbox.stats());
    if failed.is_empty() {
        return Ok(());
    }
    let failed = failed.into_iter().map(|(i, error)| RunFailure { dir: runs[i].dir.clone(), error }).collect();
    Err(TrainError::RunsFailed { failed, total: runs.len() })
}

/// [`train_runs`]' `make_policy` with its error boxed.
type MakePolicy<'a, P> = dyn Fn(&RunSpec, &PolicyContext<'_>) -> Result<P, BoxError> + Sync + 'a;
/// [`train_runs`]' `after_run` with its error boxed.
type AfterRun<'a, P> = dyn Fn(&RunSpec, &Engine<P>, &Path) -> Result<(), BoxError> + Sync + 'a;

/// What every worker shares.
struct Trainer<'a, P: Policy> {
    study: &'a Study,
    tasks: &'a StudyTasks,
    variants: Vec<Arc<RewardVariant>>,
    study_dir: &'a Path,
    make_policy: &'a MakePolicy<'a, P>,
    after_run: &'a AfterRun<'a, P>,
    sandbox: &'a Sandbox,
}

impl<P: Policy> Trainer<'_, P> {
    fn train_one(&self, run: &RunSpec, progress: &dyn Progress) -> Result<(), RunError> {
        let config = self.study.engine_config(run);
        let total = config.total_steps;
        let shadow = config.shadow;
        let dir = self.study_dir.join(&run.dir);
        let checkpoint = match Start::of(&dir, total) {
            Start::Skip => return Ok(()),
            Start::Resume(checkpoint) => Some(checkpoint),
            Start::Fresh => None,
        };
        let variant = self.variants[run.variant].clone();
        let sandbox = self.sandbox.clone();
        let context =
            PolicyContext { tasks: self.tasks.tasks.as_ref(), sandbox: &sandbox, resuming: checkpoint.is_some() };
        let policy = (self.make_policy)(run, &context)
            .map_err(|source| RunError::MakePolicy { run: run.dir.clone(), source })?;
        let tasks = self.tasks.tasks.clone();
        let engine = match checkpoint {
            Some(ckpt) => Engine::resume(&ckpt, policy, tasks, sandbox, variant),
            None => Engine::new(config, policy, tasks, sandbox, variant),
        };
        let mut engine = engine.map_err(|source| RunError::Start { run: run.dir.clone(), source })?;
        // Shadow variants (issue 17): every other variant scores this run's rollouts.
        if shadow {
            engine = engine.with_shadows(self.variants.clone());
        }

        let mut observer = progress.run_started(run, engine.steps_done(), total);
        let result = engine.run(&dir, |r| observer.step(r));
        drop(observer);
        let stopped_by = match result {
            Ok(summary) => summary.stopped_by,
            Err(EngineError::Finished { .. }) => None,
            Err(source) => return Err(RunError::Train { run: run.dir.clone(), source }),
        };
        (self.after_run)(run, &engine, &dir).map_err(|source| RunError::Finish { run: run.dir.clone(), source })?;
        let marked = match &stopped_by {
            Some(fired) => runs::mark_stopped(&dir, engine.steps_done(), fired),
            None => runs::mark_done(&dir, engine.steps_done()),
        };
        marked.map_err(|source| RunError::Done { path: dir.join(runs::DONE_FILE), source })
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rewardlab_models::proxy::ProxyPolicy;

    use super::*;
    use crate::engine::{METRICS_FILE, TaskSet};
    use crate::study::parse_study;
    use crate::study::runs::run_finished;

    /// A two-variant proxy study of `steps` steps on a small synthetic source,
    /// and its tasks generated under `dir`.
    fn study(dir: &Path, steps: usize) -> (Study, StudyTasks) {
        let text = format!(
            "seeds = 1\n[tasks]\nsource = \"synthetic\"\nseed = 1\nfiles = 40\ncommits = 2\ntasks = 12\n\
             [policy]\nkind = \"proxy\"\n[training]\ntotal_steps = {steps}\nprompts_per_step = 2\ngroup_size = 2\n\
             eval_every = 0\n[[variants]]\nname = \"fb\"\nreward = 'Fb(file)'\n\
             [[variants]]\nname = \"recall\"\nreward = 'R(file)'\n"
        );
        study_of(dir, &text)
    }

    /// The study `text` (a synthetic source) and its tasks generated under `dir`.
    fn study_of(dir: &Path, text: &str) -> (Study, StudyTasks) {
        let study = parse_study(&dir.join("t.toml"), text, &|p: &Path| fs::read_to_string(p)).expect("a valid study");
        let config = study.tasks[0].synthetic_config().expect("synthetic");
        let repo = dir.join("data/repo.git");
        let mut source = crate::synthetic::generate(&config, &repo).expect("generate");
        source.repo_path = repo.canonicalize().expect("absolute");
        let set = TaskSet::from_synthetic(&source, 0.15).expect("tasks");
        let store = RepoStore::open(dir.join("store")).expect("store");
        let repo_dirs = set.tasks.iter().map(|t| (t.repo.clone(), source.repo_path.clone())).collect();
        (study, StudyTasks { tasks: Arc::new(set), store: Arc::new(store), repo_dirs })
    }

    /// The tool-call counters the last training process in `dir` wrote.
    fn calls(dir: &Path) -> rewardlab_sandbox::SandboxStats {
        let text = fs::read_to_string(dir.join(super::super::phases::SANDBOX_JSON)).expect("sandbox.json");
        serde_json::from_str(&text).expect("counters")
    }

    #[test]
    fn the_runs_of_a_process_share_one_result_cache_and_train_exactly_as_alone() {
        let policy = |_: &RunSpec, _: &PolicyContext<'_>| Ok::<_, BoxError>(ProxyPolicy::default());
        let hook = |_: &RunSpec, _: &Engine<ProxyPolicy>, _: &Path| Ok::<_, BoxError>(());
        // Both runs in one process, one after the other.
        let together = tempfile::tempdir().expect("tempdir");
        let (s, tasks) = study(together.path(), 2);
        let runs = s.runs();
        train_runs(&s, &tasks, &runs, 1, together.path(), policy, hook, &Quiet).expect("trains");
        let shared = calls(together.path());
        // Each run in a process of its own.
        let apart = tempfile::tempdir().expect("tempdir");
        let (s, tasks) = study(apart.path(), 2);
        let mut alone = Vec::new();
        for run in &runs {
            train_runs(&s, &tasks, std::slice::from_ref(run), 1, apart.path(), policy, hook, &Quiet).expect("trains");
            alone.push(calls(apart.path()));
        }
        assert_eq!(shared.calls, alone[0].calls + alone[1].calls, "the same calls were made");
        // Both runs start from the same policy on the same tasks (the seed picks them), so the
        // second run's first step asks what the first run's did: answered from the cache.
        assert!(shared.cache_hits > alone[0].cache_hits + alone[1].cache_hits, "together {shared:?}, apart {alone:?}");
        for run in &runs {
            let metrics = |dir: &Path| fs::read(dir.join(&run.dir).join(METRICS_FILE)).expect("metrics");
            assert_eq!(
                metrics(together.path()),
                metrics(apart.path()),
                "{}: a cached result is the result",
                run.dir.display()
            );
        }
    }

    #[test]
    fn finished_runs_are_skipped_and_a_failed_hook_is_retried_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (s, tasks) = study(dir.path(), 2);
        let runs = s.runs();
        let calls = AtomicUsize::new(0);
        let policy = |_: &RunSpec, _: &PolicyContext<'_>| Ok::<_, BoxError>(ProxyPolicy::default());
        // The `fb` run's hook fails once; the `recall` run is not held up by it.
        let fail_fb = AtomicUsize::new(1);
        let hook = |run: &RunSpec, engine: &Engine<ProxyPolicy>, out: &Path| -> Result<(), BoxError> {
            assert_eq!(engine.steps_done(), 2);
            assert!(out.join(METRICS_FILE).is_file());
            calls.fetch_add(1, Ordering::SeqCst);
            if run.variant_name == "fb" && fail_fb.fetch_sub(1, Ordering::SeqCst) == 1 {
                return Err("the adapter could not be saved".into());
            }
            Ok(())
        };
        let err = train_runs(&s, &tasks, &runs, 2, dir.path(), policy, hook, &Quiet).expect_err("one run fails");
        let msg = error_chain(&err);
        assert!(msg.contains("1 of 2 runs failed") && msg.contains("the adapter could not be saved"), "{msg}");
        assert!(msg.contains("runs/fb/seed-000: finishing runs/fb/seed-000: the adapter"), "{msg}");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let (fb, recall) = (dir.path().join(&runs[0].dir), dir.path().join(&runs[1].dir));
        assert!(!run_finished(&fb, 2) && run_finished(&recall, 2));
        let before = fs::read(fb.join(METRICS_FILE)).expect("metrics");

        // Again: `recall` is skipped; `fb` resumes from its final checkpoint,
        // trains nothing and only runs its hook.
        train_runs(&s, &tasks, &runs, 1, dir.path(), policy, hook, &Quiet).expect("the rest finishes");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert!(run_finished(&fb, 2));
        assert_eq!(fs::read(fb.join(METRICS_FILE)).expect("metrics"), before);
        // And once more: nothing to do at all.
        train_runs(&s, &tasks, &runs, 2, dir.path(), policy, hook, &Quiet).expect("nothing to do");
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
        let (s, tasks) = study(dir.path(), 1);
        let runs = s.runs();
        let policy = |run: &RunSpec, _: &PolicyContext<'_>| {
            Ok::<_, BoxError>(Failing { inner: ProxyPolicy::default(), fail: run.variant_name == "fb" })
        };
        let err = train_runs(&s, &tasks, &runs, 2, dir.path(), policy, |_, _, _| Ok::<_, BoxError>(()), &Quiet)
            .expect_err("one run fails");
        let msg = error_chain(&err);
        assert!(msg.contains("1 of 2 runs failed"), "{msg}");
        assert!(msg.contains("step 1, rollout phase: the policy's `act` failed: out of memory in the policy"), "{msg}");
        assert_eq!(msg.matches("out of memory").count(), 1, "each cause is printed once: {msg}");
        assert!(run_finished(&dir.path().join(&runs[1].dir), 1), "the other run trained");
        assert!(!run_finished(&dir.path().join(&runs[0].dir), 1));
    }

    /// A study whose one variant pays only for answering at once, so the
    /// proxy's turns collapse, with a study-wide alert on it.
    fn collapsing(dir: &Path, on_alert: &str) -> (Study, StudyTasks) {
        let text = format!(
            "seeds = 1\n[tasks]\nsource = \"synthetic\"\nseed = 1\nfiles = 40\ncommits = 2\ntasks = 12\n\
             [policy]\nkind = \"proxy\"\n[training]\ntotal_steps = 14\nprompts_per_step = 4\ngroup_size = 4\n\
             eval_every = 0\ncheckpoint_every = 5\non_alert = \"{on_alert}\"\n[training.optim]\nlr = 0.5\n\
             schedule = {{ kind = \"constant\" }}\n\
             [[variants]]\nname = \"hasty\"\nreward = 'mask(T <= 1)'\n\
             [[alerts]]\nwhen = 'step.turns < 1.5 && batch.mean(T) < 1.5'\nsteps = 2\nmessage = \"turn collapse\"\n"
        );
        study_of(dir, &text)
    }

    #[test]
    fn a_turn_collapse_alert_fires_where_the_metrics_say_and_stop_ends_the_run_with_a_checkpoint() {
        let policy = |_: &RunSpec, _: &PolicyContext<'_>| Ok::<_, BoxError>(ProxyPolicy::default());
        let hook = |_: &RunSpec, _: &Engine<ProxyPolicy>, _: &Path| Ok::<_, BoxError>(());

        let warn = tempfile::tempdir().expect("tempdir");
        let (s, tasks) = collapsing(warn.path(), "warn");
        assert_eq!(
            s.variants[0].source.lines().last(),
            Some("alert step.turns < 1.5 && batch.mean(T) < 1.5 for 2 steps : \"turn collapse\"")
        );
        let runs = s.runs();
        train_runs(&s, &tasks, &runs, 1, warn.path(), policy, hook, &Quiet).expect("trains");
        let run_dir = warn.path().join(&runs[0].dir);
        let rows = crate::study::summary::read_metrics(&run_dir.join(METRICS_FILE)).expect("metrics");
        assert_eq!(rows.len(), 14);
        // The rule, from the metrics alone: it fires where turns are below
        // 1.5 for the second step running, and not again while they stay there.
        let low: Vec<bool> = rows.iter().map(|r| r.turns < 1.5).collect();
        let expected: Vec<usize> =
            (1..low.len()).filter(|&i| low[i] && low[i - 1] && (i < 2 || !low[i - 2])).map(|i| rows[i].step).collect();
        assert!(!expected.is_empty(), "turns never collapsed: {:?}", rows.iter().map(|r| r.turns).collect::<Vec<_>>());
        assert!(rows[0].turns >= 1.5, "a fresh proxy searches first: {}", rows[0].turns);
        let fired = crate::engine::alerts::read_alerts(&run_dir.join(crate::engine::ALERTS_FILE)).expect("alerts");
        assert_eq!(fired.iter().map(|f| f.step).collect::<Vec<_>>(), expected);
        assert_eq!((fired[0].held, fired[0].message.as_str()), (2, "turn collapse"));
        assert!(run_finished(&run_dir, 14) && !runs::stopped_by_alert(&run_dir));

        let stop = tempfile::tempdir().expect("tempdir");
        let (s, tasks) = collapsing(stop.path(), "stop");
        train_runs(&s, &tasks, &runs, 1, stop.path(), policy, hook, &Quiet).expect("stops cleanly");
        let run_dir = stop.path().join(&runs[0].dir);
        let stopped = crate::study::summary::read_metrics(&run_dir.join(METRICS_FILE)).expect("metrics");
        // The same seed gives the same steps, up to the one the alert fired at.
        assert_eq!(stopped.len(), expected[0]);
        assert_eq!(stopped[..], rows[..expected[0]]);
        let checkpoint = crate::engine::latest_checkpoint(&run_dir).expect("a checkpoint");
        assert!(checkpoint.ends_with(format!("step-{:06}", expected[0])), "{}", checkpoint.display());
        assert!(runs::stopped_by_alert(&run_dir) && run_finished(&run_dir, 14));
        // A stopped run counts as finished: running the study again trains nothing.
        train_runs(&s, &tasks, &runs, 1, stop.path(), policy, hook, &Quiet).expect("nothing to do");
        assert_eq!(
            crate::study::summary::read_metrics(&run_dir.join(METRICS_FILE)).expect("metrics").len(),
            expected[0]
        );
        // The summary lists it.
        crate::study::summary::Manifest::new(&s, &runs).write(stop.path()).expect("manifest");
        let summary = crate::study::summary::summarize(stop.path()).expect("summary");
        assert_eq!(summary.alerts.len(), 1);
        assert_eq!((summary.alerts[0].variant.as_str(), summary.alerts[0].fired.step), ("hasty", expected[0]));
        let md = crate::study::summary::render_markdown(&summary);
        assert!(md.contains("## Alerts") && md.contains("| hasty | 0 | "), "{md}");
    }

    /// Records what the runner reports.
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<String>>);

    impl Progress for Recorder {
        fn run_started(&self, run: &RunSpec, done: usize, total: usize) -> Box<dyn RunProgress + '_> {
            self.0.lock().expect("lock").push(format!("start {} {done}/{total}", run.variant_name));
            Box::new(Quiet)
        }
        fn run_ended(&self, run: &RunSpec, outcome: Result<(), &RunError>) {
            let outcome = outcome.map_or_else(|e| format!("failed: {}", error_chain(e)), |()| "ok".to_owned());
            self.0.lock().expect("lock").push(format!("end {} {outcome}", run.variant_name));
        }
    }

    #[test]
    fn progress_hears_every_run_and_each_failure_with_its_causes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (s, tasks) = study(dir.path(), 1);
        let runs = s.runs();
        let policy = |run: &RunSpec, _: &PolicyContext<'_>| {
            if run.variant_name == "fb" {
                return Err(std::io::Error::other("no such checkpoint"));
            }
            Ok(ProxyPolicy::default())
        };
        let recorder = Recorder::default();
        let err = train_runs(&s, &tasks, &runs, 1, dir.path(), policy, |_, _, _| Ok::<_, BoxError>(()), &recorder)
            .expect_err("one run fails");
        assert!(matches!(err, TrainError::RunsFailed { total: 2, .. }), "{err:?}");
        assert_eq!(
            recorder.0.into_inner().expect("lock"),
            [
                "end fb failed: making the policy of runs/fb/seed-000: no such checkpoint",
                "start recall 0/1",
                "end recall ok"
            ]
        );
        assert_eq!(
            err.to_string(),
            "1 of 2 runs failed:\n  runs/fb/seed-000: making the policy of runs/fb/seed-000: no such checkpoint"
        );
    }
}
