//! Every primitive of the derivative table, in every mode and nesting combination,
//! against central finite differences and against the other modes.

mod common;

use common::{FD_TOL, MODE_TOL, assert_close, central_diff};
use nabla::{Binary, Dual, Reverse, Scalar, Unary, derivative, grad};
use proptest::prelude::*;

/// Each unary primitive with an interval on which it is smooth (sampled on both
/// signs where `symmetric`), away from points where finite differences break down.
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

/// An interval `(lo, hi, symmetric)`: [lo, hi], and also [−hi, −lo] if symmetric.
type Interval = (f64, f64, bool);

/// Each binary primitive with intervals for x and y.
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

/// Maps t ∈ [0, 1) and a sign choice into the interval.
fn sample((lo, hi, symmetric): Interval, t: f64, negative: bool) -> f64 {
    let x = lo + (hi - lo) * t;
    if symmetric && negative { -x } else { x }
}

// --- The four ways to take a second derivative of a scalar function g. ---

fn second_ff(op: Unary, x: f64) -> f64 {
    derivative(|a| derivative(|b| b.unary(op), a), x)
}
fn second_fr(op: Unary, x: f64) -> f64 {
    // forward over reverse
    derivative(|a| grad(|b| b[0].unary(op), &[a])[0], x)
}
fn second_rf(op: Unary, x: f64) -> f64 {
    // reverse over forward
    grad(|a| derivative(|b| b.unary(op), a[0]), &[x])[0]
}
fn second_rr(op: Unary, x: f64) -> f64 {
    grad(|a| grad(|b| b[0].unary(op), &[a[0]])[0], &[x])[0]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn unary_first_derivative(index in 0..UNARY.len(), t in 0.0..1.0f64, negative: bool) {
        let (op, lo, hi, symmetric) = UNARY[index];
        let x = sample((lo, hi, symmetric), t, negative);
        let forward = derivative(|a| a.unary(op), x);
        let reverse = grad(|a| a[0].unary(op), &[x])[0];
        let fd = central_diff(|a| op.eval(a), x);
        assert_close(forward, fd, FD_TOL, &format!("{op:?}'({x}) forward vs finite differences"));
        assert_close(reverse, forward, MODE_TOL, &format!("{op:?}'({x}) reverse vs forward"));
        // Every mode computes the primal with the table's value column.
        prop_assert_eq!(Dual::new(x, 1.0).unary(op).primal(), op.eval(x));
    }

    #[test]
    fn unary_second_derivative_all_nestings(index in 0..UNARY.len(), t in 0.0..1.0f64, negative: bool) {
        let (op, lo, hi, symmetric) = UNARY[index];
        let x = sample((lo, hi, symmetric), t, negative);
        let ff = second_ff(op, x);
        let fd = central_diff(|a| derivative(|b| b.unary(op), a), x);
        assert_close(ff, fd, 1e-5, &format!("{op:?}''({x}) vs finite differences"));
        assert_close(second_fr(op, x), ff, MODE_TOL, &format!("{op:?}''({x}) forward over reverse"));
        assert_close(second_rf(op, x), ff, MODE_TOL, &format!("{op:?}''({x}) reverse over forward"));
        assert_close(second_rr(op, x), ff, MODE_TOL, &format!("{op:?}''({x}) reverse over reverse"));
    }

    #[test]
    fn binary_partials(index in 0..BINARY.len(), s in 0.0..1.0f64, t in 0.0..1.0f64, nx: bool, ny: bool) {
        let (op, dx, dy) = BINARY[index];
        let (x, y) = (sample(dx, s, nx), sample(dy, t, ny));
        let fd = [central_diff(|a| op.eval(a, y), x), central_diff(|b| op.eval(x, b), y)];
        let forward = [
            derivative(|a| a.binary(op, Dual::constant(y)), x),
            derivative(|b| Dual::constant(x).binary(op, b), y),
        ];
        let reverse = grad(|v| v[0].binary(op, v[1]), &[x, y]);
        for i in 0..2 {
            assert_close(forward[i], fd[i], FD_TOL, &format!("∂{i} {op:?}({x}, {y}) vs finite differences"));
            assert_close(reverse[i], forward[i], MODE_TOL, &format!("∂{i} {op:?}({x}, {y}) reverse vs forward"));
        }
    }

    #[test]
    fn binary_hessian_all_nestings(index in 0..BINARY.len(), s in 0.0..1.0f64, t in 0.0..1.0f64, nx: bool, ny: bool) {
        let (op, dx, dy) = BINARY[index];
        let p = [sample(dx, s, nx), sample(dy, t, ny)];
        let forward_over_reverse = nabla::hessian(|v| v[0].binary(op, v[1]), &p);
        for i in 0..2 {
            // Column i of the Hessian by finite differences of the reverse gradient.
            let fd: Vec<f64> = (0..2).map(|j| central_diff(|a| {
                let mut q = p;
                q[i] = a;
                grad(|v| v[0].binary(op, v[1]), &q)[j]
            }, p[i])).collect();
            // The same column reverse over reverse and reverse over forward.
            let rr: Vec<f64> = (0..2).map(|j| grad(|v| grad(|w| w[0].binary(op, w[1]), v)[j], &p)[i]).collect();
            let rf: Vec<f64> = (0..2).map(|j| {
                grad(|v| {
                    let dir = [Dual::new(v[0], Reverse::from(if j == 0 { 1.0 } else { 0.0 })),
                               Dual::new(v[1], Reverse::from(if j == 1 { 1.0 } else { 0.0 }))];
                    dir[0].binary(op, dir[1]).tangent()
                }, &p)[i]
            }).collect();
            for j in 0..2 {
                let h = forward_over_reverse[j][i];
                assert_close(h, fd[j], 1e-5, &format!("H[{j}][{i}] of {op:?} at {p:?} vs finite differences"));
                assert_close(rr[j], h, MODE_TOL, &format!("H[{j}][{i}] of {op:?} reverse over reverse"));
                assert_close(rf[j], h, MODE_TOL, &format!("H[{j}][{i}] of {op:?} reverse over forward"));
            }
        }
    }
}

