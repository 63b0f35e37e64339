//! The layering of docs/architecture.md, checked against the source so that
//! the document stays true.
//!
//! Each module of nabla-lang (a file or directory under `src/`) may refer
//! only to the modules [`MAY_USE`] allows, through `crate::…` paths (in `use`
//! lines or written inline) outside `#[cfg(test)]` modules. The places where
//! the code breaks the natural layering are listed in [`EXCEPTIONS`] and in
//! the document; each must still exist, so the list only shrinks. When a
//! test here fails, change the code or change the document and this file
//! together.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Module → the paths its production code may refer to. A path is allowed
/// when one of these is a prefix of it, segment by segment (`syntax::span`
/// allows `syntax::span::Span`); `*` allows everything.
const MAY_USE: &[(&str, &[&str])] = &[
    ("stack", &[]),
    ("memory", &["stack"]),
    ("diagnostic", &["syntax::span"]),
    ("prim", &["syntax::ast::BinOp"]),
    ("syntax", &["diagnostic", "stack"]),
    ("types", &["syntax", "prim", "diagnostic", "stack"]),
    ("core", &["syntax", "types", "prim", "diagnostic", "stack"]),
    ("translate", &["core", "types", "prim", "pretty", "stack"]),
    (
        "eval",
        &[
            "ad",
            "core",
            "types",
            "prim",
            "pretty",
            "syntax::span",
            "diagnostic",
            "memory",
            "stack",
        ],
    ),
    ("ad", &["eval", "prim", "syntax::span", "memory", "stack"]),
    (
        "pretty",
        &[
            "core",
            "types",
            "prim",
            "eval",
            "ad",
            "syntax::lexer::TRANSLATED_HEADER",
            "stack",
        ],
    ),
    ("data", &["eval", "types", "pretty"]),
    ("driver", &["*"]),
];

/// References that break the layering of [`MAY_USE`], as docs/architecture.md
/// lists them: (module, path). Each must still be in the code; when one is
/// gone, delete it here and in the document.
const EXCEPTIONS: &[(&str, &str)] = &[
    ("syntax", "types::Con"),
    ("syntax", "core::named::Poly"),
    ("types", "pretty::TypeNamer"),
    ("types", "translate::types::poly_type"),
];

/// The only files outside crates/nabla-native that allow `unsafe` code (the
/// library's Delta trace and buffer pool, and the `unsafe fn` signatures simba's
/// `SimdValue` asks for), as docs/architecture.md lists them.
const UNSAFE_FILES: &[&str] = &[
    "crates/nabla/src/trace.rs",
    "crates/nabla/src/pool.rs",
    "crates/nabla/src/nalgebra_impls.rs",
];

/// Names of the library (`nabla::…`) are used by these modules only.
const USE_THE_LIBRARY: &[&str] = &["prim", "ad", "eval", "translate"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One source file of nabla-lang: its module, its path under `src/`, and its
/// production code (test modules and comments removed).
struct Source {
    module: String,
    path: String,
    code: String,
}

fn sources() -> Vec<Source> {
    let mut files = Vec::new();
    let mut dirs = vec![src()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src dir") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for p in files {
        let rel = p
            .strip_prefix(src())
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "lib.rs" {
            continue;
        }
        let module = rel
            .split('/')
            .next()
            .expect("a component")
            .trim_end_matches(".rs")
            .to_string();
        let text = std::fs::read_to_string(&p).expect("read source");
        out.push(Source {
            module,
            path: rel,
            code: production_code(&text),
        });
    }
    out
}

/// `text` up to its `#[cfg(test)] mod …` (test modules come last in a file),
/// without `//` comments.
fn production_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            break;
        }
        out.push_str(without_comment(line));
        out.push('\n');
    }
    out
}

/// `line` without a trailing `//` comment (one inside a string literal stays).
fn without_comment(line: &str) -> &str {
    let mut from = 0;
    while let Some(at) = line[from..].find("//").map(|i| from + i) {
        if line[..at].matches('"').count().is_multiple_of(2) {
            return &line[..at];
        }
        from = at + 2;
    }
    line
}

/// Every path named after `crate::` in `code`, use-trees expanded:
/// `crate::eval::{Machine, value::Value}` gives `eval::Machine` and
/// `eval::value::Value`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        use_tree(&code[at + "crate::".len()..], String::new(), &mut out);
    }
    out.into_iter().filter(|p| !p.is_empty()).collect()
}

