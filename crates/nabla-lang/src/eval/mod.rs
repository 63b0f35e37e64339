//! The interpreter.
//!
//! * The core IR is first compiled to Rust closures (`compile.rs`), one per
//!   node, instantiated for the kinds of their operands; variables were
//!   already resolved to frame slots / captures / globals by the desugarer,
//!   so the hot loop never looks up a name or dispatches on the IR.
//! * Frames live on one contiguous value stack; closures are flat (they copy
//!   the values they capture). The compiled program is passed to the code
//!   by reference, so a call costs no reference count.
//! * Calls in tail position (a `let` body, an `if`/`case` branch, the last
//!   application of a body) write their arguments over the caller's frame
//!   and return to a trampoline (`Machine::drive`), so a loop written with
//!   `let rec` runs in constant native stack.
//! * Non-tail calls recurse natively; every one goes through
//!   `Machine::enter`, which counts it against [`Limits::max_calls`] and
//!   checks the native stack budget ([`crate::stack::Guard`]), turning its
//!   exhaustion into a clean "stack depth exceeded" error.
//! * The call budget is handed out in slices of [`CALLS_PER_CHECKPOINT`];
//!   between two slices (a checkpoint) the machine looks at the memory
//!   budget ([`crate::memory`]) and at its interrupt flag
//!   ([`Machine::set_interrupt`], set by the REPL's Ctrl-C handler), so
//!   memory growth in small steps is caught and an evaluation can be
//!   stopped at no cost to the hot loop. Vectors of a size known in advance
//!   are checked against the memory budget before they are built, at the
//!   operation that builds them.
//! * Top-level definitions are evaluated on first use and cached; a call of
//!   a top-level function by name jumps straight to its code.
//! * All arithmetic on numbers goes through [`arith`] (the compiled code
//!   inlines the Int and Real cases that cannot fail).
//! * Translated programs' Deltas, `eval`, `runDelta` and `deltaLet` are in
//!   [`delta`] (which also says how the monad `M` runs), their polytypic
//!   helpers in [`poly`]; the remaining dialect primitives (reference cells,
//!   `mapM`, …) are here.

pub mod arith;
mod compile;
pub mod delta;
pub mod poly;
pub mod tracing;
pub mod value;

pub use value::{Closure, Partial, Value};

use crate::core::{LamId, Lit, Program, VarRef};
use crate::diagnostic::Diagnostic;
use crate::memory::{self, MemoryExhausted, Reservation};
use crate::prim::Prim;
use crate::stack;
use crate::syntax::span::Span;
use arith::ArithError;
use delta::{Delta, DeltaMap, DeltaRef};
use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The message of the error for a run that used up [`Limits::max_calls`].
pub const STEP_LIMIT_EXCEEDED: &str = "evaluation step limit exceeded";

/// The message of the error for a run stopped by its interrupt flag.
pub const INTERRUPTED: &str = "evaluation interrupted";

/// Calls made between two checkpoints, where the machine looks at the memory
/// budget and the interrupt flag (a few microseconds of work): growth in
/// small steps (a trace, the value stack) is caught within this many calls.
pub const CALLS_PER_CHECKPOINT: u64 = 1024;

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

/// Resource limits for one evaluation (the fuzzer uses small ones). Memory
/// is bounded besides by the process's budget ([`crate::memory`]), native
/// stack by the thread's ([`crate::stack`]).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Maximum number of function applications (`None`: unlimited).
    pub max_calls: Option<u64>,
    /// Maximum length of a vector built at run time (default 2^27: a bigger
    /// request is an error whatever the memory budget).
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
    /// Bytes of `stack`'s buffer charged to the memory budget.
    stack_charged: usize,
    globals: Vec<GlobalState>,
    /// Calls left before the next checkpoint (see [`CALLS_PER_CHECKPOINT`]).
    calls_left: u64,
    /// Calls allowed after the next checkpoint ([`Limits::max_calls`]).
    calls_banked: u64,
    /// When set (from another thread), the run stops with [`INTERRUPTED`].
    interrupt: Option<Arc<AtomicBool>>,
    limits: Limits,
    /// The native stack guard of evaluations on this machine, read once:
    /// the machine is `!Send`, so it runs on the thread that created it.
    guard: stack::Guard,
}

