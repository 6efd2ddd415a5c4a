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
    let e = only_error("rewrd = grade(word)\n");
    assert_eq!(e.code, "unknown-definition");
    assert_eq!(e.at, "rewrd");
    assert!(e.help.contains("did you mean `reward`?"), "{}", e.help);
    assert!(e.help.contains("`let rewrd = ...`"), "{}", e.help);
}

#[test]
fn duplicate_definitions_point_at_the_second_and_note_the_first() {
    let text = "reward = grade(word)\nreward = grade(line)\n";
    let (_, diags) = check_text(text);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].code, "duplicate-definition");
    assert_eq!(diags[0].span.start, 21, "the second `reward`");
    assert_eq!(diags[0].message, "`reward` is defined twice");
    assert_eq!(diags[0].notes, ["the first definition, `reward = grade(word)`, is the one checked"]);
    let (_, diags) = check_text("param s = 0.5\nlet s = 2\nreward = s\n");
    assert_eq!((diags[0].code, diags[0].span.start), ("duplicate-definition", 18));
    assert_eq!(diags[0].notes, ["the first definition, `param s = 0.5`, is the one checked"]);
}

#[test]
fn lets_and_params_must_not_shadow() {
    assert_eq!(
        only_error("let cost = 1\nreward = cost\n"),
        err("shadowed-name", "the let `cost` hides a feature of that name", "cost", "rename the let, e.g. `cost_let`")
    );
    assert_eq!(
        only_error("param max = 1\nreward = grade(word)\n").message,
        "the param `max` hides a function of that name"
    );
    assert_eq!(
        only_error("let adv = 1\nreward = grade(word)\n").message,
        "the let `adv` hides a definition of the language of that name"
    );
}

#[test]
fn unknown_names_suggest_close_names_and_case_slips() {
    assert_eq!(
        only_error("let score = grade(word)\nreward = scroe\n"),
        err("unknown-name", "unknown name `scroe`", "scroe", "did you mean `score`?")
    );
    assert_eq!(only_error("reward = grade(word) * Steps\n").help, "did you mean `steps`?");
    assert_eq!(
        only_error("reward = Grade(word)\n"),
        err("unknown-function", "unknown function `Grade`", "Grade", "did you mean `grade`?")
    );
    assert_eq!(only_error("reward = gradebeta(word)\n").help, "did you mean `grade`?");
    assert_eq!(only_error("reward = sqr(cost)\n").help, "did you mean `sqrt`?");
    assert_eq!(only_error("reward = group.maen(cost)\n").help, "did you mean `group.mean`?");
    assert_eq!(only_error("reward = rewrd\n").help, "did you mean `reward`?");
}

#[test]
fn leveled_features_need_a_known_level_and_literal_arguments_in_range() {
    assert_eq!(
        only_error("reward = grade(words)\n"),
        err(
            "unknown-level",
            "`grade` has no level `words`",
            "words",
            "did you mean `word`? (the levels are `word`, `line`, `page`)"
        )
    );
    let e = only_error("reward = grade\n");
    assert_eq!((e.code, e.message.as_str(), e.at.as_str()), ("missing-level", "`grade` needs a level", "grade"));
    assert_eq!(only_error("reward = grade()\n").code, "missing-level");
    assert_eq!(
        only_error("reward = grade(word, -1)\n"),
        err("feature-arg", "`beta` of `grade` must lie in [0, inf], but it is -1", "-1", "")
    );
    assert_eq!(
        only_error("param b = 1\nreward = grade(word, b)\n").message,
        "`beta` of `grade` must be a number literal"
    );
    assert_eq!(only_error("reward = grade(word, 1, 2)\n").code, "arity");
    assert_eq!(only_error("reward = hits(word, 1)\n").code, "arity");
    assert_eq!(only_error("reward = grade(2)\n").code, "unknown-level");
    assert_eq!(
        only_error("reward = cost(1)\n"),
        err("feature-not-callable", "`cost` is a feature, not a function", "cost(1)", "write `cost` without arguments")
    );
}

#[test]
fn feature_keys_fill_defaults_and_are_listed_once() {
    let (program, diags) =
        check_text("reward = grade(word) + grade(word, 0.5) + grade(word, 1) + grade(line) + cost * cost\n");
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:#?}");
    let program = program.expect("checks");
    let keys: Vec<&str> = program.features.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["grade(word)", "grade(word, 1)", "grade(line)", "cost"]);
    assert_eq!(program.features[0].args, [0.5]);
    assert_eq!(program.features[1].args, [1.0]);
    assert_eq!(program.features[0].level.as_deref(), Some("word"));
}

