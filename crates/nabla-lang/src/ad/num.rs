//! Reals that carry perturbations of any number of nested derivative levels.
//!
//! A real at run time is a plain `f64` (a constant as far as every active
//! derivative is concerned) or a *tagged* real: a primal value plus the
//! perturbation of one *level* — one active call of a differentiation
//! operator. The primal is itself a real of the enclosing levels, so a value
//! inside three nested derivatives is a tower of three tags (Pearlmutter &
//! Siskind's tagged dual numbers, extended with reverse levels).
//!
//! * A **forward** level's perturbation is a tangent (Krawiec et al. Figure 3:
//!   the dual number (x, dx)), itself a real of the enclosing levels.
//! * A **reverse** level's perturbation is a Delta in the small form
//!   `Scale c (Var id)` (Krawiec et al. §5.3, as the library's `Reverse`
//!   keeps it): a coefficient, a real of the enclosing levels, and the id of
//!   a Delta in the level's trace. An operation on one variable only scales
//!   the coefficient (`Scale a (Scale b δ) = Scale (a·b) δ`), and so does one
//!   on two reals of the same Delta (`x + x`); only an operation on two
//!   different variables appends a flattened `Let id = w₀ · Var p₀ + w₁ ·
//!   Var p₁` entry, its weights the partials times the coefficients. The
//!   backward pass is one sweep over the trace ([`Trace::backpropagate`]),
//!   seeded with each output's coefficient times its cotangent.
//!
//! Levels are numbered by nesting depth: the operator called innermost has
//! the highest number. An operation on reals of different levels works at the
//! highest one and treats the others as constants of it — which is what makes
//! perturbation confusion impossible: an outer variable captured by an inner
//! function has a lower level, so the inner derivative cannot see its
//! perturbation. A level's reals never outlive it, because the operators only
//! take and return first-order data (the type checker enforces this), so the
//! depth numbers of live reals always name active levels.
//!
//! The derivative rules are not restated here: they are the nabla library's
//! table ([`nabla::Unary`], [`nabla::Binary`]), evaluated at [`Num`] through
//! the [`nabla::Number`] trait, so that the derivatives of derivatives come
//! from the same rules.

use super::trace::{NO_PARENT, Trace};
use crate::prim::partial_is_one;
use nabla::{Binary, Number, Unary};
use std::cell::RefCell;
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::rc::Rc;

/// The depth of a derivative level (0 = outermost).
pub type Level = u16;

/// A tagged real in general form: a primal one level down and the
/// perturbation of `level`.
#[derive(Debug)]
pub struct Node {
    level: Level,
    primal: Num,
    perturbation: Perturbation,
}

/// What a level attaches to a real.
#[derive(Clone, Debug)]
pub enum Perturbation {
    /// Forward level: the tangent, a real of the enclosing levels.
    Tangent(Num),
    /// Reverse level: the Delta `Scale coefficient (Var id)`, `id` a Delta
    /// of the level's trace and `coefficient` a real of the enclosing levels.
    Delta {
        /// The factor the Delta's adjoint is scaled by.
        coefficient: Num,
        /// The Delta in the level's trace.
        id: u32,
    },
}

/// Any run-time real: a constant or a real tagged with a level's perturbation.
/// (The same three forms are variants of [`Value`](crate::eval::Value).)
#[derive(Clone, Debug)]
pub enum Num {
    /// A plain real, constant for every level.
    Real(f64),
    /// The common tagged case, stored without allocation: a reverse-level
    /// real whose primal and coefficient are plain `f64`s.
    Reverse {
        /// The primal value.
        primal: f64,
        /// The coefficient of its Delta, `Scale coefficient (Var id)`.
        coefficient: f64,
        /// The reverse level.
        level: Level,
        /// Its Delta's id in that level's trace.
        id: u32,
    },
    /// Any other tagged real.
    Tagged(Rc<Node>),
}

/// The two kinds of derivative level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Dual numbers.
    Forward,
    /// Delta trace.
    Reverse,
}

struct ActiveLevel {
    mode: Mode,
    trace: Trace,
}

thread_local! {
    /// The active derivative levels, outermost first.
    static LEVELS: RefCell<Vec<ActiveLevel>> = const { RefCell::new(Vec::new()) };
}

/// An active derivative level; dropping it (also on an error) ends the level.
pub struct LevelGuard {
    level: Level,
    mode: Mode,
}

/// Why a level could not be started.
#[derive(Clone, Copy, Debug)]
pub struct TooDeep;

