"""More NumPy on per-lane arrays (issue 27, ``hydra.arraylib``): each function against
the per-example function (``arrays_oracle.check``) on the numpy and cpu backends, with
several lane counts and per-lane and uniform operands; bit-exact where NumPy's result is
elementwise, a reordering or a running sum along the same axis, within the section 8
tolerance where it sums (var, std, norm, trace).  Views (np.ravel, np.flip, np.squeeze,
np.expand_dims) write through to their base as NumPy's do; copies (np.copy, np.array,
.flatten()) do not.  Few kernels, many functions each: compiles are what cost time."""

import math

import numpy as np
import pytest

import hydra
from arrays_oracle import ARRAY_BACKENDS, check
from conftest import BACKENDS
from hydra.registry import AdjointState, record

LANES = (1, 3, 17)


def along_axes(x, u, k):
    """x: per-lane [3, 4] floats, u: uniform [3, 4], k: per-lane [5] int32 (ties)."""
    return (np.cumsum(x, axis=1), np.cumprod(x, axis=-2), np.cumsum(k), np.cumsum(u, 0),
            x.cumsum(), np.sort(x, axis=0), np.sort(x, axis=None), np.sort(k),
            np.argsort(k, kind="stable"), np.argsort(x, axis=0), k.argsort(kind="stable"),
            np.diff(x, axis=0), np.diff(x, n=2), np.roll(x, (1, 2), axis=(0, 1)),
            np.roll(x, 3), np.roll(x, [1, -1], axis=[1, 0]), np.repeat(x, 2, axis=1),
            np.repeat(k, (1, 2, 0, 1, 1)), x.repeat(2), np.tile(x, (2, 1, 2)), np.tile(k, 2),
            np.tile(u, 2), np.sort(u),
            np.diff(u), np.roll(u, 1, axis=0), np.round(x * 100, -1), np.round(k, 1),
            x.round(2), np.around(u, 3), np.round(np.float32(x[0, 0]), 2))


def sums(x, u, k):
    return (np.var(x, axis=0), x.std(axis=(0, 1), keepdims=True), np.var(u, axis=1, ddof=1),
            np.std(k), k.var(ddof=1), np.linalg.norm(x, axis=1),
            np.linalg.norm(x, keepdims=True), np.linalg.norm(x, ord=1, axis=0),
            np.linalg.norm(x, "fro"), np.linalg.norm(u), np.linalg.norm(k), np.trace(x),
            np.trace(x, 1), x.trace(-1), np.trace(u), x.cumsum(axis=0).sum())


def gathers(x, u, k, j):
    """j: per-lane [3] indices in -3..2."""
    return (np.take(x, j, axis=1), np.take(x, (0, -1), axis=0), np.take(u, j, axis=0),
            np.take(x, 5), np.take(k, j), np.take(u, 2), x.take(j[:2], axis=0),
            np.take(x, np.argsort(k, kind="stable")[:2] - 1, axis=1), np.take(x, [2, 0], 1),
            np.diag(x[:, :3]), np.diag(k, 1), np.diag(k, -2), np.diag(x, 1), np.diag(u[:, 0]))


def makers(x, y, i):
    """x, y, i: per-lane numbers (y == x on lane 0: a step of 0)."""
    return (np.linspace(x, y, 5), np.linspace(0.0, 1.0, 4), np.linspace(x, y, 4, endpoint=False),
            np.linspace(x, x, 3), np.linspace(i, 10, 6, dtype=np.int64), np.linspace(x, y, 1),
            np.eye(3), np.eye(2, 4, 1, dtype=np.int32) * i, np.eye(3, k=-1) + x,
            np.round(x), np.isclose(x, y, atol=0.5),
            np.isclose(np.array((x, np.nan)), np.array((x, np.nan)), equal_nan=True),
            np.allclose(x, y), np.allclose(np.eye(2) * x, np.eye(2) * y, rtol=0.2),
            np.array((x, y, 1.0)), np.array(((x, y), (y, x))), np.array((i, 2)),
            np.array([x, i], dtype=np.float32))


def tables(x, xp, fp, s, v):
    """xp, fp: uniform tables; s: per-lane sorted rows; v: per-lane vectors."""
    return (np.interp(x, xp, fp), np.interp(v, xp, fp, left=-1.0, right=2.0),
            np.interp(x, s, fp), np.searchsorted(xp, x), np.searchsorted(s, v, side="right"),
            np.searchsorted(xp, v), np.pad(v, (2, 1), mode="reflect"), np.pad(v, 2, mode="edge"),
            np.pad(v, [(1, 2)], constant_values=(-1.0, 3.0)),
            np.pad(np.outer(v, v), ((1, 0), (0, 2)), constant_values=4),
            np.pad(np.outer(v, v), 1, mode="reflect"), np.pad(xp, 1, mode="edge"),
            np.isclose(v, xp[:5], rtol=0.5))


