//! Conventions at non-differentiable points, structural zeros, user-defined
//! primitives, and the panics documented for misuse.

mod common;

use common::{FD_TOL, MODE_TOL, assert_close, central_diff};
use nabla::{
    BinaryPrimitive, Dual, Scalar, UnaryPrimitive, derivative, grad, grad_forward, hessian, hvp,
    jvp, vjp,
};
use proptest::prelude::*;

#[test]
fn powf_with_constant_exponent_and_negative_base_is_finite() {
    // d/dx x³ at −1.3 = 3·1.69; the exponent's ln x term is never formed.
    let x = -1.3;
    let expected = 3.0 * x * x;
    assert_close(derivative(|a| a.powf(3.0), x), expected, 1e-15, "forward");
    assert_close(
        grad(|a| a[0].powf(3.0), &[x])[0],
        expected,
        1e-15,
        "reverse",
    );
    // Second derivative 6x, nested both ways.
    assert_close(
        derivative(|a| derivative(|b| b.powf(3.0), a), x),
        6.0 * x,
        1e-14,
        "ff",
    );
    assert_close(
        hessian(|a| a[0].powf(3.0), &[x])[0][0],
        6.0 * x,
        1e-14,
        "fr",
    );
    assert_close(
        grad(|a| grad(|b| b[0].powf(3.0), &[a[0]])[0], &[x])[0],
        6.0 * x,
        1e-14,
        "rr",
    );
}

#[test]
fn powf_with_active_exponent() {
    // ∂/∂y xʸ = xʸ ln x; at x = 0 it is 0 by convention (as JAX).
    assert_eq!(
        grad(|v| v[0].powf(v[1]), &[2.0, 3.0]),
        vec![12.0, 8.0 * 2f64.ln()]
    );
    assert_eq!(grad(|v| v[0].powf(v[1]), &[0.0, 2.0]), vec![0.0, 0.0]);
    // x⁰ has derivative 0 everywhere, also at 0 (0·0⁻¹ would be NaN).
    assert_eq!(grad(|v| v[0].powf(v[1]), &[0.0, 0.0])[0], 0.0);
    assert_eq!(derivative(|a| a.powi(0), 0.0), 0.0);
}

#[test]
fn abs_sqrt_atan2_hypot_at_their_kinks() {
    assert_eq!(derivative(|a| a.abs(), 0.0), 0.0);
    assert_eq!(grad(|a| a[0].abs(), &[0.0]), vec![0.0]);
    assert_eq!(derivative(|a| a.abs(), -2.0), -1.0);
    assert_eq!(derivative(|a| a.sqrt(), 0.0), f64::INFINITY);
    assert_eq!(grad(|a| a[0].sqrt(), &[0.0]), vec![f64::INFINITY]);
    assert_eq!(grad(|v| v[0].atan2(v[1]), &[0.0, 0.0]), vec![0.0, 0.0]);
    assert_eq!(grad(|v| v[0].hypot(v[1]), &[0.0, 0.0]), vec![0.0, 0.0]);
}

#[test]
fn signum_acosh_and_remainder_at_their_kinks() {
    for x in [0.0, -0.0, 2.0, -2.0] {
        assert_eq!(derivative(|a| a.signum(), x), 0.0);
        assert_eq!(grad(|a| a[0].signum(), &[x]), vec![0.0]);
    }
    assert_eq!(Dual::new(-0.0, 1.0).signum().primal(), -1.0);
    assert_eq!(derivative(|a| a.acosh(), 1.0), f64::INFINITY);
    assert_eq!(grad(|a| a[0].acosh(), &[1.0]), vec![f64::INFINITY]);
    // x % y at a jump (x / y = 3): the branch taken, trunc(x / y) = 3.
    assert_eq!(grad(|v| v[0] % v[1], &[6.0, 2.0]), vec![1.0, -3.0]);
    assert_eq!(grad(|v| v[0] % v[1], &[-7.0, 2.0]), vec![1.0, 3.0]);
    // A constant divisor: the sawtooth's slope is 1; a constant dividend: −trunc.
    assert_eq!(derivative(|a| a % 2.0, 5.5), 1.0);
    assert_eq!(derivative(|a| 5.5 % a, 2.0), -2.0);
    assert_eq!(Dual::new(5.5, 1.0) % 2.0, 1.5);
}

