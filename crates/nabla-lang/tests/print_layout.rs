//! Snapshots of printed programs, showing the printer's layout rules (see
//! `crates/nabla-lang/src/pretty/program.rs`): `def` bodies, `let` chains,
//! long lambdas, `match`, nested `if`s, and the translated dialect's `do`
//! blocks, `runDelta` and polytypic helpers built by hand in the named core.

use nabla_lang::core::lower::lower_program;
use nabla_lang::core::named::{
    self, Def, Expr, Pat, Poly, PrimAt, Program, app, bind, int, lam, let_, pair, prim, real,
    real_op, var,
};
use nabla_lang::driver::Session;
use nabla_lang::pretty::program::print_program;
use nabla_lang::prim::Prim;
use nabla_lang::syntax::parser::{IdGen, parse_program};
use nabla_lang::types::{Type, check_program};

/// Parses, checks, lowers and prints `src`.
fn reprint(src: &str) -> String {
    let (prog, errors) = parse_program(src, 0, &mut IdGen::new());
    assert!(errors.is_empty(), "{errors:?}");
    let checked = check_program(&prog.defs).expect("checks");
    print_program(&lower_program(&prog.defs, &checked).expect("lowers"))
}

/// Runs a printed program's `main`.
fn run(printed: &str) -> String {
    let mut s = Session::new();
    if let Err(ds) = s.load("printed.nabla", printed) {
        panic!("{}\n{printed}", s.render(&ds));
    }
    match s.run_main() {
        Ok(v) => v,
        Err(ds) => panic!("{}\n{printed}", s.render(&ds)),
    }
}

fn def(name: &str, params: Vec<Pat>, body: Expr) -> Def {
    Def {
        name: name.into(),
        params,
        body,
        ty: None,
    }
}

fn p(prim_: Prim, args: Vec<Expr>) -> Expr {
    prim(prim_, args)
}

#[test]
fn let_chains_print_one_binding_per_line() {
    let printed = reprint(
        "def softmax v = let m = fold max v[0] v in let e = map (fun x -> exp (x - m)) v in \
         let z = sum e in map (fun x -> x / z) e\n\
         def short x = let y = x * x in y + 1.0\n\
         def long_single x = let y = sin x * cos x + tan x * exp x in y * y + y * 2.0 + log y + 1.0\n\
         def nested x = (let a = x + 1.0 in let b = a * a in b, let rec go n = if n == 0 then x else go (n - 1) in go 3)\n\
         def main = (softmax [1.0, 2.0], short 2.0, nested 1.0)",
    );
    insta::assert_snapshot!(printed);
    run(&printed);
}

#[test]
fn long_lambdas_break_after_the_arrow() {
    let printed = reprint(
        "def weights = [0.25, 0.5, 0.75, 1.0]\n\
         def loss v = sum (map (fun w -> let a = w * v[0] + (1.0 - w) * v[1] in a * a * w + sin a * cos a + exp (-a)) weights)\n\
         def compose_all fs = fold (fun acc f -> fun x -> f (acc x)) (fun x -> x) fs\n\
         def main = (loss [1.0, 2.0], compose_all [sin, cos] 0.5, grad loss [1.0, 2.0])",
    );
    insta::assert_snapshot!(printed);
    run(&printed);
}

#[test]
fn match_and_nested_ifs() {
    let printed = reprint(
        "def classify x = if x < 0.0 then inl (-x) else if x < 1.0 then inr (x, 0) else if x < 10.0 then inr (x, 1) else inr (x, 2)\n\
         def size_of s = match s with | inl r -> r | inr (a, n) -> a * real n\n\
         def describe s = match s with | inl r -> (match classify r with | inl a -> a | inr (b, _) -> b) | inr (a, n) -> if n == 0 && a > 0.5 || n > 1 then a else 0.0\n\
         def sign x = if x < 0.0 then -1.0 else if x > 0.0 then 1.0 else 0.0\n\
         def main = (map size_of (map classify [-2.0, 0.5, 5.0, 50.0]), describe (inl 2.0), sign (-3.0))",
    );
    insta::assert_snapshot!(printed);
    run(&printed);
}

#[test]
fn precedence_in_context() {
    let printed = reprint(
        "def f x = [x, x * 2.0]\n\
         def g v = (f v[0])[1] + 1.0\n\
         def h a b c = a - (b - c) + (a - b) - c - -(a * b) + g (f (-1.0)) * (if a > b then a else b) ** 2.0 ** 0.5\n\
         def k (a, b) = (fun x -> x + a, fun y -> y * b)\n\
         def main = (h 1.0 2.0 3.0, fst (k (1.0, 2.0)) 3.0, snd (k (1.0, 2.0)) 3.0, [[1.0]][0][0], not (1 < 2) || 3 >= 4)",
    );
    insta::assert_snapshot!(printed);
    run(&printed);
}

