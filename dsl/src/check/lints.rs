//! The lints: warnings about formulas that check but are likely mistakes.
//!
//! - `reward-layer-scaling`: the reward multiplied or divided by a factor that
//!   depends on an efficiency or length feature (it moves every advantage of
//!   the group, not only the rollout's own);
//! - `denominator-contains-zero`, `sqrt-domain`, `log-domain`: operations whose
//!   argument's interval reaches outside their domain;
//! - `overflow`: an operation on bounded inputs whose range reaches ±inf;
//! - `cancels-under-centering`: an additive term of `reward` that is constant
//!   within a group while the advantage estimator ignores per-group constants;
//! - `idle-outranks`: a rollout that did nothing (as the schema defines it)
//!   can get a higher advantage than a sibling with positive quality
//!   (module `idle`, which says exactly what it shows);
//! - `unused-let`, `unused-param`: a `let` or `param` that nothing reads
//!   (a study overriding an unused param would change nothing).
//!
//! Messages and help speak of roles and of the formula at hand; the schema
//! may replace a case's help and append notes ([`crate::schema::LintText`]),
//! which is how a caller cites the rewards that used a pattern before.

use std::collections::HashSet;

use super::Checked;
use super::lower::{TExpr, TKind};
use crate::ast::{BinOp, UnOp};
use crate::diag::Diagnostic;
use crate::hir::{DefKind, Func, Layer, Program};
use crate::schema::{LintCase, Role};
use crate::span::Span;

/// Every lint, in source order of their spans.
pub(crate) fn run(checked: &Checked<'_, '_>, program: &Program) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Some(reward) = checked.scope.reward {
        let mut scaling = Scaling { checked, visited: HashSet::new(), out: Vec::new() };
        scaling.scan(&checked.bodies[reward], true);
        out.extend(scaling.out);
        out.extend(cancels_under_centering(checked, program, reward));
    }
    for (slot, body) in checked.bodies.iter().enumerate() {
        // The default estimator's spans are the `reward` line's; it cannot warn.
        if checked.scope.slots[slot].explicit {
            domains(checked, body, &mut out);
        }
    }
    for c in &checked.checks {
        domains(checked, c, &mut out);
    }
    out.extend(super::idle::idle_outranks(checked, program));
    out.extend(unused_lets(checked));
    out.extend(unused_params(checked));
    // A let reached along two paths is scanned once, but a span must never be reported twice.
    let mut seen = HashSet::new();
    out.retain(|d| seen.insert((d.code, d.span)));
    out
}

/// Finishes a lint warning: the schema's help for `case` if it has one, else
/// `help`, then the schema's notes.
pub(super) fn advised(checked: &Checked<'_, '_>, case: LintCase, diag: Diagnostic, help: String) -> Diagnostic {
    let text = checked.scope.schema.lint_text(case);
    let help = text.and_then(|t| t.help.clone()).unwrap_or(help);
    let notes = text.map(|t| t.notes.clone()).unwrap_or_default();
    notes.into_iter().fold(diag.with_help(help), Diagnostic::with_note)
}

/// Whether an expression reads (through definitions) a feature of a role.
fn reads_role(checked: &Checked<'_, '_>, e: &TExpr, roles: &[Role]) -> Option<String> {
    match &e.kind {
        TKind::Feature(id) => {
            let decl = checked.decl(*id)?;
            roles.contains(&decl.role).then(|| checked.features[*id].key.clone())
        }
        TKind::Def(slot) => reads_role(checked, &checked.bodies[*slot], roles),
        _ => e.children().into_iter().find_map(|c| reads_role(checked, c, roles)),
    }
}

/// Whether an expression has one value for all the rollouts of a group:
/// literals, params, per-group features, reductions, and anything built from them.
pub(crate) fn group_constant(checked: &Checked<'_, '_>, e: &TExpr) -> bool {
    match &e.kind {
        TKind::Number(_) | TKind::Bool(_) | TKind::Param(_) | TKind::Reduce(..) => true,
        TKind::Feature(id) => checked.decl(*id).is_some_and(|d| d.per_group),
        TKind::Def(slot) => group_constant(checked, &checked.bodies[*slot]),
        TKind::Error => false,
        _ => e.children().into_iter().all(|c| group_constant(checked, c)),
    }
}

