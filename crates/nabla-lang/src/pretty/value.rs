//! Printing run-time values the way `nabla run` shows them.

use crate::eval::Value;
use crate::eval::delta::Delta;
use crate::stack;
use crate::types::Type;
use std::fmt::Write;

/// Formats a Real: shortest representation that reads back to the same
/// `f64`, always with a `.` or an exponent (`52.0`, `1.5e-10`, `inf`, `nan`).
///
/// ```
/// use nabla_lang::pretty::format_real;
/// assert_eq!(format_real(52.0), "52.0");
/// assert_eq!(format_real(1.5e-10), "1.5e-10");
/// assert_eq!(format_real(f64::NAN), "nan");
/// assert_eq!(format_real(f64::NEG_INFINITY), "-inf");
/// ```
pub fn format_real(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Rust's `Debug` for f64 is shortest round-trip and always has `.` or `e`.
    let s = format!("{x:?}");
    if s.contains(['.', 'e']) {
        s
    } else {
        format!("{s}.0")
    }
}

/// Prints a value in surface syntax. Values nested too deeply to print
/// within the stack budget are cut off with `...`.
///
/// ```
/// use nabla_lang::eval::Value;
/// use nabla_lang::pretty::print_value;
/// let v = Value::Tuple(std::rc::Rc::new(vec![Value::Int(1), Value::Real(2.0)]));
/// assert_eq!(print_value(&v), "(1, 2.0)");
/// ```
pub fn print_value(v: &Value) -> String {
    let mut out = String::new();
    go(v, &mut out, false);
    out
}

/// Prints a value of type `ty` (as checked: records by their fields) in
/// surface syntax: as [`print_value`], but a record, which runs as the tuple
/// of its fields in name order, is printed with its field names,
/// `{ b = 0.5, w = [1.0, 2.0] }`.
///
/// ```
/// use nabla_lang::eval::Value;
/// use nabla_lang::pretty::print_value_as;
/// use nabla_lang::types::Type;
/// let ty = Type::record(vec![("w".into(), Type::Real), ("b".into(), Type::Int)]);
/// let v = Value::Tuple(std::rc::Rc::new(vec![Value::Int(1), Value::Real(2.0)]));
/// assert_eq!(print_value_as(&v, &ty), "{ b = 1, w = 2.0 }");
/// ```
pub fn print_value_as(v: &Value, ty: &Type) -> String {
    let mut out = String::new();
    go_as(v, ty, &mut out, false);
    out
}

fn go_as(v: &Value, ty: &Type, out: &mut String, arg: bool) {
    if stack::check().is_err() {
        out.push_str("...");
        return;
    }
    let list = |out: &mut String, items: &mut dyn Iterator<Item = (&Value, &Type)>| {
        for (i, (x, t)) in items.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            go_as(x, t, out, false);
        }
    };
    match (v, ty) {
        (_, Type::Record(names, ts)) => {
            let one = [v.clone()];
            let parts: &[Value] = match v {
                Value::Tuple(vs) if ts.len() > 1 => vs,
                _ => &one,
            };
            out.push_str("{ ");
            for (i, ((n, t), x)) in names.iter().zip(ts).zip(parts).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(n);
                out.push_str(" = ");
                go_as(x, t, out, false);
            }
            out.push_str(" }");
        }
        (Value::Tuple(vs), Type::Tuple(ts)) if vs.len() == ts.len() => {
            out.push('(');
            list(out, &mut vs.iter().zip(ts));
            out.push(')');
        }
        (Value::Vec(vs), Type::Vec(t)) => {
            out.push('[');
            list(out, &mut vs.iter().map(|x| (x, &**t)));
            out.push(']');
        }
        (Value::Inl(x) | Value::Inr(x), Type::Sum(a, b)) => {
            if arg {
                out.push('(');
            }
            let left = matches!(v, Value::Inl(_));
            out.push_str(if left { "inl " } else { "inr " });
            go_as(x, if left { a } else { b }, out, true);
            if arg {
                out.push(')');
            }
        }
        _ => go(v, out, arg),
    }
}

