//! The typed IR: a monomorphic, closure-converted program with a type on
//! every node, the form the native compiler (crate `nabla-native`) reads.
//!
//! It is made from the checked AST by [`super::lower_typed`] after
//! [`crate::types::monomorphise`] has given every definition and `let`
//! function one copy per type it is used at, so every type here is closed
//! (a type variable nothing decides is `()`: no value of it is ever built).
//!
//! Compared with the named core ([`super::named`]):
//!
//! * every function — a top-level definition with parameters, a `let`
//!   function, a `let rec`, a lambda — is a [`Fun`] of [`Program::funs`],
//!   with the locals of enclosing scopes it uses listed as its
//!   [`Fun::captures`]. Local ids are unique in the whole program and a
//!   captured local keeps its id inside the function, so a function body can
//!   be compiled in place (inlined) or as a function of its own unchanged;
//! * a call of a known function with all its parameters is a direct
//!   [`ExprKind::Call`]; a function used as a value is a closure of a
//!   one-parameter [`Fun`] ([`ExprKind::Closure`]) — a function of several
//!   parameters used as a value, a partial application and a primitive used
//!   as a value become curried one-parameter wrappers around a direct call;
//! * the function argument of `build`, `map` and `fold` is always a closure
//!   of a known function taking what the primitive passes (one argument;
//!   two for `fold`), so the loop can call it directly or compile it inline;
//! * top-level definitions without parameters are [`Global`]s, evaluated at
//!   most once;
//! * primitives are saturated [`ExprKind::Prim`] calls; their operand types
//!   are the types of their arguments.

use crate::prim::Prim;
use crate::prim::Role;
/// The source positions the nodes carry (run-time errors report them).
pub use crate::syntax::span::Span;
use crate::types::Type;

pub use super::Lit;

/// A local variable: an index into [`Program::locals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Local(pub u32);

/// A function: an index into [`Program::funs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunId(pub u32);

/// A top-level value: an index into [`Program::globals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GlobalId(pub u32);

/// A local's name (for dumps and messages) and type.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalInfo {
    /// The source name (`_` for compiler temporaries).
    pub name: String,
    /// Its type.
    pub ty: Type,
}

/// A binding pattern over locals.
#[derive(Clone, Debug, PartialEq)]
pub enum Pat {
    /// Binds one local.
    Local(Local),
    /// `_`
    Wild,
    /// `(p1, …, pn)`; `()` is the empty tuple.
    Tuple(Vec<Pat>),
}

impl Pat {
    /// Calls `f` on each local the pattern binds.
    pub fn for_each_local(&self, f: &mut impl FnMut(Local)) {
        match self {
            Pat::Local(l) => f(*l),
            Pat::Wild => {}
            Pat::Tuple(ps) => ps.iter().for_each(|p| p.for_each_local(f)),
        }
    }
}

/// A function.
#[derive(Clone, Debug, PartialEq)]
pub struct Fun {
    /// For dumps and symbols: the source name, or the enclosing one's with
    /// a suffix for lambdas and wrappers (`main.lam2`).
    pub name: String,
    /// Locals of the enclosing scopes that the body uses, in increasing
    /// order. They keep their ids inside the body.
    pub captures: Vec<Local>,
    /// The parameters (one or more; curried in the source type).
    pub params: Vec<(Pat, Type)>,
    /// The type of the body.
    pub ret: Type,
    /// The body.
    pub body: Expr,
    /// Where it is defined.
    pub span: Span,
}

/// A top-level definition without parameters: evaluated on first use, then
/// kept.
#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    /// Its (possibly specialised) name.
    pub name: String,
    /// Its type.
    pub ty: Type,
    /// Its definition.
    pub body: Expr,
    /// Where it is defined.
    pub span: Span,
}

/// An expression with its type and source position.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Its type.
    pub ty: Type,
    /// Where it comes from (run-time errors report it).
    pub span: Span,
}

