//! Qwen3 + LoRA as the GRPO engine's [`Policy`]: a unit is a generated token.
//!
//! # A rollout
//!
//! [`Policy::begin`] renders the system turn (instructions and the grep/glob/read tool
//! schemas) and the issue as the user turn into a [`Rollout`], and seeds the episode's own
//! RNG. Each [`Policy::act`] samples one assistant turn for every episode at that turn, in
//! batched, KV-cached generations of [`AgentOptions::sample_batch`] rows (`generate.rs`). The
//! turn's text becomes calls, an answer or a truncation (`episode.rs`); on the forced last
//! turn a user note asks for the answer first. [`Policy::observe`] appends the tool results as
//! `<tool_response>` blocks, which are context: only generated tokens are in the loss mask.
//! Each rollout keeps its KV cache between turns ([`AgentOptions::reuse_kv`]), so a turn
//! prefills only what the cache lacks: the tool responses and the next turn's template tokens.
//!
//! # Determinism
//!
//! Every row draws from its own episode's RNG (seeded by `begin`), never from a shared one.
//! The same seeds in the same batch give the same rollouts bit for bit. In another batch
//! composition the row's logits differ only by float rounding (left padding is masked; the
//! tests see < 1e-4 in log-prob), so the same tokens are drawn unless a uniform draw falls
//! within that rounding of a category boundary.
//!
//! # Budgets
//!
//! A turn generates at most [`AgentOptions::max_new_tokens`], a rollout at most
//! [`AgentOptions::max_completion_tokens`] in all, and no sequence outgrows the model's
//! `max_position_embeddings`. A rollout whose budget is spent is [`TurnOutput::Truncated`].
//!
//! # Training
//!
//! [`Policy::logprobs`] and [`Policy::reference_logprobs`] score the generated tokens through
//! the differentiable path with the adapters on and off — the same weights, no copy — at each
//! episode's sampling temperature. After an SFT warm start, [`Qwen3Agent::freeze_reference`]
//! makes the warm-started adapters (a frozen copy of them) the reference instead of the base. [`Policy::backward`] accumulates the adapter gradient of
//! `Σ coeff · logp` over calls; [`Policy::step`] is AdamW with global-norm clipping
//! (`adamw.rs`), whose moments are part of [`Qwen3AgentState`]. Base weights never change.
//!
//! Every fallible trait method returns this crate's [`Error`]: a failing tensor operation (out
//! of memory, a device error) or tokenizer call ends the step with that error, which the engine
//! reports with the step and phase; nothing here panics on it.

mod adamw;
mod episode;
mod generate;
mod score;
mod state;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{Tensor, Var};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rewardlab_sandbox::ToolResult;
use serde::{Deserialize, Serialize};

use crate::agent::{OptimStep, Policy, Sampling, StepStats, TaskPrompt, TurnInfo, TurnOutput};
use crate::lora::LoraConfig;
use crate::policy::{PolicyOptions, Qwen3Policy};
use crate::qwen3::{Pass, Qwen3Model};
use crate::sampling::SamplingParams;
use crate::template::Rollout;
use crate::tokenizer::QwenTokenizer;
use crate::{Error, Result};

pub use adamw::VarState;
pub use episode::Qwen3Episode;
pub use state::ReferenceState;

use adamw::AdamW;
use generate::{Row, generate_rows};
use score::{ScoreBatch, Sequence};

/// The default system instructions: the task and the answer schema of the retrieval rewards.
pub const DEFAULT_INSTRUCTIONS: &str = "You are a code search agent. Given an issue, find the files \
(and the line ranges in them) that must change to resolve it. Search the repository with the tools; \
you may call several tools in one turn. When you know the answer, reply with exactly one block \
<answer>{\"files\": [\"path/to/file.py\"], \"line_ranges\": [\"path/to/file.py:10-20\"]}</answer> \
and no tool calls. Paths are relative to the repository root.";

/// The user note that opens the forced last turn.
pub const LAST_TURN_NOTE: &str = "This is your last turn: do not call any tools. Reply now with your \
<answer>{\"files\": [...], \"line_ranges\": [...]}</answer>.";

