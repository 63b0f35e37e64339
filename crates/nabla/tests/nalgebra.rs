//! nalgebra code differentiates in forward mode (feature `nalgebra`): products,
//! `lu().solve`, `cholesky`, `norm` and `try_inverse` on `DMatrix`/`SMatrix` of
//! `Dual` numbers, first and second order, at `f64` and `f32`, against finite
//! differences and against a second algorithm for the same quantity. (Reverse mode
//! through nalgebra, with `tape::TapeReverse`: tests/nalgebra_reverse.rs.)
#![cfg(feature = "nalgebra")]

mod common;

use common::matrices::{logdet_cholesky, spd};

use common::{FD_TOL, assert_all_close, assert_close, central_diff, central_grad};
use nabla::{Dual, derivative, grad_forward};
use nalgebra::{DVector, RealField, SMatrix, SVector};

/// log det A by LU: a second algorithm for the same number.
fn logdet_lu<T: RealField + Copy>(p: &[T]) -> T {
    spd(p).lu().determinant().ln()
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

const P: [f64; 3] = [0.8, -0.3, 1.1];

/// Reference values: the same generic functions at `f64`.
#[test]
fn values_match_the_f64_computation() {
    let dual: Vec<Dual<f64>> = P.iter().map(|&v| Dual::constant(v)).collect();
    for (what, f, fd) in [
        (
            "cholesky",
            logdet_cholesky::<Dual<f64>> as fn(&[Dual<f64>]) -> Dual<f64>,
            logdet_cholesky::<f64> as fn(&[f64]) -> f64,
        ),
        ("lu", logdet_lu::<Dual<f64>>, logdet_lu::<f64>),
        ("solve", solve_sum::<Dual<f64>>, solve_sum::<f64>),
        ("inverse", inverse_norm::<Dual<f64>>, inverse_norm::<f64>),
    ] {
        assert_close(f(&dual).primal(), fd(&P), 1e-14, what);
    }
}

#[test]
fn gradients_through_decompositions_against_finite_differences() {
    for (what, g, f) in [
        (
            "log det by Cholesky",
            grad_forward(logdet_cholesky, &P),
            logdet_cholesky::<f64> as fn(&[f64]) -> f64,
        ),
        (
            "log det by LU",
            grad_forward(logdet_lu, &P),
            logdet_lu::<f64>,
        ),
        ("LU solve", grad_forward(solve_sum, &P), solve_sum::<f64>),
        (
            "norm of the inverse",
            grad_forward(inverse_norm, &P),
            inverse_norm::<f64>,
        ),
    ] {
        assert_all_close(&g, &central_grad(f, &P), FD_TOL, what);
    }
    // Two algorithms, one derivative.
    assert_all_close(
        &grad_forward(logdet_cholesky, &P),
        &grad_forward(logdet_lu, &P),
        1e-12,
        "Cholesky vs LU",
    );
}

/// ∂ log det A / ∂pₖ = tr(A⁻¹ ∂A/∂pₖ): the gradient against the closed form, with
/// ∂A/∂pₖ itself taken by forward mode through the matrix product.
#[test]
fn log_det_gradient_is_the_trace_formula() {
    let a = spd(&P);
    let a_inv = a.clone().try_inverse().expect("invertible");
    let g = grad_forward(logdet_cholesky, &P);
    for (k, &gk) in g.iter().enumerate() {
        let seeded: Vec<Dual<f64>> = (0..3)
            .map(|i| Dual::new(P[i], if i == k { 1.0 } else { 0.0 }))
            .collect();
        let da = spd(&seeded).map(|x| x.tangent());
        assert_close(gk, (&a_inv * da).trace(), 1e-13, &format!("∂/∂p{k}"));
    }
}

/// The Hessian of the Cholesky log-determinant, forward over forward
/// (`Dual<Dual<f64>>` through the decomposition), against finite differences of
/// the gradient and against the LU route; it is symmetric.
#[test]
fn hessian_of_the_cholesky_log_determinant() {
    type Second = Dual<Dual<f64>>;
    let hessian = |f: fn(&[Second]) -> Second| -> Vec<Vec<f64>> {
        (0..3)
            .map(|i| grad_forward(|x| grad_forward(f, x)[i], &P))
            .collect()
    };
    let h = hessian(logdet_cholesky);
    let h_lu = hessian(logdet_lu);
    for i in 0..3 {
        let fd: Vec<f64> = (0..3)
            .map(|j| {
                central_diff(
                    |t| {
                        let mut q = P;
                        q[j] = t;
                        grad_forward(logdet_cholesky, &q)[i]
                    },
                    P[j],
                )
            })
            .collect();
        assert_all_close(&h[i], &fd, 1e-6, &format!("row {i} vs finite differences"));
        assert_all_close(&h[i], &h_lu[i], 1e-11, &format!("row {i}, Cholesky vs LU"));
        for (j, &hij) in h[i].iter().enumerate() {
            assert_close(hij, h[j][i], 1e-12, "symmetry");
        }
    }
}

/// Fixed-size matrices, and d/dx ‖x‖ = x/‖x‖ through `norm`.
#[test]
fn static_matrices_and_norms() {
    let x = [3.0, -4.0, 12.0];
    let g = grad_forward(|v| SVector::<_, 3>::from_row_slice(v).norm(), &x);
    assert_all_close(&g, &[3.0 / 13.0, -4.0 / 13.0, 12.0 / 13.0], 1e-15, "∇‖x‖");
    // d/dt det(M + t·N) at t = 0 = tr(adj(M)·N) for 2×2: here M = I, N = [[1,2],[3,4]],
    // so it is tr N = 5.
    let d = derivative(
        |t| {
            let m = SMatrix::<_, 2, 2>::identity()
                + SMatrix::<_, 2, 2>::new(1.0, 2.0, 3.0, 4.0).map(Dual::constant) * t;
            m.determinant()
        },
        0.0,
    );
    assert_eq!(d, 5.0);
}

#[test]
fn single_precision_through_cholesky() {
    let p32 = P.map(|v| v as f32);
    let p64 = p32.map(f64::from);
    let g32 = grad_forward(logdet_cholesky, &p32);
    let g64 = grad_forward(logdet_cholesky, &p64);
    for i in 0..3 {
        assert_close(f64::from(g32[i]), g64[i], 1e-5, &format!("∂{i} f32 vs f64"));
    }
}
