//! One convention for structural zeros, everywhere (docs/differentiation.md,
//! "Structural zeros"): in the chain rule, an exact zero factor gives zero even
//! when the other factor is infinite or NaN (`nabla::Number::chain`), so the
//! derivative along a path is zero as soon as one factor on it is, whichever
//! order a mode multiplies the factors in.
//!
//! Each case is a function whose derivative meets `0 · ∞` at the point. It is
//! run through every way nabla has to differentiate it, and all must give the
//! same numbers:
//! - the library: `grad`, `value_and_grad`, `vjp`, `jvp` along each axis,
//!   `jacobian_forward`, `jacobian_reverse`, and for second derivatives
//!   `hessian`, `hvp`, and forward/reverse nestings of `derivative`/`grad`;
//! - the language's run-time operators: `grad`, `value_and_grad`, `vjp`,
//!   `jvp`, `diff`, `jacobian`, and for second derivatives `hessian` and every
//!   nesting of `diff` and `grad`, and `jvp` of `grad`;
//! - every source-to-source translation, printed, re-parsed and run: forward,
//!   reverse, CPS, and the linear-map mode's derived `f_jvp`/`f_vjp`.

use nabla::{Scalar, derivative, grad, hessian, hvp, jacobian_forward, jacobian_reverse, jvp, vjp};
use nabla_lang::driver::Session;
use nabla_lang::pretty::program::print_program;
use nabla_lang::stack::run_with_stack;
use nabla_lang::translate::{self, Mode, linear};

mod common;
use common::with_source;

/// One way of differentiating a case: what it is, its numbers or its error,
/// and what they must be.
type Outcome<'a> = (String, Result<Vec<f64>, String>, &'a [f64]);

/// A derivative as a function of the point: the numbers it gives.
type Derivative = fn(&[f64]) -> Vec<f64>;

/// The library's derivatives of one case, as plain functions of the point.
struct Library {
    /// Reverse mode, three ways: `grad`, `vjp` with cotangent 1, `jacobian_reverse`.
    reverse: [Derivative; 3],
    /// Forward mode, two ways: `jvp` along each axis, `jacobian_forward`.
    forward: [Derivative; 2],
    /// The Hessian (row-major), four ways: `hessian`, `hvp` along each axis,
    /// forward over forward, reverse over reverse.
    second: [Derivative; 4],
}

/// The library's derivatives of `|$v| $body` (a function of a slice of scalars).
macro_rules! library {
    ($v:ident => $body:expr) => {{
        fn f<S: Scalar>($v: &[S]) -> S {
            $body
        }
        fn axes(n: usize) -> impl Iterator<Item = Vec<f64>> {
            (0..n).map(move |i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        }
        Library {
            reverse: [
                |x| grad(|v| f(v), x),
                |x| vjp(|v| vec![f(v)], x).1.apply(&[1.0]),
                |x| jacobian_reverse(|v| vec![f(v)], x).concat(),
            ],
            forward: [
                |x| {
                    axes(x.len())
                        .map(|e| jvp(|v| vec![f(v)], x, &e).1[0])
                        .collect()
                },
                |x| jacobian_forward(|v| vec![f(v)], x).concat(),
            ],
            second: [
                |x| hessian(|v| f(v), x).concat(),
                |x| axes(x.len()).flat_map(|e| hvp(|v| f(v), x, &e)).collect(),
                // Forward over forward: d/dxᵢ of (d/dxⱼ f), one axis pair at a time.
                |x| {
                    let n = x.len();
                    let mut h = Vec::new();
                    for i in 0..n {
                        for j in 0..n {
                            h.push(derivative(
                                |t| {
                                    let mut xs: Vec<_> =
                                        x.iter().map(|&a| nabla::Dual::constant(a)).collect();
                                    xs[i] += t;
                                    derivative(
                                        |s| {
                                            let mut ys: Vec<_> = xs
                                                .iter()
                                                .map(|&a| nabla::Dual::constant(a))
                                                .collect();
                                            ys[j] += s;
                                            f(&ys)
                                        },
                                        nabla::Dual::constant(0.0),
                                    )
                                },
                                0.0,
                            ));
                        }
                    }
                    h
                },
                // Reverse over reverse: the gradient of each gradient component.
                |x| {
                    (0..x.len())
                        .flat_map(|i| grad(|v| grad(|w| f(w), v)[i], x))
                        .collect()
                },
            ],
        }
    }};
}

/// Where a case is defined for the language: `def f … = …` taking a Real or a
/// pair, and the point written in nabla.
struct Case {
    name: &'static str,
    def: &'static str,
    point: &'static str,
    /// The point as numbers.
    at: &'static [f64],
    gradient: &'static [f64],
    /// The Hessian, row-major, or `None` where a second derivative is infinite
    /// at the point (then it is not compared).
    hessian: Option<&'static [f64]>,
    library: Library,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "sqrt x * 0.0 at 0",
            def: "def f x = sqrt x * 0.0",
            point: "0.0",
            at: &[0.0],
            gradient: &[0.0],
            hessian: Some(&[0.0]),
            library: library!(v => v[0].sqrt() * 0.0),
        },
        Case {
            name: "sqrt (x * 0.0) at 0",
            def: "def f x = sqrt (x * 0.0)",
            point: "0.0",
            at: &[0.0],
            gradient: &[0.0],
            hessian: Some(&[0.0]),
            library: library!(v => (v[0] * 0.0).sqrt()),
        },
        Case {
            name: "1.0 / exp x at 1000",
            def: "def f x = 1.0 / exp x",
            point: "1000.0",
            at: &[1000.0],
            gradient: &[0.0],
            hessian: Some(&[0.0]),
            library: library!(v => S::from(1.0) / v[0].exp()),
        },
        Case {
            name: "0.0 * log x at 0",
            def: "def f x = 0.0 * log x",
            point: "0.0",
            at: &[0.0],
            gradient: &[0.0],
            hessian: Some(&[0.0]),
            library: library!(v => v[0].ln() * 0.0),
        },
        Case {
            name: "sqrt x * y at (0, 0)",
            def: "def f (x, y) = sqrt x * y",
            point: "(0.0, 0.0)",
            at: &[0.0, 0.0],
            gradient: &[0.0, 0.0],
            // ∂²/∂x∂y = 1/(2√x) is infinite at the point.
            hessian: None,
            library: library!(v => v[0].sqrt() * v[1]),
        },
        Case {
            name: "sqrt (x * y) at (1, 0)",
            def: "def f (x, y) = sqrt (x * y)",
            point: "(1.0, 0.0)",
            at: &[1.0, 0.0],
            gradient: &[0.0, f64::INFINITY],
            hessian: None,
            library: library!(v => (v[0] * v[1]).sqrt()),
        },
    ]
}

