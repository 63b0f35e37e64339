//! Scalar replacement of small vectors, a typed-IR-to-typed-IR pass run
//! before code generation.
//!
//! A vector of 2 to [`MAX_LEN`] elements without heap parts (reals, Ints,
//! Bools, tuples of them) whose length is known at compile time becomes a
//! tuple, which the code generator keeps in registers, wherever its length
//! is known: `[x, y]`, `build 2 f`, `build (size u) f` and `map f u` of such
//! a `u`, the locals they are bound to, the components of tuples, globals
//! (except the one the host reads), and the arguments and results of direct
//! calls — a function is copied per shape
//! of its arguments (and per renaming of what it captures), so
//! `go x' (build 2 …)` passes two reals. On such a tuple, `v[i]` is a
//! projection (a constant index: an unrolled `build`'s element function is
//! copied per index), `size` a constant, `sum` the additions in order, `map`
//! and `build` the element function's calls in order, `fold` its steps in
//! order. A closure applied
//! to such a tuple, where every closure that can reach the application is
//! known, calls a copy of its function for the tuple ([`Pass::apply`]).
//! Anywhere else — the argument of another closure, an element of a vector,
//! `trace`, a sum, one arm of an `if` whose other arm is a vector of
//! unknown length — the vector
//! is made again from its elements — for a local, once, where it is bound
//! (one allocation, as when the vector was built there) — and the program
//! means the same: the same evaluations in the same order and the same
//! errors (an index out of range indexes the vector made again, at the same
//! position).
//!
//! Every binding gets a fresh local (so each copy's locals can have their
//! own types), and only what the entry and the globals reach is kept.
//!
//! Nested differentiation names functions by their code: an
//! [`ExprKind::Recode`] swaps a closure's code `from` for `to`, which has
//! `from`'s captures. Every closure copy of `from` is made with a copy of
//! each such `to` over the same (renamed) captures, and the recodings list
//! those pairs; the two copies' captures are made the same list, so a
//! closure of one is read as the other's.

use crate::layout::width;
use crate::marshal;
use nabla_lang::core::flow::Flow;
use nabla_lang::core::lower_typed::Entry;
use nabla_lang::core::typed::{
    Expr, ExprKind, Fun, FunId, Global, GlobalId, Lit, Local, LocalInfo, Pat, Program, TapeOp,
    int_lit,
};
use nabla_lang::prim::Prim;
use nabla_lang::syntax::span::Span;
use nabla_lang::types::Type;
use std::collections::HashMap;

/// The longest vector kept as a tuple (an unknown index is a chain of
/// `select`s over its elements).
const MAX_LEN: usize = 4;

/// The largest element function an unrolled `build` or `map` calls once per
/// element (the code generator inlines calls of bodies this small; a larger
/// one is better off in a loop).
const MAX_UNROLLED_BODY: usize = 72;

/// The most scalars a copy's parameters, or its result, may flatten to (the
/// code generator's limit is 200).
const MAX_FLAT: usize = 100;

/// How many copies of functions the pass may make, per function of the
/// program; beyond it, calls pass vectors as vectors.
const COPIES_PER_FUN: usize = 4;

/// Whether direct copies are made within the budget: always, but tests
/// turn them off in a last run to send every direct application through
/// the wrapper made past the budget ([`Pass::wrapper`]), which real
/// programs rarely reach.
fn direct_copies_allowed() -> bool {
    #[cfg(test)]
    return tests::DIRECT_COPIES.get();
    #[cfg(not(test))]
    true
}

/// What is known at compile time about a value's representation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Shape {
    /// As its type says.
    Any,
    /// A vector of this many elements, kept as a tuple.
    Len(usize),
    /// A tuple with some component not [`Shape::Any`].
    Tuple(Vec<Shape>),
    /// An Int that is this constant (represented as any Int).
    Int(i64),
}

impl Shape {
    fn tuple(ss: Vec<Shape>) -> Shape {
        if ss.iter().any(Shape::converted) {
            Shape::Tuple(ss)
        } else {
            Shape::Any
        }
    }

    /// True if the representation differs from the type's.
    fn converted(&self) -> bool {
        match self {
            Shape::Len(_) => true,
            Shape::Tuple(ss) => ss.iter().any(Shape::converted),
            Shape::Any | Shape::Int(_) => false,
        }
    }

    /// The representation alone (constants forgotten): what a function's
    /// parameters and results are copied by.
    fn repr(&self) -> Shape {
        match self {
            Shape::Int(_) => Shape::Any,
            Shape::Tuple(ss) => Shape::tuple(ss.iter().map(Shape::repr).collect()),
            s => s.clone(),
        }
    }

    /// What both values can be represented as (the join of two arms).
    fn meet(&self, other: &Shape) -> Shape {
        match (self, other) {
            _ if self == other => self.clone(),
            (Shape::Tuple(a), Shape::Tuple(b)) if a.len() == b.len() => {
                Shape::tuple(a.iter().zip(b).map(|(x, y)| x.meet(y)).collect())
            }
            _ => Shape::Any,
        }
    }
}

/// The type of a value of type `ty` represented as `s`.
fn repr_ty(ty: &Type, s: &Shape) -> Type {
    match (s, ty) {
        (Shape::Len(n), Type::Vec(e)) => Type::Tuple(vec![(**e).clone(); *n]),
        (Shape::Tuple(ss), Type::Tuple(ts)) => {
            Type::Tuple(ts.iter().zip(ss).map(|(t, s)| repr_ty(t, s)).collect())
        }
        _ => ty.clone(),
    }
}

/// A type whose values have no heap parts.
fn plain_data(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(plain_data),
        _ => false,
    }
}

fn mk(kind: ExprKind, ty: Type, span: Span) -> Expr {
    Expr { kind, ty, span }
}

/// The pairs of every [`ExprKind::Recode`] in `e`, added to `out`.
fn recode_pairs(e: &Expr, out: &mut Vec<(FunId, FunId)>) {
    if let ExprKind::Recode { cases, .. } = &e.kind {
        out.extend(cases);
    }
    e.for_each_child(|c| recode_pairs(c, out));
}

/// True if `to` has `from`'s captures (their types, in order), as
/// [`ExprKind::Recode`] promises.
fn same_captures(src: &Program, from: FunId, to: FunId) -> bool {
    let types = |f: FunId| {
        let caps = &src.fun(f).captures;
        caps.iter().map(|&l| src.local_ty(l)).collect::<Vec<_>>()
    };
    types(from) == types(to)
}

fn nodes(e: &Expr) -> usize {
    let mut n = 1;
    e.for_each_child(|c| n += nodes(c));
    n
}

/// How a copy of a function is called.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Use {
    /// Directly, by [`ExprKind::Call`]: its result may be kept as tuples.
    Call,
    /// As a closure's code: its result is represented as its type says.
    Closure,
    /// Directly over the captures of a closure (of a copy with the same
    /// captures), where the closure is applied to an argument kept as
    /// tuples: its result is represented as this shape says (the shape the
    /// runs before found for it, [`Known::results`]).
    Direct(Shape),
}

/// One copy of a function: which, with what captures (after renaming),
/// parameters of what shapes, called how.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    fun: FunId,
    captures: Vec<Local>,
    params: Vec<Shape>,
    called: Use,
}

/// For each function whose closures are applied to an argument kept as
/// tuples: the function called instead (itself, or a recoding's target)
/// and the argument's shape.
type Directs = HashMap<FunId, Vec<(FunId, Shape)>>;

/// The result shapes of the direct copies of a run: by function (original)
/// and argument shape, what every copy's body gives (their meet).
type Results = HashMap<(FunId, Shape), Shape>;

/// What the runs of the pass before this one found.
#[derive(Default)]
struct Known {
    /// The direct copies to make with every closure copy.
    wanted: Directs,
    /// The shapes their results are represented as.
    results: Results,
}

