//! The monomorphised, checked AST ([`crate::types::Monomorphic`]) to the
//! typed IR ([`super::typed`]): what is reachable from one entry definition.
//!
//! * Definitions are lowered on demand from the entry, through a work list
//!   (a long chain of definitions calling each other costs no native stack).
//! * Every function becomes a [`Fun`]; its captures are computed at the end
//!   as a fixpoint (a call of a known function needs that function's
//!   captures too, and a recursive function's are known only when its body
//!   is done).
//! * Application spines are resolved here: a known function or primitive
//!   with all its arguments is a direct call; fewer arguments bind them to
//!   temporaries (evaluated now, as the interpreter does) and make a curried
//!   wrapper closure; the function argument of `build`/`map`/`fold` becomes
//!   a known function of the arity the primitive calls it with.
//!
//! What the typed IR cannot express yet is refused with [`Unsupported`] at
//! its position: the differentiation operators (compiled differentiation is
//! the next step) and the translated dialect.

use super::Lit;
use super::typed::{
    Expr, ExprKind, Fun, FunId, Global, GlobalId, Local, LocalInfo, Pat, Program, if_, int_lit,
};
use crate::prim::{self, Prim};
use crate::stack;
use crate::syntax::ast::{self, BinOp, ExprKind as A, Pattern};
use crate::syntax::span::Span;
use crate::types::infer::jacobian_type;
use crate::types::{Monomorphic, Type};
use std::collections::{BTreeSet, HashMap};

mod custom;

/// A construct the typed IR (and so the native compiler) does not handle,
/// with its position: the program runs in the interpreter instead.
#[derive(Clone, Debug, PartialEq)]
pub struct Unsupported {
    /// What it is, e.g. "the differentiation operator `grad`".
    pub what: String,
    /// Where.
    pub span: Span,
}

/// Where evaluation of the lowered program starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A definition without parameters.
    Global(GlobalId),
    /// A definition with parameters (or defined as a lambda).
    Fun(FunId),
}

type R<T> = Result<T, Unsupported>;

/// Lowers what `entry` needs of a monomorphic program.
pub fn lower_typed(mono: &Monomorphic, entry: &str) -> R<(Program, Entry)> {
    let mut l = Lowerer {
        mono,
        defs: mono
            .defs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.binding.name.name.as_str(), i))
            .collect(),
        lowered: HashMap::new(),
        work: Vec::new(),
        prog: Program::default(),
        owner: Vec::new(),
        scope: Vec::new(),
        current: None,
    };
    let Some(&index) = l.defs.get(entry) else {
        return Err(Unsupported {
            what: format!("no definition of `{entry}`"),
            span: Span::default(),
        });
    };
    let entry = match l.def_ref(index) {
        DefRef::Fun(f, _) => Entry::Fun(f),
        DefRef::Global(g) => Entry::Global(g),
    };
    while let Some(i) = l.work.pop() {
        l.lower_def(i)?;
    }
    l.compute_captures()?;
    Ok((l.prog, entry))
}

/// How a top-level definition is lowered.
#[derive(Clone, Copy, Debug)]
enum DefRef {
    /// A function of this arity.
    Fun(FunId, usize),
    /// A value.
    Global(GlobalId),
}

/// What a name in scope stands for.
#[derive(Clone, Copy, Debug)]
enum Bound {
    Local(Local),
    /// A known function of this arity.
    Fun(FunId, usize),
}

/// The head of an application spine.
#[derive(Clone, Debug)]
enum Head {
    /// A known function of this arity.
    Known(FunId, usize),
    /// A primitive.
    Prim(Prim),
    /// Any function value.
    Value(Expr),
}

/// An argument of a spine: not yet lowered (so that the function argument
/// of `build`/`map`/`fold` can be lowered as a known function) or lowered.
enum Arg<'a> {
    Ast(&'a ast::Expr),
    Lowered(Expr),
}

/// An argument fixed by a partial application: evaluated once, into a
/// local, or (a lambda or a known function given to a custom derivative
/// rule or a differentiation operator, whose evaluation has no effect)
/// lowered where the call is made, so that the function stays a known
/// function, which compiled differentiation copies at the levels it runs
/// at (a closure value would be a capture of a level).
#[derive(Clone, Copy)]
enum Fixed<'a> {
    Value(Local),
    Function(&'a ast::Expr),
}

struct Lowerer<'a> {
    mono: &'a Monomorphic,
    defs: HashMap<&'a str, usize>,
    lowered: HashMap<usize, DefRef>,
    /// Definitions whose ids are allocated but bodies not lowered yet.
    work: Vec<usize>,
    prog: Program,
    /// The function that binds each local (`None`: a global's body).
    owner: Vec<Option<FunId>>,
    /// Names in scope, innermost last.
    scope: Vec<(String, Bound)>,
    /// The function whose body is being lowered.
    current: Option<FunId>,
}

/// The type of a value nobody inspects (a variable nothing decided).
fn close(t: &Type) -> Type {
    match t {
        Type::Var(_) => Type::Unit,
        Type::Int | Type::Real | Type::Bool | Type::Unit => t.clone(),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(close).collect()),
        Type::Sum(a, b) => Type::Sum(Box::new(close(a)), Box::new(close(b))),
        Type::Vec(a) => Type::Vec(Box::new(close(a))),
        Type::Fun(a, b) => Type::fun(close(a), close(b)),
        Type::Con(c, ts) => Type::Con(*c, ts.iter().map(close).collect()),
        Type::Record(..) => close(&t.without_records()),
    }
}

/// The first `n` parameter types of a curried function type, and its result.
fn peel(t: &Type, n: usize) -> Option<(Vec<Type>, Type)> {
    let mut params = Vec::with_capacity(n);
    let mut t = t;
    for _ in 0..n {
        match t {
            Type::Fun(a, b) => {
                params.push((**a).clone());
                t = b;
            }
            _ => return None,
        }
    }
    Some((params, t.clone()))
}

fn internal(what: &str, span: Span) -> Unsupported {
    Unsupported {
        what: format!("internal: {what}"),
        span,
    }
}

fn expr(kind: ExprKind, ty: Type, span: Span) -> Expr {
    Expr { kind, ty, span }
}

/// `e` without type annotations around it.
fn strip(e: &ast::Expr) -> &ast::Expr {
    match &e.kind {
        A::Annot(x, _) => strip(x),
        _ => e,
    }
}

impl<'a> Lowerer<'a> {
    fn ty(&self, e: &ast::Expr) -> R<Type> {
        self.mono
            .node_types
            .get(&e.id)
            .map(close)
            .ok_or_else(|| internal("an expression without a type", e.span))
    }

    fn new_local(&mut self, name: &str, ty: Type) -> Local {
        let l = Local(self.prog.locals.len() as u32);
        self.prog.locals.push(LocalInfo {
            name: name.to_string(),
            ty,
        });
        self.owner.push(self.current);
        l
    }

    /// A new function, its body to be filled in.
    fn new_fun(&mut self, name: String, span: Span) -> FunId {
        let f = FunId(self.prog.funs.len() as u32);
        self.prog.funs.push(Fun {
            name,
            captures: Vec::new(),
            params: Vec::new(),
            ret: Type::Unit,
            body: expr(ExprKind::Lit(Lit::Unit), Type::Unit, span),
            span,
        });
        f
    }

    fn current_name(&self) -> String {
        match self.current {
            Some(f) => self.prog.fun(f).name.clone(),
            None => "global".into(),
        }
    }

    /// The parameters a definition's function takes, if it is one.
    fn def_params(d: &ast::Def) -> Option<&[Pattern]> {
        if !d.binding.params.is_empty() {
            return Some(&d.binding.params);
        }
        match &strip(&d.binding.body).kind {
            A::Lam(ps, _) => Some(ps),
            _ => None,
        }
    }

