//! The checked program: names resolved, types known, definitions in dependency
//! order, every definition with its layer and interval. Produced by the
//! checker; consumed by the interpreter, the CPU compiler and the CUDA codegen.

use crate::ast::{BinOp, UnOp};
use crate::interval::Interval;
use crate::schema::{FeatureRef, Type};
use crate::span::Span;

/// Index into [`Program::defs`].
pub type DefId = usize;
/// Index into [`Program::params`].
pub type ParamId = usize;
/// Index into [`Program::features`].
pub type FeatureId = usize;

/// A checked, resolved reward program: params, features read, definitions in dependency order.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// `param` declarations with their current values (a study may override them).
    pub params: Vec<Param>,
    /// The feature columns the program reads, each once.
    pub features: Vec<FeatureRef>,
    /// `let`s and the definitions `reward`, `adv`, `advantage`, in dependency
    /// order: an [`Expr::Def`] only refers to an earlier entry. Lets that
    /// nothing uses are kept (they may be used by checks).
    pub defs: Vec<Def>,
    /// The `reward` definition.
    pub reward: DefId,
    /// The `adv` definition (GRPO's estimator when the file leaves it out).
    pub adv: DefId,
    /// The `advantage` definition (`adv` when the file leaves it out).
    pub advantage: DefId,
    /// The `check` statements, in source order.
    pub checks: Vec<Check>,
    /// The step metrics (`step.kl`) the alerts read, each once, in first-use
    /// order: [`AlertExpr::Metric`] indexes this list, and whoever evaluates
    /// the alerts supplies one value per entry.
    pub metrics: Vec<String>,
    /// The `alert` statements, in source order.
    pub alerts: Vec<Alert>,
}

/// An `alert` statement, lowered: a tripwire over batch-level values.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// The bool condition; it reads only batch-level values.
    pub cond: AlertExpr,
    /// How many consecutive batches the condition must hold before the alert fires (at least 1).
    pub steps: u32,
    /// The message shown when it fires.
    pub message: String,
    /// The whole `alert` statement.
    pub span: Span,
    /// The condition's source text, for messages and logs.
    pub text: String,
}

/// An alert's condition: operators over step metrics and batch-level
/// values. A part that reads no step metric is a plain [`Expr`] whose value
/// is the same on every row (only batch reductions, params, constants and
/// lets built from them), so evaluating it over a table and taking any row
/// gives the batch's value.
#[derive(Clone, Debug, PartialEq)]
pub enum AlertExpr {
    /// A step metric: an index into [`Program::metrics`].
    Metric(usize),
    /// A prefix operator.
    Unary(UnOp, Box<AlertExpr>),
    /// An infix operator.
    Binary(BinOp, Box<AlertExpr>, Box<AlertExpr>),
    /// A built-in function.
    Call(Func, Vec<AlertExpr>),
    /// `x in [lo, hi]`.
    In(Box<AlertExpr>, Box<AlertExpr>, Box<AlertExpr>),
    /// A batch-level value that reads no step metric.
    Value(Expr),
}

impl AlertExpr {
    /// The plain expression this condition is once every step metric is
    /// replaced by its value (`metrics[i]` for [`AlertExpr::Metric`]`(i)`).
    pub fn with_metrics(&self, metrics: &[f64]) -> Expr {
        self.map_metrics(&|i| Expr::Number(metrics.get(i).copied().unwrap_or(f64::NAN)))
    }

    /// The plain expression this condition is with step metric `i` read from param
    /// `params[i]`, for backends that compile a program once and set the metrics per step.
    pub fn with_metric_params(&self, params: &[ParamId]) -> Expr {
        self.map_metrics(&|i| Expr::Param(params[i]))
    }

    fn map_metrics(&self, metric: &dyn Fn(usize) -> Expr) -> Expr {
        let b = |e: &AlertExpr| Box::new(e.map_metrics(metric));
        match self {
            AlertExpr::Metric(i) => metric(*i),
            AlertExpr::Unary(op, x) => Expr::Unary(*op, b(x)),
            AlertExpr::Binary(op, x, y) => Expr::Binary(*op, b(x), b(y)),
            AlertExpr::Call(f, args) => Expr::Call(*f, args.iter().map(|a| a.map_metrics(metric)).collect()),
            AlertExpr::In(x, lo, hi) => Expr::In(b(x), b(lo), b(hi)),
            AlertExpr::Value(e) => e.clone(),
        }
    }
}

