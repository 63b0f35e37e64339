"""Writes examples/data/logistic.csv: 200 points (x1, x2, label) of two
overlapping Gaussian classes, label 1 when 1.5 x1 - 2 x2 + 0.5 + noise > 0.
Deterministic (fixed seed, Python's own generator): rerunning it rewrites
the same file. Run from the repository root: python3 examples/data/make_logistic.py"""

import random

rng = random.Random(20261125)
rows = ["x1,x2,label"]
for _ in range(200):
    x1, x2 = rng.gauss(0.0, 1.0), rng.gauss(0.0, 1.0)
    label = 1 if 1.5 * x1 - 2.0 * x2 + 0.5 + rng.gauss(0.0, 0.5) > 0 else 0
    rows.append(f"{x1:.4f},{x2:.4f},{label}")
with open("examples/data/logistic.csv", "w") as f:
    f.write("\n".join(rows) + "\n")
