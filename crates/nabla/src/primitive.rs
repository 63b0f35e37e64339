//! The derivative table: every primitive's value and partial derivatives, stated once.
//!
//! This is the library's single home of derivative knowledge, in the spirit of
//! Krawiec et al. Figure 14: each entry gives a value column (on `f64` and `f32`,
//! the standard library's functions) and a derivative column written
//! *generically* over [`Scalar`] of either precision, so the derivative is
//! itself differentiable and every mode at every nesting level derives its rule from
//! the same entry:
//!
//! - forward mode ([`Dual`](crate::Dual)): tangent = Σ tangentᵢ · partialᵢ;
//! - reverse mode ([`Reverse`](crate::Reverse)): one trace entry with weights partialᵢ;
//! - plain `f64` and `f32`: the value column only.
//!
//! User-defined primitives implement the same two traits, [`UnaryPrimitive`] and
//! [`BinaryPrimitive`] (the value-plus-pullback of ad-delcont's `op1`/`op2`: for a
//! scalar primitive the pullback is multiplication by the partial derivative), and
//! work in every mode exactly like the built-in ones.
//!
//! # Conventions at non-differentiable points
//! Chosen so that no partial derivative is NaN where the function is defined:
//! - `abs` at 0 has derivative 0;
//! - `sqrt` at 0 has derivative +∞ (the one-sided limit); `cbrt` likewise;
//! - `powf(x, y)`: ∂/∂y at x = 0 is 0 (as in JAX); ∂/∂x with y = 0 is 0;
//!   ∂/∂y is only formed when the exponent is active, so a constant exponent with a
//!   negative base never produces the NaN of `ln x`;
//! - `powi(x, 0)` has derivative 0 everywhere, including at x = 0;
//! - `atan2` and `hypot` have partial derivatives 0 at the origin;
//! - `floor`, `ceil`, `round`, `trunc`, `signum` have derivative 0 everywhere;
//! - `x % y` (Rust's truncated remainder) has partials 1 and −trunc(x / y), also at
//!   its jumps (where x / y is an integer: the derivative of the branch taken);
//! - `acosh` at 1 has derivative +∞, like `sqrt` at 0;
//! - `min`/`max` (see [`Scalar::min`]) take the derivative of the argument they return;
//!   on a tie they return (and differentiate) the first argument.

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::{Real, Scalar};

/// The arithmetic the derivative column of the table is written in.
///
/// Every [`Scalar<R>`](Scalar) is a `Number<R>`. The trait exists so that number
/// types which are not `Copy` — such as the nabla language interpreter's dynamically
/// nested reals — evaluate the very same derivative rules instead of restating them.
/// A `Number` is cloned where a rule uses a value twice (free for `Copy` types). `R`
/// is the precision of its constants, `f64` unless said otherwise.
///
/// ```
/// use nabla::{Number, Unary};
/// // The table at a user-defined number type: here plain f64 through the blanket impl.
/// fn slope<N: Number>(x: N) -> N {
///     let v = x.clone().apply(Unary::Tanh);
///     Unary::Tanh.derivative(x, v)
/// }
/// assert_eq!(slope(0.0), 1.0);
/// ```
pub trait Number<R: Real = f64>:
    Clone
    + Neg<Output = Self>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Add<R, Output = Self>
    + Sub<R, Output = Self>
    + Mul<R, Output = Self>
    + PartialEq<R>
    + PartialOrd<R>
{
    /// The constant `c` (no perturbation).
    fn constant(c: R) -> Self;
    /// The built-in one-argument primitive `op` applied to `self`.
    fn apply(self, op: Unary) -> Self;
    /// The built-in two-argument primitive `op` applied to `self` and `other`.
    fn apply2(self, op: Binary, other: Self) -> Self;
    /// The chain rule's product `self · d` of a partial derivative and a derivative
    /// (a tangent, an adjoint or a Delta's coefficient), where an exact zero on
    /// either side gives zero even if the other side is infinite or NaN: `Scale 0 δ`
    /// and `Scale c Zero` are `Zero`. Every mode multiplies derivatives by partials
    /// with it, so the derivative along a path of operations is zero as soon as one
    /// factor on it is, whatever the order the mode multiplies them in: forward and
    /// reverse mode agree at `√x · 0` and `1 / eˣ` where plain products would give
    /// NaN in one of them. ("Structural zeros" in the library's conventions.)
    ///
    /// ```
    /// use nabla::Number;
    /// assert_eq!(0.0.chain(f64::INFINITY), 0.0);
    /// assert_eq!(f64::NAN.chain(0.0), 0.0);
    /// assert_eq!(2.0.chain(f64::INFINITY), f64::INFINITY);
    /// ```
    fn chain(self, d: Self) -> Self;
}

