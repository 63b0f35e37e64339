//! The linear-map mode (Ellis, Peyton Jones, Fitzgibbon, Figures 3, 4, 6):
//! the forward derivative `f_jvp (x, dx) = ∂f(x) ⊙ dx` made from the
//! simplified Jacobian must agree with the run-time `jvp f x dx` to 1e-12;
//! snapshots of the printed Jacobians; the constructs the transformation refuses.

use nabla_lang::driver::Session;
use nabla_lang::pretty::program::print_program;
use nabla_lang::stack::run_with_stack;
use nabla_lang::translate::{TranslateError, linear};
use nabla_lang::types::Type;

mod common;
use common::{agree, with_source};

/// `(name, source, point, tangent)`: `f` is differentiated at the point.
const CASES: &[(&str, &str, &str, &str)] = &[
    (
        "polynomial",
        "def f (x, y) = 2.0 * x * x + 3.0 * x * y + 4.0 * y * y",
        "(3.0, 4.0)",
        "(0.7, -1.3)",
    ),
    (
        "paper example",
        "def f (x, y) = x * y + sin x",
        "(1.0, 2.0)",
        "(0.5, 0.25)",
    ),
    (
        "let chain",
        "def f x =\n  let a = x * x in\n  let b = a * a in\n  let c = b * a in\n  sin c",
        "0.5",
        "1.5",
    ),
    (
        "elementary functions",
        "def f (x, y) = exp (x / y) + atan2 y x * log y - sqrt (abs (x - 3.0 * y)) + tanh x ** 2.0 + cos (x ** y) - tan (y / 7.0)",
        "(0.8, 1.7)",
        "(0.3, -0.9)",
    ),
    (
        "tuples in and out",
        "def f ((a, b), c) = let s = a + b * c in (s * s, (fst (a, c) - c, s / a), -b)",
        "((1.5, -2.0), 0.5)",
        "((1.0, 2.0), 3.0)",
    ),
    (
        "if",
        "def f (x, y) = if x * y > 1.0 then x * x - y else let z = y * 3.0 in z * x",
        "(2.0, 3.0)",
        "(1.0, 0.5)",
    ),
    (
        "if, other branch",
        "def f (x, y) = if x * y > 1.0 then x * x - y else let z = y * 3.0 in z * x",
        "(0.2, 3.0)",
        "(1.0, 0.5)",
    ),
    (
        "calls of other definitions",
        "def sq x = x * x\ndef h (u, v) = (u * v, exp u)\ndef f (x, y) = let (p, q) = h (x, sq y) in sq (p + q) + sq p * sin q",
        "(0.4, 1.1)",
        "(-0.6, 2.0)",
    ),
    (
        "min, max and integers",
        "def f (x, n) = let k = real (n * 2) in (min x (k * x), max (sin x) 0.5 * k, if n > 2 then x else 1.0)",
        "(0.7, 3)",
        "(1.25, 9)",
    ),
    (
        "shadowing and a global constant",
        "def c = 2.5\ndef f x = let x = x * c in let y = x + 1.0 in let x = y * x in x * y",
        "1.3",
        "0.6",
    ),
    (
        "a let inside a branch, its value needed",
        "def f x = let y = if x > 0.0 then let z = exp x in z * x else x in sin y * exp y",
        "0.3",
        "(-2.0)",
    ),
    (
        "recursion",
        "def f x = if x > 1.0 then f (x / 2.0) * 3.0 + x else x * sin x",
        "13.0",
        "0.75",
    ),
    (
        "a tuple parameter used whole",
        "def g p = fst p * snd p\ndef f (x, y) = let p = (y, x) in g p + g (x, x)",
        "(1.3, -0.4)",
        "(2.0, 0.5)",
    ),
];

fn check_case(name: &str, source: &str, point: &str, tangent: &str) -> Result<(), String> {
    // `main` fixes the types (unconstrained arithmetic defaults to Int).
    let mut s = Session::new();
    let typed = format!("{source}\ndef main = snd (jvp f {point} {tangent})\n");
    s.load("<case>", &typed).map_err(|ds| s.render(&ds))?;
    let expected = s.run_main().map_err(|ds| s.render(&ds))?;
    let program = s.named_program().map_err(|ds| s.render(&ds))?;
    let fwd = linear::forward(&program, "f").map_err(|e| e.to_string())?;
    let printed = print_program(&fwd);
    if printed.starts_with("#!translated") {
        return Err(format!("{name}: not ordinary nabla code:\n{printed}"));
    }
    let text = with_source(source, &printed, &format!("f_jvp ({point}, {tangent})"));
    let mut t = Session::new();
    let found = t
        .load("<linear>", &text)
        .and_then(|_| t.run_main())
        .map_err(|ds| format!("{name}:\n{text}\n{}", t.render(&ds)))?;
    if agree(&expected, &found) {
        Ok(())
    } else {
        Err(format!(
            "{name}: jvp gives {expected}, the linear map {found}\n{text}"
        ))
    }
}

