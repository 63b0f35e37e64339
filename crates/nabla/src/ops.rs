//! How values combine under `+ − × ÷`: the operator implementations shared by the
//! derivative-carrying scalars, the [`Operand`] trait that says what may stand on
//! the right of them, and [`lift`] for values of an enclosing level.
//!
//! Every arithmetic operator goes through the derivative table
//! ([`Binary`](crate::Binary)); comparisons look at primal values only.

use std::ops::{Add, Div, Mul, Rem, Sub};

use crate::{Binary, Lift, Precision, Real, Scalar};

/// What may stand on the right of `T`'s `+ − × ÷ %` (and `+= −= ×= ÷= %=`): a `T`, a
/// constant of its precision (`f64`, or `f32` for a `Scalar<f32>`), or a value of an
/// enclosing level wrapped by [`lift`].
///
/// Values of two different levels of differentiation — a `Reverse<'_, f64>`
/// captured from an outer `grad` and the `Reverse<'_, Reverse<'_, f64>>` of an inner
/// one, say — do not combine: the outer value must first become a constant of the
/// inner level, which [`lift`] does without naming the inner type. The compiler
/// says so when they are mixed:
///
/// ```compile_fail
/// use nabla::grad;
/// grad(|x| {
///     let outer = x[0];
///     // error: `Reverse<'_, f64>` is not an operand of `Reverse<'_, Reverse<'_, f64>>`
///     let inner = grad(|y| y[0] * outer, &[outer]);
///     outer * inner[0]
/// }, &[1.0]);
/// ```
///
/// ```
/// use nabla::{grad, lift};
/// let g = grad(|x| {
///     let outer = x[0];
///     let inner = grad(|y| y[0] * lift(outer), &[outer]);
///     outer * inner[0] // d/dx x² = 2x
/// }, &[3.0]);
/// assert_eq!(g, vec![6.0]);
/// ```
///
/// The trait is sealed: its implementations are the library's.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an operand of `{T}` arithmetic",
    label = "expected a `{T}`, a constant of its precision (`f64`, `f32`), or \
             `nabla::lift(x)` of an outer level's value",
    note = "a value captured from an enclosing differentiation is a constant at this level: \
            write `nabla::lift(x)` (or `Dual::constant(x)` / `Reverse::constant(x)`)",
    note = "integer constants must be written as floats: `x * 2.0`, not `x * 2`"
)]
pub trait Operand<T>: sealed::Sealed {
    /// `left ⊕ self` for `op` one of [`Binary::Add`], [`Binary::Sub`],
    /// [`Binary::Mul`], [`Binary::Div`], [`Binary::Rem`]: what `left + self` and so
    /// on mean.
    #[doc(hidden)]
    fn combine(self, left: T, op: Binary) -> T;
}

pub(crate) mod sealed {
    /// Keeps [`Operand`](super::Operand) implemented by the library only.
    pub trait Sealed {}
}

impl<R: Real> sealed::Sealed for R {}

/// A constant. Sums and products with it are shifts and scalings, which record
/// nothing in reverse mode and leave a tangent alone or scale it (IEEE arithmetic
/// makes `x − c` exactly `x + (−c)`); a quotient lifts it.
impl<R: Real, T: Scalar<R>> Operand<T> for R {
    #[inline(always)]
    fn combine(self, left: T, op: Binary) -> T {
        match op {
            Binary::Add => left.shift(self),
            Binary::Sub => left.shift(-self),
            Binary::Mul => left.scale(self),
            _ => left.binary(op, T::from(self)),
        }
    }
}

/// A value of the level `S`, to be used as a constant of whichever level built on
/// `S` it meets: the result of [`lift`].
#[derive(Clone, Copy, Debug)]
pub struct Lifted<S>(S);

impl<S> Lifted<S> {
    /// The wrapped value, at its own level.
    pub fn into_inner(self) -> S {
        self.0
    }
}

/// Makes `value`, a number of an enclosing level of differentiation, usable as a
/// constant of whichever inner level it is combined with — by `+ − × ÷` on either
/// side, or as the argument of `powf`, `atan2`, `hypot`, `min` and `max` — without
/// naming that level's type.
///
/// Inside `grad(|y| …)` called at a `Reverse<'t, f64>` point, `y[0]` is a
/// `Reverse<'u, Reverse<'t, f64>>`, and a `Reverse<'t, f64>` captured from the outer
/// closure must become a constant of the inner level: `lift(outer)` does what
/// `Reverse::constant(outer)` does, and keeps doing it if the inner operator is
/// changed to a forward one. Lifting is what keeps the two levels' perturbations
/// apart (see `docs/library.md`, *Nesting*). In code generic over the inner type
/// `T: Lift<S>`, write `T::lift(value)`.
///
/// ```
/// use nabla::{Scalar, derivative, grad, lift};
/// // d/dx [(d/dy x·y²)(x)] = d/dx 2x² = 4x; reverse over forward and over reverse
/// let rf = grad(|x| derivative(|y| lift(x[0]) * y * y, x[0]), &[3.0]);
/// let rr = grad(|x| grad(|y| lift(x[0]) * y[0] * y[0], &[x[0]])[0], &[3.0]);
/// assert_eq!((rf, rr), (vec![12.0], vec![12.0]));
/// // and as an argument of the two-argument functions
/// let d = grad(|x| derivative(|y| y.powf(lift(x[0])), x[0]), &[2.0]);
/// // d/dx [x·x^(x−1)] = d/dx xˣ = xˣ(1 + ln x)
/// assert!((d[0] - 4.0 * (1.0 + 2.0_f64.ln())).abs() < 1e-12);
/// ```
#[inline(always)]
pub fn lift<S: Precision>(value: S) -> Lifted<S> {
    Lifted(value)
}