    fn def_ref(&mut self, i: usize) -> DefRef {
        if let Some(&r) = self.lowered.get(&i) {
            return r;
        }
        let d = &self.mono.defs[i];
        let r = match Self::def_params(d) {
            Some(ps) => DefRef::Fun(self.new_fun(d.binding.name.name.clone(), d.span), ps.len()),
            None => {
                let g = GlobalId(self.prog.globals.len() as u32);
                self.prog.globals.push(Global {
                    name: d.binding.name.name.clone(),
                    ty: Type::Unit,
                    body: expr(ExprKind::Lit(Lit::Unit), Type::Unit, d.span),
                    span: d.span,
                });
                DefRef::Global(g)
            }
        };
        self.lowered.insert(i, r);
        self.work.push(i);
        r
    }

    fn lower_def(&mut self, i: usize) -> R<()> {
        let d = &self.mono.defs[i];
        let ty = close(&self.mono.def_types[i]);
        self.scope.clear();
        match self.lowered[&i] {
            DefRef::Global(g) => {
                self.current = None;
                let body = self.expr(&d.binding.body)?;
                let gl = &mut self.prog.globals[g.0 as usize];
                gl.ty = ty;
                gl.body = body;
            }
            DefRef::Fun(f, _) => {
                let (params, body) =
                    match (d.binding.params.is_empty(), &strip(&d.binding.body).kind) {
                        (true, A::Lam(ps, b)) => (&ps[..], &**b),
                        _ => (&d.binding.params[..], &d.binding.body),
                    };
                self.fun_body(f, params, body, &ty)?;
            }
        }
        Ok(())
    }

    /// Lowers the parameters and body of function `f`, of type `ty`, in the
    /// current scope.
    fn fun_body(
        &mut self,
        f: FunId,
        params: &'a [Pattern],
        body: &'a ast::Expr,
        ty: &Type,
    ) -> R<()> {
        let span = body.span;
        let (param_tys, ret) =
            peel(ty, params.len()).ok_or_else(|| internal("a function without its type", span))?;
        let saved = self.current.replace(f);
        let mark = self.scope.len();
        let r = (|| {
            let mut ps = Vec::new();
            for (p, t) in params.iter().zip(param_tys) {
                ps.push((self.bind(p, &t)?, t));
            }
            let body = self.expr(body)?;
            Ok((ps, body))
        })();
        self.scope.truncate(mark);
        self.current = saved;
        let (ps, body) = r?;
        let fun = &mut self.prog.funs[f.0 as usize];
        fun.params = ps;
        fun.ret = ret;
        fun.body = body;
        Ok(())
    }

    /// Binds the names of `p` (of type `ty`) in scope.
    fn bind(&mut self, p: &Pattern, ty: &Type) -> R<Pat> {
        if stack::check().is_err() {
            return Err(internal("pattern nested too deeply", p.span()));
        }
        Ok(match p {
            Pattern::Record { span, .. } => {
                return Err(internal(super::records::NOT_ERASED, *span));
            }
            Pattern::Var(id) => {
                let l = self.new_local(&id.name, ty.clone());
                self.scope.push((id.name.clone(), Bound::Local(l)));
                Pat::Local(l)
            }
            Pattern::Wild(_) => Pat::Wild,
            Pattern::Unit(_) => Pat::Tuple(Vec::new()),
            Pattern::Annot(inner, _, _) => self.bind(inner, ty)?,
            Pattern::Tuple(ps, span) => match ty {
                Type::Tuple(ts) if ts.len() == ps.len() => Pat::Tuple(
                    ps.iter()
                        .zip(ts)
                        .map(|(p, t)| self.bind(p, t))
                        .collect::<R<_>>()?,
                ),
                _ => return Err(internal("a tuple pattern of another type", *span)),
            },
        })
    }

    /// What `name` refers to here.
    fn lookup(&mut self, name: &str) -> Option<Resolved> {
        if let Some((_, b)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return Some(match *b {
                Bound::Local(l) => Resolved::Local(l),
                Bound::Fun(f, n) => Resolved::Known(f, n),
            });
        }
        if let Some(&i) = self.defs.get(name) {
            return Some(match self.def_ref(i) {
                DefRef::Fun(f, n) => Resolved::Known(f, n),
                DefRef::Global(g) => Resolved::Global(g),
            });
        }
        prim::lookup_named_in(name, false).map(|p| Resolved::Prim(p.prim))
    }

    fn expr(&mut self, e: &'a ast::Expr) -> R<Expr> {
        if stack::check().is_err() {
            return Err(internal("program nested too deeply", e.span));
        }
        let span = e.span;
        let ty = self.ty(e)?;
        let kind = match &e.kind {
            A::Record(..) | A::Field(..) | A::Update(..) => {
                return Err(internal(super::records::NOT_ERASED, span));
            }
            A::Var(name) => return self.var(name, ty, span),
            A::Int(n) => ExprKind::Lit(if ty == Type::Real {
                Lit::Real(*n as f64)
            } else {
                Lit::Int(*n)
            }),
            A::Real(x) => ExprKind::Lit(Lit::Real(*x)),
            A::Bool(b) => ExprKind::Lit(Lit::Bool(*b)),
            A::Unit => ExprKind::Lit(Lit::Unit),
            A::Tuple(es) => ExprKind::Tuple(self.exprs(es)?),
            A::Vector(es) => ExprKind::Vector(self.exprs(es)?),
            A::Lam(ps, body) => {
                let f = self.new_fun(format!("{}.lam", self.current_name()), span);
                self.fun_body(f, ps, body, &ty)?;
                return self.fun_value(f, ps.len(), &ty, span);
            }
            A::App(..) => return self.application(e),
            A::Let(p, v, body) => {
                if let (Pattern::Var(name), A::Lam(ps, lam_body)) = (p, &strip(v).kind) {
                    let fty = self.ty(v)?;
                    return self.let_fun(&name.name, false, ps, lam_body, &fty, body);
                }
                let value = self.expr(v)?;
                let mark = self.scope.len();
                let r = (|| Ok((self.bind(p, &value.ty)?, self.expr(body)?)))();
                self.scope.truncate(mark);
                let (p, body) = r?;
                ExprKind::Let(p, Box::new(value), Box::new(body))
            }
            A::LetFun { rec, binding, body } => {
                let fty = self
                    .mono
                    .fun_types
                    .get(&e.id)
                    .map(close)
                    .ok_or_else(|| internal("a `let` function without its type", span))?;
                let name = &binding.name.name;
                return match (binding.params.is_empty(), &strip(&binding.body).kind) {
                    (false, _) => {
                        self.let_fun(name, *rec, &binding.params, &binding.body, &fty, body)
                    }
                    (true, A::Lam(ps, lam_body)) => {
                        self.let_fun(name, *rec, ps, lam_body, &fty, body)
                    }
                    (true, _) if *rec => Err(Unsupported {
                        what: "a recursive `let` that is not a function".into(),
                        span,
                    }),
                    (true, _) => {
                        let value = self.expr(&binding.body)?;
                        let mark = self.scope.len();
                        let l = self.new_local(name, value.ty.clone());
                        self.scope.push((name.clone(), Bound::Local(l)));
                        let body = self.expr(body);
                        self.scope.truncate(mark);
                        Ok(expr(
                            ExprKind::Let(Pat::Local(l), Box::new(value), Box::new(body?)),
                            ty,
                            span,
                        ))
                    }
                };
            }
            A::If(c, a, b) => ExprKind::If(
                Box::new(self.expr(c)?),
                Box::new(self.expr(a)?),
                Box::new(self.expr(b)?),
            ),
            A::Inl(x) => ExprKind::Inl(Box::new(self.expr(x)?)),
            A::Inr(x) => ExprKind::Inr(Box::new(self.expr(x)?)),
            A::Match {
                scrutinee,
                left,
                right,
            } => {
                let s = self.expr(scrutinee)?;
                let Type::Sum(lt, rt) = s.ty.clone() else {
                    return Err(internal("`match` on a non-sum", span));
                };
                let left = self.arm(&left.0, &lt, &left.1)?;
                let right = self.arm(&right.0, &rt, &right.1)?;
                ExprKind::Case {
                    scrutinee: Box::new(s),
                    left,
                    right,
                }
            }
            A::Binary(BinOp::And, a, b) => ExprKind::If(
                Box::new(self.expr(a)?),
                Box::new(self.expr(b)?),
                Box::new(expr(ExprKind::Lit(Lit::Bool(false)), Type::Bool, span)),
            ),
            A::Binary(BinOp::Or, a, b) => ExprKind::If(
                Box::new(self.expr(a)?),
                Box::new(expr(ExprKind::Lit(Lit::Bool(true)), Type::Bool, span)),
                Box::new(self.expr(b)?),
            ),
            A::Binary(BinOp::AddTo, ..) => return Err(translated(span)),
            A::Binary(op, a, b) => {
                ExprKind::Prim(Prim::of_operator(*op), vec![self.expr(a)?, self.expr(b)?])
            }
            A::Neg(a) => ExprKind::Prim(Prim::Neg, vec![self.expr(a)?]),
            A::Index(v, i) => ExprKind::Prim(Prim::Index, vec![self.expr(v)?, self.expr(i)?]),
            A::Annot(x, _) => return self.expr(x),
            A::Trace(label, x) => ExprKind::Trace(label.clone(), Box::new(self.expr(x)?)),
            A::Bind(..) | A::RunDelta(..) | A::Poly(..) | A::Deref(_) => {
                return Err(translated(span));
            }
        };
        Ok(expr(kind, ty, span))
    }

