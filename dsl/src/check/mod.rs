//! The checker: names, types, layering, cycles, intervals, lints, lowering to
//! HIR, and the verification of `check` statements.
//!
//! [`check`] runs, in order: gathering names (`scope`), the reference graph
//! with its layers, cycles and dependency order (`order`), resolution and type
//! checking of every expression (`lower`), and then — only on a file free of
//! errors — interval analysis (`intervals`) and the lints (`lints`), which
//! run on a typed tree that still has spans before it is lowered to
//! [`hir`]. [`verify()`] proves or property-tests the file's
//! `check` statements on a checked program (module `verify`: the case
//! generator in `verify::cases`, the shrinker in `verify::shrink`).
//! "Did you mean" lives in `suggest`.

mod alerts;
mod idle;
pub(crate) mod intervals;
mod lints;
mod lower;
mod order;
mod scope;
mod suggest;
pub(crate) mod verify;

#[cfg(test)]
mod tests;

pub use verify::{CheckOutcome, VerifyError, VerifyOptions, verify};

use crate::ast;
use crate::diag::Diagnostic;
use crate::hir::{self, DefKind, Layer, Program};
use crate::interval::Interval;
use crate::schema::{FeatureSchema, Type};
use crate::span::{SourceFile, Span};
use lower::{Lowerer, TExpr, type_mismatch};
use scope::Scope;

/// Options of checking.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckOptions {
    /// The range of `group.count()`: the group sizes the program will see.
    pub group_size: Interval,
    /// Run the lints (warnings). Errors are always reported.
    pub lints: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions { group_size: Interval::new(2.0, f64::INFINITY), lints: true }
    }
}

/// Checks a parsed file against a schema. The program is `None` when any error was found.
///
/// Diagnostics come sorted by position, errors before warnings at the same place.
pub fn check(file: &ast::File, schema: &FeatureSchema, options: &CheckOptions) -> (Option<Program>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let program = check_into(file, schema, options, &mut diags);
    sort(&mut diags);
    (program, diags)
}

/// Parses and checks a source text. On success, the program with the
/// warnings; otherwise every diagnostic (parse errors, check errors, warnings).
///
/// The program's check texts are taken verbatim from the source.
pub fn compile_source(
    source: &SourceFile,
    schema: &FeatureSchema,
    options: &CheckOptions,
) -> Result<(Program, Vec<Diagnostic>), Vec<Diagnostic>> {
    let (file, mut diags) = crate::parser::parse(source.text());
    let parse_failed = diags.iter().any(Diagnostic::is_error);
    let (program, more) = check(&file, schema, options);
    // A statement the parser could not read may have been the `reward` line:
    // "no `reward`" would then only repeat the parse error.
    diags.extend(more.into_iter().filter(|d| !(parse_failed && d.code == "missing-reward")));
    sort(&mut diags);
    match program {
        Some(mut program) if !parse_failed => {
            for (check, item) in program.checks.iter_mut().zip(file.items.iter().filter_map(check_cond)) {
                if let Some(text) = source.text().get(item.span.range()) {
                    check.text = text.to_string();
                }
            }
            for (alert, item) in program.alerts.iter_mut().zip(file.items.iter().filter_map(alert_cond)) {
                if let Some(text) = source.text().get(item.span.range()) {
                    alert.text = text.to_string();
                }
            }
            Ok((program, diags))
        }
        _ => Err(diags),
    }
}

fn check_cond(item: &ast::Item) -> Option<&ast::Expr> {
    match &item.kind {
        ast::ItemKind::Check { cond } => Some(cond),
        _ => None,
    }
}

fn alert_cond(item: &ast::Item) -> Option<&ast::Expr> {
    match &item.kind {
        ast::ItemKind::Alert { cond, .. } => Some(cond),
        _ => None,
    }
}

fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| a.span.start.cmp(&b.span.start).then(b.severity.cmp(&a.severity)).then(a.code.cmp(b.code)));
}

