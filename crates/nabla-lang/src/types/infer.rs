//! Algorithm W with levels (Rémy-style generalization) over the surface AST.

use super::{Con, Kind, Type};
use crate::diagnostic::Diagnostic;
use crate::pretty::TypeNamer;
use crate::prim::{self, PRIMS, Prim};
use crate::stack;
use crate::syntax::ast::*;
use crate::syntax::span::Span;
use std::collections::{HashMap, HashSet};
use std::ops::Deref;
use std::rc::Rc;

/// A type error.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeError {
    /// The headline.
    pub message: String,
    /// The offending expression.
    pub span: Span,
    /// Text under the caret.
    pub label: String,
    /// Where the other type came from, and similar context.
    pub secondary: Vec<(Span, String)>,
    /// A hint printed after the source excerpt.
    pub note: Option<String>,
}

impl From<TypeError> for Diagnostic {
    fn from(e: TypeError) -> Diagnostic {
        let mut d = Diagnostic::error(e.message, e.span).with_label(e.label);
        for (s, m) in e.secondary {
            d = d.with_secondary(s, m);
        }
        if let Some(n) = e.note {
            d = d.with_note(n);
        }
        d
    }
}

/// Facts about the program that the desugarer needs.
#[derive(Clone, Debug, Default)]
pub struct Typing {
    /// Integer literals whose type was resolved to `Real`.
    pub real_literals: HashSet<NodeId>,
    /// For each occurrence of the `sum` primitive, its element type.
    pub sum_types: HashMap<NodeId, Type>,
    /// For each arithmetic or comparison operator node (`Binary` other than
    /// `&&`/`||`, and unary `Neg`), the type of its operands.
    pub operand_types: HashMap<NodeId, Type>,
    /// When a definition or `let` function is used at several numeric types,
    /// the program with a copy of it for each (see [`check_program`]): the
    /// definitions to compile in place of the checked ones, the same ones
    /// first, then the copies of top-level definitions. The facts above
    /// are about it.
    pub specialised: Option<Vec<Def>>,
    /// The field names (sorted) of the record type at each record
    /// construction, field access (`r.w`: the type of `r`), update and
    /// record pattern: how [`crate::core::records`] lays it out as a tuple.
    pub records: HashMap<NodeId, std::sync::Arc<[String]>>,
}

/// The result of checking a program.
#[derive(Clone, Debug)]
pub struct CheckedProgram {
    /// The type of each definition, in the order given (fully resolved; type
    /// variables are the generalized ones).
    pub def_types: Vec<Type>,
    /// Facts for the desugarer.
    pub typing: Typing,
}

/// A polymorphic type: `generics` are the quantified variables.
#[derive(Clone, Debug)]
struct Scheme {
    generics: Vec<u32>,
    ty: Type,
    /// The definition or `let` function it is the type of, whose uses are
    /// recorded for specialisation (see [`super::specialise`]).
    binder: Option<Binder>,
}

impl Scheme {
    fn mono(ty: Type) -> Scheme {
        Scheme {
            generics: Vec::new(),
            ty,
            binder: None,
        }
    }
}

/// A name whose numeric type variables may be generalised: a top-level
/// definition (by index) or a `let` function (by the `let`'s node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Binder {
    Global(usize),
    Local(NodeId),
}

/// One use of a [`Binder`]: the types its numeric type variables were
/// instantiated to, in the order of [`Checker::generics_of`] (none for
/// a recursive use from inside its own definition, which is monomorphic).
#[derive(Clone, Debug)]
pub(crate) struct Use {
    pub binder: Binder,
    pub instance: Vec<Type>,
}

#[derive(Clone, Debug)]
struct VarInfo {
    /// What the variable was bound to, shared so that following a link costs O(1)
    /// however large the type (cloning it at every step made checking deep types
    /// quadratic).
    link: Option<Rc<Type>>,
    level: u32,
    kind: Kind,
    /// Union-by-rank bound on the length of the chain of variables linked to
    /// this one: linking the lower-ranked of two variables to the other keeps
    /// every chain logarithmic (always linking the older to the newer made a
    /// vector of n Int literals a chain of length n, checked in O(n²)).
    rank: u32,
}

/// A type resolved by [`Checker::resolve`]: borrowed from the caller, or shared
/// with the variable it was bound to. Either way it borrows nothing of the
/// checker, which may go on changing its variables.
enum Resolved<'a> {
    Borrowed(&'a Type),
    Linked(Rc<Type>),
}

impl Deref for Resolved<'_> {
    type Target = Type;
    fn deref(&self) -> &Type {
        match self {
            Resolved::Borrowed(t) => t,
            Resolved::Linked(t) => t,
        }
    }
}

/// The number of nodes of `t` (without following variables).
fn type_size(t: &Type) -> u64 {
    1 + match t {
        Type::Tuple(ts) | Type::Con(_, ts) | Type::Record(_, ts) => ts.iter().map(type_size).sum(),
        Type::Sum(a, b) | Type::Fun(a, b) => type_size(a) + type_size(b),
        Type::Vec(a) => type_size(a),
        _ => 0,
    }
}

/// An operand of type Int that decided an arithmetic operator to work on Int,
/// the other operand's type being open (`sum v / size v`): when the
/// definition is later used with Reals, the error points here, where `real`
/// is needed, rather than at the use.
#[derive(Clone, Debug)]
struct IntOperand {
    /// The Int operand.
    span: Span,
    /// The operator's symbol.
    op: &'static str,
}

#[derive(Clone, Copy)]
enum UnifyError {
    Mismatch,
    Occurs,
    Kind,
    NotData,
    /// `==`/`!=` on a type with a function inside.
    NotEq,
}

type TResult<T> = Result<T, TypeError>;

enum Global {
    /// In the SCC being checked: monomorphic.
    Pending(Type),
    Done(Scheme),
    /// Its definition failed to check; uses get a fresh type (no cascades).
    Failed,
}

/// `record` must have the field `field` of type `ty` (from `r.field` or a
/// record pattern ending `..`, at `span`).
#[derive(Clone, Debug)]
struct PendingField {
    record: Type,
    field: Ident,
    ty: Type,
    span: Span,
}

/// `jacobian` (or `hessian`, whose function's output is its input) used at
/// `span` with a function from `input` to `output`: its result type is
/// [`jacobian_type`] of them, once they are known.
#[derive(Clone, Debug)]
struct PendingJacobian {
    input: Type,
    output: Type,
    result: Type,
    span: Span,
}

/// The type of `jacobian f x` for `f : input -> output`: `output` with each
/// `Real` replaced by `input` (one gradient-shaped value per output real;
/// Int, Bool and () leaves carried as tangents carry them). For `Vec Real`
/// to `Vec Real` it is `Vec (Vec Real)`, row i the gradient of output i;
/// `hessian f x` is `jacobian_type(s, s)`.
pub fn jacobian_type(input: &Type, output: &Type) -> Type {
    let go = |t: &Type| jacobian_type(input, t);
    match output {
        Type::Real => input.clone(),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(go).collect()),
        Type::Record(ns, ts) => Type::Record(ns.clone(), ts.iter().map(go).collect()),
        Type::Sum(a, b) => Type::Sum(Box::new(go(a)), Box::new(go(b))),
        Type::Vec(a) => Type::Vec(Box::new(go(a))),
        other => other.clone(),
    }
}

pub(crate) struct Checker {
    vars: Vec<VarInfo>,
    level: u32,
    locals: HashMap<String, Vec<Scheme>>,
    globals: HashMap<String, usize>,
    global_state: Vec<Global>,
    prim_schemes: HashMap<Prim, Scheme>,
    int_literals: Vec<(NodeId, Type)>,
    sums: Vec<(NodeId, Type)>,
    operands: Vec<(NodeId, Type)>,
    /// The record type at each record construction, field access, update
    /// and record pattern (see [`Typing::records`]).
    records: Vec<(NodeId, Type)>,
    /// Field constraints waiting for their record's type to be known.
    pending_fields: Vec<PendingField>,
    /// `jacobian`/`hessian` uses waiting for their function's type.
    pending_jacobians: Vec<PendingJacobian>,
    /// The record types the program declared (see [`check_program_with`]).
    declared_records: Vec<Type>,
    annot_vars: HashMap<String, Type>,
    /// Operands that made arithmetic Int in the group of definitions being
    /// checked (see [`IntOperand`]).
    int_operands: Vec<IntOperand>,
    /// The same, for each checked definition, by index.
    int_operands_of: HashMap<usize, Vec<IntOperand>>,
    /// Work budget of the current group of definitions (see [`Checker::tick`]).
    fuel: std::cell::Cell<u64>,
    /// Set when `fuel` ran out.
    exhausted: std::cell::Cell<bool>,
    /// Checking a definition from a translated file: the dialect's
    /// primitives are visible.
    translated: bool,
    /// What this check generalises and records.
    pass: Pass,
    /// The uses of binders, by the node of the variable.
    uses: HashMap<NodeId, Use>,
    /// The generalised type variables of each binder that [`Checker::pass`]
    /// specialises (the numeric ones, or all).
    binder_generics: HashMap<Binder, Vec<u32>>,
    /// The type of every expression node ([`Pass::Monomorphic`] only).
    node_types: Vec<(NodeId, Type)>,
    /// Type nodes `node_types` may still copy (0: over budget).
    record_budget: u64,
    /// The type of the function each `let` function binds, by the `let`'s
    /// node ([`Pass::Monomorphic`] only).
    fun_types: Vec<(NodeId, Type)>,
    /// Order in which the groups of definitions were checked (dependencies first).
    sccs: Vec<Vec<usize>>,
}

/// The checks a program goes through (see [`check_program`] and
/// [`monomorphise`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Generalise numeric type variables too (at definitions and `let`
    /// functions), recording the numeric instance of every use.
    SpecialiseNumeric,
    /// The same, recording the instance of every generalised variable of a
    /// binder, numeric or not.
    SpecialiseAll,
    /// Hindley–Milner as usual: numeric variables are not generalised.
    Final,
    /// No generalisation at all (the program is monomorphic); records the
    /// type of every expression.
    Monomorphic,
}

/// The number of nodes of `t`, counted up to `limit` at most.
fn type_size_up_to(t: &Type, limit: u64) -> u64 {
    let mut n = 0;
    let mut stack = vec![t];
    while let Some(t) = stack.pop() {
        n += 1;
        if n >= limit {
            return limit;
        }
        match t {
            Type::Tuple(ts) | Type::Con(_, ts) | Type::Record(_, ts) => stack.extend(ts),
            Type::Sum(a, b) | Type::Fun(a, b) => {
                stack.push(a);
                stack.push(b);
            }
            Type::Vec(a) => stack.push(a),
            _ => {}
        }
    }
    n
}

