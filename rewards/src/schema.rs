//! The rollout features a reward file may read, registered in the DSL's
//! feature schema with their declared ranges (see `shared/reward-language.md`),
//! and the lint texts that cite the seeds: the DSL's lints speak only of
//! roles, so the history of a pattern (which paper's reward did this, what it
//! cost) is supplied here, beside the features it names.

use rewardlab_dsl::Interval;
use rewardlab_dsl::schema::{FeatureDecl, FeatureSchema, LintCase, Role};

/// Retrieval levels of `Fb`, `P`, `R` and `F1`.
pub const LEVELS: [&str; 3] = ["file", "lr", "func"];

/// The default β of `Fb(level)`: precision-biased, as in both seeds.
pub const DEFAULT_BETA: f64 = 0.5;

/// Help for `reward` scaled as a whole by an efficiency or length factor.
const REWARD_SCALED_HELP: &str = "apply the discount at the advantage layer instead, e.g. `advantage = adv * ...`; \
                                  a bool gate such as `mask(c > 0)` is fine in `reward`";

/// What CodeGrep's seed measured when its v1 reward did exactly that.
const REWARD_SCALED_NOTE: &str = "CodeGrep v1 (seed 000) scaled its reward by 1/max(1, c/4) this way: KL drift rose \
                                  about 3.4x and downstream efficiency did not improve; v2 moved the discount to the \
                                  advantage layer";

/// Help for one term of `reward` scaled by efficiency: FuseSearch's bonus is the known intended case.
const TERM_SCALED_HELP: &str = "if a bonus for efficiency is intended (FuseSearch's `gamma * (F1 * e)`), this records \
                                that choice; if it should only discount the update, scale at the advantage layer: \
                                `advantage = adv * ...`";

/// What a rollout that did nothing looks like to the features: no tool call
/// (so `c`, `C` and `e` are 0) and no answer (so `valid` is 0 and every
/// answer-derived score is 0, the predicted sets being empty).
const IDLE: &str = "made no tool call and gave no answer";

/// The reports behind the `idle-outranks` lint.
const IDLE_NOTE: &str = "TRL PRs #6427/#6430: a default reward of 0 for \"never answered\" gave do-nothing rollouts a \
                         positive advantage over try-and-fail siblings; prime-rl PR #3376: an ungated length penalty \
                         made failing fast the winning strategy";

/// Help for a `reward` constant within every group, naming the feature most rewards start from.
const CONSTANT_REWARD_HELP: &str = "make the reward depend on the rollout, e.g. on `Fb(file)`";

/// The step metrics an `alert` may read: what the trainer reports once per
/// training step, by name, with the range each can take and what it is. The
/// trainer (`rewardlab_framework::engine`) supplies the values; a test there
/// checks that it knows every name declared here.
pub const STEP_METRICS: [(&str, Interval, &str); 16] = [
    ("step.kl", Interval::REAL, "mean KL estimate per unit against the reference (the configured estimator)"),
    ("step.entropy", Interval::NON_NEGATIVE, "mean of the policy's per-episode mean unit entropy"),
    ("step.clip_ratio", Interval::UNIT, "share of units whose gradient the ratio clip removed"),
    ("step.grad_norm", Interval::NON_NEGATIVE, "global gradient norm before clipping"),
    ("step.loss", Interval::REAL, "the loss, mean over the step's optimiser updates"),
    ("step.lr", Interval::NON_NEGATIVE, "the scheduled learning rate"),
    ("step.units", Interval::NON_NEGATIVE, "mean units (decisions or tokens) per rollout"),
    ("step.turns", Interval { lo: 1.0, hi: f64::INFINITY }, "mean turns per rollout, `batch.mean(T)`"),
    ("step.calls", Interval::NON_NEGATIVE, "mean tool calls per rollout, `batch.mean(C)`"),
    ("step.calls_per_turn", Interval { lo: 0.0, hi: 8.0 }, "mean calls per turn, `batch.mean(c)`"),
    ("step.completion_len", Interval::NON_NEGATIVE, "mean completion tokens, `batch.mean(len)`"),
    ("step.valid_rate", Interval::UNIT, "share of rollouts whose answer parsed, `batch.mean(valid)`"),
    ("step.truncated_rate", Interval::UNIT, "share of rollouts cut short, `batch.mean(truncated)`"),
    ("step.zero_std_groups", Interval::UNIT, "share of groups whose rewards are all equal"),
    ("step.tool_errors", Interval::NON_NEGATIVE, "tool calls of the step that ended in an error result"),
    ("step.tool_timeouts", Interval::NON_NEGATIVE, "tool calls of the step that timed out"),
];

/// The schema every rewardlab reward file is checked against.
pub fn feature_schema() -> FeatureSchema {
    let mut schema = features();
    for (name, range, doc) in STEP_METRICS {
        schema = schema.with_metric(name, range, doc);
    }
    schema
}

/// A leveled quality feature in [0, 1] scoring the predicted set against the target set.
fn set_score(name: &str, what: &str) -> FeatureDecl {
    FeatureDecl::number(name, Interval::UNIT, &format!("{what} of predicted vs target sets at a level"))
        .with_levels(&LEVELS)
        .with_role(Role::Quality)
}

fn features() -> FeatureSchema {
    let unit = Interval::UNIT;
    let counts = Interval::NON_NEGATIVE;
    FeatureSchema::new()
        .with(
            FeatureDecl::number("Fb", unit, "F-beta of predicted vs target sets at a level; beta defaults to 0.5")
                .with_levels(&LEVELS)
                .with_param("beta", DEFAULT_BETA, Interval::new(0.0, f64::INFINITY))
                .with_role(Role::Quality),
        )
        .with(set_score("P", "precision"))
        .with(set_score("R", "recall"))
        .with(set_score("F1", "F1"))
        .with(
            FeatureDecl::number("c", Interval::new(0.0, 8.0), "average tool calls per turn, C / T")
                .with_role(Role::Efficiency),
        )
        .with(
            FeatureDecl::number("C", counts, "tool calls issued in the rollout").integer().with_role(Role::Efficiency),
        )
        .with(
            FeatureDecl::number("T", Interval::new(1.0, f64::INFINITY), "turns taken, the answer turn included")
                .integer()
                .with_role(Role::Efficiency),
        )
        .with(
            FeatureDecl::number("e", unit, "tool efficiency: mean share of new entities per call")
                .with_role(Role::Efficiency),
        )
        .with(
            FeatureDecl::number("len", counts, "completion tokens generated by the policy")
                .integer()
                .with_role(Role::Length),
        )
        .with(
            FeatureDecl::number("valid", unit, "1 when the final answer parsed against the answer schema, else 0")
                .integer()
                .with_role(Role::Quality),
        )
        .with(
            FeatureDecl::number(
                "truncated",
                unit,
                "1 when the rollout ran out of turns or tokens without an answer, else 0",
            )
            .integer(),
        )
        .with_lint_help(LintCase::RewardScaled, REWARD_SCALED_HELP)
        .with_lint_note(LintCase::RewardScaled, REWARD_SCALED_NOTE)
        .with_lint_help(LintCase::TermScaled, TERM_SCALED_HELP)
        .with_lint_help(LintCase::ConstantReward, CONSTANT_REWARD_HELP)
        .with_idle_case(
            IDLE,
            &[("c", 0.0), ("C", 0.0), ("e", 0.0), ("valid", 0.0), ("Fb", 0.0), ("P", 0.0), ("R", 0.0), ("F1", 0.0)],
        )
        .with_lint_note(LintCase::IdleOutranks, IDLE_NOTE)
}
