//! Values crossing between the host and native code: a
//! [`Value`] written into the layout of [`crate::layout`] (the arguments
//! of an entry function), and the layout read back as a [`Value`] (the
//! result).

use crate::layout;
use crate::runtime;
use nabla_lang::core::typed::{Expr, ExprKind, Lit};
use nabla_lang::eval::Value;
use nabla_lang::pretty::print_type;
use nabla_lang::prim::Prim;
use nabla_lang::types::Type;
use std::rc::Rc;

/// The heap objects written for a host's arguments or a program's
/// constants: the host holds one reference to each (a vector's elements are
/// held by the vector).
#[derive(Default)]
pub(crate) struct Objects {
    objects: Vec<(*mut u8, u64)>,
}

/// Frees every object written (each exactly once, shallowly: the objects
/// they point to are in the list too). Their owner (the arguments, or the
/// compiled program whose code points to its constants) is dropped only
/// when no generated code holds a reference to any of them.
impl Drop for Objects {
    fn drop(&mut self) {
        for (p, bytes) in self.objects.drain(..) {
            runtime::free_block(p, bytes);
        }
    }
}

fn mismatch(ty: &Type, v: &Value) -> String {
    format!(
        "expected a value of type {}, found {}",
        print_type(ty),
        v.describe()
    )
}

/// Appends the scalars of `v`, of type `ty`, to `out`; vectors are
/// allocated from the system (charged to the memory budget, outside any
/// run's chunks), each with a count of one, and recorded in `heap`.
pub(crate) fn write_value(
    ty: &Type,
    v: &Value,
    out: &mut Vec<u64>,
    heap: &mut Objects,
) -> Result<(), String> {
    match (ty, v) {
        (Type::Real, Value::Real(x)) => out.push(x.to_bits()),
        (Type::Int, Value::Int(n)) => out.push(*n as u64),
        (Type::Bool, Value::Bool(b)) => out.push(u64::from(*b)),
        (Type::Unit | Type::Var(_), Value::Unit) => {}
        (Type::Tuple(ts), Value::Tuple(items)) if ts.len() == items.len() => {
            for (t, x) in ts.iter().zip(items.iter()) {
                write_value(t, x, out, heap)?;
            }
        }
        (Type::Sum(a, b), Value::Inl(x)) => {
            out.push(0);
            write_value(a, x, out, heap)?;
            out.extend(std::iter::repeat_n(0, layout::width(b)));
        }
        (Type::Sum(a, b), Value::Inr(y)) => {
            out.push(1);
            out.extend(std::iter::repeat_n(0, layout::width(a)));
            write_value(b, y, out, heap)?;
        }
        (Type::Vec(elem), Value::RealVec(xs)) if **elem == Type::Real => {
            let p = alloc_vec(1, xs.len(), heap)?;
            // SAFETY: `alloc_vec` returned room for `xs.len()` one-slot
            // elements after the header.
            unsafe {
                let data = p.add(2);
                for (k, x) in xs.iter().enumerate() {
                    *data.add(k) = x.to_bits();
                }
            }
            out.push(p as u64);
        }
        (Type::Vec(elem), Value::Vec(items)) => {
            let mut slots = Vec::with_capacity(items.len() * layout::width(elem));
            for x in items.iter() {
                write_value(elem, x, &mut slots, heap)?;
            }
            push_vector(&slots, items.len(), out, heap)?;
        }
        _ => return Err(mismatch(ty, v)),
    }
    Ok(())
}

/// A literal number, negated or not, as its slot.
fn constant_number(e: &Expr) -> Option<u64> {
    match &e.kind {
        ExprKind::Lit(Lit::Real(x)) => Some(x.to_bits()),
        ExprKind::Lit(Lit::Int(n)) => Some(*n as u64),
        ExprKind::Lit(Lit::Bool(b)) => Some(u64::from(*b)),
        ExprKind::Prim(Prim::Neg, a) => match &a[..] {
            [
                Expr {
                    kind: ExprKind::Lit(Lit::Real(x)),
                    ..
                },
            ] => Some((-x).to_bits()),
            [
                Expr {
                    kind: ExprKind::Lit(Lit::Int(n)),
                    ..
                },
            ] => n.checked_neg().map(|n| n as u64),
            _ => None,
        },
        _ => None,
    }
}

