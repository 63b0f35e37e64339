//! Second derivatives: the dense Hessian of Rosenbrock (n = 100, and n = 1000 by
//! the forward-over-reverse libraries only), Hessian-vector products of
//! Rosenbrock at n = 1000, and the Hessian of the MLP loss with respect to its
//! last 65 parameters (b1, w2, b2; w1 held at its value), each checked against
//! a Hessian written by hand.
//!
//! Per library, what it offers for second derivatives:
//! - nabla: `hessian` / `hvp` (forward over reverse, `Reverse<'t, Dual<f64>>`),
//!   `tape::hessian` / `tape::hvp` (`TapeReverse<Dual<f64>>`), and forward over
//!   forward by composing `jacobian_forward` with `grad_forward`
//!   (`Dual<Dual<f64>>`, n² passes);
//! - num-dual: `hessian` with the second-order dual `Dual2Vec` (one pass, each
//!   number carrying an n-vector and an n × n matrix; `Dual2DVec64`, the
//!   dynamic size, since a static 100 × 100 matrix per number does not fit the
//!   stack), and for a Hessian-vector product n passes of `HyperDual64`
//!   (ε₁ = eᵢ, ε₂ = v, the ε₁ε₂ part is (Hv)ᵢ): it has no reverse mode;
//! - echidna: `echidna::hessian` / `echidna::hvp` on its bytecode tape
//!   (`BReverse<f64>`, the `bytecode` feature): record once, then forward over
//!   reverse sweeps of the recorded tape;
//! - ad_trait: `HessianAD<N>` (forward over forward) and `HessianAD_FOR<N>`
//!   (forward over reverse) through its `FunctionEngine`; not measured here.

use nalgebra::DVector;
use num_dual::{Dual2DVec64, DualNum, HyperDual64};
use num_traits::Float as _;

use crate::{agree, mlp, pseudo_random, rosenbrock};

/// Variables of the dense Rosenbrock Hessian every library computes.
pub const N_SMALL: usize = 100;
/// Variables of the Hessian-vector products and of the forward-over-reverse
/// Hessian.
pub const N_LARGE: usize = 1000;

/// The point (seed 1 of the shared generator) with `n` variables.
pub fn point(n: usize) -> Vec<f64> {
    pseudo_random(n, 1)
}

/// The direction of the Hessian-vector products.
pub fn direction(n: usize) -> Vec<f64> {
    pseudo_random(n, 4)
}

/// The Hessian of Rosenbrock by hand (the reference): tridiagonal.
pub fn rosenbrock_hessian_by_hand(x: &[f64]) -> Vec<Vec<f64>> {
    let n = x.len();
    let mut h = vec![vec![0.0; n]; n];
    for i in 0..n - 1 {
        let b = x[i + 1] - x[i] * x[i];
        h[i][i] += 2.0 + 800.0 * x[i] * x[i] - 400.0 * b;
        h[i][i + 1] -= 400.0 * x[i];
        h[i + 1][i] -= 400.0 * x[i];
        h[i + 1][i + 1] += 200.0;
    }
    h
}

/// Rosenbrock on num-dual's non-`Copy` second-order duals, by reference.
fn num_dual_rosenbrock(x: &DVector<Dual2DVec64>) -> Dual2DVec64 {
    let mut sum = Dual2DVec64::from_re(0.0);
    for i in 0..x.len() - 1 {
        let a = x[i].clone() - 1.0;
        let b = &x[i + 1] - &(&x[i] * &x[i]);
        sum += &a * &a + &b * &b * 100.0;
    }
    sum
}

/// Rosenbrock on echidna's bytecode-tape variable.
fn echidna_rosenbrock(x: &[echidna::BReverse64]) -> echidna::BReverse64 {
    let mut sum = echidna::BReverse64::constant(0.0);
    for i in 0..x.len() - 1 {
        let a = x[i] - 1.0;
        let b = x[i + 1] - x[i] * x[i];
        sum += a * a + b * b * 100.0;
    }
    sum
}

// ---------- Rosenbrock: dense Hessian ----------

/// nabla: `hessian` (forward over reverse, one `hvp` per input).
pub fn nabla_hessian(x: &[f64]) -> Vec<Vec<f64>> {
    nabla::hessian(|x| rosenbrock::nabla_f(x), x)
}

