"""Gradients at speed (the gradients-at-speed issue): a uniform weight's batch gradient
``lanesum(dW)`` is summed where its terms are made (one GEMM per outer product, a
uniform accumulator in a loop's reverse), never as N per-example copies; each against
the per-example oracle (the plain function's gradient, lane by lane)."""

import numpy as np
import pytest

import hydra
from hydra import lanesum
from hydra.types import FLOAT64, INT64, ArrayType


def rnn_loss(xs, n, Wx, Wh, b):
    h = np.zeros(Wh.shape[0])
    for t in range(n):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
    return np.sum(h * h)


d_rnn = hydra.grad(rnn_loss, argnums=(2, 3, 4))


def rnn_step(xs, n, Wx, Wh, b):
    dWx, dWh, db = d_rnn(xs, n, Wx, Wh, b)
    return lanesum(dWx), lanesum(dWh), lanesum(db)


def twice_loss(x, W, V):
    h = np.tanh(W @ x)
    if h[0] > 0.0:              # a per-lane branch: W used again on one side only
        h = h + W @ h[:3]
    return float(np.sum(V @ h)) + float(np.sum(W @ x) ** 2)


d_twice = hydra.grad(twice_loss, argnums=(1, 2))


def twice_step(x, W, V):
    dW, dV = d_twice(x, W, V)
    return lanesum(dW), lanesum(dV)


