//! All arithmetic on run-time numbers goes through this module: plain Ints
//! and Reals here, Reals tagged by active derivatives in [`crate::ad::num`].

use super::value::Value;
use crate::ad::Num;
use crate::prim::{Prim, RealFn};
use nabla::Number;

/// Why an arithmetic operation failed.
#[derive(Clone, Debug, PartialEq)]
pub enum ArithError {
    /// Integer division by zero.
    DivByZero,
    /// Int overflow.
    Overflow,
    /// Operand types did not match (cannot happen in well-typed programs).
    BadOperands,
    /// `to_int` of NaN or of a real outside the range of Int.
    NotAnInt(f64),
}

impl ArithError {
    /// The run-time error's message, for primitive `p` (native code reports
    /// its arithmetic errors with these too).
    pub fn message(&self, p: Prim) -> String {
        match self {
            ArithError::DivByZero => "integer division by zero".to_string(),
            ArithError::Overflow => format!("integer overflow in `{}`", p.info().name),
            ArithError::BadOperands => {
                format!("internal error: bad operands for `{}`", p.info().name)
            }
            ArithError::NotAnInt(x) => format!(
                "`to_int` of {}: not a real within the range of Int",
                crate::pretty::format_real(*x)
            ),
        }
    }
}

/// `to_int x`: `x` truncated toward zero, if that is an Int (`x` is not NaN
/// and -2⁶³ ≤ x < 2⁶³).
#[inline]
pub fn to_int(x: f64) -> Result<i64, ArithError> {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        Ok(x as i64)
    } else {
        Err(ArithError::NotAnInt(x))
    }
}

/// `+ - * /` and the other binary numeric primitives on two values.
#[inline]
pub fn binary(p: Prim, a: &Value, b: &Value) -> Result<Value, ArithError> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => int_binary(p, *x, *y),
        (Value::Real(x), Value::Real(y)) => real_binary(p, *x, *y),
        (Value::Bool(x), Value::Bool(y)) => match p {
            Prim::Eq => Ok(Value::Bool(x == y)),
            Prim::Ne => Ok(Value::Bool(x != y)),
            _ => Err(ArithError::BadOperands),
        },
        _ => match (a.as_num(), b.as_num()) {
            (Some(x), Some(y)) => tagged_binary(p, x, y),
            _ => Err(ArithError::BadOperands),
        },
    }
}

/// A real binary primitive on two Reals of which at least one is tagged
/// by a derivative level; `None` for any other primitive or operands.
#[inline]
pub fn tagged_fast(p: Prim, a: &Value, b: &Value) -> Option<Value> {
    if !(a.is_tagged() || b.is_tagged()) {
        return None;
    }
    // The common case first: one reverse level over plain reals.
    // (`as_num` copies these two forms without touching a reference count.)
    let plain = |v: &Value| match v {
        Value::Real(_) | Value::Reverse { .. } => v.as_num()?.plain(),
        _ => None,
    };
    if let (Some(RealFn::Binary(op)), Some(x), Some(y)) = (p.info().real, plain(a), plain(b))
        && let Some(r) = crate::ad::num::reverse_on_plain(op, x, y)
    {
        return Some(Value::from(Num::from(r)));
    }
    tagged_binary(p, a.as_num()?, b.as_num()?).ok()
}

/// A binary primitive on Reals of which at least one is tagged.
fn tagged_binary(p: Prim, x: Num, y: Num) -> Result<Value, ArithError> {
    Ok(match p {
        // Comparisons look at plain values only.
        Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne => {
            Value::Bool(compare(p, x.value(), y.value()))
        }
        Prim::Chain => Value::from(x.chain(y)),
        _ => Value::from(match p.info().real {
            Some(RealFn::Binary(op)) => Num::binary(op, x, y),
            // `min`/`max` return the selected argument itself, tags and all.
            Some(RealFn::Select(s)) => {
                if s.takes_second(x.value(), y.value()) {
                    y
                } else {
                    x
                }
            }
            _ => return Err(ArithError::BadOperands),
        }),
    })
}

/// The common Int operations that cannot fail, without any error plumbing.
#[inline(always)]
pub fn int_fast(p: Prim, x: i64, y: i64) -> Option<Value> {
    Some(match p {
        Prim::Add => Value::Int(x.checked_add(y)?),
        Prim::Sub => Value::Int(x.checked_sub(y)?),
        Prim::Mul => Value::Int(x.checked_mul(y)?),
        Prim::Lt => Value::Bool(x < y),
        Prim::Le => Value::Bool(x <= y),
        Prim::Gt => Value::Bool(x > y),
        Prim::Ge => Value::Bool(x >= y),
        Prim::Eq => Value::Bool(x == y),
        Prim::Ne => Value::Bool(x != y),
        _ => return None,
    })
}

/// `+ - *` on Ints when they cannot fail (the arithmetic of [`int_fast`]),
/// as a plain number.
#[inline(always)]
pub fn int_arith(p: Prim, a: i64, b: i64) -> Option<i64> {
    match p {
        Prim::Add => a.checked_add(b),
        Prim::Sub => a.checked_sub(b),
        Prim::Mul => a.checked_mul(b),
        _ => None,
    }
}

