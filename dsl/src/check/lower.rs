//! Name resolution, type checking and lowering of one expression to a typed,
//! spanned tree ([`TExpr`]) that the layering, interval and lint passes walk
//! before it becomes a span-less [`hir::Expr`].

use super::scope::{BATCH_COUNT, REDUCTIONS, Scope, Symbol};
use super::suggest::did_you_mean;
use crate::ast::{self, BinOp, ExprKind, UnOp};
use crate::diag::Diagnostic;
use crate::hir::{self, FeatureId, Func, ReduceOp};
use crate::schema::{FeatureDecl, FeatureRef, Type};
use crate::span::Span;

/// A resolved expression with its span and type. `ty` is `None` where an
/// error was already reported, so that one mistake yields one diagnostic.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TExpr {
    pub kind: TKind,
    pub span: Span,
    pub ty: Option<Type>,
}

/// Mirrors [`hir::Expr`]; `Def` holds a checker slot, not yet a `DefId`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TKind {
    Number(f64),
    Bool(bool),
    Feature(FeatureId),
    Param(usize),
    Def(usize),
    Unary(UnOp, Box<TExpr>),
    Binary(BinOp, Box<TExpr>, Box<TExpr>),
    Call(Func, Vec<TExpr>),
    In(Box<TExpr>, Box<TExpr>, Box<TExpr>),
    /// A reduction, its argument (`None` for `count`) and its `where` mask.
    Reduce(hir::Scope, ReduceOp, Option<Box<TExpr>>, Option<Box<TExpr>>),
    /// A step metric (an index into [`Lowerer::metrics`]); only alert conditions hold one.
    Metric(usize),
    /// Stands for a subexpression that failed to check.
    Error,
}

impl TExpr {
    /// The span-less HIR form, with slots renamed by `def_id`. Only called on
    /// trees without errors; an `Error` node becomes NaN.
    pub fn to_hir(&self, def_id: &dyn Fn(usize) -> usize) -> hir::Expr {
        let b = |e: &TExpr| Box::new(e.to_hir(def_id));
        match &self.kind {
            TKind::Number(x) => hir::Expr::Number(*x),
            TKind::Bool(v) => hir::Expr::Bool(*v),
            TKind::Feature(id) => hir::Expr::Feature(*id),
            TKind::Param(id) => hir::Expr::Param(*id),
            TKind::Def(slot) => hir::Expr::Def(def_id(*slot)),
            TKind::Unary(op, x) => hir::Expr::Unary(*op, b(x)),
            TKind::Binary(op, x, y) => hir::Expr::Binary(*op, b(x), b(y)),
            TKind::Call(f, args) => hir::Expr::Call(*f, args.iter().map(|a| a.to_hir(def_id)).collect()),
            TKind::In(x, lo, hi) => hir::Expr::In(b(x), b(lo), b(hi)),
            TKind::Reduce(s, op, arg, mask) => {
                hir::Expr::Reduce(*s, *op, arg.as_ref().map(|a| b(a)), mask.as_ref().map(|m| b(m)))
            }
            // Only alert conditions read metrics, and they lower through
            // `alerts::to_alert`, never through here.
            TKind::Error | TKind::Metric(_) => hir::Expr::Number(f64::NAN),
        }
    }

    /// The direct children, in source order.
    pub fn children(&self) -> Vec<&TExpr> {
        match &self.kind {
            TKind::Unary(_, x) => vec![x],
            TKind::Binary(_, x, y) => vec![x, y],
            TKind::Call(_, args) => args.iter().collect(),
            TKind::In(x, lo, hi) => vec![x, lo, hi],
            TKind::Reduce(_, _, arg, mask) => arg.iter().chain(mask).map(|x| &**x).collect(),
            _ => Vec::new(),
        }
    }
}

