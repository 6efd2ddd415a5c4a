//! From rollout records to the DSL's feature table: one column per requested
//! [`FeatureRef`] (`Fb(file)`, `Fb(lr, 1)`, `P(func)`, `c`, ...), rows grouped
//! by `group` in order of first appearance.
//!
//! A feature that a record cannot provide is an error naming the feature, the
//! source and the rollout ([`FeatureError::Unavailable`]); a computed value
//! outside the feature's declared range (e.g. `c > 8`) is an error too
//! ([`FeatureError::OutOfRange`]), because the checker's proofs assume those ranges.

use std::collections::HashMap;

use rewardlab_dsl::table::TableError;
use rewardlab_dsl::{FeatureRef, FeatureSchema, FeatureTable};

use crate::efficiency;
use crate::metrics::{Counts, LineMatch, LineRange, match_line_ranges};
use crate::rollout::{CallRef, Keep, LoggedCall, Rollout, RolloutRef, Selection, SelectionRef, Text};

/// How features are computed.
#[derive(Clone, Debug)]
pub struct FeatureOptions {
    /// The line-range matching rule of `Fb(lr)`, `P(lr)`, `R(lr)`, `F1(lr)`.
    pub line_match: LineMatch,
    /// Names the data source in errors (a file path, "the GRPO engine").
    pub source: String,
    /// Reject values outside the schema's declared ranges.
    pub check_ranges: bool,
}

impl Default for FeatureOptions {
    fn default() -> FeatureOptions {
        FeatureOptions { line_match: LineMatch::Coverage, source: "rollouts".to_string(), check_ranges: true }
    }
}

/// A feature table and the order of its rows.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupedTable {
    /// The feature columns, rows grouped by `group`.
    pub table: FeatureTable,
    /// `order[row]` is the input index of the rollout in table row `row`;
    /// write outputs back in input order with `out[order[row]] = value[row]`.
    pub order: Vec<usize>,
}

/// Why a feature column could not be computed.
#[derive(Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FeatureError {
    #[error("unknown feature `{key}`: rewardlab-rewards does not compute it")]
    /// The requested feature is not one this crate computes.
    Unknown {
        /// The feature's key as written (`foo(file)`).
        key: String,
    },
    #[error("feature `{key}`: unknown level `{level}` (expected file, lr or func)")]
    /// A leveled feature names a level other than `file`, `lr` or `func`.
    BadLevel {
        /// The feature's key as written.
        key: String,
        /// The level that is not known.
        level: String,
    },
    #[error("feature `{key}`: beta must be a finite number >= 0")]
    /// `Fb`'s β is negative, NaN or infinite.
    BadBeta {
        /// The feature's key as written.
        key: String,
    },
    #[error(
        "feature `{feature}` is not provided by {data_source}: rollout {rollout} (group `{group}`) has no {missing}"
    )]
    /// A rollout lacks a key the feature needs (the source did not record it).
    Unavailable {
        /// The feature's key.
        feature: String,
        /// The data source, from [`FeatureOptions::source`].
        data_source: String,
        /// The rollout's input index, 0-based.
        rollout: usize,
        /// The rollout's group.
        group: String,
        /// What is missing, as the record spells it (`` `target.functions` ``).
        missing: String,
    },
    #[error(
        "feature `{feature}` of rollout {rollout} (group `{group}`) in {data_source} is {value}, outside its declared range [{lo}, {hi}]"
    )]
    /// A computed value lies outside the range the schema declares for the feature.
    OutOfRange {
        /// The feature's key.
        feature: String,
        /// The data source, from [`FeatureOptions::source`].
        data_source: String,
        /// The rollout's input index, 0-based.
        rollout: usize,
        /// The rollout's group.
        group: String,
        /// The value computed.
        value: f64,
        /// The declared range's lower bound.
        lo: f64,
        /// The declared range's upper bound.
        hi: f64,
    },
    #[error(transparent)]
    /// The feature table refused its groups or a column.
    Table(#[from] TableError),
}

