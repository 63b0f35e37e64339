//! The nabla language's implementation of every workload: the programs in
//! `bench/nabla/*.nabla`, run by the language's interpreter in-process
//! (`nabla_lang::driver`, the same code the `nabla` binary runs).
//!
//! **How the data gets in.** The language has no file I/O, so each program
//! defines its entry points as functions of the input — for GMM
//! `primal input` and `derivative input` — and the harness applies them to a
//! nabla value built in Rust from the parsed ADBench file ([`Data`]). Before
//! anything runs, the type checker's type of every entry point is compared
//! with the interface below (so the value the harness builds has the type
//! the program expects). The result is flattened to `f64`s in order: the
//! first component of `derivative`'s pair is the values (objective /
//! residuals), the second the derivative (gradient / Jacobian non-zeros in
//! CSR row-major order). The nested benchmarks take `()`.
//!
//! The same input can be written as source text, `def input = ...`
//! ([`prelude`], `nabla-bench lang-input ID`), so that the `nabla` binary
//! runs the same program: `(nabla-bench lang-input gmm_test; cat
//! bench/nabla/gmm.nabla; echo 'def main = derivative input') > g.nabla;
//! nabla run g.nabla`. The harness does not time that route: its parse and
//! check would be dominated by the data (and ba8's literal is beyond the
//! type checker's work budget).
//!
//! **What is timed.** Parsing and type-checking the program (`Session::load`)
//! and compiling it (desugaring and closure compilation,
//! `Session::compile`) are measured on their own ([`FrontEnd`]); the primal
//! and derivative times are one application of the entry point to the input
//! plus the flattening of the result, on a compiled program.
//!
//! **Backends.** The interpreter ([`Backend::Interpreter`], the `nabla-lang`
//! implementation) runs every entry point. Native code
//! ([`Backend::Native`], `nabla-compiled`) runs the primal — for the nested
//! benchmarks the hand-derived programs `saddle_manual`/`particle_manual` —
//! and the derivative entry (compiled differentiation, every operator and
//! nesting); its input is converted to native
//! representation once ([`nabla_native::Native::args`]), as the
//! interpreter's is built once, and its compile column is native
//! compilation (monomorphisation, typed IR, Cranelift) of the primal and
//! derivative entries.
//!
//! The language runs on a worker thread with the language's big native
//! stack (`nabla_lang::stack::run_with_stack`); its values are not `Send`,
//! so the worker builds the input and keeps it, and only `f64`s cross.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Instant;

use nabla_lang::driver::Session;
use nabla_lang::eval::Value;

use crate::registry::{Computation, Evaluation, Family, Runner, Support, Variant, Workload};
use crate::{ba, gmm, lstm};

/// One `.nabla` program: its path (for messages) and text.
#[derive(Clone, Copy, Debug)]
pub struct Program {
    /// Path relative to the repository root.
    pub path: &'static str,
    /// The source text (compiled into the binary).
    pub text: &'static str,
}

/// bench/nabla/gmm.nabla
pub const GMM: Program = Program {
    path: "bench/nabla/gmm.nabla",
    text: include_str!("../../../bench/nabla/gmm.nabla"),
};
/// bench/nabla/ba.nabla
pub const BA: Program = Program {
    path: "bench/nabla/ba.nabla",
    text: include_str!("../../../bench/nabla/ba.nabla"),
};
/// bench/nabla/lstm.nabla
pub const LSTM: Program = Program {
    path: "bench/nabla/lstm.nabla",
    text: include_str!("../../../bench/nabla/lstm.nabla"),
};
/// bench/nabla/nested.nabla
pub const NESTED: Program = Program {
    path: "bench/nabla/nested.nabla",
    text: include_str!("../../../bench/nabla/nested.nabla"),
};

const GMM_INPUT: &str = "(Vec Real, Vec (Vec Real), Vec (Vec Real), Vec (Vec Real), Real, Int)";
const LSTM_INPUT: &str = "(Vec (Vec Real), Vec (Vec Real), Vec (Vec Real), Vec (Vec Real))";
const BA_INPUT: &str = "(Vec (Vec Real), Vec (Vec Real), Vec Real, Vec (Vec Real))";

