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
pub mod dual;
pub mod forward;
pub mod linear;
pub mod reverse;
pub mod rules;
pub mod types;

use crate::core::named::{
    Def, Expr, Name, Pat, Program, app, lam, let_, pair, real, rec_scope, var,
};
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
        /// What to do about it.
        hint: String,
    },
    /// The definition's argument or result has no real in it: there is no
    /// derivative to take (`Int -> Int`).
    NothingToDifferentiate {
        /// The definition.
        def: String,
        /// Its type, printed.
        ty: String,
        /// `argument` or `result`.
        side: &'static str,
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
            TranslateError::NotFirstOrder { def, ty, hint } => write!(
                f,
                "`{def}` has type {ty}; a translation differentiates a function of one \
                 argument whose argument and result are first-order data (reals, ints, \
                 bools, tuples, sums, vectors; no functions): {hint}"
            ),
            TranslateError::NothingToDifferentiate { def, ty, side } => write!(
                f,
                "`{def}` has type {ty}: its {side} has no `Real` in it, so there is no \
                 derivative to take"
            ),
            TranslateError::NestedDerivative { def, op } if op.starts_with("custom_") => write!(
                f,
                "`{def}` uses the custom derivative rule `{op}`: the source-to-source \
                 translations do not take custom rules yet (the run-time operators and \
                 native code do)"
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

impl TranslateError {
    /// The definition the error is about, if it names one that exists.
    pub fn def(&self) -> Option<&str> {
        match self {
            TranslateError::NoSuchDef(_) => None,
            TranslateError::NotFirstOrder { def, .. }
            | TranslateError::NothingToDifferentiate { def, .. }
            | TranslateError::NestedDerivative { def, .. }
            | TranslateError::Unsupported { def, .. } => Some(def),
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

/// True for the names a translated program cannot bind: every primitive's,
/// including the translated dialect's (`eval`, `pure`, `Var`, …), its
/// keywords and its polytypic helpers.
fn reserved(name: &str) -> bool {
    crate::prim::lookup_named_in(name, true).is_some()
        || matches!(name, "do" | "runDelta")
        || crate::core::named::Poly::from_name(name).is_some()
}

/// Refuses a program that binds a name the translated dialect reserves: its
/// translation would not mean the same.
fn check_reserved(program: &Program) -> TResult<()> {
    for d in &program.defs {
        let mut clash = reserved(&d.name).then(|| d.name.clone());
        let mut check = |x: &str| {
            if clash.is_none() && reserved(x) {
                clash = Some(x.to_string());
            }
        };
        d.params.iter().for_each(|p| p.for_each_name(&mut check));
        d.body.for_each_name(&mut check);
        if let Some(x) = clash {
            return Err(TranslateError::Unsupported {
                def: d.name.clone(),
                what: format!(
                    "`{x}` is a reserved name in translated programs (see docs/transformations.md); \
                     rename it to translate this program"
                ),
            });
        }
    }
    Ok(())
}

/// Translates definition `def` of `program` and everything it uses, and adds
/// the wrapper of Figure 16 (`{def}_jvp` or `{def}_vjp`). The result contains
/// only the translated definitions and the wrapper.
pub fn translate(program: &Program, def: &str, mode: Mode) -> TResult<Program> {
    let target = program
        .def(def)
        .ok_or_else(|| TranslateError::NoSuchDef(def.to_string()))?;
    let (s, t) = first_order_signature(target)?;
    check_reserved(program)?;
    let distinct = with_distinct_binders(program)?;
    let program = &distinct;
    let mut names = Names::new(program);
    let mut out = Program::default();
    if mode == Mode::Forward {
        let used = reachable(program, def);
        let globals = global_table(program, &used, mode);
        for d in program.defs.iter().filter(|d| used.contains(&d.name)) {
            out.defs.push(flatten_def(forward::translate_def(
                d, &globals, &mut names,
            )?));
        }
        out.defs.push(forward::wrapper(def, &s, &t, &mut names));
        renumber(&mut out, program);
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
            Mode::Cps => flatten_def(cps::translate_def(d, &globals, &mut names)?),
            _ => flatten_def(reverse::translate_def(d, &globals, &mut names)?),
        });
    }
    let dot_translated = translated_name(mode, &dot_name);
    out.defs.push(match mode {
        Mode::Cps => cps::wrapper(def, &dot_translated, &s, &t, &mut names),
        _ => reverse::wrapper(def, &dot_translated, &s, &t, &mut names),
    });
    renumber(&mut out, program);
    Ok(out)
}

/// `S` and `T` of a definition `f : S -> T` of one parameter. A type variable
/// left in them stands for a component the function ignores or passes on
/// unchanged (`def f (x, y) = sin x`); like `nabla run`, the translation takes
/// it to be `Real`.
pub fn first_order_signature(d: &Def) -> TResult<(Type, Type)> {
    let printed = || {
        d.ty.as_ref()
            .map_or_else(|| "unknown".to_string(), crate::pretty::print_type)
    };
    let not_first_order = |hint: String| TranslateError::NotFirstOrder {
        def: d.name.clone(),
        ty: printed(),
        hint,
    };
    let Some(Type::Fun(s, t)) = &d.ty else {
        return Err(not_first_order(
            "it is not a function; differentiate a function of it instead".into(),
        ));
    };
    if d.params.len() > 1 {
        let xs: Vec<String> = (1..=d.params.len()).map(|i| format!("x{i}")).collect();
        return Err(not_first_order(format!(
            "it takes {} arguments one after the other; translate a function of their tuple, \
             `def g ({}) = {} {}`",
            d.params.len(),
            xs.join(", "),
            d.name,
            xs.join(" ")
        )));
    }
    let (s, t) = (vars_to_real(s), vars_to_real(t));
    if !(is_closed_data(&s) && is_closed_data(&t)) {
        return Err(not_first_order(
            "a function inside the argument or result cannot be differentiated by a \
             translation (the run-time operators cannot either)"
                .into(),
        ));
    }
    for (ty, side) in [(&s, "argument"), (&t, "result")] {
        if !has_real(ty) {
            return Err(TranslateError::NothingToDifferentiate {
                def: d.name.clone(),
                ty: printed(),
                side,
            });
        }
    }
    Ok((s, t))
}

/// `t` with every type variable replaced by `Real`.
fn vars_to_real(t: &Type) -> Type {
    let each = |ts: &[Type]| ts.iter().map(vars_to_real).collect();
    match t {
        Type::Var(_) => Type::Real,
        Type::Tuple(ts) => Type::Tuple(each(ts)),
        Type::Sum(a, b) => Type::Sum(Box::new(vars_to_real(a)), Box::new(vars_to_real(b))),
        Type::Vec(a) => Type::Vec(Box::new(vars_to_real(a))),
        Type::Fun(a, b) => Type::fun(vars_to_real(a), vars_to_real(b)),
        Type::Con(c, ts) => Type::Con(*c, each(ts)),
        Type::Int | Type::Real | Type::Bool | Type::Unit => t.clone(),
        Type::Record(..) => vars_to_real(&t.without_records()),
    }
}

/// True if a real occurs in `t`.
fn has_real(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Tuple(ts) => ts.iter().any(has_real),
        Type::Sum(a, b) => has_real(a) || has_real(b),
        Type::Vec(a) => has_real(a),
        _ => false,
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
        Type::Record(..) => is_closed_data(&t.without_records()),
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
            free_vars(&d.body, &bound, &mut |x| {
                if globals.contains(x) {
                    todo.push(x.to_string())
                }
            });
        }
    }
    seen
}

/// Calls `found` for each free variable of `e` (not bound in `e` nor in `bound`).
pub fn free_vars(e: &Expr, bound: &[Name], found: &mut dyn FnMut(&str)) {
    let mut scope = Bound::default();
    bound.iter().for_each(|x| scope.enter(x));
    free_vars_in(e, &mut scope, found);
}

/// The names in scope, each with how many binders of it enclose the point (a
/// map, not a list: deep nests of `let`s would make every lookup linear).
#[derive(Default)]
struct Bound(HashMap<Name, usize>);

impl Bound {
    fn enter(&mut self, x: &str) {
        *self.0.entry(x.to_string()).or_default() += 1;
    }
    fn leave(&mut self, x: &str) {
        if let Some(n) = self.0.get_mut(x) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(x);
            }
        }
    }
    fn contains(&self, x: &str) -> bool {
        self.0.contains_key(x)
    }
}

