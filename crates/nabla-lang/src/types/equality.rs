//! Structural `==` and `!=`: on tuples, records, sums, vectors and `()` (and on
//! any type made of these, Int, Real and Bool; never on functions, which
//! the checker's [`Kind::Eq`](super::Kind::Eq) refuses).
//!
//! After inference, every comparison whose operands have such a type is
//! replaced by code that compares them component by component with the
//! scalar `==` (elements of vectors in order, stopping at the first
//! difference), written as nabla source, parsed, and given the position of
//! the comparison. The program is then checked again. So every back end,
//! differentiation operator and translation sees only scalar comparisons,
//! which see primals under differentiation. Records compare field by
//! field (before they are erased to tuples, `crate::core::records`).

use super::{Type, TypeError};
use crate::stack;
use crate::syntax::ast::{BinOp, Def, Expr, ExprKind, NodeId};
use crate::syntax::parser::{IdGen, parse_expression};
use crate::syntax::span::Span;
use std::collections::HashMap;

/// True if comparing two values of type `t` needs more than the scalar `==`.
fn compound(t: &Type) -> bool {
    matches!(
        t,
        Type::Unit | Type::Tuple(_) | Type::Sum(..) | Type::Vec(_) | Type::Record(..)
    )
}

/// `defs` with every `==`/`!=` on a compound type (by `operand_types`, the
/// type of each operator's operands) expanded, or `None` if there is none.
pub(crate) fn expand(
    defs: &[Def],
    operand_types: &HashMap<NodeId, Type>,
) -> Result<Option<Vec<Def>>, TypeError> {
    let needed = operand_types.values().any(compound);
    if !needed {
        return Ok(None);
    }
    let mut max_id = 0;
    for d in defs {
        super::stdlib::max_node_id(&d.binding.body, &mut max_id);
    }
    let mut x = Expander {
        operand_types,
        next_id: max_id + 1,
        changed: false,
    };
    let mut out = defs.to_vec();
    for d in &mut out {
        x.expr(&mut d.binding.body)?;
    }
    Ok(x.changed.then_some(out))
}

struct Expander<'a> {
    operand_types: &'a HashMap<NodeId, Type>,
    next_id: u32,
    changed: bool,
}

impl Expander<'_> {
    fn expr(&mut self, e: &mut Expr) -> Result<(), TypeError> {
        if stack::check().is_err() {
            return Err(super::infer::too_deep(e.span));
        }
        let mut result = Ok(());
        for c in e.kind.children_mut() {
            if result.is_ok() {
                result = self.expr(c);
            }
        }
        result?;
        let ExprKind::Binary(op @ (BinOp::Eq | BinOp::Ne), _, _) = &e.kind else {
            return Ok(());
        };
        let op = *op;
        let Some(t) = self.operand_types.get(&e.id).filter(|t| compound(t)) else {
            return Ok(());
        };
        let mut fresh = 0;
        let body = compare(t, "eq'x", "eq'y", &mut fresh);
        let body = if op == BinOp::Ne {
            format!("prim'not ({body})")
        } else {
            body
        };
        let text = format!("fun eq'x eq'y -> {body}");
        let lam = parse_expression(&text, 0, &mut IdGen::new())
            .unwrap_or_else(|errs| panic!("structural equality parses: {errs:?}\n{text}"));
        let span = e.span;
        let mut lam = lam;
        self.relocate(&mut lam, span);
        let ExprKind::Binary(_, a, b) = std::mem::replace(&mut e.kind, ExprKind::Unit) else {
            return Ok(());
        };
        let app1 = Expr {
            kind: ExprKind::App(Box::new(lam), a),
            span,
            id: self.fresh(),
        };
        e.kind = ExprKind::App(Box::new(app1), b);
        self.changed = true;
        Ok(())
    }

    fn fresh(&mut self) -> NodeId {
        let id = NodeId(self.next_id);
        self.next_id += 1;
        id
    }

    fn relocate(&mut self, e: &mut Expr, span: Span) {
        let mut next = self.next_id;
        super::stdlib::relocate(e, span, &mut next);
        self.next_id = next;
    }
}

/// nabla source that is `true` when `x` and `y` (names or index
/// expressions, of type `t`) are equal.
fn compare(t: &Type, x: &str, y: &str, fresh: &mut u32) -> String {
    let mut name = |s: &str| {
        *fresh += 1;
        format!("eq'{s}{fresh}")
    };
    match t {
        Type::Unit => "true".into(),
        Type::Tuple(ts) => {
            let xs: Vec<String> = ts.iter().map(|_| name("a")).collect();
            let ys: Vec<String> = ts.iter().map(|_| name("b")).collect();
            let parts: Vec<String> = ts
                .iter()
                .zip(xs.iter().zip(&ys))
                .map(|(t, (a, b))| compare(t, a, b, fresh))
                .collect();
            format!(
                "(let ({}) = {x} in let ({}) = {y} in {})",
                xs.join(", "),
                ys.join(", "),
                parts.join(" && ")
            )
        }
        Type::Sum(l, r) => {
            let (a1, b1, a2, b2) = (name("l"), name("l"), name("r"), name("r"));
            let el = compare(l, &a1, &b1, fresh);
            let er = compare(r, &a2, &b2, fresh);
            format!(
                "(match {x} with \
                 | inl {a1} -> (match {y} with | inl {b1} -> {el} | inr _ -> false) \
                 | inr {a2} -> (match {y} with | inl _ -> false | inr {b2} -> {er}))"
            )
        }
        Type::Vec(elem) => {
            let (u, v, n, go, i) = (name("u"), name("v"), name("n"), name("go"), name("i"));
            let ee = compare(elem, &format!("{u}[{i}]"), &format!("{v}[{i}]"), fresh);
            format!(
                "(let {u} = {x} in let {v} = {y} in let {n} = prim'size {u} in \
                 {n} == prim'size {v} && \
                 (let rec {go} {i} = {i} >= {n} || ({ee} && {go} ({i} + 1)) in {go} 0))"
            )
        }
        // Field by field, in name order.
        Type::Record(names, ts) => {
            let parts: Vec<String> = names
                .iter()
                .zip(ts)
                .map(|(f, t)| compare(t, &format!("({x}).{f}"), &format!("({y}).{f}"), fresh))
                .collect();
            format!("({})", parts.join(" && "))
        }
        // Int, Real, Bool (and a type nothing decided): the scalar `==`.
        _ => format!("({x} == {y})"),
    }
}
