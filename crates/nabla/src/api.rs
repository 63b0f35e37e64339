//! The differentiation operators.
//!
//! Every operator is generic over the scalar `S` it is applied at, so it can be
//! called at `f64` or inside another operator's closure (where `S` is that
//! operator's scalar type) — that is all nesting takes. Functions to differentiate
//! are closures over the mode's scalar type; a function written once as
//! `fn f<S: Scalar>(x: &[S]) -> S` is passed as `|x| f(x)`.

use crate::trace::{self, Entry, Trace};
use crate::{Dual, Lift, Reverse, Scalar};

/// The derivative of a function of one real, by forward mode.
///
/// ```
/// use nabla::{Scalar, derivative};
/// assert_eq!(derivative(|x| x * x * x, 2.0), 12.0);
/// assert_eq!(derivative(|x| x.sin(), 0.0), 1.0);
/// ```
pub fn derivative<S, F>(f: F, x: S) -> S
where
    S: Scalar,
    F: FnOnce(Dual<S>) -> Dual<S>,
{
    f(Dual::new(x, S::one())).tangent()
}

/// Forward mode: the value of `f` at `x` and its directional derivative along `dx`
/// (the Jacobian-vector product J·dx), in one evaluation of `f`.
///
/// ```
/// use nabla::{Scalar, jvp};
/// // f(x, y) = (x·y, sin x)
/// let (value, tangent) = jvp(|v| vec![v[0] * v[1], v[0].sin()], &[2.0, 3.0], &[1.0, 0.0]);
/// assert_eq!(value, vec![6.0, 2.0_f64.sin()]);
/// assert_eq!(tangent, vec![3.0, 2.0_f64.cos()]);
/// ```
///
/// # Panics
/// If the tangent `dx` does not have the length of `x`.
pub fn jvp<S, F>(f: F, x: &[S], dx: &[S]) -> (Vec<S>, Vec<S>)
where
    S: Scalar,
    F: FnOnce(&[Dual<S>]) -> Vec<Dual<S>>,
{
    assert_eq!(
        dx.len(),
        x.len(),
        "nabla::jvp: the tangent `dx` has length {} but the point `x` has length {}",
        dx.len(),
        x.len()
    );
    let inputs: Vec<Dual<S>> = x.iter().zip(dx).map(|(&p, &t)| Dual::new(p, t)).collect();
    f(&inputs)
        .into_iter()
        .map(|y| (y.primal(), y.tangent()))
        .unzip()
}

/// Reverse mode: the value of a real-valued `f` at `x` and its gradient, from one
/// evaluation of `f` and one backward sweep over its trace.
///
/// ```
/// use nabla::{Scalar, value_and_grad};
/// let (v, g) = value_and_grad(|x| x[0] * x[1].exp(), &[3.0, 0.0]);
/// assert_eq!(v, 3.0);
/// assert_eq!(g, vec![1.0, 3.0]);
/// ```
pub fn value_and_grad<S, F>(f: F, x: &[S]) -> (S, Vec<S>)
where
    S: Scalar,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> Reverse<'t, S>,
{
    let (values, pullback) = vjp(|inputs| vec![f(inputs)], x);
    (values[0], pullback.apply(&[S::one()]))
}

/// Reverse mode: the gradient of a real-valued `f` at `x`, the same shape as `x`.
///
/// Costs a small constant times one evaluation of `f` (Krawiec et al. Theorem 5);
/// memory is one trace entry per non-constant operation.
///
/// ```
/// use nabla::{Scalar, grad};
/// // f(x, y) = 2x² + 3xy + 4y²
/// let g = grad(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0, &[3.0, 4.0]);
/// assert_eq!(g, vec![24.0, 41.0]);
/// ```
pub fn grad<S, F>(f: F, x: &[S]) -> Vec<S>
where
    S: Scalar,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> Reverse<'t, S>,
{
    value_and_grad(f, x).1
}

/// Reverse mode: the value of `f` at `x` and its pullback, which maps an output
/// cotangent `ct` to the input cotangent ctᵀJ. `f` is evaluated once; the pullback
/// can be applied to any number of cotangents.
///
/// ```
/// use nabla::{Scalar, vjp};
/// let (y, pullback) = vjp(|v| vec![v[0] * v[1], v[0] + v[1]], &[2.0, 5.0]);
/// assert_eq!(y, vec![10.0, 7.0]);
/// assert_eq!(pullback.apply(&[1.0, 0.0]), vec![5.0, 2.0]);
/// assert_eq!(pullback.apply(&[0.0, 1.0]), vec![1.0, 1.0]);
/// ```
pub fn vjp<S, F>(f: F, x: &[S]) -> (Vec<S>, Pullback<S>)
where
    S: Scalar,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> Vec<Reverse<'t, S>>,
{
    let trace = Trace::new();
    let inputs: Vec<Reverse<'_, S>> = x.iter().map(|&p| Reverse::input(&trace, p)).collect();
    let outputs = f(&inputs);
    let values = outputs.iter().map(|y| y.primal()).collect();
    let output_deltas = outputs.iter().map(|y| y.delta()).collect();
    // The scalars borrow the trace; they are done with before it is taken apart.
    drop((inputs, outputs));
    let pullback = Pullback {
        entries: trace.into_entries(),
        inputs: x.len(),
        outputs: output_deltas,
    };
    (values, pullback)
}