def _oracle(loss, argnums, args, varying):
    """The per-example gradients summed in Python."""
    n = len(args[varying[0]])
    total = None
    for i in range(n):
        one = [a[i] if k in varying else a for k, a in enumerate(args)]
        one = [int(a) if isinstance(a, np.integer) else a for a in one]
        g = hydra.grad(loss, argnums=argnums)(*one)
        total = list(g) if total is None else [t + x for t, x in zip(total, g)]
    return total


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_loops_weight_gradient_sums_per_trip_without_per_lane_copies(backend):
    rng = np.random.default_rng(0)
    N = 23
    xs, n = rng.normal(size=(N, 5, 3)), rng.integers(0, 6, N)
    Wx, Wh, b = rng.normal(size=(4, 3)) * .5, rng.normal(size=(4, 4)) * .5, rng.normal(size=4)
    k = hydra.compile(rnn_step, varying=("xs", "n"), backend=backend)
    got = k(xs, n, Wx, Wh, b)
    for g, e in zip(got, _oracle(rnn_loss, (2, 3, 4), (xs, n, Wx, Wh, b), (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    text = k.dump_ir("predicated", types=[ArrayType(FLOAT64, 2, (5, 3)), INT64,
                                          ArrayType(FLOAT64, 2, (4, 3)),
                                          ArrayType(FLOAT64, 2, (4, 4)),
                                          ArrayType(FLOAT64, 1, (4,))])
    assert text.count("fn='lanesum_outer'") == 2 and "fn='outer'" not in text
    # no loop carries a per-lane (v) matrix: the accumulators are uniform (u)
    assert "v array[float64, (4, 4)]" not in text and "v array[float64, (4, 3)]" not in text


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_weight_used_twice_and_in_a_branch_sums_each_use_as_a_gemm(backend):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(17, 3))
    W, V = rng.normal(size=(5, 3)), rng.normal(size=(2, 5))
    k = hydra.compile(twice_step, varying="x", backend=backend)
    for g, e in zip(k(X, W, V), _oracle(twice_loss, (1, 2), (X, W, V), (0,))):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    text = k.dump_ir("predicated", types=[ArrayType(FLOAT64, 1, (3,)),
                                          ArrayType(FLOAT64, 2, (5, 3)),
                                          ArrayType(FLOAT64, 2, (2, 5))])
    # W @ x twice and V @ h outside the branch, W @ h[:3] in it (over the lanes that
    # took it, summed in the arm): four GEMMs, no per-lane outer product
    assert text.count("fn='lanesum_outer'") == 4 and "fn='outer'" not in text


def clipped_step(x, label, W, V, clip):
    """DP-SGD's clipping: each lane's gradient scaled to norm <= clip, then summed."""
    gW, gV = d_mlp(x, label, W, V)
    norm = np.sqrt(np.sum(gW * gW) + np.sum(gV * gV))
    scale = np.float64(min(1.0, clip / norm))
    return lanesum(gW * scale), lanesum(gV / (1.0 / scale))


def mlp_loss(x, label, W, V):
    z = V @ np.tanh(W @ x)
    s = z - z.max()
    return np.log(np.sum(np.exp(s))) - s[label]


d_mlp = hydra.grad(mlp_loss, argnums=(2, 3))


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_per_example_clipping_never_makes_the_per_example_gradients(backend):
    rng = np.random.default_rng(2)
    X, labels = rng.normal(size=(19, 6)), rng.integers(0, 3, 19)
    W, V = rng.normal(size=(5, 6)), rng.normal(size=(3, 5))
    k = hydra.compile(clipped_step, varying=("x", "label"), backend=backend)
    got = k(X, labels, W, V, 0.5)
    expected = [0.0, 0.0]
    for x, label in zip(X, labels):
        gW, gV = d_mlp(x, int(label), W, V)
        scale = min(1.0, 0.5 / np.sqrt(np.sum(gW ** 2) + np.sum(gV ** 2)))
        expected = [expected[0] + gW * scale, expected[1] + gV * scale]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-11, atol=1e-12)
    text = k.dump_ir("predicated", types=[ArrayType(FLOAT64, 1, (6,)), INT64,
                                          ArrayType(FLOAT64, 2, (5, 6)),
                                          ArrayType(FLOAT64, 2, (3, 5)), FLOAT64])
    # the norms from the outer products' factors, the sums as GEMMs: no [N, 5, 6] array
    assert "fn='outer'" not in text and text.count("fn='lanesum_outer'") == 2


def exit_loss(x, Ws, E, tok, thr):
    h = x + E[tok]              # a gather at a per-lane place: its adjoint a scatter-add
    for l in range(Ws.shape[0]):  # noqa: E741
        h = h + np.tanh(Ws[l] @ h)
        if np.sum(h * h) > thr:
            break
    return float(np.sum(h))


d_exit = hydra.grad(exit_loss, argnums=(1, 2))


def exit_step(x, Ws, E, tok, thr):
    gW, gE = d_exit(x, Ws, E, tok, thr)
    return lanesum(gW), lanesum(gE)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_layer_stacks_gradient_is_summed_per_layer_and_a_gathers_scattered(backend):
    """Early exit: in the reverse sweep (aligned with the forward loop) the layer index
    popped from the tape is uniform, so ``Ws[l]`` is one matrix and its adjoint one GEMM
    put in place ``l``; ``E[tok]``'s adjoint sums each row's lanes apart."""
    rng = np.random.default_rng(5)
    X, tok, thr = rng.normal(size=(21, 4)), rng.integers(0, 3, 21), rng.uniform(3, 30, 21)
    Ws, E = rng.normal(size=(4, 4, 4)) * 0.4, rng.normal(size=(3, 4))
    k = hydra.compile(exit_step, varying=("x", "tok", "thr"), backend=backend)
    got = k(X, Ws, E, tok, thr)
    exp = _oracle(exit_loss, (1, 2), (X, Ws, E, tok, thr), (0, 3, 4))
    for g, e in zip(got, exp):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    text = k.dump_ir("predicated", types=[ArrayType(FLOAT64, 1, (4,)),
                                          ArrayType(FLOAT64, 3, (4, 4, 4)),
                                          ArrayType(FLOAT64, 2, (3, 4)), INT64, FLOAT64])
    assert "v array[float64, (4, 4, 4)]" not in text and "v array[float64, (4, 4)]" not in text
    assert "fn='outer'" not in text


def newton(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_checkpointed_gradients_equal_the_taped_ones(backend, k):
    """checkpoint=K: state saved every K trips, segments recomputed; the same gradients
    (the same operations in the same order), for loops with per-lane trip counts, a
    loop carrying arrays and a break."""
    rng = np.random.default_rng(7)
    a = np.linspace(0.5, 40.0, 9)
    g = hydra.compile(hydra.grad(newton, checkpoint=k), varying="a", backend=backend)
    np.testing.assert_allclose(g(a), 0.5 / np.sqrt(a), rtol=1e-9)
    N = 11
    xs, n = rng.normal(size=(N, 5, 3)), rng.integers(0, 6, N)
    Wx, Wh, b = rng.normal(size=(4, 3)) * .5, rng.normal(size=(4, 4)) * .5, rng.normal(size=4)
    plain = hydra.compile(hydra.grad(rnn_loss, argnums=(2, 3, 4)), varying=("xs", "n"),
                          backend=backend)(xs, n, Wx, Wh, b)
    saved = hydra.compile(hydra.grad(rnn_loss, argnums=(2, 3, 4), checkpoint=k),
                          varying=("xs", "n"), backend=backend)(xs, n, Wx, Wh, b)
    for p, s in zip(plain, saved):
        np.testing.assert_allclose(s, p, rtol=1e-13, atol=1e-13)
    X, tok, thr = rng.normal(size=(9, 4)), rng.integers(0, 3, 9), rng.uniform(3, 30, 9)
    Ws, E = rng.normal(size=(4, 4, 4)) * 0.4, rng.normal(size=(3, 4))
    args = (X, Ws, E, tok, thr)
    plain = hydra.compile(hydra.grad(exit_loss, argnums=(1, 2)), varying=("x", "tok", "thr"),
                          backend=backend)(*args)
    saved = hydra.compile(hydra.grad(exit_loss, argnums=(1, 2), checkpoint=k),
                          varying=("x", "tok", "thr"), backend=backend)(*args)
    for p, s in zip(plain, saved):
        np.testing.assert_allclose(s, p, rtol=1e-13, atol=1e-13)


def test_checkpoint_must_be_a_positive_int():
    for bad in (0, -2, 1.5, True, "3"):
        with pytest.raises(TypeError, match="checkpoint must be a positive int"):
            hydra.grad(newton, checkpoint=bad)


d_newton = hydra.grad(newton)


def two_gradients(x, a, n):
    """Two gradients through loops in one kernel (their tapes share ids: each runs its
    forward and reverse before the next starts), one of them twice, with a uniform and
    with a varying argument."""
    return d_newton(a) + d_newton(x) + d_rnn(np.ones((5, 3)) * x, n, np.eye(4, 3),
                                             np.eye(4) * 0.5, np.ones(4))[1].sum()


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_two_gradients_through_loops_in_one_kernel(backend):
    x, n = np.linspace(0.5, 3.0, 7), np.arange(7) % 6
    k = hydra.compile(two_gradients, varying=("x", "n"), backend=backend)
    got = k(x, 2.0, n)
    for i in range(7):
        want = 0.5 / np.sqrt(2.0) + 0.5 / np.sqrt(x[i]) + d_rnn(
            np.ones((5, 3)) * x[i], int(n[i]), np.eye(4, 3), np.eye(4) * 0.5,
            np.ones(4))[1].sum()
        assert abs(got[i] - want) < 1e-9


def test_a_loops_weight_gradient_on_dask_chunks():
    """Under Dask the sums stay at the top level (its stages combine those): the loop's
    per-lane accumulators are summed per chunk, then across chunks."""
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(9)
    N = 13
    xs, n = rng.normal(size=(N, 5, 3)), rng.integers(0, 6, N)
    Wx, Wh, b = rng.normal(size=(4, 3)) * .5, rng.normal(size=(4, 4)) * .5, rng.normal(size=4)
    k = hydra.compile(rnn_step, varying=("xs", "n"), backend="cpu")
    got = k(da.from_array(xs, chunks=(5, 5, 3)), da.from_array(n, chunks=5), Wx, Wh, b)
    for g, e in zip(got, k(xs, n, Wx, Wh, b)):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-12, atol=1e-12)
