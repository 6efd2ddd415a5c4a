//! Writes the commit history into a bare git repository with one
//! `git fast-import` stream: one process, no checkout, no per-object forks.
//!
//! Author, committer, e-mail and timestamps are fixed, so the same files
//! and messages always produce the same commit ids.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::Error;

/// Name and e-mail on every synthetic commit.
const IDENTITY: &str = "Rewardlab Synth <synth@rewardlab.invalid>";
/// 2024-01-01T00:00:00Z; commits follow a week apart.
const EPOCH: i64 = 1_704_067_200;
const WEEK: i64 = 7 * 24 * 3600;

/// One commit to write: its message, full file map and tag.
#[derive(Debug)]
pub(crate) struct CommitInput<'a> {
    pub message: &'a str,
    pub files: &'a BTreeMap<String, String>,
    pub tag: &'a str,
}

/// Creates a bare repository at `dir` holding `commits` on `main`, one after
/// another, and returns their ids in order.
pub(crate) fn write_repository(dir: &Path, commits: &[CommitInput<'_>]) -> Result<Vec<String>, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
    run_git(dir, &["init", "--quiet", "--bare", "--initial-branch=main", "."], None)?;
    let stream = fast_import_stream(commits);
    run_git(dir, &["fast-import", "--quiet", "--done"], Some(&stream))?;
    let listing = run_git(dir, &["rev-list", "--reverse", "refs/heads/main"], None)?;
    let ids: Vec<String> = listing.lines().map(str::to_string).collect();
    if ids.len() != commits.len() {
        return Err(Error::Git {
            command: "rev-list".to_string(),
            detail: format!("expected {} commits, found {}", commits.len(), ids.len()),
        });
    }
    Ok(ids)
}

/// The fast-import stream: each commit lists only the files that changed
/// since its parent (`M` for added or modified, `D` for removed).
fn fast_import_stream(commits: &[CommitInput<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    let empty = BTreeMap::new();
    for (index, commit) in commits.iter().enumerate() {
        let mark = index + 1;
        let when = EPOCH + WEEK * index as i64;
        let _ = write!(out, "commit refs/heads/main\nmark :{mark}\n");
        let _ = write!(out, "author {IDENTITY} {when} +0000\ncommitter {IDENTITY} {when} +0000\n");
        data(&mut out, commit.message.as_bytes());
        let parent = if index > 0 {
            let _ = writeln!(out, "from :{index}");
            commits[index - 1].files
        } else {
            &empty
        };
        for path in parent.keys().filter(|p| !commit.files.contains_key(*p)) {
            let _ = writeln!(out, "D {path}");
        }
        for (path, text) in commit.files {
            if parent.get(path) != Some(text) {
                let _ = writeln!(out, "M 100644 inline {path}");
                data(&mut out, text.as_bytes());
            }
        }
        out.push(b'\n');
        let _ = write!(out, "reset refs/tags/{}\nfrom :{mark}\n\n", commit.tag);
    }
    out.extend_from_slice(b"done\n");
    out
}

/// A `data` command with its exact byte count.
fn data(out: &mut Vec<u8>, bytes: &[u8]) {
    let _ = writeln!(out, "data {}", bytes.len());
    out.extend_from_slice(bytes);
    out.push(b'\n');
}

/// Runs `git` in `dir` with a neutral configuration, feeding `stdin`, and
/// returns its standard output.
pub(crate) fn run_git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<String, Error> {
    let command_text = format!("git {}", args.join(" "));
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        // User and system configuration (templates, hooks, default branch)
        // must not change what the generator writes.
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn { command: command_text.clone(), source })?;
    // The pipe is closed (dropped) after writing so git sees end of input.
    // A write error usually means git exited early; its stderr says why, so
    // the exit status is checked first.
    let written = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => pipe.write_all(bytes),
        _ => Ok(()),
    };
    let output = child.wait_with_output().map_err(|source| Error::Spawn { command: command_text.clone(), source })?;
    if !output.status.success() {
        return Err(Error::Git {
            command: command_text,
            detail: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    written.map_err(|source| Error::Spawn { command: command_text.clone(), source })?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
