//! Function bodies: a handful of shapes real Python functions take (guard
//! and compute, lookup, collect, delegate, update state), filled with domain
//! words, with unique error and log message literals.

use std::collections::BTreeSet;

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use super::code::{Callee, Function, Raise};
use super::vocab::{self, DOMAINS, MESSAGE_ADJECTIVES, STATES};

/// Message literals already used anywhere in the repository; a literal is
/// used once so that searching for a quoted message finds its one origin.
#[derive(Debug, Default)]
pub(crate) struct Literals {
    used: BTreeSet<String>,
}

impl Literals {
    /// Claims `literal`; false when it was taken.
    pub(crate) fn claim(&mut self, literal: &str) -> bool {
        self.used.insert(literal.to_string())
    }
}

/// A project function that a body may call.
#[derive(Clone, Debug)]
pub(crate) struct CallTarget {
    /// The expression before the call's parentheses (`self._store.flush_entry`).
    pub expr: String,
    pub callee: Callee,
    /// Number of positional arguments it takes.
    pub arity: usize,
}

/// What a body may refer to.
#[derive(Debug)]
pub(crate) struct BodyContext<'a> {
    pub domain: usize,
    pub is_method: bool,
    /// Exception classes in scope besides the builtins.
    pub package_errors: &'a [String],
    /// Project functions in scope.
    pub call_targets: &'a [CallTarget],
    /// A config key read through `get_setting`, when settings are imported.
    pub setting: Option<&'a str>,
    /// `self.<attr>` dictionaries the class holds.
    pub state_attr: &'a str,
}

/// Picks an element of a non-empty slice.
pub(crate) fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    items.choose(rng).expect("vocabulary lists are never empty")
}

/// Makes a function named `name` with `params`, choosing a body shape.
/// `want_raise` forces a guard with a message literal.
pub(crate) fn function(
    rng: &mut ChaCha8Rng,
    literals: &mut Literals,
    ctx: &BodyContext<'_>,
    name: &str,
    params: Vec<String>,
    want_raise: bool,
) -> Function {
    let domain = &DOMAINS[ctx.domain];
    let subject = params.first().cloned().unwrap_or_else(|| pick(rng, domain.nouns).to_string());
    let mut body = Vec::new();
    let mut raises = Vec::new();
    let mut calls = Vec::new();
    let mut log_message = None;

    if want_raise {
        let raise = make_raise(rng, literals, ctx, &subject);
        let (condition, exception_line) = guard(rng, ctx.is_method, &subject, &raise);
        body.push(format!("if {condition}:"));
        body.push(format!("    {exception_line}"));
        raises.push(raise);
    }
    if let (Some(key), true) = (ctx.setting, rng.random_bool(0.3)) {
        body.push(format!("limit = get_setting({key:?})"));
    }
    let shape = rng.random_range(0..5);
    match shape {
        0 => {
            // Compute and log.
            let var =
                format!("{}_{}", subject_word(&subject), pick(rng, &["total", "delay", "size", "count", "score"]));
            body.push(format!("{var} = {}", expression(rng, &params)));
            let message = log_literal(rng, literals, ctx.domain, &subject);
            body.push(format!("logger.debug(\"{message} %s\", {var})"));
            log_message = Some(message);
            body.push(format!("return {var}"));
        }
        1 if ctx.is_method => {
            // Lookup in the instance's state.
            body.push("try:".to_string());
            body.push(format!("    found = self.{}[{subject}]", ctx.state_attr));
            body.push("except KeyError:".to_string());
            if raises.is_empty() && rng.random_bool(0.6) {
                let raise = make_raise(rng, literals, ctx, &subject);
                body.push(format!("    raise {}(f\"{}: {{{subject}!r}}\") from None", raise.exception, raise.literal));
                raises.push(raise);
            } else {
                body.push("    return None".to_string());
            }
            body.push("return found".to_string());
        }
        2 => {
            // Collect over items.
            let item = format!("{}_item", subject_word(&subject));
            body.push("results = []".to_string());
            body.push(format!("for {item} in {subject} or ():"));
            body.push(format!("    if not {item}:"));
            body.push("        continue".to_string());
            match ctx.call_targets.choose(rng) {
                Some(target) => {
                    body.push(format!("    results.append({}({}))", target.expr, args(target.arity, &item)));
                    calls.push(target.callee.clone());
                }
                None => body.push(format!("    results.append(str({item}).strip())")),
            }
            body.push("return results".to_string());
        }
        3 if !ctx.call_targets.is_empty() => {
            // Delegate to a collaborator.
            let target = pick(rng, ctx.call_targets);
            body.push(format!("outcome = {}({})", target.expr, args(target.arity, &subject)));
            calls.push(target.callee.clone());
            body.push("if outcome is None:".to_string());
            let message = log_literal(rng, literals, ctx.domain, &subject);
            body.push(format!("    logger.warning(\"{message} %r\", {subject})"));
            log_message = Some(message);
            body.push("    return None".to_string());
            body.push("return outcome".to_string());
        }
        _ if ctx.is_method => {
            // Update state under the lock.
            body.push("with self._lock:".to_string());
            body.push(format!("    self.{}[{subject}] = {}", ctx.state_attr, expression(rng, &params)));
            body.push("    self._revision += 1".to_string());
            body.push(format!("return self.{}[{subject}]", ctx.state_attr));
        }
        _ => {
            body.push(format!("value = {}", expression(rng, &params)));
            body.push("return value".to_string());
        }
    }
    let doc = docstring(rng, ctx.domain, name, &subject, raises.first());
    Function { name: name.to_string(), params, doc, body, raises, calls, log_message }
}

