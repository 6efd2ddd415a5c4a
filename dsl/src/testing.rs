//! Fixtures shared by the crate's unit tests: a made-up feature schema and
//! sample reward files written against it.
//!
//! The schema describes an imaginary grader of written work. It has the same
//! spread of declarations as a real caller's schema (a leveled feature with a
//! defaulted param, a leveled one without, bounded and unbounded counts,
//! integer and real values, every role), so the checker, the lints and the
//! generator walk the same paths. The real schema and the shipped reward files
//! are tested where they live, in `rewardlab-rewards`.

use crate::interval::Interval;
use crate::schema::{FeatureDecl, FeatureSchema, Role};

/// The levels `grade`, `hits`, `found` and `kept` are read at.
pub(crate) const LEVELS: [&str; 3] = ["word", "line", "page"];

/// The test schema: `grade(level, beta)`, `hits(level)`, `found(level)`,
/// `kept(level)`, `cost`, `moves`, `steps`, `pace`, `size`, `ok` and `cut`,
/// declared in this order (the generator draws in declaration order).
pub(crate) fn schema() -> FeatureSchema {
    let unit = Interval::UNIT;
    let counts = Interval::NON_NEGATIVE;
    FeatureSchema::new()
        .with(
            FeatureDecl::number("grade", unit, "grade of the work at a level")
                .with_levels(&LEVELS)
                .with_param("beta", 0.5, Interval::new(0.0, f64::INFINITY))
                .with_role(Role::Quality),
        )
        .with(FeatureDecl::number("hits", unit, "share of checks passed").with_levels(&LEVELS).with_role(Role::Quality))
        .with(
            FeatureDecl::number("found", unit, "share of the asked-for points made")
                .with_levels(&LEVELS)
                .with_role(Role::Quality),
        )
        .with(
            FeatureDecl::number("kept", unit, "share of the source kept").with_levels(&LEVELS).with_role(Role::Quality),
        )
        .with(FeatureDecl::number("cost", Interval::new(0.0, 8.0), "effort per step").with_role(Role::Efficiency))
        .with(FeatureDecl::number("moves", counts, "actions taken").integer().with_role(Role::Efficiency))
        .with(
            FeatureDecl::number("steps", Interval::new(1.0, f64::INFINITY), "steps taken")
                .integer()
                .with_role(Role::Efficiency),
        )
        .with(FeatureDecl::number("pace", unit, "useful share of the actions").with_role(Role::Efficiency))
        .with(FeatureDecl::number("size", counts, "tokens written").integer().with_role(Role::Length))
        .with(FeatureDecl::number("ok", unit, "the work was well-formed").integer().with_role(Role::Quality))
        .with(FeatureDecl::number("cut", unit, "the work was cut short").integer())
}

