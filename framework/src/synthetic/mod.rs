//! The synthetic task source: a deterministic, seeded git repository of a
//! Python-like project with history, and issues over it whose relevant files
//! can be found by searching but not reliably by lexical similarity.
//!
//! Real SWE-bench repositories are not available offline, so studies train
//! and evaluate on this source. [`generate`] writes a bare repository with
//! several commits (an initial import, then commits that add modules, insert
//! argument checks and methods, and bump the version) and returns the tasks:
//! each has a base commit, issue text, targets (files, line ranges,
//! functions) and auxiliary files with CATM-like weights (seed 000, §2.4).
//!
//! Issue text quotes error messages from the target's `raise` (verbatim in
//! easy and medium tasks, a fragment in hard ones) and surrounds them with
//! distractors — another package the reporter uses heavily, a similar module
//! they suspect, third-party names absent from the repository — so BM25 over
//! files ranks non-targets high while grep for the quoted strings finds them.
//!
//! Code map: `vocab` (domain words), `code` (module model, rendering with
//! spans), `bodies` (function bodies, unique messages), `templates` (module
//! kinds), `project` (packages, initial import), `history` (later commits),
//! `files` (all files of a commit), `fast_import` (the git repository),
//! `issue` (issue writer), `catm` (weights), `tasks` (task selection).

mod bodies;
mod catm;
mod code;
mod fast_import;
mod files;
mod history;
mod issue;
mod project;
mod tasks;
mod templates;
mod vocab;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub use catm::{MAX_WEIGHT, MIN_WEIGHT};

/// What to generate. Everything is a function of these fields.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyntheticConfig {
    /// Seed of every random choice: same seed, byte-identical repository.
    pub seed: u64,
    /// Approximate number of files at the last commit.
    pub files: usize,
    /// Number of commits (at least 1).
    pub commits: usize,
    /// Number of tasks.
    pub tasks: usize,
    /// Share of tasks held out from training, in [0, 1].
    pub held_out_fraction: f64,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        SyntheticConfig { seed: 0, files: 300, commits: 8, tasks: 120, held_out_fraction: 0.2 }
    }
}

/// A generated repository and its tasks.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyntheticSource {
    /// The bare git repository.
    pub repo_path: PathBuf,
    /// Commits, oldest first.
    pub commits: Vec<CommitInfo>,
    /// Every task, in generation order.
    pub tasks: Vec<Task>,
    /// Indices into `tasks` for training, ascending.
    pub train: Vec<usize>,
    /// Indices into `tasks` held out for evaluation, ascending.
    pub held_out: Vec<usize>,
}

/// One commit of the generated history.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommitInfo {
    /// Full hex object id.
    pub id: String,
    /// The tag on the commit (`v0.3.0`).
    pub tag: String,
    /// First line of the commit message.
    pub title: String,
    /// Number of files in the commit's tree.
    pub files: usize,
}

/// One issue to solve at one commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// `synthetic__<project>-<n>`, SWE-bench style.
    pub id: String,
    /// Commit id the issue was written against.
    pub base_commit: String,
    /// Index of the base commit in [`SyntheticSource::commits`].
    pub base_index: usize,
    /// The issue text (a `# title` line, then the body).
    pub prompt: String,
    /// The patch: files, line ranges and functions that must change.
    pub targets: Targets,
    /// Files a solver must read besides the patch, with weights in
    /// [[`MIN_WEIGHT`], [`MAX_WEIGHT`]].
    pub aux: Vec<AuxFile>,
    /// How much the issue text gives away.
    pub difficulty: Difficulty,
    /// Strings quoted verbatim in the prompt that occur in a target file at
    /// the base commit (error messages or fragments of them).
    pub quoted: Vec<String>,
}

impl Task {
    /// The reward's target file set: patch files and auxiliary files whose
    /// weight is at least `min_weight` (seed 000's `G(x)` with 0.15).
    pub fn relevant_files(&self, min_weight: f64) -> Vec<String> {
        let mut files: Vec<String> = self.targets.files.clone();
        for aux in &self.aux {
            if aux.weight >= min_weight && !files.contains(&aux.path) {
                files.push(aux.path.clone());
            }
        }
        files
    }
}

/// Targets in the reward language's formats (`/work/shared/reward-language.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    /// Repository-relative paths.
    pub files: Vec<String>,
    /// `path:start-end`, 1-based inclusive, at the base commit.
    pub line_ranges: Vec<String>,
    /// `path::Class.method` or `path::function`.
    pub functions: Vec<String>,
}

/// An auxiliary relevant file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuxFile {
    /// Repository-relative path.
    pub path: String,
    /// Why a solver reads it.
    pub role: AuxRole,
    /// Its CATM-style weight, in [[`MIN_WEIGHT`], [`MAX_WEIGHT`]].
    pub weight: f64,
}

/// Why a solver reads an auxiliary file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum AuxRole {
    /// The test module of a patched module.
    Test,
    /// A module that calls the patched function.
    Caller,
    /// The module defining the patched class's base class.
    BaseClass,
    /// A module whose functions the patched function calls.
    Collaborator,
    /// A read that turned out not to matter; survives only with a high
    /// simulated reasoning length, like CATM's judge noise.
    Noise,
}

/// How much the issue gives away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Difficulty {
    /// Exact `Class.method` in the title, the error message verbatim,
    /// sometimes a traceback.
    Easy,
    /// The error message verbatim, identifiers paraphrased.
    Medium,
    /// Paraphrase only, with a fragment of the message.
    Hard,
}

