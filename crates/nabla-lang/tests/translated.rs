//! The translated dialect (files starting `#!translated`) through the
//! driver: sessions, and inputs nested too deeply, which must be clean
//! errors (never a crash). The hand-written translated programs with their
//! expected outputs are data-driven cases in `tests/lang/translated/`.

use nabla_lang::driver::{Session, UNTRUSTED_LIMITS};
use nabla_lang::stack::run_with_stack;

fn run(src: String) -> Result<String, String> {
    run_with_stack(move || {
        let mut s = Session::new();
        s.load("t.nabla", &src)
            .and_then(|_| s.run_main())
            .map_err(|ds| s.render(&ds))
    })
    .expect("no crash")
}

#[test]
fn a_session_loads_a_translated_file_and_ordinary_input_after_it() {
    let r = run_with_stack(|| {
        let mut s = Session::new();
        let types = s
            .load(
                "t.nabla",
                "#!translated\ndef sq (x, u) = do { v <- deltaLet (Scale (2.0 * x) u); pure (x * x, Var v) }\n\
                 def d x = let (_, u) = runDelta 1 (sq (x, Var 0)) in lookupOrZero 0 (eval 1.0 u emptyMap)\n",
            )
            .map_err(|ds| s.render(&ds))?;
        // Ordinary input may call translated definitions, but cannot name the dialect's primitives.
        let v = s.eval_expr("<e>", "d 3.0").map_err(|ds| s.render(&ds))?;
        let err = s.eval_expr("<e>", "deltaLet Zero").map(|_| ()).map_err(|ds| s.render(&ds));
        Ok::<_, String>((types, v, err))
    })
    .expect("no crash")
    .expect("loads");
    assert_eq!(
        r.0,
        vec![
            ("sq".into(), "(Real, Delta) -> M (Real, Delta)".into()),
            ("d".into(), "Real -> Real".into())
        ]
    );
    assert_eq!(r.1, "6.0");
    assert!(r.2.unwrap_err().contains("unknown variable `deltaLet`"));
}

#[test]
fn deep_nesting_of_the_new_constructs_is_a_clean_error() {
    let n = 100_000;
    let cases = [
        format!(
            "def main = {}pure x{}",
            "do { x <- pure 1; ".repeat(n),
            " }".repeat(n)
        ),
        format!("def main = do {{\n{}pure x }}", "x <- pure 1;\n".repeat(n)),
        format!("def main = let r = ref 0.0 in {}!r", "r += 1.0; ".repeat(n)),
        format!("def main = {}r", "!".repeat(n)),
        format!(
            "def main = {}(1.0, Zero){}",
            "runDelta 0 (".repeat(n),
            ")".repeat(n)
        ),
    ];
    // Whether a case reaches the stack budget depends on frame sizes (a debug build
    // does, a release build may get as far as a scope or type error): either way the
    // answer must be a located diagnostic, not a crash.
    for body in cases {
        let src = format!("#!translated\n{body}\n");
        match run(src) {
            Ok(v) => assert!(v.len() < 100, "{v}"),
            Err(e) => assert!(
                e.starts_with("error: ") && e.contains("--> t.nabla:") && !e.contains("internal"),
                "{e}"
            ),
        }
    }
}

#[test]
fn a_delta_shared_without_lets_is_cut_off_when_printed_and_bounded_when_evaluated() {
    // 60 levels of implicit sharing: a tree of 2^60 leaves.
    let mut src = String::from("#!translated\ndef main =\n  let d0 = Var 0 in\n");
    for i in 1..=60 {
        src.push_str(&format!("  let d{i} = Add d{} d{} in\n", i - 1, i - 1));
    }
    src.push_str("  (d60, lookupOrZero 0 (eval 1.0 d60 emptyMap))\n");
    let out = run_with_stack(move || {
        let mut s = Session::new();
        s.limits = UNTRUSTED_LIMITS;
        s.load("t.nabla", &src)
            .and_then(|_| s.run_main())
            .map_err(|ds| s.render(&ds))
    })
    .expect("no crash");
    let err = out.expect_err("the step limit stops eval");
    assert!(err.contains("evaluation step limit exceeded"), "{err}");
    let src = "#!translated\ndef main = let d0 = Var 0 in ".to_string()
        + &(1..=60)
            .map(|i| format!("let d{i} = Add d{} d{} in ", i - 1, i - 1))
            .collect::<String>()
        + "d60";
    let printed = run(src).expect("prints");
    assert!(
        printed.ends_with('…') && printed.len() < 2_000_000,
        "{}",
        printed.len()
    );
}
