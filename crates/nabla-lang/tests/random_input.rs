//! Random-input smoke test of the fuzz entry point
//! ([`nabla_lang::driver::run_untrusted`]): arbitrary bytes, token soups and
//! mutated example programs must never panic, overflow the stack or hang.
//! `PROPTEST_CASES=N` runs longer (see docs/fuzzing.md); every input that
//! ever failed is kept in `fuzz/regressions/` and replayed below.

use nabla_lang::driver::run_untrusted;
use nabla_lang::stack::run_with_stack;
use proptest::prelude::*;
use std::path::Path;

const TOKENS: &[&str] = &[
    "def", "let", "rec", "in", "fun", "if", "then", "else", "match", "with", "inl", "inr", "true",
    "false", "x", "y", "f", "main", "_", "0", "1", "2.5", "1e3", "(", ")", "[", "]", ",", "->",
    "=", ":", "|", "+", "-", "*", "/", "**", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "not",
    "sum", "map", "fold", "build", "size", "zip", "fst", "snd", "sin", "real", "Real", "Int",
    "Vec", "Bool", "#c\n", "\n",
];

/// Tokens of the translated dialect (used after a `#!translated` first line).
const TRANSLATED_TOKENS: &[&str] = &[
    "do",
    "{",
    "}",
    ";",
    "<-",
    "@",
    "!",
    "+=",
    "runDelta",
    "pure",
    "deltaLet",
    "Zero",
    "Scale",
    "Add",
    "Var",
    "Let",
    "eval",
    "emptyMap",
    "lookupOrZero",
    "mapM",
    "buildM",
    "foldM",
    "ref",
    "shapeMismatch",
    "zipDual",
    "tangentOf",
    "primalOf",
    "initVars",
    "initZeros",
    "lookupDual",
    "M",
    "Delta",
    "DeltaMap",
    "Ref",
    "x",
    "0",
    "1.0",
    "(",
    ")",
    ",",
    "[",
    "]",
    "let",
    "in",
    "=",
    "fun",
    "->",
    "+",
    "*",
    "Real",
    "Vec",
    "\n",
];

fn check(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let r = run_with_stack(move || {
        let _ = run_untrusted(&bytes);
    });
    prop_assert!(r.is_some(), "panicked");
    Ok(())
}

fn examples() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "nabla"))
                .collect()
        })
        .unwrap_or_else(|_| Vec::new())
        .into_iter()
        .filter_map(|p: std::path::PathBuf| std::fs::read_to_string(p).ok())
        .collect();
    out.sort();
    out
}

proptest! {
    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        check(bytes)?;
    }

    #[test]
    fn token_soup(tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..80)) {
        let mut src = String::from("def main = ");
        src.push_str(&tokens.join(" "));
        check(src.into_bytes())?;
    }

    #[test]
    fn translated_token_soup(tokens in proptest::collection::vec(proptest::sample::select(TRANSLATED_TOKENS), 0..80)) {
        let mut src = String::from("#!translated\ndef main = ");
        src.push_str(&tokens.join(" "));
        check(src.into_bytes())?;
    }

    #[test]
    fn mutated_examples(which in 0usize..64, edits in proptest::collection::vec((any::<u16>(), proptest::sample::select(TOKENS), any::<bool>()), 1..6)) {
        let ex = examples();
        prop_assume!(!ex.is_empty());
        let mut src = ex[which % ex.len()].clone();
        for (pos, tok, delete) in edits {
            let mut at = pos as usize % (src.len() + 1);
            while !src.is_char_boundary(at) { at -= 1; }
            if delete {
                let mut end = (at + 1 + pos as usize % 7).min(src.len());
                while !src.is_char_boundary(end) { end -= 1; }
                src.replace_range(at..end, "");
            } else {
                src.insert_str(at, &format!(" {tok} "));
            }
        }
        check(src.into_bytes())?;
    }
}

#[test]
fn fuzz_regressions_still_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("fuzz/regressions exists") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "nabla") {
            let bytes = std::fs::read(&p).expect("readable");
            assert!(
                run_with_stack(move || run_untrusted(&bytes)).is_some(),
                "{}",
                p.display()
            );
            n += 1;
        }
    }
    assert!(n > 0, "no regression inputs found");
}
