//! Reverse mode with a run-time checked trace: [`TapeReverse`], a reverse-mode
//! scalar that is `'static + Copy + Send + Sync`, and the operators that
//! differentiate with it.
//!
//! [`Reverse<'t, S>`](crate::Reverse) holds a reference to its trace and is branded
//! by the trace's lifetime, so using a value outside its differentiation, or mixing
//! the values of two traces, is a compile error — but for the same reasons it is not
//! `'static`, `Send` or `Sync`, which nalgebra and simba ask of every scalar.
//! [`TapeReverse<S>`] names its trace by a number instead: a key into a thread-local
//! stack of the traces being recorded (one per nesting level in progress), made of
//! the level's depth and a serial number unique in the process. It records into the
//! same Delta trace, by the same rules (the derivative table of
//! [`primitive`](crate::primitive)) and the same code as `Reverse`; what moves from
//! compile time to run time is only the check that the values of one operation
//! belong to one trace that is still being recorded. Every trace entry made and every
//! output read checks it, and a value that fails panics, saying what went wrong:
//!
//! - *a value escaped its operator's closure*: it belongs to a differentiation that
//!   has returned (kept in a variable across calls, taken from a finished sibling
//!   differentiation, or sent to another thread);
//! - *values of two different traces met*: a value of an enclosing differentiation
//!   of the same type was used in an inner one without [`lift`](crate::lift).
//!
//! Nesting levels remain distinct types — `TapeReverse<TapeReverse<f64>>`,
//! `Dual<TapeReverse<f64>>`, `TapeReverse<Dual<f64>>` — so perturbation confusion is
//! still impossible, and an inner differentiation at a deeper type needs no check.
//! With the feature `nalgebra`, `TapeReverse` implements simba's `RealField` at
//! every nesting, so nalgebra matrix code differentiates in reverse mode.
//!
//! The operators take closures over `&[TapeReverse<S>]` with no `for<'t>`, so a
//! generic `fn` can be passed to them bare:
//!
//! ```
//! use nabla::{Scalar, tape};
//! fn f<S: Scalar>(x: &[S]) -> S {
//!     x[0] * x[0] * x[1].sin()
//! }
//! let (x, y) = (3.0_f64, 0.5_f64);
//! assert_eq!(tape::grad(f, &[x, y]), vec![2.0 * x * y.sin(), x * x * y.cos()]);
//! let h = tape::hessian(f, &[x, y]);
//! assert_eq!(h[0][1], 2.0 * x * y.cos());
//! assert_eq!(h[0][1], h[1][0]);
//! ```
//!
//! Cost: each trace entry reaches the trace through the thread-local stack (a
//! thread-local access, a borrow flag, a key comparison and a type check) instead of
//! a direct reference; operations that make no entry — with a constant, of one
//! argument, `x + x` — cost the same as with `Reverse`. See `docs/benchmarks.md`.

use std::any::Any;
use std::cell::RefCell;
use std::num::NonZeroU64;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::api::{Pullback, pull_back, run};
use crate::primitive::{BinaryPrimitive, UnaryPrimitive};
use crate::reverse::{Recorded, TraceHandle};
use crate::trace::{DeltaId, Entry, Trace};
use crate::{Dual, Lift, Precision, Real, Scalar, pool};