fn free_vars_in(e: &Expr, bound: &mut Bound, found: &mut dyn FnMut(&str)) {
    let under = |ps: &[&Pat], body: &Expr, bound: &mut Bound, found: &mut dyn FnMut(&str)| {
        ps.iter()
            .for_each(|p| p.for_each_name(&mut |x| bound.enter(x)));
        free_vars_in(body, bound, found);
        ps.iter()
            .for_each(|p| p.for_each_name(&mut |x| bound.leave(x)));
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
            free_vars_in(f, bound, found);
            xs.iter().for_each(|x| free_vars_in(x, bound, found));
        }
        Expr::Let(p, v, b) | Expr::Bind(p, v, b) => {
            free_vars_in(v, bound, found);
            under(&[p], b, bound, found);
        }
        Expr::LetRec {
            name,
            params,
            value,
            body,
        } => {
            let me = Pat::Var(name.clone());
            let ps = rec_scope(&me, params);
            under(&ps, value, bound, found);
            under(&[&me], body, bound, found);
        }
        Expr::Tuple(xs) | Expr::Vector(xs) | Expr::Prim(_, xs) => {
            xs.iter().for_each(|x| free_vars_in(x, bound, found))
        }
        Expr::Proj { tuple, .. } => free_vars_in(tuple, bound, found),
        Expr::Inl(x) | Expr::Inr(x) => free_vars_in(x, bound, found),
        Expr::Case {
            scrutinee,
            left,
            right,
        } => {
            free_vars_in(scrutinee, bound, found);
            under(&[&left.0], &left.1, bound, found);
            under(&[&right.0], &right.1, bound, found);
        }
        Expr::If(a, b, c) => {
            free_vars_in(a, bound, found);
            free_vars_in(b, bound, found);
            free_vars_in(c, bound, found);
        }
        Expr::RunDelta(a, b) => {
            free_vars_in(a, bound, found);
            free_vars_in(b, bound, found);
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
    /// For each base, the suffix to try next (the ones before are taken), so
    /// that making n names from one base costs O(n), not O(n²).
    next_suffix: HashMap<String, usize>,
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
        Names {
            taken,
            next_suffix: HashMap::new(),
        }
    }

    /// `base` if unused, else `base1`, `base2`, … ; the name is then taken.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let i = self.next_suffix.entry(base.to_string()).or_insert(1);
        while self.taken.contains(&name) || reserved(&name) {
            name = format!("{base}{i}");
            *i += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

/// The translated name and kind of each definition a translation uses.
pub type Globals = HashMap<String, (String, GlobalKind)>;

/// What every translation tracks while it walks one definition: which names
/// are in scope (a local binder shadows a definition of the same name), and
/// the supply of fresh names.
pub struct Scope<'a> {
    /// The definition being translated, for messages.
    pub def: &'a str,
    globals: &'a Globals,
    /// Fresh names.
    pub names: &'a mut Names,
    locals: Vec<Name>,
}

impl<'a> Scope<'a> {
    /// The scope at the top of definition `d`'s body: its parameters bound.
    pub fn new(d: &'a Def, globals: &'a Globals, names: &'a mut Names) -> Scope<'a> {
        let mut s = Scope {
            def: &d.name,
            globals,
            names,
            locals: Vec::new(),
        };
        s.bind(&d.params.iter().collect::<Vec<_>>());
        s
    }

    /// The translated name and kind of `x` if it refers to a definition.
    pub fn global(&self, x: &str) -> Option<&(String, GlobalKind)> {
        if self.locals.iter().any(|l| l == x) {
            return None;
        }
        self.globals.get(x)
    }

    /// Brings the names of `pats` into scope; returns the mark to [`Scope::unbind`] to.
    pub fn bind(&mut self, pats: &[&Pat]) -> usize {
        let mark = self.locals.len();
        for p in pats {
            pattern_names(p, &mut self.locals);
        }
        mark
    }

    /// Ends the scope begun at `mark`.
    pub fn unbind(&mut self, mark: usize) {
        self.locals.truncate(mark);
    }

    /// An error about the definition being translated.
    pub fn unsupported(&self, what: impl Into<String>) -> TranslateError {
        TranslateError::Unsupported {
            def: self.def.to_string(),
            what: what.into(),
        }
    }

    /// Fails cleanly instead of overflowing the native stack on deep input.
    pub fn check_depth(&self) -> TResult<()> {
        match crate::stack::check() {
            Ok(()) => Ok(()),
            Err(_) => Err(self.unsupported("the program is nested too deeply to translate")),
        }
    }

    /// Refuses the differentiation operators (see [`TranslateError::NestedDerivative`]).
    pub fn check_derivative(&self, p: &crate::core::named::PrimAt) -> TResult<()> {
        match p.prim.is_derivative() {
            true => Err(TranslateError::NestedDerivative {
                def: self.def.to_string(),
                op: p.prim.info().name,
            }),
            false => Ok(()),
        }
    }
}

/// A real operand of a primitive, taken apart: its primal (a variable or a
/// literal) and what the mode pairs it with — tangent, Delta or cell — as a
/// variable, or `None` when that is statically zero (a literal operand).
pub struct Operand {
    /// The primal.
    pub primal: Expr,
    /// Its tangent (or Delta), if not statically zero.
    pub tangent: Option<Expr>,
}

/// What a binding made by [`take_apart`] takes apart.
pub enum Part {
    /// The translation of argument `i` (a compound expression).
    Arg(usize),
    /// The variable (or definition) of that name.
    Var(Name),
}

/// The first step of every real rule (Krawiec et al. Fig. 3, 9, 14): take
/// the operands apart into primal and tangent names. A literal `r` is
/// `(r, zero)` and binds nothing; compound operands are bound in order
/// (`(a, da)`), then variables (`(x1, dx)` for `x`, once however often it
/// occurs). `is_variable` says which variables can be taken apart directly.
/// Returns the bindings, in order, and the operands.
pub fn take_apart(
    scope: &mut Scope,
    args: &[Expr],
    prefix: &str,
    is_variable: impl Fn(&Scope, &str) -> bool,
) -> (Vec<(Pat, Part)>, Vec<Operand>) {
    let mut bindings = Vec::new();
    let mut operands = Vec::new();
    let mut variables: Vec<(Name, usize)> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let (primal, tangent) = match a {
            Expr::Lit(crate::core::Lit::Real(r)) => (real(*r), None),
            Expr::Var(x) if is_variable(scope, x) => {
                variables.push((x.clone(), i));
                (var(x), None)
            }
            _ => {
                let (x, dx) = (
                    scope.names.fresh("a"),
                    scope.names.fresh(&format!("{prefix}a")),
                );
                bindings.push((Pat::pair(&x, &dx), Part::Arg(i)));
                (var(x), Some(var(dx)))
            }
        };
        operands.push(Operand { primal, tangent });
    }
    let mut done: HashMap<Name, (Name, Name)> = HashMap::new();
    for (x, i) in variables {
        let (x1, dx) = match done.get(&x) {
            Some(names) => names.clone(),
            None => {
                let names = (
                    scope.names.fresh(&x),
                    scope.names.fresh(&format!("{prefix}{x}")),
                );
                bindings.push((Pat::pair(&names.0, &names.1), Part::Var(x.clone())));
                done.insert(x, names.clone());
                names
            }
        };
        operands[i] = Operand {
            primal: var(x1),
            tangent: Some(var(dx)),
        };
    }
    (bindings, operands)
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
pub fn global_table(
    program: &Program,
    used: &HashSet<String>,
    mode: Mode,
) -> HashMap<String, (String, GlobalKind)> {
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
        free_vars(e, &[], &mut |x| ok &= globals.contains(x));
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
    let arg = |i: usize| {
        call.args
            .get(i)
            .cloned()
            .unwrap_or(Expr::Lit(crate::core::Lit::Unit))
    };
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
            let pullback = lam(
                vec![Pat::var(&dt)],
                app(vjp(), vec![pair(var(&x), var(&dt))]),
            );
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
    out.defs
        .extend(program.defs.iter().filter(|d| d.name != "main").cloned());
    out.defs.extend(translated.defs);
    out.defs.push(Def {
        name: "main".into(),
        params: Vec::new(),
        body: let_(Pat::var(&x), arg(0), body),
        ty: None,
    });
    Ok(out)
}

fn flatten_def(mut d: Def) -> Def {
    d.body = share_destructuring(flatten(d.body));
    d
}

/// Renumbers the names a translation introduced in the order they are bound
/// (`a`, `a1`, `a2`, … top to bottom), so the output reads in sequence; the
/// source's own names are kept. Introduced names are bound exactly once, so
/// renaming them cannot capture.
fn renumber(program: &mut Program, source: &Program) {
    let mut original = HashSet::new();
    for d in &source.defs {
        original.insert(d.name.clone());
        d.params.iter().for_each(|p| {
            p.for_each_name(&mut |x| {
                original.insert(x.to_string());
            })
        });
        d.body.for_each_name(&mut |x| {
            original.insert(x.to_string());
        });
    }
    let mut names = Names::new(source);
    for d in &program.defs {
        names.taken.insert(d.name.clone());
    }
    // The wrappers' names are chosen to match Figure 16; keep them.
    for d in program
        .defs
        .iter_mut()
        .filter(|d| !d.name.ends_with("_jvp") && !d.name.ends_with("_vjp"))
    {
        let mut binders = Vec::new();
        d.params.iter().for_each(|p| pattern_names(p, &mut binders));
        binders_of(&d.body, &mut binders);
        let mut map: Vec<(String, String)> = Vec::new();
        let mut renamed = HashSet::new();
        for b in binders {
            if original.contains(&b) || !renamed.insert(b.clone()) {
                continue;
            }
            let base = b.trim_end_matches(|c: char| c.is_ascii_digit());
            let base = if base.is_empty() { b.as_str() } else { base };
            map.push((b.clone(), names.fresh(base)));
        }
        let pairs: Renaming = map.into_iter().collect();
        d.params.iter_mut().for_each(|p| rename_pat(p, &pairs));
        rename_in(&mut d.body, &pairs);
    }
}

fn rename_pat(p: &mut Pat, pairs: &Renaming) {
    match p {
        Pat::Var(x) => {
            if let Some(to) = pairs.get(x.as_str()) {
                *x = (*to).clone();
            }
        }
        Pat::Wild => {}
        Pat::Tuple(ps) => ps.iter_mut().for_each(|q| rename_pat(q, pairs)),
    }
}

/// Along a sequence of bindings, a dual number taken apart again
/// (`let (x2, dx2) = x` after `let (x1, dx1) = x`, with `x` not rebound in
/// between) reuses the first binding's names, unless one of the names is
/// bound more than once in the definition (source code may shadow; the
/// translations' names never are).
///
/// One pass along the spine of bindings: the renamings are collected on the
/// way down and applied to each right-hand side and to the tail once, so a
/// chain of n bindings costs O(n).
fn share_destructuring(e: Expr) -> Expr {
    let mut binders = Vec::new();
    binders_of(&e, &mut binders);
    let mut times_bound: HashMap<Name, usize> = HashMap::new();
    for b in binders {
        *times_bound.entry(b).or_default() += 1;
    }
    let once = |x: &str| times_bound.get(x).is_none_or(|&n| n <= 1);
    share_along(e, &mut HashMap::new(), &mut Renaming::new(), &once)
}

fn share_along(
    e: Expr,
    seen: &mut HashMap<Name, (Name, Name)>,
    renaming: &mut Renaming,
    once: &dyn Fn(&str) -> bool,
) -> Expr {
    let rebinds = |p: &Pat, seen: &mut HashMap<Name, (Name, Name)>| {
        p.for_each_name(&mut |x| {
            seen.remove(x);
        });
    };
    match e {
        // `e1; e2` (CPS code): the rest of the program runs inside `e1`.
        Expr::Let(Pat::Tuple(ps), e1, e2) if ps.is_empty() => {
            let e1 = share_along(*e1, &mut seen.clone(), &mut renaming.clone(), once);
            let e2 = share_along(*e2, seen, renaming, once);
            Expr::Let(Pat::Tuple(ps), Box::new(e1), Box::new(e2))
        }
        Expr::Let(p, v, body) => {
            let v = rename(*v, renaming);
            if let (Pat::Tuple(ps), Expr::Var(x)) = (&p, &v)
                && let [Pat::Var(a), Pat::Var(b)] = &ps[..]
            {
                if let Some((a0, b0)) = seen.get(x).cloned()
                    && [a, b, &a0, &b0].iter().all(|n| once(n))
                {
                    renaming.insert(a.clone(), a0);
                    renaming.insert(b.clone(), b0);
                    return share_along(*body, seen, renaming, once);
                }
                let (a, b, x) = (a.clone(), b.clone(), x.clone());
                rebinds(&p, seen);
                seen.insert(x, (a, b));
                return Expr::Let(
                    p,
                    Box::new(v),
                    Box::new(share_along(*body, seen, renaming, once)),
                );
            }
            rebinds(&p, seen);
            Expr::Let(
                p,
                Box::new(v),
                Box::new(share_along(*body, seen, renaming, once)),
            )
        }
        Expr::Bind(p, m, rest) => {
            let m = rename(*m, renaming);
            rebinds(&p, seen);
            Expr::Bind(
                p,
                Box::new(m),
                Box::new(share_along(*rest, seen, renaming, once)),
            )
        }
        e => rename(e, renaming),
    }
}

/// Names to rename, each to its new name.
type Renaming = HashMap<Name, Name>;

/// `e` with the names `from` renamed `to`, binders and uses alike (the
/// callers rename names bound once, to fresh names: no capture possible).
fn rename(e: Expr, pairs: &Renaming) -> Expr {
    let mut e = e;
    if !pairs.is_empty() {
        rename_in(&mut e, pairs);
    }
    e
}

fn rename_in(e: &mut Expr, pairs: &Renaming) {
    let pat = |p: &mut Pat| rename_pat(p, pairs);
    match e {
        Expr::Var(x) => {
            if let Some(to) = pairs.get(x.as_str()) {
                *x = (*to).clone();
            }
        }
        Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..) => {}
        Expr::Lam(ps, b) => {
            ps.iter_mut().for_each(pat);
            rename_in(b, pairs);
        }
        Expr::Inl(b) | Expr::Inr(b) => rename_in(b, pairs),
        Expr::Proj { tuple, .. } => rename_in(tuple, pairs),
        Expr::App(f, xs) => {
            rename_in(f, pairs);
            xs.iter_mut().for_each(|x| rename_in(x, pairs));
        }
        Expr::Let(p, a, b) | Expr::Bind(p, a, b) => {
            pat(p);
            rename_in(a, pairs);
            rename_in(b, pairs);
        }
        Expr::RunDelta(a, b) => {
            rename_in(a, pairs);
            rename_in(b, pairs);
        }
        Expr::LetRec {
            name,
            params,
            value,
            body,
        } => {
            if let Some(to) = pairs.get(name.as_str()) {
                *name = (*to).clone();
            }
            params.iter_mut().for_each(pat);
            rename_in(value, pairs);
            rename_in(body, pairs);
        }
        Expr::Tuple(xs) | Expr::Vector(xs) | Expr::Prim(_, xs) => {
            xs.iter_mut().for_each(|x| rename_in(x, pairs))
        }
        Expr::Case {
            scrutinee,
            left,
            right,
        } => {
            rename_in(scrutinee, pairs);
            pat(&mut left.0);
            pat(&mut right.0);
            rename_in(&mut left.1, pairs);
            rename_in(&mut right.1, pairs);
        }
        Expr::If(a, b, c) => {
            rename_in(a, pairs);
            rename_in(b, pairs);
            rename_in(c, pairs);
        }
    }
}

/// Appends every name a pattern inside `e` binds.
fn binders_of(e: &Expr, out: &mut Vec<Name>) {
    e.for_each(&mut |e| match e {
        Expr::Lam(ps, _) => ps.iter().for_each(|p| pattern_names(p, out)),
        Expr::Let(p, ..) | Expr::Bind(p, ..) => pattern_names(p, out),
        Expr::LetRec { name, params, .. } => {
            out.push(name.clone());
            params.iter().for_each(|p| pattern_names(p, out));
        }
        Expr::Case { left, right, .. } => {
            pattern_names(&left.0, out);
            pattern_names(&right.0, out);
        }
        _ => {}
    });
}

/// Floats bindings out of the right-hand sides of bindings, so a translation
/// reads as one sequence of steps rather than a staircase:
///
/// - `let p = (let q = e1 in e2) in e3` ⇒ `let q = e1 in let p = e2 in e3`
/// - `do { p <- do { q <- m1; m2 }; m3 }` ⇒ `do { q <- m1; p <- m2; m3 }`
///   (the monad's associativity law), and likewise for a `let` inside a bind.
///
/// Each step is only taken when the names `q` binds are not free in `e3`/`m3`
/// (always the case for the translations' fresh names), so meaning is kept.
/// The free variables of every subexpression are computed on the way up, once,
/// so that a chain of n bindings is flattened in O(n) set operations rather than
/// by walking the rest of the chain at every step.
pub fn flatten(e: Expr) -> Expr {
    let mut size = 0u64;
    e.for_each(&mut |_| size += 1);
    FLOAT_STEPS.set(FLOAT_STEPS_PER_NODE * size + 10_000);
    flatten_free(e).0
}

/// Floating is linear along chains of bindings, but a binding nested n levels
/// deep in right-hand sides (`sin (sin (… x))` translated) is floated out of each
/// of them, n² steps in all. Floating only changes how the output reads, so once
/// this many steps per node of the input are spent, the remaining bindings stay
/// where they are.
const FLOAT_STEPS_PER_NODE: u64 = 16;

thread_local! {
    /// Floating steps left in the current [`flatten`].
    static FLOAT_STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A set of free variables.
type Free = HashSet<Name>;

/// `a ∪ b`, merging the smaller set into the larger.
fn union(a: Free, b: Free) -> Free {
    let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    big.extend(small);
    big
}

/// `free` without the names `ps` bind.
fn minus(mut free: Free, ps: &[&Pat]) -> Free {
    ps.iter().for_each(|p| {
        p.for_each_name(&mut |x| {
            free.remove(x);
        })
    });
    free
}

/// [`flatten`], and the free variables of the result.
fn flatten_free(e: Expr) -> (Expr, Free) {
    if crate::stack::check().is_err() {
        let mut free = Free::new();
        free_vars(&e, &[], &mut |x| {
            free.insert(x.to_string());
        });
        return (e, free);
    }
    let all = |xs: Vec<Expr>| {
        let mut free = Free::new();
        let xs = xs
            .into_iter()
            .map(|x| {
                let (x, f) = flatten_free(x);
                free = union(std::mem::take(&mut free), f);
                x
            })
            .collect::<Vec<_>>();
        (xs, free)
    };
    match e {
        Expr::Let(p, v, body) => {
            let (v, fv) = flatten_free(*v);
            let (body, fb) = flatten_free(*body);
            let e = float(p.clone(), v, body, &fb, false);
            (e, union(fv, minus(fb, &[&p])))
        }
        Expr::Bind(p, m, rest) => {
            let (m, fm) = flatten_free(*m);
            let (rest, fr) = flatten_free(*rest);
            let e = float(p.clone(), m, rest, &fr, true);
            (e, union(fm, minus(fr, &[&p])))
        }
        Expr::Lam(ps, b) => {
            let (b, fb) = flatten_free(*b);
            let free = minus(fb, &ps.iter().collect::<Vec<_>>());
            (Expr::Lam(ps, Box::new(b)), free)
        }
        Expr::App(f, xs) => {
            let (f, ff) = flatten_free(*f);
            let (xs, fx) = all(xs);
            (Expr::App(Box::new(f), xs), union(ff, fx))
        }
        Expr::LetRec {
            name,
            params,
            value,
            body,
        } => {
            let me = Pat::Var(name.clone());
            let (value, fv) = flatten_free(*value);
            let (body, fb) = flatten_free(*body);
            let scope = rec_scope(&me, &params);
            let free = union(minus(fv, &scope), minus(fb, &[&me]));
            let e = Expr::LetRec {
                name,
                params,
                value: Box::new(value),
                body: Box::new(body),
            };
            (e, free)
        }
        Expr::Tuple(xs) => {
            let (xs, free) = all(xs);
            (Expr::Tuple(xs), free)
        }
        Expr::Vector(xs) => {
            let (xs, free) = all(xs);
            (Expr::Vector(xs), free)
        }
        Expr::Prim(p, xs) => {
            let (xs, free) = all(xs);
            (Expr::Prim(p, xs), free)
        }
        Expr::Proj {
            tuple,
            index,
            arity,
        } => {
            let (tuple, free) = flatten_free(*tuple);
            let e = Expr::Proj {
                tuple: Box::new(tuple),
                index,
                arity,
            };
            (e, free)
        }
        Expr::Inl(x) => {
            let (x, free) = flatten_free(*x);
            (Expr::Inl(Box::new(x)), free)
        }
        Expr::Inr(x) => {
            let (x, free) = flatten_free(*x);
            (Expr::Inr(Box::new(x)), free)
        }
        Expr::Case {
            scrutinee,
            left,
            right,
        } => {
            let (scrutinee, fs) = flatten_free(*scrutinee);
            let (l, fl) = flatten_free(*left.1);
            let (r, fr) = flatten_free(*right.1);
            let free = union(fs, union(minus(fl, &[&left.0]), minus(fr, &[&right.0])));
            let e = Expr::Case {
                scrutinee: Box::new(scrutinee),
                left: (left.0, Box::new(l)),
                right: (right.0, Box::new(r)),
            };
            (e, free)
        }
        Expr::If(a, b, c) => {
            let (a, fa) = flatten_free(*a);
            let (b, fb) = flatten_free(*b);
            let (c, fc) = flatten_free(*c);
            let free = union(fa, union(fb, fc));
            (Expr::If(Box::new(a), Box::new(b), Box::new(c)), free)
        }
        Expr::RunDelta(a, b) => {
            let (a, fa) = flatten_free(*a);
            let (b, fb) = flatten_free(*b);
            (Expr::RunDelta(Box::new(a), Box::new(b)), union(fa, fb))
        }
        Expr::Var(x) => {
            let free = Free::from([x.clone()]);
            (Expr::Var(x), free)
        }
        e @ (Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..)) => (e, Free::new()),
    }
}

/// `let p = v in body` (or `do { p <- v; body }` when `monadic`), with the
/// bindings at the head of `v` floated out where that keeps the meaning;
/// `body_free` holds the free variables of `body`.
fn float(p: Pat, v: Expr, body: Expr, body_free: &Free, monadic: bool) -> Expr {
    let rebuild = |p: Pat, v: Expr, body: Expr| match v {
        // do { p <- pure e; rest } = let p = e in rest (left identity)
        Expr::Prim(q, mut a) if monadic && q.prim == Prim::Pure && a.len() == 1 => {
            Expr::Let(p, Box::new(a.remove(0)), Box::new(body))
        }
        v if monadic => Expr::Bind(p, Box::new(v), Box::new(body)),
        v => Expr::Let(p, Box::new(v), Box::new(body)),
    };
    let steps = FLOAT_STEPS.get();
    if steps == 0 {
        return rebuild(p, v, body);
    }
    FLOAT_STEPS.set(steps - 1);
    let captures = |q: &Pat| {
        let mut hit = false;
        q.for_each_name(&mut |x| hit |= x == "_" || body_free.contains(x));
        hit
    };
    match v {
        // A `let` heading a right-hand side floats out of a `let` or a bind.
        Expr::Let(q, e1, e2) if !captures(&q) && !shadows(&p, &q) => {
            Expr::Let(q, e1, Box::new(float(p, *e2, body, body_free, monadic)))
        }
        // A bind heading a computation floats out of a bind (associativity).
        Expr::Bind(q, m1, m2) if monadic && !captures(&q) && !shadows(&p, &q) => {
            Expr::Bind(q, m1, Box::new(float(p, *m2, body, body_free, true)))
        }
        v => rebuild(p, v, body),
    }
}

/// True if `p` and `q` bind a name in common.
fn shadows(p: &Pat, q: &Pat) -> bool {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    pattern_names(p, &mut a);
    pattern_names(q, &mut b);
    a.iter().any(|x| b.contains(x))
}

/// `program` with the binders of each definition made distinct (Barendregt's
/// convention): a binder whose name is already bound in the same definition,
/// or names a definition the body refers to, is renamed to a fresh name, and
/// its uses with it. Programs without repeated names are returned unchanged.
///
/// The translations need it: CPS hands the value of an operand to the rest of
/// the program as an expression, and the rest is generated *inside* the scopes
/// of the operands that follow, so in `x * (let x = 2.0 in x)` the outer `x`
/// would be captured by the inner binder; let floating moves binders outward
/// in the same way.
pub fn with_distinct_binders(program: &Program) -> TResult<Program> {
    let globals: HashSet<&str> = program.defs.iter().map(|d| d.name.as_str()).collect();
    let mut names = Names::new(program);
    let mut out = program.clone();
    for d in &mut out.defs {
        let mut walk = Distinct {
            def: &d.name,
            names: &mut names,
            seen: HashSet::new(),
            scope: HashMap::new(),
        };
        d.body.for_each(&mut |e| {
            if let Expr::Var(x) = e
                && globals.contains(x.as_str())
            {
                walk.seen.insert(x.clone());
            }
        });
        let mut undo = Vec::new();
        for p in &mut d.params {
            walk.bind(p, &mut undo);
        }
        walk.expr(&mut d.body)?;
    }
    Ok(out)
}

/// The walk of [`with_distinct_binders`] over one definition.
struct Distinct<'a> {
    def: &'a str,
    names: &'a mut Names,
    /// Every name bound so far in the definition, and the definitions it uses.
    seen: HashSet<Name>,
    /// What each source name in scope is now called, innermost last.
    scope: HashMap<Name, Vec<Name>>,
}

