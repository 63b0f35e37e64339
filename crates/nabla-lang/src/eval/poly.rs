//! The polytypic helpers of translated programs (Krawiec et al. Figure 16,
//! and `primal` of Figure 1): `zipDual @A`, `tangentOf @A`, `primalOf @A`,
//! `initVars @A`, `initZeros @A` and `lookupDual @A`, and for the CPS
//! translation (Wang et al.) `newCells @A` and `readCells @A`, each a function that
//! walks its argument guided by the closed first-order type `A` (see
//! [`crate::core::named::Poly`] for their types and meanings).
//!
//! Every walk visits the Real leaves left to right, depth first (the order
//! of `crate::ad::structure`). Where two values must have the same shape
//! (`zipDual`'s primal and tangent) a mismatch is an error naming what
//! differs, never a wrong answer.

use super::delta::{Delta, DeltaRef};
use super::value::Value;
use crate::core::named::Poly;
use crate::stack;
use crate::types::Type;
use std::rc::Rc;

/// A helper at its type: the function value `p @t`.
#[derive(Debug)]
pub struct PolyFn {
    /// Which helper.
    pub poly: Poly,
    /// The type it walks.
    pub ty: Type,
}

type PResult<T> = Result<T, String>;

/// `t` as written after `@`.
fn type_atom(t: &Type) -> String {
    let s = crate::pretty::print_type(t);
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit | Type::Tuple(_) => s,
        _ => format!("({s})"),
    }
}

fn pair(a: Value, b: Value) -> Value {
    Value::Tuple(Rc::new(vec![a, b]))
}

fn deep() -> PResult<()> {
    stack::check().map_err(|_| "stack depth exceeded".to_string())
}

fn unexpected<T>(t: &Type, v: &Value) -> PResult<T> {
    Err(format!(
        "internal error: {} where the type is {}",
        Value::describe(v),
        crate::pretty::print_type(t)
    ))
}

/// `v` (of type `t`, or its translation where leaves are `leaf`'s domain)
/// with every Real leaf replaced by `leaf(v_leaf)`.
fn map_leaves(
    t: &Type,
    v: &Value,
    leaf: &mut dyn FnMut(&Value) -> PResult<Value>,
) -> PResult<Value> {
    deep()?;
    match (t, v) {
        (Type::Real, _) => leaf(v),
        (Type::Int | Type::Bool | Type::Unit, _) => Ok(v.clone()),
        (Type::Tuple(ts), Value::Tuple(vs)) if ts.len() == vs.len() => Ok(Value::Tuple(Rc::new(
            ts.iter()
                .zip(vs.iter())
                .map(|(t, v)| map_leaves(t, v, leaf))
                .collect::<PResult<_>>()?,
        ))),
        (Type::Sum(a, _), Value::Inl(x)) => Ok(Value::Inl(Rc::new(map_leaves(a, x, leaf)?))),
        (Type::Sum(_, b), Value::Inr(x)) => Ok(Value::Inr(Rc::new(map_leaves(b, x, leaf)?))),
        (Type::Vec(a), Value::RealVec(_) | Value::Vec(_)) => Ok(Value::vector(
            v.vec_elements()
                .iter()
                .map(|x| map_leaves(a, x, leaf))
                .collect::<PResult<_>>()?,
        )),
        _ => unexpected(t, v),
    }
}

