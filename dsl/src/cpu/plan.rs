//! What the executor decides once per compiled program: where each register
//! of an elementwise stage lives (register allocation), and how the stages
//! group into passes over the table.

use crate::ast::BinOp;
use crate::ir::{Apply, ColumnId, Elementwise, GroupValueId, IrProgram, Op, Stage};

/// Where an SSA register's values are found for a chunk of rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Read in place from a feature column: loads cost nothing.
    Feature(usize),
    /// Read in place from a materialised column.
    Column(ColumnId),
    /// A chunk-sized buffer of the register file.
    Buf(usize),
}

/// Register allocation of one elementwise stage, and where each register is
/// computed: once, once per group, or per row.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StagePlan {
    /// Indexed by register.
    pub locs: Vec<Loc>,
    pub buffers: usize,
    /// Registers whose value is the same on every row: constants, params,
    /// batch values and ops on only those (`1 - w`). Computed once per
    /// register file, in op order, each into a buffer of its own filled once
    /// rather than once per chunk.
    pub uniform: Vec<usize>,
    /// Registers whose value is the same on every row of a group: group
    /// values and ops on only those and uniforms (`group.std(r) + 1e-4`).
    /// Computed once per group with the scalar functions, in op order; those
    /// a row op or a store reads (`fill`) each have a buffer of their own,
    /// filled group by group.
    pub per_group: Vec<usize>,
    /// Indexed by register: a per-group register some row op or store reads.
    pub fill: Vec<bool>,
    /// The ops computed row by row, in op order.
    pub rows: Vec<usize>,
    /// Indexed by register: `Some(k)` for `x / c` with `c` a constant power
    /// of two whose reciprocal `k` is a normal number. `x * k` is then the
    /// very same value as `x / c` for every `x` (both are the correctly rounded
    /// `x * 2^-n`), and a multiplication vectorises where a division crawls.
    pub scale: Vec<Option<f64>>,
}

/// How often a register's value changes; ordered, so an op's rate is the
/// highest of its arguments'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rate {
    Once,
    PerGroup,
    PerRow,
}

/// The rate of each register of an elementwise stage, in op order:
/// constants, params and batch values are computed once, group values once
/// per group, features and columns per row, and an op as often as its
/// most often changing argument. The block executor's plan and the native
/// kernels both place their registers by it.
pub(crate) fn rates(stage: &Elementwise) -> Vec<Rate> {
    let mut rate = Vec::with_capacity(stage.ops.len());
    for op in &stage.ops {
        rate.push(match op {
            Op::Const(_) | Op::Param(_) | Op::Batch(_) => Rate::Once,
            Op::Group(_) => Rate::PerGroup,
            Op::Feature(_) | Op::Column(_) => Rate::PerRow,
            Op::Apply(_) => op.args().map(|a| rate[a]).max().unwrap_or(Rate::Once),
        });
    }
    rate
}

impl StagePlan {
    /// Linear-scan allocation: a computed register takes a free buffer and
    /// frees its arguments' buffers after their last use. A destination never
    /// shares a buffer with its own arguments (it is allocated first), so the
    /// kernels read and write distinct slices. Uniform and per-group
    /// registers keep their buffers for the whole stage.
    pub(crate) fn new(stage: &Elementwise) -> StagePlan {
        let n = stage.ops.len();
        let rate = rates(stage);
        let mut last_use = vec![0; n];
        let mut fill = vec![false; n];
        for (i, op) in stage.ops.iter().enumerate() {
            for a in op.args() {
                last_use[a] = i;
                fill[a] |= rate[a] == Rate::PerGroup && rate[i] == Rate::PerRow;
            }
        }
        for &(r, _) in &stage.stores {
            last_use[r] = n;
            fill[r] |= rate[r] == Rate::PerGroup;
        }
        let mut locs = Vec::with_capacity(n);
        let (mut uniform, mut per_group, mut rows) = (Vec::new(), Vec::new(), Vec::new());
        let mut scale = vec![None; n];
        let mut free: Vec<usize> = Vec::new();
        let mut buffers = 0;
        let mut reusable = vec![false; n];
        for (i, op) in stage.ops.iter().enumerate() {
            let loc = match (*op, rate[i]) {
                (Op::Feature(f), _) => Loc::Feature(f),
                (Op::Column(c), _) => Loc::Column(c),
                (_, Rate::Once | Rate::PerGroup) => {
                    if rate[i] == Rate::Once {
                        uniform.push(i)
                    } else {
                        per_group.push(i)
                    }
                    buffers += 1;
                    Loc::Buf(buffers - 1)
                }
                (op, Rate::PerRow) => {
                    rows.push(i);
                    if let Op::Apply(Apply::Binary(BinOp::Div, _, b)) = op
                        && let Op::Const(c) = stage.ops[b]
                    {
                        scale[i] = exact_reciprocal(c);
                    }
                    reusable[i] = true;
                    let b = free.pop().unwrap_or_else(|| {
                        buffers += 1;
                        buffers - 1
                    });
                    Loc::Buf(b)
                }
            };
            locs.push(loc);
            for a in op.args() {
                if last_use[a] == i
                    && reusable[a]
                    && let Loc::Buf(b) = locs[a]
                    && !free.contains(&b)
                {
                    free.push(b);
                }
            }
        }
        StagePlan { locs, buffers, uniform, per_group, fill, rows, scale }
    }
}

