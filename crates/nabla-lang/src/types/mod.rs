//! Types and Hindley–Milner type inference.
//!
//! * [`Type`] is the type language of LANGUAGE.md plus unification variables.
//! * [`infer`] checks a program (or a program plus one expression) and
//!   returns the inferred type of every definition together with the facts the
//!   desugarer needs ([`Typing`]): which integer literals are used as Reals,
//!   the element type of every `sum`, the operand type of every operator, and
//!   the specialised program if numeric polymorphism needed copies.
//!
//! Numeric overloading: `+ - * /`, unary `-` and comparisons work on `Int`
//! and `Real`; `==`/`!=` on every type without functions (structurally:
//! `equality`). Such operators constrain a type
//! variable to a *kind* ([`Kind::Num`] or [`Kind::Eq`]). Integer literals
//! have a fresh `Num` variable as their type, which is how `2 * x` works for
//! `x : Real`. Definitions and `let` functions are polymorphic in their
//! numeric variables (`def sq x = x * x` works at Int and at Real, each use
//! at its own type): [`check_program`] checks twice, specialising such a
//! definition into one copy per numeric type it is used at in between (see
//! `specialise`); numeric variables nothing decides default to `Int`.
//!
//! The differentiation operators constrain their input and output types to
//! first-order data ([`Kind::Data`]); this kind is generalized everywhere
//! (the numeric ones only at definitions and `let` functions), so `def g f x = grad f x` stays polymorphic.

mod equality;
pub mod infer;
mod specialise;
pub mod stdlib;

pub use infer::{
    CheckedProgram, Monomorphic, TypeError, Typing, check_program, check_program_with,
    monomorphise, monomorphise_with,
};

/// A type. Unification variables are indices into the checker's table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A type variable.
    Var(u32),
    /// `Int`
    Int,
    /// `Real`
    Real,
    /// `Bool`
    Bool,
    /// `()`
    Unit,
    /// `(A, B, ...)` (two or more components)
    Tuple(Vec<Type>),
    /// `A + B`
    Sum(Box<Type>, Box<Type>),
    /// `Vec A`
    Vec(Box<Type>),
    /// `A -> B`
    Fun(Box<Type>, Box<Type>),
    /// `{ b : B, w : W }`: the field names sorted (a record type is its set
    /// of fields, whatever order they are written in), the field types in
    /// the same order. Records are tuples after checking: see
    /// [`crate::core::records`].
    Record(std::sync::Arc<[String]>, Vec<Type>),
    /// A type that exists only in translated programs (Krawiec et al. Fig. 1,
    /// shaded): `Delta`, `DeltaMap`, `M A`, `Ref A`.
    Con(Con, Vec<Type>),
}

/// The type constructors of translated programs (see [`Type::Con`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Con {
    /// `Delta`: a symbolic linear map (Krawiec et al. Fig. 11).
    Delta,
    /// `DeltaMap`: the accumulator `eval` adds into, indexed by Delta id.
    DeltaMap,
    /// `M A`: a computation that may bind Deltas (the state monad of Fig. 9).
    M,
    /// `Ref A`: a mutable cell (the gradient cells of Wang et al. Fig. 10).
    Ref,
}

impl Con {
    /// Its name in source.
    pub fn name(self) -> &'static str {
        match self {
            Con::Delta => "Delta",
            Con::DeltaMap => "DeltaMap",
            Con::M => "M",
            Con::Ref => "Ref",
        }
    }

    /// How many type arguments it takes.
    pub fn arity(self) -> usize {
        match self {
            Con::Delta | Con::DeltaMap => 0,
            Con::M | Con::Ref => 1,
        }
    }

    /// The constructor written `name`, if any.
    pub fn from_name(name: &str) -> Option<Con> {
        [Con::Delta, Con::DeltaMap, Con::M, Con::Ref]
            .into_iter()
            .find(|c| c.name() == name)
    }
}

/// What a type variable may stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Any type.
    Any,
    /// A first-order type: no functions anywhere inside (what the
    /// differentiation operators take and return).
    Data,
    /// A type with structural equality, the operands of `==` and `!=`: no
    /// functions inside (`Int`, `Real`, `Bool`, `()`, and tuples, sums and
    /// vectors of such types; see `equality`).
    Eq,
    /// `Int` or `Real` (operands of arithmetic and ordering).
    Num,
}

impl Type {
    /// `a -> b`
    pub fn fun(a: Type, b: Type) -> Type {
        Type::Fun(Box::new(a), Box::new(b))
    }

    /// The type this one has once records are erased to tuples (see
    /// [`crate::core::records`]): a record of one field is that field's
    /// type, a larger one the tuple of its fields in name order.
    pub fn without_records(&self) -> Type {
        let each = |ts: &[Type]| ts.iter().map(Type::without_records).collect::<Vec<_>>();
        match self {
            Type::Var(_) | Type::Int | Type::Real | Type::Bool | Type::Unit => self.clone(),
            Type::Tuple(ts) => Type::Tuple(each(ts)),
            Type::Sum(a, b) => {
                Type::Sum(Box::new(a.without_records()), Box::new(b.without_records()))
            }
            Type::Vec(a) => Type::Vec(Box::new(a.without_records())),
            Type::Fun(a, b) => Type::fun(a.without_records(), b.without_records()),
            Type::Con(c, ts) => Type::Con(*c, each(ts)),
            Type::Record(_, ts) => match &each(ts)[..] {
                [one] => one.clone(),
                many => Type::Tuple(many.to_vec()),
            },
        }
    }

    /// The record type with these fields (in any order; names distinct).
    pub fn record(mut fields: Vec<(String, Type)>) -> Type {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        let (names, types): (Vec<String>, Vec<Type>) = fields.into_iter().unzip();
        Type::Record(names.into(), types)
    }
}
