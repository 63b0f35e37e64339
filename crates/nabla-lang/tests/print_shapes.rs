//! Property test of the printer's parentheses: a random named-core
//! expression (not necessarily well typed) is printed, parsed back, and the
//! parsed tree must have the same shape as the expression printed. Shapes
//! are compared as fully parenthesised strings, with the printer's sugar
//! (`&&`, `||`, `fst`, negative literals) spelt the way the parser reads it.

use nabla_lang::core::Lit;
use nabla_lang::core::named::{Def, Expr, Pat, Poly, PrimAt, Program};
use nabla_lang::pretty::format_real;
use nabla_lang::pretty::program::print_program;
use nabla_lang::prim::Prim;
use nabla_lang::stack::run_with_stack;
use nabla_lang::syntax::ast::{self, BinOp, ExprKind, Pattern};
use nabla_lang::syntax::parser::{IdGen, parse_program};
use nabla_lang::types::Type;
use proptest::prelude::*;

fn pat_shape(p: &Pat) -> String {
    match p {
        Pat::Var(n) => n.clone(),
        Pat::Wild => "_".into(),
        Pat::Tuple(ps) => format!(
            "<{}>",
            ps.iter().map(pat_shape).collect::<Vec<_>>().join(" ")
        ),
    }
}

fn ast_pat_shape(p: &Pattern) -> String {
    match p {
        Pattern::Var(id) => id.name.clone(),
        Pattern::Wild(_) => "_".into(),
        Pattern::Unit(_) => "<>".into(),
        Pattern::Tuple(ps, _) => format!(
            "<{}>",
            ps.iter().map(ast_pat_shape).collect::<Vec<_>>().join(" ")
        ),
        Pattern::Annot(p, _, _) => ast_pat_shape(p),
        Pattern::Record { fields, .. } => list(
            "record",
            fields
                .iter()
                .map(|(f, p)| format!("{}={}", f.name, ast_pat_shape(p))),
        ),
    }
}

fn list(head: &str, items: impl IntoIterator<Item = String>) -> String {
    let mut s = format!("({head}");
    for i in items {
        s.push(' ');
        s.push_str(&i);
    }
    s.push(')');
    s
}

fn lit_shape(l: &Lit) -> String {
    match l {
        Lit::Unit => "()".into(),
        Lit::Bool(b) => b.to_string(),
        Lit::Int(n) if *n < 0 => list("neg", [n.unsigned_abs().to_string()]),
        Lit::Int(n) => n.to_string(),
        Lit::Real(x) if x.is_sign_negative() => list("neg", [format_real(-x)]),
        Lit::Real(x) => format_real(*x),
    }
}

/// The shape of a named-core expression, as the parser should read its print.
fn shape(e: &Expr) -> String {
    match e {
        Expr::Var(n) => n.clone(),
        Expr::Lit(l) => lit_shape(l),
        Expr::Lam(ps, b) => list("fun", ps.iter().map(pat_shape).chain([shape(b)])),
        Expr::App(f, args) => {
            // The parser's spine is flat: `f a b` and `(f a) b` are one call.
            let (head, mut all) = spine(f);
            all.extend(args.iter().map(shape));
            app_shape(head, all)
        }
        Expr::Let(p, v, b) => list("let", [pat_shape(p), shape(v), shape(b)]),
        Expr::LetRec {
            name,
            params,
            value,
            body,
        } => list(
            "letrec",
            [name.clone()]
                .into_iter()
                .chain(params.iter().map(pat_shape))
                .chain([shape(value), shape(body)]),
        ),
        Expr::Tuple(es) => list("tuple", es.iter().map(shape)),
        Expr::Vector(es) => list("vec", es.iter().map(shape)),
        Expr::Proj { tuple, index, .. } => app_shape(
            if *index == 0 { "fst" } else { "snd" }.into(),
            [shape(tuple)],
        ),
        Expr::Inl(x) => list("inl", [shape(x)]),
        Expr::Inr(x) => list("inr", [shape(x)]),
        Expr::Case {
            scrutinee,
            left,
            right,
        } => list(
            "case",
            [
                shape(scrutinee),
                pat_shape(&left.0),
                shape(&left.1),
                pat_shape(&right.0),
                shape(&right.1),
            ],
        ),
        Expr::If(c, a, b) => list("if", [shape(c), shape(a), shape(b)]),
        Expr::Prim(p, args) => {
            let info = p.prim.info();
            match (p.prim, info.named) {
                (Prim::Index, _) => list("idx", args.iter().map(shape)),
                (Prim::Neg, _) => list("neg", args.iter().map(shape)),
                (Prim::Deref, _) => list("deref", args.iter().map(shape)),
                (_, false) => list(info.name, args.iter().map(shape)),
                (_, true) if args.is_empty() => info.name.to_string(),
                (_, true) => app_shape(info.name.into(), args.iter().map(shape)),
            }
        }
        Expr::PrimRef(p) => p.prim.info().name.to_string(),
        Expr::Bind(p, m, rest) => list("bind", [pat_shape(p), shape(m), shape(rest)]),
        Expr::RunDelta(a, b) => list("runDelta", [shape(a), shape(b)]),
        Expr::Poly(p, t) => format!("{}@{t:?}", p.name()),
    }
}

