//! Property test of the differentiation operators over randomly generated
//! well-typed programs (see docs/ad-testing.md).
//!
//! Each case generates a program `f : S -> Real`, `g : S -> T` and a sample
//! point `s0` (`ad_random/program.rs`), then checks, through the interpreter:
//!
//! * `generated_programs_run`: the program parses, type-checks and runs;
//!   `f` and `g` give finite values of the expected shape, and `f s0` lies
//!   in the interval the generator computed for it;
//! * `grad_agrees_with_finite_differences`: every component of `grad f s0`
//!   agrees with a central difference of `f`, and `value_and_grad` agrees
//!   with `f` and `grad`;
//! * `forward_and_reverse_agree`: `dt · (J ds) = (Jᵀ dt) · ds` for `g` (with
//!   `jvp` and the pullback from `vjp`) and for `f` (`jvp` against `grad`),
//!   and `J ds` agrees with a central difference of `g` along `ds`.
//!
//! `NABLA_AD_CASES=N` sets the number of programs per test (default
//! [`DEFAULT_CASES`]), `NABLA_AD_SEED=K` the fixed proptest seed, and
//! `NABLA_AD_PROGRAM=SEED` prints the program for one case seed (as shown in
//! a failure) and runs the checks on it alone; `NABLA_AD_BUDGET` and
//! `NABLA_AD_DEPTH` make bigger programs, `NABLA_AD_SHADOW` (percent) sets
//! how often a binder reuses a name (shadowing). Run with `--nocapture` to see the
//! statistics of a run.

#[path = "ad_random/interval.rs"]
mod interval;
#[path = "ad_random/program.rs"]
mod program;
#[path = "ad_random/value.rs"]
mod value;

use nabla_lang::driver::Session;
use nabla_lang::stack::run_with_stack;
use program::{Fragment, Options, Program, Rng, Ty, generate, sample};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestError, TestRunner};
use std::cell::RefCell;
use std::time::Instant;
use value::{Val, dot, parse};

/// Programs per test in a plain `cargo test` run.
const DEFAULT_CASES: u32 = 600;
/// The fixed proptest seed (programs are the same in every run).
const DEFAULT_SEED: u64 = 20_240_601;

/// Finite-difference step.
const H: f64 = 1e-5;
/// `|ad - fd| <= FD_TOL * (1 + |fd|)`.
const FD_TOL: f64 = 1e-5;
/// Forward against reverse mode, relative to the size of the terms.
const FR_TOL: f64 = 1e-10;
/// Two computations of the same primal value or gradient.
const SAME_TOL: f64 = 1e-12;

const OPTIONS: Options = Options {
    nested_ad: true,
    depth: 5,
    budget: 40,
    shadowing: 0.3,
    fragment: Fragment::ALL,
    // Derivatives must be finite for the finite-difference checks.
    structural_zeros: 0.0,
};

