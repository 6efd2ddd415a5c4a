//! Kernel bodies: the text both emitters wrap, one row `i` (elementwise) or
//! one group `w` (group stages) at a time. Every operator is one line that
//! mirrors [`ops`](crate::interp::ops) through the prelude's `rl_*` helpers.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::{Arg, Grid, Kernel};
use crate::ast::{BinOp, UnOp};
use crate::hir::{Func, ReduceOp};
use crate::ir::{Apply, ColumnId, Elementwise, GroupValueId, Op, Reg, Source};

/// A fused elementwise stage: one kernel, registers stay registers.
pub(crate) fn fused(stage: usize, e: &Elementwise) -> (Kernel, String) {
    let mut text = String::new();
    for (r, op) in e.ops.iter().enumerate() {
        let rhs = match load(op) {
            Some(load) => load,
            None => compute(op, &|a| format!("r{a}")),
        };
        writeln!(text, "    rl_real r{r} = {rhs};").expect("writing to a String");
    }
    for &(r, c) in &e.stores {
        writeln!(text, "    c{c}[i] = r{r};").expect("writing to a String");
    }
    let mut args = input_args(e.ops.iter());
    args.extend(dedup(e.stores.iter().map(|&(_, c)| c)).into_iter().map(Arg::ColumnOut));
    (Kernel { name: format!("s{stage}"), args, grid: Grid::Rows }, text)
}

/// An unfused elementwise stage: one kernel per computing op, each writing a
/// full-length temporary, and one copy kernel per store. `temps` numbers the
/// temporaries across stages.
pub(crate) fn unfused(stage: usize, e: &Elementwise, temps: &mut usize) -> Vec<(Kernel, String)> {
    let mut temp_of: Vec<Option<usize>> = vec![None; e.ops.len()];
    let mut out = Vec::new();
    // Loads an argument register: a load op is re-read from its array, a
    // computed one from its temporary.
    let read = |a: Reg, temp_of: &[Option<usize>], text: &mut String, args: &mut Vec<Arg>| {
        let rhs = match temp_of[a] {
            Some(t) => {
                args.push(Arg::TempIn(t));
                format!("t{t}[i]")
            }
            None => {
                args.extend(input_args(std::iter::once(&e.ops[a])));
                load(&e.ops[a]).expect("registers without a temporary are loads")
            }
        };
        writeln!(text, "    rl_real r{a} = {rhs};").expect("writing to a String");
    };
    for (r, op) in e.ops.iter().enumerate() {
        if load(op).is_some() {
            continue;
        }
        let mut text = String::new();
        let mut args = vec![Arg::Rows];
        for a in dedup(op.args()) {
            read(a, &temp_of, &mut text, &mut args);
        }
        let t = *temps;
        *temps += 1;
        temp_of[r] = Some(t);
        writeln!(text, "    rl_real r{r} = {};", compute(op, &|a| format!("r{a}"))).expect("writing to a String");
        writeln!(text, "    t{t}[i] = r{r};").expect("writing to a String");
        args.push(Arg::TempOut(t));
        out.push((Kernel { name: format!("s{stage}_r{r}"), args: normalise(args), grid: Grid::Rows }, text));
    }
    for (k, &(r, c)) in e.stores.iter().enumerate() {
        let mut text = String::new();
        let mut args = vec![Arg::Rows];
        read(r, &temp_of, &mut text, &mut args);
        writeln!(text, "    c{c}[i] = r{r};").expect("writing to a String");
        args.push(Arg::ColumnOut(c));
        out.push((Kernel { name: format!("s{stage}_store{k}"), args: normalise(args), grid: Grid::Rows }, text));
    }
    out
}

