"""HIPS autograd: a dynamic tape over NumPy, the reference for define-by-run reverse
mode. GMM and BA are vectorised NumPy (BA: two reverse sweeps over all observations
at once, one per residual coordinate, give every 2×15 block); LSTM is a Python loop
over time. Nested: plain Python loops, `grad` for reverse and `make_jvp` (autograd's
forward mode) for forward gradients, so all four variants run."""

import autograd.numpy as np
import numpy as onp
from autograd import grad, make_jvp, value_and_grad
from autograd.tracer import getval

import common

NAME = "autograd"


def _logsumexp(v, axis):
    mx = np.max(v, axis=axis, keepdims=True)
    return np.squeeze(mx, axis) + np.log(np.sum(np.exp(v - mx), axis=axis))


def gmm(g):
    d, k, n = g["d"], g["k"], g["n"]
    x = g["x"]
    idx = common.gmm_lower_index(d)
    const = common.gmm_constant(g)
    gamma, m = g["gamma"], g["m"]

    def objective(params):
        alphas, means, icf = params[:k], np.reshape(params[k:k + k * d], (k, d)), np.reshape(params[k + k * d:], (k, -1))
        q, l = icf[:, :d], icf[:, d:]
        lower = np.reshape(np.concatenate([np.zeros((k, 1)), l], axis=1)[:, idx], (k, d, d))
        xc = means[:, None, :] - x[None, :, :]
        y = np.exp(q)[:, None, :] * xc + np.matmul(xc, np.transpose(lower, (0, 2, 1)))
        main = (alphas + np.sum(q, 1))[:, None] - 0.5 * np.sum(y * y, axis=2)
        prior = 0.5 * gamma * gamma * (np.sum(np.exp(2 * q)) + np.sum(l * l)) - m * np.sum(q)
        return np.sum(_logsumexp(main, 0)) - n * _logsumexp(alphas, 0) + prior + const

    params = onp.concatenate([g["alphas"], g["means"].ravel(), g["icf"].ravel()])
    vg = value_and_grad(objective)
    return (lambda: objective(params), lambda: tuple(onp.atleast_1d(v) for v in vg(params)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm(data):
    l, b, c = data["l"], data["b"], data["c"]
    seq, state0 = data["seq"], data["state"]

    def objective(params):
        main = np.reshape(params[:8 * l * b], (l, 2, 4, b))
        extra = np.reshape(params[8 * l * b:], (3, b))
        # Slice the weights once: every slice of a boxed array costs a full-size
        # zero array in autograd's backward pass.
        gates = [[(main[layer, 0, g], main[layer, 1, g]) for g in range(4)] for layer in range(l)]
        in_w, out_w, out_b = extra[0], extra[1], extra[2]
        state = [[state0[layer, 0], state0[layer, 1]] for layer in range(l)]
        total = 0.0
        for t in range(c - 1):
            inp = seq[t] * in_w
            for layer in range(l):
                (wf, bf), (wi, bi), (wo, bo), (wc, bc) = gates[layer]
                h, cell = state[layer]
                forget = _sigmoid(inp * wf + bf)
                ingate = _sigmoid(h * wi + bi)
                outgate = _sigmoid(inp * wo + bo)
                change = np.tanh(h * wc + bc)
                cell = cell * forget + ingate * change
                h = outgate * np.tanh(cell)
                state[layer] = [h, cell]
                inp = h
            y = inp * out_w + out_b
            lse = np.log(np.sum(np.exp(y)) + 2)
            total = total + np.sum(seq[t + 1] * (y - lse))
        return -total / ((c - 1) * b)

    params = onp.concatenate([data["main"].ravel(), data["extra"].ravel()])
    vg = value_and_grad(objective)
    return (lambda: objective(params), lambda: tuple(onp.atleast_1d(v) for v in vg(params)))


def _cross(a, b):
    return np.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                     a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                     a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], axis=1)


