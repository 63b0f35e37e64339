//! The core IR: the small language the interpreter runs and the AD
//! translations (Krawiec et al. Fig. 3 and Fig. 9) will operate on.
//!
//! Compared to the surface syntax: patterns are gone (tuple patterns become
//! `let` + projections), operators and built-ins are [`Expr::Prim`] calls,
//! `&&`/`||` are `if`s, a curried function of n parameters is one lambda of arity n, literals carry their resolved type, and every variable is resolved
//! to where it lives at run time (a frame slot, a closure capture, the
//! enclosing recursive function itself, or a global definition), so the
//! interpreter never looks a name up.

pub mod desugar;
pub mod flow;
pub mod lower;
pub mod lower_typed;
pub mod named;
pub mod records;
pub mod typed;

pub use desugar::{DesugarError, desugar_program};

use crate::prim::Prim;
use crate::syntax::span::Span;
use crate::types::Type;
use named::Poly;

/// A literal with its resolved type (an integer literal used as a Real is a `Real` here).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    /// `()`
    Unit,
    /// `true`/`false`
    Bool(bool),
    /// An Int.
    Int(i64),
    /// A Real.
    Real(f64),
}

/// Where a variable's value lives at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarRef {
    /// Slot `i` of the current function's frame (slot 0 is the parameter).
    Local(u32),
    /// Captured variable `i` of the running closure.
    Capture(u32),
    /// The running closure itself (`let rec f` referring to `f`).
    SelfRef,
    /// Top-level definition `i`.
    Global(u32),
}

/// Index of a [`Lambda`] in [`Program::lambdas`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LamId(pub u32);

/// A function body, with its free variables made explicit.
///
/// `fun x y -> e` is one lambda of arity 2 rather than two nested lambdas:
/// semantically it is still curried (applying it to one argument gives a
/// function), but a call with all arguments needs no intermediate closure.
#[derive(Clone, Debug, PartialEq)]
pub struct Lambda {
    /// For messages: the name it was bound to, if any.
    pub name: Option<String>,
    /// Number of parameters (at least 1); they are `Local(0)`…`Local(arity - 1)`.
    pub arity: u32,
    /// How to fetch each captured value when the closure is created
    /// (relative to the frame creating it).
    pub captures: Vec<VarRef>,
    /// The body.
    pub body: Expr,
    /// Where it was written.
    pub span: Span,
}

/// A core expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A variable.
    Var(VarRef, Span),
    /// A literal.
    Lit(Lit),
    /// A closure over `Lambda`.
    Lam(LamId),
    /// Curried application `f a1 ... an` (n ≥ 1) of a function to arguments.
    App(Box<Expr>, Vec<Expr>, Span),
    /// `let` binding frame slot `slot` to the value in the body.
    Let {
        /// The frame slot the value is stored in.
        slot: u32,
        /// The bound value.
        value: Box<Expr>,
        /// The scope.
        body: Box<Expr>,
    },
    /// A tuple.
    Tuple(Vec<Expr>),
    /// Component `index` of a tuple.
    Proj(Box<Expr>, u32),
    /// Left injection.
    Inl(Box<Expr>),
    /// Right injection.
    Inr(Box<Expr>),
    /// Case analysis on a sum; each arm binds the payload to frame slot `slot`.
    Case {
        /// The scrutinee.
        scrutinee: Box<Expr>,
        /// The payload's slot (same in both arms).
        slot: u32,
        /// The `inl` arm.
        left: Box<Expr>,
        /// The `inr` arm.
        right: Box<Expr>,
    },
    /// `if`
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A saturated primitive call (arithmetic, real functions, vector operations).
    Prim(Prim, Vec<Expr>, Span),
    /// A primitive used as a first-class function value.
    PrimRef(Prim),
    /// A vector literal.
    Vector(Vec<Expr>),
    /// `trace "label" e`: the value of `e`, printed with its label on the
    /// way ([`crate::eval::tracing`]).
    Trace(String, Box<Expr>),
    /// `runDelta first m` (translated programs, Krawiec et al. Fig. 11):
    /// evaluates `first` (the first Delta id), then `m` with a fresh Delta
    /// state, and wraps the Delta of `m`'s result in the bindings it made.
    RunDelta(Box<Expr>, Box<Expr>, Span),
    /// A polytypic helper at a closed first-order type (translated programs):
    /// a function value.
    Poly(Poly, Type),
}

/// A top-level definition in core form.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalDef {
    /// Its name.
    pub name: String,
    /// Its value (evaluated on first use).
    pub body: Expr,
    /// Where it was defined.
    pub span: Span,
}

/// A desugared program.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// Top-level definitions, indexed by [`VarRef::Global`].
    pub globals: Vec<GlobalDef>,
    /// All lambdas, indexed by [`LamId`].
    pub lambdas: Vec<Lambda>,
}

impl Program {
    /// The index of the global named `name`.
    pub fn global_index(&self, name: &str) -> Option<usize> {
        self.globals.iter().position(|g| g.name == name)
    }
}
