//! Run-time support of translated programs' reverse mode: the `Delta` data
//! type, `eval`, and the monad `M` of Krawiec et al. Figure 11.
//!
//! ```text
//! data Delta = Zero | Scale ℝ Delta | Add Delta Delta | Var DeltaId | Let DeltaId Delta Delta
//! type DeltaMap = Map DeltaId δℝ
//! type M a = DeltaState -> (a, DeltaState)
//! ```
//!
//! # The monad M runs where it is evaluated
//!
//! Figure 11's `M` is a state monad over `DeltaState = (DeltaId, DeltaBinds)`.
//! As §5.3.3 suggests, the interpreter implements it with mutable state
//! instead of passing the state around: the state of every `runDelta` that
//! is running lives on a per-thread stack ([`run_delta`] pushes one, and pops
//! it when its computation ends, also on error), and [`delta_let`] allocates
//! from and appends to the innermost one. A *computation* (a value of type
//! `M A`) is therefore represented by its result `A`, computed at the moment
//! the expression of type `M A` is evaluated:
//!
//! * `pure e` is the value of `e`;
//! * `do { p <- e1; rest }` evaluates like `let p = e1 in rest`;
//! * `deltaLet d` binds `d` right away and is the id it allocated;
//! * `mapM`, `buildM` and `foldM` run like `map`, `build` and `fold` (each
//!   call of the function has already run its computation).
//!
//! This is exactly the state monad as long as every computation is run once,
//! where it is built, which is how translated programs use them (Fig. 9 binds
//! each computation once, immediately). A program that binds the *same*
//! computation value twice (`let m = deltaLet d in do { a <- m; b <- m; … }`)
//! runs it only once, where `m` was evaluated: `a` and `b` are the same id.
//!
//! # Representation
//!
//! A Delta is a tree of shared nodes ([`DeltaRef`]); [`eval`] walks it with an
//! explicit stack and drops it iteratively, so a `Let` chain a million deep
//! costs linear time and no native stack. A [`DeltaMap`] is a dense array
//! indexed by id with a presence bit per entry (it distinguishes an absent id
//! from one whose sum is 0, as Fig. 11's `Map` does); `eval` updates it in
//! place when the map value is not shared (`Rc::make_mut`), so a linear use
//! costs O(1) per update and a non-linear one copies and stays correct.

use super::value::Value;
use super::{RResult, err};
use crate::memory;
use crate::syntax::span::Span;
use nabla::Number;
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

/// `type DeltaId = ℕ` (an Int at run time; only `eval` requires it to be a
/// valid array index).
pub type DeltaId = i64;

/// `data Delta = Zero | Scale ℝ Delta | Add Delta Delta | Var DeltaId | Let DeltaId Delta Delta`
#[derive(Debug)]
pub enum Delta {
    /// `Zero`
    Zero,
    /// `Scale r u`: `r` times `u`
    Scale(f64, DeltaRef),
    /// `Add u1 u2`
    Add(DeltaRef, DeltaRef),
    /// `Var id`: the Delta bound to `id` (an input, or a `deltaLet` binding)
    Var(DeltaId),
    /// `Let id rhs body`: `body`, where `id` is bound to `rhs`
    Let(DeltaId, DeltaRef, DeltaRef),
}

/// A shared Delta node. Dropping one frees its unshared descendants with an
/// explicit stack, never by native recursion on the Delta's depth. Nodes
/// are charged to the memory budget ([`crate::memory`]) while they live: a
/// translated program's loop can grow a Delta without bound.
#[derive(Clone)]
pub struct DeltaRef(Rc<Delta>);

/// Heap bytes of one node: the `Rc` box's two counts and the Delta.
const NODE_BYTES: usize = 2 * size_of::<usize>() + size_of::<Delta>();

impl DeltaRef {
    /// A new node.
    pub fn new(d: Delta) -> DeltaRef {
        memory::charge(NODE_BYTES);
        DeltaRef(Rc::new(d))
    }

    /// `Zero`
    pub fn zero() -> DeltaRef {
        DeltaRef::new(Delta::Zero)
    }
}

impl std::ops::Deref for DeltaRef {
    type Target = Delta;

    fn deref(&self) -> &Delta {
        &self.0
    }
}

impl fmt::Debug for DeltaRef {
    // Not derived: that would recurse on the Delta's depth.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::pretty::print_delta(self))
    }
}

impl Delta {
    fn has_children(&self) -> bool {
        matches!(self, Delta::Scale(..) | Delta::Add(..) | Delta::Let(..))
    }
}

