//! GMM: the negative log-likelihood-style objective of a Gaussian mixture with a
//! Wishart prior, as in ADBench, and its gradient with respect to all parameters.

use nabla::{Scalar, value_and_grad_sum};

use crate::data::Numbers;

/// A GMM input: the parameters at which to differentiate, the points, the prior.
#[derive(Clone, Debug)]
pub struct GmmInput {
    /// Dimension of the points.
    pub d: usize,
    /// Number of mixture components.
    pub k: usize,
    /// Number of points.
    pub n: usize,
    /// α (K), μ (K·d), icf (K·(d + d(d−1)/2)): the gradient's order.
    pub params: Vec<f64>,
    /// The points, n·d row major.
    pub x: Vec<f64>,
    /// Wishart prior γ.
    pub gamma: f64,
    /// Wishart prior m.
    pub m: usize,
}

impl GmmInput {
    /// Parses the ADBench GMM format.
    pub fn parse(text: &str) -> Self {
        let mut t = Numbers::new(text);
        let (d, k, n) = (t.next_usize(), t.next_usize(), t.next_usize());
        let params = t.take(k + k * d + k * icf_len(d));
        let x = t.take(n * d);
        let gamma = t.next_f64();
        let m = t.next_usize();
        GmmInput {
            d,
            k,
            n,
            params,
            x,
            gamma,
            m,
        }
    }

    /// The number of parameters (and gradient entries).
    pub fn num_params(&self) -> usize {
        self.params.len()
    }

    /// Where α, μ and icf start in the parameter vector.
    fn offsets(&self) -> (usize, usize) {
        (self.k, self.k + self.k * self.d)
    }
}

/// Length of one component's icf: d log-diagonal entries then the strict lower
/// triangle.
pub fn icf_len(d: usize) -> usize {
    d + d * (d - 1) / 2
}

/// The reference's π, used in the constant terms (BENCHMARKS.md).
#[allow(clippy::approx_constant)] // deliberately the reference's rounded value
const PI: f64 = 3.14159265359;

/// ln Γ(a) for a positive multiple of ½ (all the Wishart constant needs), exactly
/// from Γ(a + 1) = a·Γ(a), Γ(1) = 1, Γ(½) = √π.
fn ln_gamma_half_integer(a: f64) -> f64 {
    assert!(a > 0.0 && (a * 2.0).fract() == 0.0, "ln Γ({a}) unsupported");
    let (mut x, mut acc) = if a.fract() == 0.0 {
        (1.0, 0.0)
    } else {
        (0.5, 0.5 * std::f64::consts::PI.ln())
    };
    while x < a {
        acc += x.ln();
        x += 1.0;
    }
    acc
}

/// The terms of L that do not involve parameters: −(n·d/2)·log 2π − K·C.
fn constant_term(data: &GmmInput) -> f64 {
    let (d, k, n) = (data.d as f64, data.k as f64, data.n as f64);
    let n_prime = d + data.m as f64 + 1.0;
    let log_gamma_d = 0.25 * d * (d - 1.0) * PI.ln()
        + (1..=data.d)
            .map(|j| ln_gamma_half_integer(n_prime / 2.0 + (1.0 - j as f64) / 2.0))
            .sum::<f64>();
    let c = n_prime * d * (data.gamma.ln() - 0.5 * 2f64.ln()) - log_gamma_d;
    -(n * d / 2.0) * (2.0 * PI).ln() - k * c
}

/// logsumexp with the maximum subtracted first (for stability; it cancels in the
/// derivative).
fn logsumexp<S: Scalar>(v: &[S]) -> S {
    let max = v
        .iter()
        .copied()
        .fold(v[0], |a, b| if b > a { b } else { a });
    max + v.iter().map(|&x| (x - max).exp()).sum::<S>().ln()
}

/// y += L·z for the strict lower triangle L stored column by column.
fn lower_times<S: Scalar>(lower: &[S], z: &[S], y: &mut [S]) {
    let mut l = 0;
    for (col, &zc) in z.iter().enumerate() {
        let len = y.len() - col - 1;
        for (yr, &lv) in y[col + 1..].iter_mut().zip(&lower[l..l + len]) {
            *yr += lv * zc;
        }
        l += len;
    }
}

/// The objective L at `params`, written once for every scalar type.
pub fn objective<S: Scalar>(params: &[S], data: &GmmInput) -> S {
    data_term(params, data, 0..data.n) + param_term(params, data)
}