impl<S: Scalar> Drop for Pullback<S> {
    fn drop(&mut self) {
        trace::recycle_entries(std::mem::take(&mut self.entries));
    }
}

/// The backward half of [`vjp`]: the recorded Delta trace of one evaluation, ready
/// to be evaluated backwards for any output cotangent.
#[derive(Debug)]
pub struct Pullback<S: Scalar> {
    entries: Vec<Entry<S>>,
    /// Input variables occupy ids `0..inputs`.
    inputs: usize,
    /// Each output's Delta, `Scale c (Var id)` as `(c, id)`; `None` for `Zero`.
    outputs: Vec<Option<(S, u32)>>,
}

impl<S: Scalar> Pullback<S> {
    /// The input cotangent ctᵀJ for the output cotangent `ct` (one per output).
    ///
    /// # Panics
    /// If `cotangent` does not have one entry per output of the function.
    pub fn apply(&self, cotangent: &[S]) -> Vec<S> {
        assert_eq!(
            cotangent.len(),
            self.outputs.len(),
            "nabla::Pullback::apply: the cotangent has length {} but the function has {} outputs",
            cotangent.len(),
            self.outputs.len()
        );
        let mut adjoints: Vec<S> = trace::zeroed_adjoints(self.entries.len());
        for (&delta, &ct) in self.outputs.iter().zip(cotangent) {
            if let Some((c, id)) = delta {
                adjoints[id as usize].accumulate(ct * c);
            }
        }
        trace::backpropagate(&self.entries, self.inputs, &mut adjoints);
        let gradient = adjoints[..self.inputs].to_vec();
        trace::recycle_adjoints(adjoints);
        gradient
    }

    /// The number of entries in the trace — one per input variable, one per `Let`
    /// — a measure of the memory reverse mode used, at most linear in the number of
    /// operations performed.
    pub fn trace_len(&self) -> usize {
        self.entries.len()
    }

    /// The size in bytes of one trace entry.
    pub fn entry_bytes(&self) -> usize {
        trace::entry_bytes::<S>()
    }

    /// The number of outputs of the function.
    pub fn outputs(&self) -> usize {
        self.outputs.len()
    }
}

/// The Jacobian of `f` at `x` by forward mode: one [`jvp`] per input. Row `i` is the
/// gradient of output `i`.
///
/// ```
/// use nabla::{Scalar, jacobian_forward};
/// let j = jacobian_forward(|v| vec![v[0] * v[1], v[0].sin()], &[2.0, 3.0]);
/// assert_eq!(j, vec![vec![3.0, 2.0], vec![2.0_f64.cos(), 0.0]]);
/// ```
pub fn jacobian_forward<S, F>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    S: Scalar,
    F: Fn(&[Dual<S>]) -> Vec<Dual<S>>,
{
    let mut columns = Vec::with_capacity(x.len());
    let mut direction = vec![S::zero(); x.len()];
    for j in 0..x.len() {
        direction[j] = S::one();
        columns.push(jvp(&f, x, &direction).1);
        direction[j] = S::zero();
    }
    let outputs = columns.first().map_or_else(|| f(&[]).len(), Vec::len);
    (0..outputs)
        .map(|i| columns.iter().map(|column| column[i]).collect())
        .collect()
}

/// The Jacobian of `f` at `x` by reverse mode: one evaluation of `f`, then one
/// backward sweep per output. Row `i` is the gradient of output `i`.
///
/// ```
/// use nabla::{Scalar, jacobian_reverse};
/// let j = jacobian_reverse(|v| vec![v[0] * v[1], v[0].sin()], &[2.0, 3.0]);
/// assert_eq!(j, vec![vec![3.0, 2.0], vec![2.0_f64.cos(), 0.0]]);
/// ```
pub fn jacobian_reverse<S, F>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    S: Scalar,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> Vec<Reverse<'t, S>>,
{
    let (values, pullback) = vjp(f, x);
    let mut cotangent = vec![S::zero(); values.len()];
    (0..values.len())
        .map(|i| {
            cotangent[i] = S::one();
            let row = pullback.apply(&cotangent);
            cotangent[i] = S::zero();
            row
        })
        .collect()
}

