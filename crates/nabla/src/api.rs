//! The differentiation operators.
//!
//! Every operator is generic over the scalar `S` it is applied at, so it can be
//! called at `f64` or inside another operator's closure (where `S` is that
//! operator's scalar type) — that is all nesting takes. Functions to differentiate
//! are closures over the mode's scalar type; a function written once as
//! `fn f<S: Scalar>(x: &[S]) -> S` is passed as `|x| f(x)`.

use crate::trace::{self, DeltaId, Entry, Trace};
use crate::{Dual, Lift, Number, Precision, Real, Reverse, Scalar, pool};

/// The derivative of a function of one real, by forward mode.
///
/// ```
/// use nabla::{Scalar, derivative};
/// assert_eq!(derivative(|x| x * x * x, 2.0), 12.0);
/// assert_eq!(derivative(|x| x.sin(), 0.0), 1.0);
/// ```
pub fn derivative<S, F, R>(f: F, x: S) -> S
where
    R: Real,
    S: Scalar<R>,
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
pub fn jvp<S, F, R>(f: F, x: &[S], dx: &[S]) -> (Vec<S>, Vec<S>)
where
    R: Real,
    S: Scalar<R>,
    F: FnOnce(&[Dual<S>]) -> Vec<Dual<S>>,
{
    assert_eq!(
        dx.len(),
        x.len(),
        "nabla::jvp: the tangent `dx` has length {} but the point `x` has length {}",
        dx.len(),
        x.len()
    );
    let inputs = x.iter().zip(dx).map(|(&p, &t)| Dual::new(p, t));
    let outputs = pool::with_scratch(x.len(), inputs, |inputs| run(f, inputs));
    let values = outputs.iter().map(|y| y.primal()).collect();
    // Collected in place where the standard library can: `outputs`' memory is reused.
    let tangents = outputs.into_iter().map(Dual::tangent).collect();
    (values, tangents)
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
pub fn value_and_grad<S, F, R>(f: F, x: &[S]) -> (S, Vec<S>)
where
    R: Real,
    S: Scalar<R>,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> Reverse<'t, S>,
{
    let ((value, delta), entries) = record(x, |inputs| {
        let y = f(inputs);
        (y.primal(), y.delta())
    });
    let gradient = pull_back(&entries, x.len(), [(delta, S::one())]);
    pool::give(entries);
    (value, gradient)
}

/// Reverse mode, for a function that also returns auxiliary data: `f` returns its
/// value and something else — predictions, a breakdown of a loss, a count — which
/// is returned beside the value and the gradient, from the same single evaluation
/// (JAX's `value_and_grad(f, has_aux=True)`).
///
/// The auxiliary data cannot hold this trace's values (its type does not mention the
/// lifetime `'t`); return their primal values (`y.primal()`), which are numbers of
/// the level the operator was called at.
///
/// ```
/// use nabla::{Scalar, value_and_grad_with_aux};
/// // A loss Σ (w·xᵢ − yᵢ)² that also reports its residuals.
/// let data = [(1.0, 2.0), (2.0, 3.0)];
/// let ((loss, residuals), g) = value_and_grad_with_aux(
///     |w| {
///         let r: Vec<_> = data.iter().map(|&(x, y)| w[0] * x - y).collect();
///         let loss = r.iter().map(|&r| r * r).sum();
///         (loss, r.iter().map(|r| r.primal()).collect::<Vec<f64>>())
///     },
///     &[1.0],
/// );
/// assert_eq!(residuals, vec![-1.0, -1.0]);
/// assert_eq!(loss, 2.0);
/// assert_eq!(g, vec![2.0 * (-1.0 * 1.0 + -1.0 * 2.0)]);
/// ```
pub fn value_and_grad_with_aux<S, A, F, R>(f: F, x: &[S]) -> ((S, A), Vec<S>)
where
    R: Real,
    S: Scalar<R>,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> (Reverse<'t, S>, A),
{
    let ((value, delta, aux), entries) = record(x, |inputs| {
        let (y, aux) = f(inputs);
        (y.primal(), y.delta(), aux)
    });
    let gradient = pull_back(&entries, x.len(), [(delta, S::one())]);
    pool::give(entries);
    ((value, aux), gradient)
}

/// Reverse mode: the value and gradient of a sum Σₜ f(x, t) over `terms`, recording
/// and sweeping one term at a time.
///
/// The result is that of [`value_and_grad`] of `|x| terms.map(|t| f(x, t)).sum()` (up
/// to the order in which rounding errors accumulate), but the trace never holds more
/// than one term: after each term is recorded it is evaluated backwards into the
/// inputs' adjoints, which accumulate the gradient, and its entries are forgotten.
/// The input variables are created once for all terms. So memory is that of the
/// largest term rather than of the whole sum, and when a term is small its trace
/// stays in the processor's cache instead of streaming through main memory (on the
/// GMM benchmark this makes the gradient up to 3× faster than one trace of the sum).
///
/// Losses over a data set, likelihoods over observations and least squares all have
/// this shape. A term can be a single data point or a batch of them: each term's
/// closure call recomputes whatever it derives from `x` alone, so batches amortise
/// that work.
///
/// ```
/// use nabla::{Scalar, value_and_grad_sum};
/// // Least squares: Σᵢ (a·xᵢ + b − yᵢ)² over the points (xᵢ, yᵢ).
/// let points = [(0.0, 1.0), (1.0, 3.0), (2.0, 4.0)];
/// let (loss, g) = value_and_grad_sum(
///     |p, &(x, y)| {
///         let r = p[0] * x + p[1] - y;
///         r * r
///     },
///     &[1.0, 1.0],
///     &points,
/// );
/// assert_eq!(loss, 0.0 + 1.0 + 1.0);
/// // ∂/∂a = Σ 2rᵢxᵢ = 2·(0·0 + −1·1 + −1·2), ∂/∂b = Σ 2rᵢ = 2·(0 − 1 − 1)
/// assert_eq!(g, vec![-6.0, -4.0]);
/// ```
///
/// A term's entries are forgotten once it has been swept, so no value may outlive
/// its term; as with [`grad`], the lifetime each call of `f` quantifies over makes
/// keeping one a compile error:
///
/// ```compile_fail
/// use nabla::value_and_grad_sum;
/// let mut previous = None;
/// value_and_grad_sum(
///     |x, ()| {
///         let y = x[0] * x[1];
///         previous.replace(y).unwrap_or(y)
///     },
///     &[1.0, 2.0],
///     [(), ()],
/// );
/// ```
pub fn value_and_grad_sum<S, F, I, R>(mut f: F, x: &[S], terms: I) -> (S, Vec<S>)
where
    R: Real,
    S: Scalar<R>,
    I: IntoIterator,
    F: for<'t> FnMut(&[Reverse<'t, S>], I::Item) -> Reverse<'t, S>,
{
    let trace = Trace::new(x.len());
    let mut inputs = pool::take(x.len());
    inputs.extend(Reverse::inputs(&trace, x));
    // Slots 0..x.len() (the input variables) accumulate the gradient over all
    // terms; the slots of a term's own entries are zero before its sweep and dropped
    // after it.
    let mut adjoints: Vec<S> = trace::zeroed_adjoints(x.len());
    let mut value = S::zero();
    for term in terms {
        let y = run(|inputs| f(inputs, term), &inputs);
        value += y.primal();
        // `f` cannot keep a value of the trace (its lifetime `'t` is universally
        // quantified), so once it has returned, nothing refers to its entries: they
        // can be swept and forgotten.
        let mut entries = trace.replace_entries(Vec::new());
        if let Some((c, id)) = y.delta() {
            adjoints.resize(x.len() + entries.len(), S::zero());
            adjoints[id as usize].accumulate(c);
            trace::backpropagate(&entries, x.len(), &mut adjoints);
            adjoints.truncate(x.len());
        }
        entries.clear();
        trace.replace_entries(entries);
    }
    pool::give(inputs);
    pool::give(trace.into_entries());
    (value, pool::into_prefix(adjoints, x.len()))
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
pub fn grad<S, F, R>(f: F, x: &[S]) -> Vec<S>
where
    R: Real,
    S: Scalar<R>,
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
pub fn vjp<S, F, R>(f: F, x: &[S]) -> (Vec<S>, Pullback<S>)
where
    R: Real,
    S: Scalar<R>,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> Vec<Reverse<'t, S>>,
{
    let ((values, outputs), entries) = record(x, |inputs| {
        let outputs = f(inputs);
        let values = outputs.iter().map(|y| y.primal()).collect();
        let deltas = outputs.iter().map(|y| y.delta()).collect();
        (values, deltas)
    });
    let pullback = Pullback {
        entries,
        inputs: x.len(),
        outputs,
    };
    (values, pullback)
}

/// Runs `f` on input variables for `x` in a fresh trace (in pooled memory), and
/// returns what `f` returned and the recorded entries. What `f` returns cannot
/// mention the trace's values (the lifetime `'t` is `f`'s own), so the trace can be
/// taken apart afterwards.
fn record<S, T, R>(x: &[S], f: impl for<'t> FnOnce(&[Reverse<'t, S>]) -> T) -> (T, Vec<Entry<S>>)
where
    R: Real,
    S: Scalar<R>,
{
    let trace = Trace::new(x.len());
    let inputs = Reverse::inputs(&trace, x);
    let result = pool::with_scratch(x.len(), inputs, |inputs| run(f, inputs));
    (result, trace.into_entries())
}

