//! The Delta trace of a reverse level and its backward pass (Krawiec et al.
//! §5.3: Delta terms flattened into one array, each operation's Delta
//! `Let`-bound to a fresh id and referred to by `Var id`).
//!
//! Entry `id` stands for `Let id = w₀ · Var p₀ + w₁ · Var p₁` (a missing term
//! has parent [`NO_PARENT`]; inputs have no terms). Parents always precede
//! their entry, so one sweep from the last entry to the first evaluates the
//! whole trace in linear time, however much it shares.

use super::num::Num;
use crate::memory;

/// The parent of a missing term.
pub const NO_PARENT: u32 = u32::MAX;

/// Marks a Delta that sums the terms of the `n` Deltas just before it: its
/// parents are `[SUM_OF_PRECEDING, n]` (weights unused). Those `n` Deltas
/// hold terms only: no real refers to them, so their adjoints stay zero,
/// and the sweep passes the sum's adjoint `a` on to their terms directly,
/// last Delta first, each as it would pass its own adjoint `a` on. That is
/// the sweep of a sum recorded real by real whose additions each pass their
/// adjoint on unchanged (weights 1, nothing else referring to them):
/// `sum (build n (fun i -> u[i] * v[i]))` of two different variables per
/// product, the products' Deltas kept, the additions' left out (about half
/// the Deltas; compiled code only: `TapeOp::DotTerms`).
pub const SUM_OF_PRECEDING: u32 = u32::MAX - 1;

/// Marks a term whose weight is not a plain `f64`: the weight field then
/// holds the index of the weight in [`Trace::tagged_weights`].
const TAGGED: u32 = 1 << 31;

/// One Delta, in 24 bytes: parents and weights of its two terms.
///
/// Weights are reals of the enclosing levels. Almost always they are plain
/// `f64` (always, at the outermost level); the rare tagged weight is stored
/// aside, flagged by the top bit of its parent id, so that entries stay
/// small, copyable and free to drop. `repr(C)`: native code writes plain
/// Deltas in this layout straight into a trace's buffer
/// ([`Trace::append_in_place`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Entry {
    /// The Deltas of the two terms ([`NO_PARENT`] for none).
    pub parents: [u32; 2],
    /// The two terms' weights.
    pub weights: [f64; 2],
}

/// Bytes charged to the memory budget per entry of a trace's buffer: the
/// entry, and its adjoint in the backward sweep.
const BYTES_PER_ENTRY: usize = size_of::<Entry>() + size_of::<f64>();

/// The trace of one reverse level.
///
/// Its buffer is charged to the memory budget ([`crate::memory`]) as it
/// grows and released when the trace is dropped; the evaluator notices a
/// trace over budget at its next call.
#[derive(Debug, Default)]
pub struct Trace {
    entries: Vec<Entry>,
    tagged_weights: Vec<Num>,
    /// The inputs are entries `0..inputs`.
    inputs: usize,
    /// Bytes charged for `entries`' buffer.
    charged: usize,
}

/// Buffers of finished traces, kept per thread so that a loop calling
/// `grad` does not ask the operating system for fresh memory each time.
struct Spare {
    entries: Vec<Entry>,
    adjoints: Vec<f64>,
}

thread_local! {
    static SPARE: std::cell::RefCell<Spare> = const {
        std::cell::RefCell::new(Spare { entries: Vec::new(), adjoints: Vec::new() })
    };
}

/// Buffers bigger than this are returned to the allocator, not kept.
const MAX_SPARE_BYTES: usize = 256 << 20;

/// Makes `adjoint` `len` zeros. Where its buffer is too small, it takes
/// this thread's spare adjoint buffer if that one is big enough (its own
/// becoming the spare): a large level's adjoints, given back by
/// [`recycle_adjoints`] when it ends, are not allocated afresh — and
/// faulted into memory page by page — every time a loop takes a gradient
/// (LSTM l4's gradient spent 16 % of its time in the kernel so).
pub fn zero_adjoints(adjoint: &mut Vec<f64>, len: usize) {
    if adjoint.capacity() < len {
        SPARE.with_borrow_mut(|s| {
            if s.adjoints.capacity() >= len {
                std::mem::swap(adjoint, &mut s.adjoints);
            }
        });
    }
    adjoint.clear();
    adjoint.resize(len, 0.0);
}

