//! The stage IR that the CPU backend (and the CUDA codegen) compile a program into.
//!
//! A program becomes a list of **stages**, run in order:
//!
//! - an [`Stage::Elementwise`] stage evaluates a DAG of elementwise ops for
//!   every row in one pass. Its op list is in SSA form over virtual registers
//!   (`r3 = mul r1 r2`); each register holds one value per row. Registers are
//!   loaded from feature columns, params, constants, columns materialised by
//!   earlier stages, and per-group or batch values (a group value reads as the
//!   value of the row's group). [`Elementwise::stores`] names the registers
//!   that later stages or the caller need, and the column each goes to.
//! - a [`Stage::GroupReduce`] stage is a segmented reduction of a column over
//!   contiguous groups, one value per group; [`Stage::GroupRank`] ranks within
//!   each group and produces a column.
//! - a [`Stage::BatchReduce`] stage reduces a whole column to one value
//!   ([`Stage::BatchRank`] ranks the whole column, producing a column).
//!
//! A reduction or rank with a `where` mask reads the mask from a column (or
//! feature) of its own, like its argument; a mask that folds to a constant
//! is dropped (true) or makes the reduction the constant 0 (false).
//!
//! Lowering ([`lower`]) inlines every definition into one hash-consed DAG
//! (common subexpressions are shared, constant subtrees folded with the very
//! f64 operations the interpreter uses), gives each node a *level* — the
//! number of reductions beneath it — and puts the nodes of level `k` into
//! elementwise stage `k`, followed by the reductions that read stage `k`'s
//! columns. A stage reads a lower-level value from its column when it has
//! one (an output, a reduction's argument) and recomputes it otherwise — a
//! few ops per row cost less than a full-length column written and read back. The outputs `reward`, `adv` and `advantage` are always
//! columns ([`IrProgram::outputs`]).
//!
//! Ops are chosen so that each maps to one line of C: n-ary `min`/`max` are
//! chains of binary ones (folded left, as the interpreter folds), `clip` is
//! `min(max(x, lo), hi)`. Params stay loads, so a study changes one without
//! recompiling ([`IrProgram::params`]).

mod lower;

pub(crate) use lower::fold;
pub use lower::lower;

use std::fmt;

use crate::ast::{BinOp, UnOp};
use crate::hir::{FeatureId, Func, ParamId, ReduceOp};
use crate::schema::format_number;

/// Index of a materialised per-row column.
pub type ColumnId = usize;
/// Index of a per-group value (one `f64` per group).
pub type GroupValueId = usize;
/// Index of a batch value (one `f64`).
pub type BatchValueId = usize;
/// A virtual register of an elementwise stage (SSA: written by exactly one op).
pub type Reg = usize;

/// A program in stages.
#[derive(Clone, Debug, PartialEq)]
pub struct IrProgram {
    /// Feature column keys, indexed by [`FeatureId`] (as in the HIR program).
    pub features: Vec<String>,
    /// Param names and current values, indexed by [`ParamId`].
    pub params: Vec<(String, f64)>,
    /// Names of the materialised columns (a definition's name where a column
    /// holds one, `t<N>` otherwise).
    pub columns: Vec<String>,
    /// Number of per-group value slots (one value per group each).
    pub group_values: usize,
    /// Number of whole-batch scalar slots.
    pub batch_values: usize,
    /// The passes to run, in dependency order.
    pub stages: Vec<Stage>,
    /// The columns holding `reward`, `adv` and `advantage` (two may coincide).
    pub outputs: Outputs,
}

/// The columns that hold a program's three outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outputs {
    /// Column of `reward`.
    pub reward: ColumnId,
    /// Column of `adv`.
    pub adv: ColumnId,
    /// Column of `advantage`.
    pub advantage: ColumnId,
}

/// Where a reduction reads its argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// An input feature column.
    Feature(FeatureId),
    /// A column materialised by an earlier stage.
    Column(ColumnId),
    /// `count()`, which reads nothing.
    None,
}

