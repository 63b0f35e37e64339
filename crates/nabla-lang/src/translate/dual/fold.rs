//! Folding of the code compiled differentiation writes, bit for bit.
//!
//! The expander writes every level's arithmetic generically: the table's
//! partial of `x + y` is the literal 1, the structural-zero test of a
//! literal is a comparison of two literals, a constant tangent is a pair of
//! literal zeros bound to a local. Cranelift does not fold float comparisons
//! or products with 1, so left alone each `+` at a forward level costs a
//! dozen compares, products and branches (`select` of floats is a branch on
//! x86-64). This pass folds what is decided when compiling, with rewrites
//! that give the same bits on every input (NaN payloads aside), so native
//! derivatives still agree with the interpreter's exactly:
//!
//! - operations and comparisons of literals (IEEE arithmetic, as the code
//!   generator's instructions; no library function);
//! - `1 · x` → `x`;
//! - `chain(c, d)` for a literal partial `c` (`nabla::Number::chain`: 0 if
//!   either factor is 0, else the product): 0 for `c = 0`; `d + 0` for
//!   `c = 1` (`+ 0` turns −0 into +0 and keeps every other value); `0 − d`
//!   for `c = −1`; `c·d + 0` for a finite `|c| > 1` (the product of a
//!   non-zero `d` cannot underflow to 0 then);
//! - the chosen arm of a `select`/`if` whose condition is a literal, and of
//!   a `select` whose arms are the same;
//! - a component of a tuple being built;
//! - locals bound to literals (or tuples of them), substituted into their
//!   scope (the binding stays: a closure made there may capture it).
//!
//! An expression is dropped only if evaluating it has no effect and cannot
//! fail ([`droppable`]).

use super::{prim, real_lit, unit};
use crate::core::Lit;
use crate::core::typed::{Expr, ExprKind, Local, Pat, Span};
use crate::prim::Prim;
use crate::types::Type;

/// Folds `e` in place.
pub(super) fn fold(e: &mut Expr) {
    // Deeply nested code is left as it is rather than risk the stack.
    if crate::stack::check().is_err() {
        return;
    }
    if let ExprKind::Let(p, v, body) = &mut e.kind {
        fold(v);
        if let Pat::Local(t) = p
            && is_constant(v)
        {
            substitute(body, *t, v);
        }
        fold(body);
        return;
    }
    e.for_each_child_mut(fold);
    if let Some(folded) = rewrite(e) {
        *e = folded;
    }
}