/// Gives an ended level's adjoint buffer back for the next sweep
/// ([`zero_adjoints`]): kept if it is bigger than the spare one and at
/// most 256 MB (`MAX_SPARE_BYTES`).
pub fn recycle_adjoints(adjoint: Vec<f64>) {
    SPARE.with_borrow_mut(|s| keep_bigger(&mut s.adjoints, adjoint));
}

/// Makes `buffer`, emptied, the spare `kept` if it has more room and is at
/// most [`MAX_SPARE_BYTES`]; otherwise lets it go.
fn keep_bigger<T>(kept: &mut Vec<T>, mut buffer: Vec<T>) {
    if buffer.capacity() * size_of::<T>() <= MAX_SPARE_BYTES && buffer.capacity() > kept.capacity()
    {
        buffer.clear();
        *kept = buffer;
    }
}

impl Trace {
    /// An empty trace, reusing this thread's spare buffer if there is one.
    pub fn new() -> Trace {
        let entries = SPARE.with_borrow_mut(|s| std::mem::take(&mut s.entries));
        let charged = entries.capacity() * BYTES_PER_ENTRY;
        memory::charge(charged);
        Trace {
            entries,
            tagged_weights: Vec::new(),
            inputs: 0,
            charged,
        }
    }

    /// Appends an entry, charging the buffer's growth; returns its id.
    #[inline]
    fn append(&mut self, entry: Entry) -> u32 {
        let id = self.next_id();
        if self.entries.len() == self.entries.capacity() {
            self.grow();
        }
        self.entries.push(entry);
        id
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        // At least doubles the capacity, also when the trace is empty.
        let target = (2 * self.entries.capacity()).max(256);
        self.entries.reserve(target - self.entries.len());
        self.charge_capacity();
    }

    /// Charges the buffer's growth since it was last charged.
    fn charge_capacity(&mut self) {
        let bytes = self.entries.capacity() * BYTES_PER_ENTRY;
        // Only growth is charged: appending within the capacity (every
        // flush of compiled code's Deltas) leaves the thread's count alone.
        if bytes > self.charged {
            memory::charge(bytes - self.charged);
            self.charged = bytes;
        }
    }

    /// Gives this trace's buffer back for the next one.
    pub fn recycle(mut self) {
        SPARE.with_borrow_mut(|s| keep_bigger(&mut s.entries, std::mem::take(&mut self.entries)));
    }

