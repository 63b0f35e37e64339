"""A minimal reverse-mode AD in the style of Krawiec et al. §5.3 (Figure 11):
every primitive records one binding `id = Add (Scale c1 (Var p1)) (Scale c2 (Var p2))`
in a growable array, and the backward pass walks the array once from the last
binding to the first, adding `c · ct[id]` into `ct[p]` left operand first.

Used to predict the exact floating-point digits a Delta-trace implementation
prints when the last bits of a gradient depend on the order in which cotangent
contributions are summed. Only + - * / and unary minus are needed here.
"""


class Tape:
    def __init__(self):
        self.bindings = []          # list of lists of (coef, parent id)

    def var(self, x):
        self.bindings.append([])
        return R(x, self, len(self.bindings) - 1)

    def record(self, value, parts):
        self.bindings.append(parts)
        return R(value, self, len(self.bindings) - 1)

    def backward(self, out, seed=1.0):
        ct = [0.0] * len(self.bindings)
        ct[out.i] = seed
        for i in range(len(self.bindings) - 1, -1, -1):
            for c, p in self.bindings[i]:
                ct[p] = ct[p] + c * ct[i]
        return ct


def lift(t, a):
    return a if isinstance(a, R) else R(float(a), t, None)


class R:
    """A real on a tape; i is None for a constant (Zero delta)."""

    def __init__(self, v, t, i):
        self.v, self.t, self.i = v, t, i

    def _bin(self, o, v, ca, cb):
        o = lift(self.t, o)
        parts = [(c, x.i) for c, x in ((ca, self), (cb, o)) if x.i is not None]
        return self.t.record(v, parts) if parts else R(v, self.t, None)

    def __add__(self, o):
        o = lift(self.t, o)
        return self._bin(o, self.v + o.v, 1.0, 1.0)

    def __radd__(self, o):
        return lift(self.t, o) + self

    def __sub__(self, o):
        o = lift(self.t, o)
        return self._bin(o, self.v - o.v, 1.0, -1.0)

    def __rsub__(self, o):
        return lift(self.t, o) - self

    def __mul__(self, o):
        o = lift(self.t, o)
        return self._bin(o, self.v * o.v, o.v, self.v)

    def __rmul__(self, o):
        return lift(self.t, o) * self

    def __truediv__(self, o):
        o = lift(self.t, o)
        return self._bin(o, self.v / o.v, 1.0 / o.v, -(self.v / o.v) / o.v)

    def __neg__(self):
        return self.t.record(-self.v, [(-1.0, self.i)]) if self.i is not None else R(-self.v, self.t, None)


def grad(f, xs):
    """Gradient of f at the list of floats xs, and the value."""
    t = Tape()
    vs = [t.var(x) for x in xs]
    y = f(*vs)
    ct = t.backward(y)
    return y.v, [ct[v.i] for v in vs]


class D:
    """Forward mode: a dual number (value, tangent), tangent rules left operand first."""

    def __init__(self, v, d=0.0):
        self.v, self.d = v, d

    @staticmethod
    def of(a):
        return a if isinstance(a, D) else D(float(a))

    def __add__(self, o):
        o = D.of(o)
        return D(self.v + o.v, self.d + o.d)

    __radd__ = lambda s, o: D.of(o) + s

    def __sub__(self, o):
        o = D.of(o)
        return D(self.v - o.v, self.d - o.d)

    __rsub__ = lambda s, o: D.of(o) - s

    def __mul__(self, o):
        o = D.of(o)
        return D(self.v * o.v, self.d * o.v + self.v * o.d)

    __rmul__ = lambda s, o: D.of(o) * s

    def __neg__(self):
        return D(-self.v, -self.d)


def fwd_grad(f, xs):
    """The gradient by one forward pass per input."""
    out = []
    for k in range(len(xs)):
        y = f(*[D(x, 1.0 if i == k else 0.0) for i, x in enumerate(xs)])
        out.append(y.d)
    return y.v, out
