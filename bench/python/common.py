"""What every Python implementation shares: input parsers (the ADBench formats of
shared/BENCHMARKS.md), the references written by `nabla-bench check`, the
agreement test, the timing method, and JSON-lines output for bench/run."""

import json
import math
import os
import sys
import time

import numpy as np

TOLERANCE = 1e-8


def data_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("NABLA_BENCH_DATA", os.path.join(here, "..", "..", "..", "shared", "bench-data", "adbench"))


# Workloads: id -> (family, file). Mirrors crates/nabla-bench/src/registry.rs.
ADBENCH = {
    "gmm_test": ("gmm", "gmm_test.txt"),
    "gmm_d2_K5": ("gmm", "gmm1k_d2_K5.txt"),
    "gmm_d10_K25": ("gmm", "gmm1k_d10_K25.txt"),
    "gmm_d20_K50": ("gmm", "gmm1k_d20_K50.txt"),
    "gmm_d64_K100": ("gmm", "gmm1k_d64_K100.txt"),
    "ba_test": ("ba", "ba_test.txt"),
    "ba1": ("ba", "ba1_n49_m7776_p31843.txt"),
    "ba8": ("ba", "ba8_n88_m64298_p383937.txt"),
    "lstm_l2_c1024": ("lstm", "lstm_l2_c1024.txt"),
    "lstm_l4_c4096": ("lstm", "lstm_l4_c4096.txt"),
}
NESTED = [f"{family}_{v}" for family in ("saddle", "particle") for v in ("FF", "FR", "RF", "RR")]


def family_of(workload):
    if workload in ADBENCH:
        return ADBENCH[workload][0]
    return workload.split("_")[0]


def _numbers(name):
    with open(os.path.join(data_dir(), name)) as f:
        return f.read().split()


def parse_gmm(name):
    t = _numbers(name)
    d, k, n = int(t[0]), int(t[1]), int(t[2])
    pos = 3
    def take(count):
        nonlocal pos
        out = np.array([float(v) for v in t[pos:pos + count]])
        pos += count
        return out
    icf_len = d + d * (d - 1) // 2
    alphas = take(k)
    means = take(k * d).reshape(k, d)
    icf = take(k * icf_len).reshape(k, icf_len)
    x = take(n * d).reshape(n, d)
    gamma, m = float(t[pos]), int(t[pos + 1])
    return dict(d=d, k=k, n=n, alphas=alphas, means=means, icf=icf, x=x, gamma=gamma, m=m)


def gmm_constant(g):
    """-(n d / 2) log 2π − K·C: no parameters, so computed once in plain Python."""
    pi = 3.14159265359  # the reference's value (BENCHMARKS.md)
    d, k, n, m, gamma = g["d"], g["k"], g["n"], g["m"], g["gamma"]
    n_prime = d + m + 1
    log_gamma_d = 0.25 * d * (d - 1) * math.log(pi) + sum(
        math.lgamma(n_prime / 2 + (1 - j) / 2) for j in range(1, d + 1))
    c = n_prime * d * (math.log(gamma) - 0.5 * math.log(2)) - log_gamma_d
    return -(n * d / 2) * math.log(2 * pi) - k * c


def gmm_lower_index(d):
    """Gather indices turning [0, l_1, l_2, …] into the row-major d×d strict lower
    triangle, filled column by column (Q[j][i] = next value for i < j)."""
    idx = np.zeros((d, d), dtype=np.int64)
    pos = 1
    for i in range(d):
        for j in range(i + 1, d):
            idx[j, i] = pos
            pos += 1
    return idx.reshape(-1)


def parse_ba(name):
    t = [float(v) for v in _numbers(name)]
    n, m, p = int(t[0]), int(t[1]), int(t[2])
    cam, point, w, feat = t[3:14], t[14:17], t[17], t[18:20]
    return dict(n=n, m=m, p=p, cams=np.tile(cam, (n, 1)), points=np.tile(point, (m, 1)),
                weights=np.full(p, w), features=np.tile(feat, (p, 1)))


def ba_locals(b):
    """The p×15 matrix of each observation's local inputs: camera i mod n, point
    i mod m, weight i."""
    i = np.arange(b["p"])
    return np.concatenate([b["cams"][i % b["n"]], b["points"][i % b["m"]], b["weights"][:, None]], axis=1)


def parse_lstm(name):
    t = _numbers(name)
    l, c, b = int(t[0]), int(t[1]), int(t[2])
    v = np.array([float(x) for x in t[3:]])
    main = v[:8 * l * b].reshape(l, 2, 4, b)
    extra = v[8 * l * b:8 * l * b + 3 * b].reshape(3, b)
    state = v[8 * l * b + 3 * b:8 * l * b + 3 * b + 2 * l * b].reshape(l, 2, b)
    seq = v[8 * l * b + 3 * b + 2 * l * b:].reshape(c, b)
    return dict(l=l, c=c, b=b, main=main, extra=extra, state=state, seq=seq)


def load_reference(refs, workload):
    with open(os.path.join(refs, workload + ".json")) as f:
        meta = json.load(f)
    values = np.fromfile(os.path.join(refs, workload + ".values.f64"), dtype="<f8")
    derivative = np.fromfile(os.path.join(refs, workload + ".derivative.f64"), dtype="<f8")
    return meta, (values if meta["has_values"] else None), (derivative if meta["has_derivative"] else None)


def disagreement(values, derivative, ref):
    """The largest |x − y|/max(1, |x| + |y|) (nested: |x − y|/|y|) against the reference."""
    meta, ref_values, ref_derivative = ref
    worst = 0.0
    for got, want in ((values, ref_values), (derivative, ref_derivative)):
        if want is None:
            continue
        got = np.asarray(got, dtype=np.float64).reshape(-1)
        if got.shape != want.shape:
            return math.inf
        if meta["strictly_relative"]:
            err = np.abs(got - want) / np.abs(want)
        else:
            err = np.abs(got - want) / np.maximum(1.0, np.abs(got) + np.abs(want))
        if err.size:
            e = float(np.max(err))
            if math.isnan(e):
                return math.inf
            worst = max(worst, e)
    return worst


def measure(f, quick=False):
    """Seconds per call: repeat until a batch takes ≥ 0.2 s, minimum of 5 batches
    (3 when a call takes over 1 s, 2 with --quick, 1 when over 5 s, to keep the
    run in budget)."""
    reps = 1
    while True:
        start = time.perf_counter()
        for _ in range(reps):
            f()
        t = time.perf_counter() - start
        if t >= 0.2:
            break
        reps = max(reps * 2, math.ceil(reps * 0.25 / max(t, 1e-9)))
    first = t / reps
    if first > 5.0:
        batches = 1
    elif quick:
        batches = 2
    else:
        batches = 5 if first <= 1.0 else 3
    best = first
    for _ in range(batches - 1):
        start = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - start) / reps)
    return best, reps, batches


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Cannot(Exception):
    """An implementation cannot do a workload (reported as "cannot", with the reason)."""


def nested_constants():
    """Shared by the nested benchmarks (BENCHMARKS.md)."""
    return dict(eta0=1e-5, tol=1e-5, grow_after=10, dt=0.1)
