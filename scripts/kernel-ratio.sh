#!/usr/bin/env bash
# The compiled CPU kernel beside the hand-written loops (issue 16, item 4), one process per core:
# runs the paired ratios of `benches/reward_eval.rs` (no criterion groups) once on each core named,
# one process after another, and prints one table row per process and formula.
#
#   scripts/kernel-ratio.sh [BENCH_BINARY] [CORES]
#
# BENCH_BINARY defaults to the one `cargo bench --bench reward_eval --no-run` builds; a binary
# built on another machine runs where this checkout sits at the same path as there (the bench
# reads `rewards/*.reward` from the path it was built at). CORES is a comma-separated list
# (default: every core but the first, up to 12). The kernels are built by the C compiler
# (`REWARDLAB_CC`) into `REWARDLAB_CACHE_DIR` as usual; to run the very code measured elsewhere,
# carry that cache and a compiler whose `--version` matches.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-}
if [[ -z $bin ]]; then
    bin=$(cd "$root" && cargo bench --bench reward_eval --no-run --message-format=json 2>/dev/null \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "reward_eval" and m.get("executable"):
        print(m["executable"])')
fi
if [[ ! -x $bin ]]; then
    echo "error: no bench binary: give its path, or build it with cargo bench --bench reward_eval --no-run" >&2
    exit 2
fi
n=$(nproc)
cores=${2:-$(seq -s, 1 $(( n - 1 < 12 ? n - 1 : 12 )))}
[[ -n $cores ]] || cores=0
command -v taskset >/dev/null || { echo "error: taskset (util-linux) is needed to pin each process" >&2; exit 2; }
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $n cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| core | formula | baseline | ratio (baseline / compiled) | quartiles | compiled ms | baseline ms |"
echo "|---|---|---|---|---|---|---|"
for c in ${cores//,/ }; do
    taskset -c "$c" "$bin" --bench no-criterion-group 2>&1 | python3 -c '
import re, sys
core = sys.argv[1]
pat = re.compile(r"reward_eval/(\S+): paired ratio (.+?) / compiled, into reused buffers: median ([\d.]+) "
                 r"\(quartiles ([\d.]+)-([\d.]+)\).*?median times ([\d.]+) ms compiled, ([\d.]+) ms")
for line in sys.stdin:
    if "no native kernel" in line or "panicked" in line:
        print(line.rstrip(), file=sys.stderr)
    m = pat.search(line)
    if m:
        name, base, med, q1, q3, comp, hand = m.groups()
        print(f"| {core} | {name} | {base} | {med} | {q1}-{q3} | {comp} | {hand} |")
' "$c"
done
