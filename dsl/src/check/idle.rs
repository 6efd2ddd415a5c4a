//! The `idle-outranks` lint: can a rollout that did nothing get a higher
//! advantage than a sibling whose quality features are all positive?
//!
//! "Did nothing" is the caller's word: the schema declares idle cases
//! ([`crate::schema::IdleCase`]), each a name and fixed values of some
//! features (all levels of a leveled one). The sibling is any rollout whose
//! quality features (role [`Role::Quality`]) that `reward` reads are all
//! positive, every other feature anywhere in its declared range.
//!
//! What is shown, step by step:
//!
//! 1. The estimator `adv` is classified by how it moves with a rollout's
//!    own `reward` when every group or batch reduction (and every per-group
//!    feature) is held fixed, as it is between two rollouts of one group:
//!    strictly increasing (GRPO, Dr. GRPO, RLOO, and their masked
//!    variants), strictly decreasing, constant, or unknown. Only sums,
//!    differences, products and quotients by a fixed factor of known sign,
//!    and `exp`/`sigmoid`/`tanh` are followed; anything else is unknown,
//!    and then the lint says nothing.
//! 2. Interval analysis bounds `reward` over the idle case's box and over
//!    the sibling's. When the idle rollout's highest reward cannot exceed
//!    the sibling's lowest (for an increasing `adv`; the other way round
//!    for a decreasing one) the ordering is proved and the lint is silent.
//! 3. Otherwise it looks for a concrete pair: the idle and sibling
//!    assignments of a small grid of values (range ends, 0, 1, midpoints,
//!    small positive qualities) with the highest and lowest `reward`, put
//!    in one group of two and evaluated by the interpreter. It warns only
//!    when that group really gives the idle rollout the higher `adv`, and
//!    names both assignments: every warning is a true counterexample.
//!
//! 4. When the pair shows nothing, the `advantage` layer gets its own
//!    search. A factor that depends on the rollout's own features
//!    (CodeGrep's `adv * sqrt(min(c / 4, 1))`) is no function of `reward`,
//!    so steps 1–3 cannot follow it, and a pair is not enough: the idle
//!    rollout's `adv` is negative only when the group's baseline lies above
//!    it. So the lint evaluates groups of three — an idle rollout, a weak
//!    sibling (positive quality, among the lowest rewards) and a strong one
//!    (the highest reward, which lifts the baseline) — over the grids' idle
//!    and weak rows, and warns when the idle rollout's `advantage` beats the
//!    weak sibling's: a factor that is 0 for a rollout with no call lifts its
//!    negative `adv` to 0, above the weak sibling's discounted but negative
//!    one. Again every warning names the three assignments.

use super::Checked;
use super::lower::{TExpr, TKind};
use crate::ast::{BinOp, UnOp};
use crate::diag::Diagnostic;
use crate::eval::{EvalOptions, NonFinite};
use crate::hir::{Expr, Func, Program, ReduceOp};
use crate::interval::Interval;
use crate::schema::{FeatureDecl, IdleCase, LintCase, Role, format_number};
use crate::table::FeatureTable;

/// How `adv` moves with a rollout's own `reward`, reductions held fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slope {
    /// Does not depend on the rollout at all.
    Flat,
    /// Strictly increasing in `reward`, and depends on nothing else of the rollout.
    Up,
    /// Strictly decreasing in `reward`, and depends on nothing else of the rollout.
    Down,
    /// Anything else.
    Unknown,
}

impl Slope {
    fn flip(self) -> Slope {
        match self {
            Slope::Up => Slope::Down,
            Slope::Down => Slope::Up,
            other => other,
        }
    }

    fn plus(self, other: Slope) -> Slope {
        match (self, other) {
            (Slope::Flat, s) | (s, Slope::Flat) => s,
            (Slope::Up, Slope::Up) => Slope::Up,
            (Slope::Down, Slope::Down) => Slope::Down,
            _ => Slope::Unknown,
        }
    }