/// Type nodes a group of definitions may visit. Hindley–Milner types can
/// grow exponentially (`let f1 x = f0 (f0 x) in …`); past this budget the
/// definition is rejected instead of exhausting time or memory.
const TYPE_WORK_BUDGET: u64 = 5_000_000;

/// Checks the definitions of a program (all top-level, mutually visible).
/// Returns the resolved type of each, or every type error found (at most
/// one per group of mutually recursive definitions).
///
/// Numeric polymorphism takes two checks. The first generalises numeric
/// type variables (`def sq x = x * x` is `sq : n -> n` for `n` Int or Real)
/// and records the type each use instantiates them to; its errors are the
/// program's. If some definition or `let` function is used at several
/// numeric types, `types::specialise` makes a copy of it for each (the
/// copies are in [`Typing::specialised`]). The second check, in which numeric
/// variables are not generalised, types that program: every definition is
/// used at one numeric type, so every operator and literal gets one type.
pub fn check_program(defs: &[Def]) -> Result<CheckedProgram, Vec<TypeError>> {
    check_program_with(defs, &[])
}

/// [`check_program`] with the record types the program declared (`type Name
/// = { … }`, as closed types): where a record's type is not known by the
/// end of a definition, the one declared record type that has every field
/// used of it is taken (`def loss m = m.w + m.b` with `type Model = { w :
/// Real, b : Real }`).
pub fn check_program_with(
    defs: &[Def],
    records: &[Type],
) -> Result<CheckedProgram, Vec<TypeError>> {
    // The standard library's functions are expanded first (super::stdlib);
    // the program that results is the one checked and run.
    let expanded = super::stdlib::expand(defs).map_err(|e| vec![e])?;
    let defs = expanded.as_deref().unwrap_or(defs);
    let poly = Checker::check(defs, Pass::SpecialiseNumeric, records)?;
    let specialised = super::specialise::specialise(defs, &poly).map_err(|e| vec![e])?;
    let program = specialised.as_deref().unwrap_or(defs);
    let mut checked = Checker::check(program, Pass::Final, records)?.finish();
    // Structural equality: comparisons of compound values expanded, and
    // the result checked again (super::equality).
    if let Some(compared) =
        super::equality::expand(program, &checked.typing.operand_types).map_err(|e| vec![e])?
    {
        let mut again = Checker::check(&compared, Pass::Final, records)?.finish();
        again.typing.specialised = Some(compared);
        return Ok(again);
    }
    checked.typing.specialised = specialised.or(expanded);
    Ok(checked)
}

/// A program in which every definition and `let`-bound name is used at one
/// type, with the type of every expression: what the typed IR is made from
/// ([`crate::core::lower_typed`]).
#[derive(Clone, Debug)]
pub struct Monomorphic {
    /// The definitions: the program's, then copies of those used at several
    /// types (named `name'Type…`, see `types::specialise`).
    pub defs: Vec<Def>,
    /// The type of each definition.
    pub def_types: Vec<Type>,
    /// The type of every expression node of `defs`.
    pub node_types: HashMap<NodeId, Type>,
    /// The type of the function each `let` function binds, by the `let`'s node.
    pub fun_types: HashMap<NodeId, Type>,
}

/// Monomorphises a well-typed program: the program with one copy of each
/// definition and `let` function for each type it is used at (Hindley–Milner
/// has no polymorphic recursion, so there are finitely many), checked
/// without generalisation so that every expression gets a closed type.
///
/// Fails with a type error where a polymorphic name cannot be copied —
/// a name bound by a tuple pattern, or a group of mutually recursive
/// definitions, used at several types — or where copies would exceed the
/// budget; the interpreter, which needs no copies, still runs such programs.
pub fn monomorphise(defs: &[Def]) -> Result<Monomorphic, Vec<TypeError>> {
    monomorphise_with(defs, &[])
}

/// [`monomorphise`] with the declared record types (see [`check_program_with`]).
pub fn monomorphise_with(defs: &[Def], records: &[Type]) -> Result<Monomorphic, Vec<TypeError>> {
    let expanded = super::stdlib::expand(defs).map_err(|e| vec![e])?;
    let defs = expanded.as_deref().unwrap_or(defs);
    let poly = Checker::check(defs, Pass::SpecialiseAll, records)?;
    let specialised = super::specialise::specialise(defs, &poly).map_err(|e| vec![e])?;
    let mut defs = specialised.unwrap_or_else(|| defs.to_vec());
    let mut c = Checker::check(&defs, Pass::Monomorphic, records)?;
    c.default_numeric();
    // Structural equality, as in `check_program`.
    let operands: HashMap<NodeId, Type> =
        c.operands.iter().map(|(id, t)| (*id, c.zonk(t))).collect();
    if let Some(compared) = super::equality::expand(&defs, &operands).map_err(|e| vec![e])? {
        defs = compared;
        c = Checker::check(&defs, Pass::Monomorphic, records)?;
        c.default_numeric();
    }
    // Writing out every node's type costs its size: bounded, as inference is
    // (deeply nested types would make it quadratic).
    c.fuel.set(TYPE_WORK_BUDGET);
    c.exhausted.set(false);
    let close = |c: &Checker, ts: Vec<(NodeId, Type)>| -> HashMap<NodeId, Type> {
        ts.into_iter().map(|(id, t)| (id, c.zonk(&t))).collect()
    };
    let node_types = std::mem::take(&mut c.node_types);
    let node_types = close(&c, node_types);
    let fun_types = std::mem::take(&mut c.fun_types);
    let fun_types = close(&c, fun_types);
    if c.exhausted.get() || c.record_budget == 0 {
        return Err(vec![TypeError {
            message: "the program's types are too large to compile".into(),
            span: defs.first().map_or(Span::default(), |d| d.span),
            label: "types here grow beyond the compiler's budget".into(),
            secondary: Vec::new(),
            note: None,
        }]);
    }
    c.fuel.set(u64::MAX);
    let checked = c.finish();
    Ok(Monomorphic {
        node_types,
        fun_types,
        def_types: checked.def_types,
        defs,
    })
}

impl Checker {
    /// Checks `defs` in the given pass (see [`check_program`], [`monomorphise`]).
    fn check(defs: &[Def], pass: Pass, records: &[Type]) -> Result<Checker, Vec<TypeError>> {
        let mut c = Checker {
            vars: Vec::new(),
            level: 0,
            locals: HashMap::new(),
            globals: HashMap::new(),
            global_state: Vec::new(),
            prim_schemes: HashMap::new(),
            int_literals: Vec::new(),
            sums: Vec::new(),
            operands: Vec::new(),
            records: Vec::new(),
            pending_fields: Vec::new(),
            pending_jacobians: Vec::new(),
            declared_records: records.to_vec(),
            annot_vars: HashMap::new(),
            int_operands: Vec::new(),
            int_operands_of: HashMap::new(),
            fuel: std::cell::Cell::new(TYPE_WORK_BUDGET),
            exhausted: std::cell::Cell::new(false),
            translated: false,
            pass,
            uses: HashMap::new(),
            binder_generics: HashMap::new(),
            node_types: Vec::new(),
            record_budget: TYPE_WORK_BUDGET,
            fun_types: Vec::new(),
            sccs: Vec::new(),
        };
        c.init_prims();
        let mut errors = Vec::new();
        for (i, d) in defs.iter().enumerate() {
            let name = &d.binding.name;
            if let Some(&j) = c.globals.get(&name.name) {
                errors.push(TypeError {
                    message: format!("`{}` is defined more than once", name.name),
                    span: name.span,
                    label: "defined again here".into(),
                    secondary: vec![(defs[j].binding.name.span, "first defined here".into())],
                    note: None,
                });
            } else {
                c.globals.insert(name.name.clone(), i);
            }
            c.global_state.push(Global::Failed);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let sccs = match c.dependency_sccs(defs) {
            Ok(s) => s,
            Err(e) => return Err(vec![e]),
        };
        for scc in &sccs {
            if let Err(e) = c.check_scc(defs, scc) {
                errors.push(e);
                for &i in scc {
                    c.global_state[i] = Global::Failed;
                }
            }
        }
        if !errors.is_empty() {
            errors.sort_by_key(|e| e.span.start);
            return Err(errors);
        }
        c.sccs = sccs;
        Ok(c)
    }

    /// The types and facts of a checked program, numeric variables still
    /// open defaulted to Int.
    fn finish(mut self) -> CheckedProgram {
        let c = &mut self;
        c.default_numeric();
        let mut def_types = Vec::new();
        for st in &c.global_state {
            let t = match st {
                Global::Done(s) => c.zonk(&s.ty),
                Global::Pending(t) => c.zonk(t),
                Global::Failed => Type::Unit,
            };
            def_types.push(t);
        }
        let mut typing = Typing::default();
        for (id, t) in std::mem::take(&mut c.int_literals) {
            if c.zonk(&t) == Type::Real {
                typing.real_literals.insert(id);
            }
        }
        for (id, t) in std::mem::take(&mut c.sums) {
            let t = c.zonk(&t);
            typing.sum_types.insert(id, t);
        }
        for (id, t) in std::mem::take(&mut c.operands) {
            let t = c.zonk(&t);
            typing.operand_types.insert(id, t);
        }
        for (id, t) in std::mem::take(&mut c.records) {
            if let Type::Record(names, _) = &*c.resolve(&t) {
                typing.records.insert(id, names.clone());
            }
        }
        CheckedProgram { def_types, typing }
    }

    /// Decides every numeric variable nothing decided: `Int`.
    fn default_numeric(&mut self) {
        for v in &mut self.vars {
            if v.link.is_none() && matches!(v.kind, Kind::Num | Kind::Eq) {
                v.link = Some(Rc::new(Type::Int));
            }
        }
    }

    /// What [`super::specialise`] reads: the record of a use of a binder.
    pub(crate) fn use_at(&self, id: NodeId) -> Option<&Use> {
        self.uses.get(&id)
    }

    /// The generalised variables of `b` this pass specialises (none if it has none).
    pub(crate) fn generics_of(&self, b: Binder) -> &[u32] {
        self.binder_generics.get(&b).map_or(&[], Vec::as_slice)
    }

    /// The groups of definitions, dependencies first.
    pub(crate) fn groups(&self) -> &[Vec<usize>] {
        &self.sccs
    }

    /// `t` with its variables followed: `Int`, `Real` or `Bool` if decided,
    /// else the variable it is.
    pub(crate) fn decided(&self, t: &Type) -> Type {
        self.zonk(t)
    }
}

/// The error of a program nested deeper than the stack budget allows.
pub(crate) fn too_deep(span: Span) -> TypeError {
    TypeError {
        message: "program nested too deeply".into(),
        span,
        label: "nesting limit reached here".into(),
        secondary: Vec::new(),
        note: None,
    }
}

impl Checker {
    fn init_prims(&mut self) {
        for p in PRIMS {
            let Ok(te) = crate::syntax::parser::parse_type(p.sig, 0) else {
                continue;
            };
            let mut names: HashMap<String, Type> = HashMap::new();
            let ty = self.prim_type(&te, &mut names);
            let generics = names
                .values()
                .filter_map(|t| if let Type::Var(v) = t { Some(*v) } else { None })
                .collect();
            self.prim_schemes.insert(
                p.prim,
                Scheme {
                    generics,
                    ty,
                    binder: None,
                },
            );
        }
    }

