//! Every command documents itself.

use super::{rewardlab, stdout};

#[test]
fn every_subcommand_has_help() {
    let top = rewardlab(&["--help"]);
    assert!(top.status.success());
    let text = stdout(&top);
    for sub in ["check", "eval", "compile", "sandbox", "catm", "model", "locate"] {
        assert!(text.contains(sub), "`rewardlab --help` lists {sub}:\n{text}");
        let out = rewardlab(&[sub, "--help"]);
        assert!(out.status.success(), "`rewardlab {sub} --help` succeeds");
        assert!(stdout(&out).contains("Usage: rewardlab"), "`rewardlab {sub} --help` prints usage");
    }
}
