//! The issue writer: turns a chosen bug (a function and one of its raises)
//! into issue text the way users write them — a setup story, a reproducer,
//! the error or a vague description of it, a guess at the culprit, the
//! environment — with distractors that mislead bag-of-words retrieval.

use std::fmt::Write as _;

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use super::Difficulty;
use super::bodies::pick;
use super::code::Raise;
use super::files::FileSet;
use super::project::Project;
use super::templates::snake;
use super::vocab::{DEPLOYMENTS, DOMAINS, THIRD_PARTY};

/// Everything the writer needs to know about a task.
#[derive(Debug)]
pub(crate) struct IssueInput<'a> {
    pub project: &'a Project,
    pub files: &'a FileSet,
    /// The module and function that must change.
    pub module: usize,
    pub qualname: &'a str,
    pub raise: &'a Raise,
    /// The caller through which the reporter reaches the bug, if any.
    pub entry: Option<(usize, String)>,
    /// Another package the reporter's code uses heavily.
    pub distractor_package: usize,
    /// A lexically similar module in the same package that is not relevant.
    pub sibling: Option<usize>,
    pub difficulty: Difficulty,
}

/// The written issue.
#[derive(Debug)]
pub(crate) struct Issue {
    pub text: String,
    /// Literals that occur verbatim both in the text and in a target file.
    pub quoted: Vec<String>,
}

/// Writes the issue for `input`.
pub(crate) fn write(rng: &mut ChaCha8Rng, input: &IssueInput<'_>) -> Issue {
    let project = input.project;
    let module = &project.modules[input.module];
    let domain = &DOMAINS[module.domain];
    let (class, method) = split_qualname(input.qualname);
    let method_words = method.replace('_', " ");
    let class_words = class.map(camel_words).unwrap_or_else(|| domain.title.to_string());
    let third_party = *pick(rng, THIRD_PARTY);
    let other_third_party = *pick(rng, THIRD_PARTY);
    let distractor = Distractor::new(rng, project, input.distractor_package);
    let mut quoted = Vec::new();
    let mut text = String::new();

    // Title.
    let title = match input.difficulty {
        Difficulty::Easy => {
            format!("`{}` raises {} for {}", input.qualname, input.raise.exception, subject_of(input.raise))
        }
        Difficulty::Medium => format!(
            "{} fails in the {} after upgrading to {}",
            capitalised(&method_words),
            domain.title,
            project.version
        ),
        Difficulty::Hard => format!("{} stops working under load with {third_party}", capitalised(domain.title)),
    };
    let _ = writeln!(text, "# {title}\n");

    // Setup story with the distractor package.
    let _ = writeln!(
        text,
        "We run {} {} in {} together with {third_party}. We also use `{}` from the {}, with `{}` set to a small value.\n",
        project.name,
        project.version,
        pick(rng, DEPLOYMENTS),
        distractor.class,
        distractor.title,
        distractor.key,
    );

    // The problem.
    let entry_name = input.entry.as_ref().map(|(m, q)| (&project.modules[*m], q.as_str()));
    match input.difficulty {
        Difficulty::Easy => {
            let _ = writeln!(
                text,
                "Calling `{}` with an unusual {} raises `{}` instead of handling it. This happens every time \
                 {} is called.\n",
                input.qualname,
                subject_of(input.raise),
                input.raise.exception,
                method_words,
            );
        }
        Difficulty::Medium => {
            let _ = writeln!(
                text,
                "Since the upgrade, the {method_words} step of the {class_words} fails as soon as the {} hands it a {} \
                 it has not seen before. The rest of the pipeline seems fine.\n",
                distractor.title,
                subject_of(input.raise),
            );
        }
        Difficulty::Hard => {
            let _ = writeln!(
                text,
                "Every few hours the {} gives up while the {} is busy with {}. Restarting the worker helps for a while. \
                 I could not find where this comes from.\n",
                domain.title, distractor.title, distractor.noun_plural,
            );
        }
    }

    // Reproducer: always exercises the distractor; reaches the bug through
    // the entry point (or the class itself) except in hard issues.
    if input.difficulty != Difficulty::Hard || rng.random_bool(0.5) {
        text.push_str("Reproducer:\n\n```python\n");
        let _ = writeln!(text, "from {} import {}", distractor.import_path, distractor.class);
        let reach = if input.difficulty == Difficulty::Hard { None } else { Some(reach(project, input, entry_name)) };
        if let Some(reach) = &reach {
            let _ = writeln!(text, "from {} import {}", reach.import_path, reach.class);
        }
        let dvar = snake(&distractor.class);
        let _ = writeln!(text, "\n{dvar} = {}()", distractor.class);
        let _ = writeln!(text, "{dvar}.{}(\"{}-{}\")", distractor.method, distractor.noun, rng.random_range(1..99));
        if let Some(reach) = &reach {
            let _ = writeln!(text, "{} = {}()", snake(&reach.class), reach.class);
            let _ = writeln!(text, "{}.{}(None)  # fails here", snake(&reach.class), reach.method);
        }
        text.push_str("```\n\n");
    }

    // The error.
    match input.difficulty {
        Difficulty::Easy if rng.random_bool(0.5) => {
            text.push_str("Traceback:\n\n```\n");
            text.push_str(&traceback(input, entry_name));
            text.push_str("```\n\n");
            quoted.push(input.raise.literal.clone());
        }
        Difficulty::Easy | Difficulty::Medium => {
            let _ = writeln!(text, "It fails with:\n\n```\n{}: {}\n```\n", input.raise.exception, input.raise.example);
            quoted.push(input.raise.literal.clone());
        }
        Difficulty::Hard => {
            let fragment = fragment(rng, &input.raise.literal);
            let _ = writeln!(
                text,
                "The logs only say something about \"{fragment}\" and then the worker carries on with the next job.\n"
            );
            quoted.push(fragment);
        }
    }

    // A wrong guess pointing at a similar module.
    if let Some(sibling) = input.sibling.map(|s| &project.modules[s])
        && let Some(sibling_class) = sibling.classes.first()
        && rng.random_bool(0.6)
    {
        let _ = writeln!(
            text,
            "I first suspected `{}` in the {} since it also deals with {}, but the problem persists with it disabled.\n",
            sibling_class.name,
            domain.title,
            super::vocab::plural(pick::<&str>(rng, domain.nouns)),
        );
    }

    // Expected behaviour.
    let _ = writeln!(
        text,
        "Expected: the {} should accept the {} or fail with a clear message.\n",
        class_words,
        subject_of(input.raise),
    );
    let _ = writeln!(
        text,
        "Environment:\n\n- {} {}\n- Python 3.{}\n- {third_party} {}.{}\n- {other_third_party} {}.{}",
        project.name,
        project.version,
        rng.random_range(9..13),
        rng.random_range(1..5),
        rng.random_range(0..20),
        rng.random_range(0..3),
        rng.random_range(0..30),
    );
    Issue { text, quoted }
}

