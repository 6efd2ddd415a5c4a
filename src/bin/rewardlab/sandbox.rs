//! `rewardlab sandbox`: run the sandbox's tools by hand and print exactly what a policy sees.
//!
//! ```text
//! rewardlab sandbox --repo ../requests --commit v2.31.0 grep 'def send' --path '*.py'
//! rewardlab sandbox --repo ../requests glob 'requests/**/*.py'
//! rewardlab sandbox --repo ../requests read requests/models.py --start 380 --end 400
//! echo '{"tool": "grep", "args": {"pattern": "content-length"}}' | rewardlab sandbox --repo ../requests --json
//! ```

use std::{
    io::{BufRead, Write},
    path::PathBuf,
    sync::Arc,
};

use anyhow::{Context, bail};
use rewardlab_sandbox::{
    GlobArgs, GrepArgs, Limits, ReadArgs, RepoStore, Sandbox, Status, StoreOptions, ToolCall, ToolResult, Tree,
    TreeKind,
};
use serde_json::Value;

/// Run grep, glob or read on one commit of a repository, as a policy would.
#[derive(Debug, clap::Args)]
#[command(arg_required_else_help = true)]
pub struct SandboxArgs {
    /// The repository: a local path or URL (cloned bare into the store on first use), or
    /// `owner/name` of a mirror already in the store.
    #[arg(long)]
    repo: String,
    /// The revision to show: a commit id, branch, tag or `HEAD~3`.
    #[arg(long, default_value = "HEAD")]
    commit: String,
    /// `view` (zero disk, read from the object store) or `worktree` (a linked worktree on disk).
    #[arg(long, default_value = "view")]
    kind: TreeKind,
    /// The store directory of bare mirrors (`<store>/owner__name.git`). Without it a temporary
    /// store is used and removed afterwards. The content index and the grep memo are persisted
    /// in the store (`<store>/.index/`), so a later run on the same store starts from them.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Read tool calls as JSON from stdin, one per line (`{"tool": "grep", "args": {...}}`) or
    /// one turn per line (a JSON array of calls), and print each result as one JSON line.
    #[arg(long)]
    json: bool,
    /// Turn the content index off, so every grep scans (for comparing the two).
    #[arg(long)]
    no_index: bool,
    /// Turn the result cache and the grep memo off, so a repeated call, or a pattern asked
    /// again, runs and reads its files again (for timing the tools themselves).
    #[arg(long)]
    no_cache: bool,
    #[command(subcommand)]
    tool: Option<ToolCommand>,
}

#[derive(Debug, clap::Subcommand)]
enum ToolCommand {
    /// Regex search over the tree's files: `path:line:text` lines.
    Grep {
        /// A regular expression (Rust regex syntax).
        pattern: String,
        /// Only files matching this glob (`*.py`, `src/**/*.py`, `src/pkg`).
        #[arg(long)]
        path: Option<String>,
        /// Match case-insensitively.
        #[arg(short = 'i', long)]
        ignore_case: bool,
    },
    /// Tracked paths matching a shell glob (`*` stops at `/`, `**` does not).
    Glob {
        /// The pattern, relative to the repository root.
        pattern: String,
    },
    /// Numbered lines of one file.
    Read {
        /// The file, relative to the repository root.
        path: String,
        /// First line, 1-based.
        #[arg(long)]
        start: Option<u64>,
        /// Last line, inclusive.
        #[arg(long)]
        end: Option<u64>,
    },
}