#[test]
fn min_max_differentiate_the_argument_returned() {
    assert_eq!(grad(|v| v[0].min(v[1]), &[1.0, 2.0]), vec![1.0, 0.0]);
    assert_eq!(grad(|v| v[0].min(v[1]), &[3.0, 2.0]), vec![0.0, 1.0]);
    assert_eq!(grad(|v| v[0].max(v[1]), &[1.0, 2.0]), vec![0.0, 1.0]);
    // Ties: the first argument.
    assert_eq!(grad(|v| v[0].min(v[1]), &[2.0, 2.0]), vec![1.0, 0.0]);
    assert_eq!(grad(|v| v[0].max(v[1]), &[2.0, 2.0]), vec![1.0, 0.0]);
    assert_eq!(derivative(|a| a.max(Dual::constant(1.0)), 1.0), 1.0);
    assert_eq!(Scalar::min(1.0, 2.0), 1.0);
    assert!(Scalar::max(f64::NAN, 2.0).is_nan());
}

#[test]
fn branches_differentiate_the_branch_taken() {
    fn relu_sq<S: Scalar>(x: S) -> S {
        if x > 0.0 { x * x } else { S::zero() }
    }
    assert_eq!(derivative(relu_sq, 3.0), 6.0);
    assert_eq!(derivative(relu_sq, -3.0), 0.0);
    assert_eq!(grad(|v| relu_sq(v[0]), &[3.0]), vec![6.0]);
}

#[test]
fn an_unused_infinite_partial_does_not_poison_the_gradient() {
    // √x at 0 has an infinite derivative, but its value never reaches the output:
    // its adjoint is exactly zero, so the sweep skips it instead of forming 0·∞.
    let g = grad(
        |v| {
            let _unused = v[0].sqrt();
            v[0] * 2.0
        },
        &[0.0],
    );
    assert_eq!(g, vec![2.0]);
    // Likewise a branch that multiplies the infinite path by an exact zero cotangent.
    let g = grad(|v| v[0].sqrt() * 0.0 + v[0], &[0.0]);
    assert_eq!(g, vec![1.0]);
}

#[test]
fn a_zero_coefficient_meeting_an_infinite_partial_is_zero() {
    // Each function has derivative 0 at its point by the rule `Scale 0 δ = Zero`,
    // although the chain rule multiplies a structural zero by √'(0) = ∞ on the way.
    // Reverse mode keeps such a zero as a coefficient of the variable (so that
    // constness never depends on values), which must still not produce 0·∞ = NaN.
    fn zero_then_infinite<S: Scalar>(v: &[S]) -> S {
        (v[0] * 0.0).sqrt()
            + (v[0] - v[0]).sqrt()
            + (v[1] * 0.0).cbrt() * v[1]
            + (v[0] * 0.0).powf(v[1] - 1.5)
    }
    fn infinite_then_zero<S: Scalar>(v: &[S]) -> S {
        v[0].sqrt() * 0.0 + (v[1] - 2.0).cbrt() * 0.0 + v[1]
    }
    let point = [0.0, 2.0];
    assert_eq!(grad(|v| zero_then_infinite(v), &point), vec![0.0, 0.0]);
    assert_eq!(grad(|v| infinite_then_zero(v), &point), vec![0.0, 1.0]);
    // Forward mode agrees, and so does each second-order combination.
    assert_eq!(grad_forward(zero_then_infinite, &point), vec![0.0, 0.0]);
    assert_eq!(grad_forward(infinite_then_zero, &point), vec![0.0, 1.0]);
    for h in [
        hessian(|v| zero_then_infinite(v), &point),
        hessian(|v| infinite_then_zero(v), &point),
    ] {
        assert!(h.iter().flatten().all(|&e| e == 0.0), "Hessian {h:?}");
    }
}

#[test]
fn a_zero_tangent_meeting_an_infinite_primal_is_zero_in_forward_mode() {
    // `+ − ×` on `Dual<f64>` do not branch on which tangents are zero (forward.rs):
    // ∞ · 0 must still be the structural zero, and 1 · ∞ stay infinite.
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let x = Dual::new(inf, 0.0);
    let y = Dual::new(2.0, 1.0);
    assert_eq!((x * y).tangent(), inf);
    assert_eq!((y * x).tangent(), inf);
    assert_eq!((Dual::new(inf, 1.0) * Dual::new(2.0, 0.0)).tangent(), 2.0);
    assert!(
        (Dual::new(nan, 0.0) * Dual::new(3.0, 1.0))
            .tangent()
            .is_nan()
    );
    assert_eq!((Dual::new(3.0, inf) * Dual::new(0.0, 0.0)).tangent(), 0.0);
    assert_eq!((Dual::new(3.0, 0.0) * Dual::new(0.0, 0.0)).tangent(), 0.0);
    assert_eq!((Dual::new(1.0, inf) - Dual::new(1.0, 0.0)).tangent(), inf);
    assert!(
        (Dual::new(1.0, inf) - Dual::new(1.0, inf))
            .tangent()
            .is_nan()
    );
    // and agrees with reverse mode where the point is finite but a partial is not
    let f = |v: &[Dual<f64>]| (v[0].sqrt() * v[1] + v[1]) * 0.0 + v[0] * v[1];
    assert_eq!(grad_forward(f, &[0.0, 2.0]), vec![2.0, 0.0]);
    assert_eq!(
        grad(
            |v| (v[0].sqrt() * v[1] + v[1]) * 0.0 + v[0] * v[1],
            &[0.0, 2.0]
        ),
        vec![2.0, 0.0]
    );
}

