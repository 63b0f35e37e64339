//! The primitive floating-point types a tower of scalars is built on: `f64` and
//! `f32`.

use std::fmt::{Debug, Display};
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, Sub, SubAssign};

/// `f64` or `f32`: the precision of the innermost primal of a [`Scalar`](crate::Scalar).
///
/// Every scalar type is built on one of them — `f64`, `Dual<f64>`,
/// `Reverse<'_, Dual<f64>>` on `f64`; `f32`, `Dual<f32>`, … on `f32` — and its
/// constants, [`value`](crate::Scalar::value) and comparisons are of that type
/// (`S: Scalar<f32>`). A `Real` is itself the plain scalar of its precision
/// (`R: Scalar<R>`), so its functions are [`Scalar`](crate::Scalar)'s. The trait is
/// sealed; it adds the constants and conversions generic code needs.
///
/// Code generic over the precision names it as a parameter and makes its
/// constants with [`from_f64`](Real::from_f64):
///
/// ```
/// use nabla::{Real, Scalar, derivative};
/// fn f<R: Real, S: Scalar<R>>(x: S) -> S {
///     x * x * R::from_f64(0.5)
/// }
/// assert_eq!(derivative(|x| f(x), 3.0_f64), 3.0);
/// assert_eq!(derivative(|x| f(x), 3.0_f32), 3.0);
/// ```
pub trait Real:
    sealed::Sealed
    + crate::Scalar<Self>
    + Copy
    + Debug
    + Display
    + Default
    + PartialEq
    + PartialOrd
    + Neg<Output = Self>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Send
    + Sync
    + 'static
{
    /// 0
    const ZERO: Self;
    /// 1
    const ONE: Self;
    /// The machine epsilon of this precision: `f64::EPSILON` or `f32::EPSILON`.
    const EPSILON: Self;

    /// `c` rounded to the nearest value of this precision.
    fn from_f64(c: f64) -> Self;
    /// This value as an `f64` (exact).
    fn to_f64(self) -> f64;
    /// `n` rounded to the nearest value of this precision (exact for |n| ≤ 2²⁴).
    fn from_i32(n: i32) -> Self;
    /// True unless infinite or NaN.
    fn is_finite(self) -> bool;
}

pub(crate) mod sealed {
    use crate::{Binary, Unary};

    /// Keeps [`Real`](super::Real) implemented by `f64` and `f32` only, and holds
    /// the value column of the derivative table (`primitive.rs`), which
    /// [`Unary::eval`] and [`Binary::eval`] dispatch to.
    pub trait Sealed: Sized {
        /// The primitive `op` at `self`: the standard library's function.
        fn eval_unary(self, op: Unary) -> Self;
        /// The primitive `op` at `(self, y)`.
        fn eval_binary(self, op: Binary, y: Self) -> Self;
    }
}

macro_rules! real {
    ($t:ident) => {
        impl Real for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const EPSILON: $t = $t::EPSILON;

            #[inline(always)]
            fn from_f64(c: f64) -> $t {
                c as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
            #[inline(always)]
            fn from_i32(n: i32) -> $t {
                n as $t
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
        }
    };
}

real!(f64);
real!(f32);

/// The primitive type at the bottom of a scalar type: `f64` for `f64`, `Dual<f64>`
/// and `Reverse<'_, Dual<f64>>`; `f32` for their `f32` counterparts.
///
/// [`Scalar<R>`](crate::Scalar) requires `Precision<Real = R>`. Generic code rarely
/// names it; it lets implementations over any precision say which one they are at.
pub trait Precision {
    /// `f64` or `f32`.
    type Real: Real;
}

impl Precision for f64 {
    type Real = f64;
}

impl Precision for f32 {
    type Real = f32;
}
