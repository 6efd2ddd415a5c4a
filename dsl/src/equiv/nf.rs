//! The normal form of a program's values: a sum of monomials with real
//! coefficients, each monomial a product of atoms raised to integer powers.
//!
//! Every rewrite is an identity over the reals (given non-zero
//! denominators, see the module docs of [`super`]): constant folding,
//! commutativity and associativity of `+`, `*`, `&&`, `||`, `min`, `max` (terms
//! and factors are kept sorted by their rendered text), distribution of `*`
//! over `+`, and the reduction rules that carry estimator semantics — a
//! reduction is linear in terms that are constant over its scope, `std`
//! ignores such terms and scales by `|k|`, `rank` ignores them and a positive
//! scale, `max`/`min` swap under a negative one. Two programs whose
//! normal forms render the same text compute the same function.

use std::collections::BTreeMap;

use crate::ast::{BinOp, UnOp};
use crate::hir::{Expr, Func, Program, ReduceOp, Scope};
use crate::interp::ops;
use crate::schema::{FeatureSchema, format_number};

/// Terms an intermediate form may hold before normalisation gives up (distributing
/// products of sums grows them multiplicatively).
const MAX_TERMS: usize = 512;
/// Largest integer power expanded into a product.
const MAX_POWER: f64 = 16.0;

/// An indivisible factor of a monomial.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Atom {
    /// A feature column by key, and whether it is constant within a group.
    Feature(String, bool),
    /// A reduction; its argument (none for `count`) and mask in normal form.
    Reduce(Scope, ReduceOp, Option<Nf>, Option<Nf>),
    /// A built-in function that does not fold.
    Call(Func, Vec<Nf>),
    /// `x op 0`, with `op` one of `>`, `>=`, `==`, `!=` and `x` scaled so its
    /// first varying term has coefficient ±1 (1 for `==`/`!=`).
    Cmp(BinOp, Nf),
    /// `&&` / `||` with its operands sorted.
    Logic(BinOp, Nf, Nf),
    /// `!x`.
    Not(Nf),
    /// `x in [lo, hi]`.
    In(Nf, Nf, Nf),
    /// `1 / x` for a sum `x` of several terms, scaled so its first varying term has coefficient 1.
    Inv(Nf),
    /// `x ^ y` where `y` is not a small integer constant.
    Pow(Nf, Nf),
}

/// A product of atoms with non-zero integer exponents, keyed by the atom's text.
#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct Mono(BTreeMap<String, (Atom, i32)>);

/// A sum of monomials with their coefficients, keyed by the monomial's text
/// (the constant term's key is empty).
#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct Nf(BTreeMap<String, (Mono, f64)>);

/// A coefficient as keys write it: rounded to 12 significant digits, so that
/// folding `0.1 * 3` and writing `0.3` give the same text.
fn coef_text(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let rounded: f64 = format!("{x:.11e}").parse().unwrap_or(x);
    format_number(rounded)
}

impl Atom {
    pub(crate) fn key(&self) -> String {
        match self {
            Atom::Feature(key, _) => key.clone(),
            Atom::Reduce(scope, op, arg, mask) => {
                let scope = match scope {
                    Scope::Group => "group",
                    Scope::Batch => "batch",
                };
                let arg = arg.as_ref().map_or(String::new(), Nf::key);
                let mask = mask.as_ref().map_or(String::new(), |m| format!(", where = {}", m.key()));
                format!("{scope}.{}({arg}{mask})", op.name())
            }
            Atom::Call(f, args) => {
                format!("{}({})", f.name(), args.iter().map(Nf::key).collect::<Vec<_>>().join(", "))
            }
            Atom::Cmp(op, x) => format!("({} {} 0)", x.key(), op.symbol()),
            Atom::Logic(op, a, b) => format!("({} {} {})", a.key(), op.symbol(), b.key()),
            Atom::Not(x) => format!("!({})", x.key()),
            Atom::In(x, lo, hi) => format!("({} in [{}, {}])", x.key(), lo.key(), hi.key()),
            Atom::Inv(x) => format!("1/({})", x.key()),
            Atom::Pow(x, y) => format!("({})^({})", x.key(), y.key()),
        }
    }