    fn exprs(&mut self, es: &'a [ast::Expr]) -> R<Vec<Expr>> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    fn arm(&mut self, p: &Pattern, ty: &Type, body: &'a ast::Expr) -> R<(Pat, Box<Expr>)> {
        let mark = self.scope.len();
        let r = (|| Ok((self.bind(p, ty)?, Box::new(self.expr(body)?))))();
        self.scope.truncate(mark);
        r
    }

    /// `let [rec] name params = value in body` with `name` a known function.
    fn let_fun(
        &mut self,
        name: &str,
        rec: bool,
        params: &'a [Pattern],
        value: &'a ast::Expr,
        fty: &Type,
        body: &'a ast::Expr,
    ) -> R<Expr> {
        let f = self.new_fun(format!("{}.{name}", self.current_name()), value.span);
        let mark = self.scope.len();
        if rec {
            self.scope
                .push((name.to_string(), Bound::Fun(f, params.len())));
        }
        let r = self.fun_body(f, params, value, fty);
        self.scope.truncate(mark);
        r?;
        self.scope
            .push((name.to_string(), Bound::Fun(f, params.len())));
        let r = self.expr(body);
        self.scope.truncate(mark);
        r
    }

    fn var(&mut self, name: &str, ty: Type, span: Span) -> R<Expr> {
        match self.lookup(name) {
            Some(Resolved::Local(l)) => Ok(expr(ExprKind::Local(l), ty, span)),
            Some(Resolved::Global(g)) => Ok(expr(ExprKind::Global(g), ty, span)),
            Some(Resolved::Known(f, n)) => self.fun_value(f, n, &ty, span),
            Some(Resolved::Prim(p)) => {
                if let Some(x) = p.constant() {
                    return Ok(expr(ExprKind::Lit(Lit::Real(x)), ty, span));
                }
                let n = p.info().arity;
                self.check_prim(p, span)?;
                self.curried(Head::Prim(p), Vec::new(), &ty, n, span)
            }
            None if prim::lookup_named_in(name, true).is_some() => Err(translated(span)),
            None => Err(internal(&format!("unknown variable `{name}`"), span)),
        }
    }

    /// Function `f` of arity `n` and type `ty` as a value.
    fn fun_value(&mut self, f: FunId, n: usize, ty: &Type, span: Span) -> R<Expr> {
        if n == 1 {
            return Ok(expr(ExprKind::Closure(f), ty.clone(), span));
        }
        // A curried function of several parameters: wrappers that collect them.
        self.curried(Head::Known(f, n), Vec::new(), ty, n, span)
    }

    /// A closure that takes the remaining `n - fixed.len()` arguments of
    /// `head` one at a time (the function's type after the fixed ones is
    /// `ty`), then calls it with `fixed` and them.
    fn curried(
        &mut self,
        head: Head,
        fixed: Vec<Fixed<'a>>,
        ty: &Type,
        n: usize,
        span: Span,
    ) -> R<Expr> {
        let Type::Fun(a, rest) = ty else {
            return Err(internal("a partial application of a non-function", span));
        };
        let w = self.new_fun(format!("{}.partial", self.current_name()), span);
        let saved = self.current.replace(w);
        let x = self.new_local("_", (**a).clone());
        let mut args = fixed;
        args.push(Fixed::Value(x));
        let body = if args.len() == n {
            let lowered = args
                .iter()
                .map(|&a| match a {
                    Fixed::Value(l) => Arg::Lowered(expr(
                        ExprKind::Local(l),
                        self.prog.local_ty(l).clone(),
                        span,
                    )),
                    Fixed::Function(e) => Arg::Ast(e),
                })
                .collect();
            self.call(head, lowered, (**rest).clone(), span)
        } else {
            self.curried(head, args, rest, n, span)
        };
        self.current = saved;
        let body = body?;
        let fun = &mut self.prog.funs[w.0 as usize];
        fun.params = vec![(Pat::Local(x), (**a).clone())];
        fun.ret = (**rest).clone();
        fun.body = body;
        Ok(expr(ExprKind::Closure(w), ty.clone(), span))
    }

    fn check_prim(&self, p: Prim, span: Span) -> R<()> {
        if p.info().translated {
            return Err(translated(span));
        }
        Ok(())
    }

    /// An application spine `f a1 … an`.
    fn application(&mut self, e: &'a ast::Expr) -> R<Expr> {
        let mut args = Vec::new();
        let mut head = e;
        while let A::App(f, x) = &head.kind {
            args.push(Arg::Ast(x));
            head = f;
            if stack::check().is_err() {
                return Err(internal("program nested too deeply", e.span));
            }
        }
        args.reverse();
        // From the head to the last argument, as the interpreter's
        // desugaring spans an application: without the parentheses around
        // it, which the expression's own span includes.
        let span = match args.last() {
            Some(Arg::Ast(x)) => head.span.to(x.span),
            _ => e.span,
        };
        let head = self.head(head)?;
        self.call(head, args, self.ty(e)?, span)
    }

    /// True for a lambda or the name of a known function: an expression
    /// whose evaluation has no effect and makes a function.
    fn is_function_literal(&mut self, e: &ast::Expr) -> bool {
        match &strip(e).kind {
            A::Lam(..) => true,
            A::Var(name) => matches!(
                self.lookup(name),
                Some(Resolved::Known(..) | Resolved::Prim(_))
            ),
            _ => false,
        }
    }

    fn head(&mut self, h: &'a ast::Expr) -> R<Head> {
        if let A::Var(name) = &strip(h).kind {
            match self.lookup(name) {
                Some(Resolved::Known(f, n)) => return Ok(Head::Known(f, n)),
                Some(Resolved::Prim(p)) => {
                    self.check_prim(p, h.span)?;
                    return Ok(Head::Prim(p));
                }
                _ => {}
            }
        }
        Ok(Head::Value(self.expr(h)?))
    }

