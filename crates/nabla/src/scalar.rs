//! The [`Scalar`] trait: write a numeric function once, differentiate it in any mode.

use std::fmt;
use std::iter::{Product, Sum};
use std::ops::{
    Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, RemAssign, Sub, SubAssign,
};

use crate::primitive::{Binary, BinaryPrimitive, Unary, UnaryPrimitive};
use crate::{Dual, Precision, Real, Reverse, TapeReverse};

/// A real number that may carry derivative information.
///
/// Implemented by `f64` (no derivatives), [`Dual<S>`](crate::Dual) (forward mode),
/// [`Reverse<'_, S>`](crate::Reverse) and [`TapeReverse<S>`](crate::TapeReverse)
/// (reverse mode), each generic over an inner
/// `Scalar` so that modes nest to any depth. Write a function once over `S: Scalar`
/// and evaluate or differentiate it with any of them.
///
/// # Precision
/// The parameter `R` is the primitive type at the bottom of the tower, `f64` unless
/// said otherwise: `S: Scalar` is `S: Scalar<f64>`, whose constants are `f64`s. The
/// same types built on `f32` — `f32`, `Dual<f32>`, `Reverse<'_, f32>`, … — are
/// `Scalar<f32>`, whose constants, [`value`](Scalar::value) and comparisons are
/// `f32`; their reverse-mode traces take 16 bytes an entry instead of 24. A function
/// for both precisions is generic over [`R: Real`](Real) as well (see [`Real`]).
///
/// ```
/// use nabla::{Scalar, grad};
/// fn loss<S: Scalar<f32>>(w: &[S]) -> S {
///     (w[0] * 2.0 - 1.0) * (w[0] * 2.0 - 1.0) + w[1].exp()
/// }
/// assert_eq!(grad(|w| loss(w), &[1.0_f32, 0.0]), vec![4.0_f32, 1.0]);
/// ```
///
/// Comparisons (`<`, `==`, …) look at the primal values only, so code may branch on
/// them; the derivative is then the derivative of the branch taken.
///
/// # Constants in generic code
/// Concrete types accept `f64` on either side (`2.0 * x`, `x * 2.0`). In code generic
/// over `S: Scalar`, Rust cannot see the `f64 * S` implementation through the bound
/// (rust-lang/rust#20671), so write the constant on the right (`x * 2.0`), lift it
/// with `S::from(2.0)`, or state the bound `where f64: LeftOperand<S>` (see
/// [`LeftOperand`](crate::LeftOperand)).
///
/// # Example
/// ```
/// use nabla::{Scalar, grad};
///
/// fn rosenbrock<S: Scalar>(x: &[S]) -> S {
///     let mut sum = S::zero();
///     for i in 0..x.len() - 1 {
///         let a = S::one() - x[i];
///         let b = x[i + 1] - x[i] * x[i];
///         sum += a * a + b * b * 100.0;
///     }
///     sum
/// }
///
/// assert_eq!(rosenbrock(&[1.0, 1.0]), 0.0); // plain f64
/// assert_eq!(grad(|x| rosenbrock(x), &[1.0, 1.0]), vec![0.0, 0.0]);
/// assert_eq!(grad(|x| rosenbrock(x), &[0.0, 0.0]), vec![-2.0, 0.0]);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a nabla scalar",
    label = "expected `{R}`, `Dual<S>` or `Reverse<'_, S>` for a scalar `S` built on `{R}`",
    note = "the differentiation operators take slices of scalars (`&[f64]`, `&[f32]`) and \
            give the closure slices of `Dual` or `Reverse` values; integers must be written \
            as floats",
    note = "a scalar built on `f32` is a `Scalar<f32>`: `S: Scalar` means `S: Scalar<f64>`"
)]
pub trait Scalar<R: Real = f64>:
    Precision<Real = R>
    + Copy
    + fmt::Debug
    + fmt::Display
    + From<R>
    + PartialEq
    + PartialOrd
    + PartialEq<R>
    + PartialOrd<R>
    + Neg<Output = Self>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Add<R, Output = Self>
    + Sub<R, Output = Self>
    + Mul<R, Output = Self>
    + Div<R, Output = Self>
    + Rem<Output = Self>
    + Rem<R, Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + RemAssign
    + Sum
    + Product
{
    /// The innermost primal value: strips every level of derivative information.
    ///
    /// ```
    /// use nabla::{Dual, Scalar};
    /// let x = Dual::new(Dual::new(3.0, 1.0), Dual::new(1.0, 0.0));
    /// assert_eq!(x.value(), 3.0);
    /// ```
    fn value(self) -> R;

    /// True if this number and all its perturbations are exactly zero.
    ///
    /// The modes use this to keep structural zeros structural: a zero tangent or
    /// cotangent is never multiplied into a partial derivative, so an infinite
    /// partial (like √x at 0) cannot turn a zero into NaN.
    ///
    /// ```
    /// use nabla::{Dual, Scalar};
    /// assert!(Dual::constant(0.0).is_zero());
    /// assert!(!Dual::new(0.0, 1.0).is_zero());
    /// ```
    fn is_zero(self) -> bool;

    /// Applies a one-argument primitive given by its value and derivative.
    ///
    /// This is how every elementary function is implemented, and how a user adds
    /// one of their own: see [`UnaryPrimitive`].
    fn apply_unary<P: UnaryPrimitive<R> + ?Sized>(self, primitive: &P) -> Self;

    /// Applies a two-argument primitive given by its value and partial derivatives.
    /// See [`BinaryPrimitive`].
    fn apply_binary<P: BinaryPrimitive<R> + ?Sized>(self, other: Self, primitive: &P) -> Self;

    /// Applies a built-in primitive of the derivative table.
    ///
    /// ```
    /// use nabla::{Scalar, Unary};
    /// assert_eq!(0.0_f64.unary(Unary::Cos), 1.0);
    /// ```
    #[inline(always)]
    fn unary(self, op: Unary) -> Self {
        self.apply_unary(&op)
    }

    /// Applies a built-in two-argument primitive of the derivative table.
    ///
    /// ```
    /// use nabla::{Binary, Scalar};
    /// assert_eq!(2.0_f64.binary(Binary::Powf, 10.0), 1024.0);
    /// ```
    #[inline(always)]
    fn binary(self, op: Binary, other: Self) -> Self {
        self.apply_binary(other, &op)
    }

    /// `*self += term` for an adjoint accumulator. The default keeps a structural
    /// zero structural — an accumulator that is still zero takes `term` as it is —
    /// so when adjoints are themselves differentiated (reverse over reverse) the
    /// first contribution to each records nothing. An implementation detail;
    /// `f64` just adds.
    #[doc(hidden)]
    #[inline(always)]
    fn accumulate(&mut self, term: Self) {
        if self.is_zero() {
            *self = term;
        } else {
            *self += term;
        }
    }

    /// True for the plain reals, `f64` and `f32`, whose products branch on
    /// nothing and record nothing: forward mode may then form a product of a partial
    /// and a tangent before knowing whether the structural-zero convention wants it
    /// (`Dual::apply_binary`). An implementation detail, fixed by the type.
    #[doc(hidden)]
    const IS_REAL: bool = false;

    /// True for the plain reals and `Dual` over them at any depth, whose arithmetic
    /// records nothing: forward mode may then add tangents without testing them
    /// (`Dual::apply_binary`). An implementation detail, fixed by the type.
    #[doc(hidden)]
    const RECORDS_NOTHING: bool = false;

    /// `self · c` for a constant `c` — what `x * 2.0` means. Forward mode scales
    /// primal and tangent alike instead of forming a full product with a zero tangent.
    ///
    /// ```
    /// use nabla::{Dual, Scalar};
    /// let x = Dual::new(3.0, 1.0).scale(2.0);
    /// assert_eq!((x.primal(), x.tangent()), (6.0, 2.0));
    /// ```
    #[inline(always)]
    fn scale(self, c: R) -> Self {
        self * Self::from(c)
    }

    /// `self + c` for a constant `c` — what `x + 1.0` means. Reverse mode records
    /// nothing for it; forward mode leaves the tangent alone.
    ///
    /// ```
    /// use nabla::{Dual, Scalar};
    /// let x = Dual::new(3.0, 1.0).shift(2.0);
    /// assert_eq!((x.primal(), x.tangent()), (5.0, 1.0));
    /// ```
    #[inline(always)]
    fn shift(self, c: R) -> Self {
        self + Self::from(c)
    }

    /// The same value with no derivative at any level: a constant, as if it had been
    /// computed from `f64`s (JAX's `stop_gradient`).
    ///
    /// Derivatives do not flow through it, in any mode or nesting, so it is how a
    /// value that depends on the inputs is treated as fixed: a target in a
    /// semi-gradient method, a normaliser held constant, a straight-through
    /// estimator (`x + (round(x) − x).stop_gradient()` has value `round(x)` and
    /// derivative 1).
    ///
    /// ```
    /// use nabla::{Scalar, derivative, grad};
    /// // d/dx [x · sg(x)] = sg(x) = 3, not 2x = 6
    /// assert_eq!(derivative(|x| x * x.stop_gradient(), 3.0), 3.0);
    /// assert_eq!(grad(|x| x[0] * x[0].stop_gradient(), &[3.0]), vec![3.0]);
    /// // straight-through rounding
    /// let st = |x: f64| derivative(|x| x + (x.round() - x).stop_gradient(), x);
    /// assert_eq!(st(0.7), 1.0);
    /// ```
    #[inline(always)]
    fn stop_gradient(self) -> Self {
        Self::from(self.value())
    }

    /// The constant 0.
    #[inline(always)]
    fn zero() -> Self {
        Self::from(R::ZERO)
    }

    /// The constant 1.
    #[inline(always)]
    fn one() -> Self {
        Self::from(R::ONE)
    }

    /// 1/x
    #[inline(always)]
    fn recip(self) -> Self {
        self.unary(Unary::Recip)
    }
    /// Sine.
    #[inline(always)]
    fn sin(self) -> Self {
        self.unary(Unary::Sin)
    }
    /// Cosine.
    #[inline(always)]
    fn cos(self) -> Self {
        self.unary(Unary::Cos)
    }
    /// Tangent.
    #[inline(always)]
    fn tan(self) -> Self {
        self.unary(Unary::Tan)
    }
    /// Arcsine.
    #[inline(always)]
    fn asin(self) -> Self {
        self.unary(Unary::Asin)
    }
    /// Arccosine.
    #[inline(always)]
    fn acos(self) -> Self {
        self.unary(Unary::Acos)
    }
    /// Arctangent.
    #[inline(always)]
    fn atan(self) -> Self {
        self.unary(Unary::Atan)
    }
    /// Hyperbolic sine.
    #[inline(always)]
    fn sinh(self) -> Self {
        self.unary(Unary::Sinh)
    }
    /// Hyperbolic cosine.
    #[inline(always)]
    fn cosh(self) -> Self {
        self.unary(Unary::Cosh)
    }
    /// Hyperbolic tangent.
    #[inline(always)]
    fn tanh(self) -> Self {
        self.unary(Unary::Tanh)
    }
    /// eˣ
    #[inline(always)]
    fn exp(self) -> Self {
        self.unary(Unary::Exp)
    }
    /// Natural logarithm.
    #[inline(always)]
    fn ln(self) -> Self {
        self.unary(Unary::Ln)
    }
    /// ln(1 + x), accurate near 0.
    #[inline(always)]
    fn ln_1p(self) -> Self {
        self.unary(Unary::Log1p)
    }
    /// eˣ − 1, accurate near 0.
    #[inline(always)]
    fn exp_m1(self) -> Self {
        self.unary(Unary::ExpM1)
    }
    /// 2ˣ
    #[inline(always)]
    fn exp2(self) -> Self {
        self.unary(Unary::Exp2)
    }
    /// Base-2 logarithm.
    #[inline(always)]
    fn log2(self) -> Self {
        self.unary(Unary::Log2)
    }
    /// Base-10 logarithm.
    #[inline(always)]
    fn log10(self) -> Self {
        self.unary(Unary::Log10)
    }
    /// Inverse hyperbolic sine.
    #[inline(always)]
    fn asinh(self) -> Self {
        self.unary(Unary::Asinh)
    }
    /// Inverse hyperbolic cosine; its derivative at 1 is +∞.
    #[inline(always)]
    fn acosh(self) -> Self {
        self.unary(Unary::Acosh)
    }
    /// Inverse hyperbolic tangent.
    #[inline(always)]
    fn atanh(self) -> Self {
        self.unary(Unary::Atanh)
    }
    /// Square root; its derivative at 0 is +∞.
    #[inline(always)]
    fn sqrt(self) -> Self {
        self.unary(Unary::Sqrt)
    }
    /// Cube root.
    #[inline(always)]
    fn cbrt(self) -> Self {
        self.unary(Unary::Cbrt)
    }
    /// Absolute value; its derivative at 0 is 0.
    #[inline(always)]
    fn abs(self) -> Self {
        self.unary(Unary::Abs)
    }
    /// Largest integer ≤ x (derivative 0).
    #[inline(always)]
    fn floor(self) -> Self {
        self.unary(Unary::Floor)
    }
    /// Smallest integer ≥ x (derivative 0).
    #[inline(always)]
    fn ceil(self) -> Self {
        self.unary(Unary::Ceil)
    }
    /// Nearest integer, halves away from zero (derivative 0).
    #[inline(always)]
    fn round(self) -> Self {
        self.unary(Unary::Round)
    }
    /// Integer part (derivative 0).
    #[inline(always)]
    fn trunc(self) -> Self {
        self.unary(Unary::Trunc)
    }
    /// The sign as `f64::signum` does it: ±1, or NaN (derivative 0).
    #[inline(always)]
    fn signum(self) -> Self {
        self.unary(Unary::Signum)
    }
    /// JAX's `sign`: ±1, or x itself for ±0 and NaN (derivative 0).
    #[inline(always)]
    fn sign(self) -> Self {
        self.unary(Unary::Sign)
    }
    /// The error function (derivative 2/√π · e^(−x²)); feature `erf`.
    #[cfg(feature = "erf")]
    #[inline(always)]
    fn erf(self) -> Self {
        self.unary(Unary::Erf)
    }
    /// Integer power xⁿ.
    #[inline(always)]
    fn powi(self, n: i32) -> Self {
        self.unary(Unary::Powi(n))
    }
    /// Real power xʸ. With a constant exponent the derivative never forms `ln x`, so a
    /// negative base is fine: d/dx x³ at −1.3 is 5.07.
    #[inline(always)]
    fn powf(self, y: impl Into<Self>) -> Self {
        self.binary(Binary::Powf, y.into())
    }
    /// Four-quadrant arctangent of `self / x`, as `f64::atan2`.
    #[inline(always)]
    fn atan2(self, x: impl Into<Self>) -> Self {
        self.binary(Binary::Atan2, x.into())
    }
    /// √(self² + y²) without undue overflow.
    #[inline(always)]
    fn hypot(self, y: impl Into<Self>) -> Self {
        self.binary(Binary::Hypot, y.into())
    }
    /// The smaller argument, by primal value; on a tie (or NaN) the first, `self`.
    /// The derivative is that of the argument returned.
    ///
    /// ```
    /// use nabla::{Scalar, grad};
    /// // relu by max: the derivative of the branch taken
    /// assert_eq!(grad(|x| x[0].max(0.0), &[2.0]), vec![1.0]);
    /// assert_eq!(grad(|x| x[0].max(0.0), &[-2.0]), vec![0.0]);
    /// ```
    #[inline(always)]
    fn min(self, other: impl Into<Self>) -> Self {
        let other = other.into();
        if other < self { other } else { self }
    }
    /// The larger argument, by primal value; on a tie (or NaN) the first, `self`.
    /// The derivative is that of the argument returned.
    #[inline(always)]
    fn max(self, other: impl Into<Self>) -> Self {
        let other = other.into();
        if other > self { other } else { self }
    }
}