/// `zipDual`'s walk: the primal `a` and the tangent `b`, both of type `t`,
/// must have the same shape.
fn zip_leaves(t: &Type, a: &Value, b: &Value) -> PResult<Value> {
    deep()?;
    match (t, a, b) {
        (Type::Real, _, _) => Ok(pair(a.clone(), b.clone())),
        (Type::Int | Type::Bool | Type::Unit, _, _) => Ok(a.clone()),
        (Type::Tuple(ts), Value::Tuple(xs), Value::Tuple(ys))
            if ts.len() == xs.len() && ts.len() == ys.len() =>
        {
            Ok(Value::Tuple(Rc::new(
                ts.iter()
                    .zip(xs.iter().zip(ys.iter()))
                    .map(|(t, (x, y))| zip_leaves(t, x, y))
                    .collect::<PResult<_>>()?,
            )))
        }
        (Type::Sum(l, _), Value::Inl(x), Value::Inl(y)) => {
            Ok(Value::Inl(Rc::new(zip_leaves(l, x, y)?)))
        }
        (Type::Sum(_, r), Value::Inr(x), Value::Inr(y)) => {
            Ok(Value::Inr(Rc::new(zip_leaves(r, x, y)?)))
        }
        (Type::Sum(..), Value::Inl(_) | Value::Inr(_), Value::Inl(_) | Value::Inr(_)) => {
            Err(format!(
                "the tangent is {} where the primal is {}: they must use the same constructor",
                Value::describe(b),
                Value::describe(a)
            ))
        }
        (Type::Vec(e), Value::RealVec(_) | Value::Vec(_), Value::RealVec(_) | Value::Vec(_)) => {
            let (xs, ys) = (a.vec_elements(), b.vec_elements());
            if xs.len() != ys.len() {
                return Err(format!(
                    "length mismatch: the tangent has length {} where the primal has length {}",
                    ys.len(),
                    xs.len()
                ));
            }
            Ok(Value::vector(
                xs.iter()
                    .zip(&ys)
                    .map(|(x, y)| zip_leaves(e, x, y))
                    .collect::<PResult<_>>()?,
            ))
        }
        _ => unexpected(t, b),
    }
}

/// The two components of a pair.
fn components(v: &Value) -> PResult<(Value, Value)> {
    match v {
        Value::Tuple(vs) if vs.len() == 2 => Ok((vs[0].clone(), vs[1].clone())),
        _ => Err(format!(
            "internal error: {} where a pair was expected",
            Value::describe(v)
        )),
    }
}

/// Applies `poly @t` to its argument `x`.
pub fn apply(f: &PolyFn, x: &Value) -> PResult<Value> {
    let t = &f.ty;
    let r = match f.poly {
        Poly::ZipDual => {
            let (a, da) = components(x)?;
            zip_leaves(t, &a, &da)
        }
        Poly::PrimalOf => map_leaves(t, x, &mut |d| Ok(components(d)?.0)),
        Poly::TangentOf => map_leaves(t, x, &mut |d| Ok(components(d)?.1)),
        Poly::InitZeros => map_leaves(t, x, &mut |r| {
            Ok(pair(r.clone(), Value::Delta(DeltaRef::zero())))
        }),
        Poly::InitVars => {
            let (a, first) = components(x)?;
            let Value::Int(mut next) = first else {
                return Err("internal error: `initVars` without a first id".into());
            };
            let v = map_leaves(t, &a, &mut |r| {
                let id = next;
                next = next
                    .checked_add(1)
                    .ok_or_else(|| "Delta ids exhausted (integer overflow)".to_string())?;
                Ok(pair(r.clone(), Value::Delta(DeltaRef::new(Delta::Var(id)))))
            })?;
            Ok(pair(v, Value::Int(next)))
        }
        Poly::LookupDual => {
            let (m, v) = components(x)?;
            let Value::DeltaMap(m) = m else {
                return Err("internal error: `lookupDual` without a DeltaMap".into());
            };
            map_leaves(t, &v, &mut |d| match components(d)?.1 {
                Value::Delta(u) => match &*u {
                    Delta::Var(id) => Ok(Value::Real(m.lookup_or_zero(*id))),
                    _ => Err(format!(
                        "a dual number's Delta is `{}`, not a `Var`",
                        crate::pretty::print_delta(&u)
                    )),
                },
                other => Err(format!(
                    "internal error: {} where a Delta was expected",
                    Value::describe(&other)
                )),
            })
        }
        Poly::NewCells => map_leaves(t, x, &mut |r| {
            Ok(pair(
                r.clone(),
                Value::Ref(Rc::new(std::cell::RefCell::new(Value::Real(0.0)))),
            ))
        }),
        Poly::ReadCells => map_leaves(t, x, &mut |d| match components(d)?.1 {
            Value::Ref(cell) => Ok(cell.borrow().clone()),
            other => Err(format!(
                "internal error: {} where a gradient cell was expected",
                Value::describe(&other)
            )),
        }),
    };
    r.map_err(|m| format!("`{} @{}`: {m}", f.poly.name(), type_atom(t)))
}
