//! The interpreter.
//!
//! * The core IR is first compiled to Rust closures (`compile.rs`), one per
//!   node, specialised on operand shapes; variables were already resolved to
//!   frame slots / captures / globals by the desugarer, so the hot loop never
//!   looks up a name or dispatches on the IR.
//! * Frames live on one contiguous value stack; closures are flat (they copy
//!   the values they capture).
//! * Calls in tail position (a `let` body, an `if`/`case` branch, the last
//!   application of a body) go through a trampoline (`Machine::drive`), so a
//!   loop written with `let rec` runs in constant native stack.
//! * Non-tail calls recurse natively; [`crate::stack::check`] turns
//!   exhaustion of the native stack budget into a clean "stack depth
//!   exceeded" error.
//! * Top-level definitions are evaluated on first use and cached.
//! * All arithmetic on numbers goes through [`arith`].

pub mod arith;
mod compile;
pub mod value;

pub use value::{Closure, Partial, Value};

use crate::core::{LamId, Lit, Program, VarRef};
use crate::diagnostic::Diagnostic;
use crate::prim::Prim;
use crate::stack;
use crate::syntax::span::Span;
use arith::ArithError;
use std::rc::Rc;

/// A run-time error.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    /// What went wrong.
    pub message: String,
    /// Where.
    pub span: Span,
}

impl From<RuntimeError> for Diagnostic {
    fn from(e: RuntimeError) -> Diagnostic {
        Diagnostic::error(e.message, e.span)
    }
}

impl From<Box<RuntimeError>> for Diagnostic {
    fn from(e: Box<RuntimeError>) -> Diagnostic {
        Diagnostic::from(*e)
    }
}

/// Resource limits for one evaluation (the fuzzer uses small ones).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Maximum number of function applications (`None`: unlimited).
    pub max_calls: Option<u64>,
    /// Maximum length of a vector built at run time (default 2^27, so that
    /// `build` can never exhaust memory: a bigger request is an error).
    pub max_vector_len: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_calls: None,
            max_vector_len: 1 << 27,
        }
    }
}

enum GlobalState {
    Pending,
    Running,
    Done(Value),
}

/// Errors are boxed so that `Result<Value, _>` stays two words.
pub type RResult<T> = Result<T, Box<RuntimeError>>;

/// Evaluates core programs (compiled to closures first, see `compile.rs`).
pub struct Machine {
    compiled: Rc<compile::Compiled>,
    stack: Vec<Value>,
    globals: Vec<GlobalState>,
    calls_left: u64,
    limits: Limits,
    arities: Vec<u32>,
}

#[cold]
pub(crate) fn err<T>(message: impl Into<String>, span: Span) -> RResult<T> {
    Err(Box::new(RuntimeError {
        message: message.into(),
        span,
    }))
}

#[cold]
fn arith_err(e: ArithError, p: Prim, span: Span) -> Box<RuntimeError> {
    let message = match e {
        ArithError::DivByZero => "integer division by zero".to_string(),
        ArithError::Overflow => format!("integer overflow in `{}`", p.info().name),
        ArithError::BadOperands => format!("internal error: bad operands for `{}`", p.info().name),
    };
    Box::new(RuntimeError { message, span })
}

pub(crate) fn lit(l: Lit) -> Value {
    match l {
        Lit::Unit => Value::Unit,
        Lit::Bool(b) => Value::Bool(b),
        Lit::Int(n) => Value::Int(n),
        Lit::Real(x) => Value::Real(x),
    }
}

impl Machine {
    /// A machine for `prog`.
    pub fn new(prog: &Program, limits: Limits) -> Machine {
        Machine {
            compiled: Rc::new(compile::compile(prog)),
            stack: Vec::with_capacity(1024),
            globals: prog.globals.iter().map(|_| GlobalState::Pending).collect(),
            calls_left: limits.max_calls.unwrap_or(u64::MAX),
            limits,
            arities: prog.lambdas.iter().map(|l| l.arity).collect(),
        }
    }

    /// The value of global definition `index` (evaluating it if needed).
    pub fn global(&mut self, index: usize, use_site: Span) -> RResult<Value> {
        match self.globals.get(index) {
            Some(GlobalState::Done(v)) => return Ok(v.clone()),
            Some(GlobalState::Running) => {
                let name = self
                    .compiled
                    .global_names
                    .get(index)
                    .cloned()
                    .unwrap_or_default();
                return err(format!("the value of `{name}` depends on itself"), use_site);
            }
            Some(GlobalState::Pending) => {}
            None => return err("internal error: unknown global", use_site),
        }
        if stack::check().is_err() {
            return err("stack depth exceeded", use_site);
        }
        self.globals[index] = GlobalState::Running;
        let base = self.stack.len();
        let comp = Rc::clone(&self.compiled);
        let first = (comp.globals[index])(self, base, None);
        let r = self.drive(&comp, first, base);
        self.stack.truncate(base);
        match r {
            Ok(v) => {
                self.globals[index] = GlobalState::Done(v.clone());
                Ok(v)
            }
            Err(e) => {
                self.globals[index] = GlobalState::Pending;
                Err(e)
            }
        }
    }

