//! CUDA and C source emitted from the [stage IR](crate::ir).
//!
//! # Design
//!
//! Every stage of an [`IrProgram`] becomes one *launch*:
//!
//! - a fused [`Stage::Elementwise`] stage is **one kernel**: one thread per
//!   row (a grid-stride loop), the stage's SSA ops become one `rl_real rN =
//!   ...;` line each, held in registers, and only the stage's stores touch
//!   global memory;
//! - a [`Stage::GroupReduce`] is a **segmented reduction**, one warp per group
//!   over the contiguous rows `off[g]..off[g + 1]`: each lane folds a strided
//!   share in `double`, then a fixed butterfly of warp shuffles combines the
//!   lanes. `std` is two-pass (mean, then squared deviations from it), as on
//!   the CPU. [`Stage::GroupRank`] gives each lane its rows and counts, for
//!   each, the rows of its group below and equal to it (`less + (equal + 1) /
//!   2` is the average rank of a tie); a NaN anywhere in the group makes every
//!   rank NaN, as on the CPU. That is quadratic in the group size, which is
//!   fine for GRPO groups (8 to a few hundred rollouts). A `where` mask is one
//!   more column read: masked-out rows add `+0.0` to the sums (exact, so the
//!   sums are the selected rows'), the selected rows are counted alongside,
//!   and an empty selection gives 0, as `ops::reduce_masked` defines;
//! - a [`Stage::BatchReduce`] is a **grid-wide reduction** by two generic
//!   kernels of the prelude: a fixed grid ([`BATCH_BLOCKS`] blocks of
//!   [`BATCH_THREADS`] threads) folds the column into one `double` partial per
//!   block with a fixed shared-memory tree, then one thread folds the partials
//!   in index order. The grid never depends on the device, so the result
//!   depends only on the input (deterministic). `std` runs both kernels twice
//!   (mean, then squared deviations). A masked reduction first counts its
//!   selected rows (pass 2 of the same kernels, kept in the scratch space)
//!   and then reads only those;
//! - a [`Stage::BatchRank`] needs a global sort: the runtime ranks the column
//!   on the host with the interpreter's own [`rank_into`](crate::interp::ops::rank_into)
//!   and uploads the ranks. No sample reward file uses it.
//!
//! **Data layout** (what the kernels' parameters are): structure of arrays,
//! one `f32` column per feature (`f0`, `f1`, ...), per materialised IR
//! column (`c0`, ...) and, in the unfused mode, per temporary (`t0`, ...);
//! `off` is the `ng + 1` group offsets (`u64`), `gid` the group id of every
//! row (`u32`, so an elementwise kernel reads a group value as `g0[gid[i]]`
//! with no search), each per-group value an array of `ng` floats indexed by
//! group id, `P` the params and `B` the batch values (`f32` arrays read by
//! every thread). Params stay loads, so a study changes one without
//! recompiling.
//!
//! **Numerics**: storage and elementwise math are `f32` (`rl_real`);
//! reductions accumulate in `double` and round once, so a group of equal
//! rewards has a mean equal to each of them and GRPO's `adv` is exactly 0 as
//! on the CPU. Every operator mirrors [`ops`](crate::interp::ops): min/max
//! propagate NaN, `sign(0) = 0`, any non-zero value (NaN too) is true,
//! comparisons give 1 or 0, so NaN semantics are the CPU's. The CUDA source is
//! compiled without fast math and without FMA contraction.
//!
//! **The C twin**: [`emit_c`] emits the very same kernel *bodies* (the text
//! between the loop header and its end is identical), wrapped in plain loops
//! instead of grid-stride loops and with `RL_LANES = 1` instead of 32, plus one
//! `rl_entry_N(const rl_ctx*)` per launch. Tests compile it with the system C
//! compiler, once with `rl_real = double` (must equal the interpreter to
//! rounding) and once with `float` (the GPU's arithmetic), and compare with
//! the interpreter. So the generated code is tested with no GPU.
//!
//! **Fusion**: [`Fusion::Unfused`] emits one kernel per computing operator
//! (every op but the loads, which each consumer re-reads from its array), each
//! writing a full-length temporary, plus one copy kernel per store: the
//! baseline that `rewardlab gpu-check` measures the fused kernels against.

