//! The translations' efficiency guarantees, as counts (never timings):
//!
//! - size: a translated program is at most a constant factor larger than its
//!   source, over program families of growing size, in every mode;
//! - Krawiec et al. Theorem 5: the reverse translation of the §5.3 sharing
//!   chain runs in linear time — a million steps finish within an
//!   interpreter budget linear in the number of steps — while the same
//!   program with the `deltaLet`/`Var` machinery removed (every Delta built
//!   inline, §5.2) needs a budget exponential in the number of steps.

use nabla_lang::core::named::{Expr, Program};
use nabla_lang::driver::Session;
use nabla_lang::eval::Limits;
use nabla_lang::pretty::program::print_program;
use nabla_lang::prim::Prim;
use nabla_lang::stack::run_with_stack;
use nabla_lang::translate::{self, Mode};

fn named(text: &str) -> Program {
    let mut s = Session::new();
    s.load("<test>", text).expect("the source checks");
    s.named_program().expect("the source lowers")
}

fn size(e: &Expr) -> usize {
    let mut n = 0;
    e.for_each(&mut |_| n += 1);
    n
}

fn program_size(p: &Program) -> usize {
    p.defs.iter().map(|d| 1 + size(&d.body)).sum()
}

/// A let-chain of k real operations, a chain of k higher-order helpers, and a
/// chain of k case analyses.
fn families(k: usize) -> Vec<(&'static str, String)> {
    let mut lets = String::from("def f x =\n");
    for i in 1..=k {
        let prev = if i == 1 {
            "x".to_string()
        } else {
            format!("y{}", i - 1)
        };
        lets += &format!("  let y{i} = {prev} * x + sin {prev} in\n");
    }
    lets += &format!("  y{k}\n");

    let mut higher = String::from("def f x =\n  let g0 = fun z -> z * x in\n");
    for i in 1..=k {
        higher += &format!("  let g{i} = fun z -> g{} z + x in\n", i - 1);
    }
    higher += &format!("  g{k} x\n");

    let mut sums = String::from("def f x =\n  let s0 = x in\n");
    for i in 1..=k {
        sums += &format!(
            "  let s{i} = (match (if s{p} > 0.0 then inl s{p} else inr s{p}) with | inl a -> a * x | inr b -> b - x) in\n",
            p = i - 1
        );
    }
    sums += &format!("  s{k}\n");
    vec![
        ("let-chain", lets),
        ("higher-order", higher),
        ("sums", sums),
    ]
}

#[test]
fn translated_programs_are_linear_in_the_size_of_their_source() {
    run_with_stack(|| {
        for mode in [Mode::Forward, Mode::Reverse, Mode::Cps] {
            for family in 0..3 {
                let mut ratios = Vec::new();
                for k in [10, 40, 160] {
                    let (name, text) = families(k).swap_remove(family);
                    let source = named(&format!("{text}def main = grad f 0.7\n"));
                    let out = translate::translate(&source, "f", mode).expect("translates");
                    let source_size = size(&source.def("f").expect("f").body);
                    let ratio = program_size(&out) as f64 / source_size as f64;
                    ratios.push((name, k, ratio));
                }
                let (first, last) = (ratios[0].2, ratios[2].2);
                assert!(
                    ratios.iter().all(|r| r.2 < 40.0) && last <= first * 1.25,
                    "{mode:?}: size ratios grow: {ratios:?}"
                );
            }
        }
    })
    .expect("test thread");
}

#[test]
fn a_five_thousand_step_let_chain_translates_at_the_same_size_ratio() {
    // The forward and reverse translations of long straight-line code: the
    // post-passes (let floating, shared destructuring, renumbering) used to walk
    // the rest of the chain at every step, which made 1 000 steps take half a
    // minute and 4 000 steps over one. The size ratio must stay that of a short
    // chain.
    run_with_stack(|| {
        for mode in [Mode::Forward, Mode::Reverse] {
            let ratio = |k: usize| {
                let (_, text) = families(k).swap_remove(0);
                let source = named(&format!("{text}def main = grad f 0.7\n"));
                let out = translate::translate(&source, "f", mode).expect("translates");
                program_size(&out) as f64 / size(&source.def("f").expect("f").body) as f64
            };
            let (short, long) = (ratio(160), ratio(5_000));
            assert!(
                long <= short * 1.05,
                "{mode:?}: ratio {short} at 160 steps, {long} at 5 000"
            );
        }
    })
    .expect("test thread");
}

#[test]
fn a_deeply_nested_expression_translates_and_prints_in_linear_size() {
    // `sin (sin (… x))` 3 000 deep: floating the translation's bindings out of
    // every enclosing right-hand side is quadratic, so it stops after a budget
    // linear in the input (the rest stays nested), and the printer stops
    // indenting past 60 columns instead of printing a quadratic number of spaces.
    run_with_stack(|| {
        let n = 3_000;
        let text = format!(
            "def f x = {}x{}\ndef main = grad f 0.5\n",
            "sin (".repeat(n),
            ")".repeat(n)
        );
        let source = named(&text);
        let out = translate::translate(&source, "f", Mode::Reverse).expect("translates");
        let printed = print_program(&out);
        assert!(
            printed.len() < 400 * n,
            "{} bytes for {n} levels",
            printed.len()
        );
        assert!(
            printed
                .lines()
                .all(|l| l.len() - l.trim_start().len() <= 60)
        );
    })
    .expect("test thread");
}

const CHAIN: &str = "
def chain x =
  let rec go n y = if n == 0 then y else go (n - 1) (0.5 * (y + y)) in
  go STEPS x
def main = grad chain 1.0
";

