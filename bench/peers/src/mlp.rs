//! The scalar MLP of `crates/nabla/benches/ratios.rs`: mean squared error of an
//! 8-32-1 tanh network over 64 samples, parameters flat (w1, b1, w2, b2); the
//! gradient with respect to the 321 parameters.

use ad_trait::F64;
use ad_trait::reverse_ad::adr::{GlobalComputationGraph, adr};
use num_traits::Float as _;

use crate::{agree, pseudo_random};

/// Inputs per sample.
pub const IN: usize = 8;
/// Hidden units.
pub const HIDDEN: usize = 32;
/// Samples.
pub const SAMPLES: usize = 64;
/// Parameters: w1 (32 × 8), b1, w2, b2.
pub const PARAMS: usize = HIDDEN * IN + HIDDEN + HIDDEN + 1;

/// One sample: inputs and target.
pub type Sample = ([f64; IN], f64);

/// The parameters (seed 2) and the data (seed 3), as in `ratios.rs`.
pub fn problem() -> (Vec<f64>, Vec<Sample>) {
    let params = pseudo_random(PARAMS, 2);
    let raw = pseudo_random(SAMPLES * (IN + 1), 3);
    let data = raw
        .chunks(IN + 1)
        .map(|c| (std::array::from_fn(|i| c[i]), c[IN]))
        .collect();
    (params, data)
}

macro_rules! mlp {
    ($name:ident, [$($generics:tt)*] $T:ty, $zero:expr, $k:expr) => {
        /// The loss at this scalar type.
        pub fn $name<$($generics)*>(p: &[$T], data: &[Sample]) -> $T {
            let (w1, rest) = p.split_at(HIDDEN * IN);
            let (b1, rest) = rest.split_at(HIDDEN);
            let (w2, b2) = rest.split_at(HIDDEN);
            let mut loss: $T = $zero;
            for (input, target) in data {
                let mut out = b2[0];
                for h in 0..HIDDEN {
                    let mut pre = b1[h];
                    for (i, &xi) in input.iter().enumerate() {
                        pre += w1[h * IN + i] * $k(xi);
                    }
                    out += w2[h] * pre.tanh();
                }
                let err = out - $k(*target);
                loss += err * err;
            }
            loss / $k(data.len() as f64)
        }
    };
}

fn same(c: f64) -> f64 {
    c
}

mlp!(nabla_f, [S: nabla::Scalar] S, S::from(0.0), same);
mlp!(echidna_f, [] echidna::Reverse64, echidna::Reverse64::constant(0.0), same);
mlp!(ad_trait_f, [T: ad_trait::AD] T, T::constant(0.0), F64);

/// The gradient by hand (backpropagation written out; the reference).
pub fn gradient_by_hand(p: &[f64], data: &[Sample]) -> Vec<f64> {
    let (w1, b1, w2, b2) = (0, HIDDEN * IN, HIDDEN * (IN + 1), PARAMS - 1);
    let mut g = vec![0.0; PARAMS];
    let scale = 2.0 / data.len() as f64;
    for (input, target) in data {
        let t: Vec<f64> = (0..HIDDEN)
            .map(|h| {
                let pre: f64 =
                    p[b1 + h] + (0..IN).map(|i| p[w1 + h * IN + i] * input[i]).sum::<f64>();
                pre.tanh()
            })
            .collect();
        let out = p[b2] + (0..HIDDEN).map(|h| p[w2 + h] * t[h]).sum::<f64>();
        let d = scale * (out - target);
        g[b2] += d;
        for h in 0..HIDDEN {
            g[w2 + h] += d * t[h];
            let dpre = d * p[w2 + h] * (1.0 - t[h] * t[h]);
            g[b1 + h] += dpre;
            for i in 0..IN {
                g[w1 + h * IN + i] += dpre * input[i];
            }
        }
    }
    g
}

/// nabla: `grad`.
pub fn nabla_grad(p: &[f64], data: &[Sample]) -> Vec<f64> {
    nabla::grad(|p| nabla_f(p, data), p)
}

/// nabla: `tape::grad`.
pub fn nabla_tape_grad(p: &[f64], data: &[Sample]) -> Vec<f64> {
    nabla::tape::grad(|p| nabla_f(p, data), p)
}

/// echidna: `echidna::grad`.
pub fn echidna_grad(p: &[f64], data: &[Sample]) -> Vec<f64> {
    echidna::grad(|p| echidna_f(p, data), p)
}

/// ad_trait: `adr` on its computation graph.
pub fn ad_trait_grad(p: &[f64], data: &[Sample]) -> Vec<f64> {
    GlobalComputationGraph::get().reset();
    let inputs: Vec<adr> = p.iter().map(|&v| adr::new_variable(v, false)).collect();
    let output = ad_trait_f(&inputs, data);
    let backward = output.get_backwards_mode_grad();
    inputs.iter().map(|v| backward.wrt(v)).collect()
}

/// All gradients against backpropagation by hand.
pub fn check() -> Result<(), String> {
    let (p, data) = problem();
    agree(
        "mlp gradient",
        &gradient_by_hand(&p, &data),
        &[
            ("nabla grad", nabla_grad(&p, &data)),
            ("nabla tape::grad", nabla_tape_grad(&p, &data)),
            ("echidna", echidna_grad(&p, &data)),
            ("ad_trait", ad_trait_grad(&p, &data)),
        ],
        1e-12,
    )
}
