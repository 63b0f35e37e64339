//! Derivative rules as code, read off the library's derivative table.
//!
//! DESIGN.md: derivative knowledge lives in one table (`nabla::Unary` and
//! `nabla::Binary`, Krawiec et al. Figure 14), and every consumer derives its
//! rule from it. The run-time operators evaluate the table's derivative column
//! on numbers; the source-to-source translations evaluate the *same* column on
//! [`Code`], a `nabla::Number` whose arithmetic builds named-core expressions.
//! So `cos x` in the translation of `sin x` is the table's `Unary::Sin` entry,
//! not a second statement of it.
//!
//! Some entries branch on the point (`abs` at 0, `atan2` at the origin,
//! `x ** y` at `y = 0`). A `Code` cannot answer a comparison at translation
//! time, so a rule is run once per path: each comparison it asks is recorded
//! and answered from a script, and every outcome is explored; the paths are
//! reassembled into `if` expressions in the order the rule asked. The result is
//! the rule, branch for branch, as code.

use crate::core::named::{Expr, Lit, real, real_op};
use crate::prim::{Prim, RealFn};
use nabla::{Binary, Number, Unary};
use std::any::Any;
use std::cell::RefCell;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A real-valued expression, as a `nabla::Number`.
#[derive(Clone, Debug, PartialEq)]
pub struct Code(pub Expr);

impl Code {
    fn lit(&self) -> Option<f64> {
        match self.0 {
            Expr::Lit(Lit::Real(x)) => Some(x),
            _ => None,
        }
    }

    fn op(p: Prim, args: Vec<Code>) -> Code {
        Code(real_op(p, args.into_iter().map(|c| c.0).collect()))
    }

    fn call(p: Prim, x: Code) -> Code {
        Code(crate::core::named::prim(p, vec![x.0]))
    }
}

impl Neg for Code {
    type Output = Code;
    fn neg(self) -> Code {
        match (self.lit(), &self.0) {
            (Some(c), _) => Code(real(-c)),
            (None, Expr::Prim(p, a)) if p.prim == Prim::Neg && p.on_reals() => Code(a[0].clone()),
            _ => Code::op(Prim::Neg, vec![self]),
        }
    }
}

impl Add for Code {
    type Output = Code;
    fn add(self, b: Code) -> Code {
        // x + (-y) = x - y exactly in IEEE arithmetic.
        if let Expr::Prim(p, a) = &b.0
            && p.prim == Prim::Neg
            && p.on_reals()
        {
            return Code::op(Prim::Sub, vec![self, Code(a[0].clone())]);
        }
        Code::op(Prim::Add, vec![self, b])
    }
}

impl Sub for Code {
    type Output = Code;
    fn sub(self, b: Code) -> Code {
        Code::op(Prim::Sub, vec![self, b])
    }
}

impl Mul for Code {
    type Output = Code;
    fn mul(self, b: Code) -> Code {
        // Multiplying by ±1 is exact; drop it so `dx * 1.0` reads `dx`.
        match (self.lit(), b.lit()) {
            (_, Some(1.0)) => self,
            (Some(1.0), _) => b,
            (_, Some(-1.0)) => -self,
            (Some(-1.0), _) => -b,
            _ => Code::op(Prim::Mul, vec![self, b]),
        }
    }
}

impl Div for Code {
    type Output = Code;
    fn div(self, b: Code) -> Code {
        Code::op(Prim::Div, vec![self, b])
    }
}

impl Add<f64> for Code {
    type Output = Code;
    fn add(self, c: f64) -> Code {
        self + Code(real(c))
    }
}

impl Sub<f64> for Code {
    type Output = Code;
    fn sub(self, c: f64) -> Code {
        self - Code(real(c))
    }
}

impl Mul<f64> for Code {
    type Output = Code;
    fn mul(self, c: f64) -> Code {
        self * Code(real(c))
    }
}

/// `PartialEq<f64>` and `PartialOrd<f64>` for a symbolic number whose
/// comparison `cmp` with a constant `c` is asked by `$ask(self, cmp, c)`
/// (answered from the exploration script: see the module docs).
macro_rules! symbolic_comparisons {
    ($t:ty, $ask:expr) => {
        impl PartialEq<f64> for $t {
            fn eq(&self, c: &f64) -> bool {
                $ask(self, Prim::Eq, *c)
            }
        }

        impl PartialOrd<f64> for $t {
            fn partial_cmp(&self, c: &f64) -> Option<std::cmp::Ordering> {
                // Only reached if a rule calls `partial_cmp` itself; the table
                // uses the operators below. The three-way test `<`, `>`, else
                // equal.
                use std::cmp::Ordering::*;
                Some(if self.lt(c) {
                    Less
                } else if self.gt(c) {
                    Greater
                } else {
                    Equal
                })
            }
            fn lt(&self, c: &f64) -> bool {
                $ask(self, Prim::Lt, *c)
            }
            fn le(&self, c: &f64) -> bool {
                $ask(self, Prim::Le, *c)
            }
            fn gt(&self, c: &f64) -> bool {
                $ask(self, Prim::Gt, *c)
            }
            fn ge(&self, c: &f64) -> bool {
                $ask(self, Prim::Ge, *c)
            }
        }
    };
}
pub(crate) use symbolic_comparisons;