    /// Empties the trace for the next one recorded in it, keeping its
    /// buffer (and the buffer's charge).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.tagged_weights.clear();
        self.inputs = 0;
    }

    /// Bytes of the trace's buffer of entries.
    pub fn buffer_bytes(&self) -> usize {
        self.entries.capacity() * size_of::<Entry>()
    }

    /// The number of inputs (entries `0..inputs`).
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// The number of entries (Deltas).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn next_id(&self) -> u32 {
        // Ids must stay below the flag bit. 2^31 entries would need 48 GiB,
        // so allocation fails long before this saturates.
        u32::try_from(self.entries.len()).map_or(TAGGED - 1, |id| id.min(TAGGED - 1))
    }

    /// Appends an input (a Delta with no terms); returns its id.
    pub fn push_input(&mut self) -> u32 {
        debug_assert_eq!(self.inputs, self.entries.len(), "inputs come first");
        self.inputs += 1;
        self.push_plain([NO_PARENT; 2], [0.0; 2])
    }

    /// Appends `w₀·Var p₀ + w₁·Var p₁` with plain weights; returns its id.
    #[inline]
    pub fn push_plain(&mut self, parents: [u32; 2], weights: [f64; 2]) -> u32 {
        self.append(Entry { parents, weights })
    }

    /// Lends the entries' buffer to a writer that appends plain Deltas in
    /// place — native code writes them straight into its spare capacity and
    /// then sets its length — and brings the trace's books up to date after:
    /// Deltas without parents at the start of the trace are its inputs (a
    /// Delta with no term is never recorded otherwise), and capacity the
    /// writer reserved is charged. The writer must only append.
    pub fn append_in_place<T>(&mut self, write: impl FnOnce(&mut Vec<Entry>) -> T) -> T {
        let before = self.entries.len();
        let result = write(&mut self.entries);
        debug_assert!(self.entries.len() >= before, "a writer only appends");
        if self.inputs == before {
            self.inputs += leading_inputs(self.entries.get(before..).unwrap_or_default());
        }
        self.inputs = self.inputs.min(self.entries.len());
        self.charge_capacity();
        result
    }

    /// The buffer's unused capacity, which a writer appending in place
    /// fills ([`Trace::append_in_place`] then takes what it wrote).
    pub fn spare_capacity(&mut self) -> &mut [std::mem::MaybeUninit<Entry>] {
        self.entries.spare_capacity_mut()
    }

    /// At least doubles the buffer's capacity (charged), for a writer that
    /// appends in place ([`Trace::append_in_place`]).
    pub fn make_room(&mut self) {
        self.grow();
    }

    /// The parents of Delta `id` ([`NO_PARENT`] where it has none, and for
    /// an id not on the trace).
    pub fn parents(&self, id: u32) -> [u32; 2] {
        self.entries.get(id as usize).map_or([NO_PARENT; 2], |e| {
            e.parents
                .map(|p| if p == NO_PARENT { p } else { p & !TAGGED })
        })
    }

    /// Appends `w₀·Var p₀ + w₁·Var p₁` with weights of any level.
    pub fn push(&mut self, terms: [(u32, Num); 2]) -> u32 {
        let mut entry = Entry {
            parents: [NO_PARENT; 2],
            weights: [0.0; 2],
        };
        for (k, (parent, w)) in terms.into_iter().enumerate() {
            if parent == NO_PARENT {
                continue;
            }
            match w {
                Num::Real(w) => {
                    entry.parents[k] = parent;
                    entry.weights[k] = w;
                }
                w => {
                    entry.parents[k] = parent | TAGGED;
                    entry.weights[k] = f64::from_bits(self.tagged_weights.len() as u64);
                    self.tagged_weights.push(w);
                }
            }
        }
        self.append(entry)
    }

    /// The backward pass (Figure 11's `eval`, on the flattened trace): one
    /// sweep from the last Delta to the first, each passing its adjoint to
    /// its parents. `seeds` are the cotangents of the output Deltas; returns
    /// the adjoints of the inputs, in creation order.
    ///
    /// The arithmetic is that of the enclosing levels, so the sweep is itself
    /// differentiable (reverse over reverse). An adjoint that is still the
    /// constant 0 passes nothing on. When every weight and seed is a plain
    /// `f64`, the sweep runs on `f64` alone.
    pub fn backpropagate(&self, seeds: Vec<(u32, Num)>) -> Vec<Num> {
        let plain_seeds = seeds.iter().all(|(_, ct)| matches!(ct, Num::Real(_)));
        if plain_seeds {
            let plain = seeds.iter().map(|(id, ct)| (*id, ct.value()));
            let inputs =
                self.sweep_plain_then(plain, |a| a.iter().map(|a| Num::Real(*a)).collect());
            if let Some(inputs) = inputs {
                return inputs;
            }
        }
        let mut adjoint = vec![Num::ZERO; self.entries.len()];
        for (id, ct) in seeds {
            if let Some(a) = adjoint.get_mut(id as usize) {
                accumulate(a, ct);
            }
        }
        self.sweep(&mut adjoint);
        adjoint.truncate(self.inputs);
        adjoint
    }

    /// [`Trace::backpropagate`] when every weight and seed is a plain
    /// `f64`, on `f64` alone, in the caller's buffer `adjoint` (made every
    /// entry's adjoint; the inputs' are its first [`Trace::inputs`]).
    /// Returns false, doing nothing, if a weight is not plain.
    pub fn backpropagate_plain(
        &self,
        seeds: impl IntoIterator<Item = (u32, f64)>,
        adjoint: &mut Vec<f64>,
    ) -> bool {
        if !self.tagged_weights.is_empty() {
            return false;
        }
        zero_adjoints(adjoint, self.entries.len());
        seed_and_sweep_plain(&self.entries, seeds, adjoint);
        true
    }

    /// [`Trace::backpropagate_plain`] for `L` cotangents at once
    /// ([`seed_and_sweep_plain_lanes`]): `adjoint` is made `L` adjoints per
    /// entry, entry by entry (each lane exactly the one-lane sweep's).
    /// Returns false, doing nothing, if a weight is not plain.
    pub fn backpropagate_plain_lanes<const L: usize>(
        &self,
        seeds: impl IntoIterator<Item = (u32, [f64; L])>,
        adjoint: &mut Vec<f64>,
    ) -> bool {
        if !self.tagged_weights.is_empty() {
            return false;
        }
        adjoint.clear();
        adjoint.resize(self.entries.len() * L, 0.0);
        let (lanes, _) = adjoint.as_chunks_mut::<L>();
        seed_and_sweep_plain_lanes(&self.entries, seeds, lanes);
        true
    }

    /// The plain sweep from `seeds`, then `then` of the inputs' adjoints;
    /// `None` if a weight is not plain.
    fn sweep_plain_then<T>(
        &self,
        seeds: impl Iterator<Item = (u32, f64)>,
        then: impl FnOnce(&[f64]) -> T,
    ) -> Option<T> {
        if !self.tagged_weights.is_empty() {
            return None;
        }
        let mut adjoint = Vec::new();
        zero_adjoints(&mut adjoint, self.entries.len());
        seed_and_sweep_plain(&self.entries, seeds, &mut adjoint);
        let out = then(&adjoint[..self.inputs]);
        recycle_adjoints(adjoint);
        Some(out)
    }

    fn sweep(&self, adjoint: &mut [Num]) {
        walk_back(&self.entries, adjoint, Num::is_zero, |e, a, adjoint| {
            self.pass_on(e, a, adjoint)
        });
    }

    /// Adds `wₖ · a` to the adjoint of each parent k of `e` (`a` not zero).
    fn pass_on(&self, e: &Entry, a: &Num, adjoint: &mut [Num]) {
        for k in 0..2 {
            let parent = e.parents[k];
            if parent == NO_PARENT {
                continue;
            }
            let p = (parent & !TAGGED) as usize;
            let w = if parent & TAGGED == 0 {
                Num::Real(e.weights[k])
            } else {
                let i = e.weights[k].to_bits() as usize;
                self.tagged_weights.get(i).cloned().unwrap_or(Num::ZERO)
            };
            // A zero weight adds nothing (`Number::chain`; `a` is not
            // zero here), as in the plain sweep.
            if let Some(acc) = adjoint.get_mut(p)
                && !w.is_zero()
            {
                match (&w, a, &mut *acc) {
                    (Num::Real(w), Num::Real(a), Num::Real(acc)) => *acc += w * a,
                    _ => accumulate(acc, w * a.clone()),
                }
            }
        }
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        // A recycled buffer is spare, not live: it is released too.
        memory::release(self.charged);
    }
}

