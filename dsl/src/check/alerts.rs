//! The rules of `alert` conditions beyond types: an alert is evaluated once
//! per batch, so it may read only batch-level values — batch reductions,
//! params, constants, step metrics, and lets built from those. A per-rollout
//! value (a feature, `reward`, a group reduction, a let that reads one)
//! outside a batch reduction is an error with a caret on it, and a step
//! metric inside a reduction is one too (it is one number per batch, not a
//! column). Then the conversion of a checked condition to [`hir::AlertExpr`].

use super::lower::{TExpr, TKind};
use crate::diag::Diagnostic;
use crate::hir::{self, AlertExpr};
use crate::schema::FeatureRef;

/// Whether each slot's value is the same on every row, computed on demand.
pub(crate) struct Uniform<'b> {
    bodies: &'b [Option<TExpr>],
    memo: Vec<Option<bool>>,
}

impl<'b> Uniform<'b> {
    pub fn new(bodies: &'b [Option<TExpr>]) -> Uniform<'b> {
        Uniform { bodies, memo: vec![None; bodies.len()] }
    }

    /// Whether slot `slot` is batch-level. A slot on a cycle (already an
    /// error) is taken as per-row while it is being looked at.
    fn slot(&mut self, slot: usize) -> bool {
        if let Some(known) = self.memo[slot] {
            return known;
        }
        self.memo[slot] = Some(false);
        let bodies = self.bodies;
        let uniform = bodies[slot].as_ref().is_some_and(|b| self.per_row(b).is_none());
        self.memo[slot] = Some(uniform);
        uniform
    }

    /// The first sub-expression of `e` whose value differs from row to row,
    /// outside any batch reduction.
    pub fn per_row<'t>(&mut self, e: &'t TExpr) -> Option<&'t TExpr> {
        match &e.kind {
            TKind::Feature(_) | TKind::Reduce(hir::Scope::Group, ..) => Some(e),
            TKind::Def(slot) => (!self.slot(*slot)).then_some(e),
            TKind::Reduce(hir::Scope::Batch, ..) => None,
            _ => e.children().into_iter().find_map(|c| self.per_row(c)),
        }
    }
}

/// The diagnostics of an alert condition that reads per-rollout values or
/// puts a step metric inside a reduction.
pub(crate) fn check_alert(
    cond: &TExpr,
    uniform: &mut Uniform<'_>,
    slot_names: &dyn Fn(usize) -> String,
    features: &[FeatureRef],
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Some(part) = uniform.per_row(cond) {
        let (what, help) = match &part.kind {
            TKind::Feature(id) => {
                let key = features.get(*id).map_or("this feature", |f| f.key.as_str());
                (
                    format!("`{key}` is a per-rollout value"),
                    format!("reduce it over the batch, e.g. `batch.mean({key})`"),
                )
            }
            TKind::Def(slot) => {
                let name = slot_names(*slot);
                (
                    format!("`{name}` is a per-rollout value"),
                    format!("reduce it over the batch, e.g. `batch.mean({name})` or `batch.min({name})`"),
                )
            }
            TKind::Reduce(_, op, ..) => (
                format!("`group.{}` differs from group to group", op.name()),
                format!("reduce over the whole batch instead: `batch.{}(...)`", op.name()),
            ),
            _ => ("this value differs between rollouts".to_string(), "reduce it over the batch".to_string()),
        };
        out.push(
            Diagnostic::error("alert-per-rollout", part.span, format!("{what}; an alert reads batch-level values"))
                .with_help(help)
                .with_note("an alert is evaluated once per batch, on batch reductions, params and step metrics"),
        );
    }
    metric_in_reduction(cond, false, &mut out);
    out
}

fn metric_in_reduction(e: &TExpr, inside: bool, out: &mut Vec<Diagnostic>) {
    match &e.kind {
        TKind::Metric(_) if inside => out.push(
            Diagnostic::error("alert-per-rollout", e.span, "a step metric inside a reduction")
                .with_help("a step metric is one number per batch: compare it outside the reduction"),
        ),
        TKind::Reduce(..) => e.children().into_iter().for_each(|c| metric_in_reduction(c, true, out)),
        _ => e.children().into_iter().for_each(|c| metric_in_reduction(c, inside, out)),
    }
}

fn reads_metric(e: &TExpr) -> bool {
    matches!(e.kind, TKind::Metric(_)) || e.children().into_iter().any(reads_metric)
}

/// The HIR form of a checked condition (no errors), with slots renamed by `def_id`.
pub(crate) fn to_alert(e: &TExpr, def_id: &dyn Fn(usize) -> usize) -> AlertExpr {
    if !reads_metric(e) {
        return AlertExpr::Value(e.to_hir(def_id));
    }
    let b = |x: &TExpr| Box::new(to_alert(x, def_id));
    match &e.kind {
        TKind::Metric(i) => AlertExpr::Metric(*i),
        TKind::Unary(op, x) => AlertExpr::Unary(*op, b(x)),
        TKind::Binary(op, x, y) => AlertExpr::Binary(*op, b(x), b(y)),
        TKind::Call(f, args) => AlertExpr::Call(*f, args.iter().map(|a| to_alert(a, def_id)).collect()),
        TKind::In(x, lo, hi) => AlertExpr::In(b(x), b(lo), b(hi)),
        // A metric inside a reduction or a let is an error reported before
        // any program is built.
        _ => AlertExpr::Value(e.to_hir(def_id)),
    }
}
