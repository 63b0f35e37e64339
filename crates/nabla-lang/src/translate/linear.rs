//! The linear-map mode: the full Jacobian of Ellis, Peyton Jones and
//! Fitzgibbon ("AD in the Knossos compiler", §2–3), as an expression over
//! linear maps (their Figure 3), built by ∇ (Figure 6) and simplified with the
//! laws of Figure 4; and the forward and reverse derivatives `fwd$f(x, dx) =
//! ∂f(x) ⊙ dx` and `rev$f(x, dr) = dr ⊙_R ∂f(x)` obtained from it by
//! eliminating every linear map with the semantics of ⊙ (Figure 4) and the
//! laws of ⊙_R (Figure 5), as ordinary nabla code.
//!
//! For `f : S -> T`, `∂f : S -> (S ⊸ T)` is printed as `def f_jac p = …`:
//!
//! | written | Figure 3 | meaning (`⊙ x`) |
//! |---|---|---|
//! | `0` | Zero | the zero tangent |
//! | `1` | Unit | `x` |
//! | `S(k)` | Scale | `k * x` (`k` a primal expression) |
//! | `m1 ∘ m2` | Compose | `m1 ⊙ (m2 ⊙ x)` |
//! | `m1 ⊕ m2` | Sum | `(m1 ⊙ x) + (m2 ⊙ x)` |
//! | `m1 × … × mn` | VCat | `(m1 ⊙ x, …, mn ⊙ x)` |
//! | `m1 ⋈ … ⋈ mn` | HCat | `m1 ⊙ x1 + … + mn ⊙ xn` for `x = (x1, …, xn)` |
//! | `dx` | `∂x` | the Jacobian bound to the name (`let dx = m in …`) |
//! | `g_jac e` | `∂g(e)` | the Jacobian of definition `g` at `e` |
//! | `if c then m1 else m2` | `∂if` | the Jacobian of the branch taken |
//!
//! ∇ covers the first-order fragment of the named core: literals, variables,
//! tuples and projections, `let`, `if`, real primitives (their partials read off
//! the derivative table through [`super::rules::partials`]), comparisons and
//! integer arithmetic (Jacobian 0), `min`/`max` (the Jacobian of the operand
//! chosen) and calls `g e` of definitions `g : S' -> T'` of one first-order
//! argument. The transformation is partial, as the paper says: lambdas,
//! applications of anything but a definition, sums (`inl`/`inr`/`match`),
//! vectors, `let rec` and the differentiation operators are refused with a
//! [`TranslateError`].
//!
//! Sharing: compound operands of a primitive are bound to fresh names before
//! the partials mention them, so the Jacobian never recomputes a primal value;
//! primal bindings the Jacobian does not need are dropped at the end. A law
//! that would copy a map (`(m1 × m2) ∘ n`, `m ∘ (n1 ⋈ n2)`) fires only when the
//! copied map is *cheap* (its scale factors are variables or literals, and it
//! calls no Jacobian), and a `let dx = m` is inlined only when `dx` is used
//! once or `m` is cheap and small: no primal computation is duplicated.
//!
//! Besides Figure 4's laws the simplifier uses a few more that follow from the
//! semantics just as directly: `(m1 ⋈ m2) ⊕ (n1 ⋈ n2) = (m1 ⊕ n1) ⋈ (m2 ⊕ n2)`
//! and the same for `×`; `(m1 ∘ n) ⊕ (m2 ∘ n) = (m1 ⊕ m2) ∘ n`;
//! `(π1 ∘ n) × … × (πk ∘ n) = n` for the projections `πi` (so `π1 × π2 = 1`);
//! `if c then m1 ∘ n else m2 ∘ n = (if c then m1 else m2) ∘ n`; `0 × 0 = 0`,
//! `0 ⋈ 0 = 0`; `S(k) ∘ (m1 ⊕ m2) = (S(k) ∘ m1) ⊕ (S(k) ∘ m2)` for a variable
//! or literal `k`; and associativity of ∘ (compositions nest to the left, so
//! `S(k1) ∘ (S(k2) ∘ m)` becomes `S(k1 * k2) ∘ m`). Distributing a map over a
//! row or column whose other entries are 0 copies nothing, and is always done.

use super::{Names, TResult, TranslateError, is_closed_data, rules};
use crate::core::named::*;
use crate::prim::{Prim, RealFn, Selection};
use crate::types::Type;
use nabla::Number;
use std::collections::{HashMap, HashSet};

/// A linear-map expression (Figure 3), with the primal `let`s and the
/// `let ∂x = …` bindings of Figure 6 and its conditional.
#[derive(Clone, Debug, PartialEq)]
pub enum LinMap {
    /// `0`, with the (primal) type of its codomain.
    Zero(Type),
    /// `1`, with the type of its domain (= codomain).
    One(Type),
    /// `S(k)` on reals.
    Scale(Expr),
    /// `∂x`: a Jacobian bound by [`LinMap::LetLin`].
    Var(Name),
    /// `m1 ∘ m2`
    Compose(Box<LinMap>, Box<LinMap>),
    /// `m1 ⊕ m2`
    Plus(Box<LinMap>, Box<LinMap>),
    /// `m1 × … × mn` (n ≥ 2)
    VCat(Vec<LinMap>),
    /// `m1 ⋈ … ⋈ mn` (n ≥ 2)
    HCat(Vec<LinMap>),
    /// `∂g(e)`: the Jacobian of definition `g` (named `g_jac`) at the primal
    /// `e`, with the (primal) type of its codomain.
    Call(Name, Expr, Type),
    /// `if c then m1 else m2`
    If(Expr, Box<LinMap>, Box<LinMap>),
    /// `let p = e in m` (a primal binding)
    Let(Pat, Expr, Box<LinMap>),
    /// `let ∂x = m1 in m2`, with the (primal) type of x.
    LetLin(Name, Type, Box<LinMap>, Box<LinMap>),
}

/// The Jacobian `∂g` of one definition: `def g_jac p = body`.
#[derive(Clone, Debug, PartialEq)]
pub struct Jacobian {
    /// The definition differentiated (`g`).
    pub of: Name,
    /// `g_jac`.
    pub name: Name,
    /// Its parameter (the source's, renamed where it shadows).
    pub param: Pat,
    /// The argument type S.
    pub domain: Type,
    /// The result type T.
    pub codomain: Type,
    /// The linear map `S ⊸ T`.
    pub body: LinMap,
}

/// The name of the Jacobian of `g`.
pub fn jacobian_name(g: &str) -> String {
    format!("{g}_jac")
}

/// The name of the forward derivative `fwd$g` made from it.
pub fn forward_name(g: &str) -> String {
    format!("{g}_jvp")
}

/// The simplified Jacobians of `def` and of every definition it calls, callees first.
pub fn jacobians(program: &Program, def: &str) -> TResult<Vec<Jacobian>> {
    let distinct = super::with_distinct_binders(program)?;
    let program = &distinct;
    let target = program
        .def(def)
        .ok_or_else(|| TranslateError::NoSuchDef(def.to_string()))?;
    let ty = target
        .ty
        .as_ref()
        .map_or_else(|| "unknown".to_string(), crate::pretty::print_type);
    super::first_order_signature(target)?;
    let closed =
        matches!(&target.ty, Some(Type::Fun(s, t)) if is_closed_data(s) && is_closed_data(t));
    if !closed || signature(target).is_none() {
        return Err(TranslateError::Unsupported {
            def: target.name.clone(),
            what: format!(
                "it has type {ty}; the linear-map translation differentiates functions \
                 between reals, integers, booleans and tuples of them (no vectors, sums or \
                 type variables: annotate an ignored component, `(x : Real, y : Real)`)"
            ),
        });
    }
    let mut names = Names::new(program);
    for d in &program.defs {
        names.fresh(&jacobian_name(&d.name));
    }
    let mut done: Vec<Jacobian> = Vec::new();
    let mut todo = vec![def.to_string()];
    let mut seen = HashSet::new();
    while let Some(g) = todo.pop() {
        if !seen.insert(g.clone()) {
            continue;
        }
        let Some(d) = program.def(&g) else {
            return Err(TranslateError::NoSuchDef(g));
        };
        let mut b = Builder {
            program,
            def: &d.name,
            names: &mut names,
            locals: Vec::new(),
            used: HashSet::new(),
            calls: Vec::new(),
        };
        let jac = b.definition(d)?;
        todo.extend(b.calls);
        done.push(jac);
    }
    // Callees first, in source order.
    let order: Vec<&str> = program.defs.iter().map(|d| d.name.as_str()).collect();
    done.sort_by_key(|j| order.iter().position(|n| *n == j.of));
    Ok(done)
}

