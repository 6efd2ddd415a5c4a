//! Shadow variants (`shadow = true`): every step's rollouts are also scored
//! by other reward variants — the study's others — which train nothing, and
//! `shadow.csv` says per step and shadow variant how far its advantages
//! agree with the trained variant's.
//!
//! The shadows read one feature table (the union of their features),
//! computed once per step, and run in one fused pass
//! ([`CompiledProgram::eval_many`]). Columns of a [`ShadowRow`]:
//!
//! - `kendall_tau_b`: Kendall's τ-b between the trained and the shadow
//!   advantages within each group, averaged over the groups where it is
//!   defined (τ-b counts ties on either side in its denominator; a group where
//!   either side's advantages are all equal has none and is left out,
//!   `tau_groups` says how many had one; empty when none did);
//! - `sign_flips`: the share of rollouts whose advantage has another sign
//!   (−, 0, +) under the shadow;
//! - `zero_variance_groups`: the share of groups whose shadow advantages are all equal;
//! - `pearson`: Pearson's correlation of the two advantages over the batch
//!   (empty when either is constant).
//!
//! Rows are deterministic (functions of the rollouts). On resume the file
//! keeps its complete rows of steps up to the checkpoint's (a step's rows are
//! written before its checkpoint), so a killed run repeats and loses none.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Arc;

use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::{EvalOptions, FeatureRef, NonFinite};
use rewardlab_models::agent::Policy;
use rewardlab_rewards::feature_table;
use rewardlab_rewards::rollout::Rollout;
use serde::{Deserialize, Serialize};

use super::metrics::CsvLog;
use super::score::feature_options;
use super::{Engine, EngineError, RewardVariant};
use crate::study::stats::Agreement;

/// The shadow-agreement file of a run directory.
pub const SHADOW_FILE: &str = "shadow.csv";

/// One row of `shadow.csv`: a shadow variant's agreement with the trained one at a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShadowRow {
    /// The engine step, 1-based.
    pub step: usize,
    /// The shadow variant's name.
    pub variant: String,
    /// Mean within-group Kendall τ-b of the advantages (see the module docs).
    pub kendall_tau_b: Option<f64>,
    /// Groups where τ-b is defined.
    pub tau_groups: usize,
    /// Share of rollouts whose advantage sign differs.
    pub sign_flips: f64,
    /// Share of groups whose shadow advantages are all equal.
    pub zero_variance_groups: f64,
    /// Pearson's correlation of the advantages over the batch.
    pub pearson: Option<f64>,
}

/// The shadow variants of a run and their log.
pub(super) struct Shadows {
    variants: Vec<Arc<RewardVariant>>,
    /// The union of the shadows' features, each once.
    features: Vec<FeatureRef>,
    log: Option<CsvLog>,
}

/// The column names of `shadow.csv`.
fn header() -> [&'static str; 7] {
    ["step", "variant", "kendall_tau_b", "tau_groups", "sign_flips", "zero_variance_groups", "pearson"]
}

impl<P: Policy> Engine<P> {
    /// Scores every step's rollouts with `variants` too (the trained variant
    /// among them is skipped) and writes `shadow.csv`. Call before the first step.
    pub fn with_shadows(mut self, variants: Vec<Arc<RewardVariant>>) -> Engine<P> {
        let variants: Vec<_> = variants.into_iter().filter(|v| v.name() != self.variant.name()).collect();
        let mut features: Vec<FeatureRef> = Vec::new();
        for f in variants.iter().flat_map(|v| v.features()) {
            if !features.iter().any(|g| g.key == f.key) {
                features.push(f.clone());
            }
        }
        self.shadows = (!variants.is_empty()).then_some(Shadows { variants, features, log: None });
        self
    }

    /// The shadows' rows of step `step_no`, given the trained advantages in rollout order.
    pub(super) fn shadow_rows(
        &self,
        records: &[Rollout],
        advantage: &[f64],
        step_no: usize,
    ) -> Result<Vec<ShadowRow>, EngineError> {
        let Some(shadows) = &self.shadows else { return Ok(Vec::new()) };
        let table = feature_table(&shadows.features, records, &feature_options())
            .map_err(|source| EngineError::Features { step: step_no, source: Box::new(source) })?;
        // Non-finite shadow values must not stop the trained run: they show in the row.
        let options = EvalOptions { group_size: Some(self.config.group_size), non_finite: NonFinite::Allow };
        let programs: Vec<&CompiledProgram> = shadows.variants.iter().map(|v| v.compiled()).collect();
        let outputs = CompiledProgram::eval_many(&programs, &table.table, &options);
        let trained: Vec<f64> = table.order.iter().map(|&i| advantage[i]).collect();
        let groups: Vec<std::ops::Range<usize>> =
            (0..table.table.groups()).map(|g| table.table.group_rows(g)).collect();
        shadows
            .variants
            .iter()
            .zip(outputs)
            .map(|(v, out)| {
                let out = out.map_err(|source| EngineError::Reward {
                    step: step_no,
                    variant: v.name().to_owned(),
                    source: Box::new(source),
                })?;
                Ok(agreement(step_no, v.name(), &trained, &out.advantage, &groups))
            })
            .collect()
    }

