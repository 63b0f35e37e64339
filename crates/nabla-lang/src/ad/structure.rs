//! Derivatives of functions between first-order data (Krawiec et al. §9).
//!
//! An operator's input and output may be any first-order value: reals, Ints,
//! Bools, `()`, tuples, sums and vectors, nested to any depth. A tangent or
//! cotangent has the shape of its primal: its real leaves are the derivative,
//! its Int and Bool leaves are carried unchanged, a sum keeps the primal's
//! constructor and a vector its length. Every walk here visits the real
//! leaves in the same order (left to right, depth first), which is how the
//! i-th input of a reverse level is matched with the i-th leaf of the input.

use super::num::{LevelGuard, Num, Perturbation};
use crate::eval::Value;
use crate::prim::Role;
use crate::stack;
use nabla::Number;
use std::rc::Rc;

/// A mismatch between a value and the (co)tangent given for it, or data
/// that cannot be differentiated.
pub type ShapeResult<T> = Result<T, String>;

fn deep() -> ShapeResult<()> {
    stack::check().map_err(|_| "stack depth exceeded".to_string())
}

impl Value {
    /// This value as a real, if it is one.
    pub fn as_num(&self) -> Option<Num> {
        match self {
            Value::Real(x) => Some(Num::Real(*x)),
            Value::Reverse {
                primal,
                coefficient,
                level,
                id,
            } => Some(Num::Reverse {
                primal: *primal,
                coefficient: *coefficient,
                level: *level,
                id: *id,
            }),
            Value::Tagged(n) => Some(Num::Tagged(n.clone())),
            _ => None,
        }
    }
}

impl From<Num> for Value {
    fn from(n: Num) -> Value {
        match n {
            Num::Real(x) => Value::Real(x),
            Num::Reverse {
                primal,
                coefficient,
                level,
                id,
            } => Value::Reverse {
                primal,
                coefficient,
                level,
                id,
            },
            Num::Tagged(n) => Value::Tagged(n),
        }
    }
}

/// Rebuilds `v` (a tuple, sum or vector) with its children mapped by `f`.
fn map_children(v: &Value, mut f: impl FnMut(&Value) -> ShapeResult<Value>) -> ShapeResult<Value> {
    Ok(match v {
        Value::Tuple(xs) => Value::Tuple(Rc::new(xs.iter().map(f).collect::<ShapeResult<_>>()?)),
        Value::Inl(x) => Value::Inl(Rc::new(f(x)?)),
        Value::Inr(x) => Value::Inr(Rc::new(f(x)?)),
        Value::RealVec(_) | Value::Vec(_) => Value::vector(
            v.vec_elements()
                .iter()
                .map(f)
                .collect::<ShapeResult<Vec<_>>>()?,
        ),
        Value::Unit | Value::Bool(_) | Value::Int(_) => v.clone(),
        _ => {
            return Err(format!(
                "cannot differentiate with respect to {}",
                Value::describe(v)
            ));
        }
    })
}

/// `x` with every real leaf replaced by `leaf(real)`.
pub fn map_reals(x: &Value, leaf: &mut impl FnMut(Num) -> Num) -> ShapeResult<Value> {
    deep()?;
    match x.as_num() {
        Some(n) => Ok(Value::from(leaf(n))),
        None => map_children(x, |c| map_reals(c, leaf)),
    }
}

/// `x` with its i-th real leaf (in leaf order) replaced by the value
/// `leaf(i, real)`, of any shape: how a Jacobian puts a gradient in place of
/// each output real.
pub fn replace_reals(
    x: &Value,
    leaf: &mut impl FnMut(usize, Num) -> ShapeResult<Value>,
) -> ShapeResult<Value> {
    fn go(
        x: &Value,
        next: &mut usize,
        leaf: &mut impl FnMut(usize, Num) -> ShapeResult<Value>,
    ) -> ShapeResult<Value> {
        deep()?;
        match x.as_num() {
            Some(n) => {
                *next += 1;
                leaf(*next - 1, n)
            }
            None => map_children(x, |c| go(c, next, leaf)),
        }
    }
    go(x, &mut 0, leaf)
}

/// The real leaves of `x`, in leaf order.
pub fn real_leaves(x: &Value) -> ShapeResult<Vec<Value>> {
    let mut out = Vec::new();
    map_reals(x, &mut |n| {
        out.push(Value::from(n.clone()));
        n
    })?;
    Ok(out)
}

/// `x`'s shape with real leaf `i` 1 and the others 0 (Int and Bool leaves
/// carried): the i-th basis tangent or cotangent of `x`.
pub fn one_hot(x: &Value, i: usize) -> ShapeResult<Value> {
    replace_reals(x, &mut |k, _| {
        Ok(Value::Real(if k == i { 1.0 } else { 0.0 }))
    })
}

/// The input of reverse level `g`: every real leaf of `x` becomes a fresh
/// input Delta (ids 0, 1, … in leaf order).
pub fn seed_inputs(x: &Value, g: &LevelGuard) -> ShapeResult<Value> {
    map_reals(x, &mut |n| g.input(n))
}

