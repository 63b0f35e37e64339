//! Source-to-source automatic differentiation: the translations of
//! Krawiec et al. (forward, Fig. 3; reverse with Delta, Fig. 9 and 16) and
//! Wang et al. (reverse in continuation-passing style, Fig. 10), on the named
//! core ([`crate::core::named`]). Their output is printed as nabla source
//! (`crate::pretty::program`) and runs in the interpreter, whose support for
//! the translation-only constructs (Fig. 11's `runDelta`, `deltaLet` and
//! `eval`) lives in `crate::eval::delta`.
//!
//! [`translate`] differentiates one top-level definition `f : S -> T` (S and T
//! first-order): it translates `f` and every definition `f` uses, renaming each
//! `g` to `g_fwd`, `g_rev` or `g_cps`, and adds the wrapper that connects the
//! translation to the derivative a user wants (Fig. 16): `f_jvp (s, ds)` in
//! forward mode, `f_vjp (s, dt)` in the reverse modes.

pub mod cps;
pub mod forward;
pub mod reverse;
pub mod rules;
pub mod types;

use crate::core::named::{Def, Expr, Name, Pat, Program, app, lam, let_, pair, real, var};
use crate::prim::Prim;
use crate::types::Type;
use std::collections::{HashMap, HashSet};
use std::fmt;
pub use types::Mode;

/// Why a definition cannot be translated.
#[derive(Clone, Debug, PartialEq)]
pub enum TranslateError {
    /// No definition has that name.
    NoSuchDef(String),
    /// The definition is not a function of one first-order argument with a first-order result.
    NotFirstOrder {
        /// The definition.
        def: String,
        /// Its type, printed.
        ty: String,
    },
    /// The definition (or one it uses) calls a differentiation operator: the
    /// translations are first-order in this sense (Krawiec et al. §7); nested
    /// derivatives are the run-time operators' job.
    NestedDerivative {
        /// The definition that calls it.
        def: String,
        /// The operator.
        op: &'static str,
    },
    /// The definition (or one it uses) contains a construct this mode cannot translate.
    Unsupported {
        /// The definition.
        def: String,
        /// What and why.
        what: String,
    },
}

impl fmt::Display for TranslateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TranslateError::NoSuchDef(d) => write!(f, "no definition named `{d}`"),
            TranslateError::NotFirstOrder { def, ty } => write!(
                f,
                "`{def}` has type {ty}; a translation differentiates a function of one \
                 argument whose argument and result types are first-order data (no type \
                 variables or functions) — wrap it, e.g. `def g (x, y) = {def} x y`"
            ),
            TranslateError::NestedDerivative { def, op } => write!(
                f,
                "`{def}` calls `{op}`: the source-to-source translations do not differentiate \
                 programs that themselves differentiate (use the run-time operators for nested \
                 derivatives)"
            ),
            TranslateError::Unsupported { def, what } => write!(f, "in `{def}`: {what}"),
        }
    }
}

/// The result of a translation step.
pub type TResult<T> = Result<T, TranslateError>;

/// The name a mode gives the translation of definition `g`.
pub fn translated_name(mode: Mode, g: &str) -> String {
    match mode {
        Mode::Forward => format!("{g}_fwd"),
        Mode::Reverse => format!("{g}_rev"),
        Mode::Cps => format!("{g}_cps"),
    }
}

