//! The Rust side of native code: the context every generated function gets,
//! and the functions generated code calls for what it does not do inline —
//! allocation (charged to the memory budget), errors, real functions.
//!
//! Every `extern "C"` function here is called only by generated code, with
//! the arguments its declaration in [`crate::codegen`] gives; none of them
//! panics (a panic cannot unwind through generated frames).

use crate::layout;
use nabla::{Binary, Number, Unary};
use nabla_lang::ad::trace::{self, Trace};
use nabla_lang::eval::STEP_LIMIT_EXCEEDED;
use nabla_lang::eval::arith::ArithError;
use nabla_lang::memory;
use nabla_lang::prim::Prim;
use nabla_lang::prim::Role;
use std::alloc::Layout;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// What generated code reads and writes through its first argument. The
/// offsets of the first fields are part of the calling convention
/// ([`Ctx::FAILED`] …).
#[repr(C)]
pub(crate) struct Ctx {
    /// Non-zero once an error was raised: every caller returns at once.
    pub failed: u64,
    /// The lowest address the native stack may reach.
    pub stack_limit: u64,
    /// Calls left before the call limit (only read when one is set).
    pub calls_left: i64,
    /// The state and value slots of the top-level values.
    pub globals: *mut u64,
    /// The limit on vector lengths.
    pub max_vector_len: i64,
    /// The first error raised.
    pub error: Option<Raised>,
    /// Freed small objects kept for reuse, by size class: a list linked
    /// through each object's first word ([`rt_alloc`], [`rt_free`]).
    pub free: [*mut u8; CLASSES],
    /// Where the next small object is carved from the current chunk, and
    /// the chunk's end.
    next: *mut u8,
    end: *mut u8,
    /// Every chunk of the run: small objects live in them, and all are
    /// freed with the context (every object of a run is dropped by its end).
    chunks: Vec<*mut u8>,
    /// The large objects the run allocated and has not freed, with their
    /// sizes: after an error (which returns through every caller without
    /// dropping what they hold) they are garbage, freed with the context.
    large: HashMap<usize, usize, BuildHasherDefault<AddressHasher>>,
    /// Freed medium objects kept for reuse ([`Medium`]).
    medium: Medium,
    /// The Delta traces of the active reverse levels, a stack per level
    /// position ([`nabla_lang::core::typed::ExprKind::Tape`]).
    tapes: [Traces; TAPE_SLOTS],
    /// How many of the active traces are a pullback's replay of its
    /// function (`trace` prints nothing then).
    replaying: u32,
    /// Where generated code appends the Deltas of reverse level 1.
    pub staging: Staging,
    /// The trace of the last `vjp` at reverse level 1, kept for its
    /// pullback ([`rt_tape_keep`]).
    kept: Kept,
    /// Per slot, the wide buffers of its current trace, for generated code.
    wide: [WideView; TAPE_SLOTS],
    /// Per wide slot, the ended trace kept ready for the next level, which
    /// generated code begins and ends inline (level 1's: `staging.parked`).
    parked: [Parked; TAPE_SLOTS],
    /// After [`rt_tape_resume`]: the id the next `TapeOp::InputAgain` gives
    /// and the resumed trace's count of inputs (its first Deltas, in
    /// order), which generated code reads and advances inline.
    pub again: InputsAgain,
    /// The word the view of a slot without a wide trace points to (made by
    /// `Box::into_raw`, freed with the context).
    no_buffer: *mut u64,
}

/// The inputs of a resumed kept trace, given again in order
/// (`TapeOp::InputAgain`): ids `next`, `next + 1`, …, below `end`; −1 past
/// them.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct InputsAgain {
    pub next: i64,
    pub end: i64,
}

/// A plain Delta `w₀·Var p₀ + w₁·Var p₁` as generated code writes it (an
/// absent parent is `u32::MAX`, the trace's `NO_PARENT`): the trace's own
/// entry, written straight into the trace's buffer.
pub(crate) type Staged = nabla_lang::ad::trace::Entry;

// The layout generated code writes (`FnGen::write_staged`).
const _: () = assert!(
    size_of::<Staged>() == 24
        && std::mem::offset_of!(Staged, parents) == 0
        && std::mem::offset_of!(Staged, weights) == 8
);

/// Where generated code appends the Deltas of reverse level 1 inline — the
/// outermost level, whose weights are always plain reals, and which records
/// the most: the spare capacity of that level's current trace, lent by
/// [`flush`]. Entry `base + k` of the trace is `ptr[k]` for `k < len`, and
/// generated code writes there while `len < cap`. The runtime takes them
/// onto the trace ([`flush`]: it sets the trace's length, no copy) when the
/// spare capacity is used up and before it touches the trace in any other
/// way, and lends the spare capacity again after, so the trace is the
/// interpreter's, entry for entry.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Staging {
    pub ptr: *mut Staged,
    pub len: u64,
    pub cap: u64,
    pub base: u64,
    /// The inputs' adjoints of the current trace of level 1 after its last
    /// sweep, for generated code to read in place: `adjoints_len` of them
    /// at `adjoints` (0 after any flush, which every change of that trace
    /// or of which trace is current makes: then generated code asks
    /// [`rt_tape_adjoint`]).
    pub adjoints: *const f64,
    pub adjoints_len: u64,
    /// Lent instead of a trace's spare capacity while level 1 has no trace
    /// (made on first use, freed with the context): what is written there
    /// is dropped, as the interpreter has nowhere to record it either.
    pub scratch: *mut Staged,
    /// Level 1's parked trace, while it has no active one.
    pub parked: ParkedBuffer,
}

/// Level 1's ended trace kept ready for its next level ([`Parked`]), while
/// the level has no active trace (the scratch buffer is lent): a level
/// generated code begins inline is lent the trace's spare capacity (all of
/// it: the trace is empty), and when it ends inline the scratch buffer is
/// lent again. Its seeds and sweep, runtime calls, leave the trace alone:
/// the seeds are held here and the sweep runs over the lent buffer, in the
/// trace's adjoint buffer ([`sweep_lent`]). Any other runtime call on the
/// level adopts it ([`adopt`]); the sweep of an adopted level lends it
/// back, emptied ([`lend_again`]).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct ParkedBuffer {
    /// [`Parked::NONE`], [`Parked::READY`], [`Parked::LENT`] or, once the
    /// runtime adopted the lent level, [`Parked::ADOPTED`].
    pub state: u64,
    pub ptr: *mut Staged,
    pub cap: u64,
    /// The trace's adjoint buffer, room for `adjoints_cap` reals.
    adjoints: *mut f64,
    adjoints_cap: usize,
    /// The cotangents seeded on the lent level so far, in order.
    seeds: [(u32, f64); LENT_SEEDS],
    seeds_len: usize,
    /// The adjoints the last sweep of the lent level wrote in the adjoint
    /// buffer ([`sweep_lent`]; 0: not swept).
    swept: usize,
}

/// Seeds a lent level holds before its sweep: a gradient seeds one per
/// real of its output.
const LENT_SEEDS: usize = 4;

impl ParkedBuffer {
    const NONE: ParkedBuffer = ParkedBuffer {
        state: Parked::NONE,
        ptr: std::ptr::null_mut(),
        cap: 0,
        adjoints: std::ptr::null_mut(),
        adjoints_cap: 0,
        seeds: [(0, 0.0); LENT_SEEDS],
        seeds_len: 0,
        swept: 0,
    };

    /// Parks `cap` Deltas at `ptr` in `state`, with an adjoint buffer, no
    /// seed held. (Field by field: the held seeds' room is not copied.)
    fn set(
        &mut self,
        state: u64,
        (ptr, cap): (*mut Staged, u64),
        (adjoints, adjoints_cap): (*mut f64, usize),
    ) {
        (self.state, self.ptr, self.cap) = (state, ptr, cap);
        (self.adjoints, self.adjoints_cap) = (adjoints, adjoints_cap);
        (self.seeds_len, self.swept) = (0, 0);
    }

    /// Holds the seed `(id, ct)` of the lent level, if the level is lent
    /// and there is room: true if held.
    fn hold_seed(&mut self, id: u32, ct: f64) -> bool {
        let held = self.state == Parked::LENT && self.seeds_len < LENT_SEEDS;
        if held {
            self.seeds[self.seeds_len] = (id, ct);
            self.seeds_len += 1;
        }
        held
    }
}

/// Entries of the scratch buffer ([`Staging::scratch`]).
pub(crate) const SCRATCH: usize = 4096;

/// Reverse-level positions have numbers below this (compiled
/// differentiation nests at most 6 levels).
pub(crate) const TAPE_SLOTS: usize = 8;

/// One reverse level's trace: the interpreter's own, so that both back ends
/// record the same Deltas and sweep them by the same loop. A level above
/// other levels records its Deltas with wide weights in buffers of its own
/// instead ([`TapeOp`](nabla_lang::core::typed::TapeOp)), which generated
/// code appends to, reads and sweeps in place through the context's
/// [`WideView`] of them.
struct Tape {
    trace: Trace,
    /// Every Delta's adjoint after the last (plain) sweep, the inputs'
    /// first ([`Tape::input_adjoints`]).
    adjoints: Vec<f64>,
    /// Components of a wide weight (0: plain `f64` weights on `trace`).
    width: usize,
    /// Wide Deltas, a record of [`Tape::stride`] words each: its two
    /// parents (−1 for none), then its two weights' components. Always
    /// initialised to its full length and never empty, so that an index
    /// clamped to it is in bounds; the records past `wide_len` are garbage.
    records: Vec<u64>,
    /// Wide Deltas recorded. While this is its slot's current trace,
    /// generated code counts them in the view ([`WideView::len`]).
    wide_len: usize,
    /// Wide adjoints: width words per Delta (never empty, as `records`).
    wide_adjoints: Vec<u64>,
    /// Bytes charged to the memory budget for the two wide buffers.
    charged: usize,
    /// The cotangents of the output Deltas, for the next (plain) sweep.
    seeds: Vec<(u32, f64)>,
    /// A pullback's replay of its function.
    replay: bool,
}

/// An output's Delta `Scale coefficient (Var id)` (id −1: a constant).
#[derive(Clone, Copy)]
struct OutputDelta {
    id: i64,
    coefficient: f64,
}

/// The traces of one reverse-level position: a stack, whose ended traces
/// stay in place above the active ones for their buffers (a nested
/// optimisation begins a level per step; the next one begun reuses them,
/// without moving them or growing fresh ones).
#[derive(Default)]
struct Traces {
    all: Vec<Tape>,
    active: usize,
}

/// The trace a `vjp` at reverse level 1 made, kept for its pullback: applied
/// while it is kept, the pullback sweeps it instead of recording its
/// function again (`TapeOp::Keep`, `TapeOp::Resume`). One is kept at a
/// time (a pullback applied after another `vjp` records again), so the
/// memory kept is bounded and needs no owner in generated code.
///
/// A kept trace never goes back on level 1's stack of traces: a pullback
/// seeds and sweeps it here, in its own adjoints, whatever level 1 is
/// doing meanwhile (a pullback applied inside a `grad`), so applying it
/// flushes nothing. Keeping swaps buffers with the level's trace position
/// (no allocation): the position gets the buffer kept before, emptied, in
/// which the next level begins — inline, parked as any ended level's.
#[derive(Default)]
struct Kept {
    /// The token of the kept trace (0: none, `trace` is then a spare buffer).
    token: i64,
    trace: Trace,
    /// The kept trace's output Deltas, in the order of the cotangent's reals.
    outputs: Vec<OutputDelta>,
    /// The outputs `TapeOp::Output` gave for the next `TapeOp::Keep`.
    pending: Vec<OutputDelta>,
    /// Set from `TapeOp::Resume` to the pullback's `TapeOp::End`: the
    /// level-1 `SeedOutput(s)`, `Sweep` and `End` between are the kept
    /// trace's.
    resumed: bool,
    /// The cotangent's reals given since `Resume`, `(output, real)`: they
    /// seed the outputs' Deltas ([`Kept::seeds`]), or name a row
    /// ([`Kept::basis_row`]).
    cotangent: Vec<(usize, f64)>,
    /// The adjoints of the last sweep (its first are the inputs').
    adjoints: Vec<f64>,
    /// The Jacobian's rows of the trace kept under `rows_of` (0: none):
    /// row j, the inputs' adjoints for the basis cotangent eⱼ, at
    /// `j · inputs` ([`Kept::sweep_rows`]).
    rows: Vec<f64>,
    rows_of: i64,
    /// The row the last sweep published as the inputs' adjoints (`None`:
    /// its own `adjoints`).
    published: Option<usize>,
    /// A spare buffer for a sweep in lanes (at most [`ROW_LANES_BYTES`]).
    lanes: Vec<f64>,
}

/// The most outputs a kept trace's rows are swept for together: one lane
/// each (a lane adds an adjoint per entry, so more would trade more memory
/// for the passes saved).
const ROW_LANES: usize = 4;

