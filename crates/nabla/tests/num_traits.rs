//! Code written only against `num_traits::Float` differentiates (feature
//! `num-traits`): in forward and reverse mode and every nesting, at `f64` and `f32`,
//! against finite differences and against the other modes; and each `Float` method
//! that is a composition rather than one table entry, on its own.
#![cfg(feature = "num-traits")]

mod common;

use common::{FD_TOL, MODE_TOL, assert_all_close, assert_close, central_diff, central_grad};
use nabla::{Dual, Reverse, derivative, grad, grad_forward, hessian};
// `NumCast` is not imported: its `from` would make every `T::from` ambiguous with
// `From::from`, as it does for `f64` (num-traits' own wart).
use num_traits::{Float, FloatConst, FromPrimitive, Num, ToPrimitive, Zero};

/// A function that knows nothing of nabla: `Float` methods, `NumCast` constants and
/// the `Num` operators, `%` included.
fn model<T: Float + FloatConst>(x: &[T]) -> T {
    let c = |v: f64| T::from(v).unwrap();
    let (a, b, d) = (x[0], x[1], x[2]);
    let smooth = a.powi(3) - b.hypot(a) + b.atan2(a + c(2.0)) + (a * b).exp_m1() - (b * b).ln_1p()
        + a.sin_cos().0 * b.sin_cos().1
        + d.asinh() * b.cbrt()
        + (d * c(0.5)).atanh()
        + (a + c(1.5)).acosh()
        + b.exp2() * c(0.1)
        + (a + c(3.0)).log2()
        + (b + c(2.0)).log10()
        + (d + c(4.0)).log(a + c(2.0))
        + a.mul_add(b, d)
        + a.tanh().powf(c(2.0))
        + (a * b).sqrt().recip()
        + d.to_degrees() * c(0.01)
        + b.to_radians()
        + T::PI() * a;
    // Piecewise terms, evaluated away from their kinks at the test points.
    let piecewise = a.max(b) * d.min(b)
        + (a - d).abs_sub(c(0.1))
        + (b * c(3.7)).fract()
        + (a * c(7.0)) % c(2.5)
        + d.abs() * a.signum()
        + b.clamp(c(0.0), c(1.0))
        + a.copysign(-d);
    smooth + piecewise
}

const POINT: [f64; 3] = [0.7, 1.3, 0.4];

#[test]
fn values_are_the_primitive_types() {
    let value = model(&POINT);
    let dual: Vec<Dual<f64>> = POINT.iter().map(|&v| Dual::constant(v)).collect();
    // Equal but for `mul_add`, which f64 fuses and nabla does not.
    assert_close(model(&dual).primal(), value, 1e-15, "Dual primal vs f64");
    let value32 = model(&POINT.map(|v| v as f32));
    let dual32: Vec<Dual<f32>> = POINT.iter().map(|&v| Dual::constant(v as f32)).collect();
    assert_close(
        f64::from(model(&dual32).primal()),
        f64::from(value32),
        1e-6,
        "f32",
    );
}

#[test]
fn gradient_in_both_modes_against_finite_differences() {
    let fd = central_grad(model, &POINT);
    let reverse = grad(|x| model(x), &POINT);
    let forward = grad_forward(model, &POINT);
    assert_all_close(&reverse, &fd, FD_TOL, "reverse vs finite differences");
    assert_all_close(&forward, &reverse, MODE_TOL, "forward vs reverse");
}

#[test]
fn hessian_in_all_four_nestings() {
    let h = hessian(|x| model(x), &POINT);
    for i in 0..3 {
        // Column i by finite differences of the reverse gradient.
        let fd: Vec<f64> = (0..3)
            .map(|j| {
                central_diff(
                    |t| {
                        let mut p = POINT;
                        p[i] = t;
                        grad(|x| model(x), &p)[j]
                    },
                    POINT[i],
                )
            })
            .collect();
        let rr: Vec<f64> = (0..3)
            .map(|j| grad(|x| grad(|y| model(y), x)[j], &POINT)[i])
            .collect();
        let ff: Vec<f64> = (0..3)
            .map(|j| grad_forward(|x| grad_forward(model, x)[j], &POINT)[i])
            .collect();
        let rf: Vec<f64> = (0..3)
            .map(|j| grad(|x| grad_forward(model, x)[j], &POINT)[i])
            .collect();
        let column: Vec<f64> = (0..3).map(|j| h[j][i]).collect();
        assert_all_close(
            &column,
            &fd,
            1e-5,
            "forward over reverse vs finite differences",
        );
        assert_all_close(&rr, &column, MODE_TOL, "reverse over reverse");
        assert_all_close(&ff, &column, MODE_TOL, "forward over forward");
        assert_all_close(&rf, &column, MODE_TOL, "reverse over forward");
    }
}

/// d³/dx³ of a `Float` function of one variable in all eight combinations of modes:
/// `Float` is implemented at every nesting.
#[test]
fn third_derivative_in_all_eight_combinations() {
    fn g<T: Float>(x: T) -> T {
        x.exp2() * x.sin() + x.powi(4).ln_1p() - x.atanh().hypot(x.cbrt())
    }
    let x0 = 0.6;
    let second = |x: f64| derivative(|a| derivative(g, a), x);
    let fd = central_diff(second, x0);
    let d = [
        derivative(|a| derivative(|b| derivative(g, b), a), x0),
        derivative(|a| derivative(|b| grad(|c| g(c[0]), &[b])[0], a), x0),
        derivative(|a| grad(|b| derivative(g, b[0]), &[a])[0], x0),
        derivative(|a| grad(|b| grad(|c| g(c[0]), &[b[0]])[0], &[a])[0], x0),
        grad(|a| derivative(|b| derivative(g, b), a[0]), &[x0])[0],
        grad(|a| derivative(|b| grad(|c| g(c[0]), &[b])[0], a[0]), &[x0])[0],
        grad(|a| grad(|b| derivative(g, b[0]), &[a[0]])[0], &[x0])[0],
        grad(
            |a| grad(|b| grad(|c| g(c[0]), &[b[0]])[0], &[a[0]])[0],
            &[x0],
        )[0],
    ];
    assert_close(d[0], fd, 1e-5, "third derivative vs finite differences");
    for (k, &dk) in d.iter().enumerate() {
        assert_close(dk, d[0], MODE_TOL, &format!("combination {k}"));
    }
}

