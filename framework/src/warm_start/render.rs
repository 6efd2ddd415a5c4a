//! A trajectory as the token sequence the policy would have produced, with its loss mask.
//!
//! The sequence is assembled by [`template::Rollout`], the same builder the Qwen3 policy uses
//! for its own rollouts: system turn (instructions and tools), the issue as the user turn, then
//! per exploration turn the generation prompt, the assistant's text and `<|im_end|>` (trained
//! on), and the tool responses as one user turn (context only); the answer turn last. So SFT
//! trains on exactly the positions GRPO later samples, and on nothing else. A trajectory whose
//! answer falls on the last allowed turn gets the agent's last-turn note before it, as GRPO's
//! rollouts do.

use rewardlab_models::QwenTokenizer;
use rewardlab_models::agent_qwen3::LAST_TURN_NOTE;
use rewardlab_models::template::Rollout;

use super::WarmStartError;
use super::scripted::Trajectory;

/// The system instructions of the Qwen3 agent GRPO runs: trajectories rendered under the same
/// instructions ask for the warm-started behaviour in the same words.
pub use rewardlab_models::agent_qwen3::DEFAULT_INSTRUCTIONS;

/// How GRPO will talk to the policy; the warm start's trajectories are put the same way.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    /// The system turn's text before the tool block (the agent's `instructions`).
    pub instructions: String,
    /// The engine's `max_turns`, answer turn included: the searcher explores for at most
    /// `max_turns - 1` turns, and an answer on the last turn follows the last-turn note.
    pub max_turns: usize,
}

impl Default for Conversation {
    /// The Qwen3 agent's default instructions and the engine's default 4 turns.
    fn default() -> Self {
        Conversation { instructions: DEFAULT_INSTRUCTIONS.to_owned(), max_turns: 4 }
    }
}

/// One training sequence: tokens and the mask of the assistant-generated ones.
#[derive(Clone, Debug, PartialEq)]
pub struct SftExample {
    /// The whole conversation's tokens.
    pub tokens: Vec<u32>,
    /// `true` exactly at assistant-generated tokens, one entry per token.
    pub mask: Vec<bool>,
}

/// Renders a trajectory as `conversation` puts it.
pub fn render(
    trajectory: &Trajectory,
    tokenizer: &QwenTokenizer,
    conversation: &Conversation,
) -> Result<SftExample, WarmStartError> {
    let wrap = |source| WarmStartError::Template { task: trajectory.task_id.clone(), source };
    let mut rollout = Rollout::new(tokenizer, &conversation.instructions, &trajectory.prompt).map_err(wrap)?;
    for turn in &trajectory.turns {
        push_assistant(&mut rollout, tokenizer, &turn.text).map_err(wrap)?;
        let responses: Vec<String> = turn.results.iter().map(|r| r.output.clone()).collect();
        rollout.push_tool_responses(tokenizer, &responses).map_err(wrap)?;
    }
    if trajectory.turns.len() + 1 >= conversation.max_turns {
        rollout.push_user(tokenizer, LAST_TURN_NOTE).map_err(wrap)?;
    }
    push_assistant(&mut rollout, tokenizer, &trajectory.answer).map_err(wrap)?;
    Ok(SftExample { tokens: rollout.tokens().to_vec(), mask: rollout.loss_mask().to_vec() })
}

/// An assistant turn as if generated: the text's tokens and the closing `<|im_end|>`, which the
/// policy must learn to emit too.
fn push_assistant(rollout: &mut Rollout, tokenizer: &QwenTokenizer, text: &str) -> rewardlab_models::Result<()> {
    let mut ids = tokenizer.encode(text)?;
    ids.push(tokenizer.special().im_end);
    let logprobs = vec![0.0; ids.len()];
    rollout.push_generation(tokenizer, &ids, &logprobs)
}