/// The retrieval level of `Fb`, `P`, `R`, `F1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Files (`file`): sets of repository-relative paths.
    File,
    /// Line ranges (`lr`): `path:start-end`, matched by a [`LineMatch`] rule.
    LineRange,
    /// Functions (`func`): sets of `path::name` strings.
    Function,
}

impl Level {
    /// The level a DSL level identifier names (`file`, `lr`, `func`), or `None`.
    pub fn parse(level: &str) -> Option<Level> {
        match level {
            "file" => Some(Level::File),
            "lr" => Some(Level::LineRange),
            "func" => Some(Level::Function),
            _ => None,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Level::File => "files",
            Level::LineRange => "line_ranges",
            Level::Function => "functions",
        }
    }
}

/// What a column computes, resolved once from its [`FeatureRef`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Column {
    FBeta(Level, f64),
    Precision(Level),
    Recall(Level),
    F1(Level),
    CallsPerTurn,
    Calls,
    Turns,
    Efficiency,
    Len,
    Valid,
    Truncated,
}

fn resolve(f: &FeatureRef) -> Result<Column, FeatureError> {
    let level = || -> Result<Level, FeatureError> {
        let name = f.level.as_deref().unwrap_or("");
        Level::parse(name).ok_or_else(|| FeatureError::BadLevel { key: f.key.clone(), level: name.to_string() })
    };
    Ok(match f.name.as_str() {
        "Fb" => {
            let beta = f.args.first().copied().unwrap_or(crate::schema::DEFAULT_BETA);
            if !(beta.is_finite() && beta >= 0.0) {
                return Err(FeatureError::BadBeta { key: f.key.clone() });
            }
            Column::FBeta(level()?, beta)
        }
        "P" => Column::Precision(level()?),
        "R" => Column::Recall(level()?),
        "F1" => Column::F1(level()?),
        "c" => Column::CallsPerTurn,
        "C" => Column::Calls,
        "T" => Column::Turns,
        "e" => Column::Efficiency,
        "len" => Column::Len,
        "valid" => Column::Valid,
        "truncated" => Column::Truncated,
        _ => return Err(FeatureError::Unknown { key: f.key.clone() }),
    })
}

/// Groups rollouts (stable, by first appearance of `group`) and computes one
/// column per requested feature. Duplicate requests (same key) are computed once.
pub fn feature_table(
    features: &[FeatureRef],
    rollouts: &[Rollout],
    options: &FeatureOptions,
) -> Result<GroupedTable, FeatureError> {
    let order = group_order(rollouts);
    let sizes = group_sizes(rollouts, &order);
    let mut table = FeatureTable::new(sizes)?;
    let schema = crate::schema::feature_schema();
    let mut counts_cache: HashMap<Level, Vec<Counts>> = HashMap::new();
    for f in features {
        if table.column(&f.key).is_some() {
            continue;
        }
        let column = resolve(f)?;
        let mut values = Vec::with_capacity(order.len());
        if let Some(level) = column_level(column) {
            let counts = match counts_cache.entry(level) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let mut counts = Vec::with_capacity(order.len());
                    for &i in &order {
                        counts.push(
                            level_counts(level, &rollouts[i], options.line_match)
                                .map_err(|missing| unavailable(f, options, i, &rollouts[i], missing))?,
                        );
                    }
                    e.insert(counts)
                }
            };
            values.extend(counts.iter().map(|c| metric_value(column, *c)));
        } else {
            for &i in &order {
                let v = scalar_value(column, &rollouts[i])
                    .map_err(|missing| unavailable(f, options, i, &rollouts[i], missing))?;
                values.push(v);
            }
        }
        if options.check_ranges {
            check_range(f, &schema, &values, &order, rollouts, options)?;
        }
        table.add_column(f.key.clone(), values)?;
    }
    Ok(GroupedTable { table, order })
}

/// The value of one feature for one rollout (no range check). `Err` names what is missing.
pub fn feature_value(f: &FeatureRef, rollout: &Rollout, options: &FeatureOptions) -> Result<f64, FeatureError> {
    let column = resolve(f)?;
    let value = match column_level(column) {
        Some(level) => level_counts(level, rollout, options.line_match).map(|c| metric_value(column, c)),
        None => scalar_value(column, rollout),
    };
    value.map_err(|missing| unavailable(f, options, 0, rollout, missing))
}