/// Everything the passes after lowering look at, indexed by slot.
#[derive(Debug)]
pub(crate) struct Checked<'s, 'a> {
    pub scope: &'s Scope<'a>,
    pub options: &'s CheckOptions,
    pub bodies: Vec<TExpr>,
    pub layers: Vec<Layer>,
    /// Direct reads of each slot.
    pub deps: Vec<Vec<(usize, Span)>>,
    pub checks: Vec<TExpr>,
    pub check_deps: Vec<Vec<(usize, Span)>>,
    pub features: Vec<crate::schema::FeatureRef>,
    pub feature_intervals: Vec<Interval>,
    pub param_values: Vec<f64>,
    /// Filled in dependency order.
    pub intervals: Vec<Interval>,
    /// Whether each slot may be NaN, filled with `intervals`.
    pub nans: Vec<bool>,
}

impl Checked<'_, '_> {
    pub fn env(&self) -> intervals::Env<'_> {
        intervals::Env {
            features: &self.feature_intervals,
            params: &self.param_values,
            defs: &self.intervals,
            def_nans: &self.nans,
            group_size: self.options.group_size,
        }
    }

    /// The interval of a subexpression of a slot body or check.
    pub fn interval(&self, e: &TExpr) -> Interval {
        self.range(e).iv
    }

    /// The interval of a subexpression, and whether it may be NaN.
    pub fn range(&self, e: &TExpr) -> intervals::Range {
        intervals::range(&e.to_hir(&|s| s), &self.env())
    }

    pub fn decl(&self, feature: usize) -> Option<&crate::schema::FeatureDecl> {
        self.scope.schema.get(&self.features[feature].name)
    }
}

fn check_into(
    file: &ast::File,
    schema: &FeatureSchema,
    options: &CheckOptions,
    diags: &mut Vec<Diagnostic>,
) -> Option<Program> {
    let scope = Scope::collect(file, schema, diags);
    let n = scope.slots.len();
    let deps: Vec<_> = scope.slots.iter().map(|s| order::references(&s.value, &scope)).collect();
    let layers = order::layers(&scope, &deps);
    // `reward` reading the advantage layer is usually also a cycle (the
    // default `adv` reads `reward`): the layering error explains it better.
    let layering = order::check_layering(&scope, &deps, &layers);
    let skip_cycles_through = if layering.is_some() { scope.reward } else { None };
    let on_cycle = order::cycles(&scope, &deps, skip_cycles_through, diags);
    diags.extend(layering);
    let order = order::dependency_order(&deps);

    let mut lowerer = Lowerer::new(&scope);
    let mut bodies: Vec<Option<TExpr>> = vec![None; n];
    for &slot in &order {
        let body = lowerer.lower(&scope.slots[slot].value);
        let s = &scope.slots[slot];
        let mut ty = if on_cycle[slot] { None } else { body.ty };
        if s.kind != DefKind::Let && ty == Some(Type::Bool) {
            lowerer.diags.push(
                type_mismatch(body.span, Type::Number, &format!("`{}`", s.name)).with_help(format!(
                    "`{}` must be a number; `mask(b)` is 1 where `b` holds and 0 elsewhere",
                    s.name
                )),
            );
            // Reported once here, not again wherever it is read.
            ty = None;
        }
        lowerer.slot_types[slot] = ty;
        bodies[slot] = Some(body);
    }
    let checks = lowerer.lower_conditions(scope.checks.iter().map(|c| &c.cond), "`check`");
    let check_deps: Vec<_> = scope.checks.iter().map(|c| order::references(&c.cond, &scope)).collect();
    lowerer.in_alert = true;
    let alert_conds = lowerer.lower_conditions(scope.alerts.iter().map(|a| &a.cond), "`alert`");
    lowerer.in_alert = false;
    {
        let mut uniform = alerts::Uniform::new(&bodies);
        let names = |slot: usize| scope.slots[slot].name.clone();
        for cond in &alert_conds {
            let found = alerts::check_alert(cond, &mut uniform, &names, &lowerer.features);
            lowerer.diags.extend(found);
        }
    }
    let metrics = std::mem::take(&mut lowerer.metrics);
    let poisoned = lowerer.poisoned;
    let features = std::mem::take(&mut lowerer.features);
    diags.append(&mut lowerer.diags);

    if poisoned || diags.iter().any(Diagnostic::is_error) {
        return None;
    }

    let feature_intervals = features.iter().map(|f| schema.get(&f.name).map_or(Interval::REAL, |d| d.range)).collect();
    let mut checked = Checked {
        scope: &scope,
        options,
        bodies: bodies.into_iter().map(|b| b.expect("every slot is lowered")).collect(),
        layers,
        deps,
        checks,
        check_deps,
        features,
        feature_intervals,
        param_values: scope.params.iter().map(|p| p.value).collect(),
        intervals: vec![Interval::REAL; n],
        nans: vec![true; n],
    };
    for &slot in &order {
        let r = checked.range(&checked.bodies[slot]);
        checked.intervals[slot] = r.iv;
        checked.nans[slot] = r.nan;
    }
    diags.extend(never_finite(&checked, &order));
    for (c, item) in checked.checks.iter().zip(&scope.checks) {
        let iv = checked.interval(c);
        if iv.hi == 0.0 {
            diags.push(
                Diagnostic::error("check-always-false", item.span, "this check can never hold").with_help(
                    "interval analysis over the declared feature ranges shows its condition is always false",
                ),
            );
        }
    }
    if diags.iter().any(Diagnostic::is_error) {
        return None;
    }
    let mut program = build_program(&checked, &order);
    let def_of = def_ids(&order);
    program.metrics = metrics;
    program.alerts = alert_conds
        .iter()
        .zip(&scope.alerts)
        .map(|(c, item)| hir::Alert {
            cond: alerts::to_alert(c, &|s| def_of[s]),
            steps: item.steps,
            message: item.message.clone(),
            span: item.span,
            text: crate::printer::print_expr(&item.cond),
        })
        .collect();
    if options.lints {
        diags.extend(lints::run(&checked, &program));
    }
    Some(program)
}

