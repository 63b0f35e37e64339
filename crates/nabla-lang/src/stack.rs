//! Guarding against native stack overflow on deeply nested input.
//!
//! Every recursive phase (parser, type checker, desugarer, interpreter, printer)
//! calls [`check`] on entry. It compares the address of a local variable with
//! the stack base recorded by [`run_with_stack`] and fails cleanly once the
//! budget is used up, so a 100 000-deep nest of parentheses or a 10⁶-deep
//! recursion gives an error instead of a crash, in debug and release builds
//! alike (frame sizes differ, the budget in bytes does not).

use std::cell::Cell;

/// Native stack size of the thread that [`run_with_stack`] spawns.
pub const BIG_STACK_BYTES: usize = 2 << 30;

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

fn here() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Fails once the current thread has used more native stack than its budget.
#[inline]
pub fn check() -> Result<(), StackExhausted> {
    let now = here();
    let (base, budget) = BASE.with(|b| match b.get() {
        Some(v) => v,
        None => {
            let v = (now, DEFAULT_BUDGET);
            b.set(Some(v));
            v
        }
    });
    if base.abs_diff(now) > budget {
        Err(StackExhausted)
    } else {
        Ok(())
    }
}

/// Runs `f` on a fresh thread with a [`BIG_STACK_BYTES`] native stack and a
/// matching budget for [`check`]. Returns `None` if the thread could not be
/// spawned or panicked.
pub fn run_with_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    std::thread::Builder::new()
        .stack_size(BIG_STACK_BYTES)
        .spawn(move || {
            BASE.with(|b| b.set(Some((here(), BIG_STACK_BYTES - SAFETY_MARGIN))));
            f()
        })
        .ok()?
        .join()
        .ok()
}
