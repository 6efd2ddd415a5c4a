//! The study file's schema: what a `studies/*.toml` may say. Every table
//! rejects unknown keys, so a typo (`prompt_per_step`) is an error rather than
//! a silently ignored setting. Strings that hold DSL formulas are
//! [`toml::Spanned`], so diagnostics can point into the study file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rewardlab_models::proxy::ProxyConfig;
use rewardlab_rewards::tasks::{CommitOptions, TaskKinds, parse_time};
use serde::Deserialize;
use toml::Spanned;

use crate::engine::EngineConfig;

/// A whole study file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    /// Names `results/<name>/`; defaults to the file's stem.
    pub name: Option<Spanned<String>>,
    /// Free text describing the study; empty by default.
    #[serde(default)]
    pub description: String,
    /// Seed indices `0..seeds`. Every variant runs once per index.
    pub seeds: Spanned<usize>,
    /// Run seeds are `base_seed + seed_index`: never a function of the variant.
    #[serde(default)]
    pub base_seed: u64,
    /// The training sources: one `[tasks]` table or several `[[tasks]]`.
    #[serde(deserialize_with = "one_or_many")]
    pub tasks: Vec<TaskSpec>,
    /// The evaluation source: every one of its tasks is held out, and the
    /// training sources hold out none.
    pub eval: Option<TaskSpec>,
    /// The policy every run trains: `[policy.proxy]` or `[policy.qwen3]`.
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
    /// How the summary judges variants; defaults apply when absent.
    #[serde(default)]
    pub summary: SummarySpec,
    /// The sandbox's memory for each repository (`[sandbox]`); defaults apply when absent.
    #[serde(default)]
    pub sandbox: SandboxSpec,
    /// Named variants (`[[variants]]`), each a reward file or inline formulas.
    #[serde(default)]
    pub variants: Vec<VariantSpec>,
    /// A grid of inline variants (`[grid]`), added after the named ones.
    pub grid: Option<GridSpec>,
    /// Tripwires every variant of the study gets (`[[alerts]]`), after its own.
    #[serde(default)]
    pub alerts: Vec<AlertSpec>,
}

/// A study-wide `alert`: `[[alerts]]` with `when = 'CONDITION'`, an optional
/// `steps = N` (consecutive steps, default 1) and a `message`. Every variant
/// gets it as if its reward file ended with `alert CONDITION for N steps : "message"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertSpec {
    /// The condition, in the reward language: batch reductions, params and `step.*` metrics.
    pub when: Spanned<String>,
    /// How many consecutive steps it must hold before it fires.
    pub steps: Option<Spanned<u32>>,
    /// What the alert says when it fires.
    pub message: Spanned<String>,
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
        /// Seeds the generator (the repository, the tasks and their split).
        #[serde(default)]
        seed: u64,
        /// Source files of the generated repository.
        #[serde(default = "default_files")]
        files: usize,
        /// Commits of its history.
        #[serde(default = "default_commits")]
        commits: usize,
        /// Tasks generated.
        #[serde(default = "default_tasks")]
        tasks: usize,
        /// Share of the tasks held out (default 0.2; not allowed beside `[eval]`).
        held_out_fraction: Option<f64>,
    },
    /// SWE-bench-style JSONL (`rewardlab_rewards::tasks::swebench`).
    Swebench {
        /// The JSONL file, relative to the study file.
        path: PathBuf,
        /// A directory of bare clones named `owner__name.git`, one per `repo`
        /// the instances name (relative to the study file). Its clones are
        /// used where they are: nothing is cloned or copied.
        repos: PathBuf,
        /// Seeds the train/held-out shuffle.
        #[serde(default)]
        seed: u64,
        /// Share of the instances held out (default 0.2; not allowed beside `[eval]`).
        held_out_fraction: Option<f64>,
    },
    /// Tasks mined from a git repository's commits and merged pull requests
    /// (`rewardlab_rewards::tasks::commits`).
    Commits(Box<CommitsSpec>),
}

