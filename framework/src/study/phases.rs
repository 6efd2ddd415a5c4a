//! Where a study's training time goes: each variant's mean wall-clock seconds
//! per step by phase, from its runs' `timings.csv`, written as `phases.csv`
//! and `phases.md` beside the summary.
//!
//! Wall-clock times differ from run to run of the same study, so they stay out
//! of `summary.md`, which a rerun reproduces byte for byte. Only each run's own
//! `timings.csv` is read, not the copies its checkpoints keep.

use std::fs;
use std::path::Path;

use serde::Serialize;

use super::summary::{Manifest, SummaryError, io, write_csv};
use crate::engine::{TIMINGS_FILE, Timings};

/// The phase split as CSV.
pub const PHASES_CSV: &str = "phases.csv";
/// The phase split as markdown.
pub const PHASES_MD: &str = "phases.md";

/// One variant's mean seconds per step by phase, over all steps of all its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseRow {
    /// The variant.
    pub variant: String,
    /// Runs with a `timings.csv`.
    pub runs: usize,
    /// Steps timed, summed over those runs.
    pub steps: usize,
    /// Policy time during rollouts, tools excluded.
    pub rollout_s: f64,
    /// Waiting for the training rollouts' tool calls.
    pub tools_s: f64,
    /// Features and the reward program.
    pub reward_s: f64,
    /// The policy update.
    pub update_s: f64,
    /// Held-out evaluation, amortised over all steps.
    pub eval_s: f64,
    /// The part of `eval_s` spent waiting for the held-out episodes' tool calls.
    pub eval_tools_s: f64,
    /// Shadow variants' scoring.
    pub shadow_s: f64,
    /// The sum of the phases (`eval_tools_s` is inside `eval_s`).
    pub step_s: f64,
    /// `tools_s / step_s`.
    pub tools_share: f64,
    /// `(tools_s + eval_tools_s) / step_s`: every tool call's share of a step.
    pub all_tools_share: f64,
}

/// Each variant's row, in manifest order; a variant none of whose runs has a
/// `timings.csv` yet has none.
pub fn phase_split(study_dir: &Path, manifest: &Manifest) -> Result<Vec<PhaseRow>, SummaryError> {
    let mut rows = Vec::new();
    for variant in &manifest.variants {
        let mut runs = 0;
        let mut steps = Vec::new();
        for run in manifest.runs.iter().filter(|r| &r.variant == variant) {
            let path = study_dir.join(&run.dir).join(TIMINGS_FILE);
            if !path.exists() {
                continue;
            }
            let csv_err = |source| SummaryError::Csv { path: path.clone(), source };
            let mut reader = csv::Reader::from_path(&path).map_err(csv_err)?;
            for row in reader.deserialize::<Timings>() {
                steps.push(row.map_err(csv_err)?);
            }
            runs += 1;
        }
        if let Some(row) = mean_row(variant, runs, &steps) {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The per-step means of `steps`; `None` when there are none.
fn mean_row(variant: &str, runs: usize, steps: &[Timings]) -> Option<PhaseRow> {
    if steps.is_empty() {
        return None;
    }
    let mean = |f: fn(&Timings) -> f64| steps.iter().map(f).sum::<f64>() / steps.len() as f64;
    let (rollout_s, tools_s, reward_s, update_s) =
        (mean(|t| t.rollout_s), mean(|t| t.tools_s), mean(|t| t.reward_s), mean(|t| t.update_s));
    let (eval_s, eval_tools_s, shadow_s) = (mean(|t| t.eval_s), mean(|t| t.eval_tools_s), mean(|t| t.shadow_s));
    let step_s = rollout_s + tools_s + reward_s + update_s + eval_s + shadow_s;
    let share = |x: f64| if step_s > 0.0 { x / step_s } else { 0.0 };
    Some(PhaseRow {
        variant: variant.to_string(),
        runs,
        steps: steps.len(),
        rollout_s,
        tools_s,
        reward_s,
        update_s,
        eval_s,
        eval_tools_s,
        shadow_s,
        step_s,
        tools_share: share(tools_s),
        all_tools_share: share(tools_s + eval_tools_s),
    })
}

/// Writes `phases.csv` and `phases.md` (nothing when `rows` is empty).
pub fn write(study_dir: &Path, name: &str, rows: &[PhaseRow]) -> Result<(), SummaryError> {
    if rows.is_empty() {
        return Ok(());
    }
    write_csv(&study_dir.join(PHASES_CSV), rows)?;
    let path = study_dir.join(PHASES_MD);
    fs::write(&path, render(name, rows)).map_err(io(&path))
}

/// The markdown table: seconds per step, then the tools' shares.
pub fn render(name: &str, rows: &[PhaseRow]) -> String {
    let mut out = format!("# Study `{name}`: time per step by phase\n\n");
    out.push_str(
        "Mean wall-clock seconds per training step over every step of the variant's runs (`timings.csv`); \
         held-out evaluation is amortised over all steps, and its tool calls are counted inside it. \
         Times vary from run to run; `summary.md` holds the reproducible results.\n\n",
    );
    out.push_str(
        "| variant | runs | steps | rollout | tools | reward | update | eval (its tools) | shadow | step | tools share | with eval's tools |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.3} s | {:.3} s | {:.3} s | {:.3} s | {:.3} s ({:.3} s) | {:.3} s | {:.3} s | {:.0}% | {:.0}% |\n",
            r.variant,
            r.runs,
            r.steps,
            r.rollout_s,
            r.tools_s,
            r.reward_s,
            r.update_s,
            r.eval_s,
            r.eval_tools_s,
            r.shadow_s,
            r.step_s,
            100.0 * r.tools_share,
            100.0 * r.all_tools_share
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timings(step: usize, tools_s: f64, eval_s: f64, eval_tools_s: f64) -> Timings {
        Timings { step, rollout_s: 1.0, tools_s, reward_s: 0.5, update_s: 0.5, eval_s, shadow_s: 0.0, eval_tools_s }
    }

    #[test]
    fn a_variants_row_is_the_mean_over_every_step_of_its_runs() {
        let steps = [timings(1, 2.0, 0.0, 0.0), timings(2, 4.0, 4.0, 3.0)];
        let row = mean_row("v3", 1, &steps).expect("steps");
        assert_eq!((row.runs, row.steps), (1, 2));
        assert_eq!((row.tools_s, row.eval_s, row.eval_tools_s), (3.0, 2.0, 1.5));
        // rollout 1 + tools 3 + reward 0.5 + update 0.5 + eval 2 = 7 s a step.
        assert_eq!(row.step_s, 7.0);
        assert_eq!(row.tools_share, 3.0 / 7.0);
        assert_eq!(row.all_tools_share, 4.5 / 7.0);
        assert_eq!(mean_row("v3", 0, &[]), None);
        let md = render("s", &[row]);
        assert!(md.contains("| v3 | 1 | 2 | 1.000 s | 3.000 s | 0.500 s | 0.500 s | 2.000 s (1.500 s) | 0.000 s | 7.000 s | 43% | 64% |"), "{md}");
    }
}
