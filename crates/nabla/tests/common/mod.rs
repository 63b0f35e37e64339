//! Helpers shared by the integration tests: finite differences and tolerances.
#![allow(dead_code, unreachable_pub)]

pub mod matrices;

/// Central finite difference of a scalar function of one real, with a step scaled to
/// the point so that truncation and rounding errors balance (≈ 1e-10 relative).
pub fn central_diff(f: impl Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-5 * x.abs().max(1.0);
    (f(x + h) - f(x - h)) / (2.0 * h)
}

/// Central finite-difference gradient of a scalar function of a vector.
pub fn central_grad(f: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            central_diff(
                |xi| {
                    let mut y = x.to_vec();
                    y[i] = xi;
                    f(&y)
                },
                x[i],
            )
        })
        .collect()
}

/// |a − b| ≤ tol · max(1, |a|, |b|): relative for large values, absolute near zero.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * 1f64.max(a.abs()).max(b.abs())
}

#[track_caller]
pub fn assert_close(a: f64, b: f64, tol: f64, what: &str) {
    assert!(close(a, b, tol), "{what}: {a} vs {b} (tolerance {tol:e})");
}

#[track_caller]
pub fn assert_all_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        assert_close(x, y, tol, &format!("{what}[{i}]"));
    }
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Finite-difference tolerance: central differences with h ≈ 1e-5 have truncation
/// error O(h²·f''') and rounding error O(ε/h); 1e-6 relative is comfortably above both
/// for the smooth, moderately scaled functions tested here.
pub const FD_TOL: f64 = 1e-6;
/// Agreement between two exact modes: only floating-point reassociation separates them.
pub const MODE_TOL: f64 = 1e-10;
