//! `cargo bench -p nabla`: derivative time ÷ primal time, measured in one run.
//!
//! Method (../shared/BENCHMARKS.md): each timing repeats its function until a batch
//! takes ≥ 0.2 s and reports the minimum over 5 batches, per call; primal and
//! derivative are measured in the same process, back to back. Prints:
//! - reverse-mode gradient ÷ primal for (a) a 10⁶-operation scalar chain (and the
//!   paper's x + x chain, which reverse mode folds),
//!   (b) Rosenbrock with n = 10⁴, (c) a scalar MLP loss;
//! - trace bytes per primal operation;
//! - the same gradients by `tape::grad` ([`TapeReverse`](nabla::TapeReverse), which
//!   reaches its trace through a thread-local stack) against `grad` (`Reverse`, a
//!   direct reference): the cost of the run-time checked trace, first order and
//!   for a forward-over-reverse Hessian-vector product (row `hvp`);
//! - forward-mode JVP ÷ primal, and nabla's `Dual<f64>` against num-dual's `Dual64`
//!   on the same functions.
//!
//! Pass a substring to run only matching rows: `cargo bench -p nabla -- mlp`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use nabla::{Dual, Scalar, grad, tape, vjp};
use num_dual::{Dual64, DualNum as _};

const BATCH: Duration = Duration::from_millis(200);
const BATCHES: usize = 5;

