//! The output of `trace "label" v`: one line `label: VALUE` on stderr, the
//! value printed as `nabla run` prints results (a real perturbed by a
//! derivative operator shows its primal). Both back ends print through
//! [`emit`]; `nabla run --quiet` turns it off with [`set_quiet`].

use super::Value;
use crate::pretty::print_value;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `trace` output is suppressed (process-wide).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Suppresses (`true`) or restores `trace` output for the whole process.
///
/// ```
/// nabla_lang::eval::tracing::set_quiet(true);
/// assert!(nabla_lang::eval::tracing::is_quiet());
/// nabla_lang::eval::tracing::set_quiet(false);
/// ```
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// True if `trace` output is suppressed.
pub fn is_quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Prints `label: VALUE` on stderr, unless quiet. A failed write is ignored
/// (tracing never changes what a program computes).
pub fn emit(label: &str, v: &Value) {
    if is_quiet() {
        return;
    }
    let line = format!("{label}: {}\n", print_value(v));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
