//! The type checker's cost is linear in the number of integer literals: each
//! literal has a numeric type variable of its own, and unifying them must not
//! build chains of variables whose length grows with the program (it did: a
//! vector of 10 000 `1`s took 2 s to check, 20 000 took 7.5 s).
//!
//! Timings are only ever compared with each other, measured in the same run.

use nabla_lang::driver::Session;
use nabla_lang::stack::run_with_stack;
use std::time::{Duration, Instant};

/// How long checking `text` takes.
fn check_time(text: &str) -> Duration {
    let mut s = Session::new();
    let start = Instant::now();
    s.load("<test>", text).expect("the program checks");
    start.elapsed()
}

/// A vector of rows `LIT + LIT + … + LIT`: `n` literals in all, each
/// unified with its neighbours both as an operand and as a vector element.
fn program(lit: &str, n: usize) -> String {
    let row = [lit; 10].join(" + ");
    format!("def main = [{}]\n", vec![row; n / 10].join(", "))
}

#[test]
fn checking_int_literals_costs_about_as_much_as_real_literals() {
    run_with_stack(|| {
        let n = 100_000;
        let real_time = check_time(&program("1.0", n));
        let int_time = check_time(&program("1", n));
        assert!(
            int_time < real_time * 10,
            "{n} Int literals took {int_time:?} to check, the same with Real literals {real_time:?}"
        );
    });
}
