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
//! a failure) and runs the checks on it alone. Run with `--nocapture` to
//! see the statistics of a run.

#[path = "ad_random/program.rs"]
mod program;
#[path = "ad_random/interval.rs"]
mod interval;
#[path = "ad_random/value.rs"]
mod value;

use program::{Options, Program, Rng, Ty, generate, sample};
use nabla_lang::driver::Session;
use nabla_lang::stack::run_with_stack;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestError, TestRunner};
use std::cell::RefCell;
use std::time::Instant;
use value::{Val, dot, parse};

/// Programs per test in a plain `cargo test` run.
const DEFAULT_CASES: u32 = 150;
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
    budget: 24,
};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn config() -> Config {
    Config {
        cases: env_u64("NABLA_AD_CASES").map_or(DEFAULT_CASES, |n| n as u32),
        rng_seed: RngSeed::Fixed(env_u64("NABLA_AD_SEED").unwrap_or(DEFAULT_SEED)),
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
    s.eval_expr("<probe>", "diff (fun t -> t * t) 3.0").as_deref() == Ok("6.0")
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
            Ok(text) => parse(&text).map_err(|e| format!("`{expr}` printed something unreadable: {e}")),
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
        let calls: Vec<String> = points.iter().map(|p| format!("{fun} {}", p.source())).collect();
        match self.eval(&format!("({})", calls.join(", ")))? {
            Val::Tuple(vs) if vs.len() == points.len() => Ok(vs),
            v => Err(format!("batch of {} calls gave {v:?}", points.len())),
        }
    }
}

/// `s0 ± h·e_i` for each Real leaf `i`, and the actual steps.
fn fd_points(s0: &Val) -> (Vec<Val>, Vec<f64>) {
    let xs = s0.reals();
    let mut pts = Vec::new();
    let mut steps = Vec::new();
    for i in 0..xs.len() {
        let (mut p, mut m) = (xs.clone(), xs.clone());
        p[i] += H;
        m[i] -= H;
        steps.push(p[i] - m[i]);
        pts.push(s0.with_reals(&p));
        pts.push(s0.with_reals(&m));
    }
    (pts, steps)
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
        (Val::Vec(vs), Ty::Vec(n)) => vs.len() == *n && vs.iter().all(|v| matches!(v, Val::Real(_))),
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
    /// Scalar comparisons made.
    comparisons: u64,
    /// Largest observed `|ad - fd| / (1 + |fd|)`.
    max_fd_err: f64,
    /// Largest observed forward/reverse relative discrepancy.
    max_fr_err: f64,
}

impl Stats {
    fn add_program(&mut self, p: &Program) {
        self.programs += 1;
        self.nodes += u64::from(p.nodes);
        self.ad_calls += p.ad_calls as u64;
        self.with_nested_ad += u32::from(p.ad_calls > 0);
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
        return Err(format!("g s0 = {gx:?}, expected a finite {:?}", l.prog.t_ty));
    }
    let (pts, _) = fd_points(&s0);
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
        return Err(format!("grad f s0 = {} does not have the shape of s0", grad.source()));
    }
    let (pts, steps) = fd_points(&s0);
    let vals = l.eval_many("f", &pts)?;
    let ad = grad.reals();
    let mut report = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let fd = (real_of(&vals[2 * i])? - real_of(&vals[2 * i + 1])?) / step;
        let err = (ad[i] - fd).abs() / (1.0 + fd.abs());
        st.max_fd_err = st.max_fd_err.max(err);
        st.comparisons += 1;
        if !(err <= FD_TOL) {
            report.push(format!(
                "  component {i}: grad = {:e}, central difference = {fd:e} (h = {H:e}), error {err:.2e} > {FD_TOL:e}",
                ad[i]
            ));
        }
    }
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
                && vs[1].reals().iter().zip(&ad).all(|(a, b)| close(*a, *b, SAME_TOL));
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