/// `fwd$g(p, dp) = ∂g(p) ⊙ dp` for every Jacobian, as ordinary named-core
/// definitions `g_jvp (p, dp)`: the linear maps eliminated with ⊙ (Figure 4).
pub fn forward(program: &Program, def: &str) -> TResult<Program> {
    let jacs = jacobians(program, def)?;
    let mut names = Names::new(program);
    for j in &jacs {
        names.fresh(&forward_name(&j.of));
        names.fresh(&j.name);
        collect_names(&j.body, &mut |n| {
            names.fresh(n);
        });
    }
    let mut out = Program::default();
    for j in &jacs {
        let (ds_pat, ds) = tangent_pattern(&j.param, &j.domain, &mut names);
        let mut types = HashMap::new();
        collect_types(&j.body, &mut types);
        let mut a = Apply {
            names: &mut names,
            ds: ds.clone(),
            types,
            defs: HashMap::new(),
            def: &j.of,
        };
        let body = a.apply(&j.body, &ds)?;
        out.defs.push(Def {
            name: forward_name(&j.of),
            params: vec![Pat::Tuple(vec![j.param.clone(), ds_pat])],
            body: super::flatten(body),
            ty: None,
        });
    }
    Ok(out)
}

/// The tangent parameter of `fwd$g`, shaped like its parameter `p : t`:
/// `(dx, dy)` for `(x, y)`; returned as a pattern and as an expression.
fn tangent_pattern(p: &Pat, t: &Type, names: &mut Names) -> (Pat, Expr) {
    match (p, t) {
        (Pat::Tuple(ps), Type::Tuple(ts)) if ps.len() == ts.len() => {
            let (qs, es) = ps
                .iter()
                .zip(ts)
                .map(|(p, t)| tangent_pattern(p, t, names))
                .unzip();
            (Pat::Tuple(qs), Expr::Tuple(es))
        }
        (Pat::Var(x), _) => {
            let d = names.fresh(&format!("d{x}"));
            (Pat::var(&d), var(d))
        }
        _ => {
            let d = names.fresh("ds");
            (Pat::var(&d), var(d))
        }
    }
}

/// `S` and `T` of a definition of one first-order parameter.
fn signature(d: &Def) -> Option<(Type, Type)> {
    match &d.ty {
        Some(Type::Fun(s, t)) if d.params.len() == 1 && supported_type(s) && supported_type(t) => {
            Some(((**s).clone(), (**t).clone()))
        }
        _ => None,
    }
}

/// Reals, integers, booleans, unit and tuples of them.
fn supported_type(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(supported_type),
        _ => false,
    }
}

fn lit_type(l: &Lit) -> Type {
    match l {
        Lit::Unit => Type::Unit,
        Lit::Bool(_) => Type::Bool,
        Lit::Int(_) => Type::Int,
        Lit::Real(_) => Type::Real,
    }
}

/// A variable, a literal, or a tuple of them: copying it copies no work.
fn is_atom(e: &Expr) -> bool {
    match e {
        Expr::Var(_) | Expr::Lit(_) => true,
        Expr::Tuple(xs) => xs.iter().all(is_atom),
        _ => false,
    }
}

fn proj(t: Expr, index: usize, arity: usize) -> Expr {
    Expr::Proj {
        tuple: Box::new(t),
        index: index as u32,
        arity: arity as u32,
    }
}

/// The projection `(t1, …, tn) ⊸ ti`: `0 ⋈ … ⋈ 1 ⋈ … ⋈ 0`.
fn projection(ts: &[Type], i: usize) -> LinMap {
    LinMap::HCat(
        ts.iter()
            .enumerate()
            .map(|(j, _)| {
                if j == i {
                    LinMap::One(ts[i].clone())
                } else {
                    LinMap::Zero(ts[i].clone())
                }
            })
            .collect(),
    )
}

fn compose(a: LinMap, b: LinMap) -> LinMap {
    LinMap::Compose(Box::new(a), Box::new(b))
}

fn plus(a: LinMap, b: LinMap) -> LinMap {
    LinMap::Plus(Box::new(a), Box::new(b))
}

/// A local variable: its name in the output, type and Jacobian's name.
struct Local {
    source: Name,
    out: Name,
    ty: Type,
    jac: Name,
}

/// A binding made while walking a block.
enum Binding {
    Primal(Pat, Expr),
    Lin(Name, Type, LinMap),
}

/// ∇ over one definition.
struct Builder<'a> {
    program: &'a Program,
    def: &'a str,
    names: &'a mut Names,
    locals: Vec<Local>,
    /// Output names already bound in this definition.
    used: HashSet<Name>,
    /// Definitions called.
    calls: Vec<Name>,
}

