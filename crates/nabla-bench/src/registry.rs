//! The registry: every workload, every Rust implementation, and what each
//! implementation can do on each workload. The `nabla-bench` binary and the oracle
//! test both walk it, so a new implementation (the nabla language's, once it has
//! differentiation operators) is added here once and is then checked and timed
//! everywhere.

use crate::check::{TOLERANCE, max_rel_err};
use crate::data::{oracle, oracle_vec, read_input};
use crate::nested::{Backward, Forward};
use crate::{ba, gmm, lang, lstm, particle, saddle};

/// Which outer/inner gradient modes a nested benchmark uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Forward over forward.
    FF,
    /// Forward outer, reverse inner.
    FR,
    /// Reverse outer, forward inner.
    RF,
    /// Reverse over reverse.
    RR,
}

/// All four nested variants.
pub const VARIANTS: [Variant; 4] = [Variant::FF, Variant::FR, Variant::RF, Variant::RR];

/// A workload family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// GMM objective and gradient.
    Gmm,
    /// BA residuals and sparse Jacobian.
    Ba,
    /// LSTM loss and gradient.
    Lstm,
    /// Nested saddle point.
    Saddle(Variant),
    /// Nested particle.
    Particle(Variant),
}

/// One benchmark input.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Identifier used in results, e.g. `gmm_d10_K25` or `saddle_FR`.
    pub id: &'static str,
    /// The family (and for nested benchmarks the variant).
    pub family: Family,
    /// The ADBench input file, if any.
    pub file: Option<&'static str>,
    /// The key of its oracle in `oracle.json`, if it has one.
    pub oracle: Option<&'static str>,
    /// The smallest input of its family: checked by `cargo test`, not timed.
    pub smallest: bool,
    /// Timed by `--quick` as well as by the full run.
    pub quick: bool,
}

const fn adbench(
    id: &'static str,
    family: Family,
    file: &'static str,
    oracle: Option<&'static str>,
    smallest: bool,
    quick: bool,
) -> Workload {
    Workload {
        id,
        family,
        file: Some(file),
        oracle,
        smallest,
        quick,
    }
}

const fn nested(id: &'static str, family: Family) -> Workload {
    Workload {
        id,
        family,
        file: None,
        oracle: None,
        smallest: true,
        quick: true,
    }
}

/// Every workload, in report order.
pub const WORKLOADS: &[Workload] = &[
    adbench(
        "gmm_test",
        Family::Gmm,
        "gmm_test.txt",
        Some("gmm_test"),
        true,
        false,
    ),
    adbench(
        "gmm_d2_K5",
        Family::Gmm,
        "gmm1k_d2_K5.txt",
        None,
        false,
        true,
    ),
    adbench(
        "gmm_d10_K25",
        Family::Gmm,
        "gmm1k_d10_K25.txt",
        None,
        false,
        true,
    ),
    adbench(
        "gmm_d20_K50",
        Family::Gmm,
        "gmm1k_d20_K50.txt",
        None,
        false,
        false,
    ),
    adbench(
        "gmm_d64_K100",
        Family::Gmm,
        "gmm1k_d64_K100.txt",
        None,
        false,
        false,
    ),
    adbench(
        "ba_test",
        Family::Ba,
        "ba_test.txt",
        Some("ba_test"),
        true,
        false,
    ),
    adbench(
        "ba1",
        Family::Ba,
        "ba1_n49_m7776_p31843.txt",
        None,
        false,
        true,
    ),
    adbench(
        "ba8",
        Family::Ba,
        "ba8_n88_m64298_p383937.txt",
        None,
        false,
        false,
    ),
    adbench(
        "lstm_l2_c1024",
        Family::Lstm,
        "lstm_l2_c1024.txt",
        Some("lstm_l2_c1024"),
        true,
        true,
    ),
    adbench(
        "lstm_l4_c4096",
        Family::Lstm,
        "lstm_l4_c4096.txt",
        None,
        false,
        false,
    ),
    nested("saddle_FF", Family::Saddle(Variant::FF)),
    nested("saddle_FR", Family::Saddle(Variant::FR)),
    nested("saddle_RF", Family::Saddle(Variant::RF)),
    nested("saddle_RR", Family::Saddle(Variant::RR)),
    nested("particle_FF", Family::Particle(Variant::FF)),
    nested("particle_FR", Family::Particle(Variant::FR)),
    nested("particle_RF", Family::Particle(Variant::RF)),
    nested("particle_RR", Family::Particle(Variant::RR)),
];