#[test]
fn function_arity_is_checked() {
    let cases = [
        ("reward = min(cost)\n", "`min` takes at least 2 arguments, but 1 is given"),
        ("reward = clip(cost, 1)\n", "`clip` takes 3 arguments, but 2 are given"),
        ("reward = sqrt(cost, 1)\n", "`sqrt` takes 1 argument, but 2 are given"),
        ("reward = if(cost > 1, 1)\n", "`if` takes 3 arguments, but 2 are given"),
        ("reward = mask()\n", "`mask` takes 1 argument, but 0 are given"),
        (
            "reward = grade(word)\nadvantage = adv * group.count(cost)\n",
            "`group.count` takes no arguments, but 1 is given",
        ),
        ("reward = grade(word)\nadvantage = adv * group.mean()\n", "`group.mean` takes 1 argument, but 0 are given"),
    ];
    for (text, message) in cases {
        let e = only_error(text);
        assert_eq!((e.code, e.message.as_str()), ("arity", message), "{text}");
    }
}

#[test]
fn batch_rank_does_not_exist() {
    assert_eq!(
        only_error("reward = grade(word)\nadv = batch.rank(reward)\n"),
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
    assert_eq!(only_error("let s = grade(word)\nreward = s(1)\n").code, "not-callable");
    assert_eq!(only_error("reward = grade(word)\nadvantage = adv(1)\n").code, "not-callable");
    assert_eq!(only_error("reward = min\n").code, "function-as-value");
    assert_eq!(only_error("reward = group\n").code, "function-as-value");
}

const BOOL_AS_NUMBER: &str = "a bool is used as a number; wrap it in `mask(...)`";
const NUMBER_AS_BOOL: &str = "a number is used as a bool; compare it, e.g. `x > 0`";

#[test]
fn bools_are_not_numbers() {
    let e = only_error("reward = grade(word) * (cost > 0)\n");
    assert_eq!((e.code, e.message.as_str()), ("type-mismatch", BOOL_AS_NUMBER));
    assert!(e.at.contains("cost > 0"), "{}", e.at);
    assert!(e.help.starts_with("`*` takes numbers"), "{}", e.help);
    let e = only_error("reward = cost > 0\n");
    assert_eq!((e.message.as_str(), e.at.as_str()), (BOOL_AS_NUMBER, "cost > 0"));
    assert_eq!(only_error("reward = -(cost > 0)\n").message, BOOL_AS_NUMBER);
    assert_eq!(only_error("reward = sqrt(cost > 0)\n").message, BOOL_AS_NUMBER);
    assert_eq!(only_error("reward = grade(word)\nadv = group.mean(reward > 0)\n").message, BOOL_AS_NUMBER);
    assert_eq!(only_error("reward = grade(word)\ncheck (cost > 0) < 1\n").message, BOOL_AS_NUMBER);
}

#[test]
fn numbers_are_not_bools() {
    let e = only_error("reward = mask(cost)\n");
    assert_eq!((e.code, e.at.as_str()), ("type-mismatch", "cost"));
    assert!(e.message.starts_with("`mask` takes a bool"), "{}", e.message);
    let e = only_error("reward = if(cost, 1, 0)\n");
    assert_eq!((e.message.as_str(), e.at.as_str()), (NUMBER_AS_BOOL, "cost"));
    assert_eq!(only_error("reward = mask(cost > 0 && cost)\n").message, NUMBER_AS_BOOL);
    assert_eq!(only_error("reward = mask(!cost)\n").message, NUMBER_AS_BOOL);
    let e = only_error("reward = grade(word)\ncheck reward\n");
    assert_eq!((e.message.as_str(), e.at.as_str(), e.help.as_str()), (NUMBER_AS_BOOL, "reward", "`check` takes bools"));
}

#[test]
fn if_branches_share_a_type_and_bools_compare_with_bools() {
    let e = only_error("reward = if(cost > 0, 1, cost > 1)\n");
    assert_eq!(
        (e.code, e.message.as_str(), e.at.as_str()),
        ("type-mismatch", "the branches of `if` differ: a number and a bool", "cost > 1")
    );
    let (program, diags) = check_text("reward = mask((cost > 0) == (grade(word) > 0))\n");
    assert!(program.is_some(), "{diags:#?}");
    assert_eq!(only_error("reward = mask((cost > 0) == 1)\n").message, BOOL_AS_NUMBER);
}

#[test]
fn reading_the_advantage_layer_from_reward_names_the_chain() {
    let e = only_error("let scaled = adv * 2\nreward = scaled\n");
    assert_eq!(e.code, "layering");
    assert_eq!(e.message, "the reward layer reads the advantage layer: `reward` reads `scaled`, which reads `adv`");
    assert_eq!(e.at, "scaled");
    let e = only_error("reward = grade(word) * advantage\n");
    assert_eq!(
        (e.message.as_str(), e.at.as_str()),
        ("the reward layer reads the advantage layer: `reward` reads `advantage`", "advantage")
    );
    let e = only_error("let a = adv\nlet b = a + 1\nreward = b * grade(word)\n");
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
        only_error("reward = grade(word)\nadv = advantage\n").message,
        "definitions read each other in a cycle: adv -> advantage -> adv"
    );
}

