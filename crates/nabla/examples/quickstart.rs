//! The README's main job: a function written once, then its value, gradient and
//! Hessian, and a nested derivative.
//!
//! Run with `cargo run --release -p nabla --example quickstart`.

use nabla::{Dual, Scalar, derivative, grad, hessian, value_and_grad};

/// f(x, y) = 2x² + 3xy + 4y², written once for every scalar type.
fn f<S: Scalar>(v: &[S]) -> S {
    let (x, y) = (v[0], v[1]);
    x * x * 2.0 + x * y * 3.0 + y * y * 4.0
}

/// The Rosenbrock function, a classic optimisation benchmark.
fn rosenbrock<S: Scalar>(x: &[S]) -> S {
    x.windows(2)
        .map(|w| {
            let a = S::one() - w[0];
            let b = w[1] - w[0] * w[0];
            a * a + b * b * 100.0
        })
        .sum()
}

fn main() {
    let point = [3.0, 4.0];
    println!("f(x, y) = 2x² + 3xy + 4y² at {point:?}");
    println!("  value    {}", f(&point));
    println!("  gradient {:?}   (reverse mode)", grad(|v| f(v), &point));
    println!(
        "  Hessian  {:?}   (forward over reverse)",
        hessian(|v| f(v), &point)
    );
    let hv = nabla::hvp(|v| f(v), &point, &[7.0, 8.0]);
    println!("  H·(7, 8) {hv:?}");

    let x = [-1.2, 1.0, 0.5];
    let (value, gradient) = value_and_grad(|v| rosenbrock(v), &x);
    println!("rosenbrock at {x:?}");
    println!("  value    {value}");
    println!("  gradient {gradient:?}");

    // Nesting without perturbation confusion: d/dx [x · (d/dy (x + y))(1)] = 1.
    let d = derivative(
        |x| x * derivative(|y| Dual::constant(x) + y, Dual::from(1.0)),
        1.0,
    );
    println!("d/dx [x · (d/dy (x + y))(1)] at 1 = {d}");
}
