use super::*;
use crate::check::{CheckOptions, compile_source};
use crate::interval::Interval;
use crate::span::SourceFile;
use crate::testing::schema;

fn program(text: &str) -> Program {
    let options = CheckOptions { group_size: Interval::point(8.0), lints: false };
    match compile_source(&SourceFile::new("t.reward", text), &schema(), &options) {
        Ok((p, _)) => p,
        Err(d) => panic!("{text}: {d:?}"),
    }
}

fn verdict(a: &str, b: &str) -> Verdict {
    let (pa, pb) = (program(a), program(b));
    let options = EquivOptions::default();
    let v = compare(&pa, &pb, &schema(), &options).expect("compares");
    if v.is_proved() {
        // The oracle: a proof the interpreter contradicts is a bug in a rewrite.
        oracle_agrees(&pa, &pb);
    }
    v
}

/// The interpreter on generated groups agrees with a proof. Groups where
/// either side is not finite are skipped: the proof assumes non-zero
/// denominators, and an ε-free `(r − m)/s` on a group of equal rewards
/// divides 0 by 0 on one side and rounding noise by rounding noise (±1) on
/// the other (so groups whose rewards are all equal are skipped too).
fn oracle_agrees(a: &Program, b: &Program) {
    let s = schema();
    let mut columns: Vec<Column> = Vec::new();
    for f in a.features.iter().chain(&b.features) {
        if !columns.iter().any(|c| c.key == f.key) {
            columns.push(Column::new(&f.key, s.get(&f.name).expect("declared")));
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
    let mut compared = 0;
    for _ in 0..500 {
        let case = Case { groups: vec![cases::draw_group(&mut rng, &columns, (8, 8))] };
        let table = cases::table(&columns, &[&case]).expect("table");
        let (l, r) = (
            interp::eval(a, &table, &options).expect("evaluates"),
            interp::eval(b, &table, &options).expect("evaluates"),
        );
        let tied = |x: &[f64]| x.iter().all(|v| *v == x[0]);
        if tied(&l.reward) || tied(&r.reward) || l.advantage.iter().chain(&r.advantage).any(|x| !x.is_finite()) {
            continue;
        }
        let (left, right) = (l.advantage, r.advantage);
        compared += 1;
        // Equal rewards over the reals can round apart differently on the two sides, and a rank
        // then breaks the tie the other way: a rollout whose reward nearly ties another's is no
        // disagreement of the proof.
        let near_tie = |i: usize| {
            [&l.reward, &r.reward]
                .iter()
                .any(|rw| rw.iter().enumerate().any(|(j, v)| j != i && (v - rw[i]).abs() <= 1e-9 * (1.0 + rw[i].abs())))
        };
        for (i, (x, y)) in left.iter().zip(&right).enumerate() {
            assert!(
                (x - y).abs() <= 1e-6 * (1.0 + x.abs()) || near_tie(i),
                "proved but {x} vs {y} on {:?}",
                case.groups[0]
            );
        }
    }
    assert!(compared > 100, "only {compared} finite groups");
}

/// GRPO without the epsilon: the scale cancels exactly.
const STD_NO_EPS: &str = "adv = (reward - group.mean(reward)) / group.std(reward)\n";
/// GRPO as the language's default writes it.
const GRPO: &str = "adv = (reward - group.mean(reward)) / (group.std(reward) + 1e-4)\n";
const CENTRED: &str = "adv = reward - group.mean(reward)\n";

#[test]
fn positive_scaling_is_proved_under_std_normalisation() {
    let v = verdict(&format!("reward = grade(word)\n{STD_NO_EPS}"), &format!("reward = 2 * grade(word)\n{STD_NO_EPS}"));
    assert_eq!(v, Verdict::Proved { reason: "positive scaling (×2)".into() }, "{}", v.describe());
    // A param is its value: 0.5 * 4 folds to the same 2.
    let v = verdict(
        &format!("param w = 0.5\nreward = w * 4 * grade(word)\n{STD_NO_EPS}"),
        &format!("reward = grade(word)\n{STD_NO_EPS}"),
    );
    assert!(v.is_proved(), "{}", v.describe());
}

#[test]
fn the_std_epsilon_makes_scaling_equal_only_up_to_epsilon() {
    let v = verdict(&format!("reward = grade(word)\n{GRPO}"), &format!("reward = 2 * grade(word)\n{GRPO}"));
    let Verdict::EqualUpToEpsilon { reason, denominators, max_difference, groups } = &v else {
        panic!("{}", v.describe())
    };
    assert_eq!(reason, "positive scaling (×2)");
    // 2(r − m)/(2s + ε) = (r − m)/(s + ε/2).
    assert!(denominators.0.contains("0.0001") && denominators.1.contains("0.00005"), "{denominators:?}");
    assert_eq!(*groups, 1000);
    assert!(*max_difference > 0.0 && *max_difference < 1.0, "{max_difference}");
    assert!(!v.is_proved());
    assert!(
        v.describe().starts_with("equal up to ε, not proved (positive scaling (×2); denominators"),
        "{}",
        v.describe()
    );
}

#[test]
fn a_group_constant_term_is_proved_under_centering() {
    let v = verdict(
        &format!("reward = grade(word)\n{CENTRED}"),
        &format!("reward = grade(word) + group.mean(cost)\n{CENTRED}"),
    );
    assert_eq!(v, Verdict::Proved { reason: "a group-constant term".into() }, "{}", v.describe());
    // And under GRPO (std ignores it too), combined with a scale and the ε-free std.
    let v = verdict(
        &format!("reward = grade(word)\n{STD_NO_EPS}"),
        &format!("reward = 3 * grade(word) - 0.5 * group.max(cost) + 1\n{STD_NO_EPS}"),
    );
    assert_eq!(v, Verdict::Proved { reason: "positive scaling (×3) and a group-constant term".into() });
}

#[test]
fn reordering_and_constant_folding_are_proved() {
    let v = verdict(
        "reward = mask(cost > 0) * grade(word)\n",
        "reward = grade(word) * mask(0 < cost) * (1 + 1) / 2\nadv = (reward - group.mean(reward)) / \
         (group.std(reward) + 0.0001)\n",
    );
    assert_eq!(v, Verdict::Proved { reason: "the same reward after reordering and constant folding".into() });
}

#[test]
fn ranks_ignore_positive_scales_and_group_constants() {
    let rank = "adv = group.rank(reward)\n";
    let v = verdict(
        &format!("reward = 3 * grade(word) + group.mean(cost)\n{rank}"),
        &format!("reward = grade(word)\n{rank}"),
    );
    assert!(v.is_proved(), "{}", v.describe());
}

#[test]
fn scaling_is_not_equivalent_under_centering_alone() {
    let v = verdict(&format!("reward = 2 * grade(word)\n{CENTRED}"), &format!("reward = grade(word)\n{CENTRED}"));
    let Verdict::Different { witness } = &v else { panic!("{}", v.describe()) };
    // The witness is a real counterexample: left is twice right at the row.
    let (l, r) = (witness.left[witness.row], witness.right[witness.row]);
    assert!((l - 2.0 * r).abs() < 1e-12 && l != r, "{}", witness.describe());
    assert_eq!(witness.rows.len(), 8);
}

#[test]
fn negative_scaling_flips_the_advantage() {
    let v =
        verdict(&format!("reward = -2 * grade(word)\n{STD_NO_EPS}"), &format!("reward = grade(word)\n{STD_NO_EPS}"));
    let Verdict::Different { witness } = &v else { panic!("{}", v.describe()) };
    let (l, r) = (witness.left[witness.row], witness.right[witness.row]);
    assert!((l + r).abs() < 1e-9 && l != 0.0, "{}", witness.describe());
}

#[test]
fn a_group_constant_term_is_not_ignored_per_rollout() {
    // `cost` varies within the group: not a group constant.
    let v = verdict(&format!("reward = grade(word) + cost\n{CENTRED}"), &format!("reward = grade(word)\n{CENTRED}"));
    assert!(matches!(v, Verdict::Different { .. }), "{}", v.describe());
}

#[test]
fn equal_but_unproved_is_reported_as_checked_on_groups() {
    // sqrt(x²) = x for x ≥ 0, which the normal form does not know.
    let v = verdict("reward = sqrt(grade(word) ^ 2)\n", "reward = grade(word)\n");
    assert_eq!(v, Verdict::EqualOnGroups { groups: 1000 }, "{}", v.describe());
    assert_eq!(v.describe(), "equal on 1000 groups, not proved");
}

#[test]
fn rloo_is_a_rescaled_centering_not_the_same() {
    let rloo = "adv = reward - (group.sum(reward) - reward) / (group.count() - 1)\n";
    let v = verdict(&format!("reward = grade(word)\n{rloo}"), &format!("reward = grade(word)\n{CENTRED}"));
    assert!(matches!(v, Verdict::Different { .. }), "{}", v.describe());
}

#[test]
fn the_default_estimator_equals_grpo_written_out() {
    let a = program("reward = grade(word)\n");
    let b = program(&format!("reward = grade(word)\n{GRPO}"));
    assert_eq!(advantage_normal_form(&a, &schema()), advantage_normal_form(&b, &schema()));
}

#[test]
fn masked_means_keep_their_shift() {
    // An empty selection gives 0, so `mean(x + k, where m)` is not `mean(x, where m) + k`.
    let a = "reward = grade(word)\nadv = reward - group.mean(reward + 1, where = cost > 0)\n";
    let b = "reward = grade(word)\nadv = reward - group.mean(reward, where = cost > 0) - 1\n";
    let v = verdict(a, b);
    assert!(matches!(v, Verdict::Different { .. }), "{}", v.describe());
}

mod rewrites {
    use proptest::prelude::*;

    use super::*;

    const FACTORS: [&str; 4] = ["grade(word)", "hits(page)", "pace", "mask(cost > 1)"];
    const SHIFTS: [&str; 3] = ["", " + group.mean(cost)", " - 0.5 * group.max(pace) + 2"];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

        /// A reward rewritten by what the estimator cannot see — terms and
        /// factors reordered, a positive scale (not under centering), a group
        /// constant added — is proved equal, and the interpreter agrees.
        #[test]
        fn rewritten_rewards_are_proved_and_the_interpreter_agrees(
            terms in prop::collection::vec((1u8..5, 0usize..4, 0usize..4), 1..4),
            scale in 1u8..6,
            shift in 0usize..3,
            estimator in 0usize..3,
        ) {
            let (adv, scale) = match estimator {
                0 => (STD_NO_EPS, scale),
                1 => ("adv = group.rank(reward)\n", scale),
                _ => (CENTRED, 1),
            };
            let term = |(c, f, g): &(u8, usize, usize)| format!("{c} * {} * {}", FACTORS[*f], FACTORS[*g]);
            let swapped = |(c, f, g): &(u8, usize, usize)| format!("{} * {c} * {}", FACTORS[*g], FACTORS[*f]);
            let a: Vec<String> = terms.iter().map(term).collect();
            let b: Vec<String> = terms.iter().rev().map(swapped).collect();
            let left = format!("reward = {}\n{adv}", a.join(" + "));
            let right = format!("reward = {scale} * ({}){}\n{adv}", b.join(" + "), SHIFTS[shift]);
            let v = verdict(&left, &right);
            prop_assert!(v.is_proved(), "{left}\n{right}\n{}", v.describe());
        }
    }
}
