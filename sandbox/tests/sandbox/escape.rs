//! Escaped text, grepped: `escape_regex` makes the sandbox's grep find exactly the lines that
//! contain the text, for every ASCII punctuation character (a plain substring scan is the oracle).

use std::sync::Arc;

use rewardlab_sandbox::{Entity, GrepArgs, Limits, RepoStore, Sandbox, Status, ToolCall, TreeKind, escape_regex};

use crate::sandbox::helpers::{Fixture, commit_all, init, write};

#[test]
fn escaped_punctuation_greps_as_literal_text() {
    let fx = Fixture::new();
    let src = fx.path("acme/punct");
    init(&src);
    let punctuation: Vec<char> = (0u8..128).map(char::from).filter(char::is_ascii_punctuation).collect();
    // One line per character between letters, one with all of them, and near misses that a
    // character left unescaped would match (`a.b` as a regex also matches `axb`).
    let mut lines: Vec<String> = punctuation.iter().map(|c| format!("a{c}b")).collect();
    lines.push(punctuation.iter().collect());
    lines.extend(["axb", "ab", "a\\b", "aab", "abb", "a b"].map(str::to_owned));
    write(&src, "punct.txt", lines.join("\n") + "\n");
    commit_all(&src, "punctuation");
    let sandbox = Sandbox::new(Arc::new(RepoStore::open(fx.path("store")).expect("store")), Limits::default());
    let tree = sandbox.tree(src.to_str().expect("utf-8"), "HEAD", TreeKind::View).expect("tree");
    let mut needles: Vec<String> = punctuation.iter().map(|c| format!("a{c}b")).collect();
    needles.push(punctuation.iter().collect());
    needles.extend(punctuation.iter().map(char::to_string));
    for needle in needles {
        let call = ToolCall::Grep(GrepArgs { pattern: escape_regex(&needle), path: None, case_sensitive: None });
        let result = sandbox.call(&tree, &call);
        assert_eq!(result.status, Status::Ok, "{needle:?}: {}", result.output);
        let expected: Vec<Entity> = (1u64..)
            .zip(&lines)
            .filter(|(_, line)| line.contains(needle.as_str()))
            .map(|(n, _)| Entity::line("punct.txt", n))
            .collect();
        assert!(!expected.is_empty(), "{needle:?} occurs in the file");
        assert_eq!(result.entities, expected, "{needle:?} escaped as {:?}", escape_regex(&needle));
    }
}
