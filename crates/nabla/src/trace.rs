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
//! everything except adding two different variables (`Scale 0 δ = Zero` is kept as
//! the coefficient 0, so that only how a value was made decides whether it is a
//! constant):
//!
//! ```text
//! Scale a (Scale c (Var p))                 = Scale (a·c) (Var p)      unary primitive, constant factor
//! Add (Scale a (Var p)) Zero                = Scale a (Var p)          constant argument
//! Add (Scale a (Var p)) (Scale b (Var p))   = Scale (a + b) (Var p)    same variable twice
//! Add (Scale a (Var p)) (Scale b (Var q))   = Var id, after deltaLet   the only case that records
//!     where id is bound to that sum
//! ```
//!
//! So the trace holds only `Let`-bound sums: entry `id` stands for
//!
//! ```text
//! Let id = Add (Scale w₀ (Var p₀)) (Scale w₁ (Var p₁))
//! ```
//!
//! Ids `0..inputs` are the input variables, which have no Delta of their own and so
//! no entry: the array's element `k` is the entry of id `inputs + k`. The Delta a
//! value carries never grows beyond one `Scale` of one `Var`, and each `Let` is
//! evaluated exactly once, in decreasing id order, so sharing is never lost and the
//! backward pass is O(number of entries) (Theorem 5).

use std::cell::UnsafeCell;
use std::mem::size_of;

use crate::{Real, Scalar, pool};

/// Index of an entry in a [`Trace`]: the paper's `DeltaId`.
pub(crate) type DeltaId = u32;

/// Entries a trace has room for once it outgrows its small first buffer: its
/// first buffer from the pool.
const INITIAL_CAPACITY: usize = 1024;

/// The size of a trace's first buffer, allocated plainly rather than taken from the
/// pool: an inner gradient of a function of a few inputs, taken at every step of an
/// outer computation, records a handful of entries, and for so few an allocation
/// from the allocator's per-thread cache (up to about 1 kB in glibc) costs less than
/// the pool's round trip. A trace that outgrows it moves to the pool.
const SMALL_BUFFER_BYTES: usize = 1024;

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
/// reference to it (a [`TapeReverse`](crate::TapeReverse) finds it, shared, in the
/// thread's stack of traces), hence the interior mutability.
#[derive(Debug)]
pub(crate) struct Trace<S> {
    /// The number of input variables: ids `0..inputs`, which have no entry.
    inputs: DeltaId,
    /// Element `k` is the `Let` of id `inputs + k`.
    entries: UnsafeCell<Vec<Entry<S>>>,
}

impl<S> Trace<S> {
    /// An empty trace of `inputs` input variables (the paper's `Var`s for the
    /// components of the argument, ids `0..inputs`). It allocates nothing until
    /// its first entry, and a long trace is kept in recycled memory where possible.
    pub(crate) fn new(inputs: usize) -> Self {
        assert!(
            inputs < DeltaId::MAX as usize / 2,
            "nabla: the reverse-mode trace exceeds 2^31 entries"
        );
        Trace {
            inputs: inputs as DeltaId,
            entries: UnsafeCell::new(Vec::new()),
        }
    }

