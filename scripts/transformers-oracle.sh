#!/usr/bin/env bash
# Hugging Face `transformers` as the oracle of rewardlab's Qwen3: on the tiny checkpoint,
# the tiny one with a trained LoRA adapter (loaded into transformers through PEFT), and a
# random checkpoint with Qwen3-0.6B's shapes, rewardlab's logits and per-token log-probs —
# training path and KV-cached sampling path — must match `Qwen3ForCausalLM` in float32
# within 1e-4 (`rewardlab model logits` writes them; scripts/transformers_oracle.py compares).
#
# Reuses the virtual environment of scripts/trl-smoke.sh (target/trl-smoke-venv: torch and
# transformers come with trl) and adds peft to it; creates it with trl and peft if missing.
# The 0.6B-shaped checkpoint is 2.4 GB of f32 in a temporary directory.
#
# Usage: scripts/transformers-oracle.sh [--skip-0.6b]
set -euo pipefail
cd "$(dirname "$0")/.."

big=1
[[ ${1:-} == --skip-0.6b ]] && big=0

venv=target/trl-smoke-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c 'import torch, transformers, peft, safetensors' 2>/dev/null; then
    echo "== pip install trl peft"
    start=$(date +%s)
    "$venv/bin/pip" install --quiet --disable-pip-version-check trl peft
    echo "installed in $(( $(date +%s) - start )) s"
fi
"$venv/bin/python" -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)'

cli=target/debug/rewardlab
[ -x "$cli" ] || cargo build --locked --bin rewardlab

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cli" model tiny "$work/tiny" --seed 3
"$cli" model train-adapter "$work/tiny" "$work/adapter" --steps 3 --rank 4 --seed 1
cases=("tiny:$work/tiny::$work/tiny.safetensors"
       "tiny+adapter:$work/tiny:$work/adapter:$work/tiny-adapter.safetensors")
if [[ $big == 1 ]]; then
    "$cli" model random "$work/q06" --shape 0.6b --seed 5
    cases+=("qwen3-0.6b-shape:$work/q06::$work/q06.safetensors")
fi
args=()
for case in "${cases[@]}"; do
    IFS=: read -r name checkpoint adapter out <<< "$case"
    start=$(date +%s)
    if [[ -n $adapter ]]; then
        "$cli" model logits "$checkpoint" "$out" --len 24 --seed 7 --adapter "$adapter"
    else
        "$cli" model logits "$checkpoint" "$out" --len 24 --seed 7
    fi
    echo "$name: rewardlab in $(( $(date +%s) - start )) s"
    args+=("$name" "$checkpoint" "${adapter:--}" "$out")
done
"$venv/bin/python" scripts/transformers_oracle.py --tolerance 1e-4 "${args[@]}"
