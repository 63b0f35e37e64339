"""The data-driven AD test cases of tests/lang/ad/, with their expected
results computed here, independently of nabla.

Every case is (name, comment, source, expectation). The expectation is either a
Python value computed from a hand derivation (the formulas below; the
derivation is in the comment next to it and in tests/ad-oracle/NOTES.md) or an error
(position given by the first occurrence of a marker string, and a message
fragment).

    python3 tests/ad-oracle/cases.py          # check the files match this table
    python3 tests/ad-oracle/cases.py --write  # (re)write tests/lang/ad/*.nabla

Where JAX is importable (tests/ad-oracle/.venv), `jax_checks.py` recomputes many of
the same numbers by a second, unrelated route.
"""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fmt import Inl, Inr, UNIT, show  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "lang" / "ad"

cos, sin, exp, log, tan, tanh = math.cos, math.sin, math.exp, math.log, math.tan, math.tanh

# f(x, y) = 2x² + 3xy + 4y²  (LANGUAGE.md, Pearlmutter & Siskind §5)
# ∇f = (4x + 3y, 3x + 8y); H = [[4, 3], [3, 8]]
QUAD = "def f (x, y) = 2.0 * x * x + 3.0 * x * y + 4.0 * y * y\n"

CASES = []


def case(name, comment, src, expect=None, error=None, note=None):
    CASES.append(dict(name=name, comment=comment, src=src, expect=expect, error=error, note=note))


# ---------------------------------------------------------------- operators
case("op_diff", "diff: d/dx x³ = 3x² at 2; a tuple-valued T (diff has type (Real -> T) -> Real -> T),"
     " with a constant leaf whose derivative is 0",
     "def main = (diff (fun x -> x * x * x) 2.0, diff (fun x -> (x * x, sin x, 3.0)) 0.5)\n",
     (12.0, (1.0, cos(0.5), 0.0)))

case("op_grad", "grad of the LANGUAGE.md quadratic: (4x + 3y, 3x + 8y) at (3, 4)",
     QUAD + "def main = grad f (3.0, 4.0)\n", (24.0, 41.0))

case("op_value_and_grad", "value_and_grad: f(3, 4) = 18 + 36 + 64 = 118 and the gradient in one pass",
     QUAD + "def main = value_and_grad f (3.0, 4.0)\n", (118.0, (24.0, 41.0)))

case("op_jvp", "jvp: value and directional derivative ∇f·(7, 8) = 24·7 + 41·8 = 496;"
     " a tuple output: (xy, x/y) at (3, 2) along (1, 1) has tangent (y + x, 1/y - x/y²) = (5, -0.25)",
     QUAD + "def main = (jvp f (3.0, 4.0) (7.0, 8.0), jvp (fun (x, y) -> (x * y, x / y)) (3.0, 2.0) (1.0, 1.0))\n",
     ((118.0, 496.0), ((6.0, 1.5), (5.0, -0.25))))

case("op_vjp_reuse", "vjp returns a first-class pullback that can be applied several times:"
     " g(x, y) = (xy, x + y), J = [[y, x], [1, 1]] at (3, 4); pullback c = Jᵀc",
     "def g (x, y) = (x * y, x + y)\n"
     "def main =\n"
     "  let (y, pb) = vjp g (3.0, 4.0) in\n"
     "  (y, pb (1.0, 0.0), pb (0.0, 1.0), pb (2.0, 3.0))\n",
     ((12.0, 7.0), (4.0, 3.0), (1.0, 1.0), (11.0, 9.0)))

case("op_vjp_scalar", "vjp of a Real -> Real function: pullback c = c·cos x",
     "def main = let (y, pb) = vjp sin 0.5 in (y, pb 1.0, pb 2.0)\n",
     (sin(0.5), cos(0.5), 2.0 * cos(0.5)))

case("op_vjp_vector", "the pullback of a vector function, applied to two cotangents (the rows of Jᵀ)",
     "def main =\n"
     "  let (y, pb) = vjp (fun v -> [v[0] * v[1], v[0] + v[1]]) [3.0, 4.0] in\n"
     "  (y, pb [1.0, 0.0], pb [0.0, 1.0])\n",
     ([12.0, 7.0], [4.0, 3.0], [1.0, 1.0]))

case("op_jacobian_wide", "jacobian of R³ -> R² (wide): rows are the gradients of (v0·v1, v1 + v2)",
     "def main = jacobian (fun v -> [v[0] * v[1], v[1] + v[2]]) [2.0, 3.0, 4.0]\n",
     [[3.0, 2.0, 0.0], [0.0, 1.0, 1.0]])