    /// `head args` of type `ty`.
    fn call(&mut self, head: Head, mut args: Vec<Arg<'a>>, ty: Type, span: Span) -> R<Expr> {
        let arity = match &head {
            Head::Known(_, n) => *n,
            Head::Prim(p) => p.info().arity,
            Head::Value(_) => 1,
        };
        if args.len() < arity {
            // Partial application: the arguments are evaluated now.
            let mut lets = Vec::new();
            let mut fixed = Vec::new();
            let custom = matches!(head, Head::Prim(Prim::CustomJvp | Prim::CustomVjp));
            for a in args {
                if let Arg::Ast(e) = a
                    && custom
                    && self.is_function_literal(e)
                {
                    fixed.push(Fixed::Function(e));
                    continue;
                }
                let a = self.arg(a)?;
                let t = self.new_local("_", a.ty.clone());
                fixed.push(Fixed::Value(t));
                lets.push((t, a));
            }
            let n = arity;
            let value = self.curried(head, fixed, &ty, n, span)?;
            return Ok(wrap_lets(lets, value));
        }
        let rest = args.split_off(arity);
        // More arguments than the function takes: the interpreter evaluates
        // the function, then every argument, left to right, and only then
        // applies (`apply_many`), so the first call must not run before the
        // later arguments are evaluated (which error comes first). All are
        // bound in that order — except under a primitive with function
        // arguments (`fold` making a function), which lowers its own.
        // A call with exactly its arguments evaluates them in order before
        // it runs (`Call`, `Apply`, `Prim` do), and binding them would hide
        // the shapes native code fuses and hoists (`sum (build …)`, `v[i]`).
        let mut lets = Vec::new();
        let bind_all = !rest.is_empty()
            && match &head {
                Head::Prim(p) => !has_function_args(*p),
                _ => true,
            };
        let mut head = head;
        if bind_all {
            if let Head::Value(f) = head {
                head = Head::Value(self.bound_in_order(f, &mut lets));
            }
            let mut bound = Vec::with_capacity(args.len());
            for a in args {
                let e = self.arg(a)?;
                bound.push(Arg::Lowered(self.bound_in_order(e, &mut lets)));
            }
            args = bound;
        }
        // The type after `arity` arguments: `ty` with the rest's types in front.
        let mut rest_lowered = Vec::with_capacity(rest.len());
        for a in rest {
            let e = self.arg(a)?;
            rest_lowered.push(if bind_all {
                self.bound_in_order(e, &mut lets)
            } else {
                e
            });
        }
        let mut after = ty.clone();
        for a in rest_lowered.iter().rev() {
            after = Type::fun(a.ty.clone(), after);
        }
        let mut out = match head {
            Head::Known(f, _) => {
                let args = args
                    .into_iter()
                    .map(|a| self.arg(a))
                    .collect::<R<Vec<_>>>()?;
                expr(ExprKind::Call(f, args), after, span)
            }
            Head::Prim(p) => self.prim_call(p, args, after, span)?,
            Head::Value(f) => {
                let x = self.arg(args.pop().ok_or_else(|| internal("no argument", span))?)?;
                expr(ExprKind::Apply(Box::new(f), Box::new(x)), after, span)
            }
        };
        for x in rest_lowered {
            let t = match &out.ty {
                Type::Fun(_, b) => (**b).clone(),
                _ => return Err(internal("applying a non-function", span)),
            };
            out = expr(ExprKind::Apply(Box::new(out), Box::new(x)), t, span);
        }
        Ok(wrap_lets(lets, out))
    }

    fn arg(&mut self, a: Arg<'a>) -> R<Expr> {
        match a {
            Arg::Ast(e) => self.expr(e),
            Arg::Lowered(e) => Ok(e),
        }
    }

    /// A saturated primitive call of type `ty`.
    fn prim_call(&mut self, p: Prim, args: Vec<Arg<'a>>, ty: Type, span: Span) -> R<Expr> {
        let function_args = function_args(p);
        let mut lets = Vec::new();
        let mut lowered: Vec<Expr> = Vec::with_capacity(args.len());
        for (k, a) in args.into_iter().enumerate() {
            match function_args.iter().find(|(i, _)| *i == k) {
                Some(&(_, n)) => {
                    let (pre, f) = self.function_arg(a, n, span)?;
                    if !pre.is_empty() {
                        // Keep the order of evaluation: earlier arguments first
                        // (a closure stays in place, a known function, which
                        // `custom_jvp`'s compilation needs).
                        for e in lowered.iter_mut() {
                            let value = std::mem::replace(e, unit(span));
                            *e = self.bound_in_order(value, &mut lets);
                        }
                        lets.extend(pre);
                    }
                    lowered.push(f);
                }
                _ => lowered.push(self.arg(a)?),
            }
        }
        let call = match (p, lowered.len()) {
            (Prim::Fst | Prim::Snd, 1) => {
                ExprKind::Proj(Box::new(lowered.remove(0)), u32::from(p == Prim::Snd))
            }
            (Prim::CustomVjp, 2) => {
                let x = lowered.pop().unwrap_or_else(|| unit(span));
                let rule = lowered.pop().unwrap_or_else(|| unit(span));
                let x = self.temp(x, &mut lets);
                let e = self.custom_vjp(rule, x, ty, span)?;
                return Ok(wrap_lets(lets, e));
            }
            (Prim::Vjp | Prim::Jacobian | Prim::Hessian, 2) => {
                let x = lowered.pop().unwrap_or_else(|| unit(span));
                let f = lowered.pop().unwrap_or_else(|| unit(span));
                if matches!(p, Prim::Jacobian | Prim::Hessian)
                    && !(first_order(&x.ty) && first_order(&ty))
                {
                    return Err(Unsupported {
                        what: format!(
                            "`{}` of a function of a type that is not first-order",
                            p.info().name
                        ),
                        span,
                    });
                }
                let x = self.temp(x, &mut lets);
                let e = match p {
                    Prim::Vjp => self.vjp(f, x, ty, span)?,
                    Prim::Jacobian => self.jacobian(f, x, ty, span)?,
                    _ => self.hessian(f, x, ty, span)?,
                };
                return Ok(wrap_lets(lets, e));
            }
            _ => ExprKind::Prim(p, lowered),
        };
        Ok(wrap_lets(lets, expr(call, ty, span)))
    }

