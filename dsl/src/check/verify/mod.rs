//! Verification of `check` statements: prove by interval analysis, otherwise
//! property-test on generated groups with the interpreter as the oracle, and
//! shrink a failure to a minimal counterexample.

pub(crate) mod cases;
mod shrink;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::intervals;
use crate::ast::BinOp;
use crate::diag::Diagnostic;
use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::{Expr, Func, Program};
use crate::interp;
use crate::interval::Interval;
use crate::schema::{FeatureRef, FeatureSchema, Type, format_number};
use crate::table::TableError;
use cases::{Case, Column};

/// Options of [`verify`].
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyOptions {
    /// Seed of the generator; the same seed finds the same counterexamples.
    pub seed: u64,
    /// Generated groups (or batches, for programs with batch reductions) per check.
    pub cases: usize,
    /// The group sizes to consider, as in `CheckOptions::group_size`.
    pub group_size: Interval,
    /// Largest group drawn, whatever `group_size` allows.
    pub max_group_size: usize,
    /// Evaluations spent shrinking one counterexample.
    pub shrink_budget: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            seed: 0x5eed_c0de,
            cases: 2000,
            group_size: Interval::new(2.0, f64::INFINITY),
            max_group_size: 8,
            shrink_budget: 2000,
        }
    }
}

/// What became of one `check` statement.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CheckOutcome {
    /// Interval analysis shows the condition holds for every input in the declared ranges.
    Proved,
    /// The condition held on every generated case.
    Passed {
        /// How many generated cases were evaluated.
        cases: usize,
    },
    /// An error at the check with the minimal counterexample in its notes.
    Failed {
        /// The error diagnostic, pointing at the `check`.
        diagnostic: Diagnostic,
    },
}