    fn prim_type(&mut self, te: &TypeExpr, names: &mut HashMap<String, Type>) -> Type {
        match te {
            TypeExpr::Name(id) => match id.name.as_str() {
                "Int" => Type::Int,
                "Real" => Type::Real,
                "Bool" => Type::Bool,
                n => {
                    let kind = match n {
                        "n" => Kind::Num,
                        "e" => Kind::Eq,
                        "s" | "t" => Kind::Data,
                        _ => Kind::Any,
                    };
                    if let Some(t) = names.get(n) {
                        return t.clone();
                    }
                    let t = self.fresh_kind(kind);
                    names.insert(n.to_string(), t.clone());
                    t
                }
            },
            TypeExpr::Unit(_) => Type::Unit,
            TypeExpr::Tuple(ts, _) => {
                Type::Tuple(ts.iter().map(|t| self.prim_type(t, names)).collect())
            }
            TypeExpr::Sum(a, b, _) => Type::Sum(
                Box::new(self.prim_type(a, names)),
                Box::new(self.prim_type(b, names)),
            ),
            TypeExpr::Vec(a, _) => Type::Vec(Box::new(self.prim_type(a, names))),
            TypeExpr::Fun(a, b, _) => Type::fun(self.prim_type(a, names), self.prim_type(b, names)),
            TypeExpr::Con(c, args, _) => {
                Type::Con(*c, args.iter().map(|t| self.prim_type(t, names)).collect())
            }
            TypeExpr::Record(fields, _) => Type::record(
                fields
                    .iter()
                    .map(|(n, t)| (n.name.clone(), self.prim_type(t, names)))
                    .collect(),
            ),
        }
    }

    // ---- variables and substitution ----

    fn fresh_kind(&mut self, kind: Kind) -> Type {
        self.vars.push(VarInfo {
            link: None,
            level: self.level,
            kind,
            rank: 0,
        });
        Type::Var((self.vars.len() - 1) as u32)
    }

    fn fresh(&mut self) -> Type {
        self.fresh_kind(Kind::Any)
    }

