//! Rosenbrock, n = 10⁴: Σ (xᵢ − 1)² + 100 (xᵢ₊₁ − xᵢ²)², written as in
//! `crates/nabla/benches/ratios.rs` (8 operations per term; (xᵢ − 1)² rather than
//! (1 − xᵢ)² so that every library can write it with a constant on the right).

use ad_trait::F64;
use ad_trait::forward_ad::adfn::adfn;
use ad_trait::reverse_ad::adr::{GlobalComputationGraph, adr};
use num_dual::Dual64;

use crate::{agree, pseudo_random};

/// Number of variables.
pub const N: usize = 10_000;

/// The point (seed 1 of the shared generator).
pub fn point() -> Vec<f64> {
    pseudo_random(N, 1)
}

/// The direction of the forward-mode derivative.
pub fn direction() -> Vec<f64> {
    pseudo_random(N, 4)
}

/// Writes the function once per scalar type: `$k` turns an `f64` constant into
/// what the type multiplies by (`f64` itself, or ad_trait's `F64` wrapper).
macro_rules! rosenbrock {
    ($name:ident, [$($generics:tt)*] $T:ty, $zero:expr, $k:expr) => {
        /// The Rosenbrock function at this scalar type.
        pub fn $name<$($generics)*>(x: &[$T]) -> $T {
            let mut sum: $T = $zero;
            for i in 0..x.len() - 1 {
                let a = x[i] - $k(1.0);
                let b = x[i + 1] - x[i] * x[i];
                sum += a * a + b * b * $k(100.0);
            }
            sum
        }
    };
}

fn same(c: f64) -> f64 {
    c
}

rosenbrock!(plain, [] f64, 0.0, same);
rosenbrock!(nabla_f, [S: nabla::Scalar] S, S::from(0.0), same);
rosenbrock!(num_dual_f, [] Dual64, Dual64::from(0.0), same);
rosenbrock!(echidna_reverse_f, [] echidna::Reverse64, echidna::Reverse64::constant(0.0), same);
rosenbrock!(echidna_dual_f, [] echidna::Dual64, echidna::Dual64::constant(0.0), same);
rosenbrock!(ad_trait_f, [T: ad_trait::AD] T, T::constant(0.0), F64);

/// The gradient by hand (the reference).
pub fn gradient_by_hand(x: &[f64]) -> Vec<f64> {
    let mut g = vec![0.0; x.len()];
    for i in 0..x.len() - 1 {
        let b = x[i + 1] - x[i] * x[i];
        g[i] += 2.0 * (x[i] - 1.0) - 400.0 * b * x[i];
        g[i + 1] += 200.0 * b;
    }
    g
}

// ---------- Reverse mode: the gradient ----------

/// nabla: `grad` (reverse mode, `Reverse<'t, f64>`).
pub fn nabla_grad(x: &[f64]) -> Vec<f64> {
    nabla::grad(|x| nabla_f(x), x)
}

/// nabla: `tape::grad` (`TapeReverse<f64>`, the `'static` scalar).
pub fn nabla_tape_grad(x: &[f64]) -> Vec<f64> {
    nabla::tape::grad(nabla_f, x)
}

/// echidna: `echidna::grad` (`Reverse<f64>`, a thread-local tape).
pub fn echidna_grad(x: &[f64]) -> Vec<f64> {
    echidna::grad(echidna_reverse_f, x)
}

/// ad_trait: `adr` on its thread-local computation graph, as its `ReverseAD`
/// derivative method does (without the 1 × n `DMatrix` it returns).
pub fn ad_trait_grad(x: &[f64]) -> Vec<f64> {
    GlobalComputationGraph::get().reset();
    let inputs: Vec<adr> = x.iter().map(|&v| adr::new_variable(v, false)).collect();
    let output = ad_trait_f(&inputs);
    let backward = output.get_backwards_mode_grad();
    inputs.iter().map(|v| backward.wrt(v)).collect()
}

// ---------- Forward mode: the derivative along a direction ----------

/// nabla: `jvp` (`Dual<f64>`).
pub fn nabla_jvp(x: &[f64], v: &[f64]) -> f64 {
    nabla::jvp(|x| vec![nabla_f(x)], x, v).1[0]
}

/// nabla: `Dual<f64>` seeded with the direction by hand, as for the others
/// (`jvp` less its own allocations and checks).
pub fn nabla_dual(x: &[f64], v: &[f64]) -> f64 {
    let xs: Vec<nabla::Dual<f64>> = x
        .iter()
        .zip(v)
        .map(|(&x, &v)| nabla::Dual::new(x, v))
        .collect();
    nabla_f(&xs).tangent()
}

/// num-dual: `Dual64` seeded with the direction.
pub fn num_dual_jvp(x: &[f64], v: &[f64]) -> f64 {
    let xs: Vec<Dual64> = x.iter().zip(v).map(|(&x, &v)| Dual64::new(x, v)).collect();
    num_dual_f(&xs).eps
}

/// echidna: `Dual<f64>` seeded with the direction (what `echidna::jvp` does).
pub fn echidna_jvp(x: &[f64], v: &[f64]) -> f64 {
    let xs: Vec<echidna::Dual64> = x
        .iter()
        .zip(v)
        .map(|(&x, &v)| echidna::Dual64::new(x, v))
        .collect();
    echidna_dual_f(&xs).eps
}

/// ad_trait: `adfn<1>`, one tangent.
pub fn ad_trait_jvp(x: &[f64], v: &[f64]) -> f64 {
    let xs: Vec<adfn<1>> = x.iter().zip(v).map(|(&x, &v)| adfn::new(x, [v])).collect();
    ad_trait_f(&xs).tangent()[0]
}

/// All gradients and directional derivatives against the hand-written gradient.
pub fn check() -> Result<(), String> {
    let (x, v) = (point(), direction());
    let g = gradient_by_hand(&x);
    let value = plain(&x);
    agree(
        "rosenbrock value",
        &[value],
        &[
            ("nabla", vec![nabla::value_and_grad(|x| nabla_f(x), &x).0]),
            (
                "num-dual",
                vec![num_dual_f(&x.iter().map(|&x| Dual64::from(x)).collect::<Vec<_>>()).re],
            ),
        ],
        1e-13,
    )?;
    agree(
        "rosenbrock gradient",
        &g,
        &[
            ("nabla grad", nabla_grad(&x)),
            ("nabla tape::grad", nabla_tape_grad(&x)),
            ("echidna", echidna_grad(&x)),
            ("ad_trait", ad_trait_grad(&x)),
        ],
        1e-12,
    )?;
    let along: f64 = g.iter().zip(&v).map(|(g, v)| g * v).sum();
    agree(
        "rosenbrock directional derivative",
        &[along],
        &[
            ("nabla jvp", vec![nabla_jvp(&x, &v)]),
            ("nabla Dual", vec![nabla_dual(&x, &v)]),
            ("num-dual", vec![num_dual_jvp(&x, &v)]),
            ("echidna", vec![echidna_jvp(&x, &v)]),
            ("ad_trait", vec![ad_trait_jvp(&x, &v)]),
        ],
        1e-11,
    )
}