impl Known {
    /// The shape the direct copies of `to` for an argument of shape `arg`
    /// give their result as.
    fn result(&self, to: FunId, arg: &Shape) -> Shape {
        let found = self.results.get(&(to, arg.clone()));
        found.cloned().unwrap_or(Shape::Any)
    }
}

/// True if a value represented as `from` can be represented as `to` by
/// making vectors again ([`Pass::coerce`]).
fn covers(from: &Shape, to: &Shape) -> bool {
    match (from, to) {
        (_, Shape::Any) => true,
        (Shape::Tuple(fs), Shape::Tuple(ts)) => {
            fs.len() == ts.len() && fs.iter().zip(ts).all(|(f, t)| covers(f, t))
        }
        _ => from == to,
    }
}

/// How many times the pass runs at most: each run makes the direct copies
/// the applications found by the runs before ask for (a direct copy's body
/// may have such applications of its own), with the result shapes found
/// by the run before.
const MAX_RUNS: usize = 4;

/// The locals in scope: their new ids and shapes.
type Env = HashMap<Local, (Local, Shape)>;

struct Pass<'p> {
    src: &'p Program,
    locals: Vec<LocalInfo>,
    /// The copies made, by new id (`None` while being made).
    funs: Vec<Option<Fun>>,
    /// The function each copy is of, by new id.
    origins: Vec<FunId>,
    copies: HashMap<Key, FunId>,
    /// Each copy's result shape, `None` while its body is being made; a
    /// recursive call then sees [`Shape::Any`] and the copy is marked, so
    /// that its result is made `Any` too.
    rets: Vec<Option<Shape>>,
    early: Vec<bool>,
    /// The vector made again from a local kept as a tuple, for where it
    /// must be a vector: made once, where the local is bound (so at most
    /// one allocation per binding, as when it was a vector).
    remade: HashMap<Local, Local>,
    /// Each global's new body and shape, once made.
    globals: Vec<Option<(Expr, Shape)>>,
    /// Globals being made, and whether they were used meanwhile (a global
    /// that depends on itself is left a vector).
    making: HashMap<GlobalId, bool>,
    /// The global the host reads (kept as its type says).
    entry_global: Option<GlobalId>,
    max_len: usize,
    max_copies: usize,
    /// For each function a recoding may take a closure's code from, the
    /// functions it gives the closure instead (original ids).
    recode_targets: HashMap<FunId, Vec<FunId>>,
    /// The closure copies of each original function.
    closure_copies: HashMap<FunId, Vec<FunId>>,
    /// (closure copy of `from`, original `to`) to the copy of `to` over the
    /// same captures.
    recoded: HashMap<(FunId, FunId), FunId>,
    /// Which closures can reach which application (of the original program).
    flow: &'p Flow,
    /// The direct copies to make with every closure copy, and their result
    /// shapes (found by the runs before this one).
    known: &'p Known,
    /// The direct copies the applications of this run ask for.
    asked: Directs,
    /// The result shapes of the direct copies of this run.
    results: Results,
    /// (closure copy of `from`, original `to`, argument shape) to the
    /// direct copy of `to` over the same captures.
    direct: HashMap<(FunId, FunId, Shape), FunId>,
}

/// The program with small vectors kept as tuples.
pub(crate) struct Rewritten {
    /// The new program.
    pub prog: Program,
    /// Its entry.
    pub entry: Entry,
    /// Each new function's original, by new id.
    pub origins: Vec<FunId>,
}

/// `src` with small vectors kept as tuples.
pub(crate) fn rewrite(src: &Program, entry: Entry, max_vector_len: usize) -> Rewritten {
    let mut pairs = Vec::new();
    for body in src.funs.iter().map(|f| &f.body) {
        recode_pairs(body, &mut pairs);
    }
    for body in src.globals.iter().map(|g| &g.body) {
        recode_pairs(body, &mut pairs);
    }
    if !pairs.iter().all(|&(from, to)| same_captures(src, from, to)) {
        return Rewritten {
            prog: src.clone(),
            entry,
            origins: (0..src.funs.len() as u32).map(FunId).collect(),
        };
    }
    let mut recode_targets: HashMap<FunId, Vec<FunId>> = HashMap::new();
    for (from, to) in pairs {
        let targets = recode_targets.entry(from).or_default();
        if !targets.contains(&to) {
            targets.push(to);
        }
    }
    let flow = Flow::solve(src);
    let mut known = Known::default();
    let mut run = 1;
    loop {
        let (out, asked, results) =
            rewrite_once(src, entry, max_vector_len, &recode_targets, &flow, &known);
        let mut more = results != known.results;
        known.results = results;
        for (from, calls) in asked {
            let wanted = known.wanted.entry(from).or_default();
            for call in calls {
                if !wanted.contains(&call) {
                    wanted.push(call);
                    more = true;
                }
            }
        }
        if !more || run == MAX_RUNS {
            #[cfg(test)]
            if tests::WRAP_AT_THE_END.get() {
                // One more run with what the runs found, but wrappers for
                // every direct application.
                tests::DIRECT_COPIES.set(false);
                let (out, ..) =
                    rewrite_once(src, entry, max_vector_len, &recode_targets, &flow, &known);
                tests::DIRECT_COPIES.set(true);
                return out;
            }
            return out;
        }
        run += 1;
    }
}

/// One run of the pass, making the direct copies `known` asks for; also
/// returns the direct copies its applications asked for and the shapes of
/// the results of those it made.
fn rewrite_once(
    src: &Program,
    entry: Entry,
    max_vector_len: usize,
    recode_targets: &HashMap<FunId, Vec<FunId>>,
    flow: &Flow,
    known: &Known,
) -> (Rewritten, Directs, Results) {
    let mut p = Pass {
        src,
        locals: src.locals.clone(),
        funs: Vec::new(),
        origins: Vec::new(),
        copies: HashMap::new(),
        rets: Vec::new(),
        early: Vec::new(),
        remade: HashMap::new(),
        globals: vec![None; src.globals.len()],
        making: HashMap::new(),
        entry_global: match entry {
            Entry::Global(g) => Some(g),
            Entry::Fun(_) => None,
        },
        max_len: MAX_LEN.min(max_vector_len),
        max_copies: COPIES_PER_FUN * src.funs.len() + 16,
        recode_targets: recode_targets.clone(),
        closure_copies: HashMap::new(),
        recoded: HashMap::new(),
        flow,
        known,
        asked: Directs::new(),
        results: Results::new(),
        direct: HashMap::new(),
    };
    let entry = match entry {
        Entry::Fun(f) => {
            let params = vec![Shape::Any; src.fun(f).params.len()];
            Entry::Fun(p.copy(f, &Env::new(), params, Use::Closure))
        }
        g => g,
    };
    let mut globals = src.globals.clone();
    for (i, g) in globals.iter_mut().enumerate() {
        let (body, s) = p.global(GlobalId(i as u32));
        g.ty = repr_ty(&g.ty, &s);
        g.body = body;
    }
    let mut funs: Vec<Fun> = std::mem::take(&mut p.funs)
        .into_iter()
        .map(|f| f.expect("every copy is finished"))
        .collect();
    p.fill_recodes(&mut funs, &mut globals);
    let asked = std::mem::take(&mut p.asked);
    let results = std::mem::take(&mut p.results);
    let prog = Program {
        locals: p.locals,
        funs,
        globals,
    };
    let out = Rewritten {
        prog,
        entry,
        origins: p.origins,
    };
    (out, asked, results)
}

