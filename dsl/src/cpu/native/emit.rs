//! The C source of a native kernel: one function, `rl_native_run`, that runs
//! every stage of a one-pass program over a range of whole groups.
//!
//! The stages are cut into *segments*. A run of elementwise stages that read
//! no group value is one loop over the call's rows (long, so the compiler
//! vectorises it without a remainder per group); every other run of stages
//! works group by group, each stage on the group's rows: a group reduction
//! folds them, an elementwise stage first computes its group-constant
//! registers (`group.std(r) + 1e-4`) and then loops over the rows. In a tile
//! whose groups all have one of the [`FIXED_GROUPS`] sizes (4, 8 or 16 rows) the size
//! is a compile-time constant and each stage runs over the tile's groups in
//! turn; there a division by a group constant in a stage that also takes a
//! square root or divides per row is a multiplication by the constant's
//! reciprocal corrected by two fused multiply-adds (`rl_div_by`: the same
//! bits), which frees the divider. Registers that only depend on constants and params
//! are computed once, before any loop. Every register is a `const double`
//! local, so the compiler keeps a row's values in vector registers from the
//! feature loads to the stores.
//!
//! Each operator is the C spelling of its [`ops`](crate::interp::ops)
//! function with the same f64 operations in the same order (the prelude's
//! `rl_*` helpers), and each reduction folds in `ops`' order, so the values
//! are the interpreter's bit for bit (a NaN's sign aside; see the `cpu`
//! module docs). Constants are written as C99 hex
//! floats, exact by construction.

use std::fmt::Write;

use crate::ast::BinOp;
use crate::codegen::{Spelling, apply_expr};
use crate::cpu::plan::{Rate, rates};
use crate::hir::{Func, ReduceOp};
use crate::interp::ops::SUM_CHUNK;
use crate::ir::{Apply, Elementwise, IrProgram, Op, Reg, Source, Stage};

/// Bumped whenever `rl_args` or the entry points change; the loaded library
/// must answer [`abi`] from `rl_native_abi()`.
pub(crate) const ABI_VERSION: u32 = 1;

/// What `rl_native_abi()` returns: the version, the size of `rl_args` and
/// of `size_t`, so a library built for another layout is refused.
pub(crate) fn abi(args_size: usize, size_t: usize) -> u32 {
    (ABI_VERSION << 16) | ((args_size as u32) << 8) | size_t as u32
}

const PRELUDE: &str = r#"/* rewardlab native CPU kernel (generated; see rewardlab_dsl::cpu::native). */
#include <math.h>
#include <float.h>
#include <stddef.h>

/* The arguments of every call: group offsets, then arrays of column
   pointers indexed by feature, column and group-value id, then the params. */
typedef struct {
    const size_t* off;
    const double* const* f;
    double* const* c;
    double* const* g;
    const double* p;
} rl_args;

#define RL_ABI_VERSION @ABI@u
unsigned rl_native_abi(void) {
    return (RL_ABI_VERSION << 16) | ((unsigned)sizeof(rl_args) << 8) | (unsigned)sizeof(size_t);
}

/* The operators, as rewardlab_dsl::interp::ops defines them. */
/* `b` is 0 or 1 (a comparison, or `&`/`|` of comparisons); a conversion
   rather than `b ? 1.0 : 0.0`, which the vectoriser takes for control flow. */
static inline double rl_bool(int b) { return (double)b; }
/* Branch-free (`|`, not `||`), so the loops that use them vectorise. */
static inline double rl_min(double a, double b) { double m = b < a ? b : a; return ((a != a) | (b != b)) ? NAN : m; }
static inline double rl_max(double a, double b) { double m = b > a ? b : a; return ((a != a) | (b != b)) ? NAN : m; }
static inline double rl_sign(double x) { return x != x ? NAN : (double)(x > 0.0) - (double)(x < 0.0); }
static inline double rl_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
/* NaN or an infinity. A 64-bit flag, as wide as a double's lane, so the
   check vectorises without packing compare masks. */
static inline long long rl_bad(double x) { return !(fabs(x) <= DBL_MAX); }
/* Before every row loop: no row reads what another row writes (the stages are
   elementwise and every column has one writer). GCC honours `restrict` on the
   kernel's local column pointers only in part and versioned each loop with
   run-time overlap checks, a dozen instructions a group; this tells it, and
   clang, that the loop's rows are independent. */
/* A row loop inside a group is not unrolled either: for the group sizes the
   kernel fixes, the compiler would unroll it completely and then not
   vectorise it. */
#if defined(__clang__)
#define RL_ROWS _Pragma("clang loop vectorize(assume_safety)")
#define RL_GROUP_ROWS _Pragma("clang loop vectorize(assume_safety) unroll(disable)")
#elif defined(__GNUC__)
#define RL_ROWS _Pragma("GCC ivdep")
#define RL_GROUP_ROWS _Pragma("GCC ivdep") _Pragma("GCC unroll 1")
#else
#define RL_ROWS
#define RL_GROUP_ROWS
#endif

