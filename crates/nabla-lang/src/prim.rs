//! The table of primitive operations: the one place that states each
//! primitive's surface name, type and (for real functions) `f64` meaning.
//!
//! The type checker reads types from here, the desugarer arities, and the
//! interpreter the `f64` implementations. Derivative rules will be attached
//! to this same table (by [`Prim`]) when the differentiation operators arrive.
//!
//! Type signatures are written in surface type syntax with one convention
//! that only this table uses: the type variable `n` ranges over the numeric
//! types `Int` and `Real`, and `e` over the types with equality (every
//! type without functions); `s` and `t` range over the first-order types (no
//! functions: what the differentiation operators accept and return); any
//! other lowercase name is an ordinary type variable.
//!
//! The rows marked [`PrimInfo::translated`] are the primitives of the
//! translated dialect (Krawiec et al. Fig. 9 and 11, Wang et al. Fig. 10):
//! they exist only in files that start with `#!translated`, and their
//! signatures use that dialect's types (`Delta`, `DeltaMap`, `M A`, `Ref A`).

use nabla::{Binary, BinaryPrimitive, Unary};

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
    /// `%` (remainder of the truncating division)
    Rem,
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
    /// `asin`
    Asin,
    /// `acos`
    Acos,
    /// `atan`
    Atan,
    /// `sinh`
    Sinh,
    /// `cosh`
    Cosh,
    /// `log1p`
    Log1p,
    /// `expm1`
    Expm1,
    /// `ceil`
    Ceil,
    /// `round`
    Round,
    /// `trunc`
    Trunc,
    /// `signum`: 1 for +0 and positive reals, −1 for −0 and negative ones
    /// (Rust's `f64::signum`), derivative 0
    Signum,
    /// `sign`: JAX's sign, 0 at 0 (the table's `Sign`), derivative 0
    Sign,
    /// `erf`: the error function (the table's `Erf`)
    Erf,
    /// `stop_gradient`: the identity, with derivative 0 at every level
    StopGradient,
    /// `pi : Real`, the constant π (see [`Prim::constant`])
    Pi,
    /// `real` (Int to Real)
    ToReal,
    /// `to_int` (Real to Int, truncating toward zero)
    ToInt,
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
    /// `diff f x`: forward-mode derivative of `f : Real -> T`
    Diff,
    /// `grad f x`: reverse-mode gradient
    Grad,
    /// `value_and_grad f x`
    ValueAndGrad,
    /// `jvp f x dx`: value and directional derivative (forward mode)
    Jvp,
    /// `vjp f x`: value and pullback (reverse mode)
    Vjp,
    /// `jacobian f x`
    Jacobian,
    /// `hessian f x`
    Hessian,
    /// `custom_jvp f tangent x`: `f x`, differentiated by the user's tangent
    /// map `tangent x dx` instead of through `f`'s body
    CustomJvp,
    /// `custom_vjp rule x`: the value of `rule x = (y, pullback)`,
    /// differentiated by the user's pullback instead of through `rule`'s body
    CustomVjp,
    /// `chainMul p d`: the chain rule's product `p · d` of a partial derivative and
    /// a tangent or adjoint, where an exact zero on either side gives zero even if
    /// the other is infinite or NaN (`nabla::Number::chain`). The translations
    /// multiply with it, so their code keeps structural zeros as every mode does.
    Chain,
    /// `prim'fail code a b : Int`: the standard library's run-time error
    /// [`fail_message`]`(code, a, b)` (internal: only the
    /// library's definitions name it)
    Fail,

    // ---- The translated dialect (Krawiec et al. Fig. 9 and 11, Wang et al. Fig. 10) ----
    /// `pure e : M a` (at run time, the value of `e`)
    Pure,
    /// `deltaLet d : M Int`: binds `d` to the next Delta id of the innermost `runDelta`
    DeltaLet,
    /// `Zero : Delta`
    DZero,
    /// `Scale r d : Delta`
    DScale,
    /// `Add d1 d2 : Delta`
    DAdd,
    /// `Var id : Delta`
    DVar,
    /// `Let id rhs body : Delta`
    DLet,
    /// `eval x d m : DeltaMap` (Fig. 11)
    EvalDelta,
    /// `emptyMap : DeltaMap`
    EmptyMap,
    /// `lookupOrZero id m : Real`
    LookupOrZero,
    /// `mapM f v : M (Vec b)`
    MapM,
    /// `buildM n f : M (Vec a)`
    BuildM,
    /// `foldM f init v : M b`
    FoldM,
    /// `ref e : Ref a`: a new reference cell
    NewRef,
    /// `!r`: the contents of a reference cell
    Deref,
    /// `r += x`: add to a `Ref Real`
    AddTo,
    /// `shapeMismatch : a`: a run-time error (a cotangent shaped unlike its output)
    ShapeMismatch,
}

