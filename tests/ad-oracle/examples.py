"""Expected outputs of examples/*.nabla, computed independently of nabla.

    tests/ad-oracle/.venv/bin/python tests/ad-oracle/examples.py          # check the .out files
    tests/ad-oracle/.venv/bin/python tests/ad-oracle/examples.py --write  # (re)write them
    ... --quick   skips the slow (3 min) op-by-op JAX route for rosenbrock

Each example is computed by at least two routes (a hand derivation in exact
rational arithmetic or closed form, JAX in float64, and for the order-sensitive
ones the tape/dual emulations of tape.py); the script stops if the routes that
must agree bit for bit do not. See tests/ad-oracle/NOTES.md for the derivations.
"""
import sys
from fractions import Fraction as Fr
from pathlib import Path

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tape  # noqa: E402
from fmt import Inl, Inr, show  # noqa: E402

EX = HERE.parents[1] / "examples"
OUT = {}
REPORT = []


def agree(name, *routes):
    """routes: (label, value); all must be equal; returns the common value."""
    first = routes[0][1]
    for label, v in routes[1:]:
        if v != first:
            raise SystemExit(f"{name}: {routes[0][0]} = {first!r} but {label} = {v!r}")
    REPORT.append(f"{name}: {' = '.join(label for label, _ in routes)}")
    return first


# ----------------------------------------------------------- saddle point
def saddle():
    A, B = 1.0, 2.0

    def payoff(x, y):
        return (x - A) * (x - A) + (x - A) * (y - B) - (y - B) * (y - B)

    # route 1: JAX, the program transcribed (grad inside grad, closure over x)
    def best_response(x):
        y = 0.0
        for _ in range(8):
            y = y + 0.5 * jax.grad(lambda y_: payoff(x, y_))(y)
        return y

    def game_value(x):
        return payoff(x, best_response(x))

    x = 0.0
    for _ in range(12):
        x = x - 0.25 * jax.grad(game_value)(x)
    j = (float(x), float(best_response(x)))

    # route 2: exact rationals, derivatives by hand. Inner ascent:
    # y' = y + 1/2 ((x-1) - 2(y-2)), dy'/dx = dy/dx + 1/2 (1 - 2 dy/dx);
    # d/dx game_value = ∂x payoff + ∂y payoff · dy/dx at the best response.
    def br(x):
        y, dy = Fr(0), Fr(0)
        for _ in range(8):
            g, dg = (x - 1) - 2 * (y - 2), 1 - 2 * dy
            y, dy = y + Fr(1, 2) * g, dy + Fr(1, 2) * dg
        return y, dy

    xq = Fr(0)
    for _ in range(12):
        y, dy = br(xq)
        d = 2 * (xq - 1) + (y - 2) + ((xq - 1) - 2 * (y - 2)) * dy
        xq = xq - Fr(1, 4) * d
    exact = (xq, br(xq)[0])
    assert exact[0] == 1 - Fr(3, 8) ** 12 and exact[1] == 2 + (exact[0] - 1) / 2
    # the exact values are representable, hence order-independent
    assert all(Fr(float(v)) == v for v in exact)
    return agree("saddle_point", ("exact rationals", tuple(map(float, exact))), ("JAX nested grad", j))


OUT["saddle_point"] = saddle


# -------------------------------------------------------- hessian-vector
def hvp():
    def f(p):
        x, y = p
        return 2.0 * x * x + 3.0 * x * y + 4.0 * y * y

    p, v = (3.0, 4.0), (7.0, 8.0)
    t = lambda a: tuple(float(c) for c in a)
    routes = [
        ("hand H·v", (4.0 * 7 + 3.0 * 8, 3.0 * 7 + 8.0 * 8)),
        ("JAX jvp∘grad", t(jax.jvp(jax.grad(f), (p,), (v,))[1])),
        ("JAX grad(∇f·v)", t(jax.grad(lambda q: (lambda g: g[0] * v[0] + g[1] * v[1])(jax.grad(f)(q)))(p))),
        ("JAX vjp∘grad", t(jax.vjp(jax.grad(f), p)[1](v)[0])),
        ("JAX grad∘jvp", t(jax.grad(lambda q: jax.jvp(f, (q,), (v,))[1])(p))),
    ]
    r = agree("hessian_vector", *routes)
    return (r, r, r, r)


