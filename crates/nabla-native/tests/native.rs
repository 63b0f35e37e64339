//! Native code's own properties: memory is reclaimed as the program runs,
//! tail calls run in constant stack, limits apply.

use nabla_lang::driver::Session;
use nabla_lang::eval::{Limits, Value};
use nabla_lang::memory;
use nabla_lang::pretty::print_value;
use nabla_native::{Native, Options};
use std::rc::Rc;

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
fn a_real_sum_of_a_build_makes_no_vector_wherever_it_stands() {
    // 10^7 elements (80 MB as a vector) under the 16 MB budget: only a sum
    // that adds each element as it is made finishes — as a function's body,
    // as an argument of a known function, of a primitive and of a closure.
    let src = "def total n = sum (build n (fun i -> real i))
               def twice x = 2.0 * x
               def main =
                 let f = if total 3 > 2.0 then twice else sqrt in
                 (total 10000000, twice (sum (build 10000000 (fun i -> 1.0))),
                  sqrt (sum (build 10000000 (fun i -> 4.0))),
                  f (sum (build 10000000 (fun i -> 0.5))))";
    memory::set_budget(16 << 20);
    let (r, _) = run(src, Limits::default());
    assert_eq!(
        r,
        Ok("(49999995000000.0, 20000000.0, 6324.555320336759, 10000000.0)".into())
    );
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
fn a_run_that_fails_frees_what_it_allocated() {
    // An error returns through every caller without dropping what they
    // hold: the large vectors (over 256 bytes, from the system) must be
    // freed with the run all the same (found by the fuzz target).
    let src = "def big n = build n (fun i -> real i)
               def main =
                 let v = big 100 in
                 let w = map (fun x -> x * 2.0) v in
                 sum v + sum w + real (1 / (size v - 100))";
    let (r, live) = run(src, Limits::default());
    assert!(r.is_err_and(|m| m.contains("division by zero")));
    assert_eq!(live, 0, "nothing left allocated after the error");
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

/// Applies `name` of `src` to `args` natively and in the interpreter
/// (`Compiled::apply`, one argument at a time); both printed results or
/// errors, and the bytes native code left live.
/// (Values are not `Send`: `args` builds them on the evaluation thread.)
fn call_both(
    src: &str,
    name: &str,
    args: impl FnOnce() -> Vec<Value> + Send + 'static,
) -> (String, String, usize) {
    let (src, name) = (src.to_string(), name.to_string());
    nabla_lang::stack::run_with_stack(move || {
        let args = args();
        let mut s = Session::new();
        s.load("test.nabla", &src).expect("checks");
        let mut compiled = s.compile().expect("compiles");
        let mut f = compiled.global(&name).expect("defined");
        let mut interp = Ok(Value::Unit);
        for a in &args {
            interp = compiled.apply(f.clone(), a.clone());
            f = interp.clone().unwrap_or(Value::Unit);
        }
        let interp = interp.map_or_else(|d| s.render(&d), |v| print_value(&v));
        let (prog, entry) = s.typed_program(&name).expect("lowers");
        let n = Native::compile(&prog, entry, &Options::default()).expect("compiles");
        let before = memory::live();
        let native = n
            .call(&args)
            .map_or_else(|e| format!("error: {}", e.message), |v| print_value(&v));
        (interp, native, memory::live() - before)
    })
    .expect("thread")
}

#[test]
fn the_host_applies_a_compiled_function_to_values() {
    let src = "def stats (input : (Vec Real, Vec (Vec Real), Int, Bool)) =
                 let (xs, rows, k, flag) = input in
                 let total = sum xs in
                 let wide = map (fun r -> real k * sum r) rows in
                 (if flag then total else -total, wide, [xs, map (fun x -> x * x) xs])";
    let args = || {
        vec![Value::Tuple(Rc::new(vec![
            Value::reals(vec![1.0, 2.5, -3.0]),
            Value::values(vec![
                Value::reals(vec![1.0, 2.0]),
                Value::reals(vec![]),
                Value::reals(vec![0.5]),
            ]),
            Value::Int(3),
            Value::Bool(false),
        ]))]
    };
    let (interp, native, live) = call_both(src, "stats", args);
    assert_eq!(native, interp);
    assert_eq!(
        native,
        "(-0.5, [9.0, 0.0, 1.5], [[1.0, 2.5, -3.0], [1.0, 6.25, 9.0]])"
    );
    assert_eq!(live, 0, "arguments and result are freed");
}

#[test]
fn the_host_passes_sums_and_several_arguments() {
    let src = "def pick (s : Real + Vec Real) scale = match s with | inl x -> scale * x | inr v -> scale * sum v";
    let left = || vec![Value::Inl(Rc::new(Value::Real(2.0))), Value::Real(3.0)];
    let right = || {
        vec![
            Value::Inr(Rc::new(Value::reals(vec![1.0, 2.0]))),
            Value::Real(3.0),
        ]
    };
    type MakeArgs = fn() -> Vec<Value>;
    let cases: [(MakeArgs, &str); 2] = [(left, "6.0"), (right, "9.0")];
    for (args, want) in cases {
        let (interp, native, live) = call_both(src, "pick", args);
        assert_eq!((native.as_str(), interp.as_str()), (want, want));
        assert_eq!(live, 0);
    }
}

#[test]
fn run_time_errors_of_a_call_are_the_interpreters() {
    let src = "def at (input : (Vec Real, Int)) = let (xs, i) = input in xs[i]";
    let args = || {
        vec![Value::Tuple(Rc::new(vec![
            Value::reals(vec![1.0, 2.0]),
            Value::Int(5),
        ]))]
    };
    let (interp, native, _) = call_both(src, "at", args);
    assert!(
        interp.contains("index 5 out of range for a vector of length 2"),
        "{interp}"
    );
    assert_eq!(
        native,
        "error: index 5 out of range for a vector of length 2"
    );
}

#[test]
fn ill_typed_or_missing_arguments_are_refused_before_running() {
    let outcome = nabla_lang::stack::run_with_stack(|| {
        let mut s = Session::new();
        s.load("test.nabla", "def f (xs, n) = sum xs * real n")
            .expect("checks");
        let (prog, entry) = s.typed_program("f").expect("lowers");
        let n = Native::compile(&prog, entry, &Options::default()).expect("compiles");
        let before = memory::live();
        let wrong = Value::Tuple(Rc::new(vec![Value::reals(vec![1.0]), Value::Real(2.0)]));
        let messages = [
            n.call(&[wrong]).map(|_| ()).unwrap_err().message,
            n.call(&[]).map(|_| ()).unwrap_err().message,
        ];
        (messages, memory::live() - before)
    })
    .expect("thread");
    assert_eq!(
        outcome.0,
        [
            "argument 1 of the entry: expected a value of type Int, found a Real".to_string(),
            "the entry takes 1 argument(s), not 0".to_string(),
        ]
    );
    assert_eq!(
        outcome.1, 0,
        "the vector written before the mismatch is freed"
    );
}

#[test]
fn converted_arguments_are_reused_and_never_changed() {
    // `map` may update a uniquely held vector in place: the host's copy must
    // never be that vector.
    let (outputs, live) = nabla_lang::stack::run_with_stack(|| {
        let mut s = Session::new();
        s.load(
            "test.nabla",
            "def twice (xss : Vec (Vec Real)) = (map (fun xs -> map (fun x -> 2.0 * x) xs) xss, xss[0])",
        )
        .expect("checks");
        let (prog, entry) = s.typed_program("twice").expect("lowers");
        let n = Native::compile(&prog, entry, &Options::default()).expect("compiles");
        let before = memory::live();
        let args = n
            .args(&[Value::values(vec![
                Value::reals(vec![1.0, 2.0]),
                Value::reals(vec![3.0]),
            ])])
            .expect("converts");
        let outputs: Vec<String> = (0..3)
            .map(|_| print_value(&n.call_with(&args).expect("runs")))
            .collect();
        drop(args);
        (outputs, memory::live() - before)
    })
    .expect("thread");
    for o in &outputs {
        assert_eq!(o, "([[2.0, 4.0], [6.0]], [1.0, 2.0])");
    }
    assert_eq!(live, 0);
}

#[test]
fn indexing_inside_loops_is_still_checked_where_it_can_fail() {
    // `v[i]` below `size v` is checked once by the loop; these are not.
    for (src, want) in [
        (
            "def main = let v = [1.0, 2.0] in build (size v + 1) (fun i -> v[i])",
            "index 2 out of range for a vector of length 2",
        ),
        (
            "def main = let v = [1.0, 2.0] in let w = [1.0] in build (size v) (fun i -> w[i] + v[i])",
            "index 1 out of range for a vector of length 1",
        ),
        (
            "def main = let v = [1.0, 2.0] in sum (build (size v) (fun i -> sum (build (i + 2) (fun j -> v[j]))))",
            "index 2 out of range for a vector of length 2",
        ),
    ] {
        let (r, _) = run(src, Limits::default());
        assert_eq!(r, Err(want.to_string()), "{src}");
    }
    let (r, _) = run(
        "def main = let v = [1.0, 2.0, 4.0] in (build (size v) (fun i -> v[i] + sum (build i (fun j -> v[j]))), sum (map (fun x -> x) v))",
        Limits::default(),
    );
    assert_eq!(r, Ok("([1.0, 3.0, 7.0], 7.0)".to_string()));
}

#[test]
fn a_result_of_reals_is_read_straight_into_numbers() {
    let (reals, refused, live) = nabla_lang::stack::run_with_stack(|| {
        let mut s = Session::new();
        s.load(
            "test.nabla",
            "def f (x : Real) = (x, [[x, 2.0 * x], []], build 2 (fun i -> (real i, x)))\n\
             def g (x : Real) = (x, 1)",
        )
        .expect("checks");
        let compile = |name: &str| {
            let (prog, entry) = s.typed_program(name).expect("lowers");
            Native::compile(&prog, entry, &Options::default()).expect("compiles")
        };
        let (f, g) = (compile("f"), compile("g"));
        let before = memory::live();
        let args = f.args(&[Value::Real(1.5)]).expect("converts");
        let reals = f.call_reals(&args).expect("runs");
        let refused = g
            .call_reals(&g.args(&[Value::Real(1.5)]).expect("converts"))
            .map_err(|e| e.message);
        drop(args);
        (reals, refused, memory::live() - before)
    })
    .expect("thread");
    assert_eq!(reals, [1.5, 1.5, 3.0, 0.0, 1.5, 1.0, 1.5]);
    assert_eq!(
        refused,
        Err("the result, of type (Real, Int), holds more than reals".to_string())
    );
    assert_eq!(live, 0);
}

#[test]
fn indexing_hoisted_out_of_loops_fails_as_the_first_iteration_would() {
    // Each expected result is the interpreter's.
    let cases = [
        // A loop that does not run evaluates nothing.
        (
            "def main = let v = [1.0] in let j = 5 in build 0 (fun i -> v[j])",
            Ok("[]"),
        ),
        // An earlier error of the first iteration comes first.
        (
            "def main = let v = [1.0] in let j = 5 in build 2 (fun i -> let a = 10 / (i - i) in v[j] + real a)",
            Err("integer division by zero"),
        ),
        (
            "def main = let v = [1.0] in let j = 3 in build 2 (fun i -> v[j] + real i)",
            Err("index 3 out of range for a vector of length 1"),
        ),
        // Under a condition: not evaluated at all.
        (
            "def main = let v = [1.0] in let j = 3 in build 2 (fun i -> if i > 5 then v[j] else 0.0)",
            Ok("[0.0, 0.0]"),
        ),
        (
            "def main = let m = [[1.0, 2.0], [3.0]] in let j = 1 in sum (build 2 (fun i -> m[j][i]))",
            Err("index 1 out of range for a vector of length 1"),
        ),
        (
            "def main = let m = [[1.0, 2.0], [3.0]] in let j = 0 in (sum (build 2 (fun i -> m[j][i] * m[0][1])), map (fun x -> m[j]) [1, 2])",
            Ok("(6.0, [[1.0, 2.0], [1.0, 2.0]])"),
        ),
    ];
    for (src, want) in cases {
        let (r, live) = run(src, Limits::default());
        assert_eq!(r, want.map(str::to_string).map_err(str::to_string), "{src}");
        if want.is_ok() {
            assert_eq!(live, 0, "{src}");
        }
    }
}

#[test]
fn a_function_too_large_to_compile_quickly_is_refused() {
    // A straight-line chain of 1 000 operations recorded for reverse mode:
    // about 32 000 instructions of Cranelift IR in one function, whose
    // register allocation grows faster than linearly. Refused (with its
    // size), so `--backend auto` runs it in the interpreter; 300 of them
    // compile.
    let chain = |n: usize| {
        let lets: String = (1..=n)
            .map(|i| format!("let a{i} = a{} * y in ", i - 1))
            .collect();
        format!("def main = grad (fun y -> let a0 = y in {lets}a{n}) 1.0")
    };
    let compile = |src: String| {
        nabla_lang::stack::run_with_stack(move || {
            let mut s = Session::new();
            s.load("test.nabla", &src).expect("checks");
            let (prog, entry) = s.typed_program("main").expect("lowers");
            Native::compile(&prog, entry, &Options::default())
                .map(|n| n.run().map(|v| print_value(&v)).map_err(|e| e.message))
                .map_err(|u| u.what)
        })
        .expect("thread")
    };
    let refused = compile(chain(1000)).expect_err("refused");
    assert!(
        refused.starts_with("a function this large (") && refused.contains("at most 25000"),
        "{refused}"
    );
    assert_eq!(compile(chain(300)), Ok(Ok("301.0".into())));
}

#[test]
fn kept_medium_objects_give_way_to_the_budget() {
    // 12 000 vectors of 100 reals (816 bytes each, about 10 MB) live at
    // once, then dropped: the runtime keeps them for reuse, still charged.
    // Then 6 000 of 200 reals (another class, about 10 MB): under the 16 MB
    // budget that only fits if the kept ones are given back first.
    let src = "def phase n len =
                 let vs = build n (fun i -> build len (fun j -> real j + 1.0)) in
                 sum (map (fun v -> v[len - 1]) vs)
               def main = (phase 12000 100, phase 6000 200)";
    memory::set_budget(16 << 20);
    let (r, live) = run(src, Limits::default());
    assert_eq!(r, Ok("(1200000.0, 1200000.0)".into()));
    assert_eq!(live, 0, "every vector freed");
}