/// How a primitive acts on reals, for the primitives that are real functions:
/// by an entry of the nabla library's derivative table, which gives both the
/// value and the derivative rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RealFn {
    /// `Real -> Real`
    Unary(Unary),
    /// `Real -> Real -> Real`
    Binary(Binary),
    /// `min`/`max`: selects an argument (the first on a tie), so the
    /// derivative is that of the argument selected.
    Select(Selection),
}

/// True if the table's partial of `op` in operand `k` (0 or 1) is the
/// constant 1: both of `+`, the first of `−`. Forward mode adds such a
/// tangent as it is, in the interpreter and in compiled code alike.
///
/// ```
/// use nabla::Binary;
/// use nabla_lang::prim::partial_is_one;
/// assert!(partial_is_one(Binary::Add, 1));
/// assert!(partial_is_one(Binary::Sub, 0) && !partial_is_one(Binary::Sub, 1));
/// assert!(!partial_is_one(Binary::Mul, 0));
/// ```
pub fn partial_is_one(op: Binary, k: usize) -> bool {
    BinaryPrimitive::<f64>::has_unit_partials(&op) && (k == 0 || op == Binary::Add)
}

/// Which argument `min`/`max` select.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The smaller (`min`).
    Min,
    /// The larger (`max`).
    Max,
}

impl Selection {
    /// True if the second argument is selected (never on a tie or NaN).
    #[inline]
    pub fn takes_second(self, x: f64, y: f64) -> bool {
        match self {
            Selection::Min => y < x,
            Selection::Max => y > x,
        }
    }
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
    /// True for the primitives of the translated dialect, which only files
    /// starting with `#!translated` can name.
    pub translated: bool,
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
        translated: false,
    }
}

/// A row of the translated dialect (no `f64` meaning).
const fn trow(
    prim: Prim,
    name: &'static str,
    named: bool,
    arity: usize,
    sig: &'static str,
) -> PrimInfo {
    PrimInfo {
        prim,
        name,
        named,
        arity,
        sig,
        real: None,
        translated: true,
    }
}