/// Σ over points `points` of logsumexp_k(α_k + Σ_j q_kj − ½‖Q_k (x_i − μ_k)‖²).
/// The objective is this over all points plus [`param_term`]; splitting the points
/// keeps reverse mode's trace small (see [`gradient_nabla`]).
pub fn data_term<S: Scalar>(params: &[S], data: &GmmInput, points: std::ops::Range<usize>) -> S {
    let (d, k) = (data.d, data.k);
    let (mu0, icf0) = data.offsets();
    let icf = icf_len(d);
    // Per component: α_k + Σ_j q_kj and the diagonal exp(q_k), shared by all points.
    let base: Vec<S> = (0..k)
        .map(|c| {
            params[c]
                + params[icf0 + c * icf..icf0 + c * icf + d]
                    .iter()
                    .copied()
                    .sum::<S>()
        })
        .collect();
    let diag: Vec<S> = (0..k * d)
        .map(|cj| params[icf0 + (cj / d) * icf + cj % d].exp())
        .collect();
    let mut main = vec![S::zero(); k];
    let mut diff = vec![S::zero(); d];
    let mut y = vec![S::zero(); d];
    let mut total = S::zero();
    for i in points {
        let xi = &data.x[i * d..(i + 1) * d];
        for c in 0..k {
            // y = Q_k (μ_k − x_i): the sign does not matter under the norm.
            for j in 0..d {
                diff[j] = params[mu0 + c * d + j] - xi[j];
                y[j] = diag[c * d + j] * diff[j];
            }
            let lower = &params[icf0 + c * icf + d..icf0 + (c + 1) * icf];
            lower_times(lower, &diff, &mut y);
            let sq: S = y.iter().map(|&v| v * v).sum();
            main[c] = base[c] - sq * 0.5;
        }
        total += logsumexp(&main);
    }
    total
}

/// −n·logsumexp(α) + Σ_k [½γ²(‖exp(q_k)‖² + ‖l_k‖²) − m·Σ_j q_kj] + constants.
pub fn param_term<S: Scalar>(params: &[S], data: &GmmInput) -> S {
    let (d, k) = (data.d, data.k);
    let (_, icf0) = data.offsets();
    let icf = icf_len(d);
    let mut prior = S::zero();
    for c in 0..k {
        let block = &params[icf0 + c * icf..icf0 + (c + 1) * icf];
        let (q, l) = block.split_at(d);
        let frob: S =
            q.iter().map(|&v| (v * 2.0).exp()).sum::<S>() + l.iter().map(|&v| v * v).sum::<S>();
        let qsum: S = q.iter().copied().sum();
        prior += frob * (0.5 * data.gamma * data.gamma) - qsum * data.m as f64;
    }
    prior - logsumexp(&params[..k]) * data.n as f64 + constant_term(data)
}

/// The reverse-mode trace one batch of points should record: the data term is a sum
/// over points, so [`value_and_grad_sum`] records and sweeps it a batch at a time. A
/// batch's trace (2¹⁶ entries of 24 bytes, 1.5 MB) then stays in the processor's
/// cache, and larger batches would only spread `data_term`'s per-call set-up (one
/// `exp` per component and dimension) more thinly.
const BATCH_TRACE_ENTRIES: usize = 1 << 16;

/// A term of the objective for [`value_and_grad_sum`]: the parameter term, or the
/// data term over a batch of points.
#[derive(Clone, Debug)]
enum Term {
    Params,
    Points(std::ops::Range<usize>),
}

/// Value and gradient by the library's reverse mode: [`value_and_grad_sum`] of the
/// generic [`objective`]'s two parts, the data term in batches of points.
pub fn gradient_nabla(data: &GmmInput) -> (f64, Vec<f64>) {
    let (d, k) = (data.d, data.k);
    // About two trace entries per multiply-add of Q·(μ − x), per point and component.
    let per_point = k * (d * (d + 1) + 4 * d + 8);
    let batch = (BATCH_TRACE_ENTRIES / per_point).clamp(1, data.n.max(1));
    let batches = (0..data.n)
        .step_by(batch)
        .map(|start| Term::Points(start..(start + batch).min(data.n)));
    value_and_grad_sum(
        |p, term| match term {
            Term::Params => param_term(p, data),
            Term::Points(points) => data_term(p, data, points),
        },
        &data.params,
        std::iter::once(Term::Params).chain(batches),
    )
}