impl<S> sealed::Sealed for Lifted<S> {}

impl<R, S, T> Operand<T> for Lifted<S>
where
    R: Real,
    S: Scalar<R> + Precision<Real = R>,
    T: Lift<S, R>,
{
    #[inline(always)]
    fn combine(self, left: T, op: Binary) -> T {
        left.binary(op, T::lift(self.0))
    }
}

macro_rules! lifted_on_the_left {
    ($($Op:ident, $op:ident, $Variant:ident;)*) => {$(
        impl<R, S, T> $Op<T> for Lifted<S>
        where
            R: Real,
            S: Scalar<R> + Precision<Real = R>,
            T: Lift<S, R>,
        {
            type Output = T;
            #[inline(always)]
            fn $op(self, right: T) -> T {
                T::lift(self.0).binary(Binary::$Variant, right)
            }
        }
    )*};
}
lifted_on_the_left! {
    Add, add, Add;
    Sub, sub, Sub;
    Mul, mul, Mul;
    Div, div, Div;
    Rem, rem, Rem;
}

/// A constant on the left of `S`'s `+ − × ÷`, as a bound generic code can state:
/// `where f64: LeftOperand<S>` (or `f32` for a `Scalar<f32>`).
///
/// Concrete types accept `2.0 * x`. In code generic over `S: Scalar` it does not
/// compile ("cannot multiply `{float}` by `S`"): the implementations exist for
/// every scalar type, but a bound that says so cannot be part of [`Scalar`] —
/// Rust only passes on bounds whose subject is `Self` (rust-lang/rust#20671;
/// neither an associated-type detour nor the next trait solver changes this in
/// Rust 1.95). A function that wants the left-hand form states the bound itself,
/// and so does any generic function that calls it; code that calls it at a
/// concrete type (every operator's closure) needs nothing:
///
/// ```
/// use nabla::{LeftOperand, Scalar, derivative};
/// fn f<S: Scalar>(x: S) -> S
/// where
///     f64: LeftOperand<S>,
/// {
///     2.0 * x + (1.0 - x) * (1.0 / x)
/// }
/// assert_eq!(f(2.0), 3.5);
/// assert_eq!(derivative(|x| f(x), 2.0), 2.0 - 0.25);
/// ```
///
/// Without the bound, write the constant on the right (`x * 2.0`, `-x + 1.0`,
/// `x.recip()`), or lift it: `S::from(2.0) * x`.
pub trait LeftOperand<S>:
    Add<S, Output = S> + Sub<S, Output = S> + Mul<S, Output = S> + Div<S, Output = S>
{
}

impl<S, L> LeftOperand<S> for L where
    L: Add<S, Output = S> + Sub<S, Output = S> + Mul<S, Output = S> + Div<S, Output = S>
{
}

