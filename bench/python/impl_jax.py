"""JAX on CPU, float64, every timed function under `jax.jit`.

GMM and LSTM: `jax.value_and_grad`; BA: `vmap(jacrev)` of one observation's
residuals (the 2×15 blocks), assembled in CSR order. Nested: the optimiser and the
simulation are `lax.while_loop`s, as they must be under `jit`; forward mode goes
through a `while_loop`, reverse mode cannot, so RF and RR are reported "cannot"."""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import common  # noqa: E402

NAME = "jax"
CANNOT_REVERSE_WHILE = "cannot: JAX cannot reverse-differentiate through lax.while_loop (needed under jit for the data-dependent loop)"


def _logsumexp(v, axis):
    mx = jnp.max(v, axis=axis, keepdims=True)
    return jnp.squeeze(mx, axis) + jnp.log(jnp.sum(jnp.exp(v - mx), axis=axis))


def gmm(g):
    d, k, n = g["d"], g["k"], g["n"]
    x = jnp.asarray(g["x"])
    idx = jnp.asarray(common.gmm_lower_index(d))
    const = common.gmm_constant(g)
    gamma, m = g["gamma"], g["m"]

    def objective(params):
        alphas, means, icf = params[:k], params[k:k + k * d].reshape(k, d), params[k + k * d:].reshape(k, -1)
        q, l = icf[:, :d], icf[:, d:]
        lower = jnp.concatenate([jnp.zeros((k, 1)), l], axis=1)[:, idx].reshape(k, d, d)
        xc = means[:, None, :] - x[None, :, :]  # K×n×d; the sign does not matter under the norm
        y = jnp.exp(q)[:, None, :] * xc + jnp.matmul(xc, jnp.swapaxes(lower, 1, 2))
        main = (alphas + q.sum(1))[:, None] - 0.5 * jnp.sum(y * y, axis=2)
        prior = 0.5 * gamma * gamma * (jnp.sum(jnp.exp(2 * q)) + jnp.sum(l * l)) - m * jnp.sum(q)
        return jnp.sum(_logsumexp(main, 0)) - n * _logsumexp(alphas, 0) + prior + const

    params = jnp.asarray(np.concatenate([g["alphas"], g["means"].ravel(), g["icf"].ravel()]))
    primal = jax.jit(objective)
    deriv = jax.jit(jax.value_and_grad(objective))
    return (lambda: primal(params).block_until_ready(),
            lambda: tuple(np.atleast_1d(np.asarray(v)) for v in deriv(params)))


def _sigmoid(x):
    return 1 / (1 + jnp.exp(-x))


def lstm(data):
    l, b = data["l"], data["b"]
    seq = jnp.asarray(data["seq"])
    state0 = jnp.asarray(data["state"])
    count = (data["c"] - 1) * b

    def objective(params):
        main = params[:8 * l * b].reshape(l, 2, 4, b)
        extra = params[8 * l * b:].reshape(3, b)

        def step(state, xs):
            x, nxt = xs
            inp = x * extra[0]
            new = []
            for layer in range(l):
                w, bias = main[layer, 0], main[layer, 1]
                h, c = state[layer, 0], state[layer, 1]
                forget = _sigmoid(inp * w[0] + bias[0])
                ingate = _sigmoid(h * w[1] + bias[1])
                outgate = _sigmoid(inp * w[2] + bias[2])
                change = jnp.tanh(h * w[3] + bias[3])
                c = c * forget + ingate * change
                h = outgate * jnp.tanh(c)
                new.append(jnp.stack([h, c]))
                inp = h
            y = inp * extra[1] + extra[2]
            lse = jnp.log(jnp.sum(jnp.exp(y)) + 2)
            return jnp.stack(new), jnp.sum(nxt * (y - lse))

        _, terms = lax.scan(step, state0, (seq[:-1], seq[1:]))
        return -jnp.sum(terms) / count

    params = jnp.asarray(np.concatenate([data["main"].ravel(), data["extra"].ravel()]))
    primal = jax.jit(objective)
    deriv = jax.jit(jax.value_and_grad(objective))
    return (lambda: primal(params).block_until_ready(),
            lambda: tuple(np.atleast_1d(np.asarray(v)) for v in deriv(params)))


def _reprojection(v, feature):
    r, centre, f, u0v0, k1, k2 = v[0:3], v[3:6], v[6], v[7:9], v[9], v[10]
    x = v[11:14] - centre
    w = v[14]
    theta = jnp.sqrt(jnp.sum(r * r))  # the inputs have θ ≠ 0 (checked by the parser)
    axis = r / theta
    cam = x * jnp.cos(theta) + jnp.cross(axis, x) * jnp.sin(theta) + axis * jnp.dot(axis, x) * (1 - jnp.cos(theta))
    p = cam[:2] / cam[2]
    rsq = jnp.sum(p * p)
    return w * (p * (1 + k1 * rsq + k2 * rsq * rsq) * f + u0v0 - feature)


