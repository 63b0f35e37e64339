//! # nabla — automatic differentiation for Rust
//!
//! Write a numeric function once, generic over [`Scalar`]; evaluate it on `f64`, or
//! differentiate it with any of the operators — [`derivative`], [`grad`],
//! [`value_and_grad`], [`value_and_grad_with_aux`], [`value_and_grad_sum`],
//! [`grad_forward`], [`jvp`], [`vjp`], [`jacobian`](fn@jacobian) (and
//! [`jacobian!`] for closures), [`hessian`], [`hvp`] — which nest freely: every
//! operator can be called inside another's closure, to any depth, in any
//! combination of modes, without perturbation confusion.
//!
//! - **Forward mode** is dual numbers ([`Dual`]; Krawiec et al. 2022, Figure 3).
//! - **Reverse mode** is the Delta trace of Krawiec et al. §5.3 ([`Reverse`]): each
//!   operation appends one flattened `Let`-bound Delta to a growable array, which is
//!   evaluated backwards once. Time and memory are linear in the number of
//!   operations, however much the computation shares.
//! - **Two precisions**: every scalar type is built on `f64` or on `f32`
//!   ([`Scalar<f32>`](Scalar), [`Real`]); `S: Scalar` means `f64`.
//! - **num-traits** (feature `num-traits`): `Dual`, `Reverse` and `TapeReverse` implement
//!   `num_traits::Float` at every nesting, so code written against `Float`
//!   differentiates.
//! - **Structured parameters** ([`structured`]): the same operators for a model
//!   held in a struct, tuple, array, `Vec` or `Option` of scalars ([`Differentiable`],
//!   with `#[derive(nabla::Differentiable)]` under the feature `derive`); the
//!   gradient comes back in the model's own type.
//! - **nalgebra** (feature `nalgebra`): the forward-mode types and
//!   [`TapeReverse`] implement simba's `RealField`, so nalgebra matrix code
//!   (products, `lu`, `cholesky`, `norm`, `try_inverse`) differentiates in forward
//!   and reverse mode, nested to any order.
//! - **Two reverse-mode scalars**: [`Reverse`], whose trace is a lifetime-branded
//!   reference (misuse is a compile error), and [`TapeReverse`] (module [`tape`]),
//!   `'static + Send + Sync`, whose trace is found through a thread-local stack
//!   (misuse is a run-time panic) — the one for nalgebra and other libraries that
//!   need `'static` scalars.
//! - **One derivative table** ([`primitive`]) holds every primitive's value and
//!   partial derivatives; both modes derive their rules from it, and a user adds a
//!   primitive by giving its value and derivative ([`UnaryPrimitive`],
//!   [`BinaryPrimitive`]).
//!
//! ```
//! use nabla::{Scalar, grad, hessian};
//!
//! fn f<S: Scalar>(v: &[S]) -> S {
//!     let (x, y) = (v[0], v[1]);
//!     x * x * 2.0 + x * y * 3.0 + y * y * 4.0
//! }
//!
//! assert_eq!(f(&[3.0, 4.0]), 118.0);
//! assert_eq!(grad(|v| f(v), &[3.0, 4.0]), vec![24.0, 41.0]);
//! assert_eq!(hessian(|v| f(v), &[3.0, 4.0]), vec![vec![4.0, 3.0], vec![3.0, 8.0]]);
//! ```
//!
//! Nesting: the derivative of x ↦ x · (d/dy (x + y))(1) is 1 — the inner derivative
//! is 1 whatever x is — and a system that confused the two perturbations would say 2:
//!
//! ```
//! use nabla::{Dual, Scalar, derivative, lift};
//! let d = derivative(|x| x * derivative(|y| lift(x) + y, Dual::from(1.0)), 1.0);
//! assert_eq!(d, 1.0);
//! ```
//!
//! The outer `x` enters the inner derivative through [`lift`], as a constant of the
//! inner level; without it, `x + y` mixes two levels and does not compile.
//!
//! See `docs/library.md` in the repository for the design and the conventions at
//! non-differentiable points.

mod api;
mod forward;
#[cfg(feature = "nalgebra")]
mod nalgebra_impls;
#[cfg(feature = "num-traits")]
mod num_traits_impls;
mod ops;
mod pool;
pub mod primitive;
mod real;
mod reverse;
mod scalar;
pub mod structured;
pub mod tape;
mod trace;

#[doc(hidden)]
pub use trace::Entry;

/// The examples of `docs/library.md`, run as doctests so that the guide stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
struct LibraryGuide;

pub use api::{
    Pullback, VectorFunction, derivative, grad, grad_forward, hessian, hvp, jacobian,
    jacobian_forward, jacobian_reverse, jacobian_with, jvp, value_and_grad, value_and_grad_sum,
    value_and_grad_with_aux, vjp,
};
pub use forward::Dual;
/// `#[derive(Differentiable)]`: see [`Differentiable`](trait@Differentiable) and the
/// crate `nabla-derive` (feature `derive`).
#[cfg(feature = "derive")]
pub use nabla_derive::Differentiable;
pub use ops::{LeftOperand, Lifted, Operand, lift};
pub use primitive::{Binary, BinaryPrimitive, Number, Unary, UnaryPrimitive};
pub use real::{Precision, Real};
pub use reverse::Reverse;
pub use scalar::{Lift, Scalar};
pub use structured::Differentiable;
pub use tape::TapeReverse;
