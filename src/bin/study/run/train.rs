//! Training a study's runs: the task set is prepared here (`study::prepare_tasks`),
//! then the framework's runner (`study::train_runs`: worker pool, done markers,
//! resume from checkpoints, the BM25 baseline) trains them while this module
//! draws its progress bars.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rewardlab_framework::engine::{Engine, StepReport};
use rewardlab_framework::study::train::{Progress, RunProgress};
use rewardlab_framework::study::{PolicyContext, PolicySpec, RunError, RunSpec, Study, error_chain};
use rewardlab_models::agent::Policy;
use rewardlab_models::proxy::ProxyPolicy;

/// Trains every run (see `super::run_study`) with the study's policy.
pub fn train(study: &Study, runs: &[RunSpec], jobs: usize, study_dir: &Path) -> Result<()> {
    match &study.policy {
        PolicySpec::Proxy(config) => {
            // A variant's `policy` table (an ablation) replaces the study's settings for its runs.
            let config_of = |run: &RunSpec| {
                study.variants.iter().find(|v| v.name == run.variant_name).and_then(|v| v.proxy).unwrap_or(*config)
            };
            train_with(study, runs, jobs, study_dir, |run, _| Ok(ProxyPolicy::new(config_of(run))), |_, _, _| Ok(()))
        }
        PolicySpec::Qwen3(spec) => super::qwen3::train(study, spec, runs, jobs, study_dir),
    }
}

/// Prepares the study's tasks and trains `runs` with policies from
/// `make_policy` (see `study::train_runs`), with a progress bar per run.
pub fn train_with<P: Policy>(
    study: &Study,
    runs: &[RunSpec],
    jobs: usize,
    study_dir: &Path,
    make_policy: impl Fn(&RunSpec, &PolicyContext<'_>) -> Result<P> + Sync,
    after_run: impl Fn(&RunSpec, &Engine<P>, &Path) -> Result<()> + Sync,
) -> Result<()> {
    let prepared = rewardlab_framework::study::prepare_tasks(study, study_dir)?;
    let tasks = prepared.tasks;
    let bars = Bars::new(&study.name, runs.len());
    let result =
        rewardlab_framework::study::train_runs(study, &tasks, runs, jobs, study_dir, make_policy, after_run, &bars);
    bars.overall.finish();
    Ok(result?)
}

/// The study's bar (runs done) and one bar per training run above it.
struct Bars {
    multi: MultiProgress,
    overall: ProgressBar,
    /// The baselines' bar, made on their first report.
    baselines: std::sync::Mutex<Option<ProgressBar>>,
}

impl Bars {
    fn new(study: &str, runs: usize) -> Bars {
        let multi = MultiProgress::new();
        let overall = multi.add(ProgressBar::new(runs as u64));
        overall.set_style(
            ProgressStyle::with_template("{prefix:>24} {bar:30} {pos}/{len} runs [{elapsed_precise}]")
                .expect("static template"),
        );
        overall.set_prefix(study.to_owned());
        overall.enable_steady_tick(Duration::from_millis(500));
        Bars { multi, overall, baselines: std::sync::Mutex::default() }
    }
}

impl Progress for Bars {
    fn run_started(&self, run: &RunSpec, done: usize, total: usize) -> Box<dyn RunProgress + '_> {
        let bar = self.multi.insert_before(&self.overall, ProgressBar::new(total as u64));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>24} {bar:30} {pos}/{len} steps {msg}").expect("static template"),
        );
        bar.set_prefix(format!("{}/seed-{:03}", run.variant_name, run.seed_index));
        bar.set_position(done as u64);
        Box::new(RunBar { bar, multi: &self.multi, eval: None, alerts: 0 })
    }

    fn run_ended(&self, run: &RunSpec, outcome: Result<(), &RunError>) {
        if let Err(e) = outcome {
            let msg = format!("{}: {}", run.dir.display(), error_chain(e));
            self.multi.suspend(|| eprintln!("run failed: {msg}"));
        }
        self.overall.inc(1);
    }

    fn note(&self, line: &str) {
        self.multi.suspend(|| eprintln!("{line}"));
    }

    fn baselines(&self, done: usize, total: usize) {
        let mut bar = self.baselines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let bar = bar.get_or_insert_with(|| {
            let bar = self.multi.insert_before(&self.overall, ProgressBar::new(total as u64));
            bar.set_style(
                ProgressStyle::with_template("{prefix:>24} {bar:30} {pos}/{len} commits read, then scored [{elapsed}]")
                    .expect("static template"),
            );
            bar.set_prefix("baselines");
            bar
        });
        bar.set_position(done as u64);
        if done == total {
            let line = format!(
                "baselines: {} held-out commits read and scored in {:.1} s",
                total / 2,
                bar.elapsed().as_secs_f64()
            );
            bar.finish_and_clear();
            self.multi.suspend(|| eprintln!("{line}"));
        }
    }
}

/// One run's bar: steps, the mean reward and the latest held-out Fβ.
struct RunBar<'a> {
    bar: ProgressBar,
    multi: &'a MultiProgress,
    eval: Option<f64>,
    /// Alerts fired so far in this process.
    alerts: usize,
}

impl RunProgress for RunBar<'_> {
    fn step(&mut self, r: &StepReport<'_>) {
        self.eval = r.metrics.eval_fb_mean.or(self.eval);
        let eval = self.eval.map_or_else(|| "-".to_string(), |f| format!("{f:.3}"));
        // A fired alert gets a line of its own above the bars, and the
        // bar keeps a count so it stays visible while the run goes on.
        for fired in r.alerts {
            let then = if r.stopping { "; stopping the run (on_alert = \"stop\")" } else { "" };
            let line = format!(
                "{} step {}: alert: {} (`{}` held {} step(s)){then}",
                self.bar.prefix(),
                fired.step,
                fired.message,
                fired.condition,
                fired.held
            );
            self.multi.suspend(|| eprintln!("{line}"));
        }
        self.alerts += r.alerts.len();
        let alerts = if self.alerts > 0 { format!("  alerts {}", self.alerts) } else { String::new() };
        self.bar.set_message(format!("reward {:.3}  held-out Fβ {eval}{alerts}", r.metrics.reward_mean));
        self.bar.set_position(r.step as u64);
    }
}

impl Drop for RunBar<'_> {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
        self.multi.remove(&self.bar);
    }
}
