//! The features behind a training run's summary metrics (file-level F_β,
//! precision and recall, calls, turns, efficiency, length, validity,
//! truncation), resolved once against a feature schema.
//!
//! The GRPO engine reports these columns for every step whatever its reward
//! reads. Rather than look each feature up by name and panic when one is
//! missing, [`SummaryFeatures::from_schema`] resolves them from the schema's
//! declarations: each [`SummaryMetric`] names the feature it reads, the level
//! (file for the retrieval metrics) and the role the schema must declare for
//! it, so a schema that renames, drops or re-roles one is a typed
//! [`SummaryError`] when the engine starts, not a panic mid-run. Parameters
//! (β of `Fb`) take their declared defaults.

use rewardlab_dsl::FeatureRef;
use rewardlab_dsl::schema::{FeatureSchema, Role};

use crate::features::{FeatureError, FeatureOptions, feature_table};
use crate::rollout::Rollout;

/// One summary column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SummaryMetric {
    /// `Fb(file)` at the default β.
    FbFile,
    /// `P(file)`.
    PrecisionFile,
    /// `R(file)`.
    RecallFile,
    /// `c`, calls per turn.
    CallsPerTurn,
    /// `C`, calls per rollout.
    Calls,
    /// `T`, turns.
    Turns,
    /// `e`, tool efficiency.
    Efficiency,
    /// `len`, completion tokens.
    Length,
    /// `valid`, whether the answer parsed.
    Valid,
    /// `truncated`, whether the rollout ran out of turns or tokens.
    Truncated,
}

impl SummaryMetric {
    /// Every metric, in the order of [`SummaryFeatures::refs`].
    pub const ALL: [SummaryMetric; 10] = [
        SummaryMetric::FbFile,
        SummaryMetric::PrecisionFile,
        SummaryMetric::RecallFile,
        SummaryMetric::CallsPerTurn,
        SummaryMetric::Calls,
        SummaryMetric::Turns,
        SummaryMetric::Efficiency,
        SummaryMetric::Length,
        SummaryMetric::Valid,
        SummaryMetric::Truncated,
    ];

    /// The schema feature it reads, its level, and the role the schema must give it.
    pub fn feature(self) -> (&'static str, Option<&'static str>, Role) {
        match self {
            SummaryMetric::FbFile => ("Fb", Some("file"), Role::Quality),
            SummaryMetric::PrecisionFile => ("P", Some("file"), Role::Quality),
            SummaryMetric::RecallFile => ("R", Some("file"), Role::Quality),
            SummaryMetric::CallsPerTurn => ("c", None, Role::Efficiency),
            SummaryMetric::Calls => ("C", None, Role::Efficiency),
            SummaryMetric::Turns => ("T", None, Role::Efficiency),
            SummaryMetric::Efficiency => ("e", None, Role::Efficiency),
            SummaryMetric::Length => ("len", None, Role::Length),
            SummaryMetric::Valid => ("valid", None, Role::Quality),
            SummaryMetric::Truncated => ("truncated", None, Role::Other),
        }
    }
}

/// Why the summary features could not be resolved from a schema.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SummaryError {
    #[error("summary metric {metric:?} reads feature `{feature}`, which the schema does not declare")]
    /// The schema does not declare the feature a metric reads.
    Missing {
        /// The metric.
        metric: SummaryMetric,
        /// The feature it reads.
        feature: &'static str,
    },
    #[error("summary metric {metric:?} reads `{feature}({level})`, but the schema declares no level `{level}` for it")]
    /// The feature is declared, but without the level the metric reads.
    Level {
        /// The metric.
        metric: SummaryMetric,
        /// The feature it reads.
        feature: &'static str,
        /// The level it reads the feature at.
        level: &'static str,
    },
    #[error("summary metric {metric:?} reads `{feature}` as a plain feature, but the schema declares it with levels")]
    /// The metric reads a plain feature that the schema declares with levels.
    Leveled {
        /// The metric.
        metric: SummaryMetric,
        /// The feature it reads.
        feature: &'static str,
    },
    #[error(
        "summary metric {metric:?} reads `{feature}` as a {expected:?} feature; the schema declares it {declared:?}"
    )]
    /// The schema gives the feature a different role from the one the metric expects.
    Role {
        /// The metric.
        metric: SummaryMetric,
        /// The feature it reads.
        feature: &'static str,
        /// The role the metric needs.
        expected: Role,
        /// The role the schema declares.
        declared: Role,
    },
}

