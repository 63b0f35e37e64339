//! Forward mode: dual numbers (Krawiec et al. Figure 3, the translation D→ with
//! Real ↦ Real × Real), generic over the inner scalar so that levels nest.

use crate::primitive::{BinaryPrimitive, Number, UnaryPrimitive};
use crate::{Lift, Precision, Real, Scalar};

/// A dual number: a primal value and a tangent (directional derivative).
///
/// `Dual<S>` is a [`Scalar`] whenever `S` is, of the same precision, so
/// `Dual<Dual<f64>>` carries second derivatives, `Dual<Reverse<'_, f64>>` is forward
/// over reverse, `Dual<f32>` is forward mode in single precision, and so on. Each
/// nesting level is a distinct type, so perturbations of different levels cannot be
/// confused: a value from an outer level enters an inner one only through an explicit
/// [`Dual::constant`] (or [`lift`](crate::lift)).
///
/// # Example
/// ```
/// use nabla::{Dual, Scalar};
///
/// let x = Dual::new(2.0, 1.0); // x = 2, dx = 1
/// let y = x * x.sin();
/// assert_eq!(y.primal(), 2.0 * 2.0_f64.sin());
/// assert_eq!(y.tangent(), 2.0_f64.sin() + 2.0 * 2.0_f64.cos());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Dual<S> {
    primal: S,
    tangent: S,
}

impl<R: Real, S: Scalar<R> + Precision<Real = R>> Dual<S> {
    /// A dual number with the given primal and tangent.
    #[inline(always)]
    pub fn new(primal: S, tangent: S) -> Self {
        Dual { primal, tangent }
    }

    /// A constant: tangent zero. Use it to bring a value of the enclosing level (for
    /// example a variable captured by a closure) into this level.
    ///
    /// ```
    /// use nabla::{Dual, derivative};
    /// let a = 3.0;
    /// assert_eq!(derivative(|x| Dual::constant(a) * x, 1.0), 3.0);
    /// ```
    #[inline(always)]
    pub fn constant(primal: S) -> Self {
        Dual {
            primal,
            tangent: S::zero(),
        }
    }

    /// The primal value (one level down).
    #[inline(always)]
    pub fn primal(self) -> S {
        self.primal
    }

    /// The tangent: the directional derivative carried alongside the primal.
    #[inline(always)]
    pub fn tangent(self) -> S {
        self.tangent
    }
}

impl<R: Real, S: Scalar<R>> Lift<S, R> for Dual<S> {
    #[inline(always)]
    fn lift(value: S) -> Self {
        Dual::constant(value)
    }
}

impl<R: Real, S: Scalar<R>> From<R> for Dual<S> {
    #[inline(always)]
    fn from(x: R) -> Self {
        Dual::constant(S::from(x))
    }
}

impl<S: Precision> Precision for Dual<S> {
    type Real = S::Real;
}

impl<R: Real, S: Scalar<R>> Scalar<R> for Dual<S> {
    const RECORDS_NOTHING: bool = S::RECORDS_NOTHING;

    #[inline(always)]
    fn value(self) -> R {
        self.primal.value()
    }

    #[inline(always)]
    fn is_zero(self) -> bool {
        self.primal.is_zero() && self.tangent.is_zero()
    }

    /// `Scale c δx`, where `Scale 0 δx` is zero even if δx is infinite (√x at 0), and
    /// a zero δx stays zero even if `c` is infinite ([`Number::chain`]). A finite
    /// constant needs no test of δx: then `c · 0` is exactly zero.
    #[inline(always)]
    fn scale(self, c: R) -> Self {
        Dual {
            primal: self.primal.scale(c),
            // The common case first (finite c ≠ 0: two predictable branches); the
            // tangent is only looked at for an infinite or NaN c.
            tangent: if c.is_finite() {
                if c == R::ZERO {
                    S::zero()
                } else {
                    self.tangent.scale(c)
                }
            } else if self.tangent.is_zero() {
                S::zero()
            } else {
                self.tangent.scale(c)
            },
        }
    }

    /// `x + c` has x's tangent (`Add δx Zero = δx`).
    #[inline(always)]
    fn shift(self, c: R) -> Self {
        Dual {
            primal: self.primal.shift(c),
            tangent: self.tangent,
        }
    }

    /// Figure 3's rule for a primitive: (f x, f'(x) · dx), the product taken with
    /// [`Number::chain`]. A zero tangent stays zero without forming f'(x), which
    /// may be NaN at a point the tangent does not reach.
    #[inline(always)]
    fn apply_unary<P: UnaryPrimitive<R> + ?Sized>(self, primitive: &P) -> Self {
        let primal = primitive.value(self.primal);
        let tangent = if self.tangent.is_zero() {
            S::zero()
        } else {
            primitive
                .derivative(self.primal, primal)
                .chain(self.tangent)
        };
        Dual { primal, tangent }
    }

    /// (f(x, y), ∂ₓf · dx + ∂ᵧf · dy), the products taken with [`Number::chain`];
    /// unless forming them is free, each partial only for a non-zero tangent.
    #[inline(always)]
    fn apply_binary<P: BinaryPrimitive<R> + ?Sized>(self, other: Self, primitive: &P) -> Self {
        let (x, y) = (self.primal, other.primal);
        let primal = primitive.value(x, y);
        let (dx, dy) = (self.tangent, other.tangent);
        // No branch on which tangents are zero where forming the partials costs
        // nothing. For + and − (partials ±1) the products are the tangents
        // themselves, so the sum is plain — at every level of `Dual` over reals; a
        // running sum's dependency chain is then its additions alone. For × with
        // tangents of plain reals each product is `chain`, which compiles to a few
        // selects. The convention is kept up to the sign of a zero. Not for other
        // tangents: an operation on reverse-mode numbers may record an entry the
        // tests avoid, and a nested `Dual` carries structural zeros they skip cheaply.
        let tangent = if S::RECORDS_NOTHING && primitive.has_unit_partials() {
            // ±1 · d is ±d: a scaling by the partial's value, which folds to the
            // tangent or its negation at every level (a product with the constant
            // would test a nested tangent's components for zero).
            dx.scale(primitive.partial_x(x, y, primal).value())
                + dy.scale(primitive.partial_y(x, y, primal).value())
        } else if S::IS_REAL && primitive.has_polynomial_partials() {
            primitive.partial_x(x, y, primal).chain(dx)
                + primitive.partial_y(x, y, primal).chain(dy)
        } else {
            match (dx.is_zero(), dy.is_zero()) {
                (false, false) => {
                    primitive.partial_x(x, y, primal).chain(dx)
                        + primitive.partial_y(x, y, primal).chain(dy)
                }
                (false, true) => primitive.partial_x(x, y, primal).chain(dx),
                (true, false) => primitive.partial_y(x, y, primal).chain(dy),
                (true, true) => S::zero(),
            }
        };
        Dual { primal, tangent }
    }
}

crate::ops::scalar_ops!([] Dual<S>);
