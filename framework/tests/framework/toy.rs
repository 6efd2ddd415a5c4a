//! A small log-linear policy over structured actions, with closed-form
//! gradients: the engine's reference policy for its tests (test support, not
//! public API: it lives beside the engine tests that drive it).
//!
//! It is real in every way the engine cares about — it issues real tool calls
//! to the sandbox, reads their entities, samples from a softmax seeded per
//! episode, reports per-decision log-probs, learns by AdamW — but it is
//! deliberately tiny (23 parameters) and not the study proxy policy, which
//! lives in `rewardlab-models`.
//!
//! Each decision is a softmax over options `j` with logits `θ·φ_j / T`
//! (sparse features `φ_j`); a decision with one option is not sampled and has
//! no unit. Decisions, in order:
//!
//! 1. *search or answer* (turns before the last): search has features
//!    `[1, turn / max_turns, any file seen]`, answer has none;
//! 2. *how many calls* (1–4, one-hot);
//! 3. per call, *which tool* (grep, glob, read; read only once a file was seen);
//! 4. *which argument*: an issue term for grep (`[quoted, identifier-like,
//!    already used]`), an identifier for glob (same features, own weights),
//!    a seen, unread file for read (`[ln(1 + hits), a term in the path]`);
//! 5. at the answer, per seen file (first 12, in order of discovery),
//!    *include or not* (`[1, ln(1 + hits), was read, a term in the path,
//!    discovery rank / 12]`). Included files with grep hits get the line range
//!    spanning their hits.
//!
//! The gradient of a unit's log-prob is `(φ_chosen − Σ_j p_j φ_j) / T`.

use std::convert::Infallible;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rewardlab_models::agent::{Answer, OptimStep, Policy, Sampling, StepStats, TaskPrompt, TurnInfo, TurnOutput};
use rewardlab_models::proxy::AdamW;
use rewardlab_sandbox::{GlobArgs, GrepArgs, ReadArgs, ToolCall, ToolResult, escape_regex};
use serde::{Deserialize, Serialize};

const SEARCH: usize = 0;
const NCALLS: usize = 3;
const TOOL: usize = 7;
const GREP_TERM: usize = 10;
const GLOB_TERM: usize = 13;
const READ_PATH: usize = 16;
const INCLUDE: usize = 18;
/// Number of parameters.
pub const TOY_DIM: usize = 23;
const MAX_TERMS: usize = 16;
const MAX_CANDIDATES: usize = 12;

/// The log-linear policy: parameters, the frozen reference, AdamW moments and the gradient.
#[derive(Clone, Debug, PartialEq)]
pub struct ToyPolicy {
    theta: Vec<f64>,
    reference: Vec<f64>,
    grad: Vec<f64>,
    adam: AdamW,
}

/// Checkpoint of a [`ToyPolicy`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToyState {
    pub theta: Vec<f64>,
    pub reference: Vec<f64>,
    pub m: Vec<f64>,
    pub v: Vec<f64>,
    pub t: u64,
}

/// Twenty-three parameters: the whole state stays JSON.
impl rewardlab_models::agent::PolicyState for ToyState {}

/// One rollout of the toy policy.
#[derive(Clone, Debug)]
pub struct ToyEpisode {
    rng: ChaCha8Rng,
    /// `None` when greedy.
    temperature: Option<f64>,
    terms: Vec<Term>,
    seen: Vec<Seen>,
    units: Vec<Unit>,
    /// The tools of the calls awaiting results, in call order.
    awaiting: Vec<ToolCall>,
    tokens: usize,
    context_chars: usize,
}

#[derive(Clone, Debug)]
struct Term {
    text: String,
    quoted: bool,
    identifier: bool,
    used: bool,
}

#[derive(Clone, Debug)]
struct Seen {
    path: String,
    hits: usize,
    lines: Option<(u32, u32)>,
    read: bool,
}

