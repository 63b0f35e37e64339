//! `nabla bench`: the interpreter and native code against CPython on the
//! same three programs, and the cost of `grad` against the function itself
//! on four programs (in the interpreter: native code does not differentiate
//! yet), each measured in the same run.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

struct Case {
    name: &'static str,
    nabla: &'static str,
    python: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "scalar loop, 10^7 iterations",
        nabla: include_str!("../bench/loop.nabla"),
        python: include_str!("../bench/loop.py"),
    },
    Case {
        name: "naive fib 27",
        nabla: include_str!("../bench/fib.nabla"),
        python: include_str!("../bench/fib.py"),
    },
    Case {
        name: "vector map+sum, 10^6 elements",
        nabla: include_str!("../bench/vecmap.nabla"),
        python: include_str!("../bench/vecmap.py"),
    },
];

/// A differentiable program: it defines `f` and an input `x`.
struct AdCase {
    name: &'static str,
    source: &'static str,
}

const AD_CASES: &[AdCase] = &[
    AdCase {
        name: "sharing chain y + y, 10^6 steps",
        source: include_str!("../bench/ad/chain.nabla"),
    },
    AdCase {
        name: "Rosenbrock, n = 10^5 (vectors)",
        source: include_str!("../bench/ad/rosenbrock.nabla"),
    },
    AdCase {
        name: "MLP 8-32-1 loss, 64 samples",
        source: include_str!("../bench/ad/mlp.nabla"),
    },
    AdCase {
        name: "saddle point, grad through nested grad loops",
        source: include_str!("../bench/ad/saddle.nabla"),
    },
];

/// Times `expr` evaluated in the context of `source` (parse, check and
/// compile included, which the caller cancels out with a baseline).
fn time_expr(source: &'static str, expr: &'static str) -> Result<(Duration, String), String> {
    let r = nabla_lang::stack::run_with_stack(move || {
        let mut s = nabla_lang::driver::Session::new();
        if let Err(ds) = s.load("bench.nabla", source) {
            return (Duration::ZERO, Err(s.render(&ds)));
        }
        let start = Instant::now();
        let out = s.eval_expr("<bench>", expr).map_err(|ds| s.render(&ds));
        (start.elapsed(), out)
    });
    match r {
        Some((d, Ok(v))) => Ok((d, v)),
        Some((_, Err(e))) => Err(e),
        None => Err("evaluator thread failed".into()),
    }
}

/// The differentiation table: `f x` and `grad f x`, each less the time of
/// evaluating `x` alone (which also covers checking and compiling).
fn run_ad(runs: usize) -> bool {
    println!("\n| program | f x | grad f x | grad / f |");
    println!("|---|---:|---:|---:|");
    let mut ok = true;
    for c in AD_CASES {
        let base = best(runs, || time_expr(c.source, "x"));
        let primal = best(runs, || time_expr(c.source, "f x"));
        let grad = best(runs, || time_expr(c.source, "grad f x"));
        match (base, primal, grad) {
            (Ok((b, _)), Ok((p, _)), Ok((g, _))) => {
                let (p, g) = (p.saturating_sub(b), g.saturating_sub(b));
                println!(
                    "| {} | {:.4} s | {:.4} s | {:.2} |",
                    c.name,
                    p.as_secs_f64(),
                    g.as_secs_f64(),
                    g.as_secs_f64() / p.as_secs_f64()
                );
            }
            (b, p, g) => {
                ok = false;
                let e = [b.err(), p.err(), g.err()].into_iter().flatten().next();
                println!("| {} | error: {} | - | - |", c.name, e.unwrap_or_default());
            }
        }
    }
    ok
}

fn time_nabla(src: &'static str) -> Result<(Duration, String), String> {
    let r = nabla_lang::stack::run_with_stack(move || {
        let mut s = nabla_lang::driver::Session::new();
        let start = Instant::now();
        let out = s
            .load("bench.nabla", src)
            .and_then(|_| s.run_main())
            .map_err(|ds| s.render(&ds));
        (start.elapsed(), out)
    });
    match r {
        Some((d, Ok(v))) => Ok((d, v)),
        Some((_, Err(e))) => Err(e),
        None => Err("evaluator thread failed".into()),
    }
}