    /// Opens `shadow.csv` under `out_dir`: fresh at step 0, otherwise (a
    /// resumed run) cut back to the complete rows of steps up to the current one.
    pub(super) fn open_shadow(&mut self, out_dir: &Path) -> Result<(), EngineError> {
        let step = self.step;
        let Some(shadows) = self.shadows.as_mut() else { return Ok(()) };
        if shadows.log.is_some() {
            return Ok(());
        }
        let path = out_dir.join(SHADOW_FILE);
        shadows.log = Some(if step > 0 && path.is_file() {
            keep_rows_up_to(&path, step)?;
            CsvLog::append(&path)?
        } else {
            CsvLog::create(&path, &header())?
        });
        Ok(())
    }

    /// Writes a step's rows (before its checkpoint, so a resume keeps them).
    pub(super) fn write_shadow(&mut self, rows: &[ShadowRow]) -> Result<(), EngineError> {
        let Some(log) = self.shadows.as_mut().and_then(|s| s.log.as_mut()) else { return Ok(()) };
        rows.iter().try_for_each(|r| log.write(r))
    }
}

/// A shadow's agreement with the trained advantages (both in table-row order).
pub fn agreement(
    step: usize,
    variant: &str,
    trained: &[f64],
    shadow: &[f64],
    groups: &[std::ops::Range<usize>],
) -> ShadowRow {
    let a = Agreement::of(trained, shadow, groups);
    ShadowRow {
        step,
        variant: variant.to_owned(),
        kendall_tau_b: a.kendall_tau_b,
        tau_groups: a.tau_groups,
        sign_flips: a.sign_flips,
        zero_variance_groups: a.zero_variance_groups,
        pearson: pearson(trained, shadow),
    }
}

/// Pearson's correlation; `None` when either sample is constant or not finite.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    let r = sxy / (sxx * syy).sqrt();
    (sxx > 0.0 && syy > 0.0 && r.is_finite()).then_some(r.clamp(-1.0, 1.0))
}

/// Reads a run's `shadow.csv`; a run without one has no rows.
pub fn read_shadow(path: &Path) -> Result<Vec<ShadowRow>, csv::Error> {
    if !path.is_file() {
        return Ok(Vec::new());
    }
    csv::Reader::from_path(path)?.deserialize().collect()
}

/// Rewrites `path` (atomically) with its header and its complete rows of steps up to `step`.
fn keep_rows_up_to(path: &Path, step: usize) -> Result<(), EngineError> {
    let file = fs::File::open(path).map_err(|e| EngineError::io(path, e))?;
    let mut reader = BufReader::new(file);
    let mut kept = Vec::new();
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| EngineError::io(path, e))?;
        // End of file, or a last line the killed run did not finish.
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        let row_step =
            line.split(|&b| b == b',').next().and_then(|s| std::str::from_utf8(s).ok()?.parse::<usize>().ok());
        if first || row_step.is_some_and(|s| s <= step) {
            kept.extend_from_slice(&line);
        }
        first = false;
    }
    let tmp = path.with_extension(format!("restore-{}", std::process::id()));
    let mut out = fs::File::create(&tmp).map_err(|e| EngineError::io(&tmp, e))?;
    out.write_all(&kept).and_then(|()| out.flush()).map_err(|e| EngineError::io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| EngineError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_on_hand_computed_groups() {
        // Group 1: same order (τ = 1); group 2: reversed (τ = −1); group 3: the
        // shadow is flat (τ undefined, left out; a zero-variance group).
        let trained = [-1.0, 0.0, 1.0, -1.0, 0.5, 0.5, 1.0, -1.0];
        let shadow = [-2.0, 0.0, 2.0, 1.0, -0.5, -0.5, 0.0, 0.0];
        let groups = [0..3, 3..6, 6..8];
        let row = agreement(7, "s", &trained, &shadow, &groups);
        assert_eq!(row.kendall_tau_b, Some(0.0));
        assert_eq!(row.tau_groups, 2);
        // Rows 3, 4, 5 flip; rows 6 and 7 go to 0 (another sign too).
        assert_eq!(row.sign_flips, 5.0 / 8.0);
        assert_eq!(row.zero_variance_groups, 1.0 / 3.0);
        assert_eq!((row.step, row.variant.as_str()), (7, "s"));
    }

    #[test]
    fn tau_b_counts_ties() {
        // x = [1, 2, 2], y = [1, 2, 3]: C = 2, D = 0, ties in x = 1:
        // τ-b = 2 / sqrt(2 · 3).
        let one_group = [std::ops::Range { start: 0, end: 3 }];
        let row = agreement(1, "s", &[1.0, 2.0, 2.0], &[1.0, 2.0, 3.0], &one_group);
        assert!((row.kendall_tau_b.unwrap() - 2.0 / 6f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn pearson_by_hand() {
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), Some(1.0));
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // x = [0, 1, 2, 3], y = [0, 1, 0, 1]: Σdxdy = 1, Σdx² = 5, Σdy² = 1: 1 / sqrt(5).
        let r = pearson(&[0.0, 1.0, 2.0, 3.0], &[0.0, 1.0, 0.0, 1.0]).unwrap();
        assert!((r - 0.4472135954999579).abs() < 1e-12, "{r}");
        assert_eq!(pearson(&[1.0, 1.0], &[0.0, 1.0]), None);
    }
}
