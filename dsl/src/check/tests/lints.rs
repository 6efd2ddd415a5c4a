//! The lints, on small files and on the sample reward files.

use crate::schema::LintCase;

use super::{SAMPLES, check_with, codes, sample, schema, schema_with_difficulty, warnings, warnings_with};

#[test]
fn sample_files_check_without_errors() {
    for (name, text) in SAMPLES {
        let (program, diags) = check_with(text, &schema());
        assert!(program.is_some(), "{name}: {diags:#?}");
        assert!(diags.iter().all(|d| !d.is_error()), "{name}: {diags:#?}");
    }
}

#[test]
fn a_scaled_reward_draws_reward_layer_scaling_at_its_divisor() {
    let ws = warnings(sample("scaled"));
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "max(1, cost / 4)");
    assert_eq!(
        ws[0].message,
        "`reward` is divided by a factor of the efficiency feature `cost`, which varies within a group: it rescales \
         the group's rewards and distorts GRPO's advantages"
    );
    assert!(ws[0].help.contains("`advantage = adv * ...`"), "{}", ws[0].help);
    assert!(ws[0].help.contains("`mask(cost > 0)`"), "the generic help names the feature: {}", ws[0].help);
    let (_, diags) = check_with(sample("scaled"), &schema());
    assert!(diags[0].notes.is_empty(), "the lint cites nothing of its own: {:?}", diags[0].notes);
}

#[test]
fn the_schema_supplies_help_and_notes_per_lint_case() {
    let cited = schema()
        .with_lint_help(LintCase::RewardScaled, "discount at the advantage layer")
        .with_lint_note(LintCase::RewardScaled, "an earlier reward did this; it went badly")
        .with_lint_note(LintCase::RewardScaled, "a second note comes after the first")
        .with_lint_help(LintCase::UnusedLet, "drop it");
    let (_, diags) = check_with(sample("scaled"), &cited);
    assert_eq!(diags[0].code, LintCase::RewardScaled.code());
    assert_eq!(diags[0].help.as_deref(), Some("discount at the advantage layer"));
    assert_eq!(diags[0].notes, ["an earlier reward did this; it went badly", "a second note comes after the first"]);
    // The other case of the same code keeps its generic help.
    let ws = warnings_with(sample("bonus"), &cited);
    assert!(
        ws[0].help.starts_with("if a bonus for efficiency is intended, this records that choice"),
        "{}",
        ws[0].help
    );
    let ws = warnings_with("let spare = cost * 2\nreward = grade(word)\n", &cited);
    assert_eq!((codes(&ws), ws[0].help.as_str()), (vec!["unused-let"], "drop it"));
}

#[test]
fn gated_and_advantage_layer_discounts_do_not_warn() {
    for name in ["discounted", "gated", "grpo", "centred", "rloo", "weighted", "additive"] {
        let ws = warnings(sample(name));
        assert!(ws.is_empty(), "{name}: {ws:#?}");
    }
    assert!(warnings("reward = grade(word) * if(cost > 0, 1, 0)\n").is_empty());
    assert!(warnings("let keep = mask(cost > 0 && size < 4000)\nreward = grade(word) * keep\n").is_empty());
}

#[test]
fn a_bonus_term_warns_as_a_term_not_as_the_whole_reward() {
    let ws = warnings(sample("bonus"));
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "pace");
    assert!(
        ws[0].message.starts_with("a term of `reward` is scaled by the efficiency feature `pace`"),
        "{}",
        ws[0].message
    );
    assert!(ws[0].help.starts_with("if a bonus for efficiency is intended, this records"), "{}", ws[0].help);
}

#[test]
fn scaling_is_found_through_lets_and_for_length() {
    // The let is a quotient, so its divisor is a factor of the reward: flagged where it is written.
    let ws = warnings("let s = 1 / max(1, cost / 4)\nreward = grade(word) * s\n");
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "max(1, cost / 4)");
    let ws = warnings("let s = sqrt(min(cost / 4, 1))\nreward = grade(word) * s\n");
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "s");
    let ws = warnings("reward = grade(word) / (1 + size / 1000)\n");
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert!(ws[0].message.contains("length feature `size`"), "{}", ws[0].message);
    // A constant times an efficiency feature is an additive term, not a scale.
    assert!(warnings("reward = grade(word) + 0.1 * pace\n").is_empty());
}

#[test]
fn denominators_that_may_be_zero_warn() {
    let ws = warnings("reward = grade(word) / hits(word)\n");
    assert_eq!(codes(&ws), ["denominator-contains-zero"], "{ws:#?}");
    assert_eq!(
        (ws[0].at.as_str(), ws[0].message.as_str()),
        ("hits(word)", "this denominator may be 0: its range is [0, 1]")
    );
    assert!(warnings("reward = grade(word) / (hits(word) + 1)\n").is_empty());
    // Dividing by an efficiency feature is both a scale and a possible division by 0.
    let ws = warnings("reward = grade(word) / cost\n");
    assert_eq!(codes(&ws), ["denominator-contains-zero", "reward-layer-scaling"], "{ws:#?}");
    // GRPO's `std + 1e-4` and RLOO's `count - 1` (groups of at least 2) are safe.
    assert!(
        warnings("reward = grade(word)\nadv = (reward - group.mean(reward)) / (group.std(reward) + 1e-4)\n").is_empty()
    );
    assert!(warnings(sample("rloo")).is_empty());
    let ws = warnings("reward = grade(word)\nadv = (reward - group.mean(reward)) / group.std(reward)\n");
    assert_eq!(codes(&ws), ["denominator-contains-zero"], "{ws:#?}");
    assert_eq!(ws[0].at, "group.std(reward)");
}