fn is_reward_let(checked: &Checked<'_, '_>, slot: usize) -> bool {
    checked.scope.slots[slot].kind == DefKind::Let && checked.layers[slot] == Layer::Reward
}

const SCALING_ROLES: [Role; 2] = [Role::Efficiency, Role::Length];

/// Finds efficiency or length factors of products in the reward layer.
struct Scaling<'c, 's, 'a> {
    checked: &'c Checked<'s, 'a>,
    visited: HashSet<usize>,
    out: Vec<Diagnostic>,
}

impl<'c> Scaling<'c, '_, '_> {
    /// `whole`: `e` is the entire reward (possibly through `let`s).
    fn scan(&mut self, e: &'c TExpr, whole: bool) {
        match &e.kind {
            TKind::Binary(BinOp::Mul | BinOp::Div, ..) => {
                let mut factors = Vec::new();
                self.factors(e, false, &mut factors);
                let varying = factors.iter().filter(|(f, _)| !group_constant(self.checked, f)).count();
                for &(f, divisor) in &factors {
                    let others_vary = varying > usize::from(!group_constant(self.checked, f));
                    match reads_role(self.checked, f, &SCALING_ROLES) {
                        Some(feature) if others_vary && !self.is_gate(f) => {
                            self.out.push(self.warning(f.span, &feature, whole, divisor));
                        }
                        _ => self.scan(f, false),
                    }
                }
            }
            TKind::Def(slot) if is_reward_let(self.checked, *slot) => {
                if self.visited.insert(*slot) {
                    self.scan(&self.checked.bodies[*slot], whole);
                }
            }
            _ => {
                for c in e.children() {
                    self.scan(c, false);
                }
            }
        }
    }

    /// Flattens a product (through negations and reward-layer lets) into its
    /// factors, each with whether it divides.
    fn factors(&self, e: &'c TExpr, divisor: bool, out: &mut Vec<(&'c TExpr, bool)>) {
        match &e.kind {
            TKind::Binary(BinOp::Mul, a, b) => {
                self.factors(a, divisor, out);
                self.factors(b, divisor, out);
            }
            TKind::Binary(BinOp::Div, a, b) => {
                self.factors(a, divisor, out);
                self.factors(b, !divisor, out);
            }
            TKind::Unary(UnOp::Neg, a) => self.factors(a, divisor, out),
            TKind::Def(slot)
                if is_reward_let(self.checked, *slot)
                    && matches!(self.checked.bodies[*slot].kind, TKind::Binary(BinOp::Mul | BinOp::Div, ..)) =>
            {
                self.factors(&self.checked.bodies[*slot], divisor, out);
            }
            _ => out.push((e, divisor)),
        }
    }

    /// A bool gate keeps or drops a rollout's reward; it does not rescale it.
    fn is_gate(&self, f: &TExpr) -> bool {
        match &f.kind {
            TKind::Call(Func::Mask, _) => true,
            TKind::Call(Func::If, args) => {
                args[1..].iter().all(|a| reads_role(self.checked, a, &SCALING_ROLES).is_none())
            }
            // `let keep = mask(c > 0)` gates wherever it is used.
            TKind::Def(slot) => self.is_gate(&self.checked.bodies[*slot]),
            _ => false,
        }
    }

    fn warning(&self, span: Span, feature: &str, whole: bool, divisor: bool) -> Diagnostic {
        let role = self
            .checked
            .scope
            .schema
            .decls()
            .iter()
            .find(|d| feature == d.name || feature.starts_with(&format!("{}(", d.name)))
            .map_or("efficiency", |d| if d.role == Role::Length { "length" } else { "efficiency" });
        if whole {
            let verb = if divisor { "divided by" } else { "multiplied by" };
            let diag = Diagnostic::warning(
                "reward-layer-scaling",
                span,
                format!(
                    "`reward` is {verb} a factor of the {role} feature `{feature}`, which varies within a group: \
                     it rescales the group's rewards and distorts GRPO's advantages"
                ),
            );
            let help = format!(
                "apply the discount at the advantage layer instead, e.g. `advantage = adv * ...`; \
                 a bool gate such as `mask({feature} > 0)` is fine in `reward`"
            );
            advised(self.checked, LintCase::RewardScaled, diag, help)
        } else {
            let verb = if divisor { "divided by" } else { "scaled by" };
            let diag = Diagnostic::warning(
                "reward-layer-scaling",
                span,
                format!(
                    "a term of `reward` is {verb} the {role} feature `{feature}`, which varies within a group: \
                     that term, and so the group's advantages, move with {role}, not only with task success"
                ),
            );
            let help = format!(
                "if a bonus for {role} is intended, this records that choice; \
                 if it should only discount the update, scale at the advantage layer: `advantage = adv * ...`"
            );
            advised(self.checked, LintCase::TermScaled, diag, help)
        }
    }
}

