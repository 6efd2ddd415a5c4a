//! `alert` statements: parsing, the batch-level rule, step metrics, and
//! evaluation over a batch.

use super::{check_with, seen};
use crate::hir::Program;
use crate::interp::alerts::eval_alerts;
use crate::table::FeatureTable;
use crate::testing::metrics_schema;

fn program(text: &str) -> Program {
    let (program, diags) = check_with(text, &metrics_schema());
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:#?}");
    program.expect("no errors")
}

/// The single error of `text`: (code, message, text under the caret, help).
fn error(text: &str) -> (String, String, String, String) {
    let (program, diags) = check_with(text, &metrics_schema());
    let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{text}: {diags:#?}");
    assert!(program.is_none());
    let s = seen(text, errors[0]);
    (s.code.to_string(), s.message, s.at, s.help)
}

fn parse_error(text: &str) -> (String, String) {
    let (_, diags) = crate::parser::parse(text);
    assert_eq!(diags.len(), 1, "{text}: {diags:#?}");
    (diags[0].message.clone(), text[diags[0].span.range()].to_string())
}

#[test]
fn an_alert_keeps_its_condition_persistence_message_and_text() {
    let text = "reward = grade(word)\nalert batch.mean(steps) < 1.5 for 3 steps : \"turns # collapsed \\\"1\\\"\"\n\
                alert step.kl > 0.2 && batch.mean(reward) < 0.1 : \"drift\"\n";
    let p = program(text);
    assert_eq!(p.alerts.len(), 2);
    assert_eq!(p.alerts[0].steps, 3);
    assert_eq!(p.alerts[0].message, "turns # collapsed \"1\"");
    assert_eq!(p.alerts[0].text, "batch.mean(steps) < 1.5");
    assert_eq!(p.alerts[1].steps, 1);
    assert_eq!(p.metrics, ["step.kl"]);
    // The feature only the alert reads is a column of the program.
    assert!(p.features.iter().any(|f| f.key == "steps"), "{:?}", p.features);
}

#[test]
fn per_rollout_values_in_an_alert_are_errors_with_a_caret() {
    let (code, message, at, help) = error("reward = grade(word)\nalert steps < 2 : \"m\"\n");
    assert_eq!(code, "alert-per-rollout");
    assert_eq!(message, "`steps` is a per-rollout value; an alert reads batch-level values");
    assert_eq!(at, "steps");
    assert_eq!(help, "reduce it over the batch, e.g. `batch.mean(steps)`");

    let (code, _, at, _) = error("reward = grade(word)\nalert 1 + reward > 2 : \"m\"\n");
    assert_eq!((code.as_str(), at.as_str()), ("alert-per-rollout", "reward"));

    let (_, message, at, help) = error("reward = grade(word)\nalert group.mean(reward) > 0.5 : \"m\"\n");
    assert_eq!(at, "group.mean(reward)");
    assert_eq!(message, "`group.mean` differs from group to group; an alert reads batch-level values");
    assert!(help.contains("batch.mean"), "{help}");

    // A let that reads a per-rollout value is one; a let of batch values is not.
    let (_, _, at, _) = error("reward = grade(word)\nlet r2 = reward * 2\nalert batch.max(reward) > r2 : \"m\"\n");
    assert_eq!(at, "r2");
    let p = program("reward = grade(word)\nlet m = batch.mean(reward)\nalert m < 0.1 || step.entropy < 0.05 : \"m\"\n");
    assert_eq!(p.alerts.len(), 1);
}

#[test]
fn alert_conditions_are_type_checked_and_names_suggested() {
    let (code, _, at, help) = error("reward = grade(word)\nalert batch.mean(steps) : \"m\"\n");
    assert_eq!((code.as_str(), at.as_str()), ("type-mismatch", "batch.mean(steps)"));
    assert_eq!(help, "`alert` takes bools");

    let (code, message, at, help) = error("reward = grade(word)\nalert step.kll > 1 : \"m\"\n");
    assert_eq!(
        (code.as_str(), message.as_str(), at.as_str()),
        ("unknown-name", "unknown step metric `step.kll`", "step.kll")
    );
    assert_eq!(help, "did you mean `step.kl`?");

    let (code, _, at, help) = error("reward = grade(word)\nalert batch.mean(stpes) > 1 : \"m\"\n");
    assert_eq!((code.as_str(), at.as_str()), ("unknown-name", "stpes"));
    assert_eq!(help, "did you mean `steps`?");
}

#[test]
fn step_metrics_are_read_only_by_alerts_and_outside_reductions() {
    let (code, _, at, _) = error("reward = grade(word) + step.kl\n");
    assert_eq!((code.as_str(), at.as_str()), ("metric-outside-alert", "step.kl"));
    let (code, message, at, _) = error("reward = grade(word)\nalert batch.mean(reward * step.kl) > 1 : \"m\"\n");
    assert_eq!((code.as_str(), at.as_str()), ("alert-per-rollout", "step.kl"));
    assert_eq!(message, "a step metric inside a reduction");
}

#[test]
fn malformed_alerts_are_syntax_errors_where_they_go_wrong() {
    let (m, at) = parse_error("alert batch.mean(T) < 1 \"m\"\n");
    assert_eq!(m, "expected an operator, `for N steps`, or `:` and a quoted message, found `\"`");
    assert_eq!(at, "\"");
    let (m, at) = parse_error("alert batch.mean(T) < 1 : m\n");
    assert_eq!((m.as_str(), at.as_str()), ("expected a quoted message, found `m`", "m"));
    let (m, at) = parse_error("alert batch.mean(T) < 1 : \"turns\n");
    assert_eq!((m.as_str(), at.as_str()), ("unclosed `\"`", "\""));
    let (m, at) = parse_error("alert batch.mean(T) < 1 for 0 steps : \"m\"\n");
    assert_eq!((m.as_str(), at.as_str()), ("the number of steps must be a whole number from 1", "0"));
    let (m, _) = parse_error("alert batch.mean(T) < 1 for 2 : \"m\"\n");
    assert_eq!(m, "expected `steps` after the number, found `:`");
    let (m, at) = parse_error("alert batch.mean(T) < 1 : \"a\u{1b}[31m\"\n");
    assert_eq!((m.as_str(), at.as_str()), ("control character `\\u{1b}` in a message", "\u{1b}"));
    let (m, _) = parse_error("alert batch.mean(T) < 1 : \"m\" x\n");
    assert_eq!(m, "expected the end of the statement after the message, found `x`");
    // `alert = ...` is still a definition (of an unknown name), not an alert.
    let (file, diags) = crate::parser::parse("alert = 1\n");
    assert!(diags.is_empty());
    assert!(matches!(file.items[0].kind, crate::ast::ItemKind::Def { .. }));
}

#[test]
fn alerts_evaluate_on_batch_values_and_metrics() {
    let text = "reward = grade(word)\n\
                alert batch.mean(steps) < 1.5 : \"turns\"\n\
                alert step.kl > 0.2 : \"kl\"\n\
                alert batch.count(where = cut > 0) >= 2 : \"cut\"\n";
    let p = program(text);
    let mut table = FeatureTable::uniform(2, 2);
    table.add_column("grade(word)", vec![0.1, 0.2, 0.3, 0.4]).expect("column");
    table.add_column("steps", vec![1.0, 1.0, 2.0, 1.0]).expect("column");
    table.add_column("cut", vec![1.0, 0.0, 0.0, 0.0]).expect("column");
    assert_eq!(eval_alerts(&p, &table, &[0.1]).expect("evaluates"), [true, false, false]);
    assert_eq!(eval_alerts(&p, &table, &[0.3]).expect("evaluates"), [true, true, false]);
    let mut long = FeatureTable::uniform(2, 2);
    long.add_column("grade(word)", vec![0.1, 0.2, 0.3, 0.4]).expect("column");
    long.add_column("steps", vec![2.0, 2.0, 2.0, 1.0]).expect("column");
    long.add_column("cut", vec![1.0, 1.0, 0.0, 0.0]).expect("column");
    assert_eq!(eval_alerts(&p, &long, &[f64::NAN]).expect("evaluates"), [false, false, true]);
    // A missing feature column is an error, not a silent value.
    let bare = FeatureTable::uniform(1, 2);
    assert!(eval_alerts(&p, &bare, &[0.0]).is_err());
}

#[test]
fn the_fused_cpu_backend_evaluates_alerts_as_the_interpreter_does() {
    let p = crate::testing::backend_alerts();
    assert_eq!(p.alerts.len(), 6);
    let mut compiled = crate::cpu::CompiledAlerts::new(&p);
    let mut seen = [0usize; 6];
    for salt in 0..60u64 {
        let groups = 1 + (salt as usize % 5);
        let mut table = FeatureTable::uniform(groups, 3);
        let n = table.rows();
        let value = |i: usize, k: u64| ((i as u64 * 2_654_435_761 + salt * 97 + k * 13) % 1000) as f64 / 1000.0;
        table.add_column("grade(word)", (0..n).map(|i| value(i, 1)).collect()).expect("column");
        table.add_column("steps", (0..n).map(|i| (value(i, 2) * 3.0).floor()).collect()).expect("column");
        table.add_column("cut", (0..n).map(|i| if value(i, 3) < 0.2 { 1.0 } else { 0.0 }).collect()).expect("column");
        for metrics in [[value(0, 4), value(1, 5)], [f64::NAN, 0.5], [0.1, f64::NAN]] {
            let want = eval_alerts(&p, &table, &metrics).expect("the interpreter evaluates");
            assert_eq!(compiled.eval(&table, &metrics).expect("compiled"), want, "salt {salt}, metrics {metrics:?}");
            for (count, &h) in seen.iter_mut().zip(&want) {
                *count += usize::from(h);
            }
        }
    }
    // Each alert both held and did not somewhere, so the agreement is not vacuous.
    assert!(seen.iter().all(|&k| k > 0 && k < 180), "{seen:?}");
}
