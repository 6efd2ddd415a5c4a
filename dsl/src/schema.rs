//! The feature schema: the names a reward file may read, supplied by the caller.
//!
//! The DSL knows no retrieval metric. A caller (the `rewardlab-rewards` crate,
//! or a test) declares its rollout features here: plain names (`c`, `len`) and
//! leveled feature functions (`Fb(file)`, `Fb(file, beta)`), each with a type,
//! a declared range (the input of interval analysis and of the property-test
//! generator) and a role (what the lints need to know about it).

use crate::interval::Interval;

/// The value type of a DSL expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Number,
    Bool,
}

/// What a feature measures, as far as the lints care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// Task quality (F-beta, precision, validity...).
    Quality,
    /// Tool-use efficiency (`c`, `C`, `T`, `e`): scaling the reward by it is CodeGrep v1's pattern.
    Efficiency,
    /// Generation length (`len`).
    Length,
    Other,
}

/// A trailing numeric argument of a leveled feature, such as `beta` in `Fb(file, beta)`.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureParam {
    pub name: String,
    pub default: f64,
    /// Values the argument may take; a literal outside is an error.
    pub range: Interval,
}

/// One declared feature.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureDecl {
    /// `c`, or the function name `Fb`.
    pub name: String,
    /// Empty for a plain name. Otherwise the feature is read as `name(level)` or
    /// `name(level, params...)`, with `level` one of these identifiers.
    pub levels: Vec<String>,
    /// Optional numeric arguments after the level; each must be a number literal
    /// (or a `param`) in the source, and defaults when left out.
    pub params: Vec<FeatureParam>,
    pub ty: Type,
    /// The declared range of every value of this feature.
    pub range: Interval,
    /// Values are whole numbers (counts); the generator draws integers.
    pub integer: bool,
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

    pub fn with_role(mut self, role: Role) -> FeatureDecl {
        self.role = role;
        self
    }

    pub fn with_levels(mut self, levels: &[&str]) -> FeatureDecl {
        self.levels = levels.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn with_param(mut self, name: &str, default: f64, range: Interval) -> FeatureDecl {
        self.params.push(FeatureParam { name: name.to_string(), default, range });
        self
    }

    pub fn integer(mut self) -> FeatureDecl {
        self.integer = true;
        self
    }

    pub fn per_group(mut self) -> FeatureDecl {
        self.per_group = true;
        self
    }

    pub fn boolean(mut self) -> FeatureDecl {
        self.ty = Type::Bool;
        self.range = Interval::UNIT;
        self
    }
}

/// The set of features a reward file is checked against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeatureSchema {
    decls: Vec<FeatureDecl>,
}

impl FeatureSchema {
    pub fn new() -> FeatureSchema {
        FeatureSchema::default()
    }

    /// Adds a declaration. Panics on a duplicate name: schemas are built by code, not users.
    pub fn declare(&mut self, decl: FeatureDecl) -> &mut FeatureSchema {
        assert!(self.get(&decl.name).is_none(), "feature `{}` declared twice", decl.name);
        self.decls.push(decl);
        self
    }

    pub fn with(mut self, decl: FeatureDecl) -> FeatureSchema {
        self.declare(decl);
        self
    }

    pub fn get(&self, name: &str) -> Option<&FeatureDecl> {
        self.decls.iter().find(|d| d.name == name)
    }

    pub fn decls(&self) -> &[FeatureDecl] {
        &self.decls
    }
}

/// A concrete feature column: a declaration with its level and argument values
/// resolved, e.g. `Fb(file)` or `Fb(file, 1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureRef {
    pub name: String,
    pub level: Option<String>,
    /// Every declared param's value, defaults filled in, in declaration order.
    pub args: Vec<f64>,
    /// The canonical column name: `c`, `Fb(file)`; params that differ from
    /// their defaults are written out (`Fb(file, 1)`). Feature CSV headers
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