/// The table.
pub static PRIMS: &[PrimInfo] = &[
    row(
        Prim::Add,
        "+",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(Binary::Add)),
    ),
    row(
        Prim::Sub,
        "-",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(Binary::Sub)),
    ),
    row(
        Prim::Mul,
        "*",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(Binary::Mul)),
    ),
    row(
        Prim::Div,
        "/",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(Binary::Div)),
    ),
    row(
        Prim::Rem,
        "%",
        false,
        2,
        "n -> n -> n",
        Some(RealFn::Binary(Binary::Rem)),
    ),
    row(
        Prim::Neg,
        "-",
        false,
        1,
        "n -> n",
        Some(RealFn::Unary(Unary::Neg)),
    ),
    row(
        Prim::Pow,
        "**",
        false,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Binary(Binary::Powf)),
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
        Some(RealFn::Unary(Unary::Sin)),
    ),
    row(
        Prim::Cos,
        "cos",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Cos)),
    ),
    row(
        Prim::Tan,
        "tan",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Tan)),
    ),
    row(
        Prim::Exp,
        "exp",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Exp)),
    ),
    row(
        Prim::Log,
        "log",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Ln)),
    ),
    row(
        Prim::Sqrt,
        "sqrt",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Sqrt)),
    ),
    row(
        Prim::Tanh,
        "tanh",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Tanh)),
    ),
    row(
        Prim::Abs,
        "abs",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Abs)),
    ),
    row(
        Prim::Atan2,
        "atan2",
        true,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Binary(Binary::Atan2)),
    ),
    row(
        Prim::Min,
        "min",
        true,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Select(Selection::Min)),
    ),
    row(
        Prim::Max,
        "max",
        true,
        2,
        "Real -> Real -> Real",
        Some(RealFn::Select(Selection::Max)),
    ),
    row(
        Prim::Floor,
        "floor",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Floor)),
    ),
    row(
        Prim::Asin,
        "asin",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Asin)),
    ),
    row(
        Prim::Acos,
        "acos",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Acos)),
    ),
    row(
        Prim::Atan,
        "atan",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Atan)),
    ),
    row(
        Prim::Sinh,
        "sinh",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Sinh)),
    ),
    row(
        Prim::Cosh,
        "cosh",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Cosh)),
    ),
    row(
        Prim::Log1p,
        "log1p",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Log1p)),
    ),
    row(
        Prim::Expm1,
        "expm1",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::ExpM1)),
    ),
    row(
        Prim::Ceil,
        "ceil",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Ceil)),
    ),
    row(
        Prim::Round,
        "round",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Round)),
    ),
    row(
        Prim::Trunc,
        "trunc",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Trunc)),
    ),
    row(
        Prim::Signum,
        "signum",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Signum)),
    ),
    row(
        Prim::Sign,
        "sign",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Sign)),
    ),
    row(
        Prim::Erf,
        "erf",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::Erf)),
    ),
    row(
        Prim::StopGradient,
        "stop_gradient",
        true,
        1,
        "Real -> Real",
        Some(RealFn::Unary(Unary::StopGradient)),
    ),
    row(Prim::Pi, "pi", true, 0, "Real", None),
    row(Prim::ToReal, "real", true, 1, "Int -> Real", None),
    row(Prim::ToInt, "to_int", true, 1, "Real -> Int", None),
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
    row(
        Prim::Diff,
        "diff",
        true,
        2,
        "(Real -> t) -> Real -> t",
        None,
    ),
    row(Prim::Grad, "grad", true, 2, "(s -> Real) -> s -> s", None),
    row(
        Prim::ValueAndGrad,
        "value_and_grad",
        true,
        2,
        "(s -> Real) -> s -> (Real, s)",
        None,
    ),
    row(
        Prim::Jvp,
        "jvp",
        true,
        3,
        "(s -> t) -> s -> s -> (t, t)",
        None,
    ),
    row(
        Prim::Vjp,
        "vjp",
        true,
        2,
        "(s -> t) -> s -> (t, t -> s)",
        None,
    ),
    row(
        Prim::Jacobian,
        "jacobian",
        true,
        2,
        "(Vec Real -> Vec Real) -> Vec Real -> Vec (Vec Real)",
        None,
    ),
    row(
        Prim::Hessian,
        "hessian",
        true,
        2,
        "(Vec Real -> Real) -> Vec Real -> Vec (Vec Real)",
        None,
    ),
    row(
        Prim::CustomJvp,
        "custom_jvp",
        true,
        3,
        "(s -> t) -> (s -> s -> t) -> s -> t",
        None,
    ),
    row(
        Prim::CustomVjp,
        "custom_vjp",
        true,
        2,
        "(s -> (t, t -> s)) -> s -> t",
        None,
    ),
    row(
        Prim::Chain,
        "chainMul",
        true,
        2,
        "Real -> Real -> Real",
        None,
    ),
    row(
        Prim::Fail,
        "prim'fail",
        true,
        3,
        "Int -> Int -> Int -> Int",
        None,
    ),
    // ---- The translated dialect ----
    trow(Prim::Pure, "pure", true, 1, "a -> M a"),
    trow(Prim::DeltaLet, "deltaLet", true, 1, "Delta -> M Int"),
    trow(Prim::DZero, "Zero", true, 0, "Delta"),
    trow(Prim::DScale, "Scale", true, 2, "Real -> Delta -> Delta"),
    trow(Prim::DAdd, "Add", true, 2, "Delta -> Delta -> Delta"),
    trow(Prim::DVar, "Var", true, 1, "Int -> Delta"),
    trow(Prim::DLet, "Let", true, 3, "Int -> Delta -> Delta -> Delta"),
    trow(
        Prim::EvalDelta,
        "eval",
        true,
        3,
        "Real -> Delta -> DeltaMap -> DeltaMap",
    ),
    trow(Prim::EmptyMap, "emptyMap", true, 0, "DeltaMap"),
    trow(
        Prim::LookupOrZero,
        "lookupOrZero",
        true,
        2,
        "Int -> DeltaMap -> Real",
    ),
    trow(
        Prim::MapM,
        "mapM",
        true,
        2,
        "(a -> M b) -> Vec a -> M (Vec b)",
    ),
    trow(
        Prim::BuildM,
        "buildM",
        true,
        2,
        "Int -> (Int -> M a) -> M (Vec a)",
    ),
    trow(
        Prim::FoldM,
        "foldM",
        true,
        3,
        "(b -> M (a -> M b)) -> b -> Vec a -> M b",
    ),
    trow(Prim::NewRef, "ref", true, 1, "a -> Ref a"),
    trow(Prim::Deref, "!", false, 1, "Ref a -> a"),
    trow(Prim::AddTo, "+=", false, 2, "Ref Real -> Real -> ()"),
    trow(Prim::ShapeMismatch, "shapeMismatch", true, 0, "a"),
];

