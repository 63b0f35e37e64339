//! Native code's own properties: memory is reclaimed as the program runs,
//! tail calls run in constant stack, limits apply.

use nabla_lang::driver::Session;
use nabla_lang::eval::Limits;
use nabla_lang::memory;
use nabla_lang::pretty::print_value;
use nabla_native::{Native, Options};

/// Compiles `src`'s `main` and runs it; the printed value or the error
/// message, and the bytes still live after the run.
fn run(src: &str, limits: Limits) -> (Result<String, String>, usize) {
    let src = src.to_string();
    nabla_lang::stack::run_with_stack(move || {
        let mut s = Session::new();
        s.load("test.nabla", &src).expect("checks");
        let (prog, entry) = s.typed_program("main").expect("lowers");
        let n = Native::compile(
            &prog,
            entry,
            &Options {
                limits,
                keep_ir: false,
            },
        )
        .expect("compiles");
        let before = memory::live();
        let r = n.run().map(|v| print_value(&v)).map_err(|e| e.message);
        (r, memory::live() - before)
    })
    .expect("thread")
}

#[test]
fn an_allocating_loop_runs_in_constant_memory() {
    // 10^6 iterations each building a 100-element vector (800 MB in all):
    // the budget is 16 MB, so only reclaiming each vector lets it finish.
    let src = "def go i acc = if i == 0 then acc else go (i - 1) (acc + sum (build 100 (fun j -> real j)))
               def main = go 1000000 0.0";
    memory::set_budget(16 << 20);
    let (r, live) = run(src, Limits::default());
    assert_eq!(r, Ok("4950000000.0".into()));
    assert_eq!(live, 0, "every vector freed");
}

#[test]
fn nested_vectors_closures_and_sums_are_freed() {
    let src = "def mk n = build n (fun i -> build i (fun j -> real (i * j)))
               def adders = map (fun k -> fun x -> x + real k) [1, 2, 3]
               def pick b v = if b then inl v else inr (size v)
               def main =
                 let m = mk 20 in
                 let fs = adders in
                 let total = fold (fun acc f -> f acc) 0.0 fs in
                 let z = zip m (build 20 (fun i -> i)) in
                 (total, sum (map (fun r -> sum r) m), size z,
                  match pick true m[3] with | inl v -> sum v | inr n -> real n,
                  let p = z[4] in let row = fst p in row[2])";
    let (r, live) = run(src, Limits::default());
    assert_eq!(r, Ok("(6.0, 16815.0, 20, 9.0, 8.0)".into()));
    assert_eq!(live, 0, "every object freed");
}

#[test]
fn tail_calls_run_in_constant_stack() {
    // Self tail calls are loops; mutual ones are Cranelift tail calls.
    let src = "def even n = if n == 0 then true else odd (n - 1)
               def odd n = if n == 0 then false else even (n - 1)
               def count n acc = if n == 0 then acc else count (n - 1) (acc + 1)
               def main = (even 10000001, count 10000000 0)";
    assert_eq!(
        run(src, Limits::default()).0,
        Ok("(false, 10000000)".into())
    );
}

#[test]
fn deep_recursion_is_a_clean_error() {
    let src = "def down n = if n == 0 then 0 else 1 + down (n - 1)\ndef main = down 100000000";
    assert_eq!(
        run(src, Limits::default()).0,
        Err("stack depth exceeded".into())
    );
}

#[test]
fn the_call_limit_applies() {
    let src = "def spin n = if n == 0 then 0 else spin (n - 1)\ndef main = spin 1000000";
    let limits = Limits {
        max_calls: Some(1000),
        ..Limits::default()
    };
    let (r, _) = run(src, limits);
    assert_eq!(r, Err(nabla_lang::eval::STEP_LIMIT_EXCEEDED.into()));
}
