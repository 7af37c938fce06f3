"""A held-back suite for per-lane arrays, written from SPEC section 8 alone.

Each case is a per-example function as an outside user would write it.  It is compiled
with ``hydra.compile`` on the numpy, cpu and cuda backends (cuda: all of it, on the CUDA
simulator in CI, whose lane counts here are small), run at several lane counts, and
compared with the undecorated function run example by example in plain Python (varying
arguments indexed along their leading axis, uniform ones passed whole; every argument
copied for each side, so writes through views are compared too).  Elementwise results,
integers, bools, shapes and dtypes must be exact; products and reductions of floats
agree within summation-order tolerance (1e-5 in float32).  Cases that use cross-lane
intrinsics (which plain Python cannot run) carry their own NumPy oracle.  The error tests
check the documented exceptions: CompileErrors naming both shapes or the expression, an
IndexError naming the lowest failing lane and its index.  One gap is marked xfail(strict).
"""

import copy
import re

import numpy as np
import pytest

import hydra
from hydra.backends import available
from hydra import (broadcast, lane, laneall, laneany, lanemax, lanemin, laneprod, lanesum,
                   nlanes, nn, prefixsum, rotate, shuffle)

BACKENDS = tuple(b for b in ("numpy", "cpu", "cuda") if available(b))
LANES = (1, 2, 5, 17)

SCALE64 = np.float64(0.5)      # a strong NumPy scalar captured from the module
TABLE = np.arange(12, dtype=np.float32).reshape(4, 3) * 0.25   # a captured array


# ---------------------------------------------------------------------------
# machinery


class Case:
    """One program: the function, how to make its arguments for n lanes, and how to judge."""

    def __init__(self, name, fn, make, varying=(), tol=False, uniform=False, ref=None):
        self.name, self.fn, self.make, self.varying = name, fn, make, tuple(varying)
        self.tol, self.uniform, self.ref = tol, uniform, ref

    def __repr__(self):
        return self.name


CASES = []
_KERNELS = {}


def case(make, varying=(), tol=False, uniform=False, ref=None, name=None):
    def deco(fn):
        CASES.append(Case(name or fn.__name__, fn, make, varying, tol, uniform, ref))
        return fn
    return deco


class R:
    """Argument makers for n lanes, seeded by the case and the lane count."""

    def __init__(self, seed):
        self.g = np.random.default_rng(seed)

    def f32(self, *shape):
        return self.g.standard_normal(shape).astype(np.float32)

    def f64(self, *shape):
        return self.g.standard_normal(shape)

    def ints(self, lo, hi, *shape, dtype=np.int64):
        return self.g.integers(lo, hi, size=shape).astype(dtype)

    def small(self, *shape, dtype=np.float32):
        """Small integer-valued floats: products and sums are exact in any order."""
        return self.g.integers(-3, 4, size=shape).astype(dtype)

    def bools(self, *shape):
        return self.g.random(shape) < 0.5


def kernel(c, backend, n):
    if c.varying:
        key = (c.name, backend)
        if key not in _KERNELS:
            _KERNELS[key] = hydra.compile(c.fn, varying=c.varying, backend=backend)
        return _KERNELS[key]
    key = (c.name, backend, n)
    if key not in _KERNELS:
        _KERNELS[key] = hydra.compile(c.fn, lanes=n, backend=backend)
    return _KERNELS[key]


def param_names(fn):
    return fn.__code__.co_varnames[: fn.__code__.co_argcount]


def oracle(c, args, n):
    """The per-example function run lane by lane on (copies of) the arguments."""
    names = param_names(c.fn)
    outs = []
    for i in range(n):
        lane_args = [a[i] if nm in c.varying else a for nm, a in zip(names, args)]
        with np.errstate(all="ignore"):
            outs.append(c.fn(*lane_args))
    return join(outs, c.uniform)


def join(outs, uniform):
    first = outs[0]
    if isinstance(first, tuple):
        flags = uniform if isinstance(uniform, tuple) else (uniform,) * len(first)
        return tuple(join([o[k] for o in outs], flags[k]) for k in range(len(first)))
    if first is None:
        return None
    if uniform:
        return first
    return np.stack([np.asarray(o) for o in outs])


def close(got, want, tol, what="result"):
    if isinstance(want, tuple):
        assert isinstance(got, tuple), f"{what}: expected a tuple, got {type(got)}"
        assert len(got) == len(want), what
        for k, (g, w) in enumerate(zip(got, want)):
            close(g, w, tol, f"{what}[{k}]")
        return
    if want is None:
        assert got is None, what
        return
    ga, wa = np.asarray(got), np.asarray(want)
    assert ga.shape == wa.shape, f"{what}: shape {ga.shape} != {wa.shape}"
    if isinstance(want, (np.ndarray, np.generic)):
        assert ga.dtype == wa.dtype, f"{what}: dtype {ga.dtype} != {wa.dtype}"
    else:   # a Python scalar: the same kind of number
        assert ga.dtype.kind == wa.dtype.kind, f"{what}: {type(got)} != {type(want)}"
    if tol and wa.dtype.kind in "fc":
        eps = 1e-5 if wa.dtype == np.float32 else 1e-11
        np.testing.assert_allclose(ga, wa, rtol=eps, atol=eps, err_msg=what)
    else:
        np.testing.assert_array_equal(ga, wa, err_msg=what, strict=False)
        if wa.dtype.kind == "f":   # signed zeros too
            assert np.array_equal(np.signbit(ga), np.signbit(wa)), what


def run_case(c, backend, n):
    seed = (sum(map(ord, c.name)) * 7919 + n) % 2**32
    args = c.make(R(seed), n)
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    want = c.ref(theirs, n) if c.ref else oracle(c, theirs, n)
    got = kernel(c, backend, n)(*mine)
    close(got, want, c.tol)
    for nm, a, b in zip(param_names(c.fn), mine, theirs):
        if isinstance(a, np.ndarray):
            close(a, b, c.tol, f"argument {nm!r} after the call")


# ---------------------------------------------------------------------------
# elementwise arithmetic and NumPy 2 promotion


@case(lambda r, n: (r.f32(n, 4),), varying=("x",))
def weak_float_literal(x):
    return x * 2.0 + 1 - x / 3


@case(lambda r, n: (r.ints(-50, 50, n, 5, dtype=np.int32),), varying=("a",))
def int32_with_python_scalars(a):
    return a + 3, a * 2.5, a / 4, a // 3, a % 3, -a, a ** 2


@case(lambda r, n: (r.ints(-100, 100, n, 4, dtype=np.int8), 100), varying=("a",))
def int8_weak_int_argument_wraps(a, c):
    return a + c, a * 3


@case(lambda r, n: (r.ints(-9, 9, n, 3, dtype=np.int32), np.float32(1.5), np.int64(7)),
      varying=("a",))
def numpy_scalar_arguments_are_strong(a, f, i):
    return a * f, a + i, f * a.astype(np.float32)


@case(lambda r, n: (r.f32(n, 3),), varying=("x",))
def module_float64_scalar_is_strong(x):
    return x * SCALE64, x + 1.0


@case(lambda r, n: (r.f32(n, 3), r.f64(n), r.ints(-5, 5, n, 3, dtype=np.int64)),
      varying=("x", "s", "k"))
def per_lane_numpy_scalars_strong(x, s, k):
    # s is an np.float64 on each lane, k[0] an np.int64: both strong
    return x * s, x + k[0], k * 2, k + x


@case(lambda r, n: (r.f32(n, 4), r.f64(n), r.ints(-5, 5, n, 2, dtype=np.int64),
                    r.ints(-5, 5, n, 3, dtype=np.int8)), varying=("x", "y", "k", "b"))
def weak_per_lane_python_scalars(x, y, k, b):
    s = float(y)                 # a Python float on each lane: weak
    i = int(k[0])                # a Python int: weak
    t = 0.0
    for j in range(3):
        t = t + j * 0.5          # Python floats
    return x * s, x + i, b * i, x - len(x), b + 1, x * t, (y > 0) * x, b * True


@case(lambda r, n: (r.bools(n, 4), r.ints(-5, 5, n, 4, dtype=np.int64),
                    r.ints(0, 9, n, 4, dtype=np.uint32), r.ints(-9, 9, n, 4, dtype=np.int32)),
      varying=("m", "k", "u", "i"))
def mixed_array_dtypes(m, k, u, i):
    return m + 1, m * 1.5, k + m, u + i, i.astype(np.float32) + k, m & (k > 0), ~m, m ^ (i < 0)


@case(lambda r, n: (r.f32(n, 4), r.f64(n, 4), r.ints(1, 9, n, 4, dtype=np.int32)),
      varying=("x", "y", "i"))
def float_int_mixes(x, y, i):
    return x + y, x / i, y * i, i / i, x - i


@case(lambda r, n: (r.f32(n, 5),), varying=("x",))
def comparisons_and_where(x):
    c = (x > 0) | (x < -1.0)
    return c, x >= 0.5, x == x, np.where(c, x, 0.0), np.where(x > 0, 1, -1)


@case(lambda r, n: (r.f32(n, 6) * 3,), varying=("x",))
def numpy_math_unary(x):
    return (np.abs(x), abs(x), np.sqrt(np.abs(x)), np.tanh(x), np.exp(x),
            np.log(np.abs(x) + 1.0), np.floor(x), np.sin(x))


@case(lambda r, n: (r.f32(n, 6), r.f32(6), 0.5), varying=("x",))
def numpy_math_binary(x, y, lo):
    return (np.maximum(x, y), np.minimum(x, 0.0), np.clip(x, -lo, lo),
            np.maximum(x, 0), np.clip(x, y - 1.0, y + 1.0))


@case(lambda r, n: (r.f64(n, 3, 4), r.f64(4)), varying=("x",))
def float64_chain(x, b):
    return np.tanh(x * b + 1.5) - x ** 2


