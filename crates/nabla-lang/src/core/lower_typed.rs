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
use crate::types::{Monomorphic, Type};
use std::collections::{BTreeSet, HashMap};

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

impl Lowerer<'_> {
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
    fn fun_body(&mut self, f: FunId, params: &[Pattern], body: &ast::Expr, ty: &Type) -> R<()> {
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

    fn expr(&mut self, e: &ast::Expr) -> R<Expr> {
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

    fn exprs(&mut self, es: &[ast::Expr]) -> R<Vec<Expr>> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    fn arm(&mut self, p: &Pattern, ty: &Type, body: &ast::Expr) -> R<(Pat, Box<Expr>)> {
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
        params: &[Pattern],
        value: &ast::Expr,
        fty: &Type,
        body: &ast::Expr,
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
        fixed: Vec<Local>,
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
        args.push(x);
        let body = if args.len() == n {
            let lowered = args
                .iter()
                .map(|&l| {
                    Arg::Lowered(expr(
                        ExprKind::Local(l),
                        self.prog.local_ty(l).clone(),
                        span,
                    ))
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
    fn application(&mut self, e: &ast::Expr) -> R<Expr> {
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
        let head = self.head(head)?;
        self.call(head, args, self.ty(e)?, e.span)
    }

    fn head(&mut self, h: &ast::Expr) -> R<Head> {
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
    fn call(&mut self, head: Head, mut args: Vec<Arg>, ty: Type, span: Span) -> R<Expr> {
        let arity = match &head {
            Head::Known(_, n) => *n,
            Head::Prim(p) => p.info().arity,
            Head::Value(_) => 1,
        };
        if args.len() < arity {
            // Partial application: the arguments are evaluated now.
            let mut lets = Vec::new();
            let mut fixed = Vec::new();
            for a in args {
                let a = self.arg(a)?;
                let t = self.new_local("_", a.ty.clone());
                fixed.push(t);
                lets.push((t, a));
            }
            let n = arity;
            let value = self.curried(head, fixed, &ty, n, span)?;
            return Ok(wrap_lets(lets, value));
        }
        let rest = args.split_off(arity);
        // The type after `arity` arguments: `ty` with the rest's types in front.
        let mut rest_lowered = Vec::with_capacity(rest.len());
        for a in rest {
            rest_lowered.push(self.arg(a)?);
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
        Ok(out)
    }

    fn arg(&mut self, a: Arg) -> R<Expr> {
        match a {
            Arg::Ast(e) => self.expr(e),
            Arg::Lowered(e) => Ok(e),
        }
    }

    /// A saturated primitive call of type `ty`.
    fn prim_call(&mut self, p: Prim, args: Vec<Arg>, ty: Type, span: Span) -> R<Expr> {
        // Which argument is a function, and how many arguments it is called with.
        let function_arg = match p {
            Prim::Build => Some((1, 1)),
            Prim::Map => Some((0, 1)),
            Prim::Fold => Some((0, 2)),
            p if p.is_derivative() => Some((0, 1)),
            _ => None,
        };
        let mut lets = Vec::new();
        let mut lowered = Vec::with_capacity(args.len());
        for (k, a) in args.into_iter().enumerate() {
            match function_arg {
                Some((i, n)) if i == k => {
                    let (pre, f) = self.function_arg(a, n, span)?;
                    if !pre.is_empty() {
                        // Keep the order of evaluation: earlier arguments first.
                        for e in lowered.iter_mut() {
                            let value = std::mem::replace(e, unit(span));
                            let t = self.new_local("_", value.ty.clone());
                            *e = expr(ExprKind::Local(t), value.ty.clone(), span);
                            lets.push((t, value));
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
            (Prim::Vjp | Prim::Jacobian | Prim::Hessian, 2) => {
                let x = lowered.pop().unwrap_or_else(|| unit(span));
                let f = lowered.pop().unwrap_or_else(|| unit(span));
                let real_vec = Type::Vec(Box::new(Type::Real));
                if matches!(p, Prim::Jacobian | Prim::Hessian)
                    && (x.ty != real_vec || ty != Type::Vec(Box::new(real_vec)))
                {
                    return Err(Unsupported {
                        what: format!(
                            "`{}` of a function of other types than vectors of reals",
                            p.info().name
                        ),
                        span,
                    });
                }
                let x = self.temp(x, &mut lets);
                let e = match p {
                    Prim::Vjp => self.vjp(f, x, ty, span)?,
                    Prim::Jacobian => self.jacobian(f, x, span)?,
                    _ => self.hessian(f, x, span)?,
                };
                return Ok(wrap_lets(lets, e));
            }
            _ => ExprKind::Prim(p, lowered),
        };
        Ok(wrap_lets(lets, expr(call, ty, span)))
    }

    /// `jacobian f x` (`f : Vec Real -> Vec Real`, `x` a local or literal)
    /// as the interpreter computes it (`crate::ad::operators`, which this
    /// must follow step for step, for the same numbers and the same
    /// `trace` output): one `jvp` along the first basis vector finds the
    /// output length m; with m ≥ n inputs the other columns come from n − 1
    /// more `jvp`s, else the rows from one `vjp` and m pullbacks.
    fn jacobian(&mut self, f: Expr, x: Expr, span: Span) -> R<Expr> {
        let real_vec = Type::Vec(Box::new(Type::Real));
        let pair = Type::Tuple(vec![real_vec.clone(), real_vec.clone()]);
        let size = |v: Expr| expr(ExprKind::Prim(Prim::Size, vec![v]), Type::Int, span);
        let n = self.let_in("n", size(x.clone()), span)?;
        let is_empty = int_cmp(Prim::Eq, n.1.clone(), int_lit(0, span));
        // n = 0: as many empty rows as f x has elements.
        let y = expr(
            ExprKind::Apply(Box::new(f.clone()), Box::new(x.clone())),
            real_vec.clone(),
            span,
        );
        let empty = expr(ExprKind::Vector(Vec::new()), real_vec.clone(), span);
        let rows = self.build(size(y), real_vec.clone(), span, |_, _| Ok(empty))?;
        // Otherwise the first column, and the output length m.
        let e0 = self.basis(&n.1, &int_lit(0, span), span)?;
        let first = expr(
            ExprKind::Prim(Prim::Jvp, vec![f.clone(), x.clone(), e0]),
            pair.clone(),
            span,
        );
        let first = self.let_in("first", first, span)?;
        let proj = |e: &Expr, i| {
            expr(
                ExprKind::Proj(Box::new(e.clone()), i),
                real_vec.clone(),
                span,
            )
        };
        let m = self.let_in("m", size(proj(&first.1, 0)), span)?;
        // m ≥ n: n columns by forward mode.
        let columns = self.build(n.1.clone(), real_vec.clone(), span, |s, i| {
            let ei = s.basis(&n.1, &i, span)?;
            let column = expr(
                ExprKind::Prim(Prim::Jvp, vec![f.clone(), x.clone(), ei]),
                pair.clone(),
                span,
            );
            let is_first = int_cmp(Prim::Eq, i, int_lit(0, span));
            Ok(if_(is_first, proj(&first.1, 1), proj(&column, 1)))
        })?;
        let by_columns = self.transpose(columns, &m.1, &n.1, span)?;
        // m < n: m rows by reverse mode.
        let pb_ty = Type::fun(real_vec.clone(), real_vec.clone());
        let q = self.vjp(
            f,
            x,
            Type::Tuple(vec![real_vec.clone(), pb_ty.clone()]),
            span,
        )?;
        let pb = self.let_in(
            "pb",
            expr(ExprKind::Proj(Box::new(q), 1), pb_ty, span),
            span,
        )?;
        let by_rows = self.build(m.1.clone(), real_vec.clone(), span, |s, r| {
            let er = s.basis(&m.1, &r, span)?;
            Ok(expr(
                ExprKind::Apply(Box::new(pb.1.clone()), Box::new(er)),
                real_vec.clone(),
                span,
            ))
        })?;
        let by_rows = wrap_lets(vec![(pb.0, pb.2)], by_rows);
        let tall = int_cmp(Prim::Ge, m.1.clone(), n.1.clone());
        let nonempty = wrap_lets(
            vec![(first.0, first.2), (m.0, m.2)],
            if_(tall, by_columns, by_rows),
        );
        Ok(wrap_lets(vec![(n.0, n.2)], if_(is_empty, rows, nonempty)))
    }

    /// `hessian f x` (`f : Vec Real -> Real`, `x` a local or literal) as the
    /// interpreter computes it (`crate::ad::operators`): forward over
    /// reverse, column i the derivative of the gradient along the i-th
    /// basis vector, `jvp (fun z -> grad f z) x eᵢ`.
    fn hessian(&mut self, f: Expr, x: Expr, span: Span) -> R<Expr> {
        let real_vec = Type::Vec(Box::new(Type::Real));
        let pair = Type::Tuple(vec![real_vec.clone(), real_vec.clone()]);
        let size = expr(ExprKind::Prim(Prim::Size, vec![x.clone()]), Type::Int, span);
        let n = self.let_in("n", size, span)?;
        let columns = self.build(n.1.clone(), real_vec.clone(), span, |s, i| {
            let gradient = s.lambda("z", real_vec.clone(), real_vec.clone(), span, |_, z| {
                Ok(expr(
                    ExprKind::Prim(Prim::Grad, vec![f.clone(), z]),
                    real_vec.clone(),
                    span,
                ))
            })?;
            let ei = s.basis(&n.1, &i, span)?;
            let column = expr(
                ExprKind::Prim(Prim::Jvp, vec![gradient, x.clone(), ei]),
                pair.clone(),
                span,
            );
            Ok(expr(
                ExprKind::Proj(Box::new(column), 1),
                real_vec.clone(),
                span,
            ))
        })?;
        let body = self.transpose(columns, &n.1, &n.1, span)?;
        Ok(wrap_lets(vec![(n.0, n.2)], body))
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

    /// The basis vector `eᵢ` of length `n` (both `Int` locals or literals).
    fn basis(&mut self, n: &Expr, i: &Expr, span: Span) -> R<Expr> {
        let i = i.clone();
        self.build(n.clone(), Type::Real, span, |_, j| {
            let lit = |x| expr(ExprKind::Lit(Lit::Real(x)), Type::Real, span);
            Ok(if_(int_cmp(Prim::Eq, j, i), lit(1.0), lit(0.0)))
        })
    }

    /// The `rows` × `cols` matrix whose column c is `columns[c]` (the
    /// interpreter's `from_columns`).
    fn transpose(&mut self, columns: Expr, rows: &Expr, cols: &Expr, span: Span) -> R<Expr> {
        let real_vec = Type::Vec(Box::new(Type::Real));
        let (t, use_, value) = self.let_in("columns", columns, span)?;
        let cols = cols.clone();
        let matrix = self.build(rows.clone(), real_vec.clone(), span, |s, r| {
            s.build(cols, Type::Real, span, |_, c| {
                let index = |v: Expr, i: Expr, ty: Type| {
                    expr(ExprKind::Prim(Prim::Index, vec![v, i]), ty, span)
                };
                let column = index(use_, c, real_vec);
                Ok(index(column, r, Type::Real))
            })
        })?;
        Ok(wrap_lets(vec![(t, value)], matrix))
    }

    /// `vjp f x` as `(vjp f x, fun ct -> vjp f x ct)`: `Prim::Vjp` of two
    /// operands is `f`'s output at `x` computed at a reverse level, of three
    /// the pullback of `f` at `x` applied to `ct`; the pullback is a closure (`x` a local or literal, `f` a closure of a known
    /// function: both can be used twice). Compiled differentiation expands
    /// that application into a recording of `f` and one backward sweep.
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
        let y = expr(
            ExprKind::Prim(Prim::Vjp, vec![f.clone(), x.clone()]),
            y_ty.clone(),
            span,
        );
        let pb = self.new_fun(format!("{}.pullback", self.current_name()), span);
        let saved = self.current.replace(pb);
        let ct = self.new_local("ct", y_ty.clone());
        self.current = saved;
        let ct_e = expr(ExprKind::Local(ct), y_ty.clone(), span);
        let fun = &mut self.prog.funs[pb.0 as usize];
        fun.params = vec![(Pat::Local(ct), y_ty)];
        fun.ret = grad_ty.clone();
        fun.body = expr(ExprKind::Prim(Prim::Vjp, vec![f, x, ct_e]), grad_ty, span);
        let pb = expr(ExprKind::Closure(pb), pb_ty, span);
        Ok(expr(ExprKind::Tuple(vec![y, pb]), ty, span))
    }

    /// The function argument of `build`/`map`/`fold` as a closure of a known
    /// function of `n` parameters, after the bindings its evaluation needs.
    fn function_arg(&mut self, a: Arg, n: usize, span: Span) -> R<(Vec<(Local, Expr)>, Expr)> {
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
                let mut fixed = Vec::new();
                for x in args {
                    let v = self.expr(x)?;
                    fixed.push(self.temp(v, &mut lets));
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
            .chain(
                params
                    .iter()
                    .map(|&l| expr(ExprKind::Local(l), self.prog.local_ty(l).clone(), span)),
            )
            .map(Arg::Lowered)
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

    /// `v` itself if it is a local or a literal, else a new local bound to it
    /// (the binding appended to `lets`).
    fn temp(&mut self, v: Expr, lets: &mut Vec<(Local, Expr)>) -> Expr {
        if matches!(
            v.kind,
            ExprKind::Local(_) | ExprKind::Lit(_) | ExprKind::Global(_)
        ) {
            return v;
        }
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

/// The comparison `p` of two `Int`s.
fn int_cmp(p: Prim, a: Expr, b: Expr) -> Expr {
    let span = a.span;
    expr(ExprKind::Prim(p, vec![a, b]), Type::Bool, span)
}

fn unit(span: Span) -> Expr {
    expr(ExprKind::Lit(Lit::Unit), Type::Unit, span)
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
