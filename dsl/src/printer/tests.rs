//! Printer tests: canonical layout, minimal parentheses, numbers, and the
//! round-trip property `parse(print(ast)) == ast` on random trees.

use proptest::prelude::*;

use super::{format_number, print, print_expr};
use crate::ast::{BinOp, Count, Expr, ExprKind, File, Ident, Item, ItemKind, NamedArg, UnOp};
use crate::parser::{parse, parse_expr};
use crate::span::Span;

fn reprint(text: &str) -> String {
    let (expr, diags) = parse_expr(text);
    assert!(diags.is_empty(), "{text:?}: {diags:?}");
    print_expr(&expr.expect("no diagnostics, so an expression"))
}

#[test]
fn canonical_layout_and_minimal_parentheses() {
    let cases = [
        ("a+b*c", "a + b * c"),
        ("(a+b)*c", "(a + b) * c"),
        ("(a-b)-c", "a - b - c"),
        ("a-(b-c)", "a - (b - c)"),
        ("a/(b*c)", "a / (b * c)"),
        ("-x^2", "-x ^ 2"),
        ("(-x)^2", "(-x) ^ 2"),
        ("2^(3^2)", "2 ^ 3 ^ 2"),
        ("(2^3)^2", "(2 ^ 3) ^ 2"),
        ("2^(-1)", "2 ^ -1"),
        ("-(-x)", "--x"),
        ("-(a+b)", "-(a + b)"),
        ("!(a&&b)", "!(a && b)"),
        ("(a<b)==c", "(a < b) == c"),
        ("a<(b==c)", "a < (b == c)"),
        ("(a||b)&&c", "(a || b) && c"),
        ("a||(b&&c)", "a || b && c"),
        ("(x+1) in [0,(1)]", "x + 1 in [0, 1]"),
        ("(x<1) in [0,1]", "(x < 1) in [0, 1]"),
        ("(x in [0,1]) == true", "(x in [0, 1]) == true"),
        ("f( a ,b )", "f(a, b)"),
        ("group.mean(x)-batch.count( )", "group.mean(x) - batch.count()"),
        ("clip(x,-1,1)", "clip(x, -1, 1)"),
    ];
    for (text, printed) in cases {
        assert_eq!(reprint(text), printed, "for {text:?}");
    }
}

#[test]
fn files_print_one_statement_per_line() {
    let text = "# comment\nlet s=(grade(word)+grade(line))/2\nparam w = -0.25\nreward=s*mask(c>0)\n\ncheck reward in [0,1]  # tail\n";
    let (file, diags) = parse(text);
    assert!(diags.is_empty());
    assert_eq!(
        print(&file),
        "let s = (grade(word) + grade(line)) / 2\nparam w = -0.25\nreward = s * mask(c > 0)\ncheck reward in [0, 1]\n"
    );
}

#[test]
fn numbers_read_back_exactly_and_stay_short() {
    let cases = [
        (0.0, "0"),
        (1.0, "1"),
        (0.5, "0.5"),
        (0.1, "0.1"),
        (1e-4, "0.0001"),
        (1e-7, "1e-7"),
        (123456.789, "123456.789"),
        (1e15, "1000000000000000"),
        (1e16, "1e16"),
        (2.5e300, "2.5e300"),
        (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
        (5e-324, "5e-324"),
        (f64::MAX, "1.7976931348623157e308"),
        (-0.25, "-0.25"),
    ];
    for (v, text) in cases {
        assert_eq!(format_number(v), text);
        let back: f64 = text.parse().expect("a number");
        assert_eq!(back.to_bits(), v.to_bits(), "{text}");
    }
}

#[test]
fn rewritten_trees_print_what_they_mean() {
    let at = Span::default();
    let num = |v: f64| Box::new(Expr { kind: ExprKind::Number(v), span: at });
    // A negative literal (never parsed, but a rewrite may build one) binds like a unary minus.
    let pow = Expr { kind: ExprKind::Binary { op: BinOp::Pow, lhs: num(-2.0), rhs: num(2.0) }, span: at };
    assert_eq!(print_expr(&pow), "(-2) ^ 2");
    let nan = Expr { kind: ExprKind::Number(f64::NAN), span: at };
    assert_eq!(print_expr(&nan), "(0 / 0)");
    let error = Expr { kind: ExprKind::Error, span: at };
    assert_eq!(print_expr(&error), "<error>");
}

#[test]
fn sample_reward_files_round_trip() {
    for (_, text) in crate::testing::SAMPLES {
        let (file, diags) = parse(text);
        assert!(diags.is_empty(), "{diags:?}\n{text}");
        let printed = print(&file);
        let (again, diags) = parse(&printed);
        assert!(diags.is_empty(), "{diags:?}\n{printed}");
        assert_eq!(again.without_spans(), file.without_spans());
        assert_eq!(print(&again), printed);
    }
}

// ---- random trees (also used by the parser's robustness tests) ----

const KEYWORDS: [&str; 6] = ["let", "param", "check", "in", "true", "false"];

pub(crate) fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,5}".prop_filter("keywords are not names", |n| !KEYWORDS.contains(&n.as_str()))
}