/* x / y given r = 1 / y (correctly rounded): q = x * r is within an ulp of
   x / y, the remainder x - q * y is exact in a fused multiply-add, and
   q + (x - q * y) * r, rounded once, is the correctly rounded quotient
   (Markstein's theorem), the bits of x / y, where no step overflows or
   underflows: y and x (unless zero) in [2^-400, 2^400] (rl_div_ok, and
   rl_div_slow flags the others, whose rows are divided again). A zero x
   gives x * r, the zero of x / y's sign. Without a hardware fused
   multiply-add the kernel divides. */
#if defined(FP_FAST_FMA)
static inline long long rl_div_ok(double y) { return (fabs(y) >= 0x1p-400) & (fabs(y) <= 0x1p400); }
static inline long long rl_div_slow(double x) { return (x != 0.0) & !rl_div_ok(x); }
static inline double rl_div_by(double x, double y, double r) {
    double q = x * r;
    double corrected = fma(fma(-q, y, x), r, q);
    return x == 0.0 ? q : corrected;
}
#else
static inline long long rl_div_ok(double y) { (void)y; return 1; }
static inline long long rl_div_slow(double x) { (void)x; return 0; }
static inline double rl_div_by(double x, double y, double r) { (void)r; return x / y; }
#endif

/* x / n over a group of n rows, given inv = 1 / n. When n is a power of two
   its reciprocal is exact, so x * inv is the same value as x / n, and the
   division leaves the chain of dependent operations each group's statistics
   wait on. The kernel computes inv once per run of groups of one size
   (RL_INV_N), not per group: a division per group value kept the divider,
   which sqrt and every row's division share, busy for nothing. */
static inline double rl_over_n(double x, size_t n, double inv) {
    return (n & (n - 1)) == 0 ? x * inv : x / (double)n;
}

/* ops::sum: left to right, in chunks of RL_CHUNK rows past that length. */
#define RL_CHUNK @CHUNK@
static inline double rl_sum(const double* x, size_t n, double mean, int squares) {
    double total = 0.0;
    for (size_t k = 0; k < n; k += RL_CHUNK) {
        size_t e = n - k < RL_CHUNK ? n : k + RL_CHUNK;
        double acc = 0.0;
        if (squares) {
            for (size_t j = k; j < e; j++) acc += (x[j] - mean) * (x[j] - mean);
        } else {
            for (size_t j = k; j < e; j++) acc += x[j];
        }
        if (n <= RL_CHUNK) return acc;
        total += acc;
    }
    return total;
}
/* ops::sum_masked: masked-out rows add +0.0, in rl_sum's order. */
static inline double rl_sum_masked(const double* x, const double* m, size_t n, double mean, int squares) {
    double total = 0.0;
    for (size_t k = 0; k < n; k += RL_CHUNK) {
        size_t e = n - k < RL_CHUNK ? n : k + RL_CHUNK;
        double acc = 0.0;
        for (size_t j = k; j < e; j++) {
            double term = squares ? (x[j] - mean) * (x[j] - mean) : x[j];
            acc += m[j] != 0.0 ? term : 0.0;
        }
        if (n <= RL_CHUNK) return acc;
        total += acc;
    }
    return total;
}
/* ops::count_masked. */
static inline double rl_count_masked(const double* m, size_t n) {
    double c = 0.0;
    for (size_t j = 0; j < n; j++) c += m[j] != 0.0 ? 1.0 : 0.0;
    return c;
}
/* ops::reduce(Max | Min): folded from the first value; NaN when empty. */
static inline double rl_extreme(const double* x, size_t n, int is_max) {
    if (n == 0) return NAN;
    double acc = x[0];
    for (size_t j = 1; j < n; j++) acc = is_max ? rl_max(acc, x[j]) : rl_min(acc, x[j]);
    return acc;
}
/* The same over the selected rows (the caller has checked there is one). */
static inline double rl_extreme_masked(const double* x, const double* m, size_t n, int is_max) {
    int any = 0;
    double acc = 0.0;
    for (size_t j = 0; j < n; j++) {
        if (m[j] == 0.0) continue;
        acc = !any ? x[j] : (is_max ? rl_max(acc, x[j]) : rl_min(acc, x[j]));
        any = 1;
    }
    return acc;
}
"#;

/// Why a program has no native kernel: the constructs the generated loop
/// does not express (they run on the block interpreter).
pub(crate) fn unsupported(ir: &IrProgram) -> Option<&'static str> {
    for stage in &ir.stages {
        match stage {
            Stage::Elementwise(e) if e.ops.iter().any(|op| matches!(op, Op::Batch(_))) => {
                return Some("a batch value");
            }
            Stage::Elementwise(_) | Stage::GroupReduce { .. } => {}
            Stage::GroupRank { .. } => return Some("a group rank"),
            Stage::BatchReduce { .. } => return Some("a batch reduction"),
            Stage::BatchRank { .. } => return Some("a batch rank"),
        }
    }
    None
}

