//! The conveniences of generic and nested code: `stop_gradient`, auxiliary outputs,
//! `lift`, `f64` on the left (`LeftOperand`), `jacobian!` over a closure, and generic
//! `fn`s passed to the forward operators directly — each in every mode and nesting
//! it applies to.

mod common;

use common::{FD_TOL, MODE_TOL, assert_all_close, assert_close, central_diff, central_grad};
use nabla::{
    Dual, LeftOperand, Reverse, Scalar, derivative, grad, grad_forward, hessian, jacobian,
    jacobian_forward, jacobian_reverse, jvp, lift, value_and_grad, value_and_grad_with_aux,
};

// --- stop_gradient ---------------------------------------------------------------

#[test]
fn stop_gradient_keeps_the_value_and_drops_the_derivative() {
    let x = 3.0;
    let forward = derivative(|x| x * x.stop_gradient(), x);
    let reverse = grad(|x| x[0] * x[0].stop_gradient(), &[x])[0];
    assert_eq!((forward, reverse), (3.0, 3.0), "d/dx x·sg(x) = sg(x)");
    assert_eq!(Dual::new(x, 1.0).stop_gradient().primal(), x);
    assert_eq!(Dual::new(x, 1.0).stop_gradient().tangent(), 0.0);
    // Only the stopped path is cut: d/dx [x² + sg(x²)] = 2x.
    assert_eq!(
        grad(|x| x[0] * x[0] + (x[0] * x[0]).stop_gradient(), &[x]),
        vec![6.0]
    );
}

/// d/dx [d/dy y²·sg(y)](x) = d/dx [2x·sg(x)] = 2·sg(x) = 2x: `stop_gradient` stops
/// every level (as JAX's does), so the outer derivative does not see the stopped
/// factor either. A stop of the inner level only would give d/dx 2x² = 4x.
#[test]
fn stop_gradient_stops_every_level_in_every_nesting() {
    fn f<S: Scalar>(y: S) -> S {
        y * y * y.stop_gradient()
    }
    let x = 3.0;
    let ff = derivative(|a| derivative(f, a), x);
    let fr = derivative(|a| grad(|b| f(b[0]), &[a])[0], x);
    let rf = grad(|a| derivative(f, a[0]), &[x])[0];
    let rr = grad(|a| grad(|b| f(b[0]), &[a[0]])[0], &[x])[0];
    let h = hessian(|v| f(v[0]), &[x])[0][0];
    assert_eq!([ff, fr, rf, rr, h], [2.0 * x; 5]);
}

/// A stopped value captured from the outer level: the inner derivative of
/// y ↦ sg(x)·y² is 2·sg(x)·y, and the outer one sees no dependence through sg.
#[test]
fn stop_gradient_of_a_captured_value() {
    // g(x) = (d/dy sg(x)·y²)(x) = 2·sg(x)·x, so g'(x) = 2·sg(x) = 2x.
    let x = 1.5;
    let rf = grad(
        |a| derivative(|y| lift(a[0].stop_gradient()) * y * y, a[0]),
        &[x],
    )[0];
    let fr = derivative(
        |a| grad(|y| lift(a.stop_gradient()) * y[0] * y[0], &[a])[0],
        x,
    );
    assert_eq!([rf, fr], [2.0 * x; 2]);
}

// --- value_and_grad_with_aux -----------------------------------------------------

#[test]
fn aux_output_comes_with_the_same_value_and_gradient() {
    fn f<S: Scalar>(v: &[S]) -> S {
        v[0] * v[1].sin() + v[2] * v[2] * v[0]
    }
    let x = [0.3, -1.2, 2.0];
    let (value, gradient) = value_and_grad(|v| f(v), &x);
    let ((value_aux, (first, count)), gradient_aux) =
        value_and_grad_with_aux(|v| (f(v), (v[0].primal(), v.len())), &x);
    assert_eq!(value_aux, value);
    assert_eq!(gradient_aux, gradient);
    assert_eq!((first, count), (0.3, 3));
}

/// Inside an outer `grad` the auxiliary data are values of the outer level, and
/// the outer derivative flows through them.
#[test]
fn aux_output_under_nesting_is_differentiable() {
    // inner: ((y·a)², aux = y·a at y = 1) with a = x; the outer function returns
    // the inner gradient 2·a²·y… at y = 1 (= 2x²) plus the aux (= x): 4x + 1.
    let x = 2.0;
    let g = grad(
        |a| {
            let ((_, aux), inner) = value_and_grad_with_aux(
                |y| {
                    let p = y[0] * lift(a[0]);
                    (p * p, p.primal())
                },
                &[Reverse::from(1.0)],
            );
            inner[0] + aux
        },
        &[x],
    );
    assert_eq!(g, vec![4.0 * x + 1.0]);
}

// --- lift ------------------------------------------------------------------------