impl<R: Real, S: Scalar<R>> Number<R> for S {
    #[inline(always)]
    fn constant(c: R) -> S {
        S::from(c)
    }
    #[inline(always)]
    fn apply(self, op: Unary) -> S {
        self.unary(op)
    }
    #[inline(always)]
    fn apply2(self, op: Binary, other: S) -> S {
        self.binary(op, other)
    }
    #[inline(always)]
    fn chain(self, d: S) -> S {
        // Tested before multiplying: in nested modes a product of `Reverse`
        // numbers records a trace entry, which a zero factor saves.
        if self.is_zero() || d.is_zero() {
            S::zero()
        } else {
            self * d
        }
    }
}

// The table's vocabulary, so that its rules read as formulas.
#[inline(always)]
fn recip<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Recip)
}
#[inline(always)]
fn sqrt<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Sqrt)
}
#[inline(always)]
fn sin<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Sin)
}
#[inline(always)]
fn cos<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Cos)
}
#[inline(always)]
fn sinh<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Sinh)
}
#[inline(always)]
fn cosh<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Cosh)
}
#[cfg(feature = "erf")]
#[inline(always)]
fn exp<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Exp)
}
#[inline(always)]
fn ln<R: Real, N: Number<R>>(x: N) -> N {
    x.apply(Unary::Ln)
}
#[inline(always)]
fn powi<R: Real, N: Number<R>>(x: N, n: i32) -> N {
    x.apply(Unary::Powi(n))
}
#[inline(always)]
fn powf<R: Real, N: Number<R>>(x: N, y: N) -> N {
    x.apply2(Binary::Powf, y)
}

/// A user-defined differentiable function of one real.
///
/// Both methods are generic over [`Scalar`] so that the primitive works in every mode
/// and at every order: `value` computes the primal at the inner level, and `derivative`
/// is itself differentiated when derivatives are nested. Write them with
/// [`Scalar`] operations only; a derivative computed on `f64` and converted back would
/// be correct to first order only.
///
/// `R` is the precision the primitive is implemented at (`f64` unless said
/// otherwise); implement `UnaryPrimitive<R>` for every `R: Real` to have it at both.
///
/// # Example
/// The logistic function σ(x) = 1/(1+e⁻ˣ) with σ' = σ(1−σ), computed from the value:
/// ```
/// use nabla::{Scalar, UnaryPrimitive, derivative};
///
/// struct Sigmoid;
/// impl UnaryPrimitive for Sigmoid {
///     fn value<S: Scalar>(&self, x: S) -> S {
///         S::one() / ((-x).exp() + 1.0)
///     }
///     fn derivative<S: Scalar>(&self, _x: S, value: S) -> S {
///         value * (S::one() - value)
///     }
/// }
///
/// let d = derivative(|x| x.apply_unary(&Sigmoid), 0.0);
/// assert_eq!(d, 0.25);
/// // Second derivative (forward over forward) works too: σ'' (0) = 0.
/// let d2 = derivative(|x| derivative(|y| y.apply_unary(&Sigmoid), x), 0.0);
/// assert_eq!(d2, 0.0);
/// ```
pub trait UnaryPrimitive<R: Real = f64> {
    /// The value f(x).
    fn value<S: Scalar<R>>(&self, x: S) -> S;
    /// The derivative f'(x), given x and the already computed value f(x).
    fn derivative<S: Scalar<R>>(&self, x: S, value: S) -> S;

    /// True if the derivative is a polynomial in x, hence finite wherever x is. Forward
    /// mode may then multiply a zero tangent by it without checking, which keeps
    /// arithmetic-heavy code branch-free (and vectorisable). The default, `false`,
    /// is always safe.
    fn has_polynomial_derivative(&self) -> bool {
        false
    }
}

