//! Krawiec et al. §5.3: sharing is never lost, so the trace and the backward pass
//! are linear in the number of primal operations.

mod common;

use common::assert_close;
use nabla::{Dual, Reverse, Scalar, grad, vjp};

/// x₁ = x + x, x₂ = x₁ + x₁, … (the paper's example): each step uses its predecessor
/// twice. A Delta without Let/Var sharing would be a tree with 2ⁿ leaves.
fn doubling_chain<S: Scalar>(x: S, steps: usize) -> S {
    (0..steps).fold(x, |acc, _| acc + acc)
}

/// xᵢ₊₁ = xᵢ·y + xᵢ: every step adds two different variables (so it must be
/// `Let`-bound) and uses xᵢ twice (so without sharing the Delta would double).
fn compound_chain<S: Scalar>(x: S, y: S, steps: usize) -> S {
    (0..steps).fold(x, |acc, _| acc * y + acc)
}

#[test]
fn million_step_chain_has_a_linear_trace_and_exact_gradient() {
    const STEPS: usize = 1_000_000;
    let (x, y) = (1.5, 1e-6);
    let (value, pullback) = vjp(|v| vec![compound_chain(v[0], v[1], STEPS)], &[x, y]);
    // Two input variables, then exactly two Lets per step (the product and the sum).
    assert_eq!(pullback.trace_len(), 2 + 2 * STEPS);
    // x·(1+y)ⁿ; ∂/∂x = (1+y)ⁿ; ∂/∂y = n·x·(1+y)ⁿ⁻¹. Rounding over 10⁶ steps costs a
    // few ×1e-11 relative.
    let growth = (1.0 + y).powi(STEPS as i32);
    assert_close(value[0], x * growth, 1e-9, "value");
    let g = pullback.apply(&[1.0]);
    assert_close(g[0], growth, 1e-9, "∂/∂x");
    assert_close(
        g[1],
        STEPS as f64 * x * (1.0 + y).powi(STEPS as i32 - 1),
        1e-9,
        "∂/∂y",
    );
}

#[test]
fn doubling_chain_folds_into_one_coefficient() {
    // Add (Scale a (Var p)) (Scale a (Var p)) = Scale 2a (Var p): the paper's chain
    // records nothing beyond its input, however long, and its gradient is exact.
    for steps in [0, 1, 10, 100, 1000] {
        let (_, pullback) = vjp(|x| vec![doubling_chain(x[0], steps)], &[0.75]);
        assert_eq!(pullback.trace_len(), 1, "steps = {steps}");
        assert_eq!(
            pullback.apply(&[1.0]),
            vec![2f64.powi(steps as i32)],
            "steps = {steps}"
        );
    }
    // 2^(10⁶) overflows f64: value and derivative are +inf, never NaN.
    assert_eq!(
        grad(|x| doubling_chain(x[0], 1_000_000), &[1.0]),
        vec![f64::INFINITY]
    );
}

#[test]
fn only_sums_of_two_variables_record() {
    let (_, pullback) = vjp(
        |x| {
            // Constants, unary primitives, constant factors and offsets: no entries.
            let c = (0..1000).fold(Reverse::from(1.0), |acc, _| acc * 1.001 + 0.5);
            let u = (x[0] * c).sin().exp() * 3.0 - 1.0;
            let v = -x[1].tanh() / 2.0;
            // One sum of two variables: one entry.
            vec![u * v]
        },
        &[2.0, 0.5],
    );
    assert_eq!(pullback.trace_len(), 2 + 1);
}

#[test]
fn trace_entries_are_compact() {
    let (_, pullback) = vjp(|x| vec![x[0] * x[1]], &[1.0, 2.0]);
    // Two parent ids and two f64 weights.
    assert_eq!(pullback.entry_bytes(), 24);
}

#[test]
fn a_zero_tangent_in_forward_over_reverse_records_nothing() {
    // Forward over reverse with the tangent direction 0: every tangent is a structural
    // zero, and a zero times a variable is a constant, so only the primal's own sums
    // of two variables are recorded — here the product x·y and the sum x·y + x.
    fn tangent_zero<'t>(v: &[Reverse<'t, f64>]) -> Vec<Reverse<'t, f64>> {
        let x = Dual::new(v[0], Reverse::constant(0.0));
        let y = Dual::new(v[1], Reverse::constant(0.0));
        let z = x * y + x;
        vec![z.primal(), z.tangent()]
    }
    let (values, pullback) = vjp(tangent_zero, &[2.0, 3.0]);
    assert_eq!(values, vec![8.0, 0.0]);
    assert_eq!(pullback.trace_len(), 2 + 2);
    assert_eq!(pullback.apply(&[0.0, 1.0]), vec![0.0, 0.0]);
    assert_eq!(pullback.apply(&[1.0, 0.0]), vec![4.0, 2.0]);
}
