//! The lints, on small files and on the shipped reward files.

use super::{SHIPPED, check_with, codes, schema, schema_with_difficulty, shipped, warnings, warnings_with};

#[test]
fn shipped_files_check_without_errors() {
    for (name, text) in SHIPPED {
        let (program, diags) = check_with(text, &schema());
        assert!(program.is_some(), "{name}: {diags:#?}");
        assert!(diags.iter().all(|d| !d.is_error()), "{name}: {diags:#?}");
    }
}

#[test]
fn codegrep_v1_draws_reward_layer_scaling_at_its_divisor() {
    let ws = warnings(shipped("codegrep_v1"));
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "max(1, c / 4)");
    assert_eq!(
        ws[0].message,
        "`reward` is divided by a factor of the efficiency feature `c`, which varies within a group: it rescales \
         the group's rewards and distorts GRPO's advantages"
    );
    assert!(ws[0].help.contains("`advantage = adv * ...`"), "{}", ws[0].help);
    let (_, diags) = check_with(shipped("codegrep_v1"), &schema());
    assert!(diags[0].notes[0].contains("3.4x"), "{:?}", diags[0].notes);
}

#[test]
fn gated_and_advantage_layer_discounts_do_not_warn() {
    for name in ["codegrep_v2", "codegrep_v3", "grpo", "dr_grpo", "rloo", "fusesearch_f1", "fusesearch_f1_plus_e"] {
        let ws = warnings(shipped(name));
        assert!(ws.is_empty(), "{name}: {ws:#?}");
    }
    assert!(warnings("reward = Fb(file) * if(c > 0, 1, 0)\n").is_empty());
    assert!(warnings("let keep = mask(c > 0 && len < 4000)\nreward = Fb(file) * keep\n").is_empty());
}

#[test]
fn fusesearch_bonus_term_warns_as_a_term_not_as_the_whole_reward() {
    let ws = warnings(shipped("fusesearch_f1_times_e"));
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "e");
    assert!(
        ws[0].message.starts_with("a term of `reward` is scaled by the efficiency feature `e`"),
        "{}",
        ws[0].message
    );
    assert!(ws[0].help.contains("FuseSearch"), "{}", ws[0].help);
}

#[test]
fn scaling_is_found_through_lets_and_for_length() {
    // The let is a quotient, so its divisor is a factor of the reward: flagged where it is written.
    let ws = warnings("let s = 1 / max(1, c / 4)\nreward = Fb(file) * s\n");
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "max(1, c / 4)");
    let ws = warnings("let s = sqrt(min(c / 4, 1))\nreward = Fb(file) * s\n");
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert_eq!(ws[0].at, "s");
    let ws = warnings("reward = Fb(file) / (1 + len / 1000)\n");
    assert_eq!(codes(&ws), ["reward-layer-scaling"], "{ws:#?}");
    assert!(ws[0].message.contains("length feature `len`"), "{}", ws[0].message);
    // A constant times an efficiency feature is an additive term, not a scale.
    assert!(warnings("reward = Fb(file) + 0.1 * e\n").is_empty());
}

#[test]
fn denominators_that_may_be_zero_warn() {
    let ws = warnings("reward = Fb(file) / P(file)\n");
    assert_eq!(codes(&ws), ["denominator-contains-zero"], "{ws:#?}");
    assert_eq!(
        (ws[0].at.as_str(), ws[0].message.as_str()),
        ("P(file)", "this denominator may be 0: its range is [0, 1]")
    );
    assert!(warnings("reward = Fb(file) / (P(file) + 1)\n").is_empty());
    // Dividing by an efficiency feature is both a scale and a possible division by 0.
    let ws = warnings("reward = Fb(file) / c\n");
    assert_eq!(codes(&ws), ["denominator-contains-zero", "reward-layer-scaling"], "{ws:#?}");
    // GRPO's `std + 1e-4` and RLOO's `count - 1` (groups of at least 2) are safe.
    assert!(
        warnings("reward = Fb(file)\nadv = (reward - group.mean(reward)) / (group.std(reward) + 1e-4)\n").is_empty()
    );
    assert!(warnings(shipped("rloo")).is_empty());
    let ws = warnings("reward = Fb(file)\nadv = (reward - group.mean(reward)) / group.std(reward)\n");
    assert_eq!(codes(&ws), ["denominator-contains-zero"], "{ws:#?}");
    assert_eq!(ws[0].at, "group.std(reward)");
}

#[test]
fn sqrt_and_log_domains() {
    let ws = warnings("reward = sqrt(Fb(file) - 0.5)\n");
    assert_eq!(codes(&ws), ["sqrt-domain"], "{ws:#?}");
    assert_eq!(ws[0].at, "Fb(file) - 0.5");
    let ws = warnings("reward = log(Fb(file))\n");
    assert_eq!(codes(&ws), ["log-domain"], "{ws:#?}");
    assert_eq!(ws[0].message, "`log` of a value that may be 0 or negative: its range is [0, 1]");
    assert!(warnings("reward = log(Fb(file) + 1) + sqrt(c)\n").is_empty());
}

#[test]
fn constant_terms_cancel_under_group_centering() {
    let ws = warnings("reward = Fb(file) + 0.5\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
    assert_eq!(ws[0].at, "0.5");
    let ws = warnings("param bonus = 0.2\nreward = Fb(file) - group.mean(Fb(file)) + bonus\n");
    assert_eq!(codes(&ws), ["cancels-under-centering", "cancels-under-centering"], "{ws:#?}");
    assert_eq!(ws[0].at, "group.mean(Fb(file))");
    assert_eq!(ws[1].at, "bonus");
    let ws = warnings_with("reward = Fb(file) + difficulty\n", &schema_with_difficulty());
    assert_eq!((codes(&ws)[0], ws[0].at.as_str()), ("cancels-under-centering", "difficulty"));
    let ws = warnings("reward = 1\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
    assert!(ws[0].message.contains("every advantage is 0"), "{}", ws[0].message);
    // Dr. GRPO and RLOO centre too.
    let ws = warnings("reward = Fb(file) + 1\nadv = reward - group.mean(reward)\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
    let ws = warnings("reward = Fb(file) + 1\nadv = reward - (group.sum(reward) - reward) / (group.count() - 1)\n");
    assert_eq!(codes(&ws), ["cancels-under-centering"], "{ws:#?}");
}

#[test]
fn constant_terms_matter_when_the_estimator_does_not_centre() {
    assert!(warnings("reward = Fb(file) + 0.5\nadv = reward\n").is_empty());
    assert!(warnings("reward = Fb(file) + 0.5\nadv = reward / (group.mean(reward) + 1)\n").is_empty());
}

#[test]
fn unused_lets_and_params_warn_but_those_used_by_checks_do_not() {
    let ws = warnings("let spare = c * 2\nreward = Fb(file)\n");
    assert_eq!((codes(&ws), ws[0].at.as_str()), (vec!["unused-let"], "spare"));
    assert!(warnings("let ratio = c / 8\nreward = Fb(file)\ncheck ratio <= 1\n").is_empty());
    let ws = warnings("param gamma = 0.5\nreward = Fb(file)\n");
    assert_eq!((codes(&ws), ws[0].at.as_str()), (vec!["unused-param"], "param gamma = 0.5"));
    assert!(warnings("param gamma = 0.5\nreward = Fb(file)\ncheck reward <= 1 + gamma\n").is_empty());
}
