//! `value_and_grad_sum` and `grad_forward` against the operators they stand in for,
//! at f64 and nested, and the reuse of pooled memory across calls, types and levels.

mod common;

use common::{assert_all_close, assert_close};
use nabla::{
    Dual, Reverse, Scalar, grad, grad_forward, hessian, jvp, value_and_grad, value_and_grad_sum,
};
use proptest::prelude::*;

/// A term of a least-squares-like sum with a nonlinearity: the i-th "data point" is
/// derived from i, so that terms differ.
fn term<S: Scalar>(p: &[S], i: usize) -> S {
    let t = S::from(i as f64 * 0.3 - 1.0);
    let model = (p[0] * t + p[1]).tanh() * p[2] + (p[1] * p[2]).sin();
    let r = model - S::from((i as f64).cos());
    r * r
}

fn sum<S: Scalar>(p: &[S], n: usize) -> S {
    (0..n).map(|i| term(p, i)).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sum_of_terms_matches_the_gradient_of_the_sum(
        p in prop::collection::vec(-1.5..1.5f64, 3),
        n in 0usize..40,
    ) {
        let (value, g) = value_and_grad(|x| sum(x, n), &p);
        let (value_sum, g_sum) = value_and_grad_sum(|x, i| term(x, i), &p, 0..n);
        assert_close(value_sum, value, 1e-12, "value");
        assert_all_close(&g_sum, &g, 1e-12, "gradient");
    }

    #[test]
    fn grad_forward_matches_grad(p in prop::collection::vec(-1.5..1.5f64, 3)) {
        let g = grad(|x| sum(x, 7), &p);
        assert_all_close(&grad_forward(|x| sum(x, 7), &p), &g, 1e-12, "gradient");
    }
}

#[test]
fn terms_may_be_batches_inputs_or_constants() {
    let p = [0.5, -0.25, 2.0];
    // Batches of different sizes, a term that is an input itself, a constant term.
    let batches = [0..3, 3..4, 4..10];
    let (value, g) = value_and_grad_sum(
        |x, part: Option<std::ops::Range<usize>>| match part {
            Some(points) => points.map(|i| term(x, i)).sum(),
            None => x[1] + Reverse::constant(4.0),
        },
        &p,
        batches.iter().cloned().map(Some).chain([None]),
    );
    let (expected_value, expected) = value_and_grad(|x| sum(x, 10) + x[1] + 4.0, &p);
    assert_close(value, expected_value, 1e-12, "value");
    assert_all_close(&g, &expected, 1e-12, "gradient");

    let (value, g) = value_and_grad_sum(|_, c: f64| Reverse::constant(c), &p, [1.0, 2.0]);
    assert_eq!((value, g), (3.0, vec![0.0; 3]));
    let (value, g) = value_and_grad_sum(|x, ()| x[2], &p, std::iter::empty());
    assert_eq!((value, g), (0.0, vec![0.0; 3]));
}

#[test]
fn sum_of_terms_nests_in_both_modes() {
    // d/da of Σᵢ ∂/∂x [a·x²·i] at x = 1.5 is Σᵢ 2·1.5·i = 3·Σi.
    let n = 6;
    fn inner<S: Scalar>(a: S, n: usize) -> S {
        value_and_grad_sum(
            |x, i: usize| Reverse::constant(a) * x[0] * x[0] * i as f64,
            &[S::from(1.5)],
            0..n,
        )
        .1[0]
    }
    let expected = 3.0 * (0..n).sum::<usize>() as f64;
    assert_eq!(grad(|a| inner(a[0], n), &[0.7]), vec![expected]);
    assert_eq!(grad_forward(|a| inner(a[0], n), &[0.7]), vec![expected]);
    // Forward over it: jvp of the gradient of Σ term (a Hessian-vector product).
    let p = [0.5, -0.25, 2.0];
    let v = [1.0, 2.0, -1.0];
    let (_, hv) = jvp(|x| value_and_grad_sum(|y, i| term(y, i), x, 0..9).1, &p, &v);
    let h = hessian(|x| sum(x, 9), &p);
    let expected: Vec<f64> = h
        .iter()
        .map(|row| row.iter().zip(&v).map(|(a, b)| a * b).sum())
        .collect();
    assert_all_close(&hv, &expected, 1e-12, "H·v");
    // And inside a sum of terms, a sum of terms (reverse over reverse).
    let g = value_and_grad_sum(
        |a, j: usize| {
            let inner = value_and_grad_sum(
                |x, i: usize| Reverse::constant(a[0]) * x[0] * x[0] * (i + j) as f64,
                &[Reverse::constant(1.5)],
                0..3,
            );
            inner.1[0]
        },
        &[0.7],
        0..2,
    )
    .1;
    // Σⱼ Σᵢ 2·1.5·(i + j) = 3·(0+1+2 + 1+2+3)
    assert_eq!(g, vec![27.0]);
}