@case(lambda r, n: (r.f32(n, 4) * 100,), varying=("x",))
def astype_kinds(x):
    return (x.astype(np.int32), x.astype(np.float64), (x > 0).astype(np.float32),
            x.astype(np.int32).astype(np.float32) / 2, x.astype("float64"))


@case(lambda r, n: (r.ints(0, 255, n, 4, dtype=np.int64),), varying=("k",))
def uint8_wraps(k):
    u = k.astype(np.uint8)
    return u + 250, u * 3, u - 1


@case(lambda r, n: (r.ints(-20, 20, n, 5, dtype=np.int32), r.ints(1, 4, n, 5, dtype=np.int64)),
      varying=("a", "s"))
def integer_ops_floor_division_shifts(a, s):
    return a // -3, a % -3, a << 2, a >> 1, a << s, a ** 3, a & 6, a | s, a ^ -1, -a // s


@case(lambda r, n: (r.ints(-9, 9, n, 6, dtype=np.int32), r.ints(-2, 3, n, 6, dtype=np.int32)),
      varying=("a", "z"))
def integer_array_division_by_zero_is_numpys(a, z):
    # NumPy arrays: 0 and a RuntimeWarning, not a ZeroDivisionError (that is for numbers)
    return a // z, a % z, np.fmod(a, z), a / z


@case(lambda r, n: (r.bools(n, 4), r.f32(n, 4), r.ints(-5, 5, n, 4, dtype=np.int32)),
      varying=("m", "x", "k"))
def bool_arithmetic_and_where_promotion(m, x, k):
    return (m + m, m * True, m * m, np.where(m, k, x), np.where(m, 1.5, k),
            np.maximum(k, x), np.minimum(m, k), m.astype(np.int8) - 2)


def _dtype_zoo(r, n):
    return (r.ints(-100, 100, n, 5, dtype=np.int8), r.ints(0, 200, n, 5, dtype=np.uint8),
            r.ints(-9, 9, n, 5, dtype=np.int16), r.ints(0, 2**40, n, 5, dtype=np.uint64),
            r.ints(-2**40, 2**40, n, 5, dtype=np.int64), r.f32(n, 5), np.float64(0.25))


@case(_dtype_zoo, varying=("a", "b", "c", "u", "i", "x"))
def fused_chains_over_many_dtypes(a, b, c, u, i, x, d):
    return (a + b, a * c - b, np.where(a > 0, a, b), u + i, u > i, u == i, (a + b) * x,
            np.maximum(a, b) + c, np.minimum(u, 5), x * d + a, -b, abs(a), (x > 0) + a,
            np.where(x > 0, u, i), b // 7, c % 4, a.astype(np.float32) * x - d,
            (a ^ c) & b, ~b, u.astype(np.float32) + 1, np.sqrt(np.abs(x)) * c)


@case(lambda r, n: (r.f32(n), r.f32(n, 4), r.f32(4)), varying=("s", "x"))
def where_with_per_lane_scalar_condition(s, x, u):
    return np.where(s > 0, x, u), np.where(x > s, s, u), np.where(s > 0.5, 1.0, x)


def _special_make(r, n):
    x = r.f32(n, 8)
    vals = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-39, -3.5, 2.0], np.float32)
    for i in range(n):
        x[i] = np.roll(vals, i)
    return (x,)


@case(_special_make, varying=("x",))
def special_float_values(x):
    return (np.maximum(x, 0.0), np.minimum(x, -0.0), np.clip(x, -1.0, 1.0), abs(x), -x,
            np.sqrt(x), x * 0.0, 1.0 / x, x > 0, x == x, x != x, np.isnan(x), np.isinf(x),
            np.where(x < 1.0, x, 7.0), np.floor(x), x * np.float32(1e-3), x.max(), x.min(),
            x.argmax(), x.argmin(), np.maximum(x, x[::-1]), x.sum(), x + 1e-45)


@case(lambda r, n: (r.ints(-2**31, 2**31, n, 6, dtype=np.int32),
                    r.ints(0, 2**32, n, 6, dtype=np.uint32)), varying=("a", "u"))
def integer_overflow_wraps(a, u):
    return a * 100000, a + 2**30, -a, abs(a), u - 5, u * u, a.astype(np.int16), u + a


def _casts_make(r, n):
    base = np.array([2**53 + 1, 2**40 + 2**16 + 1, 2**24 + 1, 2**63 - 1, 3, 2**62 + 2**38 + 1],
                    dtype=np.int64)
    i = np.stack([np.roll(base, k) for k in range(n)])
    x = _special_make(r, n)[0]
    return i, i.astype(np.uint64) * np.uint64(2) + np.uint64(1), x


@case(_casts_make, varying=("i", "u", "x"))
def casts_with_rounding_and_specials(i, u, x):
    return (i.astype(np.float32), u.astype(np.float32), i.astype(np.float64), u.astype(np.float64),
            x.astype(np.bool_), x != 0, np.where(i, x[:6], -x[:6]), i.astype(np.int32),
            u.astype(np.int64), (i.astype(np.float32) + 1.0).astype(np.float64),
            x.astype(np.float64) * 3.0, i.astype(np.uint8), u.astype(np.int16))


@case(lambda r, n: (r.f32(n, 6) * 5, r.f64(n, 6) * 5), varying=("x", "y"))
def float_floor_division_and_mod(x, y):
    return x // 2.0, x % 2.0, y % -1.5, y // -1.5, x % y


@case(lambda r, n: (r.f32(n, 7), r.f32(7)), varying=("x",))
def overlapping_fused_assignments(x, u):
    y = x.copy()
    y[1:] = y[:-1] + 1.0
    z = x.copy()
    z[::-1] = z * 2.0 + u
    w = x.copy()
    w[1:] += w[:-1]
    v = x.copy()
    v[:4] = v[3:] * v[3:]
    return y, z, w, v


@case(lambda r, n: (r.f32(n, 3, 3),), varying=("x",))
def transpose_overlap_assignment(x):
    m = x.copy()
    m[:] = m.T * 1.0
    p = x.copy()
    p += p.T
    return m, p


@case(lambda r, n: (r.f32(n, 3), r.f32(n, 1, 1), r.f32(1)), varying=("x", "y"))
def chains_over_size_one_axes(x, y, u):
    return (x[:1] * 2.0, y + 1.0, x[2:] - u, (x.reshape(3, 1) + y[0]) * x[:1], y * u,
            np.where(y > 0, y, 0.0), x[::-1][:1] - y[0, 0])


@case(lambda r, n: (r.f32(n, 4, 6), r.f32(6), r.f32(4, 1)), varying=("x",))
def strided_broadcast_chains(x, u, c):
    return (x[::-1, ::2] * u[::2] + c[::-1], x.T[::-2] - c.T, (x[:, ::-1] + u) * 0.5 - x,
            np.maximum(x[1:3, 1:5], u[2:]))


UNARY_UFUNCS = ("negative", "positive", "absolute", "fabs", "sign", "square", "reciprocal",
                "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
                "arcsinh", "arctanh", "floor", "ceil", "trunc", "rint", "isnan", "isinf",
                "isfinite", "signbit", "logical_not", "deg2rad", "rad2deg", "degrees",
                "radians", "spacing")
BINARY_UFUNCS = ("add", "subtract", "multiply", "divide", "true_divide", "floor_divide",
                 "power", "mod", "remainder", "fmod", "maximum", "minimum", "fmax", "fmin",
                 "arctan2", "hypot", "copysign", "logaddexp", "logaddexp2", "greater",
                 "less_equal", "equal", "not_equal", "logical_and", "logical_or",
                 "logical_xor", "nextafter", "greater_equal", "less", "heaviside",
                 "float_power", "logaddexp2")


def _ufunc_case(name, arity):
    uf = getattr(np, name)
    if arity == 1:
        def fn(x, y):
            return uf(x * 0.5)
    else:
        def fn(x, y):
            return uf(x, y), uf(y, 1.5)
    CASES.append(Case(f"ufunc_{name}", fn,
                      lambda r, n: (np.abs(r.f32(n, 5)) + 0.1, r.f32(n, 5) * 2),
                      ("x", "y")))


for _name in UNARY_UFUNCS:
    _ufunc_case(_name, 1)
for _name in BINARY_UFUNCS:
    _ufunc_case(_name, 2)


@case(lambda r, n: (r.ints(-50, 50, n, 5, dtype=np.int32), r.ints(1, 5, n, 5, dtype=np.int64)),
      varying=("a", "s"))
def integer_ufuncs_by_name(a, s):
    return (np.bitwise_and(a, s), np.bitwise_or(a, 3), np.bitwise_xor(a, s), np.invert(a),
            np.left_shift(a, s), np.right_shift(a, 1), np.floor_divide(a, s), np.remainder(a, s),
            np.gcd(a, s), np.lcm(a, 6), np.fmod(a, s), np.bitwise_not(s))


# ---------------------------------------------------------------------------
# broadcasting between per-lane and uniform arrays


@case(lambda r, n: (r.f32(n, 3, 4), r.f32(4), r.f32(3, 1)), varying=("x",))
def broadcast_lower_rank_uniform(x, b, c):
    return x + b, x * c, b - x


@case(lambda r, n: (r.f32(n, 4), r.f32(2, 3, 4)), varying=("v",))
def broadcast_higher_rank_uniform(v, M):
    return M * v, v + M[0]


@case(lambda r, n: (r.f32(n, 3, 1), r.f32(1, 4), r.f32(n, 2, 1, 4)), varying=("col", "y"),
      uniform=(False, False, True))
def broadcast_both_sides(col, row, y):
    return col + row, col * y, (y - col).shape


@case(lambda r, n: (r.f32(n), r.f32(5), r.f32(n, 5)), varying=("s", "x"))
def per_lane_scalar_times_uniform_array(s, u, x):
    return s * u, u + s * x, x - s