/// The most bytes a sweep of the rows in lanes may take (its adjoints, one
/// per entry and lane); a bigger trace sweeps a row per application.
const ROW_LANES_BYTES: usize = 8 << 20;

impl Kept {
    /// The cotangent `seed` for output `j` of the resumed trace.
    fn seed_output(&mut self, j: usize, seed: f64) {
        self.cotangent.push((j, seed));
    }

    /// The seeds of the sweep from the cotangent: each output's Delta
    /// seeded with chain(coefficient, seed), in the order given (nothing
    /// for a constant output, or past the outputs).
    fn seeds(&self) -> impl Iterator<Item = (u32, f64)> + '_ {
        self.cotangent.iter().filter_map(|&(j, seed)| {
            let out = self.outputs.get(j)?;
            Some((u32::try_from(out.id).ok()?, out.coefficient.chain(seed)))
        })
    }

    /// `Some(j)` if the cotangent given since `Resume` is the basis
    /// cotangent eⱼ (1 at output j, +0 at the others, bit for bit) of a
    /// trace of 2 to [`ROW_LANES`] outputs: the pattern of a Jacobian by
    /// rows, a pullback applied to each basis cotangent in turn.
    fn basis_row(&self) -> Option<usize> {
        let ct = &self.cotangent;
        let in_order = ct.iter().enumerate().all(|(k, &(j, _))| j == k);
        if !in_order || ct.len() != self.outputs.len() || !(2..=ROW_LANES).contains(&ct.len()) {
            return None;
        }
        let j = ct.iter().position(|x| x.1.to_bits() == 1.0f64.to_bits())?;
        let others_zero = ct
            .iter()
            .all(|&(k, x)| k == j || x.to_bits() == 0.0f64.to_bits());
        others_zero.then_some(j)
    }

    /// Sweeps the kept trace for every basis cotangent at once, one lane
    /// each, and keeps the inputs' adjoints as its rows: each row is, bit
    /// for bit, what a sweep seeded with that cotangent gives
    /// ([`trace::seed_and_sweep_plain_lanes`]), so a pullback applied to
    /// each basis cotangent in turn — BA's blocks, `jacobian` of a
    /// function of few outputs — sweeps the trace once, not once per row.
    /// False, with nothing done, if the lanes would take more than
    /// [`ROW_LANES_BYTES`] or a weight is not plain.
    fn sweep_rows(&mut self) -> bool {
        match self.outputs.len() {
            2 => self.sweep_rows_in::<2>(),
            3 => self.sweep_rows_in::<3>(),
            4 => self.sweep_rows_in::<4>(),
            _ => false,
        }
    }

    fn sweep_rows_in<const L: usize>(&mut self) -> bool {
        if self.trace.len() * L * size_of::<f64>() > ROW_LANES_BYTES {
            return false;
        }
        // Output k seeds lane j with chain(coefficient, δₖⱼ), in output
        // order, as the one-lane pullback seeds each basis cotangent.
        let seeds = self.outputs.iter().enumerate().filter_map(|(k, out)| {
            let id = u32::try_from(out.id).ok()?;
            let lane = |j: usize| out.coefficient.chain(if j == k { 1.0 } else { 0.0 });
            Some((id, std::array::from_fn(lane)))
        });
        if !self
            .trace
            .backpropagate_plain_lanes::<L>(seeds, &mut self.lanes)
        {
            return false;
        }
        let inputs = self.trace.inputs().min(self.trace.len());
        let (lanes, _) = self.lanes.as_chunks::<L>();
        let lanes = &lanes[..inputs];
        self.rows.resize(inputs * L, 0.0);
        for (j, row) in self.rows.chunks_exact_mut(inputs.max(1)).enumerate() {
            for (a, lane) in row.iter_mut().zip(lanes) {
                *a = lane[j];
            }
        }
        self.rows_of = self.token;
        true
    }

    /// The inputs' adjoints the last sweep published.
    fn input_adjoints(&self) -> &[f64] {
        match self.published {
            Some(j) => {
                let inputs = self.rows.len() / self.outputs.len().max(1);
                &self.rows[j * inputs..(j + 1) * inputs]
            }
            None => &self.adjoints[..self.trace.inputs().min(self.adjoints.len())],
        }
    }
}

/// Ended traces a position keeps for reuse.
const KEPT_TRACES: usize = 4;

/// An ended plain trace whose buffer is at most this big keeps it in its
/// position (a nested optimisation begins and ends a level per step).
const KEPT_IN_PLACE_BYTES: usize = 64 << 10;

impl Traces {
    /// The innermost active trace.
    fn current(&mut self) -> Option<&mut Tape> {
        self.all[..self.active].last_mut()
    }

    /// A fresh trace on top, with weights of `width` words (0: plain).
    fn begin(&mut self, width: usize, replay: bool) {
        match self.all.get_mut(self.active) {
            Some(t) => t.restart(width, replay),
            None => self.all.push(Tape::new(width, replay)),
        }
        self.active += 1;
    }

    /// Swaps the innermost active trace into `kept`, which holds it from
    /// now on with the pending outputs; the position gets the buffer
    /// `kept` had, emptied. (The caller ends the position's trace.)
    fn keep(&mut self, kept: &mut Kept) {
        let Some(t) = self.current() else { return };
        std::mem::swap(&mut t.trace, &mut kept.trace);
        t.trace.clear();
        std::mem::swap(&mut kept.outputs, &mut kept.pending);
        kept.pending.clear();
        // The adjoints are charged with the trace (an adjoint per entry of
        // its buffer): those of a bigger trace kept before are let go.
        if kept.adjoints.capacity() > kept.trace.buffer_bytes() / size_of::<Staged>() {
            kept.adjoints = Vec::new();
        }
    }

    /// Ends the innermost active trace; returns whether it was a replay. A
    /// small trace keeps its buffer in place for the next trace begun here
    /// ([`Tape::restart`]); a larger one goes back to the thread's spare
    /// buffer, which is not charged to the memory budget.
    fn end(&mut self) -> bool {
        let Some(t) = self.current() else {
            return false;
        };
        let replay = t.replay;
        if t.trace.buffer_bytes() > KEPT_IN_PLACE_BYTES {
            std::mem::take(&mut t.trace).recycle();
            trace::recycle_adjoints(std::mem::take(&mut t.adjoints));
        }
        self.active -= 1;
        self.all.truncate(self.active + KEPT_TRACES);
        replay
    }
}

/// Wide records a level's buffer first has room for.
const FIRST_RECORDS: usize = 256;

impl Tape {
    fn new(width: usize, replay: bool) -> Tape {
        let mut t = Tape {
            trace: Trace::default(),
            adjoints: Vec::new(),
            width: 0,
            records: Vec::new(),
            wide_len: 0,
            wide_adjoints: Vec::new(),
            charged: 0,
            seeds: Vec::new(),
            replay: false,
        };
        t.restart(width, replay);
        t
    }

    /// Empties this ended trace (its buffers kept) for a new level. Only a
    /// plain level records on the interpreter's trace, so only it takes
    /// the thread's spare buffer if it has none of its own.
    fn restart(&mut self, width: usize, replay: bool) {
        if width == 0 && self.trace.buffer_bytes() == 0 {
            self.trace = Trace::new();
        } else {
            self.trace.clear();
        }
        self.reset(width, replay);
    }

    /// Everything but the trace itself emptied for a level of weights of
    /// `width` words.
    fn reset(&mut self, width: usize, replay: bool) {
        self.adjoints.clear();
        self.seeds.clear();
        self.width = width;
        self.replay = replay;
        // The old records stay as garbage past `wide_len`: no need to clear.
        self.wide_len = 0;
        if width > 0 && self.records.len() < FIRST_RECORDS * self.stride() {
            self.records.resize(FIRST_RECORDS * self.stride(), 0);
        }
        // The adjoints are set before every sweep (`TapeOp::AdjInit`): kept,
        // so that a small level never grows them again.
        if self.wide_adjoints.is_empty() {
            self.wide_adjoints.push(0);
        }
        self.charge();
    }

    /// The adjoint buffer, with room for an adjoint per Delta the trace's
    /// buffer holds, for a level lent that buffer to be swept in
    /// ([`sweep_lent`]). (Within the trace's charge, which counts an
    /// adjoint per entry.)
    fn lendable_adjoints(&mut self) -> (*mut f64, usize) {
        let room = self.trace.buffer_bytes() / size_of::<Staged>();
        self.adjoints
            .reserve(room.saturating_sub(self.adjoints.len()));
        (self.adjoints.as_mut_ptr(), self.adjoints.capacity())
    }

    /// The inputs' adjoints after the last (plain) sweep.
    fn input_adjoints(&self) -> &[f64] {
        &self.adjoints[..self.trace.inputs().min(self.adjoints.len())]
    }

    /// Words per wide record: two parents and two weights of `width` words.
    fn stride(&self) -> usize {
        2 + 2 * self.width
    }

    /// Wide records the buffer has room for.
    fn capacity(&self) -> usize {
        self.records.len() / self.stride()
    }

    /// Room for the next wide record (the buffer doubled if it is full).
    fn reserve_record(&mut self) {
        if self.wide_len >= self.capacity() {
            let records = (2 * self.capacity()).max(FIRST_RECORDS);
            self.records.resize(records * self.stride(), 0);
            self.charge();
        }
    }

    /// What generated code needs to reach the wide buffers in place.
    fn view(&mut self) -> WideView {
        WideView {
            records: self.records.as_mut_ptr(),
            stride: self.stride() as u64,
            len: self.wide_len as u64,
            capacity: self.capacity() as u64,
            last_record_word: self.records.len().saturating_sub(1) as u64,
            adjoints: self.wide_adjoints.as_mut_ptr(),
            width: self.width as u64,
            last_adjoint_word: self.wide_adjoints.len().saturating_sub(1) as u64,
        }
    }

    /// Charges the wide buffers' growth to the memory budget.
    fn charge(&mut self) {
        let bytes = (self.records.capacity() + self.wide_adjoints.capacity()) * 8;
        // Only growth is charged: a level begun again in place (the usual
        // case) does not touch the thread's count.
        if bytes > self.charged {
            memory::charge(bytes - self.charged);
            self.charged = bytes;
        }
    }
}

/// The wide buffers of a reverse level's current trace ([`Tape::records`],
/// [`Tape::wide_adjoints`]) as generated code reads and writes them: a
/// Delta's parent or weight component `k` is word `id · stride + k` of
/// `records`, its adjoint's component `j` word `id · width + j` of
/// `adjoints`, each index clamped to the buffer's last word (memory safety
/// does not depend on the ids being right). Generated code appends a Delta
/// in place when `len < capacity` and the stride is its own, and otherwise
/// calls [`rt_tape_reserve`]. The runtime makes the view again whenever it
/// begins, ends or grows a trace of the slot ([`publish`]); a slot with no
/// wide trace is viewed as an empty one over [`Ctx::no_buffer`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct WideView {
    pub records: *mut u64,
    pub stride: u64,
    pub len: u64,
    pub capacity: u64,
    pub last_record_word: u64,
    pub adjoints: *mut u64,
    pub width: u64,
    pub last_adjoint_word: u64,
}

impl WideView {
    /// The view of no trace: nothing recorded, no room, every index
    /// clamped into the one word at `blank`.
    fn empty(blank: *mut u64) -> WideView {
        WideView {
            records: blank,
            stride: 0,
            len: 0,
            capacity: 0,
            last_record_word: 0,
            adjoints: blank,
            width: 0,
            last_adjoint_word: 0,
        }
    }

    /// The offset in the context of field `field` (an offset in
    /// [`WideView`]) of slot `slot`'s view.
    pub(crate) fn at(slot: u8, field: usize) -> i32 {
        (std::mem::offset_of!(Ctx, wide) + usize::from(slot) * size_of::<WideView>() + field) as i32
    }

    pub(crate) const RECORDS: usize = std::mem::offset_of!(WideView, records);
    pub(crate) const STRIDE: usize = std::mem::offset_of!(WideView, stride);
    pub(crate) const LEN: usize = std::mem::offset_of!(WideView, len);
    pub(crate) const CAPACITY: usize = std::mem::offset_of!(WideView, capacity);
    pub(crate) const LAST_RECORD_WORD: usize = std::mem::offset_of!(WideView, last_record_word);
    pub(crate) const ADJOINTS: usize = std::mem::offset_of!(WideView, adjoints);
    pub(crate) const WIDTH: usize = std::mem::offset_of!(WideView, width);
    pub(crate) const LAST_ADJOINT_WORD: usize = std::mem::offset_of!(WideView, last_adjoint_word);
}

