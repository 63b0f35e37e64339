//! Nested differentiation in every combination of modes, without perturbation
//! confusion, including inner closures that capture outer variables.

use nabla::{Dual, Reverse, Scalar, derivative, grad, hessian, jvp, vjp};

// d/dx [x · (d/dy (x + y))(1)] at x = 1. The inner derivative is 1 for every x, so
// the answer is 1; confusing the two perturbations gives 2 (Wang et al. §2.4,
// Siskind & Pearlmutter). The inner closure captures the outer x.

#[test]
fn confusion_forward_over_forward() {
    let d = derivative(
        |x| x * derivative(|y| Dual::constant(x) + y, Dual::from(1.0)),
        1.0,
    );
    assert_eq!(d, 1.0);
}

#[test]
fn confusion_forward_over_reverse() {
    let d = derivative(
        |x| x * grad(|y| Reverse::constant(x) + y[0], &[Dual::from(1.0)])[0],
        1.0,
    );
    assert_eq!(d, 1.0);
}

#[test]
fn confusion_reverse_over_forward() {
    let g = grad(
        |x| x[0] * derivative(|y| Dual::constant(x[0]) + y, Reverse::from(1.0)),
        &[1.0],
    );
    assert_eq!(g, vec![1.0]);
}

#[test]
fn confusion_reverse_over_reverse() {
    let g = grad(
        |x| x[0] * grad(|y| Reverse::constant(x[0]) + y[0], &[Reverse::from(1.0)])[0],
        &[1.0],
    );
    assert_eq!(g, vec![1.0]);
}

/// A capture that matters: d/dx [(d/dy x·y²)(x)] = d/dx 2x² = 4x, at x = 3 is 12,
/// in all four combinations.
#[test]
fn inner_derivative_depending_on_captured_variable() {
    let ff = derivative(|x| derivative(|y| Dual::constant(x) * y * y, x), 3.0);
    let fr = derivative(
        |x| grad(|y| Reverse::constant(x) * y[0] * y[0], &[x])[0],
        3.0,
    );
    let rf = grad(
        |x| derivative(|y| Dual::constant(x[0]) * y * y, x[0]),
        &[3.0],
    )[0];
    let rr = grad(
        |x| grad(|y| Reverse::constant(x[0]) * y[0] * y[0], &[x[0]])[0],
        &[3.0],
    )[0];
    assert_eq!([ff, fr, rf, rr], [12.0; 4]);
}

/// Three levels, every combination of modes: d³/dx³ x⁵ = 60x², at x = 2 is 240.
#[test]
fn third_derivative_all_eight_combinations() {
    fn f<S: Scalar>(x: S) -> S {
        x.powi(5)
    }
    let fff = derivative(|a| derivative(|b| derivative(f, b), a), 2.0);
    let ffr = derivative(|a| derivative(|b| grad(|c| f(c[0]), &[b])[0], a), 2.0);
    let frf = derivative(|a| grad(|b| derivative(f, b[0]), &[a])[0], 2.0);
    let frr = derivative(|a| grad(|b| grad(|c| f(c[0]), &[b[0]])[0], &[a])[0], 2.0);
    let rff = grad(|a| derivative(|b| derivative(f, b), a[0]), &[2.0])[0];
    let rfr = grad(|a| derivative(|b| grad(|c| f(c[0]), &[b])[0], a[0]), &[2.0])[0];
    let rrf = grad(|a| grad(|b| derivative(f, b[0]), &[a[0]])[0], &[2.0])[0];
    let rrr = grad(
        |a| grad(|b| grad(|c| f(c[0]), &[b[0]])[0], &[a[0]])[0],
        &[2.0],
    )[0];
    assert_eq!([fff, ffr, frf, frr, rff, rfr, rrf, rrr], [240.0; 8]);
}

/// Operators can be called inside other operators' closures: the Hessian of a
/// function whose value is itself a gradient component.
#[test]
fn hessian_of_a_function_that_takes_a_gradient() {
    // g(x, y) = ∂/∂x (x²y³) = 2xy³; H(g) = [[0, 6y²], [6y², 12xy]].
    let h = hessian(|v| grad(|w| w[0] * w[0] * w[1].powi(3), v)[0], &[2.0, 1.5]);
    assert_eq!(h, vec![vec![0.0, 13.5], vec![13.5, 36.0]]);
}

/// A pullback obtained inside a gradient is differentiable: the gradient of
/// ⟨ct, J(x)ᵀ⟩ for f(x) = (x₀x₁, x₀²).
#[test]
fn vjp_inside_grad() {
    let g = grad(
        |x| {
            let (_, pullback) = vjp(|v| vec![v[0] * v[1], v[0] * v[0]], x);
            let ct = pullback.apply(&[Reverse::from(1.0), Reverse::from(1.0)]);
            // ctᵀJ = (x₁ + 2x₀, x₀); sum = x₁ + 3x₀
            ct[0] + ct[1]
        },
        &[2.0, 5.0],
    );
    assert_eq!(g, vec![3.0, 1.0]);
}

/// jvp of a function that closes over a reverse value of the enclosing level.
#[test]
fn jvp_inside_grad_with_capture() {
    // d/da [d/dt (a·t²) at t = a, direction 1] = d/da 2a² = 4a
    let g = grad(
        |a| {
            let captured = a[0];
            jvp(
                |t| vec![Dual::constant(captured) * t[0] * t[0]],
                &[captured],
                &[Reverse::from(1.0)],
            )
            .1[0]
        },
        &[1.5],
    );
    assert_eq!(g, vec![6.0]);
}
