//! Unit tests of the parser: precedence and associativity, every statement
//! kind, layout (comments, CRLF, wrapping), error messages and recovery.

use super::{MAX_DEPTH, MAX_HEIGHT, parse, parse_expr};
use crate::ast::{BinOp, Expr, ExprKind, File, ItemKind, UnOp};
use crate::diag::Diagnostic;

/// A fully parenthesised S-expression of a tree, for comparing shapes.
fn sexp(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Number(n) => format!("{n}"),
        ExprKind::Bool(b) => format!("{b}"),
        ExprKind::Name(i) => i.name.clone(),
        ExprKind::Unary { op, expr } => {
            format!("({} {})", if *op == UnOp::Neg { "neg" } else { "not" }, sexp(expr))
        }
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", op.symbol(), sexp(lhs), sexp(rhs))
        }
        ExprKind::Call { callee, args, named } => {
            let mut args: Vec<String> = args.iter().map(sexp).collect();
            args.extend(named.iter().map(|n| format!("{}={}", n.name.name, sexp(&n.value))));
            format!("({}{})", callee.name, args.iter().map(|a| format!(" {a}")).collect::<String>())
        }
        ExprKind::In { expr, lo, hi } => format!("(in {} {} {})", sexp(expr), sexp(lo), sexp(hi)),
        ExprKind::Error => "ERROR".to_string(),
    }
}

fn expr(text: &str) -> String {
    match parse_expr(text) {
        (Some(e), d) if d.is_empty() => sexp(&e),
        (_, d) => panic!("{text:?} did not parse: {d:?}"),
    }
}

/// The messages of the diagnostics of a file, with the text each span covers.
fn errors(text: &str) -> Vec<(String, String)> {
    parse(text).1.iter().map(|d| (d.message.clone(), text[d.span.range()].to_string())).collect()
}

fn one_error(text: &str) -> Diagnostic {
    let (_, diags) = parse(text);
    assert_eq!(diags.len(), 1, "{text:?}: {diags:#?}");
    diags.into_iter().next().expect("one diagnostic")
}

fn clean(text: &str) -> File {
    let (file, diags) = parse(text);
    assert!(diags.is_empty(), "{text:?}: {diags:#?}");
    file
}

#[test]
fn precedence_follows_the_documented_table() {
    assert_eq!(expr("a || b && c"), "(|| a (&& b c))");
    assert_eq!(expr("a && b || c"), "(|| (&& a b) c)");
    assert_eq!(expr("a < b && c >= d"), "(&& (< a b) (>= c d))");
    assert_eq!(expr("a + b < c * d"), "(< (+ a b) (* c d))");
    assert_eq!(expr("a + b * c - d"), "(- (+ a (* b c)) d)");
    assert_eq!(expr("a - b - c"), "(- (- a b) c)");
    assert_eq!(expr("a / b / c"), "(/ (/ a b) c)");
    assert_eq!(expr("!a && b"), "(&& (not a) b)");
    assert_eq!(expr("-a * b"), "(* (neg a) b)");
    assert_eq!(expr("x + 1 in [0, 2 * y]"), "(in (+ x 1) 0 (* 2 y))");
    assert_eq!(expr("x in [0, 1] && y"), "(&& (in x 0 1) y)");
    assert_eq!(expr("(a + b) * c"), "(* (+ a b) c)");
}

#[test]
fn power_is_right_associative_and_tighter_than_unary_minus() {
    assert_eq!(expr("-x^2"), "(neg (^ x 2))");
    assert_eq!(expr("2^-1"), "(^ 2 (neg 1))");
    assert_eq!(expr("2^3^2"), "(^ 2 (^ 3 2))");
    assert_eq!(expr("-2^-x^2"), "(neg (^ 2 (neg (^ x 2))))");
    assert_eq!(expr("(-2)^2"), "(^ (neg 2) 2)");
    assert_eq!(expr("a * b^c"), "(* a (^ b c))");
    assert_eq!(expr("--x"), "(neg (neg x))");
    assert_eq!(expr("!!b"), "(not (not b))");
}

