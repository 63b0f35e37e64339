//! Every nabla implementation of every workload, run once on the smallest input and
//! checked against the oracle (oracle.json, or the expected values of
//! BENCHMARKS.md for the nested benchmarks). No timing.

use nabla_bench::registry::{
    IMPLEMENTATIONS, LANGUAGE_PENDING, Support, WORKLOADS, disagreement, oracle_reference, passes,
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
                    let eval = runner.derivative();
                    let err = disagreement(&eval, &reference);
                    eprintln!("{:<14} {:<10} max error {err:.2e}", w.id, imp.name);
                    if !passes(err) {
                        failures.push(format!("{} / {}: error {err:e}", w.id, imp.name));
                    }
                    // The plain f64 primal computes the same objective.
                    if let (Some(p), Some(values)) = (runner.primal(), &reference.values)
                        && !passes(nabla_bench::check::rel_err(p, values[0]))
                    {
                        failures.push(format!(
                            "{} / {}: primal {p} vs {}",
                            w.id, imp.name, values[0]
                        ));
                    }
                    checked += 1;
                }
                Support::Pending(reason) => {
                    assert_eq!(reason, LANGUAGE_PENDING, "{} / {}", w.id, imp.name)
                }
                Support::Cannot(_) => assert_eq!(imp.name, "nabla-fwd"),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "disagreements with the oracle:\n{}",
        failures.join("\n")
    );
    // gmm, ba, lstm × (nabla, manual) + ba × nabla-fwd + 8 nested × (nabla, manual).
    assert_eq!(checked, 3 * 2 + 1 + 8 * 2);
}

#[test]
fn the_gate_rejects_a_derivative_off_by_one_part_in_a_million() {
    let w = nabla_bench::registry::workload("gmm_test").expect("gmm_test");
    let reference = oracle_reference(w).expect("oracle");
    let Support::Runs(runner) = nabla_bench::registry::prepare("nabla", w) else {
        panic!("nabla runs gmm_test")
    };
    let mut eval = runner.derivative();
    assert!(passes(disagreement(&eval, &reference)));
    eval.derivative[3] += 1e-6;
    assert!(!passes(disagreement(&eval, &reference)));
}