/// Groups per tile of the segment loops (see `emit`).
const TILE_GROUPS: usize = 16;

/// The group sizes the kernel has a path of its own for (the size a constant): GRPO's usual
/// four, eight (the seeds' default) and sixteen rollouts a prompt. Other sizes, and tiles of
/// mixed sizes, run the general path. Measured on the Intel VM of session 34: with it CodeGrep
/// v1 went from 0.77-0.80 to 0.87-0.90 of the hand-written loop (groups of 8,
/// `scripts/kernel-ratio.sh`), and v3's kernel took 10% and 7% less time on groups of 4 and 16
/// (C harness); with the row loops unrolled (what the compiler does to a constant trip count
/// unless told not to) it was slower than without a path of its own.
const FIXED_GROUPS: [usize; 3] = [4, 8, 16];

/// The complete C source of `ir`'s kernel; `ir` must be [`unsupported`]-free.
pub(crate) fn emit(ir: &IrProgram) -> String {
    let mut out = PRELUDE.replace("@ABI@", &ABI_VERSION.to_string()).replace("@CHUNK@", &SUM_CHUNK.to_string());
    let o = ir.outputs;
    let mut outputs = vec![o.reward, o.adv, o.advantage];
    outputs.sort_unstable();
    outputs.dedup();
    let w = &mut out;
    w.push_str("\n/* Every stage over groups g0..g1 (whole groups, so calls write disjoint rows). */\n");
    w.push_str("int rl_native_run(const rl_args* a, size_t g0, size_t g1) {\n");
    w.push_str("    const size_t* RL_OFF = a->off;\n");
    w.push_str("    long long bad = 0;\n");
    // The reciprocal of the last group size seen (`rl_over_n`): groups mostly share one size.
    // No group has the first size, so the first group computes its reciprocal (an empty group's
    // is 1 / 0, as before).
    // (A program without `mean` or `std` never reads them; the casts keep `-Wunused` quiet.)
    w.push_str(
        "    size_t RL_LAST_N = (size_t)-1;\n    double RL_INV_N = 0.0;\n    (void)RL_LAST_N;\n    (void)RL_INV_N;\n",
    );
    // Pointers the stages use, each once.
    let mut features = Vec::new();
    let mut columns = Vec::new();
    let mut groups = Vec::new();
    let src = |s: Source, features: &mut Vec<usize>, columns: &mut Vec<usize>| match s {
        Source::Feature(f) => features.push(f),
        Source::Column(c) => columns.push(c),
        Source::None => {}
    };
    for stage in &ir.stages {
        match stage {
            Stage::Elementwise(e) => {
                for op in &e.ops {
                    match *op {
                        Op::Feature(f) => features.push(f),
                        Op::Column(c) => columns.push(c),
                        Op::Group(g) => groups.push(g),
                        _ => {}
                    }
                }
                columns.extend(e.stores.iter().map(|&(_, c)| c));
            }
            Stage::GroupReduce { arg, mask, out, .. } => {
                src(*arg, &mut features, &mut columns);
                if let Some(m) = mask {
                    src(*m, &mut features, &mut columns);
                }
                groups.push(*out);
            }
            _ => unreachable!("checked by `unsupported`"),
        }
    }
    columns.extend(&outputs);
    for list in [&mut features, &mut columns, &mut groups] {
        list.sort_unstable();
        list.dedup();
    }
    for f in &features {
        writeln!(w, "    const double* restrict f{f} = a->f[{f}];").expect("writing to a String");
    }
    for c in &columns {
        writeln!(w, "    double* restrict c{c} = a->c[{c}];").expect("writing to a String");
    }
    // Registers computed once per call: constants, params and ops on them.
    let rates: Vec<Vec<Rate>> = ir
        .stages
        .iter()
        .map(|s| match s {
            Stage::Elementwise(e) => rates(e),
            _ => Vec::new(),
        })
        .collect();
    for (s, stage) in ir.stages.iter().enumerate() {
        if let Stage::Elementwise(e) = stage {
            for (r, op) in e.ops.iter().enumerate() {
                if rates[s][r] == Rate::Once {
                    writeln!(w, "    const double s{s}r{r} = {};", rhs(s, op)).expect("writing to a String");
                }
            }
        }
    }
    // The segments run on tiles of `TILE_GROUPS` groups: the feature loads
    // of a row loop then alternate with the arithmetic of the group loops
    // finely enough that memory and the ALUs overlap (measured faster than
    // whole blocks of ~1024 rows), and a tile's columns stay in L1.
    writeln!(w, "    for (size_t RL_T0 = g0; RL_T0 < g1; RL_T0 += {TILE_GROUPS}) {{").expect("writing to a String");
    writeln!(w, "    const size_t RL_T1 = g1 - RL_T0 < {TILE_GROUPS} ? g1 : RL_T0 + {TILE_GROUPS};")
        .expect("writing to a String");
    // Group values live in the tile that computes and reads them (a group never spans
    // tiles): on the stack, where no other stream's addresses can collide with them.
    // As arrays of their own in the workspace (two more streams, placed per workspace)
    // they put some processes' kernels in a slow mode, 0.7x the fast one.
    for g in &groups {
        writeln!(w, "    double G{g}[{TILE_GROUPS}];").expect("writing to a String");
    }
    // Segments: runs of row-only elementwise stages, and the runs between.
    let row_only = |s: usize| matches!(&ir.stages[s], Stage::Elementwise(_)) && !rates[s].contains(&Rate::PerGroup);
    if (0..ir.stages.len()).any(|s| !row_only(s)) {
        // The tile's one group size, or 0 when its groups differ.
        w.push_str("    const size_t RL_FIRST_N = RL_OFF[RL_T0 + 1] - RL_OFF[RL_T0];\n    int RL_SAME = 1;\n");
        w.push_str("    for (size_t g = RL_T0; g < RL_T1; g++) RL_SAME &= RL_OFF[g + 1] - RL_OFF[g] == RL_FIRST_N;\n");
        w.push_str("    const size_t RL_FIXED = RL_SAME ? RL_FIRST_N : 0;\n");
    }
    let mut s = 0;
    while s < ir.stages.len() {
        let start = s;
        let rows = row_only(s);
        while s < ir.stages.len() && row_only(s) == rows {
            s += 1;
        }
        if rows {
            w.push_str("    RL_ROWS\n    for (size_t i = RL_OFF[RL_T0]; i < RL_OFF[RL_T1]; i++) {\n");
            for (t, (stage, rate)) in ir.stages.iter().zip(&rates).enumerate().take(s).skip(start) {
                let Stage::Elementwise(e) = stage else { unreachable!("row-only stages are elementwise") };
                row_body(w, t, e, rate, "        ");
            }
            w.push_str("    }\n");
        } else {
            // Each stage of the segment as the text that runs it on group `g`, for any group
            // size and for groups of a size in `FIXED_GROUPS` (where a division by a group constant
            // may be multiplied out; `stage_on_group`).
            let stage_text =
                |fixed: bool| -> Vec<String> { (start..s).map(|t| stage_on_group(ir, t, &rates[t], fixed)).collect() };
            // A tile whose groups all have a size in `FIXED_GROUPS` runs each stage over the tile's
            // groups in turn, with the size a constant: the reductions' loops become
            // straight-line code, the row loops need no remainder, and one stage's groups
            // are independent work (a group's chain of sums, square root and division no
            // longer waits for the group before it). Other tiles run every stage group by
            // group. The same operations in the same order on every group either way, so
            // the same bits.
            let fixed_text = stage_text(true);
            for (k, n) in FIXED_GROUPS.into_iter().enumerate() {
                let branch = if k == 0 { "if" } else { "} else if" };
                writeln!(w, "    {branch} (RL_FIXED == {n}) {{").expect("writing to a String");
                // (Both are read only by some stages; the casts keep `-Wunused` quiet.)
                writeln!(
                    w,
                    "    const size_t RL_N = {n};\n    const double RL_INV_N = 1.0 / {n}.0;\n    (void)RL_N;\n    (void)RL_INV_N;"
                )
                .expect("writing to a String");
                for (t, text) in (start..s).zip(&fixed_text) {
                    w.push_str("    for (size_t g = RL_T0; g < RL_T1; g++) {\n");
                    // (A count reads no row.)
                    w.push_str("        const size_t RL_S = RL_OFF[g];\n        (void)RL_S;\n");
                    if matches!(ir.stages[t], Stage::Elementwise(_)) {
                        writeln!(w, "        const size_t RL_E = RL_S + {n};").expect("writing to a String");
                    }
                    w.push_str(text);
                    w.push_str("    }\n");
                }
            }
            w.push_str("    } else {\n");
            w.push_str("    for (size_t g = RL_T0; g < RL_T1; g++) {\n");
            w.push_str("        const size_t RL_S = RL_OFF[g], RL_E = RL_OFF[g + 1], RL_N = RL_E - RL_S;\n");
            w.push_str("        if (RL_N != RL_LAST_N) { RL_LAST_N = RL_N; RL_INV_N = 1.0 / (double)RL_N; }\n");
            w.push_str(&stage_text(false).concat());
            w.push_str("    }\n    }\n");
        }
    }
    // NaN and infinities in the tile's outputs, checked once the tile is
    // written (its rows are still in L1): a loop of its own vectorises into a
    // few instructions a row, where a check beside every store cost about
    // 15% of the kernel (the check here, 6-7%).
    // An output stored from the same register as another (`advantage = adv`) holds the same
    // values, so only the first of them is checked; one that a group `sum`, `mean` or `std`
    // reads is checked through that value, once a group (`summed_by`: 7-9% of v1's kernel in
    // the C harness).
    // Every store as (column, (stage, register)).
    let stores: Vec<(usize, (usize, usize))> = ir
        .stages
        .iter()
        .enumerate()
        .filter_map(|(s, stage)| match stage {
            Stage::Elementwise(e) => Some(e.stores.iter().map(move |&(r, c)| (c, (s, r)))),
            _ => None,
        })
        .flatten()
        .collect();
    let stored_from = |c: usize| {
        let mut writers = stores.iter().filter(|&&(col, _)| col == c).map(|&(_, source)| source);
        // A column written more than once is checked whatever wrote it.
        writers.next().filter(|_| writers.next().is_none())
    };
    let mut sources = Vec::new();
    let mut row_checks = Vec::new();
    let mut group_checks = Vec::new();
    for &c in &outputs {
        let source = stored_from(c);
        if source.is_some_and(|s| sources.contains(&s)) {
            continue;
        }
        sources.extend(source);
        match source.and_then(|_| summed_by(ir, c)) {
            Some(g) => group_checks.push(format!("rl_bad(G{g}[g - RL_T0])")),
            None => row_checks.push(format!("rl_bad(c{c}[i])")),
        }
    }
    if !row_checks.is_empty() {
        w.push_str("    RL_ROWS\n    for (size_t i = RL_OFF[RL_T0]; i < RL_OFF[RL_T1]; i++) {\n");
        writeln!(w, "        bad |= {};", row_checks.join(" | ")).expect("writing to a String");
        w.push_str("    }\n");
    }
    if !group_checks.is_empty() {
        w.push_str("    for (size_t g = RL_T0; g < RL_T1; g++) {\n");
        writeln!(w, "        bad |= {};", group_checks.join(" | ")).expect("writing to a String");
        w.push_str("    }\n");
    }
    w.push_str("    }\n    return bad != 0;\n}\n");
    out
}

