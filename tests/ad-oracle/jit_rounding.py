"""How often does the Rosenbrock gradient differ in its last bits between the
Delta-tape emulation (tape.py), op-by-op JAX, jax.jit (XLA's compiled code) and
the correctly rounded gradient? At 300 random points. Explains why
examples.py uses op-by-op JAX as a route and not jax.jit (see NOTES.md).

    tests/ad-oracle/.venv/bin/python tests/ad-oracle/jit_rounding.py
"""
import random
import sys
from fractions import Fraction as Fr
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).parent))
import tape  # noqa: E402


def rb(x, y):
    return (1.0 - x) * (1.0 - x) + 100.0 * (y - x * x) * (y - x * x)


jg = jax.jit(jax.grad(lambda p: rb(p[0], p[1])))
ng = jax.grad(lambda p: rb(p[0], p[1]))
rnd = random.Random(1)
n = [0, 0, 0]
for _ in range(300):
    x, y = rnd.uniform(-1.5, 1.5), rnd.uniform(-1, 2)
    t = tuple(tape.grad(rb, [x, y])[1])
    X, Y = Fr(x), Fr(y)
    exact = (float(-2 * (1 - X) - 400 * X * (Y - X * X)), float(200 * (Y - X * X)))
    n[0] += t != tuple(map(float, jg((x, y))))
    n[1] += t != tuple(map(float, ng((x, y))))
    n[2] += t != exact
print(f"of 300 points, the tape's gradient differs from jax.jit at {n[0]}, from op-by-op JAX at {n[1]},"
      f" from the correctly rounded gradient at {n[2]}")
