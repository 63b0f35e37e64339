//! The named core: the typed λ-calculus of Krawiec et al. Figure 1, which the
//! source-to-source AD translations (`crate::translate`) read and write and
//! the program printer (`crate::pretty::program`) prints as nabla source.
//!
//! It sits beside the interpreter's slot-resolved core ([`super::Expr`]):
//! variables are names, not frame slots, so a translation can introduce
//! binders and a printed translation reads like the figure it implements.
//! Compared with the surface AST, operators and built-ins are [`Expr::Prim`]
//! calls that know the type they are used at (`+` on `Real` or on `Int`),
//! literals carry their resolved type, `&&`/`||` are `if`s and annotations are
//! gone; tuple patterns stay, as the paper's "pattern-matching on pairs as
//! syntactic sugar for projections".
//!
//! The constructs of Figure 1 that "appear only in the output of AD" are
//! here too ([`Expr::Bind`], [`Expr::RunDelta`], the
//! polytypic [`Expr::Poly`] helpers, and the Delta and reference-cell
//! primitives of [`Prim`]); ordinary programs never contain them, and the
//! parser accepts them only in files that opt in (see `docs/transformations.md`).

use crate::prim::Prim;
use crate::types::Type;

/// A variable name.
pub type Name = String;

/// A literal with its resolved type (an integer literal used as a Real is a `Real` here).
pub use super::Lit;

/// A binding pattern: a name, `_`, or a tuple of patterns (`let (x, dx) = e in …`).
#[derive(Clone, Debug, PartialEq)]
pub enum Pat {
    /// `x`
    Var(Name),
    /// `_`
    Wild,
    /// `(p1, …, pn)`, n ≥ 2; `()` is `Tuple(vec![])`.
    Tuple(Vec<Pat>),
}

/// The binders a `let rec`'s value is under: the function's own name (`me`, the
/// pattern `Pat::Var(name)`), then its parameters. The body is under `me` alone.
pub fn rec_scope<'a>(me: &'a Pat, params: &'a [Pat]) -> Vec<&'a Pat> {
    std::iter::once(me).chain(params).collect()
}

impl Pat {
    /// The pattern `x`.
    pub fn var(name: impl Into<Name>) -> Pat {
        Pat::Var(name.into())
    }

    /// The pattern `(a, b)` of two names.
    pub fn pair(a: impl Into<Name>, b: impl Into<Name>) -> Pat {
        Pat::Tuple(vec![Pat::var(a), Pat::var(b)])
    }
}

/// The polytypic helper functions of Krawiec et al. Figure 16 (and Figure 1's
/// table), each an infinite family indexed by a first-order type: in source
/// they are written with the type as an explicit argument, `initVars @(Vec Real)`.
///
/// `D→{A}` and `D←{A}` below are the forward and reverse type translations
/// (every `Real` leaf becomes `(Real, Real)`, respectively `(Real, Delta)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Poly {
    /// `zipDual @A : (A, A) -> D→{A}`: pair each real with its tangent (Fig. 16's zip).
    ZipDual,
    /// `tangentOf @A : D→{A} -> A`: the tangent of each dual number (Fig. 16's delta).
    TangentOf,
    /// `primalOf @A : D→{A} -> A`: the primal of each dual number (Fig. 1's primal).
    PrimalOf,
    /// `initVars @A : (A, Int) -> (D←{A}, Int)`: pair each real with `Var id`, ids
    /// counted up from the given one; returns the next free id.
    InitVars,
    /// `initZeros @A : A -> D←{A}`: pair each real with `Zero`.
    InitZeros,
    /// `lookupDual @A : (DeltaMap, D←{A}) -> A`: replace each `(x, Var id)` by the
    /// map's entry for id (0 if absent). Figure 16's `lookup`.
    LookupDual,
    /// `newCells @A : A -> Dcps{A}`: pair each real with a fresh gradient cell
    /// `ref 0.0` (Wang et al. Fig. 10's `(x, ref 0)`, for any first-order A).
    NewCells,
    /// `readCells @A : Dcps{A} -> A`: replace each `(x, r)` by the cell's content `!r`.
    ReadCells,
}

impl Poly {
    /// Every helper, for tables and tests.
    pub const ALL: [Poly; 8] = [
        Poly::ZipDual,
        Poly::TangentOf,
        Poly::PrimalOf,
        Poly::InitVars,
        Poly::InitZeros,
        Poly::LookupDual,
        Poly::NewCells,
        Poly::ReadCells,
    ];

