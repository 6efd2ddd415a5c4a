//! Tripwires on logged rollouts (`study replay`): every variant's `alert`s
//! evaluated step by step on a run's `rollouts.jsonl`, as training would have
//! evaluated them on those batches.
//!
//! A logged rollout carries its step, so the log is cut into one batch per
//! step. The step metrics a log can reproduce are those computed from the
//! rollouts themselves (`step.turns`, `step.calls`, `step.calls_per_turn`,
//! `step.completion_len`, `step.valid_rate`, `step.truncated_rate`,
//! `step.zero_std_groups`); an alert reading another one (`step.kl` needs the
//! policy) is reported as not evaluable rather than guessed.

use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::hir::{AlertExpr, Program};
use rewardlab_dsl::interp::alerts::eval_alerts;
use rewardlab_dsl::{FeatureRef, FeatureTable, Interval, SourceFile};
use rewardlab_rewards::rollout::Rollout;
use rewardlab_rewards::{FeatureOptions, feature_table};

use super::load::Variant;
use super::replay::ReplayError;
use crate::engine::FiredAlert;
use crate::engine::alerts::advance;

/// The step metrics a rollout log reproduces, and the feature each is the batch mean of.
const FROM_ROLLOUTS: [(&str, &str); 6] = [
    ("step.turns", "T"),
    ("step.calls", "C"),
    ("step.calls_per_turn", "c"),
    ("step.completion_len", "len"),
    ("step.valid_rate", "valid"),
    ("step.truncated_rate", "truncated"),
];

/// What replaying the alerts found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AlertReplay {
    /// Each alert that fired: the variant and the `alerts.csv`-style row.
    pub fired: Vec<(String, FiredAlert)>,
    /// Alerts that read a step metric the log cannot reproduce: (variant, condition, metric).
    pub skipped: Vec<(String, String, String)>,
    /// Steps replayed.
    pub steps: usize,
}

/// Evaluates every variant's alerts on `rollouts`, one batch per distinct
/// `steps[i]` (the step each rollout was logged at), in step order.
pub fn replay_alerts(variants: &[Variant], rollouts: &[Rollout], steps: &[usize]) -> Result<AlertReplay, ReplayError> {
    if rollouts.is_empty() {
        return Err(ReplayError::Empty);
    }
    let mut order: Vec<usize> = steps.to_vec();
    order.sort_unstable();
    order.dedup();
    // Each step's rollouts, copied out only once a variant has an alert to
    // evaluate (a big log replayed with no alerts is never copied).
    let mut batches: Option<Vec<Vec<Rollout>>> = None;
    alerts_with(variants, &order, |at, features| {
        let batches = batches.get_or_insert_with(|| {
            order
                .iter()
                .map(|&s| rollouts.iter().zip(steps).filter(|(_, t)| **t == s).map(|(r, _)| r.clone()).collect())
                .collect()
        });
        let grouped = feature_table(features, &batches[at], &FeatureOptions::default()).map_err(|e| e.to_string())?;
        Ok(grouped.table)
    })
}

/// Every variant's alerts, step by step: `steps` are the distinct steps in
/// order, and `table_of(i, features)` is the feature table of `steps[i]`'s
/// rollouts (grouped as [`feature_table`] groups them) with those features.
pub(super) fn alerts_with(
    variants: &[Variant],
    steps: &[usize],
    mut table_of: impl FnMut(usize, &[FeatureRef]) -> Result<FeatureTable, String>,
) -> Result<AlertReplay, ReplayError> {
    let mut out = AlertReplay { steps: steps.len(), ..AlertReplay::default() };
    for v in variants {
        let (program, skipped) = alert_program(v)?;
        out.skipped.extend(skipped);
        if program.alerts.is_empty() {
            continue;
        }
        let mut streaks = Vec::new();
        let features = alert_features(&program);
        for (at, &step) in steps.iter().enumerate() {
            let fired = table_of(at, &features)
                .and_then(|table| batch_alerts(&program, &table, step, &mut streaks))
                .map_err(|message| ReplayError::Eval { variant: v.name.clone(), message })?;
            out.fired.extend(fired.into_iter().map(|f| (v.name.clone(), f)));
        }
    }
    Ok(out)
}

/// The features an alert replay reads: the step metrics' and the alert
/// program's, for every variant that has an alert the log can evaluate;
/// `None` when a variant does not compile (the replay then reports it).
pub(super) fn alert_features_of(variants: &[Variant]) -> Option<Vec<FeatureRef>> {
    let mut out = Vec::new();
    for v in variants {
        let (program, _) = alert_program(v).ok()?;
        if !program.alerts.is_empty() {
            out.extend(alert_features(&program));
        }
    }
    Some(out)
}

/// An alert set aside: (variant, condition, metric), as [`AlertReplay::skipped`] lists it.
type Skipped = (String, String, String);

/// A variant's program compiled for its alerts, with the alerts that read a
/// metric the log lacks set aside (never evaluated) and listed as skipped.
fn alert_program(v: &Variant) -> Result<(Program, Vec<Skipped>), ReplayError> {
    let schema = rewardlab_rewards::feature_schema();
    let options = CheckOptions { group_size: Interval::new(1.0, f64::INFINITY), lints: false };
    let source = SourceFile::new(v.origin.clone(), v.source.clone());
    let (mut program, _) = compile_source(&source, &schema, &options).map_err(|d| ReplayError::Compile {
        variant: v.name.clone(),
        rendered: rewardlab_dsl::diag::render_all(&source, &d),
    })?;
    for (param, value) in &v.params {
        program.set_param(param, *value);
    }
    let mut kept = Vec::new();
    let mut skipped = Vec::new();
    for alert in std::mem::take(&mut program.alerts) {
        let mut read = Vec::new();
        metrics_of(&alert.cond, &mut read);
        match read.iter().map(|&i| &program.metrics[i]).find(|m| !reproducible(m)) {
            Some(m) => skipped.push((v.name.clone(), alert.text.clone(), m.clone())),
            None => kept.push(alert),
        }
    }
    program.alerts = kept;
    Ok((program, skipped))
}

