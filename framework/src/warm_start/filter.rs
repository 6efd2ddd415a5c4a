//! Seed 002's joint filter: a trajectory is kept only when its F1 ≥ ρ_F and its tool
//! efficiency e ≥ ρ_e, both measured by the reward language's own features (`F1(file)` and
//! `e`) on the rollout record the trajectory makes, so the filter and the rewards can never
//! disagree about what a trajectory scored.

use rewardlab_dsl::FeatureRef;
use rewardlab_rewards::rollout::{Rollout, Selection};
use rewardlab_rewards::{FeatureOptions, feature_schema, features::feature_value, parse_answer};

use super::WarmStartError;
use super::scripted::Trajectory;
use crate::engine::EngineTask;

/// What the joint filter looks at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrajectoryScore {
    /// `F1(file)` of the answer against the task's target files.
    pub f1: f64,
    /// Tool efficiency `e`.
    pub e: f64,
    /// Whether the answer parsed under the strict answer schema.
    pub valid: bool,
}

/// Thresholds ρ_F and ρ_e.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointFilter {
    /// ρ_F: the least `F1(file)` a kept trajectory has, in [0, 1].
    pub rho_f: f64,
    /// ρ_e: the least tool efficiency `e` a kept trajectory has, in [0, 1].
    pub rho_e: f64,
}

impl JointFilter {
    /// Both thresholds met (and the answer valid: an invalid one predicted nothing).
    pub fn keeps(&self, score: &TrajectoryScore) -> bool {
        score.valid && score.f1 >= self.rho_f && score.e >= self.rho_e
    }
}

/// The rollout record of a trajectory, as the GRPO engine would log it: the answer parsed
/// strictly, the calls with the entities they showed, the answer turn last.
pub fn record(trajectory: &Trajectory, task: &EngineTask) -> Rollout {
    let parsed = parse_answer(&trajectory.answer).ok();
    let valid = parsed.is_some();
    let predicted =
        parsed.map(|a| Selection { files: Some(a.files), line_ranges: Some(a.line_ranges), functions: a.functions });
    Rollout {
        group: task.id.clone(),
        predicted,
        target: Some(task.target.clone()),
        turns: Some(trajectory.logged_turns()),
        completion_tokens: None,
        valid: Some(valid),
        truncated: Some(false),
    }
}

/// Scores a trajectory with the reward features `F1(file)` and `e`.
pub fn score(trajectory: &Trajectory, task: &EngineTask) -> Result<TrajectoryScore, WarmStartError> {
    let rollout = record(trajectory, task);
    let schema = feature_schema();
    let feature = |name: &str, level: Option<&str>| {
        let decl = schema.get(name).expect("the reward schema declares F1 and e");
        FeatureRef::new(decl, level, Vec::new())
    };
    let options = FeatureOptions { source: "the scripted searcher".to_owned(), ..FeatureOptions::default() };
    let value = |f: &FeatureRef| {
        feature_value(f, &rollout, &options)
            .map_err(|source| WarmStartError::Feature { task: task.id.clone(), source: Box::new(source) })
    };
    Ok(TrajectoryScore {
        f1: value(&feature("F1", Some("file")))?,
        e: value(&feature("e", None))?,
        valid: rollout.valid == Some(true),
    })
}
