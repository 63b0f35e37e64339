//! The nested workloads of Siskind & Pearlmutter (`../shared/BENCHMARKS.md`,
//! `crates/nabla-bench/src/{saddle,particle,nested}.rs`):
//! - saddle: a* = argmin_a max_b f(a, b), b* = argmax_b f(a*, b), with
//!   f(a, b) = (a₀² + a₁²) − (b₀² + b₁²), from (1, 1) — a gradient of a function
//!   whose evaluation runs a gradient-descent loop on another gradient;
//! - particle: the w placing a charge so that a particle fired past it lands at
//!   x = 0, found by gradient descent through an Euler simulation whose
//!   acceleration is minus the gradient of the potential.
//!
//! Variants by mode: FF (forward over forward), RR (reverse over reverse).
//! num-dual and echidna nest forward mode only (echidna's `Reverse` is a tape
//! variable over `f32`/`f64` only); ad_trait's types carry `f64` values and do
//! not nest at all. The optimiser is the same for every library.

use std::ops::{Mul, Sub};

/// w* of the particle problem (BENCHMARKS.md).
pub const PARTICLE_EXPECTED: f64 = 0.2071918746486116;
/// Each coordinate of (a*, b*) of the saddle problem (BENCHMARKS.md).
pub const SADDLE_EXPECTED: f64 = 8.246324826140356e-06;

const DT: f64 = 0.1;

/// Gradient descent with step adaptation (BENCHMARKS.md), at any scalar type:
/// `re` reads a primal value (comparisons look at primal values only), `lift`
/// makes a constant. The same code for every library.
pub fn argmin_with<T: Copy + Sub<Output = T> + Mul<Output = T>>(
    value: impl Fn(&[T]) -> T,
    gradient: impl Fn(&[T]) -> Vec<T>,
    x0: &[T],
    re: impl Fn(T) -> f64,
    lift: impl Fn(f64) -> T,
) -> Vec<T> {
    let norm = |v: &mut dyn Iterator<Item = T>| v.map(|x| re(x) * re(x)).sum::<f64>().sqrt();
    let mut x = x0.to_vec();
    let mut fx = value(&x);
    let mut gx = gradient(&x);
    let mut eta = 1e-5;
    let mut i = 0;
    loop {
        if norm(&mut gx.iter().copied()) <= 1e-5 {
            return x;
        }
        if i == 10 {
            eta *= 2.0;
            i = 0;
            continue;
        }
        let step = lift(eta);
        let x_new: Vec<T> = x.iter().zip(&gx).map(|(&xi, &gi)| xi - gi * step).collect();
        if norm(&mut x.iter().zip(&x_new).map(|(&a, &b)| a - b)) <= 1e-5 {
            return x;
        }
        let f_new = value(&x_new);
        if re(f_new) < re(fx) {
            x = x_new;
            fx = f_new;
            gx = gradient(&x);
            i += 1;
        } else {
            eta /= 2.0;
            i = 0;
        }
    }
}

/// nabla: the workloads of `nabla-bench` (the same code its own benchmarks time),
/// plus a hand-seeded forward mode as a diagnostic.
pub mod nabla_impl {
    use nabla::{Dual, Scalar};
    pub use nabla_bench::nested::{Backward, Forward, GradMode, ScalarFn};

    /// Forward mode seeded by hand, one `Dual::new` pass per coordinate over one
    /// reused vector, as the num-dual and echidna versions do: a diagnostic that
    /// separates what `grad_forward` costs from what the arithmetic costs.
    pub struct ForwardBySeeding;

    impl GradMode for ForwardBySeeding {
        const LETTER: &'static str = "F";
        fn gradient<S: Scalar, F: ScalarFn<S>>(f: &F, x: &[S]) -> Vec<S> {
            let mut xs: Vec<Dual<S>> = x.iter().map(|&v| Dual::constant(v)).collect();
            (0..x.len())
                .map(|i| {
                    xs[i] = Dual::new(x[i], S::one());
                    let d = f.eval(&xs, Dual::constant).tangent();
                    xs[i] = Dual::constant(x[i]);
                    d
                })
                .collect()
        }
    }

    /// Saddle, outer mode `Out`, inner mode `In`: (a₀, a₁, b₀, b₁).
    pub fn saddle<Out: GradMode, In: GradMode>() -> [f64; 4] {
        nabla_bench::saddle::run::<Out, In>()
    }

    /// Particle, outer mode `Out`, inner mode `In`: w*.
    pub fn particle<Out: GradMode, In: GradMode>() -> f64 {
        nabla_bench::particle::run::<Out, In>()
    }
}

