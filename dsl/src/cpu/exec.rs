//! Running a compiled program over a table: passes over blocks of whole
//! groups, elementwise stages over chunks of rows held in a small register
//! file, batch stages between passes.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::kernels;
use super::plan::{Loc, StagePlan, Step};
use super::{CompiledProgram, Workspace};
use crate::ast::BinOp;
use crate::hir::ReduceOp;
use crate::interp::ops;
use crate::ir::{self, Apply, ColumnId, Elementwise, GroupValueId, Op, Source, Stage};
use crate::table::FeatureTable;

/// Rows per chunk of an elementwise stage: a register is a buffer this long,
/// so a stage's whole register file (a few dozen buffers of 2 KiB) stays in L1.
pub(crate) const CHUNK: usize = 256;
/// Rows per block of whole groups, the unit of parallel work: its columns
/// (8 KiB each) stay in L1/L2 from the stage that writes them to the group
/// reduction and the stage that read them back.
pub(crate) const BLOCK: usize = 1024;

/// Whole groups, at most [`BLOCK`] rows unless one group is larger.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Block {
    pub rows: Range<usize>,
    pub groups: Range<usize>,
}

/// The table cut into [`Block`]s, in order: each as many whole groups as fit in [`BLOCK`] rows,
/// or one group larger than that. Every evaluation cuts its table anew, so a table whose groups
/// have one size is cut by arithmetic, without reading its offsets (which a kernel's pass over
/// the columns has pushed out of the caches); others are walked group by group.
pub(crate) fn blocks(table: &FeatureTable) -> Vec<Block> {
    let groups = table.groups();
    let Some(size) = table.group_size() else { return blocks_by_walk(table) };
    let per_block = (BLOCK / size).max(1);
    (0..groups)
        .step_by(per_block)
        .map(|start| {
            let end = groups.min(start + per_block);
            Block { rows: start * size..end * size, groups: start..end }
        })
        .collect()
}

/// [`blocks`] for any table, extending each block group by group.
pub(crate) fn blocks_by_walk(table: &FeatureTable) -> Vec<Block> {
    let offsets = table.group_offsets();
    let mut out = Vec::new();
    let mut g = 0;
    while g < table.groups() {
        let start = g;
        g += 1;
        while g < table.groups() && offsets[g + 1] - offsets[start] <= BLOCK {
            g += 1;
        }
        out.push(Block { rows: offsets[start]..offsets[g], groups: start..g });
    }
    out
}

/// What a run produced.
pub(crate) struct Run {
    /// Every materialised column, the outputs among them.
    pub columns: Vec<Vec<f64>>,
    /// Some output value is NaN or infinite. Checked block by block while the
    /// block's outputs are still in cache, not in a pass of its own.
    pub non_finite: bool,
}

/// `buffer` resized to `n` values, its allocation kept when it is large
/// enough. Every value is overwritten by the stage that writes the column, so
/// only a grown tail is zeroed; a buffer too small is replaced by a fresh
/// zeroed allocation (whose pages the system zeroes lazily) rather than grown.
pub(crate) fn sized(mut buffer: Vec<f64>, n: usize) -> Vec<f64> {
    if buffer.capacity() < n {
        return vec![0.0; n];
    }
    buffer.truncate(n);
    buffer.resize(n, 0.0);
    buffer
}

