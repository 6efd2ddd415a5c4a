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
    /// `training.checkpoint_every` when the file sets it (the parsed
    /// [`EngineConfig`] cannot tell a default from an explicit value), filled
    /// in by [`StudyFile::parse`].
    #[serde(skip)]
    pub checkpoint_every: Option<usize>,
    #[serde(default)]
    pub summary: SummarySpec,
    #[serde(default)]
    pub variants: Vec<VariantSpec>,
    pub grid: Option<GridSpec>,
}

impl StudyFile {
    /// Parses a study file's text: the TOML document is parsed once, asked
    /// whether `training.checkpoint_every` is present, then deserialised with
    /// its spans (errors point into `text`).
    pub fn parse(text: &str) -> Result<StudyFile, toml::de::Error> {
        let document = toml::de::DeTable::parse(text)?;
        let set = match document.get_ref().get("training").map(|t| t.get_ref()) {
            Some(toml::de::DeValue::Table(t)) => t.get("checkpoint_every").is_some(),
            _ => false,
        };
        let mut spec = StudyFile::deserialize(toml::de::Deserializer::from(document))?;
        spec.checkpoint_every = spec.training.as_ref().filter(|_| set).map(|t| t.get_ref().checkpoint_every);
        Ok(spec)
    }
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
    /// SWE-bench-style JSONL (`rewardlab_rewards::tasks::swebench`).
    Swebench {
        /// The JSONL file, relative to the study file.
        path: PathBuf,
        /// A directory of bare clones named `owner__name.git`, one per `repo`
        /// the instances name (relative to the study file). It becomes the
        /// study's repository store as is: nothing is cloned or copied.
        repos: PathBuf,
        /// Seeds the train/held-out shuffle.
        #[serde(default)]
        seed: u64,
        #[serde(default = "default_held_out")]
        held_out_fraction: f64,
    },
    /// Tasks mined from a git repository's commits
    /// (`rewardlab_rewards::tasks::commits`, default filters).
    Commits {
        /// The repository (bare or not), relative to the study file.
        repo: PathBuf,
        /// Where the history walk starts: `HEAD`, a branch or tag name, or a full commit id.
        #[serde(default = "default_rev")]
        rev: String,
        /// Keep at most this many tasks (newest first).
        max_tasks: Option<usize>,
        /// Seeds the train/held-out shuffle.
        #[serde(default)]
        seed: u64,
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
fn default_rev() -> String {
    "HEAD".to_string()
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
    // --- Model loading, sampling budgets and scoring (H7a; the sampling temperature is
    // `[training] temperature`, passed to the policy per rollout by the engine). ---
    /// Write a tiny random checkpoint (`rewardlab model tiny`) at `model` when it holds no
    /// `config.json`: for smoke tests on any machine.
    #[serde(default)]
    pub tiny_if_missing: bool,
    /// Weight dtype: `"f32"` or `"bf16"` (the adapters are f32 either way).
    #[serde(default)]
    pub dtype: ModelDtype,
    /// `"cpu"`, or `"cuda"` (needs a build with `--features model-cuda`).
    #[serde(default)]
    pub device: ModelDevice,
    /// Nucleus mass kept when sampling (1.0 turns it off).
    #[serde(default = "default_top_p")]
    pub top_p: f32,
    /// Most likely tokens kept when sampling (0 turns it off).
    #[serde(default = "default_top_k")]
    pub top_k: usize,
    /// Tokens one assistant turn may generate.
    #[serde(default = "default_max_tokens")]
    pub max_new_tokens: usize,
    /// Tokens a whole rollout may generate (the seeds' 4096).
    #[serde(default = "default_max_tokens")]
    pub max_completion_tokens: usize,
    /// Rollouts sampled together in one KV-cached generation (bounds the KV cache).
    #[serde(default = "default_sample_batch")]
    pub sample_batch: usize,
    /// Rollouts scored per forward pass in the update.
    #[serde(default = "default_score_batch")]
    pub score_batch: usize,
    /// Recompute activations layer by layer in the backward pass (less memory, one more forward).
    #[serde(default = "default_true")]
    pub gradient_checkpointing: bool,
    // --- end of H7a's block ---
    /// A warm start before GRPO: `warm_start = "sft"` or a table of
    /// [`crate::warm_start::WarmStartSpec`]'s fields (`kind`, `rho_f`, `rho_e`, `epochs`, `lr`, ...).
    #[serde(default)]
    pub warm_start: Option<crate::warm_start::WarmStartSpec>,
}

fn default_lora_rank() -> usize {
    32
}
fn default_lora_alpha() -> f64 {
    64.0
}
fn default_top_p() -> f32 {
    0.9
}
fn default_top_k() -> usize {
    50
}
fn default_max_tokens() -> usize {
    4096
}
fn default_sample_batch() -> usize {
    8
}
fn default_score_batch() -> usize {
    1
}
fn default_true() -> bool {
    true
}

/// The dtype Qwen3's weights are loaded in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelDtype {
    #[default]
    F32,
    Bf16,
}

/// Where Qwen3 runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelDevice {
    #[default]
    Cpu,
    Cuda,
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