/// An ended wide trace of a slot kept ready for the slot's next level: in a
/// nested optimisation the inner level begins and ends once per step, and
/// generated code does both inline on the parked trace (`TapeOp::Begin` of
/// a level of the parked width that is not a replay, and its `End`), the
/// runtime not told. While such a level runs, the trace is *lent*; the
/// runtime adopts it as an active trace ([`adopt`]) before it touches the
/// slot in any way, and parks a trace again after it begins or ends one
/// ([`park`]). Level 1, whose Deltas are staged, parks the spare capacity
/// of its trace instead ([`ParkedBuffer`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parked {
    /// [`Parked::NONE`], [`Parked::READY`] or [`Parked::LENT`].
    pub state: u64,
    /// The width of the parked trace's weights.
    pub width: u64,
    /// The parked trace's view, nothing recorded: the slot's view once a
    /// level begins inline on it.
    pub view: WideView,
    /// The slot's view when the lent level began: its view again when
    /// that level ends inline.
    pub outer: WideView,
}

impl Parked {
    /// No trace parked.
    fn none(blank: *mut u64) -> Parked {
        Parked {
            state: Parked::NONE,
            width: 0,
            view: WideView::empty(blank),
            outer: WideView::empty(blank),
        }
    }

    /// The offset in the context of field `field` (an offset in [`Parked`])
    /// of slot `slot`'s parked trace.
    pub(crate) fn at(slot: u8, field: usize) -> i32 {
        (std::mem::offset_of!(Ctx, parked) + usize::from(slot) * size_of::<Parked>() + field) as i32
    }

    /// No trace parked.
    pub(crate) const NONE: u64 = 0;
    /// A trace parked, for the next level to begin inline.
    pub(crate) const READY: u64 = 1;
    /// A level generated code began inline runs on the parked trace.
    pub(crate) const LENT: u64 = 2;
    /// (Level 1 only.) The runtime adopted such a level, which its sweep
    /// lends back ([`lend_again`]) unless another level began since.
    const ADOPTED: u64 = 3;

    pub(crate) const STATE: usize = std::mem::offset_of!(Parked, state);
    pub(crate) const WIDTH: usize = std::mem::offset_of!(Parked, width);
    pub(crate) const VIEW: usize = std::mem::offset_of!(Parked, view);
    pub(crate) const OUTER: usize = std::mem::offset_of!(Parked, outer);
}

impl Drop for Tape {
    fn drop(&mut self) {
        memory::release(self.charged);
    }
}

impl Ctx {
    /// A context for one run.
    pub(crate) fn new(
        stack_limit: u64,
        calls_left: i64,
        globals: *mut u64,
        max_vector_len: i64,
    ) -> Ctx {
        Ctx {
            failed: 0,
            stack_limit,
            calls_left,
            globals,
            max_vector_len,
            error: None,
            free: [std::ptr::null_mut(); CLASSES],
            next: std::ptr::null_mut(),
            end: std::ptr::null_mut(),
            chunks: Vec::new(),
            large: HashMap::default(),
            medium: Medium::default(),
            tapes: Default::default(),
            replaying: 0,
            staging: Staging {
                ptr: std::ptr::null_mut(),
                len: 0,
                cap: 0,
                base: 0,
                adjoints: std::ptr::null(),
                adjoints_len: 0,
                scratch: std::ptr::null_mut(),
                parked: ParkedBuffer::NONE,
            },
            wide: [WideView::empty(std::ptr::null_mut()); TAPE_SLOTS],
            parked: [Parked::none(std::ptr::null_mut()); TAPE_SLOTS],
            kept: Kept::default(),
            again: InputsAgain::default(),
            no_buffer: Box::into_raw(Box::new(0)),
        }
        .with_empty_views()
    }

    fn with_empty_views(mut self) -> Ctx {
        self.wide = [WideView::empty(self.no_buffer); TAPE_SLOTS];
        self.parked = [Parked::none(self.no_buffer); TAPE_SLOTS];
        self
    }

    pub(crate) const FAILED: i32 = 0;
    pub(crate) const STACK_LIMIT: i32 = 8;
    pub(crate) const CALLS_LEFT: i32 = 16;
    pub(crate) const GLOBALS: i32 = 24;
    pub(crate) const MAX_VECTOR_LEN: i32 = 32;
    /// The free list heads, one 8-byte slot per class: class k's at
    /// `FREE + 8k` (generated code pops and pushes them inline).
    pub(crate) const FREE: i32 = std::mem::offset_of!(Ctx, free) as i32;
    /// The fields of [`Staging`] (generated code appends Deltas inline).
    pub(crate) const STAGING_PTR: i32 =
        (std::mem::offset_of!(Ctx, staging) + std::mem::offset_of!(Staging, ptr)) as i32;
    pub(crate) const STAGING_LEN: i32 =
        (std::mem::offset_of!(Ctx, staging) + std::mem::offset_of!(Staging, len)) as i32;
    pub(crate) const STAGING_CAP: i32 =
        (std::mem::offset_of!(Ctx, staging) + std::mem::offset_of!(Staging, cap)) as i32;
    pub(crate) const STAGING_BASE: i32 =
        (std::mem::offset_of!(Ctx, staging) + std::mem::offset_of!(Staging, base)) as i32;
    pub(crate) const STAGING_ADJOINTS: i32 =
        (std::mem::offset_of!(Ctx, staging) + std::mem::offset_of!(Staging, adjoints)) as i32;
    /// The fields of [`InputsAgain`].
    pub(crate) const AGAIN_NEXT: i32 =
        (std::mem::offset_of!(Ctx, again) + std::mem::offset_of!(InputsAgain, next)) as i32;
    pub(crate) const AGAIN_END: i32 =
        (std::mem::offset_of!(Ctx, again) + std::mem::offset_of!(InputsAgain, end)) as i32;
    pub(crate) const STAGING_ADJOINTS_LEN: i32 =
        (std::mem::offset_of!(Ctx, staging) + std::mem::offset_of!(Staging, adjoints_len)) as i32;
    pub(crate) const STAGING_SCRATCH: i32 =
        (std::mem::offset_of!(Ctx, staging) + std::mem::offset_of!(Staging, scratch)) as i32;
    /// The fields of level 1's [`ParkedBuffer`].
    pub(crate) const PARKED_STATE: i32 = (std::mem::offset_of!(Ctx, staging)
        + std::mem::offset_of!(Staging, parked)
        + std::mem::offset_of!(ParkedBuffer, state))
        as i32;
    pub(crate) const PARKED_PTR: i32 = (std::mem::offset_of!(Ctx, staging)
        + std::mem::offset_of!(Staging, parked)
        + std::mem::offset_of!(ParkedBuffer, ptr)) as i32;
    pub(crate) const PARKED_CAP: i32 = (std::mem::offset_of!(Ctx, staging)
        + std::mem::offset_of!(Staging, parked)
        + std::mem::offset_of!(ParkedBuffer, cap)) as i32;
}

/// The level whose Deltas generated code stages ([`Staging`]).
pub(crate) const STAGED_SLOT: usize = 1;

/// Takes the Deltas generated code wrote since the last flush onto the
/// current trace of level [`STAGED_SLOT`] (they are in its buffer already:
/// only its length is set), and lends generated code that trace's spare
/// capacity again — or the scratch buffer if the level has no trace.
fn flush(ctx: &mut Ctx) {
    adopt(ctx, STAGED_SLOT);
    let written = ctx.staging.len as usize;
    let lent = ctx.staging.ptr;
    let (ptr, cap, base) = match ctx.tapes[STAGED_SLOT].current() {
        Some(t) => {
            if written > 0 {
                let scratch = ctx.staging.scratch;
                t.trace.append_in_place(|entries| {
                    let spare = entries.spare_capacity_mut();
                    if lent == spare.as_mut_ptr().cast::<Staged>() {
                        assert!(
                            written <= spare.len(),
                            "internal error: Deltas past the lent capacity"
                        );
                        // SAFETY: `lent` is this buffer's spare capacity, lent
                        // by the last flush, whose length it has had since
                        // (every change to the trace flushes first and lends
                        // again); generated code initialised its first
                        // `written` entries (`len < cap` is checked before
                        // every write) and is suspended in this runtime call.
                        unsafe { entries.set_len(entries.len() + written) };
                    } else {
                        // Written only into the scratch buffer, before this
                        // trace began: dropped.
                        assert!(
                            lent == scratch,
                            "internal error: Deltas written into a buffer no longer lent"
                        );
                    }
                });
            }
            let base = t.trace.len() as u64;
            let (ptr, cap) = spare_of(&mut t.trace);
            (ptr, cap, base)
        }
        None => (scratch(&mut ctx.staging), SCRATCH as u64, 0),
    };
    ctx.staging.lend(ptr, cap, base);
}

/// A trace's spare capacity as generated code is lent it: where its next
/// Delta goes, and how many fit.
fn spare_of(trace: &mut Trace) -> (*mut Staged, u64) {
    let spare = trace.spare_capacity();
    (spare.as_mut_ptr().cast::<Staged>(), spare.len() as u64)
}

impl Staging {
    /// Lends generated code `cap` Deltas at `ptr`, the first of id `base`,
    /// nothing written yet, and withdraws the view of adjoints.
    fn lend(&mut self, ptr: *mut Staged, cap: u64, base: u64) {
        (self.ptr, self.len, self.cap, self.base) = (ptr, 0, cap, base);
        self.adjoints_len = 0;
    }
}

/// The scratch buffer, made on first use.
fn scratch(staging: &mut Staging) -> *mut Staged {
    if staging.scratch.is_null() {
        let buffer = vec![Staged::default(); SCRATCH].into_boxed_slice();
        staging.scratch = Box::into_raw(buffer).cast::<Staged>();
        memory::charge(SCRATCH * size_of::<Staged>());
    }
    staging.scratch
}

/// Generated code found the lent capacity used up (or none lent yet): takes
/// its Deltas onto the trace, makes room for more (at least doubling the
/// trace's buffer) and lends it, and raises "out of memory" at `span` if
/// the trace is over the budget.
pub(crate) extern "C" fn rt_tape_flush(ctx: *mut Ctx, span: u32) {
    // SAFETY: as in `rt_error`.
    let c = unsafe { &mut *ctx };
    flush(c);
    if c.staging.cap == 0 {
        if let Some(t) = c.tapes[STAGED_SLOT].current() {
            t.trace.make_room();
        }
        flush(c);
    }
    if over_budget(c) {
        let live = memory::live() as i64;
        rt_error(ctx, ErrorKind::OutOfMemory as u32, span, 24, live);
    }
}

/// True if the thread is over the memory budget even after the kept
/// medium objects are given back ([`Medium`]).
fn over_budget(c: &mut Ctx) -> bool {
    if !memory::over_budget() {
        return false;
    }
    c.medium.release_all();
    memory::over_budget()
}

/// An error raised by generated code: its kind, the index of its position
/// in the module's span table, and up to two numbers for the message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raised {
    pub kind: ErrorKind,
    pub span: u32,
    pub a: i64,
    pub b: i64,
    /// Reported at the closure application it returns through first
    /// ([`rt_error_site`]): a pullback's cotangent error, which the
    /// interpreter reports where the pullback is applied, and a custom
    /// rule's shape error (where the partial application is applied).
    pub at_caller: bool,
    /// Which standard-library error, for [`ErrorKind::Library`].
    pub code: i64,
}

/// The run-time errors of native code: the interpreter's, with the same
/// messages ([`Raised::message`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum ErrorKind {
    IndexOutOfRange = 0,
    DivByZero = 1,
    /// Integer overflow in the operator whose name is `a`'s [`OVERFLOW_OPS`] entry.
    Overflow = 2,
    NegativeBuild = 3,
    BuildTooLong = 4,
    ZipLengths = 5,
    StackDepth = 6,
    CallLimit = 7,
    /// Out of memory: `a` bytes requested.
    OutOfMemory = 8,
    /// A global's value depends on itself (`a` is the global's index).
    Cycle = 9,
    /// `to_int` of a real (`a` its bits) that is NaN or out of range.
    NotAnInt = 10,
    /// A `jvp` tangent vector of length `a` for a point of length `b`.
    TangentLength = 11,
    /// A `jvp` tangent with constructor `a` (0 `inl`, 1 `inr`) for a point
    /// with constructor `b`.
    TangentConstructor = 12,
    /// A bug of the compiler, caught at run time (never expected).
    Internal = 13,
    /// A pullback's cotangent vector of length `a` for an output of length
    /// `b` (reported at the pullback's application).
    CotangentLength = 14,
    /// A pullback's cotangent with constructor `a` for an output with
    /// constructor `b` (reported at the pullback's application).
    CotangentConstructor = 15,
    /// A standard-library error (`prim'fail`): [`Raised::code`], `a` and
    /// `b` make its message (`nabla_lang::prim::fail_message`).
    Library = 16,
    /// A `custom_jvp` tangent map's result with a vector of length `a`
    /// where the function's value has length `b`.
    CustomTangentLength = 17,
    /// A `custom_jvp` tangent map's result with constructor `a` where the
    /// function's value has constructor `b`.
    CustomTangentConstructor = 18,
    /// A `custom_vjp` pullback's result with a vector of length `a` where
    /// the point has length `b`.
    CustomCotangentLength = 19,
    /// A `custom_vjp` pullback's result with constructor `a` where the
    /// point has constructor `b`.
    CustomCotangentConstructor = 20,
    /// A wide Delta appended to a trace with other weights, or none (a bug
    /// of the compiler, caught at run time; never expected).
    BadTrace = 21,
}

