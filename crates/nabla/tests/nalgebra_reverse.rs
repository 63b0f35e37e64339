//! nalgebra code differentiates in reverse mode (feature `nalgebra`), through
//! `tape::TapeReverse`: products, `cholesky`, `lu().solve`, `try_inverse` and
//! `norm` on `DMatrix`/`SMatrix`, first order against closed forms, finite
//! differences and forward mode; second order forward over reverse, reverse over
//! forward and reverse over reverse; misuse (a value escaping its operator, two
//! traces mixed) panicking with a clear message; and recording on two threads at
//! once.
#![cfg(feature = "nalgebra")]

mod common;

use common::matrices::{logdet, logdet_cholesky, spd};

use common::{FD_TOL, MODE_TOL, assert_all_close, assert_close, central_diff, central_grad};
use nabla::tape::{self, TapeReverse};
use nabla::{Dual, Reverse, Scalar, grad_forward, jvp, lift};
use nalgebra::{DMatrix, DVector, RealField, SMatrix, SVector};

/// A deterministic pseudo-random sequence in [−1, 1) (a 64-bit LCG).
fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

const N: usize = 50;

/// A = M Mᵀ + N·I for the N×N matrix M of the parameters (row-major): symmetric
/// positive definite for every M.
fn spd_of<T: RealField + Copy>(m: &[T]) -> DMatrix<T> {
    let n = (m.len() as f64).sqrt() as usize;
    let m = DMatrix::from_row_slice(n, n, m);
    &m * m.transpose() + DMatrix::identity(n, n) * nalgebra::convert::<f64, T>(n as f64)
}

fn logdet_big<T: RealField + Copy>(m: &[T]) -> T {
    logdet(spd_of(m))
}

/// The gradient of log det (M Mᵀ + N I) with respect to all 2500 entries of M, by
/// reverse mode through the product and the Cholesky factorisation, against the
/// trace formula ∂ log det A/∂Mₖₗ = tr(A⁻¹ ∂A/∂Mₖₗ) — which is 2 (A⁻¹ M)ₖₗ for
/// every entry, and is also formed literally, with ∂A by forward mode, for a few —
/// and against forward mode along random directions.
#[test]
fn cholesky_log_det_gradient_of_a_50_by_50_matrix() {
    let m = pseudo_random(N * N, 7);
    let (value, g) = tape::value_and_grad(logdet_big, &m);
    assert_close(value, logdet_big(&m), 1e-14, "value");

    let a = spd_of(&m);
    let a_inv = a.clone().try_inverse().expect("invertible");
    let closed = (&a_inv * DMatrix::from_row_slice(N, N, &m)) * 2.0;
    for k in 0..N {
        for l in 0..N {
            assert_close(
                g[k * N + l],
                closed[(k, l)],
                1e-12,
                &format!("∂/∂M[{k},{l}]"),
            );
        }
    }
    for &(k, l) in &[(0, 0), (3, 17), (49, 2), (25, 25)] {
        let seeded: Vec<Dual<f64>> = m
            .iter()
            .enumerate()
            .map(|(i, &v)| Dual::new(v, if i == k * N + l { 1.0 } else { 0.0 }))
            .collect();
        let da = spd_of(&seeded).map(|x| x.tangent());
        assert_close(g[k * N + l], (&a_inv * da).trace(), 1e-12, "tr(A⁻¹ ∂A)");
    }
    for seed in [1, 2] {
        let v = pseudo_random(N * N, seed);
        let (_, tangent) = jvp(|x| vec![logdet_big(x)], &m, &v);
        let along: f64 = g.iter().zip(&v).map(|(g, v)| g * v).sum();
        assert_close(along, tangent[0], 1e-11, "∇f·v vs forward mode");
    }
}

/// Σ of the solution of A x = b, by LU.
fn solve_sum<T: RealField + Copy>(p: &[T]) -> T {
    let b = DVector::from_row_slice(&[p[0], nalgebra::convert(1.0), p[2] * p[1]]);
    spd(p).lu().solve(&b).expect("invertible").sum()
}