symbolic_comparisons!(Code, |x: &Code, cmp, c| decide(real_op(
    cmp,
    vec![x.0.clone(), real(c)]
)));

impl Number for Code {
    fn constant(c: f64) -> Code {
        Code(real(c))
    }

    fn apply(self, op: Unary) -> Code {
        match op {
            Unary::Neg => -self,
            Unary::Recip => Code(real(1.0)) / self,
            Unary::Sin => Code::call(Prim::Sin, self),
            Unary::Cos => Code::call(Prim::Cos, self),
            Unary::Tan => Code::call(Prim::Tan, self),
            Unary::Tanh => Code::call(Prim::Tanh, self),
            Unary::Exp => Code::call(Prim::Exp, self),
            Unary::Ln => Code::call(Prim::Log, self),
            Unary::Sqrt => Code::call(Prim::Sqrt, self),
            Unary::Abs => Code::call(Prim::Abs, self),
            Unary::Floor => Code::call(Prim::Floor, self),
            Unary::Asin => Code::call(Prim::Asin, self),
            Unary::Acos => Code::call(Prim::Acos, self),
            Unary::Atan => Code::call(Prim::Atan, self),
            Unary::Sinh => Code::call(Prim::Sinh, self),
            Unary::Cosh => Code::call(Prim::Cosh, self),
            Unary::Log1p => Code::call(Prim::Log1p, self),
            Unary::ExpM1 => Code::call(Prim::Expm1, self),
            Unary::Ceil => Code::call(Prim::Ceil, self),
            Unary::Round => Code::call(Prim::Round, self),
            Unary::Trunc => Code::call(Prim::Trunc, self),
            Unary::Signum => Code::call(Prim::Signum, self),
            Unary::Sign => Code::call(Prim::Sign, self),
            Unary::Erf => Code::call(Prim::Erf, self),
            Unary::StopGradient => Code::call(Prim::StopGradient, self),
            Unary::Powi(n) => self.apply2(Binary::Powf, Code(real(f64::from(n)))),
            // Functions the language does not have; the derivative column of the
            // language's own primitives never mentions them (tested below).
            other => Code(crate::core::named::app(
                crate::core::named::var(format!("{other:?}").to_lowercase()),
                vec![self.0],
            )),
        }
    }

    fn apply2(self, op: Binary, other: Code) -> Code {
        match op {
            Binary::Add => self + other,
            Binary::Sub => self - other,
            Binary::Mul => self * other,
            Binary::Div => self / other,
            Binary::Powf => Code::op(Prim::Pow, vec![self, other]),
            Binary::Atan2 => Code(crate::core::named::prim(Prim::Atan2, vec![self.0, other.0])),
            // Functions the language does not have, as for `apply`.
            Binary::Rem => Code::op(Prim::Rem, vec![self, other]),
            Binary::Hypot => Code(crate::core::named::app(
                crate::core::named::var(format!("{op:?}").to_lowercase()),
                vec![self.0, other.0],
            )),
        }
    }

    /// `chainMul p d`, or `p * d` when a factor is a finite non-zero literal (then
    /// the plain product already is the chain rule's: `c · 0 = 0`).
    fn chain(self, d: Code) -> Code {
        let finite_nonzero = |c: &Code| c.lit().is_some_and(|c| c.is_finite() && c != 0.0);
        if self.lit() == Some(0.0) || d.lit() == Some(0.0) {
            Code(real(0.0))
        } else if finite_nonzero(&self) || finite_nonzero(&d) {
            self * d
        } else {
            Code(crate::core::named::prim(Prim::Chain, vec![self.0, d.0]))
        }
    }
}

/// The exploration script: the answers to give, and the questions asked so
/// far (of whatever symbolic type the rule is run on).
#[derive(Default)]
struct Script {
    answers: Vec<bool>,
    asked: Vec<Box<dyn Any>>,
}

thread_local! {
    static SCRIPT: RefCell<Script> = RefCell::new(Script::default());
}