/// The resolved feature column of every [`SummaryMetric`].
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryFeatures {
    refs: Vec<FeatureRef>,
}

/// Summary columns of a batch of rollouts, each in input (rollout) order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SummaryColumns {
    /// `Fb(file)` at the schema's default β, in [0, 1].
    pub fb: Vec<f64>,
    /// `P(file)`, in [0, 1].
    pub precision: Vec<f64>,
    /// `R(file)`, in [0, 1].
    pub recall: Vec<f64>,
    /// `c`, calls per turn.
    pub c: Vec<f64>,
    /// `C`, tool calls of the rollout.
    pub calls: Vec<f64>,
    /// `T`, turns of the rollout (the answer turn included).
    pub turns: Vec<f64>,
    /// `e`, tool efficiency, in [0, 1].
    pub e: Vec<f64>,
    /// `len`, completion tokens.
    pub len: Vec<f64>,
    /// `valid`: 1 when the answer parsed, else 0.
    pub valid: Vec<f64>,
    /// `truncated`: 1 when the rollout ran out of turns or tokens, else 0.
    pub truncated: Vec<f64>,
}

impl SummaryFeatures {
    /// Resolves every metric against `schema` (the rewards crate's own is
    /// [`crate::feature_schema`]).
    pub fn from_schema(schema: &FeatureSchema) -> Result<SummaryFeatures, SummaryError> {
        let mut refs = Vec::with_capacity(SummaryMetric::ALL.len());
        for metric in SummaryMetric::ALL {
            let (feature, level, role) = metric.feature();
            let decl = schema.get(feature).ok_or(SummaryError::Missing { metric, feature })?;
            if decl.role != role {
                return Err(SummaryError::Role { metric, feature, expected: role, declared: decl.role });
            }
            match level {
                Some(level) if !decl.levels.iter().any(|l| l == level) => {
                    return Err(SummaryError::Level { metric, feature, level });
                }
                None if !decl.levels.is_empty() => return Err(SummaryError::Leveled { metric, feature }),
                _ => {}
            }
            let args = decl.params.iter().map(|p| p.default).collect();
            refs.push(FeatureRef::new(decl, level, args));
        }
        Ok(SummaryFeatures { refs })
    }

    /// The feature columns, in the order of [`SummaryMetric::ALL`].
    pub fn refs(&self) -> &[FeatureRef] {
        &self.refs
    }

    /// The column `metric` reads.
    pub fn get(&self, metric: SummaryMetric) -> &FeatureRef {
        // `from_schema` pushes one ref per metric in `ALL` order, which is the declaration order.
        &self.refs[metric as usize]
    }