/// h(a) = d/dy [ (a + y)·(a − y)·(a·y)·(a / y) + (y − a)·(y / a) + y^a + atan2(y, a)
///               + hypot(y, a) + max(y, a) + min(y, a) ] at y = a,
/// written with the captured `a` lifted on either side of every operator; the
/// derivative of h must agree with finite differences in all four two-level
/// combinations, and with the same function written with explicit constants.
fn inner_body<T: Scalar>(y: T, a: T) -> T {
    (a + y) * (a - y) * (a * y) * (a / y)
        + (y - a) * (y / a)
        + y.powf(a)
        + y.atan2(a)
        + y.hypot(a)
        + y.max(a)
        + y.min(a)
}

fn h_reference(a: f64) -> f64 {
    central_diff(|y| inner_body(y, a), a)
}

#[test]
fn lift_on_both_sides_of_every_operator_in_all_four_nestings() {
    let a0 = 1.3;
    macro_rules! with_lift {
        ($y:expr, $a:expr) => {{
            let (y, a) = ($y, $a);
            (lift(a) + y) * (lift(a) - y) * (lift(a) * y) * (lift(a) / y)
                + (y - lift(a)) * (y / lift(a))
                + y.powf(lift(a))
                + y.atan2(lift(a))
                + y.hypot(lift(a))
                + y.max(lift(a))
                + y.min(lift(a))
        }};
    }
    let ff = derivative(|a| derivative(|y| with_lift!(y, a), a), a0);
    let fr = derivative(|a| grad(|y| with_lift!(y[0], a), &[a])[0], a0);
    let rf = grad(|a| derivative(|y| with_lift!(y, a[0]), a[0]), &[a0])[0];
    let rr = grad(|a| grad(|y| with_lift!(y[0], a[0]), &[a[0]])[0], &[a0])[0];
    let explicit = grad(
        |a| derivative(|y| inner_body(y, Dual::constant(a[0])), a[0]),
        &[a0],
    )[0];
    let fd = central_diff(h_reference, a0);
    assert_close(
        ff,
        fd,
        1e-5,
        "lift, forward over forward, vs finite differences",
    );
    for (what, d) in [("fr", fr), ("rf", rf), ("rr", rr), ("explicit", explicit)] {
        assert_close(d, ff, MODE_TOL, what);
    }
}

/// `lift` reaches two levels inward; the lifted value gets no perturbation of
/// either inner level.
#[test]
fn lift_across_two_levels() {
    // d/dx [ d/dy [ d/dz x·y·z ](y) ](x) = d/dx [ d/dy x·y ](x) = d/dx x = 1
    let d = derivative(
        |x| derivative(|y| derivative(|z| z * lift(x) * lift(y), y), x),
        5.0,
    );
    assert_eq!(d, 1.0);
    let g = grad(
        |x| {
            grad(
                |y| grad(|z| z[0] * lift(x[0]) * lift(y[0]), &[y[0]])[0],
                &[x[0]],
            )[0]
        },
        &[5.0],
    );
    assert_eq!(g, vec![1.0]);
}

#[test]
fn lift_into_assignment_operators() {
    let d = grad(
        |a| {
            derivative(
                |y| {
                    let mut acc = y;
                    acc += lift(a[0]);
                    acc *= lift(a[0]);
                    acc -= lift(a[0]);
                    acc /= lift(a[0]);
                    acc * y
                },
                a[0],
            )
        },
        &[2.0],
    );
    // inner: ((y + a)·a − a)/a · y = (y + a − 1)·y, derivative 2y + a − 1 at y = a:
    // 3a − 1, whose derivative is 3.
    assert_close(d[0], 3.0, MODE_TOL, "d/da (3a − 1)");
}

// --- f64 on the left in generic code ---------------------------------------------

fn left_constants<S: Scalar>(x: &[S]) -> S
where
    f64: LeftOperand<S>,
{
    2.0 * x[0] + (1.0 - x[1]) * (3.0 / x[0]) - 0.5 * x[1] * x[1]
}

fn left_constants_f64(x: &[f64]) -> f64 {
    2.0 * x[0] + (1.0 - x[1]) * (3.0 / x[0]) - 0.5 * x[1] * x[1]
}

/// A caller generic over the scalar passes the bound on.
fn generic_caller<S: Scalar>(x: &[S]) -> S
where
    f64: LeftOperand<S>,
{
    left_constants(x) * 2.0
}