/// The groups of `rollouts` taken in `order` ([`group_order`]) as `(name, rows)`, for a
/// [`FeatureTable`](rewardlab_dsl::FeatureTable).
pub fn group_sizes(rollouts: &[Rollout], order: &[usize]) -> Vec<(String, usize)> {
    group_sizes_of(order.iter().map(|&i| rollouts[i].group.as_str()))
}

/// [`group_sizes`] of rows given by their group names alone, already in grouped order: each run
/// of one name is a group.
pub fn group_sizes_of<'a>(groups: impl IntoIterator<Item = &'a str>) -> Vec<(String, usize)> {
    let mut sizes: Vec<(String, usize)> = Vec::new();
    for g in groups {
        match sizes.last_mut() {
            Some((name, n)) if name == g => *n += 1,
            _ => sizes.push((g.to_owned(), 1)),
        }
    }
    sizes
}

/// The stable grouping permutation: input indices ordered by the first
/// appearance of their group, input order within a group.
pub fn group_order(rollouts: &[Rollout]) -> Vec<usize> {
    group_order_of(rollouts.iter().map(|r| r.group.as_str()))
}

/// [`group_order`] of rows given by their group names alone.
pub fn group_order_of<'a>(groups: impl IntoIterator<Item = &'a str>) -> Vec<usize> {
    // One pass numbers the groups and counts their rows, a second places
    // each row after its group's earlier rows: no list per group. foldhash:
    // `std`'s SipHash was most of this serial step on a big log.
    let mut group_index: HashMap<&str, usize, foldhash::fast::RandomState> = HashMap::default();
    let mut counts: Vec<usize> = Vec::new();
    let mut ids: Vec<usize> = Vec::new();
    // A log lists a group's rollouts mostly together: a row of the previous
    // row's group is that group without a lookup.
    let mut last: Option<(&str, usize)> = None;
    for group in groups {
        let g = match last {
            Some((name, g)) if name == group => g,
            _ => *group_index.entry(group).or_insert_with(|| {
                counts.push(0);
                counts.len() - 1
            }),
        };
        last = Some((group, g));
        counts[g] += 1;
        ids.push(g);
    }
    let mut next = counts;
    let mut start = 0;
    for n in &mut next {
        (*n, start) = (start, start + *n);
    }
    let mut order = vec![0; ids.len()];
    for (i, g) in ids.into_iter().enumerate() {
        order[next[g]] = i;
        next[g] += 1;
    }
    order
}

/// The features of one rollout at a time, for a loader that computes them
/// as it reads each record and then drops it (a big log's records take many
/// times the file's size). The values are [`feature_table`]'s; a feature a
/// rollout cannot provide, or a value outside its declared range, makes
/// [`RowFeatures::values`] give up, and the caller asks [`feature_table`]
/// for the error, which names the first such rollout in its order.
#[derive(Clone, Debug)]
pub struct RowFeatures {
    /// The distinct requested features, in order of first request.
    features: Vec<FeatureRef>,
    columns: Vec<Column>,
    ranges: Vec<Option<rewardlab_dsl::Interval>>,
}

impl RowFeatures {
    /// Resolves the requested features (duplicate keys once, as [`feature_table`] does).
    pub fn new(features: &[FeatureRef]) -> Result<RowFeatures, FeatureError> {
        let schema = crate::schema::feature_schema();
        let mut out = RowFeatures { features: Vec::new(), columns: Vec::new(), ranges: Vec::new() };
        for f in features {
            if out.features.iter().any(|g| g.key == f.key) {
                continue;
            }
            out.columns.push(resolve(f)?);
            out.ranges.push(schema.get(&f.name).map(|d| d.range));
            out.features.push(f.clone());
        }
        Ok(out)
    }

    /// The features whose values [`RowFeatures::values`] gives, in that order.
    pub fn features(&self) -> &[FeatureRef] {
        &self.features
    }