/// `D{*R}` of Krawiec et al. Fig. 9, built in the named core:
/// `mulR ((x, u1), (y, u2)) = do { u3 <- deltaLet (Add (Scale y u1) (Scale x u2)); pure (x * y, Var u3) }`.
fn mul_r() -> Def {
    def(
        "mulR",
        vec![Pat::Tuple(vec![Pat::pair("x", "u1"), Pat::pair("y", "u2")])],
        bind(
            Pat::var("u3"),
            p(
                Prim::DeltaLet,
                vec![p(
                    Prim::DAdd,
                    vec![
                        p(Prim::DScale, vec![var("y"), var("u1")]),
                        p(Prim::DScale, vec![var("x"), var("u2")]),
                    ],
                )],
            ),
            p(
                Prim::Pure,
                vec![pair(
                    real_op(Prim::Mul, vec![var("x"), var("y")]),
                    p(Prim::DVar, vec![var("u3")]),
                )],
            ),
        ),
    )
}

/// `D{+R}`.
fn add_r() -> Def {
    def(
        "addR",
        vec![Pat::Tuple(vec![Pat::pair("x", "u1"), Pat::pair("y", "u2")])],
        bind(
            Pat::var("u3"),
            p(
                Prim::DeltaLet,
                vec![p(Prim::DAdd, vec![var("u1"), var("u2")])],
            ),
            p(
                Prim::Pure,
                vec![pair(
                    real_op(Prim::Add, vec![var("x"), var("y")]),
                    p(Prim::DVar, vec![var("u3")]),
                )],
            ),
        ),
    )
}

#[test]
fn do_blocks_run_delta_and_polytypic_helpers() {
    // D{f} for f (x, y) = x * y + 2 * x, by hand (Fig. 9 style), with a
    // `let` inside the block.
    let fst_x = Expr::Proj {
        tuple: Box::new(var("x")),
        index: 0,
        arity: 2,
    };
    let snd_x = Expr::Proj {
        tuple: Box::new(var("x")),
        index: 1,
        arity: 2,
    };
    let f_rev = def(
        "f_rev",
        vec![Pat::pair("x", "y")],
        bind(
            Pat::var("a"),
            app(var("mulR"), vec![pair(var("x"), var("y"))]),
            let_(
                Pat::var("t"),
                pair(
                    real_op(Prim::Mul, vec![real(2.0), fst_x]),
                    p(Prim::DScale, vec![real(2.0), snd_x]),
                ),
                bind(
                    Pat::var("b"),
                    app(var("addR"), vec![pair(var("a"), var("t"))]),
                    p(Prim::Pure, vec![var("b")]),
                ),
            ),
        ),
    );
    // Fig. 16's wrapper: initVars, runDelta, eval, lookupDual.
    let s = Type::Tuple(vec![Type::Real, Type::Real]);
    let grad_f = def(
        "grad_f",
        vec![Pat::var("s")],
        let_(
            Pat::pair("s0", "next"),
            app(
                Expr::Poly(Poly::InitVars, s.clone()),
                vec![pair(var("s"), int(0))],
            ),
            let_(
                Pat::pair("_r", "u"),
                Expr::RunDelta(
                    Box::new(var("next")),
                    Box::new(app(var("f_rev"), vec![var("s0")])),
                ),
                app(
                    Expr::Poly(Poly::LookupDual, s),
                    vec![pair(
                        p(
                            Prim::EvalDelta,
                            vec![real(1.0), var("u"), p(Prim::EmptyMap, vec![])],
                        ),
                        var("s0"),
                    )],
                ),
            ),
        ),
    );
    let vec_helper = def(
        "zeros",
        vec![Pat::var("v")],
        app(
            Expr::Poly(Poly::InitZeros, Type::Vec(Box::new(Type::Real))),
            vec![var("v")],
        ),
    );
    let main = def(
        "main",
        vec![],
        Expr::Tuple(vec![
            app(var("grad_f"), vec![pair(real(2.0), real(3.0))]),
            app(
                var("zeros"),
                vec![Expr::Vector(vec![real(1.0), real(-2.0)])],
            ),
            Expr::RunDelta(
                Box::new(int(7)),
                Box::new(bind(
                    Pat::var("i"),
                    p(Prim::DeltaLet, vec![p(Prim::DZero, vec![])]),
                    p(
                        Prim::Pure,
                        vec![pair(var("i"), p(Prim::DVar, vec![var("i")]))],
                    ),
                )),
            ),
        ]),
    );
    let program = Program {
        defs: vec![mul_r(), add_r(), f_rev, grad_f, vec_helper, main],
    };
    let printed = print_program(&program);
    insta::assert_snapshot!(printed);
    // d/dx (x * y + 2 * x) = y + 2 = 5, d/dy = x = 2.
    assert_eq!(
        run(&printed),
        "((5.0, 2.0), [(1.0, Zero), (-2.0, Zero)], (7, Let 7 Zero (Var 7)))"
    );
}

