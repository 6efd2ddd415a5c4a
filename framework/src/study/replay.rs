//! Offline replay: every variant's reward program on the same logged rollouts,
//! compared with the first variant — how much do the within-group rankings
//! (by advantage) agree (Kendall τ-b, averaged over groups where defined), how
//! often does the advantage's sign flip, how many groups carry no signal, and
//! how large are the advantages. No training: only features and programs.

use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::diag::render_all;
use rewardlab_dsl::{EvalOptions, FeatureRef, FeatureTable, Interval, SourceFile};
use rewardlab_rewards::features::{RowFeatures, group_order, group_sizes};
use rewardlab_rewards::rollout::Rollout;
use rewardlab_rewards::{FeatureOptions, GroupedTable, feature_table};
use serde::Serialize;

use super::load::Variant;
use super::stats::Agreement;
use crate::markdown::Table;

/// One variant's replay statistics against the reference (the first variant).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayRow {
    /// The variant's name.
    pub variant: String,
    /// Mean τ-b over groups where both rankings have spread; `None` if none has.
    pub kendall_tau: Option<f64>,
    /// Groups that entered the τ mean.
    pub tau_groups: usize,
    /// Share of rollouts whose advantage sign differs from the reference's.
    pub sign_flips: f64,
    /// Share of groups whose advantages are all equal (no learning signal).
    pub zero_variance_groups: f64,
    /// Mean `|advantage|` over the rollouts.
    pub mean_abs_advantage: f64,
}

/// Replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("variant `{variant}` does not compile for these rollouts:\n{rendered}")]
    /// A variant's reward file does not check (the group size is the rollouts').
    Compile {
        /// The variant's name.
        variant: String,
        /// The checker's diagnostics, rendered with source snippets.
        rendered: String,
    },
    #[error("variant `{variant}`: {message}")]
    /// A variant compiled but could not be evaluated: an unknown param, a missing feature, a run-time fault.
    Eval {
        /// The variant's name.
        variant: String,
        /// What went wrong.
        message: String,
    },
    #[error("no rollouts to replay")]
    /// The rollout list is empty.
    Empty,
}

/// Evaluates every variant on `rollouts` and compares each with the first.
///
/// The features are computed once, for the union of the variants' features,
/// and every variant is evaluated on that one table
/// ([`CompiledProgram::eval_many`]). When anything fails, the variants are
/// replayed one by one as before, so the error names the same variant with
/// the same message.
pub fn replay(variants: &[Variant], rollouts: &[Rollout]) -> Result<Vec<ReplayRow>, ReplayError> {
    if rollouts.is_empty() {
        return Err(ReplayError::Empty);
    }
    let Some(advantages) = replay_shared(variants, rollouts) else {
        return replay_each(variants, rollouts);
    };
    let (reference, _) = &advantages[0];
    Ok(variants.iter().zip(&advantages).map(|(v, (adv, groups))| compare(&v.name, reference, adv, groups)).collect())
}

/// Advantages and group rows per variant.
type Advantages = Vec<(Vec<f64>, Vec<std::ops::Range<usize>>)>;

/// Every variant on one shared feature table; `None` when any step fails.
fn replay_shared(variants: &[Variant], rollouts: &[Rollout]) -> Option<Advantages> {
    let options = check_options(rollouts);
    let schema = rewardlab_rewards::feature_schema();
    let mut compiled = Vec::with_capacity(variants.len());
    for v in variants {
        let (program, _) =
            compile_source(&SourceFile::new(v.origin.clone(), v.source.clone()), &schema, &options).ok()?;
        let mut c = CompiledProgram::new(&program);
        for (param, value) in &v.params {
            c.set_param(param, *value).then_some(())?;
        }
        compiled.push(c);
    }
    let mut union: Vec<FeatureRef> = Vec::new();
    for f in compiled.iter().flat_map(|c| &c.program().features) {
        if !union.iter().any(|g| g.key == f.key) {
            union.push(f.clone());
        }
    }
    let grouped = shared_features(&union, rollouts)?;
    let groups: Vec<std::ops::Range<usize>> =
        (0..grouped.table.groups()).map(|g| grouped.table.group_rows(g)).collect();
    let programs: Vec<&CompiledProgram> = compiled.iter().collect();
    CompiledProgram::eval_many(&programs, &grouped.table, &EvalOptions::default())
        .into_iter()
        .map(|out| out.ok().map(|o| (o.advantage, groups.clone())))
        .collect()
}

