//! The C twin of the CUDA source: the same kernel bodies in plain loops
//! (`RL_LANES = 1`, so a "warp" is one lane and the lane combinations are the
//! identity), and one `rl_entry_K(const rl_ctx*)` per launch `K` so a test
//! harness calls every launch through one function type. `rl_real` is `float`
//! unless the compiler is given `-DRL_REAL=double`.

use std::fmt::Write;

use super::{Arg, Fusion, Grid, IrProgram, Launch, plan, signature};
use crate::ir::Source;

const PRELUDE: &str = r#"/* rewardlab reward kernels, C twin (generated; see rewardlab_dsl::codegen). */
#include <math.h>
#ifndef RL_REAL
#define RL_REAL float
#endif
typedef RL_REAL rl_real;
#define RL_IS_FLOAT (sizeof(rl_real) == sizeof(float))
#define RL_RESTRICT restrict
#define RL_FN static inline
#define RL_LANE 0u
#define RL_LANES 1u
#define RL_NAN ((rl_real)NAN)
#define RL_INF ((rl_real)INFINITY)

RL_FN rl_real rl_bool(int b) { return b ? (rl_real)1 : (rl_real)0; }
RL_FN rl_real rl_min(rl_real a, rl_real b) { return (a != a || b != b) ? RL_NAN : (b < a ? b : a); }
RL_FN rl_real rl_max(rl_real a, rl_real b) { return (a != a || b != b) ? RL_NAN : (b > a ? b : a); }
RL_FN double rl_min_d(double a, double b) { return (a != a || b != b) ? (double)NAN : (b < a ? b : a); }
RL_FN double rl_max_d(double a, double b) { return (a != a || b != b) ? (double)NAN : (b > a ? b : a); }
RL_FN rl_real rl_sign(rl_real x) { return x > 0 ? (rl_real)1 : (x < 0 ? (rl_real)-1 : (x == 0 ? (rl_real)0 : RL_NAN)); }
RL_FN rl_real rl_sqrt(rl_real x) { return RL_IS_FLOAT ? sqrtf((float)x) : (rl_real)sqrt((double)x); }
RL_FN rl_real rl_exp(rl_real x) { return RL_IS_FLOAT ? expf((float)x) : (rl_real)exp((double)x); }
RL_FN rl_real rl_log(rl_real x) { return RL_IS_FLOAT ? logf((float)x) : (rl_real)log((double)x); }
RL_FN rl_real rl_abs(rl_real x) { return RL_IS_FLOAT ? fabsf((float)x) : (rl_real)fabs((double)x); }
RL_FN rl_real rl_tanh(rl_real x) { return RL_IS_FLOAT ? tanhf((float)x) : (rl_real)tanh((double)x); }
RL_FN rl_real rl_pow(rl_real a, rl_real b) { return RL_IS_FLOAT ? powf((float)a, (float)b) : (rl_real)pow((double)a, (double)b); }
RL_FN rl_real rl_sigmoid(rl_real x) { return (rl_real)1 / ((rl_real)1 + rl_exp(-x)); }
RL_FN double rl_sqrt_d(double x) { return sqrt(x); }
RL_FN double rl_lanes_sum(double x) { return x; }
RL_FN double rl_lanes_max(double x) { return x; }
RL_FN double rl_lanes_min(double x) { return x; }
RL_FN int rl_lanes_any(int x) { return x; }

/* Batch reductions, accumulated in double left to right (op codes as on the
   device). With a mask `m` (0 for none) only the rows where it is non-zero
   are read, and an empty selection gives 0. */