def views(x, w):
    v = np.ravel(x)
    v[0] = 5.0
    f = np.flip(x, axis=1)
    f[0, 0] = 7.0
    s = np.squeeze(np.expand_dims(x, 0))
    s[1, 1] = 8.0
    c = np.copy(x)
    c[1, 2] = -1.0
    a = np.array(x)
    a[0, 1] = -2.0
    fl = x.flatten()
    fl[2] = 9.0
    r = x.ravel()
    r[3] += 1.0
    t = np.copy(x.T).reshape(-1)  # np.copy keeps the transpose's order: this is a copy
    t[0] = 100.0
    e = np.expand_dims(x, (0, 2))
    e[0, 1, 0, 1] = 3.0
    g = np.flip(np.expand_dims(x, [0]), axis=[0, 2])  # these take a list of axes too
    g[0, 2, 0] = -3.0
    return (x.sum() + c.sum() + a.sum() + fl.sum() + t.sum() + np.fliplr(x)[0, 0]
            + np.flipud(x)[0, 0], np.ravel(w) * 2, np.flip(w), np.asarray(x) * 1)


@pytest.mark.parametrize("be", ARRAY_BACKENDS)
def test_functions_along_axes_are_exact(be):
    rng = np.random.default_rng(0)
    for n in LANES:
        x = rng.standard_normal((n, 3, 4))
        x[0, 1, :2] = np.nan  # sorts put NaN last
        u = rng.standard_normal((3, 4))
        k = rng.integers(-3, 3, (n, 5)).astype(np.int32)
        check(along_axes, ("x", "k"), [x, u, k], n, be, exact=True)
        check(sums, ("x", "k"), [np.nan_to_num(x), u, k], n, be)


@pytest.mark.parametrize("be", ARRAY_BACKENDS)
def test_gathers_makers_and_tables(be):
    rng = np.random.default_rng(1)
    for n in LANES:
        x = rng.standard_normal((n, 3, 4))
        u = rng.standard_normal((3, 4))
        k = rng.integers(-5, 5, (n, 5)).astype(np.int32)
        j = rng.integers(-3, 3, (n, 3))
        check(gathers, ("x", "k", "j"), [x, u, k, j], n, be, exact=True)
        xs = rng.standard_normal(n)
        ys = xs + rng.standard_normal(n) * 0.1
        ys[0] = xs[0]
        check(makers, ("x", "y", "i"), [xs, ys, rng.integers(0, 5, n)], n, be, exact=True)
        xp = np.sort(rng.standard_normal(6))
        s = np.sort(rng.standard_normal((n, 6)), axis=1)
        check(tables, ("x", "s", "v"), [xs, xp, rng.standard_normal(6), s,
                                        rng.standard_normal((n, 5))], n, be, exact=True)


@pytest.mark.parametrize("be", ARRAY_BACKENDS)
def test_views_write_through_and_copies_do_not(be):
    rng = np.random.default_rng(2)
    for n in (1, 5):
        check(views, ("x",), [rng.standard_normal((n, 3, 4)), rng.standard_normal((3, 4))],
              n, be)  # the sums within the tolerance; what the writes reach, exactly


def take_guarded(x, j):
    r = 0.0
    if j[0] < 4:  # lane 1's indices are out of range, but it never takes
        r = np.take(x, j).sum()
    return r


def take_out_of_range(x, j):
    return np.take(x, j)


@pytest.mark.parametrize("be", ARRAY_BACKENDS)
def test_take_checks_the_active_lanes_indices(be):
    x = np.arange(12.0).reshape(3, 4)
    j = np.array([[0, 1], [9, 9], [3, -4]])
    check(take_guarded, ("x", "j"), [x, j], 3, be, exact=True)
    with pytest.raises(IndexError, match=r"index out of bounds for axis 0 with size 4 \(lane 1\)"):
        hydra.compile(take_out_of_range, varying=("x", "j"), backend=be)(x, j)


def axis_list(x, j):
    return x.sum(axis=[0])


def sorts_in_place(x, j):
    x.sort()
    return x


def pads_wrapping(x, j):
    return np.pad(x, 1, mode="wrap")


@pytest.mark.skipif("cuda" not in BACKENDS, reason="the cuda backend is not available here")
def test_cuda_runs_them_and_names_the_failing_lane():
    """np.take has no namespace step on cuda: its host rule runs it, errors included."""
    x = np.arange(12.0).reshape(3, 4)
    j = np.array([[0, 1], [9, 9], [3, -4]])
    check(take_guarded, ("x", "j"), [x, j], 3, "cuda", exact=True)
    with pytest.raises(IndexError, match=r"index out of bounds for axis 0 with size 4 \(lane 1\)"):
        hydra.compile(take_out_of_range, varying=("x", "j"), backend="cuda")(x, j)