impl Prim {
    /// The primitive a binary operator applies. `&&` and `||` are not
    /// primitives — they short-circuit, and lowering turns them into `if`s
    /// before asking — so for them the answer (`Not`) is never used.
    pub fn of_operator(op: crate::syntax::ast::BinOp) -> Prim {
        use crate::syntax::ast::BinOp;
        match op {
            BinOp::Add => Prim::Add,
            BinOp::Sub => Prim::Sub,
            BinOp::Mul => Prim::Mul,
            BinOp::Div => Prim::Div,
            BinOp::Rem => Prim::Rem,
            BinOp::Pow => Prim::Pow,
            BinOp::Lt => Prim::Lt,
            BinOp::Le => Prim::Le,
            BinOp::Gt => Prim::Gt,
            BinOp::Ge => Prim::Ge,
            BinOp::Eq => Prim::Eq,
            BinOp::Ne => Prim::Ne,
            BinOp::AddTo => Prim::AddTo,
            BinOp::And | BinOp::Or => Prim::Not,
        }
    }

    /// This primitive's row of [`PRIMS`].
    pub fn info(self) -> &'static PrimInfo {
        // Rows are in variant order (checked by a unit test).
        &PRIMS[self as usize]
    }

    /// The value of a constant primitive (`pi`). Both lowerings replace a
    /// constant by its value as a real literal, so every back end, mode and
    /// translation treats it like one (derivative 0).
    pub fn constant(self) -> Option<f64> {
        match self {
            Prim::Pi => Some(std::f64::consts::PI),
            _ => None,
        }
    }

    /// True for the differentiation operators and the custom derivative
    /// rules (`custom_jvp`, `custom_vjp`: they act at the levels the
    /// operators start).
    pub fn is_derivative(self) -> bool {
        matches!(
            self,
            Prim::Diff
                | Prim::Grad
                | Prim::ValueAndGrad
                | Prim::Jvp
                | Prim::Vjp
                | Prim::Jacobian
                | Prim::Hessian
                | Prim::CustomJvp
                | Prim::CustomVjp
        )
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

/// The prefix by which the standard library (`types/stdlib.nabla`) names built-ins
/// ([`crate::prim::lookup_named_in`] resolves `prim'size` to `size` whatever
/// the program binds `size` to).
pub const PRIM_PREFIX: &str = "prim'";

/// The `prim'fail` code native code raises where a vector it proved to have
/// `b` elements has `a` (a compiler bug, reported as one).
pub const FAIL_PROVED_LENGTH: i64 = 10;

/// The message of the run-time error `prim'fail code a b` raises (the
/// interpreter's and native code's, so both say the same).
pub fn fail_message(code: i64, a: i64, b: i64) -> String {
    match code {
        0 => format!("`slice` with negative start {a}"),
        1 => format!("`slice` with negative length {a}"),
        2 => format!("`slice` of {b} elements from index {a} runs past the end of the vector"),
        3 => format!("`iota` with negative size {a}"),
        4 => format!("`replicate` with negative count {a}"),
        5 => format!("`linspace` with negative count {a}"),
        6 => "`argmax` of an empty vector".into(),
        7 => "`argmin` of an empty vector".into(),
        8 => "`maximum` of an empty vector".into(),
        9 => "`minimum` of an empty vector".into(),
        FAIL_PROVED_LENGTH => {
            format!("internal error: a vector of {a} elements where the compiler proved {b}")
        }
        _ => format!("internal error: standard library error {code} ({a}, {b})"),
    }
}

/// The primitive a surface identifier names in an ordinary file, if any
/// (shadowable by user bindings).
pub fn lookup_named(name: &str) -> Option<&'static PrimInfo> {
    lookup_named_in(name, false)
}