/// Checks `a == b` relative to `scale` (the sum of the absolute terms).
fn agree(a: f64, b: f64, scale: f64, st: &mut Stats) -> bool {
    st.comparisons += 1;
    let scale = scale.max(a.abs()).max(b.abs());
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
    if !close(real_of(&y)?, fx, SAME_TOL) || !agree(jf, gd, gscale, st) {
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
    let (y2, _) = pair(l.eval(&format!("vjp g {src}"))?, "vjp g")?;
    let same_value = |a: &Val| a.reals().iter().zip(t0.reals()).all(|(x, y)| close(*x, y, SAME_TOL));
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
    if !agree(lhs, rhs, s1.max(s2), st) {
        return Err(format!(
            "forward and reverse mode disagree for g:\n  ds = {dsrc}\n  dt = {}\n  J ds  = {} (from jvp)\n  Jᵀ dt = {} (from vjp)\n  dt · (J ds) = {lhs:e}\n  (Jᵀ dt) · ds = {rhs:e}\n  relative difference {:.2e} > {FR_TOL:e}",
            dt.source(),
            jds.source(),
            ct.source(),
            (lhs - rhs).abs() / s1.max(s2).max(lhs.abs()).max(rhs.abs())
        ));
    }

    // J ds against a central difference of g along ds.
    let x0 = s0.reals();
    let dsr = ds.reals();
    let p: Vec<f64> = x0.iter().zip(&dsr).map(|(x, d)| x + H * d).collect();
    let q: Vec<f64> = x0.iter().zip(&dsr).map(|(x, d)| x - H * d).collect();
    let vals = l.eval_many("g", &[s0.with_reals(&p), s0.with_reals(&q)])?;
    if !t0.same_shape(&vals[0]) || !t0.same_shape(&vals[1]) {
        return Err(format!(
            "g changes shape near s0: {} / {} / {}",
            vals[0].source(),
            t0.source(),
            vals[1].source()
        ));
    }
    let mut report = Vec::new();
    for (k, ((a, b), j)) in vals[0]
        .reals()
        .iter()
        .zip(vals[1].reals())
        .zip(jds.reals())
        .enumerate()
    {
        let fd = (a - b) / (2.0 * H);
        let err = (j - fd).abs() / (1.0 + fd.abs());
        st.max_fd_err = st.max_fd_err.max(err);
        st.comparisons += 1;
        if !(err <= FD_TOL) {
            report.push(format!(
                "  output real {k}: jvp = {j:e}, central difference = {fd:e}, error {err:.2e}"
            ));
        }
    }
    if !report.is_empty() {
        return Err(format!(
            "jvp g s0 ds = {} disagrees with finite differences along ds = {dsrc}:\n{}",
            jds.source(),
            report.join("\n")
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
    let prog = generate(seed, Options { nested_ad, ..OPTIONS });
    let text = describe(&prog, seed);
    st.add_program(&prog);
    let mut l = Loaded::new(prog).map_err(|e| format!("{e}\n{text}"))?;
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
    check(&mut l, &mut rng, st).map_err(|e| format!("{e}\n{text}"))
}

/// Runs `check` over the configured cases, on a thread with a big stack.
fn run_property(name: &'static str, check: Check, needs_ad: bool) {
    let ad = ad_available();
    assert!(
        ad || !needs_ad,
        "{name}: the differentiation operators are not available"
    );
    let out = run_with_stack(move || {
        let start = Instant::now();
        if let Some(seed) = env_u64("NABLA_AD_PROGRAM") {
            let mut st = Stats::default();
            println!("{}", describe(&generate(seed, Options { nested_ad: ad, ..OPTIONS }), seed));
            return run_case(seed, ad, check, &mut st).map(|()| format!("{name}: {st:?}"));
        }
        let st = RefCell::new(Stats::default());
        let mut runner = TestRunner::new(config());
        let r = runner.run(&any::<u64>(), |seed| {
            run_case(seed, ad, check, &mut st.borrow_mut()).map_err(TestCaseError::fail)
        });
        let st = st.into_inner();
        let summary = format!(
            "{name}: {} programs ({} with nested AD calls, {:.1} AD calls and {:.1} generated nodes per program on average), {} comparisons, max FD error {:.2e}, max forward/reverse error {:.2e}, {:.1} s",
            st.programs,
            st.with_nested_ad,
            st.ad_calls as f64 / f64::from(st.programs.max(1)),
            st.nodes as f64 / f64::from(st.programs.max(1)),
            st.comparisons,
            st.max_fd_err,
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
    run_property("generated_programs_run", check_runs, false);
}

#[test]
fn grad_agrees_with_finite_differences() {
    run_property("grad_agrees_with_finite_differences", check_grad, true);
}

#[test]
fn forward_and_reverse_agree() {
    run_property("forward_and_reverse_agree", check_fwd_rev, true);
}

/// The generator is a function of the seed.
#[test]
fn generation_is_deterministic() {
    for seed in 0..20 {
        assert_eq!(generate(seed, OPTIONS).source, generate(seed, OPTIONS).source);
    }
    let mut r = Rng::new(1);
    let v = sample(&mut r, &Ty::Tuple(vec![Ty::Int, Ty::Vec(2)]));
    assert!(has_type(&v, &Ty::Tuple(vec![Ty::Int, Ty::Vec(2)])));
}
