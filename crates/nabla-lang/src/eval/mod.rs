//! The interpreter: a tree-walking evaluator over the core IR with flat
//! closures and one contiguous value stack for frames.
//!
//! * Variables were resolved to frame slots / captures / globals by the
//!   desugarer, so the hot loop never looks up a name.
//! * Calls in tail position (the body of a `let`, a branch of `if`/`case`,
//!   the callee of an application) reuse the current native frame: a loop
//!   written with `let rec` runs in constant native stack.
//! * Non-tail calls recurse natively; [`crate::stack::check`] turns
//!   exhaustion into a clean "stack depth exceeded" error.
//! * Top-level definitions are evaluated on first use and cached.

pub mod arith;
pub mod value;

pub use value::{Closure, Partial, Value};

use crate::core::{Expr, Lit, Program, VarRef};
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
    /// Maximum length of a vector built at run time.
    pub max_vector_len: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_calls: None,
            max_vector_len: 1 << 32,
        }
    }
}

enum GlobalState {
    Pending,
    Running,
    Done(Value),
}

/// Errors are boxed so that `Result<Value, _>` stays two words.
type RResult<T> = Result<T, Box<RuntimeError>>;

enum Step<'p> {
    Done(Value),
    Next(&'p Expr),
    TailCall(Rc<Closure>),
}

/// Evaluates core programs.
pub struct Machine<'p> {
    prog: &'p Program,
    stack: Vec<Value>,
    globals: Vec<GlobalState>,
    calls_left: u64,
    limits: Limits,
}

