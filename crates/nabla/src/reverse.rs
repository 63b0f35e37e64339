//! Reverse mode: a scalar that carries its primal and its Delta (Krawiec et al.
//! §5.3: the dual number (x, δx) of Figure 9), where δx is kept in the small form
//! `Scale c (Var id)` — or `Zero` — and everything larger is `Let`-bound in the trace.

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
    primal: S,
    /// The Delta is `Scale coefficient (Var id)` when `trace` is set, `Zero` otherwise.
    coefficient: S,
    trace: Option<&'t Trace<S>>,
    id: DeltaId,
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
        Reverse {
            primal,
            coefficient: S::zero(),
            trace: None,
            id: 0,
            brand: PhantomData,
        }
    }

    /// The primal value (one level down).
    #[inline(always)]
    pub fn primal(self) -> S {
        self.primal
    }

    /// Fresh input variables of `trace` for the values `x`: `Scale 1 (Var id)` each.
    pub(crate) fn inputs(trace: &'t Trace<S>, x: &[S]) -> impl Iterator<Item = Self> {
        assert_eq!(trace.inputs(), x.len(), "one input variable per component");
        x.iter()
            .zip(0..)
            .map(move |(&primal, id)| Reverse::variable(primal, trace, id))
    }

    /// The Delta as `(c, id)` for `Scale c (Var id)`, or `None` for `Zero`.
    #[inline(always)]
    pub(crate) fn delta(self) -> Option<(S, DeltaId)> {
        self.trace.map(|_| (self.coefficient, self.id))
    }

    /// `(primal, Var id)`.
    #[inline(always)]
    fn variable(primal: S, trace: &'t Trace<S>, id: DeltaId) -> Self {
        Reverse {
            primal,
            coefficient: S::one(),
            trace: Some(trace),
            id,
            brand: PhantomData,
        }
    }

    /// `(primal, Scale factor δ)` for this value's Delta δ, with `Scale 0 δ = Zero`
    /// even when δ's coefficient is infinite (√x at 0).
    ///
    /// A zero coefficient stays a coefficient instead of turning the value into a
    /// constant: whether a value is constant then depends only on how it was made,
    /// never on the numbers it holds, so compiled code does not branch on it.
    #[inline(always)]
    fn rescaled(self, primal: S, factor: S, factor_is_finite: bool) -> Self {
        Reverse {
            primal,
            coefficient: if factor.is_zero() {
                S::zero()
            } else {
                times_coefficient(factor, self.coefficient, factor_is_finite)
            },
            ..self
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
        self.primal.value()
    }

    #[inline(always)]
    fn is_zero(self) -> bool {
        self.primal.is_zero() && (self.trace.is_none() || self.coefficient.is_zero())
    }

    /// `Scale c δx`: a new coefficient, no entry.
    #[inline(always)]
    fn scale(self, c: R) -> Self {
        let primal = self.primal.scale(c);
        match self.trace {
            None => Reverse::constant(primal),
            // A constant factor is finite wherever the product is: no zero check of δ.
            Some(_) => self.rescaled(primal, S::from(c), true),
        }
    }

    /// x + c has x's Delta (`Add δx Zero = δx`): no entry.
    #[inline(always)]
    fn shift(self, c: R) -> Self {
        Reverse {
            primal: self.primal.shift(c),
            ..self
        }
    }

    /// Figure 9's rule for a primitive of one argument: (f x, Scale (f' x) δx).
    #[inline(always)]
    fn apply_unary<P: UnaryPrimitive<R> + ?Sized>(self, primitive: &P) -> Self {
        let primal = primitive.value(self.primal);
        match self.trace {
            None => Reverse::constant(primal),
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
    fn apply_binary<P: BinaryPrimitive<R> + ?Sized>(self, other: Self, primitive: &P) -> Self {
        let (x, y) = (self.primal, other.primal);
        let primal = primitive.value(x, y);
        match (self.trace, other.trace) {
            (None, None) => Reverse::constant(primal),
            // A zero partial with respect to the one variable argument makes the
            // result a constant. This is where structural zeros come from in nested
            // modes (in forward over reverse, a zero tangent times a variable), and
            // left as `Scale 0` they would be recorded by every sum they meet; in
            // first-order code the partial is a compile-time constant here or the
            // operation is rare, so the branch costs nothing there.
            (Some(_), None) => {
                let partial = primitive.partial_x(x, y, primal);
                if partial.is_zero() {
                    Reverse::constant(primal)
                } else {
                    self.rescaled(primal, partial, primitive.has_polynomial_partials())
                }
            }
            (None, Some(_)) => {
                let partial = primitive.partial_y(x, y, primal);
                if partial.is_zero() {
                    Reverse::constant(primal)
                } else {
                    other.rescaled(primal, partial, primitive.has_polynomial_partials())
                }
            }
            (Some(trace), Some(other_trace)) => {
                debug_assert!(std::ptr::eq(trace, other_trace), "values of two traces met");
                // A coefficient may be infinite (√x at 0 folded in), so a zero partial
                // is tested too: `Scale 0 δ = Zero` (Number::chain).
                let wx = primitive.partial_x(x, y, primal).chain(self.coefficient);
                let wy = primitive.partial_y(x, y, primal).chain(other.coefficient);
                if self.id == other.id {
                    // Add (Scale a (Var p)) (Scale b (Var p)) = Scale (a + b) (Var p)
                    Reverse {
                        primal,
                        coefficient: wx + wy,
                        ..self
                    }
                } else {
                    Reverse::variable(primal, trace, trace.add(self.id, wx, other.id, wy))
                }
            }
        }
    }
}

crate::ops::scalar_ops!(['t] Reverse<'t, S>);
