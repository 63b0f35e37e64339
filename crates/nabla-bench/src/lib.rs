//! Benchmarks of `nabla` on the ADBench workloads (GMM, BA, LSTM) and on the nested
//! saddle/particle problems of Siskind & Pearlmutter, as defined in
//! `shared/BENCHMARKS.md`.
//!
//! Each workload module holds the input parser, the objective written once over
//! [`nabla::Scalar`], its derivative by the library, and a hand-written derivative
//! (the "manual" baseline). [`registry`] lists every Rust implementation of every
//! workload; the `nabla-bench` binary checks them against the oracle and times them,
//! and `bench/run` adds the Python implementations.

// The numerical kernels index several arrays in step (triangular loops, gates);
// index loops say that more plainly than zipped iterators.
#![allow(clippy::needless_range_loop)]

pub mod ba;
pub mod check;
pub mod data;
pub mod gmm;
pub mod lang;
pub mod lstm;
pub mod nested;
pub mod particle;
pub mod registry;
pub mod saddle;
