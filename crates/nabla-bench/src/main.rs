//! `nabla-bench`: checks every Rust implementation against the oracle, then times
//! them, printing one JSON object per line for `bench/run`.
//!
//! ```text
//! nabla-bench check [--quick] [--refs DIR]   correctness gate; exit 1 on any disagreement
//! nabla-bench time  [--quick] [--workload ID]... [--impl NAME]...
//! nabla-bench list  [--quick]                the workloads and implementations
//! nabla-bench lang-input ID                  workload ID's input as nabla source
//!                                            (`def input = ...`, for the `nabla` binary)
//! ```
//!
//! `check` also writes each workload's reference (oracle, or the hand-written
//! derivative where there is no oracle) to DIR as raw little-endian f64, so the
//! Python implementations are held to the same standard.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use nabla_bench::registry::{
    Computation, IMPLEMENTATIONS, Reference, Support, WORKLOADS, Workload, check_runner,
    oracle_reference, passes, prepare, reference_from,
};
use serde_json::json;

struct Options {
    command: String,
    quick: bool,
    refs: Option<PathBuf>,
    workloads: Vec<String>,
    impls: Vec<String>,
}

fn parse_args() -> Options {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_else(|| usage("no command"));
    if command == "lang-input" {
        let id = args.next().unwrap_or_else(|| usage("lang-input ID"));
        return Options {
            command,
            quick: false,
            refs: None,
            workloads: vec![id],
            impls: Vec::new(),
        };
    }
    let mut o = Options {
        command,
        quick: false,
        refs: None,
        workloads: Vec::new(),
        impls: Vec::new(),
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--refs" => o.refs = Some(args.next().unwrap_or_else(|| usage("--refs DIR")).into()),
            "--workload" => o
                .workloads
                .push(args.next().unwrap_or_else(|| usage("--workload ID"))),
            "--impl" => o
                .impls
                .push(args.next().unwrap_or_else(|| usage("--impl NAME"))),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    o
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "nabla-bench: {problem}\nusage: nabla-bench check|time|list [--quick] [--refs DIR] [--workload ID]... [--impl NAME]...\n       nabla-bench lang-input ID"
    );
    std::process::exit(2)
}

/// The workloads a run times: `--quick` the small sizes, otherwise all but the
/// oracle-only test inputs.
fn timed(w: &Workload, quick: bool) -> bool {
    if quick {
        w.quick
    } else {
        w.quick || !w.smallest
    }
}

fn emit(value: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}").expect("stdout");
    out.flush().expect("stdout");
}

fn main() {
    let o = parse_args();
    let selected: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| o.workloads.is_empty() || o.workloads.iter().any(|id| id == w.id))
        .collect();
    let impl_selected = |name: &str| o.impls.is_empty() || o.impls.iter().any(|n| n == name);
    match o.command.as_str() {
        "list" => {
            for w in &selected {
                emit(
                    json!({"kind": "workload", "id": w.id, "timed": timed(w, o.quick), "oracle": w.smallest}),
                );
            }
            for imp in IMPLEMENTATIONS {
                emit(json!({"kind": "implementation", "name": imp.name, "about": imp.about}));
            }
        }
        "check" => {
            let all_ok = check(&selected, o.quick, o.refs.as_deref(), &impl_selected);
            std::process::exit(if all_ok { 0 } else { 1 });
        }
        "time" => {
            for w in selected
                .iter()
                .filter(|w| timed(w, o.quick) || !o.workloads.is_empty())
            {
                for imp in IMPLEMENTATIONS.iter().filter(|i| impl_selected(i.name)) {
                    time(w, imp.name, o.quick);
                }
            }
        }
        "lang-input" => {
            let Some(w) = selected.first() else {
                usage(&format!("unknown workload {}", o.workloads[0]))
            };
            // A closed pipe (`| head`) ends the output quietly.
            use std::io::Write;
            let _ = std::io::stdout().write_all(nabla_bench::lang::prelude(w).as_bytes());
        }
        other => usage(&format!("unknown command {other}")),
    }
}