/// The head and arguments of a call as the parser sees it.
fn spine(e: &Expr) -> (String, Vec<String>) {
    match e {
        Expr::App(f, args) => {
            let (head, mut all) = spine(f);
            all.extend(args.iter().map(shape));
            (head, all)
        }
        Expr::Prim(p, args) if p.prim.info().named && !args.is_empty() => (
            p.prim.info().name.to_string(),
            args.iter().map(shape).collect(),
        ),
        Expr::Proj {
            tuple,
            index,
            arity: 2,
        } => (
            if *index == 0 { "fst" } else { "snd" }.into(),
            vec![shape(tuple)],
        ),
        _ => (shape(e), Vec::new()),
    }
}

fn app_shape(head: String, args: impl IntoIterator<Item = String>) -> String {
    list("app", [head].into_iter().chain(args))
}

fn type_of(te: &ast::TypeExpr) -> Type {
    match te {
        ast::TypeExpr::Name(id) => match id.name.as_str() {
            "Int" => Type::Int,
            "Bool" => Type::Bool,
            _ => Type::Real,
        },
        ast::TypeExpr::Unit(_) => Type::Unit,
        ast::TypeExpr::Tuple(ts, _) => Type::Tuple(ts.iter().map(type_of).collect()),
        ast::TypeExpr::Sum(a, b, _) => Type::Sum(Box::new(type_of(a)), Box::new(type_of(b))),
        ast::TypeExpr::Vec(a, _) => Type::Vec(Box::new(type_of(a))),
        ast::TypeExpr::Fun(a, b, _) => Type::fun(type_of(a), type_of(b)),
        ast::TypeExpr::Con(c, args, _) => Type::Con(*c, args.iter().map(type_of).collect()),
        ast::TypeExpr::Record(fields, _) => Type::record(
            fields
                .iter()
                .map(|(f, t)| (f.name.clone(), type_of(t)))
                .collect(),
        ),
    }
}

