//! nabla against its Rust peers — num-dual, ad_trait and echidna — on the same
//! workloads, each written once in each library's own idiom.
//!
//! Every workload has a `check` function that runs all implementations and
//! returns an error unless they agree (to a relative tolerance) with each other
//! and with an independent reference; the benchmark calls it before timing
//! anything, and `cargo test --manifest-path bench/peers/Cargo.toml` calls it too.
//!
//! The workloads (definitions shared with `crates/nabla/benches/ratios.rs`,
//! `crates/nabla/tests/nalgebra_reverse.rs` and `crates/nabla-bench`):
//! - [`rosenbrock`]: Σ (1 − xᵢ)² + 100 (xᵢ₊₁ − xᵢ²)², n = 10⁴: the gradient
//!   (reverse mode) and the derivative along one direction (forward mode);
//! - [`mlp`]: the mean squared error of an 8-32-1 tanh network over 64 samples,
//!   gradient with respect to the 321 parameters;
//! - [`nested`]: the saddle (min-max) and particle (optimisation through a
//!   simulation whose force is a gradient) problems of Siskind & Pearlmutter;
//! - [`logdet`]: log det (M Mᵀ + 50 I) by nalgebra's Cholesky, gradient with
//!   respect to the 2500 entries of M.
//! - [`hessian`]: the dense Hessian of Rosenbrock (n = 100 and 1000), its
//!   Hessian-vector product (n = 1000), and the Hessian of the MLP loss with
//!   respect to b1, w2 and b2 (65 parameters).

pub mod hessian;
pub mod logdet;
pub mod mlp;
pub mod nested;
pub mod rosenbrock;

/// Deterministic pseudo-random numbers in [−1, 1) (the generator of
/// `crates/nabla/benches/ratios.rs`).
pub fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// `Ok` if every `(name, value)` agrees with `reference` to relative tolerance
/// `tol` (scaled by the larger of 1 and |reference|), element by element.
pub fn agree(
    workload: &str,
    reference: &[f64],
    results: &[(&str, Vec<f64>)],
    tol: f64,
) -> Result<(), String> {
    for (name, values) in results {
        if values.len() != reference.len() {
            return Err(format!(
                "{workload}: {name} returned {} values, expected {}",
                values.len(),
                reference.len()
            ));
        }
        for (i, (v, r)) in values.iter().zip(reference).enumerate() {
            let err = (v - r).abs() / r.abs().max(1.0);
            if err > tol || !v.is_finite() {
                return Err(format!(
                    "{workload}: {name}[{i}] = {v:e}, reference {r:e} (relative error {err:e} > {tol:e})"
                ));
            }
        }
    }
    Ok(())
}