/// `f(x)`, as a function of its own. The function being differentiated is inlined
/// here, and nothing but returning follows it, so the compiler can keep its loop
/// variables in registers; inlined into a caller that goes on to call other
/// functions, they may instead live in stack slots (on a dependent chain of additions
/// that cost 1.75× the time).
#[inline(never)]
pub(crate) fn run<X: ?Sized, T>(f: impl FnOnce(&X) -> T, x: &X) -> T {
    f(x)
}

/// One backward sweep over `entries`, seeded with each output Delta (`Scale c (Var
/// id)` as `(c, id)`, or `None` for `Zero`) times its cotangent: the cotangents of
/// the `inputs` input variables.
pub(crate) fn pull_back<R: Real, S: Scalar<R>>(
    entries: &[Entry<S>],
    inputs: usize,
    seeds: impl IntoIterator<Item = (Option<(S, DeltaId)>, S)>,
) -> Vec<S> {
    let mut adjoints: Vec<S> = trace::zeroed_adjoints(inputs + entries.len());
    for (delta, ct) in seeds {
        if let Some((c, id)) = delta {
            adjoints[id as usize].accumulate(c.chain(ct));
        }
    }
    trace::backpropagate(entries, inputs, &mut adjoints);
    pool::into_prefix(adjoints, inputs)
}