/// [`feature_table`]'s table, each rollout's values computed in parallel
/// ([`RowFeatures`]: the same values); `None` when one is unavailable or out
/// of range (the caller replays one by one, and `feature_table` names it).
fn shared_features(features: &[FeatureRef], rollouts: &[Rollout]) -> Option<GroupedTable> {
    use rayon::prelude::*;
    let options = FeatureOptions::default();
    let row = RowFeatures::new(features).ok()?;
    let values: Vec<Vec<f64>> = rollouts.par_iter().map(|r| row.values(r, &options)).collect::<Option<_>>()?;
    let order = group_order(rollouts);
    let sizes = group_sizes(rollouts, &order);
    let mut table = FeatureTable::new(sizes).ok()?;
    for (k, f) in row.features().iter().enumerate() {
        table.add_column(f.key.clone(), order.iter().map(|&i| values[i][k]).collect()).ok()?;
    }
    Some(GroupedTable { table, order })
}

/// Every variant on its own feature table, in order: the first failure is the error.
fn replay_each(variants: &[Variant], rollouts: &[Rollout]) -> Result<Vec<ReplayRow>, ReplayError> {
    let options = check_options(rollouts);
    let mut advantages: Advantages = Vec::new();
    for v in variants {
        let eval_err = |message: String| ReplayError::Eval { variant: v.name.clone(), message };
        let source = SourceFile::new(v.origin.clone(), v.source.clone());
        let schema = rewardlab_rewards::feature_schema();
        let (program, _) = compile_source(&source, &schema, &options)
            .map_err(|d| ReplayError::Compile { variant: v.name.clone(), rendered: render_all(&source, &d) })?;
        let mut compiled = CompiledProgram::new(&program);
        for (param, value) in &v.params {
            if !compiled.set_param(param, *value) {
                return Err(eval_err(format!("unknown param `{param}`")));
            }
        }
        let grouped = feature_table(&program.features, rollouts, &FeatureOptions::default())
            .map_err(|e| eval_err(e.to_string()))?;
        let out = compiled.eval(&grouped.table, &EvalOptions::default()).map_err(|e| eval_err(e.to_string()))?;
        let groups = (0..grouped.table.groups()).map(|g| grouped.table.group_rows(g)).collect();
        // Rows are in group order, which depends only on the rollouts: the
        // same for every variant, so rows line up across variants.
        advantages.push((out.advantage, groups));
    }
    let (reference, _) = &advantages[0];
    Ok(variants.iter().zip(&advantages).map(|(v, (adv, groups))| compare(&v.name, reference, adv, groups)).collect())
}

/// The group sizes of the log, as the checker's `group.count()` range.
fn check_options(rollouts: &[Rollout]) -> CheckOptions {
    let mut sizes = std::collections::HashMap::<&str, usize>::new();
    for r in rollouts {
        *sizes.entry(&r.group).or_default() += 1;
    }
    check_options_of(sizes.into_values())
}

/// The checker's options for a log with these group sizes.
pub(super) fn check_options_of(sizes: impl IntoIterator<Item = usize>) -> CheckOptions {
    let (mut lo, mut hi) = (usize::MAX, 0);
    for n in sizes {
        (lo, hi) = (lo.min(n), hi.max(n));
    }
    if hi == 0 {
        (lo, hi) = (1, 1);
    }
    CheckOptions { group_size: Interval::new(lo as f64, hi as f64), ..CheckOptions::default() }
}

/// One variant's statistics from its advantages and the reference's.
pub(super) fn compare(name: &str, reference: &[f64], adv: &[f64], groups: &[std::ops::Range<usize>]) -> ReplayRow {
    let a = Agreement::of(reference, adv, groups);
    ReplayRow {
        variant: name.to_owned(),
        kendall_tau: a.kendall_tau_b,
        tau_groups: a.tau_groups,
        sign_flips: a.sign_flips,
        zero_variance_groups: a.zero_variance_groups,
        mean_abs_advantage: adv.iter().map(|x| x.abs()).sum::<f64>() / adv.len() as f64,
    }
}

/// The markdown table of a replay.
pub fn replay_markdown(rows: &[ReplayRow]) -> String {
    let reference = rows.first().map_or("", |r| r.variant.as_str());
    let tau = format!("Kendall τ-b vs `{reference}`");
    let mut table = Table::new(["variant", &tau, "sign flips", "zero-variance groups", "mean abs advantage"]);
    for r in rows {
        let tau = r.kendall_tau.map_or("–".to_string(), |t| format!("{t:.3} ({} groups)", r.tau_groups));
        table.row([
            r.variant.clone(),
            tau,
            format!("{:.3}", r.sign_flips),
            format!("{:.3}", r.zero_variance_groups),
            format!("{:.4}", r.mean_abs_advantage),
        ]);
    }
    table.finish()
}