/// Translates definition `def` of `program` and everything it uses, and adds
/// the wrapper of Figure 16 (`{def}_jvp` or `{def}_vjp`). The result contains
/// only the translated definitions and the wrapper.
pub fn translate(program: &Program, def: &str, mode: Mode) -> TResult<Program> {
    let target = program
        .def(def)
        .ok_or_else(|| TranslateError::NoSuchDef(def.to_string()))?;
    let (s, t) = first_order_signature(target)?;
    let mut names = Names::new(program);
    let mut out = Program::default();
    if mode == Mode::Forward {
        let used = reachable(program, def);
        let globals = global_table(program, &used, mode);
        for d in program.defs.iter().filter(|d| used.contains(&d.name)) {
            out.defs.push(forward::translate_def(d, &globals, &mut names)?);
        }
        out.defs.push(forward::wrapper(def, &s, &t, &mut names));
        return Ok(out);
    }
    // The reverse modes translate λ(s, dt). f s ⊙ dt (Fig. 16), written out as `f_dot`.
    let mut source = program.clone();
    let dot = reverse::dot_def(def, &t, &mut names);
    let dot_name = dot.name.clone();
    source.defs.push(dot);
    let used = reachable(&source, &dot_name);
    let globals = global_table(&source, &used, mode);
    for d in source.defs.iter().filter(|d| used.contains(&d.name)) {
        out.defs.push(match mode {
            Mode::Cps => cps::translate_def(d, &globals, &mut names)?,
            _ => reverse::translate_def(d, &globals, &mut names)?,
        });
    }
    let dot_translated = translated_name(mode, &dot_name);
    out.defs.push(match mode {
        Mode::Cps => cps::wrapper(def, &dot_translated, &s, &t, &mut names),
        _ => reverse::wrapper(def, &dot_translated, &s, &t, &mut names),
    });
    Ok(out)
}

/// `S` and `T` of a definition `f : S -> T` of one parameter.
fn first_order_signature(d: &Def) -> TResult<(Type, Type)> {
    let not_first_order = || TranslateError::NotFirstOrder {
        def: d.name.clone(),
        ty: d
            .ty
            .as_ref()
            .map_or_else(|| "unknown".to_string(), crate::pretty::print_type),
    };
    match &d.ty {
        Some(Type::Fun(s, t))
            if d.params.len() == 1 && is_closed_data(s) && is_closed_data(t) =>
        {
            Ok(((**s).clone(), (**t).clone()))
        }
        _ => Err(not_first_order()),
    }
}

/// First-order and free of type variables: what a wrapper can walk.
pub fn is_closed_data(t: &Type) -> bool {
    match t {
        Type::Int | Type::Real | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(is_closed_data),
        Type::Sum(a, b) => is_closed_data(a) && is_closed_data(b),
        Type::Vec(a) => is_closed_data(a),
        Type::Var(_) | Type::Fun(..) | Type::Con(..) => false,
    }
}

/// The definitions `def` uses, directly or not, itself included.
fn reachable(program: &Program, def: &str) -> HashSet<String> {
    let globals: HashSet<&str> = program.defs.iter().map(|d| d.name.as_str()).collect();
    let mut seen = HashSet::new();
    let mut todo = vec![def.to_string()];
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(d) = program.def(&name) {
            let mut bound: Vec<Name> = Vec::new();
            for p in &d.params {
                pattern_names(p, &mut bound);
            }
            free_vars(&d.body, &mut bound, &mut |x| {
                if globals.contains(x) {
                    todo.push(x.to_string())
                }
            });
        }
    }
    seen
}

