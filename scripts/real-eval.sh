#!/usr/bin/env bash
# The real-repository measurement of issue 14: train the proxy policy on commits and merged pull
# requests mined from the histories of the repositories you have mirrors of, evaluate greedily on
# their SWE-bench Lite instances (../shared/data/swebench_lite.jsonl; the leakage rule drops every
# training task that descends from an instance's base and touches its gold files), and print the
# summary, the per-repository table, `rewardlab locate`'s Table 2, its `--reach` counts (where the
# misses are lost: calls on offer, the choice of calls, the ranking) and its `--ranking` counts (where
# the gold files ranked among the answer's candidates; scripts/ranker-ceiling.sh fits rankers to them).
#
#   scripts/real-eval.sh MIRRORS_DIR [OUT_DIR]
#
# MIRRORS_DIR holds bare clones `owner__name.git` (e.g. psf__requests.git, pytest-dev__pytest.git,
# sphinx-doc__sphinx.git, pydata__xarray.git, sympy__sympy.git): every repository of the Lite file
# with a clone there takes part. The mirrors are only read. Knobs (environment):
#   SEEDS=3 STEPS=80 PROMPTS=8 GROUP=8 EVAL_EVERY=20 MAX_TASKS=600 (mined per repository)
#   MAX_FILES=1 (mined tasks change at most this many source files: an issue's fix mostly touches
#   one, Lite keeps only such instances, and multi-file commits teach the answer size to name
#   several; 5, the miner's default, is what the README's numbers before session 27 used)
#   KINDS=both (what is mined: "commits", "pull_requests" or "both")
#   LR=0.05 (the proxy's learning rate) SCHEDULE=cosine (the seeds' schedule: 5% linear warmup, then a
#   half cosine to 0 at the last step) or constant (that rate at every step; the default before
#   session 38)
#   VARIANTS="v3" (shipped reward files rewards/codegrep_<v>.reward) BIN=target/release
#   PROXY (`key = value` lines for the proxy's [policy] table; unset, $'ranking_prior = true\neval_average
#   = 0.9': the ranking starts from the grep heuristic's bias and greedy episodes use the moving
#   average of the parameters, the configuration of the README's Lite numbers since session 30;
#   set, exactly what it says: PROXY= for the proxy's own defaults, or a switch added to the two
#   lines for an ablation. Before session 38 unset meant empty, so SCHEDULE=constant PROXY= is what
#   sessions 36-37 ran)
#   TRAINING="" (extra `key = value` lines for the [training] table, e.g. $'epochs = 2\nminibatches = 2')
#   TASKS="" (extra `key = value` lines for every mined [[tasks]] table, e.g. "max_commits = 20000")
#   SANDBOX="" (extra `key = value` lines for the [sandbox] table, e.g. "grep_memo_mib = 256")
#   ABLATION="rarity=false definitions=false ..." makes one study of the first variant's reward:
#   a "full" variant and one variant per `key=value` proxy override (the README's ablation table)
#   CHECK_ONLY=1 stops after `study check` (mining, the leakage report)
#   DEV=0.05 judges on the development split instead of Lite: no `[eval]`, and this share of
#   each repository's mined tasks is held out (the protocol for proxy changes, README "Session 7");
#   the Lite file then only says which repositories take part
#   DEV_PR=25 judges on a pull-request split instead of Lite: the newest 25 merged pull requests
#   mined from each repository (with at most MAX_FILES target files; every mining cache under
#   OUT_DIR/real/cache pooled, each commit once) become the evaluation instances (`[eval]`, SWE-bench-style rows in
#   OUT_DIR/dev-pr.jsonl: the PR's title and body as the issue, its first-parent diff restricted to
#   the mined target files as the gold patch), and the leakage rule drops the training tasks that
#   descend from their bases and touch their files, exactly as for Lite
#   DEV_PR_MIN_WORDS=40 (with DEV_PR) holds out, per repository, the newest DEV_PR mined tasks of
#   either kind (pull requests and commits) whose text has at least this many words instead: a
#   split whose issues read longer, as Lite's do (median 111 words; the pull-request split's
#   median is 9, mostly a title)
#   TRAIN_BEFORE_EVAL=1 (Lite only) mines each repository from its newest Lite instance's base
#   commit (`rev = "<sha>"`) instead of HEAD: history of the evaluation's own era, none after it
#   (the README's session 31 row; add SANDBOX="skip_missing_blobs = true" for a snapshot that
#   lacks objects)
set -euo pipefail

mirrors=$(cd "${1:?usage: $0 MIRRORS_DIR [OUT_DIR]}" && pwd)
if [ -n "${DEV:-}" ] && [ -n "${DEV_PR:-}" ]; then
  echo "DEV and DEV_PR are two development splits: set one" >&2
  exit 2
