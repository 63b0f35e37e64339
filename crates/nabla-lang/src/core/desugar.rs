//! Surface AST (plus the type checker's facts) to core IR.

use super::*;
use crate::diagnostic::Diagnostic;
use crate::prim::{self, Prim};
use crate::stack;
use crate::syntax::ast::{self, BinOp, ExprKind, Pattern};
use crate::types::{Type, Typing};
use std::collections::HashMap;

/// Desugaring of a well-typed program can only fail on absurd nesting.
#[derive(Clone, Debug, PartialEq)]
pub enum DesugarError {
    /// The native stack budget ran out.
    TooDeep(Span),
    /// A record construct: records are erased to tuples before this
    /// ([`super::records`]); reaching here is a bug.
    Record(Span),
}

impl From<DesugarError> for Diagnostic {
    fn from(e: DesugarError) -> Diagnostic {
        match e {
            DesugarError::TooDeep(span) => Diagnostic::error("program nested too deeply", span)
                .with_label("nesting limit reached here"),
            DesugarError::Record(span) => super::records::not_erased(span),
        }
    }
}

type DResult<T> = Result<T, DesugarError>;

/// Translates type-checked definitions into a core [`Program`]. `typing`
/// must come from checking exactly these definitions.
pub fn desugar_program(defs: &[ast::Def], typing: &Typing) -> DResult<Program> {
    // Definitions used at several numeric types come as copies, one per type.
    let defs = typing.specialised.as_deref().unwrap_or(defs);
    let globals: HashMap<String, u32> = defs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.binding.name.name.clone(), i as u32))
        .collect();
    let mut d = Desugarer {
        scopes: Vec::new(),
        globals: &globals,
        typing,
        lambdas: Vec::new(),
        translated: false,
    };
    let mut out = Vec::new();
    for def in defs {
        let b = &def.binding;
        d.translated = def.translated;
        let body = if b.params.is_empty() {
            d.expr(&b.body)?
        } else {
            // A top-level function refers to itself as a global, not as
            // `SelfRef`: its closure captures nothing, and the interpreter
            // can call it directly.
            d.lambdas_for(
                &b.params,
                &b.body,
                None,
                Some(b.name.name.clone()),
                def.span,
            )?
        };
        d.scopes.clear();
        out.push(GlobalDef {
            name: b.name.name.clone(),
            body,
            span: def.span,
        });
    }
    Ok(Program {
        globals: out,
        lambdas: d.lambdas,
    })
}

struct FnScope {
    locals: Vec<(String, u32)>,
    depth: u32,
    captures: Vec<(String, VarRef)>,
    self_name: Option<String>,
}

struct Desugarer<'a> {
    scopes: Vec<FnScope>,
    globals: &'a HashMap<String, u32>,
    typing: &'a Typing,
    lambdas: Vec<Lambda>,
    /// Desugaring a definition from a translated file.
    translated: bool,
}

enum Resolved {
    Var(VarRef),
    Prim(Prim),
}