impl Program {
    /// Alert `i`'s condition as a program of its own, so that every backend that compiles
    /// programs (the fused CPU plan, the C twin, the CUDA codegen) evaluates it: its `reward`,
    /// `adv` and `advantage` are the condition (1 where it holds, 0 where not; NaN holds, as in
    /// the interpreter), the same on every row. Each step metric becomes a param named as the
    /// metric (`step.kl`, which no `param` can be called), NaN until set.
    pub fn alert_program(&self, i: usize) -> Program {
        let alert = &self.alerts[i];
        let mut p = self.clone();
        let first = p.params.len();
        p.params.extend(self.metrics.iter().map(|name| Param {
            name: name.clone(),
            value: f64::NAN,
            span: alert.span,
        }));
        let ids: Vec<ParamId> = (first..first + self.metrics.len()).collect();
        p.defs.push(Def {
            name: format!("alert{i}"),
            kind: DefKind::Let,
            layer: Layer::Advantage,
            expr: alert.cond.with_metric_params(&ids),
            ty: Type::Bool,
            interval: Interval::UNIT,
            span: alert.span,
            explicit: true,
        });
        let id = p.defs.len() - 1;
        (p.reward, p.adv, p.advantage) = (id, id, id);
        p.checks.clear();
        p.alerts.clear();
        p
    }
}

/// A `param` and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Its value: the file's, or a study's override.
    pub value: f64,
    /// The whole `param` statement.
    pub span: Span,
}

/// What kind of statement a definition comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DefKind {
    /// A `let`.
    Let,
    /// `reward`.
    Reward,
    /// `adv`.
    Adv,
    /// `advantage`.
    Advantage,
}

/// Which layer a definition lives in. The reward layer sees one rollout's
/// features; the advantage layer also sees `reward` and group/batch reductions of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Per-rollout features only.
    Reward,
    /// May read `reward` and reductions over groups or the batch.
    Advantage,
}

/// One definition, lowered and typed.
#[derive(Clone, Debug, PartialEq)]
pub struct Def {
    /// Its name (`reward`, or the let's name).
    pub name: String,
    /// Which statement form it comes from.
    pub kind: DefKind,
    /// Which layer it lives in.
    pub layer: Layer,
    /// Its lowered body.
    pub expr: Expr,
    /// The type of its value.
    pub ty: Type,
    /// The range interval analysis proved for every value of this definition.
    pub interval: Interval,
    /// Where it was defined; for a synthesised default (`adv`, `advantage`
    /// left out of the file) the span of the `reward` definition.
    pub span: Span,
    /// False when the definition is the language's default, not written by the user.
    pub explicit: bool,
}

/// A `check` statement, lowered.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The bool condition.
    pub expr: Expr,
    /// The whole `check` statement.
    pub span: Span,
    /// The condition's source text, for messages.
    pub text: String,
}

/// A built-in function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// `min(a, b, ...)`.
    Min,
    /// `max(a, b, ...)`.
    Max,
    /// `clip(x, lo, hi)`.
    Clip,
    /// `sqrt(x)`.
    Sqrt,
    /// `exp(x)`.
    Exp,
    /// `log(x)`, natural.
    Log,
    /// `abs(x)`.
    Abs,
    /// `sign(x)`: -1, 0 or 1.
    Sign,
    /// `sigmoid(x)`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// `mask(bool)`: 1 or 0.
    Mask,
    /// `if(bool, then, else)`.
    If,
}

impl Func {
    /// The function's name in source.
    pub fn name(self) -> &'static str {
        match self {
            Func::Min => "min",
            Func::Max => "max",
            Func::Clip => "clip",
            Func::Sqrt => "sqrt",
            Func::Exp => "exp",
            Func::Log => "log",
            Func::Abs => "abs",
            Func::Sign => "sign",
            Func::Sigmoid => "sigmoid",
            Func::Tanh => "tanh",
            Func::Mask => "mask",
            Func::If => "if",
        }
    }

    /// Every built-in function.
    pub const ALL: [Func; 12] = [
        Func::Min,
        Func::Max,
        Func::Clip,
        Func::Sqrt,
        Func::Exp,
        Func::Log,
        Func::Abs,
        Func::Sign,
        Func::Sigmoid,
        Func::Tanh,
        Func::Mask,
        Func::If,
    ];
}

