//! `num_traits::Float` — and what it requires: `Num`, `Zero`, `One`, `NumCast`,
//! `ToPrimitive` — with `FromPrimitive`, `Signed` and `FloatConst`, for [`Dual`],
//! [`Reverse`] and [`TapeReverse`] at every nesting and both precisions (feature `num-traits`).
//!
//! Numeric code written against `num_traits::Float` then differentiates like code
//! written against [`Scalar`]. Every function goes through the derivative table:
//! each `Float` method is a [`Scalar`] method, or a composition of them where the
//! standard library composes them too (`log(b)` is `ln x / ln b`, `fract` is
//! `x − trunc x`). Predicates and classification (`is_nan`, `classify`,
//! `integer_decode`, …) look at the primal value, like comparisons. `mul_add` is
//! `self · a + b` rounded twice: a fused multiply-add has no derivative rule of its
//! own, and its derivative is that of the unfused expression.
//!
//! `Float` and [`Scalar`] name many methods alike (`sin`, `zero`, `is_zero`, …);
//! where both traits are imported, call through the trait (`Float::sin(x)`) or
//! import only the one the code is written against.

use num_traits::{Float, FloatConst};

use crate::{Dual, Precision, Real, Reverse, Scalar, TapeReverse};

/// The `num-traits` implementations for the type `$ty` over `S`, with lifetimes `$lt`.
macro_rules! num_traits_impls {
    ([$($lt:lifetime),*] $ty:ty) => {
        $crate::num_traits_impls::num_traits_impls!(@all
            [$($lt,)* R: Real + Float + FloatConst, S: Scalar<R> + Precision<Real = R>] $ty);
    };

    (@all [$($generics:tt)*] $ty:ty) => {
        impl<$($generics)*> ::num_traits::Zero for $ty {
            #[inline(always)]
            fn zero() -> Self {
                <Self as Scalar<R>>::zero()
            }
            /// The primal value is zero (as `x == 0.0`, which compares primals).
            #[inline(always)]
            fn is_zero(&self) -> bool {
                Scalar::value(*self) == R::ZERO
            }
        }

        impl<$($generics)*> ::num_traits::One for $ty {
            #[inline(always)]
            fn one() -> Self {
                <Self as Scalar<R>>::one()
            }
        }

        impl<$($generics)*> ::num_traits::Num for $ty {
            type FromStrRadixErr = <R as ::num_traits::Num>::FromStrRadixErr;
            /// A constant, parsed as the primitive type parses it.
            fn from_str_radix(text: &str, radix: u32) -> Result<Self, Self::FromStrRadixErr> {
                <R as ::num_traits::Num>::from_str_radix(text, radix).map(<Self as From<R>>::from)
            }
        }

        /// The primal value's conversions.
        impl<$($generics)*> ::num_traits::ToPrimitive for $ty {
            #[inline]
            fn to_i64(&self) -> Option<i64> {
                ::num_traits::ToPrimitive::to_i64(&Scalar::value(*self))
            }
            #[inline]
            fn to_u64(&self) -> Option<u64> {
                ::num_traits::ToPrimitive::to_u64(&Scalar::value(*self))
            }
            #[inline]
            fn to_i128(&self) -> Option<i128> {
                ::num_traits::ToPrimitive::to_i128(&Scalar::value(*self))
            }
            #[inline]
            fn to_u128(&self) -> Option<u128> {
                ::num_traits::ToPrimitive::to_u128(&Scalar::value(*self))
            }
            #[inline]
            fn to_f32(&self) -> Option<f32> {
                ::num_traits::ToPrimitive::to_f32(&Scalar::value(*self))
            }
            #[inline]
            fn to_f64(&self) -> Option<f64> {
                ::num_traits::ToPrimitive::to_f64(&Scalar::value(*self))
            }
        }

        /// A constant, converted as the primitive type converts it.
        impl<$($generics)*> ::num_traits::NumCast for $ty {
            #[inline]
            fn from<T: ::num_traits::ToPrimitive>(n: T) -> Option<Self> {
                <R as ::num_traits::NumCast>::from(n).map(<Self as From<R>>::from)
            }
        }

        /// A constant, converted as the primitive type converts it.
        impl<$($generics)*> ::num_traits::FromPrimitive for $ty {
            #[inline]
            fn from_i64(n: i64) -> Option<Self> {
                <R as ::num_traits::NumCast>::from(n).map(<Self as From<R>>::from)
            }
            #[inline]
            fn from_u64(n: u64) -> Option<Self> {
                <R as ::num_traits::NumCast>::from(n).map(<Self as From<R>>::from)
            }
            #[inline]
            fn from_f32(n: f32) -> Option<Self> {
                <R as ::num_traits::NumCast>::from(n).map(<Self as From<R>>::from)
            }
            #[inline]
            fn from_f64(n: f64) -> Option<Self> {
                <R as ::num_traits::NumCast>::from(n).map(<Self as From<R>>::from)
            }
        }

        impl<$($generics)*> ::num_traits::Signed for $ty {
            #[inline]
            fn abs(&self) -> Self {
                Scalar::abs(*self)
            }
            /// `self − other` if that is positive, else 0 (C's `fdim`).
            #[inline]
            fn abs_sub(&self, other: &Self) -> Self {
                if *self <= *other {
                    <Self as Scalar<R>>::zero()
                } else {
                    *self - *other
                }
            }
            /// ±1 by the sign of the primal (±1 for ±0, NaN for NaN, as for floats),
            /// with derivative 0.
            #[inline]
            fn signum(&self) -> Self {
                Scalar::signum(*self)
            }
            /// The primal's sign bit is clear (true for +0), as for floats.
            #[inline]
            fn is_positive(&self) -> bool {
                Float::is_sign_positive(Scalar::value(*self))
            }
            /// The primal's sign bit is set (true for −0), as for floats.
            #[inline]
            fn is_negative(&self) -> bool {
                Float::is_sign_negative(Scalar::value(*self))
            }
        }

        $crate::num_traits_impls::num_traits_impls!(@float_const [$($generics)*] $ty:
            E FRAC_1_PI FRAC_1_SQRT_2 FRAC_2_PI FRAC_2_SQRT_PI FRAC_PI_2 FRAC_PI_3 FRAC_PI_4
            FRAC_PI_6 FRAC_PI_8 LN_10 LN_2 LOG10_E LOG2_E PI SQRT_2 TAU LOG10_2 LOG2_10);

        impl<$($generics)*> ::num_traits::Float for $ty {
            $crate::num_traits_impls::num_traits_impls!(@constants
                nan infinity neg_infinity neg_zero min_value min_positive_value max_value epsilon);
            $crate::num_traits_impls::num_traits_impls!(@predicates
                is_nan is_infinite is_finite is_normal is_subnormal is_sign_positive
                is_sign_negative);
            $crate::num_traits_impls::num_traits_impls!(@unary
                floor ceil round trunc abs signum recip sqrt exp exp2 ln log2 log10 cbrt sin
                cos tan asin acos atan exp_m1 ln_1p sinh cosh tanh asinh acosh atanh);

            #[inline]
            fn classify(self) -> ::std::num::FpCategory {
                Float::classify(Scalar::value(self))
            }
            #[inline]
            fn integer_decode(self) -> (u64, i16, i8) {
                Float::integer_decode(Scalar::value(self))
            }
            /// `x − trunc(x)`, as the standard library computes it: derivative 1.
            #[inline]
            fn fract(self) -> Self {
                self - Scalar::trunc(self)
            }
            /// `self · a + b`, rounded twice (see the module documentation).
            #[inline]
            fn mul_add(self, a: Self, b: Self) -> Self {
                self * a + b
            }
            #[inline]
            fn powi(self, n: i32) -> Self {
                Scalar::powi(self, n)
            }
            #[inline]
            fn powf(self, n: Self) -> Self {
                Scalar::powf(self, n)
            }
            /// `ln x / ln base`, as the standard library computes it.
            #[inline]
            fn log(self, base: Self) -> Self {
                Scalar::ln(self) / Scalar::ln(base)
            }
            /// The standard library's conversion factor, as a constant.
            #[inline]
            fn to_degrees(self) -> Self {
                self * Float::to_degrees(R::ONE)
            }
            /// The standard library's conversion factor, as a constant.
            #[inline]
            fn to_radians(self) -> Self {
                self * Float::to_radians(R::ONE)
            }
            /// The larger by primal value, ignoring a NaN as `f64::max` does; on a tie
            /// `self`. The derivative is the returned argument's.
            #[inline]
            fn max(self, other: Self) -> Self {
                if Float::is_nan(Scalar::value(other)) {
                    self
                } else if Float::is_nan(Scalar::value(self)) {
                    other
                } else {
                    Scalar::max(self, other)
                }
            }
            /// The smaller by primal value, ignoring a NaN as `f64::min` does; on a tie
            /// `self`. The derivative is the returned argument's.
            #[inline]
            fn min(self, other: Self) -> Self {
                if Float::is_nan(Scalar::value(other)) {
                    self
                } else if Float::is_nan(Scalar::value(self)) {
                    other
                } else {
                    Scalar::min(self, other)
                }
            }
            /// `self − other` if that is positive, else 0 (C's `fdim`).
            #[inline]
            #[allow(deprecated)]
            fn abs_sub(self, other: Self) -> Self {
                ::num_traits::Signed::abs_sub(&self, &other)
            }
            #[inline]
            fn hypot(self, other: Self) -> Self {
                Scalar::hypot(self, other)
            }
            #[inline]
            fn atan2(self, other: Self) -> Self {
                Scalar::atan2(self, other)
            }
            #[inline]
            fn sin_cos(self) -> (Self, Self) {
                (Scalar::sin(self), Scalar::cos(self))
            }
        }
    };

    (@float_const [$($generics:tt)*] $ty:ty: $($name:ident)*) => {
        impl<$($generics)*> ::num_traits::FloatConst for $ty {
            $(
                #[inline]
                fn $name() -> Self {
                    <Self as From<R>>::from(<R as FloatConst>::$name())
                }
            )*
        }
    };

    (@constants $($name:ident)*) => {$(
        #[inline]
        fn $name() -> Self {
            <Self as From<R>>::from(<R as Float>::$name())
        }
    )*};

    (@predicates $($name:ident)*) => {$(
        #[inline]
        fn $name(self) -> bool {
            Float::$name(Scalar::value(self))
        }
    )*};

    (@unary $($name:ident)*) => {$(
        #[inline]
        fn $name(self) -> Self {
            Scalar::$name(self)
        }
    )*};
}

pub(crate) use num_traits_impls;

num_traits_impls!([] Dual<S>);
num_traits_impls!(['t] Reverse<'t, S>);
num_traits_impls!([] TapeReverse<S>);