mod body;
mod c;
mod cuda;

pub(crate) use body::{Spelling, apply_expr};
pub use c::emit_c;
pub use cuda::emit_cuda;

use crate::hir::{FeatureId, ReduceOp};
use crate::ir::{ColumnId, GroupValueId, IrProgram, Source, Stage};

/// Blocks of the first batch-reduction kernel: fixed, so that a batch sum's
/// order does not depend on the device.
pub const BATCH_BLOCKS: u32 = 1024;
/// Threads per block of the batch-reduction kernel.
pub const BATCH_THREADS: u32 = 256;
/// Threads per block of the elementwise and group kernels.
pub const BLOCK_THREADS: u32 = 256;

/// Whether elementwise stages are fused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// One kernel per stage (what evaluation uses).
    Fused,
    /// One kernel per operator and one per store (the baseline).
    Unfused,
}

/// A kernel parameter, in the order of the kernel's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arg {
    /// `unsigned long long n`: the number of rows.
    Rows,
    /// `unsigned long long ng`: the number of groups.
    Groups,
    /// `const rl_real* fN`: a feature column.
    Feature(FeatureId),
    /// `const rl_real* cN`: a column read.
    ColumnIn(ColumnId),
    /// `rl_real* cN`: a column written.
    ColumnOut(ColumnId),
    /// `const rl_real* gN`: a per-group value read (indexed by group id).
    GroupIn(GroupValueId),
    /// `rl_real* gN`: a per-group value written.
    GroupOut(GroupValueId),
    /// `const unsigned int* gid`: the group of each row.
    GroupIds,
    /// `const unsigned long long* off`: group offsets (`ng + 1`).
    Offsets,
    /// `const rl_real* P`: the params.
    Params,
    /// `const rl_real* B`: the batch values.
    Batch,
    /// `const rl_real* tN`: an unfused temporary read.
    TempIn(usize),
    /// `rl_real* tN`: an unfused temporary written.
    TempOut(usize),
}

/// How a kernel is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Grid {
    /// One thread per row (grid-stride).
    Rows,
    /// One warp per group.
    GroupWarps,
}

/// A generated kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// The `extern "C"` function name in the generated source.
    pub name: String,
    /// The kernel's parameters, in declaration order.
    pub args: Vec<Arg>,
    /// How the kernel is launched (thread per row or warp per group).
    pub grid: Grid,
}

/// One step of a program on the device, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Launch {
    /// Launch one generated kernel.
    Kernel(Kernel),
    /// Run by the prelude's `rl_batch_partial` and `rl_batch_final`.
    BatchReduce {
        /// The reduction to compute.
        op: ReduceOp,
        /// Where the reduction reads its argument.
        arg: Source,
        /// Where it reads its `where` mask, if it has one.
        mask: Option<Source>,
        /// Index of the batch value slot it writes.
        out: usize,
    },
    /// Ranked on the host (see the module docs).
    BatchRank {
        /// The values to rank.
        arg: Source,
        /// Where it reads its `where` mask, if it has one.
        mask: Option<Source>,
        /// The column receiving the ranks (1 = lowest).
        out: ColumnId,
    },
}

/// A program's device code: the source and the launches that run it.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaProgram {
    /// Whether the stages were fused into few kernels or emitted one per stage.
    pub fusion: Fusion,
    /// The complete translation unit (prelude and kernels), for NVRTC.
    pub source: String,
    /// The kernels alone, without the prelude (what the snapshots show).
    pub kernels: String,
    /// The device steps, in execution order.
    pub launches: Vec<Launch>,
    /// Full-length temporaries the unfused launches need (0 when fused).
    pub temps: usize,
}