    /// `jacobian f x` (`f : S -> T` first-order, `x` a local or literal) as
    /// the interpreter computes it (`crate::ad::operators`, which this must
    /// follow step for step, for the same numbers and the same `trace`
    /// output): with n real leaves in `x`, none: `f x` with each real
    /// replaced by `x`; else one `jvp` along the first basis tangent gives
    /// the output `y` and its m real leaves; with m ≥ n the other columns
    /// come from n − 1 more `jvp`s, else the rows from one `vjp` and m
    /// pullbacks. The shapes are walked by [`Lowerer::walk_reals`].
    fn jacobian(&mut self, f: Expr, x: Expr, ty: Type, span: Span) -> R<Expr> {
        let s = x.ty.clone();
        let Type::Fun(_, t) = &f.ty else {
            return Err(internal("`jacobian` of a non-function", span));
        };
        let t = (**t).clone();
        let pair = Type::Tuple(vec![t.clone(), t.clone()]);
        let zero = int_lit(0, span);
        let n = self.count_reals(x.clone(), span)?;
        let n = self.let_in("n", n, span)?;
        // n = 0: each output real's gradient is `x`.
        let y0 = expr(
            ExprKind::Apply(Box::new(f.clone()), Box::new(x.clone())),
            t.clone(),
            span,
        );
        let y0 = self.let_in("y", y0, span)?;
        let x_leaf = x.clone();
        let constant = self.walk_reals(
            y0.1.clone(),
            zero.clone(),
            &mut Vec::new(),
            &s,
            span,
            &mut |_, _, _| Ok(x_leaf.clone()),
        )?;
        let constant = wrap_lets(vec![(y0.0, y0.2)], constant);
        // Otherwise the first column, the output and its m reals.
        let e0 = self.one_hot(x.clone(), zero.clone(), span)?;
        let first = expr(
            ExprKind::Prim(Prim::Jvp, vec![f.clone(), x.clone(), e0]),
            pair.clone(),
            span,
        );
        let first = self.let_in("first", first, span)?;
        let proj = |e: &Expr, i: u32, ty: &Type| {
            expr(ExprKind::Proj(Box::new(e.clone()), i), ty.clone(), span)
        };
        let y = self.let_in("y", proj(&first.1, 0, &t), span)?;
        let m = self.count_reals(y.1.clone(), span)?;
        let m = self.let_in("m", m, span)?;
        // m ≥ n: n columns by forward mode, each a tangent of the output.
        let columns = self.build(n.1.clone(), t.clone(), span, |s1, j| {
            let ej = s1.one_hot(x.clone(), j.clone(), span)?;
            let column = expr(
                ExprKind::Prim(Prim::Jvp, vec![f.clone(), x.clone(), ej]),
                pair.clone(),
                span,
            );
            let is_first = int_cmp(Prim::Eq, j, int_lit(0, span));
            Ok(if_(is_first, proj(&first.1, 1, &t), proj(&column, 1, &t)))
        })?;
        let columns = self.let_in("columns", columns, span)?;
        let by_columns = self.assemble_columns(&y.1, &x, &columns.1, span)?;
        let by_columns = wrap_lets(vec![(columns.0, columns.2)], by_columns);
        // m < n: m rows by reverse mode, each the pullback of a basis cotangent.
        let pb_ty = Type::fun(t.clone(), s.clone());
        let q = self.vjp(f, x, Type::Tuple(vec![t.clone(), pb_ty.clone()]), span)?;
        let q = self.let_in("q", q, span)?;
        let y_rev = self.let_in("y", proj(&q.1, 0, &t), span)?;
        let pb = self.let_in("pb", proj(&q.1, 1, &pb_ty), span)?;
        let (y_use, pb_use) = (y_rev.1.clone(), pb.1.clone());
        let by_rows = self.walk_reals(
            y_use.clone(),
            zero,
            &mut Vec::new(),
            &s,
            span,
            &mut |s1, r, _| {
                let er = s1.one_hot(y_use.clone(), r, span)?;
                Ok(expr(
                    ExprKind::Apply(Box::new(pb_use.clone()), Box::new(er)),
                    s.clone(),
                    span,
                ))
            },
        )?;
        let by_rows = wrap_lets(vec![(q.0, q.2), (y_rev.0, y_rev.2), (pb.0, pb.2)], by_rows);
        let tall = int_cmp(Prim::Ge, m.1.clone(), n.1.clone());
        let nonempty = wrap_lets(
            vec![(first.0, first.2), (y.0, y.2), (m.0, m.2)],
            if_(tall, by_columns, by_rows),
        );
        let is_empty = int_cmp(Prim::Eq, n.1.clone(), int_lit(0, span));
        let out = wrap_lets(vec![(n.0, n.2)], if_(is_empty, constant, nonempty));
        if out.ty != ty {
            return Err(internal("`jacobian` of another type", span));
        }
        Ok(out)
    }

    /// `hessian f x` (`f : S -> Real`, `x` a local or literal) as the
    /// interpreter computes it (`crate::ad::operators`): forward over
    /// reverse, column i the derivative of the gradient along the i-th
    /// basis tangent, `jvp (fun z -> grad f z) x eᵢ`, assembled as the
    /// Jacobian of a function from `S` to `S`.
    fn hessian(&mut self, f: Expr, x: Expr, ty: Type, span: Span) -> R<Expr> {
        let s = x.ty.clone();
        let pair = Type::Tuple(vec![s.clone(), s.clone()]);
        let n = self.count_reals(x.clone(), span)?;
        let n = self.let_in("n", n, span)?;
        let columns = self.build(n.1.clone(), s.clone(), span, |s1, i| {
            let gradient = s1.lambda("z", s.clone(), s.clone(), span, |_, z| {
                Ok(expr(
                    ExprKind::Prim(Prim::Grad, vec![f.clone(), z]),
                    s.clone(),
                    span,
                ))
            })?;
            let ei = s1.one_hot(x.clone(), i, span)?;
            let column = expr(
                ExprKind::Prim(Prim::Jvp, vec![gradient, x.clone(), ei]),
                pair.clone(),
                span,
            );
            Ok(expr(ExprKind::Proj(Box::new(column), 1), s.clone(), span))
        })?;
        let columns = self.let_in("columns", columns, span)?;
        let body = self.assemble_columns(&x, &x, &columns.1, span)?;
        let out = wrap_lets(vec![(n.0, n.2), (columns.0, columns.2)], body);
        if out.ty != ty {
            return Err(internal("`hessian` of another type", span));
        }
        Ok(out)
    }

    /// The interpreter's `from_columns`: `y` with its i-th real replaced by
    /// `x` with its j-th real replaced by the i-th real of `columns[j]`
    /// (each column shaped like `y`; all locals or literals).
    fn assemble_columns(&mut self, y: &Expr, x: &Expr, columns: &Expr, span: Span) -> R<Expr> {
        let (x, columns) = (x.clone(), columns.clone());
        let Type::Vec(column_ty) = &columns.ty else {
            return Err(internal("columns of another type", span));
        };
        let column_ty = (**column_ty).clone();
        let s = x.ty.clone();
        self.walk_reals(
            y.clone(),
            int_lit(0, span),
            &mut Vec::new(),
            &s,
            span,
            &mut |s1, _, path| {
                let path = path.to_vec();
                s1.walk_reals(
                    x.clone(),
                    int_lit(0, span),
                    &mut Vec::new(),
                    &Type::Real,
                    span,
                    &mut |s2, j, _| {
                        let column = expr(
                            ExprKind::Prim(Prim::Index, vec![columns.clone(), j]),
                            column_ty.clone(),
                            span,
                        );
                        s2.leaf_at(column, &path, span)
                    },
                )
            },
        )
    }

    /// `v`'s shape with real leaf `i` 1 and the others 0 (Int and Bool
    /// leaves carried): the interpreter's `one_hot` (`v` a local or literal).
    fn one_hot(&mut self, v: Expr, i: Expr, span: Span) -> R<Expr> {
        self.walk_reals(
            v,
            int_lit(0, span),
            &mut Vec::new(),
            &Type::Real,
            span,
            &mut |_, k, _| {
                let lit = |x| expr(ExprKind::Lit(Lit::Real(x)), Type::Real, span);
                Ok(if_(int_cmp(Prim::Eq, k, i.clone()), lit(1.0), lit(0.0)))
            },
        )
    }

