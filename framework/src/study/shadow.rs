//! The summary's shadow-agreement section: each trained variant against
//! each shadow variant, from the runs' `shadow.csv` (see
//! [`crate::engine::shadow`] for the columns), and its plot.

use std::path::{Path, PathBuf};

use super::plots::Band;
use super::summary::{Manifest, SummaryError};
use crate::engine::SHADOW_FILE;
use crate::engine::shadow::{ShadowRow, read_shadow};
use crate::markdown::Table;

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
    /// Per step: mean, min and max of τ-b over seeds.
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
    let mut table = Table::new(["trained", "shadow", "τ-b", "sign flips", "zero-variance groups", "Pearson", "rows"]);
    for p in pairs {
        table.row([
            p.trained.clone(),
            p.shadow.clone(),
            opt(p.kendall_tau_b),
            format!("{:.3}", p.sign_flips),
            format!("{:.3}", p.zero_variance_groups),
            opt(p.pearson),
            p.rows.to_string(),
        ]);
    }
    out.push_str(&table.finish());
    out
}

/// Draws `plots/shadow_tau.png`: a trained × shadow grid of the mean τ-b, each cell coloured
/// from red (−1) through white (0) to blue (1) and labelled with its value; `None` without
/// shadow rows. (A line per pair and step is unreadable past a few variants: 8 make 56.)
pub fn write_plot(name: &str, pairs: &[ShadowPair], study_dir: &Path) -> Result<Option<PathBuf>, SummaryError> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let path = study_dir.join("plots").join("shadow_tau.png");
    draw_grid(&path, name, pairs).map_err(|message| SummaryError::Plot { path: path.clone(), message })?;
    Ok(Some(path))
}

/// The names in first-seen order.
fn names<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in items {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

fn draw_grid(path: &Path, name: &str, pairs: &[ShadowPair]) -> Result<(), String> {
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let rows = names(pairs.iter().map(|p| p.trained.as_str()));
    // Columns in the rows' (study) order, so the grid's diagonal is each variant against itself.
    let cols = names(rows.iter().copied().chain(pairs.iter().map(|p| p.shadow.as_str())));
    let (left, top, cell_w, cell_h) = (170i32, 90i32, 100i32, 44i32);
    let width = (left + cell_w * cols.len() as i32 + 30).max(600) as u32;
    let height = (top + cell_h * rows.len() as i32 + 60) as u32;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let title = format!("{name} — shadow agreement: mean within-group Kendall τ-b of advantages");
    root.draw(&Text::new(title, (16, 14), ("sans-serif", 20))).map_err(|e| err(&e))?;
    let small = ("sans-serif", 15).into_font();
    let centred = |font: FontDesc<'static>| font.into_text_style(&root).pos(Pos::new(HPos::Center, VPos::Center));
    root.draw(&Text::new("shadow variant →", (left, 50), small.clone())).map_err(|e| err(&e))?;
    for (j, c) in cols.iter().enumerate() {
        let x = left + cell_w * j as i32 + cell_w / 2;
        root.draw(&Text::new(c.to_string(), (x, top - 14), centred(small.clone()))).map_err(|e| err(&e))?;
    }
    for (i, r) in rows.iter().enumerate() {
        let y = top + cell_h * i as i32;
        let right = small.clone().into_text_style(&root).pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(format!("trained {r}"), (left - 8, y + cell_h / 2), right)).map_err(|e| err(&e))?;
        for (j, c) in cols.iter().enumerate() {
            let x = left + cell_w * j as i32;
            let tau = pairs.iter().find(|p| p.trained == *r && p.shadow == *c).and_then(|p| p.kendall_tau_b);
            let fill = match tau {
                // White at 0, towards blue at 1 and red at −1.
                Some(t) if t >= 0.0 => {
                    RGBColor((255.0 * (1.0 - t)) as u8, (255.0 - 141.0 * t) as u8, (255.0 - 77.0 * t) as u8)
                }
                Some(t) => RGBColor((255.0 + 42.0 * t) as u8, (255.0 + 161.0 * t) as u8, (255.0 + 255.0 * t) as u8),
                None => RGBColor(225, 225, 225),
            };
            root.draw(&Rectangle::new([(x, y), (x + cell_w - 2, y + cell_h - 2)], fill.filled()))
                .map_err(|e| err(&e))?;
            let label = tau.map_or("–".to_string(), |t| format!("{t:.2}"));
            let ink = if tau.is_some_and(|t| t.abs() > 0.6) { WHITE } else { BLACK };
            let style = ("sans-serif", 16).into_font().color(&ink).pos(Pos::new(HPos::Center, VPos::Center));
            root.draw(&Text::new(label, (x + cell_w / 2, y + cell_h / 2), style)).map_err(|e| err(&e))?;
        }
    }
    let note =
        "each cell: the trained variant's rollouts scored by the shadow, mean over steps and seeds (grey: undefined)";
    root.draw(&Text::new(note, (16, height as i32 - 30), small)).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