    /// Whether the atom's value is the same on every row of one `scope` (a
    /// group, or the batch).
    fn constant_over(&self, scope: Scope) -> bool {
        match self {
            Atom::Feature(_, per_group) => scope == Scope::Group && *per_group,
            Atom::Reduce(s, ..) => scope == Scope::Group || *s == Scope::Batch,
            Atom::Call(_, args) => args.iter().all(|a| a.constant_over(scope)),
            Atom::Cmp(_, x) | Atom::Not(x) | Atom::Inv(x) => x.constant_over(scope),
            Atom::Logic(_, a, b) | Atom::Pow(a, b) => a.constant_over(scope) && b.constant_over(scope),
            Atom::In(x, lo, hi) => [x, lo, hi].iter().all(|a| a.constant_over(scope)),
        }
    }

    /// Rebuilds the atom with `f` applied to its direct sub-forms, renormalised.
    fn map(&self, f: &dyn Fn(&Nf) -> Nf) -> Nf {
        match self {
            Atom::Feature(..) => Nf::atom(self.clone()),
            Atom::Reduce(scope, op, arg, mask) => reduce(*scope, *op, arg.as_ref().map(f), mask.as_ref().map(f))
                .unwrap_or_else(|| Nf::atom(Atom::Reduce(*scope, *op, arg.as_ref().map(f), mask.as_ref().map(f)))),
            Atom::Call(func, args) => call(*func, args.iter().map(f).collect()),
            Atom::Cmp(op, x) => compare(*op, f(x), Nf::default()),
            Atom::Logic(op, a, b) => logic(*op, f(a), f(b)),
            Atom::Not(x) => not(f(x)),
            Atom::In(x, lo, hi) => in_range(f(x), f(lo), f(hi)),
            Atom::Inv(x) => f(x).inv(),
            Atom::Pow(x, y) => f(x).pow(f(y)),
        }
    }
}

impl Mono {
    fn key(&self) -> String {
        let parts: Vec<String> =
            self.0.iter().map(|(k, (_, e))| if *e == 1 { k.clone() } else { format!("{k}^{e}") }).collect();
        parts.join("*")
    }

    fn times(&self, other: &Mono) -> Mono {
        let mut out = self.clone();
        for (k, (atom, e)) in &other.0 {
            let entry = out.0.entry(k.clone()).or_insert_with(|| (atom.clone(), 0));
            entry.1 += e;
            if entry.1 == 0 {
                out.0.remove(k);
            }
        }
        out
    }

    fn constant_over(&self, scope: Scope) -> bool {
        self.0.values().all(|(a, _)| a.constant_over(scope))
    }

    /// The factors constant over `scope`, and the others.
    fn split(&self, scope: Scope) -> (Mono, Mono) {
        let (c, v): (BTreeMap<_, _>, BTreeMap<_, _>) =
            self.0.iter().map(|(k, x)| (k.clone(), x.clone())).partition(|(_, (a, _))| a.constant_over(scope));
        (Mono(c), Mono(v))
    }
}

impl Nf {
    pub(crate) fn constant(c: f64) -> Nf {
        let mut map = BTreeMap::new();
        if c != 0.0 {
            map.insert(String::new(), (Mono::default(), c));
        }
        Nf(map)
    }

    pub(crate) fn atom(a: Atom) -> Nf {
        let key = a.key();
        let mono = Mono(BTreeMap::from([(key.clone(), (a, 1))]));
        Nf(BTreeMap::from([(key, (mono, 1.0))]))
    }

    fn mono(mono: Mono, coef: f64) -> Nf {
        let mut nf = Nf::default();
        nf.push(mono, coef);
        nf
    }

