//! The particle benchmark: a charged particle is fired past two charges at
//! (10, 10 − w) and (10, 0), with acceleration −∇ₓp(x), p(x) = Σ 1/‖x − c‖; the
//! miss distance is minimised over w. The outer gradient (first letter of the
//! variant) differentiates the simulation, whose inner gradient (second letter) is
//! taken at every step of a data-dependent loop.

use nabla::Scalar;

use crate::nested::{GradMode, ScalarFn, argmin, argmin_with};

/// The expected w* (BENCHMARKS.md), to about 1e-12 relative.
pub const EXPECTED: f64 = 0.2071918746486116;

const DT: f64 = 0.1;

fn charges<T: Scalar>(w: T) -> [[T; 2]; 2] {
    [
        [T::from(10.0), T::from(10.0) - w],
        [T::from(10.0), T::zero()],
    ]
}

fn potential<T: Scalar>(x: &[T], w: T) -> T {
    charges(w)
        .iter()
        .map(|c| {
            let (dx, dy) = (x[0] - c[0], x[1] - c[1]);
            T::one() / (dx * dx + dy * dy).sqrt()
        })
        .sum()
}

/// x ↦ p(x) for charges placed by a `w` of the enclosing level.
struct Potential<S> {
    w: S,
}

impl<S: Scalar> ScalarFn<S> for Potential<S> {
    fn eval<T: Scalar, L: Fn(S) -> T>(&self, x: &[T], lift: L) -> T {
        potential(x, lift(self.w))
    }
}

/// Simulates until the particle crosses y = 0 and returns the squared x there.
fn naive_euler<S: Scalar>(accel: impl Fn(&[S]) -> Vec<S>) -> S {
    let mut x = [S::zero(), S::from(8.0)];
    let mut v = [S::from(0.75), S::zero()];
    loop {
        let a = accel(&x);
        let x_new = [x[0] + v[0] * DT, x[1] + v[1] * DT];
        if x_new[1] > 0.0 {
            x = x_new;
            v = [v[0] + a[0] * DT, v[1] + a[1] * DT];
        } else {
            let dt_f = -(x[1] / v[1]);
            let hit = x[0] + v[0] * dt_f;
            return hit * hit;
        }
    }
}

/// [w] ↦ the miss distance, with the inner gradient in mode `M`.
struct Miss<M>(std::marker::PhantomData<M>);

impl<M: GradMode> ScalarFn<f64> for Miss<M> {
    fn eval<T: Scalar, L: Fn(f64) -> T>(&self, w: &[T], _lift: L) -> T {
        let field = Potential { w: w[0] };
        naive_euler(|x| {
            let mut a = M::gradient(&field, x);
            a.iter_mut().for_each(|g| *g = -*g);
            a
        })
    }
}

/// The variant `Outer`/`Inner` by the library: w*.
pub fn run<Out: GradMode, In: GradMode>() -> f64 {
    argmin::<f64, Out, _>(&Miss::<In>(std::marker::PhantomData), &[0.0])[0]
}

/// The acceleration −∇ₓp = Σ_c (x − c)/r³ and its derivative along (dx, dw),
/// derived by hand: d[(x − c)/r³] = (dx − dc)/r³ − 3(x − c)((x − c)·(dx − dc))/r⁵,
/// with dc = (0, −dw) for the first charge and 0 for the second.
fn accel_manual(x: [f64; 2], w: f64, dx: [f64; 2], dw: f64) -> ([f64; 2], [f64; 2]) {
    let mut a = [0.0; 2];
    let mut da = [0.0; 2];
    for (c, dc) in charges(w).iter().zip([[0.0, -dw], [0.0, 0.0]]) {
        let u = [x[0] - c[0], x[1] - c[1]];
        let du = [dx[0] - dc[0], dx[1] - dc[1]];
        let r2 = u[0] * u[0] + u[1] * u[1];
        let r = r2.sqrt();
        let r3 = r2 * r;
        let dot = u[0] * du[0] + u[1] * du[1];
        for i in 0..2 {
            a[i] += u[i] / r3;
            da[i] += du[i] / r3 - 3.0 * u[i] * dot / (r3 * r2);
        }
    }
    (a, da)
}

/// Hand-written: the simulation with its tangent d/dw carried along by hand, the
/// same loop as [`naive_euler`] (same branches, same rounding of the values).
fn miss_manual(w: f64) -> (f64, f64) {
    let (mut x, mut dx) = ([0.0, 8.0], [0.0, 0.0]);
    let (mut v, mut dv) = ([0.75, 0.0], [0.0, 0.0]);
    loop {
        let (a, da) = accel_manual(x, w, dx, 1.0);
        let x_new = [x[0] + v[0] * DT, x[1] + v[1] * DT];
        if x_new[1] > 0.0 {
            dx = [dx[0] + dv[0] * DT, dx[1] + dv[1] * DT];
            x = x_new;
            v = [v[0] + a[0] * DT, v[1] + a[1] * DT];
            dv = [dv[0] + da[0] * DT, dv[1] + da[1] * DT];
        } else {
            let dt_f = -(x[1] / v[1]);
            let d_dt_f = -dx[1] / v[1] + x[1] * dv[1] / (v[1] * v[1]);
            let hit = x[0] + v[0] * dt_f;
            let d_hit = dx[0] + dv[0] * dt_f + v[0] * d_dt_f;
            return (hit * hit, 2.0 * hit * d_hit);
        }
    }
}

/// w* with hand-written derivatives throughout.
pub fn run_manual() -> f64 {
    argmin_with(
        |w: &[f64]| miss_manual(w[0]).0,
        |w: &[f64]| vec![miss_manual(w[0]).1],
        &[0.0],
    )[0]
}
