//! Closure compilation: each core expression becomes a Rust closure that
//! evaluates it, so the interpreter does no dispatch on the IR at run time.
//!
//! The closures of the hot node kinds (binary and unary primitives,
//! conditions, calls of known functions) are generic over the *kinds* of
//! their operands (a frame slot, a capture, a literal, a slot combined with
//! a literal or another slot, or arbitrary code), and instantiated for the
//! kinds found at compile time: fetching `n` in `n - 1` is then a load and a
//! tag check, with no dispatch on the operand and no clone or destructor
//! call for numbers.
//!
//! Code in tail position ([`TCode`]) does not call a function in tail
//! position itself: it writes the arguments over its own frame and returns
//! [`Tail::Call`], and the trampoline in [`Machine::drive`] makes the call,
//! so tail calls take no native stack. Code not in tail position
//! ([`VCode`]) calls functions directly.

use super::value::{Closure, Value};
use super::{Machine, RResult, arith, err, lit};
use crate::core::{Expr, LamId, Program, VarRef};
use crate::prim::{Prim, RealFn};
use crate::syntax::span::Span;
use std::mem::ManuallyDrop;
use std::rc::Rc;

/// The closure whose body is running (`None` in a top-level function
/// without captures, and in the body of a global).
pub(crate) type Clo<'a> = Option<&'a Rc<Closure>>;

