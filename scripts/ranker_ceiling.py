"""How far a linear ranker over the proxy's file features can go on the instances of
`rewardlab locate --ranking` files, and what a feature the tools do not provide would add.

Each ranking record holds, for one instance, every file the proxy's answer could have named
(best first by the trained policy's score) with its file features. The policy's answer is its
first candidate. This script fits a conditional logit (a softmax over an instance's candidates,
the gold files as the outcome: the proxy's own ranking model, fitted by maximum likelihood with
an L2 penalty instead of trained by GRPO on mined commits) to the same features, and reports the
F_β (β = 0.5) of answering each instance's top file:

- the policy as trained;
- the fitted ranker scored on the instances it was fitted on (an upper bound: fitted on the
  evaluation itself);
- cross-validated: five folds by instance (every seed's record of an instance in one fold), and
  leaving one repository out at a time.

With --repos and --instances it also reads each candidate's whole file at the instance's base
commit from the mirrors and adds probe features computed from it, one at a time and together.
The proxy's episodes do not show these (a read shows a window of a file, a grep the lines a
pattern matches); the last one a tool call could:
`tfidf` (the issue's words against the whole file, idf over the instance's candidates),
`tfidf_head` (the same over the file's first 100 lines: its docstring and imports, which one read
could show), `top_def` (the file defines a code-shaped name of the issue at module level),
`names_in` (how many such names the file holds), `rare_lines` (ln(1 + the file's lines that hold
an issue word found in at most half of the candidates): what one case-insensitive grep of those
words restricted to the file tells in its cut notice, within the tools' limits). With --pairs N,
also the products of the N features of largest weight in the first fit, two by two (a ranker
that is still log-linear in its features, but no longer linear in the policy's). The comparison
says whether a miss is the features' or the training's: a policy close to the cross-validated fit
has learned what its features allow.

Usage: python ranker_ceiling.py [--instances X.jsonl --repos MIRRORS] RANKING.jsonl [...]
(scripts/ranker-ceiling.sh sets up numpy).
"""

import argparse
import collections
import itertools
import json
import math
import re
import subprocess
import sys

import numpy as np

BETA2 = 0.25


def load(paths):
    """The records (instance id, repo, gold set, candidate paths, feature matrix) and the
    feature names, in the matrices' column order."""
    records, names = [], None
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if names is None and r["candidates"]:
                    names = sorted(r["candidates"][0]["features"])
                records.append(r)
    if names is None:
        sys.exit("no record has a candidate: nothing to fit")
    out = []
    for r in records:
        paths = [c["path"] for c in r["candidates"]]
        x = np.array([[c["features"].get(n, 0.0) for n in names] for c in r["candidates"]]).reshape(len(paths), len(names))
        out.append({"id": r["instance_id"], "repo": r["repo"], "gold": set(r["gold"]), "paths": paths, "x": x})
    return out, names


def one_file_fb(path, gold):
    """F_β of answering `path` alone."""
    if path not in gold:
        return 0.0
    p, r = 1.0, 1.0 / len(gold)
    return (1 + BETA2) * p * r / (BETA2 * p + r)


def padded(records, cols):
    """Candidates of every record in one (N, C, K) tensor, with the candidate and gold masks."""
    n, c = len(records), max(1, max(len(r["paths"]) for r in records))
    x = np.zeros((n, c, len(cols)))
    mask = np.zeros((n, c), bool)
    gold = np.zeros((n, c), bool)
    for i, r in enumerate(records):
        k = len(r["paths"])
        if k:
            x[i, :k] = r["x"][:, cols]
            mask[i, :k] = True
            gold[i, :k] = [p in r["gold"] for p in r["paths"]]
    return x, mask, gold


def softmax_stats(x, s, mask):
    """Per record: log Σ exp(s) over `mask`, and the mean and covariance of x under softmax(s)."""
    s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask, np.exp(s - top), 0.0)
    z = e.sum(axis=1, keepdims=True)
    p = e / np.where(z > 0, z, 1.0)
    mean = np.einsum("nc,nck->nk", p, x)
    second = np.einsum("nc,nck,ncl->nkl", p, x, x)
    cov = second - np.einsum("nk,nl->nkl", mean, mean)
    return np.log(np.where(z[:, 0] > 0, z[:, 0], 1.0)) + top[:, 0], mean, cov


