//! Numeric let-polymorphism by specialisation.
//!
//! The first check of [`super::check_program`] generalises the numeric type
//! variables of top-level definitions and `let` functions (`def sq x = x * x`
//! is `sq : n -> n`, `n` Int or Real) and records what each use instantiates
//! them to. Here each such binder gets one copy per combination of numeric
//! types it is used at (its *key*): the first key found keeps the binder's
//! name, the others are copies named `sq'Real` (with more `'` if the program
//! has that name). A copy of a top-level definition is a new definition
//! after the others; a copy of a `let` function (or of `let x = …`) is a
//! `let` of the same kind around the original. Every use then refers to the copy for its key, so
//! the second check, which does not generalise numeric variables, gives each
//! copy's operators and literals their own type, and the interpreter and the
//! translations see only monomorphic code.
//!
//! Top-level definitions are processed callers first, so that all the keys
//! of a definition are known when its copies are made; within an
//! expression, a `let` function's scope is processed before its definition
//! for the same reason.

use super::Type;
use super::infer::{Binder, Checker, TypeError, Use};
use crate::stack;
use crate::syntax::ast::*;
use std::collections::{HashMap, HashSet};

/// The numeric types a binder's generalised variables are used at.
type Key = Vec<Type>;

/// The program with copies for binders used at several numeric types, or
/// `None` if there are none.
pub(crate) fn specialise(defs: &[Def], checker: &Checker) -> Result<Option<Vec<Def>>, TypeError> {
    let mut taken = HashSet::new();
    let mut next_id = 0;
    for d in defs {
        taken.insert(d.binding.name.name.clone());
        let mut body = d.binding.body.clone();
        collect(&mut body, &mut taken, &mut next_id)?;
        for p in &d.binding.params {
            super::infer::pattern_names(p, &mut |n| {
                taken.insert(n.to_string());
            });
        }
    }
    let mut s = Specialiser {
        checker,
        taken,
        next_id,
        global_keys: HashMap::new(),
        local_keys: HashMap::new(),
        copied: false,
        copied_nodes: 0,
        mangled: HashMap::new(),
    };
    let mut out = defs.to_vec();
    let mut copies = Vec::new();
    for group in checker.groups().iter().rev() {
        for &i in group {
            let binder = Binder::Global(i);
            let generics = checker.generics_of(binder).to_vec();
            let keys = match s.global_keys.get(&i) {
                Some(keys) => keys.clone(),
                None => vec![s.default_key(&generics)],
            };
            for (k, key) in keys.iter().enumerate() {
                let mut d = defs[i].clone();
                if k > 0 {
                    d.binding.name.name = s.mangle(&defs[i].binding.name.name, key);
                }
                let sigma = extend(&HashMap::new(), &generics, key);
                let mut current = HashMap::new();
                current.insert(binder, d.binding.name.name.clone());
                s.expr(&mut d.binding.body, &sigma, k > 0, &current)?;
                if k == 0 {
                    out[i] = d;
                } else {
                    copies.push(d);
                }
            }
        }
    }
    if copies.is_empty() && !s.copied {
        return Ok(None);
    }
    out.extend(copies);
    Ok(Some(out))
}

/// The numeric types of the variables in scope: the generalised variables
/// of the binders whose copy is being made.
type Sigma = HashMap<u32, Type>;

fn extend(sigma: &Sigma, generics: &[u32], key: &[Type]) -> Sigma {
    let mut s = sigma.clone();
    s.extend(generics.iter().copied().zip(key.iter().cloned()));
    s
}

struct Specialiser<'a> {
    checker: &'a Checker,
    /// Every name the program uses (mangled names avoid them).
    taken: HashSet<String>,
    next_id: u32,
    /// The keys each top-level definition is used at, in order found.
    global_keys: HashMap<usize, Vec<Key>>,
    /// The same for the `let` functions whose scope is being processed.
    local_keys: HashMap<NodeId, Vec<Key>>,
    /// Some `let` function was copied.
    copied: bool,
    /// Expression nodes in copies so far.
    copied_nodes: u64,
    /// The name made for each (binder name, key).
    mangled: HashMap<(String, Key), String>,
}

/// The most expression nodes the copies may add (nested definitions each
/// used at several numeric types multiply: 2^depth copies).
const COPY_BUDGET: u64 = 2_000_000;

