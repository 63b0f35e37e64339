//! The differentiation operators of LANGUAGE.md, as built-in functions of
//! the interpreter: each starts a derivative level, applies the function
//! given to the input seeded at that level, and reads the derivative off the
//! output. Because they are ordinary function values that call back into the
//! interpreter, they apply to any function — closures, recursive functions,
//! partial applications, functions that differentiate — and nest freely.

use super::custom::Rule;
use super::num::{LevelGuard, Mode, Num, Perturbation};
use super::structure::{
    OutputDelta, ShapeResult, gradient, one_hot, real_leaves, replace_reals, seed, seed_inputs,
    seed_tangents, seeds, split_forward, split_reverse,
};
use super::trace::Trace;
use crate::eval::{Machine, RResult, Value, err};
use crate::prim::Prim;
use crate::syntax::span::Span;
use std::rc::Rc;

/// The pullback returned by `vjp`: the recorded trace of one evaluation,
/// applicable to any number of cotangents, each costing one backward sweep.
#[derive(Debug)]
pub struct Pullback {
    trace: Trace,
    /// The point `x` (its shape, and the Int/Bool leaves of the result).
    input: Value,
    /// The primal output (the shape a cotangent must have).
    output: Value,
    /// The Delta of each real leaf of the output.
    output_deltas: Vec<Option<OutputDelta>>,
}

impl Pullback {
    /// The number of Deltas recorded by the forward evaluation (inputs
    /// included): linear in the number of operations the function ran.
    pub fn trace_len(&self) -> usize {
        self.trace.len()
    }
}

fn level(mode: Mode, span: Span) -> RResult<LevelGuard> {
    LevelGuard::enter(mode).or_else(|_| err("derivatives are nested too deeply", span))
}

fn pair(a: Value, b: Value) -> Value {
    Value::Tuple(Rc::new(vec![a, b]))
}

/// The Jacobian of a function from `x`'s type to `y`'s from its columns
/// (`columns[j]` the output reals' derivatives along input real j): `y`
/// with real leaf i replaced by `x`'s shape holding row i.
fn from_columns(y: &Value, x: &Value, columns: &[Vec<Value>]) -> ShapeResult<Value> {
    replace_reals(y, &mut |i, _| {
        let mut row = columns
            .iter()
            .map(|c| c.get(i).cloned().unwrap_or(Value::Real(0.0)));
        replace_reals(x, &mut |_, _| Ok(row.next().unwrap_or(Value::Real(0.0))))
    })
}

impl Machine {
    /// Applies differentiation operator `p` to all its arguments.
    pub(crate) fn differentiate(
        &mut self,
        p: Prim,
        args: Vec<Value>,
        span: Span,
    ) -> RResult<Value> {
        let mut args = args.into_iter();
        if p == Prim::CustomJvp {
            let (Some(f), Some(tangent), Some(x)) = (args.next(), args.next(), args.next()) else {
                return err("internal error: missing operand of `custom_jvp`", span);
            };
            return self.custom(&Rule::Jvp { f, tangent }, x, span);
        }
        let (Some(f), Some(x)) = (args.next(), args.next()) else {
            return err("internal error: missing operand of a derivative", span);
        };
        match p {
            Prim::Diff => Ok(self.jvp(f, &x, &Value::Real(1.0), span)?.1),
            Prim::Grad => Ok(self.value_and_grad(f, &x, span)?.1),
            Prim::ValueAndGrad => {
                let (y, g) = self.value_and_grad(f, &x, span)?;
                Ok(pair(y, g))
            }
            Prim::Jvp => {
                let dx = args.next().unwrap_or(Value::Unit);
                let (y, dy) = self.jvp(f, &x, &dx, span)?;
                Ok(pair(y, dy))
            }
            Prim::Vjp => {
                let (y, pullback) = self.vjp(f, &x, span)?;
                Ok(pair(y, Value::Pullback(Rc::new(pullback))))
            }
            Prim::Jacobian => self.jacobian(f, &x, span),
            Prim::CustomVjp => self.custom(&Rule::Vjp { rule: f }, x, span),
            Prim::Hessian => self.hessian(f, &x, span),
            _ => err("internal error: not a derivative", span),
        }
    }

    /// Forward mode: f(x) and its directional derivative along `dx`.
    fn jvp(&mut self, f: Value, x: &Value, dx: &Value, span: Span) -> RResult<(Value, Value)> {
        let g = level(Mode::Forward, span)?;
        let input = seed_tangents(x, dx, &g).or_else(|m| err(m, span))?;
        let y = self.apply(f, input, span)?;
        let level = g.level();
        drop(g);
        split_forward(&y, level).or_else(|m| err(m, span))
    }

