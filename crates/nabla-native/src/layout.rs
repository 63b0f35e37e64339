//! How values of each type are represented in native code.
//!
//! * A value is a list of machine scalars (its *flattening*): `Real` one
//!   f64, `Int` one i64, `Bool` one i8, `()` none, a tuple its components'
//!   one after the other, a sum `A + B` an i8 tag (0 `inl`, 1 `inr`) then
//!   A's scalars then B's (the side not taken is all zeros), a vector or a
//!   function one pointer. Tuples and sums never live on the heap.
//! * In memory (vector elements, closure environments, global slots, the
//!   result buffer) each scalar takes one 8-byte slot.
//! * A vector is a heap object `[count, length, element slots…]`; a closure
//!   is `[count, drop function, code, captured slots…]`. `count` is the
//!   reference count.

use cranelift_codegen::ir::types;
use nabla_lang::core::lower_typed::Unsupported;
use nabla_lang::syntax::span::Span;
use nabla_lang::types::Type;

/// Bytes of one slot.
pub(crate) const SLOT: i64 = 8;
/// Offset of a vector's length.
pub(crate) const VEC_LEN: i32 = 8;
/// Offset of a vector's first element.
pub(crate) const VEC_DATA: i64 = 16;
/// Offset of a closure's drop function.
pub(crate) const CLO_DROP: i32 = 8;
/// Offset of a closure's code.
pub(crate) const CLO_CODE: i32 = 16;
/// Offset of a closure's first captured slot.
pub(crate) const CLO_ENV: i64 = 24;

/// The length of the live vector `v`.
///
/// # Safety
/// `v` is a live vector.
pub(crate) unsafe fn vector_len(v: *const u64) -> usize {
    // SAFETY: the caller's guarantee: `[count, length, slots…]`.
    unsafe { *v.add(VEC_LEN as usize / 8) as usize }
}

/// The slots of the live vector `v` whose elements are `width` slots wide.
///
/// # Safety
/// `v` is a live vector of such elements, which outlives the slice.
pub(crate) unsafe fn vector_slots<'a>(v: *const u64, width: usize) -> &'a [u64] {
    // SAFETY: the caller's guarantee: `[count, length, slots…]`.
    unsafe { std::slice::from_raw_parts(v.add(VEC_DATA as usize / 8), vector_len(v) * width) }
}

/// The slots of the new vector `v` (its length set, its elements `width`
/// slots wide) to fill.
///
/// # Safety
/// As for [`vector_slots`], and nothing else reads or writes `v` meanwhile.
pub(crate) unsafe fn vector_slots_mut<'a>(v: *mut u64, width: usize) -> &'a mut [u64] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(v.add(VEC_DATA as usize / 8), vector_len(v) * width) }
}

/// The reals of the vector of reals `v` (none for null), each slot holding
/// a real's bits.
///
/// # Safety
/// `v` is null or a live vector of reals, which outlives the slice.
pub(crate) unsafe fn vector_reals<'a>(v: *const u64) -> &'a [f64] {
    if v.is_null() {
        return &[];
    }
    // SAFETY: the caller's guarantee; an f64 has a slot's size and alignment.
    let slots = unsafe { vector_slots(v, 1) };
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<f64>(), slots.len()) }
}

/// The reals of the new vector of reals `v` to fill.
///
/// # Safety
/// As for [`vector_slots_mut`].
pub(crate) unsafe fn vector_reals_mut<'a>(v: *mut u64) -> &'a mut [f64] {
    // SAFETY: the caller's guarantee; an f64 has a slot's size and alignment.
    let slots = unsafe { vector_slots_mut(v, 1) };
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(slots.as_mut_ptr().cast::<f64>(), slots.len()) }
}

/// Appends the machine types of `ty`'s flattening to `out`.
pub(crate) fn flatten(
    ty: &Type,
    out: &mut Vec<types::Type>,
    span: Span,
) -> Result<(), Unsupported> {
    match ty {
        Type::Real => out.push(types::F64),
        Type::Int => out.push(types::I64),
        Type::Bool => out.push(types::I8),
        Type::Unit | Type::Var(_) => {}
        Type::Tuple(ts) => {
            for t in ts {
                flatten(t, out, span)?;
            }
        }
        Type::Sum(a, b) => {
            out.push(types::I8);
            flatten(a, out, span)?;
            flatten(b, out, span)?;
        }
        Type::Vec(_) | Type::Fun(..) => out.push(types::I64),
        Type::Con(c, _) => {
            return Err(Unsupported {
                what: format!("values of the translated dialect's type `{}`", c.name()),
                span,
            });
        }
        // Records are erased to tuples before the typed IR; as a tuple anyway.
        Type::Record(..) => flatten(&ty.without_records(), out, span)?,
    }
    Ok(())
}

/// The flattening of `ty`.
pub(crate) fn flat(ty: &Type, span: Span) -> Result<Vec<types::Type>, Unsupported> {
    let mut out = Vec::new();
    flatten(ty, &mut out, span)?;
    Ok(out)
}

/// How many scalars `ty` flattens to.
pub(crate) fn width(ty: &Type) -> usize {
    match ty {
        Type::Real | Type::Int | Type::Bool | Type::Vec(_) | Type::Fun(..) => 1,
        Type::Unit | Type::Var(_) | Type::Con(..) => 0,
        Type::Tuple(ts) => ts.iter().map(width).sum(),
        Type::Sum(a, b) => 1 + width(a) + width(b),
        Type::Record(..) => width(&ty.without_records()),
    }
}

/// True if a value of `ty` holds a heap pointer (outside any vector).
pub(crate) fn has_heap(ty: &Type) -> bool {
    match ty {
        Type::Vec(_) | Type::Fun(..) => true,
        Type::Tuple(ts) => ts.iter().any(has_heap),
        Type::Sum(a, b) => has_heap(a) || has_heap(b),
        _ => false,
    }
}

/// Calls `f` with the type and the position in the flattening of every
/// heap pointer of a value of `ty` that starts at position `at`.
pub(crate) fn for_each_pointer(ty: &Type, at: usize, f: &mut impl FnMut(&Type, usize)) {
    match ty {
        Type::Vec(_) | Type::Fun(..) => f(ty, at),
        Type::Tuple(ts) => {
            let mut at = at;
            for t in ts {
                for_each_pointer(t, at, f);
                at += width(t);
            }
        }
        Type::Sum(a, b) => {
            for_each_pointer(a, at + 1, f);
            for_each_pointer(b, at + 1 + width(a), f);
        }
        _ => {}
    }
}

/// True if `ty` contains a function type anywhere (such a value cannot be
/// handed back to the host as a [`nabla_lang::eval::Value`]).
pub(crate) fn has_function(ty: &Type) -> bool {
    match ty {
        Type::Fun(..) => true,
        Type::Tuple(ts) | Type::Con(_, ts) => ts.iter().any(has_function),
        Type::Sum(a, b) => has_function(a) || has_function(b),
        Type::Vec(a) => has_function(a),
        _ => false,
    }
}
