//! The tree-walking interpreter: slow, obvious, and the oracle for every backend.
//!
//! It evaluates an expression a whole column at a time: a node's value is a
//! `Vec<f64>` with one entry per row of the table, constants broadcast. A
//! definition is evaluated once and memoised by its [`DefId`]; a group
//! reduction evaluates its argument's column, reduces each group's slice and
//! broadcasts the result back to the group's rows; a batch reduction reduces
//! the whole column. The scalar semantics live in [`ops`], shared with the
//! compiled backend so that both compute every operator the same way.
//!
//! Only what the outputs (or the expression asked for) reach is evaluated:
//! an unused `let` that would divide by zero costs nothing and fails nothing,
//! and a feature only a `check` reads need not be in the table.
//!
//! Non-finite values (unless [`NonFinite::Allow`]): the failing rows are those
//! where `reward`, `adv` or `advantage` is NaN or infinite. The error blames
//! the first definition in dependency order, among those the outputs depend
//! on, that is non-finite on some failing row, at the lowest such row: a `let`
//! feeding `reward` that divided by zero is named (at its own rollout) rather
//! than the `adv` of every rollout of the group whose mean it poisoned; `adv`
//! is named when a group had no spread. The error carries the rollout's
//! group, position in the group, row and the program's feature values. A
//! definition that is non-finite only where the outputs are fine (a guarded
//! `if(c > 0, x / c, 0)`) is not an error.

pub mod alerts;
pub mod ops;

use std::rc::Rc;

use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::{DefId, Expr, Program, Scope};
use crate::table::{FeatureTable, Outputs};

/// Evaluates `reward`, `adv` and `advantage` for every row of `table`.
pub fn eval(program: &Program, table: &FeatureTable, options: &EvalOptions) -> Result<Outputs, EvalError> {
    let reach = Reach::outputs(program);
    let features = prepare(program, table, options, &reach)?;
    let mut interp = Interp::new(program, table, features);
    let reward = interp.def(program.reward);
    let adv = interp.def(program.adv);
    let advantage = interp.def(program.advantage);
    let outputs = Outputs { reward: reward.to_vec(), adv: adv.to_vec(), advantage: advantage.to_vec() };
    if options.non_finite == NonFinite::Error {
        let failing = failing_rows(&outputs);
        if !failing.is_empty() {
            return Err(interp.non_finite_error(&reach, &failing));
        }
    }
    Ok(outputs)
}

/// Evaluates an arbitrary expression of `program` (a check's condition, say)
/// for every row. Bools come out as 1.0/0.0. Non-finite values are returned,
/// never an error: the caller decides what they mean.
pub fn eval_expr(
    program: &Program,
    table: &FeatureTable,
    expr: &Expr,
    options: &EvalOptions,
) -> Result<Vec<f64>, EvalError> {
    let reach = Reach::of(program, &[expr]);
    let features = prepare(program, table, options, &reach)?;
    let mut interp = Interp::new(program, table, features);
    Ok(interp.expr(expr))
}

/// What a set of root expressions depends on, transitively through definitions.
#[derive(Clone, Debug)]
pub(crate) struct Reach {
    pub defs: Vec<bool>,
    pub features: Vec<bool>,
    /// Some batch reduction is reached: a rollout's values then depend on every row.
    pub batch: bool,
}

impl Reach {
    /// What `reward`, `adv` and `advantage` depend on, themselves included.
    pub(crate) fn outputs(program: &Program) -> Reach {
        let roots = [program.reward, program.adv, program.advantage].map(Expr::Def);
        Reach::of(program, &roots.each_ref())
    }

    pub(crate) fn of(program: &Program, roots: &[&Expr]) -> Reach {
        let mut reach = Reach {
            defs: vec![false; program.defs.len()],
            features: vec![false; program.features.len()],
            batch: false,
        };
        for root in roots {
            reach.walk(program, root);
        }
        reach
    }

    fn walk(&mut self, program: &Program, expr: &Expr) {
        match expr {
            Expr::Number(_) | Expr::Bool(_) | Expr::Param(_) => {}
            Expr::Feature(f) => self.features[*f] = true,
            Expr::Def(d) => {
                if !self.defs[*d] {
                    self.defs[*d] = true;
                    self.walk(program, &program.def(*d).expr);
                }
            }
            Expr::Unary(_, x) => self.walk(program, x),
            Expr::Binary(_, a, b) => {
                self.walk(program, a);
                self.walk(program, b);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| self.walk(program, a)),
            Expr::In(x, lo, hi) => {
                self.walk(program, x);
                self.walk(program, lo);
                self.walk(program, hi);
            }
            Expr::Reduce(scope, _, arg, mask) => {
                self.batch |= *scope == Scope::Batch;
                for e in arg.iter().chain(mask) {
                    self.walk(program, e);
                }
            }
        }
    }
}

