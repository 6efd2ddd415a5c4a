#!/usr/bin/env python3
"""Writes the inputs `benches/eval_io.sh` measures on, seeded so every run reads
the same bytes:

    eval_gen.py csv   OUT.csv   ROWS       # group,Fb(file),c  (groups of 8)
    eval_gen.py jsonl OUT.jsonl ROLLOUTS   # contract rollout records (groups of 8)
"""

import json
import random
import sys

GROUP = 8


def unit(rng):
    return 0.0 if rng.randrange(3) == 0 else rng.random()


def csv_rows(out, rows, rng):
    with open(out, "w") as f:
        f.write("group,Fb(file),c\n")
        for i in range(rows):
            f.write(f"repo__issue-{i // GROUP:07d},{unit(rng)!r},{rng.randrange(17) / 2!r}\n")


def path(rng):
    return f"src/pkg{rng.randrange(40)}/module_{rng.randrange(200)}.py"


def rollout(rng, group):
    target = sorted({path(rng) for _ in range(rng.randrange(1, 4))})
    predicted = sorted({rng.choice(target) if rng.random() < 0.6 else path(rng) for _ in range(rng.randrange(0, 4))})
    turns = []
    pool = [path(rng) for _ in range(6)] + target
    for _ in range(rng.randrange(2, 6)):
        turn = []
        for _ in range(rng.randrange(0, 4)):
            tool = rng.choice(["grep", "grep", "read", "glob"])
            hits = [rng.choice(pool) for _ in range(rng.randrange(0, 11))]
            if tool == "glob":
                entities = hits
                args = {"pattern": f"src/pkg{rng.randrange(40)}/**/*.py"}
            elif tool == "read":
                start = rng.randrange(1, 400)
                entities = [f"{p}:{start + k}" for k, p in enumerate(hits[:1] * len(hits))]
                args = {"path": hits[0] if hits else path(rng), "start": start, "end": start + 40}
            else:
                entities = [f"{p}:{rng.randrange(1, 900)}" for p in hits]
                args = {"pattern": f"def handle_{rng.randrange(1000)}\\b", "path": "src"}
            turn.append({"tool": tool, "args": args, "entities": entities})
        turns.append(turn)
    turns.append([])
    return {
        "group": group,
        "predicted": {"files": predicted, "line_ranges": [f"{p}:{(s := rng.randrange(1, 500))}-{s + rng.randrange(40)}" for p in predicted]},
        "target": {"files": target, "line_ranges": [f"{p}:{(s := rng.randrange(1, 500))}-{s + rng.randrange(40)}" for p in target]},
        "turns": turns,
        "completion_tokens": rng.randrange(50, 2000),
        "valid": True,
        "truncated": False,
    }


def jsonl_rows(out, rollouts, rng):
    with open(out, "w") as f:
        for i in range(rollouts):
            f.write(json.dumps(rollout(rng, f"repo__issue-{i // GROUP}")))
            f.write("\n")


def main():
    kind, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(16)
    (csv_rows if kind == "csv" else jsonl_rows)(out, n, rng)


if __name__ == "__main__":
    main()
