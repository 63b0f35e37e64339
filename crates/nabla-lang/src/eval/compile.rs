//! Closure compilation: each core expression becomes a Rust closure that
//! evaluates it, specialised on the shape of its operands (a frame slot, a
//! literal, anything else), so the interpreter does no dispatch on the IR at
//! run time.
//!
//! Code in tail position ([`TCode`]) does not call a function in tail
//! position itself: it returns [`Tail::Call`] and the trampoline in
//! [`Machine::drive`] makes the call, so tail calls take no native stack.

use super::value::{Closure, Value};
use super::{Machine, RResult, err, lit};
use crate::core::{Expr, LamId, Program, VarRef};
use crate::prim::Prim;
use crate::syntax::span::Span;
use std::rc::Rc;

/// Code computing an `R`.
pub(crate) type Code<R> = Box<dyn Fn(&mut Machine, usize, Option<&Rc<Closure>>) -> RResult<R>>;
/// Code computing a value.
pub(crate) type VCode = Box<dyn Fn(&mut Machine, usize, Option<&Rc<Closure>>) -> RResult<Value>>;
/// Code in tail position: a value, or a call still to be made.
pub(crate) type TCode = Box<dyn Fn(&mut Machine, usize, Option<&Rc<Closure>>) -> RResult<Tail>>;

/// Code computing a condition.
type CondCode = Box<dyn Fn(&mut Machine, usize, Option<&Rc<Closure>>) -> RResult<bool>>;

/// Arguments of a pending tail call.
pub(crate) enum Args {
    One(Value),
    Two(Value, Value),
    Many(Vec<Value>),
}

/// Result of code in tail position.
pub(crate) enum Tail {
    Value(Value),
    Call(Rc<Closure>, Args, Span),
}

impl From<Value> for Tail {
    fn from(v: Value) -> Tail {
        Tail::Value(v)
    }
}

pub(crate) struct CLambda {
    pub(crate) captures: Vec<VarRef>,
    pub(crate) body: TCode,
    pub(crate) span: Span,
}

/// A compiled program.
pub(crate) struct Compiled {
    pub(crate) lambdas: Vec<CLambda>,
    pub(crate) globals: Vec<TCode>,
    pub(crate) global_names: Vec<String>,
}

/// An operand: fetched inline when it is a slot or a literal.
enum Opnd {
    Local(usize),
    Capture(usize),
    Lit(Value),
    /// A binary primitive on a frame slot and a literal (`n - 1`, `i + 1`),
    /// computed inline.
    LocalLit(Prim, usize, Value, Span),
    /// A binary primitive on two frame slots (`x * x`), computed inline.
    LocalLocal(Prim, usize, usize, Span),
    Code(VCode),
}

impl Opnd {
    #[inline(always)]
    fn fetch(&self, m: &mut Machine, bp: usize, clo: Option<&Rc<Closure>>) -> RResult<Value> {
        match self {
            Opnd::Local(i) => match m.stack.get(bp + i) {
                Some(v) => Ok(v.clone()),
                None => err("internal error: bad local", Span::default()),
            },
            Opnd::Capture(i) => match clo.and_then(|c| c.captures.get(*i)) {
                Some(v) => Ok(v.clone()),
                None => err("internal error: bad capture", Span::default()),
            },
            Opnd::Lit(v) => Ok(v.clone()),
            Opnd::LocalLit(p, i, k, span) => {
                let x = match m.stack.get(bp + i) {
                    Some(v) => v.clone(),
                    None => return err("internal error: bad local", *span),
                };
                match (x, k) {
                    (Value::Int(x), Value::Int(y)) => match super::arith::int_fast(*p, x, *y) {
                        Some(v) => Ok(v),
                        None => m.prim2(*p, Value::Int(x), Value::Int(*y), *span),
                    },
                    (Value::Real(x), Value::Real(y)) => match super::arith::real_fast(*p, x, *y) {
                        Some(v) => Ok(v),
                        None => m.prim2(*p, Value::Real(x), Value::Real(*y), *span),
                    },
                    (x, k) => m.prim2(*p, x, k.clone(), *span),
                }
            }
            Opnd::LocalLocal(p, i, j, span) => {
                let (x, y) = match (m.stack.get(bp + i), m.stack.get(bp + j)) {
                    (Some(x), Some(y)) => (x.clone(), y.clone()),
                    _ => return err("internal error: bad local", *span),
                };
                match (x, y) {
                    (Value::Int(x), Value::Int(y)) => match super::arith::int_fast(*p, x, y) {
                        Some(v) => Ok(v),
                        None => m.prim2(*p, Value::Int(x), Value::Int(y), *span),
                    },
                    (Value::Real(x), Value::Real(y)) => match super::arith::real_fast(*p, x, y) {
                        Some(v) => Ok(v),
                        None => m.prim2(*p, Value::Real(x), Value::Real(y), *span),
                    },
                    (x, y) => m.prim2(*p, x, y, *span),
                }
            }
            Opnd::Code(c) => c(m, bp, clo),
        }
    }
}