/// One pass of a lowered program.
#[derive(Clone, Debug, PartialEq)]
pub enum Stage {
    /// A fused row-by-row pass.
    Elementwise(Elementwise),
    /// A reduction within each group, one value per group.
    GroupReduce {
        /// The reduction to compute.
        op: ReduceOp,
        /// Where it reads its argument.
        arg: Source,
        /// Where it reads its `where` mask, if it has one.
        mask: Option<Source>,
        /// The group value slot it writes.
        out: GroupValueId,
    },
    /// Ranks within each group (1 = lowest, ties averaged).
    GroupRank {
        /// The values to rank.
        arg: Source,
        /// Where it reads its `where` mask, if it has one.
        mask: Option<Source>,
        /// The column receiving the ranks.
        out: ColumnId,
    },
    /// A reduction over the whole batch, one scalar.
    BatchReduce {
        /// The reduction to compute.
        op: ReduceOp,
        /// Where it reads its argument.
        arg: Source,
        /// Where it reads its `where` mask, if it has one.
        mask: Option<Source>,
        /// The batch value slot it writes.
        out: BatchValueId,
    },
    /// Ranks over the whole batch (1 = lowest, ties averaged).
    BatchRank {
        /// The values to rank.
        arg: Source,
        /// Where it reads its `where` mask, if it has one.
        mask: Option<Source>,
        /// The column receiving the ranks.
        out: ColumnId,
    },
}

/// One fused pass over the rows.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Elementwise {
    /// In dependency order; `ops[i]` writes register `i`.
    pub ops: Vec<Op>,
    /// `(register, column)`: copy the register's values to the column.
    pub stores: Vec<(Reg, ColumnId)>,
}

/// An elementwise op. The register it writes is its index in [`Elementwise::ops`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// A literal constant.
    Const(f64),
    /// Load a `param`'s current value.
    Param(ParamId),
    /// Load the row's feature value.
    Feature(FeatureId),
    /// Load the row's value of a materialised column.
    Column(ColumnId),
    /// Load the row's group value from a group reduction.
    Group(GroupValueId),
    /// Load a batch scalar from a batch reduction.
    Batch(BatchValueId),
    /// An operator on registers.
    Apply(Apply<Reg>),
}

/// An operator on operands `R`: everything a reward computes row by row
/// besides loading values. Lowering's DAG applies it to nodes and an
/// elementwise stage to registers ([`Op::Apply`]), so the two name the same
/// operators the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Apply<R> {
    /// A prefix operator.
    Unary(UnOp, R),
    /// An infix operator.
    Binary(BinOp, R, R),
    /// NaN-propagating binary min (`ops::min`).
    Min(R, R),
    /// NaN-propagating binary max (`ops::max`).
    Max(R, R),
    /// A one-argument built-in: sqrt, exp, log, abs, sign, sigmoid, tanh, mask.
    Func(Func, R),
    /// `if(b, x, y)`.
    Select(R, R, R),
    /// `x in [lo, hi]`.
    In(R, R, R),
}

impl<R: Copy> Apply<R> {
    /// The operands, in order.
    pub fn operands(self) -> impl Iterator<Item = R> {
        let (n, operands) = match self {
            Apply::Unary(_, a) | Apply::Func(_, a) => (1, [a, a, a]),
            Apply::Binary(_, a, b) | Apply::Min(a, b) | Apply::Max(a, b) => (2, [a, b, b]),
            Apply::Select(a, b, c) | Apply::In(a, b, c) => (3, [a, b, c]),
        };
        operands.into_iter().take(n)
    }

    /// The same operator on `f` of each operand, `f` called on the operands in order.
    pub fn map<S>(self, mut f: impl FnMut(R) -> S) -> Apply<S> {
        self.try_map(|r| Some(f(r))).expect("`f` maps every operand")
    }

    /// The same operator on `f` of each operand, or `None` when `f` gives
    /// none for one; `f` is called on the operands in order, up to the first `None`.
    pub fn try_map<S>(self, mut f: impl FnMut(R) -> Option<S>) -> Option<Apply<S>> {
        Some(match self {
            Apply::Unary(op, a) => Apply::Unary(op, f(a)?),
            Apply::Binary(op, a, b) => Apply::Binary(op, f(a)?, f(b)?),
            Apply::Min(a, b) => Apply::Min(f(a)?, f(b)?),
            Apply::Max(a, b) => Apply::Max(f(a)?, f(b)?),
            Apply::Func(func, a) => Apply::Func(func, f(a)?),
            Apply::Select(a, b, c) => Apply::Select(f(a)?, f(b)?, f(c)?),
            Apply::In(a, b, c) => Apply::In(f(a)?, f(b)?, f(c)?),
        })
    }
}

impl Op {
    /// The registers the op reads.
    pub fn args(&self) -> impl Iterator<Item = Reg> {
        let apply = match *self {
            Op::Apply(apply) => Some(apply),
            Op::Const(_) | Op::Param(_) | Op::Feature(_) | Op::Column(_) | Op::Group(_) | Op::Batch(_) => None,
        };
        apply.into_iter().flat_map(|a| a.operands())
    }