@case(lambda r, n: (r.f32(3, 4), np.float32(2.0)), uniform=True, tol=True)
def uniform_only_stays_uniform(W, f):
    return W * f + 1.0, W.sum(axis=0), W.T @ W[:, 0], W.sum(), W[1, 2], W.shape[0] * 2


# ---------------------------------------------------------------------------
# indexing and slicing


@case(lambda r, n: (r.f32(n, 7),), varying=("x",))
def slices_steps_negative(x):
    return (x[-1], x[1:-1], x[::2], x[::-1], x[5:1:-1], x[-2::-2], x[:100],
            x[-100:2], x[3:3], x[1::3])


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("m",))
def slices_2d(m):
    return m[1:, ::-1], m[:, 0], m[-1], m[1], m[::2, 1:3], m[-1, -1], m[:, -2:]


@case(lambda r, n: (r.f32(n, 2, 3, 4),), varying=("a",), uniform=(False, False, False, True))
def ellipsis_and_newaxis(a):
    return a[..., 1], a[:, None, 1], a[0, ..., ::-1], a[None].shape


@case(lambda r, n: (r.f32(n, 6), r.ints(-6, 6, n)), varying=("x", "i"))
def varying_index_of_per_lane_array(x, i):
    return x[i], x[-i - 1] * 2.0


@case(lambda r, n: (r.f32(n, 4, 3), r.ints(-4, 4, n)), varying=("m", "i"))
def varying_row_of_per_lane_matrix(m, i):
    return m[i], m[i, 1:], m[:, i % 3]


@case(lambda r, n: (r.f32(n, 3, 4, 5), r.ints(-3, 3, n), r.ints(-5, 5, n)), varying=("a", "i", "j"))
def varying_indices_mixed_with_slices(a, i, j):
    return (a[i, ::-1], a[::2, 1, j], a[i, ..., j], a[None, i, 2:], a[-1, :, j][::-2],
            a[i][:, j], a[1:, i % 4], a[i, j % 4, j])


@case(lambda r, n: (r.f32(n, 3, 4), r.ints(-3, 3, n), r.ints(-4, 4, n), r.f32(n, 4), r.f32(n, 3)),
      varying=("a", "i", "j", "v", "c"))
def varying_index_stores_with_slices(a, i, j, v, c):
    m = a.copy()
    m[i, 1:] = v[:3]
    m[:, j] = c
    m[i] += 1.0
    m[i, ::-1] *= v
    if v[0] > 0:
        m[-i - 1, j] = -9.0
        m[::2, j] += 100.0
    return m


def _shared_slices_ref(args, n):
    out, col, h = args
    out[:, 1:3] = h[:, :2]
    col[:, :] = np.where(np.arange(n)[None, :] % 2 == 0, h[:, 2][None, :], col)
    return h.sum(axis=1)


@case(lambda r, n: (np.zeros((n, 4)), np.ones((3, n)), r.f64(n, 3)), varying=("h",),
      ref=_shared_slices_ref, tol=True)
def shared_stores_with_slices_and_columns(out, col, h):
    out[lane(), 1:3] = h[:2]
    if lane() % 2 == 0:
        col[:, lane()] = h[2]
    return h.sum()


@case(lambda r, n: (r.f32(n, 6), 4), varying=("x",))
def uniform_int_argument_bounds(x, k):
    return x[:k], x[k], x[k - 6], x[k:], x[::k]


@case(lambda r, n: (r.f32(10, 3), r.ints(0, 10, n), r.ints(-10, 0, n)), varying=("t", "u"))
def embedding_gather(E, t, u):
    return E[t], E[t] + E[u], E[t, 1], E[t][::-1], E[t, 1:]


@case(lambda r, n: (r.f32(5, 3), r.ints(-8, 8, n), r.f32(n, 4, 3)), varying=("t", "m"))
def masked_off_lanes_never_index_out_of_bounds(E, t, m):
    e = np.zeros(3, dtype=np.float32)
    row = np.ones(3, dtype=np.float32)
    if 0 <= t < 5:
        e = E[t] * 2.0
    if t >= 0 and t < 4:
        m[t, 0] = -1.0
        row = m[t]                # a varying index gathers: a copy (SPEC 8), not a view
    ok = t < 5 and E[t].sum() > -100.0 if t >= -5 else False
    return e, row, ok


@case(lambda r, n: (r.ints(0, 4, n),), varying=("t",))
def gather_from_captured_array(t):
    return TABLE[t], TABLE[-t - 1, 2], TABLE[1] + TABLE[t]


@case(lambda r, n: (r.f32(3, 4, 5), r.f32(n, 5)), varying=("x",), tol=True,
      uniform=(False, False, False, True))
def uniform_index_views(Ws, x):
    return Ws[1] @ x, Ws[-1, 2] * x, Ws[:, 0, :].sum(axis=0) + x, Ws[2][1:3, ::2].shape


# ---------------------------------------------------------------------------
# assignment and views


@case(lambda r, n: (r.f32(n, 6),), varying=("x",))
def element_and_slice_assignment(x):
    y = x.copy()
    y[0] = 5.0
    y[-1] = y[1] * 2
    y[1:3] = 0.0
    y[::2] += 1.0
    y[4:] = x[:2]
    y[::-3] = -7
    return y


@case(lambda r, n: (r.f32(n, 3), r.f32(1, 3)), varying=("x",))
def broadcasting_stores(x, M):
    y = np.zeros((2, 3), dtype=np.float32)
    y[:] = M                      # (1, 3) into (2, 3)
    z = np.zeros(3)
    z[:] = M                      # (1, 3) into (3,): NumPy drops the leading 1
    y[0] = x[:1]                  # (1,) into (3,)
    y[1, ::2] = 5                 # a number into a strided place
    w = np.zeros((2, 3), dtype=np.float32)
    w[1:] = x.reshape(1, 1, 3)    # a per-lane value with leading 1s
    v = np.zeros(3, dtype=np.float32)
    v[:] = x.reshape(1, 3)
    return y, z, w, v


@case(lambda r, n: (r.f32(n, 3, 4), r.f32(4)), varying=("x",))
def assignment_2d(x, b):
    m = x.copy()
    m[1, :] = b
    m[:, 2] = 7
    m[0] += m[2]
    m[2, 1:3] *= 0.5
    m[-1, -1] = -1.0
    return m


@case(lambda r, n: (r.f32(n, 6), r.ints(-6, 6, n), r.f32(n)), varying=("x", "i", "v"))
def varying_index_assignment(x, i, v):
    y = x.copy()
    y[i] = v
    y[(i + 2) % 6] += 1.0
    return y


@case(lambda r, n: (r.ints(-9, 9, n, 4, dtype=np.int32), r.f64(n) * 3), varying=("k", "f"))
def assign_floats_into_int_array(k, f):
    a = k.copy()
    a[0] = 2.7
    a[1] = -1.5
    a[2] = f
    m = np.zeros(3, dtype=np.bool_)
    m[1] = 5
    return a, m


@case(lambda r, n: (r.f32(n, 6),), varying=("x",))
def writes_through_views(x):
    y = x.copy()
    v = y[1:4]
    v[:] = 9.0
    w = y[::-2]
    w[0] = -3.0
    z = y.reshape(2, 3)
    z[1, 0] = 42.0
    return y, v, z


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("x",))
def writes_through_row_and_transpose(x):
    m = x.copy()
    r = m[1]
    r[0] = 3.0
    t = m.T
    t[0, 2] = 5.0
    t[3] += 1.0
    return m


@case(lambda r, n: (r.f32(n, 5), r.f32(n, 3, 2)), varying=("x", "y"), tol=True)
def writes_land_in_varying_argument(x, y):
    x[0] = 1.0
    x[1:] *= 2.0
    y[:, 1] = y[:, 0]
    return x.sum()


@case(lambda r, n: (r.f32(n, 5),), varying=("x",))
def augmented_assignment_is_in_place(x):
    y = x
    y += 1.0
    x = x * 2.0      # rebinds: the caller's row is not touched by this one
    return x


@case(lambda r, n: (r.f32(n, 4), r.ints(-5, 5, n, 4, dtype=np.int32), r.f32(4)),
      varying=("x", "k"))
def augmented_assignment_through_views_and_aliases(x, k, u):
    a = x.copy()
    v = a[::2]
    v *= 3.0                      # lands in a
    w = a
    w -= u                        # w is a
    k += 2                        # the caller's int32 row
    m = k.astype(np.float64)
    m /= 4
    b = x > 0
    b |= k > 0
    return a, w, m, b


@case(lambda r, n: (r.f32(n, 6),), varying=("x",))
def overlapping_self_assignment(x):
    y = x.copy()
    y[1:] = y[:-1]
    z = x.copy()
    z[:] = z[::-1]
    return y, z


@case(lambda r, n: (r.f32(n, 4),), varying=("x",))
def astype_and_copy_are_copies(x):
    a = x.astype(np.float32)
    a[0] = 100.0
    c = x.copy()
    c[1] = -100.0
    return x + 0.0, a, c


# ---------------------------------------------------------------------------
# constructors


@case(lambda r, n: (r.f32(n, 3),), varying=("x",))
def constructors_with_dtypes(x):
    a = np.zeros(5)
    b = np.zeros((2, 3), dtype=np.int32)
    c = np.ones(3, dtype=np.float32)
    d = np.full(3, 2.5)
    e = np.full((2, 2), 7, dtype=np.int64)
    f = np.zeros_like(x)
    g = np.ones_like(x)
    h = np.arange(4)
    i = np.empty(3, dtype=np.float32)
    i[:] = x
    j = np.zeros(4, "float32")
    return (a, b, c + x, d, e, f, g, h, i, j, np.ones((2, 1), np.int8),
            np.zeros_like(x, dtype=np.int32), np.ones_like(x, dtype=np.float64),
            np.full_like(x, 3), np.arange(3, dtype=np.float32))