/// nabla: `tape::hessian` (`TapeReverse<Dual<f64>>`).
pub fn nabla_tape_hessian(x: &[f64]) -> Vec<Vec<f64>> {
    nabla::tape::hessian(rosenbrock::nabla_f, x)
}

/// nabla: forward over forward, the `jacobian_forward` of a `grad_forward`
/// (`Dual<Dual<f64>>`, n² passes).
pub fn nabla_hessian_ff(x: &[f64]) -> Vec<Vec<f64>> {
    nabla::jacobian_forward(|x| nabla::grad_forward(rosenbrock::nabla_f, x), x)
}

/// num-dual: `hessian` with `Dual2DVec64` (one pass).
pub fn num_dual_hessian(x: &[f64]) -> Vec<Vec<f64>> {
    let (_, _, h) = num_dual::hessian(|x| num_dual_rosenbrock(&x), &DVector::from_column_slice(x));
    rows(h.nrows(), |i, j| h[(i, j)])
}

/// echidna: `echidna::hessian` (records the bytecode tape, then n forward over
/// reverse sweeps).
pub fn echidna_hessian(x: &[f64]) -> Vec<Vec<f64>> {
    echidna::hessian(echidna_rosenbrock, x).2
}

/// echidna: the bytecode tape of Rosenbrock, recorded once (its
/// record-once, evaluate-many use; [`echidna_hessian`] records every call).
pub fn echidna_record(x: &[f64]) -> echidna::BytecodeTape<f64> {
    echidna::record(echidna_rosenbrock, x).0
}

fn rows(n: usize, entry: impl Fn(usize, usize) -> f64) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| (0..n).map(|j| entry(i, j)).collect())
        .collect()
}

// ---------- Rosenbrock: Hessian-vector product ----------

/// nabla: `hvp`.
pub fn nabla_hvp(x: &[f64], v: &[f64]) -> Vec<f64> {
    nabla::hvp(|x| rosenbrock::nabla_f(x), x, v)
}

/// nabla: `tape::hvp`.
pub fn nabla_tape_hvp(x: &[f64], v: &[f64]) -> Vec<f64> {
    nabla::tape::hvp(rosenbrock::nabla_f, x, v)
}

/// echidna: `echidna::hvp` (records the tape, then one forward over reverse
/// sweep).
pub fn echidna_hvp(x: &[f64], v: &[f64]) -> Vec<f64> {
    echidna::hvp(echidna_rosenbrock, x, v).1
}

/// num-dual: forward mode only, n passes of `HyperDual64` with ε₁ along input i
/// and ε₂ along `v`: the ε₁ε₂ part is (Hv)ᵢ.
pub fn num_dual_hvp(x: &[f64], v: &[f64]) -> Vec<f64> {
    let mut xs: Vec<HyperDual64> = x
        .iter()
        .zip(v)
        .map(|(&x, &v)| HyperDual64::new(x, 0.0, v, 0.0))
        .collect();
    (0..x.len())
        .map(|i| {
            xs[i].eps1 = 1.0;
            let r = hyper_rosenbrock(&xs).eps1eps2;
            xs[i].eps1 = 0.0;
            r
        })
        .collect()
}

fn hyper_rosenbrock(x: &[HyperDual64]) -> HyperDual64 {
    let mut sum = HyperDual64::from(0.0);
    for i in 0..x.len() - 1 {
        let a = x[i] - 1.0;
        let b = x[i + 1] - x[i] * x[i];
        sum += a * a + b * b * 100.0;
    }
    sum
}

// ---------- MLP: Hessian with respect to b1, w2, b2 ----------

/// Parameters the MLP Hessian is taken with respect to: b1, w2 and b2.
pub const MLP_PARAMS: usize = 2 * mlp::HIDDEN + 1;

/// The MLP problem with w1 fixed: for each sample, the hidden pre-activations
/// less the bias (w1 · input, constants) and the target.
pub struct MlpProblem {
    /// (b1, w2, b2) of `mlp::problem`.
    pub theta: Vec<f64>,
    /// Per sample: w1 · input and the target.
    pub samples: Vec<([f64; mlp::HIDDEN], f64)>,
}

