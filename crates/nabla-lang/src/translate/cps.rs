//! Reverse mode in continuation-passing style: Wang et al. (ICFP 2019)
//! Figure 10/11, with shift/reset moved into the translator (the
//! "meta-language"), so the output is plain CPS code with mutable gradient
//! cells and no control operators.
//!
//! Types: `Real ↦ (Real, Ref Real)` (a value and its gradient cell), and
//! `A -> B ↦ D{A} -> (D{B} -> ()) -> ()`. The translation of `e` is given a
//! *static* continuation κ — a function in this translator standing for "the
//! rest of the program" — and applies it where the value of `e` is ready. A
//! real primitive allocates the result's cell, runs the rest of the program
//! (κ), and *then* — on the way back, once the rest has added its
//! contributions to the result's cell — adds the result's gradient times each
//! partial into its operands' cells:
//!
//! ```text
//! D{e1 * e2} κ = D{e1} (λp1. D{e2} (λp2.
//!                  let (x1, x1') = p1 in let (x2, x2') = p2 in
//!                  let v = x1 * x2 in let v' = ref 0.0 in
//!                  κ (v, v'); x1' += !v' * x2; x2' += !v' * x1))
//! ```
//!
//! (`e; e'` is printed `let () = e in e'`.) A continuation that is already a
//! target-language function `k` is passed as `k` rather than `fun a -> k a`
//! (the "wavy" normalisation of Fig. 10), which keeps calls in tail position;
//! at a branch, the continuation is bound to a name once (`let k = fun a -> …`)
//! so the rest of the program is not duplicated into both arms.
//!
//! Like the paper's, this translation has no rules for the vector primitives
//! that take functions (`map`, `fold`, `build`) nor for `sum` of reals; a
//! program using them is refused with a message saying so.

use super::{GlobalKind, Globals, Names, Scope, TResult, rules};
use crate::core::named::*;
use crate::prim::{Prim, RealFn, Selection};
use crate::types::Type;
use nabla::Number;
use std::collections::HashMap;

/// A continuation: a target-language function value, or the rest of the
/// program still to be generated.
enum Kont<'a> {
    /// `k`: apply it.
    Dynamic(Expr),
    /// κ: call it with the value.
    Static(RestOfProgram<'a>),
}

/// The rest of the program, still to be generated once a value is known.
type RestOfProgram<'a> = Box<dyn FnOnce(&mut Cps, Expr) -> TResult<Expr> + 'a>;

/// A continuation awaiting several values.
type ValuesKont<'a> = Box<dyn FnOnce(&mut Cps, Vec<Expr>) -> TResult<Expr> + 'a>;

fn kont<'a>(f: impl FnOnce(&mut Cps, Expr) -> TResult<Expr> + 'a) -> Kont<'a> {
    Kont::Static(Box::new(f))
}

/// `e1; e2`
fn seq(e1: Expr, e2: Expr) -> Expr {
    let_(Pat::Tuple(vec![]), e1, e2)
}

/// `def g_cps p k = D{body} k`; a value `def c = e` becomes `def c_cps k = D{e} k`.
pub fn translate_def(d: &Def, globals: &Globals, names: &mut Names) -> TResult<Def> {
    let name = globals[&d.name].0.clone();
    let mut t = Cps {
        scope: Scope::new(d, globals, names),
    };
    let k = t.scope.names.fresh("k");
    if d.params.is_empty() {
        let body = t.expr(&d.body, Kont::Dynamic(var(&k)))?;
        return Ok(Def {
            name,
            params: vec![Pat::var(k)],
            body,
            ty: None,
        });
    }
    let body = t.function_body(&d.params[1..], &d.body, k.clone())?;
    Ok(Def {
        name,
        params: vec![d.params[0].clone(), Pat::var(k)],
        body,
        ty: None,
    })
}