/// A group value that sums every row of output column `c` (an unmasked `sum`, `mean` or `std`
/// of it), if there is one: then the column's check is that value's. A sum of finite values
/// that is NaN or infinite has overflowed, but a NaN or an infinity among its terms always
/// makes it one (`mean` is the sum times a finite reciprocal, `std` sums squares of distances
/// from that mean), so a finite value clears the group's rows with one test instead of one a
/// row. The flag the kernel returns is then "maybe": an overflowing sum of finite rows, or an
/// empty group's `0 / 0` mean, raises it with every row finite, and the caller
/// ([`crate::cpu`]'s `finish`) looks at the outputs before reporting anything. `c` has one
/// writer, so the value read is the value checked.
fn summed_by(ir: &IrProgram, c: usize) -> Option<usize> {
    ir.stages.iter().find_map(|stage| match *stage {
        Stage::GroupReduce {
            op: ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Std,
            arg: Source::Column(a),
            mask: None,
            out,
        } if a == c => Some(out),
        _ => None,
    })
}

/// The per-row registers of stage `s` and its stores.
fn row_body(w: &mut String, s: usize, e: &Elementwise, rate: &[Rate], indent: &str) {
    row_body_dividing(w, s, e, rate, indent, false);
}

/// [`row_body`], with each division by a group constant multiplied out when `by_reciprocal`
/// (`rl_div_by`, given the constant's reciprocal `RL_Y<register>`), and every numerator that
/// needs the true division flagged in `RL_SLOW`.
fn row_body_dividing(w: &mut String, s: usize, e: &Elementwise, rate: &[Rate], indent: &str, by_reciprocal: bool) {
    let mut flagged = Vec::new();
    for (r, op) in e.ops.iter().enumerate() {
        if rate[r] != Rate::PerRow {
            continue;
        }
        let value = match group_division(op, rate) {
            Some((x, y)) if by_reciprocal => {
                flagged.push(x);
                format!("rl_div_by(s{s}r{x}, s{s}r{y}, RL_Y{y})")
            }
            _ => rhs(s, op),
        };
        writeln!(w, "{indent}const double s{s}r{r} = {value};").expect("writing to a String");
    }
    flagged.sort_unstable();
    flagged.dedup();
    for x in flagged {
        writeln!(w, "{indent}RL_SLOW |= rl_div_slow(s{s}r{x});").expect("writing to a String");
    }
    for &(r, c) in &e.stores {
        writeln!(w, "{indent}c{c}[i] = s{s}r{r};").expect("writing to a String");
    }
}

