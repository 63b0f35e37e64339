//! Source-to-source automatic differentiation: the translations of
//! Krawiec et al. (forward, Fig. 3; reverse with Delta, Fig. 9 and 16) and
//! Wang et al. (reverse in continuation-passing style, Fig. 10), on the named
//! core ([`crate::core::named`]). Their output is printed as nabla source
//! (see [`crate::pretty`]) and runs in the interpreter, whose support for the
//! translation-only constructs (Fig. 11's `runDelta`, `deltaLet` and `eval`)
//! lives in `crate::eval`.

pub mod types;