    /// `self` times (or divided by) a fixed factor whose range is `factor`.
    fn scaled(self, factor: Interval) -> Slope {
        if self == Slope::Flat {
            Slope::Flat
        } else if factor.lo > 0.0 {
            self
        } else if factor.hi < 0.0 {
            self.flip()
        } else {
            Slope::Unknown
        }
    }
}

/// The slope of `e` in the `reward` slot's value.
pub(crate) fn slope(checked: &Checked<'_, '_>, e: &TExpr, reward: usize, depth: usize) -> Slope {
    // Definitions form a DAG (cycles are errors), so this only bounds a pathological fan-out.
    if depth > 64 {
        return Slope::Unknown;
    }
    let s = |x: &TExpr| slope(checked, x, reward, depth + 1);
    match &e.kind {
        TKind::Def(slot) if *slot == reward => Slope::Up,
        TKind::Def(slot) => s(&checked.bodies[*slot]),
        // A rank is the rollout's own, not the group's.
        TKind::Reduce(_, ReduceOp::Rank, ..) => Slope::Unknown,
        TKind::Number(_) | TKind::Bool(_) | TKind::Param(_) | TKind::Reduce(..) => Slope::Flat,
        TKind::Feature(id) if checked.decl(*id).is_some_and(|d| d.per_group) => Slope::Flat,
        TKind::Feature(_) | TKind::Error => Slope::Unknown,
        TKind::Unary(UnOp::Neg, x) => s(x).flip(),
        TKind::Binary(BinOp::Add, a, b) => s(a).plus(s(b)),
        TKind::Binary(BinOp::Sub, a, b) => s(a).plus(s(b).flip()),
        TKind::Binary(BinOp::Mul, a, b) => match (s(a), s(b)) {
            (Slope::Flat, x) => x.scaled(checked.interval(a)),
            (x, Slope::Flat) => x.scaled(checked.interval(b)),
            _ => Slope::Unknown,
        },
        TKind::Binary(BinOp::Div, a, b) => match (s(a), s(b)) {
            (x, Slope::Flat) => x.scaled(checked.interval(b)),
            _ => Slope::Unknown,
        },
        TKind::Call(Func::Exp | Func::Sigmoid | Func::Tanh, args) => s(&args[0]),
        _ => {
            if e.children().into_iter().all(|c| s(c) == Slope::Flat) {
                Slope::Flat
            } else {
                Slope::Unknown
            }
        }
    }
}

/// The lint's warnings, one per idle case that shows the ordering.
pub(crate) fn idle_outranks(checked: &Checked<'_, '_>, program: &Program) -> Vec<Diagnostic> {
    let schema = checked.scope.schema;
    let Some(reward) = checked.scope.reward else { return Vec::new() };
    if schema.idle_cases().is_empty() {
        return Vec::new();
    }
    let slope = slope(checked, &checked.bodies[checked.scope.adv], reward, 0);
    if !matches!(slope, Slope::Up | Slope::Down) {
        return Vec::new();
    }
    let mut read = vec![false; program.features.len()];
    let mut reduces = false;
    reads(checked, &checked.bodies[reward], &mut read, &mut reduces, 0);
    let decls: Vec<Option<&FeatureDecl>> = program.features.iter().map(|f| schema.get(&f.name)).collect();
    let quality = |i: usize| read[i] && decls[i].is_some_and(|d| d.role == Role::Quality);
    if !(0..read.len()).any(quality) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for case in schema.idle_cases() {
        let rows = Rows::new(program, case, &decls, &read, &quality);
        let Some((idle_box, sibling_box)) = rows.boxes() else { continue };
        let (idle, sibling) = (reward_range(checked, program, &idle_box), reward_range(checked, program, &sibling_box));
        let possible = match slope {
            Slope::Up => idle.hi > sibling.lo,
            _ => idle.lo < sibling.hi,
        };
        if reduces {
            continue;
        }
        if possible && let Some(w) = rows.witness(checked, program, slope) {
            out.push(warning(checked, program, case, &read, &w, idle, sibling));
        } else if program.advantage != program.adv
            && let Some(w) = rows.advantage_witness(checked, program)
        {
            out.push(advantage_warning(checked, program, case, &read, &w));
        }
    }
    out
}