@case(lambda r, n: (r.f32(n, 3), r.f32(4, 2)), varying=("x",))
def constructors_from_shapes(x, W):
    a = np.zeros(W.shape[0])
    b = np.ones((len(x), W.shape[1]), dtype=np.float32)
    c = np.full(x.shape, x[0])        # a per-lane fill value
    d = np.arange(W.shape[0]) * x[1]
    return a, b, c, d


@case(lambda r, n: (r.f32(n, 3), 4), varying=("x",))
def constructors_uniform_int_size(x, k):
    a = np.zeros(k)
    a[: len(x)] = x
    return a, np.arange(k) + k, np.full(k, 1.5, dtype=np.float32)


def _per_lane_constructors_ref(args, n):
    (b,) = args
    z = np.zeros((n, 3))
    z[:, 0] = np.arange(n)
    c = np.tile(b, (n, 1))
    c[:, 1] = np.arange(n) * 2.0
    return z, c, np.arange(3)[None, :] + np.arange(n)[:, None]


@case(lambda r, n: (r.f32(3),), ref=_per_lane_constructors_ref)
def constructors_are_per_lane(b):
    z = np.zeros(3)
    z[0] = lane()
    c = b.copy()
    c[1] = lane() * 2.0
    return z, c, np.arange(3) + lane()


# ---------------------------------------------------------------------------
# reductions


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("x",), tol=True)
def float_reductions(x):
    return (x.sum(), np.sum(x), x.sum(axis=0), np.sum(x, axis=-1), x.sum(axis=(0, 1)),
            x.sum(axis=1, keepdims=True), x.mean(), np.mean(x, axis=0),
            x.mean(axis=-1, keepdims=True),
            x.prod(axis=1), np.prod(x), x.sum(keepdims=True))


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("x",))
def order_reductions_exact(x):
    return (x.max(), np.max(x, axis=0), x.min(axis=-1), np.min(x, axis=(0, 1)),
            x.max(axis=1, keepdims=True), x.argmax(), np.argmax(x, axis=0), x.argmin(axis=-1),
            np.argmin(x), x.argmax(axis=1, keepdims=True))


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("x",), tol=True)
def reductions_positional_axis(x):
    return (x.sum(0), x.max(1), np.sum(x, 1), np.min(x, 0), x.mean((0, 1)), x.argmax(-1),
            np.argmin(x, 0), x.prod(0), np.mean(x, -1), x.T.sum(0), x[::-1, 1:].max(0))


@case(lambda r, n: (r.f32(n, 2, 3, 4),), varying=("x",), tol=True)
def reductions_negative_and_mixed_axes(x):
    return (x.sum(axis=-2), x.max(axis=(-1, 0)), np.min(x, axis=(0, -2), keepdims=True),
            x.mean(axis=(-3, -1)), x.argmax(axis=-3), np.argmin(x, axis=-2, keepdims=True),
            x.prod(axis=(1, 2)), np.any(x > 1, axis=(-1, -2)), x.all(axis=-1, keepdims=True),
            x[0].sum(axis=-1) + x[1].max(axis=0)[:3])


@case(lambda r, n: (r.f32(n, 3), r.f64(n), 5), varying=("x", "s"),
      uniform=(False, True) + (False,) * 8)
def more_constructors(x, s, k):
    return (np.full_like(x, s), np.empty_like(x).shape, np.arange(2, 8, 2), np.arange(1, k),
            np.arange(k, dtype=np.float32) * x[0], np.full_like(x, 7, dtype=np.int8),
            np.zeros((k, 2), dtype=np.bool_), np.ones_like(s * x), x.T.T, x.T)


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("x",))
def bool_reductions(x):
    b = x > 0
    return (b.any(), np.any(b, axis=0), b.all(axis=-1), np.all(b), x.any(), (x > 2).any(axis=1),
            b.any(axis=(0, 1)), np.all(x > -5, axis=0, keepdims=True))


@case(lambda r, n: (r.ints(-9, 9, n, 3, 4, dtype=np.int32), r.bools(n, 5)), varying=("k", "m"))
def integer_reductions_exact(k, m):
    return (k.sum(), k.sum(axis=0), np.prod(k, axis=1), k.max(axis=-1), k.mean(),
            m.sum(), np.sum(m), k.min(), k.argmin(axis=0), k.astype(np.int8).sum())


@case(lambda r, n: (r.f32(n, 4), r.ints(-3, 3, n, 4, dtype=np.int32)), varying=("x", "k"),
      uniform=(False,) * 10 + (True, True))
def empty_and_odd_reductions(x, k):
    e = x[2:2]
    return (e.sum(), e.prod(), e.any(), e.all(), (x > 0).mean(), np.all(k), k.any(axis=0),
            x.max(axis=0, keepdims=True), x.reshape(2, 2).argmax(keepdims=True),
            x.reshape(2, 2).min(axis=(0, 1), keepdims=True), len(e), e.shape)


def _lane_ints_ref(args, n):
    k, b = args
    # in the type of x: int32 stays int32 (guide 4), bools count as int64
    return (k.sum(axis=0, dtype=k.dtype), k.prod(axis=0, dtype=k.dtype), k.min(axis=0),
            k.max(axis=0), b.sum(axis=0),
            b.any(axis=0), b.all(axis=0))


@case(lambda r, n: (r.ints(-3, 4, n, 2, 2, dtype=np.int32), r.bools(n, 3)), varying=("k", "b"),
      ref=_lane_ints_ref)
def lane_reductions_of_int_and_bool_arrays(k, b):
    return lanesum(k), laneprod(k), lanemin(k), lanemax(k), lanesum(b), laneany(b), laneall(b)


@case(lambda r, n: (r.f32(4, 3), r.f32(n, 3)), varying=("x",), tol=True,
      uniform=(False, False, True))
def reductions_of_uniform_inside_kernel(W, x):
    return W.sum(axis=0) * x, W.max() + x.sum(), W.argmax(axis=1)


# ---------------------------------------------------------------------------
# products, all rank combinations, uniform and varying on each side


def _products_make(r, n):
    return (r.f32(3), r.f32(n, 3), r.f32(2, 3), r.f32(n, 2, 3), r.f32(3, 4), r.f32(n, 3, 4))


_F, _T = False, True


@case(_products_make, varying=("v", "V", "Q"), tol=True,
      uniform=(_F, _F, _F, _T, _F, _F, _F, _T, _F, _F, _F, _T, _F, _F, _F, _T))
def matmul_1d_and_2d(u, v, U, V, P, Q):
    return (u @ v, v @ u, v @ v, u @ u,                 # 1-D @ 1-D
            U @ v, V @ u, V @ v, U @ u,                 # 2-D @ 1-D
            v @ P, u @ Q, v @ Q, u @ P,                 # 1-D @ 2-D
            U @ Q, V @ P, V @ Q, U @ P)                 # 2-D @ 2-D


@case(_products_make, varying=("v", "V", "Q"), tol=True)
def dot_and_matmul_functions(u, v, U, V, P, Q):
    return (np.dot(u, v), np.dot(V, v), np.dot(v, P), np.dot(V, Q), np.dot(U, Q),
            np.matmul(U, v), np.matmul(v, Q), np.matmul(V, P), np.matmul(u, v))


@case(lambda r, n: (r.f32(3), r.f32(n, 4), r.f64(n, 2)), varying=("x", "y"), tol=True)
def outer_products(u, x, y):
    return np.outer(x, u), np.outer(u, x), np.outer(x, x), np.outer(y, x)


@case(lambda r, n: (r.ints(-5, 5, 3, 4, dtype=np.int32), r.ints(-5, 5, n, 4, dtype=np.int32),
                    r.ints(-5, 5, n, 4, 2, dtype=np.int64)), varying=("v", "B"))
def integer_products_exact(A, v, B):
    return A @ v, v @ B, A @ B, np.dot(v, v), np.outer(v, v)


@case(lambda r, n: (r.f32(n, 3, 4), r.f64(4), r.f32(n, 4)), varying=("x", "y"), tol=True)
def products_mixed_dtypes_and_transposes(x, w, y):
    return x @ w, x.T @ x, x @ y, y @ x.T, (x @ x.T).T


# ---------------------------------------------------------------------------
# shapes, reshapes, concatenate, stack, iteration


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("x",), uniform=True)
def shape_queries(x):
    return x.shape, x.ndim, x.size, len(x), x.T.shape, x[0].shape, len(x[0])


@case(lambda r, n: (r.f32(n, 3, 4),), varying=("x",))
def reshapes(x):
    return (x.T, x.reshape(2, -1), x.reshape(-1), x.reshape((4, 3)), x.T.reshape(-1),
            x.reshape(3, 2, 2)[1], x[0].T, x.reshape(-1, 6).T, x.reshape(12, 1)[::5])


@case(lambda r, n: (r.f32(n, 2, 3), r.f32(n, 2, 2), r.f32(2, 3)), varying=("a", "b"))
def concatenate_axes(a, b, u):
    return (np.concatenate((a, b), axis=1), np.concatenate((a, u)), np.concatenate([u, a], axis=0),
            np.concatenate((a[0], b[1], u[0])), np.concatenate((a, b), axis=-1),
            np.concatenate((a, b.T, u), axis=None))


@case(lambda r, n: (r.f32(n, 3), r.f32(n, 3), r.f32(3)), varying=("a", "b"))
def stack_axes(a, b, u):
    return (np.stack((a, b)), np.stack([a, u, b], axis=1), np.stack((u, a), axis=-1),
            np.stack((a.astype(np.float64), b)))


@case(lambda r, n: (r.f32(n, 4, 3),), varying=("a",))
def for_row_in_per_lane_array(a):
    acc = np.zeros(a.shape[1], dtype=np.float32)
    best = -1.0
    for row in a:
        acc += row * row
        best = max(best, float(row[0]))
    return acc, best


@case(lambda r, n: (r.small(n, 5, 3),), varying=("a",))
def for_row_with_varying_break(a):
    acc = np.zeros(3, dtype=np.float32)
    count = 0
    for row in a:
        if row.sum() > 2:
            break
        acc = acc + row
        count += 1
    return acc, count