/// Sample reward files against [`schema`], by name, in name order: one per
/// shape a real reward takes (a scaled reward, a gated one with an advantage
/// discount, weighted sums with params, bonuses, each built-in estimator
/// written out, and a baseline masked to the well-formed rows).
pub(crate) const SAMPLES: [(&str, &str); 10] = [
    (
        "additive",
        "param w_word = 0.5\nparam alpha = 1\nparam gamma = 0.5\n\
         let h = w_word * hits(word) + (1 - w_word) * hits(page)\n\
         reward = alpha * h + gamma * pace\n\ncheck reward in [0, 1.5]\n",
    ),
    (
        "bonus",
        "# a bonus for pace, paid only when the work is any good\n\
         param w_word = 0.5\nparam alpha = 1\nparam gamma = 0.5\n\
         let h = w_word * hits(word) + (1 - w_word) * hits(page)\n\
         reward = alpha * h + gamma * (h * pace)\n\n\
         check reward in [0, 1.5]\n\
         check h > 0 || reward == 0      # no reward for pace alone\n\
         check reward >= alpha * h       # the pace term is a bonus, never a cost\n",
    ),
    (
        "centred",
        "reward = grade(word) * mask(cost > 0)\nadv = reward - group.mean(reward)\n\n\
         check abs(group.sum(adv)) <= 1e-9        # centred within every group\n\
         check adv in [-1, 1]\n",
    ),
    (
        "discounted",
        "let score = (grade(word) + grade(line)) / 2\n\
         reward = score * mask(cost > 0)\n\
         advantage = adv * sqrt(min(cost / 4, 1))\n\n\
         check reward in [0, 1]\n\
         check advantage * adv >= 0     # the discount never flips a sign\n\
         check abs(advantage) <= abs(adv)\n",
    ),
    (
        "gated",
        "# the base reward gated on any effort, the discount at the advantage layer\n\
         reward    = grade(word) * mask(cost > 0)\n\
         advantage = adv * sqrt(min(cost / 4, 1))\n\n\
         check reward in [0, 1]\n\
         check advantage * adv >= 0      # the discount never flips a sign\n\
         check cost >= 4 || abs(advantage) <= abs(adv)\n",
    ),
    (
        "grpo",
        "reward = grade(word) * mask(cost > 0)\n\
         adv = (reward - group.mean(reward)) / (group.std(reward) + 1e-4)\n\n\
         check abs(group.sum(adv)) <= 1e-6        # centred within every group\n\
         check sign(adv) == sign(reward - group.mean(reward))\n",
    ),
    (
        "masked",
        "# ill-formed work is kept out of the group's baseline\n\
         reward = grade(word) * mask(cost > 0)\n\
         adv = (reward - group.mean(reward, where = ok > 0)) / (group.std(reward, where = ok > 0) + 1e-4)\n\n\
         check abs(group.sum(adv, where = ok > 0)) <= 1e-6   # centred over the well-formed rows\n\
         check group.count(where = ok > 0) <= group.count()\n",
    ),
    (
        "rloo",
        "reward = grade(word) * mask(cost > 0)\n\
         adv = reward - (group.sum(reward) - reward) / (group.count() - 1)\n\n\
         check abs(group.sum(adv)) <= 1e-9        # leave-one-out baselines still centre the group\n\
         check adv in [-1, 1]\n",
    ),
    (
        "scaled",
        "# the reward itself scaled by effort: the lints warn about this shape\n\
         let score = (grade(word) + grade(line)) / 2\n\
         reward = score / max(1, cost / 4)\n\n\
         check reward in [0, 1]\n\
         check reward <= score          # the scale only ever discounts\n",
    ),
    (
        "weighted",
        "param w_word = 0.5\nlet h = w_word * hits(word) + (1 - w_word) * hits(page)\nreward = h\n\n\
         check reward in [0, 1]\n",
    ),
];

/// A sample reward file's text.
pub(crate) fn sample(name: &str) -> &'static str {
    SAMPLES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).expect("a sample file")
}

/// Alerts over every kind of batch-level value, for the backends' agreement tests.
pub const BACKEND_ALERTS: &str = "param lo = 0.25\n\
    reward = grade(word) * mask(steps > 1)\n\
    alert batch.mean(steps) < 1.5 : \"turns\"\n\
    alert step.kl > 0.2 && batch.max(reward) <= 0.3 : \"kl\"\n\
    alert batch.count(where = cut > 0) >= 2 for 2 steps : \"cut\"\n\
    alert batch.mean(group.std(reward)) in [0, lo] : \"flat groups\"\n\
    alert batch.std(advantage, where = steps > 1) > step.entropy / 2 : \"spread\"\n\
    alert !(batch.min(reward) < step.kl) || step.entropy > 0.9 : \"floor\"\n";

/// The test schema with two step metrics (`step.kl`, `step.entropy`), for alerts.
pub fn metrics_schema() -> FeatureSchema {
    schema().with_metric("step.kl", Interval::REAL, "KL estimate").with_metric(
        "step.entropy",
        Interval::NON_NEGATIVE,
        "mean entropy",
    )
}

/// [`BACKEND_ALERTS`], checked.
pub fn backend_alerts() -> crate::hir::Program {
    let source = crate::SourceFile::new("alerts.reward", BACKEND_ALERTS.to_string());
    match crate::check::compile_source(&source, &metrics_schema(), &crate::check::CheckOptions::default()) {
        Ok((program, _warnings)) => program,
        Err(diags) => panic!("the alerts sample does not check: {diags:?}"),
    }
}
