//! log det (M Mᵀ + 50 I) by nalgebra's Cholesky factorisation, for the 50 × 50
//! matrix M of 2500 parameters (`crates/nabla/tests/nalgebra_reverse.rs`); the
//! gradient with respect to all 2500 entries. One generic function over
//! `nalgebra::RealField`, run at each library's scalar type.
//!
//! ad_trait's scalar types implement `RealField` of nalgebra 0.34 (simba 0.9), not
//! of nalgebra 0.35 which the others use, so it runs the same function written
//! against nalgebra 0.34 ([`logdet_nalgebra_034`]).

use nalgebra::{DMatrix, RealField};
use num_dual::Dual64;

use crate::{agree, pseudo_random};

/// The matrix size.
pub const N: usize = 50;

/// The entries of M (seed 7), row-major.
pub fn point() -> Vec<f64> {
    pseudo_random(N * N, 7)
}

/// log det (M Mᵀ + n I) at any `RealField` scalar.
pub fn logdet<T: RealField + Copy>(m: &[T]) -> T {
    let n = (m.len() as f64).sqrt() as usize;
    let m = DMatrix::from_row_slice(n, n, m);
    let a = &m * m.transpose() + DMatrix::identity(n, n) * nalgebra::convert::<f64, T>(n as f64);
    let l = a.cholesky().expect("positive definite").l();
    l.diagonal()
        .iter()
        .map(|&d| d.ln())
        .fold(T::zero(), |s, d| s + d)
        * nalgebra::convert(2.0)
}

/// [`logdet`] against nalgebra 0.34, for ad_trait.
pub fn logdet_nalgebra_034<T: nalgebra034::RealField + Copy>(m: &[T]) -> T {
    use nalgebra034::DMatrix;
    let n = (m.len() as f64).sqrt() as usize;
    let m = DMatrix::from_row_slice(n, n, m);
    let a = &m * m.transpose() + DMatrix::identity(n, n) * nalgebra034::convert::<f64, T>(n as f64);
    let l = a.cholesky().expect("positive definite").l();
    l.diagonal()
        .iter()
        .map(|&d| d.ln())
        .fold(T::zero(), |s, d| s + d)
        * nalgebra034::convert(2.0)
}

/// The closed form 2 (A⁻¹ M), A = M Mᵀ + n I (the reference).
pub fn gradient_closed_form(m: &[f64]) -> Vec<f64> {
    let mm = DMatrix::from_row_slice(N, N, m);
    let a = &mm * mm.transpose() + DMatrix::identity(N, N) * N as f64;
    let g = a.try_inverse().expect("invertible") * mm * 2.0;
    (0..N * N).map(|i| g[(i / N, i % N)]).collect()
}

/// nabla: `tape::grad` (`TapeReverse<f64>`, reverse mode).
pub fn nabla_tape_grad(m: &[f64]) -> Vec<f64> {
    nabla::tape::grad(logdet, m)
}

/// nabla: `grad_forward` (`Dual<f64>`, one forward pass per entry).
pub fn nabla_forward_grad(m: &[f64]) -> Vec<f64> {
    nabla::grad_forward(logdet, m)
}

/// num-dual: one `Dual64` pass per entry.
pub fn num_dual_grad(m: &[f64]) -> Vec<f64> {
    let mut xs: Vec<Dual64> = m.iter().map(|&v| Dual64::from(v)).collect();
    (0..m.len())
        .map(|i| {
            xs[i].eps = 1.0;
            let d = logdet(&xs).eps;
            xs[i].eps = 0.0;
            d
        })
        .collect()
}

/// echidna: `echidna::grad` (`Reverse<f64>`).
pub fn echidna_grad(m: &[f64]) -> Vec<f64> {
    echidna::grad(logdet, m)
}

/// ad_trait: `adr` on its computation graph, through nalgebra 0.34.
pub fn ad_trait_grad(m: &[f64]) -> Vec<f64> {
    use ad_trait::reverse_ad::adr::{GlobalComputationGraph, adr};
    GlobalComputationGraph::get().reset();
    let inputs: Vec<adr> = m.iter().map(|&v| adr::new_variable(v, false)).collect();
    let output = logdet_nalgebra_034(&inputs);
    let backward = output.get_backwards_mode_grad();
    inputs.iter().map(|v| backward.wrt(v)).collect()
}

/// echidna: one `Dual<f64>` pass per entry.
pub fn echidna_forward_grad(m: &[f64]) -> Vec<f64> {
    let mut xs: Vec<echidna::Dual64> = m.iter().map(|&v| echidna::Dual64::constant(v)).collect();
    (0..m.len())
        .map(|i| {
            xs[i].eps = 1.0;
            let d = logdet(&xs).eps;
            xs[i].eps = 0.0;
            d
        })
        .collect()
}

/// The reverse-mode gradients against the closed form (`forward` adds the
/// forward-mode ones, 2500 passes each).
pub fn check(forward: bool) -> Result<(), String> {
    let m = point();
    let reference = gradient_closed_form(&m);
    let mut results = vec![
        ("nabla tape::grad", nabla_tape_grad(&m)),
        ("echidna", echidna_grad(&m)),
        ("ad_trait", ad_trait_grad(&m)),
    ];
    if forward {
        results.push(("nabla grad_forward", nabla_forward_grad(&m)));
        results.push(("num-dual", num_dual_grad(&m)));
        results.push(("echidna forward", echidna_forward_grad(&m)));
    }
    agree("logdet gradient", &reference, &results, 1e-11)
}