/// The checks every backend makes before evaluating: every reached feature is
/// in the table (the first missing one in the program's feature order is
/// reported), then every group has the declared size. Returns the reached
/// feature columns, `None` for the ones nothing reaches.
pub(crate) fn prepare<'t>(
    program: &Program,
    table: &'t FeatureTable,
    options: &EvalOptions,
    reach: &Reach,
) -> Result<Vec<Option<&'t [f64]>>, EvalError> {
    let mut columns = Vec::with_capacity(program.features.len());
    for (feature, &used) in program.features.iter().zip(&reach.features) {
        if !used {
            columns.push(None);
            continue;
        }
        match table.column(&feature.key) {
            Some(column) => columns.push(Some(column)),
            None => {
                return Err(EvalError::MissingFeature { key: feature.key.clone() });
            }
        }
    }
    // The table knows when all its groups have one size; only one that does not have the wanted
    // size is walked group by group, for the error.
    if let Some(want) = options.group_size.filter(|&want| table.group_size() != Some(want)) {
        for g in 0..table.groups() {
            let got = table.group_rows(g).len();
            if got != want {
                return Err(EvalError::GroupSize { group: table.group_name(g).to_string(), got, want });
            }
        }
    }
    Ok(columns)
}

/// The rows where `reward`, `adv` or `advantage` is NaN or infinite, ascending.
pub(crate) fn failing_rows(outputs: &Outputs) -> Vec<usize> {
    (0..outputs.reward.len())
        .filter(|&r| !(outputs.reward[r].is_finite() && outputs.adv[r].is_finite() && outputs.advantage[r].is_finite()))
        .collect()
}

/// Explains non-finite outputs found by another backend: re-runs the
/// interpreter over the whole table (a batch reduction can make a fault in one
/// group spread to all) and applies the same rule as [`eval`], so both report
/// the same error. Only a failing evaluation pays for it. Returns `None` when
/// the interpreter finds every output finite (the backends disagree).
pub(crate) fn diagnose_non_finite(program: &Program, table: &FeatureTable) -> Option<EvalError> {
    let reach = Reach::outputs(program);
    let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
    let features = prepare(program, table, &options, &reach).ok()?;
    let mut interp = Interp::new(program, table, features);
    let outputs = Outputs {
        reward: interp.def(program.reward).to_vec(),
        adv: interp.def(program.adv).to_vec(),
        advantage: interp.def(program.advantage).to_vec(),
    };
    let failing = failing_rows(&outputs);
    (!failing.is_empty()).then(|| interp.non_finite_error(&reach, &failing))
}

/// The error for another backend's `outputs` with a non-finite value: the
/// interpreter's diagnosis when it agrees; otherwise (f32 overflow on a GPU,
/// or a backend bug) still an error, naming the output that backend saw go
/// non-finite at its first failing row.
pub(crate) fn explain_non_finite(program: &Program, table: &FeatureTable, outputs: &Outputs) -> EvalError {
    if let Some(err) = diagnose_non_finite(program, table) {
        return err;
    }
    let row = failing_rows(outputs)[0];
    let p = program;
    let (def, value) = [(p.reward, &outputs.reward), (p.adv, &outputs.adv), (p.advantage, &outputs.advantage)]
        .into_iter()
        .map(|(d, v)| (d, v[row]))
        .find(|(_, v)| !v.is_finite())
        .expect("a failing row has a non-finite output");
    non_finite_at(p, table, def, value, row)
}

pub(crate) fn non_finite_at(program: &Program, table: &FeatureTable, def: DefId, value: f64, row: usize) -> EvalError {
    let g = table.group_of(row);
    let features = program
        .features
        .iter()
        .filter_map(|f| table.column(&f.key).map(|column| (f.key.clone(), column[row])))
        .collect();
    EvalError::NonFinite {
        def: program.def(def).name.clone(),
        value,
        group: table.group_name(g).to_string(),
        index_in_group: row - table.group_rows(g).start,
        row,
        features,
    }
}

