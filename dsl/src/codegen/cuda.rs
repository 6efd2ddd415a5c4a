//! The CUDA translation unit: a prelude of `rl_*` helpers and the generic
//! batch-reduction kernels, then one `extern "C" __global__` kernel per
//! launch. It includes no header, so NVRTC needs no include path.

use std::fmt::Write;

use super::{BATCH_THREADS, CudaProgram, Fusion, Grid, IrProgram, plan, signature};

/// Helpers every kernel body uses, for `rl_real = float` on the device.
pub(crate) const PRELUDE: &str = r#"// rewardlab reward kernels (generated; see rewardlab_dsl::codegen).
typedef float rl_real;
#define RL_RESTRICT __restrict__
#define RL_FN static __device__ __forceinline__
#define RL_LANE (threadIdx.x & 31u)
#define RL_LANES 32u
#define RL_NAN __int_as_float(0x7fc00000)
#define RL_INF __int_as_float(0x7f800000)
#define RL_FULL 0xffffffffu

RL_FN rl_real rl_bool(int b) { return b ? 1.0f : 0.0f; }
RL_FN rl_real rl_min(rl_real a, rl_real b) { return (a != a || b != b) ? RL_NAN : (b < a ? b : a); }
RL_FN rl_real rl_max(rl_real a, rl_real b) { return (a != a || b != b) ? RL_NAN : (b > a ? b : a); }
RL_FN double rl_min_d(double a, double b) { return (a != a || b != b) ? (double)RL_NAN : (b < a ? b : a); }
RL_FN double rl_max_d(double a, double b) { return (a != a || b != b) ? (double)RL_NAN : (b > a ? b : a); }
RL_FN rl_real rl_sign(rl_real x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : (x == 0.0f ? 0.0f : RL_NAN)); }
RL_FN rl_real rl_sqrt(rl_real x) { return sqrtf(x); }
RL_FN rl_real rl_exp(rl_real x) { return expf(x); }
RL_FN rl_real rl_log(rl_real x) { return logf(x); }
RL_FN rl_real rl_abs(rl_real x) { return fabsf(x); }
RL_FN rl_real rl_tanh(rl_real x) { return tanhf(x); }
RL_FN rl_real rl_pow(rl_real a, rl_real b) { return powf(a, b); }
RL_FN rl_real rl_sigmoid(rl_real x) { return 1.0f / (1.0f + expf(-x)); }
RL_FN double rl_sqrt_d(double x) { return sqrt(x); }

// Warp-wide combinations: a fixed xor butterfly, so the result does not
// depend on scheduling.
RL_FN double rl_lanes_sum(double x) {
    for (int d = 16; d > 0; d >>= 1) x += __shfl_xor_sync(RL_FULL, x, d);
    return x;
}
RL_FN double rl_lanes_max(double x) {
    for (int d = 16; d > 0; d >>= 1) x = rl_max_d(x, __shfl_xor_sync(RL_FULL, x, d));
    return x;
}
RL_FN double rl_lanes_min(double x) {
    for (int d = 16; d > 0; d >>= 1) x = rl_min_d(x, __shfl_xor_sync(RL_FULL, x, d));
    return x;
}
RL_FN int rl_lanes_any(int x) { return __any_sync(RL_FULL, x); }