/// Seconds per call: the minimum over `BATCHES` batches of at least `BATCH` each.
fn time_per_call<R>(mut f: impl FnMut() -> R) -> f64 {
    // Warm up, and size the batch.
    let start = Instant::now();
    black_box(f());
    let once = start.elapsed().max(Duration::from_nanos(20));
    let calls = (BATCH.as_secs_f64() / once.as_secs_f64()).ceil().max(1.0) as u64;
    (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                black_box(f());
            }
            start.elapsed().as_secs_f64() / calls as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn show(seconds: f64) -> String {
    match seconds {
        s if s >= 1e-3 => format!("{:8.3} ms", s * 1e3),
        s if s >= 1e-6 => format!("{:8.3} µs", s * 1e6),
        s => format!("{:8.3} ns", s * 1e9),
    }
}

// ---------- Workloads, written once over `Scalar` ----------

const CHAIN_OPS: usize = 1_000_000;
/// xᵢ₊₁ = xᵢ·y + xᵢ: 10⁶ operations in a dependent chain, each of which adds two
/// different variables and so records a trace entry.
fn chain<S: Scalar>(x: S, y: S) -> S {
    (0..CHAIN_OPS / 2).fold(x, |acc, _| acc * y + acc)
}
/// Krawiec et al. §5.3: x₁ = x + x, x₂ = x₁ + x₁, … (10⁶ additions), which reverse
/// mode folds into one coefficient.
fn doubling_chain<S: Scalar>(x: S) -> S {
    (0..CHAIN_OPS).fold(x, |acc, _| acc + acc)
}

const ROSENBROCK_N: usize = 10_000;
const MLP_IN: usize = 8;
const MLP_HIDDEN: usize = 32;
const MLP_SAMPLES: usize = 64;
const MLP_PARAMS: usize = MLP_HIDDEN * MLP_IN + MLP_HIDDEN + MLP_HIDDEN + 1;

/// Writes each forward-mode workload once, as a function over the given scalar type,
/// so that nabla and num-dual run the same code operation for operation.
macro_rules! workloads {
    ($rosenbrock:ident, $mlp_loss:ident, [$($generics:tt)*] $T:ty) => {
        /// Σ (1 − xᵢ)² + 100 (xᵢ₊₁ − xᵢ²)²: 8 operations per term.
        fn $rosenbrock<$($generics)*>(x: &[$T]) -> $T {
            let mut sum = <$T>::from(0.0);
            for i in 0..x.len() - 1 {
                let a = <$T>::from(1.0) - x[i];
                let b = x[i + 1] - x[i] * x[i];
                sum += a * a + b * b * 100.0;
            }
            sum
        }

        /// Mean squared error of an 8-32-1 tanh network over 64 samples, parameters flat.
        fn $mlp_loss<$($generics)*>(p: &[$T], data: &[([f64; MLP_IN], f64)]) -> $T {
            let (w1, rest) = p.split_at(MLP_HIDDEN * MLP_IN);
            let (b1, rest) = rest.split_at(MLP_HIDDEN);
            let (w2, b2) = rest.split_at(MLP_HIDDEN);
            let mut loss = <$T>::from(0.0);
            for (input, target) in data {
                let mut out = b2[0];
                for h in 0..MLP_HIDDEN {
                    let mut pre = b1[h];
                    for (i, &xi) in input.iter().enumerate() {
                        pre += w1[h * MLP_IN + i] * xi;
                    }
                    out += w2[h] * pre.tanh();
                }
                let err = out - *target;
                loss += err * err;
            }
            loss / data.len() as f64
        }
    };
}

workloads!(rosenbrock, mlp_loss, [S: Scalar] S);
workloads!(rosenbrock_num_dual, mlp_loss_num_dual, [] Dual64);

/// The floor of the trace design, for comparison with nabla's figures: each workload
/// written by hand against a bare trace of the same 24-byte entries nabla records
/// (`Let id = w₀·Var p₀ + w₁·Var p₁`), from plain `f64` code with the partial
/// derivatives spelled out — no generic scalar type, no test of whether an operand
/// is constant or a coefficient zero, buffers kept across calls — and swept by the
/// same backward loop. What this costs over the primal is the cost of writing and
/// sweeping one entry per recorded operation, which no implementation of the trace
/// design avoids; nabla's ratio minus this one is what its abstraction costs.
/// Each workload is compiled on its own (`inline(never)`), as nabla compiles the
/// closure it differentiates (inlined into the timing loop, the chain's recording
/// ran twice as slow). Its figure moves by up to 20 % with code placement: the
/// same Rosenbrock code measured 108 µs in another harness against 132 µs here.
mod floor {
    use super::{CHAIN_OPS, MLP_HIDDEN, MLP_IN};

    #[derive(Clone, Copy)]
    struct Entry {
        parents: [u32; 2],
        weights: [f64; 2],
    }

    /// A trace over `inputs` input variables (ids `0..inputs`), reused across calls.
    #[derive(Default)]
    pub(crate) struct Tape {
        inputs: u32,
        entries: Vec<Entry>,
        adjoints: Vec<f64>,
    }

    impl Tape {
        fn start(&mut self, inputs: usize) {
            self.inputs = inputs as u32;
            self.entries.clear();
        }

        #[inline(always)]
        fn push(&mut self, p0: u32, w0: f64, p1: u32, w1: f64) -> u32 {
            let id = self.inputs + self.entries.len() as u32;
            self.entries.push(Entry {
                parents: [p0, p1],
                weights: [w0, w1],
            });
            id
        }

        /// The gradient of the output `Scale c (Var id)`: nabla's sweep, one register carry.
        fn gradient(&mut self, (c, output): (f64, u32)) -> Vec<f64> {
            let inputs = self.inputs as usize;
            let Tape {
                entries, adjoints, ..
            } = self;
            adjoints.clear();
            adjoints.resize(inputs + entries.len(), 0.0);
            adjoints[output as usize] = c;
            let mut carry = 0.0;
            let mut id = adjoints.len();
            for entry in entries.iter().rev() {
                id -= 1;
                let adjoint = adjoints[id] + carry;
                carry = 0.0;
                if adjoint == 0.0 {
                    continue;
                }
                let previous = (id as u32).wrapping_sub(1);
                for (parent, weight) in entry.parents.into_iter().zip(entry.weights) {
                    if parent == previous {
                        carry = weight * adjoint;
                    } else {
                        adjoints[parent as usize] += weight * adjoint;
                    }
                }
            }
            if inputs > 0 {
                adjoints[inputs - 1] += carry;
            }
            adjoints[..inputs].to_vec()
        }
    }

    /// ∇ of xᵢ₊₁ = xᵢ·y + xᵢ (ids: x 0, y 1): two entries per step.
    #[inline(never)]
    pub(crate) fn chain(tape: &mut Tape, x: f64, y: f64) -> Vec<f64> {
        tape.start(2);
        let (mut value, mut id) = (x, 0);
        for _ in 0..CHAIN_OPS / 2 {
            let product = tape.push(id, y, 1, value);
            id = tape.push(product, 1.0, id, 1.0);
            value = value * y + value;
        }
        tape.gradient((1.0, id))
    }

    /// ∇ of Σ (1 − xᵢ)² + 100 (xᵢ₊₁ − xᵢ²)²: three entries per term, as nabla folds it.
    #[inline(never)]
    pub(crate) fn rosenbrock(tape: &mut Tape, x: &[f64]) -> Vec<f64> {
        tape.start(x.len());
        let mut sum: Option<(f64, u32)> = None;
        let mut total = 0.0;
        for i in 0..x.len() - 1 {
            let a = 1.0 - x[i];
            let b = x[i + 1] - x[i] * x[i];
            let b_id = tape.push(i as u32 + 1, 1.0, i as u32, -2.0 * x[i]);
            let term = tape.push(i as u32, -2.0 * a, b_id, 200.0 * b);
            sum = Some(match sum {
                None => (1.0, term),
                Some((c, id)) => (1.0, tape.push(id, c, term, 1.0)),
            });
            total += a * a + b * b * 100.0;
        }
        std::hint::black_box(total);
        tape.gradient(sum.expect("n ≥ 2"))
    }

    /// ∇ of the MLP loss (parameters flat, as `mlp_loss`): per hidden unit eight
    /// entries for the dot product and two for the output, as nabla records it.
    #[inline(never)]
    pub(crate) fn mlp(tape: &mut Tape, p: &[f64], data: &[([f64; MLP_IN], f64)]) -> Vec<f64> {
        tape.start(p.len());
        let (w1, b1, w2, b2) = (
            0,
            MLP_HIDDEN * MLP_IN,
            MLP_HIDDEN * (MLP_IN + 1),
            p.len() - 1,
        );
        let mut loss: Option<(f64, u32)> = None;
        let mut total = 0.0;
        for (input, target) in data {
            let (mut out, mut out_id) = (p[b2], b2 as u32);
            for h in 0..MLP_HIDDEN {
                let (mut pre, mut pre_id) = (p[b1 + h], (b1 + h) as u32);
                for (i, &xi) in input.iter().enumerate() {
                    let w = w1 + h * MLP_IN + i;
                    pre_id = tape.push(pre_id, 1.0, w as u32, xi);
                    pre += p[w] * xi;
                }
                let t = pre.tanh();
                let product = tape.push((w2 + h) as u32, t, pre_id, p[w2 + h] * (1.0 - t * t));
                out_id = tape.push(out_id, 1.0, product, 1.0);
                out += p[w2 + h] * t;
            }
            let err = out - target;
            loss = Some(match loss {
                None => (2.0 * err, out_id),
                Some((c, id)) => (1.0, tape.push(id, c, out_id, 2.0 * err)),
            });
            total += err * err;
        }
        std::hint::black_box(total);
        let (c, id) = loss.expect("at least one sample");
        tape.gradient((c / data.len() as f64, id))
    }
}

/// Deterministic pseudo-random numbers in [−1, 1) (no dependency needed).
fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters rows by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));

    let x_rosen = pseudo_random(ROSENBROCK_N, 1);
    let params = pseudo_random(MLP_PARAMS, 2);
    let raw = pseudo_random(MLP_SAMPLES * (MLP_IN + 1), 3);
    let data: Vec<([f64; MLP_IN], f64)> = raw
        .chunks(MLP_IN + 1)
        .map(|c| (std::array::from_fn(|i| c[i]), c[MLP_IN]))
        .collect();
    let direction = |n: usize| pseudo_random(n, 4);

    println!("nabla library benchmarks (min of {BATCHES} batches of ≥ {BATCH:?})");
    println!();
    println!("Reverse mode: gradient ÷ primal (target ≤ 3)");
    println!(
        "{:<24} {:>11} {:>11} {:>7} {:>16}",
        "workload", "primal", "gradient", "ratio", "trace bytes/op"
    );

    if wanted("chain") {
        let point = [1.5, 1e-6];
        let primal = time_per_call(|| chain(black_box(point[0]), black_box(point[1])));
        let gradient = time_per_call(|| grad(|x| chain(x[0], x[1]), black_box(&point)));
        let (_, pullback) = vjp(|x| vec![chain(x[0], x[1])], &point);
        let bytes_per_op = trace_bytes(&pullback, point.len()) / CHAIN_OPS as f64;
        row("(a) chain 10⁶ ops", primal, gradient, Some(bytes_per_op));
        let mut tape = floor::Tape::default();
        let ideal =
            time_per_call(|| floor::chain(&mut tape, black_box(point[0]), black_box(point[1])));
        check_gradient(
            &floor::chain(&mut tape, point[0], point[1]),
            &grad(|x| chain(x[0], x[1]), &point),
        );
        row("    floor: bare trace", primal, ideal, None);
        let taped = time_per_call(|| tape::grad(|x| chain(x[0], x[1]), black_box(&point)));
        check_gradient(
            &tape::grad(|x| chain(x[0], x[1]), &point),
            &grad(|x| chain(x[0], x[1]), &point),
        );
        tape_row("    tape::grad", primal, gradient, taped);

        let primal = time_per_call(|| doubling_chain(black_box(1.0)));
        let gradient = time_per_call(|| grad(|x| doubling_chain(x[0]), black_box(&[1.0])));
        let (_, pullback) = vjp(|x| vec![doubling_chain(x[0])], &[1.0]);
        let bytes_per_op = trace_bytes(&pullback, 1) / CHAIN_OPS as f64;
        row(
            "    x+x chain (folds)",
            primal,
            gradient,
            Some(bytes_per_op),
        );
    }
    if wanted("rosenbrock") {
        let primal = time_per_call(|| rosenbrock(black_box(&x_rosen)));
        let gradient = time_per_call(|| grad(|x| rosenbrock(x), black_box(&x_rosen)));
        let (_, pullback) = vjp(|x| vec![rosenbrock(x)], &x_rosen);
        let ops = 8 * (ROSENBROCK_N - 1);
        let bytes_per_op = trace_bytes(&pullback, x_rosen.len()) / ops as f64;
        row("(b) rosenbrock n=10⁴", primal, gradient, Some(bytes_per_op));
        let mut tape = floor::Tape::default();
        let ideal = time_per_call(|| floor::rosenbrock(&mut tape, black_box(&x_rosen)));
        check_gradient(
            &floor::rosenbrock(&mut tape, &x_rosen),
            &grad(|x| rosenbrock(x), &x_rosen),
        );
        row("    floor: bare trace", primal, ideal, None);
        let taped = time_per_call(|| tape::grad(rosenbrock, black_box(&x_rosen)));
        check_gradient(
            &tape::grad(rosenbrock, &x_rosen),
            &grad(|x| rosenbrock(x), &x_rosen),
        );
        tape_row("    tape::grad", primal, gradient, taped);
    }
    if wanted("mlp") {
        let primal = time_per_call(|| mlp_loss(black_box(&params), &data));
        let gradient = time_per_call(|| grad(|p| mlp_loss(p, &data), black_box(&params)));
        let (_, pullback) = vjp(|p| vec![mlp_loss(p, &data)], &params);
        // Per sample and hidden unit: 2·8 for the dot product, tanh, 2 for the output.
        let ops = MLP_SAMPLES * (MLP_HIDDEN * (2 * MLP_IN + 3) + 3) + 1;
        let bytes_per_op = trace_bytes(&pullback, params.len()) / ops as f64;
        row("(c) mlp 8-32-1 × 64", primal, gradient, Some(bytes_per_op));
        let mut tape = floor::Tape::default();
        let ideal = time_per_call(|| floor::mlp(&mut tape, black_box(&params), &data));
        check_gradient(
            &floor::mlp(&mut tape, &params, &data),
            &grad(|p| mlp_loss(p, &data), &params),
        );
        row("    floor: bare trace", primal, ideal, None);
        let taped = time_per_call(|| tape::grad(|p| mlp_loss(p, &data), black_box(&params)));
        check_gradient(
            &tape::grad(|p| mlp_loss(p, &data), &params),
            &grad(|p| mlp_loss(p, &data), &params),
        );
        tape_row("    tape::grad", primal, gradient, taped);
    }

    if wanted("hvp") {
        // Forward over reverse: trace entries of `Dual<f64>`, whose type test in the
        // thread-local lookup is a dynamic one.
        let dir = direction(ROSENBROCK_N);
        let primal = time_per_call(|| rosenbrock(black_box(&x_rosen)));
        let reverse = time_per_call(|| nabla::hvp(|x| rosenbrock(x), black_box(&x_rosen), &dir));
        let taped = time_per_call(|| tape::hvp(rosenbrock, black_box(&x_rosen), &dir));
        check_gradient(
            &tape::hvp(rosenbrock, &x_rosen, &dir),
            &nabla::hvp(|x| rosenbrock(x), &x_rosen, &dir),
        );
        row("rosenbrock hvp (f-o-r)", primal, reverse, None);
        tape_row("    tape::hvp", primal, reverse, taped);
    }

    println!();
    println!("Forward mode: one JVP ÷ primal (target ≤ 2), and against num-dual");
    println!(
        "{:<24} {:>11} {:>11} {:>7} {:>11} {:>12}",
        "workload", "primal", "nabla jvp", "ratio", "num-dual", "nabla/num-d"
    );
    if wanted("rosenbrock") {
        let dir = direction(ROSENBROCK_N);
        let primal = time_per_call(|| rosenbrock(black_box(&x_rosen)));
        let seed: Vec<Dual<f64>> = x_rosen
            .iter()
            .zip(&dir)
            .map(|(&p, &t)| Dual::new(p, t))
            .collect();
        let ours = time_per_call(|| rosenbrock(black_box(&seed)).tangent());
        let seed_nd: Vec<Dual64> = x_rosen
            .iter()
            .zip(&dir)
            .map(|(&p, &t)| Dual64::new(p, t))
            .collect();
        let theirs = time_per_call(|| rosenbrock_num_dual(black_box(&seed_nd)).eps);
        check_same(
            rosenbrock(&seed).tangent(),
            rosenbrock_num_dual(&seed_nd).eps,
        );
        forward_row("rosenbrock n=10⁴", primal, ours, theirs);
    }
    if wanted("mlp") {
        let dir = direction(MLP_PARAMS);
        let primal = time_per_call(|| mlp_loss(black_box(&params), &data));
        let seed: Vec<Dual<f64>> = params
            .iter()
            .zip(&dir)
            .map(|(&p, &t)| Dual::new(p, t))
            .collect();
        let ours = time_per_call(|| mlp_loss(black_box(&seed), &data).tangent());
        let seed_nd: Vec<Dual64> = params
            .iter()
            .zip(&dir)
            .map(|(&p, &t)| Dual64::new(p, t))
            .collect();
        let theirs = time_per_call(|| mlp_loss_num_dual(black_box(&seed_nd), &data).eps);
        check_same(
            mlp_loss(&seed, &data).tangent(),
            mlp_loss_num_dual(&seed_nd, &data).eps,
        );
        forward_row("mlp 8-32-1 × 64", primal, ours, theirs);
    }
}

