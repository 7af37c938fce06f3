"""Per-lane arrays (SPEC section 8): the operations, each against the per-example
function run lane by lane in plain Python, at several lane counts, on numpy and cpu."""

import numpy as np
import pytest
from arrays_oracle import check

import hydra

f32 = np.float32


def rng(seed=0):
    return np.random.default_rng(seed)



def mlp_one(x, W1, b1, W2, b2):
    h = np.tanh(W1 @ x + b1)
    z = W2 @ h + b2
    e = np.exp(z - z.max())
    return e / e.sum()


def test_mlp_forward(be, n):
    r = rng(1)
    args = [r.standard_normal((n, 8)).astype(f32), r.standard_normal((16, 8)).astype(f32),
            r.standard_normal(16).astype(f32), r.standard_normal((4, 16)).astype(f32),
            r.standard_normal(4).astype(f32)]
    check(mlp_one, ("x",), args, n, be)


def elementwise(x, y, s):
    a = x * 2.0 - y / 3 + s
    b = np.where(x > y, x, y * 0.5) + np.clip(x, -0.5, 0.5)
    c = np.maximum(a, 0.0) - np.minimum(b, 1) + np.abs(x) + abs(-y)
    d = np.tanh(a) + np.exp(-np.abs(b)) + np.sqrt(np.abs(c)) + np.log1p(np.abs(a))
    return a, b, c, d, (x >= y) & (y < 0.5) | ~(x == 0), -x ** 2


def test_elementwise_is_bit_exact(be, n):
    r = rng(2)
    args = [r.standard_normal((n, 3, 4)).astype(f32), r.standard_normal(4).astype(f32),
            r.standard_normal(n).astype(f32)]
    check(elementwise, ("x", "s"), args, n, be, exact=True)


def promotion(x, i, d):
    return x * 2, x + i, i * 2.5, i // 2, x + d, (i > 1) * 1, x.astype(np.int32) + i


def test_nep50_promotion(be, n):
    r = rng(3)
    args = [r.standard_normal((n, 5)).astype(f32), r.integers(-9, 9, (n, 5)).astype(np.int16),
            np.float64(0.25)]
    got = check(promotion, ("x", "i"), args, n, be, exact=True)
    assert [g.dtype for g in got] == [f32, f32, np.float64, np.int16, np.float64, np.int64,
                                      np.int32]


def reductions(x):
    return (x.sum(), x.max(axis=0), np.min(x, axis=1), x.mean(axis=-1, keepdims=True),
            x.prod(axis=(0, 1)), x.argmax(), np.argmin(x, axis=0), x.any(axis=1),
            np.all(x > -3), np.sum(x, axis=0, keepdims=True))


def test_reductions(be, n):
    x = rng(4).standard_normal((n, 3, 4)).astype(f32)
    check(reductions, ("x",), [x], n, be)


def products(x, v, W, u):
    return (W @ v, np.dot(W, v), v @ W.T, np.matmul(x, x.T), np.outer(v, u), v @ u,
            x @ v, u @ x.T[:3])


def test_products_are_gemms_over_lanes(be, n):
    r = rng(5)
    args = [r.standard_normal((n, 3, 3)).astype(f32), r.standard_normal((n, 3)).astype(f32),
            r.standard_normal((5, 3)).astype(f32), r.standard_normal(3).astype(f32)]
    check(products, ("x", "v"), args, n, be)


def indexing(x, E, t, k):
    return (x[1:3, ::2], x[0], x[:, 1], x[-1, -2], E[t], E[:, t], E[k], x.T[1], x[t % 3],
            x[None, 0, :2], x[..., 1], E[1:, t])


def test_indexing_uniform_and_varying(be, n):
    r = rng(6)
    args = [r.standard_normal((n, 3, 4)).astype(f32), r.standard_normal((5, 4)).astype(f32),
            r.integers(0, 4, n), 2]
    check(indexing, ("x", "t"), args, n, be, exact=True)


def stores(x, t):
    y = np.zeros((3, 4), dtype=np.float32)
    y[0] = x[0]
    y[1, :] = 2.0
    y[2, t] = 7.0
    y[:, 3] = x[:, 0]
    y[1:3, 0:2] += 1.0
    z = y.copy()
    z[0, 0] = -1.0
    x[0, 0] = 5.0  # a varying argument is a view: the write lands in the caller's array
    return y + z


def test_element_and_slice_assignment(be, n):
    r = rng(7)
    x = r.standard_normal((n, 3, 4)).astype(f32)
    t = r.integers(0, 4, n)
    check(stores, ("x", "t"), [x.copy(), t], n, be, exact=True)
    hydra.compile(stores, varying=("x", "t"), backend=be)(x, t)
    assert (x[:, 0, 0] == 5.0).all()