/// The operators whose overflow is an error, by the index generated code passes.
pub(crate) const OVERFLOW_OPS: [Prim; 5] = [Prim::Add, Prim::Sub, Prim::Mul, Prim::Div, Prim::Rem];

impl ErrorKind {
    pub(crate) fn from_code(code: u32) -> ErrorKind {
        use ErrorKind::*;
        [
            IndexOutOfRange,
            DivByZero,
            Overflow,
            NegativeBuild,
            BuildTooLong,
            ZipLengths,
            StackDepth,
            CallLimit,
            OutOfMemory,
            Cycle,
            NotAnInt,
            TangentLength,
            TangentConstructor,
            Internal,
            CotangentLength,
            CotangentConstructor,
            Library,
            CustomTangentLength,
            CustomTangentConstructor,
            CustomCotangentLength,
            CustomCotangentConstructor,
            BadTrace,
        ]
        .get(code as usize)
        .copied()
        .unwrap_or(StackDepth)
    }
}

impl ErrorKind {
    /// The shape error about the value `role` names: a vector of another
    /// length, or (`constructor`) a sum with the other constructor.
    pub(crate) fn shape(role: Role, constructor: bool) -> ErrorKind {
        use ErrorKind::*;
        match (role, constructor) {
            (Role::Tangent, false) => TangentLength,
            (Role::Tangent, true) => TangentConstructor,
            (Role::Cotangent, false) => CotangentLength,
            (Role::Cotangent, true) => CotangentConstructor,
            (Role::CustomTangent, false) => CustomTangentLength,
            (Role::CustomTangent, true) => CustomTangentConstructor,
            (Role::CustomCotangent, false) => CustomCotangentLength,
            (Role::CustomCotangent, true) => CustomCotangentConstructor,
        }
    }

    /// For a shape error, which value it is about and whether it is about a
    /// sum's constructor (else a vector's length): [`ErrorKind::shape`]
    /// read backwards.
    fn shape_role(self) -> Option<(Role, bool)> {
        [
            Role::Tangent,
            Role::Cotangent,
            Role::CustomTangent,
            Role::CustomCotangent,
        ]
        .into_iter()
        .flat_map(|r| [(r, false), (r, true)])
        .find(|&(r, sum)| ErrorKind::shape(r, sum) == self)
    }
}

impl Raised {
    /// The interpreter's message for this error.
    pub(crate) fn message(&self, global_names: &[String]) -> String {
        let (a, b) = (self.a, self.b);
        match self.kind {
            ErrorKind::IndexOutOfRange => {
                format!("index {a} out of range for a vector of length {b}")
            }
            ErrorKind::DivByZero => ArithError::DivByZero.message(Prim::Div),
            ErrorKind::Overflow => ArithError::Overflow
                .message(OVERFLOW_OPS.get(a as usize).copied().unwrap_or(Prim::Add)),
            ErrorKind::NotAnInt => {
                ArithError::NotAnInt(f64::from_bits(a as u64)).message(Prim::ToInt)
            }
            ErrorKind::NegativeBuild => format!("`build` with negative size {a}"),
            ErrorKind::BuildTooLong => {
                format!("`build` of {a} elements exceeds the limit of {b}")
            }
            ErrorKind::ZipLengths => {
                format!("`zip` of vectors of different lengths ({a} and {b})")
            }
            ErrorKind::TangentLength
            | ErrorKind::TangentConstructor
            | ErrorKind::CotangentLength
            | ErrorKind::CotangentConstructor
            | ErrorKind::CustomTangentLength
            | ErrorKind::CustomTangentConstructor
            | ErrorKind::CustomCotangentLength
            | ErrorKind::CustomCotangentConstructor => {
                let (role, sum) = self.kind.shape_role().unwrap_or((Role::Tangent, false));
                let (primal, other) = role.names();
                if !sum {
                    return format!(
                        "length mismatch: {other} has length {a} where {primal} has length {b}"
                    );
                }
                let name = |tag| if tag == 0 { "an `inl`" } else { "an `inr`" };
                format!(
                    "{other} is {} where {primal} is {}: they must use the same constructor",
                    name(a),
                    name(b)
                )
            }
            ErrorKind::Internal => {
                "internal error: a closure of a function compiled differentiation did not list"
                    .into()
            }
            ErrorKind::BadTrace => {
                "internal error: a Delta that does not fit its reverse level's trace".into()
            }
            ErrorKind::Library => nabla_lang::prim::fail_message(self.code, a, b),
            ErrorKind::StackDepth => "stack depth exceeded".into(),
            ErrorKind::CallLimit => STEP_LIMIT_EXCEEDED.into(),
            ErrorKind::OutOfMemory => memory::MemoryExhausted {
                requested: a as usize,
                live: b as usize,
                budget: memory::budget(),
            }
            .to_string(),
            ErrorKind::Cycle => format!(
                "the value of `{}` depends on itself",
                global_names.get(a as usize).map_or("?", String::as_str)
            ),
        }
    }
}

/// One `trace "label" e` of the compiled code: what [`rt_trace`] needs to
/// print its value.
pub(crate) struct TraceSite {
    /// The label.
    pub label: String,
    /// The type of the traced value (first-order at the call: compiled
    /// differentiation strips perturbed values to their primal first).
    pub ty: nabla_lang::types::Type,
}

/// Prints `label: VALUE` on stderr for a `trace` (unless `nabla run
/// --quiet`), through the interpreter's printer so that both back ends
/// print alike. A function in the value prints as `<function>`. Silent
/// while a pullback replays its function ([`Ctx::replaying`]): the
/// interpreter runs that function once, when `vjp` is called.
pub(crate) extern "C" fn rt_trace(ctx: *mut Ctx, site: *const TraceSite, slots: *const u64) {
    // SAFETY: as in `rt_error`.
    let replaying = unsafe { (*ctx).replaying } > 0;
    if nabla_lang::eval::tracing::is_quiet() || replaying {
        return;
    }
    // SAFETY: `site` is the address of a site the compiled program owns for
    // as long as its code runs.
    let site = unsafe { &*site };
    let width = crate::layout::width(&site.ty);
    // SAFETY: generated code stored the `width` slots of a live value of
    // `site.ty` at `slots`.
    let value = unsafe {
        let slots = std::slice::from_raw_parts(slots, width);
        crate::marshal::read_value(&site.ty, slots, &mut 0)
    };
    nabla_lang::eval::tracing::emit(&site.label, &value);
}

// ---- reverse levels' traces (ExprKind::Tape) ----

/// The context and the innermost trace of `slot`, if there is one (there
/// always is between the `Begin` and `End` generated code emits around a
/// reverse level).
fn tape<'a>(ctx: *mut Ctx, slot: u64) -> Option<&'a mut Tape> {
    // SAFETY: generated code passes the context it was called with, which
    // `Native::run` keeps alive and exclusively lent for the whole run; the
    // reference does not outlive this runtime call.
    let ctx = unsafe { &mut *ctx };
    if slot as usize == STAGED_SLOT {
        // The outermost level is plain (nothing to collect); with nothing
        // staged, the staging base is still its trace's length.
        adopt(ctx, STAGED_SLOT);
        if ctx.staging.len > 0 {
            flush(ctx);
        }
    } else {
        collect(ctx, slot as usize);
    }
    ctx.tapes.get_mut(slot as usize)?.current()
}

/// Takes the count of wide Deltas generated code appended from the view of
/// `slot` into its current trace, before the runtime touches that trace
/// (adopting a level generated code began inline first).
fn collect(ctx: &mut Ctx, slot: usize) {
    adopt(ctx, slot);
    let len = ctx.wide.get(slot).map_or(0, |v| v.len as usize);
    if let Some(t) = ctx.tapes.get_mut(slot).and_then(Traces::current)
        && t.width > 0
    {
        t.wide_len = len;
    }
}

/// Makes a level generated code began inline on the parked trace of `slot`
/// ([`Parked`]) the slot's current trace, as if the runtime had begun it:
/// the enclosing trace's count of Deltas taken from the view the level
/// replaced. The slot has no parked trace then (until [`park`]).
#[inline]
fn adopt(ctx: &mut Ctx, slot: usize) {
    if slot == STAGED_SLOT {
        // The level was lent the parked trace's spare capacity, and began
        // with no enclosing trace (nothing to take from the scratch buffer).
        if ctx.staging.parked.state == Parked::LENT {
            adopt_lent_level_1(ctx);
        }
        return;
    }
    let Some(parked) = ctx.parked.get_mut(slot) else {
        return;
    };
    if parked.state != Parked::LENT {
        return;
    }
    let lent = std::mem::replace(parked, Parked::none(ctx.no_buffer));
    let traces = &mut ctx.tapes[slot];
    if let Some(outer) = traces.current()
        && outer.width > 0
    {
        outer.wide_len = lent.outer.len as usize;
    }
    // The parked trace, past the active ones, was restarted when parked.
    traces.active += 1;
}

/// [`adopt`] of level 1's lent level: its held seeds are its trace's, and
/// so are the adjoints of its sweep, if it was swept in place (generated
/// code reads only the inputs' adjoints after a sweep, from the view, but
/// the runtime answers from the trace once the level is its own).
#[cold]
fn adopt_lent_level_1(ctx: &mut Ctx) {
    let parked = &mut ctx.staging.parked;
    parked.state = Parked::ADOPTED;
    let traces = &mut ctx.tapes[STAGED_SLOT];
    traces.active += 1;
    if let Some(t) = traces.current() {
        t.seeds.extend_from_slice(&parked.seeds[..parked.seeds_len]);
        let swept = parked.swept;
        if swept > 0 && t.adjoints.as_mut_ptr() == parked.adjoints {
            t.adjoints.clear();
            // SAFETY: the parked trace's adjoint buffer is the one
            // `sweep_lent` wrote its first `swept` reals into (the same
            // pointer), within `adjoints_cap`, the Vec's capacity when it
            // was lent (nothing touched the Vec since: the level was lent).
            unsafe { t.adjoints.set_len(swept.min(parked.adjoints_cap)) };
        }
    }
    (parked.seeds_len, parked.swept) = (0, 0);
}

/// Parks the trace past the active ones of `slot`, if there is one (ended,
/// kept for reuse), restarted for a level of its width, after the runtime
/// began, ended or kept a trace of the slot. Level 1 parks only
/// while it has no active trace, and only a buffer it keeps in place.
fn park(ctx: &mut Ctx, slot: usize) {
    if slot == STAGED_SLOT {
        ctx.staging.parked.state = Parked::NONE;
        let traces = &mut ctx.tapes[STAGED_SLOT];
        if traces.active > 0 || ctx.staging.scratch.is_null() {
            return;
        }
        // A trace whose buffer went back to the thread's spare (too big to
        // keep in place, or kept for a pullback) is not parked: the next
        // level takes the spare buffer, which outlives the run.
        if let Some(t) = traces.all.first_mut()
            && (1..=KEPT_IN_PLACE_BYTES).contains(&t.trace.buffer_bytes())
        {
            t.restart(0, false);
            let (ptr, cap) = spare_of(&mut t.trace);
            let adjoints = t.lendable_adjoints();
            ctx.staging.parked.set(Parked::READY, (ptr, cap), adjoints);
        }
        return;
    }
    let blank = ctx.no_buffer;
    let Some(traces) = ctx.tapes.get_mut(slot) else {
        return;
    };
    let parked = match traces.all.get_mut(traces.active) {
        Some(t) if t.width > 0 => {
            t.restart(t.width, false);
            Parked {
                state: Parked::READY,
                width: t.width as u64,
                view: t.view(),
                outer: WideView::empty(blank),
            }
        }
        _ => Parked::none(blank),
    };
    ctx.parked[slot] = parked;
}

/// Makes the view of `slot` show its current trace's wide buffers, after
/// the runtime began, ended or changed a trace of the slot.
fn publish(ctx: *mut Ctx, slot: u64) {
    // SAFETY: as in `tape`.
    let ctx = unsafe { &mut *ctx };
    let blank = ctx.no_buffer;
    let slot = slot as usize;
    let view = match ctx.tapes.get_mut(slot).and_then(Traces::current) {
        Some(t) if t.width > 0 => t.view(),
        _ => WideView::empty(blank),
    };
    if let Some(v) = ctx.wide.get_mut(slot) {
        *v = view;
    }
}