/// Division by a range containing 0, `sqrt` of a possibly negative value,
/// `log` of a possibly non-positive one.
fn domains(checked: &Checked<'_, '_>, e: &TExpr, out: &mut Vec<Diagnostic>) {
    match &e.kind {
        TKind::Binary(BinOp::Div, _, d) => {
            let iv = checked.interval(d);
            if iv.contains(0.0) {
                let diag = Diagnostic::warning(
                    "denominator-contains-zero",
                    d.span,
                    format!("this denominator may be 0: its range is {iv}"),
                );
                let help = "keep it away from 0, e.g. `max(x, 1)` or `x + 1e-4`".to_string();
                out.push(advised(checked, LintCase::DenominatorZero, diag, help));
            }
        }
        TKind::Call(Func::Sqrt, args) => {
            let iv = checked.interval(&args[0]);
            if iv.lo < 0.0 {
                let diag = Diagnostic::warning(
                    "sqrt-domain",
                    args[0].span,
                    format!("`sqrt` of a value that may be negative: its range is {iv}"),
                );
                let help = "`sqrt` of a negative number is NaN; clamp it, e.g. `sqrt(max(x, 0))`".to_string();
                out.push(advised(checked, LintCase::SqrtDomain, diag, help));
            }
        }
        TKind::Call(Func::Log, args) => {
            let iv = checked.interval(&args[0]);
            if iv.lo <= 0.0 {
                let diag = Diagnostic::warning(
                    "log-domain",
                    args[0].span,
                    format!("`log` of a value that may be 0 or negative: its range is {iv}"),
                );
                let help = "`log(0)` is -inf and `log` of a negative number is NaN; shift it, e.g. `log(x + 1e-6)`"
                    .to_string();
                out.push(advised(checked, LintCase::LogDomain, diag, help));
            }
        }
        TKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Pow, ..) | TKind::Call(Func::Exp, _) => {
            overflow(checked, e, out);
        }
        _ => {}
    }
    for c in e.children() {
        domains(checked, c, out);
    }
}

/// An operation whose inputs are bounded but whose range reaches ±inf: the
/// f64 result overflows (`exp(1000 * x)`). Poles are the division and
/// domain lints' business, so a power of a base that may be 0 with an
/// exponent that may be negative is left to them.
fn overflow(checked: &Checked<'_, '_>, e: &TExpr, out: &mut Vec<Diagnostic>) {
    let bounded = |iv: crate::interval::Interval| iv.lo.is_finite() && iv.hi.is_finite();
    let iv = checked.interval(e);
    if bounded(iv) {
        return;
    }
    let children = e.children();
    let inputs: Vec<_> = children.iter().map(|c| checked.interval(c)).collect();
    if !inputs.iter().all(|&i| bounded(i)) {
        return;
    }
    if let (TKind::Binary(BinOp::Pow, ..), [base, exponent]) = (&e.kind, inputs.as_slice())
        && base.contains(0.0)
        && exponent.lo < 0.0
    {
        return;
    }
    let diag = Diagnostic::warning(
        "overflow",
        e.span,
        format!("this value may overflow to infinity: its range is {iv} although its inputs are bounded"),
    );
    let help = "an f64 overflows past about 1.8e308 (`exp` past 709); scale the argument down or clip it, \
                e.g. `exp(min(x, 50))`"
        .to_string();
    out.push(advised(checked, LintCase::Overflow, diag, help));
}