impl Pass<'_> {
    /// A new local for `l` (bound to a value of shape `s`), in `env`.
    fn fresh(&mut self, l: Local, s: &Shape, env: &mut Env) -> Local {
        let src = self.src;
        let info = &src.locals[l.0 as usize];
        let new = self.temp(&info.name, repr_ty(&info.ty, s));
        env.insert(l, (new, s.clone()));
        new
    }

    fn temp(&mut self, name: &str, ty: Type) -> Local {
        self.locals.push(LocalInfo {
            name: name.to_string(),
            ty,
        });
        Local(self.locals.len() as u32 - 1)
    }

    fn bind(&mut self, p: &Pat, s: &Shape, env: &mut Env) -> Pat {
        match p {
            Pat::Local(l) => Pat::Local(self.fresh(*l, s, env)),
            Pat::Wild => Pat::Wild,
            Pat::Tuple(ps) => {
                let ss = match s {
                    Shape::Tuple(ss) if ss.len() == ps.len() => ss.clone(),
                    _ => vec![Shape::Any; ps.len()],
                };
                Pat::Tuple(
                    ps.iter()
                        .zip(&ss)
                        .map(|(p, s)| self.bind(p, s, env))
                        .collect(),
                )
            }
        }
    }

    /// The copy of `f` for `params` (made if new), its captures renamed
    /// as in `env`.
    fn copy(&mut self, f: FunId, env: &Env, params: Vec<Shape>, called: Use) -> FunId {
        let src = self.src;
        let fun = src.fun(f);
        let outer: Vec<(Local, (Local, Shape))> = fun
            .captures
            .iter()
            .map(|c| (*c, env.get(c).cloned().unwrap_or((*c, Shape::Any))))
            .collect();
        let key = Key {
            fun: f,
            captures: outer.iter().map(|(_, (n, _))| *n).collect(),
            params: params.clone(),
            called: called.clone(),
        };
        if let Some(&id) = self.copies.get(&key) {
            return id;
        }
        let id = FunId(self.funs.len() as u32);
        self.funs.push(None);
        self.origins.push(f);
        self.rets.push(None);
        self.early.push(false);
        self.copies.insert(key.clone(), id);
        if called == Use::Closure {
            self.closure_copies.entry(f).or_default().push(id);
        }
        let renamed: Vec<(Local, Shape)> = outer.iter().map(|(_, v)| v.clone()).collect();
        let mut inner: Env = outer.into_iter().collect();
        let new_params: Vec<(Pat, Type)> = fun
            .params
            .iter()
            .zip(&params)
            .map(|((p, t), s)| (self.bind(p, s, &mut inner), repr_ty(t, s)))
            .collect();
        let (body, s) = self.expr(&fun.body, &mut inner);
        let natural =
            if self.early[id.0 as usize] || width(&repr_ty(&fun.ret, &s.repr())) > MAX_FLAT {
                Shape::Any
            } else {
                s.repr()
            };
        let ret = match &called {
            Use::Call => natural.clone(),
            Use::Closure => Shape::Any,
            Use::Direct(r) => {
                let key = (f, params[0].clone());
                let met = match self.results.get(&key) {
                    Some(before) => before.meet(&natural),
                    None => natural.clone(),
                };
                self.results.insert(key, met);
                r.clone()
            }
        };
        let body = if covers(&natural, &ret) {
            self.coerce(body, &fun.ret, &s, &ret)
        } else {
            // A shape the run before found and this one did not (not seen:
            // the runs make the same copies): read from the vector, checked.
            let plain = self.coerce(body, &fun.ret, &s, &Shape::Any);
            self.narrow(plain, &fun.ret, &ret)
        };
        let mut bound = Vec::new();
        for (p, _) in &new_params {
            p.for_each_local(&mut |l| bound.push(l));
        }
        let body = self.with_remade(&bound, body);
        if called == Use::Closure {
            self.recode_copies(f, id, &renamed);
            self.direct_copies(f, id, &renamed);
        }
        // A captured tuple's vector is made where the tuple is bound.
        let mut captures = key.captures;
        let remade: Vec<Local> = captures
            .iter()
            .filter_map(|c| self.remade.get(c).copied())
            .collect();
        captures.extend(remade);
        captures.sort();
        self.funs[id.0 as usize] = Some(Fun {
            name: fun.name.clone(),
            captures,
            params: new_params,
            ret: repr_ty(&fun.ret, &ret),
            body,
            span: fun.span,
        });
        self.rets[id.0 as usize] = Some(ret);
        id
    }

    /// The copies of the functions a recoding may give closure copy `id`
    /// of `f` instead, over the same captures (`renamed`, in the order of
    /// `f`'s).
    fn recode_copies(&mut self, f: FunId, id: FunId, renamed: &[(Local, Shape)]) {
        let Some(targets) = self.recode_targets.get(&f).cloned() else {
            return;
        };
        for to in targets {
            let src = self.src;
            let target = src.fun(to);
            let env: Env = target
                .captures
                .iter()
                .copied()
                .zip(renamed.to_vec())
                .collect();
            let params = vec![Shape::Any; target.params.len()];
            let copy = self.copy(to, &env, params, Use::Closure);
            self.recoded.insert((id, to), copy);
        }
    }

    /// The direct copies wanted with closure copy `id` of `f`, over the
    /// same captures (`renamed`, in the order of `f`'s). Past the budget of
    /// copies none is made: the application calls the closure's code then
    /// (`Pass::fill_recodes`).
    fn direct_copies(&mut self, f: FunId, id: FunId, renamed: &[(Local, Shape)]) {
        let Some(calls) = self.known.wanted.get(&f) else {
            return;
        };
        for (to, shape) in calls {
            if self.funs.len() >= self.max_copies || !direct_copies_allowed() {
                return;
            }
            let env: Env = self
                .src
                .fun(*to)
                .captures
                .iter()
                .copied()
                .zip(renamed.to_vec())
                .collect();
            let ret = self.known.result(*to, shape);
            let copy = self.copy(*to, &env, vec![shape.clone()], Use::Direct(ret));
            self.direct.insert((id, *to, shape.clone()), copy);
        }
    }

    /// Lists in each recoding (still naming original functions) the pairs
    /// of copies: every closure copy of a `from` with its copy of `to` — the
    /// recoding's, or where the recoding is an application's made by
    /// [`Pass::apply`], the direct copy for the argument's shape (or, past
    /// the budget of copies, a wrapper that makes the argument a vector and
    /// calls the closure's code). A pair's captures are made one list (a
    /// captured tuple's vector may be needed by one copy only; it is bound
    /// wherever the tuple is).
    fn fill_recodes(&mut self, funs: &mut Vec<Fun>, globals: &mut [Global]) {
        // The bodies are taken out while they are filled: a wrapper is made
        // from its callee's signature in `funs`.
        let mut bodies: Vec<Expr> = funs
            .iter_mut()
            .map(|f| &mut f.body)
            .chain(globals.iter_mut().map(|g| &mut g.body))
            .map(|body| std::mem::replace(body, placeholder()))
            .collect();
        let mut wrappers = Vec::new();
        for body in &mut bodies {
            self.fill(body, funs, &mut wrappers);
        }
        let slots = funs
            .iter_mut()
            .map(|f| &mut f.body)
            .chain(globals.iter_mut().map(|g| &mut g.body));
        for (slot, body) in slots.zip(bodies) {
            *slot = body;
        }
        funs.extend(wrappers);
        let pairs: Vec<(FunId, FunId)> = self
            .recoded
            .iter()
            .map(|(&(from, _), &to)| (from, to))
            .chain(self.direct.iter().map(|(&(from, _, _), &to)| (from, to)))
            .collect();
        // Until no pair differs: a copy may be in several pairs.
        let mut changed = true;
        while changed {
            changed = false;
            for &(from, to) in &pairs {
                let (a, b) = (
                    &funs[from.0 as usize].captures,
                    &funs[to.0 as usize].captures,
                );
                if a == b {
                    continue;
                }
                let mut union: Vec<Local> = a.iter().chain(b).copied().collect();
                union.sort();
                union.dedup();
                funs[from.0 as usize].captures = union.clone();
                funs[to.0 as usize].captures = union;
                changed = true;
            }
        }
    }

    /// [`Pass::fill_recodes`] in `e`; new wrappers are added to `wrappers`
    /// (their ids follow `funs`').
    fn fill(&mut self, e: &mut Expr, funs: &[Fun], wrappers: &mut Vec<Fun>) {
        match &mut e.kind {
            ExprKind::Apply(f, x) => {
                if let ExprKind::Recode { closure, cases, .. } = &mut f.kind {
                    *cases = self.cases(cases, Some(&x.ty), funs, wrappers);
                    self.fill(closure, funs, wrappers);
                    self.fill(x, funs, wrappers);
                    return;
                }
            }
            ExprKind::Recode { cases, .. } => *cases = self.cases(cases, None, funs, wrappers),
            _ => {}
        }
        e.for_each_child_mut(|c| self.fill(c, funs, wrappers));
    }

    /// The pairs of copies of a recoding whose original pairs are `orig`,
    /// applied to an argument of type `arg` if it is.
    fn cases(
        &mut self,
        orig: &[(FunId, FunId)],
        arg: Option<&Type>,
        funs: &[Fun],
        wrappers: &mut Vec<Fun>,
    ) -> Vec<(FunId, FunId)> {
        let mut out = Vec::new();
        for &(from, to) in orig {
            let param = &self.src.fun(to).params[0].1;
            let shape = arg.map_or(Shape::Any, |a| shape_of(param, a));
            let copies = self.closure_copies.get(&from).cloned().unwrap_or_default();
            for c in copies {
                let code = self.recoded.get(&(c, to)).copied();
                if !shape.converted() {
                    out.push((c, code.expect("a recoding's copy for every closure copy")));
                    continue;
                }
                let key = (c, to, shape.clone());
                let id = match self.direct.get(&key) {
                    Some(&id) => id,
                    None => {
                        let ret = self.known.result(to, &shape);
                        let code = code.unwrap_or(c);
                        let id = self.wrapper(code, (param, &shape), &ret, funs, wrappers);
                        self.direct.insert(key, id);
                        id
                    }
                };
                out.push((c, id));
            }
        }
        out
    }

    /// A function over closure code `code`'s captures that makes its
    /// argument (of type `arg.0` and shape `arg.1`) a vector, calls `code`
    /// with it and gives its result as shape `ret` (as a direct copy would).
    fn wrapper(
        &mut self,
        code: FunId,
        (ty, shape): (&Type, &Shape),
        ret: &Shape,
        funs: &[Fun],
        wrappers: &mut Vec<Fun>,
    ) -> FunId {
        let callee = &funs[code.0 as usize];
        let span = callee.span;
        let arg_ty = repr_ty(ty, shape);
        let x = self.temp("x", arg_ty.clone());
        let arg = self.rebuild(local(x, &arg_ty, span), ty, shape, &Shape::Any);
        let (name, captures) = (callee.name.clone(), callee.captures.clone());
        let call = mk(ExprKind::Call(code, vec![arg]), callee.ret.clone(), span);
        let body = self.narrow(call, &callee.ret, ret);
        #[cfg(test)]
        tests::WRAPPERS.set(tests::WRAPPERS.get() + 1);
        wrappers.push(Fun {
            name,
            captures,
            params: vec![(Pat::Local(x), arg_ty)],
            ret: body.ty.clone(),
            body,
            span,
        });
        self.origins.push(self.origins[code.0 as usize]);
        FunId((funs.len() + wrappers.len() - 1) as u32)
    }

    /// Global `g`'s new body and shape (made on first use). A global of a
    /// small vector is kept as a tuple, unless the host reads it.
    fn global(&mut self, g: GlobalId) -> (Expr, Shape) {
        if let Some(done) = &self.globals[g.0 as usize] {
            return done.clone();
        }
        let src = self.src;
        let gl = src.global(g);
        self.making.insert(g, false);
        let (body, s) = self.expr(&gl.body, &mut Env::new());
        let early = self.making.remove(&g) == Some(true);
        let keep = if self.entry_global == Some(g) || early {
            Shape::Any
        } else {
            s.repr()
        };
        let body = self.coerce(body, &gl.ty, &s, &keep);
        self.globals[g.0 as usize] = Some((body.clone(), keep.clone()));
        (body, keep)
    }

    /// Where a vector kept as a tuple in local `l` must be a vector: the
    /// local holding it made again (see [`Pass::remade`]).
    fn remade(&mut self, l: Local, ty: &Type, span: Span) -> Expr {
        let v = match self.remade.get(&l) {
            Some(&v) => v,
            None => {
                let v = self.temp("_", ty.clone());
                self.remade.insert(l, v);
                v
            }
        };
        local(v, ty, span)
    }

    /// `body` in the scope of `bound` (new locals just bound): the vectors
    /// made again from those kept as tuples that `body` needs.
    fn with_remade(&mut self, bound: &[Local], body: Expr) -> Expr {
        let mut body = body;
        for &l in bound.iter().rev() {
            let Some(&v) = self.remade.get(&l) else {
                continue;
            };
            let tuple_ty = self.locals[l.0 as usize].ty.clone();
            let vec_ty = self.locals[v.0 as usize].ty.clone();
            let Type::Vec(elem) = &vec_ty else { continue };
            let Type::Tuple(ts) = &tuple_ty else { continue };
            let span = body.span;
            let items = (0..ts.len())
                .map(|k| proj(l, &tuple_ty, k, (**elem).clone(), span))
                .collect();
            let vector = mk(ExprKind::Vector(items), vec_ty.clone(), span);
            body = let_(v, vector, body);
        }
        body
    }

    fn ret_shape(&mut self, id: FunId) -> Shape {
        match &self.rets[id.0 as usize] {
            Some(s) => s.clone(),
            None => {
                self.early[id.0 as usize] = true;
                Shape::Any
            }
        }
    }

    /// `e` (a value of type `ty` represented as `from`) represented as `to`,
    /// which is `from` or less converted: a vector kept as a tuple is made
    /// again.
    fn coerce(&mut self, e: Expr, ty: &Type, from: &Shape, to: &Shape) -> Expr {
        if from == to || !from.converted() {
            return e;
        }
        let span = e.span;
        if let (ExprKind::Local(l), Shape::Len(_)) = (&e.kind, from) {
            return self.remade(*l, ty, span);
        }
        self.rebuild(e, ty, from, to)
    }

    /// [`Pass::coerce`] of a value that is not a local's: the vectors made
    /// again where it is used.
    fn rebuild(&mut self, e: Expr, ty: &Type, from: &Shape, to: &Shape) -> Expr {
        let span = e.span;
        let t = self.temp("_", e.ty.clone());
        let body = match (from, ty) {
            (Shape::Len(n), Type::Vec(elem)) => {
                let items = (0..*n)
                    .map(|k| proj(t, &e.ty, k, (**elem).clone(), span))
                    .collect();
                mk(ExprKind::Vector(items), ty.clone(), span)
            }
            (Shape::Tuple(fs), Type::Tuple(ts)) => {
                let tos = match to {
                    Shape::Tuple(tos) => tos.clone(),
                    _ => vec![Shape::Any; fs.len()],
                };
                let parts = (0..fs.len())
                    .map(|k| {
                        let part = proj(t, &e.ty, k, repr_ty(&ts[k], &fs[k]), span);
                        self.coerce(part, &ts[k], &fs[k], &tos[k])
                    })
                    .collect();
                mk(ExprKind::Tuple(parts), repr_ty(ty, to), span)
            }
            _ => return e,
        };
        let ty = body.ty.clone();
        mk(
            ExprKind::Let(Pat::Local(t), Box::new(e), Box::new(body)),
            ty,
            span,
        )
    }

    /// `e`, a value of type `ty` represented as its type says, represented
    /// as `to`: a vector's elements read into a tuple after checking its
    /// length (an internal error if it differs).
    fn narrow(&mut self, e: Expr, ty: &Type, to: &Shape) -> Expr {
        let span = e.span;
        match (to, ty) {
            (Shape::Len(n), Type::Vec(elem)) => {
                #[cfg(test)]
                tests::NARROWED.set(tests::NARROWED.get() + 1);
                let v = self.temp("_", ty.clone());
                let vector = local(v, ty, span);
                let items = (0..*n)
                    .map(|k| {
                        let args = vec![vector.clone(), int_lit(k as i64, span)];
                        mk(ExprKind::Prim(Prim::Index, args), (**elem).clone(), span)
                    })
                    .collect();
                let tuple = mk(ExprKind::Tuple(items), repr_ty(ty, to), span);
                let size = mk(ExprKind::Prim(Prim::Size, vec![vector]), Type::Int, span);
                let n = int_lit(*n as i64, span);
                let same = mk(
                    ExprKind::Prim(Prim::Eq, vec![size.clone(), n.clone()]),
                    Type::Bool,
                    span,
                );
                let code = int_lit(nabla_lang::prim::FAIL_PROVED_LENGTH, span);
                let fail = mk(
                    ExprKind::Prim(Prim::Fail, vec![code, size, n]),
                    Type::Int,
                    span,
                );
                let failed = after(fail, tuple.clone());
                let_(v, e, typed_if(same, tuple, failed))
            }
            (Shape::Tuple(ss), Type::Tuple(ts)) => {
                let t = self.temp("_", ty.clone());
                let parts = (0..ts.len())
                    .map(|k| {
                        let part = proj(t, ty, k, ts[k].clone(), span);
                        self.narrow(part, &ts[k], &ss[k])
                    })
                    .collect();
                let_(t, e, mk(ExprKind::Tuple(parts), repr_ty(ty, to), span))
            }
            _ => e,
        }
    }

    /// `e` rewritten and represented as its type says.
    fn plain(&mut self, e: &Expr, env: &mut Env) -> Expr {
        let (x, s) = self.expr(e, env);
        self.coerce(x, &e.ty, &s, &Shape::Any)
    }

    /// `e` rewritten, and the shape of its value.
    fn expr(&mut self, e: &Expr, env: &mut Env) -> (Expr, Shape) {
        let span = e.span;
        let same = |kind: ExprKind| mk(kind, e.ty.clone(), span);
        let plain_box = |p: &mut Self, x: &Expr, env: &mut Env| Box::new(p.plain(x, env));
        match &e.kind {
            ExprKind::Local(l) => {
                let (n, s) = env.get(l).cloned().unwrap_or((*l, Shape::Any));
                (local(n, &repr_ty(&e.ty, &s), span), s)
            }
            ExprKind::Lit(Lit::Int(k)) => (e.clone(), Shape::Int(*k)),
            ExprKind::Global(g) => {
                let s = match self.making.get_mut(g) {
                    Some(used) => {
                        *used = true;
                        Shape::Any
                    }
                    None => self.global(*g).1,
                };
                (mk(ExprKind::Global(*g), repr_ty(&e.ty, &s), span), s)
            }
            ExprKind::Lit(_) => (e.clone(), Shape::Any),
            ExprKind::Call(f, args) => {
                let (xs, ss): (Vec<Expr>, Vec<Shape>) =
                    args.iter().map(|a| self.expr(a, env)).unzip();
                let mut shapes: Vec<Shape> = ss.iter().map(Shape::repr).collect();
                let flat: usize = args
                    .iter()
                    .zip(&shapes)
                    .map(|(a, s)| width(&repr_ty(&a.ty, s)))
                    .sum();
                if self.funs.len() >= self.max_copies || flat > MAX_FLAT {
                    shapes = vec![Shape::Any; args.len()];
                }
                let mut argv = Vec::new();
                for (((x, s), a), to) in xs.into_iter().zip(&ss).zip(args).zip(&shapes) {
                    argv.push(self.coerce(x, &a.ty, s, to));
                }
                let id = self.copy(*f, env, shapes, Use::Call);
                let ret = self.ret_shape(id);
                let ty = repr_ty(&e.ty, &ret);
                (mk(ExprKind::Call(id, argv), ty, span), ret)
            }
            ExprKind::Closure(f) => {
                let params = vec![Shape::Any; self.src.fun(*f).params.len()];
                let id = self.copy(*f, env, params, Use::Closure);
                (same(ExprKind::Closure(id)), Shape::Any)
            }
            ExprKind::Apply(a, b) => self.apply(a, b, e, env),
            ExprKind::Let(p, v, body) => {
                let (v2, s) = self.expr(v, env);
                let p2 = self.bind(p, &s, env);
                let (b2, sb) = self.expr(body, env);
                let mut bound = Vec::new();
                p2.for_each_local(&mut |l| bound.push(l));
                let b2 = self.with_remade(&bound, b2);
                let ty = repr_ty(&e.ty, &sb);
                (
                    mk(ExprKind::Let(p2, Box::new(v2), Box::new(b2)), ty, span),
                    sb,
                )
            }
            ExprKind::Tuple(es) => {
                let (xs, ss): (Vec<Expr>, Vec<Shape>) =
                    es.iter().map(|x| self.expr(x, env)).unzip();
                let s = Shape::tuple(ss);
                (mk(ExprKind::Tuple(xs), repr_ty(&e.ty, &s), span), s)
            }
            ExprKind::Proj(t, k) => {
                let (t2, s) = self.expr(t, env);
                let sk = match s {
                    Shape::Tuple(ss) => ss[*k as usize].clone(),
                    _ => Shape::Any,
                };
                let ty = repr_ty(&e.ty, &sk);
                (mk(ExprKind::Proj(Box::new(t2), *k), ty, span), sk)
            }
            ExprKind::Inl(x) => (same(ExprKind::Inl(plain_box(self, x, env))), Shape::Any),
            ExprKind::Inr(x) => (same(ExprKind::Inr(plain_box(self, x, env))), Shape::Any),
            ExprKind::Case {
                scrutinee,
                left,
                right,
            } => {
                let sc = plain_box(self, scrutinee, env);
                let lp = self.bind(&left.0, &Shape::Any, env);
                let (l, ls) = self.expr(&left.1, env);
                let rp = self.bind(&right.0, &Shape::Any, env);
                let (r, rs) = self.expr(&right.1, env);
                let m = ls.meet(&rs).repr();
                let l = self.coerce(l, &e.ty, &ls, &m);
                let r = self.coerce(r, &e.ty, &rs, &m);
                let kind = ExprKind::Case {
                    scrutinee: sc,
                    left: (lp, Box::new(l)),
                    right: (rp, Box::new(r)),
                };
                (mk(kind, repr_ty(&e.ty, &m), span), m)
            }
            ExprKind::If(c, a, b) => {
                let c = plain_box(self, c, env);
                let (a2, sa) = self.expr(a, env);
                let (b2, sb) = self.expr(b, env);
                let m = sa.meet(&sb).repr();
                let a2 = self.coerce(a2, &e.ty, &sa, &m);
                let b2 = self.coerce(b2, &e.ty, &sb, &m);
                let ty = repr_ty(&e.ty, &m);
                (mk(ExprKind::If(c, Box::new(a2), Box::new(b2)), ty, span), m)
            }
            ExprKind::Select(c, a, b) => {
                let kind = ExprKind::Select(
                    plain_box(self, c, env),
                    plain_box(self, a, env),
                    plain_box(self, b, env),
                );
                (same(kind), Shape::Any)
            }
            ExprKind::Prim(p, args) => self.prim(*p, args, e, env),
            // Made once when compiling, as data (`codegen`), elements too.
            ExprKind::Vector(_) if marshal::is_large_constant(e) => (e.clone(), Shape::Any),
            ExprKind::Vector(es) => {
                let xs: Vec<Expr> = es.iter().map(|x| self.plain(x, env)).collect();
                let Type::Vec(elem) = &e.ty else {
                    return (same(ExprKind::Vector(xs)), Shape::Any);
                };
                if (2..=self.max_len).contains(&xs.len()) && plain_data(elem) {
                    let s = Shape::Len(xs.len());
                    (mk(ExprKind::Tuple(xs), repr_ty(&e.ty, &s), span), s)
                } else {
                    (same(ExprKind::Vector(xs)), Shape::Any)
                }
            }
            ExprKind::Trace(label, x) => {
                let kind = ExprKind::Trace(label.clone(), plain_box(self, x, env));
                (same(kind), Shape::Any)
            }
            ExprKind::TangentShape(a, b, role) => {
                let (a2, sa) = self.expr(a, env);
                let (b2, sb) = self.expr(b, env);
                // Two vectors kept as tuples of one length are shaped alike:
                // the check is decided here, and neither is made a vector
                // for it (`forward`'s `jvp f x e_i` on a 2-vector made `x`
                // and `e_i` only to compare their lengths).
                if let (Shape::Len(n), Shape::Len(m)) = (&sa, &sb)
                    && n == m
                {
                    #[cfg(test)]
                    tests::SHAPES_DECIDED.set(tests::SHAPES_DECIDED.get() + 1);
                    let unit = mk(ExprKind::Lit(Lit::Unit), Type::Unit, span);
                    return (after(a2, after(b2, unit)), Shape::Any);
                }
                let a2 = Box::new(self.coerce(a2, &a.ty, &sa, &Shape::Any));
                let b2 = Box::new(self.coerce(b2, &b.ty, &sb, &Shape::Any));
                (same(ExprKind::TangentShape(a2, b2, *role)), Shape::Any)
            }
            // The cases still name original functions (`Pass::fill_recodes`).
            ExprKind::Recode {
                closure,
                cases,
                direct,
            } => {
                let kind = ExprKind::Recode {
                    closure: plain_box(self, closure, env),
                    cases: cases.clone(),
                    direct: *direct,
                };
                (same(kind), Shape::Any)
            }
            ExprKind::Tape { op, slot, args } => {
                if let ([v], true) = (&args[..], elementwise(*op)) {
                    return self.tape_vector(*op, *slot, v, e, env);
                }
                if *op == TapeOp::DotTerms {
                    return self.tape_dot(*slot, args, e, env);
                }
                let args = args.iter().map(|a| self.plain(a, env)).collect();
                let kind = ExprKind::Tape {
                    op: *op,
                    slot: *slot,
                    args,
                };
                (same(kind), Shape::Any)
            }
        }
    }

    /// `DotTerms` (a sum of products recorded as one Delta): on a vector
    /// kept as a tuple, declined — `(0, −1)`, so the sum is recorded real by
    /// real, as its code after the check does, on the tuples —, where
    /// making the vector would cost more than the Deltas it saves.
    fn tape_dot(&mut self, slot: u8, args: &[Expr], e: &Expr, env: &mut Env) -> (Expr, Shape) {
        let span = e.span;
        let shaped: Vec<(Expr, Shape)> = args.iter().map(|a| self.expr(a, env)).collect();
        if shaped.iter().any(|(_, s)| matches!(s, Shape::Len(_))) {
            let declined = vec![
                mk(ExprKind::Lit(Lit::Real(0.0)), Type::Real, span),
                mk(ExprKind::Lit(Lit::Int(-1)), Type::Int, span),
            ];
            return (
                mk(ExprKind::Tuple(declined), e.ty.clone(), span),
                Shape::Any,
            );
        }
        let args = shaped
            .into_iter()
            .zip(args)
            .map(|((x, s), a)| self.coerce(x, &a.ty, &s, &Shape::Any))
            .collect();
        let kind = ExprKind::Tape {
            op: TapeOp::DotTerms,
            slot,
            args,
        };
        (mk(kind, e.ty.clone(), span), Shape::Any)
    }

    /// A trace operation that takes a whole vector of reals (`Inputs`,
    /// `Adjoints`, `AdjointsAgain`: one runtime call, for long vectors)
    /// applied to a vector kept as a tuple: the operation of one real on
    /// each element, in order, inline — a 2-vector's gradient makes no
    /// vector and calls nothing (saddle RR −16 % instructions, RF −21 %).
    fn tape_vector(
        &mut self,
        op: TapeOp,
        slot: u8,
        v: &Expr,
        e: &Expr,
        env: &mut Env,
    ) -> (Expr, Shape) {
        let span = e.span;
        let (v2, s) = self.expr(v, env);
        let (Shape::Len(n), Type::Vec(out)) = (&s, &e.ty) else {
            let v2 = self.coerce(v2, &v.ty, &s, &Shape::Any);
            let kind = ExprKind::Tape {
                op,
                slot,
                args: vec![v2],
            };
            return (mk(kind, e.ty.clone(), span), Shape::Any);
        };
        let (n, out) = (*n, (**out).clone());
        let tape = |op, args, ty| mk(ExprKind::Tape { op, slot, args }, ty, span);
        let t = self.temp("_", v2.ty.clone());
        let elems = (0..n)
            .map(|k| {
                let x = proj(t, &v2.ty, k, tuple_elem(&v2.ty, k), span);
                match op {
                    // The real as an input of the level: (x, its Delta, 1).
                    TapeOp::Inputs => {
                        let id = tape(TapeOp::Input, Vec::new(), Type::Int);
                        let one = mk(ExprKind::Lit(Lit::Real(1.0)), Type::Real, span);
                        mk(ExprKind::Tuple(vec![x, id, one]), out.clone(), span)
                    }
                    // The adjoint of the next input again.
                    TapeOp::AdjointsAgain => {
                        let id = tape(TapeOp::InputAgain, Vec::new(), Type::Int);
                        tape(TapeOp::Adjoint, vec![id], Type::Real)
                    }
                    // `Adjoints`: the adjoint of the real's Delta.
                    _ => {
                        let x_ty = x.ty.clone();
                        let id = mk(ExprKind::Proj(Box::new(x), 1), tuple_elem(&x_ty, 1), span);
                        tape(TapeOp::Adjoint, vec![id], Type::Real)
                    }
                }
            })
            .collect();
        let s = Shape::Len(n);
        let tuple = mk(ExprKind::Tuple(elems), repr_ty(&e.ty, &s), span);
        (let_(t, v2, tuple), s)
    }

    /// `a b`. Where `b` is kept as tuples and every closure that can reach
    /// `a` is known (by the flow analysis, or as a recoding's cases), the
    /// application calls the copy of the closure's function for that
    /// argument, chosen by the closure's code and run over the closure's
    /// captures (an [`ExprKind::Recode`] applied, whose cases
    /// [`Pass::fill_recodes`] lists): the argument is not made a vector.
    /// Such a copy is made with every closure copy of the function, in the
    /// runs after the one that found the application.
    fn apply(&mut self, a: &Expr, b: &Expr, e: &Expr, env: &mut Env) -> (Expr, Shape) {
        let span = e.span;
        let (closure, pairs) = match &a.kind {
            ExprKind::Recode { closure, cases, .. } => (&**closure, cases.clone()),
            _ => {
                let src = self.src;
                let fits = |g: &FunId| {
                    let f = src.fun(*g);
                    matches!(&f.params[..], [(_, t)] if *t == b.ty) && f.ret == e.ty
                };
                let pairs = self.flow.of(a).into_iter().filter(fits);
                (a, pairs.map(|g| (g, g)).collect())
            }
        };
        let c = self.plain(closure, env);
        let (x, s) = self.expr(b, env);
        let shape = s.repr();
        if shape.converted() && !pairs.is_empty() {
            let mut wanted = true;
            for &(from, to) in &pairs {
                let call = (to, shape.clone());
                wanted &= self
                    .known
                    .wanted
                    .get(&from)
                    .is_some_and(|w| w.contains(&call));
                let asked = self.asked.entry(from).or_default();
                if !asked.contains(&call) {
                    asked.push(call);
                }
            }
            // Every copy the application may call represents its result
            // alike.
            let ret = self.known.result(pairs[0].1, &shape);
            let alike = pairs.iter().all(|p| self.known.result(p.1, &shape) == ret);
            if wanted && alike {
                let ty = Type::fun(repr_ty(&b.ty, &shape), repr_ty(&e.ty, &ret));
                let cases = pairs;
                let f = mk(
                    ExprKind::Recode {
                        closure: Box::new(c),
                        cases,
                        direct: true,
                    },
                    ty,
                    a.span,
                );
                let kind = ExprKind::Apply(Box::new(f), Box::new(x));
                return (mk(kind, repr_ty(&e.ty, &ret), span), ret);
            }
        }
        let x = self.coerce(x, &b.ty, &s, &Shape::Any);
        let f = match &a.kind {
            ExprKind::Recode { cases, direct, .. } => {
                let kind = ExprKind::Recode {
                    closure: Box::new(c),
                    cases: cases.clone(),
                    direct: *direct,
                };
                mk(kind, a.ty.clone(), a.span)
            }
            _ => c,
        };
        let kind = ExprKind::Apply(Box::new(f), Box::new(x));
        (mk(kind, e.ty.clone(), span), Shape::Any)
    }

    fn prim(&mut self, p: Prim, args: &[Expr], e: &Expr, env: &mut Env) -> (Expr, Shape) {
        let span = e.span;
        match (p, args) {
            (Prim::Size, [v]) => {
                let (v2, s) = self.expr(v, env);
                if let Shape::Len(n) = s {
                    let n_lit = int_lit(n as i64, span);
                    return (after(v2, n_lit), Shape::Int(n as i64));
                }
                (
                    mk(ExprKind::Prim(p, vec![v2]), e.ty.clone(), span),
                    Shape::Any,
                )
            }
            (Prim::Index, [v, i]) => {
                let (v2, s) = self.expr(v, env);
                let (i2, si) = self.expr(i, env);
                match s {
                    Shape::Len(n) => (self.index(v2, n, i2, &si, e), Shape::Any),
                    _ => (
                        mk(ExprKind::Prim(p, vec![v2, i2]), e.ty.clone(), span),
                        Shape::Any,
                    ),
                }
            }
            (Prim::Sum, [v]) => {
                let (v2, s) = self.expr(v, env);
                let Shape::Len(n) = s else {
                    return (
                        mk(ExprKind::Prim(p, vec![v2]), e.ty.clone(), span),
                        Shape::Any,
                    );
                };
                // The interpreter's order: from -0.0 (reals) or 0, element
                // by element.
                let zero = match e.ty {
                    Type::Real => Lit::Real(-0.0),
                    _ => Lit::Int(0),
                };
                let t = self.temp("_", v2.ty.clone());
                let mut acc = mk(ExprKind::Lit(zero), e.ty.clone(), span);
                for k in 0..n {
                    let x = proj(t, &v2.ty, k, e.ty.clone(), span);
                    acc = mk(ExprKind::Prim(Prim::Add, vec![acc, x]), e.ty.clone(), span);
                }
                (let_(t, v2, acc), Shape::Any)
            }
            (Prim::Map, [f, v]) => {
                let (v2, s) = self.expr(v, env);
                if let (Shape::Len(n), ExprKind::Closure(g), Type::Vec(b)) = (&s, &f.kind, &e.ty)
                    && plain_data(b)
                    && self.unrollable(*g)
                {
                    let (n, g, b) = (*n, *g, (**b).clone());
                    let t = self.temp("_", v2.ty.clone());
                    let calls = (0..n)
                        .map(|k| {
                            let x = proj(t, &v2.ty, k, tuple_elem(&v2.ty, k), span);
                            let id = self.copy(g, env, vec![Shape::Any], Use::Call);
                            mk(ExprKind::Call(id, vec![x]), b.clone(), span)
                        })
                        .collect();
                    let s = Shape::Len(n);
                    let tuple = mk(ExprKind::Tuple(calls), repr_ty(&e.ty, &s), span);
                    return (let_(t, v2, tuple), s);
                }
                let v2 = self.coerce(v2, &v.ty, &s, &Shape::Any);
                let f2 = self.plain(f, env);
                (
                    mk(ExprKind::Prim(p, vec![f2, v2]), e.ty.clone(), span),
                    Shape::Any,
                )
            }
            (Prim::Fold, [f, init, v]) => {
                let init2 = self.plain(init, env);
                let (v2, s) = self.expr(v, env);
                if let (Shape::Len(n), ExprKind::Closure(g)) = (&s, &f.kind)
                    && plain_data(&e.ty)
                    && self.unrollable(*g)
                {
                    // The steps in order on the tuple's elements, after
                    // `init` and the vector (a sum's lanes over a small
                    // vector, `translate::dual`).
                    let (n, g) = (*n, *g);
                    let (a, t) = (
                        self.temp("_", init2.ty.clone()),
                        self.temp("_", v2.ty.clone()),
                    );
                    let mut acc = local(a, &init2.ty, span);
                    for k in 0..n {
                        let x = proj(t, &v2.ty, k, tuple_elem(&v2.ty, k), span);
                        let id = self.copy(g, env, vec![Shape::Any, Shape::Any], Use::Call);
                        acc = mk(ExprKind::Call(id, vec![acc, x]), e.ty.clone(), span);
                    }
                    return (let_(a, init2, let_(t, v2, acc)), Shape::Any);
                }
                let v2 = self.coerce(v2, &v.ty, &s, &Shape::Any);
                let f2 = self.plain(f, env);
                (
                    mk(ExprKind::Prim(p, vec![f2, init2, v2]), e.ty.clone(), span),
                    Shape::Any,
                )
            }
            (Prim::Build, [n, f]) => {
                let (n2, sn) = self.expr(n, env);
                if let (Shape::Int(k), ExprKind::Closure(g), Type::Vec(elem)) =
                    (&sn, &f.kind, &e.ty)
                    && (2..=self.max_len as i64).contains(k)
                    && plain_data(elem)
                    && self.unrollable(*g)
                {
                    let (k, g, elem) = (*k as usize, *g, (**elem).clone());
                    // One copy of the element function per index, which
                    // then indexes small vectors by a constant.
                    let calls = (0..k)
                        .map(|i| {
                            let id = self.copy(g, env, vec![Shape::Int(i as i64)], Use::Call);
                            let arg = int_lit(i as i64, span);
                            mk(ExprKind::Call(id, vec![arg]), elem.clone(), span)
                        })
                        .collect();
                    let s = Shape::Len(k);
                    let tuple = mk(ExprKind::Tuple(calls), repr_ty(&e.ty, &s), span);
                    return (after(n2, tuple), s);
                }
                let f2 = self.plain(f, env);
                (
                    mk(ExprKind::Prim(p, vec![n2, f2]), e.ty.clone(), span),
                    Shape::Any,
                )
            }
            _ => {
                let args = args.iter().map(|a| self.plain(a, env)).collect();
                (mk(ExprKind::Prim(p, args), e.ty.clone(), span), Shape::Any)
            }
        }
    }

    /// True if the element function `g` may be called once per element.
    fn unrollable(&self, g: FunId) -> bool {
        self.funs.len() < self.max_copies && nodes(&self.src.fun(g).body) <= MAX_UNROLLED_BODY
    }

    /// `v[i]` of a vector of `n` elements kept as the tuple `v`; `e` is the
    /// original indexing (its type and position).
    fn index(&mut self, v: Expr, n: usize, i: Expr, si: &Shape, e: &Expr) -> Expr {
        let span = e.span;
        let tv = v.ty.clone();
        let t = self.temp("_", tv.clone());
        let j = self.temp("_", Type::Int);
        let elem = e.ty.clone();
        // Out of range: the interpreter's error, from the vector made again.
        let fail = || {
            let items = (0..n)
                .map(|k| proj(t, &tv, k, elem.clone(), span))
                .collect();
            let vector = mk(
                ExprKind::Vector(items),
                Type::Vec(Box::new(elem.clone())),
                span,
            );
            mk(
                ExprKind::Prim(Prim::Index, vec![vector, local(j, &Type::Int, span)]),
                elem.clone(),
                span,
            )
        };
        let body = match si {
            &Shape::Int(k) if (0..n as i64).contains(&k) => {
                proj(t, &tv, k as usize, elem.clone(), span)
            }
            Shape::Int(_) => fail(),
            _ => {
                // 0 <= j < n: a choice without branches among the elements.
                let mut pick = proj(t, &tv, n - 1, elem.clone(), span);
                for k in (0..n - 1).rev() {
                    let is_k = mk(
                        ExprKind::Prim(
                            Prim::Eq,
                            vec![local(j, &Type::Int, span), int_lit(k as i64, span)],
                        ),
                        Type::Bool,
                        span,
                    );
                    let x = proj(t, &tv, k, elem.clone(), span);
                    pick = mk(
                        ExprKind::Select(Box::new(is_k), Box::new(x), Box::new(pick)),
                        elem.clone(),
                        span,
                    );
                }
                let lt =
                    |a: Expr, b: Expr| mk(ExprKind::Prim(Prim::Lt, vec![a, b]), Type::Bool, span);
                let index = || local(j, &Type::Int, span);
                let below_n = typed_if(lt(index(), int_lit(n as i64, span)), pick, fail());
                typed_if(lt(index(), int_lit(0, span)), fail(), below_n)
            }
        };
        let_(t, v, let_(j, i, body))
    }
}