/// Whether `op` runs on the divider unit (a division or a square root).
fn uses_divider(op: &Op) -> bool {
    matches!(op, Op::Apply(Apply::Binary(BinOp::Div, ..) | Apply::Func(Func::Sqrt, _)))
}

/// `(numerator, divisor)` of a per-row register that divides by a group constant.
fn group_division(op: &Op, rate: &[Rate]) -> Option<(Reg, Reg)> {
    match *op {
        Op::Apply(Apply::Binary(BinOp::Div, x, y)) if rate[y] == Rate::PerGroup => Some((x, y)),
        _ => None,
    }
}

/// Stage `t` of a group segment on group `g` (rows `RL_S..RL_E`, `RL_N` of them). With
/// `fixed` (groups of a size in `FIXED_GROUPS`, on a machine with a fused multiply-add), an
/// elementwise stage whose rows also take a square root or divide by something else divides
/// by a group constant `y` by multiplying with `1 / y` and
/// correcting the quotient with two fused multiply-adds (`rl_div_by`: the correctly rounded
/// quotient, the same bits as `x / y`, Markstein's theorem), and runs its rows again dividing
/// when a value falls outside the range where that holds (`RL_SLOW`). The divider, which
/// every row's division and square root share, was the kernel's bottleneck.
fn stage_on_group(ir: &IrProgram, t: usize, rate: &[Rate], fixed: bool) -> String {
    let mut b = String::new();
    match &ir.stages[t] {
        Stage::Elementwise(e) => {
            b.push_str("            {\n");
            for (r, op) in e.ops.iter().enumerate() {
                if rate[r] == Rate::PerGroup {
                    writeln!(b, "                const double s{t}r{r} = {};", rhs(t, op))
                        .expect("writing to a String");
                }
            }
            let mut divisors: Vec<Reg> = e
                .ops
                .iter()
                .enumerate()
                .filter(|&(r, _)| rate[r] == Rate::PerRow)
                .filter_map(|(_, op)| group_division(op, rate))
                .map(|(_, y)| y)
                .collect();
            divisors.sort_unstable();
            divisors.dedup();
            // Only where the divider is busy with more than the division: measured on the
            // Intel VM of session 34, the reciprocal made GRPO's `adv` alone (CodeGrep v1,
            // FuseSearch F1·e) 5-10% slower and `adv` beside a per-row square root (CodeGrep
            // v2 and v3's discount) 8-12% faster.
            let divider_busy = e
                .ops
                .iter()
                .enumerate()
                .any(|(r, op)| rate[r] == Rate::PerRow && group_division(op, rate).is_none() && uses_divider(op));
            let by_reciprocal = fixed && !divisors.is_empty() && divider_busy;
            if by_reciprocal {
                b.push_str("                long long RL_SLOW = 0;\n");
                for y in &divisors {
                    writeln!(b, "                const double RL_Y{y} = 1.0 / s{t}r{y};\n                RL_SLOW |= !rl_div_ok(s{t}r{y});")
                        .expect("writing to a String");
                }
            }
            b.push_str("                RL_GROUP_ROWS\n                for (size_t i = RL_S; i < RL_E; i++) {\n");
            row_body_dividing(&mut b, t, e, rate, "                    ", by_reciprocal);
            b.push_str("                }\n");
            if by_reciprocal {
                b.push_str("                if (RL_SLOW) {\n                RL_GROUP_ROWS\n                for (size_t i = RL_S; i < RL_E; i++) {\n");
                row_body(&mut b, t, e, rate, "                    ");
                b.push_str("                }\n                }\n");
            }
            b.push_str("            }\n");
        }
        Stage::GroupReduce { op, arg, mask, out } => {
            // `std` after a `mean` of the same column reuses it
            // (the same `sum / n`, so the same value).
            let mean = (mask.is_none() && *op == ReduceOp::Std)
                .then(|| {
                    ir.stages[..t].iter().find_map(|st| match st {
                        Stage::GroupReduce { op: ReduceOp::Mean, arg: a, mask: None, out } if a == arg => Some(*out),
                        _ => None,
                    })
                })
                .flatten();
            group_value(&mut b, *op, *arg, *mask, mean, *out);
        }
        _ => unreachable!("checked by `unsupported`"),
    }
    b
}

