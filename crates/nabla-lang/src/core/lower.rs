//! Surface AST (plus the type checker's facts) to the named core
//! ([`super::named`]), the form the source-to-source AD translations read.
//!
//! Like [`super::desugar`], but names and tuple patterns stay:
//!
//! * `def f p1 p2 = e` is a [`named::Def`] with parameters `p1 p2` and its
//!   inferred type; annotations are dropped;
//! * `let f x = e1 in e2` is `let f = fun x -> e1 in e2`; `let rec f x = …`
//!   (and `let rec f = fun x -> …`) is [`Expr::LetRec`];
//! * `a && b` is `if a then b else false`, `a || b` is `if a then true else b`;
//! * `fst e`/`snd e` are projections; `v[i]` is the `Index` primitive; a
//!   `match` is a [`Expr::Case`];
//! * an integer literal used as a Real is a Real literal;
//! * a primitive applied to at least its arity of arguments is an
//!   [`Expr::Prim`] call (extra arguments go to an [`Expr::App`] around it);
//!   a primitive used with fewer is an [`Expr::PrimRef`], applied to the
//!   arguments it has. Operators and `sum` record the type they work on;
//! * in a translated file (`#!translated`), `do` blocks are [`Expr::Bind`]s,
//!   `runDelta` is [`Expr::RunDelta`], `name @T` is [`Expr::Poly`], `!r` and
//!   `r += e` are primitive calls and `e1; e2` is `let () = e1 in e2`; the
//!   dialect's primitives (`pure`, `deltaLet`, …) are primitives only there.
//!
//! A variable keeps its source name; shadowing is preserved as written, so
//! printing the result binds every name where the source did.

use super::Lit;
use super::named::{self, Expr, Pat, PrimAt};
use crate::diagnostic::Diagnostic;
use crate::prim::{self, Prim};
use crate::stack;
use crate::syntax::ast::{self, BinOp, ExprKind, Pattern};
use crate::syntax::span::Span;
use crate::types::infer::poly_index_type;
use crate::types::{CheckedProgram, Type, Typing};
use std::collections::HashSet;

/// Lowering a well-typed program can only fail on absurd nesting.
#[derive(Clone, Debug, PartialEq)]
pub enum LowerError {
    /// The native stack budget ran out.
    TooDeep(Span),
    /// `trace`, which the `nabla ad` translations do not carry.
    Trace(Span),
    /// A record construct: records are erased to tuples before this
    /// ([`super::records`]); reaching here is a bug.
    Record(Span),
}

impl From<LowerError> for Diagnostic {
    fn from(e: LowerError) -> Diagnostic {
        match e {
            LowerError::TooDeep(span) => Diagnostic::error("program nested too deeply", span)
                .with_label("nesting limit reached here"),
            LowerError::Trace(span) => {
                Diagnostic::error("the `nabla ad` translations do not support `trace`", span)
                    .with_label("remove this `trace` to translate the program")
            }
            LowerError::Record(span) => super::records::not_erased(span),
        }
    }
}

type LResult<T> = Result<T, LowerError>;

/// Lowers type-checked definitions to a named-core [`named::Program`].
/// `checked` must come from checking exactly these definitions (in this order).
pub fn lower_program(defs: &[ast::Def], checked: &CheckedProgram) -> LResult<named::Program> {
    // Definitions used at several numeric types come as copies, one per type.
    let defs = checked.typing.specialised.as_deref().unwrap_or(defs);
    let globals: HashSet<&str> = defs.iter().map(|d| d.binding.name.name.as_str()).collect();
    let mut l = Lowerer {
        locals: Vec::new(),
        globals,
        typing: &checked.typing,
        translated: false,
    };
    let mut out = Vec::with_capacity(defs.len());
    for (i, def) in defs.iter().enumerate() {
        let b = &def.binding;
        l.translated = def.translated;
        let mark = l.locals.len();
        let params = b
            .params
            .iter()
            .map(|p| l.bind(p))
            .collect::<LResult<Vec<_>>>()?;
        let body = l.expr(&b.body);
        l.locals.truncate(mark);
        out.push(named::Def {
            name: b.name.name.clone(),
            params,
            body: body?,
            ty: checked.def_types.get(i).cloned(),
        });
    }
    Ok(named::Program { defs: out })
}