/// Evaluates every stage into `space`: the columns it writes reuse the
/// buffers found there (see [`sized`]) and stay there when it returns, `true`
/// when some output value is NaN or infinite.
pub(crate) fn run(
    program: &CompiledProgram,
    table: &FeatureTable,
    features: &[Option<&[f64]>],
    space: &mut Workspace,
) -> bool {
    let ir = &program.ir;
    let o = ir.outputs;
    let is_output = |c: ColumnId| c == o.reward || c == o.adv || c == o.advantage;
    let non_finite = AtomicBool::new(false);
    space.columns.resize_with(ir.columns.len(), Vec::new);
    space.group_values.resize_with(ir.group_values, Vec::new);
    let Workspace { columns, group_values } = space;
    let mut batch_values: Vec<f64> = vec![0.0; ir.batch_values];
    let params: Vec<f64> = ir.params.iter().map(|(_, v)| *v).collect();
    let blocks = blocks(table);
    for step in &program.steps {
        match step {
            Step::Batch(s) => {
                let mut ranks = match &ir.stages[*s] {
                    Stage::BatchRank { out, .. } => sized(std::mem::take(&mut columns[*out]), table.rows()),
                    _ => Vec::new(),
                };
                let source = |arg: &Source| -> &[f64] {
                    match *arg {
                        Source::Feature(f) => features[f].expect("reached features are resolved"),
                        Source::Column(c) => &columns[c],
                        Source::None => &[],
                    }
                };
                match &ir.stages[*s] {
                    Stage::BatchReduce { op, arg, mask, out } => {
                        batch_values[*out] = match (op, mask) {
                            (ReduceOp::Count, None) => table.rows() as f64,
                            (ReduceOp::Count, Some(m)) => ops::count_masked(source(m)),
                            (op, None) => ops::reduce(*op, source(arg)),
                            (op, Some(m)) => ops::reduce_masked(*op, source(arg), source(m)),
                        };
                    }
                    Stage::BatchRank { arg, mask, out } => {
                        match mask {
                            Some(m) => ops::rank_masked_into(source(arg), source(m), &mut ranks),
                            None => ops::rank_into(source(arg), &mut ranks),
                        }
                        if is_output(*out) && !all_finite(&ranks) {
                            non_finite.store(true, Ordering::Relaxed);
                        }
                        columns[*out] = ranks;
                    }
                    _ => unreachable!("only batch stages are batch steps"),
                }
            }
            Step::Blocks { stages, columns: written, group_values: written_groups } => {
                let mut col_slot = vec![None; ir.columns.len()];
                let mut fresh_cols: Vec<Vec<f64>> = Vec::with_capacity(written.len());
                for (slot, &c) in written.iter().enumerate() {
                    col_slot[c] = Some(slot);
                    fresh_cols.push(sized(std::mem::take(&mut columns[c]), table.rows()));
                }
                let mut group_slot = vec![None; ir.group_values];
                let mut fresh_groups: Vec<Vec<f64>> = Vec::with_capacity(written_groups.len());
                for (slot, &g) in written_groups.iter().enumerate() {
                    group_slot[g] = Some(slot);
                    fresh_groups.push(sized(std::mem::take(&mut group_values[g]), table.groups()));
                }
                let outs = split_by_block(&mut fresh_cols, &mut fresh_groups, &blocks);
                let env = Env {
                    program,
                    features,
                    columns,
                    col_slot: &col_slot,
                    group_values,
                    group_slot: &group_slot,
                    batch_values: &batch_values,
                    params: &params,
                    offsets: table.group_offsets(),
                };
                let output_slots: Vec<usize> = (0..written.len()).filter(|&i| is_output(written[i])).collect();
                outs.into_par_iter().zip(blocks.par_iter()).for_each_init(
                    || env.register_files(stages),
                    |regs, (mut out, block)| {
                        env.run_block(stages, regs, &mut out, block);
                        if output_slots.iter().any(|&slot| !all_finite(out.cols[slot])) {
                            non_finite.store(true, Ordering::Relaxed);
                        }
                    },
                );
                for (&c, col) in written.iter().zip(fresh_cols) {
                    columns[c] = col;
                }
                for (&g, vals) in written_groups.iter().zip(fresh_groups) {
                    group_values[g] = vals;
                }
            }
        }
    }
    non_finite.into_inner()
}

