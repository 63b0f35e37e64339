//! Run-time values.

use super::delta::{DeltaMap, DeltaRef};
use super::poly::PolyFn;
use crate::ad::{Level, Node, Pullback};
use crate::core::LamId;
use crate::memory::{Counted, Footprint};
use crate::prim::Prim;
use std::cell::RefCell;
use std::rc::Rc;

/// A run-time value.
///
/// Vectors whose elements are all Reals are stored as a contiguous
/// `Vec<f64>` ([`Value::RealVec`]); other vectors as a `Vec<Value>`.
/// Every variant fits in 24 bytes, so values move in three registers.
/// Both print the same and every vector operation accepts both.
#[derive(Debug)]
pub enum Value {
    /// `()`
    Unit,
    /// A Bool.
    Bool(bool),
    /// An Int.
    Int(i64),
    /// A Real that no active derivative perturbs.
    Real(f64),
    /// A Real tagged by an active reverse derivative level, with a plain
    /// primal and coefficient (the common case of [`crate::ad::Num`], unboxed).
    Reverse {
        /// The primal value.
        primal: f64,
        /// The coefficient of its Delta, `Scale coefficient (Var id)`.
        coefficient: f64,
        /// The level.
        level: Level,
        /// Its Delta in the level's trace.
        id: u32,
    },
    /// Any other Real tagged by an active derivative level.
    Tagged(Rc<Node>),
    /// A tuple.
    Tuple(Rc<Vec<Value>>),
    /// `inl v`
    Inl(Rc<Value>),
    /// `inr v`
    Inr(Rc<Value>),
    /// A vector of reals, stored contiguously.
    RealVec(Rc<Reals>),
    /// Any other vector.
    Vec(Rc<Values>),
    /// A closure.
    Closure(Rc<Closure>),
    /// A closure applied to fewer arguments than its arity.
    Partial(Rc<Partial>),
    /// A primitive with the arguments it has been applied to so far (if any).
    Prim(Prim, Option<Rc<Vec<Value>>>),
    /// The pullback returned by `vjp`.
    Pullback(Rc<Pullback>),
    /// A `Delta` (translated programs; see [`super::delta`]).
    Delta(DeltaRef),
    /// A `DeltaMap` (translated programs).
    DeltaMap(Rc<DeltaMap>),
    /// A reference cell `Ref A` (translated programs).
    Ref(Rc<RefCell<Value>>),
    /// A polytypic helper at its type, `initVars @(Vec Real)` (translated programs).
    Poly(Rc<PolyFn>),
}

impl Clone for Value {
    // Hand-written so that the scalar cases inline into the interpreter loop.
    #[inline(always)]
    fn clone(&self) -> Value {
        match self {
            Value::Unit => Value::Unit,
            Value::Bool(b) => Value::Bool(*b),
            Value::Int(n) => Value::Int(*n),
            Value::Real(x) => Value::Real(*x),
            Value::Reverse {
                primal,
                coefficient,
                level,
                id,
            } => Value::Reverse {
                primal: *primal,
                coefficient: *coefficient,
                level: *level,
                id: *id,
            },
            Value::Tagged(n) => Value::Tagged(Rc::clone(n)),
            Value::Tuple(v) => Value::Tuple(Rc::clone(v)),
            Value::Inl(v) => Value::Inl(Rc::clone(v)),
            Value::Inr(v) => Value::Inr(Rc::clone(v)),
            Value::RealVec(v) => Value::RealVec(Rc::clone(v)),
            Value::Vec(v) => Value::Vec(Rc::clone(v)),
            Value::Closure(c) => Value::Closure(Rc::clone(c)),
            Value::Partial(p) => Value::Partial(Rc::clone(p)),
            Value::Prim(p, a) => Value::Prim(*p, a.clone()),
            Value::Pullback(p) => Value::Pullback(Rc::clone(p)),
            Value::Delta(d) => Value::Delta(d.clone()),
            Value::DeltaMap(m) => Value::DeltaMap(Rc::clone(m)),
            Value::Ref(r) => Value::Ref(Rc::clone(r)),
            Value::Poly(p) => Value::Poly(Rc::clone(p)),
        }
    }
}

/// The elements of a [`Value::RealVec`], charged to the memory budget.
pub type Reals = Counted<Vec<f64>>;

/// The elements of a [`Value::Vec`], charged to the memory budget.
pub type Values = Counted<Vec<Value>>;