impl Distinct<'_> {
    /// Renames the binders of `p` that are not distinct and brings them into
    /// scope, recording each in `undo` for [`Distinct::unbind`].
    fn bind(&mut self, p: &mut Pat, undo: &mut Vec<Name>) {
        match p {
            Pat::Var(x) => {
                let source = x.clone();
                if !self.seen.insert(x.clone()) {
                    *x = self.names.fresh(&source);
                    self.seen.insert(x.clone());
                }
                self.scope
                    .entry(source.clone())
                    .or_default()
                    .push(x.clone());
                undo.push(source);
            }
            Pat::Wild => {}
            Pat::Tuple(ps) => ps.iter_mut().for_each(|q| self.bind(q, undo)),
        }
    }

    fn unbind(&mut self, undo: Vec<Name>) {
        for source in undo {
            if let Some(stack) = self.scope.get_mut(&source) {
                stack.pop();
            }
        }
    }

    /// `e` under `pats`, which are bound for it alone.
    fn under(&mut self, pats: &mut [&mut Pat], e: &mut Expr) -> TResult<()> {
        let mut undo = Vec::new();
        for p in pats.iter_mut() {
            self.bind(p, &mut undo);
        }
        let r = self.expr(e);
        self.unbind(undo);
        r
    }

    fn expr(&mut self, e: &mut Expr) -> TResult<()> {
        if crate::stack::check().is_err() {
            return Err(TranslateError::Unsupported {
                def: self.def.to_string(),
                what: "the program is nested too deeply to translate".into(),
            });
        }
        match e {
            Expr::Var(x) => {
                if let Some(now) = self.scope.get(x.as_str()).and_then(|s| s.last()) {
                    *x = now.clone();
                }
                Ok(())
            }
            Expr::Lit(_) | Expr::PrimRef(_) | Expr::Poly(..) => Ok(()),
            Expr::Lam(ps, b) => self.under(&mut ps.iter_mut().collect::<Vec<_>>(), b),
            Expr::Inl(b) | Expr::Inr(b) | Expr::Proj { tuple: b, .. } => self.expr(b),
            Expr::App(f, xs) => {
                self.expr(f)?;
                xs.iter_mut().try_for_each(|x| self.expr(x))
            }
            Expr::Let(p, a, b) | Expr::Bind(p, a, b) => {
                self.expr(a)?;
                self.under(&mut [p], b)
            }
            Expr::RunDelta(a, b) => {
                self.expr(a)?;
                self.expr(b)
            }
            Expr::LetRec {
                name,
                params,
                value,
                body,
            } => {
                let mut me = Pat::Var(name.clone());
                let mut undo = Vec::new();
                self.bind(&mut me, &mut undo);
                let r = self
                    .under(&mut params.iter_mut().collect::<Vec<_>>(), value)
                    .and_then(|()| self.expr(body));
                self.unbind(undo);
                if let Pat::Var(renamed) = me {
                    *name = renamed;
                }
                r
            }
            Expr::Tuple(xs) | Expr::Vector(xs) | Expr::Prim(_, xs) => {
                xs.iter_mut().try_for_each(|x| self.expr(x))
            }
            Expr::Case {
                scrutinee,
                left,
                right,
            } => {
                self.expr(scrutinee)?;
                self.under(&mut [&mut left.0], &mut left.1)?;
                self.under(&mut [&mut right.0], &mut right.1)
            }
            Expr::If(a, b, c) => {
                self.expr(a)?;
                self.expr(b)?;
                self.expr(c)
            }
        }
    }
}