/// Evaluates several programs whose stages are all one pass of block steps
/// (no batch stage) in one parallel walk over the blocks: each block runs
/// every program's stages in turn, so the feature columns the programs share
/// are read from memory once, while a block's rows are in cache. `None` when
/// some program needs more than one pass (the caller runs each on its own).
pub(crate) fn run_fused(
    programs: &[&CompiledProgram],
    table: &FeatureTable,
    features: &[Vec<Option<&[f64]>>],
) -> Option<Vec<Run>> {
    let mut passes = Vec::with_capacity(programs.len());
    for p in programs {
        match p.steps.as_slice() {
            [Step::Blocks { stages, columns, group_values }] => passes.push((stages, columns, group_values)),
            [] => passes.push((&EMPTY, &EMPTY, &EMPTY)),
            _ => return None,
        }
    }
    let blocks = blocks(table);
    let empty_columns: Vec<Vec<Vec<f64>>> = programs.iter().map(|p| vec![Vec::new(); p.ir.columns.len()]).collect();
    let empty_groups: Vec<Vec<Vec<f64>>> = programs.iter().map(|p| vec![Vec::new(); p.ir.group_values]).collect();
    let batch_values: Vec<Vec<f64>> = programs.iter().map(|p| vec![0.0; p.ir.batch_values]).collect();
    let params: Vec<Vec<f64>> = programs.iter().map(|p| p.ir.params.iter().map(|(_, v)| *v).collect()).collect();
    let mut col_slots = Vec::with_capacity(programs.len());
    let mut group_slots = Vec::with_capacity(programs.len());
    let mut fresh: Vec<FreshPass> = Vec::with_capacity(programs.len());
    let mut output_slots: Vec<Vec<usize>> = Vec::with_capacity(programs.len());
    for (p, (_, written, written_groups)) in programs.iter().zip(&passes) {
        let o = p.ir.outputs;
        let mut col_slot = vec![None; p.ir.columns.len()];
        for (slot, &c) in written.iter().enumerate() {
            col_slot[c] = Some(slot);
        }
        let mut group_slot = vec![None; p.ir.group_values];
        for (slot, &g) in written_groups.iter().enumerate() {
            group_slot[g] = Some(slot);
        }
        output_slots
            .push((0..written.len()).filter(|&i| [o.reward, o.adv, o.advantage].contains(&written[i])).collect());
        fresh.push((
            written.iter().map(|_| vec![0.0; table.rows()]).collect(),
            written_groups.iter().map(|_| vec![0.0; table.groups()]).collect(),
        ));
        col_slots.push(col_slot);
        group_slots.push(group_slot);
    }
    // outs[block][program]: each program's share of the block.
    let mut outs: Vec<Vec<BlockOut<'_>>> = blocks.iter().map(|_| Vec::with_capacity(programs.len())).collect();
    for (cols, groups) in fresh.iter_mut() {
        for (b, out) in split_by_block(cols, groups, &blocks).into_iter().enumerate() {
            outs[b].push(out);
        }
    }
    let envs: Vec<Env<'_>> = (0..programs.len())
        .map(|k| Env {
            program: programs[k],
            features: &features[k],
            columns: &empty_columns[k],
            col_slot: &col_slots[k],
            group_values: &empty_groups[k],
            group_slot: &group_slots[k],
            batch_values: &batch_values[k],
            params: &params[k],
            offsets: table.group_offsets(),
        })
        .collect();
    let non_finite: Vec<AtomicBool> = programs.iter().map(|_| AtomicBool::new(false)).collect();
    outs.into_par_iter().zip(blocks.par_iter()).for_each_init(
        || envs.iter().zip(&passes).map(|(env, (stages, _, _))| env.register_files(stages)).collect::<Vec<_>>(),
        |regs, (mut outs, block)| {
            for (k, out) in outs.iter_mut().enumerate() {
                envs[k].run_block(passes[k].0, &mut regs[k], out, block);
                if output_slots[k].iter().any(|&slot| !all_finite(out.cols[slot])) {
                    non_finite[k].store(true, Ordering::Relaxed);
                }
            }
        },
    );
    drop(envs);
    let runs = programs
        .iter()
        .zip(passes)
        .zip(fresh)
        .zip(non_finite)
        .map(|(((p, (_, written, _)), (cols, _)), non_finite)| {
            let mut columns: Vec<Vec<f64>> = vec![Vec::new(); p.ir.columns.len()];
            for (&c, col) in written.iter().zip(cols) {
                columns[c] = col;
            }
            Run { columns, non_finite: non_finite.into_inner() }
        })
        .collect();
    Some(runs)
}

/// One program's fresh columns and group values for its pass.
type FreshPass = (Vec<Vec<f64>>, Vec<Vec<f64>>);

/// The stages, columns and group values of a program with no stages.
static EMPTY: Vec<usize> = Vec::new();

fn all_finite(values: &[f64]) -> bool {
    // `fold` rather than `all`: no early exit, so the loop vectorises.
    values.iter().fold(true, |ok, x| ok & x.is_finite())
}

