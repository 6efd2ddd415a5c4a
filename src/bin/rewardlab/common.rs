//! What several subcommands share: reading a reward file into a checked program
//! and printing its diagnostics.

use std::path::Path;

use anyhow::{Context, bail};
use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::diag::render_all;
use rewardlab_dsl::{Diagnostic, FeatureSchema, Program, SourceFile};

/// A reward file that checked without errors.
#[derive(Debug)]
pub struct Loaded {
    pub source: SourceFile,
    pub program: Program,
    pub warnings: Vec<Diagnostic>,
}

/// Reads, parses and checks a reward file, printing its diagnostics to
/// stderr. `Ok(None)` when the file has errors (already printed).
pub fn load_reward_file(path: &Path, schema: &FeatureSchema, options: &CheckOptions) -> anyhow::Result<Option<Loaded>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let source = SourceFile::new(path.display().to_string(), text);
    match compile_source(&source, schema, options) {
        Ok((program, warnings)) => {
            if !warnings.is_empty() {
                eprint!("{}", with_newline(render_all(&source, &warnings)));
            }
            Ok(Some(Loaded { source, program, warnings }))
        }
        Err(diags) => {
            eprint!("{}", with_newline(render_all(&source, &diags)));
            Ok(None)
        }
    }
}

/// [`load_reward_file`] against the shipped feature schema with the default checks, then the
/// `--param NAME=VALUE` overrides: what the subcommands that run one reward file start with.
pub fn load_with_params(path: &Path, overrides: &[String]) -> anyhow::Result<Option<Loaded>> {
    let schema = rewardlab_rewards::feature_schema();
    let Some(mut loaded) = load_reward_file(path, &schema, &CheckOptions::default())? else {
        return Ok(None);
    };
    apply_params(&mut loaded.program, overrides)?;
    Ok(Some(loaded))
}

/// Applies `NAME=VALUE` overrides to a program's `param`s.
pub fn apply_params(program: &mut Program, overrides: &[String]) -> anyhow::Result<()> {
    for item in overrides {
        let Some((name, value)) = item.split_once('=') else {
            bail!("--param takes NAME=VALUE, got `{item}`");
        };
        let value: f64 = value.trim().parse().with_context(|| format!("--param {name}: `{value}` is not a number"))?;
        if !program.set_param(name.trim(), value) {
            let known: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
            bail!("--param {name}: the reward file declares no such param (it declares: {})", list_or_none(&known));
        }
    }
    Ok(())
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() { "none".to_string() } else { names.join(", ") }
}

pub fn with_newline(mut s: String) -> String {
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// A temporary store directory, removed when dropped (after the trees and sandbox that use it).
pub struct TempStore(pub std::path::PathBuf);

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