#[test]
fn single_precision_agrees_with_double() {
    let point32 = POINT.map(|v| v as f32);
    let point64 = point32.map(f64::from);
    let g32 = grad(|x| model(x), &point32);
    let g64 = grad(|x| model(x), &point64);
    for i in 0..3 {
        assert_close(f64::from(g32[i]), g64[i], 1e-4, &format!("∂{i} f32 vs f64"));
    }
    let h32 = hessian(|x| model(x), &point32);
    let h64 = hessian(|x| model(x), &point64);
    for i in 0..3 {
        for j in 0..3 {
            assert_close(
                f64::from(h32[i][j]),
                h64[i][j],
                1e-4,
                &format!("H[{i}][{j}]"),
            );
        }
    }
}

/// The methods that are compositions, and the ones that look at the primal only.
#[test]
fn composed_methods_and_primal_predicates() {
    let d = |f: fn(Dual<f64>) -> Dual<f64>, x: f64| derivative(f, x);
    // log_b x = ln x / ln b: d/dx = 1 / (x ln b)
    assert_close(
        d(|x| x.log(Dual::from(3.0)), 2.0),
        1.0 / (2.0 * 3f64.ln()),
        1e-15,
        "log",
    );
    assert_eq!(d(Float::fract, 2.75), 1.0);
    assert_eq!(
        Float::fract(Dual::new(-2.75, 1.0)).primal(),
        (-2.75_f64).fract()
    );
    assert_eq!(d(|x| x.mul_add(x, Dual::from(1.0)), 3.0), 6.0);
    assert_eq!(d(|x| x.to_degrees(), 1.0), 1f64.to_degrees());
    assert_eq!(
        Float::to_radians(Dual::new(180.0, 1.0)).primal(),
        180f64.to_radians()
    );
    #[allow(deprecated)]
    {
        assert_eq!(d(|x| x.abs_sub(Dual::from(1.0)), 3.0), 1.0);
        assert_eq!(d(|x| x.abs_sub(Dual::from(1.0)), 0.5), 0.0);
    }
    assert_eq!(d(|x| x.copysign(Dual::from(-1.0)), 2.0), -1.0);
    assert_eq!(d(|x| x.clamp(Dual::from(0.0), Dual::from(1.0)), 0.5), 1.0);
    assert_eq!(d(|x| x.clamp(Dual::from(0.0), Dual::from(1.0)), 1.5), 0.0);
    // max/min ignore a NaN, as f64's do; otherwise the argument returned.
    let nan = Dual::from(f64::NAN);
    assert_eq!(Float::max(Dual::new(2.0, 1.0), nan).tangent(), 1.0);
    assert_eq!(Float::max(nan, Dual::new(2.0, 1.0)).tangent(), 1.0);
    assert_eq!(
        Float::min(Dual::new(2.0, 1.0), Dual::from(3.0)).tangent(),
        1.0
    );
    assert_eq!(
        Float::max(Dual::new(2.0, 1.0), Dual::from(3.0)).tangent(),
        0.0
    );
    // Predicates, classification and conversions of the primal value.
    let x = Dual::new(-0.0, 1.0);
    assert!(x.is_sign_negative() && x.is_zero() && !Float::is_nan(x));
    assert_eq!(
        Float::classify(Dual::new(1e-310, 1.0)),
        std::num::FpCategory::Subnormal
    );
    assert_eq!(
        Float::integer_decode(Dual::new(2.5, 1.0)),
        Float::integer_decode(2.5)
    );
    assert_eq!(<Dual<f64> as Float>::epsilon(), f64::EPSILON);
    assert!(<Dual<f32> as Float>::max_value().primal() == f32::MAX);
    assert_eq!(<Dual<f64> as num_traits::NumCast>::from(3_u8).unwrap(), 3.0);
    assert_eq!(<Dual<f64> as FromPrimitive>::from_i64(-4).unwrap(), -4.0);
    assert_eq!(Dual::new(3.7, 1.0).to_i64(), Some(3));
    assert_eq!(
        <Dual<f32> as Num>::from_str_radix("2.5", 10).unwrap(),
        2.5_f32
    );
    assert_eq!(<Dual<f64> as FloatConst>::PI(), std::f64::consts::PI);
    assert_eq!(<Dual<f64> as FloatConst>::PI().tangent(), 0.0);
    // Reverse mode implements the same traits.
    let g = grad(|v| Float::log(v[0], v[1]), &[8.0, 2.0]);
    assert_close(g[0], 1.0 / (8.0 * 2f64.ln()), 1e-15, "∂ log_b x / ∂x");
    assert_close(g[1], -3.0 / (2.0 * 2f64.ln()), 1e-15, "∂ log_b x / ∂b");
}

/// `Float` bounds written against the nested types directly.
#[test]
fn float_at_every_nesting() {
    fn is_float<T: Float + FloatConst + FromPrimitive>() {}
    is_float::<Dual<Dual<f64>>>();
    is_float::<Dual<Reverse<'static, f64>>>();
    is_float::<Reverse<'static, Dual<f32>>>();
    is_float::<Reverse<'static, Reverse<'static, Dual<f32>>>>();
}