    /// Computes every summary column of `rollouts`, in rollout order.
    pub fn columns(&self, rollouts: &[Rollout], options: &FeatureOptions) -> Result<SummaryColumns, FeatureError> {
        let table = feature_table(&self.refs, rollouts, options)?;
        let column = |metric: SummaryMetric| -> Result<Vec<f64>, FeatureError> {
            let key = &self.get(metric).key;
            let values = table.table.column(key).ok_or_else(|| FeatureError::Unknown { key: key.clone() })?;
            let mut out = vec![0.0; values.len()];
            for (row, &i) in table.order.iter().enumerate() {
                out[i] = values[row];
            }
            Ok(out)
        };
        Ok(SummaryColumns {
            fb: column(SummaryMetric::FbFile)?,
            precision: column(SummaryMetric::PrecisionFile)?,
            recall: column(SummaryMetric::RecallFile)?,
            c: column(SummaryMetric::CallsPerTurn)?,
            calls: column(SummaryMetric::Calls)?,
            turns: column(SummaryMetric::Turns)?,
            e: column(SummaryMetric::Efficiency)?,
            len: column(SummaryMetric::Length)?,
            valid: column(SummaryMetric::Valid)?,
            truncated: column(SummaryMetric::Truncated)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use rewardlab_dsl::Interval;
    use rewardlab_dsl::schema::FeatureDecl;

    use super::*;
    use crate::rollout::Selection;

    #[test]
    fn the_rewards_schema_resolves_every_metric_with_default_params() {
        let summary = SummaryFeatures::from_schema(&crate::feature_schema()).expect("the rewards schema resolves");
        let keys: Vec<&str> = summary.refs().iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["Fb(file)", "P(file)", "R(file)", "c", "C", "T", "e", "len", "valid", "truncated"]);
        assert_eq!(summary.get(SummaryMetric::FbFile).args, [crate::schema::DEFAULT_BETA]);
        assert_eq!(summary.get(SummaryMetric::Turns).key, "T");
    }

    #[test]
    fn a_schema_without_a_metric_or_with_another_role_or_level_is_an_error() {
        let full = crate::feature_schema();
        let without = |name: &str| {
            full.decls().iter().filter(|d| d.name != name).fold(FeatureSchema::new(), |s, d| s.with(d.clone()))
        };
        assert_eq!(
            SummaryFeatures::from_schema(&without("e")),
            Err(SummaryError::Missing { metric: SummaryMetric::Efficiency, feature: "e" })
        );
        let reroled = without("len").with(FeatureDecl::number("len", Interval::NON_NEGATIVE, "tokens"));
        assert_eq!(
            SummaryFeatures::from_schema(&reroled),
            Err(SummaryError::Role {
                metric: SummaryMetric::Length,
                feature: "len",
                expected: Role::Length,
                declared: Role::Other
            })
        );
        let relevelled = without("P")
            .with(FeatureDecl::number("P", Interval::UNIT, "precision").with_levels(&["lr"]).with_role(Role::Quality));
        assert_eq!(
            SummaryFeatures::from_schema(&relevelled),
            Err(SummaryError::Level { metric: SummaryMetric::PrecisionFile, feature: "P", level: "file" })
        );
    }

    #[test]
    fn columns_come_back_in_rollout_order() {
        let summary = SummaryFeatures::from_schema(&crate::feature_schema()).expect("resolves");
        let selection = |files: &[&str]| Selection {
            files: Some(files.iter().map(|f| (*f).to_owned()).collect()),
            line_ranges: Some(Vec::new()),
            functions: None,
        };
        // Groups interleave, so the table's rows are reordered and must be put back.
        let rollout = |group: &str, predicted: &[&str], calls: usize| Rollout {
            group: group.to_owned(),
            predicted: Some(selection(predicted)),
            target: Some(selection(&["a.py"])),
            turns: Some(vec![
                (0..calls)
                    .map(|_| crate::rollout::LoggedCall {
                        tool: "grep".into(),
                        args: serde_json::Value::Null,
                        entities: Some(Vec::new()),
                    })
                    .collect(),
                Vec::new(),
            ]),
            completion_tokens: Some(7),
            valid: Some(true),
            truncated: Some(false),
        };
        let rollouts = [rollout("g1", &["a.py"], 1), rollout("g2", &["b.py"], 2), rollout("g1", &["b.py"], 3)];
        let columns = summary.columns(&rollouts, &FeatureOptions::default()).expect("columns");
        assert_eq!(columns.fb, [1.0, 0.0, 0.0]);
        assert_eq!(columns.calls, [1.0, 2.0, 3.0]);
        assert_eq!(columns.turns, [2.0, 2.0, 2.0]);
        assert_eq!(columns.len, [7.0; 3]);
    }
}