/// Plain reals, `f64` and `f32`: the value column of the derivative table, and the
/// bottom of every tower of nested modes.
macro_rules! plain_real {
    ($t:ident) => {
        impl Scalar<$t> for $t {
            #[inline(always)]
            fn value(self) -> $t {
                self
            }
            #[inline(always)]
            fn is_zero(self) -> bool {
                self == 0.0
            }
            #[inline(always)]
            fn apply_unary<P: UnaryPrimitive<$t> + ?Sized>(self, primitive: &P) -> $t {
                primitive.value(self)
            }
            #[inline(always)]
            fn apply_binary<P: BinaryPrimitive<$t> + ?Sized>(self, other: $t, primitive: &P) -> $t {
                primitive.value(self, other)
            }
            // The built-ins bottom out here, in the table's value column (the generic
            // `value` of a built-in calls back into `unary`, so a plain real must not
            // forward it).
            #[inline(always)]
            fn unary(self, op: Unary) -> $t {
                op.eval(self)
            }
            #[inline(always)]
            fn binary(self, op: Binary, other: $t) -> $t {
                op.eval(self, other)
            }
            const IS_REAL: bool = true;
            const RECORDS_NOTHING: bool = true;
            #[inline(always)]
            fn accumulate(&mut self, term: $t) {
                *self += term;
            }
            #[inline(always)]
            fn scale(self, c: $t) -> $t {
                self * c
            }
            #[inline(always)]
            fn shift(self, c: $t) -> $t {
                self + c
            }
        }
    };
}