/// The interface a program must have for a family: entry point names and
/// their types, as the type checker prints them.
#[derive(Clone, Debug)]
pub struct Interface {
    /// The program.
    pub program: Program,
    /// The primal's entry point and type, if the workload has a primal.
    pub primal: Option<(&'static str, String)>,
    /// The derivative's entry point and type.
    pub derivative: (&'static str, String),
    /// For the nested benchmarks: the hand-derived program (no
    /// differentiation operator) that native code runs as their primal.
    pub manual: Option<(&'static str, String)>,
}

fn entry(name: &'static str, input: &str, output: &str) -> (&'static str, String) {
    (name, format!("{input} -> {output}"))
}

/// The interface of workload family `family`.
pub fn interface(family: Family) -> Interface {
    match family {
        Family::Gmm => Interface {
            program: GMM,
            primal: Some(entry("primal", GMM_INPUT, "Real")),
            derivative: entry(
                "derivative",
                GMM_INPUT,
                "(Real, (Vec Real, Vec (Vec Real), Vec (Vec Real)))",
            ),
            manual: None,
        },
        Family::Lstm => Interface {
            program: LSTM,
            primal: Some(entry("primal", LSTM_INPUT, "Real")),
            derivative: entry(
                "derivative",
                LSTM_INPUT,
                "(Real, (Vec (Vec Real), Vec (Vec Real)))",
            ),
            manual: None,
        },
        Family::Ba => Interface {
            program: BA,
            primal: Some(entry("primal", BA_INPUT, "(Vec (Vec Real), Vec Real)")),
            derivative: entry(
                "derivative",
                BA_INPUT,
                "((Vec (Vec Real), Vec Real), (Vec (Vec (Vec Real)), Vec Real))",
            ),
            manual: None,
        },
        Family::Saddle(v) | Family::Particle(v) => {
            let name = match (family, v) {
                (Family::Saddle(_), Variant::FF) => "saddle_ff",
                (Family::Saddle(_), Variant::FR) => "saddle_fr",
                (Family::Saddle(_), Variant::RF) => "saddle_rf",
                (Family::Saddle(_), Variant::RR) => "saddle_rr",
                (_, Variant::FF) => "particle_ff",
                (_, Variant::FR) => "particle_fr",
                (_, Variant::RF) => "particle_rf",
                (_, Variant::RR) => "particle_rr",
            };
            let manual = match family {
                Family::Saddle(_) => "saddle_manual",
                _ => "particle_manual",
            };
            Interface {
                program: NESTED,
                primal: None,
                derivative: entry(name, "()", "Vec Real"),
                manual: Some(entry(manual, "()", "Vec Real")),
            }
        }
    }
}

/// A nabla value described in plain (sendable) Rust data: the input the
/// harness passes to a program.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// `()`
    Unit,
    /// An Int.
    Int(i64),
    /// A Real.
    Real(f64),
    /// A `Vec Real`.
    Reals(Vec<f64>),
    /// A tuple.
    Tuple(Vec<Data>),
    /// A vector of other values.
    Vec(Vec<Data>),
}

impl Data {
    /// The nabla value.
    pub fn to_value(&self) -> Value {
        use std::rc::Rc;
        match self {
            Data::Unit => Value::Unit,
            Data::Int(n) => Value::Int(*n),
            Data::Real(x) => Value::Real(*x),
            Data::Reals(xs) => Value::reals(xs.clone()),
            Data::Tuple(items) => Value::Tuple(Rc::new(items.iter().map(Data::to_value).collect())),
            Data::Vec(items) => Value::values(items.iter().map(Data::to_value).collect()),
        }
    }

    /// The value as nabla source text (Reals printed to round-trip exactly).
    pub fn to_source(&self, out: &mut String) {
        use std::fmt::Write;
        let list = |out: &mut String,
                    open: char,
                    close: char,
                    n: usize,
                    f: &dyn Fn(&mut String, usize)| {
            out.push(open);
            for i in 0..n {
                if i > 0 {
                    out.push_str(", ");
                }
                f(out, i);
            }
            out.push(close);
        };
        match self {
            Data::Unit => out.push_str("()"),
            Data::Int(n) => write!(out, "{n}").expect("write to String"),
            Data::Real(x) => write!(out, "{x:?}").expect("write to String"),
            Data::Reals(xs) => list(out, '[', ']', xs.len(), &|out, i| {
                write!(out, "{:?}", xs[i]).expect("write to String")
            }),
            Data::Tuple(items) => list(out, '(', ')', items.len(), &|out, i| {
                items[i].to_source(out)
            }),
            Data::Vec(items) => list(out, '[', ']', items.len(), &|out, i| {
                items[i].to_source(out)
            }),
        }
    }
}

/// `n` rows of `width` values from `xs` (which must hold at least n·width).
fn rows(xs: &[f64], width: usize, n: usize) -> Data {
    Data::Vec(
        (0..n)
            .map(|r| Data::Reals(xs[r * width..(r + 1) * width].to_vec()))
            .collect(),
    )
}

/// GMM's input `(alphas, means, icfs, x, gamma, m)`.
pub fn gmm_data(g: &gmm::GmmInput) -> Data {
    let (d, k) = (g.d, g.k);
    let icf = gmm::icf_len(d);
    Data::Tuple(vec![
        Data::Reals(g.params[..k].to_vec()),
        rows(&g.params[k..], d, k),
        rows(&g.params[k + k * d..], icf, k),
        rows(&g.x, d, g.n),
        Data::Real(g.gamma),
        Data::Int(g.m as i64),
    ])
}

/// LSTM's input `(main, extra, state, seq)`.
pub fn lstm_data(l: &lstm::LstmInput) -> Data {
    let b = l.b;
    Data::Tuple(vec![
        rows(&l.params, 4 * b, 2 * l.l),
        rows(&l.params[8 * l.l * b..], b, 3),
        rows(&l.state, b, 2 * l.l),
        rows(&l.seq, b, l.c),
    ])
}

/// BA's input `(cams, points, weights, features)`.
pub fn ba_data(b: &ba::BaInput) -> Data {
    Data::Tuple(vec![
        rows(&b.cams, ba::CAM, b.n),
        rows(&b.points, 3, b.m),
        Data::Reals(b.weights.clone()),
        rows(&b.features, 2, b.p),
    ])
}

/// The input of workload `w` (parsing its file).
pub fn input(w: &Workload) -> Data {
    let text = w.file.map(crate::data::read_input).unwrap_or_default();
    match w.family {
        Family::Gmm => gmm_data(&gmm::GmmInput::parse(&text)),
        Family::Lstm => lstm_data(&lstm::LstmInput::parse(&text)),
        Family::Ba => ba_data(&ba::BaInput::parse(&text)),
        Family::Saddle(_) | Family::Particle(_) => Data::Unit,
    }
}

/// Workload `w`'s input as nabla source, `def input = ...`, to prepend to its
/// program for the `nabla` binary.
pub fn prelude(w: &Workload) -> String {
    let mut s = format!(
        "# The input of {} for {} (written by `nabla-bench lang-input`).\ndef input = ",
        w.id,
        interface(w.family).program.path
    );
    input(w).to_source(&mut s);
    s.push('\n');
    s
}

/// Appends the Real leaves of `v` to `out` in order (tuples left to right,
/// vectors in index order). Any other leaf is an error.
pub fn flatten(v: &Value, out: &mut Vec<f64>) -> Result<(), String> {
    match v {
        Value::Real(x) => out.push(*x),
        Value::RealVec(xs) => out.extend_from_slice(xs),
        Value::Tuple(items) => {
            for item in items.iter() {
                flatten(item, out)?;
            }
        }
        Value::Vec(items) => {
            for item in items.iter() {
                flatten(item, out)?;
            }
        }
        other => return Err(format!("unexpected value in a result: {other:?}")),
    }
    Ok(())
}

/// Front-end times of a program (each the minimum over repeated runs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrontEnd {
    /// Parsing and type checking (`Session::load`).
    pub parse_check_s: f64,
    /// What the backend does before it can run: desugaring to the core IR
    /// and compiling to closures (`Session::compile`) for the interpreter;
    /// monomorphising, lowering to the typed IR and generating machine
    /// code with Cranelift for native code.
    pub compile_s: f64,
    /// Runs each minimum was taken over.
    pub runs: usize,
}

/// Which of the language's backends runs the programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The closure-compiling interpreter (`nabla run --backend interp`).
    Interpreter,
    /// Native code (`nabla run --backend native`), derivatives included.
    Native,
}