    /// The interpreter's `replace_reals`, type-directed: `v` (a local or
    /// literal, of a first-order type) with each real leaf replaced by
    /// `leaf(index, path)` of type `leaf_ty`, where `index` is the leaf's
    /// position in leaf order (depth first, left to right) plus `base`, and
    /// `path` how to reach it (appended to `path`). Int, Bool and `()` leaves
    /// are carried; a sum keeps its constructor (chosen at run time), a
    /// vector its length. The offset of a tuple component is the count of
    /// the components before it; of a vector element j, j · k when the
    /// element type has k reals whatever its value, else the count of the
    /// elements before it.
    fn walk_reals(
        &mut self,
        v: Expr,
        base: Expr,
        path: &mut Vec<Step>,
        leaf_ty: &Type,
        span: Span,
        leaf: &mut LeafFn<'a, '_>,
    ) -> R<Expr> {
        stack::check().map_err(|_| internal("a type nested too deep", span))?;
        let out_ty = jacobian_type(leaf_ty, &v.ty);
        match v.ty.clone() {
            Type::Real => leaf(self, base, path),
            Type::Int | Type::Bool | Type::Unit => Ok(v),
            Type::Tuple(ts) => {
                let mut lets = Vec::new();
                let v = self.temp(v, &mut lets);
                let mut offset = base;
                let mut parts = Vec::with_capacity(ts.len());
                for (k, t) in ts.iter().enumerate() {
                    let c = expr(
                        ExprKind::Proj(Box::new(v.clone()), k as u32),
                        t.clone(),
                        span,
                    );
                    let c = self.temp_unless_scalar(c, &mut lets);
                    path.push(Step::Proj(k as u32));
                    let part =
                        self.walk_reals(c.clone(), offset.clone(), path, leaf_ty, span, leaf);
                    path.pop();
                    parts.push(part?);
                    if k + 1 < ts.len() {
                        let count = self.count_reals(c, span)?;
                        offset = add_int(offset, count);
                        offset = self.temp(offset, &mut lets);
                    }
                }
                Ok(wrap_lets(lets, expr(ExprKind::Tuple(parts), out_ty, span)))
            }
            Type::Sum(a, b) => {
                let mut arm = |s: &mut Self, ty: &Type, step: Step| -> R<(Pat, Box<Expr>)> {
                    let l = s.new_local("_", ty.clone());
                    let inner = expr(ExprKind::Local(l), ty.clone(), span);
                    let left = matches!(step, Step::Inl);
                    path.push(step);
                    let e = s.walk_reals(inner, base.clone(), path, leaf_ty, span, leaf);
                    path.pop();
                    let e = Box::new(e?);
                    let kind = if left {
                        ExprKind::Inl(e)
                    } else {
                        ExprKind::Inr(e)
                    };
                    Ok((Pat::Local(l), Box::new(expr(kind, out_ty.clone(), span))))
                };
                let left = arm(self, &a, Step::Inl)?;
                let right = arm(self, &b, Step::Inr)?;
                Ok(expr(
                    ExprKind::Case {
                        scrutinee: Box::new(v),
                        left,
                        right,
                    },
                    out_ty.clone(),
                    span,
                ))
            }
            Type::Vec(a) => {
                let mut lets = Vec::new();
                let v = self.temp(v, &mut lets);
                let size = expr(ExprKind::Prim(Prim::Size, vec![v.clone()]), Type::Int, span);
                let elem_ty = jacobian_type(leaf_ty, &a);
                let built = self.build(size, elem_ty, span, |s, j| {
                    let before = match static_reals(&a) {
                        Some(k) => mul_int(j.clone(), k),
                        None => {
                            let v = v.clone();
                            let prefix = s.build(j.clone(), (*a).clone(), span, |_, l| {
                                Ok(expr(
                                    ExprKind::Prim(Prim::Index, vec![v, l]),
                                    (*a).clone(),
                                    span,
                                ))
                            })?;
                            s.count_reals(prefix, span)?
                        }
                    };
                    let mut lets = Vec::new();
                    let offset = add_int(base, before);
                    let offset = s.temp(offset, &mut lets);
                    let e = expr(
                        ExprKind::Prim(Prim::Index, vec![v.clone(), j.clone()]),
                        (*a).clone(),
                        span,
                    );
                    let e = s.temp_unless_scalar(e, &mut lets);
                    path.push(Step::Index(j));
                    let out = s.walk_reals(e, offset, path, leaf_ty, span, leaf);
                    path.pop();
                    Ok(wrap_lets(lets, out?))
                })?;
                Ok(wrap_lets(lets, built))
            }
            _ => Err(internal(
                "a Jacobian at a type that is not first-order",
                span,
            )),
        }
    }

    /// [`Lowerer::temp`] for a part of a value the walks visit more than
    /// once (a tuple, sum or vector); a scalar part is used once at most (a
    /// real's value never: its leaf is replaced).
    fn temp_unless_scalar(&mut self, v: Expr, lets: &mut Vec<(Local, Expr)>) -> Expr {
        match v.ty {
            Type::Real | Type::Int | Type::Bool | Type::Unit => v,
            _ => self.temp(v, lets),
        }
    }

    /// The number of real leaves of `v` (an `Int`), as the interpreter's
    /// `real_leaves(v).len()`.
    fn count_reals(&mut self, v: Expr, span: Span) -> R<Expr> {
        stack::check().map_err(|_| internal("a type nested too deep", span))?;
        if let Some(k) = static_reals(&v.ty) {
            return Ok(int_lit(k, span));
        }
        match v.ty.clone() {
            Type::Tuple(ts) => {
                let mut lets = Vec::new();
                let v = self.temp(v, &mut lets);
                let mut total = int_lit(0, span);
                for (k, t) in ts.iter().enumerate() {
                    let c = expr(
                        ExprKind::Proj(Box::new(v.clone()), k as u32),
                        t.clone(),
                        span,
                    );
                    let count = self.count_reals(c, span)?;
                    total = add_int(total, count);
                }
                Ok(wrap_lets(lets, total))
            }
            Type::Sum(a, b) => {
                let arm = |s: &mut Self, ty: &Type| -> R<(Pat, Box<Expr>)> {
                    let l = s.new_local("_", ty.clone());
                    let count = s.count_reals(expr(ExprKind::Local(l), ty.clone(), span), span)?;
                    Ok((Pat::Local(l), Box::new(count)))
                };
                let left = arm(self, &a)?;
                let right = arm(self, &b)?;
                Ok(expr(
                    ExprKind::Case {
                        scrutinee: Box::new(v),
                        left,
                        right,
                    },
                    Type::Int,
                    span,
                ))
            }
            Type::Vec(a) => {
                if let Some(k) = static_reals(&a) {
                    let size = expr(ExprKind::Prim(Prim::Size, vec![v]), Type::Int, span);
                    return Ok(mul_int(size, k));
                }
                // fold (fun acc e -> acc + count e) 0 v
                let f = self.new_fun(format!("{}.count", self.current_name()), span);
                let saved = self.current.replace(f);
                let acc = self.new_local("acc", Type::Int);
                let e = self.new_local("e", (*a).clone());
                let count = self.count_reals(expr(ExprKind::Local(e), (*a).clone(), span), span);
                self.current = saved;
                let body = add_int(expr(ExprKind::Local(acc), Type::Int, span), count?);
                let fun = &mut self.prog.funs[f.0 as usize];
                fun.params = vec![(Pat::Local(acc), Type::Int), (Pat::Local(e), (*a).clone())];
                fun.ret = Type::Int;
                fun.body = body;
                let f_ty = Type::fun(Type::Int, Type::fun((*a).clone(), Type::Int));
                let closure = expr(ExprKind::Closure(f), f_ty, span);
                Ok(expr(
                    ExprKind::Prim(Prim::Fold, vec![closure, int_lit(0, span), v]),
                    Type::Int,
                    span,
                ))
            }
            _ => Err(internal(
                "a Jacobian at a type that is not first-order",
                span,
            )),
        }
    }

    /// The real at `path` in `v` (shaped like the value the path was taken
    /// in): 0 if a sum on the way has the other constructor, as the
    /// interpreter's `from_columns` takes a missing entry as 0.
    fn leaf_at(&mut self, v: Expr, path: &[Step], span: Span) -> R<Expr> {
        let Some((step, rest)) = path.split_first() else {
            return Ok(v);
        };
        match (step, v.ty.clone()) {
            (Step::Proj(k), Type::Tuple(ts)) => {
                let t = ts.get(*k as usize).cloned().unwrap_or(Type::Unit);
                let c = expr(ExprKind::Proj(Box::new(v), *k), t, span);
                self.leaf_at(c, rest, span)
            }
            (Step::Index(j), Type::Vec(a)) => {
                let e = expr(ExprKind::Prim(Prim::Index, vec![v, j.clone()]), *a, span);
                self.leaf_at(e, rest, span)
            }
            (Step::Inl | Step::Inr, Type::Sum(a, b)) => {
                let zero = expr(ExprKind::Lit(Lit::Real(0.0)), Type::Real, span);
                let ty = if matches!(step, Step::Inl) { *a } else { *b };
                let l = self.new_local("_", ty.clone());
                let found = self.leaf_at(expr(ExprKind::Local(l), ty, span), rest, span)?;
                let (hit, miss) = (
                    (Pat::Local(l), Box::new(found)),
                    (Pat::Wild, Box::new(zero)),
                );
                let (left, right) = if matches!(step, Step::Inl) {
                    (hit, miss)
                } else {
                    (miss, hit)
                };
                Ok(expr(
                    ExprKind::Case {
                        scrutinee: Box::new(v),
                        left,
                        right,
                    },
                    Type::Real,
                    span,
                ))
            }
            _ => Err(internal("a path through a value of another type", span)),
        }
    }

