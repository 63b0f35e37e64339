"""Run the hand-differentiated versions of the examples (tests/ad-oracle/hand/)
with the existing interpreter, which has no AD operators yet, and compare their
output with the expected examples/*.out: `identical`, or `close` with
the largest relative difference of any number. Also checks that the
interpreter's libm values equal Python's `math` at every point where the
expected values use them.

    python3 tests/ad-oracle/check_hand.py [path/to/nabla]
"""
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NABLA = sys.argv[1] if len(sys.argv) > 1 else str(HERE.parents[1] / "target" / "release" / "nabla")
NUM = re.compile(r"-?(?:inf|nan|\d+(?:\.\d+)?(?:e-?\d+)?)")


LIBM = [("cos 0.5", "math.cos(0.5)"), ("sin 0.5", "math.sin(0.5)"), ("exp 1.0", "math.exp(1.0)"),
        ("log 2.0", "math.log(2.0)"), ("2.0 * cos 0.5", "2.0 * math.cos(0.5)"),
        ("8.0 * log 2.0", "8.0 * math.log(2.0)"), ("tan 1.0", "math.tan(1.0)"), ("cos 1.0", "math.cos(1.0)"),
        ("tanh 0.5", "math.tanh(0.5)")]


def check_libm():
    import math  # noqa: F401
    from fmt import real
    for expr, py in LIBM:
        got = subprocess.run([NABLA, "eval", expr], capture_output=True, text=True, check=True).stdout.strip()
        want = real(eval(py))
        if got != want:
            print(f"LIBM DIFFERS {expr}: nabla {got}, Python {want}")
            return False
    print(f"libm: nabla = Python math for {len(LIBM)} values")
    return True


def main():
    sys.path.insert(0, str(HERE))
    if not check_libm():
        return 1
    worst = 0.0
    for p in sorted((HERE / "hand").glob("*.nabla")):
        got = subprocess.run([NABLA, "run", str(p)], capture_output=True, text=True, check=True).stdout
        want = (HERE.parents[1] / "examples" / f"{p.stem}.out").read_text()
        if got == want:
            print(f"identical  {p.stem}: {got.strip()}")
            continue
        a, b = NUM.findall(got), NUM.findall(want)
        if len(a) != len(b) or NUM.sub("#", got) != NUM.sub("#", want):
            print(f"DIFFERENT  {p.stem}: {got.strip()} vs {want.strip()}")
            return 1
        rel = max(abs(float(x) - float(y)) / max(abs(float(y)), 1e-300) for x, y in zip(a, b))
        worst = max(worst, rel)
        print(f"close      {p.stem}: max relative difference {rel:.1e}\n           hand: {got.strip()}\n"
              f"           .out: {want.strip()}")
    return 0 if worst <= 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
