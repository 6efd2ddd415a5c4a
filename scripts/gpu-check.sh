#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU and no Rust toolchain: give it a
# `rewardlab` binary built elsewhere with
#   cargo build --release --bin rewardlab --features cuda,model-cuda
# (scripts/cuda-toolchain.sh sets up the build). It needs the driver (libcuda)
# and the CUDA 13 libraries the binary links (NVRTC, cuBLAS, cuRAND, cudart) at
# run time; `--libs DIR` adds a toolchain's library folders to LD_LIBRARY_PATH.
#
#   scripts/gpu-check.sh path/to/rewardlab [--libs DIR] [--no-rewards] [--no-qwen3] [--rollouts N] [--reps R]
#                        [--step-rollouts N] [--turn-tokens T]
#
# 1. The CUDA reward backend: for every shipped reward file (rewards/*.reward) it
#    evaluates N synthetic rollouts (default 16M, groups of 8) on the CPU and on
#    the GPU, fails unless every output agrees within 1e-5 of max(|cpu|, 1), and
#    prints fused vs unfused kernel time and achieved bandwidth vs a
#    device-to-device copy of the same bytes. Bounded to 3 minutes.
# 2. Qwen3 + LoRA on the GPU (skipped with --no-qwen3, or when the binary was
#    built without model-cuda): a random checkpoint with Qwen3-0.6B's shapes
#    (bf16 on the device, LoRA r = 32 on every projection), one batched turn of
#    8 rollouts (sampling tokens/s), scoring them (tokens/s), then one GRPO step
#    of the engine (2 prompts × 4 rollouts, 2 turns, sandbox tools) with its
#    phase split, and the peak GPU memory nvidia-smi saw. Bounded to 4 minutes.
#    --step-rollouts and --turn-tokens (default 8 and 256) size it; --no-rewards
#    skips part 1.
#    (A 14B-shaped random checkpoint would be 59 GB of f32 on disk: not tried.)
# Everything finishes in under 8 minutes and prints one table per part.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 REWARDLAB_BINARY [--libs DIR] [--no-qwen3] [--rollouts N] [--reps R]" >&2
    exit 2
fi
bin=$1
shift
if [[ ! -x $bin ]]; then
    echo "error: $bin is not an executable rewardlab binary" >&2
    exit 2
fi
qwen3=1
rewards=1
step_rollouts=8
turn_tokens=256
reward_args=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --no-qwen3) qwen3=0; shift ;;
        --no-rewards) rewards=0; shift ;;
        --step-rollouts) step_rollouts=$2; shift 2 ;;
        --turn-tokens) turn_tokens=$2; shift 2 ;;
        --libs)
            for d in "$2"/nvidia/*/lib; do LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
            export LD_LIBRARY_PATH
            shift 2 ;;
        *) reward_args+=("$1"); shift ;;
    esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# A CUDA build links the CUDA libraries: without them the loader would refuse to start it
# with a bare "cannot open shared object file", so say which are missing and where they come from.
if command -v ldd >/dev/null; then
    missing=$(ldd "$bin" 2>/dev/null | awk '/not found/ { print $1 }' | tr '\n' ' ')
    if [[ -n $missing ]]; then
        echo "error: $bin needs shared libraries this machine does not provide: $missing" >&2
        echo "  libcuda.so.1 is the NVIDIA driver's; the others are CUDA 13's: pass --libs target/cuda-toolchain" >&2
        echo "  (scripts/cuda-toolchain.sh installs them) or add a CUDA 13 install's lib64 to LD_LIBRARY_PATH" >&2
        exit 2
    fi
fi
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi

if [[ $rewards == 1 ]]; then
    echo "== 1. the CUDA reward backend"
    timeout 180 "$bin" gpu-check --rewards "$root/rewards" "${reward_args[@]}"
fi

[[ $qwen3 == 1 ]] || exit 0
echo "== 2. Qwen3 + LoRA, one GRPO step on the GPU"
work=$(mktemp -d)
poller=
cleanup() {
    [[ -n $poller ]] && kill "$poller" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)
timeout 120 "$bin" model random "$work/q06" --shape 0.6b --seed 1
echo "random 0.6B-shaped checkpoint written in $(( $(date +%s) - start )) s"
if command -v nvidia-smi >/dev/null; then
    # The largest memory.used of GPU 0 while the step runs, sampled every 0.2 s.
    ( peak=0
      while true; do
          used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1 || echo 0)
          [[ ${used:-0} =~ ^[0-9]+$ ]] && (( used > peak )) && peak=$used && echo "$peak" > "$work/peak"
          sleep 0.2
      done ) &
    poller=$!
fi
status=0
timeout 240 "$bin" model gpu-step "$work/q06" --device cuda --bf16 --rollouts "$step_rollouts" \
    --turn-tokens "$turn_tokens" || status=$?
# The peak also when the step failed: an out-of-memory error wants it most.
if [[ -f $work/peak ]]; then
    echo "| peak GPU memory (nvidia-smi, whole device) | $(cat "$work/peak") MiB |"
fi
exit "$status"
