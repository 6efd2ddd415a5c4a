//! `study replay` on a whole rollout log, streamed: each line is read in
//! place and turned at once into its group, its logged step and the values of
//! every feature any variant (or its alerts) reads; the records themselves
//! are never kept. The variants are then evaluated in one fused pass over
//! that shared table ([`CompiledProgram::eval_many`]) and the alerts on each
//! step's rows of it, so a log of a million rollouts takes about what one
//! `rewardlab eval` of it takes, not a multiple of its size in memory.
//!
//! The results are exactly [`replay`]'s and [`replay_alerts`]'s on the
//! parsed records: the same per-row values ([`RowFeatures`] gives
//! [`rewardlab_rewards::feature_table`]'s), grouped in the same order. Where
//! the streamed pass cannot finish (a feature a record lacks, a value out of
//! range, a variant that does not compile or evaluate), the log is read again
//! into records and replayed that way, so every error names the same variant,
//! rollout and message as before.

use std::borrow::Cow;

use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::{EvalOptions, FeatureRef, FeatureTable, Interval, SourceFile};
use rewardlab_rewards::FeatureOptions;
use rewardlab_rewards::features::{RowFeatures, group_order_of, group_sizes_of};
use rewardlab_rewards::rollout::{ReadError, RecordError, Rollout, RolloutRef, logged_step, map_jsonl};

use super::load::Variant;
use super::replay::{ReplayError, ReplayRow, check_options_of, compare, replay};
use super::replay_alerts::{AlertReplay, alert_features_of, alerts_with, replay_alerts};

/// What replaying a log gives: the variants' comparison and, separately, the
/// alerts' replay (which a caller reports after the comparison, as it may
/// fail on its own).
#[derive(Debug)]
pub struct LogReplay {
    /// One row per variant, as [`replay`] gives them.
    pub rows: Vec<ReplayRow>,
    /// The alerts, as [`replay_alerts`] gives them.
    pub alerts: Result<AlertReplay, ReplayError>,
}

/// Replaying a log failed before any variant was compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayLogError {
    /// The log is not UTF-8 (the line is named).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Some lines are not good rollout records; nothing was replayed.
    #[error("{} bad rollout record(s)", .0.len())]
    BadRecords(Vec<RecordError>),
    /// The replay itself failed (a variant that does not compile or evaluate).
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// Replays every variant, and then their alerts, on the rollout JSONL
/// `data` (a line's `step` is read by [`logged_step`]).
pub fn replay_log(variants: &[Variant], data: &[u8]) -> Result<LogReplay, ReplayLogError> {
    match streamed(variants, data)? {
        Some(replayed) => Ok(replayed),
        None => replay_records(variants, data),
    }
}

/// The streamed replay; `None` where it cannot finish (see the module's documentation).
fn streamed(variants: &[Variant], data: &[u8]) -> Result<Option<LogReplay>, ReplayLogError> {
    let Some(row) = shared_features_of(variants).and_then(|f| RowFeatures::new(&f).ok()) else {
        return Ok(None);
    };
    let options = FeatureOptions::default();
    let loaded = map_jsonl(data, "rollouts", |line| read_line(line, &row, &options))?;
    if !loaded.errors.is_empty() {
        return Err(ReplayLogError::BadRecords(loaded.errors));
    }
    if loaded.records.is_empty() {
        return Err(ReplayError::Empty.into());
    }
    let lines: Vec<Line<'_>> = loaded.records.into_iter().map(|(_, line)| line).collect();
    Ok(LogTable::new(&row, lines).and_then(|log| log.replay(variants)))
}

/// The union of the features the variants' rewards and alerts read; `None`
/// when a variant does not compile on its own (the record replay names it).
fn shared_features_of(variants: &[Variant]) -> Option<Vec<FeatureRef>> {
    let schema = rewardlab_rewards::feature_schema();
    // The group sizes are not known before the log is read: any size here
    // (as for the alerts), the log's own when the variants are compiled to run.
    let options = CheckOptions { group_size: Interval::new(1.0, f64::INFINITY), lints: false };
    let mut out = Vec::new();
    for v in variants {
        let (program, _) =
            compile_source(&SourceFile::new(v.origin.clone(), v.source.clone()), &schema, &options).ok()?;
        out.extend(program.features);
    }
    out.extend(alert_features_of(variants)?);
    Some(out)
}

/// One line of the log as the replay keeps it.
struct Line<'d> {
    /// Borrowed from the log where it has no escapes.
    group: Cow<'d, str>,
    step: usize,
    /// In [`RowFeatures::features`] order; `None` when one is unavailable or out of range.
    values: Option<Vec<f64>>,
}

/// Reads one line in place when it can (`RolloutRef`), else as a record
/// (whose reader's message a bad line gets, as in [`replay_records`]).
fn read_line<'d>(line: &'d str, row: &RowFeatures, options: &FeatureOptions) -> Result<Line<'d>, String> {
    if let Some((r, step)) = RolloutRef::parse_keeping(line, row.keep()) {
        let values = row.values_of(&r, options);
        return Ok(Line { group: r.into_group(), step: step as usize, values });
    }
    let r = Rollout::from_json_line_without_args(line)?;
    Ok(Line { values: row.values(&r, options), step: logged_step(line) as usize, group: Cow::Owned(r.group) })
}

