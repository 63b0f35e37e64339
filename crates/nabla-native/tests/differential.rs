//! Differential testing: every example and every test program gives the
//! same output on native code as in the interpreter (the reference
//! semantics), value or error; the programs native code does not compile
//! yet are listed, with why, so that the list only shrinks.

use nabla_lang::driver::Session;
use nabla_lang::eval::Limits;
use nabla_lang::pretty::print_value;
use nabla_native::{Native, Options};
use std::path::{Path, PathBuf};

fn programs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            programs(&p, out);
        } else if p.extension().is_some_and(|e| e == "nabla") {
            out.push(p);
        }
    }
}

/// What a backend printed: the value, or the rendered errors.
#[derive(Debug, PartialEq)]
enum Output {
    Value(String),
    Error(String),
}

/// Runs `file` in both backends: `None` if native code refuses it (with why).
fn both(file: &Path, limits: Limits) -> (Output, Result<Output, String>) {
    let text = std::fs::read_to_string(file).expect("readable");
    let name = file.display().to_string();
    let mut s = Session::new();
    s.limits = limits;
    if let Err(ds) = s.load(&name, &text) {
        let e = Output::Error(s.render(&ds));
        return (e, Err("does not check".into()));
    }
    let interp = match s.run_main() {
        Ok(v) => Output::Value(v),
        Err(ds) => Output::Error(s.render(&ds)),
    };
    let native = match s.typed_program("main") {
        Err(u) => Err(u.what),
        Ok((prog, entry)) => match Native::compile_main(
            &prog,
            entry,
            &Options {
                limits,
                keep_ir: false,
            },
        ) {
            Err(u) => Err(u.what),
            Ok(n) => Ok(match n.run() {
                Ok(v) => Output::Value(print_value(&v)),
                Err(e) => Output::Error(s.render(&[e.into()])),
            }),
        },
    };
    (interp, native)
}

#[test]
fn native_code_agrees_with_the_interpreter() {
    nabla_lang::stack::run_with_stack(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        programs(&root.join("examples"), &mut files);
        programs(&root.join("tests/lang"), &mut files);
        let mut disagree = Vec::new();
        let mut refused = Vec::new();
        let mut agreed = 0;
        for f in &files {
            let (interp, native) = both(f, Limits::default());
            match native {
                Ok(n) if n == interp => agreed += 1,
                Ok(n) => disagree.push(format!(
                    "{}:\n  interpreter: {interp:?}\n  native:      {n:?}",
                    f.display()
                )),
                Err(why) => refused.push(format!("{}: {why}", f.display())),
            }
        }
        for r in &refused {
            eprintln!("refused {r}");
        }
        eprintln!(
            "{agreed} agree, {} refused, {} disagree",
            refused.len(),
            disagree.len()
        );
        assert!(disagree.is_empty(), "{}", disagree.join("\n"));
    })
    .expect("thread");
}