case("op_jacobian_tall", "jacobian of R² -> R³ (tall): (v0, v0·v1, sin v1) at (2, 0)",
     "def main = jacobian (fun v -> [v[0], v[0] * v[1], sin v[1]]) [2.0, 0.0]\n",
     [[1.0, 0.0], [0.0, 2.0], [0.0, 1.0]])

case("op_jacobian_square", "jacobian of a nonlinear R² -> R²: (v0·v1, sin v0) at (0.5, 2)",
     "def main = jacobian (fun v -> [v[0] * v[1], sin v[0]]) [0.5, 2.0]\n",
     [[2.0, 0.5], [cos(0.5), 0.0]])

case("op_hessian", "hessian: of the LANGUAGE.md quadratic (constant [[4, 3], [3, 8]]),"
     " and of x²y + y³ at (1, 2): [[2y, 2x], [2x, 6y]]",
     "def q v = 2.0 * v[0] * v[0] + 3.0 * v[0] * v[1] + 4.0 * v[1] * v[1]\n"
     "def c v = v[0] * v[0] * v[1] + v[1] * v[1] * v[1]\n"
     "def main = (hessian q [3.0, 4.0], hessian c [1.0, 2.0])\n",
     ([[4.0, 3.0], [3.0, 8.0]], [[4.0, 2.0], [2.0, 12.0]]))

case("op_hessian_3", "hessian of v0·v1·v2 at (1, 2, 3): off-diagonal entries are the third factor",
     "def main = hessian (fun v -> v[0] * v[1] * v[2]) [1.0, 2.0, 3.0]\n",
     [[0.0, 3.0, 2.0], [3.0, 0.0, 1.0], [2.0, 1.0, 0.0]])

case("op_jacobian_of_grad", "the Jacobian of the gradient is the Hessian (reverse inside jacobian)",
     "def c v = v[0] * v[0] * v[1] + v[1] * v[1] * v[1]\n"
     "def main = jacobian (grad c) [1.0, 2.0]\n",
     [[4.0, 2.0], [2.0, 12.0]])

case("op_hessian_nested", "hessian of a function that itself calls diff: d/dt (t²·v0·v1)|t=1 = 2·v0·v1,"
     " whose Hessian is [[0, 2], [2, 0]]",
     "def main = hessian (fun v -> diff (fun t -> t * t * v[0] * v[1]) 1.0) [1.0, 2.0]\n",
     [[0.0, 2.0], [2.0, 0.0]])

# --------------------------------------------------------------- primitives
case("prim_unary", "derivatives of the unary real functions at points where every formula is exact:"
     " sin' = cos, cos' = -sin, exp' = exp, log' 4 = 1/4, sqrt' 4 = 1/(2·2), tan' 0 = 1,"
     " tanh' 0 = 1, abs' (-2) = -1, floor' = 0",
     "def main =\n"
     "  ( diff sin 0.5, diff cos 0.5, diff exp 1.0, diff log 4.0, diff sqrt 4.0\n"
     "  , diff tan 0.0, diff tanh 0.0, diff abs (-2.0), diff floor 1.5 )\n",
     (cos(0.5), -sin(0.5), exp(1.0), 0.25, 0.25, 1.0, 1.0, -1.0, 0.0))

case("prim_unary_grad", "the same table in reverse mode",
     "def main =\n"
     "  ( grad sin 0.5, grad cos 0.5, grad exp 1.0, grad log 4.0, grad sqrt 4.0\n"
     "  , grad tan 0.0, grad tanh 0.0, grad abs (-2.0), grad floor 1.5 )\n",
     (cos(0.5), -sin(0.5), exp(1.0), 0.25, 0.25, 1.0, 1.0, -1.0, 0.0))

case("prim_tan_tanh", "tan' = 1 + tan² = 1/cos², tanh' = 1 - tanh²: the last bits depend on the formula,"
     " so compare within 1e-12 (exact values in NOTES.md)",
     "def close a b = abs (a - b) <= 1e-12 * abs b\n"
     "def main =\n"
     "  ( close (diff tan 1.0) (1.0 / (cos 1.0 * cos 1.0))\n"
     "  , close (grad tan 1.0) (1.0 / (cos 1.0 * cos 1.0))\n"
     "  , close (diff tanh 0.5) (1.0 - tanh 0.5 * tanh 0.5)\n"
     "  , close (grad tanh 0.5) (1.0 - tanh 0.5 * tanh 0.5) )\n",
     (True, True, True, True))