/// The pattern `p` without annotations (`()` is the empty tuple).
pub fn lower_pattern(p: &Pattern) -> LResult<Pat> {
    if stack::check().is_err() {
        return Err(LowerError::TooDeep(p.span()));
    }
    Ok(match p {
        Pattern::Var(id) => Pat::Var(id.name.clone()),
        Pattern::Wild(_) => Pat::Wild,
        Pattern::Unit(_) => Pat::Tuple(Vec::new()),
        Pattern::Tuple(ps, _) => Pat::Tuple(ps.iter().map(lower_pattern).collect::<LResult<_>>()?),
        Pattern::Record { span, .. } => return Err(LowerError::Record(*span)),
        Pattern::Annot(inner, _, _) => lower_pattern(inner)?,
    })
}

struct Lowerer<'a> {
    /// Names bound by enclosing local binders (innermost last).
    locals: Vec<String>,
    globals: HashSet<&'a str>,
    typing: &'a Typing,
    /// Lowering a definition of a translated file (whose primitives include
    /// the dialect's).
    translated: bool,
}

impl Lowerer<'_> {
    /// Lowers `p` and brings its names into scope (the caller truncates
    /// `locals` when the scope ends).
    fn bind(&mut self, p: &Pattern) -> LResult<Pat> {
        let pat = lower_pattern(p)?;
        crate::types::infer::pattern_names(p, &mut |n| self.locals.push(n.to_string()));
        Ok(pat)
    }

    /// The primitive a name refers to here, if no binder shadows it.
    fn prim_named(&self, name: &str) -> Option<Prim> {
        if self.locals.iter().any(|n| n == name) || self.globals.contains(name) {
            return None;
        }
        prim::lookup_named_in(name, self.translated).map(|p| p.prim)
    }

    /// `prim` with the type it is used at, for the occurrence `id`.
    fn prim_at(&self, prim: Prim, id: ast::NodeId) -> PrimAt {
        let at = match prim {
            Prim::Sum => self.typing.sum_types.get(&id).cloned(),
            Prim::Add
            | Prim::Sub
            | Prim::Mul
            | Prim::Div
            | Prim::Rem
            | Prim::Neg
            | Prim::Lt
            | Prim::Le
            | Prim::Gt
            | Prim::Ge
            | Prim::Eq
            | Prim::Ne => self.typing.operand_types.get(&id).cloned(),
            _ => None,
        };
        PrimAt { prim, at }
    }

    fn exprs(&mut self, es: &[ast::Expr]) -> LResult<Vec<Expr>> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&mut self, e: &ast::Expr) -> LResult<Expr> {
        if stack::check().is_err() {
            return Err(LowerError::TooDeep(e.span));
        }
        Ok(match &e.kind {
            ExprKind::Record(..) | ExprKind::Field(..) | ExprKind::Update(..) => {
                return Err(LowerError::Record(e.span));
            }
            ExprKind::Var(name) => match self.prim_named(name) {
                // A constant (`pi`) is its value.
                Some(p) => match p.constant() {
                    Some(x) => Expr::Lit(Lit::Real(x)),
                    None => Expr::PrimRef(self.prim_at(p, e.id)),
                },
                None => Expr::Var(name.clone()),
            },
            ExprKind::Int(n) => {
                if self.typing.real_literals.contains(&e.id) {
                    Expr::Lit(Lit::Real(*n as f64))
                } else {
                    Expr::Lit(Lit::Int(*n))
                }
            }
            ExprKind::Real(x) => Expr::Lit(Lit::Real(*x)),
            ExprKind::Bool(b) => Expr::Lit(Lit::Bool(*b)),
            ExprKind::Unit => Expr::Lit(Lit::Unit),
            ExprKind::Tuple(es) => Expr::Tuple(self.exprs(es)?),
            ExprKind::Vector(es) => Expr::Vector(self.exprs(es)?),
            ExprKind::Lam(ps, body) => {
                let mark = self.locals.len();
                let r = self.lambda(ps, body);
                self.locals.truncate(mark);
                let (ps, body) = r?;
                Expr::Lam(ps, Box::new(body))
            }
            ExprKind::App(..) => self.application(e)?,
            ExprKind::Let(p, v, body) => {
                let value = self.expr(v)?;
                let mark = self.locals.len();
                let r = self.bind(p).and_then(|p| Ok((p, self.expr(body)?)));
                self.locals.truncate(mark);
                let (p, body) = r?;
                Expr::Let(p, Box::new(value), Box::new(body))
            }
            ExprKind::LetFun { rec, binding, body } => self.let_fun(*rec, binding, body)?,
            ExprKind::If(c, a, b) => Expr::If(
                Box::new(self.expr(c)?),
                Box::new(self.expr(a)?),
                Box::new(self.expr(b)?),
            ),
            ExprKind::Inl(x) => Expr::Inl(Box::new(self.expr(x)?)),
            ExprKind::Inr(x) => Expr::Inr(Box::new(self.expr(x)?)),
            ExprKind::Match {
                scrutinee,
                left,
                right,
            } => {
                let s = self.expr(scrutinee)?;
                let left = self.arm(&left.0, &left.1)?;
                let right = self.arm(&right.0, &right.1)?;
                Expr::Case {
                    scrutinee: Box::new(s),
                    left,
                    right,
                }
            }
            ExprKind::Binary(op, a, b) => {
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                let p = match op {
                    BinOp::And => {
                        return Ok(Expr::If(
                            Box::new(x),
                            Box::new(y),
                            Box::new(Expr::Lit(Lit::Bool(false))),
                        ));
                    }
                    BinOp::Or => {
                        return Ok(Expr::If(
                            Box::new(x),
                            Box::new(Expr::Lit(Lit::Bool(true))),
                            Box::new(y),
                        ));
                    }
                    op => Prim::of_operator(*op),
                };
                Expr::Prim(self.prim_at(p, e.id), vec![x, y])
            }
            ExprKind::Neg(a) => Expr::Prim(self.prim_at(Prim::Neg, e.id), vec![self.expr(a)?]),
            ExprKind::Index(v, i) => Expr::Prim(
                PrimAt::plain(Prim::Index),
                vec![self.expr(v)?, self.expr(i)?],
            ),
            ExprKind::Annot(x, _) => self.expr(x)?,
            ExprKind::Bind(p, m, rest) => {
                let m = self.expr(m)?;
                let mark = self.locals.len();
                let r = self.bind(p).and_then(|p| Ok((p, self.expr(rest)?)));
                self.locals.truncate(mark);
                let (p, rest) = r?;
                Expr::Bind(p, Box::new(m), Box::new(rest))
            }
            ExprKind::RunDelta(a, m) => {
                Expr::RunDelta(Box::new(self.expr(a)?), Box::new(self.expr(m)?))
            }
            // The checker has accepted the type (closed, first-order).
            ExprKind::Trace(..) => return Err(LowerError::Trace(e.span)),
            ExprKind::Poly(p, te) => Expr::Poly(*p, poly_index_type(te).unwrap_or(Type::Unit)),
            ExprKind::Deref(r) => Expr::Prim(PrimAt::plain(Prim::Deref), vec![self.expr(r)?]),
        })
    }

    /// Parameters and body of a function (the caller restores `locals`).
    fn lambda(&mut self, ps: &[Pattern], body: &ast::Expr) -> LResult<(Vec<Pat>, Expr)> {
        let ps = ps
            .iter()
            .map(|p| self.bind(p))
            .collect::<LResult<Vec<_>>>()?;
        Ok((ps, self.expr(body)?))
    }

    fn arm(&mut self, p: &Pattern, body: &ast::Expr) -> LResult<(Pat, Box<Expr>)> {
        let mark = self.locals.len();
        let r = self
            .bind(p)
            .and_then(|p| Ok((p, Box::new(self.expr(body)?))));
        self.locals.truncate(mark);
        r
    }

    fn let_fun(&mut self, rec: bool, binding: &ast::FunBinding, body: &ast::Expr) -> LResult<Expr> {
        let name = binding.name.name.clone();
        let mark = self.locals.len();
        // `let rec f = fun x -> …` is `let rec f x = …`.
        let (params, value): (&[Pattern], &ast::Expr) = match &binding.body.kind {
            ExprKind::Lam(ps, lam_body) if rec && binding.params.is_empty() => (ps, lam_body),
            _ => (&binding.params, &binding.body),
        };
        if rec {
            self.locals.push(name.clone());
        }
        let r = if params.is_empty() {
            self.expr(value).map(|v| (Vec::new(), v))
        } else {
            self.lambda(params, value)
        };
        self.locals.truncate(mark);
        let (params, value) = r?;
        self.locals.push(name.clone());
        let r = self.expr(body);
        self.locals.truncate(mark);
        let body = Box::new(r?);
        Ok(if rec && !params.is_empty() {
            Expr::LetRec {
                name,
                params,
                value: Box::new(value),
                body,
            }
        } else if params.is_empty() {
            Expr::Let(Pat::Var(name), Box::new(value), body)
        } else {
            Expr::Let(
                Pat::Var(name),
                Box::new(Expr::Lam(params, Box::new(value))),
                body,
            )
        })
    }

    /// An application spine `f a1 … an`: a primitive head with enough
    /// arguments is a saturated [`Expr::Prim`] call.
    fn application(&mut self, e: &ast::Expr) -> LResult<Expr> {
        let mut args = Vec::new();
        let mut head = e;
        while let ExprKind::App(f, x) = &head.kind {
            args.push(&**x);
            head = f;
            if stack::check().is_err() {
                return Err(LowerError::TooDeep(e.span));
            }
        }
        args.reverse();
        let prim = match &head.kind {
            ExprKind::Var(name) => self.prim_named(name),
            _ => None,
        };
        let mut lowered = Vec::with_capacity(args.len());
        for a in &args {
            lowered.push(self.expr(a)?);
        }
        let (f, rest) = match prim {
            Some(p) if lowered.len() >= p.info().arity => {
                let rest = lowered.split_off(p.info().arity);
                let call = match p {
                    Prim::Fst | Prim::Snd if lowered.len() == 1 => Expr::Proj {
                        tuple: Box::new(lowered.remove(0)),
                        index: u32::from(p == Prim::Snd),
                        arity: 2,
                    },
                    _ => Expr::Prim(self.prim_at(p, head.id), lowered),
                };
                (call, rest)
            }
            _ => (self.expr(head)?, lowered),
        };
        Ok(if rest.is_empty() {
            f
        } else {
            Expr::App(Box::new(f), rest)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parser::{IdGen, parse_program};
    use crate::types::check_program;

    fn lower(src: &str) -> named::Program {
        let (prog, errs) = parse_program(src, 0, &mut IdGen::new());
        assert!(errs.is_empty(), "{errs:?}");
        let checked = check_program(&prog.defs).expect("checks");
        lower_program(&prog.defs, &checked).expect("lowers")
    }

    fn body(src: &str) -> Expr {
        lower(src).defs.pop().expect("a def").body
    }

    #[test]
    fn operators_record_their_operand_type() {
        let e = body("def main = 1 + 2.5");
        assert_eq!(
            e,
            named::real_op(Prim::Add, vec![named::real(1.0), named::real(2.5)])
        );
        let e = body("def main = 1 < 2");
        assert_eq!(
            e,
            Expr::Prim(
                PrimAt::at(Prim::Lt, Type::Int),
                vec![named::int(1), named::int(2)]
            )
        );
        let e = body("def main = true == false");
        let Expr::Prim(p, _) = e else { panic!() };
        assert_eq!(p.at, Some(Type::Bool));
        let e = body("def main = -(2.0)");
        let Expr::Prim(p, _) = e else { panic!() };
        assert_eq!(p, PrimAt::at(Prim::Neg, Type::Real));
    }

    #[test]
    fn sum_records_its_element_type_saturated_or_not() {
        let e = body("def main = sum [1.0]");
        assert_eq!(
            e,
            Expr::Prim(
                PrimAt::at(Prim::Sum, Type::Real),
                vec![Expr::Vector(vec![named::real(1.0)])]
            )
        );
        let e = body("def main = map sum [[1, 2]]");
        let Expr::Prim(_, args) = e else { panic!() };
        assert_eq!(args[0], Expr::PrimRef(PrimAt::at(Prim::Sum, Type::Int)));
    }

    #[test]
    fn saturation_and_projections() {
        // Over-applied: `fst` returns a function.
        let e = body("def main = fst (fun x -> x + 1, 0) 2");
        assert!(
            matches!(&e, Expr::App(f, a) if matches!(**f, Expr::Proj { index: 0, arity: 2, .. }) && a.len() == 1)
        );
        // Unsaturated: a reference, partially applied.
        let e = body("def main = map (atan2 1.0) [1.0]");
        let Expr::Prim(_, args) = e else { panic!() };
        assert_eq!(
            args[0],
            named::app(
                Expr::PrimRef(PrimAt::plain(Prim::Atan2)),
                vec![named::real(1.0)]
            )
        );
        let e = body("def main = snd");
        assert_eq!(e, Expr::PrimRef(PrimAt::plain(Prim::Snd)));
    }

    #[test]
    fn shadowed_primitives_are_variables() {
        let e = body("def main = let sin x = x in sin 1.0");
        let Expr::Let(_, _, b) = e else { panic!() };
        assert_eq!(*b, named::app(named::var("sin"), vec![named::real(1.0)]));
        let p = lower("def fst p = 1\ndef main = fst (1, 2)");
        assert_eq!(
            p.defs[1].body,
            named::app(
                named::var("fst"),
                vec![Expr::Tuple(vec![named::int(1), named::int(2)])]
            )
        );
        // A parameter shadows, the name is free again after its scope.
        let e = body("def main = (fun max -> max) 1.0 + max 1.0 2.0");
        let Expr::Prim(_, args) = e else { panic!() };
        assert!(matches!(&args[1], Expr::Prim(p, _) if p.prim == Prim::Max));
    }

    #[test]
    fn lets_and_patterns() {
        let e =
            body("def main = let rec f (x : Int) : Int = if x == 0 then 0 else f (x - 1) in f 3");
        assert!(
            matches!(&e, Expr::LetRec { name, params, .. } if name == "f" && params == &[Pat::var("x")])
        );
        let e = body("def main = let rec f = fun x -> x in f 3");
        assert!(matches!(&e, Expr::LetRec { params, .. } if params == &[Pat::var("x")]));
        let e = body("def main = let f x y = x in f 1 2");
        assert!(
            matches!(&e, Expr::Let(Pat::Var(f), v, _) if f == "f" && matches!(**v, Expr::Lam(ref ps, _) if ps.len() == 2))
        );
        let e = body("def main = let ((a, _), ()) = ((1, 2), ()) in a");
        let Expr::Let(p, _, _) = e else { panic!() };
        assert_eq!(
            p,
            Pat::Tuple(vec![
                Pat::Tuple(vec![Pat::var("a"), Pat::Wild]),
                Pat::Tuple(vec![])
            ])
        );
        let p = lower("def f (x : Real) (y, z) = x\ndef main = f 1.0 (2, 3)");
        assert_eq!(p.defs[0].params, vec![Pat::var("x"), Pat::pair("y", "z")]);
        assert!(p.defs[0].ty.is_some());
    }

    #[test]
    fn short_circuit_operators_are_ifs() {
        let e = body("def main = true && false || true");
        assert_eq!(
            e,
            Expr::If(
                Box::new(Expr::If(
                    Box::new(Expr::Lit(Lit::Bool(true))),
                    Box::new(Expr::Lit(Lit::Bool(false))),
                    Box::new(Expr::Lit(Lit::Bool(false)))
                )),
                Box::new(Expr::Lit(Lit::Bool(true))),
                Box::new(Expr::Lit(Lit::Bool(true)))
            )
        );
    }

    #[test]
    fn too_deep_is_an_error_not_a_crash() {
        let r = crate::stack::run_with_stack(|| {
            let src = format!(
                "def main = {}1{}",
                "(1 + ".repeat(20_000),
                ")".repeat(20_000)
            );
            let (prog, errs) = parse_program(&src, 0, &mut IdGen::new());
            assert!(errs.is_empty());
            let checked = check_program(&prog.defs).expect("checks");
            // On a thread with the default 1 MiB budget the lowering runs out.
            let r = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .stack_size(16 << 20)
                    .spawn_scoped(s, || lower_program(&prog.defs, &checked).map(|_| ()))
                    .expect("spawn")
                    .join()
                    .expect("no panic")
            });
            // The big tree is dropped here, on the big stack.
            r
        })
        .expect("thread");
        assert!(matches!(r, Err(LowerError::TooDeep(_))));
    }
}