/// True if `e` is a vector literal of at least 16 numbers — literals,
/// negated literals, and tuples and vectors of them — that native code
/// makes once, when compiling, with [`write_constant`]: as code, a literal
/// of 10⁵ numbers is a function the register allocator takes gigabytes
/// over.
pub(crate) fn is_large_constant(e: &Expr) -> bool {
    const MIN_NUMBERS: usize = 16;
    fn count(e: &Expr) -> Option<usize> {
        match &e.kind {
            ExprKind::Tuple(es) | ExprKind::Vector(es) => es.iter().map(count).sum(),
            _ => constant_number(e).map(|_| 1),
        }
    }
    matches!(e.kind, ExprKind::Vector(_)) && count(e).is_some_and(|n| n >= MIN_NUMBERS)
}

/// Appends the slots of the constant `e` (a number, or a tuple or vector
/// of constants, as [`is_large_constant`] counts them) to
/// `out`, its vectors allocated as [`write_value`] allocates them.
pub(crate) fn write_constant(
    e: &Expr,
    out: &mut Vec<u64>,
    heap: &mut Objects,
) -> Result<(), String> {
    match &e.kind {
        ExprKind::Tuple(es) => {
            for x in es {
                write_constant(x, out, heap)?;
            }
        }
        ExprKind::Vector(es) => {
            let mut slots = Vec::new();
            for x in es {
                write_constant(x, &mut slots, heap)?;
            }
            push_vector(&slots, es.len(), out, heap)?;
        }
        _ => out.push(constant_number(e).ok_or("internal: not a constant")?),
    }
    Ok(())
}

/// Pushes a new vector of `len` elements whose slots, all elements of one
/// width, are `slots`.
fn push_vector(
    slots: &[u64],
    len: usize,
    out: &mut Vec<u64>,
    heap: &mut Objects,
) -> Result<(), String> {
    let width = slots.len().checked_div(len).unwrap_or(0);
    let p = alloc_vec(width, len, heap)?;
    // SAFETY: room for `len` elements of `width` slots each, which is
    // `slots.len()` (every element has the vector's element type, so the
    // same width).
    unsafe { std::ptr::copy_nonoverlapping(slots.as_ptr(), p.add(2), slots.len()) };
    out.push(p as u64);
    Ok(())
}

/// A vector object of `len` elements of `width` slots, its count 1 and
/// its length set.
fn alloc_vec(width: usize, len: usize, heap: &mut Objects) -> Result<*mut u64, String> {
    let too_big = || format!("a vector of {len} elements is too large");
    let bytes = len
        .checked_mul(width * layout::SLOT as usize)
        .and_then(|b| b.checked_add(layout::VEC_DATA as usize))
        .ok_or_else(too_big)? as u64;
    let p = runtime::system_alloc(bytes as usize).map_err(|(requested, live)| {
        nabla_lang::memory::MemoryExhausted {
            requested: requested as usize,
            live: live as usize,
            budget: nabla_lang::memory::budget(),
        }
        .to_string()
    })? as *mut u64;
    heap.objects.push((p as *mut u8, bytes));
    // SAFETY: a fresh allocation of at least the two header slots.
    unsafe {
        *p = 1;
        *p.add(1) = len as u64;
    }
    Ok(p)
}

/// The value of type `ty` whose scalars start at `slots[*at]`.
///
/// # Safety
/// The slots must hold a value of `ty` laid out as `layout` says, with
/// every vector it points to alive.
pub(crate) unsafe fn read_value(ty: &Type, slots: &[u64], at: &mut usize) -> Value {
    let mut next = || {
        let s = slots.get(*at).copied().unwrap_or(0);
        *at += 1;
        s
    };
    match ty {
        Type::Real => Value::Real(f64::from_bits(next())),
        Type::Int => Value::Int(next() as i64),
        Type::Bool => Value::Bool(next() & 0xff != 0),
        Type::Unit | Type::Var(_) | Type::Con(..) | Type::Fun(..) => Value::Unit,
        // SAFETY: the caller's guarantee; a record is laid out as its tuple.
        Type::Record(..) => unsafe { read_value(&ty.without_records(), slots, at) },
        Type::Tuple(ts) => {
            // SAFETY: the caller's guarantee, component by component.
            let items = ts
                .iter()
                .map(|t| unsafe { read_value(t, slots, at) })
                .collect();
            Value::Tuple(Rc::new(items))
        }
        Type::Sum(a, b) => {
            let right = next() & 0xff != 0;
            // Only the side taken is read: the other's slots hold no value
            // (a vector there is a null pointer).
            if right {
                *at += layout::width(a);
                // SAFETY: as above, for the side the tag names.
                Value::Inr(Rc::new(unsafe { read_value(b, slots, at) }))
            } else {
                // SAFETY: as above, for the side the tag names.
                let x = unsafe { read_value(a, slots, at) };
                *at += layout::width(b);
                Value::Inl(Rc::new(x))
            }
        }
        Type::Vec(elem) => {
            let p = next() as *const u64;
            // SAFETY: a live vector of elements of `width(elem)` slots each.
            let (len, data) = unsafe {
                (
                    layout::vector_len(p),
                    layout::vector_slots(p, layout::width(elem)),
                )
            };
            if **elem == Type::Real {
                return Value::reals(data.iter().map(|&b| f64::from_bits(b)).collect());
            }
            let mut items = Vec::with_capacity(len);
            let mut k = 0;
            for _ in 0..len {
                // SAFETY: each element is a value of `elem`.
                items.push(unsafe { read_value(elem, data, &mut k) });
            }
            Value::values(items)
        }
    }
}

