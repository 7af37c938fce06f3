"""Per-lane arrays under divergent control flow, cross-lane reductions of arrays,
compaction and hydra.nn (SPEC section 8), against the per-example function."""

import numpy as np
import pytest
from arrays_oracle import check

import hydra
import hydra.executor.arrays as hostarrays
from hydra.executor.policy import Policy
from hydra import lanemax, lanemin, laneprod, lanesum, nlanes, nn

f32 = np.float32



def rnn_one(xs, n, Wx, Wh, b):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
    return h


def early_exit_one(x, Ws, bs, Wc, bc, thr):
    h = x
    for l in range(Ws.shape[0]):  # noqa: E741 (ML.md's own spelling)
        h = h + np.maximum(Ws[l] @ h + bs[l], 0.0)
        z = Wc @ h + bc
        e = np.exp(z - z.max())
        conf = e.max() / e.sum()
        if conf > thr:
            break
    return z, l + 1


def rnn_args(n, seed=0):
    r = np.random.default_rng(seed)
    return [r.standard_normal((n, 9, 5)).astype(f32), r.integers(0, 10, n),
            r.standard_normal((6, 5)).astype(f32), (r.standard_normal((6, 6)) * .3).astype(f32),
            r.standard_normal(6).astype(f32)]


def early_args(n, seed=1):
    r = np.random.default_rng(seed)
    return [r.standard_normal((n, 8)).astype(f32), (r.standard_normal((4, 8, 8)) / 3).astype(f32),
            r.standard_normal((4, 8)).astype(f32), r.standard_normal((3, 8)).astype(f32),
            r.standard_normal(3).astype(f32), r.uniform(0.3, 0.9, n).astype(f32)]


def test_rnn_ragged_sequences(be, n):
    check(rnn_one, ("xs", "n"), rnn_args(n), n, be)


def test_early_exit_keeps_each_lanes_arrays(be, n):
    z, layers = check(early_exit_one, ("x", "thr"), early_args(n), n, be)
    assert layers.dtype == np.int64


def test_layer_counter_stays_uniform_inside_the_loop():
    """In lockstep every active lane is at the same layer: Ws[l] is one uniform matrix
    (the JAX trap of ML.md), l + 1 after the loop is per lane."""
    args = early_args(3)
    k = hydra.compile(early_exit_one, varying=("x", "thr"), backend="numpy")
    ir = k.dump_ir("ssa", *args)
    assert "u array[float32, (8, 8)] = array[fn='getitem'" in ir
    assert "v array[float32, (8,)] = array[fn='matmul'" in ir


def branches(x, c, W):
    h = x * 2.0
    if c > 0:
        h = W @ h
        if c > 1:
            return h.sum()
    else:
        h = np.tanh(h)
    while h.max() > 0.5:
        h = h - 0.25
    return h.sum() * 2


def test_divergent_if_while_return(be, n):
    r = np.random.default_rng(2)
    args = [r.standard_normal((n, 4)).astype(f32), r.uniform(-1, 2, n).astype(f32),
            r.standard_normal((4, 4)).astype(f32)]
    check(branches, ("x", "c"), args, n, be)


def written_after_flow(x, W, flag):
    if flag > 0:                 # a uniform condition: t is still each lane's own array
        t = W[0] + 1.0
    else:
        t = W[1] * 2.0
    t[0] = x[0]
    u = W[0] * 3.0
    for _ in range(2):           # and so is an array a loop carries
        u = u + W[1]
    u[1:] = x[1:]
    v = np.exp(W[1])
    if flag > 1:
        v = v.T
    v[2] = x[2]                  # through an if that may pass the same array on
    return t, u, v


@pytest.mark.parametrize("flag", [0, 1, 2])
def test_arrays_computed_from_uniforms_and_written_after_an_if_or_loop_are_per_lane(
        be, n, flag):
    r = np.random.default_rng(4)
    args = [r.standard_normal((n, 3)), r.standard_normal((2, 3)), flag]
    check(written_after_flow, ("x",), args, n, be, exact=True)


def lane_reductions(x, d):
    g = lanesum(np.outer(d, x)) / nlanes()
    return g, lanemax(x), lanemin(x), laneprod(x[:2]), lanesum(x)