/// A segmented reduction: group `w`, lane `RL_LANE` of `RL_LANES`.
pub(crate) fn group_reduce(
    stage: usize,
    op: ReduceOp,
    arg: Source,
    mask: Option<Source>,
    out: GroupValueId,
) -> (Kernel, String) {
    if let Some(mask) = mask {
        return group_reduce_masked(stage, op, arg, mask, out);
    }
    let x = source_name(arg);
    let mut t = String::from(
        "    unsigned long long start = off[w], end = off[w + 1];\n    double cnt = (double)(end - start);\n",
    );
    let fold = |t: &mut String, init: &str, step: &str| {
        writeln!(t, "    double acc = {init};").expect("writing to a String");
        writeln!(t, "    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) {step};")
            .expect("writing to a String");
    };
    let value = match op {
        ReduceOp::Sum => {
            fold(&mut t, "0.0", &format!("acc += (double){x}[j]"));
            t.push_str("    acc = rl_lanes_sum(acc);\n");
            "(rl_real)acc".to_string()
        }
        ReduceOp::Mean => {
            fold(&mut t, "0.0", &format!("acc += (double){x}[j]"));
            t.push_str("    acc = rl_lanes_sum(acc);\n");
            "(rl_real)(acc / cnt)".to_string()
        }
        ReduceOp::Std => {
            fold(&mut t, "0.0", &format!("acc += (double){x}[j]"));
            t.push_str("    double mean = rl_lanes_sum(acc) / cnt;\n    double dev = 0.0;\n");
            writeln!(
                t,
                "    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) {{ double d = (double){x}[j] - mean; dev += d * d; }}"
            )
            .expect("writing to a String");
            t.push_str("    dev = rl_lanes_sum(dev);\n");
            "(rl_real)rl_sqrt_d(dev / cnt)".to_string()
        }
        ReduceOp::Max | ReduceOp::Min => {
            let (pick, lanes) =
                if op == ReduceOp::Max { ("rl_max_d", "rl_lanes_max") } else { ("rl_min_d", "rl_lanes_min") };
            fold(&mut t, &format!("(double){x}[start]"), &format!("acc = {pick}(acc, (double){x}[j])"));
            writeln!(t, "    acc = {lanes}(acc);").expect("writing to a String");
            "(rl_real)acc".to_string()
        }
        ReduceOp::Count => "(rl_real)cnt".to_string(),
        ReduceOp::Rank => unreachable!("ranks are their own stage"),
    };
    writeln!(t, "    if (RL_LANE == 0) g{out}[w] = {value};").expect("writing to a String");
    let mut args = vec![Arg::Groups, Arg::Offsets];
    args.extend(source_arg(arg));
    args.push(Arg::GroupOut(out));
    (Kernel { name: format!("s{stage}"), args, grid: Grid::GroupWarps }, t)
}

/// A masked segmented reduction: only the rows whose mask is non-zero (NaN
/// included) are read; a masked-out row adds `+0.0` to a sum, which is
/// exact, so the sums are the selected rows' sums, as `ops::reduce_masked`
/// computes them. The count of selected rows is a sum of its own, and an
/// empty selection gives 0 for every op. `max`/`min` start from ∓inf, the
/// identity of the NaN-propagating `rl_max_d`/`rl_min_d` on the selected
/// values.
fn group_reduce_masked(stage: usize, op: ReduceOp, arg: Source, mask: Source, out: GroupValueId) -> (Kernel, String) {
    let (x, m) = (source_name(arg), source_name(mask));
    let mut t = String::from("    unsigned long long start = off[w], end = off[w + 1];\n");
    let lanes = |t: &mut String, init: &str, step: &str| {
        writeln!(t, "    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) {{ {init}{step} }}")
            .expect("writing to a String");
    };
    t.push_str("    double cnt = 0.0;\n");
    lanes(&mut t, "", &format!("cnt += {m}[j] != 0 ? 1.0 : 0.0;"));
    t.push_str("    cnt = rl_lanes_sum(cnt);\n");
    let sum = |t: &mut String| {
        t.push_str("    double acc = 0.0;\n");
        lanes(t, "", &format!("acc += {m}[j] != 0 ? (double){x}[j] : 0.0;"));
        t.push_str("    acc = rl_lanes_sum(acc);\n");
    };
    let value = match op {
        ReduceOp::Count => "(rl_real)cnt".to_string(),
        ReduceOp::Sum => {
            sum(&mut t);
            "(rl_real)acc".to_string()
        }
        ReduceOp::Mean => {
            sum(&mut t);
            "cnt == 0.0 ? (rl_real)0 : (rl_real)(acc / cnt)".to_string()
        }
        ReduceOp::Std => {
            sum(&mut t);
            t.push_str("    double mean = cnt == 0.0 ? 0.0 : acc / cnt;\n    double dev = 0.0;\n");
            lanes(&mut t, "", &format!("if ({m}[j] != 0) {{ double d = (double){x}[j] - mean; dev += d * d; }}"));
            t.push_str("    dev = rl_lanes_sum(dev);\n");
            "cnt == 0.0 ? (rl_real)0 : (rl_real)rl_sqrt_d(dev / cnt)".to_string()
        }
        ReduceOp::Max | ReduceOp::Min => {
            let (pick, lanes_pick, init) = if op == ReduceOp::Max {
                ("rl_max_d", "rl_lanes_max", "-(double)RL_INF")
            } else {
                ("rl_min_d", "rl_lanes_min", "(double)RL_INF")
            };
            writeln!(t, "    double acc = {init};").expect("writing to a String");
            lanes(&mut t, "", &format!("if ({m}[j] != 0) acc = {pick}(acc, (double){x}[j]);"));
            writeln!(t, "    acc = {lanes_pick}(acc);").expect("writing to a String");
            "cnt == 0.0 ? (rl_real)0 : (rl_real)acc".to_string()
        }
        ReduceOp::Rank => unreachable!("ranks are their own stage"),
    };
    writeln!(t, "    if (RL_LANE == 0) g{out}[w] = {value};").expect("writing to a String");
    let mut args = vec![Arg::Groups, Arg::Offsets];
    args.extend(dedup(source_arg(arg).into_iter().chain(source_arg(mask))));
    args.push(Arg::GroupOut(out));
    (Kernel { name: format!("s{stage}"), args, grid: Grid::GroupWarps }, t)
}