/// A reverse-mode real whose trace is named by a run-time key: `'static`, `Copy`,
/// `Send` and `Sync` (for `S` that is), so it can be a nalgebra scalar.
///
/// Values of this type are made by the operators of [`tape`](crate::tape) — [`grad`],
/// [`value_and_grad`], [`vjp`], [`jacobian`], [`hessian`], … — which record each sum
/// of two variables in a trace and evaluate it backwards once, exactly as
/// [`Reverse`](crate::Reverse) does. A constant ([`TapeReverse::constant`], `From<f64>`)
/// belongs to no trace. Using a value after its differentiation has returned, or
/// mixing the values of two traces, panics (see the [module](crate::tape)
/// documentation):
///
/// ```should_panic
/// use nabla::tape;
/// let mut kept = None;
/// tape::grad(|x| { kept = Some(x[0]); x[0] * x[0] }, &[1.0]);
/// // The value escaped its closure: the next trace it meets rejects it.
/// tape::grad(|x| x[0] * kept.unwrap(), &[1.0]); // panics: "escaped its operator"
/// ```
///
/// An inner differentiation at the same type takes an outer value through
/// [`lift`](crate::lift) (or [`TapeReverse::constant`]), as with `Reverse`:
///
/// ```
/// use nabla::{lift, tape};
/// let g = tape::grad(|x| {
///     let outer = x[0];
///     let inner = tape::grad(|y| y[0] * lift(outer), &[outer]);
///     outer * inner[0] // d/dx x² = 2x
/// }, &[3.0]);
/// assert_eq!(g, vec![6.0]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TapeReverse<S: 'static> {
    recorded: Recorded<S, TapeKey>,
}

impl<R: Real, S: Scalar<R> + Precision<Real = R>> TapeReverse<S> {
    /// A constant (Delta `Zero`): a value of the enclosing level brought into this
    /// one. [`lift`](crate::lift) does the same without naming the type.
    ///
    /// ```
    /// use nabla::tape::{self, TapeReverse};
    /// let a = 3.0;
    /// assert_eq!(tape::grad(|x| TapeReverse::constant(a) * x[0], &[1.0]), vec![3.0]);
    /// ```
    #[inline(always)]
    pub fn constant(primal: S) -> Self {
        TapeReverse {
            recorded: Recorded::constant(primal),
        }
    }

    /// The primal value (one level down).
    ///
    /// ```
    /// use nabla::tape;
    /// let ((value, primal), _) = tape::value_and_grad_with_aux(
    ///     |x| { let y = x[0] * 2.0; (y, y.primal()) }, &[1.5]);
    /// assert_eq!((value, primal), (3.0, 3.0));
    /// ```
    #[inline(always)]
    pub fn primal(self) -> S {
        self.recorded.primal
    }

    /// The Delta as `(c, id)` for `Scale c (Var id)`, or `None` for `Zero`, checking
    /// that the value belongs to the trace `key`.
    #[inline(always)]
    fn delta_in(self, key: TapeKey) -> Option<(S, DeltaId)> {
        self.recorded.delta().map(|(c, id, own)| {
            if own != key {
                mismatch(own, key);
            }
            (c, id)
        })
    }
}

/// A trace being recorded: its depth in the thread's stack (the low
/// [`DEPTH_BITS`] bits) and a serial number unique in the process (the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TapeKey(NonZeroU64);

/// Bits of a [`TapeKey`] that hold the depth.
const DEPTH_BITS: u32 = 16;

impl TapeKey {
    fn depth(self) -> usize {
        (self.0.get() & ((1 << DEPTH_BITS) - 1)) as usize
    }

    /// True if the trace is being recorded on this thread.
    fn is_live(self) -> bool {
        TAPES
            .try_with(|tapes| {
                tapes
                    .try_borrow()
                    .is_ok_and(|tapes| tapes.get(self.depth()).is_some_and(|l| l.key == self))
            })
            .unwrap_or(false)
    }
}

/// One trace being recorded: a `Trace<S>` for the `S` of its level.
struct Level {
    key: TapeKey,
    trace: Erased,
}

/// A `Trace<S>` of some `S`, shared with the operation recording into it. The
/// first-order element types and forward over reverse's have a variant of their
/// own, so that finding the trace needs no dynamic type check where it matters
/// most: for them the type test below is decided at compile time.
enum Erased {
    F64(Rc<Trace<f64>>),
    F32(Rc<Trace<f32>>),
    /// Forward over reverse (`hvp`, `hessian`).
    DualF64(Rc<Trace<Dual<f64>>>),
    Other(Rc<dyn Any>),
}