    /// The number of input variables.
    pub(crate) fn inputs(&self) -> usize {
        self.inputs as usize
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
            grow(entries, self.inputs);
        }
        let id = self.inputs + entries.len() as DeltaId;
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

/// Makes room for more entries: a small first buffer, then a pooled one, then
/// doubling; the one place that checks the id space.
#[cold]
#[inline(never)]
fn grow<S>(entries: &mut Vec<Entry<S>>, inputs: DeltaId) {
    assert!(
        inputs as usize + entries.len() < DeltaId::MAX as usize / 2,
        "nabla: the reverse-mode trace exceeds 2^31 entries"
    );
    if entries.capacity() == 0 {
        *entries = Vec::with_capacity((SMALL_BUFFER_BYTES / entry_bytes::<S>()).max(1));
    } else if entries.capacity() < INITIAL_CAPACITY {
        let mut pooled = pool::take(INITIAL_CAPACITY);
        pooled.append(entries);
        *entries = pooled;
    } else {
        entries.reserve(entries.len().max(INITIAL_CAPACITY));
    }
}

/// The size in bytes of one trace entry for scalars of type `S`.
pub(crate) const fn entry_bytes<S>() -> usize {
    size_of::<Entry<S>>()
}

/// Figure 11's `eval`, on the flattened trace: propagate adjoints from each `Let`
/// to the two variables it adds, visiting every entry once, in decreasing id order.
///
/// `adjoints` holds one slot per id — the `inputs` input variables, then one per
/// entry — seeded with the output cotangents; on return the first `inputs` slots
/// hold the adjoints of the input variables (the other slots are left partly
/// summed). An entry whose adjoint is exactly zero contributes nothing and is
/// skipped, so an infinite partial derivative on a path that does not reach the
/// output cannot turn into NaN.
pub(crate) fn backpropagate<R: Real, S: Scalar<R>>(
    entries: &[Entry<S>],
    inputs: usize,
    adjoints: &mut [S],
) {
    assert_eq!(
        inputs + entries.len(),
        adjoints.len(),
        "one adjoint slot per input variable and trace entry"
    );
    // The contribution to the adjoint of entry `id − 1`, the next one visited, is
    // kept in a register instead of being stored and loaded back. A value is most
    // often used right after it is made, so that is where a dependent chain of
    // operations puts its parent; through memory, each link of the chain would wait
    // for a store to be forwarded to the next load. Adding `carry` last keeps the
    // order in which each adjoint's contributions are summed.
    let mut carry = S::zero();
    let mut id = adjoints.len();
    for entry in entries.iter().rev() {
        id -= 1;
        let mut adjoint = adjoints[id];
        adjoint.accumulate(carry);
        carry = S::zero();
        if adjoint.is_zero() {
            continue;
        }
        let Entry {
            parents: [p0, p1],
            weights: [w0, w1],
        } = *entry;
        // The two parents differ (`add` binds only different variables), so at most
        // one of them is `id − 1`, and `carry` (zero until then) simply takes its term.
        debug_assert_ne!(p0, p1, "an entry adds two different variables");
        let previous = (id as DeltaId).wrapping_sub(1);
        for (parent, weight) in [(p0, w0), (p1, w1)] {
            // `weight · adjoint` as Number::chain (the adjoint is not zero here): a
            // zero weight gives zero even where the adjoint has become infinite.
            let product = weight * adjoint;
            let term = if weight.is_zero() { S::zero() } else { product };
            if parent == previous {
                carry = term;
            } else {
                adjoints[parent as usize].accumulate(term);
            }
        }
    }
    if inputs > 0 {
        adjoints[inputs - 1].accumulate(carry);
    }
}

/// A zeroed adjoint array of `len` slots, in recycled memory where possible.
pub(crate) fn zeroed_adjoints<R: Real, S: Scalar<R>>(len: usize) -> Vec<S> {
    let mut adjoints = pool::take(len);
    adjoints.resize(len, S::zero());
    adjoints
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_keeps_its_entries_as_it_outgrows_each_buffer() {
        // Empty, then the small first buffer, then a pooled one, then doubling.
        let trace = Trace::<f64>::new(2);
        assert_eq!(len_and_capacity(&trace), (0, 0));
        let small = SMALL_BUFFER_BYTES / entry_bytes::<f64>();
        let count = 3 * INITIAL_CAPACITY;
        for k in 0..count {
            let id = trace.add(0, k as f64, 1, -(k as f64));
            assert_eq!(id as usize, 2 + k);
            if k == 0 {
                assert_eq!(len_and_capacity(&trace), (1, small));
            }
        }
        let entries = trace.into_entries();
        assert_eq!(entries.len(), count);
        assert!(entries.capacity() >= count);
        for (k, entry) in entries.iter().enumerate() {
            assert_eq!(entry.parents, [0, 1]);
            assert_eq!(entry.weights, [k as f64, -(k as f64)]);
        }
    }

    /// (length, capacity) of the entries recorded so far.
    fn len_and_capacity<S>(trace: &Trace<S>) -> (usize, usize) {
        let entries = trace.replace_entries(Vec::new());
        let shape = (entries.len(), entries.capacity());
        trace.replace_entries(entries);
        shape
    }
}