/// The kinds of [`Expr`].
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A local variable.
    Local(Local),
    /// A top-level value.
    Global(GlobalId),
    /// A literal.
    Lit(Lit),
    /// A direct call of a known function with all its parameters (its
    /// captures are the current values of those locals).
    Call(FunId, Vec<Expr>),
    /// A function as a value: a closure of the function's captures. The
    /// function has one parameter, except as the function argument of
    /// `build`, `map` and `fold`.
    Closure(FunId),
    /// Applies a function value to one argument.
    Apply(Box<Expr>, Box<Expr>),
    /// `let p = value in body`.
    Let(Pat, Box<Expr>, Box<Expr>),
    /// `(e1, …, en)`, n ≥ 2.
    Tuple(Vec<Expr>),
    /// Component `index` of a tuple.
    Proj(Box<Expr>, u32),
    /// `inl e`
    Inl(Box<Expr>),
    /// `inr e`
    Inr(Box<Expr>),
    /// `match e with | inl p1 -> e1 | inr p2 -> e2`
    Case {
        /// The scrutinee.
        scrutinee: Box<Expr>,
        /// The `inl` arm.
        left: (Pat, Box<Expr>),
        /// The `inr` arm.
        right: (Pat, Box<Expr>),
    },
    /// `if c then a else b`
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `if c then a else b` with both `a` and `b` evaluated, for a choice
    /// without a branch: `a` and `b` must be cheap, unable to fail, and of a
    /// type without heap parts (reals, Ints, Bools and tuples of them). Made
    /// by compiled differentiation for its structural-zero tests.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A saturated primitive call. One primitive means something else than
    /// in the language: `Prim::Vjp` with `[f, x]` is the output of `f` at
    /// `x` computed at a reverse level (as the interpreter's `vjp` computes
    /// it) and the token of the trace kept for its pullback (0: none), with
    /// `[f, x, ct, k]` the pullback of `f` at `x` applied to `ct`; `vjp f x`
    /// is lowered to `let (y, k) = vjp f x in (y, fun ct -> vjp f x ct k)`.
    Prim(Prim, Vec<Expr>),
    /// `[e1, …, en]`
    Vector(Vec<Expr>),
    /// `trace "label" e`: the value of `e`, printed with its label on the
    /// way (`crate::eval::tracing`). Compiled differentiation keeps it at
    /// level 0: a perturbed operand is traced by its primal.
    Trace(String, Box<Expr>),
    /// `()` if the tangent or cotangent (second) is shaped like the point
    /// or output (first) at the top — two vectors of the same length, or two
    /// sums with the same constructor — else the interpreter's run-time
    /// error for a `jvp` tangent or a pullback's cotangent that is not (made
    /// by compiled differentiation, `crate::translate::dual`). A cotangent's
    /// error is reported at the application of the pullback, the innermost
    /// closure application around it, as the interpreter reports it.
    TangentShape(Box<Expr>, Box<Expr>, Role),
    /// The closure `closure` with its code swapped: if its code is that of
    /// function `from` (of one of the pairs), the closure of `to` over the
    /// same captured values (`to` has `from`'s captures). Compiled
    /// differentiation makes it to apply a function value from outside a
    /// `diff`/`jvp` to a value perturbed inside: `to` is `from`'s copy at the
    /// deeper level. The pairs cover every closure of that type.
    Recode {
        /// The closure.
        closure: Box<Expr>,
        /// (code it may have, code to give it instead).
        cases: Vec<(FunId, FunId)>,
        /// The recoding is applied to an argument in another representation
        /// than the closures' parameter (the native back end's small vectors
        /// kept as tuples): each `to` is then a *direct copy* of `from`'s
        /// function taking that representation, called, never made a
        /// closure. Only ever the function of an `Apply`.
        direct: bool,
    },
    /// An operation on the Delta trace of reverse level `slot` (made by
    /// compiled differentiation; see [`TapeOp`] for the operands and the
    /// result). The traces of one slot form a stack: a `grad` run while
    /// another at the same level is active (which cannot see the outer
    /// one's reals) pushes its own.
    Tape {
        /// What is done.
        op: TapeOp,
        /// The reverse level's position (1 = outermost).
        slot: u8,
        /// The operands.
        args: Vec<Expr>,
    },
}

