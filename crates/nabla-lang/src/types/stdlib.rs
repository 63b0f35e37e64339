//! The standard library's vector functions (`append`, `slice`, `reverse`,
//! `filter`, `sort`, `argmax`, `argmin`, `maximum`, `minimum`, `linspace`,
//! `replicate`, `iota`), written in nabla: [`PRELUDE`].
//!
//! They are not primitives. Before type checking ([`crate::types::check_program`]
//! and [`crate::types::monomorphise`] both start here), every use of one of
//! these names that no definition or local binding of the program shadows
//! is replaced by a copy of its definition, as a `fun` of its parameters,
//! whose every node has the position of the use (for a call, of the call
//! with its arguments). So
//!
//! * there is one source of truth, and every back end, differentiation
//!   operator and translation handles the functions as it handles the
//!   `build`, indexing, `fold` and `let rec` they are made of — their
//!   derivatives flow exactly as through indexing;
//! * run-time errors point at the call in the user's program: a `slice`
//!   out of range or a `maximum` of an empty vector is reported by the
//!   internal primitive `prim'fail` ([`crate::prim::fail_message`]) at the
//!   call, the same on both back ends;
//! * each use is typed afresh, so the functions are polymorphic.

use super::TypeError;
use crate::stack;
use crate::syntax::ast::{Def, Expr, ExprKind, FunBinding, NodeId, Pattern, TypeExpr};
use crate::syntax::span::Span;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The definitions, in nabla.
pub const PRELUDE: &str = include_str!("stdlib.nabla");

/// The parsed definitions of [`PRELUDE`].
fn prelude() -> &'static [Def] {
    static DEFS: OnceLock<Vec<Def>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let (prog, errors) = crate::syntax::parser::parse_program(
            PRELUDE,
            0,
            &mut crate::syntax::parser::IdGen::new(),
        );
        assert!(errors.is_empty(), "the prelude parses: {errors:?}");
        prog.defs
    })
}

/// The names the standard library defines.
pub fn names() -> impl Iterator<Item = &'static str> {
    prelude().iter().map(|d| d.binding.name.name.as_str())
}

fn definition(name: &str) -> Option<&'static Def> {
    prelude().iter().find(|d| d.binding.name.name == name)
}

/// `defs` with every use of a standard-library function replaced by its
/// definition (see the module docs), or `None` if they use none.
pub(crate) fn expand(defs: &[Def]) -> Result<Option<Vec<Def>>, TypeError> {
    let mut max_id = 0;
    let mut uses = false;
    for d in defs {
        scan(&d.binding.body, &mut max_id, &mut uses)?;
    }
    if !uses {
        return Ok(None);
    }
    let mut x = Expander {
        globals: defs.iter().map(|d| d.binding.name.name.clone()).collect(),
        scope: HashMap::new(),
        next_id: max_id + 1,
        first_fresh: max_id + 1,
    };
    let mut out = defs.to_vec();
    for d in &mut out {
        let b = &mut d.binding;
        x.bind_all(&b.params, 1);
        x.expr(&mut b.body)?;
        x.bind_all(&b.params, -1);
    }
    Ok(Some(out))
}

/// The largest node id of `e`, and whether it names a library function.
fn scan(e: &Expr, max_id: &mut u32, uses: &mut bool) -> Result<(), TypeError> {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        *max_id = (*max_id).max(e.id.0);
        if let ExprKind::Var(n) = &e.kind
            && definition(n).is_some()
        {
            *uses = true;
        }
        stack.extend(e.kind.children());
    }
    Ok(())
}

struct Expander {
    /// The program's top-level names (they shadow the library's).
    globals: std::collections::HashSet<String>,
    /// Local names in scope, with how many bindings of each.
    scope: HashMap<String, u32>,
    next_id: u32,
    /// Nodes from here on are expansions (already expanded).
    first_fresh: u32,
}

impl Expander {
    fn bind(&mut self, p: &Pattern, by: i32) {
        super::infer::pattern_names(p, &mut |n| {
            let c = self.scope.entry(n.to_string()).or_default();
            *c = c.saturating_add_signed(by);
        });
    }

    fn bind_all(&mut self, ps: &[Pattern], by: i32) {
        ps.iter().for_each(|p| self.bind(p, by));
    }

