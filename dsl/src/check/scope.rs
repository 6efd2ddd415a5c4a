//! The names of a file: its params, lets and definitions, gathered from the
//! items with duplicate, shadowing and unknown-definition errors, plus the
//! language's default `adv` and `advantage` when the file leaves them out.

use std::collections::HashMap;

use super::suggest::did_you_mean;
use crate::ast::{self, BinOp, Expr, ExprKind, Ident, ItemKind};
use crate::diag::Diagnostic;
use crate::hir::{DefKind, Func, Param, ParamId};
use crate::printer::print_expr;
use crate::schema::{FeatureDecl, FeatureSchema, format_number};
use crate::span::Span;

/// The three definitions a file may write, and what each is.
pub(crate) const DEF_NAMES: [(&str, DefKind); 3] =
    [("reward", DefKind::Reward), ("adv", DefKind::Adv), ("advantage", DefKind::Advantage)];

/// Every reduction the language has, as written.
pub(crate) const REDUCTIONS: [&str; 12] = [
    "group.mean",
    "group.std",
    "group.sum",
    "group.max",
    "group.min",
    "group.rank",
    "group.count",
    "batch.mean",
    "batch.std",
    "batch.sum",
    "batch.max",
    "batch.min",
];
/// `batch.count` is listed apart because `REDUCTIONS` is sized by hand.
pub(crate) const BATCH_COUNT: &str = "batch.count";

/// A `let` or definition being checked, before ordering. Its index in
/// [`Scope::slots`] is its "slot", the id the checker uses until the final
/// dependency order assigns [`crate::hir::DefId`]s.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub name: String,
    pub kind: DefKind,
    pub name_span: Span,
    /// The whole statement (for a default: the `reward` statement).
    pub span: Span,
    pub value: Expr,
    pub explicit: bool,
}

/// What a bare name refers to, features aside (they are looked up in the schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Symbol {
    Param(ParamId),
    Slot(usize),
}

/// An alert statement before lowering.
#[derive(Clone, Debug)]
pub(crate) struct AlertItem {
    pub cond: Expr,
    /// Consecutive batches the condition must hold, at least 1.
    pub steps: u32,
    pub message: String,
    pub span: Span,
}

/// A check statement before lowering.
#[derive(Clone, Debug)]
pub(crate) struct CheckItem {
    pub cond: Expr,
    pub span: Span,
}

#[derive(Debug)]
pub(crate) struct Scope<'a> {
    pub schema: &'a FeatureSchema,
    pub params: Vec<Param>,
    pub slots: Vec<Slot>,
    pub checks: Vec<CheckItem>,
    pub alerts: Vec<AlertItem>,
    names: HashMap<String, Symbol>,
    pub reward: Option<usize>,
    pub adv: usize,
    pub advantage: usize,
}

impl<'a> Scope<'a> {
    /// Gathers the names of `file`, reporting duplicates, shadowing and
    /// definitions other than `reward`/`adv`/`advantage`.
    pub fn collect(file: &ast::File, schema: &'a FeatureSchema, diags: &mut Vec<Diagnostic>) -> Scope<'a> {
        let mut scope = Scope {
            schema,
            params: Vec::new(),
            slots: Vec::new(),
            checks: Vec::new(),
            alerts: Vec::new(),
            names: HashMap::new(),
            reward: None,
            adv: usize::MAX,
            advantage: usize::MAX,
        };
        // Each name declared so far, with its statement as printed, for duplicate messages.
        let mut first: HashMap<String, String> = HashMap::new();
        for item in &file.items {
            match &item.kind {
                ItemKind::Param { name, value, .. } => {
                    let text = format!("param {} = {}", name.name, format_number(*value));
                    if scope.declare(name, "param", text, &mut first, diags) {
                        let id = scope.params.len();
                        scope.params.push(Param { name: name.name.clone(), value: *value, span: item.span });
                        scope.names.insert(name.name.clone(), Symbol::Param(id));
                    }
                }
                ItemKind::Let { name, value } => {
                    let text = format!("let {} = {}", name.name, print_expr(value));
                    if scope.declare(name, "let", text, &mut first, diags) {
                        scope.push_slot(name, DefKind::Let, item.span, value.clone());
                    }
                }
                ItemKind::Def { name, value } => {
                    let Some(&(_, kind)) = DEF_NAMES.iter().find(|(n, _)| *n == name.name) else {
                        diags.push(unknown_definition(name));
                        continue;
                    };
                    if let Some(earlier) = first.get(&name.name) {
                        diags.push(duplicate(name, earlier));
                        continue;
                    }
                    first.insert(name.name.clone(), format!("{} = {}", name.name, print_expr(value)));
                    scope.push_slot(name, kind, item.span, value.clone());
                }
                ItemKind::Check { cond } => scope.checks.push(CheckItem { cond: cond.clone(), span: item.span }),
                ItemKind::Alert { cond, steps, message, .. } => scope.alerts.push(AlertItem {
                    cond: cond.clone(),
                    steps: steps.as_ref().map_or(1, |c| c.value.max(1)),
                    message: message.clone(),
                    span: item.span,
                }),
            }
        }
        scope.reward = scope.find_def(DefKind::Reward);
        let reward_span = scope.reward.map_or(Span::default(), |r| scope.slots[r].span);
        if scope.reward.is_none() {
            // `rewrd = ...` already says what is wrong, with a suggestion.
            if !diags.iter().any(|d| d.code == "unknown-definition") {
                diags.push(
                    Diagnostic::error("missing-reward", Span::default(), "the file defines no `reward`").with_help(
                        format!(
                            "every reward file needs a line `reward = EXPR`, e.g. `reward = {}`",
                            schema.example_feature()
                        ),
                    ),
                );
            }
            // A stand-in, so that what reads `reward` raises no "unknown name"
            // on top; its `Error` body keeps the file from producing a program.
            let error = Expr { kind: ExprKind::Error, span: reward_span };
            scope.reward = Some(scope.push_default("reward", DefKind::Reward, reward_span, error));
        }
        scope.adv = match scope.find_def(DefKind::Adv) {
            Some(slot) => slot,
            None => scope.push_default("adv", DefKind::Adv, reward_span, default_adv(reward_span)),
        };
        scope.advantage = match scope.find_def(DefKind::Advantage) {
            Some(slot) => slot,
            None => scope.push_default("advantage", DefKind::Advantage, reward_span, name_expr("adv", reward_span)),
        };
        scope
    }

    pub fn lookup(&self, name: &str) -> Option<Symbol> {
        self.names.get(name).copied()
    }

    pub fn feature(&self, name: &str) -> Option<&'a FeatureDecl> {
        self.schema.get(name)
    }