impl LevelGuard {
    /// Starts a new innermost level.
    pub fn enter(mode: Mode) -> Result<LevelGuard, TooDeep> {
        LEVELS.with_borrow_mut(|levels| {
            let level = Level::try_from(levels.len()).map_err(|_| TooDeep)?;
            levels.push(ActiveLevel {
                mode,
                trace: if mode == Mode::Reverse {
                    Trace::new()
                } else {
                    Trace::default()
                },
            });
            Ok(LevelGuard { level, mode })
        })
    }

    /// This level's number.
    pub fn level(&self) -> Level {
        self.level
    }

    /// A fresh input of this (reverse) level with primal `x`.
    pub fn input(&self, x: Num) -> Num {
        debug_assert_eq!(self.mode, Mode::Reverse);
        let id = with_trace(self.level, Trace::push_input);
        Num::reverse(self.level, x, Num::Real(1.0), id)
    }

    /// `x` perturbed by tangent `dx` at this (forward) level.
    pub fn dual(&self, x: Num, dx: Num) -> Num {
        debug_assert_eq!(self.mode, Mode::Forward);
        Num::forward(self.level, x, dx)
    }

    /// Ends the level, returning its trace (empty for a forward level).
    pub fn finish(self) -> Trace {
        let trace = LEVELS.with_borrow_mut(|levels| {
            levels
                .get_mut(self.level as usize)
                .map(|l| std::mem::take(&mut l.trace))
                .unwrap_or_default()
        });
        drop(self);
        trace
    }
}

impl Drop for LevelGuard {
    fn drop(&mut self) {
        LEVELS.with_borrow_mut(|levels| levels.truncate(self.level as usize));
    }
}

/// The kind of active level `level` (`None` if it is not active).
pub fn mode_of(level: Level) -> Option<Mode> {
    LEVELS.with_borrow(|levels| levels.get(level as usize).map(|l| l.mode))
}

/// The number of Deltas on the trace of reverse level `level` so far.
pub fn trace_len(level: Level) -> u32 {
    LEVELS.with_borrow(|levels| {
        levels
            .get(level as usize)
            .map_or(0, |l| l.trace.len() as u32)
    })
}

/// True if a Delta recorded on reverse level `level`'s trace since it had
/// `from` Deltas refers to an earlier Delta other than those of `allowed`
/// (sorted): what a computation from `allowed` alone never does.
pub fn refers_outside(level: Level, from: u32, allowed: &[u32]) -> bool {
    LEVELS.with_borrow(|levels| {
        let Some(l) = levels.get(level as usize) else {
            return false;
        };
        (from..l.trace.len() as u32).any(|id| {
            l.trace
                .parents(id)
                .iter()
                .any(|&p| p != NO_PARENT && p < from && allowed.binary_search(&p).is_err())
        })
    })
}

/// Records `Let fresh = coefficient · Var id` on reverse level `level`'s
/// trace and returns `fresh`: a new variable standing for the Delta `Scale
/// coefficient (Var id)`, as a custom rule's tangent map is given it (so
/// that what the map computes from anything else shows in the Deltas).
pub fn fresh_variable(level: Level, coefficient: Num, id: u32) -> u32 {
    with_trace(level, |t| {
        t.push([(id, coefficient), (NO_PARENT, Num::ZERO)])
    })
}

/// Runs `f` on the trace of reverse level `level` (to append a Delta).
#[inline]
fn with_trace(level: Level, f: impl FnOnce(&mut Trace) -> u32) -> u32 {
    LEVELS.with_borrow_mut(|levels| match levels.get_mut(level as usize) {
        Some(l) => {
            debug_assert_eq!(l.mode, Mode::Reverse);
            f(&mut l.trace)
        }
        // Unreachable while reals never outlive their level (see the module
        // docs): the type checker keeps tagged reals inside their operator.
        None => {
            debug_assert!(false, "a real outlived its derivative level");
            NO_PARENT - 1
        }
    })
}

/// Records `w · Var parent` with a plain weight at `level`.
#[inline]
fn record_plain(level: Level, parents: [u32; 2], weights: [f64; 2]) -> u32 {
    with_trace(level, |t| t.push_plain(parents, weights))
}

impl Num {
    /// The constant 0.
    pub const ZERO: Num = Num::Real(0.0);

    /// The plain value: every perturbation stripped.
    pub fn value(&self) -> f64 {
        match self {
            Num::Real(x) => *x,
            Num::Reverse { primal, .. } => *primal,
            Num::Tagged(n) => n.primal.value(),
        }
    }

