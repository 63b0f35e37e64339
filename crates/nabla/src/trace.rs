//! The Delta trace of Krawiec et al. §5.3, flattened into one growable array
//! (§5.3.3), and its evaluation (Figure 11's `eval`) as one backward sweep.
//!
//! The paper's Delta has five constructors:
//!
//! ```text
//! Delta = Zero | Scale R Delta | Add Delta Delta | Var Id | Let Id Delta Delta
//! ```
//!
//! A reverse-mode value ([`Reverse`](crate::Reverse)) carries its Delta in the normal
//! form `Zero` or `Scale c (Var id)`, which the algebra of Deltas keeps closed under
//! everything except adding two different variables:
//!
//! ```text
//! Scale a (Scale c (Var p))                 = Scale (a·c) (Var p)      unary primitive, constant factor
//! Add (Scale a (Var p)) Zero                = Scale a (Var p)          constant argument
//! Add (Scale a (Var p)) (Scale b (Var p))   = Scale (a + b) (Var p)    same variable twice
//! Add (Scale a (Var p)) (Scale b (Var q))   = Var id, after deltaLet   the only case that records
//!     where id is bound to that sum
//! ```
//!
//! So the trace holds only `Let`-bound sums: entry `id` of the array stands for
//!
//! ```text
//! Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))
//! ```
//!
//! preceded by one placeholder entry per input variable (ids `0..inputs`), which has
//! no Delta of its own. The Delta a value carries never grows beyond one `Scale` of
//! one `Var`, and each `Let` is evaluated exactly once, in decreasing id order, so
//! sharing is never lost and the backward pass is O(number of entries) (Theorem 5).

use std::cell::UnsafeCell;
use std::mem::size_of;

use crate::{Scalar, pool};

/// Index of an entry in a [`Trace`]: the paper's `DeltaId`.
pub(crate) type DeltaId = u32;

/// Entries a fresh trace has room for before it first grows.
const INITIAL_CAPACITY: usize = 1024;

/// One flattened Delta binding: `Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))`.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Entry<S> {
    parents: [DeltaId; 2],
    weights: [S; 2],
}

/// The growable array of Delta bindings that a reverse-mode evaluation appends to.
///
/// Every [`Reverse`](crate::Reverse) scalar of one evaluation holds a shared
/// reference to it, hence the interior mutability.
#[derive(Debug)]
pub(crate) struct Trace<S> {
    entries: UnsafeCell<Vec<Entry<S>>>,
}

impl<S: Scalar> Trace<S> {
    /// An empty trace, in recycled memory where possible.
    pub(crate) fn new() -> Self {
        Trace {
            entries: UnsafeCell::new(pool::take(INITIAL_CAPACITY)),
        }
    }

    /// `n` new input variables: the paper's `Var`s for the components of the
    /// argument, numbered from the returned id. Their entries are placeholders that
    /// the backward sweep never visits.
    pub(crate) fn inputs(&self, n: usize) -> DeltaId {
        let mut entries = self.replace_entries(Vec::new());
        let first = entries.len();
        assert!(
            first + n < DeltaId::MAX as usize / 2,
            "nabla: the reverse-mode trace exceeds 2^31 entries"
        );
        let placeholder = Entry {
            parents: [0; 2],
            weights: [S::zero(); 2],
        };
        entries.resize(first + n, placeholder);
        self.replace_entries(entries);
        first as DeltaId
    }

    /// `Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))`, for p₀ ≠ p₁.
    #[inline(always)]
    pub(crate) fn add(&self, p0: DeltaId, w0: S, p1: DeltaId, w1: S) -> DeltaId {
        self.push(Entry {
            parents: [p0, p1],
            weights: [w0, w1],
        })
    }

    #[inline(always)]
    fn push(&self, entry: Entry<S>) -> DeltaId {
        #[allow(unsafe_code)]
        // SAFETY: `Trace` is not `Sync` (it holds an `UnsafeCell`), so only this thread
        // can be here, and the `&mut` lives only for this block, in which nothing else
        // can reach `entries`: the only code run is `Vec`'s own, on a `Copy` element
        // type (no user `Drop` or `Clone` runs, even when the vector reallocates).
        // This replaces a `RefCell`, whose borrow flag cost a third of recording time.
        let entries = unsafe { &mut *self.entries.get() };
        if entries.len() == entries.capacity() {
            grow(entries);
        }
        let id = entries.len() as DeltaId;
        entries.push(entry);
        id
    }

    /// The recorded entries, for evaluation once recording is over.
    pub(crate) fn into_entries(self) -> Vec<Entry<S>> {
        self.entries.into_inner()
    }

    /// Puts `entries` in place of the recorded entries and returns those, so that
    /// they can be evaluated (and truncated) between two recordings while values of
    /// this trace still exist.
    pub(crate) fn replace_entries(&self, entries: Vec<Entry<S>>) -> Vec<Entry<S>> {
        #[allow(unsafe_code)]
        // SAFETY: as in `push`: only this thread can be here, and the `&mut` lives
        // only for `mem::replace`, which runs no code but moving two vectors.
        let current = unsafe { &mut *self.entries.get() };
        std::mem::replace(current, entries)
    }
}

/// Makes room for more entries; the one place that checks the id space.
#[cold]
#[inline(never)]
fn grow<S>(entries: &mut Vec<Entry<S>>) {
    assert!(
        entries.len() < DeltaId::MAX as usize / 2,
        "nabla: the reverse-mode trace exceeds 2^31 entries"
    );
    entries.reserve(entries.len().max(INITIAL_CAPACITY));
}

/// The size in bytes of one trace entry for scalars of type `S`.
pub(crate) const fn entry_bytes<S>() -> usize {
    size_of::<Entry<S>>()
}

/// Figure 11's `eval`, on the flattened trace: propagate adjoints from each `Let`
/// to the two variables it adds, visiting every entry after the `inputs`
/// placeholders once, in decreasing id order.
///
/// `adjoints` holds one slot per entry, seeded with the output cotangents; on return
/// slot `i` holds the adjoint of entry `i`. An entry whose adjoint is exactly zero
/// contributes nothing and is skipped, so an infinite partial derivative on a path
/// that does not reach the output cannot turn into NaN.
pub(crate) fn backpropagate<S: Scalar>(entries: &[Entry<S>], inputs: usize, adjoints: &mut [S]) {
    assert_eq!(
        entries.len(),
        adjoints.len(),
        "one adjoint slot per trace entry"
    );
    for id in (inputs..entries.len()).rev() {
        let adjoint = adjoints[id];
        if adjoint.is_zero() {
            continue;
        }
        let Entry {
            parents: [p0, p1],
            weights: [w0, w1],
        } = entries[id];
        adjoints[p0 as usize].accumulate(w0 * adjoint);
        adjoints[p1 as usize].accumulate(w1 * adjoint);
    }
}

/// A zeroed adjoint array of `len` slots, in recycled memory where possible.
pub(crate) fn zeroed_adjoints<S: Scalar>(len: usize) -> Vec<S> {
    let mut adjoints = pool::take(len);
    adjoints.resize(len, S::zero());
    adjoints
}