/// The shape of a value of type `ty` represented as type `repr` (the
/// inverse of [`repr_ty`]).
fn shape_of(ty: &Type, repr: &Type) -> Shape {
    match (ty, repr) {
        (Type::Vec(_), Type::Tuple(ts)) => Shape::Len(ts.len()),
        (Type::Tuple(ts), Type::Tuple(rs)) if ts.len() == rs.len() => {
            Shape::tuple(ts.iter().zip(rs).map(|(t, r)| shape_of(t, r)).collect())
        }
        _ => Shape::Any,
    }
}

fn typed_if(c: Expr, a: Expr, b: Expr) -> Expr {
    nabla_lang::core::typed::if_(c, a, b)
}

/// Local `l`, of type `ty`.
fn local(l: Local, ty: &Type, span: Span) -> Expr {
    mk(ExprKind::Local(l), ty.clone(), span)
}

/// Component `k` (of type `ty`) of the tuple in local `t` (of type `tuple`).
fn proj(t: Local, tuple: &Type, k: usize, ty: Type, span: Span) -> Expr {
    mk(
        ExprKind::Proj(Box::new(local(t, tuple, span)), k as u32),
        ty,
        span,
    )
}

fn tuple_elem(t: &Type, k: usize) -> Type {
    match t {
        Type::Tuple(ts) => ts[k].clone(),
        _ => t.clone(),
    }
}