/// Implements the arithmetic, comparison, summation and formatting traits that
/// [`Scalar`](crate::Scalar) requires, for a type `$ty` over an inner scalar `S`
/// (with the lifetimes `$lt`) whose [`Scalar::apply_binary`] and [`Scalar::value`]
/// are already defined: any [`Operand`] on the right, a constant of its precision on
/// the left.
macro_rules! scalar_ops {
    ([$($lt:lifetime),*] $ty:ty) => {
        $crate::ops::scalar_ops!(@generic [$($lt,)* R: $crate::Real, S: $crate::Scalar<R> + $crate::Precision<Real = R>] $ty);
        $crate::ops::scalar_ops!(@left [$($lt),*] $ty, f64);
        $crate::ops::scalar_ops!(@left [$($lt),*] $ty, f32);
    };

    (@generic [$($generics:tt)*] $ty:ty) => {
        impl<$($generics)*> $crate::ops::sealed::Sealed for $ty {}

        /// The same level: the table's rule for the operator.
        impl<$($generics)*> $crate::Operand<$ty> for $ty {
            #[inline(always)]
            fn combine(self, left: $ty, op: $crate::Binary) -> $ty {
                $crate::Scalar::binary(left, op, self)
            }
        }

        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Add, add, AddAssign, add_assign);
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Sub, sub, SubAssign, sub_assign);
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Mul, mul, MulAssign, mul_assign);
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Div, div, DivAssign, div_assign);
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Rem, rem, RemAssign, rem_assign);

        impl<$($generics)*> ::std::ops::Neg for $ty {
            type Output = Self;
            #[inline(always)]
            fn neg(self) -> Self {
                $crate::Scalar::scale(self, -R::ONE)
            }
        }

        impl<$($generics)*> ::std::iter::Sum for $ty {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(<Self as $crate::Scalar<R>>::zero(), |acc, x| acc + x)
            }
        }

        impl<$($generics)*> ::std::iter::Product for $ty {
            fn product<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(<Self as $crate::Scalar<R>>::one(), |acc, x| acc * x)
            }
        }

        impl<$($generics)*> PartialEq for $ty {
            #[inline(always)]
            fn eq(&self, other: &Self) -> bool {
                $crate::Scalar::value(*self) == $crate::Scalar::value(*other)
            }
        }

        impl<$($generics)*> PartialEq<R> for $ty {
            #[inline(always)]
            fn eq(&self, other: &R) -> bool {
                $crate::Scalar::value(*self) == *other
            }
        }

        impl<$($generics)*> PartialOrd for $ty {
            #[inline(always)]
            fn partial_cmp(&self, other: &Self) -> Option<::std::cmp::Ordering> {
                $crate::Scalar::value(*self).partial_cmp(&$crate::Scalar::value(*other))
            }
        }

        impl<$($generics)*> PartialOrd<R> for $ty {
            #[inline(always)]
            fn partial_cmp(&self, other: &R) -> Option<::std::cmp::Ordering> {
                $crate::Scalar::value(*self).partial_cmp(other)
            }
        }

        /// A value of an enclosing level, as a constant of this one: what lets
        /// `lift(x)` be passed to `powf`, `atan2`, `hypot`, `min` and `max`.
        impl<$($generics)*, Outer: $crate::Scalar<R>> From<$crate::Lifted<Outer>> for $ty
        where
            $ty: $crate::Lift<Outer, R>,
        {
            #[inline(always)]
            fn from(value: $crate::Lifted<Outer>) -> Self {
                <$ty as $crate::Lift<Outer, R>>::lift(value.into_inner())
            }
        }

        /// Shows the primal value, like the `f64` or `f32` it stands for.
        impl<$($generics)*> ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(&$crate::Scalar::value(*self), f)
            }
        }
    };

    (@binary [$($generics:tt)*] $ty:ty, $Op:ident, $op:ident, $OpAssign:ident, $op_assign:ident) => {
        impl<$($generics)*, Right: $crate::Operand<$ty>> ::std::ops::$Op<Right> for $ty {
            type Output = Self;
            #[inline(always)]
            fn $op(self, right: Right) -> Self {
                right.combine(self, $crate::Binary::$Op)
            }
        }

        impl<$($generics)*, Right: $crate::Operand<$ty>> ::std::ops::$OpAssign<Right> for $ty {
            #[inline(always)]
            fn $op_assign(&mut self, right: Right) {
                *self = right.combine(*self, $crate::Binary::$Op);
            }
        }
    };

    // A constant of precision `$r` on the left, one impl per precision (a generic
    // one would be an impl of a foreign trait for an uncovered type parameter).
    (@left [$($lt:lifetime),*] $ty:ty, $r:ty) => {
        $crate::ops::scalar_ops!(@left_op [$($lt),*] $ty, $r, Add, add);
        $crate::ops::scalar_ops!(@left_op [$($lt),*] $ty, $r, Sub, sub);
        $crate::ops::scalar_ops!(@left_op [$($lt),*] $ty, $r, Mul, mul);
        $crate::ops::scalar_ops!(@left_op [$($lt),*] $ty, $r, Div, div);
        $crate::ops::scalar_ops!(@left_op [$($lt),*] $ty, $r, Rem, rem);
    };

    (@left_op [$($lt:lifetime),*] $ty:ty, $r:ty, $Op:ident, $op:ident) => {
        impl<$($lt,)* S: $crate::Scalar<$r>> ::std::ops::$Op<$ty> for $r {
            type Output = $ty;
            #[inline(always)]
            fn $op(self, right: $ty) -> $ty {
                $crate::ops::scalar_ops!(@constant_left $Op, self, right)
            }
        }
    };

    // A constant on the left: sums and products are shifts and scalings (c − x is
    // (−x) + c, exactly); a quotient lifts the constant.
    (@constant_left Add, $c:expr, $x:expr) => { $crate::Scalar::shift($x, $c) };
    (@constant_left Sub, $c:expr, $x:expr) => {
        $crate::Scalar::shift(-$x, $c)
    };
    (@constant_left Mul, $c:expr, $x:expr) => { $crate::Scalar::scale($x, $c) };
    (@constant_left $Op:ident, $c:expr, $x:expr) => {
        $crate::Scalar::binary(From::from($c), $crate::Binary::$Op, $x)
    };
}

pub(crate) use scalar_ops;
