//! Interval arithmetic over the neighbourhood of the sample point.
//!
//! The generator knows the point at which every program will be evaluated
//! and gives each input leaf the interval `[x - r, x + r]`. Every generated
//! Real expression carries an interval that contains all the values it can
//! take when the inputs range over that box. The generator uses this to keep
//! values bounded (`exp` of bounded arguments, `log`/`sqrt`/`**` of positive
//! arguments, denominators away from zero) and, above all, to make every
//! comparison of reals *constant over the box*: a threshold is always chosen
//! outside the interval of the compared expression. So no `if`, `min`, `max`
//! or `abs` has a kink within reach of the finite differences, yet which
//! branch is taken still depends on the sample point.
//!
//! Every result is widened outwards (relative 1e-9, absolute 1e-12) to cover
//! rounding in both the bounds and libm. Values of unknown size (derivatives
//! computed by nested AD calls) get the infinite interval.

use std::f64::consts::PI;

/// A closed interval `[lo, hi]`, possibly infinite.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Iv {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
}

fn widen(lo: f64, hi: f64) -> Iv {
    let lo = if lo.is_nan() { f64::NEG_INFINITY } else { lo };
    let hi = if hi.is_nan() { f64::INFINITY } else { hi };
    Iv {
        lo: lo - 1e-12 - 1e-9 * lo.abs(),
        hi: hi + 1e-12 + 1e-9 * hi.abs(),
    }
}

/// `a * b` for bounds, where `0 * inf` is 0 (every actual value is finite).
fn bmul(a: f64, b: f64) -> f64 {
    if a == 0.0 || b == 0.0 { 0.0 } else { a * b }
}

impl Iv {
    /// Exactly `[x, x]` (literals).
    pub(crate) fn point(x: f64) -> Iv {
        Iv { lo: x, hi: x }
    }

    /// `[lo, hi]`, widened.
    pub(crate) fn new(lo: f64, hi: f64) -> Iv {
        widen(lo, hi)
    }

    /// Everything.
    pub(crate) fn unknown() -> Iv {
        Iv {
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
        }
    }

    /// The largest absolute value.
    pub(crate) fn mag(self) -> f64 {
        self.lo.abs().max(self.hi.abs())
    }

    pub(crate) fn is_finite(self) -> bool {
        self.lo.is_finite() && self.hi.is_finite()
    }