/// Marks the features `e` reads through definitions; notes any reduction.
fn reads(checked: &Checked<'_, '_>, e: &TExpr, read: &mut [bool], reduces: &mut bool, depth: usize) {
    if depth > 64 {
        *reduces = true;
        return;
    }
    match &e.kind {
        TKind::Feature(id) => read[*id] = true,
        TKind::Def(slot) => reads(checked, &checked.bodies[*slot], read, reduces, depth + 1),
        TKind::Reduce(..) => *reduces = true,
        _ => {}
    }
    for c in e.children() {
        reads(checked, c, read, reduces, depth + 1);
    }
}

/// The interval of `reward` when the features range over `features`.
fn reward_range(checked: &Checked<'_, '_>, program: &Program, features: &[Interval]) -> Interval {
    let params: Vec<f64> = program.params.iter().map(|p| p.value).collect();
    let leaves = super::intervals::Env {
        features,
        params: &params,
        defs: &[],
        def_nans: &[],
        group_size: checked.options.group_size,
    };
    let (intervals, _) = super::intervals::def_ranges(&program.defs, &leaves);
    intervals[program.reward]
}

/// One rollout's feature values: what the idle case fixes, the candidate
/// values of the rest, for the idle rollout and for the sibling.
struct Rows<'a> {
    /// Per feature: the idle case's value, if it fixes one.
    fixed: Vec<Option<f64>>,
    /// Per feature: declared range and whether whole numbers.
    ranges: Vec<(Interval, bool)>,
    /// Per feature: the sibling's quality must be positive.
    positive: Vec<bool>,
    read: &'a [bool],
}

/// A concrete pair: the idle and sibling rows and what they earn.
struct Witness {
    idle: Vec<f64>,
    sibling: Vec<f64>,
    rewards: [f64; 2],
    advs: [f64; 2],
}