/// Ranks within group `w`: each lane ranks its strided share of the rows.
/// With a mask, only the selected rows are ranked, among themselves, and
/// a masked-out row's rank is 0; a NaN among the selected values makes
/// every selected rank NaN.
pub(crate) fn group_rank(stage: usize, arg: Source, mask: Option<Source>, out: ColumnId) -> (Kernel, String) {
    if let Some(mask) = mask {
        return group_rank_masked(stage, arg, mask, out);
    }
    let x = source_name(arg);
    let mut t = String::from("    unsigned long long start = off[w], end = off[w + 1];\n    int nan = 0;\n");
    writeln!(t, "    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) nan |= {x}[j] != {x}[j];")
        .expect("writing to a String");
    t.push_str("    nan = rl_lanes_any(nan);\n");
    t.push_str("    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) {\n");
    writeln!(t, "        rl_real x = {x}[j];\n        double less = 0.0, equal = 0.0;").expect("writing to a String");
    writeln!(
        t,
        "        for (unsigned long long k = start; k < end; k++) {{ less += {x}[k] < x ? 1.0 : 0.0; equal += {x}[k] == x ? 1.0 : 0.0; }}"
    )
    .expect("writing to a String");
    writeln!(t, "        c{out}[j] = nan ? RL_NAN : (rl_real)(less + (equal + 1.0) / 2.0);\n    }}")
        .expect("writing to a String");
    let mut args = vec![Arg::Groups, Arg::Offsets];
    args.extend(source_arg(arg));
    args.push(Arg::ColumnOut(out));
    (Kernel { name: format!("s{stage}"), args, grid: Grid::GroupWarps }, t)
}

fn group_rank_masked(stage: usize, arg: Source, mask: Source, out: ColumnId) -> (Kernel, String) {
    let (x, m) = (source_name(arg), source_name(mask));
    let mut t = String::from("    unsigned long long start = off[w], end = off[w + 1];\n    int nan = 0;\n");
    writeln!(
        t,
        "    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) nan |= {m}[j] != 0 && {x}[j] != {x}[j];"
    )
    .expect("writing to a String");
    t.push_str("    nan = rl_lanes_any(nan);\n");
    t.push_str("    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) {\n");
    writeln!(t, "        if ({m}[j] == 0) {{ c{out}[j] = (rl_real)0; continue; }}").expect("writing to a String");
    writeln!(t, "        rl_real x = {x}[j];\n        double less = 0.0, equal = 0.0;").expect("writing to a String");
    writeln!(
        t,
        "        for (unsigned long long k = start; k < end; k++) {{ if ({m}[k] == 0) continue; less += {x}[k] < x ? 1.0 : 0.0; equal += {x}[k] == x ? 1.0 : 0.0; }}"
    )
    .expect("writing to a String");
    writeln!(t, "        c{out}[j] = nan ? RL_NAN : (rl_real)(less + (equal + 1.0) / 2.0);\n    }}")
        .expect("writing to a String");
    let mut args = vec![Arg::Groups, Arg::Offsets];
    args.extend(dedup(source_arg(arg).into_iter().chain(source_arg(mask))));
    args.push(Arg::ColumnOut(out));
    (Kernel { name: format!("s{stage}"), args, grid: Grid::GroupWarps }, t)
}

