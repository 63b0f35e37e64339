//! `custom_vjp rule` in the typed IR: made into a `custom_jvp` whose tangent
//! map is built from the pullback, as the interpreter does it
//! (`crate::ad::custom`, which this must follow step for step, for the same
//! numbers and the same `trace` output): the function is `fun x -> fst (rule
//! x)`, and the tangent map at `x` along `dx` applies `rule x = (y, pb)`,
//! then, for each real leaf i of `y` in leaf order, the pullback to the
//! i-th basis cotangent, and sums `chainMul gⱼ dxⱼ` over the real leaves of
//! the result `g` (checked to be shaped like the point) from 0, left to right.
//! `crate::translate::dual` then compiles `custom_jvp` at every level.

use super::{Lowerer, R, expr, internal, wrap_lets};
use crate::core::Lit;
use crate::core::typed::{Expr, ExprKind, Pat};
use crate::prim::{Prim, Role};
use crate::stack;
use crate::syntax::span::Span;
use crate::types::Type;

impl<'a> Lowerer<'a> {
    /// `custom_vjp rule x` (`rule` a closure of a known function, `x` a
    /// local or literal) as `custom_jvp f tangent x`.
    pub(super) fn custom_vjp(&mut self, rule: Expr, x: Expr, ty: Type, span: Span) -> R<Expr> {
        let s = x.ty.clone();
        let (Type::Fun(_, q_ty), t) = (&rule.ty, ty.clone()) else {
            return Err(internal("`custom_vjp` of a non-function", span));
        };
        let Type::Tuple(parts) = &**q_ty else {
            return Err(internal("a `custom_vjp` rule of another type", span));
        };
        let (q_ty, pb_ty) = ((**q_ty).clone(), parts[1].clone());
        let apply = |f: &Expr, a: Expr, ty: &Type| {
            expr(
                ExprKind::Apply(Box::new(f.clone()), Box::new(a)),
                ty.clone(),
                span,
            )
        };
        let value = {
            let rule = rule.clone();
            let q_ty = q_ty.clone();
            self.lambda("x", s.clone(), t.clone(), span, |_, xe| {
                let q = apply(&rule, xe, &q_ty);
                Ok(expr(ExprKind::Proj(Box::new(q), 0), t.clone(), span))
            })?
        };
        // The tangent map, a known function of two parameters.
        let f = self.new_fun(format!("{}.custom_tangent", self.current_name()), span);
        let saved = self.current.replace(f);
        let (xp, dxp) = (
            self.new_local("x", s.clone()),
            self.new_local("dx", s.clone()),
        );
        let body = (|| {
            let xe = expr(ExprKind::Local(xp), s.clone(), span);
            let dxe = expr(ExprKind::Local(dxp), s.clone(), span);
            let q = self.let_in("q", apply(&rule, xe, &q_ty), span)?;
            let proj =
                |i, ty: &Type| expr(ExprKind::Proj(Box::new(q.1.clone()), i), ty.clone(), span);
            let y = self.let_in("y", proj(0, &t), span)?;
            let pb = self.let_in("pb", proj(1, &pb_ty), span)?;
            let (y_use, pb_use) = (y.1.clone(), pb.1.clone());
            let rows = self.walk_reals(
                y_use.clone(),
                super::int_lit(0, span),
                &mut Vec::new(),
                &Type::Real,
                span,
                &mut |s1, i, _| {
                    let ct = s1.one_hot(y_use.clone(), i, span)?;
                    let g = s1.let_in("g", apply(&pb_use, ct, &s), span)?;
                    let zero = expr(ExprKind::Lit(Lit::Real(0.0)), Type::Real, span);
                    let dot = s1.dot(zero, g.1.clone(), dxe.clone(), span)?;
                    Ok(wrap_lets(vec![(g.0, g.2)], dot))
                },
            )?;
            Ok(wrap_lets(vec![(q.0, q.2), (y.0, y.2), (pb.0, pb.2)], rows))
        })();
        self.current = saved;
        let fun = &mut self.prog.funs[f.0 as usize];
        fun.params = vec![(Pat::Local(xp), s.clone()), (Pat::Local(dxp), s.clone())];
        fun.ret = t.clone();
        fun.body = body?;
        let tangent_ty = Type::fun(s.clone(), Type::fun(s.clone(), t.clone()));
        let tangent = expr(ExprKind::Closure(f), tangent_ty, span);
        Ok(expr(
            ExprKind::Prim(Prim::CustomJvp, vec![value, tangent, x]),
            ty,
            span,
        ))
    }