/// The program's features and the step metrics' ([`FROM_ROLLOUTS`]), in the
/// order of the table a batch is evaluated on.
fn alert_features(program: &Program) -> Vec<FeatureRef> {
    let schema = rewardlab_rewards::feature_schema();
    let mut features = program.features.clone();
    for (_, name) in FROM_ROLLOUTS {
        if !features.iter().any(|f| f.key == name)
            && let Some(decl) = schema.get(name)
        {
            features.push(FeatureRef::new(decl, None, Vec::new()));
        }
    }
    features
}

fn reproducible(metric: &str) -> bool {
    metric == "step.zero_std_groups" || FROM_ROLLOUTS.iter().any(|(m, _)| *m == metric)
}

fn metrics_of(e: &AlertExpr, out: &mut Vec<usize>) {
    match e {
        AlertExpr::Metric(i) => out.push(*i),
        AlertExpr::Unary(_, x) => metrics_of(x, out),
        AlertExpr::Binary(_, x, y) => {
            metrics_of(x, out);
            metrics_of(y, out);
        }
        AlertExpr::Call(_, args) => args.iter().for_each(|a| metrics_of(a, out)),
        AlertExpr::In(x, lo, hi) => [x, lo, hi].into_iter().for_each(|a| metrics_of(a, out)),
        AlertExpr::Value(_) => {}
    }
}

/// One step's alerts on its logged rollouts' feature table.
fn batch_alerts(
    program: &Program,
    table: &FeatureTable,
    step: usize,
    streaks: &mut Vec<u32>,
) -> Result<Vec<FiredAlert>, String> {
    let mean = |key: &str| {
        table
            .column(key)
            .map_or(f64::NAN, |c| if c.is_empty() { f64::NAN } else { c.iter().sum::<f64>() / c.len() as f64 })
    };
    let outputs = rewardlab_dsl::interp::eval(program, table, &rewardlab_dsl::EvalOptions::default())
        .map_err(|e| e.to_string())?;
    let groups = table.groups();
    let flat = (0..groups)
        .filter(|&g| {
            let r = &outputs.reward[table.group_rows(g)];
            r.iter().all(|x| *x == r[0])
        })
        .count();
    let values: Vec<f64> = program
        .metrics
        .iter()
        .map(|m| match FROM_ROLLOUTS.iter().find(|(name, _)| *name == m.as_str()) {
            Some((_, feature)) => mean(feature),
            None if m == "step.zero_std_groups" => flat as f64 / groups.max(1) as f64,
            None => f64::NAN,
        })
        .collect();
    let holds = eval_alerts(program, table, &values).map_err(|e| e.to_string())?;
    Ok(advance(program, &holds, step, streaks))
}

#[cfg(test)]
mod tests {
    use rewardlab_rewards::rollout::{LoggedCall, Selection};

    use super::*;

    /// A rollout of `group` that made `calls` calls in one search turn (none: it answered at once).
    fn rollout(group: &str, calls: usize) -> Rollout {
        let sel =
            |f: &[&str]| Selection { files: Some(f.iter().map(|s| s.to_string()).collect()), ..Selection::default() };
        let call = LoggedCall { tool: "grep".into(), ..Default::default() };
        let turns = if calls == 0 { vec![vec![]] } else { vec![vec![call; calls], vec![]] };
        Rollout {
            group: group.into(),
            predicted: Some(sel(&["a.py"])),
            target: Some(sel(&["a.py"])),
            turns: Some(turns),
            completion_tokens: Some(10),
            valid: Some(true),
            truncated: Some(false),
        }
    }

    #[test]
    fn alerts_replay_step_by_step_and_skip_metrics_a_log_lacks() {
        // Steps 1 and 2 search; steps 3 to 5 answer at once.
        let mut rollouts = Vec::new();
        let mut steps = Vec::new();
        for step in 1..=5 {
            let calls = if step <= 2 { 2 } else { 0 };
            for g in ["g1", "g2"] {
                for _ in 0..2 {
                    rollouts.push(rollout(g, calls));
                    steps.push(step);
                }
            }
        }
        let source = "reward = Fb(file)\n\
                      alert step.turns < 1.5 for 2 steps : \"turn collapse\"\n\
                      alert batch.mean(C) < 1 : \"call collapse\"\n\
                      alert step.kl > 0.1 : \"drift\"\n";
        let v = Variant {
            name: "v".into(),
            origin: "v".into(),
            source: source.into(),
            params: Vec::new(),
            proxy: None,
            loss: None,
        };
        let found = replay_alerts(&[v], &rollouts, &steps).expect("replays");
        assert_eq!(found.steps, 5);
        let fired: Vec<(usize, &str)> = found.fired.iter().map(|(_, f)| (f.step, f.message.as_str())).collect();
        assert_eq!(fired, [(3, "call collapse"), (4, "turn collapse")]);
        assert_eq!(found.skipped, [("v".to_string(), "step.kl > 0.1".to_string(), "step.kl".to_string())]);
    }
}