/// The shape of a parsed expression.
fn ast_shape(e: &ast::Expr) -> String {
    match &e.kind {
        ExprKind::Var(n) => n.clone(),
        ExprKind::Int(n) => n.to_string(),
        ExprKind::Real(x) => format_real(*x),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Unit => "()".into(),
        ExprKind::Tuple(es) => list("tuple", es.iter().map(ast_shape)),
        ExprKind::Vector(es) => list("vec", es.iter().map(ast_shape)),
        ExprKind::Lam(ps, b) => list("fun", ps.iter().map(ast_pat_shape).chain([ast_shape(b)])),
        ExprKind::App(..) => {
            let mut args = Vec::new();
            let mut head = e;
            while let ExprKind::App(f, x) = &head.kind {
                args.push(ast_shape(x));
                head = f;
            }
            args.reverse();
            app_shape(ast_shape(head), args)
        }
        ExprKind::Let(p, v, b) => list("let", [ast_pat_shape(p), ast_shape(v), ast_shape(b)]),
        ExprKind::Trace(l, x) => list("trace", [format!("{l:?}"), ast_shape(x)]),
        ExprKind::LetFun { rec, binding, body } => {
            if *rec {
                list(
                    "letrec",
                    [binding.name.name.clone()]
                        .into_iter()
                        .chain(binding.params.iter().map(ast_pat_shape))
                        .chain([ast_shape(&binding.body), ast_shape(body)]),
                )
            } else {
                let f = list(
                    "fun",
                    binding
                        .params
                        .iter()
                        .map(ast_pat_shape)
                        .chain([ast_shape(&binding.body)]),
                );
                list("let", [binding.name.name.clone(), f, ast_shape(body)])
            }
        }
        ExprKind::If(c, a, b) => list("if", [ast_shape(c), ast_shape(a), ast_shape(b)]),
        ExprKind::Inl(x) => list("inl", [ast_shape(x)]),
        ExprKind::Inr(x) => list("inr", [ast_shape(x)]),
        ExprKind::Match {
            scrutinee,
            left,
            right,
        } => list(
            "case",
            [
                ast_shape(scrutinee),
                ast_pat_shape(&left.0),
                ast_shape(&left.1),
                ast_pat_shape(&right.0),
                ast_shape(&right.1),
            ],
        ),
        ExprKind::Binary(BinOp::And, a, b) => {
            list("if", [ast_shape(a), ast_shape(b), "false".into()])
        }
        ExprKind::Binary(BinOp::Or, a, b) => {
            list("if", [ast_shape(a), "true".into(), ast_shape(b)])
        }
        ExprKind::Binary(op, a, b) => list(op.symbol(), [ast_shape(a), ast_shape(b)]),
        ExprKind::Neg(a) => list("neg", [ast_shape(a)]),
        ExprKind::Index(v, i) => list("idx", [ast_shape(v), ast_shape(i)]),
        ExprKind::Annot(x, _) => ast_shape(x),
        ExprKind::Bind(p, m, rest) => {
            list("bind", [ast_pat_shape(p), ast_shape(m), ast_shape(rest)])
        }
        ExprKind::RunDelta(a, b) => list("runDelta", [ast_shape(a), ast_shape(b)]),
        ExprKind::Poly(p, t) => format!("{}@{:?}", p.name(), type_of(t)),
        ExprKind::Deref(a) => list("deref", [ast_shape(a)]),
        ExprKind::Record(fields) => list(
            "record",
            fields
                .iter()
                .map(|(f, x)| format!("{}={}", f.name, ast_shape(x))),
        ),
        ExprKind::Field(r, f) => list("field", [ast_shape(r), f.name.clone()]),
        ExprKind::Update(r, fields) => list(
            "update",
            [ast_shape(r)].into_iter().chain(
                fields
                    .iter()
                    .map(|(f, x)| format!("{}={}", f.name, ast_shape(x))),
            ),
        ),
    }
}

// ---- Random expressions ----

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "x", "y", "f", "k"]).prop_map(str::to_string)
}

fn pat() -> impl Strategy<Value = Pat> {
    let leaf = prop_oneof![name().prop_map(Pat::Var), Just(Pat::Wild)];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner, 2..4).prop_map(Pat::Tuple),
            Just(Pat::Tuple(vec![])),
        ]
    })
}

fn lit() -> impl Strategy<Value = Expr> {
    prop_oneof![
        (-3i64..40).prop_map(|n| Expr::Lit(Lit::Int(n))),
        prop::sample::select(vec![0.5, -2.5, 1e20, 3.0, -0.0, 1.5e-10])
            .prop_map(|x| Expr::Lit(Lit::Real(x))),
        any::<bool>().prop_map(|b| Expr::Lit(Lit::Bool(b))),
        Just(Expr::Lit(Lit::Unit)),
    ]
}

const BINARY: &[Prim] = &[
    Prim::Add,
    Prim::Sub,
    Prim::Mul,
    Prim::Div,
    Prim::Pow,
    Prim::Lt,
    Prim::Eq,
    Prim::AddTo,
    Prim::Max,
];

