//! Per-step plots of a study (PNG): one line per variant (the mean over seeds)
//! inside a band from the seeds' minimum to maximum. Text is drawn with the
//! bundled DejaVu Sans (`framework/assets/fonts`), so no system font or
//! fontconfig is needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use super::summary::{Summary, SummaryError};
use crate::engine::MetricsRow;

const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The plotted metrics: (file stem, title, y-axis label, column).
type Column = fn(&MetricsRow) -> f64;
const PLOTS: [(&str, &str, &str, Column); 6] = [
    ("reward", "Mean reward per step", "reward (training rollouts)", |r| r.reward_mean),
    ("kl", "KL to the reference policy per step", "KL estimate per unit", |r| r.kl),
    ("turns", "Turns per rollout", "turns (T)", |r| r.turns),
    ("completion_len", "Completion length per rollout", "completion length (len)", |r| r.completion_len),
    ("fb", "File-level F_β (β = 0.5) per step", "F_β(file), training rollouts", |r| r.fb_file),
    // Only eval steps have a value; the others are NaN, which `bands` skips.
    ("eval_fb", "Held-out file-level F_β (β = 0.5)", "F_β(file), held-out tasks", |r| {
        r.eval_fb_mean.unwrap_or(f64::NAN)
    }),
];

/// Writes `plots/<metric>.png` under `study_dir`; returns the paths written.
pub fn write_plots(summary: &Summary, study_dir: &Path) -> Result<Vec<PathBuf>, SummaryError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    if !*REGISTERED.get_or_init(|| register_font("sans-serif", FontStyle::Normal, FONT).is_ok()) {
        return Err(SummaryError::Plot {
            path: study_dir.join("plots"),
            message: "the bundled DejaVu Sans does not parse".to_string(),
        });
    }
    let dir = study_dir.join("plots");
    std::fs::create_dir_all(&dir).map_err(|source| SummaryError::Io { path: dir.clone(), source })?;
    let mut written = Vec::new();
    for (stem, title, ylabel, column) in PLOTS {
        let path = dir.join(format!("{stem}.png"));
        let series: Vec<(String, Vec<Band>)> = summary
            .variants
            .iter()
            .map(|v| {
                let label = format!("{} ({} seed{})", v.name, v.runs.len(), if v.runs.len() == 1 { "" } else { "s" });
                (label, bands(v.runs.iter().map(|r| &r.rows[..]), column))
            })
            .collect();
        // Held-out scores are comparable with the baselines, computed on the same tasks.
        let references: Vec<(String, f64)> = if stem == "eval_fb" {
            summary.baselines.iter().map(|b| (b.name.clone(), b.fb_mean)).collect()
        } else {
            Vec::new()
        };
        draw(&path, &format!("{} — {title}", summary.name), ylabel, &series, &references)
            .map_err(|message| SummaryError::Plot { path: path.clone(), message })?;
        written.push(path);
    }
    // The shadow-agreement plot (issue 17), when runs wrote `shadow.csv`.
    if let Some(path) = super::shadow::write_plot(&summary.name, &summary.shadow, study_dir)? {
        written.push(path);
    }
    Ok(written)
}

/// The Okabe–Ito colours (distinguishable with the common colour-vision
/// deficiencies; their yellow is left out, too faint on white), then plotters' palette.
fn series_color(i: usize) -> RGBAColor {
    const OKABE_ITO: [(u8, u8, u8); 6] =
        [(0, 114, 178), (230, 159, 0), (0, 158, 115), (213, 94, 0), (204, 121, 167), (86, 180, 233)];
    match OKABE_ITO.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b).to_rgba(),
        None => Palette99::pick(i - OKABE_ITO.len()).to_rgba(),
    }
}

/// One step's mean, minimum and maximum over seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Band {
    /// The engine step.
    pub step: usize,
    /// The mean over seeds.
    pub mean: f64,
    /// The smallest seed's value.
    pub min: f64,
    /// The largest seed's value.
    pub max: f64,
}

pub(crate) fn bands<'a>(runs: impl Iterator<Item = &'a [MetricsRow]>, column: Column) -> Vec<Band> {
    let mut by_step: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for rows in runs {
        for r in rows {
            let v = column(r);
            if v.is_finite() {
                by_step.entry(r.step).or_default().push(v);
            }
        }
    }
    by_step
        .into_iter()
        .map(|(step, v)| Band {
            step,
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
        .collect()
}

/// Draws one line per series with its band, and a dashed horizontal line per reference value.
fn draw(
    path: &Path,
    title: &str,
    ylabel: &str,
    series: &[(String, Vec<Band>)],
    references: &[(String, f64)],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let all = series.iter().flat_map(|(_, b)| b);
    let max_step = all.clone().map(|b| b.step).max().unwrap_or(1).max(2);
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), b| (lo.min(b.min), hi.max(b.max)));
    let (lo, hi) = references.iter().fold((lo, hi), |(lo, hi), (_, v)| (lo.min(*v), hi.max(*v)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    // Pad the range so a flat line is not drawn on the frame.
    let pad = ((hi - lo) * 0.08).max(1e-3 * hi.abs().max(1.0));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(1f64..max_step as f64, (lo - pad)..(hi + pad))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("step   (line: mean over seeds; band: min–max over seeds)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc(ylabel)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, bands)) in series.iter().enumerate() {
        let color = series_color(i);
        if bands.is_empty() {
            continue;
        }
        let mut outline: Vec<(f64, f64)> = bands.iter().map(|b| (b.step as f64, b.max)).collect();
        outline.extend(bands.iter().rev().map(|b| (b.step as f64, b.min)));
        chart.draw_series(std::iter::once(Polygon::new(outline, color.mix(0.18).filled()))).map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new(bands.iter().map(|b| (b.step as f64, b.mean)), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
    }
    for (name, value) in references {
        let style = BLACK.mix(0.7).stroke_width(2);
        let dashes = DashedLineSeries::new([(1.0, *value), (max_step as f64, *value)], 10, 6, style);
        chart
            .draw_series(dashes)
            .map_err(|e| err(&e))?
            .label(format!("{name} (dashed)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