    /// Reverse mode: f(x) and its gradient, in one forward evaluation that
    /// records the trace and one backward sweep.
    fn value_and_grad(&mut self, f: Value, x: &Value, span: Span) -> RResult<(Value, Value)> {
        let g = level(Mode::Reverse, span)?;
        let input = seed_inputs(x, &g).or_else(|m| err(m, span))?;
        let y = self.apply(f, input, span)?;
        let level = g.level();
        let trace = g.finish();
        let Some(y) = y.as_num() else {
            return err(
                "internal error: the function given to `grad` did not return a Real",
                span,
            );
        };
        let (value, dy) = y.split(level);
        let seed = match dy {
            Some(Perturbation::Delta { coefficient, id }) => {
                Some(seed((coefficient, id), Num::Real(1.0)))
            }
            _ => None,
        };
        let adjoints = trace.backpropagate(seed.into_iter().collect());
        trace.recycle();
        let grad = gradient(x, &adjoints).or_else(|m| err(m, span))?;
        Ok((Value::from(value), grad))
    }

    /// Reverse mode with the backward pass left for later: f(x) and a pullback.
    fn vjp(&mut self, f: Value, x: &Value, span: Span) -> RResult<(Value, Pullback)> {
        let g = level(Mode::Reverse, span)?;
        let input = seed_inputs(x, &g).or_else(|m| err(m, span))?;
        let y = self.apply(f, input, span)?;
        let level = g.level();
        let trace = g.finish();
        let (output, output_deltas) = split_reverse(&y, level).or_else(|m| err(m, span))?;
        Ok((
            output.clone(),
            Pullback {
                trace,
                input: x.clone(),
                output,
                output_deltas,
            },
        ))
    }

    /// Applies a pullback to a cotangent: one backward sweep.
    pub(crate) fn apply_pullback(
        &mut self,
        pb: &Pullback,
        ct: &Value,
        span: Span,
    ) -> RResult<Value> {
        let seeds = seeds(&pb.output, ct, &pb.output_deltas).or_else(|m| err(m, span))?;
        let adjoints = pb.trace.backpropagate(seeds);
        gradient(&pb.input, &adjoints).or_else(|m| err(m, span))
    }

    /// The Jacobian of `f : S -> T` at `x`: `f x` with each real leaf
    /// replaced by its gradient, an `S`-shaped value (for `Vec Real` to
    /// `Vec Real`, row i the gradient of output i). One forward pass finds
    /// the m output reals; with m ≥ n (n input reals) the other columns
    /// come from n − 1 more forward passes, otherwise from one recording
    /// pass and m backward sweeps.
    fn jacobian(&mut self, f: Value, x: &Value, span: Span) -> RResult<Value> {
        let shape = |r: ShapeResult<Value>| r.or_else(|m| err(m, span));
        let n = real_leaves(x).or_else(|m| err(m, span))?.len();
        if n == 0 {
            // Nothing to differentiate: each output real's gradient is `x`.
            let y = self.apply(f, x.clone(), span)?;
            return shape(replace_reals(&y, &mut |_, _| Ok(x.clone())));
        }
        let (y, first) = self.jvp(f.clone(), x, &shape(one_hot(x, 0))?, span)?;
        let m = real_leaves(&y).or_else(|e| err(e, span))?.len();
        if m >= n {
            let mut columns = vec![real_leaves(&first).or_else(|e| err(e, span))?];
            for i in 1..n {
                let (_, column) = self.jvp(f.clone(), x, &shape(one_hot(x, i))?, span)?;
                columns.push(real_leaves(&column).or_else(|e| err(e, span))?);
            }
            return shape(from_columns(&y, x, &columns));
        }
        let (y, pb) = self.vjp(f, x, span)?;
        let mut rows = Vec::with_capacity(m);
        for r in 0..m {
            rows.push(self.apply_pullback(&pb, &shape(one_hot(&y, r))?, span)?);
        }
        shape(replace_reals(&y, &mut |i, _| Ok(rows[i].clone())))
    }

    /// The Hessian of `f : S -> Real` at `x`, forward over reverse: the
    /// Jacobian of the gradient, column i the derivative of the gradient
    /// along the i-th basis tangent; shaped as [`Machine::jacobian`] shapes
    /// the Jacobian of a function from `S` to `S`.
    fn hessian(&mut self, f: Value, x: &Value, span: Span) -> RResult<Value> {
        let n = real_leaves(x).or_else(|m| err(m, span))?.len();
        let mut columns = Vec::with_capacity(n);
        for i in 0..n {
            let g = level(Mode::Forward, span)?;
            let basis = one_hot(x, i).or_else(|m| err(m, span))?;
            let input = seed_tangents(x, &basis, &g).or_else(|m| err(m, span))?;
            let (_, grad) = self.value_and_grad(f.clone(), &input, span)?;
            let level = g.level();
            drop(g);
            let column = split_forward(&grad, level).or_else(|m| err(m, span))?.1;
            columns.push(real_leaves(&column).or_else(|m| err(m, span))?);
        }
        from_columns(x, x, &columns).or_else(|m| err(m, span))
    }
}
