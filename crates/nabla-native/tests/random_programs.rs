//! The random programs of nabla-lang's differentiation property test
//! (`crates/nabla-lang/tests/ad_random/`) run natively and in the
//! interpreter with the same printed output: their functions `f` and `g`
//! applied to the sample point, their forward derivatives (`jvp`) and their
//! reverse derivatives (`grad`, `value_and_grad`, `vjp`), with and without
//! differentiation operators inside them.
//!
//! `NABLA_NATIVE_CASES=N` sets the number of programs (default
//! [`DEFAULT_CASES`]); `NABLA_NATIVE_FIRST=S` makes the seeds S, S + 1, …
//! rather than 0, 1, … (to run again the one a long run reported).

#[allow(dead_code)]
#[path = "../../nabla-lang/tests/ad_random/interval.rs"]
mod interval;
#[path = "../../nabla-lang/tests/ad_random/program.rs"]
#[allow(dead_code)]
mod program;
#[allow(dead_code)]
#[path = "../../nabla-lang/tests/ad_random/value.rs"]
mod value;

use nabla_lang::driver::Session;
use nabla_lang::pretty::print_value;
use nabla_native::{Native, Options};
use program::{Fragment, generate};

/// Programs in a plain `cargo test` run (debug build: a few seconds).
const DEFAULT_CASES: u64 = 150;

/// The seeds of the programs: `NABLA_NATIVE_CASES` of them from
/// `NABLA_NATIVE_FIRST`.
fn seeds() -> std::ops::Range<u64> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let first = var("NABLA_NATIVE_FIRST").unwrap_or(0);
    first..first.saturating_add(var("NABLA_NATIVE_CASES").unwrap_or(DEFAULT_CASES))
}

fn options(nested_ad: bool) -> program::Options {
    program::Options {
        nested_ad,
        depth: 5,
        budget: 40,
        shadowing: 0.3,
        fragment: Fragment::ALL,
        structural_zeros: 0.1,
    }
}

/// Runs `source`'s `main` on both back ends: `Ok(None)` if they print the
/// same (reals within `tolerance`, relative, if one is given),
/// `Ok(Some(reason))` if native code refuses it, `Err` if they differ.
fn compare_within(source: &str, tolerance: Option<f64>) -> Result<Option<String>, String> {
    let mut s = Session::new();
    if let Err(ds) = s.load("generated.nabla", source) {
        return Err(format!("does not load:\n{}", s.render(&ds)));
    }
    let interp = s.run_main().map_err(|ds| s.render(&ds));
    let native = match s
        .typed_program("main")
        .and_then(|(prog, entry)| Native::compile_main(&prog, entry, &Options::default()))
    {
        Ok(n) => n,
        Err(u) => return Ok(Some(u.what)),
    };
    let out = native
        .run()
        .map(|v| print_value(&v))
        .map_err(|e| s.render(&[e.into()]));
    let close = |a: &str, b: &str, tol: f64| {
        let (Ok(x), Ok(y)) = (value::parse(a), value::parse(b)) else {
            return false;
        };
        x.same_shape(&y)
            && x.reals()
                .iter()
                .zip(y.reals())
                .all(|(p, q)| p == &q || (p - q).abs() <= tol * (1.0 + p.abs().max(q.abs())))
    };
    let within = match (&out, &interp, tolerance) {
        (Ok(a), Ok(b), Some(tol)) => close(a, b, tol),
        _ => false,
    };
    if out != interp && !within {
        return Err(format!(
            "the back ends disagree\n  interpreter: {interp:?}\n  native:      {out:?}"
        ));
    }
    Ok(None)
}

/// Generates the random programs (`nested`: with and/or without operators
/// inside them) and compares on both back ends each `main` that `mains`
/// appends to one, reals within the tolerance it gives (exactly if none);
/// fails on any refusal or difference.
fn on_both_backends(
    nested: &'static [bool],
    mains: impl Fn(&program::Program, u64) -> Vec<(String, Option<f64>)> + Send + 'static,
) {
    let seeds = seeds();
    let failures = nabla_lang::stack::run_with_stack(move || {
        let mut failures = Vec::new();
        for seed in seeds {
            for &with_operators in nested {
                let p = generate(seed, options(with_operators));
                for (main, tolerance) in mains(&p, seed) {
                    let source = format!("{}\ndef main = {main}\n", p.source);
                    match compare_within(&source, tolerance) {
                        Ok(None) => {}
                        Ok(Some(refused)) => {
                            failures.push(format!("seed {seed}: refused: {refused}\n{source}"))
                        }
                        Err(e) => failures.push(format!("seed {seed}: {e}\n{source}")),
                    }
                }
            }
        }
        failures
    })
    .expect("thread");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn random_programs_give_the_same_output_on_both_backends() {
    on_both_backends(&[false], |p, _| {
        let s0 = p.s0.source();
        vec![(format!("(f {s0}, g {s0})"), None)]
    });
}

/// Compiled forward mode: `jvp f s0 ds` and `jvp g s0 ds` of the random
/// programs, bit for bit as the interpreter computes them, with and without
/// nested operators (`diff`, `jvp` and the reverse-mode operators inside
/// `f` and `g`): every program must compile. A `vjp` under a `grad` inside
/// them is the documented exception of the reverse-mode test below, compared
/// to 1e-10 relative.
#[test]
fn forward_derivatives_of_random_programs_agree_on_both_backends() {
    on_both_backends(&[false, true], |p, seed| {
        let tolerance = Some(1e-10).filter(|_| p.source.contains("vjp"));
        let s0 = p.s0.source();
        let mut rng = program::Rng::new(seed);
        let n = p.s0.reals().len();
        let ds =
            p.s0.with_reals(&(0..n).map(|_| rng.range(-1.0, 1.0)).collect::<Vec<_>>())
                .source();
        vec![(format!("(jvp f {s0} {ds}, jvp g {s0} {ds})"), tolerance)]
    });
}

/// Compiled reverse mode: `grad f s0`, `value_and_grad f s0` and `vjp g
/// s0` (its pullback applied to the output) of the random programs (inputs
/// and outputs with reals, integers, vectors and sums), bit for bit as the
/// interpreter computes them, with and without nested operators: every
/// program must compile.
///
/// One documented exception (docs/compiler.md, "`vjp f x`"): a compiled
/// pullback records its function again when applied, so a `vjp` made under
/// an enclosing `grad` whose variable its function depends on leaves the
/// enclosing trace in another order, and that `grad` may sum its adjoints
/// in another order. A program with a `vjp` inside `f` or `g` is compared
/// to 1e-10 relative (signed zeros equal).
#[test]
fn reverse_derivatives_of_random_programs_agree_on_both_backends() {
    on_both_backends(&[false, true], |p, _| {
        let s0 = p.s0.source();
        let tolerance = Some(1e-10).filter(|_| p.source.contains("vjp"));
        vec![
            (format!("(grad f {s0}, value_and_grad f {s0})"), tolerance),
            (format!("let (y, pb) = vjp g {s0} in (y, pb y)"), tolerance),
        ]
    });
}