impl Builder<'_> {
    fn unsupported(&self, what: impl Into<String>) -> TranslateError {
        TranslateError::Unsupported {
            def: self.def.to_string(),
            what: format!("{} (the linear-map translation is partial)", what.into()),
        }
    }

    fn definition(&mut self, d: &Def) -> TResult<Jacobian> {
        let (s, t) = signature(d).ok_or_else(|| {
            self.unsupported(format!(
                "`{}` is called, but it is not a function of one argument of first-order \
                 type (reals, integers, booleans and tuples)",
                d.name
            ))
        })?;
        let mut out = Vec::new();
        let param = self.bind_pattern(&d.params[0], &s, LinMap::One(s.clone()), &mut out)?;
        let (_, _, m) = self.grad(&d.body, &mut out)?;
        let body = simplify(close(out, m));
        Ok(Jacobian {
            of: d.name.clone(),
            name: jacobian_name(&d.name),
            param,
            domain: s,
            codomain: t,
            body,
        })
    }

    /// Binds the names of pattern `p` (of type `t`, Jacobian `m`): returns the
    /// pattern renamed where it would shadow, and pushes the `let ∂x = …`s.
    fn bind_pattern(
        &mut self,
        p: &Pat,
        t: &Type,
        m: LinMap,
        out: &mut Vec<Binding>,
    ) -> TResult<Pat> {
        Ok(match (p, t) {
            (Pat::Wild, _) => Pat::Wild,
            (Pat::Var(x), _) => {
                let name = if self.used.contains(x) {
                    self.names.fresh(x)
                } else {
                    x.clone()
                };
                self.used.insert(name.clone());
                let jac = self.names.fresh(&format!("d{name}"));
                out.push(Binding::Lin(jac.clone(), t.clone(), m));
                self.locals.push(Local {
                    source: x.clone(),
                    out: name.clone(),
                    ty: t.clone(),
                    jac,
                });
                Pat::Var(name)
            }
            (Pat::Tuple(ps), Type::Tuple(ts)) if ps.len() == ts.len() => {
                // Bind the whole once, so the projections share it.
                let whole = match m {
                    LinMap::One(_) | LinMap::Var(_) => m,
                    m => {
                        let n = self.names.fresh("dp");
                        out.push(Binding::Lin(n.clone(), t.clone(), m));
                        LinMap::Var(n)
                    }
                };
                let mut qs = Vec::new();
                for (i, (q, ti)) in ps.iter().zip(ts).enumerate() {
                    let mi = compose(projection(ts, i), whole.clone());
                    qs.push(self.bind_pattern(q, ti, mi, out)?);
                }
                Pat::Tuple(qs)
            }
            _ => return Err(self.unsupported("a pattern that does not fit its type")),
        })
    }

    fn local(&self, x: &str) -> Option<&Local> {
        self.locals.iter().rev().find(|l| l.source == x)
    }

    /// Binds `e` to a fresh name unless it is a variable or a literal.
    fn atom(&mut self, e: Expr, out: &mut Vec<Binding>) -> Expr {
        if is_atom(&e) {
            return e;
        }
        let a = self.names.fresh("a");
        out.push(Binding::Primal(Pat::var(&a), e));
        var(a)
    }

    /// ∇⟦e⟧: the primal of `e` (over the names bound so far), its type, and
    /// its Jacobian `S ⊸ T`; bindings go to `out`.
    fn grad(&mut self, e: &Expr, out: &mut Vec<Binding>) -> TResult<(Expr, Type, LinMap)> {
        if crate::stack::check().is_err() {
            return Err(self.unsupported("the program is nested too deeply to translate"));
        }
        Ok(match e {
            // ∇⟦k⟧ = 0
            Expr::Lit(l) => (e.clone(), lit_type(l), LinMap::Zero(lit_type(l))),
            // ∇⟦x⟧ = ∂x
            Expr::Var(x) => {
                if let Some(l) = self.local(x) {
                    (var(&l.out), l.ty.clone(), LinMap::Var(l.jac.clone()))
                } else if let Some(d) = self.program.def(x) {
                    match &d.ty {
                        Some(t) if d.params.is_empty() && supported_type(t) => {
                            (e.clone(), t.clone(), LinMap::Zero(t.clone()))
                        }
                        _ => {
                            return Err(self.unsupported(format!(
                                "`{x}` is used as a value; only calls `{x} e` of definitions \
                                 and definitions of first-order values can be differentiated"
                            )));
                        }
                    }
                } else {
                    return Err(self.unsupported(format!("unknown variable `{x}`")));
                }
            }
            // ∇⟦(e1, …, en)⟧ = ∇⟦e1⟧ × … × ∇⟦en⟧
            Expr::Tuple(es) => {
                let (mut ps, mut ts, mut ms) = (Vec::new(), Vec::new(), Vec::new());
                for x in es {
                    let (p, t, m) = self.grad(x, out)?;
                    ps.push(p);
                    ts.push(t);
                    ms.push(m);
                }
                (Expr::Tuple(ps), Type::Tuple(ts), LinMap::VCat(ms))
            }
            Expr::Proj {
                tuple,
                index,
                arity,
            } => {
                let (p, t, m) = self.grad(tuple, out)?;
                let Type::Tuple(ts) = &t else {
                    return Err(self.unsupported("a projection of a non-tuple"));
                };
                let (i, n) = (*index as usize, *arity as usize);
                let p = match p {
                    Expr::Tuple(mut items) if items.iter().all(is_atom) => items.swap_remove(i),
                    p => proj(p, i, n),
                };
                (p, ts[i].clone(), compose(projection(ts, i), m))
            }
            // ∇⟦let x = e1 in e2⟧ = let x = e1 in let ∂x = ∇⟦e1⟧ in ∇⟦e2⟧
            Expr::Let(pat, v, body) => {
                let (mut pv, tv, mut mv) = self.grad(v, out)?;
                let mark = self.locals.len();
                let mut lins = Vec::new();
                // `let z = exp x`: the value the partial needed was bound to a
                // fresh `v`; bind it to `z` instead of adding `let z = v`.
                let fresh_value = match (&pv, out.last()) {
                    (Expr::Var(y), Some(Binding::Primal(Pat::Var(b), _))) if y == b => {
                        Some(y.clone())
                    }
                    _ => None,
                };
                let mut renamed = None;
                if let (Pat::Var(_), Some(y)) = (pat, &fresh_value)
                    && self.local(y).is_none()
                    && !self.used.contains(y)
                    && let Some(Binding::Primal(_, e)) = out.pop()
                {
                    pv = e;
                    renamed = Some(y.clone());
                }
                let q = self.bind_pattern(pat, &tv, mv.clone(), &mut lins)?;
                if let (Some(y), Pat::Var(z)) = (&renamed, &q) {
                    mv = rename_map(mv, y, z);
                    if let Some(Binding::Lin(_, _, m)) = lins.first_mut() {
                        *m = mv;
                    }
                }
                out.push(Binding::Primal(q, pv));
                out.extend(lins);
                let r = self.grad(body, out);
                self.locals.truncate(mark);
                r?
            }
            // ∇⟦if c then a else b⟧ = if c then ∇⟦a⟧ else ∇⟦b⟧
            Expr::If(c, a, b) => {
                let (pc, _, _) = self.grad(c, out)?;
                // The condition may be needed twice (Jacobian and primal): bind
                // it unless it is a primitive applied to atoms.
                let pc = match &pc {
                    Expr::Prim(_, xs) if xs.iter().all(is_atom) => pc,
                    _ => self.atom(pc, out),
                };
                let mut branch = |x: &Expr| -> TResult<(Expr, Type, LinMap)> {
                    let mut inner = Vec::new();
                    let (p, t, m) = self.grad(x, &mut inner)?;
                    let primal = inner.iter().rev().fold(p, |body, b| match b {
                        Binding::Primal(q, e) => let_(q.clone(), e.clone(), body),
                        Binding::Lin(..) => body,
                    });
                    Ok((primal, t, close(inner, m)))
                };
                let (pa, ta, ma) = branch(a)?;
                let (pb, _, mb) = branch(b)?;
                (
                    Expr::If(Box::new(pc.clone()), Box::new(pa), Box::new(pb)),
                    ta,
                    LinMap::If(pc, Box::new(ma), Box::new(mb)),
                )
            }
            Expr::Prim(p, args) => self.prim(p, args, out)?,
            // ∇⟦g(e)⟧ = ∂g(e) ∘ ∇⟦e⟧
            Expr::App(f, args) => {
                let g = match &**f {
                    Expr::Var(g) if self.local(g).is_none() && self.program.def(g).is_some() => {
                        g.clone()
                    }
                    _ => {
                        return Err(self.unsupported(
                            "an application of a function that is not a definition \
                             (a local or computed function)",
                        ));
                    }
                };
                let Some((_, t)) = self
                    .program
                    .def(&g)
                    .and_then(signature)
                    .filter(|_| args.len() == 1)
                else {
                    return Err(self.unsupported(format!(
                        "the call of `{g}`: only definitions of one argument of first-order \
                         type (reals, integers, booleans and tuples) can be differentiated"
                    )));
                };
                let (pa, _, ma) = self.grad(&args[0], out)?;
                let pa = self.atom(pa, out);
                if !self.calls.contains(&g) {
                    self.calls.push(g.clone());
                }
                (
                    app(var(&g), vec![pa.clone()]),
                    t.clone(),
                    compose(LinMap::Call(g, pa, t), ma),
                )
            }
            Expr::Lam(..) => return Err(self.unsupported("a lambda")),
            Expr::LetRec { .. } => return Err(self.unsupported("a local recursive function")),
            Expr::Inl(_) | Expr::Inr(_) | Expr::Case { .. } => {
                return Err(self.unsupported("a sum (`inl`, `inr`, `match`)"));
            }
            Expr::Vector(_) => return Err(self.unsupported("a vector")),
            Expr::PrimRef(p) => {
                if p.prim.is_derivative() {
                    return Err(TranslateError::NestedDerivative {
                        def: self.def.to_string(),
                        op: p.prim.info().name,
                    });
                }
                return Err(
                    self.unsupported(format!("`{}` used as a function value", p.prim.info().name))
                );
            }
            Expr::Bind(..) | Expr::RunDelta(..) | Expr::Poly(..) => {
                return Err(self.unsupported("the program is already a translation"));
            }
        })
    }

    fn prim(
        &mut self,
        p: &PrimAt,
        args: &[Expr],
        out: &mut Vec<Binding>,
    ) -> TResult<(Expr, Type, LinMap)> {
        if p.prim.is_derivative() {
            return Err(TranslateError::NestedDerivative {
                def: self.def.to_string(),
                op: p.prim.info().name,
            });
        }
        let on_reals = p.at.is_none() || p.on_reals();
        let mut operands = Vec::new();
        for a in args {
            operands.push(self.grad(a, out)?);
        }
        match (p.prim.info().real, p.prim) {
            // ∂min, ∂max: the Jacobian of the operand chosen.
            (Some(RealFn::Select(sel)), _) => {
                let x = self.atom(operands[0].0.clone(), out);
                let y = self.atom(operands[1].0.clone(), out);
                let cmp = match sel {
                    Selection::Min => Prim::Lt,
                    Selection::Max => Prim::Gt,
                };
                let c = real_op(cmp, vec![y.clone(), x.clone()]);
                let m = LinMap::If(
                    c,
                    Box::new(operands[1].2.clone()),
                    Box::new(operands[0].2.clone()),
                );
                Ok((Expr::Prim(p.clone(), vec![x, y]), Type::Real, m))
            }
            // ∇⟦f(e1, …, en)⟧ = (S(∂1f) ⋈ … ⋈ S(∂nf)) ∘ (∇⟦e1⟧ × … × ∇⟦en⟧)
            (Some(f), _) if on_reals => {
                let atoms: Vec<Expr> = operands
                    .iter()
                    .map(|o| self.atom(o.0.clone(), out))
                    .collect();
                let value = Expr::Prim(p.clone(), atoms.clone());
                // `<v>` names the value only to see whether a partial needs it.
                let partials = rules::partials(f, &atoms, &var("<v>"));
                let (partials, primal) = if partials.iter().any(|d| d.mentions("<v>")) {
                    let v = self.names.fresh("v");
                    out.push(Binding::Primal(Pat::var(&v), value));
                    (rules::partials(f, &atoms, &var(&v)), var(&v))
                } else {
                    (partials, value)
                };
                let scale = |d: Expr| match d {
                    Expr::Lit(Lit::Real(1.0)) => LinMap::One(Type::Real),
                    Expr::Lit(Lit::Real(0.0)) => LinMap::Zero(Type::Real),
                    d => LinMap::Scale(d),
                };
                let m = if partials.len() == 1 {
                    compose(scale(partials[0].clone()), operands[0].2.clone())
                } else {
                    compose(
                        LinMap::HCat(partials.into_iter().map(scale).collect()),
                        LinMap::VCat(operands.iter().map(|o| o.2.clone()).collect()),
                    )
                };
                Ok((primal, Type::Real, m))
            }
            _ => {
                let ty = match p.prim {
                    Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne | Prim::Not => {
                        Type::Bool
                    }
                    Prim::ToReal => Type::Real,
                    Prim::ToInt => Type::Int,
                    _ if p.prim.info().real.is_some() => match &p.at {
                        Some(t @ Type::Int) => t.clone(),
                        _ => return Err(self.unsupported("arithmetic at an unresolved type")),
                    },
                    Prim::Build
                    | Prim::Index
                    | Prim::Size
                    | Prim::Sum
                    | Prim::Map
                    | Prim::Fold
                    | Prim::Zip => {
                        return Err(self.unsupported(format!(
                            "the vector primitive `{}`",
                            p.prim.info().name
                        )));
                    }
                    _ => {
                        return Err(
                            self.unsupported(format!("the primitive `{}`", p.prim.info().name))
                        );
                    }
                };
                // A discrete result: its Jacobian is 0.
                let primals = operands.into_iter().map(|o| o.0).collect();
                Ok((Expr::Prim(p.clone(), primals), ty.clone(), LinMap::Zero(ty)))
            }
        }
    }
}