impl Specialiser<'_> {
    fn fresh_id(&mut self) -> NodeId {
        self.next_id += 1;
        NodeId(self.next_id)
    }

    /// The name of the copy of `name` for `key` (not its first key): the
    /// same name for the same pair every time, a name the program does not
    /// use for any other.
    fn mangle(&mut self, name: &str, key: &[Type]) -> String {
        if let Some(m) = self.mangled.get(&(name.to_string(), key.to_vec())) {
            return m.clone();
        }
        let mut m = name.to_string();
        for t in key {
            m.push('\'');
            push_type_name(&mut m, t);
        }
        while self.taken.contains(&m) {
            m.push('\'');
        }
        self.taken.insert(m.clone());
        self.mangled
            .insert((name.to_string(), key.to_vec()), m.clone());
        m
    }

    /// A specialised type variable's type in a key: what it was
    /// instantiated to, the enclosing copy's types put in for its variables;
    /// a variable nothing decides is `Int` if numeric, else `()`.
    fn key_type(&self, t: &Type, sigma: &Sigma) -> Type {
        match t {
            Type::Var(v) => sigma.get(v).cloned().unwrap_or_else(|| self.default_of(*v)),
            Type::Int | Type::Real | Type::Bool | Type::Unit => t.clone(),
            Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| self.key_type(t, sigma)).collect()),
            Type::Sum(a, b) => Type::Sum(
                Box::new(self.key_type(a, sigma)),
                Box::new(self.key_type(b, sigma)),
            ),
            Type::Vec(a) => Type::Vec(Box::new(self.key_type(a, sigma))),
            Type::Fun(a, b) => Type::fun(self.key_type(a, sigma), self.key_type(b, sigma)),
            Type::Con(c, ts) => Type::Con(*c, ts.iter().map(|t| self.key_type(t, sigma)).collect()),
            Type::Record(ns, ts) => Type::Record(
                ns.clone(),
                ts.iter().map(|t| self.key_type(t, sigma)).collect(),
            ),
        }
    }

    /// The type a generalised variable stands for when nothing uses it.
    fn default_of(&self, v: u32) -> Type {
        if self.checker.is_numeric(v) {
            Type::Int
        } else {
            Type::Unit
        }
    }

    /// The key of a binder none of whose uses were seen.
    fn default_key(&self, generics: &[u32]) -> Key {
        generics.iter().map(|&g| self.default_of(g)).collect()
    }

    /// The name a use refers to in the copy being made, if not its own.
    fn rename(
        &mut self,
        u: &Use,
        name: &str,
        sigma: &Sigma,
        current: &HashMap<Binder, String>,
    ) -> Option<String> {
        if u.instance.is_empty() {
            return current.get(&u.binder).cloned();
        }
        let key: Key = u
            .instance
            .iter()
            .map(|t| self.key_type(&self.checker.decided(t), sigma))
            .collect();
        let keys = match u.binder {
            Binder::Global(i) => self.global_keys.entry(i).or_default(),
            Binder::Local(id) => self.local_keys.entry(id).or_default(),
        };
        let index = match keys.iter().position(|k| *k == key) {
            Some(p) => p,
            None => {
                keys.push(key.clone());
                keys.len() - 1
            }
        };
        (index > 0).then(|| self.mangle(name, &key))
    }

    fn expr(
        &mut self,
        e: &mut Expr,
        sigma: &Sigma,
        fresh: bool,
        current: &HashMap<Binder, String>,
    ) -> Result<(), TypeError> {
        if stack::check().is_err() {
            return Err(super::infer::too_deep(e.span));
        }
        let id = e.id;
        if fresh {
            e.id = self.fresh_id();
            // Copies inside copies multiply: bound the total.
            self.copied_nodes += 1;
            if self.copied_nodes > COPY_BUDGET {
                return Err(TypeError {
                    message: "numeric polymorphism needs too many specialised copies here".into(),
                    span: e.span,
                    label: "nested definitions used at several numeric types are copied for each"
                        .into(),
                    secondary: Vec::new(),
                    note: Some("annotate some of them with `Int` or `Real`".into()),
                });
            }
        }
        if let ExprKind::Var(name) = &mut e.kind {
            if let Some(u) = self.checker.use_at(id)
                && let Some(new) = self.rename(u, name, sigma, current)
            {
                *name = new;
            }
            return Ok(());
        }
        let (binder, mut original, body, rec) = match &mut e.kind {
            ExprKind::LetFun { rec, binding, body } => {
                (Binder::Local(id), Bound::Fun(binding), body, *rec)
            }
            ExprKind::Let(Pattern::Var(name), value, body) => {
                (Binder::Local(id), Bound::Value(name, value), body, false)
            }
            _ => {
                for c in e.kind.children_mut() {
                    self.expr(c, sigma, fresh, current)?;
                }
                return Ok(());
            }
        };
        let saved = self.local_keys.remove(&id);
        let r = self.expr(body, sigma, fresh, current);
        let keys = self.local_keys.remove(&id);
        if let Some(k) = saved {
            self.local_keys.insert(id, k);
        }
        r?;
        let generics = self.checker.generics_of(binder).to_vec();
        let keys = keys.unwrap_or_else(|| vec![self.default_key(&generics)]);
        let (name, definition) = original.parts();
        let (name, definition) = (name.clone(), definition.clone());
        let mut copies = Vec::new();
        for (k, key) in keys.iter().enumerate() {
            let mut def = definition.clone();
            let mut copy_name = name.clone();
            if k > 0 {
                copy_name.name = self.mangle(&name.name, key);
            }
            let mut inner = current.clone();
            inner.insert(binder, copy_name.name.clone());
            let s = extend(sigma, &generics, key);
            self.expr(&mut def, &s, fresh || k > 0, &inner)?;
            if k == 0 {
                let (n, d) = original.parts();
                *n = copy_name;
                *d = def;
            } else {
                copies.push((copy_name, def));
            }
        }
        let fun = match &e.kind {
            ExprKind::LetFun { binding, .. } => Some((**binding).clone()),
            _ => None,
        };
        // Each copy goes around the original: its definition sees the scope
        // the original's did.
        for (copy_name, def) in copies {
            self.copied = true;
            let span = e.span;
            let placeholder = Expr {
                kind: ExprKind::Unit,
                span,
                id,
            };
            let inner_let = Box::new(std::mem::replace(e, placeholder));
            let kind = match &fun {
                Some(binding) => ExprKind::LetFun {
                    rec,
                    binding: Box::new(FunBinding {
                        name: copy_name,
                        body: def,
                        ..binding.clone()
                    }),
                    body: inner_let,
                },
                None => ExprKind::Let(Pattern::Var(copy_name), Box::new(def), inner_let),
            };
            *e = Expr {
                kind,
                span,
                id: self.fresh_id(),
            };
        }
        Ok(())
    }
}

