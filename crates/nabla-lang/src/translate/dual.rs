//! Compiled differentiation: `diff`, `jvp`, `grad` and `value_and_grad` in
//! the typed IR, by specialising every function at the stack of derivative
//! levels it runs at (issue 14's design).
//!
//! A value at *level* ℓ holds the reals of ℓ nested derivative numbers. At a
//! forward level a real is a dual number, `Dₗ₊₁ Real = (Dₗ Real, Dₗ Real)`
//! (primal, tangent); at a reverse level it is `(Dₗ Real, Int, Dₗ Real)`,
//! the primal and its Delta `Scale c (Var id)`: the id of a Delta on the
//! level's trace (−1 for a constant of the level: Krawiec et al.'s Zero) and
//! the coefficient c, as the interpreter's `Num` and the library's `Reverse`
//! keep it. Every other type maps homomorphically
//! (`Dₗ (Vec A) = Vec (Dₗ A)`, tuples, sums and functions component-wise;
//! `Int`, `Bool`, `()` stay). Levels are positions, not names: `jvp f x dx`
//! and `grad f x` run `f` at level n = 1 + the highest level of anything `f`
//! can see (`x`, `dx`, what `f` captures), so no value of an enclosing level
//! at position n exists inside, and perturbations cannot be confused
//! (Pearlmutter & Siskind's closure property, here by construction, as the
//! library gets it from distinct Rust types).
//!
//! Each expression's level is known statically. A constant (a literal, a
//! global, anything computed from level-0 values only) stays a plain real,
//! and an operation forms the partial derivative of an operand only if that
//! operand is at the operation's level; at run time, as in the interpreter
//! and the library's `Dual`, a term whose tangent is exactly zero is skipped
//! and partials are multiplied with the chain rule's product (`chainMul`), so
//! native and interpreted derivatives agree bit for bit. The partials come
//! from the library's derivative table, evaluated on `Sym`, a symbolic
//! number, and then emitted one level down (so the table's formulas are
//! themselves differentiated at the enclosing levels): no rule is restated.
//!
//! A reverse level's operation on one variable only scales its coefficient;
//! one on two different variables records one Delta, `Let`-bound on the
//! run-time trace of its level ([`TapeOp::Push`]: two weighted references to
//! earlier Deltas, the interpreter's trace entries, Krawiec et al. §5.3.3),
//! so the trace is linear in the operations. `grad f x` begins a trace,
//! seeds each real of `x` as an input, runs `f`, sweeps the trace backwards
//! once from the result and reads the inputs' adjoints into `x`'s shape.
//! Above other levels, a Delta's weights are reals of those levels, stored
//! flattened ([`TapeOp::PushWide`]), and the sweep is generated code in
//! their arithmetic (`Expander::sweep`), so it is itself differentiated:
//! forward over reverse and reverse over reverse, as in the interpreter.
//!
//! A function is copied once per (levels of its parameters, levels of its
//! captures, level depth) it is called at; a closure made as a value takes
//! its argument at the depth where it is made (`jacobian` and `hessian`
//! arrive expanded into `jvp`s, `grad`s and `vjp`s by `core::lower_typed`).
//! What this pass does not handle is refused with its position, and the
//! program then runs in the interpreter (the differential tests count those
//! programs).

mod custom;
mod fold;

use super::rules;
use crate::core::Lit;
use crate::core::flow::Flow;
use crate::core::lower_typed::Unsupported;
use crate::core::typed::{
    Expr, ExprKind, Fun, FunId, Local, LocalInfo, Pat, Program, Span, TapeOp, if_, int_lit,
};
use crate::prim::Role;
use crate::prim::{PRIMS, Prim, RealFn, SUM_LANES, Selection, partial_is_one};
use crate::types::Type;
use nabla::{Binary, Number, Unary};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{Add, Div, Mul, Neg, Sub};

type R<T> = Result<T, Unsupported>;

/// The kind of a derivative level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Dual numbers: a real is (primal, tangent).
    Forward,
    /// A Delta trace: a real is (primal, Delta id, coefficient), the id −1
    /// for a constant of the level.
    Reverse,
}

/// A value's level: the stack of derivative levels its reals carry,
/// outermost first — `n` levels, level k + 1 a reverse one iff bit k of
/// `reverse` is set. The levels a context uses are prefixes of one stack,
/// so they compare by height.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Level {
    n: u8,
    reverse: u8,
}

impl Level {
    /// Plain values: no level.
    const PLAIN: Level = Level { n: 0, reverse: 0 };

    /// This stack with one more level on top.
    fn above(self, mode: Mode) -> Level {
        let bit = u8::from(mode == Mode::Reverse) << self.n;
        Level {
            n: self.n + 1,
            reverse: self.reverse | bit,
        }
    }

    /// The first `k` levels of this stack.
    fn prefix(self, k: u8) -> Level {
        Level {
            n: k,
            reverse: self.reverse & ((1u16 << k) - 1) as u8,
        }
    }

    /// This stack without its top level.
    fn below(self) -> Level {
        self.prefix(self.n.saturating_sub(1))
    }

    /// The kind of the top level (of a stack with at least one).
    fn mode(self) -> Mode {
        if self.n > 0 && self.reverse & (1 << (self.n - 1)) != 0 {
            Mode::Reverse
        } else {
            Mode::Forward
        }
    }

    /// True if a reverse level is among these (code at such a level
    /// records Deltas, so it must not be evaluated speculatively).
    fn records(self) -> bool {
        self.reverse != 0
    }

    /// Every level up to [`MAX_LEVEL`] high.
    fn all() -> impl Iterator<Item = Level> {
        (0..=MAX_LEVEL).flat_map(|n| {
            (0..1u16 << n).map(move |r| Level {
                n,
                reverse: r as u8,
            })
        })
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for k in 0..self.n {
            let reverse = self.reverse & (1 << k) != 0;
            f.write_str(if reverse { "r" } else { "f" })?;
        }
        Ok(())
    }
}

/// Levels deeper than this are refused (a tower of derivatives built by
/// recursion would otherwise specialise forever; a real at level l is 2^l
/// reals).
const MAX_LEVEL: u8 = 6;

/// At most this many copies of functions are made; a program that needs
/// more runs in the interpreter (compile time stays bounded).
const MAX_COPIES: usize = 400;

/// Rewrites every `diff` and `jvp` of `prog` into plain typed IR.
pub fn expand(prog: &mut Program) -> R<()> {
    if !prog.funs.iter().any(|f| mentions_derivative(&f.body))
        && !prog.globals.iter().any(|g| mentions_derivative(&g.body))
    {
        return Ok(());
    }
    let mut x = Expander {
        orig: prog.funs.clone(),
        prog,
        memo: HashMap::new(),
        origin: HashMap::new(),
        recoded: 0,
        helpers: HashMap::new(),
        queue: Vec::new(),
        rets: HashMap::new(),
    };
    let top = Ctx {
        depth: Level::PLAIN,
        fresh: false,
        env: RefCell::new(HashMap::new()),
    };
    for i in 0..x.orig.len() {
        let body = x.orig[i].body.clone();
        let (body, _) = x.rewrite(&body, &top)?;
        x.prog.funs[i].body = body;
    }
    for i in 0..x.prog.globals.len() {
        let body = x.prog.globals[i].body.clone();
        let (body, _) = x.rewrite(&body, &top)?;
        x.prog.globals[i].body = body;
    }
    loop {
        while let Some((new, orig, cx, ret)) = x.queue.pop() {
            let body = x.orig[orig.0 as usize].body.clone();
            let ret_ty = x.orig[orig.0 as usize].ret.clone();
            let (body, level) = x.rewrite(&body, &cx)?;
            let body = x.lift(body, level, ret, &ret_ty)?;
            x.prog.funs[new.0 as usize].body = body;
        }
        // The closures a recoding may meet are known only now; their copies
        // at the deeper levels may make more closures and recodings.
        let listed = x.fill_recodes()?;
        if x.queue.is_empty() && listed == x.recoded {
            break;
        }
        x.recoded = listed;
    }
    for f in &mut prog.funs {
        fold::fold(&mut f.body);
    }
    for g in &mut prog.globals {
        fold::fold(&mut g.body);
    }
    Ok(())
}

fn mentions_derivative(e: &Expr) -> bool {
    let mut found = false;
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Prim(p, _) = &e.kind
            && p.is_derivative()
        {
            found = true;
        }
        e.for_each_child(|c| stack.push(c));
    }
    found
}

/// `t` at level `l`.
fn dual_ty(t: &Type, l: Level) -> Type {
    match t {
        Type::Real => (1..=l.n).fold(Type::Real, |t, k| match l.prefix(k).mode() {
            Mode::Forward => Type::Tuple(vec![t.clone(), t]),
            Mode::Reverse => Type::Tuple(vec![t.clone(), Type::Int, t]),
        }),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| dual_ty(t, l)).collect()),
        Type::Sum(a, b) => Type::Sum(Box::new(dual_ty(a, l)), Box::new(dual_ty(b, l))),
        Type::Vec(a) => Type::Vec(Box::new(dual_ty(a, l))),
        Type::Fun(a, b) => Type::fun(dual_ty(a, l), dual_ty(b, l)),
        other => other.clone(),
    }
}

/// True if a value of type `t` holds a real (so its level matters).
fn has_real(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Tuple(ts) => ts.iter().any(has_real),
        Type::Sum(a, b) | Type::Fun(a, b) => has_real(a) || has_real(b),
        Type::Vec(a) => has_real(a),
        _ => false,
    }
}

/// True if a value of `t` has a shape beyond its type — a vector's length
/// or a sum's constructor somewhere in it — that a tangent or cotangent
/// must match.
fn has_shape(t: &Type) -> bool {
    match t {
        Type::Vec(_) | Type::Sum(..) => true,
        Type::Tuple(ts) => ts.iter().any(has_shape),
        _ => false,
    }
}

fn mk(kind: ExprKind, ty: Type, span: Span) -> Expr {
    Expr { kind, ty, span }
}

fn real_lit(x: f64, span: Span) -> Expr {
    mk(ExprKind::Lit(Lit::Real(x)), Type::Real, span)
}

fn bool_lit(b: bool, span: Span) -> Expr {
    mk(ExprKind::Lit(Lit::Bool(b)), Type::Bool, span)
}

fn proj(e: Expr, i: u32) -> Expr {
    let ty = match &e.ty {
        Type::Tuple(ts) => ts[i as usize].clone(),
        _ => Type::Unit,
    };
    let span = e.span;
    mk(ExprKind::Proj(Box::new(e), i), ty, span)
}

fn pair(a: Expr, b: Expr) -> Expr {
    let span = a.span;
    let ty = Type::Tuple(vec![a.ty.clone(), b.ty.clone()]);
    mk(ExprKind::Tuple(vec![a, b]), ty, span)
}

/// `if c then a else b` without a branch (both evaluated; see
/// [`ExprKind::Select`]).
fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    let (ty, span) = (a.ty.clone(), a.span);
    mk(
        ExprKind::Select(Box::new(c), Box::new(a), Box::new(b)),
        ty,
        span,
    )
}

fn prim(p: Prim, args: Vec<Expr>, ty: Type, span: Span) -> Expr {
    mk(ExprKind::Prim(p, args), ty, span)
}

/// The constant `x` at level `l`: `x` plain, zero tangents, no Delta.
fn constant_at(x: f64, l: Level, span: Span) -> Expr {
    if l.n == 0 {
        return real_lit(x, span);
    }
    let below = l.below();
    let c = constant_at(x, below, span);
    match l.mode() {
        Mode::Forward => pair(c, zero_at(below, span)),
        Mode::Reverse => constant_of_level(c, below, span),
    }
}

/// The zero real at level `l`: a plain 0.0 in each component, no Delta.
fn zero_at(l: Level, span: Span) -> Expr {
    constant_at(0.0, l, span)
}

/// The real of reverse level `below` + 1 with primal `primal` and Delta
/// `Scale coefficient (Var id)`.
fn reverse_real(primal: Expr, id: Expr, coefficient: Expr) -> Expr {
    let span = primal.span;
    let ty = Type::Tuple(vec![primal.ty.clone(), Type::Int, coefficient.ty.clone()]);
    mk(ExprKind::Tuple(vec![primal, id, coefficient]), ty, span)
}

/// `primal` (a real of level `below`) as a constant of reverse level
/// `below` + 1: Delta id −1, coefficient 0.
fn constant_of_level(primal: Expr, below: Level, span: Span) -> Expr {
    reverse_real(primal, int_lit(-1, span), zero_at(below, span))
}

/// The state of a sum in lanes at a level whose reals are `real`: the
/// count of elements added, then the four lanes, rotated so that the next
/// element's lane comes first ([`Helper::AddLane`]).
fn lane_state(real: &Type) -> Type {
    let mut ts = vec![Type::Int];
    ts.extend(std::iter::repeat_n(real.clone(), SUM_LANES));
    Type::Tuple(ts)
}

/// Where the elements of a `sum` of reals come from.
#[derive(Clone, Copy)]
enum Made {
    /// A vector's own.
    Vector,
    /// `sum (map g v)`: `g`'s calls.
    Mapped(FunId),
    /// `sum (build n g)`: `g`'s calls, the `build` at the span.
    Built(FunId, Span),
}

/// An operation on the trace of reverse level `slot`.
fn tape(op: TapeOp, slot: u8, args: Vec<Expr>, span: Span) -> Expr {
    let ty = match op {
        TapeOp::Input
        | TapeOp::InputAgain
        | TapeOp::Push
        | TapeOp::PushWide
        | TapeOp::Len
        | TapeOp::Parent
        | TapeOp::Keep
        | TapeOp::Resume => Type::Int,
        TapeOp::Adjoint => Type::Real,
        TapeOp::Adjoints | TapeOp::AdjointsAgain => Type::Vec(Box::new(Type::Real)),
        TapeOp::Inputs => Type::Vec(Box::new(dual_ty(
            &Type::Real,
            Level::PLAIN.above(Mode::Reverse),
        ))),
        TapeOp::Combine => Type::Tuple(vec![Type::Int, Type::Real]),
        TapeOp::DotTerms => Type::Tuple(vec![Type::Real, Type::Int]),
        // A component: its type is the caller's ([`tape_word`]).
        TapeOp::Weight | TapeOp::AdjGet => Type::Real,
        TapeOp::Begin
        | TapeOp::Seed
        | TapeOp::Sweep
        | TapeOp::AdjInit
        | TapeOp::AdjSet
        | TapeOp::End
        | TapeOp::Output
        | TapeOp::SeedOutput
        | TapeOp::SeedOutputs => Type::Unit,
    };
    mk(ExprKind::Tape { op, slot, args }, ty, span)
}

/// A component of type `ty` (`Real` or `Int`) of a wide weight or adjoint.
fn tape_word(op: TapeOp, slot: u8, args: Vec<Expr>, ty: Type, span: Span) -> Expr {
    mk(ExprKind::Tape { op, slot, args }, ty, span)
}

/// `let t = e in body`.
fn bind(t: Local, e: Expr, body: Expr) -> Expr {
    let (ty, span) = (body.ty.clone(), body.span);
    mk(
        ExprKind::Let(Pat::Local(t), Box::new(e), Box::new(body)),
        ty,
        span,
    )
}

fn unit(span: Span) -> Expr {
    mk(ExprKind::Lit(Lit::Unit), Type::Unit, span)
}

/// The number of components of a real at level `l`: its reals and Delta
/// ids, flattened (a wide weight of a reverse level above `l`).
fn width(l: Level) -> usize {
    if l == Level::PLAIN {
        return 1;
    }
    match l.mode() {
        Mode::Forward => 2 * width(l.below()),
        Mode::Reverse => 2 * width(l.below()) + 1,
    }
}

/// The components of the real `e` at level `l` (`e` is evaluated once per
/// component: a local or a projection of one), in [`assemble`]'s order.
fn components(e: &Expr, l: Level, out: &mut Vec<Expr>) {
    if l == Level::PLAIN {
        out.push(e.clone());
        return;
    }
    components(&proj(e.clone(), 0), l.below(), out);
    match l.mode() {
        Mode::Forward => components(&proj(e.clone(), 1), l.below(), out),
        Mode::Reverse => {
            out.push(proj(e.clone(), 1));
            components(&proj(e.clone(), 2), l.below(), out);
        }
    }
}

/// A real at level `l` from its components, each asked of `next` with its
/// type (`Real`, or `Int` for a Delta id), in [`components`]' order.
fn assemble(l: Level, next: &mut dyn FnMut(Type) -> Expr) -> Expr {
    if l == Level::PLAIN {
        return next(Type::Real);
    }
    let p = assemble(l.below(), next);
    match l.mode() {
        Mode::Forward => pair(p, assemble(l.below(), next)),
        Mode::Reverse => {
            let id = next(Type::Int);
            reverse_real(p, id, assemble(l.below(), next))
        }
    }
}

