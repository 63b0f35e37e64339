//! The front end: spans, lexer, AST and parser.

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod span;