fn go(v: &Value, out: &mut String, arg: bool) {
    if stack::check().is_err() {
        out.push_str("...");
        return;
    }
    match v {
        Value::Unit => out.push_str("()"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Real(x) => out.push_str(&format_real(*x)),
        // Tagged reals never reach the output of a well-typed program (the
        // derivative operators return plain data); print the value if one does.
        Value::Reverse { primal, .. } => out.push_str(&format_real(*primal)),
        Value::Tagged(n) => out.push_str(&format_real(crate::ad::Num::Tagged(n.clone()).value())),
        Value::Tuple(vs) => {
            out.push('(');
            for (i, x) in vs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                go(x, out, false);
            }
            out.push(')');
        }
        Value::Inl(x) | Value::Inr(x) => {
            if arg {
                out.push('(');
            }
            out.push_str(if matches!(v, Value::Inl(_)) {
                "inl "
            } else {
                "inr "
            });
            go(x, out, true);
            if arg {
                out.push(')');
            }
        }
        Value::RealVec(xs) => {
            out.push('[');
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&format_real(*x));
            }
            out.push(']');
        }
        Value::Vec(xs) => {
            out.push('[');
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                go(x, out, false);
            }
            out.push(']');
        }
        Value::Closure(_)
        | Value::Partial(_)
        | Value::Prim(..)
        | Value::Pullback(_)
        | Value::Poly(_) => out.push_str("<function>"),
        Value::Delta(d) => write_delta(d, out),
        Value::DeltaMap(_) => out.push_str("<deltamap>"),
        Value::Ref(_) => out.push_str("<ref>"),
    }
}

/// How many Delta constructors [`print_delta`] prints before cutting off
/// with `…` (a Delta with sharing can be exponentially larger as a tree).
const DELTA_PRINT_LIMIT: usize = 100_000;

/// Prints a Delta in constructor syntax, `Let 3 (Add (Var 1) (Var 2)) (Var 3)`,
/// with an explicit stack (any depth), cut off with `…` after 100 000
/// constructors.
///
/// ```
/// use nabla_lang::eval::delta::{Delta, DeltaRef};
/// use nabla_lang::pretty::print_delta;
/// let v = |i| DeltaRef::new(Delta::Var(i));
/// let d = Delta::Let(3, DeltaRef::new(Delta::Add(v(1), v(2))), v(3));
/// assert_eq!(print_delta(&d), "Let 3 (Add (Var 1) (Var 2)) (Var 3)");
/// ```
pub fn print_delta(d: &Delta) -> String {
    let mut out = String::new();
    write_delta(d, &mut out);
    out
}

fn write_delta(d: &Delta, out: &mut String) {
    enum Item<'a> {
        Text(&'static str),
        /// A Delta, parenthesised if it has arguments.
        Arg(&'a Delta),
    }
    // Negative numbers are parenthesised, so the output reads back as source.
    fn number(out: &mut String, s: String) {
        if s.starts_with('-') {
            let _ = write!(out, " ({s})");
        } else {
            let _ = write!(out, " {s}");
        }
    }
    let mut work = vec![Item::Arg(d)];
    let mut printed = 0usize;
    let mut top = true;
    while let Some(item) = work.pop() {
        let d = match item {
            Item::Text(s) => {
                out.push_str(s);
                continue;
            }
            Item::Arg(d) => d,
        };
        if !std::mem::take(&mut top) {
            out.push(' ');
        }
        printed += 1;
        if printed > DELTA_PRINT_LIMIT {
            out.push('…');
            continue;
        }
        let paren = printed > 1 && !matches!(d, Delta::Zero);
        if paren {
            out.push('(');
            work.push(Item::Text(")"));
        }
        match d {
            Delta::Zero => out.push_str("Zero"),
            Delta::Var(i) => {
                out.push_str("Var");
                number(out, i.to_string());
            }
            Delta::Scale(r, u) => {
                out.push_str("Scale");
                number(out, format_real(*r));
                work.push(Item::Arg(u));
            }
            Delta::Add(u1, u2) => {
                out.push_str("Add");
                work.push(Item::Arg(u2));
                work.push(Item::Arg(u1));
            }
            Delta::Let(i, u1, u2) => {
                out.push_str("Let");
                number(out, i.to_string());
                work.push(Item::Arg(u2));
                work.push(Item::Arg(u1));
            }
        }
    }
}
