//! The summary's shadow-agreement section: each trained variant against
//! each shadow variant, from the runs' `shadow.csv` (see
//! [`crate::engine::shadow`] for the columns), and its plot.

use std::path::{Path, PathBuf};

use super::plots::{Band, draw_bands};
use super::summary::{Manifest, SummaryError};
use crate::engine::SHADOW_FILE;
use crate::engine::shadow::{ShadowRow, read_shadow};

/// One trained variant against one shadow variant, over every step of every seed.
#[derive(Clone, Debug, PartialEq)]
pub struct ShadowPair {
    /// The variant the runs trained.
    pub trained: String,
    /// The variant that only scored their rollouts.
    pub shadow: String,
    /// Mean of the steps' `kendall_tau_b` (steps without one left out).
    pub kendall_tau_b: Option<f64>,
    /// Mean share of sign flips.
    pub sign_flips: f64,
    /// Mean share of the shadow's zero-variance groups.
    pub zero_variance_groups: f64,
    /// Mean of the steps' Pearson correlations (steps without one left out).
    pub pearson: Option<f64>,
    /// Rows averaged (steps × seeds).
    pub rows: usize,
    /// Per step: mean, min and max of τ-b over seeds, for the plot.
    pub tau_by_step: Vec<Band>,
}

/// Reads every run's `shadow.csv` (runs without one add nothing).
pub fn read_pairs(study_dir: &Path, manifest: &Manifest) -> Result<Vec<ShadowPair>, SummaryError> {
    let mut pairs: Vec<(String, String, Vec<ShadowRow>)> = Vec::new();
    for run in &manifest.runs {
        let path = study_dir.join(&run.dir).join(SHADOW_FILE);
        let rows = read_shadow(&path).map_err(|source| SummaryError::Csv { path: path.clone(), source })?;
        for row in rows {
            match pairs.iter_mut().find(|(t, s, _)| *t == run.variant && *s == row.variant) {
                Some((_, _, rows)) => rows.push(row),
                None => pairs.push((run.variant.clone(), row.variant.clone(), vec![row])),
            }
        }
    }
    Ok(pairs.into_iter().map(|(trained, shadow, rows)| pair(trained, shadow, &rows)).collect())
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

fn pair(trained: String, shadow: String, rows: &[ShadowRow]) -> ShadowPair {
    let mut steps: Vec<usize> = rows.iter().map(|r| r.step).collect();
    steps.sort_unstable();
    steps.dedup();
    let tau_by_step = steps
        .iter()
        .filter_map(|&step| {
            let taus: Vec<f64> = rows.iter().filter(|r| r.step == step).filter_map(|r| r.kendall_tau_b).collect();
            Some(Band {
                step,
                mean: mean(taus.iter().copied())?,
                min: taus.iter().copied().fold(f64::INFINITY, f64::min),
                max: taus.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            })
        })
        .collect();
    ShadowPair {
        trained,
        shadow,
        kendall_tau_b: mean(rows.iter().filter_map(|r| r.kendall_tau_b)),
        sign_flips: mean(rows.iter().map(|r| r.sign_flips)).unwrap_or(0.0),
        zero_variance_groups: mean(rows.iter().map(|r| r.zero_variance_groups)).unwrap_or(0.0),
        pearson: mean(rows.iter().filter_map(|r| r.pearson)),
        rows: rows.len(),
        tau_by_step,
    }
}

/// The markdown section (empty when no run wrote shadow rows).
pub fn render(pairs: &[ShadowPair]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let opt = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.3}"));
    let mut out = format!(
        "\n## Shadow agreement\n\nEach trained variant's rollouts scored by the other variants (`{SHADOW_FILE}`), \
         means over steps and seeds: within-group Kendall τ-b of the advantages, share of rollouts whose \
         advantage changes sign, share of the shadow's zero-variance groups, Pearson correlation of the \
         advantages. Plot: `plots/shadow_tau.png`.\n\n"
    );
    out.push_str("| trained | shadow | τ-b | sign flips | zero-variance groups | Pearson | rows |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for p in pairs {
        out.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.3} | {} | {} |\n",
            p.trained,
            p.shadow,
            opt(p.kendall_tau_b),
            p.sign_flips,
            p.zero_variance_groups,
            opt(p.pearson),
            p.rows
        ));
    }
    out
}

/// Draws `plots/shadow_tau.png` (τ-b per step, one line per pair); `None` without shadow rows.
pub fn write_plot(name: &str, pairs: &[ShadowPair], study_dir: &Path) -> Result<Option<PathBuf>, SummaryError> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let path = study_dir.join("plots").join("shadow_tau.png");
    let series: Vec<(String, Vec<Band>)> =
        pairs.iter().map(|p| (format!("{} scored by {}", p.trained, p.shadow), p.tau_by_step.clone())).collect();
    draw_bands(
        &path,
        &format!("{name} — shadow agreement per step"),
        "within-group Kendall τ-b of advantages",
        &series,
    )
    .map_err(|message| SummaryError::Plot { path: path.clone(), message })?;
    Ok(Some(path))
}
