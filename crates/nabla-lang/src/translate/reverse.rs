//! Reverse mode: the monadic translation D← of Krawiec et al. Figure 9, and
//! its wrapper R for any first-order `S -> T` (Figure 16). The run-time half —
//! the `Delta` type, `deltaLet`, `runDelta` and `eval` of Figure 11 — is in
//! `crate::eval::delta`.
//!
//! Types: `Real ↦ (Real, Delta)` and `A -> B ↦ D←{A} -> M D←{B}`
//! ([`super::types::translate_type`]). Terms: Moggi's call-by-value monadic
//! translation — every subexpression becomes a computation, sequenced with
//! `do` — except at reals: a literal is `pure (r, Zero)`, and a real primitive
//! binds a fresh Delta id to the linear combination of its operands' Deltas
//! weighted by the partials (`deltaLet (Add (Scale y u1) (Scale x u2))` for
//! `x * y`), so every Delta a dual number carries is `Zero` or `Var id` and the
//! Delta structure keeps the program's sharing (§5.3).
//!
//! Sharing is the whole point: without `deltaLet`, the Delta of
//! `x1 = x + x; x2 = x1 + x1; …` would be the tree `Add (Add …) (Add …)` whose
//! size — and evaluation time — doubles with each step (§5.2; the test
//! `reverse_sharing` shows it). With it, the translation of a program that does
//! n operations records O(n) Delta bindings and `eval` visits each once
//! (Theorem 5).
//!
//! Administrative simplifications, all instances of the monad laws, keep the
//! output close to the figure's intent: `do { p <- pure e; rest }` is printed
//! `let p = e in rest`, and operands that are already values are used directly.
//! As in forward mode, a literal operand's Delta is statically `Zero` and
//! contributes no term.

use super::{GlobalKind, Globals, Names, Operand, Part, Scope, TResult, rules};
use crate::core::named::*;
use crate::prim::{Prim, RealFn, Selection};
use crate::types::Type;

/// A statement of a `do` block under construction.
enum Stmt {
    /// `p <- m`
    Bind(Pat, Expr),
    /// `let p = e`
    Let(Pat, Expr),
}

/// Folds statements and a final computation into nested `do`/`let`, applying
/// the left-identity law `do { p <- pure e; rest } = let p = e in rest`.
fn block(stmts: Vec<Stmt>, last: Expr) -> Expr {
    stmts.into_iter().rev().fold(last, |rest, s| match s {
        Stmt::Bind(p, m) => match m {
            Expr::Prim(ref q, ref a) if q.prim == Prim::Pure => let_(p, a[0].clone(), rest),
            m => bind(p, m, rest),
        },
        Stmt::Let(p, e) => let_(p, e, rest),
    })
}

/// `pure e`
pub fn pure(e: Expr) -> Expr {
    prim(Prim::Pure, vec![e])
}

/// The value inside `pure v` if `m` is one and `v` is a variable or literal.
fn pure_atom(m: &Expr) -> Option<Expr> {
    match m {
        Expr::Prim(p, a) if p.prim == Prim::Pure => match &a[0] {
            Expr::Var(_) | Expr::Lit(_) => Some(a[0].clone()),
            _ => None,
        },
        _ => None,
    }
}

/// `def g_rev p = D←{body}` (a function), or `def c_rev () = D←{body}` (a value:
/// a computation must run each time it is used, so it becomes a function of `()`).
pub fn translate_def(d: &Def, globals: &Globals, names: &mut Names) -> TResult<Def> {
    let name = globals[&d.name].0.clone();
    let mut t = Reverse {
        scope: Scope::new(d, globals, names),
    };
    if d.params.is_empty() {
        return Ok(Def {
            name,
            params: vec![Pat::Tuple(vec![])],
            body: t.expr(&d.body)?,
            ty: None,
        });
    }
    let body = t.expr(&d.body)?;
    Ok(Def {
        name,
        params: vec![d.params[0].clone()],
        body: curry(&d.params[1..], body),
        ty: None,
    })
}

/// D←{λp1 … pn. e} past its first parameter: `pure (fun p2 -> … pure (fun pn -> D←{e}))`.
fn curry(params: &[Pat], body: Expr) -> Expr {
    params
        .iter()
        .rev()
        .fold(body, |b, p| pure(lam(vec![p.clone()], b)))
}