/// Runs every implementation once on every oracle input and every timed input and
/// compares it with the oracle, or (no oracle) with the hand-written derivative.
fn check(
    selected: &[&Workload],
    quick: bool,
    refs: Option<&std::path::Path>,
    impl_selected: &dyn Fn(&str) -> bool,
) -> bool {
    let mut all_ok = true;
    for w in selected.iter().filter(|w| w.smallest || timed(w, quick)) {
        eprintln!("check {}", w.id);
        let reference: Reference = match oracle_reference(w) {
            Some(r) => r,
            None => match prepare("manual", w) {
                Support::Runs(r) => reference_from(
                    &r.derivative()
                        .expect("manual differentiates every workload"),
                    "manual",
                ),
                _ => unreachable!("manual implements every workload"),
            },
        };
        if let Some(dir) = refs {
            write_reference(dir, w.id, &reference);
        }
        for imp in IMPLEMENTATIONS.iter().filter(|i| impl_selected(i.name)) {
            match prepare(imp.name, w) {
                Support::Runs(runner) => {
                    let start = Instant::now();
                    let err = check_runner(runner.as_ref(), &reference);
                    let ok = passes(err);
                    all_ok &= ok;
                    emit(
                        json!({"kind": "check", "workload": w.id, "impl": imp.name, "status": if ok {"ok"} else {"FAIL"},
                        "max_error": err, "reference": reference.source, "seconds": start.elapsed().as_secs_f64()}),
                    );
                }
                Support::Cannot(why) => emit(
                    json!({"kind": "check", "workload": w.id, "impl": imp.name, "status": "cannot", "why": why}),
                ),
                Support::Pending(why) => emit(
                    json!({"kind": "check", "workload": w.id, "impl": imp.name, "status": "pending", "why": why}),
                ),
            }
        }
    }
    all_ok
}

fn write_reference(dir: &std::path::Path, id: &str, r: &Reference) {
    std::fs::create_dir_all(dir).expect("create refs dir");
    let raw = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let values = r.values.clone().unwrap_or_default();
    let derivative = r.derivative.clone().unwrap_or_default();
    std::fs::write(dir.join(format!("{id}.values.f64")), raw(&values)).expect("write ref");
    std::fs::write(dir.join(format!("{id}.derivative.f64")), raw(&derivative)).expect("write ref");
    let meta = json!({"source": r.source, "strictly_relative": r.strictly_relative,
        "has_values": r.values.is_some(), "has_derivative": r.derivative.is_some()});
    std::fs::write(dir.join(format!("{id}.json")), meta.to_string()).expect("write ref");
}

/// Seconds per call by the method of BENCHMARKS.md: repeat until a batch takes
/// ≥ 0.2 s, then the minimum over 5 batches (3 when one call takes over a second,
/// 2 with `--quick`, to stay in the time budget). Returns (seconds per call, calls per batch, batches).
/// `batch(reps)` runs `reps` calls and returns the seconds they took.
fn measure(quick: bool, mut batch: impl FnMut(usize) -> f64) -> (f64, usize, usize) {
    let mut reps = 1;
    let first = loop {
        let t = batch(reps);
        if t >= 0.2 {
            break t / reps as f64;
        }
        // Aim a little past 0.2 s so the next batch usually qualifies.
        reps = ((reps as f64) * (0.25 / t.max(1e-9)))
            .ceil()
            .max(reps as f64 * 2.0) as usize;
    };
    // A call over 3 s is measured once (it is long enough to be steady, and
    // repeating it would cost the full run its 15-minute budget); over 1 s, 3 batches.
    let batches = if first > 3.0 {
        1
    } else if quick {
        2
    } else if first > 1.0 {
        3
    } else {
        5
    };
    let mut best = first;
    for _ in 1..batches {
        best = best.min(batch(reps) / reps as f64);
    }
    (best, reps, batches)
}

fn time(w: &Workload, imp: &str, quick: bool) {
    eprintln!("time {} {}", w.id, imp);
    match prepare(imp, w) {
        Support::Runs(runner) => {
            let primal = runner
                .primal()
                .map(|_| measure(quick, |reps| runner.time(Computation::Primal, reps)));
            let derivative = runner
                .derivative()
                .map(|_| measure(quick, |reps| runner.time(Computation::Derivative, reps)));
            let mut record = json!({"kind": "time", "workload": w.id, "impl": imp, "status": "ok",
                "primal_s": primal.map(|p| p.0), "derivative_s": derivative.map(|d| d.0),
                "primal_reps": primal.map(|p| p.1), "derivative_reps": derivative.map(|d| d.1),
                "batches": derivative.or(primal).map(|d| d.2), "compile_s": 0.0});
            // An interpreted implementation: its front end, timed on its own.
            if let Some(f) = runner.front_end() {
                record["compile_s"] = json!(f.parse_check_s + f.compile_s);
                record["parse_check_s"] = json!(f.parse_check_s);
                record["lower_s"] = json!(f.compile_s);
                record["front_end_runs"] = json!(f.runs);
            }
            emit(record);
        }
        Support::Cannot(why) => emit(
            json!({"kind": "time", "workload": w.id, "impl": imp, "status": "cannot", "why": why}),
        ),
        Support::Pending(why) => emit(
            json!({"kind": "time", "workload": w.id, "impl": imp, "status": "pending", "why": why}),
        ),
    }
}