/// The distractor package as the reporter uses it.
struct Distractor {
    class: String,
    method: String,
    import_path: String,
    title: &'static str,
    key: String,
    noun: &'static str,
    noun_plural: String,
}

impl Distractor {
    fn new(rng: &mut ChaCha8Rng, project: &Project, package: usize) -> Self {
        let package_info = &project.packages[package];
        let domain = &DOMAINS[package_info.domain];
        let facade = package_info.facade.map(|f| &project.modules[f]);
        let class = facade.and_then(|m| m.classes.first());
        let method = class
            .and_then(|c| {
                c.methods
                    .iter()
                    .filter(|m| !m.name.starts_with('_'))
                    .collect::<Vec<_>>()
                    .choose(rng)
                    .map(|m| m.name.clone())
            })
            .unwrap_or_else(|| format!("{}_{}", pick(rng, domain.verbs), pick(rng, domain.nouns)));
        let noun = *pick(rng, domain.nouns);
        Distractor {
            class: class.map_or_else(|| format!("{}Client", capitalised(domain.package)), |c| c.name.clone()),
            method,
            import_path: package_info.dir.replace('/', "."),
            title: domain.title,
            key: package_info.config_keys.choose(rng).cloned().unwrap_or_else(|| format!("{}.enabled", domain.package)),
            noun,
            noun_plural: super::vocab::plural(noun),
        }
    }
}

/// How the reproducer reaches the buggy function.
struct Reach {
    import_path: String,
    class: String,
    method: String,
}