fi
if [ -n "${TRAIN_BEFORE_EVAL:-}" ] && { [ -n "${DEV:-}" ] || [ -n "${DEV_PR:-}" ]; }; then
  echo "TRAIN_BEFORE_EVAL mines up to the Lite instances' bases: it does not go with DEV or DEV_PR" >&2
  exit 2
fi
out=${2:-results-real}
repo_root=$(cd "$(dirname "$0")/.." && pwd)
lite=${LITE:-$repo_root/../shared/data/swebench_lite.jsonl}
bin=${BIN:-$repo_root/target/release}
seeds=${SEEDS:-3}
steps=${STEPS:-80}
variants=${VARIANTS:-v3}
proxy_lines=${PROXY-$'ranking_prior = true\neval_average = 0.9'}
case "${SCHEDULE:-cosine}" in
  constant) schedule='{ kind = "constant" }' ;;
  cosine) schedule='{ kind = "cosine", warmup_fraction = 0.05, min_lr_ratio = 0.0 }' ;;
  *) echo "SCHEDULE=$SCHEDULE: expected constant or cosine" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The Lite instances of the mirrored repositories.
python3 - "$lite" "$mirrors" "$out/eval.jsonl" <<'PY'
import json, os, sys
lite, mirrors, dest = sys.argv[1:]
rows = [json.loads(line) for line in open(lite)]
have = [r for r in rows if os.path.isdir(os.path.join(mirrors, r["repo"].replace("/", "__") + ".git"))]
if not have:
    sys.exit(f"no repository of {lite} has a clone in {mirrors}")
with open(dest, "w") as f:
    for r in have:
        f.write(json.dumps(r) + "\n")
counts = {}
for r in have:
    counts[r["repo"]] = counts.get(r["repo"], 0) + 1