@case(lambda r, n: (r.small(5, 3), r.small(n, 3)), varying=("x",))
def for_row_in_uniform_array_with_break(W, x):
    last = W[0]
    k = 0
    for row in W:
        last = row
        if (row * x).sum() > 2:
            break
        k += 1
    return last, k, last * x


@case(lambda r, n: (r.f32(4, 3), r.f32(n, 3)), varying=("x",), tol=True)
def for_row_in_uniform_array(W, x):
    s = np.zeros(3, dtype=np.float32)
    for w in W:
        s = s + w * x.sum()
    return s


# ---------------------------------------------------------------------------
# uniform views in loops, gathers, shared stores


def _early_exit_make(r, n):
    return (r.small(n, 4), r.small(5, 4, 4), r.small(5, 4), 6.0)


@case(_early_exit_make, varying=("x",), tol=True)
def early_exit_uniform_layer_views(x, Ws, bs, thr):
    h = x
    depth = 0
    for layer in range(Ws.shape[0]):
        h = np.maximum(Ws[layer] @ h + bs[layer], 0.0)
        depth = layer + 1
        if h.max() > thr:
            break
    return h, depth


def _shared_store_make(r, n):
    return (np.zeros((n, 3), np.float32), np.full((n, 3), -1.0, np.float32),
            r.f32(n, 3), r.f32(n, 3))


def _shared_store_ref(args, n):
    out, out2, h, x = args
    y = h * 2.0 + x
    out[:] = y
    out2[:] = h
    out2[:, 0] = y[:, 2]


@case(_shared_store_make, varying=("h", "x"), ref=_shared_store_ref)
def shared_store_of_per_lane_array(out, out2, h, x):
    y = h * 2.0 + x
    out[lane()] = y
    out2[lane(), :] = h
    out2[lane(), 0] = y[2]


def _shared_store_if_ref(args, n):
    out, x = args
    c = x[:, 0] > 0
    for i in range(n):
        if c[i]:
            out[i] = np.tanh(x[i])
        else:
            out[i, 1:] = x[i, :-1]
    return c


@case(lambda r, n: (np.zeros((n, 4), np.float64), r.f64(n, 4)), varying=("x",),
      ref=_shared_store_if_ref)
def shared_store_under_varying_if(out, x):
    if x[0] > 0:
        out[lane()] = np.tanh(x)
    else:
        out[lane(), 1:] = x[:-1]
    return x[0] > 0


# ---------------------------------------------------------------------------
# cross-lane intrinsics on arrays


def _lanesum_outer_ref(args, n):
    d, x = args
    return (sum(np.outer(d[i], x[i]) for i in range(n)) / np.float32(n),
            x.max(axis=0), d.min(axis=0))


@case(lambda r, n: (r.f32(n, 3), r.f32(n, 4)), varying=("d", "x"), tol=True, ref=_lanesum_outer_ref)
def lanesum_of_outer_is_uniform(d, x):
    return lanesum(np.outer(d, x)) / nlanes(), lanemax(x), lanemin(d)


def _outer_masked_ref(args, n):
    d, x = args
    act = d[:, 0] > 0
    g = sum((np.outer(d[i], x[i]) for i in range(n) if act[i]), np.zeros((3, 4), np.float32))
    out = np.zeros((n, 3, 4), np.float32)
    out[act] = g
    return out, np.float32(act.sum())


@case(lambda r, n: (np.abs(r.f32(n, 3)) * np.where(np.arange(n) % 3 == 1, -1, 1)[:, None]
                    .astype(np.float32), r.f32(n, 4)), varying=("d", "x"), tol=True,
      ref=_outer_masked_ref, uniform=(False, True))
def lanesum_of_outer_under_mask(d, x):
    g = np.zeros((3, 4), dtype=np.float32)
    if d[0] > 0:
        g = lanesum(np.outer(d, x))
    return g, lanesum(np.float32(1.0) if d[0] > 0 else np.float32(0.0))


def _lane_masked_make(r, n):
    x = r.f32(n, 4)
    x[0, 0] = 1.0                      # lane 0 always takes the branch
    return (x,)


def _lane_masked_ref(args, n):
    (x,) = args
    act = x[:, 0] > 0
    xa = x[act]
    val = xa.sum(axis=0) + xa.max(axis=0) * np.float32(2.0) - xa.min(axis=0)
    r = np.zeros_like(x)
    r[act] = val
    return r


@case(_lane_masked_make, varying=("x",), tol=True, ref=_lane_masked_ref)
def lane_reductions_under_mask(x):
    r = np.zeros_like(x)
    if x[0] > 0:
        r = lanesum(x) + lanemax(x) * 2.0 - lanemin(x)
    return r


def _xlane_make(r, n):
    x = r.f32(n, 3)
    return (x, r.ints(0, n, n))


def _xlane_ref(args, n):
    x, idx = args
    ex = np.cumsum(x, axis=0) - x
    return (ex, x[idx], x[(np.arange(n) + 1) % n], np.broadcast_to(x[n - 1], (3,)),
            (x > 0).any(axis=0), (x > -1).all(axis=0))


@case(_xlane_make, varying=("x", "idx"), tol=True, ref=_xlane_ref)
def cross_lane_array_intrinsics(x, idx):
    return (prefixsum(x), shuffle(x, idx), rotate(x, 1), broadcast(x, nlanes() - 1),
            laneany(x > 0), laneall(x > -1))


def _lane_loop_ref(args, n):
    x, m = args
    h = np.zeros_like(x)
    for t in range(int(m.max(initial=0))):
        act = m > t
        s = x[act].sum(axis=0)
        h[act] = h[act] * np.float32(0.5) + s
    return h


@case(lambda r, n: (r.f32(n, 3), r.ints(0, 4, n)), varying=("x", "m"), tol=True,
      ref=_lane_loop_ref)
def lanesum_in_loop_with_varying_trips(x, m):
    h = np.zeros_like(x)
    for _ in range(m):
        h = h * 0.5 + lanesum(x)
    return h


def _neighbour_ref(args, n):
    out, x = args
    out[:] = x * np.float32(2.0)
    return out[(np.arange(n) + 1) % n] + x


@case(lambda r, n: (np.zeros((n, 3), np.float32), r.f32(n, 3)), varying=("x",),
      ref=_neighbour_ref)
def shared_store_read_back_by_neighbour(out, x):
    out[lane()] = x * 2.0
    return out[(lane() + 1) % nlanes()] + x


def _whole_read_ref(args, n):
    out, x = args
    act = x[:, 0] > 0
    out[act] = x[act] * np.float32(3.0)
    total = out.sum(axis=0)
    # np.ones makes a per-lane array: the product is per lane too
    return np.broadcast_to(total, (n, 3)) + x, np.tile(out @ np.ones(3, np.float32), (n, 1))


@case(lambda r, n: (np.zeros((n, 3), np.float32), r.f32(n, 3)), varying=("x",), tol=True,
      ref=_whole_read_ref)
def shared_array_read_whole_after_per_lane_stores(out, x):
    if x[0] > 0:
        out[lane()] = x * 3.0
    total = out.sum(axis=0)       # every lane sees every lane's store
    return total + x, out @ np.ones(3, dtype=np.float32)


def _permuted_store_ref(args, n):
    out, W, x = args
    out[(np.arange(n) + 1) % n] += x
    W[1, : min(n, 4)] = np.arange(min(n, 4))
    return x


@case(lambda r, n: (np.ones((n, 2), np.float64), np.zeros((3, 4)), r.f64(n, 2)),
      varying=("x",), ref=_permuted_store_ref)
def stores_into_other_lanes_rows_and_uniform_views(out, W, x):
    out[(lane() + 1) % nlanes()] += x
    row = W[1]
    if lane() < 4:
        row[lane()] = lane()
    return x


# ---------------------------------------------------------------------------
# hydra.nn


@case(lambda r, n: (r.f32(n, 5) * 3, r.f32(n, 2, 4) * 3), varying=("x", "m"), tol=True)
def nn_activations(x, m):
    return (nn.relu(x), nn.sigmoid(x), nn.softmax(x), nn.log_softmax(x),
            nn.softmax(m), nn.log_softmax(m), nn.relu(m))


@case(lambda r, n: (r.f32(n, 2, 6, 6), r.f32(3, 2, 3, 3), r.f32(3)), varying=("x",), tol=True)
def nn_conv2d_variants(x, w, b):
    return (nn.conv2d(x, w), nn.conv2d(x, w, b), nn.conv2d(x, w, b, stride=2),
            nn.conv2d(x, w, None, 1, 1), nn.conv2d(x, w, b=b, stride=2, padding=1))


@case(lambda r, n: (r.f32(n, 1, 5, 5), r.f32(4, 1, 2, 2)), varying=("x",), tol=True)
def nn_conv2d_one_channel(x, w):
    return nn.relu(nn.conv2d(x, w, padding=1))


@case(lambda r, n: (r.f32(n, 2, 7, 7),), varying=("x",))
def nn_max_pool2d_variants(x):
    return (nn.max_pool2d(x, 2), nn.max_pool2d(x, 2, stride=1), nn.max_pool2d(x, 3, 2),
            nn.max_pool2d(x, 2, stride=3), nn.max_pool2d(x, k=1), nn.max_pool2d(x[:, 1:, :4], 3))


@case(lambda r, n: (r.f32(2, 5, 5), r.f32(3, 2, 2, 2), r.f32(n, 3)), varying=("s",), tol=True,
      uniform=(True, True, True, False))
def nn_layers_on_uniform_inputs(img, w, s):
    y = nn.conv2d(img, w, stride=2)
    return y, nn.max_pool2d(img, 2), nn.softmax(img[0]), nn.softmax(s) + y.sum()