/// The Frobenius norm of A⁻¹, by `try_inverse` and `norm`.
fn inverse_norm<T: RealField + Copy>(p: &[T]) -> T {
    spd(p).try_inverse().expect("invertible").norm()
}

/// log det A by LU.
fn logdet_lu<T: RealField + Copy>(p: &[T]) -> T {
    spd(p).lu().determinant().ln()
}

const P: [f64; 3] = [0.8, -0.3, 1.1];

type Function = (
    &'static str,
    fn(&[TapeReverse<f64>]) -> TapeReverse<f64>,
    fn(&[Dual<f64>]) -> Dual<f64>,
    fn(&[f64]) -> f64,
);

const FUNCTIONS: [Function; 4] = [
    (
        "log det by Cholesky",
        logdet_cholesky,
        logdet_cholesky,
        logdet_cholesky,
    ),
    ("LU solve", solve_sum, solve_sum, solve_sum),
    (
        "norm of the inverse",
        inverse_norm,
        inverse_norm,
        inverse_norm,
    ),
    ("log det by LU", logdet_lu, logdet_lu, logdet_lu),
];

#[test]
fn gradients_through_decompositions_against_finite_differences_and_forward_mode() {
    for (what, reverse, forward, plain) in FUNCTIONS {
        let (value, g) = tape::value_and_grad(reverse, &P);
        assert_eq!(value, plain(&P), "{what}: value");
        assert_all_close(&g, &central_grad(plain, &P), FD_TOL, what);
        assert_all_close(&g, &grad_forward(forward, &P), MODE_TOL, what);
    }
}

/// The same functions at a point where they are not near-linear: the comparison
/// must see more than the first digits.
#[test]
fn gradients_at_a_second_point() {
    let q = [-1.7, 0.9, 2.4];
    for (what, reverse, forward, plain) in FUNCTIONS {
        let g = tape::grad(reverse, &q);
        assert!(g.iter().all(|gi| gi.abs() > 1e-6), "{what}: {g:?}");
        assert_all_close(&g, &central_grad(plain, &q), FD_TOL, what);
        assert_all_close(&g, &grad_forward(forward, &q), MODE_TOL, what);
    }
}

/// One evaluation, one sweep per output: the Jacobian of A⁻¹ b by `lu().solve`
/// against forward mode.
#[test]
fn jacobian_of_a_solve_by_vjp() {
    fn solve<T: RealField + Copy>(p: &[T]) -> Vec<T> {
        let b = DVector::from_row_slice(&[p[0], nalgebra::convert(1.0), p[2] * p[1]]);
        spd(p)
            .lu()
            .solve(&b)
            .expect("invertible")
            .iter()
            .copied()
            .collect()
    }
    let j = tape::jacobian(solve, &P);
    let j_forward = nabla::jacobian_forward(solve, &P);
    for (row, row_forward) in j.iter().zip(&j_forward) {
        assert_all_close(row, row_forward, MODE_TOL, "Jacobian row");
    }
    let (y, pullback) = tape::vjp(solve, &P);
    assert_all_close(&y, &solve(&P), 1e-15, "values");
    let ct = [0.3, -1.2, 2.0];
    let expected: Vec<f64> = (0..3)
        .map(|i| (0..3).map(|k| ct[k] * j_forward[k][i]).sum())
        .collect();
    assert_all_close(&pullback.apply(&ct), &expected, MODE_TOL, "ctᵀJ");
}