/// Writes the replay as CSV.
pub fn write_replay_csv(rows: &[ReplayRow], path: &std::path::Path) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_path(path)?;
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rewardlab_rewards::rollout::Selection;

    fn rollout(group: &str, files: &[&str], calls: usize) -> Rollout {
        let sel =
            |f: &[&str]| Selection { files: Some(f.iter().map(|s| s.to_string()).collect()), ..Selection::default() };
        let call = rewardlab_rewards::rollout::LoggedCall { tool: "grep".into(), ..Default::default() };
        Rollout {
            group: group.into(),
            predicted: Some(sel(files)),
            target: Some(sel(&["a.py"])),
            turns: Some(vec![vec![call; calls], vec![]]),
            completion_tokens: Some(10),
            valid: Some(true),
            truncated: Some(false),
        }
    }

    #[test]
    fn study_replay_compares_rankings_signs_and_spread() {
        // Group g1: a hit (F = 1), a miss (0), a hit with more calls. Group g2: all miss.
        let rollouts = vec![
            rollout("g1", &["a.py"], 1),
            rollout("g1", &["b.py"], 1),
            rollout("g1", &["a.py"], 4),
            rollout("g2", &["b.py"], 1),
            rollout("g2", &["c.py"], 2),
            rollout("g2", &["b.py"], 3),
        ];
        let base = Variant::inline("base", "reward = Fb(file)\nadvantage = adv\n");
        // Negated rewards invert every ranking and every sign.
        let neg = Variant::inline("neg", "reward = 1 - Fb(file)\nadvantage = adv\n");
        // Rewarding calls alone: in g1 ranks (1, 1, 4) vs base's (1, 0, 1).
        let calls = Variant::inline("calls", "reward = C / 8\nadvantage = adv\n");
        let rows = replay(&[base, neg, calls], &rollouts).expect("replay");
        assert_eq!(rows[0].kendall_tau, Some(1.0));
        assert_eq!(rows[0].sign_flips, 0.0);
        // g2 is all misses: zero variance for base and neg (1 of 2 groups), τ defined on g1 only.
        assert_eq!((rows[0].zero_variance_groups, rows[0].tau_groups), (0.5, 1));
        assert_eq!(rows[1].kendall_tau, Some(-1.0));
        // g1's three rollouts flip sign; g2's zeros stay zero.
        assert_eq!(rows[1].sign_flips, 0.5);
        // calls in g1: reference (1, 0, 1), calls (1, 1, 4)/8: pairs (0,1) disc, (0,2) tie-ref... by hand:
        // x = (1, 0, 1), y = (1, 1, 4): (0,1) x↓ y= → tie y; (0,2) x= y↑ → tie x; (1,2) x↑ y↑ → concordant.
        // τ-b = 1 / √((3 − 1)(3 − 1)) = 0.5.
        assert_eq!(rows[2].kendall_tau, Some(0.5));
        assert_eq!(rows[2].zero_variance_groups, 0.0);
        assert!(rows[0].mean_abs_advantage > 0.0);
        let md = replay_markdown(&rows);
        assert!(md.contains("| neg | -1.000 (1 groups) | 0.500 | 0.500 |"), "{md}");
        // The shared table gives each variant what its own table gives.
        let variants = [Variant::inline("base", "reward = Fb(file)\n"), Variant::inline("calls", "reward = C / 8\n")];
        let shared = replay(&variants, &rollouts).expect("replay");
        assert_eq!(shared, replay_each(&variants, &rollouts).expect("replay"));
    }

    #[test]
    fn a_failing_variant_is_named_as_before() {
        let rollouts = vec![rollout("g1", &["a.py"], 1), rollout("g1", &["b.py"], 2)];
        let base = Variant::inline("base", "reward = Fb(file)\n");
        // The log has no functions: this variant's features cannot be computed.
        let func = Variant::inline("func", "reward = Fb(func)\n");
        let err =
            replay(&[base.clone(), func, Variant::inline("bad", "reward = nope\n")], &rollouts).expect_err("fails");
        assert!(
            matches!(&err, ReplayError::Eval { variant, message } if variant == "func" && message.contains("functions")),
            "{err}"
        );
        let mut tuned = base.clone();
        tuned.params = vec![("gamma".into(), 1.0)];
        let err = replay(&[base, tuned], &rollouts).expect_err("no such param");
        assert_eq!(err.to_string(), "variant `base`: unknown param `gamma`");
    }
}