/// num-dual: forward over forward, `Dual<Dual<f64>>` at the inner level.
pub mod num_dual_impl {
    use num_dual::{Dual, Dual64, DualNum, DualStruct};

    use super::{DT, argmin_with};

    /// A real at some level of nesting.
    pub trait Level: DualNum<Primitive = f64> + DualStruct<Real = f64> + Copy {}
    impl<T: DualNum<Primitive = f64> + DualStruct<Real = f64> + Copy> Level for T {}

    /// The gradient by one `Dual<T>` pass per coordinate.
    fn gradient<T: Level>(f: impl Fn(&[Dual<T>]) -> Dual<T>, x: &[T]) -> Vec<T>
    where
        Dual<T>: Level,
    {
        let mut xs: Vec<Dual<T>> = x.iter().map(|&v| Dual::from_re(v)).collect();
        (0..x.len())
            .map(|i| {
                xs[i].eps = T::one();
                let d = f(&xs).eps;
                xs[i].eps = T::zero();
                d
            })
            .collect()
    }

    fn argmin<T: Level>(
        value: impl Fn(&[T]) -> T,
        grad: impl Fn(&[T]) -> Vec<T>,
        x0: &[T],
    ) -> Vec<T> {
        argmin_with(value, grad, x0, |t| t.re(), T::from)
    }

    fn f<T: Level>(a: &[T], b: &[T]) -> T {
        (a[0] * a[0] + a[1] * a[1]) - (b[0] * b[0] + b[1] * b[1])
    }

    fn inner_max<T: Level>(a: &[T]) -> Vec<T>
    where
        Dual<T>: Level,
    {
        let lifted = [Dual::from_re(a[0]), Dual::from_re(a[1])];
        argmin(
            |b| -f(a, b),
            |b| gradient(|b| -f(&lifted, b), b),
            &[T::one(), T::one()],
        )
    }

    /// Saddle FF: (a₀, a₁, b₀, b₁).
    pub fn saddle() -> [f64; 4] {
        let a = argmin(
            |a: &[f64]| f(a, &inner_max(a)),
            |a| gradient(|a: &[Dual64]| f(a, &inner_max(a)), a),
            &[1.0, 1.0],
        );
        let b = inner_max(&a);
        [a[0], a[1], b[0], b[1]]
    }

    fn potential<T: Level>(x: &[T], w: T) -> T {
        let ten = T::from(10.0);
        let charges = [[ten, ten - w], [ten, T::zero()]];
        charges
            .iter()
            .map(|c| {
                let (dx, dy) = (x[0] - c[0], x[1] - c[1]);
                T::one() / (dx * dx + dy * dy).sqrt()
            })
            .sum()
    }

    fn miss<T: Level>(w: T) -> T
    where
        Dual<T>: Level,
    {
        let lifted = Dual::from_re(w);
        let mut x = [T::zero(), T::from(8.0)];
        let mut v = [T::from(0.75), T::zero()];
        loop {
            let a: Vec<T> = gradient(|x| potential(x, lifted), &x)
                .into_iter()
                .map(|g| -g)
                .collect();
            let x_new = [x[0] + v[0] * DT, x[1] + v[1] * DT];
            if x_new[1].re() > 0.0 {
                x = x_new;
                v = [v[0] + a[0] * DT, v[1] + a[1] * DT];
            } else {
                let dt_f = -(x[1] / v[1]);
                let hit = x[0] + v[0] * dt_f;
                return hit * hit;
            }
        }
    }

    /// Particle FF: w*.
    pub fn particle() -> f64 {
        argmin(
            |w: &[f64]| miss(w[0]),
            |w| gradient(|w: &[Dual64]| miss(w[0]), w),
            &[0.0],
        )[0]
    }
}

/// echidna: forward over forward, `echidna::Dual<echidna::Dual<f64>>`.
pub mod echidna_impl {
    use echidna::{Dual, Float};

    use super::{DT, argmin_with};

    fn re<T: Float>(t: T) -> f64 {
        t.to_f64().expect("a real")
    }

    fn k<T: Float>(c: f64) -> T {
        T::from_f64(c).expect("a real")
    }

    /// The gradient by one `Dual<T>` pass per coordinate.
    fn gradient<T: Float>(f: impl Fn(&[Dual<T>]) -> Dual<T>, x: &[T]) -> Vec<T> {
        let mut xs: Vec<Dual<T>> = x.iter().map(|&v| Dual::constant(v)).collect();
        (0..x.len())
            .map(|i| {
                xs[i].eps = T::one();
                let d = f(&xs).eps;
                xs[i].eps = T::zero();
                d
            })
            .collect()
    }

    fn argmin<T: Float>(
        value: impl Fn(&[T]) -> T,
        grad: impl Fn(&[T]) -> Vec<T>,
        x0: &[T],
    ) -> Vec<T> {
        argmin_with(value, grad, x0, re, k)
    }