/// The source-level function `λ(s, dt). f s ⊙_T dt` that Figure 16 translates:
/// `def f_dot (s, dt) = let y = f s in <y ⊙ dt>`, the dot product written out
/// for the type T.
pub fn dot_def(f: &str, t: &Type, names: &mut Names) -> Def {
    let (s, dt, y) = (names.fresh("s"), names.fresh("dt"), names.fresh("y"));
    let body = let_(
        Pat::var(&y),
        app(var(f), vec![var(&s)]),
        dot(t, &y, &dt, names),
    );
    Def {
        name: format!("{f}_dot"),
        params: vec![Pat::pair(s, dt)],
        body,
        ty: None,
    }
}

/// `y ⊙_T d` for variables `y`, `d` of type T (Fig. 1): the sum of the
/// products of corresponding reals; `shapeMismatch` where constructors differ.
fn dot(t: &Type, y: &str, d: &str, names: &mut Names) -> Expr {
    let sum = |terms: Vec<Expr>| {
        terms
            .into_iter()
            .reduce(|a, b| real_op(Prim::Add, vec![a, b]))
            .unwrap_or_else(|| real(0.0))
    };
    match t {
        Type::Real => real_op(Prim::Mul, vec![var(y), var(d)]),
        Type::Tuple(ts) => {
            let ys: Vec<Name> = ts.iter().map(|_| names.fresh(y)).collect();
            let ds: Vec<Name> = ts.iter().map(|_| names.fresh(d)).collect();
            let terms: Vec<Expr> = ts
                .iter()
                .zip(ys.iter().zip(&ds))
                .map(|(t, (yi, di))| dot(t, yi, di, names))
                .filter(|e| *e != real(0.0))
                .collect();
            if terms.is_empty() {
                return real(0.0);
            }
            let pattern = |xs: &[Name]| Pat::Tuple(xs.iter().map(Pat::var).collect());
            let_(pattern(&ys), var(y), let_(pattern(&ds), var(d), sum(terms)))
        }
        Type::Vec(a) => {
            let (ya, da) = (names.fresh(&format!("{y}i")), names.fresh(&format!("{d}i")));
            let per_element = lam(vec![Pat::pair(&ya, &da)], dot(a, &ya, &da, names));
            Expr::Prim(
                PrimAt::at(Prim::Sum, Type::Real),
                vec![prim(
                    Prim::Map,
                    vec![per_element, prim(Prim::Zip, vec![var(y), var(d)])],
                )],
            )
        }
        Type::Sum(a, b) => {
            let (ya, yb, da, db) = (
                names.fresh(&format!("{y}l")),
                names.fresh(&format!("{y}r")),
                names.fresh(&format!("{d}l")),
                names.fresh(&format!("{d}r")),
            );
            let mismatch = || prim(Prim::ShapeMismatch, vec![]);
            let inner = |this: Expr, other: Expr, left: bool| Expr::Case {
                scrutinee: Box::new(var(d)),
                left: (
                    Pat::var(&da),
                    Box::new(if left { this.clone() } else { other.clone() }),
                ),
                right: (Pat::var(&db), Box::new(if left { other } else { this })),
            };
            let on_left = inner(dot(a, &ya, &da, names), mismatch(), true);
            let on_right = inner(dot(b, &yb, &db, names), mismatch(), false);
            Expr::Case {
                scrutinee: Box::new(var(y)),
                left: (Pat::var(ya), Box::new(on_left)),
                right: (Pat::var(yb), Box::new(on_right)),
            }
        }
        Type::Record(..) => dot(&t.without_records(), y, d, names),
        Type::Int | Type::Bool | Type::Unit | Type::Var(_) | Type::Fun(..) | Type::Con(..) => {
            real(0.0)
        }
    }
}