plain_real!(f64);
plain_real!(f32);

/// A scalar type built on the level `S` — `S` itself, one level over it
/// ([`Dual<S>`](crate::Dual), [`Reverse<'_, S>`](crate::Reverse)) or two (`Dual<Dual<S>>`,
/// `Reverse<'_, Dual<S>>`, …) — into which values of `S` lift as constants. `R` is
/// the precision of both (`f64` unless said otherwise).
///
/// Code that must run in whichever mode an operator picks, and that uses values
/// captured from the level it was called at, lifts them with `T::lift`: the lifted
/// value carries no perturbation of the new level, which is what keeps nested
/// derivatives from being confused. See [`VectorFunction`](crate::VectorFunction);
/// where the type is not named, [`lift`](crate::lift) does the same.
///
/// ```
/// use nabla::{Dual, Lift, Scalar};
/// fn scaled<S: Scalar, T: Lift<S>>(a: S, x: T) -> T {
///     T::lift(a) * x
/// }
/// assert_eq!(scaled(2.0, 3.0), 6.0);
/// assert_eq!(scaled(2.0, Dual::new(3.0, 1.0)).tangent(), 2.0);
/// let two_levels: Dual<Dual<f64>> = scaled(2.0, Dual::new(Dual::new(3.0, 1.0), Dual::from(1.0)));
/// assert_eq!(two_levels.tangent().tangent(), 0.0);
/// assert_eq!(two_levels.tangent().primal(), 2.0);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not built on `{S}`: a value of `{S}` cannot be lifted into it",
    note = "`lift` reaches at most two levels inward; lift in steps (`Dual::constant`, \
            `Reverse::constant`) for deeper ones",
    note = "two `lift(…)` values do not combine with each other: combine each with a value \
            of the inner level (`z * lift(x) * lift(y)`, not `lift(x) * lift(y) * z`)"
)]
pub trait Lift<S: Scalar<R>, R: Real = f64>: Scalar<R> {
    /// `value` as a constant of this level.
    fn lift(value: S) -> Self;
}