/// The op code the batch kernels take (`RL_OP_*` in the prelude).
pub fn batch_op_code(op: ReduceOp) -> i32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Mean => 1,
        ReduceOp::Std => 2,
        ReduceOp::Max => 3,
        ReduceOp::Min => 4,
        ReduceOp::Count => 5,
        ReduceOp::Rank => 6,
    }
}

/// The launches of a program and the kernel bodies they run; shared by the
/// CUDA and C emitters so the two run the same code.
pub(crate) struct Plan {
    pub launches: Vec<Launch>,
    /// For each [`Launch::Kernel`], in order: the body text (one row `i`, or
    /// one group `w` with lane `RL_LANE`).
    pub bodies: Vec<String>,
    pub temps: usize,
}

pub(crate) fn plan(ir: &IrProgram, fusion: Fusion) -> Plan {
    let mut plan = Plan { launches: Vec::new(), bodies: Vec::new(), temps: 0 };
    for (s, stage) in ir.stages.iter().enumerate() {
        match stage {
            Stage::Elementwise(e) => match fusion {
                Fusion::Fused => {
                    let (kernel, text) = body::fused(s, e);
                    plan.push(kernel, text);
                }
                Fusion::Unfused => {
                    for (kernel, text) in body::unfused(s, e, &mut plan.temps) {
                        plan.push(kernel, text);
                    }
                }
            },
            Stage::GroupReduce { op, arg, mask, out } => {
                let (kernel, text) = body::group_reduce(s, *op, *arg, *mask, *out);
                plan.push(kernel, text);
            }
            Stage::GroupRank { arg, mask, out } => {
                let (kernel, text) = body::group_rank(s, *arg, *mask, *out);
                plan.push(kernel, text);
            }
            Stage::BatchReduce { op, arg, mask, out } => {
                plan.launches.push(Launch::BatchReduce { op: *op, arg: *arg, mask: *mask, out: *out })
            }
            Stage::BatchRank { arg, mask, out } => {
                plan.launches.push(Launch::BatchRank { arg: *arg, mask: *mask, out: *out })
            }
        }
    }
    plan
}

impl Plan {
    fn push(&mut self, kernel: Kernel, body: String) {
        self.launches.push(Launch::Kernel(kernel));
        self.bodies.push(body);
    }
}

/// The parameter list of a kernel, in C syntax.
pub(crate) fn signature(args: &[Arg]) -> String {
    let one = |a: &Arg| match *a {
        Arg::Rows => "unsigned long long n".to_string(),
        Arg::Groups => "unsigned long long ng".to_string(),
        Arg::Feature(f) => format!("const rl_real* RL_RESTRICT f{f}"),
        Arg::ColumnIn(c) => format!("const rl_real* RL_RESTRICT c{c}"),
        Arg::ColumnOut(c) => format!("rl_real* RL_RESTRICT c{c}"),
        Arg::GroupIn(g) => format!("const rl_real* RL_RESTRICT g{g}"),
        Arg::GroupOut(g) => format!("rl_real* RL_RESTRICT g{g}"),
        Arg::GroupIds => "const unsigned int* RL_RESTRICT gid".to_string(),
        Arg::Offsets => "const unsigned long long* RL_RESTRICT off".to_string(),
        Arg::Params => "const rl_real* RL_RESTRICT P".to_string(),
        Arg::Batch => "const rl_real* RL_RESTRICT B".to_string(),
        Arg::TempIn(t) => format!("const rl_real* RL_RESTRICT t{t}"),
        Arg::TempOut(t) => format!("rl_real* RL_RESTRICT t{t}"),
    };
    args.iter().map(one).collect::<Vec<_>>().join(", ")
}

/// A 64-bit FNV-1a hash of a source text: the key of the compiled-module cache.
pub fn source_hash(source: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests;
