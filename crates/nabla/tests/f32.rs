//! Single precision: every scalar type built on `f32` (`Scalar<f32>`), tested like
//! the `f64` ones — every primitive in every mode and nesting, the operators, the
//! nesting and sharing properties — against the `f64` results at the same points.
//!
//! Tolerance. The f64 results are checked against finite differences elsewhere
//! (tests/primitives.rs); here an f32 derivative must agree with the f64 one
//! computed at the same (f32-representable) point to `F32_TOL` relative: a rule of a
//! few operations, each rounded to f32 (ε = 1.2e-7), on the well-conditioned
//! intervals of the table, stays within a few hundred ulps (the largest difference
//! seen is 2e-6, in a Rosenbrock Hessian entry; the tests pass at a tenth of these
//! tolerances, except that entry). Forward and reverse
//! mode in f32 agree with each other to `F32_MODE_TOL` (they differ only by the
//! order in which the same f32 products are summed).

mod common;

use common::assert_close;
use nabla::{
    Binary, Dual, LeftOperand, Real, Reverse, Scalar, Unary, UnaryPrimitive, derivative, grad,
    grad_forward, hessian, hvp, jacobian, jvp, lift, value_and_grad, vjp,
};
use proptest::prelude::*;

const F32_TOL: f64 = 2e-5;
const F32_MODE_TOL: f64 = 2e-6;

/// Each unary primitive with an interval on which it is smooth and well
/// conditioned (sampled on both signs where `symmetric`), as in tests/primitives.rs.
const UNARY: &[(Unary, f64, f64, bool)] = &[
    (Unary::Neg, 0.0, 5.0, true),
    (Unary::Recip, 0.2, 5.0, true),
    (Unary::Sin, 0.0, 6.0, true),
    (Unary::Cos, 0.0, 6.0, true),
    (Unary::Tan, 0.0, 1.3, true),
    (Unary::Asin, 0.0, 0.95, true),
    (Unary::Acos, 0.0, 0.95, true),
    (Unary::Atan, 0.0, 5.0, true),
    (Unary::Sinh, 0.0, 4.0, true),
    (Unary::Cosh, 0.0, 4.0, true),
    (Unary::Tanh, 0.0, 4.0, true),
    (Unary::Exp, 0.0, 5.0, true),
    (Unary::Ln, 0.05, 10.0, false),
    (Unary::Log1p, -0.9, 10.0, false),
    (Unary::ExpM1, 0.0, 5.0, true),
    (Unary::Exp2, 0.0, 5.0, true),
    (Unary::Log2, 0.05, 10.0, false),
    (Unary::Log10, 0.05, 10.0, false),
    (Unary::Asinh, 0.0, 5.0, true),
    (Unary::Acosh, 1.1, 10.0, false),
    (Unary::Atanh, 0.0, 0.9, true),
    (Unary::Sqrt, 0.05, 10.0, false),
    (Unary::Cbrt, 0.05, 10.0, true),
    (Unary::Abs, 0.01, 5.0, true),
    (Unary::Floor, 0.01, 0.99, true),
    (Unary::Ceil, 0.01, 0.99, true),
    (Unary::Round, 0.01, 0.49, true),
    (Unary::Trunc, 0.01, 0.99, true),
    (Unary::Signum, 0.01, 5.0, true),
    (Unary::Sign, 0.01, 5.0, true),
    #[cfg(feature = "erf")]
    (Unary::Erf, 0.0, 3.0, true),
    (Unary::Powi(0), 0.2, 3.0, true),
    (Unary::Powi(1), 0.2, 3.0, true),
    (Unary::Powi(2), 0.2, 3.0, true),
    (Unary::Powi(5), 0.2, 3.0, true),
    (Unary::Powi(-1), 0.2, 3.0, true),
    (Unary::Powi(-3), 0.2, 3.0, true),
];

type Interval = (f64, f64, bool);