    /// Every name a bare identifier could have meant, for "did you mean".
    pub fn value_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.names.keys().map(String::as_str).collect();
        names.extend(self.schema.decls().iter().map(|d| d.name.as_str()));
        names.extend(DEF_NAMES.iter().map(|(n, _)| *n));
        names.extend(Func::ALL.iter().map(|f| f.name()));
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Every name a bare identifier in an alert could have meant: the
    /// values and the schema's step metrics.
    pub fn alert_names(&self) -> Vec<&str> {
        let mut names = self.value_names();
        names.extend(self.schema.metrics().iter().map(|m| m.name.as_str()));
        names.sort_unstable();
        names
    }

    /// Every name a call could have meant, for "did you mean".
    pub fn callable_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Func::ALL.iter().map(|f| f.name()).collect();
        names.extend(REDUCTIONS);
        names.push(BATCH_COUNT);
        names.extend(self.schema.decls().iter().filter(|d| !d.levels.is_empty()).map(|d| d.name.as_str()));
        names
    }

    fn find_def(&self, kind: DefKind) -> Option<usize> {
        self.slots.iter().position(|s| s.kind == kind)
    }

    fn push_slot(&mut self, name: &Ident, kind: DefKind, span: Span, value: Expr) -> usize {
        let slot = self.slots.len();
        self.slots.push(Slot { name: name.name.clone(), kind, name_span: name.span, span, value, explicit: true });
        self.names.insert(name.name.clone(), Symbol::Slot(slot));
        slot
    }

    fn push_default(&mut self, name: &str, kind: DefKind, span: Span, value: Expr) -> usize {
        let ident = Ident { name: name.to_string(), span };
        let slot = self.push_slot(&ident, kind, span, value);
        self.slots[slot].explicit = false;
        slot
    }

    /// Reports a `param` or `let` name that is taken; true when it is free.
    fn declare(
        &self,
        name: &Ident,
        what: &'static str,
        text: String,
        first: &mut HashMap<String, String>,
        diags: &mut Vec<Diagnostic>,
    ) -> bool {
        let n = name.name.as_str();
        let taken = if self.schema.get(n).is_some() {
            Some("a feature")
        } else if DEF_NAMES.iter().any(|(d, _)| *d == n) {
            Some("a definition of the language")
        } else if Func::ALL.iter().any(|f| f.name() == n) {
            Some("a function")
        } else if n == "group" || n == "batch" {
            Some("the prefix of the reductions")
        } else {
            None
        };
        if let Some(taken) = taken {
            diags.push(
                Diagnostic::error("shadowed-name", name.span, format!("the {what} `{n}` hides {taken} of that name"))
                    .with_help(format!("rename the {what}, e.g. `{n}_{what}`")),
            );
            return false;
        }
        if let Some(earlier) = first.get(n) {
            diags.push(duplicate(name, earlier));
            return false;
        }
        first.insert(n.to_string(), text);
        true
    }
}

fn unknown_definition(name: &Ident) -> Diagnostic {
    let n = &name.name;
    let mut help =
        format!("helpers are declared with `let {n} = ...`; the definitions are `reward`, `adv` and `advantage`");
    if let Some(s) = did_you_mean(n, DEF_NAMES.iter().map(|(d, _)| *d)) {
        help = format!("did you mean `{s}`? ({help})");
    }
    Diagnostic::error("unknown-definition", name.span, format!("`{n}` is not a definition of the language"))
        .with_help(help)
}

fn duplicate(name: &Ident, earlier: &str) -> Diagnostic {
    Diagnostic::error("duplicate-definition", name.span, format!("`{}` is defined twice", name.name))
        .with_help("keep one definition, or rename one of them")
        .with_note(format!("the first definition, `{earlier}`, is the one checked"))
}

fn name_expr(name: &str, span: Span) -> Expr {
    Expr { kind: ExprKind::Name(Ident { name: name.to_string(), span }), span }
}

fn num(x: f64, span: Span) -> Expr {
    Expr { kind: ExprKind::Number(x), span }
}

fn bin(op: BinOp, lhs: Expr, rhs: Expr, span: Span) -> Expr {
    Expr { kind: ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }, span }
}

fn reduce(op: &str, arg: Expr, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Call { callee: Ident { name: op.to_string(), span }, args: vec![arg], named: Vec::new() },
        span,
    }
}

/// GRPO's estimator, `(reward - group.mean(reward)) / (group.std(reward) + 1e-4)`,
/// with every span at `span` (the `reward` statement).
fn default_adv(span: Span) -> Expr {
    let r = || name_expr("reward", span);
    let centred = bin(BinOp::Sub, r(), reduce("group.mean", r(), span), span);
    let spread = bin(BinOp::Add, reduce("group.std", r(), span), num(1e-4, span), span);
    bin(BinOp::Div, centred, spread, span)
}