// Batch reductions: `rl_batch_partial` folds the column into one double per
// block (grid and block sizes are fixed by the host, never by the device), a
// fixed shared-memory tree inside the block; `rl_batch_final` folds the
// partials in index order on one thread. Op codes: 0 sum, 1 mean, 2 std,
// 3 max, 4 min, 5 count. `pass` 1 of std sums squared deviations from
// `scratch[0]`, the mean pass 0 left there. With `masked`, only the rows
// where `m` is non-zero are read (`m` is then a column; otherwise any
// pointer), pass 2 counts them into `scratch[1]` first, and an empty
// selection gives 0.
#define RL_BATCH_THREADS __BATCH_THREADS__
extern "C" __global__ void rl_batch_partial(const rl_real* RL_RESTRICT x, const rl_real* RL_RESTRICT m, int masked,
                                            unsigned long long n, int op, int pass,
                                            const double* RL_RESTRICT scratch, double* RL_RESTRICT partials) {
    __shared__ double tree[RL_BATCH_THREADS];
    int extreme = pass != 2 && (op == 3 || op == 4);
    double acc = !extreme ? 0.0 : ((op == 3) ? -(double)RL_INF : (double)RL_INF);
    double mean = pass == 1 ? scratch[0] : 0.0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; j < n; j += stride) {
        if (masked && m[j] == 0) continue;
        if (pass == 2) { acc += 1.0; continue; }
        double v = (double)x[j];
        if (op == 3) acc = rl_max_d(acc, v);
        else if (op == 4) acc = rl_min_d(acc, v);
        else if (pass == 1) acc += (v - mean) * (v - mean);
        else acc += v;
    }
    tree[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int d = RL_BATCH_THREADS / 2; d > 0; d >>= 1) {
        if (threadIdx.x < d) {
            double a = tree[threadIdx.x], b = tree[threadIdx.x + d];
            tree[threadIdx.x] = !extreme ? a + b : (op == 3 ? rl_max_d(a, b) : rl_min_d(a, b));
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = tree[0];
}
extern "C" __global__ void rl_batch_final(const double* RL_RESTRICT partials, unsigned int parts, unsigned long long n,
                                          int op, int pass, int masked, double* RL_RESTRICT scratch,
                                          rl_real* RL_RESTRICT B, unsigned int out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int extreme = pass != 2 && (op == 3 || op == 4);
    double acc = partials[0];
    for (unsigned int p = 1; p < parts; p++) {
        acc = !extreme ? acc + partials[p] : (op == 3 ? rl_max_d(acc, partials[p]) : rl_min_d(acc, partials[p]));
    }
    if (pass == 2) { scratch[1] = acc; if (op == 5) B[out] = (rl_real)acc; return; }
    double cnt = masked ? scratch[1] : (double)n;
    if (op == 5) { B[out] = (rl_real)cnt; return; }
    if (masked && cnt == 0.0) { if (op == 2 && pass == 0) scratch[0] = 0.0; else B[out] = (rl_real)0; return; }
    if ((op == 3 || op == 4) && n == 0) acc = (double)RL_NAN;
    if (op == 1) acc = acc / cnt;
    if (op == 2 && pass == 0) { scratch[0] = acc / cnt; return; }
    if (op == 2) acc = sqrt(acc / cnt);
    B[out] = (rl_real)acc;
}
"#;

/// The device code of a compiled program.
pub fn emit_cuda(ir: &IrProgram, fusion: Fusion) -> CudaProgram {
    let plan = plan(ir, fusion);
    let mut kernels = String::new();
    let mut bodies = plan.bodies.iter();
    for launch in &plan.launches {
        let super::Launch::Kernel(k) = launch else { continue };
        let body = bodies.next().expect("one body per kernel launch");
        writeln!(kernels, "extern \"C\" __global__ void {}({}) {{", k.name, signature(&k.args))
            .expect("writing to a String");
        match k.grid {
            Grid::Rows => {
                kernels.push_str(
                    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n  \
                     for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {\n",
                );
                kernels.push_str(body);
                kernels.push_str("  }\n}\n");
            }
            Grid::GroupWarps => {
                kernels.push_str(
                    "  unsigned long long w = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / 32u;\n  \
                     if (w >= ng) return;  // a warp's lanes share w, so they leave together\n  {\n",
                );
                kernels.push_str(body);
                kernels.push_str("  }\n}\n");
            }
        }
    }
    let prelude = PRELUDE.replace("__BATCH_THREADS__", &BATCH_THREADS.to_string());
    let source = format!("{prelude}\n{kernels}");
    CudaProgram { fusion, source, kernels, launches: plan.launches, temps: plan.temps }
}
