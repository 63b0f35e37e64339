//! The random programs of nabla-lang's differentiation property test
//! (`crates/nabla-lang/tests/ad_random/`), without differentiation
//! operators: their functions `f` and `g` applied to the sample point run
//! natively and in the interpreter with the same printed output.
//!
//! `NABLA_NATIVE_CASES=N` sets the number of programs (default
//! [`DEFAULT_CASES`]).

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

#[test]
fn random_programs_give_the_same_output_on_both_backends() {
    let cases = std::env::var("NABLA_NATIVE_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let failures = nabla_lang::stack::run_with_stack(move || {
        let mut failures = Vec::new();
        for seed in 0..cases {
            let p = generate(
                seed,
                program::Options {
                    nested_ad: false,
                    depth: 5,
                    budget: 40,
                    shadowing: 0.3,
                    fragment: Fragment::ALL,
                    structural_zeros: 0.1,
                },
            );
            let s0 = p.s0.source();
            let source = format!("{}\ndef main = (f {s0}, g {s0})\n", p.source);
            let mut s = Session::new();
            if let Err(ds) = s.load("generated.nabla", &source) {
                failures.push(format!("seed {seed}: does not load:\n{}", s.render(&ds)));
                continue;
            }
            let interp = s.run_main().map_err(|ds| s.render(&ds));
            let native = s
                .typed_program("main")
                .map_err(|u| format!("refused: {}", u.what))
                .and_then(|(prog, entry)| {
                    Native::compile_main(&prog, entry, &Options::default())
                        .map_err(|u| format!("refused: {}", u.what))
                })
                .map(|n| n.run().map(|v| print_value(&v)).map_err(|e| s.render(&[e.into()])));
            match native {
                Err(refused) => failures.push(format!("seed {seed}: {refused}\n{source}")),
                Ok(out) if out != interp => failures.push(format!(
                    "seed {seed}: the back ends disagree\n  interpreter: {interp:?}\n  native:      {out:?}\n{source}"
                )),
                Ok(_) => {}
            }
        }
        failures
    })
    .expect("thread");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
