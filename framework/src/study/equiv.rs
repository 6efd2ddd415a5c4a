//! Equivalent variants: which pairs of a study's variants give the same
//! advantages for every input ([`rewardlab_dsl::equiv`]), and which grid
//! cells the runner therefore merges before launch.
//!
//! Only a proof merges ([`Verdict::Proved`]); "equal up to ε" and "equal on N
//! groups, not proved" are reported and trained. A proved pair is still not
//! merged when the two variants would not train alike for another reason:
//! different proxy-policy settings, different loss settings (a variant's `loss` table), or
//! different alerts (which can stop a run).
//! A merged variant is recorded in `merged.json` so the summary shows its row
//! as `= other (proved: ...)` instead of dropping it.

use std::fs;
use std::path::Path;

use rewardlab_dsl::equiv::{EquivError, EquivOptions, Verdict, compare};
use rewardlab_dsl::hir::Program;
use serde::{Deserialize, Serialize};

use super::load::{RunSpec, Study};
use super::summary::{SummaryError, io};
use crate::engine::{RewardVariant, VariantError};

/// Where the runner records the merged variants, under `results/<study>/`.
pub const MERGED_FILE: &str = "merged.json";

/// The verdict on one pair of variants.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantPair {
    /// The earlier variant's index in [`Study::variants`].
    pub left: usize,
    /// The later one's.
    pub right: usize,
    /// What the comparison of their advantages found.
    pub verdict: Verdict,
    /// Why a proved pair would still train differently (and is not merged).
    pub blocker: Option<String>,
}

/// A variant the runner does not train because an earlier one is proved equivalent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedVariant {
    /// The variant left out.
    pub variant: String,
    /// The variant whose runs stand for it.
    pub into: String,
    /// The proof, as [`Verdict::describe`] says it (`proved: positive scaling (×2)`).
    pub reason: String,
}

/// Comparing a study's variants failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EquivStudyError {
    /// A variant did not compile (the study was checked, so this is unexpected).
    #[error("compiling the variants")]
    Compile(#[from] Box<VariantError>),
    /// The comparison of two variants could not run.
    #[error("comparing variants `{left}` and `{right}`")]
    Compare {
        /// The earlier variant.
        left: String,
        /// The later one.
        right: String,
        /// The cause.
        #[source]
        source: Box<EquivError>,
    },
}

/// Compares every pair of the study's variants (`i < j`, in study order),
/// on groups of the study's `group_size`.
pub fn compare_variants(study: &Study) -> Result<Vec<VariantPair>, EquivStudyError> {
    let group_size = study.training.group_size;
    let compiled: Vec<RewardVariant> = study
        .variants
        .iter()
        .map(|v| RewardVariant::compile(&v.name, &v.source, group_size, &v.params))
        .collect::<Result<_, _>>()
        .map_err(Box::new)?;
    let schema = rewardlab_rewards::feature_schema();
    let options = EquivOptions { group_size, ..EquivOptions::default() };
    let mut pairs = Vec::new();
    for i in 0..compiled.len() {
        for j in i + 1..compiled.len() {
            let (a, b) = (compiled[i].compiled().program(), compiled[j].compiled().program());
            let verdict = compare(a, b, &schema, &options).map_err(|source| EquivStudyError::Compare {
                left: study.variants[i].name.clone(),
                right: study.variants[j].name.clone(),
                source: Box::new(source),
            })?;
            let blocker = if study.variants[i].proxy != study.variants[j].proxy {
                Some("their proxy-policy settings differ".to_string())
            } else if study.variants[i].loss != study.variants[j].loss {
                Some("their loss settings differ".to_string())
            } else if alerts(a) != alerts(b) {
                Some("their alerts differ".to_string())
            } else {
                None
            };
            pairs.push(VariantPair { left: i, right: j, verdict, blocker });
        }
    }
    Ok(pairs)
}

/// A program's alerts as what decides a run: condition, persistence, message.
fn alerts(program: &Program) -> Vec<(&str, u32, &str)> {
    program.alerts.iter().map(|a| (a.text.as_str(), a.steps, a.message.as_str())).collect()
}

/// The variants to leave out: each variant proved equivalent (and not
/// blocked) to an earlier one that is itself trained is merged into the
/// first such, in study order.
pub fn merge_plan(study: &Study, pairs: &[VariantPair]) -> Vec<MergedVariant> {
    let mut merged: Vec<MergedVariant> = Vec::new();
    for j in 0..study.variants.len() {
        let into = pairs.iter().find(|p| {
            p.right == j
                && p.verdict.is_proved()
                && p.blocker.is_none()
                && !merged.iter().any(|m| m.variant == study.variants[p.left].name)
        });
        if let Some(p) = into {
            merged.push(MergedVariant {
                variant: study.variants[j].name.clone(),
                into: study.variants[p.left].name.clone(),
                reason: p.verdict.describe(),
            });
        }
    }
    merged
}

/// `runs` without the merged variants' runs.
pub fn without_merged(runs: &[RunSpec], merged: &[MergedVariant]) -> Vec<RunSpec> {
    runs.iter().filter(|r| !merged.iter().any(|m| m.variant == r.variant_name)).cloned().collect()
}

/// Writes `merged.json` (an empty list when nothing was merged, so a later
/// `--no-merge` run replaces an older plan).
pub fn write_merged(study_dir: &Path, merged: &[MergedVariant]) -> Result<(), SummaryError> {
    fs::create_dir_all(study_dir).map_err(io(study_dir))?;
    let path = study_dir.join(MERGED_FILE);
    let json =
        serde_json::to_string_pretty(merged).map_err(|source| SummaryError::Json { path: path.clone(), source })?;
    fs::write(&path, json + "\n").map_err(io(&path))
}

/// Reads `merged.json`; a study directory without one merged nothing.
pub fn read_merged(study_dir: &Path) -> Result<Vec<MergedVariant>, SummaryError> {
    let path = study_dir.join(MERGED_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text).map_err(|source| SummaryError::Json { path, source })
}

/// The report `study check` prints: one line per pair that is not plainly different, then how
/// many are.
pub fn render_pairs(study: &Study, pairs: &[VariantPair]) -> String {
    let name = |i: usize| study.variants[i].name.as_str();
    let mut out = format!("equivalence of advantages ({} pair(s)):\n", pairs.len());
    let mut different = 0;
    for p in pairs {
        if let Verdict::Different { witness } = &p.verdict {
            different += 1;
            out.push_str(&format!("  {} ≠ {}: {}\n", name(p.left), name(p.right), witness.describe()));
            continue;
        }
        let sign = if p.verdict.is_proved() { "≡" } else { "≈" };
        out.push_str(&format!("  {} {sign} {}: {}", name(p.left), name(p.right), p.verdict.describe()));
        if let (true, Some(b)) = (p.verdict.is_proved(), &p.blocker) {
            out.push_str(&format!(" (not merged: {b})"));
        }
        out.push('\n');
    }
    out.push_str(&format!("  {different} pair(s) differ\n"));
    out
}