#[test]
fn a_check_intervals_prove_false_is_an_error() {
    let text = "reward = grade(word)\ncheck reward > 1\n";
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

#[test]
fn a_definition_that_is_never_finite_is_an_error() {
    let text = "reward = sqrt(-1)\n";
    assert_eq!(
        only_error(text),
        err(
            "never-finite",
            "`reward` is never finite: every value it can take is NaN or infinite",
            "sqrt(-1)",
            "interval analysis over the declared feature ranges shows this for every input (`sqrt` or `log` of a \
             value that is never positive, a division by 0, an overflow); every evaluation would fail",
        )
    );
    // The root of the fault is named once, not every definition that reads it.
    let e = only_error("let bad = log(0 - cost - 1)\nreward = grade(word) + bad * 2\n");
    assert_eq!((e.code, e.at.as_str()), ("never-finite", "log(0 - cost - 1)"));
    assert!(e.message.starts_with("the `let` `bad` is never finite"), "{}", e.message);
    for text in ["reward = grade(word) / 0\n", "reward = exp(1000) * grade(word)\n", "reward = log(0) + cost\n"] {
        assert_eq!(only_error(text).code, "never-finite", "{text}");
    }
    // A value that is NaN only for some inputs stays a warning.
    let (program, diags) = check_text("reward = sqrt(grade(word) - 0.5)\n");
    assert!(program.is_some() && diags.iter().all(|d| !d.is_error()), "{diags:#?}");
    // `0 / 0` can be NaN but `x / inf` need not be: neither a literal pole nor a
    // reduction that may be finite is reported.
    let (program, diags) = check_text("reward = grade(word) / (1 + cost)\n");
    assert!(program.is_some(), "{diags:#?}");
}

#[test]
fn a_mask_must_be_a_bool_and_the_only_keyword_is_where() {
    let e = only_error("reward = grade(word)\nadv = reward - group.mean(reward, where = ok)\n");
    assert_eq!((e.code, e.at.as_str()), ("type-mismatch", "ok"));
    assert!(e.help.contains("the `where` mask of `group.mean` takes a bool"), "{}", e.help);
    let e = only_error("reward = grade(word)\nadv = reward - group.mean(reward, wher = ok > 0)\n");
    assert_eq!((e.code, e.at.as_str()), ("unknown-keyword", "wher"));
    assert_eq!(e.message, "`group.mean` has no keyword argument `wher`");
    assert!(e.help.starts_with("did you mean `where`?"), "{}", e.help);
    let e = only_error("reward = min(grade(word), 1, where = ok > 0)\n");
    assert_eq!((e.code, e.at.as_str()), ("unknown-keyword", "where"));
    assert_eq!(e.message, "`min` takes no keyword arguments, but `where` is given");
    let e = only_error("reward = grade(word, where = ok > 0)\n");
    assert_eq!(e.code, "unknown-keyword");
    let e = only_error("reward = grade(word)\nadv = group.sum(reward, where = ok > 0, where = cut > 0)\n");
    assert_eq!((e.code, e.at.as_str()), ("duplicate-keyword", "where"));
    // An unknown name in a mask is reported once, as an unknown name.
    let e = only_error("reward = grade(word)\nadv = group.sum(reward, where = okk > 0)\n");
    assert_eq!((e.code, e.at.as_str()), ("unknown-name", "okk"));
    // `count` takes a mask and still no positional argument.
    let e = only_error("reward = grade(word)\nadv = group.count(reward, where = ok > 0)\n");
    assert_eq!(e.code, "arity");
}