@case(lambda r, n: (r.f64(n), r.f64(n), r.f32(n, 2)), varying=("a", "b", "x"))
def stack_of_per_lane_numbers(a, b, x):
    v = np.stack((a, b, a * b))
    return v, np.concatenate((x, v[:2].astype(np.float32))), np.where(a > b, a, x)


# ---------------------------------------------------------------------------
# control flow


def _layer(W, x, b=0.0):
    return np.tanh(W @ x + b)


def _clipped_or_scaled(v, lim):
    if v.max() > lim:
        return np.clip(v, -lim, lim)
    for i in range(len(v)):
        if v[i] < -lim:
            return v * 0.5
    return v.copy()


@case(lambda r, n: (r.f32(n, 4) * 2, r.f32(n, 4)), varying=("x", "y"))
def helper_with_early_returns_of_arrays(x, y):
    a = _clipped_or_scaled(x, 1.0)
    b = _clipped_or_scaled(y, 0.5) if y[0] > 0 else _clipped_or_scaled(-y, 2.0)
    a[0] = 9.0                    # a is a new array on every path: x stays
    return a, b, x


@case(lambda r, n: (r.f32(n, 3), r.f32(4, 3), r.f32(2, 4), r.f32(2)), varying=("x",), tol=True)
def helpers_with_arrays(x, W1, W2, b2):
    return _layer(W2, _layer(W1, x), b2)


@case(lambda r, n: (r.f32(n, 4), r.f32(4)), varying=("x",))
def varying_if_else_on_arrays(x, b):
    if x[0] > 0:
        y = x + b
        z = y * 2.0
    elif x[1] > 0:
        y = x * b
        z = -y
    else:
        y = b - x
        z = y
    return y, z


@case(lambda r, n: (r.small(n, 4), 40.0), varying=("x",))
def while_varying_condition(x, limit):
    h = x.copy()
    steps = 0
    while np.abs(h).sum() < limit:
        h = h * 2.0 + 0.5
        steps += 1
        if h[0] > 100.0:
            break
    return h, steps


@case(lambda r, n: (r.ints(0, 6, n), r.f32(n, 6)), varying=("k", "x"))
def element_assignment_under_varying_while(k, x):
    y = np.zeros(6, dtype=np.float32)
    j = 0
    while j < k:
        y[j] = x[j] * 2.0
        y[5 - j] += 0.5
        j += 1
    return y


@case(lambda r, n: (r.f32(n, 4), r.f32(3, 4)), varying=("x",))
def conditional_expressions_and_continue(x, W):
    y = x * 2.0 if x[0] > 0 else W[1]
    z = W[0] if x[1] > 0 else W[2]
    acc = np.zeros(4, dtype=np.float32)
    for i in range(4):
        if x[i] < 0:
            continue
        acc[i] = x[i]
        acc[::2] += 1.0
    return y, z, acc


@case(lambda r, n: (np.abs(r.f32(n, 3)) + 0.5, r.f32(3, 3)), varying=("x",))
def varying_if_every_lane_takes_one_arm(x, W):
    if x[0] > 0:                  # true on every lane: the else arm never runs
        z = W[0]
        y = W[1] * 2.0
    else:
        z = W[2]
        y = x
    return z, y, W[0] if x[1] < 0 else W[1]


@case(lambda r, n: (r.f32(n, 4),), varying=("x",))
def slice_assignment_under_varying_if(x):
    y = x.copy()
    if x[0] > 0:
        y[1:] = -1.0
    else:
        y[::2] = y[1::2]
    return y


@case(lambda r, n: (r.f32(n, 4),), varying=("x",))
def early_return_of_arrays(x):
    if x[0] > 0:
        return x * 2.0
    for i in range(3):
        if x[i + 1] > 1.0:
            return x[::-1].copy()
    return -x


@case(lambda r, n: (r.f32(n, 3), r.ints(0, 4, n)), varying=("x", "t"))
def varying_for_bounds_with_arrays(x, t):
    acc = x.copy()
    for i in range(t):
        acc = acc * 0.5 + x[i % 3]
    return acc


def _rnn_make(r, n):
    T, D, H = 6, 3, 4
    return (r.f32(n, T, D), r.ints(0, T + 1, n), r.f32(H, D) * 0.5, r.f32(H, H) * 0.5, r.f32(H))


@case(_rnn_make, varying=("xs", "length"), tol=True)
def rnn_ragged_padded(xs, length, Wx, Wh, b):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    for t in range(length):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
    return h, h.argmax()


def _rnn_store_make(r, n):
    T, D, H = 5, 3, 4
    return (np.zeros((n, T), np.float32), r.f32(n, T, D), r.ints(0, T + 1, n),
            r.f32(H, D) * 0.5, r.f32(H, H) * 0.5)


def _rnn_store_ref(args, n):
    out, xs, length, Wx, Wh = args
    hs = []
    for i in range(n):
        h = np.zeros(Wh.shape[0], dtype=np.float32)
        for t in range(length[i]):
            h = np.tanh(Wx @ xs[i, t] + Wh @ h)
            out[i, t] = h.sum() + i
        hs.append(h)
    return np.stack(hs)


@case(_rnn_store_make, varying=("xs", "length"), tol=True, ref=_rnn_store_ref)
def rnn_storing_each_step(out, xs, length, Wx, Wh):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    for t in range(length):
        h = np.tanh(Wx @ xs[t] + Wh @ h)
        out[lane(), t] = h.sum() + lane()
    return h


def _compact_xlane_ref(args, n):
    x, W, k = args
    h = x.copy()
    steps = np.zeros(n, np.int64)
    active = np.ones(n, bool)
    total = np.zeros(n, np.float32)
    for _ in range(4):
        if not active.any():
            break
        hn = h[active] @ W.T
        h[active] = hn
        s = hn.sum(axis=0)
        total[active] += s.sum()
        steps[active] += 1
        active &= steps < k
    return h, total, steps


@case(lambda r, n: (r.small(n, 3), r.small(3, 3) * 0.5, r.ints(1, 5, n)), varying=("x", "k"),
      tol=True, ref=_compact_xlane_ref)
def lanesum_inside_loop_with_heavy_op(x, W, k):
    h = x.copy()
    steps = 0
    total = np.float32(0.0)
    while steps < 4:
        h = W @ h
        total += lanesum(h).sum()
        steps += 1
        if steps >= k:
            break
    return h, total, steps


@case(lambda r, n: (r.f32(n, 3), r.f32(3, 3), r.ints(0, 4, n)), varying=("x", "k"), tol=True)
def early_return_inside_loop_with_heavy_op(x, W, k):
    h = x
    for t in range(4):
        h = np.tanh(W @ h)
        if t == k:
            return h * 2.0, t
    return h, -1


@case(lambda r, n: (r.f32(n, 3), r.f32(2, 3, 3), r.ints(1, 4, n)), varying=("x", "m"), tol=True)
def nested_loops_uniform_inside_varying(x, Ws, m):
    h = x.copy()
    for t in range(m):
        for layer in range(2):
            h = np.maximum(Ws[layer] @ h, 0.0) + np.float32(t) * 0.1
    return h


@case(lambda r, n: (r.small(n, 3), r.small(3, 3) * 0.5, r.ints(0, 5, n)), varying=("x", "m"),
      tol=True)
def augmented_assignment_in_loops_with_heavy_ops(x, W, m):
    h = x.copy()
    g = np.zeros(3, dtype=np.float32)
    for t in range(m):
        if t > 0:
            h += 1.0
        h = W @ h
        h *= 0.5
        g += h
    x += g                        # lands in the caller's row
    return h, g


@case(lambda r, n: (r.f32(n, 5), r.ints(0, 5, n)), varying=("x", "m"))
def ragged_sum_with_varying_length(x, m):
    acc = np.float32(0.0)
    out = np.zeros_like(x)
    for i in range(m):
        acc += x[i]
        out[i] = acc
    return acc, out


@case(lambda r, n: (r.small(n, 4), r.small(4, 4), 8), varying=("x",), tol=True)
def heavy_product_under_partial_mask(x, W, cap):
    y = x.copy()
    if x[0] > 1:
        y = W @ x
    elif x[1] > 1:
        y = W.T @ (x * 2.0)
    k = 0
    while np.abs(y).max() < cap and k < 4:
        y = W @ y + 1.0
        k += 1
    return y, k


@case(lambda r, n: (r.f32(n, 3), r.f32(2, 3)), varying=("x",))
def computed_arrays_written_are_each_lanes_own(x, W):
    s = W.sum(axis=0)
    s[0] = x[0]                 # a varying value
    t = W * 2.0
    if x[1] > 0:
        t[1, :] = 7.0           # a uniform value under a varying mask
    v = (W + 1.0).T
    row = v[2]
    row[1] = x[2]               # through views of the temporary
    u = W[0] + W[1]
    u[2] = 4.0                  # uniform everywhere: the same on every lane
    e = np.exp(W[1])            # an operation that does not fuse
    e[0] = x[1]
    return s, t, v, u, e


@case(lambda r, n: (r.f32(n, 4),), varying=("x",))
def alias_of_argument_written(x):
    h = x
    h[0] = 5.0
    return h * 1.0


# ---------------------------------------------------------------------------
# the cases, on both backends and at several lane counts


@pytest.mark.parametrize("n", LANES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("c", CASES, ids=repr)
def test_case(c, backend, n):
    run_case(c, backend, n)


#: cases also run with more lanes than a gang or a vector holds, and a ragged last one
MANY = ("fused_chains_over_many_dtypes", "special_float_values", "strided_broadcast_chains",
        "overlapping_fused_assignments", "rnn_ragged_padded", "early_exit_uniform_layer_views",
        "varying_index_stores_with_slices", "computed_arrays_written_are_each_lanes_own",
        "lane_reductions_under_mask", "casts_with_rounding_and_specials")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MANY)
def test_case_with_many_lanes(name, backend):
    (c,) = [c for c in CASES if c.name == name]
    run_case(c, backend, 67)


