#!/usr/bin/env bash
# TRL's real GRPOTrainer for 2 steps on CPU, with a rewardlab reward file and
# rewardlab.trl.SandboxEnvironment on a git repository built here, on the tiny
# random Qwen3 checkpoint `rewardlab model tiny` writes. Installs `trl` (and its
# torch) into its own virtual environment, target/trl-smoke-venv (kept between
# runs: the install is the slow part), plus the rewardlab package from ./python.
#
# Usage: scripts/trl-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

venv=target/trl-smoke-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
echo "== pip install trl ./python"
start=$(date +%s)
"$venv/bin/pip" install --quiet --disable-pip-version-check trl ./python
echo "installed in $(( $(date +%s) - start )) s"

cli=target/debug/rewardlab
[ -x "$cli" ] || cargo build --locked --bin rewardlab

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cli" model tiny "$work/tiny"

repo="$work/acme__shop"
mkdir -p "$repo/shop"
git -C "$repo" init -q -b main
printf 'class Cart:\n    def __init__(self):\n        self.items = []\n\n    def total(self):\n        return sum(item.price for item in self.items)\n' > "$repo/shop/cart.py"
printf 'def discount(total):\n    return total * 0.9\n' > "$repo/shop/pricing.py"
git -C "$repo" add -A
git -C "$repo" -c user.name=t -c user.email=t@example.com commit -q -m first
commit=$(git -C "$repo" rev-parse HEAD)

echo "== GRPOTrainer, 2 steps"
start=$(date +%s)
"$venv/bin/python" python/examples/trl_smoke.py "$work/tiny" "$repo" "$commit" "$work/store" \
    "$root/rewards/codegrep_v3.reward" "$work/out"
echo "trained and checked in $(( $(date +%s) - start )) s"
