"""Per-lane arrays, written from SPEC §8 alone (a held-back-style suite).

Every program is the function a user writes for ONE example; the oracle is that same
function run undecorated, example by example (varying arguments indexed along their
leading axis).  Each runs on the numpy and cpu backends at 1, 3 and 17 lanes.
Elementwise results must be bit-exact (math functions within the cpu backend's
documented few ulp), products and reductions within summation-order tolerance, integers,
bools and shapes exactly, dtypes as NumPy gives them.

Programs the compiler does not support yet are ``xfail(strict=True)`` with the reason
(``PENDING``): the moment one passes, it fails, and its entry must be removed.
"""

import re

import numpy as np
import pytest

import hydra
from hydra import lane, lanemax, lanemin, lanesum, nlanes

from hydra import nn

BACKENDS = ("numpy", "cpu")
LANES = (1, 3, 17)
ULPS = 5  # the cpu backend's vector math (tests/test_vecmath.py)


# ---- the programs --------------------------------------------------------------------

def elementwise(x, y):
    return x * 2.0 + y / 3.0 - x * y, -x, x ** 2, x // 0.25, x % 0.5


def broadcast(m, v, u):
    return m + v, m * u, v - u, u + m[0]


def promotion(x32, x64, i):
    return x32 + x64, x32 * 2.0 + 1, i + x32, i * 2, i / 2, x32 * x32 < 0.5


def compare_where(x, y):
    return x < y, (x == y) | (x >= 0.5), np.where(x > 0.0, x, -y), np.where(x > y, 1, 0)


def math_fns(x):
    return (np.tanh(x), np.exp(x), np.log(np.abs(x) + 1.0), np.sqrt(np.abs(x)), np.abs(x),
            np.maximum(x, 0.1), np.minimum(x, -0.1), np.clip(x, -0.5, 0.5))


def matvec_uniform(W, x):
    return W @ x, np.dot(W, x), np.matmul(W, x), x @ W.T


def products_per_lane(a, b, x, y):
    return a @ b, np.dot(x, y), x @ y, np.outer(x, y), np.matmul(a, b), b.T @ x


def reductions(m):
    return (m.sum(), np.sum(m), m.max(), np.max(m), m.min(), np.min(m), m.mean(), np.mean(m),
            m.prod(), np.prod(m), m.argmax(), np.argmin(m), (m > 0).any(), np.all(m > -3.0))


def reductions_axis(m):
    return (m.sum(axis=0), np.sum(m, axis=1), m.max(axis=1, keepdims=True),
            np.mean(m, axis=0, keepdims=True), m.min(axis=-1), m.argmax(axis=1),
            np.argmin(m, axis=0), (m > 0).all(axis=1), np.any(m > 1.0, axis=0),
            np.prod(m, axis=1), np.max(m, axis=0))


def index_uniform(m):
    return m[1], m[0, 2], m[-1], m[:, 1], m[1:3], m[::2, 1:], m[0][1], m[-2:, ::-1]


def index_varying(m, i):
    return m[i], m[i, 0], m[:, i], m[i][i]


def gather_uniform(E, token, Ws, x):
    return E[token], E[token, 1], Ws[1] @ x + Ws[0, 0], Ws[token % 2] @ x


def assign_own(x, i):
    y = x.copy()
    y[0] = 5.0
    y[1:3] = -1.0
    y[i] = 7.0
    y[-2:] = x[:2] * 2.0
    y[i] += 0.5
    return y


def assign_own_2d(m, i):
    y = np.zeros((3, 4))
    y[1] = m[0]
    y[:, 2] = 9.0
    y[i % 3, i % 4] += 1.0
    y[0, 1:] = m[2, :3]
    return y


def write_argument(x):
    x[0] = x[1] + 1.0
    x[2:] *= 2.0
    return x.sum()


def constructors(x, k):
    c = np.empty(4)
    c[:] = 2.0
    return (np.zeros(4) + x, np.ones(4) * x, c, np.full(4, 3.0), np.zeros_like(x),
            np.ones_like(x) + x, np.arange(4) * x, x.copy(), np.zeros((2, 3), dtype=np.float32),
            np.full((2, 2), 7, dtype=np.int32), np.ones(k), np.zeros(x.shape[0] * 2))


def shape_attrs(m):
    return m.shape[0] + 10 * m.shape[1] + 100 * m.ndim + 1000 * m.size + 10000 * len(m)


def views_and_joins(m, x, y):
    return (m.T, m.reshape(12), m.reshape(2, 6), m.reshape(-1, 3), m.astype(np.float32),
            (m * 10).astype(np.int64), np.concatenate((x, y)), np.stack((x, y)),
            np.stack((x, y), axis=1), np.concatenate((m, m[:1]), axis=0))


