//! Guarding against native stack overflow on deeply nested input.
//!
//! Every recursive phase (parser, type checker, desugarer, interpreter, printer)
//! calls [`check`] on entry. It compares the address of a local variable with
//! the stack base recorded by [`run_with_stack`] and fails cleanly once the
//! budget is used up, so a 100 000-deep nest of parentheses or a 10⁶-deep
//! recursion gives an error instead of a crash, in debug and release builds
//! alike (frame sizes differ, the budget in bytes does not).

use std::cell::Cell;

/// Native stack size of the thread that [`run_with_stack`] spawns: room
/// for deeply nested input in every phase (only what is used is touched).
pub const BIG_STACK_BYTES: usize = 2 << 30;

/// Native stack an evaluation may use ([`Guard::for_evaluation`]). A
/// non-tail recursion touches all of it before "stack depth exceeded", so
/// it is what an infinite recursion costs in memory and time (the whole
/// 2 GiB took seconds); 512 MiB still allows about 1.2·10⁶ nested calls of
/// a release build's interpreter (docs/language.md).
pub const EVAL_STACK_BYTES: usize = 512 << 20;

/// Bytes kept free below the budget for non-guarded leaf calls (printing, drop glue).
const SAFETY_MARGIN: usize = 4 << 20;

/// Budget assumed on a thread not started by [`run_with_stack`].
const DEFAULT_BUDGET: usize = 1 << 20;

thread_local! {
    static BASE: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// The stack budget was used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackExhausted;

#[inline(always)]
fn here() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Fails once the current thread has used more native stack than its budget.
#[inline]
pub fn check() -> Result<(), StackExhausted> {
    let (base, budget) = bounds();
    if base.abs_diff(here()) > budget {
        Err(StackExhausted)
    } else {
        Ok(())
    }
}

/// The stack base and budget [`check`] uses on the current thread (the
/// base is recorded now if no check has run on it yet).
#[inline]
fn bounds() -> (usize, usize) {
    let now = here();
    BASE.with(|b| match b.get() {
        Some(v) => v,
        None => {
            let v = (now, DEFAULT_BUDGET);
            b.set(Some(v));
            v
        }
    })
}

/// The test of [`check`] with this thread's bounds read once, for a caller
/// that checks on every call (the interpreter): [`Guard::exceeded`] reads
/// no thread-local and makes a single comparison.
#[derive(Clone, Copy, Debug)]
pub struct Guard {
    /// Lowest allowed address.
    lo: usize,
    /// Width of the allowed range (the highest allowed address is `lo + span`).
    span: usize,
}

impl Guard {
    /// The guard of the current thread; it must only be used on this thread.
    pub fn current() -> Guard {
        let (base, budget) = bounds();
        let lo = base.saturating_sub(budget);
        Guard {
            lo,
            span: base.saturating_add(budget) - lo,
        }
    }

    /// The guard of an evaluation that starts here: the thread's budget,
    /// narrowed to [`EVAL_STACK_BYTES`] below the current position (stacks
    /// grow down on every platform nabla runs on; one growing up keeps the
    /// thread's budget). Only this thread may use it.
    pub fn for_evaluation() -> Guard {
        let thread = Guard::current();
        let end = thread.lo.saturating_add(thread.span);
        let lo = thread.lo.max(here().saturating_sub(EVAL_STACK_BYTES));
        Guard {
            lo,
            span: end.saturating_sub(lo),
        }
    }

    /// The lowest stack address the guarded code may use (native code
    /// compares its stack pointer with it: stacks grow down).
    pub fn lowest(self) -> usize {
        self.lo
    }

    /// True once the current thread has used more native stack than its
    /// budget, in either direction from the base (the same test as [`check`]).
    #[inline(always)]
    pub fn exceeded(self) -> bool {
        here().wrapping_sub(self.lo) > self.span
    }
}

/// Why [`try_run_with_stack`] returned no result.
#[derive(Debug)]
pub enum ThreadFailure {
    /// The thread could not be started (typically: its stack could not be
    /// reserved under `ulimit -v`).
    Start(std::io::Error),
    /// The thread panicked (a bug).
    Panicked,
}

impl std::fmt::Display for ThreadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadFailure::Start(e) => write!(
                f,
                "could not start the evaluator thread with {} MB of stack: {e}",
                BIG_STACK_BYTES >> 20
            ),
            ThreadFailure::Panicked => write!(f, "internal error (the evaluator thread failed)"),
        }
    }
}

/// Runs `f` on a fresh thread with a [`BIG_STACK_BYTES`] native stack and a
/// matching budget for [`check`]. Returns `None` if the thread could not be
/// spawned or panicked (see [`try_run_with_stack`] for which).
pub fn run_with_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    try_run_with_stack(f).ok()
}

/// [`run_with_stack`], saying why it failed.
pub fn try_run_with_stack<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ThreadFailure> {
    std::thread::Builder::new()
        .stack_size(BIG_STACK_BYTES)
        .spawn(move || {
            BASE.with(|b| b.set(Some((here(), BIG_STACK_BYTES - SAFETY_MARGIN))));
            f()
        })
        .map_err(ThreadFailure::Start)?
        .join()
        .map_err(|_| ThreadFailure::Panicked)
}
