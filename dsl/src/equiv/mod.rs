//! Equivalence of two programs' advantages: whether two reward variants
//! would push a policy the same way on every input.
//!
//! [`compare`] first tries a proof. Each program's `advantage` is brought to
//! a normal form (`nf`): definitions inlined, params replaced by their values,
//! constants folded, sums and products flattened and sorted (commutativity,
//! associativity), products distributed over sums, and the reductions
//! rewritten by the rules that carry the estimators' semantics — a group
//! (or batch) reduction is linear in the factors constant over its scope,
//! `std` drops terms constant over the group and takes a constant scale out
//! as `|k|`, `rank` ignores such terms and positive scales. When the two
//! forms are the same text, the advantages are equal for every input:
//! [`Verdict::Proved`]. That is how `2 * Fb(file)` and `Fb(file)` meet under
//! an estimator `(r − mean)/std` (the 2 comes out of numerator and
//! denominator), and how `reward + group.mean(c)` meets `reward` under
//! centering (the mean of a group constant is itself).
//!
//! **The std epsilon.** Under GRPO's `(r − m)/(s + ε)`, scaling the reward by
//! `k > 0` gives `k(r − m)/(k s + ε) = (r − m)/(s + ε/k)`: not the same
//! function, since the two differ wherever `s` is comparable to `ε`. The
//! proof never ignores it. When the forms differ only in the constants added
//! to denominators, the verdict is its own, [`Verdict::EqualUpToEpsilon`],
//! naming the two denominators; callers must not treat it as proved.
//!
//! **What "proved" means.** The rewrites are identities over the real
//! numbers, assuming every denominator is non-zero (`x / x` is 1).
//! Floating-point results of two proved-equal programs may still differ in
//! the last bits, since they round in different places; and where a
//! denominator is zero over the reals they may differ outright: an ε-free
//! `(r − m)/s` on a group of equal rewards divides 0 by 0 for one variant
//! and rounding noise by rounding noise (±1) for another. Coefficients are
//! compared to 12 significant digits.
//!
//! When no proof is found the advantages are compared on generated groups
//! (feature values from the schema's ranges, biased towards range ends, ties
//! and all-equal groups, from a fixed seed), evaluated by the interpreter:
//! [`Verdict::EqualOnGroups`] ("equal on N groups, not proved") or
//! [`Verdict::Different`] with the first group where they part.

mod nf;
#[cfg(test)]
mod tests;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::check::verify::cases::{self, Case, Column};
use crate::eval::{EvalError, EvalOptions, NonFinite};
use crate::hir::{Program, Scope};
use crate::interp;
use crate::schema::FeatureSchema;
use crate::table::TableError;
use nf::{Nf, Normaliser};

/// Options of [`compare`].
#[derive(Clone, Debug, PartialEq)]
pub struct EquivOptions {
    /// The seed of the generated groups.
    pub seed: u64,
    /// How many groups the advantages are compared on when no proof is found.
    pub groups: usize,
    /// The size of every generated group (a study's `group_size`).
    pub group_size: usize,
    /// Two advantages `a`, `b` count as equal when `|a − b| ≤ tolerance · (1 + max(|a|, |b|))`
    /// (or both are NaN).
    pub tolerance: f64,
}

impl Default for EquivOptions {
    fn default() -> Self {
        EquivOptions { seed: 0x0e91_5eed, groups: 1000, group_size: 8, tolerance: 1e-9 }
    }
}

/// What [`compare`] found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Verdict {
    /// The advantages' normal forms are the same: equal for every input.
    Proved {
        /// How the second program's reward relates to the first's (`positive scaling (×2)`: twice
        /// it; `a group-constant term`: it plus a value constant within each group).
        reason: String,
    },
    /// The normal forms differ only in the constants added to denominators
    /// (the std epsilon): equal wherever those constants are negligible, not proved.
    EqualUpToEpsilon {
        /// How the rewards relate.
        reason: String,
        /// The differing denominators, this program's and the other's.
        denominators: (String, String),
        /// The largest `|a − b|` on the generated groups.
        max_difference: f64,
        /// How many groups that was measured on.
        groups: usize,
    },
    /// No proof, but the advantages agreed on every generated group.
    EqualOnGroups {
        /// How many groups were compared.
        groups: usize,
    },
    /// The advantages differ on a generated group.
    Different {
        /// The group that shows it.
        witness: Witness,
    },
}

