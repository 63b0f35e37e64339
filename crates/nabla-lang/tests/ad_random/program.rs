//! A generator of random well-typed nabla programs for the AD property test.
//!
//! A program is two top-level functions of the same input type `S`:
//!
//! ```text
//! def f (s : S) : Real = ...        # checked with grad (against finite differences)
//! def g (s : S) : T = ...           # checked with jvp / vjp (forward against reverse)
//! ```
//!
//! together with a sample point `s0 : S`. Bodies mix lambdas (applied at
//! once, let-bound, curried with partial application, passed to
//! higher-order functions, closures over outer variables), `let` and tuple
//! patterns, `fst`/`snd`, `inl`/`inr` with `match`, `if` on comparisons of
//! reals and of ints (`&&`, `||`, `not`), vectors (`build`, `map`, `sum`,
//! `fold`, `zip`, literals, constant and loop indices), `let rec`
//! (tail-recursive iteration and non-tail recursion), the smooth primitives
//! and nested differentiation operators (`diff`, `grad`, `value_and_grad`,
//! `jvp`, `vjp`, `jacobian`, `hessian`) whose inner functions always use
//! variables of the enclosing scope, and custom derivative rules
//! (`custom_vjp (vjp g)`, `custom_jvp g (jvp g)`: `g` itself, closed).
//!
//! Every Real expression carries an interval valid over a small box around
//! the sample point (see `interval.rs`); it keeps values bounded and every
//! real comparison constant over the box, so `f` is smooth where the finite
//! differences look.

use super::interval::Iv;
use super::value::Val;

/// Half-width of the box around each input Real over which the intervals
/// hold. The finite-difference steps (1e-5) stay well inside it.
pub(crate) const BOX_RADIUS: f64 = 1e-4;

/// Deepest nesting of differentiation operators inside a generated function
/// (the test then applies one more operator from outside).
const MAX_AD_LEVEL: u32 = 2;

/// SplitMix64: small, seedable, good enough for generating programs.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `[lo, hi]`.
    pub(crate) fn range(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }

    pub(crate) fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.range(0.0, 1.0) < p
    }

    pub(crate) fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    /// Index into `weights`, chosen with probability proportional to weight.
    pub(crate) fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut r = self.below(total as usize) as u32;
        for (i, w) in weights.iter().enumerate() {
            if r < *w {
                return i;
            }
            r -= w;
        }
        unreachable!()
    }
}

/// A first-order type (vectors are vectors of Reals of a fixed length).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ty {
    Real,
    Int,
    Tuple(Vec<Ty>),
    Sum(Box<Ty>, Box<Ty>),
    Vec(usize),
}

impl Ty {
    /// The type in surface syntax.
    pub(crate) fn source(&self) -> String {
        match self {
            Ty::Real => "Real".into(),
            Ty::Int => "Int".into(),
            Ty::Tuple(ts) => format!(
                "({})",
                ts.iter().map(Ty::source).collect::<Vec<_>>().join(", ")
            ),
            Ty::Sum(a, b) => format!("({} + {})", a.source(), b.source()),
            Ty::Vec(_) => "Vec Real".into(),
        }
    }

    fn pair() -> Ty {
        Ty::Tuple(vec![Ty::Real, Ty::Real])
    }
}

/// Abstract value: what the generator knows about a value over the box.
#[derive(Clone, Debug)]
pub(crate) enum Av {
    Real(Iv),
    /// An Int in `[lo, hi]`.
    Int(i64, i64),
    Tuple(Vec<Av>),
    /// `Some(true)`: certainly `inl`; `Some(false)`: certainly `inr`.
    Sum(Option<bool>, Box<Av>, Box<Av>),
    Vec(Vec<Iv>),
}

impl Av {
    fn hull(&self, o: &Av) -> Av {
        match (self, o) {
            (Av::Real(a), Av::Real(b)) => Av::Real(a.hull(*b)),
            (Av::Int(a, b), Av::Int(c, d)) => Av::Int(*a.min(c), *b.max(d)),
            (Av::Tuple(a), Av::Tuple(b)) => {
                Av::Tuple(a.iter().zip(b).map(|(x, y)| x.hull(y)).collect())
            }
            (Av::Sum(s, a, b), Av::Sum(t, c, d)) => Av::Sum(
                if s == t { *s } else { None },
                Box::new(a.hull(c)),
                Box::new(b.hull(d)),
            ),
            (Av::Vec(a), Av::Vec(b)) => Av::Vec(a.iter().zip(b).map(|(x, y)| x.hull(*y)).collect()),
            _ => panic!("hull of different shapes: {self:?} {o:?}"),
        }
    }

    /// A stand-in for a value that is never computed (the other side of a sum).
    fn default_of(ty: &Ty) -> Av {
        match ty {
            Ty::Real => Av::Real(Iv::new(-1.0, 1.0)),
            Ty::Int => Av::Int(0, 3),
            Ty::Tuple(ts) => Av::Tuple(ts.iter().map(Av::default_of).collect()),
            Ty::Sum(a, b) => Av::Sum(
                None,
                Box::new(Av::default_of(a)),
                Box::new(Av::default_of(b)),
            ),
            Ty::Vec(n) => Av::Vec(vec![Iv::new(-1.0, 1.0); *n]),
        }
    }

    /// The box around a sample input.
    fn around(v: &Val, ty: &Ty) -> Av {
        match (v, ty) {
            (Val::Real(x), Ty::Real) => Av::Real(Iv::new(x - BOX_RADIUS, x + BOX_RADIUS)),
            (Val::Int(n), Ty::Int) => Av::Int(*n, *n),
            (Val::Tuple(vs), Ty::Tuple(ts)) => {
                Av::Tuple(vs.iter().zip(ts).map(|(v, t)| Av::around(v, t)).collect())
            }
            (Val::Inl(v), Ty::Sum(a, b)) => Av::Sum(
                Some(true),
                Box::new(Av::around(v, a)),
                Box::new(Av::default_of(b)),
            ),
            (Val::Inr(v), Ty::Sum(a, b)) => Av::Sum(
                Some(false),
                Box::new(Av::default_of(a)),
                Box::new(Av::around(v, b)),
            ),
            (Val::Vec(vs), Ty::Vec(_)) => Av::Vec(
                vs.iter()
                    .map(|v| match v {
                        Val::Real(x) => Iv::new(x - BOX_RADIUS, x + BOX_RADIUS),
                        _ => panic!("vector of non-reals"),
                    })
                    .collect(),
            ),
            _ => panic!("value {v:?} does not have type {ty:?}"),
        }
    }
}

/// A random value of a type (sample points, tangents).
pub(crate) fn sample(rng: &mut Rng, ty: &Ty) -> Val {
    match ty {
        // Four decimals keep the printed programs readable.
        Ty::Real => Val::Real((rng.range(-1.5, 1.5) * 1e4).round() / 1e4),
        Ty::Int => Val::Int(rng.int(1, 4)),
        Ty::Tuple(ts) => Val::Tuple(ts.iter().map(|t| sample(rng, t)).collect()),
        Ty::Sum(a, b) => {
            if rng.chance(0.5) {
                Val::Inl(Box::new(sample(rng, a)))
            } else {
                Val::Inr(Box::new(sample(rng, b)))
            }
        }
        Ty::Vec(n) => Val::Vec((0..*n).map(|_| sample(rng, &Ty::Real)).collect()),
    }
}

#[derive(Clone, Debug)]
enum Kind {
    Val(Av),
    /// A function of Real parameters (curried, or one tuple when `tupled`)
    /// returning a Real; each argument must lie in its parameter's interval.
    Fun {
        params: Vec<Iv>,
        tupled: bool,
        result: Iv,
    },
}

#[derive(Clone, Debug)]
struct Var {
    name: String,
    kind: Kind,
    /// Identifies this binding (several bindings may share a name).
    id: u64,
}

/// The variables in scope, innermost last. A binding hides every earlier
/// one of the same name (shadowing), so each name occurs at most once.
#[derive(Clone, Debug, Default)]
struct Env(Vec<Var>);

impl Env {
    fn with(&self, name: &str, kind: Kind) -> Env {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut e = self.clone();
        // The shadowed binding is out of reach, and so is a partial
        // application of it (`(top_it4 2)`).
        let applied = format!("({name} ");
        e.0.retain(|v| v.name != name && !v.name.starts_with(&applied));
        e.0.push(Var {
            name: name.into(),
            kind,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        });
        e
    }

    fn with_val(&self, name: &str, av: Av) -> Env {
        self.with(name, Kind::Val(av))
    }

    fn names(&self) -> Vec<String> {
        self.0.iter().map(|v| v.name.clone()).collect()
    }

    fn int_vars(&self) -> Vec<(String, i64, i64)> {
        self.0
            .iter()
            .filter_map(|v| match v.kind {
                Kind::Val(Av::Int(lo, hi)) => Some((v.name.clone(), lo, hi)),
                _ => None,
            })
            .collect()
    }

    fn vec_vars(&self, n: usize) -> Vec<(String, Vec<Iv>)> {
        self.0
            .iter()
            .filter_map(|v| match &v.kind {
                Kind::Val(Av::Vec(ivs)) if ivs.len() == n => Some((v.name.clone(), ivs.clone())),
                _ => None,
            })
            .collect()
    }

    fn vec_lens(&self) -> Vec<usize> {
        self.0
            .iter()
            .filter_map(|v| match &v.kind {
                Kind::Val(Av::Vec(ivs)) => Some(ivs.len()),
                _ => None,
            })
            .collect()
    }

    fn funs(&self) -> Vec<(String, Vec<Iv>, bool, Iv)> {
        self.0
            .iter()
            .filter_map(|v| match &v.kind {
                Kind::Fun {
                    params,
                    tupled,
                    result,
                } => Some((v.name.clone(), params.clone(), *tupled, *result)),
                _ => None,
            })
            .collect()
    }
}

/// A generated Real expression and its interval.
#[derive(Clone, Debug)]
struct E {
    code: String,
    iv: Iv,
}

fn e(code: impl Into<String>, iv: Iv) -> E {
    E {
        code: code.into(),
        iv,
    }
}

/// A Real literal rounded to `digits` decimals, parenthesised if negative.
/// Returns the text and the f64 it denotes.
fn lit(x: f64, digits: usize) -> (String, f64) {
    let mut t = format!("{x:.digits$}");
    if t.contains('.') {
        while t.ends_with('0') && !t.ends_with(".0") {
            t.pop();
        }
    }
    if t.starts_with("-") && t[1..].chars().all(|c| c == '0' || c == '.') {
        t = t[1..].to_string();
    }
    let v: f64 = t.parse().expect("a number");
    if v < 0.0 {
        (format!("({t})"), v)
    } else {
        (t, v)
    }
}

/// Generated vectors are written with a prefix operator or parenthesised, so
/// indexing needs parentheses only around literals.
fn index(v: &str, k: &str) -> String {
    if v.starts_with('[') {
        format!("({v})[{k}]")
    } else {
        format!("{v}[{k}]")
    }
}

/// One generated test program.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    /// The source: `def f (s : S) : Real` and `def g (s : S) : T`.
    pub(crate) source: String,
    pub(crate) s_ty: Ty,
    pub(crate) t_ty: Ty,
    /// The sample point.
    pub(crate) s0: Val,
    /// Interval of `f` over the box around `s0`.
    pub(crate) f_iv: Iv,
    /// Number of generated nodes (a size measure).
    pub(crate) nodes: u32,
    /// Number of differentiation operators in the source.
    pub(crate) ad_calls: usize,
    /// Binders that shadow a name in scope.
    pub(crate) shadows: u32,
    /// Binders that reuse a name bound elsewhere (not in scope).
    pub(crate) reuses: u32,
}

