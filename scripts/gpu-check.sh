#!/usr/bin/env bash
# GPU check of the CUDA reward backend, for a machine with an NVIDIA GPU and
# no Rust toolchain: give it a `rewardlab` binary built elsewhere with
#   cargo build --release --bin rewardlab --features cuda
# It needs only the driver (libcuda) and NVRTC (libnvrtc, CUDA 13) at run time.
#
#   scripts/gpu-check.sh path/to/rewardlab [--rollouts N] [--reps R]
#
# For every shipped reward file (rewards/*.reward) it evaluates N synthetic
# rollouts (default 16M, groups of 8) on the CPU and on the GPU, fails unless
# every output agrees within 1e-5 of max(|cpu|, 1), and prints fused vs
# unfused kernel time and achieved bandwidth vs a device-to-device copy of the
# same bytes. Bounded to 3 minutes.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 REWARDLAB_BINARY [--rollouts N] [--reps R]" >&2
    exit 2
fi
bin=$1
shift
if [[ ! -x $bin ]]; then
    echo "error: $bin is not an executable rewardlab binary" >&2
    exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi
exec timeout 180 "$bin" gpu-check --rewards "$root/rewards" "$@"
