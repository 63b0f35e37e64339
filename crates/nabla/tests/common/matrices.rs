//! nalgebra code the nalgebra tests differentiate, written the way a nalgebra
//! user would: generic over `RealField`.

use nalgebra::{DMatrix, RealField};

/// A symmetric positive definite 3×3 matrix of three parameters.
pub fn spd<T: RealField + Copy>(p: &[T]) -> DMatrix<T> {
    let c = |v: f64| nalgebra::convert::<f64, T>(v);
    let m = DMatrix::from_row_slice(
        3,
        3,
        &[
            p[0],
            p[1],
            c(0.5),
            c(0.2),
            p[2],
            p[0] * p[1],
            p[2].sin(),
            c(1.0),
            p[1].exp(),
        ],
    );
    &m * m.transpose() + DMatrix::identity(3, 3) * c(3.0)
}

/// log det A by Cholesky: 2 Σ ln Lᵢᵢ.
pub fn logdet<T: RealField + Copy>(a: DMatrix<T>) -> T {
    let l = a.cholesky().expect("positive definite").l();
    l.diagonal()
        .iter()
        .map(|&d| d.ln())
        .fold(T::zero(), |a, b| a + b)
        * nalgebra::convert(2.0)
}

/// log det of [`spd`]`(p)` by Cholesky.
pub fn logdet_cholesky<T: RealField + Copy>(p: &[T]) -> T {
    logdet(spd(p))
}