impl<S> Pullback<S> {
    /// The pullback of a recorded trace of `inputs` input variables whose outputs
    /// have the Deltas `outputs`.
    pub(crate) fn from_parts(
        entries: Vec<Entry<S>>,
        inputs: usize,
        outputs: Vec<Option<(S, DeltaId)>>,
    ) -> Self {
        Pullback {
            entries,
            inputs,
            outputs,
        }
    }
}

impl<S> Drop for Pullback<S> {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.entries));
    }
}

/// The backward half of [`vjp`]: the recorded Delta trace of one evaluation, ready
/// to be evaluated backwards for any output cotangent.
#[derive(Debug)]
pub struct Pullback<S> {
    entries: Vec<Entry<S>>,
    /// Input variables occupy ids `0..inputs`; `entries[k]` is the `Let` of id
    /// `inputs + k`.
    inputs: usize,
    /// Each output's Delta, `Scale c (Var id)` as `(c, id)`; `None` for `Zero`.
    outputs: Vec<Option<(S, DeltaId)>>,
}

impl<R: Real, S: Scalar<R> + Precision<Real = R>> Pullback<S> {
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
        pull_back(
            &self.entries,
            self.inputs,
            self.outputs.iter().copied().zip(cotangent.iter().copied()),
        )
    }

    /// The Jacobian, row i the input cotangent of the i-th basis output
    /// cotangent: one backward sweep per output.
    pub(crate) fn jacobian_rows(&self) -> Vec<Vec<S>> {
        let mut cotangent = vec![S::zero(); self.outputs.len()];
        (0..self.outputs.len())
            .map(|i| {
                cotangent[i] = S::one();
                let row = self.apply(&cotangent);
                cotangent[i] = S::zero();
                row
            })
            .collect()
    }

    /// The number of Delta ids in the trace — one per input variable, one per
    /// `Let` — a measure of the memory reverse mode used, at most linear in the
    /// number of operations performed. Only the `Let`s take an entry of
    /// [`entry_bytes`](Pullback::entry_bytes) in memory.
    pub fn trace_len(&self) -> usize {
        self.inputs + self.entries.len()
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

/// Forward mode: the gradient of a real-valued `f` at `x`, from one evaluation of
/// `f` on dual numbers per input (the tangent of input `i` set to one).
///
/// No trace is recorded, so for a function of a few inputs this is usually cheaper
/// than [`grad`]; its cost grows with the number of inputs, reverse mode's does not.
/// The evaluations share one vector of dual inputs, so the only allocation is the
/// result's.
///
/// ```
/// use nabla::{Scalar, grad_forward};
/// // f(x, y) = 2x² + 3xy + 4y²
/// let g = grad_forward(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0,
///                      &[3.0, 4.0]);
/// assert_eq!(g, vec![24.0, 41.0]);
/// ```
pub fn grad_forward<S, F, R>(f: F, x: &[S]) -> Vec<S>
where
    R: Real,
    S: Scalar<R>,
    F: Fn(&[Dual<S>]) -> Dual<S>,
{
    along_each_input(x, |inputs| f(inputs).tangent())
}

/// `column(inputs)` with `inputs` the dual numbers of `x` whose tangent is one at
/// input `i` and zero elsewhere, for each `i`: the forward-mode passes of a gradient
/// or Jacobian, sharing one vector of inputs.
fn along_each_input<R: Real, S: Scalar<R>, T>(
    x: &[S],
    mut column: impl FnMut(&[Dual<S>]) -> T,
) -> Vec<T> {
    let constants = x.iter().map(|&p| Dual::constant(p));
    pool::with_scratch(x.len(), constants, |inputs| {
        (0..x.len())
            .map(|i| {
                inputs[i] = Dual::new(x[i], S::one());
                let result = run(&mut column, &*inputs);
                inputs[i] = Dual::constant(x[i]);
                result
            })
            .collect()
    })
}

/// The Jacobian of `f` at `x` by forward mode: one evaluation of `f` on dual numbers
/// per input, the [`jvp`] along that input's axis. Row `i` is the gradient of
/// output `i`.
///
/// ```
/// use nabla::{Scalar, jacobian_forward};
/// let j = jacobian_forward(|v| vec![v[0] * v[1], v[0].sin()], &[2.0, 3.0]);
/// assert_eq!(j, vec![vec![3.0, 2.0], vec![2.0_f64.cos(), 0.0]]);
/// ```
pub fn jacobian_forward<S, F, R>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R>,
    F: Fn(&[Dual<S>]) -> Vec<Dual<S>>,
{
    let columns: Vec<Vec<S>> = along_each_input(x, |inputs| {
        f(inputs).into_iter().map(Dual::tangent).collect()
    });
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
pub fn jacobian_reverse<S, F, R>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R>,
    F: for<'t> FnOnce(&[Reverse<'t, S>]) -> Vec<Reverse<'t, S>>,
{
    vjp(f, x).1.jacobian_rows()
}