    /// True for the constant 0 (a structural zero: multiplying a partial
    /// derivative by it is skipped, so an infinite partial cannot make NaN).
    pub fn is_zero(&self) -> bool {
        matches!(self, Num::Real(x) if *x == 0.0)
    }

    /// A plain real or a reverse real over plain reals, as its primal and
    /// its [`PlainDelta`] if tagged.
    #[inline]
    pub(crate) fn plain(&self) -> Option<(f64, Option<PlainDelta>)> {
        match *self {
            Num::Real(x) => Some((x, None)),
            Num::Reverse {
                primal,
                coefficient,
                level,
                id,
            } => Some((
                primal,
                Some(PlainDelta {
                    level,
                    coefficient,
                    id,
                }),
            )),
            Num::Tagged(_) => None,
        }
    }

    /// The level of this real's outermost tag: the innermost level it is
    /// perturbed at (`None` for a constant of every level).
    pub fn level(&self) -> Option<Level> {
        match self {
            Num::Real(_) => None,
            Num::Reverse { level, .. } => Some(*level),
            Num::Tagged(n) => Some(n.level),
        }
    }

    /// This real seen at `level`: its primal one level down and its
    /// perturbation there, or itself and `None` if it is constant at `level`.
    pub fn split(self, level: Level) -> (Num, Option<Perturbation>) {
        if self.level() != Some(level) {
            return (self, None);
        }
        match self {
            Num::Reverse {
                primal,
                coefficient,
                id,
                ..
            } => (
                Num::Real(primal),
                Some(Perturbation::Delta {
                    coefficient: Num::Real(coefficient),
                    id,
                }),
            ),
            Num::Tagged(n) => match Rc::try_unwrap(n) {
                Ok(n) => (n.primal, Some(n.perturbation)),
                Err(n) => (n.primal.clone(), Some(n.perturbation.clone())),
            },
            Num::Real(_) => (self, None),
        }
    }

    /// The reverse-level real with primal `primal` and Delta `Scale
    /// coefficient (Var id)`.
    pub(crate) fn reverse(level: Level, primal: Num, coefficient: Num, id: u32) -> Num {
        match (primal, coefficient) {
            (Num::Real(primal), Num::Real(coefficient)) => Num::Reverse {
                primal,
                coefficient,
                level,
                id,
            },
            (primal, coefficient) => Num::Tagged(Rc::new(Node {
                level,
                primal,
                perturbation: Perturbation::Delta { coefficient, id },
            })),
        }
    }

    /// The forward-level real (primal, tangent); a constant if the tangent
    /// is the constant 0.
    pub(crate) fn forward(level: Level, primal: Num, tangent: Num) -> Num {
        if tangent.is_zero() {
            return primal;
        }
        Num::Tagged(Rc::new(Node {
            level,
            primal,
            perturbation: Perturbation::Tangent(tangent),
        }))
    }

    /// A built-in function of one real, at every level `x` carries.
    pub fn unary(op: Unary, x: Num) -> Num {
        let level = match x {
            Num::Real(a) => return Num::Real(op.eval(a)),
            // `stop_gradient`: a constant of every level, as native code
            // makes it (not a real of the level with derivative 0, which a
            // custom rule would take for a perturbed one).
            _ if op == Unary::StopGradient => return Num::Real(op.eval(x.value())),
            // The common case, on f64 throughout: `Scale f'(x) δx` folds
            // into the coefficient, nothing is recorded.
            Num::Reverse {
                primal,
                coefficient,
                level,
                id,
            } => {
                let v = op.eval(primal);
                return Num::Reverse {
                    primal: v,
                    coefficient: op.derivative(primal, v).chain(coefficient),
                    level,
                    id,
                };
            }
            Num::Tagged(ref n) => n.level,
        };
        let (x, dx) = x.split(level);
        let v = Num::unary(op, x.clone());
        match dx {
            Some(Perturbation::Tangent(t)) => {
                let t = op.derivative(x, v.clone()).chain(t);
                Num::forward(level, v, t)
            }
            Some(Perturbation::Delta { coefficient, id }) => {
                let c = op.derivative(x, v.clone()).chain(coefficient);
                Num::reverse(level, v, c, id)
            }
            None => v,
        }
    }

