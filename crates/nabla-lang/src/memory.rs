//! The memory budget of an evaluation.
//!
//! What a program can make grow without bound is counted against a budget:
//! vectors ([`Counted`] buffers, released when their last reference
//! drops), the trace of reverse-mode levels ([`crate::ad::trace`]), the
//! Delta terms of translated programs and the evaluator's value stack. The
//! meter holds *live* bytes: a charge is paid back when its owner is
//! dropped. The budget is one per process ([`set_budget`]); live bytes are
//! counted per thread (run-time values never cross threads, so charges and
//! releases balance on the thread that made them), so each evaluation has
//! the whole budget and concurrent ones (tests, the benchmark server) do
//! not charge each other.
//!
//! Explicit accounting rather than a counting global allocator, because
//! the interpreter must fail with a clean error *before* an allocation
//! that would not fit (a global allocator can only abort), and because it
//! needs no `unsafe`. Small boxes (tuples, closures) are only counted as
//! elements of a vector; native stack is bounded by the stack budget
//! ([`crate::stack`]).
//!
//! Two kinds of check: a known-size allocation (`build n`, `zip`, a vector
//! literal) takes a [`Reservation`] first and fails at its own source location;
//! growth in small steps (a trace, the value stack) is charged as it
//! happens and caught by [`check`], which the evaluator calls every 1024
//! function calls (not on every call: the hot path reads no thread-local),
//! so it overshoots the budget by what those calls added.

use std::cell::Cell;
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Budget used when the machine's memory cannot be read.
const FALLBACK_BUDGET: usize = 4 << 30;

/// The budget in bytes; 0 until set or first read (then [`default_budget`]).
static BUDGET: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Bytes charged on this thread and not yet released.
    static LIVE: Cell<usize> = const { Cell::new(0) };
}

/// An allocation that does not fit in the memory budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryExhausted {
    /// Bytes asked for (0 when live memory alone is already over budget).
    pub requested: usize,
    /// Bytes live when it was asked for.
    pub live: usize,
    /// The budget.
    pub budget: usize,
}

impl fmt::Display for MemoryExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "out of memory: ")?;
        if self.requested > 0 {
            write!(f, "{} more would exceed", show_size(self.requested))?;
        } else {
            write!(f, "over")?;
        }
        write!(
            f,
            " the budget of {} ({} in use; change it with --max-memory)",
            show_size(self.budget),
            show_size(self.live)
        )
    }
}

/// Sets the budget in bytes, for every thread (live bytes stay counted).
pub fn set_budget(bytes: usize) {
    BUDGET.store(bytes.max(1), Ordering::Relaxed);
}

/// The budget in bytes.
#[inline]
pub fn budget() -> usize {
    match BUDGET.load(Ordering::Relaxed) {
        0 => first_budget(),
        b => b,
    }
}

#[cold]
fn first_budget() -> usize {
    // A budget set meanwhile wins over the default.
    let d = default_budget();
    match BUDGET.compare_exchange(0, d, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => d,
        Err(set) => set,
    }
}

/// Bytes currently charged on this thread.
#[inline]
pub fn live() -> usize {
    LIVE.with(Cell::get)
}

/// The error for a request of `requested` bytes (0: for what is live).
fn exhausted(requested: usize) -> MemoryExhausted {
    MemoryExhausted {
        requested,
        live: live(),
        budget: budget(),
    }
}

/// True once live bytes are over the budget (a charged step overshot).
#[inline]
pub fn over_budget() -> bool {
    live() > budget()
}

/// Fails once live bytes are over the budget.
pub fn check() -> Result<(), MemoryExhausted> {
    if over_budget() {
        Err(exhausted(0))
    } else {
        Ok(())
    }
}

/// Bytes held against the budget while a buffer of known final size is
/// being filled (its elements are computed one by one and may allocate
/// too), released when dropped: by then the finished buffer is
/// [`Counted`].
#[must_use = "the bytes are held only while the reservation lives"]
#[derive(Debug)]
pub struct Reservation {
    bytes: usize,
}

impl Reservation {
    /// Holds `bytes`, or fails if they do not fit in the budget.
    pub fn new(bytes: usize) -> Result<Reservation, MemoryExhausted> {
        if bytes > budget().saturating_sub(live()) {
            return Err(exhausted(bytes));
        }
        charge(bytes);
        Ok(Reservation { bytes })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        release(self.bytes);
    }
}

/// Counts `bytes` as live (always succeeds; see [`over_budget`]).
#[inline]
pub fn charge(bytes: usize) {
    LIVE.with(|l| l.set(l.get().saturating_add(bytes)));
}

/// Gives back bytes charged earlier on this thread.
#[inline]
pub fn release(bytes: usize) {
    LIVE.with(|l| l.set(l.get().saturating_sub(bytes)));
}

/// Memory an owned buffer holds on the heap.
pub trait Footprint {
    /// Bytes, approximately (at least the buffer's own).
    fn footprint(&self) -> usize;
}