/// A `source = "commits"` table: the repository, the walk and the filters.
/// Unset filters keep [`CommitOptions`]' defaults (one to five changed source
/// files, messages of at least four words, tests/docs/vendored paths excluded).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitsSpec {
    /// The repository (bare or not), relative to the study file.
    pub repo: PathBuf,
    /// Where the history walk starts: `HEAD`, a branch or tag name, a full
    /// commit id, or a range `A..B`.
    #[serde(default = "default_rev")]
    pub rev: String,
    /// Keep at most this many tasks (newest first).
    pub max_tasks: Option<usize>,
    /// Look at no more than this many commits of the walk.
    pub max_commits: Option<usize>,
    /// `commits`, `pull_requests` or `both` (default `commits`).
    pub kinds: Option<TaskKinds>,
    /// Follow first parents only (`git log --first-parent`).
    #[serde(default)]
    pub first_parent: bool,
    /// Only commits at or after this date (`YYYY-MM-DD`, RFC 3339, or Unix seconds).
    pub since: Option<String>,
    /// Only commits at or before this date.
    pub until: Option<String>,
    /// A target file must match one of these globs (when any are given).
    #[serde(default)]
    pub include: Vec<String>,
    /// Files matching one of these globs are never targets (`**/tests/**`, `doc/**`).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Fewest target files a task may have.
    pub min_files: Option<usize>,
    /// Most target files a task may have.
    pub max_files: Option<usize>,
    /// Skip commits that change more paths than this (any file counts).
    pub max_changed_paths: Option<usize>,
    /// Skip messages with fewer words.
    pub min_message_words: Option<usize>,
    /// Skip messages (pull request texts) with fewer characters.
    pub min_message_chars: Option<usize>,
    /// Append up to this many lines the commit adds to its test files to the issue text (a code
    /// block: calls and assertions, as a user's reproduction shows them; default 0, none).
    pub test_snippet_lines: Option<usize>,
    /// Seeds the train/held-out shuffle.
    #[serde(default)]
    pub seed: u64,
    /// Share of the tasks held out (default 0.2; not allowed beside `[eval]`).
    pub held_out_fraction: Option<f64>,
}

impl CommitsSpec {
    /// The mining options this table asks for, or what is wrong with a date.
    pub fn options(&self) -> Result<CommitOptions, String> {
        let defaults = CommitOptions::default();
        let date = |key: &str, text: &Option<String>| -> Result<Option<i64>, String> {
            text.as_deref()
                .map(|t| {
                    parse_time(t)
                        .ok_or_else(|| format!("{key} = {t:?} is not a date (`YYYY-MM-DD`, RFC 3339 or Unix seconds)"))
                })
                .transpose()
        };
        Ok(CommitOptions {
            rev: self.rev.clone(),
            max_tasks: self.max_tasks.unwrap_or(defaults.max_tasks),
            max_commits: self.max_commits.unwrap_or(defaults.max_commits),
            first_parent: self.first_parent,
            since: date("since", &self.since)?,
            until: date("until", &self.until)?,
            min_files: self.min_files.unwrap_or(defaults.min_files),
            max_files: self.max_files.unwrap_or(defaults.max_files),
            max_changed_paths: self.max_changed_paths.unwrap_or(defaults.max_changed_paths),
            min_message_words: self.min_message_words.unwrap_or(defaults.min_message_words),
            min_message_chars: self.min_message_chars.unwrap_or(defaults.min_message_chars),
            include_paths: self.include.clone(),
            exclude_paths: self.exclude.clone(),
            kinds: self.kinds.unwrap_or(defaults.kinds),
            test_snippet_lines: self.test_snippet_lines.unwrap_or(defaults.test_snippet_lines),
            ..defaults
        })
    }
}

