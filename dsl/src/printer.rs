//! Pretty-printer: the inverse of the parser, in canonical form.
//!
//! One statement per line, single spaces around binary operators, `f(a, b)`,
//! `x in [lo, hi]`, and only the parentheses that precedence and
//! associativity require. For every tree without `Error` nodes,
//! `parse(print(file))` gives back the same tree (spans aside), and printing
//! that again gives the same text.
//!
//! Numbers print with Rust's shortest round-tripping `{}` form, switching to
//! exponent form (`1e-7`, `2.5e20`) for very small or large magnitudes so the
//! text stays short. A negative number literal (which the parser never
//! builds, but a rewritten tree may hold) prints like a unary minus, which
//! evaluates the same.

use std::fmt::Write;

use crate::ast::{self, BinOp, Expr, ExprKind, IN_PRECEDENCE, ItemKind, UNARY_PRECEDENCE, UnOp};

/// Prints a whole file, one statement per line, ending with a newline.
pub fn print(file: &ast::File) -> String {
    let mut out = String::new();
    for item in &file.items {
        match &item.kind {
            ItemKind::Def { name, value } => {
                let _ = write!(out, "{} = ", name.name);
                write_expr(&mut out, value, 0);
            }
            ItemKind::Let { name, value } => {
                let _ = write!(out, "let {} = ", name.name);
                write_expr(&mut out, value, 0);
            }
            ItemKind::Param { name, value, .. } => {
                let _ = write!(out, "param {} = {}", name.name, format_number(*value));
            }
            ItemKind::Check { cond } => {
                out.push_str("check ");
                write_expr(&mut out, cond, 0);
            }
            ItemKind::Alert { cond, steps, message, .. } => {
                out.push_str("alert ");
                write_expr(&mut out, cond, 0);
                if let Some(n) = steps {
                    let _ = write!(out, " for {} {}", n.value, if n.value == 1 { "step" } else { "steps" });
                }
                let _ = write!(out, " : {}", quote(message));
            }
        }
        out.push('\n');
    }
    out
}

/// A message as a string literal: `"` and `\\` escaped, as the parser reads them.
pub fn quote(message: &str) -> String {
    let mut out = String::with_capacity(message.len() + 2);
    out.push('"');
    for c in message.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Prints one expression.
pub fn print_expr(expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr, 0);
    out
}

/// The text of a number that reads back to the same `f64`.
pub fn format_number(v: f64) -> String {
    if v.is_nan() {
        // Not writable as a literal: print an expression with the same value.
        return "(0 / 0)".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "(1 / 0)".to_string() } else { "(-1 / 0)".to_string() };
    }
    let magnitude = v.abs();
    if magnitude != 0.0 && !(1e-5..1e16).contains(&magnitude) { format!("{v:e}") } else { format!("{v}") }
}

/// Precedence of the atoms (numbers, names, calls): nothing needs parentheses around them.
const ATOM: u8 = 8;

/// How tightly an expression binds when printed.
fn precedence(expr: &Expr) -> u8 {
    match &expr.kind {
        ExprKind::Binary { op, .. } => op.precedence(),
        ExprKind::In { .. } => IN_PRECEDENCE,
        ExprKind::Unary { .. } => UNARY_PRECEDENCE,
        // A negative literal prints as `-n`, which is a unary minus.
        ExprKind::Number(n) if n.is_sign_negative() => UNARY_PRECEDENCE,
        _ => ATOM,
    }
}

/// Writes `expr`, parenthesised if it binds more loosely than `min`.
fn write_expr(out: &mut String, expr: &Expr, min: u8) {
    let parens = precedence(expr) < min;
    if parens {
        out.push('(');
    }
    match &expr.kind {
        ExprKind::Number(n) => out.push_str(&format_number(*n)),
        ExprKind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        ExprKind::Name(ident) => out.push_str(&ident.name),
        ExprKind::Unary { op, expr: operand } => {
            out.push(match op {
                UnOp::Neg => '-',
                UnOp::Not => '!',
            });
            // The operand of a prefix operator is itself a `unary`, so another
            // prefix or a power needs no parentheses: `--x`, `-x ^ 2`.
            write_expr(out, operand, UNARY_PRECEDENCE);
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let p = op.precedence();
            let (lhs_min, rhs_min) = match op {
                // `atom ^ unary`: the base must be an atom, the exponent may
                // carry a sign or be another power.
                BinOp::Pow => (ATOM, UNARY_PRECEDENCE),
                // Comparisons do not chain: both sides bind tighter.
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => (p + 1, p + 1),
                // Left-associative: a right operand of the same level needs parentheses.
                _ => (p, p + 1),
            };
            write_expr(out, lhs, lhs_min);
            let _ = write!(out, " {} ", op.symbol());
            write_expr(out, rhs, rhs_min);
        }
        ExprKind::Call { callee, args, named } => {
            out.push_str(&callee.name);
            out.push('(');
            for (n, arg) in args.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_expr(out, arg, 0);
            }
            for (n, arg) in named.iter().enumerate() {
                if n > 0 || !args.is_empty() {
                    out.push_str(", ");
                }
                let _ = write!(out, "{} = ", arg.name.name);
                write_expr(out, &arg.value, 0);
            }
            out.push(')');
        }
        ExprKind::In { expr: inner, lo, hi } => {
            write_expr(out, inner, IN_PRECEDENCE + 1);
            out.push_str(" in [");
            write_expr(out, lo, 0);
            out.push_str(", ");
            write_expr(out, hi, 0);
            out.push(']');
        }
        // Not valid syntax on purpose: an erroneous tree must not print as a
        // program that parses.
        ExprKind::Error => out.push_str("<error>"),
    }
    if parens {
        out.push(')');
    }
}

#[cfg(test)]
pub(crate) mod tests;