enum Request {
    Primal,
    Derivative,
    FrontEnd,
    /// Run a computation this many times and say how long it took.
    Time(Computation, usize),
}

enum Response {
    Ready,
    Primal(Option<Vec<f64>>),
    Derivative(Option<Evaluation>),
    FrontEnd(FrontEnd),
    Seconds(f64),
    Failed(String),
}

/// A workload prepared on its worker thread.
pub struct LangRunner {
    requests: Option<Sender<Request>>,
    responses: Receiver<Response>,
    worker: Option<JoinHandle<()>>,
    id: &'static str,
}

/// The minimum time of `f` over repeated runs for at least `budget` seconds
/// (at most 1000 runs), and the number of runs.
fn min_time<T>(budget: f64, mut f: impl FnMut() -> T) -> (f64, usize) {
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut runs = 0;
    while runs < 1000 && (runs < 3 || start.elapsed().as_secs_f64() < budget) {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
        runs += 1;
    }
    (best, runs)
}

fn load(program: Program) -> Result<Session, String> {
    let mut session = Session::new();
    match session.load(program.path, program.text) {
        Ok(_) => Ok(session),
        Err(diags) => Err(session.render(&diags)),
    }
}

/// Checks that every entry point of `iface` has the type the harness
/// passes and reads.
fn check_interface(session: &mut Session, iface: &Interface) -> Result<(), String> {
    let entries = iface
        .primal
        .iter()
        .chain([&iface.derivative])
        .chain(&iface.manual);
    for (name, want) in entries {
        let got = session
            .type_of_expr("<harness>", name)
            .map_err(|d| session.render(&d))?;
        if got != *want {
            return Err(format!(
                "{}: `{name}` has type {got}, but the harness passes and reads {want}",
                iface.program.path
            ));
        }
    }
    Ok(())
}