pub(crate) fn compile(prog: &Program) -> Compiled {
    let cx = Cx { prog };
    Compiled {
        lambdas: prog
            .lambdas
            .iter()
            .map(|l| CLambda {
                captures: l.captures.clone(),
                body: cx.tcode(&l.body),
                span: l.span,
            })
            .collect(),
        globals: prog.globals.iter().map(|g| cx.tcode(&g.body)).collect(),
        global_names: prog.globals.iter().map(|g| g.name.clone()).collect(),
    }
}

struct Cx<'a> {
    prog: &'a Program,
}

impl Cx<'_> {
    /// If `f` names a top-level function of exactly `n` parameters (a
    /// lambda with no captures), its lambda: such calls are compiled as
    /// direct jumps, with no function value fetched or checked.
    fn known_function(&self, f: &Expr, n: usize) -> Option<LamId> {
        let Expr::Var(VarRef::Global(g), _) = f else {
            return None;
        };
        let Expr::Lam(id) = &self.prog.globals.get(*g as usize)?.body else {
            return None;
        };
        let lam = self.prog.lambdas.get(id.0 as usize)?;
        (lam.captures.is_empty() && lam.arity as usize == n).then_some(*id)
    }

    fn opnd(&self, e: &Expr) -> Opnd {
        match e {
            Expr::Var(VarRef::Local(i), _) => Opnd::Local(*i as usize),
            Expr::Var(VarRef::Capture(i), _) => Opnd::Capture(*i as usize),
            Expr::Lit(l) => Opnd::Lit(lit(*l)),
            Expr::Prim(p, args, span) => match args.as_slice() {
                [Expr::Var(VarRef::Local(i), _), Expr::Lit(l)] => {
                    Opnd::LocalLit(*p, *i as usize, lit(*l), *span)
                }
                [
                    Expr::Var(VarRef::Local(i), _),
                    Expr::Var(VarRef::Local(j), _),
                ] => Opnd::LocalLocal(*p, *i as usize, *j as usize, *span),
                _ => Opnd::Code(self.vcode(e)),
            },
            _ => Opnd::Code(self.vcode(e)),
        }
    }

    /// Code for a condition. Comparisons of two numbers, the usual
    /// condition, yield a `bool` directly, without building a value.
    fn cond(&self, e: &Expr) -> CondCode {
        if let Expr::Prim(
            p @ (Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne),
            args,
            span,
        ) = e
            && let [a, b] = args.as_slice()
        {
            let (p, span, a, b) = (*p, *span, self.opnd(a), self.opnd(b));
            return Box::new(move |m, bp, clo| {
                let x = a.fetch(m, bp, clo)?;
                let y = b.fetch(m, bp, clo)?;
                Ok(match (x, y) {
                    (Value::Int(x), Value::Int(y)) => super::arith::compare(p, x, y),
                    (Value::Real(x), Value::Real(y)) => super::arith::compare(p, x, y),
                    (x, y) => Self::truthy(m.prim2(p, x, y, span)?),
                })
            });
        }
        let c = self.opnd(e);
        Box::new(move |m, bp, clo| Ok(Self::truthy(c.fetch(m, bp, clo)?)))
    }

    fn truthy(v: Value) -> bool {
        matches!(v, Value::Bool(true))
    }

    /// Code for `e` in tail position.
    fn tcode(&self, e: &Expr) -> TCode {
        match e {
            Expr::If(c, a, b) => {
                let (c, a, b) = (self.cond(c), self.tcode(a), self.tcode(b));
                Box::new(move |m, bp, clo| {
                    if c(m, bp, clo)? {
                        a(m, bp, clo)
                    } else {
                        b(m, bp, clo)
                    }
                })
            }
            Expr::Let { slot, value, body } => {
                let (slot, v, b) = (*slot as usize, self.opnd(value), self.tcode(body));
                Box::new(move |m, bp, clo| {
                    let x = v.fetch(m, bp, clo)?;
                    m.stack.truncate(bp + slot);
                    m.stack.push(x);
                    b(m, bp, clo)
                })
            }
            Expr::Case {
                scrutinee,
                slot,
                left,
                right,
            } => {
                let (s, slot, l, r) = (
                    self.opnd(scrutinee),
                    *slot as usize,
                    self.tcode(left),
                    self.tcode(right),
                );
                Box::new(move |m, bp, clo| {
                    let (payload, left) = match s.fetch(m, bp, clo)? {
                        Value::Inl(p) => (p, true),
                        Value::Inr(p) => (p, false),
                        _ => return err("internal error: case on a non-sum", Span::default()),
                    };
                    m.stack.truncate(bp + slot);
                    m.stack.push(Rc::unwrap_or_clone(payload));
                    if left { l(m, bp, clo) } else { r(m, bp, clo) }
                })
            }
            Expr::App(f, args, span) => {
                let span = *span;
                let f = self.opnd(f);
                let args: Vec<Opnd> = args.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, bp, clo| {
                    let fv = f.fetch(m, bp, clo)?;
                    match fv {
                        Value::Closure(c) if c.arity as usize == args.len() => {
                            let a = match args.as_slice() {
                                [x] => Args::One(x.fetch(m, bp, clo)?),
                                [x, y] => {
                                    let xv = x.fetch(m, bp, clo)?;
                                    Args::Two(xv, y.fetch(m, bp, clo)?)
                                }
                                _ => {
                                    let mut vs = Vec::with_capacity(args.len());
                                    for a in &args {
                                        vs.push(a.fetch(m, bp, clo)?);
                                    }
                                    Args::Many(vs)
                                }
                            };
                            Ok(Tail::Call(c, a, span))
                        }
                        other => {
                            let mut vs = Vec::with_capacity(args.len());
                            for a in &args {
                                vs.push(a.fetch(m, bp, clo)?);
                            }
                            Ok(Tail::Value(m.apply_many(other, vs, span)?))
                        }
                    }
                })
            }
            Expr::Var(VarRef::Local(i), _) => {
                let i = *i as usize;
                Box::new(move |m, bp, _| match m.stack.get(bp + i) {
                    Some(v) => Ok(Tail::Value(v.clone())),
                    None => err("internal error: bad local", Span::default()),
                })
            }
            Expr::Lit(l) => {
                let v = lit(*l);
                Box::new(move |_, _, _| Ok(Tail::Value(v.clone())))
            }
            Expr::Prim(p, args, span) => self.prim::<Tail>(*p, args, *span),
            _ => {
                let v = self.vcode(e);
                Box::new(move |m, bp, clo| Ok(Tail::Value(v(m, bp, clo)?)))
            }
        }
    }

    /// Code computing the value of `e` (not in tail position).
    fn vcode(&self, e: &Expr) -> VCode {
        match e {
            Expr::Var(VarRef::Local(i), _) => {
                let i = *i as usize;
                Box::new(move |m, bp, _| match m.stack.get(bp + i) {
                    Some(v) => Ok(v.clone()),
                    None => err("internal error: bad local", Span::default()),
                })
            }
            Expr::Var(VarRef::Capture(i), span) => {
                let (i, span) = (*i as usize, *span);
                Box::new(move |_, _, clo| match clo.and_then(|c| c.captures.get(i)) {
                    Some(v) => Ok(v.clone()),
                    None => err("internal error: bad capture", span),
                })
            }
            Expr::Var(VarRef::SelfRef, span) => {
                let span = *span;
                Box::new(move |_, _, clo| match clo {
                    Some(c) => Ok(Value::Closure(c.clone())),
                    None => err("internal error: no enclosing function", span),
                })
            }
            Expr::Var(VarRef::Global(g), span) => {
                let (g, span) = (*g as usize, *span);
                Box::new(move |m, _, _| m.global(g, span))
            }
            Expr::Lit(l) => {
                let v = lit(*l);
                Box::new(move |_, _, _| Ok(v.clone()))
            }
            Expr::Lam(id) => {
                let id: LamId = *id;
                Box::new(move |m, bp, clo| m.make_closure(id, bp, clo))
            }
            Expr::App(f, args, span) if self.known_function(f, args.len()).is_some() => {
                let span = *span;
                let id = self.known_function(f, args.len()).unwrap_or(LamId(0));
                let args: Vec<Opnd> = args.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, bp, clo| {
                    let base = match args.as_slice() {
                        [x] => {
                            let xv = x.fetch(m, bp, clo)?;
                            let base = m.stack.len();
                            m.stack.push(xv);
                            base
                        }
                        _ => {
                            let mut vs = Vec::with_capacity(args.len());
                            for a in &args {
                                vs.push(a.fetch(m, bp, clo)?);
                            }
                            let base = m.stack.len();
                            m.stack.extend(vs);
                            base
                        }
                    };
                    m.call_known(id, base, span)
                })
            }
            Expr::App(f, args, span) => {
                let span = *span;
                let f = self.opnd(f);
                let args: Vec<Opnd> = args.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, bp, clo| {
                    let fv = f.fetch(m, bp, clo)?;
                    match fv {
                        Value::Closure(c) if c.arity as usize == args.len() => {
                            // Evaluate every argument before pushing any: evaluating
                            // one may reuse the stack above the live slots.
                            match args.as_slice() {
                                [x] => {
                                    let xv = x.fetch(m, bp, clo)?;
                                    let base = m.stack.len();
                                    m.stack.push(xv);
                                    m.call(c, base, span)
                                }
                                [x, y] => {
                                    let xv = x.fetch(m, bp, clo)?;
                                    let yv = y.fetch(m, bp, clo)?;
                                    let base = m.stack.len();
                                    m.stack.push(xv);
                                    m.stack.push(yv);
                                    m.call(c, base, span)
                                }
                                _ => {
                                    let mut vs = Vec::with_capacity(args.len());
                                    for a in &args {
                                        vs.push(a.fetch(m, bp, clo)?);
                                    }
                                    let base = m.stack.len();
                                    m.stack.extend(vs);
                                    m.call(c, base, span)
                                }
                            }
                        }
                        other => {
                            let mut vs = Vec::with_capacity(args.len());
                            for a in &args {
                                vs.push(a.fetch(m, bp, clo)?);
                            }
                            m.apply_many(other, vs, span)
                        }
                    }
                })
            }
            Expr::Let { .. } | Expr::If(..) | Expr::Case { .. } => {
                // Run the tail-position code and finish any call it leaves.
                let t = self.tcode(e);
                Box::new(move |m, bp, clo| {
                    let r = t(m, bp, clo);
                    m.finish(r)
                })
            }
            Expr::Tuple(es) => {
                let es: Vec<Opnd> = es.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, bp, clo| {
                    let mut vs = Vec::with_capacity(es.len());
                    for x in &es {
                        vs.push(x.fetch(m, bp, clo)?);
                    }
                    Ok(Value::Tuple(Rc::new(vs)))
                })
            }
            Expr::Proj(x, i) => {
                let (x, i) = (self.opnd(x), *i as usize);
                Box::new(move |m, bp, clo| match x.fetch(m, bp, clo)? {
                    Value::Tuple(vs) => Ok(vs.get(i).cloned().unwrap_or(Value::Unit)),
                    _ => err(
                        "internal error: projection from a non-tuple",
                        Span::default(),
                    ),
                })
            }
            Expr::Inl(x) => {
                let x = self.opnd(x);
                Box::new(move |m, bp, clo| Ok(Value::Inl(Rc::new(x.fetch(m, bp, clo)?))))
            }
            Expr::Inr(x) => {
                let x = self.opnd(x);
                Box::new(move |m, bp, clo| Ok(Value::Inr(Rc::new(x.fetch(m, bp, clo)?))))
            }
            Expr::Vector(es) => {
                let es: Vec<Opnd> = es.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, bp, clo| {
                    let mut vs = Vec::with_capacity(es.len());
                    for x in &es {
                        vs.push(x.fetch(m, bp, clo)?);
                    }
                    Ok(Value::vector(vs))
                })
            }
            Expr::PrimRef(p) => {
                let p = *p;
                Box::new(move |_, _, _| Ok(Value::Prim(p, None)))
            }
            Expr::Prim(p, args, span) => self.prim::<Value>(*p, args, *span),
        }
    }

    /// Code for a primitive call, producing a value (`R = Value`) or, in
    /// tail position, a finished [`Tail`] (`R = Tail`) without a wrapper.
    fn prim<R: From<Value> + 'static>(&self, p: Prim, args: &[Expr], span: Span) -> Code<R> {
        match args {
            [a] => {
                let a = self.opnd(a);
                Box::new(move |m, bp, clo| {
                    let x = a.fetch(m, bp, clo)?;
                    m.prim1(p, x, span).map(R::from)
                })
            }
            [a, b] => {
                let (a, b) = (self.opnd(a), self.opnd(b));
                Box::new(move |m, bp, clo| {
                    let x = a.fetch(m, bp, clo)?;
                    let y = b.fetch(m, bp, clo)?;
                    // Scalar fast paths; matching by value lets the compiler see
                    // that no destructor needs to run.
                    match (x, y) {
                        (Value::Int(x), Value::Int(y)) => match super::arith::int_fast(p, x, y) {
                            Some(v) => Ok(R::from(v)),
                            None => m.prim2(p, Value::Int(x), Value::Int(y), span).map(R::from),
                        },
                        (Value::Real(x), Value::Real(y)) => {
                            match super::arith::real_fast(p, x, y) {
                                Some(v) => Ok(R::from(v)),
                                None => m
                                    .prim2(p, Value::Real(x), Value::Real(y), span)
                                    .map(R::from),
                            }
                        }
                        // Reals tagged by a derivative: straight to the AD arithmetic.
                        (x, y) => match super::arith::tagged_fast(p, &x, &y) {
                            Some(v) => Ok(R::from(v)),
                            None => m.prim2(p, x, y, span).map(R::from),
                        },
                    }
                })
            }
            _ => {
                let args: Vec<Opnd> = args.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, bp, clo| {
                    let mut vs = Vec::with_capacity(args.len());
                    for a in &args {
                        vs.push(a.fetch(m, bp, clo)?);
                    }
                    m.call_prim(p, vs, span).map(R::from)
                })
            }
        }
    }
}
