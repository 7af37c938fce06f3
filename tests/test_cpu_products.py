"""Small per-lane products (hydra/executor/products.py), short reductions and the
np.stack copy (hydra/executor/reductions.py, opsteps.py) on the cpu backend: against the numpy
backend and the per-example function at 1, 3, 17 and 64 lanes (floats within the
summation-order tolerance, integers exactly), the native step in the plan, its asm."""

import re

import numpy as np
import pytest
from arrays_oracle import ATOL, RTOL, check, per_example

import hydra
from hydra.executor import products
from hydra.executor.steps import Quick

f32, f64 = np.float32, np.float64


def plan_of(fn, varying, args):
    kern = hydra.compile(fn, varying=varying, backend="cpu")
    kern(*args)
    return kern.specialize(kern.signature(list(args))[1])[1].__self__


def product_steps(plan) -> list:
    return [s.fn.__self__ for s in plan.steps
            if isinstance(s, Quick) and isinstance(getattr(s.fn, "__self__", None),
                                                   products._Product)]


def both(fn, varying, args, n, exact=False):
    """The cpu result against the per-example run and the numpy backend."""
    got = check(fn, varying, args, n, "cpu", exact)
    ref = hydra.compile(fn, varying=varying, backend="numpy")(*args)
    for g, r in zip(got if isinstance(got, tuple) else (got,),
                    ref if isinstance(ref, tuple) else (ref,)):
        if exact or np.asarray(r).dtype.kind in "biu":
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)
    return got


def uv_one(x, W):
    return W @ x  # uniform [8, 9] @ per-lane [9, 64]: a rows loop


def vvt_one(a, b):
    return a @ b.T  # per-lane [8, 64] @ per-lane transposed [64, 9]: a dots loop


def mixed_one(a, b, v):
    # rows (k = 7), matrix @ vector (dots), vector @ matrix (rows), np.dot
    return a @ b, a @ v, v @ b.T[:, :7].T, np.dot(b.T, a.T)


@pytest.mark.parametrize("dt", [f32, f64])
def test_uniform_at_per_lane(n, dt):
    r = np.random.default_rng(n)
    x, W = r.standard_normal((n, 9, 64)).astype(dt), r.standard_normal((8, 9)).astype(dt)
    both(uv_one, ("x",), [x, W], n)
    (step,) = product_steps(plan_of(uv_one, ("x",), [x, W]))
    assert step.kernels and all(k is not None for k in step.kernels.values())


@pytest.mark.parametrize("dt", [f32, f64])
def test_per_lane_at_transposed_per_lane(n, dt):
    r = np.random.default_rng(n + 1)
    a, b = (r.standard_normal((n, m, 64)).astype(dt) for m in (8, 9))
    both(vvt_one, ("a", "b"), [a, b], n)
    (step,) = product_steps(plan_of(vvt_one, ("a", "b"), [a, b]))
    assert step.kernels and all(k is not None for k in step.kernels.values())


def test_matrix_vector_and_dot(n):
    r = np.random.default_rng(n + 2)
    a, b = r.standard_normal((n, 5, 7)), r.standard_normal((n, 7, 3))
    v = r.standard_normal((n, 7))
    both(mixed_one, ("a", "b", "v"), [a, b, v], n)
    assert len(product_steps(plan_of(mixed_one, ("a", "b", "v"), [a, b, v]))) == 4


def ints_one(a, b, W):
    return a @ b, W @ b, a @ b[:, ::-1]


@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_integer_products_exact_and_wrapping(n, dt):
    """Integer products wrap as NumPy's do: exact in any order."""
    r = np.random.default_rng(n + 3)
    big = np.iinfo(dt).max // 3
    a = r.integers(-big, big, (n, 4, 6), dtype=dt)
    b = r.integers(-big, big, (n, 6, 5), dtype=dt)
    W = r.integers(-9, 9, (3, 6), dtype=dt)
    with np.errstate(over="ignore"):
        both(ints_one, ("a", "b"), [a, b, W], n, exact=True)


def views_one(x, y, W):
    # strided, reversed and sliced per-lane views; a strided uniform operand
    return (x[:, ::2] @ y[::-1], W[::2, ::-1] @ y, x[1:, ::2] @ x[:, 1::2].T,
            (x.T @ x)[::-1])