/// Whether trace operation `op` takes a vector of reals whole, each real
/// as its one-real form would ([`Pass::tape_vector`]).
fn elementwise(op: TapeOp) -> bool {
    matches!(
        op,
        TapeOp::Inputs | TapeOp::Adjoints | TapeOp::AdjointsAgain
    )
}

/// `let t = v in body`.
fn let_(t: Local, v: Expr, body: Expr) -> Expr {
    let (ty, span) = (body.ty.clone(), body.span);
    mk(
        ExprKind::Let(Pat::Local(t), Box::new(v), Box::new(body)),
        ty,
        span,
    )
}

/// `body` after evaluating `first` for what it may do (nothing to do for a
/// local or a literal).
fn after(first: Expr, body: Expr) -> Expr {
    if matches!(first.kind, ExprKind::Local(_) | ExprKind::Lit(_)) {
        return body;
    }
    let (ty, span) = (body.ty.clone(), body.span);
    mk(
        ExprKind::Let(Pat::Wild, Box::new(first), Box::new(body)),
        ty,
        span,
    )
}

/// A body's stand-in while it is being filled in.
fn placeholder() -> Expr {
    mk(ExprKind::Lit(Lit::Unit), Type::Unit, Span::default())
}

#[cfg(test)]
mod tests {
    use crate::{Native, Options};
    use nabla_lang::driver::Session;
    use nabla_lang::eval::Limits;
    use nabla_lang::pretty::print_value;
    use std::cell::Cell;