/// The values and derivative of a `derivative` entry's result.
fn evaluation(v: &Value, has_primal: bool) -> Result<Evaluation, String> {
    let (values, deriv) = match v {
        Value::Tuple(pair) if pair.len() == 2 && has_primal => (&pair[0], Some(&pair[1])),
        other => (other, None),
    };
    let mut eval = Evaluation {
        values: Vec::new(),
        derivative: Vec::new(),
    };
    flatten(values, &mut eval.values)?;
    if let Some(d) = deriv {
        flatten(d, &mut eval.derivative)?;
    }
    Ok(eval)
}

fn flattened(v: &Value) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    flatten(v, &mut out)?;
    Ok(out)
}

/// The program's entry points prepared by one backend.
enum Prepared {
    Interpreter {
        compiled: Box<nabla_lang::driver::Compiled>,
        primal: Option<Value>,
        derivative: Value,
        input: Value,
    },
    Native {
        /// The primal, or for the nested benchmarks the hand-derived program.
        native: Box<nabla_native::Native>,
        args: nabla_native::Args,
        /// The derivative entry, if native code compiles it.
        derivative: Option<(Box<nabla_native::Native>, nabla_native::Args)>,
    },
}

/// Compiles `entry` of `session` to native code.
fn compile_native(session: &Session, entry: &str) -> Result<nabla_native::Native, String> {
    let unsupported = |u: nabla_lang::core::lower_typed::Unsupported| {
        format!("native code does not handle {} yet", u.what)
    };
    let (prog, entry) = session.typed_program(entry).map_err(unsupported)?;
    nabla_native::Native::compile(&prog, entry, &nabla_native::Options::default())
        .map_err(unsupported)
}

fn prepare_backend(
    backend: Backend,
    session: &Session,
    iface: &Interface,
    data: &Data,
) -> Result<Prepared, String> {
    match backend {
        Backend::Interpreter => {
            let mut compiled = session.compile().map_err(|d| session.render(&d))?;
            let primal = match &iface.primal {
                Some((name, _)) => Some(compiled.global(name).map_err(|d| session.render(&d))?),
                None => None,
            };
            let derivative = compiled
                .global(iface.derivative.0)
                .map_err(|d| session.render(&d))?;
            Ok(Prepared::Interpreter {
                compiled: Box::new(compiled),
                primal,
                derivative,
                input: data.to_value(),
            })
        }
        Backend::Native => {
            let (entry, _) = iface
                .primal
                .as_ref()
                .or(iface.manual.as_ref())
                .ok_or("no entry point for native code")?;
            let native = compile_native(session, entry)?;
            let args = native.args(&[data.to_value()]).map_err(|e| e.message)?;
            // A derivative native code cannot compile yet (reverse mode) is
            // simply absent from the column.
            let derivative = match compile_native(session, iface.derivative.0) {
                Ok(d) => {
                    let a = d.args(&[data.to_value()]).map_err(|e| e.message)?;
                    Some((Box::new(d), a))
                }
                Err(_) => None,
            };
            Ok(Prepared::Native {
                native: Box::new(native),
                args,
                derivative,
            })
        }
    }
}