/// One sampled decision: its options' sparse features and the choice.
#[derive(Clone, Debug)]
struct Unit {
    options: Vec<Vec<(usize, f64)>>,
    chosen: usize,
    temperature: f64,
    logp: f64,
    entropy: f64,
}

impl Default for ToyPolicy {
    fn default() -> Self {
        let mut theta = vec![0.0; TOY_DIM];
        // A mild prior: search at first, prefer files that grep hit.
        theta[SEARCH] = 1.0;
        theta[SEARCH + 1] = -1.5;
        theta[INCLUDE] = -0.5;
        theta[INCLUDE + 1] = 0.5;
        ToyPolicy::with_params(theta)
    }
}

impl ToyPolicy {
    /// A policy starting (and with its reference) at `theta` (length [`TOY_DIM`]).
    pub fn with_params(theta: Vec<f64>) -> ToyPolicy {
        assert_eq!(theta.len(), TOY_DIM, "the toy policy has {TOY_DIM} parameters");
        ToyPolicy { reference: theta.clone(), theta, grad: vec![0.0; TOY_DIM], adam: AdamW::new(TOY_DIM) }
    }

    pub fn params(&self) -> &[f64] {
        &self.theta
    }

    /// The accumulated, not yet applied gradient.
    pub fn gradient(&self) -> &[f64] {
        &self.grad
    }
}

impl ToyEpisode {
    /// Characters of tool output this episode has observed (context, never units).
    pub fn context_chars(&self) -> usize {
        self.context_chars
    }

    /// The chosen option of each unit, in order.
    pub fn choices(&self) -> Vec<usize> {
        self.units.iter().map(|u| u.chosen).collect()
    }

    fn sample(&mut self, theta: &[f64], options: Vec<Vec<(usize, f64)>>) -> usize {
        if options.len() <= 1 {
            return 0;
        }
        let temperature = self.temperature.unwrap_or(1.0);
        let probs = softmax(theta, &options, temperature);
        let chosen = match self.temperature {
            None => probs.iter().enumerate().fold(0, |best, (j, &p)| if p > probs[best] { j } else { best }),
            Some(_) => {
                let u: f64 = self.rng.random();
                let mut acc = 0.0;
                probs
                    .iter()
                    .position(|&p| {
                        acc += p;
                        u < acc
                    })
                    .unwrap_or(probs.len() - 1)
            }
        };
        let entropy = -probs.iter().filter(|&&p| p > 0.0).map(|&p| p * p.ln()).sum::<f64>();
        let mut unit = Unit { options, chosen, temperature, logp: 0.0, entropy };
        // The same log-softmax as `Policy::logprobs`, so an on-policy ratio is exactly 1.
        unit.logp = unit_logp(theta, &unit);
        self.units.push(unit);
        chosen
    }

    fn term_features(term: &Term) -> [f64; 3] {
        [f64::from(u8::from(term.quoted)), f64::from(u8::from(term.identifier)), f64::from(u8::from(term.used))]
    }

    fn path_has_term(&self, path: &str) -> bool {
        let lower = path.to_lowercase();
        self.terms.iter().any(|t| t.identifier && lower.contains(&last_component(&t.text).to_lowercase()))
    }

