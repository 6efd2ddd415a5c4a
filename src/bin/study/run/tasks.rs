//! A study's tasks and the repository store its rollouts search, from any of
//! the three sources:
//!
//! - **synthetic**: the repository is regenerated each time (it is
//!   deterministic in its seed and takes well under a second) into a fresh
//!   directory that then replaces `<study>/data/repo.git` unless an identical
//!   one is there (`study::publish::publish_dir`: concurrent runners keep
//!   theirs), so a half-written one from a killed run is never reused. The
//!   store is `<study>/store`.
//! - **swebench**: JSONL instances name repositories `owner/name`; the study's
//!   `repos` directory of bare clones `owner__name.git` *is* the store (the
//!   sandbox adopts mirrors placed there as they are; nothing is copied).
//! - **commits**: tasks mined from the repository's history; the store
//!   (`<study>/store`) clones the repository on first use.
//!
//! Before any run starts, every task's repository is opened and its commit
//! resolved, so a missing clone or commit is one clear error up front rather
//! than a failure in every run's first step.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rewardlab_framework::engine::TaskSet;
use rewardlab_framework::study::{Study, TaskSpec, publish};
use rewardlab_framework::synthetic;
use rewardlab_rewards::tasks::{CommitOptions, RepoRef, Task, load_swebench, mine_commits};
use rewardlab_sandbox::RepoStore;
use rewardlab_sandbox::mirror_name;

/// Auxiliary files weighing at least this much count as targets (seed 000's threshold).
pub const AUX_MIN_WEIGHT: f64 = 0.15;

/// The tasks of a study and the store their repositories live in.
#[derive(Debug)]
pub struct Prepared {
    pub tasks: TaskSet,
    pub store: Arc<RepoStore>,
    /// Each task `repo` → its bare clone in the store (what BM25 indexes).
    pub repo_dirs: BTreeMap<String, PathBuf>,
}

/// Builds the study's task set and opens its store (see the module docs).
pub fn prepare(study: &Study, study_dir: &Path) -> Result<Prepared> {
    let open = |root: &Path| RepoStore::open(root).with_context(|| format!("opening the store {}", root.display()));
    let (tasks, store) = match &study.tasks {
        TaskSpec::Synthetic { .. } => (synthetic_tasks(study, study_dir)?, open(&study_dir.join("store"))?),
        TaskSpec::Swebench { path, repos, seed, held_out_fraction } => {
            let tasks = swebench_tasks(path)?;
            check_mirrors(&tasks, repos, path)?;
            let set = TaskSet::from_tasks(&tasks, *held_out_fraction, *seed, AUX_MIN_WEIGHT)
                .context("splitting the SWE-bench tasks")?;
            (set, open(repos)?)
        }
        TaskSpec::Commits { repo, rev, max_tasks, seed, held_out_fraction } => {
            let repo =
                repo.canonicalize().with_context(|| format!("the commits source's repository {}", repo.display()))?;
            let tasks = commit_tasks(&repo, rev, *max_tasks)?;
            let mut set = TaskSet::from_tasks(&tasks, *held_out_fraction, *seed, AUX_MIN_WEIGHT)
                .context("splitting the commit-mined tasks")?;
            let store = open(&study_dir.join("store"))?;
            // The store would name a path's clone after its last two
            // components, which fails for a parent such as `.cache`; the
            // clone gets a name of its own and the tasks refer to it by that.
            let name = local_store_name(&repo);
            store
                .repo_named(&name, Some(&repo.to_string_lossy()))
                .with_context(|| format!("cloning {} into the store as {name}", repo.display()))?;
            for task in &mut set.tasks {
                task.repo = name.clone();
            }
            (set, store)
        }
    };
    if tasks.train.is_empty() {
        bail!("the task source has no training tasks ({} tasks, {} held out)", tasks.tasks.len(), tasks.held_out.len());
    }
    let repo_dirs = check_commits(&tasks, &store)?;
    Ok(Prepared { tasks, store: Arc::new(store), repo_dirs })
}