case("prim_binary", "partials of the binary primitives: a/b -> (1/b, -a/b²);"
     " atan2 y x -> (x/(x²+y²), -y/(x²+y²)); x**y -> (y·x^(y-1), x^y·log x); real n is a constant",
     "def main =\n"
     "  ( grad (fun (a, b) -> a / b) (3.0, 2.0)\n"
     "  , grad (fun (y, x) -> atan2 y x) (1.0, 1.0)\n"
     "  , grad (fun (x, y) -> x ** y) (2.0, 3.0)\n"
     "  , diff (fun x -> x * real (3 + 4)) 2.0 )\n",
     ((0.5, -0.75), (0.5, -0.5), (12.0, 8.0 * log(2.0)), 7.0))

# ----------------------------------------------------------------- nesting
case("nest_diff_diff", "forward inside forward: (x³)'' = 6x at 2; d/dx [d/dy x·y² at y=2] = d/dx 4x = 4",
     "def main = (diff (diff (fun x -> x * x * x)) 2.0, diff (fun x -> diff (fun y -> x * y * y) 2.0) 3.0)\n",
     (12.0, 4.0))

case("nest_diff_in_grad", "forward inside reverse: x · d/dy(x·y²)|y=2 = 4x², gradient 8x at 3",
     "def main = grad (fun x -> x * diff (fun y -> x * y * y) 2.0) 3.0\n", 24.0)

case("nest_grad_in_diff", "reverse inside forward: d/dy(x²y²)|y=1 = 2x², derivative 4x at 3",
     "def main = diff (fun x -> grad (fun y -> x * x * y * y) 1.0) 3.0\n", 12.0)

case("nest_grad_grad", "reverse inside reverse: (x⁴)'' = 12x² at 2; the inner gradient taken at the"
     " outer variable: d/dy(x·y²)|y=x = 2x², derivative 4x at 3",
     "def main = (grad (grad (fun x -> x * x * x * x)) 2.0, grad (fun x -> grad (fun y -> x * y * y) x) 3.0)\n",
     (48.0, 12.0))

case("nest_hvp_forward_over_reverse", "Hessian-vector product H·(7, 8) = (4·7 + 3·8, 3·7 + 8·8) by jvp of grad"
     " (LANGUAGE.md)",
     QUAD + "def main = snd (jvp (grad f) (3.0, 4.0) (7.0, 8.0))\n", (52.0, 85.0))

case("nest_hvp_reverse_over_reverse", "the same product by reverse over reverse: the pullback of grad f"
     " (H is symmetric), and the gradient of ∇f·v (Pearlmutter & Siskind §5)",
     QUAD + "def main =\n"
     "  ( snd (vjp (grad f) (3.0, 4.0)) (7.0, 8.0)\n"
     "  , grad (fun p -> let (gx, gy) = grad f p in gx * 7.0 + gy * 8.0) (3.0, 4.0) )\n",
     ((52.0, 85.0), (52.0, 85.0)))

case("nest_hvp_reverse_over_forward", "the same product by reverse over forward: the gradient of the"
     " directional derivative p -> ∇f(p)·(7, 8), by grad and by vjp",
     QUAD + "def dir p = snd (jvp f p (7.0, 8.0))\n"
     "def main = (grad dir (3.0, 4.0), snd (vjp dir (3.0, 4.0)) 1.0)\n",
     ((52.0, 85.0), (52.0, 85.0)))

case("nest_jvp_jvp", "jvp inside jvp: p(x) = sin'(x) = cos x, so jvp p 0.5 1.0 = (cos 0.5, -sin 0.5)",
     "def main = jvp (fun x -> snd (jvp sin x 1.0)) 0.5 1.0\n", (cos(0.5), -sin(0.5)))

case("nest_vjp_vjp", "vjp inside vjp: g = pullback of f(x, y) = x²y at 1, i.e. ∇f = (2xy, x²);"
     " the pullback of g at (1, 2) on (1, 0) is the first Hessian row (2y, 2x) = (4, 2)",
     "def f (x, y) = x * x * y\n"
     "def g p = snd (vjp f p) 1.0\n"
     "def main = (snd (vjp g (1.0, 2.0)) (1.0, 0.0), snd (vjp g (1.0, 2.0)) (0.0, 1.0))\n",
     ((4.0, 2.0), (2.0, 0.0)))

case("nest_jvp_vjp", "jvp of a vjp: the first Hessian column of x²y at (1, 2)",
     "def f (x, y) = x * x * y\n"
     "def main = jvp (fun p -> snd (vjp f p) 1.0) (1.0, 2.0) (1.0, 0.0)\n",
     ((4.0, 1.0), (4.0, 2.0)))