def test_non_contiguous_views(n):
    r = np.random.default_rng(n + 4)
    x, y = r.standard_normal((n, 5, 12)).astype(f32), r.standard_normal((n, 6, 4)).astype(f32)
    W = r.standard_normal((7, 6)).astype(f32)
    both(views_one, ("x", "y"), [x, y, W], n)


def edges_one(a, b, c, d, e):
    # size-1 dimensions, a long k (no rows loop: BLAS), an empty dimension, more
    # columns than a dots loop spells out
    return a @ b, c @ c.T, c.T @ c, d @ d.T, c @ e.T


def test_size_one_empty_and_long(n):
    r = np.random.default_rng(n + 5)
    a, b = r.standard_normal((n, 1, 1)), r.standard_normal((n, 1, 3))
    c, d = r.standard_normal((n, 3, 40)), np.zeros((n, 0, 4))
    e = r.standard_normal((n, 20, 40))
    both(edges_one, ("a", "b", "c", "d", "e"), [a, b, c, d, e], n)
    steps = product_steps(plan_of(edges_one, ("a", "b", "c", "d", "e"), [a, b, c, d, e]))
    assert len(steps) == 4  # d @ d.T (an empty dimension) stays with NumPy


def stacked_one(x, v, W):
    return x @ W, W @ v  # per-lane [40, 40] @ uniform: past SMALL; per-lane vectors


def test_large_stacked_and_one_gemm_products(n):
    """A stack of per-lane matrices @ a uniform matrix past ``SMALL`` runs by the host
    rule, ``W @ v`` as one GEMM step: both the numpy backend's bits."""
    r = np.random.default_rng(n + 6)
    x, v, W = r.standard_normal((n, 40, 40)), r.standard_normal((n, 40)), \
        r.standard_normal((40, 40))
    got = both(stacked_one, ("x", "v"), [x, v, W], n)
    ref = hydra.compile(stacked_one, varying=("x", "v"), backend="numpy")(x, v, W)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)
    plan = plan_of(stacked_one, ("x", "v"), [x, v, W])
    made = [s.describe() for s in plan.steps if isinstance(s, Quick)]
    assert not product_steps(plan) and any("products._gemm" in m for m in made), made


def branch_one(x, W, k):
    y = x * 1.0
    if k > 0:
        y = W @ x
    return y


@pytest.mark.parametrize("active", [1, 15, 16])
def test_under_a_mask(active):
    """Few active lanes: the host rule's compacted rows; most: every row natively.
    Either way the active lanes agree with the per-example run."""
    n = 16
    r = np.random.default_rng(active)
    x, W = r.standard_normal((n, 4, 4)).astype(f32), r.standard_normal((4, 4)).astype(f32)
    k = np.zeros(n, np.int64)
    k[r.permutation(n)[:active]] = 1
    both(branch_one, ("x", "k"), [x, W, k], n)


def test_same_bits_at_every_lane_count():
    """The summation order is the kernel's: a lane's product has the same bits whatever
    the lane count and the lane's position."""
    r = np.random.default_rng(7)
    a, b = r.standard_normal((17, 8, 64)).astype(f32), r.standard_normal((17, 9, 64)).astype(f32)
    kern = hydra.compile(vvt_one, varying=("a", "b"), backend="cpu")
    full = kern(a, b)
    for lanes in (1, 3):
        part = kern(a[-lanes:].copy(), b[-lanes:].copy())
        assert part.tobytes() == full[-lanes:].tobytes()


def test_kernels_are_vectorized():
    """Both loop shapes compile to packed SIMD arithmetic (the asm of the kernels)."""
    r = np.random.default_rng(8)
    x, W = r.standard_normal((32, 9, 64)).astype(f32), r.standard_normal((8, 9)).astype(f32)
    a, b = r.standard_normal((32, 8, 64)).astype(f32), r.standard_normal((32, 9, 64)).astype(f32)
    for fn, varying, args in ((uv_one, ("x",), [x, W]), (vvt_one, ("a", "b"), [a, b])):
        (step,) = product_steps(plan_of(fn, varying, args))
        asm = "".join(k.inspect_asm() for k in step.kernels.values())
        assert re.search(r"\tv(fmadd\w*|mul|add)ps\s+%[yz]mm", asm), \
            f"{fn.__name__}: no packed float arithmetic"