    fn bind_name(&mut self, n: &str, by: i32) {
        let c = self.scope.entry(n.to_string()).or_default();
        *c = c.saturating_add_signed(by);
    }

    /// The library's definition `name` refers to here, if it does.
    fn library(&self, name: &str) -> Option<&'static Def> {
        if self.globals.contains(name) || self.scope.get(name).is_some_and(|&c| c > 0) {
            return None;
        }
        definition(name)
    }

    fn expr(&mut self, e: &mut Expr) -> Result<(), TypeError> {
        if stack::check().is_err() {
            return Err(super::infer::too_deep(e.span));
        }
        if e.id.0 >= self.first_fresh {
            return Ok(());
        }
        match &mut e.kind {
            ExprKind::Var(n) => {
                if let Some(def) = self.library(n) {
                    *e = self.expansion(def, e.span)?;
                }
            }
            ExprKind::App(..) => {
                // A call: the expansion gets the position of the call with
                // as many arguments as the function takes.
                let mut spans = Vec::new();
                let mut head = &*e;
                while let ExprKind::App(f, _) = &head.kind {
                    spans.push(head.span);
                    head = f;
                }
                if let ExprKind::Var(n) = &head.kind
                    && let Some(def) = self.library(n)
                {
                    let k = def.binding.params.len().clamp(1, spans.len());
                    let span = spans[spans.len() - k];
                    let new = self.expansion(def, span)?;
                    replace_head(e, new);
                }
                let ExprKind::App(f, x) = &mut e.kind else {
                    return Ok(());
                };
                self.expr(f)?;
                self.expr(x)?;
            }
            ExprKind::Lam(ps, b) => {
                self.bind_all(ps, 1);
                let r = self.expr(b);
                self.bind_all(ps, -1);
                r?;
            }
            ExprKind::Let(p, a, b) | ExprKind::Bind(p, a, b) => {
                self.expr(a)?;
                self.bind(p, 1);
                let r = self.expr(b);
                self.bind(p, -1);
                r?;
            }
            ExprKind::LetFun { rec, binding, body } => {
                let name = binding.name.name.clone();
                if *rec {
                    self.bind_name(&name, 1);
                }
                self.bind_all(&binding.params, 1);
                let r = self.expr(&mut binding.body);
                self.bind_all(&binding.params, -1);
                if *rec {
                    self.bind_name(&name, -1);
                }
                r?;
                self.bind_name(&name, 1);
                let r = self.expr(body);
                self.bind_name(&name, -1);
                r?;
            }
            ExprKind::Match {
                scrutinee,
                left,
                right,
            } => {
                self.expr(scrutinee)?;
                for (p, arm) in [left, right] {
                    self.bind(p, 1);
                    let r = self.expr(arm);
                    self.bind(p, -1);
                    r?;
                }
            }
            ExprKind::Int(_)
            | ExprKind::Real(_)
            | ExprKind::Bool(_)
            | ExprKind::Unit
            | ExprKind::Poly(..) => {}
            ExprKind::Tuple(es) | ExprKind::Vector(es) => {
                for c in es {
                    self.expr(c)?;
                }
            }
            ExprKind::Inl(b)
            | ExprKind::Inr(b)
            | ExprKind::Neg(b)
            | ExprKind::Deref(b)
            | ExprKind::Trace(_, b)
            | ExprKind::Annot(b, _) => self.expr(b)?,
            ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) | ExprKind::RunDelta(a, b) => {
                self.expr(a)?;
                self.expr(b)?;
            }
            ExprKind::If(a, b, c) => {
                self.expr(a)?;
                self.expr(b)?;
                self.expr(c)?;
            }
            ExprKind::Record(..) | ExprKind::Field(..) | ExprKind::Update(..) => {
                for c in e.kind.children_mut() {
                    self.expr(c)?;
                }
            }
        }
        Ok(())
    }

    /// `def`'s definition as a `fun`, its own uses of the library expanded,
    /// with fresh node ids and every position `span`.
    fn expansion(&mut self, def: &Def, span: Span) -> Result<Expr, TypeError> {
        let b = &def.binding;
        let mut e = Expr {
            kind: ExprKind::Lam(b.params.clone(), Box::new(b.body.clone())),
            span,
            id: NodeId(0),
        };
        let mut inner = Expander {
            globals: Default::default(),
            scope: HashMap::new(),
            next_id: self.next_id,
            first_fresh: u32::MAX,
        };
        inner.expr(&mut e)?;
        self.next_id = inner.next_id;
        self.relocate(&mut e, span);
        Ok(e)
    }

    /// Gives every node of `e` a fresh id and the position `span`.
    fn relocate(&mut self, e: &mut Expr, span: Span) {
        relocate(e, span, &mut self.next_id);
    }
}