/// `m` with the primal variable `from` renamed `to` in its scale factors.
/// Only partial derivatives mention `from` (a fresh name): they are built
/// from variables, literals, primitives and `if`s.
fn rename_map(m: LinMap, from: &str, to: &str) -> LinMap {
    fn expr(e: Expr, from: &str, to: &str) -> Expr {
        match e {
            Expr::Var(x) if x == from => var(to),
            Expr::Prim(p, xs) => Expr::Prim(p, xs.into_iter().map(|x| expr(x, from, to)).collect()),
            Expr::If(c, a, b) => Expr::If(
                Box::new(expr(*c, from, to)),
                Box::new(expr(*a, from, to)),
                Box::new(expr(*b, from, to)),
            ),
            Expr::App(f, xs) => Expr::App(
                Box::new(expr(*f, from, to)),
                xs.into_iter().map(|x| expr(x, from, to)).collect(),
            ),
            Expr::Tuple(xs) => Expr::Tuple(xs.into_iter().map(|x| expr(x, from, to)).collect()),
            e => e,
        }
    }
    let go = |m: LinMap| rename_map(m, from, to);
    let bx = |m: Box<LinMap>| Box::new(rename_map(*m, from, to));
    match m {
        LinMap::Scale(k) => LinMap::Scale(expr(k, from, to)),
        LinMap::Call(g, e, t) => LinMap::Call(g, expr(e, from, to), t),
        LinMap::Compose(a, b) => LinMap::Compose(bx(a), bx(b)),
        LinMap::Plus(a, b) => LinMap::Plus(bx(a), bx(b)),
        LinMap::If(c, a, b) => LinMap::If(expr(c, from, to), bx(a), bx(b)),
        LinMap::VCat(ms) => LinMap::VCat(ms.into_iter().map(go).collect()),
        LinMap::HCat(ms) => LinMap::HCat(ms.into_iter().map(go).collect()),
        m => m,
    }
}

/// Wraps `m` in the bindings, innermost last.
fn close(bindings: Vec<Binding>, m: LinMap) -> LinMap {
    bindings.into_iter().rev().fold(m, |body, b| match b {
        Binding::Primal(p, e) => LinMap::Let(p, e, Box::new(body)),
        Binding::Lin(x, t, v) => LinMap::LetLin(x, t, Box::new(v), Box::new(body)),
    })
}

// ---------------------------------------------------------------------------
// Simplification with the laws of Figure 4.

/// Simplifies with the laws of Figure 4 (and those in the module docs) to a
/// fixed point, inlines the `let ∂x`s that can be inlined without duplicating
/// work, and drops the bindings nothing uses.
pub fn simplify(m: LinMap) -> LinMap {
    let mut m = m;
    for _ in 0..100 {
        let mut types = HashMap::new();
        collect_types(&m, &mut types);
        let next = Simplifier { types: &types }.go(m.clone());
        if next == m {
            break;
        }
        m = next;
    }
    m
}

struct Simplifier<'a> {
    types: &'a HashMap<Name, Type>,
}

/// The primal types of the `let ∂x`s' variables.
fn collect_types(m: &LinMap, out: &mut HashMap<Name, Type>) {
    each(m, &mut |m| {
        if let LinMap::LetLin(x, t, ..) = m {
            out.insert(x.clone(), t.clone());
        }
    });
}

/// Calls `f` on `m` and every sub-map, parents first.
fn each(m: &LinMap, f: &mut impl FnMut(&LinMap)) {
    f(m);
    match m {
        LinMap::Zero(_) | LinMap::One(_) | LinMap::Scale(_) | LinMap::Var(_) | LinMap::Call(..) => {
        }
        LinMap::Compose(a, b) | LinMap::Plus(a, b) | LinMap::If(_, a, b) => {
            each(a, f);
            each(b, f);
        }
        LinMap::LetLin(_, _, a, b) => {
            each(a, f);
            each(b, f);
        }
        LinMap::VCat(ms) | LinMap::HCat(ms) => ms.iter().for_each(|x| each(x, f)),
        LinMap::Let(_, _, b) => each(b, f),
    }
}

/// Every primal expression in `m` (scale factors, call arguments, conditions, bound values).
fn each_primal(m: &LinMap, f: &mut impl FnMut(&Expr)) {
    each(m, &mut |m| match m {
        LinMap::Scale(e) | LinMap::Call(_, e, _) | LinMap::If(e, ..) | LinMap::Let(_, e, _) => f(e),
        _ => {}
    });
}

/// Every name `m` binds or mentions.
fn collect_names(m: &LinMap, f: &mut impl FnMut(&str)) {
    each(m, &mut |m| match m {
        LinMap::Let(p, ..) => p.for_each_name(f),
        LinMap::LetLin(x, ..) | LinMap::Var(x) => f(x),
        _ => {}
    });
    each_primal(m, &mut |e| e.for_each_name(f));
}

fn uses_of(m: &LinMap, x: &str) -> usize {
    let mut n = 0;
    each(m, &mut |m| {
        if let LinMap::Var(y) = m {
            n += usize::from(y == x);
        }
    });
    n
}

fn mentions_primal(m: &LinMap, x: &str) -> bool {
    let mut found = false;
    each_primal(m, &mut |e| found |= e.mentions(x));
    found
}

fn size(m: &LinMap) -> usize {
    let mut n = 0;
    each(m, &mut |_| n += 1);
    n
}

/// Copying a cheap map copies no primal computation.
fn cheap(m: &LinMap) -> bool {
    let mut ok = true;
    each(m, &mut |m| match m {
        LinMap::Scale(e) => ok &= is_atom(e),
        LinMap::Call(..) | LinMap::If(..) | LinMap::Let(..) | LinMap::LetLin(..) => ok = false,
        _ => {}
    });
    ok && size(m) <= 16
}

/// Maps that only route tangents (`0`, `1`, names, projections, tuplings) or
/// scale by a variable: inlining one at several uses repeats no work.
fn wiring(m: &LinMap) -> bool {
    let mut ok = true;
    each(m, &mut |m| match m {
        LinMap::Zero(_) | LinMap::One(_) | LinMap::Var(_) | LinMap::HCat(_) | LinMap::VCat(_) => {}
        LinMap::Compose(..) => {}
        _ => ok = false,
    });
    (ok && size(m) <= 16) || matches!(m, LinMap::Scale(k) if is_atom(k))
}