impl Verdict {
    /// Whether the verdict is a proof of equality (the only one a study merges on).
    pub fn is_proved(&self) -> bool {
        matches!(self, Verdict::Proved { .. })
    }

    /// One line for humans: `proved: positive scaling (×2)`, `equal on 1000 groups, not proved`, ...
    pub fn describe(&self) -> String {
        match self {
            Verdict::Proved { reason } => format!("proved: {reason}"),
            Verdict::EqualUpToEpsilon { reason, denominators, max_difference, groups } => format!(
                "equal up to ε, not proved ({reason}; denominators `{}` vs `{}`; max |Δ| = {max_difference:.3e} \
                 on {groups} groups)",
                denominators.0, denominators.1
            ),
            Verdict::EqualOnGroups { groups } => format!("equal on {groups} groups, not proved"),
            Verdict::Different { witness } => format!("different: {}", witness.describe()),
        }
    }
}

/// A generated group on which two advantages differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Witness {
    /// The feature columns, by key.
    pub columns: Vec<String>,
    /// One row of feature values per rollout, aligned with `columns`.
    pub rows: Vec<Vec<f64>>,
    /// The first program's advantage per rollout.
    pub left: Vec<f64>,
    /// The second program's.
    pub right: Vec<f64>,
    /// The first rollout where they differ.
    pub row: usize,
}

impl Witness {
    /// `rollout 3 of a group of 8: 0.5 vs -0.25 (Fb(file) = 1, c = 0)`.
    pub fn describe(&self) -> String {
        let values: Vec<String> = self
            .columns
            .iter()
            .zip(&self.rows[self.row])
            .map(|(k, v)| format!("{k} = {}", crate::schema::format_number(*v)))
            .collect();
        format!(
            "rollout {} of a group of {}: {} vs {} ({})",
            self.row,
            self.rows.len(),
            self.left[self.row],
            self.right[self.row],
            values.join(", ")
        )
    }
}