/// True if `elem` is `Vec Real`: a vector of it is a matrix.
fn is_matrix(elem: &Type) -> bool {
    matches!(elem, Type::Vec(inner) if **inner == Type::Real)
}

/// True if a value of `ty` is made of reals, tuples and vectors only.
pub(crate) fn only_reals(ty: &Type) -> bool {
    match ty {
        Type::Real => true,
        Type::Tuple(ts) => ts.iter().all(only_reals),
        Type::Vec(elem) => only_reals(elem),
        _ => false,
    }
}

/// Appends the reals of the value of type `ty` (for which [`only_reals`]
/// holds) whose scalars start at `slots[*at]` to `out`, in order.
///
/// The reals are counted first and `out` grows once: a result can hold a
/// hundred megabytes of reals (BA's Jacobian), and growing by doubling
/// would copy them again and touch twice the fresh pages.
///
/// # Safety
/// As for [`read_value`].
pub(crate) unsafe fn read_reals(ty: &Type, slots: &[u64], at: &mut usize, out: &mut Vec<f64>) {
    let (mut count, mut counted_to) = (0, *at);
    // SAFETY: the caller's guarantee.
    unsafe { for_each_run(ty, slots, &mut counted_to, &mut |run| count += run.len()) };
    out.reserve(count);
    // SAFETY: the caller's guarantee.
    unsafe { for_each_run(ty, slots, at, &mut |run| out.extend_from_slice(run)) };
}

/// Calls `take` on the reals of the value of type `ty` (for which
/// [`only_reals`] holds) whose scalars start at `slots[*at]`, in order, a
/// run of consecutive reals (a vector's, or a single real) at a time.
///
/// # Safety
/// As for [`read_value`].
unsafe fn for_each_run(ty: &Type, slots: &[u64], at: &mut usize, take: &mut impl FnMut(&[f64])) {
    match ty {
        Type::Tuple(ts) => {
            for t in ts {
                // SAFETY: the caller's guarantee, component by component.
                unsafe { for_each_run(t, slots, at, take) };
            }
        }
        Type::Vec(elem) => {
            let p = slots.get(*at).copied().unwrap_or(0) as *const u64;
            *at += 1;
            if p.is_null() {
                return;
            }
            if is_matrix(elem) {
                // A matrix (a Jacobian's rows): each row taken, without
                // walking its type again per row.
                // SAFETY: a live vector of live vectors of reals.
                let rows = unsafe { layout::vector_slots(p, 1) };
                for &row in rows {
                    // SAFETY: as above.
                    take(unsafe { layout::vector_reals(row as *const u64) });
                }
                return;
            }
            if **elem == Type::Real {
                // SAFETY: a live vector of reals.
                take(unsafe { layout::vector_reals(p) });
                return;
            }
            // SAFETY: a live vector of elements of `width(elem)` slots each.
            let (len, data) = unsafe {
                (
                    layout::vector_len(p),
                    layout::vector_slots(p, layout::width(elem)),
                )
            };
            let mut k = 0;
            for _ in 0..len {
                // SAFETY: each element is a value of `elem`.
                unsafe { for_each_run(elem, data, &mut k, take) };
            }
        }
        _ => {
            take(&[f64::from_bits(slots.get(*at).copied().unwrap_or(0))]);
            *at += 1;
        }
    }
}