/// `Some(i)` if `m` is the projection `0 ⋈ … ⋈ 1 ⋈ … ⋈ 0` on component `i` of `n`.
fn projection_index(m: &LinMap, n: usize) -> Option<(usize, Type)> {
    let LinMap::HCat(cs) = m else { return None };
    if cs.len() != n {
        return None;
    }
    let ones: Vec<usize> = (0..n)
        .filter(|&i| matches!(cs[i], LinMap::One(_)))
        .collect();
    let zeros = cs.iter().filter(|c| matches!(c, LinMap::Zero(_))).count();
    match (&ones[..], zeros + 1 == n) {
        ([i], true) => match &cs[*i] {
            LinMap::One(t) => Some((*i, t.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// `(π1 ∘ n) × … × (πk ∘ n) = n` and `π1 × … × πk = 1`.
fn untuple(ms: &[LinMap]) -> Option<LinMap> {
    let k = ms.len();
    let mut common: Option<Option<&LinMap>> = None;
    let mut types = Vec::new();
    for (i, m) in ms.iter().enumerate() {
        let (p, n) = match m {
            LinMap::Compose(p, n) => (&**p, Some(&**n)),
            p => (p, None),
        };
        let (j, t) = projection_index(p, k)?;
        if j != i {
            return None;
        }
        types.push(t);
        match common {
            None => common = Some(n),
            Some(c) if c == n => {}
            Some(_) => return None,
        }
    }
    match common? {
        Some(n) => Some(n.clone()),
        None => Some(LinMap::One(Type::Tuple(types))),
    }
}

fn nonzero(ms: &[LinMap]) -> usize {
    ms.iter().filter(|m| !matches!(m, LinMap::Zero(_))).count()
}

fn substitute(m: LinMap, x: &str, by: &LinMap) -> LinMap {
    let go = |m: LinMap| substitute(m, x, by);
    let bx = |m: Box<LinMap>| Box::new(substitute(*m, x, by));
    match m {
        LinMap::Var(y) if y == x => by.clone(),
        LinMap::Compose(a, b) => LinMap::Compose(bx(a), bx(b)),
        LinMap::Plus(a, b) => LinMap::Plus(bx(a), bx(b)),
        LinMap::If(c, a, b) => LinMap::If(c, bx(a), bx(b)),
        LinMap::VCat(ms) => LinMap::VCat(ms.into_iter().map(go).collect()),
        LinMap::HCat(ms) => LinMap::HCat(ms.into_iter().map(go).collect()),
        LinMap::Let(p, e, b) => LinMap::Let(p, e, bx(b)),
        LinMap::LetLin(y, t, a, b) => LinMap::LetLin(y, t, bx(a), bx(b)),
        m => m,
    }
}

impl Simplifier<'_> {
    /// The primal type of the codomain of `m`, where known.
    fn codomain(&self, m: &LinMap) -> Option<Type> {
        match m {
            LinMap::Zero(t) | LinMap::One(t) => Some(t.clone()),
            LinMap::Scale(_) => Some(Type::Real),
            LinMap::Var(x) => self.types.get(x).cloned(),
            LinMap::Compose(a, _) => self.codomain(a),
            LinMap::Plus(a, b) | LinMap::If(_, a, b) => {
                self.codomain(a).or_else(|| self.codomain(b))
            }
            LinMap::VCat(ms) => ms
                .iter()
                .map(|m| self.codomain(m))
                .collect::<Option<Vec<_>>>()
                .map(Type::Tuple),
            LinMap::HCat(ms) => ms.iter().find_map(|m| self.codomain(m)),
            LinMap::Call(_, _, t) => Some(t.clone()),
            LinMap::Let(_, _, b) | LinMap::LetLin(_, _, _, b) => self.codomain(b),
        }
    }

    fn go(&self, m: LinMap) -> LinMap {
        if crate::stack::check().is_err() {
            return m;
        }
        match m {
            LinMap::Compose(a, b) => self.compose(self.go(*a), self.go(*b)),
            LinMap::Plus(a, b) => self.plus(self.go(*a), self.go(*b)),
            LinMap::VCat(ms) => {
                let ms: Vec<LinMap> = ms.into_iter().map(|m| self.go(m)).collect();
                let zeros: Option<Vec<Type>> = ms
                    .iter()
                    .map(|m| match m {
                        LinMap::Zero(t) => Some(t.clone()),
                        _ => None,
                    })
                    .collect();
                match (zeros, untuple(&ms)) {
                    (Some(ts), _) => LinMap::Zero(Type::Tuple(ts)),
                    // (π1 ∘ n) × (π2 ∘ n) = n
                    (None, Some(n)) => n,
                    (None, None) => LinMap::VCat(ms),
                }
            }
            LinMap::HCat(ms) => {
                let ms: Vec<LinMap> = ms.into_iter().map(|m| self.go(m)).collect();
                match ms.first() {
                    Some(z @ LinMap::Zero(_))
                        if ms.iter().all(|m| matches!(m, LinMap::Zero(_))) =>
                    {
                        z.clone()
                    }
                    _ => LinMap::HCat(ms),
                }
            }
            LinMap::If(c, a, b) => {
                let (a, b) = (self.go(*a), self.go(*b));
                match (a, b) {
                    (a @ LinMap::Zero(_), LinMap::Zero(_)) => a,
                    (a, b) if a == b => a,
                    // if c then m1 ∘ n else m2 ∘ n = (if c then m1 else m2) ∘ n
                    (LinMap::Compose(m1, n1), LinMap::Compose(m2, n2)) if n1 == n2 => {
                        compose(LinMap::If(c, m1, m2), *n1)
                    }
                    (a, b) => LinMap::If(c, Box::new(a), Box::new(b)),
                }
            }
            LinMap::Let(p, e, body) => {
                let body = self.go(*body);
                let mut needed = false;
                p.for_each_name(&mut |x| needed |= mentions_primal(&body, x));
                match needed {
                    true => LinMap::Let(p, e, Box::new(body)),
                    false => body,
                }
            }
            LinMap::LetLin(x, t, v, body) => {
                let v = self.go(*v);
                let body = self.go(*body);
                match uses_of(&body, &x) {
                    0 => body,
                    n if n == 1 || wiring(&v) => substitute(body, &x, &v),
                    _ => LinMap::LetLin(x, t, Box::new(v), Box::new(body)),
                }
            }
            m => m,
        }
    }

    fn compose(&self, a: LinMap, b: LinMap) -> LinMap {
        match (a, b) {
            // 0 ∘ m = 0
            (LinMap::Zero(t), _) => LinMap::Zero(t),
            // 1 ∘ m = m, m ∘ 1 = m
            (LinMap::One(_), m) | (m, LinMap::One(_)) => m,
            // m ∘ 0 = 0
            (m, LinMap::Zero(t)) => match self.codomain(&m) {
                Some(c) => LinMap::Zero(c),
                None => compose(m, LinMap::Zero(t)),
            },
            // S(k1) ∘ S(k2) = S(k1 * k2), the product as the chain rule's
            // (`chainMul`: a zero factor gives zero even against an infinite one)
            (LinMap::Scale(k1), LinMap::Scale(k2)) => {
                LinMap::Scale(rules::Code(k1).chain(rules::Code(k2)).0)
            }
            // m ∘ (n1 ∘ n2) = (m ∘ n1) ∘ n2, simplifying m ∘ n1 (associativity)
            (m, LinMap::Compose(n1, n2)) => {
                let mn1 = self.compose(m, *n1);
                self.compose(mn1, *n2)
            }
            // (m1 ⋈ m2) ∘ (n1 × n2) = (m1 ∘ n1) ⊕ (m2 ∘ n2)
            (LinMap::HCat(ms), LinMap::VCat(ns)) if ms.len() == ns.len() && !ms.is_empty() => {
                let mut terms = ms.into_iter().zip(ns).map(|(m, n)| self.compose(m, n));
                let first = terms.next().unwrap_or(LinMap::One(Type::Unit));
                terms.fold(first, |a, b| self.plus(a, b))
            }
            // (m1 × m2) ∘ n = (m1 ∘ n) × (m2 ∘ n)
            (LinMap::VCat(ms), n) if cheap(&n) || nonzero(&ms) <= 1 => {
                LinMap::VCat(ms.into_iter().map(|m| self.compose(m, n.clone())).collect())
            }
            // m ∘ (n1 ⋈ n2) = (m ∘ n1) ⋈ (m ∘ n2)
            (m, LinMap::HCat(ns)) if cheap(&m) || nonzero(&ns) <= 1 => {
                LinMap::HCat(ns.into_iter().map(|n| self.compose(m.clone(), n)).collect())
            }
            // S(k) ∘ (m1 ⊕ m2) = (S(k) ∘ m1) ⊕ (S(k) ∘ m2), by linearity, when k is cheap
            (m @ LinMap::Scale(_), LinMap::Plus(n1, n2)) if cheap(&m) => {
                let a = self.compose(m.clone(), *n1);
                let b = self.compose(m, *n2);
                self.plus(a, b)
            }
            (a, b) => compose(a, b),
        }
    }

    fn plus(&self, a: LinMap, b: LinMap) -> LinMap {
        let as_scale = |m: LinMap| match m {
            LinMap::One(Type::Real) => LinMap::Scale(real(1.0)),
            m => m,
        };
        match (a, b) {
            // m ⊕ 0 = m, 0 ⊕ m = m
            (LinMap::Zero(_), m) | (m, LinMap::Zero(_)) => m,
            (a @ (LinMap::One(Type::Real) | LinMap::Scale(_)), b @ LinMap::One(Type::Real))
            | (a @ LinMap::One(Type::Real), b @ LinMap::Scale(_)) => {
                self.plus(as_scale(a), as_scale(b))
            }
            // S(k1) ⊕ S(k2) = S(k1 + k2)
            (LinMap::Scale(k1), LinMap::Scale(k2)) => {
                LinMap::Scale((rules::Code(k1) + rules::Code(k2)).0)
            }
            // (m1 ⋈ m2) ⊕ (n1 ⋈ n2) = (m1 ⊕ n1) ⋈ (m2 ⊕ n2)
            (LinMap::HCat(ms), LinMap::HCat(ns)) if ms.len() == ns.len() => LinMap::HCat(
                ms.into_iter()
                    .zip(ns)
                    .map(|(m, n)| self.plus(m, n))
                    .collect(),
            ),
            // (m1 × m2) ⊕ (n1 × n2) = (m1 ⊕ n1) × (m2 ⊕ n2)
            (LinMap::VCat(ms), LinMap::VCat(ns)) if ms.len() == ns.len() => LinMap::VCat(
                ms.into_iter()
                    .zip(ns)
                    .map(|(m, n)| self.plus(m, n))
                    .collect(),
            ),
            // (m1 ∘ n) ⊕ (m2 ∘ n) = (m1 ⊕ m2) ∘ n
            (LinMap::Compose(m1, n1), LinMap::Compose(m2, n2)) if n1 == n2 => {
                self.compose(self.plus(*m1, *m2), *n1)
            }
            (a, b) => plus(a, b),
        }
    }
}

// ---------------------------------------------------------------------------
// Eliminating the linear maps: m ⊙ x (Figure 4's semantics).

struct Apply<'a> {
    names: &'a mut Names,
    /// The input tangent of the definition: every ∂x is applied to it.
    ds: Expr,
    types: HashMap<Name, Type>,
    /// `let ∂x = m` bindings applied to something else than `ds` are inlined.
    defs: HashMap<Name, LinMap>,
    def: &'a str,
}

/// The zero tangent of a value of type `t`.
fn zeros(t: &Type) -> Expr {
    match t {
        Type::Real => real(0.0),
        Type::Int => int(0),
        Type::Bool => Expr::Lit(Lit::Bool(false)),
        Type::Tuple(ts) => Expr::Tuple(ts.iter().map(zeros).collect()),
        _ => Expr::Lit(Lit::Unit),
    }
}

/// `let p1 = e1 in … in e` as the bindings and `e`.
fn split_lets(e: Expr) -> (Vec<(Pat, Expr)>, Expr) {
    let mut binds = Vec::new();
    let mut e = e;
    while let Expr::Let(p, v, body) = e {
        binds.push((p, *v));
        e = *body;
    }
    (binds, e)
}

impl Apply<'_> {
    fn codomain(&self, m: &LinMap) -> Option<Type> {
        Simplifier { types: &self.types }.codomain(m)
    }

    /// `e` as an atom: `(bind, atom)`.
    fn atom(&mut self, e: Expr, base: &str) -> (Option<(Pat, Expr)>, Expr) {
        if is_atom(&e) {
            return (None, e);
        }
        let t = self.names.fresh(base);
        (Some((Pat::var(&t), e)), var(t))
    }

    /// `a + b` on tangents of type `t`.
    fn add(&mut self, t: &Type, a: Expr, b: Expr) -> Expr {
        if b == zeros(t) {
            return a;
        }
        if a == zeros(t) {
            return b;
        }
        match t {
            Type::Real => (rules::Code(a) + rules::Code(b)).0,
            Type::Tuple(ts) => {
                let mut lets = Vec::new();
                let mut parts = |e: Expr, this: &mut Self| -> Vec<Expr> {
                    match e {
                        Expr::Tuple(xs) => xs,
                        e => {
                            let (bind, x) = this.atom(e, "t");
                            lets.extend(bind);
                            (0..ts.len())
                                .map(|i| proj(x.clone(), i, ts.len()))
                                .collect()
                        }
                    }
                };
                let pa = parts(a, self);
                let pb = parts(b, self);
                let sum = Expr::Tuple(
                    ts.iter()
                        .zip(pa.into_iter().zip(pb))
                        .map(|(t, (x, y))| self.add(t, x, y))
                        .collect(),
                );
                lets.into_iter()
                    .rev()
                    .fold(sum, |body, (p, e)| let_(p, e, body))
            }
            t => zeros(t),
        }
    }

    fn unsupported(&self, what: &str) -> TranslateError {
        TranslateError::Unsupported {
            def: self.def.to_string(),
            what: what.to_string(),
        }
    }

    /// `m ⊙ v` as ordinary code (`v` a variable, literal or tuple of them).
    fn apply(&mut self, m: &LinMap, v: &Expr) -> TResult<Expr> {
        if crate::stack::check().is_err() {
            return Err(self.unsupported("the program is nested too deeply to translate"));
        }
        let at_ds = *v == self.ds;
        Ok(match m {
            // 0 ⊙ x = 0
            LinMap::Zero(t) => zeros(t),
            // 1 ⊙ x = x
            LinMap::One(_) => v.clone(),
            // S(k) ⊙ x = k * x (as `chainMul k x`)
            LinMap::Scale(k) => rules::Code(k.clone()).chain(rules::Code(v.clone())).0,
            LinMap::Var(x) => match self.defs.get(x).cloned() {
                Some(def) if !at_ds => self.apply(&def, v)?,
                _ if at_ds => var(x),
                _ => return Err(self.unsupported("a Jacobian applied out of its scope")),
            },
            // (m1 ∘ m2) ⊙ x = m1 ⊙ (m2 ⊙ x)
            LinMap::Compose(a, b) => {
                let (mut binds, inner) = split_lets(self.apply(b, v)?);
                let t = match inner {
                    Expr::Tuple(xs) => Expr::Tuple(
                        xs.into_iter()
                            .map(|x| {
                                let (bind, t) = self.atom(x, "t");
                                binds.extend(bind);
                                t
                            })
                            .collect(),
                    ),
                    inner => {
                        let (bind, t) = self.atom(inner, "t");
                        binds.extend(bind);
                        t
                    }
                };
                let outer = self.apply(a, &t)?;
                binds
                    .into_iter()
                    .rev()
                    .fold(outer, |body, (p, e)| let_(p, e, body))
            }
            // (m1 ⊕ m2) ⊙ x = (m1 ⊙ x) + (m2 ⊙ x)
            LinMap::Plus(a, b) => {
                let t = self
                    .codomain(m)
                    .ok_or_else(|| self.unsupported("a sum of linear maps of unknown type"))?;
                let (x, y) = (self.apply(a, v)?, self.apply(b, v)?);
                self.add(&t, x, y)
            }
            // (m1 × m2) ⊙ x = (m1 ⊙ x, m2 ⊙ x)
            LinMap::VCat(ms) => Expr::Tuple(
                ms.iter()
                    .map(|m| self.apply(m, v))
                    .collect::<TResult<_>>()?,
            ),
            // (m1 ⋈ m2) ⊙ (x1, x2) = (m1 ⊙ x1) + (m2 ⊙ x2)
            LinMap::HCat(ms) => {
                let t = self
                    .codomain(m)
                    .ok_or_else(|| self.unsupported("a row of linear maps of unknown type"))?;
                let (bind, parts) = match v {
                    Expr::Tuple(xs) => (None, xs.clone()),
                    _ => {
                        let xs: Vec<Name> = ms.iter().map(|_| self.names.fresh("t")).collect();
                        (
                            Some(Pat::Tuple(xs.iter().map(Pat::var).collect())),
                            xs.iter().map(var).collect(),
                        )
                    }
                };
                let mut sum: Option<Expr> = None;
                for (m, x) in ms.iter().zip(&parts) {
                    if let LinMap::Zero(_) = m {
                        continue;
                    }
                    let y = self.apply(m, x)?;
                    sum = Some(match sum {
                        None => y,
                        Some(s) => self.add(&t, s, y),
                    });
                }
                let sum = sum.unwrap_or_else(|| zeros(&t));
                match bind {
                    Some(p) => let_(p, v.clone(), sum),
                    None => sum,
                }
            }
            LinMap::Call(g, e, _) => app(var(forward_name(g)), vec![pair(e.clone(), v.clone())]),
            LinMap::If(c, a, b) => Expr::If(
                Box::new(c.clone()),
                Box::new(self.apply(a, v)?),
                Box::new(self.apply(b, v)?),
            ),
            LinMap::Let(p, e, body) => let_(p.clone(), e.clone(), self.apply(body, v)?),
            // let ∂x = m in b, applied to ds: let dx = m ⊙ ds in b ⊙ ds
            LinMap::LetLin(x, _, def, body) => {
                if at_ds {
                    let value = self.apply(def, v)?;
                    let_(Pat::var(x), value, self.apply(body, v)?)
                } else {
                    self.defs.insert(x.clone(), (**def).clone());
                    self.apply(body, v)?
                }
            }
        })
    }
}

// ---------------------------------------------------------------------------
// Reverse application: r ⊙_R m (Figure 5).

/// The name of the reverse derivative `rev$g` made from the Jacobian.
pub fn reverse_name(g: &str) -> String {
    format!("{g}_vjp")
}

/// `rev$g(p, dr) = dr ⊙_R ∂g(p)` for every Jacobian, as ordinary named-core
/// definitions `g_vjp (p, dr)`: each `let dx = m` is inlined at its uses (the
/// paper's first step; it may repeat linear work), then the maps are
/// eliminated with Figure 5's laws for ⊙_R.
pub fn reverse(program: &Program, def: &str) -> TResult<Program> {
    let jacs = jacobians(program, def)?;
    let mut names = Names::new(program);
    for j in &jacs {
        names.fresh(&reverse_name(&j.of));
        collect_names(&j.body, &mut |n| {
            names.fresh(n);
        });
    }
    let mut out = Program::default();
    for j in &jacs {
        let dr = names.fresh("dr");
        let body = inline_all(j.body.clone());
        let mut types = HashMap::new();
        collect_types(&j.body, &mut types);
        let mut r = Reverse {
            names: &mut names,
            types,
            def: &j.of,
        };
        let body = r.rev(&body, &var(&dr), &j.domain)?;
        out.defs.push(Def {
            name: reverse_name(&j.of),
            params: vec![Pat::Tuple(vec![j.param.clone(), Pat::var(dr)])],
            body: super::flatten(body),
            ty: None,
        });
    }
    Ok(out)
}

/// `m` with every `let dx = m1 in …` inlined at the uses of `dx`.
fn inline_all(m: LinMap) -> LinMap {
    let bx = |m: Box<LinMap>| Box::new(inline_all(*m));
    match m {
        LinMap::LetLin(x, _, v, body) => {
            let v = inline_all(*v);
            inline_all(substitute(*body, &x, &v))
        }
        LinMap::Compose(a, b) => LinMap::Compose(bx(a), bx(b)),
        LinMap::Plus(a, b) => LinMap::Plus(bx(a), bx(b)),
        LinMap::If(c, a, b) => LinMap::If(c, bx(a), bx(b)),
        // (m1 ∘ n) × (m2 ∘ n) = (m1 × m2) ∘ n: transposes n once, not twice.
        LinMap::VCat(ms) => {
            let ms: Vec<LinMap> = ms.into_iter().map(inline_all).collect();
            let right = |m: &LinMap| match m {
                LinMap::Compose(_, n) => Some((**n).clone()),
                _ => None,
            };
            match right(&ms[0]) {
                Some(n) if ms.iter().all(|m| right(m).as_ref() == Some(&n)) => {
                    let lefts = ms
                        .into_iter()
                        .map(|m| match m {
                            LinMap::Compose(a, _) => *a,
                            m => m,
                        })
                        .collect();
                    compose(LinMap::VCat(lefts), n)
                }
                _ => LinMap::VCat(ms),
            }
        }
        LinMap::HCat(ms) => LinMap::HCat(ms.into_iter().map(inline_all).collect()),
        LinMap::Let(p, e, b) => LinMap::Let(p, e, bx(b)),
        m => m,
    }
}

struct Reverse<'a> {
    names: &'a mut Names,
    types: HashMap<Name, Type>,
    def: &'a str,
}

impl Reverse<'_> {
    fn unsupported(&self, what: &str) -> TranslateError {
        TranslateError::Unsupported {
            def: self.def.to_string(),
            what: what.to_string(),
        }
    }

    fn codomain(&self, m: &LinMap) -> TResult<Type> {
        Simplifier { types: &self.types }
            .codomain(m)
            .ok_or_else(|| self.unsupported("a linear map of unknown type"))
    }

    /// `a + b` on cotangents of type `t`.
    fn add(&mut self, t: &Type, a: Expr, b: Expr) -> Expr {
        let mut a_ = Apply {
            names: self.names,
            ds: Expr::Lit(Lit::Unit),
            types: HashMap::new(),
            defs: HashMap::new(),
            def: self.def,
        };
        a_.add(t, a, b)
    }

    /// `r ⊙_R m : dom` (`r` a variable, literal or tuple of them).
    fn rev(&mut self, m: &LinMap, r: &Expr, dom: &Type) -> TResult<Expr> {
        if crate::stack::check().is_err() {
            return Err(self.unsupported("the program is nested too deeply to translate"));
        }
        Ok(match m {
            // r ⊙_R 0 = 0
            LinMap::Zero(_) => zeros(dom),
            // r ⊙_R 1 = r
            LinMap::One(_) => r.clone(),
            // r ⊙_R S(k) = k * r (as `chainMul k r`)
            LinMap::Scale(k) => rules::Code(k.clone()).chain(rules::Code(r.clone())).0,
            // r ⊙_R (m1 ∘ m2) = (r ⊙_R m1) ⊙_R m2
            LinMap::Compose(a, b) => {
                let mid = self.codomain(b)?;
                let inner = self.rev(a, r, &mid)?;
                let (mut binds, inner) = split_lets(inner);
                let atom = if is_atom(&inner) {
                    inner
                } else {
                    let t = self.names.fresh("r");
                    binds.push((Pat::var(&t), inner));
                    var(t)
                };
                let outer = self.rev(b, &atom, dom)?;
                binds
                    .into_iter()
                    .rev()
                    .fold(outer, |body, (p, e)| let_(p, e, body))
            }
            // (r1, r2) ⊙_R (m1 × m2) = (r1 ⊙_R m1) + (r2 ⊙_R m2)
            LinMap::VCat(ms) => {
                let (bind, parts) = match r {
                    Expr::Tuple(xs) => (None, xs.clone()),
                    _ => {
                        let xs: Vec<Name> = ms.iter().map(|_| self.names.fresh("r")).collect();
                        (
                            Some(Pat::Tuple(xs.iter().map(Pat::var).collect())),
                            xs.iter().map(var).collect(),
                        )
                    }
                };
                let mut sum: Option<Expr> = None;
                for (m, x) in ms.iter().zip(&parts) {
                    if let LinMap::Zero(_) = m {
                        continue;
                    }
                    let y = self.rev(m, x, dom)?;
                    sum = Some(match sum {
                        None => y,
                        Some(s) => self.add(dom, s, y),
                    });
                }
                let sum = sum.unwrap_or_else(|| zeros(dom));
                match bind {
                    Some(p) => let_(p, r.clone(), sum),
                    None => sum,
                }
            }
            // r ⊙_R (m1 ⋈ m2) = (r ⊙_R m1, r ⊙_R m2)
            LinMap::HCat(ms) => {
                let Type::Tuple(ts) = dom else {
                    return Err(self.unsupported("a row of linear maps on a non-tuple"));
                };
                Expr::Tuple(
                    ms.iter()
                        .zip(ts)
                        .map(|(m, t)| self.rev(m, r, t))
                        .collect::<TResult<_>>()?,
                )
            }
            // r ⊙_R (m1 ⊕ m2) = (r ⊙_R m1) + (r ⊙_R m2)
            LinMap::Plus(a, b) => {
                let (x, y) = (self.rev(a, r, dom)?, self.rev(b, r, dom)?);
                self.add(dom, x, y)
            }
            LinMap::Call(g, e, _) => app(var(reverse_name(g)), vec![pair(e.clone(), r.clone())]),
            LinMap::If(c, a, b) => Expr::If(
                Box::new(c.clone()),
                Box::new(self.rev(a, r, dom)?),
                Box::new(self.rev(b, r, dom)?),
            ),
            LinMap::Let(p, e, body) => let_(p.clone(), e.clone(), self.rev(body, r, dom)?),
            LinMap::Var(_) | LinMap::LetLin(..) => {
                return Err(self.unsupported("a Jacobian variable left after inlining"));
            }
        })
    }
}