/// `TapeOp::Begin`: a fresh trace for reverse level `slot`, with weights of
/// `width` words (0: plain `f64` weights), for a pullback's replay if
/// `replay` is 1.
pub(crate) extern "C" fn rt_tape_begin(ctx: *mut Ctx, slot: u64, width: i64, replay: i64) {
    // SAFETY: as in `tape`.
    let ctx = unsafe { &mut *ctx };
    let staged = slot as usize == STAGED_SLOT;
    if staged && ctx.staging.len > 0 {
        flush(ctx);
    }
    collect(ctx, slot as usize);
    if let Some(traces) = ctx.tapes.get_mut(slot as usize) {
        let (width, replay) = (usize::try_from(width).unwrap_or(0), replay == 1);
        traces.begin(width, replay);
        ctx.replaying += u32::from(replay);
    }
    if staged {
        flush(ctx);
    }
    publish(ctx, slot);
    park(ctx, slot as usize);
}

/// Generated code found the wide records of `slot` full before appending a
/// Delta of `words` weight components, or its view empty or of another
/// stride (never expected: raises an internal error): grows them, and
/// raises "out of memory" at `span` if they are over the budget.
pub(crate) extern "C" fn rt_tape_reserve(ctx: *mut Ctx, span: u32, slot: u64, words: u64) {
    match tape(ctx, slot) {
        Some(t) if t.width > 0 && 2 * t.width as u64 == words => t.reserve_record(),
        _ => return rt_error(ctx, ErrorKind::BadTrace as u32, span, 0, 0),
    }
    publish(ctx, slot);
    // SAFETY: as in `rt_error`.
    if over_budget(unsafe { &mut *ctx }) {
        let live = memory::live() as i64;
        rt_error(ctx, ErrorKind::OutOfMemory as u32, span, 24, live);
    }
}

/// `TapeOp::Len`: the number of Deltas on the slot's trace.
pub(crate) extern "C" fn rt_tape_len(ctx: *mut Ctx, slot: u64) -> i64 {
    tape(ctx, slot).map_or(0, |t| {
        if t.width > 0 {
            t.wide_len as i64
        } else {
            t.trace.len() as i64
        }
    })
}

/// Generated code found the wide adjoints of `slot` shorter than `words`
/// words before setting every Delta's adjoint (`TapeOp::AdjInit`, inline):
/// lengthens them, and raises "out of memory" at `span` if they are over
/// the budget.
pub(crate) extern "C" fn rt_tape_adj_reserve(ctx: *mut Ctx, span: u32, slot: u64, words: u64) {
    let Some(t) = tape(ctx, slot) else {
        return rt_error(ctx, ErrorKind::BadTrace as u32, span, 0, 0);
    };
    // At most the width of the records, which are already charged.
    let words = words as usize;
    if t.wide_adjoints.len() < words {
        t.wide_adjoints.resize(words, 0);
        t.charge();
    }
    publish(ctx, slot);
    // SAFETY: as in `rt_error`.
    if over_budget(unsafe { &mut *ctx }) {
        let live = memory::live() as i64;
        rt_error(ctx, ErrorKind::OutOfMemory as u32, span, 24, live);
    }
}

/// `TapeOp::Seed`: cotangent `seed` for Delta `id` (nothing if −1) in the
/// next sweep.
pub(crate) extern "C" fn rt_tape_seed(ctx: *mut Ctx, slot: u64, id: i64, seed: f64) {
    let Ok(id) = u32::try_from(id) else { return };
    if slot as usize == STAGED_SLOT {
        // SAFETY: as in `tape`.
        let c = unsafe { &mut *ctx };
        if c.staging.parked.hold_seed(id, seed) {
            return;
        }
    }
    if let Some(t) = tape(ctx, slot) {
        t.seeds.push((id, seed));
    }
}

/// `TapeOp::Sweep`: the backward sweep from the seeded Deltas, keeping the
/// inputs' adjoints.
pub(crate) extern "C" fn rt_tape_sweep(ctx: *mut Ctx, slot: u64) {
    let staged = slot as usize == STAGED_SLOT;
    if staged {
        // SAFETY: as in `tape`; `c` is not used after this block.
        let c = unsafe { &mut *ctx };
        if c.kept.resumed {
            sweep_kept(c);
            return;
        }
    }
    // A level generated code began inline: swept in place, or else adopted
    // (by `tape`, if not already) and lent back after the sweep.
    let lent = staged && {
        // SAFETY: as in `tape`; `c` is not used after this.
        let c = unsafe { &mut *ctx };
        if sweep_lent(c) {
            return;
        }
        matches!(c.staging.parked.state, Parked::LENT | Parked::ADOPTED)
    };
    let Some(t) = tape(ctx, slot) else { return };
    // A plain level has only plain weights.
    if !t
        .trace
        .backpropagate_plain(t.seeds.iter().copied(), &mut t.adjoints)
    {
        t.adjoints.clear();
    }
    t.seeds.clear();
    if lent && t.trace.buffer_bytes() <= KEPT_IN_PLACE_BYTES {
        // Room for the next level's sweep in place ([`lend_again`]), made
        // before the view of the inputs' adjoints is taken: may move them.
        t.lendable_adjoints();
    }
    let inputs = t.input_adjoints();
    let view = (inputs.as_ptr(), inputs.len() as u64);
    if staged {
        // SAFETY: as in `tape`; `t` is not used after this.
        let c = unsafe { &mut *ctx };
        if c.staging.parked.state == Parked::ADOPTED {
            lend_again(c);
        }
        (c.staging.adjoints, c.staging.adjoints_len) = view;
    }
}

/// The sweep of the resumed kept trace ([`Kept`]) from its seeds, in its
/// own adjoints, which become the view of the inputs' adjoints; level 1's
/// traces are not touched.
fn sweep_kept(c: &mut Ctx) {
    let kept = &mut c.kept;
    kept.published = match kept.basis_row() {
        // A row of the Jacobian: swept with the others the first time.
        Some(j) if kept.rows_of == kept.token || kept.sweep_rows() => Some(j),
        _ => {
            // Kept traces are of level 1, whose weights are plain.
            let mut adjoints = std::mem::take(&mut kept.adjoints);
            if !kept.trace.backpropagate_plain(kept.seeds(), &mut adjoints) {
                adjoints.clear();
            }
            kept.adjoints = adjoints;
            None
        }
    };
    let inputs = kept.input_adjoints();
    (c.staging.adjoints, c.staging.adjoints_len) = (inputs.as_ptr(), inputs.len() as u64);
}

/// After the sweep of a level of level 1 that generated code began inline
/// (adopted since, and still the innermost): only its inputs' adjoints are
/// read after the sweep, so its trace is emptied and lent again, and
/// generated code ends it inline. A buffer bigger than the runtime keeps
/// in place stays adopted, for the runtime to end.
fn lend_again(ctx: &mut Ctx) {
    let traces = &mut ctx.tapes[STAGED_SLOT];
    let Some(t) = traces.current() else { return };
    if t.trace.buffer_bytes() > KEPT_IN_PLACE_BYTES {
        return;
    }
    t.trace.clear();
    let (ptr, cap) = spare_of(&mut t.trace);
    // Reserved by the sweep already: the adjoints do not move.
    let adjoints = (t.adjoints.as_mut_ptr(), t.adjoints.capacity());
    traces.active -= 1;
    ctx.staging.parked.set(Parked::LENT, (ptr, cap), adjoints);
    ctx.staging.lend(ptr, cap, 0);
}

/// The sweep of the level of level 1 that generated code began inline and
/// the runtime has not adopted (recorded in the lent buffer, seeded by the
/// seeds [`ParkedBuffer`] holds): the interpreter's plain sweep over the
/// Deltas generated code wrote, in the parked trace's adjoint buffer, which
/// becomes the view of the inputs' adjoints. The trace itself is not
/// touched: the level ends inline. False (nothing done) if the level is
/// not lent so.
fn sweep_lent(ctx: &mut Ctx) -> bool {
    let staging = &mut ctx.staging;
    let parked = &mut staging.parked;
    let len = staging.len as usize;
    let lent = parked.state == Parked::LENT
        && staging.ptr == parked.ptr
        && staging.base == 0
        && staging.len <= parked.cap
        && len <= parked.adjoints_cap;
    if !lent {
        return false;
    }
    // SAFETY: while the level is lent (state LENT, its Deltas at the parked
    // buffer from id 0) generated code has written its first `len` Deltas,
    // counted in `staging.len` (it writes at `len < cap` only), and nothing
    // else touches the buffer until the runtime adopts the level; the
    // parked trace's adjoint buffer, a different allocation, has room for
    // `adjoints_cap ≥ len` reals and is not touched either until then.
    let (entries, adjoint) = unsafe {
        (
            std::slice::from_raw_parts(staging.ptr.cast_const(), len),
            std::slice::from_raw_parts_mut(parked.adjoints, len),
        )
    };
    adjoint.fill(0.0);
    let seeds = parked.seeds[..parked.seeds_len].iter().copied();
    trace::seed_and_sweep_plain(entries, seeds, adjoint);
    (parked.seeds_len, parked.swept) = (0, len);
    staging.adjoints = adjoint.as_ptr();
    staging.adjoints_len = trace::leading_inputs(entries) as u64;
    true
}

/// `TapeOp::Adjoint`: input `id`'s adjoint after the last sweep.
pub(crate) extern "C" fn rt_tape_adjoint(ctx: *mut Ctx, slot: u64, id: i64) -> f64 {
    // SAFETY: as in `tape`; `kept` is not used after this block.
    let kept = unsafe { &(*ctx).kept };
    if slot as usize == STAGED_SLOT && kept.resumed {
        let inputs = kept.input_adjoints();
        return usize::try_from(id)
            .ok()
            .and_then(|id| inputs.get(id).copied())
            .unwrap_or(0.0);
    }
    tape(ctx, slot)
        .and_then(|t| t.input_adjoints().get(usize::try_from(id).ok()?).copied())
        .unwrap_or(0.0)
}

/// `TapeOp::Inputs`: each real of `src` (a vector of reals) a fresh input
/// Delta of level 1's trace, in order, written to `dst` (a new vector of as
/// many level-1 reals `(primal, id, 1.0)`) — the inline `Input` (a
/// staged record with no parents) for a whole vector, as many at a time as
/// the lent capacity holds. Making room can go over the memory budget:
/// then it stops, with the error raised.
pub(crate) extern "C" fn rt_tape_inputs(ctx: *mut Ctx, span: u32, src: *const u64, dst: *mut u64) {
    // SAFETY: generated code passes its context, a live vector of reals
    // `src` and a new vector `dst` of as many elements of three slots.
    let (reals, out) = unsafe { (layout::vector_reals(src), layout::vector_slots_mut(dst, 3)) };
    let n = reals.len();
    let (reals, out) = (reals.as_ptr(), out.as_mut_ptr());
    let none = nabla_lang::ad::trace::NO_PARENT;
    append_staged(ctx, span, n, |k, id| {
        // SAFETY: `k < n`: within both vectors (raw writes: bounds-checked
        // slices made this loop half as fast again).
        unsafe {
            let x = out.add(3 * k);
            x.write(reals.add(k).read().to_bits());
            x.add(1).write(id);
            x.add(2).write(1f64.to_bits());
        }
        Staged {
            parents: [none; 2],
            weights: [0.0; 2],
        }
    });
}

/// Appends `count` Deltas to level 1's trace through its lent buffer,
/// `record(k, id)` making the k-th (whose id is `id`), in order, taking the
/// written ones onto the trace where the buffer is full
/// ([`rt_tape_flush`]); the id of the last, or `None` (not all written) if
/// making room raised "out of memory". The Deltas' ids follow one another.
fn append_staged(
    ctx: *mut Ctx,
    span: u32,
    count: usize,
    mut record: impl FnMut(usize, u64) -> Staged,
) -> Option<u64> {
    let mut last = None;
    let mut k = 0;
    while k < count {
        // SAFETY: as in `rt_error`; no reference to the context is live
        // across the flush, which takes the pointer.
        if unsafe { (*ctx).staging.len >= (*ctx).staging.cap } {
            rt_tape_flush(ctx, span);
            if unsafe { (*ctx).failed } != 0 {
                return None;
            }
        }
        // SAFETY: as above; the reference ends before the next flush.
        let s = unsafe { &mut (*ctx).staging };
        let m = (count - k).min((s.cap - s.len) as usize);
        // Copied out: `record` could alias the context's fields.
        let (records, len, base) = (s.ptr, s.len as usize, s.base);
        s.len += m as u64;
        for j in 0..m {
            let id = base + (len + j) as u64;
            let r = record(k + j, id);
            // SAFETY: `len + j < cap`: inside the capacity the runtime lent.
            unsafe { records.add(len + j).write(r) };
            last = Some(id);
        }
        k += m;
    }
    last
}