case("nest_value_and_grad", "value_and_grad of a function returning a value_and_grad component:"
     " d/dy (x·y²)|y=2 = 4x; value 12 and derivative 4 at x = 3",
     "def main = value_and_grad (fun x -> snd (value_and_grad (fun y -> x * y * y) 2.0)) 3.0\n",
     (12.0, 4.0))

case("nest_jacobian_in_grad", "jacobian inside grad: the Jacobian of v -> [x·v0²] at 3 is [[6x]],"
     " its entry sum has derivative 6 in x",
     "def main = grad (fun x -> sum (map sum (jacobian (fun v -> [x * v[0] * v[0]]) [3.0]))) 2.0\n",
     6.0)

case("nest_three_forward", "three levels of forward mode: (x⁴)''' = 24x at 1.5",
     "def main = diff (diff (diff (fun x -> x * x * x * x))) 1.5\n", 36.0)

case("nest_three_reverse", "three levels of reverse mode: (x⁴)''' = 24x at 1.5",
     "def main = grad (grad (grad (fun x -> x * x * x * x))) 1.5\n", 36.0)

case("nest_three_mixed", "reverse(forward(reverse)): d/dz(x²y²z²)|z=1 = 2x²y²; d/dy at 2 = 8x²;"
     " d/dx at 3 = 16x = 48. Then jvp(vjp(diff)): d/dz(xyz²)|z=3 = 6xy; pullback in y at 2 on 1 = 6x;"
     " value and tangent at x = 1.5 along 1: (9, 6)",
     "def main =\n"
     "  ( grad (fun x -> diff (fun y -> grad (fun z -> x * x * y * y * z * z) 1.0) 2.0) 3.0\n"
     "  , jvp (fun x -> snd (vjp (fun y -> diff (fun z -> x * y * z * z) 3.0) 2.0) 1.0) 1.5 1.0 )\n",
     (48.0, (9.0, 6.0)))

case("nest_confusion", "perturbation confusion (Wang et al. §2.4; LANGUAGE.md): the inner derivative of"
     " x + y in y is 1, so each outer derivative of x·1 is 1 (a confused system gives 2),"
     " in all four forward/reverse combinations and with jvp/vjp",
     "def main =\n"
     "  ( grad (fun x -> x * grad (fun y -> x + y) 1.0) 1.0\n"
     "  , diff (fun x -> x * diff (fun y -> x + y) 1.0) 1.0\n"
     "  , grad (fun x -> x * diff (fun y -> x + y) 1.0) 1.0\n"
     "  , diff (fun x -> x * grad (fun y -> x + y) 1.0) 1.0\n"
     "  , snd (jvp (fun x -> x * snd (vjp (fun y -> x + y) 1.0) 1.0) 1.0 1.0)\n"
     "  , snd (vjp (fun x -> x * snd (jvp (fun y -> x + y) 1.0 1.0)) 1.0) 1.0 )\n",
     (1.0, 1.0, 1.0, 1.0, 1.0, 1.0))

case("nest_confusion_three", "perturbation confusion three levels deep: the innermost derivative is 1,"
     " the middle one d/dy (y·1) = 1, the outer d/dx (x·1) = 1",
     "def main =\n"
     "  ( grad (fun x -> x * diff (fun y -> y * grad (fun z -> x + y + z) 1.0) 1.0) 1.0\n"
     "  , diff (fun x -> x * grad (fun y -> y * diff (fun z -> x + y + z) 1.0) 1.0) 1.0 )\n",
     (1.0, 1.0))

case("nest_siskind_pearlmutter", "the classic confusion test of Siskind & Pearlmutter:"
     " d/dx [x · d/dy (x·y)|y=2] = d/dx x² = 2x = 2 at 1",
     "def main =\n"
     "  ( diff (fun x -> x * diff (fun y -> x * y) 2.0) 1.0\n"
     "  , grad (fun x -> x * grad (fun y -> x * y) 2.0) 1.0 )\n",
     (2.0, 2.0))

# ------------------------------------------------------ first-class operators
case("fc_in_tuple", "operators stored in a tuple and taken out again",
     "def main = let (g, d) = (grad, diff) in (g sin 0.5, d cos 0.5)\n",
     (cos(0.5), -sin(0.5)))

case("fc_in_vector", "four ways to differentiate Real -> Real, stored in a vector and mapped over",
     "def main =\n"
     "  map (fun op -> op sin 0.5)\n"
     "    [grad, diff, fun f x -> snd (jvp f x 1.0), fun f x -> snd (vjp f x) 1.0]\n",
     [cos(0.5)] * 4)

