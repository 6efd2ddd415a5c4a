//! Tokenizer, chat template and the loss mask of a multi-turn rollout.

use rewardlab_models::QwenTokenizer;
use rewardlab_models::template::{self, Rollout};
use rewardlab_models::tiny::build_tokenizer;
use rewardlab_models::tokenizer::SPECIAL_TOKENS;

fn tokenizer() -> QwenTokenizer {
    QwenTokenizer::new(build_tokenizer().expect("train tokenizer")).expect("special tokens present")
}

#[test]
fn tiny_tokenizer_round_trips_and_keeps_special_tokens_whole() {
    let tok = tokenizer();
    assert!(tok.vocab_size() <= rewardlab_models::tiny::TINY_VOCAB);
    assert!(tok.vocab_size() >= 256 + SPECIAL_TOKENS.len() + 100, "merges were learned");
    let text = "<|im_start|>assistant\n<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"pattern\": \"fn main\"}}\n</tool_call><|im_end|>\nünïcødé ✓";
    let ids = tok.encode(text).expect("encode");
    assert_eq!(tok.decode(&ids).expect("decode"), text);
    assert_eq!(ids[0], tok.special().im_start);
    assert!(ids.contains(&tok.special().tool_call) && ids.contains(&tok.special().im_end));
    // Learned merges make common words shorter than their bytes.
    assert!(tok.encode("function").expect("encode").len() < "function".len());
}

#[test]
fn loss_mask_covers_exactly_the_generated_tokens() {
    let tok = tokenizer();
    let mut r = Rollout::new(&tok, "Find the files relevant to the issue.", "Cookies are lost between requests.")
        .expect("rollout");
    let context_len = r.tokens().len();
    assert!(r.loss_mask().iter().all(|&m| !m));

    let turn1 = tok
        .encode("<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"pattern\": \"cookie\"}}\n</tool_call><|im_end|>")
        .expect("turn 1");
    let lp1: Vec<f32> = (0..turn1.len()).map(|i| -0.1 * (i + 1) as f32).collect();
    let prompt1 = r.prompt(&tok).expect("prompt");
    r.push_generation(&tok, &turn1, &lp1).expect("push");
    r.push_tool_responses(&tok, &["requests/sessions.py:12: cookies = {}".to_owned()]).expect("tool");
    // A turn cut by the token limit (no <|im_end|>): the template closes it, unmasked.
    let turn2 = tok.encode("Let me read").expect("turn 2");
    r.push_generation(&tok, &turn2, &vec![-0.5; turn2.len()]).expect("push");
    r.push_tool_responses(&tok, &["error: tool call is not closed".to_owned()]).expect("tool");
    let turn3 = tok
        .encode("<answer>{\"files\": [\"requests/sessions.py\"], \"line_ranges\": []}</answer><|im_end|>")
        .expect("turn 3");
    r.push_generation(&tok, &turn3, &vec![-0.2; turn3.len()]).expect("push");

    // The mask selects exactly the generated tokens, in order, with their log-probs.
    let masked: Vec<u32> = r.tokens().iter().zip(r.loss_mask()).filter(|(_, m)| **m).map(|(t, _)| *t).collect();
    let expected: Vec<u32> = [turn1.clone(), turn2.clone(), turn3.clone()].concat();
    assert_eq!(masked, expected);
    assert_eq!(r.generated_len(), expected.len());
    let lps: Vec<f32> = r.sampled_logprobs().iter().zip(r.loss_mask()).filter(|(_, m)| **m).map(|(l, _)| *l).collect();
    assert_eq!(&lps[..lp1.len()], &lp1[..]);
    assert!(r.sampled_logprobs().iter().zip(r.loss_mask()).all(|(l, m)| *m || *l == 0.0));
    // The policy's own <|im_end|> is trained on; the template's are not.
    let im_end = tok.special().im_end;
    let trained_ends = r.tokens().iter().zip(r.loss_mask()).filter(|(t, m)| **t == im_end && **m).count();
    assert_eq!(trained_ends, 2);
    // The first generated token sits right after the generation prompt.
    assert_eq!(&r.tokens()[..prompt1.len()], &prompt1[..]);
    assert!(r.loss_mask()[prompt1.len()] && !r.loss_mask()[prompt1.len() - 1]);
    assert!(prompt1.len() > context_len);

    // The whole sequence is the rendered chat, token for token.
    let rendered = [
        template::render_turn("system", &template::system_prompt("Find the files relevant to the issue.")),
        template::render_turn("user", "Cookies are lost between requests."),
        template::GENERATION_PROMPT.to_owned(),
        tok.decode(&turn1).expect("d"),
        "\n".to_owned(),
        template::render_tool_responses(&["requests/sessions.py:12: cookies = {}".to_owned()]),
        template::GENERATION_PROMPT.to_owned(),
        "Let me read<|im_end|>\n".to_owned(),
        template::render_tool_responses(&["error: tool call is not closed".to_owned()]),
        template::GENERATION_PROMPT.to_owned(),
        tok.decode(&turn3).expect("d"),
        "\n".to_owned(),
    ]
    .concat();
    assert_eq!(tok.decode(r.tokens()).expect("decode"), rendered);
    assert_eq!(tok.encode(&rendered).expect("encode"), r.tokens());

    // The tool call in turn 1 parses back.
    let calls = template::parse_tool_calls(&tok.decode(&turn1).expect("d"));
    assert!(matches!(&calls[..], [Ok(rewardlab_protocol::ToolCall::Grep(a))] if a.pattern == "cookie"));
}