impl Erased {
    fn new<S: 'static>(inputs: usize) -> Self {
        let trace: Rc<dyn Any> = Rc::new(Trace::<S>::new(inputs));
        match trace.downcast::<Trace<f64>>() {
            Ok(trace) => Erased::F64(trace),
            Err(trace) => match trace.downcast::<Trace<f32>>() {
                Ok(trace) => Erased::F32(trace),
                Err(trace) => match trace.downcast::<Trace<Dual<f64>>>() {
                    Ok(trace) => Erased::DualF64(trace),
                    Err(trace) => Erased::Other(trace),
                },
            },
        }
    }

    /// The trace, if it holds entries of `S`.
    #[inline(always)]
    fn get<S: 'static>(&self) -> Option<Rc<Trace<S>>> {
        // For the first three, an `Rc<dyn Any>` made from a known type: the type test
        // folds to a constant.
        match self {
            Erased::F64(trace) => (Rc::clone(trace) as Rc<dyn Any>).downcast().ok(),
            Erased::F32(trace) => (Rc::clone(trace) as Rc<dyn Any>).downcast().ok(),
            Erased::DualF64(trace) => (Rc::clone(trace) as Rc<dyn Any>).downcast().ok(),
            Erased::Other(trace) => Rc::clone(trace).downcast().ok(),
        }
    }

    /// The recorded entries, once no operation holds the trace.
    fn into_entries<S: 'static>(self) -> Option<Vec<Entry<S>>> {
        let trace: Rc<dyn Any> = match self {
            Erased::F64(trace) => trace,
            Erased::F32(trace) => trace,
            Erased::DualF64(trace) => trace,
            Erased::Other(trace) => trace,
        };
        let trace = trace.downcast::<Trace<S>>().ok()?;
        Rc::into_inner(trace).map(Trace::into_entries)
    }
}

thread_local! {
    /// The traces being recorded on this thread, outermost first.
    static TAPES: RefCell<Vec<Level>> = const { RefCell::new(Vec::new()) };
}

/// The next trace's serial number (unique across threads, since values are `Send`).
static SERIALS: AtomicU64 = AtomicU64::new(1);

impl<S: 'static> TraceHandle<S> for TapeKey {
    #[inline(always)]
    fn add(self, other: Self, p0: DeltaId, w0: S, p1: DeltaId, w1: S) -> DeltaId {
        if self != other {
            mismatch(self, other);
        }
        // Only the key goes into the thread-local access, and the trace comes out: the
        // entry is written here, where its operands are, not through the closure.
        let trace = TAPES.with(move |tapes| {
            let tapes = tapes.borrow();
            match tapes.get(self.depth()) {
                Some(level) if level.key == self => level.trace.get::<S>(),
                _ => None,
            }
        });
        match trace {
            Some(trace) => trace.add(p0, w0, p1, w1),
            None => escaped(),
        }
    }

    #[inline(always)]
    fn check_same(self, other: Self) {
        if self != other {
            mismatch(self, other);
        }
    }
}

/// Two values of different traces met (or a value met the trace being read).
#[cold]
#[inline(never)]
fn mismatch(a: TapeKey, b: TapeKey) -> ! {
    if !a.is_live() || !b.is_live() {
        escaped()
    }
    panic!(
        "nabla::tape: values of two different traces met: a TapeReverse value of an \
         enclosing differentiation was used in an inner one of the same type; bring it in \
         with `nabla::lift` (or `TapeReverse::constant`)"
    )
}

/// A value of a trace no longer being recorded on this thread.
#[cold]
#[inline(never)]
fn escaped() -> ! {
    panic!(
        "nabla::tape: a TapeReverse value escaped its operator: it belongs to a \
         differentiation that has returned (kept from an earlier or sibling call, or sent \
         to another thread), and can only be used inside the closure that received it"
    )
}

/// The recording of one trace: its level is on the thread's stack from
/// [`begin`](Recording::begin) until [`finish`](Recording::finish), or until the
/// recording is dropped by a panic.
struct Recording {
    key: Option<TapeKey>,
}

