//! `read`: numbered lines of one file, optionally a 1-based inclusive line range.

use super::{AccessErrorResult, Entity, ErrorKind, ReadArgs, ToolResult, output::Output};
use crate::{Limits, deadline::Deadline, path, tree::Tree};

/// Lines formatted between deadline checks.
const CHECK_EVERY: usize = 4096;

pub(crate) fn run(tree: &Tree, args: &ReadArgs, limits: &Limits, deadline: Deadline) -> ToolResult {
    let start = args.start.unwrap_or(1);
    if start == 0 {
        return ToolResult::error(ErrorKind::InvalidCall, "read: `start` is 1-based; the first line is 1".to_owned());
    }
    if let Some(end) = args.end
        && end < start
    {
        return ToolResult::error(ErrorKind::InvalidCall, format!("read: `end` ({end}) is before `start` ({start})"));
    }
    let (_resolved, data) = match tree.read(&args.path, limits.max_read_bytes, limits.max_symlink_hops) {
        Ok(found) => found,
        Err(e) => return ToolResult::access_error("read", &e),
    };
    // The entity names the file as the policy asked for it (normalised), not its symlink target.
    let shown_path = path::normalise(&args.path).map(|c| c.join("/")).unwrap_or_else(|_| args.path.clone());
    if data.contains(&0) {
        return ToolResult::error(
            ErrorKind::Binary,
            format!("read: {shown_path} is a binary file (it contains NUL bytes) and is not shown"),
        );
    }
    let text = String::from_utf8_lossy(&data);
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') || text.is_empty() {
        lines.pop();
    }
    let total = lines.len() as u64;
    let mut out = Output::new(limits);
    if total == 0 {
        out.note(format!("[{shown_path} is empty]"));
        return out.finish(false, |_| String::new());
    }
    if start > total {
        return ToolResult::error(
            ErrorKind::InvalidCall,
            format!("read: `start` ({start}) is past the end of {shown_path}, which has {total} lines"),
        );
    }
    let end = args.end.unwrap_or(total).min(total);
    let mut timed_out = false;
    for (i, n) in (start..=end).enumerate() {
        if i % CHECK_EVERY == 0 && deadline.expired() {
            timed_out = true;
            break;
        }
        let line = lines[(n - 1) as usize];
        out.line(&format!("{n:>6}\t{line}"), Some(Entity::line(&*shown_path, n)));
    }
    if args.end.is_some_and(|e| e > total) {
        out.note(format!("[end of file: {shown_path} has {total} lines]"));
    }
    if timed_out {
        out.note(format!(
            "[timeout: read stopped at its {:.1} s budget; read a narrower line range]",
            deadline.budget().as_secs_f64()
        ));
    }
    out.finish(timed_out, |shown| {
        format!(
            "read on with start={}, end={end}, or a narrower range (the file has {total} lines)",
            start + shown as u64
        )
    })
}