case("fc_partial", "grad partially applied, then used at two points: ∇f(1, 1) = (7, 11)",
     QUAD + "def main = let df = grad f in (df (3.0, 4.0), df (1.0, 1.0))\n",
     ((24.0, 41.0), (7.0, 11.0)))

case("fc_returned", "an operator returned from a recursive function: nth n f is the n-th derivative;"
     " x⁵ at 2: 32, 5x⁴ = 80, 20x³ = 160, 60x² = 240",
     "def nth n f = if n == 0 then f else diff (nth (n - 1) f)\n"
     "def p x = x * x * x * x * x\n"
     "def main = (nth 0 p 2.0, nth 1 p 2.0, nth 2 p 2.0, nth 3 p 2.0)\n",
     (32.0, 80.0, 160.0, 240.0))

case("fc_argument", "an operator passed as an argument to a user function",
     "def apply_op op f x = op f x\n"
     "def sq x = x * x\n"
     "def main = (apply_op grad sq 3.0, apply_op diff sq 3.0, apply_op value_and_grad sq 3.0)\n",
     (6.0, 6.0, (9.0, 6.0)))

case("fc_map", "partially applied operators mapped over vectors",
     "def main = (map (diff (fun x -> x * x)) [1.0, 2.0, 3.0], map (value_and_grad (fun x -> x * x)) [1.0, 3.0])\n",
     ([2.0, 4.0, 6.0], [(1.0, 2.0), (9.0, 6.0)]))

case("fc_pullbacks_stored", "pullbacks kept in a vector and applied later: (x³)' = 3x² at 1 and 2",
     "def main =\n"
     "  let pbs = map (fun x -> snd (vjp (fun y -> y * y * y) x)) [1.0, 2.0] in\n"
     "  (map (fun pb -> pb 1.0) pbs, map (fun pb -> pb 2.0) pbs)\n",
     ([3.0, 12.0], [6.0, 24.0]))

case("fc_function_calling_grad", "differentiating a top-level function that itself calls grad:"
     " df x = d/dy (x·y²)|y=1 = 2x, so d/dx (x · df x) = 4x = 12 at 3",
     "def df x = grad (fun y -> y * y * x) 1.0\n"
     "def main = (grad (fun x -> x * df x) 3.0, diff (fun x -> x * df x) 3.0)\n",
     (12.0, 12.0))

# ---------------------------------------------------------------- closures
case("cl_free_variables", "closures with free variables: a captured Real and a captured vector",
     "def main =\n"
     "  let a = 3.0 in\n"
     "  let w = [1.0, 2.0, 3.0] in\n"
     "  (grad (fun x -> a * x * x) 2.0, grad (fun x -> sum (map (fun wi -> wi * x * x) w)) 2.0)\n",
     (12.0, 24.0))

case("cl_partial_application", "partial applications of curried functions as the differentiated function",
     "def scaled_sin a x = a * sin x\n"
     "def mul x y = x * y\n"
     "def main = (diff (scaled_sin 2.0) 0.5, grad (scaled_sin 2.0) 0.5, grad (mul 3.0) 2.0)\n",
     (2.0 * cos(0.5), 2.0 * cos(0.5), 3.0))

case("cl_captured_by_inner", "the differentiated variable captured by closures kept in a tuple:"
     " d/dx (2x + (x + 3)) = 3",
     "def main =\n"
     "  grad (fun x -> let fs = (fun y -> x * y, fun y -> x + y) in fst fs 2.0 + snd fs 3.0) 1.0\n",
     3.0)

# --------------------------------------------------------------- recursion
case("rec_power", "a recursive function: pow x 5 = x⁵, derivative 5x⁴ = 80 at 2 in both modes",
     "def pow x n = if n == 0 then 1.0 else x * pow x (n - 1)\n"
     "def main = (grad (fun x -> pow x 5) 2.0, diff (fun x -> pow x 5) 2.0)\n",
     (80.0, 80.0))

case("rec_mutual", "mutually recursive top-level functions: f x 3 = g (x²) 2 = f (2x²) 1 = g (4x⁴) 0 = 4x⁴;"
     " derivative 16x³ = 54 at 1.5",
     "def f x n = if n == 0 then x else g (x * x) (n - 1)\n"
     "def g x n = if n == 0 then x else f (2.0 * x) (n - 1)\n"
     "def main = (grad (fun x -> f x 3) 1.5, diff (fun x -> f x 3) 1.5)\n",
     (54.0, 54.0))