    /// The canonical text: equal texts mean equal functions.
    pub(crate) fn key(&self) -> String {
        if self.0.is_empty() {
            return "0".to_string();
        }
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, (_, c))| match (k.is_empty(), *c == 1.0) {
                (true, _) => coef_text(*c),
                (false, true) => k.clone(),
                (false, false) => format!("{}*{k}", coef_text(*c)),
            })
            .collect();
        parts.join(" + ")
    }

    pub(crate) fn terms(&self) -> usize {
        self.0.len()
    }

    fn push(&mut self, mono: Mono, coef: f64) {
        let key = mono.key();
        match self.0.get_mut(&key) {
            Some(entry) => {
                let sum = entry.1 + coef;
                // A sum that cancels up to rounding is a cancelled term.
                if sum == 0.0 || sum.abs() <= 1e-12 * (entry.1.abs() + coef.abs()) {
                    self.0.remove(&key);
                } else {
                    entry.1 = sum;
                }
            }
            None if coef != 0.0 => {
                self.0.insert(key, (mono, coef));
            }
            None => {}
        }
    }

    pub(crate) fn as_constant(&self) -> Option<f64> {
        match self.0.len() {
            0 => Some(0.0),
            1 => self.0.get("").map(|(_, c)| *c),
            _ => None,
        }
    }

    pub(crate) fn add(&self, other: &Nf) -> Nf {
        let mut out = self.clone();
        for (mono, c) in other.0.values() {
            out.push(mono.clone(), *c);
        }
        out
    }

    pub(crate) fn scale(&self, k: f64) -> Nf {
        let mut out = Nf::default();
        for (mono, c) in self.0.values() {
            out.push(mono.clone(), c * k);
        }
        out
    }

    pub(crate) fn sub(&self, other: &Nf) -> Nf {
        self.add(&other.scale(-1.0))
    }

    pub(crate) fn mul(&self, other: &Nf) -> Nf {
        let mut out = Nf::default();
        for (ma, ca) in self.0.values() {
            for (mb, cb) in other.0.values() {
                out.push(ma.times(mb), ca * cb);
            }
        }
        out
    }

    /// The coefficient of the first term that is not the constant.
    pub(crate) fn lead(&self) -> Option<f64> {
        self.0.iter().find(|(k, _)| !k.is_empty()).map(|(_, (_, c))| *c)
    }

    pub(crate) fn inv(&self) -> Nf {
        if let Some(c) = self.as_constant() {
            return Nf::constant(1.0 / c);
        }
        if self.0.len() == 1 {
            let (mono, c) = self.0.values().next().expect("one term");
            let inverse = Mono(mono.0.iter().map(|(k, (a, e))| (k.clone(), (a.clone(), -e))).collect());
            return Nf::mono(inverse, 1.0 / c);
        }
        let k = self.lead().expect("a sum of several terms has a non-constant one");
        Nf::atom(Atom::Inv(self.scale(1.0 / k))).scale(1.0 / k)
    }

    pub(crate) fn pow(&self, exponent: Nf) -> Nf {
        match (self.as_constant(), exponent.as_constant()) {
            (Some(a), Some(b)) => Nf::constant(ops::binary(BinOp::Pow, a, b)),
            (_, Some(n)) if n == n.trunc() && n.abs() <= MAX_POWER && self.terms() <= 8 => {
                let mut out = Nf::constant(1.0);
                for _ in 0..(n.abs() as usize) {
                    out = out.mul(self);
                }
                if n < 0.0 { out.inv() } else { out }
            }
            _ => Nf::atom(Atom::Pow(self.clone(), exponent)),
        }
    }

    pub(crate) fn constant_over(&self, scope: Scope) -> bool {
        self.0.values().all(|(m, _)| m.constant_over(scope))
    }

    /// The terms constant over `scope`, and the others.
    pub(crate) fn split(&self, scope: Scope) -> (Nf, Nf) {
        let mut c = Nf::default();
        let mut v = Nf::default();
        for (mono, coef) in self.0.values() {
            if mono.constant_over(scope) { c.push(mono.clone(), *coef) } else { v.push(mono.clone(), *coef) }
        }
        (c, v)
    }

    /// Rebuilds every atom with `f` applied to its sub-forms, renormalised.
    pub(crate) fn map_atoms(&self, f: &dyn Fn(&Nf) -> Nf) -> Nf {
        let mut out = Nf::default();
        for (mono, coef) in self.0.values() {
            let mut term = Nf::constant(*coef);
            for (atom, e) in mono.0.values() {
                term = term.mul(&atom.map(f).pow(Nf::constant(f64::from(*e))));
            }
            out = out.add(&term);
        }
        out
    }

    /// Every `1/(…)` atom's text, anywhere inside.
    pub(crate) fn denominators(&self, out: &mut Vec<String>) {
        for (mono, _) in self.0.values() {
            for (atom, _) in mono.0.values() {
                if let Atom::Inv(_) = atom {
                    out.push(atom.key());
                }
                for sub in atom_children(atom) {
                    sub.denominators(out);
                }
            }
        }
    }
}

fn atom_children(atom: &Atom) -> Vec<&Nf> {
    match atom {
        Atom::Feature(..) => Vec::new(),
        Atom::Reduce(_, _, arg, mask) => arg.iter().chain(mask.iter()).collect(),
        Atom::Call(_, args) => args.iter().collect(),
        Atom::Cmp(_, x) | Atom::Not(x) | Atom::Inv(x) => vec![x],
        Atom::Logic(_, a, b) | Atom::Pow(a, b) => vec![a, b],
        Atom::In(x, lo, hi) => vec![x, lo, hi],
    }
}