#[test]
fn sequences_and_reference_cells() {
    // Wang et al. Fig. 10-style `*` on (value, gradient cell) pairs:
    // `mulC (x1, x1') (x2, x2') k = let y' = ref 0.0 in k (x1 * x2, y'); x1' += !y' * x2; x2' += !y' * x1`
    let deref = |r: &str| p(Prim::Deref, vec![var(r)]);
    let seq = |a, b| let_(Pat::Tuple(vec![]), a, b);
    let mul_c = def(
        "mulC",
        vec![
            Pat::pair("x1", "x1'"),
            Pat::pair("x2", "x2'"),
            Pat::var("k"),
        ],
        let_(
            Pat::var("y'"),
            p(Prim::NewRef, vec![real(0.0)]),
            seq(
                app(
                    var("k"),
                    vec![pair(
                        real_op(Prim::Mul, vec![var("x1"), var("x2")]),
                        var("y'"),
                    )],
                ),
                seq(
                    p(
                        Prim::AddTo,
                        vec![var("x1'"), real_op(Prim::Mul, vec![deref("y'"), var("x2")])],
                    ),
                    p(
                        Prim::AddTo,
                        vec![var("x2'"), real_op(Prim::Mul, vec![deref("y'"), var("x1")])],
                    ),
                ),
            ),
        ),
    );
    // grad (fun x -> x * x) 3.0 in CPS.
    let main = def(
        "main",
        vec![],
        let_(
            Pat::var("x'"),
            p(Prim::NewRef, vec![real(0.0)]),
            seq(
                app(
                    var("mulC"),
                    vec![
                        pair(real(3.0), var("x'")),
                        pair(real(3.0), var("x'")),
                        lam(
                            vec![Pat::Tuple(vec![Pat::Wild, Pat::var("z'")])],
                            p(Prim::AddTo, vec![var("z'"), real(1.0)]),
                        ),
                    ],
                ),
                deref("x'"),
            ),
        ),
    );
    let printed = print_program(&Program {
        defs: vec![mul_c, main],
    });
    insta::assert_snapshot!(printed);
    assert_eq!(run(&printed), "6.0");
}

#[test]
fn operators_as_values_and_projections() {
    let program = Program {
        defs: vec![def(
            "main",
            vec![],
            Expr::Tuple(vec![
                app(
                    Expr::PrimRef(PrimAt::plain(Prim::Fold)),
                    vec![
                        Expr::PrimRef(PrimAt::at(Prim::Add, Type::Real)),
                        real(0.0),
                        Expr::Vector(vec![real(1.0), real(2.0)]),
                    ],
                ),
                Expr::Proj {
                    tuple: Box::new(Expr::Tuple(vec![int(1), int(2), int(3)])),
                    index: 2,
                    arity: 3,
                },
                named::app(
                    Expr::PrimRef(PrimAt::at(Prim::Neg, Type::Int)),
                    vec![int(4)],
                ),
            ]),
        )],
    };
    let printed = print_program(&program);
    insta::assert_snapshot!(printed);
    assert_eq!(run(&printed), "(3.0, 3, -4)");
}

#[test]
fn statements_of_a_do_block_break_like_lines() {
    // From translated source: a `fun` argument and a `fun` value break
    // inside, indented from the statement; an `if` aligns after `<-`.
    let printed = reprint(
        "#!translated\n\
         def mulR ((x, u1), (y, u2)) = do { u3 <- deltaLet (Add (Scale y u1) (Scale x u2)); pure (x * y, Var u3) }\n\
         def cube_all v = do { ys <- mapM (fun x -> do { a <- mulR (x, x); b <- mulR (a, x); pure b }) v; \
         let twice = fun y -> do { a <- mulR (y, (2.0, Zero)); let unused = (fst a, snd a); pure a }; \
         z <- if size ys > 1 then twice ys[0] else pure (0.0, Zero); pure ((ys, fst z), snd z) }\n\
         def main = let (r, _) = runDelta 2 (cube_all [(1.0, Var 0), (2.0, Var 1)]) in r",
    );
    insta::assert_snapshot!(printed);
    assert_eq!(run(&printed), "([(1.0, Var 3), (8.0, Var 5)], 2.0)");
}
