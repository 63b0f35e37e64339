//! Minimal reproductions of the two costs the benchmarks show for the nabla library
//! (run with `cargo run --release -p nabla-bench --example trace_cost`):
//!
//! 1. reverse mode on a long chain of multiply-adds of two variables (the shape of
//!    GMM's Q·(μ − x)), per trace entry, as the trace grows past the caches;
//! 2. nested forward mode on a tiny function called many times through `jvp` (the
//!    shape of the saddle/particle inner gradients), against plain `f64`.

use std::hint::black_box;
use std::time::Instant;

use nabla::{Dual, Scalar, grad, jvp};

/// Σ_i a_i · b_i: n products of two variables, n sums.
fn chain<S: Scalar>(v: &[S]) -> S {
    let n = v.len() / 2;
    let (a, b) = v.split_at(n);
    let mut acc = S::zero();
    for i in 0..n {
        acc += a[i] * b[i];
    }
    acc
}

fn seconds(mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        f();
        best = best.min(start.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    println!("1. reverse mode, chain of n two-variable products (≈ 2n trace entries)");
    for n in [1 << 12, 1 << 16, 1 << 20, 1 << 23] {
        let x: Vec<f64> = (0..2 * n).map(|i| 1.0 + (i % 13) as f64 * 0.01).collect();
        let primal = seconds(|| {
            black_box(chain(black_box(&x)));
        });
        let gradient = seconds(|| {
            black_box(grad(|v| chain(v), black_box(&x)));
        });
        println!(
            "   n = {n:>8}: primal {:>8.2} ms, gradient {:>8.2} ms, ratio {:>5.1}, {:>5.1} ns per trace entry",
            primal * 1e3,
            gradient * 1e3,
            gradient / primal,
            gradient / (2.0 * n as f64) * 1e9
        );
    }

    println!("2. the gradient of f(x, y) = 1/√(x² + y²) by two jvps, 10⁶ times");
    fn f<S: Scalar>(v: &[S]) -> S {
        S::one() / (v[0] * v[0] + v[1] * v[1]).sqrt()
    }
    let calls = 1_000_000;
    let plain = seconds(|| {
        let mut acc = 0.0;
        for i in 0..calls {
            let p = [1.0 + i as f64 * 1e-9, 2.0];
            // Hand-written gradient: −x/r³, −y/r³.
            let r2: f64 = p[0] * p[0] + p[1] * p[1];
            let r3 = r2 * r2.sqrt();
            acc += -p[0] / r3 - p[1] / r3;
        }
        black_box(acc);
    });
    let forward = seconds(|| {
        let mut acc = 0.0;
        for i in 0..calls {
            let p = [1.0 + i as f64 * 1e-9, 2.0];
            for dir in [[1.0, 0.0], [0.0, 1.0]] {
                acc += jvp(|v: &[Dual<f64>]| vec![f(v)], &p, &dir).1[0];
            }
        }
        black_box(acc);
    });
    println!(
        "   hand-written {:.1} ns per gradient, nabla 2×jvp {:.1} ns per gradient ({:.0}×)",
        plain / calls as f64 * 1e9,
        forward / calls as f64 * 1e9,
        forward / plain
    );
}
