//! What the executor decides once per compiled program: where each register
//! of an elementwise stage lives (register allocation), and how the stages
//! group into passes over the table.

use crate::ir::{ColumnId, Elementwise, GroupValueId, IrProgram, Op, Stage};

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

/// Register allocation of one elementwise stage.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StagePlan {
    /// Indexed by register.
    pub locs: Vec<Loc>,
    pub buffers: usize,
    /// Registers whose value is the same on every row (constants, params,
    /// batch values): each has a buffer of its own, filled once per register
    /// file rather than once per chunk.
    pub uniform: Vec<usize>,
}

impl StagePlan {
    /// Linear-scan allocation: a computed register takes a free buffer and
    /// frees its arguments' buffers after their last use. A destination never
    /// shares a buffer with its own arguments (it is allocated first), so the
    /// kernels read and write distinct slices.
    pub(crate) fn new(stage: &Elementwise) -> StagePlan {
        let n = stage.ops.len();
        let mut last_use = vec![0; n];
        for (i, op) in stage.ops.iter().enumerate() {
            for a in op.args() {
                last_use[a] = i;
            }
        }
        for &(r, _) in &stage.stores {
            last_use[r] = n;
        }
        let mut locs = Vec::with_capacity(n);
        let mut uniform = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut buffers = 0;
        let mut reusable = vec![false; n];
        for (i, op) in stage.ops.iter().enumerate() {
            let loc = match *op {
                Op::Feature(f) => Loc::Feature(f),
                Op::Column(c) => Loc::Column(c),
                op if op.is_uniform() => {
                    uniform.push(i);
                    buffers += 1;
                    Loc::Buf(buffers - 1)
                }
                _ => {
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
        StagePlan { locs, buffers, uniform }
    }
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
    use crate::ast::BinOp;
    use crate::ir::Apply;

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
    }
}