/// Value and gradient derived by hand (no AD).
///
/// With r_ik = softmax_k(main_ik), z = μ_k − x_i and y = Q_k z:
/// ∂/∂α_k = Σ_i r_ik − n·softmax(α)_k;
/// ∂/∂μ_k = −Σ_i r_ik Q_kᵀ y;
/// ∂/∂q_kj = Σ_i r_ik (1 − y_j e^{q_kj} z_j) + γ² e^{2q_kj} − m;
/// ∂/∂L_k\[row\]\[col\] = −Σ_i r_ik y_row z_col + γ² L_k\[row\]\[col\].
///
/// Two passes: the first computes every main_ik and so r_ik; the second runs
/// component by component over all points, recomputing z and y, so that one
/// component's parameters and gradient stay in cache.
pub fn gradient_manual(data: &GmmInput) -> (f64, Vec<f64>) {
    let (d, k, n) = (data.d, data.k, data.n);
    let (mu0, icf0) = data.offsets();
    let icf = icf_len(d);
    let p = &data.params;
    let mut g = vec![0.0; p.len()];
    let diag: Vec<f64> = (0..k * d)
        .map(|cj| p[icf0 + (cj / d) * icf + cj % d].exp())
        .collect();
    let base: Vec<f64> = (0..k)
        .map(|c| p[c] + p[icf0 + c * icf..icf0 + c * icf + d].iter().sum::<f64>())
        .collect();
    let mut z = vec![0.0; d];
    let mut y = vec![0.0; d];
    // Q_k (μ_k − x_i) into y, μ_k − x_i into z.
    let project = |c: usize, i: usize, z: &mut [f64], y: &mut [f64]| {
        let xi = &data.x[i * d..(i + 1) * d];
        for j in 0..d {
            z[j] = p[mu0 + c * d + j] - xi[j];
            y[j] = diag[c * d + j] * z[j];
        }
        lower_times(&p[icf0 + c * icf + d..icf0 + (c + 1) * icf], z, y);
    };
    // Pass 1: main_ik, then r_ik in place.
    let mut r = vec![0.0; n * k];
    let mut value = 0.0;
    for i in 0..n {
        let main = &mut r[i * k..(i + 1) * k];
        for c in 0..k {
            project(c, i, &mut z, &mut y);
            main[c] = base[c] - 0.5 * y.iter().map(|v| v * v).sum::<f64>();
        }
        let max = main.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = main.iter().map(|m| (m - max).exp()).sum();
        value += max + sum.ln();
        for m in main.iter_mut() {
            *m = (*m - max).exp() / sum;
        }
    }
    // Pass 2: per component, accumulate over points.
    for c in 0..k {
        let (gq0, gmu0) = (icf0 + c * icf, mu0 + c * d);
        let lower = &p[gq0 + d..gq0 + icf];
        let mut g_mu = vec![0.0; d];
        let mut g_icf = vec![0.0; icf];
        let mut g_alpha = 0.0;
        for i in 0..n {
            let ri = r[i * k + c];
            g_alpha += ri;
            project(c, i, &mut z, &mut y);
            let (g_q, g_l) = g_icf.split_at_mut(d);
            for j in 0..d {
                // Diagonal part of Qᵀy, and the log-diagonal through exp.
                g_mu[j] -= ri * diag[c * d + j] * y[j];
                g_q[j] += ri * (1.0 - y[j] * diag[c * d + j] * z[j]);
            }
            let mut l = 0;
            for col in 0..d {
                let len = d - col - 1;
                let (lv, gl, below) = (&lower[l..l + len], &mut g_l[l..l + len], &y[col + 1..]);
                let mut dot = 0.0;
                let rz = ri * z[col];
                for ((g, &lv), &yr) in gl.iter_mut().zip(lv).zip(below) {
                    dot += lv * yr;
                    *g -= rz * yr;
                }
                g_mu[col] -= ri * dot;
                l += len;
            }
        }
        g[c] += g_alpha;
        for (gm, v) in g[gmu0..gmu0 + d].iter_mut().zip(&g_mu) {
            *gm += v;
        }
        for (gi, v) in g[gq0..gq0 + icf].iter_mut().zip(&g_icf) {
            *gi += v;
        }
    }
    // −n·logsumexp(α).
    let alpha = &p[..k];
    let amax = alpha.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let asum: f64 = alpha.iter().map(|a| (a - amax).exp()).sum();
    value -= n as f64 * (amax + asum.ln());
    for c in 0..k {
        g[c] -= n as f64 * (alpha[c] - amax).exp() / asum;
    }
    // The Wishart prior.
    let gamma2 = data.gamma * data.gamma;
    for c in 0..k {
        let gq = icf0 + c * icf;
        for j in 0..d {
            let e2 = diag[c * d + j] * diag[c * d + j];
            value += 0.5 * gamma2 * e2 - data.m as f64 * p[gq + j];
            g[gq + j] += gamma2 * e2 - data.m as f64;
        }
        for l in d..icf {
            value += 0.5 * gamma2 * p[gq + l] * p[gq + l];
            g[gq + l] += gamma2 * p[gq + l];
        }
    }
    (value + constant_term(data), g)
}

/// The primal: the objective on `f64`.
pub fn primal(data: &GmmInput) -> f64 {
    objective(&data.params, data)
}