// ---------------------------------------------------------------------------
// Printing.

/// Prints the Jacobians as `def g_jac p = …` (see the module docs for the notation).
pub fn print_jacobians(jacs: &[Jacobian]) -> String {
    let mut out = String::new();
    for (i, j) in jacs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let param = crate::pretty::program::print_expr(&pat_expr(&j.param));
        let param = if param.starts_with('(') || !param.contains(' ') {
            param
        } else {
            format!("({param})")
        };
        out.push_str(&format!(
            "# {} : {} ⊸ {}\ndef {} {} =\n",
            j.name,
            crate::pretty::print_type(&j.domain),
            crate::pretty::print_type(&j.codomain),
            j.name,
            param
        ));
        block(&j.body, 1, &mut out);
    }
    out
}

/// A printed expression on one line (its layout's line breaks and indentation collapsed).
fn one_line(s: &str) -> String {
    let mut out = s.split_whitespace().collect::<Vec<_>>().join(" ");
    for (from, to) in [("( ", "("), (" )", ")")] {
        out = out.replace(from, to);
    }
    out
}

fn pat_expr(p: &Pat) -> Expr {
    match p {
        Pat::Var(x) => var(x),
        Pat::Wild => var("_"),
        Pat::Tuple(ps) => Expr::Tuple(ps.iter().map(pat_expr).collect()),
    }
}