/// Answers a comparison a rule asks about a symbolic number: records the
/// question and answers it from the current script (see [`explore`]).
pub fn decide<Q: 'static>(question: Q) -> bool {
    SCRIPT.with(|s| {
        let mut s = s.borrow_mut();
        let i = s.asked.len();
        s.asked.push(Box::new(question));
        s.answers.get(i).copied().unwrap_or(false)
    })
}

/// Runs `rule` on every path through the comparisons it asks with
/// [`decide`] (questions of type `Q`) and reassembles the results with
/// `branch(question, if_true, if_false)`, in the order the rule asks them.
pub fn explore<C, Q: Clone + 'static>(rule: &dyn Fn() -> C, branch: &dyn Fn(Q, C, C) -> C) -> C {
    fn go<C, Q: Clone + 'static>(
        rule: &dyn Fn() -> C,
        branch: &dyn Fn(Q, C, C) -> C,
        answers: Vec<bool>,
    ) -> C {
        let saved = SCRIPT.with(|s| {
            std::mem::replace(
                &mut *s.borrow_mut(),
                Script {
                    answers: answers.clone(),
                    asked: Vec::new(),
                },
            )
        });
        let result = rule();
        let asked = SCRIPT.with(|s| std::mem::replace(&mut *s.borrow_mut(), saved).asked);
        if asked.len() <= answers.len() {
            return result;
        }
        // The rule asked a new question: split on it.
        // Every question of one rule has the type it is explored at.
        let Some(question) = asked[answers.len()].downcast_ref::<Q>().cloned() else {
            return result;
        };
        let mut yes = answers.clone();
        yes.push(true);
        let mut no = answers;
        no.push(false);
        let (yes, no) = (go(rule, branch, yes), go(rule, branch, no));
        branch(question, yes, no)
    }
    go(rule, branch, Vec::new())
}

/// [`explore`] for rules run on [`Code`]: the paths as `if` expressions.
fn explore_code(rule: &dyn Fn() -> Code) -> Expr {
    explore(rule, &|q: Expr, yes: Code, no: Code| {
        Code(Expr::If(Box::new(q), Box::new(yes.0), Box::new(no.0)))
    })
    .0
}

/// The partial derivatives of the real primitive `f` at the arguments `args`,
/// given `value`, the primitive's result, as code. `args` and `value` should be
/// variables or literals: the rules may mention them several times.
///
/// `Select` (min/max) has no partials: the translations pick an argument instead.
pub fn partials(f: RealFn, args: &[Expr], value: &Expr) -> Vec<Expr> {
    let c = |e: &Expr| Code(e.clone());
    match f {
        RealFn::Unary(u) => vec![explore_code(&|| u.derivative(c(&args[0]), c(value)))],
        RealFn::Binary(b) => vec![
            explore_code(&|| b.partial_x(c(&args[0]), c(&args[1]), c(value))),
            explore_code(&|| b.partial_y(c(&args[0]), c(&args[1]), c(value))),
        ],
        RealFn::Select(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::named::var;
    use crate::prim::PRIMS;

    fn show(e: &Expr) -> String {
        format!("{e:?}")
    }

    #[test]
    fn sin_differentiates_to_cos_of_the_argument() {
        let d = partials(RealFn::Unary(Unary::Sin), &[var("x")], &var("v"));
        assert_eq!(d, vec![crate::core::named::prim(Prim::Cos, vec![var("x")])]);
    }

    #[test]
    fn multiplication_has_the_other_factor_as_partials() {
        let d = partials(
            RealFn::Binary(Binary::Mul),
            &[var("x"), var("y")],
            &var("v"),
        );
        assert_eq!(d, vec![var("y"), var("x")]);
    }

    #[test]
    fn abs_becomes_the_tables_three_way_branch() {
        let d = partials(RealFn::Unary(Unary::Abs), &[var("x")], &var("v"));
        let gt = real_op(Prim::Gt, vec![var("x"), real(0.0)]);
        let lt = real_op(Prim::Lt, vec![var("x"), real(0.0)]);
        let expected = Expr::If(
            Box::new(gt),
            Box::new(real(1.0)),
            Box::new(Expr::If(
                Box::new(lt),
                Box::new(real(-1.0)),
                Box::new(real(0.0)),
            )),
        );
        assert_eq!(d, vec![expected]);
    }

    #[test]
    fn every_language_primitive_rule_uses_only_language_primitives() {
        for row in PRIMS {
            let Some(f) = row.real else { continue };
            let args = [var("x"), var("y")];
            for d in partials(f, &args, &var("v")) {
                let mut ok = true;
                d.for_each(&mut |e| {
                    if let Expr::App(..) = e {
                        ok = false;
                    }
                });
                assert!(ok, "{}: {}", row.name, show(&d));
            }
        }
    }
}