#[test]
fn constants_and_sums_on_nested_duals_keep_the_convention() {
    // `Dual::scale` tests the constant before the tangent, and `+ −` add the
    // tangents scaled by their partials' ±1 at every level (forward.rs): a zero
    // constant gives structural zeros even against infinite or NaN tangents, an
    // infinite one leaves zero tangents zero, and sums carry ∞ and NaN through.
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let d2 = |a, b, c, d| Dual::new(Dual::new(a, b), Dual::new(c, d));
    let parts = |x: Dual<Dual<f64>>| {
        [
            x.primal().primal(),
            x.primal().tangent(),
            x.tangent().primal(),
            x.tangent().tangent(),
        ]
    };
    assert_eq!(parts(d2(1.0, 2.0, 3.0, inf) * 2.0), [2.0, 4.0, 6.0, inf]);
    assert_eq!(parts(d2(1.0, inf, nan, inf) * 0.0), [0.0; 4]);
    assert_eq!(parts(d2(1.0, 0.0, 0.0, 0.0) * inf), [inf, 0.0, 0.0, 0.0]);
    assert_eq!(parts(d2(1.0, 1.0, 2.0, 0.0) * inf), [inf, inf, inf, 0.0]);
    let p = parts(d2(1.0, 0.0, 0.0, 0.0) * nan);
    assert!(p[0].is_nan() && p[1..] == [0.0; 3], "{p:?}");
    let p = parts(d2(1.0, 1.0, 0.0, 0.0) * nan);
    assert!(
        p[..2].iter().all(|e| e.is_nan()) && p[2..] == [0.0; 2],
        "{p:?}"
    );
    assert_eq!(
        parts(d2(1.0, 2.0, 3.0, inf) + d2(1.0, 0.0, 0.0, 0.0)),
        [2.0, 2.0, 3.0, inf]
    );
    assert_eq!(
        parts(d2(1.0, 2.0, 3.0, inf) - d2(0.0, 1.0, inf, 1.0)),
        [1.0, 1.0, -inf, inf]
    );
    let p = parts(d2(1.0, 0.0, nan, 0.0) + d2(1.0, 0.0, 0.0, 0.0));
    assert!(
        p[2].is_nan() && [p[0], p[1], p[3]] == [2.0, 0.0, 0.0],
        "{p:?}"
    );
    // and the same numbers as the generic rule, a product with a lifted constant
    for c in [2.0, 0.0, inf] {
        for x in [
            d2(1.0, 2.0, 3.0, 4.0),
            d2(1.0, 0.0, 0.0, 0.0),
            d2(0.0, 1.0, 0.0, 1.0),
        ] {
            let (scaled, by_rule) = (parts(x * c), parts(x * Dual::constant(Dual::constant(c))));
            let same = |(a, b): (&f64, &f64)| a == b || (a.is_nan() && b.is_nan());
            assert!(
                scaled.iter().zip(&by_rule).all(same),
                "{x:?} · {c}: {scaled:?} against {by_rule:?}"
            );
        }
    }
}

/// The logistic function as a user primitive: value and derivative (σ(1−σ)).
struct Sigmoid;
impl UnaryPrimitive for Sigmoid {
    fn value<S: Scalar>(&self, x: S) -> S {
        S::one() / ((-x).exp() + 1.0)
    }
    fn derivative<S: Scalar>(&self, _x: S, v: S) -> S {
        v * (S::one() - v)
    }
}
fn sigmoid_composite<S: Scalar>(x: S) -> S {
    S::one() / ((-x).exp() + 1.0)
}

