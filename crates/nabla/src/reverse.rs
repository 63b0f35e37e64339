//! Reverse mode: a scalar that carries its primal and a Delta id (Krawiec et al.
//! §5.3, the dual number (x, δx) of Figure 9 with δx a `Var` into the trace).

use std::marker::PhantomData;

use crate::Scalar;
use crate::primitive::{BinaryPrimitive, UnaryPrimitive};
use crate::trace::{DeltaId, SINK, Trace};

/// A reverse-mode real: a primal value and the id of its Delta in a trace.
///
/// Values of this type only exist inside a function being differentiated by
/// [`grad`](crate::grad), [`vjp`](crate::vjp) and friends, which record each
/// operation in a trace and evaluate it backwards once. The lifetime `'t` brands the
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
/// [`Reverse::constant`] — refers to no trace and records nothing.
#[derive(Clone, Copy, Debug)]
pub struct Reverse<'t, S: Scalar> {
    primal: S,
    /// Meaningful only when `trace` is set: `None` is the Delta `Zero`.
    id: DeltaId,
    trace: Option<&'t Trace<S>>,
    brand: PhantomData<fn(&'t ()) -> &'t ()>,
}

impl<'t, S: Scalar> Reverse<'t, S> {
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
            id: SINK,
            trace: None,
            brand: PhantomData,
        }
    }

    /// The primal value (one level down).
    #[inline(always)]
    pub fn primal(self) -> S {
        self.primal
    }

    /// A fresh input variable of `trace`.
    pub(crate) fn input(trace: &'t Trace<S>, primal: S) -> Self {
        Reverse {
            primal,
            id: trace.input(),
            trace: Some(trace),
            brand: PhantomData,
        }
    }

    /// The Delta id, or `None` for a constant.
    #[inline(always)]
    pub(crate) fn delta_id(self) -> Option<DeltaId> {
        self.trace.map(|_| self.id)
    }

    #[inline(always)]
    fn recorded(primal: S, trace: &'t Trace<S>, id: DeltaId) -> Self {
        Reverse {
            primal,
            id,
            trace: Some(trace),
            brand: PhantomData,
        }
    }
}

impl<S: Scalar> From<f64> for Reverse<'_, S> {
    #[inline(always)]
    fn from(x: f64) -> Self {
        Reverse::constant(S::from(x))
    }
}

impl<S: Scalar> Scalar for Reverse<'_, S> {
    #[inline(always)]
    fn value(self) -> f64 {
        self.primal.value()
    }

    #[inline(always)]
    fn is_zero(self) -> bool {
        self.trace.is_none() && self.primal.is_zero()
    }

    /// Figure 9's rule for a primitive: (f x, Scale (f' x) δx), bound by `Let`.
    #[inline(always)]
    fn apply_unary<P: UnaryPrimitive + ?Sized>(self, primitive: &P) -> Self {
        let primal = primitive.value(self.primal);
        match self.trace {
            None => Reverse::constant(primal),
            Some(trace) => {
                let weight = primitive.derivative(self.primal, primal);
                Reverse::recorded(primal, trace, trace.scale(self.id, weight))
            }
        }
    }

    /// (f(x, y), Add (Scale ∂ₓf δx) (Scale ∂ᵧf δy)), bound by `Let`; an argument
    /// whose Delta is `Zero` contributes no term and its partial is never formed.
    #[inline(always)]
    fn apply_binary<P: BinaryPrimitive + ?Sized>(self, other: Self, primitive: &P) -> Self {
        let (x, y) = (self.primal, other.primal);
        let primal = primitive.value(x, y);
        match (self.trace, other.trace) {
            (None, None) => Reverse::constant(primal),
            (Some(trace), None) => {
                let weight = primitive.partial_x(x, y, primal);
                Reverse::recorded(primal, trace, trace.scale(self.id, weight))
            }
            (None, Some(trace)) => {
                let weight = primitive.partial_y(x, y, primal);
                Reverse::recorded(primal, trace, trace.scale(other.id, weight))
            }
            (Some(trace), Some(other_trace)) => {
                debug_assert!(std::ptr::eq(trace, other_trace), "values of two traces met");
                let wx = primitive.partial_x(x, y, primal);
                let wy = primitive.partial_y(x, y, primal);
                let id = if self.id == other.id {
                    // Add (Scale a (Var p)) (Scale b (Var p)) = Scale (a + b) (Var p): one
                    // update of p's adjoint instead of two dependent ones.
                    trace.scale(self.id, wx + wy)
                } else {
                    trace.add_scaled(self.id, wx, other.id, wy)
                };
                Reverse::recorded(primal, trace, id)
            }
        }
    }
}

crate::ops::scalar_ops!(['t, S: Scalar] Reverse<'t, S>);