def for_rows(m):
    total = np.zeros(m.shape[1])
    for row in m:
        total = total + row * row
    return total


def varying_if(x, c):
    if c > 0:
        y = x * 2.0
    else:
        y = x - 1.0
    return y


def varying_while(x, n):
    h = x.copy()
    i = 0
    while i < n:
        h = h * 0.5 + 1.0
        i += 1
    return h, i


def ragged(xs, n):
    s = np.zeros(xs.shape[1])
    for t in range(n):
        s = s + xs[t]
    return s


def early_exit(x, Ws, thr):
    h = x
    for layer in range(Ws.shape[0]):
        h = np.maximum(Ws[layer] @ h, 0.0) + h
        if h.max() > thr:
            break
    return h, layer + 1


def return_in_loop(x, n):
    for t in range(5):
        if t >= n:
            return x * t
        x = x + 1.0
    return x


def uniform_array_result(W, x):
    return W.sum(axis=0) * 2.0


def nn_activations(x):
    return nn.relu(x), nn.sigmoid(x), nn.softmax(x), nn.log_softmax(x)


def nn_conv_pool(img, w, b):
    return (nn.conv2d(img, w, b), nn.conv2d(img, w, stride=2, padding=1),
            nn.conv2d(img, w, None, 1, 2), nn.max_pool2d(img, 2), nn.max_pool2d(img, 3, stride=1),
            nn.avg_pool2d(img, 2), nn.avg_pool2d(img, 3, stride=2))


# ---- the cases: (program, varying names, arguments for N lanes, tolerance) -------------

def _rng(n):
    return np.random.default_rng(1000 + n)


def _v(n, *shape, dtype=np.float64):
    return _rng(n).standard_normal((n, *shape)).astype(dtype)


def _u(*shape):
    return np.random.default_rng(7).standard_normal(shape)


def _ints(n, high):
    return _rng(n).integers(0, high, n)


CASES = {
    "elementwise": (elementwise, ("x", "y"), lambda n: (_v(n, 5), _v(n, 5) + 2), "exact"),
    "broadcasting": (broadcast, ("m", "v"), lambda n: (_v(n, 3, 4), _v(n, 4) * 3, _u(4)),
                     "exact"),
    "promotion": (promotion, ("x32", "x64", "i"),
                  lambda n: (_v(n, 4, dtype=np.float32), _v(n, 4), _ints(n, 9)), "exact"),
    "comparisons and where": (compare_where, ("x", "y"), lambda n: (_v(n, 6), _v(n, 6)),
                              "exact"),
    "math": (math_fns, ("x",), lambda n: (_v(n, 7),), "ulp"),
    "uniform @ per-lane (matvec)": (matvec_uniform, ("x",), lambda n: (_u(5, 4), _v(n, 4)),
                                    "sum"),
    "per-lane products (@ dot matmul outer)": (
        products_per_lane, ("a", "b", "x", "y"),
        lambda n: (_v(n, 3, 4), _v(n, 4, 2), _v(n, 4), _v(n, 4)), "sum"),
    "reductions": (reductions, ("m",), lambda n: (_v(n, 3, 4),), "sum"),
    "reductions with axis and keepdims": (reductions_axis, ("m",), lambda n: (_v(n, 3, 4),),
                                          "sum"),
    "indexing and slicing (uniform)": (index_uniform, ("m",), lambda n: (_v(n, 4, 5),),
                                       "exact"),
    "indexing (varying index)": (index_varying, ("m", "i"),
                                 lambda n: (_v(n, 4, 4), _ints(n, 4)), "exact"),
    "uniform arrays: views and gathers": (
        gather_uniform, ("token", "x"),
        lambda n: (_u(10, 4), _ints(n, 10), _u(3, 4, 4), _v(n, 4)), "sum"),
    "assignment to own array": (assign_own, ("x", "i"), lambda n: (_v(n, 6), _ints(n, 6)),
                                "exact"),
    "assignment to own 2-D array": (assign_own_2d, ("m", "i"),
                                    lambda n: (_v(n, 3, 4), _ints(n, 12)), "exact"),
    "constructors": (constructors, ("x",), lambda n: (_v(n, 4), 3), "exact"),
    "shape, ndim, size, len": (shape_attrs, ("m",), lambda n: (_v(n, 3, 5),), "exact"),
    "T reshape astype concatenate stack": (views_and_joins, ("m", "x", "y"),
                                           lambda n: (_v(n, 3, 4), _v(n, 3), _v(n, 3)),
                                           "exact"),
    "for row in a": (for_rows, ("m",), lambda n: (_v(n, 4, 3),), "exact"),
    "varying if": (varying_if, ("x", "c"), lambda n: (_v(n, 4), _v(n)), "exact"),
    "varying while keeps arrays": (varying_while, ("x", "n"),
                                   lambda n: (_v(n, 3), _ints(n, 6)), "exact"),
    "ragged: padded input + length": (ragged, ("xs", "n"),
                                      lambda n: (_v(n, 6, 3), _ints(n, 7)), "exact"),
    "uniform loop counter with break": (early_exit, ("x", "thr"),
                                        lambda n: (_v(n, 4), _u(5, 4, 4) / 2,
                                                   np.abs(_v(n)) * 3), "sum"),
    "return inside a loop": (return_in_loop, ("x", "n"), lambda n: (_v(n, 3), _ints(n, 7)),
                             "exact"),
    "uniform array result": (uniform_array_result, ("x",), lambda n: (_u(3, 4), _v(n)),
                             "exact"),
    "hydra.nn activations": (nn_activations, ("x",), lambda n: (_v(n, 3, 5),), "ulp"),
    "hydra.nn conv2d, max_pool2d and avg_pool2d": (nn_conv_pool, ("img",),
                                       lambda n: (_v(n, 2, 6, 6), _u(3, 2, 3, 3), _u(3)),
                                       "sum"),
}

