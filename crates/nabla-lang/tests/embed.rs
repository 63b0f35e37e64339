//! The embedding API: a host compiles a program once, looks definitions up by
//! name and applies them to values it builds (`Session::compile`, `Compiled`).

use nabla_lang::driver::Session;
use nabla_lang::eval::Value;
use nabla_lang::pretty::print_value;
use nabla_lang::stack::run_with_stack;
use std::rc::Rc;

#[test]
fn a_host_applies_definitions_to_its_own_values() {
    let out = run_with_stack(|| {
        let mut s = Session::new();
        s.load(
            "host.nabla",
            "def f (v, k) = real k * sum (map (fun x -> x * x) v)\n\
             def df (v, k) = grad (fun w -> f (w, k)) v",
        )
        .expect("loads");
        assert_eq!(
            s.type_of_expr("<host>", "df").expect("types"),
            "(Vec Real, Int) -> Vec Real"
        );
        let mut c = s.compile().expect("compiles");
        let df = c.global("df").expect("df");
        let input = Value::Tuple(Rc::new(vec![Value::reals(vec![1.0, 2.0]), Value::Int(3)]));
        // Every application is evaluated afresh; globals are cached.
        let first = c.apply(df.clone(), input.clone()).expect("applies");
        let second = c.apply(df, input).expect("applies again");
        let missing = c
            .global("nope")
            .map(|_| ())
            .map_err(|d| d[0].message.clone());
        (print_value(&first), print_value(&second), missing)
    })
    .expect("no panic");
    assert_eq!(out.0, "[6.0, 12.0]");
    assert_eq!(out.1, "[6.0, 12.0]");
    assert_eq!(out.2, Err("no definition of `nope`".to_string()));
}

#[test]
fn a_run_time_error_in_an_application_is_a_diagnostic() {
    let message = run_with_stack(|| {
        let mut s = Session::new();
        s.load("host.nabla", "def at v = v[3]").expect("loads");
        let mut c = s.compile().expect("compiles");
        let at = c.global("at").expect("at");
        let err = c
            .apply(at, Value::reals(vec![1.0]))
            .expect_err("out of range");
        err[0].message.clone()
    })
    .expect("no panic");
    assert!(message.contains("out of range"), "{message}");
}