/// `*acc += term`. A constant-0 accumulator is replaced by a tagged term
/// (adding it would record a Delta) unless that would give another value
/// than adding does (`0 + −0` is `+0`): every value is the plain sweep's
/// `acc + term`, to the sign of a zero, whatever levels the term carries.
fn accumulate(acc: &mut Num, term: Num) {
    let signed_zero = |x: f64| x == 0.0 && x.is_sign_negative();
    let same_value = !signed_zero(term.value()) || signed_zero(acc.value());
    let replace = acc.is_zero() && !matches!(term, Num::Real(_)) && same_value;
    if replace {
        *acc = term;
    } else {
        let old = std::mem::replace(acc, Num::ZERO);
        *acc = old + term;
    }
}

/// The backward pass over plain entries: the cotangents `seeds` added, in
/// order, to the adjoints of their entries (an id past the end adds
/// nothing), then the sweep (Figure 11's `eval` on the flattened trace):
/// from the last entry to the first, an entry whose adjoint `a` is not zero
/// adds `wₖ · a` to the adjoint of each parent k. `adjoint` holds one
/// adjoint per entry, all zero. Native code sweeps a level it recorded
/// without the runtime's trace by this same function, so both back ends
/// add in the same order.
#[inline]
pub fn seed_and_sweep_plain(
    entries: &[Entry],
    seeds: impl IntoIterator<Item = (u32, f64)>,
    adjoint: &mut [f64],
) {
    for (id, ct) in seeds {
        if let Some(a) = adjoint.get_mut(id as usize) {
            *a += ct;
        }
    }
    walk_back(
        entries,
        adjoint,
        |&a| a == 0.0,
        |e, &a, adjoint| pass_on(e, a, adjoint),
    );
}