case("rec_let_rec", "a let rec loop inside the differentiated function: x⁴, derivative 4x³ = 108 at 3",
     "def main =\n"
     "  grad (fun x -> let rec loop acc i = if i == 0 then acc else loop (acc * x) (i - 1) in loop 1.0 4) 3.0\n",
     108.0)

case("rec_fold", "the product of a vector by fold: ∂/∂vᵢ is the product of the others",
     "def main = grad (fun v -> fold (fun acc a -> acc * a) 1.0 v) [2.0, 3.0, 4.0]\n",
     [12.0, 8.0, 6.0])

# ------------------------------------------------------ structured values
case("st_nested_tuples", "nested tuple input: ∇(a·b·c) = ((bc, ac), ab)",
     "def main = grad (fun ((a, b), c) -> a * b * c) ((1.0, 2.0), 3.0)\n",
     ((6.0, 3.0), 2.0))

case("st_int_bool_unit", "Int, Bool and unit leaves of the input are carried unchanged into the gradient",
     "def main = grad (fun (x, n, b, u) -> if b then x * real n else x) (2.0, 3, true, ())\n",
     (3.0, 3, True, UNIT))

case("st_sum_grad", "grad at inl x yields inl dx, at inr y yields inr dy",
     "def h s = match s with | inl x -> x * x | inr y -> 3.0 * y\n"
     "def main = (grad h (inl 2.0), grad h (inr 2.0))\n",
     (Inl(4.0), Inr(3.0)))

case("st_sum_in_tuple", "a sum inside a tuple, with a tuple inside the sum",
     "def main =\n"
     "  grad (fun (s, w) -> match s with | inl x -> x * w | inr (a, b) -> a * b * w) (inr (2.0, 3.0), 5.0)\n",
     (Inr((15.0, 10.0)), 6.0))

case("st_sum_forward", "sums through forward mode: a sum-valued output keeps its constructor in the"
     " tangent; a sum input with a matching tangent",
     "def h s = match s with | inl x -> x * x | inr y -> 3.0 * y\n"
     "def main =\n"
     "  ( jvp (fun x -> if x > 0.0 then inl (x * x) else inr x) 3.0 1.0\n"
     "  , jvp h (inr 2.0) (inr 1.0)\n"
     "  , diff (fun x -> if x > 0.0 then inl (x * x) else inr x) (-1.0) )\n",
     ((Inl(9.0), Inl(6.0)), (6.0, 3.0), Inr(1.0)))

case("st_sum_vjp", "the pullback of a function of a sum returns a cotangent with the primal's constructor",
     "def h s = match s with | inl x -> x * x | inr y -> 3.0 * y\n"
     "def main = let (y, pb) = vjp h (inl 3.0) in (y, pb 1.0, pb 2.0)\n",
     (9.0, Inl(6.0), Inl(12.0)))

case("st_vectors", "vector inputs: ∇ Σ vᵢ² = 2v; a vector with an Int index beside it",
     "def main =\n"
     "  ( grad (fun v -> sum (map (fun a -> a * a) v)) [1.0, 2.0, 3.0]\n"
     "  , grad (fun (v, k) -> v[k] * v[k]) ([1.0, 2.0, 3.0], 1) )\n",
     ([2.0, 4.0, 6.0], ([0.0, 4.0, 0.0], 1)))

case("st_vector_of_tuples", "a vector of pairs, and a dot product through zip",
     "def main =\n"
     "  ( grad (fun v -> sum (map (fun (a, b) -> a * b) v)) [(1.0, 2.0), (3.0, 4.0)]\n"
     "  , grad (fun (u, v) -> sum (map (fun (a, b) -> a * b) (zip u v))) ([1.0, 2.0], [3.0, 4.0]) )\n",
     ([(2.0, 1.0), (4.0, 3.0)], ([3.0, 4.0], [1.0, 2.0])))

case("st_build_nested", "build with an index-dependent weight, and a ragged vector of vectors",
     "def main =\n"
     "  ( grad (fun v -> sum (build 3 (fun i -> v[i] * real (i + 1)))) [5.0, 5.0, 5.0]\n"
     "  , grad (fun m -> sum (map (fun row -> sum row) m)) [[1.0, 2.0], [3.0]] )\n",
     ([1.0, 2.0, 3.0], [[1.0, 1.0], [1.0]]))

case("st_jvp_vectors", "jvp on vectors: the map of squares along (1, 10)",
     "def main = jvp (fun v -> map (fun a -> a * a) v) [1.0, 2.0] [1.0, 10.0]\n",
     ([1.0, 4.0], [2.0, 40.0]))

