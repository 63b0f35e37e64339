//! Differentiation at run time: the engine behind `diff`, `grad`,
//! `value_and_grad`, `jvp`, `vjp`, `jacobian` and `hessian`.
//!
//! * [`num`]: reals tagged with the perturbations of nested derivative
//!   levels — forward (dual numbers, Krawiec et al. Figure 3) and reverse (a
//!   flattened Delta trace evaluated by one backward sweep, §5.3) — with the
//!   derivative rules taken from the nabla library's table.
//! * [`trace`]: a reverse level's Delta trace and its backward sweep.
//! * [`structure`]: seeding inputs and reading outputs of any first-order
//!   type (§9): tuples, sums, vectors, with Int and Bool leaves carried.
//! * `operators`: the seven operators and `vjp`'s first-class pullback.
//! * `custom`: user-defined derivative rules (`custom_jvp`, `custom_vjp`).

mod custom;
pub mod num;
mod operators;
pub mod structure;
pub mod trace;

pub use num::{Level, Node, Num};
pub use operators::Pullback;