    pub(crate) fn contains(self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    pub(crate) fn within(self, other: Iv) -> bool {
        other.lo <= self.lo && self.hi <= other.hi
    }

    pub(crate) fn hull(self, o: Iv) -> Iv {
        Iv {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    /// `true` if every value is at least `m` away from zero.
    pub(crate) fn away_from_zero(self, m: f64) -> bool {
        self.lo > m || self.hi < -m
    }

    pub(crate) fn add(self, o: Iv) -> Iv {
        widen(self.lo + o.lo, self.hi + o.hi)
    }

    pub(crate) fn sub(self, o: Iv) -> Iv {
        widen(self.lo - o.hi, self.hi - o.lo)
    }

    pub(crate) fn neg(self) -> Iv {
        Iv {
            lo: -self.hi,
            hi: -self.lo,
        }
    }

    pub(crate) fn mul(self, o: Iv) -> Iv {
        let ps = [
            bmul(self.lo, o.lo),
            bmul(self.lo, o.hi),
            bmul(self.hi, o.lo),
            bmul(self.hi, o.hi),
        ];
        let lo = ps.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        widen(lo, hi)
    }

    /// Only for denominators that exclude zero.
    pub(crate) fn div(self, o: Iv) -> Iv {
        assert!(
            o.away_from_zero(0.0),
            "division by an interval containing 0"
        );
        self.mul(widen(1.0 / o.hi, 1.0 / o.lo))
    }

    /// `x * x` (tighter than `mul` for a square).
    pub(crate) fn sq(self) -> Iv {
        if self.lo >= 0.0 {
            widen(self.lo * self.lo, self.hi * self.hi)
        } else if self.hi <= 0.0 {
            widen(self.hi * self.hi, self.lo * self.lo)
        } else {
            widen(0.0, self.mag() * self.mag())
        }
    }

    pub(crate) fn sin(self) -> Iv {
        if !self.is_finite() || self.hi - self.lo >= 2.0 * PI {
            return Iv::new(-1.0, 1.0);
        }
        let (a, b) = (self.lo.sin(), self.hi.sin());
        let mut lo = a.min(b);
        let mut hi = a.max(b);
        // Is there a maximum (pi/2 + 2k pi) or a minimum (-pi/2 + 2k pi) inside?
        let has = |c: f64| {
            let k = ((self.lo - c) / (2.0 * PI)).ceil();
            c + 2.0 * PI * k <= self.hi + 1e-9
        };
        if has(PI / 2.0) {
            hi = 1.0;
        }
        if has(-PI / 2.0) {
            lo = -1.0;
        }
        widen(lo, hi)
    }

    pub(crate) fn cos(self) -> Iv {
        // cos x = sin (x + pi/2); the shift is widened.
        self.add(Iv::point(PI / 2.0)).sin()
    }

    pub(crate) fn exp(self) -> Iv {
        widen(self.lo.exp(), self.hi.exp())
    }

    pub(crate) fn tanh(self) -> Iv {
        widen(self.lo.tanh(), self.hi.tanh())
    }

    /// erf is increasing (the library's table computes it).
    pub(crate) fn erf(self) -> Iv {
        let erf = |x: f64| nabla::Unary::Erf.eval(x);
        widen(erf(self.lo), erf(self.hi))
    }

    /// Only for positive arguments.
    pub(crate) fn sqrt(self) -> Iv {
        assert!(self.lo > 0.0);
        widen(self.lo.sqrt(), self.hi.sqrt())
    }

    /// Only for positive arguments.
    pub(crate) fn log(self) -> Iv {
        assert!(self.lo > 0.0);
        widen(self.lo.ln(), self.hi.ln())
    }

    /// `x ** p` for a positive base, or for any base when `p` is a small
    /// non-negative integer.
    pub(crate) fn powc(self, p: f64) -> Iv {
        if self.lo > 0.0 {
            let (a, b) = (self.lo.powf(p), self.hi.powf(p));
            return widen(a.min(b), a.max(b));
        }
        assert!(
            p >= 0.0 && p.fract() == 0.0,
            "non-integer power of a non-positive base"
        );
        let n = p as u32;
        let mut acc = Iv::point(1.0);
        // x^n by repeated products, using the square where possible.
        if n.is_multiple_of(2) {
            let s = self.sq();
            for _ in 0..n / 2 {
                acc = acc.mul(s);
            }
        } else {
            for _ in 0..n {
                acc = acc.mul(self);
            }
        }
        acc
    }

    /// Only when the interval excludes 0.
    pub(crate) fn abs(self) -> Iv {
        if self.lo > 0.0 { self } else { self.neg() }
    }

    pub(crate) fn min(self, o: Iv) -> Iv {
        Iv {
            lo: self.lo.min(o.lo),
            hi: self.hi.min(o.hi),
        }
    }

    pub(crate) fn max(self, o: Iv) -> Iv {
        Iv {
            lo: self.lo.max(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sin_covers_extrema() {
        let i = Iv::new(1.0, 2.0).sin();
        assert!(i.hi >= 1.0 && i.lo <= 1.0f64.sin());
        let i = Iv::new(4.0, 5.0).sin();
        assert!(i.lo <= -1.0);
        let i = Iv::new(-4.0, 4.0).cos();
        assert!(i.lo <= -1.0 && i.hi >= 1.0);
    }

    #[test]
    fn mul_with_infinity() {
        let i = Iv::point(0.0).mul(Iv::unknown());
        assert!(i.contains(0.0) && i.is_finite());
    }
}
