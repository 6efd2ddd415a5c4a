#!/usr/bin/env bash
# A CUDA 13.0 build toolchain from PyPI, for machines without a CUDA install (and
# without a GPU): nvcc, NVVM, the headers, and the libraries candle's CUDA backend
# links (cudart, NVRTC, cuBLAS/cuBLASLt, cuRAND), installed with `pip install
# --target` into target/cuda-toolchain (kept between runs, 1.2 GB; a fresh install
# downloads ~1.2 GB, ~600 s here, or ~11 s from pip's cache).
#
#   scripts/cuda-toolchain.sh                 install (if missing) and print the exports
#   eval "$(scripts/cuda-toolchain.sh)"       ... and apply them to this shell
#   scripts/cuda-toolchain.sh --build         install, then cargo build --release
#                                             --features cuda,model-cuda --bin rewardlab --bin study
#   scripts/cuda-toolchain.sh --build --dev   the same in the dev profile (target/debug), which
#                                             shares most dependencies with `cargo test`'s build
#
# The build honours CARGO_BUILD_JOBS, and CUDAFORGE_THREADS for the nvcc jobs of
# candle-kernels (by default one per core). scripts/cuda-build-check.sh then checks
# the binaries' libraries and their refusal without a GPU.
#
# Pins: every package at 13.0.* — cudarc 0.19.10's build script knows CUDA up to
# 13.4 and refuses a newer nvcc, and an unpinned nvidia-nvvm would bring NVVM 13.5,
# whose PTX (.version 9.5) the 13.0 ptxas rejects. cuRAND for CUDA 13 is 10.4.0.*.
#
# Linking: candle-core turns on cudarc's `dynamic-linking`, so the link needs the
# unversioned names (-lcudart, -lnvrtc, -lcublas, -lcublasLt, -lcurand: the wheels
# ship only `.so.13`/`.so.10`, so symlinks are added) and -lcuda, the driver, which
# no wheel ships: a stub libcuda.so (soname libcuda.so.1) is compiled from the
# driver functions cuda.h declares, in lib/stubs where cudarc's build script looks
# (as with a CUDA install's own stub). The binaries then need, at run time,
# libcudart.so.13, libnvrtc.so.13, libcublas.so.13 (+ libcublasLt), libcurand.so.10
# — from this directory (scripts/gpu-check.sh --libs target/cuda-toolchain) or a
# CUDA 13 install — and the GPU machine's driver, libcuda.so.1; without them the
# loader refuses to start them. The stub must never be on a GPU machine's library
# path: it would hide the real driver.
# CUDA_COMPUTE_CAP defaults to 90 (H100/H200); set it to build for another GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=target/cuda-toolchain
packages=(
    "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" "nvidia-cuda-crt==13.0.*"
    "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*" "nvidia-cuda-nvrtc==13.0.*"
    "nvidia-cublas==13.0.*" "nvidia-curand==10.4.0.*"
)
stamp="$dir/.installed-$(printf '%s\n' "${packages[@]}" | sha1sum | cut -c1-12)"
if [[ ! -f $stamp ]]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    start=$(date +%s)
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir" "${packages[@]}" >&2
    echo "installed the CUDA toolchain in $(( $(date +%s) - start )) s" >&2
    touch "$stamp"
fi
cuda=$(cd "$dir/nvidia/cu13" && pwd)
[[ -x $cuda/bin/nvcc ]] || { echo "error: no nvcc under $cuda/bin" >&2; exit 1; }

# Unversioned names for the linker.
for lib in "$cuda"/lib/lib*.so.*; do
    base=${lib##*/}
    plain=${base%%.so.*}.so
    [[ -e $cuda/lib/$plain ]] || ln -s "$base" "$cuda/lib/$plain"
done
# The driver stub: every cu* function cuda.h declares (after its macros pick the ABI names,
# e.g. cuCtxCreate_v4) and every one cudarc's bindings name, each returning
# CUDA_ERROR_STUB_LIBRARY (34): only the linker ever sees it.
if [[ ! -f $cuda/lib/stubs/libcuda.so ]]; then
    mkdir -p "$cuda/lib/stubs"
    cudarc=$(cargo metadata --locked --format-version 1 --features cuda,model-cuda 2>/dev/null | python3 -c '
import json, sys, os
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "cudarc":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "src/driver/sys/mod.rs"))' | head -1)
    {
        cc -E -P -I"$cuda/include" -x c "$cuda/include/cuda.h" | grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\('
        [[ ! -f $cudarc ]] || grep -oE 'pub unsafe fn cu[A-Z][A-Za-z0-9_]*\(' "$cudarc" | sed 's/pub unsafe fn //'
    } | tr -d ' (' | sort -u | awk '{ printf "int %s(void) { return 34; }\n", $1 }' > "$cuda/lib/stubs/libcuda_stub.c"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cuda/lib/stubs/libcuda.so" "$cuda/lib/stubs/libcuda_stub.c"
    echo "a libcuda stub with $(wc -l < "$cuda/lib/stubs/libcuda_stub.c") functions" >&2
fi

exports="export CUDA_ROOT='$cuda' PATH='$cuda/bin':\"\$PATH\" CUDA_COMPUTE_CAP=\${CUDA_COMPUTE_CAP:-90}"
echo "$exports"
"$cuda/bin/nvcc" --version | tail -2 >&2

if [[ ${1:-} == --build ]]; then
    eval "$exports"
    profile=(--release)
    out=target/release
    if [[ ${2:-} == --dev ]]; then
        profile=()
        out=target/debug
    fi
    start=$(date +%s)
    cargo build --locked "${profile[@]}" --features cuda,model-cuda --bin rewardlab --bin study >&2
    echo "built $out/rewardlab and $out/study with CUDA in $(( $(date +%s) - start )) s" >&2
fi