/// `TapeOp::DotTerms`: `sum (build n (fun i -> u[i] * v[i]))` of the
/// vectors `u` and `v` of reals of level 1 (three slots each: primal, Delta
/// id, coefficient), recorded as the Deltas of its `n` products, each
/// `chain(v[i], cᵤ) · Var idᵤ + chain(u[i], cᵥ) · Var idᵥ` as generated code
/// records a product of two different variables, then one Delta summing
/// their terms (`trace::SUM_OF_PRECEDING`) where real-by-real recording adds
/// them in lanes, a Delta per addition: the sweep adds the same terms in
/// the same order. Writes the sum's primal (the language's lanes, as
/// `prim::sum_reals_in_lanes`) at `primal` and returns its Delta's id; −1,
/// recording nothing, unless `1 ≤ n ≤` both lengths and each product is of
/// two different variables (the caller then records the sum real by real,
/// and fails where it does).
pub(crate) extern "C" fn rt_tape_dot(
    ctx: *mut Ctx,
    span: u32,
    u: *const u64,
    v: *const u64,
    n: i64,
    primal: *mut f64,
) -> i64 {
    // SAFETY: generated code passes its context, live vectors of reals of
    // level 1 `u` and `v`, and a slot for the primal.
    let (u, v) = unsafe { (layout::vector_slots(u, 3), layout::vector_slots(v, 3)) };
    let n = usize::try_from(n).unwrap_or(0);
    let slots = n.saturating_mul(3);
    let (Some(u), Some(v)) = (u.get(..slots), v.get(..slots)) else {
        return -1;
    };
    // (A count past the ids' range cannot be a Delta's: declined.)
    if n == 0 || n >= trace::SUM_OF_PRECEDING as usize {
        return -1;
    }
    // First pass: each product of two different variables (ids ≥ 0), and
    // the primal, in the language's lanes: element i into lane i mod 4,
    // each from -0.0 (which adds exactly), then ((0 + 1) + 2) + 3
    // (`prim::sum_reals_in_lanes`); four elements at a time, so that the
    // lanes stay in registers.
    let two_variables = |x: &[u64], y: &[u64]| {
        let (i, j) = (x[1] as i64, y[1] as i64);
        i >= 0 && j >= 0 && i != j
    };
    let product = |x: &[u64], y: &[u64]| f64::from_bits(x[0]) * f64::from_bits(y[0]);
    const LANES: usize = nabla_lang::prim::SUM_LANES;
    let mut lanes = [-0.0; LANES];
    let (mut us, mut vs) = (u.chunks_exact(3 * LANES), v.chunks_exact(3 * LANES));
    for (xs, ys) in (&mut us).zip(&mut vs) {
        let mut variables = true;
        for (lane, (x, y)) in lanes
            .iter_mut()
            .zip(xs.chunks_exact(3).zip(ys.chunks_exact(3)))
        {
            variables &= two_variables(x, y);
            *lane += product(x, y);
        }
        if !variables {
            return -1;
        }
    }
    let rest = us
        .remainder()
        .chunks_exact(3)
        .zip(vs.remainder().chunks_exact(3));
    for (lane, (x, y)) in lanes.iter_mut().zip(rest) {
        if !two_variables(x, y) {
            return -1;
        }
        *lane += product(x, y);
    }
    let [a, b, c, d] = lanes;
    let sum = ((a + b) + c) + d;
    // Second pass: the products' Deltas, then the sum's.
    let last = append_staged(ctx, span, n + 1, |k, _| {
        if k < n {
            let (x, y) = (&u[3 * k..][..3], &v[3 * k..][..3]);
            let (px, py) = (f64::from_bits(x[0]), f64::from_bits(y[0]));
            let (cx, cy) = (f64::from_bits(x[2]), f64::from_bits(y[2]));
            Staged {
                parents: [x[1] as u32, y[1] as u32],
                weights: [py.chain(cx), px.chain(cy)],
            }
        } else {
            Staged {
                parents: [trace::SUM_OF_PRECEDING, n as u32],
                weights: [0.0; 2],
            }
        }
    });
    let Some(id) = last else { return -1 };
    // SAFETY: generated code's slot for the primal.
    unsafe { primal.write(sum) };
    id as i64
}

/// The view of the inputs' adjoints the last sweep published (empty if
/// none): what `FnGen::staged_adjoint` reads inline.
fn adjoint_view<'a>(ctx: *mut Ctx) -> &'a [f64] {
    // SAFETY: as in `rt_error`; the view stays valid (and unchanged) until
    // the next flush or sweep, which no caller makes while holding it.
    let s = unsafe { &(*ctx).staging };
    if s.adjoints.is_null() {
        return &[];
    }
    // SAFETY: `adjoints_len` reals at `adjoints`, published by the sweep.
    unsafe { std::slice::from_raw_parts(s.adjoints, s.adjoints_len as usize) }
}

/// Input `id`'s adjoint where the view does not hold it (a constant's −1,
/// or no view published): asked of [`rt_tape_adjoint`].
#[cold]
#[inline(never)]
fn adjoint_outside_view(ctx: *mut Ctx, id: i64) -> f64 {
    rt_tape_adjoint(ctx, STAGED_SLOT as u64, id)
}

/// `TapeOp::Adjoints`: the adjoint of each level-1 real `(primal, id,
/// coefficient)` of `src`, in order, written to `dst` (a new vector of as
/// many reals).
pub(crate) extern "C" fn rt_tape_adjoints(
    ctx: *mut Ctx,
    _span: u32,
    src: *const u64,
    dst: *mut u64,
) {
    // SAFETY: generated code passes its context, a live vector of level-1
    // reals (three slots each) and a new vector of as many reals.
    let (reals, out) = unsafe { (layout::vector_slots(src, 3), layout::vector_reals_mut(dst)) };
    let view = adjoint_view(ctx);
    for (real, a) in reals.chunks_exact(3).zip(out) {
        let id = real[1] as i64;
        *a = match view.get(id as usize) {
            Some(&a) => a,
            None => adjoint_outside_view(ctx, id),
        };
    }
}

/// `TapeOp::AdjointsAgain`: on the resumed trace, the adjoint of the next
/// input again (`TapeOp::InputAgain`) for each element of `src`, written
/// to `dst` (a new vector of as many reals).
pub(crate) extern "C" fn rt_tape_adjoints_again(
    ctx: *mut Ctx,
    _span: u32,
    src: *const u64,
    dst: *mut u64,
) {
    // SAFETY: generated code passes its context, a live vector and a new
    // vector of as many reals.
    let (n, out) = unsafe {
        (
            layout::vector_reals(src).len(),
            layout::vector_reals_mut(dst),
        )
    };
    // SAFETY: as in `rt_error`; the reference ends here.
    let again = unsafe { &mut (*ctx).again };
    let first = again.next;
    // The next `given` inputs, then −1 (past the trace's inputs).
    let given = (again.end - first).clamp(0, n as i64);
    again.next += given;
    let view = adjoint_view(ctx);
    let inputs = first as usize..(first + given) as usize;
    match view.get(inputs) {
        // The inputs' adjoints side by side in the view (as a sweep leaves
        // them): copied.
        Some(adjoints) => out[..given as usize].copy_from_slice(adjoints),
        None => {
            for (k, a) in out[..given as usize].iter_mut().enumerate() {
                *a = adjoint_outside_view(ctx, first + k as i64);
            }
        }
    }
    for a in &mut out[given as usize..] {
        *a = adjoint_outside_view(ctx, -1);
    }
}

/// `TapeOp::End`: drops the slot's current trace (its buffer kept for the next).
pub(crate) extern "C" fn rt_tape_end(ctx: *mut Ctx, slot: u64) {
    // SAFETY: as in `tape`.
    let ctx = unsafe { &mut *ctx };
    let staged = slot as usize == STAGED_SLOT;
    if staged && ctx.kept.resumed {
        // A pullback's sweep of the kept trace: it stays kept.
        ctx.kept.resumed = false;
        return;
    }
    if staged && ctx.staging.len > 0 {
        flush(ctx);
    }
    collect(ctx, slot as usize);
    if let Some(traces) = ctx.tapes.get_mut(slot as usize) {
        ctx.replaying -= u32::from(traces.end());
    }
    if staged {
        flush(ctx);
    }
    publish(ctx, slot);
    park(ctx, slot as usize);
}

/// `TapeOp::Output`: an output's Delta `Scale coefficient (Var id)` (id −1:
/// a constant) on level 1's current trace, for the [`rt_tape_keep`] that
/// follows; nothing at another level (which keeps nothing).
pub(crate) extern "C" fn rt_tape_output(ctx: *mut Ctx, slot: u64, id: i64, coefficient: f64) {
    // SAFETY: as in `tape`.
    let c = unsafe { &mut *ctx };
    if slot as usize == STAGED_SLOT {
        c.kept.pending.push(OutputDelta { id, coefficient });
    }
}

/// `TapeOp::Keep`: ends the current trace of level 1 and keeps it, with the
/// outputs given since the last keep, under a new token (forgetting the one
/// kept before); 0 at another level, where it only ends the trace.
pub(crate) extern "C" fn rt_tape_keep(ctx: *mut Ctx, slot: u64) -> i64 {
    if slot as usize != STAGED_SLOT {
        rt_tape_end(ctx, slot);
        return 0;
    }
    // SAFETY: as in `tape`.
    let c = unsafe { &mut *ctx };
    flush(c);
    let traces = &mut c.tapes[STAGED_SLOT];
    if traces.current().is_none() {
        c.kept.pending.clear();
        return 0;
    }
    traces.keep(&mut c.kept);
    traces.end();
    // Unique in the process, not only in the run: a pullback kept in a
    // top-level value outlives its run, and must not name a trace of another.
    static TOKENS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);
    c.kept.token = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    flush(c);
    publish(ctx, slot);
    park(c, STAGED_SLOT);
    c.kept.token
}

/// `TapeOp::Resume`: the trace kept under `token`, if it is still kept and
/// has `outputs` outputs, made ready for the pullback's `SeedOutput`s,
/// `Sweep` and `End` (which are then its, not level 1's current trace's),
/// its inputs' ids to be given again from 0: 1; else 0, and nothing changes.
pub(crate) extern "C" fn rt_tape_resume(ctx: *mut Ctx, slot: u64, token: i64, outputs: i64) -> i64 {
    // SAFETY: as in `tape`.
    let c = unsafe { &mut *ctx };
    let kept = &mut c.kept;
    let matches = slot as usize == STAGED_SLOT
        && token != 0
        && kept.token == token
        && kept.outputs.len() as i64 == outputs;
    if !matches {
        return 0;
    }
    kept.resumed = true;
    kept.cotangent.clear();
    kept.published = None;
    c.again = InputsAgain {
        next: 0,
        end: kept.trace.inputs() as i64,
    };
    1
}

/// `TapeOp::SeedOutput`: cotangent `seed` for output `j` of the resumed
/// kept trace: its Delta seeded with chain(coefficient, seed), as the
/// interpreter's pullback seeds it.
pub(crate) extern "C" fn rt_tape_seed_output(ctx: *mut Ctx, slot: u64, j: i64, seed: f64) {
    // SAFETY: as in `tape`.
    let kept = unsafe { &mut (*ctx).kept };
    if slot as usize == STAGED_SLOT
        && kept.resumed
        && let Ok(j) = usize::try_from(j)
    {
        kept.seed_output(j, seed);
    }
}

/// `TapeOp::SeedOutputs`: `SeedOutput` of each real of the cotangent `src`
/// (a vector of reals), the `j`-th for output `j`.
pub(crate) extern "C" fn rt_tape_seed_outputs(
    ctx: *mut Ctx,
    _span: u32,
    src: *const u64,
    _none: *mut u64,
) {
    // SAFETY: as in `tape`; generated code passes a live vector of reals.
    let (kept, seeds) = unsafe { (&mut (*ctx).kept, layout::vector_reals(src)) };
    if kept.resumed {
        for (j, &seed) in seeds.iter().enumerate() {
            kept.seed_output(j, seed);
        }
    }
}

/// Records the first error and makes every generated caller return.
pub(crate) extern "C" fn rt_error(ctx: *mut Ctx, kind: u32, span: u32, a: i64, b: i64) {
    // SAFETY: generated code passes the context it was called with, which
    // `Native::run` keeps alive and exclusively lent for the whole run.
    let ctx = unsafe { &mut *ctx };
    if ctx.error.is_none() {
        let kind = ErrorKind::from_code(kind);
        ctx.error = Some(Raised {
            kind,
            span,
            a,
            b,
            // A pullback's cotangent, or a custom rule's result, the
            // interpreter finds wrong where the pullback or the function
            // (a partial application `custom_vjp rule`) is applied.
            at_caller: matches!(
                kind,
                ErrorKind::CotangentLength
                    | ErrorKind::CotangentConstructor
                    | ErrorKind::CustomTangentLength
                    | ErrorKind::CustomTangentConstructor
                    | ErrorKind::CustomCotangentLength
                    | ErrorKind::CustomCotangentConstructor
            ),
            code: 0,
        });
    }
    ctx.failed = 1;
}

