//! Records are tuples once the program has checked.
//!
//! A record type is the set of its fields ([`crate::types::Type::Record`] keeps them in
//! name order), so `{ w = v, b = 0.0 }` and `{ b = 0.0, w = v }` have the
//! same type and the same layout: the tuple of the fields in name order, or
//! the field itself for a record of one field. [`erase_records`] rewrites a
//! checked program into that form, using the record type the checker found
//! at each record construct ([`Typing::records`]); the interpreter, the
//! translations, the native compiler and every differentiation operator
//! then see only tuples, so a record is first-order data for `grad` & co.
//! exactly as the tuple of its fields is (Krawiec et al. §9). Only the
//! boundaries know the names: values are printed and read as records by
//! their checked type ([`crate::pretty::print_value_as`],
//! [`crate::data`]).
//!
//! | written | erased (fields `b`, `w`) |
//! |---|---|
//! | `{ w = e1, b = e2 }` | `(e2, e1)` (evaluated as written: `let`s first when the orders differ) |
//! | `r.w` | `let (_, w') = r in w'` |
//! | `{ r with b = e }` | `let (_, w') = r in (e, w')` |
//! | `{ w = p, .. }` (pattern) | `(_, p)` |
//! | `{ b : Real, w : Vec Real }` (type) | `(Real, Vec Real)` |

use std::collections::HashSet;
use std::sync::Arc;

use crate::diagnostic::Diagnostic;
use crate::stack;
use crate::syntax::ast::{Def, Expr, ExprKind, FunBinding, Ident, NodeId, Pattern, TypeExpr};
use crate::syntax::span::Span;
use crate::types::Typing;

/// What a lowering reports if a record reaches it (a bug: they are erased first).
pub const NOT_ERASED: &str = "a record construct reached a lowering before being erased to a tuple";

/// The diagnostic for [`NOT_ERASED`].
pub(crate) fn not_erased(span: Span) -> Diagnostic {
    Diagnostic::error(format!("internal error: {NOT_ERASED}"), span)
}

/// True if the checked program has a record construct anywhere.
pub fn has_records(typing: &Typing) -> bool {
    !typing.records.is_empty()
}

/// The program `defs` (the one `typing` is about: the specialised program
/// if checking made one) with every record construct and record type
/// written as its tuple. The result is record-free and checks again.
pub fn erase_records(defs: &[Def], typing: &Typing) -> Result<Vec<Def>, Diagnostic> {
    let mut used = HashSet::new();
    let mut max_id = 0;
    for d in defs {
        used.insert(d.binding.name.name.clone());
        scan_binding(&d.binding, &mut used, &mut max_id)?;
    }
    let mut eraser = Eraser {
        typing,
        used,
        next_id: max_id.saturating_add(1),
    };
    defs.iter()
        .map(|d| {
            Ok(Def {
                binding: eraser.binding(&d.binding)?,
                span: d.span,
                translated: d.translated,
            })
        })
        .collect()
}

fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::error("program nested too deeply", span).with_label("nesting limit reached here")
}

/// Collects every name the program uses or binds, and its largest node id.
fn scan_binding(
    b: &FunBinding,
    used: &mut HashSet<String>,
    max_id: &mut u32,
) -> Result<(), Diagnostic> {
    for p in &b.params {
        scan_pattern(p, used, max_id);
    }
    scan(&b.body, used, max_id)
}

fn scan_pattern(p: &Pattern, used: &mut HashSet<String>, max_id: &mut u32) {
    crate::types::infer::pattern_names(p, &mut |n| {
        used.insert(n.to_string());
    });
    p.for_each_record_id(&mut |id| *max_id = (*max_id).max(id.0));
}

