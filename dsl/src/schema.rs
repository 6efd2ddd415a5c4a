//! The feature schema: the names a reward file may read, supplied by the caller.
//!
//! The DSL knows no domain. A caller (the `rewardlab-rewards` crate, or a
//! test) declares its rollout features here: plain names (`cost`, `size`) and
//! leveled feature functions (`grade(word)`, `grade(word, beta)`), each with a
//! type, a declared range (the input of interval analysis and of the
//! property-test generator) and a role (what the lints need to know about it).
//!
//! The lints' own help texts speak only of roles and of the formula at hand.
//! A caller that knows the history of a pattern (which published reward did
//! this, and what it cost) attaches that as [`LintText`] per [`LintCase`]:
//! help that replaces the generic one and notes appended after it.

use crate::interval::Interval;

/// The value type of a DSL expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// An `f64` value.
    Number,
    /// A truth value, produced by comparisons and consumed by `mask`, `if` and `check`.
    Bool,
}

/// What a feature measures, as far as the lints care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// Task quality (F-beta, precision, validity...).
    Quality,
    /// The cost or efficiency of how a rollout worked (calls, turns, steps):
    /// the `reward-layer-scaling` lint warns when it scales `reward`.
    Efficiency,
    /// How much a rollout generated (tokens, characters); linted like efficiency.
    Length,
    /// Anything the lints need not tell apart.
    Other,
}

/// A trailing numeric argument of a leveled feature, such as `beta` in `grade(word, beta)`.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureParam {
    /// The argument's name, used in messages (`` `beta` of `grade` must be a number literal``).
    pub name: String,
    /// The value used when the source leaves the argument out.
    pub default: f64,
    /// Values the argument may take; a literal outside is an error.
    pub range: Interval,
}

/// One declared feature.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureDecl {
    /// The plain name (`cost`), or the function name of a leveled feature (`grade`).
    pub name: String,
    /// Empty for a plain name. Otherwise the feature is read as `name(level)` or
    /// `name(level, params...)`, with `level` one of these identifiers.
    pub levels: Vec<String>,
    /// Optional numeric arguments after the level; each must be a number literal
    /// (or a `param`) in the source, and defaults when left out.
    pub params: Vec<FeatureParam>,
    /// The value type every read of this feature has.
    pub ty: Type,
    /// The declared range of every value of this feature.
    pub range: Interval,
    /// Values are whole numbers (counts); the generator draws integers.
    pub integer: bool,
    /// What the feature measures, as far as the lints care.
    pub role: Role,
    /// Constant across the rollouts of one group (a task property, not a rollout one).
    pub per_group: bool,
    /// One line for `--help`, `did you mean` and the docs.
    pub doc: String,
}

impl FeatureDecl {
    /// A plain number feature with a range, role Other.
    pub fn number(name: &str, range: Interval, doc: &str) -> FeatureDecl {
        FeatureDecl {
            name: name.to_string(),
            levels: Vec::new(),
            params: Vec::new(),
            ty: Type::Number,
            range,
            integer: false,
            role: Role::Other,
            per_group: false,
            doc: doc.to_string(),
        }
    }

    /// Sets the role the lints see.
    pub fn with_role(mut self, role: Role) -> FeatureDecl {
        self.role = role;
        self
    }

    /// Makes the feature a function of one of these level identifiers.
    pub fn with_levels(mut self, levels: &[&str]) -> FeatureDecl {
        self.levels = levels.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Appends an optional numeric argument after the level.
    pub fn with_param(mut self, name: &str, default: f64, range: Interval) -> FeatureDecl {
        self.params.push(FeatureParam { name: name.to_string(), default, range });
        self
    }

    /// Marks the values as whole numbers.
    pub fn integer(mut self) -> FeatureDecl {
        self.integer = true;
        self
    }

    /// Marks the feature as constant across the rollouts of a group.
    pub fn per_group(mut self) -> FeatureDecl {
        self.per_group = true;
        self
    }

    /// Makes the feature a bool (its range becomes `[0, 1]`, the values it is stored as).
    pub fn boolean(mut self) -> FeatureDecl {
        self.ty = Type::Bool;
        self.range = Interval::UNIT;
        self
    }
}

/// One kind of lint warning whose help and notes a schema may adapt to its
/// features (see [`FeatureSchema::with_lint_help`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LintCase {
    /// `reward-layer-scaling` on the whole `reward`: it is multiplied or
    /// divided by a factor of an efficiency or length feature.
    RewardScaled,
    /// `reward-layer-scaling` on one term of `reward`.
    TermScaled,
    /// `denominator-contains-zero`: a divisor whose range contains 0.
    DenominatorZero,
    /// `sqrt-domain`: `sqrt` of a value that may be negative.
    SqrtDomain,
    /// `log-domain`: `log` of a value that may be 0 or negative.
    LogDomain,
    /// `overflow`: an operation on bounded inputs whose range reaches ±inf.
    Overflow,
    /// `cancels-under-centering` when `reward` is constant within every group.
    ConstantReward,
    /// `cancels-under-centering` on one group-constant term of `reward`.
    ConstantTerm,
    /// `unused-let`: a `let` that nothing reads.
    UnusedLet,
    /// `unused-param`: a `param` that nothing reads.
    UnusedParam,
    /// `idle-outranks`: a rollout that did nothing (an [`IdleCase`]) can get
    /// a higher advantage than a sibling whose quality is positive.
    IdleOutranks,
}

