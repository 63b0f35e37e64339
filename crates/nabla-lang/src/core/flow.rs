//! Closure flow: which functions' closures a value may hold.
//!
//! Used by compiled differentiation, to list the closures a recoding must
//! handle, and by the native compiler, to call a closure's function
//! directly where every closure that can reach an application is known.

use crate::core::typed::{Expr, ExprKind, FunId, GlobalId, Local, Pat, Program};
use crate::prim::Prim;
use std::collections::{BTreeSet, HashMap};

/// Which closures can reach which expression: a 0-CFA over the program
/// (every value is abstracted to the set of functions whose closures it may
/// hold). After compiled differentiation, copies of a function at different
/// levels are different functions, which makes it precise enough for nested
/// derivatives of higher-order code.
#[derive(Default)]
pub struct Flow {
    locals: HashMap<Local, BTreeSet<FunId>>,
    rets: HashMap<FunId, BTreeSet<FunId>>,
    globals: HashMap<GlobalId, BTreeSet<FunId>>,
    changed: bool,
}

impl Flow {
    /// The analysis of `prog`, to a fixed point.
    pub fn solve(prog: &Program) -> Flow {
        let mut flow = Flow::default();
        loop {
            flow.changed = false;
            for (i, f) in prog.funs.iter().enumerate() {
                let r = flow.walk(prog, &f.body);
                flow.add_ret(FunId(i as u32), r);
            }
            for (i, g) in prog.globals.iter().enumerate() {
                let r = flow.walk(prog, &g.body);
                let slot = flow.globals.entry(GlobalId(i as u32)).or_default();
                let before = slot.len();
                slot.extend(r);
                flow.changed |= slot.len() != before;
            }
            if !flow.changed {
                return flow;
            }
        }
    }

    /// The closures `e` may evaluate to (after [`Flow::solve`]).
    pub fn of(&self, e: &Expr) -> BTreeSet<FunId> {
        let mut stack = vec![e];
        let mut out = BTreeSet::new();
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Local(l) => out.extend(self.locals.get(l).into_iter().flatten()),
                ExprKind::Global(g) => out.extend(self.globals.get(g).into_iter().flatten()),
                ExprKind::Closure(g) => {
                    out.insert(*g);
                }
                ExprKind::Call(f, _) => out.extend(self.rets.get(f).into_iter().flatten()),
                // A closure applied: what the functions it may be return
                // (`(k 2.0) x` with `def k = mul`: the closure `k 2.0` makes).
                ExprKind::Apply(f, _) => {
                    for g in self.of(f) {
                        out.extend(self.rets.get(&g).into_iter().flatten());
                    }
                }
                ExprKind::Recode { cases, .. } => out.extend(cases.iter().map(|c| c.1)),
                ExprKind::Let(_, _, b) => stack.push(b),
                _ => e.for_each_child(|c| stack.push(c)),
            }
        }
        out
    }

    fn add_local(&mut self, l: Local, s: &BTreeSet<FunId>) {
        let slot = self.locals.entry(l).or_default();
        let before = slot.len();
        slot.extend(s.iter().copied());
        self.changed |= slot.len() != before;
    }

    fn add_ret(&mut self, f: FunId, s: BTreeSet<FunId>) {
        let slot = self.rets.entry(f).or_default();
        let before = slot.len();
        slot.extend(s);
        self.changed |= slot.len() != before;
    }

    fn bind(&mut self, p: &Pat, s: &BTreeSet<FunId>) {
        p.for_each_local(&mut |l| self.add_local(l, s));
    }

    /// The call of function `g` with arguments holding `args`.
    fn enter(&mut self, prog: &Program, g: FunId, args: &[BTreeSet<FunId>]) -> BTreeSet<FunId> {
        let Some(fun) = prog.funs.get(g.0 as usize) else {
            return BTreeSet::new();
        };
        for ((p, _), s) in fun.params.iter().zip(args) {
            p.for_each_local(&mut |l| self.add_local(l, s));
        }
        self.rets.get(&g).cloned().unwrap_or_default()
    }

    fn walk(&mut self, prog: &Program, e: &Expr) -> BTreeSet<FunId> {
        match &e.kind {
            ExprKind::Lit(_) | ExprKind::TangentShape(..) => BTreeSet::new(),
            ExprKind::Local(l) => self.locals.get(l).cloned().unwrap_or_default(),
            ExprKind::Global(g) => self.globals.get(g).cloned().unwrap_or_default(),
            ExprKind::Closure(g) => BTreeSet::from([*g]),
            ExprKind::Recode { closure, cases, .. } => {
                self.walk(prog, closure);
                cases.iter().map(|c| c.1).collect()
            }
            ExprKind::Call(f, args) => {
                let args: Vec<_> = args.iter().map(|a| self.walk(prog, a)).collect();
                self.enter(prog, *f, &args)
            }
            ExprKind::Apply(c, x) => {
                let cs = self.walk(prog, c);
                let xs = self.walk(prog, x);
                let mut out = BTreeSet::new();
                for g in cs {
                    out.extend(self.enter(prog, g, std::slice::from_ref(&xs)));
                }
                out
            }
            ExprKind::Let(p, v, b) => {
                let vs = self.walk(prog, v);
                self.bind(p, &vs);
                self.walk(prog, b)
            }
            ExprKind::Case {
                scrutinee,
                left,
                right,
            } => {
                let s = self.walk(prog, scrutinee);
                self.bind(&left.0, &s);
                self.bind(&right.0, &s);
                let mut out = self.walk(prog, &left.1);
                out.extend(self.walk(prog, &right.1));
                out
            }
            ExprKind::Prim(Prim::Map | Prim::Build | Prim::Fold, args) => {
                // The function argument is called with the elements (and the
                // accumulator); the result holds what it returns.
                let sets: Vec<_> = args.iter().map(|a| self.walk(prog, a)).collect();
                let mut data: BTreeSet<FunId> = BTreeSet::new();
                let mut funs = BTreeSet::new();
                for (a, s) in args.iter().zip(&sets) {
                    if let ExprKind::Closure(g) = a.kind {
                        funs.insert(g);
                    } else {
                        data.extend(s.iter().copied());
                    }
                }
                let mut out = data.clone();
                for g in funs {
                    let n = prog.funs.get(g.0 as usize).map_or(0, |f| f.params.len());
                    let r = self.enter(prog, g, &vec![data.clone(); n]);
                    data.extend(r.iter().copied());
                    out.extend(r);
                }
                out
            }
            _ => {
                let mut out = BTreeSet::new();
                e.for_each_child(|c| out.extend(self.walk(prog, c)));
                out
            }
        }
    }
}