case("st_jvp_int_output", "an Int leaf of the output: its tangent carries the primal Int unchanged"
     " (LANGUAGE.md: Int and Bool leaves are carried unchanged)",
     "def main = jvp (fun (x, n) -> (x * x, n + 1, n > 2)) (2.0, 3) (1.0, 3)\n",
     ((4.0, 4, True), (4.0, 4, True)),
     note="convention to confirm: tangent Int/Bool leaves of the output = primal output leaves")

# -------------------------------------------------------------- conventions
case("conv_abs", "abs has derivative 0 at 0 (LANGUAGE.md), the sign elsewhere",
     "def main = (diff abs 0.0, grad abs 0.0, diff abs (-2.0), grad abs 3.0)\n",
     (0.0, 0.0, -1.0, 1.0))

case("conv_sqrt_zero", "sqrt at 0 has derivative inf (LANGUAGE.md); a zero-tangent constant sqrt 0.0"
     " injects no inf or nan",
     "def main =\n"
     "  ( diff sqrt 0.0, grad sqrt 0.0\n"
     "  , grad (fun (x, y) -> x + sqrt y) (1.0, 0.0)\n"
     "  , diff (fun x -> x + sqrt 0.0) 2.0, grad (fun x -> x * sqrt 0.0 + x) 2.0 )\n",
     (math.inf, math.inf, (1.0, math.inf), 1.0, 1.0))

case("conv_min_max", "min/max differentiate the argument returned; on a tie that is the first",
     "def main =\n"
     "  ( grad (fun (a, b) -> min a b) (2.0, 2.0), grad (fun (a, b) -> max a b) (2.0, 2.0)\n"
     "  , grad (fun (a, b) -> min a b) (3.0, 2.0), grad (fun (a, b) -> max a b) (3.0, 2.0)\n"
     "  , diff (fun x -> max x (2.0 * x - 1.0)) 1.0, diff (fun x -> max x (2.0 * x - 1.0)) 2.0\n"
     "  , diff (fun x -> min (3.0 * x) (x + 2.0)) 1.0 )\n",
     ((1.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 0.0), 1.0, 2.0, 3.0))

case("conv_if", "if: the derivative of the branch taken (at 0 the else branch x², derivative 0)",
     "def f x = if x < 0.0 then 0.0 - x else x * x\n"
     "def main = (diff f (-2.0), diff f 0.0, grad f 3.0, grad f (-2.0))\n",
     (-1.0, 0.0, 6.0, -1.0))

case("conv_pow_const_exponent", "x ** 3.0 at a negative base: the log x term is never formed,"
     " d/dx = 3x² (6.75 at -1.5 exactly; 5.07 at -1.3, compared within 1e-12), and 0 at 0",
     "def close a b = abs (a - b) <= 1e-12 * abs b\n"
     "def main =\n"
     "  ( diff (fun x -> x ** 3.0) (-1.5), grad (fun x -> x ** 3.0) (-1.5)\n"
     "  , close (diff (fun x -> x ** 3.0) (-1.3)) 5.07, close (grad (fun x -> x ** 3.0) (-1.3)) 5.07\n"
     "  , diff (fun x -> x ** 3.0) 0.0 )\n",
     (6.75, 6.75, True, True, 0.0))

case("conv_floor", "floor has derivative 0: d/dx (floor x · x) = floor x = 2 at 2.5",
     "def main = (diff (fun x -> floor x * x) 2.5, grad (fun x -> floor x * x) 2.5)\n",
     (2.0, 2.0))

# ----------------------------------------------------------------- sharing
case("share_doubling_loop", "Krawiec et al. §5.3: y = x + x repeated 1000 times by a let rec loop."
     " The gradient is 2^1000 (exact), and reverse mode must stay linear: without sharing the"
     " Delta would unfold into 2^1000 nodes",
     "def chain x =\n"
     "  let rec loop y n = if n == 0 then y else (let z = y + y in loop z (n - 1)) in\n"
     "  loop x 1000\n"
     "def main = (grad chain 1.0, diff chain 1.0, value_and_grad chain 0.5)\n",
     (2.0 ** 1000, 2.0 ** 1000, (2.0 ** 999, 2.0 ** 1000)))

case("share_unrolled", "the §5.3 chain written out: x1 = x + x, ..., x40 = x39 + x39; gradient 2^40",
     "def chain x =\n" + "".join(
         f"  let x{i} = x{i - 1 if i > 1 else ''} + x{i - 1 if i > 1 else ''} in\n" for i in range(1, 41))
     + "  x40\n"
     "def main = (grad chain 1.0, diff chain 1.0)\n",
     (2.0 ** 40, 2.0 ** 40))


