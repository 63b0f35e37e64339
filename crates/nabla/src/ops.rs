//! Operator boilerplate shared by the derivative-carrying scalars.
//!
//! Every arithmetic operator goes through the derivative table
//! ([`Binary`](crate::Binary)); comparisons look at primal values only.

/// Implements the arithmetic, comparison, summation and formatting traits that
/// [`Scalar`](crate::Scalar) requires, for a type whose [`Scalar::apply_binary`]
/// and [`Scalar::value`] are already defined. `f64` may appear on either side.
macro_rules! scalar_ops {
    ([$($generics:tt)*] $ty:ty) => {
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Add, add, AddAssign, add_assign, Add);
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Sub, sub, SubAssign, sub_assign, Sub);
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Mul, mul, MulAssign, mul_assign, Mul);
        $crate::ops::scalar_ops!(@binary [$($generics)*] $ty, Div, div, DivAssign, div_assign, Div);

        impl<$($generics)*> ::std::ops::Neg for $ty {
            type Output = Self;
            #[inline(always)]
            fn neg(self) -> Self {
                $crate::Scalar::scale(self, -1.0)
            }
        }

        impl<$($generics)*> ::std::iter::Sum for $ty {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(<Self as $crate::Scalar>::zero(), |acc, x| acc + x)
            }
        }

        impl<$($generics)*> ::std::iter::Product for $ty {
            fn product<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(<Self as $crate::Scalar>::one(), |acc, x| acc * x)
            }
        }

        impl<$($generics)*> PartialEq for $ty {
            #[inline(always)]
            fn eq(&self, other: &Self) -> bool {
                $crate::Scalar::value(*self) == $crate::Scalar::value(*other)
            }
        }

        impl<$($generics)*> PartialEq<f64> for $ty {
            #[inline(always)]
            fn eq(&self, other: &f64) -> bool {
                $crate::Scalar::value(*self) == *other
            }
        }

        impl<$($generics)*> PartialOrd for $ty {
            #[inline(always)]
            fn partial_cmp(&self, other: &Self) -> Option<::std::cmp::Ordering> {
                $crate::Scalar::value(*self).partial_cmp(&$crate::Scalar::value(*other))
            }
        }

        impl<$($generics)*> PartialOrd<f64> for $ty {
            #[inline(always)]
            fn partial_cmp(&self, other: &f64) -> Option<::std::cmp::Ordering> {
                $crate::Scalar::value(*self).partial_cmp(other)
            }
        }

        /// Shows the primal value, like the `f64` it stands for.
        impl<$($generics)*> ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(&$crate::Scalar::value(*self), f)
            }
        }
    };

    (@binary [$($generics:tt)*] $ty:ty, $Op:ident, $op:ident, $OpAssign:ident, $op_assign:ident, $Variant:ident) => {
        impl<$($generics)*> ::std::ops::$Op for $ty {
            type Output = Self;
            #[inline(always)]
            fn $op(self, rhs: Self) -> Self {
                $crate::Scalar::binary(self, $crate::Binary::$Variant, rhs)
            }
        }

        impl<$($generics)*> ::std::ops::$Op<f64> for $ty {
            type Output = Self;
            #[inline(always)]
            fn $op(self, rhs: f64) -> Self {
                $crate::ops::scalar_ops!(@constant $Variant, self, rhs)
            }
        }

        impl<$($generics)*> ::std::ops::$Op<$ty> for f64 {
            type Output = $ty;
            #[inline(always)]
            fn $op(self, rhs: $ty) -> $ty {
                $crate::ops::scalar_ops!(@constant_left $Variant, self, rhs)
            }
        }

        impl<$($generics)*> ::std::ops::$OpAssign for $ty {
            #[inline(always)]
            fn $op_assign(&mut self, rhs: Self) {
                *self = ::std::ops::$Op::$op(*self, rhs);
            }
        }

        impl<$($generics)*> ::std::ops::$OpAssign<f64> for $ty {
            #[inline(always)]
            fn $op_assign(&mut self, rhs: f64) {
                *self = ::std::ops::$Op::$op(*self, rhs);
            }
        }
    };

    // An operation with a constant: sums and products are shifts and scalings (which
    // IEEE arithmetic makes exact: x − c is x + (−c), c − x is (−x) + c); the rest
    // lift the constant.
    (@constant Add, $x:expr, $c:expr) => { $crate::Scalar::shift($x, $c) };
    (@constant Sub, $x:expr, $c:expr) => { $crate::Scalar::shift($x, -$c) };
    (@constant Mul, $x:expr, $c:expr) => { $crate::Scalar::scale($x, $c) };
    (@constant $Variant:ident, $x:expr, $c:expr) => {
        $crate::Scalar::binary($x, $crate::Binary::$Variant, From::from($c))
    };
    (@constant_left Add, $c:expr, $x:expr) => { $crate::Scalar::shift($x, $c) };
    (@constant_left Sub, $c:expr, $x:expr) => {
        $crate::Scalar::shift($crate::Scalar::scale($x, -1.0), $c)
    };
    (@constant_left Mul, $c:expr, $x:expr) => { $crate::Scalar::scale($x, $c) };
    (@constant_left $Variant:ident, $c:expr, $x:expr) => {
        $crate::Scalar::binary(From::from($c), $crate::Binary::$Variant, $x)
    };
}

pub(crate) use scalar_ops;