    /// True for ops whose value is the same on every row (constants, params, batch values).
    pub fn is_uniform(&self) -> bool {
        matches!(self, Op::Const(_) | Op::Param(_) | Op::Batch(_))
    }
}

impl IrProgram {
    /// Overrides a param's value. Returns false when there is no such param.
    pub fn set_param(&mut self, name: &str, value: f64) -> bool {
        match self.params.iter_mut().find(|(n, _)| n == name) {
            Some(p) => {
                p.1 = value;
                true
            }
            None => false,
        }
    }
}

impl fmt::Display for IrProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, key) in self.features.iter().enumerate() {
            writeln!(f, "feature f{i} = {key}")?;
        }
        for (i, (name, value)) in self.params.iter().enumerate() {
            writeln!(f, "param p{i} {name} = {}", format_number(*value))?;
        }
        let col = |c: ColumnId| format!("c{c}:{}", self.columns[c]);
        let src = |s: &Source| match s {
            Source::Feature(i) => format!("f{i}"),
            Source::Column(c) => col(*c),
            Source::None => String::new(),
        };
        let masked = |m: &Option<Source>| m.as_ref().map_or(String::new(), |m| format!(" where {}", src(m)));
        for (i, stage) in self.stages.iter().enumerate() {
            match stage {
                Stage::Elementwise(e) => {
                    writeln!(f, "stage {i}: elementwise")?;
                    for (r, op) in e.ops.iter().enumerate() {
                        writeln!(f, "  r{r} = {}", OpText(op))?;
                    }
                    for (r, c) in &e.stores {
                        writeln!(f, "  store {} = r{r}", col(*c))?;
                    }
                }
                Stage::GroupReduce { op, arg, mask, out } => {
                    writeln!(f, "stage {i}: group g{out} = {}({}){}", op.name(), src(arg), masked(mask))?
                }
                Stage::GroupRank { arg, mask, out } => {
                    writeln!(f, "stage {i}: group {} = rank({}){}", col(*out), src(arg), masked(mask))?
                }
                Stage::BatchReduce { op, arg, mask, out } => {
                    writeln!(f, "stage {i}: batch b{out} = {}({}){}", op.name(), src(arg), masked(mask))?
                }
                Stage::BatchRank { arg, mask, out } => {
                    writeln!(f, "stage {i}: batch {} = rank({}){}", col(*out), src(arg), masked(mask))?
                }
            }
        }
        let o = &self.outputs;
        writeln!(f, "outputs reward = {}, adv = {}, advantage = {}", col(o.reward), col(o.adv), col(o.advantage))
    }
}

struct OpText<'a>(&'a Op);

impl fmt::Display for OpText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.0 {
            Op::Const(x) => write!(f, "const {}", format_number(x)),
            Op::Param(p) => write!(f, "param p{p}"),
            Op::Feature(i) => write!(f, "feature f{i}"),
            Op::Column(c) => write!(f, "column c{c}"),
            Op::Group(g) => write!(f, "group g{g}"),
            Op::Batch(b) => write!(f, "batch b{b}"),
            Op::Apply(Apply::Unary(op, a)) => write!(f, "{} r{a}", unary_name(op)),
            Op::Apply(Apply::Binary(op, a, b)) => write!(f, "{} r{a} r{b}", binary_name(op)),
            Op::Apply(Apply::Min(a, b)) => write!(f, "min r{a} r{b}"),
            Op::Apply(Apply::Max(a, b)) => write!(f, "max r{a} r{b}"),
            Op::Apply(Apply::Func(func, a)) => write!(f, "{} r{a}", func.name()),
            Op::Apply(Apply::Select(b, x, y)) => write!(f, "select r{b} r{x} r{y}"),
            Op::Apply(Apply::In(x, lo, hi)) => write!(f, "in r{x} r{lo} r{hi}"),
        }
    }
}

pub(crate) fn unary_name(op: UnOp) -> &'static str {
    match op {
        UnOp::Neg => "neg",
        UnOp::Not => "not",
    }
}

pub(crate) fn binary_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "add",
        BinOp::Sub => "sub",
        BinOp::Mul => "mul",
        BinOp::Div => "div",
        BinOp::Pow => "pow",
        BinOp::Lt => "lt",
        BinOp::Le => "le",
        BinOp::Gt => "gt",
        BinOp::Ge => "ge",
        BinOp::Eq => "eq",
        BinOp::Ne => "ne",
        BinOp::And => "and",
        BinOp::Or => "or",
    }
}