    /// `t` with its bound variables followed at the top (not inside), without
    /// copying it: a borrow of `t` or a share of a variable's link.
    fn resolve<'a>(&self, t: &'a Type) -> Resolved<'a> {
        let mut r = Resolved::Borrowed(t);
        while let &Type::Var(v) = &*r
            && let Some(next) = &self.vars[v as usize].link
        {
            r = Resolved::Linked(Rc::clone(next));
        }
        r
    }

    /// An owned copy of a resolved type, its size charged to the work budget, so
    /// that copying large types over and over ends in "too large to infer" rather
    /// than in quadratic time.
    fn owned(&self, t: &Type) -> Type {
        self.charge(type_size(t));
        t.clone()
    }

    /// Substitutes all bound variables (unbound ones stay).
    fn zonk(&self, t: &Type) -> Type {
        if !self.tick() {
            return Type::Unit;
        }
        match &*self.resolve(t) {
            Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| self.zonk(t)).collect()),
            Type::Sum(a, b) => Type::Sum(Box::new(self.zonk(a)), Box::new(self.zonk(b))),
            Type::Vec(a) => Type::Vec(Box::new(self.zonk(a))),
            Type::Fun(a, b) => Type::fun(self.zonk(a), self.zonk(b)),
            Type::Con(c, ts) => Type::Con(*c, ts.iter().map(|t| self.zonk(t)).collect()),
            Type::Record(ns, ts) => {
                Type::Record(ns.clone(), ts.iter().map(|t| self.zonk(t)).collect())
            }
            leaf => leaf.clone(),
        }
    }

    fn show2(&self, a: &Type, b: &Type) -> (String, String) {
        let mut namer = TypeNamer::new();
        let kind_of = |v: u32| self.vars.get(v as usize).map_or(Kind::Any, |i| i.kind);
        let a = namer.print(&self.zonk(a), &kind_of);
        let b = namer.print(&self.zonk(b), &kind_of);
        (a, b)
    }

    fn show(&self, a: &Type) -> String {
        self.show2(a, &Type::Unit).0
    }

    // ---- unification ----

    fn unify_raw(&mut self, a: &Type, b: &Type) -> Result<(), UnifyError> {
        if !self.tick() {
            return Err(UnifyError::Mismatch);
        }
        let a = self.resolve(a);
        let b = self.resolve(b);
        match (&*a, &*b) {
            (Type::Var(x), Type::Var(y)) if x == y => return Ok(()),
            (&Type::Var(x), _) => return self.bind(x, b),
            (_, &Type::Var(y)) => return self.bind(y, a),
            _ => {}
        }
        match (&*a, &*b) {
            (Type::Int, Type::Int)
            | (Type::Real, Type::Real)
            | (Type::Bool, Type::Bool)
            | (Type::Unit, Type::Unit) => Ok(()),
            (Type::Tuple(xs), Type::Tuple(ys)) if xs.len() == ys.len() => {
                for (x, y) in xs.iter().zip(ys) {
                    self.unify_raw(x, y)?;
                }
                Ok(())
            }
            (Type::Sum(a1, b1), Type::Sum(a2, b2)) | (Type::Fun(a1, b1), Type::Fun(a2, b2)) => {
                self.unify_raw(a1, a2)?;
                self.unify_raw(b1, b2)
            }
            (Type::Vec(x), Type::Vec(y)) => self.unify_raw(x, y),
            (Type::Con(c1, xs), Type::Con(c2, ys)) if c1 == c2 && xs.len() == ys.len() => {
                for (x, y) in xs.iter().zip(ys) {
                    self.unify_raw(x, y)?;
                }
                Ok(())
            }
            (Type::Record(n1, xs), Type::Record(n2, ys)) if n1 == n2 => {
                for (x, y) in xs.iter().zip(ys) {
                    self.unify_raw(x, y)?;
                }
                Ok(())
            }
            _ => Err(UnifyError::Mismatch),
        }
    }

    fn bind(&mut self, v: u32, t: Resolved<'_>) -> Result<(), UnifyError> {
        let info = self.vars[v as usize].clone();
        if let Type::Var(w) = *t {
            let (from, to) = if info.rank > self.vars[w as usize].rank {
                (w as usize, v as usize)
            } else {
                (v as usize, w as usize)
            };
            let merged = &self.vars[from];
            let (level, kind, rank) = (merged.level, merged.kind, merged.rank);
            let root = &mut self.vars[to];
            root.level = root.level.min(level);
            root.kind = root.kind.max(kind);
            if root.rank == rank {
                root.rank += 1;
            }
            self.vars[from].link = Some(Rc::new(Type::Var(to as u32)));
            return Ok(());
        }
        let ok = match info.kind {
            Kind::Any => true,
            Kind::Num => matches!(*t, Type::Int | Type::Real),
            Kind::Eq => {
                self.constrain_eq(&t)?;
                true
            }
            Kind::Data => {
                self.constrain_data(&t)?;
                true
            }
        };
        if !ok {
            return Err(UnifyError::Kind);
        }
        self.occurs_adjust(v, info.level, &t)?;
        let link = match t {
            Resolved::Linked(shared) => shared,
            Resolved::Borrowed(t) => Rc::new(self.owned(t)),
        };
        self.vars[v as usize].link = Some(link);
        Ok(())
    }

    /// Requires `t` to be first-order data: no function types inside; its
    /// variables become [`Kind::Data`] (or stay a stronger kind).
    fn constrain_data(&mut self, t: &Type) -> Result<(), UnifyError> {
        self.constrain_no_functions(t, Kind::Data, UnifyError::NotData)
    }

    /// Requires `t` to have structural equality (super::equality): no
    /// functions inside; its variables become [`Kind::Eq`] (or stay `Num`).
    fn constrain_eq(&mut self, t: &Type) -> Result<(), UnifyError> {
        self.constrain_no_functions(t, Kind::Eq, UnifyError::NotEq)
    }

    /// Requires `t` to have no function (or translated-only) type inside,
    /// raising its variables to at least `kind`; `error` if it has one.
    fn constrain_no_functions(
        &mut self,
        t: &Type,
        kind: Kind,
        error: UnifyError,
    ) -> Result<(), UnifyError> {
        if !self.tick() {
            return Err(UnifyError::Occurs);
        }
        let t = self.resolve(t);
        match &*t {
            &Type::Var(w) => {
                let info = &mut self.vars[w as usize];
                info.kind = info.kind.max(kind);
                Ok(())
            }
            Type::Fun(..) | Type::Con(..) => Err(error),
            Type::Tuple(ts) | Type::Record(_, ts) => ts
                .iter()
                .try_for_each(|t| self.constrain_no_functions(t, kind, error)),
            Type::Sum(a, b) => {
                self.constrain_no_functions(a, kind, error)?;
                self.constrain_no_functions(b, kind, error)
            }
            Type::Vec(a) => self.constrain_no_functions(a, kind, error),
            _ => Ok(()),
        }
    }

    fn occurs_adjust(&mut self, v: u32, level: u32, t: &Type) -> Result<(), UnifyError> {
        if !self.tick() {
            return Err(UnifyError::Occurs);
        }
        let t = self.resolve(t);
        match &*t {
            &Type::Var(w) => {
                if w == v {
                    return Err(UnifyError::Occurs);
                }
                let info = &mut self.vars[w as usize];
                info.level = info.level.min(level);
                Ok(())
            }
            Type::Tuple(ts) => ts.iter().try_for_each(|t| self.occurs_adjust(v, level, t)),
            Type::Sum(a, b) | Type::Fun(a, b) => {
                self.occurs_adjust(v, level, a)?;
                self.occurs_adjust(v, level, b)
            }
            Type::Vec(a) => self.occurs_adjust(v, level, a),
            Type::Con(_, ts) | Type::Record(_, ts) => {
                ts.iter().try_for_each(|t| self.occurs_adjust(v, level, t))
            }
            _ => Ok(()),
        }
    }

    /// Unifies the type `found` of the expression at `span` with `expected`.
    /// `because`, if given, points at where `expected` came from.
    fn expect(
        &mut self,
        expected: &Type,
        found: &Type,
        span: Span,
        because: Option<(Span, String)>,
    ) -> TResult<()> {
        if stack::check().is_err() {
            return Err(too_deep(span));
        }
        match self.unify_raw(expected, found) {
            Ok(()) => Ok(()),
            Err(e) => {
                let (exp_raw, fnd_raw) = self.show2(expected, found);
                let (exp, fnd) = (describe(&exp_raw), describe(&fnd_raw));
                let (message, label) = match e {
                    UnifyError::Occurs => (
                        format!("infinite type: cannot make {exp} equal to {fnd}"),
                        "this would need an infinitely nested type".into(),
                    ),
                    UnifyError::NotData => (
                        format!(
                            "type mismatch: derivatives take and return first-order data (reals, \
                             tuples, sums, vectors; no functions), found {fnd}"
                        ),
                        format!("this has type {fnd_raw}"),
                    ),
                    UnifyError::NotEq => (
                        format!(
                            "type mismatch: `==` and `!=` compare data (numbers, booleans, \
                             tuples, sums, vectors), not functions; found {fnd}"
                        ),
                        format!("this has type {fnd_raw}"),
                    ),
                    UnifyError::Mismatch | UnifyError::Kind => (
                        format!("type mismatch: expected {exp}, found {fnd}"),
                        format!("this has type {fnd_raw}"),
                    ),
                };
                Err(TypeError {
                    message,
                    span,
                    label,
                    secondary: because.into_iter().collect(),
                    note: None,
                })
            }
        }
    }

    // ---- generalization ----

    fn enter(&mut self) {
        self.level += 1;
    }

    fn leave(&mut self) {
        self.level -= 1;
    }

    /// The type scheme of `t`, the type of `binder` if given. Numeric type
    /// variables are generalised only for a binder, when specialising
    /// ([`Checker::generics_of`]).
    fn generalize(&mut self, t: &Type, binder: Option<Binder>) -> Scheme {
        let t = self.zonk(t);
        let mut generics = Vec::new();
        if self.pass == Pass::Monomorphic {
            return Scheme {
                generics,
                ty: t,
                binder,
            };
        }
        let numeric =
            binder.is_some() && matches!(self.pass, Pass::SpecialiseNumeric | Pass::SpecialiseAll);
        self.collect_generics(&t, numeric, &mut generics);
        if let Some(b) = binder {
            let specialised: Vec<u32> = generics
                .iter()
                .copied()
                .filter(|&g| self.specialises(g))
                .collect();
            self.binder_generics.insert(b, specialised);
        }
        Scheme {
            generics,
            ty: t,
            binder,
        }
    }

    /// True if `t` has an unbound variable of a level deeper than `level`
    /// (one that generalising at `level` would quantify).
    fn has_var_deeper_than(&self, t: &Type, level: u32) -> bool {
        match &*self.resolve(t) {
            &Type::Var(v) => self.vars[v as usize].level > level,
            Type::Tuple(ts) | Type::Con(_, ts) | Type::Record(_, ts) => {
                ts.iter().any(|t| self.has_var_deeper_than(t, level))
            }
            Type::Sum(a, b) | Type::Fun(a, b) => {
                self.has_var_deeper_than(a, level) || self.has_var_deeper_than(b, level)
            }
            Type::Vec(a) => self.has_var_deeper_than(a, level),
            Type::Int | Type::Real | Type::Bool | Type::Unit => false,
        }
    }

    pub(crate) fn is_numeric(&self, v: u32) -> bool {
        matches!(self.vars[v as usize].kind, Kind::Num | Kind::Eq)
    }

    /// True if this pass specialises the generalised variable `v`.
    fn specialises(&self, v: u32) -> bool {
        self.pass == Pass::SpecialiseAll || self.is_numeric(v)
    }

    fn collect_generics(&self, t: &Type, numeric: bool, out: &mut Vec<u32>) {
        if !self.tick() {
            return;
        }
        match t {
            Type::Var(v) => {
                let info = &self.vars[*v as usize];
                if info.level > self.level
                    && (numeric || matches!(info.kind, Kind::Any | Kind::Data))
                    && !out.contains(v)
                {
                    out.push(*v);
                }
            }
            Type::Tuple(ts) => ts
                .iter()
                .for_each(|t| self.collect_generics(t, numeric, out)),
            Type::Sum(a, b) | Type::Fun(a, b) => {
                self.collect_generics(a, numeric, out);
                self.collect_generics(b, numeric, out);
            }
            Type::Vec(a) => self.collect_generics(a, numeric, out),
            Type::Con(_, ts) | Type::Record(_, ts) => ts
                .iter()
                .for_each(|t| self.collect_generics(t, numeric, out)),
            _ => {}
        }
    }

    /// A fresh instance of `s`; if `s` is a binder's, the use `at` is recorded.
    fn instantiate(&mut self, s: &Scheme, at: NodeId) -> Type {
        if s.generics.is_empty() {
            if let Some(binder) = s.binder {
                self.uses.insert(
                    at,
                    Use {
                        binder,
                        instance: Vec::new(),
                    },
                );
            }
            return s.ty.clone();
        }
        let mut map = HashMap::new();
        for &g in &s.generics {
            let kind = self.vars[g as usize].kind;
            map.insert(g, self.fresh_kind(kind));
        }
        if let Some(binder) = s.binder {
            let instance = s
                .generics
                .iter()
                .filter(|&&g| self.specialises(g))
                .map(|g| map[g].clone())
                .collect();
            self.uses.insert(at, Use { binder, instance });
        }
        self.subst(&s.ty, &map)
    }

    fn subst(&self, t: &Type, map: &HashMap<u32, Type>) -> Type {
        if !self.tick() {
            return Type::Unit;
        }
        match &*self.resolve(t) {
            Type::Var(v) => map.get(v).cloned().unwrap_or(Type::Var(*v)),
            Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| self.subst(t, map)).collect()),
            Type::Sum(a, b) => {
                Type::Sum(Box::new(self.subst(a, map)), Box::new(self.subst(b, map)))
            }
            Type::Vec(a) => Type::Vec(Box::new(self.subst(a, map))),
            Type::Fun(a, b) => Type::fun(self.subst(a, map), self.subst(b, map)),
            Type::Con(c, ts) => Type::Con(*c, ts.iter().map(|t| self.subst(t, map)).collect()),
            Type::Record(ns, ts) => {
                Type::Record(ns.clone(), ts.iter().map(|t| self.subst(t, map)).collect())
            }
            leaf => leaf.clone(),
        }
    }

    // ---- top level ----

    /// Groups definitions into strongly connected components of the
    /// "refers to" relation, dependencies first (Tarjan, iterative).
    fn dependency_sccs(&self, defs: &[Def]) -> TResult<Vec<Vec<usize>>> {
        let mut edges = Vec::with_capacity(defs.len());
        for d in defs {
            let mut refs = Vec::new();
            let mut bound: HashMap<String, usize> = HashMap::new();
            for p in &d.binding.params {
                pattern_names(p, &mut |n| *bound.entry(n.to_string()).or_default() += 1);
            }
            self.free_globals(&d.binding.body, &mut bound, &mut refs)?;
            refs.sort_unstable();
            refs.dedup();
            edges.push(refs);
        }
        Ok(tarjan(&edges))
    }

    fn free_globals(
        &self,
        e: &Expr,
        bound: &mut HashMap<String, usize>,
        out: &mut Vec<usize>,
    ) -> TResult<()> {
        if stack::check().is_err() {
            return Err(too_deep(e.span));
        }
        let bind = |p: &Pattern, bound: &mut HashMap<String, usize>| {
            pattern_names(p, &mut |n| *bound.entry(n.to_string()).or_default() += 1);
        };
        let unbind = |p: &Pattern, bound: &mut HashMap<String, usize>| {
            pattern_names(p, &mut |n| {
                if let Some(c) = bound.get_mut(n) {
                    *c -= 1;
                }
            });
        };
        match &e.kind {
            ExprKind::Var(n) => {
                if bound.get(n).copied().unwrap_or(0) == 0
                    && let Some(&i) = self.globals.get(n)
                {
                    out.push(i);
                }
            }
            ExprKind::Int(_) | ExprKind::Real(_) | ExprKind::Bool(_) | ExprKind::Unit => {}
            ExprKind::Tuple(es) | ExprKind::Vector(es) => {
                for x in es {
                    self.free_globals(x, bound, out)?;
                }
            }
            ExprKind::Lam(ps, body) => {
                ps.iter().for_each(|p| bind(p, bound));
                self.free_globals(body, bound, out)?;
                ps.iter().for_each(|p| unbind(p, bound));
            }
            ExprKind::App(a, b)
            | ExprKind::Binary(_, a, b)
            | ExprKind::Index(a, b)
            | ExprKind::RunDelta(a, b) => {
                self.free_globals(a, bound, out)?;
                self.free_globals(b, bound, out)?;
            }
            ExprKind::Poly(..) => {}
            ExprKind::Bind(p, v, body) => {
                self.free_globals(v, bound, out)?;
                bind(p, bound);
                self.free_globals(body, bound, out)?;
                unbind(p, bound);
            }
            ExprKind::Let(p, v, body) => {
                self.free_globals(v, bound, out)?;
                bind(p, bound);
                self.free_globals(body, bound, out)?;
                unbind(p, bound);
            }
            ExprKind::LetFun { rec, binding, body } => {
                let name = Pattern::Var(binding.name.clone());
                if *rec {
                    bind(&name, bound);
                }
                binding.params.iter().for_each(|p| bind(p, bound));
                self.free_globals(&binding.body, bound, out)?;
                binding.params.iter().for_each(|p| unbind(p, bound));
                if !*rec {
                    bind(&name, bound);
                }
                self.free_globals(body, bound, out)?;
                unbind(&name, bound);
            }
            ExprKind::If(a, b, c) => {
                self.free_globals(a, bound, out)?;
                self.free_globals(b, bound, out)?;
                self.free_globals(c, bound, out)?;
            }
            ExprKind::Inl(a)
            | ExprKind::Inr(a)
            | ExprKind::Neg(a)
            | ExprKind::Deref(a)
            | ExprKind::Trace(_, a)
            | ExprKind::Field(a, _)
            | ExprKind::Annot(a, _) => {
                self.free_globals(a, bound, out)?;
            }
            ExprKind::Record(fields) => {
                for (_, x) in fields {
                    self.free_globals(x, bound, out)?;
                }
            }
            ExprKind::Update(r, fields) => {
                self.free_globals(r, bound, out)?;
                for (_, x) in fields {
                    self.free_globals(x, bound, out)?;
                }
            }
            ExprKind::Match {
                scrutinee,
                left,
                right,
            } => {
                self.free_globals(scrutinee, bound, out)?;
                for (p, body) in [left, right] {
                    bind(p, bound);
                    self.free_globals(body, bound, out)?;
                    unbind(p, bound);
                }
            }
        }
        Ok(())
    }

    /// One unit of type work: false once the stack or the work budget is used up.
    fn tick(&self) -> bool {
        if stack::check().is_err() {
            return false;
        }
        let f = self.fuel.get();
        if f == 0 {
            self.exhausted.set(true);
            return false;
        }
        self.fuel.set(f - 1);
        true
    }

    /// Spends `nodes` of the work budget at once (see [`Checker::owned`]).
    fn charge(&self, nodes: u64) {
        let f = self.fuel.get();
        if f < nodes {
            self.fuel.set(0);
            self.exhausted.set(true);
        } else {
            self.fuel.set(f - nodes);
        }
    }

    fn check_scc(&mut self, defs: &[Def], scc: &[usize]) -> TResult<()> {
        self.fuel.set(TYPE_WORK_BUDGET);
        self.exhausted.set(false);
        let r = self.check_scc_inner(defs, scc);
        if self.exhausted.get() {
            let d = &defs[scc[0]];
            return Err(TypeError {
                message: format!(
                    "the type of `{}` is too large to infer",
                    d.binding.name.name
                ),
                span: d.binding.name.span,
                label: "types here grow beyond the checker's work budget".into(),
                secondary: Vec::new(),
                note: None,
            });
        }
        r
    }

    fn check_scc_inner(&mut self, defs: &[Def], scc: &[usize]) -> TResult<()> {
        self.pending_fields.clear();
        self.pending_jacobians.clear();
        self.enter();
        self.int_operands.clear();
        let mut tys = Vec::new();
        for &i in scc {
            let t = self.fresh();
            self.global_state[i] = Global::Pending(t.clone());
            tys.push(t);
        }
        for (k, &i) in scc.iter().enumerate() {
            self.annot_vars.clear();
            let d = &defs[i];
            self.translated = d.translated;
            let t = self.infer_binding(&d.binding)?;
            self.expect(&tys[k], &t, d.binding.name.span, None)?;
        }
        self.discharge_deferred(true)?;
        self.leave();
        for (k, &i) in scc.iter().enumerate() {
            // Numeric variables are generalised for a definition on its own:
            // a copy of a group of mutually recursive ones would need copies
            // of the whole group.
            let binder = (scc.len() == 1).then_some(Binder::Global(i));
            let s = self.generalize(&tys[k], binder);
            self.global_state[i] = Global::Done(s);
            self.int_operands_of.insert(i, self.int_operands.clone());
        }
        Ok(())
    }

    /// The type of `fun params -> (body : ret)`.
    fn infer_binding(&mut self, b: &FunBinding) -> TResult<Type> {
        let mut param_tys = Vec::new();
        let mut bound = Vec::new();
        for p in &b.params {
            let t = self.pattern(p, &mut bound)?;
            param_tys.push(t);
        }
        self.push_mono(&bound);
        let body = self.infer(&b.body);
        let body = body.and_then(|t| {
            if let Some(r) = &b.ret {
                let rt = self.annotation(r)?;
                self.expect(
                    &rt,
                    &t,
                    b.body.span,
                    Some((r.span(), "expected because of this annotation".into())),
                )?;
            }
            Ok(t)
        });
        self.pop(&bound);
        let mut t = body?;
        for p in param_tys.into_iter().rev() {
            t = Type::fun(p, t);
        }
        Ok(t)
    }

    fn push_mono(&mut self, bound: &[(String, Type)]) {
        for (n, t) in bound {
            self.locals
                .entry(n.clone())
                .or_default()
                .push(Scheme::mono(t.clone()));
        }
    }

    fn push_scheme(&mut self, name: &str, s: Scheme) {
        self.locals.entry(name.to_string()).or_default().push(s);
    }

    fn pop(&mut self, bound: &[(String, Type)]) {
        for (n, _) in bound {
            self.pop_name(n);
        }
    }

    fn pop_name(&mut self, n: &str) {
        if let Some(v) = self.locals.get_mut(n) {
            v.pop();
            if v.is_empty() {
                self.locals.remove(n);
            }
        }
    }

    fn annotation(&mut self, te: &TypeExpr) -> TResult<Type> {
        if stack::check().is_err() {
            return Err(too_deep(te.span()));
        }
        Ok(match te {
            TypeExpr::Name(id) => match id.name.as_str() {
                "Int" => Type::Int,
                "Real" => Type::Real,
                "Bool" => Type::Bool,
                n if n.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') => {
                    if let Some(t) = self.annot_vars.get(n) {
                        t.clone()
                    } else {
                        let t = self.fresh();
                        self.annot_vars.insert(n.to_string(), t.clone());
                        t
                    }
                }
                "Vec" => {
                    return Err(TypeError {
                        message: "`Vec` needs an element type".into(),
                        span: id.span,
                        label: "write e.g. `Vec Real`".into(),
                        secondary: Vec::new(),
                        note: None,
                    });
                }
                n => {
                    return Err(TypeError {
                        message: format!("unknown type `{n}`"),
                        span: id.span,
                        label: "types are Real, Int, Bool, (), tuples, records, A + B, Vec A, A -> B, lowercase variables and names declared with `type`"
                            .into(),
                        secondary: Vec::new(),
                        note: None,
                    });
                }
            },
            TypeExpr::Unit(_) => Type::Unit,
            TypeExpr::Tuple(ts, _) => Type::Tuple(
                ts.iter()
                    .map(|t| self.annotation(t))
                    .collect::<TResult<_>>()?,
            ),
            TypeExpr::Sum(a, b, _) => {
                Type::Sum(Box::new(self.annotation(a)?), Box::new(self.annotation(b)?))
            }
            TypeExpr::Vec(a, _) => Type::Vec(Box::new(self.annotation(a)?)),
            TypeExpr::Fun(a, b, _) => Type::fun(self.annotation(a)?, self.annotation(b)?),
            TypeExpr::Con(c, args, _) => Type::Con(
                *c,
                args.iter()
                    .map(|t| self.annotation(t))
                    .collect::<TResult<_>>()?,
            ),
            TypeExpr::Record(fields, _) => Type::record(
                fields
                    .iter()
                    .map(|(n, t)| Ok((n.name.clone(), self.annotation(t)?)))
                    .collect::<TResult<_>>()?,
            ),
        })
    }

    /// The type a pattern matches, collecting the names it binds.
    fn pattern(&mut self, p: &Pattern, bound: &mut Vec<(String, Type)>) -> TResult<Type> {
        if stack::check().is_err() {
            return Err(too_deep(p.span()));
        }
        match p {
            Pattern::Var(id) => {
                if let Some((_, _)) = bound.iter().find(|(n, _)| *n == id.name) {
                    return Err(TypeError {
                        message: format!("`{}` is bound more than once in this pattern", id.name),
                        span: id.span,
                        label: "bound again here".into(),
                        secondary: Vec::new(),
                        note: None,
                    });
                }
                let t = self.fresh();
                bound.push((id.name.clone(), t.clone()));
                Ok(t)
            }
            Pattern::Wild(_) => Ok(self.fresh()),
            Pattern::Unit(_) => Ok(Type::Unit),
            Pattern::Tuple(ps, _) => {
                let ts = ps
                    .iter()
                    .map(|p| self.pattern(p, bound))
                    .collect::<TResult<Vec<_>>>()?;
                Ok(Type::Tuple(ts))
            }
            Pattern::Annot(inner, te, span) => {
                let t = self.pattern(inner, bound)?;
                let a = self.annotation(te)?;
                self.expect(
                    &a,
                    &t,
                    *span,
                    Some((te.span(), "expected because of this annotation".into())),
                )?;
                Ok(a)
            }
            Pattern::Record {
                fields,
                open,
                span,
                id,
            } => {
                let mut typed = Vec::new();
                for (name, p) in fields {
                    typed.push((name, self.pattern(p, bound)?));
                }
                let t = if *open {
                    let r = self.fresh();
                    for (name, ft) in typed {
                        self.has_field(&r, name, ft, *span)?;
                    }
                    r
                } else {
                    Type::record(
                        typed
                            .into_iter()
                            .map(|(n, t)| (n.name.clone(), t))
                            .collect(),
                    )
                };
                self.records.push((*id, t.clone()));
                Ok(t)
            }
        }
    }

    /// Requires the record type `record` to have a field `field` of type
    /// `ty`: now if `record` is known, else once it is (see
    /// [`Checker::discharge_deferred`]).
    fn has_field(&mut self, record: &Type, field: &Ident, ty: Type, span: Span) -> TResult<()> {
        let pending = PendingField {
            record: record.clone(),
            field: field.clone(),
            ty,
            span,
        };
        if !self.try_field(&pending)? {
            // The field's type will be part of the record's: it must not
            // be generalised where the record's type is not.
            if let Type::Var(v) = *self.resolve(record) {
                let level = self.vars[v as usize].level;
                if self.occurs_adjust(v, level, &pending.ty).is_err() {
                    return Err(TypeError {
                        message: format!(
                            "infinite type: a record whose field `{}` holds the record itself",
                            field.name
                        ),
                        span,
                        label: "this would need an infinitely nested type".into(),
                        secondary: Vec::new(),
                        note: None,
                    });
                }
            }
            self.pending_fields.push(pending);
        }
        Ok(())
    }

    /// Applies a field constraint if its record type is known; false if not yet.
    fn try_field(&mut self, p: &PendingField) -> TResult<bool> {
        let record = self.resolve(&p.record);
        let (names, types) = match &*record {
            Type::Var(_) => return Ok(false),
            Type::Record(names, types) => (names.clone(), types.clone()),
            _ => {
                let shown = self.show(&p.record);
                return Err(TypeError {
                    message: format!(
                        "`.{}` takes a field of a record, and this has type {shown}",
                        p.field.name,
                    ),
                    span: p.span,
                    label: format!("this has type {shown}"),
                    secondary: Vec::new(),
                    note: None,
                });
            }
        };
        let Some(i) = names.iter().position(|n| *n == p.field.name) else {
            let shown = self.show(&p.record);
            let close = names
                .iter()
                .map(|n| (edit_distance(&p.field.name, n), n))
                .filter(|&(d, _)| d <= 2)
                .min();
            return Err(TypeError {
                message: format!("the record type {shown} has no field `{}`", p.field.name),
                span: p.field.span,
                label: match close {
                    Some((_, n)) => format!("no such field; did you mean `{n}`?"),
                    None => "no such field".into(),
                },
                secondary: vec![(p.span, format!("this has type {shown}"))],
                note: Some(format!("its fields are {}", names.join(", "))),
            });
        };
        self.expect(&types[i], &p.ty, p.field.span, None)?;
        Ok(true)
    }

    /// For each record type still unknown with fields pending (with
    /// `only_generalised`, only those a `let` would generalise here), the one
    /// declared record type that has all those fields, if there is exactly
    /// one: unified with it. True if any was.
    fn take_declared_records(&mut self, only_generalised: bool) -> TResult<bool> {
        let mut wanted: Vec<(u32, Vec<String>, Span)> = Vec::new();
        for p in &self.pending_fields {
            if let Type::Var(v) = *self.resolve(&p.record)
                && (!only_generalised || self.vars[v as usize].level > self.level)
            {
                match wanted.iter_mut().find(|(w, _, _)| *w == v) {
                    Some((_, fields, _)) => fields.push(p.field.name.clone()),
                    None => wanted.push((v, vec![p.field.name.clone()], p.span)),
                }
            }
        }
        let mut decided = false;
        for (v, fields, span) in wanted {
            let mut fits = self.declared_records.iter().filter(
                |t| matches!(t, Type::Record(names, _) if fields.iter().all(|f| names.contains(f))),
            );
            if let (Some(t), None) = (fits.next(), fits.next()) {
                let t = t.clone();
                self.expect(&t, &Type::Var(v), span, None)?;
                decided = true;
            }
        }
        Ok(decided)
    }

    /// Decides the pending `jacobian` result types it can (see
    /// [`Checker::try_jacobian`]) and applies the pending field constraints
    /// whose record types are known by now. With `all`, one still unknown is an error (the end of a
    /// definition: nothing later can tell); otherwise only one whose record
    /// type would be generalised here (deeper than the current level) is.
    fn discharge_deferred(&mut self, all: bool) -> TResult<()> {
        let jacobians = std::mem::take(&mut self.pending_jacobians);
        for p in jacobians {
            // Decided now if it can be; forced if this is the end of the
            // definition or its types would be generalised here (a scheme
            // cannot carry the constraint).
            let generalised = [&p.input, &p.output]
                .iter()
                .any(|t| self.has_var_deeper_than(t, self.level));
            if !self.try_jacobian(&p, all || generalised)? {
                self.pending_jacobians.push(p);
            }
        }
        loop {
            let pending = std::mem::take(&mut self.pending_fields);
            let before = pending.len();
            let mut left = Vec::new();
            for p in pending {
                if !self.try_field(&p)? {
                    left.push(p);
                }
            }
            let progress = left.len() < before;
            self.pending_fields = left;
            if !progress {
                break;
            }
        }
        if self.take_declared_records(!all)? {
            return self.discharge_deferred(all);
        }
        let unknown = self.pending_fields.iter().position(|p| {
            all || matches!(*self.resolve(&p.record), Type::Var(v) if self.vars[v as usize].level > self.level)
        });
        if let Some(i) = unknown {
            let p = self.pending_fields.swap_remove(i);
            self.pending_fields.clear();
            return Err(TypeError {
                message: format!(
                    "cannot tell which record type has the field `{}` here",
                    p.field.name
                ),
                span: p.span,
                label: "the type of this record is not known here".into(),
                secondary: Vec::new(),
                note: Some(
                    "a record's type is known where the record is made, or from the one \
                     record type declared with `type` that has the fields used; give it where \
                     the record comes in, e.g. `def loss (m : Model) = …` or \
                     `fun (p : { w : Real, b : Real }) -> …`"
                        .into(),
                ),
            });
        }
        Ok(())
    }

    fn lookup(&mut self, name: &str, e: &Expr) -> TResult<Type> {
        if let Some(s) = self.locals.get(name).and_then(|v| v.last()).cloned() {
            return Ok(self.instantiate(&s, e.id));
        }
        if let Some(&i) = self.globals.get(name) {
            return Ok(match &self.global_state[i] {
                Global::Pending(t) => {
                    let t = t.clone();
                    self.instantiate(
                        &Scheme {
                            generics: Vec::new(),
                            ty: t,
                            binder: Some(Binder::Global(i)),
                        },
                        e.id,
                    )
                }
                Global::Done(s) => {
                    let s = s.clone();
                    self.instantiate(&s, e.id)
                }
                Global::Failed => self.fresh(),
            });
        }
        if let Some(p) = prim::lookup_named_in(name, self.translated) {
            if matches!(p.prim, Prim::Jacobian | Prim::Hessian) {
                return Ok(self.jacobian_instance(p.prim, e.span));
            }
            let t = self.prim_instance(p.prim);
            if p.prim == Prim::Sum
                && let Type::Fun(_, elem) = &t
            {
                self.sums.push((e.id, (**elem).clone()));
            }
            return Ok(t);
        }
        Err(TypeError {
            message: format!("unknown variable `{name}`"),
            span: e.span,
            label: "not defined".into(),
            secondary: Vec::new(),
            note: self
                .similar_name(name)
                .map(|n| format!("did you mean `{n}`?")),
        })
    }

    /// The name in scope here (a local, a definition or a built-in) closest
    /// to the unknown `name`, if one is close enough to be a likely typo.
    fn similar_name(&self, name: &str) -> Option<String> {
        let locals = self.locals.keys().map(String::as_str);
        let globals = self.globals.keys().map(String::as_str);
        let prims = PRIMS
            .iter()
            .filter(|p| p.named && (self.translated || !p.translated))
            .map(|p| p.name);
        // One edit in a short name, two in a longer one.
        let allowed = if name.chars().count() <= 4 { 1 } else { 2 };
        locals
            .chain(globals)
            .chain(prims)
            .chain(super::stdlib::names().map(|n| -> &str { n }))
            .filter(|n| n.starts_with(|c: char| c.is_alphabetic() || c == '_'))
            .filter(|n| !n.starts_with(prim::PRIM_PREFIX))
            .map(|n| (edit_distance(name, n), n))
            .filter(|&(d, _)| d <= allowed)
            .min()
            .map(|(_, n)| n.to_string())
    }

    /// The type of `jacobian` (`(s -> t) -> s -> J`) or `hessian`
    /// (`(s -> Real) -> s -> J`) used at `span`, `J` decided by
    /// [`jacobian_type`] once `s` and `t` are known.
    fn jacobian_instance(&mut self, p: Prim, span: Span) -> Type {
        let input = self.fresh_kind(Kind::Data);
        let result = self.fresh();
        let (fun_output, output) = if p == Prim::Hessian {
            (Type::Real, input.clone())
        } else {
            let t = self.fresh_kind(Kind::Data);
            (t.clone(), t)
        };
        self.pending_jacobians.push(PendingJacobian {
            input: input.clone(),
            output,
            result: result.clone(),
            span,
        });
        Type::fun(
            Type::fun(input.clone(), fun_output),
            Type::fun(input, result),
        )
    }

    /// Decides a pending Jacobian's result type if its function's types are
    /// known; with `force`, an input or output still wholly unknown is
    /// `Vec Real` (what `jacobian` took before it took every type), and a
    /// type variable left inside the input is `Real`, inside the output
    /// `Int` if numeric, else `Real`.
    /// False if it must wait.
    fn try_jacobian(&mut self, p: &PendingJacobian, force: bool) -> TResult<bool> {
        for t in [&p.input, &p.output] {
            if force && matches!(*self.resolve(t), Type::Var(_)) {
                let real_vec = Type::Vec(Box::new(Type::Real));
                self.expect(&real_vec, t, p.span, None)?;
            }
        }
        let (mut input, mut output) = (self.zonk(&p.input), self.zonk(&p.output));
        if force {
            // A leaf nothing decided is unconstrained, so any type would do:
            // in the input a Real (derivatives are taken with respect to
            // reals, as when `jacobian` took only `Vec Real`); then in the
            // output an Int if it is a number (as numbers default), else a Real.
            let mut open = Vec::new();
            collect_vars(&input, &mut open);
            for v in open.drain(..) {
                self.expect(&Type::Real, &Type::Var(v), p.span, None)?;
            }
            collect_vars(&self.zonk(&p.output), &mut open);
            for v in open {
                let default = if self.is_numeric(v) {
                    Type::Int
                } else {
                    Type::Real
                };
                self.expect(&default, &Type::Var(v), p.span, None)?;
            }
            (input, output) = (self.zonk(&p.input), self.zonk(&p.output));
        }
        if has_var(&input) || has_var(&output) {
            if !force {
                return Ok(false);
            }
            let (i, o) = self.show2(&input, &output);
            return Err(TypeError {
                message: format!(
                    "cannot tell the shape of this Jacobian: its function goes from {i} to {o}"
                ),
                span: p.span,
                label: "the function's types are not all known here".into(),
                secondary: Vec::new(),
                note: Some(
                    "the result of `jacobian`/`hessian` has the shape of the function's types; \
                     annotate the function or its argument, e.g. `(x : (Real, Vec Real))`"
                        .into(),
                ),
            });
        }
        let j = jacobian_type(&input, &output);
        self.expect(&j, &p.result, p.span, None)?;
        Ok(true)
    }

    fn prim_instance(&mut self, p: Prim) -> Type {
        match self.prim_schemes.get(&p).cloned() {
            Some(s) => self.instantiate(&s, NodeId(u32::MAX)),
            None => self.fresh(),
        }
    }

    // ---- expressions ----

    fn infer(&mut self, e: &Expr) -> TResult<Type> {
        if stack::check().is_err() {
            return Err(too_deep(e.span));
        }
        let t = self.infer_kind(e)?;
        if self.pass == Pass::Monomorphic && self.record_budget > 0 {
            // Recording copies each type: bounded, or deeply nested types
            // would make it quadratic (monomorphise then refuses the program).
            let size = type_size_up_to(&t, self.record_budget);
            self.record_budget = self.record_budget.saturating_sub(size);
            if self.record_budget > 0 {
                self.node_types.push((e.id, t.clone()));
            }
        }
        Ok(t)
    }

    fn infer_kind(&mut self, e: &Expr) -> TResult<Type> {
        match &e.kind {
            ExprKind::Var(n) => self.lookup(n, e),
            ExprKind::Int(_) => {
                let t = self.fresh_kind(Kind::Num);
                self.int_literals.push((e.id, t.clone()));
                Ok(t)
            }
            ExprKind::Real(_) => Ok(Type::Real),
            ExprKind::Bool(_) => Ok(Type::Bool),
            ExprKind::Unit => Ok(Type::Unit),
            ExprKind::Tuple(es) => Ok(Type::Tuple(
                es.iter().map(|x| self.infer(x)).collect::<TResult<_>>()?,
            )),
            ExprKind::Vector(es) => {
                let elem = self.fresh();
                let mut first: Option<(Span, Type)> = None;
                for x in es {
                    let t = self.infer(x)?;
                    let because = first.as_ref().map(|(s, ft)| {
                        (*s, format!("the first element has type {}", self.show(ft)))
                    });
                    self.expect(&elem, &t, x.span, because)?;
                    if first.is_none() {
                        first = Some((x.span, t));
                    }
                }
                Ok(Type::Vec(Box::new(elem)))
            }
            ExprKind::Lam(ps, body) => {
                let mut bound = Vec::new();
                let mut tys = Vec::new();
                for p in ps {
                    tys.push(self.pattern(p, &mut bound)?);
                }
                self.push_mono(&bound);
                let r = self.infer(body);
                self.pop(&bound);
                let mut t = r?;
                for p in tys.into_iter().rev() {
                    t = Type::fun(p, t);
                }
                Ok(t)
            }
            ExprKind::App(f, x) => {
                let ft = self.infer(f)?;
                let xt = self.infer(x)?;
                let resolved = self.resolve(&ft);
                match &*resolved {
                    Type::Fun(param, ret) => {
                        let because = Some((
                            f.span,
                            format!(
                                "this function takes an argument of type {}",
                                self.show(param)
                            ),
                        ));
                        let param = param.clone();
                        self.expect(&param, &xt, x.span, because)
                            .map_err(|e| self.int_decided_elsewhere(f, &param, &xt, e))?;
                        Ok(self.owned(ret))
                    }
                    &Type::Var(v) if self.vars[v as usize].kind == Kind::Any => {
                        let ret = self.fresh();
                        self.expect(&ft, &Type::fun(xt, ret.clone()), f.span, None)?;
                        Ok(ret)
                    }
                    other => Err(TypeError {
                        message: format!(
                            "this is not a function: it has type {}",
                            self.show(other)
                        ),
                        span: f.span,
                        label: format!("has type {}, cannot be applied", self.show(other)),
                        secondary: vec![(x.span, "applied to this argument".into())],
                        note: None,
                    }),
                }
            }
            ExprKind::Let(p, v, body) => {
                self.enter();
                let mut bound = Vec::new();
                let pt = self.pattern(p, &mut bound);
                let vt = pt.and_then(|pt| {
                    let vt = self.infer(v)?;
                    // The parser writes `e1; e2` as `let () = e1 in e2`, the
                    // pattern spanning `e1`.
                    let because = if matches!(p, Pattern::Unit(s) if *s == v.span) {
                        Some((v.span, "the left of `;` must have type ()".into()))
                    } else {
                        Some((p.span(), format!("the pattern has type {}", self.show(&pt))))
                    };
                    self.expect(&pt, &vt, v.span, because)?;
                    Ok(vt)
                });
                self.leave();
                vt?;
                self.discharge_deferred(false)?;
                // `let x = e` binds a name that can be specialised like a
                // `let` function's; names in a larger pattern cannot.
                let binder = matches!(p, Pattern::Var(_)).then_some(Binder::Local(e.id));
                let schemes: Vec<(String, Scheme)> = bound
                    .iter()
                    .map(|(n, t)| (n.clone(), self.generalize(t, binder)))
                    .collect();
                for (n, s) in &schemes {
                    self.push_scheme(n, s.clone());
                }
                let r = self.infer(body);
                for (n, _) in &schemes {
                    self.pop_name(n);
                }
                r
            }
            ExprKind::LetFun { rec, binding, body } => {
                self.enter();
                let self_ty = self.fresh();
                let name = binding.name.name.clone();
                if *rec {
                    let mut own = Scheme::mono(self_ty.clone());
                    own.binder = Some(Binder::Local(e.id));
                    self.push_scheme(&name, own);
                }
                let saved = std::mem::take(&mut self.annot_vars);
                let t = self.infer_binding(binding);
                self.annot_vars = saved;
                if *rec {
                    self.pop_name(&name);
                }
                let t = t.and_then(|t| {
                    self.expect(&self_ty, &t, binding.name.span, None)?;
                    Ok(t)
                });
                self.leave();
                let t = t?;
                self.discharge_deferred(false)?;
                if self.pass == Pass::Monomorphic {
                    self.fun_types.push((e.id, t.clone()));
                }
                let s = self.generalize(&t, Some(Binder::Local(e.id)));
                self.push_scheme(&name, s);
                let r = self.infer(body);
                self.pop_name(&name);
                r
            }
            ExprKind::If(c, a, b) => {
                let ct = self.infer(c)?;
                self.expect(&Type::Bool, &ct, c.span, None)?;
                let at = self.infer(a)?;
                let bt = self.infer(b)?;
                let because = Some((
                    a.span,
                    format!("the `then` branch has type {}", self.show(&at)),
                ));
                self.expect(&at, &bt, b.span, because)?;
                Ok(at)
            }
            ExprKind::Inl(x) => {
                let t = self.infer(x)?;
                Ok(Type::Sum(Box::new(t), Box::new(self.fresh())))
            }
            ExprKind::Inr(x) => {
                let t = self.infer(x)?;
                Ok(Type::Sum(Box::new(self.fresh()), Box::new(t)))
            }
            ExprKind::Match {
                scrutinee,
                left,
                right,
            } => {
                let st = self.infer(scrutinee)?;
                let (lt, rt) = (self.fresh(), self.fresh());
                let sum = Type::Sum(Box::new(lt.clone()), Box::new(rt.clone()));
                self.expect(
                    &sum,
                    &st,
                    scrutinee.span,
                    Some((e.span, "`match` needs a value of a sum type A + B".into())),
                )?;
                let mut results: Vec<(Span, Type)> = Vec::new();
                for ((p, body), side) in [(left, lt), (right, rt)] {
                    let mut bound = Vec::new();
                    let pt = self.pattern(p, &mut bound)?;
                    self.expect(&pt, &side, p.span(), None)?;
                    self.push_mono(&bound);
                    let r = self.infer(body);
                    self.pop(&bound);
                    results.push((body.span, r?));
                }
                let (s0, t0) = results[0].clone();
                let (s1, t1) = results[1].clone();
                let because = Some((s0, format!("the `inl` arm has type {}", self.show(&t0))));
                self.expect(&t0, &t1, s1, because)?;
                Ok(t0)
            }
            ExprKind::Binary(op, a, b) => self.binary(e.id, *op, a, b),
            ExprKind::Neg(a) => {
                let t = self.infer(a)?;
                let n = self.fresh_kind(Kind::Num);
                self.expect(
                    &n,
                    &t,
                    a.span,
                    Some((e.span, "unary `-` works on Int and Real".into())),
                )?;
                self.operands.push((e.id, t.clone()));
                Ok(t)
            }
            ExprKind::Index(v, i) => {
                let vt = self.infer(v)?;
                let elem = self.fresh();
                self.expect(
                    &Type::Vec(Box::new(elem.clone())),
                    &vt,
                    v.span,
                    Some((e.span, "only vectors can be indexed".into())),
                )?;
                let it = self.infer(i)?;
                self.expect(
                    &Type::Int,
                    &it,
                    i.span,
                    Some((e.span, "vector indices are Ints".into())),
                )?;
                Ok(elem)
            }
            ExprKind::Record(fields) => {
                let mut typed = Vec::new();
                for (name, x) in fields {
                    typed.push((name.name.clone(), self.infer(x)?));
                }
                let t = Type::record(typed);
                self.records.push((e.id, t.clone()));
                Ok(t)
            }
            ExprKind::Field(r, field) => {
                let rt = self.infer(r)?;
                let t = self.fresh();
                self.has_field(&rt, field, t.clone(), r.span)?;
                self.records.push((e.id, rt));
                Ok(t)
            }
            ExprKind::Update(r, fields) => {
                let rt = self.infer(r)?;
                for (name, x) in fields {
                    let t = self.infer(x)?;
                    self.has_field(&rt, name, t, r.span)?;
                }
                self.records.push((e.id, rt.clone()));
                Ok(rt)
            }
            // `trace` is the identity on data (it prints on the side).
            ExprKind::Trace(_, x) => {
                let t = self.infer(x)?;
                if self.constrain_data(&t).is_err() {
                    let shown = self.show(&t);
                    return Err(TypeError {
                        message: format!(
                            "`trace` prints first-order data (numbers, booleans, tuples, sums, \
                             vectors; no functions), found {}",
                            describe(&shown)
                        ),
                        span: x.span,
                        label: format!("this has type {shown}"),
                        secondary: vec![(e.span, "traced here".into())],
                        note: None,
                    });
                }
                Ok(t)
            }
            ExprKind::Annot(x, te) => {
                let t = self.infer(x)?;
                let a = self.annotation(te)?;
                self.expect(
                    &a,
                    &t,
                    x.span,
                    Some((te.span(), "expected because of this annotation".into())),
                )?;
                Ok(a)
            }
            ExprKind::Bind(p, m, rest) => {
                let mt = self.infer(m)?;
                let a = self.fresh();
                self.expect(
                    &Type::Con(Con::M, vec![a.clone()]),
                    &mt,
                    m.span,
                    Some((
                        p.span(),
                        "`<-` binds the result of a computation (of type M A)".into(),
                    )),
                )?;
                let mut bound = Vec::new();
                let pt = self.pattern(p, &mut bound)?;
                self.expect(&pt, &a, p.span(), None)?;
                self.push_mono(&bound);
                let r = self.infer(rest);
                self.pop(&bound);
                let rt = r?;
                let b = self.fresh();
                self.expect(
                    &Type::Con(Con::M, vec![b]),
                    &rt,
                    rest.span,
                    Some((
                        m.span,
                        "after `<-`, a `do` block continues with a computation (of type M B)"
                            .into(),
                    )),
                )?;
                Ok(rt)
            }
            ExprKind::RunDelta(first, m) => {
                let ft = self.infer(first)?;
                self.expect(
                    &Type::Int,
                    &ft,
                    first.span,
                    Some((e.span, "`runDelta` starts the Delta ids at an Int".into())),
                )?;
                let mt = self.infer(m)?;
                let a = self.fresh();
                let result = Type::Tuple(vec![a, Type::Con(Con::Delta, Vec::new())]);
                self.expect(
                    &Type::Con(Con::M, vec![result.clone()]),
                    &mt,
                    m.span,
                    Some((
                        e.span,
                        "`runDelta` runs a computation of type M (a, Delta)".into(),
                    )),
                )?;
                Ok(result)
            }
            ExprKind::Poly(p, te) => {
                let t = poly_index_type(te)?;
                Ok(crate::translate::types::poly_type(*p, &t))
            }
            ExprKind::Deref(r) => {
                let rt = self.infer(r)?;
                let a = self.fresh();
                self.expect(
                    &Type::Con(Con::Ref, vec![a.clone()]),
                    &rt,
                    r.span,
                    Some((e.span, "`!` reads a reference cell".into())),
                )?;
                Ok(a)
            }
        }
    }

    /// Whether `t` is a type variable not yet decided.
    fn is_open(&self, t: &Type) -> bool {
        matches!(*self.resolve(t), Type::Var(_))
    }

    /// Whether `e`, of type `t`, is an Int that is not a literal (a literal
    /// would have adapted to a Real).
    fn is_int_operand(&self, e: &Expr, t: &Type) -> bool {
        !matches!(e.kind, ExprKind::Int(_)) && *self.resolve(t) == Type::Int
    }

    /// Whether `a` and `b` differ by an Int in one where the other has a Real.
    fn int_vs_real(&self, a: &Type, b: &Type) -> bool {
        fn walk(a: &Type, b: &Type) -> bool {
            match (a, b) {
                (Type::Int, Type::Real) | (Type::Real, Type::Int) => true,
                (Type::Tuple(xs), Type::Tuple(ys)) | (Type::Con(_, xs), Type::Con(_, ys)) => {
                    xs.iter().zip(ys).any(|(x, y)| walk(x, y))
                }
                (Type::Sum(a1, b1), Type::Sum(a2, b2)) | (Type::Fun(a1, b1), Type::Fun(a2, b2)) => {
                    walk(a1, a2) || walk(b1, b2)
                }
                (Type::Vec(x), Type::Vec(y)) => walk(x, y),
                _ => false,
            }
        }
        walk(&self.zonk(a), &self.zonk(b))
    }

    /// `error`, from applying `f` to an argument of type `arg` where `param`
    /// was expected, moved to where the function's arithmetic was decided
    /// to be on Int, if that is why a Real argument does not fit.
    fn int_decided_elsewhere(
        &self,
        f: &Expr,
        param: &Type,
        arg: &Type,
        error: TypeError,
    ) -> TypeError {
        let ExprKind::Var(name) = &f.kind else {
            return error;
        };
        let decided = if self.locals.contains_key(name) {
            None
        } else {
            self.globals
                .get(name)
                .and_then(|i| self.int_operands_of.get(i))
                .and_then(|ops| ops.first())
        };
        match decided {
            Some(IntOperand { span, op }) if self.int_vs_real(param, arg) => TypeError {
                message: format!(
                    "type mismatch: `{name}` is used with a Real, but this Int operand makes its \
                     `{op}` work on Int"
                ),
                span: *span,
                label: format!("this is an Int, so `{op}` works on Int"),
                secondary: vec![(error.span, "used with a Real here".into())],
                note: Some(REAL_HINT.into()),
            },
            _ => error,
        }
    }

    fn binary(&mut self, id: NodeId, op: BinOp, a: &Expr, b: &Expr) -> TResult<Type> {
        let at = self.infer(a)?;
        let bt = self.infer(b)?;
        if op == BinOp::AddTo {
            let op_span = a.span.to(b.span);
            self.expect(
                &Type::Con(Con::Ref, vec![Type::Real]),
                &at,
                a.span,
                Some((op_span, "`+=` adds to a cell of type Ref Real".into())),
            )?;
            self.expect(
                &Type::Real,
                &bt,
                b.span,
                Some((op_span, "`+=` adds a Real".into())),
            )?;
            return Ok(Type::Unit);
        }
        let sym = op.symbol();
        let operand = match op {
            BinOp::And | BinOp::Or => Type::Bool,
            BinOp::Pow => Type::Real,
            BinOp::Eq | BinOp::Ne => self.fresh_kind(Kind::Eq),
            _ => self.fresh_kind(Kind::Num),
        };
        let what = match op {
            BinOp::And | BinOp::Or => "works on Bool",
            BinOp::Pow => "works on Real",
            BinOp::Eq | BinOp::Ne => "compares data without functions",
            _ => "works on Int and Real",
        };
        let op_span = a.span.to(b.span);
        let int_operand = match (self.is_open(&at), self.is_open(&bt)) {
            (true, false) if self.is_int_operand(b, &bt) => Some(b.span),
            (false, true) if self.is_int_operand(a, &at) => Some(a.span),
            _ => None,
        };
        self.expect(
            &operand,
            &at,
            a.span,
            Some((op_span, format!("`{sym}` {what}"))),
        )?;
        let because = Some((
            a.span,
            format!("the left operand of `{sym}` has type {}", self.show(&at)),
        ));
        self.expect(&at, &bt, b.span, because).map_err(|mut e| {
            if self.int_vs_real(&at, &bt) {
                e.note = Some(REAL_HINT.into());
            }
            e
        })?;
        if let Some(span) = int_operand {
            self.int_operands.push(IntOperand { span, op: sym });
        }
        if !matches!(op, BinOp::And | BinOp::Or) {
            self.operands.push((id, at.clone()));
        }
        Ok(match op {
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => Type::Bool,
            _ => at,
        })
    }
}

