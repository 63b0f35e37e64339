//! The Delta trace of Krawiec et al. §5.3, flattened into one growable array
//! (§5.3.3), and its evaluation (Figure 11's `eval`) as one backward sweep.
//!
//! The paper's Delta has five constructors:
//!
//! ```text
//! Delta = Zero | Scale R Delta | Add Delta Delta | Var Id | Let Id Delta Delta
//! ```
//!
//! Here every binding made by the monadic translation's `deltaLet` is one [`Entry`]
//! of the array, and an entry's index is its Delta id. An entry stands for
//!
//! ```text
//! Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))
//! ```
//!
//! — every Delta a primitive produces has this shape (Figure 9: a primitive of one or
//! two arguments scales each argument's Delta by a partial derivative and adds them).
//! `Zero` is never stored: a value whose Delta is `Zero` (a constant) has no id and
//! records nothing, and an operation with one constant argument records an entry with
//! one parent. The unused parent slot points at entry 0, a sink whose adjoint is
//! never read, which keeps the backward loop free of branches on arity.
//!
//! Because each `Let` is evaluated exactly once, in decreasing id order, sharing is
//! never lost: the whole backward pass is O(number of entries) (Theorem 5).

use std::cell::RefCell;
use std::mem::size_of;

use crate::Scalar;

/// Index of an entry in a [`Trace`]: the paper's `DeltaId`.
pub(crate) type DeltaId = u32;

/// The sink: the parent of unused slots and of input variables.
pub(crate) const SINK: DeltaId = 0;

/// One flattened Delta binding: `Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry<S> {
    parents: [DeltaId; 2],
    weights: [S; 2],
}

/// The growable array of Delta bindings that a reverse-mode evaluation appends to.
///
/// Interior mutability lets every [`Reverse`](crate::Reverse) scalar share a plain
/// reference to it; it is never borrowed across a call to user code, so the borrow
/// can never fail.
#[derive(Debug)]
pub(crate) struct Trace<S> {
    entries: RefCell<Vec<Entry<S>>>,
}

impl<S: Scalar> Trace<S> {
    /// An empty trace (holding only the sink).
    pub(crate) fn new() -> Self {
        let sink = Entry { parents: [SINK; 2], weights: [S::zero(); 2] };
        let mut entries = Vec::with_capacity(1024);
        entries.push(sink);
        Trace { entries: RefCell::new(entries) }
    }

    /// A new input variable: the paper's `Var` for a component of the argument.
    pub(crate) fn input(&self) -> DeltaId {
        self.push(Entry { parents: [SINK; 2], weights: [S::zero(); 2] })
    }

    /// `Let id = Scale w (Var parent)`.
    #[inline]
    pub(crate) fn scale(&self, parent: DeltaId, weight: S) -> DeltaId {
        self.push(Entry { parents: [parent, SINK], weights: [weight, S::zero()] })
    }

    /// `Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))`.
    #[inline]
    pub(crate) fn add_scaled(&self, p0: DeltaId, w0: S, p1: DeltaId, w1: S) -> DeltaId {
        self.push(Entry { parents: [p0, p1], weights: [w0, w1] })
    }

    #[inline]
    fn push(&self, entry: Entry<S>) -> DeltaId {
        let mut entries = self.entries.borrow_mut();
        let id = entries.len();
        assert!(id < DeltaId::MAX as usize, "nabla: the reverse-mode trace exceeds 2^32 entries");
        entries.push(entry);
        id as DeltaId
    }

    /// The recorded entries, for evaluation once recording is over.
    pub(crate) fn into_entries(self) -> Vec<Entry<S>> {
        self.entries.into_inner()
    }
}

/// The size in bytes of one trace entry for scalars of type `S`.
pub(crate) const fn entry_bytes<S>() -> usize {
    size_of::<Entry<S>>()
}

/// Figure 11's `eval`, on the flattened trace: propagate adjoints from each entry to
/// its parents, visiting every entry once in decreasing id order.
///
/// `adjoints` holds one slot per entry, seeded with the output cotangents; on return
/// slot `i` holds the adjoint of entry `i`. An entry whose adjoint is exactly zero
/// contributes nothing and is skipped, so an infinite partial derivative on a path
/// that does not reach the output cannot turn into NaN.
pub(crate) fn backpropagate<S: Scalar>(entries: &[Entry<S>], adjoints: &mut [S]) {
    assert_eq!(entries.len(), adjoints.len(), "one adjoint slot per trace entry");
    for id in (1..entries.len()).rev() {
        let adjoint = adjoints[id];
        let Entry { parents: [p0, p1], weights: [w0, w1] } = entries[id];
        // Inputs have no parents; a zero adjoint has nothing to propagate.
        if p0 == SINK || adjoint.is_zero() {
            continue;
        }
        accumulate(&mut adjoints[p0 as usize], w0 * adjoint);
        if p1 != SINK {
            accumulate(&mut adjoints[p1 as usize], w1 * adjoint);
        }
    }
}

/// `slot += term`, but a slot that is still a structural zero takes `term` as it is:
/// when the adjoints are themselves differentiated (reverse over reverse) this
/// records nothing for the first contribution to each slot.
#[inline]
fn accumulate<S: Scalar>(slot: &mut S, term: S) {
    if slot.is_zero() {
        *slot = term;
    } else {
        *slot += term;
    }
}
