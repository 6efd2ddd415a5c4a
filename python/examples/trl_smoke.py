"""Two GRPO steps of TRL's real GRPOTrainer with a rewardlab reward file and SandboxEnvironment.

Run by scripts/trl-smoke.sh, which installs TRL, writes the tiny random Qwen3
checkpoint (`rewardlab model tiny`) and builds a git repository:

    python trl_smoke.py CHECKPOINT REPO COMMIT STORE REWARD_FILE OUT_DIR

It asserts that rewardlab's reward was computed for every completion and that
the environment was reset for every rollout, and says whether the random model
made any well-formed tool call. Since it rarely does, it then drives
SandboxEnvironment with a hand-written tool-call completion through TRL's own
response parsing (`add_response_schema` + `parse_response`) and scores it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import add_response_schema, parse_response, qwen3_chat_template

import rewardlab
from rewardlab.trl import SandboxEnvironment, reward_function

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

checkpoint, repo, commit, store, reward_file, out_dir = sys.argv[1:7]
NUM_GENERATIONS = 4
STEPS = 2
TARGET = {"files": ["shop/cart.py"], "line_ranges": ["shop/cart.py:5-6"]}

tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(Path(checkpoint) / "tokenizer.json"))
tokenizer.eos_token = "<|im_end|>"
tokenizer.pad_token = "<|endoftext|>"
tokenizer.padding_side = "left"
tokenizer.chat_template = qwen3_chat_template
model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
model.generation_config.eos_token_id = tokenizer.eos_token_id
model.generation_config.pad_token_id = tokenizer.pad_token_id


class Env(SandboxEnvironment):
    """The sandbox environment on this run's store, counting what it did across instances."""

    store = sys.argv[4]
    resets_total = 0
    served_total = 0

    def reset(self, **row):
        """Opens the row's repository at its commit (and counts the reset)."""
        Env.resets_total += 1
        return super().reset(**row)

    def _serve(self, tool, given):
        Env.served_total += 1
        return super()._serve(tool, given)


base = reward_function(reward_file, targets_column="target")
scored: list[list[float | None]] = []


def rewardlab_reward(prompts, completions, completion_ids=None, **kwargs):
    out = base(prompts, completions, completion_ids, **kwargs)
    scored.append(out)
    return out


rewardlab_reward.__name__ = base.__name__

prompt = [{"role": "user", "content": "Which file computes the cart's total? Answer with <answer>{...}</answer>."}]
dataset = Dataset.from_dict(
    {
        "prompt": [prompt] * 4,
        "repo": [repo] * 4,
        "commit": [commit] * 4,
        "target": [json.dumps(TARGET)] * 4,
    }
)
args = GRPOConfig(
    output_dir=out_dir,
    per_device_train_batch_size=NUM_GENERATIONS,
    num_generations=NUM_GENERATIONS,
    max_completion_length=48,
    max_steps=STEPS,
    logging_steps=1,
    learning_rate=1e-4,
    report_to="none",
    save_strategy="no",
    use_cpu=True,
    max_tool_calling_iterations=2,
    seed=0,
)
trainer = GRPOTrainer(
    model=model,
    processing_class=tokenizer,
    reward_funcs=rewardlab_reward,
    environment_factory=Env,
    train_dataset=dataset,
    args=args,
)
trainer.train()

completions_seen = sum(len(batch) for batch in scored)
assert completions_seen == STEPS * NUM_GENERATIONS, (completions_seen, scored)
assert all(isinstance(v, float) for batch in scored for v in batch), scored
assert Env.resets_total == STEPS * NUM_GENERATIONS, Env.resets_total
print(f"trained {STEPS} steps: rewardlab scored {completions_seen} completions: {scored}")
print(f"environments reset {Env.resets_total} times for {STEPS * NUM_GENERATIONS} rollouts")
logged = [k for k in trainer.state.log_history[0] if k.startswith("rewardlab/")]
print(f"logged rewardlab metrics: {sorted(logged)}")
print(f"tool calls the random model made that reached the sandbox: {Env.served_total}")

# A hand-written completion through TRL's own tool-call parsing, then the environment, then the reward.
add_response_schema(tokenizer)
text = '<tool_call>\n{"name": "grep", "arguments": {"pattern": "def total", "path": "*.py"}}\n</tool_call><|im_end|>'
# TRL passes the prompt's ids as the prefix, as its tool loop does after generation.
prefix_text = tokenizer.apply_chat_template(prompt, tools=[Env.grep, Env.glob, Env.read], add_generation_prompt=True,
                                            tokenize=False)
prefix = tokenizer(prefix_text, add_special_tokens=False)["input_ids"]
parsed = parse_response(tokenizer, tokenizer(text, add_special_tokens=False)["input_ids"], prefix=prefix)
assert parsed.get("tool_calls"), parsed
env = Env()
env.reset(prompt=prompt, repo=repo, commit=commit, target=json.dumps(TARGET))
tools = {name: getattr(env, name) for name in ("grep", "glob", "read")}
messages = [parsed]
for call in parsed["tool_calls"]:
    function = call["function"]
    result = tools[function["name"]](**function["arguments"])
    messages.append({"role": "tool", "name": function["name"], "content": result})
    print(f"served {function['name']}({function['arguments']}):\n{result}")
messages.append({"role": "assistant", "content": "<answer>" + json.dumps(TARGET) + "</answer>"})
score = base(prompts=[prompt], completions=[messages], completion_ids=[[0]], target=[json.dumps(TARGET)],
             environments=[env])
print(f"reward of the hand-written completion: {score}")
assert env.calls and env.calls[0]["record"]["entities"], env.calls
assert score[0] is not None and score[0] > 0, score
print("trl smoke: ok")