impl<'a> Rows<'a> {
    fn new(
        program: &Program,
        case: &'a IdleCase,
        decls: &[Option<&FeatureDecl>],
        read: &'a [bool],
        quality: &dyn Fn(usize) -> bool,
    ) -> Rows<'a> {
        let fixed =
            program.features.iter().map(|f| case.values.iter().find(|(n, _)| *n == f.name).map(|v| v.1)).collect();
        let ranges = decls.iter().map(|d| d.map_or((Interval::REAL, false), |d| (d.range, d.integer))).collect();
        let positive = (0..program.features.len()).map(quality).collect();
        Rows { fixed, ranges, positive, read }
    }

    /// The idle box and the sibling box, or `None` when no sibling has
    /// positive quality (a quality feature whose range stops at 0).
    fn boxes(&self) -> Option<(Vec<Interval>, Vec<Interval>)> {
        let mut idle = Vec::new();
        let mut sibling = Vec::new();
        for (i, &(range, integer)) in self.ranges.iter().enumerate() {
            idle.push(self.fixed[i].map_or(range, Interval::point));
            if self.positive[i] {
                let lo = if integer { range.lo.max(1.0) } else { range.lo.max(0.0) };
                if range.hi <= 0.0 || lo > range.hi {
                    return None;
                }
                sibling.push(Interval::new(lo, range.hi));
            } else {
                sibling.push(range);
            }
        }
        Some((idle, sibling))
    }

    /// Values to try for feature `i` (of a rollout that is `idle` or the sibling).
    fn candidates(&self, i: usize, idle: bool) -> Vec<f64> {
        let (range, integer) = self.ranges[i];
        if idle && let Some(v) = self.fixed[i] {
            return vec![v];
        }
        let lo = if range.lo.is_finite() { range.lo } else { -1000.0 };
        let hi = if range.hi.is_finite() { range.hi } else { lo.max(0.0) + 1000.0 };
        let mut values = if !idle && self.positive[i] {
            let small = if integer { lo.max(1.0) } else { (hi / 1000.0).max(lo) };
            vec![small, (small + hi) / 2.0, hi]
        } else {
            vec![lo, hi, (lo + hi) / 2.0, 0.0, 1.0, lo + 10.0, lo + 100.0]
        };
        if integer {
            values.iter_mut().for_each(|v| *v = v.round());
        }
        values.retain(|v| range.contains(*v) && (idle || !self.positive[i] || *v > 0.0));
        values.sort_by(f64::total_cmp);
        values.dedup();
        values
    }

    /// Every combination of the candidates of the features `reward` reads
    /// (the others at a default), at most `MAX_ROWS`: a feature that would
    /// pass it keeps only the ends of its candidates, and `None` when even
    /// that is too many.
    fn grid(&self, idle: bool) -> Option<Vec<Vec<f64>>> {
        const MAX_ROWS: usize = 4096;
        let mut rows = vec![self.defaults(idle)];
        for i in 0..self.ranges.len() {
            if !self.read[i] {
                continue;
            }
            let mut values = self.candidates(i, idle);
            if rows.len() * values.len() > MAX_ROWS && values.len() > 2 {
                values = vec![values[0], values[values.len() - 1]];
            }
            if values.is_empty() || rows.len() * values.len() > MAX_ROWS {
                return None;
            }
            rows = rows
                .iter()
                .flat_map(|row| {
                    values.iter().map(move |&v| {
                        let mut r = row.clone();
                        r[i] = v;
                        r
                    })
                })
                .collect();
        }
        Some(rows)
    }

    /// A row where the features `reward` does not read sit at the idle
    /// case's value, the top of their range for a sibling's quality, or the
    /// bottom of their range (what `adv` may still read through a mask).
    fn defaults(&self, idle: bool) -> Vec<f64> {
        (0..self.ranges.len())
            .map(|i| {
                let (range, _) = self.ranges[i];
                let bottom = if range.lo.is_finite() { range.lo } else { 0.0 };
                match (idle, self.fixed[i]) {
                    (true, Some(v)) => v,
                    (false, _) if self.positive[i] || self.quality_default(i) => {
                        if range.hi.is_finite() {
                            range.hi
                        } else {
                            bottom + 1.0
                        }
                    }
                    _ => bottom,
                }
            })
            .collect()
    }

    /// A feature the idle case fixes below its top (`valid = 0`) that a
    /// sibling, being active, holds at its top when `reward` ignores it.
    fn quality_default(&self, i: usize) -> bool {
        self.fixed[i].is_some_and(|v| v < self.ranges[i].0.hi) && !self.read[i]
    }

    /// The idle row that earns the most (the least, for a decreasing `adv`)
    /// and the sibling that earns the least (the most), evaluated together
    /// in one group: `Some` only when that group ranks the idle one higher.
    fn witness(&self, checked: &Checked<'_, '_>, program: &Program, slope: Slope) -> Option<Witness> {
        let keys = keys(program);
        let Grids { idle, sibling, ri, rs } = self.rewarded_grids(program, &keys)?;
        let better = |a: f64, b: f64| if slope == Slope::Up { a > b } else { a < b };
        let pick = |rows: &[f64], best: bool| -> Option<usize> {
            (0..rows.len())
                .filter(|&i| rows[i].is_finite())
                .reduce(|a, b| if better(rows[b], rows[a]) == best { b } else { a })
        };
        let (i, s) = (pick(&ri, true)?, pick(&rs, false)?);
        if !better(ri[i], rs[s]) || !checked.options.group_size.contains(2.0) {
            return None;
        }
        let pair = [idle[i].clone(), sibling[s].clone()];
        let table = table(&keys, &pair, &[2])?;
        let outputs = crate::interp::eval(program, &table, &LINT_EVAL).ok()?;
        let advs = [outputs.adv[0], outputs.adv[1]];
        let shown = advs.iter().all(|a| a.is_finite()) && advs[0] > advs[1];
        shown.then(|| Witness {
            idle: pair[0].clone(),
            sibling: pair[1].clone(),
            rewards: [outputs.reward[0], outputs.reward[1]],
            advs,
        })
    }
}