#[test]
fn sqrt_and_log_domains() {
    let ws = warnings("reward = sqrt(grade(word) - 0.5)\n");
    assert_eq!(codes(&ws), ["sqrt-domain"], "{ws:#?}");
    assert_eq!(ws[0].at, "grade(word) - 0.5");
    let ws = warnings("reward = log(grade(word))\n");
    assert_eq!(codes(&ws), ["log-domain"], "{ws:#?}");
    assert_eq!(ws[0].message, "`log` of a value that may be 0 or negative: its range is [0, 1]");
    assert!(warnings("reward = log(grade(word) + 1) + sqrt(cost)\n").is_empty());
}

#[test]
fn constant_terms_cancel_under_group_centering() {
    let ws = warnings("reward = grade(word) + 0.5\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
    assert_eq!(ws[0].at, "0.5");
    let ws = warnings("param bonus = 0.2\nreward = grade(word) - group.mean(grade(word)) + bonus\n");
    assert_eq!(codes(&ws), ["cancels-under-centering", "cancels-under-centering"], "{ws:#?}");
    assert_eq!(ws[0].at, "group.mean(grade(word))");
    assert_eq!(ws[1].at, "bonus");
    let ws = warnings_with("reward = grade(word) + difficulty\n", &schema_with_difficulty());
    assert_eq!((codes(&ws)[0], ws[0].at.as_str()), ("cancels-under-centering", "difficulty"));
    let ws = warnings("reward = 1\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
    assert!(ws[0].message.contains("every advantage is 0"), "{}", ws[0].message);
    // Dr. GRPO and RLOO centre too.
    let ws = warnings("reward = grade(word) + 1\nadv = reward - group.mean(reward)\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
    let ws = warnings("reward = grade(word) + 1\nadv = reward - (group.sum(reward) - reward) / (group.count() - 1)\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
}

#[test]
fn constant_terms_matter_when_the_estimator_does_not_centre() {
    assert!(warnings("reward = grade(word) + 0.5\nadv = reward\n").is_empty());
    assert!(warnings("reward = grade(word) + 0.5\nadv = reward / (group.mean(reward) + 1)\n").is_empty());
}

#[test]
fn unused_lets_and_params_warn_but_those_used_by_checks_do_not() {
    let ws = warnings("let spare = cost * 2\nreward = grade(word)\n");
    assert_eq!((codes(&ws), ws[0].at.as_str()), (vec!["unused-let"], "spare"));
    assert!(warnings("let ratio = cost / 8\nreward = grade(word)\ncheck ratio <= 1\n").is_empty());
    let ws = warnings("param gamma = 0.5\nreward = grade(word)\n");
    assert_eq!((codes(&ws), ws[0].at.as_str()), (vec!["unused-param"], "param gamma = 0.5"));
    assert!(warnings("param gamma = 0.5\nreward = grade(word)\ncheck reward <= 1 + gamma\n").is_empty());
}

#[test]
fn an_overflow_from_bounded_inputs_warns() {
    let text = "reward = exp(1000 * grade(word))\n";
    let ws = warnings(text);
    assert_eq!(codes(&ws), ["overflow"], "{ws:#?}");
    assert_eq!(ws[0].at, "exp(1000 * grade(word))");
    assert_eq!(
        ws[0].message,
        "this value may overflow to infinity: its range is [1, inf] although its inputs are bounded"
    );
    assert!(ws[0].help.contains("`exp(min(x, 50))`"), "{}", ws[0].help);
    let ws = warnings("reward = grade(word) * 1e300 * 1e300\n");
    assert_eq!((codes(&ws), ws[0].at.as_str()), (vec!["overflow"], "grade(word) * 1e300 * 1e300"), "{ws:#?}");
    // Unbounded inputs, poles and bounded results are not overflows.
    for text in [
        "reward = grade(word) * moves\n",
        "reward = exp(grade(word))\n",
        "reward = grade(word) ^ 2 + cost ^ 0.5\n",
        "reward = grade(word) * mask(size > 0)\nadvantage = adv * 2\n",
    ] {
        assert!(!codes(&warnings(text)).contains(&"overflow"), "{text}: {:#?}", warnings(text));
    }
    let ws = warnings("reward = grade(word) ^ -1\n");
    assert!(!codes(&ws).contains(&"overflow"), "a pole is not an overflow: {ws:#?}");
}

/// The test schema with one way of doing nothing: no action, no effort, nothing achieved.
fn idle_schema() -> crate::schema::FeatureSchema {
    schema().with_idle_case(
        "did nothing",
        &[("moves", 0.0), ("cost", 0.0), ("pace", 0.0), ("ok", 0.0), ("grade", 0.0), ("hits", 0.0), ("found", 0.0)],
    )
}

#[test]
fn an_ungated_length_penalty_lets_an_idle_rollout_outrank_a_working_one() {
    let text = "reward = grade(word) - 0.001 * size\n";
    let (_, diags) = check_with(text, &idle_schema());
    let d = diags.iter().find(|d| d.code == "idle-outranks").unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(
        d.message,
        "a rollout that did nothing can get a higher advantage than a sibling whose quality is positive"
    );
    assert_eq!(&text[d.span.range()], "grade(word) - 0.001 * size");
    assert_eq!(
        d.notes[0],
        "in one group of two, the idle rollout (grade(word) = 0, size = 0) earns reward = 0, adv = 0.9998, and the \
         sibling (grade(word) = 0.001, size = 1000) earns reward = -0.999, adv = -0.9998"
    );
    assert!(d.notes[1].starts_with("shown by that pair; interval analysis"), "{}", d.notes[1]);
    assert!(d.help.as_deref().is_some_and(|h| h.contains("`if(grade(word) > 0, ..., 0)`")), "{:?}", d.help);
    // A default reward for doing nothing above what a weak rollout earns.
    let ws = warnings_with("reward = if(ok > 0, grade(word), 0.5)\n", &idle_schema());
    assert_eq!(codes(&ws), ["idle-outranks"], "{ws:#?}");
    // An estimator that ranks the lower reward higher inverts the question.
    let ws = warnings_with("reward = grade(word)\nadv = group.mean(reward) - reward\n", &idle_schema());
    assert_eq!(codes(&ws), ["idle-outranks"], "{ws:#?}");
    // The schema supplies the lint's history.
    let cited = idle_schema().with_lint_note(LintCase::IdleOutranks, "an earlier trainer defaulted to this");
    let (_, diags) = check_with(text, &cited);
    assert_eq!(diags[0].notes.last().map(String::as_str), Some("an earlier trainer defaulted to this"));
}

#[test]
fn idle_rollouts_that_cannot_outrank_draw_no_warning() {
    // `discounted` and `gated` (v2's and v3's shapes) scale `adv` by a factor that is 0 for an
    // idle rollout: they outrank at the advantage layer (the next test).
    for (name, text) in SAMPLES.iter().filter(|(name, _)| !matches!(*name, "discounted" | "gated")) {
        let ws = warnings_with(text, &idle_schema());
        assert!(!codes(&ws).contains(&"idle-outranks"), "{name}: {ws:#?}");
    }
    for text in [
        // Gated on quality: doing nothing earns the least.
        "reward = grade(word) * (1 - 0.001 * min(size, 1000))\n",
        "reward = if(grade(word) > 0, grade(word) - 0.001 * min(size, 100), -1)\n",
        // A masked baseline orders a group by reward as GRPO does.
        "reward = grade(word)\nadv = (reward - group.mean(reward, where = ok > 0)) / (group.std(reward, where = ok > 0) + 1e-4)\n",
        // An estimator the lint cannot follow: it says nothing rather than guess.
        "reward = grade(word) - 0.001 * size\nadv = reward * cost\n",
        "reward = grade(word) - 0.001 * size\nadv = group.rank(reward)\n",
    ] {
        let ws = warnings_with(text, &idle_schema());
        assert!(!codes(&ws).contains(&"idle-outranks"), "{text}: {ws:#?}");
    }
    // Without an idle case in the schema the lint has nothing to check.
    assert!(warnings("reward = grade(word) - 0.001 * size\n").is_empty());
}

#[test]
fn an_advantage_factor_that_is_zero_for_an_idle_rollout_lifts_it_above_a_weak_sibling() {
    let text = "reward = grade(word) * mask(moves > 0)\nadvantage = adv * sqrt(min(moves / 4, 1))\n";
    let (_, diags) = check_with(text, &idle_schema());
    let d = diags.iter().find(|d| d.code == "idle-outranks").unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(
        d.message,
        "a rollout that did nothing can get a higher `advantage` than a sibling whose quality is positive"
    );
    for name in ["discounted", "gated"] {
        let ws = warnings_with(sample(name), &idle_schema());
        assert_eq!(codes(&ws), ["idle-outranks"], "{name}, a sample of the same shape: {ws:#?}");
    }
    assert_eq!(&text[d.span.range()], "adv * sqrt(min(moves / 4, 1))");
    assert!(
        d.notes[0].starts_with("in one group of three, the idle rollout (grade(word) = 0, moves = 0"),
        "{}",
        d.notes[0]
    );
    assert!(d.help.as_deref().is_some_and(|h| h.contains("if(adv > 0, adv * FACTOR, adv)")), "{:?}", d.help);
    // Discounting only positive advantages keeps the penalty: no warning.
    let fixed = "reward = grade(word) * mask(moves > 0)\nadvantage = if(adv > 0, adv * sqrt(min(moves / 4, 1)), adv)\n";
    let ws = warnings_with(fixed, &idle_schema());
    assert!(!codes(&ws).contains(&"idle-outranks"), "{ws:#?}");
}