    /// A new local bound to `value`: (the local, its use, the value).
    fn let_in(&mut self, name: &str, value: Expr, span: Span) -> R<(Local, Expr, Expr)> {
        let t = self.new_local(name, value.ty.clone());
        let use_ = expr(ExprKind::Local(t), value.ty.clone(), span);
        Ok((t, use_, value))
    }

    /// The closure of a new function of one parameter, its body made by
    /// `body` from the parameter (its captures are found at the end).
    fn lambda(
        &mut self,
        name: &str,
        param: Type,
        ret: Type,
        span: Span,
        body: impl FnOnce(&mut Self, Expr) -> R<Expr>,
    ) -> R<Expr> {
        let f = self.new_fun(format!("{}.{name}", self.current_name()), span);
        let saved = self.current.replace(f);
        let p = self.new_local(name, param.clone());
        let made = body(self, expr(ExprKind::Local(p), param.clone(), span));
        self.current = saved;
        let fun = &mut self.prog.funs[f.0 as usize];
        fun.params = vec![(Pat::Local(p), param.clone())];
        fun.ret = ret.clone();
        fun.body = made?;
        Ok(expr(ExprKind::Closure(f), Type::fun(param, ret), span))
    }

    /// `build n (fun i -> body i)` with elements of type `elem`.
    fn build(
        &mut self,
        n: Expr,
        elem: Type,
        span: Span,
        body: impl FnOnce(&mut Self, Expr) -> R<Expr>,
    ) -> R<Expr> {
        let f = self.lambda("i", Type::Int, elem.clone(), span, body)?;
        Ok(expr(
            ExprKind::Prim(Prim::Build, vec![n, f]),
            Type::Vec(Box::new(elem)),
            span,
        ))
    }

    /// `vjp f x` as `let (y, k) = vjp f x in (y, fun ct -> vjp f x ct k)`:
    /// `Prim::Vjp` of two operands is `f`'s output at `x` computed at a
    /// reverse level and a token `k` naming the trace kept for the pullback
    /// (0 for none), of four the pullback of `f` at `x` applied to `ct`; the
    /// pullback is a closure (`x` a local or literal, `f` a closure of a
    /// known function: both can be used twice). Compiled differentiation
    /// expands that application into one backward sweep of the kept trace if
    /// it is still kept, else into a recording of `f` and one sweep.
    fn vjp(&mut self, f: Expr, x: Expr, ty: Type, span: Span) -> R<Expr> {
        let (Type::Tuple(parts), Type::Fun(_, y_ty)) = (&ty, &f.ty) else {
            return Err(internal("`vjp` of another type", span));
        };
        let y_ty = (**y_ty).clone();
        let Some(pb_ty @ Type::Fun(_, grad_ty)) = parts.get(1) else {
            return Err(internal("`vjp` of another type", span));
        };
        let grad_ty = (**grad_ty).clone();
        let pb_ty = pb_ty.clone();
        // The output as the interpreter's `vjp` computes it: at a reverse
        // level (a zero's sign can depend on whether a value is perturbed).
        let output_ty = Type::Tuple(vec![y_ty.clone(), Type::Int]);
        let output = expr(
            ExprKind::Prim(Prim::Vjp, vec![f.clone(), x.clone()]),
            output_ty,
            span,
        );
        let (y, k) = (
            self.new_local("y", y_ty.clone()),
            self.new_local("k", Type::Int),
        );
        let pb = self.new_fun(format!("{}.pullback", self.current_name()), span);
        let saved = self.current.replace(pb);
        let ct = self.new_local("ct", y_ty.clone());
        self.current = saved;
        let ct_e = expr(ExprKind::Local(ct), y_ty.clone(), span);
        let k_e = expr(ExprKind::Local(k), Type::Int, span);
        let fun = &mut self.prog.funs[pb.0 as usize];
        fun.params = vec![(Pat::Local(ct), y_ty.clone())];
        fun.ret = grad_ty.clone();
        let apply = ExprKind::Prim(Prim::Vjp, vec![f, x, ct_e, k_e]);
        fun.body = expr(apply, grad_ty, span);
        let pb = expr(ExprKind::Closure(pb), pb_ty, span);
        let y_e = expr(ExprKind::Local(y), y_ty, span);
        let pair = expr(ExprKind::Tuple(vec![y_e, pb]), ty.clone(), span);
        let bound = Pat::Tuple(vec![Pat::Local(y), Pat::Local(k)]);
        Ok(expr(
            ExprKind::Let(bound, Box::new(output), Box::new(pair)),
            ty,
            span,
        ))
    }

    /// The function argument of `build`/`map`/`fold` as a closure of a known
    /// function of `n` parameters, after the bindings its evaluation needs.
    fn function_arg(&mut self, a: Arg<'a>, n: usize, span: Span) -> R<(Vec<(Local, Expr)>, Expr)> {
        let ty = match &a {
            Arg::Ast(e) => self.ty(e)?,
            Arg::Lowered(e) => e.ty.clone(),
        };
        let (param_tys, ret) =
            peel(&ty, n).ok_or_else(|| internal("a function argument of another type", span))?;
        if let Arg::Ast(e) = &a
            && let A::Lam(ps, body) = &strip(e).kind
            && ps.len() == n
        {
            let f = self.new_fun(format!("{}.lam", self.current_name()), e.span);
            self.fun_body(f, ps, body, &ty)?;
            return Ok((Vec::new(), expr(ExprKind::Closure(f), ty, e.span)));
        }
        // Otherwise a function taking `n` parameters that applies the
        // argument to them; the argument's own parts are evaluated once, first.
        let mut lets = Vec::new();
        let (head, fixed) = match a {
            Arg::Ast(e) => {
                let mut args = Vec::new();
                let mut h = strip(e);
                while let A::App(f, x) = &h.kind {
                    args.push(&**x);
                    h = strip(f);
                }
                args.reverse();
                let head = match self.head(h)? {
                    Head::Value(v) => Head::Value(self.temp(v, &mut lets)),
                    known => known,
                };
                // A lambda or known function given to a differentiation
                // operator or custom rule (`custom_vjp (vjp g)`) stays a
                // known function, made where it is called (see [`Fixed`]).
                let operator = matches!(head, Head::Prim(p) if p.is_derivative());
                let mut fixed = Vec::new();
                for x in args {
                    if operator && self.is_function_literal(x) {
                        fixed.push(Arg::Ast(x));
                        continue;
                    }
                    let v = self.expr(x)?;
                    fixed.push(Arg::Lowered(self.temp(v, &mut lets)));
                }
                (head, fixed)
            }
            Arg::Lowered(v) => (Head::Value(self.temp(v, &mut lets)), Vec::new()),
        };
        let f = self.new_fun(format!("{}.eta", self.current_name()), span);
        let saved = self.current.replace(f);
        let params: Vec<Local> = param_tys
            .iter()
            .map(|t| self.new_local("_", t.clone()))
            .collect();
        let args = fixed
            .into_iter()
            .chain(params.iter().map(|&l| {
                Arg::Lowered(expr(
                    ExprKind::Local(l),
                    self.prog.local_ty(l).clone(),
                    span,
                ))
            }))
            .collect();
        let body = self.call(head, args, ret.clone(), span);
        self.current = saved;
        let fun = &mut self.prog.funs[f.0 as usize];
        fun.params = params
            .into_iter()
            .zip(param_tys)
            .map(|(l, t)| (Pat::Local(l), t))
            .collect();
        fun.ret = ret;
        fun.body = body?;
        Ok((lets, expr(ExprKind::Closure(f), ty, span)))
    }