/// The idle and sibling grids with each row's `reward` (`ri`, `rs`).
struct Grids {
    idle: Vec<Vec<f64>>,
    sibling: Vec<Vec<f64>>,
    ri: Vec<f64>,
    rs: Vec<f64>,
}

/// How the lint evaluates its candidate groups: any size, non-finite values let through.
const LINT_EVAL: EvalOptions = EvalOptions { group_size: None, non_finite: NonFinite::Allow };

/// The program's feature keys, in table column order.
fn keys(program: &Program) -> Vec<&str> {
    program.features.iter().map(|f| f.key.as_str()).collect()
}

impl Rows<'_> {
    /// Both grids, each row's `reward` evaluated in one pass (a row's reward reads no reduction).
    fn rewarded_grids(&self, program: &Program, keys: &[&str]) -> Option<Grids> {
        let rewards = |rows: &[Vec<f64>]| -> Option<Vec<f64>> {
            let table = table(keys, rows, &[rows.len()])?;
            crate::interp::eval_expr(program, &table, &Expr::Def(program.reward), &LINT_EVAL).ok()
        };
        let (idle, sibling) = (self.grid(true)?, self.grid(false)?);
        let (ri, rs) = (rewards(&idle)?, rewards(&sibling)?);
        Some(Grids { idle, sibling, ri, rs })
    }
}

/// A group of three in which the idle rollout's `advantage` beats a weak sibling's.
struct Triple {
    /// Idle, weak sibling, strong sibling.
    rows: [Vec<f64>; 3],
    rewards: [f64; 3],
    advs: [f64; 3],
    advantages: [f64; 3],
}

impl Rows<'_> {
    /// Step 4: groups of (idle, weak sibling, strong sibling) over up to 16 idle rows (highest
    /// reward first) and the 16 siblings with the lowest reward, the strong sibling the one with
    /// the highest; the first group whose idle `advantage` is above the weak one's.
    fn advantage_witness(&self, checked: &Checked<'_, '_>, program: &Program) -> Option<Triple> {
        const TRIED: usize = 16;
        if !checked.options.group_size.contains(3.0) {
            return None;
        }
        let keys = keys(program);
        let Grids { idle, sibling, ri, rs } = self.rewarded_grids(program, &keys)?;
        let mut idle_order: Vec<usize> = (0..idle.len()).filter(|&i| ri[i].is_finite()).collect();
        idle_order.sort_by(|&a, &b| ri[b].total_cmp(&ri[a]).then(a.cmp(&b)));
        let mut weak_order: Vec<usize> = (0..sibling.len()).filter(|&i| rs[i].is_finite()).collect();
        weak_order.sort_by(|&a, &b| rs[a].total_cmp(&rs[b]).then(a.cmp(&b)));
        let &strong = weak_order.last()?;
        for &i in idle_order.iter().take(TRIED) {
            for &w in weak_order.iter().take(TRIED).filter(|&&w| rs[w] < rs[strong]) {
                let rows = [idle[i].clone(), sibling[w].clone(), sibling[strong].clone()];
                let Some(group) = table(&keys, &rows, &[3]) else { continue };
                let Ok(out) = crate::interp::eval(program, &group, &LINT_EVAL) else { continue };
                let advantages = [out.advantage[0], out.advantage[1], out.advantage[2]];
                if advantages.iter().all(|a| a.is_finite()) && advantages[0] > advantages[1] {
                    return Some(Triple {
                        rows,
                        rewards: [out.reward[0], out.reward[1], out.reward[2]],
                        advs: [out.adv[0], out.adv[1], out.adv[2]],
                        advantages,
                    });
                }
            }
        }
        None
    }
}

