//! Differential testing: every example and every test program gives the
//! same output on native code as in the interpreter (the reference
//! semantics), value or error; the programs native code does not compile
//! yet are listed, with why, so that the list only shrinks.

use nabla_lang::driver::Session;
use nabla_lang::eval::Limits;
use nabla_lang::pretty::print_value;
use nabla_native::{Native, Options};
use std::collections::BTreeMap;
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

/// What a back end printed: the value, or the rendered errors.
#[derive(Debug, PartialEq)]
enum Output {
    Value(String),
    Error(String),
}

/// What happened to a program in native code.
enum NativeRun {
    /// It ran (or failed at run time): its output.
    Ran(Output),
    /// It does not check: no back end runs it (both report the checker's
    /// errors, so there is nothing to compare).
    DoesNotCheck,
    /// Native code does not handle it yet, and why.
    Refused(String),
}

/// Runs `file` in both backends.
fn both(file: &Path, limits: Limits) -> (Output, NativeRun) {
    let text = std::fs::read_to_string(file).expect("readable");
    let name = file.display().to_string();
    let mut s = Session::new();
    s.limits = limits;
    if let Err(ds) = s.load(&name, &text) {
        return (Output::Error(s.render(&ds)), NativeRun::DoesNotCheck);
    }
    // An example whose `main` takes data names its file: `# input: PATH`.
    let argument = text
        .lines()
        .find_map(|l| l.strip_prefix("# input: "))
        .map(|rest| {
            let path = file.with_file_name(rest.split_whitespace().next().unwrap_or(""));
            let ty = s
                .main_parameter()
                .ok()
                .flatten()
                .expect("main takes an argument");
            let data = std::fs::read_to_string(&path).expect("the input file");
            nabla_lang::data::decode_csv(&data, &ty)
                .or_else(|_| nabla_lang::data::decode_json(&data, &ty))
                .expect("the input decodes")
        });
    let interp = match s.prepare_main().and_then(|m| match &argument {
        Some(a) => m.evaluate_with(a.clone()),
        None => m.evaluate(),
    }) {
        Ok(v) => Output::Value(print_value(&v)),
        Err(ds) => Output::Error(s.render(&ds)),
    };
    let options = Options {
        limits,
        keep_ir: false,
    };
    let native = match s.typed_program("main") {
        Err(u) => NativeRun::Refused(u.what),
        Ok((prog, entry)) => match (&argument, entry) {
            (Some(a), _) => match Native::compile(&prog, entry, &options) {
                Err(u) => NativeRun::Refused(u.what),
                Ok(n) => NativeRun::Ran(output(&s, n.call(std::slice::from_ref(a)))),
            },
            (None, _) => match Native::compile_main(&prog, entry, &options) {
                Err(u) => NativeRun::Refused(u.what),
                Ok(n) => NativeRun::Ran(output(&s, n.run())),
            },
        },
    };
    (interp, native)
}

fn output(
    s: &Session,
    r: Result<nabla_lang::eval::Value, nabla_lang::eval::RuntimeError>,
) -> Output {
    match r {
        Ok(v) => Output::Value(print_value(&v)),
        Err(e) => Output::Error(s.render(&[e.into()])),
    }
}

/// The programs native code refuses, with why: `PATH<TAB>REASON` per line
/// (paths from the repository root). The list only shrinks.
const FALLBACKS: &str = include_str!("fallbacks.txt");

#[test]
fn native_code_agrees_with_the_interpreter() {
    nabla_lang::stack::run_with_stack(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        programs(&root.join("examples"), &mut files);
        programs(&root.join("tests/lang"), &mut files);
        let listed: BTreeMap<&str, &str> = FALLBACKS
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| l.split_once('\t').unwrap_or((l, "")))
            .collect();
        let mut problems = Vec::new();
        let (mut agreed, mut unchecked, mut refused) = (0, 0, 0);
        for f in &files {
            let path = f.strip_prefix(&root).unwrap_or(f).display().to_string();
            let (interp, native) = both(f, Limits::default());
            let reason = match native {
                NativeRun::Ran(n) if n == interp => {
                    agreed += 1;
                    None
                }
                NativeRun::Ran(n) => {
                    problems.push(format!(
                        "{path}: the back ends disagree\n  interpreter: {interp:?}\n  native:      {n:?}"
                    ));
                    None
                }
                NativeRun::DoesNotCheck => {
                    unchecked += 1;
                    None
                }
                NativeRun::Refused(why) => {
                    refused += 1;
                    Some(why.lines().next().unwrap_or("").to_string())
                }
            };
            match (reason, listed.get(path.as_str())) {
                (None, Some(_)) => problems.push(format!(
                    "{path} now runs natively: remove it from tests/fallbacks.txt (the list only shrinks)"
                )),
                (Some(why), None) => problems.push(format!(
                    "{path} is refused ({why}) but not listed in tests/fallbacks.txt: make native code handle it"
                )),
                (Some(why), Some(&listed)) if why != listed => problems.push(format!(
                    "{path} is refused for another reason than tests/fallbacks.txt says:\n  now:    {why}\n  listed: {listed}"
                )),
                _ => {}
            }
        }
        let gone: Vec<&str> = listed
            .keys()
            .filter(|p| !files.iter().any(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string() == **p))
            .copied()
            .collect();
        for p in gone {
            problems.push(format!("{p} is listed in tests/fallbacks.txt but does not exist"));
        }
        eprintln!("{agreed} agree, {refused} refused (listed), {unchecked} do not check");
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    })
    .expect("thread");
}