/// The CPS wrapper (Wang et al.'s `Transform`, for any first-order `S -> T`
/// as in Krawiec et al. Fig. 16):
///
/// ```text
/// def f_vjp (s, dt) =
///   let s0 = newCells @S s in
///   let dt0 = newCells @T dt in
///   let () = f_dot_cps (s0, dt0) (fun r -> snd r += 1.0) in
///   readCells @S s0
/// ```
pub fn wrapper(f: &str, dot_cps: &str, s: &Type, t: &Type, names: &mut Names) -> Def {
    let [x, dt, s0, dt0, r] = ["s", "dt", "s0", "dt0", "r"].map(|n| names.fresh(n));
    let seed = lam(
        vec![Pat::var(&r)],
        prim(
            Prim::AddTo,
            vec![
                Expr::Proj {
                    tuple: Box::new(var(&r)),
                    index: 1,
                    arity: 2,
                },
                real(1.0),
            ],
        ),
    );
    let run = app(var(dot_cps), vec![pair(var(&s0), var(&dt0)), seed]);
    let body = let_(
        Pat::var(&s0),
        app(Expr::Poly(Poly::NewCells, s.clone()), vec![var(&x)]),
        let_(
            Pat::var(&dt0),
            app(Expr::Poly(Poly::NewCells, t.clone()), vec![var(&dt)]),
            seq(
                run,
                app(Expr::Poly(Poly::ReadCells, s.clone()), vec![var(&s0)]),
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

struct Cps<'a> {
    scope: Scope<'a>,
}

/// True for expressions a continuation may receive and use without binding:
/// variables, literals, and tuples of those.
fn trivial(e: &Expr) -> bool {
    match e {
        Expr::Var(_) | Expr::Lit(_) => true,
        Expr::Tuple(xs) => xs.iter().all(|x| matches!(x, Expr::Var(_) | Expr::Lit(_))),
        _ => false,
    }
}

impl Cps<'_> {
    /// Applies continuation `k` to the value `v`.
    fn resume(&mut self, k: Kont<'_>, v: Expr) -> TResult<Expr> {
        match k {
            Kont::Dynamic(f) => Ok(app(f, vec![v])),
            Kont::Static(f) => f(self, v),
        }
    }

    /// Passes the value `v` on, first binding it to a fresh name unless it is trivial.
    fn give(&mut self, v: Expr, base: &str, k: Kont<'_>) -> TResult<Expr> {
        if trivial(&v) {
            return self.resume(k, v);
        }
        let x = self.scope.names.fresh(base);
        let rest = self.resume(k, var(&x))?;
        Ok(let_(Pat::var(x), v, rest))
    }

    /// `k` as a target-language function: itself if dynamic, else `fun a -> κ a`.
    fn reify(&mut self, k: Kont<'_>) -> TResult<Expr> {
        match k {
            Kont::Dynamic(f) => Ok(f),
            Kont::Static(f) => {
                let a = self.scope.names.fresh("a");
                let body = f(self, var(&a))?;
                Ok(lam(vec![Pat::var(a)], body))
            }
        }
    }

    /// The body of a function of parameters `(p1,) rest…` whose continuation is `k`:
    /// `D{e} k`, curried as `k (fun p2 k2 -> …)` for each further parameter.
    fn function_body(&mut self, rest: &[Pat], body: &Expr, k: Name) -> TResult<Expr> {
        let Some((p, more)) = rest.split_first() else {
            return self.expr(body, Kont::Dynamic(var(k)));
        };
        let k2 = self.scope.names.fresh("k");
        let inner = self.function_body(more, body, k2.clone())?;
        Ok(app(var(k), vec![lam(vec![p.clone(), Pat::var(k2)], inner)]))
    }

    fn with_locals<T>(&mut self, pats: &[&Pat], f: impl FnOnce(&mut Self) -> T) -> T {
        let mark = self.scope.bind(pats);
        let r = f(self);
        self.scope.unbind(mark);
        r
    }

    /// D{e} κ
    fn expr(&mut self, e: &Expr, k: Kont<'_>) -> TResult<Expr> {
        self.scope.check_depth()?;
        match e {
            Expr::Var(x) => match self.scope.global(x).cloned() {
                Some((g, GlobalKind::Function)) => self.resume(k, var(g)),
                Some((g, GlobalKind::Value)) => {
                    let k = self.reify(k)?;
                    Ok(app(var(g), vec![k]))
                }
                _ => self.resume(k, e.clone()),
            },
            // D{r} κ = κ (r, ref 0)
            Expr::Lit(Lit::Real(r)) => {
                let cell = prim(Prim::NewRef, vec![real(0.0)]);
                self.give(pair(real(*r), cell), "c", k)
            }
            Expr::Lit(_) => self.resume(k, e.clone()),
            // D{λy. e} κ = κ (λy. λk. D{e} k)
            Expr::Lam(ps, b) => {
                let k2 = self.scope.names.fresh("k");
                let body = self.with_locals(&ps.iter().collect::<Vec<_>>(), |s| {
                    s.function_body(&ps[1..], b, k2.clone())
                })?;
                self.give(lam(vec![ps[0].clone(), Pat::var(k2)], body), "f", k)
            }
            // D{e1 e2} κ = D{e1} (λm. D{e2} (λn. m n (λa. κ a)))
            Expr::App(f, xs) => {
                let xs = xs.clone();
                self.expr(f, kont(move |s, m| s.apply(m, xs, k)))
            }
            // D{let y = e1 in e2} κ = D{e1} (λy1. let y = y1 in D{e2} κ)
            Expr::Let(p, v, b) => {
                let (p, b) = (p.clone(), (**b).clone());
                self.expr(
                    v,
                    kont(move |s, v| {
                        let rest = s.with_locals(&[&p], |s| s.expr(&b, k))?;
                        Ok(match (&p, &v) {
                            (Pat::Var(x), Expr::Var(y)) if x == y => rest,
                            _ => let_(p.clone(), v, rest),
                        })
                    }),
                )
            }
            Expr::LetRec {
                name,
                params,
                value,
                body,
            } => {
                let me = Pat::Var(name.clone());
                let k2 = self.scope.names.fresh("k");
                let scope = rec_scope(&me, params);
                let f =
                    self.with_locals(&scope, |s| s.function_body(&params[1..], value, k2.clone()))?;
                let rest = self.with_locals(&[&me], |s| s.expr(body, k))?;
                Ok(Expr::LetRec {
                    name: name.clone(),
                    params: vec![params[0].clone(), Pat::var(k2)],
                    value: Box::new(f),
                    body: Box::new(rest),
                })
            }
            Expr::Tuple(xs) => self.values(
                xs.clone(),
                Vec::new(),
                Box::new(move |s, vs| s.give(Expr::Tuple(vs), "t", k)),
            ),
            Expr::Vector(xs) => self.values(
                xs.clone(),
                Vec::new(),
                Box::new(move |s, vs| s.give(Expr::Vector(vs), "v", k)),
            ),
            Expr::Proj {
                tuple,
                index,
                arity,
            } => {
                let (index, arity) = (*index, *arity);
                self.expr(
                    tuple,
                    kont(move |s, t| {
                        let part = match t {
                            Expr::Tuple(mut xs) => xs.swap_remove(index as usize),
                            t => Expr::Proj {
                                tuple: Box::new(t),
                                index,
                                arity,
                            },
                        };
                        s.give(part, "p", k)
                    }),
                )
            }
            Expr::Inl(x) => self.expr(x, kont(move |s, v| s.give(Expr::Inl(Box::new(v)), "l", k))),
            Expr::Inr(x) => self.expr(x, kont(move |s, v| s.give(Expr::Inr(Box::new(v)), "r", k))),
            // D{case e of …} κ = let k = λa. κ a in D{e} (λv. case v of y1 => D{e1} k …)
            Expr::Case {
                scrutinee,
                left,
                right,
            } => {
                let (left, right) = (left.clone(), right.clone());
                self.branch(k, move |s, join| {
                    s.expr(
                        scrutinee,
                        kont(move |s, v| {
                            let l = s.with_locals(&[&left.0], |s| {
                                s.expr(&left.1, Kont::Dynamic(join.clone()))
                            })?;
                            let r = s.with_locals(&[&right.0], |s| {
                                s.expr(&right.1, Kont::Dynamic(join))
                            })?;
                            Ok(Expr::Case {
                                scrutinee: Box::new(v),
                                left: (left.0, Box::new(l)),
                                right: (right.0, Box::new(r)),
                            })
                        }),
                    )
                })
            }
            Expr::If(c, a, b) => {
                let (a, b) = ((**a).clone(), (**b).clone());
                self.branch(k, move |s, join| {
                    s.expr(
                        c,
                        kont(move |s, c| {
                            let a = s.expr(&a, Kont::Dynamic(join.clone()))?;
                            let b = s.expr(&b, Kont::Dynamic(join))?;
                            Ok(Expr::If(Box::new(c), Box::new(a), Box::new(b)))
                        }),
                    )
                })
            }
            Expr::Prim(p, args) => self.prim(p, args, k),
            Expr::PrimRef(p) => {
                self.check_prim(p)?;
                let params: Vec<Name> = (0..p.prim.info().arity)
                    .map(|_| self.scope.names.fresh("a"))
                    .collect();
                if params.is_empty() {
                    return self.prim(p, &[], k);
                }
                let f = lam(
                    params.iter().map(Pat::var).collect(),
                    Expr::Prim(p.clone(), params.iter().map(var).collect()),
                );
                self.expr(&f, k)
            }
            Expr::Bind(..) | Expr::RunDelta(..) | Expr::Poly(..) => Err(self
                .scope
                .unsupported("the program is already a translation")),
        }
    }

    /// Binds the continuation to a name `k` (unless it already is one) and
    /// generates a branching expression whose arms both continue with it.
    fn branch(
        &mut self,
        k: Kont<'_>,
        arms: impl FnOnce(&mut Self, Expr) -> TResult<Expr>,
    ) -> TResult<Expr> {
        match k {
            Kont::Dynamic(j) => arms(self, j),
            k => {
                let join = self.reify(k)?;
                let name = self.scope.names.fresh("k");
                let body = arms(self, var(&name))?;
                Ok(let_(Pat::var(name), join, body))
            }
        }
    }

    /// The values of `xs`, left to right, passed to `k`.
    fn values(&mut self, xs: Vec<Expr>, done: Vec<Expr>, k: ValuesKont<'_>) -> TResult<Expr> {
        let mut rest = xs.into_iter();
        let Some(first) = rest.next() else {
            return k(self, done);
        };
        let rest: Vec<Expr> = rest.collect();
        self.expr(
            &first,
            kont(move |s, v| {
                let mut done = done;
                done.push(v);
                s.values(rest, done, k)
            }),
        )
    }

    /// `m a1 … an` with continuation `k`: `m a1 (λg. g a2 (… (λa. κ a)))`.
    fn apply(&mut self, m: Expr, xs: Vec<Expr>, k: Kont<'_>) -> TResult<Expr> {
        self.values(xs, Vec::new(), Box::new(move |s, args| s.call(m, args, k)))
    }

    fn call(&mut self, f: Expr, mut args: Vec<Expr>, k: Kont<'_>) -> TResult<Expr> {
        if args.is_empty() {
            return self.resume(k, f);
        }
        let a = args.remove(0);
        let next = if args.is_empty() {
            self.reify(k)?
        } else {
            let g = self.scope.names.fresh("g");
            let rest = self.call(var(&g), args, k)?;
            lam(vec![Pat::var(g)], rest)
        };
        Ok(app(f, vec![a, next]))
    }

    fn check_prim(&self, p: &PrimAt) -> TResult<()> {
        self.scope.check_derivative(p)?;
        if matches!(p.prim, Prim::Map | Prim::Fold | Prim::Build)
            || (p.prim == Prim::Sum && p.on_reals())
        {
            return Err(self.scope.unsupported(format!(
                "the CPS translation (Wang et al. Fig. 10) has no rule for `{}`; use --mode reverse",
                p.prim.info().name
            )));
        }
        Ok(())
    }

    fn prim(&mut self, p: &PrimAt, args: &[Expr], k: Kont<'_>) -> TResult<Expr> {
        self.check_prim(p)?;
        let p = p.clone();
        let on_reals = p.at.is_none() || p.on_reals();
        let real_fn = p.prim.info().real;
        // Comparisons, and `to_int` (an Int has no adjoint), see primals only.
        let compares_reals = p.prim == Prim::ToInt
            || p.on_reals()
                && matches!(
                    p.prim,
                    Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne
                );
        // A literal operand of a real function or comparison stays a bare real:
        // its cell would never be read.
        let bare_literals = compares_reals
            || matches!(real_fn, Some(RealFn::Unary(_) | RealFn::Binary(_))) && on_reals;
        let is_bare = |a: &Expr| bare_literals && matches!(a, Expr::Lit(Lit::Real(_)));
        let literals: Vec<Option<Expr>> =
            args.iter().map(|a| is_bare(a).then(|| a.clone())).collect();
        let computed: Vec<Expr> = args.iter().filter(|a| !is_bare(a)).cloned().collect();
        self.values(
            computed,
            Vec::new(),
            Box::new(move |s, computed| {
                let mut computed = computed.into_iter();
                let vs: Vec<Expr> = literals
                    .into_iter()
                    .map(|l| {
                        l.or_else(|| computed.next())
                            .unwrap_or(Expr::Lit(Lit::Unit))
                    })
                    .collect();
                let fst = |e: &Expr| match e {
                    Expr::Tuple(xs) => xs[0].clone(),
                    Expr::Lit(_) => e.clone(),
                    e => Expr::Proj {
                        tuple: Box::new(e.clone()),
                        index: 0,
                        arity: 2,
                    },
                };
                match (real_fn, p.prim) {
                    (Some(RealFn::Select(sel)), _) => {
                        let cmp = match sel {
                            Selection::Min => Prim::Lt,
                            Selection::Max => Prim::Gt,
                        };
                        let chosen = Expr::If(
                            Box::new(real_op(cmp, vec![fst(&vs[1]), fst(&vs[0])])),
                            Box::new(vs[1].clone()),
                            Box::new(vs[0].clone()),
                        );
                        s.give(chosen, "m", k)
                    }
                    (Some(f), _) if on_reals => s.real_function(f, &p, vs, k),
                    _ if compares_reals => {
                        let primals = vs.iter().map(fst).collect();
                        s.give(Expr::Prim(p.clone(), primals), "b", k)
                    }
                    (None, Prim::ToReal) => {
                        let cell = prim(Prim::NewRef, vec![real(0.0)]);
                        s.give(pair(Expr::Prim(p.clone(), vs), cell), "c", k)
                    }
                    _ => s.give(Expr::Prim(p.clone(), vs), "v", k),
                }
            }),
        )
    }

    /// Wang et al.'s arithmetic rules, generalised by the table:
    /// `let v = f x1 … in let v' = ref 0.0 in κ (v, v'); x1' += !v' * ∂1f; …`
    fn real_function(
        &mut self,
        f: RealFn,
        p: &PrimAt,
        operands: Vec<Expr>,
        k: Kont<'_>,
    ) -> TResult<Expr> {
        // Take each operand apart into its value and cell.
        let mut lets = Vec::new();
        let mut primals = Vec::new();
        let mut cells: Vec<Option<Expr>> = Vec::new();
        let mut seen: HashMap<String, (Expr, Expr)> = HashMap::new();
        for o in &operands {
            let (x, c) = match o {
                // A literal: no cell.
                Expr::Lit(_) => {
                    primals.push(o.clone());
                    cells.push(None);
                    continue;
                }
                Expr::Tuple(xs) => (xs[0].clone(), xs[1].clone()),
                Expr::Var(v) if seen.contains_key(v) => seen[v].clone(),
                Expr::Var(v) => {
                    let (x, c) = (
                        self.scope.names.fresh(v),
                        self.scope.names.fresh(&format!("{v}'")),
                    );
                    lets.push((Pat::pair(&x, &c), o.clone()));
                    seen.insert(v.clone(), (var(&x), var(&c)));
                    (var(x), var(c))
                }
                _ => return Err(self.scope.unsupported("internal: operand")),
            };
            primals.push(x);
            cells.push(Some(c));
        }
        let y = self.scope.names.fresh("v");
        let y_cell = self.scope.names.fresh("v'");
        let partials = rules::partials(f, &primals, &var(&y));
        let mut updates = Vec::new();
        for (cell, d) in cells.into_iter().zip(partials) {
            let (Some(cell), false) = (cell, d == real(0.0)) else {
                continue;
            };
            let gradient = rules::Code(d).chain(rules::Code(prim(Prim::Deref, vec![var(&y_cell)])));
            updates.push(prim(Prim::AddTo, vec![cell, gradient.0]));
        }
        let rest = self.resume(k, pair(var(&y), var(&y_cell)))?;
        let backward = updates
            .into_iter()
            .rev()
            .fold(None, |acc: Option<Expr>, u| {
                Some(match acc {
                    None => u,
                    Some(after) => seq(u, after),
                })
            });
        let body = match backward {
            None => rest,
            Some(b) => seq(rest, b),
        };
        let body = let_(
            Pat::var(&y),
            Expr::Prim(p.clone(), primals),
            let_(Pat::var(&y_cell), prim(Prim::NewRef, vec![real(0.0)]), body),
        );
        Ok(lets.into_iter().rev().fold(body, |b, (p, e)| let_(p, e, b)))
    }
}