/// `+ - * /` on Reals (the arithmetic of [`real_fast`]), as a plain number.
#[inline(always)]
pub fn real_arith(p: Prim, a: f64, b: f64) -> Option<f64> {
    match p {
        Prim::Add => Some(a + b),
        Prim::Sub => Some(a - b),
        Prim::Mul => Some(a * b),
        Prim::Div => Some(a / b),
        _ => None,
    }
}

/// A comparison primitive on two numbers of the same type.
#[inline(always)]
pub fn compare<T: PartialOrd>(p: Prim, x: T, y: T) -> bool {
    match p {
        Prim::Lt => x < y,
        Prim::Le => x <= y,
        Prim::Gt => x > y,
        Prim::Ge => x >= y,
        Prim::Eq => x == y,
        _ => x != y,
    }
}

/// The Real operations of the hot loop, without any error plumbing.
#[inline(always)]
pub fn real_fast(p: Prim, x: f64, y: f64) -> Option<Value> {
    Some(match p {
        Prim::Add => Value::Real(x + y),
        Prim::Sub => Value::Real(x - y),
        Prim::Mul => Value::Real(x * y),
        Prim::Div => Value::Real(x / y),
        Prim::Lt => Value::Bool(x < y),
        Prim::Le => Value::Bool(x <= y),
        Prim::Gt => Value::Bool(x > y),
        Prim::Ge => Value::Bool(x >= y),
        _ => return None,
    })
}

#[inline]
fn int_binary(p: Prim, x: i64, y: i64) -> Result<Value, ArithError> {
    Ok(match p {
        Prim::Add => Value::Int(x.checked_add(y).ok_or(ArithError::Overflow)?),
        Prim::Sub => Value::Int(x.checked_sub(y).ok_or(ArithError::Overflow)?),
        Prim::Mul => Value::Int(x.checked_mul(y).ok_or(ArithError::Overflow)?),
        Prim::Div => {
            if y == 0 {
                return Err(ArithError::DivByZero);
            }
            Value::Int(x.checked_div(y).ok_or(ArithError::Overflow)?)
        }
        Prim::Rem => {
            if y == 0 {
                return Err(ArithError::DivByZero);
            }
            Value::Int(x.checked_rem(y).ok_or(ArithError::Overflow)?)
        }
        Prim::Lt => Value::Bool(x < y),
        Prim::Le => Value::Bool(x <= y),
        Prim::Gt => Value::Bool(x > y),
        Prim::Ge => Value::Bool(x >= y),
        Prim::Eq => Value::Bool(x == y),
        Prim::Ne => Value::Bool(x != y),
        _ => return Err(ArithError::BadOperands),
    })
}

#[inline]
fn real_binary(p: Prim, x: f64, y: f64) -> Result<Value, ArithError> {
    Ok(match p {
        Prim::Add => Value::Real(x + y),
        Prim::Sub => Value::Real(x - y),
        Prim::Mul => Value::Real(x * y),
        Prim::Div => Value::Real(x / y),
        Prim::Lt => Value::Bool(x < y),
        Prim::Le => Value::Bool(x <= y),
        Prim::Gt => Value::Bool(x > y),
        Prim::Ge => Value::Bool(x >= y),
        Prim::Eq => Value::Bool(x == y),
        Prim::Ne => Value::Bool(x != y),
        Prim::Chain => Value::Real(x.chain(y)),
        _ => match p.info().real {
            Some(RealFn::Binary(op)) => Value::Real(op.eval(x, y)),
            Some(RealFn::Select(s)) => Value::Real(if s.takes_second(x, y) { y } else { x }),
            _ => return Err(ArithError::BadOperands),
        },
    })
}

/// Unary numeric primitives (`-`, `sin`, …, `real`).
#[inline]
pub fn unary(p: Prim, a: &Value) -> Result<Value, ArithError> {
    match (p, a) {
        (Prim::Neg, Value::Int(x)) => Ok(Value::Int(x.checked_neg().ok_or(ArithError::Overflow)?)),
        (Prim::ToReal, Value::Int(x)) => Ok(Value::Real(*x as f64)),
        // The primal of a real that carries derivatives: an Int has none.
        (Prim::ToInt, a) => match a.as_num() {
            Some(x) => Ok(Value::Int(to_int(x.value())?)),
            None => Err(ArithError::BadOperands),
        },
        (_, Value::Real(x)) => match p.info().real {
            Some(RealFn::Unary(op)) => Ok(Value::Real(op.eval(*x))),
            _ => Err(ArithError::BadOperands),
        },
        (_, a) => match (p.info().real, a.as_num()) {
            (Some(RealFn::Unary(op)), Some(x)) => Ok(Value::from(Num::unary(op, x))),
            _ => Err(ArithError::BadOperands),
        },
    }
}

/// Sum of a contiguous real vector, in the language's lanes
/// ([`crate::prim::sum_in_lanes`]): `sum [-0.0]` is -0.0, but the sum of
/// no reals is 0.0 — the same however the vector is stored.
pub fn sum_reals(xs: &[f64]) -> Value {
    Value::Real(if xs.is_empty() {
        0.0
    } else {
        crate::prim::sum_reals_in_lanes(xs)
    })
}
