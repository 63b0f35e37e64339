//! Stopping an evaluation from outside (the REPL's Ctrl-C) and the exact
//! call budget (`--max-calls`), which the interpreter hands out in slices
//! so that it can look at the interrupt flag between them.

use nabla_lang::driver::Session;
use nabla_lang::eval::{CALLS_PER_CHECKPOINT, INTERRUPTED, Limits, STEP_LIMIT_EXCEEDED};
use nabla_lang::stack::run_with_stack;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Evaluates `expr` with at most `max_calls` calls: the value, or the error message.
fn eval_limited(
    expr: &str,
    max_calls: Option<u64>,
    interrupt: Option<Arc<AtomicBool>>,
) -> Result<String, String> {
    let expr = expr.to_string();
    run_with_stack(move || {
        let mut s = Session::new();
        s.limits = Limits {
            max_calls,
            ..Limits::default()
        };
        s.interrupt = interrupt;
        s.eval_expr("<test>", &expr)
            .map_err(|ds| ds[0].message.clone())
    })
    .expect("no panic")
}

#[test]
fn a_flag_set_from_another_thread_stops_an_endless_loop() {
    let flag = Arc::new(AtomicBool::new(false));
    let setter = Arc::clone(&flag);
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        setter.store(true, Ordering::Relaxed);
    });
    let forever = "let rec f x = f x in f 1";
    assert_eq!(
        eval_limited(forever, None, Some(flag)),
        Err(INTERRUPTED.to_string())
    );
    t.join().expect("setter");
    // A non-tail loop is stopped too.
    let flag = Arc::new(AtomicBool::new(true));
    let deep = "let rec f n = 1 + f (n + 1) in f 0";
    assert_eq!(
        eval_limited(deep, None, Some(flag)),
        Err(INTERRUPTED.to_string())
    );
}

#[test]
fn the_call_budget_is_exact_across_slices() {
    let count = |n: u64| format!("let rec f n = if n == 0 then 0 else 1 + f (n - 1) in f {n}");
    // The calls a small run makes beyond its `n`, found by trying budgets.
    let small = 10;
    let extra = (0..100)
        .find(|&c| eval_limited(&count(small), Some(small + c), None).is_ok())
        .expect("a budget that suffices");
    assert_eq!(
        eval_limited(&count(small), Some(small + extra - 1), None),
        Err(STEP_LIMIT_EXCEEDED.to_string())
    );
    // A run over many slices needs exactly as many more.
    let big = 5 * CALLS_PER_CHECKPOINT + 123;
    assert_eq!(
        eval_limited(&count(big), Some(big + extra), None),
        Ok(big.to_string())
    );
    assert_eq!(
        eval_limited(&count(big), Some(big + extra - 1), None),
        Err(STEP_LIMIT_EXCEEDED.to_string())
    );
}
