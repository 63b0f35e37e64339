//! What the nested benchmarks share: gradient modes chosen by type, functions that can
//! be evaluated at any scalar type, and the step-adapting gradient-descent optimiser
//! of Siskind & Pearlmutter.

use nabla::{Dual, Reverse, Scalar, grad, grad_forward};

/// A real-valued function of a vector that can run at any scalar type `T` built
/// over the level `S` it was made at. Values it captured from level `S` enter the
/// computation through `lift` (a constant at the inner level), which is how nesting
/// avoids perturbation confusion. (A Rust closure has one argument type, so a
/// function differentiated in either mode must be a type with a generic method.)
pub trait ScalarFn<S: Scalar> {
    /// The function at `x`, with captured values lifted by `lift`.
    fn eval<T: Scalar, L: Fn(S) -> T>(&self, x: &[T], lift: L) -> T;
}

/// How a gradient is computed: the first or second letter of FF/FR/RF/RR.
pub trait GradMode {
    /// "F" or "R".
    const LETTER: &'static str;
    /// ∇f(x), at whatever level `S` the optimiser runs.
    fn gradient<S: Scalar, F: ScalarFn<S>>(f: &F, x: &[S]) -> Vec<S>;
}

/// Forward gradient: one forward pass per coordinate ([`grad_forward`], which is
/// one [`jvp`](nabla::jvp) per coordinate sharing one vector of dual inputs).
#[derive(Clone, Copy, Debug)]
pub struct Forward;

/// Reverse gradient: one [`grad`].
#[derive(Clone, Copy, Debug)]
pub struct Backward;

impl GradMode for Forward {
    const LETTER: &'static str = "F";
    fn gradient<S: Scalar, F: ScalarFn<S>>(f: &F, x: &[S]) -> Vec<S> {
        grad_forward(|v| f.eval(v, Dual::constant), x)
    }
}

impl GradMode for Backward {
    const LETTER: &'static str = "R";
    fn gradient<S: Scalar, F: ScalarFn<S>>(f: &F, x: &[S]) -> Vec<S> {
        grad(|v| f.eval(v, Reverse::constant), x)
    }
}

fn norm<S: Scalar>(v: impl Iterator<Item = S>) -> f64 {
    v.map(|x| x.value() * x.value()).sum::<f64>().sqrt()
}

/// Gradient descent with step adaptation (BENCHMARKS.md): the iterates are values of
/// level `S`, so a derivative taken outside flows through every step. Comparisons
/// look at primal values only. `gradient` is [`GradMode::gradient`] for the inner
/// mode, or a hand-written gradient.
pub fn argmin_with<S: Scalar>(
    value: impl Fn(&[S]) -> S,
    gradient: impl Fn(&[S]) -> Vec<S>,
    x0: &[S],
) -> Vec<S> {
    let mut x = x0.to_vec();
    let mut fx = value(&x);
    let mut gx = gradient(&x);
    let mut eta = 1e-5;
    let mut i = 0;
    loop {
        if norm(gx.iter().copied()) <= 1e-5 {
            return x;
        }
        if i == 10 {
            eta *= 2.0;
            i = 0;
            continue;
        }
        let x_new: Vec<S> = x.iter().zip(&gx).map(|(&xi, &gi)| xi - gi * eta).collect();
        if norm(x.iter().zip(&x_new).map(|(&a, &b)| a - b)) <= 1e-5 {
            return x;
        }
        let f_new = value(&x_new);
        if f_new < fx {
            x = x_new;
            fx = f_new;
            gx = gradient(&x);
            i += 1;
        } else {
            eta /= 2.0;
            i = 0;
        }
    }
}

/// [`argmin_with`] whose gradient is taken by the library in mode `M`.
pub fn argmin<S: Scalar, M: GradMode, F: ScalarFn<S>>(f: &F, x0: &[S]) -> Vec<S> {
    argmin_with(|x| f.eval(x, |s| s), |x| M::gradient(f, x), x0)
}