/// Options for [`generate`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    /// Generate nested differentiation operators inside `f` and `g`.
    pub(crate) nested_ad: bool,
    /// Maximum expression depth.
    pub(crate) depth: u32,
    /// Maximum number of composite nodes per function body.
    pub(crate) budget: i32,
    /// Probability that a binder reuses a name instead of taking a fresh
    /// one: a name in scope (shadowing it: a local, a parameter of a
    /// helper, the input `s`, a top-level definition) or one bound earlier
    /// elsewhere (sibling scopes with the same name).
    pub(crate) shadowing: f64,
    /// The constructs the programs may use.
    pub(crate) fragment: Fragment,
    /// Probability (per composite node) of a structural zero: a product
    /// `0 · ∞` of derivatives (`sqrt (e * 0.0)`, `1.0 / exp (e * 0.0 +
    /// 1000.0)`), where the conventions of the modes may differ. Makes
    /// derivatives non-finite: only for the translation comparison.
    pub(crate) structural_zeros: f64,
}

/// Which constructs a program may contain: the translations of `nabla ad`
/// each take a part of the language.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Fragment {
    /// Lambdas, local functions, `let rec`, functions as values.
    pub(crate) lambdas: bool,
    /// `inl`/`inr` and `match` (also in the input and output types).
    pub(crate) sums: bool,
    /// Vectors (also in the input and output types).
    pub(crate) vectors: bool,
    /// `build`, `map`, `fold`, `zip` and `sum` (CPS has no rule for them).
    pub(crate) vector_loops: bool,
    /// Vectors in the result type of `g` (CPS needs `sum` to pair them with
    /// a cotangent).
    pub(crate) vector_results: bool,
    /// Top-level helper definitions of two (curried) parameters.
    pub(crate) curried_helpers: bool,
}

impl Fragment {
    /// The whole language the generator knows.
    pub(crate) const ALL: Fragment = Fragment {
        lambdas: true,
        sums: true,
        vectors: true,
        vector_loops: true,
        vector_results: true,
        curried_helpers: true,
    };
}

/// Generates the program for one seed.
pub(crate) fn generate(seed: u64, opts: Options) -> Program {
    let mut g = Gen {
        rng: Rng::new(seed),
        next: 0,
        budget: 0,
        used: Vec::new(),
        ad: opts.nested_ad,
        ad_level: 0,
        nodes: 0,
        dep: Default::default(),
        top_level: Default::default(),
        fragment: opts.fragment,
        shadowing: opts.shadowing,
        structural_zeros: opts.structural_zeros,
        // The input and the top-level definitions are names too.
        pool: vec!["s".into(), "f".into(), "g".into()],
        shadows: 0,
        reuses: 0,
    };
    let fits = |t: &Ty| fits_fragment(t, &opts.fragment);
    let inputs: Vec<Ty> = input_types().into_iter().filter(fits).collect();
    let vector_results = opts.fragment.vector_results;
    let outputs: Vec<Ty> = output_types()
        .into_iter()
        .filter(|t| fits(t) && (vector_results || !has_vector(t)))
        .collect();
    let s_ty = g.rng.pick(&inputs).clone();
    let t_ty = g.rng.pick(&outputs).clone();
    let s0 = sample(&mut g.rng, &s_ty);
    let av = Av::around(&s0, &s_ty);

    let budget = g.rng.int(6, i64::from(opts.budget)) as i32;
    let (helpers, globals) = g.helpers();
    g.budget = budget;
    let (f_body, f_iv) = g.bind_input(&globals, &s_ty, &av, &mut |g, env| {
        // Never a bare leaf at the top, and never without the input.
        g.nodes += 1;
        let mark = g.used.len();
        let mut b = g.composite(env, opts.depth);
        if !g.dep_since(mark) {
            let ls: Vec<(E, String)> = g
                .leaves(env)
                .into_iter()
                .filter(|(_, n)| g.dep.contains(n))
                .collect();
            if !ls.is_empty() {
                let (x, n) = ls[g.rng.below(ls.len())].clone();
                g.use_var(&n);
                b = g.combine(b, x);
            }
        }
        let iv = b.iv;
        (b.code, Av::Real(iv))
    });
    let f_iv = match f_iv {
        Av::Real(iv) => iv,
        _ => unreachable!(),
    };
    g.budget = budget;
    let t = t_ty.clone();
    let (g_body, _) = g.bind_input(&globals, &s_ty, &av, &mut |g, env| {
        g.of_type(env, &t, opts.depth)
    });
    let st = s_ty.source();
    let source = format!(
        "{helpers}def f (s : {st}) : Real =\n  {f_body}\n\ndef g (s : {st}) : {} =\n  {g_body}\n",
        t_ty.source()
    );
    let ad_calls = [
        "diff ",
        "grad ",
        "jvp ",
        "vjp ",
        "jacobian ",
        "hessian ",
        "custom_jvp ",
        "custom_vjp ",
    ]
    .iter()
    .map(|op| source.matches(op).count())
    .sum();
    Program {
        source,
        s_ty,
        t_ty,
        s0,
        f_iv,
        nodes: g.nodes,
        ad_calls,
        shadows: g.shadows,
        reuses: g.reuses,
    }
}

fn has_vector(t: &Ty) -> bool {
    match t {
        Ty::Real | Ty::Int => false,
        Ty::Tuple(ts) => ts.iter().any(has_vector),
        Ty::Sum(a, b) => has_vector(a) || has_vector(b),
        Ty::Vec(_) => true,
    }
}

/// Whether values of type `t` belong to the fragment.
fn fits_fragment(t: &Ty, fr: &Fragment) -> bool {
    match t {
        Ty::Real | Ty::Int => true,
        Ty::Tuple(ts) => ts.iter().all(|t| fits_fragment(t, fr)),
        Ty::Sum(a, b) => fr.sums && fits_fragment(a, fr) && fits_fragment(b, fr),
        Ty::Vec(_) => fr.vectors,
    }
}

fn input_types() -> Vec<Ty> {
    vec![
        Ty::Real,
        Ty::pair(),
        Ty::Tuple(vec![Ty::Real, Ty::pair()]),
        Ty::Vec(3),
        Ty::Vec(2),
        Ty::Tuple(vec![Ty::Int, Ty::Real]),
        Ty::Tuple(vec![Ty::Real, Ty::Int, Ty::Vec(3)]),
        Ty::Tuple(vec![Ty::Vec(2), Ty::Real]),
        Ty::Sum(Box::new(Ty::Real), Box::new(Ty::pair())),
    ]
}

fn output_types() -> Vec<Ty> {
    vec![
        Ty::Real,
        Ty::pair(),
        Ty::Vec(3),
        Ty::Tuple(vec![Ty::Int, Ty::Real]),
        Ty::Sum(Box::new(Ty::Real), Box::new(Ty::pair())),
        Ty::Tuple(vec![Ty::Vec(2), Ty::pair()]),
    ]
}

struct Gen {
    rng: Rng,
    next: u32,
    /// Composite nodes left for the current body.
    budget: i32,
    /// Every variable referenced so far, in order (to see whether an inner
    /// function of a nested AD call captured an outer variable).
    used: Vec<String>,
    ad: bool,
    ad_level: u32,
    nodes: u32,
    /// Variables whose value (may) depend on the input of `f`/`g` (or on
    /// the parameters of a helper or of a differentiated function): leaves
    /// prefer them, so that fewer programs are constant.
    dep: std::collections::HashSet<String>,
    /// The bindings of the top-level helpers (closed: a custom rule's
    /// functions may use them).
    top_level: std::collections::HashSet<u64>,
    fragment: Fragment,
    shadowing: f64,
    structural_zeros: f64,
    /// Names binders took so far (for reuse in sibling scopes).
    pool: Vec<String>,
    shadows: u32,
    reuses: u32,
}

type BodyGen<'a> = dyn FnMut(&mut Gen, &Env) -> (String, Av) + 'a;