def test_cross_lane_reductions_of_arrays(be, n):
    r = np.random.default_rng(3)
    x = r.standard_normal((n, 4)).astype(f32)
    d = r.standard_normal((n, 3)).astype(f32)
    g, mx, mn, pr, s = hydra.compile(lane_reductions, varying=("x", "d"), backend=be)(x, d)
    np.testing.assert_allclose(g, sum(np.outer(d[i], x[i]) for i in range(n)) / n, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(mx, x.max(axis=0))
    np.testing.assert_array_equal(mn, x.min(axis=0))
    np.testing.assert_allclose(pr, x[:, :2].prod(axis=0), rtol=1e-5)
    np.testing.assert_allclose(s, x.sum(axis=0), rtol=1e-5, atol=1e-5)


def masked_lanesum(x, c):
    if c > 0:
        return lanesum(x)
    return np.zeros(4, dtype=np.float32)


def test_lanesum_counts_only_active_lanes(be):
    x = np.arange(20, dtype=f32).reshape(5, 4)
    c = np.array([1, -1, 1, -1, 1])
    got = hydra.compile(masked_lanesum, varying=("x", "c"), backend=be)(x, c)
    want = x[c > 0].sum(axis=0)
    np.testing.assert_array_equal(got[c > 0], np.broadcast_to(want, (3, 4)))
    np.testing.assert_array_equal(got[c <= 0], 0)


def test_lanesum_of_outer_is_one_gemm():
    k = hydra.compile(lane_reductions, varying=("x", "d"), backend="numpy")
    ir = k.dump_ir("ssa", np.ones((3, 4), f32), np.ones((3, 3), f32))
    assert "array[fn='lanesum_outer'" in ir


@pytest.mark.parametrize("below", [0.0, 1.01])
def test_compaction_and_masking_give_the_same_results(be, below, monkeypatch):
    """Per-op compaction below 0: never; below 1.01: always compact the active rows
    (per loop never: the products compact one by one).  The numpy reference never
    compacts: both runs are masked there."""
    calls = []
    real = hostarrays._compacted

    def spy(*a):
        calls.append(a[2])
        return real(*a)
    monkeypatch.setattr(hostarrays, "_compacted", spy)
    args = rnn_args(17)
    got = hydra.compile(rnn_one, varying=("xs", "n"), backend=be,
                        compaction=Policy(op_below=below, loop_below=0.0))(*args)
    other = hydra.compile(rnn_one, varying=("xs", "n"), backend=be,
                          compaction=Policy(op_below=1.01 - below, loop_below=0.0))(*args)
    np.testing.assert_array_equal(got, other)
    # (cuda's product is a namespace step over every row: compaction has no effect there)
    assert set(calls) == (set() if be in ("numpy", "cuda") else {"matmul"})


def cnn(x, w1, b1, w2):
    h = nn.relu(nn.conv2d(x, w1, b1, padding=1))
    h = nn.max_pool2d(h, 2)
    h = nn.conv2d(h, w2, stride=2)
    z = h.reshape(-1)
    return nn.softmax(z), nn.log_softmax(z), nn.sigmoid(z)


def test_nn_layers(be, n):
    r = np.random.default_rng(4)
    args = [r.standard_normal((n, 2, 8, 8)).astype(f32),
            r.standard_normal((3, 2, 3, 3)).astype(f32), r.standard_normal(3).astype(f32),
            r.standard_normal((4, 3, 2, 2)).astype(f32)]
    check(cnn, ("x",), args, n, be)


def test_conv2d_is_pytorchs_cross_correlation():
    r = np.random.default_rng(5)
    x = r.standard_normal((2, 7, 6))
    w = r.standard_normal((3, 2, 3, 2))
    b = r.standard_normal(3)
    out = nn.conv2d(x, w, b, stride=2, padding=1)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    want = np.zeros((3, 4, 4))
    for o in range(3):
        for i in range(4):
            for j in range(4):
                want[o, i, j] = (xp[:, 2 * i:2 * i + 3, 2 * j:2 * j + 2] * w[o]).sum() + b[o]
    np.testing.assert_allclose(out, want)
    np.testing.assert_array_equal(nn.max_pool2d(np.arange(16.0).reshape(1, 4, 4), 2),
                                  [[[5, 7], [13, 15]]])


def every_intrinsic(x, c):
    if c > 0:
        k = (hydra.lane() + 2) % hydra.nlanes()
        return (hydra.broadcast(x, 0) + hydra.shuffle(x, k) + hydra.rotate(x, 1)
                + hydra.prefixsum(x) + hydra.laneany(x > 1.0) + hydra.laneall(x > -1.0)
                + lanesum(x > 0).astype(np.float32))
    return x * 0.0


def test_every_cross_lane_intrinsic_works_elementwise_on_arrays(be):
    x = np.random.default_rng(6).standard_normal((5, 3)).astype(f32)
    got = hydra.compile(every_intrinsic, varying=("x", "c"), backend=be)(x, np.ones(5))
    i = np.arange(5)
    want = (x[0] + x[(i + 2) % 5] + x[(i + 1) % 5] + (np.cumsum(x, 0) - x) + (x > 1).any(0)
            + (x > -1).all(0) + (x > 0).sum(0).astype(f32))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(hydra.HydraError, match="shuffle reads lane 1, which is not active"):
        hydra.compile(every_intrinsic, varying=("x", "c"), backend=be)(x, np.array([1, 0, 1,
                                                                                   1, 1]))


def prints(x, W):
    print("h", x * 2, W[0])


def test_print_shows_each_lanes_array_as_numpy_does(be, capsys):
    x = np.arange(6.0).reshape(3, 2)
    W = np.ones((2, 2), f32)
    hydra.compile(prints, varying=("x",), backend=be)(x, W)
    got = capsys.readouterr().out
    for i in range(3):
        prints(x[i], W)
    assert got == capsys.readouterr().out


def counter_times_array(x, n):
    s = x * 1
    for t in range(int(n)):      # int(): Python's range yields Python ints
        s = s + x * t
    return s


def last_product(x, n):
    s = x * n                    # float64: n is an np.int64
    for t in range(n):
        s = x * t
    return s


def test_range_counter_has_its_bounds_type(be):
    """guide section 3: a NumPy integer bound gives a counter of that type (x * t is
    float64 for float32 x); range(int(n)) gives Python's weak int (float32)."""
    x = np.ones((3, 4), f32)
    check(counter_times_array, ("x",), [x, np.int64(3)], 3, be, exact=True)
    got = hydra.compile(last_product, varying="x", backend=be)(x, np.int64(3))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.full((3, 4), 2.0))