impl LintCase {
    /// The diagnostic code the case's warnings carry.
    pub fn code(self) -> &'static str {
        match self {
            LintCase::RewardScaled | LintCase::TermScaled => "reward-layer-scaling",
            LintCase::DenominatorZero => "denominator-contains-zero",
            LintCase::SqrtDomain => "sqrt-domain",
            LintCase::LogDomain => "log-domain",
            LintCase::Overflow => "overflow",
            LintCase::ConstantReward | LintCase::ConstantTerm => "cancels-under-centering",
            LintCase::UnusedLet => "unused-let",
            LintCase::UnusedParam => "unused-param",
            LintCase::IdleOutranks => "idle-outranks",
        }
    }
}

/// What a schema adds to the warnings of one [`LintCase`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LintText {
    /// Replaces the lint's generic help line.
    pub help: Option<String>,
    /// Appended, in order, after the lint's own notes.
    pub notes: Vec<String>,
}

/// A way a rollout can do nothing, for the `idle-outranks` lint: a name for
/// messages ("made no tool call") and the values such a rollout's features
/// hold, by feature name (a leveled feature's value holds at every level).
#[derive(Clone, Debug, PartialEq)]
pub struct IdleCase {
    /// Completes "a rollout that ...": `made no tool call and gave no answer`.
    pub name: String,
    /// `(feature name, value)`: what the idle rollout's features are fixed to.
    pub values: Vec<(String, f64)>,
}

/// The set of features a reward file is checked against, and the caller's
/// additions to the lints' texts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeatureSchema {
    decls: Vec<FeatureDecl>,
    lint_texts: Vec<(LintCase, LintText)>,
    idle: Vec<IdleCase>,
    metrics: Vec<MetricDecl>,
}

/// A named batch scalar the caller computes once per batch (a training step's
/// KL estimate, say), readable only in `alert` conditions as `step.NAME`.
/// The checker knows its name and range; the caller supplies its value when
/// it evaluates the alerts.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricDecl {
    /// The name as written, `step.kl`: always the prefix `step.` and a plain name.
    pub name: String,
    /// The values it can take (documentation, and the checker's interval of it).
    pub range: Interval,
    /// What it measures, for documentation.
    pub doc: String,
}

/// The prefix every step metric's name carries.
pub const METRIC_PREFIX: &str = "step.";

impl FeatureSchema {
    /// An empty schema: no features, the lints' generic texts.
    pub fn new() -> FeatureSchema {
        FeatureSchema::default()
    }

    /// Adds a declaration. Panics on a duplicate name: schemas are built by code, not users.
    pub fn declare(&mut self, decl: FeatureDecl) -> &mut FeatureSchema {
        assert!(self.get(&decl.name).is_none(), "feature `{}` declared twice", decl.name);
        self.decls.push(decl);
        self
    }

    /// Adds a declaration, builder style (panics on a duplicate name, as [`FeatureSchema::declare`]).
    pub fn with(mut self, decl: FeatureDecl) -> FeatureSchema {
        self.declare(decl);
        self
    }

    /// Replaces the help line of every warning of `case` with `help`.
    pub fn with_lint_help(mut self, case: LintCase, help: &str) -> FeatureSchema {
        self.lint_text_mut(case).help = Some(help.to_string());
        self
    }

    /// Appends `note` to every warning of `case` (after earlier notes for the same case).
    pub fn with_lint_note(mut self, case: LintCase, note: &str) -> FeatureSchema {
        self.lint_text_mut(case).notes.push(note.to_string());
        self
    }