/// A user-defined differentiable function of two reals: value and both partials.
///
/// Each partial is only evaluated when the corresponding argument carries a
/// perturbation, so a partial that would be NaN for a constant argument (like
/// ∂/∂y xʸ = xʸ ln x for negative x) is never formed. `R` is the precision, as for
/// [`UnaryPrimitive`].
///
/// # Example
/// ```
/// use nabla::{BinaryPrimitive, Scalar, grad};
///
/// /// f(x, y) = x·eʸ
/// struct XExpY;
/// impl BinaryPrimitive for XExpY {
///     fn value<S: Scalar>(&self, x: S, y: S) -> S { x * y.exp() }
///     fn partial_x<S: Scalar>(&self, _x: S, y: S, _v: S) -> S { y.exp() }
///     fn partial_y<S: Scalar>(&self, _x: S, _y: S, v: S) -> S { v }
/// }
///
/// let g = grad(|p| p[0].apply_binary(p[1], &XExpY), &[2.0, 0.0]);
/// assert_eq!(g, vec![1.0, 2.0]);
/// ```
pub trait BinaryPrimitive<R: Real = f64> {
    /// The value f(x, y).
    fn value<S: Scalar<R>>(&self, x: S, y: S) -> S;
    /// ∂f/∂x at (x, y), given the value v = f(x, y).
    fn partial_x<S: Scalar<R>>(&self, x: S, y: S, v: S) -> S;
    /// ∂f/∂y at (x, y), given the value v = f(x, y).
    fn partial_y<S: Scalar<R>>(&self, x: S, y: S, v: S) -> S;

    /// True if both partials are polynomials in (x, y), hence finite wherever x and
    /// y are; see [`UnaryPrimitive::has_polynomial_derivative`]. Default `false`.
    fn has_polynomial_partials(&self) -> bool {
        false
    }

    /// True if each partial is the constant 1 or −1 (as for `+` and `−`): forward
    /// mode then adds or subtracts the tangents, with no product to test. Implies
    /// [`has_polynomial_partials`](BinaryPrimitive::has_polynomial_partials).
    /// Default `false`.
    fn has_unit_partials(&self) -> bool {
        false
    }
}

/// The built-in functions of one real.
///
/// [`Scalar`] exposes each as a method (`x.sin()`, `x.powi(3)`, …); this enum is
/// what those methods dispatch on, and what other consumers of the table (such as
/// the nabla language interpreter) name primitives by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // the variant names are the functions
pub enum Unary {
    Neg,
    Recip,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Exp,
    Ln,
    Log1p,
    ExpM1,
    /// 2ˣ
    Exp2,
    /// log₂ x
    Log2,
    /// log₁₀ x
    Log10,
    Asinh,
    Acosh,
    Atanh,
    Sqrt,
    Cbrt,
    Abs,
    Floor,
    Ceil,
    Round,
    Trunc,
    /// The sign, as `f64::signum`: 1 for +0 and positive x, −1 for −0 and negative x.
    Signum,
    /// Integer power xⁿ.
    Powi(i32),
    /// The identity with derivative 0 at every level: JAX's
    /// `stop_gradient`, for consumers that name primitives by this table
    /// (the nabla language). Rust code calls
    /// [`Scalar::stop_gradient`], which is the
    /// same function without an entry in the reverse trace.
    StopGradient,
    /// The error function erf x = 2/√π ∫₀ˣ e^(−t²) dt (computed by the `libm`
    /// crate, a port of musl's libm), derivative 2/√π · e^(−x²). With the
    /// feature `erf`, which keeps the library dependency-free without it.
    #[cfg(feature = "erf")]
    Erf,
    /// JAX's `sign`: 1 for positive x, −1 for negative x, and x itself for
    /// ±0 and NaN (so `sign 0 = 0`, unlike [`Unary::Signum`], which is ±1 at
    /// ±0); derivative 0.
    Sign,
}

impl Unary {
    /// The value column of the table: the primitive on a plain real, `f64` or `f32`
    /// (the standard library's function).
    ///
    /// ```
    /// use nabla::Unary;
    /// assert_eq!(Unary::Powi(3).eval(2.0), 8.0);
    /// assert_eq!(Unary::Powi(3).eval(2.0_f32), 8.0_f32);
    /// ```
    #[inline]
    pub fn eval<R: Real>(self, x: R) -> R {
        x.eval_unary(self)
    }

