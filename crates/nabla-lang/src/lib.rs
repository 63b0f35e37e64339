//! The nabla language: a small, statically typed, higher-order functional
//! language in the ML family (see `docs/language.md`).
//!
//! Data flows one way:
//!
//! ```text
//! text --syntax::lexer--> tokens --syntax::parser--> AST (spans)
//!      --types::infer--> types + facts --core::desugar--> core IR --eval--> values
//! ```
//!
//! Every phase has its own error type, and each converts into
//! [`diagnostic::Diagnostic`], rendered by the caller. [`driver::Session`]
//! strings the phases together for the CLI, the REPL, the tests and the fuzzer.
//!
//! ```
//! use nabla_lang::driver::Session;
//! let mut s = Session::new();
//! s.load("demo.nabla", "def sq x = x * x\ndef main = sq 3.0").unwrap();
//! assert_eq!(s.run_main().unwrap(), "9.0");
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod ad;
pub mod core;
pub mod data;
pub mod diagnostic;
pub mod driver;
pub mod eval;
pub mod memory;
pub mod pretty;
pub mod prim;
pub mod stack;
pub mod syntax;
pub mod translate;
pub mod types;