/// The right-hand side of a load op, `None` for computing ops.
fn load(op: &Op) -> Option<String> {
    Some(match *op {
        Op::Const(x) => literal(x),
        Op::Param(p) => format!("P[{p}]"),
        Op::Feature(f) => format!("f{f}[i]"),
        Op::Column(c) => format!("c{c}[i]"),
        Op::Group(g) => format!("g{g}[gid[i]]"),
        Op::Batch(b) => format!("B[{b}]"),
        _ => return None,
    })
}

/// The right-hand side of a computing op, arguments named by `reg`.
fn compute(op: &Op, reg: &dyn Fn(Reg) -> String) -> String {
    let Op::Apply(apply) = *op else { unreachable!("loads are emitted by `load`") };
    apply_expr(apply, reg, &Spelling::KERNEL)
}

/// How one C dialect spells what [`apply_expr`] writes: the kernels' source here (CUDA and its C
/// twin: precision-generic `rl_*` math macros over `rl_real`, short-circuit logic) or the CPU's
/// native kernels (`cpu::native`: libm on `double`, logic on `&`/`|` of comparisons, which keeps
/// a row loop free of branches so the compiler vectorises it).
pub(crate) struct Spelling {
    /// The zero a truth value is compared with.
    pub zero: &'static str,
    /// `&`/`|` of parenthesised comparisons instead of `&&`/`||`.
    pub branch_free: bool,
    /// `pow`, `sqrt`, `exp`, `log`, `abs`, `tanh`.
    pub math: [&'static str; 6],
}

impl Spelling {
    /// The CUDA kernels' and their C twin's.
    pub(crate) const KERNEL: Spelling = Spelling {
        zero: "0",
        branch_free: false,
        math: ["rl_pow", "rl_sqrt", "rl_exp", "rl_log", "rl_abs", "rl_tanh"],
    };

    /// Both conditions, as a C truth expression.
    fn both(&self, a: &str, b: &str) -> String {
        if self.branch_free { format!("({a}) & ({b})") } else { format!("{a} && {b}") }
    }

