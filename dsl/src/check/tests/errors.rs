//! One test per error the checker reports: code, message, span and hint.

use super::{Seen, check_text, only_error, seen};

fn err(code: &'static str, message: &str, at: &str, help: &str) -> Seen {
    Seen { code, message: message.to_string(), at: at.to_string(), help: help.to_string() }
}

#[test]
fn missing_reward_points_at_the_start_of_the_file() {
    let e = only_error("adv = 1\n");
    assert_eq!(e.code, "missing-reward");
    assert_eq!(e.message, "the file defines no `reward`");
    assert_eq!(e.at, "");
}

#[test]
fn unknown_definition_suggests_let_and_the_close_name() {
    let e = only_error("rewrd = Fb(file)\n");
    assert_eq!(e.code, "unknown-definition");
    assert_eq!(e.at, "rewrd");
    assert!(e.help.contains("did you mean `reward`?"), "{}", e.help);
    assert!(e.help.contains("`let rewrd = ...`"), "{}", e.help);
}

#[test]
fn duplicate_definitions_point_at_the_second_and_note_the_first() {
    let text = "reward = Fb(file)\nreward = Fb(lr)\n";
    let (_, diags) = check_text(text);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].code, "duplicate-definition");
    assert_eq!(diags[0].span.start, 18, "the second `reward`");
    assert_eq!(diags[0].message, "`reward` is defined twice");
    assert_eq!(diags[0].notes, ["the first definition, `reward = Fb(file)`, is the one checked"]);
    let (_, diags) = check_text("param s = 0.5\nlet s = 2\nreward = s\n");
    assert_eq!((diags[0].code, diags[0].span.start), ("duplicate-definition", 18));
    assert_eq!(diags[0].notes, ["the first definition, `param s = 0.5`, is the one checked"]);
}

#[test]
fn lets_and_params_must_not_shadow() {
    assert_eq!(
        only_error("let c = 1\nreward = c\n"),
        err("shadowed-name", "the let `c` hides a feature of that name", "c", "rename the let, e.g. `c_let`")
    );
    assert_eq!(
        only_error("param max = 1\nreward = Fb(file)\n").message,
        "the param `max` hides a function of that name"
    );
    assert_eq!(
        only_error("let adv = 1\nreward = Fb(file)\n").message,
        "the let `adv` hides a definition of the language of that name"
    );
}

#[test]
fn unknown_names_suggest_close_names_and_case_slips() {
    assert_eq!(
        only_error("let score = Fb(file)\nreward = scroe\n"),
        err("unknown-name", "unknown name `scroe`", "scroe", "did you mean `score`?")
    );
    assert_eq!(only_error("reward = Fb(file) * t\n").help, "did you mean `T`?");
    assert_eq!(
        only_error("reward = fb(file)\n"),
        err("unknown-function", "unknown function `fb`", "fb", "did you mean `Fb`?")
    );
    assert_eq!(only_error("reward = Fbeta(file)\n").help, "did you mean `Fb`?");
    assert_eq!(only_error("reward = sqr(c)\n").help, "did you mean `sqrt`?");
    assert_eq!(only_error("reward = group.maen(c)\n").help, "did you mean `group.mean`?");
    assert_eq!(only_error("reward = rewrd\n").help, "did you mean `reward`?");
}

#[test]
fn leveled_features_need_a_known_level_and_literal_arguments_in_range() {
    assert_eq!(
        only_error("reward = Fb(files)\n"),
        err(
            "unknown-level",
            "`Fb` has no level `files`",
            "files",
            "did you mean `file`? (the levels are `file`, `lr`, `func`)"
        )
    );
    let e = only_error("reward = Fb\n");
    assert_eq!((e.code, e.message.as_str(), e.at.as_str()), ("missing-level", "`Fb` needs a level", "Fb"));
    assert_eq!(only_error("reward = Fb()\n").code, "missing-level");
    assert_eq!(
        only_error("reward = Fb(file, -1)\n"),
        err("feature-arg", "`beta` of `Fb` must lie in [0, inf], but it is -1", "-1", "")
    );
    assert_eq!(only_error("param b = 1\nreward = Fb(file, b)\n").message, "`beta` of `Fb` must be a number literal");
    assert_eq!(only_error("reward = Fb(file, 1, 2)\n").code, "arity");
    assert_eq!(only_error("reward = P(file, 1)\n").code, "arity");
    assert_eq!(only_error("reward = Fb(2)\n").code, "unknown-level");
    assert_eq!(
        only_error("reward = c(1)\n"),
        err("feature-not-callable", "`c` is a feature, not a function", "c(1)", "write `c` without arguments")
    );
}