impl Recording {
    /// Pushes a fresh trace of `inputs` input variables for scalars `S`.
    fn begin<S: 'static>(inputs: usize) -> Self {
        let trace = Erased::new::<S>(inputs);
        let key = TAPES.with(|tapes| {
            let mut tapes = tapes.borrow_mut();
            let depth = tapes.len() as u64;
            assert!(
                depth < 1 << DEPTH_BITS,
                "nabla::tape: more than 65535 nested differentiations"
            );
            let serial = SERIALS.fetch_add(1, Ordering::Relaxed);
            let key = TapeKey(NonZeroU64::new(serial << DEPTH_BITS | depth).expect("serial ≥ 1"));
            tapes.push(Level { key, trace });
            key
        });
        Recording { key: Some(key) }
    }

    /// Pops this recording's trace and returns its entries.
    fn finish<S: 'static>(mut self) -> Vec<Entry<S>> {
        let key = self.key.take().expect("finished once");
        let level = TAPES.with(|tapes| tapes.borrow_mut().pop());
        let level = level.expect("nabla::tape: the trace stack is not empty while recording");
        assert_eq!(level.key, key, "nabla::tape: inner recordings finish first");
        level
            .trace
            .into_entries::<S>()
            .expect("nabla::tape: a trace holds the entries of its key's type")
    }
}

impl Drop for Recording {
    /// On a panic in the closure, removes the trace (and any inner ones left).
    fn drop(&mut self) {
        if let Some(key) = self.key {
            let _ = TAPES.try_with(|tapes| {
                if let Ok(mut tapes) = tapes.try_borrow_mut() {
                    tapes.truncate(key.depth());
                }
            });
        }
    }
}

/// Runs `f` on input variables for `x` in a fresh trace, and returns what `f`
/// returned — passed through `read`, which is given the trace's key and runs while
/// the trace is still being recorded — and the recorded entries.
fn record<R, S, T, U>(
    x: &[S],
    f: impl FnOnce(&[TapeReverse<S>]) -> T,
    read: impl FnOnce(T, TapeKey) -> U,
) -> (U, Vec<Entry<S>>)
where
    R: Real,
    S: Scalar<R> + 'static,
{
    let recording = Recording::begin::<S>(x.len());
    let key = recording.key.expect("recording");
    let inputs = x.iter().zip(0..).map(|(&primal, id)| TapeReverse {
        recorded: Recorded::variable(primal, key, id),
    });
    let result = pool::with_scratch(x.len(), inputs, |inputs| run(f, inputs));
    let result = read(result, key);
    (result, recording.finish())
}

impl<R: Real, S: Scalar<R>> Lift<S, R> for TapeReverse<S> {
    #[inline(always)]
    fn lift(value: S) -> Self {
        TapeReverse::constant(value)
    }
}

impl<R: Real, S: Scalar<R>> From<R> for TapeReverse<S> {
    #[inline(always)]
    fn from(x: R) -> Self {
        TapeReverse::constant(S::from(x))
    }
}

impl<S: Precision> Precision for TapeReverse<S> {
    type Real = S::Real;
}

/// The rules of [`Reverse`](crate::Reverse), shared: only the way to the trace differs.
impl<R: Real, S: Scalar<R>> Scalar<R> for TapeReverse<S> {
    #[inline(always)]
    fn value(self) -> R {
        self.recorded.value()
    }

    #[inline(always)]
    fn is_zero(self) -> bool {
        self.recorded.is_zero()
    }

    #[inline(always)]
    fn scale(self, c: R) -> Self {
        TapeReverse {
            recorded: self.recorded.scale(c),
        }
    }

    #[inline(always)]
    fn shift(self, c: R) -> Self {
        TapeReverse {
            recorded: self.recorded.shift(c),
        }
    }

    #[inline(always)]
    fn apply_unary<P: UnaryPrimitive<R> + ?Sized>(self, primitive: &P) -> Self {
        TapeReverse {
            recorded: self.recorded.apply_unary(primitive),
        }
    }

