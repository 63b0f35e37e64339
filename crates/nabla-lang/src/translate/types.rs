//! The translations on types: Krawiec et al. Figure 3 (forward) and Figure 9
//! (reverse), Wang et al. Figure 10 (reverse in CPS), and the types of the
//! polytypic helpers of Figure 16 at a given type.
//!
//! The type checker uses these to type `initVars @(Vec Real)` and friends in
//! translated programs; the translations use them to describe what they produce.

use crate::core::named::Poly;
use crate::types::{Con, Type};

/// A type translation: what each `Real` leaf becomes, and what a function type becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// D→ (Fig. 3): `Real ↦ (Real, Real)`, `A -> B ↦ D→{A} -> D→{B}`.
    Forward,
    /// D← (Fig. 9): `Real ↦ (Real, Delta)`, `A -> B ↦ D←{A} -> M D←{B}`.
    Reverse,
    /// Wang et al. (Fig. 10): `Real ↦ (Real, Ref Real)`,
    /// `A -> B ↦ D{A} -> (D{B} -> ()) -> ()`.
    Cps,
}

impl Mode {
    /// The name `nabla ad --mode` knows it by.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Forward => "forward",
            Mode::Reverse => "reverse",
            Mode::Cps => "cps",
        }
    }
}

/// D{A} for the given mode: every type is translated homomorphically except
/// `Real` (a dual number) and, in the reverse modes, function results.
pub fn translate_type(mode: Mode, t: &Type) -> Type {
    let go = |t: &Type| translate_type(mode, t);
    match t {
        Type::Real => Type::Tuple(vec![Type::Real, tangent_type(mode)]),
        Type::Var(_) | Type::Int | Type::Bool | Type::Unit => t.clone(),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(go).collect()),
        Type::Sum(a, b) => Type::Sum(Box::new(go(a)), Box::new(go(b))),
        Type::Vec(a) => Type::Vec(Box::new(go(a))),
        Type::Fun(a, b) => match mode {
            Mode::Forward => Type::fun(go(a), go(b)),
            Mode::Reverse => Type::fun(go(a), Type::Con(Con::M, vec![go(b)])),
            Mode::Cps => Type::fun(go(a), Type::fun(Type::fun(go(b), Type::Unit), Type::Unit)),
        },
        Type::Con(..) => t.clone(),
        Type::Record(..) => translate_type(mode, &t.without_records()),
    }
}

/// What a `Real` is paired with: its tangent, its Delta, or its gradient cell.
pub fn tangent_type(mode: Mode) -> Type {
    match mode {
        Mode::Forward => Type::Real,
        Mode::Reverse => Type::Con(Con::Delta, vec![]),
        Mode::Cps => Type::Con(Con::Ref, vec![Type::Real]),
    }
}

/// The type of the helper `p @a` (Fig. 16's table), for a first-order `a`.
pub fn poly_type(p: Poly, a: &Type) -> Type {
    let fwd = || translate_type(Mode::Forward, a);
    let rev = || translate_type(Mode::Reverse, a);
    let pair = |x: Type, y: Type| Type::Tuple(vec![x, y]);
    match p {
        Poly::ZipDual => Type::fun(pair(a.clone(), a.clone()), fwd()),
        Poly::TangentOf | Poly::PrimalOf => Type::fun(fwd(), a.clone()),
        Poly::InitVars => Type::fun(pair(a.clone(), Type::Int), pair(rev(), Type::Int)),
        Poly::InitZeros => Type::fun(a.clone(), rev()),
        Poly::LookupDual => Type::fun(pair(Type::Con(Con::DeltaMap, vec![]), rev()), a.clone()),
        Poly::NewCells => Type::fun(a.clone(), translate_type(Mode::Cps, a)),
        Poly::ReadCells => Type::fun(translate_type(Mode::Cps, a), a.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretty::print_type;

    #[test]
    fn reals_become_dual_numbers_and_functions_change_only_in_reverse() {
        let f = Type::fun(
            Type::Tuple(vec![Type::Real, Type::Int]),
            Type::Vec(Box::new(Type::Real)),
        );
        let show = |m| print_type(&translate_type(m, &f));
        assert_eq!(
            show(Mode::Forward),
            "((Real, Real), Int) -> Vec (Real, Real)"
        );
        assert_eq!(
            show(Mode::Reverse),
            "((Real, Delta), Int) -> M (Vec (Real, Delta))"
        );
        assert_eq!(
            show(Mode::Cps),
            "((Real, Ref Real), Int) -> (Vec (Real, Ref Real) -> ()) -> ()"
        );
    }

    #[test]
    fn helper_types_follow_figure_16() {
        let s = Type::Tuple(vec![Type::Real, Type::Bool]);
        assert_eq!(
            print_type(&poly_type(Poly::InitVars, &s)),
            "((Real, Bool), Int) -> (((Real, Delta), Bool), Int)"
        );
        assert_eq!(
            print_type(&poly_type(Poly::LookupDual, &Type::Real)),
            "(DeltaMap, (Real, Delta)) -> Real"
        );
    }
}