/// What a `let` binds: a function (its name and body) or a value.
enum Bound<'a> {
    Fun(&'a mut FunBinding),
    Value(&'a mut Ident, &'a mut Box<Expr>),
}

impl Bound<'_> {
    /// The bound name and the expression defining it.
    fn parts(&mut self) -> (&mut Ident, &mut Expr) {
        match self {
            Bound::Fun(b) => (&mut b.name, &mut b.body),
            Bound::Value(n, v) => (n, v),
        }
    }
}

/// Appends a name for `t` to `out`: prefix notation with arities, so
/// different types get different names (`Vec_Real`, `Tup2_Int_Bool`).
fn push_type_name(out: &mut String, t: &Type) {
    match t {
        Type::Var(_) | Type::Unit => out.push_str("Unit"),
        Type::Int => out.push_str("Int"),
        Type::Real => out.push_str("Real"),
        Type::Bool => out.push_str("Bool"),
        Type::Tuple(ts) => {
            out.push_str(&format!("Tup{}", ts.len()));
            for t in ts {
                out.push('_');
                push_type_name(out, t);
            }
        }
        Type::Sum(a, b) | Type::Fun(a, b) => {
            out.push_str(if matches!(t, Type::Sum(..)) {
                "Sum_"
            } else {
                "Fun_"
            });
            push_type_name(out, a);
            out.push('_');
            push_type_name(out, b);
        }
        Type::Vec(a) => {
            out.push_str("Vec_");
            push_type_name(out, a);
        }
        Type::Con(c, ts) => {
            out.push_str(c.name());
            for t in ts {
                out.push('_');
                push_type_name(out, t);
            }
        }
        Type::Record(ns, ts) => {
            out.push_str(&format!("Rec{}", ts.len()));
            for (n, t) in ns.iter().zip(ts) {
                out.push('_');
                out.push_str(n);
                out.push('_');
                push_type_name(out, t);
            }
        }
    }
}

/// Records every name `e` uses or binds, and the largest node id.
fn collect(e: &mut Expr, names: &mut HashSet<String>, max_id: &mut u32) -> Result<(), TypeError> {
    if stack::check().is_err() {
        return Err(super::infer::too_deep(e.span));
    }
    *max_id = (*max_id).max(e.id.0);
    let mut bind = |p: &Pattern| {
        super::infer::pattern_names(p, &mut |n| {
            names.insert(n.to_string());
        });
        p.for_each_record_id(&mut |id| *max_id = (*max_id).max(id.0));
    };
    match &e.kind {
        ExprKind::Var(n) => {
            names.insert(n.clone());
        }
        ExprKind::Lam(ps, _) => ps.iter().for_each(&mut bind),
        ExprKind::Let(p, _, _) | ExprKind::Bind(p, _, _) => bind(p),
        ExprKind::LetFun { binding, .. } => {
            binding.params.iter().for_each(&mut bind);
            names.insert(binding.name.name.clone());
        }
        ExprKind::Match { left, right, .. } => {
            bind(&left.0);
            bind(&right.0);
        }
        _ => {}
    }
    for c in e.kind.children_mut() {
        collect(c, names, max_id)?;
    }
    Ok(())
}