    /// Finishes code in tail position that was run for its value.
    pub(crate) fn finish(&mut self, r: RResult<compile::Tail>) -> RResult<Value> {
        match r? {
            compile::Tail::Value(v) => Ok(v),
            call => {
                let base = self.stack.len();
                let comp = Rc::clone(&self.compiled);
                self.drive(&comp, Ok(call), base)
            }
        }
    }

    /// The trampoline: runs calls left by tail-position code until a value
    /// results. Each call's frame starts at `base`; the stack is cut back to
    /// `base` before returning.
    fn drive(
        &mut self,
        comp: &compile::Compiled,
        first: RResult<compile::Tail>,
        base: usize,
    ) -> RResult<Value> {
        let mut next = first;
        loop {
            match next {
                Err(e) => {
                    self.stack.truncate(base);
                    return Err(e);
                }
                Ok(compile::Tail::Value(v)) => {
                    self.stack.truncate(base);
                    return Ok(v);
                }
                Ok(compile::Tail::Call(c, args, span)) => {
                    if let Err(e) = self.count_call(span) {
                        self.stack.truncate(base);
                        return Err(e);
                    }
                    match args {
                        compile::Args::One(x) => {
                            self.stack.truncate(base);
                            self.stack.push(x);
                        }
                        compile::Args::Two(x, y) => {
                            self.stack.truncate(base);
                            self.stack.push(x);
                            self.stack.push(y);
                        }
                        compile::Args::Many(xs) => {
                            self.stack.truncate(base);
                            self.stack.extend(xs);
                        }
                    }
                    let lam = &comp.lambdas[c.lam.0 as usize];
                    next = (lam.body)(self, base, Some(&c));
                }
            }
        }
    }

    /// Calls closure `c` whose arguments are on the stack from `base`.
    pub(crate) fn call(&mut self, c: Rc<Closure>, base: usize, span: Span) -> RResult<Value> {
        self.enter(c.lam, base, Some(&c), span)
    }

    /// Calls top-level function `id` (no captures) with its arguments on the
    /// stack from `base`.
    pub(crate) fn call_known(&mut self, id: LamId, base: usize, span: Span) -> RResult<Value> {
        self.enter(id, base, None, span)
    }

    /// Runs the body of lambda `id` in a frame at `base`, then any tail
    /// calls it leaves.
    #[inline]
    fn enter(
        &mut self,
        id: LamId,
        base: usize,
        clo: Option<&Rc<Closure>>,
        span: Span,
    ) -> RResult<Value> {
        if stack::check().is_err() {
            self.stack.truncate(base);
            return err("stack depth exceeded", span);
        }
        if let Err(e) = self.count_call(span) {
            self.stack.truncate(base);
            return Err(e);
        }
        let comp = Rc::clone(&self.compiled);
        match (comp.lambdas[id.0 as usize].body)(self, base, clo) {
            Ok(compile::Tail::Value(v)) => {
                self.stack.truncate(base);
                Ok(v)
            }
            other => self.drive(&comp, other, base),
        }
    }

    /// Creates a closure over lambda `id`, capturing from the current frame.
    pub(crate) fn make_closure(
        &mut self,
        id: LamId,
        bp: usize,
        clo: Option<&Rc<Closure>>,
    ) -> RResult<Value> {
        let comp = Rc::clone(&self.compiled);
        let lam = &comp.lambdas[id.0 as usize];
        let mut caps = Vec::with_capacity(lam.captures.len());
        for r in &lam.captures {
            caps.push(self.read(*r, bp, clo, lam.span)?);
        }
        let arity = self.arity_of(id);
        Ok(Value::Closure(Rc::new(Closure {
            lam: id,
            arity,
            captures: caps.into_boxed_slice(),
        })))
    }

    fn arity_of(&self, id: LamId) -> u32 {
        self.arities.get(id.0 as usize).copied().unwrap_or(1)
    }

