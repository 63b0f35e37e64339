//! The surface syntax tree. Every node carries a [`Span`]; every expression
//! also carries a [`NodeId`] so the type checker can record facts about it
//! (e.g. whether an integer literal was used as a Real).

use super::span::Span;
use crate::core::named::Poly;
use crate::types::Con;

/// Dense index of an expression node, unique within one parse session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// A name with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The text.
    pub name: String,
    /// Where.
    pub span: Span,
}

/// A written type (annotations).
#[derive(Clone, Debug, PartialEq)]
pub enum TypeExpr {
    /// `Real`, `Int`, `Bool`, or a type variable (any lowercase name).
    Name(Ident),
    /// `()`
    Unit(Span),
    /// `(A, B, ...)`
    Tuple(Vec<TypeExpr>, Span),
    /// `A + B`
    Sum(Box<TypeExpr>, Box<TypeExpr>, Span),
    /// `Vec A`
    Vec(Box<TypeExpr>, Span),
    /// `A -> B`
    Fun(Box<TypeExpr>, Box<TypeExpr>, Span),
    /// `{ w : Vec Real, b : Real }` (fields as written; at least one)
    Record(Vec<(Ident, TypeExpr)>, Span),
    /// `Delta`, `DeltaMap`, `M A`, `Ref A` (translated dialect only; the
    /// arguments are as many as [`Con::arity`]).
    Con(Con, Vec<TypeExpr>, Span),
}

impl TypeExpr {
    /// Where the type was written.
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Name(i) => i.span,
            TypeExpr::Unit(s)
            | TypeExpr::Tuple(_, s)
            | TypeExpr::Sum(_, _, s)
            | TypeExpr::Vec(_, s)
            | TypeExpr::Fun(_, _, s)
            | TypeExpr::Record(_, s)
            | TypeExpr::Con(_, _, s) => *s,
        }
    }
}

/// A binding pattern (in `let`, `fun`, `def` parameters and `match` arms).
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// `x`
    Var(Ident),
    /// `_`
    Wild(Span),
    /// `()`
    Unit(Span),
    /// `(p1, p2, ...)` with at least two components.
    Tuple(Vec<Pattern>, Span),
    /// `(p : T)`
    Annot(Box<Pattern>, TypeExpr, Span),
    /// `{ w = p, b }` (`b` short for `b = b`); `open` if it ends with `..`
    /// (the other fields ignored). `id` names it in the checker's facts.
    Record {
        /// The fields named, as written.
        fields: Vec<(Ident, Pattern)>,
        /// Ends with `..`?
        open: bool,
        /// Where.
        span: Span,
        /// Identity for side tables.
        id: NodeId,
    },
}

impl Pattern {
    /// Calls `f` on the id of every record pattern in this one.
    pub fn for_each_record_id(&self, f: &mut dyn FnMut(NodeId)) {
        match self {
            Pattern::Var(_) | Pattern::Wild(_) | Pattern::Unit(_) => {}
            Pattern::Tuple(ps, _) => ps.iter().for_each(|p| p.for_each_record_id(f)),
            Pattern::Annot(p, _, _) => p.for_each_record_id(f),
            Pattern::Record { fields, id, .. } => {
                f(*id);
                fields.iter().for_each(|(_, p)| p.for_each_record_id(f));
            }
        }
    }

    /// Where the pattern was written.
    pub fn span(&self) -> Span {
        match self {
            Pattern::Var(i) => i.span,
            Pattern::Wild(s)
            | Pattern::Unit(s)
            | Pattern::Tuple(_, s)
            | Pattern::Annot(_, _, s)
            | Pattern::Record { span: s, .. } => *s,
        }
    }
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
    /// `**`
    Pow,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `&&` (short-circuit)
    And,
    /// `||` (short-circuit)
    Or,
    /// `r += e` (translated dialect: add to a `Ref Real`; lowest precedence,
    /// non-associative)
    AddTo,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Pow => "**",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::AddTo => "+=",
        }
    }
}

/// A function binding: `f p1 p2 ... (: T)? = body` (in `def` and `let`).
#[derive(Clone, Debug, PartialEq)]
pub struct FunBinding {
    /// The function's name.
    pub name: Ident,
    /// Curried parameters (may be empty for a value definition).
    pub params: Vec<Pattern>,
    /// Optional result annotation.
    pub ret: Option<TypeExpr>,
    /// The body.
    pub body: Expr,
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What kind of expression.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
    /// Identity for side tables.
    pub id: NodeId,
}