/// Softplus-weighted product as a two-argument user primitive: f(x, y) = x·ln(1 + eʸ).
struct XSoftplusY;
impl BinaryPrimitive for XSoftplusY {
    fn value<S: Scalar>(&self, x: S, y: S) -> S {
        x * y.exp().ln_1p()
    }
    fn partial_x<S: Scalar>(&self, _x: S, y: S, _v: S) -> S {
        y.exp().ln_1p()
    }
    fn partial_y<S: Scalar>(&self, x: S, y: S, _v: S) -> S {
        x * y.apply_unary(&Sigmoid)
    }
}

proptest! {
    #[test]
    fn user_primitives_work_in_every_mode(x in -4.0..4.0f64, y in -4.0..4.0f64) {
        // First order: the primitive equals the composite it stands for.
        let expected = derivative(sigmoid_composite, x);
        assert_close(derivative(|a| a.apply_unary(&Sigmoid), x), expected, MODE_TOL, "forward");
        assert_close(grad(|a| a[0].apply_unary(&Sigmoid), &[x])[0], expected, MODE_TOL, "reverse");
        assert_close(expected, central_diff(sigmoid_composite, x), FD_TOL, "finite differences");
        // Second order, all four nestings, against the composite.
        let expected2 = derivative(|a| derivative(sigmoid_composite, a), x);
        let s = |a: Dual<Dual<f64>>| a.apply_unary(&Sigmoid);
        assert_close(derivative(|a| derivative(s, a), x), expected2, MODE_TOL, "ff");
        assert_close(hessian(|a| a[0].apply_unary(&Sigmoid), &[x])[0][0], expected2, MODE_TOL, "fr");
        assert_close(grad(|a| derivative(|b| b.apply_unary(&Sigmoid), a[0]), &[x])[0], expected2, MODE_TOL, "rf");
        assert_close(grad(|a| grad(|b| b[0].apply_unary(&Sigmoid), &[a[0]])[0], &[x])[0], expected2, MODE_TOL, "rr");
        // The binary primitive: gradient and Hessian against the composite.
        let composite = |v: &[f64]| v[0] * v[1].exp().ln_1p();
        let g = grad(|v| v[0].apply_binary(v[1], &XSoftplusY), &[x, y]);
        let fd = common::central_grad(composite, &[x, y]);
        common::assert_all_close(&g, &fd, FD_TOL, "binary primitive gradient");
        let h = hessian(|v| v[0].apply_binary(v[1], &XSoftplusY), &[x, y]);
        let hc = hessian(|v| v[0] * v[1].exp().ln_1p(), &[x, y]);
        for i in 0..2 {
            common::assert_all_close(&h[i], &hc[i], MODE_TOL, "binary primitive Hessian");
        }
    }
}

#[test]
#[should_panic(
    expected = "nabla::jvp: the tangent `dx` has length 1 but the point `x` has length 2"
)]
fn jvp_with_mismatched_tangent_panics() {
    jvp(|v| v.to_vec(), &[1.0, 2.0], &[1.0]);
}

#[test]
#[should_panic(
    expected = "nabla::hvp: the direction `v` has length 3 but the point `x` has length 2"
)]
fn hvp_with_mismatched_direction_panics() {
    hvp(|v| v[0] * v[1], &[1.0, 2.0], &[1.0, 0.0, 0.0]);
}

#[test]
#[should_panic(
    expected = "nabla::Pullback::apply: the cotangent has length 1 but the function has 2 outputs"
)]
fn pullback_with_mismatched_cotangent_panics() {
    let (_, pullback) = vjp(|v| vec![v[0], v[0] * v[0]], &[1.0]);
    pullback.apply(&[1.0]);
}

#[test]
fn pullback_is_reusable_and_linear() {
    let (y, pullback) = vjp(|v| vec![v[0] * v[1], v[0].sin(), v[1]], &[2.0, 3.0]);
    assert_eq!(y.len(), pullback.outputs());
    let a = pullback.apply(&[1.0, 0.0, 0.0]);
    let b = pullback.apply(&[0.0, 1.0, 0.0]);
    let ab = pullback.apply(&[2.0, -3.0, 0.0]);
    for i in 0..2 {
        assert_close(ab[i], 2.0 * a[i] - 3.0 * b[i], 1e-15, "linearity");
    }
    // A constant output has no Delta; its cotangent goes nowhere.
    let (_, constant) = vjp(|_| vec![nabla::Reverse::from(4.0)], &[1.0]);
    assert_eq!(constant.apply(&[1.0]), vec![0.0]);
}