/// The runnable reverse translation of the chain of `steps` steps, as
/// printed, optionally with every `deltaLet` inlined.
fn chain_program(steps: usize, share: bool) -> String {
    let source = named(&CHAIN.replace("STEPS", &steps.to_string()));
    let call = translate::calls_in_main(&source).remove(0);
    let mut p = translate::runnable(&source, &call, Mode::Reverse).expect("translates");
    if !share {
        for d in &mut p.defs {
            d.body = inline_delta_lets(std::mem::replace(&mut d.body, Expr::Vector(vec![])));
        }
    }
    print_program(&p)
}

/// Removes Figure 9's sharing: `do { u <- deltaLet d; rest }` becomes `rest`
/// with `Var u` replaced by `d` itself — the Delta of §5.2, a tree that
/// repeats a shared subterm wherever it is used.
fn inline_delta_lets(e: Expr) -> Expr {
    match e {
        Expr::Bind(nabla_lang::core::named::Pat::Var(u), m, rest) if matches!(&*m, Expr::Prim(p, _) if p.prim == Prim::DeltaLet) =>
        {
            let Expr::Prim(_, mut args) = *m else {
                unreachable!()
            };
            let d = inline_delta_lets(args.remove(0));
            let rest = substitute_var_delta(inline_delta_lets(*rest), &u, &d);
            // `rest` is a computation: keep it one.
            rest
        }
        Expr::Bind(p, m, rest) => Expr::Bind(
            p,
            Box::new(inline_delta_lets(*m)),
            Box::new(inline_delta_lets(*rest)),
        ),
        Expr::Let(p, v, b) => Expr::Let(
            p,
            Box::new(inline_delta_lets(*v)),
            Box::new(inline_delta_lets(*b)),
        ),
        Expr::LetRec {
            name,
            params,
            value,
            body,
        } => Expr::LetRec {
            name,
            params,
            value: Box::new(inline_delta_lets(*value)),
            body: Box::new(inline_delta_lets(*body)),
        },
        Expr::Lam(ps, b) => Expr::Lam(ps, Box::new(inline_delta_lets(*b))),
        Expr::If(a, b, c) => Expr::If(
            Box::new(inline_delta_lets(*a)),
            Box::new(inline_delta_lets(*b)),
            Box::new(inline_delta_lets(*c)),
        ),
        Expr::App(f, xs) => Expr::App(
            Box::new(inline_delta_lets(*f)),
            xs.into_iter().map(inline_delta_lets).collect(),
        ),
        Expr::Prim(p, xs) => Expr::Prim(p, xs.into_iter().map(inline_delta_lets).collect()),
        Expr::Tuple(xs) => Expr::Tuple(xs.into_iter().map(inline_delta_lets).collect()),
        e => e,
    }
}

/// `e` with `Var u` (the Delta constructor applied to the variable `u`) replaced by `d`.
fn substitute_var_delta(e: Expr, u: &str, d: &Expr) -> Expr {
    let go = |e: Expr| substitute_var_delta(e, u, d);
    match e {
        Expr::Prim(p, args)
            if p.prim == Prim::DVar && matches!(&args[..], [Expr::Var(x)] if x == u) =>
        {
            d.clone()
        }
        Expr::Prim(p, xs) => Expr::Prim(p, xs.into_iter().map(go).collect()),
        Expr::Tuple(xs) => Expr::Tuple(xs.into_iter().map(go).collect()),
        Expr::App(f, xs) => Expr::App(Box::new(go(*f)), xs.into_iter().map(go).collect()),
        Expr::Let(p, v, b) => Expr::Let(p, Box::new(go(*v)), Box::new(go(*b))),
        Expr::Bind(p, v, b) => Expr::Bind(p, Box::new(go(*v)), Box::new(go(*b))),
        Expr::Lam(ps, b) => Expr::Lam(ps, Box::new(go(*b))),
        Expr::If(a, b, c) => Expr::If(Box::new(go(*a)), Box::new(go(*b)), Box::new(go(*c))),
        e => e,
    }
}

/// Runs a program with an interpreter budget (calls plus Delta evaluation steps).
fn run_with_budget(text: &str, budget: u64) -> Result<String, String> {
    let mut s = Session::new();
    s.limits = Limits {
        max_calls: Some(budget),
        ..Limits::default()
    };
    s.load("<chain>", text)
        .and_then(|_| s.run_main())
        .map_err(|ds| s.render(&ds))
}

#[test]
fn reverse_translation_runs_the_million_step_sharing_chain_in_linear_budget() {
    run_with_stack(|| {
        let steps = 1_000_000;
        let out = run_with_budget(&chain_program(steps, true), 40 * steps as u64);
        assert_eq!(out, Ok("1.0".to_string()));
    })
    .expect("test thread");
}

#[test]
fn without_delta_lets_the_chain_costs_exponential_time() {
    run_with_stack(|| {
        // With sharing, a budget of 40 per step is enough at every length.
        for steps in [8, 16, 24] {
            let budget = 40 * steps as u64 + 200;
            assert_eq!(
                run_with_budget(&chain_program(steps, true), budget),
                Ok("1.0".into())
            );
        }
        // Without it, the same answer at 8 steps…
        assert_eq!(
            run_with_budget(&chain_program(8, false), 10_000),
            Ok("1.0".into())
        );
        // …but each step doubles the work: 16 steps need more than 2^16.
        let out = run_with_budget(&chain_program(16, false), 1 << 16);
        assert!(
            out.as_ref().is_err_and(|e| e.contains("limit")),
            "expected the step limit, got {out:?}"
        );
        assert_eq!(
            run_with_budget(&chain_program(16, false), 1 << 22),
            Ok("1.0".into())
        );
    })
    .expect("test thread");
}
