//! The study file's schema: what a `studies/*.toml` may say. Every table
//! rejects unknown keys, so a typo (`prompt_per_step`) is an error rather than
//! a silently ignored setting. Strings that hold DSL formulas are
//! [`toml::Spanned`], so diagnostics can point into the study file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rewardlab_models::proxy::ProxyConfig;
use serde::Deserialize;
use toml::Spanned;

use crate::engine::EngineConfig;

/// A whole study file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    /// Names `results/<name>/`; defaults to the file's stem.
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub description: String,
    /// Seed indices `0..seeds`. Every variant runs once per index.
    pub seeds: Spanned<usize>,
    /// Run seeds are `base_seed + seed_index`: never a function of the variant.
    #[serde(default)]
    pub base_seed: u64,
    pub tasks: TaskSpec,
    pub policy: PolicySpec,
    /// The engine's settings, passed through (its own defaults fill the gaps).
    /// `seed` is set per run from the seed index and may not appear here.
    #[serde(default)]
    pub training: Option<Spanned<EngineConfig>>,
    #[serde(default)]
    pub summary: SummarySpec,
    #[serde(default)]
    pub variants: Vec<VariantSpec>,
    pub grid: Option<GridSpec>,
}

/// Where the tasks come from.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "source", rename_all = "lowercase", deny_unknown_fields)]
pub enum TaskSpec {
    /// A generated repository (`framework::synthetic`).
    Synthetic {
        #[serde(default)]
        seed: u64,
        #[serde(default = "default_files")]
        files: usize,
        #[serde(default = "default_commits")]
        commits: usize,
        #[serde(default = "default_tasks")]
        tasks: usize,
        #[serde(default = "default_held_out")]
        held_out_fraction: f64,
    },
    /// SWE-bench-style JSONL (path relative to the study file).
    Swebench {
        path: PathBuf,
        #[serde(default = "default_held_out")]
        held_out_fraction: f64,
    },
    /// Tasks mined from a git repository's commits (path relative to the study file).
    Commits {
        repo: PathBuf,
        #[serde(default = "default_held_out")]
        held_out_fraction: f64,
    },
}

fn default_files() -> usize {
    300
}
fn default_commits() -> usize {
    8
}
fn default_tasks() -> usize {
    120
}
fn default_held_out() -> f64 {
    0.2
}

/// The policy trained.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PolicySpec {
    /// The log-linear proxy policy (`rewardlab_models::proxy`), CPU-only.
    Proxy(ProxyConfig),
    /// Qwen3 with a LoRA adapter.
    Qwen3(Qwen3Spec),
}

/// Qwen3 + LoRA settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Qwen3Spec {
    /// A model directory (config, tokenizer, safetensors), relative to the study file.
    pub model: PathBuf,
    #[serde(default = "default_lora_rank")]
    pub lora_rank: usize,
    #[serde(default = "default_lora_alpha")]
    pub lora_alpha: f64,
}

fn default_lora_rank() -> usize {
    32
}
fn default_lora_alpha() -> f64 {
    64.0
}

/// How the summary judges variants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummarySpec {
    /// The precision gate (seed 001, improvement 6): held-out precision a variant must reach.
    pub precision_gate: f64,
    /// Files the BM25 baseline returns per task.
    pub bm25_k: usize,
}

impl Default for SummarySpec {
    fn default() -> Self {
        SummarySpec { precision_gate: 0.45, bm25_k: 2 }
    }
}

/// One named variant: a reward file, or inline formulas.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub name: Spanned<String>,
    /// A reward file (relative to the study file). Excludes the inline formulas.
    pub file: Option<Spanned<PathBuf>>,
    /// Inline formulas: one expression each, as on the right of `reward = ...`.
    pub reward: Option<Spanned<String>>,
    pub adv: Option<Spanned<String>>,
    pub advantage: Option<Spanned<String>>,
    /// Overrides of the reward file's `param`s; for inline formulas, `param` declarations.
    #[serde(default)]
    pub params: BTreeMap<String, Spanned<f64>>,
}

/// A cartesian product of formula choices and param values. Variants are
/// named `choice+choice+param=value`, in key order.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    #[serde(default)]
    pub reward: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub adv: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub advantage: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub params: BTreeMap<String, Spanned<Vec<f64>>>,
}

impl TaskSpec {
    /// The generator settings of a synthetic source (`None` for other sources).
    /// The task set is the same for every run of a study: its seed is the
    /// source's, not the run's.
    pub fn synthetic_config(&self) -> Option<crate::synthetic::SyntheticConfig> {
        match *self {
            TaskSpec::Synthetic { seed, files, commits, tasks, held_out_fraction } => {
                Some(crate::synthetic::SyntheticConfig { seed, files, commits, tasks, held_out_fraction })
            }
            _ => None,
        }
    }
}