def constructors(x):
    a = np.ones_like(x) + np.zeros_like(x) + np.full((3, 4), 2.5, dtype=np.float32)
    r = np.arange(4)
    e = np.empty(4, dtype=np.float32)
    e[:] = 1.5
    o = np.ones((2, 2), dtype=np.int32)
    return a * r + e, np.stack([x[0], x[1]], axis=0).sum(axis=0), o, np.arange(2, 8, 2)


def test_constructors(be, n):
    x = rng(8).standard_normal((n, 3, 4)).astype(f32)
    check(constructors, ("x",), [x], n, be, exact=True)


def shapes(x, y):
    a = x.reshape(4, 3)
    b = x.reshape(-1)
    c = np.concatenate((x, y[None]), axis=0)
    d = np.concatenate([b, y])
    s = np.stack((x[0], y), axis=1)
    return a, b, c, d, s, x.T, x.astype(np.float64)


def sizes(x, y):
    return x.shape[0] + x.shape[1] * 10 + x.ndim * 100 + x.size * 1000 + len(x) * 10000 \
        + y.shape[0]


def test_shape_operations(be, n):
    r = rng(9)
    args = [r.standard_normal((n, 3, 4)).astype(f32), r.standard_normal((n, 4)).astype(f32)]
    check(shapes, ("x", "y"), args, n, be, exact=True)
    got = hydra.compile(sizes, varying=("x", "y"), backend=be)(*args)
    assert got == sizes(args[0][0], args[1][0])  # shapes are uniform: one int


def rows(x):
    s = np.zeros(4, dtype=np.float32)
    for row in x:
        s = s + row * row
    return s


def test_for_row_in_array(be, n):
    check(rows, ("x",), [rng(10).standard_normal((n, 3, 4)).astype(f32)], n, be, exact=True)


def store_shared(x, out):
    out[hydra.lane()] = x * 2
    out[hydra.lane(), 0, :] = x[1]


def test_store_into_shared_array(be, n):
    x = rng(11).standard_normal((n, 3, 4)).astype(f32)
    out = np.zeros_like(x)
    hydra.compile(store_shared, varying=("x",), backend=be)(x, out)
    want = x * 2
    want[:, 0, :] = x[:, 1]
    np.testing.assert_array_equal(out, want)


def uniform_results(W, b):
    return W @ b, W.sum(axis=0)


def test_uniform_arrays_come_back_once(be):
    r = rng(12)
    W, b = r.standard_normal((3, 4)), r.standard_normal(4)
    got = hydra.compile(uniform_results, lanes=5, backend=be)(W, b)
    np.testing.assert_allclose(got[0], W @ b)
    assert got[1].shape == (4,)


def full_values(x, s):
    return np.full(3, s), np.full((2, 2), 7), np.full(2, s * 2, dtype=np.float32) + x[:2]


def test_np_full_takes_per_lane_fill_values_and_numpys_dtype(be, n):
    r = np.random.default_rng(13)
    args = [r.standard_normal((n, 3)).astype(f32), r.standard_normal(n)]
    check(full_values, ("x", "s"), args, n, be, exact=True)


def contractions(x, W, v):
    return (np.einsum("ij,j->i", W, x), np.einsum("i,j", x, v), np.tensordot(W, x, axes=1),
            np.tensordot(np.outer(x, v), W, axes=((0,), (1,))), np.pad(x, 1),
            np.pad(np.outer(x, v), ((1, 0), (0, 2))), np.einsum("ij->", np.outer(x, v)))


@pytest.mark.parametrize("varying", [("x",), ("x", "v")])
def test_einsum_tensordot_pad(be, n, varying):
    r = np.random.default_rng(14)
    v = r.standard_normal((n, 4) if "v" in varying else 4)
    check(contractions, varying, [r.standard_normal((n, 3)), r.standard_normal((5, 3)), v],
          n, be)


def ellipsis_gathers(x, E, t):
    return E[..., t], E[None, :, t], x[..., t], E[:, t, None], E[1:, t]


def ellipsis_store(out, t):
    out[hydra.lane(), ..., t] = 1.0


def test_varying_indices_after_slices_none_and_ellipsis(be, n):
    r = np.random.default_rng(15)
    t = r.integers(0, 4, n)
    args = [r.standard_normal((n, 2, 3, 4)), r.standard_normal((5, 4, 4)), t]
    check(ellipsis_gathers, ("x", "t"), args, n, be, exact=True)
    out = np.zeros((n, 2, 4))
    hydra.compile(ellipsis_store, varying=("t",), backend=be)(out, t)
    want = np.zeros((n, 2, 4))
    for i in range(n):
        want[i, ..., t[i]] = 1.0
    np.testing.assert_array_equal(out, want)