/// Over which rollouts a reduction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The rollouts that share a prompt; the result is broadcast back to each.
    Group,
    /// Every rollout of the step (or of the evaluated file).
    Batch,
}

/// A reduction over a group or the batch.
///
/// With a mask (`group.mean(x, where = m)`) a reduction reads only the rows
/// where `m` holds (any non-zero value, NaN included, as everywhere), and
/// never reads the others' values: a NaN in a masked-out row does not
/// reach it. When no row of the group (or batch) is selected, `mean`,
/// `std`, `sum`, `max`, `min` and `count` are all 0, so no NaN leaks out of
/// an empty selection; `rank` ranks the selected rows among themselves (1
/// to k) and gives every masked-out row 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The arithmetic mean.
    Mean,
    /// Population standard deviation.
    Std,
    /// The sum of the values.
    Sum,
    /// The largest value.
    Max,
    /// The smallest value.
    Min,
    /// Takes no argument.
    Count,
    /// 1 for the lowest to G for the highest, ties share their average rank (group only).
    Rank,
}

impl ReduceOp {
    /// The method name as written in the language (`group.mean(x)` gives `mean`).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Mean => "mean",
            ReduceOp::Std => "std",
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Count => "count",
            ReduceOp::Rank => "rank",
        }
    }
}

/// A resolved, typed expression. Bools are computed as 1.0/0.0 by the backends.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A numeric literal.
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A per-rollout feature value.
    Feature(FeatureId),
    /// A `param`'s current value.
    Param(ParamId),
    /// The value of an earlier definition or `let`.
    Def(DefId),
    /// A prefix operator applied to an operand.
    Unary(UnOp, Box<Expr>),
    /// An infix operator applied to two operands.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A built-in function call with its arguments.
    Call(Func, Vec<Expr>),
    /// `x in [lo, hi]`.
    In(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `group.op(x)` / `batch.op(x)`; the argument is `None` only for
    /// `count`. The second expression is the mask of `where = m`: only the
    /// rows where it holds enter the reduction (see [`ReduceOp`] for what
    /// each op gives when none does).
    Reduce(Scope, ReduceOp, Option<Box<Expr>>, Option<Box<Expr>>),
}

impl Program {
    /// The definition with the given id.
    pub fn def(&self, id: DefId) -> &Def {
        &self.defs[id]
    }

    /// Whether any definition reads a batch reduction (`batch.mean(x)`, `batch.std(x)`, ...).
    /// Without one, a group's outputs depend on that group's rows alone, so a table may be
    /// evaluated a chunk of whole groups at a time with the same values.
    pub fn reads_batch(&self) -> bool {
        fn walk(e: &Expr) -> bool {
            match e {
                Expr::Reduce(Scope::Batch, ..) => true,
                Expr::Reduce(_, _, arg, mask) => arg.iter().chain(mask).any(|x| walk(x)),
                Expr::Unary(_, x) => walk(x),
                Expr::Binary(_, x, y) => walk(x) || walk(y),
                Expr::Call(_, args) => args.iter().any(walk),
                Expr::In(x, lo, hi) => walk(x) || walk(lo) || walk(hi),
                Expr::Number(_) | Expr::Bool(_) | Expr::Feature(_) | Expr::Param(_) | Expr::Def(_) => false,
            }
        }
        self.defs.iter().any(|d| walk(&d.expr))
    }

    /// The id of the `param` with this name, if the program declares one.
    pub fn param_id(&self, name: &str) -> Option<ParamId> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Overrides a `param`'s value (a study's override). Returns false when the
    /// program declares no such param.
    pub fn set_param(&mut self, name: &str, value: f64) -> bool {
        match self.param_id(name) {
            Some(id) => {
                self.params[id].value = value;
                true
            }
            None => false,
        }
    }
}