#: what the compiler does not support yet -> (reason, backends it fails on); empty: every
#: §8 item here passes on both backends
_TODO: dict[str, tuple[str, tuple[str, ...]]] = {}
#: case -> {backend: reason} of what is expected to fail today
PENDING = {name: dict.fromkeys(backends, reason) for name, (reason, backends) in _TODO.items()}


def _params(names):
    for name in names:
        for backend in BACKENDS:
            reason = PENDING.get(name, {}).get(backend)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(name, backend, marks=marks, id=f"{name}-{backend}")


_KERNELS = {}


def _kernel(fn, varying, backend):
    key = (fn.__name__, backend)
    if key not in _KERNELS:
        _KERNELS[key] = hydra.compile(fn, varying=varying, backend=backend)
    return _KERNELS[key]


def per_example(fn, varying, args):
    """The oracle: ``fn`` undecorated on each example; results stacked over the lanes."""
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    n = len(args[names.index(varying[0])])
    outs = [fn(*(a[i] if p in varying else a for p, a in zip(names, args))) for i in range(n)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([np.asarray(o[j]) for o in outs]) for j in range(len(outs[0])))
    return np.stack([np.asarray(o) for o in outs])


def same(got, want, tol, uniform=False):
    """``got`` (hydra's) equals ``want`` (the oracle's, stacked over the lanes)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w, tol, uniform)
        return
    got, want = np.asarray(got), (want[0] if uniform else want)
    if not uniform and got.shape != want.shape and np.all(want == want[0]):
        want = want[0]  # a value the compiler proved uniform comes back once (§2)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                   got.dtype, want.dtype)
    if tol == "exact" or want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    elif tol == "ulp":
        np.testing.assert_array_max_ulp(got, want, ULPS)
    else:
        rtol = 1e-5 if want.dtype == np.float32 else 1e-11
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name, backend", list(_params(CASES)))
@pytest.mark.parametrize("lanes", LANES)
def test_against_the_per_example_function(name, backend, lanes):
    fn, varying, make, tol = CASES[name]
    args = make(lanes)
    want = per_example(fn, varying, [a.copy() if isinstance(a, np.ndarray) else a
                                     for a in args])
    same(_kernel(fn, varying, backend)(*args), want, tol,
         uniform=name == "uniform array result")


# ---- what the oracle cannot run: writes through views, lanes, cross-lane reductions ----

def store_shared(x, out, out2):
    out[lane()] = x * 2.0
    out2[lane(), :] = np.tanh(x)


def lane_reductions(g):
    return lanesum(g), lanemax(g), lanemin(g)


def masked_lanesum(g):
    s = np.zeros(g.shape)
    if lane() % 3 == 0:
        s = lanesum(g)
    return s


def averaged_gradient(delta, x):
    return lanesum(np.outer(delta, x)) / nlanes()


LANE_CASES = ("writes land in the caller's arrays", "stores into shared arrays",
              "cross-lane reductions of arrays", "cross-lane reductions under a mask",
              "lanesum(np.outer(delta, x)) / nlanes()")


@pytest.mark.parametrize("name, backend", list(_params(LANE_CASES)))
@pytest.mark.parametrize("lanes", LANES)
def test_lanes_and_shared_memory(name, backend, lanes):
    g = _v(lanes, 3, 2)
    if name == "writes land in the caller's arrays":
        x = _v(lanes, 5)
        want = x.copy()
        sums = per_example(write_argument, ("x",), [want])
        same(_kernel(write_argument, ("x",), backend)(x), sums, "sum")
        np.testing.assert_array_equal(x, want)
    elif name == "stores into shared arrays":
        x, out, out2 = _v(lanes, 4), np.zeros((lanes, 4)), np.zeros((lanes, 4))
        assert _kernel(store_shared, ("x",), backend)(x, out, out2) is None
        np.testing.assert_array_equal(out, x * 2.0)
        np.testing.assert_array_max_ulp(out2, np.tanh(x), ULPS)
    elif name == "cross-lane reductions of arrays":
        got = _kernel(lane_reductions, ("g",), backend)(g)
        same(got, (g.sum(axis=0)[None], g.max(axis=0)[None], g.min(axis=0)[None]), "sum",
             uniform=True)
    elif name == "cross-lane reductions under a mask":
        active = np.arange(lanes) % 3 == 0
        want = np.where(active[:, None, None], g[active].sum(axis=0), 0.0)
        same(_kernel(masked_lanesum, ("g",), backend)(g), want, "sum")
    else:
        delta, x = _v(lanes, 3), _v(lanes, 4) + 1
        got = _kernel(averaged_gradient, ("delta", "x"), backend)(delta, x)
        same(got, (delta.T @ x / lanes)[None], "sum", uniform=True)


# ---- errors --------------------------------------------------------------------------

def bad_broadcast(x, y):
    return x + y


def bad_matmul(W, x):
    return W @ x


def shape_from_varying(x, n):
    return np.zeros(n) + x[0]


ERRORS = {
    "shape mismatch names both shapes": (bad_broadcast, ("x", "y"),
                                         lambda: (_v(3, 3), _v(3, 4)),
                                         (r"\(3,\)|\[3\]", r"\(4,\)|\[4\]")),
    "matmul mismatch names both shapes": (bad_matmul, ("x",), lambda: (_u(5, 3), _v(3, 4)),
                                          (r"\(5, ?3\)|\[5, ?3\]", r"\(4,\)|\[4\]")),
    "a shape from a varying value": (shape_from_varying, ("x", "n"),
                                     lambda: (_v(3, 2), _ints(3, 4) + 1), (r"np\.zeros\(n\)",)),
}


@pytest.mark.parametrize("name, backend", list(_params(ERRORS)))
def test_errors(name, backend):
    fn, varying, make, needles = ERRORS[name]
    with pytest.raises(hydra.CompileError) as err:
        hydra.compile(fn, varying=varying, backend=backend)(*make())
    for pattern in needles:
        assert re.search(pattern, str(err.value)), (pattern, str(err.value))
    assert "test_arrays_spec.py" in str(err.value)


# ---- hydra.nn's plain definitions (they are the oracle above) ------------------------

def conv_loops(x, w, b, stride, padding):
    c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((c, h + 2 * padding, wd + 2 * padding))
    xp[:, padding:padding + h, padding:padding + wd] = x
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((o, oh, ow))
    for f in range(o):
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, i * stride:i * stride + kh, j * stride:j * stride + kw]
                out[f, i, j] = (patch * w[f]).sum() + (0.0 if b is None else b[f])
    return out


def test_nn_plain_definitions():
    x, w, b = _v(1, 2, 7, 6)[0], _u(3, 2, 3, 2), _u(3)
    for stride, padding, bias in ((1, 0, b), (2, 1, None), (1, 2, b), (3, 0, b)):
        np.testing.assert_allclose(nn.conv2d(x, w, bias, stride=stride, padding=padding),
                                   conv_loops(x, w, bias, stride, padding), rtol=1e-12)
    pooled = nn.max_pool2d(x, 2)
    assert pooled.shape == (2, 3, 3) and pooled[1, 2, 0] == x[1, 4:6, 0:2].max()
    assert nn.max_pool2d(x, 3, stride=1).shape == (2, 5, 4)
    z = _v(1, 2, 5)[0]
    np.testing.assert_allclose(nn.softmax(z).sum(axis=-1), 1.0)
    np.testing.assert_allclose(nn.log_softmax(z), np.log(nn.softmax(z)), rtol=1e-12)
    np.testing.assert_array_equal(nn.relu(z), np.maximum(z, 0.0))
    np.testing.assert_allclose(nn.sigmoid(z), 1.0 / (1.0 + np.exp(-z)), rtol=1e-12)