    /// The name it is written with.
    pub fn name(self) -> &'static str {
        match self {
            Poly::ZipDual => "zipDual",
            Poly::TangentOf => "tangentOf",
            Poly::PrimalOf => "primalOf",
            Poly::InitVars => "initVars",
            Poly::InitZeros => "initZeros",
            Poly::LookupDual => "lookupDual",
            Poly::NewCells => "newCells",
            Poly::ReadCells => "readCells",
        }
    }

    /// The helper written `name`, if any.
    pub fn from_name(name: &str) -> Option<Poly> {
        Poly::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A named core expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A variable: a local, a top-level definition, or (when no binder of that
    /// name is in scope) nothing else — primitives are [`Expr::Prim`]/[`Expr::PrimRef`].
    Var(Name),
    /// A literal.
    Lit(Lit),
    /// `fun p1 … pn -> body` (n ≥ 1), curried.
    Lam(Vec<Pat>, Box<Expr>),
    /// `f a1 … an` (n ≥ 1).
    App(Box<Expr>, Vec<Expr>),
    /// `let p = value in body`.
    Let(Pat, Box<Expr>, Box<Expr>),
    /// `let rec f p1 … pn = value in body` (n ≥ 1): `f` is visible in `value`.
    LetRec {
        /// The function's name.
        name: Name,
        /// Its parameters.
        params: Vec<Pat>,
        /// Its body.
        value: Box<Expr>,
        /// The scope.
        body: Box<Expr>,
    },
    /// `(e1, …, en)`, n ≥ 2.
    Tuple(Vec<Expr>),
    /// Component `index` of a tuple with `arity` components (`fst`/`snd` when 2).
    Proj {
        /// The tuple.
        tuple: Box<Expr>,
        /// Which component (from 0).
        index: u32,
        /// How many components the tuple has.
        arity: u32,
    },
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
    /// A saturated primitive call, with the type it is used at.
    Prim(PrimAt, Vec<Expr>),
    /// A primitive as a first-class function value.
    PrimRef(PrimAt),
    /// `[e1, …, en]`
    Vector(Vec<Expr>),

    // ---- Constructs that appear only in the output of AD (Krawiec Fig. 1, shaded) ----
    // (`pure`, `deltaLet`, the Delta constructors and the reference cells are
    // primitives: see `Prim`.)
    /// `do { p <- m; rest }`: run `m`, bind its result, continue (Fig. 9).
    /// Consecutive binds print as one `do` block.
    Bind(Pat, Box<Expr>, Box<Expr>),
    /// `runDelta id m` (Fig. 11): run the computation `m` with the Delta-id
    /// supply starting at `id`; wrap its result's Delta in the `Let`s it bound.
    RunDelta(Box<Expr>, Box<Expr>),
    /// A polytypic helper at a type: `initVars @(Vec Real)`.
    Poly(Poly, Type),
}

/// A primitive together with the type it is used at, for the primitives whose
/// meaning depends on it: the operand type of `+ - * / neg < <= > >= == !=`
/// (`Real`, `Int` or `Bool`), the element type of `sum`. `None` for all others.
#[derive(Clone, Debug, PartialEq)]
pub struct PrimAt {
    /// The primitive.
    pub prim: Prim,
    /// The type it works on, where that matters.
    pub at: Option<Type>,
}

impl PrimAt {
    /// A primitive whose meaning does not depend on a type.
    pub fn plain(prim: Prim) -> PrimAt {
        PrimAt { prim, at: None }
    }

    /// An overloaded primitive used at type `at`.
    pub fn at(prim: Prim, at: Type) -> PrimAt {
        PrimAt { prim, at: Some(at) }
    }

    /// True if this is arithmetic or a comparison on reals (or `sum` of reals).
    pub fn on_reals(&self) -> bool {
        self.at == Some(Type::Real)
    }
}

impl Expr {
    /// Calls `f` on this expression and every subexpression, parents first.
    pub fn for_each(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Var(_) | Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..) => {}
            Expr::Lam(_, b) | Expr::Inl(b) | Expr::Inr(b) => b.for_each(f),
            Expr::Proj { tuple, .. } => tuple.for_each(f),
            Expr::App(g, xs) => {
                g.for_each(f);
                xs.iter().for_each(|x| x.for_each(f));
            }
            Expr::Let(_, a, b) | Expr::Bind(_, a, b) | Expr::RunDelta(a, b) => {
                a.for_each(f);
                b.for_each(f);
            }
            Expr::LetRec { value, body, .. } => {
                value.for_each(f);
                body.for_each(f);
            }
            Expr::Tuple(xs) | Expr::Vector(xs) | Expr::Prim(_, xs) => {
                xs.iter().for_each(|x| x.for_each(f))
            }
            Expr::Case {
                scrutinee,
                left,
                right,
            } => {
                scrutinee.for_each(f);
                left.1.for_each(f);
                right.1.for_each(f);
            }
            Expr::If(a, b, c) => {
                a.for_each(f);
                b.for_each(f);
                c.for_each(f);
            }
        }
    }

    /// True if the variable `name` occurs in this expression (free or not).
    pub fn mentions(&self, name: &str) -> bool {
        let mut found = false;
        self.for_each(&mut |e| {
            if let Expr::Var(n) = e {
                found |= n == name;
            }
        });
        found
    }

    /// Calls `f` on every name in this expression: variables and binders.
    pub fn for_each_name(&self, f: &mut impl FnMut(&str)) {
        self.for_each(&mut |e| match e {
            Expr::Var(x) => f(x),
            Expr::Lam(ps, _) => ps.iter().for_each(|p| p.for_each_name(f)),
            Expr::Let(p, ..) | Expr::Bind(p, ..) => p.for_each_name(f),
            Expr::LetRec { name, params, .. } => {
                f(name);
                params.iter().for_each(|p| p.for_each_name(f));
            }
            Expr::Case { left, right, .. } => {
                left.0.for_each_name(f);
                right.0.for_each_name(f);
            }
            _ => {}
        });
    }
}

