//! simba's `RealField` and `ComplexField` — what nalgebra's decompositions and
//! norms need — for the forward-mode type [`Dual`] and the run-time checked
//! reverse-mode type [`TapeReverse`], at every nesting and both precisions (feature
//! `nalgebra`), with what they require: `SimdValue` (one lane), `Field`,
//! `SubsetOf`/`SupersetOf` of `f32` and `f64`, and approx's comparisons.
//!
//! [`Reverse`](crate::Reverse) cannot be given these traits: simba requires
//! `Send + Sync + 'static`, and a `Reverse` value is branded with its trace's
//! lifetime and refers to its trace; `TapeReverse` is its stand-in here (see
//! `docs/library.md`, *Reverse mode through nalgebra*).
//!
//! As for `num_traits::Float`, every function is a [`Scalar`] method or a
//! composition of them; predicates and comparisons look at the primal value.

use approx::{AbsDiffEq, RelativeEq, UlpsEq};
use num_traits::{Float, FloatConst};
use simba::scalar::{ComplexField, Field, RealField, SubsetOf};
use simba::simd::SimdValue;

use crate::{Dual, Precision, Real, Scalar, TapeReverse};

macro_rules! nalgebra_impls {
    (@unary $($name:ident)*) => {$(
        #[inline]
        fn $name(self) -> Self {
            Scalar::$name(self)
        }
    )*};

    (@constants $($name:ident: $constant:ident),* $(,)?) => {$(
        #[inline]
        fn $name() -> Self {
            <Self as From<R>>::from(R::$constant())
        }
    )*};

    ([$($generics:tt)*] $ty:ty) => {
        /// One lane: a nabla scalar is a scalar to simba, not a SIMD vector.
        impl<$($generics)*> SimdValue for $ty {
            const LANES: usize = 1;
            type Element = Self;
            type SimdBool = bool;

            #[inline(always)]
            fn splat(value: Self) -> Self {
                value
            }
            #[inline(always)]
            fn extract(&self, _: usize) -> Self {
                *self
            }
            /// As `extract`: there is one lane and no unchecked access to skip.
            #[inline(always)]
            #[allow(unsafe_code)] // the trait's signature; the body is safe code
            unsafe fn extract_unchecked(&self, _: usize) -> Self {
                *self
            }
            #[inline(always)]
            fn replace(&mut self, _: usize, value: Self) {
                *self = value;
            }
            /// As `replace`: there is one lane and no unchecked access to skip.
            #[inline(always)]
            #[allow(unsafe_code)] // the trait's signature; the body is safe code
            unsafe fn replace_unchecked(&mut self, _: usize, value: Self) {
                *self = value;
            }
            #[inline(always)]
            fn select(self, condition: bool, other: Self) -> Self {
                if condition { self } else { other }
            }
        }

        impl<$($generics)*> Field for $ty {}

        impl<$($generics)*> SubsetOf<$ty> for $ty {
            #[inline(always)]
            fn to_superset(&self) -> Self {
                *self
            }
            #[inline(always)]
            fn from_superset_unchecked(element: &Self) -> Self {
                *element
            }
            #[inline(always)]
            fn is_in_subset(_: &Self) -> bool {
                true
            }
        }

        /// `f64` as a constant (rounded for an `f32` tower); back, the primal value.
        impl<$($generics)*> SubsetOf<$ty> for f64 {
            #[inline(always)]
            fn to_superset(&self) -> $ty {
                <$ty as From<R>>::from(R::from_f64(*self))
            }
            #[inline(always)]
            fn from_superset_unchecked(element: &$ty) -> f64 {
                Scalar::value(*element).to_f64()
            }
            #[inline(always)]
            fn is_in_subset(_: &$ty) -> bool {
                true
            }
        }

        /// `f32` as a constant; back, the primal value (rounded for an `f64` tower).
        impl<$($generics)*> SubsetOf<$ty> for f32 {
            #[inline(always)]
            fn to_superset(&self) -> $ty {
                <$ty as From<R>>::from(R::from_f64(f64::from(*self)))
            }
            #[inline(always)]
            fn from_superset_unchecked(element: &$ty) -> f32 {
                Scalar::value(*element).to_f64() as f32
            }
            #[inline(always)]
            fn is_in_subset(_: &$ty) -> bool {
                true
            }
        }

        /// Primal values compared as the primitive type compares them.
        impl<$($generics)*> AbsDiffEq for $ty {
            type Epsilon = Self;
            #[inline]
            fn default_epsilon() -> Self {
                <$ty as From<R>>::from(R::default_epsilon())
            }
            #[inline]
            fn abs_diff_eq(&self, other: &Self, epsilon: Self) -> bool {
                Scalar::value(*self).abs_diff_eq(&Scalar::value(*other), Scalar::value(epsilon))
            }
        }

        impl<$($generics)*> RelativeEq for $ty {
            #[inline]
            fn default_max_relative() -> Self {
                <$ty as From<R>>::from(R::default_max_relative())
            }
            #[inline]
            fn relative_eq(&self, other: &Self, epsilon: Self, max_relative: Self) -> bool {
                Scalar::value(*self).relative_eq(
                    &Scalar::value(*other),
                    Scalar::value(epsilon),
                    Scalar::value(max_relative),
                )
            }
        }

        impl<$($generics)*> UlpsEq for $ty {
            #[inline]
            fn default_max_ulps() -> u32 {
                R::default_max_ulps()
            }
            #[inline]
            fn ulps_eq(&self, other: &Self, epsilon: Self, max_ulps: u32) -> bool {
                Scalar::value(*self).ulps_eq(&Scalar::value(*other), Scalar::value(epsilon), max_ulps)
            }
        }

        /// A real number as a complex one with no imaginary part, as simba does for
        /// `f64`.
        impl<$($generics)*> ComplexField for $ty {
            type RealField = Self;

            $crate::nalgebra_impls::nalgebra_impls!(@unary
                floor ceil round trunc recip sin cos tan asin acos atan sinh cosh tanh asinh
                acosh atanh log2 log10 ln ln_1p sqrt exp exp2 exp_m1 cbrt abs signum);

            #[inline(always)]
            fn from_real(re: Self) -> Self {
                re
            }
            #[inline(always)]
            fn real(self) -> Self {
                self
            }
            #[inline(always)]
            fn imaginary(self) -> Self {
                <Self as Scalar<R>>::zero()
            }
            #[inline]
            fn modulus(self) -> Self {
                Scalar::abs(self)
            }
            #[inline]
            fn modulus_squared(self) -> Self {
                self * self
            }
            /// 0 or π by the sign of the primal, a constant.
            #[inline]
            fn argument(self) -> Self {
                if self >= R::ZERO {
                    <Self as Scalar<R>>::zero()
                } else {
                    <$ty as From<R>>::from(R::PI())
                }
            }
            #[inline]
            fn norm1(self) -> Self {
                Scalar::abs(self)
            }
            #[inline]
            fn scale(self, factor: Self) -> Self {
                self * factor
            }
            #[inline]
            fn unscale(self, factor: Self) -> Self {
                self / factor
            }
            #[inline]
            fn to_exp(self) -> (Self, Self) {
                if self >= R::ZERO {
                    (self, <Self as Scalar<R>>::one())
                } else {
                    (-self, -<Self as Scalar<R>>::one())
                }
            }
            #[inline]
            fn conjugate(self) -> Self {
                self
            }
            #[inline]
            fn fract(self) -> Self {
                Float::fract(self)
            }
            /// `self · a + b`, rounded twice, as `num_traits::Float::mul_add` here.
            #[inline]
            fn mul_add(self, a: Self, b: Self) -> Self {
                self * a + b
            }
            #[inline]
            fn hypot(self, other: Self) -> Self {
                Scalar::hypot(self, other)
            }
            #[inline]
            fn sin_cos(self) -> (Self, Self) {
                (Scalar::sin(self), Scalar::cos(self))
            }
            #[inline]
            fn log(self, base: Self) -> Self {
                Float::log(self, base)
            }
            #[inline]
            fn powi(self, n: i32) -> Self {
                Scalar::powi(self, n)
            }
            #[inline]
            fn powf(self, n: Self) -> Self {
                Scalar::powf(self, n)
            }
            #[inline]
            fn powc(self, n: Self) -> Self {
                Scalar::powf(self, n)
            }
            #[inline]
            fn is_finite(&self) -> bool {
                Real::is_finite(Scalar::value(*self))
            }
            /// The square root if the primal is not negative.
            #[inline]
            fn try_sqrt(self) -> Option<Self> {
                (self >= R::ZERO).then(|| Scalar::sqrt(self))
            }
        }

        impl<$($generics)*> RealField for $ty {
            #[inline]
            fn is_sign_positive(&self) -> bool {
                Float::is_sign_positive(*self)
            }
            #[inline]
            fn is_sign_negative(&self) -> bool {
                Float::is_sign_negative(*self)
            }
            #[inline]
            fn copysign(self, sign: Self) -> Self {
                Float::copysign(self, sign)
            }
            #[inline]
            fn max(self, other: Self) -> Self {
                Float::max(self, other)
            }
            #[inline]
            fn min(self, other: Self) -> Self {
                Float::min(self, other)
            }
            #[inline]
            fn clamp(self, min: Self, max: Self) -> Self {
                Float::clamp(self, min, max)
            }
            #[inline]
            fn atan2(self, other: Self) -> Self {
                Scalar::atan2(self, other)
            }
            #[inline]
            fn min_value() -> Option<Self> {
                Some(<$ty as From<R>>::from(<R as Float>::min_value()))
            }
            #[inline]
            fn max_value() -> Option<Self> {
                Some(<$ty as From<R>>::from(<R as Float>::max_value()))
            }
            #[inline]
            fn two_pi() -> Self {
                <$ty as From<R>>::from(R::TAU())
            }
            $crate::nalgebra_impls::nalgebra_impls!(@constants
                pi: PI, frac_pi_2: FRAC_PI_2, frac_pi_3: FRAC_PI_3, frac_pi_4: FRAC_PI_4,
                frac_pi_6: FRAC_PI_6, frac_pi_8: FRAC_PI_8, frac_1_pi: FRAC_1_PI,
                frac_2_pi: FRAC_2_PI, frac_2_sqrt_pi: FRAC_2_SQRT_PI, e: E, log2_e: LOG2_E,
                log10_e: LOG10_E, ln_2: LN_2, ln_10: LN_10);
        }
    };

}

pub(crate) use nalgebra_impls;

// What the primitive type must offer (`f64` and `f32` do), and what simba asks of
// every scalar: `Send + Sync + 'static`, which the towers of `Dual` and
// `TapeReverse` over `f64` and `f32` are.
nalgebra_impls!([
    R: Real + Float + FloatConst + RelativeEq<Epsilon = R> + UlpsEq<Epsilon = R>,
    S: Scalar<R> + Precision<Real = R> + Send + Sync + 'static
] Dual<S>);
nalgebra_impls!([
    R: Real + Float + FloatConst + RelativeEq<Epsilon = R> + UlpsEq<Epsilon = R>,
    S: Scalar<R> + Precision<Real = R> + Send + Sync + 'static
] TapeReverse<S>);