/// One rewrite at the root of `e` (its children already folded).
fn rewrite(e: &mut Expr) -> Option<Expr> {
    let span = e.span;
    match &mut e.kind {
        ExprKind::Select(c, a, b) => {
            let chosen = match c.kind {
                ExprKind::Lit(Lit::Bool(true)) if droppable(b) => a,
                ExprKind::Lit(Lit::Bool(false)) if droppable(a) => b,
                _ if same(a, b) && droppable(c) && droppable(b) => a,
                _ => return None,
            };
            Some(take(chosen))
        }
        ExprKind::If(c, a, b) => match c.kind {
            ExprKind::Lit(Lit::Bool(true)) => Some(take(a)),
            ExprKind::Lit(Lit::Bool(false)) => Some(take(b)),
            _ => None,
        },
        ExprKind::Proj(t, i) => {
            let ExprKind::Tuple(xs) = &mut t.kind else {
                return None;
            };
            let i = *i as usize;
            let others = xs.iter().enumerate().filter(|&(j, _)| j != i);
            if !others.clone().all(|(_, x)| droppable(x)) {
                return None;
            }
            Some(take(&mut xs[i]))
        }
        ExprKind::Prim(p, args) => {
            let p = *p;
            if let Some(lit) = evaluate(p, args) {
                return Some(Expr {
                    kind: ExprKind::Lit(lit),
                    ty: e.ty.clone(),
                    span,
                });
            }
            match (p, &mut args[..]) {
                (Prim::Mul, [a, b]) if a.ty == Type::Real => {
                    if real(a) == Some(1.0) {
                        Some(take(b))
                    } else if real(b) == Some(1.0) {
                        Some(take(a))
                    } else {
                        None
                    }
                }
                // `+ 0` is idempotent.
                (Prim::Add, [a, b]) if is_plus_zero(b) => match &mut a.kind {
                    ExprKind::Prim(Prim::Add, inner) if is_plus_zero(&inner[1]) => Some(take(a)),
                    _ => None,
                },
                (Prim::Chain, [a, b]) => {
                    let (c, d) = match (real(a), real(b)) {
                        (Some(c), _) => (c, b),
                        (_, Some(c)) => (c, a),
                        _ => return None,
                    };
                    let zero = || real_lit(0.0, span);
                    if c == 0.0 {
                        droppable(d).then(zero)
                    } else if c == 1.0 {
                        Some(arith(Prim::Add, take(d), zero()))
                    } else if c == -1.0 {
                        Some(arith(Prim::Sub, zero(), take(d)))
                    } else if c.is_finite() && c.abs() > 1.0 {
                        let product = arith(Prim::Mul, real_lit(c, span), take(d));
                        Some(arith(Prim::Add, product, zero()))
                    } else {
                        None
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The value of `p` on literal operands, where the code generator computes
/// it with one IEEE instruction (so the bits are the same).
fn evaluate(p: Prim, args: &[Expr]) -> Option<Lit> {
    let reals: Option<Vec<f64>> = args.iter().map(real).collect();
    match (p, reals?.as_slice()) {
        (Prim::Add, &[x, y]) => Some(Lit::Real(x + y)),
        (Prim::Sub, &[x, y]) => Some(Lit::Real(x - y)),
        (Prim::Mul, &[x, y]) => Some(Lit::Real(x * y)),
        (Prim::Div, &[x, y]) => Some(Lit::Real(x / y)),
        (Prim::Neg, &[x]) => Some(Lit::Real(-x)),
        (Prim::Chain, &[x, y]) => Some(Lit::Real(if x == 0.0 || y == 0.0 { 0.0 } else { x * y })),
        (Prim::Eq, &[x, y]) => Some(Lit::Bool(x == y)),
        (Prim::Ne, &[x, y]) => Some(Lit::Bool(x != y)),
        (Prim::Lt, &[x, y]) => Some(Lit::Bool(x < y)),
        (Prim::Le, &[x, y]) => Some(Lit::Bool(x <= y)),
        (Prim::Gt, &[x, y]) => Some(Lit::Bool(x > y)),
        (Prim::Ge, &[x, y]) => Some(Lit::Bool(x >= y)),
        _ => None,
    }
}

/// The real literal `e` is, if it is one.
fn real(e: &Expr) -> Option<f64> {
    match e.kind {
        ExprKind::Lit(Lit::Real(x)) => Some(x),
        _ => None,
    }
}

/// True for the literal +0.
fn is_plus_zero(e: &Expr) -> bool {
    real(e).is_some_and(|x| x.to_bits() == 0)
}

/// A literal, or a tuple of them: bound to a local, it is substituted.
fn is_constant(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Lit(_) => true,
        ExprKind::Tuple(xs) => xs.iter().all(is_constant),
        _ => false,
    }
}

/// `e` with every use of `t` in scope replaced by `v`.
fn substitute(e: &mut Expr, t: Local, v: &Expr) {
    if crate::stack::check().is_err() {
        return;
    }
    match &mut e.kind {
        ExprKind::Local(l) if *l == t => *e = v.clone(),
        ExprKind::Let(p, x, body) => {
            substitute(x, t, v);
            if !binds(p, t) {
                substitute(body, t, v);
            }
        }
        ExprKind::Case {
            scrutinee,
            left,
            right,
        } => {
            substitute(scrutinee, t, v);
            for (p, arm) in [left, right] {
                if !binds(p, t) {
                    substitute(arm, t, v);
                }
            }
        }
        _ => e.for_each_child_mut(|c| substitute(c, t, v)),
    }
}

/// True if `p` binds `t` (so `t` below it is another variable).
fn binds(p: &Pat, t: Local) -> bool {
    let mut found = false;
    p.for_each_local(&mut |l| found |= l == t);
    found
}

/// True if evaluating `e` has no effect and cannot fail: it may be left
/// out when its value is not needed.
fn droppable(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Lit(_) | ExprKind::Local(_) => true,
        ExprKind::Proj(x, _) => droppable(x),
        ExprKind::Tuple(xs) => xs.iter().all(droppable),
        ExprKind::Select(c, a, b) => droppable(c) && droppable(a) && droppable(b),
        ExprKind::Prim(p, args) => {
            let total = match p {
                // On reals: IEEE arithmetic, never an error.
                Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Neg | Prim::Chain => {
                    args.iter().all(|a| a.ty == Type::Real)
                }
                Prim::Eq | Prim::Ne | Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Not => true,
                _ => false,
            };
            total && args.iter().all(droppable)
        }
        _ => false,
    }
}

/// True if `a` and `b` are the same expression of locals, literals (bit for
/// bit: 0 and −0 differ) and arithmetic, so they evaluate to the same value.
fn same(a: &Expr, b: &Expr) -> bool {
    match (&a.kind, &b.kind) {
        (ExprKind::Lit(Lit::Real(x)), ExprKind::Lit(Lit::Real(y))) => x.to_bits() == y.to_bits(),
        (ExprKind::Lit(x), ExprKind::Lit(y)) => x == y,
        (ExprKind::Local(x), ExprKind::Local(y)) => x == y,
        (ExprKind::Proj(x, i), ExprKind::Proj(y, j)) => i == j && same(x, y),
        (ExprKind::Tuple(xs), ExprKind::Tuple(ys))
        | (ExprKind::Prim(_, xs), ExprKind::Prim(_, ys)) => {
            let ops_match = match (&a.kind, &b.kind) {
                (ExprKind::Prim(p, _), ExprKind::Prim(q, _)) => p == q,
                _ => true,
            };
            ops_match && xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        _ => false,
    }
}

/// `x op y` on reals.
fn arith(p: Prim, x: Expr, y: Expr) -> Expr {
    let span = x.span;
    prim(p, vec![x, y], Type::Real, span)
}

/// `e`, moved out (a placeholder left in its place).
fn take(e: &mut Expr) -> Expr {
    std::mem::replace(e, unit(Span::default()))
}