#[test]
fn table_values_match_std() {
    let x = 0.7_f64;
    assert_eq!(x.sin(), Unary::Sin.eval(x));
    assert_eq!(Scalar::sin(x), x.sin());
    assert_eq!(Scalar::powf(x, 2.5), x.powf(2.5));
    assert_eq!(Scalar::atan2(x, -0.3), x.atan2(-0.3));
    assert_eq!(Scalar::hypot(3.0, 4.0), 5.0);
    assert_eq!(Scalar::powi(x, 3), x.powi(3));
}

/// The table's `StopGradient` is the identity with derivative 0 in every mode
/// and nesting, as `Scalar::stop_gradient` is.
#[test]
fn stop_gradient_has_derivative_zero_at_every_level() {
    let f = |x: f64| derivative(|x| x * x.unary(Unary::StopGradient), x);
    assert_eq!(f(3.0), 3.0);
    assert_eq!(
        grad(
            |v| v[0] * (v[0] * v[1]).unary(Unary::StopGradient),
            &[3.0, 2.0]
        ),
        vec![6.0, 0.0]
    );
    // Nested: the inner derivative sg(x·2) is stopped for the outer level too.
    let outer = derivative(
        |x: Dual<f64>| {
            derivative(
                |y| y * (Dual::constant(x) * y).unary(Unary::StopGradient),
                Dual::constant(2.0),
            )
        },
        3.0,
    );
    assert_eq!(outer, 0.0);
    assert_eq!(Unary::StopGradient.eval(2.5), 2.5);
}

/// `Sign` is JAX's: x itself at ±0 and NaN, ±1 elsewhere, unlike `Signum`;
/// derivative 0.
#[test]
fn sign_values() {
    assert_eq!(Unary::Sign.eval(0.0_f64).to_bits(), 0.0_f64.to_bits());
    assert_eq!(Unary::Sign.eval(-0.0_f64).to_bits(), (-0.0_f64).to_bits());
    assert_eq!(Unary::Sign.eval(-3.5), -1.0);
    assert_eq!(Unary::Sign.eval(1e-300), 1.0);
    assert_eq!(Unary::Sign.eval(f64::NEG_INFINITY), -1.0);
    assert!(Unary::Sign.eval(f64::NAN).is_nan());
    assert_eq!(Unary::Signum.eval(0.0), 1.0);
    assert_eq!(derivative(|x| x.unary(Unary::Sign), 0.7), 0.0);
}

/// `Erf` (feature `erf`) against reference values (Abramowitz & Stegun
/// table 7.1, to the digits an f64 holds), its odd symmetry and limits, and
/// its derivative 2/√π e^(−x²).
#[cfg(feature = "erf")]
#[test]
fn erf_values() {
    let reference = [
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (0.1, 0.112_462_916_018_284_9),
    ];
    for (x, e) in reference {
        assert!((Unary::Erf.eval(x) - e).abs() <= 2e-16, "erf {x}");
        assert_eq!(Unary::Erf.eval(-x), -Unary::Erf.eval(x));
    }
    assert_eq!(Unary::Erf.eval(0.0), 0.0);
    assert_eq!(Unary::Erf.eval(f64::INFINITY), 1.0);
    assert!(Unary::Erf.eval(f64::NAN).is_nan());
    let d = derivative(|x| x.unary(Unary::Erf), 0.7);
    let want = std::f64::consts::FRAC_2_SQRT_PI * (-0.49_f64).exp();
    assert!((d - want).abs() <= 1e-15);
}