/// The warning of step 4, at the `advantage` definition.
fn advantage_warning(
    checked: &Checked<'_, '_>,
    program: &Program,
    case: &IdleCase,
    read: &[bool],
    w: &Triple,
) -> Diagnostic {
    let n = rounded;
    let shown = |row: &[f64]| assignment(program, case, read, row, true);
    let earns =
        |k: usize| format!("reward = {}, adv = {}, advantage = {}", n(w.rewards[k]), n(w.advs[k]), n(w.advantages[k]));
    let span = checked.bodies[checked.scope.advantage].span;
    let diag = Diagnostic::warning(
        "idle-outranks",
        span,
        format!("a rollout that {} can get a higher `advantage` than a sibling whose quality is positive", case.name),
    )
    .with_note(format!(
        "in one group of three, the idle rollout ({}) earns {}; a weak sibling ({}) earns {}; a strong one ({}) \
         earns {}",
        shown(&w.rows[0]),
        earns(0),
        shown(&w.rows[1]),
        earns(1),
        shown(&w.rows[2]),
        earns(2),
    ))
    .with_note(
        "`adv` ranks the idle rollout last, but the `advantage` layer scales each rollout's `adv` by its own \
         features: a factor that is small or 0 for the idle rollout shrinks its penalty below the weak sibling's"
            .to_string(),
    );
    let help = "discount only positive advantages, so a penalty is never shrunk, e.g. \
                `advantage = if(adv > 0, adv * FACTOR, adv)`"
        .to_string();
    super::lints::advised(checked, LintCase::IdleOutranks, diag, help)
}

/// `key = value` of the features `reward` reads, and with `case_features` also of those the idle
/// case fixes.
fn assignment(program: &Program, case: &IdleCase, read: &[bool], row: &[f64], case_features: bool) -> String {
    let shown: Vec<String> = program
        .features
        .iter()
        .enumerate()
        .filter(|&(i, f)| read[i] || (case_features && case.values.iter().any(|(n, _)| *n == f.name)))
        .map(|(i, f)| format!("{} = {}", f.key, format_number(row[i])))
        .collect();
    shown.join(", ")
}

/// A value as the notes show it: four decimals at most.
fn rounded(x: f64) -> String {
    format_number((x * 1e4).round() / 1e4)
}

/// A table of `rows` (one value per feature key), in groups of the given sizes.
fn table(keys: &[&str], rows: &[Vec<f64>], sizes: &[usize]) -> Option<FeatureTable> {
    let mut t = FeatureTable::new(sizes.iter().enumerate().map(|(g, &n)| (format!("g{g}"), n))).ok()?;
    for (j, key) in keys.iter().enumerate() {
        t.add_column(key.to_string(), rows.iter().map(|r| r[j]).collect()).ok()?;
    }
    Some(t)
}

fn warning(
    checked: &Checked<'_, '_>,
    program: &Program,
    case: &IdleCase,
    read: &[bool],
    w: &Witness,
    idle: Interval,
    sibling: Interval,
) -> Diagnostic {
    let shown = |row: &[f64], idle: bool| assignment(program, case, read, row, idle);
    let n = rounded;
    let span = checked.bodies[checked.scope.reward.expect("the lint runs on a program with a reward")].span;
    let diag = Diagnostic::warning(
        "idle-outranks",
        span,
        format!("a rollout that {} can get a higher advantage than a sibling whose quality is positive", case.name),
    )
    .with_note(format!(
        "in one group of two, the idle rollout ({}) earns reward = {}, adv = {}, and the sibling ({}) earns \
         reward = {}, adv = {}",
        shown(&w.idle, true),
        n(w.rewards[0]),
        n(w.advs[0]),
        shown(&w.sibling, false),
        n(w.rewards[1]),
        n(w.advs[1]),
    ))
    .with_note(format!(
        "shown by that pair; interval analysis over the declared ranges bounds such a rollout's reward to {idle} \
         and a sibling's to {sibling}, and `adv` orders the rollouts of a group by their reward"
    ));
    let q = checked.scope.schema.example_feature();
    let help = format!(
        "make doing nothing earn no more than any rollout with positive quality: gate the terms that pay or \
         charge for effort on quality, e.g. `if({q} > 0, ..., 0)`"
    );
    super::lints::advised(checked, LintCase::IdleOutranks, diag, help)
}
