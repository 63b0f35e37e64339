//! `custom_jvp f tangent x` at every level (a `custom_vjp` arrives made into
//! one by `core::lower_typed`), as the interpreter's `Machine::custom`
//! (`crate::ad::custom`) computes it, step for step: at the top level ℓ of
//! `x` the value is the rule one level down at `x`'s primal `x₀`, and —
//! when some real of `x` is perturbed at ℓ, tested at run time as the
//! interpreter finds the innermost level of `x` — the perturbation is
//! `tangent x₀ dx`: at a forward level `dx` is `x`'s tangents and the
//! result's tangents are the tangent map's value; at a reverse level `dx`
//! is `x` with every primal 0 (each real keeps its Delta id), the tangent
//! map runs at ℓ, so it records its linear combination of the inputs'
//! Deltas, and each real of the result takes the id of the tangent map's.
//! Below ℓ the same, down to plain reals, where `f` is called.
//!
//! The interpreter refuses a rule whose functions use a value being
//! differentiated (other than through the argument); here a rule applied
//! to a perturbed point whose functions capture any value of a level is
//! refused at compile time (so the interpreter runs it, with its error or
//! its answer).

use super::{
    Ctx, Expander, Helper, Level, Mode, Part, R, RealsWalk, bool_lit, dual_ty, has_real, mk, prim,
    proj, unsupported,
};
use crate::core::typed::{Expr, ExprKind, FunId, Local, Pat, Span, if_, int_lit};
use crate::prim::{Prim, Role};
use crate::types::Type;

/// A `custom_jvp f tangent` being compiled, with what its functions capture.
struct Rule {
    f: FunId,
    tangent: FunId,
    f_captures: Vec<(Local, Level)>,
    tangent_captures: Vec<(Local, Level)>,
    /// The argument's type and the result's.
    s: Type,
    t: Type,
    /// The depth of the context it is applied in.
    depth: Level,
}

