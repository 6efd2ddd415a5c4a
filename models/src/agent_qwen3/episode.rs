//! One rollout of the Qwen3 agent, and how a generated turn becomes a [`TurnOutput`].

use std::sync::Mutex;

use rand_chacha::ChaCha8Rng;
use rewardlab_protocol::{AnswerError, ErrorKind, ToolResult, parse_answer};

use crate::agent::{Answer, TurnOutput};
use crate::template::{self, Rollout, ToolCallError};

use super::generate::Prefix;

/// One rollout: its tokens with the loss mask and sampling log-probs ([`Rollout`]), its own
/// RNG (seeded by [`crate::agent::Policy::begin`]), and what each turn generated.
#[derive(Debug)]
pub struct Qwen3Episode {
    pub(crate) rollout: Rollout,
    pub(crate) rng: ChaCha8Rng,
    /// 0 means greedy; log-probs are then taken at T = 1.
    pub(crate) temperature: f32,
    /// Entropy of each generated token's sampling distribution, in generation order.
    pub(crate) entropies: Vec<f64>,
    /// The decoded text of each assistant turn.
    pub(crate) turns: Vec<String>,
    /// The KV cache of the turns so far, kept between turns when
    /// [`super::AgentOptions::reuse_kv`] is on. It goes after the forced last turn, and
    /// otherwise when the episode is first scored (a rollout that answered early is scored,
    /// never continued); the lock lets scoring, which only borrows episodes, drop it.
    pub(crate) cache: Mutex<Option<Prefix>>,
}

impl Clone for Qwen3Episode {
    /// A clone shares the cached keys and values (tensors are reference-counted).
    fn clone(&self) -> Self {
        Self {
            rollout: self.rollout.clone(),
            rng: self.rng.clone(),
            temperature: self.temperature,
            entropies: self.entropies.clone(),
            turns: self.turns.clone(),
            cache: Mutex::new(self.cache.lock().ok().and_then(|c| c.clone())),
        }
    }
}

impl Qwen3Episode {
    /// The rollout's tokens, loss mask and sampling log-probs.
    pub fn rollout(&self) -> &Rollout {
        &self.rollout
    }

    /// The decoded text of each assistant turn so far.
    pub fn turn_texts(&self) -> &[String] {
        &self.turns
    }

    /// Tokens whose keys and values the episode keeps for its next turn (0 when none).
    pub fn cached_tokens(&self) -> usize {
        self.cache.lock().ok().and_then(|c| c.as_ref().map(|p| p.kv.len())).unwrap_or(0)
    }

    /// Takes the kept cache out (a poisoned lock only loses the cache, which is an optimisation).
    pub(crate) fn take_cache(&mut self) -> Option<Prefix> {
        self.cache.get_mut().ok().and_then(Option::take)
    }

    /// Frees the kept cache through a shared borrow (when the episode is scored).
    pub(crate) fn drop_cache(&self) {
        if let Ok(mut c) = self.cache.lock() {
            *c = None;
        }
    }

    pub(crate) fn set_cache(&mut self, prefix: Option<Prefix>) {
        self.cache = Mutex::new(prefix);
    }

    /// The temperature log-probs are taken at (1 for greedy episodes).
    pub(crate) fn scoring_temperature(&self) -> f32 {
        if self.temperature > 0.0 { self.temperature } else { 1.0 }
    }
}

/// What a generated assistant turn means for the engine.
///
/// - An `<answer>` block in the reply ends the rollout with [`Answer::Text`], whether or not it
///   is valid: [`parse_answer`], the one answer parser, decides that, here and in the engine. An
///   answer cut off by the token limit is [`TurnOutput::Truncated`].
/// - On the forced last turn (`must_answer`), a turn without an answer is a (invalid) text
///   answer when the model ended its turn, and truncated when it ran out of tokens.
/// - Otherwise `<tool_call>` blocks become calls; each malformed block becomes an error result
///   in its place, shown to the model as that call's response.
/// - A turn with neither calls nor an answer is a (invalid) text answer when the model ended
///   its turn, and truncated when it ran out of tokens.
pub(crate) fn turn_output(text: &str, stopped: bool, must_answer: bool) -> TurnOutput {
    match parse_answer(text) {
        Err(AnswerError::MissingOpenTag) => {}
        Err(AnswerError::MissingCloseTag) if !stopped => return TurnOutput::Truncated,
        _ => return TurnOutput::Answer(Answer::Text(text.to_owned())),
    }
    let out_of_tokens_or_prose = || {
        if stopped { TurnOutput::Answer(Answer::Text(text.to_owned())) } else { TurnOutput::Truncated }
    };
    if must_answer {
        return out_of_tokens_or_prose();
    }
    let calls = template::parse_tool_calls(text);
    if calls.is_empty() {
        return out_of_tokens_or_prose();
    }
    TurnOutput::Calls(calls.into_iter().map(|c| c.map_err(|e| call_error(&e))).collect())
}

