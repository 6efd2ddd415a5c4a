//! Task selection: for each task a base commit, a function with a `raise`
//! at that commit, the patch (the function and sometimes its callers), the
//! auxiliary files a solver reads with their CATM-like weights, and the issue.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use super::catm::{self, MIN_WEIGHT, Read};
use super::code::ModuleKind;
use super::files::FileSet;
use super::issue::{self, IssueInput};
use super::project::Project;
use super::{AuxFile, AuxRole, Difficulty, Targets, Task};

/// The project and its files at one commit.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub project: Project,
    pub files: FileSet,
    pub id: String,
}

/// Makes `count` tasks over `snapshots`.
pub(crate) fn make_tasks(rng: &mut ChaCha8Rng, snapshots: &[Snapshot], count: usize) -> Vec<Task> {
    let mut tasks = Vec::new();
    let mut reads = Vec::new();
    let mut used: BTreeSet<(String, String)> = BTreeSet::new();
    let mut attempts = 0;
    while tasks.len() < count && attempts < count * 20 {
        attempts += 1;
        let base = rng.random_range(0..snapshots.len());
        if let Some((task, task_reads)) = make_task(rng, snapshots, base, tasks.len(), &mut used) {
            reads.extend(task_reads);
            tasks.push(task);
        }
    }
    let weights = catm::weights(&reads);
    let mut per_task: BTreeMap<usize, BTreeMap<String, (AuxRole, f64)>> = BTreeMap::new();
    for (read, weight) in reads.iter().zip(weights) {
        if weight < MIN_WEIGHT {
            continue;
        }
        let entry = per_task.entry(read.task).or_default().entry(read.path.clone()).or_insert((read.role, weight));
        if weight > entry.1 {
            *entry = (read.role, weight);
        }
    }
    for (index, task) in tasks.iter_mut().enumerate() {
        let patch: BTreeSet<&String> = task.targets.files.iter().collect();
        if let Some(files) = per_task.remove(&index) {
            task.aux = files
                .into_iter()
                .filter(|(path, _)| !patch.contains(path))
                .map(|(path, (role, weight))| AuxFile { path, role, weight })
                .collect();
        }
    }
    tasks
}