/// How the agent samples, budgets and trains (the model itself is given).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOptions {
    /// The system turn's text before the tool block.
    pub instructions: String,
    /// Nucleus mass kept when sampling (1.0 = off). The temperature is the engine's.
    pub top_p: f32,
    /// Most likely tokens kept when sampling (0 = off).
    pub top_k: usize,
    /// Tokens one assistant turn may generate.
    pub max_new_tokens: usize,
    /// Tokens a whole rollout may generate (the seeds' 4096).
    pub max_completion_tokens: usize,
    /// Rollouts sampled together in one KV-cached generation. The engine hands over every
    /// rollout of a step at once (P × G of them); this bounds the KV cache and the prefill's
    /// attention scores. Results do not depend on it (see the module docs on determinism).
    pub sample_batch: usize,
    /// Rollouts scored together in one forward pass of `logprobs` / `backward`.
    pub score_batch: usize,
    /// Recompute activations layer by layer in `backward` (one more forward pass, far less
    /// memory; what a 14B model needs).
    pub gradient_checkpointing: bool,
    /// `base_model_name_or_path` written into `adapter_config.json`.
    pub base_model: Option<String>,
    /// Keep each rollout's KV cache across its turns, so a turn prefills only what the last
    /// one added (tool responses, the next turn's template tokens) instead of the whole
    /// conversation. Costs memory between turns: every live rollout's cache is held, not only
    /// one `sample_batch`'s, so a large model short of memory may turn it off. A cache goes
    /// after the forced last turn, or when its episode is first scored.
    pub reuse_kv: bool,
}

impl Default for AgentOptions {
    /// The seeds' sampling: top-p 0.9, top-k 50, 4096 generated tokens per rollout.
    fn default() -> Self {
        Self {
            instructions: DEFAULT_INSTRUCTIONS.to_owned(),
            top_p: 0.9,
            top_k: 50,
            max_new_tokens: 4096,
            max_completion_tokens: 4096,
            sample_batch: 8,
            score_batch: 1,
            gradient_checkpointing: true,
            base_model: None,
            reuse_kv: true,
        }
    }
}

/// Qwen3 with LoRA adapters, its tokenizer, the accumulated gradient and AdamW.
#[derive(Debug)]
pub struct Qwen3Agent {
    model: Qwen3Model,
    tokenizer: QwenTokenizer,
    options: AgentOptions,
    sampling: SamplingParams,
    /// Adapter variables under their names (`<module>.lora_A` / `.lora_B`), in model order.
    vars: Vec<(String, Var)>,
    /// Gradient summed over `backward` calls since the last `step`.
    grads: Vec<Option<Tensor>>,
    adam: AdamW,
    /// Prompt tokens prefilled by `act` so far (cached ones excluded), for benchmarks.
    prefilled: AtomicU64,
}

/// Checkpoint of a [`Qwen3Agent`]: adapter shape, adapter values, AdamW moments and step count.
/// Base weights are not included (they never change and come from the model directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qwen3AgentState {
    /// The adapters' rank `r`; restoring into adapters of another rank is an error.
    pub lora_rank: usize,
    /// The adapters' `α`; restoring into adapters of another `α` is an error.
    pub lora_alpha: f64,
    /// AdamW steps taken.
    pub step: u64,
    /// Every adapter variable with its moments, in the model's projection order.
    pub vars: Vec<VarState>,
    /// The adapters frozen as the KL reference (the SFT reference), one per entry of `vars`
    /// and in its order; empty when the reference is the base model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference: Vec<ReferenceState>,
}

impl Qwen3Agent {
    /// Loads a Hugging Face checkpoint directory with fresh adapters (`policy.lora`).
    pub fn load(dir: &Path, policy: &PolicyOptions, options: AgentOptions) -> Result<Self> {
        let model = Qwen3Model::load(dir, policy.dtype, &policy.device, Some(&policy.lora))?;
        let tokenizer = QwenTokenizer::from_file(&dir.join("tokenizer.json"))?;
        Self::new(model, tokenizer, options)
    }

