"""hydra.grad of per-lane array code (SPEC sections 8 and 11) on numpy and cpu at 1, 3
and 17 lanes, against float64 central differences (at most ~200 parameters per check):
elementwise ufuncs with broadcasting, ``@`` with a uniform weight matrix (each lane's
gradient of W is its own ``np.outer(dz, x)``), reductions, reshape/transpose, element
loads, and arrays carried through a loop with per-lane trip counts."""

import numpy as np
import pytest

import hydra
from tests.gradcheck import check_arrays

BACKENDS = ["numpy", "cpu"]
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