    /// Applies `f` to each argument produced by `args`, collecting results;
    /// the function value is inspected once, not per element.
    fn apply_each(
        &mut self,
        f: &Value,
        n: usize,
        mut arg: impl FnMut(usize) -> Value,
        span: Span,
    ) -> RResult<Vec<Value>> {
        let mut out = Vec::with_capacity(n.min(1 << 20));
        match f {
            Value::Closure(c) if c.arity == 1 => {
                for i in 0..n {
                    let base = self.stack.len();
                    self.stack.push(arg(i));
                    out.push(self.enter(c.lam, base, Some(c), span)?);
                }
            }
            _ => {
                for i in 0..n {
                    out.push(self.apply(f.clone(), arg(i), span)?);
                }
            }
        }
        Ok(out)
    }

    /// Applies a function value to an argument.
    pub fn apply(&mut self, f: Value, x: Value, span: Span) -> RResult<Value> {
        match f {
            Value::Closure(c) if c.arity == 1 => {
                let base = self.stack.len();
                self.stack.push(x);
                self.call(c, base, span)
            }
            other => self.apply_many(other, vec![x], span),
        }
    }

    /// Applies a function value to several arguments (curried semantics:
    /// too few arguments give a partial application, too many apply the
    /// result to the rest).
    pub fn apply_many(&mut self, mut f: Value, mut args: Vec<Value>, span: Span) -> RResult<Value> {
        loop {
            if args.is_empty() {
                return Ok(f);
            }
            match f {
                Value::Closure(c) => {
                    let k = c.arity as usize;
                    if args.len() < k {
                        return Ok(Value::Partial(Rc::new(Partial { closure: c, args })));
                    }
                    let rest = args.split_off(k);
                    let base = self.stack.len();
                    self.stack.extend(args);
                    f = self.call(c, base, span)?;
                    args = rest;
                }
                Value::Partial(p) => {
                    let mut all = Vec::with_capacity(p.args.len() + args.len());
                    all.extend(p.args.iter().cloned());
                    all.append(&mut args);
                    args = all;
                    f = Value::Closure(p.closure.clone());
                }
                Value::Pullback(pb) => {
                    let rest = args.split_off(1);
                    let ct = args.pop().unwrap_or(Value::Unit);
                    f = self.apply_pullback(&pb, &ct, span)?;
                    args = rest;
                }
                Value::Prim(p, pargs) => {
                    let rest = args.split_off(1);
                    let x = args.pop().unwrap_or(Value::Unit);
                    let pargs = pargs.as_deref().map_or(&[][..], |v| v.as_slice());
                    f = self.apply_prim(p, pargs, x, span)?;
                    args = rest;
                }
                _ => return err("internal error: applying a non-function", span),
            }
        }
    }

    #[inline]
    fn count_call(&mut self, span: Span) -> RResult<()> {
        if self.calls_left == 0 {
            return err("evaluation step limit exceeded", span);
        }
        self.calls_left -= 1;
        Ok(())
    }

    fn apply_prim(&mut self, p: Prim, args: &[Value], x: Value, span: Span) -> RResult<Value> {
        let mut all: Vec<Value> = Vec::with_capacity(args.len() + 1);
        all.extend_from_slice(args);
        all.push(x);
        if all.len() < p.runtime_arity() {
            return Ok(Value::Prim(p, Some(Rc::new(all))));
        }
        self.call_prim(p, all, span)
    }

    fn read(&self, r: VarRef, bp: usize, clo: Option<&Rc<Closure>>, span: Span) -> RResult<Value> {
        match r {
            VarRef::Local(i) => match self.stack.get(bp + i as usize) {
                Some(v) => Ok(v.clone()),
                None => err("internal error: bad local", span),
            },
            VarRef::Capture(i) => match clo.and_then(|c| c.captures.get(i as usize)) {
                Some(v) => Ok(v.clone()),
                None => err("internal error: bad capture", span),
            },
            VarRef::SelfRef => match clo {
                Some(c) => Ok(Value::Closure(c.clone())),
                None => err("internal error: no enclosing function", span),
            },
            VarRef::Global(_) => err("internal error: global read as local", span),
        }
    }

    pub(crate) fn call_prim(
        &mut self,
        p: Prim,
        mut args: Vec<Value>,
        span: Span,
    ) -> RResult<Value> {
        match args.len() {
            1 => {
                let a = args.pop().unwrap_or(Value::Unit);
                self.prim1(p, a, span)
            }
            2 => {
                let b = args.pop().unwrap_or(Value::Unit);
                let a = args.pop().unwrap_or(Value::Unit);
                self.prim2(p, a, b, span)
            }
            _ if p.is_derivative() => self.differentiate(p, args, span),
            3 if p == Prim::Fold => {
                let v = args.pop().unwrap_or(Value::Unit);
                let init = args.pop().unwrap_or(Value::Unit);
                let f = args.pop().unwrap_or(Value::Unit);
                self.fold(f, init, v, span)
            }
            _ => err(
                format!(
                    "internal error: wrong number of arguments to `{}`",
                    p.info().name
                ),
                span,
            ),
        }
    }

