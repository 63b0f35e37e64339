//! Round trip through the named core and the program printer: every
//! example and every test case that type-checks is parsed, checked, lowered
//! to the named core and printed; the printed program must parse, check and
//! run to the same output (or the same runtime error message) as the
//! original, and printing it again must give the same text.

use nabla_lang::core::lower::{LowerError, lower_program};
use nabla_lang::driver::Session;
use nabla_lang::pretty::program::{WIDTH, print_program};
use nabla_lang::stack::run_with_stack;
use nabla_lang::syntax::parser::{IdGen, parse_program};
use nabla_lang::translate::Mode;
use nabla_lang::types::check_program;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("directory exists")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "nabla") {
            out.push(p);
        }
    }
}

/// Parses, checks, lowers and prints `text`; `None` if it does not check,
/// uses `trace` (which the named core, made for the `nabla ad`
/// translations, does not carry) or records (which it holds as tuples, so
/// the printed program would print tuples where the original printed
/// records).
fn print_source(text: &str) -> Option<Result<String, String>> {
    let (prog, errors) = parse_program(text, 0, &mut IdGen::new());
    if !errors.is_empty() {
        return None;
    }
    let checked = check_program(&prog.defs).ok()?;
    match lower_program(&prog.defs, &checked) {
        Err(LowerError::Trace(_) | LowerError::Record(_)) => None,
        r => Some(r.map(|p| print_program(&p)).map_err(|e| format!("{e:?}"))),
    }
}

/// Loads and runs `text` as `nabla run` does: `Err` holds the error messages.
fn run(name: &str, text: &str) -> Result<String, Vec<String>> {
    let mut s = Session::new();
    let messages = |ds: Vec<nabla_lang::diagnostic::Diagnostic>| {
        ds.into_iter().map(|d| d.message).collect::<Vec<_>>()
    };
    s.load(name, text).map_err(messages)?;
    s.run_main().map_err(messages)
}

/// Checks one file; `Ok(false)` if it is skipped (it does not check, uses
/// `trace` or has no `main`).
fn round_trip(path: &Path) -> Result<bool, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let Some(printed) = print_source(&text) else {
        return Ok(false);
    };
    let printed = printed?;
    let name = path.display().to_string();
    for (i, line) in printed.lines().enumerate() {
        if line.ends_with(' ') {
            return Err(format!("line {} has trailing spaces:\n{printed}", i + 1));
        }
        if line.chars().count() > WIDTH {
            return Err(format!("line {} is too long:\n{printed}", i + 1));
        }
    }
    if !printed.is_empty() && (!printed.ends_with('\n') || printed.ends_with("\n\n")) {
        return Err(format!("must end with exactly one newline:\n{printed:?}"));
    }
    let original = run(&name, &text);
    if matches!(&original, Err(m) if m.iter().any(|m| m.contains("no definition of `main`"))) {
        return Ok(false);
    }
    let reprinted = match print_source(&printed) {
        Some(Ok(p)) => p,
        Some(Err(e)) => return Err(format!("printed program fails to lower: {e}\n{printed}")),
        None => {
            let err = run("printed.nabla", &printed).err().unwrap_or_default();
            return Err(format!(
                "printed program does not parse or check: {err:?}\n{printed}"
            ));
        }
    };
    let again = run("printed.nabla", &printed);
    if again != original {
        return Err(format!(
            "printed program runs differently: original {original:?}, printed {again:?}\n{printed}"
        ));
    }
    if reprinted != printed {
        return Err(format!(
            "printing is not idempotent:\n--- first\n{printed}\n--- second\n{reprinted}"
        ));
    }
    Ok(true)
}

#[test]
fn examples_and_test_cases_round_trip_through_the_printer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = Vec::new();
    files(&root.join("examples"), &mut paths);
    files(&root.join("tests/lang"), &mut paths);
    assert!(paths.len() > 50, "found the test programs");
    let (checked, failures) = run_with_stack(move || {
        let mut checked = 0;
        let mut failures = Vec::new();
        for p in &paths {
            match round_trip(p) {
                Ok(true) => checked += 1,
                Ok(false) => {}
                Err(e) => failures.push(format!("{}: {e}", p.display())),
            }
        }
        (checked, failures)
    })
    .expect("test thread");
    assert!(
        failures.is_empty(),
        "{} of {checked} + {} programs failed:\n\n{}",
        failures.len(),
        failures.len(),
        failures.join("\n\n")
    );
    assert!(checked > 100, "only {checked} programs round-tripped");
}

/// Every translation `nabla ad` prints for the definitions of the test
/// programs (and `nabla ad --run` for those whose `main` is a derivative)
/// is printed stably: parsing, lowering and printing it again gives the
/// same text.
#[test]
fn printed_translations_are_stable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = Vec::new();
    files(&root.join("examples"), &mut paths);
    files(&root.join("tests/lang"), &mut paths);
    let (count, failures) = run_with_stack(move || {
        let mut count = 0;
        let mut failures = Vec::new();
        for p in &paths {
            let text = std::fs::read_to_string(p).expect("readable");
            let mut s = Session::new();
            if s.load("t.nabla", &text).is_err() {
                continue;
            }
            let names = s.def_names();
            for mode in [Mode::Forward, Mode::Reverse, Mode::Cps] {
                let outputs = names
                    .iter()
                    .filter_map(|d| s.translation(mode, Some(d)).ok())
                    .chain(s.runnable_translation(mode).ok());
                for printed in outputs {
                    count += 1;
                    match print_source(&printed) {
                        Some(Ok(again)) if again == printed => {}
                        Some(Ok(again)) => failures.push(format!(
                            "{} ({mode:?}): not stable\n--- first\n{printed}\n--- second\n{again}",
                            p.display()
                        )),
                        _ => failures.push(format!(
                            "{} ({mode:?}): does not parse, check or lower\n{printed}",
                            p.display()
                        )),
                    }
                }
            }
        }
        (count, failures)
    })
    .expect("test thread");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(count >= 100, "only {count} translations");
    eprintln!("{count} translations printed stably");
}

/// `PRINT_DUMP=DIR cargo test -p nabla-lang --test print_roundtrip -- --ignored`
/// writes the printed form of every example and test program, and every
/// translation of their definitions, to DIR, for reading.
#[test]
#[ignore]
fn dump_printed_examples() {
    let Ok(dir) = std::env::var("PRINT_DUMP") else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = Vec::new();
    files(&root.join("examples"), &mut paths);
    files(&root.join("tests/lang"), &mut paths);
    run_with_stack(move || {
        for p in &paths {
            let text = std::fs::read_to_string(p).expect("readable");
            let name = p.file_name().expect("a file").to_string_lossy().to_string();
            if let Some(Ok(printed)) = print_source(&text) {
                std::fs::write(Path::new(&dir).join(&name), printed).expect("writable");
            }
            let mut s = Session::new();
            if s.load("t.nabla", &text).is_err() {
                continue;
            }
            for mode in [Mode::Forward, Mode::Reverse, Mode::Cps] {
                for d in s.def_names() {
                    if let Ok(t) = s.translation(mode, Some(&d)) {
                        let file = format!("{name}.{d}.{mode:?}.txt");
                        std::fs::write(Path::new(&dir).join(file), t).expect("writable");
                    }
                }
            }
        }
    })
    .expect("thread");
}
