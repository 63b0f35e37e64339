//! `tape::TapeReverse` without nalgebra: the perturbation-confusion test in every
//! nesting with the other modes, third derivatives across mixed towers, the
//! operators against their `Reverse` counterparts, single precision, and the
//! structural-zero convention shared with `Reverse`.

mod common;

use common::{MODE_TOL, assert_all_close, assert_close, central_diff};
use nabla::tape::{self, TapeReverse};
use nabla::{Dual, Real, Scalar, derivative, grad, lift};

// d/dx [x · (d/dy (x + y))(1)] at x = 1 is 1; confusing the two perturbations
// gives 2. The inner closure captures the outer x and lifts it.

#[test]
fn confusion_tape_over_tape() {
    let g = tape::grad(
        |x| x[0] * tape::grad(|y| lift(x[0]) + y[0], &[TapeReverse::from(1.0)])[0],
        &[1.0],
    );
    assert_eq!(g, vec![1.0]);
}

#[test]
fn confusion_forward_over_tape() {
    let d = derivative(
        |x| x * tape::grad(|y| lift(x) + y[0], &[Dual::from(1.0)])[0],
        1.0,
    );
    assert_eq!(d, 1.0);
}

#[test]
fn confusion_tape_over_forward() {
    let g = tape::grad(
        |x| x[0] * derivative(|y| lift(x[0]) + y, TapeReverse::from(1.0)),
        &[1.0],
    );
    assert_eq!(g, vec![1.0]);
}

#[test]
fn confusion_reverse_over_tape() {
    let g = tape::grad(
        |x| x[0] * grad(|y| lift(x[0]) + y[0], &[TapeReverse::from(1.0)])[0],
        &[1.0],
    );
    assert_eq!(g, vec![1.0]);
}

/// f(x) = x³ sin x: f''' by towers mixing all three scalars, against the closed
/// form f''' = −x³ cos x − 9x² sin x + 18x cos x + 6 sin x.
#[test]
fn third_derivatives_in_mixed_towers() {
    fn f<S: Scalar>(x: S) -> S {
        x * x * x * x.sin()
    }
    let x0 = 0.7_f64;
    let exact =
        -x0.powi(3) * x0.cos() - 9.0 * x0 * x0 * x0.sin() + 18.0 * x0 * x0.cos() + 6.0 * x0.sin();
    let tape_tape_tape = tape::grad(
        |x| tape::grad(|y| tape::grad(|z| f(z[0]), &[y[0]])[0], &[x[0]])[0],
        &[x0],
    )[0];
    let forward_tape_tape = derivative(
        |x| tape::grad(|y| tape::grad(|z| f(z[0]), &[y[0]])[0], &[x])[0],
        x0,
    );
    let tape_forward_reverse =
        tape::grad(|x| derivative(|y| grad(|z| f(z[0]), &[y])[0], x[0]), &[x0])[0];
    for (what, value) in [
        ("tape³", tape_tape_tape),
        ("forward-tape-tape", forward_tape_tape),
        ("tape-forward-reverse", tape_forward_reverse),
    ] {
        assert_close(value, exact, 1e-13, what);
    }
}

fn g<R: Real, S: Scalar<R>>(v: &[S]) -> S {
    (v[0] * v[1]).exp() / (v[2] * v[2] + R::ONE) + v[1].atan2(v[0]) - v[2].sqrt()
}

fn outputs<S: Scalar>(v: &[S]) -> Vec<S> {
    vec![g(v), v[0] * v[1] * v[2], v[2].ln_1p()]
}

#[test]
fn operators_agree_with_their_reverse_counterparts() {
    let x = [0.4, -1.3, 2.2];
    assert_eq!(
        tape::value_and_grad(g, &x),
        nabla::value_and_grad(|v| g(v), &x)
    );
    assert_eq!(
        tape::jacobian(outputs, &x),
        nabla::jacobian_reverse(|v| outputs(v), &x)
    );
    let (values, pullback) = tape::vjp(outputs, &x);
    let (values_r, pullback_r) = nabla::vjp(|v| outputs(v), &x);
    assert_eq!(values, values_r);
    assert_eq!(
        pullback.apply(&[1.0, -2.0, 0.5]),
        pullback_r.apply(&[1.0, -2.0, 0.5])
    );
    let h = tape::hessian(g, &x);
    let h_r = nabla::hessian(|v| g(v), &x);
    for (row, row_r) in h.iter().zip(&h_r) {
        assert_all_close(row, row_r, MODE_TOL, "Hessian");
    }
    let ((value, count), grad_aux) = tape::value_and_grad_with_aux(|v| (g(v), v.len()), &x);
    assert_eq!((value, count), (g(&x), 3));
    assert_eq!(grad_aux, tape::grad(g, &x));
    // and the gradient is right
    for i in 0..3 {
        let fd = central_diff(
            |t| {
                let mut y = x;
                y[i] = t;
                g(&y)
            },
            x[i],
        );
        assert_close(grad_aux[i], fd, 1e-6, &format!("∂{i}"));
    }
}

#[test]
fn single_precision() {
    let x32 = [0.4_f32, -1.3, 2.2];
    let g32 = tape::grad(g, &x32);
    let g64 = tape::grad(g, &x32.map(f64::from));
    for i in 0..3 {
        assert_close(f64::from(g32[i]), g64[i], 1e-5, &format!("∂{i}"));
    }
    let reverse32 = grad(|v| g(v), &x32);
    assert_eq!(g32, reverse32);
}

/// √x at 0 has an infinite derivative; multiplied by a structural zero it gives 0,
/// not NaN, exactly as with `Reverse` (the rules are the same code).
#[test]
fn structural_zeros_as_reverse() {
    let f = |v: &[TapeReverse<f64>]| v[0].sqrt() * 0.0 + v[1];
    assert_eq!(tape::grad(f, &[0.0, 1.0]), vec![0.0, 1.0]);
    assert_eq!(
        grad(|v| v[0].sqrt() * 0.0 + v[1], &[0.0, 1.0]),
        vec![0.0, 1.0]
    );
}