/// A block's share of the columns and group values the current pass writes.
struct BlockOut<'a> {
    /// Block-local rows, by slot.
    cols: Vec<&'a mut [f64]>,
    /// Block-local groups, by slot.
    groups: Vec<&'a mut [f64]>,
}

/// Each block's share of freshly written columns (`rows` long) and group values (`groups`
/// long), in block order: disjoint mutable slices, so blocks can run in parallel.
fn split_by_block<'a>(cols: &'a mut [Vec<f64>], groups: &'a mut [Vec<f64>], blocks: &[Block]) -> Vec<BlockOut<'a>> {
    let mut outs: Vec<BlockOut<'a>> = blocks
        .iter()
        .map(|_| BlockOut { cols: Vec::with_capacity(cols.len()), groups: Vec::with_capacity(groups.len()) })
        .collect();
    for col in cols.iter_mut() {
        for (out, head) in outs.iter_mut().zip(split_lengths(col, blocks.iter().map(|b| b.rows.len()))) {
            out.cols.push(head);
        }
    }
    for vals in groups.iter_mut() {
        for (out, head) in outs.iter_mut().zip(split_lengths(vals, blocks.iter().map(|b| b.groups.len()))) {
            out.groups.push(head);
        }
    }
    outs
}

/// `values` cut into consecutive slices of the given lengths.
fn split_lengths(mut values: &mut [f64], lengths: impl Iterator<Item = usize>) -> Vec<&mut [f64]> {
    lengths
        .map(|n| {
            let (head, tail) = std::mem::take(&mut values).split_at_mut(n);
            values = tail;
            head
        })
        .collect()
}

/// Everything a block reads.
struct Env<'a> {
    program: &'a CompiledProgram,
    features: &'a [Option<&'a [f64]>],
    /// Columns finished by earlier passes.
    columns: &'a [Vec<f64>],
    /// Column → slot in [`BlockOut::cols`] for the columns this pass writes.
    col_slot: &'a [Option<usize>],
    group_values: &'a [Vec<f64>],
    group_slot: &'a [Option<usize>],
    batch_values: &'a [f64],
    params: &'a [f64],
    offsets: &'a [usize],
}

/// One elementwise stage's registers for a chunk of rows.
struct RegFile {
    /// Chunk-sized buffers, by [`Loc::Buf`] index.
    bufs: Vec<Vec<f64>>,
    /// Scalar values of the uniform and per-group registers, by register.
    scalars: Vec<f64>,
}