/// The numbers in printed output (`inf`/`nan` included).
fn numbers(printed: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for word in printed.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '-' | '+'))) {
        match word {
            "" => {}
            "inf" => out.push(f64::INFINITY),
            "-inf" => out.push(f64::NEG_INFINITY),
            "nan" | "NaN" => out.push(f64::NAN),
            w => out.extend(w.parse::<f64>().ok()),
        }
    }
    out
}

/// True if the numbers are equal (NaN equal to NaN; -0 equal to 0).
fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
        })
}

fn run(text: &str) -> Result<String, String> {
    let mut s = Session::new();
    s.load("<case>", text)
        .and_then(|_| s.run_main())
        .map_err(|ds| s.render(&ds))
}

/// Every language-side way of taking the gradient (or the Hessian), by name.
fn language_results(case: &Case) -> Vec<(String, Result<String, String>, bool)> {
    let n = case.at.len();
    let axis = |i: usize| match n {
        1 => "1.0".to_string(),
        _ => format!(
            "({})",
            (0..n)
                .map(|j| if i == j { "1.0" } else { "0.0" })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    // `fv` takes a vector, for `jacobian`/`hessian`.
    let fv = match n {
        1 => "def fv v = f v[0]".to_string(),
        _ => "def fv v = f (v[0], v[1])".to_string(),
    };
    let vec_point = format!(
        "[{}]",
        case.at
            .iter()
            .map(|x| format!("{x:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let p = case.point;
    let jvps: Vec<String> = (0..n)
        .map(|i| format!("snd (jvp f {p} {})", axis(i)))
        .collect();
    let mut first = vec![
        format!("grad f {p}"),
        format!("snd (value_and_grad f {p})"),
        format!("snd (vjp f {p}) 1.0"),
        format!("({})", jvps.join(", ")),
        format!("jacobian (fun v -> [fv v]) {vec_point}"),
    ];
    if n == 1 {
        first.push(format!("diff f {p}"));
    }
    let mut second = vec![format!("hessian fv {vec_point}")];
    if n == 1 {
        for (outer, inner) in [
            ("diff", "diff"),
            ("diff", "grad"),
            ("grad", "diff"),
            ("grad", "grad"),
        ] {
            second.push(format!("{outer} ({inner} f) {p}"));
        }
        second.push(format!("snd (jvp (grad f) {p} 1.0)"));
    }
    let mut out = Vec::new();
    for (calls, is_second) in [(first, false), (second, true)] {
        for call in calls {
            let program = format!("{}\n{fv}\ndef main = {call}\n", case.def);
            out.push((format!("run-time `{call}`"), run(&program), is_second));
        }
    }
    out
}

/// Every translation's gradient, each printed, re-parsed and run.
fn translation_results(case: &Case) -> Vec<(String, Result<String, String>)> {
    let n = case.at.len();
    let p = case.point;
    let mut out = Vec::new();
    let load = |main: &str| {
        let mut s = Session::new();
        let text = format!("{}\ndef main = {main}\n", case.def);
        s.load("<case>", &text).map_err(|ds| s.render(&ds))?;
        s.named_program().map_err(|ds| s.render(&ds))
    };
    for mode in [Mode::Reverse, Mode::Cps] {
        let r = load(&format!("grad f {p}")).and_then(|program| {
            let call = translate::calls_in_main(&program).remove(0);
            let t = translate::runnable(&program, &call, mode).map_err(|e| e.to_string())?;
            run(&print_program(&t))
        });
        out.push((format!("{} translation", mode.name()), r));
    }
    let axes: Vec<String> = (0..n)
        .map(|i| match n {
            1 => "1.0".into(),
            _ => format!(
                "({})",
                (0..n)
                    .map(|j| if i == j { "1.0" } else { "0.0" })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
        .collect();
    let forward: Result<Vec<String>, String> = axes
        .iter()
        .map(|e| {
            let program = load(&format!("jvp f {p} {e}"))?;
            let call = translate::calls_in_main(&program).remove(0);
            let t =
                translate::runnable(&program, &call, Mode::Forward).map_err(|e| e.to_string())?;
            // `jvp` gives (value, tangent): keep the tangent.
            run(&print_program(&t)).map(|s| {
                numbers(&s)
                    .last()
                    .map_or(String::new(), |x| format!("{x:?}"))
            })
        })
        .collect();
    out.push((
        "forward translation".into(),
        forward.map(|ts| ts.join(", ")),
    ));
    let program = load(&format!("grad f {p}"));
    let linear_fwd: Result<String, String> = program.clone().and_then(|program| {
        let t = linear::forward(&program, "f").map_err(|e| e.to_string())?;
        let calls: Vec<String> = axes.iter().map(|e| format!("f_jvp ({p}, {e})")).collect();
        run(&with_source(
            case.def,
            &print_program(&t),
            &format!("({})", calls.join(", ")),
        ))
    });
    out.push(("linear mode, f_jvp".into(), linear_fwd));
    let linear_rev: Result<String, String> = program.and_then(|program| {
        let t = linear::reverse(&program, "f").map_err(|e| e.to_string())?;
        run(&with_source(
            case.def,
            &print_program(&t),
            &format!("f_vjp ({p}, 1.0)"),
        ))
    });
    out.push(("linear mode, f_vjp".into(), linear_rev));
    out
}

#[test]
fn every_mode_follows_one_structural_zero_convention() {
    let failures = run_with_stack(|| {
        let mut failures = Vec::new();
        for case in cases() {
            let mut results: Vec<Outcome> = Vec::new();
            let lib = &case.library;
            for (i, f) in lib.reverse.iter().enumerate() {
                results.push((
                    format!("library reverse #{i}"),
                    Ok(f(case.at)),
                    case.gradient,
                ));
            }
            for (i, f) in lib.forward.iter().enumerate() {
                results.push((
                    format!("library forward #{i}"),
                    Ok(f(case.at)),
                    case.gradient,
                ));
            }
            if let Some(h) = case.hessian {
                for (i, f) in lib.second.iter().enumerate() {
                    results.push((format!("library second order #{i}"), Ok(f(case.at)), h));
                }
            }
            for (what, result, is_second) in language_results(&case) {
                let expected = match (is_second, case.hessian) {
                    (false, _) => case.gradient,
                    (true, Some(h)) => h,
                    (true, None) => continue,
                };
                results.push((what, result.map(|s| numbers(&s)), expected));
            }
            for (what, result) in translation_results(&case) {
                results.push((what, result.map(|s| numbers(&s)), case.gradient));
            }
            for (what, found, expected) in results {
                match found {
                    Ok(found) if same(&found, expected) => {}
                    Ok(found) => failures.push(format!(
                        "{}: {what} gives {found:?}, expected {expected:?}",
                        case.name
                    )),
                    Err(e) => failures.push(format!("{}: {what} failed: {e}", case.name)),
                }
            }
        }
        failures
    })
    .expect("the test thread starts");
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
