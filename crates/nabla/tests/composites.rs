//! Composite functions: finite differences, agreement of forward and reverse mode
//! (Krawiec et al. Lemma 1), and the published worked examples.

mod common;

use common::{FD_TOL, MODE_TOL, assert_all_close, assert_close, central_grad, dot};
use nabla::{Lift, Scalar, VectorFunction, grad, jacobian, jvp, value_and_grad, vjp};
use proptest::prelude::*;

fn rosenbrock<S: Scalar>(x: &[S]) -> S {
    x.windows(2)
        .map(|w| {
            let a = S::one() - w[0];
            let b = w[1] - w[0] * w[0];
            a * a + b * b * 100.0
        })
        .sum()
}

/// Softmax probabilities, with the maximum subtracted first.
fn softmax<S: Scalar>(z: &[S]) -> Vec<S> {
    let m = z.iter().copied().fold(z[0], S::max);
    let e: Vec<S> = z.iter().map(|&zi| (zi - m).exp()).collect();
    let total: S = e.iter().copied().sum();
    e.into_iter().map(|ei| ei / total).collect()
}

/// Cross-entropy of softmax(z) against class `label`: logsumexp(z) − z[label].
fn softmax_cross_entropy<S: Scalar>(z: &[S], label: usize) -> S {
    let m = z.iter().copied().fold(z[0], S::max);
    let lse = z.iter().map(|&zi| (zi - m).exp()).sum::<S>().ln() + m;
    lse - z[label]
}

/// A 3-4-2 tanh network; `p` holds W1 (4×3), b1 (4), W2 (2×4), b2 (2).
const MLP_PARAMS: usize = 12 + 4 + 8 + 2;
fn mlp<S: Scalar>(p: &[S], input: &[f64; 3]) -> Vec<S> {
    let (w1, rest) = p.split_at(12);
    let (b1, rest) = rest.split_at(4);
    let (w2, b2) = rest.split_at(8);
    let hidden: Vec<S> = (0..4)
        .map(|i| {
            let pre = (0..3).fold(b1[i], |acc, j| acc + w1[3 * i + j] * input[j]);
            pre.tanh()
        })
        .collect();
    (0..2)
        .map(|i| (0..4).fold(b2[i], |acc, j| acc + w2[4 * i + j] * hidden[j]))
        .collect()
}
/// Squared-error loss of the network over a fixed small data set.
fn mlp_loss<S: Scalar>(p: &[S]) -> S {
    const DATA: [([f64; 3], [f64; 2]); 3] = [
        ([0.5, -1.0, 2.0], [1.0, 0.0]),
        ([-0.3, 0.8, 0.1], [0.0, 1.0]),
        ([1.5, 0.2, -0.7], [0.5, 0.5]),
    ];
    DATA.iter()
        .map(|(input, target)| {
            let out = mlp(p, input);
            (out[0] - target[0]).powi(2) + (out[1] - target[1]).powi(2)
        })
        .sum()
}