print("evaluation instances:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
PY

study=$out/real.toml
evalfile=eval.jsonl
# `rev = "<sha>"`: the base commit of REPO's newest Lite instance (by committer time).
newest_base() {
  python3 - "$out/eval.jsonl" "$mirrors" "$1" <<'PY'
import json, os, subprocess, sys
rows, mirrors, repo = sys.argv[1], sys.argv[2], sys.argv[3]
git_dir = os.path.join(mirrors, repo.replace("/", "__") + ".git")
instances = [json.loads(line) for line in open(rows)]
bases = {i["base_commit"] for i in instances if i["repo"] == repo}
def time(sha):
    out = subprocess.run(["git", "--git-dir", git_dir, "show", "-s", "--format=%ct", sha],
                         capture_output=True, text=True, check=True).stdout
    return int(out)
print(f'rev = "{max(sorted(bases), key=time)}"')
PY
}
write_study() {
{
  echo "name = \"real\""
  echo "description = \"proxy on mined history, evaluated on SWE-bench Lite (scripts/real-eval.sh)\""
  echo "seeds = $seeds"
  for repo in $(python3 -c 'import json,sys; print(" ".join(sorted({json.loads(l)["repo"] for l in open(sys.argv[1])})))' "$out/eval.jsonl"); do
    cat <<TOML

[[tasks]]
source = "commits"
repo = "$mirrors/${repo/\//__}.git"
$(if [ -n "${TRAIN_BEFORE_EVAL:-}" ]; then newest_base "$repo"; fi)
kinds = "${KINDS:-both}"
max_tasks = ${MAX_TASKS:-600}
max_files = ${MAX_FILES:-1}
${TASKS:-}
TOML
    if [ -n "${DEV:-}" ]; then echo "held_out_fraction = $DEV"; fi
  done
  if [ -z "${DEV:-}" ]; then cat <<TOML

[eval]
source = "swebench"
path = "$evalfile"
repos = "$mirrors"
TOML
  fi
  cat <<TOML

[policy]
kind = "proxy"
$proxy_lines

[training]
total_steps = $steps
prompts_per_step = ${PROMPTS:-8}
group_size = ${GROUP:-8}
eval_every = ${EVAL_EVERY:-20}
${TRAINING:-}

[training.optim]
lr = ${LR:-0.05}
schedule = $schedule

[summary]
precision_gate = 0.45
bm25_k = 2

[sandbox]
${SANDBOX:-}
TOML
  if [ -n "${ABLATION:-}" ]; then
    # One study: the first variant's reward with the full proxy, then one variant per switch.
    v=$(echo "$variants" | awk '{print $1}')
    printf '\n[[variants]]\nname = "full"\nfile = "%s/rewards/codegrep_%s.reward"\n' "$repo_root" "$v"
    for switch in $ABLATION; do
      key=${switch%%=*}
      printf '\n[[variants]]\nname = "%s"\nfile = "%s/rewards/codegrep_%s.reward"\npolicy = { %s = %s }\n' \
        "$key-${switch#*=}" "$repo_root" "$v" "$key" "${switch#*=}"
    done
  else
    for v in $variants; do
      printf '\n[[variants]]\nname = "%s"\nfile = "%s/rewards/codegrep_%s.reward"\n' "$v" "$repo_root" "$v"
    done
  fi
} >"$study"
}
write_study

if [ -n "${DEV_PR:-}" ]; then
  # Mine (the cache under OUT_DIR/real/cache keeps the tasks), then hold out each repository's
  # newest pull requests as SWE-bench-style instances and point `[eval]` at them.
  "$bin/study" check "$study" --results "$out" >/dev/null
  python3 - "$out" "$mirrors" "$DEV_PR" "${DEV_PR_MIN_WORDS:-0}" "${MAX_FILES:-1}" <<'PY'
import glob, json, os, subprocess, sys
out, mirrors, per_repo, min_words = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
max_files = int(sys.argv[5])
names = {}
for line in open(os.path.join(out, "eval.jsonl")):
    repo = json.loads(line)["repo"]
    names[os.path.realpath(os.path.join(mirrors, repo.replace("/", "__") + ".git"))] = repo
# Every cache file of a repository (a cache mined with other filters may lie beside this study's)
# pooled, each commit once, keeping tasks of this study's shape (at most MAX_FILES target files).
pooled = {}
for path in sorted(glob.glob(os.path.join(out, "real", "cache", "mined", "*.json"))):
    for t in json.load(open(path))["tasks"]:
        if min_words > 0:
            wanted = len(t["task"]["prompt"].split()) >= min_words
        else:
            wanted = t["kind"] == "pull_request"
        if not wanted or len(t["task"]["targets"]["files"]) > max_files:
            continue
        git_dir = os.path.realpath(t["task"]["repo"]["path"])
        if git_dir in names:
            pooled.setdefault(git_dir, {})[t["commit"]] = t
rows = []
for git_dir, by_commit in sorted(pooled.items()):
    repo = names[git_dir]
    for t in sorted(by_commit.values(), key=lambda t: (-t["time"], t["commit"]))[:per_repo]:
        files = t["task"]["targets"]["files"]
        patch = subprocess.run(["git", "--git-dir", git_dir, "diff", "--no-color", "--no-renames",
                                t["task"]["base_commit"], t["commit"], "--", *files],
                               capture_output=True, text=True, check=True).stdout
        name = f"pr{t['pull_request']}" if t["kind"] == "pull_request" else f"c{t['commit'][:12]}"
        rows.append({"instance_id": f"{repo.replace('/', '__')}-{name}", "repo": repo,
                     "base_commit": t["task"]["base_commit"], "problem_statement": t["task"]["prompt"],
                     "patch": patch})
if not rows:
    sys.exit("DEV_PR: no pull requests were mined; try KINDS=both or KINDS=pull_requests"
             if min_words == 0 else f"DEV_PR_MIN_WORDS: no mined task has {min_words} words or more")
with open(os.path.join(out, "dev-pr.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
what = "pull requests" if min_words == 0 else f"tasks of {min_words} words or more"
print(f"DEV_PR: {len(rows)} {what} held out as evaluation instances (dev-pr.jsonl)", file=sys.stderr)
PY
  evalfile=dev-pr.jsonl
  write_study
fi

"$bin/study" check "$study" --results "$out"
[ -n "${CHECK_ONLY:-}" ] && exit 0
start=$(date +%s)
"$bin/study" "$study" --results "$out"
echo "training and evaluation: $(( $(date +%s) - start )) s" >&2
for f in summary_by_repo.md phases.md; do
  [ -f "$out/real/$f" ] && cat "$out/real/$f"
done
# The development splits have no benchmark instances to locate.
if [ -n "${DEV:-}${DEV_PR:-}" ]; then exit 0; fi
first=$(echo "$variants" | awk '{print $1}')
[ -n "${ABLATION:-}" ] && first=full
# A study that skips blobs missing from a snapshot has locate skip them too.
skip_missing=()
if printf '%s\n' "${SANDBOX:-}" | grep -Eq '^[[:space:]]*skip_missing_blobs[[:space:]]*=[[:space:]]*true'; then
  skip_missing=(--skip-missing-blobs)
fi
"$bin/rewardlab" locate "${skip_missing[@]}" --run "$out/real/runs/$first/seed-000" --instances "$out/eval.jsonl" --repos "$mirrors" \
  --out "$out/real/predictions.jsonl" --rollouts "$out/real/rollouts.jsonl" --reach "$out/real/reach.jsonl" \
  --ranking "$out/real/ranking.jsonl"