/// Bytes of trace entries: one per `Let` (the input variables have none).
fn trace_bytes(pullback: &nabla::Pullback<f64>, inputs: usize) -> f64 {
    ((pullback.trace_len() - inputs) * pullback.entry_bytes()) as f64
}

fn row(name: &str, primal: f64, derivative: f64, bytes_per_op: Option<f64>) {
    let bytes = bytes_per_op.map_or(String::new(), |b| format!("{b:.1}"));
    println!(
        "{name:<24} {} {} {:>7.2} {bytes:>16}",
        show(primal),
        show(derivative),
        derivative / primal
    );
}

/// A `tape` operator's row: its ratio to the primal, and its time over the same
/// operator's with `Reverse`.
fn tape_row(name: &str, primal: f64, reverse: f64, taped: f64) {
    println!(
        "{:<24} {} {} {:>7.2} {:>16}",
        name,
        show(primal),
        show(taped),
        taped / primal,
        format!("{:.2}× Reverse", taped / reverse)
    );
}

fn forward_row(name: &str, primal: f64, ours: f64, theirs: f64) {
    println!(
        "{name:<24} {} {} {:>7.2} {} {:>12.2}",
        show(primal),
        show(ours),
        ours / primal,
        show(theirs),
        ours / theirs
    );
}

/// The floor's hand-written gradient must be nabla's before its time means anything.
fn check_gradient(floor: &[f64], nabla: &[f64]) {
    assert_eq!(floor.len(), nabla.len());
    for (a, b) in floor.iter().zip(nabla) {
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "the floor's gradient differs from nabla's: {a} vs {b}"
        );
    }
}

/// Both implementations must compute the same derivative before their times mean anything.
fn check_same(ours: f64, theirs: f64) {
    assert!(
        (ours - theirs).abs() <= 1e-9 * ours.abs().max(1.0),
        "nabla and num-dual disagree: {ours} vs {theirs}"
    );
}