impl Expander<'_> {
    /// `custom_jvp f tangent x` (operands `[f, tangent, x]`, the functions
    /// closures of known functions) in context `cx`.
    pub(super) fn custom_jvp(&mut self, args: &[Expr], e: &Expr, cx: &Ctx) -> R<(Expr, Level)> {
        let span = e.span;
        let (ExprKind::Closure(f), ExprKind::Closure(tangent)) = (&args[0].kind, &args[1].kind)
        else {
            return Err(unsupported(
                "a custom rule made of functions not known here",
                span,
            ));
        };
        let (x, xl) = self.rewrite(&args[2], cx)?;
        let rule = Rule {
            f: *f,
            tangent: *tangent,
            f_captures: self.captures_of(*f, cx),
            tangent_captures: self.captures_of(*tangent, cx),
            s: args[2].ty.clone(),
            t: e.ty.clone(),
            depth: cx.depth,
        };
        let at_levels: Vec<Local> = rule
            .f_captures
            .iter()
            .chain(&rule.tangent_captures)
            .filter(|c| c.1 != Level::PLAIN)
            .map(|c| c.0)
            .collect();
        if xl != Level::PLAIN && !at_levels.is_empty() {
            let function_value = at_levels
                .iter()
                .any(|&c| matches!(self.prog.local_ty(c), Type::Fun(..)));
            return Err(unsupported(
                if function_value {
                    "a custom rule made of function values computed at run time \
                     (lambdas and named functions are compiled)"
                } else {
                    "a custom rule whose functions use values being differentiated"
                },
                span,
            ));
        }
        self.custom_at(&rule, x, xl, span)
    }

    /// The rule applied to `x` at level `l`.
    fn custom_at(&mut self, rule: &Rule, x: Expr, l: Level, span: Span) -> R<(Expr, Level)> {
        if l == Level::PLAIN {
            let g = self.specialise(rule.f, vec![l], rule.f_captures.clone(), rule.depth)?;
            let ret = self.prog.fun(g).ret.clone();
            return Ok((mk(ExprKind::Call(g, vec![x]), ret, span), self.ret_level(g)));
        }
        let (m, mode) = (l.below(), l.mode());
        let (s, t) = (rule.s.clone(), rule.t.clone());
        let out = self.with_temp(x, |me, x| {
            let x0 = me.split(x.clone(), &s, l, Part::Primal)?;
            me.with_temp(x0, |me, x0| {
                let (y0, yl) = me.custom_at(rule, x0.clone(), m, span)?;
                let y0 = me.lift(y0, yl, m, &t)?;
                me.with_temp(y0, |me, y0| {
                    let perturbed = me.any_perturbed(x.clone(), &s, l, span)?;
                    let (dx, dx_level) = match mode {
                        Mode::Forward => (me.split(x, &s, l, Part::Tangent)?, m),
                        Mode::Reverse => (me.zero_primal(x, &s, l, span)?, l),
                    };
                    let g = me.specialise(
                        rule.tangent,
                        vec![m, dx_level],
                        rule.tangent_captures.clone(),
                        rule.depth,
                    )?;
                    let ret = me.prog.fun(g).ret.clone();
                    let dy = mk(ExprKind::Call(g, vec![x0, dx]), ret, span);
                    let dy = me.lift(dy, me.ret_level(g), dx_level, &t)?;
                    let role = Role::CustomTangent;
                    let perturbed_y = me.attach(y0.clone(), dy, &t, (m, mode), role, span)?;
                    let constant_y = me.lift(y0, m, l, &t)?;
                    Ok(if_(perturbed, perturbed_y, constant_y))
                })
            })
        })?;
        Ok((out, l))
    }

    /// `true` if some real of `x` (original type `ty`) is perturbed at the
    /// top of its level `l`: a tangent not zero in every component, or a
    /// Delta id.
    pub(super) fn any_perturbed(&mut self, x: Expr, ty: &Type, l: Level, span: Span) -> R<Expr> {
        match ty {
            Type::Real => Ok(match l.mode() {
                Mode::Forward => {
                    let zero = self.is_zero(proj(x, 1), l.below())?;
                    prim(Prim::Not, vec![zero], Type::Bool, span)
                }
                Mode::Reverse => prim(
                    Prim::Ge,
                    vec![proj(x, 1), int_lit(0, span)],
                    Type::Bool,
                    span,
                ),
            }),
            Type::Tuple(ts) => self.with_temp(x, |s, x| {
                let mut any = bool_lit(false, span);
                for (i, c) in ts.iter().enumerate().rev() {
                    if has_real(c) {
                        let here = s.any_perturbed(proj(x.clone(), i as u32), c, l, span)?;
                        any = if_(here, bool_lit(true, span), any);
                    }
                }
                Ok(any)
            }),
            Type::Sum(a, b) if has_real(ty) => {
                let (p, q) = (
                    self.local("_", dual_ty(a, l)),
                    self.local("_", dual_ty(b, l)),
                );
                let left = self.any_perturbed(self.local_expr(p, span), a, l, span)?;
                let right = self.any_perturbed(self.local_expr(q, span), b, l, span)?;
                Ok(mk(
                    ExprKind::Case {
                        scrutinee: Box::new(x),
                        left: (Pat::Local(p), Box::new(left)),
                        right: (Pat::Local(q), Box::new(right)),
                    },
                    Type::Bool,
                    span,
                ))
            }
            Type::Vec(a) if has_real(a) => {
                let f = self.helper(Helper::AnyPerturbed((**a).clone(), l), span)?;
                let start = bool_lit(false, span);
                Ok(prim(
                    Prim::Fold,
                    vec![self.closure(f, span), start, x],
                    Type::Bool,
                    span,
                ))
            }
            _ => Ok(bool_lit(false, span)),
        }
    }

    /// `x` (original type `ty`, reverse level `l`) with each real's primal
    /// made 0 and its Delta `Scale c (Var id)` made a fresh variable, `Let
    /// fresh = c · Var id` (nothing for id −1): the tangent a reverse level
    /// gives a custom tangent map, as the interpreter gives it.
    pub(super) fn zero_primal(&mut self, x: Expr, ty: &Type, l: Level, span: Span) -> R<Expr> {
        self.walk_reals(x, ty, RealsWalk::ZeroPrimal(l), span)
    }
}