    /// What [`RowFeatures::values_of`] reads of a record, for
    /// [`RolloutRef::parse_keeping`].
    pub fn keep(&self) -> Keep {
        Keep { line_ranges: self.columns.iter().any(|&c| column_level(c) == Some(Level::LineRange)) }
    }

    /// One rollout's values, in [`RowFeatures::features`] order; `None` when
    /// one is unavailable or (with `check_ranges`) out of its range.
    pub fn values(&self, rollout: &Rollout, options: &FeatureOptions) -> Option<Vec<f64>> {
        self.values_with(
            options,
            |level| level_counts(level, rollout, options.line_match),
            |column| scalar_value(column, rollout),
        )
    }

    /// [`RowFeatures::values`] of a record read in place: the same values
    /// for the same line.
    pub fn values_of(&self, rollout: &RolloutRef<'_>, options: &FeatureOptions) -> Option<Vec<f64>> {
        self.values_with(
            options,
            |level| {
                let pred = predicted_of(rollout.predicted.as_ref(), rollout.valid)?.map(lists_ref);
                let target = rollout.target.as_ref().ok_or_else(|| "`target`".to_string())?;
                counts_of(level, pred, &lists_ref(target), options.line_match)
            },
            |column| {
                let r = Scalars {
                    turns: rollout.turns.as_deref(),
                    completion_tokens: rollout.completion_tokens,
                    valid: rollout.valid,
                    truncated: rollout.truncated,
                };
                scalar_of(column, r, |c: &CallRef<'_>| c.entities.as_deref())
            },
        )
    }

    fn values_with(
        &self,
        options: &FeatureOptions,
        level_counts: impl Fn(Level) -> Result<Counts, String>,
        scalar_value: impl Fn(Column) -> Result<f64, String>,
    ) -> Option<Vec<f64>> {
        let mut counts: [Option<Counts>; 3] = [None; 3];
        let mut values = Vec::with_capacity(self.columns.len());
        for (&column, range) in self.columns.iter().zip(&self.ranges) {
            let value = match column_level(column) {
                Some(level) => {
                    let slot = &mut counts[level as usize];
                    let c = match *slot {
                        Some(c) => c,
                        None => *slot.insert(level_counts(level).ok()?),
                    };
                    metric_value(column, c)
                }
                None => scalar_value(column).ok()?,
            };
            if options.check_ranges && range.is_some_and(|r| !r.contains(value)) {
                return None;
            }
            values.push(value);
        }
        Some(values)
    }
}

fn column_level(c: Column) -> Option<Level> {
    match c {
        Column::FBeta(l, _) | Column::Precision(l) | Column::Recall(l) | Column::F1(l) => Some(l),
        _ => None,
    }
}

fn metric_value(c: Column, counts: Counts) -> f64 {
    match c {
        Column::FBeta(_, beta) => counts.f_beta(beta),
        Column::Precision(_) => counts.precision(),
        Column::Recall(_) => counts.recall(),
        Column::F1(_) => counts.f1(),
        _ => unreachable!("metric_value is only called for leveled columns"),
    }
}

/// An empty prediction stands in for an absent `predicted` only when the
/// rollout is marked invalid: an unparsable answer predicts nothing.
fn predicted(r: &Rollout) -> Result<Option<&Selection>, String> {
    predicted_of(r.predicted.as_ref(), r.valid)
}

fn predicted_of<S>(predicted: Option<&S>, valid: Option<bool>) -> Result<Option<&S>, String> {
    match (predicted, valid) {
        (Some(p), _) => Ok(Some(p)),
        (None, Some(false)) => Ok(None),
        (None, _) => Err("`predicted`".to_string()),
    }
}

/// The lists of a [`Selection`] or a [`SelectionRef`].
struct Lists<'r, S> {
    files: Option<&'r [S]>,
    line_ranges: Option<&'r [LineRange]>,
    functions: Option<&'r [S]>,
}

fn lists(s: &Selection) -> Lists<'_, String> {
    Lists { files: s.files.as_deref(), line_ranges: s.line_ranges.as_deref(), functions: s.functions.as_deref() }
}