/// A vector of values holds its buffer and, counted with it, the boxes of
/// the tuples, injections and closures it holds (approximately: a box
/// shared by two vectors counts twice, nested vectors count themselves).
impl Footprint for Vec<Value> {
    fn footprint(&self) -> usize {
        let boxes: usize = self.iter().map(Value::box_bytes).sum();
        self.capacity() * size_of::<Value>() + boxes
    }
}

/// A function value: code plus captured variables.
#[derive(Debug)]
pub struct Closure {
    /// The code.
    pub lam: LamId,
    /// Number of parameters of the code.
    pub arity: u32,
    /// Values of the lambda's captured variables.
    pub captures: Box<[Value]>,
}

/// A closure together with its first few arguments.
#[derive(Debug)]
pub struct Partial {
    /// The function.
    pub closure: Rc<Closure>,
    /// The arguments so far (fewer than its arity).
    pub args: Vec<Value>,
}

impl Value {
    /// What kind of value this is, for error messages ("a tuple", "an Int", …).
    pub fn describe(&self) -> &'static str {
        match self {
            Value::Unit => "()",
            Value::Bool(_) => "a Bool",
            Value::Int(_) => "an Int",
            Value::Real(_) | Value::Reverse { .. } | Value::Tagged(_) => "a Real",
            Value::Tuple(_) => "a tuple",
            Value::Inl(_) => "an `inl`",
            Value::Inr(_) => "an `inr`",
            Value::RealVec(_) | Value::Vec(_) => "a vector",
            Value::Delta(_) => "a Delta",
            Value::DeltaMap(_) => "a DeltaMap",
            Value::Ref(_) => "a reference cell",
            _ => "a function",
        }
    }

    /// Builds a vector value, choosing the contiguous representation when
    /// every element is a Real.
    pub fn vector(items: Vec<Value>) -> Value {
        if !items.is_empty() && items.iter().all(|v| matches!(v, Value::Real(_))) {
            Value::reals(
                items
                    .iter()
                    .map(|v| if let Value::Real(x) = v { *x } else { 0.0 })
                    .collect(),
            )
        } else {
            Value::values(items)
        }
    }

    /// A vector of reals (contiguous), charged to the memory budget.
    pub fn reals(xs: Vec<f64>) -> Value {
        Value::RealVec(Rc::new(Counted::new(xs)))
    }

    /// A vector in the general representation, charged to the memory budget.
    pub fn values(items: Vec<Value>) -> Value {
        Value::Vec(Rc::new(Counted::new(items)))
    }

    /// The heap bytes of this value's own box (not what the box refers to),
    /// for a vector's [`Footprint`]: what a tuple, injection or closure
    /// element adds to a vector of `n` of them.
    pub(crate) fn box_bytes(&self) -> usize {
        // An `Rc` box holds two counts besides its contents.
        const RC: usize = 2 * size_of::<usize>();
        match self {
            Value::Tuple(vs) => RC + size_of::<Vec<Value>>() + vs.capacity() * size_of::<Value>(),
            Value::Inl(_) | Value::Inr(_) => RC + size_of::<Value>(),
            Value::Closure(c) => RC + size_of::<Closure>() + c.captures.len() * size_of::<Value>(),
            Value::Tagged(_) | Value::Partial(_) | Value::Delta(_) | Value::Ref(_) => 4 * RC,
            _ => 0,
        }
    }

    /// True for the variants that own no memory (no destructor to run).
    #[inline(always)]
    pub fn is_scalar(&self) -> bool {
        matches!(
            self,
            Value::Unit | Value::Bool(_) | Value::Int(_) | Value::Real(_) | Value::Reverse { .. }
        )
    }

    /// True for a Real tagged by an active derivative level.
    #[inline]
    pub fn is_tagged(&self) -> bool {
        matches!(self, Value::Reverse { .. } | Value::Tagged(_))
    }

    /// The length of a vector value.
    pub fn vec_len(&self) -> Option<usize> {
        match self {
            Value::RealVec(v) => Some(v.len()),
            Value::Vec(v) => Some(v.len()),
            _ => None,
        }
    }

    /// The elements of a vector value (reals as `Value::Real`); empty for
    /// any other value.
    pub fn vec_elements(&self) -> Vec<Value> {
        match self {
            Value::RealVec(xs) => xs.iter().map(|x| Value::Real(*x)).collect(),
            Value::Vec(xs) => xs.to_vec(),
            _ => Vec::new(),
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

/// Values must stay three machine words (a reverse real's primal,
/// coefficient and Delta): the interpreter moves them a lot.
const _: () = assert!(std::mem::size_of::<Value>() == 24);