/// Calls `found` for each free variable of `e` (not bound in `e` nor in `bound`).
pub fn free_vars(e: &Expr, bound: &mut Vec<Name>, found: &mut dyn FnMut(&str)) {
    let under = |ps: &[&Pat], body: &Expr, bound: &mut Vec<Name>, found: &mut dyn FnMut(&str)| {
        let mark = bound.len();
        for p in ps {
            pattern_names(p, bound);
        }
        free_vars(body, bound, found);
        bound.truncate(mark);
    };
    match e {
        Expr::Var(x) => {
            if !bound.contains(x) {
                found(x);
            }
        }
        Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..) => {}
        Expr::Lam(ps, b) => under(&ps.iter().collect::<Vec<_>>(), b, bound, found),
        Expr::App(f, xs) => {
            free_vars(f, bound, found);
            xs.iter().for_each(|x| free_vars(x, bound, found));
        }
        Expr::Let(p, v, b) | Expr::Bind(p, v, b) => {
            free_vars(v, bound, found);
            under(&[p], b, bound, found);
        }
        Expr::LetRec {
            name,
            params,
            value,
            body,
        } => {
            let me = Pat::Var(name.clone());
            let mut ps: Vec<&Pat> = vec![&me];
            ps.extend(params.iter());
            under(&ps, value, bound, found);
            under(&[&me], body, bound, found);
        }
        Expr::Tuple(xs) | Expr::Vector(xs) | Expr::Prim(_, xs) => {
            xs.iter().for_each(|x| free_vars(x, bound, found))
        }
        Expr::Proj { tuple, .. } => free_vars(tuple, bound, found),
        Expr::Inl(x) | Expr::Inr(x) => free_vars(x, bound, found),
        Expr::Case {
            scrutinee,
            left,
            right,
        } => {
            free_vars(scrutinee, bound, found);
            under(&[&left.0], &left.1, bound, found);
            under(&[&right.0], &right.1, bound, found);
        }
        Expr::If(a, b, c) => {
            free_vars(a, bound, found);
            free_vars(b, bound, found);
            free_vars(c, bound, found);
        }
        Expr::RunDelta(a, b) => {
            free_vars(a, bound, found);
            free_vars(b, bound, found);
        }
    }
}

/// Appends the names a pattern binds.
pub fn pattern_names(p: &Pat, out: &mut Vec<Name>) {
    p.for_each_name(&mut |x| out.push(x.to_string()));
}

/// A supply of names that occur nowhere in the program: every name a
/// translation introduces comes from here, so it can neither capture nor be
/// captured.
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// A supply avoiding every name (variable, binder, definition) of `program`
    /// and every name the translations derive from definitions.
    pub fn new(program: &Program) -> Names {
        let mut taken = HashSet::new();
        for d in &program.defs {
            for mode in [Mode::Forward, Mode::Reverse, Mode::Cps] {
                taken.insert(translated_name(mode, &d.name));
            }
            for suffix in ["jvp", "vjp", "dot"] {
                taken.insert(format!("{}_{suffix}", d.name));
            }
            taken.insert(d.name.clone());
            let mut bound = Vec::new();
            d.params.iter().for_each(|p| pattern_names(p, &mut bound));
            taken.extend(bound);
            d.body.for_each_name(&mut |n| {
                taken.insert(n.to_string());
            });
        }
        Names { taken }
    }

    /// `base` if unused, else `base1`, `base2`, … ; the name is then taken.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut i = 1;
        while self.taken.contains(&name) || crate::prim::lookup_named(&name).is_some() {
            name = format!("{base}{i}");
            i += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

/// The primitives a translation must reject: differentiation operators.
fn derivative_operator(p: Prim) -> Option<&'static str> {
    p.is_derivative().then(|| p.info().name)
}

/// How a definition is referred to: functions by name, values by a call (see the modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalKind {
    /// `def f p … = …`
    Function,
    /// `def c = …`
    Value,
}

/// The translated name and kind of every definition a translation uses.
pub fn global_table(program: &Program, used: &HashSet<String>, mode: Mode) -> HashMap<String, (String, GlobalKind)> {
    program
        .defs
        .iter()
        .filter(|d| used.contains(&d.name))
        .map(|d| {
            let kind = if d.params.is_empty() {
                GlobalKind::Value
            } else {
                GlobalKind::Function
            };
            (d.name.clone(), (translated_name(mode, &d.name), kind))
        })
        .collect()
}

/// A call of a differentiation operator on a definition: `grad f x`, `jvp f x dx`, ….
#[derive(Clone, Debug, PartialEq)]
pub struct DerivativeCall {
    /// The operator.
    pub op: Prim,
    /// The definition differentiated.
    pub f: String,
    /// The operator's remaining arguments (the point, and the tangent for `jvp`).
    pub args: Vec<Expr>,
}