/// Parses the use-tree (or plain path) at the start of `s`, below `prefix`,
/// into `out`; returns the text after it.
fn use_tree<'a>(mut s: &'a str, mut path: String, out: &mut Vec<String>) -> &'a str {
    loop {
        s = s.trim_start();
        if let Some(mut rest) = s.strip_prefix('{') {
            loop {
                rest = use_tree(rest, path.clone(), out).trim_start();
                if let Some(r) = rest.strip_prefix(',') {
                    rest = r;
                } else {
                    return rest.strip_prefix('}').unwrap_or(rest);
                }
            }
        }
        if s.starts_with('}') {
            // After a trailing comma in a group.
            return s;
        }
        if let Some(rest) = s.strip_prefix('*') {
            out.push(path);
            return rest;
        }
        let len = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let segment = &s[..len];
        s = &s[len..];
        if segment != "self" && !segment.is_empty() {
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(segment);
        }
        match s.strip_prefix("::") {
            Some(rest) if segment != "self" => s = rest,
            _ => {
                out.push(path);
                // A rename: `Value as V`.
                let t = s.trim_start();
                return match t.strip_prefix("as ") {
                    Some(r) => {
                        let r = r.trim_start();
                        let len = r
                            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .unwrap_or(r.len());
                        &r[len..]
                    }
                    None => s,
                };
            }
        }
    }
}

/// Whether `prefix` is a prefix of `path`, segment by segment.
fn has_prefix(path: &str, prefix: &str) -> bool {
    prefix == "*"
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with("::"))
}

fn may_use(module: &str) -> Vec<&'static str> {
    let listed = MAY_USE
        .iter()
        .find(|(m, _)| *m == module)
        .unwrap_or_else(|| {
            panic!(
                "module `{module}` is not in MAY_USE: describe it in docs/architecture.md \
                 and give its imports here"
            )
        })
        .1;
    let exceptions = EXCEPTIONS
        .iter()
        .filter(|(m, _)| *m == module)
        .map(|(_, p)| *p);
    listed.iter().copied().chain(exceptions).collect()
}

