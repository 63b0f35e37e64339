//! Every real function of the language — each a row of the library's one
//! derivative table — computes the table's value on both back ends, and
//! its derivative (forward `diff`, reverse `grad`, in the interpreter)
//! agrees with the other mode and with a central difference.

use nabla::Unary;
use nabla_lang::driver::Session;
use nabla_lang::prim::{PRIMS, RealFn};
use nabla_native::{Native, Options};

/// Points inside the function's domain, away from its kinks and jumps.
fn points(name: &str) -> &'static [f64] {
    match name {
        "asin" | "acos" => &[-0.7, 0.3],
        "log" | "sqrt" | "log1p" => &[0.3, 1.3, 2.7],
        _ => &[-0.7, 0.3, 1.3],
    }
}

fn numbers(printed: &str) -> Vec<f64> {
    printed
        .split([',', '(', ')', '[', ']', ' '])
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("a number: {s} in {printed}"))
        })
        .collect()
}

#[test]
fn every_real_function_has_the_tables_value_and_derivative_on_both_backends() {
    let rows: Vec<(&str, Unary)> = PRIMS
        .iter()
        .filter(|r| r.named)
        .filter_map(|r| match r.real {
            Some(RealFn::Unary(op)) => Some((r.name, op)),
            _ => None,
        })
        .collect();
    assert!(rows.len() >= 18, "{} real functions", rows.len());
    nabla_lang::stack::run_with_stack(move || {
        for (name, op) in rows {
            for &x in points(name) {
                let mut s = Session::new();
                let src = format!(
                    "def main = ({name} ({x:?}), diff {name} ({x:?}), grad (fun v -> {name} v[0]) [{x:?}])"
                );
                s.load("fn.nabla", &src).expect("checks");
                let got = numbers(&s.run_main().expect("runs"));
                let (value, forward, reverse) = (got[0], got[1], got[2]);
                assert_eq!(value.to_bits(), op.eval(x).to_bits(), "{name} {x}");
                // The table's own derivative rule, and a central difference.
                let h = 1e-6;
                let central = (op.eval(x + h) - op.eval(x - h)) / (2.0 * h);
                assert_eq!(forward.to_bits(), reverse.to_bits(), "{name}' {x}");
                if op == Unary::StopGradient {
                    // By definition, not by the function's slope.
                    assert_eq!(forward, 0.0);
                    continue;
                }
                assert!(
                    (forward - central).abs() <= 1e-6 * (1.0 + central.abs()),
                    "{name}' {x}: {forward} vs central difference {central}"
                );
                // Native code: the same bits for the value.
                let mut s = Session::new();
                s.load("fn.nabla", &format!("def main = {name} ({x:?})"))
                    .expect("checks");
                let (prog, entry) = s.typed_program("main").expect("lowers");
                let native = Native::compile(&prog, entry, &Options::default())
                    .unwrap_or_else(|u| panic!("{name}: {}", u.what));
                let v = native.run().expect("runs");
                let printed = nabla_lang::pretty::print_value(&v);
                assert_eq!(numbers(&printed)[0].to_bits(), value.to_bits(), "{name} {x} native");
            }
        }
    })
    .expect("thread");
}