def _mul_chain():
    y = 1.0
    for _ in range(10 ** 6):
        y = y * 1.0000001
    return y


case("share_multiplicative_loop", "a 10^6-step chain y = y · 1.0000001 (a long trace in reverse mode);"
     " at x = 1 the value and the derivative are the same product of 10^6 roundings",
     "def chain x =\n"
     "  let rec loop y n = if n == 0 then y else loop (y * 1.0000001) (n - 1) in\n"
     "  loop x 1000000\n"
     "def main = (value_and_grad chain 1.0, diff chain 1.0)\n",
     ((_mul_chain(), _mul_chain()), _mul_chain()))

# ------------------------------------------------------------------ errors
case("err_jvp_length", "jvp: the tangent vector must have the primal's length (run-time error)",
     "def main = jvp (fun v -> sum v) [1.0, 2.0] [1.0]\n",
     error=("jvp (fun", "length"))

case("err_jvp_sum_constructor", "jvp: the tangent of a sum must have the primal's constructor",
     "def h s = match s with | inl x -> x | inr y -> y\n"
     "def main = jvp h (inl 1.0) (inr 1.0)\n",
     error=("jvp h", "inr"))

case("err_pullback_length", "a pullback applied to a cotangent of the wrong length (run-time error)",
     "def main =\n"
     "  let (y, pb) = vjp (fun v -> map (fun a -> 2.0 * a) v) [1.0, 2.0] in\n"
     "  pb [1.0, 2.0, 3.0]\n",
     error=("pb [", "length"))

case("err_grad_bool", "grad of a function returning Bool is a type error",
     "def main = grad (fun x -> x > 1.0) 2.0\n",
     error=("(fun x", "type mismatch"))

case("err_grad_vector_output", "grad needs a Real result; a vector-valued function is a type error",
     "def main = grad (fun x -> [x, x]) 1.0\n",
     error=("(fun x", "type mismatch"))

case("err_grad_function_input", "grad on a function-typed input: inputs must be first-order (type error)",
     "def main = grad (fun f -> f 1.0) (fun y -> y)\n",
     error=("(fun f", "first-order"))

case("err_jvp_function_input", "jvp on a function-typed input: inputs must be first-order (type error)",
     "def main = jvp (fun f -> f 1.0) (fun y -> y) (fun y -> y)\n",
     error=("(fun f", "first-order"))

case("err_jvp_function_output", "jvp of a function returning a function: outputs must be first-order",
     "def main = jvp (fun x -> fun y -> x * y) 1.0 1.0\n",
     error=("(fun x", "first-order"))

case("err_hessian_vector_output", "hessian needs Vec Real -> Real",
     "def main = hessian (fun v -> v) [1.0]\n",
     error=("(fun v", "type mismatch"))


# ------------------------------------------------------------------ driver
def header(c):
    lines = []
    if c["error"] is None:
        lines.append(f"# expect: {show(c['expect'])}")
    lines += [f"# {ln}" for ln in wrap(c["comment"])]
    if c["note"]:
        lines += [f"# ({ln})" for ln in wrap(c["note"])]
    return lines


def wrap(text, width=86):
    out, cur = [], ""
    for w in text.split():
        if cur and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        out.append(cur)
    return out


def render(c):
    lines = header(c)
    if c["error"] is not None:
        marker, frag = c["error"]
        # the error line comes first; compute the marker's position in the final text
        body = "\n".join(lines) + "\n" + c["src"]
        tentative = "# expect-error: 0:0 x\n" + body
        idx = tentative.index(marker, tentative.index("\n" + c["src"].split("\n")[0]))
        line = tentative.count("\n", 0, idx) + 1
        col = idx - (tentative.rfind("\n", 0, idx) + 1) + 1
        return f"# expect-error: {line}:{col} {frag}\n" + body
    return "\n".join(lines) + "\n" + c["src"]


def main():
    write = "--write" in sys.argv
    names = set()
    bad = 0
    for c in CASES:
        assert c["name"] not in names, c["name"]
        names.add(c["name"])
        path = ROOT / f"{c['name']}.nabla"
        text = render(c)
        if write:
            ROOT.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            print(f"MISMATCH {path}")
            bad += 1
    stale = {p.stem for p in ROOT.glob("*.nabla")} - names
    for s in sorted(stale):
        print(f"STALE {s}.nabla (not in the table)")
        bad += 1
    print(f"{len(CASES)} cases, {sum(c['error'] is not None for c in CASES)} error cases,"
          f" {'written' if write else ('all match' if not bad else f'{bad} problems')}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