/// `true` if the plain real `x` (evaluated twice) is −0.
fn negative_zero(x: Expr, span: Span) -> Expr {
    let is_zero = prim(
        Prim::Eq,
        vec![x.clone(), real_lit(0.0, span)],
        Type::Bool,
        span,
    );
    let inverse = prim(Prim::Div, vec![real_lit(1.0, span), x], Type::Real, span);
    let negative = prim(
        Prim::Lt,
        vec![inverse, real_lit(0.0, span)],
        Type::Bool,
        span,
    );
    select(is_zero, negative, bool_lit(false, span))
}

/// `v[i]`, of type `ty`.
fn index(v: &Expr, i: &Expr, ty: Type) -> Expr {
    let span = v.span;
    prim(Prim::Index, vec![v.clone(), i.clone()], ty, span)
}

/// `()` if `b` is shaped like `a` at the top, else `role`'s error at `span`
/// ([`ExprKind::TangentShape`]).
fn shape_check(a: &Expr, b: &Expr, role: Role, span: Span) -> Expr {
    let kind = ExprKind::TangentShape(Box::new(a.clone()), Box::new(b.clone()), role);
    mk(kind, Type::Unit, span)
}

/// `e; rest` (the value of `rest` after the effect of `e`).
fn then(e: Expr, rest: Expr) -> Expr {
    let (ty, span) = (rest.ty.clone(), rest.span);
    mk(
        ExprKind::Let(Pat::Wild, Box::new(e), Box::new(rest)),
        ty,
        span,
    )
}

/// `if c then a else b` between reals at level `l`: without a branch
/// ([`select`]) unless code at `l` records Deltas, which must not run for
/// the arm not taken.
fn choose(c: Expr, a: Expr, b: Expr, l: Level) -> Expr {
    if l.records() {
        if_(c, a, b)
    } else {
        select(c, a, b)
    }
}

/// A value of type `t` at level `l` made of zeros (empty vectors, `inl`s):
/// the filler of an arm that is never taken.
fn zero_value(t: &Type, l: Level, span: Span) -> Expr {
    let kind = match t {
        Type::Real => return zero_at(l, span),
        Type::Int => ExprKind::Lit(Lit::Int(0)),
        Type::Bool => ExprKind::Lit(Lit::Bool(false)),
        Type::Tuple(ts) => ExprKind::Tuple(ts.iter().map(|t| zero_value(t, l, span)).collect()),
        Type::Sum(a, _) => ExprKind::Inl(Box::new(zero_value(a, l, span))),
        Type::Vec(_) => ExprKind::Vector(Vec::new()),
        _ => ExprKind::Lit(Lit::Unit),
    };
    mk(kind, dual_ty(t, l), span)
}

/// The primitive whose real meaning is `f`.
fn prim_of(f: RealFn) -> Option<Prim> {
    PRIMS.iter().find(|r| r.real == Some(f)).map(|r| r.prim)
}

/// Where a rewritten expression's locals come from: one per function body
/// being rewritten (a copy's, or the original's outside every derivative).
struct Ctx {
    /// Closures made here take their argument at this level.
    depth: Level,
    /// True in a copy of a function: every binder gets a fresh local.
    fresh: bool,
    /// Original local → (its copy here, its level). Absent: itself, level 0
    /// (the original code outside every `diff`). One map for the whole
    /// body, added to as binders are met and never scoped: a local's id is
    /// unique in the program, so a binding is only looked up inside its
    /// scope anyway — and copying the map at every `let` made rewriting a
    /// long chain of `let`s quadratic in time and memory.
    env: RefCell<HashMap<Local, (Local, Level)>>,
}

impl Ctx {
    fn get(&self, l: Local) -> (Local, Level) {
        self.env
            .borrow()
            .get(&l)
            .copied()
            .unwrap_or((l, Level::PLAIN))
    }
}

/// A specialisation: the function, its parameters' levels, its captures
/// (their copies and levels) and the depth its closures take arguments at.
type Key = (FunId, Vec<Level>, Vec<(Local, Level)>, Level);

/// What [`Expander::split`] takes of a value at a level, one level down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Part {
    /// The primal.
    Primal,
    /// The tangent (a forward level).
    Tangent,
    /// The adjoint after the level's backward sweep (a reverse level whose
    /// inputs the value holds).
    Adjoint,
}

/// A walk over the real leaves of a value ([`Expander::walk_reals`]),
/// rebuilding it with each real replaced: the walks share what they do
/// to tuples, vectors, sums and parts without reals, and differ in the
/// leaves (and a vector of reals that one trace operation takes whole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RealsWalk {
    /// From level `.0` to `.1` ([`Expander::lift`]).
    Lift(Level, Level),
    /// A part of a value at level `.0`, one level down ([`Expander::split`]).
    Split(Level, Part),
    /// A value at level `.0` seeded as inputs of the reverse level above by
    /// `.1` (`Input`, or `InputAgain` on a resumed trace:
    /// [`Expander::seed_inputs`]).
    SeedInputs(Level, TapeOp),
    /// A plain point's adjoints on the resumed trace of reverse level 1
    /// ([`Expander::adjoints_again`]).
    AdjointsAgain,
    /// A value at reverse level `.0` with each real's primal 0 and a fresh
    /// Delta (`Expander::zero_primal`, custom rules).
    ZeroPrimal(Level),
}

impl RealsWalk {
    /// The levels of the value walked and of the value made.
    fn levels(self) -> (Level, Level) {
        match self {
            RealsWalk::Lift(from, to) => (from, to),
            RealsWalk::Split(l, _) => (l, l.below()),
            RealsWalk::SeedInputs(l, _) => (l, l.above(Mode::Reverse)),
            RealsWalk::AdjointsAgain => (Level::PLAIN, Level::PLAIN),
            RealsWalk::ZeroPrimal(l) => (l, l),
        }
    }

    /// The name and parameter of a helper function that walks an element.
    fn helper_name(self) -> (&'static str, &'static str) {
        match self {
            RealsWalk::Lift(..) => ("lift", "x"),
            RealsWalk::Split(..) => ("split", "y"),
            RealsWalk::SeedInputs(..) => ("seed", "x"),
            RealsWalk::AdjointsAgain => ("adjoints", "x"),
            RealsWalk::ZeroPrimal(_) => ("zero_primal", "x"),
        }
    }

    /// The trace operation, and its slot, that takes a whole vector of
    /// reals in this walk, if one does: the outermost reverse level's
    /// `Inputs`, `AdjointsAgain` and `Adjoints` (the parameters of `grad`,
    /// BA's and GMM's: one runtime call, not a loop of generated code that
    /// checks the buffer's room for every element).
    fn vector_of_reals(self) -> Option<(TapeOp, u8)> {
        match self {
            RealsWalk::SeedInputs(l, TapeOp::Input) if l == Level::PLAIN => {
                Some((TapeOp::Inputs, l.n + 1))
            }
            RealsWalk::AdjointsAgain => {
                Some((TapeOp::AdjointsAgain, Level::PLAIN.above(Mode::Reverse).n))
            }
            RealsWalk::Split(l, Part::Adjoint) if l.below() == Level::PLAIN => {
                Some((TapeOp::Adjoints, l.n))
            }
            _ => None,
        }
    }

    /// What a value holding a function cannot be here (`None`: the
    /// function is kept as it is).
    fn function_error(self) -> Option<&'static str> {
        match self {
            RealsWalk::Lift(..) => {
                Some("a function value made inside `diff`/`jvp` returned from a function")
            }
            RealsWalk::Split(..) => Some("`jvp` of a function whose result holds a function"),
            RealsWalk::SeedInputs(..) | RealsWalk::AdjointsAgain => {
                Some("a gradient with respect to a value that holds a function")
            }
            RealsWalk::ZeroPrimal(_) => None,
        }
    }
}

/// Small functions the pass generates, by what they do.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Helper {
    /// An element of type `Type` walked by `.1` ([`Expander::walk_reals`]).
    Walk(Type, RealsWalk),
    /// `acc + x` on reals at level `.0`.
    AddReals(Level),
    /// `chain(p, d)` of a real `p` at level `.0` and `d` at `.1`
    /// ([`Expander::chain`]), a function so that a reverse level's weights
    /// cost a call, not a copy of the product's code at every level below.
    Chain(Level, Level),
    /// A sum's step on reals at level `.0`, in the language's lanes:
    /// `(i + 1, b, c, d, if i < 4 then x else a + x)` of `((i, a, b, c,
    /// d), x)` — the lanes rotate so that the next element's comes first,
    /// and a lane starts at its first element, as the language defines it
    /// (no addition to a constant zero, whose sign could differ).
    AddLane(Level),
    /// The backward sweep of reverse level `.0` over other levels, from
    /// Delta `i` down ([`Expander::sweep`]).
    Sweep(Level),
    /// `fun i -> i` on Ints: the function of the `build` of indices a
    /// built sum folds over.
    Index,
    /// `acc || any_perturbed x` for an element `x` at level `.1`
    /// (`Expander::any_perturbed`, custom rules).
    AnyPerturbed(Type, Level),
}

struct Expander<'p> {
    prog: &'p mut Program,
    /// The functions as lowered (copies are made from these bodies).
    orig: Vec<Fun>,
    memo: HashMap<Key, FunId>,
    /// The specialisation each copy is (the inverse of `memo`).
    origin: HashMap<FunId, Key>,
    /// How many (closure, recoded closure) pairs the last
    /// [`Expander::fill_recodes`] listed.
    recoded: usize,
    helpers: HashMap<Helper, FunId>,
    /// Copies whose bodies are still to be made: (copy, original, context,
    /// result level).
    queue: Vec<(FunId, FunId, Ctx, Level)>,
    /// The level of each copy's result (an original function's is plain).
    rets: HashMap<FunId, Level>,
}