#[test]
fn use_tree_expansion() {
    let paths = crate_paths(
        "use crate::eval::{Machine, value::{self, Value as V},};\n\
         let x = crate::pretty::print_type(&t); pub(crate) fn f() {}\n\
         use crate::{stack, syntax::span::*};",
    );
    let want = [
        "eval::Machine",
        "eval::value",
        "eval::value::Value",
        "pretty::print_type",
        "stack",
        "syntax::span",
    ];
    assert_eq!(paths, want.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        without_comment(r#"let s = "a//b"; // c"#),
        r#"let s = "a//b"; "#
    );
    assert!(has_prefix("syntax::span::Span", "syntax::span"));
    assert!(!has_prefix("syntax::spans", "syntax::span"));
}

#[test]
fn every_module_imports_only_what_the_layering_allows() {
    let mut wrong = Vec::new();
    let mut modules = BTreeSet::new();
    for s in sources() {
        modules.insert(s.module.clone());
        let allowed = may_use(&s.module);
        for path in crate_paths(&s.code) {
            let own = has_prefix(&path, &s.module);
            if !own && !allowed.iter().any(|a| has_prefix(&path, a)) {
                wrong.push(format!("{}: crate::{path}", s.path));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "references that docs/architecture.md does not allow (fix the code, or \
         change the document and MAY_USE/EXCEPTIONS in this test):\n{}",
        wrong.join("\n")
    );
    let listed: BTreeSet<String> = MAY_USE.iter().map(|(m, _)| m.to_string()).collect();
    assert_eq!(
        modules, listed,
        "MAY_USE must list exactly the modules of src/"
    );
}

#[test]
fn each_listed_exception_still_exists_and_is_documented() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).expect("the document");
    let sources = sources();
    for (module, path) in EXCEPTIONS {
        let used = sources
            .iter()
            .filter(|s| s.module == *module)
            .any(|s| crate_paths(&s.code).iter().any(|p| has_prefix(p, path)));
        assert!(
            used,
            "`{module}` no longer uses `{path}`: delete the exception here and in \
             docs/architecture.md"
        );
        assert!(
            doc.contains(&format!("`{path}`")),
            "docs/architecture.md does not list `{path}` (used by `{module}`)"
        );
    }
    for (module, _) in MAY_USE {
        assert!(
            doc.contains(&format!("`{module}`")),
            "docs/architecture.md does not describe `{module}`"
        );
    }
}

#[test]
fn nothing_imports_the_driver() {
    for s in sources().iter().filter(|s| s.module != "driver") {
        let paths = crate_paths(&s.code);
        assert!(
            !paths.iter().any(|p| has_prefix(p, "driver")),
            "{} uses the driver",
            s.path
        );
    }
}

#[test]
fn cross_module_references_go_through_crate_paths() {
    // Otherwise `super::…` could reach a module behind the checks' back.
    for s in sources() {
        let top_level = !s.path.contains('/') || s.path.ends_with("/mod.rs");
        assert!(!s.code.contains("super::super::"), "{}", s.path);
        assert!(
            !(top_level && s.code.contains("super::")),
            "{}: a top-level module's `super::` is the crate root; write `crate::`",
            s.path
        );
    }
}

#[test]
fn the_library_files_threads_and_printing_stay_in_their_modules() {
    let only_in = |needle: &str, modules: &[&str]| {
        for s in sources() {
            assert!(
                modules.contains(&s.module.as_str()) || !s.code.contains(needle),
                "{} uses `{needle}`; docs/architecture.md says only {modules:?} do",
                s.path
            );
        }
    };
    // Source text comes in as strings; the one file read is the machine's
    // memory size (/proc, cgroups).
    only_in("std::fs", &["memory"]);
    only_in("std::thread", &["stack"]);
    only_in("std::process", &[]);
    only_in("std::env", &[]);
    for printing in ["println!", "print!(", "eprintln!", "eprint!(", "dbg!"] {
        only_in(printing, &[]);
    }
    only_in("nabla::", USE_THE_LIBRARY);
}

#[test]
fn the_crates_depend_downwards_and_unsafe_code_stays_where_it_is_listed() {
    let manifest = |krate: &str| {
        std::fs::read_to_string(repo().join("crates").join(krate).join("Cargo.toml"))
            .expect("Cargo.toml")
    };
    let dependency_lines = |text: &str| -> Vec<String> {
        text.split("\n[")
            .filter(|section| section.starts_with("dependencies]"))
            .flat_map(|section| section.lines().skip(1))
            .map(|line| line.trim().to_string())
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect()
    };
    let dependencies = |text: &str| -> Vec<String> {
        dependency_lines(text)
            .iter()
            .filter_map(|l| l.split(['=', '.']).next())
            .map(|name| name.trim().to_string())
            .collect()
    };
    // The library is dependency-free by default: each dependency is optional and
    // enabled by a feature (which implements that ecosystem's traits).
    let library = manifest("nabla");
    for line in dependency_lines(&library) {
        let name = line.split(['=', '.']).next().unwrap_or_default().trim();
        assert!(
            line.contains("optional = true") && library.contains(&format!("\"dep:{name}\"")),
            "the library's dependencies are optional, each enabled by a feature: `{line}`"
        );
    }
    for dep in dependencies(&manifest("nabla-lang")) {
        assert!(
            dep == "nabla" || !(dep.starts_with("nabla") || dep.starts_with("cranelift")),
            "nabla-lang must not depend on `{dep}`: code generation depends on the \
             language, not the other way round"
        );
    }
    let workspace = std::fs::read_to_string(repo().join("Cargo.toml")).expect("Cargo.toml");
    assert!(workspace.contains("unsafe_code = \"deny\""));
    let mut unsafe_files = BTreeSet::new();
    for entry in std::fs::read_dir(repo().join("crates")).expect("crates/") {
        let dir = entry.expect("entry").path();
        let name = dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if name == "nabla-native" {
            continue;
        }
        let text = manifest(&name);
        assert!(
            text.contains("[lints]\nworkspace = true"),
            "crates/{name} must inherit the workspace lints (which deny unsafe code)"
        );
        let mut dirs = vec![dir];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("dir") {
                let p = e.expect("entry").path();
                if p.is_dir() && !p.ends_with("target") {
                    dirs.push(p);
                } else if p.extension().is_some_and(|e| e == "rs") {
                    let code = std::fs::read_to_string(&p).expect("read");
                    // Split so that this file does not match itself.
                    if code.contains(concat!("allow(", "unsafe_code)")) {
                        let rel = p.strip_prefix(repo()).expect("in the repository");
                        unsafe_files.insert(rel.to_string_lossy().replace('\\', "/"));
                    }
                }
            }
        }
    }
    let listed: BTreeSet<String> = UNSAFE_FILES.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        unsafe_files, listed,
        "the files that allow unsafe code are not those docs/architecture.md lists"
    );
}
