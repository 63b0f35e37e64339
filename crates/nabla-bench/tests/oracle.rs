//! Every nabla implementation of every workload — the library's, the
//! hand-written one and the nabla language's programs (bench/nabla/) — run once
//! on the smallest input and checked against the oracle (oracle.json, or the
//! expected values of BENCHMARKS.md for the nested benchmarks). No timing.

use nabla_bench::lang;
use nabla_bench::registry::{
    IMPLEMENTATIONS, Support, WORKLOADS, check_runner, disagreement, oracle_reference, passes,
};

#[test]
fn every_implementation_agrees_with_the_oracle_on_the_smallest_inputs() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for w in WORKLOADS.iter().filter(|w| w.smallest) {
        let reference = oracle_reference(w).unwrap_or_else(|| panic!("{} has no oracle", w.id));
        for imp in IMPLEMENTATIONS {
            match nabla_bench::registry::prepare(imp.name, w) {
                Support::Runs(runner) => {
                    // The derivative evaluation, and the plain f64 primal's values.
                    let err = check_runner(runner.as_ref(), &reference);
                    eprintln!("{:<14} {:<14} max error {err:.2e}", w.id, imp.name);
                    if !passes(err) {
                        failures.push(format!("{} / {}: error {err:e}", w.id, imp.name));
                    }
                    checked += 1;
                }
                Support::Pending(reason) => panic!("{} / {}: {reason}", w.id, imp.name),
                Support::Cannot(_) => assert_eq!(imp.name, "nabla-fwd"),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "disagreements with the oracle:\n{}",
        failures.join("\n")
    );
    // gmm, ba, lstm × (nabla, nabla-lang, nabla-compiled, manual) + ba ×
    // nabla-fwd + 8 nested × (nabla, nabla-lang, nabla-compiled, manual).
    assert_eq!(checked, 3 * 4 + 1 + 8 * 4);
}

/// The input the harness passes in-process and the same input written as
/// source (`nabla-bench lang-input`, for the `nabla` binary) give the same
/// printed result: `nabla run` on prelude + program computes what is timed.
#[test]
fn the_language_programs_read_their_input_as_source_too() {
    for w in WORKLOADS.iter().filter(|w| w.smallest && w.file.is_some()) {
        let w = *w;
        let same = nabla_lang::stack::run_with_stack(move || {
            let program = lang::interface(w.family).program;
            let text = format!(
                "{}{}\ndef main = derivative input\n",
                lang::prelude(&w),
                program.text
            );
            let mut as_text = nabla_lang::driver::Session::new();
            as_text.load("with-input.nabla", &text).expect("loads");
            let printed = as_text.run_main().expect("runs");

            let mut session = nabla_lang::driver::Session::new();
            session.load(program.path, program.text).expect("loads");
            let mut compiled = session.compile().expect("compiles");
            let f = compiled.global("derivative").expect("derivative");
            let v = compiled
                .apply(f, lang::input(&w).to_value())
                .expect("evaluates");
            (nabla_lang::pretty::print_value(&v), printed)
        })
        .expect("no panic");
        assert_eq!(same.0, same.1, "{}", w.id);
    }
}

#[test]
fn the_gate_rejects_a_derivative_off_by_one_part_in_a_million() {
    let w = nabla_bench::registry::workload("gmm_test").expect("gmm_test");
    let reference = oracle_reference(w).expect("oracle");
    let Support::Runs(runner) = nabla_bench::registry::prepare("nabla", w) else {
        panic!("nabla runs gmm_test")
    };
    let mut eval = runner.derivative().expect("the library differentiates");
    assert!(passes(disagreement(&eval, &reference)));
    eval.derivative[3] += 1e-6;
    assert!(!passes(disagreement(&eval, &reference)));
}