/// Writes group value `out` of group `g` (rows `RL_S..RL_E`), as `ops::reduce`
/// or `ops::reduce_masked` computes it; `mean` names a group value that
/// already holds this column's mean.
fn group_value(w: &mut String, op: ReduceOp, arg: Source, mask: Option<Source>, mean: Option<usize>, out: usize) {
    let x = match arg {
        Source::Feature(f) => format!("f{f} + RL_S"),
        Source::Column(c) => format!("c{c} + RL_S"),
        Source::None => "0".to_string(),
    };
    let value = match mask {
        None => match op {
            ReduceOp::Count => "(double)RL_N".to_string(),
            ReduceOp::Sum => format!("rl_sum({x}, RL_N, 0.0, 0)"),
            ReduceOp::Mean => format!("rl_over_n(rl_sum({x}, RL_N, 0.0, 0), RL_N, RL_INV_N)"),
            ReduceOp::Std => {
                let m = match mean {
                    Some(m) => format!("G{m}[g - RL_T0]"),
                    None => format!("rl_over_n(rl_sum({x}, RL_N, 0.0, 0), RL_N, RL_INV_N)"),
                };
                format!("sqrt(rl_over_n(rl_sum({x}, RL_N, {m}, 1), RL_N, RL_INV_N))")
            }
            ReduceOp::Max => format!("rl_extreme({x}, RL_N, 1)"),
            ReduceOp::Min => format!("rl_extreme({x}, RL_N, 0)"),
            ReduceOp::Rank => unreachable!("ranks are their own stage"),
        },
        Some(m) => {
            let m = match m {
                Source::Feature(f) => format!("f{f} + RL_S"),
                Source::Column(c) => format!("c{c} + RL_S"),
                Source::None => unreachable!("a mask reads a column"),
            };
            let cnt = format!("rl_count_masked({m}, RL_N)");
            let value = match op {
                ReduceOp::Count => "RL_C".to_string(),
                ReduceOp::Sum => format!("rl_sum_masked({x}, {m}, RL_N, 0.0, 0)"),
                ReduceOp::Mean => format!("rl_sum_masked({x}, {m}, RL_N, 0.0, 0) / RL_C"),
                ReduceOp::Std => format!(
                    "sqrt(rl_sum_masked({x}, {m}, RL_N, rl_sum_masked({x}, {m}, RL_N, 0.0, 0) / RL_C, 1) / RL_C)"
                ),
                ReduceOp::Max => format!("rl_extreme_masked({x}, {m}, RL_N, 1)"),
                ReduceOp::Min => format!("rl_extreme_masked({x}, {m}, RL_N, 0)"),
                ReduceOp::Rank => unreachable!("ranks are their own stage"),
            };
            // An empty selection gives 0 for every op.
            writeln!(w, "            {{\n                const double RL_C = {cnt};\n                G{out}[g - RL_T0] = RL_C == 0.0 ? 0.0 : {value};\n            }}")
                .expect("writing to a String");
            return;
        }
    };
    writeln!(w, "            G{out}[g - RL_T0] = {value};").expect("writing to a String");
}

