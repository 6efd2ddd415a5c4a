//! The parser: reward-file text to an [`ast::File`] plus every syntax
//! diagnostic, built on nom 8.
//!
//! # Grammar
//!
//! ```text
//! file       = { statement } ;                  (* one statement per line *)
//! statement  = "let" NAME "=" expr
//!            | "param" NAME "=" [ "-" ] NUMBER
//!            | "check" expr
//!            | "alert" expr [ "for" DIGITS ( "steps" | "step" ) ] ":" STRING
//!            | NAME "=" expr ;                  (* reward, adv, advantage *)
//! expr       = or ;
//! or         = and { "||" and } ;
//! and        = cmp { "&&" cmp } ;
//! cmp        = add [ ( "<" | "<=" | ">" | ">=" | "==" | "!=" ) add
//!                  | "in" "[" expr "," expr "]" ] ;   (* non-associative *)
//! add        = mul { ( "+" | "-" ) mul } ;
//! mul        = unary { ( "*" | "/" ) unary } ;
//! unary      = ( "-" | "!" ) unary | pow ;
//! pow        = atom [ "^" unary ] ;             (* right-associative *)
//! atom       = NUMBER | "true" | "false"
//!            | callee "(" [ expr { "," expr } ] ")"
//!            | NAME
//!            | "step." NAME                     (* a step metric, alerts only *)
//!            | "(" expr ")" ;
//! callee     = NAME { "." NAME } ;              (* group.mean, no spaces *)
//! NAME       = [A-Za-z_][A-Za-z0-9_]*  except the keywords ;
//! NUMBER     = ( DIGITS [ "." [ DIGITS ] ] | "." DIGITS ) [ ( "e" | "E" ) [ "+" | "-" ] DIGITS ] ;
//! STRING     = '"' { any character but '"', '\\' and control characters | '\\"' | '\\\\' } '"' ;
//! keywords   = let param check in true false ;
//! ```
//!
//! `alert`, `for` and `steps` are not reserved: a line is an alert when it
//! starts with the word `alert` followed by anything but `=`.
//!
//! `#` starts a comment that runs to the end of the line. A newline ends a
//! statement, except inside `(...)` or `[...]`, so long formulas wrap inside
//! parentheses. Spaces, tabs and `\r` (CRLF files) are insignificant, and a
//! leading byte-order mark is skipped.
//!
//! # Precedence, lowest first
//!
//! | level | operators                               | associativity     |
//! |-------|-----------------------------------------|-------------------|
//! | 1     | `\|\|`                                  | left              |
//! | 2     | `&&`                                    | left              |
//! | 3     | `< <= > >= == !=`, `x in [lo, hi]`      | none (no chains)  |
//! | 4     | `+ -`                                   | left              |
//! | 5     | `* /`                                   | left              |
//! | 6     | unary `-`, `!`                          | prefix            |
//! | 7     | `^`                                     | right             |
//!
//! `^` binds tighter than unary minus and its exponent may be signed:
//! `-x^2` is `-(x^2)`, `2^-1` is `2^(-1)`, `2^3^2` is `2^(3^2)`. A negative
//! literal is `Unary { Neg, Number }`. Parentheses leave no node in the tree;
//! they widen the span of what they enclose.
//!
//! # Errors and recovery
//!
//! The file is first split into statements (`split`), so a statement that
//! fails is reported and skipped and parsing resumes with the next one:
//! every statement's first error is reported. So that one unclosed `(` does
//! not swallow the rest of the file, a line that begins like a statement
//! (`let`, `param`, `check`, `NAME =`) starts a new one even inside
//! brackets; none of those can continue an expression. Where a name was
//! already read the item is kept with an [`ast::ExprKind::Error`] value.
//! Within a statement, nom's `Err::Failure` (a "cut") is raised as soon as a
//! token commits the parser, with a diagnostic that puts the caret where the
//! user erred.
//!
//! # Limits
//!
//! Nesting (parentheses, calls, ranges, unary operators, exponents) is
//! capped at [`MAX_DEPTH`] and the height of every returned expression tree
//! at [`MAX_HEIGHT`]: deeper input is an "expression nested too deeply"
//! error, never a stack overflow, and a recursive pass over a tree this
//! parser returned needs at most `MAX_HEIGHT` levels of recursion. Parsing is
//! linear in the input's length.

mod cx;
mod error;
mod expr;
mod lex;
mod split;
mod stmt;

#[cfg(test)]
mod robustness;
#[cfg(test)]
mod tests;

use crate::ast;
use crate::diag::Diagnostic;
use crate::span::Span;

/// The deepest nesting of parentheses, calls, ranges and unary or `^`
/// operators the parser accepts. Sized so that the parser's recursion fits
/// a 2 MiB thread even in an unoptimised build; real formulas nest a handful
/// of levels.
pub const MAX_DEPTH: usize = 128;

/// The greatest height of any expression tree the parser returns (an atom
/// has height 1; `a + b + c` has height 3). Checker, interpreter and printer
/// may recurse over trees without further guards.
pub const MAX_HEIGHT: usize = 256;

/// Parses a whole reward file. Always returns a tree (with `Error` nodes
/// where the input made no sense) and every diagnostic found; an input with
/// no error diagnostics yields a tree with no `Error` nodes.
pub fn parse(text: &str) -> (ast::File, Vec<Diagnostic>) {
    let lines = cx::Lines::default();
    let mut items = Vec::new();
    let mut diags = Vec::new();
    for extent in split::statements(text, true) {
        let cx = cx::Cx::new(text, extent.end, &lines);
        let (item, diag) = cx.statement(extent.start);
        items.extend(item);
        diags.extend(diag);
    }
    (ast::File { items }, diags)
}

/// Parses a single expression (a `--reward` formula on a command line or in
/// a study file); newlines are plain whitespace here. Returns the expression
/// exactly when there is no error diagnostic.
pub fn parse_expr(text: &str) -> (Option<ast::Expr>, Vec<Diagnostic>) {
    let lines = cx::Lines::default();
    let Some(extent) = split::statements(text, false).into_iter().next() else {
        let at = Span::new(text.len(), text.len());
        return (None, vec![Diagnostic::error(cx::SYNTAX, at, "expected an expression")]);
    };
    let cx = cx::Cx::new(text, extent.end, &lines);
    match cx.full_expr(&text[extent.start..extent.end], "an expression") {
        Ok(expr) => (Some(expr), Vec::new()),
        Err(d) => (None, vec![d]),
    }
}
