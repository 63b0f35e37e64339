//! Krawiec et al. §5.3: reverse mode keeps sharing. The chain
//! `z = y + y` (scaled back by 0.5), repeated 10⁶ times, uses `y` twice per
//! step; a Delta trace without `Let`/`Var` would copy the shared Delta at
//! every step (2^(10⁶) terms). The test asserts the number of trace entries —
//! linear in the number of operations — and the exact gradient.

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

fn trace_len_of_chain(n: usize) -> (usize, String) {
    let src = format!("{CHAIN}\ndef main = vjp (chain {n}) 1.5");
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
fn sharing_chain_of_a_million_steps_has_a_linear_trace() {
    let n = 1_000_000;
    let (len, value) = trace_len_of_chain(n);
    // One input, then two entries per step (y + y, then * 0.5).
    assert_eq!(len, 1 + 2 * n);
    assert_eq!(value, "1.5");
}

#[test]
fn trace_grows_linearly_with_the_chain() {
    let lens: Vec<usize> = [10, 100, 1000]
        .iter()
        .map(|&n| trace_len_of_chain(n).0)
        .collect();
    assert_eq!(lens, vec![21, 201, 2001]);
}

#[test]
fn gradient_of_the_chain_is_exact() {
    let src = format!("{CHAIN}\ndef main = grad (chain 1000000) 1.5");
    let out = run_with_stack(move || nabla_lang::pretty::print_value(&eval_main(&src)))
        .expect("evaluator thread");
    assert_eq!(out, "1.0");
}