/// `main` of `src` compiled to native code and run: the time of parsing,
/// checking and compiling, and of the run, apart.
fn time_native(src: &'static str) -> Result<(Duration, Duration, String), String> {
    let r = nabla_lang::stack::run_with_stack(move || {
        let mut s = nabla_lang::driver::Session::new();
        let start = Instant::now();
        if let Err(ds) = s.load("bench.nabla", src) {
            return Err(s.render(&ds));
        }
        let (prog, entry) = s
            .typed_program("main")
            .map_err(|u| format!("native code does not handle {} yet", u.what))?;
        let native =
            nabla_native::Native::compile_main(&prog, entry, &nabla_native::Options::default())
                .map_err(|u| format!("native code does not handle {} yet", u.what))?;
        let prepared = start.elapsed();
        let start = Instant::now();
        let v = native.run().map_err(|e| s.render(&[e.into()]))?;
        Ok((
            prepared,
            start.elapsed(),
            nabla_lang::pretty::print_value(&v),
        ))
    });
    r.unwrap_or_else(|| Err("evaluator thread failed".into()))
}

fn time_python(src: &str) -> Result<(Duration, String), String> {
    let dir = std::env::temp_dir().join(format!("nabla-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("bench.py");
    std::fs::write(&file, src).map_err(|e| e.to_string())?;
    // The script times its own work (excluding interpreter start-up) and
    // prints `seconds result`.
    let out = Command::new("python3")
        .arg(&file)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (secs, value) = text
        .trim()
        .split_once(' ')
        .ok_or_else(|| format!("unexpected python output: {text}"))?;
    let secs: f64 = secs
        .parse()
        .map_err(|_| format!("unexpected python output: {text}"))?;
    Ok((Duration::from_secs_f64(secs), value.to_string()))
}

/// The fastest of `runs` runs of `f`, with what it returned.
fn best<T, F: FnMut() -> Result<(Duration, T), String>>(
    runs: usize,
    mut f: F,
) -> Result<(Duration, T), String> {
    let mut best: Option<(Duration, T)> = None;
    for _ in 0..runs {
        let (d, v) = f()?;
        if best.as_ref().is_none_or(|(b, _)| d < *b) {
            best = Some((d, v));
        }
    }
    best.ok_or_else(|| "no runs".into())
}

/// Runs the benchmark and prints a Markdown table.
pub(crate) fn run(quick: bool) -> ExitCode {
    let runs = if quick { 1 } else { 7 };
    println!("best of {runs} run(s) each; times exclude process start-up\n");
    println!(
        "| program | nabla (interpreter) | nabla (native: run + parse, check, compile) | CPython | CPython / interpreter | CPython / native | result (interpreter / native / python) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut failed = false;
    for c in CASES {
        let n = best(runs, || time_nabla(c.nabla));
        let native = best(runs, || {
            time_native(c.nabla).map(|(prepared, run, v)| (run, (prepared, v)))
        });
        let p = best(runs, || time_python(c.python));
        match (n, native, p) {
            (Ok((nd, nv)), Ok((cd, (compile, cv))), Ok((pd, pv))) => {
                // Both backends must print the same value.
                failed |= cv != nv;
                println!(
                    "| {} | {:.3} s | {:.4} s + {:.1} ms | {:.3} s | {:.2}x | {:.1}x | {nv} / {cv} / {pv} |",
                    c.name,
                    nd.as_secs_f64(),
                    cd.as_secs_f64(),
                    compile.as_secs_f64() * 1e3,
                    pd.as_secs_f64(),
                    pd.as_secs_f64() / nd.as_secs_f64(),
                    pd.as_secs_f64() / cd.as_secs_f64(),
                );
            }
            (n, native, p) => {
                failed = true;
                println!(
                    "| {} | {:?} | {:?} | {:?} | - | - | - |",
                    c.name,
                    n.err(),
                    native.err(),
                    p.err()
                );
            }
        }
    }
    failed |= !run_ad(runs);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