fn indent(depth: usize) -> String {
    "  ".repeat(depth)
}

/// A block: its `let`s one a line, then its map.
fn block(m: &LinMap, depth: usize, out: &mut String) {
    let pad = indent(depth);
    match m {
        LinMap::Let(p, e, body) => {
            let e = one_line(&crate::pretty::program::print_expr(e));
            let p = crate::pretty::program::print_expr(&pat_expr(p));
            out.push_str(&format!("{pad}let {p} = {e} in\n"));
            block(body, depth, out);
        }
        LinMap::LetLin(x, _, v, body) => {
            out.push_str(&format!("{pad}let {x} = {} in\n", show(v, 0)));
            block(body, depth, out);
        }
        LinMap::If(c, a, b) if size(m) > 6 => {
            let c = crate::pretty::program::print_expr(c);
            out.push_str(&format!("{pad}if {c} then\n"));
            block(a, depth + 1, out);
            out.push_str(&format!("{pad}else\n"));
            block(b, depth + 1, out);
        }
        m => {
            let text = show(m, 0);
            let (op, parts): (&str, Vec<String>) = match m {
                LinMap::Plus(..) => {
                    let mut terms = Vec::new();
                    let mut x = m;
                    while let LinMap::Plus(a, b) = x {
                        terms.push(show(b, 4));
                        x = a;
                    }
                    terms.push(show(x, 4));
                    terms.reverse();
                    ("⊕", terms)
                }
                LinMap::VCat(ms) => ("×", ms.iter().map(|m| show(m, 4)).collect()),
                LinMap::HCat(ms) => ("⋈", ms.iter().map(|m| show(m, 4)).collect()),
                _ => ("", Vec::new()),
            };
            if pad.len() + text.chars().count() <= 80 || parts.is_empty() {
                out.push_str(&format!("{pad}{text}\n"));
            } else {
                for (i, p) in parts.iter().enumerate() {
                    let lead = if i == 0 {
                        "  ".to_string()
                    } else {
                        format!("{op} ")
                    };
                    out.push_str(&format!("{pad}{lead}{p}\n"));
                }
            }
        }
    }
}