const UNARY: &[Prim] = &[Prim::Neg, Prim::Deref, Prim::Sin, Prim::Pure, Prim::DVar];

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        3 => name().prop_map(Expr::Var),
        2 => lit(),
        1 => Just(Expr::Prim(PrimAt::plain(Prim::DZero), vec![])),
        1 => Just(Expr::Poly(Poly::InitVars, Type::Vec(Box::new(Type::Real)))),
        1 => Just(Expr::Poly(Poly::LookupDual, Type::Tuple(vec![Type::Real, Type::Int]))),
    ];
    leaf.prop_recursive(5, 48, 4, |e| {
        let e2 = || (e.clone(), e.clone());
        prop_oneof![
            (prop::sample::select(BINARY), e.clone(), e.clone())
                .prop_map(|(p, a, b)| Expr::Prim(PrimAt::plain(p), vec![a, b])),
            (prop::sample::select(UNARY), e.clone())
                .prop_map(|(p, a)| Expr::Prim(PrimAt::plain(p), vec![a])),
            e2().prop_map(|(v, i)| Expr::Prim(PrimAt::plain(Prim::Index), vec![v, i])),
            (e.clone(), prop::collection::vec(e.clone(), 1..3))
                .prop_map(|(f, args)| Expr::App(Box::new(f), args)),
            (pat(), e.clone(), e.clone()).prop_map(|(p, v, b)| Expr::Let(
                p,
                Box::new(v),
                Box::new(b)
            )),
            e2().prop_map(|(a, b)| Expr::Let(Pat::Tuple(vec![]), Box::new(a), Box::new(b))),
            (
                name(),
                prop::collection::vec(pat(), 1..3),
                e.clone(),
                e.clone()
            )
                .prop_map(|(name, params, value, body)| Expr::LetRec {
                    name,
                    params,
                    value: Box::new(value),
                    body: Box::new(body),
                }),
            (prop::collection::vec(pat(), 1..3), e.clone())
                .prop_map(|(ps, b)| Expr::Lam(ps, Box::new(b))),
            (e.clone(), e.clone(), e.clone()).prop_map(|(c, a, b)| Expr::If(
                Box::new(c),
                Box::new(a),
                Box::new(b)
            )),
            e2().prop_map(|(c, a)| Expr::If(
                Box::new(c),
                Box::new(a),
                Box::new(Expr::Lit(Lit::Bool(false)))
            )),
            e2().prop_map(|(c, b)| Expr::If(
                Box::new(c),
                Box::new(Expr::Lit(Lit::Bool(true))),
                Box::new(b)
            )),
            (e.clone(), pat(), e.clone(), pat(), e.clone()).prop_map(|(s, p1, e1, p2, e2)| {
                Expr::Case {
                    scrutinee: Box::new(s),
                    left: (p1, Box::new(e1)),
                    right: (p2, Box::new(e2)),
                }
            }),
            prop::collection::vec(e.clone(), 2..4).prop_map(Expr::Tuple),
            prop::collection::vec(e.clone(), 0..3).prop_map(Expr::Vector),
            (e.clone(), 0u32..2).prop_map(|(t, index)| Expr::Proj {
                tuple: Box::new(t),
                index,
                arity: 2
            }),
            e.clone().prop_map(|x| Expr::Inl(Box::new(x))),
            e.clone().prop_map(|x| Expr::Inr(Box::new(x))),
            (pat(), e.clone(), e.clone()).prop_map(|(p, m, r)| Expr::Bind(
                p,
                Box::new(m),
                Box::new(r)
            )),
            e2().prop_map(|(a, b)| Expr::RunDelta(Box::new(a), Box::new(b))),
        ]
    })
}

/// Prints `e` as `def main`, parses it back and compares shapes.
fn check(e: Expr) -> Result<(), TestCaseError> {
    let outcome = run_with_stack(move || {
        let program = Program {
            defs: vec![Def {
                name: "main".into(),
                params: vec![],
                body: e.clone(),
                ty: None,
            }],
        };
        let printed = print_program(&program);
        let (parsed, errors) = parse_program(&printed, 0, &mut IdGen::new());
        if !errors.is_empty() {
            return Err(format!("{:?}\n{printed}", errors[0]));
        }
        let Some(d) = parsed.defs.first() else {
            return Err(format!("no definition\n{printed}"));
        };
        let (want, got) = (shape(&e), ast_shape(&d.binding.body));
        if want != got {
            return Err(format!("printed\n{printed}\nwant {want}\ngot  {got}"));
        }
        Ok(())
    })
    .expect("thread");
    prop_assert!(outcome.is_ok(), "{}", outcome.err().unwrap_or_default());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
    ))]

    #[test]
    fn printed_expressions_parse_back_to_the_same_tree(e in expr()) {
        check(e)?;
    }
}
