//! Arbitrary bytes as a program, run in the interpreter and as native code
//! (`nabla_native::run_untrusted_both`): any panic, crash, stack overflow,
//! timeout or disagreement between the back ends is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = nabla_native::run_untrusted_both(data) {
        panic!("{e}");
    }
});