    #[inline(always)]
    fn apply_binary<P: BinaryPrimitive<R> + ?Sized>(self, other: Self, primitive: &P) -> Self {
        TapeReverse {
            recorded: self.recorded.apply_binary(other.recorded, primitive),
        }
    }
}

crate::ops::scalar_ops!([] TapeReverse<S>);

/// Reverse mode: the value of a real-valued `f` at `x` and its gradient, from one
/// evaluation of `f` and one backward sweep, as [`crate::value_and_grad`].
///
/// ```
/// use nabla::{Scalar, tape};
/// let (v, g) = tape::value_and_grad(|x| x[0] * x[1].exp(), &[3.0, 0.0]);
/// assert_eq!((v, g), (3.0, vec![1.0, 3.0]));
/// ```
///
/// # Panics
/// If `f` returns a value of another trace (see the [module](crate::tape)
/// documentation), or if `f` panics.
pub fn value_and_grad<S, F, R>(f: F, x: &[S]) -> (S, Vec<S>)
where
    R: Real,
    S: Scalar<R> + 'static,
    F: FnOnce(&[TapeReverse<S>]) -> TapeReverse<S>,
{
    let ((value, delta), entries) = record(x, f, |y, key| (y.primal(), y.delta_in(key)));
    let gradient = pull_back(&entries, x.len(), [(delta, S::one())]);
    pool::give(entries);
    (value, gradient)
}

/// Reverse mode: the gradient of a real-valued `f` at `x`, as [`crate::grad`].
///
/// ```
/// use nabla::{Scalar, tape};
/// // f(x, y) = 2x² + 3xy + 4y²
/// let g = tape::grad(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0,
///                    &[3.0, 4.0]);
/// assert_eq!(g, vec![24.0, 41.0]);
/// ```
pub fn grad<S, F, R>(f: F, x: &[S]) -> Vec<S>
where
    R: Real,
    S: Scalar<R> + 'static,
    F: FnOnce(&[TapeReverse<S>]) -> TapeReverse<S>,
{
    value_and_grad(f, x).1
}

/// Reverse mode, for a function that also returns auxiliary data (returned beside
/// the value and the gradient), as [`crate::value_and_grad_with_aux`]. The auxiliary
/// data should hold primal values (`y.primal()`): a `TapeReverse` kept in it escapes
/// its trace and panics when used.
///
/// ```
/// use nabla::tape;
/// let ((loss, residual), g) = tape::value_and_grad_with_aux(
///     |w| { let r = w[0] * 2.0 - 1.0; (r * r, r.primal()) }, &[1.0]);
/// assert_eq!((loss, residual, g), (1.0, 1.0, vec![4.0]));
/// ```
pub fn value_and_grad_with_aux<S, A, F, R>(f: F, x: &[S]) -> ((S, A), Vec<S>)
where
    R: Real,
    S: Scalar<R> + 'static,
    F: FnOnce(&[TapeReverse<S>]) -> (TapeReverse<S>, A),
{
    let ((value, delta, aux), entries) =
        record(x, f, |(y, aux), key| (y.primal(), y.delta_in(key), aux));
    let gradient = pull_back(&entries, x.len(), [(delta, S::one())]);
    pool::give(entries);
    ((value, aux), gradient)
}

/// Reverse mode: the value of `f` at `x` and its pullback, as [`crate::vjp`].
///
/// ```
/// use nabla::tape;
/// let (y, pullback) = tape::vjp(|v| vec![v[0] * v[1], v[0] + v[1]], &[2.0, 5.0]);
/// assert_eq!(y, vec![10.0, 7.0]);
/// assert_eq!(pullback.apply(&[1.0, 0.0]), vec![5.0, 2.0]);
/// assert_eq!(pullback.apply(&[0.0, 1.0]), vec![1.0, 1.0]);
/// ```
pub fn vjp<S, F, R>(f: F, x: &[S]) -> (Vec<S>, Pullback<S>)
where
    R: Real,
    S: Scalar<R> + 'static,
    F: FnOnce(&[TapeReverse<S>]) -> Vec<TapeReverse<S>>,
{
    let ((values, outputs), entries) = record(x, f, |outputs, key| {
        let values = outputs.iter().map(|y| y.primal()).collect();
        let deltas = outputs.iter().map(|y| y.delta_in(key)).collect();
        (values, deltas)
    });
    (values, Pullback::from_parts(entries, x.len(), outputs))
}