/// A cotangent for a result of type `t`: 0.5, -1.25, 2.0, … at the real leaves.
fn cotangent(t: &Type, i: &mut usize) -> String {
    match t {
        Type::Tuple(ts) => format!(
            "({})",
            ts.iter()
                .map(|t| cotangent(t, i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::Int => "0".into(),
        Type::Bool => "false".into(),
        Type::Unit => "()".into(),
        _ => {
            *i += 1;
            format!("({:?})", [0.5, -1.25, 2.0, 0.75][*i % 4])
        }
    }
}

fn check_reverse(name: &str, source: &str, point: &str) -> Result<(), String> {
    let mut s = Session::new();
    let typed = format!("{source}\ndef main = jvp f {point} {point}\n");
    s.load("<case>", &typed).map_err(|ds| s.render(&ds))?;
    let program = s.named_program().map_err(|ds| s.render(&ds))?;
    let jacs = linear::jacobians(&program, "f").map_err(|e| e.to_string())?;
    let t = &jacs.last().ok_or("no Jacobian")?.codomain;
    let dr = cotangent(t, &mut 0);
    let typed = format!("{source}\ndef main = (snd (vjp f {point})) {dr}\n");
    let mut s = Session::new();
    s.load("<case>", &typed).map_err(|ds| s.render(&ds))?;
    let expected = s.run_main().map_err(|ds| s.render(&ds))?;
    let rev = linear::reverse(&program, "f").map_err(|e| e.to_string())?;
    let printed = print_program(&rev);
    let text = with_source(source, &printed, &format!("f_vjp ({point}, {dr})"));
    let mut t = Session::new();
    let found = t
        .load("<linear>", &text)
        .and_then(|_| t.run_main())
        .map_err(|ds| format!("{name}:\n{text}\n{}", t.render(&ds)))?;
    if agree(&expected, &found) {
        Ok(())
    } else {
        Err(format!(
            "{name}: vjp gives {expected}, the transposed map {found}\n{text}"
        ))
    }
}

/// Figure 6's rev$f, made from the same Jacobian with ⊙_R (Figure 5), against
/// the run-time `vjp` (the cases with an integer argument are left out: `vjp`
/// gives an integer's cotangent as the integer).
#[test]
fn reverse_derivatives_from_the_jacobian_agree_with_vjp() {
    let failures = run_with_stack(|| {
        CASES
            .iter()
            .filter(|(name, ..)| !name.contains("integers"))
            .filter_map(|(name, source, point, _)| check_reverse(name, source, point).err())
            .collect::<Vec<_>>()
    })
    .expect("test thread");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn forward_derivatives_from_the_jacobian_agree_with_jvp() {
    let failures = run_with_stack(|| {
        CASES
            .iter()
            .filter_map(|(name, source, point, tangent)| {
                check_case(name, source, point, tangent).err()
            })
            .collect::<Vec<_>>()
    })
    .expect("test thread");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The printed Jacobian of `f`, with `main = jvp f point point` fixing the types.
fn jacobian(source: &str, point: &str) -> String {
    let source = format!("{source}\ndef main = jvp f {point} {point}\n");
    run_with_stack(move || {
        let mut s = Session::new();
        s.load("<snapshot>", &source).expect("checks");
        match s.linear_translation(Some("f"), false) {
            Ok(text) => text,
            Err(ds) => s.render(&ds),
        }
    })
    .expect("test thread")
}

#[test]
fn jacobians() {
    let programs = [
        ("paper_example", CASES[1].1, CASES[1].2),
        ("polynomial", CASES[0].1, CASES[0].2),
        ("let_chain", CASES[2].1, CASES[2].2),
        (
            "tuples_if_calls",
            "def h (u, v) = (u * v, exp u)\ndef g (x, y) = if x > y then atan2 y x else x - y\ndef f (x, y) = let (p, q) = h (x, y) in (g (p, q), min p q, sin (p * q))",
            "(1.0, 2.0)",
        ),
        ("tuples_in_and_out", CASES[4].1, CASES[4].2),
    ];
    for (name, source, point) in programs {
        insta::assert_snapshot!(format!("linear_{name}"), jacobian(source, point));
    }
}

#[test]
fn the_jacobian_of_the_paper_example_is_its_gradient_row() {
    let text = jacobian(CASES[1].1, CASES[1].2);
    assert!(text.contains("S(y + cos x) ⋈ S(x)"), "{text}");
}

fn error(source: &str) -> TranslateError {
    let source = source.to_string();
    // (No `main`: the refusals do not depend on the types being Real.)
    run_with_stack(move || {
        let mut s = Session::new();
        s.load("<error>", &source).expect("checks");
        let program = s.named_program().expect("lowers");
        linear::jacobians(&program, "f").expect_err("refused")
    })
    .expect("test thread")
}

#[test]
fn what_the_transformation_refuses() {
    let cases: &[(&str, &str)] = &[
        ("def f x = (fun y -> y * x) 2.0", "application"),
        ("def f x = let g = fun y -> y * x in g 2.0", "lambda"),
        (
            "def f x = match (if x > 0.0 then inl x else inr x) with | inl a -> a | inr b -> b",
            "sum",
        ),
        ("def f (x : Real) = sum [x, x]", "vector"),
        ("def f v = v[0] * 2.0", "no vectors"),
        ("def f x = grad (fun y -> y * y) x", "grad"),
        (
            "def twice g x = g (g x)\ndef f x = twice sin x",
            "one argument",
        ),
        ("def f x y = x * y", "has type"),
    ];
    for (source, expected) in cases {
        let e = error(source).to_string();
        assert!(e.contains(expected), "{source}: {e}");
    }
    assert!(matches!(
        error("def f x = grad (fun y -> y * y) x"),
        TranslateError::NestedDerivative { .. } | TranslateError::Unsupported { .. }
    ));
}
