//! Lowering a checked [`Program`] to stages: inline definitions into one
//! hash-consed DAG, fold constants, level the nodes by reduction depth, and
//! cut the DAG into stages (see the parent module).

use std::collections::HashMap;

use super::{Apply, Elementwise, IrProgram, Op, Outputs, Reg, Source, Stage};
use crate::ast::{BinOp, UnOp};
use crate::hir::{DefId, Expr, FeatureId, Func, ParamId, Program, ReduceOp, Scope};
use crate::interp::ops;

/// Compiles a program to stages. Only what `reward`, `adv` and `advantage`
/// depend on is compiled (checks are the checker's business).
pub fn lower(program: &Program) -> IrProgram {
    let mut dag = Dag {
        program,
        nodes: Vec::new(),
        ids: HashMap::new(),
        defs: vec![None; program.defs.len()],
        names: HashMap::new(),
    };
    let reward = dag.def(program.reward);
    let adv = dag.def(program.adv);
    let advantage = dag.def(program.advantage);
    Scheduler::new(&dag, [reward, adv, advantage]).run()
}

type NodeId = usize;

/// A DAG node. Constants are keyed by their bits so that hashing is exact
/// (`0.0` and `-0.0` stay apart; a NaN constant equals itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Node {
    Const(u64),
    Param(ParamId),
    Feature(FeatureId),
    Apply(Apply<NodeId>),
    /// A reduction, its argument (`None` for `count`) and its mask.
    Reduce(Scope, ReduceOp, Option<NodeId>, Option<NodeId>),
}

impl Node {
    fn children(&self) -> impl Iterator<Item = NodeId> {
        let (apply, reduced) = match *self {
            Node::Apply(apply) => (Some(apply), None),
            Node::Reduce(_, _, arg, mask) => (None, Some([arg, mask])),
            Node::Const(_) | Node::Param(_) | Node::Feature(_) => (None, None),
        };
        apply.into_iter().flat_map(|a| a.operands()).chain(reduced.into_iter().flatten().flatten())
    }
}

struct Dag<'p> {
    program: &'p Program,
    nodes: Vec<Node>,
    ids: HashMap<Node, NodeId>,
    defs: Vec<Option<NodeId>>,
    /// The first definition whose value a node is, for readable column names.
    names: HashMap<NodeId, String>,
}