def test_records_say_which_carry_a_gradient():
    for name in ("argsort", "searchsorted", "isclose", "allclose", "round", "eye"):
        assert record("array", name).adjoint.state is AdjointState.NOT_DIFFERENTIABLE, name
    for name in ("cumsum", "sort", "var", "norm", "take", "interp", "pad", "linspace"):
        assert record("array", name).adjoint.state is AdjointState.RULE, name
    assert record("array", "take").memory.reads == "all"
    assert record("array", "eye").memory.reads == ()


def gammas(x):
    return math.gamma(x) + math.lgamma(x * 0.5), math.lgamma(x)


def _c_valued(f, x, pole):
    """What C's tgamma / lgamma give where Python's raise: a kernel never raises here."""
    try:
        return f(x)
    except ValueError:
        return pole(x)
    except OverflowError:
        return math.inf


@pytest.mark.parametrize("be", BACKENDS)
def test_gamma_and_lgamma_of_numbers_are_pythons_bits(be):
    x = np.concatenate([np.linspace(-5.5, 40, 19), [0.0, -0.0, -1.0, -3.0, 171.7, 200.0,
                                                     np.inf, -np.inf, np.nan]])
    gamma = [_c_valued(math.gamma, v, lambda y: math.copysign(math.inf, y) if y == 0
                       else math.nan) for v in x]
    lgamma = [_c_valued(math.lgamma, v, lambda y: math.inf) for v in x]
    half = [_c_valued(math.lgamma, v * 0.5, lambda y: math.inf) for v in x]
    got = hydra.compile(gammas, varying=("x",), backend=be)(x)
    np.testing.assert_array_equal(got[0], [g + h for g, h in zip(gamma, half)])
    np.testing.assert_array_equal(got[1], lgamma)


MASK = np.array([True, False, True, True])
MASK2 = np.array([[True, False, True, True], [False, False, True, False], [True] * 4])


def fancy(x, u, j, i, y):
    """Integer arrays (per-lane j, constant lists, several that broadcast) and masks
    known at compile time."""
    return (x[j], x[:, j], x[[0, 2]], x[[2, 0], 1:3], x[1, j], x[j, 2], u[j], u[:, [1, 3]],
            x[:, MASK], x[MASK2], u[MASK2], x[i, j], x[:, [True, False, True, False]],
            u[j][:, 0], x[-1][[0, -1]], x[j, j], u[j, [0, 1, -1]], x[[0, 2], [1, 3]],
            x[np.arange(3)[:, None], j[None, :]], y[1:, j, i], y[0, j, [1, 2, 0]])


@pytest.mark.parametrize("be", ARRAY_BACKENDS)
def test_integer_array_and_constant_mask_indexing(be):
    rng = np.random.default_rng(3)
    for n in (1, 4):
        check(fancy, ("x", "j", "i", "y"), [
            rng.standard_normal((n, 3, 4)), rng.standard_normal((3, 4)),
            rng.integers(-3, 3, (n, 3)), rng.integers(0, 3, n),
            rng.standard_normal((n, 2, 3, 4))], n, be, exact=True)
    with pytest.raises(IndexError, match=r"out of bounds for axis 1 with size 4 \(lane 0\)"):
        hydra.compile(lambda x, j: x[:, j], varying=("x", "j"), backend=be)(
            np.ones((2, 3, 4)), np.full((2, 2), 4))
    with pytest.raises(IndexError, match=r"out of bounds for axis 0 with size 3 \(lane 1\)"):
        hydra.compile(lambda x, j: x[j, j], varying=("x", "j"), backend=be)(
            np.ones((2, 3, 4)), np.array([[0, 2], [-1, 3]]))


def data_mask(x, j):
    return x[x > 0]


def store_through_index(x, j):
    x[j] = 1.0
    return x


def index_arrays_apart(x, j):
    return x[j, :, j]


def writes_a_diagonal(x, j):
    d = np.diag(np.outer(x, x))[1:]
    d[0] = 1.0  # NumPy: ValueError, assignment destination is read-only
    return d


@pytest.mark.parametrize("fn,match,hint", [
    (axis_list, "axis= must be an integer or a tuple", "axis=(0,)"),
    (sorts_in_place, "sorts in place", "np.sort(a)"),
    (pads_wrapping, "mode 'wrap' is not supported", "'edge' or 'reflect'"),
    (data_mask, "mask not known when the kernel compiles", "np.where(mask, a, fill)"),
    (store_through_index, "a store through an integer array index", "np.where"),
    (index_arrays_apart, "apart from each other", "b = a[i, :]; b[:, idx]"),
    (writes_a_diagonal, "read-only view", "np.diag(a).copy()"),
])
def test_what_stays_unsupported_names_a_supported_way(fn, match, hint):
    with pytest.raises(hydra.CompileError, match=match) as e:
        hydra.compile(fn, varying=("x", "j"), backend="numpy")(np.ones((2, 3, 3)),
                                                               np.zeros((2, 2), np.int64))
    assert hint in e.value.hint