/// Looks a workload up by id.
pub fn workload(id: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.id == id)
}

/// A Rust implementation (the Python ones live in bench/python).
#[derive(Clone, Copy, Debug)]
pub struct Implementation {
    /// Name used in results.
    pub name: &'static str,
    /// One line for the results' legend.
    pub about: &'static str,
}

/// Every Rust implementation, in report order.
pub const IMPLEMENTATIONS: &[Implementation] = &[
    Implementation {
        name: "nabla",
        about: "nabla library: the Scalar-generic objective differentiated by the library (reverse mode for gradients and BA; nested: the variant's modes)",
    },
    Implementation {
        name: "nabla-fwd",
        about: "nabla library, forward mode (BA only: 15 jvps per observation)",
    },
    Implementation {
        name: "nabla-lang",
        about: "the nabla language: the workloads as .nabla programs (bench/nabla/), run by its interpreter in-process, input passed as a nabla value; reverse mode (value_and_grad, vjp) for gradients and BA; nested: the variant's modes (jvp per coordinate or grad); compile/JIT column = parse+check and compile, not included in the times",
    },
    Implementation {
        name: "nabla-compiled",
        about: "the nabla language compiled to native code (Cranelift, `--backend native`): the same .nabla programs, input converted once to native representation; derivatives compiled too (issue 14); primal of the nested workloads: the hand-derived programs `saddle_manual`/`particle_manual` (the same algorithm as manual, no AD); compile/JIT column = parse+check and native compilation of the primal and derivative entries",
    },
    Implementation {
        name: "manual",
        about: "hand-written Rust derivatives, derived from the formulas (no AD)",
    },
];

/// What a run produces: the primal values and the derivative, flattened.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Objective / residuals / optimum, depending on the workload.
    pub values: Vec<f64>,
    /// Gradient / Jacobian non-zeros (CSR, row major) / for nested benchmarks empty.
    pub derivative: Vec<f64>,
}

/// A prepared implementation of one workload (input parsed, ready to run).
pub trait Runner {
    /// One primal evaluation (plain f64, no derivatives): its values in the
    /// order of [`Evaluation::values`]; `None` if the implementation has no
    /// separate primal for the workload (the nested benchmarks are one
    /// computation).
    fn primal(&self) -> Option<Vec<f64>>;
    /// One derivative evaluation, which also yields the primal values;
    /// `None` if the implementation does not differentiate (yet).
    fn derivative(&self) -> Option<Evaluation>;
    /// For an interpreted implementation: the time of its front end (parse,
    /// check, compile), measured on its own and not included in the times.
    fn front_end(&self) -> Option<lang::FrontEnd> {
        None
    }
    /// Seconds `reps` evaluations of `what` take, back to back where the
    /// implementation runs (an implementation on a worker thread times them
    /// there, so that the hand-off between threads is not in the time).
    fn time(&self, what: Computation, reps: usize) -> f64 {
        let start = std::time::Instant::now();
        for _ in 0..reps {
            match what {
                Computation::Primal => drop(std::hint::black_box(self.primal())),
                Computation::Derivative => drop(std::hint::black_box(self.derivative())),
            }
        }
        start.elapsed().as_secs_f64()
    }
}

/// What [`Runner::time`] times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Computation {
    /// [`Runner::primal`].
    Primal,
    /// [`Runner::derivative`].
    Derivative,
}