fn lists_ref<'r, 'a>(s: &'r SelectionRef<'a>) -> Lists<'r, Text<'a>> {
    Lists { files: s.files.as_deref(), line_ranges: s.line_ranges.as_deref(), functions: s.functions.as_deref() }
}

fn level_counts(level: Level, r: &Rollout, rule: LineMatch) -> Result<Counts, String> {
    let pred = predicted(r)?.map(lists);
    let target = r.target.as_ref().ok_or_else(|| "`target`".to_string())?;
    counts_of(level, pred, &lists(target), rule)
}

/// The counts of one level; `pred` is `None` when the rollout predicted nothing.
fn counts_of<S: AsRef<str>>(
    level: Level,
    pred: Option<Lists<'_, S>>,
    target: &Lists<'_, S>,
    rule: LineMatch,
) -> Result<Counts, String> {
    let missing = |side: &str| format!("`{side}.{}`", level.key());
    match level {
        Level::File | Level::Function => {
            let file = level == Level::File;
            let t = if file { target.files } else { target.functions }.ok_or_else(|| missing("target"))?;
            let p = match &pred {
                Some(p) => if file { p.files } else { p.functions }.ok_or_else(|| missing("predicted"))?,
                None => &[],
            };
            Ok(Counts::of_sets(p, t))
        }
        Level::LineRange => {
            let t = target.line_ranges.ok_or_else(|| missing("target"))?;
            let p = match &pred {
                Some(p) => p.line_ranges.ok_or_else(|| missing("predicted"))?,
                None => &[],
            };
            Ok(match_line_ranges(p, t, rule).0)
        }
    }
}

/// The record keys the plain (not leveled) columns read.
struct Scalars<'r, C> {
    turns: Option<&'r [Vec<C>]>,
    completion_tokens: Option<u64>,
    valid: Option<bool>,
    truncated: Option<bool>,
}

fn scalar_value(c: Column, r: &Rollout) -> Result<f64, String> {
    let scalars = Scalars {
        turns: r.turns.as_deref(),
        completion_tokens: r.completion_tokens,
        valid: r.valid,
        truncated: r.truncated,
    };
    scalar_of(c, scalars, |call: &LoggedCall| call.entities.as_deref())
}

fn scalar_of<C, E: Eq + std::hash::Hash>(
    c: Column,
    r: Scalars<'_, C>,
    entities: impl Fn(&C) -> Option<&[E]>,
) -> Result<f64, String> {
    let turns = || r.turns.ok_or_else(|| "`turns`".to_string());
    Ok(match c {
        Column::CallsPerTurn => efficiency::calls_per_turn(turns()?),
        Column::Calls => efficiency::calls(turns()?) as f64,
        Column::Turns => turns()?.len() as f64,
        Column::Efficiency => efficiency::efficiency_of(turns()?, entities).map_err(|e| format!("entities: {e}"))?,
        Column::Len => r.completion_tokens.ok_or_else(|| "`completion_tokens`".to_string())? as f64,
        Column::Valid => bool_value(r.valid).ok_or_else(|| "`valid`".to_string())?,
        Column::Truncated => bool_value(r.truncated).ok_or_else(|| "`truncated`".to_string())?,
        _ => unreachable!("scalar_value is only called for plain columns"),
    })
}

fn bool_value(b: Option<bool>) -> Option<f64> {
    b.map(|b| if b { 1.0 } else { 0.0 })
}

fn unavailable(f: &FeatureRef, options: &FeatureOptions, i: usize, r: &Rollout, missing: String) -> FeatureError {
    FeatureError::Unavailable {
        feature: f.key.clone(),
        data_source: options.source.clone(),
        rollout: i,
        group: r.group.clone(),
        missing,
    }
}