/// A guard statement inserted at the top of an existing body by a later
/// commit ("validate the argument"), with its raise.
pub(crate) fn guard_lines(
    rng: &mut ChaCha8Rng,
    literals: &mut Literals,
    ctx: &BodyContext<'_>,
    subject: &str,
) -> (Vec<String>, Raise) {
    let raise = make_raise(rng, literals, ctx, subject);
    let (condition, exception_line) = guard(rng, ctx.is_method, subject, &raise);
    (vec![format!("if {condition}:"), format!("    {exception_line}")], raise)
}

/// A log line inserted by a later commit.
pub(crate) fn log_line(
    rng: &mut ChaCha8Rng,
    literals: &mut Literals,
    domain: usize,
    subject: &str,
) -> (String, String) {
    let message = log_literal(rng, literals, domain, subject);
    (format!("logger.debug(\"{message} %r\", {subject})"), message)
}

/// The word a parameter is about (`budget` for `budget=None`).
pub(crate) fn subject_word(param: &str) -> &str {
    param.split('=').next().unwrap_or(param).trim()
}

/// Makes a raise whose literal is new to the repository.
fn make_raise(rng: &mut ChaCha8Rng, literals: &mut Literals, ctx: &BodyContext<'_>, subject: &str) -> Raise {
    let domain = &DOMAINS[ctx.domain];
    let subject = subject_word(subject).replace('_', " ");
    let exception = if !ctx.package_errors.is_empty() && rng.random_bool(0.35) {
        pick(rng, ctx.package_errors).clone()
    } else {
        pick(rng, &["ValueError", "ValueError", "KeyError", "TypeError", "RuntimeError", "LookupError"]).to_string()
    };
    for attempt in 0..64 {
        let qualifier = pick(rng, domain.nouns);
        let adjective = pick(rng, MESSAGE_ADJECTIVES);
        // The literal is the constant prefix of the message; the suffix is
        // what the f-string adds at run time.
        let (mut literal, suffix) = match rng.random_range(0..4) {
            0 | 1 => (format!("{adjective} {qualifier} {subject}"), Some(example_value(rng, adjective, &subject))),
            2 => {
                let verb = pick(rng, domain.verbs);
                let other = pick(rng, domain.nouns);
                let state = pick(rng, STATES);
                (format!("cannot {verb} {subject} while the {other} is {state}"), None)
            }
            _ => {
                let limit = pick(rng, &["limit", "maximum", "budget", "window", "capacity"]);
                (
                    format!("{qualifier} {subject} exceeds the configured {limit}"),
                    Some((rng.random_range(2..9) * 1024).to_string()),
                )
            }
        };
        // After many collisions widen the space with a second qualifier.
        if attempt > 32 {
            literal = format!("{literal} for {}", pick(rng, domain.nouns));
        }
        if literals.claim(&literal) {
            let example = match suffix {
                Some(suffix) => format!("{literal}: {suffix}"),
                None => literal.clone(),
            };
            return Raise { exception, literal, example };
        }
    }
    // The vocabulary is large enough that 64 attempts never all collide in
    // practice; a numbered literal keeps uniqueness if they do.
    let mut n = 0usize;
    loop {
        let literal = format!("invalid {subject} state {n}");
        if literals.claim(&literal) {
            return Raise { exception, example: literal.clone(), literal };
        }
        n += 1;
    }
}