def _reprojection(v, features):
    """All observations at once: v is p×15 local inputs; returns p×2."""
    r, centre, f, u0v0, k1, k2 = v[:, 0:3], v[:, 3:6], v[:, 6:7], v[:, 7:9], v[:, 9:10], v[:, 10:11]
    x = v[:, 11:14] - centre
    w = v[:, 14:15]
    theta = np.sqrt(np.sum(r * r, axis=1, keepdims=True))
    axis = r / theta
    cos, sin = np.cos(theta), np.sin(theta)
    cam = x * cos + _cross(axis, x) * sin + axis * np.sum(axis * x, axis=1, keepdims=True) * (1 - cos)
    p = cam[:, :2] / cam[:, 2:3]
    rsq = np.sum(p * p, axis=1, keepdims=True)
    return w * (p * (1 + k1 * rsq + k2 * rsq * rsq) * f + u0v0 - features)


def ba(data):
    local = common.ba_locals(data)
    assert onp.all(onp.sum(data["cams"][:, :3] ** 2, 1) > 0), "θ = 0 cameras not supported"
    features, weights = data["features"], data["weights"]

    def deriv():
        # Each residual depends only on its own row of `local`, so the gradient of
        # the sum of one residual coordinate over all observations is that
        # coordinate's row of every block.
        res = _reprojection(local, features)
        rows = [grad(lambda v, j=j: np.sum(_reprojection(v, features)[:, j]))(local) for j in range(2)]
        blocks = onp.stack(rows, axis=1)  # p×2×15
        return (onp.concatenate([res.reshape(-1), 1 - weights * weights]),
                onp.concatenate([blocks.reshape(-1), -2 * weights]))

    return (lambda: _reprojection(local, features), deriv)


def _norm(v):
    v = getval(v)
    return float(onp.sqrt(onp.sum(v * v)))


def argmin(f, gradf, x0):
    c = common.nested_constants()
    x, fx, gx, eta, i = x0, f(x0), gradf(x0), c["eta0"], 0
    while True:
        if _norm(gx) <= c["tol"]:
            return x
        if i == c["grow_after"]:
            eta, i = eta * 2, 0
            continue
        x_new = x - eta * gx
        if _norm(x - x_new) <= c["tol"]:
            return x
        f_new = f(x_new)
        if getval(f_new) < getval(fx):
            x, fx, gx, i = x_new, f_new, gradf(x_new), i + 1
        else:
            eta, i = eta / 2, 0


def _forward_grad(f):
    def gradient(x):
        n = len(getval(x))
        eye = onp.eye(n)
        return np.stack([make_jvp(f)(x)(eye[i])[1] for i in range(n)])
    return gradient


MODES = {"F": _forward_grad, "R": grad}


def saddle(outer, inner):
    start = onp.ones(2)

    def f(a, b):
        return np.sum(a * a) - np.sum(b * b)

    def inner_max(a):
        g = lambda b: -f(a, b)  # noqa: E731
        return argmin(g, MODES[inner](g), start)

    def outer_fn(a):
        return f(a, inner_max(a))

    def run():
        a = argmin(outer_fn, MODES[outer](outer_fn), start)
        return onp.concatenate([a, inner_max(a)])

    return run


def particle(outer, inner):
    dt = common.nested_constants()["dt"]

    def naive_euler(w):
        def p(x):
            d1 = x - np.stack([10.0, 10.0 - w])
            d2 = x - onp.array([10.0, 0.0])
            return 1 / np.sqrt(np.sum(d1 * d1)) + 1 / np.sqrt(np.sum(d2 * d2))

        accel = MODES[inner](p)
        x, v = onp.array([0.0, 8.0]), onp.array([0.75, 0.0])
        while True:
            a = -accel(x)
            x_new = x + v * dt
            if getval(x_new)[1] > 0:
                x, v = x_new, v + a * dt
            else:
                hit = x[0] + v[0] * (-(x[1] / v[1]))
                return hit * hit

    miss = lambda w: naive_euler(w[0])  # noqa: E731
    return lambda: argmin(miss, MODES[outer](miss), onp.zeros(1))


def prepare(workload):
    family = common.family_of(workload)
    if family in ("saddle", "particle"):
        variant = workload.split("_")[1]
        run = (saddle if family == "saddle" else particle)(variant[0], variant[1])
        return None, lambda: (onp.asarray(run()), onp.zeros(0))
    name = common.ADBENCH[workload][1]
    if family == "gmm":
        return gmm(common.parse_gmm(name))
    if family == "lstm":
        return lstm(common.parse_lstm(name))
    return ba(common.parse_ba(name))
