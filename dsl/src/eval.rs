//! What evaluation can be asked to do and how it fails; shared by the
//! interpreter (the oracle) and the compiled CPU backend.

/// Options of one evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalOptions {
    /// Every group must have exactly this many rollouts; `None` accepts any size ≥ 1.
    pub group_size: Option<usize>,
    /// What to do with a NaN or infinity in `reward`, `adv` or `advantage`.
    pub non_finite: NonFinite,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions { group_size: None, non_finite: NonFinite::Error }
    }
}

/// What evaluation does when a definition produces NaN or an infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonFinite {
    /// Fail naming the group, rollout, definition and feature values (the default).
    Error,
    /// Let NaN and infinities through.
    Allow,
}

/// A run-time fault. Every variant names where it happened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    #[error("the program reads feature `{key}`, which the input does not provide")]
    /// The input table lacks a column the program reads.
    MissingFeature {
        /// The missing feature key.
        key: String,
    },
    #[error(
        "`{def}` is {value} for rollout {index_in_group} of group `{group}` (row {row}); features: {}",
        format_features(features)
    )]
    /// A definition evaluated to NaN or an infinity under [`NonFinite::Error`].
    NonFinite {
        /// The definition (or `let`) that produced the value.
        def: String,
        /// The non-finite value itself.
        value: f64,
        /// The rollout's group name.
        group: String,
        /// Position within its group, 0-based.
        index_in_group: usize,
        /// Row of the input table, 0-based.
        row: usize,
        /// The rollout's feature values, by key.
        features: Vec<(String, f64)>,
    },
    #[error("group `{group}` has {got} rollouts, {want} were declared")]
    /// A group's size differs from [`EvalOptions::group_size`].
    GroupSize {
        /// The group's name.
        group: String,
        /// Rollouts the group actually has.
        got: usize,
        /// Rollouts per group that were declared.
        want: usize,
    },
}

fn format_features(features: &[(String, f64)]) -> String {
    features.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ")
}