impl Expander<'_> {
    fn local(&mut self, name: &str, ty: Type) -> Local {
        self.prog.locals.push(LocalInfo {
            name: name.to_string(),
            ty,
        });
        Local(self.prog.locals.len() as u32 - 1)
    }

    fn local_expr(&self, l: Local, span: Span) -> Expr {
        mk(ExprKind::Local(l), self.prog.local_ty(l).clone(), span)
    }

    /// The total of a sum's `lanes` (a local of [`lane_state`]) over `n`
    /// elements (an Int local): 0 for none; else lane k is at position
    /// (k − n) mod 4, and the lanes that have elements (the first min(n,
    /// 4)) are added in order with `add`. The lanes are put back in order
    /// first, so that one chain of additions serves every n: the code of
    /// each sum stays small (a function over 25 000 Cranelift instructions
    /// would run in the interpreter).
    fn lanes_total(&mut self, lanes: &Expr, n: &Expr, add: FunId, l: Level, span: Span) -> Expr {
        let real = dual_ty(&Type::Real, l);
        let int_is =
            |x: Expr, k: usize| prim(Prim::Eq, vec![x, int_lit(k as i64, span)], Type::Bool, span);
        let r = prim(
            Prim::Rem,
            vec![n.clone(), int_lit(SUM_LANES as i64, span)],
            Type::Int,
            span,
        );
        let in_order_ty = Type::Tuple(vec![real.clone(); SUM_LANES]);
        let rotated = |r: usize| {
            let at = |k: usize| proj(lanes.clone(), 1 + ((k + SUM_LANES - r) % SUM_LANES) as u32);
            mk(
                ExprKind::Tuple((0..SUM_LANES).map(at).collect()),
                in_order_ty.clone(),
                span,
            )
        };
        let mut in_order = rotated(SUM_LANES - 1);
        for r_k in (0..SUM_LANES - 1).rev() {
            in_order = if_(int_is(r.clone(), r_k), rotated(r_k), in_order);
        }
        let q = self.local("lanes", in_order_ty.clone());
        // sums[k - 1] = lane 0 + … + lane k−1, each made only if n > k − 1
        // (an addition at a reverse level records a Delta).
        let sums: Vec<Local> = (1..SUM_LANES)
            .map(|_| self.local("sum", real.clone()))
            .collect();
        let lane = |k: usize| proj(mk(ExprKind::Local(q), in_order_ty.clone(), span), k as u32);
        let sum = |k: usize| mk(ExprKind::Local(sums[k - 1]), real.clone(), span);
        let add_lane =
            |acc: Expr, k: usize| mk(ExprKind::Call(add, vec![acc, lane(k)]), real.clone(), span);
        let mut total = add_lane(sum(SUM_LANES - 1), SUM_LANES - 1);
        for k in (1..SUM_LANES).rev() {
            let value = if k == 1 {
                lane(0)
            } else {
                add_lane(sum(k - 1), k - 1)
            };
            total = bind(sums[k - 1], value, if_(int_is(n.clone(), k), sum(k), total));
        }
        if_(
            int_is(n.clone(), 0),
            zero_at(l, span),
            bind(q, in_order, total),
        )
    }

    /// The vectors `u` and `v` (rewritten) of `build n (fun i -> u[i] *
    /// v[i])` summed at level `l`, if `l` is the outermost reverse level
    /// (plain weights), both are vectors of its reals and neither depends
    /// on `i` — a local, or an element `w[k]` of one —: the sum
    /// `TapeOp::DotTerms` can record as one Delta over its products' terms.
    fn dot_operands(&mut self, built: &Expr, l: Level, cx: &Ctx) -> R<Option<(Expr, Expr)>> {
        if l != Level::PLAIN.above(Mode::Reverse) {
            return Ok(None);
        }
        let ExprKind::Prim(Prim::Build, bargs) = &built.kind else {
            return Ok(None);
        };
        let Some(ExprKind::Closure(f)) = bargs.get(1).map(|g| &g.kind) else {
            return Ok(None);
        };
        let fun = &self.orig[f.0 as usize];
        let ([(Pat::Local(i), _)], ExprKind::Prim(Prim::Mul, factors)) =
            (fun.params.as_slice(), &fun.body.kind)
        else {
            return Ok(None);
        };
        let i = *i;
        // Does not depend on `i`, and fails (if at all) only as an index
        // out of range, where the element function would first evaluate it.
        fn invariant(e: &Expr, i: Local) -> bool {
            match &e.kind {
                ExprKind::Local(x) => *x != i,
                ExprKind::Prim(Prim::Index, ws) => match ws.as_slice() {
                    [w, k] => {
                        let k_invariant = match k.kind {
                            ExprKind::Lit(_) => true,
                            ExprKind::Local(y) => y != i,
                            _ => false,
                        };
                        k_invariant && invariant(w, i)
                    }
                    _ => false,
                },
                _ => false,
            }
        }
        let reals = Type::Vec(Box::new(Type::Real));
        let operand = |x: &Expr| match &x.kind {
            ExprKind::Prim(Prim::Index, ws) => match ws.as_slice() {
                [w, k]
                    if matches!(k.kind, ExprKind::Local(j) if j == i)
                        && w.ty == reals
                        && invariant(w, i) =>
                {
                    Some(w.clone())
                }
                _ => None,
            },
            _ => None,
        };
        let (Some(u), Some(v)) = (
            factors.first().and_then(operand),
            factors.get(1).and_then(operand),
        ) else {
            return Ok(None);
        };
        let (u, ul) = self.rewrite(&u, cx)?;
        let (v, vl) = self.rewrite(&v, cx)?;
        Ok((ul == l && vl == l).then_some((u, v)))
    }

    /// `scalar`, the sum of `u[i] * v[i]` for i < `n` (a local or literal)
    /// at the outermost reverse level recorded real by real, tried first as
    /// one Delta over the products' terms (`TapeOp::DotTerms`, from four
    /// products, where it saves Deltas): `u` is evaluated only if `n ≥ 4`
    /// and `v` only if `u` has an element, as the element function first
    /// evaluates them, so an error comes where it would.
    fn dot_or(&mut self, u: Expr, v: Expr, n: &Expr, scalar: Expr, span: Span) -> Expr {
        let tried = Type::Tuple(vec![Type::Real, Type::Int]);
        let declined = mk(
            ExprKind::Tuple(vec![real_lit(0.0, span), int_lit(-1, span)]),
            tried.clone(),
            span,
        );
        let (ut, vt) = (self.local("u", u.ty.clone()), self.local("v", v.ty.clone()));
        let (ue, ve) = (self.local_expr(ut, span), self.local_expr(vt, span));
        let slot = Level::PLAIN.above(Mode::Reverse).n;
        let record = tape(
            TapeOp::DotTerms,
            slot,
            vec![ue.clone(), ve, n.clone()],
            span,
        );
        let has_element = prim(
            Prim::Gt,
            vec![
                prim(Prim::Size, vec![ue], Type::Int, span),
                int_lit(0, span),
            ],
            Type::Bool,
            span,
        );
        let from_four = prim(
            Prim::Ge,
            vec![n.clone(), int_lit(4, span)],
            Type::Bool,
            span,
        );
        let attempt = if_(
            from_four,
            bind(
                ut,
                u,
                if_(has_element, bind(vt, v, record), declined.clone()),
            ),
            declined,
        );
        let r = self.local("dot", tried);
        let re = self.local_expr(r, span);
        let recorded = prim(
            Prim::Ge,
            vec![proj(re.clone(), 1), int_lit(0, span)],
            Type::Bool,
            span,
        );
        let real = reverse_real(proj(re.clone(), 0), proj(re, 1), real_lit(1.0, span));
        bind(r, attempt, if_(recorded, real, scalar))
    }

    /// `let t = e in body(t)`, or `body(e)` for a local or literal.
    fn with_temp(&mut self, e: Expr, body: impl FnOnce(&mut Self, Expr) -> R<Expr>) -> R<Expr> {
        if matches!(e.kind, ExprKind::Local(_) | ExprKind::Lit(_)) {
            return body(self, e);
        }
        let t = self.local("_", e.ty.clone());
        let span = e.span;
        let inner = body(self, self.local_expr(t, span))?;
        let (ty, s) = (inner.ty.clone(), inner.span);
        Ok(mk(
            ExprKind::Let(Pat::Local(t), Box::new(e), Box::new(inner)),
            ty,
            s,
        ))
    }

    fn new_fun(&mut self, name: String, params: Vec<(Pat, Type)>, ret: Type, span: Span) -> FunId {
        self.prog.funs.push(Fun {
            name,
            captures: Vec::new(),
            params,
            ret,
            body: mk(ExprKind::Lit(Lit::Unit), Type::Unit, span),
            span,
        });
        FunId(self.prog.funs.len() as u32 - 1)
    }

    fn closure(&self, f: FunId, span: Span) -> Expr {
        let fun = self.prog.fun(f);
        let ty = fun
            .params
            .iter()
            .rev()
            .fold(fun.ret.clone(), |t, (_, p)| Type::fun(p.clone(), t));
        mk(ExprKind::Closure(f), ty, span)
    }

    /// A copy of `pat` binding fresh locals at level `l` (the original ones
    /// at level 0 outside every derivative), recorded in `cx`.
    fn bind(&mut self, pat: &Pat, l: Level, cx: &Ctx) -> Pat {
        match pat {
            Pat::Wild => Pat::Wild,
            Pat::Tuple(ps) => Pat::Tuple(ps.iter().map(|p| self.bind(p, l, cx)).collect()),
            Pat::Local(old) => {
                if !cx.fresh && l == Level::PLAIN {
                    return Pat::Local(*old);
                }
                let info = self.prog.locals[old.0 as usize].clone();
                let new = self.local(&info.name, dual_ty(&info.ty, l));
                cx.env.borrow_mut().insert(*old, (new, l));
                Pat::Local(new)
            }
        }
    }

    /// The copy of `f` for these levels (`f` itself outside every derivative).
    fn specialise(
        &mut self,
        f: FunId,
        params: Vec<Level>,
        captures: Vec<(Local, Level)>,
        depth: Level,
    ) -> R<FunId> {
        let orig = &self.orig[f.0 as usize];
        if depth == Level::PLAIN
            && params.iter().all(|&l| l == Level::PLAIN)
            && captures
                .iter()
                .zip(&orig.captures)
                .all(|(&(c, l), &o)| l == Level::PLAIN && c == o)
        {
            return Ok(f);
        }
        let key = (f, params, captures, depth);
        if let Some(&g) = self.memo.get(&key) {
            return Ok(g);
        }
        if self.memo.len() >= MAX_COPIES || depth.n > MAX_LEVEL {
            return Err(unsupported(
                "derivatives that need too many specialised copies of its functions",
                orig.span,
            ));
        }
        let (_, params, captures, _) = key.clone();
        let orig = orig.clone();
        let cx = Ctx {
            depth,
            fresh: true,
            env: RefCell::new(
                orig.captures
                    .iter()
                    .zip(&captures)
                    .map(|(&o, &c)| (o, c))
                    .collect(),
            ),
        };
        let ret = params
            .iter()
            .chain(captures.iter().map(|(_, l)| l))
            .copied()
            .max()
            .unwrap_or(Level::PLAIN);
        let new_params = orig
            .params
            .iter()
            .zip(&params)
            .map(|((p, t), &l)| (self.bind(p, l, &cx), dual_ty(t, l)))
            .collect();
        let levels: Vec<String> = params.iter().map(|l| l.to_string()).collect();
        let levels = levels.join("_");
        let g = self.new_fun(
            format!("{}'d{levels}", orig.name),
            new_params,
            dual_ty(&orig.ret, ret),
            orig.span,
        );
        self.prog.funs[g.0 as usize].captures = captures.iter().map(|(c, _)| *c).collect();
        self.origin.insert(g, key.clone());
        self.rets.insert(g, ret);
        self.memo.insert(key, g);
        self.queue.push((g, f, cx, ret));
        Ok(g)
    }

    fn captures_of(&self, f: FunId, cx: &Ctx) -> Vec<(Local, Level)> {
        self.orig[f.0 as usize]
            .captures
            .iter()
            .map(|&c| cx.get(c))
            .collect()
    }

    /// `e` (of original type `ty`) at level `to` instead of `from`: lifted
    /// with zero tangents when `to` is higher; projected to its primal when
    /// it is lower (exact where that is done: nothing perturbs the levels
    /// above `to` there).
    fn lift(&mut self, e: Expr, from: Level, to: Level, ty: &Type) -> R<Expr> {
        let span = e.span;
        self.walk_reals(e, ty, RealsWalk::Lift(from, to), span)
    }

    /// The value `x` (original type `ty`) walked by `walk`: each real leaf
    /// replaced ([`Expander::real_leaf`]), a vector of reals that one trace
    /// operation takes whole given to it, a tuple rebuilt part by part, a
    /// vector mapped by a helper that walks an element, a sum by a `case`,
    /// a function lifted by recoding it; parts without reals stay as they
    /// are.
    fn walk_reals(&mut self, x: Expr, ty: &Type, walk: RealsWalk, span: Span) -> R<Expr> {
        let (from, to) = walk.levels();
        if !has_real(ty) || matches!(walk, RealsWalk::Lift(a, b) if a == b) {
            return Ok(x);
        }
        let out = dual_ty(ty, to);
        match ty {
            Type::Real => self.real_leaf(x, walk, span),
            Type::Tuple(ts) => self.with_temp(x, |s, x| {
                let parts = ts
                    .iter()
                    .enumerate()
                    .map(|(i, c)| s.walk_reals(proj(x.clone(), i as u32), c, walk, span))
                    .collect::<R<Vec<_>>>()?;
                Ok(mk(ExprKind::Tuple(parts), out, span))
            }),
            Type::Vec(a) => {
                if **a == Type::Real
                    && let Some((op, slot)) = walk.vector_of_reals()
                {
                    return Ok(tape(op, slot, vec![x], span));
                }
                let f = self.helper(Helper::Walk((**a).clone(), walk), span)?;
                Ok(prim(Prim::Map, vec![self.closure(f, span), x], out, span))
            }
            Type::Sum(a, b) => self.map_sum(x, (a, b), from, out, &mut |s, e, t| {
                s.walk_reals(e, t, walk, span)
            }),
            Type::Fun(..) if from < to && matches!(walk, RealsWalk::Lift(..)) => {
                Ok(self.recode(x, ty, to))
            }
            _ => match walk.function_error() {
                Some(what) => Err(unsupported(what, span)),
                None => Ok(x),
            },
        }
    }

    /// A real `x` walked by `walk` ([`Expander::walk_reals`]).
    fn real_leaf(&mut self, x: Expr, walk: RealsWalk, span: Span) -> R<Expr> {
        match walk {
            RealsWalk::Lift(from, to) if from < to => Ok((from.n..to.n).fold(x, |e, k| {
                let below = to.prefix(k);
                match to.prefix(k + 1).mode() {
                    Mode::Forward => pair(e, zero_at(below, span)),
                    Mode::Reverse => constant_of_level(e, below, span),
                }
            })),
            RealsWalk::Lift(from, to) => Ok((to.n..from.n).fold(x, |e, _| proj(e, 0))),
            RealsWalk::Split(l, part) => self.split_real(x, l, part, span),
            RealsWalk::SeedInputs(l, input) if l != Level::PLAIN && input == TapeOp::Input => {
                // Above other levels: a wide Delta with no terms, appended
                // inline (its zero weights give the record's stride).
                let mut zeros = Vec::new();
                for _ in 0..2 {
                    components(&zero_at(l, span), l, &mut zeros);
                }
                let id = tape(input, l.n + 1, zeros, span);
                Ok(reverse_real(x, id, constant_at(1.0, l, span)))
            }
            RealsWalk::SeedInputs(l, input) => Ok(reverse_real(
                x,
                tape(input, l.n + 1, Vec::new(), span),
                constant_at(1.0, l, span),
            )),
            RealsWalk::AdjointsAgain => {
                let slot = Level::PLAIN.above(Mode::Reverse).n;
                let id = tape(TapeOp::InputAgain, slot, Vec::new(), span);
                Ok(tape(TapeOp::Adjoint, slot, vec![id], span))
            }
            RealsWalk::ZeroPrimal(l) => self.with_temp(x, |s, x| {
                let below = l.below();
                let terms = [
                    (proj(x.clone(), 1), proj(x, 2)),
                    (int_lit(-1, span), zero_at(below, span)),
                ];
                let fresh = s.record(terms, l, span);
                Ok(reverse_real(
                    zero_at(below, span),
                    fresh,
                    constant_at(1.0, below, span),
                ))
            }),
        }
    }

    /// The function value `f` (original type `ty`) with its code at level
    /// `to`: a [`ExprKind::Recode`] whose cases [`Self::fill_recodes`] lists.
    fn recode(&mut self, f: Expr, ty: &Type, to: Level) -> Expr {
        let span = f.span;
        mk(
            ExprKind::Recode {
                closure: Box::new(f),
                cases: Vec::new(),
                direct: false,
            },
            dual_ty(ty, to),
            span,
        )
    }

    /// The specialisation a closure's function is (an original function:
    /// itself, at level 0).
    fn key_of(&self, g: FunId) -> Option<Key> {
        if let Some(k) = self.origin.get(&g) {
            return Some(k.clone());
        }
        let f = self.orig.get(g.0 as usize)?;
        let caps = f.captures.iter().map(|&c| (c, Level::PLAIN)).collect();
        Some((g, vec![Level::PLAIN; f.params.len()], caps, Level::PLAIN))
    }

    /// Lists, in every [`ExprKind::Recode`], each closure of its type (made
    /// by a closure expression or by a recoding) and the copy of that
    /// closure's function at the recoding's level. Returns how many pairs.
    fn fill_recodes(&mut self) -> R<usize> {
        let flow = Flow::solve(self.prog);
        let mut listed = 0;
        for i in 0..self.prog.funs.len() {
            let mut body = std::mem::replace(&mut self.prog.funs[i].body, placeholder());
            let r = self.fill_in(&mut body, &flow);
            self.prog.funs[i].body = body;
            listed += r?;
        }
        for i in 0..self.prog.globals.len() {
            let mut body = std::mem::replace(&mut self.prog.globals[i].body, placeholder());
            let r = self.fill_in(&mut body, &flow);
            self.prog.globals[i].body = body;
            listed += r?;
        }
        Ok(listed)
    }

    /// Fills the recodings in `e` with the closures that can reach them;
    /// returns how many pairs it listed.
    fn fill_in(&mut self, e: &mut Expr, flow: &Flow) -> R<usize> {
        let mut listed = 0;
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            if let ExprKind::Recode { closure, cases, .. } = &mut e.kind {
                cases.clear();
                for g in flow.of(closure) {
                    if self.closure(g, e.span).ty != closure.ty {
                        continue;
                    }
                    let Some((f, _, caps, depth)) = self.key_of(g) else {
                        continue;
                    };
                    let fun = &self.orig[f.0 as usize];
                    let orig_ty = fun
                        .params
                        .iter()
                        .rev()
                        .fold(fun.ret.clone(), |t, (_, p)| Type::fun(p.clone(), t));
                    let Some(to) = Level::all().find(|&l| dual_ty(&orig_ty, l) == e.ty) else {
                        return Err(unsupported(
                            "internal: a recoding of an unexpected type",
                            e.span,
                        ));
                    };
                    let copy = self.specialise(f, vec![to], caps, depth.max(to))?;
                    cases.push((g, copy));
                }
                listed += cases.len();
            }
            e.for_each_child_mut(|c| stack.push(c));
        }
        Ok(listed)
    }

    /// `fun acc a -> add acc (g a)`, over `g`'s captures: the element
    /// function of a `sum (map g …)` at level `l`.
    fn add_mapped(&mut self, add: FunId, g: FunId, acc_ty: &Type, span: Span) -> FunId {
        let real = acc_ty.clone();
        let (param, elem) = match self.prog.fun(g).params.first() {
            Some((_, t)) => (t.clone(), t.clone()),
            None => (Type::Unit, Type::Unit),
        };
        let acc = self.local("acc", real.clone());
        let a = self.local("a", param.clone());
        let h = self.new_fun(
            "sum_map".into(),
            vec![(Pat::Local(acc), real.clone()), (Pat::Local(a), elem)],
            real.clone(),
            span,
        );
        self.prog.funs[h.0 as usize].captures = self.prog.fun(g).captures.clone();
        let ret = self.prog.fun(g).ret.clone();
        let x = mk(ExprKind::Call(g, vec![self.local_expr(a, span)]), ret, span);
        let body = mk(
            ExprKind::Call(add, vec![self.local_expr(acc, span), x]),
            real,
            span,
        );
        self.prog.funs[h.0 as usize].body = body;
        h
    }

    /// The generated function for `h`.
    fn helper(&mut self, h: Helper, span: Span) -> R<FunId> {
        if let Some(&f) = self.helpers.get(&h) {
            return Ok(f);
        }
        let f = match &h {
            Helper::Walk(a, walk) => {
                let (from, to) = walk.levels();
                let (name, param) = walk.helper_name();
                self.unary_helper(
                    &h,
                    (name, param, dual_ty(a, from)),
                    dual_ty(a, to),
                    span,
                    |s, x| s.walk_reals(x, a, *walk, span),
                )?
            }
            Helper::AddReals(l) => {
                let ty = dual_ty(&Type::Real, *l);
                let (a, b) = (self.local("acc", ty.clone()), self.local("x", ty.clone()));
                let f = self.new_fun(
                    "add".into(),
                    vec![(Pat::Local(a), ty.clone()), (Pat::Local(b), ty.clone())],
                    ty,
                    span,
                );
                self.helpers.insert(h.clone(), f);
                let (ae, be) = (self.local_expr(a, span), self.local_expr(b, span));
                let (body, level) =
                    self.op(RealFn::Binary(Binary::Add), vec![(ae, *l), (be, *l)], span)?;
                let body = self.lift(body, level, *l, &Type::Real)?;
                self.prog.funs[f.0 as usize].body = body;
                f
            }
            Helper::Chain(pl, dl) => {
                let (p, d) = (
                    self.local("p", dual_ty(&Type::Real, *pl)),
                    self.local("d", dual_ty(&Type::Real, *dl)),
                );
                let out = dual_ty(&Type::Real, (*pl).max(*dl));
                let f = self.new_fun(
                    "chain".into(),
                    vec![
                        (Pat::Local(p), dual_ty(&Type::Real, *pl)),
                        (Pat::Local(d), dual_ty(&Type::Real, *dl)),
                    ],
                    out,
                    span,
                );
                self.helpers.insert(h.clone(), f);
                let (pe, de) = (self.local_expr(p, span), self.local_expr(d, span));
                let (body, level) = self.chain((pe, *pl), (de, *dl), span)?;
                let body = self.lift(body, level, (*pl).max(*dl), &Type::Real)?;
                self.prog.funs[f.0 as usize].body = body;
                f
            }
            Helper::Index => {
                let i = self.local("i", Type::Int);
                let f = self.new_fun(
                    "index".into(),
                    vec![(Pat::Local(i), Type::Int)],
                    Type::Int,
                    span,
                );
                self.prog.funs[f.0 as usize].body = self.local_expr(i, span);
                f
            }
            Helper::AddLane(l) => {
                let real = dual_ty(&Type::Real, *l);
                let state = lane_state(&real);
                let (st, x) = (
                    self.local("lanes", state.clone()),
                    self.local("x", real.clone()),
                );
                let f = self.new_fun(
                    "add_lane".into(),
                    vec![
                        (Pat::Local(st), state.clone()),
                        (Pat::Local(x), real.clone()),
                    ],
                    state.clone(),
                    span,
                );
                self.helpers.insert(h.clone(), f);
                let add = self.helper(Helper::AddReals(*l), span)?;
                let (se, xe) = (self.local_expr(st, span), self.local_expr(x, span));
                let i = proj(se.clone(), 0);
                let first = prim(
                    Prim::Lt,
                    vec![i.clone(), int_lit(SUM_LANES as i64, span)],
                    Type::Bool,
                    span,
                );
                let added = mk(
                    ExprKind::Call(add, vec![proj(se.clone(), 1), xe.clone()]),
                    real,
                    span,
                );
                let next = prim(Prim::Add, vec![i, int_lit(1, span)], Type::Int, span);
                let body = mk(
                    ExprKind::Tuple(vec![
                        next,
                        proj(se.clone(), 2),
                        proj(se.clone(), 3),
                        proj(se, 4),
                        if_(first, xe, added),
                    ]),
                    state,
                    span,
                );
                self.prog.funs[f.0 as usize].body = body;
                f
            }
            Helper::AnyPerturbed(a, l) => {
                let acc = self.local("acc", Type::Bool);
                let x = self.local("x", dual_ty(a, *l));
                let f = self.new_fun(
                    "any_perturbed".into(),
                    vec![
                        (Pat::Local(acc), Type::Bool),
                        (Pat::Local(x), dual_ty(a, *l)),
                    ],
                    Type::Bool,
                    span,
                );
                self.helpers.insert(h.clone(), f);
                let xe = self.local_expr(x, span);
                let here = self.any_perturbed(xe, a, *l, span)?;
                let body = if_(self.local_expr(acc, span), bool_lit(true, span), here);
                self.prog.funs[f.0 as usize].body = body;
                f
            }

            Helper::Sweep(n) => {
                let i = self.local("i", Type::Int);
                let f = self.new_fun(
                    "sweep".into(),
                    vec![(Pat::Local(i), Type::Int)],
                    Type::Unit,
                    span,
                );
                self.helpers.insert(h.clone(), f);
                let body = self.sweep(f, i, *n, span)?;
                self.prog.funs[f.0 as usize].body = body;
                f
            }
        };
        Ok(f)
    }

    /// Defines the helper `h` of one parameter (`(function name, parameter
    /// name, parameter type)`), recorded before its body is made so that
    /// the body may use it; `body` makes the body from the parameter.
    fn unary_helper(
        &mut self,
        h: &Helper,
        (name, param, param_ty): (&str, &str, Type),
        ret: Type,
        span: Span,
        body: impl FnOnce(&mut Self, Expr) -> R<Expr>,
    ) -> R<FunId> {
        let x = self.local(param, param_ty.clone());
        let f = self.new_fun(name.into(), vec![(Pat::Local(x), param_ty)], ret, span);
        self.helpers.insert(h.clone(), f);
        let xe = self.local_expr(x, span);
        self.prog.funs[f.0 as usize].body = body(self, xe)?;
        Ok(f)
    }

    /// The body of `sweep i` for reverse level `n` above levels `m` (Figure
    /// 11's `eval` on the flattened trace, as the interpreter's
    /// `Trace::sweep` does it): from Delta `i` down to 0, a Delta whose
    /// adjoint `a` is not the constant 0 adds `chain(wₖ, a)` to the adjoint
    /// of each parent k — an adjoint still the constant 0 is replaced, not
    /// added to. The arithmetic is level `m`'s, so the sweep is itself
    /// differentiated by the levels below.
    fn sweep(&mut self, sweep: FunId, i: Local, n: Level, span: Span) -> R<Expr> {
        let m = n.below();
        let w = width(m) as i64;
        let slot = n.n;
        let ie = self.local_expr(i, span);
        let word = |op: TapeOp, id: &Expr, first: i64| {
            let id = id.clone();
            let mut j = first;
            move |ty: Type| {
                j += 1;
                tape_word(op, slot, vec![id.clone(), int_lit(j - 1, span)], ty, span)
            }
        };
        let next = mk(
            ExprKind::Call(
                sweep,
                vec![prim(
                    Prim::Sub,
                    vec![ie.clone(), int_lit(1, span)],
                    Type::Int,
                    span,
                )],
            ),
            Type::Unit,
            span,
        );
        let real_m = dual_ty(&Type::Real, m);
        let a = self.local("a", real_m.clone());
        let ae = self.local_expr(a, span);
        let mut steps = next.clone();
        for k in (0..2).rev() {
            let p = self.local("p", Type::Int);
            let pe = self.local_expr(p, span);
            let (wt, tv) = (
                self.local("w", real_m.clone()),
                self.local("term", real_m.clone()),
            );
            let (we, te) = (self.local_expr(wt, span), self.local_expr(tv, span));
            // A zero weight adds nothing (`a` is not zero here).
            let w_zero = self.is_zero(we.clone(), m)?;
            let (term, tl) = self.op(
                RealFn::Binary(Binary::Mul),
                vec![(we, m), (ae.clone(), m)],
                span,
            )?;
            let term = self.lift(term, tl, m, &Type::Real)?;
            let add = self.accumulate(&pe, &te, n, span)?;
            let update = bind(
                wt,
                assemble(m, &mut word(TapeOp::Weight, &ie, k * w)),
                if_(w_zero, unit(span), bind(tv, term, add)),
            );
            let absent = prim(
                Prim::Lt,
                vec![pe.clone(), int_lit(0, span)],
                Type::Bool,
                span,
            );
            let parent = tape(
                TapeOp::Parent,
                slot,
                vec![ie.clone(), int_lit(k, span)],
                span,
            );
            steps = bind(p, parent, then(if_(absent, unit(span), update), steps));
        }
        let a_zero = self.is_zero(ae, m)?;
        let visit = bind(
            a,
            assemble(m, &mut word(TapeOp::AdjGet, &ie, 0)),
            if_(a_zero, next, steps),
        );
        let done = prim(Prim::Lt, vec![ie, int_lit(0, span)], Type::Bool, span);
        Ok(if_(done, unit(span), visit))
    }

    /// The input of forward level `l + 1`: each real leaf of `x` (level `l`,
    /// of original type `ty`) paired with the corresponding leaf of `dx`
    /// (level `dl` ≤ `l`, lifted to `l` leaf by leaf: no lifted copy of a
    /// vector is made), checking that vector lengths agree as the
    /// interpreter does.
    fn seed(
        &mut self,
        x: Expr,
        (dx, dl): (Expr, Level),
        ty: &Type,
        l: Level,
        span: Span,
    ) -> R<Expr> {
        let forward = (l, Mode::Forward);
        self.attach_from(x, (dx, dl), ty, forward, Role::Tangent, span)
    }

    /// A value of level `l` + 1 (of kind `mode`) from its primal `x` (level
    /// `l`) and the perturbations in `dx`, both of original type `ty`: at a
    /// forward level `dx` holds the tangents (level `l`), each real of the
    /// result the pair (xᵢ, dxᵢ); at a reverse level `dx` is a value of
    /// level `l` + 1 whose reals' Delta ids are taken, (xᵢ, idᵢ). The shapes
    /// must agree (vector lengths, sum constructors: `role`'s error), as the
    /// interpreter's `zip_shapes` checks them.
    fn attach(
        &mut self,
        x: Expr,
        dx: Expr,
        ty: &Type,
        (l, mode): (Level, Mode),
        role: Role,
        span: Span,
    ) -> R<Expr> {
        let dx_level = match mode {
            Mode::Forward => l,
            Mode::Reverse => l.above(mode),
        };
        self.attach_from(x, (dx, dx_level), ty, (l, mode), role, span)
    }

    /// [`Self::attach`] with the tangents `dx` at level `dx_level` (≤ `l`,
    /// forward levels), each lifted to `l` where it is paired.
    fn attach_from(
        &mut self,
        x: Expr,
        (dx, dx_level): (Expr, Level),
        ty: &Type,
        (l, mode): (Level, Mode),
        role: Role,
        span: Span,
    ) -> R<Expr> {
        let out_level = l.above(mode);
        match ty {
            // A tangent zero in every component is the interpreter's
            // constant 0 (its `Num::forward` drops it): +0.0, also for -0.0.
            // `x` is evaluated before `dx` in every case, as the
            // interpreter evaluates a primitive's arguments: that decides
            // which error comes first, and the order of the Deltas both
            // record (so the order of a sweep's additions).
            Type::Real => match mode {
                Mode::Forward => self.with_temp(x, |s, x| {
                    s.with_temp(dx, |s, dx| {
                        // Lifting adds zero components only: zero before
                        // lifting iff zero after.
                        let zero = s.is_zero(dx.clone(), dx_level)?;
                        let dx = s.lift(dx, dx_level, l, &Type::Real)?;
                        Ok(pair(x, select(zero, zero_at(l, span), dx)))
                    })
                }),
                Mode::Reverse => self.with_temp(dx, |_, dx| {
                    Ok(reverse_real(x, proj(dx.clone(), 1), proj(dx, 2)))
                }),
            },
            Type::Tuple(ts) => self.with_temp(x, |s, x| {
                s.with_temp(dx, |s, dx| {
                    let parts = ts
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            s.attach_from(
                                proj(x.clone(), i as u32),
                                (proj(dx.clone(), i as u32), dx_level),
                                c,
                                (l, mode),
                                role,
                                span,
                            )
                        })
                        .collect::<R<Vec<_>>>()?;
                    Ok(mk(ExprKind::Tuple(parts), dual_ty(ty, out_level), span))
                })
            }),
            Type::Vec(a) => match self.quiet_build(&dx) {
                Some((n, g)) if mode == Mode::Forward => {
                    self.seed_build(x, (n, g, dx_level, dx.span), a, l, role, span)
                }
                _ => self.attach_vector(x, (dx, dx_level), a, (l, mode), role, span),
            },
            Type::Sum(a, b) => self.with_temp(x, |s, x| {
                s.with_temp(dx, |s, dx| {
                    let check = shape_check(&x, &dx, role, span);
                    // After the check the constructors agree; the other arm of
                    // the tangent's match is never taken.
                    let out_ty = dual_ty(ty, out_level);
                    let mut arms = Vec::new();
                    for (left, t) in [(true, a), (false, b)] {
                        let p = s.local("_", dual_ty(t, l));
                        let d = s.local("_", dual_ty(t, dx_level));
                        let pe = s.local_expr(p, span);
                        let de = s.local_expr(d, span);
                        let tangent = s.payload(dx.clone(), de, left, ty, dx_level, span);
                        let seeded =
                            s.attach_from(pe, (tangent, dx_level), t, (l, mode), role, span)?;
                        let inj = if left {
                            ExprKind::Inl(Box::new(seeded))
                        } else {
                            ExprKind::Inr(Box::new(seeded))
                        };
                        arms.push((Pat::Local(p), d, mk(inj, out_ty.clone(), span)));
                    }
                    let (r, l_arm) = (arms.pop(), arms.pop());
                    let (Some((lp, _, le)), Some((rp, _, re))) = (l_arm, r) else {
                        return Err(unsupported("internal: a sum with no arms", span));
                    };
                    let case = mk(
                        ExprKind::Case {
                            scrutinee: Box::new(x),
                            left: (lp, Box::new(le)),
                            right: (rp, Box::new(re)),
                        },
                        out_ty.clone(),
                        span,
                    );
                    Ok(mk(
                        ExprKind::Let(Pat::Wild, Box::new(check), Box::new(case)),
                        out_ty,
                        span,
                    ))
                })
            }),
            // Nothing to perturb, but `dx` is still evaluated (its errors).
            _ if !has_real(ty) => self.with_temp(x, |_, x| Ok(then(dx, x))),
            _ => Err(unsupported("`jvp` at a point that holds a function", span)),
        }
    }

    /// [`Self::attach_from`] of the vector `x` and its perturbations `dx`
    /// (elements of original type `a`): one pass, one allocation — `build
    /// (size x) (fun i -> attach x[i] dx[i])` after the lengths are checked.
    fn attach_vector(
        &mut self,
        x: Expr,
        (dx, dx_level): (Expr, Level),
        a: &Type,
        (l, mode): (Level, Mode),
        role: Role,
        span: Span,
    ) -> R<Expr> {
        let elem = dual_ty(a, l.above(mode));
        self.with_temp(x, |s, x| {
            s.with_temp(dx, |s, dx| {
                let seeded = s.build_over("seed", &x, &dx, elem, span, &mut |s, i| {
                    let xi = index(&x, &i, dual_ty(a, l));
                    let dxi = index(&dx, &i, dual_ty(a, dx_level));
                    s.attach_from(xi, (dxi, dx_level), a, (l, mode), role, span)
                })?;
                Ok(then(shape_check(&x, &dx, role, span), seeded))
            })
        })
    }

    /// [`Self::attach_from`] at a forward level of the vector `x` with the
    /// tangent `build n g` (level `dl`, at `build_span`), `g` a quiet function
    /// ([`Self::quiet_build`]): when `n` is `x`'s length, `x[i]` is paired with
    /// `g i` in one pass and the tangent vector is never made (a forward
    /// gradient's basis vectors); otherwise the tangent is built and the
    /// lengths checked, which raises the interpreter's error. `g` can
    /// neither fail nor record nor print, so only the failing case can tell
    /// the two apart, and it takes the general path.
    fn seed_build(
        &mut self,
        x: Expr,
        (n, g, dl, build_span): (Expr, FunId, Level, Span),
        a: &Type,
        l: Level,
        role: Role,
        span: Span,
    ) -> R<Expr> {
        let forward = (l, Mode::Forward);
        let elem = dual_ty(a, l.above(Mode::Forward));
        let tangent_elem = dual_ty(a, dl);
        self.with_temp(x, |s, x| {
            s.with_temp(n, |s, n| {
                let captures = s.prog.fun(g).captures.clone();
                let fused =
                    s.build_capturing("seed", &x, captures, elem.clone(), span, &mut |s, i| {
                        let xi = index(&x, &i, dual_ty(a, l));
                        let gi = mk(ExprKind::Call(g, vec![i]), tangent_elem.clone(), span);
                        s.attach_from(xi, (gi, dl), a, forward, role, span)
                    })?;
                let tangent_ty = Type::Vec(Box::new(tangent_elem.clone()));
                let built = prim(
                    Prim::Build,
                    vec![n.clone(), s.closure(g, build_span)],
                    tangent_ty,
                    build_span,
                );
                let general = s.attach_vector(x.clone(), (built, dl), a, forward, role, span)?;
                let size = prim(Prim::Size, vec![x.clone()], Type::Int, span);
                let same = prim(Prim::Eq, vec![n, size], Type::Bool, span);
                Ok(if_(same, fused, general))
            })
        })
    }

    /// The input of reverse level `l` + 1: each real leaf of `x` (at level
    /// `l`, of original type `ty`) with a fresh input Delta, in the
    /// interpreter's order (left to right, depth first: ids 0, 1, …).
    fn seed_inputs(&mut self, x: Expr, ty: &Type, l: Level, input: TapeOp, span: Span) -> R<Expr> {
        self.walk_reals(x, ty, RealsWalk::SeedInputs(l, input), span)
    }

    /// The gradient of the point `x` (plain, of type `ty`) after the sweep
    /// of the kept trace of reverse level 1, resumed: its real leaves in
    /// order are the trace's inputs, its first Deltas, so leaf j's adjoint
    /// is Delta j's (ids counted by `TapeOp::InputAgain`) — what
    /// [`Expander::seed_inputs`] and then [`Expander::read_back`] would give,
    /// in one walk, without making the seeded point. Int and Bool leaves
    /// are carried through, as the gradient's are.
    fn adjoints_again(&mut self, x: Expr, ty: &Type, span: Span) -> R<Expr> {
        self.walk_reals(x, ty, RealsWalk::AdjointsAgain, span)
    }

    /// `build (size a) (fun i -> body i)`: elements of type `elem` made by
    /// a new function `name` that captures `a` (a local or a literal) and
    /// the locals `captures`.
    fn build_capturing(
        &mut self,
        name: &str,
        a: &Expr,
        mut captures: Vec<Local>,
        elem: Type,
        span: Span,
        body: &mut dyn FnMut(&mut Self, Expr) -> R<Expr>,
    ) -> R<Expr> {
        let i = self.local("i", Type::Int);
        let f = self.new_fun(
            name.into(),
            vec![(Pat::Local(i), Type::Int)],
            elem.clone(),
            span,
        );
        if let ExprKind::Local(c) = a.kind {
            captures.push(c);
        }
        captures.sort();
        captures.dedup();
        self.prog.funs[f.0 as usize].captures = captures;
        let made = body(self, self.local_expr(i, span))?;
        self.prog.funs[f.0 as usize].body = made;
        let size = prim(Prim::Size, vec![a.clone()], Type::Int, span);
        Ok(prim(
            Prim::Build,
            vec![size, self.closure(f, span)],
            Type::Vec(Box::new(elem)),
            span,
        ))
    }

    /// `build (size a) (fun i -> body i)`: elements of type `elem` made by
    /// a new function `name` that captures the locals (or literals) `a` and
    /// `b`.
    fn build_over(
        &mut self,
        name: &str,
        a: &Expr,
        b: &Expr,
        elem: Type,
        span: Span,
        body: &mut dyn FnMut(&mut Self, Expr) -> R<Expr>,
    ) -> R<Expr> {
        let captures = match b.kind {
            ExprKind::Local(c) => vec![c],
            _ => Vec::new(),
        };
        self.build_capturing(name, a, captures, elem, span, body)
    }

    /// `(n, g)` if `e` is `build n g` with `g` a copy of a function whose
    /// body is quiet: made of locals, literals, `if`s and comparisons of
    /// integers only, so that calling it can neither fail, nor record a
    /// Delta, nor print (`fun j -> if i == j then 1.0 else 0.0`).
    fn quiet_build(&self, e: &Expr) -> Option<(Expr, FunId)> {
        let ExprKind::Prim(Prim::Build, args) = &e.kind else {
            return None;
        };
        let [n, f] = &args[..] else { return None };
        let ExprKind::Closure(g) = f.kind else {
            return None;
        };
        let (orig, ..) = self.key_of(g)?;
        quiet(&self.orig.get(orig.0 as usize)?.body).then(|| (n.clone(), g))
    }

    /// `match x with inl p -> inl (f p) | inr q -> inr (f q)`: the sum `x`
    /// (payloads of original types `a`, `b` at level `l`) mapped
    /// constructor-wise to type `out`.
    fn map_sum(
        &mut self,
        x: Expr,
        (a, b): (&Type, &Type),
        l: Level,
        out: Type,
        f: &mut dyn FnMut(&mut Self, Expr, &Type) -> R<Expr>,
    ) -> R<Expr> {
        let span = x.span;
        let (p, q) = (
            self.local("_", dual_ty(a, l)),
            self.local("_", dual_ty(b, l)),
        );
        let left = f(self, self.local_expr(p, span), a)?;
        let right = f(self, self.local_expr(q, span), b)?;
        let arm = |kind, pat| (Pat::Local(pat), Box::new(mk(kind, out.clone(), span)));
        Ok(mk(
            ExprKind::Case {
                scrutinee: Box::new(x),
                left: arm(ExprKind::Inl(Box::new(left)), p),
                right: arm(ExprKind::Inr(Box::new(right)), q),
            },
            out.clone(),
            span,
        ))
    }

    /// The payload of the sum `dx` (original type `ty`, level `l`) on its
    /// `left` (or right) side, bound to `d`; on the other side (never taken
    /// after a [`ExprKind::TangentShape`] check) a zero of the payload type.
    fn payload(&mut self, dx: Expr, d: Expr, left: bool, ty: &Type, l: Level, span: Span) -> Expr {
        let Type::Sum(a, b) = ty else { return d };
        let (this, other) = if left { (a, b) } else { (b, a) };
        let Expr {
            kind: ExprKind::Local(dl),
            ..
        } = d
        else {
            return d;
        };
        let o = self.local("_", dual_ty(other, l));
        let zero = zero_value(this, l, span);
        let this_ty = dual_ty(this, l);
        let take = mk(ExprKind::Local(dl), this_ty.clone(), span);
        let (left_arm, right_arm) = if left {
            ((Pat::Local(dl), take), (Pat::Local(o), zero))
        } else {
            ((Pat::Local(o), zero), (Pat::Local(dl), take))
        };
        mk(
            ExprKind::Case {
                scrutinee: Box::new(dx),
                left: (left_arm.0, Box::new(left_arm.1)),
                right: (right_arm.0, Box::new(right_arm.1)),
            },
            this_ty,
            span,
        )
    }

    /// A part of `y` (original type `ty`, level `l`), one level down: its
    /// primal, tangent or adjoint. Int and Bool leaves are carried unchanged.
    fn split(&mut self, y: Expr, ty: &Type, l: Level, part: Part) -> R<Expr> {
        let span = y.span;
        self.walk_reals(y, ty, RealsWalk::Split(l, part), span)
    }

    /// A part of the real `y` at level `l` ([`Expander::split`]).
    fn split_real(&mut self, y: Expr, l: Level, part: Part, span: Span) -> R<Expr> {
        Ok(match part {
            Part::Primal => proj(y, 0),
            // A zero tangent is given out as the interpreter's constant
            // 0 (its `Num::forward` drops a zero tangent): here it may be
            // −0 or, above a level, a zero real with a primal of −0
            // (from a product that underflows).
            Part::Tangent if l.below() == Level::PLAIN => prim(
                Prim::Add,
                vec![proj(y, 1), real_lit(0.0, span)],
                Type::Real,
                span,
            ),
            Part::Tangent => {
                let below = l.below();
                return self.with_temp(proj(y, 1), |s, t| {
                    let zero = s.is_zero(t.clone(), below)?;
                    Ok(select(zero, zero_at(below, span), t))
                });
            }
            Part::Adjoint if l.below() == Level::PLAIN => {
                tape(TapeOp::Adjoint, l.n, vec![proj(y, 1)], span)
            }
            Part::Adjoint => {
                return self.with_temp(proj(y, 1), |_, id| {
                    let mut j = 0;
                    Ok(assemble(l.below(), &mut |ty| {
                        j += 1;
                        let at = vec![id.clone(), int_lit(j - 1, span)];
                        tape_word(TapeOp::AdjGet, l.n, at, ty, span)
                    }))
                });
            }
        })
    }

    /// The real at level `l` stripped to its plain primal.
    fn primal(e: Expr, l: Level) -> Expr {
        (0..l.n).fold(e, |e, _| proj(e, 0))
    }

    /// `true` if the real `e` at level `l` is zero in every component (the
    /// interpreter's constant 0: a structural zero).
    fn is_zero(&mut self, e: Expr, l: Level) -> R<Expr> {
        self.unperturbed(e, l, true)
    }

    /// `true` if the real `e` at level `l` is a constant of every level (no
    /// tangent, no Delta: the interpreter's plain `Num::Real`).
    fn is_plain(&mut self, e: Expr, l: Level) -> R<Expr> {
        self.unperturbed(e, l, false)
    }

    /// `true` if the real `e` at level `l` has no tangent and no Delta at any
    /// level, and (if `zero`) its value is 0.
    fn unperturbed(&mut self, e: Expr, l: Level, zero: bool) -> R<Expr> {
        let span = e.span;
        if l == Level::PLAIN {
            return Ok(if zero {
                prim(Prim::Eq, vec![e, real_lit(0.0, span)], Type::Bool, span)
            } else {
                bool_lit(true, span)
            });
        }
        self.with_temp(e, |s, e| {
            let p = s.unperturbed(proj(e.clone(), 0), l.below(), zero)?;
            let t = match l.mode() {
                Mode::Forward => s.is_zero(proj(e, 1), l.below())?,
                // A real with a Delta is never a constant.
                Mode::Reverse => prim(
                    Prim::Eq,
                    vec![proj(e, 1), int_lit(-1, span)],
                    Type::Bool,
                    span,
                ),
            };
            Ok(select(p, t, bool_lit(false, span)))
        })
    }

    /// The chain rule's product `p · d` of reals (`nabla::Number::chain`).
    fn chain(&mut self, p: (Expr, Level), d: (Expr, Level), span: Span) -> R<(Expr, Level)> {
        let l = p.1.max(d.1);
        if l == Level::PLAIN {
            return Ok((
                prim(Prim::Chain, vec![p.0, d.0], Type::Real, span),
                Level::PLAIN,
            ));
        }
        let (pe, pl) = p;
        let (de, dl) = d;
        let out = self.with_temp(pe, |s, pe| {
            s.with_temp(de, |s, de| {
                let zp = s.is_zero(pe.clone(), pl)?;
                let zd = s.is_zero(de.clone(), dl)?;
                let either = select(zp, bool_lit(true, span), zd);
                let (m, ml) = s.op(RealFn::Binary(Binary::Mul), vec![(pe, pl), (de, dl)], span)?;
                let m = s.lift(m, ml, l, &Type::Real)?;
                Ok(choose(either, zero_at(l, span), m, l))
            })
        })?;
        Ok((out, l))
    }

    /// The real primitive `p` on operands at their levels: plain at level 0,
    /// else Figure 3's (value, Σ ∂ᵢ · dxᵢ) one level down, with the
    /// interpreter's structural zeros.
    fn op(&mut self, f: RealFn, args: Vec<(Expr, Level)>, span: Span) -> R<(Expr, Level)> {
        let l = args.iter().map(|a| a.1).max().unwrap_or(Level::PLAIN);
        if l == Level::PLAIN {
            let mut args: Vec<Expr> = args.into_iter().map(|a| a.0).collect();
            return Ok(match (f, prim_of(f)) {
                (_, Some(p)) => (prim(p, args, Type::Real, span), Level::PLAIN),
                // `1 / x`: the value of the table's reciprocal, bit for bit;
                // its derivative (at higher levels) is the table's own.
                (RealFn::Unary(Unary::Recip), None) => {
                    args.insert(0, real_lit(1.0, span));
                    (prim(Prim::Div, args, Type::Real, span), Level::PLAIN)
                }
                _ => return Err(unsupported(&format!("the function {f:?}"), span)),
            });
        }
        // Bind the operands, then take each apart at level l.
        let mut lets = Vec::new();
        let mut primals = Vec::new();
        // The operands perturbed at level l (a local or literal each).
        let mut perturbed = Vec::new();
        for (e, al) in args {
            let e = if matches!(e.kind, ExprKind::Local(_) | ExprKind::Lit(_)) {
                e
            } else {
                let t = self.local("_", e.ty.clone());
                lets.push((t, e));
                self.local_expr(t, span)
            };
            if al == l {
                primals.push((proj(e.clone(), 0), l.below()));
                perturbed.push(Some(e));
            } else {
                primals.push((e, al));
                perturbed.push(None);
            }
        }
        let (v, vl) = self.op(f, primals.clone(), span)?;
        let vt = self.local("_", v.ty.clone());
        lets.push((vt, v));
        let value = (self.local_expr(vt, span), vl);
        let partials = partials(f, &primals, &value, span)?;
        // Whether operand k's partial is the table's constant 1 (both of
        // `+`, the first of `−`), as the interpreter decides it (`Num::binary`).
        let unit = |k: usize| matches!(f, RealFn::Binary(b) if partial_is_one(b, k));
        let value = self.lift(value.0, value.1, l.below(), &Type::Real)?;
        let mut out = if l.mode() == Mode::Forward {
            // Σ chain(∂ᵢ, dxᵢ) over the tangents that are not zero at run
            // time, added in operand order (the library's `Dual::apply_binary`).
            // The partials 1 are not multiplied.
            let mut terms = Vec::new();
            for (k, (partial, e)) in partials.into_iter().zip(perturbed).enumerate() {
                if let Some(e) = e {
                    terms.push((partial, proj(e, 1), unit(k)));
                }
            }
            pair(value, self.sum_terms(terms, l.below(), span)?)
        } else {
            let mut vars = Vec::new();
            for (k, (partial, e)) in partials.into_iter().zip(perturbed).enumerate() {
                if let Some(e) = e {
                    vars.push((partial, e, unit(k)));
                }
            }
            self.reverse_delta(value, vars, l, &mut lets, span)?
        };
        for (t, e) in lets.into_iter().rev() {
            let ty = out.ty.clone();
            out = mk(
                ExprKind::Let(Pat::Local(t), Box::new(e), Box::new(out)),
                ty,
                span,
            );
        }
        Ok((out, l))
    }

    /// The real of reverse level `l` with value `value` (a local, or a
    /// constant lifted) that an operation on the variables `vars` makes —
    /// each given as (its partial, the operand: a local, whether the partial
    /// is the table's constant 1) — by the interpreter's rules
    /// (`Num::binary`): one variable's coefficient is scaled by its partial
    /// (by nothing for a partial 1); two reals of one Delta add their
    /// weights (`x + x`); only two different variables record a Delta,
    /// `Let id = wₓ · Var idₓ + wᵧ · Var idᵧ`, its weights the partials
    /// times the coefficients. An operand whose id is −1 at run time (a
    /// constant of the level) leaves the other alone. Bindings the result
    /// needs go to `lets`.
    fn reverse_delta(
        &mut self,
        value: Expr,
        mut vars: Vec<(Sym, Expr, bool)>,
        l: Level,
        lets: &mut Vec<(Local, Expr)>,
        span: Span,
    ) -> R<Expr> {
        let below = l.below();
        let value = if matches!(value.kind, ExprKind::Local(_)) {
            value
        } else {
            let t = self.local("_", value.ty.clone());
            lets.push((t, value));
            self.local_expr(t, span)
        };
        // Each variable as (its partial, None for the constant 1; its id;
        // its coefficient c).
        let mut emitted = Vec::new();
        for (partial, e, unit) in vars.drain(..) {
            let partial = if unit {
                None
            } else {
                let (p, pl) = self.emit(&partial, span)?;
                let t = self.local("d", dual_ty(&Type::Real, pl));
                lets.push((t, p));
                Some((self.local_expr(t, span), pl))
            };
            emitted.push((partial, proj(e.clone(), 1), proj(e, 2)));
        }
        let is_constant = |id: &Expr| {
            prim(
                Prim::Eq,
                vec![id.clone(), int_lit(-1, span)],
                Type::Bool,
                span,
            )
        };
        match emitted.as_slice() {
            // `Scale ∂ (Scale c δ)`: the coefficient chain(∂, c), or c
            // itself for ∂ = 1.
            [(partial, id, c)] => {
                let c = match partial {
                    None => c.clone(),
                    Some(p) => self.weight(Some(p.clone()), c.clone(), below, span)?,
                };
                Ok(reverse_real(value, id.clone(), c))
            }
            [(px, ix, cx), (py, iy, cy)] => {
                // The weights chain(∂, c), formed before the branches (a
                // constant's c is the zero of the level, which makes its
                // weight zero without an operation).
                let mut bound = |s: &mut Self, e: Expr| {
                    let t = s.local("w", e.ty.clone());
                    lets.push((t, e));
                    s.local_expr(t, span)
                };
                let wx = self.weight(px.clone(), cx.clone(), below, span)?;
                let wx = bound(self, wx);
                let wy = self.weight(py.clone(), cy.clone(), below, span)?;
                let wy = bound(self, wy);
                let alone = |partial: &Option<(Expr, Level)>, w: &Expr, c: &Expr| match partial {
                    None => c.clone(),
                    Some(_) => w.clone(),
                };
                let x_alone_c = alone(px, &wx, cx);
                let y_alone_c = alone(py, &wy, cy);
                if below == Level::PLAIN {
                    // One operation, the branches in native code.
                    let args = vec![ix.clone(), wx, x_alone_c, iy.clone(), wy, y_alone_c];
                    let delta = bound(self, tape(TapeOp::Combine, l.n, args, span));
                    return Ok(reverse_real(value, proj(delta.clone(), 0), proj(delta, 1)));
                }
                let add = self.helper(Helper::AddReals(below), span)?;
                let real = dual_ty(&Type::Real, below);
                let sum = mk(
                    ExprKind::Call(add, vec![wx.clone(), wy.clone()]),
                    real,
                    span,
                );
                let same = reverse_real(value.clone(), ix.clone(), sum);
                let x_alone = reverse_real(value.clone(), ix.clone(), x_alone_c);
                let y_alone = reverse_real(value.clone(), iy.clone(), y_alone_c);
                let id = self.record([(ix.clone(), wx), (iy.clone(), wy)], l, span);
                let new = reverse_real(value, id, constant_at(1.0, below, span));
                let same_id = prim(Prim::Eq, vec![ix.clone(), iy.clone()], Type::Bool, span);
                // Two variables (ids ≥ 0, one test on the common path), or
                // one operand a constant of the level at run time.
                let variable = |id: &Expr| {
                    prim(
                        Prim::Ge,
                        vec![id.clone(), int_lit(0, span)],
                        Type::Bool,
                        span,
                    )
                };
                let both = select(variable(ix), variable(iy), bool_lit(false, span));
                Ok(if_(
                    both,
                    if_(same_id, same, new),
                    if_(is_constant(iy), x_alone, y_alone),
                ))
            }
            _ => Err(unsupported("internal: an operation of no variable", span)),
        }
    }

    /// The weight `chain(∂, c)` of a term with coefficient `c` (level
    /// `below`) and partial `∂` (`None`: the table's constant 1, not
    /// multiplied: `c`, or the zero of the level for a zero `c`). Above
    /// plain reals the product is a call ([`Helper::Chain`]).
    fn weight(
        &mut self,
        partial: Option<(Expr, Level)>,
        c: Expr,
        below: Level,
        span: Span,
    ) -> R<Expr> {
        match partial {
            Some((p, _)) if below == Level::PLAIN => {
                Ok(prim(Prim::Chain, vec![p, c], Type::Real, span))
            }
            Some((p, pl)) => {
                let chain = self.helper(Helper::Chain(pl, below), span)?;
                let real = dual_ty(&Type::Real, below);
                Ok(mk(ExprKind::Call(chain, vec![p, c]), real, span))
            }
            None if below == Level::PLAIN => Ok(prim(
                Prim::Chain,
                vec![real_lit(1.0, span), c],
                Type::Real,
                span,
            )),
            None => self.with_temp(c, |s, c| {
                let zero = s.is_zero(c.clone(), below)?;
                Ok(choose(zero, zero_at(below, span), c, below))
            }),
        }
    }

    /// The Delta `Let id = w₀ · Var p₀ + w₁ · Var p₁` recorded on the trace
    /// of reverse level `l` (weights of the level below, locals or
    /// constants); its id (−1 if both ids are −1; a term of id −1 is left
    /// out).
    fn record(&mut self, terms: [(Expr, Expr); 2], l: Level, span: Span) -> Expr {
        let [(p0, w0), (p1, w1)] = terms;
        let below = l.below();
        if below == Level::PLAIN {
            return tape(TapeOp::Push, l.n, vec![p0, w0, p1, w1], span);
        }
        // Wide weights, passed flattened.
        let mut push = vec![p0, p1];
        components(&w0, below, &mut push);
        components(&w1, below, &mut push);
        tape(TapeOp::PushWide, l.n, push, span)
    }

    /// `Σ chain(∂, t)` at level `l` over the terms whose tangent `t` is not
    /// zero at run time (0 if none is), as the library's `Dual` adds them.
    /// Branch-free: every term is formed (a zero tangent makes its `chain`
    /// zero); plain terms are added outright (see the comment below), others
    /// chosen with [`ExprKind::Select`].
    fn sum_terms(&mut self, terms: Vec<(Sym, Expr, bool)>, l: Level, span: Span) -> R<Expr> {
        let mut formed = Vec::with_capacity(terms.len());
        for (partial, t, unit) in terms {
            if unit && l != Level::PLAIN {
                // `chain(1, t)`: `t`, or the zero of level `l` for a zero `t`.
                let term = self.with_temp(t.clone(), |s, t| {
                    let zero = s.is_zero(t.clone(), l)?;
                    Ok(choose(zero, zero_at(l, span), t, l))
                })?;
                formed.push((term, t));
                continue;
            }
            let (pe, pl) = self.emit(&partial, span)?;
            let (term, tl) = self.chain((pe, pl), (t.clone(), l), span)?;
            formed.push((self.lift(term, tl, l, &Type::Real)?, t));
        }
        if l == Level::PLAIN {
            // Plain tangents: the interpreter drops a zero tangent, −0 too
            // (`Num::forward`), so a tangent slot holds +0 for it: each term
            // `chain(∂, t) + 0`, which is +0 when `t` is 0 (and when the
            // product underflows to −0) and itself otherwise. Such terms are
            // never −0, so adding them all gives what skipping the zero
            // ones gives, bit for bit, and no choice is needed.
            let normal =
                |(term, _)| prim(Prim::Add, vec![term, real_lit(0.0, span)], Type::Real, span);
            let mut terms = formed.into_iter().map(normal);
            let first = terms.next().unwrap_or_else(|| real_lit(0.0, span));
            return Ok(terms.fold(first, |sum, term| {
                prim(Prim::Add, vec![sum, term], Type::Real, span)
            }));
        }
        match formed.len() {
            0 => Ok(zero_at(l, span)),
            1 => Ok(formed.remove(0).0),
            _ => {
                // Branches, each term formed only in the arms that use it:
                // above plain reals a term is a product of level-`l` reals,
                // which a zero tangent (common under a basis direction)
                // saves.
                let (a, ta) = formed.remove(0);
                let (b, tb) = formed.remove(0);
                self.with_temp(ta, |s, ta| {
                    s.with_temp(tb, |s, tb| {
                        let za = s.is_zero(ta, l)?;
                        let zb = s.is_zero(tb, l)?;
                        let (sum, sl) = s.op(
                            RealFn::Binary(Binary::Add),
                            vec![(a.clone(), l), (b.clone(), l)],
                            span,
                        )?;
                        let sum = s.lift(sum, sl, l, &Type::Real)?;
                        let only_b = if_(zb.clone(), zero_at(l, span), b);
                        let with_a = if_(zb, a, sum);
                        Ok(if_(za, only_b, with_a))
                    })
                })
            }
        }
    }

    /// A symbolic number as code at its level.
    fn emit(&mut self, s: &Sym, span: Span) -> R<(Expr, Level)> {
        match s {
            Sym::Leaf(e, l) => Ok((e.clone(), *l)),
            Sym::Lit(c) => Ok((real_lit(*c, span), Level::PLAIN)),
            Sym::Op(f, args) => {
                let args = args
                    .iter()
                    .map(|a| self.emit(a, span))
                    .collect::<R<Vec<_>>>()?;
                self.op(*f, args, span)
            }
            Sym::Chain(p, d) => {
                let p = self.emit(p, span)?;
                let d = self.emit(d, span)?;
                self.chain(p, d, span)
            }
            Sym::If(q, yes, no) => {
                let (cmp, x, c) = &**q;
                let (xe, xl) = self.emit(x, span)?;
                let test = prim(
                    *cmp,
                    vec![Self::primal(xe, xl), real_lit(*c, span)],
                    Type::Bool,
                    span,
                );
                let (a, al) = self.emit(yes, span)?;
                let (b, bl) = self.emit(no, span)?;
                let l = al.max(bl);
                let a = self.lift(a, al, l, &Type::Real)?;
                let b = self.lift(b, bl, l, &Type::Real)?;
                Ok((if_(test, a, b), l))
            }
            Sym::Unknown(what) => Err(unsupported(&format!("the function `{what}`"), span)),
        }
    }

    /// `e` rewritten in `cx`, with its level.
    fn rewrite(&mut self, e: &Expr, cx: &Ctx) -> R<(Expr, Level)> {
        if crate::stack::check().is_err() {
            return Err(unsupported("a program nested this deeply", e.span));
        }
        let span = e.span;
        let same = |kind| mk(kind, e.ty.clone(), span);
        Ok(match &e.kind {
            ExprKind::Lit(_) | ExprKind::Global(_) => (e.clone(), Level::PLAIN),
            ExprKind::Trace(label, x) => {
                let (x, l) = self.rewrite(x, cx)?;
                if l == Level::PLAIN {
                    return Ok((
                        same(ExprKind::Trace(label.clone(), Box::new(x))),
                        Level::PLAIN,
                    ));
                }
                // The value stays at its level; what is printed is its
                // primal, stripped to level 0 as the interpreter prints it.
                let ty = e.ty.clone();
                if !first_order(&ty) {
                    return Err(unsupported(
                        "`trace` of a value holding a function under `diff`/`jvp`",
                        span,
                    ));
                }
                let out = self.with_temp(x, |s, v| {
                    let mut primal = v.clone();
                    for k in (1..=l.n).rev() {
                        primal = s.split(primal, &ty, l.prefix(k), Part::Primal)?;
                    }
                    let traced = mk(ExprKind::Trace(label.clone(), Box::new(primal)), ty, span);
                    let vty = v.ty.clone();
                    Ok(mk(
                        ExprKind::Let(Pat::Wild, Box::new(traced), Box::new(v)),
                        vty,
                        span,
                    ))
                })?;
                (out, l)
            }
            ExprKind::Local(l) => {
                let (l, level) = cx.get(*l);
                (self.local_expr(l, span), level)
            }
            ExprKind::Call(f, args) => {
                let mut new_args = Vec::with_capacity(args.len());
                let mut levels = Vec::with_capacity(args.len());
                for a in args {
                    let (a, l) = self.rewrite(a, cx)?;
                    new_args.push(a);
                    levels.push(l);
                }
                let caps = self.captures_of(*f, cx);
                let g = self.specialise(*f, levels, caps, cx.depth)?;
                let ret = self.prog.fun(g).ret.clone();
                let level = self.ret_level(g);
                (mk(ExprKind::Call(g, new_args), ret, span), level)
            }
            ExprKind::Closure(f) => {
                let caps = self.captures_of(*f, cx);
                let n = self.orig[f.0 as usize].params.len();
                let g = self.specialise(*f, vec![cx.depth; n], caps, cx.depth)?;
                (self.closure(g, span), self.ret_level(g))
            }
            ExprKind::Apply(f0, x0) => {
                let (f, fl) = self.rewrite(f0, cx)?;
                let (x, xl) = self.rewrite(x0, cx)?;
                // A function value from outside applied to a value perturbed
                // here: its code at this level, over the same captures.
                let (f, fl) = if xl > fl && has_real(&x0.ty) {
                    (self.recode(f, &f0.ty, xl), xl)
                } else {
                    (f, fl)
                };
                let x = self.lift(x, xl, fl, &x0.ty)?;
                let ty = dual_ty(&e.ty, fl);
                (mk(ExprKind::Apply(Box::new(f), Box::new(x)), ty, span), fl)
            }
            ExprKind::Let(p, v, body) => {
                let (v, vl) = self.rewrite(v, cx)?;
                let p = self.bind(p, vl, cx);
                let (b, bl) = self.rewrite(body, cx)?;
                let ty = b.ty.clone();
                (mk(ExprKind::Let(p, Box::new(v), Box::new(b)), ty, span), bl)
            }
            ExprKind::Tuple(xs) => {
                let (xs, l) = self.rewrite_all(xs, cx)?;
                (mk(ExprKind::Tuple(xs), dual_ty(&e.ty, l), span), l)
            }
            ExprKind::Vector(xs) => {
                let (xs, l) = self.rewrite_all(xs, cx)?;
                (mk(ExprKind::Vector(xs), dual_ty(&e.ty, l), span), l)
            }
            ExprKind::Proj(t, i) => {
                let (t, l) = self.rewrite(t, cx)?;
                (proj(t, *i), l)
            }
            ExprKind::Inl(x) | ExprKind::Inr(x) => {
                let (x, l) = self.rewrite(x, cx)?;
                let kind = match &e.kind {
                    ExprKind::Inl(_) => ExprKind::Inl(Box::new(x)),
                    _ => ExprKind::Inr(Box::new(x)),
                };
                (mk(kind, dual_ty(&e.ty, l), span), l)
            }
            ExprKind::If(c, a, b) => {
                let (c, _) = self.rewrite(c, cx)?;
                let (a, al) = self.rewrite(a, cx)?;
                let (b, bl) = self.rewrite(b, cx)?;
                let l = al.max(bl);
                let a = self.lift(a, al, l, &e.ty)?;
                let b = self.lift(b, bl, l, &e.ty)?;
                (if_(c, a, b), l)
            }
            ExprKind::Case {
                scrutinee,
                left,
                right,
            } => {
                let (s, sl) = self.rewrite(scrutinee, cx)?;
                let lp = self.bind(&left.0, sl, cx);
                let rp = self.bind(&right.0, sl, cx);
                let (a, al) = self.rewrite(&left.1, cx)?;
                let (b, bl) = self.rewrite(&right.1, cx)?;
                let l = al.max(bl);
                let a = self.lift(a, al, l, &e.ty)?;
                let b = self.lift(b, bl, l, &e.ty)?;
                (
                    mk(
                        ExprKind::Case {
                            scrutinee: Box::new(s),
                            left: (lp, Box::new(a)),
                            right: (rp, Box::new(b)),
                        },
                        dual_ty(&e.ty, l),
                        span,
                    ),
                    l,
                )
            }
            ExprKind::Prim(p, args) => self.rewrite_prim(*p, args, e, cx)?,
            // A check of lengths or constructors (of a custom rule's
            // pullback, made by `lower_typed`): levels do not matter.
            ExprKind::TangentShape(a, b, role) => {
                let (a, _) = self.rewrite(a, cx)?;
                let (b, _) = self.rewrite(b, cx)?;
                let kind = ExprKind::TangentShape(Box::new(a), Box::new(b), *role);
                (mk(kind, Type::Unit, span), Level::PLAIN)
            }
            ExprKind::Recode { .. } | ExprKind::Select(..) | ExprKind::Tape { .. } => {
                (same(e.kind.clone()), Level::PLAIN)
            }
        })
    }

    /// The level of `g`'s result (a copy of `f`, or `f` itself).
    fn ret_level(&self, g: FunId) -> Level {
        self.rets.get(&g).copied().unwrap_or(Level::PLAIN)
    }

    /// Rewrites `xs` and lifts them all to the highest of their levels.
    fn rewrite_all(&mut self, xs: &[Expr], cx: &Ctx) -> R<(Vec<Expr>, Level)> {
        let mut out = Vec::with_capacity(xs.len());
        for x in xs {
            out.push(self.rewrite(x, cx)?);
        }
        let l = out.iter().map(|x| x.1).max().unwrap_or(Level::PLAIN);
        let lifted = out
            .into_iter()
            .zip(xs)
            .map(|((x, xl), orig)| self.lift(x, xl, l, &orig.ty))
            .collect::<R<Vec<_>>>()?;
        Ok((lifted, l))
    }

    fn rewrite_prim(&mut self, p: Prim, args: &[Expr], e: &Expr, cx: &Ctx) -> R<(Expr, Level)> {
        let span = e.span;
        match p {
            Prim::Diff | Prim::Jvp => return self.jvp(p, args, e, cx),
            Prim::CustomJvp => return self.custom_jvp(args, e, cx),
            Prim::Grad | Prim::ValueAndGrad | Prim::Vjp => return self.reverse(p, args, e, cx),
            _ if p.is_derivative() => {
                return Err(unsupported(
                    &format!("the differentiation operator `{}`", p.info().name),
                    span,
                ));
            }
            Prim::Map => {
                let ExprKind::Closure(f) = args[0].kind else {
                    return Err(unsupported("`map` of an unknown function", span));
                };
                let (v, vl) = self.rewrite(&args[1], cx)?;
                let caps = self.captures_of(f, cx);
                let g = self.specialise(f, vec![vl], caps, cx.depth)?;
                let rl = self.ret_level(g);
                let c = self.closure(g, span);
                return Ok((prim(Prim::Map, vec![c, v], dual_ty(&e.ty, rl), span), rl));
            }
            Prim::Build => {
                let ExprKind::Closure(f) = args[1].kind else {
                    return Err(unsupported("`build` of an unknown function", span));
                };
                let (n, _) = self.rewrite(&args[0], cx)?;
                let caps = self.captures_of(f, cx);
                let g = self.specialise(f, vec![Level::PLAIN], caps, cx.depth)?;
                let rl = self.ret_level(g);
                let c = self.closure(g, span);
                return Ok((prim(Prim::Build, vec![n, c], dual_ty(&e.ty, rl), span), rl));
            }
            Prim::Fold => {
                let ExprKind::Closure(f) = args[0].kind else {
                    return Err(unsupported("`fold` of an unknown function", span));
                };
                let (init, il) = self.rewrite(&args[1], cx)?;
                let (v, vl) = self.rewrite(&args[2], cx)?;
                let caps = self.captures_of(f, cx);
                let acc = caps.iter().map(|c| c.1).fold(il.max(vl), Level::max);
                let g = self.specialise(f, vec![acc, vl], caps, cx.depth)?;
                let init = self.lift(init, il, acc, &args[1].ty)?;
                let c = self.closure(g, span);
                return Ok((
                    prim(Prim::Fold, vec![c, init, v], dual_ty(&e.ty, acc), span),
                    acc,
                ));
            }
            _ => {}
        }
        let mut new = Vec::with_capacity(args.len());
        for a in args {
            new.push(self.rewrite(a, cx)?);
        }
        let top = new.iter().map(|a| a.1).max().unwrap_or(Level::PLAIN);
        let on_reals = args.first().is_some_and(|a| a.ty == Type::Real);
        if top == Level::PLAIN || !args.iter().any(|a| has_real(&a.ty)) {
            let args = new.into_iter().map(|a| a.0).collect();
            return Ok((prim(p, args, e.ty.clone(), span), Level::PLAIN));
        }
        match p {
            // Comparisons and conversions see the plain primal.
            Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne if on_reals => {
                let args = new.into_iter().map(|(a, l)| Self::primal(a, l)).collect();
                Ok((prim(p, args, Type::Bool, span), Level::PLAIN))
            }
            Prim::ToInt | Prim::StopGradient => {
                let (a, l) = new.remove(0);
                let x = Self::primal(a, l);
                Ok((prim(p, vec![x], e.ty.clone(), span), Level::PLAIN))
            }
            Prim::Sum if args[0].ty == Type::Vec(Box::new(Type::Real)) => {
                // The interpreter's sum (`prim::sum_in_lanes`): 0 for
                // an empty vector, else the dual additions in four lanes,
                // each from its first element (`-0.0 + x` would record a
                // Delta), then the lanes in order.
                let (v, l) = new.remove(0);
                let real = dual_ty(&Type::Real, l);
                let state = lane_state(&real);
                let step = self.helper(Helper::AddLane(l), span)?;
                let add = self.helper(Helper::AddReals(l), span)?;
                // `sum (map g src)` and `sum (build n g)`: each element
                // added as `g` makes it (one pass, no intermediate vector;
                // `g` fails where `map` or `build` would), at every level:
                // the interpreter sums them so too (`Machine::sum_as_made`),
                // so where a level records, each element's Deltas come
                // just before its addition's, as there — the order in
                // which the sweep adds into an adjoint that both reach (a
                // `g` returning a variable for some elements).
                //
                // Up to four elements each lane holds one, and the sum is
                // the elements added left to right: two or three (the
                // vectors of the nested benchmarks and of BA) are added
                // straight, without the lanes' loop, whose state of four
                // reals of the level a call in its body must spill — all
                // elements made first, in order, then added (the lanes add
                // nothing before a fifth element).
                // The source is the vector summed or mapped, or a built
                // sum's size.
                let (source, made) = match v.kind {
                    ExprKind::Prim(q @ (Prim::Map | Prim::Build), margs) if margs.len() == 2 => {
                        let [a, b] = <[Expr; 2]>::try_from(margs)
                            .unwrap_or_else(|_| [placeholder(), placeholder()]);
                        match (q, a, b) {
                            (Prim::Map, g, src) if let ExprKind::Closure(g) = g.kind => {
                                (src, Made::Mapped(g))
                            }
                            (Prim::Build, n, g) if let ExprKind::Closure(g) = g.kind => {
                                (n, Made::Built(g, v.span))
                            }
                            (q, a, b) => (prim(q, vec![a, b], v.ty, v.span), Made::Vector),
                        }
                    }
                    kind => (mk(kind, v.ty, v.span), Made::Vector),
                };
                // `sum (build n (fun i -> u[i] * v[i]))` on the outermost
                // reverse level: first tried as one Delta over the products'
                // terms ([`Expander::dot_operands`]); the size is bound once.
                let dot = match made {
                    Made::Built(..) => self.dot_operands(&args[0], l, cx)?,
                    _ => None,
                };
                let (source, size_bound) = match dot {
                    Some(_) if !matches!(source.kind, ExprKind::Local(_) | ExprKind::Lit(_)) => {
                        let t = self.local("n", Type::Int);
                        (self.local_expr(t, span), Some((t, source)))
                    }
                    _ => (source, None),
                };
                let c = match made {
                    Made::Mapped(g) | Made::Built(g, _) => {
                        let h = self.add_mapped(step, g, &state, span);
                        self.closure(h, span)
                    }
                    Made::Vector => self.closure(step, span),
                };
                let indices = match made {
                    Made::Built(..) => Some(self.helper(Helper::Index, span)?),
                    _ => None,
                };
                let out = self.with_temp(source.clone(), |s, source| {
                    let size = match made {
                        Made::Built(..) => source.clone(),
                        _ => prim(Prim::Size, vec![source.clone()], Type::Int, span),
                    };
                    let element_ty = match &source.ty {
                        Type::Vec(t) => (**t).clone(),
                        _ => Type::Int,
                    };
                    let element = |j: i64| {
                        let j = int_lit(j, span);
                        match made {
                            Made::Built(g, _) => mk(ExprKind::Call(g, vec![j]), real.clone(), span),
                            Made::Mapped(g) => {
                                let x = index(&source, &j, element_ty.clone());
                                mk(ExprKind::Call(g, vec![x]), real.clone(), span)
                            }
                            Made::Vector => index(&source, &j, real.clone()),
                        }
                    };
                    let mut straight = |count: i64| {
                        let xs: Vec<Local> =
                            (0..count).map(|_| s.local("x", real.clone())).collect();
                        let x = |k: usize| mk(ExprKind::Local(xs[k]), real.clone(), span);
                        let total = (1..xs.len()).fold(x(0), |acc, k| {
                            mk(ExprKind::Call(add, vec![acc, x(k)]), real.clone(), span)
                        });
                        (0..xs.len())
                            .rev()
                            .fold(total, |body, k| bind(xs[k], element(k as i64), body))
                    };
                    let (two, three) = (straight(2), straight(3));
                    let z = zero_at(l, span);
                    let start = mk(
                        ExprKind::Tuple(vec![int_lit(0, span), z.clone(), z.clone(), z.clone(), z]),
                        state.clone(),
                        span,
                    );
                    // A built sum folds over its indices, `build n (fun i ->
                    // i)` with the `build`'s checks and span, which native
                    // code counts without making the vector.
                    let over = match (made, indices) {
                        (Made::Built(_, at), Some(id)) => {
                            let ints = Type::Vec(Box::new(Type::Int));
                            let id = s.closure(id, at);
                            prim(Prim::Build, vec![source.clone(), id], ints, at)
                        }
                        _ => source.clone(),
                    };
                    let lanes = prim(Prim::Fold, vec![c, start, over], state.clone(), span);
                    let t = s.local("lanes", state);
                    let te = s.local_expr(t, span);
                    let n = s.local("n", Type::Int);
                    let ne = s.local_expr(n, span);
                    let total = s.lanes_total(&te, &ne, add, l, span);
                    let in_lanes = mk(
                        ExprKind::Let(Pat::Local(t), Box::new(lanes), Box::new(total)),
                        real.clone(),
                        span,
                    );
                    let size_is = |k: i64| {
                        prim(
                            Prim::Eq,
                            vec![ne.clone(), int_lit(k, span)],
                            Type::Bool,
                            span,
                        )
                    };
                    let sum = if_(size_is(2), two, if_(size_is(3), three, in_lanes));
                    Ok(bind(n, size, sum))
                })?;
                let out = match dot {
                    Some((u, v)) => self.dot_or(u, v, &source, out, span),
                    None => out,
                };
                let out = match size_bound {
                    Some((t, size)) => bind(t, size, out),
                    None => out,
                };
                Ok((out, l))
            }
            Prim::Index => {
                let ty = dual_ty(&e.ty, new[0].1);
                let l = new[0].1;
                let args = new.into_iter().map(|a| a.0).collect();
                Ok((prim(p, args, ty, span), l))
            }
            Prim::Size => {
                let args = new.into_iter().map(|a| a.0).collect();
                Ok((prim(p, args, Type::Int, span), Level::PLAIN))
            }
            Prim::Zip => {
                let mut lifted = Vec::new();
                for ((a, al), orig) in new.into_iter().zip(args) {
                    lifted.push(self.lift(a, al, top, &orig.ty)?);
                }
                Ok((prim(p, lifted, dual_ty(&e.ty, top), span), top))
            }
            Prim::Chain if on_reals => {
                let d = new.remove(1);
                let c = new.remove(0);
                self.chain(c, d, span)
            }
            _ if on_reals => match p.info().real {
                Some(RealFn::Select(s)) => {
                    let (x, xl) = new.remove(0);
                    let (y, yl) = new.remove(0);
                    let x = self.lift(x, xl, top, &Type::Real)?;
                    let y = self.lift(y, yl, top, &Type::Real)?;
                    let out = self.with_temp(x, |me, x| {
                        me.with_temp(y, |_, y| {
                            let (px, py) =
                                (Self::primal(x.clone(), top), Self::primal(y.clone(), top));
                            // `Selection::takes_second`: never on a tie or NaN.
                            let test = match s {
                                Selection::Min => prim(Prim::Lt, vec![py, px], Type::Bool, span),
                                Selection::Max => prim(Prim::Gt, vec![py, px], Type::Bool, span),
                            };
                            Ok(if_(test, y, x))
                        })
                    })?;
                    Ok((out, top))
                }
                Some(f) => self.op(f, new, span),
                None => Err(unsupported(
                    &format!("`{}` inside `diff`/`jvp`", p.info().name),
                    span,
                )),
            },
            _ => Err(unsupported(
                &format!("`{}` inside `diff`/`jvp`", p.info().name),
                span,
            )),
        }
    }

    /// `grad f x`, `value_and_grad f x`, `vjp`'s output and a pullback
    /// applied to a cotangent (`Prim::Vjp` with operands `[f, x]` and `[f,
    /// x, ct, k]`, which `lower_typed` makes of `vjp f x`): `f` at a fresh
    /// reverse level over the point seeded as its inputs, the result's
    /// Deltas seeded with the cotangent (1 for `grad`), one backward sweep,
    /// and the inputs' adjoints in the point's shape — the interpreter's
    /// `value_and_grad` and `apply_pullback`, Delta for Delta. A pullback
    /// sweeps the trace `vjp` kept if it still is (`TapeOp::Keep`, over
    /// plain reals, outputs of a [`flat`] type), and otherwise records `f`'s
    /// trace anew (living only as long as the application), with `trace`
    /// silent: `vjp` ran `f` already.
    fn reverse(&mut self, p: Prim, args: &[Expr], e: &Expr, cx: &Ctx) -> R<(Expr, Level)> {
        let span = e.span;
        let ExprKind::Closure(f) = args[0].kind else {
            return Err(unsupported(
                &format!(
                    "a function given to `{}` that is not known here",
                    p.info().name
                ),
                span,
            ));
        };
        let Type::Fun(_, y_ty) = &args[0].ty else {
            return Err(unsupported("`grad` of a non-function", span));
        };
        let y_ty = (**y_ty).clone();
        let (x, xl) = self.rewrite(&args[1], cx)?;
        // The cotangent: a pullback's, or 1 for `grad` (and unused for
        // `vjp`'s output, `Prim::Vjp` of two operands).
        let (ct, cl) = match args.get(2) {
            Some(ct) => self.rewrite(ct, cx)?,
            None => (real_lit(1.0, span), Level::PLAIN),
        };
        let ct_ty = if args.len() > 2 {
            y_ty.clone()
        } else {
            Type::Real
        };
        let caps = self.captures_of(f, cx);
        let m = caps.iter().map(|c| c.1).fold(xl.max(cl), Level::max);
        if m.n + 1 > MAX_LEVEL {
            return Err(unsupported(
                &format!("derivatives nested more than {MAX_LEVEL} deep"),
                span,
            ));
        }
        let n = m.above(Mode::Reverse);
        let x_ty = args[1].ty.clone();
        let x = self.lift(x, xl, m, &x_ty)?;
        let ct = self.lift(ct, cl, m, &ct_ty)?;
        let g = self.specialise(f, vec![n], caps, n)?;
        let gl = self.ret_level(g);
        let ret = self.prog.fun(g).ret.clone();
        // begin; let xs = seed x; let y = f xs; seed y with ct; sweep;
        // let g = adjoints of xs; end; g
        let body = self.with_temp(x, |s, x| {
            s.with_temp(ct, |s, ct| {
                let seeded = s.seed_inputs(x.clone(), &x_ty, m, TapeOp::Input, span)?;
                let xs = s.local("x", seeded.ty.clone());
                let y = s.local("y", dual_ty(&y_ty, n));
                let xe = s.local_expr(xs, span);
                let call = mk(ExprKind::Call(g, vec![xe.clone()]), ret, span);
                let call = s.lift(call, gl, n, &y_ty)?;
                let ye = s.local_expr(y, span);
                let wide = if m == Level::PLAIN { 0 } else { width(m) };
                // A pullback's replay is silent (`trace` printed when `vjp` ran).
                let begin = |replay: bool| {
                    let args = vec![int_lit(wide as i64, span), int_lit(replay.into(), span)];
                    tape(TapeOp::Begin, n.n, args, span)
                };
                // The trace of a `vjp` over plain reals is kept for its
                // pullback when the cotangent's shape is its count of reals.
                let keeps = m == Level::PLAIN && p == Prim::Vjp && flat(&y_ty);
                if p == Prim::Vjp && args.len() == 2 {
                    // `vjp`'s output: f's, at the reverse level, no sweep;
                    // and the token of its kept trace (0: none).
                    let primal = s.split(ye.clone(), &y_ty, n, Part::Primal)?;
                    let finish = if keeps {
                        let outputs = s.each_real(&ye, &y_ty, span, &mut |_, r| {
                            tape(
                                TapeOp::Output,
                                n.n,
                                vec![proj(r.clone(), 1), proj(r, 2)],
                                span,
                            )
                        })?;
                        let k = s.local("k", Type::Int);
                        let keep = tape(TapeOp::Keep, n.n, Vec::new(), span);
                        let token = s.local_expr(k, span);
                        then(outputs, bind(k, keep, pair(primal, token)))
                    } else {
                        let end = tape(TapeOp::End, n.n, Vec::new(), span);
                        then(end, pair(primal, int_lit(0, span)))
                    };
                    return Ok(then(begin(false), bind(xs, seeded, bind(y, call, finish))));
                }
                let seeds = s.seed_outputs(ye.clone(), ct.clone(), &y_ty, n, span)?;
                let sweep = s.backward(seeds, n, span)?;
                let read = s.read_back(xe, &x_ty, n, span, |g| match p {
                    Prim::ValueAndGrad => pair(proj(ye, 0), g),
                    _ => g,
                })?;
                let run = bind(y, call, then(sweep, read));
                let replay = then(begin(p == Prim::Vjp), bind(xs, seeded, run));
                let (true, Some(token)) = (keeps, args.get(3)) else {
                    return Ok(replay);
                };
                // A pullback whose trace is still kept sweeps it: the inputs
                // have their ids again, the cotangent's reals seed the
                // outputs in order.
                let (token, _) = s.rewrite(token, cx)?;
                let count = real_count(&ct, &y_ty, span);
                let resume = tape(TapeOp::Resume, n.n, vec![token, count], span);
                let resumed = prim(Prim::Eq, vec![resume, int_lit(1, span)], Type::Bool, span);
                let seeds = if y_ty == Type::Vec(Box::new(Type::Real)) {
                    tape(TapeOp::SeedOutputs, n.n, vec![ct.clone()], span)
                } else {
                    s.each_real(&ct, &y_ty, span, &mut |j, c| {
                        tape(TapeOp::SeedOutput, n.n, vec![j, c], span)
                    })?
                };
                let sweep = tape(TapeOp::Sweep, n.n, Vec::new(), span);
                let gradient = s.adjoints_again(x.clone(), &x_ty, span)?;
                let gv = s.local("g", gradient.ty.clone());
                let end = tape(TapeOp::End, n.n, Vec::new(), span);
                let read = bind(gv, gradient, then(end, s.local_expr(gv, span)));
                Ok(if_(resumed, then(seeds, then(sweep, read)), replay))
            })
        })?;
        Ok((body, m))
    }

    /// `let g = the inputs' adjoints in the point's shape in end; result g`:
    /// after the sweep of reverse level `n` over the inputs `xs` (the point
    /// seeded, original type `x_ty`).
    fn read_back(
        &mut self,
        xs: Expr,
        x_ty: &Type,
        n: Level,
        span: Span,
        result: impl FnOnce(Expr) -> Expr,
    ) -> R<Expr> {
        let gradient = self.split(xs, x_ty, n, Part::Adjoint)?;
        let gv = self.local("g", gradient.ty.clone());
        let finish = then(
            tape(TapeOp::End, n.n, Vec::new(), span),
            result(self.local_expr(gv, span)),
        );
        Ok(bind(gv, gradient, finish))
    }

    /// `()` after `f(j, r)` for each real `r` of the value `v` (a local, of
    /// a [`flat`] type `ty` at any level) with its index `j`, in order.
    fn each_real(
        &mut self,
        v: &Expr,
        ty: &Type,
        span: Span,
        f: &mut dyn FnMut(Expr, Expr) -> Expr,
    ) -> R<Expr> {
        let elem = v.ty.clone();
        Ok(match ty {
            Type::Vec(_) => {
                let Type::Vec(elem) = elem else {
                    return Err(unsupported("internal: a vector of another type", span));
                };
                let each = self.build_over("each", v, v, Type::Unit, span, &mut |_, i| {
                    let r = index(v, &i, (*elem).clone());
                    Ok(f(i, r))
                })?;
                then(each, unit(span))
            }
            Type::Tuple(ts) => {
                let mut out = unit(span);
                for j in (0..ts.len()).rev() {
                    let r = proj(v.clone(), j as u32);
                    out = then(f(int_lit(j as i64, span), r), out);
                }
                out
            }
            _ => f(int_lit(0, span), v.clone()),
        })
    }

    /// The cotangent `ct` (level `n` − 1, original type `ty`) given to the
    /// Deltas of `y` (level `n`) as the interpreter's `seeds` walks them:
    /// depth first, vector lengths and sum constructors checked (a
    /// mismatch is the pullback's error), `Int` and `Bool` leaves ignored.
    fn seed_outputs(&mut self, y: Expr, ct: Expr, ty: &Type, n: Level, span: Span) -> R<Expr> {
        let m = n.below();
        match ty {
            // `Scale c (Var id)` with cotangent ct seeds Delta id with
            // chain(c, ct) (the interpreter's `structure::seed`).
            Type::Real => self.with_temp(y, |s, y| {
                let (seed, sl) = s.chain((proj(y.clone(), 2), m), (ct, m), span)?;
                let seed = s.lift(seed, sl, m, &Type::Real)?;
                s.seed_adjoint(proj(y, 1), seed, n, span)
            }),
            Type::Tuple(ts) => self.with_temp(y, |s, y| {
                s.with_temp(ct, |s, ct| {
                    let mut out = unit(span);
                    for (i, c) in ts.iter().enumerate().rev() {
                        let (yi, ci) = (proj(y.clone(), i as u32), proj(ct.clone(), i as u32));
                        out = then(s.seed_outputs(yi, ci, c, n, span)?, out);
                    }
                    Ok(out)
                })
            }),
            Type::Vec(a) if has_real(a) || has_shape(a) => self.with_temp(y, |s, y| {
                s.with_temp(ct, |s, ct| {
                    // `build (size y) (fun i -> seed y[i] ct[i])`, in order,
                    // after the lengths are checked.
                    let each =
                        s.build_over("seed_out", &y, &ct, Type::Unit, span, &mut |s, i| {
                            let (yi, ci) =
                                (index(&y, &i, dual_ty(a, n)), index(&ct, &i, dual_ty(a, m)));
                            s.seed_outputs(yi, ci, a, n, span)
                        })?;
                    let check = shape_check(&y, &ct, Role::Cotangent, span);
                    Ok(then(check, then(each, unit(span))))
                })
            }),
            // No reals, but a length the cotangent's must match, as the
            // interpreter's `zip_shapes` checks it whatever the elements.
            Type::Vec(_) => self.with_temp(y, |s, y| {
                s.with_temp(ct, |_, ct| {
                    let check = shape_check(&y, &ct, Role::Cotangent, span);
                    Ok(then(check, unit(span)))
                })
            }),
            Type::Sum(a, b) => self.with_temp(y, |s, y| {
                s.with_temp(ct, |s, ct| {
                    let check = shape_check(&y, &ct, Role::Cotangent, span);
                    // After the check the constructors agree.
                    let mut arms = Vec::new();
                    for (left, t) in [(true, a), (false, b)] {
                        let p = s.local("_", dual_ty(t, n));
                        let d = s.local("_", dual_ty(t, m));
                        let pe = s.local_expr(p, span);
                        let de = s.local_expr(d, span);
                        let c = s.payload(ct.clone(), de, left, ty, m, span);
                        arms.push((Pat::Local(p), s.seed_outputs(pe, c, t, n, span)?));
                    }
                    let (Some(r), Some(l)) = (arms.pop(), arms.pop()) else {
                        return Err(unsupported("internal: a sum with no arms", span));
                    };
                    let case = mk(
                        ExprKind::Case {
                            scrutinee: Box::new(y),
                            left: (l.0, Box::new(l.1)),
                            right: (r.0, Box::new(r.1)),
                        },
                        Type::Unit,
                        span,
                    );
                    Ok(then(check, case))
                })
            }),
            _ if !has_real(ty) => Ok(unit(span)),
            _ => Err(unsupported(
                "a pullback of a function that returns a function",
                span,
            )),
        }
    }

    /// The cotangent `c` (level `n` − 1) added to the adjoint of the Delta
    /// `id` of reverse level `n` (nothing if `id` is −1): a seed of the
    /// runtime's plain sweep, or, on wide adjoints, the interpreter's
    /// `accumulate` (a constant-0 adjoint replaced, else added to).
    fn seed_adjoint(&mut self, id: Expr, c: Expr, n: Level, span: Span) -> R<Expr> {
        let m = n.below();
        if m == Level::PLAIN {
            return Ok(tape(TapeOp::Seed, n.n, vec![id, c], span));
        }
        let (iv, cv) = (
            self.local("id", Type::Int),
            self.local("ct", dual_ty(&Type::Real, m)),
        );
        let (ie, ce) = (self.local_expr(iv, span), self.local_expr(cv, span));
        let add = self.accumulate(&ie, &ce, n, span)?;
        let absent = prim(Prim::Lt, vec![ie, int_lit(0, span)], Type::Bool, span);
        Ok(bind(iv, id, bind(cv, c, if_(absent, unit(span), add))))
    }

    /// `()` after adding the real `term` (a local, level `n` − 1) to the
    /// wide adjoint of Delta `id` (a local) of reverse level `n`, as the
    /// interpreter's `accumulate`: an adjoint that is the constant 0 is
    /// replaced by a term that is not a constant of every level (adding it
    /// would record a Delta) unless the sum's value would differ (`+0 +
    /// −0`), and is otherwise added to.
    fn accumulate(&mut self, id: &Expr, term: &Expr, n: Level, span: Span) -> R<Expr> {
        let m = n.below();
        let real_m = dual_ty(&Type::Real, m);
        let (acc, new) = (self.local("acc", real_m.clone()), self.local("adj", real_m));
        let (acce, newe) = (self.local_expr(acc, span), self.local_expr(new, span));
        let acc_zero = self.is_zero(acce.clone(), m)?;
        let term_plain = self.is_plain(term.clone(), m)?;
        let value = |e: &Expr| {
            let mut words = Vec::new();
            components(e, m, &mut words);
            words.swap_remove(0)
        };
        let changes_sign = select(
            negative_zero(value(term), span),
            prim(
                Prim::Not,
                vec![negative_zero(value(&acce), span)],
                Type::Bool,
                span,
            ),
            bool_lit(false, span),
        );
        let keep = select(term_plain, bool_lit(true, span), changes_sign);
        let replace = select(keep, bool_lit(false, span), acc_zero);
        let (sum, sl) = self.op(
            RealFn::Binary(Binary::Add),
            vec![(acce, m), (term.clone(), m)],
            span,
        )?;
        let sum = self.lift(sum, sl, m, &Type::Real)?;
        let mut j = 0;
        let read = assemble(m, &mut |ty| {
            j += 1;
            let at = vec![id.clone(), int_lit(j - 1, span)];
            tape_word(TapeOp::AdjGet, n.n, at, ty, span)
        });
        let write = self.store_adjoint(id, &newe, n, span);
        Ok(bind(
            acc,
            read,
            bind(new, if_(replace, term.clone(), sum), write),
        ))
    }

    /// `()` after storing the real `v` (a local, level `n` − 1) as the wide
    /// adjoint of Delta `id` of reverse level `n`.
    fn store_adjoint(&mut self, id: &Expr, v: &Expr, n: Level, span: Span) -> Expr {
        let mut words = Vec::new();
        components(v, n.below(), &mut words);
        let mut out = unit(span);
        for (j, c) in words.into_iter().enumerate().rev() {
            let at = vec![id.clone(), int_lit(j as i64, span), c];
            out = then(tape(TapeOp::AdjSet, n.n, at, span), out);
        }
        out
    }

    /// The backward sweep of reverse level `n` after `seeds` (the output
    /// cotangents, [`Expander::seed_outputs`]): the runtime's sweep over
    /// plain reals, else wide adjoints set to zero, seeded, and swept by the
    /// generated [`Helper::Sweep`].
    fn backward(&mut self, seeds: Expr, n: Level, span: Span) -> R<Expr> {
        let m = n.below();
        if m == Level::PLAIN {
            return Ok(then(seeds, tape(TapeOp::Sweep, n.n, Vec::new(), span)));
        }
        let sweep = self.helper(Helper::Sweep(n), span)?;
        let mut zero = Vec::new();
        components(&zero_at(m, span), m, &mut zero);
        let init = tape(TapeOp::AdjInit, n.n, zero, span);
        let last = prim(
            Prim::Sub,
            vec![tape(TapeOp::Len, n.n, Vec::new(), span), int_lit(1, span)],
            Type::Int,
            span,
        );
        let run = mk(ExprKind::Call(sweep, vec![last]), Type::Unit, span);
        Ok(then(init, then(seeds, run)))
    }

    /// `diff f x` and `jvp f x dx`: `f` at a fresh level over the seeded point.
    fn jvp(&mut self, p: Prim, args: &[Expr], e: &Expr, cx: &Ctx) -> R<(Expr, Level)> {
        let span = e.span;
        let ExprKind::Closure(f) = args[0].kind else {
            return Err(unsupported(
                "a function given to `diff`/`jvp` that is not known here",
                span,
            ));
        };
        let (x, xl) = self.rewrite(&args[1], cx)?;
        let (dx, dl) = match args.get(2) {
            Some(dx) => self.rewrite(dx, cx)?,
            None => (real_lit(1.0, span), Level::PLAIN),
        };
        let caps = self.captures_of(f, cx);
        let m = caps.iter().map(|c| c.1).fold(xl.max(dl), Level::max);
        if m.n + 1 > MAX_LEVEL {
            return Err(unsupported(
                &format!("derivatives nested more than {MAX_LEVEL} deep"),
                span,
            ));
        }
        let n = m.above(Mode::Forward);
        let s_ty = args[1].ty.clone();
        let t_ty = match &args[0].ty {
            Type::Fun(_, t) => (**t).clone(),
            _ => return Err(unsupported("`jvp` of a non-function", span)),
        };
        let x = self.lift(x, xl, m, &s_ty)?;
        let input = self.seed(x, (dx, dl), &s_ty, m, span)?;
        let g = self.specialise(f, vec![n], caps, n)?;
        let gl = self.ret_level(g);
        let ret = self.prog.fun(g).ret.clone();
        let y = mk(ExprKind::Call(g, vec![input]), ret, span);
        let y = self.lift(y, gl, n, &t_ty)?;
        let out = self.with_temp(y, |s, y| {
            let tangent = s.split(y.clone(), &t_ty, n, Part::Tangent)?;
            if p == Prim::Diff {
                return Ok(tangent);
            }
            let primal = s.split(y, &t_ty, n, Part::Primal)?;
            Ok(pair(primal, tangent))
        })?;
        Ok((out, m))
    }
}