#[cold]
fn err<T>(message: impl Into<String>, span: Span) -> RResult<T> {
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

fn lit(l: Lit) -> Value {
    match l {
        Lit::Unit => Value::Unit,
        Lit::Bool(b) => Value::Bool(b),
        Lit::Int(n) => Value::Int(n),
        Lit::Real(x) => Value::Real(x),
    }
}

impl<'p> Machine<'p> {
    /// A machine for `prog`.
    pub fn new(prog: &'p Program, limits: Limits) -> Machine<'p> {
        Machine {
            prog,
            stack: Vec::with_capacity(1024),
            globals: prog.globals.iter().map(|_| GlobalState::Pending).collect(),
            calls_left: limits.max_calls.unwrap_or(u64::MAX),
            limits,
        }
    }

    /// The value of global definition `index` (evaluating it if needed).
    pub fn global(&mut self, index: usize, use_site: Span) -> RResult<Value> {
        match self.globals.get(index) {
            Some(GlobalState::Done(v)) => return Ok(v.clone()),
            Some(GlobalState::Running) => {
                let name = &self.prog.globals[index].name;
                return err(format!("the value of `{name}` depends on itself"), use_site);
            }
            Some(GlobalState::Pending) => {}
            None => return err("internal error: unknown global", use_site),
        }
        self.globals[index] = GlobalState::Running;
        let base = self.stack.len();
        let r = self.eval(&self.prog.globals[index].body, base, None);
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

    /// Applies a function value to an argument.
    pub fn apply(&mut self, f: Value, x: Value, span: Span) -> RResult<Value> {
        match f {
            Value::Closure(c) if c.arity == 1 => {
                let base = self.stack.len();
                self.stack.push(x);
                self.run_closure(&c, base, span)
            }
            other => self.apply_many(other, vec![x], span),
        }
    }

    /// Runs closure `c` whose arguments are on the stack from `base`.
    fn run_closure(&mut self, c: &Rc<Closure>, base: usize, span: Span) -> RResult<Value> {
        if stack::check().is_err() {
            self.stack.truncate(base);
            return err("stack depth exceeded", span);
        }
        if let Err(e) = self.count_call(span) {
            self.stack.truncate(base);
            return Err(e);
        }
        let prog = self.prog;
        let body = &prog.lambdas[c.lam.0 as usize].body;
        let r = self.eval(body, base, Some(c));
        self.stack.truncate(base);
        r
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
                    f = self.run_closure(&c, base, span)?;
                    args = rest;
                }
                Value::Partial(p) => {
                    let mut all = Vec::with_capacity(p.args.len() + args.len());
                    all.extend(p.args.iter().cloned());
                    all.append(&mut args);
                    args = all;
                    f = Value::Closure(p.closure.clone());
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

    #[inline(always)]
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

    /// Evaluates an operand: leaves and primitive calls directly, anything
    /// else through [`Machine::eval`]. Neither leaves nor primitive calls push
    /// onto the value stack or make tail calls, so they need no frame set-up.
    #[inline(always)]
    fn operand(&mut self, e: &'p Expr, bp: usize, clo: Option<&Rc<Closure>>) -> RResult<Value> {
        match e {
            Expr::Var(VarRef::Local(i), span) => match self.stack.get(bp + *i as usize) {
                Some(v) => Ok(v.clone()),
                None => err("internal error: bad local", *span),
            },
            Expr::Var(VarRef::Global(g), span) => match self.globals.get(*g as usize) {
                Some(GlobalState::Done(v)) => Ok(v.clone()),
                _ => self.global(*g as usize, *span),
            },
            Expr::Var(r, span) => self.read(*r, bp, clo, *span),
            Expr::Lit(l) => Ok(lit(*l)),
            Expr::Prim(p, args, span) => self.prim_call(*p, args, *span, bp, clo),
            _ => self.eval(e, bp, clo),
        }
    }

    // No stack check here: native recursion through primitive arguments
    // either passes an application (checked) or follows the static nesting
    // of the program, which the parser has already bounded.
    fn prim_call(
        &mut self,
        p: Prim,
        args: &'p [Expr],
        span: Span,
        bp: usize,
        clo: Option<&Rc<Closure>>,
    ) -> RResult<Value> {
        match args {
            [a] => {
                let a = self.operand(a, bp, clo)?;
                self.prim1(p, a, span)
            }
            [a, b] => {
                let a = self.operand(a, bp, clo)?;
                let b = self.operand(b, bp, clo)?;
                // Scalar fast paths; matching by value lets the compiler see
                // that no destructor needs to run.
                match (a, b) {
                    (Value::Int(x), Value::Int(y)) => match arith::int_fast(p, x, y) {
                        Some(v) => Ok(v),
                        None => self.prim2(p, Value::Int(x), Value::Int(y), span),
                    },
                    (Value::Real(x), Value::Real(y)) => match arith::real_fast(p, x, y) {
                        Some(v) => Ok(v),
                        None => self.prim2(p, Value::Real(x), Value::Real(y), span),
                    },
                    (a, b) => self.prim2(p, a, b, span),
                }
            }
            _ => {
                let mut vs = Vec::with_capacity(args.len());
                for a in args {
                    vs.push(self.operand(a, bp, clo)?);
                }
                self.call_prim(p, vs, span)
            }
        }
    }

    /// Evaluates `e` in the frame starting at stack index `bp`, run by `clo`.
    /// On return the value stack has its length at entry again.
    pub fn eval(&mut self, e: &'p Expr, bp: usize, clo: Option<&Rc<Closure>>) -> RResult<Value> {
        let entry = self.stack.len();
        let r = self.eval_loop(e, bp, clo, entry);
        self.stack.truncate(entry);
        r
    }

    fn eval_loop(
        &mut self,
        mut e: &'p Expr,
        mut bp: usize,
        clo: Option<&Rc<Closure>>,
        entry: usize,
    ) -> RResult<Value> {
        // The running closure is borrowed from the caller until the first tail
        // call replaces it; only then is an owned reference kept.
        let mut owned: Option<Rc<Closure>> = None;
        loop {
            let cur = owned.as_ref().or(clo);
            match self.step(e, bp, cur, entry)? {
                Step::Done(v) => return Ok(v),
                Step::Next(next) => e = next,
                Step::TailCall(c) => {
                    let prog = self.prog;
                    e = &prog.lambdas[c.lam.0 as usize].body;
                    bp = entry;
                    owned = Some(c);
                }
            }
        }
    }

    /// One step of [`Machine::eval_loop`]: either a value, or the expression
    /// in tail position to continue with (possibly in a new frame).
    #[inline(always)]
    fn step(
        &mut self,
        e: &'p Expr,
        bp: usize,
        clo: Option<&Rc<Closure>>,
        entry: usize,
    ) -> RResult<Step<'p>> {
        let prog = self.prog;
        Ok(match e {
            Expr::Var(VarRef::Global(g), span) => Step::Done(self.global(*g as usize, *span)?),
            Expr::Var(r, span) => Step::Done(self.read(*r, bp, clo, *span)?),
            Expr::Lit(l) => Step::Done(lit(*l)),
            Expr::Lam(id) => {
                let lam = &prog.lambdas[id.0 as usize];
                let mut caps = Vec::with_capacity(lam.captures.len());
                for r in &lam.captures {
                    caps.push(self.read(*r, bp, clo, lam.span)?);
                }
                Step::Done(Value::Closure(Rc::new(Closure {
                    lam: *id,
                    arity: lam.arity,
                    captures: caps.into_boxed_slice(),
                })))
            }
            Expr::App(f, args, span) => {
                if stack::check().is_err() {
                    return err("stack depth exceeded", *span);
                }
                let fv = self.operand(f, bp, clo)?;
                // Arguments are evaluated into Rust locals first: evaluating one
                // may reuse the stack above the current frame's live slots.
                match fv {
                    Value::Closure(c) if c.arity as usize == args.len() => {
                        match args.as_slice() {
                            [x] => {
                                let xv = self.operand(x, bp, clo)?;
                                self.count_call(*span)?;
                                // Tail call: everything from `entry` up is dead now.
                                self.stack.truncate(entry);
                                self.stack.push(xv);
                            }
                            [x, y] => {
                                let xv = self.operand(x, bp, clo)?;
                                let yv = self.operand(y, bp, clo)?;
                                self.count_call(*span)?;
                                self.stack.truncate(entry);
                                self.stack.push(xv);
                                self.stack.push(yv);
                            }
                            _ => {
                                let mut vs = Vec::with_capacity(args.len());
                                for a in args {
                                    vs.push(self.operand(a, bp, clo)?);
                                }
                                self.count_call(*span)?;
                                self.stack.truncate(entry);
                                self.stack.extend(vs);
                            }
                        }
                        Step::TailCall(c)
                    }
                    other => {
                        let mut vs = Vec::with_capacity(args.len());
                        for a in args {
                            vs.push(self.operand(a, bp, clo)?);
                        }
                        Step::Done(self.apply_many(other, vs, *span)?)
                    }
                }
            }
            Expr::Let { slot, value, body } => {
                let v = self.operand(value, bp, clo)?;
                self.stack.truncate(bp + *slot as usize);
                self.stack.push(v);
                Step::Next(body)
            }
            Expr::Tuple(es) => {
                let mut vs = Vec::with_capacity(es.len());
                for x in es {
                    vs.push(self.operand(x, bp, clo)?);
                }
                Step::Done(Value::Tuple(Rc::new(vs)))
            }
            Expr::Proj(x, i) => {
                let v = self.operand(x, bp, clo)?;
                Step::Done(match v {
                    Value::Tuple(vs) => vs.get(*i as usize).cloned().unwrap_or(Value::Unit),
                    _ => Value::Unit,
                })
            }
            Expr::Inl(x) => Step::Done(Value::Inl(Rc::new(self.operand(x, bp, clo)?))),
            Expr::Inr(x) => Step::Done(Value::Inr(Rc::new(self.operand(x, bp, clo)?))),
            Expr::Case {
                scrutinee,
                slot,
                left,
                right,
            } => {
                let v = self.operand(scrutinee, bp, clo)?;
                let (payload, arm) = match v {
                    Value::Inl(p) => (p, left),
                    Value::Inr(p) => (p, right),
                    _ => return Ok(Step::Done(Value::Unit)),
                };
                self.stack.truncate(bp + *slot as usize);
                self.stack.push(Rc::unwrap_or_clone(payload));
                Step::Next(arm)
            }
            Expr::If(c, a, b) => {
                let cv = match self.operand(c, bp, clo)? {
                    Value::Bool(b) => b,
                    _ => false,
                };
                Step::Next(if cv { a } else { b })
            }
            Expr::Prim(p, args, span) => Step::Done(self.prim_call(*p, args, *span, bp, clo)?),
            Expr::PrimRef(p) => Step::Done(Value::Prim(*p, None)),
            Expr::Vector(es) => {
                let mut vs = Vec::with_capacity(es.len());
                for x in es {
                    vs.push(self.operand(x, bp, clo)?);
                }
                Step::Done(Value::vector(vs))
            }
        })
    }

    fn call_prim(&mut self, p: Prim, mut args: Vec<Value>, span: Span) -> RResult<Value> {
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

    fn prim1(&mut self, p: Prim, a: Value, span: Span) -> RResult<Value> {
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

    fn prim2(&mut self, p: Prim, a: Value, b: Value, span: Span) -> RResult<Value> {
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
                let mut items = Vec::with_capacity(n.min(1 << 20));
                for i in 0..n {
                    items.push(self.apply(b.clone(), Value::Int(i as i64), span)?);
                }
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
            Prim::Fold => Ok(Value::Prim(p, Some(Rc::new(vec![a, b])))),
            _ => arith::binary(p, &a, &b).map_err(|e| arith_err(e, p, span)),
        }
    }

    fn map(&mut self, f: Value, v: Value, span: Span) -> RResult<Value> {
        let n = v.vec_len().unwrap_or(0);
        let mut items = Vec::with_capacity(n);
        match &v {
            Value::RealVec(xs) => {
                for x in xs.iter() {
                    items.push(self.apply(f.clone(), Value::Real(*x), span)?);
                }
            }
            Value::Vec(xs) => {
                for x in xs.iter() {
                    items.push(self.apply(f.clone(), x.clone(), span)?);
                }
            }
            _ => return err("internal error: `map` over a non-vector", span),
        }
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
                    self.run_closure(c, base, span)?
                }
                _ => self.apply_many(f.clone(), vec![acc, x], span)?,
            };
        }
        Ok(acc)
    }
}