/// The guard condition and the `raise` line for `raise`.
fn guard(rng: &mut ChaCha8Rng, is_method: bool, subject: &str, raise: &Raise) -> (String, String) {
    let subject = subject_word(subject);
    let condition = if raise.literal.starts_with("cannot") && is_method {
        format!("self._closed or not {subject}")
    } else if raise.literal.starts_with("cannot") {
        format!("getattr({subject}, \"closed\", False)")
    } else if raise.literal.contains("exceeds") {
        format!("len({subject}) > {}", rng.random_range(1..8) * 1024)
    } else if raise.literal.starts_with("negative") {
        format!("{subject} < 0")
    } else {
        match rng.random_range(0..3) {
            0 => format!("{subject} is None"),
            1 => format!("not {subject}"),
            _ => format!("not isinstance({subject}, (str, int))"),
        }
    };
    let line = if raise.literal == raise.example {
        format!("raise {}(\"{}\")", raise.exception, raise.literal)
    } else if raise.literal.contains("exceeds") {
        format!("raise {}(f\"{}: {{len({subject})}}\")", raise.exception, raise.literal)
    } else {
        format!("raise {}(f\"{}: {{{subject}!r}}\")", raise.exception, raise.literal)
    };
    (condition, line)
}

/// A plausible value for the example message.
fn example_value(rng: &mut ChaCha8Rng, adjective: &str, subject: &str) -> String {
    match adjective {
        "negative" => format!("-{}", rng.random_range(1..10)),
        "empty" => "''".to_string(),
        "oversized" => format!("{}", rng.random_range(65..512) * 1024),
        "unknown" | "unsupported" | "missing" => {
            format!("'{}-{}'", subject.split(' ').next().unwrap_or("x"), rng.random_range(1..99))
        }
        _ => pick(rng, &["None", "0", "''", "-1"]).to_string(),
    }
}

/// A log message literal new to the repository.
fn log_literal(rng: &mut ChaCha8Rng, literals: &mut Literals, domain: usize, subject: &str) -> String {
    let domain = &DOMAINS[domain];
    let subject = subject_word(subject).replace('_', " ");
    for _ in 0..64 {
        let noun = pick(rng, domain.nouns);
        let state = pick(rng, STATES);
        let literal = match rng.random_range(0..3) {
            0 => format!("{noun} {subject} {state}"),
            1 => format!("skipping {state} {noun} for {subject}"),
            _ => format!("{} {subject} without {noun}", pick(rng, domain.verbs)),
        };
        if literals.claim(&literal) {
            return literal;
        }
    }
    format!("{subject} handled")
}

/// A docstring: a summary line, and a `Raises` note when the body raises.
fn docstring(rng: &mut ChaCha8Rng, domain: usize, name: &str, subject: &str, raise: Option<&Raise>) -> Vec<String> {
    let words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
    let subject = subject_word(subject);
    let summary = match words.as_slice() {
        [verb, rest @ ..] if !rest.is_empty() => {
            format!("{} the {} for ``{subject}``.", capitalise(&vocab::plural(verb)), rest.join(" "))
        }
        _ => format!("Return the {} for ``{subject}``.", words.join(" ")),
    };
    let mut doc = vec![summary];
    if let Some(raise) = raise {
        doc.push(String::new());
        doc.push(format!(
            "Raises ``{}`` when the {} is not usable by the {}.",
            raise.exception,
            subject.replace('_', " "),
            DOMAINS[domain].title
        ));
    } else if rng.random_bool(0.3) {
        doc.push(String::new());
        doc.push(format!("The result is cached per {}.", pick(rng, DOMAINS[domain].nouns)));
    }
    doc
}

/// An arithmetic-looking expression over the parameters.
fn expression(rng: &mut ChaCha8Rng, params: &[String]) -> String {
    let names: Vec<&str> = params.iter().map(|p| subject_word(p)).collect();
    match names.as_slice() {
        [] => "0".to_string(),
        [one] => format!("len(str({one})) * {}", rng.random_range(2..16)),
        [a, b, ..] => format!("({a} or 0) + ({b} or 0)"),
    }
}

/// Call arguments: the subject, then `None` for the rest.
fn args(arity: usize, subject: &str) -> String {
    let mut out = Vec::new();
    for i in 0..arity {
        out.push(if i == 0 { subject_word(subject).to_string() } else { "None".to_string() });
    }
    out.join(", ")
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