    /// A built-in function of two reals, at the innermost level either carries.
    pub fn binary(op: Binary, x: Num, y: Num) -> Num {
        // The common cases, on f64 throughout: constants, and one reverse
        // level over plain reals.
        if let (Some(a), Some(b)) = (x.plain(), y.plain()) {
            if a.1.is_none() && b.1.is_none() {
                return Num::Real(op.eval(a.0, b.0));
            }
            if let Some(r) = reverse_on_plain(op, a, b) {
                return r.into();
            }
        }
        let Some(level) = x.level().max(y.level()) else {
            return Num::Real(op.eval(x.value(), y.value()));
        };
        let (x, dx) = x.split(level);
        let (y, dy) = y.split(level);
        let v = Num::binary(op, x.clone(), y.clone());
        // Each partial is formed only for an operand perturbed at this level.
        let px = |x: &Num, y: &Num, v: &Num| op.partial_x(x.clone(), y.clone(), v.clone());
        let py = |x: &Num, y: &Num, v: &Num| op.partial_y(x.clone(), y.clone(), v.clone());
        match (dx, dy) {
            (None, None) => v,
            (
                dx @ (None | Some(Perturbation::Tangent(_))),
                dy @ (None | Some(Perturbation::Tangent(_))),
            ) => {
                // Figure 3: tangent = ∂ₓf · dx + ∂ᵧf · dy. A partial that
                // is the table's constant 1 (both of `+`, the first of `−`)
                // is not multiplied: `chain(1, d)` is `d`, and over a reverse
                // level the product would record a Delta that scales by 1.
                let tx = match dx {
                    Some(Perturbation::Tangent(tx)) if partial_is_one(op, 0) => Some(chain_one(tx)),
                    Some(Perturbation::Tangent(tx)) => Some(px(&x, &y, &v).chain(tx)),
                    _ => None,
                };
                let ty = match dy {
                    Some(Perturbation::Tangent(ty)) if partial_is_one(op, 1) => Some(chain_one(ty)),
                    Some(Perturbation::Tangent(ty)) => Some(py(&x, &y, &v).chain(ty)),
                    _ => None,
                };
                let t = match (tx, ty) {
                    (Some(a), Some(b)) => a + b,
                    (Some(t), None) | (None, Some(t)) => t,
                    (None, None) => Num::ZERO,
                };
                Num::forward(level, v, t)
            }
            // `x + c`, `c + x`, `x − c`: the Delta is x's (`Add δx Zero = δx`).
            (Some(Perturbation::Delta { coefficient, id }), None) if partial_is_one(op, 0) => {
                Num::reverse(level, v, coefficient, id)
            }
            (None, Some(Perturbation::Delta { coefficient, id })) if partial_is_one(op, 1) => {
                Num::reverse(level, v, coefficient, id)
            }
            // One variable: `Scale ∂ δ`, folded into its coefficient.
            (Some(Perturbation::Delta { coefficient, id }), None) => {
                let c = px(&x, &y, &v).chain(coefficient);
                Num::reverse(level, v, c, id)
            }
            (None, Some(Perturbation::Delta { coefficient, id })) => {
                let c = py(&x, &y, &v).chain(coefficient);
                Num::reverse(level, v, c, id)
            }
            (
                Some(Perturbation::Delta {
                    coefficient: cx,
                    id: ix,
                }),
                Some(Perturbation::Delta {
                    coefficient: cy,
                    id: iy,
                }),
            ) => {
                // `Add (Scale ∂ₓ δx) (Scale ∂ᵧ δy)`, each weight the partial
                // times the coefficient (a partial 1 not multiplied: over a
                // reverse level the product would scale by 1).
                let weight = |unit: bool, partial: &dyn Fn() -> Num, c: Num| {
                    if unit {
                        chain_one(c)
                    } else {
                        partial().chain(c)
                    }
                };
                let wx = weight(partial_is_one(op, 0), &|| px(&x, &y, &v), cx);
                let wy = weight(partial_is_one(op, 1), &|| py(&x, &y, &v), cy);
                if ix == iy {
                    // `x + x`: one Delta, `Scale (wₓ + wᵧ) δ`.
                    Num::reverse(level, v, wx + wy, ix)
                } else {
                    let id = with_trace(level, |t| t.push([(ix, wx), (iy, wy)]));
                    Num::reverse(level, v, Num::Real(1.0), id)
                }
            }
            // Tangents and Deltas never meet: a level has one mode.
            _ => v,
        }
    }
}