impl Desugarer<'_> {
    fn resolve_in(&mut self, level: usize, name: &str) -> Option<VarRef> {
        let sc = &self.scopes[level];
        if let Some((_, slot)) = sc.locals.iter().rev().find(|(n, _)| n == name) {
            return Some(VarRef::Local(*slot));
        }
        if sc.self_name.as_deref() == Some(name) {
            return Some(VarRef::SelfRef);
        }
        if let Some(i) = sc.captures.iter().position(|(n, _)| n == name) {
            return Some(VarRef::Capture(i as u32));
        }
        if level == 0 {
            return None;
        }
        let outer = self.resolve_in(level - 1, name)?;
        let sc = &mut self.scopes[level];
        sc.captures.push((name.to_string(), outer));
        Some(VarRef::Capture((sc.captures.len() - 1) as u32))
    }

    fn resolve(&mut self, name: &str) -> Option<Resolved> {
        if !self.scopes.is_empty()
            && let Some(r) = self.resolve_in(self.scopes.len() - 1, name)
        {
            return Some(Resolved::Var(r));
        }
        if let Some(&g) = self.globals.get(name) {
            return Some(Resolved::Var(VarRef::Global(g)));
        }
        prim::lookup_named_in(name, self.translated).map(|p| Resolved::Prim(p.prim))
    }

    /// Outside any function (a global's value), locals live in a frame
    /// of their own: open a pseudo-scope for them.
    fn scope(&mut self) -> &mut FnScope {
        if self.scopes.is_empty() {
            self.scopes.push(FnScope {
                locals: Vec::new(),
                depth: 0,
                captures: Vec::new(),
                self_name: None,
            });
        }
        let n = self.scopes.len() - 1;
        &mut self.scopes[n]
    }

    fn alloc_slot(&mut self) -> u32 {
        let sc = self.scope();
        let s = sc.depth;
        sc.depth += 1;
        s
    }

    fn mark(&mut self) -> (usize, u32) {
        let sc = self.scope();
        (sc.locals.len(), sc.depth)
    }

    fn reset(&mut self, m: (usize, u32)) {
        let sc = self.scope();
        sc.locals.truncate(m.0);
        sc.depth = m.1;
    }

    /// Binds the names of `p` to parts of the value `src`, appending the
    /// `let`s that do it to `lets`.
    fn bind_pattern(&mut self, p: &Pattern, src: Expr, lets: &mut Vec<(u32, Expr)>) -> DResult<()> {
        if stack::check().is_err() {
            return Err(DesugarError::TooDeep(p.span()));
        }
        match p {
            Pattern::Record { span, .. } => return Err(DesugarError::Record(*span)),
            Pattern::Var(id) => {
                let slot = match src {
                    Expr::Var(VarRef::Local(s), _) => s,
                    other => {
                        let s = self.alloc_slot();
                        lets.push((s, other));
                        s
                    }
                };
                self.scope().locals.push((id.name.clone(), slot));
            }
            Pattern::Wild(_) | Pattern::Unit(_) => {}
            Pattern::Annot(inner, _, _) => self.bind_pattern(inner, src, lets)?,
            Pattern::Tuple(ps, span) => {
                let slot = match src {
                    Expr::Var(VarRef::Local(s), _) => s,
                    other => {
                        let s = self.alloc_slot();
                        lets.push((s, other));
                        s
                    }
                };
                for (i, q) in ps.iter().enumerate() {
                    let proj =
                        Expr::Proj(Box::new(Expr::Var(VarRef::Local(slot), *span)), i as u32);
                    self.bind_pattern(q, proj, lets)?;
                }
            }
        }
        Ok(())
    }

    fn wrap(lets: Vec<(u32, Expr)>, mut body: Expr) -> Expr {
        for (slot, value) in lets.into_iter().rev() {
            body = Expr::Let {
                slot,
                value: Box::new(value),
                body: Box::new(body),
            };
        }
        body
    }

    /// `fun p1 p2 ... -> body` as one lambda of arity n (parameters in slots
    /// 0..n). `self_name` makes it recursive.
    fn lambdas_for(
        &mut self,
        params: &[Pattern],
        body: &ast::Expr,
        self_name: Option<String>,
        name: Option<String>,
        span: Span,
    ) -> DResult<Expr> {
        if stack::check().is_err() {
            return Err(DesugarError::TooDeep(span));
        }
        if params.is_empty() {
            return self.expr(body);
        }
        let arity = params.len() as u32;
        let name = name.or_else(|| self_name.clone());
        self.scopes.push(FnScope {
            locals: Vec::new(),
            depth: arity,
            captures: Vec::new(),
            self_name,
        });
        let result = (|| {
            let mut lets = Vec::new();
            for (i, p) in params.iter().enumerate() {
                self.bind_pattern(p, Expr::Var(VarRef::Local(i as u32), p.span()), &mut lets)?;
            }
            let inner = self.expr(body)?;
            Ok(Self::wrap(lets, inner))
        })();
        let scope = self.scopes.pop();
        let body = result?;
        let captures = scope
            .map(|s| s.captures.into_iter().map(|(_, r)| r).collect())
            .unwrap_or_default();
        self.lambdas.push(Lambda {
            name,
            arity,
            captures,
            body,
            span,
        });
        Ok(Expr::Lam(LamId((self.lambdas.len() - 1) as u32)))
    }

    fn sum_zero(&self, id: ast::NodeId) -> Expr {
        match self.typing.sum_types.get(&id) {
            Some(Type::Real) => Expr::Lit(Lit::Real(0.0)),
            _ => Expr::Lit(Lit::Int(0)),
        }
    }

    fn expr(&mut self, e: &ast::Expr) -> DResult<Expr> {
        if stack::check().is_err() {
            return Err(DesugarError::TooDeep(e.span));
        }
        let span = e.span;
        Ok(match &e.kind {
            ExprKind::Record(..) | ExprKind::Field(..) | ExprKind::Update(..) => {
                return Err(DesugarError::Record(span));
            }
            ExprKind::Var(name) => match self.resolve(name) {
                Some(Resolved::Var(r)) => Expr::Var(r, span),
                Some(Resolved::Prim(Prim::Sum)) => Expr::App(
                    Box::new(Expr::PrimRef(Prim::Sum)),
                    vec![self.sum_zero(e.id)],
                    span,
                ),
                // A constant: `pi` is its value; `Zero`, `emptyMap` and
                // `shapeMismatch` are evaluated.
                Some(Resolved::Prim(p)) if p.info().arity == 0 => match p.constant() {
                    Some(x) => Expr::Lit(Lit::Real(x)),
                    None => Expr::Prim(p, Vec::new(), span),
                },
                Some(Resolved::Prim(p)) => Expr::PrimRef(p),
                // The type checker rejects unknown names; keep going harmlessly.
                None => Expr::Lit(Lit::Unit),
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
            ExprKind::Tuple(es) => {
                Expr::Tuple(es.iter().map(|x| self.expr(x)).collect::<DResult<_>>()?)
            }
            ExprKind::Vector(es) => {
                Expr::Vector(es.iter().map(|x| self.expr(x)).collect::<DResult<_>>()?)
            }
            ExprKind::Lam(ps, body) => self.lambdas_for(ps, body, None, None, span)?,
            ExprKind::App(..) => self.application(e)?,
            // At run time a computation has already run where it was
            // evaluated (see `crate::eval::delta`): `p <- m` is `let p = m`.
            ExprKind::Let(p, v, body) | ExprKind::Bind(p, v, body) => {
                let value = self.expr(v)?;
                let m = self.mark();
                let mut lets = Vec::new();
                // Always give the whole value a slot of its own first.
                let slot = self.alloc_slot();
                lets.push((slot, value));
                self.bind_pattern(p, Expr::Var(VarRef::Local(slot), p.span()), &mut lets)?;
                let b = self.expr(body);
                self.reset(m);
                Self::wrap(lets, b?)
            }
            ExprKind::LetFun { rec, binding, body } => {
                let name = binding.name.name.clone();
                let value = if binding.params.is_empty() {
                    // `let rec f = fun x -> ...`: the lambda itself is recursive.
                    match &binding.body.kind {
                        ExprKind::Lam(ps, lam_body) if *rec => self.lambdas_for(
                            ps,
                            lam_body,
                            Some(name.clone()),
                            None,
                            binding.body.span,
                        )?,
                        _ => self.expr(&binding.body)?,
                    }
                } else {
                    let self_name = if *rec { Some(name.clone()) } else { None };
                    self.lambdas_for(
                        &binding.params,
                        &binding.body,
                        self_name,
                        Some(name.clone()),
                        span,
                    )?
                };
                let m = self.mark();
                let slot = self.alloc_slot();
                self.scope().locals.push((name, slot));
                let b = self.expr(body);
                self.reset(m);
                Expr::Let {
                    slot,
                    value: Box::new(value),
                    body: Box::new(b?),
                }
            }
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
                let m = self.mark();
                let slot = self.alloc_slot();
                let mut arms = Vec::new();
                for (p, body) in [left, right] {
                    let m2 = self.mark();
                    let mut lets = Vec::new();
                    self.bind_pattern(p, Expr::Var(VarRef::Local(slot), p.span()), &mut lets)?;
                    let b = self.expr(body);
                    self.reset(m2);
                    arms.push(Self::wrap(lets, b?));
                }
                self.reset(m);
                let right = arms.pop().unwrap_or(Expr::Lit(Lit::Unit));
                let left = arms.pop().unwrap_or(Expr::Lit(Lit::Unit));
                Expr::Case {
                    scrutinee: Box::new(s),
                    slot,
                    left: Box::new(left),
                    right: Box::new(right),
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
                Expr::Prim(p, vec![x, y], span)
            }
            ExprKind::Neg(a) => Expr::Prim(Prim::Neg, vec![self.expr(a)?], span),
            ExprKind::Index(v, i) => {
                Expr::Prim(Prim::Index, vec![self.expr(v)?, self.expr(i)?], span)
            }
            ExprKind::Annot(x, _) => self.expr(x)?,
            ExprKind::Trace(label, x) => Expr::Trace(label.clone(), Box::new(self.expr(x)?)),
            ExprKind::Deref(r) => Expr::Prim(Prim::Deref, vec![self.expr(r)?], span),
            ExprKind::RunDelta(first, m) => {
                Expr::RunDelta(Box::new(self.expr(first)?), Box::new(self.expr(m)?), span)
            }
            ExprKind::Poly(p, te) => {
                // Checked closed by the type checker.
                let t = crate::types::infer::poly_index_type(te).unwrap_or(Type::Unit);
                Expr::Poly(*p, t)
            }
        })
    }

    /// An application spine `f a1 ... an`; saturated primitive calls become [`Expr::Prim`].
    fn application(&mut self, e: &ast::Expr) -> DResult<Expr> {
        let mut args = Vec::new();
        let mut head = e;
        while let ExprKind::App(f, x) = &head.kind {
            args.push(&**x);
            head = f;
            if stack::check().is_err() {
                return Err(DesugarError::TooDeep(e.span));
            }
        }
        args.reverse();
        let prim = match &head.kind {
            ExprKind::Var(name) => match self.resolve(name) {
                Some(Resolved::Prim(p)) => Some(p),
                _ => None,
            },
            _ => None,
        };
        let mut core_args = Vec::with_capacity(args.len());
        for a in &args {
            core_args.push(self.expr(a)?);
        }
        let mut spans = args.iter().map(|a| head.span.to(a.span));
        let (mut f, rest) = match prim {
            Some(p) if p.info().arity > 0 && args.len() >= p.info().arity => {
                let arity = p.info().arity;
                let rest = core_args.split_off(arity);
                let span = spans.nth(arity - 1).unwrap_or(e.span);
                let call = match p {
                    Prim::Fst | Prim::Snd => {
                        let idx = if p == Prim::Fst { 0 } else { 1 };
                        Expr::Proj(
                            Box::new(core_args.pop().unwrap_or(Expr::Lit(Lit::Unit))),
                            idx,
                        )
                    }
                    Prim::Sum => {
                        let mut a = vec![self.sum_zero(head.id)];
                        a.extend(core_args);
                        Expr::Prim(p, a, span)
                    }
                    _ => Expr::Prim(p, core_args, span),
                };
                (call, rest)
            }
            _ => (self.expr(head)?, core_args),
        };
        if !rest.is_empty() {
            let span = spans.next_back().unwrap_or(e.span);
            f = Expr::App(Box::new(f), rest, span);
        }
        Ok(f)
    }
}
