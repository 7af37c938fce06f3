"""hydra.grad of per-lane array code (SPEC sections 8 and 11) on numpy, cpu and cuda
(the CUDA simulator in CI) at 1, 3 and 17 lanes, against float64 central differences
(at most ~200 parameters per check): elementwise ufuncs with broadcasting, ``@`` with a
uniform weight matrix (each lane's gradient of W is its own ``np.outer(dz, x)``),
reductions, reshape/transpose, element loads, and arrays carried through a loop with
per-lane trip counts."""

import numpy as np
import pytest

import hydra
from hydra.backends import available
from tests.gradcheck import check_arrays

BACKENDS = [b for b in ("numpy", "cpu", "cuda") if available(b)]
LANES = [1, 3, 17]


def dense(W, b, x):
    h = np.tanh(W @ x + b)
    y = h * 2.0 - x[0]
    return (float(np.sum(y * y)) + y.mean() + h.T.reshape(2, 2)[1, 0] + np.max(h)
            + float(np.exp(-np.abs(x)).sum()) + np.sqrt(h * h + 1.0).sum())


def rnn(W, U, h0, xs, n):
    h = h0
    for t in range(n):
        h = np.tanh(W @ h + U * xs[t])
        if h[0] > 0.5:  # a per-lane branch on an array element
            h = h * 0.5
    return float(np.sum(h * h))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dense_layer_with_a_uniform_weight_matrix(backend):
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(4, 3)), rng.normal(size=4)
    k = hydra.compile(hydra.grad(dense, argnums=(0, 1, 2)), varying="x", backend=backend)
    for lanes in LANES:
        X = rng.normal(size=(lanes, 3))
        dW, db, dx = k(W, b, X)
        assert dW.shape == (lanes, 4, 3) and db.shape == (lanes, 4)  # per lane
        picked = [0, lanes - 1]  # the first and last lanes: ~40 parameters each
        check_arrays(dense, (dW[picked], db[picked], dx[picked]),
                     [(W, b, X[i]) for i in picked], [0, 1, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_arrays_through_a_loop_with_per_lane_trips(backend):
    rng = np.random.default_rng(1)
    W, U = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3)
    k = hydra.compile(hydra.grad(rnn, argnums=(0, 1, 2)), varying=("h0", "xs", "n"),
                      backend=backend)
    for lanes in LANES:
        h0, xs = rng.normal(size=(lanes, 3)), rng.normal(size=(lanes, 7))
        n = rng.integers(0, 8, lanes)
        n[0] = 0
        dW, dU, dh0 = k(W, U, h0, xs, n)
        picked = sorted({0, lanes // 2, lanes - 1})
        check_arrays(rnn, (dW[picked], dU[picked], dh0[picked]),
                     [(W, U, h0[i], xs[i], int(n[i])) for i in picked], [0, 1, 2])
        np.testing.assert_array_equal(dW[0], 0.0)  # no trip: W unused


def indexing(Ws, x, i, layer):
    a = Ws[layer]             # a uniform matrix picked by a uniform index
    b = x[1:3]
    c = Ws[0, :, i]           # a gather at a per-lane index
    d = np.clip(x, -0.5, 0.5)
    e = np.concatenate((x, b * 2.0))
    s = np.stack((x, x * x), axis=1)
    return float((a @ x).sum() + b.sum() + (c * c).sum() + d.sum() + Ws[:, 0].sum() + x[i]
                 + (e * e).sum() + s[2, 1] + s[-1].sum())


def layers(W, x, label):
    h = hydra.nn.relu(W @ x)
    return (-hydra.nn.log_softmax(h)[label] + float(hydra.nn.sigmoid(x).sum())
            + hydra.nn.softmax(h)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_indexing_slicing_joining_and_the_nn_layers(backend):
    rng = np.random.default_rng(2)
    Ws = rng.normal(size=(2, 4, 4))
    k = hydra.compile(hydra.grad(indexing, argnums=(0, 1)), varying=("x", "i"),
                      backend=backend)
    W = rng.normal(size=(3, 4))
    n = hydra.compile(hydra.grad(layers, argnums=(0, 1)), varying=("x", "label"),
                      backend=backend)
    for lanes in LANES:
        X, i = rng.normal(size=(lanes, 4)), rng.integers(-4, 4, lanes)
        dWs, dx = k(Ws, X, i, 1)
        picked = sorted({0, lanes - 1})
        check_arrays(indexing, (dWs[picked], dx[picked]),
                     [(Ws, X[j], int(i[j]), 1) for j in picked], [0, 1])
        labels = rng.integers(0, 3, lanes)
        dW, dx = n(W, X, labels)
        check_arrays(layers, (dW[picked], dx[picked]),
                     [(W, X[j], int(labels[j])) for j in picked], [0, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_of_an_array_has_gradient_0_at_0(backend):
    r = hydra.compile(hydra.grad(lambda v: float(hydra.nn.relu(v).sum())), varying="v",
                      backend=backend)
    np.testing.assert_array_equal(r(np.array([[-1.0, 0.0, 2.0]])), [[0.0, 0.0, 1.0]])
    f = hydra.compile(lambda v: hydra.nn.relu(v), varying="v", backend=backend)
    np.testing.assert_array_equal(f(np.array([[-1.0, -0.0, np.nan, 2.0]])),
                                  [[0.0, 0.0, np.nan, 2.0]])


def cnn(w, b, x):
    h = hydra.nn.relu(hydra.nn.conv2d(x, w, b, padding=1))
    p = hydra.nn.max_pool2d(h, 2)
    return float((p * p).sum())


def strided(w, x):
    return float(np.tanh(hydra.nn.conv2d(x, w, stride=2)).sum())


def pooled(x):
    return float(hydra.nn.max_pool2d(x, 2).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv2d_and_max_pool2d(backend):
    rng = np.random.default_rng(3)
    w, b, w2 = rng.normal(size=(2, 1, 3, 3)), rng.normal(size=2), rng.normal(size=(2, 1, 2, 2))
    k = hydra.compile(hydra.grad(cnn, argnums=(0, 1, 2)), varying="x", backend=backend)
    k2 = hydra.compile(hydra.grad(strided, argnums=(0, 1)), varying="x", backend=backend)
    for lanes in LANES:
        X, X2 = rng.normal(size=(lanes, 1, 4, 4)), rng.normal(size=(lanes, 1, 5, 5))
        picked = sorted({0, lanes - 1})
        gs = k(w, b, X)
        check_arrays(cnn, [g[picked] for g in gs], [(w, b, X[j]) for j in picked], [0, 1, 2])
        gs = k2(w2, X2)
        check_arrays(strided, [g[picked] for g in gs], [(w2, X2[j]) for j in picked], [0, 1])
    # a tie in a window: the first maximum in row-major order gets it all (as PyTorch)
    p = hydra.compile(hydra.grad(pooled), varying="x", backend=backend)
    np.testing.assert_array_equal(p(np.ones((1, 1, 2, 2))), [[[[1.0, 0.0], [0.0, 0.0]]]])


def averaged(w, x):
    h = hydra.nn.avg_pool2d(np.tanh(hydra.nn.conv2d(x, w, padding=1)), 2)
    return float((h * h).sum() + hydra.nn.avg_pool2d(x, 3, stride=2).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_avg_pool2d(backend):
    rng = np.random.default_rng(5)
    w = rng.normal(size=(2, 1, 3, 3))
    k = hydra.compile(hydra.grad(averaged, argnums=(0, 1)), varying="x", backend=backend)
    for lanes in LANES:
        X = rng.normal(size=(lanes, 1, 5, 5))
        picked = sorted({0, lanes - 1})
        gs = k(w, X)
        check_arrays(averaged, [g[picked] for g in gs], [(w, X[j]) for j in picked], [0, 1])


def guarded(x):
    return float(np.where(x > 0, np.sqrt(x), 0.0).sum()
                 + np.where(x < 1.0, 1.0, np.log(x - 1.0)).sum())


def guarded_number(x):
    return np.where(x > 0, np.sqrt(x), -x) * 2.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unselected_branch_of_where_contributes_zero_never_nan(backend):
    g = hydra.compile(hydra.grad(guarded), varying="x", backend=backend)
    out = g(np.array([[-1.0, 0.0, 4.0, 2.0]]))
    np.testing.assert_allclose(out, [[0.0, 0.0, 0.25 + 1 / 3, 0.5 / np.sqrt(2) + 1.0]])
    n = hydra.compile(hydra.grad(guarded_number), varying="x", backend=backend)
    np.testing.assert_array_equal(n(np.array([-1.0, 0.0, 4.0])), [-2.0, -2.0, 0.5])


def tanh_layer(W, x):
    return float(np.tanh(W @ x).sum())


d_tanh_layer = hydra.grad(tanh_layer)


def batch_gradient(W, x):
    return hydra.lanesum(d_tanh_layer(W, x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanesum_of_a_uniform_weight_gradient_is_one_gemm(backend):
    from hydra.types import ArrayType, FLOAT64
    k = hydra.compile(batch_gradient, varying="x", backend=backend)
    text = k.dump_ir("predicated", types=[ArrayType(FLOAT64, 2, (3, 4)),
                                          ArrayType(FLOAT64, 1, (4,))])
    assert "lanesum_outer" in text and "fn='outer'" not in text
    assert text.count("fn='matmul'") == 1  # the forward W @ x only: no W.T @ g for x
    rng = np.random.default_rng(4)
    W, X = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    expected = sum(np.outer(1 - np.tanh(W @ x) ** 2, x) for x in X)
    np.testing.assert_allclose(k(W, X), expected, rtol=1e-12)


def clipped(x):
    return float(np.clip(x, -0.5, 0.5).sum())


def extremes(x):
    return float(np.max(x)) + float(x.min(axis=0).sum())


def test_array_kinks_clip_inclusive_and_ties_of_reductions_split_equally():
    np.testing.assert_array_equal(hydra.grad(clipped)(np.array([-0.5, 0.5, 0.7, -0.7, 0.0])),
                                  [1.0, 1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(
        hydra.grad(extremes)(np.array([[1.0, 3.0], [3.0, 1.0], [1.0, 0.0]])),
        [[0.5, 0.5], [0.5, 0.0], [0.5, 1.0]])


def fills(x, W, n):
    h = np.zeros(3)
    h[0] = x[0] * x[1]
    h[1] = np.sin(x[1])
    h[0] = h[0] + x[2]          # an overwritten element: its old value's adjoint
    for i in range(n):
        h[i % 3] = h[i % 3] * 0.5 + x[i % 3]
        if h[2] > 0.2:
            h[2] = h[2] * h[1]
    buf = np.zeros((2, 3))
    buf[0] = W @ h
    buf[1, :] = h * 2.0
    return float((buf * buf).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_stores_into_a_lanes_own_arrays(backend):
    rng = np.random.default_rng(5)
    W = rng.normal(size=(3, 3))
    k = hydra.compile(hydra.grad(fills, argnums=(0, 1)), varying=("x", "n"), backend=backend)
    for lanes in LANES:
        X, n = rng.normal(size=(lanes, 3)), rng.integers(0, 8, lanes)
        dx, dW = k(X, W, n)
        picked = sorted({0, lanes // 2, lanes - 1})
        check_arrays(fills, (dx[picked], dW[picked]),
                     [(X[j], W, int(n[j])) for j in picked], [0, 1])
