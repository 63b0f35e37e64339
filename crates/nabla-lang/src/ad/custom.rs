//! User-defined derivative rules: `custom_jvp f tangent` and `custom_vjp rule`.
//!
//! Both give a function whose derivative is the user's rule instead of the
//! derivative of its body — for numerical stability (`softplus`, a log-sum-exp),
//! for a function whose body is not differentiable (an iterative solver, a
//! straight-through estimator), or for speed. As in the library's
//! `UnaryPrimitive`, the rule is applied one level at a time, innermost first,
//! and is itself differentiated at the enclosing levels, so every mode and
//! every nesting uses it:
//!
//! at the innermost level ℓ that the argument `x` carries, `x` splits into its
//! primal `x₀` (the reals of the enclosing levels) and its perturbation `dx`;
//! the value is the custom function at `x₀` (the same rule, one level down),
//! and the perturbation is the tangent map at `x₀` applied to `dx`:
//!
//! * at a **forward** level `dx` is the tangents (the constant 0 for a leaf not
//!   perturbed), and the result pairs each real of the value with the
//!   corresponding real of `tangent x₀ dx` (Krawiec et al. Figure 3);
//! * at a **reverse** level `dx` holds, for each perturbed leaf with Delta
//!   `Scale c (Var id)`, a real of level ℓ whose value is 0 and whose Delta is
//!   a fresh variable, recorded as `Let fresh = c · Var id`: the tangent map,
//!   linear in `dx`, then records its own linear combination of those Deltas on
//!   ℓ's trace, and each real of the result takes its Delta from the
//!   corresponding real of `tangent x₀ dx` (the transpose is the backward
//!   sweep's: JAX's "linearize, then transpose" for `custom_jvp`). The trace
//!   grows by the cost of one application of the tangent map: linear, as
//!   Theorem 5 asks.
//!
//! `custom_vjp rule` is `custom_jvp` with the tangent map made from the
//! pullback: `rule x₀ = (y, pb)`, and real leaf i of the tangent is
//! Σⱼ `chainMul` (pb eᵢ)ⱼ dxⱼ over the real leaves j of `x` (eᵢ the i-th basis
//! cotangent), from 0, left to right: one application of the pullback per real
//! of the value, at each level where the function is differentiated. Native
//! code (`core::lower_typed`) builds the same sums in the same order.
//!
//! The rule speaks only of the argument: a function that uses a value being
//! differentiated other than through its argument (a capture at the level the
//! rule is applied at, or deeper) is refused with an error, as JAX does,
//! instead of giving the derivative of an unstated rule.

use super::num::{
    Level, Mode, Num, Perturbation, fresh_variable, mode_of, refers_outside, trace_len,
};
use super::structure::{ShapeResult, map_reals, one_hot, real_leaves, replace_reals, zip_shapes};
use crate::eval::{Machine, RResult, Value, err};
use crate::prim::Role;
use crate::syntax::span::Span;
use nabla::Number;

/// A custom derivative rule as the user gave it.
pub(crate) enum Rule {
    /// `custom_jvp f tangent`.
    Jvp { f: Value, tangent: Value },
    /// `custom_vjp rule`, with `rule x = (y, pullback)`.
    Vjp { rule: Value },
}

/// The innermost level any real of `x` carries.
fn innermost(x: &Value) -> ShapeResult<Option<Level>> {
    let mut top = None;
    map_reals(x, &mut |n| {
        top = top.max(n.level());
        n
    })?;
    Ok(top)
}

fn captured(what: &str, span: Span) -> RResult<Value> {
    err(
        format!(
            "{what} uses a value being differentiated other than through its argument; \
             a custom rule gives the derivative with respect to the argument only, so \
             pass that value as part of the argument"
        ),
        span,
    )
}