    /// Either condition, as a C truth expression.
    fn either(&self, a: &str, b: &str) -> String {
        if self.branch_free { format!("({a}) | ({b})") } else { format!("{a} || {b}") }
    }
}

/// The C expression of one computing op, arguments named by `reg`, in `spelling`'s dialect.
pub(crate) fn apply_expr(apply: Apply<Reg>, reg: &dyn Fn(Reg) -> String, spelling: &Spelling) -> String {
    let z = spelling.zero;
    let [pow, sqrt, exp, log, abs, tanh] = spelling.math;
    match apply {
        Apply::Unary(UnOp::Neg, a) => format!("-{}", reg(a)),
        Apply::Unary(UnOp::Not, a) => format!("rl_bool({} == {z})", reg(a)),
        Apply::Binary(op, a, b) => {
            let (a, b) = (reg(a), reg(b));
            match op {
                BinOp::Add => format!("{a} + {b}"),
                BinOp::Sub => format!("{a} - {b}"),
                BinOp::Mul => format!("{a} * {b}"),
                BinOp::Div => format!("{a} / {b}"),
                BinOp::Pow => format!("{pow}({a}, {b})"),
                BinOp::Lt => format!("rl_bool({a} < {b})"),
                BinOp::Le => format!("rl_bool({a} <= {b})"),
                BinOp::Gt => format!("rl_bool({a} > {b})"),
                BinOp::Ge => format!("rl_bool({a} >= {b})"),
                BinOp::Eq => format!("rl_bool({a} == {b})"),
                BinOp::Ne => format!("rl_bool({a} != {b})"),
                BinOp::And => format!("rl_bool({})", spelling.both(&format!("{a} != {z}"), &format!("{b} != {z}"))),
                BinOp::Or => format!("rl_bool({})", spelling.either(&format!("{a} != {z}"), &format!("{b} != {z}"))),
            }
        }
        Apply::Min(a, b) => format!("rl_min({}, {})", reg(a), reg(b)),
        Apply::Max(a, b) => format!("rl_max({}, {})", reg(a), reg(b)),
        Apply::Func(f, a) => {
            let a = reg(a);
            match f {
                Func::Sqrt => format!("{sqrt}({a})"),
                Func::Exp => format!("{exp}({a})"),
                Func::Log => format!("{log}({a})"),
                Func::Abs => format!("{abs}({a})"),
                Func::Sign => format!("rl_sign({a})"),
                Func::Sigmoid => format!("rl_sigmoid({a})"),
                Func::Tanh => format!("{tanh}({a})"),
                Func::Mask => format!("rl_bool({a} != {z})"),
                // One-argument min/max is the argument (n-ary ones are chains).
                Func::Min | Func::Max => a,
                Func::Clip | Func::If => unreachable!("lowered to min/max and select"),
            }
        }
        Apply::Select(b, x, y) => format!("{} != {z} ? {} : {}", reg(b), reg(x), reg(y)),
        Apply::In(x, lo, hi) => {
            let (x, lo, hi) = (reg(x), reg(lo), reg(hi));
            format!("rl_bool({})", spelling.both(&format!("{lo} <= {x}"), &format!("{x} <= {hi}")))
        }
    }
}

/// A constant as a C expression of type `rl_real`: Rust's `{:?}` of an
/// `f64` is the shortest text that reads back to the same double, and the C
/// cast rounds it as Rust's `as f32` would.
fn literal(x: f64) -> String {
    if x.is_nan() {
        "RL_NAN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "RL_INF".to_string() } else { "-RL_INF".to_string() }
    } else {
        format!("(rl_real){x:?}")
    }
}

/// The kernel inputs a set of ops reads, in a canonical order.
fn input_args<'a>(ops: impl Iterator<Item = &'a Op>) -> Vec<Arg> {
    let mut args = BTreeSet::new();
    for op in ops {
        match *op {
            Op::Param(_) => {
                args.insert(Arg::Params);
            }
            Op::Feature(f) => {
                args.insert(Arg::Feature(f));
            }
            Op::Column(c) => {
                args.insert(Arg::ColumnIn(c));
            }
            Op::Group(g) => {
                args.insert(Arg::GroupIn(g));
                args.insert(Arg::GroupIds);
            }
            Op::Batch(_) => {
                args.insert(Arg::Batch);
            }
            _ => {}
        }
    }
    let mut out = vec![Arg::Rows];
    out.extend(args);
    out
}

/// Rows first, then inputs in canonical order, outputs last; no repeats.
fn normalise(args: Vec<Arg>) -> Vec<Arg> {
    let (outs, ins): (Vec<Arg>, Vec<Arg>) =
        args.into_iter().partition(|a| matches!(a, Arg::TempOut(_) | Arg::ColumnOut(_) | Arg::GroupOut(_)));
    let mut set: BTreeSet<Arg> = ins.into_iter().filter(|a| *a != Arg::Rows).collect();
    let mut out = vec![Arg::Rows];
    out.extend(std::mem::take(&mut set));
    out.extend(dedup(outs));
    out
}

fn dedup<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn source_name(arg: Source) -> String {
    match arg {
        Source::Feature(f) => format!("f{f}"),
        Source::Column(c) => format!("c{c}"),
        // Only `count()` reads nothing, and its body never names the source.
        Source::None => "rl_none".to_string(),
    }
}

fn source_arg(arg: Source) -> Option<Arg> {
    match arg {
        Source::Feature(f) => Some(Arg::Feature(f)),
        Source::Column(c) => Some(Arg::ColumnIn(c)),
        Source::None => None,
    }
}