/// The right-hand side of register `op` of stage `s`.
fn rhs(s: usize, op: &Op) -> String {
    let reg = |r: Reg| format!("s{s}r{r}");
    match *op {
        Op::Const(x) => literal(x),
        Op::Param(p) => format!("a->p[{p}]"),
        Op::Feature(f) => format!("f{f}[i]"),
        Op::Column(c) => format!("c{c}[i]"),
        Op::Group(g) => format!("G{g}[g - RL_T0]"),
        Op::Batch(_) => unreachable!("checked by `unsupported`"),
        Op::Apply(apply) => compute(apply, &reg),
    }
}

/// The native kernels' C: libm on `double`, branch-free logic (see [`Spelling`]).
const NATIVE: Spelling =
    Spelling { zero: "0.0", branch_free: true, math: ["pow", "sqrt", "exp", "log", "fabs", "tanh"] };

fn compute(apply: Apply<Reg>, reg: &dyn Fn(Reg) -> String) -> String {
    apply_expr(apply, reg, &NATIVE)
}

/// `x` as an exact C99 hex-float literal (NaN and the infinities by macro).
fn literal(x: f64) -> String {
    if x.is_nan() {
        return "NAN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "INFINITY".to_string() } else { "-INFINITY".to_string() };
    }
    let bits = x.to_bits();
    let sign = if bits >> 63 == 1 { "-" } else { "" };
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    let mantissa = bits & ((1 << 52) - 1);
    if exponent == 0 {
        // Zero or subnormal: 0.m × 2^-1022.
        format!("{sign}0x0.{mantissa:013x}p-1022")
    } else {
        format!("{sign}0x1.{mantissa:013x}p{}", exponent - 1023)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_exact_hex_floats() {
        assert_eq!(literal(1.0), "0x1.0000000000000p0");
        assert_eq!(literal(-0.5), "-0x1.0000000000000p-1");
        assert_eq!(literal(0.0), "0x0.0000000000000p-1022");
        assert_eq!(literal(-0.0), "-0x0.0000000000000p-1022");
        assert_eq!(literal(f64::from_bits(1)), "0x0.0000000000001p-1022");
        assert_eq!(literal(1e-4), format!("0x1.{:013x}p-14", 1e-4f64.to_bits() & ((1 << 52) - 1)));
        assert_eq!(literal(f64::NEG_INFINITY), "-INFINITY");
    }

    /// The native kernel's C source for `program`.
    fn source_of(program: &crate::hir::Program) -> String {
        emit(crate::cpu::CompiledProgram::new(program).ir())
    }

    /// Every row loop is marked independent for the C compiler (`RL_ROWS`, or `RL_GROUP_ROWS`
    /// inside a group, which also keeps it rolled), and only row loops are.
    #[test]
    fn every_row_loop_is_marked_independent() {
        let source = source_of(&crate::interp::testkit::gated_program());
        let lines: Vec<&str> = source.lines().map(str::trim).collect();
        let row_loops = lines.iter().filter(|l| l.starts_with("for (size_t i = ")).count();
        assert!(row_loops >= 3, "{source}");
        let marks = |mark: &str| {
            let at: Vec<usize> = (0..lines.len()).filter(|&k| lines[k] == mark).collect();
            for &k in &at {
                assert!(lines[k + 1].starts_with("for (size_t i = "), "line {k}: {}", lines[k + 1]);
            }
            at.len()
        };
        let (tile, group) = (marks("RL_ROWS"), marks("RL_GROUP_ROWS"));
        assert_eq!(tile + group, row_loops, "{source}");
        let in_groups = lines.iter().filter(|l| l.starts_with("for (size_t i = RL_S;")).count();
        assert_eq!(group, in_groups, "{source}");
    }

    /// A tile of groups of one of the fixed sizes runs each stage over its groups in turn with the
    /// size a constant; other tiles run the stages group by group. A division by a group constant is
    /// multiplied out only in a stage whose rows also take a square root, with the dividing loop
    /// (the other tiles' loop) kept for the rows that need it.
    #[test]
    fn tiles_of_the_fixed_sizes_run_stage_by_stage() {
        use crate::interp::testkit::*;
        // The path for each fixed size, and the general path.
        let split = |source: &str| {
            let mut paths = Vec::new();
            let mut rest = source;
            for (k, n) in FIXED_GROUPS.into_iter().enumerate() {
                let open = format!("    {} (RL_FIXED == {n}) {{\n", if k == 0 { "if" } else { "} else if" });
                let (_, after) = rest.split_once(&open).unwrap_or_else(|| panic!("no path for {n}:\n{source}"));
                let end = after.find("\n    } else").expect("another path after it");
                paths.push(after[..end].to_string());
                rest = &after[end..];
            }
            let (_, rest) = rest.split_once("\n    } else {\n").expect("a path for other sizes");
            let any = &rest[..rest.find("\n    RL_ROWS").expect("the tile's check loop")];
            (paths, any.to_string())
        };
        let source = source_of(&gated_program());
        assert!(source.contains("RL_SAME &= RL_OFF[g + 1] - RL_OFF[g] == RL_FIRST_N;"), "{source}");
        let (paths, any) = split(&source);
        for (fixed, n) in paths.iter().zip(FIXED_GROUPS) {
            assert!(fixed.contains(&format!("const size_t RL_N = {n};")), "{fixed}");
            // mean, std, and the stage that computes adv and advantage: a loop over the groups each.
            assert_eq!(fixed.matches("for (size_t g = RL_T0; g < RL_T1; g++) {").count(), 3, "{fixed}");
            assert_eq!(fixed.matches("const size_t RL_S = RL_OFF[g];").count(), 3, "{fixed}");
            assert_eq!(fixed.matches(&format!("RL_E = RL_S + {n};")).count(), 1, "{fixed}");
            assert!(fixed.contains("rl_div_by("), "{fixed}");
            // The re-run divides, as the loop of other tiles does.
            let row_loop = |part: &str| {
                let at = part.rfind("RL_GROUP_ROWS").expect("a row loop");
                part[at..part[at..].find("\n                }").map(|e| at + e).expect("its end")].to_string()
            };
            let (_, rerun) = fixed.split_once("if (RL_SLOW) {").expect("a dividing re-run");
            assert_eq!(row_loop(rerun), row_loop(&any));
        }
        assert_eq!(any.matches("for (size_t g = RL_T0; g < RL_T1; g++) {").count(), 1, "{any}");
        assert!(!any.contains("rl_div_by("), "{any}");
        // GRPO's adv alone keeps dividing.
        let mut b = Builder::default();
        let x = b.feature("grade(word)");
        let (paths, _) = split(&source_of(&b.finish(x, None, None)));
        assert!(paths.iter().all(|fixed| !fixed.contains("rl_div_by(") && fixed.contains(" / s")), "{paths:?}");
    }

    /// The tile's check names each output column that holds values of its own; `advantage = adv`
    /// stores one register twice, so one of the two is checked. The reward, which GRPO's
    /// `group.mean` sums, is checked through that mean, once a group.
    #[test]
    fn an_output_stored_from_the_same_register_is_checked_once() {
        use crate::interp::testkit::*;
        // The row check's line, then the group check's.
        let check_lines = |program: &crate::hir::Program| {
            let source = source_of(program);
            let lines: Vec<String> =
                source.lines().filter(|l| l.contains("bad |=")).map(|l| l.trim().to_string()).collect();
            assert_eq!(lines.len(), 2, "{source}");
            (lines[0].clone(), lines[1].clone())
        };
        let (rows, groups) = check_lines(&gated_program());
        assert_eq!(rows.matches("rl_bad(c").count(), 2, "{rows}");
        assert_eq!(groups, "bad |= rl_bad(G0[g - RL_T0]);");
        let mut b = Builder::default();
        let x = b.feature("grade(word)");
        // (A reward that is a feature as read is summed from the feature, not its column.)
        let (rows, groups) = check_lines(&b.finish(bin(BinOp::Add, x, num(1.0)), None, None));
        assert_eq!(rows.matches("rl_bad(c").count(), 1, "{rows}");
        assert_eq!(groups.matches("rl_bad(G").count(), 1, "{groups}");
    }
}