/// The primitive a surface identifier names, if any, in a translated file
/// (`translated`: the dialect's primitives are visible too) or an ordinary one.
pub fn lookup_named_in(name: &str, translated: bool) -> Option<&'static PrimInfo> {
    // The standard library names built-ins as `prim'size` (types::stdlib).
    let plain = name.strip_prefix(PRIM_PREFIX);
    PRIMS.iter().find(|p| {
        p.named && (p.name == name || plain == Some(p.name)) && (translated || !p.translated)
    })
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
            assert_eq!(p.prim.info().prim, p.prim, "rows must be in variant order");
        }
    }

    #[test]
    fn the_fast_sum_of_reals_adds_in_the_lanes_of_the_general_one() {
        let values = [
            1e16, 1.0, -1e16, 3.0, -0.0, 0.1, -7.5, 1e-300, 2.5e15, 0.0, 13.0,
        ];
        for n in 0..40 {
            let xs: Vec<f64> = (0..n).map(|i| values[(i * 7 + n) % values.len()]).collect();
            let general = sum_in_lanes(xs.iter().copied().map(Ok), |a, b| Ok::<f64, ()>(a + b));
            let want = general.map_or(-0.0, |r| r.unwrap_or(f64::NAN));
            let got = sum_reals_in_lanes(&xs);
            assert_eq!(got.to_bits(), want.to_bits(), "{xs:?}");
        }
        assert_eq!(sum_reals_in_lanes(&[-0.0]).to_bits(), (-0.0f64).to_bits());
    }

    #[test]
    fn the_dialect_primitives_are_visible_only_in_translated_files() {
        assert!(lookup_named("deltaLet").is_none());
        assert!(lookup_named("pure").is_none());
        assert_eq!(
            lookup_named_in("deltaLet", true).map(|p| p.prim),
            Some(Prim::DeltaLet)
        );
        assert_eq!(
            lookup_named_in("sin", true).map(|p| p.prim),
            Some(Prim::Sin)
        );
        assert_eq!(
            lookup_named_in("sin", false).map(|p| p.prim),
            Some(Prim::Sin)
        );
    }
}

/// What the second value of a pair that a derivative operator walks
/// together is: `jvp`'s tangent beside the point, or a pullback's cotangent
/// beside the function's output (for the messages of a shape mismatch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// `jvp`'s tangent, shaped like the point.
    Tangent,
    /// A pullback's cotangent, shaped like the output.
    Cotangent,
    /// The result of `custom_jvp`'s tangent map, shaped like the function's value.
    CustomTangent,
    /// The result of `custom_vjp`'s pullback, shaped like the point.
    CustomCotangent,
}