    thread_local! {
        /// Whether [`super::rewrite`] ends with a run that makes wrappers
        /// instead of direct copies, knowing the result shapes the runs
        /// before found.
        pub(super) static WRAP_AT_THE_END: Cell<bool> = const { Cell::new(false) };
        /// [`super::direct_copies_allowed`].
        pub(super) static DIRECT_COPIES: Cell<bool> = const { Cell::new(true) };
        /// Wrappers made on this thread ([`super::Pass::wrapper`]).
        pub(super) static WRAPPERS: Cell<usize> = const { Cell::new(0) };
        /// Vectors read back into tuples ([`super::Pass::narrow`]).
        pub(super) static NARROWED: Cell<usize> = const { Cell::new(0) };
        /// Tangent shape checks decided when compiling.
        pub(super) static SHAPES_DECIDED: Cell<usize> = const { Cell::new(0) };
    }

    /// `main`'s value or error message, by the interpreter and by native code.
    fn both(name: &str, text: &str) -> (String, String) {
        let mut s = Session::new();
        if let Err(ds) = s.load(name, text) {
            panic!("{name} does not check: {}", s.render(&ds));
        }
        let interp = match s.prepare_main().and_then(|m| m.evaluate()) {
            Ok(v) => print_value(&v),
            Err(ds) => s.render(&ds),
        };
        let Ok((prog, entry)) = s.typed_program("main") else {
            panic!("native code does not run {name}");
        };
        let options = Options {
            limits: Limits::default(),
            keep_ir: false,
        };
        let Ok(compiled) = Native::compile_main(&prog, entry, &options) else {
            panic!("{name} does not compile");
        };
        let native = match compiled.run() {
            Ok(v) => print_value(&v),
            Err(e) => s.render(&[e.into()]),
        };
        (interp, native)
    }

