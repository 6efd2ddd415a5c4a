//! The reference graph among `let`s and definitions: cycles, the dependency
//! order the program is evaluated in, and the layer of every definition.

use super::scope::{Scope, Symbol};
use crate::ast::{Expr, ExprKind};
use crate::diag::Diagnostic;
use crate::hir::{DefKind, Layer};
use crate::span::Span;

/// The slots an expression reads directly, each with the span of the
/// (first) reference, in source order.
pub(crate) fn references(expr: &Expr, scope: &Scope<'_>) -> Vec<(usize, Span)> {
    let mut out = Vec::new();
    collect(expr, scope, &mut out);
    out
}

fn collect(expr: &Expr, scope: &Scope<'_>, out: &mut Vec<(usize, Span)>) {
    match &expr.kind {
        ExprKind::Name(ident) => {
            if let Some(Symbol::Slot(slot)) = scope.lookup(&ident.name)
                && !out.iter().any(|(s, _)| *s == slot)
            {
                out.push((slot, ident.span));
            }
        }
        ExprKind::Unary { expr, .. } => collect(expr, scope, out),
        ExprKind::Binary { lhs, rhs, .. } => {
            collect(lhs, scope, out);
            collect(rhs, scope, out);
        }
        ExprKind::Call { callee, args, named } => {
            // A feature's arguments are a level and literals, never references.
            if scope.feature(&callee.name).is_none() {
                for a in args.iter().chain(named.iter().map(|n| &n.value)) {
                    collect(a, scope, out);
                }
            }
        }
        ExprKind::In { expr, lo, hi } => {
            for e in [expr, lo, hi] {
                collect(e, scope, out);
            }
        }
        ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Error => {}
    }
}

/// Every elementary cycle found by depth-first search (one per back edge),
/// reported as an error naming it (`a -> b -> a`) at the reference that
/// closes it, with a note for every other link. Returns the slots on cycles.
///
/// Cycles through `skip` are marked but not reported (a layering error already explains them).
pub(crate) fn cycles(
    scope: &Scope<'_>,
    deps: &[Vec<(usize, Span)>],
    skip: Option<usize>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<bool> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let n = deps.len();
    let mut mark = vec![Mark::New; n];
    let mut on_cycle = vec![false; n];
    // Iterative DFS: (slot, index of the next edge to follow).
    for root in 0..n {
        if mark[root] != Mark::New {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        mark[root] = Mark::Open;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&(w, span)) = deps[v].get(*next) {
                *next += 1;
                match mark[w] {
                    Mark::New => {
                        mark[w] = Mark::Open;
                        stack.push((w, 0));
                    }
                    Mark::Open => {
                        let start = stack.iter().position(|&(s, _)| s == w).expect("an open slot is on the stack");
                        let path: Vec<usize> = stack[start..].iter().map(|&(s, _)| s).collect();
                        for &s in &path {
                            on_cycle[s] = true;
                        }
                        if !skip.is_some_and(|s| path.contains(&s)) {
                            diags.push(cycle_error(scope, deps, &path, span));
                        }
                    }
                    Mark::Done => {}
                }
            } else {
                mark[v] = Mark::Done;
                stack.pop();
            }
        }
    }
    on_cycle
}

fn cycle_error(scope: &Scope<'_>, deps: &[Vec<(usize, Span)>], path: &[usize], closing: Span) -> Diagnostic {
    let name = |s: usize| scope.slots[s].name.as_str();
    let mut chain: Vec<&str> = path.iter().map(|&s| name(s)).collect();
    chain.push(name(path[0]));
    let last = *path.last().expect("a cycle has a slot");
    let mut d = if path.len() == 1 {
        Diagnostic::error("cycle", closing, format!("`{}` is defined in terms of itself", name(last)))
    } else {
        Diagnostic::error("cycle", closing, format!("definitions read each other in a cycle: {}", chain.join(" -> ")))
    };
    d = d.with_help("break the cycle: one of these must be computed without the others");
    for (i, &s) in path.iter().enumerate() {
        let to = path[(i + 1) % path.len()];
        if s == last {
            continue;
        }
        if deps[s].iter().any(|(t, _)| *t == to) {
            d = d.with_note(format!("`{}` reads `{}`", name(s), name(to)));
        }
    }
    d
}