/// `local__<directory name>`, in the characters a store name allows.
fn local_store_name(repo: &Path) -> String {
    let dir = repo.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = dir.strip_suffix(".git").unwrap_or(&dir);
    let clean: String =
        dir.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' }).collect();
    let clean = clean.trim_start_matches('.');
    format!("local__{}", if clean.is_empty() { "repo" } else { clean })
}

fn synthetic_tasks(study: &Study, study_dir: &Path) -> Result<TaskSet> {
    let config = study.tasks.synthetic_config().expect("a synthetic source has a config");
    let data = study_dir.join("data");
    let repo = data.join("repo.git");
    fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    // Half-written repositories of killed processes (and our own, from an earlier call).
    // Concurrent runners of the study (Slurm array tasks) generate beside us right now, so
    // only copies older than any generation takes are theirs to lose.
    let fresh = data.join(format!("repo.git.tmp-{}", publish::unique_tag()));
    const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(600);
    for entry in fs::read_dir(&data).with_context(|| format!("listing {}", data.display()))? {
        let path = entry.with_context(|| format!("listing {}", data.display()))?.path();
        let abandoned = path == fresh
            || fs::metadata(&path)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > ABANDONED_AFTER));
        if abandoned && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("repo.git.tmp-")) {
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    let mut source =
        synthetic::generate(&config, &fresh).with_context(|| format!("generating tasks into {}", fresh.display()))?;
    // Published unless an identical repository is in place, which concurrent runners keep
    // reading; commit ids are a function of the whole content (fixed identities and dates).
    let stamp: String = source.commits.iter().map(|c| format!("{}\n", c.id)).collect();
    publish::publish_dir(&fresh, &repo, &stamp)?;
    // Absolute, so the sandbox finds the repository whatever the working directory.
    source.repo_path = repo.canonicalize().with_context(|| format!("resolving {}", repo.display()))?;
    TaskSet::from_synthetic(&source, AUX_MIN_WEIGHT).context("building the task set")
}

fn swebench_tasks(path: &Path) -> Result<Vec<Task>> {
    let file = File::open(path).with_context(|| format!("opening the SWE-bench file {}", path.display()))?;
    let loaded = load_swebench(BufReader::new(file)).with_context(|| format!("reading {}", path.display()))?;
    if !loaded.errors.is_empty() {
        let lines: Vec<String> = loaded.errors.iter().map(|e| format!("{}:{e}", path.display())).collect();
        bail!("{} bad SWE-bench instance(s):\n  {}", lines.len(), lines.join("\n  "));
    }
    if loaded.records.is_empty() {
        bail!("{} holds no SWE-bench instance", path.display());
    }
    Ok(loaded.records.into_iter().map(|(_, t)| t).collect())
}

/// Every repository the instances name must have its bare clone in `repos`.
fn check_mirrors(tasks: &[Task], repos: &Path, jsonl: &Path) -> Result<()> {
    if !repos.is_dir() {
        bail!(
            "the `repos` directory {} (bare clones `owner__name.git` for {}) does not exist",
            repos.display(),
            jsonl.display()
        );
    }
    // repository name → (mirror name, tasks naming it)
    let mut wanted: BTreeMap<&str, (String, usize)> = BTreeMap::new();
    for task in tasks {
        let RepoRef::Name(name) = &task.repo else { continue };
        let mirror = mirror_name(name).with_context(|| format!("task `{}`: repository `{name}`", task.id))?;
        wanted.entry(name).or_insert((mirror, 0)).1 += 1;
    }
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(_, (mirror, _))| !repos.join(format!("{mirror}.git")).is_dir())
        .map(|(name, (mirror, n))| {
            format!(
                "`{name}` ({n} task(s)): no {}; make it with `git clone --bare https://github.com/{name} {}`",
                repos.join(format!("{mirror}.git")).display(),
                repos.join(format!("{mirror}.git")).display()
            )
        })
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} repositor(ies) of {} are missing from {}:\n  {}",
            missing.len(),
            jsonl.display(),
            repos.display(),
            missing.join("\n  ")
        );
    }
    Ok(())
}