/// `m` printed; in parentheses unless it binds at least as tightly as
/// `outer` (atoms 4, ∘ 3, × and ⋈ 2, ⊕ 1, `if` and `let` 0). Operands of the
/// operators are parenthesized unless atoms, except along a left-nested chain
/// of ∘ or of ⊕.
fn show(m: &LinMap, outer: u8) -> String {
    let primal = |e: &Expr| one_line(&crate::pretty::program::print_expr(e));
    let (level, text) = match m {
        LinMap::Zero(_) => (4, "0".to_string()),
        LinMap::One(_) => (4, "1".to_string()),
        LinMap::Scale(k) => (4, format!("S({})", primal(k))),
        LinMap::Var(x) => (4, x.clone()),
        LinMap::Call(g, e, _) => {
            let arg = primal(e);
            let arg = if is_atom(e) || arg.starts_with('(') {
                arg
            } else {
                format!("({arg})")
            };
            (4, format!("{} {arg}", jacobian_name(g)))
        }
        LinMap::Compose(a, b) => {
            let left = match **a {
                LinMap::Compose(..) => show(a, 0),
                _ => show(a, 4),
            };
            (3, format!("{left} ∘ {}", show(b, 4)))
        }
        LinMap::Plus(a, b) => {
            let left = match **a {
                LinMap::Plus(..) => show(a, 0),
                _ => show(a, 4),
            };
            (1, format!("{left} ⊕ {}", show(b, 4)))
        }
        LinMap::VCat(ms) => (
            2,
            ms.iter()
                .map(|m| show(m, 4))
                .collect::<Vec<_>>()
                .join(" × "),
        ),
        LinMap::HCat(ms) => (
            2,
            ms.iter()
                .map(|m| show(m, 4))
                .collect::<Vec<_>>()
                .join(" ⋈ "),
        ),
        LinMap::If(c, a, b) => (
            0,
            format!("if {} then {} else {}", primal(c), show(a, 0), show(b, 0)),
        ),
        LinMap::Let(..) | LinMap::LetLin(..) => {
            let mut s = String::new();
            block(m, 0, &mut s);
            (0, s.trim_end().replace('\n', " "))
        }
    };
    if level < outer {
        format!("({text})")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simp(m: LinMap) -> LinMap {
        simplify(m)
    }

    fn s(x: &str) -> LinMap {
        LinMap::Scale(var(x))
    }

    fn r() -> Type {
        Type::Real
    }

    #[test]
    fn zero_and_one_absorb() {
        let m = compose(LinMap::One(r()), compose(s("k"), LinMap::Zero(r())));
        assert_eq!(simp(m), LinMap::Zero(r()));
        assert_eq!(simp(plus(LinMap::Zero(r()), s("k"))), s("k"));
    }

    #[test]
    fn a_row_after_a_column_is_a_sum_and_scales_fold() {
        // (S(a) ⋈ S(b)) ∘ (S(c) × S(d)) = S(a * c + b * d), the products the
        // chain rule's (`chainMul`)
        let m = compose(
            LinMap::HCat(vec![s("a"), s("b")]),
            LinMap::VCat(vec![s("c"), s("d")]),
        );
        let k = real_op(
            Prim::Add,
            vec![
                prim(Prim::Chain, vec![var("a"), var("c")]),
                prim(Prim::Chain, vec![var("b"), var("d")]),
            ],
        );
        assert_eq!(simp(m), LinMap::Scale(k));
    }

    #[test]
    fn a_projection_picks_its_component() {
        // (1 ⋈ 0) ∘ (m1 × m2) = m1
        let m = compose(
            projection(&[r(), r()], 0),
            LinMap::VCat(vec![s("a"), s("b")]),
        );
        assert_eq!(simp(m), s("a"));
        // (π1 ∘ n) × (π2 ∘ n) = n
        let n = LinMap::Var("dp".into());
        let pair = Type::Tuple(vec![r(), r()]);
        let m = LinMap::LetLin(
            "dp".into(),
            pair,
            Box::new(LinMap::Call(
                "h".into(),
                var("x"),
                Type::Tuple(vec![r(), r()]),
            )),
            Box::new(LinMap::VCat(vec![
                compose(projection(&[r(), r()], 0), n.clone()),
                compose(projection(&[r(), r()], 1), n),
            ])),
        );
        assert_eq!(
            simp(m),
            LinMap::Call("h".into(), var("x"), Type::Tuple(vec![r(), r()]))
        );
    }

    #[test]
    fn a_map_is_not_copied_when_that_would_repeat_work() {
        // (m1 × m2) ∘ S(cos x): the scale is not an atom, so it stays shared.
        let cos = LinMap::Scale(prim(Prim::Cos, vec![var("x")]));
        let m = compose(LinMap::VCat(vec![s("a"), s("b")]), cos);
        assert!(matches!(simp(m), LinMap::Compose(..)));
    }
}