/// `1 / c` when `c` is a power of two and `1 / c` is a normal number (so it
/// is exact, and multiplying by it equals dividing by `c`).
fn exact_reciprocal(c: f64) -> Option<f64> {
    const MANTISSA: u64 = (1 << 52) - 1;
    let k = 1.0 / c;
    (c.is_normal() && c.to_bits() & MANTISSA == 0 && k.is_normal()).then_some(k)
}

/// A pass over the table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// Elementwise and group stages, run one after another on each block of
    /// whole groups: a group reduction's argument is still in cache when it
    /// is reduced, and the next elementwise stage reads the group's values
    /// straight away. Blocks run in parallel.
    Blocks {
        stages: Vec<usize>,
        /// The columns and group values these stages write.
        columns: Vec<ColumnId>,
        group_values: Vec<GroupValueId>,
    },
    /// A batch stage: it needs its whole argument column, so it ends a pass.
    Batch(usize),
}

/// Cuts the stage list at batch stages.
pub(crate) fn steps(ir: &IrProgram) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let flush = |current: &mut Vec<usize>, steps: &mut Vec<Step>| {
        if current.is_empty() {
            return;
        }
        let mut columns = Vec::new();
        let mut group_values = Vec::new();
        for &s in current.iter() {
            match &ir.stages[s] {
                Stage::Elementwise(e) => columns.extend(e.stores.iter().map(|&(_, c)| c)),
                Stage::GroupRank { out, .. } => columns.push(*out),
                Stage::GroupReduce { out, .. } => group_values.push(*out),
                Stage::BatchReduce { .. } | Stage::BatchRank { .. } => {
                    unreachable!("batch stages are their own step")
                }
            }
        }
        columns.sort_unstable();
        columns.dedup();
        steps.push(Step::Blocks { stages: std::mem::take(current), columns, group_values });
    };
    for (i, stage) in ir.stages.iter().enumerate() {
        match stage {
            Stage::BatchReduce { .. } | Stage::BatchRank { .. } => {
                flush(&mut current, &mut steps);
                steps.push(Step::Batch(i));
            }
            _ => current.push(i),
        }
    }
    flush(&mut current, &mut steps);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_after_last_use_and_never_alias_arguments() {
        // r0 = f0; r1 = const; r2 = r0 * r1; r3 = r2 + r2; r4 = r3 - r0
        let stage = Elementwise {
            ops: vec![
                Op::Feature(0),
                Op::Const(2.0),
                Op::Apply(Apply::Binary(BinOp::Mul, 0, 1)),
                Op::Apply(Apply::Binary(BinOp::Add, 2, 2)),
                Op::Apply(Apply::Binary(BinOp::Sub, 3, 0)),
            ],
            stores: vec![(4, 0)],
        };
        let plan = StagePlan::new(&stage);
        assert_eq!(plan.locs[0], Loc::Feature(0));
        assert_eq!(plan.uniform, vec![1]);
        assert_eq!(plan.locs[1], Loc::Buf(0));
        assert_eq!(plan.locs[2], Loc::Buf(1));
        assert_eq!(plan.locs[3], Loc::Buf(2));
        // r2's buffer is free again after r3; r4 takes it.
        assert_eq!(plan.locs[4], Loc::Buf(1));
        assert_eq!(plan.buffers, 3);
        assert_eq!(plan.rows, vec![2, 3, 4]);
    }

    #[test]
    fn constants_params_and_group_values_are_hoisted_out_of_the_row_loop() {
        // r0 = f0; r1 = param; r2 = const 1; r3 = r2 - r1 (once); r4 = group g0;
        // r5 = r4 + r1 (per group); r6 = r0 * r3; r7 = r6 / r5; r8 = const 4; r9 = r7 / r8
        let stage = Elementwise {
            ops: vec![
                Op::Feature(0),
                Op::Param(0),
                Op::Const(1.0),
                Op::Apply(Apply::Binary(BinOp::Sub, 2, 1)),
                Op::Group(0),
                Op::Apply(Apply::Binary(BinOp::Add, 4, 1)),
                Op::Apply(Apply::Binary(BinOp::Mul, 0, 3)),
                Op::Apply(Apply::Binary(BinOp::Div, 6, 5)),
                Op::Const(4.0),
                Op::Apply(Apply::Binary(BinOp::Div, 7, 8)),
            ],
            stores: vec![(9, 0)],
        };
        let plan = StagePlan::new(&stage);
        assert_eq!(plan.uniform, vec![1, 2, 3, 8]);
        assert_eq!(plan.per_group, vec![4, 5]);
        // Only the sum is read by a row op; the group value itself is not filled.
        assert_eq!((plan.fill[4], plan.fill[5]), (false, true));
        assert_eq!(plan.rows, vec![6, 7, 9]);
        // Dividing by 4 is multiplying by 0.25; dividing by a group value is not rewritten.
        assert_eq!((plan.scale[9], plan.scale[7]), (Some(0.25), None));
    }

    #[test]
    fn only_exact_reciprocals_replace_a_division() {
        assert_eq!(exact_reciprocal(2.0), Some(0.5));
        assert_eq!(exact_reciprocal(-0.125), Some(-8.0));
        assert_eq!(exact_reciprocal(3.0), None);
        assert_eq!(exact_reciprocal(0.0), None);
        assert_eq!(exact_reciprocal(f64::INFINITY), None);
        assert_eq!(exact_reciprocal(f64::NAN), None);
        // 2^1023's reciprocal is subnormal, so it is not exact to multiply by.
        assert_eq!(exact_reciprocal(2f64.powi(1023)), None);
        assert_eq!(exact_reciprocal(2f64.powi(1022)), Some(2f64.powi(-1022)));
    }
}