/// Lowers expressions of one file; collects the feature columns they read.
#[derive(Debug)]
pub(crate) struct Lowerer<'s, 'a> {
    pub scope: &'s Scope<'a>,
    /// The type of each slot, once known (`None` while unknown or erroneous).
    pub slot_types: Vec<Option<Type>>,
    /// Distinct feature columns, in first-use order.
    pub features: Vec<FeatureRef>,
    pub diags: Vec<Diagnostic>,
    /// An `Error` node of the parser was met: its diagnostic is the parser's,
    /// but the file must still not produce a program.
    pub poisoned: bool,
    /// Lowering an alert's condition: step metrics may be read.
    pub in_alert: bool,
    /// Distinct step metrics the alerts read, in first-use order.
    pub metrics: Vec<String>,
}

impl<'s, 'a> Lowerer<'s, 'a> {
    pub fn new(scope: &'s Scope<'a>) -> Self {
        Lowerer {
            scope,
            slot_types: vec![None; scope.slots.len()],
            features: Vec::new(),
            diags: Vec::new(),
            poisoned: false,
            in_alert: false,
            metrics: Vec::new(),
        }
    }

    /// Lowers the conditions of `check` or `alert` statements (`statement` names which, for
    /// the error), each of which must be a bool.
    pub fn lower_conditions<'e>(&mut self, conds: impl Iterator<Item = &'e ast::Expr>, statement: &str) -> Vec<TExpr> {
        conds
            .map(|cond| {
                let t = self.lower(cond);
                self.expect(&t, Type::Bool, statement);
                t
            })
            .collect()
    }

    pub fn lower(&mut self, e: &ast::Expr) -> TExpr {
        let (kind, ty) = match &e.kind {
            ExprKind::Number(x) => (TKind::Number(*x), Some(Type::Number)),
            ExprKind::Bool(v) => (TKind::Bool(*v), Some(Type::Bool)),
            ExprKind::Name(ident) => self.name(ident),
            ExprKind::Unary { op, expr } => {
                let x = self.lower(expr);
                let want = if *op == UnOp::Neg { Type::Number } else { Type::Bool };
                let sym = if *op == UnOp::Neg { "unary `-`" } else { "`!`" };
                self.expect(&x, want, sym);
                (TKind::Unary(*op, Box::new(x)), Some(want))
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs),
            ExprKind::Call { callee, args, named } => self.call(callee, args, named, e.span),
            ExprKind::In { expr, lo, hi } => {
                let (x, l, h) = (self.lower(expr), self.lower(lo), self.lower(hi));
                for part in [&x, &l, &h] {
                    self.expect(part, Type::Number, "`in`");
                }
                (TKind::In(Box::new(x), Box::new(l), Box::new(h)), Some(Type::Bool))
            }
            ExprKind::Error => {
                self.poisoned = true;
                (TKind::Error, None)
            }
        };
        TExpr { kind, span: e.span, ty }
    }

    /// Reports `x` when its type is known and not `want`; `context` names the
    /// operator or function that wants it (for the help line).
    pub fn expect(&mut self, x: &TExpr, want: Type, context: &str) -> bool {
        match x.ty {
            Some(ty) if ty != want => {
                self.diags.push(type_mismatch(x.span, want, context));
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    fn error(&mut self, d: Diagnostic) -> (TKind, Option<Type>) {
        self.diags.push(d);
        (TKind::Error, None)
    }

    fn name(&mut self, ident: &ast::Ident) -> (TKind, Option<Type>) {
        let n = ident.name.as_str();
        if n.starts_with(crate::schema::METRIC_PREFIX) {
            return self.metric(ident);
        }
        match self.scope.lookup(n) {
            Some(Symbol::Param(id)) => return (TKind::Param(id), Some(Type::Number)),
            Some(Symbol::Slot(slot)) => return (TKind::Def(slot), self.slot_types[slot]),
            None => {}
        }
        if let Some(decl) = self.scope.feature(n) {
            if decl.levels.is_empty() {
                return self.feature(decl, None, Vec::new());
            }
            let levels: Vec<String> = decl.levels.iter().map(|l| format!("`{n}({l})`")).collect();
            return self.error(
                Diagnostic::error("missing-level", ident.span, format!("`{n}` needs a level"))
                    .with_help(format!("write one of {}", levels.join(", "))),
            );
        }
        if Func::ALL.iter().any(|f| f.name() == n) {
            return self.error(
                Diagnostic::error("function-as-value", ident.span, format!("`{n}` is a function, not a value"))
                    .with_help(format!("call it: `{n}(...)`")),
            );
        }
        if n == "group" || n == "batch" {
            return self.error(
                Diagnostic::error("function-as-value", ident.span, format!("`{n}` is not a value"))
                    .with_help(format!("reductions are called as `{n}.mean(x)`, `{n}.count()`, ...")),
            );
        }
        let mut d = Diagnostic::error("unknown-name", ident.span, format!("unknown name `{n}`"));
        let names = if self.in_alert { self.scope.alert_names() } else { self.scope.value_names() };
        if let Some(s) = did_you_mean(n, names) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        self.error(d)
    }

    /// `step.kl`: a step metric, which only an alert may read.
    fn metric(&mut self, ident: &ast::Ident) -> (TKind, Option<Type>) {
        let n = ident.name.as_str();
        if self.scope.schema.metric(n).is_none() {
            let mut d = Diagnostic::error("unknown-name", ident.span, format!("unknown step metric `{n}`"));
            let known = self.scope.schema.metrics().iter().map(|m| m.name.as_str());
            d = match did_you_mean(n, known) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None if self.scope.schema.metrics().is_empty() => d.with_help("the schema declares no step metrics"),
                None => {
                    let all: Vec<String> =
                        self.scope.schema.metrics().iter().map(|m| format!("`{}`", m.name)).collect();
                    d.with_help(format!("the step metrics are {}", all.join(", ")))
                }
            };
            return self.error(d);
        }
        if !self.in_alert {
            return self.error(
                Diagnostic::error(
                    "metric-outside-alert",
                    ident.span,
                    format!("`{n}` is a step metric, readable only in an `alert` condition"),
                )
                .with_help("rewards and advantages are computed before the step's metrics exist"),
            );
        }
        let id = match self.metrics.iter().position(|m| m == n) {
            Some(id) => id,
            None => {
                self.metrics.push(n.to_string());
                self.metrics.len() - 1
            }
        };
        (TKind::Metric(id), Some(Type::Number))
    }

    fn feature(&mut self, decl: &FeatureDecl, level: Option<&str>, args: Vec<f64>) -> (TKind, Option<Type>) {
        let r = FeatureRef::new(decl, level, args);
        let id = match self.features.iter().position(|f| f.key == r.key) {
            Some(id) => id,
            None => {
                self.features.push(r);
                self.features.len() - 1
            }
        };
        (TKind::Feature(id), Some(decl.ty))
    }

    fn binary(&mut self, op: BinOp, lhs: &ast::Expr, rhs: &ast::Expr) -> (TKind, Option<Type>) {
        let (a, b) = (self.lower(lhs), self.lower(rhs));
        let context = format!("`{}`", op.symbol());
        let ty = match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Pow => {
                self.expect(&a, Type::Number, &context);
                self.expect(&b, Type::Number, &context);
                Type::Number
            }
            BinOp::And | BinOp::Or => {
                self.expect(&a, Type::Bool, &context);
                self.expect(&b, Type::Bool, &context);
                Type::Bool
            }
            // `==` and `!=` also compare two bools; mixing types is an error.
            BinOp::Eq | BinOp::Ne if a.ty == Some(Type::Bool) && b.ty != Some(Type::Number) => {
                self.expect(&b, Type::Bool, &context);
                Type::Bool
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                self.expect(&a, Type::Number, &context);
                self.expect(&b, Type::Number, &context);
                Type::Bool
            }
        };
        (TKind::Binary(op, Box::new(a), Box::new(b)), Some(ty))
    }

    fn call(
        &mut self,
        callee: &ast::Ident,
        args: &[ast::Expr],
        named: &[ast::NamedArg],
        span: Span,
    ) -> (TKind, Option<Type>) {
        let n = callee.name.as_str();
        if let Some((scope, op)) = n.split_once('.') {
            return self.reduction(callee, scope, op, args, named, span);
        }
        if let Some(first) = named.first() {
            // A feature's positional arguments are a level and literals, not values.
            let positional = if self.scope.feature(n).is_some() { &[][..] } else { args };
            for a in positional.iter().chain(named.iter().map(|a| &a.value)) {
                self.lower(a);
            }
            return self.error(
                Diagnostic::error(
                    "unknown-keyword",
                    first.name.span,
                    format!("`{n}` takes no keyword arguments, but `{}` is given", first.name.name),
                )
                .with_help("only the group and batch reductions take one: `where = BOOL`, e.g. `group.mean(x, where = ok > 0)`"),
            );
        }
        if let Some(func) = Func::ALL.iter().copied().find(|f| f.name() == n) {
            return self.function(func, callee, args, span);
        }
        if let Some(decl) = self.scope.feature(n) {
            return self.leveled(decl, args, span);
        }
        // Defaults (`adv`, `advantage`) are in scope too, so this covers every definition.
        if self.scope.lookup(n).is_some() {
            return self.error(
                Diagnostic::error("not-callable", callee.span, format!("`{n}` is a value, not a function"))
                    .with_help(format!("write `{n}` without arguments")),
            );
        }
        let mut d = Diagnostic::error("unknown-function", callee.span, format!("unknown function `{n}`"));
        if let Some(s) = did_you_mean(n, self.scope.callable_names()) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        self.error(d)
    }

    fn arity(&mut self, callee: &ast::Ident, args: &[ast::Expr], span: Span, ok: bool, want: &str) -> bool {
        if !ok {
            let got = args.len();
            self.diags.push(Diagnostic::error(
                "arity",
                span,
                format!("`{}` takes {want}, but {got} {} given", callee.name, if got == 1 { "is" } else { "are" }),
            ));
        }
        ok
    }

    fn function(&mut self, func: Func, callee: &ast::Ident, args: &[ast::Expr], span: Span) -> (TKind, Option<Type>) {
        let (ok, want) = match func {
            Func::Min | Func::Max => (args.len() >= 2, "at least 2 arguments"),
            Func::Clip | Func::If => (args.len() == 3, "3 arguments"),
            _ => (args.len() == 1, "1 argument"),
        };
        let lowered: Vec<TExpr> = args.iter().map(|a| self.lower(a)).collect();
        if !self.arity(callee, args, span, ok, want) {
            return (TKind::Error, None);
        }
        let context = format!("`{}`", func.name());
        let ty = match func {
            Func::Mask => {
                if lowered[0].ty == Some(Type::Number) {
                    self.diags.push(
                        Diagnostic::error(
                            "type-mismatch",
                            lowered[0].span,
                            "`mask` takes a bool, but this is a number; compare it, e.g. `x > 0`",
                        )
                        .with_help("`mask(b)` is 1 where `b` holds and 0 elsewhere"),
                    );
                }
                Some(Type::Number)
            }
            Func::If => {
                self.expect(&lowered[0], Type::Bool, "the condition of `if`");
                match (lowered[1].ty, lowered[2].ty) {
                    (Some(x), Some(y)) if x != y => {
                        self.diags.push(
                            Diagnostic::error(
                                "type-mismatch",
                                lowered[2].span,
                                format!("the branches of `if` differ: {} and {}", type_name(x), type_name(y)),
                            )
                            .with_help("both branches must be numbers, or both bools"),
                        );
                        None
                    }
                    (x, y) => x.or(y),
                }
            }
            _ => {
                for a in &lowered {
                    self.expect(a, Type::Number, &context);
                }
                Some(Type::Number)
            }
        };
        (TKind::Call(func, lowered), ty)
    }

    fn reduction(
        &mut self,
        callee: &ast::Ident,
        scope: &str,
        op: &str,
        args: &[ast::Expr],
        named: &[ast::NamedArg],
        span: Span,
    ) -> (TKind, Option<Type>) {
        let n = callee.name.as_str();
        let known = REDUCTIONS.contains(&n) || n == BATCH_COUNT;
        if !known {
            let mut d = if n == "batch.rank" {
                Diagnostic::error("unknown-function", callee.span, "`batch.rank` does not exist")
                    .with_help("ranks are taken within a group: `group.rank(x)`")
            } else {
                Diagnostic::error("unknown-function", callee.span, format!("unknown function `{n}`"))
            };
            if d.help.is_none()
                && let Some(s) = did_you_mean(n, self.scope.callable_names())
            {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            for a in args.iter().chain(named.iter().map(|a| &a.value)) {
                self.lower(a);
            }
            return self.error(d);
        }
        let scope = if scope == "group" { hir::Scope::Group } else { hir::Scope::Batch };
        let op = match op {
            "mean" => ReduceOp::Mean,
            "std" => ReduceOp::Std,
            "sum" => ReduceOp::Sum,
            "max" => ReduceOp::Max,
            "min" => ReduceOp::Min,
            "rank" => ReduceOp::Rank,
            _ => ReduceOp::Count,
        };
        let lowered: Vec<TExpr> = args.iter().map(|a| self.lower(a)).collect();
        let mask = self.mask(n, named);
        if op == ReduceOp::Count {
            if !self.arity(callee, args, span, args.is_empty(), "no arguments") {
                return (TKind::Error, None);
            }
            return match mask {
                Ok(mask) => (TKind::Reduce(scope, op, None, mask), Some(Type::Number)),
                Err(()) => (TKind::Error, None),
            };
        }
        if !self.arity(callee, args, span, args.len() == 1, "1 argument") {
            return (TKind::Error, None);
        }
        let arg = lowered.into_iter().next().expect("arity checked: one argument");
        self.expect(&arg, Type::Number, &format!("`{n}`"));
        match mask {
            Ok(mask) => (TKind::Reduce(scope, op, Some(Box::new(arg)), mask), Some(Type::Number)),
            Err(()) => (TKind::Error, None),
        }
    }

    /// The `where = BOOL` mask of a reduction `n`: `Ok(None)` without one,
    /// `Err` once an error is reported (an unknown or repeated keyword, a
    /// number where a bool is needed).
    fn mask(&mut self, n: &str, named: &[ast::NamedArg]) -> Result<Option<Box<TExpr>>, ()> {
        let mut mask = None;
        let mut ok = true;
        for arg in named {
            let value = self.lower(&arg.value);
            if arg.name.name != "where" {
                let mut d = Diagnostic::error(
                    "unknown-keyword",
                    arg.name.span,
                    format!("`{n}` has no keyword argument `{}`", arg.name.name),
                );
                d = match did_you_mean(&arg.name.name, ["where"]) {
                    Some(s) => {
                        d.with_help(format!("did you mean `{s}`? (`where = BOOL` keeps the rows where it holds)"))
                    }
                    None => {
                        d.with_help("the only keyword argument is `where = BOOL`, which keeps the rows where it holds")
                    }
                };
                self.diags.push(d);
                ok = false;
                continue;
            }
            if mask.is_some() {
                self.diags.push(
                    Diagnostic::error("duplicate-keyword", arg.name.span, format!("`where` is given twice to `{n}`"))
                        .with_help("join the conditions with `&&`: `where = a && b`"),
                );
                ok = false;
                continue;
            }
            if value.ty == Some(Type::Number) {
                self.diags.push(
                    Diagnostic::error(
                        "type-mismatch",
                        value.span,
                        "a number is used as a bool; compare it, e.g. `x > 0`",
                    )
                    .with_help(format!("the `where` mask of `{n}` takes a bool: the rows where it holds are reduced")),
                );
                ok = false;
            } else if value.ty.is_none() {
                ok = false;
            }
            mask = Some(Box::new(value));
        }
        if ok { Ok(mask) } else { Err(()) }
    }

    /// `grade(word)`, `grade(word, 1)`: a leveled feature read.
    fn leveled(&mut self, decl: &'a FeatureDecl, args: &[ast::Expr], span: Span) -> (TKind, Option<Type>) {
        let n = decl.name.as_str();
        if decl.levels.is_empty() {
            return self.error(
                Diagnostic::error("feature-not-callable", span, format!("`{n}` is a feature, not a function"))
                    .with_help(format!("write `{n}` without arguments")),
            );
        }
        let levels = decl.levels.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ");
        let Some(first) = args.first() else {
            return self.error(
                Diagnostic::error("missing-level", span, format!("`{n}` needs a level"))
                    .with_help(format!("the levels are {levels}, e.g. `{n}({})`", decl.levels[0])),
            );
        };
        let ExprKind::Name(level) = &first.kind else {
            return self.error(
                Diagnostic::error("unknown-level", first.span, format!("the first argument of `{n}` must be a level"))
                    .with_help(format!("the levels are {levels}")),
            );
        };
        if !decl.levels.contains(&level.name) {
            let mut d = Diagnostic::error("unknown-level", level.span, format!("`{n}` has no level `{}`", level.name));
            d = match did_you_mean(&level.name, decl.levels.iter().map(String::as_str)) {
                Some(s) => d.with_help(format!("did you mean `{s}`? (the levels are {levels})")),
                None => d.with_help(format!("the levels are {levels}")),
            };
            return self.error(d);
        }
        let extra = &args[1..];
        if extra.len() > decl.params.len() {
            let names: Vec<String> = decl.params.iter().map(|p| format!(", {}", p.name)).collect();
            return self.error(
                Diagnostic::error(
                    "arity",
                    span,
                    format!(
                        "`{n}` takes a level and at most {} more argument(s), but {} are given",
                        decl.params.len(),
                        args.len()
                    ),
                )
                .with_help(format!("write `{n}({}{})`", level.name, names.concat())),
            );
        }
        let mut values: Vec<f64> = decl.params.iter().map(|p| p.default).collect();
        for (i, (arg, p)) in extra.iter().zip(&decl.params).enumerate() {
            let Some(v) = literal(arg) else {
                return self.error(
                    Diagnostic::error(
                        "feature-arg",
                        arg.span,
                        format!("`{}` of `{n}` must be a number literal", p.name),
                    )
                    .with_help(format!("a feature argument picks a column, e.g. `{n}({}, {})`", level.name, p.default)),
                );
            };
            if !p.range.contains(v) {
                return self.error(Diagnostic::error(
                    "feature-arg",
                    arg.span,
                    format!("`{}` of `{n}` must lie in {}, but it is {v}", p.name, p.range),
                ));
            }
            values[i] = v;
        }
        self.feature(decl, Some(&level.name), values)
    }
}

/// A number literal, possibly negated.
fn literal(e: &ast::Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Number(x) => Some(*x),
        ExprKind::Unary { op: UnOp::Neg, expr } => literal(expr).map(|x| -x),
        _ => None,
    }
}

pub(crate) fn type_name(ty: Type) -> &'static str {
    match ty {
        Type::Number => "a number",
        Type::Bool => "a bool",
    }
}

/// The two type errors of the language, worded as the contract asks.
pub(crate) fn type_mismatch(span: Span, want: Type, context: &str) -> Diagnostic {
    match want {
        Type::Number => Diagnostic::error("type-mismatch", span, "a bool is used as a number; wrap it in `mask(...)`")
            .with_help(format!("{context} takes numbers; `mask(b)` is 1 where `b` holds and 0 elsewhere")),
        Type::Bool => Diagnostic::error("type-mismatch", span, "a number is used as a bool; compare it, e.g. `x > 0`")
            .with_help(format!("{context} takes bools")),
    }
}