/// Errors of [`generate`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("invalid synthetic config: {0}")]
    /// The config (its message says which field) is out of range.
    InvalidConfig(String),
    #[error("cannot access {path}")]
    /// The output directory could not be created.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    #[error("cannot run `{command}`")]
    /// `git` could not be started or fed its input.
    Spawn {
        /// The command line.
        command: String,
        /// The I/O error.
        source: std::io::Error,
    },
    #[error("`{command}` failed: {detail}")]
    /// `git` ran and failed, or its output was not what was expected.
    Git {
        /// The command line.
        command: String,
        /// Its stderr, or what was wrong with its output.
        detail: String,
    },
    #[error("output directory {0} exists and is not empty")]
    /// The output directory (given) already holds files.
    NotEmpty(PathBuf),
}

/// Generates the repository into `out_dir` (created; must be absent or
/// empty) and the tasks over it.
pub fn generate(config: &SyntheticConfig, out_dir: &Path) -> Result<SyntheticSource, Error> {
    validate(config)?;
    if let Ok(mut entries) = std::fs::read_dir(out_dir)
        && entries.next().is_some()
    {
        return Err(Error::NotEmpty(out_dir.to_path_buf()));
    }
    let mut g = templates::Gen {
        rng: ChaCha8Rng::seed_from_u64(config.seed),
        literals: bodies::Literals::default(),
        class_names: BTreeSet::new(),
    };
    let name = *bodies::pick(&mut g.rng, vocab::PROJECT_NAMES);
    let layout = Layout::for_files(config.files, config.commits);
    let mut project = project::initial_project(&mut g, name, layout.packages, layout.initial_components);
    let mut messages = vec![format!("Initial import of {name}\n")];
    let mut snapshots = Vec::with_capacity(config.commits);
    snapshots.push((project.clone(), files::render(&project)));
    for commit in 1..config.commits {
        let message = history::evolve(&mut g, &mut project, commit, layout.components_per_commit);
        messages.push(message);
        snapshots.push((project.clone(), files::render(&project)));
    }
    let tags: Vec<String> = snapshots.iter().map(|(p, _)| format!("v{}", p.version)).collect();
    let inputs: Vec<fast_import::CommitInput<'_>> = snapshots
        .iter()
        .zip(&messages)
        .zip(&tags)
        .map(|(((_, files), message), tag)| fast_import::CommitInput { message, files: &files.files, tag })
        .collect();
    let ids = fast_import::write_repository(out_dir, &inputs)?;
    let commits: Vec<CommitInfo> = snapshots
        .iter()
        .zip(&ids)
        .zip(&messages)
        .zip(&tags)
        .map(|((((_, files), id), message), tag)| CommitInfo {
            id: id.clone(),
            tag: tag.clone(),
            title: message.lines().next().unwrap_or_default().to_string(),
            files: files.files.len(),
        })
        .collect();
    let snapshots: Vec<tasks::Snapshot> =
        snapshots.into_iter().zip(ids).map(|((project, files), id)| tasks::Snapshot { project, files, id }).collect();
    // Tasks draw from their own stream so that changing the task count
    // leaves the repository unchanged.
    let mut task_rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x7a5c_0de5_1eed_0001);
    let tasks = tasks::make_tasks(&mut task_rng, &snapshots, config.tasks);
    let (train, held_out) = split(config, tasks.len());
    Ok(SyntheticSource { repo_path: out_dir.to_path_buf(), commits, tasks, train, held_out })
}

/// Sizes derived from the requested file count.
struct Layout {
    packages: usize,
    initial_components: usize,
    components_per_commit: usize,
}

impl Layout {
    /// Per package the project has about four fixed modules (errors,
    /// settings, base, client), two `__init__.py` files, a facade test and a
    /// doc page; each component brings about 1.85 files (itself and usually
    /// a test). Seven percent of files are top-level (README, setup...).
    fn for_files(files: usize, commits: usize) -> Layout {
        let packages = (files / 22).clamp(3, vocab::DOMAINS.len());
        let fixed = packages * 7 + 9;
        let components = (files.saturating_sub(fixed) as f64 / 1.85).round() as usize;
        let later = if commits > 1 { components * 3 / 10 } else { 0 };
        let per_commit = if commits > 1 { later / (commits - 1) } else { 0 };
        Layout {
            packages,
            initial_components: components.saturating_sub(per_commit * commits.saturating_sub(1)).max(packages),
            components_per_commit: per_commit,
        }
    }
}

fn validate(config: &SyntheticConfig) -> Result<(), Error> {
    if config.commits == 0 {
        return Err(Error::InvalidConfig("commits must be at least 1".into()));
    }
    if config.files < 40 {
        return Err(Error::InvalidConfig(format!("files must be at least 40, got {}", config.files)));
    }
    if !(0.0..=1.0).contains(&config.held_out_fraction) {
        return Err(Error::InvalidConfig(format!(
            "held_out_fraction must be in [0, 1], got {}",
            config.held_out_fraction
        )));
    }
    Ok(())
}

/// A seeded shuffle of task indices; the first `held_out_fraction` are held out.
fn split(config: &SyntheticConfig, count: usize) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..count).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(config.seed ^ 0x5b1d_0ff5_e7ed_0002));
    let held = (count as f64 * config.held_out_fraction).round() as usize;
    let mut held_out = order[..held].to_vec();
    let mut train = order[held..].to_vec();
    held_out.sort_unstable();
    train.sort_unstable();
    (train, held_out)
}