impl Gen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn use_var(&mut self, name: &str) {
        self.used.push(name.to_string());
    }

    /// A name for a binder whose whole scope is generated in an environment
    /// that contains the binding (so that reusing a name cannot capture a
    /// reference generated elsewhere and placed inside the scope): fresh, or
    /// with probability `shadowing` a name in scope in `env` (which the new
    /// binding shadows; preferably one the program already uses) or one
    /// bound earlier elsewhere. `taken`: the other names of the same pattern.
    fn binder(&mut self, prefix: &str, env: &Env, taken: &[String]) -> String {
        if self.shadowing > 0.0 && self.rng.chance(self.shadowing) {
            let free = |n: &String| !n.starts_with('(') && !taken.contains(n);
            let mut in_scope: Vec<String> = env.names().into_iter().filter(free).collect();
            if self.rng.chance(0.6) && in_scope.iter().any(|n| self.used.contains(n)) {
                in_scope.retain(|n| self.used.contains(n));
            }
            let elsewhere: Vec<String> = self
                .pool
                .iter()
                .filter(|n| free(n) && !in_scope.contains(n))
                .cloned()
                .collect();
            if !in_scope.is_empty() && (elsewhere.is_empty() || self.rng.chance(0.75)) {
                self.shadows += 1;
                return self.rng.pick(&in_scope).clone();
            }
            if !elsewhere.is_empty() {
                self.reuses += 1;
                return self.rng.pick(&elsewhere).clone();
            }
        }
        let name = self.fresh(prefix);
        self.pool.push(name.clone());
        name
    }

    /// [`Gen::binder`] for the `n` distinct names of one pattern.
    fn binders(&mut self, prefix: &str, env: &Env, n: usize) -> Vec<String> {
        let mut names = Vec::new();
        for _ in 0..n {
            let b = self.binder(prefix, env, &names);
            names.push(b);
        }
        names
    }

    // ----- top-level helpers and the input ----------------------------------

    /// Zero to two top-level helper functions of Reals (one may be
    /// recursive), in scope in `f` and `g` (and in later helpers) as
    /// functions whose arguments must lie in fixed intervals.
    fn helpers(&mut self) -> (String, Env) {
        let mut globals = Env::default();
        let mut defs = String::new();
        for _ in 0..self.rng.below(3) {
            self.budget = 6;
            let a = *self.rng.pick(&[1.0, 2.0, 3.0]);
            let p = Iv { lo: -a, hi: a };
            if self.fragment.curried_helpers && self.rng.chance(0.35) {
                // `def top_it k y = if k == 0 then y else top_it (k - 1) step`
                let name = self.fresh("top_it");
                let k = self.binder("k", &globals, &[]);
                let y = self.binder("y", &globals, std::slice::from_ref(&k));
                self.dep.insert(y.clone());
                let env = globals
                    .with_val(&y, Av::Real(p))
                    .with_val(&k, Av::Int(1, 4));
                let step = self.real(&env, 3);
                let step = self.into(step, p);
                defs.push_str(&format!(
                    "def {name} ({k} : Int) ({y} : Real) : Real =\n  if {k} == 0 then {y} else {name} ({k} - 1) {}\n\n",
                    step.code
                ));
                let kv = self.rng.int(0, 4);
                globals = globals.with(
                    &format!("({name} {kv})"),
                    Kind::Fun {
                        params: vec![p],
                        tupled: false,
                        result: p,
                    },
                );
            } else {
                let name = self.fresh("top_h");
                let n = if !self.fragment.curried_helpers || self.rng.chance(0.5) {
                    1
                } else {
                    2
                };
                let ys = self.binders("y", &globals, n);
                let mut env = globals.clone();
                for y in &ys {
                    self.dep.insert(y.clone());
                    env = env.with_val(y, Av::Real(p));
                }
                let body = self.real_new(&globals, &env, 3);
                let params: String = ys.iter().map(|y| format!("({y} : Real) ")).collect();
                defs.push_str(&format!("def {name} {params}: Real =\n  {}\n\n", body.code));
                globals = globals.with(
                    &name,
                    Kind::Fun {
                        params: vec![p; n],
                        tupled: false,
                        result: body.iv,
                    },
                );
            }
        }
        self.top_level = globals.0.iter().map(|v| v.id).collect();
        (defs, globals)
    }

    /// `let`-binds (or `match`es) the parameter `s` and generates the body.
    fn bind_input(
        &mut self,
        globals: &Env,
        ty: &Ty,
        av: &Av,
        body: &mut BodyGen<'_>,
    ) -> (String, Av) {
        let env = globals.clone();
        match (ty, av) {
            (Ty::Sum(l, r), Av::Sum(side, la, ra)) => {
                let (pl, envl) = self.pattern(l, la, &env);
                let (pr, envr) = self.pattern(r, ra, &env);
                let budget = self.budget;
                let (bl, al) = body(self, &envl);
                self.budget = budget;
                let (br, ar) = body(self, &envr);
                let av = match side {
                    Some(true) => al,
                    Some(false) => ar,
                    None => al.hull(&ar),
                };
                (
                    format!("match s with\n  | inl {pl} -> {bl}\n  | inr {pr} -> {br}"),
                    av,
                )
            }
            (Ty::Tuple(_), _) if *ty != Ty::pair() || self.rng.chance(0.7) => {
                let (p, env) = self.pattern(ty, av, &env);
                let (b, a) = body(self, &env);
                (format!("let {p} = s in\n  {b}"), a)
            }
            _ => {
                self.dep.insert("s".into());
                let env = env.with_val("s", av.clone());
                body(self, &env)
            }
        }
    }

    /// A pattern binding a value of type `ty`: names for leaves, tuple
    /// patterns for tuples (a pair of Reals is sometimes kept whole).
    fn pattern(&mut self, ty: &Ty, av: &Av, env: &Env) -> (String, Env) {
        self.pattern_in(ty, av, env, &mut Vec::new())
    }

    /// [`Gen::pattern`]; `taken`: the names the pattern binds so far.
    fn pattern_in(
        &mut self,
        ty: &Ty,
        av: &Av,
        env: &Env,
        taken: &mut Vec<String>,
    ) -> (String, Env) {
        match (ty, av) {
            (Ty::Tuple(ts), Av::Tuple(avs)) if !(ts.len() == 2 && self.rng.chance(0.3)) => {
                let mut env = env.clone();
                let mut parts = Vec::new();
                for (t, a) in ts.iter().zip(avs) {
                    let (p, e2) = self.pattern_in(t, a, &env, taken);
                    parts.push(p);
                    env = e2;
                }
                (format!("({})", parts.join(", ")), env)
            }
            _ => {
                let prefix = match ty {
                    Ty::Real => "x",
                    Ty::Int => "n",
                    Ty::Vec(_) => "v",
                    _ => "p",
                };
                let name = self.binder(prefix, env, taken);
                taken.push(name.clone());
                if *ty != Ty::Int {
                    self.dep.insert(name.clone());
                }
                let env = env.with_val(&name, av.clone());
                (name, env)
            }
        }
    }

    // ----- helpers on Real expressions --------------------------------------

    /// `k * tanh (e / k)`: smooth, in `(-k, k)`.
    fn squash(&mut self, x: E, k: f64) -> E {
        let (ks, kv) = lit(k, 1);
        let kiv = Iv::point(kv);
        e(
            format!("({ks} * tanh ({} / {ks}))", x.code),
            x.iv.div(kiv).tanh().mul(kiv),
        )
    }

    /// `x` itself if it lies in `[-k, k]`, otherwise squashed into it.
    fn bound(&mut self, x: E, k: f64) -> E {
        if x.iv.mag() <= k {
            x
        } else {
            self.squash(x, k)
        }
    }

    /// `x` itself if it lies in `p`, otherwise mapped smoothly into `p`.
    fn into(&mut self, x: E, p: Iv) -> E {
        if x.iv.within(p) {
            return x;
        }
        let (ms, mv) = lit((p.lo + p.hi) / 2.0, 6);
        let (rs, rv) = lit((p.hi - p.lo) / 2.0 * 0.99, 6);
        let (mi, ri) = (Iv::point(mv), Iv::point(rv));
        let iv = mi.add(ri.mul(x.iv.sub(mi).div(ri).tanh()));
        assert!(iv.within(p), "into: {iv:?} not within {p:?}");
        let code = if mv == 0.0 {
            format!("({rs} * tanh ({} / {rs}))", x.code)
        } else {
            format!("({ms} + {rs} * tanh (({} - {ms}) / {rs}))", x.code)
        };
        e(code, iv)
    }

    /// A positive expression built from `x` (for sqrt, log, `**`).
    fn positive(&mut self, x: E) -> E {
        if x.iv.lo > 0.05 && x.iv.hi < 50.0 {
            return x;
        }
        match self.rng.below(3) {
            0 => {
                let b = self.bound(x, 4.0);
                e(
                    format!("(1.0 + {} * {})", b.code, b.code),
                    Iv::point(1.0).add(b.iv.sq()),
                )
            }
            1 => e(
                format!("(1.5 + tanh {})", x.code),
                Iv::point(1.5).add(x.iv.tanh()),
            ),
            _ => {
                let b = self.bound(x, 2.0);
                e(format!("(exp {})", b.code), b.iv.exp())
            }
        }
    }

    /// An interval around `iv` with a random margin, rounded outwards to
    /// two decimals (parameter ranges of generated functions).
    fn widen(&mut self, iv: Iv) -> Iv {
        let m = if self.rng.chance(0.5) {
            self.rng.range(0.01, 0.05)
        } else {
            self.rng.range(0.1, 1.0)
        };
        Iv {
            lo: ((iv.lo - m) * 100.0).floor() / 100.0,
            hi: ((iv.hi + m) * 100.0).ceil() / 100.0,
        }
    }

    fn combine(&mut self, a: E, b: E) -> E {
        match self.rng.below(3) {
            0 => e(format!("({} + {})", a.code, b.code), a.iv.add(b.iv)),
            1 => e(format!("({} - {})", a.code, b.code), a.iv.sub(b.iv)),
            _ => e(format!("({} * {})", a.code, b.code), a.iv.mul(b.iv)),
        }
    }

    // ----- Real expressions -------------------------------------------------

    fn real(&mut self, env: &Env, d: u32) -> E {
        let x = if d == 0 || self.budget <= 0 || self.rng.chance(0.12) {
            self.leaf(env)
        } else {
            self.budget -= 1;
            self.nodes += 1;
            self.composite(env, d)
        };
        if !x.iv.is_finite() {
            // A value of unknown size (computed by a nested AD call): keep
            // it bounded, or a `cos` of it may oscillate faster than the
            // finite differences can resolve.
            self.squash(x, 20.0)
        } else if x.iv.mag() > 100.0 {
            self.squash(x, 10.0)
        } else {
            x
        }
    }

    /// Whether a variable of `dep` was used since `mark`.
    fn dep_since(&self, mark: usize) -> bool {
        self.used[mark..].iter().any(|n| self.dep.contains(n))
    }

    /// Records that `names` depend on the input if `dep`.
    fn set_dep(&mut self, names: &[&String], dep: bool) {
        if dep {
            for n in names {
                self.dep.insert((*n).clone());
            }
        }
    }

    /// A Real expression in `env2` (an extension of `env`) that uses one of
    /// the variables `env2` adds (in some branch at least): if the generated
    /// one does not, it is combined with a leaf of one of them. This keeps
    /// lambdas and `let`s from ignoring what they bind.
    fn real_new(&mut self, env: &Env, env2: &Env, d: u32) -> E {
        // By identity: a new binding may reuse a name of `env`.
        let old: Vec<u64> = env.0.iter().map(|v| v.id).collect();
        let new: Vec<String> = env2
            .0
            .iter()
            .filter(|v| !old.contains(&v.id))
            .map(|v| v.name.clone())
            .collect();
        let mark = self.used.len();
        let b = self.real(env2, d);
        if self.used[mark..].iter().any(|n| new.contains(n)) {
            return b;
        }
        let ls: Vec<(E, String)> = self
            .leaves(env2)
            .into_iter()
            .filter(|(_, n)| new.contains(n))
            .collect();
        if ls.is_empty() {
            return b;
        }
        let (x, n) = ls[self.rng.below(ls.len())].clone();
        self.use_var(&n);
        self.combine(b, x)
    }

    /// Every Real leaf available in `env` (no constants), with the name of
    /// the variable it reads.
    fn leaves(&self, env: &Env) -> Vec<(E, String)> {
        self.leaves_at(env)
            .into_iter()
            .map(|(x, n, _)| (x, n))
            .collect()
    }

    /// [`Gen::leaves`] with the position in `env` of each leaf's variable.
    fn leaves_at(&self, env: &Env) -> Vec<(E, String, usize)> {
        let mut out = Vec::new();
        let ints = env.int_vars();
        for (pos, v) in env.0.iter().enumerate() {
            let n = &v.name;
            let out_len = out.len();
            match &v.kind {
                Kind::Val(Av::Real(iv)) => out.push((e(n.clone(), *iv), n.clone(), 0)),
                Kind::Val(Av::Int(lo, hi)) => out.push((
                    e(format!("(real {n})"), Iv::new(*lo as f64, *hi as f64)),
                    n.clone(),
                    0,
                )),
                Kind::Val(Av::Tuple(cs)) if cs.len() == 2 => {
                    for (i, c) in cs.iter().enumerate() {
                        if let Av::Real(iv) = c {
                            let pr = if i == 0 { "fst" } else { "snd" };
                            out.push((e(format!("({pr} {n})"), *iv), n.clone(), 0));
                        }
                    }
                }
                Kind::Val(Av::Vec(ivs)) => {
                    for (k, iv) in ivs.iter().enumerate() {
                        out.push((e(format!("{n}[{k}]"), *iv), n.clone(), 0));
                    }
                    if self.fragment.vector_loops {
                        let s = ivs.iter().fold(Iv::point(0.0), |a, b| a.add(*b));
                        out.push((e(format!("(sum {n})"), s), n.clone(), 0));
                    }
                    for (i, lo, hi) in &ints {
                        if *lo >= 0 && (*hi as usize) < ivs.len() {
                            let h = ivs[*lo as usize..=*hi as usize]
                                .iter()
                                .fold(ivs[*lo as usize], |a, b| a.hull(*b));
                            out.push((e(format!("{n}[{i}]"), h), n.clone(), 0));
                        }
                    }
                }
                _ => {}
            }
            for leaf in &mut out[out_len..] {
                leaf.2 = pos;
            }
        }
        out
    }

    /// A constant, or a leaf of a variable in scope; half of the time one
    /// of the two innermost variables, so that functions use their
    /// parameters (a vector alone offers many leaves).
    fn leaf(&mut self, env: &Env) -> E {
        let mut ls = self.leaves_at(env);
        if ls.is_empty() || self.rng.chance(0.1) {
            let (t, v) = lit(self.rng.range(-2.0, 2.0), 2);
            return e(t, Iv::point(v));
        }
        if self.rng.chance(0.75) && ls.iter().any(|l| self.dep.contains(&l.1)) {
            ls.retain(|l| self.dep.contains(&l.1));
        }
        if self.rng.chance(0.5) {
            let mut pos: Vec<usize> = ls.iter().map(|l| l.2).collect();
            pos.dedup();
            let cut = pos[pos.len().saturating_sub(2)];
            ls.retain(|l| l.2 >= cut);
        }
        let (x, name, _) = ls[self.rng.below(ls.len())].clone();
        self.use_var(&name);
        x
    }

    fn composite(&mut self, env: &Env, d: u32) -> E {
        const ARITH: usize = 0;
        const DIV: usize = 1;
        const UNARY: usize = 2;
        const POSITIVE: usize = 3;
        const INT_POW: usize = 4;
        const ABS_MIN_MAX: usize = 5;
        const IF: usize = 6;
        const LET: usize = 7;
        const LET_TUPLE: usize = 8;
        const APP_LAMBDA: usize = 9;
        const LET_FUN: usize = 10;
        const HIGHER_ORDER: usize = 11;
        const FUN_APPLY: usize = 12;
        const VEC_REDUCE: usize = 13;
        const FOLD: usize = 14;
        const ZIP: usize = 15;
        const MATCH: usize = 16;
        const LET_REC: usize = 17;
        const INT_IF: usize = 18;
        const PROJ: usize = 19;
        const NESTED_AD: usize = 20;
        let has_fun = !env.funs().is_empty();
        let has_int = !env.int_vars().is_empty();
        let ad = self.ad && self.ad_level < MAX_AD_LEVEL;
        let fr = self.fragment;
        let on = |ok: bool, w: u32| if ok { w } else { 0 };
        let loops = fr.vectors && fr.vector_loops && fr.lambdas;
        let weights = [
            12,
            3,
            8,
            4,
            2,
            2,
            5,
            4,
            3,
            on(fr.lambdas, 3),
            on(fr.lambdas, 3),
            on(fr.lambdas, 2),
            on(has_fun, 4),
            on(fr.vectors, 5),
            on(loops, 2),
            on(loops, 1),
            on(fr.sums, 3),
            on(fr.lambdas, 2),
            on(has_int, 2),
            1,
            on(ad, 8),
        ];
        let d1 = d - 1;
        if self.structural_zeros > 0.0 && self.rng.chance(self.structural_zeros) {
            return self.structural_zero(env, d1);
        }
        match self.rng.weighted(&weights) {
            ARITH => {
                let a = self.real(env, d1);
                let b = self.real(env, d1);
                self.combine(a, b)
            }
            DIV => {
                let a = self.real(env, d1);
                let b = self.real(env, d1);
                let den = if b.iv.is_finite() && b.iv.away_from_zero(0.1) {
                    b
                } else {
                    let b = self.bound(b, 10.0);
                    e(
                        format!("(1.0 + {} * {})", b.code, b.code),
                        Iv::point(1.0).add(b.iv.sq()),
                    )
                };
                e(format!("({} / {})", a.code, den.code), a.iv.div(den.iv))
            }
            UNARY => {
                let a = self.real(env, d1);
                match self.rng.below(6) {
                    0 => e(format!("(sin {})", a.code), a.iv.sin()),
                    1 => e(format!("(cos {})", a.code), a.iv.cos()),
                    2 => e(format!("(tanh {})", a.code), a.iv.tanh()),
                    5 => e(format!("(erf {})", a.code), a.iv.erf()),
                    3 => {
                        let b = self.bound(a, 3.0);
                        e(format!("(exp {})", b.code), b.iv.exp())
                    }
                    _ => e(format!("(- {})", a.code), a.iv.neg()),
                }
            }
            POSITIVE => {
                let a = self.real(env, d1);
                let p = self.positive(a);
                match self.rng.below(3) {
                    0 => e(format!("(sqrt {})", p.code), p.iv.sqrt()),
                    1 => e(format!("(log {})", p.code), p.iv.log()),
                    _ => {
                        let k = *self.rng.pick(&[0.5, 1.5, 2.5, -0.5, -1.0, -2.0, 3.0]);
                        let (ks, kv) = lit(k, 1);
                        e(format!("({} ** {ks})", p.code), p.iv.powc(kv))
                    }
                }
            }
            INT_POW => {
                // A constant integer exponent on a base of any sign: the
                // derivative must not form `log x` (LANGUAGE.md).
                let a = self.real(env, d1);
                let a = self.bound(a, 4.0);
                let k = *self.rng.pick(&[2.0, 3.0]);
                e(format!("({} ** {k:.1})", a.code), a.iv.powc(k))
            }
            ABS_MIN_MAX => self.abs_min_max(env, d1),
            IF => {
                let (c, truth) = self.cond(env, d1);
                let a = self.real(env, d1);
                let b = self.real(env, d1);
                let iv = match truth {
                    Some(true) => a.iv,
                    Some(false) => b.iv,
                    None => a.iv.hull(b.iv),
                };
                e(format!("(if {c} then {} else {})", a.code, b.code), iv)
            }
            LET => {
                let mark = self.used.len();
                let a = self.real(env, d1);
                let x = self.binder("x", env, &[]);
                let dep = self.dep_since(mark);
                self.set_dep(&[&x], dep);
                let env2 = env.with_val(&x, Av::Real(a.iv));
                let b = self.real_new(env, &env2, d1);
                e(format!("(let {x} = {} in {})", a.code, b.code), b.iv)
            }
            LET_TUPLE => {
                let k = if self.rng.chance(0.7) { 2 } else { 3 };
                let mark = self.used.len();
                let (t, ivs) = self.tuple(env, d1, k);
                let dep = self.dep_since(mark);
                let (pat, env2) = if k == 2 && self.rng.chance(0.3) {
                    let p = self.binder("p", env, &[]);
                    self.set_dep(&[&p], dep);
                    let av = Av::Tuple(ivs.iter().map(|i| Av::Real(*i)).collect());
                    (p.clone(), env.with_val(&p, av))
                } else {
                    let mut env2 = env.clone();
                    let mut names = Vec::new();
                    for iv in &ivs {
                        let x = self.binder("x", env, &names);
                        self.set_dep(&[&x], dep);
                        env2 = env2.with_val(&x, Av::Real(*iv));
                        names.push(x);
                    }
                    (format!("({})", names.join(", ")), env2)
                };
                let b = self.real_new(env, &env2, d1);
                e(format!("(let {pat} = {t} in {})", b.code), b.iv)
            }
            APP_LAMBDA => {
                let nargs = if self.rng.chance(0.6) { 1 } else { 2 };
                let mut args = Vec::new();
                let mut deps = Vec::new();
                for _ in 0..nargs {
                    let mark = self.used.len();
                    args.push(self.real(env, d1));
                    deps.push(self.dep_since(mark));
                }
                let mut env2 = env.clone();
                let mut names = Vec::new();
                for (a, dep) in args.iter().zip(deps) {
                    let y = self.binder("y", env, &names);
                    self.set_dep(&[&y], dep);
                    env2 = env2.with_val(&y, Av::Real(a.iv));
                    names.push(y);
                }
                let b = self.real_new(env, &env2, d1);
                let argc: Vec<String> = args.iter().map(|a| a.code.clone()).collect();
                if nargs == 2 && self.rng.chance(0.5) {
                    e(
                        format!(
                            "((fun ({}) -> {}) ({}))",
                            names.join(", "),
                            b.code,
                            argc.join(", ")
                        ),
                        b.iv,
                    )
                } else {
                    e(
                        format!(
                            "((fun {} -> {}) {})",
                            names.join(" "),
                            b.code,
                            argc.join(" ")
                        ),
                        b.iv,
                    )
                }
            }
            LET_FUN => self.let_fun(env, d1),
            HIGHER_ORDER => self.higher_order(env, d1),
            FUN_APPLY => self.fun_apply(env, d1),
            VEC_REDUCE => {
                let n = self.vec_len(env);
                let (v, ivs) = self.vector(env, d1, n);
                if self.fragment.vector_loops && self.rng.chance(0.5) {
                    let s = ivs.iter().fold(Iv::point(0.0), |a, b| a.add(*b));
                    // The sum of the vector, or of the standard library's
                    // rearrangements of it (the same elements).
                    match self.rng.below(4) {
                        0 => e(format!("(sum (reverse {v}))"), s),
                        1 => e(format!("(sum (sort {v}))"), s),
                        _ => e(format!("(sum {v})"), s),
                    }
                } else if self.fragment.vector_loops && self.rng.chance(0.4) {
                    self.library_pick(v, &ivs)
                } else {
                    let k = self.rng.below(n);
                    e(index(&v, &k.to_string()), ivs[k])
                }
            }
            FOLD => {
                let n = self.vec_len(env);
                let mark = self.used.len();
                let (v, ivs) = self.vector(env, d1, n);
                let h = ivs.iter().fold(ivs[0], |a, b| a.hull(*b));
                let acc_iv = Iv {
                    lo: -2.0 - 1e-6,
                    hi: 2.0 + 1e-6,
                };
                let init = self.real(env, d1);
                let init = self.into(init, acc_iv);
                let acc = self.binder("acc", env, &[]);
                let y = self.binder("y", env, std::slice::from_ref(&acc));
                let dep = self.dep_since(mark);
                self.set_dep(&[&acc, &y], dep);
                let env2 = env
                    .with_val(&acc, Av::Real(acc_iv))
                    .with_val(&y, Av::Real(h));
                let b = self.real_new(env, &env2, d1);
                let b = self.into(b, acc_iv);
                e(
                    format!("(fold (fun {acc} {y} -> {}) {} {v})", b.code, init.code),
                    b.iv,
                )
            }
            ZIP => {
                let n = self.vec_len(env);
                let mark = self.used.len();
                let (u, uivs) = self.vector(env, d1, n);
                let (v, vivs) = self.vector(env, d1, n);
                let dep = self.dep_since(mark);
                let hu = uivs.iter().fold(uivs[0], |a, b| a.hull(*b));
                let hv = vivs.iter().fold(vivs[0], |a, b| a.hull(*b));
                let [a, b]: [String; 2] = self.binders("y", env, 2).try_into().expect("two");
                self.set_dep(&[&a, &b], dep);
                let env2 = env.with_val(&a, Av::Real(hu)).with_val(&b, Av::Real(hv));
                let body = self.real_new(env, &env2, d1);
                let s = (0..n).fold(Iv::point(0.0), |acc, _| acc.add(body.iv));
                e(
                    format!(
                        "(sum (map (fun ({a}, {b}) -> {}) (zip {u} {v})))",
                        body.code
                    ),
                    s,
                )
            }
            MATCH => self.matching(env, d1),
            LET_REC => self.let_rec(env, d1),
            INT_IF => {
                let (c, truth) = self.int_cond(env);
                let a = self.real(env, d1);
                let b = self.real(env, d1);
                let iv = match truth {
                    Some(true) => a.iv,
                    Some(false) => b.iv,
                    None => a.iv.hull(b.iv),
                };
                e(format!("(if {c} then {} else {})", a.code, b.code), iv)
            }
            PROJ => {
                let (t, ivs) = self.tuple(env, d1, 2);
                let i = self.rng.below(2);
                let pr = if i == 0 { "fst" } else { "snd" };
                e(format!("({pr} {t})"), ivs[i])
            }
            NESTED_AD => self.nested_ad(env, d1),
            _ => unreachable!(),
        }
    }

    /// One element of vector `v` (of element intervals `ivs`) taken by a
    /// function of the standard library: `maximum`/`minimum` where one
    /// element is apart from the others (no tie near the point, where the
    /// derivative would jump), else through `reverse`, `slice`, `append`
    /// or `sort` (of an element apart from the others).
    fn library_pick(&mut self, v: String, ivs: &[Iv]) -> E {
        let n = ivs.len();
        let apart = |j: usize| {
            let i = ivs[j];
            i.is_finite()
                && (0..n).all(|k| {
                    k == j
                        || (ivs[k].is_finite()
                            && (ivs[k].hi + 1e-3 < i.lo || i.hi + 1e-3 < ivs[k].lo))
                })
        };
        let k = self.rng.below(n);
        match self.rng.below(5) {
            0 | 1 if apart(k) => {
                let above = (0..n).filter(|&j| j != k && ivs[j].lo > ivs[k].hi).count();
                let below = (0..n).filter(|&j| j != k && ivs[j].hi < ivs[k].lo).count();
                if above == 0 {
                    e(format!("(maximum {v})"), ivs[k])
                } else if below == 0 {
                    e(format!("(minimum {v})"), ivs[k])
                } else {
                    // Its place in the sorted vector.
                    e(format!("(sort {v})[{below}]"), ivs[k])
                }
            }
            2 => e(format!("(reverse {v})[{}]", n - 1 - k), ivs[k]),
            3 => e(format!("(slice {v} {k} 1)[0]"), ivs[k]),
            _ => e(format!("(append {v} {v})[{}]", n + k), ivs[k]),
        }
    }

    fn abs_min_max(&mut self, env: &Env, d: u32) -> E {
        let a = self.real(env, d);
        if self.rng.chance(0.4) {
            if a.iv.is_finite() && a.iv.away_from_zero(1e-3) {
                return e(format!("(abs {})", a.code), a.iv.abs());
            }
            return e(format!("(sin {})", a.code), a.iv.sin());
        }
        let mut b = self.real(env, d);
        let disjoint = |a: Iv, b: Iv| a.hi + 1e-3 < b.lo || b.hi + 1e-3 < a.lo;
        if !(a.iv.is_finite() && b.iv.is_finite() && disjoint(a.iv, b.iv)) {
            // Replace b by a constant well away from a.
            let a2 = if a.iv.is_finite() {
                a.iv
            } else {
                Iv::new(-1.0, 1.0)
            };
            let gap = self.rng.range(0.01, 0.5);
            let (t, v) = if self.rng.chance(0.5) {
                lit(((a2.hi + gap) * 100.0).ceil() / 100.0, 2)
            } else {
                lit(((a2.lo - gap) * 100.0).floor() / 100.0, 2)
            };
            let a = if a.iv.is_finite() {
                a
            } else {
                self.bound(a, 1.0)
            };
            b = e(t, Iv::point(v));
            return self.min_max(a, b);
        }
        self.min_max(a, b)
    }

    /// A structural zero (see [`Options::structural_zeros`]): a derivative
    /// `0 · ∞` at the point, of value 0 (the interval is exact).
    fn structural_zero(&mut self, env: &Env, d: u32) -> E {
        let a = self.real(env, d);
        let a = self.bound(a, 3.0);
        let zero = Iv::point(0.0);
        match self.rng.below(4) {
            // `sqrt` at 0: an infinite partial times a zero tangent.
            0 => e(format!("(sqrt ({} * 0.0))", a.code), zero),
            1 => {
                let b = self.real(env, d);
                let b = self.bound(b, 3.0);
                e(format!("({} * sqrt ({} * 0.0))", b.code, a.code), zero)
            }
            // A zero factor times `sqrt` at 0 (whose partial is infinite).
            2 => e(
                format!("(sqrt ({} * {} * 0.0) * 0.0)", a.code, a.code),
                zero,
            ),
            // `exp` overflows: the partial of `1 / exp` is `-inf / inf`.
            _ => e(format!("(1.0 / exp ({} * 0.0 + 1000.0))", a.code), zero),
        }
    }

    fn min_max(&mut self, a: E, b: E) -> E {
        if self.rng.chance(0.5) {
            e(format!("(min {} {})", a.code, b.code), a.iv.min(b.iv))
        } else {
            e(format!("(max {} {})", a.code, b.code), a.iv.max(b.iv))
        }
    }

    /// A vector length: one of a vector in scope, or 1..=4.
    fn vec_len(&mut self, env: &Env) -> usize {
        let lens = env.vec_lens();
        if !lens.is_empty() && self.rng.chance(0.6) {
            *self.rng.pick(&lens)
        } else if self.rng.chance(0.2) {
            // Past four elements a sum of reals adds in lanes (and native
            // code unrolls it, two elements at a time where it can).
            self.rng.int(5, 9) as usize
        } else {
            self.rng.int(1, 4) as usize
        }
    }

    /// `let h = fun ... -> body in rest`, with `h` applied to planned
    /// arguments (and possibly partially applied) in `rest`.
    fn let_fun(&mut self, env: &Env, d: u32) -> E {
        let nparams = if self.rng.chance(0.6) { 1 } else { 2 };
        let tupled = nparams == 2 && self.rng.chance(0.4);
        let ncalls = self.rng.int(1, 2) as usize;
        let mark = self.used.len();
        let mut calls: Vec<Vec<E>> = Vec::new();
        for _ in 0..ncalls {
            let mut args = Vec::new();
            for _ in 0..nparams {
                let a = self.real(env, d);
                args.push(self.bound(a, 4.0));
            }
            calls.push(args);
        }
        let params: Vec<Iv> = (0..nparams)
            .map(|p| {
                let h = calls
                    .iter()
                    .fold(calls[0][p].iv, |acc, c| acc.hull(c[p].iv));
                self.widen(h)
            })
            .collect();
        let names = self.binders("y", env, nparams);
        let dep = self.dep_since(mark);
        self.set_dep(&names.iter().collect::<Vec<_>>(), dep);
        let mut benv = env.clone();
        for (n, p) in names.iter().zip(&params) {
            benv = benv.with_val(n, Av::Real(*p));
        }
        let body = self.real_new(env, &benv, d);
        let h = self.fresh("h");
        let lam = if tupled {
            format!("fun ({}) -> {}", names.join(", "), body.code)
        } else {
            format!("fun {} -> {}", names.join(" "), body.code)
        };
        let mut renv = env.with(
            &h,
            Kind::Fun {
                params: params.clone(),
                tupled,
                result: body.iv,
            },
        );
        let mut lets = Vec::new();
        let mut results = Vec::new();
        for args in &calls {
            let r = self.fresh("r");
            let argc: Vec<String> = args.iter().map(|a| a.code.clone()).collect();
            let call = if tupled {
                format!("{h} ({})", argc.join(", "))
            } else {
                format!("{h} {}", argc.join(" "))
            };
            lets.push(format!("let {r} = {call} in "));
            self.dep.insert(r.clone());
            renv = renv.with_val(&r, Av::Real(body.iv));
            results.push(e(r, body.iv));
        }
        if nparams == 2 && !tupled && self.rng.chance(0.5) {
            // A partial application, itself a function in scope.
            let a = self.real(env, d);
            let a = self.into(a, params[0]);
            let q = self.fresh("h");
            lets.push(format!("let {q} = {h} {} in ", a.code));
            renv = renv.with(
                &q,
                Kind::Fun {
                    params: vec![params[1]],
                    tupled: false,
                    result: body.iv,
                },
            );
        }
        let rest = self.real(&renv, d);
        let mut acc = rest;
        for r in results {
            acc = self.combine(r, acc);
        }
        let close = ")".repeat(lets.len() + 1);
        let opens: String = lets.iter().map(|l| format!("({l}")).collect();
        e(
            format!("(let {h} = {lam} in {opens}{}{close}", acc.code),
            acc.iv,
        )
    }

    /// `(fun k -> ... k a ...) (fun y -> body)` or a built-in as the argument.
    fn higher_order(&mut self, env: &Env, d: u32) -> E {
        let mark = self.used.len();
        let a = self.real(env, d);
        let dep = self.dep_since(mark);
        let a = self.bound(a, 4.0);
        let (fcode, p, res) = if self.rng.chance(0.25) {
            let f = *self.rng.pick(&["sin", "cos", "tanh"]);
            (f.to_string(), Iv::unknown(), Iv::new(-1.0, 1.0))
        } else {
            let p = self.widen(a.iv);
            let y = self.binder("y", env, &[]);
            self.set_dep(&[&y], dep);
            let body = self.real_new(env, &env.with_val(&y, Av::Real(p)), d);
            (format!("(fun {y} -> {})", body.code), p, body.iv)
        };
        // `k`'s scope holds the argument, generated outside it: fresh.
        let k = self.fresh("k");
        let kenv0 = env.with(
            &k,
            Kind::Fun {
                params: vec![p],
                tupled: false,
                result: res,
            },
        );
        let r = self.binder("r", &kenv0, std::slice::from_ref(&k));
        self.set_dep(&[&r], dep);
        let kenv = kenv0.with_val(&r, Av::Real(res));
        let rest = self.real(&kenv, d);
        let comb = self.combine(e(r.clone(), res), rest);
        e(
            format!(
                "((fun {k} -> (let {r} = {k} {} in {})) {fcode})",
                a.code, comb.code
            ),
            comb.iv,
        )
    }

    /// A call of a function in scope, arguments forced into its domain.
    fn fun_apply(&mut self, env: &Env, d: u32) -> E {
        let fs = env.funs();
        let (h, params, tupled, result) = fs[self.rng.below(fs.len())].clone();
        self.use_var(&h);
        let mut args = Vec::new();
        for p in &params {
            let a = self.real(env, d);
            let a = if p.is_finite() { self.into(a, *p) } else { a };
            args.push(a.code);
        }
        if tupled {
            e(format!("({h} ({}))", args.join(", ")), result)
        } else {
            e(format!("({h} {})", args.join(" ")), result)
        }
    }

    /// `match` on a generated sum value.
    fn matching(&mut self, env: &Env, d: u32) -> E {
        let mark = self.used.len();
        let (s, side, l, r) = self.sum_value(env, d);
        let dep = self.dep_since(mark);
        let a = self.binder("x", env, &[]);
        self.set_dep(&[&a], dep);
        let lenv = env.with_val(&a, Av::Real(l[0]));
        let (rpat, renv) = if self.rng.chance(0.3) {
            let p = self.binder("p", env, &[]);
            self.set_dep(&[&p], dep);
            let av = Av::Tuple(r.iter().map(|i| Av::Real(*i)).collect());
            (p.clone(), env.with_val(&p, av))
        } else {
            let [b, c]: [String; 2] = self.binders("x", env, 2).try_into().expect("two");
            self.set_dep(&[&b, &c], dep);
            (
                format!("({b}, {c})"),
                env.with_val(&b, Av::Real(r[0]))
                    .with_val(&c, Av::Real(r[1])),
            )
        };
        let bl = self.real_new(env, &lenv, d);
        let br = self.real_new(env, &renv, d);
        let iv = match side {
            Some(true) => bl.iv,
            Some(false) => br.iv,
            None => bl.iv.hull(br.iv),
        };
        let larm = format!("inl {a} -> {}", bl.code);
        let rarm = format!("inr {rpat} -> {}", br.code);
        let arms = if self.rng.chance(0.7) {
            format!("| {larm} | {rarm}")
        } else {
            format!("| {rarm} | {larm}")
        };
        e(format!("(match {s} with {arms})"), iv)
    }

    /// A value of type `Real + (Real, Real)`: the code, which side it is on
    /// (if known), and the intervals of both payloads.
    fn sum_value(&mut self, env: &Env, d: u32) -> (String, Option<bool>, Vec<Iv>, Vec<Iv>) {
        let dl = vec![Iv::new(-1.0, 1.0)];
        let dr = vec![Iv::new(-1.0, 1.0); 2];
        match self.rng.below(4) {
            0 => {
                let a = self.real(env, d);
                (format!("(inl {})", a.code), Some(true), vec![a.iv], dr)
            }
            1 => {
                let (t, ivs) = self.tuple(env, d, 2);
                (format!("(inr {t})"), Some(false), dl, ivs)
            }
            _ => {
                let (c, truth) = if self.rng.chance(0.8) || env.int_vars().is_empty() {
                    self.cond(env, d)
                } else {
                    self.int_cond(env)
                };
                let a = self.real(env, d);
                let (t, ivs) = self.tuple(env, d, 2);
                (
                    format!("(if {c} then inl {} else inr {t})", a.code),
                    truth,
                    vec![a.iv],
                    ivs,
                )
            }
        }
    }

    /// `let rec`: a tail-recursive iteration `it y k` or a non-tail power.
    fn let_rec(&mut self, env: &Env, d: u32) -> E {
        let mark = self.used.len();
        let a = self.real(env, d);
        let dep = self.dep_since(mark);
        let a = self.bound(a, 3.0);
        let kmax = self.rng.int(1, 4);
        // `f`'s scope holds the argument, generated outside it: fresh.
        let f = self.fresh("it");
        let y = self.binder("y", env, &[]);
        let k = self.binder("k", env, std::slice::from_ref(&y));
        self.set_dep(&[&y], dep);
        if self.rng.chance(0.6) {
            let p = self.widen(a.iv);
            let senv = env.with_val(&y, Av::Real(p)).with_val(&k, Av::Int(1, kmax));
            let step = self.real_new(env, &senv, d);
            let step = self.into(step, p);
            e(
                format!(
                    "(let rec {f} {y} {k} = if {k} == 0 then {y} else {f} {} ({k} - 1) in {f} {} {kmax})",
                    step.code, a.code
                ),
                a.iv.hull(step.iv),
            )
        } else {
            e(
                format!(
                    "(let rec {f} {y} {k} = if {k} == 0 then 1.0 else {y} * {f} {y} ({k} - 1) in {f} {} {kmax})",
                    a.code
                ),
                a.iv.powc(kmax as f64),
            )
        }
    }

    // ----- conditions -------------------------------------------------------

    /// A Bool expression and its value over the box, if constant (always
    /// constant unless it compares Ints that vary, such as a `build` index).
    fn cond(&mut self, env: &Env, d: u32) -> (String, Option<bool>) {
        match self.rng.weighted(&[10, 2, 1, 1, 2]) {
            0 => self.threshold(env, d),
            1 => {
                let a = self.real(env, d);
                let b = self.real(env, d);
                let (ai, bi) = (a.iv, b.iv);
                if ai.is_finite()
                    && bi.is_finite()
                    && (ai.hi + 1e-3 < bi.lo || bi.hi + 1e-3 < ai.lo)
                {
                    let op = *self.rng.pick(&["<", "<=", ">", ">="]);
                    let less = ai.hi < bi.lo;
                    let truth = if op.starts_with('<') { less } else { !less };
                    (format!("{} {op} {}", a.code, b.code), Some(truth))
                } else {
                    self.threshold(env, d)
                }
            }
            2 if d > 0 => {
                let (c1, t1) = self.cond(env, d - 1);
                let (c2, t2) = self.cond(env, d - 1);
                if self.rng.chance(0.5) {
                    let t = match (t1, t2) {
                        (Some(false), _) | (_, Some(false)) => Some(false),
                        (Some(true), Some(true)) => Some(true),
                        _ => None,
                    };
                    (format!("({c1}) && ({c2})"), t)
                } else {
                    let t = match (t1, t2) {
                        (Some(true), _) | (_, Some(true)) => Some(true),
                        (Some(false), Some(false)) => Some(false),
                        _ => None,
                    };
                    (format!("({c1}) || ({c2})"), t)
                }
            }
            3 => {
                let (c, t) = self.cond(env, d.saturating_sub(1));
                (format!("not ({c})"), t.map(|b| !b))
            }
            4 if !env.int_vars().is_empty() => self.int_cond(env),
            _ => self.threshold(env, d),
        }
    }

    /// `a < t` (or another comparison) with `t` a constant outside `a`'s
    /// interval.
    fn threshold(&mut self, env: &Env, d: u32) -> (String, Option<bool>) {
        let a = self.real(env, d);
        let a = if a.iv.is_finite() {
            a
        } else {
            self.bound(a, 3.0)
        };
        let gap = if self.rng.chance(0.5) {
            self.rng.range(0.001, 0.02)
        } else {
            self.rng.range(0.05, 1.0)
        };
        let above = self.rng.chance(0.5);
        let (t, tv) = if above {
            lit(((a.iv.hi + gap) * 1000.0).ceil() / 1000.0, 3)
        } else {
            lit(((a.iv.lo - gap) * 1000.0).floor() / 1000.0, 3)
        };
        // Now a < t (above) or a > t (below) everywhere on the box.
        assert!(if above { a.iv.hi < tv } else { a.iv.lo > tv });
        let op = *self
            .rng
            .pick(&["<", "<=", ">", ">=", "<", "<=", ">", ">=", "!=", "=="]);
        let flip = self.rng.chance(0.3);
        // Truth of `a op t`.
        let a_less = above;
        let truth = match op {
            "<" | "<=" => a_less,
            ">" | ">=" => !a_less,
            "!=" => true,
            _ => false,
        };
        if flip {
            let fop = match op {
                "<" => ">",
                "<=" => ">=",
                ">" => "<",
                ">=" => "<=",
                o => o,
            };
            (format!("{t} {fop} {}", a.code), Some(truth))
        } else {
            (format!("{} {op} {t}", a.code), Some(truth))
        }
    }

    /// A comparison of an Int variable with a constant.
    fn int_cond(&mut self, env: &Env) -> (String, Option<bool>) {
        let vs = env.int_vars();
        let (n, lo, hi) = vs[self.rng.below(vs.len())].clone();
        self.use_var(&n);
        let k = self.rng.int(lo - 1, hi + 1);
        let op = *self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]);
        let eval = |x: i64| match op {
            "<" => x < k,
            "<=" => x <= k,
            ">" => x > k,
            ">=" => x >= k,
            "==" => x == k,
            _ => x != k,
        };
        let all: Vec<bool> = (lo..=hi).map(eval).collect();
        let truth = if all.iter().all(|b| *b) {
            Some(true)
        } else if all.iter().all(|b| !*b) {
            Some(false)
        } else {
            None
        };
        (format!("{n} {op} {k}"), truth)
    }

    // ----- tuples, vectors, structured values -------------------------------

    /// A tuple of `k` Reals, each of them bounded (see [`Gen::real`]).
    fn tuple(&mut self, env: &Env, d: u32, k: usize) -> (String, Vec<Iv>) {
        let (t, ivs) = self.tuple_raw(env, d, k);
        if ivs.iter().all(|i| i.is_finite()) {
            return (t, ivs);
        }
        let cs: Vec<String> = (0..k).map(|_| self.fresh("c")).collect();
        let k20 = Iv::point(20.0);
        let out: Vec<String> = cs
            .iter()
            .zip(&ivs)
            .map(|(c, i)| {
                if i.is_finite() {
                    c.clone()
                } else {
                    format!("20.0 * tanh ({c} / 20.0)")
                }
            })
            .collect();
        (
            format!("(let ({}) = {t} in ({}))", cs.join(", "), out.join(", ")),
            ivs.iter()
                .map(|i| {
                    if i.is_finite() {
                        *i
                    } else {
                        i.div(k20).tanh().mul(k20)
                    }
                })
                .collect(),
        )
    }

    fn tuple_raw(&mut self, env: &Env, d: u32, k: usize) -> (String, Vec<Iv>) {
        let ad = self.ad && self.ad_level < MAX_AD_LEVEL;
        let form = if d == 0 || self.budget <= 0 {
            0
        } else {
            let lambdas = if self.fragment.lambdas { 2 } else { 0 };
            self.rng.weighted(&[6, 2, lambdas, if ad { 2 } else { 0 }])
        };
        match form {
            1 => {
                let (c, truth) = self.cond(env, d - 1);
                let (a, ai) = self.tuple(env, d - 1, k);
                let (b, bi) = self.tuple(env, d - 1, k);
                let ivs = match truth {
                    Some(true) => ai,
                    Some(false) => bi,
                    None => ai.iter().zip(&bi).map(|(x, y)| x.hull(*y)).collect(),
                };
                (format!("(if {c} then {a} else {b})"), ivs)
            }
            2 => {
                let a = self.real(env, d - 1);
                let y = self.binder("y", env, &[]);
                let env2 = env.with_val(&y, Av::Real(a.iv));
                let (t, ivs) = self.tuple(&env2, d - 1, k);
                (format!("((fun {y} -> {t}) {})", a.code), ivs)
            }
            3 => {
                // The derivative of a tuple-valued function of one Real.
                let a = self.real(env, d - 1);
                let a = self.bound(a, 3.0);
                let t = self.fresh("t");
                let (body, _) =
                    self.inner(env, &[(t.clone(), Av::Real(a.iv))], &t, &mut |g, env| {
                        let (c, ivs) = g.tuple(env, d - 1, k);
                        (c, Av::Tuple(ivs.into_iter().map(Av::Real).collect()))
                    });
                (
                    format!("(diff (fun {t} -> {body}) {})", a.code),
                    vec![Iv::unknown(); k],
                )
            }
            _ => {
                let xs: Vec<E> = (0..k)
                    .map(|_| self.real(env, d.saturating_sub(1)))
                    .collect();
                (
                    format!(
                        "({})",
                        xs.iter()
                            .map(|x| x.code.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    xs.iter().map(|x| x.iv).collect(),
                )
            }
        }
    }

    /// A `Vec Real` of length `n`, its elements bounded (see [`Gen::real`]).
    /// `map (fun y -> if y > t then B else A) v` with a threshold `t` that
    /// splits `v`'s elements (each element decided over the box), `A` not
    /// using `y` (often an outer variable, returned as it is for those
    /// elements) and `B` using it: a mapped function that makes new Deltas
    /// for some elements and passes an outer one through for others, whose
    /// sum adds into that variable's adjoint between the others' terms.
    /// `None` if no gap between the elements' intervals leaves room for `t`.
    fn element_branch(
        &mut self,
        env: &Env,
        d: u32,
        v: &str,
        ivs: &[Iv],
        dep: bool,
    ) -> Option<(String, Vec<Iv>)> {
        let mut sorted: Vec<Iv> = ivs.iter().copied().filter(|i| i.is_finite()).collect();
        if sorted.len() != ivs.len() {
            return None;
        }
        sorted.sort_by(|a, b| a.lo.total_cmp(&b.lo));
        // Cuts after the k-th element (by lower bound) where everything
        // before lies clearly below everything after.
        let mut cuts = Vec::new();
        let mut below = f64::NEG_INFINITY;
        for k in 0..sorted.len() - 1 {
            below = below.max(sorted[k].hi);
            let (t, tv) = lit((below + sorted[k + 1].lo) / 2.0, 3);
            if below + 1e-3 < tv && tv + 1e-3 < sorted[k + 1].lo {
                cuts.push((t, tv));
            }
        }
        if cuts.is_empty() {
            return None;
        }
        let (t, tv) = cuts[self.rng.below(cuts.len())].clone();
        let above = ivs
            .iter()
            .filter(|i| i.lo > tv)
            .fold(None, |h: Option<Iv>, i| Some(h.map_or(*i, |h| h.hull(*i))))?;
        let a = if self.rng.chance(0.6) {
            self.leaf(env)
        } else {
            self.real(env, d)
        };
        // Fresh: `A`, made outside the lambda, must not see a shadowing `y`.
        let y = self.fresh("y");
        self.set_dep(&[&y], dep);
        let b = self.real_new(env, &env.with_val(&y, Av::Real(above)), d);
        let out = ivs
            .iter()
            .map(|i| if i.lo > tv { b.iv } else { a.iv })
            .collect();
        Some((
            format!(
                "(map (fun {y} -> if {y} > {t} then {} else {}) {v})",
                b.code, a.code
            ),
            out,
        ))
    }

    fn vector(&mut self, env: &Env, d: u32, n: usize) -> (String, Vec<Iv>) {
        let (v, ivs) = self.vector_raw(env, d, n);
        if ivs.iter().all(|i| i.is_finite()) {
            return (v, ivs);
        }
        let z = self.fresh("z");
        let k20 = Iv::point(20.0);
        (
            format!("(map (fun {z} -> 20.0 * tanh ({z} / 20.0)) {v})"),
            ivs.iter().map(|i| i.div(k20).tanh().mul(k20)).collect(),
        )
    }

    fn vector_raw(&mut self, env: &Env, d: u32, n: usize) -> (String, Vec<Iv>) {
        let vars = env.vec_vars(n);
        if d == 0 || self.budget <= 0 {
            if !vars.is_empty() && self.rng.chance(0.7) {
                let (v, ivs) = vars[self.rng.below(vars.len())].clone();
                self.use_var(&v);
                return (v, ivs);
            }
            let xs: Vec<E> = (0..n).map(|_| self.leaf(env)).collect();
            return (
                format!(
                    "[{}]",
                    xs.iter()
                        .map(|x| x.code.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                xs.iter().map(|x| x.iv).collect(),
            );
        }
        self.budget -= 1;
        self.nodes += 1;
        let d1 = d - 1;
        let ad = self.ad && self.ad_level < MAX_AD_LEVEL;
        let loops = self.fragment.vector_loops && self.fragment.lambdas;
        let w = [
            if vars.is_empty() { 0 } else { 4 },
            2,
            if loops { 4 } else { 0 },
            if loops { 3 } else { 0 },
            2,
            1,
            if loops { 1 } else { 0 },
            if ad { 2 } else { 0 },
        ];
        match self.rng.weighted(&w) {
            0 => {
                let (v, ivs) = vars[self.rng.below(vars.len())].clone();
                self.use_var(&v);
                (v, ivs)
            }
            1 => {
                let xs: Vec<E> = (0..n).map(|_| self.real(env, d1)).collect();
                (
                    format!(
                        "[{}]",
                        xs.iter()
                            .map(|x| x.code.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    xs.iter().map(|x| x.iv).collect(),
                )
            }
            2 => {
                let i = self.binder("i", env, &[]);
                let b = self.real(&env.with_val(&i, Av::Int(0, n as i64 - 1)), d1);
                (
                    format!("(build {n} (fun {i} -> {}))", b.code),
                    vec![b.iv; n],
                )
            }
            3 => {
                let mark = self.used.len();
                let (v, ivs) = self.vector(env, d1, n);
                let dep = self.dep_since(mark);
                let h = ivs.iter().fold(ivs[0], |a, b| a.hull(*b));
                if self.rng.chance(0.25) {
                    let f = *self.rng.pick(&["sin", "cos", "tanh"]);
                    let out = ivs
                        .iter()
                        .map(|iv| match f {
                            "sin" => iv.sin(),
                            "cos" => iv.cos(),
                            _ => iv.tanh(),
                        })
                        .collect();
                    return (format!("(map {f} {v})"), out);
                }
                let fs: Vec<_> = env
                    .funs()
                    .into_iter()
                    .filter(|(_, ps, t, _)| ps.len() == 1 && !t && h.within(ps[0]))
                    .collect();
                if !fs.is_empty() && self.rng.chance(0.5) {
                    let (f, _, _, r) = fs[self.rng.below(fs.len())].clone();
                    self.use_var(&f);
                    return (format!("(map {f} {v})"), vec![r; n]);
                }
                if self.rng.chance(0.3)
                    && let Some(split) = self.element_branch(env, d1, &v, &ivs, dep)
                {
                    return split;
                }
                let y = self.binder("y", env, &[]);
                self.set_dep(&[&y], dep);
                let b = self.real_new(env, &env.with_val(&y, Av::Real(h)), d1);
                (format!("(map (fun {y} -> {}) {v})", b.code), vec![b.iv; n])
            }
            4 => {
                let (c, truth) = self.cond(env, d1);
                let (a, ai) = self.vector(env, d1, n);
                let (b, bi) = self.vector(env, d1, n);
                let ivs = match truth {
                    Some(true) => ai,
                    Some(false) => bi,
                    None => ai.iter().zip(&bi).map(|(x, y)| x.hull(*y)).collect(),
                };
                (format!("(if {c} then {a} else {b})"), ivs)
            }
            5 => {
                let a = self.real(env, d1);
                let x = self.binder("x", env, &[]);
                let (v, ivs) = self.vector(&env.with_val(&x, Av::Real(a.iv)), d1, n);
                (format!("(let {x} = {} in {v})", a.code), ivs)
            }
            6 => {
                // Elementwise combination of two vectors through zip.
                let (u, ui) = self.vector(env, d1, n);
                let (v, vi) = self.vector(env, d1, n);
                let hu = ui.iter().fold(ui[0], |a, b| a.hull(*b));
                let hv = vi.iter().fold(vi[0], |a, b| a.hull(*b));
                let [a, b]: [String; 2] = self.binders("y", env, 2).try_into().expect("two");
                let body = self.real(
                    &env.with_val(&a, Av::Real(hu)).with_val(&b, Av::Real(hv)),
                    d1,
                );
                (
                    format!("(map (fun ({a}, {b}) -> {}) (zip {u} {v}))", body.code),
                    vec![body.iv; n],
                )
            }
            _ => {
                // The gradient of a function of a vector.
                let (v, ivs) = self.vector(env, d1, n);
                let w = self.fresh("w");
                let (body, _) = self.inner(
                    env,
                    &[(w.clone(), Av::Vec(ivs))],
                    &format!("{w}[0]"),
                    &mut |g, env| {
                        let b = g.real(env, d1);
                        (b.code, Av::Real(b.iv))
                    },
                );
                (
                    format!("(grad (fun {w} -> {body}) {v})"),
                    vec![Iv::unknown(); n],
                )
            }
        }
    }

    /// A value of a structured type (the outputs of `g`).
    fn of_type(&mut self, env: &Env, ty: &Ty, d: u32) -> (String, Av) {
        match ty {
            Ty::Real => {
                let x = self.real(env, d);
                (x.code, Av::Real(x.iv))
            }
            Ty::Int => {
                let ints = env.int_vars();
                if !ints.is_empty() && self.rng.chance(0.5) {
                    let (n, lo, hi) = ints[self.rng.below(ints.len())].clone();
                    self.use_var(&n);
                    (n, Av::Int(lo, hi))
                } else {
                    let k = self.rng.int(0, 5);
                    (k.to_string(), Av::Int(k, k))
                }
            }
            Ty::Vec(n) => {
                let (v, ivs) = self.vector(env, d, *n);
                (v, Av::Vec(ivs))
            }
            Ty::Tuple(_) | Ty::Sum(..) => {
                let form = if d == 0 {
                    0
                } else {
                    self.rng.weighted(&[5, 2, 2])
                };
                let d1 = d.saturating_sub(1);
                match form {
                    1 => {
                        let a = self.real(env, d1);
                        let x = self.binder("x", env, &[]);
                        let (c, av) = self.of_type(&env.with_val(&x, Av::Real(a.iv)), ty, d1);
                        (format!("(let {x} = {} in {c})", a.code), av)
                    }
                    2 => {
                        let (c, truth) = self.cond(env, d1);
                        let (a, aa) = self.of_type(env, ty, d1);
                        let (b, ba) = self.of_type(env, ty, d1);
                        let av = match truth {
                            Some(true) => aa,
                            Some(false) => ba,
                            None => aa.hull(&ba),
                        };
                        (format!("(if {c} then {a} else {b})"), av)
                    }
                    _ => match ty {
                        Ty::Tuple(ts) => {
                            let parts: Vec<(String, Av)> =
                                ts.iter().map(|t| self.of_type(env, t, d1)).collect();
                            (
                                format!(
                                    "({})",
                                    parts
                                        .iter()
                                        .map(|p| p.0.clone())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                                Av::Tuple(parts.into_iter().map(|p| p.1).collect()),
                            )
                        }
                        Ty::Sum(l, r) => {
                            if self.rng.chance(0.5) {
                                let (c, a) = self.of_type(env, l, d1);
                                (
                                    format!("(inl {c})"),
                                    Av::Sum(Some(true), Box::new(a), Box::new(Av::default_of(r))),
                                )
                            } else {
                                let (c, a) = self.of_type(env, r, d1);
                                (
                                    format!("(inr {c})"),
                                    Av::Sum(Some(false), Box::new(Av::default_of(l)), Box::new(a)),
                                )
                            }
                        }
                        _ => unreachable!(),
                    },
                }
            }
        }
    }

    // ----- nested differentiation -------------------------------------------

    /// Generates the body of the inner function of a nested AD call, with
    /// `params` in scope, and makes sure it uses both a variable of the
    /// enclosing scope and a parameter (adding `outer * phi(param_leaf)` to
    /// its first Real if it does not).
    fn inner(
        &mut self,
        env: &Env,
        params: &[(String, Av)],
        param_leaf: &str,
        body: &mut BodyGen<'_>,
    ) -> (String, Av) {
        // Top-level helpers are not variables of the enclosing scope.
        let outer: Vec<String> = env
            .names()
            .into_iter()
            .filter(|n| !n.starts_with("top_") && !n.starts_with("(top_"))
            .collect();
        let mark = self.used.len();
        let mut env2 = env.clone();
        for (n, av) in params {
            if !matches!(av, Av::Int(..)) {
                self.dep.insert(n.clone());
            }
            env2 = env2.with_val(n, av.clone());
        }
        self.ad_level += 1;
        let (code, av) = body(self, &env2);
        self.ad_level -= 1;
        let captured = self.used[mark..].iter().any(|n| outer.contains(n));
        let uses_param = self.used[mark..].iter().any(|n| {
            params
                .iter()
                .any(|(p, av)| p == n && !matches!(av, Av::Int(..)))
        });
        if captured && uses_param {
            return (code, av);
        }
        let ls = self.leaves(env);
        if ls.is_empty() {
            return (code, av);
        }
        // Add `outer * phi(param)`, with phi sometimes non-linear (so that
        // second derivatives are not all zero).
        let (x, name) = ls[self.rng.below(ls.len())].clone();
        self.use_var(&name);
        let phi = match self.rng.below(3) {
            0 => param_leaf.to_string(),
            1 => format!("sin {param_leaf}"),
            _ => format!("{param_leaf} * {param_leaf}"),
        };
        let term = format!("{} * {phi}", x.code);
        let code = match &av {
            Av::Real(_) => format!("({code} + {term})"),
            Av::Vec(_) => {
                let z = self.fresh("z");
                format!("(map (fun {z} -> {z} + {term}) {code})")
            }
            Av::Tuple(_) => {
                let ps: Vec<String> = (0..match &av {
                    Av::Tuple(v) => v.len(),
                    _ => 0,
                })
                    .map(|_| self.fresh("c"))
                    .collect();
                let mut out = ps.clone();
                out[0] = format!("{} + {term}", ps[0]);
                format!("(let ({}) = {code} in ({}))", ps.join(", "), out.join(", "))
            }
            _ => code,
        };
        // The added term makes the body's interval unknown.
        (code, Av::Real(Iv::unknown()))
    }

    fn inner_real(&mut self, env: &Env, params: &[(String, Av)], leaf: &str, d: u32) -> E {
        let (code, av) = self.inner(env, params, leaf, &mut |g, env| {
            let b = g.real(env, d);
            (b.code, Av::Real(b.iv))
        });
        match av {
            Av::Real(iv) => e(code, iv),
            _ => unreachable!(),
        }
    }

    /// A Real computed from `params` alone (and the top-level helpers): the
    /// body of a custom rule's function, which may not use a variable of
    /// the enclosing scope (it may be being differentiated).
    fn closed_real(&mut self, env: &Env, params: &[(String, Av)], d: u32) -> E {
        let top = |v: &&Var| self.top_level.contains(&v.id);
        let mut closed = Env(env.0.iter().filter(top).cloned().collect());
        for (n, av) in params {
            if !matches!(av, Av::Int(..)) {
                self.dep.insert(n.clone());
            }
            closed = closed.with_val(n, av.clone());
        }
        self.ad_level += 1;
        let b = self.real(&closed, d);
        self.ad_level -= 1;
        b
    }

    /// A Real computed by a differentiation operator.
    fn nested_ad(&mut self, env: &Env, d: u32) -> E {
        let unk = Iv::unknown();
        match self.rng.below(18) {
            16 => {
                // A function with a custom rule that is its own derivative
                // (`custom_vjp (vjp g)` and `custom_jvp g (jvp g)` are `g`),
                // so every check applies; the rule runs at every level the
                // test differentiates at.
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let u = self.fresh("u");
                let b = self.closed_real(env, &[(u.clone(), Av::Real(a.iv))], d);
                if self.rng.chance(0.5) {
                    e(
                        format!("(custom_vjp (vjp (fun {u} -> {})) {})", b.code, a.code),
                        b.iv,
                    )
                } else {
                    let du = self.fresh("du");
                    e(
                        format!(
                            "(custom_jvp (fun {u} -> {b}) (fun {u} {du} -> snd (jvp (fun {u} -> {b}) {u} {du})) {a})",
                            b = b.code,
                            a = a.code
                        ),
                        b.iv,
                    )
                }
            }
            17 => {
                // The same from a vector, the pullback applied to 1.
                let n = self.vec_len(env);
                let (v, ivs) = self.vector(env, d, n);
                let w = self.fresh("w");
                let b = self.closed_real(env, &[(w.clone(), Av::Vec(ivs))], d);
                e(
                    format!("(custom_vjp (vjp (fun {w} -> {})) {v})", b.code),
                    b.iv,
                )
            }
            12 => {
                // A pullback kept and applied twice.
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let t = self.fresh("t");
                let b = self.inner_real(env, &[(t.clone(), Av::Real(a.iv))], &t, d);
                let c1 = self.real(env, d);
                let c2 = self.real(env, d);
                let pb = self.fresh("pb");
                e(
                    format!(
                        "(let {pb} = snd (vjp (fun {t} -> {}) {}) in ({pb} {} - {pb} {}))",
                        b.code, a.code, c1.code, c2.code
                    ),
                    unk,
                )
            }
            13 => {
                // An operator applied to a function in scope (closure,
                // helper, partial application) or to a built-in.
                let op = *self.rng.pick(&["diff", "grad"]);
                let fs: Vec<_> = env
                    .funs()
                    .into_iter()
                    .filter(|(_, ps, tupled, _)| !tupled && ps.len() <= 2)
                    .collect();
                if fs.is_empty() || self.rng.chance(0.25) {
                    let f = *self.rng.pick(&["sin", "cos", "tanh"]);
                    let a = self.real(env, d);
                    return e(format!("({op} {f} {})", a.code), unk);
                }
                let (h, ps, _, _) = fs[self.rng.below(fs.len())].clone();
                self.use_var(&h);
                let (fexpr, p) = if ps.len() == 2 {
                    let a = self.real(env, d);
                    let a = self.into(a, ps[0]);
                    (format!("({h} {})", a.code), ps[1])
                } else {
                    (h.clone(), ps[0])
                };
                let b = self.real(env, d);
                let b = if p.is_finite() { self.into(b, p) } else { b };
                e(format!("({op} {fexpr} {})", b.code), unk)
            }
            14 => {
                // vjp of a vector-valued function, pulled back from a vector.
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let n = self.vec_len(env);
                let t = self.fresh("t");
                let (body, _) =
                    self.inner(env, &[(t.clone(), Av::Real(a.iv))], &t, &mut |g, env| {
                        let (c, ivs) = g.vector(env, d, n);
                        (c, Av::Vec(ivs))
                    });
                let (ct, _) = self.vector(env, d, n);
                e(
                    format!("((snd (vjp (fun {t} -> {body}) {})) {ct})", a.code),
                    unk,
                )
            }
            15 => {
                // jvp of a function from a pair to a vector.
                let (a, ivs) = self.tuple(env, d, 2);
                let (a, ivs) = if ivs.iter().all(|i| i.mag() <= 3.0) {
                    (a, ivs)
                } else {
                    // Keep the point bounded: squash both components.
                    let (c1, c2) = (self.fresh("c"), self.fresh("c"));
                    let k = Iv::point(3.0);
                    (
                        format!(
                            "(let ({c1}, {c2}) = {a} in (3.0 * tanh ({c1} / 3.0), 3.0 * tanh ({c2} / 3.0)))"
                        ),
                        ivs.iter().map(|i| i.div(k).tanh().mul(k)).collect(),
                    )
                };
                let (da, _) = self.tuple(env, d, 2);
                let n = self.vec_len(env);
                let (p, q) = (self.fresh("t"), self.fresh("t"));
                let (body, _) = self.inner(
                    env,
                    &[(p.clone(), Av::Real(ivs[0])), (q.clone(), Av::Real(ivs[1]))],
                    &p,
                    &mut |g, env| {
                        let (c, ivs) = g.vector(env, d, n);
                        (c, Av::Vec(ivs))
                    },
                );
                e(
                    format!("(sum (snd (jvp (fun ({p}, {q}) -> {body}) {a} {da})))"),
                    unk,
                )
            }
            0 | 1 => {
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let t = self.fresh("t");
                let b = self.inner_real(env, &[(t.clone(), Av::Real(a.iv))], &t, d);
                e(format!("(diff (fun {t} -> {}) {})", b.code, a.code), unk)
            }
            2 => {
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let t = self.fresh("t");
                let b = self.inner_real(env, &[(t.clone(), Av::Real(a.iv))], &t, d);
                e(format!("(grad (fun {t} -> {}) {})", b.code, a.code), unk)
            }
            3 => {
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let t = self.fresh("t");
                let b = self.inner_real(env, &[(t.clone(), Av::Real(a.iv))], &t, d);
                if self.rng.chance(0.5) {
                    e(
                        format!("(fst (value_and_grad (fun {t} -> {}) {}))", b.code, a.code),
                        b.iv,
                    )
                } else {
                    e(
                        format!("(snd (value_and_grad (fun {t} -> {}) {}))", b.code, a.code),
                        unk,
                    )
                }
            }
            4 => {
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let da = self.real(env, d);
                let t = self.fresh("t");
                let b = self.inner_real(env, &[(t.clone(), Av::Real(a.iv))], &t, d);
                e(
                    format!("(snd (jvp (fun {t} -> {}) {} {}))", b.code, a.code, da.code),
                    unk,
                )
            }
            5 => {
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let ct = self.real(env, d);
                let t = self.fresh("t");
                let b = self.inner_real(env, &[(t.clone(), Av::Real(a.iv))], &t, d);
                e(
                    format!(
                        "((snd (vjp (fun {t} -> {}) {})) {})",
                        b.code, a.code, ct.code
                    ),
                    unk,
                )
            }
            6 => {
                // Gradient with respect to a pair, both components used.
                let a1 = self.real(env, d);
                let a1 = self.bound(a1, 3.0);
                let a2 = self.real(env, d);
                let a2 = self.bound(a2, 3.0);
                let (p, q) = (self.fresh("t"), self.fresh("t"));
                let b = self.inner_real(
                    env,
                    &[(p.clone(), Av::Real(a1.iv)), (q.clone(), Av::Real(a2.iv))],
                    &q,
                    d,
                );
                let call = format!(
                    "grad (fun ({p}, {q}) -> {}) ({}, {})",
                    b.code, a1.code, a2.code
                );
                if self.rng.chance(0.5) {
                    let (g1, g2) = (self.fresh("g"), self.fresh("g"));
                    let renv = env
                        .with_val(&g1, Av::Real(unk))
                        .with_val(&g2, Av::Real(unk));
                    let rest = self.real(&renv, d);
                    let r = self.combine(e(g1.clone(), unk), e(g2.clone(), unk));
                    let r = self.combine(r, rest);
                    e(format!("(let ({g1}, {g2}) = {call} in {})", r.code), unk)
                } else {
                    let pr = *self.rng.pick(&["fst", "snd"]);
                    e(format!("({pr} ({call}))"), unk)
                }
            }
            7 => {
                // An Int leaf in the input of an inner gradient is carried.
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let kv = self.rng.int(1, 3);
                let (k, t) = (self.fresh("n"), self.fresh("t"));
                let b = self.inner_real(
                    env,
                    &[(k.clone(), Av::Int(kv, kv)), (t.clone(), Av::Real(a.iv))],
                    &t,
                    d,
                );
                e(
                    format!(
                        "(snd (grad (fun ({k}, {t}) -> {}) ({kv}, {})))",
                        b.code, a.code
                    ),
                    unk,
                )
            }
            8 => {
                // Gradient with respect to a vector.
                let n = self.vec_len(env);
                let (v, ivs) = self.vector(env, d, n);
                let w = self.fresh("w");
                let b = self.inner_real(env, &[(w.clone(), Av::Vec(ivs))], &format!("{w}[0]"), d);
                let call = format!("(grad (fun {w} -> {}) {v})", b.code);
                if self.rng.chance(0.5) {
                    e(format!("(sum {call})"), unk)
                } else {
                    let k = self.rng.below(n);
                    e(format!("{call}[{k}]"), unk)
                }
            }
            9 => {
                // Hessian or Jacobian entry.
                let n = self.rng.int(1, 3) as usize;
                let (v, ivs) = self.vector(env, d, n);
                let w = self.fresh("w");
                let i = self.rng.below(n);
                let params = [(w.clone(), Av::Vec(ivs))];
                let leaf = format!("{w}[0]");
                if self.rng.chance(0.5) {
                    let j = self.rng.below(n);
                    let b = self.inner_real(env, &params, &leaf, d);
                    e(
                        format!("(hessian (fun {w} -> {}) {v})[{i}][{j}]", b.code),
                        unk,
                    )
                } else {
                    let m = self.rng.int(1, 3) as usize;
                    let (body, _) = self.inner(env, &params, &leaf, &mut |g, env| {
                        let (c, ivs) = g.vector(env, d, m);
                        (c, Av::Vec(ivs))
                    });
                    let r = self.rng.below(m);
                    e(format!("(jacobian (fun {w} -> {body}) {v})[{r}][{i}]"), unk)
                }
            }
            10 => {
                // Gradient at a sum value keeps the constructor.
                let left = self.rng.chance(0.5);
                let s = self.fresh("s");
                let (a, b, c) = (self.fresh("t"), self.fresh("t"), self.fresh("t"));
                let (arg, lav, rav) = if left {
                    let x = self.real(env, d);
                    let x = self.bound(x, 3.0);
                    let iv = x.iv;
                    (
                        format!("(inl {})", x.code),
                        vec![iv],
                        vec![Iv::new(-1.0, 1.0); 2],
                    )
                } else {
                    let (t, ivs) = self.tuple(env, d, 2);
                    (format!("(inr {t})"), vec![Iv::new(-1.0, 1.0)], ivs)
                };
                let bl = self.inner_real(env, &[(a.clone(), Av::Real(lav[0]))], &a, d);
                let br = self.inner_real(
                    env,
                    &[(b.clone(), Av::Real(rav[0])), (c.clone(), Av::Real(rav[1]))],
                    &c,
                    d,
                );
                let (da, db, dc) = (self.fresh("d"), self.fresh("d"), self.fresh("d"));
                let pick = if self.rng.chance(0.5) { &db } else { &dc };
                e(
                    format!(
                        "(match grad (fun {s} -> match {s} with | inl {a} -> {} | inr ({b}, {c}) -> {}) {arg} with | inl {da} -> {da} | inr ({db}, {dc}) -> {pick})",
                        bl.code, br.code
                    ),
                    unk,
                )
            }
            _ => {
                // A derivative of a derivative, written directly.
                let a = self.real(env, d);
                let a = self.bound(a, 3.0);
                let (t, u) = (self.fresh("t"), self.fresh("t"));
                let ai = a.iv;
                let b = self.inner_real(env, &[(t.clone(), Av::Real(ai))], &t, d);
                e(
                    format!(
                        "(diff (fun {u} -> diff (fun {t} -> {} * {u}) {u}) {})",
                        b.code, a.code
                    ),
                    unk,
                )
            }
        }
    }
}