impl Drop for DeltaRef {
    fn drop(&mut self) {
        if Rc::strong_count(&self.0) == 1 {
            memory::release(NODE_BYTES);
        }
        // Only the last reference to a node with children does any work: it
        // takes the node's contents and frees the subtree with a work list.
        // The children it lets go of have no children left by then, so
        // their own drop does nothing (no recursion).
        let mut work: Vec<Delta> = Vec::new();
        let take = |r: &mut DeltaRef, work: &mut Vec<Delta>| {
            if let Some(d) = Rc::get_mut(&mut r.0)
                && d.has_children()
            {
                work.push(std::mem::replace(d, Delta::Zero));
            }
        };
        take(self, &mut work);
        while let Some(d) = work.pop() {
            match d {
                Delta::Scale(_, mut u) => take(&mut u, &mut work),
                Delta::Add(mut u1, mut u2) | Delta::Let(_, mut u1, mut u2) => {
                    take(&mut u1, &mut work);
                    take(&mut u2, &mut work);
                }
                Delta::Zero | Delta::Var(_) => {}
            }
        }
    }
}

/// `type DeltaMap = Map DeltaId δℝ`, as a dense array indexed by id with a
/// presence bit per entry.
#[derive(Clone, Debug, Default)]
pub struct DeltaMap {
    values: Vec<f64>,
    present: Vec<bool>,
}

impl DeltaMap {
    /// `emptyMap`
    pub fn empty() -> DeltaMap {
        DeltaMap::default()
    }

    fn slot(id: DeltaId) -> Option<usize> {
        usize::try_from(id).ok()
    }

    /// `lookup id m`
    pub fn lookup(&self, id: DeltaId) -> Option<f64> {
        let i = Self::slot(id)?;
        if *self.present.get(i)? {
            self.values.get(i).copied()
        } else {
            None
        }
    }

    /// `lookupOrZero id m`
    pub fn lookup_or_zero(&self, id: DeltaId) -> f64 {
        self.lookup(id).unwrap_or(0.0)
    }

    /// `delete id m`
    pub fn delete(&mut self, id: DeltaId) {
        if let Some(i) = Self::slot(id)
            && let Some(p) = self.present.get_mut(i)
        {
            *p = false;
            self.values[i] = 0.0;
        }
    }

    /// `addDelta id x m`: adds `x` to the entry for `id`, or creates it.
    /// Ids must lie in `0..limit` (the array grows to the largest id used).
    pub fn add_delta(&mut self, id: DeltaId, x: f64, limit: usize) -> Result<(), String> {
        let i = match Self::slot(id) {
            Some(i) if i < limit => i,
            Some(_) => {
                return Err(format!(
                    "Delta id {id} is too large for a DeltaMap (the limit is {limit})"
                ));
            }
            None => return Err(format!("Delta id {id} is negative")),
        };
        if i >= self.values.len() {
            self.values.resize(i + 1, 0.0);
            self.present.resize(i + 1, false);
        }
        if self.present[i] {
            self.values[i] += x;
        } else {
            self.present[i] = true;
            self.values[i] = x;
        }
        Ok(())
    }
}