/// A vector function written once for every scalar type built on the level `S` it
/// is evaluated at, so that [`jacobian`](fn@jacobian) can run it in whichever mode suits its
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
pub trait VectorFunction<S: Scalar<R>, R: Real = f64> {
    /// The function's value at `x`.
    fn eval<T: Lift<S, R>>(&self, x: &[T]) -> Vec<T>;
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
pub fn jacobian<S, F, R>(f: &F, x: &[S]) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R>,
    F: VectorFunction<S, R> + ?Sized,
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

/// The Jacobian of a function given as two closures, one per mode — `forward` over
/// dual numbers, `reverse` over reverse-mode values — by forward mode when there are
/// no more inputs than outputs and by reverse mode otherwise, as [`jacobian`](fn@jacobian).
///
/// The two closures must compute the same function; [`jacobian!`](crate::jacobian!)
/// writes one closure twice so that they do. `forward` is evaluated once more, at
/// constant inputs, to count the outputs.
///
/// ```
/// use nabla::{Scalar, jacobian_with};
/// let j = jacobian_with(
///     |v| vec![v[0] * v[1], v[0].sin()],
///     |v| vec![v[0] * v[1], v[0].sin()],
///     &[2.0, 3.0],
/// );
/// assert_eq!(j, vec![vec![3.0, 2.0], vec![2.0_f64.cos(), 0.0]]);
/// ```
pub fn jacobian_with<S, F, G, R>(forward: F, reverse: G, x: &[S]) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R>,
    F: Fn(&[Dual<S>]) -> Vec<Dual<S>>,
    G: for<'t> FnOnce(&[Reverse<'t, S>]) -> Vec<Reverse<'t, S>>,
{
    let constants: Vec<Dual<S>> = x.iter().map(|&p| Dual::constant(p)).collect();
    let outputs = forward(&constants).len();
    if x.len() <= outputs {
        jacobian_forward(forward, x)
    } else {
        jacobian_reverse(reverse, x)
    }
}