/// `chain(1, d)` ([`Number::chain`] with the partial 1): `d` itself, or the
/// structural zero for a zero `d`.
fn chain_one(d: Num) -> Num {
    if d.is_zero() { Num::ZERO } else { d }
}

/// The Delta `Scale coefficient (Var id)` of a reverse real of `level` over
/// plain reals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlainDelta {
    /// The reverse level.
    pub level: Level,
    /// The Delta's coefficient.
    pub coefficient: f64,
    /// The Delta's id on the level's trace.
    pub id: u32,
}

/// A reverse real over plain reals: its primal and its Delta.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlainReverse {
    /// The primal value.
    pub primal: f64,
    /// Its Delta.
    pub delta: PlainDelta,
}

impl From<PlainReverse> for Num {
    #[inline]
    fn from(r: PlainReverse) -> Num {
        Num::Reverse {
            primal: r.primal,
            coefficient: r.delta.coefficient,
            level: r.delta.level,
            id: r.delta.id,
        }
    }
}

/// The common case of reverse mode, on `f64` throughout: `op` on two reals
/// that are plain or reverse reals of one level over plain reals, each given
/// as (primal, Delta). The rules of [`Num::binary`]: one variable's
/// coefficient is scaled by its partial (by nothing for a partial 1); two
/// reals of one Delta add their weights; only two different variables
/// record an entry. `None` if neither operand is tagged or they are tagged
/// at different levels.
#[inline]
pub fn reverse_on_plain(
    op: Binary,
    (a, ta): (f64, Option<PlainDelta>),
    (b, tb): (f64, Option<PlainDelta>),
) -> Option<PlainReverse> {
    let primal = op.eval(a, b);
    // Each partial only for a perturbed operand (a constant's partial may be NaN).
    let delta = match (ta, tb) {
        // `x + c`, `c + x`, `x − c`: the Delta is x's (`Add δx Zero = δx`).
        (Some(dx), None) if partial_is_one(op, 0) => dx,
        (None, Some(dy)) if partial_is_one(op, 1) => dy,
        (Some(dx), None) => PlainDelta {
            coefficient: op.partial_x(a, b, primal).chain(dx.coefficient),
            ..dx
        },
        (None, Some(dy)) => PlainDelta {
            coefficient: op.partial_y(a, b, primal).chain(dy.coefficient),
            ..dy
        },
        (Some(dx), Some(dy)) if dx.level == dy.level => {
            let wx = op.partial_x(a, b, primal).chain(dx.coefficient);
            let wy = op.partial_y(a, b, primal).chain(dy.coefficient);
            if dx.id == dy.id {
                PlainDelta {
                    coefficient: wx + wy,
                    ..dx
                }
            } else {
                PlainDelta {
                    coefficient: 1.0,
                    id: record_plain(dx.level, [dx.id, dy.id], [wx, wy]),
                    ..dx
                }
            }
        }
        _ => return None,
    };
    Some(PlainReverse { primal, delta })
}

// ---- the arithmetic the derivative table is written in ----

impl Number for Num {
    fn constant(c: f64) -> Num {
        Num::Real(c)
    }
    fn apply(self, op: Unary) -> Num {
        Num::unary(op, self)
    }
    fn apply2(self, op: Binary, other: Num) -> Num {
        Num::binary(op, self, other)
    }
    fn chain(self, d: Num) -> Num {
        if self.is_zero() || d.is_zero() {
            Num::ZERO
        } else {
            self * d
        }
    }
}

macro_rules! binary_ops {
    ($($tr:ident $method:ident $op:ident;)*) => {$(
        impl $tr for Num {
            type Output = Num;
            #[inline]
            fn $method(self, other: Num) -> Num {
                Num::binary(Binary::$op, self, other)
            }
        }
        impl $tr<f64> for Num {
            type Output = Num;
            #[inline]
            fn $method(self, other: f64) -> Num {
                Num::binary(Binary::$op, self, Num::Real(other))
            }
        }
    )*};
}

binary_ops! {
    Add add Add;
    Sub sub Sub;
    Mul mul Mul;
    Div div Div;
}

impl Neg for Num {
    type Output = Num;
    fn neg(self) -> Num {
        Num::unary(Unary::Neg, self)
    }
}

impl PartialEq<f64> for Num {
    fn eq(&self, other: &f64) -> bool {
        self.value() == *other
    }
}

impl PartialOrd<f64> for Num {
    fn partial_cmp(&self, other: &f64) -> Option<std::cmp::Ordering> {
        self.value().partial_cmp(other)
    }
}