    /// Declares a way a rollout can do nothing (see [`IdleCase`]): the
    /// `idle-outranks` lint then checks that such a rollout never gets a
    /// higher advantage than a sibling whose quality features are positive.
    pub fn with_idle_case(mut self, name: &str, values: &[(&str, f64)]) -> FeatureSchema {
        let values = values.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        self.idle.push(IdleCase { name: name.to_string(), values });
        self
    }

    /// Declares a step metric (see [`MetricDecl`]). Panics when the name is
    /// not `step.NAME` with a plain name or is declared twice: schemas are built by code.
    pub fn with_metric(mut self, name: &str, range: Interval, doc: &str) -> FeatureSchema {
        let plain = name.strip_prefix(METRIC_PREFIX).unwrap_or("");
        let ok = plain.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && plain.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        assert!(ok, "a step metric is named `step.NAME`, not `{name}`");
        assert!(self.metric(name).is_none(), "step metric `{name}` declared twice");
        self.metrics.push(MetricDecl { name: name.to_string(), range, doc: doc.to_string() });
        self
    }

    /// The step metric named `name` (`step.kl`), if declared.
    pub fn metric(&self, name: &str) -> Option<&MetricDecl> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// Every declared step metric, in the order declared.
    pub fn metrics(&self) -> &[MetricDecl] {
        &self.metrics
    }

    /// The declared idle cases, in the order declared.
    pub fn idle_cases(&self) -> &[IdleCase] {
        &self.idle
    }

    /// What this schema adds to the warnings of `case`, if anything.
    pub fn lint_text(&self, case: LintCase) -> Option<&LintText> {
        self.lint_texts.iter().find(|(c, _)| *c == case).map(|(_, t)| t)
    }

    fn lint_text_mut(&mut self, case: LintCase) -> &mut LintText {
        let at = match self.lint_texts.iter().position(|(c, _)| *c == case) {
            Some(at) => at,
            None => {
                self.lint_texts.push((case, LintText::default()));
                self.lint_texts.len() - 1
            }
        };
        &mut self.lint_texts[at].1
    }

    /// A feature read that messages can show as an example: the first quality
    /// feature at its first level (`grade(word)`), or `x` if there is none.
    pub fn example_feature(&self) -> String {
        let Some(decl) = self.decls.iter().find(|d| d.role == Role::Quality && d.ty == Type::Number) else {
            return "x".to_string();
        };
        let args = decl.params.iter().map(|p| p.default).collect();
        FeatureRef::new(decl, decl.levels.first().map(String::as_str), args).key
    }

    /// The declaration named `name` (a plain name or a leveled feature's function name).
    pub fn get(&self, name: &str) -> Option<&FeatureDecl> {
        self.decls.iter().find(|d| d.name == name)
    }

    /// Every declaration, in the order declared.
    pub fn decls(&self) -> &[FeatureDecl] {
        &self.decls
    }
}

/// A concrete feature column: a declaration with its level and argument values
/// resolved, e.g. `grade(word)` or `grade(word, 1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureRef {
    /// The declaration's name.
    pub name: String,
    /// The level identifier, for a leveled feature.
    pub level: Option<String>,
    /// Every declared param's value, defaults filled in, in declaration order.
    pub args: Vec<f64>,
    /// The canonical column name: `cost`, `grade(word)`; params that differ from
    /// their defaults are written out (`grade(word, 1)`). Feature CSV headers
    /// use exactly this text.
    pub key: String,
}

impl FeatureRef {
    /// Builds the canonical key for a declaration, level and argument values.
    pub fn new(decl: &FeatureDecl, level: Option<&str>, args: Vec<f64>) -> FeatureRef {
        let mut key = decl.name.clone();
        if let Some(level) = level {
            key.push('(');
            key.push_str(level);
            // Write the params up to the last one that differs from its default.
            let last = decl.params.iter().zip(&args).rposition(|(p, v)| p.default != *v);
            if let Some(last) = last {
                for v in &args[..=last] {
                    key.push_str(", ");
                    key.push_str(&format_number(*v));
                }
            }
            key.push(')');
        }
        FeatureRef { name: decl.name.clone(), level: level.map(str::to_string), args, key }
    }
}

/// Formats a number the way the printer and feature keys write it: the
/// shortest text that reads back to the same `f64` (`1`, `0.5`, `1e-4` stays `0.0001`).
pub fn format_number(x: f64) -> String {
    if x.is_finite() && x == x.trunc() && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{x}") }
}