pub fn run(args: SandboxArgs) -> anyhow::Result<u8> {
    let (store_dir, temporary) = match &args.store {
        Some(dir) => (dir.clone(), None),
        None => {
            let dir = std::env::temp_dir().join(format!("rewardlab-sandbox-{}", std::process::id()));
            (dir.clone(), Some(crate::common::TempStore(dir)))
        }
    };
    let options = StoreOptions {
        index_bytes: if args.no_index { 0 } else { StoreOptions::default().index_bytes },
        // A temporary store goes at the end: writing its index out would be wasted.
        persist_index: args.store.is_some(),
        grep_memo_bytes: if args.no_cache { 0 } else { StoreOptions::default().grep_memo_bytes },
        ..StoreOptions::default()
    };
    let store = RepoStore::open_with(&store_dir, options)
        .with_context(|| format!("opening the store at {}", store_dir.display()))?;
    let limits = if args.no_cache { Limits { result_cache_bytes: 0, ..Limits::default() } } else { Limits::default() };
    let sandbox = Sandbox::new(Arc::new(store), limits);
    let tree = sandbox
        .tree(&args.repo, &args.commit, args.kind)
        .with_context(|| format!("preparing {} at {}", args.repo, args.commit))?;
    let code = if args.json {
        if args.tool.is_some() {
            bail!("--json reads tool calls from stdin; name no tool on the command line");
        }
        run_json(&sandbox, &tree)?
    } else {
        let Some(tool) = args.tool else {
            bail!("name a tool (grep, glob or read) or pass --json");
        };
        let call = match tool {
            ToolCommand::Grep { pattern, path, ignore_case } => {
                ToolCall::Grep(GrepArgs { pattern, path, case_sensitive: ignore_case.then_some(false) })
            }
            ToolCommand::Glob { pattern } => ToolCall::Glob(GlobArgs { pattern }),
            ToolCommand::Read { path, start, end } => ToolCall::Read(ReadArgs { path, start, end }),
        };
        let result = sandbox.call(&tree, &call);
        println!("{}", result.output);
        eprintln!("[{} · {} entities · {}]", status_name(result.status), result.entities.len(), tree_label(&tree));
        u8::from(result.is_error())
    };
    // Write the content index out now: a background build may still hold the repository when
    // the process ends, and then it would never be dropped (and saved).
    if args.store.is_some() {
        let repo = sandbox.store().repo(&args.repo).context("reopening the repository")?;
        repo.save_index().context("saving the content index and grep memo")?;
    }
    // Trees hold the repository; drop them before the temporary store goes.
    drop(tree);
    drop(sandbox);
    drop(temporary);
    Ok(code)
}

/// One JSON value per stdin line: an object is one call, an array is one turn.
fn run_json(sandbox: &Sandbox, tree: &Tree) -> anyhow::Result<u8> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.context("reading tool calls from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Result<Value, _> = serde_json::from_str(&line);
        let printed = match parsed {
            Ok(Value::Array(calls)) => {
                let checked: Vec<Result<ToolCall, ToolResult>> = calls.iter().map(ToolCall::from_json).collect();
                let valid: Vec<ToolCall> = checked.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
                let mut ran = sandbox.run_turn_blocking(tree, &valid).into_iter();
                // Put validation errors back in their places, in call order.
                let results: Vec<ToolResult> = checked
                    .into_iter()
                    .map(|c| match c {
                        Ok(_) => ran.next().expect("one result per valid call"),
                        Err(invalid) => invalid,
                    })
                    .collect();
                serde_json::to_string(&results)?
            }
            Ok(value) => {
                let result = match ToolCall::from_json(&value) {
                    Ok(call) => sandbox.call(tree, &call),
                    Err(invalid) => invalid,
                };
                serde_json::to_string(&result)?
            }
            Err(_) => serde_json::to_string(&ToolCall::from_json_str(&line).expect_err("invalid JSON is rejected"))?,
        };
        writeln!(stdout, "{printed}")?;
    }
    Ok(0)
}

fn status_name(status: Status) -> String {
    match status {
        Status::Ok => "ok".to_owned(),
        Status::Truncated => "truncated".to_owned(),
        Status::Timeout => "timeout".to_owned(),
        Status::Error(kind) => format!(
            "error: {}",
            serde_json::to_value(kind).map(|v| v.to_string()).unwrap_or_default().trim_matches('"')
        ),
        other => format!("{other:?}"),
    }
}

fn tree_label(tree: &Tree) -> String {
    format!("{} @ {} ({})", tree.repo_name(), tree.commit().to_hex_with_len(12), tree.kind())
}
