//! Compiled differentiation (`nabla_lang::translate::dual`) on the nested
//! benchmarks of Siskind & Pearlmutter (bench/nabla/nested.nabla) in all
//! four variants (forward or reverse outside, forward or reverse inside):
//! native code gives the interpreter's result bit for bit, frees what it
//! allocates, and compiles in bounded time.

use nabla_lang::driver::Session;
use nabla_lang::memory;
use nabla_lang::pretty::print_value;
use nabla_native::{Native, Options};

/// `main` of `src` run natively: what it prints, and the bytes it left
/// allocated. Also run by the interpreter if `interpret`: what that prints.
fn run(src: String, interpret: bool) -> (Option<String>, String, usize) {
    nabla_lang::stack::run_with_stack(move || {
        let mut s = Session::new();
        s.load("nested.nabla", &src).expect("checks");
        let interp = interpret.then(|| s.run_main().map_err(|ds| s.render(&ds)).expect("runs"));
        let (prog, entry) = s.typed_program("main").expect("compiles its derivatives");
        let native = Native::compile_main(&prog, entry, &Options::default()).expect("compiles");
        let before = memory::live();
        let out = native
            .run()
            .map(|v| print_value(&v))
            .expect("runs natively");
        (interp, out, memory::live() - before)
    })
    .expect("thread")
}

/// nested.nabla with the definitions `defs` and `main` defined as `main`.
fn both(defs: &str, main: &str) -> (String, String, usize) {
    let src = format!(
        "{}\n{defs}\ndef main = {main}\n",
        include_str!("../../../bench/nabla/nested.nabla")
    );
    let (interp, native, leaked) = run(src, true);
    (interp.unwrap_or_default(), native, leaked)
}

fn agrees(defs: &str, main: &str) {
    let (interp, native, leaked) = both(defs, main);
    assert_eq!(native, interp, "{main}");
    assert_eq!(leaked, 0, "{main}: bytes left allocated");
}

#[test]
fn saddle_in_every_mode_is_the_interpreters() {
    for v in ["ff", "fr", "rf", "rr"] {
        agrees("", &format!("saddle_{v} ()"));
    }
}

#[test]
fn particle_in_every_mode_is_the_interpreters() {
    for v in ["ff", "fr", "rf", "rr"] {
        agrees("", &format!("particle_{v} ()"));
    }
}

#[test]
fn a_tower_built_by_recursion_is_refused_not_expanded_forever() {
    // `nth n f` is the n-th derivative for an n known only at run time: the
    // levels are unbounded, so the program runs in the interpreter.
    let src = "def nth n f = if n == 0 then f else diff (nth (n - 1) f)
               def main = nth 3 (fun x -> x * x * x * x) 1.0";
    let mut s = Session::new();
    s.load("tower.nabla", src).expect("checks");
    let refused = s.typed_program("main").expect_err("refused");
    assert!(
        refused.what.contains("nested more than"),
        "{}",
        refused.what
    );
}

#[test]
fn a_million_step_sharing_chain_differentiates_in_linear_time_and_memory() {
    // Krawiec et al. §5.3: `y + y` shares `y`'s Delta, so the trace holds
    // two entries per step; unshared, the Delta would have 2^1 000 000
    // leaves. Halving keeps every value exact: the gradient is 1.
    let src = "def chain x =
                 let rec go i y = if i == 0 then y else go (i - 1) (0.5 * (y + y)) in
                 go 1000000 x
               def main = (grad chain 3.0, value_and_grad chain 3.0)";
    let (_, out, leaked) = run(src.to_string(), false);
    assert_eq!(out, "(1.0, (3.0, 1.0))");
    assert_eq!(leaked, 0, "bytes left allocated");
}

/// A reverse level above another records wide Deltas in buffers of its own,
/// which generated code appends to and sweeps in place: a trace that
/// outgrows their first size (256 Deltas), levels begun inside a function
/// a same-position level is recording, and both kinds of level below.
#[test]
fn wide_traces_that_grow_and_nest_are_the_interpreters() {
    let chain = "def chain n x = let rec go i y = if i == n then y else go (i + 1) (0.5 * (y + sin y)) in go 0 x\n\
                 def inner v = reverse (fun u -> chain 700 u[0] * u[1]) v\n\
                 def constant_inner t = sum (reverse (fun u -> chain 300 u[0] * u[1]) [1.5, t])\n";
    for main in [
        "forward (fun v -> sum (inner v)) [0.3, 0.7]",
        "reverse (fun v -> sum (inner v)) [0.3, 0.7]",
        "forward (fun v -> v[0] * constant_inner 2.0 + sum (inner v)) [0.3, 0.7]",
        "reverse (fun v -> sum (inner [v[1], constant_inner v[0]])) [0.3, 0.7]",
    ] {
        agrees(chain, main);
    }
}