#[test]
fn left_operand_bound_in_every_mode() {
    let x = [1.7, -0.4];
    let fd = central_grad(left_constants_f64, &x);
    assert_eq!(left_constants(&x), left_constants_f64(&x));
    assert_all_close(&grad(|v| left_constants(v), &x), &fd, FD_TOL, "reverse");
    assert_all_close(&grad_forward(left_constants, &x), &fd, FD_TOL, "forward");
    let doubled: Vec<f64> = fd.iter().map(|d| d * 2.0).collect();
    assert_all_close(
        &grad(|v| generic_caller(v), &x),
        &doubled,
        FD_TOL,
        "generic caller",
    );
    // Second order: the Hessian against finite differences of the gradient.
    let h = hessian(|v| left_constants(v), &x);
    for i in 0..2 {
        let column: Vec<f64> = (0..2)
            .map(|j| {
                central_diff(
                    |t| {
                        let mut p = x;
                        p[i] = t;
                        grad(|v| left_constants(v), &p)[j]
                    },
                    x[i],
                )
            })
            .collect();
        assert_all_close(&[h[0][i], h[1][i]], &column, 1e-5, "Hessian column");
    }
}

// --- jacobian! over a closure ----------------------------------------------------

#[test]
fn jacobian_macro_takes_either_mode_by_shape() {
    // 2 inputs, 3 outputs: forward; 3 inputs, 1 output: reverse.
    let x = [0.4, 1.1];
    let tall = jacobian!(|v| vec![v[0] * v[1], v[0].sin(), v[1].exp() / v[0]], &x);
    let tall_forward = jacobian_forward(|v| vec![v[0] * v[1], v[0].sin(), v[1].exp() / v[0]], &x);
    assert_eq!(tall, tall_forward);
    let y = [0.4, 1.1, -2.0];
    let wide = jacobian!(|v| vec![v[0] * v[1] * v[2] + v[2].cos()], &y);
    let wide_reverse = jacobian_reverse(|v| vec![v[0] * v[1] * v[2] + v[2].cos()], &y);
    assert_eq!(wide, wide_reverse);
    let fd = central_grad(|v| v[0] * v[1] * v[2] + v[2].cos(), &y);
    assert_all_close(&wide[0], &fd, FD_TOL, "wide Jacobian vs finite differences");
}

/// With a captured value of the enclosing level, lifted, under forward and reverse
/// outer operators, down both of `jacobian!`'s paths.
#[test]
fn jacobian_macro_nested_with_captures() {
    // J of v ↦ (a·v₀·v₁, v₀ + v₁) (square: forward) and of v ↦ a·v₀·v₁·v₂ (wide:
    // reverse); outer functions of a whose derivatives are known in closed form.
    // det J at (1, 2) = a·(v₁ − v₀) = a, so d/da = 1.
    let det = |a: f64| {
        let outer_forward = derivative(
            |a| {
                let j = jacobian!(
                    |v| vec![lift(a) * v[0] * v[1], v[0] + v[1]],
                    &[Dual::from(1.0), Dual::from(2.0)]
                );
                j[0][0] * j[1][1] - j[0][1] * j[1][0]
            },
            a,
        );
        let outer_reverse = grad(
            |a| {
                let j = jacobian!(
                    |v| vec![lift(a[0]) * v[0] * v[1], v[0] + v[1]],
                    &[Reverse::from(1.0), Reverse::from(2.0)]
                );
                j[0][0] * j[1][1] - j[0][1] * j[1][0]
            },
            &[a],
        )[0];
        (outer_forward, outer_reverse)
    };
    assert_eq!(det(3.0), (1.0, 1.0));
    // Σ J of the wide function at (1, 2, 3) = a·(6 + 3 + 2) = 11a: d/da = 11.
    let sum = grad(
        |a| {
            let j = jacobian!(
                |v| vec![lift(a[0]) * v[0] * v[1] * v[2]],
                &[Reverse::from(1.0), Reverse::from(2.0), Reverse::from(3.0)]
            );
            j[0].iter().copied().sum()
        },
        &[0.5],
    );
    assert_eq!(sum, vec![11.0]);
}

// --- generic fns passed directly -------------------------------------------------

fn polar<S: Scalar>(x: &[S]) -> Vec<S> {
    vec![x[0] * x[1].cos(), x[0] * x[1].sin()]
}

fn cube<S: Scalar>(x: S) -> S {
    x * x * x
}

fn norm2<S: Scalar>(x: &[S]) -> S {
    x.iter().map(|&v| v * v).sum()
}

/// Forward mode takes a generic `fn` bare; reverse mode needs `|x| f(x)` (its
/// closure must accept every trace's lifetime; see docs/library.md).
#[test]
fn forward_operators_accept_generic_fns() {
    assert_eq!(derivative(cube, 2.0), 12.0);
    assert_eq!(derivative(|x| derivative(cube, x), 2.0), 12.0);
    let (value, tangent) = jvp(polar, &[2.0, 0.0], &[0.0, 1.0]);
    assert_eq!((value, tangent), (vec![2.0, 0.0], vec![0.0, 2.0]));
    assert_eq!(grad_forward(norm2, &[1.0, 2.0]), vec![2.0, 4.0]);
    assert_eq!(
        jacobian_forward(polar, &[2.0, 0.0]),
        jacobian_reverse(|x| polar(x), &[2.0, 0.0])
    );
}