    /// `acc` plus Σⱼ `chainMul gⱼ dxⱼ` over the real leaves of `g` and `dx`
    /// (locals or literals of one first-order type), left to right; `g` is
    /// checked to be shaped like `dx` (the point's shape) on the way, where
    /// the interpreter's walk checks it, with its error.
    fn dot(&mut self, acc: Expr, g: Expr, dx: Expr, span: Span) -> R<Expr> {
        stack::check().map_err(|_| internal("a type nested too deep", span))?;
        let real = |kind| expr(kind, Type::Real, span);
        match g.ty.clone() {
            Type::Real => {
                let term = real(ExprKind::Prim(Prim::Chain, vec![g, dx]));
                Ok(real(ExprKind::Prim(Prim::Add, vec![acc, term])))
            }
            Type::Int | Type::Bool | Type::Unit => Ok(acc),
            Type::Tuple(ts) => {
                let mut lets = Vec::new();
                let mut acc = acc;
                for (k, t) in ts.iter().enumerate() {
                    let part = |v: &Expr| {
                        expr(
                            ExprKind::Proj(Box::new(v.clone()), k as u32),
                            t.clone(),
                            span,
                        )
                    };
                    let (gk, dk) = (
                        self.temp(part(&g), &mut lets),
                        self.temp(part(&dx), &mut lets),
                    );
                    let next = self.dot(acc, gk, dk, span)?;
                    acc = self.temp(next, &mut lets);
                }
                Ok(wrap_lets(lets, acc))
            }
            Type::Sum(a, b) => {
                let mut lets = Vec::new();
                let acc = self.temp(acc, &mut lets);
                let check = self.shape_check(&dx, &g, span);
                // After the check the constructors agree: the arms where
                // they differ are never taken.
                let arm = |s: &mut Self, ty: &Type, left: bool| -> R<(Pat, Box<Expr>)> {
                    let (gl, dl) = (s.new_local("g", ty.clone()), s.new_local("d", ty.clone()));
                    let ge = expr(ExprKind::Local(gl), ty.clone(), span);
                    let de = expr(ExprKind::Local(dl), ty.clone(), span);
                    let inner = s.dot(acc.clone(), ge, de, span)?;
                    let (hit, miss) = (
                        (Pat::Local(dl), Box::new(inner)),
                        (Pat::Wild, Box::new(acc.clone())),
                    );
                    let (left_arm, right_arm) = if left { (hit, miss) } else { (miss, hit) };
                    let on_dx = expr(
                        ExprKind::Case {
                            scrutinee: Box::new(dx.clone()),
                            left: left_arm,
                            right: right_arm,
                        },
                        Type::Real,
                        span,
                    );
                    Ok((Pat::Local(gl), Box::new(on_dx)))
                };
                let left = arm(self, &a, true)?;
                let right = arm(self, &b, false)?;
                let case = real(ExprKind::Case {
                    scrutinee: Box::new(g),
                    left,
                    right,
                });
                let checked = real(ExprKind::Let(Pat::Wild, Box::new(check), Box::new(case)));
                Ok(wrap_lets(lets, checked))
            }
            Type::Vec(elem) => {
                // fold (fun acc (gᵢ, dxᵢ) -> dot acc gᵢ dxᵢ) acc (zip g dx),
                // after the lengths are checked.
                let check = self.shape_check(&dx, &g, span);
                let pair_ty = Type::Tuple(vec![(*elem).clone(), (*elem).clone()]);
                let f = self.new_fun(format!("{}.dot", self.current_name()), span);
                let saved = self.current.replace(f);
                let a = self.new_local("acc", Type::Real);
                let pair = self.new_local("pair", pair_ty.clone());
                let (gl, dl) = (
                    self.new_local("g", (*elem).clone()),
                    self.new_local("d", (*elem).clone()),
                );
                let local = |l, ty: &Type| expr(ExprKind::Local(l), ty.clone(), span);
                let body = self.dot(
                    local(a, &Type::Real),
                    local(gl, &elem),
                    local(dl, &elem),
                    span,
                );
                self.current = saved;
                let body = real(ExprKind::Let(
                    Pat::Tuple(vec![Pat::Local(gl), Pat::Local(dl)]),
                    Box::new(local(pair, &pair_ty)),
                    Box::new(body?),
                ));
                let fun = &mut self.prog.funs[f.0 as usize];
                fun.params = vec![
                    (Pat::Local(a), Type::Real),
                    (Pat::Local(pair), pair_ty.clone()),
                ];
                fun.ret = Type::Real;
                fun.body = body;
                let f_ty = Type::fun(Type::Real, Type::fun(pair_ty.clone(), Type::Real));
                let zipped = expr(
                    ExprKind::Prim(Prim::Zip, vec![g, dx]),
                    Type::Vec(Box::new(pair_ty)),
                    span,
                );
                let closure = expr(ExprKind::Closure(f), f_ty, span);
                let fold = real(ExprKind::Prim(Prim::Fold, vec![closure, acc, zipped]));
                Ok(real(ExprKind::Let(
                    Pat::Wild,
                    Box::new(check),
                    Box::new(fold),
                )))
            }
            _ => Err(internal(
                "a custom rule at a type that is not first-order",
                span,
            )),
        }
    }

    /// The run-time check that the pullback's result `g` has the point's
    /// (`dx`'s) vector length or sum constructor at the top.
    fn shape_check(&self, dx: &Expr, g: &Expr, span: Span) -> Expr {
        expr(
            ExprKind::TangentShape(
                Box::new(dx.clone()),
                Box::new(g.clone()),
                Role::CustomCotangent,
            ),
            Type::Unit,
            span,
        )
    }
}