def ba(data):
    local = jnp.asarray(common.ba_locals(data))
    assert np.all(np.sum(data["cams"][:, :3] ** 2, 1) > 0), "θ = 0 cameras not supported"
    features = jnp.asarray(data["features"])
    weights = jnp.asarray(data["weights"])

    @jax.jit
    def primal(local):
        return jax.vmap(_reprojection)(local, features)

    @jax.jit
    def deriv(local):
        res = jax.vmap(_reprojection)(local, features)
        blocks = jax.vmap(jax.jacrev(_reprojection))(local, features)  # p×2×15
        values = jnp.concatenate([res.reshape(-1), 1 - weights * weights])
        return values, jnp.concatenate([blocks.reshape(-1), -2 * weights])

    return (lambda: primal(local).block_until_ready(),
            lambda: tuple(np.asarray(v) for v in deriv(local)))


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v))


def _argmin(f, gradf, x0):
    """The optimiser of BENCHMARKS.md as a lax.while_loop state machine."""
    c = common.nested_constants()
    true, false = jnp.asarray(True), jnp.asarray(False)

    def body(s):
        x, fx, gx, eta, i, _ = s

        def step(_):
            x_new = x - eta * gx

            def attempt(_):
                f_new = f(x_new)
                return lax.cond(f_new < fx,
                                lambda _: (x_new, f_new, gradf(x_new), eta, i + 1, false),
                                lambda _: (x, fx, gx, eta / 2, jnp.int32(0), false), None)

            return lax.cond(_norm(x - x_new) <= c["tol"], lambda _: (x, fx, gx, eta, i, true), attempt, None)

        def not_done(_):
            return lax.cond(i == c["grow_after"], lambda _: (x, fx, gx, eta * 2, jnp.int32(0), false), step, None)

        return lax.cond(_norm(gx) <= c["tol"], lambda _: (x, fx, gx, eta, i, true), not_done, None)

    s0 = (x0, f(x0), gradf(x0), jnp.asarray(c["eta0"]), jnp.int32(0), false)
    return lax.while_loop(lambda s: jnp.logical_not(s[5]), body, s0)[0]


def _forward_grad(f):
    def gradient(x):
        eye = jnp.eye(x.shape[0], dtype=x.dtype)
        return jnp.stack([jax.jvp(f, (x,), (eye[i],))[1] for i in range(x.shape[0])])
    return gradient


MODES = {"F": _forward_grad, "R": jax.grad}


def saddle(outer, inner):
    start = jnp.ones(2)

    def f(a, b):
        return jnp.sum(a * a) - jnp.sum(b * b)

    def inner_max(a):
        g = lambda b: -f(a, b)  # noqa: E731
        return _argmin(g, MODES[inner](g), start)

    def outer_fn(a):
        return f(a, inner_max(a))

    @jax.jit
    def run():
        a = _argmin(outer_fn, MODES[outer](outer_fn), start)
        return jnp.concatenate([a, inner_max(a)])

    return run


def particle(outer, inner):
    dt = common.nested_constants()["dt"]

    def naive_euler(w):
        def p(x):
            c1 = jnp.stack([jnp.asarray(10.0), 10.0 - w])
            c2 = jnp.asarray([10.0, 0.0])
            return 1 / _norm(x - c1) + 1 / _norm(x - c2)

        accel = MODES[inner](p)
        x, v = lax.while_loop(lambda s: (s[0] + s[1] * dt)[1] > 0,
                              lambda s: (s[0] + s[1] * dt, s[1] - accel(s[0]) * dt),
                              (jnp.asarray([0.0, 8.0]), jnp.asarray([0.75, 0.0])))
        hit = x[0] + v[0] * (-(x[1] / v[1]))
        return hit * hit

    miss = lambda w: naive_euler(w[0])  # noqa: E731

    @jax.jit
    def run():
        return _argmin(miss, MODES[outer](miss), jnp.zeros(1))

    return run


def prepare(workload):
    family = common.family_of(workload)
    if family in ("saddle", "particle"):
        variant = workload.split("_")[1]
        if variant[0] == "R":
            raise common.Cannot(CANNOT_REVERSE_WHILE)
        run = (saddle if family == "saddle" else particle)(variant[0], variant[1])
        return None, lambda: (np.asarray(run()), np.zeros(0))
    name = common.ADBENCH[workload][1]
    if family == "gmm":
        return gmm(common.parse_gmm(name))
    if family == "lstm":
        return lstm(common.parse_lstm(name))
    return ba(common.parse_ba(name))