    /// The derivative column: f'(x) given x and v = f(x), at any [`Number`] type
    /// (every [`Scalar`] is one) of any precision `R`.
    ///
    /// ```
    /// use nabla::Unary;
    /// // d/dx sin x = cos x
    /// assert_eq!(Unary::Sin.derivative(0.0_f64, 0.0), 1.0);
    /// ```
    #[inline]
    pub fn derivative<R: Real, N: Number<R>>(self, x: N, v: N) -> N {
        let one = || N::constant(R::ONE);
        let zero = || N::constant(R::ZERO);
        let two = R::from_f64(2.0);
        match self {
            Unary::Neg => -one(),
            Unary::Recip => -(v.clone() * v),
            Unary::Sin => cos(x),
            Unary::Cos => -sin(x),
            Unary::Tan => v.clone() * v + R::ONE,
            Unary::Asin => recip(sqrt(one() - x.clone() * x)),
            Unary::Acos => -recip(sqrt(one() - x.clone() * x)),
            Unary::Atan => recip(x.clone() * x + R::ONE),
            Unary::Sinh => cosh(x),
            Unary::Cosh => sinh(x),
            Unary::Tanh => one() - v.clone() * v,
            Unary::Exp => v,
            Unary::Ln => recip(x),
            Unary::Log1p => recip(x + R::ONE),
            Unary::ExpM1 => v + R::ONE,
            Unary::Exp2 => v * R::from_f64(std::f64::consts::LN_2),
            Unary::Log2 => recip(x * R::from_f64(std::f64::consts::LN_2)),
            Unary::Log10 => recip(x * R::from_f64(std::f64::consts::LN_10)),
            Unary::Asinh => recip(sqrt(x.clone() * x + R::ONE)),
            // √((x − 1)(x + 1)) rather than √(x² − 1): no cancellation near 1.
            Unary::Acosh => recip(sqrt((x.clone() - R::ONE) * (x + R::ONE))),
            Unary::Atanh => recip(one() - x.clone() * x),
            Unary::Sqrt => recip(v * two),
            Unary::Cbrt => recip(v.clone() * v * R::from_f64(3.0)),
            Unary::Abs => {
                if x > R::ZERO {
                    one()
                } else if x < R::ZERO {
                    -one()
                } else {
                    zero()
                }
            }
            Unary::Floor
            | Unary::Ceil
            | Unary::Round
            | Unary::Trunc
            | Unary::Signum
            | Unary::Sign
            | Unary::StopGradient => zero(),
            #[cfg(feature = "erf")]
            Unary::Erf => exp(-(x.clone() * x)) * R::from_f64(std::f64::consts::FRAC_2_SQRT_PI),
            Unary::Powi(0) => zero(),
            Unary::Powi(n) => powi(x, n - 1) * R::from_i32(n),
        }
    }
}

impl<R: Real> UnaryPrimitive<R> for Unary {
    #[inline(always)]
    fn value<S: Scalar<R>>(&self, x: S) -> S {
        x.unary(*self)
    }
    #[inline]
    fn derivative<S: Scalar<R>>(&self, x: S, value: S) -> S {
        Unary::derivative(*self, x, value)
    }
    #[inline(always)]
    fn has_polynomial_derivative(&self) -> bool {
        matches!(self, Unary::Neg | Unary::Powi(1..))
    }
}

/// The built-in functions of two reals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binary {
    /// x + y
    Add,
    /// x − y
    Sub,
    /// x · y
    Mul,
    /// x / y
    Div,
    /// xʸ
    Powf,
    /// atan2(x, y): the angle of the point (y, x), as `f64::atan2`.
    Atan2,
    /// √(x² + y²)
    Hypot,
    /// The remainder x − trunc(x / y)·y, as Rust's `%` on floats.
    Rem,
}

impl Binary {
    /// The value column of the table: the primitive on plain reals, `f64` or `f32`.
    ///
    /// ```
    /// use nabla::Binary;
    /// assert_eq!(Binary::Hypot.eval(3.0, 4.0), 5.0);
    /// assert_eq!(Binary::Hypot.eval(3.0_f32, 4.0), 5.0_f32);
    /// ```
    #[inline]
    pub fn eval<R: Real>(self, x: R, y: R) -> R {
        x.eval_binary(self, y)
    }

    /// ∂f/∂x at (x, y) given v = f(x, y), at any [`Number`] type of any precision.
    #[inline]
    pub fn partial_x<R: Real, N: Number<R>>(self, x: N, y: N, v: N) -> N {
        let zero = || N::constant(R::ZERO);
        match self {
            Binary::Add | Binary::Sub => N::constant(R::ONE),
            Binary::Mul => y,
            Binary::Div => recip(y),
            Binary::Powf => {
                if y == R::ZERO {
                    zero()
                } else {
                    y.clone() * powf(x, y - R::ONE)
                }
            }
            Binary::Atan2 => {
                let r2 = x.clone() * x + y.clone() * y.clone();
                if r2 == R::ZERO { zero() } else { y / r2 }
            }
            Binary::Hypot => {
                if v == R::ZERO {
                    zero()
                } else {
                    x / v
                }
            }
            Binary::Rem => N::constant(R::ONE),
        }
    }