impl Footprint for Vec<f64> {
    fn footprint(&self) -> usize {
        self.capacity() * size_of::<f64>()
    }
}

/// A buffer charged to this thread's meter for as long as it lives.
#[derive(Debug)]
pub struct Counted<T> {
    value: T,
    bytes: usize,
}

impl<T: Footprint> Counted<T> {
    /// Charges `value`'s footprint (the caller checked with a
    /// [`Reservation`] where it could fail cleanly).
    pub fn new(value: T) -> Counted<T> {
        let bytes = value.footprint();
        charge(bytes);
        Counted { value, bytes }
    }
}

impl<T> std::ops::Deref for Counted<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        release(self.bytes);
    }
}

/// The budget a thread starts with: half of the memory this process can
/// have — physical memory (`MemTotal` in `/proc/meminfo`), or less if a
/// control group or `ulimit -v` allows less (less the evaluator's stack,
/// which `ulimit -v` counts) — or 4 GiB where none of that can be read.
/// Computed once per process.
pub fn default_budget() -> usize {
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    *DEFAULT.get_or_init(|| {
        [physical_memory(), cgroup_limit(), address_space_limit()]
            .into_iter()
            .flatten()
            .min()
            .map_or(FALLBACK_BUDGET, |m| m / 2)
    })
}

fn physical_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

fn cgroup_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok()?;
    text.trim().parse().ok()
}

fn address_space_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    // "Max address space   <soft>   <hard>   bytes": the soft limit.
    let limit: usize = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(limit.saturating_sub(crate::stack::BIG_STACK_BYTES))
}

/// Parses a size such as `512M`, `4G`, `1.5G`, `100000` (bytes) or
/// `64KiB`. Suffixes are binary: K = 2^10, M = 2^20, G = 2^30, T = 2^40.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => return Err(format!("`{text}` is not a size (examples: 512M, 4G)")),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 512M, 4G)"))?;
    let bytes = n * scale as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < usize::MAX as f64) {
        return Err(format!("`{text}` is not a usable memory size"));
    }
    Ok(bytes as usize)
}

/// `bytes` for a message: `512 MiB`, `3.2 GiB`, `100 bytes`.
pub fn show_size(bytes: usize) -> String {
    const UNITS: [(&str, usize); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, unit) in UNITS {
        if bytes >= unit {
            let x = bytes as f64 / unit as f64;
            return if x >= 100.0 || x.fract() < 0.05 {
                format!("{x:.0} {name}")
            } else {
                format!("{x:.1} {name}")
            };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1.5g"), Ok(3 << 29));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("100000"), Ok(100_000));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("-3M").is_err());
    }

    #[test]
    fn counted_buffers_charge_while_they_live() {
        // The budget is shared with the other tests: only this thread's
        // live bytes are moved, relative to it.
        let before = live();
        let v = Counted::new(vec![0.0; 1000]);
        assert_eq!(live(), before + 8000);
        let room = budget() - before - 8000;
        assert!(Reservation::new(room + 1).is_err());
        let held = Reservation::new(room).expect("fits");
        assert_eq!(live(), budget());
        assert!(!over_budget());
        drop(held);
        drop(v);
        assert_eq!(live(), before);
        charge(budget() + 1);
        assert!(over_budget() && check().is_err());
        release(budget() + 1);
        assert!(check().is_ok());
    }

    #[test]
    fn an_evaluation_gives_back_all_it_charged() {
        // Vectors, tuples in vectors, a trace, the value stack and the
        // Deltas of a translated program are charged while they live and
        // released when the evaluation is over.
        let program = "def f x = let rec loop i acc = if i == 0 then acc else \
                       loop (i - 1) (acc * x) in loop 1000 x\n\
                       def main = (grad f 1.0, size (zip (build 1000 (fun i -> (i, i))) \
                       (build 1000 (fun i -> 0.0))))\n";
        let to_translate = "def g (x, y) = x * y + sin x\ndef main = grad g (1.0, 2.0)\n";
        let (value, translated, left) = crate::stack::run_with_stack(move || {
            let mut s = crate::driver::Session::new();
            s.load("t.nabla", program).expect("checks");
            let value = s.run_main().expect("runs");
            let mut s = crate::driver::Session::new();
            s.load("g.nabla", to_translate).expect("checks");
            let text = s
                .runnable_translation(crate::translate::Mode::Reverse)
                .expect("translates");
            let mut t = crate::driver::Session::new();
            t.load("g (translated)", &text).expect("checks");
            let translated = t.run_main().expect("runs");
            (value, translated, live())
        })
        .expect("thread");
        assert_eq!(value, "(1001.0, 1000)");
        assert_eq!(translated, "(2.5403023058681398, 1.0)");
        assert_eq!(left, 0);
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(show_size(512 << 20), "512 MiB");
        assert_eq!(show_size(3 << 29), "1.5 GiB");
        assert_eq!(show_size(100), "100 bytes");
    }
}