    pub(crate) fn prim1(&mut self, p: Prim, a: Value, span: Span) -> RResult<Value> {
        match p {
            Prim::Not => match a {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                _ => err("internal error: `not` on a non-Bool", span),
            },
            Prim::Fst | Prim::Snd => match a {
                Value::Tuple(vs) => Ok(vs
                    .get(if p == Prim::Fst { 0 } else { 1 })
                    .cloned()
                    .unwrap_or(Value::Unit)),
                _ => err("internal error: projection from a non-tuple", span),
            },
            Prim::Size => match a.vec_len() {
                Some(n) => Ok(Value::Int(n as i64)),
                None => err("internal error: `size` of a non-vector", span),
            },
            _ => arith::unary(p, &a).map_err(|e| arith_err(e, p, span)),
        }
    }

    pub(crate) fn prim2(&mut self, p: Prim, a: Value, b: Value, span: Span) -> RResult<Value> {
        match p {
            Prim::Index => {
                let Value::Int(i) = b else {
                    return err("internal error: non-Int index", span);
                };
                let len = a.vec_len().unwrap_or(0);
                match usize::try_from(i).ok().and_then(|i| a.vec_get(i)) {
                    Some(v) => Ok(v),
                    None => err(
                        format!("index {i} out of range for a vector of length {len}"),
                        span,
                    ),
                }
            }
            Prim::Sum => match &b {
                Value::RealVec(xs) => Ok(arith::sum_reals(xs)),
                Value::Vec(xs) => {
                    let mut acc = a;
                    for x in xs.iter() {
                        acc = arith::binary(Prim::Add, &acc, x)
                            .map_err(|e| arith_err(e, Prim::Add, span))?;
                    }
                    Ok(acc)
                }
                _ => err("internal error: `sum` of a non-vector", span),
            },
            Prim::Build => {
                let Value::Int(n) = a else {
                    return err("internal error: non-Int size", span);
                };
                if n < 0 {
                    return err(format!("`build` with negative size {n}"), span);
                }
                let n = n as usize;
                if n > self.limits.max_vector_len {
                    return err(
                        format!(
                            "`build` of {n} elements exceeds the limit of {}",
                            self.limits.max_vector_len
                        ),
                        span,
                    );
                }
                let items = self.apply_each(&b, n, |i| Value::Int(i as i64), span)?;
                Ok(Value::vector(items))
            }
            Prim::Map => self.map(a, b, span),
            Prim::Zip => {
                let (Some(n), Some(m)) = (a.vec_len(), b.vec_len()) else {
                    return err("internal error: `zip` of non-vectors", span);
                };
                if n != m {
                    return err(
                        format!("`zip` of vectors of different lengths ({n} and {m})"),
                        span,
                    );
                }
                let mut items = Vec::with_capacity(n);
                for i in 0..n {
                    let x = a.vec_get(i).unwrap_or(Value::Unit);
                    let y = b.vec_get(i).unwrap_or(Value::Unit);
                    items.push(Value::Tuple(Rc::new(vec![x, y])));
                }
                Ok(Value::Vec(Rc::new(items)))
            }
            Prim::Fold | Prim::Jvp => Ok(Value::Prim(p, Some(Rc::new(vec![a, b])))),
            _ if p.is_derivative() => self.differentiate(p, vec![a, b], span),
            _ => arith::binary(p, &a, &b).map_err(|e| arith_err(e, p, span)),
        }
    }

    fn map(&mut self, f: Value, v: Value, span: Span) -> RResult<Value> {
        let items = match &v {
            Value::RealVec(xs) => self.apply_each(&f, xs.len(), |i| Value::Real(xs[i]), span)?,
            Value::Vec(xs) => self.apply_each(&f, xs.len(), |i| xs[i].clone(), span)?,
            _ => return err("internal error: `map` over a non-vector", span),
        };
        Ok(Value::vector(items))
    }

    fn fold(&mut self, f: Value, init: Value, v: Value, span: Span) -> RResult<Value> {
        let n = v.vec_len().unwrap_or(0);
        let mut acc = init;
        for i in 0..n {
            let x = v.vec_get(i).unwrap_or(Value::Unit);
            acc = match &f {
                // The common case `fold (fun acc x -> ...)`: no partial application.
                Value::Closure(c) if c.arity == 2 => {
                    let base = self.stack.len();
                    self.stack.push(acc);
                    self.stack.push(x);
                    self.enter(c.lam, base, Some(c), span)?
                }
                _ => self.apply_many(f.clone(), vec![acc, x], span)?,
            };
        }
        Ok(acc)
    }
}