/// Whether an implementation can run a workload.
pub enum Support {
    /// It can: here it is, ready to run.
    Runs(Box<dyn Runner>),
    /// It cannot, and why (reported in the results, never skipped silently).
    Cannot(&'static str),
    /// Not implemented yet, and why.
    Pending(&'static str),
}

struct Closure<P, D> {
    primal: P,
    derivative: D,
}

impl<P: Fn() -> Option<Vec<f64>>, D: Fn() -> Evaluation> Runner for Closure<P, D> {
    fn primal(&self) -> Option<Vec<f64>> {
        (self.primal)()
    }
    fn derivative(&self) -> Option<Evaluation> {
        Some((self.derivative)())
    }
}

fn runs(
    primal: impl Fn() -> Option<Vec<f64>> + 'static,
    derivative: impl Fn() -> Evaluation + 'static,
) -> Support {
    Support::Runs(Box::new(Closure { primal, derivative }))
}

fn gradient_eval((value, derivative): (f64, Vec<f64>)) -> Evaluation {
    Evaluation {
        values: vec![value],
        derivative,
    }
}

fn ba_eval((res, jac): (ba::Residuals, ba::SparseJacobian)) -> Evaluation {
    let mut values = res.reproj;
    values.extend(res.weight);
    Evaluation {
        values,
        derivative: jac.values,
    }
}

fn saddle_run(v: Variant) -> [f64; 4] {
    match v {
        Variant::FF => saddle::run::<Forward, Forward>(),
        Variant::FR => saddle::run::<Forward, Backward>(),
        Variant::RF => saddle::run::<Backward, Forward>(),
        Variant::RR => saddle::run::<Backward, Backward>(),
    }
}

fn particle_run(v: Variant) -> f64 {
    match v {
        Variant::FF => particle::run::<Forward, Forward>(),
        Variant::FR => particle::run::<Forward, Backward>(),
        Variant::RF => particle::run::<Backward, Forward>(),
        Variant::RR => particle::run::<Backward, Backward>(),
    }
}

/// Prepares implementation `imp` of workload `w` (parsing its input).
///
/// # Panics
/// On an unknown implementation name.
pub fn prepare(imp: &str, w: &Workload) -> Support {
    match imp {
        "nabla-lang" => return lang::prepare(w, lang::Backend::Interpreter),
        "nabla-compiled" => return lang::prepare(w, lang::Backend::Native),
        _ => {}
    }
    let text = w.file.map(read_input);
    let manual = match imp {
        "manual" => true,
        "nabla" | "nabla-fwd" => false,
        other => panic!("unknown implementation {other}"),
    };
    if imp == "nabla-fwd" && w.family != Family::Ba {
        return Support::Cannot(
            "not applicable: forward mode is only registered for BA's 15-input blocks",
        );
    }
    match w.family {
        Family::Gmm => {
            let data = gmm::GmmInput::parse(text.as_deref().unwrap_or_default());
            let primal_data = data.clone();
            runs(
                move || Some(vec![gmm::primal(&primal_data)]),
                move || {
                    gradient_eval(if manual {
                        gmm::gradient_manual(&data)
                    } else {
                        gmm::gradient_nabla(&data)
                    })
                },
            )
        }
        Family::Lstm => {
            let data = lstm::LstmInput::parse(text.as_deref().unwrap_or_default());
            let primal_data = data.clone();
            runs(
                move || Some(vec![lstm::primal(&primal_data)]),
                move || {
                    gradient_eval(if manual {
                        lstm::gradient_manual(&data)
                    } else {
                        lstm::gradient_nabla(&data)
                    })
                },
            )
        }
        Family::Ba => {
            let data = ba::BaInput::parse(text.as_deref().unwrap_or_default());
            let primal_data = data.clone();
            let forward = imp == "nabla-fwd";
            runs(
                move || {
                    let r = ba::primal(&primal_data);
                    Some([r.reproj, r.weight].concat())
                },
                move || {
                    ba_eval(if manual {
                        ba::jacobian_manual(&data)
                    } else if forward {
                        ba::jacobian_nabla_forward(&data)
                    } else {
                        ba::jacobian_nabla_reverse(&data)
                    })
                },
            )
        }
        Family::Saddle(v) => runs(
            || None,
            move || Evaluation {
                values: if manual {
                    saddle::run_manual().to_vec()
                } else {
                    saddle_run(v).to_vec()
                },
                derivative: Vec::new(),
            },
        ),
        Family::Particle(v) => runs(
            || None,
            move || Evaluation {
                values: vec![if manual {
                    particle::run_manual()
                } else {
                    particle_run(v)
                }],
                derivative: Vec::new(),
            },
        ),
    }
}

/// What an evaluation is compared with.
#[derive(Clone, Debug)]
pub struct Reference {
    /// Expected values (checked where given).
    pub values: Option<Vec<f64>>,
    /// Expected derivative (checked where given).
    pub derivative: Option<Vec<f64>>,
    /// Where the expectation comes from: "oracle", "expected (BENCHMARKS.md)" or
    /// "manual" (no oracle for this input: the hand-written derivative, itself
    /// checked against the oracle on the smallest input).
    pub source: &'static str,
    /// For the nested benchmarks: compare by plain relative error |x − y|/|y|, since
    /// their optima are small numbers that the absolute-below-one rule would accept
    /// almost anything for.
    pub strictly_relative: bool,
}

/// The oracle for workload `w`, if it has one (from oracle.json or BENCHMARKS.md).
pub fn oracle_reference(w: &Workload) -> Option<Reference> {
    match w.family {
        Family::Saddle(_) => Some(Reference {
            values: Some(vec![saddle::EXPECTED; 4]),
            derivative: None,
            source: "expected (BENCHMARKS.md)",
            strictly_relative: true,
        }),
        Family::Particle(_) => Some(Reference {
            values: Some(vec![particle::EXPECTED]),
            derivative: None,
            source: "expected (BENCHMARKS.md)",
            strictly_relative: true,
        }),
        _ => {
            let key = w.oracle?;
            let all = oracle();
            let o = &all[key];
            let (values, derivative) = match w.family {
                Family::Gmm | Family::Lstm => (
                    vec![o["objective"].as_f64().expect("objective")],
                    oracle_vec(&o["gradient"]),
                ),
                Family::Ba => {
                    // Every observation is the same, so the oracle gives one pair
                    // and one weight residual.
                    let data = ba::BaInput::parse(&read_input(w.file.expect("BA has a file")));
                    let pair = oracle_vec(&o["reproj_err_each_observation"]);
                    let mut values: Vec<f64> = pair.repeat(data.p);
                    values.extend(vec![o["w_err_each"].as_f64().expect("w_err"); data.p]);
                    (values, oracle_vec(&o["jacobian"]["csr_values_row_major"]))
                }
                _ => unreachable!(),
            };
            Some(Reference {
                values: Some(values),
                derivative: Some(derivative),
                source: "oracle",
                strictly_relative: false,
            })
        }
    }
}

/// The reference made from another implementation's evaluation (the manual one).
pub fn reference_from(eval: &Evaluation, source: &'static str) -> Reference {
    Reference {
        values: Some(eval.values.clone()),
        derivative: Some(eval.derivative.clone()),
        source,
        strictly_relative: false,
    }
}

/// The largest disagreement of `eval` with `reference` over values and derivative.
pub fn disagreement(eval: &Evaluation, reference: &Reference) -> f64 {
    let compare = |xs: &[f64], ys: &[f64]| {
        if reference.strictly_relative {
            if xs.len() != ys.len() {
                return f64::INFINITY;
            }
            xs.iter().zip(ys).fold(0.0_f64, |worst, (&x, &y)| {
                let e = (x - y).abs() / y.abs();
                if e.is_nan() {
                    f64::INFINITY
                } else {
                    worst.max(e)
                }
            })
        } else {
            max_rel_err(xs, ys)
        }
    };
    let mut worst: f64 = 0.0;
    if let Some(values) = &reference.values {
        worst = worst.max(compare(&eval.values, values));
    }
    if let Some(derivative) = &reference.derivative {
        worst = worst.max(compare(&eval.derivative, derivative));
    }
    worst
}

/// The largest disagreement with `reference` of what `runner` computes:
/// its derivative evaluation (values and derivative) and its primal's
/// values, whichever it has (infinite if it has neither).
pub fn check_runner(runner: &dyn Runner, reference: &Reference) -> f64 {
    let mut worst = f64::NEG_INFINITY;
    if let Some(eval) = runner.derivative() {
        worst = worst.max(disagreement(&eval, reference));
    }
    if let Some(values) = runner.primal() {
        let values_only = Reference {
            derivative: None,
            ..reference.clone()
        };
        let eval = Evaluation {
            values,
            derivative: Vec::new(),
        };
        worst = worst.max(disagreement(&eval, &values_only));
    }
    if worst == f64::NEG_INFINITY {
        f64::INFINITY
    } else {
        worst
    }
}

/// True if a disagreement passes the gate.
pub fn passes(disagreement: f64) -> bool {
    disagreement < TOLERANCE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::rel_err;

    #[test]
    fn rel_err_is_used_for_adbench_references() {
        let r = Reference {
            values: Some(vec![1e-12]),
            derivative: None,
            source: "t",
            strictly_relative: false,
        };
        let e = Evaluation {
            values: vec![2e-12],
            derivative: vec![],
        };
        assert_eq!(disagreement(&e, &r), rel_err(2e-12, 1e-12));
        assert!(passes(disagreement(&e, &r)));
    }
}