/// Why [`compare`] could not decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EquivError {
    /// A program reads a feature the schema does not declare (and so has no range for).
    #[error("the program reads feature `{key}`, which the schema does not declare")]
    UnknownFeature {
        /// The feature's column key.
        key: String,
    },
    /// The generated groups did not form a feature table.
    #[error("could not build a feature table of generated groups")]
    Table(#[from] TableError),
    /// Evaluating a program on the generated groups failed.
    #[error("evaluating on generated groups failed")]
    Eval(#[from] EvalError),
}

/// The normal form of a program's `advantage` as text (`None` when it grew
/// too large to normalise): two programs with the same text have the same
/// advantage for every input.
pub fn advantage_normal_form(program: &Program, schema: &FeatureSchema) -> Option<String> {
    let mut n = Normaliser::new(program, schema);
    let nf = n.def(program.advantage);
    (!n.overflow).then(|| nf.key())
}

/// Compares the advantages of `a` and `b` (checked against the same
/// `schema`, params set to the values they will run with).
pub fn compare(
    a: &Program,
    b: &Program,
    schema: &FeatureSchema,
    options: &EquivOptions,
) -> Result<Verdict, EquivError> {
    let (mut na, mut nb) = (Normaliser::new(a, schema), Normaliser::new(b, schema));
    let (adv_a, adv_b) = (na.def(a.advantage), nb.def(b.advantage));
    let (rew_a, rew_b) = (na.def(a.reward), nb.def(b.reward));
    let trusted = !na.overflow && !nb.overflow;
    if trusted && adv_a.key() == adv_b.key() {
        return Ok(Verdict::Proved { reason: relation(&rew_a, &rew_b) });
    }
    let sampled = sample(a, b, schema, options)?;
    if trusted && nf::strip_epsilon(&adv_a).key() == nf::strip_epsilon(&adv_b).key() {
        let (mut da, mut db) = (Vec::new(), Vec::new());
        adv_a.denominators(&mut da);
        adv_b.denominators(&mut db);
        let first_diff = |x: &[String], y: &[String]| x.iter().find(|d| !y.contains(d)).cloned().unwrap_or_default();
        let denominators = (first_diff(&da, &db), first_diff(&db, &da));
        let reason = relation(&rew_a, &rew_b);
        return Ok(Verdict::EqualUpToEpsilon {
            reason,
            denominators,
            max_difference: sampled.max_difference,
            groups: options.groups,
        });
    }
    Ok(match sampled.witness {
        Some(witness) => Verdict::Different { witness },
        None => Verdict::EqualOnGroups { groups: options.groups },
    })
}

/// How the second reward relates to the first: the same form, the first
/// scaled (`positive scaling (×2)`: `b = 2a`), the first plus a group
/// constant, or both.
fn relation(a: &Nf, b: &Nf) -> String {
    if a.key() == b.key() {
        return "the same reward after reordering and constant folding".to_string();
    }
    let (_, va) = a.split(Scope::Group);
    let (_, vb) = b.split(Scope::Group);
    if let (Some(la), Some(lb)) = (va.lead(), vb.lead())
        && va.key() == vb.scale(la / lb).key()
    {
        // `b = k·a + g`; what is left of `b − k·a` has no varying term: a group constant.
        let k = lb / la;
        let shifted = b.sub(&a.scale(k)).terms() > 0;
        let scaling = if (k - 1.0).abs() <= 1e-12 {
            None
        } else {
            let sign = if k > 0.0 { "positive" } else { "negative" };
            Some(format!("{sign} scaling (×{})", crate::schema::format_number(k)))
        };
        return match (scaling, shifted) {
            (Some(s), true) => format!("{s} and a group-constant term"),
            (Some(s), false) => s,
            (None, _) => "a group-constant term".to_string(),
        };
    }
    "the same advantage normal form".to_string()
}

struct Sampled {
    witness: Option<Witness>,
    max_difference: f64,
}

/// The advantages of `a` and `b` on `options.groups` generated groups, in
/// batches of four groups (so batch reductions see more than one).
fn sample(a: &Program, b: &Program, schema: &FeatureSchema, options: &EquivOptions) -> Result<Sampled, EquivError> {
    let mut columns: Vec<Column> = Vec::new();
    for f in a.features.iter().chain(&b.features) {
        if columns.iter().any(|c| c.key == f.key) {
            continue;
        }
        let decl = schema.get(&f.name).ok_or_else(|| EquivError::UnknownFeature { key: f.key.clone() })?;
        columns.push(Column::new(&f.key, decl));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let size = options.group_size.max(1);
    let eval_options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
    let batch = if a.reads_batch() || b.reads_batch() { 4 } else { 64 };
    let mut max_difference: f64 = 0.0;
    let mut witness = None;
    let mut done = 0;
    while done < options.groups {
        let n = batch.min(options.groups - done);
        let case = Case { groups: (0..n).map(|_| cases::draw_group(&mut rng, &columns, (size, size))).collect() };
        done += n;
        let table = cases::table(&columns, &[&case])?;
        let left = interp::eval(a, &table, &eval_options)?.advantage;
        let right = interp::eval(b, &table, &eval_options)?.advantage;
        for (row, (x, y)) in left.iter().zip(&right).enumerate() {
            if x.is_nan() && y.is_nan() {
                continue;
            }
            let diff = (x - y).abs();
            // A NaN against a number is never within the tolerance.
            let close = diff <= options.tolerance * (1.0 + x.abs().max(y.abs()));
            if !close && witness.is_none() {
                let g = table.group_of(row);
                let rows = table.group_rows(g);
                witness = Some(Witness {
                    columns: columns.iter().map(|c| c.key.clone()).collect(),
                    rows: case.groups[g].clone(),
                    left: left[rows.clone()].to_vec(),
                    right: right[rows.clone()].to_vec(),
                    row: row - rows.start,
                });
            }
            max_difference = max_difference.max(if diff.is_nan() { f64::INFINITY } else { diff });
        }
    }
    Ok(Sampled { witness, max_difference })
}
