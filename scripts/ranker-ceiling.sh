#!/usr/bin/env bash
# How far a linear ranker over the proxy's file features can go on real instances: fits one to
# `rewardlab locate --ranking` files (cross-validated by instance and by repository) beside the
# trained policy, and with the mirrors adds probe features computed from each candidate's whole
# file (scripts/ranker_ceiling.py says what each row means). Extra arguments after the rankings go to
# it, e.g. --pairs 10.
#
#   scripts/ranker-ceiling.sh MIRRORS_DIR INSTANCES.jsonl RANKING.jsonl [RANKING.jsonl ...]
#
# e.g. after scripts/real-eval.sh /data/mirrors results-real, for four seeds:
#   for s in 000 001 002 003; do
#     target/release/rewardlab locate --run results-real/real/runs/v3/seed-$s \
#       --instances results-real/eval.jsonl --repos /data/mirrors --ranking ranking-$s.jsonl
#   done
#   scripts/ranker-ceiling.sh /data/mirrors results-real/eval.jsonl ranking-*.jsonl
#
# The mirrors are only read. numpy is installed into target/ranker-venv on the first run.
set -euo pipefail
mirrors=$(cd "${1:?usage: $0 MIRRORS_DIR INSTANCES.jsonl RANKING.jsonl [...]}" && pwd)
instances=${2:?usage: $0 MIRRORS_DIR INSTANCES.jsonl RANKING.jsonl [...]}
shift 2
[ $# -gt 0 ] || { echo "usage: $0 MIRRORS_DIR INSTANCES.jsonl RANKING.jsonl [...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/target/ranker-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import numpy" 2> /dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check numpy
fi
exec "$venv/bin/python" "$root/scripts/ranker_ceiling.py" --instances "$instances" --repos "$mirrors" "$@"