def fit(records, cols, lam=1.0, iterations=50):
    """Maximum-likelihood weights (L2 penalty `lam`) of the conditional logit, by damped Newton."""
    usable = [r for r in records if len(r["paths"]) > 1 and r["gold"] & set(r["paths"])]
    w = np.zeros(len(cols))
    if not usable:
        return w
    x, mask, gold = padded(usable, cols)

    def objective(w):
        s = x @ w
        lz_all, m_all, c_all = softmax_stats(x, s, mask)
        lz_gold, m_gold, c_gold = softmax_stats(x, s, gold)
        value = (lz_gold - lz_all).sum() - lam * w @ w
        grad = (m_gold - m_all).sum(axis=0) - 2 * lam * w
        hess = (c_gold - c_all).sum(axis=0) - 2 * lam * np.eye(len(w))
        return value, grad, hess

    value, grad, hess = objective(w)
    for _ in range(iterations):
        # Ascent direction: Newton where the Hessian is negative definite, else damped.
        shift = max(0.0, np.linalg.eigvalsh(hess).max() + 1e-6)
        step = np.linalg.solve(hess - shift * np.eye(len(w)), -grad)
        t = 1.0
        while t > 1e-6:
            candidate = w + t * step
            new = objective(candidate)
            if new[0] >= value:
                break
            t /= 2
        else:
            break
        gain = new[0] - value
        w, (value, grad, hess) = candidate, new
        if gain < 1e-9:
            break
    return w


def score(records, w, cols):
    """Mean one-file F_β of each record's best candidate under weights `w` (the policy's first
    candidate when `w` is None)."""
    total = 0.0
    for r in records:
        if not r["paths"]:
            continue
        best = 0 if w is None else int(np.argmax(r["x"][:, cols] @ w))
        total += one_file_fb(r["paths"][best], r["gold"])
    return total / len(records)


def cross_validated(records, cols, folds):
    """Mean F_β over the held-out records of each fold, the weights fitted on the others."""
    total = 0.0
    for held in folds:
        w = fit([r for r in records if r["id"] not in held], cols)
        test = [r for r in records if r["id"] in held]
        total += score(test, w, cols) * len(test)
    return total / len(records)