    /// Wraps a loaded model; its adapters (shared, not copied) are what GRPO trains.
    pub fn new(model: Qwen3Model, tokenizer: QwenTokenizer, options: AgentOptions) -> Result<Self> {
        if model.lora_config().is_none() {
            return Err(Error::Invalid("the Qwen3 agent needs a model built with LoRA adapters".into()));
        }
        if options.max_new_tokens == 0
            || options.max_completion_tokens == 0
            || options.sample_batch == 0
            || options.score_batch == 0
        {
            return Err(Error::Invalid(
                "max_new_tokens, max_completion_tokens, sample_batch and score_batch must be positive".into(),
            ));
        }
        let mut vars = Vec::new();
        for (name, linear) in model.linears() {
            if let Some(ad) = linear.adapter() {
                vars.push((format!("{name}.lora_A"), ad.a.clone()));
                vars.push((format!("{name}.lora_B"), ad.b.clone()));
            }
        }
        let plain: Vec<Var> = vars.iter().map(|(_, v)| v.clone()).collect();
        let adam = AdamW::new(&plain)?;
        let sampling = SamplingParams {
            temperature: 1.0,
            top_p: options.top_p,
            top_k: options.top_k,
            max_new_tokens: options.max_new_tokens,
            stop_tokens: vec![tokenizer.special().im_end, tokenizer.special().endoftext],
        };
        Ok(Self {
            grads: vec![None; vars.len()],
            model,
            tokenizer,
            options,
            sampling,
            vars,
            adam,
            prefilled: AtomicU64::new(0),
        })
    }

    /// Continues from an already-loaded (e.g. SFT-trained) policy: its model and adapters are
    /// moved in as they are, with fresh AdamW moments.
    pub fn from_policy(policy: Qwen3Policy, options: AgentOptions) -> Result<Self> {
        let (model, tokenizer) = policy.into_parts();
        Self::new(model, tokenizer, options)
    }

    /// The model, adapters included.
    pub fn model(&self) -> &Qwen3Model {
        &self.model
    }

    /// The tokenizer the agent encodes and decodes with.
    pub fn tokenizer(&self) -> &QwenTokenizer {
        &self.tokenizer
    }

    /// Prompt tokens `act` has prefilled so far; tokens served from a kept KV cache
    /// ([`AgentOptions::reuse_kv`]) are not counted.
    pub fn prefilled_tokens(&self) -> u64 {
        self.prefilled.load(Ordering::Relaxed)
    }

    /// The options the agent was built with.
    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    /// The adapter shape.
    pub fn lora_config(&self) -> &LoraConfig {
        self.model.lora_config().expect("Qwen3Agent::new checked that the model has adapters")
    }

    /// Makes the adapters' current values the KL reference (the SFT reference: call it after
    /// the warm start), instead of the base model. The frozen copy is part of [`Policy::state`].
    pub fn freeze_reference(&self) -> Result<()> {
        self.model.freeze_reference()
    }

    /// Writes the adapters in PEFT format (`adapter_config.json`, `adapter_model.safetensors`).
    pub fn save_adapter(&self, dir: &Path) -> Result<()> {
        crate::peft::save_adapter(&self.model, dir, self.options.base_model.as_deref())
    }

    /// Log-probs of every episode's generated tokens under `pass`, `score_batch` at a time.
    fn score(&self, episodes: &[&Qwen3Episode], pass: Pass) -> Result<Vec<Vec<f64>>> {
        // A scored rollout is over: its kept KV cache would only hold memory through the update.
        episodes.iter().for_each(|e| e.drop_cache());
        let mut out = Vec::with_capacity(episodes.len());
        for chunk in episodes.chunks(self.options.score_batch) {
            let batch = ScoreBatch::new(&sequences(chunk), &self.model)?;
            out.extend(batch.logprobs(&self.model, pass)?);
        }
        Ok(out)
    }
}

fn sequences<'a>(episodes: &[&'a Qwen3Episode]) -> Vec<Sequence<'a>> {
    episodes
        .iter()
        .map(|e| Sequence {
            tokens: e.rollout.tokens(),
            mask: e.rollout.loss_mask(),
            temperature: e.scoring_temperature(),
        })
        .collect()
}

impl Policy for Qwen3Agent {
    type Episode = Qwen3Episode;
    type State = Qwen3AgentState;
    type Error = Error;

    /// Fails when the tokenizer cannot encode the prompt.
    fn begin(&self, task: &TaskPrompt, sampling: Sampling, seed: u64) -> Result<Qwen3Episode> {
        let rollout = Rollout::new(&self.tokenizer, &self.options.instructions, &task.text)?;
        let temperature = match sampling {
            Sampling::Sample { temperature } if temperature > 0.0 => temperature as f32,
            _ => 0.0,
        };
        Ok(Qwen3Episode {
            rollout,
            rng: ChaCha8Rng::seed_from_u64(seed),
            temperature,
            entropies: Vec::new(),
            turns: Vec::new(),
            cache: std::sync::Mutex::new(None),
        })
    }