/// The kinds of expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A variable or built-in name.
    Var(String),
    /// An integer literal (may be used as a Real).
    Int(i64),
    /// A real literal.
    Real(f64),
    /// `true` / `false`
    Bool(bool),
    /// `()`
    Unit,
    /// `(a, b, ...)`, at least two components.
    Tuple(Vec<Expr>),
    /// `[a, b, ...]`
    Vector(Vec<Expr>),
    /// `fun p1 p2 -> body`
    Lam(Vec<Pattern>, Box<Expr>),
    /// `f x`
    App(Box<Expr>, Box<Expr>),
    /// `let p = e1 in e2`
    Let(Pattern, Box<Expr>, Box<Expr>),
    /// `let f x = e1 in e2` (`rec` = `let rec`)
    LetFun {
        /// `let rec`?
        rec: bool,
        /// The binding.
        binding: Box<FunBinding>,
        /// The scope of the binding.
        body: Box<Expr>,
    },
    /// `if c then a else b`
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `inl e`
    Inl(Box<Expr>),
    /// `inr e`
    Inr(Box<Expr>),
    /// `match e with | inl p1 -> e1 | inr p2 -> e2`
    Match {
        /// The scrutinee.
        scrutinee: Box<Expr>,
        /// The `inl` arm.
        left: (Pattern, Box<Expr>),
        /// The `inr` arm.
        right: (Pattern, Box<Expr>),
    },
    /// `a op b`
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `-e`
    Neg(Box<Expr>),
    /// `v[i]`
    Index(Box<Expr>, Box<Expr>),
    /// `(e : T)`
    Annot(Box<Expr>, TypeExpr),
    /// `{ w = e1, b = e2 }` (fields as written; `{ b }` is `{ b = b }`)
    Record(Vec<(Ident, Expr)>),
    /// `r.w`
    Field(Box<Expr>, Ident),
    /// `{ r with b = e }`: `r` with the fields named replaced
    Update(Box<Expr>, Vec<(Ident, Expr)>),
    /// `trace "label" e`: prints `label: VALUE` on stderr and is the value
    /// of `e` (the label with its escapes resolved).
    Trace(String, Box<Expr>),

    // ---- The translated dialect (files starting `#!translated`) ----
    /// `do { p <- e1; rest }`: run the computation `e1 : M A`, bind its
    /// result to `p : A`, continue with `rest : M B`. The parser turns a
    /// `do` block into nested `Bind`s (and `Let`s for its `let` statements).
    Bind(Pattern, Box<Expr>, Box<Expr>),
    /// `runDelta e1 e2` (Krawiec et al. Fig. 11): run `e2 : M (a, Delta)`
    /// with the Delta-id supply starting at `e1 : Int`.
    RunDelta(Box<Expr>, Box<Expr>),
    /// A polytypic helper at a closed first-order type: `initVars @(Vec Real)`.
    Poly(Poly, TypeExpr),
    /// `!e`: the contents of a reference cell.
    Deref(Box<Expr>),
}

/// The subexpressions of an expression kind, a `let` function's body
/// included: `$iter` is `iter` or `iter_mut`, `$m` nothing or `mut`.
macro_rules! children_of {
    ($k:expr, $iter:ident $(, $m:tt)?) => {
        match $k {
            ExprKind::Var(_)
            | ExprKind::Int(_)
            | ExprKind::Real(_)
            | ExprKind::Bool(_)
            | ExprKind::Unit
            | ExprKind::Poly(..) => Vec::new(),
            ExprKind::Tuple(es) | ExprKind::Vector(es) => es.$iter().collect(),
            ExprKind::Lam(_, b)
            | ExprKind::Inl(b)
            | ExprKind::Inr(b)
            | ExprKind::Neg(b)
            | ExprKind::Deref(b)
            | ExprKind::Trace(_, b)
            | ExprKind::Field(b, _)
            | ExprKind::Annot(b, _) => vec![&$($m)? **b],
            ExprKind::App(a, b)
            | ExprKind::Let(_, a, b)
            | ExprKind::Bind(_, a, b)
            | ExprKind::Binary(_, a, b)
            | ExprKind::Index(a, b)
            | ExprKind::RunDelta(a, b) => vec![&$($m)? **a, &$($m)? **b],
            ExprKind::LetFun { binding, body, .. } => vec![&$($m)? binding.body, &$($m)? **body],
            ExprKind::If(a, b, c) => vec![&$($m)? **a, &$($m)? **b, &$($m)? **c],
            ExprKind::Match {
                scrutinee,
                left,
                right,
            } => vec![&$($m)? **scrutinee, &$($m)? *left.1, &$($m)? *right.1],
            ExprKind::Record(fields) => fields.$iter().map(|(_, x)| x).collect(),
            ExprKind::Update(r, fields) => std::iter::once(&$($m)? **r)
                .chain(fields.$iter().map(|(_, x)| x))
                .collect(),
        }
    };
}

impl ExprKind {
    /// The subexpressions, in source order (a `let` function's body included).
    pub fn children(&self) -> Vec<&Expr> {
        children_of!(self, iter)
    }

    /// The subexpressions, mutably (see [`ExprKind::children`]).
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        children_of!(self, iter_mut, mut)
    }
}

/// A top-level definition `def f p1 ... (: T)? = body`.
#[derive(Clone, Debug, PartialEq)]
pub struct Def {
    /// Name, parameters, annotation and body.
    pub binding: FunBinding,
    /// The whole definition.
    pub span: Span,
    /// True if it comes from a translated file (`#!translated`): only then
    /// may it use the dialect's primitives (`pure`, `deltaLet`, …).
    pub translated: bool,
}

/// A parsed file.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    /// Top-level definitions in source order.
    pub defs: Vec<Def>,
}