/// Slots in dependency order: every slot after the slots it reads (edges on
/// cycles are ignored), otherwise in source order.
pub(crate) fn dependency_order(deps: &[Vec<(usize, Span)>]) -> Vec<usize> {
    let n = deps.len();
    let mut placed = vec![false; n];
    let mut visiting = vec![false; n];
    let mut order = Vec::with_capacity(n);
    fn visit(
        v: usize,
        deps: &[Vec<(usize, Span)>],
        placed: &mut [bool],
        visiting: &mut [bool],
        order: &mut Vec<usize>,
    ) {
        if placed[v] || visiting[v] {
            return;
        }
        visiting[v] = true;
        for &(w, _) in &deps[v] {
            visit(w, deps, placed, visiting, order);
        }
        visiting[v] = false;
        placed[v] = true;
        order.push(v);
    }
    for v in 0..n {
        visit(v, deps, &mut placed, &mut visiting, &mut order);
    }
    order
}

/// The layer of every slot: `reward` is the reward layer, `adv` and
/// `advantage` the advantage layer, and a `let` is in the advantage layer iff
/// it reads (transitively) `reward`, `adv` or `advantage`.
pub(crate) fn layers(scope: &Scope<'_>, deps: &[Vec<(usize, Span)>]) -> Vec<Layer> {
    let mut layer: Vec<Layer> = scope
        .slots
        .iter()
        .map(|s| if matches!(s.kind, DefKind::Adv | DefKind::Advantage) { Layer::Advantage } else { Layer::Reward })
        .collect();
    // A fixpoint rather than one pass in dependency order, so that it is
    // also right on a graph with cycles (which are reported separately).
    let mut changed = true;
    while changed {
        changed = false;
        for (v, s) in scope.slots.iter().enumerate() {
            if s.kind == DefKind::Let
                && layer[v] == Layer::Reward
                && deps[v].iter().any(|&(w, _)| scope.slots[w].kind != DefKind::Let || layer[w] == Layer::Advantage)
            {
                layer[v] = Layer::Advantage;
                changed = true;
            }
        }
    }
    layer
}

/// Reports `reward` reading the advantage layer, naming the chain of reads
/// (`` `reward` reads `scaled`, which reads `adv` ``).
pub(crate) fn check_layering(scope: &Scope<'_>, deps: &[Vec<(usize, Span)>], layer: &[Layer]) -> Option<Diagnostic> {
    let reward = scope.reward?;
    // Breadth-first from `reward` through reward-side edges to the first advantage-layer slot.
    let n = deps.len();
    let mut parent: Vec<Option<(usize, Span)>> = vec![None; n];
    let mut seen = vec![false; n];
    seen[reward] = true;
    let mut queue = std::collections::VecDeque::from([reward]);
    while let Some(v) = queue.pop_front() {
        for &(w, span) in &deps[v] {
            if seen[w] {
                continue;
            }
            seen[w] = true;
            parent[w] = Some((v, span));
            if scope.slots[w].kind != DefKind::Let || layer[w] == Layer::Advantage {
                return Some(layering_error(scope, &parent, w, deps, layer));
            }
            queue.push_back(w);
        }
    }
    None
}

fn layering_error(
    scope: &Scope<'_>,
    parent: &[Option<(usize, Span)>],
    target: usize,
    deps: &[Vec<(usize, Span)>],
    layer: &[Layer],
) -> Diagnostic {
    let name = |s: usize| format!("`{}`", scope.slots[s].name);
    // Walk back to `reward`, then extend forward from `target` into the
    // advantage layer until a definition (`adv`, `advantage`, `reward`) is named.
    let mut chain = vec![target];
    let mut first_span = Span::default();
    let mut v = target;
    while let Some((p, span)) = parent[v] {
        chain.push(p);
        first_span = span;
        v = p;
    }
    chain.reverse();
    let mut v = target;
    let mut guard = 0;
    while scope.slots[v].kind == DefKind::Let && guard < deps.len() {
        guard += 1;
        let definition = deps[v].iter().find(|&&(w, _)| scope.slots[w].kind != DefKind::Let);
        let Some(&(w, _)) = definition.or_else(|| deps[v].iter().find(|&&(w, _)| layer[w] == Layer::Advantage)) else {
            break;
        };
        chain.push(w);
        v = w;
    }
    let mut text = format!("{} reads {}", name(chain[0]), name(chain[1]));
    for &s in &chain[2..] {
        text.push_str(&format!(", which reads {}", name(s)));
    }
    Diagnostic::error("layering", first_span, format!("the reward layer reads the advantage layer: {text}")).with_help(
        "`reward` sees one rollout's features; move what needs `reward`, `adv` or `advantage` into \
             `advantage = ...` (or a `let` used only there)",
    )
}
