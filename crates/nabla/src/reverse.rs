//! Reverse mode: a scalar that carries its primal and its Delta (Krawiec et al.
//! §5.3: the dual number (x, δx) of Figure 9), where δx is kept in the small form
//! `Scale c (Var id)` — or `Zero` — and everything larger is `Let`-bound in the trace.
//!
//! The rules live in [`Recorded`], generic over how a value reaches its trace, and
//! are shared by the two reverse-mode scalars: [`Reverse`], by a lifetime-branded
//! reference, and [`TapeReverse`](crate::TapeReverse), by a key into a
//! thread-local stack of traces.

use std::marker::PhantomData;

use crate::primitive::{BinaryPrimitive, Number, UnaryPrimitive};
use crate::trace::{DeltaId, Trace};
use crate::{Lift, Precision, Real, Scalar};

/// A reverse-mode real: a primal value and its Delta, `Scale c (Var id)` or `Zero`.
///
/// Values of this type only exist inside a function being differentiated by
/// [`grad`](crate::grad), [`vjp`](crate::vjp) and friends, which record each
/// sum of two variables in a trace and evaluate it backwards once. The lifetime `'t` brands the
/// values of one trace (like the `s` of Haskell's `ST s`): it is invariant and
/// universally quantified by the differentiation operators, so a value can neither
/// escape its trace nor meet the value of another trace of the same type. Together
/// with distinct types per nesting level this makes perturbation confusion a
/// compile-time error:
///
/// ```compile_fail
/// use nabla::grad;
/// // An inner gradient at the same level (f64 underneath) mixes its variable with
/// // the outer one: rejected, since the two traces' brands differ.
/// grad(|x| {
///     let outer = x[0];
///     let g = grad(|y| y[0] * outer, &[1.0]);
///     outer * g[0]
/// }, &[1.0]);
/// ```
///
/// ```compile_fail
/// use nabla::grad;
/// // A value cannot outlive the differentiation that made it.
/// let leaked = std::cell::Cell::new(None);
/// grad(|x| { leaked.set(Some(x[0])); x[0] }, &[1.0]);
/// ```
///
/// The correct program lifts the outer value explicitly — and so gets d/dx x² = 2x:
///
/// ```
/// use nabla::{Reverse, grad};
/// let g = grad(|x| {
///     let outer = x[0];
///     let inner = grad(|y| y[0] * Reverse::constant(outer), &[outer]);
///     outer * inner[0]
/// }, &[1.0]);
/// assert_eq!(g, vec![2.0]);
/// ```
///
/// A `Reverse` whose Delta is `Zero` — a constant, made by `From<f64>` or
/// [`Reverse::constant`] — refers to no trace. Only adding two different variables
/// records a trace entry; everything else — primitives of one variable, operations
/// with constants, `x + x` — folds into the coefficient `c` (see the module `trace`
/// for the Delta algebra this uses).
#[derive(Clone, Copy, Debug)]
pub struct Reverse<'t, S> {
    recorded: Recorded<S, &'t Trace<S>>,
    brand: PhantomData<fn(&'t ()) -> &'t ()>,
}

impl<'t, R: Real, S: Scalar<R> + Precision<Real = R>> Reverse<'t, S> {
    /// A constant (Delta `Zero`). Use it to bring a value of the enclosing level,
    /// for example one captured by a closure, into this level.
    ///
    /// ```
    /// use nabla::{Reverse, grad};
    /// let a = 3.0;
    /// assert_eq!(grad(|x| Reverse::constant(a) * x[0], &[1.0]), vec![3.0]);
    /// ```
    #[inline(always)]
    pub fn constant(primal: S) -> Self {
        Reverse::wrap(Recorded::constant(primal))
    }

    /// The primal value (one level down).
    #[inline(always)]
    pub fn primal(self) -> S {
        self.recorded.primal
    }

    /// Fresh input variables of `trace` for the values `x`: `Scale 1 (Var id)` each.
    pub(crate) fn inputs(trace: &'t Trace<S>, x: &[S]) -> impl Iterator<Item = Self> {
        assert_eq!(trace.inputs(), x.len(), "one input variable per component");
        x.iter()
            .zip(0..)
            .map(move |(&primal, id)| Reverse::wrap(Recorded::variable(primal, trace, id)))
    }

    /// The Delta as `(c, id)` for `Scale c (Var id)`, or `None` for `Zero`.
    #[inline(always)]
    pub(crate) fn delta(self) -> Option<(S, DeltaId)> {
        self.recorded.delta().map(|(c, id, _)| (c, id))
    }

    #[inline(always)]
    fn wrap(recorded: Recorded<S, &'t Trace<S>>) -> Self {
        Reverse {
            recorded,
            brand: PhantomData,
        }
    }
}