impl Env<'_> {
    /// One register file per elementwise stage of the pass, uniform registers
    /// computed and filled once here.
    fn register_files(&self, stages: &[usize]) -> Vec<RegFile> {
        stages
            .iter()
            .map(|&s| {
                let (Stage::Elementwise(stage), Some(plan)) = (&self.program.ir.stages[s], &self.program.plans[s])
                else {
                    return RegFile { bufs: Vec::new(), scalars: Vec::new() };
                };
                let mut regs =
                    RegFile { bufs: vec![vec![0.0; CHUNK]; plan.buffers], scalars: vec![0.0; stage.ops.len()] };
                for &r in &plan.uniform {
                    let value = match stage.ops[r] {
                        Op::Const(x) => x,
                        Op::Param(p) => self.params[p],
                        Op::Batch(b) => self.batch_values[b],
                        Op::Apply(apply) => ir::fold(apply.map(|a| regs.scalars[a])),
                        op => unreachable!("{op:?} is not uniform"),
                    };
                    regs.scalars[r] = value;
                    if let Loc::Buf(b) = plan.locs[r] {
                        regs.bufs[b].fill(value);
                    }
                }
                regs
            })
            .collect()
    }

    fn run_block(&self, stages: &[usize], regs: &mut [RegFile], out: &mut BlockOut<'_>, block: &Block) {
        for (i, &s) in stages.iter().enumerate() {
            match &self.program.ir.stages[s] {
                Stage::Elementwise(stage) => {
                    let plan = self.program.plans[s].as_ref().expect("elementwise stages have plans");
                    let mut start = block.rows.start;
                    while start < block.rows.end {
                        let rows = start..(start + CHUNK).min(block.rows.end);
                        self.elementwise(stage, plan, &mut regs[i], out, block, rows.clone());
                        start = rows.end;
                    }
                }
                Stage::GroupReduce { op, arg, mask, out: gv } => {
                    let slot = self.group_slot[*gv].expect("written by this pass");
                    let groups = block.groups.clone();
                    let base = block.groups.start;
                    // The op is matched once per stage, not per group, so each
                    // arm is a loop over the block's groups with the sums inlined.
                    match (op, mask) {
                        (ReduceOp::Count, None) => {
                            for g in groups {
                                out.groups[slot][g - base] = (self.offsets[g + 1] - self.offsets[g]) as f64;
                            }
                        }
                        (ReduceOp::Std, None) => {
                            // `std` after a `mean` of the same column in this pass (GRPO's
                            // pair) reuses it: `ops::reduce(Std)` computes that same
                            // mean, `sum(xs) / n`, first, so the values are unchanged.
                            let mean_slot = stages[..i].iter().find_map(|&t| match &self.program.ir.stages[t] {
                                Stage::GroupReduce { op: ReduceOp::Mean, arg: a, mask: None, out: m } if a == arg => {
                                    self.group_slot[*m]
                                }
                                _ => None,
                            });
                            for g in groups {
                                let rows = self.offsets[g]..self.offsets[g + 1];
                                let n = rows.len() as f64;
                                let xs = self.source(arg, out, block, rows);
                                let mean = match mean_slot {
                                    Some(m) => out.groups[m][g - base],
                                    None => ops::sum(xs) / n,
                                };
                                out.groups[slot][g - base] = (ops::sum_sq_dev(xs, mean) / n).sqrt();
                            }
                        }
                        (ReduceOp::Mean, None) => {
                            for g in groups {
                                let rows = self.offsets[g]..self.offsets[g + 1];
                                let n = rows.len() as f64;
                                out.groups[slot][g - base] = ops::sum(self.source(arg, out, block, rows)) / n;
                            }
                        }
                        (op, None) => {
                            for g in groups {
                                let rows = self.offsets[g]..self.offsets[g + 1];
                                out.groups[slot][g - base] = ops::reduce(*op, self.source(arg, out, block, rows));
                            }
                        }
                        (ReduceOp::Count, Some(m)) => {
                            for g in groups {
                                let rows = self.offsets[g]..self.offsets[g + 1];
                                out.groups[slot][g - base] = ops::count_masked(self.source(m, out, block, rows));
                            }
                        }
                        (op, Some(m)) => {
                            for g in groups {
                                let rows = self.offsets[g]..self.offsets[g + 1];
                                out.groups[slot][g - base] = ops::reduce_masked(
                                    *op,
                                    self.source(arg, out, block, rows.clone()),
                                    self.source(m, out, block, rows),
                                );
                            }
                        }
                    }
                }
                Stage::GroupRank { arg, mask, out: col } => {
                    let slot = self.col_slot[*col].expect("written by this pass");
                    let dst = std::mem::take(&mut out.cols[slot]);
                    for g in block.groups.clone() {
                        let rows = self.offsets[g]..self.offsets[g + 1];
                        let local = rows.start - block.rows.start..rows.end - block.rows.start;
                        let xs = self.source(arg, out, block, rows.clone());
                        match mask {
                            Some(m) => ops::rank_masked_into(xs, self.source(m, out, block, rows), &mut dst[local]),
                            None => ops::rank_into(xs, &mut dst[local]),
                        }
                    }
                    out.cols[slot] = dst;
                }
                Stage::BatchReduce { .. } | Stage::BatchRank { .. } => {
                    unreachable!("batch stages are their own step")
                }
            }
        }
    }

    /// A reduction's argument over some rows of the block.
    fn source<'s>(&'s self, arg: &Source, out: &'s BlockOut<'_>, block: &Block, rows: Range<usize>) -> &'s [f64] {
        match *arg {
            Source::Feature(f) => &self.features[f].expect("reached features are resolved")[rows],
            Source::Column(c) => self.column(c, out, block, rows),
            Source::None => &[],
        }
    }

    fn column<'s>(&'s self, c: ColumnId, out: &'s BlockOut<'_>, block: &Block, rows: Range<usize>) -> &'s [f64] {
        match self.col_slot[c] {
            Some(slot) => &out.cols[slot][rows.start - block.rows.start..rows.end - block.rows.start],
            None => &self.columns[c][rows],
        }
    }

    fn group_value(&self, gv: GroupValueId, out: &BlockOut<'_>, block: &Block, g: usize) -> f64 {
        match self.group_slot[gv] {
            Some(slot) => out.groups[slot][g - block.groups.start],
            None => self.group_values[gv][g],
        }
    }

    /// One elementwise stage over one chunk of rows.
    fn elementwise(
        &self,
        stage: &Elementwise,
        plan: &StagePlan,
        regs: &mut RegFile,
        out: &mut BlockOut<'_>,
        block: &Block,
        rows: Range<usize>,
    ) {
        let n = rows.len();
        if !plan.per_group.is_empty() {
            // Group-constant values: the scalar ops once per group, then each
            // value a row op reads broadcast over the group's rows of the chunk.
            let mut g = block.groups.start;
            let mut i = rows.start;
            while i < rows.end {
                while self.offsets[g + 1] <= i {
                    g += 1;
                }
                let end = self.offsets[g + 1].min(rows.end);
                for &r in &plan.per_group {
                    let value = match stage.ops[r] {
                        Op::Group(gv) => self.group_value(gv, out, block, g),
                        Op::Apply(apply) => ir::fold(apply.map(|a| regs.scalars[a])),
                        op => unreachable!("{op:?} is not a per-group op"),
                    };
                    regs.scalars[r] = value;
                    if plan.fill[r]
                        && let Loc::Buf(b) = plan.locs[r]
                    {
                        regs.bufs[b][i - rows.start..end - rows.start].fill(value);
                    }
                }
                i = end;
            }
        }
        for &r in &plan.rows {
            let Loc::Buf(b) = plan.locs[r] else { continue };
            let mut dst = std::mem::take(&mut regs.bufs[b]);
            let d = &mut dst[..n];
            let arg = |a: usize| -> &[f64] {
                match plan.locs[a] {
                    Loc::Feature(f) => &self.features[f].expect("reached features are resolved")[rows.clone()],
                    Loc::Column(c) => self.column(c, out, block, rows.clone()),
                    Loc::Buf(b) => &regs.bufs[b][..n],
                }
            };
            match (stage.ops[r], plan.scale[r]) {
                (Op::Apply(Apply::Binary(BinOp::Div, a, _)), Some(k)) => kernels::scale(d, arg(a), k),
                (op, _) => match op {
                    Op::Apply(Apply::Unary(u, a)) => kernels::unary(u, d, arg(a)),
                    Op::Apply(Apply::Binary(o, a, b)) => kernels::binary(o, d, arg(a), arg(b)),
                    Op::Apply(Apply::Min(a, b)) => kernels::min(d, arg(a), arg(b)),
                    Op::Apply(Apply::Max(a, b)) => kernels::max(d, arg(a), arg(b)),
                    Op::Apply(Apply::Func(f, a)) => kernels::func(f, d, arg(a)),
                    Op::Apply(Apply::Select(c, x, y)) => kernels::select(d, arg(c), arg(x), arg(y)),
                    Op::Apply(Apply::In(x, lo, hi)) => kernels::in_range(d, arg(x), arg(lo), arg(hi)),
                    Op::Const(_) | Op::Param(_) | Op::Batch(_) | Op::Group(_) | Op::Feature(_) | Op::Column(_) => {
                        unreachable!("loads are in place, uniform or per group")
                    }
                },
            }
            regs.bufs[b] = dst;
        }
        let local = rows.start - block.rows.start..rows.end - block.rows.start;
        for &(r, c) in &stage.stores {
            let slot = self.col_slot[c].expect("written by this pass");
            let values: Vec<f64>;
            let src: &[f64] = match plan.locs[r] {
                Loc::Feature(f) => &self.features[f].expect("reached features are resolved")[rows.clone()],
                Loc::Buf(b) => &regs.bufs[b][..n],
                Loc::Column(c) => {
                    // Never produced by lowering (a stage stores only values of
                    // its own level); copied out to keep the borrows apart.
                    values = self.column(c, out, block, rows.clone()).to_vec();
                    &values
                }
            };
            out.cols[slot][local.clone()].copy_from_slice(src);
        }
    }
}