/// [`OPTIONS`], with `NABLA_AD_DEPTH` and `NABLA_AD_BUDGET` (bigger
/// programs for longer runs) and `NABLA_AD_SHADOW` (the probability that a
/// binder reuses a name, in percent) applied.
fn options(nested_ad: bool) -> Options {
    Options {
        nested_ad,
        depth: env_u64("NABLA_AD_DEPTH").map_or(OPTIONS.depth, |d| d as u32),
        budget: env_u64("NABLA_AD_BUDGET").map_or(OPTIONS.budget, |b| b as i32),
        shadowing: env_u64("NABLA_AD_SHADOW").map_or(OPTIONS.shadowing, |p| p as f64 / 100.0),
        ..OPTIONS
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The proptest configuration of one test; `salt` makes each test draw
/// its own programs.
fn config(salt: u64) -> Config {
    let seed = env_u64("NABLA_AD_SEED").unwrap_or(DEFAULT_SEED);
    Config {
        cases: env_u64("NABLA_AD_CASES").map_or(DEFAULT_CASES, |n| n as u32),
        rng_seed: RngSeed::Fixed(seed.wrapping_add(salt)),
        failure_persistence: None,
        // A case is a seed: shrinking it would only find unrelated programs.
        max_shrink_iters: 0,
        max_global_rejects: 0,
        ..Config::default()
    }
}

/// Whether the differentiation operators exist yet.
fn ad_available() -> bool {
    let mut s = Session::new();
    s.eval_expr("<probe>", "diff (fun t -> t * t) 3.0")
        .as_deref()
        == Ok("6.0")
}

/// A loaded program.
struct Loaded {
    session: Session,
    prog: Program,
}

impl Loaded {
    fn new(prog: Program) -> Result<Loaded, String> {
        let mut session = Session::new();
        if let Err(ds) = session.load("generated.nabla", &prog.source) {
            return Err(format!("does not load:\n{}", session.render(&ds)));
        }
        Ok(Loaded { session, prog })
    }

    fn eval(&mut self, expr: &str) -> Result<Val, String> {
        match self.session.eval_expr("<check>", expr) {
            Ok(text) => {
                parse(&text).map_err(|e| format!("`{expr}` printed something unreadable: {e}"))
            }
            Err(ds) => Err(format!("`{expr}` failed:\n{}", self.session.render(&ds))),
        }
    }

    fn eval_real(&mut self, expr: &str) -> Result<f64, String> {
        match self.eval(expr)? {
            Val::Real(x) => Ok(x),
            v => Err(format!("`{expr}` gave {v:?}, not a Real")),
        }
    }

    /// Evaluates `f` at many points in one run: `(f p1, f p2, ...)`.
    fn eval_many(&mut self, fun: &str, points: &[Val]) -> Result<Vec<Val>, String> {
        if points.len() == 1 {
            return Ok(vec![self.eval(&format!("{fun} {}", points[0].source()))?]);
        }
        let calls: Vec<String> = points
            .iter()
            .map(|p| format!("{fun} {}", p.source()))
            .collect();
        match self.eval(&format!("({})", calls.join(", ")))? {
            Val::Tuple(vs) if vs.len() == points.len() => Ok(vs),
            v => Err(format!("batch of {} calls gave {v:?}", points.len())),
        }
    }
}

/// The four points `s0 + h·dir`, `s0 - h·dir`, `s0 + h/2·dir`, `s0 - h/2·dir`.
fn stencil(s0: &Val, dir: &[f64], h: f64) -> Vec<Val> {
    let xs = s0.reals();
    [h, -h, h / 2.0, -h / 2.0]
        .iter()
        .map(|h| {
            s0.with_reals(
                &xs.iter()
                    .zip(dir)
                    .map(|(x, d)| x + h * d)
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

/// The coordinate directions of `s0`'s Real leaves.
fn coordinates(s0: &Val) -> Vec<Vec<f64>> {
    let n = s0.reals().len();
    (0..n)
        .map(|i| (0..n).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
        .collect()
}

/// The directional derivative from the values `v` of a function at a
/// [`stencil`] of step `h`: the central differences `D(h)` and `D(h/2)`
/// extrapolated (Richardson: `(4 D(h/2) - D(h)) / 3`, truncation error
/// O(h⁴)), and the plain `D(h)` (truncation error O(h²)).
fn central(v: [f64; 4], h: f64) -> (f64, f64) {
    let d1 = (v[0] - v[1]) / (2.0 * h);
    let d2 = (v[2] - v[3]) / h;
    ((4.0 * d2 - d1) / 3.0, d1)
}

/// Checks derivatives against finite differences of the function `fun`
/// (source text) at `s0`: `ad[i][k]` is the derivative of output real `k`
/// along `dirs[i]`. Every evaluated value must have the shape of `shape`.
///
/// A direction that fails with step [`H`] is tried again with `H / 10`
/// (truncation error 10⁴ times smaller; AD does not depend on the step),
/// and fails only if it fails again: a function whose fifth derivatives
/// are huge (a `cos` of a large argument) can defeat the first step.
fn fd_check(
    l: &mut Loaded,
    fun: &str,
    dirs: &[Vec<f64>],
    ad: &[Vec<f64>],
    shape: &Val,
    st: &mut Stats,
) -> Result<(), Vec<String>> {
    let s0 = l.prog.s0.clone();
    let mut todo: Vec<usize> = (0..dirs.len()).collect();
    let mut report = Vec::new();
    for (attempt, h) in [H, H / 10.0].into_iter().enumerate() {
        let pts: Vec<Val> = todo
            .iter()
            .flat_map(|&i| stencil(&s0, &dirs[i], h))
            .collect();
        let vals = l.eval_many(fun, &pts).map_err(|e| vec![e])?;
        if let Some((p, v)) = pts.iter().zip(&vals).find(|(_, v)| !shape.same_shape(v)) {
            return Err(vec![format!(
                "{fun} {} = {}: not the shape {} it has at s0",
                p.source(),
                v.source(),
                shape.source()
            )]);
        }
        let vals: Vec<Vec<f64>> = vals.iter().map(Val::reals).collect();
        let mut failed = Vec::new();
        for (j, &i) in todo.iter().enumerate() {
            let mut bad = Vec::new();
            for (k, &d) in ad[i].iter().enumerate() {
                let v = [0, 1, 2, 3].map(|q| vals[4 * j + q][k]);
                let (fd, plain) = central(v, h);
                let err = (d - fd).abs() / (1.0 + fd.abs());
                st.comparisons += 1;
                if attempt == 0 {
                    st.max_fd_plain_err = st
                        .max_fd_plain_err
                        .max((d - plain).abs() / (1.0 + plain.abs()));
                }
                if err <= FD_TOL {
                    st.max_fd_err = st.max_fd_err.max(err);
                } else {
                    bad.push(format!(
                        "    output real {k}: AD {d:e}, finite difference {fd:e} (h = {h:e}), error {err:.2e} > {FD_TOL:e}"
                    ));
                }
            }
            if bad.is_empty() {
                st.fd_retried += u64::from(attempt > 0);
            } else {
                report.push(format!("  direction {:?}:", dirs[i]));
                report.extend(bad);
                failed.push(i);
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        todo = failed;
    }
    Err(report)
}

fn real_of(v: &Val) -> Result<f64, String> {
    match v {
        Val::Real(x) => Ok(*x),
        _ => Err(format!("{v:?} is not a Real")),
    }
}

/// Does `v` have type `ty`?
fn has_type(v: &Val, ty: &Ty) -> bool {
    match (v, ty) {
        (Val::Real(_), Ty::Real) | (Val::Int(_), Ty::Int) => true,
        (Val::Tuple(vs), Ty::Tuple(ts)) => {
            vs.len() == ts.len() && vs.iter().zip(ts).all(|(v, t)| has_type(v, t))
        }
        (Val::Inl(v), Ty::Sum(a, _)) => has_type(v, a),
        (Val::Inr(v), Ty::Sum(_, b)) => has_type(v, b),
        (Val::Vec(vs), Ty::Vec(n)) => {
            vs.len() == *n && vs.iter().all(|v| matches!(v, Val::Real(_)))
        }
        _ => false,
    }
}

fn all_finite(v: &Val) -> bool {
    v.reals().iter().all(|x| x.is_finite())
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

/// Statistics of one test over all its cases.
#[derive(Default, Debug)]
struct Stats {
    programs: u32,
    nodes: u64,
    ad_calls: u64,
    with_nested_ad: u32,
    /// Programs with a binder that shadows a name in scope, and those
    /// binders in all.
    with_shadowing: u32,
    shadows: u64,
    /// Binders that reuse a name bound elsewhere (not in scope).
    reuses: u64,
    /// Scalar comparisons made.
    comparisons: u64,
    /// Largest observed `|ad - fd| / (1 + |fd|)`, with the extrapolated
    /// finite difference (the one checked).
    max_fd_err: f64,
    /// The same with the plain central difference `D(h)` (for information).
    max_fd_plain_err: f64,
    /// Gradient components checked, and how many of them were not 0.
    grad_components: u64,
    grad_nonzero: u64,
    /// Programs whose gradient is not all zero.
    grad_programs_nonzero: u32,
    /// Finite-difference comparisons that passed only with the smaller step.
    fd_retried: u64,
    /// Largest observed forward/reverse relative discrepancy.
    max_fr_err: f64,
}

impl Stats {
    fn add_program(&mut self, p: &Program) {
        self.programs += 1;
        self.nodes += u64::from(p.nodes);
        self.ad_calls += p.ad_calls as u64;
        self.with_nested_ad += u32::from(p.ad_calls > 0);
        self.with_shadowing += u32::from(p.shadows > 0);
        self.shadows += u64::from(p.shadows);
        self.reuses += u64::from(p.reuses);
    }
}

type Check = fn(&mut Loaded, &mut Rng, &mut Stats) -> Result<(), String>;

/// Primal evaluation only.
fn check_runs(l: &mut Loaded, _rng: &mut Rng, st: &mut Stats) -> Result<(), String> {
    let s0 = l.prog.s0.clone();
    assert!(has_type(&s0, &l.prog.s_ty), "generator bug: s0 is not an S");
    let fx = l.eval_real(&format!("f {}", s0.source()))?;
    if !fx.is_finite() {
        return Err(format!("f s0 = {fx}"));
    }
    if !l.prog.f_iv.contains(fx) {
        return Err(format!(
            "generator bug: f s0 = {fx} lies outside its computed interval {:?}",
            l.prog.f_iv
        ));
    }
    let gx = l.eval(&format!("g {}", s0.source()))?;
    if !has_type(&gx, &l.prog.t_ty) || !all_finite(&gx) {
        return Err(format!(
            "g s0 = {gx:?}, expected a finite {:?}",
            l.prog.t_ty
        ));
    }
    let pts: Vec<Val> = coordinates(&s0)
        .iter()
        .flat_map(|d| stencil(&s0, d, H))
        .collect();
    for (p, v) in pts.iter().zip(l.eval_many("f", &pts)?) {
        let y = real_of(&v)?;
        if !y.is_finite() || !l.prog.f_iv.contains(y) {
            return Err(format!("f {} = {y}, outside {:?}", p.source(), l.prog.f_iv));
        }
    }
    st.comparisons += 1 + pts.len() as u64;
    Ok(())
}

/// `grad f s0` against central differences; `value_and_grad` against both.
fn check_grad(l: &mut Loaded, _rng: &mut Rng, st: &mut Stats) -> Result<(), String> {
    let s0 = l.prog.s0.clone();
    let src = s0.source();
    let grad = l.eval(&format!("grad f {src}"))?;
    if !s0.same_shape(&grad) {
        return Err(format!(
            "grad f s0 = {} does not have the shape of s0",
            grad.source()
        ));
    }
    let ad = grad.reals();
    st.grad_components += ad.len() as u64;
    st.grad_nonzero += ad.iter().filter(|x| **x != 0.0).count() as u64;
    st.grad_programs_nonzero += u32::from(ad.iter().any(|x| *x != 0.0));
    let per_dir: Vec<Vec<f64>> = ad.iter().map(|d| vec![*d]).collect();
    let report = fd_check(l, "f", &coordinates(&s0), &per_dir, &Val::Real(0.0), st)
        .err()
        .unwrap_or_default();
    if !report.is_empty() {
        return Err(format!(
            "grad f s0 = {} disagrees with finite differences:\n{}",
            grad.source(),
            report.join("\n")
        ));
    }
    let fx = l.eval_real(&format!("f {src}"))?;
    match l.eval(&format!("value_and_grad f {src}"))? {
        Val::Tuple(vs) if vs.len() == 2 => {
            let v = real_of(&vs[0])?;
            let same_grad = s0.same_shape(&vs[1])
                && vs[1]
                    .reals()
                    .iter()
                    .zip(&ad)
                    .all(|(a, b)| close(*a, *b, SAME_TOL));
            st.comparisons += 1 + ad.len() as u64;
            if !close(v, fx, SAME_TOL) || !same_grad {
                return Err(format!(
                    "value_and_grad f s0 = {} but f s0 = {fx} and grad f s0 = {}",
                    Val::Tuple(vs.clone()).source(),
                    grad.source()
                ));
            }
        }
        v => return Err(format!("value_and_grad f s0 = {v:?}")),
    }
    Ok(())
}

/// `(value, tangent)` of a `jvp` call.
fn pair(v: Val, what: &str) -> Result<(Val, Val), String> {
    match v {
        Val::Tuple(mut vs) if vs.len() == 2 => {
            let b = vs.pop().expect("two");
            let a = vs.pop().expect("two");
            Ok((a, b))
        }
        v => Err(format!("{what} gave {v:?}, not a pair")),
    }
}

fn norm(xs: &[f64]) -> f64 {
    xs.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The scale against which `dt · (J ds)` and `(Jᵀ dt) · ds` are compared:
/// the larger of the two values, of the sums of the absolute terms of the
/// two dot products, and of `|dt| |ds|`. The last one is a floor for when
/// the Jacobian cancels to (nearly) zero while its intermediate derivatives
/// do not (`4x / (-0.4x)`): both modes then give rounding noise of the
/// size of those intermediate derivatives, not of the result.
fn fr_scale(a: f64, b: f64, terms: f64, dt: &[f64], ds: &[f64]) -> f64 {
    a.abs().max(b.abs()).max(terms).max(norm(dt) * norm(ds))
}

/// Checks `a == b` relative to `scale` (see [`fr_scale`]).
fn agree(a: f64, b: f64, scale: f64, st: &mut Stats) -> bool {
    st.comparisons += 1;
    if scale == 0.0 {
        return a == b;
    }
    let err = (a - b).abs() / scale;
    st.max_fr_err = st.max_fr_err.max(err);
    err <= FR_TOL
}

/// Forward against reverse mode, for `g` (jvp against the vjp pullback) and
/// `f` (jvp against grad), and jvp against central differences along `ds`.
fn check_fwd_rev(l: &mut Loaded, rng: &mut Rng, st: &mut Stats) -> Result<(), String> {
    let s0 = l.prog.s0.clone();
    let src = s0.source();
    let n = s0.reals().len();
    let ds = s0.with_reals(&(0..n).map(|_| rng.range(-1.0, 1.0)).collect::<Vec<_>>());
    let dsrc = ds.source();

    // f : S -> Real.
    let fx = l.eval_real(&format!("f {src}"))?;
    let (y, jf) = pair(l.eval(&format!("jvp f {src} {dsrc}"))?, "jvp f")?;
    let grad = l.eval(&format!("grad f {src}"))?;
    let (gd, gscale) = dot(&grad.reals(), &ds.reals());
    let jf = real_of(&jf)?;
    let scale = fr_scale(jf, gd, gscale, &[1.0], &ds.reals());
    if !close(real_of(&y)?, fx, SAME_TOL) || !agree(jf, gd, scale, st) {
        return Err(format!(
            "for f with ds = {dsrc}: jvp f s0 ds = ({}, {jf:e}) but f s0 = {fx:e} and grad f s0 · ds = {gd:e} (grad = {})",
            y.source(),
            grad.source()
        ));
    }

    // g : S -> T.
    let t0 = l.eval(&format!("g {src}"))?;
    let m = t0.reals().len();
    let dt = t0.with_reals(&(0..m).map(|_| rng.range(-1.0, 1.0)).collect::<Vec<_>>());
    let (y, jds) = pair(l.eval(&format!("jvp g {src} {dsrc}"))?, "jvp g")?;
    if !t0.same_shape(&y) || !t0.same_shape(&jds) {
        return Err(format!(
            "jvp g s0 ds = ({}, {}): not the shape of g s0 = {}",
            y.source(),
            jds.source(),
            t0.source()
        ));
    }
    let y2 = l.eval(&format!("fst (vjp g {src})"))?;
    let same_value = |a: &Val| {
        a.reals()
            .iter()
            .zip(t0.reals())
            .all(|(x, y)| close(*x, y, SAME_TOL))
    };
    if !same_value(&y) || !same_value(&y2) || !t0.same_shape(&y2) {
        return Err(format!(
            "primal values differ: g s0 = {}, jvp gives {}, vjp gives {}",
            t0.source(),
            y.source(),
            y2.source()
        ));
    }
    let ct = l.eval(&format!("(snd (vjp g {src})) {}", dt.source()))?;
    if !s0.same_shape(&ct) {
        return Err(format!(
            "the pullback of g at s0 applied to dt = {} gave {}, not the shape of s0",
            dt.source(),
            ct.source()
        ));
    }
    let (lhs, s1) = dot(&dt.reals(), &jds.reals());
    let (rhs, s2) = dot(&ct.reals(), &ds.reals());
    let scale = fr_scale(lhs, rhs, s1.max(s2), &dt.reals(), &ds.reals());
    if !agree(lhs, rhs, scale, st) {
        return Err(format!(
            "forward and reverse mode disagree for g:\n  ds = {dsrc}\n  dt = {}\n  J ds  = {} (from jvp)\n  Jᵀ dt = {} (from vjp)\n  dt · (J ds) = {lhs:e}\n  (Jᵀ dt) · ds = {rhs:e}\n  relative difference {:.2e} > {FR_TOL:e}",
            dt.source(),
            jds.source(),
            ct.source(),
            (lhs - rhs).abs() / scale
        ));
    }

    if let Ty::Vec(_) = l.prog.s_ty {
        check_hessian(l, &ds, st)?;
        if let Ty::Vec(_) = l.prog.t_ty {
            check_jacobian(l, &ds, &dt, &jds, &ct, st)?;
        }
    }

    // J ds against finite differences of g along ds.
    let report = fd_check(l, "g", &[ds.reals()], &[jds.reals()], &t0, st)
        .err()
        .unwrap_or_default();
    if !report.is_empty() {
        return Err(format!(
            "jvp g s0 ds = {} disagrees with finite differences along ds = {dsrc}:\n{}",
            jds.source(),
            report.join("\n")
        ));
    }
    Ok(())
}

/// A matrix printed as a vector of vectors of reals.
fn matrix(v: &Val, rows: usize, cols: usize, what: &str) -> Result<Vec<Vec<f64>>, String> {
    let bad = || format!("{what} = {} is not a {rows}×{cols} matrix", v.source());
    let Val::Vec(rs) = v else { return Err(bad()) };
    if rs.len() != rows {
        return Err(bad());
    }
    rs.iter()
        .map(|r| match r {
            Val::Vec(xs) if xs.len() == cols && has_type(r, &Ty::Vec(cols)) => Ok(r.reals()),
            _ => Err(bad()),
        })
        .collect()
}

/// `M x` and, per row, the sum of the absolute terms.
fn mat_vec(m: &[Vec<f64>], x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    m.iter().map(|row| dot(row, x)).unzip()
}

/// Compares two vectors componentwise, each relative to its terms and to
/// `floor` (see [`fr_scale`]). Returns the first disagreeing component.
fn agree_vec(a: &[f64], b: &[f64], terms: &[f64], floor: f64, st: &mut Stats) -> Option<usize> {
    (0..a.len()).find(|&i| !agree(a[i], b[i], terms[i].max(floor), st))
}

/// For `f : Vec Real -> Real`: `hessian f s0` times `ds` against
/// forward-over-reverse (`jvp (grad f)`) and against a central difference
/// of `grad f` along `ds`; and the Hessian is symmetric.
fn check_hessian(l: &mut Loaded, ds: &Val, st: &mut Stats) -> Result<(), String> {
    let s0 = l.prog.s0.clone();
    let (src, dsrc) = (s0.source(), ds.source());
    let n = s0.reals().len();
    let h = matrix(&l.eval(&format!("hessian f {src}"))?, n, n, "hessian f s0")?;
    let dsr = ds.reals();
    let (hds, terms) = mat_vec(&h, &dsr);
    let (_, fwd) = pair(
        l.eval(&format!("jvp (grad f) {src} {dsrc}"))?,
        "jvp (grad f)",
    )?;
    let fwd = fwd.reals();
    if fwd.len() != n {
        return Err(format!(
            "jvp (grad f) s0 ds has {} reals, not {n}",
            fwd.len()
        ));
    }
    let floor = norm(&dsr);
    if let Some(i) = agree_vec(&hds, &fwd, &terms, floor, st) {
        return Err(format!(
            "(hessian f s0 · ds)[{i}] = {:e} but snd (jvp (grad f) s0 ds)[{i}] = {:e}\n  ds = {dsrc}\n  hessian = {h:?}",
            hds[i], fwd[i]
        ));
    }
    for i in 0..n {
        for j in 0..i {
            if !agree(h[i][j], h[j][i], 1.0, st) {
                return Err(format!("hessian f s0 is not symmetric: {h:?}"));
            }
        }
    }
    if let Err(report) = fd_check(l, "grad f", &[dsr], std::slice::from_ref(&hds), &s0, st) {
        return Err(format!(
            "hessian f s0 · ds = {hds:?} disagrees with finite differences of grad f along ds = {dsrc}:\n{}",
            report.join("\n")
        ));
    }
    Ok(())
}

/// For `g : Vec Real -> Vec Real`: `jacobian g s0` against the `jvp` and
/// `vjp` results already computed (`J ds` and `Jᵀ dt`).
fn check_jacobian(
    l: &mut Loaded,
    ds: &Val,
    dt: &Val,
    jds: &Val,
    ct: &Val,
    st: &mut Stats,
) -> Result<(), String> {
    let src = l.prog.s0.source();
    let (n, m) = (ds.reals().len(), dt.reals().len());
    let j = matrix(
        &l.eval(&format!("jacobian g {src}"))?,
        m,
        n,
        "jacobian g s0",
    )?;
    let (jd, terms) = mat_vec(&j, &ds.reals());
    if let Some(i) = agree_vec(&jd, &jds.reals(), &terms, norm(&ds.reals()), st) {
        return Err(format!(
            "(jacobian g s0 · ds)[{i}] = {:e} but jvp gives {:e}\n  ds = {}\n  jacobian = {j:?}",
            jd[i],
            jds.reals()[i],
            ds.source()
        ));
    }
    let jt: Vec<Vec<f64>> = (0..n).map(|c| j.iter().map(|r| r[c]).collect()).collect();
    let (jtd, terms) = mat_vec(&jt, &dt.reals());
    if let Some(i) = agree_vec(&jtd, &ct.reals(), &terms, norm(&dt.reals()), st) {
        return Err(format!(
            "(jacobian g s0ᵀ · dt)[{i}] = {:e} but the vjp pullback gives {:e}\n  dt = {}\n  jacobian = {j:?}",
            jtd[i],
            ct.reals()[i],
            dt.source()
        ));
    }
    Ok(())
}

fn describe(p: &Program, seed: u64) -> String {
    format!(
        "case seed {seed} (replay: NABLA_AD_PROGRAM={seed})\ns0 = {}\n--- program ---\n{}---------------",
        p.s0.source(),
        p.source
    )
}

/// Runs one check on one case seed.
fn run_case(seed: u64, nested_ad: bool, check: Check, st: &mut Stats) -> Result<(), String> {
    let prog = generate(seed, options(nested_ad));
    let text = describe(&prog, seed);
    st.add_program(&prog);
    let mut l = Loaded::new(prog).map_err(|e| format!("{e}\n{text}"))?;
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&mut l, &mut rng, st)));
    match r {
        Ok(r) => r.map_err(|e| format!("{e}\n{text}")),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}\n{text}"))
        }
    }
}

/// Runs `check` over the configured cases, on a thread with a big stack.
fn run_property(name: &'static str, salt: u64, check: Check, needs_ad: bool) {
    let ad = ad_available();
    assert!(
        ad || !needs_ad,
        "{name}: the differentiation operators are not available"
    );
    let out = run_with_stack(move || {
        let start = Instant::now();
        if let Some(seed) = env_u64("NABLA_AD_PROGRAM") {
            let mut st = Stats::default();
            println!("{}", describe(&generate(seed, options(ad)), seed));
            return run_case(seed, ad, check, &mut st).map(|()| format!("{name}: {st:?}"));
        }
        let st = RefCell::new(Stats::default());
        let mut runner = TestRunner::new(config(salt));
        let r = runner.run(&any::<u64>(), |seed| {
            run_case(seed, ad, check, &mut st.borrow_mut()).map_err(TestCaseError::fail)
        });
        let st = st.into_inner();
        let nonzero = if st.grad_components > 0 {
            format!(
                ", {} of {} gradient components non-zero, {} programs with a non-zero gradient",
                st.grad_nonzero, st.grad_components, st.grad_programs_nonzero
            )
        } else {
            String::new()
        };
        let summary = format!(
            "{name}: {} programs ({} with nested AD calls, {:.1} AD calls and {:.1} generated nodes per program on average; {} with shadowing, {:.1} shadowing binders and {:.1} names reused from sibling scopes per program), {} comparisons, max FD error {:.2e} (plain central difference: {:.2e}; {} directions passed only with h/10), max forward/reverse error {:.2e}{nonzero}, {:.1} s",
            st.programs,
            st.with_nested_ad,
            st.ad_calls as f64 / f64::from(st.programs.max(1)),
            st.nodes as f64 / f64::from(st.programs.max(1)),
            st.with_shadowing,
            st.shadows as f64 / f64::from(st.programs.max(1)),
            st.reuses as f64 / f64::from(st.programs.max(1)),
            st.comparisons,
            st.max_fd_err,
            st.max_fd_plain_err,
            st.fd_retried,
            st.max_fr_err,
            start.elapsed().as_secs_f64()
        );
        match r {
            Ok(()) => Ok(summary),
            Err(TestError::Fail(reason, _)) => Err(format!("{reason}\n({summary})")),
            Err(e) => Err(format!("{e}\n({summary})")),
        }
    })
    .expect("the test thread panicked");
    match out {
        Ok(summary) => println!("{summary}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn generated_programs_run() {
    run_property("generated_programs_run", 0, check_runs, false);
}

#[test]
fn grad_agrees_with_finite_differences() {
    run_property("grad_agrees_with_finite_differences", 1, check_grad, true);
}

#[test]
fn forward_and_reverse_agree() {
    run_property("forward_and_reverse_agree", 2, check_fwd_rev, true);
}

/// The generated programs use `erf` and the standard library's vector
/// functions (so the properties above cover them).
#[test]
fn generated_programs_use_erf_and_the_library() {
    let sources: Vec<String> = (0..400)
        .map(|seed| generate(seed, OPTIONS).source)
        .collect();
    for f in [
        "(erf ",
        "(reverse ",
        "(sort ",
        "(slice ",
        "(append ",
        "(maximum ",
        "(minimum ",
    ] {
        assert!(sources.iter().any(|s| s.contains(f)), "no program uses {f}");
    }
}

/// The generator is a function of the seed.
#[test]
fn generation_is_deterministic() {
    for seed in 0..20 {
        assert_eq!(
            generate(seed, OPTIONS).source,
            generate(seed, OPTIONS).source
        );
    }
    let mut r = Rng::new(1);
    let v = sample(&mut r, &Ty::Tuple(vec![Ty::Int, Ty::Vec(2)]));
    assert!(has_type(&v, &Ty::Tuple(vec![Ty::Int, Ty::Vec(2)])));
}