impl Prepared {
    fn primal(&mut self, session: &Session) -> Result<Option<Vec<f64>>, String> {
        match self {
            Prepared::Interpreter { primal: None, .. } => Ok(None),
            Prepared::Interpreter {
                compiled,
                primal: Some(f),
                input,
                ..
            } => match compiled.apply(f.clone(), input.clone()) {
                Ok(v) => flattened(&v).map(Some),
                Err(d) => Err(session.render(&d)),
            },
            // The reals straight from native memory, as `flatten` orders them.
            Prepared::Native { native, args, .. } => {
                native.call_reals(args).map(Some).map_err(|e| e.message)
            }
        }
    }

    fn derivative(
        &mut self,
        session: &Session,
        has_primal: bool,
    ) -> Result<Option<Evaluation>, String> {
        match self {
            Prepared::Interpreter {
                compiled,
                derivative,
                input,
                ..
            } => match compiled.apply(derivative.clone(), input.clone()) {
                Ok(v) => evaluation(&v, has_primal).map(Some),
                Err(d) => Err(session.render(&d)),
            },
            Prepared::Native {
                derivative: None, ..
            } => Ok(None),
            // The reals straight from native memory, value and derivative
            // apart, as `evaluation` splits them.
            Prepared::Native {
                derivative: Some((d, args)),
                ..
            } => {
                let pair = has_primal
                    && matches!(d.result_type(), nabla_lang::types::Type::Tuple(ts) if ts.len() == 2);
                if pair {
                    let mut parts = d.call_real_parts(args).map_err(|e| e.message)?;
                    let derivative = parts.pop().unwrap_or_default();
                    let values = parts.pop().unwrap_or_default();
                    Ok(Some(Evaluation { values, derivative }))
                } else {
                    let values = d.call_reals(args).map_err(|e| e.message)?;
                    Ok(Some(Evaluation {
                        values,
                        derivative: Vec::new(),
                    }))
                }
            }
        }
    }
}

/// The worker: loads, checks and compiles the program, checks the interface,
/// builds the input, reports readiness, then serves requests until the
/// runner is dropped.
fn serve(
    backend: Backend,
    iface: Interface,
    data: Data,
    requests: Receiver<Request>,
    responses: Sender<Response>,
) {
    let setup = || -> Result<_, String> {
        let mut session = load(iface.program)?;
        check_interface(&mut session, &iface)?;
        let prepared = prepare_backend(backend, &session, &iface, &data)?;
        Ok((session, prepared))
    };
    let (session, mut prepared) = match setup() {
        Ok(s) => s,
        Err(e) => {
            let _ = responses.send(Response::Failed(e));
            return;
        }
    };
    drop(data);
    if responses.send(Response::Ready).is_err() {
        return;
    }
    let has_primal = iface.primal.is_some();
    for request in requests {
        let response = match request {
            Request::Primal => prepared.primal(&session).map(Response::Primal),
            Request::Time(what, reps) => {
                let start = Instant::now();
                let mut outcome = Ok(());
                for _ in 0..reps {
                    outcome = match what {
                        Computation::Primal => prepared.primal(&session).map(drop),
                        Computation::Derivative => {
                            prepared.derivative(&session, has_primal).map(drop)
                        }
                    };
                    if outcome.is_err() {
                        break;
                    }
                }
                let seconds = start.elapsed().as_secs_f64();
                outcome.map(|()| Response::Seconds(seconds))
            }
            Request::Derivative => prepared
                .derivative(&session, has_primal)
                .map(Response::Derivative),
            Request::FrontEnd => {
                let program = iface.program;
                let (parse_check_s, runs) = min_time(0.1, || load(program).is_ok());
                let (compile_s, _) = match backend {
                    Backend::Interpreter => min_time(0.1, || session.compile().is_ok()),
                    Backend::Native => {
                        // The primal (or hand-derived) entry and the
                        // derivative entry, each compiled on its own.
                        let primal = iface.primal.as_ref().or(iface.manual.as_ref());
                        let entries: Vec<&str> = primal
                            .map(|e| e.0)
                            .into_iter()
                            .chain([iface.derivative.0])
                            .collect();
                        min_time(0.1, || {
                            entries.iter().all(|e| compile_native(&session, e).is_ok())
                        })
                    }
                };
                Ok(Response::FrontEnd(FrontEnd {
                    parse_check_s,
                    compile_s,
                    runs,
                }))
            }
        };
        let response = response.unwrap_or_else(Response::Failed);
        if responses.send(response).is_err() {
            return;
        }
    }
}

