//! The table of primitive operations: the one place that states each
//! primitive's surface name, type and (for real functions) `f64` meaning.
//!
//! The type checker reads types from here, the desugarer arities, and the
//! interpreter the `f64` implementations. Derivative rules will be attached
//! to this same table (by [`Prim`]) when the differentiation operators arrive.
//!
//! Type signatures are written in surface type syntax with one convention
//! that only this table uses: the type variable `n` ranges over the numeric
//! types `Int` and `Real`, and `e` over the types with equality (`Int`,
//! `Real`, `Bool`); any other lowercase name is an ordinary type variable.

/// A primitive operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prim {
    /// `+`
    Add,
    /// binary `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// unary `-`
    Neg,
    /// `**`
    Pow,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `not`
    Not,
    /// `sin`
    Sin,
    /// `cos`
    Cos,
    /// `tan`
    Tan,
    /// `exp`
    Exp,
    /// `log` (natural)
    Log,
    /// `sqrt`
    Sqrt,
    /// `tanh`
    Tanh,
    /// `abs`
    Abs,
    /// `atan2 y x`
    Atan2,
    /// `min`
    Min,
    /// `max`
    Max,
    /// `floor`
    Floor,
    /// `real` (Int to Real)
    ToReal,
    /// `fst`
    Fst,
    /// `snd`
    Snd,
    /// `build n f`
    Build,
    /// `v[i]`
    Index,
    /// `size`
    Size,
    /// `sum`
    Sum,
    /// `map`
    Map,
    /// `fold f init v`
    Fold,
    /// `zip`
    Zip,
}

/// How a primitive acts on reals, for the primitives that are real functions.
#[derive(Clone, Copy, Debug)]
pub enum RealFn {
    /// `Real -> Real`
    Unary(fn(f64) -> f64),
    /// `Real -> Real -> Real`
    Binary(fn(f64, f64) -> f64),
}

/// One row of the primitive table.
#[derive(Clone, Copy, Debug)]
pub struct PrimInfo {
    /// Which primitive.
    pub prim: Prim,
    /// Surface name: an identifier (`sin`) or an operator symbol (`+`).
    pub name: &'static str,
    /// `true` if `name` is an identifier usable as a first-class function.
    pub named: bool,
    /// Number of (curried) arguments.
    pub arity: usize,
    /// Type, in surface syntax (see the module docs for `n` and `e`).
    pub sig: &'static str,
    /// The `f64` meaning, for real functions.
    pub real: Option<RealFn>,
}

const fn row(
    prim: Prim,
    name: &'static str,
    named: bool,
    arity: usize,
    sig: &'static str,
    real: Option<RealFn>,
) -> PrimInfo {
    PrimInfo {
        prim,
        name,
        named,
        arity,
        sig,
        real,
    }
}

fn f64_floor(x: f64) -> f64 {
    x.floor()
}

/// The table.
pub static PRIMS: &[PrimInfo] = &[
    row(
        Prim::Add,
        "+",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(|a, b| a + b)),
    ),
    row(
        Prim::Sub,
        "-",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(|a, b| a - b)),
    ),
    row(
        Prim::Mul,
        "*",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(|a, b| a * b)),
    ),
    row(
        Prim::Div,
        "/",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(|a, b| a / b)),
    ),
    row(
        Prim::Neg,
        "-",
        false,
        1,
        "n -> n",
        Some(RealFn::Unary(|a| -a)),
    ),
    row(
        Prim::Pow,
        "**",
        false,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Binary(f64::powf)),
    ),
    row(Prim::Lt, "<", false, 2, "n -> n -> Bool", None),
    row(Prim::Le, "<=", false, 2, "n -> n -> Bool", None),
    row(Prim::Gt, ">", false, 2, "n -> n -> Bool", None),
    row(Prim::Ge, ">=", false, 2, "n -> n -> Bool", None),
    row(Prim::Eq, "==", false, 2, "e -> e -> Bool", None),
    row(Prim::Ne, "!=", false, 2, "e -> e -> Bool", None),
    row(Prim::Not, "not", true, 1, "Bool -> Bool", None),
    row(
        Prim::Sin,
        "sin",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::sin)),
    ),
    row(
        Prim::Cos,
        "cos",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::cos)),
    ),
    row(
        Prim::Tan,
        "tan",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::tan)),
    ),
    row(
        Prim::Exp,
        "exp",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::exp)),
    ),
    row(
        Prim::Log,
        "log",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::ln)),
    ),
    row(
        Prim::Sqrt,
        "sqrt",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::sqrt)),
    ),
    row(
        Prim::Tanh,
        "tanh",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::tanh)),
    ),
    row(
        Prim::Abs,
        "abs",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64::abs)),
    ),
    row(
        Prim::Atan2,
        "atan2",
        true,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Binary(f64::atan2)),
    ),
    row(
        Prim::Min,
        "min",
        true,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Binary(f64::min)),
    ),
    row(
        Prim::Max,
        "max",
        true,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Binary(f64::max)),
    ),
    row(
        Prim::Floor,
        "floor",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(f64_floor)),
    ),
    row(Prim::ToReal, "real", true, 1, "Int -> Real", None),
    row(Prim::Fst, "fst", true, 1, "(a, b) -> a", None),
    row(Prim::Snd, "snd", true, 1, "(a, b) -> b", None),
    row(
        Prim::Build,
        "build",
        true,
        2,
        "Int -> (Int -> a) -> Vec a",
        None,
    ),
    row(Prim::Index, "[]", false, 2, "Vec a -> Int -> a", None),
    row(Prim::Size, "size", true, 1, "Vec a -> Int", None),
    // Internally `sum` takes the zero of its element type first (inserted by
    // the desugarer from the inferred type), so `sum []` needs no guessing.
    row(Prim::Sum, "sum", true, 1, "Vec n -> n", None),
    row(
        Prim::Map,
        "map",
        true,
        2,
        "(a -> b) -> Vec a -> Vec b",
        None,
    ),
    row(
        Prim::Fold,
        "fold",
        true,
        3,
        "(b -> a -> b) -> b -> Vec a -> b",
        None,
    ),
    row(
        Prim::Zip,
        "zip",
        true,
        2,
        "Vec a -> Vec b -> Vec (a, b)",
        None,
    ),
];

impl Prim {
    /// This primitive's row of [`PRIMS`].
    pub fn info(self) -> &'static PrimInfo {
        // Every variant has exactly one row (checked by a unit test).
        PRIMS.iter().find(|p| p.prim == self).unwrap_or(&PRIMS[0])
    }

    /// Number of arguments the interpreter passes (one more than the surface
    /// arity for `sum`, which also receives its zero).
    pub fn runtime_arity(self) -> usize {
        if self == Prim::Sum {
            2
        } else {
            self.info().arity
        }
    }
}

/// The primitive a surface identifier names, if any (shadowable by user bindings).
pub fn lookup_named(name: &str) -> Option<&'static PrimInfo> {
    PRIMS.iter().find(|p| p.named && p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prim_has_one_row_and_a_parsable_signature() {
        for p in PRIMS {
            assert_eq!(
                PRIMS.iter().filter(|q| q.prim == p.prim).count(),
                1,
                "{:?}",
                p.prim
            );
            assert!(
                crate::syntax::parser::parse_type(p.sig, 0).is_ok(),
                "{}",
                p.sig
            );
            assert_eq!(p.prim.info().name, p.name);
        }
    }
}