/// Figure 16's reverse wrapper for `f : S -> T`:
///
/// ```text
/// def f_vjp (s, dt) =
///   let (s0, next) = initVars @S (s, 0) in
///   let dt0 = initZeros @T dt in
///   let (_, u) = runDelta next (f_dot_rev (s0, dt0)) in
///   let finalMap = eval 1.0 u emptyMap in
///   lookupDual @S (finalMap, s0)
/// ```
pub fn wrapper(f: &str, dot_rev: &str, s: &Type, t: &Type, names: &mut Names) -> Def {
    let [x, dt, s0, next, dt0, u, final_map] =
        ["s", "dt", "s0", "next", "dt0", "u", "finalMap"].map(|n| names.fresh(n));
    let body = let_(
        Pat::pair(&s0, &next),
        app(
            Expr::Poly(Poly::InitVars, s.clone()),
            vec![pair(var(&x), int(0))],
        ),
        let_(
            Pat::var(&dt0),
            app(Expr::Poly(Poly::InitZeros, t.clone()), vec![var(&dt)]),
            let_(
                Pat::Tuple(vec![Pat::Wild, Pat::var(&u)]),
                Expr::RunDelta(
                    Box::new(var(&next)),
                    Box::new(app(var(dot_rev), vec![pair(var(&s0), var(&dt0))])),
                ),
                let_(
                    Pat::var(&final_map),
                    prim(
                        Prim::EvalDelta,
                        vec![real(1.0), var(&u), prim(Prim::EmptyMap, vec![])],
                    ),
                    app(
                        Expr::Poly(Poly::LookupDual, s.clone()),
                        vec![pair(var(&final_map), var(&s0))],
                    ),
                ),
            ),
        ),
    );
    Def {
        name: format!("{f}_vjp"),
        params: vec![Pat::pair(x, dt)],
        body,
        ty: None,
    }
}

struct Reverse<'a> {
    scope: Scope<'a>,
}

