#!/usr/bin/env bash
# Checks a CUDA build of rewardlab (scripts/cuda-toolchain.sh --build) on a machine
# without a GPU, as CI does:
#
# 1. ldd: which shared libraries the binaries need. With LD_LIBRARY_PATH at the
#    toolchain's lib folder, every CUDA library resolves there (cudart, NVRTC,
#    cuBLAS/cuBLASLt, cuRAND) except the driver, libcuda.so.1, which only a GPU
#    machine has.
# 2. Without those libraries the binaries cannot start: the dynamic loader exits
#    127 naming the first missing one (candle links them; nothing of rewardlab runs).
# 3. With the toolchain's libraries and its driver stub (lib/stubs: every driver
#    call returns CUDA_ERROR_STUB_LIBRARY, where a driver on a machine without a
#    GPU returns CUDA_ERROR_NO_DEVICE), each entry point that opens the GPU
#    refuses with its own message and exit status 1 or 2, never a panic:
#    `study` on a device = "cuda" study, `rewardlab model gpu-step --device cuda`
#    and `rewardlab gpu-check` (the reward kernels).
#
#   scripts/cuda-build-check.sh [--dev]   checks target/release (default) or target/debug
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bins=target/release
[[ ${1:-} == --dev ]] && bins=target/debug
lib=$root/target/cuda-toolchain/nvidia/cu13/lib
for b in rewardlab study; do
    [[ -x $bins/$b ]] || { echo "error: no $bins/$b; build it with scripts/cuda-toolchain.sh --build first" >&2; exit 2; }
done
[[ -f $lib/stubs/libcuda.so ]] || { echo "error: no driver stub in $lib/stubs (run scripts/cuda-toolchain.sh)" >&2; exit 2; }
# The loader looks the driver up by its soname; the stub lives only in stubs/, which must
# never be on a GPU machine's library path (it would hide the real driver).
ln -sf libcuda.so "$lib/stubs/libcuda.so.1"

fail() { echo "FAIL: $*" >&2; exit 1; }

echo "-- 1. libraries (ldd $bins/rewardlab, LD_LIBRARY_PATH=<toolchain>/lib)"
needed=$(LD_LIBRARY_PATH=$lib ldd "$bins/rewardlab")
echo "$needed" | grep -E 'cuda|nvrtc|cublas|curand' | sed 's/ (0x[0-9a-f]*)//' || true
for so in libcudart.so.13 libnvrtc.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10; do
    echo "$needed" | grep -q "$so => $lib/" || fail "$so does not resolve from the toolchain"
done
echo "$needed" | grep -q 'libcuda.so.1 => not found' || fail "libcuda.so.1 should come from the GPU machine's driver"
missing=$(echo "$needed" | grep 'not found' | grep -v 'libcuda.so.1' || true)
[[ -z $missing ]] || fail "unexpected missing libraries: $missing"

echo "-- 2. without the libraries"
for path in "" "$lib"; do
    set +e
    out=$(LD_LIBRARY_PATH=$path "$bins/study" --help 2>&1)
    rc=$?
    set -e
    echo "LD_LIBRARY_PATH='${path:+<toolchain>/lib}': exit $rc: $out"
    [[ $rc == 127 && $out == *"error while loading shared libraries"* ]] || fail "expected the loader's refusal"
done

echo "-- 3. with the toolchain's libraries and the driver stub: the refusals"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH=$lib:$lib/stubs
# `refuses NAME PATTERN CMD...`: CMD exits 1 or 2 with PATTERN in its output and no panic.
refuses() {
    local name=$1 pattern=$2
    shift 2
    set +e
    # With backtraces on, as many shells have them: a panic would show, and the refusal must
    # still be one line (candle attaches a backtrace to its errors, which is dropped).
    RUST_BACKTRACE=1 "$@" > "$work/out" 2>&1
    local rc=$?
    set -e
    local last
    last=$(grep -E '^error' "$work/out" | tail -1)
    echo "$name: exit $rc: $last"
    [[ $rc == 1 || $rc == 2 ]] || { cat "$work/out" >&2; fail "$name: exit status $rc"; }
    ! grep -q 'panicked' "$work/out" || { cat "$work/out" >&2; fail "$name panicked"; }
    grep -q -- "$pattern" "$work/out" || { cat "$work/out" >&2; fail "$name: no \"$pattern\" in its message"; }
    ! grep -qE '^ +[0-9]+: ' "$work/out" || { cat "$work/out" >&2; fail "$name: a backtrace in its message"; }
}
mkdir -p "$work/studies"
ln -s "$root/rewards" "$work/rewards"
sed 's/^\[policy\]$/[policy]\ndevice = "cuda"/' studies/qwen3_tiny.toml > "$work/studies/cuda.toml"
grep -q '^device = "cuda"' "$work/studies/cuda.toml" || fail "could not make a device = \"cuda\" study"
refuses 'study, device = "cuda"' 'CUDA_ERROR_STUB_LIBRARY' \
    "$bins/study" "$work/studies/cuda.toml" --results "$work/results"
"$bins/rewardlab" model tiny "$work/tiny" > /dev/null
refuses 'rewardlab model gpu-step --device cuda' 'CUDA_ERROR_STUB_LIBRARY' \
    "$bins/rewardlab" model gpu-step "$work/tiny" --device cuda --rollouts 2 --turn-tokens 8
refuses 'rewardlab gpu-check (reward kernels)' 'gpu-check needs a GPU' \
    "$bins/rewardlab" gpu-check --rewards "$root/rewards" --rollouts 1000
echo "the CUDA build links, needs only the driver beyond the toolchain, and refuses without a GPU"