OUT["hessian_vector"] = hvp


# -------------------------------------------------------------- quaternion
def quaternion():
    def q_to_vec(q):
        return (q[0], q[1], q[2])

    def dot(p, q):
        return p[0] * q[0] + p[1] * q[1] + p[2] * q[2]

    def vadd(p, q):
        return (p[0] + q[0], p[1] + q[1], p[2] + q[2])

    def scale(k, v):
        return (k * v[0], k * v[1], k * v[2])

    def cross(a, b):
        return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])

    def rotate(v, q):
        u, s = q_to_vec(q), q[3]
        return vadd(vadd(scale(2.0 * dot(u, v), u), scale(s * s - dot(u, u), v)), scale(2.0 * s, cross(u, v)))

    def e7(qx, qy, qz, qw, vx, vy, vz):
        return rotate((vx, vy, vz), (qx, qy, qz, qw))[0]

    x0 = [1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7]
    val_t, g_t = tape.grad(e7, x0)
    val_d, g_d = tape.fwd_grad(e7, x0)
    jr = jax.grad(lambda a: e7(*a))(tuple(x0))
    jf = jax.jacfwd(lambda a: e7(*[a[i] for i in range(7)]))(jnp.array(x0))
    r = agree("quaternion",
              ("Delta-tape emulation", (val_t, tuple(g_t))),
              ("dual-number emulation", (val_d, tuple(g_d))),
              ("JAX grad", (float(e7(*x0)), tuple(float(c) for c in jr))),
              ("JAX jacfwd", (float(e7(*x0)), tuple(float(c) for c in jf))))
    # the tape's backward pass again, with the operands of every binding taken
    # in a random order (200 orders): the sums of cotangents still round alike
    import random
    for trial in range(200):
        rnd = random.Random(trial)
        t = tape.Tape()
        vs = [t.var(x) for x in x0]
        y = e7(*vs)
        ct = [0.0] * len(t.bindings)
        ct[y.i] = 1.0
        for i in range(len(t.bindings) - 1, -1, -1):
            parts = list(t.bindings[i])
            rnd.shuffle(parts)
            for c, p in parts:
                ct[p] = ct[p] + c * ct[i]
        assert tuple(ct[v.i] for v in vs) == r[1], trial
    REPORT.append("quaternion: the same gradient with each binding's operands in 200 random orders")
    val, g = r
    return (val, (tuple(g[:4]), tuple(g[4:])))


OUT["quaternion"] = quaternion


# --------------------------------------------------- perturbation confusion
def confusion():
    g, d = jax.grad, (lambda f: lambda x: jax.jvp(f, (x,), (1.0,))[1])
    vals = (
        g(lambda x: x * g(lambda y: x + y)(1.0))(1.0),
        d(lambda x: x * d(lambda y: x + y)(1.0))(1.0),
        g(lambda x: x * d(lambda y: x + y)(1.0))(1.0),
        d(lambda x: x * g(lambda y: x + y)(1.0))(1.0),
        jax.jvp(lambda x: x * jax.vjp(lambda y: x + y, 1.0)[1](1.0)[0], (1.0,), (1.0,))[1],
        jax.vjp(lambda x: x * jax.jvp(lambda y: x + y, (1.0,), (1.0,))[1], 1.0)[1](1.0)[0],
        g(lambda x: x * d(lambda y: y * g(lambda z: x + y + z)(1.0))(1.0))(1.0),
    )
    return agree("perturbation_confusion", ("hand (all 1)", (1.0,) * 7), ("JAX", tuple(float(v) for v in vals)))


OUT["perturbation_confusion"] = confusion


