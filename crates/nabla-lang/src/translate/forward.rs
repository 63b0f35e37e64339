//! Forward mode: the dual-number translation D→ of Krawiec et al. Figure 3,
//! and its wrapper F (Figure 16, generalising Figure 4).
//!
//! Types: `Real ↦ (Real, Real)`, everything else homomorphically
//! ([`super::types::translate_type`]). Terms: homomorphic — a lambda is a
//! lambda, an application an application, a `let` a `let`, with every binder
//! keeping its name and changing its type — except at real literals
//! (`r ↦ (r, 0.0)`) and real primitives, whose translation pairs the value
//! with the tangent Σᵢ ∂ᵢf · dxᵢ, the partials read off the derivative table
//! ([`super::rules`]). Comparisons look at primals only.
//!
//! Two small departures from the figure keep the output readable, both
//! exact: a primitive's operands are taken apart with `let (x, dx) = x in`
//! instead of applying a translated primitive `λ((x, dx), (y, dy)). …`, and a
//! tangent known to be zero at translation time (that of a literal operand)
//! contributes no term — so `x ** 3.0` never forms the `log x` of the
//! exponent's partial, as LANGUAGE.md requires.

use super::{Globals, Names, Operand, Part, Scope, TResult, rules};
use crate::core::named::*;
use crate::prim::{Prim, RealFn, Selection};
use crate::types::Type;
use nabla::Number;

/// `def g_fwd p = D→{body}`.
pub fn translate_def(d: &Def, globals: &Globals, names: &mut Names) -> TResult<Def> {
    let mut t = Forward {
        scope: Scope::new(d, globals, names),
    };
    let body = t.expr(&d.body)?;
    Ok(Def {
        name: globals[&d.name].0.clone(),
        params: d.params.clone(),
        body,
        ty: None,
    })
}

/// Figure 16's forward wrapper for `f : S -> T`:
/// `def f_jvp (s, ds) = tangentOf @T (f_fwd (zipDual @S (s, ds)))`.
pub fn wrapper(f: &str, s: &Type, t: &Type, names: &mut Names) -> Def {
    let (x, dx) = (names.fresh("s"), names.fresh("ds"));
    let zipped = app(
        Expr::Poly(Poly::ZipDual, s.clone()),
        vec![pair(var(&x), var(&dx))],
    );
    let result = app(
        var(super::translated_name(super::Mode::Forward, f)),
        vec![zipped],
    );
    Def {
        name: format!("{f}_jvp"),
        params: vec![Pat::pair(x, dx)],
        body: app(Expr::Poly(Poly::TangentOf, t.clone()), vec![result]),
        ty: None,
    }
}

struct Forward<'a> {
    scope: Scope<'a>,
}

/// `let p = e in …` bindings, outermost first.
type Bindings = Vec<(Pat, Expr)>;