impl Reverse<'_> {
    fn under(&mut self, pats: &[&Pat], body: &Expr) -> TResult<Expr> {
        let mark = self.scope.bind(pats);
        let r = self.expr(body);
        self.scope.unbind(mark);
        r
    }

    /// Runs the computation `m` for its value: the value itself if `m` is
    /// `pure` of a variable or literal, else a fresh name bound by `x <- m`.
    fn value_of(&mut self, m: Expr, base: &str, stmts: &mut Vec<Stmt>) -> Expr {
        if let Some(v) = pure_atom(&m) {
            return v;
        }
        let x = self.scope.names.fresh(base);
        stmts.push(Stmt::Bind(Pat::var(&x), m));
        var(x)
    }

    /// The values of the translations of `xs`, in order.
    fn values_of(&mut self, xs: &[Expr], stmts: &mut Vec<Stmt>) -> TResult<Vec<Expr>> {
        let mut out = Vec::with_capacity(xs.len());
        for x in xs {
            let base = if let Expr::Lam(..) = x { "f" } else { "a" };
            let m = self.expr(x)?;
            out.push(self.value_of(m, base, stmts));
        }
        Ok(out)
    }

    /// D←{e}: a computation of type M D←{A} for `e : A`.
    fn expr(&mut self, e: &Expr) -> TResult<Expr> {
        self.scope.check_depth()?;
        let mut stmts = Vec::new();
        let last = match e {
            // D←{x} = pure x
            Expr::Var(x) => match self.scope.global(x) {
                Some((g, GlobalKind::Function)) => pure(var(g)),
                Some((g, GlobalKind::Value)) => app(var(g), vec![Expr::Lit(Lit::Unit)]),
                _ => pure(e.clone()),
            },
            // D←{r} = pure (r, Zero)
            Expr::Lit(Lit::Real(r)) => pure(pair(real(*r), prim(Prim::DZero, vec![]))),
            Expr::Lit(_) => pure(e.clone()),
            // D←{λx. e} = pure (λx. D←{e})
            Expr::Lam(ps, b) => {
                let body = self.under(&ps.iter().collect::<Vec<_>>(), b)?;
                pure(lam(vec![ps[0].clone()], curry(&ps[1..], body)))
            }
            // D←{f a} = do { g <- D←{f}; x <- D←{a}; g x }
            Expr::App(f, xs) => {
                let m = self.expr(f)?;
                let mut g = self.value_of(m, "f", &mut stmts);
                let args = self.values_of(xs, &mut stmts)?;
                let mut call = None;
                for a in args {
                    // Curried: each application but the last yields a function.
                    if let Some(c) = call.take() {
                        let r = self.scope.names.fresh("g");
                        stmts.push(Stmt::Bind(Pat::var(&r), c));
                        g = var(r);
                    }
                    call = Some(app(g.clone(), vec![a]));
                }
                call.unwrap_or_else(|| pure(g))
            }
            // D←{let p = e1 in e2} = do { p <- D←{e1}; D←{e2} }
            Expr::Let(p, v, b) => {
                let m = self.expr(v)?;
                stmts.push(Stmt::Bind(p.clone(), m));
                self.under(&[p], b)?
            }
            Expr::LetRec {
                name,
                params,
                value,
                body,
            } => {
                let me = Pat::Var(name.clone());
                let scope = rec_scope(&me, params);
                let value = self.under(&scope, value)?;
                Expr::LetRec {
                    name: name.clone(),
                    params: vec![params[0].clone()],
                    value: Box::new(curry(&params[1..], value)),
                    body: Box::new(self.under(&[&me], body)?),
                }
            }
            Expr::Tuple(xs) => pure(Expr::Tuple(self.values_of(xs, &mut stmts)?)),
            Expr::Vector(xs) => pure(Expr::Vector(self.values_of(xs, &mut stmts)?)),
            Expr::Proj {
                tuple,
                index,
                arity,
            } => {
                let m = self.expr(tuple)?;
                let t = self.value_of(m, "t", &mut stmts);
                pure(Expr::Proj {
                    tuple: Box::new(t),
                    index: *index,
                    arity: *arity,
                })
            }
            Expr::Inl(x) => pure(Expr::Inl(Box::new(
                self.values_of(std::slice::from_ref(x), &mut stmts)?
                    .remove(0),
            ))),
            Expr::Inr(x) => pure(Expr::Inr(Box::new(
                self.values_of(std::slice::from_ref(x), &mut stmts)?
                    .remove(0),
            ))),
            // D←{case e of …} = do { x <- D←{e}; case x of inl x1 -> D←{e1}, inr x2 -> D←{e2} }
            Expr::Case {
                scrutinee,
                left,
                right,
            } => {
                let m = self.expr(scrutinee)?;
                let s = self.value_of(m, "s", &mut stmts);
                Expr::Case {
                    scrutinee: Box::new(s),
                    left: (left.0.clone(), Box::new(self.under(&[&left.0], &left.1)?)),
                    right: (
                        right.0.clone(),
                        Box::new(self.under(&[&right.0], &right.1)?),
                    ),
                }
            }
            Expr::If(c, a, b) => {
                let m = self.expr(c)?;
                let c = self.value_of(m, "c", &mut stmts);
                Expr::If(
                    Box::new(c),
                    Box::new(self.expr(a)?),
                    Box::new(self.expr(b)?),
                )
            }
            Expr::Prim(p, args) => self.prim(p, args, &mut stmts)?,
            // A primitive used as a value: translate the lambda `fun a … -> p a …`.
            Expr::PrimRef(p) => {
                self.scope.check_derivative(p)?;
                let params: Vec<Name> = (0..p.prim.info().arity)
                    .map(|_| self.scope.names.fresh("a"))
                    .collect();
                if params.is_empty() {
                    return self.expr(&Expr::Prim(p.clone(), vec![]));
                }
                let f = lam(
                    params.iter().map(Pat::var).collect(),
                    Expr::Prim(p.clone(), params.iter().map(var).collect()),
                );
                self.expr(&f)?
            }
            Expr::Bind(..) | Expr::RunDelta(..) | Expr::Poly(..) => {
                return Err(self
                    .scope
                    .unsupported("the program is already a translation"));
            }
        };
        Ok(block(stmts, last))
    }

    /// D← of a saturated primitive call; statements go to `stmts`, the final
    /// computation is returned.
    fn prim(&mut self, p: &PrimAt, args: &[Expr], stmts: &mut Vec<Stmt>) -> TResult<Expr> {
        self.scope.check_derivative(p)?;
        let on_reals = p.at.is_none() || p.on_reals();
        Ok(match (p.prim.info().real, p.prim) {
            (Some(RealFn::Select(sel)), _) => {
                let v = self.values_of(args, stmts)?;
                let fst = |e: &Expr| Expr::Proj {
                    tuple: Box::new(e.clone()),
                    index: 0,
                    arity: 2,
                };
                let cmp = match sel {
                    Selection::Min => Prim::Lt,
                    Selection::Max => Prim::Gt,
                };
                pure(Expr::If(
                    Box::new(real_op(cmp, vec![fst(&v[1]), fst(&v[0])])),
                    Box::new(v[1].clone()),
                    Box::new(v[0].clone()),
                ))
            }
            (Some(f), _) if on_reals => self.real_function(f, p, args, stmts)?,
            // Comparisons, and `to_int` (an Int has no adjoint), see primals only.
            (
                None,
                Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne | Prim::ToInt,
            ) if p.on_reals() || p.prim == Prim::ToInt => {
                let mut primals = Vec::new();
                for a in args {
                    primals.push(match a {
                        Expr::Lit(Lit::Real(_)) => a.clone(),
                        _ => {
                            let m = self.expr(a)?;
                            let v = self.value_of(m, "a", stmts);
                            Expr::Proj {
                                tuple: Box::new(v),
                                index: 0,
                                arity: 2,
                            }
                        }
                    });
                }
                pure(Expr::Prim(p.clone(), primals))
            }
            (None, Prim::ToReal) => {
                let n = self.values_of(args, stmts)?;
                pure(pair(Expr::Prim(p.clone(), n), prim(Prim::DZero, vec![])))
            }
            // sum of reals = a fold of the translated `+`
            (None, Prim::Sum) if p.on_reals() => {
                let v = self.values_of(args, stmts)?.remove(0);
                let (acc, x) = (self.scope.names.fresh("acc"), self.scope.names.fresh("x"));
                let mark = self.scope.bind(&[&Pat::var(&acc), &Pat::var(&x)]);
                let add = self.expr(&real_op(Prim::Add, vec![var(&acc), var(&x)]));
                self.scope.unbind(mark);
                let step = lam(vec![Pat::var(&acc)], pure(lam(vec![Pat::var(&x)], add?)));
                let zero = pair(real(0.0), prim(Prim::DZero, vec![]));
                prim(Prim::FoldM, vec![step, zero, v])
            }
            // The higher-order primitives take translated functions, which
            // return computations: their monadic versions run them in order.
            (None, Prim::Map | Prim::Build | Prim::Fold) => {
                let monadic = match p.prim {
                    Prim::Map => Prim::MapM,
                    Prim::Build => Prim::BuildM,
                    _ => Prim::FoldM,
                };
                prim(monadic, self.values_of(args, stmts)?)
            }
            _ => pure(Expr::Prim(p.clone(), self.values_of(args, stmts)?)),
        })
    }

    /// Figure 9 and 14: D←{f(e1, …, en)} =
    /// `do { (x1, u1) <- D←{e1}; …; u <- deltaLet (Add (Scale ∂1f u1) …); pure (f(x1, …), Var u) }`
    fn real_function(
        &mut self,
        f: RealFn,
        p: &PrimAt,
        args: &[Expr],
        stmts: &mut Vec<Stmt>,
    ) -> TResult<Expr> {
        let operands = self.take_apart(args, stmts)?;
        let primals: Vec<Expr> = operands.iter().map(|o| o.primal.clone()).collect();
        let value = Expr::Prim(p.clone(), primals.clone());
        let v = self.scope.names.fresh("v");
        let partials = rules::partials(f, &primals, &var(&v));
        let mut delta: Option<Expr> = None;
        for (o, d) in operands.iter().zip(partials) {
            let (Some(u), false) = (&o.tangent, d == real(0.0)) else {
                continue;
            };
            let term = if d == real(1.0) {
                u.clone()
            } else {
                prim(Prim::DScale, vec![d, u.clone()])
            };
            delta = Some(match delta {
                None => term,
                Some(acc) => prim(Prim::DAdd, vec![acc, term]),
            });
        }
        let Some(delta) = delta else {
            // No operand is perturbed: a constant.
            return Ok(pure(pair(value, prim(Prim::DZero, vec![]))));
        };
        let value = if delta.mentions(&v) {
            stmts.push(Stmt::Let(Pat::var(&v), value));
            var(&v)
        } else {
            value
        };
        let u = self.scope.names.fresh("u");
        stmts.push(Stmt::Bind(Pat::var(&u), prim(Prim::DeltaLet, vec![delta])));
        Ok(pure(pair(value, prim(Prim::DVar, vec![var(u)]))))
    }

    /// Takes real operands apart (see [`super::take_apart`]): compound
    /// operands and definitions are computations, bound with `<-`; local
    /// variables are taken apart with `let`.
    fn take_apart(&mut self, args: &[Expr], stmts: &mut Vec<Stmt>) -> TResult<Vec<Operand>> {
        let (parts, operands) =
            super::take_apart(&mut self.scope, args, "u", |s, x| s.global(x).is_none());
        for (pat, part) in parts {
            stmts.push(match part {
                Part::Arg(i) => Stmt::Bind(pat, self.expr(&args[i])?),
                Part::Var(x) => Stmt::Let(pat, var(x)),
            });
        }
        Ok(operands)
    }
}
