//! The syntax tree of a reward file, exactly as written: every node carries the
//! byte [`Span`] it was parsed from. Names are not resolved here (see `hir`).

use crate::span::Span;

/// A parsed reward file: its statements in source order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct File {
    /// The statements, in source order.
    pub items: Vec<Item>,
}

/// One statement and its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// What the statement is.
    pub kind: ItemKind,
    /// The whole statement, from its first token to the end of its expression.
    pub span: Span,
}

/// The five statement forms.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    /// `reward = EXPR`, `adv = EXPR`, `advantage = EXPR` (the checker rejects other names).
    Def {
        /// The output being defined (`reward`, `adv` or `advantage`).
        name: Ident,
        /// The formula it is defined as.
        value: Expr,
    },
    /// `let NAME = EXPR`.
    Let {
        /// The local name being bound.
        name: Ident,
        /// The expression the name stands for.
        value: Expr,
    },
    /// `param NAME = NUMBER` (a leading `-` is allowed).
    Param {
        /// The tunable parameter's name.
        name: Ident,
        /// Its default value, sign included.
        value: f64,
        /// Where the number (with its sign) sits in the source.
        value_span: Span,
    },
    /// `check BOOL_EXPR`.
    Check {
        /// The boolean condition that must hold for every input.
        cond: Expr,
    },
    /// `alert BOOL_EXPR [for N steps] : "message"`: a tripwire over
    /// batch-level values, evaluated once per batch (a training step).
    Alert {
        /// The condition that fires the alert.
        cond: Expr,
        /// `for N steps`: how many consecutive batches the condition must
        /// hold before the alert fires (`None`: one).
        steps: Option<Count>,
        /// The message, unquoted and unescaped.
        message: String,
        /// Where the quoted message sits in the source.
        message_span: Span,
    },
}

/// A whole number as written (the `5` of `for 5 steps`), with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Count {
    /// The value.
    pub value: u32,
    /// Where it is written.
    pub span: Span,
}

/// A name as written, with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The text of the name (dotted names keep their dots).
    pub name: String,
    /// Where the name is written.
    pub span: Span,
}

/// An expression node with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What the expression is.
    pub kind: ExprKind,
    /// The source text the expression covers.
    pub span: Span,
}

/// The expression forms of the language.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A number literal.
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A bare name: a feature (`cost`), a param, a `let`, or `reward`/`adv`/`advantage`.
    Name(Ident),
    /// `-x` or `!b`.
    Unary {
        /// The operator.
        op: UnOp,
        /// The operand.
        expr: Box<Expr>,
    },
    /// `a OP b`.
    Binary {
        /// The operator.
        op: BinOp,
        /// The left operand.
        lhs: Box<Expr>,
        /// The right operand.
        rhs: Box<Expr>,
    },
    /// `f(a, b)`, `group.mean(x, where = m)`. The callee may be dotted
    /// (`group.mean`, `batch.count`): its `name` then holds the whole dotted
    /// text and its span covers it.
    Call {
        /// The function name.
        callee: Ident,
        /// The positional arguments, in order.
        args: Vec<Expr>,
        /// The keyword arguments (`where = m`), in order, after the
        /// positional ones. The parser accepts any name; the checker says
        /// which functions take which keyword.
        named: Vec<NamedArg>,
    },
    /// `x in [lo, hi]`, inclusive on both ends.
    In {
        /// The value tested.
        expr: Box<Expr>,
        /// The lower bound.
        lo: Box<Expr>,
        /// The upper bound.
        hi: Box<Expr>,
    },
    /// Stands where the parser could not make sense of the input; a
    /// diagnostic was reported for it. The checker skips it silently.
    Error,
}

/// A keyword argument of a call: `where = valid > 0`.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedArg {
    /// The keyword as written.
    pub name: Ident,
    /// Its value.
    pub value: Expr,
}

/// A prefix operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// Numeric negation, `-x`.
    Neg,
    /// Logical negation, `!b`.
    Not,
}

/// An infix operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `^`, right-associative.
    Pow,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `&&`.
    And,
    /// `||`.
    Or,
}

impl BinOp {
    /// The operator as written in source.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Pow => "^",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// Binding power, higher binds tighter. The documented precedence, lowest first:
    /// `||` 1, `&&` 2, comparisons and `in` 3 (non-associative), `+ -` 4, `* /` 5,
    /// unary `- !` 6, `^` 7 (right-associative, so `-x^2` is `-(x^2)` and
    /// `2^-1` is `2^(-1)`).
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div => 5,
            BinOp::Pow => 7,
        }
    }
}

/// Precedence of unary `-` and `!` (see [`BinOp::precedence`]).
pub const UNARY_PRECEDENCE: u8 = 6;
/// Precedence of `x in [lo, hi]`, the same as the comparisons.
pub const IN_PRECEDENCE: u8 = 3;

impl File {
    /// The same tree with every span zeroed, so that trees parsed from
    /// differently formatted texts compare equal (`parse(print(ast)) == ast`).
    pub fn without_spans(&self) -> File {
        File { items: self.items.iter().map(Item::without_spans).collect() }
    }
}

impl Item {
    /// A copy with every span zeroed, so trees parsed from different text compare equal.
    pub fn without_spans(&self) -> Item {
        let kind = match &self.kind {
            ItemKind::Def { name, value } => ItemKind::Def { name: name.without_span(), value: value.without_spans() },
            ItemKind::Let { name, value } => ItemKind::Let { name: name.without_span(), value: value.without_spans() },
            ItemKind::Param { name, value, .. } => {
                ItemKind::Param { name: name.without_span(), value: *value, value_span: Span::default() }
            }
            ItemKind::Check { cond } => ItemKind::Check { cond: cond.without_spans() },
            ItemKind::Alert { cond, steps, message, .. } => ItemKind::Alert {
                cond: cond.without_spans(),
                steps: steps.as_ref().map(|c| Count { value: c.value, span: Span::default() }),
                message: message.clone(),
                message_span: Span::default(),
            },
        };
        Item { kind, span: Span::default() }
    }
}

impl Ident {
    /// A copy with the span zeroed, for comparing trees by content alone.
    pub fn without_span(&self) -> Ident {
        Ident { name: self.name.clone(), span: Span::default() }
    }
}

impl Expr {
    /// A copy of the whole expression tree with every span zeroed.
    pub fn without_spans(&self) -> Expr {
        let b = |e: &Expr| Box::new(e.without_spans());
        let kind = match &self.kind {
            ExprKind::Number(n) => ExprKind::Number(*n),
            ExprKind::Bool(v) => ExprKind::Bool(*v),
            ExprKind::Name(i) => ExprKind::Name(i.without_span()),
            ExprKind::Unary { op, expr } => ExprKind::Unary { op: *op, expr: b(expr) },
            ExprKind::Binary { op, lhs, rhs } => ExprKind::Binary { op: *op, lhs: b(lhs), rhs: b(rhs) },
            ExprKind::Call { callee, args, named } => ExprKind::Call {
                callee: callee.without_span(),
                args: args.iter().map(Expr::without_spans).collect(),
                named: named
                    .iter()
                    .map(|n| NamedArg { name: n.name.without_span(), value: n.value.without_spans() })
                    .collect(),
            },
            ExprKind::In { expr, lo, hi } => ExprKind::In { expr: b(expr), lo: b(lo), hi: b(hi) },
            ExprKind::Error => ExprKind::Error,
        };
        Expr { kind, span: Span::default() }
    }
}