/// The input of forward level `g`: each real leaf of `x` paired with the
/// corresponding leaf of the tangent `dx`, which must have the same shape.
pub fn seed_tangents(x: &Value, dx: &Value, g: &LevelGuard) -> ShapeResult<Value> {
    zip_shapes(x, dx, Role::Tangent, &mut |a, b| Ok(g.dual(a, b)))
}

/// Walks `a` and `b` (same shape required: same sum constructors, same
/// vector lengths), combining real leaves with `leaf`; other leaves come
/// from `a`.
pub(crate) fn zip_shapes(
    a: &Value,
    b: &Value,
    role: Role,
    leaf: &mut impl FnMut(Num, Num) -> ShapeResult<Num>,
) -> ShapeResult<Value> {
    deep()?;
    let (primal, other) = role.names();
    if let Some(x) = a.as_num() {
        let Some(y) = b.as_num() else {
            return Err(format!(
                "{other} has {} where {primal} has a Real",
                Value::describe(b)
            ));
        };
        return Ok(Value::from(leaf(x, y)?));
    }
    match (a, b) {
        (Value::Tuple(xs), Value::Tuple(ys)) if xs.len() == ys.len() => Ok(Value::Tuple(Rc::new(
            xs.iter()
                .zip(ys.iter())
                .map(|(x, y)| zip_shapes(x, y, role, leaf))
                .collect::<ShapeResult<_>>()?,
        ))),
        (Value::Inl(x), Value::Inl(y)) => Ok(Value::Inl(Rc::new(zip_shapes(x, y, role, leaf)?))),
        (Value::Inr(x), Value::Inr(y)) => Ok(Value::Inr(Rc::new(zip_shapes(x, y, role, leaf)?))),
        (Value::Inl(_), Value::Inr(_)) | (Value::Inr(_), Value::Inl(_)) => Err(format!(
            "{other} is {} where {primal} is {}: they must use the same constructor",
            Value::describe(b),
            Value::describe(a)
        )),
        (Value::RealVec(_) | Value::Vec(_), Value::RealVec(_) | Value::Vec(_)) => {
            let (xs, ys) = (a.vec_elements(), b.vec_elements());
            if xs.len() != ys.len() {
                return Err(format!(
                    "length mismatch: {other} has length {} where {primal} has length {}",
                    ys.len(),
                    xs.len()
                ));
            }
            Ok(Value::vector(
                xs.iter()
                    .zip(&ys)
                    .map(|(x, y)| zip_shapes(x, y, role, leaf))
                    .collect::<ShapeResult<_>>()?,
            ))
        }
        (Value::Unit | Value::Bool(_) | Value::Int(_), _) => Ok(a.clone()),
        _ => Err(format!(
            "shape mismatch: {other} is {} where {primal} is {}",
            Value::describe(b),
            Value::describe(a)
        )),
    }
}

/// Splits the output `y` of forward level `level` into its primal and its
/// tangent (the constant 0 where a leaf does not depend on the input).
pub fn split_forward(y: &Value, level: u16) -> ShapeResult<(Value, Value)> {
    let primal = map_reals(y, &mut |n| n.split(level).0)?;
    let tangent = map_reals(y, &mut |n| match n.split(level).1 {
        Some(Perturbation::Tangent(t)) => t,
        _ => Num::ZERO,
    })?;
    Ok((primal, tangent))
}

/// The Delta `Scale coefficient (Var id)` of an output real of a reverse
/// level, as (coefficient, id).
pub type OutputDelta = (Num, u32);

/// The seed of the backward pass that output Delta `(c, id)` with
/// cotangent `ct` gives: `(id, c · ct)` (as `Number::chain`: a zero factor
/// gives 0, also against an infinite one).
pub fn seed((c, id): OutputDelta, ct: Num) -> (u32, Num) {
    (id, c.chain(ct))
}

/// Splits the output `y` of reverse level `level` into its primal and the
/// Delta of each real leaf (`None` for a leaf that does not depend on the
/// input), in leaf order.
pub fn split_reverse(y: &Value, level: u16) -> ShapeResult<(Value, Vec<Option<OutputDelta>>)> {
    let mut deltas = Vec::new();
    let primal = map_reals(y, &mut |n| {
        let (p, d) = n.split(level);
        deltas.push(match d {
            Some(Perturbation::Delta { coefficient, id }) => Some((coefficient, id)),
            _ => None,
        });
        p
    })?;
    Ok((primal, deltas))
}

/// Pairs the cotangent `ct` (shaped like the primal output `y`) with the
/// output Deltas: the seeds of the backward pass.
pub fn seeds(
    y: &Value,
    ct: &Value,
    deltas: &[Option<OutputDelta>],
) -> ShapeResult<Vec<(u32, Num)>> {
    let mut out = Vec::new();
    let mut next = deltas.iter();
    zip_shapes(y, ct, Role::Cotangent, &mut |_, c| {
        if let Some(Some(delta)) = next.next() {
            out.push(seed(delta.clone(), c));
        }
        Ok(Num::ZERO)
    })?;
    Ok(out)
}

/// The gradient: `x`'s shape with its i-th real leaf replaced by
/// `adjoints[i]` (Int and Bool leaves carried unchanged).
pub fn gradient(x: &Value, adjoints: &[Num]) -> ShapeResult<Value> {
    let mut next = adjoints.iter();
    map_reals(x, &mut |_| next.next().cloned().unwrap_or(Num::ZERO))
}