/// Figure 11's `eval`, adding the contributions of `u`, scaled by `x`, into
/// `m` (in place):
///
/// ```text
/// eval x Zero            m = m
/// eval x (Scale y u)     m = eval (x × y) u m
/// eval x (Add u1 u2)     m = eval x u2 (eval x u1 m)
/// eval x (Var id)        m = addDelta id x m
/// eval x (Let id u1 u2)  m = let m2 = eval x u2 m in
///                            case lookup id m2 of
///                              Nothing -> m2
///                              Just y  -> eval y u1 (delete id m2)
/// ```
///
/// `×` is the chain rule's product ([`nabla::Number::chain`]): an exact zero
/// on either side gives zero, so `Scale 0 u` is `Zero` even where `u`'s
/// contributions would be infinite.
///
/// The recursion is a work list: `Eval` is a pending `eval x u`, `LetRhs`
/// the rest of a `Let` equation once its body has been evaluated. `limit`
/// bounds the ids (the map's length); every constructor visited costs one
/// of `steps` (the interpreter's call budget: a Delta whose sharing is
/// implicit, `Add u u` with `u` itself shared, costs time exponential in its
/// depth, as §5.3 explains, and must not hang a run with limits).
pub fn eval(
    x: f64,
    u: &Delta,
    m: &mut DeltaMap,
    limit: usize,
    steps: &mut u64,
) -> Result<(), String> {
    enum Work<'a> {
        Eval(f64, &'a Delta),
        LetRhs(DeltaId, &'a Delta),
    }
    let mut work = vec![Work::Eval(x, u)];
    while let Some(w) = work.pop() {
        if *steps == 0 {
            return Err(super::STEP_LIMIT_EXCEEDED.into());
        }
        *steps -= 1;
        match w {
            Work::Eval(_, Delta::Zero) => {}
            Work::Eval(x, Delta::Scale(y, u)) => work.push(Work::Eval(y.chain(x), u)),
            Work::Eval(x, Delta::Add(u1, u2)) => {
                // u1 first, then u2 (pushed in reverse).
                work.push(Work::Eval(x, u2));
                work.push(Work::Eval(x, u1));
            }
            Work::Eval(x, Delta::Var(id)) => m.add_delta(*id, x, limit)?,
            Work::Eval(x, Delta::Let(id, u1, u2)) => {
                work.push(Work::LetRhs(*id, u1));
                work.push(Work::Eval(x, u2));
            }
            Work::LetRhs(id, u1) => {
                if let Some(y) = m.lookup(id) {
                    m.delete(id);
                    work.push(Work::Eval(y, u1));
                }
            }
        }
    }
    Ok(())
}

/// `type DeltaState = (DeltaId, DeltaBinds)`: the next free id, and the
/// bindings made so far, oldest first (Fig. 11's list is newest first).
struct DeltaState {
    next: DeltaId,
    binds: Vec<(DeltaId, DeltaRef)>,
}

thread_local! {
    /// The states of the `runDelta`s running on this thread, innermost last.
    static STATES: RefCell<Vec<DeltaState>> = const { RefCell::new(Vec::new()) };
}

/// `deltaLet : Delta -> M DeltaId`:
/// `deltaLet delta = λ(id, bs) -> (id, (id + 1, (id, delta) : bs))`,
/// on the innermost running `runDelta`'s state.
pub fn delta_let(delta: DeltaRef) -> Result<DeltaId, String> {
    STATES.with(|s| {
        let mut states = s.borrow_mut();
        let Some(state) = states.last_mut() else {
            return Err("deltaLet outside runDelta".to_string());
        };
        let id = state.next;
        state.next = id
            .checked_add(1)
            .ok_or_else(|| "Delta ids exhausted (integer overflow)".to_string())?;
        state.binds.push((id, delta));
        Ok(id)
    })
}

/// Pops the state pushed by [`run_delta`] however its computation ends.
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        let state = STATES.with(|s| s.borrow_mut().pop());
        // Its bindings (possibly long Delta chains) are dropped here, outside the borrow.
        drop(state);
    }
}