/// The form with the constant term of every `1/(…)` removed, recursively:
/// `(x − m)/(s + ε)` becomes `(x − m)/s`. Two forms equal after it differ
/// only through the constants added to denominators.
pub(crate) fn strip_epsilon(nf: &Nf) -> Nf {
    nf.map_atoms(&|sub| strip_epsilon(sub)).map_atoms_inv()
}

impl Nf {
    /// Drops the constant inside each top-level `1/(…)` (sub-forms were already stripped).
    fn map_atoms_inv(&self) -> Nf {
        let mut out = Nf::default();
        for (mono, coef) in self.0.values() {
            let mut term = Nf::constant(*coef);
            for (atom, e) in mono.0.values() {
                let factor = match atom {
                    Atom::Inv(x) => {
                        let mut x = x.clone();
                        x.0.remove("");
                        x.inv()
                    }
                    other => Nf::atom(other.clone()),
                };
                term = term.mul(&factor.pow(Nf::constant(f64::from(*e))));
            }
            out = out.add(&term);
        }
        out
    }
}

/// `x op y` in normal form.
fn compare(op: BinOp, x: Nf, y: Nf) -> Nf {
    if let (Some(a), Some(b)) = (x.as_constant(), y.as_constant()) {
        return Nf::constant(ops::binary(op, a, b));
    }
    let (op, d) = match op {
        BinOp::Lt => (BinOp::Gt, y.sub(&x)),
        BinOp::Le => (BinOp::Ge, y.sub(&x)),
        other => (other, x.sub(&y)),
    };
    if let Some(c) = d.as_constant() {
        return Nf::constant(ops::binary(op, c, 0.0));
    }
    let lead = d.lead().expect("a non-constant form has a non-constant term");
    // A positive scale keeps an order; any non-zero one keeps (in)equality.
    let k = if matches!(op, BinOp::Eq | BinOp::Ne) { lead } else { lead.abs() };
    Nf::atom(Atom::Cmp(op, d.scale(1.0 / k)))
}

fn logic(op: BinOp, a: Nf, b: Nf) -> Nf {
    if let (Some(x), Some(y)) = (a.as_constant(), b.as_constant()) {
        return Nf::constant(ops::binary(op, x, y));
    }
    let (a, b) = if a.key() <= b.key() { (a, b) } else { (b, a) };
    Nf::atom(Atom::Logic(op, a, b))
}

fn not(x: Nf) -> Nf {
    match x.as_constant() {
        Some(c) => Nf::constant(ops::unary(UnOp::Not, c)),
        None => Nf::atom(Atom::Not(x)),
    }
}

fn in_range(x: Nf, lo: Nf, hi: Nf) -> Nf {
    match (x.as_constant(), lo.as_constant(), hi.as_constant()) {
        (Some(a), Some(l), Some(h)) => Nf::constant(ops::in_range(a, l, h)),
        _ => Nf::atom(Atom::In(x, lo, hi)),
    }
}

fn call(f: Func, mut args: Vec<Nf>) -> Nf {
    let constants: Option<Vec<f64>> = args.iter().map(Nf::as_constant).collect();
    if let Some(values) = constants {
        return Nf::constant(ops::call(f, &values));
    }
    match f {
        Func::If => {
            if let Some(c) = args[0].as_constant() {
                return if ops::truthy(c) { args.swap_remove(1) } else { args.swap_remove(2) };
            }
        }
        Func::Min | Func::Max => {
            if args.len() == 1 {
                return args.swap_remove(0);
            }
            args.sort_by_key(Nf::key);
        }
        _ => {}
    }
    Nf::atom(Atom::Call(f, args))
}