/// The operations of a reverse level's Delta trace (Krawiec et al. §5.3.3:
/// the flattened trace of `Let`-bound Deltas, evaluated by one backward
/// sweep). A Delta id is an `Int`; −1 stands for "no Delta" (a real that is
/// a constant of the level).
///
/// A reverse level over plain reals has `f64` weights and the runtime
/// sweeps it ([`TapeOp::Sweep`]). A reverse level above other levels has
/// weights that are reals of those levels, *wide* weights of `width`
/// components (the reals and Delta ids of the level's representation,
/// flattened); its sweep is generated code, which does the enclosing
/// levels' arithmetic, and reads and writes the trace with the `Parent`,
/// `Weight` and `Adj*` operations (a component is `Real` or `Int` as its
/// operand or result type says).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TapeOp {
    /// `()`: starts a fresh trace for the slot, of weights of `[width,
    /// replay]` components (0 for plain `f64` weights); `replay` is 1 for a
    /// pullback's replay of its function, during which `trace` is silent
    /// (it printed when `vjp` ran the function).
    Begin,
    /// `Int`: a new input Delta (inputs come first, ids 0, 1, …). Above
    /// other levels its operands are the two zero weights' components
    /// (as `PushWide`'s, which give the record's size).
    Input,
    /// `Int`: on a resumed trace (`Resume`), the id of its next input
    /// again, in order.
    InputAgain,
    /// `Vec` of reals of the outermost (plain) reverse level: `Input` for
    /// each real of the vector of reals `[v]`, in order, coefficient 1 —
    /// one operation for a vector, where a `map` of `Input` costs a loop
    /// of generated code that checks the buffer's room for every element.
    Inputs,
    /// `Int`: the Delta `w₀ · Var p₀ + w₁ · Var p₁` of operands `[p₀, w₀,
    /// p₁, w₁]` (ids `Int`, weights `Real`); a term whose id is −1 is left
    /// out, and with both left out the result is −1.
    Push,
    /// `Int`: as `Push` with wide weights, operands `[p₀, p₁, w₀…, w₁…]`.
    PushWide,
    /// `(Int, Real)`: the Delta `Scale c (Var id)`, as `(id, c)`, of an
    /// operation on two reals of the (outermost, plain) reverse level with
    /// Delta ids `p₀`, `p₁`, operands `[p₀, w₀, a₀, p₁, w₁, a₁]`: each
    /// operand's weight (its partial times its coefficient) and the
    /// coefficient it gives the result alone. Two different variables record
    /// `w₀ · Var p₀ + w₁ · Var p₁` (coefficient 1); one variable twice is
    /// `(p₀, w₀ + w₁)`; with `p₁` −1 (a constant) it is `(p₀, a₀)`, else
    /// with `p₀` −1 `(p₁, a₁)`.
    Combine,
    /// `()`: cotangent `[id, seed]` (a `Real`) for the next plain sweep
    /// (nothing if the id is −1).
    Seed,
    /// `()`: the plain backward sweep from the seeded Deltas, keeping the
    /// adjoints of the inputs.
    Sweep,
    /// `Real`: the adjoint of input `[id]` after the last sweep.
    Adjoint,
    /// `Vec Real`: `Adjoint` of each real of `[v]`, a vector of reals of
    /// the outermost (plain) reverse level, in order.
    Adjoints,
    /// `Vec Real`: on a resumed trace, `Adjoint` of `InputAgain` once for
    /// each element of the vector `[v]` (whose elements are not read).
    AdjointsAgain,
    /// `Int`: the number of Deltas on the trace.
    Len,
    /// `Int`: parent `[id, k]` (k = 0, 1) of a Delta, −1 if it has none.
    Parent,
    /// Component `[id, j]` of a Delta's weights (j < 2 · width: weight 0's
    /// components, then weight 1's).
    Weight,
    /// `()`: every Delta's adjoint set to the components `[z…]` (the zero
    /// of the enclosing levels).
    AdjInit,
    /// Component `[id, j]` of a Delta's adjoint.
    AdjGet,
    /// `()`: component `[id, j, value]` of a Delta's adjoint set.
    AdjSet,
    /// `()`: ends the slot's current trace; after `Resume`, ends the
    /// pullback's use of the kept trace instead, which stays kept.
    End,
    /// `()`: output `[id, coefficient]` (a Delta `Scale coefficient (Var
    /// id)`, id −1 for a constant output) of the current plain trace, in the
    /// order of the output's reals, for `Keep`.
    Output,
    /// `Int`: ends the slot's current plain trace like `End`, but keeps it
    /// (with its `Output`s) for the pullback of the `vjp` that made it: the
    /// result is a token naming it. One trace is kept at a time; keeping
    /// another forgets it.
    Keep,
    /// `Int` (1 or 0): if the trace kept under token `[token, n]` is still
    /// kept and has `n` outputs, the slot's `SeedOutput`, `Sweep`, `Adjoint`
    /// and `End` that follow are that trace's, not the current trace's
    /// (else nothing changes, and it gives 0). `InputAgain` then gives the
    /// inputs' ids again, in order.
    Resume,
    /// `()`: cotangent `[j, seed]` for the resumed trace's `j`-th output
    /// (its Delta seeded with chain(coefficient, seed)).
    SeedOutput,
    /// `()`: `SeedOutput` of each real of the vector of reals `[v]`, the
    /// `j`-th for output `j`.
    SeedOutputs,
    /// `(Real, Int)`: `sum (build n (fun i -> u[i] * v[i]))` on the
    /// outermost (plain) reverse level, operands `[u, v, n]` (vectors of
    /// reals of the level, `n` an `Int`), recorded as one Delta over the
    /// products' terms when every product is of two different variables and
    /// `n ≤ size u, size v` (`nabla_lang::ad::trace::SUM_OF_PRECEDING`): the
    /// sum's primal and its Delta's id. The id is −1, and nothing recorded,
    /// where that does not hold: the caller then records the sum real by
    /// real.
    DotTerms,
}