    /// `v` itself if it is a local, a literal or a top-level value (whose
    /// name keeps a function it holds known), else a new local bound to it
    /// (the binding appended to `lets`).
    fn temp(&mut self, v: Expr, lets: &mut Vec<(Local, Expr)>) -> Expr {
        let keep = matches!(
            v.kind,
            ExprKind::Local(_) | ExprKind::Lit(_) | ExprKind::Global(_)
        );
        if keep { v } else { self.bind_to_local(v, lets) }
    }

    /// `v` bound to a new local in `lets`, so that it is evaluated at its
    /// place in their order — or `v` itself if evaluating it has no effect:
    /// a local, a literal, a closure (a top-level value's first use may
    /// fail, so it is bound).
    fn bound_in_order(&mut self, v: Expr, lets: &mut Vec<(Local, Expr)>) -> Expr {
        let keep = matches!(
            v.kind,
            ExprKind::Local(_) | ExprKind::Lit(_) | ExprKind::Closure(_)
        );
        if keep { v } else { self.bind_to_local(v, lets) }
    }

    fn bind_to_local(&mut self, v: Expr, lets: &mut Vec<(Local, Expr)>) -> Expr {
        let t = self.new_local("_", v.ty.clone());
        let e = expr(ExprKind::Local(t), v.ty.clone(), v.span);
        lets.push((t, v));
        e
    }

    /// Sets every function's captures: the locals of other functions it
    /// uses, directly or through the functions it calls (a fixpoint).
    fn compute_captures(&mut self) -> R<()> {
        let n = self.prog.funs.len();
        let mut uses: Vec<(BTreeSet<Local>, BTreeSet<FunId>)> = Vec::with_capacity(n);
        for f in &self.prog.funs {
            let mut u = (BTreeSet::new(), BTreeSet::new());
            collect_uses(&f.body, &mut u);
            uses.push(u);
        }
        let mut captures: Vec<BTreeSet<Local>> = vec![BTreeSet::new(); n];
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..n {
                let me = Some(FunId(i as u32));
                let mut c: BTreeSet<Local> = uses[i]
                    .0
                    .iter()
                    .copied()
                    .filter(|l| self.owner[l.0 as usize] != me)
                    .collect();
                for g in &uses[i].1 {
                    c.extend(
                        captures[g.0 as usize]
                            .iter()
                            .copied()
                            .filter(|l| self.owner[l.0 as usize] != me),
                    );
                }
                if c.len() != captures[i].len() {
                    captures[i] = c;
                    changed = true;
                }
            }
        }
        for (f, c) in self.prog.funs.iter_mut().zip(captures) {
            f.captures = c.into_iter().collect();
        }
        for g in &self.prog.globals {
            let mut u = (BTreeSet::new(), BTreeSet::new());
            collect_uses(&g.body, &mut u);
            let outside = u.0.iter().any(|l| self.owner[l.0 as usize].is_some())
                || u.1.iter().any(|f| {
                    self.prog.funs[f.0 as usize]
                        .captures
                        .iter()
                        .any(|l| self.owner[l.0 as usize].is_some())
                });
            if outside {
                return Err(internal("a global that captures a local", g.span));
            }
        }
        Ok(())
    }
}

/// What a name resolves to.
enum Resolved {
    Local(Local),
    Global(GlobalId),
    Known(FunId, usize),
    Prim(Prim),
}

fn translated(span: Span) -> Unsupported {
    Unsupported {
        what: "the translated dialect (files starting `#!translated`)".into(),
        span,
    }
}

/// A step from a value to one of its parts: how [`Lowerer::walk_reals`]
/// reached a real leaf, to find the same leaf in another value of the shape.
#[derive(Clone, Debug)]
enum Step {
    /// Component k of a tuple.
    Proj(u32),
    /// The value inside an `inl`.
    Inl,
    /// The value inside an `inr`.
    Inr,
    /// The element at this index (an `Int` local) of a vector.
    Index(Expr),
}

/// What [`Lowerer::walk_reals`] puts at a real leaf, from the leaf's index
/// and path.
type LeafFn<'a, 'f> = dyn FnMut(&mut Lowerer<'a>, Expr, &[Step]) -> R<Expr> + 'f;

/// The number of real leaves of every value of type `t`, if it does not
/// depend on the value (no sums or vectors with reals inside).
fn static_reals(t: &Type) -> Option<i64> {
    match t {
        Type::Real => Some(1),
        Type::Int | Type::Bool | Type::Unit => Some(0),
        Type::Tuple(ts) => ts.iter().map(static_reals).sum(),
        Type::Sum(a, b) => match (static_reals(a), static_reals(b)) {
            (Some(0), Some(0)) => Some(0),
            _ => None,
        },
        Type::Vec(a) => (static_reals(a) == Some(0)).then_some(0),
        _ => None,
    }
}

/// Data without functions: what `jacobian` and `hessian` take and return.
fn first_order(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(first_order),
        Type::Sum(a, b) => first_order(a) && first_order(b),
        Type::Vec(a) => first_order(a),
        _ => false,
    }
}

/// `a + b` of two `Int`s, folded when they are literals or one is 0.
fn add_int(a: Expr, b: Expr) -> Expr {
    let span = a.span;
    match (&a.kind, &b.kind) {
        (ExprKind::Lit(Lit::Int(x)), ExprKind::Lit(Lit::Int(y))) => int_lit(x + y, span),
        (ExprKind::Lit(Lit::Int(0)), _) => b,
        (_, ExprKind::Lit(Lit::Int(0))) => a,
        _ => expr(ExprKind::Prim(Prim::Add, vec![a, b]), Type::Int, span),
    }
}

/// `a · k` of an `Int` and a constant, folded for k = 0 and 1.
fn mul_int(a: Expr, k: i64) -> Expr {
    let span = a.span;
    match k {
        0 => int_lit(0, span),
        1 => a,
        _ => expr(
            ExprKind::Prim(Prim::Mul, vec![a, int_lit(k, span)]),
            Type::Int,
            span,
        ),
    }
}

/// The comparison `p` of two `Int`s.
fn int_cmp(p: Prim, a: Expr, b: Expr) -> Expr {
    let span = a.span;
    expr(ExprKind::Prim(p, vec![a, b]), Type::Bool, span)
}

fn unit(span: Span) -> Expr {
    expr(ExprKind::Lit(Lit::Unit), Type::Unit, span)
}

/// Which arguments of `p` are functions (lowered as known functions where
/// they can be), and how many arguments each is called with.
fn function_args(p: Prim) -> &'static [(usize, usize)] {
    match p {
        Prim::Build => &[(1, 1)],
        Prim::Map => &[(0, 1)],
        Prim::Fold => &[(0, 2)],
        Prim::CustomJvp => &[(0, 1), (1, 2)],
        p if p.is_derivative() => &[(0, 1)],
        _ => &[],
    }
}

fn has_function_args(p: Prim) -> bool {
    !function_args(p).is_empty()
}

/// `let t1 = e1 in … let tn = en in body`.
fn wrap_lets(lets: Vec<(Local, Expr)>, body: Expr) -> Expr {
    lets.into_iter().rev().fold(body, |body, (t, value)| {
        let (ty, span) = (body.ty.clone(), body.span);
        expr(
            ExprKind::Let(Pat::Local(t), Box::new(value), Box::new(body)),
            ty,
            span,
        )
    })
}

/// The locals an expression uses and the functions it calls or closes over
/// (not looking into those functions' bodies). Iterative: bodies can be deep.
fn collect_uses(e: &Expr, out: &mut (BTreeSet<Local>, BTreeSet<FunId>)) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Local(l) => {
                out.0.insert(*l);
            }
            ExprKind::Call(f, _) | ExprKind::Closure(f) => {
                out.1.insert(*f);
            }
            _ => {}
        }
        e.for_each_child(|c| stack.push(c));
    }
}