# ---------------------------------------------------------------------------
# errors


def shape_mismatch_add(x, b):
    return x + b


def shape_mismatch_matmul(W, x):
    return W @ x


def shape_mismatch_concat(a, b):
    return np.concatenate((a, b))


def shape_mismatch_stack(a, b):
    return np.stack((a, b))


def shape_mismatch_slice_store(x, b):
    y = x.copy()
    y[0:2] = b
    return y


def shape_mismatch_store_broadcast(x, b):
    y = x.copy()
    y[1:2] = b                    # (3,) does not go into (1,), though they broadcast
    return y


def shape_mismatch_store_rank(x, M):
    y = x.copy()
    y[:] = M                      # (2, 3) into (3,)
    return y


def shape_mismatch_elementwise_2d(a, b):
    return a * b


def shape_mismatch_where(c, a, b):
    return np.where(c > 0, a, b)


def shape_mismatch_reshape(x):
    return x.reshape(3, 3)


def shape_mismatch_shared_store(out, h):
    out[lane()] = h


SHAPE_ERRORS = [
    (shape_mismatch_add, lambda n: (np.ones((n, 4), np.float32), np.ones(3, np.float32)),
     ("x",), ("(4,)", "(3,)")),
    (shape_mismatch_matmul, lambda n: (np.ones((2, 5), np.float32), np.ones((n, 4), np.float32)),
     ("x",), ("(2, 5)", "(4,)")),
    (shape_mismatch_concat, lambda n: (np.ones((n, 2, 3)), np.ones((n, 2, 4))),
     ("a", "b"), ("(2, 3)", "(2, 4)")),
    (shape_mismatch_stack, lambda n: (np.ones((n, 3)), np.ones(4)), ("a",), ("(3,)", "(4,)")),
    (shape_mismatch_slice_store, lambda n: (np.ones((n, 5)), np.ones(3)), ("x",), ("(2,)", "(3,)")),
    (shape_mismatch_reshape, lambda n: (np.ones((n, 8)),), ("x",), ("(8,)", "(3, 3)")),
    (shape_mismatch_store_broadcast, lambda n: (np.ones((n, 4)), np.ones(3)), ("x",),
     ("(1,)", "(3,)")),
    (shape_mismatch_store_rank, lambda n: (np.ones((n, 3)), np.ones((2, 3))), ("x",),
     ("(3,)", "(2, 3)")),
    (shape_mismatch_elementwise_2d, lambda n: (np.ones((n, 3, 4)), np.ones((n, 4, 3))),
     ("a", "b"), ("(3, 4)", "(4, 3)")),
    (shape_mismatch_where, lambda n: (np.ones((n, 3)), np.ones((n, 3)), np.ones(4)),
     ("c", "a"), ("(3,)", "(4,)")),
    (shape_mismatch_shared_store, lambda n: (np.zeros((n, 3)), np.ones((n, 4))), ("h",),
     ("(3,)", "(4,)")),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make,varying,shapes", SHAPE_ERRORS,
                         ids=lambda v: getattr(v, "__name__", ""))
def test_shape_mismatch_is_compile_error(fn, make, varying, shapes, backend):
    k = hydra.compile(fn, varying=varying, backend=backend)
    with pytest.raises(hydra.CompileError) as ei:
        k(*make(3))
    msg = str(ei.value)
    for s in shapes:
        assert s in msg, msg


def varying_shape_zeros(x, n):
    return np.zeros(n) + x[0]


def varying_shape_slice(x, n):
    return x[:n]


def varying_shape_arange(x, n):
    return np.arange(n) * x[0]


def varying_shape_reshape(x, n):
    return x.reshape(n, -1)


def varying_shape_ones_tuple(x, n):
    return np.ones((2, n)) * x[0]


def varying_shape_slice_start(x, n):
    return x[n:] * 2.0


def varying_shape_slice_step(x, n):
    return x[::n] + 1.0


def varying_shape_full(x, n):
    return np.full(n, x[0])