static double rl_batch_reduce(const rl_real* x, const rl_real* m, unsigned long long n, int op) {
    double cnt = (double)n, acc = 0.0, mean, dev = 0.0;
    unsigned long long j;
    int any = 0;
    if (m) {
        cnt = 0.0;
        for (j = 0; j < n; j++) cnt += m[j] != 0 ? 1.0 : 0.0;
        if (cnt == 0.0) return 0.0;
    }
    if (op == 5) return cnt;
    if (op == 3 || op == 4) {
        if (n == 0) return (double)NAN;
        for (j = 0; j < n; j++) {
            if (m && m[j] == 0) continue;
            acc = !any ? (double)x[j] : (op == 3 ? rl_max_d(acc, (double)x[j]) : rl_min_d(acc, (double)x[j]));
            any = 1;
        }
        return acc;
    }
    for (j = 0; j < n; j++) acc += (m && m[j] == 0) ? 0.0 : (double)x[j];
    if (op == 0) return acc;
    mean = acc / cnt;
    if (op == 1) return mean;
    for (j = 0; j < n; j++) dev += (m && m[j] == 0) ? 0.0 : ((double)x[j] - mean) * ((double)x[j] - mean);
    return sqrt(dev / cnt);
}

/* What every entry point reads: the arrays of the device's kernel parameters. */
typedef struct {
    unsigned long long n, ng;
    const rl_real* const* f;
    rl_real* const* c;
    rl_real* const* g;
    rl_real* b;
    const rl_real* p;
    const unsigned int* gid;
    const unsigned long long* off;
    rl_real* const* t;
} rl_ctx;
"#;

/// C source of every stage: the kernels as loops, then `rl_entry_0` ... one
/// per launch (a host-side batch rank's entry does nothing).
pub fn emit_c(ir: &IrProgram, fusion: Fusion) -> String {
    let plan = plan(ir, fusion);
    let mut out = String::from(PRELUDE);
    let mut bodies = plan.bodies.iter();
    let mut entries = String::new();
    for (k, launch) in plan.launches.iter().enumerate() {
        match launch {
            Launch::Kernel(kernel) => {
                let body = bodies.next().expect("one body per kernel launch");
                writeln!(out, "\nstatic void {}({}) {{", kernel.name, signature(&kernel.args))
                    .expect("writing to a String");
                match kernel.grid {
                    Grid::Rows => out.push_str("  for (unsigned long long i = 0; i < n; i++) {\n"),
                    Grid::GroupWarps => out.push_str("  for (unsigned long long w = 0; w < ng; w++) {\n"),
                }
                out.push_str(body);
                out.push_str("  }\n}\n");
                let args: Vec<String> = kernel.args.iter().map(ctx_field).collect();
                writeln!(entries, "void rl_entry_{k}(const rl_ctx* x) {{ {}({}); }}", kernel.name, args.join(", "))
                    .expect("writing to a String");
            }
            Launch::BatchReduce { op, arg, mask, out: b } => {
                let src = |s: &Source| match s {
                    Source::Feature(f) => format!("x->f[{f}]"),
                    Source::Column(c) => format!("x->c[{c}]"),
                    Source::None => "0".to_string(),
                };
                let m = mask.as_ref().map_or("0".to_string(), src);
                writeln!(
                    entries,
                    "void rl_entry_{k}(const rl_ctx* x) {{ x->b[{b}] = (rl_real)rl_batch_reduce({}, {m}, x->n, {}); }}",
                    src(arg),
                    super::batch_op_code(*op)
                )
                .expect("writing to a String");
            }
            Launch::BatchRank { .. } => {
                writeln!(entries, "void rl_entry_{k}(const rl_ctx* x) {{ (void)x; /* ranked on the host */ }}")
                    .expect("writing to a String");
            }
        }
    }
    out.push('\n');
    out.push_str(&entries);
    out
}

fn ctx_field(arg: &Arg) -> String {
    match *arg {
        Arg::Rows => "x->n".to_string(),
        Arg::Groups => "x->ng".to_string(),
        Arg::Feature(f) => format!("x->f[{f}]"),
        Arg::ColumnIn(c) | Arg::ColumnOut(c) => format!("x->c[{c}]"),
        Arg::GroupIn(g) | Arg::GroupOut(g) => format!("x->g[{g}]"),
        Arg::GroupIds => "x->gid".to_string(),
        Arg::Offsets => "x->off".to_string(),
        Arg::Params => "x->p".to_string(),
        Arg::Batch => "x->b".to_string(),
        Arg::TempIn(t) | Arg::TempOut(t) => format!("x->t[{t}]"),
    }
}
