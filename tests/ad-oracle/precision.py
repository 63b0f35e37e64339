"""Full-precision reference values for the expected results whose last digits
depend on rounding or evaluation order (quoted in tests/ad-oracle/NOTES.md), computed
with exact rationals (at the binary values of the decimal inputs) and mpmath at
40 significant digits.

    tests/ad-oracle/.venv/bin/python tests/ad-oracle/precision.py
"""
import math
from fractions import Fraction as Fr

import mpmath as mp

mp.mp.dps = 40


def d(x, n=25):
    return mp.nstr(mp.mpf(x.numerator) / x.denominator if isinstance(x, Fr) else mp.mpf(x), n)


print("== quaternion (Krawiec Fig. 12): exact value/gradient at the binary inputs")
qx, qy, qz, qw, vx, vy, vz = map(Fr, [1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7])
uv = qx * vx + qy * vy + qz * vz
uu = qx * qx + qy * qy + qz * qz
s = qw
val = 2 * uv * qx + (s * s - uu) * vx + 2 * s * (qy * vz - qz * vy)
grad = [2 * uv, 2 * vy * qx - 2 * qy * vx + 2 * s * vz, 2 * vz * qx - 2 * qz * vx - 2 * s * vy,
        2 * s * vx + 2 * (qy * vz - qz * vy), 2 * qx * qx + (s * s - uu), 2 * qy * qx - 2 * s * qz,
        2 * qz * qx + 2 * s * qy]
printed = [71.87400000000008, 91.96000000000001, 58.08, -77.44, 38.72000000000001, 4.840000000000005,
           -24.2, 26.620000000000005]
for name, exact, pr in zip(["value", "dqx", "dqy", "dqz", "dqw", "dvx", "dvy", "dvz"], [val] + grad, printed):
    rel = abs(Fr(pr) - exact) / abs(exact)
    print(f"  {name:5} exact {d(exact)}  printed {pr!r:22} rel. diff {float(rel):.1e}")

print("== rosenbrock: 20000 steps of the same iteration in 40-digit arithmetic")
x, y = mp.mpf(Fr(-1.2).numerator) / Fr(-1.2).denominator, mp.mpf(1)
eta = mp.mpf(Fr(0.001).numerator) / Fr(0.001).denominator
for _ in range(20000):
    gx = -2 * (1 - x) - 400 * x * (y - x * x)
    gy = 200 * (y - x * x)
    x, y = x - eta * gx, y - eta * gy
for name, v, pr in [("x", x, 0.9998608816356789), ("y", y, 0.9997212258829071)]:
    print(f"  {name} exact {mp.nstr(v, 25)}  printed {pr!r}  rel. diff {float(abs(mp.mpf(pr) - v) / abs(v)):.1e}")

print("== prim_tan_tanh")
print(f"  tan'(1)    = sec²(1)      = {mp.nstr(1 / mp.cos(1) ** 2, 25)}"
      f"  (1/(cos 1)² in f64: {1.0 / (math.cos(1.0) * math.cos(1.0))!r},"
      f" 1 + tan² 1 in f64: {math.tan(1.0) * math.tan(1.0) + 1.0!r})")
print(f"  tanh'(0.5) = 1 - tanh²0.5 = {mp.nstr(1 - mp.tanh(mp.mpf(0.5)) ** 2, 25)}"
      f"  (1 - tanh² in f64: {repr(1.0 - math.tanh(0.5) ** 2)}, sech² in f64: {repr(1.0 / math.cosh(0.5) ** 2)})")

print("== conv_pow_const_exponent: 3x² at x = fl(-1.3)")
x13 = Fr(-1.3)
print(f"  exact {d(3 * x13 * x13)}; f64 3·x·x = {3.0 * -1.3 * -1.3!r}, 3·x**2 = {3.0 * (-1.3) ** 2.0!r},"
      f" 3·x³/x = {3.0 * (-1.3) ** 3.0 / -1.3!r}")

print("== share_multiplicative_loop: fl(1.0000001)^(10^6)")
c = Fr(1.0000001)
print(f"  exact power of the binary constant: {mp.nstr(mp.power(mp.mpf(c.numerator) / c.denominator, 10 ** 6), 25)}")
print(f"  exact power of the decimal 1.0000001: {mp.nstr(mp.power(mp.mpf('1.0000001'), 10 ** 6), 25)}")
yv = 1.0
for _ in range(10 ** 6):
    yv *= 1.0000001
print(f"  the left-to-right product of 10^6 roundings (printed): {yv!r}")

print("== saddle_point: exact")
xs = 1 - Fr(3, 8) ** 12
print(f"  x = 1 - (3/8)^12 = {xs} = {d(xs, 30)}; y = 2 + (x - 1)/2 = {2 + (xs - 1) / 2}")

print("== libm values that appear in expected results")
for e in ["cos 0.5", "-sin 0.5", "2 cos 0.5", "exp 1", "8 log 2"]:
    f64 = {"cos 0.5": math.cos(0.5), "-sin 0.5": -math.sin(0.5), "2 cos 0.5": 2 * math.cos(0.5),
           "exp 1": math.exp(1.0), "8 log 2": 8 * math.log(2.0)}[e]
    exact = {"cos 0.5": mp.cos(0.5), "-sin 0.5": -mp.sin(0.5), "2 cos 0.5": 2 * mp.cos(0.5),
             "exp 1": mp.e, "8 log 2": 8 * mp.log(2)}[e]
    print(f"  {e:9} = {mp.nstr(exact, 25)}  f64 {f64!r}")
