#!/usr/bin/env bash
# `study replay` at scale (issue 16, item 5): N logged rollouts (default 1M)
# and 8 variants (4 rewards x 2 advantages, a [grid]), replayed in one run
# (features computed once, every variant in one fused pass), beside the same
# 8 variants as 8 separate `rewardlab eval` processes on the same file, in
# the same run. Pinned to CPUS (default: the first two cores).
#
#   benches/replay_scale.sh          # ROLLOUTS=1000000 CPUS=0,1
#   BIN=target/release LOG=r.jsonl benches/replay_scale.sh   # those binaries (no build), that log
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROLLOUTS=${ROLLOUTS:-1000000}
CPUS=${CPUS:-0,1}

if [[ -z "${BIN:-}" ]]; then
  cargo build --quiet --release --locked --bin rewardlab --bin study --manifest-path "$ROOT/Cargo.toml"
  BIN="$ROOT/target/release"
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [[ -n "${LOG:-}" ]]; then
  ln -s "$(realpath "$LOG")" "$TMP/rollouts.jsonl"
else
  python3 "$ROOT/benches/eval_gen.py" jsonl "$TMP/rollouts.jsonl" "$ROLLOUTS"
fi

declare -A REWARDS=(
  [v1]='(Fb(file) + Fb(lr)) / 2 / max(1, c / 4)'
  [v3]='Fb(file) * mask(c > 0)'
  [fe]='Fb(file) * (0.5 + 0.5 * e) * mask(c > 0)'
  [lr]='Fb(lr, 1) * mask(T > 1)'
)
declare -A ADVS=(
  [grpo]='(reward - group.mean(reward)) / (group.std(reward) + 1e-4)'
  [centred]='reward - group.mean(reward)'
)
{
  cat <<'TOML'
name = "replay-scale"
description = "8 variants replayed on one log"
seeds = 1

[tasks]
source = "synthetic"
seed = 0
files = 60
commits = 2
tasks = 24
held_out_fraction = 0.25

[policy]
kind = "proxy"

[training]
total_steps = 1
prompts_per_step = 4
group_size = 4

[grid]
TOML
  printf 'reward = {'
  sep=""
  for k in v1 v3 fe lr; do printf "%s %s = '%s'" "$sep" "$k" "${REWARDS[$k]}"; sep=","; done
  printf ' }\nadv = {'
  sep=""
  for k in grpo centred; do printf "%s %s = '%s'" "$sep" "$k" "${ADVS[$k]}"; sep=","; done
  printf ' }\n'
} > "$TMP/study.toml"
for r in v1 v3 fe lr; do
  for a in grpo centred; do
    printf 'reward = %s\nadv = %s\n' "${REWARDS[$r]}" "${ADVS[$a]}" > "$TMP/$r-$a.reward"
  done
done

# seconds_and_peak CMD...: "seconds peak_MB" of one run.
seconds_and_peak() {
  /usr/bin/time -f "%e %M" -o "$TMP/time" taskset -c "$CPUS" "$@" >/dev/null 2>"$TMP/stderr" || {
    cat "$TMP/stderr" >&2
    exit 1
  }
  awk '{ printf "%.2f %.0f", $1, $2 / 1024 }' "$TMP/time"
}

size_mb=$(awk "BEGIN { printf \"%.0f\", $(stat -L -c %s "$TMP/rollouts.jsonl") / 1e6 }")
read -r replay_s replay_mb <<< "$(seconds_and_peak "$BIN/study" replay "$TMP/study.toml" --rollouts "$TMP/rollouts.jsonl")"
one_s="" total=0 peak=0
for f in "$TMP"/*.reward; do
  read -r s mb <<< "$(seconds_and_peak "$BIN/rewardlab" eval "$f" --rollouts "$TMP/rollouts.jsonl" --out "$TMP/out.csv")"
  [[ -z "$one_s" ]] && one_s=$s
  total=$(awk "BEGIN { print $total + $s }")
  peak=$(awk "BEGIN { print ($mb > $peak) ? $mb : $peak }")
done
echo "| $ROLLOUTS rollouts ($size_mb MB JSONL), 8 variants | wall | peak memory |"
echo "|---|---|---|"
echo "| study replay (one process, one fused pass) | $replay_s s | $replay_mb MB |"
echo "| 8 separate rewardlab eval | $total s | $peak MB (the largest) |"
echo "| one rewardlab eval (the first variant) | $one_s s | |"
