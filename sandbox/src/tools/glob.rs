//! `glob`: tracked paths matching a shell pattern, sorted bytewise like `git ls-files`.
//!
//! Only tracked paths are listed, never what a symlinked directory points at.

use super::{Entity, GlobArgs, ToolResult, filter::glob_matcher, output::Output};
use crate::{Limits, deadline::Deadline, tree::Tree};

/// Paths matched between deadline checks; matching one path takes well under a microsecond.
const CHECK_EVERY: usize = 512;

pub(crate) fn run(tree: &Tree, args: &GlobArgs, limits: &Limits, deadline: Deadline) -> ToolResult {
    let matcher = match glob_matcher(&args.pattern, limits) {
        Ok(matcher) => matcher,
        Err(result) => return result,
    };
    let mut out = Output::new(limits);
    let mut timed_out = false;
    let files = tree.files();
    let mut scanned = 0;
    for (i, entry) in files.iter().enumerate() {
        if i % CHECK_EVERY == 0 && deadline.expired() {
            timed_out = true;
            break;
        }
        scanned += 1;
        if matcher.is_match(&entry.path) {
            out.line(&entry.path, Some(Entity::Path(entry.path.clone())));
        }
    }
    if out.lines() == 0 && !timed_out {
        out.note(format!(
            "[no tracked path matches {:?}; `*` stops at `/`, use `**/` to match at any depth]",
            args.pattern
        ));
    }
    if timed_out {
        out.note(format!(
            "[timeout: glob stopped at its {:.1} s budget after {scanned} of {} paths; the list above is partial; use a more specific pattern]",
            deadline.budget().as_secs_f64(),
            files.len()
        ));
    }
    out.finish(timed_out, |_| "narrow with a more specific pattern (e.g. a directory: \"src/pkg/**/*.py\")".to_owned())
}