    /// Every direct application through its wrapper: the closure's code
    /// called on the vector made again, a result the direct copies gave as
    /// a tuple read back after its length is checked. Values and errors as
    /// the interpreter's.
    #[test]
    fn direct_applications_past_the_copy_budget_agree_with_the_interpreter() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let read = |path: &str| std::fs::read_to_string(format!("{root}/{path}")).expect(path);
        let nested = read("bench/nabla/nested.nabla");
        let mut programs: Vec<(String, String)> = [
            "tests/lang/vectors/closures_applied_to_small_vectors.nabla",
            "tests/lang/runtime/error_in_closure_applied_to_small_vector.nabla",
        ]
        .iter()
        .map(|p| (p.to_string(), read(p)))
        .collect();
        for main in ["saddle_ff", "saddle_rr", "particle_fr", "particle_rf"] {
            programs.push((main.into(), format!("{nested}\ndef main = {main} ()\n")));
        }
        // (The small programs first: a wrong gradient can keep the
        // optimisers of the nested ones from ever converging.)
        WRAP_AT_THE_END.set(true);
        WRAPPERS.set(0);
        NARROWED.set(0);
        for (name, text) in &programs {
            let (interp, native) = both(name, text);
            assert_eq!(native, interp, "{name}");
        }
        WRAP_AT_THE_END.set(false);
        assert!(
            WRAPPERS.get() > 0,
            "no direct application went through a wrapper"
        );
        assert!(NARROWED.get() > 0, "no wrapper read a result back");
    }

    /// A `jvp` or pullback whose point and tangent are both small vectors
    /// of one length has its shape check decided when compiling (neither is
    /// made a vector for it); lengths that differ still fail as the
    /// interpreter fails.
    #[test]
    fn shape_checks_of_small_vectors_are_decided_when_compiling() {
        let programs = [
            "def main = jvp (fun v -> v[0] * v[1]) [3.0, 2.0] [0.0, 1.0]",
            "def main = let (y, back) = vjp (fun v -> [v[1], v[0] * v[1]]) [3.0, 2.0] in (y, back [1.0, 1.0])",
            "def main = jvp (fun v -> v[0] * v[1]) [3.0, 2.0] [0.0, 1.0, 0.0]",
        ];
        for (k, text) in programs.iter().enumerate() {
            SHAPES_DECIDED.set(0);
            let (interp, native) = both(&format!("program {k}"), text);
            assert_eq!(native, interp, "{text}");
            let equal_lengths = k < 2;
            assert_eq!(SHAPES_DECIDED.get() > 0, equal_lengths, "{text}");
        }
    }
}
