//! Agreement of the source-to-source translations with the run-time
//! operators, over every example and every test program.
//!
//! For each call `grad f x`, `value_and_grad f x`, `vjp f x`, `jvp f x dx` or
//! `diff f x` in a program's `main` (with `f` a definition and closed
//! arguments), every translation that computes that derivative (forward for
//! `jvp`/`diff`, reverse and cps for the others) is turned into a runnable
//! program (`translate::runnable`), *printed*, and the printed text is
//! re-parsed, type-checked and run; its output must equal the run-time
//! operator's output, reals to 1e-12 relative. A definition a translation
//! cannot take (it differentiates inside, or it is not first-order, or the
//! CPS translation has no rule for a vector primitive it uses) is skipped and
//! counted; the test also checks that a good number of calls were compared.

use nabla_lang::driver::Session;
use nabla_lang::pretty::program::{print_expr, print_program};
use nabla_lang::stack::run_with_stack;
use nabla_lang::translate::{self, DerivativeCall, Mode, TranslateError};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "nabla") {
            out.push(p);
        }
    }
}

mod common;
use common::agree;

fn run(name: &str, text: &str) -> Result<String, String> {
    let mut s = Session::new();
    s.load(name, text)
        .and_then(|_| s.run_main())
        .map_err(|ds| s.render(&ds))
}

fn modes_for(call: &DerivativeCall) -> &'static [Mode] {
    use nabla_lang::prim::Prim;
    match call.op {
        Prim::Jvp | Prim::Diff => &[Mode::Forward],
        Prim::Grad | Prim::ValueAndGrad | Prim::Vjp => &[Mode::Reverse, Mode::Cps],
        _ => &[],
    }
}

#[derive(Default)]
struct Tally {
    compared: usize,
    skipped: Vec<String>,
    failures: Vec<String>,
}

fn check_file(path: &Path, tally: &mut Tally) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    if text.starts_with("#!translated") {
        return;
    }
    let mut session = Session::new();
    // A program with records translates as the tuples they run as, so its
    // derivative calls cannot be written back as source of the same types.
    if session.load(&path.display().to_string(), &text).is_err() || session.has_records() {
        return;
    }
    let Ok(program) = session.named_program() else {
        return;
    };
    for call in translate::calls_in_main(&program) {
        let args: Vec<String> = call
            .args
            .iter()
            .map(|a| format!("({})", print_expr(a)))
            .collect();
        let call_text = format!("{} {} {}", call.op.info().name, call.f, args.join(" "));
        let expected = session
            .eval_expr("<call>", &call_text)
            .map_err(|ds| session.render(&ds));
        for &mode in modes_for(&call) {
            let what = format!("{}: {} ({})", path.display(), call_text, mode.name());
            let translated = match translate::runnable(&program, &call, mode) {
                Ok(p) => print_program(&p),
                Err(
                    e @ (TranslateError::NestedDerivative { .. }
                    | TranslateError::NotFirstOrder { .. }
                    | TranslateError::Unsupported { .. }),
                ) => {
                    tally.skipped.push(format!("{what}: {e}"));
                    continue;
                }
                Err(e) => {
                    tally.failures.push(format!("{what}: {e}"));
                    continue;
                }
            };
            let found = run("<translated>", &translated);
            // CPS code returns through every continuation it called, so its
            // stack grows with the number of operations (Wang et al. §3.3):
            // a 10^6-step loop exceeds the interpreter's depth limit — a clean
            // error, documented in docs/transformations.md.
            if mode == Mode::Cps
                && found
                    .as_ref()
                    .is_err_and(|e| e.contains("stack depth exceeded"))
            {
                tally
                    .skipped
                    .push(format!("{what}: CPS needs stack depth per operation"));
                continue;
            }
            tally.compared += 1;
            match (&expected, &found) {
                (Ok(a), Ok(b)) if agree(a, b) => {}
                // Both fail at run time (e.g. a shape error): agreement too.
                (Err(_), Err(_)) => {}
                _ => tally.failures.push(format!(
                    "{what}\n  run-time operator: {expected:?}\n  translation:       {found:?}\n--- translated program ---\n{translated}"
                )),
            }
        }
    }
}

#[test]
fn every_translation_agrees_with_the_run_time_operators() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = Vec::new();
    files(&root.join("examples"), &mut paths);
    files(&root.join("tests/lang"), &mut paths);
    let tally = run_with_stack(move || {
        let mut tally = Tally::default();
        for p in &paths {
            check_file(p, &mut tally);
        }
        tally
    })
    .expect("the test thread runs");
    eprintln!(
        "compared {} translated derivatives; skipped {}:\n  {}",
        tally.compared,
        tally.skipped.len(),
        tally.skipped.join("\n  ")
    );
    assert!(
        tally.failures.is_empty(),
        "{} disagreements:\n{}",
        tally.failures.len(),
        tally.failures.join("\n\n")
    );
    assert!(tally.compared >= 35, "only {} comparisons", tally.compared);
}

#[test]
fn output_comparison_tolerates_rounding_only() {
    assert!(agree(
        "(1.0, [2.5, -3.0e-5])",
        "(1.0000000000000002, [2.5, -3.0e-5])"
    ));
    assert!(!agree("(1.0, 2.0)", "(1.0, 2.1)"));
    assert!(!agree("inl 1.0", "inr 1.0"));
    assert!(!agree("[1.0, 2.0]", "[1.0, 2.0, 3.0]"));
}