/// The partial derivatives of `f` at `primals` with value `value`, read off
/// the library's table (each comparison a rule makes explored both ways).
fn partials(
    f: RealFn,
    primals: &[(Expr, Level)],
    value: &(Expr, Level),
    span: Span,
) -> R<Vec<Sym>> {
    let sym = |(e, l): &(Expr, Level)| Sym::Leaf(e.clone(), *l);
    Ok(match f {
        RealFn::Unary(u) => {
            let x = sym(&primals[0]);
            let v = sym(value);
            vec![rules::explore(
                &|| u.derivative(x.clone(), v.clone()),
                &Sym::branch,
            )]
        }
        RealFn::Binary(b) => {
            let (x, y, v) = (sym(&primals[0]), sym(&primals[1]), sym(value));
            vec![
                rules::explore(
                    &|| b.partial_x(x.clone(), y.clone(), v.clone()),
                    &Sym::branch,
                ),
                rules::explore(
                    &|| b.partial_y(x.clone(), y.clone(), v.clone()),
                    &Sym::branch,
                ),
            ]
        }
        RealFn::Select(_) => {
            return Err(unsupported("`min`/`max` as an operation", span));
        }
    })
}

/// True if evaluating `e` can neither fail, nor record, nor print: locals,
/// literals, `if`s, comparisons of integers and booleans, `not`
/// ([`Expander::quiet_build`]).
fn quiet(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Local(_) | ExprKind::Lit(_) => true,
        ExprKind::If(c, a, b) => quiet(c) && quiet(a) && quiet(b),
        ExprKind::Prim(p, args) => {
            use Prim::*;
            let on_ints = args.iter().all(|a| matches!(a.ty, Type::Int | Type::Bool));
            matches!(p, Eq | Ne | Lt | Le | Gt | Ge | Not) && on_ints && args.iter().all(quiet)
        }
        _ => false,
    }
}

