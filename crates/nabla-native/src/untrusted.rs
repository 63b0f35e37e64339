//! Arbitrary bytes run on both back ends: the entry point of the native
//! fuzz target (`fuzz/fuzz_targets/native_differential.rs`) and of the
//! random-input tests.

use crate::{Native, Options};
use nabla_lang::driver::{Session, UNTRUSTED_LIMITS};
use nabla_lang::eval::STEP_LIMIT_EXCEEDED;
use nabla_lang::pretty::print_value_as;

/// Parses and checks `bytes` as a program, runs `main` in the interpreter
/// and, where the compiler handles the program, as native code, both under
/// [`UNTRUSTED_LIMITS`]; `Err` says how their outputs differ. It must never
/// panic, crash, overflow the stack or hang.
///
/// The outputs are compared exactly — value, or the rendered error with its
/// position — except when either run stopped at a resource limit (the call
/// limit, the stack depth, the memory budget): native frames are not the
/// interpreter's, and native code makes fewer allocations, so a program at
/// the edge of a limit may cross it in one back end only.
pub fn run_untrusted_both(bytes: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let mut s = Session::new();
    s.limits = UNTRUSTED_LIMITS;
    if s.load("fuzz.nabla", text).is_err() {
        return Ok(());
    }
    let interp = s.run_main().map_err(|ds| s.render(&ds));
    let Ok((prog, entry)) = s.typed_program("main") else {
        return Ok(());
    };
    let options = Options {
        limits: UNTRUSTED_LIMITS,
        keep_ir: false,
    };
    let Ok(native) = Native::compile_main(&prog, entry, &options) else {
        return Ok(());
    };
    let shown = s
        .type_of("main")
        .cloned()
        .unwrap_or(nabla_lang::types::Type::Unit);
    let native = native
        .run()
        .map(|v| print_value_as(&v, &shown))
        .map_err(|e| s.render(&[e.into()]));
    let at_a_limit = |r: &Result<String, String>| {
        r.as_ref().err().is_some_and(|e| {
            e.contains(STEP_LIMIT_EXCEEDED)
                || e.contains("stack depth exceeded")
                || e.contains("out of memory")
        })
    };
    if native == interp || at_a_limit(&native) || at_a_limit(&interp) {
        Ok(())
    } else {
        Err(format!(
            "the back ends disagree\n  interpreter: {interp:?}\n  native:      {native:?}"
        ))
    }
}