impl Dag<'_> {
    fn def(&mut self, id: DefId) -> NodeId {
        if let Some(node) = self.defs[id] {
            return node;
        }
        let def = self.program.def(id);
        let node = self.expr(&def.expr);
        self.defs[id] = Some(node);
        self.names.entry(node).or_insert_with(|| def.name.clone());
        node
    }

    fn constant(&self, node: NodeId) -> Option<f64> {
        match self.nodes[node] {
            Node::Const(bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }

    fn num(&mut self, x: f64) -> NodeId {
        self.intern(Node::Const(x.to_bits()))
    }

    /// Interns a node, folding it when every operand is a constant. Folding
    /// computes with `ops`, exactly as the interpreter would at run time.
    fn intern(&mut self, node: Node) -> NodeId {
        let c = |n: NodeId| self.constant(n);
        let folded = match node {
            // A constant condition picks its branch (the other is dead).
            Node::Apply(Apply::Select(b, x, y)) => {
                if let Some(b) = c(b) {
                    return if ops::truthy(b) { x } else { y };
                }
                None
            }
            Node::Apply(apply) => apply.try_map(c).map(fold),
            _ => None,
        };
        let node = match folded {
            Some(x) => Node::Const(x.to_bits()),
            None => node,
        };
        if let Some(&id) = self.ids.get(&node) {
            return id;
        }
        self.nodes.push(node);
        self.ids.insert(node, self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    fn apply(&mut self, apply: Apply<NodeId>) -> NodeId {
        self.intern(Node::Apply(apply))
    }

    fn expr(&mut self, expr: &Expr) -> NodeId {
        match expr {
            Expr::Number(x) => self.num(*x),
            Expr::Bool(b) => self.num(ops::from_bool(*b)),
            Expr::Param(p) => self.intern(Node::Param(*p)),
            Expr::Feature(f) => self.intern(Node::Feature(*f)),
            Expr::Def(d) => self.def(*d),
            Expr::Unary(op, a) => {
                let a = self.expr(a);
                self.apply(Apply::Unary(*op, a))
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                self.apply(Apply::Binary(*op, a, b))
            }
            Expr::In(x, lo, hi) => {
                let (x, lo, hi) = (self.expr(x), self.expr(lo), self.expr(hi));
                self.apply(Apply::In(x, lo, hi))
            }
            Expr::Call(f, args) => {
                let args: Vec<NodeId> = args.iter().map(|a| self.expr(a)).collect();
                self.call(*f, &args)
            }
            Expr::Reduce(scope, op, arg, mask) => {
                let arg = arg.as_ref().map(|a| self.expr(a));
                let mask = mask.as_ref().map(|m| self.expr(m));
                match mask.map(|m| self.constant(m)) {
                    // A mask that always holds selects every row, one that
                    // never holds none: every reduction of nothing is 0.
                    Some(Some(m)) if ops::truthy(m) => self.intern(Node::Reduce(*scope, *op, arg, None)),
                    Some(Some(_)) => self.num(0.0),
                    _ => self.intern(Node::Reduce(*scope, *op, arg, mask)),
                }
            }
        }
    }

    /// Whether every value of a node is exactly 0.0 or 1.0: comparisons,
    /// logic and `mask` make only those (a bool *feature* may hold anything
    /// its data source wrote, so it does not count).
    fn is_zero_or_one(&self, node: NodeId) -> bool {
        match self.nodes[node] {
            Node::Const(bits) => bits == 0.0f64.to_bits() || bits == 1.0f64.to_bits(),
            Node::Apply(Apply::Binary(op, ..)) => {
                !matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Pow)
            }
            Node::Apply(Apply::Unary(UnOp::Not, _) | Apply::In(..) | Apply::Func(Func::Mask, _)) => true,
            Node::Apply(Apply::Select(_, x, y)) => self.is_zero_or_one(x) && self.is_zero_or_one(y),
            _ => false,
        }
    }

    fn call(&mut self, f: Func, args: &[NodeId]) -> NodeId {
        match (f, args) {
            // Folded left, as `ops::call` folds.
            (Func::Min, [first, rest @ ..]) => rest.iter().fold(*first, |a, &b| self.apply(Apply::Min(a, b))),
            (Func::Max, [first, rest @ ..]) => rest.iter().fold(*first, |a, &b| self.apply(Apply::Max(a, b))),
            (Func::Clip, [x, lo, hi]) => {
                let low = self.apply(Apply::Max(*x, *lo));
                self.apply(Apply::Min(low, *hi))
            }
            (Func::If, [b, x, y]) => self.apply(Apply::Select(*b, *x, *y)),
            // `mask` of a value that is already exactly 0 or 1 is that value.
            (Func::Mask, [b]) if self.is_zero_or_one(*b) => *b,
            (f, [x]) => self.apply(Apply::Func(f, *x)),
            (f, args) => {
                panic!("{}() with {} arguments reached lowering; the checker rejects it", f.name(), args.len())
            }
        }
    }
}

/// The value of an operator on constants, computed with `ops` exactly as the
/// interpreter computes it at run time.
pub(crate) fn fold(apply: Apply<f64>) -> f64 {
    match apply {
        Apply::Unary(op, a) => ops::unary(op, a),
        Apply::Binary(op, a, b) => ops::binary(op, a, b),
        Apply::Min(a, b) => ops::min(a, b),
        Apply::Max(a, b) => ops::max(a, b),
        Apply::Func(f, a) => ops::func1(f, a),
        Apply::Select(b, x, y) => {
            if ops::truthy(b) {
                x
            } else {
                y
            }
        }
        Apply::In(x, lo, hi) => ops::in_range(x, lo, hi),
    }
}

/// Cuts the leveled DAG into stages.
struct Scheduler<'d, 'p> {
    dag: &'d Dag<'p>,
    outputs: [NodeId; 3],
    live: Vec<bool>,
    level: Vec<usize>,
    /// The column a node is materialised in (and rank nodes, which are columns).
    column: Vec<Option<usize>>,
    columns: Vec<String>,
    group_value: HashMap<NodeId, usize>,
    batch_value: HashMap<NodeId, usize>,
    /// The column of each output (two outputs of one node get a column each).
    output_columns: [usize; 3],
    /// Further columns a node is stored to: an output that is the same
    /// value as an earlier one (`advantage = adv`).
    aliases: HashMap<NodeId, Vec<usize>>,
}

impl<'d, 'p> Scheduler<'d, 'p> {
    fn new(dag: &'d Dag<'p>, outputs: [NodeId; 3]) -> Scheduler<'d, 'p> {
        let n = dag.nodes.len();
        let mut live = vec![false; n];
        let mut stack: Vec<NodeId> = outputs.to_vec();
        while let Some(id) = stack.pop() {
            if !live[id] {
                live[id] = true;
                stack.extend(dag.nodes[id].children());
            }
        }
        // Children are interned before parents, so ids are a topological order.
        let mut level = vec![0; n];
        for id in 0..n {
            level[id] = match dag.nodes[id] {
                Node::Reduce(_, _, arg, mask) => arg.into_iter().chain(mask).map(|a| level[a]).max().unwrap_or(0) + 1,
                node => node.children().map(|c| level[c]).max().unwrap_or(0),
            };
        }
        Scheduler {
            dag,
            outputs,
            live,
            level,
            column: vec![None; n],
            columns: Vec::new(),
            group_value: HashMap::new(),
            output_columns: [0; 3],
            aliases: HashMap::new(),
            batch_value: HashMap::new(),
        }
    }

    fn materialise(&mut self, id: NodeId) -> usize {
        if let Some(c) = self.column[id] {
            return c;
        }
        let name = self.dag.names.get(&id).cloned().unwrap_or_else(|| format!("t{}", self.columns.len()));
        self.columns.push(name);
        self.column[id] = Some(self.columns.len() - 1);
        self.columns.len() - 1
    }

    fn run(mut self) -> IrProgram {
        let dag = self.dag;
        let nodes = &dag.nodes;
        // Which nodes must be columns: the outputs, reduction arguments that
        // are not features, and every rank. A value of a lower level that a
        // later stage needs is read from its column when it has one and
        // recomputed otherwise: a few ops per row are cheaper than writing and
        // reading back a full-length column.
        // Outputs of one value get a column each, stored from the same
        // register while it is in cache (rather than the caller copying a
        // full column afterwards). Ranks are written by their own stage, so
        // an output equal to an earlier rank output shares its column.
        const NAMES: [&str; 3] = ["reward", "adv", "advantage"];
        for (i, o) in self.outputs.into_iter().enumerate() {
            let is_rank = matches!(nodes[o], Node::Reduce(_, ReduceOp::Rank, ..));
            self.output_columns[i] = match self.column[o] {
                Some(_) if !is_rank => {
                    self.columns.push(NAMES[i].to_string());
                    let alias = self.columns.len() - 1;
                    self.aliases.entry(o).or_default().push(alias);
                    alias
                }
                _ => self.materialise(o),
            };
        }
        for (id, &node) in nodes.iter().enumerate() {
            if !self.live[id] {
                continue;
            }
            match node {
                Node::Reduce(_, ReduceOp::Rank, arg, mask) => {
                    self.materialise(id);
                    self.reduce_arg(arg);
                    self.reduce_arg(mask);
                }
                Node::Reduce(scope, _, arg, mask) => {
                    self.reduce_arg(arg);
                    self.reduce_arg(mask);
                    let values = if scope == Scope::Group { &mut self.group_value } else { &mut self.batch_value };
                    let next = values.len();
                    values.entry(id).or_insert(next);
                }
                _ => {}
            }
        }
        let max_level = (0..nodes.len()).filter(|&i| self.live[i]).map(|i| self.level[i]).max().unwrap_or(0);
        let mut stages = Vec::new();
        for k in 0..=max_level {
            let stage = self.elementwise(k);
            if !stage.ops.is_empty() {
                stages.push(Stage::Elementwise(stage));
            }
            // Reductions of stage k's columns, group ones first: they fuse with
            // the elementwise stages around them, batch ones end a pass.
            let reductions: Vec<NodeId> =
                (0..nodes.len()).filter(|&i| self.live[i] && self.level[i] == k + 1).collect();
            for scope in [Scope::Group, Scope::Batch] {
                for &id in &reductions {
                    if let Node::Reduce(s, op, arg, mask) = nodes[id]
                        && s == scope
                    {
                        stages.push(self.reduction(id, s, op, arg, mask));
                    }
                }
            }
        }
        IrProgram {
            features: self.dag.program.features.iter().map(|f| f.key.clone()).collect(),
            params: self.dag.program.params.iter().map(|p| (p.name.clone(), p.value)).collect(),
            outputs: Outputs {
                reward: self.output_columns[0],
                adv: self.output_columns[1],
                advantage: self.output_columns[2],
            },
            columns: self.columns,
            group_values: self.group_value.len(),
            batch_values: self.batch_value.len(),
            stages,
        }
    }

    fn reduce_arg(&mut self, arg: Option<NodeId>) {
        if let Some(a) = arg
            && !matches!(self.dag.nodes[a], Node::Feature(_))
        {
            self.materialise(a);
        }
    }

    fn source(&self, arg: Option<NodeId>) -> Source {
        match arg {
            None => Source::None,
            Some(a) => match self.dag.nodes[a] {
                Node::Feature(f) => Source::Feature(f),
                _ => Source::Column(self.column[a].expect("reduction arguments are materialised")),
            },
        }
    }

    fn reduction(&self, id: NodeId, scope: Scope, op: ReduceOp, arg: Option<NodeId>, mask: Option<NodeId>) -> Stage {
        let arg = self.source(arg);
        let mask = mask.map(|m| self.source(Some(m)));
        match (scope, op) {
            (Scope::Group, ReduceOp::Rank) => {
                Stage::GroupRank { arg, mask, out: self.column[id].expect("ranks are columns") }
            }
            (Scope::Batch, ReduceOp::Rank) => {
                Stage::BatchRank { arg, mask, out: self.column[id].expect("ranks are columns") }
            }
            (Scope::Group, op) => Stage::GroupReduce { op, arg, mask, out: self.group_value[&id] },
            (Scope::Batch, op) => Stage::BatchReduce { op, arg, mask, out: self.batch_value[&id] },
        }
    }

    /// The elementwise stage of level `k`: computes every materialised node of
    /// that level from loads and inline arithmetic. A group or batch value
    /// that must be a column (an output, a reduction's argument) is stored
    /// here by broadcasting it; ranks are written by their own stages.
    fn elementwise(&self, k: usize) -> Elementwise {
        let mut stage = Elementwise::default();
        let mut regs: HashMap<NodeId, Reg> = HashMap::new();
        for id in 0..self.dag.nodes.len() {
            let computed_here = self.live[id]
                && self.level[id] == k
                && self.column[id].is_some()
                && !matches!(self.dag.nodes[id], Node::Reduce(_, ReduceOp::Rank, ..));
            if computed_here {
                let reg = self.emit(k, id, &mut stage, &mut regs);
                stage.stores.push((reg, self.column[id].expect("checked above")));
                for &alias in self.aliases.get(&id).into_iter().flatten() {
                    stage.stores.push((reg, alias));
                }
            }
        }
        stage
    }

    fn emit(&self, k: usize, id: NodeId, stage: &mut Elementwise, regs: &mut HashMap<NodeId, Reg>) -> Reg {
        if let Some(&r) = regs.get(&id) {
            return r;
        }
        let node = self.dag.nodes[id];
        let op = match node {
            Node::Const(bits) => Op::Const(f64::from_bits(bits)),
            Node::Param(p) => Op::Param(p),
            Node::Feature(f) => Op::Feature(f),
            Node::Reduce(_, ReduceOp::Rank, ..) => Op::Column(self.column[id].expect("ranks are columns")),
            Node::Reduce(Scope::Group, ..) => Op::Group(self.group_value[&id]),
            Node::Reduce(Scope::Batch, ..) => Op::Batch(self.batch_value[&id]),
            _ if self.level[id] < k && self.column[id].is_some() => {
                Op::Column(self.column[id].expect("checked in the guard"))
            }
            Node::Apply(apply) => Op::Apply(apply.map(|a| self.emit(k, a, stage, regs))),
        };
        stage.ops.push(op);
        let reg = stage.ops.len() - 1;
        regs.insert(id, reg);
        reg
    }
}