/// The parameters and data of `mlp::problem`, w1 folded into the samples.
pub fn mlp_problem() -> MlpProblem {
    let (p, data) = mlp::problem();
    let w1 = &p[..mlp::HIDDEN * mlp::IN];
    let samples = data
        .iter()
        .map(|(input, target)| {
            let pre = std::array::from_fn(|h| {
                (0..mlp::IN)
                    .map(|i| w1[h * mlp::IN + i] * input[i])
                    .sum::<f64>()
            });
            (pre, *target)
        })
        .collect();
    MlpProblem {
        theta: p[mlp::HIDDEN * mlp::IN..].to_vec(),
        samples,
    }
}

/// The loss as a function of (b1, w2, b2), at any `Copy` scalar type.
macro_rules! mlp_loss {
    ($name:ident, [$($generics:tt)*] $T:ty, $zero:expr) => {
        /// The loss at this scalar type.
        pub fn $name<$($generics)*>(theta: &[$T], samples: &[([f64; mlp::HIDDEN], f64)]) -> $T {
            let (b1, rest) = theta.split_at(mlp::HIDDEN);
            let (w2, b2) = rest.split_at(mlp::HIDDEN);
            let mut loss: $T = $zero;
            for (pre, target) in samples {
                let mut out = b2[0];
                for h in 0..mlp::HIDDEN {
                    out += w2[h] * (b1[h] + pre[h]).tanh();
                }
                let err = out - *target;
                loss += err * err;
            }
            loss / samples.len() as f64
        }
    };
}

mlp_loss!(mlp_nabla_f, [S: nabla::Scalar] S, S::from(0.0));
mlp_loss!(mlp_echidna_f, [] echidna::BReverse64, echidna::BReverse64::constant(0.0));

/// The loss on num-dual's non-`Copy` second-order duals, by reference.
fn mlp_num_dual_f(
    theta: &DVector<Dual2DVec64>,
    samples: &[([f64; mlp::HIDDEN], f64)],
) -> Dual2DVec64 {
    let h_ = mlp::HIDDEN;
    let mut loss = Dual2DVec64::from_re(0.0);
    for (pre, target) in samples {
        let mut out = theta[2 * h_].clone();
        for h in 0..h_ {
            out += &theta[h_ + h] * &(theta[h].clone() + pre[h]).tanh();
        }
        let err = out - *target;
        loss += &err * &err;
    }
    loss / samples.len() as f64
}

/// The Hessian of the loss with respect to (b1, w2, b2) by hand (the
/// reference): (2/N) Σ (J Jᵀ + e ∇²e) over the samples, e the residual.
pub fn mlp_hessian_by_hand(theta: &[f64], samples: &[([f64; mlp::HIDDEN], f64)]) -> Vec<Vec<f64>> {
    let hidden = mlp::HIDDEN;
    let (b1, w2, b2) = (
        &theta[..hidden],
        &theta[hidden..2 * hidden],
        theta[2 * hidden],
    );
    let mut hess = vec![vec![0.0; MLP_PARAMS]; MLP_PARAMS];
    let scale = 2.0 / samples.len() as f64;
    for (pre, target) in samples {
        let t: Vec<f64> = (0..hidden).map(|h| (b1[h] + pre[h]).tanh()).collect();
        let e = b2 + (0..hidden).map(|h| w2[h] * t[h]).sum::<f64>() - target;
        // ∂e/∂b1_h = w2_h t'_h, ∂e/∂w2_h = t_h, ∂e/∂b2 = 1.
        let mut jac = vec![0.0; MLP_PARAMS];
        for h in 0..hidden {
            jac[h] = w2[h] * (1.0 - t[h] * t[h]);
            jac[hidden + h] = t[h];
        }
        jac[2 * hidden] = 1.0;
        for (r, row) in hess.iter_mut().enumerate() {
            for (c, entry) in row.iter_mut().enumerate() {
                *entry += scale * jac[r] * jac[c];
            }
        }
        // ∇²e: ∂²e/∂b1_h² = w2_h t''_h with t'' = −2 t t', ∂²e/∂b1_h∂w2_h = t'_h.
        for h in 0..hidden {
            let d1 = 1.0 - t[h] * t[h];
            hess[h][h] += scale * e * w2[h] * (-2.0 * t[h] * d1);
            hess[h][hidden + h] += scale * e * d1;
            hess[hidden + h][h] += scale * e * d1;
        }
    }
    hess
}

