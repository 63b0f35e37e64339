//! Parse + type-check + run arbitrary bytes as a nabla program (and as an
//! expression). Any panic, stack overflow or timeout is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = nabla_lang::driver::run_untrusted(data);
});