    /// Samples the turn of every episode in `episodes` (one batched generation per
    /// `sample_batch` rows); fails on a tensor or tokenizer error.
    fn act(&self, episodes: &mut [&mut Qwen3Episode], turn: TurnInfo) -> Result<Vec<TurnOutput>> {
        let max_pos = self.model.config().max_position_embeddings;
        let mut outputs: Vec<Option<TurnOutput>> = vec![None; episodes.len()];
        let mut rows = Vec::new();
        let mut row_of = Vec::new();
        for (i, episode) in episodes.iter_mut().enumerate() {
            if turn.must_answer {
                episode.rollout.push_user(&self.tokenizer, LAST_TURN_NOTE)?;
            }
            let prompt = episode.rollout.prompt(&self.tokenizer)?;
            let spent = episode.rollout.generated_len();
            let limit = self
                .options
                .max_new_tokens
                .min(self.options.max_completion_tokens.saturating_sub(spent))
                .min(max_pos.saturating_sub(prompt.len()));
            if limit == 0 {
                episode.set_cache(None);
                outputs[i] = Some(TurnOutput::Truncated);
                continue;
            }
            row_of.push(i);
            let prefix = episode.take_cache();
            rows.push(Row { prompt, limit, temperature: episode.temperature, rng: &mut episode.rng, prefix });
        }
        let keep = self.options.reuse_kv && !turn.must_answer;
        let mut sampled = Vec::with_capacity(rows.len());
        for chunk in rows.chunks_mut(self.options.sample_batch) {
            sampled.extend(generate_rows(&self.model, chunk, &self.sampling, keep)?);
        }
        drop(rows);
        for (i, s) in row_of.into_iter().zip(sampled) {
            let episode = &mut *episodes[i];
            self.prefilled.fetch_add(s.prefilled as u64, Ordering::Relaxed);
            episode.rollout.push_generation(&self.tokenizer, &s.tokens, &s.logprobs)?;
            episode.entropies.extend_from_slice(&s.entropies);
            let text = self.tokenizer.decode(&s.tokens)?;
            episode.set_cache(s.prefix);
            outputs[i] = Some(episode::turn_output(&text, s.stopped, turn.must_answer));
            episode.turns.push(text);
        }
        Ok(outputs.into_iter().map(|o| o.expect("every episode got an output above")).collect())
    }

    /// Fails when the tokenizer cannot encode a tool result.
    fn observe(&self, episode: &mut Qwen3Episode, results: &[ToolResult]) -> Result<()> {
        let outputs: Vec<String> = results.iter().map(|r| r.output.clone()).collect();
        episode.rollout.push_tool_responses(&self.tokenizer, &outputs)
    }

    fn completion_tokens(&self, episode: &Qwen3Episode) -> usize {
        episode.rollout.generated_len()
    }

    fn sampled_logprobs(&self, episode: &Qwen3Episode) -> Vec<f64> {
        let r = &episode.rollout;
        r.sampled_logprobs().iter().zip(r.loss_mask()).filter(|(_, m)| **m).map(|(&lp, _)| f64::from(lp)).collect()
    }

    fn entropy(&self, episode: &Qwen3Episode) -> f64 {
        if episode.entropies.is_empty() {
            return 0.0;
        }
        episode.entropies.iter().sum::<f64>() / episode.entropies.len() as f64
    }

    fn logprobs(&self, episodes: &[&Qwen3Episode]) -> Result<Vec<Vec<f64>>> {
        self.score(episodes, Pass::TRAIN)
    }

    fn reference_logprobs(&self, episodes: &[&Qwen3Episode]) -> Result<Vec<Vec<f64>>> {
        self.score(episodes, Pass::REFERENCE)
    }