fn commit_tasks(repo: &Path, rev: &str, max_tasks: Option<usize>) -> Result<Vec<Task>> {
    let options =
        CommitOptions { rev: rev.to_owned(), max_tasks: max_tasks.unwrap_or(usize::MAX), ..CommitOptions::default() };
    let tasks = mine_commits(repo, &options).with_context(|| format!("mining tasks from {}", repo.display()))?;
    if tasks.is_empty() {
        bail!(
            "no commit of {} from `{rev}` qualifies as a task (one parent, a message of at least {} words, \
             1 to {} changed source files that existed before)",
            repo.display(),
            options.min_message_words,
            options.max_files
        );
    }
    Ok(tasks)
}

/// Opens every task's repository in the store and resolves its commit;
/// returns where each repository's clone is.
fn check_commits(tasks: &TaskSet, store: &RepoStore) -> Result<BTreeMap<String, PathBuf>> {
    let mut dirs = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for task in &tasks.tasks {
        if !seen.insert((task.repo.as_str(), task.commit.as_str())) {
            continue;
        }
        let repo = store
            .repo(&task.repo)
            .with_context(|| format!("task `{}`: opening repository `{}`", task.id, task.repo))?;
        dirs.entry(task.repo.clone()).or_insert_with(|| repo.path().to_owned());
        repo.resolve(&task.commit).with_context(|| {
            format!(
                "task `{}`: commit {} is not in {} (a clone made before the repository gained it? remove the clone to refresh it)",
                task.id,
                task.commit,
                repo.path().display()
            )
        })?;
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use rewardlab_framework::study::parse_study;

    use super::*;

    /// A two-variant proxy study on a small synthetic source.
    fn study(dir: &Path) -> Study {
        let text = "seeds = 1\n[tasks]\nsource = \"synthetic\"\nseed = 1\nfiles = 40\ncommits = 2\ntasks = 12\n\
             [policy]\nkind = \"proxy\"\n[training]\ntotal_steps = 1\nprompts_per_step = 2\ngroup_size = 2\n\
             eval_every = 0\n[[variants]]\nname = \"fb\"\nreward = 'Fb(file)'\n\
             [[variants]]\nname = \"recall\"\nreward = 'R(file)'\n";
        parse_study(&dir.join("t.toml"), text, &|p: &Path| fs::read_to_string(p)).expect("a valid study")
    }

    #[test]
    fn the_synthetic_repository_is_regenerated_over_a_broken_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = study(dir.path());
        let first = prepare(&s, dir.path()).expect("tasks").tasks;
        // What a run killed while writing the repository might leave.
        let repo = dir.path().join("data/repo.git");
        fs::remove_dir_all(&repo).expect("remove");
        fs::create_dir_all(repo.join("objects")).expect("mkdir");
        fs::write(repo.join("HEAD"), "garbage").expect("write");
        let again = prepare(&s, dir.path()).expect("tasks over a broken repository");
        assert_eq!(again.tasks, first);
        assert_eq!(again.tasks.tasks.len(), 12);
        // Every task's commit resolves in the regenerated repository.
        for t in &again.tasks.tasks {
            again.store.repo(&t.repo).and_then(|r| r.resolve(&t.commit)).expect("resolves");
        }
    }

    #[test]
    fn local_store_names_are_valid_store_names() {
        for (dir, name) in [
            ("/home/me/widgets", "local__widgets"),
            ("/srv/mirrors/widgets.git", "local__widgets"),
            ("/tmp/.tmpAbc/.hidden repo", "local__hidden-repo"),
            ("/", "local__repo"),
        ] {
            let got = local_store_name(Path::new(dir));
            assert_eq!(got, name, "{dir}");
            assert_eq!(mirror_name(&got).expect("valid"), got, "{dir}");
        }
    }
}
