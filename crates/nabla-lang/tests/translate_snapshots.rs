//! Snapshots of the three translations of a handful of small programs, for
//! review side by side with the papers: a reader holding Krawiec et al.
//! Figures 3 and 9 or Wang et al. Figure 10 should recognise each rule.

use nabla_lang::driver::Session;
use nabla_lang::stack::run_with_stack;
use nabla_lang::translate::Mode;

const PROGRAMS: &[(&str, &str)] = &[
    (
        "polynomial",
        "def f (x, y) = 2.0 * x * x + 3.0 * x * y + 4.0 * y * y\ndef main = grad f (3.0, 4.0)",
    ),
    (
        "let_chain",
        "def f x =\n  let a = x * x in\n  let b = a * a in\n  let c = b * a in\n  sin c\ndef main = grad f 0.5",
    ),
    (
        "higher_order",
        "def twice g x = g (g x)\ndef f x = twice (fun y -> y * x) 3.0\ndef main = grad f 2.0",
    ),
    (
        "sum_case",
        "def f x = match (if x > 0.0 then inl x else inr x) with | inl a -> a * a | inr b -> -b\ndef main = grad f 1.5",
    ),
    (
        "vector_build",
        "def f v = sum (build (size v) (fun i -> v[i] * v[i]))\ndef main = grad f [1.0, 2.0, 3.0]",
    ),
];

fn translation(source: &str, mode: Mode) -> String {
    let source = source.to_string();
    run_with_stack(move || {
        let mut s = Session::new();
        s.load("<snapshot>", &source).expect("checks");
        match s.translation(mode, None) {
            Ok(text) => text,
            Err(ds) => s.render(&ds),
        }
    })
    .expect("test thread")
}

#[test]
fn forward_translations() {
    for (name, source) in PROGRAMS {
        insta::assert_snapshot!(
            format!("forward_{name}"),
            translation(source, Mode::Forward)
        );
    }
}

#[test]
fn reverse_translations() {
    for (name, source) in PROGRAMS {
        insta::assert_snapshot!(
            format!("reverse_{name}"),
            translation(source, Mode::Reverse)
        );
    }
}

#[test]
fn cps_translations() {
    for (name, source) in PROGRAMS {
        insta::assert_snapshot!(format!("cps_{name}"), translation(source, Mode::Cps));
    }
}

/// docs/transformations.md quotes the three translations of its worked
/// example verbatim; this keeps the quotes true.
#[test]
fn the_documentation_quotes_the_tools_output() {
    let doc_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/transformations.md");
    let doc = std::fs::read_to_string(doc_path).expect("docs/transformations.md");
    let source = "def f (x, y) = x * y + sin x\ndef main = grad f (1.0, 2.0)\n";
    for mode in [Mode::Forward, Mode::Reverse, Mode::Cps] {
        let text = translation(source, mode);
        assert!(
            doc.contains(text.trim_end()),
            "docs/transformations.md does not quote the current {mode:?} output:\n{text}"
        );
    }
}

#[test]
fn names_the_translated_dialect_reserves_are_refused() {
    for (source, name) in [
        ("def eval x = x * x\ndef main = grad eval 2.0", "eval"),
        (
            "def f x = let pure = x * x in pure\ndef main = grad f 2.0",
            "pure",
        ),
        (
            "def f x = let do = x in do * x\ndef main = grad f 2.0",
            "do",
        ),
    ] {
        let out = translation(source, Mode::Reverse);
        assert!(
            out.contains(&format!(
                "`{name}` is a reserved name in translated programs"
            )),
            "{out}"
        );
    }
}