impl<R: Real, S: Scalar<R>> Lift<S, R> for S {
    #[inline(always)]
    fn lift(value: S) -> S {
        value
    }
}

/// Two levels over `S`, in each combination of modes: a constant of the inner level
/// made from a constant of the middle one.
macro_rules! lift_two_levels {
    ($([$($lifetimes:lifetime),*] $ty:ty, $middle:ty;)*) => {$(
        impl<$($lifetimes,)* R: Real, S: Scalar<R>> Lift<S, R> for $ty {
            #[inline(always)]
            fn lift(value: S) -> Self {
                <$ty>::constant(<$middle as Lift<S, R>>::lift(value))
            }
        }
    )*};
}
lift_two_levels! {
    [] Dual<Dual<S>>, Dual<S>;
    ['t] Dual<Reverse<'t, S>>, Reverse<'t, S>;
    ['u] Reverse<'u, Dual<S>>, Dual<S>;
    ['u, 't] Reverse<'u, Reverse<'t, S>>, Reverse<'t, S>;
    [] Dual<TapeReverse<S>>, TapeReverse<S>;
    [] TapeReverse<Dual<S>>, Dual<S>;
    [] TapeReverse<TapeReverse<S>>, TapeReverse<S>;
    ['u] Reverse<'u, TapeReverse<S>>, TapeReverse<S>;
}
