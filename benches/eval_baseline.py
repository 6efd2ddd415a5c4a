#!/usr/bin/env python3
"""The baseline `benches/eval_io.sh` measures `rewardlab eval` against: what a TRL
user writes today, a reward function called once per rollout, GRPO's group
normalisation over the rewards, the same input read and the same output CSV
written, with nothing but the standard library (`csv`, `json`, `math`).

    eval_baseline.py csv   IN.csv   OUT.csv   # CodeGrep v3 on a features CSV
    eval_baseline.py jsonl IN.jsonl OUT.csv   # the bench formula on rollout JSONL

The formulas are the ones `eval_io.sh` hands `rewardlab eval`:
CodeGrep v3 (`reward = Fb(file) * mask(c > 0)`, `advantage = adv * sqrt(min(c / 4, 1))`)
and, for JSONL, `reward = Fb(file) * (0.5 + 0.5 * e) * mask(c > 0)` with the same advantage.
"""

import csv
import json
import math
import sys

BETA = 0.5
EPS = 1e-4


def f_beta(predicted, target, beta=BETA):
    p, t = set(predicted), set(target)
    if not p and not t:
        return 1.0
    if not p or not t:
        return 0.0
    tp = len(p & t)
    if tp == 0:
        return 0.0
    b2 = beta * beta
    num = (1 + b2) * tp
    return num / (num + b2 * (len(t) - tp) + (len(p) - tp))


def entity(tool, e):
    return e


def tool_efficiency(turns):
    seen = set()
    total, n = 0.0, 0
    for turn in turns:
        for call in turn:
            n += 1
            ents = set(call["entities"])
            if ents:
                new = len(ents - seen)
                total += new / len(ents)
                seen |= ents
    return total / n if n else 0.0


def calls_per_turn(turns):
    return sum(len(t) for t in turns) / len(turns) if turns else 0.0


def reward_v3(fb, c):
    return fb if c > 0 else 0.0


def reward_jsonl(fb, c, e):
    return fb * (0.5 + 0.5 * e) if c > 0 else 0.0


def discount(c):
    return math.sqrt(min(c / 4, 1.0))


def grpo(rows):
    """rows: list of (group, reward, c); returns (adv, advantage) per row, in input order."""
    by_group = {}
    for i, (g, r, _) in enumerate(rows):
        by_group.setdefault(g, []).append(i)
    adv = [0.0] * len(rows)
    for members in by_group.values():
        rs = [rows[i][1] for i in members]
        mean = sum(rs) / len(rs)
        std = math.sqrt(sum((x - mean) ** 2 for x in rs) / len(rs))
        for i in members:
            adv[i] = (rows[i][1] - mean) / (std + EPS)
    return adv, [a * discount(rows[i][2]) for i, a in enumerate(adv)]


def main():
    kind, src, dst = sys.argv[1:4]
    out_rows = []
    scored = []
    if kind == "csv":
        with open(src, newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            gi, fi, ci = header.index("group"), header.index("Fb(file)"), header.index("c")
            for rec in reader:
                c = float(rec[ci])
                scored.append((rec[gi], reward_v3(float(rec[fi]), c), c))
                out_rows.append(rec)
    else:
        header = ["group", "Fb(file)", "c", "e"]
        with open(src) as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                turns = r["turns"]
                fb = f_beta(r["predicted"]["files"], r["target"]["files"])
                c = calls_per_turn(turns)
                e = tool_efficiency(turns)
                scored.append((r["group"], reward_jsonl(fb, c, e), c))
                out_rows.append([r["group"], repr(fb), repr(c), repr(e)])
    adv, advantage = grpo(scored)
    with open(dst, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header + ["reward", "adv", "advantage"])
        for rec, (_, r, _), a, av in zip(out_rows, scored, adv, advantage):
            w.writerow(rec + [repr(r), repr(a), repr(av)])


if __name__ == "__main__":
    main()