/// Records the standard library's error `code` (`prim'fail code a b`) and
/// makes every generated caller return.
pub(crate) extern "C" fn rt_fail(ctx: *mut Ctx, span: u32, code: i64, a: i64, b: i64) {
    rt_error(ctx, ErrorKind::Library as u32, span, a, b);
    // SAFETY: as in `rt_error`.
    let ctx = unsafe { &mut *ctx };
    if let Some(e) = ctx.error.as_mut().filter(|e| e.kind == ErrorKind::Library) {
        e.code = code;
    }
}

/// An error returning through the closure application at `span`: one to be
/// reported at its caller gets this position.
pub(crate) extern "C" fn rt_error_site(ctx: *mut Ctx, span: u32) {
    // SAFETY: as in `rt_error`.
    let ctx = unsafe { &mut *ctx };
    if let Some(e) = ctx.error.as_mut().filter(|e| e.at_caller) {
        e.span = span;
        e.at_caller = false;
    }
}

/// Hashes an object's address for [`Ctx::large`] (one multiplication, where
/// the default hasher resists collisions chosen by an adversary that
/// addresses from the allocator cannot be): a program allocating and
/// freeing parameter-sized vectors per gradient spent 5 % of its time in
/// the default one.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, address: usize) {
        // Fibonacci hashing, its high half folded into the low one: the
        // table takes its buckets from the low bits and its tags from the
        // high ones, and an address's low 3 bits are 0.
        let h = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
}

/// Alignment of every heap object: its slots are 8-byte words.
const ALIGN: usize = 8;

/// Objects of up to this many bytes are carved from chunks of the run and
/// recycled through the context's free lists: programs make and drop many
/// small vectors and closures, and the system allocator and the budget's
/// accounting would cost more than the work done with them. (512: a vector
/// of 16 reals of a reverse level, three words each, is small.)
pub(crate) const SMALL: usize = 512;

/// Bytes of one chunk (charged to the budget as a whole).
const CHUNK: usize = 64 << 10;

/// Size classes: one per multiple of [`ALIGN`] up to [`SMALL`].
pub(crate) const CLASSES: usize = SMALL / ALIGN + 1;

/// The size class of an object of `size` bytes, if it is small.
fn class(size: usize) -> Option<usize> {
    (size <= SMALL).then_some(size / ALIGN)
}

// Generated code finds class k's head at `FREE + size` (size = 8k).
const _: () = assert!(ALIGN == 8);