/// `tasks` is one table (`[tasks]`) or several (`[[tasks]]`).
fn one_or_many<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<TaskSpec>, D::Error> {
    struct Visit;
    impl<'de> serde::de::Visitor<'de> for Visit {
        type Value = Vec<TaskSpec>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a `[tasks]` table or an array of `[[tasks]]` tables")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            TaskSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(|t| vec![t])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Vec::<TaskSpec>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
        }
    }
    deserializer.deserialize_any(Visit)
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
    /// The LoRA rank `r` of every adapter (32 by default).
    #[serde(default = "default_lora_rank")]
    pub lora_rank: usize,
    /// The LoRA scale numerator: adapters add `(lora_alpha / lora_rank) · B A x` (64 by default).
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
    /// The KL reference after a warm start: `"sft"` (the default: the warm-started adapters,
    /// frozen, as TRL and verl anchor the KL at the policy RL starts from) or `"base"`.
    #[serde(default)]
    pub reference: super::qwen3::KlReference,
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
    /// 32-bit floats (`"f32"`), the default.
    #[default]
    F32,
    /// bfloat16 (`"bf16"`): half the memory of f32.
    Bf16,
}

/// Where Qwen3 runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelDevice {
    /// The CPU (`"cpu"`), the default.
    #[default]
    Cpu,
    /// The first CUDA GPU (`"cuda"`); needs a build with `--features model-cuda`.
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
    /// The variant every other is compared with in the paired-differences table
    /// (`None`: the first variant).
    pub reference: Option<String>,
}

impl Default for SummarySpec {
    fn default() -> Self {
        SummarySpec { precision_gate: 0.45, bm25_k: 2, reference: None }
    }
}

/// The sandbox's memory per repository of the study's store (`[sandbox]`). `phases.md` shows
/// what the last training process used of it (evictions mean the bound was reached).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSpec {
    /// The bound of each repository's content index, in MiB (`StoreOptions::index_bytes`); 0
    /// turns the index off, so every grep scans.
    pub index_mib: usize,
    /// The store's blob cache, one for all repositories, in MiB (`StoreOptions::blob_cache_bytes`);
    /// 0 caches nothing. [`DEFAULT_BLOB_CACHE_MIB`] by default, twice a single store's.
    pub blob_cache_mib: usize,
    /// Each repository's grep memo, in MiB (`StoreOptions::grep_memo_bytes`: what each pattern
    /// matched in each blob, shared by every commit); 0 turns it off.
    pub grep_memo_mib: usize,
    /// The tool-result cache of the training process, in MiB (`Limits::result_cache_bytes`):
    /// one cache serves every run of the process, so a call one run made is answered from it in
    /// every other run at the same commit, and it is kept in the store for the study's next
    /// process (the same binary only); 0 turns it off.
    pub result_cache_mib: usize,
    /// A blob missing from a repository's object store (an incomplete clone, a snapshot without
    /// its largest files) is skipped by grep and counted in its notice, and read by the
    /// baselines as a file without terms, instead of failing the grep and the study
    /// (`Limits::skip_missing_blobs`). Off by default: a missing blob is an error.
    pub skip_missing_blobs: bool,
}

impl Default for SandboxSpec {
    fn default() -> Self {
        let options = rewardlab_sandbox::StoreOptions::default();
        SandboxSpec {
            index_mib: options.index_bytes >> 20,
            blob_cache_mib: DEFAULT_BLOB_CACHE_MIB,
            grep_memo_mib: options.grep_memo_bytes >> 20,
            result_cache_mib: DEFAULT_RESULT_CACHE_MIB,
            skip_missing_blobs: false,
        }
    }
}

/// [`SandboxSpec::blob_cache_mib`]'s default: twice a single store's
/// (`StoreOptions::blob_cache_bytes`), since a study's store serves the commits of several
/// repositories. The README's Lite study over nine repositories reaches ~2.1 GB of distinct
/// blobs: with 1 GiB its first process inflated each blob 4.4 times on average (335k misses for
/// 76k blobs) and its tool calls took a quarter longer (session 36).
pub const DEFAULT_BLOB_CACHE_MIB: usize = 2048;

/// [`SandboxSpec::result_cache_mib`]'s default: eight times a single sandbox's
/// ([`Limits::result_cache_bytes`](rewardlab_sandbox::Limits)), since every run of the process
/// shares it (the README's Lite study of 12 runs, every result kept, needed 365 MiB).
pub const DEFAULT_RESULT_CACHE_MIB: usize = 512;

