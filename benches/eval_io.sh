#!/usr/bin/env bash
# Whole-process throughput of `rewardlab eval` beside the per-rollout Python
# baseline (`eval_baseline.py`), in one run on the same generated inputs
# (issue 16, item 3):
#
#   features CSV, 1M rows, CodeGrep v3            target >= 15x the baseline
#   rollout JSONL, 100k rollouts, Fb(file), c, e   target >= 10x the baseline
#   peak memory <= 2x the input's size
#   features Parquet, the same rows                at least as fast as the CSV
#
# Each command runs RUNS times (best wall time, its peak RSS), pinned to the
# CPUS list (default: the first two cores). The outputs of both sides are
# compared value by value before anything is reported.
#
# The Parquet input is the CSV's rows written by `rewardlab eval --out
# x.parquet` (group, the features and that run's outputs, which the measured
# run does not read): the standard library's Python has no Parquet reader, so
# its row compares with the CSV's Python baseline.
#
#   benches/eval_io.sh            # ROWS=1000000 ROLLOUTS=100000 RUNS=3 CPUS=0,1
#   BIN=path/to/rewardlab PARQUET=0 benches/eval_io.sh   # that binary (no build), no Parquet rows
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROWS=${ROWS:-1000000}
ROLLOUTS=${ROLLOUTS:-100000}
RUNS=${RUNS:-3}
PARQUET=${PARQUET:-1}
CPUS=${CPUS:-0,1}

if [[ -z "${BIN:-}" ]]; then
  cargo build --quiet --release --locked --bin rewardlab --manifest-path "$ROOT/Cargo.toml"
  BIN="$ROOT/target/release/rewardlab"
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python3 "$ROOT/benches/eval_gen.py" csv "$TMP/features.csv" "$ROWS"
python3 "$ROOT/benches/eval_gen.py" jsonl "$TMP/rollouts.jsonl" "$ROLLOUTS"
if [[ "$PARQUET" == 1 ]]; then
  "$BIN" eval "$ROOT/rewards/codegrep_v3.reward" --rollouts "$TMP/features.csv" --out "$TMP/features.parquet" 2>/dev/null
fi
cat > "$TMP/jsonl.reward" <<'REWARD'
# The bench formula on rollout JSONL: file-level F-beta, a tool-efficiency
# bonus, degenerate rollouts masked, CodeGrep v3's advantage discount.
reward    = Fb(file) * (0.5 + 0.5 * e) * mask(c > 0)
advantage = adv * sqrt(min(c / 4, 1))
REWARD

# best NAME CMD...: runs CMD RUNS times; prints "seconds peak_kib" of the fastest run.
best() {
  local best_s="" best_kib=""
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%e %M" -o "$TMP/time" taskset -c "$CPUS" "$@" >/dev/null 2>"$TMP/stderr"
    read -r s kib < "$TMP/time"
    if [[ -z "$best_s" ]] || awk "BEGIN { exit !($s < $best_s) }"; then best_s=$s; best_kib=$kib; fi
  done
  echo "$best_s $best_kib"
}

# same A B: the reward, adv and advantage columns agree to 1e-9 (relative).
same() {
  python3 - "$1" "$2" <<'PY'
import csv, sys
a, b = (list(csv.DictReader(open(p, newline=""))) for p in sys.argv[1:3])
assert len(a) == len(b), (len(a), len(b))
for i, (x, y) in enumerate(zip(a, b)):
    for k in ("reward", "adv", "advantage"):
        p, q = float(x[k]), float(y[k])
        assert abs(p - q) <= 1e-9 * (1 + abs(q)), (i, k, p, q)
PY
}

report() { # NAME INPUT OURS PYTHON
  local size_mb ours_s ours_kib py_s
  size_mb=$(awk "BEGIN { printf \"%.0f\", $(stat -c %s "$2") / 1e6 }")
  read -r ours_s ours_kib <<< "$3"
  read -r py_s _ <<< "$4"
  awk -v n="$1" -v mb="$size_mb" -v s="$ours_s" -v kib="$ours_kib" -v p="$py_s" 'BEGIN {
    printf "| %s | %d MB | %.2f s | %.0f MB (%.2fx input) | %.2f s | %.1fx |\n", n, mb, s, kib / 1024, kib / 1024 / mb, p, p / s }'
}

csv_ours=$(best "$BIN" eval "$ROOT/rewards/codegrep_v3.reward" --rollouts "$TMP/features.csv" --out "$TMP/ours.csv")
csv_py=$(best python3 "$ROOT/benches/eval_baseline.py" csv "$TMP/features.csv" "$TMP/py.csv")
same "$TMP/ours.csv" "$TMP/py.csv"
if [[ "$PARQUET" == 1 ]]; then
  pq_ours=$(best "$BIN" eval "$ROOT/rewards/codegrep_v3.reward" --rollouts "$TMP/features.parquet" --out "$TMP/ours-p.csv")
  same "$TMP/ours-p.csv" "$TMP/py.csv"
  pq_pq=$(best "$BIN" eval "$ROOT/rewards/codegrep_v3.reward" --rollouts "$TMP/features.parquet" --out "$TMP/ours-p.parquet")
  csv_pq=$(best "$BIN" eval "$ROOT/rewards/codegrep_v3.reward" --rollouts "$TMP/features.csv" --out "$TMP/ours-c.parquet")
fi
jsonl_ours=$(best "$BIN" eval "$TMP/jsonl.reward" --rollouts "$TMP/rollouts.jsonl" --out "$TMP/ours-j.csv")
jsonl_py=$(best python3 "$ROOT/benches/eval_baseline.py" jsonl "$TMP/rollouts.jsonl" "$TMP/py-j.csv")
same "$TMP/ours-j.csv" "$TMP/py-j.csv"

echo "| input | size | rewardlab eval | peak memory | Python per-rollout | ratio |"
echo "|---|---|---|---|---|---|"
report "features CSV, $ROWS rows (CodeGrep v3)" "$TMP/features.csv" "$csv_ours" "$csv_py"
report "rollout JSONL, $ROLLOUTS rollouts (Fb(file), c, e)" "$TMP/rollouts.jsonl" "$jsonl_ours" "$jsonl_py"
[[ "$PARQUET" == 1 ]] || exit 0
report "features Parquet, $ROWS rows, out CSV (vs the CSV baseline)" "$TMP/features.parquet" "$pq_ours" "$csv_py"
report "features Parquet, $ROWS rows, out Parquet (vs the CSV baseline)" "$TMP/features.parquet" "$pq_pq" "$csv_py"
report "features CSV, $ROWS rows, out Parquet" "$TMP/features.csv" "$csv_pq" "$csv_py"