/// Fixed-size matrices: d/dx ‖x‖ = x/‖x‖ through `SVector::norm`, and the gradient
/// of det(M) for a 2×2 `SMatrix` (the cofactors).
#[test]
fn static_matrices_and_norms() {
    let x = [3.0, -4.0, 12.0];
    let g = tape::grad(|v| SVector::<_, 3>::from_row_slice(v).norm(), &x);
    assert_all_close(&g, &[3.0 / 13.0, -4.0 / 13.0, 12.0 / 13.0], 1e-15, "∇‖x‖");
    let m = [1.5, -2.0, 0.5, 3.0];
    let g = tape::grad(|v| SMatrix::<_, 2, 2>::from_row_slice(v).determinant(), &m);
    assert_all_close(&g, &[m[3], -m[2], -m[1], m[0]], 1e-15, "∇ det");
}

/// Finite differences of a gradient, row `i` of the Hessian.
fn fd_hessian_row(grad: impl Fn(&[f64]) -> Vec<f64>, i: usize) -> Vec<f64> {
    (0..3)
        .map(|j| {
            central_diff(
                |t| {
                    let mut q = P;
                    q[j] = t;
                    grad(&q)[i]
                },
                P[j],
            )
        })
        .collect()
}

/// The Hessian of the Cholesky log-determinant in three nestings through the
/// factorisation — forward over reverse (`TapeReverse<Dual<f64>>`), reverse over
/// reverse (`TapeReverse<TapeReverse<f64>>`) and reverse over forward
/// (`Dual<TapeReverse<f64>>`) — against finite differences of the reverse-mode
/// gradient, against forward over forward, and for symmetry.
#[test]
fn hessian_of_the_cholesky_log_determinant() {
    let forward_over_reverse = tape::hessian(logdet_cholesky, &P);
    let reverse_over_reverse = tape::jacobian(|p| tape::grad(logdet_cholesky, p), &P);
    let reverse_over_forward = tape::jacobian(|p| grad_forward(logdet_cholesky, p), &P);
    let forward_over_forward: Vec<Vec<f64>> = (0..3)
        .map(|i| grad_forward(|x| grad_forward(logdet_cholesky, x)[i], &P))
        .collect();
    for i in 0..3 {
        let fd = fd_hessian_row(|q| tape::grad(logdet_cholesky, q), i);
        for (what, h) in [
            ("forward over reverse", &forward_over_reverse),
            ("reverse over reverse", &reverse_over_reverse),
            ("reverse over forward", &reverse_over_forward),
        ] {
            assert_all_close(&h[i], &fd, 1e-6, &format!("{what}, row {i} vs FD"));
            assert_all_close(
                &h[i],
                &forward_over_forward[i],
                MODE_TOL,
                &format!("{what}, row {i} vs forward over forward"),
            );
            for (j, row) in h.iter().enumerate() {
                assert_close(h[i][j], row[i], 1e-12, &format!("{what}: symmetry"));
            }
        }
    }
    assert!(
        forward_over_reverse[0][1].abs() > 1e-3,
        "a Hessian that is not trivial"
    );
}

/// A Hessian-vector product of the 50×50 log-determinant, forward over reverse,
/// against finite differences of the gradient along the direction.
#[test]
fn hessian_vector_product_of_the_50_by_50_log_determinant() {
    let m = pseudo_random(N * N, 11);
    let v = pseudo_random(N * N, 12);
    let hv = tape::hvp(logdet_big, &m, &v);
    let h = 1e-5;
    let shifted = |s: f64| -> Vec<f64> {
        let q: Vec<f64> = m.iter().zip(&v).map(|(m, v)| m + s * v).collect();
        tape::grad(logdet_big, &q)
    };
    let (plus, minus) = (shifted(h), shifted(-h));
    let fd: Vec<f64> = plus
        .iter()
        .zip(&minus)
        .map(|(p, q)| (p - q) / (2.0 * h))
        .collect();
    assert_all_close(&hv, &fd, 1e-6, "H·v vs FD of the gradient");
}

