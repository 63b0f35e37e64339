//! The data-driven test runner: every `.nabla` file under `tests/lang/` at
//! the repository root is a case whose header comments say what must happen
//! (format: `tests/lang/README.md`). Rendered diagnostics of every error
//! case are also snapshot-tested with insta.

use nabla_lang::driver::Session;
use nabla_lang::stack::run_with_stack;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/lang")
}

fn cases(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/lang exists")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            cases(&p, out);
        } else if p.extension().is_some_and(|e| e == "nabla") {
            out.push(p);
        }
    }
}

#[derive(Default, Debug)]
struct Expect {
    value: Option<String>,
    error: Option<(String, String)>,
    error_count: Option<usize>,
    types: Vec<String>,
}

fn parse_header(text: &str) -> Expect {
    let mut e = Expect::default();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# expect") else {
            continue;
        };
        if let Some(v) = rest.strip_prefix(": ") {
            e.value = Some(v.trim().to_string());
        } else if let Some(v) = rest.strip_prefix("-error: ") {
            let (pos, frag) = v.trim().split_once(' ').unwrap_or((v.trim(), ""));
            e.error = Some((pos.to_string(), frag.to_string()));
        } else if let Some(v) = rest.strip_prefix("-error-count: ") {
            e.error_count = v.trim().parse().ok();
        } else if let Some(v) = rest.strip_prefix("-type: ") {
            e.types.push(v.trim().to_string());
        }
    }
    e
}

/// What running a case produced.
struct Outcome {
    types: Option<Vec<String>>,
    value: Result<String, Vec<(String, String)>>,
    rendered: String,
}

fn run_case(name: String, text: String) -> Outcome {
    run_with_stack(move || {
        let mut s = Session::new();
        let (types, result) = match s.load(&name, &text) {
            Ok(t) => {
                let types = t.iter().map(|(n, t)| format!("{n} : {t}")).collect();
                (Some(types), s.run_main())
            }
            Err(ds) => (None, Err(ds)),
        };
        match result {
            Ok(v) => Outcome {
                types,
                value: Ok(v),
                rendered: String::new(),
            },
            Err(ds) => {
                let errs = ds
                    .iter()
                    .map(|d| {
                        let loc = d.location(&s.sources).unwrap_or_default();
                        let pos = loc.rsplitn(3, ':').collect::<Vec<_>>();
                        let pos = if pos.len() == 3 {
                            format!("{}:{}", pos[1], pos[0])
                        } else {
                            loc
                        };
                        (pos, d.message.clone())
                    })
                    .collect();
                Outcome {
                    types,
                    value: Err(errs),
                    rendered: s.render(&ds),
                }
            }
        }
    })
    .expect("case thread")
}

fn check(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let exp = parse_header(&text);
    if exp.value.is_none() && exp.error.is_none() && exp.types.is_empty() {
        return Err("no `# expect` header".into());
    }
    let name = path
        .strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string();
    let out = run_case(name, text);
    for t in &exp.types {
        match &out.types {
            Some(types) if types.contains(t) => {}
            Some(types) => return Err(format!("expected type `{t}`, got {types:?}")),
            None => {
                return Err(format!(
                    "expected type `{t}`, but the program failed: {:?}",
                    out.value
                ));
            }
        }
    }
    match (&exp, &out.value) {
        (Expect { value: Some(v), .. }, Ok(got)) if got == v => Ok(()),
        (Expect { value: Some(v), .. }, got) => Err(format!("expected value `{v}`, got {got:?}")),
        (
            Expect {
                error: Some((pos, frag)),
                ..
            },
            Err(errs),
        ) => {
            let (got_pos, msg) = &errs[0];
            if got_pos != pos || !msg.contains(frag.as_str()) {
                return Err(format!(
                    "expected error at {pos} containing `{frag}`, got {errs:?}"
                ));
            }
            if let Some(n) = exp.error_count
                && errs.len() != n
            {
                return Err(format!("expected {n} errors, got {}: {errs:?}", errs.len()));
            }
            if !out.rendered.starts_with("error: ") || !out.rendered.contains('^') {
                return Err(format!(
                    "diagnostic not rendered as expected:\n{}",
                    out.rendered
                ));
            }
            Ok(())
        }
        (Expect { error: Some(_), .. }, Ok(v)) => {
            Err(format!("expected an error, got value `{v}`"))
        }
        (_, Ok(_)) => Ok(()),
        (_, Err(errs)) => Err(format!("unexpected errors {errs:?}")),
    }
}

fn all_cases() -> Vec<PathBuf> {
    let mut all = Vec::new();
    cases(&root(), &mut all);
    all
}

#[test]
fn language_cases() {
    let all = all_cases();
    assert!(all.len() >= 60, "only {} cases", all.len());
    let mut failures = Vec::new();
    for p in &all {
        if let Err(e) = check(p) {
            failures.push(format!("{}: {e}", p.display()));
        }
    }
    println!("{} cases, {} failed", all.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn diagnostic_snapshots() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    let _guard = settings.bind_to_scope();
    for p in all_cases() {
        let text = std::fs::read_to_string(&p).expect("readable case");
        if parse_header(&text).error.is_none() {
            continue;
        }
        let name = p.strip_prefix(root()).unwrap_or(&p).display().to_string();
        let out = run_case(name.clone(), text);
        let snap = name.trim_end_matches(".nabla").replace('/', "__");
        insta::assert_snapshot!(snap, out.rendered);
    }
}