pub(crate) fn ident() -> impl Strategy<Value = Ident> {
    name().prop_map(|name| Ident { name, span: Span::default() })
}

pub(crate) fn callee() -> impl Strategy<Value = Ident> {
    prop_oneof![
        ident(),
        (prop_oneof![Just("group"), Just("batch")], name())
            .prop_map(|(g, f)| Ident { name: format!("{g}.{f}"), span: Span::default() }),
    ]
}

pub(crate) fn literal() -> impl Strategy<Value = f64> {
    use proptest::num::f64::{NORMAL, POSITIVE, SUBNORMAL, ZERO};
    prop_oneof![
        (0u32..1000).prop_map(f64::from),
        (0u32..1000).prop_map(|n| f64::from(n) / 8.0),
        POSITIVE | ZERO | NORMAL | SUBNORMAL,
    ]
    .prop_map(f64::abs)
}

pub(crate) fn expr() -> impl Strategy<Value = Expr> {
    let e = |kind| Expr { kind, span: Span::default() };
    let leaf = prop_oneof![
        literal().prop_map(move |n| e(ExprKind::Number(n))),
        any::<bool>().prop_map(move |b| e(ExprKind::Bool(b))),
        ident().prop_map(move |i| e(ExprKind::Name(i))),
    ];
    let ops = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Pow,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::And,
        BinOp::Or,
    ];
    leaf.prop_recursive(5, 48, 3, move |inner| {
        let b = |x: Expr| Box::new(x);
        prop_oneof![
            (prop_oneof![Just(UnOp::Neg), Just(UnOp::Not)], inner.clone())
                .prop_map(move |(op, x)| e(ExprKind::Unary { op, expr: b(x) })),
            (proptest::sample::select(ops.to_vec()), inner.clone(), inner.clone())
                .prop_map(move |(op, l, r)| e(ExprKind::Binary { op, lhs: b(l), rhs: b(r) })),
            (
                callee(),
                proptest::collection::vec(inner.clone(), 0..3),
                proptest::collection::vec((ident(), inner.clone()), 0..2)
            )
                .prop_map(move |(callee, args, named)| e(ExprKind::Call {
                    callee,
                    args,
                    named: named.into_iter().map(|(name, value)| NamedArg { name, value }).collect(),
                })),
            (inner.clone(), inner.clone(), inner).prop_map(move |(x, lo, hi)| e(ExprKind::In {
                expr: b(x),
                lo: b(lo),
                hi: b(hi)
            })),
        ]
    })
}

pub(crate) fn item() -> impl Strategy<Value = Item> {
    let it = |kind| Item { kind, span: Span::default() };
    prop_oneof![
        (ident(), expr()).prop_map(move |(name, value)| it(ItemKind::Def { name, value })),
        (ident(), expr()).prop_map(move |(name, value)| it(ItemKind::Let { name, value })),
        (ident(), literal(), any::<bool>()).prop_map(move |(name, v, neg)| it(ItemKind::Param {
            name,
            value: if neg { -v } else { v },
            value_span: Span::default(),
        })),
        expr().prop_map(move |cond| it(ItemKind::Check { cond })),
        (expr(), proptest::option::of(1u32..1000), "[a-z #()\\[\\]\"\\\\:é]{0,12}").prop_map(
            move |(cond, steps, message)| it(ItemKind::Alert {
                cond,
                steps: steps.map(|value| Count { value, span: Span::default() }),
                message,
                message_span: Span::default(),
            })
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn printing_then_parsing_gives_back_the_tree(items in proptest::collection::vec(item(), 0..6)) {
        let file = File { items };
        let printed = print(&file);
        let (parsed, diags) = parse(&printed);
        prop_assert!(diags.is_empty(), "{:?}\n{}", diags, printed);
        prop_assert_eq!(parsed.without_spans(), file.without_spans(), "{}", printed);
        prop_assert_eq!(print(&parsed), printed);
    }

    #[test]
    fn a_printed_expression_parses_back(e in expr()) {
        let printed = print_expr(&e);
        let (parsed, diags) = parse_expr(&printed);
        prop_assert!(diags.is_empty(), "{:?}\n{}", diags, printed);
        let parsed = parsed.expect("no diagnostics, so an expression");
        prop_assert_eq!(parsed.without_spans(), e.without_spans(), "{}", printed);
    }
}
