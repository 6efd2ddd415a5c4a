"""Compares rewardlab's Qwen3 logits with Hugging Face transformers' Qwen3ForCausalLM.

Arguments after the options come in fours: a case name, a checkpoint directory, a PEFT
adapter directory (or "-"), and the safetensors file `rewardlab model logits` wrote for
them. For each case the file's training-path and cached-path logits and per-token
log-probs must match transformers' float32 forward within the tolerance; with an adapter,
transformers' adapted logits must also differ from its base logits (the adapter is live).
Prints one line per case and exits 1 if any case fails.
"""

import argparse
import sys

import torch
from safetensors.torch import load_file
from transformers import Qwen3ForCausalLM


def reference(checkpoint, adapter, ids):
    model = Qwen3ForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    base = None
    with torch.no_grad():
        if adapter != "-":
            from peft import PeftModel

            base = model(ids[None]).logits[0].clone()
            model = PeftModel.from_pretrained(model, adapter)
            model.eval()
        logits = model(ids[None]).logits[0]
    return logits, base


def logprobs(logits, ids):
    return torch.log_softmax(logits[:-1], dim=-1).gather(1, ids[1:, None])[:, 0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    if len(args.cases) % 4:
        parser.error("cases come in fours: NAME CHECKPOINT ADAPTER|- FILE")
    torch.manual_seed(0)
    failed = False
    largest = 0.0
    for i in range(0, len(args.cases), 4):
        name, checkpoint, adapter, path = args.cases[i : i + 4]
        ours = load_file(path)
        ids = ours["ids"].to(torch.long)
        theirs, base = reference(checkpoint, adapter, ids)
        theirs_lp = logprobs(theirs, ids)
        diffs = {
            "train logits": (ours["train_logits"] - theirs).abs().max().item(),
            "cached logits": (ours["cached_logits"] - theirs).abs().max().item(),
            "train log-probs": (ours["train_logprobs"] - theirs_lp).abs().max().item(),
            "cached log-probs": (ours["cached_logprobs"] - theirs_lp).abs().max().item(),
        }
        worst = max(diffs.values())
        largest = max(largest, worst)
        ok = worst <= args.tolerance
        scale = theirs.abs().max().item()
        line = ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
        extra = ""
        if base is not None:
            moved = (theirs - base).abs().max().item()
            extra = f"; the adapter moves transformers' logits by {moved:.2e}"
            if moved <= 10 * args.tolerance:
                ok = False
                extra += " (too little: is the adapter loaded?)"
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max |logit| {scale:.2f}; {line}{extra}")
        failed |= not ok
    print(f"largest difference {largest:.2e} (tolerance {args.tolerance:.0e})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