    fn backward(&mut self, episodes: &[&Qwen3Episode], coeffs: &[Vec<f64>]) -> Result<()> {
        if episodes.len() != coeffs.len() {
            return Err(Error::Invalid(format!("{} episodes but {} coefficient rows", episodes.len(), coeffs.len())));
        }
        episodes.iter().for_each(|e| e.drop_cache());
        let size = self.options.score_batch;
        for (chunk, chunk_coeffs) in episodes.chunks(size).zip(coeffs.chunks(size)) {
            // A chunk whose coefficients are all zero contributes nothing: skip its passes.
            if chunk_coeffs.iter().flatten().all(|&c| c == 0.0) {
                continue;
            }
            let batch = ScoreBatch::new(&sequences(chunk), &self.model)?;
            let grads = batch.backward(&self.model, chunk_coeffs, self.options.gradient_checkpointing)?;
            for ((_, var), acc) in self.vars.iter().zip(self.grads.iter_mut()) {
                if let Some(g) = grads.get(var.as_tensor()) {
                    *acc = Some(match acc.take() {
                        Some(sum) => (sum + g)?,
                        None => g.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    fn step(&mut self, optim: &OptimStep) -> Result<StepStats> {
        let vars: Vec<Var> = self.vars.iter().map(|(_, v)| v.clone()).collect();
        let grad_norm = self.adam.step(&vars, &self.grads, optim)?;
        self.grads = vec![None; self.vars.len()];
        Ok(StepStats { grad_norm })
    }

    fn state(&self) -> Result<Qwen3AgentState> {
        let lora = self.lora_config();
        let flat = |t: &Tensor| -> Result<Vec<f32>> { Ok(t.flatten_all()?.to_vec1::<f32>()?) };
        let mut vars = Vec::with_capacity(self.vars.len());
        for (i, (name, var)) in self.vars.iter().enumerate() {
            vars.push(VarState {
                name: name.clone(),
                shape: var.dims().to_vec(),
                value: flat(var.as_tensor())?,
                m: flat(&self.adam.m[i])?,
                v: flat(&self.adam.v[i])?,
            });
        }
        let mut reference = Vec::new();
        for (name, linear) in self.model.linears() {
            if let Some((a, b)) = linear.adapter().map(|ad| ad.reference()).transpose()?.flatten() {
                for (suffix, t) in [("lora_A", a), ("lora_B", b)] {
                    reference.push(ReferenceState {
                        name: format!("{name}.{suffix}"),
                        shape: t.dims().to_vec(),
                        value: flat(&t)?,
                    });
                }
            }
        }
        Ok(Qwen3AgentState { lora_rank: lora.r, lora_alpha: lora.alpha, step: self.adam.t, vars, reference })
    }

    /// Refuses a state of another adapter shape (rank, α, adapter names or shapes) with
    /// [`Error::Invalid`]; every check and conversion happens before anything is applied.
    fn restore(&mut self, state: Qwen3AgentState) -> Result<()> {
        let lora = self.lora_config();
        if state.lora_rank != lora.r || state.lora_alpha != lora.alpha || state.vars.len() != self.vars.len() {
            return Err(Error::Invalid(format!(
                "agent state has r={} α={} and {} adapter matrices; the model has r={} α={} and {}",
                state.lora_rank,
                state.lora_alpha,
                state.vars.len(),
                lora.r,
                lora.alpha,
                self.vars.len()
            )));
        }
        let device = self.model.device().clone();
        let mut m = Vec::with_capacity(self.vars.len());
        let mut v = Vec::with_capacity(self.vars.len());
        let mut values = Vec::with_capacity(self.vars.len());
        for ((name, var), s) in self.vars.iter().zip(&state.vars) {
            state::check_saved_matrix("", &s.name, &s.shape, name, var)?;
            let tensor = |data: &[f32]| Tensor::from_slice(data, s.shape.as_slice(), &device);
            values.push(tensor(&s.value)?);
            m.push(tensor(&s.m)?);
            v.push(tensor(&s.v)?);
        }
        let reference = state::reference_tensors(&state, &self.vars, &device)?;
        // Everything checked and converted: now apply, so a refused state changes nothing.
        for ((_, var), value) in self.vars.iter().zip(&values) {
            var.set(value)?;
        }
        let adapters = self.model.linears().into_iter().filter_map(|(_, l)| l.adapter());
        match reference {
            Some(pairs) => {
                for (ad, pair) in adapters.zip(pairs) {
                    ad.set_reference(Some(pair))?;
                }
            }
            None => {
                for ad in adapters {
                    ad.set_reference(None)?;
                }
            }
        }
        self.adam = AdamW { m, v, t: state.step };
        self.grads = vec![None; self.vars.len()];
        Ok(())
    }
}
