//! A feature schema equal to `rewards/src/schema.rs` (this crate cannot
//! depend on `rewardlab-rewards`), so the shipped reward files check here.

use crate::interval::Interval;
use crate::schema::{FeatureDecl, FeatureSchema, Role};

pub(super) fn schema() -> FeatureSchema {
    let unit = Interval::UNIT;
    let counts = Interval::NON_NEGATIVE;
    let levels = ["file", "lr", "func"];
    FeatureSchema::new()
        .with(
            FeatureDecl::number("Fb", unit, "F-beta")
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

/// A value of feature `key` for row `i`: exactly representable in `f32`
/// (a multiple of 1/8, or an integer), inside the feature's declared range,
/// with repeats so that groups have ties and constant stretches.
pub(super) fn value(key: &str, i: usize, salt: u64) -> f64 {
    let h = (i as u64 ^ salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
    let name = key.split('(').next().unwrap_or(key);
    match name {
        "c" => (h % 17) as f64 / 2.0,
        "C" | "len" => (h % 40) as f64,
        "T" => 1.0 + (h % 4) as f64,
        "valid" | "truncated" => (h % 2) as f64,
        "x" => (h % 33) as f64 / 4.0 - 4.0,
        _ => (h % 9) as f64 / 8.0,
    }
}