/// True for a type whose values' shape is their count of reals: `Real`,
/// `Vec Real`, a tuple of `Real`s (so a cotangent with as many reals as an
/// output is shaped like it).
fn flat(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Vec(a) => **a == Type::Real,
        Type::Tuple(ts) => !ts.is_empty() && ts.iter().all(|t| *t == Type::Real),
        _ => false,
    }
}

/// The number of reals of `v` (evaluated at most once), of a [`flat`] type.
fn real_count(v: &Expr, ty: &Type, span: Span) -> Expr {
    match ty {
        Type::Vec(_) => prim(Prim::Size, vec![v.clone()], Type::Int, span),
        Type::Tuple(ts) => int_lit(ts.len() as i64, span),
        _ => int_lit(1, span),
    }
}

/// True if no function is part of a value of type `t`.
fn first_order(t: &Type) -> bool {
    match t {
        Type::Fun(..) => false,
        Type::Tuple(ts) => ts.iter().all(first_order),
        Type::Vec(a) => first_order(a),
        Type::Sum(a, b) => first_order(a) && first_order(b),
        _ => true,
    }
}

fn placeholder() -> Expr {
    mk(ExprKind::Lit(Lit::Unit), Type::Unit, Span::default())
}

fn unsupported(what: &str, span: Span) -> Unsupported {
    Unsupported {
        what: what.to_string(),
        span,
    }
}