#[test]
fn atoms_numbers_calls_and_dotted_calls() {
    assert_eq!(expr("1 + 0.5 + .5 + 5. + 1e-4 + 2.5E+3"), "(+ (+ (+ (+ (+ 1 0.5) 0.5) 5) 0.0001) 2500)");
    assert_eq!(expr("true && !false"), "(&& true (not false))");
    assert_eq!(expr("grade(word, 0.5)"), "(grade word 0.5)");
    assert_eq!(expr("group.mean(reward)"), "(group.mean reward)");
    assert_eq!(expr("batch.count()"), "(batch.count)");
    assert_eq!(expr("min(c / 4, 1, x_2)"), "(min (/ c 4) 1 x_2)");
    assert_eq!(expr("sqrt (x)"), "(sqrt x)");
    assert_eq!(expr("-1"), "(neg 1)");
}

#[test]
fn spans_cover_the_source_text() {
    let text = "reward = grade(word) * mask(c > 0)";
    let file = clean(text);
    let item = &file.items[0];
    assert_eq!(&text[item.span.range()], text);
    let ItemKind::Def { name, value } = &item.kind else { panic!("not a def: {item:?}") };
    assert_eq!(&text[name.span.range()], "reward");
    assert_eq!(&text[value.span.range()], "grade(word) * mask(c > 0)");
    let ExprKind::Binary { lhs, rhs, .. } = &value.kind else { panic!("not binary") };
    assert_eq!(&text[lhs.span.range()], "grade(word)");
    assert_eq!(&text[rhs.span.range()], "mask(c > 0)");
    // Parentheses leave no node but widen the span of what they enclose.
    let (e, _) = parse_expr(" (a + b) ");
    assert_eq!(e.map(|e| e.span.range()), Some(1..8));
    let (e, _) = parse_expr("group.std(x)");
    let Some(ExprKind::Call { callee, .. }) = e.map(|e| e.kind) else { panic!("not a call") };
    assert_eq!(callee.span.range(), 0..9);
}

