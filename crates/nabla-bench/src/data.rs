//! Locating and reading the ADBench inputs and the oracle.

use std::path::PathBuf;

/// The directory holding the ADBench input files and `oracle.json`: the
/// `NABLA_BENCH_DATA` environment variable if set, otherwise
/// `shared/bench-data/adbench` beside the repository (where CI puts `shared/`).
pub fn data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("NABLA_BENCH_DATA") {
        return PathBuf::from(dir);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench-data/adbench")
}

/// The contents of one input file.
///
/// # Panics
/// If the file cannot be read: the benchmarks cannot run without their data.
pub fn read_input(name: &str) -> String {
    let path = data_dir().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read benchmark input {}: {e}", path.display()))
}

/// The parsed `oracle.json`.
pub fn oracle() -> serde_json::Value {
    serde_json::from_str(&read_input("oracle.json")).expect("oracle.json is valid JSON")
}

/// A numeric array of the oracle, e.g. `oracle_vec(&o["gmm_test"]["gradient"])`.
pub fn oracle_vec(value: &serde_json::Value) -> Vec<f64> {
    value
        .as_array()
        .expect("oracle entry is an array")
        .iter()
        .map(|x| x.as_f64().expect("oracle entry is a number"))
        .collect()
}

/// A whitespace-separated stream of numbers, the format of every ADBench input.
pub(crate) struct Numbers<'a> {
    tokens: std::str::SplitAsciiWhitespace<'a>,
}

impl<'a> Numbers<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Numbers {
            tokens: text.split_ascii_whitespace(),
        }
    }

    pub(crate) fn next_f64(&mut self) -> f64 {
        let token = self.tokens.next().expect("input ended early");
        token
            .parse()
            .unwrap_or_else(|_| panic!("not a number in input: {token:?}"))
    }

    pub(crate) fn next_usize(&mut self) -> usize {
        let token = self.tokens.next().expect("input ended early");
        token
            .parse()
            .unwrap_or_else(|_| panic!("not a count in input: {token:?}"))
    }

    pub(crate) fn take(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next_f64()).collect()
    }
}