/// The type `T` of a polytypic helper `name @T`: it must be closed
/// first-order data (no type variables, functions or translated-only types).
pub(crate) fn poly_index_type(te: &TypeExpr) -> TResult<Type> {
    if stack::check().is_err() {
        return Err(too_deep(te.span()));
    }
    let bad = |span: Span, what: &str| TypeError {
        message: format!("a polytypic helper's type must be closed first-order data, not {what}"),
        span,
        label: "write a type built from Real, Int, Bool, (), tuples, sums and vectors".into(),
        secondary: Vec::new(),
        note: None,
    };
    Ok(match te {
        TypeExpr::Name(id) => match id.name.as_str() {
            "Int" => Type::Int,
            "Real" => Type::Real,
            "Bool" => Type::Bool,
            "Vec" => {
                return Err(TypeError {
                    message: "`Vec` needs an element type".into(),
                    span: id.span,
                    label: "write e.g. `@(Vec Real)`".into(),
                    secondary: Vec::new(),
                    note: None,
                });
            }
            n if n.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') => {
                return Err(bad(id.span, &format!("a type variable `{n}`")));
            }
            n => {
                return Err(TypeError {
                    message: format!("unknown type `{n}`"),
                    span: id.span,
                    label: "not a type".into(),
                    secondary: Vec::new(),
                    note: None,
                });
            }
        },
        TypeExpr::Unit(_) => Type::Unit,
        TypeExpr::Tuple(ts, _) => {
            Type::Tuple(ts.iter().map(poly_index_type).collect::<TResult<_>>()?)
        }
        TypeExpr::Sum(a, b, _) => {
            Type::Sum(Box::new(poly_index_type(a)?), Box::new(poly_index_type(b)?))
        }
        TypeExpr::Vec(a, _) => Type::Vec(Box::new(poly_index_type(a)?)),
        TypeExpr::Fun(_, _, s) => return Err(bad(*s, "a function type")),
        TypeExpr::Record(fields, _) => Type::record(
            fields
                .iter()
                .map(|(n, t)| Ok((n.name.clone(), poly_index_type(t)?)))
                .collect::<TResult<_>>()?,
        ),
        TypeExpr::Con(c, _, s) => return Err(bad(*s, &format!("`{}`", c.name()))),
    })
}