/// nabla: `hessian` of the loss.
pub fn mlp_nabla_hessian(m: &MlpProblem) -> Vec<Vec<f64>> {
    nabla::hessian(|t| mlp_nabla_f(t, &m.samples), &m.theta)
}

/// nabla: `tape::hessian` of the loss.
pub fn mlp_nabla_tape_hessian(m: &MlpProblem) -> Vec<Vec<f64>> {
    nabla::tape::hessian(|t| mlp_nabla_f(t, &m.samples), &m.theta)
}

/// nabla: forward over forward.
pub fn mlp_nabla_hessian_ff(m: &MlpProblem) -> Vec<Vec<f64>> {
    nabla::jacobian_forward(
        |t| nabla::grad_forward(|u| mlp_nabla_f(u, &m.samples), t),
        &m.theta,
    )
}

/// num-dual: `hessian` with `Dual2DVec64`.
pub fn mlp_num_dual_hessian(m: &MlpProblem) -> Vec<Vec<f64>> {
    let (_, _, h) = num_dual::hessian(
        |t| mlp_num_dual_f(&t, &m.samples),
        &DVector::from_column_slice(&m.theta),
    );
    rows(h.nrows(), |i, j| h[(i, j)])
}

/// echidna: `echidna::hessian` on the bytecode tape.
pub fn mlp_echidna_hessian(m: &MlpProblem) -> Vec<Vec<f64>> {
    echidna::hessian(|t| mlp_echidna_f(t, &m.samples), &m.theta).2
}

fn flat(h: Vec<Vec<f64>>) -> Vec<f64> {
    h.into_iter().flatten().collect()
}

/// Every Hessian and Hessian-vector product against the hand-written Hessians.
/// `large`: also the n = 1000 Hessians (forward over reverse only).
pub fn check(large: bool) -> Result<(), String> {
    let x = point(N_SMALL);
    agree(
        "rosenbrock hessian n = 100",
        &flat(rosenbrock_hessian_by_hand(&x)),
        &[
            ("nabla hessian", flat(nabla_hessian(&x))),
            ("nabla tape::hessian", flat(nabla_tape_hessian(&x))),
            ("nabla FF", flat(nabla_hessian_ff(&x))),
            ("num-dual Dual2DVec64", flat(num_dual_hessian(&x))),
            ("echidna hessian", flat(echidna_hessian(&x))),
            (
                "echidna tape.hessian",
                flat(echidna_record(&x).hessian(&x).2),
            ),
        ],
        1e-12,
    )?;
    let (x, v) = (point(N_LARGE), direction(N_LARGE));
    let h = rosenbrock_hessian_by_hand(&x);
    let hv: Vec<f64> = h
        .iter()
        .map(|row| row.iter().zip(&v).map(|(a, b)| a * b).sum())
        .collect();
    agree(
        "rosenbrock hvp n = 1000",
        &hv,
        &[
            ("nabla hvp", nabla_hvp(&x, &v)),
            ("nabla tape::hvp", nabla_tape_hvp(&x, &v)),
            ("num-dual HyperDual64", num_dual_hvp(&x, &v)),
            ("echidna hvp", echidna_hvp(&x, &v)),
            ("echidna tape.hvp", echidna_record(&x).hvp(&x, &v).1),
        ],
        1e-11,
    )?;
    if large {
        agree(
            "rosenbrock hessian n = 1000",
            &flat(h),
            &[
                ("nabla hessian", flat(nabla_hessian(&x))),
                ("nabla tape::hessian", flat(nabla_tape_hessian(&x))),
                ("echidna hessian", flat(echidna_hessian(&x))),
            ],
            1e-12,
        )?;
    }
    let m = mlp_problem();
    agree(
        "mlp hessian (b1, w2, b2)",
        &flat(mlp_hessian_by_hand(&m.theta, &m.samples)),
        &[
            ("nabla hessian", flat(mlp_nabla_hessian(&m))),
            ("nabla tape::hessian", flat(mlp_nabla_tape_hessian(&m))),
            ("nabla FF", flat(mlp_nabla_hessian_ff(&m))),
            ("num-dual Dual2DVec64", flat(mlp_num_dual_hessian(&m))),
            ("echidna hessian", flat(mlp_echidna_hessian(&m))),
        ],
        1e-12,
    )
}
