"""PyTorch on CPU, float64, one thread, eager mode. GMM and BA are vectorised
(BA: two reverse sweeps over all observations at once give every 2×15 block); LSTM
is a Python loop over time. Nested: plain Python loops under `torch.func`, `grad`
for reverse and `jvp` for forward gradients, so all four variants run."""

import numpy as onp
import torch
from torch.func import grad, jvp

import common

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)

NAME = "torch"


def _t(a):
    return torch.as_tensor(onp.asarray(a), dtype=torch.float64)


def _logsumexp(v, dim):
    mx = torch.max(v, dim=dim, keepdim=True).values
    return mx.squeeze(dim) + torch.log(torch.sum(torch.exp(v - mx), dim=dim))


def _value_and_grad(objective, params):
    def run():
        p = params.detach().requires_grad_(True)
        value = objective(p)
        (g,) = torch.autograd.grad(value, p)
        return onp.atleast_1d(value.detach().numpy()), g.numpy()
    return run


def gmm(g):
    d, k, n = g["d"], g["k"], g["n"]
    x = _t(g["x"])
    idx = torch.as_tensor(common.gmm_lower_index(d))
    const = common.gmm_constant(g)
    gamma, m = g["gamma"], g["m"]

    def objective(params):
        alphas, means, icf = params[:k], params[k:k + k * d].reshape(k, d), params[k + k * d:].reshape(k, -1)
        q, l = icf[:, :d], icf[:, d:]
        lower = torch.cat([torch.zeros(k, 1), l], dim=1)[:, idx].reshape(k, d, d)
        xc = means[:, None, :] - x[None, :, :]
        y = torch.exp(q)[:, None, :] * xc + torch.matmul(xc, lower.transpose(1, 2))
        main = (alphas + q.sum(1))[:, None] - 0.5 * torch.sum(y * y, dim=2)
        prior = 0.5 * gamma * gamma * (torch.sum(torch.exp(2 * q)) + torch.sum(l * l)) - m * torch.sum(q)
        return torch.sum(_logsumexp(main, 0)) - n * _logsumexp(alphas, 0) + prior + const

    params = _t(onp.concatenate([g["alphas"], g["means"].ravel(), g["icf"].ravel()]))

    def primal():
        with torch.no_grad():
            return objective(params)

    return primal, _value_and_grad(objective, params)


def lstm(data):
    l, b, c = data["l"], data["b"], data["c"]
    seq, state0 = _t(data["seq"]), _t(data["state"])

    def objective(params):
        main = params[:8 * l * b].reshape(l, 2, 4, b)
        in_w, out_w, out_b = params[8 * l * b:].reshape(3, b)
        state = [[state0[layer, 0], state0[layer, 1]] for layer in range(l)]
        total = 0.0
        for t in range(c - 1):
            inp = seq[t] * in_w
            for layer in range(l):
                w, bias = main[layer, 0], main[layer, 1]
                h, cell = state[layer]
                forget = torch.sigmoid(inp * w[0] + bias[0])
                ingate = torch.sigmoid(h * w[1] + bias[1])
                outgate = torch.sigmoid(inp * w[2] + bias[2])
                change = torch.tanh(h * w[3] + bias[3])
                cell = cell * forget + ingate * change
                h = outgate * torch.tanh(cell)
                state[layer] = [h, cell]
                inp = h
            y = inp * out_w + out_b
            lse = torch.log(torch.sum(torch.exp(y)) + 2)
            total = total + torch.sum(seq[t + 1] * (y - lse))
        return -total / ((c - 1) * b)

    params = _t(onp.concatenate([data["main"].ravel(), data["extra"].ravel()]))

    def primal():
        with torch.no_grad():
            return objective(params)

    return primal, _value_and_grad(objective, params)


def _reprojection(v, features):
    """All observations at once: v is p×15 local inputs; returns p×2."""
    r, centre, f, u0v0, k1, k2 = v[:, 0:3], v[:, 3:6], v[:, 6:7], v[:, 7:9], v[:, 9:10], v[:, 10:11]
    x = v[:, 11:14] - centre
    w = v[:, 14:15]
    theta = torch.sqrt(torch.sum(r * r, dim=1, keepdim=True))
    axis = r / theta
    cos, sin = torch.cos(theta), torch.sin(theta)
    cam = x * cos + torch.linalg.cross(axis, x) * sin + axis * torch.sum(axis * x, dim=1, keepdim=True) * (1 - cos)
    p = cam[:, :2] / cam[:, 2:3]
    rsq = torch.sum(p * p, dim=1, keepdim=True)
    return w * (p * (1 + k1 * rsq + k2 * rsq * rsq) * f + u0v0 - features)


def ba(data):
    local = _t(common.ba_locals(data))
    assert onp.all(onp.sum(data["cams"][:, :3] ** 2, 1) > 0), "θ = 0 cameras not supported"
    features, weights = _t(data["features"]), _t(data["weights"])

    def primal():
        with torch.no_grad():
            return _reprojection(local, features)

    def deriv():
        # Each residual depends only on its own row of `local`: one reverse sweep per
        # residual coordinate gives that row of every 2×15 block.
        v = local.detach().requires_grad_(True)
        res = _reprojection(v, features)
        rows = [torch.autograd.grad(res[:, j].sum(), v, retain_graph=(j == 0))[0] for j in range(2)]
        blocks = torch.stack(rows, dim=1)
        return (torch.cat([res.detach().reshape(-1), 1 - weights * weights]).numpy(),
                torch.cat([blocks.reshape(-1), -2 * weights]).numpy())

    return primal, deriv


def _norm(v):
    return float(torch.sqrt(torch.sum(v * v)))


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
        if bool(f_new < fx):
            x, fx, gx, i = x_new, f_new, gradf(x_new), i + 1
        else:
            eta, i = eta / 2, 0


def _forward_grad(f):
    def gradient(x):
        eye = torch.eye(x.shape[0])
        return torch.stack([jvp(f, (x,), (eye[i],))[1] for i in range(x.shape[0])])
    return gradient


MODES = {"F": _forward_grad, "R": grad}


def saddle(outer, inner):
    start = torch.ones(2)

    def f(a, b):
        return torch.sum(a * a) - torch.sum(b * b)

    def inner_max(a):
        g = lambda b: -f(a, b)  # noqa: E731
        return argmin(g, MODES[inner](g), start)

    def outer_fn(a):
        return f(a, inner_max(a))

    def run():
        a = argmin(outer_fn, MODES[outer](outer_fn), start)
        return torch.cat([a, inner_max(a)]).numpy()

    return run


def particle(outer, inner):
    dt = common.nested_constants()["dt"]

    def naive_euler(w):
        def p(x):
            d1 = x - torch.stack([torch.tensor(10.0), 10.0 - w])
            d2 = x - torch.tensor([10.0, 0.0])
            return 1 / torch.sqrt(torch.sum(d1 * d1)) + 1 / torch.sqrt(torch.sum(d2 * d2))

        accel = MODES[inner](p)
        x, v = torch.tensor([0.0, 8.0]), torch.tensor([0.75, 0.0])
        while True:
            a = -accel(x)
            x_new = x + v * dt
            if bool(x_new[1] > 0):
                x, v = x_new, v + a * dt
            else:
                hit = x[0] + v[0] * (-(x[1] / v[1]))
                return hit * hit

    miss = lambda w: naive_euler(w[0])  # noqa: E731
    return lambda: argmin(miss, MODES[outer](miss), torch.zeros(1)).numpy()


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
