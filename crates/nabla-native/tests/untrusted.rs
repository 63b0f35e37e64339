//! The native fuzz target's entry point ([`nabla_native::run_untrusted_both`])
//! on every input that ever failed a fuzzer (`fuzz/regressions/`), on every
//! example and test program, and on mutations of them: no panic, crash,
//! stack overflow or hang, and the same output on both back ends.

use nabla_native::run_untrusted_both;
use std::path::{Path, PathBuf};

fn files(dir: &Path, ext: Option<&str>, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, ext, out);
        } else if ext.is_none_or(|e| p.extension().is_some_and(|x| x == e)) {
            out.push(p);
        }
    }
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `text` with a few of its tokens (split at spaces) deleted, duplicated or
/// swapped: mostly still a program, often one that fails differently.
fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut words: Vec<&str> = text.split(' ').collect();
    for _ in 0..1 + rng.below(3) {
        let (i, j) = (rng.below(words.len()), rng.below(words.len()));
        match rng.below(3) {
            0 if words.len() > 1 => {
                words.remove(i);
            }
            1 => words.insert(i, words[j]),
            _ => words.swap(i, j),
        }
    }
    words.join(" ")
}

#[test]
fn inputs_that_ever_failed_a_fuzzer_and_every_program_agree_on_both_backends() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut inputs = Vec::new();
    files(&root.join("fuzz/regressions"), None, &mut inputs);
    files(&root.join("examples"), Some("nabla"), &mut inputs);
    files(&root.join("tests/lang"), Some("nabla"), &mut inputs);
    let problems = nabla_lang::stack::run_with_stack(move || {
        let mut problems = Vec::new();
        let mut rng = Rng(20_261_125);
        for p in &inputs {
            let bytes = std::fs::read(p).expect("readable");
            if let Err(e) = run_untrusted_both(&bytes) {
                problems.push(format!("{}: {e}", p.display()));
            }
            // Two mutations of each program.
            let text = String::from_utf8_lossy(&bytes).into_owned();
            for _ in 0..2 {
                let mutated = mutate(&text, &mut rng);
                if let Err(e) = run_untrusted_both(mutated.as_bytes()) {
                    problems.push(format!("mutation of {}: {e}\n{mutated}", p.display()));
                }
            }
        }
        problems
    })
    .expect("no panic");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