/// The additive terms of an expression (through negation and reward-layer lets).
fn terms<'c>(checked: &'c Checked<'_, '_>, e: &'c TExpr, out: &mut Vec<&'c TExpr>) {
    match &e.kind {
        TKind::Binary(BinOp::Add | BinOp::Sub, a, b) => {
            terms(checked, a, out);
            terms(checked, b, out);
        }
        TKind::Unary(UnOp::Neg, a) => terms(checked, a, out),
        TKind::Def(slot) if is_reward_let(checked, *slot) => terms(checked, &checked.bodies[*slot], out),
        _ => out.push(e),
    }
}

fn cancels_under_centering(checked: &Checked<'_, '_>, program: &Program, reward: usize) -> Vec<Diagnostic> {
    let mut all = Vec::new();
    terms(checked, &checked.bodies[reward], &mut all);
    let constant: Vec<&TExpr> = all.iter().copied().filter(|t| group_constant(checked, t)).collect();
    if constant.is_empty() || !super::verify::shift_invariant(program, checked.scope.schema, checked.options.group_size)
    {
        return Vec::new();
    }
    if constant.len() == all.len() {
        let span = checked.bodies[reward].span;
        let diag = Diagnostic::warning(
            "cancels-under-centering",
            span,
            "`reward` is constant within every group, so group centering removes it: every advantage is 0",
        );
        let help =
            format!("make the reward depend on the rollout, e.g. on `{}`", checked.scope.schema.example_feature());
        return vec![advised(checked, LintCase::ConstantReward, diag, help)];
    }
    constant
        .into_iter()
        .map(|t| {
            let diag = Diagnostic::warning(
                "cancels-under-centering",
                t.span,
                "this term is constant within a group, so it cancels under group centering: it changes no advantage",
            );
            let help = "the advantage estimator ignores any per-group constant added to `reward`; drop the term";
            advised(checked, LintCase::ConstantTerm, diag, help.to_string())
        })
        .collect()
}

fn unused_lets(checked: &Checked<'_, '_>) -> Vec<Diagnostic> {
    let mut used = vec![false; checked.bodies.len()];
    for deps in checked.deps.iter().chain(&checked.check_deps) {
        for &(s, _) in deps {
            used[s] = true;
        }
    }
    checked
        .scope
        .slots
        .iter()
        .enumerate()
        .filter(|(s, slot)| slot.kind == DefKind::Let && !used[*s])
        .map(|(_, slot)| {
            let diag = Diagnostic::warning("unused-let", slot.name_span, format!("`{}` is never used", slot.name));
            advised(checked, LintCase::UnusedLet, diag, "use it in a definition or a `check`, or remove it".to_string())
        })
        .collect()
}

fn unused_params(checked: &Checked<'_, '_>) -> Vec<Diagnostic> {
    fn mark(e: &TExpr, used: &mut [bool]) {
        if let TKind::Param(id) = e.kind {
            used[id] = true;
        }
        for c in e.children() {
            mark(c, used);
        }
    }
    let mut used = vec![false; checked.scope.params.len()];
    for e in checked.bodies.iter().chain(&checked.checks) {
        mark(e, &mut used);
    }
    checked
        .scope
        .params
        .iter()
        .zip(used)
        .filter(|(_, used)| !used)
        .map(|(p, _)| {
            let diag = Diagnostic::warning("unused-param", p.span, format!("the param `{}` is never used", p.name));
            let help = "a study that overrides it would change nothing; use it or remove it";
            advised(checked, LintCase::UnusedParam, diag, help.to_string())
        })
        .collect()
}