#[test]
fn feature_keys_fill_defaults_and_are_listed_once() {
    let (program, diags) = check_text("reward = Fb(file) + Fb(file, 0.5) + Fb(file, 1) + Fb(lr) + c * c\n");
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:#?}");
    let program = program.expect("checks");
    let keys: Vec<&str> = program.features.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["Fb(file)", "Fb(file, 1)", "Fb(lr)", "c"]);
    assert_eq!(program.features[0].args, [0.5]);
    assert_eq!(program.features[1].args, [1.0]);
    assert_eq!(program.features[0].level.as_deref(), Some("file"));
}

#[test]
fn function_arity_is_checked() {
    let cases = [
        ("reward = min(c)\n", "`min` takes at least 2 arguments, but 1 is given"),
        ("reward = clip(c, 1)\n", "`clip` takes 3 arguments, but 2 are given"),
        ("reward = sqrt(c, 1)\n", "`sqrt` takes 1 argument, but 2 are given"),
        ("reward = if(c > 1, 1)\n", "`if` takes 3 arguments, but 2 are given"),
        ("reward = mask()\n", "`mask` takes 1 argument, but 0 are given"),
        ("reward = Fb(file)\nadvantage = adv * group.count(c)\n", "`group.count` takes no arguments, but 1 is given"),
        ("reward = Fb(file)\nadvantage = adv * group.mean()\n", "`group.mean` takes 1 argument, but 0 are given"),
    ];
    for (text, message) in cases {
        let e = only_error(text);
        assert_eq!((e.code, e.message.as_str()), ("arity", message), "{text}");
    }
}

#[test]
fn batch_rank_does_not_exist() {
    assert_eq!(
        only_error("reward = Fb(file)\nadv = batch.rank(reward)\n"),
        err(
            "unknown-function",
            "`batch.rank` does not exist",
            "batch.rank",
            "ranks are taken within a group: `group.rank(x)`"
        )
    );
}

#[test]
fn values_and_functions_are_not_interchangeable() {
    assert_eq!(only_error("let s = Fb(file)\nreward = s(1)\n").code, "not-callable");
    assert_eq!(only_error("reward = Fb(file)\nadvantage = adv(1)\n").code, "not-callable");
    assert_eq!(only_error("reward = min\n").code, "function-as-value");
    assert_eq!(only_error("reward = group\n").code, "function-as-value");
}

const BOOL_AS_NUMBER: &str = "a bool is used as a number; wrap it in `mask(...)`";
const NUMBER_AS_BOOL: &str = "a number is used as a bool; compare it, e.g. `c > 0`";

#[test]
fn bools_are_not_numbers() {
    let e = only_error("reward = Fb(file) * (c > 0)\n");
    assert_eq!((e.code, e.message.as_str()), ("type-mismatch", BOOL_AS_NUMBER));
    assert!(e.at.contains("c > 0"), "{}", e.at);
    assert!(e.help.starts_with("`*` takes numbers"), "{}", e.help);
    let e = only_error("reward = c > 0\n");
    assert_eq!((e.message.as_str(), e.at.as_str()), (BOOL_AS_NUMBER, "c > 0"));
    assert_eq!(only_error("reward = -(c > 0)\n").message, BOOL_AS_NUMBER);
    assert_eq!(only_error("reward = sqrt(c > 0)\n").message, BOOL_AS_NUMBER);
    assert_eq!(only_error("reward = Fb(file)\nadv = group.mean(reward > 0)\n").message, BOOL_AS_NUMBER);
    assert_eq!(only_error("reward = Fb(file)\ncheck (c > 0) < 1\n").message, BOOL_AS_NUMBER);
}

