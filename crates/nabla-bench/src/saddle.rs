//! The saddle benchmark: a* = argmin_a max_b f(a, b), b* = argmax_b f(a*, b), with
//! f(a, b) = (a₀² + a₁²) − (b₀² + b₁²), from (1, 1). The outer gradient (first
//! letter of the variant) differentiates through the inner optimiser's loop.

use nabla::Scalar;

use crate::nested::{GradMode, ScalarFn, argmin, argmin_with};

/// The expected value of all four coordinates (BENCHMARKS.md).
pub const EXPECTED: f64 = 8.246324826140356e-06;

fn f<T: Scalar>(a: &[T], b: &[T]) -> T {
    (a[0] * a[0] + a[1] * a[1]) - (b[0] * b[0] + b[1] * b[1])
}

/// b ↦ −f(a, b) for a fixed `a` of the enclosing level: maximising f over b.
struct Inner<S> {
    a: Vec<S>,
}

impl<S: Scalar> ScalarFn<S> for Inner<S> {
    fn eval<T: Scalar, L: Fn(S) -> T>(&self, b: &[T], lift: L) -> T {
        // Lifted into an array: the harness should not add allocations of its own.
        let a = [lift(self.a[0]), lift(self.a[1])];
        -f(&a, b)
    }
}

/// a ↦ max_b f(a, b), the inner maximisation run at a's own scalar type with
/// gradients in mode `M`.
struct Outer<M>(std::marker::PhantomData<M>);

impl<M: GradMode> ScalarFn<f64> for Outer<M> {
    fn eval<T: Scalar, L: Fn(f64) -> T>(&self, a: &[T], _lift: L) -> T {
        let start = [T::one(), T::one()];
        let b = argmin::<T, M, _>(&Inner { a: a.to_vec() }, &start);
        f(a, &b)
    }
}

/// The variant `Outer`/`Inner` by the library: (a₀, a₁, b₀, b₁).
pub fn run<Out: GradMode, In: GradMode>() -> [f64; 4] {
    let start = [1.0, 1.0];
    let a = argmin::<f64, Out, _>(&Outer::<In>(std::marker::PhantomData), &start);
    let b = argmin::<f64, In, _>(&Inner { a: a.clone() }, &start);
    [a[0], a[1], b[0], b[1]]
}

/// Hand-written: ∇_b(−f) = 2b does not involve a, so the inner iterates do not
/// depend on a, and d/da max_b f(a, b) = ∂f/∂a = 2a exactly as AD through the loop
/// would find. The values still need the inner maximisation.
pub fn run_manual() -> [f64; 4] {
    let start = [1.0, 1.0];
    let inner_max = |a: &[f64]| -> Vec<f64> {
        let value = |b: &[f64]| -f(a, b);
        argmin_with(value, |b: &[f64]| vec![2.0 * b[0], 2.0 * b[1]], &start)
    };
    let a = argmin_with(
        |a: &[f64]| f(a, &inner_max(a)),
        |a: &[f64]| vec![2.0 * a[0], 2.0 * a[1]],
        &start,
    );
    let b = inner_max(&a);
    [a[0], a[1], b[0], b[1]]
}
