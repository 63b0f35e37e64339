//! Printing run-time values the way `nabla run` shows them.

use crate::eval::Value;
use crate::stack;
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
        Value::Closure(_) | Value::Partial(_) | Value::Prim(..) | Value::Pullback(_) => {
            out.push_str("<function>")
        }
    }
}