fn reach(project: &Project, input: &IssueInput<'_>, entry: Option<(&super::code::Module, &str)>) -> Reach {
    let target = &project.modules[input.module];
    let (module, qualname) = entry.unwrap_or((target, input.qualname));
    let (class, method) = split_qualname(qualname);
    match class {
        Some(class) => {
            Reach { import_path: module.dotted.clone(), class: class.to_string(), method: method.to_string() }
        }
        // A module-level function: the reproducer calls it directly through
        // a namespace import, rendered as a class-like call for simplicity.
        None => Reach {
            import_path: module.dotted.rsplit_once('.').map_or(module.dotted.clone(), |(p, _)| p.to_string()),
            class: module.dotted.rsplit('.').next().unwrap_or_default().to_string(),
            method: method.to_string(),
        },
    }
}

/// A traceback through the entry point (if any) into the raise.
fn traceback(input: &IssueInput<'_>, entry: Option<(&super::code::Module, &str)>) -> String {
    let project = input.project;
    let prefix = "/srv/app/.venv/lib/python3.11/site-packages";
    let mut out = String::from(
        "Traceback (most recent call last):\n  File \"/srv/app/worker.py\", line 88, in handle\n    result = run_job(job)\n",
    );
    let (_, method) = split_qualname(input.qualname);
    if let Some((module, qualname)) = entry {
        let (_, entry_method) = split_qualname(qualname);
        let line = find_line(input.files, &module.path, qualname, &format!("{method}(")).unwrap_or((1, String::new()));
        let _ = writeln!(
            out,
            "  File \"{prefix}/{}\", line {}, in {entry_method}\n    {}",
            module.path,
            line.0,
            line.1.trim()
        );
    }
    let target = &project.modules[input.module];
    let raise_line =
        find_line(input.files, &target.path, input.qualname, &input.raise.literal).unwrap_or((1, String::new()));
    let _ = writeln!(
        out,
        "  File \"{prefix}/{}\", line {}, in {method}\n    {}",
        target.path,
        raise_line.0,
        raise_line.1.trim()
    );
    let _ = writeln!(out, "{}: {}", input.raise.exception, input.raise.example);
    out
}

/// The first line of function `qualname` in `path` containing `needle`.
fn find_line(files: &FileSet, path: &str, qualname: &str, needle: &str) -> Option<(usize, String)> {
    let span = files.spans.get(path)?.iter().find(|s| s.qualname == qualname)?;
    let text = files.files.get(path)?;
    text.lines()
        .enumerate()
        .skip(span.start - 1)
        .take(span.end + 1 - span.start)
        .find(|(_, line)| line.contains(needle))
        .map(|(i, line)| (i + 1, line.to_string()))
}

/// Two or three consecutive words of a message literal, avoiding the
/// opening adjective so the fragment reads as a paraphrase, and never
/// starting or ending on a filler word (`while the`).
fn fragment(rng: &mut ChaCha8Rng, literal: &str) -> String {
    const FILLER: &[&str] = &["the", "while", "is", "for", "cannot", "exceeds", "configured"];
    let words: Vec<&str> = literal.split(' ').collect();
    let mut windows = Vec::new();
    for len in [2, 3] {
        for start in 1..words.len().saturating_sub(len - 1) {
            let window = &words[start..start + len];
            if !FILLER.contains(&window[0]) && !FILLER.contains(&window[len - 1]) {
                windows.push(window.join(" "));
            }
        }
    }
    windows.choose(rng).cloned().unwrap_or_else(|| literal.to_string())
}

/// The thing a raise complains about (`budget` in `invalid retry budget`).
fn subject_of(raise: &Raise) -> String {
    let literal = &raise.literal;
    if let Some(rest) = literal.strip_prefix("cannot ") {
        return rest.split(' ').nth(1).unwrap_or("value").to_string();
    }
    if let Some((before, _)) = literal.split_once(" exceeds") {
        return before.rsplit(' ').next().unwrap_or("value").to_string();
    }
    literal.rsplit(' ').next().unwrap_or("value").to_string()
}

fn split_qualname(qualname: &str) -> (Option<&str>, &str) {
    match qualname.split_once('.') {
        Some((class, method)) => (Some(class), method),
        None => (None, qualname),
    }
}

/// `RetryPolicy` → `retry policy`.
fn camel_words(name: &str) -> String {
    snake(name).replace('_', " ")
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