    fn glob_terms(&self) -> Vec<usize> {
        (0..self.terms.len())
            .filter(|&i| {
                let t = &self.terms[i];
                t.identifier && last_component(&t.text).chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
            .collect()
    }

    fn act_one(&mut self, theta: &[f64], turn: TurnInfo) -> TurnOutput {
        if !turn.must_answer {
            let frac = turn.index as f64 / turn.max_turns as f64;
            let any_seen = f64::from(u8::from(!self.seen.is_empty()));
            let search = vec![(SEARCH, 1.0), (SEARCH + 1, frac), (SEARCH + 2, any_seen)];
            if self.sample(theta, vec![search, Vec::new()]) == 0
                && let Some(calls) = self.search(theta, turn.max_calls_per_turn)
            {
                return TurnOutput::Calls(calls.into_iter().map(Ok).collect());
            }
        }
        self.answer(theta)
    }

    fn search(&mut self, theta: &[f64], max_calls: usize) -> Option<Vec<ToolCall>> {
        let counts = max_calls.clamp(1, 4);
        let k = 1 + self.sample(theta, (0..counts).map(|i| vec![(NCALLS + i, 1.0)]).collect());
        let mut calls = Vec::with_capacity(k);
        for _ in 0..k {
            let unread: Vec<usize> = (0..self.seen.len()).filter(|&i| !self.seen[i].read).collect();
            let globs = self.glob_terms();
            let mut tools = Vec::new();
            if !self.terms.is_empty() {
                tools.push(0);
            }
            if !globs.is_empty() {
                tools.push(1);
            }
            if !unread.is_empty() {
                tools.push(2);
            }
            if tools.is_empty() {
                break;
            }
            let tool = tools[self.sample(theta, tools.iter().map(|&t| vec![(TOOL + t, 1.0)]).collect())];
            let call = match tool {
                0 => {
                    let options =
                        self.terms.iter().map(|t| feature_block(GREP_TERM, &Self::term_features(t))).collect();
                    let i = self.sample(theta, options);
                    self.terms[i].used = true;
                    ToolCall::Grep(GrepArgs {
                        pattern: escape_regex(&self.terms[i].text),
                        path: None,
                        case_sensitive: None,
                    })
                }
                1 => {
                    let options =
                        globs.iter().map(|&i| feature_block(GLOB_TERM, &Self::term_features(&self.terms[i]))).collect();
                    let i = globs[self.sample(theta, options)];
                    self.terms[i].used = true;
                    ToolCall::Glob(GlobArgs { pattern: format!("**/*{}*", last_component(&self.terms[i].text)) })
                }
                _ => {
                    let options = unread
                        .iter()
                        .map(|&i| {
                            let s = &self.seen[i];
                            let has_term = f64::from(u8::from(self.path_has_term(&s.path)));
                            feature_block(READ_PATH, &[(1.0 + s.hits as f64).ln(), has_term])
                        })
                        .collect();
                    let i = unread[self.sample(theta, options)];
                    self.seen[i].read = true;
                    ToolCall::Read(ReadArgs { path: self.seen[i].path.clone(), start: None, end: Some(200) })
                }
            };
            self.tokens += 8 + call.to_json().to_string().len() / 4;
            calls.push(call);
        }
        if calls.is_empty() {
            return None;
        }
        self.awaiting = calls.clone();
        Some(calls)
    }

    fn answer(&mut self, theta: &[f64]) -> TurnOutput {
        let n = self.seen.len().min(MAX_CANDIDATES);
        let mut files = Vec::new();
        let mut line_ranges = Vec::new();
        for i in 0..n {
            let s = &self.seen[i];
            let include = feature_block(
                INCLUDE,
                &[
                    1.0,
                    (1.0 + s.hits as f64).ln(),
                    f64::from(u8::from(s.read)),
                    f64::from(u8::from(self.path_has_term(&s.path))),
                    i as f64 / MAX_CANDIDATES as f64,
                ],
            );
            if self.sample(theta, vec![include, Vec::new()]) == 0 {
                let s = &self.seen[i];
                files.push(s.path.clone());
                if let Some((lo, hi)) = s.lines {
                    line_ranges.push(format!("{}:{lo}-{hi}", s.path));
                }
                self.tokens += 2 + s.path.len() / 4;
            }
        }
        self.tokens += 4;
        TurnOutput::Answer(Answer::Structured { files, line_ranges })
    }

    fn observe_one(&mut self, call: Option<&ToolCall>, result: &ToolResult) {
        self.context_chars += result.output.chars().count();
        if let Some(ToolCall::Read(args)) = call
            && let Some(s) = self.seen.iter_mut().find(|s| s.path == args.path)
        {
            s.read = true;
            return;
        }
        for entity in &result.entities {
            let (path, line) = (entity.path(), entity.line_number().and_then(|l| u32::try_from(l).ok()));
            let index = match self.seen.iter().position(|s| s.path == path) {
                Some(i) => i,
                None => {
                    self.seen.push(Seen { path: path.to_owned(), hits: 0, lines: None, read: false });
                    self.seen.len() - 1
                }
            };
            let s = &mut self.seen[index];
            if let Some(line) = line {
                s.hits += 1;
                s.lines = Some(s.lines.map_or((line, line), |(lo, hi)| (lo.min(line), hi.max(line))));
            }
        }
    }
}

impl Policy for ToyPolicy {
    type Episode = ToyEpisode;
    type State = ToyState;
    type Error = Infallible;

    fn begin(&self, task: &TaskPrompt, sampling: Sampling, seed: u64) -> Result<ToyEpisode, Infallible> {
        Ok(ToyEpisode {
            rng: ChaCha8Rng::seed_from_u64(seed),
            temperature: match sampling {
                Sampling::Greedy => None,
                Sampling::Sample { temperature } => Some(temperature),
            },
            terms: issue_terms(&task.text),
            seen: Vec::new(),
            units: Vec::new(),
            awaiting: Vec::new(),
            tokens: 0,
            context_chars: task.text.chars().count(),
        })
    }

    fn act(&self, episodes: &mut [&mut ToyEpisode], turn: TurnInfo) -> Result<Vec<TurnOutput>, Infallible> {
        Ok(episodes.iter_mut().map(|e| e.act_one(&self.theta, turn)).collect())
    }

    fn observe(&self, episode: &mut ToyEpisode, results: &[ToolResult]) -> Result<(), Infallible> {
        let calls = std::mem::take(&mut episode.awaiting);
        for (i, result) in results.iter().enumerate() {
            episode.observe_one(calls.get(i), result);
        }
        Ok(())
    }

    fn completion_tokens(&self, episode: &ToyEpisode) -> usize {
        episode.tokens
    }

    fn sampled_logprobs(&self, episode: &ToyEpisode) -> Vec<f64> {
        episode.units.iter().map(|u| u.logp).collect()
    }

    fn entropy(&self, episode: &ToyEpisode) -> f64 {
        if episode.units.is_empty() {
            return 0.0;
        }
        episode.units.iter().map(|u| u.entropy).sum::<f64>() / episode.units.len() as f64
    }

    fn logprobs(&self, episodes: &[&ToyEpisode]) -> Result<Vec<Vec<f64>>, Infallible> {
        Ok(episodes.iter().map(|e| e.units.iter().map(|u| unit_logp(&self.theta, u)).collect()).collect())
    }

    fn reference_logprobs(&self, episodes: &[&ToyEpisode]) -> Result<Vec<Vec<f64>>, Infallible> {
        Ok(episodes.iter().map(|e| e.units.iter().map(|u| unit_logp(&self.reference, u)).collect()).collect())
    }

    fn backward(&mut self, episodes: &[&ToyEpisode], coeffs: &[Vec<f64>]) -> Result<(), Infallible> {
        for (episode, coeffs) in episodes.iter().zip(coeffs) {
            for (unit, &c) in episode.units.iter().zip(coeffs) {
                if c == 0.0 {
                    continue;
                }
                let probs = softmax(&self.theta, &unit.options, unit.temperature);
                for (j, option) in unit.options.iter().enumerate() {
                    let weight = f64::from(u8::from(j == unit.chosen)) - probs[j];
                    for &(k, x) in option {
                        self.grad[k] += c * weight * x / unit.temperature;
                    }
                }
            }
        }
        Ok(())
    }

    fn step(&mut self, optim: &OptimStep) -> Result<StepStats, Infallible> {
        Ok(StepStats { grad_norm: self.adam.step(&mut self.theta, &mut self.grad, optim) })
    }

    fn state(&self) -> Result<ToyState, Infallible> {
        Ok(ToyState {
            theta: self.theta.clone(),
            reference: self.reference.clone(),
            m: self.adam.m.clone(),
            v: self.adam.v.clone(),
            t: self.adam.t,
        })
    }

    fn restore(&mut self, state: ToyState) -> Result<(), Infallible> {
        self.theta = state.theta;
        self.reference = state.reference;
        self.adam = AdamW { m: state.m, v: state.v, t: state.t };
        self.grad = vec![0.0; TOY_DIM];
        Ok(())
    }
}

/// `[(offset, x0), (offset + 1, x1), ...]`.
fn feature_block(offset: usize, values: &[f64]) -> Vec<(usize, f64)> {
    values.iter().enumerate().map(|(i, &x)| (offset + i, x)).collect()
}

fn softmax(theta: &[f64], options: &[Vec<(usize, f64)>], temperature: f64) -> Vec<f64> {
    let logits: Vec<f64> =
        options.iter().map(|o| o.iter().map(|&(k, x)| theta[k] * x).sum::<f64>() / temperature).collect();
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

fn unit_logp(theta: &[f64], unit: &Unit) -> f64 {
    let logits: Vec<f64> =
        unit.options.iter().map(|o| o.iter().map(|&(k, x)| theta[k] * x).sum::<f64>() / unit.temperature).collect();
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lse = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
    logits[unit.chosen] - lse
}

/// Terms a reporter might grep for: quoted strings first, then identifier-like and long words.
fn issue_terms(text: &str) -> Vec<Term> {
    let mut terms: Vec<Term> = Vec::new();
    let push = |terms: &mut Vec<Term>, text: &str, quoted: bool| {
        let identifier = text.contains('_')
            || text.trim_matches('.').contains('.')
            || text.chars().skip(1).any(|c| c.is_ascii_uppercase());
        if terms.len() < MAX_TERMS && !terms.iter().any(|t| t.text == text) {
            terms.push(Term { text: text.to_owned(), quoted, identifier: identifier && !quoted, used: false });
        }
    };
    for delimiter in ['`', '"'] {
        for (i, piece) in text.split(delimiter).enumerate() {
            let piece = piece.trim();
            if i % 2 == 1 && (4..=80).contains(&piece.chars().count()) && !piece.contains('\n') {
                push(&mut terms, piece, true);
            }
        }
    }
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        let word = word.trim_matches('.');
        let long = word.len() >= 6;
        let ident = word.contains('_') || word.contains('.') || word.chars().skip(1).any(|c| c.is_ascii_uppercase());
        if (long || ident) && word.len() >= 3 && !word.chars().all(|c| c.is_ascii_digit() || c == '.') {
            push(&mut terms, word, false);
        }
    }
    terms
}

fn last_component(term: &str) -> &str {
    term.rsplit('.').next().unwrap_or(term)
}

#[cfg(test)]
mod tests {
    use rewardlab_sandbox::Entity;

    use super::*;

    fn episode_with_units(policy: &ToyPolicy, seed: u64) -> ToyEpisode {
        let prompt =
            TaskPrompt { id: "t".into(), text: "`parse_config failed` in ConfigLoader.load with settings_path".into() };
        let mut e = policy.begin(&prompt, Sampling::Sample { temperature: 0.7 }, seed).expect("begin");
        let result = ToolResult {
            output: "a.py:3: x\nb/c.py:9: y".into(),
            entities: vec![Entity::line("a.py", 3), Entity::line("b/c.py", 9), Entity::line("a.py", 5)],
            status: rewardlab_sandbox::Status::Ok,
        };
        for turn in 0..3 {
            let info = TurnInfo { index: turn, max_turns: 3, max_calls_per_turn: 8, must_answer: turn == 2 };
            let out = policy.act(&mut [&mut e], info).expect("act");
            if let TurnOutput::Calls(calls) = &out[0] {
                let replies: Vec<ToolResult> = calls.iter().map(|_| result.clone()).collect();
                policy.observe(&mut e, &replies).expect("observe");
            } else {
                break;
            }
        }
        e
    }

    #[test]
    fn gradient_of_weighted_logprobs_matches_finite_differences() {
        let mut theta: Vec<f64> = (0..TOY_DIM).map(|k| ((k * 7 % 5) as f64 - 2.0) * 0.3).collect();
        theta[SEARCH] = 2.0;
        let mut policy = ToyPolicy::with_params(theta.clone());
        let episodes: Vec<ToyEpisode> = (0..4).map(|s| episode_with_units(&policy, s)).collect();
        let refs: Vec<&ToyEpisode> = episodes.iter().collect();
        let units: usize = episodes.iter().map(|e| e.units.len()).sum();
        assert!(units > 10, "the episodes sample decisions ({units})");
        let coeffs: Vec<Vec<f64>> = episodes
            .iter()
            .enumerate()
            .map(|(i, e)| (0..e.units.len()).map(|u| ((i + u) % 3) as f64 - 1.2).collect())
            .collect();
        policy.backward(&refs, &coeffs).expect("backward");
        let objective = |theta: &[f64]| {
            let p = ToyPolicy::with_params(theta.to_vec());
            p.logprobs(&refs)
                .expect("logprobs")
                .iter()
                .zip(&coeffs)
                .map(|(lp, c)| lp.iter().zip(c).map(|(a, b)| a * b).sum::<f64>())
                .sum::<f64>()
        };
        let h = 1e-6;
        for k in 0..TOY_DIM {
            let mut plus = theta.clone();
            plus[k] += h;
            let mut minus = theta.clone();
            minus[k] -= h;
            let numeric = (objective(&plus) - objective(&minus)) / (2.0 * h);
            assert!((numeric - policy.gradient()[k]).abs() < 1e-6, "param {k}: {numeric} vs {}", policy.gradient()[k]);
        }
        // Sampling log-probs equal the current ones before any update.
        for (e, lp) in episodes.iter().zip(policy.logprobs(&refs).expect("logprobs")) {
            assert_eq!(policy.sampled_logprobs(e), lp);
        }
    }

    #[test]
    fn same_seed_same_decisions_and_greedy_is_deterministic() {
        let policy = ToyPolicy::default();
        assert_eq!(episode_with_units(&policy, 3).choices(), episode_with_units(&policy, 3).choices());
        let differs =
            (0..8).any(|s| episode_with_units(&policy, s).choices() != episode_with_units(&policy, 100 + s).choices());
        assert!(differs, "different seeds sample differently");
    }

    #[test]
    fn adamw_moves_against_the_gradient_and_state_round_trips() {
        let mut policy = ToyPolicy::default();
        let before = policy.params().to_vec();
        policy.grad[INCLUDE] = -3.0;
        let optim =
            OptimStep { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, max_grad_norm: Some(1.0) };
        let stats = policy.step(&optim).expect("step");
        assert_eq!(stats.grad_norm, 3.0);
        assert!((policy.params()[INCLUDE] - (before[INCLUDE] + 0.1)).abs() < 1e-6, "first Adam step is lr·sign(g)");
        assert_eq!(policy.gradient(), &[0.0; TOY_DIM][..]);
        let mut other = ToyPolicy::with_params(vec![0.0; TOY_DIM]);
        other.restore(policy.state().expect("state")).expect("restore");
        assert_eq!(other, policy);
    }

    #[test]
    fn issue_terms_prefer_quotes_and_identifiers() {
        let terms = issue_terms(
            "Calling `load_settings()` raises \"invalid retry budget\" in net.retry when RetryPolicy is used",
        );
        let texts: Vec<&str> = terms.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(&texts[..2], &["load_settings()", "invalid retry budget"]);
        assert!(texts.contains(&"net.retry") && texts.contains(&"RetryPolicy"), "{texts:?}");
        assert_eq!(escape_regex("a.b(c)"), "a\\.b\\(c\\)");
    }
}