/// The tape records into the same trace by the same rules as `Reverse`: on code
/// written against `num_traits::Float` the two gradients agree bit for bit, and so
/// does the trace length.
#[test]
fn same_trace_and_gradient_as_reverse() {
    fn f<T: num_traits::Float>(x: &[T]) -> T {
        let mut s = T::zero();
        for w in x.windows(2) {
            s = s + (w[0] * w[1]).sin() + w[0].hypot(w[1]) + w[1].powi(3) / w[0].exp();
        }
        s
    }
    let x = pseudo_random(40, 3);
    let (v, g) = nabla::value_and_grad(|x: &[Reverse<'_, f64>]| f(x), &x);
    let (vt, gt) = tape::value_and_grad(f, &x);
    assert_eq!(v, vt);
    assert_eq!(g, gt);
    let (_, pullback) = nabla::vjp(|x: &[Reverse<'_, f64>]| vec![f(x)], &x);
    let (_, tape_pullback) = tape::vjp(|x| vec![f(x)], &x);
    assert_eq!(pullback.trace_len(), tape_pullback.trace_len());
}

#[test]
fn single_precision_through_cholesky() {
    let p32 = P.map(|v| v as f32);
    let g32 = tape::grad(logdet_cholesky, &p32);
    let g64 = tape::grad(logdet_cholesky, &p32.map(f64::from));
    for i in 0..3 {
        assert_close(f64::from(g32[i]), g64[i], 1e-5, &format!("∂{i} f32 vs f64"));
    }
}

/// Nesting at the same type takes the outer value through `lift`, and gets the
/// right answer: d/dx [x · (d/dy x·y²)(x)] = d/dx 2x³ = 6x².
#[test]
fn nested_at_the_same_type_with_lift() {
    let g = tape::grad(
        |x| {
            let outer = x[0];
            let inner = tape::grad(|y| lift(outer) * y[0] * y[0], &[outer]);
            outer * inner[0]
        },
        &[1.5],
    );
    assert_close(g[0], 6.0 * 1.5 * 1.5, 1e-15, "6x²");
}

#[test]
fn the_scalar_is_static_send_and_sync() {
    fn nalgebra_scalar<T: 'static + Copy + Send + Sync + RealField>() {}
    nalgebra_scalar::<TapeReverse<f64>>();
    nalgebra_scalar::<TapeReverse<f32>>();
    nalgebra_scalar::<TapeReverse<TapeReverse<f64>>>();
    nalgebra_scalar::<Dual<TapeReverse<f64>>>();
    nalgebra_scalar::<TapeReverse<Dual<f64>>>();
}

#[test]
#[should_panic(expected = "escaped its operator")]
fn a_value_kept_from_a_finished_differentiation_panics() {
    let mut kept = None;
    tape::grad(
        |x| {
            kept = Some(x[0]);
            x[0] * x[1]
        },
        &[1.0, 2.0],
    );
    let kept = kept.expect("set");
    tape::grad(|x| x[0] * x[1] + kept * x[0], &[1.0, 2.0]);
}

/// A value of one inner differentiation used in its sibling, the next inner one
/// under the same outer closure.
#[test]
#[should_panic(expected = "escaped its operator")]
fn a_value_of_a_sibling_trace_panics() {
    tape::grad(
        |x| {
            let mut first = None;
            let a = tape::grad(
                |y| {
                    first = Some(y[0]);
                    y[0] * y[0]
                },
                &[x[0]],
            );
            let first = first.expect("set");
            let b = tape::grad(|y| y[0] * first + y[0], &[x[0]]);
            a[0] + b[0]
        },
        &[1.0],
    );
}

/// An escaped value returned as the output is caught too, even though it never met
/// another variable.
#[test]
#[should_panic(expected = "escaped its operator")]
fn returning_an_escaped_value_panics() {
    let mut kept = None;
    tape::grad(
        |x| {
            kept = Some(x[0].sin());
            x[0]
        },
        &[1.0],
    );
    let kept = kept.expect("set");
    tape::grad(|_| kept * 2.0, &[1.0]);
}

/// A whole matrix kept and reused through nalgebra.
#[test]
#[should_panic(expected = "escaped its operator")]
fn an_escaped_matrix_panics() {
    let mut kept = None;
    tape::grad(
        |p| {
            let a = spd(p);
            kept = Some(a.clone());
            logdet(a)
        },
        &P,
    );
    let kept = kept.expect("set");
    tape::grad(|p| logdet(spd(p) + kept), &P);
}

/// An outer value used in an inner differentiation of the same type without `lift`:
/// perturbation confusion, which the brand of `Reverse` rejects at compile time.
#[test]
#[should_panic(expected = "values of two different traces met")]
fn mixing_an_outer_value_into_an_inner_trace_panics() {
    tape::grad(
        |x| {
            let outer = x[0];
            let inner = tape::grad(|y| y[0] * outer + y[0] * y[0], &[1.0]);
            outer * inner[0]
        },
        &[1.0],
    );
}

/// The inner closure returns the outer value itself.
#[test]
#[should_panic(expected = "values of two different traces met")]
fn returning_an_outer_value_from_an_inner_trace_panics() {
    tape::grad(
        |x| {
            let outer = x[0] * x[0];
            let inner: Vec<f64> = tape::grad(|_| outer, &[1.0]);
            x[0] * inner[0]
        },
        &[1.0],
    );
}

/// Values are `Send`, but their trace is recorded on the thread that made them.
#[test]
#[should_panic(expected = "escaped its operator")]
fn a_value_sent_to_another_thread_panics() {
    tape::grad(
        |x| {
            let value = x[0];
            let result = std::thread::scope(|s| {
                s.spawn(move || tape::grad(|y| y[0] * value, &[2.0])).join()
            });
            match result {
                Ok(g) => g[0] * x[0],
                Err(panic) => std::panic::resume_unwind(panic),
            }
        },
        &[1.0],
    );
}

/// After a panic inside a closure, the thread's stack of traces is clean again.
#[test]
fn a_panic_inside_a_closure_leaves_the_stack_clean() {
    let caught = std::panic::catch_unwind(|| {
        tape::grad(
            |x| -> TapeReverse<f64> { panic!("inside {}", x[0]) },
            &[1.0],
        )
    });
    assert!(caught.is_err());
    assert_eq!(tape::grad(|x| x[0] * x[1], &[2.0, 5.0]), vec![5.0, 2.0]);
    assert_eq!(
        tape::grad(
            |x| tape::grad(|y| y[0] * lift(x[0]), &[x[0]])[0] * x[0],
            &[3.0]
        ),
        vec![6.0]
    );
}

/// Two threads recording at once, each its own gradients (first and second order,
/// through nalgebra), many times over: each gets the answer it gets alone.
#[test]
fn recording_on_two_threads_at_once() {
    let expected_cholesky = tape::grad(logdet_cholesky, &P);
    let expected_hessian = tape::hessian(solve_sum, &P);
    let m = pseudo_random(10 * 10, 5);
    let expected_big = tape::grad(logdet_big, &m);
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            barrier.wait();
            for _ in 0..50 {
                assert_eq!(tape::grad(logdet_cholesky, &P), expected_cholesky);
                assert_eq!(tape::grad(logdet_big, &m), expected_big);
            }
        });
        let second = s.spawn(|| {
            barrier.wait();
            for _ in 0..20 {
                assert_eq!(tape::hessian(solve_sum, &P), expected_hessian);
                let rr = tape::jacobian(|p| tape::grad(solve_sum, p), &P);
                assert_all_close(
                    &rr[1],
                    &expected_hessian[1],
                    MODE_TOL,
                    "reverse over reverse",
                );
            }
        });
        first.join().expect("first thread");
        second.join().expect("second thread");
    });
    assert_all_close(
        &expected_cholesky,
        &central_grad(logdet_cholesky::<f64>, &P),
        FD_TOL,
        "the reference itself",
    );
}