impl Role {
    /// How messages name (the primal, the other value).
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            Role::Tangent => ("the point", "the tangent"),
            Role::Cotangent => ("the function's output", "the cotangent"),
            Role::CustomTangent => ("the function's value", "the custom tangent"),
            Role::CustomCotangent => ("the point", "the custom pullback's result"),
        }
    }
}

/// The number of lanes a sum of reals adds in ([`sum_in_lanes`]).
pub const SUM_LANES: usize = 4;

/// The language's sum of reals, `sum v`, at any level: element `i` is
/// added, left to right, into lane `i mod 4` (a lane starts at its first
/// element), and the lanes that have elements are added in order,
/// `((lane 0 + lane 1) + lane 2) + lane 3`. Up to four elements this is
/// the sum left to right; beyond, it is the order a vectorised loop adds in
/// (four independent chains, as NumPy's and Julia's sums use several), and
/// native code keeps it to the bit. `None` for no elements (the caller
/// knows the zero of the type). The elements may be made as they are
/// added (`sum (build n f)`): the first that fails is the sum's error.
pub fn sum_in_lanes<T, E>(
    xs: impl IntoIterator<Item = Result<T, E>>,
    mut add: impl FnMut(T, T) -> Result<T, E>,
) -> Option<Result<T, E>> {
    let mut lanes = Lanes::default();
    for x in xs {
        let added = x.and_then(|x| lanes.add(x, &mut add));
        if let Err(e) = added {
            return Some(Err(e));
        }
    }
    lanes.total(add)
}

/// A sum in the language's lanes ([`sum_in_lanes`]) being added, one
/// element at a time.
pub struct Lanes<T> {
    lanes: [Option<T>; SUM_LANES],
    count: usize,
}

impl<T> Default for Lanes<T> {
    fn default() -> Self {
        Lanes {
            lanes: Default::default(),
            count: 0,
        }
    }
}

impl<T> Lanes<T> {
    /// The lanes after `count` plain reals were added into `sums` (each
    /// from -0.0, which adds exactly: [`sum_reals_in_lanes`]), each sum
    /// made a `T` by `real`, to go on with elements that are not plain.
    pub fn of_plain(sums: [f64; SUM_LANES], count: usize, real: impl Fn(f64) -> T) -> Self {
        let mut lanes = Lanes::default();
        for (k, (lane, sum)) in lanes.lanes.iter_mut().zip(sums).enumerate() {
            *lane = (k < count).then(|| real(sum));
        }
        lanes.count = count;
        lanes
    }

    /// Adds the next element into its lane.
    pub fn add<E>(&mut self, x: T, add: &mut impl FnMut(T, T) -> Result<T, E>) -> Result<(), E> {
        let lane = &mut self.lanes[self.count % SUM_LANES];
        self.count += 1;
        *lane = Some(match lane.take() {
            None => x,
            Some(acc) => add(acc, x)?,
        });
        Ok(())
    }

    /// The lanes that have elements added in order; `None` for none.
    pub fn total<E>(self, add: impl FnMut(T, T) -> Result<T, E>) -> Option<Result<T, E>> {
        let mut lanes = self.lanes.into_iter().flatten();
        let first = lanes.next()?;
        Some(lanes.try_fold(first, add))
    }
}

/// [`sum_in_lanes`] of plain reals, the interpreter's fast path: four
/// running sums from -0.0 (which adds exactly, so a lane without elements
/// adds nothing), four elements at a time; -0.0 for no elements.
pub fn sum_reals_in_lanes(xs: &[f64]) -> f64 {
    let mut lanes = [-0.0; SUM_LANES];
    let mut blocks = xs.chunks_exact(SUM_LANES);
    for block in &mut blocks {
        for (lane, x) in lanes.iter_mut().zip(block) {
            *lane += x;
        }
    }
    for (lane, x) in lanes.iter_mut().zip(blocks.remainder()) {
        *lane += x;
    }
    let [a, b, c, d] = lanes;
    ((a + b) + c) + d
}
