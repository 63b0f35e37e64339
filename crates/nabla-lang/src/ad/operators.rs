//! The differentiation operators of LANGUAGE.md, as built-in functions of
//! the interpreter: each starts a derivative level, applies the function
//! given to the input seeded at that level, and reads the derivative off the
//! output. Because they are ordinary function values that call back into the
//! interpreter, they apply to any function — closures, recursive functions,
//! partial applications, functions that differentiate — and nest freely.

use super::num::{LevelGuard, Mode, Num, Perturbation};
use super::structure::{gradient, seed_inputs, seed_tangents, seeds, split_forward, split_reverse};
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
    output_ids: Vec<Option<u32>>,
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

/// The i-th basis vector of length n.
fn basis(n: usize, i: usize) -> Value {
    let mut e = vec![0.0; n];
    e[i] = 1.0;
    Value::reals(e)
}

/// The matrix whose column j is `columns[j]`, as a vector of rows.
fn from_columns(columns: &[Value], rows: usize) -> Value {
    let columns: Vec<Vec<Value>> = columns.iter().map(Value::vec_elements).collect();
    Value::values(
        (0..rows)
            .map(|r| {
                Value::vector(
                    columns
                        .iter()
                        .map(|c| c.get(r).cloned().unwrap_or(Value::Real(0.0)))
                        .collect(),
                )
            })
            .collect(),
    )
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
            Some(Perturbation::Delta(id)) => Some((id, Num::Real(1.0))),
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
        let (output, output_ids) = split_reverse(&y, level).or_else(|m| err(m, span))?;
        Ok((
            output.clone(),
            Pullback {
                trace,
                input: x.clone(),
                output,
                output_ids,
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
        let seeds = seeds(&pb.output, ct, &pb.output_ids).or_else(|m| err(m, span))?;
        let adjoints = pb.trace.backpropagate(seeds);
        gradient(&pb.input, &adjoints).or_else(|m| err(m, span))
    }

    /// The Jacobian of f : Vec Real → Vec Real at x, row i the gradient of
    /// output i. One forward pass finds the output length m; with m ≥ n
    /// (n inputs) the other columns come from n − 1 more forward passes,
    /// otherwise from one recording pass and m backward sweeps.
    fn jacobian(&mut self, f: Value, x: &Value, span: Span) -> RResult<Value> {
        let n = x.vec_len().unwrap_or(0);
        if n == 0 {
            let y = self.apply(f, x.clone(), span)?;
            let m = y.vec_len().unwrap_or(0);
            return Ok(Value::values(vec![Value::vector(Vec::new()); m]));
        }
        let (y, first) = self.jvp(f.clone(), x, &basis(n, 0), span)?;
        let m = y.vec_len().unwrap_or(0);
        if m >= n {
            let mut columns = vec![first];
            for i in 1..n {
                columns.push(self.jvp(f.clone(), x, &basis(n, i), span)?.1);
            }
            return Ok(from_columns(&columns, m));
        }
        let (_, pb) = self.vjp(f, x, span)?;
        let mut rows = Vec::with_capacity(m);
        for r in 0..m {
            rows.push(self.apply_pullback(&pb, &basis(m, r), span)?);
        }
        Ok(Value::values(rows))
    }

    /// The Hessian of f : Vec Real → Real at x, forward over reverse: column
    /// i is the derivative of the gradient along the i-th basis vector.
    fn hessian(&mut self, f: Value, x: &Value, span: Span) -> RResult<Value> {
        let n = x.vec_len().unwrap_or(0);
        let mut columns = Vec::with_capacity(n);
        for i in 0..n {
            let g = level(Mode::Forward, span)?;
            let input = seed_tangents(x, &basis(n, i), &g).or_else(|m| err(m, span))?;
            let (_, grad) = self.value_and_grad(f.clone(), &input, span)?;
            let level = g.level();
            drop(g);
            columns.push(split_forward(&grad, level).or_else(|m| err(m, span))?.1);
        }
        Ok(from_columns(&columns, n))
    }
}