# --------------------------------------------------------- recursive power
def power():
    def pw(x, n):
        return 1.0 if n == 0 else x * pw(x, n - 1)

    def fpw(x, n):
        if n == 0:
            return 1.0
        h = fpw(x, n // 2)
        return h * h if n % 2 == 0 else x * h * h

    dd = lambda f: lambda x: jax.jvp(f, (x,), (1.0,))[1]
    x = Fr(3, 2)
    hand = (float(7 * x ** 6), float(7 * x ** 6), float(7 * x ** 6), float(42 * x ** 5),
            float(13 * x ** 12), float(13 * x ** 12))
    assert all(Fr(v) == e for v, e in zip(hand, [7 * x ** 6] * 3 + [42 * x ** 5] + [13 * x ** 12] * 2))
    j = (jax.grad(lambda x: pw(x, 7))(1.5), dd(lambda x: pw(x, 7))(1.5), 7.0 * pw(1.5, 6),
         dd(jax.grad(lambda x: pw(x, 7)))(1.5), jax.grad(lambda x: fpw(x, 13))(1.5), 13.0 * fpw(1.5, 12))
    return agree("recursive_power", ("exact n·x^(n-1)", hand), ("JAX", tuple(float(v) for v in j)))


OUT["recursive_power"] = power


# ---------------------------------------------------------- piecewise sum
def piecewise():
    fp = lambda x: 3 * x * x if x < 1 else 2 * x + 1
    hand = ([fp(x) for x in [0.5, 1.0, 2.0]], [fp(x) for x in [0.5, 1.0, 2.0]],
            Inl(3 * 0.5 * 0.5), Inr((1.0, 1.0)), (Inr((2.0, 4.0)), Inr((1.0, 4.0))))

    def f(x):  # JAX takes the branch by Python control flow, as the interpreter does
        return x * x * x if x < 1.0 else x * x + x - 1.0

    gs = [float(jax.grad(f)(x)) for x in [0.5, 1.0, 2.0]]
    ds = [float(jax.jvp(f, (x,), (1.0,))[1]) for x in [0.5, 1.0, 2.0]]
    agree("piecewise_sum (grad f)", ("hand f'", hand[0]), ("JAX grad", gs), ("JAX jvp", ds))
    return hand


OUT["piecewise_sum"] = piecewise


# -------------------------------------------------------------- rosenbrock
def rosenbrock():
    def rb(x, y):
        return (1.0 - x) * (1.0 - x) + 100.0 * (y - x * x) * (y - x * x)

    def run(gradfn):
        x, y = -1.2, 1.0
        for _ in range(20000):
            gx, gy = gradfn(x, y)
            x, y = x - 0.001 * gx, y - 0.001 * gy
        return (x, y)

    # Not jax.jit: XLA's compiled CPU code rounds differently (its gradient
    # differed from the tape's in the last bit at 79 of 300 random points, where
    # op-by-op JAX differed at none): op-by-op JAX rounds every operation as
    # written, as an interpreter does. This route takes about 3 minutes;
    # --quick skips it.
    jg = jax.grad(lambda p: rb(p[0], p[1]))
    routes = [("Delta-tape emulation", run(lambda x, y: tape.grad(rb, [x, y])[1])),
              ("dual-number emulation", run(lambda x, y: tape.fwd_grad(rb, [x, y])[1]))]
    if "--quick" not in sys.argv:
        routes.append(("JAX grad", run(lambda x, y: tuple(float(c) for c in jg((x, y))))))
    r = agree("rosenbrock", *routes)

    def exact_grad(x, y):  # correctly rounded gradient: a different rounding, for NOTES
        X, Y = Fr(x), Fr(y)
        return float(-2 * (1 - X) - 400 * X * (Y - X * X)), float(200 * (Y - X * X))

    alt = run(exact_grad)
    REPORT.append(f"rosenbrock with a correctly rounded gradient at every step: {alt!r}"
                  f" (relative difference {max(abs(a - b) / abs(b) for a, b in zip(alt, r)):.1e})")
    return r


OUT["rosenbrock"] = rosenbrock


def main():
    write = "--write" in sys.argv
    bad = 0
    for name, fn in OUT.items():
        text = show(fn()) + "\n"
        path = EX / f"{name}.out"
        if write:
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            print(f"MISMATCH {path}: expected {text!r}")
            bad += 1
    for line in REPORT:
        print(line)
    print(f"{len(OUT)} examples, {'written' if write else ('all match' if not bad else f'{bad} differ')}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