    fn f<T: Float>(a: &[T], b: &[T]) -> T {
        (a[0] * a[0] + a[1] * a[1]) - (b[0] * b[0] + b[1] * b[1])
    }

    fn inner_max<T: Float>(a: &[T]) -> Vec<T> {
        let lifted = [Dual::constant(a[0]), Dual::constant(a[1])];
        argmin(
            |b| -f(a, b),
            |b| gradient(|b| -f(&lifted, b), b),
            &[T::one(), T::one()],
        )
    }

    /// Saddle FF: (a₀, a₁, b₀, b₁).
    pub fn saddle() -> [f64; 4] {
        let a = argmin(
            |a: &[f64]| f(a, &inner_max(a)),
            |a| gradient(|a: &[Dual<f64>]| f(a, &inner_max(a)), a),
            &[1.0, 1.0],
        );
        let b = inner_max(&a);
        [a[0], a[1], b[0], b[1]]
    }

    fn potential<T: Float>(x: &[T], w: T) -> T {
        let ten = k::<T>(10.0);
        let charges = [[ten, ten - w], [ten, T::zero()]];
        charges
            .iter()
            .map(|c| {
                let (dx, dy) = (x[0] - c[0], x[1] - c[1]);
                T::one() / (dx * dx + dy * dy).sqrt()
            })
            .fold(T::zero(), |s, t| s + t)
    }

    fn miss<T: Float>(w: T) -> T {
        let lifted = Dual::constant(w);
        let dt = k::<T>(DT);
        let mut x = [T::zero(), k(8.0)];
        let mut v = [k(0.75), T::zero()];
        loop {
            let a: Vec<T> = gradient(|x| potential(x, lifted), &x)
                .into_iter()
                .map(|g| -g)
                .collect();
            let x_new = [x[0] + v[0] * dt, x[1] + v[1] * dt];
            if re(x_new[1]) > 0.0 {
                x = x_new;
                v = [v[0] + a[0] * dt, v[1] + a[1] * dt];
            } else {
                let dt_f = -(x[1] / v[1]);
                let hit = x[0] + v[0] * dt_f;
                return hit * hit;
            }
        }
    }

    /// Particle FF: w*.
    pub fn particle() -> f64 {
        argmin(
            |w: &[f64]| miss(w[0]),
            |w| gradient(|w: &[Dual<f64>]| miss(w[0]), w),
            &[0.0],
        )[0]
    }
}

use nabla_impl::{Backward, Forward, ForwardBySeeding};

/// nabla saddle FF, gradients seeded by hand (diagnostic).
pub fn nabla_saddle_ff_seeded() -> [f64; 4] {
    nabla_impl::saddle::<ForwardBySeeding, ForwardBySeeding>()
}
/// nabla particle FF, gradients seeded by hand (diagnostic).
pub fn nabla_particle_ff_seeded() -> f64 {
    nabla_impl::particle::<ForwardBySeeding, ForwardBySeeding>()
}

/// nabla saddle FF.
pub fn nabla_saddle_ff() -> [f64; 4] {
    nabla_impl::saddle::<Forward, Forward>()
}
/// nabla saddle RR.
pub fn nabla_saddle_rr() -> [f64; 4] {
    nabla_impl::saddle::<Backward, Backward>()
}
/// nabla particle FF.
pub fn nabla_particle_ff() -> f64 {
    nabla_impl::particle::<Forward, Forward>()
}
/// nabla particle RR.
pub fn nabla_particle_rr() -> f64 {
    nabla_impl::particle::<Backward, Backward>()
}

/// Every implementation against the published optima.
pub fn check() -> Result<(), String> {
    crate::agree(
        "saddle",
        &[SADDLE_EXPECTED; 4],
        &[
            ("nabla FF", nabla_saddle_ff().to_vec()),
            ("nabla RR", nabla_saddle_rr().to_vec()),
            ("nabla FF seeded", nabla_saddle_ff_seeded().to_vec()),
            ("num-dual FF", num_dual_impl::saddle().to_vec()),
            ("echidna FF", echidna_impl::saddle().to_vec()),
        ],
        1e-9,
    )?;
    crate::agree(
        "particle",
        &[PARTICLE_EXPECTED],
        &[
            ("nabla FF", vec![nabla_particle_ff()]),
            ("nabla RR", vec![nabla_particle_rr()]),
            ("nabla FF seeded", vec![nabla_particle_ff_seeded()]),
            ("num-dual FF", vec![num_dual_impl::particle()]),
            ("echidna FF", vec![echidna_impl::particle()]),
        ],
        1e-9,
    )
}