/// A program in typed form: what is reachable from its entry.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    /// Every local, by [`Local`].
    pub locals: Vec<LocalInfo>,
    /// Every function, by [`FunId`].
    pub funs: Vec<Fun>,
    /// Every top-level value, by [`GlobalId`].
    pub globals: Vec<Global>,
}

impl Program {
    /// The type of a local.
    pub fn local_ty(&self, l: Local) -> &Type {
        &self.locals[l.0 as usize].ty
    }

    /// A function.
    pub fn fun(&self, f: FunId) -> &Fun {
        &self.funs[f.0 as usize]
    }

    /// A top-level value.
    pub fn global(&self, g: GlobalId) -> &Global {
        &self.globals[g.0 as usize]
    }

    /// The top-level value named `name`, if it was lowered.
    pub fn global_named(&self, name: &str) -> Option<GlobalId> {
        self.globals
            .iter()
            .position(|g| g.name == name)
            .map(|i| GlobalId(i as u32))
    }
}

impl Expr {
    /// Calls `f` on each direct subexpression (the bodies of functions
    /// excluded: they are in [`Program::funs`]).
    pub fn for_each_child<'a>(&'a self, mut f: impl FnMut(&'a Expr)) {
        match &self.kind {
            ExprKind::Local(_) | ExprKind::Global(_) | ExprKind::Lit(_) | ExprKind::Closure(_) => {}
            ExprKind::Call(_, xs)
            | ExprKind::Tuple(xs)
            | ExprKind::Prim(_, xs)
            | ExprKind::Tape { args: xs, .. }
            | ExprKind::Vector(xs) => xs.iter().for_each(f),
            ExprKind::Apply(a, b) | ExprKind::Let(_, a, b) | ExprKind::TangentShape(a, b, _) => {
                f(a);
                f(b);
            }
            ExprKind::Proj(a, _)
            | ExprKind::Inl(a)
            | ExprKind::Inr(a)
            | ExprKind::Trace(_, a)
            | ExprKind::Recode { closure: a, .. } => f(a),
            ExprKind::Case {
                scrutinee,
                left,
                right,
            } => {
                f(scrutinee);
                f(&left.1);
                f(&right.1);
            }
            ExprKind::If(a, b, c) | ExprKind::Select(a, b, c) => {
                f(a);
                f(b);
                f(c);
            }
        }
    }

    /// [`Expr::for_each_child`], giving each subexpression mutably.
    pub fn for_each_child_mut<'a>(&'a mut self, mut f: impl FnMut(&'a mut Expr)) {
        match &mut self.kind {
            ExprKind::Local(_) | ExprKind::Global(_) | ExprKind::Lit(_) | ExprKind::Closure(_) => {}
            ExprKind::Call(_, xs)
            | ExprKind::Tuple(xs)
            | ExprKind::Prim(_, xs)
            | ExprKind::Tape { args: xs, .. }
            | ExprKind::Vector(xs) => xs.iter_mut().for_each(f),
            ExprKind::Apply(a, b) | ExprKind::Let(_, a, b) | ExprKind::TangentShape(a, b, _) => {
                f(a);
                f(b);
            }
            ExprKind::Proj(a, _)
            | ExprKind::Inl(a)
            | ExprKind::Inr(a)
            | ExprKind::Trace(_, a)
            | ExprKind::Recode { closure: a, .. } => f(a),
            ExprKind::Case {
                scrutinee,
                left,
                right,
            } => {
                f(scrutinee);
                f(&mut left.1);
                f(&mut right.1);
            }
            ExprKind::If(a, b, c) | ExprKind::Select(a, b, c) => {
                f(a);
                f(b);
                f(c);
            }
        }
    }
}

/// `if c then a else b` (of `a`'s type).
pub fn if_(c: Expr, a: Expr, b: Expr) -> Expr {
    let (ty, span) = (a.ty.clone(), a.span);
    Expr {
        kind: ExprKind::If(Box::new(c), Box::new(a), Box::new(b)),
        ty,
        span,
    }
}

/// The `Int` literal `n`.
pub fn int_lit(n: i64, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Lit(Lit::Int(n)),
        ty: Type::Int,
        span,
    }
}