#[test]
fn numbers_are_not_bools() {
    let e = only_error("reward = mask(c)\n");
    assert_eq!((e.code, e.at.as_str()), ("type-mismatch", "c"));
    assert!(e.message.starts_with("`mask` takes a bool"), "{}", e.message);
    let e = only_error("reward = if(c, 1, 0)\n");
    assert_eq!((e.message.as_str(), e.at.as_str()), (NUMBER_AS_BOOL, "c"));
    assert_eq!(only_error("reward = mask(c > 0 && c)\n").message, NUMBER_AS_BOOL);
    assert_eq!(only_error("reward = mask(!c)\n").message, NUMBER_AS_BOOL);
    let e = only_error("reward = Fb(file)\ncheck reward\n");
    assert_eq!((e.message.as_str(), e.at.as_str(), e.help.as_str()), (NUMBER_AS_BOOL, "reward", "`check` takes bools"));
}

#[test]
fn if_branches_share_a_type_and_bools_compare_with_bools() {
    let e = only_error("reward = if(c > 0, 1, c > 1)\n");
    assert_eq!(
        (e.code, e.message.as_str(), e.at.as_str()),
        ("type-mismatch", "the branches of `if` differ: a number and a bool", "c > 1")
    );
    let (program, diags) = check_text("reward = mask((c > 0) == (Fb(file) > 0))\n");
    assert!(program.is_some(), "{diags:#?}");
    assert_eq!(only_error("reward = mask((c > 0) == 1)\n").message, BOOL_AS_NUMBER);
}

#[test]
fn reading_the_advantage_layer_from_reward_names_the_chain() {
    let e = only_error("let scaled = adv * 2\nreward = scaled\n");
    assert_eq!(e.code, "layering");
    assert_eq!(e.message, "the reward layer reads the advantage layer: `reward` reads `scaled`, which reads `adv`");
    assert_eq!(e.at, "scaled");
    let e = only_error("reward = Fb(file) * advantage\n");
    assert_eq!(
        (e.message.as_str(), e.at.as_str()),
        ("the reward layer reads the advantage layer: `reward` reads `advantage`", "advantage")
    );
    let e = only_error("let a = adv\nlet b = a + 1\nreward = b * Fb(file)\n");
    assert_eq!(
        e.message,
        "the reward layer reads the advantage layer: `reward` reads `b`, which reads `a`, which reads `adv`"
    );
    // A let reading `reward` is in the advantage layer, so `reward` cannot read it.
    let e = only_error("let r2 = reward * 2\nreward = r2\n");
    assert_eq!(e.message, "the reward layer reads the advantage layer: `reward` reads `r2`, which reads `reward`");
}

#[test]
fn cycles_are_named_with_every_link() {
    let text = "let a = b + 1\nlet b = a * 2\nreward = a\n";
    let (program, diags) = check_text(text);
    assert!(program.is_none());
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    assert_eq!((d.code, d.message.as_str()), ("cycle", "definitions read each other in a cycle: a -> b -> a"));
    assert_eq!(&text[d.span.range()], "a", "the reference that closes the cycle");
    assert_eq!(d.span.start, 22);
    assert_eq!(d.notes, ["`a` reads `b`"]);
    assert_eq!(only_error("reward = reward + 1\n").message, "`reward` is defined in terms of itself");
    assert_eq!(
        only_error("reward = Fb(file)\nadv = advantage\n").message,
        "definitions read each other in a cycle: adv -> advantage -> adv"
    );
}

#[test]
fn a_check_intervals_prove_false_is_an_error() {
    let text = "reward = Fb(file)\ncheck reward > 1\n";
    let e = only_error(text);
    assert_eq!((e.code, e.at.as_str()), ("check-always-false", "check reward > 1"));
}

#[test]
fn one_mistake_one_diagnostic() {
    // The unknown name poisons its type: no type error piles on.
    let text = "reward = mask(cc > 0) * unknown\n";
    let (_, diags) = check_text(text);
    let seen: Vec<Seen> = diags.iter().map(|d| seen(text, d)).collect();
    assert_eq!(seen.iter().map(|s| s.code).collect::<Vec<_>>(), ["unknown-name", "unknown-name"], "{seen:#?}");
}
