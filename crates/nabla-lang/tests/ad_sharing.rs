//! Krawiec et al. §5.3: reverse mode keeps sharing. The chain
//! `z = y + y` (scaled back by 0.5), repeated 10⁶ times, uses `y` twice per
//! step; a Delta trace without `Let`/`Var` would copy the shared Delta at
//! every step (2^(10⁶) terms). In the Delta's small form `Scale c (Var id)`
//! that chain records nothing at all (`y + y` doubles the coefficient), so
//! the trace's length is measured on a chain of two variables that share
//! each other at every step (a rotation): linear in the number of
//! operations. The tests also check the exact gradient and value.

use nabla_lang::core::desugar_program;
use nabla_lang::eval::{Limits, Machine, Value};
use nabla_lang::stack::run_with_stack;
use nabla_lang::syntax::parser::{IdGen, parse_program};
use nabla_lang::syntax::span::Span;
use nabla_lang::types::check_program;

/// Evaluates `main` of `src` to a value.
fn eval_main(src: &str) -> Value {
    let (prog, errors) = parse_program(src, 0, &mut IdGen::default());
    assert!(errors.is_empty(), "{errors:?}");
    let checked = check_program(&prog.defs).expect("type checks");
    let core = desugar_program(&prog.defs, &checked.typing).expect("desugars");
    let index = core.global_index("main").expect("has main");
    let mut m = Machine::new(&core, Limits::default());
    m.global(index, Span::default()).expect("runs")
}

const CHAIN: &str = "
def chain n x =
  let rec go y k = if k == 0 then y else (let z = y + y in go (z * 0.5) (k - 1)) in
  go x n
";

/// Two variables rotated by the 3-4-5 angle: each step adds two products
/// of different variables, two trace entries.
const ROTATION: &str = "
def rotate n (x, y) =
  let rec go a b k = if k == 0 then a + b else go (0.6 * a + 0.8 * b) (0.6 * b - 0.8 * a) (k - 1) in
  go x y n
";

/// The rotation's value, in the same operations.
fn rotate(n: usize, (mut a, mut b): (f64, f64)) -> f64 {
    for _ in 0..n {
        (a, b) = (0.6 * a + 0.8 * b, 0.6 * b - 0.8 * a);
    }
    a + b
}

/// The number of Deltas `vjp` records for `main`'s function at `point`, and
/// the value printed.
fn trace_len(definitions: &str, function: &str, point: &str) -> (usize, String) {
    let src = format!("{definitions}\ndef main = vjp ({function}) {point}");
    run_with_stack(move || {
        let v = eval_main(&src);
        let Value::Tuple(parts) = v else {
            panic!("vjp returns a pair")
        };
        let Value::Pullback(pb) = &parts[1] else {
            panic!("the second component is a pullback")
        };
        (pb.trace_len(), nabla_lang::pretty::print_value(&parts[0]))
    })
    .expect("evaluator thread")
}

#[test]
fn sharing_chain_of_a_million_steps_records_only_its_input() {
    let (len, value) = trace_len(CHAIN, "chain 1000000", "1.5");
    // `y + y` and `* 0.5` only scale the input's coefficient.
    assert_eq!(len, 1);
    assert_eq!(value, "1.5");
}

#[test]
fn rotation_of_a_million_steps_has_a_linear_trace() {
    let n = 1_000_000;
    let (len, value) = trace_len(ROTATION, &format!("rotate {n}"), "(1.5, 2.0)");
    // Two inputs, two entries per step, one for the final sum.
    assert_eq!(len, 2 + 2 * n + 1);
    assert_eq!(value.parse::<f64>().ok(), Some(rotate(n, (1.5, 2.0))));
}

#[test]
fn trace_grows_linearly_with_the_rotation() {
    let lens: Vec<usize> = [10, 100, 1000]
        .iter()
        .map(|&n| trace_len(ROTATION, &format!("rotate {n}"), "(1.5, 2.0)").0)
        .collect();
    assert_eq!(lens, vec![23, 203, 2003]);
}

#[test]
fn gradient_of_the_chain_is_exact() {
    let src = format!("{CHAIN}\ndef main = grad (chain 1000000) 1.5");
    let out = run_with_stack(move || nabla_lang::pretty::print_value(&eval_main(&src)))
        .expect("evaluator thread");
    assert_eq!(out, "1.0");
}