/// Code computing an `R` in the frame starting at stack index `bp`.
pub(crate) type Code<R> = Box<dyn Fn(&mut Machine, &Compiled, usize, Clo<'_>) -> RResult<R>>;
/// Code computing a value.
pub(crate) type VCode = Code<Value>;
/// Code in tail position: a value, or a call still to be made.
pub(crate) type TCode = Code<Tail>;

/// The function of a pending tail call. Its arguments are already in place
/// at the start of the frame of the code that returned it.
pub(crate) enum Callee {
    /// The closure whose body returned the call (`SelfRef`, a `let rec`
    /// calling itself).
    Same,
    /// A top-level function without captures.
    Known(LamId),
    /// Any closure.
    Closure(Rc<Closure>),
}

/// Result of code in tail position.
pub(crate) enum Tail {
    Value(Value),
    Call(Callee, Span),
}

impl From<Value> for Tail {
    #[inline(always)]
    fn from(v: Value) -> Tail {
        Tail::Value(v)
    }
}

/// The code of a lambda's body.
pub(crate) enum Body {
    /// A body with no call in tail position, run for its value (no
    /// [`Tail`] to wrap and inspect).
    Value(VCode),
    /// A body that may leave a tail call for the trampoline.
    Tail(TCode),
}

pub(crate) struct CLambda {
    pub(crate) captures: Vec<VarRef>,
    pub(crate) arity: u32,
    pub(crate) body: Body,
    pub(crate) span: Span,
}

/// True if `e` has a call in tail position.
fn tail_calls(mut e: &Expr) -> bool {
    loop {
        match e {
            Expr::App(..) => return true,
            Expr::If(_, a, b) => {
                if tail_calls(a) {
                    return true;
                }
                e = b;
            }
            Expr::Let { body, .. } => e = body,
            Expr::Case { left, right, .. } => {
                if tail_calls(left) {
                    return true;
                }
                e = right;
            }
            _ => return false,
        }
    }
}

/// A compiled program.
pub(crate) struct Compiled {
    pub(crate) lambdas: Vec<CLambda>,
    pub(crate) globals: Vec<TCode>,
    pub(crate) global_names: Vec<String>,
}

#[cold]
#[inline(never)]
fn bad_local<T>() -> RResult<T> {
    err("internal error: bad local", Span::default())
}

#[cold]
#[inline(never)]
fn bad_capture<T>() -> RResult<T> {
    err("internal error: bad capture", Span::default())
}

/// Lets go of `v`. A value matched by reference is still dropped by its
/// owner, and the compiler calls the (large, out-of-line) destructor even
/// where the match has just seen a number; this tests the tag inline, so
/// for a number known to the match nothing at all remains.
#[inline(always)]
fn discard(v: Value) {
    let v = ManuallyDrop::new(v);
    if !v.is_scalar() {
        super::drop_value(ManuallyDrop::into_inner(v));
    }
}

/// A plain number, read in place.
#[derive(Clone, Copy)]
enum N {
    I(i64),
    R(f64),
}

impl N {
    #[inline(always)]
    fn of(v: &Value) -> Option<N> {
        match v {
            Value::Int(n) => Some(N::I(*n)),
            Value::Real(x) => Some(N::R(*x)),
            _ => None,
        }
    }
}

/// True for the comparison primitives.
fn is_comparison(p: Prim) -> bool {
    matches!(
        p,
        Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne
    )
}

/// The Int and Real arithmetic that cannot fail. Kept apart from the
/// comparisons so that the result is always an Int or a Real: a value that
/// may also be a Bool is copied byte by byte.
#[inline(always)]
fn fast(p: Prim, x: N, y: N) -> Option<Value> {
    match (x, y) {
        (N::I(a), N::I(b)) => arith::int_arith(p, a, b).map(Value::Int),
        (N::R(a), N::R(b)) => arith::real_arith(p, a, b).map(Value::Real),
        _ => None,
    }
}

/// A comparison of two plain numbers of the same type.
#[inline(always)]
fn fast_cmp(p: Prim, x: N, y: N) -> Option<bool> {
    match (x, y) {
        (N::I(a), N::I(b)) => Some(arith::compare(p, a, b)),
        (N::R(a), N::R(b)) => Some(arith::compare(p, a, b)),
        _ => None,
    }
}

/// The general case of a binary primitive (errors, other types, vectors,
/// functions); reals tagged by a derivative go straight to the AD
/// arithmetic.
#[inline(never)]
fn slow2(m: &mut Machine, p: Prim, x: Value, y: Value, span: Span) -> RResult<Value> {
    match arith::tagged_fast(p, &x, &y) {
        Some(v) => Ok(v),
        None => m.prim2(p, x, y, span),
    }
}

/// A Bool value as a `bool`.
#[inline(always)]
fn truth(v: Value) -> bool {
    let b = matches!(v, Value::Bool(true));
    discard(v);
    b
}

/// Evaluates the operands of a binary primitive and gives them to `op` as
/// plain numbers, or to `slow` as values when `op` declines or one is not a
/// plain number.
///
/// Operands read in place (`A::PEEK`: a slot, capture or literal, which
/// cannot fail) are read after the other one has been evaluated (their
/// value cannot change meanwhile, and the order is unobservable), as plain
/// numbers when they are, so that the common cases build and drop no value.
#[inline(always)]
fn operands<A: Get, B: Get, T>(
    (a, b): (&A, &B),
    m: &mut Machine,
    c: &Compiled,
    bp: usize,
    clo: Clo<'_>,
    op: impl Fn(N, N) -> Option<T>,
    slow: impl FnOnce(&mut Machine, Value, Value) -> RResult<T>,
) -> RResult<T> {
    if A::PEEK && B::PEEK {
        if let (Some(x), Some(y)) = (a.num(m, bp, clo), b.num(m, bp, clo))
            && let Some(r) = op(x, y)
        {
            return Ok(r);
        }
        let x = a.get(m, c, bp, clo)?;
        let y = b.get(m, c, bp, clo)?;
        return slow(m, x, y);
    }
    if A::PEEK {
        let y = b.get(m, c, bp, clo)?;
        if let (Some(x), Some(yn)) = (a.num(m, bp, clo), N::of(&y))
            && let Some(r) = op(x, yn)
        {
            discard(y);
            return Ok(r);
        }
        let x = a.get(m, c, bp, clo)?;
        return slow(m, x, y);
    }
    let x = a.get(m, c, bp, clo)?;
    if B::PEEK {
        if let (Some(xn), Some(y)) = (N::of(&x), b.num(m, bp, clo))
            && let Some(r) = op(xn, y)
        {
            discard(x);
            return Ok(r);
        }
        let y = b.get(m, c, bp, clo)?;
        return slow(m, x, y);
    }
    let y = b.get(m, c, bp, clo)?;
    if let (Some(xn), Some(yn)) = (N::of(&x), N::of(&y))
        && let Some(r) = op(xn, yn)
    {
        discard(x);
        discard(y);
        return Ok(r);
    }
    slow(m, x, y)
}

/// An operand kind: how an operand's value is obtained.
trait Get: 'static {
    /// True if the operand is read in place and cannot fail: then
    /// [`Get::num`] reads it as a plain number.
    const PEEK: bool = false;

    fn get(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<Value>;

    /// The operand as a plain number, if it is one (only when `PEEK`).
    #[inline(always)]
    fn num(&self, _m: &Machine, _bp: usize, _clo: Clo<'_>) -> Option<N> {
        None
    }

    /// Evaluates the operand and pushes its value on the value stack.
    #[inline(always)]
    fn push(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        let v = self.get(m, c, bp, clo)?;
        m.stack.push(v);
        Ok(())
    }
}

/// A frame slot.
struct Slot(usize);

impl Get for Slot {
    const PEEK: bool = true;

    #[inline(always)]
    fn get(&self, m: &mut Machine, _: &Compiled, bp: usize, _: Clo<'_>) -> RResult<Value> {
        match m.stack.get(bp + self.0) {
            Some(v) => Ok(v.clone()),
            None => bad_local(),
        }
    }

    #[inline(always)]
    fn num(&self, m: &Machine, bp: usize, _: Clo<'_>) -> Option<N> {
        N::of(m.stack.get(bp + self.0)?)
    }
}

/// A captured variable.
struct Cap(usize);

impl Get for Cap {
    const PEEK: bool = true;

    #[inline(always)]
    fn get(&self, _: &mut Machine, _: &Compiled, _: usize, clo: Clo<'_>) -> RResult<Value> {
        match clo.and_then(|k| k.captures.get(self.0)) {
            Some(v) => Ok(v.clone()),
            None => bad_capture(),
        }
    }

    #[inline(always)]
    fn num(&self, _: &Machine, _: usize, clo: Clo<'_>) -> Option<N> {
        N::of(clo?.captures.get(self.0)?)
    }
}

/// A literal.
struct Const(Value);

impl Get for Const {
    const PEEK: bool = true;

    #[inline(always)]
    fn get(&self, _: &mut Machine, _: &Compiled, _: usize, _: Clo<'_>) -> RResult<Value> {
        Ok(self.0.clone())
    }

    #[inline(always)]
    fn num(&self, _: &Machine, _: usize, _: Clo<'_>) -> Option<N> {
        N::of(&self.0)
    }
}

/// A binary primitive on a frame slot and a literal (`n - 1`, `i + 1`).
struct SlotK {
    p: Prim,
    i: usize,
    k: Value,
    span: Span,
}

impl Get for SlotK {
    #[inline(always)]
    fn get(&self, m: &mut Machine, _: &Compiled, bp: usize, _: Clo<'_>) -> RResult<Value> {
        let Some(x) = m.stack.get(bp + self.i) else {
            return bad_local();
        };
        if let (Some(x), Some(k)) = (N::of(x), N::of(&self.k))
            && let Some(v) = fast(self.p, x, k)
        {
            return Ok(v);
        }
        let x = x.clone();
        slow2(m, self.p, x, self.k.clone(), self.span)
    }

    /// The fast case pushes its Int or Real itself, so that the value is
    /// written straight into the stack rather than merged with the general
    /// case's value first (which makes a byte-wise copy).
    #[inline(always)]
    fn push(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        match (m.stack.get(bp + self.i), &self.k) {
            (Some(Value::Int(x)), Value::Int(k)) => {
                if let Some(r) = arith::int_arith(self.p, *x, *k) {
                    m.stack.push(Value::Int(r));
                    return Ok(());
                }
            }
            (Some(Value::Real(x)), Value::Real(k)) => {
                if let Some(r) = arith::real_arith(self.p, *x, *k) {
                    m.stack.push(Value::Real(r));
                    return Ok(());
                }
            }
            _ => {}
        }
        push_slow(self, m, c, bp, clo)
    }
}

#[inline(never)]
fn push_slow<A: Get>(a: &A, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
    let v = a.get(m, c, bp, clo)?;
    m.stack.push(v);
    Ok(())
}

/// A binary primitive on two frame slots (`x * x`).
struct SlotSlot {
    p: Prim,
    i: usize,
    j: usize,
    span: Span,
}

impl Get for SlotSlot {
    #[inline(always)]
    fn get(&self, m: &mut Machine, _: &Compiled, bp: usize, _: Clo<'_>) -> RResult<Value> {
        let (Some(x), Some(y)) = (m.stack.get(bp + self.i), m.stack.get(bp + self.j)) else {
            return bad_local();
        };
        if let (Some(x), Some(y)) = (N::of(x), N::of(y))
            && let Some(v) = fast(self.p, x, y)
        {
            return Ok(v);
        }
        let (x, y) = (x.clone(), y.clone());
        slow2(m, self.p, x, y, self.span)
    }
}

/// Any other expression.
struct Dyn(VCode);

impl Get for Dyn {
    #[inline(always)]
    fn get(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<Value> {
        (self.0)(m, c, bp, clo)
    }
}

/// An operand of one of the kinds above, chosen at compile time.
enum Opnd {
    Local(Slot),
    Capture(Cap),
    Lit(Const),
    LocalLit(SlotK),
    LocalLocal(SlotSlot),
    Code(Dyn),
}

/// Expands `$body` once per operand kind, with `$x` bound to the operand
/// as its own type, so that generic code is instantiated for that kind.
macro_rules! by_kind {
    ($o:expr, $x:ident => $body:expr) => {
        match $o {
            Opnd::Local($x) => $body,
            Opnd::Capture($x) => $body,
            Opnd::Lit($x) => $body,
            Opnd::LocalLit($x) => $body,
            Opnd::LocalLocal($x) => $body,
            Opnd::Code($x) => $body,
        }
    };
}

impl Opnd {
    /// The operand's value, dispatching on its kind at run time (for the
    /// less frequent node kinds, which are not instantiated per kind).
    #[inline(always)]
    fn fetch(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<Value> {
        by_kind!(self, x => x.get(m, c, bp, clo))
    }
}

/// A condition.
trait Test: 'static {
    fn test(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<bool>;
}

/// A comparison of two numbers (the usual condition), computed as a `bool`
/// without building a value.
struct Cmp<A, B> {
    p: Prim,
    a: A,
    b: B,
    span: Span,
}

impl<A: Get, B: Get> Test for Cmp<A, B> {
    #[inline(always)]
    fn test(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<bool> {
        let (p, span) = (self.p, self.span);
        operands(
            (&self.a, &self.b),
            m,
            c,
            bp,
            clo,
            |x, y| fast_cmp(p, x, y),
            |m, x, y| Ok(truth(slow2(m, p, x, y, span)?)),
        )
    }
}

/// Any Bool-valued expression.
struct Truth<A>(A);

impl<A: Get> Test for Truth<A> {
    #[inline(always)]
    fn test(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<bool> {
        Ok(truth(self.0.get(m, c, bp, clo)?))
    }
}

/// The result type of compiled code: a value, or a [`Tail`].
trait Ret: From<Value> + 'static {
    fn code(cx: &Cx<'_>, e: &Expr) -> Code<Self>;
}

impl Ret for Value {
    fn code(cx: &Cx<'_>, e: &Expr) -> VCode {
        cx.vcode(e)
    }
}

impl Ret for Tail {
    fn code(cx: &Cx<'_>, e: &Expr) -> TCode {
        cx.tcode(e)
    }
}

fn if_code<R: Ret, T: Test>(t: T, a: Code<R>, b: Code<R>) -> Code<R> {
    Box::new(move |m, c, bp, clo| {
        if t.test(m, c, bp, clo)? {
            a(m, c, bp, clo)
        } else {
            b(m, c, bp, clo)
        }
    })
}

fn binary<R: Ret, A: Get, B: Get>(p: Prim, a: A, b: B, span: Span) -> Code<R> {
    Box::new(move |m, c, bp, clo| {
        operands(
            (&a, &b),
            m,
            c,
            bp,
            clo,
            |x, y| fast(p, x, y),
            |m, x, y| slow2(m, p, x, y, span),
        )
        .map(R::from)
    })
}

/// A comparison computed for its value.
fn compare<R: Ret, A: Get, B: Get>(t: Cmp<A, B>) -> Code<R> {
    Box::new(move |m, c, bp, clo| Ok(R::from(Value::Bool(t.test(m, c, bp, clo)?))))
}

fn unary<R: Ret, A: Get>(p: Prim, a: A, span: Span) -> Code<R> {
    let op = match p.info().real {
        Some(RealFn::Unary(op)) => Some(op),
        _ => None,
    };
    let fast = move |x: N| match (x, op) {
        (N::R(x), Some(op)) => Some(Value::Real(op.eval(x))),
        (N::I(n), _) if p == Prim::ToReal => Some(Value::Real(n as f64)),
        (N::R(x), _) if p == Prim::ToInt => super::arith::to_int(x).ok().map(Value::Int),
        _ => None,
    };
    Box::new(move |m, c, bp, clo| {
        if A::PEEK
            && let Some(v) = a.num(m, bp, clo).and_then(fast)
        {
            return Ok(R::from(v));
        }
        let x = a.get(m, c, bp, clo)?;
        if let Some(v) = N::of(&x).and_then(fast) {
            discard(x);
            return Ok(R::from(v));
        }
        m.prim1(p, x, span).map(R::from)
    })
}

/// The arguments of a call.
trait Pack: 'static {
    fn len(&self) -> usize;

    /// Evaluates the arguments, then pushes them (evaluating one may reuse
    /// the stack above the live slots, so none is pushed before all are
    /// evaluated).
    fn push(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()>;

    /// Evaluates the arguments, then writes them over the frame at `bp`
    /// (dead once they are evaluated): the arguments of a tail call.
    fn place(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()>;

    /// Evaluates the arguments into a vector.
    fn values(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>)
    -> RResult<Vec<Value>>;
}

/// One argument, of its own kind.
struct P1<A>(A);

impl<A: Get> Pack for P1<A> {
    fn len(&self) -> usize {
        1
    }

    #[inline(always)]
    fn push(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        self.0.push(m, c, bp, clo)
    }

    #[inline(always)]
    fn place(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        let x = self.0.get(m, c, bp, clo)?;
        m.cut(bp);
        m.stack.push(x);
        Ok(())
    }

    fn values(
        &self,
        m: &mut Machine,
        c: &Compiled,
        bp: usize,
        clo: Clo<'_>,
    ) -> RResult<Vec<Value>> {
        Ok(vec![self.0.get(m, c, bp, clo)?])
    }
}

/// Two arguments, each of its own kind.
struct P2<A, B>(A, B);

impl<A: Get, B: Get> Pack for P2<A, B> {
    fn len(&self) -> usize {
        2
    }

    #[inline(always)]
    fn push(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        let x = self.0.get(m, c, bp, clo)?;
        let y = self.1.get(m, c, bp, clo)?;
        m.stack.push(x);
        m.stack.push(y);
        Ok(())
    }

    #[inline(always)]
    fn place(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        let x = self.0.get(m, c, bp, clo)?;
        let y = self.1.get(m, c, bp, clo)?;
        m.cut(bp);
        m.stack.push(x);
        m.stack.push(y);
        Ok(())
    }

    fn values(
        &self,
        m: &mut Machine,
        c: &Compiled,
        bp: usize,
        clo: Clo<'_>,
    ) -> RResult<Vec<Value>> {
        let x = self.0.get(m, c, bp, clo)?;
        Ok(vec![x, self.1.get(m, c, bp, clo)?])
    }
}

/// Any number of arguments, their kinds dispatched on at run time.
struct PN(Vec<Opnd>);

impl Pack for PN {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn push(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        match self.0.as_slice() {
            [x] => {
                let xv = x.fetch(m, c, bp, clo)?;
                m.stack.push(xv);
            }
            [x, y] => {
                let xv = x.fetch(m, c, bp, clo)?;
                let yv = y.fetch(m, c, bp, clo)?;
                m.stack.push(xv);
                m.stack.push(yv);
            }
            args => {
                let vs = fetch_all(m, c, bp, clo, args)?;
                m.stack.extend(vs);
            }
        }
        Ok(())
    }

    fn place(&self, m: &mut Machine, c: &Compiled, bp: usize, clo: Clo<'_>) -> RResult<()> {
        match self.0.as_slice() {
            [x] => {
                let xv = x.fetch(m, c, bp, clo)?;
                m.cut(bp);
                m.stack.push(xv);
            }
            [x, y] => {
                let xv = x.fetch(m, c, bp, clo)?;
                let yv = y.fetch(m, c, bp, clo)?;
                m.cut(bp);
                m.stack.push(xv);
                m.stack.push(yv);
            }
            args => {
                let vs = fetch_all(m, c, bp, clo, args)?;
                m.cut(bp);
                m.stack.extend(vs);
            }
        }
        Ok(())
    }

    fn values(
        &self,
        m: &mut Machine,
        c: &Compiled,
        bp: usize,
        clo: Clo<'_>,
    ) -> RResult<Vec<Value>> {
        fetch_all(m, c, bp, clo, &self.0)
    }
}

/// Expands `$body` with `$p` bound to the arguments `$args` as a [`Pack`]
/// instantiated for their kinds (one or two arguments) or as a [`PN`].
macro_rules! by_pack {
    ($args:expr, $p:ident => $body:expr) => {{
        let args: Vec<Opnd> = $args;
        match <[Opnd; 1]>::try_from(args) {
            Ok([a]) => by_kind!(a, a => {
                let $p = P1(a);
                $body
            }),
            Err(args) => match <[Opnd; 2]>::try_from(args) {
                Ok([a, b]) => by_kind!(a, a => by_kind!(b, b => {
                    let $p = P2(a, b);
                    $body
                })),
                Err(args) => {
                    let $p = PN(args);
                    $body
                }
            },
        }
    }};
}

/// A call of top-level function `id` (no captures), not in tail position.
fn known_call<P: Pack>(id: LamId, args: P, span: Span) -> VCode {
    Box::new(move |m, c, bp, clo| {
        args.push(m, c, bp, clo)?;
        let base = m.stack.len() - args.len();
        m.enter(c, id, base, None, span)
    })
}

/// A call of the running closure itself (`SelfRef`), not in tail position.
fn self_call<P: Pack>(args: P, span: Span) -> VCode {
    Box::new(move |m, c, bp, clo| match clo {
        Some(k) if k.arity as usize == args.len() => {
            args.push(m, c, bp, clo)?;
            let base = m.stack.len() - args.len();
            m.enter(c, k.lam, base, clo, span)
        }
        _ => {
            let fv = self_value(clo, span)?;
            let vs = args.values(m, c, bp, clo)?;
            m.apply_many(fv, vs, span)
        }
    })
}

/// A call of top-level function `id` in tail position.
fn known_tail<P: Pack>(id: LamId, args: P, span: Span) -> TCode {
    Box::new(move |m, c, bp, clo| {
        args.place(m, c, bp, clo)?;
        Ok(Tail::Call(Callee::Known(id), span))
    })
}

/// A call of the running closure itself in tail position (a loop).
fn self_tail<P: Pack>(args: P, span: Span) -> TCode {
    Box::new(move |m, c, bp, clo| match clo {
        Some(k) if k.arity as usize == args.len() => {
            args.place(m, c, bp, clo)?;
            Ok(Tail::Call(Callee::Same, span))
        }
        _ => {
            let fv = self_value(clo, span)?;
            let vs = args.values(m, c, bp, clo)?;
            Ok(Tail::Value(m.apply_many(fv, vs, span)?))
        }
    })
}

fn fetch_all(
    m: &mut Machine,
    c: &Compiled,
    bp: usize,
    clo: Clo<'_>,
    args: &[Opnd],
) -> RResult<Vec<Value>> {
    let mut vs = Vec::with_capacity(args.len());
    for a in args {
        vs.push(a.fetch(m, c, bp, clo)?);
    }
    Ok(vs)
}

/// The value of `SelfRef`.
fn self_value(clo: Clo<'_>, span: Span) -> RResult<Value> {
    match clo {
        Some(k) => Ok(Value::Closure(k.clone())),
        None => err("internal error: no enclosing function", span),
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
                arity: l.arity,
                body: if tail_calls(&l.body) {
                    Body::Tail(cx.tcode(&l.body))
                } else {
                    Body::Value(cx.vcode(&l.body))
                },
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
            Expr::Var(VarRef::Local(i), _) => Opnd::Local(Slot(*i as usize)),
            Expr::Var(VarRef::Capture(i), _) => Opnd::Capture(Cap(*i as usize)),
            Expr::Lit(l) => Opnd::Lit(Const(lit(*l))),
            Expr::Prim(p, args, span) if !is_comparison(*p) => match args.as_slice() {
                [Expr::Var(VarRef::Local(i), _), Expr::Lit(l)] => Opnd::LocalLit(SlotK {
                    p: *p,
                    i: *i as usize,
                    k: lit(*l),
                    span: *span,
                }),
                [
                    Expr::Var(VarRef::Local(i), _),
                    Expr::Var(VarRef::Local(j), _),
                ] => Opnd::LocalLocal(SlotSlot {
                    p: *p,
                    i: *i as usize,
                    j: *j as usize,
                    span: *span,
                }),
                _ => Opnd::Code(Dyn(self.vcode(e))),
            },
            _ => Opnd::Code(Dyn(self.vcode(e))),
        }
    }

    /// `if` in either position, the condition instantiated for its shape.
    fn if_expr<R: Ret>(&self, cond: &Expr, a: &Expr, b: &Expr) -> Code<R> {
        let (a, b) = (R::code(self, a), R::code(self, b));
        if let Expr::Prim(
            p @ (Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne),
            args,
            span,
        ) = cond
            && let [x, y] = args.as_slice()
        {
            let (p, span) = (*p, *span);
            return by_kind!(self.opnd(x), x => by_kind!(self.opnd(y), y => {
                if_code::<R, _>(Cmp { p, a: x, b: y, span }, a, b)
            }));
        }
        by_kind!(self.opnd(cond), x => if_code::<R, _>(Truth(x), a, b))
    }

    /// `let` in either position.
    fn let_expr<R: Ret>(&self, slot: u32, value: &Expr, body: &Expr) -> Code<R> {
        let (slot, v, b) = (slot as usize, self.opnd(value), R::code(self, body));
        Box::new(move |m, c, bp, clo| {
            let x = v.fetch(m, c, bp, clo)?;
            m.cut(bp + slot);
            m.stack.push(x);
            b(m, c, bp, clo)
        })
    }

    /// `case` in either position.
    fn case_expr<R: Ret>(&self, scrutinee: &Expr, slot: u32, left: &Expr, right: &Expr) -> Code<R> {
        let (s, slot, l, r) = (
            self.opnd(scrutinee),
            slot as usize,
            R::code(self, left),
            R::code(self, right),
        );
        Box::new(move |m, c, bp, clo| {
            let (payload, left) = match s.fetch(m, c, bp, clo)? {
                Value::Inl(p) => (p, true),
                Value::Inr(p) => (p, false),
                _ => return err("internal error: case on a non-sum", Span::default()),
            };
            m.cut(bp + slot);
            m.stack.push(Rc::unwrap_or_clone(payload));
            if left {
                l(m, c, bp, clo)
            } else {
                r(m, c, bp, clo)
            }
        })
    }

    /// Code for `e` in tail position.
    fn tcode(&self, e: &Expr) -> TCode {
        match e {
            Expr::If(c, a, b) => self.if_expr::<Tail>(c, a, b),
            Expr::Let { slot, value, body } => self.let_expr::<Tail>(*slot, value, body),
            Expr::Case {
                scrutinee,
                slot,
                left,
                right,
            } => self.case_expr::<Tail>(scrutinee, *slot, left, right),
            Expr::App(f, args, span) => self.tail_call(f, args, *span),
            Expr::Var(VarRef::Local(i), _) => {
                let i = *i as usize;
                Box::new(move |m, _, bp, _| match m.stack.get(bp + i) {
                    Some(v) => Ok(Tail::Value(v.clone())),
                    None => bad_local(),
                })
            }
            Expr::Lit(l) => {
                let v = lit(*l);
                Box::new(move |_, _, _, _| Ok(Tail::Value(v.clone())))
            }
            Expr::Prim(p, args, span) => self.prim::<Tail>(*p, args, *span),
            _ => {
                let v = self.vcode(e);
                Box::new(move |m, c, bp, clo| Ok(Tail::Value(v(m, c, bp, clo)?)))
            }
        }
    }

    /// A call in tail position: the arguments replace the frame and the
    /// trampoline makes the call.
    fn tail_call(&self, f: &Expr, args: &[Expr], span: Span) -> TCode {
        let n = args.len();
        let args: Vec<Opnd> = args.iter().map(|a| self.opnd(a)).collect();
        if let Some(id) = self.known_function(f, n) {
            return by_pack!(args, p => known_tail(id, p, span));
        }
        if let Expr::Var(VarRef::SelfRef, _) = f {
            return by_pack!(args, p => self_tail(p, span));
        }
        let f = self.opnd(f);
        let args = PN(args);
        Box::new(move |m, c, bp, clo| match f.fetch(m, c, bp, clo)? {
            Value::Closure(k) if k.arity as usize == n => {
                args.place(m, c, bp, clo)?;
                Ok(Tail::Call(Callee::Closure(k), span))
            }
            other => {
                let vs = args.values(m, c, bp, clo)?;
                Ok(Tail::Value(m.apply_many(other, vs, span)?))
            }
        })
    }

    /// A call not in tail position.
    fn call(&self, f: &Expr, args: &[Expr], span: Span) -> VCode {
        let n = args.len();
        let args: Vec<Opnd> = args.iter().map(|a| self.opnd(a)).collect();
        if let Some(id) = self.known_function(f, n) {
            return by_pack!(args, p => known_call(id, p, span));
        }
        if let Expr::Var(VarRef::SelfRef, _) = f {
            return by_pack!(args, p => self_call(p, span));
        }
        let f = self.opnd(f);
        let args = PN(args);
        Box::new(move |m, c, bp, clo| match f.fetch(m, c, bp, clo)? {
            Value::Closure(k) if k.arity as usize == n => {
                args.push(m, c, bp, clo)?;
                let base = m.stack.len() - n;
                m.enter(c, k.lam, base, Some(&k), span)
            }
            other => {
                let vs = args.values(m, c, bp, clo)?;
                m.apply_many(other, vs, span)
            }
        })
    }

    /// Code computing the value of `e` (not in tail position).
    fn vcode(&self, e: &Expr) -> VCode {
        match e {
            Expr::Var(VarRef::Local(i), _) => {
                let i = *i as usize;
                Box::new(move |m, _, bp, _| match m.stack.get(bp + i) {
                    Some(v) => Ok(v.clone()),
                    None => bad_local(),
                })
            }
            Expr::Var(VarRef::Capture(i), _) => {
                let i = *i as usize;
                Box::new(
                    move |_, _, _, clo| match clo.and_then(|k| k.captures.get(i)) {
                        Some(v) => Ok(v.clone()),
                        None => bad_capture(),
                    },
                )
            }
            Expr::Var(VarRef::SelfRef, span) => {
                let span = *span;
                Box::new(move |_, _, _, clo| self_value(clo, span))
            }
            Expr::Var(VarRef::Global(g), span) => {
                let (g, span) = (*g as usize, *span);
                Box::new(move |m, _, _, _| m.global(g, span))
            }
            Expr::Lit(l) => {
                let v = lit(*l);
                Box::new(move |_, _, _, _| Ok(v.clone()))
            }
            Expr::Lam(id) => {
                let id: LamId = *id;
                Box::new(move |m, c, bp, clo| m.make_closure(c, id, bp, clo))
            }
            Expr::App(f, args, span) => self.call(f, args, *span),
            Expr::If(c, a, b) => self.if_expr::<Value>(c, a, b),
            Expr::Let { slot, value, body } => self.let_expr::<Value>(*slot, value, body),
            Expr::Case {
                scrutinee,
                slot,
                left,
                right,
            } => self.case_expr::<Value>(scrutinee, *slot, left, right),
            Expr::Tuple(es) => {
                let es: Vec<Opnd> = es.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, c, bp, clo| {
                    Ok(Value::Tuple(Rc::new(fetch_all(m, c, bp, clo, &es)?)))
                })
            }
            Expr::Proj(x, i) => {
                let (x, i) = (self.opnd(x), *i as usize);
                Box::new(move |m, c, bp, clo| match x.fetch(m, c, bp, clo)? {
                    Value::Tuple(vs) => Ok(vs.get(i).cloned().unwrap_or(Value::Unit)),
                    _ => err(
                        "internal error: projection from a non-tuple",
                        Span::default(),
                    ),
                })
            }
            Expr::Inl(x) => {
                let x = self.opnd(x);
                Box::new(move |m, c, bp, clo| Ok(Value::Inl(Rc::new(x.fetch(m, c, bp, clo)?))))
            }
            Expr::Inr(x) => {
                let x = self.opnd(x);
                Box::new(move |m, c, bp, clo| Ok(Value::Inr(Rc::new(x.fetch(m, c, bp, clo)?))))
            }
            Expr::Vector(es) => {
                let es: Vec<Opnd> = es.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, c, bp, clo| Ok(Value::vector(fetch_all(m, c, bp, clo, &es)?)))
            }
            Expr::PrimRef(p) => {
                let p = *p;
                Box::new(move |_, _, _, _| Ok(Value::Prim(p, None)))
            }
            Expr::Prim(p, args, span) => self.prim::<Value>(*p, args, *span),
            Expr::Trace(label, x) => {
                let (label, x) = (label.clone(), self.vcode(x));
                Box::new(move |m, c, bp, clo| {
                    let v = x(m, c, bp, clo)?;
                    super::tracing::emit(&label, &v);
                    Ok(v)
                })
            }
            Expr::RunDelta(first, m, span) => {
                let (first, m, span) = (self.vcode(first), self.vcode(m), *span);
                Box::new(move |mach, c, bp, clo| {
                    let Value::Int(id) = first(mach, c, bp, clo)? else {
                        return err("internal error: `runDelta` of a non-Int id", span);
                    };
                    super::delta::run_delta(id, span, || m(mach, c, bp, clo))
                })
            }
            Expr::Poly(p, t) => {
                let f = Rc::new(super::poly::PolyFn {
                    poly: *p,
                    ty: t.clone(),
                });
                Box::new(move |_, _, _, _| Ok(Value::Poly(Rc::clone(&f))))
            }
        }
    }

    /// Code for a primitive call, producing a value (`R = Value`) or, in
    /// tail position, a finished [`Tail`] (`R = Tail`) without a wrapper.
    fn prim<R: Ret>(&self, p: Prim, args: &[Expr], span: Span) -> Code<R> {
        if let (
            Prim::Sum,
            [
                zero,
                Expr::Prim(made @ (Prim::Build | Prim::Map), inner, at),
            ],
        ) = (p, args)
            && let [a, b] = inner.as_slice()
        {
            // `sum (build n f)`, `sum (map f v)`: elements added as made.
            let (made, at) = (*made, *at);
            let (zero, a, b) = (self.vcode(zero), self.vcode(a), self.vcode(b));
            return Box::new(move |m, c, bp, clo| {
                let zero = zero(m, c, bp, clo)?;
                let (a, b) = (a(m, c, bp, clo)?, b(m, c, bp, clo)?);
                let (f, source) = if made == Prim::Build { (b, a) } else { (a, b) };
                m.sum_as_made(zero, (made, f, source), at, span)
                    .map(R::from)
            });
        }
        match args {
            [a] => by_kind!(self.opnd(a), a => unary::<R, _>(p, a, span)),
            [a, b] if is_comparison(p) => by_kind!(self.opnd(a), a => by_kind!(self.opnd(b), b => {
                compare::<R, _, _>(Cmp { p, a, b, span })
            })),
            [a, b] => by_kind!(self.opnd(a), a => by_kind!(self.opnd(b), b => {
                binary::<R, _, _>(p, a, b, span)
            })),
            _ => {
                let args: Vec<Opnd> = args.iter().map(|a| self.opnd(a)).collect();
                Box::new(move |m, c, bp, clo| {
                    let vs = fetch_all(m, c, bp, clo, &args)?;
                    m.call_prim(p, vs, span).map(R::from)
                })
            }
        }
    }
}