/// How a reverse-mode value reaches the trace its Delta lives in: by reference
/// ([`Reverse`]: `&'t Trace`) or by number ([`TapeReverse`](crate::TapeReverse): a
/// key into the thread's stack of traces being recorded).
pub(crate) trait TraceHandle<S>: Copy {
    /// Records `Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))`, p₀ ≠ p₁, in
    /// the trace of `self` — which must be the trace of `other` — and returns `id`.
    fn add(self, other: Self, p0: DeltaId, w0: S, p1: DeltaId, w1: S) -> DeltaId;

    /// Checks that `self` and `other` name the same trace, before two of its
    /// variables are compared by id.
    fn check_same(self, other: Self);
}

impl<S> TraceHandle<S> for &Trace<S> {
    #[inline(always)]
    fn add(self, other: Self, p0: DeltaId, w0: S, p1: DeltaId, w1: S) -> DeltaId {
        self.check_same(other);
        Trace::add(self, p0, w0, p1, w1)
    }

    /// The lifetime brand makes two traces' values meeting a compile error; this is
    /// a second look in debug builds.
    #[inline(always)]
    fn check_same(self, other: Self) {
        debug_assert!(std::ptr::eq(self, other), "values of two traces met");
    }
}

/// A primal value and its Delta, `Scale coefficient (Var id)` in the trace `trace`,
/// or `Zero` when `trace` is `None`: the one implementation of Figure 9's rules that
/// both reverse-mode scalars wrap, whatever handle `H` they reach their trace by.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recorded<S, H> {
    pub(crate) primal: S,
    /// The Delta is `Scale coefficient (Var id)` when `trace` is set, `Zero` otherwise.
    coefficient: S,
    trace: Option<H>,
    id: DeltaId,
}

impl<R: Real, S: Scalar<R> + Precision<Real = R>, H: TraceHandle<S>> Recorded<S, H> {
    /// A constant (Delta `Zero`).
    #[inline(always)]
    pub(crate) fn constant(primal: S) -> Self {
        Recorded {
            primal,
            coefficient: S::zero(),
            trace: None,
            id: 0,
        }
    }

    /// `(primal, Var id)` of the trace `trace`.
    #[inline(always)]
    pub(crate) fn variable(primal: S, trace: H, id: DeltaId) -> Self {
        Recorded {
            primal,
            coefficient: S::one(),
            trace: Some(trace),
            id,
        }
    }

    /// The Delta as `(c, id, trace)` for `Scale c (Var id)`, or `None` for `Zero`.
    #[inline(always)]
    pub(crate) fn delta(self) -> Option<(S, DeltaId, H)> {
        self.trace.map(|trace| (self.coefficient, self.id, trace))
    }

    /// `(primal, Scale factor δ)` for this value's Delta δ, with `Scale 0 δ = Zero`
    /// even when δ's coefficient is infinite (√x at 0).
    ///
    /// A zero coefficient stays a coefficient instead of turning the value into a
    /// constant: whether a value is constant then depends only on how it was made,
    /// never on the numbers it holds, so compiled code does not branch on it.
    #[inline(always)]
    fn rescaled(self, primal: S, factor: S, factor_is_finite: bool) -> Self {
        Recorded {
            primal,
            coefficient: if factor.is_zero() {
                S::zero()
            } else {
                times_coefficient(factor, self.coefficient, factor_is_finite)
            },
            ..self
        }
    }

    #[inline(always)]
    pub(crate) fn value(self) -> R {
        self.primal.value()
    }

    #[inline(always)]
    pub(crate) fn is_zero(self) -> bool {
        self.primal.is_zero() && (self.trace.is_none() || self.coefficient.is_zero())
    }

    /// `Scale c δx`: a new coefficient, no entry.
    #[inline(always)]
    pub(crate) fn scale(self, c: R) -> Self {
        let primal = self.primal.scale(c);
        match self.trace {
            None => Recorded::constant(primal),
            // A constant factor is finite wherever the product is: no zero check of δ.
            Some(_) => self.rescaled(primal, S::from(c), true),
        }
    }

    /// x + c has x's Delta (`Add δx Zero = δx`): no entry.
    #[inline(always)]
    pub(crate) fn shift(self, c: R) -> Self {
        Recorded {
            primal: self.primal.shift(c),
            ..self
        }
    }

    /// Figure 9's rule for a primitive of one argument: (f x, Scale (f' x) δx).
    #[inline(always)]
    pub(crate) fn apply_unary<P: UnaryPrimitive<R> + ?Sized>(self, primitive: &P) -> Self {
        let primal = primitive.value(self.primal);
        match self.trace {
            None => Recorded::constant(primal),
            Some(_) => self.rescaled(
                primal,
                primitive.derivative(self.primal, primal),
                primitive.has_polynomial_derivative(),
            ),
        }
    }