/// Column-at-a-time evaluation with memoised definitions.
struct Interp<'a> {
    program: &'a Program,
    table: &'a FeatureTable,
    features: Vec<Option<&'a [f64]>>,
    defs: Vec<Option<Rc<Vec<f64>>>>,
}

impl<'a> Interp<'a> {
    fn new(program: &'a Program, table: &'a FeatureTable, features: Vec<Option<&'a [f64]>>) -> Interp<'a> {
        Interp { program, table, features, defs: vec![None; program.defs.len()] }
    }

    fn rows(&self) -> usize {
        self.table.rows()
    }

    fn def(&mut self, id: DefId) -> Rc<Vec<f64>> {
        if let Some(values) = &self.defs[id] {
            return values.clone();
        }
        let values = Rc::new(self.expr(&self.program.def(id).expr));
        self.defs[id] = Some(values.clone());
        values
    }

    fn expr(&mut self, expr: &Expr) -> Vec<f64> {
        match expr {
            Expr::Number(x) => vec![*x; self.rows()],
            Expr::Bool(b) => vec![ops::from_bool(*b); self.rows()],
            Expr::Param(p) => vec![self.program.params[*p].value; self.rows()],
            Expr::Feature(f) => self.features[*f].expect("reached features were resolved by `prepare`").to_vec(),
            Expr::Def(d) => self.def(*d).to_vec(),
            Expr::Unary(op, x) => self.expr(x).into_iter().map(|x| ops::unary(*op, x)).collect(),
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                a.iter().zip(&b).map(|(&a, &b)| ops::binary(*op, a, b)).collect()
            }
            Expr::Call(f, args) => {
                let args: Vec<Vec<f64>> = args.iter().map(|a| self.expr(a)).collect();
                (0..self.rows())
                    .map(|r| {
                        let row: Vec<f64> = args.iter().map(|a| a[r]).collect();
                        ops::call(*f, &row)
                    })
                    .collect()
            }
            Expr::In(x, lo, hi) => {
                let (x, lo, hi) = (self.expr(x), self.expr(lo), self.expr(hi));
                (0..self.rows()).map(|r| ops::in_range(x[r], lo[r], hi[r])).collect()
            }
            Expr::Reduce(scope, op, arg, mask) => {
                // `count` has no argument; its values are never read.
                let values = match arg {
                    Some(arg) => self.expr(arg),
                    None => vec![0.0; self.rows()],
                };
                let mask = mask.as_ref().map(|m| self.expr(m));
                let mut out = vec![0.0; self.rows()];
                let segments: Vec<std::ops::Range<usize>> = match scope {
                    Scope::Group => (0..self.table.groups()).map(|g| self.table.group_rows(g)).collect(),
                    Scope::Batch => std::iter::once(0..self.rows()).collect(),
                };
                for rows in segments {
                    let xs = &values[rows.clone()];
                    match (op, &mask) {
                        (crate::hir::ReduceOp::Rank, None) => ops::rank_into(xs, &mut out[rows]),
                        (crate::hir::ReduceOp::Rank, Some(m)) => {
                            ops::rank_masked_into(xs, &m[rows.clone()], &mut out[rows]);
                        }
                        (op, None) => out[rows].fill(ops::reduce(*op, xs)),
                        (op, Some(m)) => {
                            let value = ops::reduce_masked(*op, xs, &m[rows.clone()]);
                            out[rows].fill(value);
                        }
                    }
                }
                out
            }
        }
    }

    /// The error for a failing evaluation, `failing` being the rows with a
    /// non-finite output (ascending, non-empty). It names the first reached
    /// definition, in dependency order, that is non-finite on some failing row,
    /// at the lowest such row: the root of the fault rather than its
    /// consequences (a `let` that divided by zero, not the `adv` whose group
    /// mean it poisoned). A definition that is non-finite only on rows whose
    /// outputs are fine (a guarded `if(c > 0, x / c, 0)`) is not blamed.
    fn non_finite_error(&self, reach: &Reach, failing: &[usize]) -> EvalError {
        let blame = (0..self.program.defs.len()).filter(|&d| reach.defs[d]).find_map(|d| {
            let values = self.defs[d].as_ref().expect("reached definitions were evaluated");
            failing.iter().find(|&&r| !values[r].is_finite()).map(|&r| (d, values[r], r))
        });
        let (def, value, row) = blame.expect("a failing row has a non-finite output, and outputs are reached");
        non_finite_at(self.program, self.table, def, value, row)
    }
}

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod tests;