/// Why verification could not run (not a failed check: those are [`CheckOutcome::Failed`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The program reads a feature the schema has no declaration (and so no range) for.
    #[error("the program reads feature `{key}`, which the schema does not declare")]
    UnknownFeature {
        /// The feature's column key.
        key: String,
    },
    /// The generated cases did not form a valid feature table.
    #[error("could not build a feature table for verification")]
    Table(#[from] TableError),
    /// Evaluating the program on the generated cases failed.
    #[error("evaluation failed during verification")]
    Eval(#[from] EvalError),
}

/// Proves or property-tests every `check` of `program`, in order.
pub fn verify(
    program: &Program,
    schema: &FeatureSchema,
    options: &VerifyOptions,
) -> Result<Vec<CheckOutcome>, VerifyError> {
    let columns = columns(program, schema)?;
    let env_features: Vec<Interval> = columns.iter().map(|c| c.range).collect();
    let params: Vec<f64> = program.params.iter().map(|p| p.value).collect();
    let leaves = intervals::Env {
        features: &env_features,
        params: &params,
        defs: &[],
        def_nans: &[],
        group_size: options.group_size,
    };
    let (def_intervals, def_nans) = intervals::def_ranges(&program.defs, &leaves);
    let env = intervals::Env { defs: &def_intervals, def_nans: &def_nans, ..leaves };
    let mut outcomes = Vec::with_capacity(program.checks.len());
    for (index, check) in program.checks.iter().enumerate() {
        if intervals::eval(&check.expr, &env).lo == 1.0 {
            outcomes.push(CheckOutcome::Proved);
            continue;
        }
        let seed = options.seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        outcomes.push(test_check(program, index, &columns, options, seed)?);
    }
    Ok(outcomes)
}

/// Whether the advantage estimator ignores a per-group constant added to
/// `reward`, decided numerically: `advantage` on random groups with rewards
/// `r` and `r + k` must agree. Undecidable cases (non-finite values,
/// evaluation errors) count as not invariant.
pub(crate) fn shift_invariant(program: &Program, schema: &FeatureSchema, group_size: Interval) -> bool {
    let Ok(columns) = columns(program, schema) else {
        return false;
    };
    let mut probe = program.clone();
    let key = "\u{0}reward-shift-probe".to_string();
    probe.features.push(FeatureRef { name: key.clone(), level: None, args: Vec::new(), key: key.clone() });
    probe.defs[probe.reward].expr = Expr::Feature(probe.features.len() - 1);
    let mut rng = ChaCha8Rng::seed_from_u64(0x0005_41f7);
    let sizes = cases::size_range(group_size, 8);
    let cases: Vec<Case> =
        (0..24).map(|_| Case { groups: vec![cases::draw_group(&mut rng, &columns, sizes)] }).collect();
    let refs: Vec<&Case> = cases.iter().collect();
    let Ok(base) = cases::table(&columns, &refs) else {
        return false;
    };
    let rewards: Vec<f64> =
        (0..base.rows()).map(|_| (rand::Rng::random_range(&mut rng, -8..=8) as f64) / 4.0).collect();
    let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
    let run = |shift: f64| {
        let mut t = base.clone();
        t.add_column(key.clone(), rewards.iter().map(|r| r + shift).collect()).ok()?;
        interp::eval(&probe, &t, &options).ok().map(|o| o.advantage)
    };
    let Some(reference) = run(0.0) else {
        return false;
    };
    [0.75, -3.5, 40.0].into_iter().all(|k| {
        run(k).is_some_and(|shifted| {
            reference
                .iter()
                .zip(&shifted)
                .all(|(a, b)| a.is_finite() && b.is_finite() && (a - b).abs() <= 1e-6 * (1.0 + a.abs()))
        })
    })
}

/// A generator column for every feature the program reads.
fn columns(program: &Program, schema: &FeatureSchema) -> Result<Vec<Column>, VerifyError> {
    program
        .features
        .iter()
        .map(|f| match schema.get(&f.name) {
            Some(decl) => Ok(Column::new(&f.key, decl)),
            None => Err(VerifyError::UnknownFeature { key: f.key.clone() }),
        })
        .collect()
}

/// What an expression reads, through definitions.
struct Reach {
    defs: Vec<bool>,
    features: Vec<bool>,
    batch: bool,
}

fn reach(program: &Program, expr: &Expr) -> Reach {
    fn walk(program: &Program, e: &Expr, r: &mut Reach) {
        match e {
            Expr::Feature(id) => r.features[*id] = true,
            Expr::Def(id) => {
                if !r.defs[*id] {
                    r.defs[*id] = true;
                    walk(program, &program.defs[*id].expr, r);
                }
            }
            Expr::Unary(_, x) => walk(program, x, r),
            Expr::Binary(_, a, b) => {
                walk(program, a, r);
                walk(program, b, r);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| walk(program, a, r)),
            Expr::In(x, lo, hi) => [x, lo, hi].into_iter().for_each(|a| walk(program, a, r)),
            Expr::Reduce(scope, _, arg, mask) => {
                r.batch |= *scope == crate::hir::Scope::Batch;
                for a in arg.iter().chain(mask) {
                    walk(program, a, r);
                }
            }
            Expr::Number(_) | Expr::Bool(_) | Expr::Param(_) => {}
        }
    }
    let mut r =
        Reach { defs: vec![false; program.defs.len()], features: vec![false; program.features.len()], batch: false };
    walk(program, expr, &mut r);
    r
}

/// `mask(cond) + 0 * d1 + 0 * d2 ...` over the number definitions the check
/// reads: 1 where it holds, 0 where it does not, NaN where a definition it
/// depends on is not finite (which also fails it).
fn probe_expr(program: &Program, cond: &Expr, reach: &Reach) -> Expr {
    let mut e = Expr::Call(Func::Mask, vec![cond.clone()]);
    for (id, def) in program.defs.iter().enumerate() {
        if reach.defs[id] && def.ty == Type::Number {
            let zero_times = Expr::Binary(BinOp::Mul, Box::new(Expr::Number(0.0)), Box::new(Expr::Def(id)));
            e = Expr::Binary(BinOp::Add, Box::new(e), Box::new(zero_times));
        }
    }
    e
}

/// Cases packed into one table per evaluation (single-group cases only).
const CHUNK: usize = 250;

fn test_check(
    program: &Program,
    index: usize,
    columns: &[Column],
    options: &VerifyOptions,
    seed: u64,
) -> Result<CheckOutcome, VerifyError> {
    let check = &program.checks[index];
    let reach = reach(program, &check.expr);
    let probe = probe_expr(program, &check.expr, &reach);
    let eval_options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
    let sizes = cases::size_range(options.group_size, options.max_group_size);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // With batch reductions a case is a whole batch and is evaluated alone.
    let (per_table, groups_per_case) = if reach.batch { (1, 3) } else { (CHUNK, 1) };
    let cases_wanted = if reach.batch { options.cases.div_ceil(4) } else { options.cases };
    let fails = |case: &Case| -> Result<bool, VerifyError> {
        let table = cases::table(columns, &[case])?;
        let values = interp::eval_expr(program, &table, &probe, &eval_options)?;
        Ok(values.iter().any(|&v| v != 1.0))
    };
    let mut done = 0;
    while done < cases_wanted {
        let n = per_table.min(cases_wanted - done);
        let cases: Vec<Case> = (0..n)
            .map(|_| {
                let k = if groups_per_case > 1 { rand::Rng::random_range(&mut rng, 1..=groups_per_case) } else { 1 };
                Case { groups: (0..k).map(|_| cases::draw_group(&mut rng, columns, sizes)).collect() }
            })
            .collect();
        let refs: Vec<&Case> = cases.iter().collect();
        let table = cases::table(columns, &refs)?;
        let values = interp::eval_expr(program, &table, &probe, &eval_options)?;
        let mut row = 0;
        for case in &cases {
            let rows: usize = case.groups.iter().map(Vec::len).sum();
            if values[row..row + rows].iter().any(|&v| v != 1.0) {
                let mut error = None;
                let mut still_fails = |c: &Case| match fails(c) {
                    Ok(f) => f,
                    Err(e) => {
                        error.get_or_insert(e);
                        false
                    }
                };
                let small = shrink::shrink(case.clone(), columns, sizes.0, options.shrink_budget, &mut still_fails);
                if let Some(e) = error {
                    return Err(e);
                }
                let diagnostic = counterexample(program, index, columns, &reach, &small, done + 1)?;
                return Ok(CheckOutcome::Failed { diagnostic });
            }
            row += rows;
            done += 1;
        }
    }
    Ok(CheckOutcome::Passed { cases: done })
}

/// The failure diagnostic: the shrunk case's features (those the check reads)
/// and the values of `reward`, `adv`, `advantage` and the `let`s the check reads there.
fn counterexample(
    program: &Program,
    index: usize,
    columns: &[Column],
    reach: &Reach,
    case: &Case,
    tried: usize,
) -> Result<Diagnostic, VerifyError> {
    let check = &program.checks[index];
    let table = cases::table(columns, &[case])?;
    let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
    let outputs = interp::eval(program, &table, &options)?;
    let mut shown: Vec<(String, Vec<f64>)> =
        vec![("reward".into(), outputs.reward), ("adv".into(), outputs.adv), ("advantage".into(), outputs.advantage)];
    for (id, def) in program.defs.iter().enumerate() {
        if reach.defs[id] && def.kind == crate::hir::DefKind::Let && def.ty == Type::Number {
            shown.push((def.name.clone(), interp::eval_expr(program, &table, &Expr::Def(id), &options)?));
        }
    }
    let features: Vec<usize> = (0..columns.len()).filter(|&j| reach.features[j]).collect();
    let describe_group = |g: &cases::Group| {
        let rows: Vec<String> = g
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let cells: Vec<String> =
                    features.iter().map(|&j| format!("{} = {}", columns[j].key, value(row[j]))).collect();
                if cells.is_empty() { format!("#{i}") } else { format!("#{i}: {}", cells.join(", ")) }
            })
            .collect();
        format!("group of {} rollout{}: {}", g.len(), if g.len() == 1 { "" } else { "s" }, rows.join("; "))
    };
    let inputs = if case.groups.len() == 1 {
        describe_group(&case.groups[0])
    } else {
        let parts: Vec<String> =
            case.groups.iter().enumerate().map(|(k, g)| format!("[{k}] {}", describe_group(g))).collect();
        format!("batch of {} groups: {}", case.groups.len(), parts.join(" "))
    };
    let mut row = 0;
    let mut values = Vec::new();
    for g in &case.groups {
        for i in 0..g.len() {
            let cells: Vec<String> = shown.iter().map(|(name, v)| format!("{name} = {}", value(v[row]))).collect();
            values.push(format!("#{i}: {}", cells.join(", ")));
            row += 1;
        }
    }
    Ok(Diagnostic::error("check-failed", check.span, format!("check `{}` fails", check.text))
        .with_help(format!(
            "found by property testing after {tried} generated case{}; shrunk to a minimal counterexample",
            if tried == 1 { "" } else { "s" }
        ))
        .with_note(format!("counterexample: {inputs}"))
        .with_note(format!("there: {}", values.join("; "))))
}

/// A value as a counterexample shows it: integers plainly, others to 4 significant digits.
fn value(x: f64) -> String {
    if !x.is_finite() || x == x.trunc() {
        return if x.is_nan() { "NaN".into() } else { format_number(x) };
    }
    if x.abs() < 1e-3 {
        return format!("{x:.3e}");
    }
    let digits = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{x:.digits$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if s == "-0" { "0".into() } else { s }
}

#[cfg(test)]
mod tests {
    use super::value;

    #[test]
    fn values_print_short() {
        assert_eq!(value(1.0), "1");
        assert_eq!(value(0.5), "0.5");
        assert_eq!(value(-0.999_800_04), "-0.9998");
        assert_eq!(value(123.456_78), "123.5");
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::INFINITY), "inf");
        assert_eq!(value(1e-9), "1.000e-9");
    }
}
