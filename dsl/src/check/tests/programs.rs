//! The lowered program: dependency order, layers, defaults, intervals.

use super::{check_text, sample};
use crate::hir::{DefKind, Expr, Layer};
use crate::interval::Interval;

#[test]
fn defaults_are_grpo_and_adv() {
    let (program, _) = check_text("reward = grade(word) * mask(cost > 0)\n");
    let p = program.expect("checks");
    let adv = p.def(p.adv);
    assert_eq!((adv.kind, adv.layer, adv.explicit), (DefKind::Adv, Layer::Advantage, false));
    assert_eq!(p.def(p.advantage).expr, Expr::Def(p.adv));
    assert!(!p.def(p.advantage).explicit);
    assert_eq!(p.def(p.reward).interval, Interval::UNIT);
    // (r - mean) / (std + 1e-4) with r in [0, 1].
    assert_eq!(adv.interval, Interval::new(-1e4, 1e4));
}

#[test]
fn defs_come_in_dependency_order_and_lets_get_their_layer() {
    let text = "advantage = adv * w\nlet w = sqrt(min(cost / 4, 1))\nlet centred = reward - group.mean(reward)\nreward = s\nlet s = grade(word)\nlet unused = 2\n";
    let (program, _) = check_text(text);
    let p = program.expect("checks");
    let names: Vec<&str> = p.defs.iter().map(|d| d.name.as_str()).collect();
    let pos = |n: &str| names.iter().position(|x| *x == n).expect(n);
    assert!(pos("w") < pos("advantage") && pos("adv") < pos("advantage"), "{names:?}");
    assert!(pos("s") < pos("reward") && pos("reward") < pos("centred") && pos("reward") < pos("adv"), "{names:?}");
    assert!(names.contains(&"unused"));
    for (id, def) in p.defs.iter().enumerate() {
        let mut reads = Vec::new();
        collect_defs(&def.expr, &mut reads);
        assert!(reads.iter().all(|&r| r < id), "{} reads a later def", def.name);
    }
    let layer = |n: &str| p.defs[pos(n)].layer;
    assert_eq!((layer("w"), layer("s"), layer("centred")), (Layer::Reward, Layer::Reward, Layer::Advantage));
    assert_eq!(p.def(pos("w")).interval, Interval::UNIT);
}

fn collect_defs(e: &Expr, out: &mut Vec<usize>) {
    match e {
        Expr::Def(id) => out.push(*id),
        Expr::Unary(_, x) => collect_defs(x, out),
        Expr::Binary(_, a, b) => {
            collect_defs(a, out);
            collect_defs(b, out);
        }
        Expr::Call(_, args) => args.iter().for_each(|a| collect_defs(a, out)),
        Expr::In(a, b, c) => [a, b, c].into_iter().for_each(|x| collect_defs(x, out)),
        Expr::Reduce(_, _, arg, mask) => {
            for x in arg.iter().chain(mask) {
                collect_defs(x, out);
            }
        }
        _ => {}
    }
}

#[test]
fn params_checks_and_intervals_of_sample_files() {
    let (program, _) = check_text(sample("bonus"));
    let p = program.expect("checks");
    assert_eq!(p.params.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["w_word", "alpha", "gamma"]);
    assert_eq!(p.def(p.reward).interval, Interval::new(0.0, 1.5));
    assert_eq!(p.checks.len(), 3);
    assert_eq!(p.checks[0].text, "reward in [0, 1.5]");
    let (program, _) = check_text(sample("gated"));
    let p = program.expect("checks");
    assert_eq!(p.def(p.advantage).interval, Interval::new(-1e4, 1e4));
    assert_eq!(p.features.iter().map(|f| f.key.as_str()).collect::<Vec<_>>(), ["grade(word)", "cost"]);
}

#[test]
fn reads_batch_sees_a_batch_reduction_anywhere_and_nothing_else() {
    let reads = |text: &str| {
        let (program, diagnostics) = check_text(text);
        program.unwrap_or_else(|| panic!("{text}: {diagnostics:?}")).reads_batch()
    };
    assert!(!reads("reward = grade(word) * mask(cost > 0)\n"), "GRPO's defaults are per group");
    assert!(!reads("reward = grade(word)\nadv = reward - group.mean(reward, where = cost > 0)\n"));
    assert!(reads("reward = grade(word) - batch.mean(grade(word))\n"));
    // Inside a group reduction's argument or mask, and through a `let`.
    assert!(reads("reward = grade(word)\nlet b = batch.std(reward)\nadv = group.mean(reward * b)\n"));
    assert!(reads("reward = grade(word)\nadv = group.sum(reward, where = reward > batch.mean(reward))\n"));
}
