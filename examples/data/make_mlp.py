"""Writes examples/data/rings.json: 120 points of two classes in the plane,
label 1 inside the ring of radius 1 (with noise), 0 outside — not linearly
separable, so a logistic regression cannot fit it and a hidden layer can.
The file is a JSON object {"x": [[x1, x2], ...], "y": [label, ...]}, which
`nabla run --input` reads as the record { x : Vec (Vec Real), y : Vec Real }.
Deterministic (fixed seed, Python's own generator): rerunning it rewrites the
same file. Run from the repository root: python3 examples/data/make_mlp.py"""

import json
import math
import random

rng = random.Random(20261125)
xs, ys = [], []
for k in range(120):
    inside = k % 2 == 0
    r = rng.uniform(0.0, 0.8) if inside else rng.uniform(1.2, 2.0)
    t = rng.uniform(0.0, 2.0 * math.pi)
    xs.append([round(r * math.cos(t), 4), round(r * math.sin(t), 4)])
    ys.append(1 if inside else 0)
with open("examples/data/rings.json", "w") as f:
    json.dump({"x": xs, "y": ys}, f)
    f.write("\n")