/// The largest node id in `e`.
pub(crate) fn max_node_id(e: &Expr, max_id: &mut u32) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        *max_id = (*max_id).max(e.id.0);
        stack.extend(e.kind.children());
    }
}

/// Gives every node of `e` a fresh id (counted from `next_id`) and the
/// position `span`.
pub(crate) fn relocate(e: &mut Expr, span: Span, next_id: &mut u32) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        e.span = span;
        e.id = NodeId(*next_id);
        *next_id += 1;
        match &mut e.kind {
            ExprKind::Lam(ps, _) => ps.iter_mut().for_each(|p| pattern_at(p, span, next_id)),
            ExprKind::Let(p, _, _) | ExprKind::Bind(p, _, _) => pattern_at(p, span, next_id),
            ExprKind::LetFun { binding, .. } => binding_at(binding, span, next_id),
            ExprKind::Match { left, right, .. } => {
                pattern_at(&mut left.0, span, next_id);
                pattern_at(&mut right.0, span, next_id);
            }
            ExprKind::Annot(_, t) | ExprKind::Poly(_, t) => type_at(t, span),
            _ => {}
        }
        stack.extend(e.kind.children_mut());
    }
}

/// Replaces the function at the head of an application spine.
fn replace_head(e: &mut Expr, new: Expr) {
    match &mut e.kind {
        ExprKind::App(f, _) => replace_head(f, new),
        _ => *e = new,
    }
}

fn binding_at(b: &mut FunBinding, span: Span, next_id: &mut u32) {
    b.name.span = span;
    b.params
        .iter_mut()
        .for_each(|p| pattern_at(p, span, next_id));
    if let Some(t) = &mut b.ret {
        type_at(t, span);
    }
}

/// Gives `p` the position `span`, and its record patterns fresh ids.
fn pattern_at(p: &mut Pattern, span: Span, next_id: &mut u32) {
    match p {
        Pattern::Var(i) => i.span = span,
        Pattern::Wild(s) | Pattern::Unit(s) => *s = span,
        Pattern::Tuple(ps, s) => {
            *s = span;
            ps.iter_mut().for_each(|p| pattern_at(p, span, next_id));
        }
        Pattern::Annot(p, t, s) => {
            *s = span;
            pattern_at(p, span, next_id);
            type_at(t, span);
        }
        Pattern::Record {
            fields,
            span: s,
            id,
            ..
        } => {
            *s = span;
            *id = NodeId(*next_id);
            *next_id += 1;
            for (name, p) in fields {
                name.span = span;
                pattern_at(p, span, next_id);
            }
        }
    }
}

fn type_at(t: &mut TypeExpr, span: Span) {
    match t {
        TypeExpr::Name(i) => i.span = span,
        TypeExpr::Unit(s) => *s = span,
        TypeExpr::Tuple(ts, s) | TypeExpr::Con(_, ts, s) => {
            *s = span;
            ts.iter_mut().for_each(|t| type_at(t, span));
        }
        TypeExpr::Sum(a, b, s) | TypeExpr::Fun(a, b, s) => {
            *s = span;
            type_at(a, span);
            type_at(b, span);
        }
        TypeExpr::Vec(a, s) => {
            *s = span;
            type_at(a, span);
        }
        TypeExpr::Record(fields, s) => {
            *s = span;
            for (name, t) in fields {
                name.span = span;
                type_at(t, span);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_parses_and_names_only_builtins_through_the_prefix() {
        assert!(names().count() >= 12);
        for n in names() {
            assert!(crate::prim::lookup_named(n).is_none(), "{n} is a primitive");
        }
    }
}