#[test]
fn every_statement_kind() {
    let text = "reward = grade(word)\nadv = reward\nadvantage = adv\nlet s = 1\nparam w = -0.25\nparam k = 3\ncheck reward in [0, 1]\nfoo = 2\n";
    let file = clean(text);
    let kinds: Vec<String> = file
        .items
        .iter()
        .map(|item| match &item.kind {
            ItemKind::Def { name, value } => format!("def {} {}", name.name, sexp(value)),
            ItemKind::Let { name, value } => format!("let {} {}", name.name, sexp(value)),
            ItemKind::Param { name, value, value_span } => {
                format!("param {} {value} `{}`", name.name, &text[value_span.range()])
            }
            ItemKind::Check { cond } => format!("check {}", sexp(cond)),
            ItemKind::Alert { cond, steps, message, .. } => {
                format!("alert {} {:?} {message:?}", sexp(cond), steps.as_ref().map(|c| c.value))
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "def reward (grade word)",
            "def adv reward",
            "def advantage adv",
            "let s 1",
            "param w -0.25 `-0.25`",
            "param k 3 `3`",
            "check (in reward 0 1)",
            "def foo 2",
        ]
    );
}

#[test]
fn comments_blank_lines_and_crlf() {
    let text = "# header\r\n\r\nreward = a # trailing\r\n   \r\n\tcheck a >= 0\r\n# end";
    let file = clean(text);
    assert_eq!(file.items.len(), 2);
    assert_eq!(&text[file.items[0].span.range()], "reward = a");
    assert_eq!(&text[file.items[1].span.range()], "check a >= 0");
    assert!(clean("").items.is_empty());
    assert!(clean("# only\n\n# comments").items.is_empty());
}

#[test]
fn formulas_wrap_inside_brackets() {
    let text = "reward = (grade(word)   # file level\n        + grade(line)) / 2\ncheck reward in [\n  0,\n  1\n]\nlet m = max(a,\n b)\n";
    let file = clean(text);
    assert_eq!(file.items.len(), 3);
    let ItemKind::Def { value, .. } = &file.items[0].kind else { panic!() };
    assert_eq!(sexp(value), "(/ (+ (grade word) (grade line)) 2)");
    // Outside brackets a newline ends the statement.
    let found = errors("reward = a +\n b");
    assert_eq!(found[0], ("expected an expression after `+`".to_string(), "".to_string()));
    assert_eq!(found[1].1, "b");
}

#[test]
fn keyword_arguments_follow_the_positional_ones() {
    assert_eq!(expr("group.mean(reward, where = ok > 0)"), "(group.mean reward where=(> ok 0))");
    assert_eq!(expr("group.count(where = ok == 1 && !cut)"), "(group.count where=(&& (== ok 1) (not cut)))");
    assert_eq!(expr("batch.sum(x,where=b)"), "(batch.sum x where=b)");
    // `==` after a name is a comparison, not a keyword argument.
    assert_eq!(expr("mask(ok == 1)"), "(mask (== ok 1))");
    // A mask may sit on a line of its own inside the call.
    let text = "adv = (reward - group.mean(reward,\n    where = ok > 0)) / 2\ncheck adv >= -1\n";
    let file = clean(text);
    assert_eq!(file.items.len(), 2);
    let ItemKind::Def { value, .. } = &file.items[0].kind else { panic!() };
    assert_eq!(sexp(value), "(/ (- reward (group.mean reward where=(> ok 0))) 2)");
    let ExprKind::Binary { lhs, .. } = &value.kind else { panic!("not binary") };
    let ExprKind::Binary { rhs: mean, .. } = &lhs.kind else { panic!("not binary") };
    let ExprKind::Call { named, .. } = &mean.kind else { panic!("not a call") };
    assert_eq!(&text[named[0].name.span.range()], "where");
    assert_eq!(&text[named[0].value.span.range()], "ok > 0");
    assert_eq!(
        errors("reward = group.mean(where = ok > 0, reward)\n"),
        [("a positional argument cannot follow the keyword argument `where`".to_string(), "reward".to_string())]
    );
    assert_eq!(errors("reward = group.mean(reward, where = )\n")[0].0, "expected an expression after `=`, found `)`");
}

#[test]
fn keywords_are_not_names() {
    assert_eq!(one_error("let in = 3").message, "`in` is a keyword and cannot be used as a name");
    assert_eq!(one_error("reward = let + 1").message, "expected an expression after `=`, found keyword `let`");
    assert_eq!(expr("inside + index + lettuce"), "(+ (+ inside index) lettuce)");
}

#[test]
fn messages_for_realistic_mistakes() {
    let cases: &[(&str, &str, &str)] = &[
        ("reward = grade(word) * (c > 0", "unclosed `(`", "("),
        ("advantage = adv * sqrt(min(c / 4, 1)", "unclosed `(`", "("),
        ("let = 3", "expected a name after `let`, found `=`", "="),
        ("check reward in [0, 1", "expected `]` to close the range", ""),
        ("reward == grade(word)", "expected `=` after `reward`, found `==`", "=="),
        ("check c = 0", "`=` in an expression; did you mean `==`?", "="),
        ("let x 3", "expected `=` after `let x`, found `3`", "3"),
        ("reward = 2 *", "expected an expression after `*`", ""),
        ("reward = 2 * )", "expected an expression after `*`, found `)`", ")"),
        ("reward = a)", "unexpected `)`", ")"),
        ("reward = a]", "unexpected `]`", "]"),
        ("reward = $x", "unknown character `$`", "$"),
        ("reward = a @ b", "unknown character `@`", "@"),
        ("check a < b < c", "comparison operators cannot be chained", "<"),
        ("check 0 <= x in [0, 1]", "comparison operators cannot be chained", "in"),
        ("grade(word) * 2", "a statement must start with `let`, `param`, `check` or `NAME =`", "grade"),
        ("reward = a & b", "`&` is not an operator; did you mean `&&`?", "&"),
        ("reward = a | b", "`|` is not an operator; did you mean `||`?", "|"),
        ("reward = x ** 2", "`**` is not an operator", "**"),
        ("reward = 2c", "invalid number `2c`", "2c"),
        ("reward = 1e", "invalid number `1e`", "1e"),
        ("reward = 1e999", "number `1e999` is too large for a 64-bit float", "1e999"),
        ("reward = a b", "expected an operator or the end of the statement, found `b`", "b"),
        ("reward = f(a b)", "expected `,` or `)` after the argument, found `b`", "b"),
        ("reward = f(a, )", "expected an expression after `,`, found `)`", ")"),
        ("reward = ()", "empty parentheses `()` are not an expression", "()"),
        ("check x in [0 1]", "expected `,` between the bounds of the range, found `1`", "1"),
        ("check x in [0]", "a range needs two bounds", "]"),
        ("check x in 0, 1", "expected `[` after `in`, found `0`", "0"),
        ("reward = group.mean", "expected `(` after `group.mean`", "group.mean"),
        ("reward = group.", "expected a function name after `.`", ""),
        ("param w = abc", "expected a number after `=`, found `abc`", "abc"),
        ("param w = 1 + 2", "a `param` value must be a single number, found `+`", "+"),
        ("param = 1", "expected a name after `param`, found `=`", "="),
        ("check", "expected a condition after `check`", ""),
        ("reward =", "expected an expression after `=`", ""),
        ("reward grade(word)", "expected `=` after `reward`, found `grade`", "grade"),
        ("Let x = 3", "a statement must start with `let`, `param`, `check` or `NAME =`", "Let"),
        ("reward = a => b", "`=>` is not an operator; did you mean `>=`?", "=>"),
        ("reward = a and b", "expected an operator or the end of the statement, found `and`", "and"),
        ("reward = a × b", "unknown character `×`", "×"),
        ("reward = (a, b)", "expected `)` or an operator, found `,`", ","),
        ("reward = x in [0, 1)", "expected `]` to close the range, found `)`", ")"),
        ("reward = !=", "expected an expression after `=`, found `!=`", "!="),
        ("reward = a\u{a0}+ b", "unknown character `\\u{a0}`", "\u{a0}"),
        ("reward = 1 if c else 0", "expected an operator or the end of the statement, found `if`", "if"),
        ("check x in [0..1]", "invalid number `0..1`", "0..1"),
    ];
    for (text, message, covered) in cases {
        let d = one_error(text);
        assert_eq!((d.message.as_str(), &text[d.span.range()]), (*message, *covered), "for {text:?}");
    }
}

#[test]
fn unclosed_paren_points_at_the_paren_and_says_where_it_ran_out() {
    let text = "reward = grade(word)\nadvantage = adv * sqrt(min(c / 4, 1)\ncheck advantage * adv >= 0\n";
    let (file, diags) = parse(text);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    assert_eq!(d.message, "unclosed `(`");
    assert_eq!(d.span.start as usize, text.find("sqrt(").expect("sqrt") + 4);
    assert_eq!(d.help.as_deref(), Some("add `)` to close it: the statement ends at line 2, column 37"));
    // The next line is still parsed, and the broken definition keeps its name.
    assert_eq!(file.items.len(), 3);
    let ItemKind::Def { name, value } = &file.items[1].kind else { panic!() };
    assert_eq!((name.name.as_str(), &value.kind), ("advantage", &ExprKind::Error));
    assert!(matches!(file.items[2].kind, ItemKind::Check { .. }));
}

#[test]
fn recovery_reports_every_broken_statement() {
    let text = "\
let score = (grade(word) + grade(line) / 2
reward = score * $
param w = x
let = 3
check reward in [0, 1
reward = score
check c = 0
";
    let found: Vec<String> = errors(text).into_iter().map(|(m, _)| m).collect();
    assert_eq!(
        found,
        [
            "unclosed `(`",
            "unknown character `$`",
            "expected a number after `=`, found `x`",
            "expected a name after `let`, found `=`",
            "expected `]` to close the range",
            "`=` in an expression; did you mean `==`?",
        ]
    );
    let (file, _) = parse(text);
    let names: Vec<String> = file
        .items
        .iter()
        .map(|i| match &i.kind {
            ItemKind::Def { name, value } | ItemKind::Let { name, value } => {
                format!("{} {}", name.name, sexp(value))
            }
            ItemKind::Param { name, .. } => format!("param {}", name.name),
            ItemKind::Check { cond } | ItemKind::Alert { cond, .. } => format!("check {}", sexp(cond)),
        })
        .collect();
    assert_eq!(names, ["score ERROR", "reward ERROR", "w ERROR", "check ERROR", "reward score", "check ERROR"]);
}

#[test]
fn parse_expr_takes_one_formula() {
    assert_eq!(expr("grade(word)*mask(c>0)"), "(* (grade word) (mask (> c 0)))");
    assert_eq!(expr("a +\n b"), "(+ a b)");
    let (e, d) = parse_expr("   ");
    assert!(e.is_none());
    assert_eq!(d[0].message, "expected an expression");
    let (e, d) = parse_expr("a +");
    assert!(e.is_none());
    assert_eq!(d[0].message, "expected an expression after `+`");
}

/// Deep nesting must end in a diagnostic, not a stack overflow. This runs on
/// the test harness's own thread (2 MiB stack) on purpose.
#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let n = 10_000;
    let inputs = [
        format!("reward = {}x{}", "(".repeat(n), ")".repeat(n)),
        format!("reward = {}x", "-".repeat(n)),
        format!("reward = {}x", "!".repeat(n)),
        format!("reward = {}2", "2^".repeat(n)),
        format!("reward = {}x{}", "f(".repeat(n), ")".repeat(n)),
        format!("check {}x{}", "x in [".repeat(n), ", 1]".repeat(n)),
        format!("reward = {}x", "1 + ".repeat(n)),
        format!("reward = {}x", "1 * -".repeat(n)),
        format!("reward = {}", "(".repeat(n)),
        format!("reward = {}", "[".repeat(n)),
    ];
    for text in &inputs {
        let (_, diags) = parse(text);
        assert_eq!(diags.len(), 1, "{}: {diags:?}", &text[..40]);
        let first = &diags[0];
        assert!(
            first.message == "expression nested too deeply" || text.ends_with(['(', '[']),
            "{}: {first:?}",
            &text[..40]
        );
    }
}

#[test]
fn nesting_up_to_the_limit_parses() {
    let depth = MAX_DEPTH;
    clean(&format!("reward = {}x{}", "(".repeat(depth), ")".repeat(depth)));
    clean(&format!("reward = {}x{}", "f(".repeat(depth), ")".repeat(depth)));
    clean(&format!("reward = {}x", "-".repeat(depth)));
    let (_, d) = parse(&format!("reward = {}x{}", "(".repeat(depth + 1), ")".repeat(depth + 1)));
    assert_eq!(d[0].message, "expression nested too deeply");
    // Chains are loops, not recursion: they may grow to the height limit.
    clean(&format!("reward = {}x", "x + ".repeat(MAX_HEIGHT - 1)));
    let (_, d) = parse(&format!("reward = {}x", "x + ".repeat(MAX_HEIGHT)));
    assert_eq!(d[0].message, "expression nested too deeply");
}

#[test]
fn a_megabyte_parses_in_linear_time() {
    let line = "let s_1 = (grade(word) + grade(line)) / 2 * mask(c > 0) - group.mean(x) ^ 2 # note\n";
    let text = line.repeat(1_000_000 / line.len() + 1);
    let start = std::time::Instant::now();
    let (file, diags) = parse(&text);
    let elapsed = start.elapsed();
    assert!(diags.is_empty());
    assert_eq!(file.items.len(), text.lines().count());
    // Far above the ~0.1 s this takes even unoptimised; a quadratic parser
    // would take minutes.
    assert!(elapsed.as_secs() < 20, "{elapsed:?}");

    // One megabyte of errors is linear too (each is found and reported once).
    let bad = "reward = (a + $\n".repeat(60_000);
    let (_, diags) = parse(&bad);
    assert_eq!(diags.len(), 60_000);

    // One statement a megabyte long, wrapped inside a call.
    let long = format!("reward = max({}0)", "a, ".repeat(330_000));
    let (file, diags) = parse(&long);
    assert!(diags.is_empty());
    let ItemKind::Def { value, .. } = &file.items[0].kind else { panic!() };
    let ExprKind::Call { args, .. } = &value.kind else { panic!() };
    assert_eq!(args.len(), 330_001);
}

#[test]
fn operators_cover_every_binop() {
    for op in [
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
    ] {
        assert_eq!(expr(&format!("a {} b", op.symbol())), format!("({} a b)", op.symbol()));
    }
}
