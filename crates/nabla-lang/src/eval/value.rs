//! Run-time values.

use crate::core::LamId;
use crate::prim::Prim;
use std::rc::Rc;

/// A run-time value.
///
/// Vectors whose elements are all Reals are stored as a contiguous
/// `Rc<[f64]>` ([`Value::RealVec`]); other vectors as `Rc<[Value]>`.
/// Both print the same and every vector operation accepts both.
#[derive(Clone, Debug)]
pub enum Value {
    /// `()`
    Unit,
    /// A Bool.
    Bool(bool),
    /// An Int.
    Int(i64),
    /// A Real. (The differentiation operators will attach an AD annotation here.)
    Real(f64),
    /// A tuple.
    Tuple(Rc<[Value]>),
    /// `inl v`
    Inl(Rc<Value>),
    /// `inr v`
    Inr(Rc<Value>),
    /// A vector of reals, stored contiguously.
    RealVec(Rc<[f64]>),
    /// Any other vector.
    Vec(Rc<[Value]>),
    /// A closure.
    Closure(Rc<Closure>),
    /// A primitive, possibly partially applied.
    Prim(Prim, Rc<[Value]>),
}

/// A function value: code plus captured variables.
#[derive(Debug)]
pub struct Closure {
    /// The code.
    pub lam: LamId,
    /// Values of the lambda's captured variables.
    pub captures: Box<[Value]>,
}

impl Value {
    /// Builds a vector value, choosing the contiguous representation when
    /// every element is a Real.
    pub fn vector(items: Vec<Value>) -> Value {
        if !items.is_empty() && items.iter().all(|v| matches!(v, Value::Real(_))) {
            Value::RealVec(
                items
                    .iter()
                    .map(|v| if let Value::Real(x) = v { *x } else { 0.0 })
                    .collect(),
            )
        } else {
            Value::Vec(items.into())
        }
    }

    /// The length of a vector value.
    pub fn vec_len(&self) -> Option<usize> {
        match self {
            Value::RealVec(v) => Some(v.len()),
            Value::Vec(v) => Some(v.len()),
            _ => None,
        }
    }

    /// Element `i` of a vector value.
    pub fn vec_get(&self, i: usize) -> Option<Value> {
        match self {
            Value::RealVec(v) => v.get(i).map(|x| Value::Real(*x)),
            Value::Vec(v) => v.get(i).cloned(),
            _ => None,
        }
    }
}