/// Krawiec et al. Figure 12: rotate v by the quaternion q = (u; s).
fn rotate_vec_by_quat<S: Scalar>(v: [S; 3], q: [S; 4]) -> [S; 3] {
    let u = [q[0], q[1], q[2]];
    let s = q[3];
    let dot = |a: [S; 3], b: [S; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let cross = |a: [S; 3], b: [S; 3]| {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    };
    let uv2 = dot(u, v) * 2.0;
    let ss_uu = s * s - dot(u, u);
    let s2 = s * 2.0;
    let c = cross(u, v);
    [0, 1, 2].map(|i| uv2 * u[i] + ss_uu * v[i] + s2 * c[i])
}
/// Figure 12's arguments packed as (q; v) = (qx, qy, qz, qw, vx, vy, vz).
fn quaternion_x<S: Scalar>(p: &[S]) -> S {
    rotate_vec_by_quat([p[4], p[5], p[6]], [p[0], p[1], p[2], p[3]])[0]
}
struct Rotation;
impl VectorFunction<f64> for Rotation {
    fn eval<T: Lift<f64>>(&self, p: &[T]) -> Vec<T> {
        rotate_vec_by_quat([p[4], p[5], p[6]], [p[0], p[1], p[2], p[3]]).to_vec()
    }
}
/// The rotation as a plain function of any scalar type (for the single-mode operators).
fn rotation<S: Scalar>(p: &[S]) -> Vec<S> {
    rotate_vec_by_quat([p[4], p[5], p[6]], [p[0], p[1], p[2], p[3]]).to_vec()
}

#[test]
fn quaternion_gradient_matches_hand_derivation() {
    // Krawiec et al. Figure 12 at q = (1.1, 2.2, 3.3, 4.4), v = (5.5, 6.6, 7.7).
    // With u = (qx, qy, qz), s = qw and out_x = 2(u·v)uₓ + (s² − u·u)vₓ + 2s(u × v)ₓ:
    //   ∂/∂qx = 2(u·v)                 = 91.96
    //   ∂/∂qy = 2vᵧuₓ − 2uᵧvₓ + 2s v_z = 58.08
    //   ∂/∂qz = 2v_zuₓ − 2u_zvₓ − 2s vᵧ = −77.44
    //   ∂/∂qw = 2s vₓ + 2(u × v)ₓ       = 38.72
    //   ∂/∂vₓ = 2uₓ² + s² − u·u         = 4.84
    //   ∂/∂vᵧ = 2uᵧuₓ − 2s u_z          = −24.2
    //   ∂/∂v_z = 2u_zuₓ + 2s uᵧ         = 26.62
    let p = [1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7];
    let expected = [91.96, 58.08, -77.44, 38.72, 4.84, -24.2, 26.62];
    let (value, g) = value_and_grad(|x| quaternion_x(x), &p);
    // out_x = 2·45.98·1.1 + (19.36 − 16.94)·5.5 + 8.8·(2.2·7.7 − 3.3·6.6)
    //       = 101.156 + 13.31 − 42.592 = 71.874
    assert_close(value, 71.874, 1e-13, "rotated x");
    assert_all_close(&g, &expected, 1e-13, "quaternion gradient");
    // The trace is linear in the operation count: a few dozen entries, as in Figure 12.
    let (_, pullback) = vjp(|x| vec![quaternion_x(x)], &p);
    assert!(
        pullback.trace_len() < 60,
        "trace has {} entries",
        pullback.trace_len()
    );
}

#[test]
fn hessian_vector_product_worked_example() {
    // f(x, y) = 2x² + 3xy + 4y²; H·(7, 8) at (3, 4) = (52, 85).
    fn f<S: Scalar>(v: &[S]) -> S {
        v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0
    }
    let (x, dir) = ([3.0, 4.0], [7.0, 8.0]);
    // Forward over reverse: the library's hvp, and jvp of grad by hand.
    assert_eq!(nabla::hvp(|v| f(v), &x, &dir), vec![52.0, 85.0]);
    assert_eq!(jvp(|v| grad(|w| f(w), v), &x, &dir).1, vec![52.0, 85.0]);
    // Reverse over reverse: the gradient of ⟨∇f(x), dir⟩.
    let rr = grad(
        |v| {
            let g = grad(|w| f(w), v);
            g[0] * dir[0] + g[1] * dir[1]
        },
        &x,
    );
    assert_eq!(rr, vec![52.0, 85.0]);
    // Reverse over forward: the gradient of the directional derivative.
    let rf = grad(
        |v| jvp(|w| vec![f(w)], v, &[dir[0].into(), dir[1].into()]).1[0],
        &x,
    );
    assert_eq!(rf, vec![52.0, 85.0]);
}

/// A linear map at a point: (point, direction) ↦ J·direction or directionᵀ·J.
type LinearMapAt<'a> = &'a dyn Fn(&[f64], &[f64]) -> Vec<f64>;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn rosenbrock_matches_finite_differences(x in prop::collection::vec(-2.0..2.0f64, 2..10)) {
        let g = grad(|v| rosenbrock(v), &x);
        assert_all_close(&g, &central_grad(rosenbrock, &x), FD_TOL, "rosenbrock");
    }

    #[test]
    fn softmax_cross_entropy_matches_finite_differences(
        z in prop::collection::vec(-5.0..5.0f64, 1..8), label in 0usize..8,
    ) {
        let label = label % z.len();
        let g = grad(|v| softmax_cross_entropy(v, label), &z);
        assert_all_close(&g, &central_grad(|v| softmax_cross_entropy(v, label), &z), FD_TOL, "softmax CE");
        // The known closed form: softmax(z) − onehot(label).
        let mut expected = softmax(&z);
        expected[label] -= 1.0;
        assert_all_close(&g, &expected, 1e-12, "softmax CE closed form");
    }

    #[test]
    fn mlp_loss_matches_finite_differences(p in prop::collection::vec(-1.0..1.0f64, MLP_PARAMS)) {
        let g = grad(|v| mlp_loss(v), &p);
        assert_all_close(&g, &central_grad(mlp_loss, &p), FD_TOL, "mlp loss");
    }

    #[test]
    fn quaternion_matches_finite_differences(p in prop::collection::vec(-3.0..3.0f64, 7)) {
        let g = grad(|v| quaternion_x(v), &p);
        assert_all_close(&g, &central_grad(quaternion_x, &p), FD_TOL, "quaternion");
    }

    /// Krawiec et al. Lemma 1: for random s, δs, δt, δt·(J δs) = (δtᵀ J)·δs.
    #[test]
    fn forward_and_reverse_agree_lemma_1(
        s in prop::collection::vec(-1.0..1.0f64, MLP_PARAMS),
        ds in prop::collection::vec(-1.0..1.0f64, MLP_PARAMS),
        dt in prop::collection::vec(-1.0..1.0f64, 7),
    ) {
        // Four vector functions of different shapes, one check each.
        let check = |name: &str, n: usize, m: usize,
                     fwd: LinearMapAt<'_>,
                     rev: LinearMapAt<'_>| {
            let (s, ds, dt) = (&s[..n], &ds[..n], &dt[..m]);
            let lhs = dot(dt, &fwd(s, ds));
            let rhs = dot(&rev(s, dt), ds);
            assert_close(lhs, rhs, MODE_TOL, &format!("Lemma 1 for {name}"));
        };
        check("rotation", 7, 3,
              &|s, ds| jvp(rotation, s, ds).1,
              &|s, dt| vjp(|v| rotation(v), s).1.apply(dt));
        check("softmax", 6, 6,
              &|s, ds| jvp(softmax, s, ds).1,
              &|s, dt| vjp(|v| softmax(v), s).1.apply(dt));
        check("mlp", MLP_PARAMS, 2,
              &|s, ds| jvp(|v| mlp(v, &[0.3, -0.2, 0.9]), s, ds).1,
              &|s, dt| vjp(|v| mlp(v, &[0.3, -0.2, 0.9]), s).1.apply(dt));
        check("rosenbrock", 5, 1,
              &|s, ds| jvp(|v| vec![rosenbrock(v)], s, ds).1,
              &|s, dt| vjp(|v| vec![rosenbrock(v)], s).1.apply(dt));
    }

    /// `jacobian` (either mode, by shape) agrees with both explicit modes.
    #[test]
    fn jacobian_modes_agree(p in prop::collection::vec(-2.0..2.0f64, 7)) {
        let j = jacobian(&Rotation, &p); // 3 outputs < 7 inputs: reverse
        let fwd = nabla::jacobian_forward(rotation, &p);
        let rev = nabla::jacobian_reverse(|v| rotation(v), &p);
        prop_assert_eq!(j.len(), 3);
        for i in 0..3 {
            prop_assert_eq!(j[i].len(), 7);
            assert_all_close(&fwd[i], &rev[i], MODE_TOL, "jacobian row");
            assert_all_close(&j[i], &rev[i], MODE_TOL, "jacobian row");
        }
    }
}

#[test]
fn jacobian_picks_forward_for_tall_functions() {
    struct Tall;
    impl VectorFunction<f64> for Tall {
        fn eval<T: Lift<f64>>(&self, x: &[T]) -> Vec<T> {
            vec![x[0], x[0] * x[0], x[0].sin(), x[0].exp()]
        }
    }
    let j = jacobian(&Tall, &[0.5]);
    let expected = [1.0, 1.0, 0.5_f64.cos(), 0.5_f64.exp()];
    assert_eq!(j, expected.iter().map(|&d| vec![d]).collect::<Vec<_>>());
}