impl Forward<'_> {
    /// Translates `body` with the names of `pats` in scope.
    fn under(&mut self, pats: &[&Pat], body: &Expr) -> TResult<Expr> {
        let mark = self.scope.bind(pats);
        let r = self.expr(body);
        self.scope.unbind(mark);
        r
    }

    fn expr(&mut self, e: &Expr) -> TResult<Expr> {
        self.scope.check_depth()?;
        Ok(match e {
            Expr::Var(x) => match self.scope.global(x) {
                Some((g, _)) => var(g),
                _ => e.clone(),
            },
            // D→{r} = (r, 0)
            Expr::Lit(Lit::Real(r)) => pair(real(*r), real(0.0)),
            Expr::Lit(_) => e.clone(),
            Expr::Lam(ps, b) => lam(ps.clone(), self.under(&ps.iter().collect::<Vec<_>>(), b)?),
            Expr::App(f, xs) => app(self.expr(f)?, self.exprs(xs)?),
            Expr::Let(p, v, b) => let_(p.clone(), self.expr(v)?, self.under(&[p], b)?),
            Expr::LetRec {
                name,
                params,
                value,
                body,
            } => {
                let me = Pat::Var(name.clone());
                let scope = rec_scope(&me, params);
                Expr::LetRec {
                    name: name.clone(),
                    params: params.clone(),
                    value: Box::new(self.under(&scope, value)?),
                    body: Box::new(self.under(&[&me], body)?),
                }
            }
            Expr::Tuple(xs) => Expr::Tuple(self.exprs(xs)?),
            Expr::Vector(xs) => Expr::Vector(self.exprs(xs)?),
            Expr::Proj {
                tuple,
                index,
                arity,
            } => Expr::Proj {
                tuple: Box::new(self.expr(tuple)?),
                index: *index,
                arity: *arity,
            },
            Expr::Inl(x) => Expr::Inl(Box::new(self.expr(x)?)),
            Expr::Inr(x) => Expr::Inr(Box::new(self.expr(x)?)),
            Expr::Case {
                scrutinee,
                left,
                right,
            } => Expr::Case {
                scrutinee: Box::new(self.expr(scrutinee)?),
                left: (left.0.clone(), Box::new(self.under(&[&left.0], &left.1)?)),
                right: (
                    right.0.clone(),
                    Box::new(self.under(&[&right.0], &right.1)?),
                ),
            },
            Expr::If(c, a, b) => Expr::If(
                Box::new(self.expr(c)?),
                Box::new(self.expr(a)?),
                Box::new(self.expr(b)?),
            ),
            Expr::Prim(p, args) => self.prim(p, args)?,
            Expr::PrimRef(p) => match eta_expand(p, self.scope.names) {
                Some(f) => self.expr(&f)?,
                None => self.scope.check_derivative(p).map(|()| e.clone())?,
            },
            Expr::Bind(..) | Expr::RunDelta(..) | Expr::Poly(..) => {
                return Err(self
                    .scope
                    .unsupported("the program is already a translation"));
            }
        })
    }

    fn exprs(&mut self, xs: &[Expr]) -> TResult<Vec<Expr>> {
        xs.iter().map(|x| self.expr(x)).collect()
    }

    fn prim(&mut self, p: &PrimAt, args: &[Expr]) -> TResult<Expr> {
        self.scope.check_derivative(p)?;
        let on_reals = p.at.is_none() || p.on_reals();
        match (p.prim.info().real, p.prim) {
            (Some(RealFn::Select(sel)), _) => self.select(sel, args),
            (Some(f), _) if on_reals => self.real_function(f, p, args),
            (None, Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne)
                if p.on_reals() =>
            {
                // Comparisons see primals only.
                let primals = args
                    .iter()
                    .map(|a| self.primal_of(a))
                    .collect::<TResult<_>>()?;
                Ok(Expr::Prim(p.clone(), primals))
            }
            (None, Prim::ToInt) => {
                // An Int has no tangent: `to_int` sees the primal.
                let primals = args
                    .iter()
                    .map(|a| self.primal_of(a))
                    .collect::<TResult<_>>()?;
                Ok(Expr::Prim(p.clone(), primals))
            }
            // D→{real n} = (real n, 0)
            (None, Prim::ToReal) => Ok(pair(Expr::Prim(p.clone(), self.exprs(args)?), real(0.0))),
            // The sum of dual numbers is the dual of the sums.
            (None, Prim::Sum) if p.on_reals() => {
                let v = self.expr(&args[0])?;
                let (bind_v, v) = self.atom(v, "v");
                let sum_of = |k: Prim| {
                    Expr::Prim(
                        p.clone(),
                        vec![prim(
                            Prim::Map,
                            vec![Expr::PrimRef(PrimAt::plain(k)), v.clone()],
                        )],
                    )
                };
                Ok(bind_v(pair(sum_of(Prim::Fst), sum_of(Prim::Snd))))
            }
            _ => Ok(Expr::Prim(p.clone(), self.exprs(args)?)),
        }
    }

    /// The primal of a real operand, for comparisons.
    fn primal_of(&mut self, a: &Expr) -> TResult<Expr> {
        Ok(match a {
            Expr::Lit(Lit::Real(_)) => a.clone(),
            _ => Expr::Proj {
                tuple: Box::new(self.expr(a)?),
                index: 0,
                arity: 2,
            },
        })
    }

    /// `e` as an atom: itself if it is a variable, else bound to a fresh name.
    fn atom(&mut self, e: Expr, base: &str) -> (Box<dyn FnOnce(Expr) -> Expr>, Expr) {
        if let Expr::Var(_) = e {
            return (Box::new(|body| body), e);
        }
        let x = self.scope.names.fresh(base);
        let v = var(&x);
        (Box::new(move |body| let_(Pat::Var(x), e, body)), v)
    }

    /// D→{f(e1, …, en)} = let (x1, dx1) = D→{e1} in … in (f(x1, …), Σ ∂ᵢf · dxᵢ)
    fn real_function(&mut self, f: RealFn, p: &PrimAt, args: &[Expr]) -> TResult<Expr> {
        let (lets, operands) = self.take_apart(args)?;
        let primals: Vec<Expr> = operands.iter().map(|o| o.primal.clone()).collect();
        let value = Expr::Prim(p.clone(), primals.clone());
        let v = self.scope.names.fresh("v");
        let partials = rules::partials(f, &primals, &var(&v));
        let mut tangent: Option<rules::Code> = None;
        for (o, d) in operands.iter().zip(partials) {
            let (Some(dx), false) = (&o.tangent, d == real(0.0)) else {
                continue;
            };
            let term = rules::Code(d).chain(rules::Code(dx.clone()));
            tangent = Some(match tangent {
                None => term,
                Some(t) => t + term,
            });
        }
        let tangent = tangent.map_or_else(|| real(0.0), |c| c.0);
        let result = if tangent.mentions(&v) {
            let_(Pat::Var(v.clone()), value, pair(var(&v), tangent))
        } else {
            pair(value, tangent)
        };
        Ok(lets
            .into_iter()
            .rev()
            .fold(result, |body, (p, e)| let_(p, e, body)))
    }

    /// Takes real operands apart (see [`super::take_apart`]) with `let`s.
    fn take_apart(&mut self, args: &[Expr]) -> TResult<(Bindings, Vec<Operand>)> {
        let (parts, operands) = super::take_apart(&mut self.scope, args, "d", |_, _| true);
        let mut lets = Vec::new();
        for (pat, part) in parts {
            let value = match part {
                Part::Arg(i) => self.expr(&args[i])?,
                Part::Var(x) => self.expr(&var(x))?,
            };
            lets.push((pat, value));
        }
        Ok((lets, operands))
    }

    /// min/max select one of their operands, tangent and all (the derivative of
    /// the branch taken): `if fst y < fst x then y else x` for `min x y`.
    fn select(&mut self, sel: Selection, args: &[Expr]) -> TResult<Expr> {
        let x = self.expr(&args[0])?;
        let y = self.expr(&args[1])?;
        let (bind_x, x) = self.atom(x, "a");
        let (bind_y, y) = self.atom(y, "b");
        let fst = |e: &Expr| Expr::Proj {
            tuple: Box::new(e.clone()),
            index: 0,
            arity: 2,
        };
        let cmp = match sel {
            Selection::Min => Prim::Lt,
            Selection::Max => Prim::Gt,
        };
        let takes_second = real_op(cmp, vec![fst(&y), fst(&x)]);
        Ok(bind_x(bind_y(Expr::If(
            Box::new(takes_second),
            Box::new(y),
            Box::new(x),
        ))))
    }
}

/// A primitive whose translation is a rule, used as a first-class function,
/// as the lambda `fun a b -> p a b` (so the rule applies); `None` for the
/// primitives every mode passes through unchanged.
pub fn eta_expand(p: &PrimAt, names: &mut Names) -> Option<Expr> {
    let needs_rule = p.prim.info().real.is_some()
        || p.prim == Prim::ToReal
        || p.prim == Prim::ToInt
        || (p.prim == Prim::Sum && p.on_reals());
    if !needs_rule {
        return None;
    }
    let params: Vec<Name> = (0..p.prim.info().arity)
        .map(|i| names.fresh(["a", "b", "c"].get(i).copied().unwrap_or("a")))
        .collect();
    Some(lam(
        params.iter().map(Pat::var).collect(),
        Expr::Prim(p.clone(), params.iter().map(var).collect()),
    ))
}
