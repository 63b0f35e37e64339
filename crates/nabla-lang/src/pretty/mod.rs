//! Printing types and values in surface syntax.

pub mod program;
mod value;

pub use value::{format_real, print_delta, print_value, print_value_as};

use crate::types::{Kind, Type};
use std::collections::HashMap;

/// Names type variables `a`, `b`, … in order of first appearance, so that
/// several types printed with one namer (e.g. both sides of a mismatch) agree.
#[derive(Default, Debug)]
pub struct TypeNamer {
    names: HashMap<u32, String>,
}

impl TypeNamer {
    /// A namer with no names assigned yet.
    pub fn new() -> TypeNamer {
        TypeNamer::default()
    }

    fn name(&mut self, v: u32) -> String {
        let n = self.names.len();
        self.names
            .entry(v)
            .or_insert_with(|| {
                let letter = (b'a' + (n % 26) as u8) as char;
                if n < 26 {
                    letter.to_string()
                } else {
                    format!("{letter}{}", n / 26)
                }
            })
            .clone()
    }

    /// Prints a fully substituted type. `kind_of` tells how to show
    /// still-unresolved constrained variables (`{number}`, `{comparable}`).
    pub fn print(&mut self, t: &Type, kind_of: &dyn Fn(u32) -> Kind) -> String {
        let mut out = String::new();
        self.go(t, 0, kind_of, &mut out);
        out
    }

    // prec: 0 = anywhere, 1 = left of `->`, 2 = left of `+`, 3 = right of `+`, 4 = argument of `Vec`.
    fn go(&mut self, t: &Type, prec: u8, kind_of: &dyn Fn(u32) -> Kind, out: &mut String) {
        if crate::stack::check().is_err() {
            out.push_str("...");
            return;
        }
        match t {
            Type::Var(v) => match kind_of(*v) {
                Kind::Any | Kind::Data => out.push_str(&self.name(*v)),
                Kind::Num => out.push_str("{number}"),
                Kind::Eq => out.push_str("{comparable}"),
            },
            Type::Int => out.push_str("Int"),
            Type::Real => out.push_str("Real"),
            Type::Bool => out.push_str("Bool"),
            Type::Unit => out.push_str("()"),
            Type::Tuple(ts) => {
                out.push('(');
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.go(t, 0, kind_of, out);
                }
                out.push(')');
            }
            Type::Record(ns, ts) => {
                out.push_str("{ ");
                for (i, (n, t)) in ns.iter().zip(ts).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(n);
                    out.push_str(" : ");
                    self.go(t, 0, kind_of, out);
                }
                out.push_str(" }");
            }
            Type::Sum(a, b) => {
                // `+` is left-associative: `A + B + C` = `(A + B) + C`.
                if prec >= 3 {
                    out.push('(');
                }
                self.go(a, 2, kind_of, out);
                out.push_str(" + ");
                self.go(b, 3, kind_of, out);
                if prec >= 3 {
                    out.push(')');
                }
            }
            Type::Vec(a) => {
                if prec >= 4 {
                    out.push('(');
                }
                out.push_str("Vec ");
                self.go(a, 4, kind_of, out);
                if prec >= 4 {
                    out.push(')');
                }
            }
            Type::Fun(a, b) => {
                if prec >= 1 {
                    out.push('(');
                }
                self.go(a, 1, kind_of, out);
                out.push_str(" -> ");
                self.go(b, 0, kind_of, out);
                if prec >= 1 {
                    out.push(')');
                }
            }
            Type::Con(c, args) => {
                // Applied like `Vec A`.
                let paren = prec >= 4 && !args.is_empty();
                if paren {
                    out.push('(');
                }
                out.push_str(c.name());
                for a in args {
                    out.push(' ');
                    self.go(a, 4, kind_of, out);
                }
                if paren {
                    out.push(')');
                }
            }
        }
    }
}

/// Prints a closed type (all variables unconstrained), naming variables `a`, `b`, ….
pub fn print_type(t: &Type) -> String {
    TypeNamer::new().print(t, &|_| Kind::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_printing_parenthesises_only_where_needed() {
        let r = || Type::Real;
        let v = |t| Type::Vec(Box::new(t));
        let sum = |a, b| Type::Sum(Box::new(a), Box::new(b));
        assert_eq!(
            print_type(&Type::fun(Type::fun(r(), r()), Type::fun(r(), r()))),
            "(Real -> Real) -> Real -> Real"
        );
        assert_eq!(print_type(&v(v(r()))), "Vec (Vec Real)");
        assert_eq!(
            print_type(&sum(sum(Type::Int, r()), Type::Bool)),
            "Int + Real + Bool"
        );
        assert_eq!(
            print_type(&sum(Type::Int, sum(r(), Type::Bool))),
            "Int + (Real + Bool)"
        );
        assert_eq!(
            print_type(&v(sum(Type::Unit, Type::Var(7)))),
            "Vec (() + a)"
        );
        assert_eq!(
            print_type(&Type::Tuple(vec![Type::Var(3), Type::Var(1), Type::Var(3)])),
            "(a, b, a)"
        );
        assert_eq!(
            print_type(&Type::fun(sum(r(), r()), r())),
            "Real + Real -> Real"
        );
    }
}