fn check_range(
    f: &FeatureRef,
    schema: &FeatureSchema,
    values: &[f64],
    order: &[usize],
    rollouts: &[Rollout],
    options: &FeatureOptions,
) -> Result<(), FeatureError> {
    let Some(decl) = schema.get(&f.name) else {
        return Ok(());
    };
    let range = decl.range;
    for (row, &v) in values.iter().enumerate() {
        if !range.contains(v) {
            let i = order[row];
            return Err(FeatureError::OutOfRange {
                feature: f.key.clone(),
                data_source: options.source.clone(),
                rollout: i,
                group: rollouts[i].group.clone(),
                value: v,
                lo: range.lo,
                hi: range.hi,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feature(name: &str, level: Option<&str>, args: Vec<f64>) -> FeatureRef {
        let schema = crate::schema::feature_schema();
        let decl = schema.get(name).expect("declared feature");
        let args = if args.is_empty() { decl.params.iter().map(|p| p.default).collect() } else { args };
        FeatureRef::new(decl, level, args)
    }

    fn rollout(line: &str) -> Rollout {
        Rollout::from_json_line(line).expect("test rollout parses")
    }

    #[test]
    fn groups_are_stable_by_first_appearance() {
        let rs: Vec<Rollout> =
            ["b", "a", "b", "c", "a"].iter().map(|g| Rollout { group: g.to_string(), ..Rollout::default() }).collect();
        assert_eq!(group_order(&rs), vec![0, 2, 1, 4, 3]);
        let t = feature_table(&[], &rs, &FeatureOptions::default()).expect("no columns");
        assert_eq!(t.table.groups(), 3);
        assert_eq!(t.table.group_name(0), "b");
        assert_eq!(t.table.group_rows(1), 2..4);
    }

    #[test]
    fn computes_the_contract_example() {
        let r = rollout(
            r#"{"group": "g", "predicted": {"files": ["m.py", "x.py"], "line_ranges": ["m.py:386-399"]},
             "target": {"files": ["m.py"], "line_ranges": ["m.py:388-397"], "functions": ["m.py::A.f"]},
             "turns": [[{"tool": "grep", "entities": ["m.py:390"]}], [{"tool": "read", "entities": ["m.py:390", "m.py:391"]}], []],
             "completion_tokens": 312, "valid": true, "truncated": false}"#,
        );
        let feats = vec![
            feature("Fb", Some("file"), vec![]),
            feature("Fb", Some("file"), vec![1.0]),
            feature("P", Some("file"), vec![]),
            feature("Fb", Some("lr"), vec![]),
            feature("c", None, vec![]),
            feature("C", None, vec![]),
            feature("T", None, vec![]),
            feature("e", None, vec![]),
            feature("len", None, vec![]),
            feature("valid", None, vec![]),
            feature("truncated", None, vec![]),
        ];
        let t = feature_table(&feats, &[r], &FeatureOptions::default()).expect("features");
        let get = |k: &str| t.table.column(k).expect(k)[0];
        // One of two predicted files is right, the only target found: F_0.5 = 1.25 / (1.25 + 1).
        assert!((get("Fb(file)") - 1.25 / 2.25).abs() < 1e-12);
        assert!((get("Fb(file, 1)") - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(get("P(file)"), 0.5);
        assert_eq!(get("Fb(lr)"), 1.0);
        assert_eq!((get("c"), get("C"), get("T")), (2.0 / 3.0, 2.0, 3.0));
        assert_eq!(get("e"), 0.75);
        assert_eq!((get("len"), get("valid"), get("truncated")), (312.0, 1.0, 0.0));
    }

    #[test]
    fn absent_keys_are_errors_naming_feature_and_source() {
        let r = rollout(r#"{"group": "g", "predicted": {"files": []}, "target": {"files": ["a"]}}"#);
        let opts = FeatureOptions { source: "runs.jsonl".into(), ..FeatureOptions::default() };
        let err = feature_table(&[feature("Fb", Some("func"), vec![])], std::slice::from_ref(&r), &opts)
            .expect_err("no functions");
        assert_eq!(
            err.to_string(),
            "feature `Fb(func)` is not provided by runs.jsonl: rollout 0 (group `g`) has no `target.functions`"
        );
        let err = feature_table(&[feature("c", None, vec![])], &[r], &opts).expect_err("no turns");
        assert!(err.to_string().contains("has no `turns`"), "{err}");
    }

    #[test]
    fn empty_lists_follow_the_empty_set_rules() {
        let r = rollout(r#"{"group": "g", "predicted": {"functions": []}, "target": {"functions": []}}"#);
        let v = feature_value(&feature("Fb", Some("func"), vec![]), &r, &FeatureOptions::default()).expect("value");
        assert_eq!(v, 1.0);
        // An invalid rollout with no prediction predicts nothing.
        let r = rollout(r#"{"group": "g", "valid": false, "target": {"files": ["a"]}}"#);
        let v = feature_value(&feature("R", Some("file"), vec![]), &r, &FeatureOptions::default()).expect("value");
        assert_eq!(v, 0.0);
    }

    #[test]
    fn a_record_read_in_place_gives_the_same_values_and_declines_every_bad_line() {
        let all: Vec<FeatureRef> = [
            ("Fb", Some("file")),
            ("P", Some("func")),
            ("F1", Some("lr")),
            ("c", None),
            ("C", None),
            ("T", None),
            ("e", None),
            ("len", None),
            ("valid", None),
            ("truncated", None),
        ]
        .into_iter()
        .map(|(name, level)| feature(name, level, vec![]))
        .collect();
        let row = RowFeatures::new(&all).expect("known features");
        let opts = FeatureOptions::default();
        let good = [
            r#"{"group": "g", "predicted": {"files": ["./a.py", "b.py"], "line_ranges": ["a.py:1-5"], "functions": ["./a.py::f"]},
               "target": {"files": ["a.py"], "line_ranges": ["./a.py:2-4"], "functions": ["a.py::f", "b.py::g"]},
               "turns": [[{"tool": "grep", "args": {"p": [1, null]}, "entities": ["a.py:3", "a.py:03", "a.py", "a.py:3"]}],
                         [{"tool": "read", "entities": ["a.py:3", "a\u002epy:3", "b.py:1"]}], []],
               "completion_tokens": 7, "valid": true, "truncated": false, "extra": {"x": 1}}"#,
            r#"{"group": "esc\"aped", "valid": false, "target": {"files": ["a\\b.py", ".\/c.py"], "line_ranges": [], "functions": []},
               "turns": [[{"tool": "glob", "entities": []}]], "completion_tokens": 0, "truncated": true}"#,
            // Unavailable features: both readers give up on the values.
            r#"{"group": "g", "predicted": {"files": []}, "target": {"files": ["a"]}, "turns": [[{"tool": "grep"}]]}"#,
        ];
        for line in good {
            let r = Rollout::from_json_line(line).expect("a good line");
            let in_place = RolloutRef::parse(line).expect("read in place");
            assert_eq!(in_place.group(), r.group);
            assert_eq!(row.values_of(&in_place, &opts), row.values(&r, &opts), "{line}");
        }
        let bad = [
            r#"{"predicted": {"files": []}}"#,
            r#"{"group": ""}"#,
            r#"{"group": "g", "turns": []}"#,
            r#"{"group": "g", "predicted": {"file": ["a"]}}"#,
            r#"{"group": "g", "target": {"line_ranges": ["a.py:5-1"]}}"#,
            r#"{"group": "g", "turns": [[{"entities": []}]]}"#,
            r#"{"group": "g", "turns": [[{"tool": "grep", "entities": [3]}]]}"#,
            r#"{"group": "g", "turns": [[{"tool": "grep", "args": 1e999}]]}"#,
            r#"{"group": 5}"#,
            r#"{"group": "g", "group": "h"}"#,
            "not json",
        ];
        for line in bad {
            assert!(Rollout::from_json_line(line).is_err(), "{line} is bad");
            assert!(RolloutRef::parse(line).is_none(), "{line} is declined");
        }
    }

    #[test]
    fn values_outside_declared_ranges_are_errors() {
        let calls: Vec<String> = (0..9).map(|_| r#"{"tool": "grep", "entities": []}"#.to_string()).collect();
        let r = rollout(&format!(r#"{{"group": "g", "turns": [[{}]]}}"#, calls.join(",")));
        let err = feature_table(&[feature("c", None, vec![])], &[r], &FeatureOptions::default()).expect_err("c = 9");
        assert!(matches!(err, FeatureError::OutOfRange { value: 9.0, .. }), "{err}");
    }
}
