//! Hand-built programs for the backends' tests, while no test needs the parser.

use crate::ast::{BinOp, UnOp};
use crate::hir::{Def, DefId, DefKind, Expr, Func, Layer, Param, Program, ReduceOp, Scope};
use crate::interval::Interval;
use crate::schema::{FeatureRef, Type};
use crate::span::Span;
use crate::table::FeatureTable;

/// Builds a [`Program`] definition by definition, in dependency order.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    params: Vec<Param>,
    features: Vec<FeatureRef>,
    defs: Vec<Def>,
}

impl Builder {
    pub(crate) fn feature(&mut self, key: &str) -> Expr {
        if let Some(id) = self.features.iter().position(|f| f.key == key) {
            return Expr::Feature(id);
        }
        self.features.push(FeatureRef { name: key.to_string(), level: None, args: Vec::new(), key: key.to_string() });
        Expr::Feature(self.features.len() - 1)
    }

    pub(crate) fn param(&mut self, name: &str, value: f64) -> Expr {
        self.params.push(Param { name: name.to_string(), value, span: Span::default() });
        Expr::Param(self.params.len() - 1)
    }

    fn push(&mut self, name: &str, kind: DefKind, layer: Layer, expr: Expr, ty: Type) -> DefId {
        self.defs.push(Def {
            name: name.to_string(),
            kind,
            layer,
            expr,
            ty,
            interval: Interval::REAL,
            span: Span::default(),
            explicit: true,
        });
        self.defs.len() - 1
    }

    pub(crate) fn let_(&mut self, name: &str, layer: Layer, expr: Expr) -> Expr {
        Expr::Def(self.push(name, DefKind::Let, layer, expr, Type::Number))
    }

    pub(crate) fn let_bool(&mut self, name: &str, layer: Layer, expr: Expr) -> Expr {
        Expr::Def(self.push(name, DefKind::Let, layer, expr, Type::Bool))
    }

    /// Defines `reward`; lets of the advantage layer may follow and use it.
    pub(crate) fn reward(&mut self, expr: Expr) -> Expr {
        Expr::Def(self.push("reward", DefKind::Reward, Layer::Reward, expr, Type::Number))
    }

    pub(crate) fn adv(&mut self, expr: Expr) -> Expr {
        Expr::Def(self.push("adv", DefKind::Adv, Layer::Advantage, expr, Type::Number))
    }

    pub(crate) fn advantage(&mut self, expr: Expr) -> Expr {
        Expr::Def(self.push("advantage", DefKind::Advantage, Layer::Advantage, expr, Type::Number))
    }

    /// Finishes a program defined with [`Builder::reward`] and maybe
    /// [`Builder::adv`], [`Builder::advantage`]: `adv` defaults to GRPO's
    /// estimator and `advantage` to `adv`, as in the language.
    pub(crate) fn build(mut self) -> Program {
        let find = |defs: &[Def], kind: DefKind| defs.iter().position(|d| d.kind == kind);
        let reward = find(&self.defs, DefKind::Reward).expect("reward is defined");
        let adv = match find(&self.defs, DefKind::Adv) {
            Some(adv) => adv,
            None => self.push("adv", DefKind::Adv, Layer::Advantage, grpo(Expr::Def(reward)), Type::Number),
        };
        let advantage = match find(&self.defs, DefKind::Advantage) {
            Some(a) => a,
            None => self.push("advantage", DefKind::Advantage, Layer::Advantage, Expr::Def(adv), Type::Number),
        };
        Program {
            params: self.params,
            features: self.features,
            defs: self.defs,
            reward,
            adv,
            advantage,
            checks: Vec::new(),
            metrics: Vec::new(),
            alerts: Vec::new(),
        }
    }

    /// Finishes the program with `reward`, and `adv` / `advantage` built from
    /// the reward (and adv) references when given.
    pub(crate) fn finish(
        mut self,
        reward: Expr,
        adv: Option<&dyn Fn(Expr) -> Expr>,
        advantage: Option<&dyn Fn(Expr, Expr) -> Expr>,
    ) -> Program {
        let r = self.reward(reward);
        let a = match adv {
            Some(f) => self.adv(f(r.clone())),
            None => self.adv(grpo(r.clone())),
        };
        if let Some(f) = advantage {
            self.advantage(f(r, a));
        }
        self.build()
    }
}

pub(crate) fn num(x: f64) -> Expr {
    Expr::Number(x)
}

pub(crate) fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::Binary(op, Box::new(a), Box::new(b))
}

pub(crate) fn un(op: UnOp, a: Expr) -> Expr {
    Expr::Unary(op, Box::new(a))
}

pub(crate) fn call(f: Func, args: Vec<Expr>) -> Expr {
    Expr::Call(f, args)
}

pub(crate) fn group(op: ReduceOp, x: Expr) -> Expr {
    Expr::Reduce(Scope::Group, op, Some(Box::new(x)), None)
}

pub(crate) fn batch(op: ReduceOp, x: Expr) -> Expr {
    Expr::Reduce(Scope::Batch, op, Some(Box::new(x)), None)
}

/// `scope.op(x, where = m)`; `x` is `None` for `count`.
pub(crate) fn masked(scope: Scope, op: ReduceOp, x: Option<Expr>, m: Expr) -> Expr {
    Expr::Reduce(scope, op, x.map(Box::new), Some(Box::new(m)))
}

/// `(r - group.mean(r)) / (group.std(r) + 1e-4)`.
pub(crate) fn grpo(r: Expr) -> Expr {
    bin(
        BinOp::Div,
        bin(BinOp::Sub, r.clone(), group(ReduceOp::Mean, r.clone())),
        bin(BinOp::Add, group(ReduceOp::Std, r), num(1e-4)),
    )
}

/// The gated sample: `reward = grade(word) * mask(cost > 0)`, `advantage = adv * sqrt(min(cost / 4, 1))`.
pub(crate) fn gated_program() -> Program {
    let mut b = Builder::default();
    let fb = b.feature("grade(word)");
    let c = b.feature("cost");
    let reward = bin(BinOp::Mul, fb, call(Func::Mask, vec![bin(BinOp::Gt, c.clone(), num(0.0))]));
    let advantage = move |_r: Expr, adv: Expr| {
        bin(
            BinOp::Mul,
            adv,
            call(Func::Sqrt, vec![call(Func::Min, vec![bin(BinOp::Div, c.clone(), num(4.0)), num(1.0)])]),
        )
    };
    b.finish(reward, None, Some(&advantage))
}

/// A table of groups of the given sizes with the given columns.
pub(crate) fn table(sizes: &[usize], columns: &[(&str, &[f64])]) -> FeatureTable {
    let mut t = FeatureTable::new(sizes.iter().enumerate().map(|(g, &n)| (format!("g{g}"), n))).expect("non-empty");
    for (key, values) in columns {
        t.add_column(*key, values.to_vec()).expect("well-formed test column");
    }
    t
}