impl LangRunner {
    /// Starts the worker for workload `w` on `backend` and waits until it
    /// has loaded, checked and compiled the program and built the input.
    ///
    /// # Panics
    /// If the program does not load, check or compile, or does not have the
    /// interface's types: a broken program must fail the run, not be skipped.
    pub fn start(w: &Workload, backend: Backend) -> LangRunner {
        let iface = interface(w.family);
        let data = input(w);
        let (requests, inbox) = channel();
        let (outbox, responses) = channel();
        let worker = std::thread::Builder::new()
            .name(format!("nabla-lang {}", w.id))
            .spawn(move || {
                // The language runs on a thread of its own with the big stack.
                let _ = nabla_lang::stack::run_with_stack(move || {
                    serve(backend, iface, data, inbox, outbox)
                });
            })
            .expect("spawn the nabla-lang worker");
        match responses.recv() {
            Ok(Response::Ready) => {}
            Ok(Response::Failed(e)) => panic!("nabla-lang on {}: {e}", w.id),
            _ => panic!("nabla-lang on {}: the worker thread died", w.id),
        }
        LangRunner {
            requests: Some(requests),
            responses,
            worker: Some(worker),
            id: w.id,
        }
    }

    fn ask(&self, request: Request) -> Response {
        let sent = self
            .requests
            .as_ref()
            .is_some_and(|r| r.send(request).is_ok());
        match (sent, self.responses.recv()) {
            (_, Ok(Response::Failed(e))) => panic!("nabla-lang on {}: {e}", self.id),
            (true, Ok(r)) => r,
            _ => panic!("nabla-lang on {}: the worker thread died", self.id),
        }
    }

    /// Times of the program's front end (parse and check, compile).
    pub fn front_end(&self) -> FrontEnd {
        match self.ask(Request::FrontEnd) {
            Response::FrontEnd(f) => f,
            _ => unreachable!("the worker answers in order"),
        }
    }
}

impl Runner for LangRunner {
    fn primal(&self) -> Option<Vec<f64>> {
        match self.ask(Request::Primal) {
            Response::Primal(p) => p,
            _ => unreachable!("the worker answers in order"),
        }
    }

    fn derivative(&self) -> Option<Evaluation> {
        match self.ask(Request::Derivative) {
            Response::Derivative(e) => e,
            _ => unreachable!("the worker answers in order"),
        }
    }

    fn front_end(&self) -> Option<FrontEnd> {
        Some(LangRunner::front_end(self))
    }

    fn time(&self, what: Computation, reps: usize) -> f64 {
        match self.ask(Request::Time(what, reps)) {
            Response::Seconds(s) => s,
            _ => unreachable!("the worker answers in order"),
        }
    }
}

impl Drop for LangRunner {
    fn drop(&mut self) {
        // Closing the request channel ends the worker; wait for it so that its
        // memory is returned before the next workload runs.
        self.requests = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// Workloads the interpreter is too slow for within the full run's budget,
/// and why (measured; see bench/README.md).
pub fn too_slow(w: &Workload) -> Option<&'static str> {
    match w.id {
        "gmm_d64_K100" => Some(TOO_SLOW_GMM_D64),
        _ => None,
    }
}

const TOO_SLOW_GMM_D64: &str = "cannot (too slow): in the interpreter one primal evaluation takes about 45 s and one derivative about 70 s with a 14 GB reverse trace (measured on the first 100 of the 1000 points: 4.2 s and 6.8 s, 1.5 GB); the check and 3 timed calls of each would not fit the full run's 15-minute budget";

/// The nabla language's support for workload `w` on `backend`.
pub fn prepare(w: &Workload, backend: Backend) -> Support {
    match (backend, too_slow(w)) {
        (Backend::Interpreter, Some(why)) => Support::Cannot(why),
        _ => Support::Runs(Box::new(LangRunner::start(w, backend))),
    }
}