/// The error result the model sees for a malformed `<tool_call>` block.
pub(crate) fn call_error(error: &ToolCallError) -> ToolResult {
    let kind = match error {
        ToolCallError::UnknownTool(_) => ErrorKind::UnknownTool,
        ToolCallError::TooMany { .. } => ErrorKind::CallLimit,
        _ => ErrorKind::InvalidCall,
    };
    ToolResult::error(kind, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rewardlab_protocol::{GrepArgs, ReadArgs, Status, ToolCall};

    #[test]
    fn calls_become_sandbox_calls_and_malformed_ones_tool_errors() {
        let text = "<think>look for it</think>\n<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"pattern\": \"fn main\"}}\n</tool_call>\n<tool_call>{\"name\": \"read\", \"arguments\": {\"path\": \"a.rs\", \"start\": 2}}</tool_call>\n<tool_call>{\"name\": \"grep\", \"arguments\": {\"pattern\": </tool_call>\n<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>";
        let TurnOutput::Calls(calls) = turn_output(text, true, false) else { panic!("expected calls") };
        assert_eq!(calls.len(), 4);
        assert_eq!(
            calls[0],
            Ok(ToolCall::Grep(GrepArgs { pattern: "fn main".into(), path: None, case_sensitive: None }))
        );
        assert_eq!(calls[1], Ok(ToolCall::Read(ReadArgs { path: "a.rs".into(), start: Some(2), end: None })));
        let bad = calls[2].as_ref().expect_err("malformed JSON is a tool error");
        assert_eq!(bad.status, Status::Error(ErrorKind::InvalidCall));
        assert!(bad.output.contains("not valid JSON"), "{}", bad.output);
        let unknown = calls[3].as_ref().expect_err("unknown tool");
        assert_eq!(unknown.status, Status::Error(ErrorKind::UnknownTool));
        // Cut off by the token limit, completed calls still run and the open one is an error.
        let cut = "<tool_call>{\"name\": \"glob\", \"arguments\": {\"pattern\": \"*.rs\"}}</tool_call><tool_call>{\"na";
        let TurnOutput::Calls(calls) = turn_output(cut, false, false) else { panic!("expected calls") };
        assert!(calls[0].is_ok());
        assert!(calls[1].as_ref().is_err_and(|r| r.output.contains("not closed")));
    }

    #[test]
    fn answers_prose_and_running_out_of_tokens() {
        let answer = "<answer>{\"files\": [\"a.py\"], \"line_ranges\": []}</answer><|im_end|>";
        assert_eq!(turn_output(answer, true, false), TurnOutput::Answer(Answer::Text(answer.into())));
        // An answer wins over calls in the same turn.
        let both =
            format!("<tool_call>{{\"name\": \"glob\", \"arguments\": {{\"pattern\": \"*\"}}}}</tool_call>{answer}");
        assert!(matches!(turn_output(&both, true, false), TurnOutput::Answer(_)));
        assert_eq!(turn_output("<answer>{\"files\": [", false, false), TurnOutput::Truncated);
        assert_eq!(
            turn_output("I think it is in a.py", true, false),
            TurnOutput::Answer(Answer::Text("I think it is in a.py".into()))
        );
        assert_eq!(turn_output("I think it is in", false, false), TurnOutput::Truncated);
        // The last turn never runs calls.
        let call = "<tool_call>{\"name\": \"glob\", \"arguments\": {\"pattern\": \"*\"}}</tool_call>";
        assert_eq!(turn_output(call, true, true), TurnOutput::Answer(Answer::Text(call.into())));
        assert_eq!(turn_output(call, false, true), TurnOutput::Truncated);
    }
}
