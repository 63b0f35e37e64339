//! Krawiec et al. §5.3: sharing is never lost, so the trace and the backward pass
//! are linear in the number of primal operations.

use nabla::{Scalar, grad, vjp};

/// x₁ = x + x, x₂ = x₁ + x₁, …: each step uses its predecessor twice. A Delta
/// without Let/Var sharing would be a tree with 2ⁿ leaves.
fn doubling_chain<S: Scalar>(x: S, steps: usize) -> S {
    (0..steps).fold(x, |acc, _| acc + acc)
}

#[test]
fn million_step_chain_has_a_linear_trace() {
    const STEPS: usize = 1_000_000;
    let (value, pullback) = vjp(|x| vec![doubling_chain(x[0], STEPS)], &[1.0]);
    // One input variable plus exactly one Let per addition.
    assert_eq!(pullback.trace_len(), STEPS + 1);
    // 2^1e6 overflows f64: the value and derivative are +inf, but never NaN.
    assert_eq!(value[0], f64::INFINITY);
    assert_eq!(pullback.apply(&[1.0]), vec![f64::INFINITY]);
}

#[test]
fn chain_gradient_is_exact() {
    for steps in [0, 1, 10, 100, 1000] {
        let g = grad(|x| doubling_chain(x[0], steps), &[0.75]);
        assert_eq!(g, vec![2f64.powi(steps as i32)], "steps = {steps}");
    }
}

#[test]
fn constants_record_nothing() {
    // Arithmetic on constants, even inside a differentiated function, adds no entries.
    let (_, pullback) = vjp(
        |x| {
            let c = (0..1000).fold(Scalar::one(), |acc: nabla::Reverse<'_, f64>, _| {
                acc * 1.001 + 0.5
            });
            vec![x[0] * c]
        },
        &[2.0],
    );
    assert_eq!(pullback.trace_len(), 2); // the input and one product
}

#[test]
fn trace_entries_are_compact() {
    let (_, pullback) = vjp(|x| vec![x[0] * x[1]], &[1.0, 2.0]);
    // Two parent ids and two f64 weights.
    assert_eq!(pullback.entry_bytes(), 24);
}