def add_probes(records, names, instances, repos):
    """Appends the whole-file probe features to every record's matrix; returns the names."""
    texts = {}
    for line in open(instances):
        i = json.loads(line)
        texts[i["instance_id"]] = i
    cache = {}

    def show(repo, commit, path):
        key = (repo, commit, path)
        if key not in cache:
            git_dir = f"{repos}/{repo.replace('/', '__')}.git"
            out = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], capture_output=True)
            cache[key] = out.stdout.decode("utf-8", "replace")
        return cache[key]

    def words(text):
        return re.findall(r"[a-z][a-z0-9]{2,}", text.lower())

    for r in records:
        instance = texts.get(r["id"])
        extra = np.zeros((len(r["paths"]), 5))
        if instance is not None and r["paths"]:
            issue = instance["problem_statement"]
            code = {n for n in set(re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", issue))
                    if re.search(r"[A-Z].*[a-z]|[a-z].*[A-Z]|_", n.strip("_"))}
            files = [show(instance["repo"], instance["base_commit"], p) for p in r["paths"]]
            # Each file's words, line by line, split once for every probe.
            lines = [[words(line) for line in text.split("\n")] for text in files]
            issue_words = collections.Counter(words(issue))

            def tfidf(texts):
                """tf-idf of the issue's words against each text (a list of its lines' words)."""
                tfs = [collections.Counter(w for line in text for w in line) for text in texts]
                df = collections.Counter(w for tf in tfs for w in tf)
                out = []
                for tf in tfs:
                    length = 1 + math.log(1 + sum(tf.values()))
                    out.append(sum(min(tf[w], 10) / length * math.log(1 + len(texts) / df[w]) for w in issue_words if tf[w]))
                return out

            extra[:, 0] = tfidf(lines)
            extra[:, 1] = tfidf([text[:100] for text in lines])
            present = collections.Counter(w for text in lines for w in {w for line in text for w in line} if w in issue_words)
            rare = {w for w, n in present.items() if n <= max(1, len(files) // 2)}
            extra[:, 4] = [math.log1p(sum(1 for line in text if rare.intersection(line))) for text in lines]
            if code:
                alternatives = "|".join(map(re.escape, sorted(code)))
                named = re.compile(rf"\b({alternatives})\b")
                top_def = re.compile(rf"^(?:def|class) ({alternatives})\b", re.M)
                extra[:, 2] = [float(bool(top_def.search(text))) for text in files]
                extra[:, 3] = [math.log1p(len(set(named.findall(text)))) for text in files]
        r["x"] = np.hstack([r["x"], extra])
    return names + ["probe:tfidf", "probe:tfidf_head", "probe:top_def", "probe:names_in", "probe:rare_lines"]


def add_pairs(records, names, chosen):
    """Appends the products of the features `chosen` (indices), two by two; returns the names."""
    pairs = list(itertools.combinations(chosen, 2))
    for r in records:
        products = np.array([r["x"][:, i] * r["x"][:, j] for i, j in pairs]).T
        r["x"] = np.hstack([r["x"], products.reshape(len(r["paths"]), len(pairs))])
    return names + [f"{names[i]}*{names[j]}" for i, j in pairs]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rankings", nargs="+", help="`rewardlab locate --ranking` files (one per seed)")
    parser.add_argument("--instances", help="the SWE-bench-style JSONL the rankings were located on")
    parser.add_argument("--repos", help="the mirrors (`owner__name.git`): enables the whole-file probes")
    parser.add_argument("--pairs", type=int, default=0, help="also fit products of the N strongest features")
    args = parser.parse_args()
    records, names = load(args.rankings)
    base = list(range(len(names)))
    if args.repos and args.instances:
        names = add_probes(records, names, args.instances, args.repos)
    probes = list(range(len(base), len(names)))
    ids = sorted({r["id"] for r in records})
    order = np.random.default_rng(0).permutation(len(ids))
    folds = [{ids[i] for i in order[k::5]} for k in range(5)]
    repos = sorted({r["repo"] for r in records})
    by_repo = [{r["id"] for r in records if r["repo"] == repo} for repo in repos]
    among = sum(1 for r in records if r["gold"] & set(r["paths"]))
    print(f"{len(records)} records ({len(ids)} instances), a gold file among the candidates in {among}")
    print(f"(the best any ranking of these candidates can do: F_β {sum(max((one_file_fb(p, r['gold']) for p in r['paths']), default=0) for r in records) / len(records):.3f})")
    print()
    print("| ranker | features | F_β, fitted and scored on all | 5-fold CV | leave one repository out |")
    print("|---|---|---|---|---|")
    print(f"| the policy as trained | {len(base)} | {score(records, None, base):.3f} | – | – |")

    def row(label, cols):
        w = fit(records, cols)
        print(f"| {label} | {len(cols)} | {score(records, w, cols):.3f} | "
              f"{cross_validated(records, cols, folds):.3f} | {cross_validated(records, cols, by_repo):.3f} |")
        return w

    w = row("conditional logit, the policy's features", base)
    for k in probes:
        row(f"… + {names[k]}", base + [k])
    if probes:
        row("… + every probe", base + probes)
    if args.pairs:
        strongest = sorted(np.argsort(-np.abs(w))[: args.pairs].tolist())
        first = len(names)
        names = add_pairs(records, names, strongest)
        row(f"… + products of the {args.pairs} strongest, two by two", base + list(range(first, len(names))))
    print()
    print("fitted weights, the policy's features:", ", ".join(f"{n} {x:+.2f}" for n, x in zip(names, w)))


if __name__ == "__main__":
    main()