/// The Levenshtein distance between `a` and `b` (insertions, deletions and
/// substitutions of characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// The hint for a Real where an Int is (or the other way round).
const REAL_HINT: &str =
    "there is no implicit conversion between Int and Real: `real n` converts an Int `n` to a Real";

/// Spells out a lone constrained type variable.
fn describe(printed: &str) -> String {
    match printed {
        "{number}" => "a number (Int or Real)".into(),
        "{comparable}" => "a type with equality (no functions)".into(),
        other => other.into(),
    }
}

/// Appends the type variables of `t` (bound ones followed already) to `out`.
fn collect_vars(t: &Type, out: &mut Vec<u32>) {
    match t {
        Type::Var(v) => out.push(*v),
        Type::Tuple(ts) | Type::Con(_, ts) | Type::Record(_, ts) => {
            ts.iter().for_each(|t| collect_vars(t, out))
        }
        Type::Sum(a, b) | Type::Fun(a, b) => {
            collect_vars(a, out);
            collect_vars(b, out);
        }
        Type::Vec(a) => collect_vars(a, out),
        Type::Int | Type::Real | Type::Bool | Type::Unit => {}
    }
}

/// True if `t` has a type variable anywhere.
fn has_var(t: &Type) -> bool {
    match t {
        Type::Var(_) => true,
        Type::Tuple(ts) | Type::Con(_, ts) | Type::Record(_, ts) => ts.iter().any(has_var),
        Type::Sum(a, b) | Type::Fun(a, b) => has_var(a) || has_var(b),
        Type::Vec(a) => has_var(a),
        Type::Int | Type::Real | Type::Bool | Type::Unit => false,
    }
}

/// Calls `f` on every name a pattern binds.
pub(crate) fn pattern_names(p: &Pattern, f: &mut dyn FnMut(&str)) {
    match p {
        Pattern::Var(id) => f(&id.name),
        Pattern::Wild(_) | Pattern::Unit(_) => {}
        Pattern::Tuple(ps, _) => ps.iter().for_each(|p| pattern_names(p, f)),
        Pattern::Annot(p, _, _) => pattern_names(p, f),
        Pattern::Record { fields, .. } => fields.iter().for_each(|(_, p)| pattern_names(p, f)),
    }
}

/// Strongly connected components, each listed after the components it depends on.
fn tarjan(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut counter = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next edge to visit)
        let mut work = vec![(root, 0usize)];
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut ei)) = work.last_mut() {
            if let Some(&w) = edges[v].get(*ei) {
                *ei += 1;
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort_unstable();
                    out.push(comp);
                }
            }
        }
    }
    out
}