#[test]
fn grad_forward_nests() {
    // d/dx [x · (d/dy (x·y))] = d/dx x² = 2x; both orders of the modes.
    let x = 1.25;
    let ff = grad_forward(
        |v| v[0] * grad_forward(|w| Dual::constant(v[0]) * w[0], &[v[0]])[0],
        &[x],
    );
    let rf = grad(
        |v| v[0] * grad_forward(|w| Dual::constant(v[0]) * w[0], &[v[0]])[0],
        &[x],
    );
    let fr = grad_forward(
        |v| v[0] * grad(|w| Reverse::constant(v[0]) * w[0], &[v[0]])[0],
        &[x],
    );
    assert_eq!((ff, rf, fr), (vec![2.5], vec![2.5], vec![2.5]));
    assert_eq!(
        grad_forward(|_| Dual::constant(1.0), &[]),
        Vec::<f64>::new()
    );
}

#[test]
fn repeated_nested_gradients_reuse_memory_and_agree() {
    // Reverse over reverse and forward over reverse, many times on one thread: the
    // traces of both levels come from the pool after the first call, at types of
    // different layouts (and the same layout at different levels).
    fn f<S: Scalar>(x: &[S]) -> S {
        (0..300).fold(x[0], |acc, i| (acc * x[1] + x[0]).sin() * (i as f64 * 1e-3)) + x[0] * x[1]
    }
    let first_rr = grad(|x| grad(|y| f(y), x).iter().copied().sum(), &[0.3, 0.9]);
    let first_fr = hessian(|x| f(x), &[0.3, 0.9]);
    // (Close rather than equal only because Miri perturbs `sin`'s rounding.)
    for _ in 0..20 {
        let rr = grad(|x| grad(|y| f(y), x).iter().copied().sum(), &[0.3, 0.9]);
        assert_all_close(&rr, &first_rr, 1e-14, "RR");
        for (row, first) in hessian(|x| f(x), &[0.3, 0.9]).iter().zip(&first_fr) {
            assert_all_close(row, first, 1e-14, "FR");
        }
    }
    // The Hessian's row sums are the gradient of the gradient's sum.
    let row_sums: Vec<f64> = (0..2).map(|j| first_fr[0][j] + first_fr[1][j]).collect();
    assert_all_close(&first_rr, &row_sums, 1e-12, "RR vs FR");
}

/// A sum over however many inputs there are, with a product of neighbours so that
/// the trace records.
fn chain_of_products<S: Scalar>(x: &[S]) -> S {
    let mut sum = S::zero();
    for (i, &xi) in x.iter().enumerate() {
        sum += (xi * S::from(i as f64 + 1.0)).sin() * x[(i + 1) % x.len()];
    }
    sum
}

#[test]
fn operators_agree_on_either_side_of_the_stack_held_inputs() {
    // The input vector of every operator is held on the stack for a few inputs and
    // pooled beyond (pool::with_scratch); the modes must agree on both sides, nested too.
    for n in 0..=7 {
        let x: Vec<f64> = (0..n).map(|i| 0.3 * i as f64 - 0.7).collect();
        let v: Vec<f64> = (0..n).map(|i| 1.0 - 0.2 * i as f64).collect();
        let g = grad(|x| chain_of_products(x), &x);
        assert_all_close(&grad_forward(chain_of_products, &x), &g, 1e-14, "gradient");
        assert_all_close(
            &nabla::tape::grad(chain_of_products, &x),
            &g,
            1e-14,
            "gradient",
        );
        let (_, t) = jvp(|x| vec![chain_of_products(x)], &x, &v);
        let along: f64 = g.iter().zip(&v).map(|(a, b)| a * b).sum();
        assert_close(
            t.first().copied().unwrap_or(0.0),
            if n == 0 { 0.0 } else { along },
            1e-13,
            "jvp",
        );
        let h = hessian(|x| chain_of_products(x), &x);
        let h_ff = nabla::jacobian_forward(|x| grad_forward(chain_of_products, x), &x);
        for (row, row_ff) in h.iter().zip(&h_ff) {
            assert_all_close(row, row_ff, 1e-13, "Hessian FF");
        }
        let h_rr = nabla::jacobian_reverse(|x| grad(|y| chain_of_products(y), x), &x);
        for (row, row_rr) in h.iter().zip(&h_rr) {
            assert_all_close(row, row_rr, 1e-13, "Hessian RR");
        }
    }
}