/// The Jacobian of `f` at `x` by reverse mode — one evaluation, one backward sweep
/// per output — as [`crate::jacobian_reverse`]. Row `i` is the gradient of output
/// `i`. A gradient taken inside `f` makes this reverse over reverse:
///
/// ```
/// use nabla::{Scalar, tape};
/// let j = tape::jacobian(|v| vec![v[0] * v[1], v[0].sin()], &[2.0, 3.0]);
/// assert_eq!(j, vec![vec![3.0, 2.0], vec![2.0_f64.cos(), 0.0]]);
/// // The Hessian of x²y, reverse over reverse.
/// let h = tape::jacobian(|v| tape::grad(|w| w[0] * w[0] * w[1], v), &[2.0, 3.0]);
/// assert_eq!(h, vec![vec![6.0, 4.0], vec![4.0, 0.0]]);
/// ```
pub fn jacobian<S, F, R>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R> + 'static,
    F: FnOnce(&[TapeReverse<S>]) -> Vec<TapeReverse<S>>,
{
    vjp(f, x).1.jacobian_rows()
}

/// The Hessian-vector product H·v of a real-valued `f` at `x`, forward over
/// reverse, as [`crate::hvp`].
///
/// ```
/// use nabla::{Scalar, tape};
/// // f(x, y) = 2x² + 3xy + 4y²: H = [[4, 3], [3, 8]]
/// let hv = tape::hvp(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0,
///                    &[3.0, 4.0], &[7.0, 8.0]);
/// assert_eq!(hv, vec![52.0, 85.0]);
/// ```
///
/// # Panics
/// If the direction `v` does not have the length of `x`.
pub fn hvp<S, F, R>(f: F, x: &[S], v: &[S]) -> Vec<S>
where
    R: Real,
    S: Scalar<R> + 'static,
    F: FnOnce(&[TapeReverse<Dual<S>>]) -> TapeReverse<Dual<S>>,
{
    assert_eq!(
        v.len(),
        x.len(),
        "nabla::tape::hvp: the direction `v` has length {} but the point `x` has length {}",
        v.len(),
        x.len()
    );
    let point: Vec<Dual<S>> = x.iter().zip(v).map(|(&p, &t)| Dual::new(p, t)).collect();
    let (_, gradient) = value_and_grad(f, &point);
    gradient.into_iter().map(Dual::tangent).collect()
}

/// The Hessian of a real-valued `f` at `x`, forward over reverse — one [`hvp`] per
/// input — as [`crate::hessian`]. (For reverse over reverse, take the [`jacobian`]
/// of a [`grad`].)
///
/// ```
/// use nabla::{Scalar, tape};
/// let h = tape::hessian(|v| v[0] * v[0] * 2.0 + v[0] * v[1] * 3.0 + v[1] * v[1] * 4.0,
///                       &[3.0, 4.0]);
/// assert_eq!(h, vec![vec![4.0, 3.0], vec![3.0, 8.0]]);
/// ```
pub fn hessian<S, F, R>(f: F, x: &[S]) -> Vec<Vec<S>>
where
    R: Real,
    S: Scalar<R> + 'static,
    F: Fn(&[TapeReverse<Dual<S>>]) -> TapeReverse<Dual<S>>,
{
    let mut direction = vec![S::zero(); x.len()];
    (0..x.len())
        .map(|i| {
            direction[i] = S::one();
            let row = hvp(&f, x, &direction);
            direction[i] = S::zero();
            row
        })
        .collect()
}