def test_generate_refuses_other_layouts():
    """Neither loop shape: a strided ``k`` in both operands goes to the host rule."""
    src, _ = products.generate((4, 6), (6, 5), (12, 2), (10, 2), (True, True), np.dtype(f32))
    assert src is None
    src, fast = products.generate((4, 6), (6, 5), (6, 1), (1, 6), (True, True),
                                  np.dtype(f32))
    assert src is not None and fast


def reductions_one(x, i):
    return (x.max(axis=1), x.min(axis=0, keepdims=True), x.sum(axis=1), np.max(x[0]),
            x.sum(), x[:, ::-1].max(axis=(0, 1)), i.sum(axis=0), i.max(axis=1))


@pytest.mark.parametrize("dt", [f32, f64])
def test_short_reductions(n, dt):
    """Sums, maxima and minima of short rows (one reduce over a leading axis)."""
    r = np.random.default_rng(n + 9)
    x = r.standard_normal((n, 3, 10)).astype(dt)
    x[0, 1, 4] = np.nan  # a NaN propagates through max and min
    i = r.integers(-2**62, 2**62, (n, 4, 5))
    with np.errstate(over="ignore"):
        got = both(reductions_one, ("x", "i"), [x, i], n)
    assert np.isnan(got[0][0, 1]) and np.isnan(got[1][0, 0, 4])


def stack_one(x):
    p = x[0]
    return (np.stack((p[0:3, 0:1], p[1:4, 1:2])), np.stack((p[4:1:-1, 0:3], p[:3, ::-7]), -1),
            np.stack((p[0:3, 0:16], p[1:4, 1:17]), 1), np.stack((p[:, 0:17], p[:, 1:18])),
            np.stack((p[:, 0:0], p[:, 1:1])))


@pytest.mark.parametrize("dt", [f32, np.int64])
def test_stack_short_rows(n, dt):
    """np.stack's copy with a short last axis spelled out: the same bits as NumPy's."""
    r = np.random.default_rng(n + 10)
    x = (r.standard_normal((n, 2, 5, 20)) * 100).astype(dt)
    copies = [x.copy()]
    want = per_example(stack_one, ("x",), copies, n)
    got = hydra.compile(stack_one, varying=("x",), backend="cpu")(x)
    for j, g in enumerate(got):
        w = np.stack([w[j] for w in want])
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


def test_short_reductions_are_one_reduce_each():
    r = np.random.default_rng(11)
    x, i = r.standard_normal((8, 3, 10)), r.integers(0, 9, (8, 4, 5))
    plan = plan_of(reductions_one, ("x", "i"), [x, i])
    makes = [c.cell_contents.__qualname__ for s in plan.steps if isinstance(s, Quick)
             for c in s.fn.__closure__ or () if callable(c.cell_contents)
             and hasattr(c.cell_contents, "__qualname__")]
    assert sum(m.startswith("_short_reduce") for m in makes) == 8


def long_sums_one(x):
    return x.sum(), x.sum(axis=1), x.sum(axis=(0, 1), keepdims=True), x[0].sum(axis=-1)


@pytest.mark.parametrize("dt", [f32, f64])
def test_long_float_sums_are_one_einsum_each(n, dt):
    """Float sums of 32 or more elements a row: one einsum each, within the
    summation-order tolerance of the per-example sums."""
    x = np.random.default_rng(n + 12).standard_normal((n, 4, 40)).astype(dt)
    got = both(long_sums_one, ("x",), [x], n)
    assert got[2].shape == (n, 1, 1)
    plan = plan_of(long_sums_one, ("x",), [x])
    makes = [c.cell_contents.__qualname__ for s in plan.steps if isinstance(s, Quick)
             for c in s.fn.__closure__ or () if callable(c.cell_contents)
             and hasattr(c.cell_contents, "__qualname__")]
    assert sum(m.startswith("_einsum_sum") for m in makes) == 4, makes