/// One task at commit `base`, or None when no unused function fits.
fn make_task(
    rng: &mut ChaCha8Rng,
    snapshots: &[Snapshot],
    base: usize,
    number: usize,
    used: &mut BTreeSet<(String, String)>,
) -> Option<(Task, Vec<Read>)> {
    let snapshot = &snapshots[base];
    let project = &snapshot.project;
    let candidates: Vec<(usize, String)> = project
        .modules
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m.kind, ModuleKind::Component | ModuleKind::Base))
        .flat_map(|(i, m)| m.qualified_functions().filter(|(_, f)| !f.raises.is_empty()).map(move |(q, _)| (i, q)))
        .filter(|(i, q)| !used.contains(&(project.modules[*i].path.clone(), q.clone())))
        .collect();
    // Multi-file patches need callers to patch along with the callee.
    let patch_size = match rng.random_range(0..100) {
        0..60 => 1,
        60..90 => 2,
        _ => 3,
    };
    let mut caller_modules: BTreeMap<(usize, &str), BTreeSet<usize>> = BTreeMap::new();
    for (index, caller) in project.modules.iter().enumerate() {
        for (_, f) in caller.qualified_functions() {
            for callee in f.calls.iter().filter(|c| c.module != index) {
                caller_modules.entry((callee.module, callee.qualname.as_str())).or_default().insert(index);
            }
        }
    }
    let fits: Vec<&(usize, String)> = candidates
        .iter()
        .filter(|(m, q)| caller_modules.get(&(*m, q.as_str())).map_or(0, BTreeSet::len) + 1 >= patch_size)
        .collect();
    let (module, qualname) = match fits.choose(rng) {
        Some(&fit) => fit.clone(),
        None => candidates.choose(rng)?.clone(),
    };
    used.insert((project.modules[module].path.clone(), qualname.clone()));
    let function = project.modules[module].function(&qualname)?;
    let raise = function.raises.choose(rng)?;
    let difficulty = match rng.random_range(0..100) {
        0..45 => Difficulty::Easy,
        45..80 => Difficulty::Medium,
        _ => Difficulty::Hard,
    };

    // Callers, facade first: the reporter reaches the bug through the
    // package's public entry point when it can.
    let mut callers = project.callers(module, &qualname);
    callers.sort_by_key(|(m, _)| (project.modules[*m].kind != ModuleKind::Facade, *m));
    let mut caller_modules = BTreeSet::new();
    callers.retain(|(m, _)| caller_modules.insert(*m));
    let entry = callers.first().cloned();
    let patch_size = patch_size.min(1 + callers.len());
    let mut patch = vec![(module, qualname.clone())];
    // Callers other than the facade make realistic second patch files (the
    // call site must change with the callee).
    let mut extra: Vec<&(usize, String)> =
        callers.iter().filter(|(m, _)| project.modules[*m].kind != ModuleKind::Facade).collect();
    extra.extend(callers.iter().filter(|(m, _)| project.modules[*m].kind == ModuleKind::Facade));
    patch.extend(extra.into_iter().take(patch_size - 1).cloned());

    let mut targets = Targets::default();
    for (m, q) in &patch {
        let path = &project.modules[*m].path;
        let span = snapshot.files.spans.get(path)?.iter().find(|s| &s.qualname == q)?;
        if !targets.files.contains(path) {
            targets.files.push(path.clone());
        }
        targets.line_ranges.push(format!("{path}:{}-{}", span.start, span.end));
        targets.functions.push(format!("{path}::{q}"));
    }

    // What a solver reads besides the patch.
    let patch_modules: BTreeSet<usize> = patch.iter().map(|(m, _)| *m).collect();
    let mut reads = Vec::new();
    let mut read = |rng: &mut ChaCha8Rng, path: &str, role: AuxRole| {
        reads.push(Read { task: number, path: path.to_string(), role, length: catm::simulated_length(rng, role) });
    };
    for m in &patch_modules {
        if let Some(test) = project.test_of(*m) {
            read(rng, &test.path, AuxRole::Test);
        }
    }
    // The first caller (the entry point) is always read, a second one sometimes.
    for (n, (m, _)) in callers.iter().filter(|(m, _)| !patch_modules.contains(m)).take(2).enumerate() {
        if n == 0 || rng.random_bool(0.3) {
            read(rng, &project.modules[*m].path, AuxRole::Caller);
        }
    }
    let class = qualname.split_once('.').map(|(c, _)| c);
    if let Some((base_module, _)) = class
        .and_then(|c| project.modules[module].classes.iter().find(|k| k.name == c))
        .and_then(|k| k.project_base.clone())
    {
        read(rng, &project.modules[base_module].path, AuxRole::BaseClass);
    }
    // A solver follows at most one callee, and not always.
    for callee in function.calls.iter().filter(|c| !patch_modules.contains(&c.module)).take(1) {
        if rng.random_bool(0.6) {
            read(rng, &project.modules[callee.module].path, AuxRole::Collaborator);
        }
    }
    let relevant: BTreeSet<usize> = patch_modules
        .iter()
        .copied()
        .chain(callers.iter().map(|(m, _)| *m))
        .chain(function.calls.iter().map(|c| c.module))
        .collect();
    let siblings: Vec<usize> = project
        .modules
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            m.domain == project.modules[module].domain && !relevant.contains(i) && m.kind == ModuleKind::Component
        })
        .map(|(i, _)| i)
        .collect();
    // Sometimes a glance at a sibling module that turns out not to matter;
    // weighting drops most of these, as CATM's judge drops most misreads.
    if rng.random_bool(0.7)
        && let Some(&sibling) = siblings.choose(rng)
    {
        read(rng, &project.modules[sibling].path, AuxRole::Noise);
    }

    let domain = project.modules[module].domain;
    let others: Vec<usize> = (0..project.packages.len()).filter(|&p| project.packages[p].domain != domain).collect();
    let distractor_package = others.choose(rng).copied().unwrap_or(0);
    let sibling = siblings.choose(rng).copied();
    let issue = issue::write(
        rng,
        &IssueInput {
            project,
            files: &snapshot.files,
            module,
            qualname: &qualname,
            raise,
            entry,
            distractor_package,
            sibling,
            difficulty,
        },
    );
    let task = Task {
        id: format!("synthetic__{}-{}", project.name, number + 1),
        base_commit: snapshot.id.clone(),
        base_index: base,
        prompt: issue.text,
        targets,
        aux: Vec::new(),
        difficulty,
        quoted: issue.quoted,
    };
    Some((task, reads))
}