    /// Figure 9's rule for a primitive of two arguments:
    /// (f(x, y), Add (Scale ∂ₓf δx) (Scale ∂ᵧf δy)). A constant argument contributes
    /// no term, and its partial derivative is never formed.
    #[inline(always)]
    pub(crate) fn apply_binary<P: BinaryPrimitive<R> + ?Sized>(
        self,
        other: Self,
        primitive: &P,
    ) -> Self {
        let (x, y) = (self.primal, other.primal);
        let primal = primitive.value(x, y);
        match (self.trace, other.trace) {
            (None, None) => Recorded::constant(primal),
            // A zero partial with respect to the one variable argument makes the
            // result a constant. This is where structural zeros come from in nested
            // modes (in forward over reverse, a zero tangent times a variable), and
            // left as `Scale 0` they would be recorded by every sum they meet; in
            // first-order code the partial is a compile-time constant here or the
            // operation is rare, so the branch costs nothing there.
            (Some(_), None) => {
                let partial = primitive.partial_x(x, y, primal);
                if partial.is_zero() {
                    Recorded::constant(primal)
                } else {
                    self.rescaled(primal, partial, primitive.has_polynomial_partials())
                }
            }
            (None, Some(_)) => {
                let partial = primitive.partial_y(x, y, primal);
                if partial.is_zero() {
                    Recorded::constant(primal)
                } else {
                    other.rescaled(primal, partial, primitive.has_polynomial_partials())
                }
            }
            (Some(trace), Some(other_trace)) => {
                // A coefficient may be infinite (√x at 0 folded in), so a zero partial
                // is tested too: `Scale 0 δ = Zero` (Number::chain).
                let wx = primitive.partial_x(x, y, primal).chain(self.coefficient);
                let wy = primitive.partial_y(x, y, primal).chain(other.coefficient);
                if self.id == other.id {
                    trace.check_same(other_trace);
                    // Add (Scale a (Var p)) (Scale b (Var p)) = Scale (a + b) (Var p)
                    Recorded {
                        primal,
                        coefficient: wx + wy,
                        ..self
                    }
                } else {
                    let id = trace.add(other_trace, self.id, wx, other.id, wy);
                    Recorded::variable(primal, trace, id)
                }
            }
        }
    }
}

/// `partial · c` for a coefficient `c`, as [`Number::chain`]: a zero `c` — a
/// structural zero, kept as a coefficient — gives zero even if the partial is
/// infinite or NaN (∂/∂x xʸ at 0, or ∂/∂y xʸ = xʸ ln x at x < 0, which is never
/// formed for a constant). The test of `c` is skipped when the partial is known to
/// be finite (`partial_is_finite`: the partials of a polynomial), since then the
/// product is exactly zero anyway; the caller has tested the partial.
#[inline(always)]
fn times_coefficient<R: Real, S: Scalar<R>>(partial: S, c: S, partial_is_finite: bool) -> S {
    if !partial_is_finite && c.is_zero() {
        S::zero()
    } else {
        partial * c
    }
}

impl<R: Real, S: Scalar<R>> Lift<S, R> for Reverse<'_, S> {
    #[inline(always)]
    fn lift(value: S) -> Self {
        Reverse::constant(value)
    }
}

impl<R: Real, S: Scalar<R>> From<R> for Reverse<'_, S> {
    #[inline(always)]
    fn from(x: R) -> Self {
        Reverse::constant(S::from(x))
    }
}

impl<S: Precision> Precision for Reverse<'_, S> {
    type Real = S::Real;
}

impl<R: Real, S: Scalar<R>> Scalar<R> for Reverse<'_, S> {
    #[inline(always)]
    fn value(self) -> R {
        self.recorded.value()
    }

    #[inline(always)]
    fn is_zero(self) -> bool {
        self.recorded.is_zero()
    }

    #[inline(always)]
    fn scale(self, c: R) -> Self {
        Reverse::wrap(self.recorded.scale(c))
    }

    #[inline(always)]
    fn shift(self, c: R) -> Self {
        Reverse::wrap(self.recorded.shift(c))
    }

    #[inline(always)]
    fn apply_unary<P: UnaryPrimitive<R> + ?Sized>(self, primitive: &P) -> Self {
        Reverse::wrap(self.recorded.apply_unary(primitive))
    }

    #[inline(always)]
    fn apply_binary<P: BinaryPrimitive<R> + ?Sized>(self, other: Self, primitive: &P) -> Self {
        Reverse::wrap(self.recorded.apply_binary(other.recorded, primitive))
    }
}

crate::ops::scalar_ops!(['t] Reverse<'t, S>);