const BINARY: &[(Binary, Interval, Interval)] = &[
    (Binary::Add, (0.0, 5.0, true), (0.0, 5.0, true)),
    (Binary::Sub, (0.0, 5.0, true), (0.0, 5.0, true)),
    (Binary::Mul, (0.0, 5.0, true), (0.0, 5.0, true)),
    (Binary::Div, (0.0, 5.0, true), (0.2, 5.0, true)),
    (Binary::Powf, (0.1, 4.0, false), (0.0, 3.0, true)),
    (Binary::Atan2, (0.1, 5.0, true), (0.1, 5.0, true)),
    (Binary::Hypot, (0.1, 5.0, true), (0.1, 5.0, true)),
    // |x / y| in (2.04, 2.95): away from the jumps of trunc(x / y).
    (Binary::Rem, (5.1, 5.9, true), (2.0, 2.5, true)),
];

/// A point of the interval, rounded to f32: the f64 reference is computed at exactly
/// the same point.
fn sample((lo, hi, symmetric): Interval, t: f64, negative: bool) -> f32 {
    let x = lo + (hi - lo) * t;
    (if symmetric && negative { -x } else { x }) as f32
}

/// The second derivative of `op` in the four nestings, at precision `R`.
fn second_derivatives<R: Real>(op: Unary, x: R) -> [R; 4] {
    [
        derivative(|a| derivative(|b| b.unary(op), a), x),
        derivative(|a| grad(|b| b[0].unary(op), &[a])[0], x),
        grad(|a| derivative(|b| b.unary(op), a[0]), &[x])[0],
        grad(|a| grad(|b| b[0].unary(op), &[a[0]])[0], &[x])[0],
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn unary_first_and_second_derivatives(index in 0..UNARY.len(), t in 0.0..1.0f64, negative: bool) {
        let (op, lo, hi, symmetric) = UNARY[index];
        let x = sample((lo, hi, symmetric), t, negative);
        let reference = derivative(|a| a.unary(op), f64::from(x));
        let forward = derivative(|a| a.unary(op), x);
        let reverse = grad(|a| a[0].unary(op), &[x])[0];
        assert_close(f64::from(forward), reference, F32_TOL, &format!("{op:?}'({x}) f32 vs f64"));
        assert_close(f64::from(reverse), f64::from(forward), F32_MODE_TOL, &format!("{op:?}'({x}) reverse vs forward"));
        // The primal is the value column at f32: the standard library's f32 function.
        prop_assert_eq!(Dual::new(x, 1.0).unary(op).primal(), op.eval(x));

        let reference = second_derivatives(op, f64::from(x))[0];
        let [ff, fr, rf, rr] = second_derivatives(op, x);
        assert_close(f64::from(ff), reference, F32_TOL, &format!("{op:?}''({x}) f32 vs f64"));
        for (what, d) in [("forward over reverse", fr), ("reverse over forward", rf), ("reverse over reverse", rr)] {
            assert_close(f64::from(d), f64::from(ff), F32_MODE_TOL, &format!("{op:?}''({x}) {what}"));
        }
    }

    #[test]
    fn binary_gradient_and_hessian(index in 0..BINARY.len(), s in 0.0..1.0f64, t in 0.0..1.0f64, nx: bool, ny: bool) {
        let (op, dx, dy) = BINARY[index];
        let p = [sample(dx, s, nx), sample(dy, t, ny)];
        let p64 = p.map(f64::from);
        let g = grad(|v| v[0].binary(op, v[1]), &p);
        let g_forward = grad_forward(|v| v[0].binary(op, v[1]), &p);
        let g64 = grad(|v| v[0].binary(op, v[1]), &p64);
        let h = hessian(|v| v[0].binary(op, v[1]), &p);
        let h64 = hessian(|v| v[0].binary(op, v[1]), &p64);
        for i in 0..2 {
            assert_close(f64::from(g[i]), g64[i], F32_TOL, &format!("∂{i} {op:?}{p:?} f32 vs f64"));
            assert_close(f64::from(g_forward[i]), f64::from(g[i]), F32_MODE_TOL, &format!("∂{i} {op:?}{p:?} forward vs reverse"));
            for j in 0..2 {
                assert_close(f64::from(h[i][j]), h64[i][j], F32_TOL, &format!("H[{i}][{j}] {op:?}{p:?} f32 vs f64"));
            }
        }
    }
}

/// Rosenbrock over any precision, with constants made by `R::from_f64`.
fn rosenbrock<R: Real, S: Scalar<R>>(x: &[S]) -> S {
    let hundred = R::from_f64(100.0);
    (0..x.len() - 1)
        .map(|i| {
            let a = -x[i] + R::ONE;
            let b = x[i + 1] - x[i] * x[i];
            a * a + b * b * hundred
        })
        .sum()
}

#[test]
fn every_operator_at_f32_agrees_with_f64() {
    let x: Vec<f32> = vec![-1.2, 1.0, 0.3, -0.7, 2.0];
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let close = |a: &[f32], b: &[f64], what: &str| {
        assert_eq!(a.len(), b.len());
        for (i, (&a, &b)) in a.iter().zip(b).enumerate() {
            assert_close(f64::from(a), b, F32_TOL, &format!("{what}[{i}]"));
        }
    };
    let (value, gradient) = value_and_grad(|v| rosenbrock(v), &x);
    let (value64, gradient64) = value_and_grad(|v| rosenbrock(v), &x64);
    assert_close(f64::from(value), value64, F32_TOL, "value");
    close(&gradient, &gradient64, "gradient");
    close(
        &grad_forward(rosenbrock, &x),
        &gradient64,
        "forward gradient",
    );

    let direction: Vec<f32> = vec![0.5, -1.0, 0.25, 2.0, -0.125];
    let direction64: Vec<f64> = direction.iter().map(|&v| f64::from(v)).collect();
    let hv = hvp(|v| rosenbrock(v), &x, &direction);
    close(&hv, &hvp(|v| rosenbrock(v), &x64, &direction64), "hvp");
    let h = hessian(|v| rosenbrock(v), &x);
    let h64 = hessian(|v| rosenbrock(v), &x64);
    for (row, row64) in h.iter().zip(&h64) {
        close(row, row64, "Hessian row");
    }

    let polar = |v: &[Dual<f32>]| vec![v[0] * v[1].cos(), v[0] * v[1].sin(), v[0] * v[0]];
    let (y, tangent) = jvp(polar, &[2.0_f32, 0.5], &[1.0, -1.0]);
    let (y64, tangent64) = jvp(
        |v| vec![v[0] * v[1].cos(), v[0] * v[1].sin(), v[0] * v[0]],
        &[2.0, 0.5],
        &[1.0, -1.0],
    );
    close(&y, &y64, "jvp value");
    close(&tangent, &tangent64, "jvp tangent");
    let (_, pullback) = vjp(
        |v| vec![v[0] * v[1].cos(), v[0] * v[1].sin(), v[0] * v[0]],
        &[2.0_f32, 0.5],
    );
    let (_, pullback64) = vjp(
        |v| vec![v[0] * v[1].cos(), v[0] * v[1].sin(), v[0] * v[0]],
        &[2.0, 0.5],
    );
    close(
        &pullback.apply(&[1.0, 2.0, -1.0]),
        &pullback64.apply(&[1.0, 2.0, -1.0]),
        "vjp",
    );

    // A reverse-mode trace entry holds two f32 weights: 16 bytes instead of 24.
    assert_eq!(pullback.entry_bytes(), 16);
    assert_eq!(pullback64.entry_bytes(), 24);
    let j = jacobian!(
        |v| vec![v[0] * v[1].cos(), v[0] * v[1].sin()],
        &[2.0_f32, 0.5]
    );
    let j64 = jacobian!(|v| vec![v[0] * v[1].cos(), v[0] * v[1].sin()], &[2.0, 0.5]);
    for (row, row64) in j.iter().zip(&j64) {
        close(row, row64, "Jacobian row");
    }
}

/// A `VectorFunction` at f32, through `jacobian`.
#[test]
fn vector_function_at_f32() {
    struct Scaled<S>(S);
    impl<S: Scalar<f32>> nabla::VectorFunction<S, f32> for Scaled<S> {
        fn eval<T: nabla::Lift<S, f32>>(&self, x: &[T]) -> Vec<T> {
            vec![T::lift(self.0) * x[0] * x[1], x[0] + x[1] * 2.0]
        }
    }
    assert_eq!(
        jacobian(&Scaled(3.0_f32), &[1.0, 2.0]),
        vec![vec![6.0, 3.0], vec![1.0, 2.0]]
    );
    // Nested: d/da det J = d/da (2a·y − a·x) at (1, 2) = 3.
    let g = grad(
        |a| {
            let j = jacobian(&Scaled(a[0]), &[Reverse::from(1.0_f32), Reverse::from(2.0)]);
            j[0][0] * j[1][1] - j[0][1] * j[1][0]
        },
        &[0.5_f32],
    );
    assert_eq!(g, vec![3.0_f32]);
}

/// Perturbation confusion in all four combinations, at f32 (the answer is exact).
#[test]
fn no_perturbation_confusion_at_f32() {
    let ff = derivative(
        |x| x * derivative(|y| lift(x) + y, Dual::from(1.0_f32)),
        1.0_f32,
    );
    let fr = derivative(
        |x| x * grad(|y| lift(x) + y[0], &[Dual::from(1.0_f32)])[0],
        1.0_f32,
    );
    let rf = grad(
        |x| x[0] * derivative(|y| lift(x[0]) + y, Reverse::from(1.0_f32)),
        &[1.0_f32],
    );
    let rr = grad(
        |x| x[0] * grad(|y| lift(x[0]) + y[0], &[Reverse::from(1.0_f32)])[0],
        &[1.0_f32],
    );
    assert_eq!((ff, fr, rf[0], rr[0]), (1.0, 1.0, 1.0, 1.0));
}

/// Generic code at f32: constants of its precision on the right, on the left with
/// the `LeftOperand` bound, comparisons with f32, `stop_gradient`, `value`.
#[test]
fn constants_comparisons_and_conveniences_at_f32() {
    fn f<S: Scalar<f32>>(x: S) -> S
    where
        f32: LeftOperand<S>,
    {
        let y = 2.0 * x + (1.0 - x) / 4.0 - 3.0 / x;
        if y > 0.0 { y * 0.5 } else { -y }
    }
    // At x = 2: y = 4 − 0.25 − 1.5 = 2.25 > 0, f = y/2; f' = (2 − 0.25 + 3/x²)/2.
    assert_eq!(f(2.0_f32), 1.125);
    assert_eq!(derivative(f, 2.0_f32), (2.0 - 0.25 + 0.75) / 2.0);
    assert_eq!(
        grad(|x| f(x[0]), &[2.0_f32]),
        vec![(2.0 - 0.25 + 0.75) / 2.0]
    );
    assert_eq!(derivative(|x| x * x.stop_gradient(), 3.0_f32), 3.0);
    let x = Dual::new(Dual::new(1.5_f32, 1.0), Dual::from(0.0));
    let value: f32 = x.value();
    assert_eq!(value, 1.5);
    assert_eq!(x.to_string(), "1.5");
}

/// A user primitive implemented once for both precisions, at f32 and nested.
#[test]
fn user_primitive_at_both_precisions() {
    struct Sigmoid;
    impl<R: Real> UnaryPrimitive<R> for Sigmoid {
        fn value<S: Scalar<R>>(&self, x: S) -> S {
            S::one() / ((-x).exp() + R::ONE)
        }
        fn derivative<S: Scalar<R>>(&self, _x: S, value: S) -> S {
            value * (S::one() - value)
        }
    }
    assert_eq!(derivative(|x| x.apply_unary(&Sigmoid), 0.0_f32), 0.25);
    assert_eq!(derivative(|x| x.apply_unary(&Sigmoid), 0.0_f64), 0.25);
    let second = grad(
        |x| derivative(|y| y.apply_unary(&Sigmoid), x[0]),
        &[0.5_f32],
    )[0];
    let second64 = grad(|x| derivative(|y| y.apply_unary(&Sigmoid), x[0]), &[0.5])[0];
    assert_close(f64::from(second), second64, F32_TOL, "σ''(0.5)");
}

/// The chain of tests/sharing.rs at f32: each step records two trace entries,
/// and the gradient is exact (powers of two).
#[test]
fn trace_is_linear_at_f32() {
    const STEPS: usize = 100_000;
    let (_, pullback) = vjp(
        |v| vec![(0..STEPS).fold(v[0], |acc, _| acc * v[1] + acc)],
        &[1.0_f32, 0.0],
    );
    assert_eq!(pullback.trace_len(), 2 + 2 * STEPS);
    // d/dx x(1 + y)ⁿ at y = 0 is 1; d/dy is n·x.
    assert_eq!(pullback.apply(&[1.0]), vec![1.0, STEPS as f32]);
}