    /// ∂f/∂y at (x, y) given v = f(x, y), at any [`Number`] type of any precision.
    #[inline]
    pub fn partial_y<R: Real, N: Number<R>>(self, x: N, y: N, v: N) -> N {
        let zero = || N::constant(R::ZERO);
        match self {
            Binary::Add => N::constant(R::ONE),
            Binary::Sub => -N::constant(R::ONE),
            Binary::Mul => x,
            Binary::Div => -(v / y),
            Binary::Powf => {
                if x == R::ZERO {
                    zero()
                } else {
                    v * ln(x)
                }
            }
            Binary::Atan2 => {
                let r2 = x.clone() * x.clone() + y.clone() * y;
                if r2 == R::ZERO { zero() } else { -(x / r2) }
            }
            Binary::Hypot => {
                if v == R::ZERO {
                    zero()
                } else {
                    y / v
                }
            }
            // −trunc(x / y): piecewise constant, so its own derivative is zero.
            Binary::Rem => -(x / y).apply(Unary::Trunc),
        }
    }
}

impl<R: Real> BinaryPrimitive<R> for Binary {
    #[inline(always)]
    fn value<S: Scalar<R>>(&self, x: S, y: S) -> S {
        x.binary(*self, y)
    }
    #[inline]
    fn partial_x<S: Scalar<R>>(&self, x: S, y: S, v: S) -> S {
        Binary::partial_x(*self, x, y, v)
    }
    #[inline]
    fn partial_y<S: Scalar<R>>(&self, x: S, y: S, v: S) -> S {
        Binary::partial_y(*self, x, y, v)
    }
    #[inline(always)]
    fn has_polynomial_partials(&self) -> bool {
        matches!(self, Binary::Add | Binary::Sub | Binary::Mul)
    }
    #[inline(always)]
    fn has_unit_partials(&self) -> bool {
        matches!(self, Binary::Add | Binary::Sub)
    }
}

/// The value column, at each precision: the standard library's functions.
/// The error function of each precision, from the `libm` crate (the standard
/// library has none).
#[cfg(feature = "erf")]
trait Erf {
    fn erf(self) -> Self;
}
#[cfg(feature = "erf")]
impl Erf for f64 {
    #[inline]
    fn erf(self) -> f64 {
        libm::erf(self)
    }
}
#[cfg(feature = "erf")]
impl Erf for f32 {
    #[inline]
    fn erf(self) -> f32 {
        libm::erff(self)
    }
}

macro_rules! value_column {
    ($t:ident) => {
        impl crate::real::sealed::Sealed for $t {
            #[inline]
            fn eval_unary(self, op: Unary) -> $t {
                let x = self;
                match op {
                    Unary::Neg => -x,
                    Unary::Recip => 1.0 / x,
                    Unary::Sin => x.sin(),
                    Unary::Cos => x.cos(),
                    Unary::Tan => x.tan(),
                    Unary::Asin => x.asin(),
                    Unary::Acos => x.acos(),
                    Unary::Atan => x.atan(),
                    Unary::Sinh => x.sinh(),
                    Unary::Cosh => x.cosh(),
                    Unary::Tanh => x.tanh(),
                    Unary::Exp => x.exp(),
                    Unary::Ln => x.ln(),
                    Unary::Log1p => x.ln_1p(),
                    Unary::ExpM1 => x.exp_m1(),
                    Unary::Exp2 => x.exp2(),
                    Unary::Log2 => x.log2(),
                    Unary::Log10 => x.log10(),
                    Unary::Asinh => x.asinh(),
                    Unary::Acosh => x.acosh(),
                    Unary::Atanh => x.atanh(),
                    Unary::Sqrt => x.sqrt(),
                    Unary::Cbrt => x.cbrt(),
                    Unary::Abs => x.abs(),
                    Unary::Floor => x.floor(),
                    Unary::Ceil => x.ceil(),
                    Unary::Round => x.round(),
                    Unary::Trunc => x.trunc(),
                    Unary::Signum => x.signum(),
                    Unary::Powi(n) => x.powi(n),
                    Unary::StopGradient => x,
                    #[cfg(feature = "erf")]
                    Unary::Erf => Erf::erf(x),
                    Unary::Sign => {
                        if x == 0.0 || x.is_nan() {
                            // ±0 and NaN are their own sign, as in JAX.
                            x
                        } else {
                            x.signum()
                        }
                    }
                }
            }

            #[inline]
            fn eval_binary(self, op: Binary, y: $t) -> $t {
                let x = self;
                match op {
                    Binary::Add => x + y,
                    Binary::Sub => x - y,
                    Binary::Mul => x * y,
                    Binary::Div => x / y,
                    Binary::Powf => x.powf(y),
                    Binary::Atan2 => x.atan2(y),
                    Binary::Hypot => x.hypot(y),
                    Binary::Rem => x % y,
                }
            }
        }
    };
}

value_column!(f64);
value_column!(f32);