fn scan(e: &Expr, used: &mut HashSet<String>, max_id: &mut u32) -> Result<(), Diagnostic> {
    if stack::check().is_err() {
        return Err(too_deep(e.span));
    }
    *max_id = (*max_id).max(e.id.0);
    match &e.kind {
        ExprKind::Var(n) => {
            used.insert(n.clone());
        }
        ExprKind::Lam(ps, _) => ps.iter().for_each(|p| scan_pattern(p, used, max_id)),
        ExprKind::Let(p, _, _) | ExprKind::Bind(p, _, _) => scan_pattern(p, used, max_id),
        ExprKind::LetFun { binding, .. } => {
            used.insert(binding.name.name.clone());
            binding
                .params
                .iter()
                .for_each(|p| scan_pattern(p, used, max_id));
        }
        ExprKind::Match { left, right, .. } => {
            scan_pattern(&left.0, used, max_id);
            scan_pattern(&right.0, used, max_id);
        }
        _ => {}
    }
    for c in e.kind.children() {
        scan(c, used, max_id)?;
    }
    Ok(())
}

struct Eraser<'a> {
    typing: &'a Typing,
    /// Names in the program: a fresh name is none of them.
    used: HashSet<String>,
    next_id: u32,
}

impl Eraser<'_> {
    fn fields(&self, id: NodeId, span: Span) -> Result<Arc<[String]>, Diagnostic> {
        self.typing
            .records
            .get(&id)
            .cloned()
            .ok_or_else(|| not_erased(span))
    }

    fn mk(&mut self, kind: ExprKind, span: Span) -> Expr {
        let id = NodeId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        Expr { kind, span, id }
    }

    /// A name for field `field`'s value that the program does not use.
    fn fresh(&mut self, field: &str, span: Span) -> Ident {
        let mut n = 0;
        let name = loop {
            let candidate = format!("{field}'{n}");
            if !self.used.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        self.used.insert(name.clone());
        Ident { name, span }
    }

    fn var(&mut self, id: &Ident) -> Expr {
        self.mk(ExprKind::Var(id.name.clone()), id.span)
    }

    /// The tuple of `items` (one item: itself).
    fn tuple(&mut self, mut items: Vec<Expr>, span: Span) -> Expr {
        if items.len() == 1 {
            items.remove(0)
        } else {
            self.mk(ExprKind::Tuple(items), span)
        }
    }

    fn tuple_pattern(mut items: Vec<Pattern>, span: Span) -> Pattern {
        if items.len() == 1 {
            items.remove(0)
        } else {
            Pattern::Tuple(items, span)
        }
    }

    fn binding(&mut self, b: &FunBinding) -> Result<FunBinding, Diagnostic> {
        Ok(FunBinding {
            name: b.name.clone(),
            params: b
                .params
                .iter()
                .map(|p| self.pattern(p))
                .collect::<Result<_, _>>()?,
            ret: b.ret.as_ref().map(|t| self.ty(t)).transpose()?,
            body: self.expr(&b.body)?,
        })
    }

    fn ty(&mut self, t: &TypeExpr) -> Result<TypeExpr, Diagnostic> {
        if stack::check().is_err() {
            return Err(too_deep(t.span()));
        }
        Ok(match t {
            TypeExpr::Name(_) | TypeExpr::Unit(_) => t.clone(),
            TypeExpr::Tuple(ts, s) => TypeExpr::Tuple(self.types(ts)?, *s),
            TypeExpr::Sum(a, b, s) => {
                TypeExpr::Sum(Box::new(self.ty(a)?), Box::new(self.ty(b)?), *s)
            }
            TypeExpr::Vec(a, s) => TypeExpr::Vec(Box::new(self.ty(a)?), *s),
            TypeExpr::Fun(a, b, s) => {
                TypeExpr::Fun(Box::new(self.ty(a)?), Box::new(self.ty(b)?), *s)
            }
            TypeExpr::Con(c, ts, s) => TypeExpr::Con(*c, self.types(ts)?, *s),
            TypeExpr::Record(fields, s) => {
                let mut sorted: Vec<&(Ident, TypeExpr)> = fields.iter().collect();
                sorted.sort_by(|a, b| a.0.name.cmp(&b.0.name));
                let mut items = sorted
                    .into_iter()
                    .map(|(_, t)| self.ty(t))
                    .collect::<Result<Vec<_>, _>>()?;
                if items.len() == 1 {
                    items.remove(0)
                } else {
                    TypeExpr::Tuple(items, *s)
                }
            }
        })
    }

    fn types(&mut self, ts: &[TypeExpr]) -> Result<Vec<TypeExpr>, Diagnostic> {
        ts.iter().map(|t| self.ty(t)).collect()
    }

    fn pattern(&mut self, p: &Pattern) -> Result<Pattern, Diagnostic> {
        if stack::check().is_err() {
            return Err(too_deep(p.span()));
        }
        Ok(match p {
            Pattern::Var(_) | Pattern::Wild(_) | Pattern::Unit(_) => p.clone(),
            Pattern::Tuple(ps, s) => Pattern::Tuple(
                ps.iter()
                    .map(|p| self.pattern(p))
                    .collect::<Result<_, _>>()?,
                *s,
            ),
            Pattern::Annot(inner, t, s) => {
                Pattern::Annot(Box::new(self.pattern(inner)?), self.ty(t)?, *s)
            }
            Pattern::Record {
                fields, span, id, ..
            } => {
                let names = self.fields(*id, *span)?;
                let mut items = Vec::with_capacity(names.len());
                for name in names.iter() {
                    items.push(match fields.iter().find(|(f, _)| f.name == *name) {
                        Some((_, p)) => self.pattern(p)?,
                        None => Pattern::Wild(*span),
                    });
                }
                Self::tuple_pattern(items, *span)
            }
        })
    }

    /// `let p = value in body`.
    fn let_(&mut self, p: Pattern, value: Expr, body: Expr, span: Span) -> Expr {
        self.mk(ExprKind::Let(p, Box::new(value), Box::new(body)), span)
    }

    /// The values of `fields` (erased), evaluated in the order written, as
    /// expressions to place in name order: a value that is not a variable
    /// or a literal is bound by a `let` first (returned for the caller to
    /// wrap around its result) when there are two or more such values.
    fn in_written_order(&mut self, fields: &[(Ident, Expr)]) -> Result<InOrder, Diagnostic> {
        let trivial = |e: &Expr| {
            matches!(
                e.kind,
                ExprKind::Var(_)
                    | ExprKind::Int(_)
                    | ExprKind::Real(_)
                    | ExprKind::Bool(_)
                    | ExprKind::Unit
            )
        };
        let bind = fields.iter().filter(|(_, e)| !trivial(e)).count() >= 2;
        let mut values = Vec::new();
        let mut lets = Vec::new();
        for (name, e) in fields {
            let v = self.expr(e)?;
            if bind && !trivial(e) {
                let x = self.fresh(&name.name, e.span);
                values.push((name.name.clone(), self.var(&x)));
                lets.push((x, v));
            } else {
                values.push((name.name.clone(), v));
            }
        }
        Ok((values, lets))
    }

    /// `lets` (in order) around `body`.
    fn wrap(&mut self, lets: Vec<(Ident, Expr)>, mut body: Expr, span: Span) -> Expr {
        for (x, v) in lets.into_iter().rev() {
            body = self.let_(Pattern::Var(x), v, body, span);
        }
        body
    }

    fn expr(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        if stack::check().is_err() {
            return Err(too_deep(e.span));
        }
        let span = e.span;
        let kind = match &e.kind {
            ExprKind::Record(fields) => {
                let names = self.fields(e.id, span)?;
                let (mut values, lets) = self.in_written_order(fields)?;
                let mut items = Vec::with_capacity(names.len());
                for name in names.iter() {
                    let i = values
                        .iter()
                        .position(|(n, _)| n == name)
                        .ok_or_else(|| not_erased(span))?;
                    items.push(values.swap_remove(i).1);
                }
                let tuple = self.tuple(items, span);
                return Ok(self.wrap(lets, tuple, span));
            }
            ExprKind::Field(r, field) => {
                let names = self.fields(e.id, span)?;
                let r = self.expr(r)?;
                if names.len() == 1 {
                    return Ok(r);
                }
                let x = self.fresh(&field.name, field.span);
                let parts = names
                    .iter()
                    .map(|n| {
                        if *n == field.name {
                            Pattern::Var(x.clone())
                        } else {
                            Pattern::Wild(field.span)
                        }
                    })
                    .collect();
                let body = self.var(&x);
                return Ok(self.let_(Pattern::Tuple(parts, span), r, body, span));
            }
            ExprKind::Update(r, fields) => {
                let names = self.fields(e.id, span)?;
                let r = self.expr(r)?;
                let (mut values, lets) = self.in_written_order(fields)?;
                let mut parts = Vec::with_capacity(names.len());
                let mut items = Vec::with_capacity(names.len());
                for name in names.iter() {
                    match values.iter().position(|(n, _)| n == name) {
                        Some(i) => {
                            parts.push(Pattern::Wild(span));
                            items.push(values.swap_remove(i).1);
                        }
                        None => {
                            let x = self.fresh(name, span);
                            items.push(self.var(&x));
                            parts.push(Pattern::Var(x));
                        }
                    }
                }
                let tuple = self.tuple(items, span);
                let body = self.wrap(lets, tuple, span);
                let p = Self::tuple_pattern(parts, span);
                return Ok(self.let_(p, r, body, span));
            }
            ExprKind::Var(_)
            | ExprKind::Int(_)
            | ExprKind::Real(_)
            | ExprKind::Bool(_)
            | ExprKind::Unit => e.kind.clone(),
            ExprKind::Poly(p, t) => ExprKind::Poly(*p, self.ty(t)?),
            ExprKind::Tuple(es) => ExprKind::Tuple(self.exprs(es)?),
            ExprKind::Vector(es) => ExprKind::Vector(self.exprs(es)?),
            ExprKind::Lam(ps, b) => ExprKind::Lam(
                ps.iter()
                    .map(|p| self.pattern(p))
                    .collect::<Result<_, _>>()?,
                self.boxed(b)?,
            ),
            ExprKind::App(a, b) => ExprKind::App(self.boxed(a)?, self.boxed(b)?),
            ExprKind::Let(p, a, b) => {
                ExprKind::Let(self.pattern(p)?, self.boxed(a)?, self.boxed(b)?)
            }
            ExprKind::Bind(p, a, b) => {
                ExprKind::Bind(self.pattern(p)?, self.boxed(a)?, self.boxed(b)?)
            }
            ExprKind::LetFun { rec, binding, body } => ExprKind::LetFun {
                rec: *rec,
                binding: Box::new(self.binding(binding)?),
                body: self.boxed(body)?,
            },
            ExprKind::If(a, b, c) => ExprKind::If(self.boxed(a)?, self.boxed(b)?, self.boxed(c)?),
            ExprKind::Inl(a) => ExprKind::Inl(self.boxed(a)?),
            ExprKind::Inr(a) => ExprKind::Inr(self.boxed(a)?),
            ExprKind::Match {
                scrutinee,
                left,
                right,
            } => ExprKind::Match {
                scrutinee: self.boxed(scrutinee)?,
                left: (self.pattern(&left.0)?, self.boxed(&left.1)?),
                right: (self.pattern(&right.0)?, self.boxed(&right.1)?),
            },
            ExprKind::Binary(op, a, b) => ExprKind::Binary(*op, self.boxed(a)?, self.boxed(b)?),
            ExprKind::Neg(a) => ExprKind::Neg(self.boxed(a)?),
            ExprKind::Index(a, b) => ExprKind::Index(self.boxed(a)?, self.boxed(b)?),
            ExprKind::Annot(a, t) => ExprKind::Annot(self.boxed(a)?, self.ty(t)?),
            ExprKind::Trace(label, a) => ExprKind::Trace(label.clone(), self.boxed(a)?),
            ExprKind::RunDelta(a, b) => ExprKind::RunDelta(self.boxed(a)?, self.boxed(b)?),
            ExprKind::Deref(a) => ExprKind::Deref(self.boxed(a)?),
        };
        // Keep the node's id: the facts of the re-check are by id, and
        // diagnostics of the erased program point where the source did.
        Ok(Expr {
            kind,
            span,
            id: e.id,
        })
    }

    fn boxed(&mut self, e: &Expr) -> Result<Box<Expr>, Diagnostic> {
        Ok(Box::new(self.expr(e)?))
    }

    fn exprs(&mut self, es: &[Expr]) -> Result<Vec<Expr>, Diagnostic> {
        es.iter().map(|e| self.expr(e)).collect()
    }
}

/// Field values placed in name order, and the `let`s to wrap around them
/// (see `in_written_order`).
type InOrder = (Vec<(String, Expr)>, Vec<(Ident, Expr)>);
