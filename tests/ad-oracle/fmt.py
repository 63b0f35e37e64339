"""Print values exactly as `nabla run` does (LANGUAGE.md §Output, docs/language.md).

Reals use the shortest round-trip digits (the same digits as Python's repr) but
Rust's `{:?}` layout: positional for 1e-4 <= |x| < 1e16 (docs/language.md says 1e-5, but
the interpreter switches at 1e-4, as Rust does: 0.00009 prints `9e-5`), otherwise an exponent
written without `+` or leading zeros (`1e-7`, `1.2345678901234568e17`).
Sums are represented by the classes Inl/Inr, vectors by Python lists, tuples by
tuples, unit by `()`.
"""
import math
from decimal import Decimal


class Inl:
    def __init__(self, v):
        self.v = v


class Inr:
    def __init__(self, v):
        self.v = v


class Unit:
    pass


UNIT = Unit()


def real(x: float) -> str:
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    d = Decimal(repr(abs(x)))          # shortest round-trip digits
    t = d.as_tuple()
    digits = "".join(map(str, t.digits)).rstrip("0") or "0"
    # value = 0.digits * 10**e10
    e10 = len(t.digits) + t.exponent   # position of the decimal point
    # strip trailing zeros changed nothing about e10
    if 1e-4 <= abs(x) < 1e16:
        if e10 <= 0:
            s = "0." + "0" * (-e10) + digits
        elif e10 >= len(digits):
            s = digits + "0" * (e10 - len(digits)) + ".0"
        else:
            s = digits[:e10] + "." + digits[e10:]
    else:
        exp = e10 - 1
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        s = f"{mant}e{exp}"
    return sign + s


def show(v, nested=False) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return real(v)
    if isinstance(v, Unit):
        return "()"
    if isinstance(v, tuple):
        return "(" + ", ".join(show(a) for a in v) + ")"
    if isinstance(v, list):
        return "[" + ", ".join(show(a) for a in v) + "]"
    if isinstance(v, (Inl, Inr)):
        tag = "inl" if isinstance(v, Inl) else "inr"
        s = f"{tag} {show(v.v, nested=True)}"
        return f"({s})" if nested else s
    if callable(v):
        return "<function>"
    raise TypeError(type(v))


if __name__ == "__main__":
    # self-test against values printed by the existing interpreter
    cases = {1e-5: "1e-5", 0.00009: "9e-5", 1e15: "1000000000000000.0", 0.0001: "0.0001", 0.00001234: "1.234e-5", 1e16: "1e16",
             9999999999999998.0: "9999999999999998.0", 1e-7: "1e-7",
             123456789012345680.0: "1.2345678901234568e17", 2.0 ** 70: "1.1805916207174113e21",
             1.5e300: "1.5e300", 52.0: "52.0", 0.1: "0.1", -0.0: "-0.0"}
    for x, s in cases.items():
        assert real(x) == s, (x, real(x), s)
    assert show((1.0, [2.0, 3.0], Inl(1), Inr(Inl(2.0)), True, UNIT)) == \
        "(1.0, [2.0, 3.0], inl 1, inr (inl 2.0), true, ())"
    print("fmt ok")