/// The normal form of a reduction, or `None` when no rule applies (the
/// caller keeps it as an atom).
fn reduce(scope: Scope, op: ReduceOp, arg: Option<Nf>, mask: Option<Nf>) -> Option<Nf> {
    let mask = match mask.as_ref().map(Nf::as_constant) {
        // A constant mask selects every row or none (then every op gives 0).
        Some(Some(m)) if ops::truthy(m) => None,
        Some(Some(_)) => return Some(Nf::default()),
        _ => mask,
    };
    let atom = |arg: Option<Nf>| Nf::atom(Atom::Reduce(scope, op, arg, mask.clone()));
    let Some(arg) = arg else { return Some(atom(None)) };
    let (c, v) = arg.split(scope);
    let masked = mask.is_some();
    match op {
        ReduceOp::Mean | ReduceOp::Sum => {
            // Linear: each term's factors constant over the scope come out.
            let mut out = Nf::default();
            for (mono, coef) in arg.0.values() {
                let (outside, inside) = mono.split(scope);
                let inner = if inside.0.is_empty() && !masked {
                    match op {
                        ReduceOp::Mean => Nf::constant(1.0),
                        _ => Nf::atom(Atom::Reduce(scope, ReduceOp::Count, None, None)),
                    }
                } else {
                    atom(Some(Nf::mono(inside, 1.0)))
                };
                out = out.add(&Nf::mono(outside, *coef).mul(&inner));
            }
            Some(out)
        }
        ReduceOp::Std => {
            // Shifts by scope constants vanish; a constant scale comes out as |k|.
            let Some(k) = v.lead() else { return Some(Nf::default()) };
            Some(atom(Some(v.scale(1.0 / k))).scale(k.abs()))
        }
        ReduceOp::Rank => {
            let k = v.lead()?;
            // Ranks ignore shifts and positive scales.
            Some(atom(Some(v.scale(1.0 / k.abs()))))
        }
        ReduceOp::Max | ReduceOp::Min => {
            let Some(k) = v.lead() else {
                return if masked { None } else { Some(c) };
            };
            if masked && c.terms() > 0 {
                // An empty selection gives 0, not the shift: keep the shift inside.
                return None;
            }
            let flipped = match (op, k > 0.0) {
                (ReduceOp::Max, true) | (ReduceOp::Min, false) => ReduceOp::Max,
                _ => ReduceOp::Min,
            };
            let inner = Nf::atom(Atom::Reduce(scope, flipped, Some(v.scale(1.0 / k)), mask.clone()));
            Some(c.add(&inner.scale(k)))
        }
        ReduceOp::Count => Some(atom(None)),
    }
}

/// Normal forms of a program's definitions, computed once each.
pub(crate) struct Normaliser<'a> {
    program: &'a Program,
    per_group: Vec<bool>,
    defs: Vec<Option<Nf>>,
    /// Set when a form grew past [`MAX_TERMS`]; the results are then not trusted.
    pub(crate) overflow: bool,
}

impl<'a> Normaliser<'a> {
    pub(crate) fn new(program: &'a Program, schema: &FeatureSchema) -> Normaliser<'a> {
        let per_group = program.features.iter().map(|f| schema.get(&f.name).is_some_and(|d| d.per_group)).collect();
        Normaliser { program, per_group, defs: vec![None; program.defs.len()], overflow: false }
    }

    /// The normal form of a definition.
    pub(crate) fn def(&mut self, id: usize) -> Nf {
        if let Some(nf) = &self.defs[id] {
            return nf.clone();
        }
        let nf = self.expr(&self.program.defs[id].expr);
        self.defs[id] = Some(nf.clone());
        nf
    }

    fn expr(&mut self, e: &Expr) -> Nf {
        let nf = match e {
            Expr::Number(x) => Nf::constant(*x),
            Expr::Bool(b) => Nf::constant(ops::from_bool(*b)),
            Expr::Feature(id) => Nf::atom(Atom::Feature(self.program.features[*id].key.clone(), self.per_group[*id])),
            Expr::Param(id) => Nf::constant(self.program.params[*id].value),
            Expr::Def(id) => self.def(*id),
            Expr::Unary(UnOp::Neg, x) => self.expr(x).scale(-1.0),
            Expr::Unary(UnOp::Not, x) => not(self.expr(x)),
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                match op {
                    BinOp::Add => a.add(&b),
                    BinOp::Sub => a.sub(&b),
                    BinOp::Mul => a.mul(&b),
                    BinOp::Div => a.mul(&b.inv()),
                    BinOp::Pow => a.pow(b),
                    BinOp::And | BinOp::Or => logic(*op, a, b),
                    cmp => compare(*cmp, a, b),
                }
            }
            Expr::Call(f, args) => {
                let args = args.iter().map(|a| self.expr(a)).collect();
                call(*f, args)
            }
            Expr::In(x, lo, hi) => {
                let (x, lo, hi) = (self.expr(x), self.expr(lo), self.expr(hi));
                in_range(x, lo, hi)
            }
            Expr::Reduce(scope, op, arg, mask) => {
                let arg = arg.as_ref().map(|a| self.expr(a));
                let mask = mask.as_ref().map(|m| self.expr(m));
                reduce(*scope, *op, arg.clone(), mask.clone())
                    .unwrap_or_else(|| Nf::atom(Atom::Reduce(*scope, *op, arg, mask)))
            }
        };
        if nf.terms() > MAX_TERMS {
            self.overflow = true;
            // Keep going with something small; the caller discards the result.
            return Nf::default();
        }
        nf
    }
}