/// A definition every value of which is NaN or infinite (`reward = sqrt(-1)`)
/// is an error: it would fail every evaluation. Only the root of the fault
/// is reported, not every definition that reads it, and never a default.
fn never_finite(checked: &Checked<'_, '_>, order: &[usize]) -> Vec<Diagnostic> {
    let mut never = vec![false; checked.bodies.len()];
    let none = vec![false; checked.bodies.len()];
    let mut out = Vec::new();
    for &slot in order {
        let body = checked.bodies[slot].to_hir(&|s| s);
        let env = checked.env();
        never[slot] = intervals::never_finite(&body, &env, &never);
        let s = &checked.scope.slots[slot];
        if never[slot] && s.explicit && intervals::never_finite(&body, &env, &none) {
            let what = if s.kind == DefKind::Let { format!("the `let` `{}`", s.name) } else { format!("`{}`", s.name) };
            out.push(
                Diagnostic::error(
                    "never-finite",
                    checked.bodies[slot].span,
                    format!("{what} is never finite: every value it can take is NaN or infinite"),
                )
                .with_help(
                    "interval analysis over the declared feature ranges shows this for every input \
                     (`sqrt` or `log` of a value that is never positive, a division by 0, an overflow); \
                     every evaluation would fail",
                ),
            );
        }
    }
    out
}

/// The `DefId` of each slot, given the dependency order.
fn def_ids(order: &[usize]) -> Vec<usize> {
    let mut def_of = vec![0; order.len()];
    for (id, &slot) in order.iter().enumerate() {
        def_of[slot] = id;
    }
    def_of
}

fn build_program(checked: &Checked<'_, '_>, order: &[usize]) -> Program {
    let scope = checked.scope;
    let def_of = def_ids(order);
    let rename = |s: usize| def_of[s];
    let defs = order
        .iter()
        .map(|&slot| {
            let s = &scope.slots[slot];
            let body = &checked.bodies[slot];
            hir::Def {
                name: s.name.clone(),
                kind: s.kind,
                layer: checked.layers[slot],
                expr: body.to_hir(&rename),
                ty: body.ty.unwrap_or(Type::Number),
                interval: checked.intervals[slot],
                span: s.span,
                explicit: s.explicit,
            }
        })
        .collect();
    let checks = checked
        .checks
        .iter()
        .zip(&scope.checks)
        .map(|(c, item)| hir::Check {
            expr: c.to_hir(&rename),
            span: item.span,
            text: crate::printer::print_expr(&item.cond),
        })
        .collect();
    Program {
        params: scope.params.clone(),
        features: checked.features.clone(),
        defs,
        reward: def_of[scope.reward.expect("a program without errors has a reward")],
        adv: def_of[scope.adv],
        advantage: def_of[scope.advantage],
        checks,
        metrics: Vec::new(),
        alerts: Vec::new(),
    }
}