/// The log's shared feature table and each row's step.
struct LogTable<'r, 'd> {
    row: &'r RowFeatures,
    /// Every feature's column, rows grouped as [`rewardlab_rewards::feature_table`] groups them.
    table: FeatureTable,
    /// Each line's group and step, in file order.
    lines: Vec<(Cow<'d, str>, usize)>,
    /// The values by line, in file order, [`RowFeatures::features`] order within a line.
    values: Vec<f64>,
}

impl<'r, 'd> LogTable<'r, 'd> {
    /// `None` when a line lacks a value.
    fn new(row: &'r RowFeatures, lines: Vec<Line<'d>>) -> Option<LogTable<'r, 'd>> {
        let width = row.features().len();
        let mut values = Vec::with_capacity(lines.len() * width);
        let mut kept = Vec::with_capacity(lines.len());
        for line in lines {
            values.extend(line.values?);
            kept.push((line.group, line.step));
        }
        let table = grouped_table(row, &values, &kept, (0..kept.len()).collect(), |_| true)?;
        Some(LogTable { row, table, lines: kept, values })
    }

    /// The comparison and the alerts; `None` when a variant does not compile
    /// for this log or fails to evaluate (the record replay reports it).
    fn replay(&self, variants: &[Variant]) -> Option<LogReplay> {
        let options = check_options_of((0..self.table.groups()).map(|g| self.table.group_rows(g).len()));
        let schema = rewardlab_rewards::feature_schema();
        let mut compiled = Vec::with_capacity(variants.len());
        for v in variants {
            let source = SourceFile::new(v.origin.clone(), v.source.clone());
            let (program, _) = compile_source(&source, &schema, &options).ok()?;
            let mut c = CompiledProgram::new(&program);
            for (param, value) in &v.params {
                c.set_param(param, *value).then_some(())?;
            }
            compiled.push(c);
        }
        let programs: Vec<&CompiledProgram> = compiled.iter().collect();
        let outputs: Vec<_> = CompiledProgram::eval_many(&programs, &self.table, &EvalOptions::default())
            .into_iter()
            .collect::<Result<_, _>>()
            .ok()?;
        let groups: Vec<std::ops::Range<usize>> = (0..self.table.groups()).map(|g| self.table.group_rows(g)).collect();
        let reference = &outputs[0].advantage;
        let rows =
            variants.iter().zip(&outputs).map(|(v, o)| compare(&v.name, reference, &o.advantage, &groups)).collect();
        Some(LogReplay { rows, alerts: self.alerts(variants) })
    }

    /// [`replay_alerts`] on each step's lines of this table.
    fn alerts(&self, variants: &[Variant]) -> Result<AlertReplay, ReplayError> {
        let mut steps: Vec<usize> = self.lines.iter().map(|(_, s)| *s).collect();
        steps.sort_unstable();
        steps.dedup();
        // Each step's lines, in file order, found once a variant has an alert.
        let mut batches: Option<Vec<Vec<usize>>> = None;
        alerts_with(variants, &steps, |at, features| {
            let batches = batches.get_or_insert_with(|| {
                let mut batches = vec![Vec::new(); steps.len()];
                for (i, (_, step)) in self.lines.iter().enumerate() {
                    let at = steps.binary_search(step).expect("every line's step is listed");
                    batches[at].push(i);
                }
                batches
            });
            let wanted = |f: &FeatureRef| features.iter().any(|g| g.key == f.key);
            grouped_table(self.row, &self.values, &self.lines, batches[at].clone(), wanted)
                .ok_or_else(|| "a step's feature table could not be built".to_string())
        })
    }
}

/// The feature table of the lines `rows` (file order), grouped by first
/// appearance of their group, with the `wanted` features' columns.
fn grouped_table(
    row: &RowFeatures,
    values: &[f64],
    lines: &[(Cow<'_, str>, usize)],
    rows: Vec<usize>,
    wanted: impl Fn(&FeatureRef) -> bool,
) -> Option<FeatureTable> {
    let width = row.features().len();
    let order: Vec<usize> =
        group_order_of(rows.iter().map(|&i| lines[i].0.as_ref())).into_iter().map(|k| rows[k]).collect();
    let sizes = group_sizes_of(order.iter().map(|&i| lines[i].0.as_ref()));
    let mut table = FeatureTable::new(sizes).ok()?;
    for (k, f) in row.features().iter().enumerate().filter(|(_, f)| wanted(f)) {
        table.add_column(f.key.clone(), order.iter().map(|&i| values[i * width + k]).collect()).ok()?;
    }
    Some(table)
}

/// The replay on the log's records (how `study replay` read a log before
/// it was streamed): every line parsed into a [`Rollout`], then [`replay`]
/// and [`replay_alerts`].
fn replay_records(variants: &[Variant], data: &[u8]) -> Result<LogReplay, ReplayLogError> {
    // The calls' `args` are never read by a feature.
    let loaded = map_jsonl(data, "rollouts", |line| {
        Ok((Rollout::from_json_line_without_args(line)?, logged_step(line) as usize))
    })?;
    if !loaded.errors.is_empty() {
        return Err(ReplayLogError::BadRecords(loaded.errors));
    }
    let (records, steps): (Vec<Rollout>, Vec<usize>) = loaded.records.into_iter().map(|(_, r)| r).unzip();
    let rows = replay(variants, &records)?;
    Ok(LogReplay { rows, alerts: replay_alerts(variants, &records, &steps) })
}

#[cfg(test)]
mod tests;