impl Pat {
    /// Calls `f` on each name the pattern binds.
    pub fn for_each_name(&self, f: &mut impl FnMut(&str)) {
        match self {
            Pat::Var(x) => f(x),
            Pat::Wild => {}
            Pat::Tuple(ps) => ps.iter().for_each(|p| p.for_each_name(f)),
        }
    }
}

/// A top-level definition `def name p1 … pn = body` (n may be 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Def {
    /// Its name.
    pub name: Name,
    /// Curried parameters (empty for a value).
    pub params: Vec<Pat>,
    /// The body.
    pub body: Expr,
    /// Its type (fully resolved; type variables are generalized ones), if known.
    pub ty: Option<Type>,
}

/// A program in named core form: definitions in source order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// The definitions.
    pub defs: Vec<Def>,
}

impl Program {
    /// The definition named `name`.
    pub fn def(&self, name: &str) -> Option<&Def> {
        self.defs.iter().find(|d| d.name == name)
    }
}

// ---- Small constructors, so translations read like their figures ----

/// `x`
pub fn var(name: impl Into<Name>) -> Expr {
    Expr::Var(name.into())
}

/// A real literal.
pub fn real(x: f64) -> Expr {
    Expr::Lit(Lit::Real(x))
}

/// An integer literal.
pub fn int(n: i64) -> Expr {
    Expr::Lit(Lit::Int(n))
}

/// `f a1 … an`
pub fn app(f: Expr, args: Vec<Expr>) -> Expr {
    Expr::App(Box::new(f), args)
}

/// `fun p1 … pn -> body`
pub fn lam(params: Vec<Pat>, body: Expr) -> Expr {
    Expr::Lam(params, Box::new(body))
}

/// `let p = value in body`
pub fn let_(p: Pat, value: Expr, body: Expr) -> Expr {
    Expr::Let(p, Box::new(value), Box::new(body))
}

/// `do { p <- m; rest }`
pub fn bind(p: Pat, m: Expr, rest: Expr) -> Expr {
    Expr::Bind(p, Box::new(m), Box::new(rest))
}

/// `(a, b)`
pub fn pair(a: Expr, b: Expr) -> Expr {
    Expr::Tuple(vec![a, b])
}

/// A saturated primitive call `p args` (for primitives not overloaded on type).
pub fn prim(p: Prim, args: Vec<Expr>) -> Expr {
    Expr::Prim(PrimAt::plain(p), args)
}

/// A saturated real arithmetic or comparison call, e.g. `x * y` on reals.
pub fn real_op(p: Prim, args: Vec<Expr>) -> Expr {
    Expr::Prim(PrimAt::at(p, Type::Real), args)
}