VARYING_SHAPES = [
    (varying_shape_ones_tuple, "np.ones((2, n))"),
    (varying_shape_slice_start, "x[n:]"),
    (varying_shape_slice_step, "x[::n]"),
    (varying_shape_full, "np.full(n, x[0])"),
    (varying_shape_zeros, "np.zeros(n)"),
    (varying_shape_slice, "x[:n]"),
    (varying_shape_arange, "np.arange(n)"),
    (varying_shape_reshape, "x.reshape(n, -1)"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,expr", VARYING_SHAPES,
                         ids=lambda v: getattr(v, "__name__", None) or "e")
def test_varying_dependent_shape_is_compile_error(fn, expr, backend):
    k = hydra.compile(fn, varying=("x", "n"), backend=backend)
    with pytest.raises(hydra.CompileError) as ei:
        k(np.ones((4, 6)), np.array([1, 2, 3, 2]))
    assert expr in str(ei.value)
    assert ei.value.line is not None


def oob_index(x, i):
    return x[i] * 2.0


def oob_gather(E, t):
    return E[t] + 1.0


def oob_store(x, i):
    y = x.copy()
    y[i] = 1.0
    return y


def oob_row(m, i):
    return m[i].sum()


def oob_shared_store(out, h, i):
    out[i] = h


OOB = [
    (oob_index, lambda n, bad: (np.ones((n, 4), np.float32), bad), ("x", "i")),
    (oob_gather, lambda n, bad: (np.ones((5, 3), np.float32), bad), ("t",)),
    (oob_store, lambda n, bad: (np.ones((n, 4), np.float32), bad), ("x", "i")),
    (oob_row, lambda n, bad: (np.ones((n, 4, 2), np.float32), bad), ("m", "i")),
    (oob_shared_store, lambda n, bad: (np.zeros((5, 2)), np.ones((n, 2)), bad), ("h", "i")),
]


@pytest.mark.parametrize("n", (1, 5, 17))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make,varying", OOB, ids=lambda v: getattr(v, "__name__", ""))
def test_out_of_bounds_varying_index(fn, make, varying, backend, n):
    idx = np.zeros(n, np.int64)
    first = n // 2
    idx[first] = -9 if n == 17 else 7   # too negative, or too big
    if n > 2:
        idx[n - 1] = 11
    k = hydra.compile(fn, varying=varying, backend=backend)
    with pytest.raises(IndexError) as ei:
        k(*make(n, idx))
    assert isinstance(ei.value, hydra.HydraError)
    msg = str(ei.value)
    assert re.search(rf"\blane\D{{0,3}}{first}\b", msg), msg
    assert str(idx[first]) in msg, msg


def strided_argument_written(x, s):
    x[::2] = -x[::2]
    x[1] += s
    return x * 1.0


@pytest.mark.parametrize("n", LANES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_land_in_a_strided_varying_argument(backend, n):
    base = np.arange(2 * n * 8, dtype=np.float32).reshape(2 * n, 8)
    want = base.copy()
    for i in range(n):
        want_row = strided_argument_written(want[::2, ::2][i], np.float32(0.5))
        np.testing.assert_array_equal(want_row, want[2 * i, ::2])
    k = hydra.compile(strided_argument_written, varying=("x",), backend=backend)
    got = k(base[::2, ::2], np.float32(0.5))
    np.testing.assert_array_equal(got, want[::2, ::2])
    np.testing.assert_array_equal(base, want)    # also the rows and columns in between


@case(lambda r, n: (r.f32(n, 2, 3, 4), r.f32(4, 5), r.f32(2, 4, 3), r.f32(n, 3, 2)),
      varying=("a", "b"), tol=True)
def higher_rank_products(a, W, U, b):
    return (a @ W, np.matmul(a, W), np.dot(a, W), U @ a[0], a[1].T @ b, np.dot(a, U[0]),
            np.dot(a[0], U), np.dot(U, a[0, 1, :3]), np.tensordot(a, W, 1),
            np.einsum("ijk,kl->ijl", a, W), np.einsum("...k,k", a, W[:, 0]))


@case(lambda r, n: (r.f32(n, 3), r.f32(n, 2, 3), r.f32(2, 2)), varying=("x", "m"), tol=True)
def pad_tensordot_einsum(x, m, U):
    return (np.pad(x, 1), np.pad(m, ((1, 0), (0, 2))), np.pad(U, 1) * x[0],
            np.tensordot(U, m, axes=1), np.tensordot(m, x, axes=((1,), (0,))),
            np.einsum("ij,j->i", m, x), np.einsum("ij,ik->jk", U, m), np.einsum("i,i", x, x))


def printing(x):
    print(x.sum(axis=0), x[0])
    print(x.T)


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_of_per_lane_arrays(backend, capsys):
    x = np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3) / 4
    hydra.compile(printing, varying=("x",), backend=backend)(x)
    got = capsys.readouterr().out
    for row in x:
        print(row.sum(axis=0), row[0])
    for row in x:
        print(row.T)
    assert got == capsys.readouterr().out


def asserting(x):
    assert x.max() < 5.0
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_assert_on_arrays_names_lane(backend):
    x = np.zeros((6, 3))
    x[4, 1] = 7.0
    x[5, 0] = 9.0
    with pytest.raises(AssertionError, match=r"lane\D{0,3}4\b"):
        hydra.compile(asserting, varying=("x",), backend=backend)(x)


def mask_index(x):
    return x[x > 0]


def bad_axis(x):
    return x.sum(axis=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", (mask_index, bad_axis))
def test_data_dependent_or_bad_shapes_are_compile_errors(fn, backend):
    with pytest.raises(hydra.CompileError):
        hydra.compile(fn, varying=("x",), backend=backend)(np.ones((3, 4, 2)))


def sized_by_argument(x, k):
    return (np.zeros(k) + x[0], x[:k] * 2.0, x.reshape(k, -1), np.ones(k + 1), x[: k - 1],
            x.reshape(k // 2, -1), np.zeros(len(x) * 2), np.arange(x.shape[0] // 2),
            np.full((k, 2), x[1]), x[k // 2 :: k])


def sized_by_computed_argument(x, k):
    return x[: k - 1] * 2.0, x.reshape(k // 2, -1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", (sized_by_argument, sized_by_computed_argument))
def test_uniform_int_sizes_specialize(fn, backend):
    k = hydra.compile(fn, varying=("x",), backend=backend)
    x = np.arange(5 * 6, dtype=np.float64).reshape(5, 6)
    for size in (2, 6, 2):
        got = k(x, size)
        want = tuple(np.stack(w) for w in zip(*(fn(r, size) for r in x)))
        close(got, want, False)



def inplace_grows(x, W):
    y = x.copy()
    y += W
    return y


def inplace_bad_cast(k):
    y = k.copy()
    y += 1.5
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_augmented_assignment_follows_numpy_rules(backend):
    with pytest.raises(hydra.CompileError, match=r"\(3,\).*\(2, 3\)|\(2, 3\).*\(3,\)"):
        hydra.compile(inplace_grows, varying=("x",), backend=backend)(
            np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(hydra.CompileError, match="float64.*int64"):
        hydra.compile(inplace_bad_cast, varying=("k",), backend=backend)(np.ones((2, 3), np.int64))


def oob_in_compacted_loop(x, W, idx, m):
    h = x.copy()
    for t in range(m):
        h = W @ h
        h = h + x[idx[t]]
    return h


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_error_in_a_compacted_loop_names_the_original_lane(backend):
    n = 9
    x = np.ones((n, 3))
    m = np.array([1, 4, 1, 1, 4, 1, 1, 4, 4])       # most lanes leave early: compaction
    idx = np.zeros((n, 4), np.int64)
    idx[7, 2] = 5                                    # lane 7 fails at t == 2
    idx[4, 3] = 6                                    # lane 4 would fail later, at t == 3
    k = hydra.compile(oob_in_compacted_loop, varying=("x", "idx", "m"), backend=backend)
    with pytest.raises(IndexError) as ei:
        k(x, np.eye(3), idx, m)
    assert re.search(r"\blane\D{0,3}7\b", str(ei.value)), str(ei.value)
    assert "5" in str(ei.value)


def printing_in_loop(x, m):
    h = x.copy()
    for t in range(m):
        h = h * 2.0
        print(lane(), t, h.sum())
    return h


@pytest.mark.parametrize("backend", BACKENDS)
def test_prints_in_a_varying_loop_keep_lockstep_order(backend, capsys):
    n = 6
    x = np.arange(n * 2, dtype=np.float64).reshape(n, 2)
    m = np.array([3, 0, 1, 3, 2, 1])
    hydra.compile(printing_in_loop, varying=("x", "m"), backend=backend)(x, m)
    got = capsys.readouterr().out
    h = x.copy()
    for t in range(3):
        for i in range(n):
            if t < m[i]:
                h[i] = h[i] * 2.0
                print(i, t, h[i].sum())
    assert got == capsys.readouterr().out


# ---------------------------------------------------------------------------
# calls: argument checks with per-lane arrays


def writes_row(x, s):
    x[0] = s
    return x.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_only_varying_array_written_is_value_error(backend):
    x = np.ones((3, 4))
    x.setflags(write=False)
    k = hydra.compile(writes_row, varying=("x",), backend=backend)
    with pytest.raises(ValueError, match="'x'|\\bx\\b"):
        k(x, 2.0)
    b = np.broadcast_to(np.ones(4), (3, 4))
    with pytest.raises(ValueError, match="'x'|\\bx\\b"):
        k(b, 2.0)


def two_varying(a, b):
    return a * b.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_varying_arrays_of_different_lengths_is_value_error(backend):
    k = hydra.compile(two_varying, varying=("a", "b"), backend=backend)
    with pytest.raises(ValueError) as ei:
        k(np.ones((3, 2)), np.ones((4, 2)))
    assert "a" in str(ei.value) and "b" in str(ei.value)
    k5 = hydra.compile(two_varying, lanes=5, varying=("a", "b"), backend=backend)
    with pytest.raises(ValueError, match="'a'|\\ba\\b"):
        k5(np.ones((3, 2)), np.ones((5, 2)))


def keyword_defaults(x, W, scale=2.0, *, shift=1):
    return (W @ x) * scale + shift


@pytest.mark.parametrize("backend", BACKENDS)
def test_keywords_defaults_and_spmd_with_arrays(backend):
    X = np.arange(12, dtype=np.float64).reshape(4, 3)
    W = np.arange(6, dtype=np.float64).reshape(2, 3)
    k = hydra.compile(keyword_defaults, varying=("x",), backend=backend)
    want = np.stack([keyword_defaults(x, W) for x in X])
    np.testing.assert_allclose(k(X, W), want)
    np.testing.assert_allclose(k(W=W, x=X, shift=3), np.stack(
        [keyword_defaults(x, W, shift=3) for x in X]))
    got = hydra.spmd(3, lambda W: W[lane()] * 2.0 + np.zeros(3), W[[0, 1, 0]], backend=backend)
    np.testing.assert_array_equal(got, W[[0, 1, 0]] * 2.0)


def slice_by_loop_counter(x):
    acc = np.zeros(4)
    for i in range(4):
        acc[: i + 1] += x[i]
    return acc


@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_bounds_from_a_uniform_loop_counter(backend):
    x = np.arange(8.0).reshape(2, 4)
    got = hydra.compile(slice_by_loop_counter, varying=("x",), backend=backend)(x)
    np.testing.assert_array_equal(got, np.stack([slice_by_loop_counter(r) for r in x]))


def broadcast_from_inactive(x):
    y = x * 0.0
    if lane() > 0:
        y = broadcast(x, 0)
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_of_an_array_from_an_inactive_lane_is_an_error(backend):
    with pytest.raises(hydra.HydraError):
        hydra.compile(broadcast_from_inactive, varying=("x",), backend=backend)(np.ones((3, 2)))


def shape_differs_by_path(x):
    if x[0] > 0:
        y = np.zeros(3)
    else:
        y = np.zeros(4)
    return y


def dtype_differs_by_path(x):
    y = x * 2.0
    if x[0] > 0:
        y = x.astype(np.int32)
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,words", [(shape_differs_by_path, ("(3,)", "(4,)")),
                                      (dtype_differs_by_path, ("float64", "int32"))])
def test_array_types_that_differ_by_path_name_the_variable(fn, words, backend):
    with pytest.raises(hydra.CompileError) as ei:
        hydra.compile(fn, varying=("x",), backend=backend)(np.ones((2, 4)))
    msg = str(ei.value)
    assert "'y'" in msg and all(w in msg for w in words), msg
    assert ei.value.line is not None


SCALE = np.linspace(0.5, 2.0, 4).astype(np.float32)


def _helper_pair(v, w=1.0):
    return v * SCALE, (v + w).sum()


_relu2 = lambda a: np.maximum(a, 0.0) * 2.0          # noqa: E731


def closures_lambdas_helpers(x):
    y, s = _helper_pair(x, w=0.5)
    return _relu2(y) + s, _helper_pair(x)[1]


@pytest.mark.parametrize("n", (1, 5))
@pytest.mark.parametrize("backend", BACKENDS)
def test_helpers_lambdas_and_captured_arrays(backend, n):
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4) - 3
    got = hydra.compile(lanes=n, varying=("x",), backend=backend)(closures_lambdas_helpers)(x)
    want = tuple(np.stack(w) for w in zip(*(closures_lambdas_helpers(r) for r in x)))
    close(got, want, True)


def uses_unique(x):
    return np.unique(x)


def uses_nonzero(x):
    return np.nonzero(x)


def uses_where_one_arg(x):
    return np.where(x > 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,name", [(uses_unique, "unique"), (uses_nonzero, "nonzero"),
                                     (uses_where_one_arg, "where")])
def test_numpy_functions_not_batched_are_compile_errors_naming_them(fn, name, backend):
    with pytest.raises(hydra.CompileError, match=name):
        hydra.compile(fn, varying=("x",), backend=backend)(np.ones((3, 4)))


def respecialized(x, W):
    h = np.tanh(W @ x) * 2.0 + x.sum()
    y = x.copy()
    y[1:] += y[:-1]
    return h, y, h.argmax()


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_kernel_called_with_other_shapes_and_dtypes(backend):
    k = hydra.compile(respecialized, varying=("x",), backend=backend)
    rng = np.random.default_rng(5)
    for n, d, m, dt in ((3, 4, 2, np.float32), (5, 6, 3, np.float32), (2, 4, 2, np.float64),
                        (3, 4, 2, np.float32), (1, 6, 3, np.float64)):
        x = rng.standard_normal((n, d)).astype(dt)
        W = rng.standard_normal((m, d)).astype(dt)
        want = tuple(np.stack(w) for w in zip(*(respecialized(r.copy(), W) for r in x)))
        close(k(x, W), want, True)


def printing_masked(x, k):
    if x[0] > 0:
        print("pos", x * 2.0, k[::-1])
    else:
        print(x.sum() > 0, k.astype(np.bool_), sep=" | ", end=";\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_of_arrays_under_a_varying_if(backend, capsys):
    x = np.array([[1.5, -2.0], [-1.0, 0.25], [3.0, 4.0], [-0.5, -0.5]], np.float32)
    k = np.array([[0, 1, 2], [3, 0, 5], [6, 7, 0], [9, 10, 11]], np.int16)
    hydra.compile(printing_masked, varying=("x", "k"), backend=backend)(x, k)
    got = capsys.readouterr().out
    for i in range(4):       # the then arm's prints for its lanes, then the else arm's
        if x[i, 0] > 0:
            print("pos", x[i] * 2.0, k[i, ::-1])
    for i in range(4):
        if not x[i, 0] > 0:
            print(x[i].sum() > 0, k[i].astype(np.bool_), sep=" | ", end=";\n")
    assert got == capsys.readouterr().out