#[cold]
pub(crate) fn err<T>(message: impl Into<String>, span: Span) -> RResult<T> {
    Err(Box::new(RuntimeError {
        message: message.into(),
        span,
    }))
}

/// Drops a value that may own memory (out of line: the interpreter's
/// loops mostly drop numbers, which need nothing).
#[inline(never)]
pub(crate) fn drop_value(v: Value) {
    drop(v);
}

#[cold]
pub(crate) fn memory_err(e: MemoryExhausted, span: Span) -> Box<RuntimeError> {
    Box::new(RuntimeError {
        message: e.to_string(),
        span,
    })
}

#[cold]
fn arith_err(e: ArithError, p: Prim, span: Span) -> Box<RuntimeError> {
    let message = e.message(p);
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
        Machine::with_compiled(Rc::new(compile::compile(prog)), limits)
    }

    /// A machine for the same program as this one (its closures are shared,
    /// not compiled again) that has evaluated nothing yet: no global is
    /// cached and the call limit is whole again. Same limits and interrupt
    /// flag. `nabla run --repeat` evaluates `main` afresh on each.
    pub fn fresh(&self) -> Machine {
        let mut m = Machine::with_compiled(Rc::clone(&self.compiled), self.limits);
        m.interrupt = self.interrupt.clone();
        m
    }

    fn with_compiled(compiled: Rc<compile::Compiled>, limits: Limits) -> Machine {
        let stack = Vec::with_capacity(1024);
        let stack_charged = stack.capacity() * size_of::<Value>();
        memory::charge(stack_charged);
        let mut m = Machine {
            globals: compiled
                .globals
                .iter()
                .map(|_| GlobalState::Pending)
                .collect(),
            compiled,
            stack,
            stack_charged,
            calls_left: 0,
            calls_banked: limits.max_calls.unwrap_or(u64::MAX),
            interrupt: None,
            limits,
            guard: stack::Guard::for_evaluation(),
        };
        m.next_checkpoint();
        m
    }

    /// Makes the run stop with the error [`INTERRUPTED`] soon after `flag`
    /// is set (it is read, never cleared, by the machine).
    pub fn set_interrupt(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = Some(flag);
    }

    /// Sets the value of global definition `index` without evaluating it
    /// (a value kept from an earlier run: the REPL's `it`).
    pub fn preset_global(&mut self, index: usize, value: Value) {
        if let Some(g) = self.globals.get_mut(index) {
            *g = GlobalState::Done(value);
        }
    }

    /// Moves up to [`CALLS_PER_CHECKPOINT`] banked calls to `calls_left`.
    fn next_checkpoint(&mut self) {
        let total = self.calls_left.saturating_add(self.calls_banked);
        self.calls_left = total.min(CALLS_PER_CHECKPOINT);
        self.calls_banked = total - self.calls_left;
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
        if self.stack_exhausted() {
            return err("stack depth exceeded", use_site);
        }
        memory::check().map_err(|e| memory_err(e, use_site))?;
        self.globals[index] = GlobalState::Running;
        let base = self.stack.len();
        let comp = Rc::clone(&self.compiled);
        let first = (comp.globals[index])(self, &comp, base, None);
        let r = self.drive(&comp, first, None, None, base);
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

    /// True once this thread has used up its native stack budget.
    #[inline(always)]
    fn stack_exhausted(&self) -> bool {
        self.guard.exceeded()
    }

    /// True when [`Machine::check_resources`] has something to do: the
    /// native stack is used up, or a checkpoint is reached. Reads no
    /// thread-local: the memory budget is looked at every
    /// [`CALLS_PER_CHECKPOINT`] calls only.
    #[inline(always)]
    fn needs_check(&self) -> bool {
        self.calls_left == 0 || self.stack_exhausted()
    }

    /// At a checkpoint: charges the value stack's growth, fails if the run
    /// was interrupted or the native stack, the call limit or the memory
    /// budget is exhausted, and sets the next checkpoint.
    #[cold]
    #[inline(never)]
    fn check_resources(&mut self, span: Span) -> RResult<()> {
        if self.stack_exhausted() {
            return err("stack depth exceeded", span);
        }
        if self
            .interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
        {
            return err(INTERRUPTED, span);
        }
        if self.calls_left == 0 {
            if self.calls_banked == 0 {
                return err(STEP_LIMIT_EXCEEDED, span);
            }
            self.next_checkpoint();
        }
        let bytes = self.stack.capacity() * size_of::<Value>();
        memory::charge(bytes);
        memory::release(self.stack_charged);
        self.stack_charged = bytes;
        memory::check().map_err(|e| memory_err(e, span))
    }

    /// Cuts the value stack back to `len` values. Numbers need no
    /// destructor, so only other values leave the loop.
    #[inline(always)]
    pub(crate) fn cut(&mut self, len: usize) {
        while self.stack.len() > len {
            if let Some(v) = self.stack.pop() {
                let v = ManuallyDrop::new(v);
                if !v.is_scalar() {
                    drop_value(ManuallyDrop::into_inner(v));
                }
            }
        }
    }

    /// The trampoline: runs calls left by tail-position code until a value
    /// results. Every call's frame starts at `base` (tail-position code
    /// leaves the arguments there); the stack is cut back to `base` before
    /// returning. `lam` and `clo` are the lambda and closure whose body
    /// produced `first` (`None` for the body of a global).
    fn drive(
        &mut self,
        comp: &compile::Compiled,
        first: RResult<compile::Tail>,
        lam: Option<LamId>,
        clo: Option<&Rc<Closure>>,
        base: usize,
    ) -> RResult<Value> {
        let mut next = first;
        let mut lam = lam;
        // The running closure: borrowed from the caller until a tail call
        // to another closure, then owned.
        let mut borrowed = clo;
        let mut owned: Option<Rc<Closure>> = None;
        loop {
            let span = match next {
                Err(e) => {
                    self.cut(base);
                    return Err(e);
                }
                Ok(compile::Tail::Value(v)) => {
                    self.cut(base);
                    return Ok(v);
                }
                Ok(compile::Tail::Call(callee, span)) => {
                    match callee {
                        compile::Callee::Same => {}
                        compile::Callee::Known(id) => {
                            lam = Some(id);
                            borrowed = None;
                            owned = None;
                        }
                        compile::Callee::Closure(k) => {
                            lam = Some(k.lam);
                            borrowed = None;
                            owned = Some(k);
                        }
                    }
                    span
                }
            };
            if let Err(e) = self.count_call(span) {
                self.cut(base);
                return Err(e);
            }
            let Some(callee) = lam.and_then(|id| comp.lambdas.get(id.0 as usize)) else {
                self.cut(base);
                return err("internal error: tail call outside a function", span);
            };
            let clo = if owned.is_some() {
                owned.as_ref()
            } else {
                borrowed
            };
            next = match &callee.body {
                compile::Body::Tail(code) => code(self, comp, base, clo),
                compile::Body::Value(code) => code(self, comp, base, clo).map(compile::Tail::Value),
            };
        }
    }

    /// Runs the body of lambda `id` (closure `clo`) in a frame at `base`,
    /// where the caller has pushed the arguments, then any tail calls it
    /// leaves. Every non-tail call goes through here: it counts the call
    /// and checks the native stack budget.
    #[inline(always)]
    pub(crate) fn enter(
        &mut self,
        comp: &compile::Compiled,
        id: LamId,
        base: usize,
        clo: Option<&Rc<Closure>>,
        span: Span,
    ) -> RResult<Value> {
        if self.needs_check()
            && let Err(e) = self.check_resources(span)
        {
            self.cut(base);
            return Err(e);
        }
        self.calls_left -= 1;
        let Some(lam) = comp.lambdas.get(id.0 as usize) else {
            self.cut(base);
            return err("internal error: unknown function", span);
        };
        match &lam.body {
            compile::Body::Value(code) => {
                let r = code(self, comp, base, clo);
                self.cut(base);
                r
            }
            compile::Body::Tail(code) => match code(self, comp, base, clo) {
                Ok(compile::Tail::Value(v)) => {
                    self.cut(base);
                    Ok(v)
                }
                other => self.drive(comp, other, Some(id), clo, base),
            },
        }
    }

    /// Creates a closure over lambda `id`, capturing from the current frame.
    pub(crate) fn make_closure(
        &mut self,
        comp: &compile::Compiled,
        id: LamId,
        bp: usize,
        clo: Option<&Rc<Closure>>,
    ) -> RResult<Value> {
        let Some(lam) = comp.lambdas.get(id.0 as usize) else {
            return err("internal error: unknown function", Span::default());
        };
        let mut caps = Vec::with_capacity(lam.captures.len());
        for r in &lam.captures {
            caps.push(self.read(*r, bp, clo, lam.span)?);
        }
        Ok(Value::Closure(Rc::new(Closure {
            lam: id,
            arity: lam.arity,
            captures: caps.into_boxed_slice(),
        })))
    }

    /// Applies `f` to each argument produced by `arg`, collecting the
    /// results into a vector (contiguous reals when they are all Reals);
    /// the function value is inspected once, not per element.
    fn apply_each(
        &mut self,
        f: &Value,
        n: usize,
        mut arg: impl FnMut(usize) -> Value,
        span: Span,
    ) -> RResult<Value> {
        let comp = Rc::clone(&self.compiled);
        // The result needs at least `n` reals: hold them before starting.
        let mut held = Reservation::new(n * size_of::<f64>()).map_err(|e| memory_err(e, span))?;
        let mut reals: Vec<f64> = Vec::with_capacity(n.min(1 << 20));
        let mut values: Option<Vec<Value>> = None;
        for i in 0..n {
            let v = self.apply_element(&comp, f, arg(i), span)?;
            match (&mut values, v) {
                (None, Value::Real(x)) => reals.push(x),
                (None, v) => {
                    // The first result that is not a plain Real: the result
                    // needs `n` values instead.
                    drop(held);
                    held = Reservation::new(n * size_of::<Value>())
                        .map_err(|e| memory_err(e, span))?;
                    let mut vs = Vec::with_capacity(n.min(1 << 20));
                    vs.extend(std::mem::take(&mut reals).into_iter().map(Value::Real));
                    vs.push(v);
                    values = Some(vs);
                }
                (Some(vs), v) => vs.push(v),
            }
        }
        drop(held);
        Ok(match values {
            Some(vs) => Value::values(vs),
            None if n == 0 => Value::values(Vec::new()),
            None => Value::reals(reals),
        })
    }

    /// `f x` for an element of `build`, `map` or a sum of them.
    fn apply_element(
        &mut self,
        comp: &compile::Compiled,
        f: &Value,
        x: Value,
        span: Span,
    ) -> RResult<Value> {
        match f {
            Value::Closure(c) if c.arity == 1 => {
                let base = self.stack.len();
                self.stack.push(x);
                self.enter(comp, c.lam, base, Some(c), span)
            }
            _ => self.apply(f.clone(), x, span),
        }
    }

    /// The size `n` of `build n f`, checked.
    fn build_size(&self, n: &Value, span: Span) -> RResult<usize> {
        let &Value::Int(n) = n else {
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
        Ok(n)
    }

    /// `sum (build n f)` (`made` is `Build`, `source` is `n`) or `sum (map
    /// f v)` (`Map`, `v`), `zero` the sum's: a sum of reals adds each element
    /// into its lane ([`crate::prim::sum_in_lanes`]) as soon as `f` makes
    /// it, without making the vector. This is the language's order of
    /// evaluation, not an optimisation only: where reals record Deltas, each
    /// element's come just before its addition's, and native code
    /// (`translate::dual`) records them in the same order, which decides the
    /// order in which the sweep adds into an adjoint that several reach. A
    /// sum of Ints makes every element before it adds any (an addition can
    /// fail). `span` is the sum's, `made_at` the `build`'s or `map`'s.
    pub(crate) fn sum_as_made(
        &mut self,
        zero: Value,
        (made, f, source): (Prim, Value, Value),
        made_at: Span,
        span: Span,
    ) -> RResult<Value> {
        if matches!(zero, Value::Int(_)) {
            let v = match made {
                Prim::Build => self.prim2(made, source, f, made_at)?,
                _ => self.prim2(made, f, source, made_at)?,
            };
            return self.prim2(Prim::Sum, zero, v, span);
        }
        let n = match made {
            Prim::Build => self.build_size(&source, made_at)?,
            _ => match source.vec_len() {
                Some(n) => n,
                None => return err("internal error: `map` over a non-vector", made_at),
            },
        };
        let comp = Rc::clone(&self.compiled);
        let arg = |i: usize| match made {
            Prim::Build => Value::Int(i as i64),
            _ => source.vec_get(i).unwrap_or(Value::Unit),
        };
        // Plain reals add in f64 lanes until an element is not one.
        let mut plain = [-0.0; crate::prim::SUM_LANES];
        let mut i = 0;
        let mut other = None;
        while i < n {
            match self.apply_element(&comp, &f, arg(i), made_at)? {
                Value::Real(x) => plain[i % crate::prim::SUM_LANES] += x,
                x => {
                    other = Some(x);
                    break;
                }
            }
            i += 1;
        }
        let Some(x) = other else {
            let [a, b, c, d] = plain;
            return Ok(if n == 0 {
                zero
            } else {
                Value::Real(((a + b) + c) + d)
            });
        };
        let mut add = |acc: Value, x: Value| {
            arith::binary(Prim::Add, &acc, &x).map_err(|e| arith_err(e, Prim::Add, span))
        };
        let mut lanes = crate::prim::Lanes::of_plain(plain, i, Value::Real);
        lanes.add(x, &mut add)?;
        for i in i + 1..n {
            let x = self.apply_element(&comp, &f, arg(i), made_at)?;
            lanes.add(x, &mut add)?;
        }
        lanes.total(add).unwrap_or(Ok(zero))
    }

    /// Applies a function value to an argument.
    pub fn apply(&mut self, f: Value, x: Value, span: Span) -> RResult<Value> {
        match f {
            Value::Closure(c) if c.arity == 1 => {
                let comp = Rc::clone(&self.compiled);
                let base = self.stack.len();
                self.stack.push(x);
                self.enter(&comp, c.lam, base, Some(&c), span)
            }
            other => self.apply_many(other, vec![x], span),
        }
    }

    /// Applies a function value to several arguments (curried semantics:
    /// too few arguments give a partial application, too many apply the
    /// result to the rest).
    pub fn apply_many(&mut self, mut f: Value, mut args: Vec<Value>, span: Span) -> RResult<Value> {
        let comp = Rc::clone(&self.compiled);
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
                    f = self.enter(&comp, c.lam, base, Some(&c), span)?;
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
                Value::Poly(pf) => {
                    let rest = args.split_off(1);
                    let x = args.pop().unwrap_or(Value::Unit);
                    f = match poly::apply(&pf, &x) {
                        Ok(v) => v,
                        Err(m) => return err(m, span),
                    };
                    args = rest;
                }
                _ => return err("internal error: applying a non-function", span),
            }
        }
    }

    /// Counts a tail call, with the checks of [`Machine::enter`] (a loop
    /// may grow a trace or the value stack).
    #[inline]
    fn count_call(&mut self, span: Span) -> RResult<()> {
        if self.needs_check() {
            self.check_resources(span)?;
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
            0 => self.prim0(p, span),
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
            3 if matches!(
                p,
                Prim::Fold | Prim::FoldM | Prim::DLet | Prim::EvalDelta | Prim::Fail
            ) =>
            {
                let c = args.pop().unwrap_or(Value::Unit);
                let b = args.pop().unwrap_or(Value::Unit);
                let a = args.pop().unwrap_or(Value::Unit);
                match p {
                    Prim::Fold => self.fold(a, b, c, span),
                    Prim::FoldM => self.fold_m(a, b, c, span),
                    Prim::Fail => match (a, b, c) {
                        (Value::Int(code), Value::Int(a), Value::Int(b)) => {
                            err(crate::prim::fail_message(code, a, b), span)
                        }
                        _ => err("internal error: bad operands for `prim'fail`", span),
                    },
                    Prim::DLet => match (a, b, c) {
                        (Value::Int(id), Value::Delta(rhs), Value::Delta(body)) => {
                            Ok(Value::Delta(DeltaRef::new(Delta::Let(id, rhs, body))))
                        }
                        _ => err("internal error: bad operands for `Let`", span),
                    },
                    _ => self.eval_delta(a, b, c, span),
                }
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

    /// The constants of translated programs.
    fn prim0(&mut self, p: Prim, span: Span) -> RResult<Value> {
        match p {
            Prim::DZero => Ok(Value::Delta(DeltaRef::zero())),
            Prim::EmptyMap => Ok(Value::DeltaMap(Rc::new(DeltaMap::empty()))),
            Prim::ShapeMismatch => err("cotangent and output differ in shape", span),
            _ => err(
                format!("internal error: `{}` without arguments", p.info().name),
                span,
            ),
        }
    }

    pub(crate) fn prim1(&mut self, p: Prim, a: Value, span: Span) -> RResult<Value> {
        match p {
            // A computation runs where it is evaluated (see `delta`).
            Prim::Pure => Ok(a),
            Prim::DeltaLet => match a {
                Value::Delta(d) => match delta::delta_let(d) {
                    Ok(id) => Ok(Value::Int(id)),
                    Err(m) => err(m, span),
                },
                _ => err("internal error: `deltaLet` of a non-Delta", span),
            },
            Prim::DVar => match a {
                Value::Int(id) => Ok(Value::Delta(DeltaRef::new(Delta::Var(id)))),
                _ => err("internal error: `Var` of a non-Int", span),
            },
            Prim::NewRef => Ok(Value::Ref(Rc::new(RefCell::new(a)))),
            Prim::Deref => match a {
                Value::Ref(r) => Ok(r.borrow().clone()),
                _ => err("internal error: `!` of a non-reference", span),
            },
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
                // Reals in lanes, as `sum_reals` (a lane starts at its first
                // element: `sum [-0.0, x]` keeps its sign whether or not `x`
                // is perturbed); `a`, the zero of the type, only for an
                // empty vector. Ints left to right (which overflow is met
                // first).
                Value::Vec(xs) => {
                    let add = |acc: Value, x: Value| {
                        arith::binary(Prim::Add, &acc, &x)
                            .map_err(|e| arith_err(e, Prim::Add, span))
                    };
                    if matches!(a, Value::Int(_)) {
                        xs.iter().cloned().try_fold(a, add)
                    } else {
                        crate::prim::sum_in_lanes(xs.iter().cloned().map(Ok), add).unwrap_or(Ok(a))
                    }
                }
                _ => err("internal error: `sum` of a non-vector", span),
            },
            Prim::Build => {
                let n = self.build_size(&a, span)?;
                self.apply_each(&b, n, |i| Value::Int(i as i64), span)
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
                let pair = Value::Tuple(Rc::new(vec![Value::Unit, Value::Unit]));
                let bytes = n * (size_of::<Value>() + pair.box_bytes());
                let held = Reservation::new(bytes).map_err(|e| memory_err(e, span))?;
                let mut items = Vec::with_capacity(n);
                for i in 0..n {
                    let x = a.vec_get(i).unwrap_or(Value::Unit);
                    let y = b.vec_get(i).unwrap_or(Value::Unit);
                    items.push(Value::Tuple(Rc::new(vec![x, y])));
                }
                drop(held);
                Ok(Value::values(items))
            }
            Prim::Fold
            | Prim::Jvp
            | Prim::CustomJvp
            | Prim::FoldM
            | Prim::DLet
            | Prim::EvalDelta
            | Prim::Fail => Ok(Value::Prim(p, Some(Rc::new(vec![a, b])))),
            Prim::MapM => self.map(a, b, span),
            Prim::BuildM => self.prim2(Prim::Build, a, b, span),
            Prim::DScale => match (a, b) {
                (Value::Real(x), Value::Delta(u)) => {
                    Ok(Value::Delta(DeltaRef::new(Delta::Scale(x, u))))
                }
                (x, Value::Delta(_)) if x.is_tagged() => err(
                    "cannot differentiate through a Delta (`Scale` of a real being differentiated)",
                    span,
                ),
                _ => err("internal error: bad operands for `Scale`", span),
            },
            Prim::DAdd => match (a, b) {
                (Value::Delta(u1), Value::Delta(u2)) => {
                    Ok(Value::Delta(DeltaRef::new(Delta::Add(u1, u2))))
                }
                _ => err("internal error: bad operands for `Add`", span),
            },
            Prim::LookupOrZero => match (a, b) {
                (Value::Int(id), Value::DeltaMap(m)) => Ok(Value::Real(m.lookup_or_zero(id))),
                _ => err("internal error: bad operands for `lookupOrZero`", span),
            },
            Prim::AddTo => match a {
                Value::Ref(r) => {
                    let sum = arith::binary(Prim::Add, &r.borrow(), &b)
                        .map_err(|e| arith_err(e, Prim::Add, span))?;
                    *r.borrow_mut() = sum;
                    Ok(Value::Unit)
                }
                _ => err("internal error: `+=` on a non-reference", span),
            },
            _ if p.is_derivative() => self.differentiate(p, vec![a, b], span),
            _ => arith::binary(p, &a, &b).map_err(|e| arith_err(e, p, span)),
        }
    }

    fn map(&mut self, f: Value, v: Value, span: Span) -> RResult<Value> {
        match &v {
            Value::RealVec(xs) => self.apply_each(&f, xs.len(), |i| Value::Real(xs[i]), span),
            Value::Vec(xs) => self.apply_each(&f, xs.len(), |i| xs[i].clone(), span),
            _ => err("internal error: `map` over a non-vector", span),
        }
    }

    /// `eval x u m` (Krawiec et al. Fig. 11), updating `m` in place when no
    /// one else holds it.
    fn eval_delta(&mut self, x: Value, u: Value, m: Value, span: Span) -> RResult<Value> {
        let (x, u, mut m) = match (x, u, m) {
            (Value::Real(x), Value::Delta(u), Value::DeltaMap(m)) => (x, u, m),
            (x, _, _) if x.is_tagged() => {
                return err(
                    "cannot differentiate through `eval` (a real being differentiated)",
                    span,
                );
            }
            _ => return err("internal error: bad operands for `eval`", span),
        };
        // `eval` counts its steps against the whole call limit (it does not
        // look at the interrupt flag); the rest is sliced again after.
        let mut steps = self.calls_left.saturating_add(self.calls_banked);
        self.calls_banked = 0;
        let r = delta::eval(
            x,
            &u,
            Rc::make_mut(&mut m),
            self.limits.max_vector_len,
            &mut steps,
        );
        self.calls_left = steps;
        self.next_checkpoint();
        match r {
            Ok(()) => Ok(Value::DeltaMap(m)),
            Err(msg) => err(msg, span),
        }
    }

    /// `foldM f init v`: `f : b -> M (a -> M b)`; each step's computations
    /// have already run, so this is `fold (fun acc x -> f acc x) init v`.
    fn fold_m(&mut self, f: Value, init: Value, v: Value, span: Span) -> RResult<Value> {
        let n = v.vec_len().unwrap_or(0);
        let mut acc = init;
        for i in 0..n {
            let x = v.vec_get(i).unwrap_or(Value::Unit);
            acc = self.apply_many(f.clone(), vec![acc, x], span)?;
        }
        Ok(acc)
    }

    fn fold(&mut self, f: Value, init: Value, v: Value, span: Span) -> RResult<Value> {
        let n = v.vec_len().unwrap_or(0);
        let comp = Rc::clone(&self.compiled);
        let mut acc = init;
        for i in 0..n {
            let x = v.vec_get(i).unwrap_or(Value::Unit);
            acc = match &f {
                // The common case `fold (fun acc x -> ...)`: no partial application.
                Value::Closure(c) if c.arity == 2 => {
                    let base = self.stack.len();
                    self.stack.push(acc);
                    self.stack.push(x);
                    self.enter(&comp, c.lam, base, Some(c), span)?
                }
                _ => self.apply_many(f.clone(), vec![acc, x], span)?,
            };
        }
        Ok(acc)
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        memory::release(self.stack_charged);
    }
}