/// Every call `op f x …` inside `main` (outermost first) where `f` is a
/// definition and the other arguments mention no local variable, so they
/// can be evaluated in a `main` of their own.
pub fn calls_in_main(program: &Program) -> Vec<DerivativeCall> {
    let Some(main) = program.def("main") else {
        return Vec::new();
    };
    let globals: HashSet<&str> = program.defs.iter().map(|d| d.name.as_str()).collect();
    let closed = |e: &Expr| {
        let mut ok = true;
        free_vars(e, &mut Vec::new(), &mut |x| ok &= globals.contains(x));
        ok
    };
    let mut calls = Vec::new();
    main.body.for_each(&mut |e| {
        if let Expr::Prim(p, args) = e
            && p.prim.is_derivative()
            && let Some((Expr::Var(f), rest)) = args.split_first()
            && globals.contains(f.as_str())
            && f != "main"
            && rest.iter().all(closed)
        {
            calls.push(DerivativeCall {
                op: p.prim,
                f: f.clone(),
                args: rest.to_vec(),
            });
        }
    });
    calls
}

/// The program that computes `call` with the translation of mode `mode`:
/// `program`'s definitions except `main`, the translation of `call.f`, and a
/// new `main` applying the wrapper to the call's point — e.g. `f_vjp (x, 1.0)`
/// for `grad f x`, `(f x, f_jvp (x, dx))` for `jvp f x dx`. Its output reads
/// like the original call's.
pub fn runnable(program: &Program, call: &DerivativeCall, mode: Mode) -> TResult<Program> {
    let translated = translate(program, &call.f, mode)?;
    let mut names = Names::new(program);
    for d in &translated.defs {
        names.taken.insert(d.name.clone());
    }
    let x = names.fresh("x");
    let f = || var(&call.f);
    let arg = |i: usize| call.args.get(i).cloned().unwrap_or(Expr::Lit(crate::core::Lit::Unit));
    let jvp = || var(format!("{}_jvp", call.f));
    let vjp = || var(format!("{}_vjp", call.f));
    let value = || app(f(), vec![var(&x)]);
    let body = match (mode, call.op) {
        (Mode::Forward, Prim::Jvp) => pair(value(), app(jvp(), vec![pair(var(&x), arg(1))])),
        (Mode::Forward, Prim::Diff) => app(jvp(), vec![pair(var(&x), real(1.0))]),
        (Mode::Reverse | Mode::Cps, Prim::Grad) => app(vjp(), vec![pair(var(&x), real(1.0))]),
        (Mode::Reverse | Mode::Cps, Prim::ValueAndGrad) => {
            pair(value(), app(vjp(), vec![pair(var(&x), real(1.0))]))
        }
        (Mode::Reverse | Mode::Cps, Prim::Vjp) => {
            let dt = names.fresh("dt");
            let pullback = lam(vec![Pat::var(&dt)], app(vjp(), vec![pair(var(&x), var(&dt))]));
            pair(value(), pullback)
        }
        (mode, op) => {
            let wanted = if mode == Mode::Forward {
                "`jvp f x dx` or `diff f x`"
            } else {
                "`grad f x`, `value_and_grad f x` or `vjp f x`"
            };
            return Err(TranslateError::Unsupported {
                def: "main".into(),
                what: format!(
                    "`{}` is not what the {} translation computes: its wrapper runs {wanted}",
                    op.info().name,
                    mode.name()
                ),
            });
        }
    };
    let mut out = Program::default();
    out.defs.extend(program.defs.iter().filter(|d| d.name != "main").cloned());
    out.defs.extend(translated.defs);
    out.defs.push(Def {
        name: "main".into(),
        params: Vec::new(),
        body: let_(Pat::var(&x), arg(0), body),
        ty: None,
    });
    Ok(out)
}
