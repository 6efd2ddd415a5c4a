//! `rewardlab check`.

use super::{rewardlab, stderr, stdout, write};

#[test]
fn shipped_reward_files_check_clean_and_v1_draws_the_scaling_warning_v2_v3_the_idle_one() {
    let files: Vec<String> = std::fs::read_dir(super::root().join("rewards"))
        .expect("rewards/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "reward"))
        .map(|p| p.strip_prefix(super::root()).expect("under root").display().to_string())
        .collect();
    assert!(files.len() >= 9, "the shipped reward files: {files:?}");
    let mut args = vec!["check", "--cases", "300"];
    args.extend(files.iter().map(String::as_str));
    let out = rewardlab(&args);
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "check fails:\n{so}\n{se}");
    assert_eq!(so.lines().filter(|l| l.contains(": ok: ")).count(), files.len(), "{so}");
    assert!(!se.contains("error"), "{se}");
    assert!(se.contains("rewards/codegrep_v1.reward:6:18: warning:"), "{se}");
    // v2 and v3 discount `adv` by a factor that is 0 for a rollout with no call: the idle-outranks
    // lint shows that lifting a do-nothing rollout's penalty above a weak sibling's.
    for v in ["codegrep_v2", "codegrep_v3"] {
        assert!(se.contains(&format!("rewards/{v}.reward:")), "{v} draws the advantage-layer warning:\n{se}");
    }
    let warned: Vec<&str> = se.lines().filter(|l| l.contains(": warning: ")).collect();
    assert!(
        warned.iter().filter(|l| l.contains("higher `advantage`")).count() == 2,
        "exactly v2 and v3 draw the advantage-layer warning: {warned:#?}"
    );
}

#[test]
fn errors_point_at_the_mistake_and_exit_1() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        "bad.reward",
        "reward = Fbeta(file) * (c > 0)\nadvantage = adv * sqrt(min(c / 4, 1)\ncheck reward in [0, 1]\n",
    );
    let out = rewardlab(&["check", path.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(1));
    let se = stderr(&out);
    assert!(se.contains("bad.reward:1:10: error: unknown function `Fbeta`"), "{se}");
    assert!(se.contains("did you mean `Fb`?"), "{se}");
    assert!(se.contains("bad.reward:2:"), "the second statement's error is reported too:\n{se}");
    assert!(se.contains("  |          ^^^^^"), "a caret under `Fbeta`:\n{se}");
}

#[test]
fn a_failing_check_prints_its_counterexample() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        "v3_sign.reward",
        "reward = Fb(file) * mask(c > 0)\nadvantage = adv * sqrt(min(c / 4, 1))\ncheck sign(advantage) == sign(adv)\n",
    );
    let out = rewardlab(&["check", path.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(1));
    let se = stderr(&out);
    assert!(se.contains("error: check `sign(advantage) == sign(adv)` fails"), "{se}");
    assert!(se.contains("counterexample: group of"), "{se}");
    assert!(se.contains("c = 0"), "the counterexample is at c = 0:\n{se}");
}

#[test]
fn param_overrides_are_checked() {
    let out = rewardlab(&["check", "rewards/fusesearch_f1_times_e.reward", "--param", "gamma_x=1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("declares no such param (it declares: w_file, alpha, gamma)"), "{}", stderr(&out));
}
