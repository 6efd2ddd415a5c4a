//! Fixtures shared by the crate's unit tests: the real rollout schema and the
//! shipped reward files. `rewardlab-rewards` owns the schema
//! (`rewards/src/schema.rs`) but depends on this crate, so the tests here
//! carry a copy; the CLI test `shipped_reward_files_check_clean_…` checks
//! every shipped file against the real one.

use crate::interval::Interval;
use crate::schema::{FeatureDecl, FeatureSchema, Role};

/// The rollout schema of `rewards/src/schema.rs`.
pub(crate) fn retrieval_schema() -> FeatureSchema {
    let unit = Interval::UNIT;
    let counts = Interval::NON_NEGATIVE;
    let levels = ["file", "lr", "func"];
    FeatureSchema::new()
        .with(
            FeatureDecl::number("Fb", unit, "F-beta at a level")
                .with_levels(&levels)
                .with_param("beta", 0.5, Interval::new(0.0, f64::INFINITY))
                .with_role(Role::Quality),
        )
        .with(FeatureDecl::number("P", unit, "precision").with_levels(&levels).with_role(Role::Quality))
        .with(FeatureDecl::number("R", unit, "recall").with_levels(&levels).with_role(Role::Quality))
        .with(FeatureDecl::number("F1", unit, "F1").with_levels(&levels).with_role(Role::Quality))
        .with(FeatureDecl::number("c", Interval::new(0.0, 8.0), "calls per turn").with_role(Role::Efficiency))
        .with(FeatureDecl::number("C", counts, "tool calls").integer().with_role(Role::Efficiency))
        .with(
            FeatureDecl::number("T", Interval::new(1.0, f64::INFINITY), "turns").integer().with_role(Role::Efficiency),
        )
        .with(FeatureDecl::number("e", unit, "tool efficiency").with_role(Role::Efficiency))
        .with(FeatureDecl::number("len", counts, "completion tokens").integer().with_role(Role::Length))
        .with(FeatureDecl::number("valid", unit, "answer parsed").integer().with_role(Role::Quality))
        .with(FeatureDecl::number("truncated", unit, "ran out").integer())
}

/// The shipped reward files (`rewards/*.reward`), by name, in name order.
pub(crate) const SHIPPED: [(&str, &str); 9] = [
    ("codegrep_v1", include_str!("../../rewards/codegrep_v1.reward")),
    ("codegrep_v2", include_str!("../../rewards/codegrep_v2.reward")),
    ("codegrep_v3", include_str!("../../rewards/codegrep_v3.reward")),
    ("dr_grpo", include_str!("../../rewards/dr_grpo.reward")),
    ("fusesearch_f1", include_str!("../../rewards/fusesearch_f1.reward")),
    ("fusesearch_f1_plus_e", include_str!("../../rewards/fusesearch_f1_plus_e.reward")),
    ("fusesearch_f1_times_e", include_str!("../../rewards/fusesearch_f1_times_e.reward")),
    ("grpo", include_str!("../../rewards/grpo.reward")),
    ("rloo", include_str!("../../rewards/rloo.reward")),
];

/// A shipped reward file's text.
pub(crate) fn shipped(name: &str) -> &'static str {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).expect("a shipped file")
}