/// A vector function written once for every scalar type built on the level `S` it
/// is evaluated at, so that [`jacobian`] can run it in whichever mode suits its
/// shape. (A Rust closure has one argument type, so it cannot run in both modes; a
/// type with a generic method can.) Values the function captured from level `S`
/// enter the computation through [`Lift::lift`].
///
/// ```
/// use nabla::{Lift, Scalar, VectorFunction};
/// /// (r cos θ, r sin θ), the same at every level.
/// struct Polar;
/// impl<S: Scalar> VectorFunction<S> for Polar {
///     fn eval<T: Lift<S>>(&self, x: &[T]) -> Vec<T> {
///         vec![x[0] * x[1].cos(), x[0] * x[1].sin()]
///     }
/// }
/// assert_eq!(Polar.eval(&[2.0, 0.0]), vec![2.0, 0.0]);
/// ```
pub trait VectorFunction<S: Scalar> {
    /// The function's value at `x`.
    fn eval<T: Lift<S>>(&self, x: &[T]) -> Vec<T>;
}

/// The Jacobian of `f` at `x` (row `i` is the gradient of output `i`), by forward
/// mode when there are no more inputs than outputs and by reverse mode otherwise —
/// whichever needs fewer passes.
///
/// ```
/// use nabla::{Lift, Scalar, VectorFunction, grad, jacobian};
/// struct Polar;
/// impl<S: Scalar> VectorFunction<S> for Polar {
///     fn eval<T: Lift<S>>(&self, x: &[T]) -> Vec<T> {
///         vec![x[0] * x[1].cos(), x[0] * x[1].sin()]
///     }
/// }
/// let j = jacobian(&Polar, &[2.0, 0.0]);
/// assert_eq!(j, vec![vec![1.0, 0.0], vec![0.0, 2.0]]);
///
/// // Nested, with a captured value of the enclosing level: d/da det J of
/// // (x, y) ↦ (a·x·y, x + y) at (1, 2) is d/da [a·y − a·x] = y − x = 1.
/// struct Scaled<S>(S);
/// impl<S: Scalar> VectorFunction<S> for Scaled<S> {
///     fn eval<T: Lift<S>>(&self, x: &[T]) -> Vec<T> {
///         vec![T::lift(self.0) * x[0] * x[1], x[0] + x[1]]
///     }
/// }
/// let g = grad(|a| {
///     let j = jacobian(&Scaled(a[0]), &[a[0] / a[0], a[0] * 2.0 / a[0]]);
///     j[0][0] * j[1][1] - j[0][1] * j[1][0]
/// }, &[3.0]);
/// assert_eq!(g, vec![1.0]);
/// ```
pub fn jacobian<S, F>(f: &F, x: &[S]) -> Vec<Vec<S>>
where
    S: Scalar,
    F: VectorFunction<S> + ?Sized,
{
    // One primal evaluation tells the number of outputs; it costs less than the
    // passes it lets us avoid.
    let outputs = f.eval(x).len();
    if x.len() <= outputs {
        jacobian_forward(|v| f.eval(v), x)
    } else {
        jacobian_reverse(|v| f.eval(v), x)
    }
}

/// The Hessian-vector product H·v of a real-valued `f` at `x`, forward over reverse:
/// the directional derivative of the gradient, in one evaluation of the gradient
/// on dual numbers.
///
/// ```
/// use nabla::{Scalar, hvp};
/// // f(x, y) = 2x² + 3xy + 4y²: H = [[4, 3], [3, 8]]
/// let hv = hvp(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0,
///              &[3.0, 4.0], &[7.0, 8.0]);
/// assert_eq!(hv, vec![52.0, 85.0]);
/// ```
///
/// # Panics
/// If the direction `v` does not have the length of `x`.
pub fn hvp<S, F>(f: F, x: &[S], v: &[S]) -> Vec<S>
where
    S: Scalar,
    F: for<'t> FnOnce(&[Reverse<'t, Dual<S>>]) -> Reverse<'t, Dual<S>>,
{
    assert_eq!(
        v.len(),
        x.len(),
        "nabla::hvp: the direction `v` has length {} but the point `x` has length {}",
        v.len(),
        x.len()
    );
    let point: Vec<Dual<S>> = x.iter().zip(v).map(|(&p, &t)| Dual::new(p, t)).collect();
    grad(f, &point).into_iter().map(Dual::tangent).collect()
}

/// The Hessian of a real-valued `f` at `x`, forward over reverse: one
/// [`hvp`] per input, each costing a small multiple of one gradient.
///
/// ```
/// use nabla::{Scalar, hessian};
/// let h = hessian(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0, &[3.0, 4.0]);
/// assert_eq!(h, vec![vec![4.0, 3.0], vec![3.0, 8.0]]);
/// ```
pub fn hessian<S, F>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    S: Scalar,
    F: for<'t> Fn(&[Reverse<'t, Dual<S>>]) -> Reverse<'t, Dual<S>>,
{
    let mut direction = vec![S::zero(); x.len()];
    (0..x.len())
        .map(|i| {
            direction[i] = S::one();
            let row = hvp(&f, x, &direction);
            direction[i] = S::zero();
            row
        })
        .collect()
}
