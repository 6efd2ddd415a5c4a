//! Later commits: each adds modules, hardens existing functions with new
//! guards (new error messages, shifted line numbers), adds methods, and
//! bumps the version, so tasks at different base commits see different code.

use rand::Rng;
use rand::seq::IndexedRandom;

use super::bodies::{self, BodyContext};
use super::code::ModuleKind;
use super::project::Project;
use super::templates::{self, Gen};
use super::vocab::DOMAINS;

/// Applies one commit's changes to `project` and returns its message.
pub(crate) fn evolve(g: &mut Gen, project: &mut Project, commit: usize, new_components: usize) -> String {
    let mut entries = Vec::new();
    for _ in 0..new_components {
        let package = g.rng.random_range(0..project.packages.len());
        let index = project.add_component(g, package, commit);
        let module = &project.modules[index];
        entries.push(format!("Add `{}` to the {}.", module.dotted, DOMAINS[module.domain].title));
    }
    for _ in 0..g.rng.random_range(2..7) {
        if let Some(entry) = add_guard(g, project, commit) {
            entries.push(entry);
        }
    }
    for _ in 0..g.rng.random_range(1..4) {
        if let Some(entry) = add_log_line(g, project, commit) {
            entries.push(entry);
        }
    }
    for _ in 0..g.rng.random_range(1..3) {
        if let Some(entry) = add_method(g, project, commit) {
            entries.push(entry);
        }
    }
    project.version = format!("0.{}.0", commit + 1);
    project.changelog.push((project.version.clone(), entries.clone()));
    let title = match entries.first() {
        Some(first) => format!("Release {}: {}", project.version, first.trim_end_matches('.')),
        None => format!("Release {}", project.version),
    };
    let mut message = format!("{title}\n\n");
    for entry in &entries {
        message.push_str(&format!("* {entry}\n"));
    }
    message
}

/// Components added before `commit`, as (module, class or None, function) triples.
fn existing_functions(project: &Project, commit: usize) -> Vec<(usize, Option<usize>, usize)> {
    let mut out = Vec::new();
    for (m, module) in project.modules.iter().enumerate() {
        if module.kind != ModuleKind::Component || module.added_at >= commit {
            continue;
        }
        for (c, class) in module.classes.iter().enumerate() {
            for (f, function) in class.methods.iter().enumerate() {
                if !function.name.starts_with('_') && !function.params.is_empty() {
                    out.push((m, Some(c), f));
                }
            }
        }
        for (f, function) in module.functions.iter().enumerate() {
            if !function.params.is_empty() {
                out.push((m, None, f));
            }
        }
    }
    out
}

/// Inserts an argument check with a new error message at the top of a body.
fn add_guard(g: &mut Gen, project: &mut Project, commit: usize) -> Option<String> {
    let &(m, c, f) = existing_functions(project, commit).choose(&mut g.rng)?;
    let errors = project.packages[project.modules[m].domain].errors.clone();
    let module = &mut project.modules[m];
    let domain = module.domain;
    let (owner, function) = match c {
        Some(c) => (Some(module.classes[c].name.clone()), &mut module.classes[c].methods[f]),
        None => (None, &mut module.functions[f]),
    };
    let subject = function.params[0].clone();
    let ctx = BodyContext {
        domain,
        is_method: owner.is_some(),
        package_errors: &errors,
        call_targets: &[],
        setting: None,
        state_attr: "_state",
    };
    let (lines, raise) = bodies::guard_lines(&mut g.rng, &mut g.literals, &ctx, &subject);
    for (offset, line) in lines.into_iter().enumerate() {
        function.body.insert(offset, line);
    }
    function.raises.insert(0, raise);
    let name = owner.map_or_else(|| function.name.clone(), |o| format!("{o}.{}", function.name));
    Some(format!("Validate `{}` in `{name}`.", bodies::subject_word(&subject)))
}

/// Inserts a debug log line at the top of a body.
fn add_log_line(g: &mut Gen, project: &mut Project, commit: usize) -> Option<String> {
    let &(m, c, f) = existing_functions(project, commit).choose(&mut g.rng)?;
    let module = &mut project.modules[m];
    let domain = module.domain;
    let (owner, function) = match c {
        Some(c) => (Some(module.classes[c].name.clone()), &mut module.classes[c].methods[f]),
        None => (None, &mut module.functions[f]),
    };
    let subject = bodies::subject_word(&function.params[0]).to_string();
    let (line, message) = bodies::log_line(&mut g.rng, &mut g.literals, domain, &subject);
    function.body.insert(0, line);
    if function.log_message.is_none() {
        function.log_message = Some(message);
    }
    let name = owner.map_or_else(|| function.name.clone(), |o| format!("{o}.{}", function.name));
    Some(format!("Log {subject} handling in `{name}`."))
}

/// Adds a new public method (with a test case) to an existing class.
fn add_method(g: &mut Gen, project: &mut Project, commit: usize) -> Option<String> {
    let candidates: Vec<(usize, usize)> = project
        .modules
        .iter()
        .enumerate()
        .filter(|(_, m)| m.kind == ModuleKind::Component && m.added_at < commit)
        .flat_map(|(i, m)| (0..m.classes.len()).map(move |c| (i, c)))
        .collect();
    let &(m, c) = candidates.choose(&mut g.rng)?;
    let package = project.packages[project.modules[m].domain].clone();
    let method = templates::new_method(g, &project.modules[m], c, &package);
    let class = &mut project.modules[m].classes[c];
    // Insert among the existing methods (after `__init__`) so the methods
    // below it move down: line ranges differ between base commits.
    let at = g.rng.random_range(1..=class.methods.len().max(1));
    let name = format!("{}.{}", class.name, method.name);
    let raises = !method.raises.is_empty();
    class.methods.insert(at.min(class.methods.len()), method);
    if let Some(test) = project.tests.iter_mut().find(|t| t.module == m) {
        test.cases.push((name.clone(), raises && g.rng.random_bool(0.35)));
    }
    Some(format!("Add `{name}`."))
}