impl Drop for Ctx {
    /// Returns the run's chunks to the system: every small object lives
    /// in one, and none outlives the run (the host reads the result before
    /// `release`; after an error, what was not dropped is garbage).
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` in `Ctx::new`, freed only here;
        // generated code, which writes through it, has returned.
        drop(unsafe { Box::from_raw(self.no_buffer) });
        if !self.staging.scratch.is_null() {
            let buffer = std::ptr::slice_from_raw_parts_mut(self.staging.scratch, SCRATCH);
            // SAFETY: the buffer was made by `Box::into_raw` of a boxed slice
            // of `SCRATCH` entries in `scratch`, and is freed only here.
            drop(unsafe { Box::from_raw(buffer) });
            memory::release(SCRATCH * size_of::<Staged>());
        }
        for chunk in self.chunks.drain(..) {
            free_block(chunk, CHUNK as u64);
        }
        // Empty after a run without error: its large objects were dropped
        // by its end (the result and the globals by `release`).
        for (p, size) in self.large.drain() {
            free_block(p as *mut u8, size as u64);
        }
        self.medium.release_all();
    }
}
/// Allocates `bytes` (a multiple of 8, at least 8): a small object from
/// its free list or the run's current chunk, a large one from the system,
/// charged to the memory budget; on failure raises "out of memory" and
/// returns null.
pub(crate) extern "C" fn rt_alloc(ctx: *mut Ctx, bytes: u64, span: u32) -> *mut u8 {
    // SAFETY: generated code passes the context it was called with, which
    // the run keeps alive and exclusively lent.
    let c = unsafe { &mut *ctx };
    let size = bytes.max(8) as usize;
    let Some(class) = class(size) else {
        let (size, reused) = match Medium::class(size) {
            Some((k, size)) => (size, c.medium.pop(k, size)),
            None => (size, None),
        };
        let allocated = match reused {
            Some(p) => Ok(p),
            // What the medium lists hold is charged: it is given back
            // before the budget is said to be spent.
            None => system_alloc(size).or_else(|_| {
                c.medium.release_all();
                system_alloc(size)
            }),
        };
        return match allocated {
            Ok(p) => {
                c.large.insert(p as usize, size);
                p
            }
            Err((requested, live)) => {
                rt_error(c, ErrorKind::OutOfMemory as u32, span, requested, live);
                std::ptr::null_mut()
            }
        };
    };
    let head = c.free[class];
    if !head.is_null() {
        // SAFETY: an object on the free list holds the next in its first
        // word (`rt_free`).
        c.free[class] = unsafe { *(head as *mut *mut u8) };
        return head;
    }
    if (c.end as usize) - (c.next as usize) < size {
        match system_alloc(CHUNK) {
            Ok(chunk) => {
                c.chunks.push(chunk);
                c.next = chunk;
                // SAFETY: within (one past the end of) the chunk.
                c.end = unsafe { chunk.add(CHUNK) };
            }
            Err((requested, live)) => {
                rt_error(c, ErrorKind::OutOfMemory as u32, span, requested, live);
                return std::ptr::null_mut();
            }
        }
    }
    let p = c.next;
    // SAFETY: `size` bytes fit before `end` (checked above).
    c.next = unsafe { c.next.add(size) };
    p
}

/// `size` bytes (a multiple of 8) from the system, charged to the memory
/// budget; else the request and the live bytes, for "out of memory".
pub(crate) fn system_alloc(size: usize) -> Result<*mut u8, (i64, i64)> {
    let live = memory::live();
    let fail = Err((size as i64, live as i64));
    if size > memory::budget().saturating_sub(live) {
        return fail;
    }
    let Ok(layout) = Layout::from_size_align(size.max(ALIGN), ALIGN) else {
        return fail;
    };
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return fail;
    }
    memory::charge(size.max(ALIGN));
    Ok(p)
}

/// Frees an object [`rt_alloc`] returned for `bytes`: a small one onto
/// the context's free list for its size.
pub(crate) extern "C" fn rt_free(ctx: *mut Ctx, p: *mut u8, bytes: u64) {
    let size = bytes.max(8) as usize;
    if p.is_null() {
        return;
    }
    if let Some(c) = class(size) {
        // SAFETY: generated code passes its context (as for `rt_alloc`)
        // and frees each object once, with the size it was allocated
        // with; the object has at least one word for the link.
        unsafe {
            let free = &mut (*ctx).free[c];
            *(p as *mut *mut u8) = *free;
            *free = p;
        }
        return;
    }
    // SAFETY: as above.
    let c = unsafe { &mut *ctx };
    c.large.remove(&(p as usize));
    match Medium::class(size) {
        Some((k, size)) => c.medium.push(k, p, size),
        None => free_block(p, bytes),
    }
}

/// Freed objects of more than [`SMALL`] and at most [`MEDIUM`] bytes,
/// kept for reuse by the run in size classes of four per power of two
/// (a size rounded up to the next multiple of a quarter of the power of
/// two below it, so at most 25 % more): each list linked through its
/// objects' first words, as the small ones. Programs that take gradients
/// in a loop make and drop the same parameter-sized vectors each time
/// (GMM d = 64: 5 000 such objects per gradient), which the system
/// allocator served at about 100 ns a pair. At most [`MEDIUM_KEPT`] bytes
/// are kept; they stay charged to the budget, and are given back before
/// an allocation would go over it.
#[derive(Default)]
struct Medium {
    lists: [Option<std::ptr::NonNull<u8>>; MEDIUM_CLASSES],
    kept: usize,
}

/// The largest object [`Medium`] keeps.
const MEDIUM: usize = 64 << 10;

/// Bytes [`Medium`] keeps at most.
const MEDIUM_KEPT: usize = 32 << 20;

/// Medium size classes: four per power of two from [`SMALL`] to [`MEDIUM`].
const MEDIUM_CLASSES: usize = 4 * (MEDIUM.ilog2() - SMALL.ilog2()) as usize;

impl Medium {
    /// The class of an object of `size` bytes, and the class's size, if it
    /// is medium.
    fn class(size: usize) -> Option<(usize, usize)> {
        if size <= SMALL || size > MEDIUM {
            return None;
        }
        // 2^b < size ≤ 2^(b+1), b ≥ log2(SMALL); classes are multiples of
        // 2^(b−2): 5, 6, 7 or 8 of them.
        let b = (size - 1).ilog2();
        let quarter = 1usize << (b - 2);
        let quarters = size.div_ceil(quarter);
        let k = 4 * (b - SMALL.ilog2()) as usize + (quarters - 5);
        Some((k, quarters * quarter))
    }

    fn pop(&mut self, k: usize, size: usize) -> Option<*mut u8> {
        let head = self.lists[k]?;
        // SAFETY: a kept object holds the next one's address in its first
        // word ([`Medium::push`]).
        self.lists[k] = std::ptr::NonNull::new(unsafe { *(head.as_ptr() as *mut *mut u8) });
        self.kept -= size;
        Some(head.as_ptr())
    }

    /// Keeps `p`, a freed object of class `k` (`size` bytes), or frees it
    /// if the lists hold enough.
    fn push(&mut self, k: usize, p: *mut u8, size: usize) {
        if self.kept + size > MEDIUM_KEPT {
            free_block(p, size as u64);
            return;
        }
        // SAFETY: a freed object of `size` > SMALL bytes, no longer used by
        // generated code: its first word links it.
        unsafe {
            *(p as *mut *mut u8) = self.lists[k].map_or(std::ptr::null_mut(), |n| n.as_ptr())
        };
        self.lists[k] = std::ptr::NonNull::new(p);
        self.kept += size;
    }

    /// Gives every kept object back to the system.
    fn release_all(&mut self) {
        for k in 0..MEDIUM_CLASSES {
            let size = Self::size_of_class(k);
            while let Some(p) = self.pop(k, size) {
                free_block(p, size as u64);
            }
        }
    }

    fn size_of_class(k: usize) -> usize {
        let b = SMALL.ilog2() as usize + k / 4;
        (5 + k % 4) << (b - 2)
    }
}

/// Returns an object of `bytes` that [`system_alloc`] allocated to the
/// system (and its charge to the budget).
pub(crate) fn free_block(p: *mut u8, bytes: u64) {
    let size = bytes.max(8) as usize;
    if p.is_null() {
        return;
    }
    if let Ok(layout) = Layout::from_size_align(size, ALIGN) {
        // SAFETY: each object is freed once, with the size it was
        // allocated with (vectors store their length; a closure's size is
        // fixed by its function; chunks have one size).
        unsafe { std::alloc::dealloc(p, layout) };
        memory::release(size);
    }
}

/// The real functions of the primitive table that generated code calls
/// rather than computes inline: each is the table's `eval`, so native code
/// and the interpreter give the same bits.
macro_rules! real_fns {
    ($($name:ident => $e:expr),* $(,)?) => {
        $(pub(crate) extern "C" fn $name(x: f64) -> f64 { $e.eval(x) })*
    };
}

real_fns! {
    rt_sin => Unary::Sin,
    rt_cos => Unary::Cos,
    rt_tan => Unary::Tan,
    rt_exp => Unary::Exp,
    rt_ln => Unary::Ln,
    rt_tanh => Unary::Tanh,
    rt_asin => Unary::Asin,
    rt_acos => Unary::Acos,
    rt_atan => Unary::Atan,
    rt_sinh => Unary::Sinh,
    rt_cosh => Unary::Cosh,
    rt_log1p => Unary::Log1p,
    rt_expm1 => Unary::ExpM1,
    rt_ceil => Unary::Ceil,
    rt_round => Unary::Round,
    rt_trunc => Unary::Trunc,
    rt_signum => Unary::Signum,
    rt_sign => Unary::Sign,
    rt_erf => Unary::Erf,
}

pub(crate) extern "C" fn rt_powf(x: f64, y: f64) -> f64 {
    Binary::Powf.eval(x, y)
}

pub(crate) extern "C" fn rt_atan2(x: f64, y: f64) -> f64 {
    Binary::Atan2.eval(x, y)
}

pub(crate) extern "C" fn rt_rem(x: f64, y: f64) -> f64 {
    Binary::Rem.eval(x, y)
}

/// The symbol generated code calls for a unary real function of the table,
/// if it is not computed inline.
pub(crate) fn unary_symbol(op: Unary) -> Option<(&'static str, *const u8)> {
    Some(match op {
        Unary::Sin => ("rt_sin", rt_sin as *const u8),
        Unary::Cos => ("rt_cos", rt_cos as *const u8),
        Unary::Tan => ("rt_tan", rt_tan as *const u8),
        Unary::Exp => ("rt_exp", rt_exp as *const u8),
        Unary::Ln => ("rt_ln", rt_ln as *const u8),
        Unary::Tanh => ("rt_tanh", rt_tanh as *const u8),
        Unary::Asin => ("rt_asin", rt_asin as *const u8),
        Unary::Acos => ("rt_acos", rt_acos as *const u8),
        Unary::Atan => ("rt_atan", rt_atan as *const u8),
        Unary::Sinh => ("rt_sinh", rt_sinh as *const u8),
        Unary::Cosh => ("rt_cosh", rt_cosh as *const u8),
        Unary::Log1p => ("rt_log1p", rt_log1p as *const u8),
        Unary::ExpM1 => ("rt_expm1", rt_expm1 as *const u8),
        Unary::Ceil => ("rt_ceil", rt_ceil as *const u8),
        Unary::Round => ("rt_round", rt_round as *const u8),
        Unary::Trunc => ("rt_trunc", rt_trunc as *const u8),
        Unary::Signum => ("rt_signum", rt_signum as *const u8),
        Unary::Sign => ("rt_sign", rt_sign as *const u8),
        Unary::Erf => ("rt_erf", rt_erf as *const u8),
        _ => return None,
    })
}

/// The same for a binary real function.
pub(crate) fn binary_symbol(op: Binary) -> Option<(&'static str, *const u8)> {
    Some(match op {
        Binary::Powf => ("rt_powf", rt_powf as *const u8),
        Binary::Atan2 => ("rt_atan2", rt_atan2 as *const u8),
        Binary::Rem => ("rt_rem", rt_rem as *const u8),
        _ => return None,
    })
}

/// Every symbol generated code may import.
pub(crate) fn symbols() -> Vec<(&'static str, *const u8)> {
    let mut s = vec![
        ("rt_error", rt_error as *const u8),
        ("rt_fail", rt_fail as *const u8),
        ("rt_alloc", rt_alloc as *const u8),
        ("rt_free", rt_free as *const u8),
        ("rt_trace", rt_trace as *const u8),
        ("rt_error_site", rt_error_site as *const u8),
        ("rt_tape_begin", rt_tape_begin as *const u8),
        ("rt_tape_reserve", rt_tape_reserve as *const u8),
        ("rt_tape_flush", rt_tape_flush as *const u8),
        ("rt_tape_seed", rt_tape_seed as *const u8),
        ("rt_tape_sweep", rt_tape_sweep as *const u8),
        ("rt_tape_len", rt_tape_len as *const u8),
        ("rt_tape_adj_reserve", rt_tape_adj_reserve as *const u8),
        ("rt_tape_adjoint", rt_tape_adjoint as *const u8),
        ("rt_tape_end", rt_tape_end as *const u8),
        ("rt_tape_inputs", rt_tape_inputs as *const u8),
        ("rt_tape_dot", rt_tape_dot as *const u8),
        ("rt_tape_adjoints", rt_tape_adjoints as *const u8),
        (
            "rt_tape_adjoints_again",
            rt_tape_adjoints_again as *const u8,
        ),
        ("rt_tape_seed_outputs", rt_tape_seed_outputs as *const u8),
        ("rt_tape_output", rt_tape_output as *const u8),
        ("rt_tape_keep", rt_tape_keep as *const u8),
        ("rt_tape_resume", rt_tape_resume as *const u8),
        ("rt_tape_seed_output", rt_tape_seed_output as *const u8),
    ];
    for op in [
        Unary::Sin,
        Unary::Cos,
        Unary::Tan,
        Unary::Exp,
        Unary::Ln,
        Unary::Tanh,
        Unary::Asin,
        Unary::Acos,
        Unary::Atan,
        Unary::Sinh,
        Unary::Cosh,
        Unary::Log1p,
        Unary::ExpM1,
        Unary::Ceil,
        Unary::Round,
        Unary::Trunc,
        Unary::Signum,
        Unary::Sign,
        Unary::Erf,
    ] {
        s.extend(unary_symbol(op));
    }
    for op in [Binary::Powf, Binary::Atan2, Binary::Rem] {
        s.extend(binary_symbol(op));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Level 1 driven as generated code drives it: the runtime's calls, and
    /// inline what `FnGen` does inline (appending Deltas to the lent
    /// buffer, beginning and ending a level on the parked trace, reading
    /// the inputs' adjoints from the published view).
    struct Level1(Box<Ctx>);

    impl Level1 {
        fn new() -> Level1 {
            let mut ctx = Box::new(Ctx::new(0, i64::MAX, std::ptr::null_mut(), i64::MAX));
            // As generated code's first append: the scratch buffer lent.
            rt_tape_flush(&mut *ctx, 0);
            Level1(ctx)
        }

        fn ctx(&mut self) -> *mut Ctx {
            &mut *self.0
        }

        /// `FnGen::begin_parked`: inline if a trace is parked; true if so.
        fn begin(&mut self) -> bool {
            let s = &mut self.0.staging;
            if s.parked.state == Parked::READY {
                let (ptr, cap) = (s.parked.ptr, s.parked.cap);
                s.lend(ptr, cap, 0);
                s.parked.state = Parked::LENT;
                return true;
            }
            rt_tape_begin(self.ctx(), STAGED_SLOT as u64, 0, 0);
            false
        }

        /// `FnGen::append_record` of a plain Delta; its id.
        fn push(&mut self, parents: [u32; 2], weights: [f64; 2]) -> i64 {
            if self.0.staging.len >= self.0.staging.cap {
                rt_tape_flush(self.ctx(), 0);
            }
            let s = &mut self.0.staging;
            // SAFETY: `len < cap`: inside the capacity the runtime lent.
            unsafe { s.ptr.add(s.len as usize).write(Staged { parents, weights }) };
            s.len += 1;
            (s.base + s.len - 1) as i64
        }

        /// Two inputs and their product at (3, 5): the inputs' ids and the
        /// product's.
        fn record(&mut self) -> ([i64; 2], i64) {
            let x = [self.push([NO; 2], [0.0; 2]), self.push([NO; 2], [0.0; 2])];
            let product = self.push([x[0] as u32, x[1] as u32], [5.0, 3.0]);
            (x, product)
        }

        /// `FnGen::staged_adjoint`.
        fn adjoint(&mut self, id: i64) -> f64 {
            let s = &self.0.staging;
            if (id as u64) < s.adjoints_len {
                // SAFETY: inside the view the runtime published.
                return unsafe { *s.adjoints.add(id as usize) };
            }
            rt_tape_adjoint(self.ctx(), STAGED_SLOT as u64, id)
        }

        /// `FnGen::end_parked`.
        fn end(&mut self) {
            let s = &mut self.0.staging;
            if s.parked.state == Parked::LENT {
                let scratch = s.scratch;
                s.lend(scratch, SCRATCH as u64, 0);
                s.parked.state = Parked::READY;
                return;
            }
            rt_tape_end(self.ctx(), STAGED_SLOT as u64);
        }

        /// The gradient of `x₀ · x₁` at (3, 5), its one Delta seeded with
        /// each of `seeds` (after `between` runs, once the first is
        /// seeded); whether the level was begun inline, and how its sweep
        /// left it.
        fn gradient(
            &mut self,
            seeds: &[f64],
            between: impl FnOnce(&mut Self),
        ) -> (bool, [f64; 2], Swept) {
            let inline = self.begin();
            let (x, product) = self.record();
            let mut between = Some(between);
            for &s in seeds {
                rt_tape_seed(self.ctx(), STAGED_SLOT as u64, product, s);
                if let Some(f) = between.take() {
                    f(self);
                }
            }
            rt_tape_sweep(self.ctx(), STAGED_SLOT as u64);
            let swept = match (self.0.staging.parked.state, self.0.staging.len) {
                (Parked::LENT, 0) => Swept::LentAgain,
                (Parked::LENT, _) => Swept::InPlace,
                _ => Swept::ByTheRuntime,
            };
            let g = [self.adjoint(x[0]), self.adjoint(x[1])];
            self.end();
            (inline, g, swept)
        }
    }

    #[derive(Debug, PartialEq)]
    enum Swept {
        /// Over the lent Deltas ([`sweep_lent`]), the trace untouched.
        InPlace,
        /// Adopted, swept on the trace and lent back ([`lend_again`]).
        LentAgain,
        /// A level the runtime began.
        ByTheRuntime,
    }

    const NO: u32 = nabla_lang::ad::trace::NO_PARENT;

    #[test]
    fn a_level_begun_inline_is_seeded_and_swept_as_the_runtime_does_it() {
        let mut level = Level1::new();
        // The first level is the runtime's, which parks its trace after.
        let by_runtime = (false, [5.0, 3.0], Swept::ByTheRuntime);
        assert_eq!(level.gradient(&[1.0], |_| ()), by_runtime);
        // Seeded and swept without the trace: the level stays lent.
        let in_place = (true, [10.0, 6.0], Swept::InPlace);
        assert_eq!(level.gradient(&[2.0], |_| ()), in_place);
        // More seeds than are held: the runtime adopts the level, the held
        // seeds first, and lends it back after the sweep.
        let seeds = [1.0; LENT_SEEDS + 2];
        let n = seeds.len() as f64;
        let lent_again = (true, [5.0 * n, 3.0 * n], Swept::LentAgain);
        assert_eq!(level.gradient(&seeds, |_| ()), lent_again);
        // Adopted between two seeds (any runtime call on the level adopts
        // it): the seed held before counts.
        let adopt = |l: &mut Level1| {
            rt_tape_len(l.ctx(), STAGED_SLOT as u64);
        };
        let lent_again = (true, [7.5, 4.5], Swept::LentAgain);
        assert_eq!(level.gradient(&[1.0, 0.5], adopt), lent_again);
        // And the next level is swept in place again.
        let in_place = (true, [-5.0, -3.0], Swept::InPlace);
        assert_eq!(level.gradient(&[-1.0], |_| ()), in_place);
        // Adopted after its sweep in place, before the inputs' adjoints
        // are read: the runtime has them.
        assert!(level.begin());
        let (x, product) = level.record();
        rt_tape_seed(level.ctx(), STAGED_SLOT as u64, product, 2.0);
        rt_tape_sweep(level.ctx(), STAGED_SLOT as u64);
        rt_tape_len(level.ctx(), STAGED_SLOT as u64);
        assert_eq!(level.0.staging.adjoints_len, 0, "the view is withdrawn");
        assert_eq!([level.adjoint(x[0]), level.adjoint(x[1])], [10.0, 6.0]);
        level.end();
    }

    /// Every medium size falls in a class at most 25 % larger, whose size
    /// `size_of_class` gives back; the classes increase with the size and
    /// fill the table.
    #[test]
    fn medium_classes_cover_their_sizes() {
        assert_eq!(Medium::class(SMALL), None);
        assert_eq!(Medium::class(MEDIUM + 8), None);
        let mut last = (0, 0);
        for size in (SMALL + 8..=MEDIUM).step_by(8) {
            let (k, class_size) = Medium::class(size).expect("medium");
            assert!(
                class_size >= size && 4 * class_size <= 5 * size,
                "{size}: {class_size}"
            );
            assert_eq!(Medium::size_of_class(k), class_size, "{size}");
            assert!(k >= last.0 && class_size >= last.1, "{size}");
            last = (k, class_size);
        }
        assert_eq!(last, (MEDIUM_CLASSES - 1, MEDIUM));
    }

    /// A freed medium object is reused by the next allocation of its class
    /// and stays charged while kept; the lists give everything back when
    /// asked and when the context goes (and before an allocation the budget
    /// would refuse: `tests/native.rs`).
    #[test]
    fn medium_objects_are_reused_and_given_back() {
        let live = memory::live();
        let mut ctx = Box::new(Ctx::new(0, i64::MAX, std::ptr::null_mut(), i64::MAX));
        let c: *mut Ctx = &mut *ctx;
        let a = rt_alloc(c, 1000, 0);
        let charged = memory::live() - live;
        assert_eq!(charged, 1024, "1 000 bytes take the class of 1 024");
        rt_free(c, a, 1000);
        assert_eq!(memory::live() - live, charged, "kept, still charged");
        assert_eq!(rt_alloc(c, 1016, 0), a, "the next of the class reuses it");
        rt_free(c, a, 1016);
        ctx.medium.release_all();
        assert_eq!(memory::live(), live, "given back");
        let b = rt_alloc(c, 5000, 0);
        rt_free(c, b, 5000);
        assert!(memory::live() > live);
        drop(ctx);
        assert_eq!(memory::live(), live, "given back with the context");
    }
}