/// A real as the derivative table sees it while the pass reads a rule off
/// it: a value of the program at its level, a constant, or an operation on
/// them; comparisons are answered per path by [`rules::explore`].
#[derive(Clone, Debug)]
enum Sym {
    Leaf(Expr, Level),
    Lit(f64),
    /// A function of the table (its own derivative rule at higher levels).
    Op(RealFn, Vec<Sym>),
    Chain(Box<Sym>, Box<Sym>),
    /// `if primal(x) CMP c then a else b`, from an explored comparison.
    If(Box<(Prim, Sym, f64)>, Box<Sym>, Box<Sym>),
    /// A function of the table that the language does not have (never
    /// reached by the language's own primitives; refused if it is).
    Unknown(String),
}

impl Sym {
    fn op(f: RealFn, args: Vec<Sym>) -> Sym {
        Sym::Op(f, args)
    }

    fn branch(q: (Prim, Sym, f64), yes: Sym, no: Sym) -> Sym {
        Sym::If(Box::new(q), Box::new(yes), Box::new(no))
    }

    fn ask(&self, cmp: Prim, c: f64) -> bool {
        rules::decide((cmp, self.clone(), c))
    }
}

macro_rules! sym_ops {
    ($($tr:ident $method:ident $prim:ident),*) => {$(
        impl $tr for Sym {
            type Output = Sym;
            fn $method(self, b: Sym) -> Sym {
                Sym::op(RealFn::Binary(Binary::$prim), vec![self, b])
            }
        }
        impl $tr<f64> for Sym {
            type Output = Sym;
            fn $method(self, c: f64) -> Sym {
                Sym::op(RealFn::Binary(Binary::$prim), vec![self, Sym::Lit(c)])
            }
        }
    )*};
}
sym_ops!(Add add Add, Sub sub Sub, Mul mul Mul);

impl Div for Sym {
    type Output = Sym;
    fn div(self, b: Sym) -> Sym {
        Sym::op(RealFn::Binary(Binary::Div), vec![self, b])
    }
}

impl Neg for Sym {
    type Output = Sym;
    fn neg(self) -> Sym {
        Sym::op(RealFn::Unary(Unary::Neg), vec![self])
    }
}

rules::symbolic_comparisons!(Sym, Sym::ask);

impl Number for Sym {
    fn constant(c: f64) -> Sym {
        Sym::Lit(c)
    }

    fn apply(self, op: Unary) -> Sym {
        let f = RealFn::Unary(op);
        if op == Unary::Recip || prim_of(f).is_some() {
            Sym::op(f, vec![self])
        } else {
            Sym::Unknown(format!("{op:?}"))
        }
    }

    fn apply2(self, op: Binary, other: Sym) -> Sym {
        let f = RealFn::Binary(op);
        match prim_of(f) {
            Some(_) => Sym::op(f, vec![self, other]),
            None => Sym::Unknown(format!("{op:?}")),
        }
    }

    fn chain(self, d: Sym) -> Sym {
        Sym::Chain(Box::new(self), Box::new(d))
    }
}
