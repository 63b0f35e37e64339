//! The agreement test of BENCHMARKS.md: |x − y| / max(1, |x| + |y|) < 1e-8.

/// The tolerance every implementation must meet against the oracle.
pub const TOLERANCE: f64 = 1e-8;

/// The relative error of BENCHMARKS.md between two numbers.
pub fn rel_err(x: f64, y: f64) -> f64 {
    (x - y).abs() / (x.abs() + y.abs()).max(1.0)
}

/// The largest [`rel_err`] over two equally long vectors; `f64::INFINITY` if their
/// lengths differ or any value is NaN.
pub fn max_rel_err(xs: &[f64], ys: &[f64]) -> f64 {
    if xs.len() != ys.len() {
        return f64::INFINITY;
    }
    xs.iter().zip(ys).fold(0.0, |worst, (&x, &y)| {
        let e = rel_err(x, y);
        if e.is_nan() {
            f64::INFINITY
        } else {
            worst.max(e)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_error_is_absolute_below_one() {
        assert_eq!(rel_err(1e-9, 0.0), 1e-9);
        assert_eq!(rel_err(100.0, 101.0), 1.0 / 201.0);
        assert_eq!(max_rel_err(&[1.0], &[1.0, 2.0]), f64::INFINITY);
        assert_eq!(max_rel_err(&[f64::NAN], &[1.0]), f64::INFINITY);
    }
}