/// The backward walk of every sweep (Figure 11's `eval` on the flattened
/// trace): from the last entry to the first, an entry whose adjoint `a` is
/// not zero passes it on to its terms (`pass`); a Delta that sums the
/// terms of the Deltas before it ([`SUM_OF_PRECEDING`]) passes its adjoint
/// on to their terms, last first, and those Deltas (whose own adjoints are
/// zero) are skipped.
#[inline(always)]
fn walk_back<A: Clone>(
    entries: &[Entry],
    adjoint: &mut [A],
    is_zero: impl Fn(&A) -> bool,
    mut pass: impl FnMut(&Entry, &A, &mut [A]),
) {
    let mut id = entries.len().min(adjoint.len());
    while id > 0 {
        id -= 1;
        if is_zero(&adjoint[id]) {
            continue;
        }
        let a = adjoint[id].clone();
        if let Some(terms) = summed_terms(entries, id) {
            for t in terms.iter().rev() {
                pass(t, &a, adjoint);
            }
            id -= terms.len();
            continue;
        }
        pass(&entries[id], &a, adjoint);
    }
}

/// Adds `wₖ · a` to the adjoint of each parent k of `e` (`a` not zero).
#[inline(always)]
fn pass_on(e: &Entry, a: f64, adjoint: &mut [f64]) {
    for k in 0..2 {
        // `weight · a` as Number::chain (`a` is not zero here): a zero
        // weight adds nothing even where `a` has become infinite.
        if let Some(p) = adjoint.get_mut(e.parents[k] as usize)
            && e.weights[k] != 0.0
        {
            *p += e.weights[k] * a;
        }
    }
}

/// The Deltas whose terms entry `id` sums, if it is such a sum
/// ([`SUM_OF_PRECEDING`]; as many as precede it, at most).
#[inline(always)]
fn summed_terms(entries: &[Entry], id: usize) -> Option<&[Entry]> {
    let e = entries.get(id)?;
    if e.parents[0] != SUM_OF_PRECEDING {
        return None;
    }
    let n = (e.parents[1] as usize).min(id);
    entries.get(id - n..id)
}

/// [`seed_and_sweep_plain`] for `L` cotangents at once, lane by lane:
/// `adjoint` holds `L` adjoints per entry (all zero), `seeds` gives, in
/// order, an id and its `L` cotangents. Every lane ends exactly as the
/// one-lane sweep from that lane's seeds would (a NaN's bits aside, which
/// Rust leaves unspecified): where a lane's adjoint is zero it adds
/// `-0.0`, which changes no value (signed zeros and NaNs included), in
/// place of skipping; an entry is skipped when every lane's adjoint is
/// zero. One pass over the entries serves the `L` rows of a
/// Jacobian (a pullback applied to each basis cotangent).
pub fn seed_and_sweep_plain_lanes<const L: usize>(
    entries: &[Entry],
    seeds: impl IntoIterator<Item = (u32, [f64; L])>,
    adjoint: &mut [[f64; L]],
) {
    for (id, ct) in seeds {
        if let Some(a) = adjoint.get_mut(id as usize) {
            for (a, ct) in a.iter_mut().zip(ct) {
                *a += ct;
            }
        }
    }
    let all_zero = |a: &[f64; L]| a.iter().all(|&a| a == 0.0);
    walk_back(entries, adjoint, all_zero, |e, &a, adjoint| {
        pass_on_lanes(e, a, adjoint)
    });
}