/// `runDelta : DeltaId -> M (a, Delta) -> (a, Delta)`:
///
/// ```text
/// runDelta delta_id m = (res, foldl wrap delta binds)
///   where ((res, delta), (_, binds)) = m (delta_id, [])
///         wrap body (id, rhs) = Let id rhs body
/// ```
///
/// `m` runs the computation (evaluates the expression of type
/// `M (a, Delta)`) with a fresh state whose ids start at `first`; the
/// result's Delta is wrapped in the bindings it made, the first-bound id
/// outermost: `Let id1 rhs1 (Let id2 rhs2 (… (Let idn rhsn delta)))`.
pub fn run_delta(first: DeltaId, span: Span, m: impl FnOnce() -> RResult<Value>) -> RResult<Value> {
    STATES.with(|s| {
        s.borrow_mut().push(DeltaState {
            next: first,
            binds: Vec::new(),
        })
    });
    let running = Running;
    let result = m();
    let binds = STATES.with(|s| {
        s.borrow_mut()
            .last_mut()
            .map(|st| std::mem::take(&mut st.binds))
            .unwrap_or_default()
    });
    drop(running);
    let pair = result?;
    let (res, delta) = match pair {
        Value::Tuple(items) => match Rc::unwrap_or_clone(items).as_slice() {
            [res, Value::Delta(d)] => (res.clone(), d.clone()),
            _ => return err("internal error: `runDelta` of a non-(a, Delta) pair", span),
        },
        _ => return err("internal error: `runDelta` of a non-pair", span),
    };
    // binds is oldest first: fold from the newest, so the oldest ends outermost.
    let wrapped = binds.into_iter().rev().fold(delta, |body, (id, rhs)| {
        DeltaRef::new(Delta::Let(id, rhs, body))
    });
    Ok(Value::Tuple(Rc::new(vec![res, Value::Delta(wrapped)])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unlimited() -> u64 {
        u64::MAX
    }

    fn var(i: DeltaId) -> DeltaRef {
        DeltaRef::new(Delta::Var(i))
    }

    #[test]
    fn eval_follows_figure_11() {
        // Let 3 (Add (Var 1) (Scale 2 (Var 2))) (Scale 10 (Var 3)), seeded with 1.
        let d = Delta::Let(
            3,
            DeltaRef::new(Delta::Add(var(1), DeltaRef::new(Delta::Scale(2.0, var(2))))),
            DeltaRef::new(Delta::Scale(10.0, var(3))),
        );
        let mut m = DeltaMap::empty();
        eval(1.0, &d, &mut m, 100, &mut unlimited()).unwrap();
        assert_eq!(m.lookup(1), Some(10.0));
        assert_eq!(m.lookup(2), Some(20.0));
        // The Let's id is deleted once its contribution has been passed on.
        assert_eq!(m.lookup(3), None);
        assert_eq!(m.lookup(7), None);
        assert_eq!(m.lookup_or_zero(7), 0.0);
    }

    #[test]
    fn an_unused_let_contributes_nothing_and_a_present_zero_is_present() {
        let d = Delta::Let(5, var(1), DeltaRef::new(Delta::Scale(0.0, var(2))));
        let mut m = DeltaMap::empty();
        eval(1.0, &d, &mut m, 100, &mut unlimited()).unwrap();
        assert_eq!(m.lookup(2), Some(0.0));
        assert_eq!(m.lookup(1), None);
    }

    #[test]
    fn ids_out_of_range_are_errors() {
        let mut m = DeltaMap::empty();
        assert!(eval(1.0, &Delta::Var(-1), &mut m, 100, &mut 10).is_err());
        assert!(eval(1.0, &Delta::Var(100), &mut m, 100, &mut 10).is_err());
    }

    #[test]
    fn eval_counts_its_steps() {
        // Implicit sharing: 40 levels of `Add u u` is a tree of 2^40 leaves.
        let mut d = var(0);
        for _ in 0..40 {
            d = DeltaRef::new(Delta::Add(d.clone(), d));
        }
        let mut m = DeltaMap::empty();
        let mut steps = 10_000;
        assert_eq!(
            eval(1.0, &d, &mut m, 100, &mut steps),
            Err("evaluation step limit exceeded".to_string())
        );
    }

    #[test]
    fn a_million_deep_let_chain_evaluates_and_drops_without_recursion() {
        // x_i = 0.5 * (x_{i-1} + x_{i-1}), as runDelta wraps it: id i bound
        // to Scale 0.5 (Add (Var (i-1)) (Var (i-1))), the body Var n.
        let n: DeltaId = 1_000_000;
        let mut d = var(n);
        for i in (1..=n).rev() {
            let sum = DeltaRef::new(Delta::Add(var(i - 1), var(i - 1)));
            d = DeltaRef::new(Delta::Let(i, DeltaRef::new(Delta::Scale(0.5, sum)), d));
        }
        // Runs on the test thread's ordinary stack: recursion on the depth would overflow it.
        let mut m = DeltaMap::empty();
        eval(1.0, &d, &mut m, n as usize + 1, &mut unlimited()).unwrap();
        assert_eq!(m.lookup(0), Some(1.0));
        assert_eq!(m.lookup(n), None);
        drop(d);
    }

    #[test]
    fn delta_let_needs_a_running_run_delta() {
        assert_eq!(
            delta_let(DeltaRef::zero()),
            Err("deltaLet outside runDelta".to_string())
        );
        let bind = |d| delta_let(d).or_else(|m| err(m, Span::default()));
        let out = run_delta(7, Span::default(), || {
            let a = bind(var(1))?;
            let b = bind(var(a))?;
            assert_eq!((a, b), (7, 8));
            Ok(Value::Tuple(Rc::new(vec![
                Value::Unit,
                Value::Delta(var(b)),
            ])))
        })
        .unwrap();
        assert_eq!(
            crate::pretty::print_value(&out),
            "((), Let 7 (Var 1) (Let 8 (Var 7) (Var 8)))"
        );
        // The state was popped.
        assert!(delta_let(DeltaRef::zero()).is_err());
    }
}