impl Rule {
    fn name(&self) -> &'static str {
        match self {
            Rule::Jvp { .. } => "custom_jvp",
            Rule::Vjp { .. } => "custom_vjp",
        }
    }

    /// The function's value at `x` as its body computes it.
    fn value(&self, m: &mut Machine, x: Value, span: Span) -> RResult<Value> {
        match self {
            Rule::Jvp { f, .. } => m.apply(f.clone(), x, span),
            Rule::Vjp { rule } => {
                let (y, _) = value_and_pullback(m, rule, x, span)?;
                Ok(y)
            }
        }
    }

    /// The tangent map at `x` applied to `dx` (both one level down).
    fn tangent(&self, m: &mut Machine, x: Value, dx: &Value, span: Span) -> RResult<Value> {
        match self {
            Rule::Jvp { tangent, .. } => m.apply_many(tangent.clone(), vec![x, dx.clone()], span),
            Rule::Vjp { rule } => {
                let shape = |r: ShapeResult<Value>| r.or_else(|e| err(e, span));
                let (y, pullback) = value_and_pullback(m, rule, x.clone(), span)?;
                let m_reals = real_leaves(&y).or_else(|e| err(e, span))?.len();
                let dx = real_leaves(dx).or_else(|e| err(e, span))?;
                let mut rows = Vec::with_capacity(m_reals);
                for i in 0..m_reals {
                    let ct = shape(one_hot(&y, i))?;
                    let g = m.apply(pullback.clone(), ct, span)?;
                    // The pullback's result must be shaped like the point.
                    shape(zip_shapes(&x, &g, Role::CustomCotangent, &mut |a, _| Ok(a)))?;
                    let g = real_leaves(&g).or_else(|e| err(e, span))?;
                    let mut acc = Num::ZERO;
                    for (gj, dxj) in g.iter().zip(&dx) {
                        let (Some(gj), Some(dxj)) = (gj.as_num(), dxj.as_num()) else {
                            return err("internal error: a real leaf that is not a real", span);
                        };
                        acc = acc + gj.chain(dxj);
                    }
                    rows.push(Value::from(acc));
                }
                shape(replace_reals(&y, &mut |i, _| {
                    Ok(rows.get(i).cloned().unwrap_or(Value::Real(0.0)))
                }))
            }
        }
    }
}

/// `rule x`, which must be a pair `(value, pullback)`.
fn value_and_pullback(
    m: &mut Machine,
    rule: &Value,
    x: Value,
    span: Span,
) -> RResult<(Value, Value)> {
    match m.apply(rule.clone(), x, span)? {
        Value::Tuple(pair) if pair.len() == 2 => Ok((pair[0].clone(), pair[1].clone())),
        _ => err(
            "internal error: a `custom_vjp` rule did not return a pair",
            span,
        ),
    }
}

impl Machine {
    /// `custom_jvp f tangent x` and `custom_vjp rule x`: see the module docs.
    pub(crate) fn custom(&mut self, rule: &Rule, x: Value, span: Span) -> RResult<Value> {
        let shape = |r: ShapeResult<Value>| r.or_else(|e| err(e, span));
        let level = match innermost(&x).or_else(|e| err(e, span))? {
            Some(level) => level,
            None => return rule.value(self, x, span),
        };
        let Some(mode) = mode_of(level) else {
            return err("internal error: a real of an inactive level", span);
        };
        let mut parts = Vec::new();
        let x0 = shape(map_reals(&x, &mut |n| {
            let (primal, part) = n.split(level);
            parts.push(part);
            primal
        }))?;
        // At a reverse level, the fresh variables the tangent map is given:
        // the only Deltas it may refer to (in increasing order).
        let mut inputs = Vec::new();
        let mut next = parts.into_iter();
        let dx = shape(map_reals(&x0, &mut |_| match next.next().flatten() {
            Some(Perturbation::Tangent(t)) => t,
            Some(Perturbation::Delta { coefficient, id }) => {
                let fresh = fresh_variable(level, coefficient, id);
                inputs.push(fresh);
                Num::reverse(level, Num::ZERO, Num::Real(1.0), fresh)
            }
            None => Num::ZERO,
        }))?;
        let y0 = self.custom(rule, x0.clone(), span)?;
        if innermost(&y0).or_else(|e| err(e, span))? >= Some(level) {
            return captured(&format!("the function given to `{}`", rule.name()), span);
        }
        let recorded = trace_len(level);
        let dy = rule.tangent(self, x0, &dx, span)?;
        let inner = innermost(&dy).or_else(|e| err(e, span))?;
        // At a reverse level the map's reals are of this level; one that it
        // computed from a captured real of the level has a Delta not of the
        // argument, or shows in the Deltas the map recorded, which then
        // refer to one.
        let foreign = |id: u32| id < recorded && inputs.binary_search(&id).is_err();
        let too_deep = match mode {
            Mode::Forward => inner >= Some(level),
            Mode::Reverse => {
                inner > Some(level)
                    || refers_outside(level, recorded, &inputs)
                    || real_leaves(&dy)
                        .or_else(|e| err(e, span))?
                        .iter()
                        .filter_map(|leaf| leaf.as_num()?.split(level).1)
                        .any(|d| matches!(d, Perturbation::Delta { id, .. } if foreign(id)))
            }
        };
        if too_deep {
            return captured(&format!("the rule given to `{}`", rule.name()), span);
        }
        shape(zip_shapes(&y0, &dy, Role::CustomTangent, &mut |y, d| {
            Ok(match mode {
                Mode::Forward => Num::forward(level, y, d),
                Mode::Reverse => match d.split(level).1 {
                    Some(Perturbation::Delta { coefficient, id }) => {
                        Num::reverse(level, y, coefficient, id)
                    }
                    _ => y,
                },
            })
        }))
    }
}