/// [`pass_on`] lane by lane, a zero lane of `a` adding `-0.0`.
#[inline(always)]
fn pass_on_lanes<const L: usize>(e: &Entry, a: [f64; L], adjoint: &mut [[f64; L]]) {
    for k in 0..2 {
        let w = e.weights[k];
        if let Some(p) = adjoint.get_mut(e.parents[k] as usize)
            && w != 0.0
        {
            for (p, a) in p.iter_mut().zip(a) {
                *p += if a != 0.0 { w * a } else { -0.0 };
            }
        }
    }
}

/// The number of inputs of a trace of plain `entries`: the entries without
/// parents at its start (a Delta with no term is never recorded otherwise).
#[inline]
pub fn leading_inputs(entries: &[Entry]) -> usize {
    entries
        .iter()
        .take_while(|e| e.parents == [NO_PARENT; 2])
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Weights and cotangents that test the sweep's zero rules: signed
    /// zeros, infinities, NaN, and ordinary values.
    fn real() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(1.0),
            Just(f64::INFINITY),
            Just(f64::NAN),
            -3.0..3.0f64,
        ]
    }

    /// A trace of `n` entries after `inputs` inputs, each parent before its
    /// entry or absent (or, now and then, past the end: ignored).
    fn trace() -> impl Strategy<Value = Vec<Entry>> {
        (1usize..6, 0usize..40).prop_flat_map(|(inputs, n)| {
            let entry = |id: usize| {
                let parent = prop_oneof![
                    8 => (0..id as u32).boxed(),
                    1 => Just(NO_PARENT).boxed(),
                    1 => Just(1u32 << 30).boxed(),
                ];
                (parent.clone(), real(), parent, real()).prop_map(|(p0, w0, p1, w1)| Entry {
                    parents: [p0, p1],
                    weights: [w0, w1],
                })
            };
            let rest: Vec<_> = (inputs..inputs + n).map(entry).collect();
            rest.prop_map(move |rest| {
                let mut all = vec![Entry::default(); inputs];
                for e in &mut all {
                    e.parents = [NO_PARENT; 2];
                }
                all.extend(rest);
                all
            })
        })
    }

    /// A large level's adjoint buffer, given back when it ends, is the
    /// next sweep's (not allocated again), and comes back all zeros.
    #[test]
    fn adjoint_buffers_are_recycled_zeroed() {
        let mut dirty = vec![7.0; 5000];
        dirty.truncate(10);
        let address = dirty.as_ptr();
        recycle_adjoints(dirty);
        let mut next = Vec::new();
        zero_adjoints(&mut next, 4000);
        assert_eq!(next.as_ptr(), address);
        assert_eq!(next.len(), 4000);
        assert!(next.iter().all(|a| a.to_bits() == 0));
        // A need beyond the spare's capacity allocates; the spare stays.
        recycle_adjoints(next);
        let mut big = Vec::new();
        zero_adjoints(&mut big, 6000);
        assert_ne!(big.as_ptr(), address);
        let mut small = Vec::new();
        zero_adjoints(&mut small, 1);
        assert_eq!(small.as_ptr(), address);
    }

    /// A trace of `inputs` inputs, then the products `(i, j, wᵢ, wⱼ)` —
    /// `wᵢ · Var i + wⱼ · Var j` — summed: real by real in the language's
    /// lanes (`prim::sum_in_lanes`), each addition a Delta `1 · Var a + 1 ·
    /// Var b`, or, if `summed`, as one [`SUM_OF_PRECEDING`] Delta after
    /// them. Returns the entries and the sum's id.
    fn summed(inputs: usize, products: &[(u32, u32, f64, f64)], summed: bool) -> (Vec<Entry>, u32) {
        let mut entries = vec![
            Entry {
                parents: [NO_PARENT; 2],
                weights: [0.0; 2]
            };
            inputs
        ];
        let push = |entries: &mut Vec<Entry>, parents, weights| {
            entries.push(Entry { parents, weights });
            entries.len() as u32 - 1
        };
        if summed {
            for &(i, j, wi, wj) in products {
                push(&mut entries, [i, j], [wi, wj]);
            }
            let n = products.len() as u32;
            let id = push(&mut entries, [SUM_OF_PRECEDING, n], [0.0; 2]);
            return (entries, id);
        }
        let mut lanes = crate::prim::Lanes::default();
        for &(i, j, wi, wj) in products {
            let p = push(&mut entries, [i, j], [wi, wj]);
            let mut add = |a: u32, b: u32| Ok::<_, ()>(push(&mut entries, [a, b], [1.0, 1.0]));
            let _ = lanes.add(p, &mut add);
        }
        let id = lanes
            .total(|a, b| Ok::<_, ()>(push(&mut entries, [a, b], [1.0, 1.0])))
            .and_then(Result::ok)
            .unwrap_or(NO_PARENT);
        (entries, id)
    }

    fn same_bits(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    proptest! {
        /// A sum of products recorded as one `SUM_OF_PRECEDING` Delta
        /// sweeps to the inputs' adjoints of the sum recorded real by real,
        /// to the bit (signed zeros, infinities and NaN in weights and
        /// cotangents), in one lane and in three.
        #[test]
        fn a_summed_delta_sweeps_as_its_additions(
            inputs in 2usize..4,
            products in proptest::collection::vec((0u32..4, 0u32..4, real(), real()), 1..24),
            cts in [real(), real(), real()],
        ) {
            let products: Vec<_> = products
                .into_iter()
                .map(|(i, j, wi, wj)| (i % inputs as u32, j % inputs as u32, wi, wj))
                .filter(|(i, j, _, _)| i != j)
                .collect();
            prop_assume!(!products.is_empty());
            let (scalar, s) = summed(inputs, &products, false);
            let (one, h) = summed(inputs, &products, true);
            let mut a = vec![0.0; scalar.len()];
            let mut b = vec![0.0; one.len()];
            seed_and_sweep_plain(&scalar, [(s, cts[0])], &mut a);
            seed_and_sweep_plain(&one, [(h, cts[0])], &mut b);
            for k in 0..inputs {
                prop_assert!(same_bits(a[k], b[k]), "input {}: {} against {}", k, a[k], b[k]);
            }
            let mut a = vec![[0.0; 3]; scalar.len()];
            let mut b = vec![[0.0; 3]; one.len()];
            seed_and_sweep_plain_lanes(&scalar, [(s, cts)], &mut a);
            seed_and_sweep_plain_lanes(&one, [(h, cts)], &mut b);
            for k in 0..inputs {
                for lane in 0..3 {
                    prop_assert!(same_bits(a[k][lane], b[k][lane]), "input {} lane {}", k, lane);
                }
            }
        }

        /// Each lane of the sweep of three cotangents at once is, to the
        /// bit, the one-lane sweep from that lane's seeds (a NaN for a NaN:
        /// Rust leaves the bits of an operation's NaN unspecified).
        #[test]
        fn lanes_sweep_as_one_lane_each(
            entries in trace(),
            seeds in proptest::collection::vec((0u32..50, [real(), real(), real()]), 0..5),
        ) {
            let mut lanes = vec![[0.0; 3]; entries.len()];
            seed_and_sweep_plain_lanes(&entries, seeds.iter().copied(), &mut lanes);
            for lane in 0..3 {
                let mut one = vec![0.0; entries.len()];
                seed_and_sweep_plain(&entries, seeds.iter().map(|&(id, ct)| (id, ct[lane])), &mut one);
                for (id, (a, b)) in one.iter().zip(&lanes).enumerate() {
                    let same = a.to_bits() == b[lane].to_bits() || (a.is_nan() && b[lane].is_nan());
                    prop_assert!(same, "entry {} lane {}: {} against {}", id, lane, a, b[lane]);
                }
            }
        }
    }
}