impl SandboxSpec {
    /// The store's options: these bounds, and the index persisted under the store, so that a
    /// rerun, a resumed run or another Slurm task of the study starts from what the last one built.
    pub fn store_options(&self) -> rewardlab_sandbox::StoreOptions {
        rewardlab_sandbox::StoreOptions {
            index_bytes: self.index_mib.saturating_mul(1 << 20),
            blob_cache_bytes: self.blob_cache_mib.saturating_mul(1 << 20),
            grep_memo_bytes: self.grep_memo_mib.saturating_mul(1 << 20),
            persist_index: true,
            ..rewardlab_sandbox::StoreOptions::default()
        }
    }

    /// The limits of the study's tool calls: the defaults, with this result cache bound and
    /// missing-blob rule.
    pub fn limits(&self) -> rewardlab_sandbox::Limits {
        rewardlab_sandbox::Limits {
            result_cache_bytes: self.result_cache_mib.saturating_mul(1 << 20),
            skip_missing_blobs: self.skip_missing_blobs,
            ..rewardlab_sandbox::Limits::default()
        }
    }
}

/// One named variant: a reward file, or inline formulas.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// The variant's name: unique in the study, letters, digits, `-`, `_`, `.`, `+`, `=` only.
    pub name: Spanned<String>,
    /// A reward file (relative to the study file). Excludes the inline formulas.
    pub file: Option<Spanned<PathBuf>>,
    /// Inline formulas: one expression each, as on the right of `reward = ...`.
    pub reward: Option<Spanned<String>>,
    /// Inline `adv = ...`, the base advantage estimator; the language's default when absent.
    pub adv: Option<Spanned<String>>,
    /// Inline `advantage = ...`, the advantage-layer scaling; `adv` itself when absent.
    pub advantage: Option<Spanned<String>>,
    /// Overrides of the reward file's `param`s; for inline formulas, `param` declarations.
    #[serde(default)]
    pub params: BTreeMap<String, Spanned<f64>>,
    /// Settings of the study's proxy policy that this variant changes (`policy = { rarity =
    /// false }`): an ablation of policy features inside one study, beside the reward variants.
    pub policy: Option<Spanned<toml::Table>>,
    /// Settings of the study's `[training.loss]` that this variant changes (`loss = {
    /// aggregation = { mode = "seq-mean-token-sum-norm" } }`): an ablation of the objective.
    pub loss: Option<Spanned<toml::Table>>,
}

/// A cartesian product of formula choices and param values. Variants are
/// named `choice+choice+param=value`, in key order.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    /// `reward` formulas by choice name; at least one is required.
    #[serde(default)]
    pub reward: BTreeMap<String, Spanned<String>>,
    /// `adv` formulas by choice name; empty means every variant uses the default `adv`.
    #[serde(default)]
    pub adv: BTreeMap<String, Spanned<String>>,
    /// `advantage` formulas by choice name; empty means every variant uses `advantage = adv`.
    #[serde(default)]
    pub advantage: BTreeMap<String, Spanned<String>>,
    /// Values of each `param`, every one a separate grid axis; a list may not be empty.
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
                let held_out_fraction = held_out_fraction.unwrap_or_else(default_held_out);
                Some(crate::synthetic::SyntheticConfig { seed, files, commits, tasks, held_out_fraction })
            }
            _ => None,
        }
    }

    /// `held_out_fraction` as the file sets it (`None` when absent).
    pub fn held_out_setting(&self) -> Option<f64> {
        match self {
            TaskSpec::Synthetic { held_out_fraction, .. } | TaskSpec::Swebench { held_out_fraction, .. } => {
                *held_out_fraction
            }
            TaskSpec::Commits(c) => c.held_out_fraction,
        }
    }

    /// The share of this source's tasks held out when the study has no
    /// evaluation source (0.2 unless set).
    pub fn held_out_fraction(&self) -> f64 {
        self.held_out_setting().unwrap_or_else(default_held_out)
    }

    /// `synthetic`, `swebench` or `commits`.
    pub fn kind(&self) -> &'static str {
        match self {
            TaskSpec::Synthetic { .. } => "synthetic",
            TaskSpec::Swebench { .. } => "swebench",
            TaskSpec::Commits(_) => "commits",
        }
    }
}