/// The Jacobian of a closure, by whichever mode suits its shape, as [`jacobian`](fn@jacobian):
/// `jacobian!(|v| …, x)`.
///
/// A Rust closure has one argument type, so one closure cannot run in both modes.
/// The macro writes the closure twice, and each copy is type-checked at its own
/// mode's scalar type ([`jacobian_with`]). Values the closure captures from an
/// enclosing differentiation enter it through [`lift`](crate::lift), which adapts
/// to either mode. The argument must be a closure expression: a generic `fn` is
/// passed as `|v| f(v)` (reverse mode needs a closure, see `docs/library.md`).
///
/// ```
/// use nabla::{Scalar, grad, jacobian, lift};
/// let j = jacobian!(|v| vec![v[0] * v[1].cos(), v[0] * v[1].sin()], &[2.0, 0.0]);
/// assert_eq!(j, vec![vec![1.0, 0.0], vec![0.0, 2.0]]);
///
/// // Nested, with a captured value of the enclosing level: d/da det J of
/// // (x, y) ↦ (a·x·y, x + y) at (1, 2) is d/da [a·y − a·x] = y − x = 1.
/// let g = grad(|a| {
///     let j = jacobian!(|v| vec![lift(a[0]) * v[0] * v[1], v[0] + v[1]],
///                       &[a[0] / a[0], a[0] * 2.0 / a[0]]);
///     j[0][0] * j[1][1] - j[0][1] * j[1][0]
/// }, &[3.0]);
/// assert_eq!(g, vec![1.0]);
/// ```
#[macro_export]
macro_rules! jacobian {
    ($f:expr, $x:expr $(,)?) => {
        $crate::jacobian_with($f, $f, $x)
    };
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
pub fn hvp<S, F, R>(f: F, x: &[S], v: &[S]) -> Vec<S>
where
    R: Real,
    S: Scalar<R>,
    F: for<'t> FnOnce(&[Reverse<'t, Dual<S>>]) -> Reverse<'t, Dual<S>>,
{
    assert_eq!(
        v.len(),
        x.len(),
        "nabla::hvp: the direction `v` has length {} but the point `x` has length {}",
        v.len(),
        x.len()
    );
    let point = x.iter().zip(v).map(|(&p, &t)| Dual::new(p, t));
    let (_, gradient) = pool::with_scratch(x.len(), point, |point| value_and_grad(f, point));
    gradient.into_iter().map(Dual::tangent).collect()
}

/// The Hessian of a real-valued `f` at `x`, forward over reverse: one
/// [`hvp`] per input, each costing a small multiple of one gradient.
///
/// ```
/// use nabla::{Scalar, hessian};
/// let h = hessian(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0, &[3.0, 4.0]);
/// assert_eq!(h, vec![vec![4.0, 3.0], vec![3.0, 8.0]]);
/// ```
pub fn hessian<S, F, R>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R>,
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
