//! The memory budget of an evaluation.
//!
//! What a program can make grow without bound is counted against a budget
//! per thread: vectors ([`Counted`] buffers, released when their last
//! reference drops), the trace of reverse-mode levels
//! ([`crate::ad::trace`]) and the evaluator's value stack. The meter holds
//! *live* bytes: a charge is paid back when its owner is dropped.
//!
//! Explicit accounting rather than a counting global allocator, because
//! the interpreter must fail with a clean error *before* an allocation
//! that would not fit (a global allocator can only abort), and because a
//! count per thread keeps concurrent evaluations (tests, the benchmark
//! server) from charging each other. Small boxes (tuples, closures) are
//! only counted as elements of a vector; native stack is bounded by the
//! stack budget ([`crate::stack`]).
//!
//! Two kinds of check: a known-size allocation (`build n`, `zip`, a vector
//! literal) takes a [`Reservation`] first and fails at its own source location;
//! growth in small steps (a trace, the value stack) is charged as it
//! happens and caught by [`over_budget`], which the evaluator tests on every
//! call, so it overshoots the budget by at most one step.

use std::cell::Cell;
use std::fmt;
use std::sync::OnceLock;

/// Budget used when the machine's memory cannot be read.
const FALLBACK_BUDGET: usize = 4 << 30;

thread_local! {
    /// Bytes still available on this thread: the budget minus live bytes
    /// (negative once a charged step overshot). Unset (`None`) until the
    /// first use, which starts from [`default_budget`].
    static HEADROOM: Cell<Option<isize>> = const { Cell::new(None) };
    /// The budget the headroom was computed from.
    static BUDGET: Cell<usize> = const { Cell::new(0) };
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

fn headroom() -> isize {
    HEADROOM.with(|h| match h.get() {
        Some(v) => v,
        None => {
            let b = default_budget();
            BUDGET.with(|c| c.set(b));
            let v = to_isize(b);
            h.set(Some(v));
            v
        }
    })
}

fn to_isize(bytes: usize) -> isize {
    isize::try_from(bytes).unwrap_or(isize::MAX)
}

fn adjust(delta: isize) {
    let v = headroom().saturating_add(delta);
    HEADROOM.with(|h| h.set(Some(v)));
}

/// Sets this thread's budget in bytes (live bytes stay counted).
pub fn set_budget(bytes: usize) {
    let live = live();
    BUDGET.with(|c| c.set(bytes));
    HEADROOM.with(|h| h.set(Some(to_isize(bytes).saturating_sub(to_isize(live)))));
}

/// This thread's budget in bytes.
pub fn budget() -> usize {
    headroom();
    BUDGET.with(Cell::get)
}

/// Bytes currently charged on this thread.
pub fn live() -> usize {
    let h = headroom();
    usize::try_from(to_isize(BUDGET.with(Cell::get)).saturating_sub(h)).unwrap_or(0)
}

/// The error for a request of `requested` bytes (0: for what is live).
fn exhausted(requested: usize) -> MemoryExhausted {
    MemoryExhausted {
        requested,
        live: live(),
        budget: budget(),
    }
}

/// True once live bytes are over the budget (a charged step overshot);
/// cheap enough to test on every call.
#[inline]
pub fn over_budget() -> bool {
    headroom() < 0
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
        let h = headroom();
        if h < 0 || to_isize(bytes) > h {
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
pub fn charge(bytes: usize) {
    adjust(to_isize(bytes).saturating_neg());
}

/// Gives back bytes charged earlier on this thread.
pub fn release(bytes: usize) {
    adjust(to_isize(bytes));
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
        set_budget(1 << 20);
        let before = live();
        let v = Counted::new(vec![0.0; 1000]);
        assert_eq!(live(), before + 8000);
        let room = (1 << 20) - before - 8000;
        assert!(Reservation::new(room + 1).is_err());
        let held = Reservation::new(room).expect("fits");
        assert_eq!(live(), 1 << 20);
        drop(held);
        drop(v);
        assert_eq!(live(), before);
        charge(2 << 20);
        assert!(over_budget() && check().is_err());
        release(2 << 20);
        assert!(check().is_ok());
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(show_size(512 << 20), "512 MiB");
        assert_eq!(show_size(3 << 29), "1.5 GiB");
        assert_eq!(show_size(100), "100 bytes");
    }
}
