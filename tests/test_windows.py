"""hydra.windows: convolution as im2col + batched GEMMs and the pools as passes over
strided slices, against loops written from the definitions (one image, one window at a
time), and compiled per-example CNNs against the per-example function."""

import numpy as np
import pytest

import hydra
from hydra import nn, windows
from test_arrays_spec import conv_loops  # a convolution by its definition, one image

BACKENDS = ["numpy", "cpu"]


def windows_of(x, k, s):
    h, w = x.shape[-2:]
    for i in range(0, h - k + 1, s):
        yield [x[..., i:i + k, j:j + k] for j in range(0, w - k + 1, s)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k,stride,padding", [
    ((3, 7, 9), 3, 1, 1), ((2, 8, 8), 3, 2, 1), ((1, 10, 10), 5, 1, 0), ((3, 9, 7), 2, 3, 2),
    ((2, 5, 5), 5, 1, 2), ((4, 6, 6), 1, 1, 0), ((2, 11, 8), 3, 2, 0)])
def test_conv2d_is_the_loops(shape, k, stride, padding, dtype, monkeypatch):
    rng = np.random.default_rng(sum(shape) + k)
    x = rng.standard_normal((5, *shape)).astype(dtype)
    w = rng.standard_normal((3, shape[0], k, k)).astype(dtype)
    b = rng.standard_normal(3).astype(dtype)
    want = np.stack([conv_loops(x[i], w, b, stride, padding) for i in range(5)])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    got = windows.conv2d(x, w, b, stride, padding)
    assert got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(windows.conv2d(x[1], w, None, stride, padding),
                               want[1] - b[:, None, None], rtol=tol, atol=tol)
    # chunks of images and of output rows (BLAS may block the sums otherwise), both
    # ways of writing the columns when the stride is 1, and Winograd's F(2x2, 3x3) (3x3,
    # stride 1); each also with the relu and a 2x2 max pool taken from each chunk, which
    # are the same bits as pooling the relu of the whole convolution
    monkeypatch.setattr(windows, "MIN_COLUMNS", 1)
    relu = np.where(want <= 0, 0.0, want).astype(dtype)
    for size in (1, x[0].size * k * k * x.itemsize):
        for wide, wino in ((True, False), (False, False), (True, True)):
            monkeypatch.setattr(windows, "COLUMN_BYTES", size)
            monkeypatch.setattr(windows, "WIDE", wide)
            monkeypatch.setattr(windows, "WINOGRAD_CHANNELS", 1 if wino else 10 ** 9)
            monkeypatch.setattr(windows, "WINOGRAD_WIDTH", 1 if wino else 10 ** 9)
            got = windows.conv2d(x, w, b, stride, padding)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
            if got.shape[-1] < 2 or got.shape[-2] < 2:
                continue
            pooled = windows.conv2d(x, w, b, stride, padding, relu=windows.relu_, pool=2)
            windows.relu_(got)
            np.testing.assert_array_equal(pooled, windows.max_pool2d(got, 2))
            np.testing.assert_allclose(pooled, windows.max_pool2d(relu, 2), rtol=tol, atol=tol)


def test_conv2d_promotes_as_numpy():
    x, w = np.ones((2, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32)
    assert windows.conv2d(x, w, np.ones(1)).dtype == np.float64
    assert windows.conv2d(x, w.astype(np.float64)).dtype == np.float64


@pytest.mark.parametrize("k,stride", [(2, None), (3, 2), (3, 1), (2, 1)])
def test_pools_are_the_window_loops(k, stride):
    rng = np.random.default_rng(k)
    x = rng.standard_normal((4, 3, 9, 7)).astype(np.float32)
    x[0, 0, :4, :4] = 0.0  # ties
    s = k if stride is None else stride
    mx = np.array([[w.max(axis=(-2, -1)) for w in row] for row in windows_of(x, k, s)])
    mx = np.moveaxis(mx, (0, 1), (-2, -1))
    np.testing.assert_array_equal(windows.max_pool2d(x, k, stride), mx)
    # the mean adds in the window's row-major order, then divides
    total = [[sum(w[..., i, j] for i in range(k) for j in range(k)) / np.float32(k * k)
              for w in row] for row in windows_of(x, k, s)]
    np.testing.assert_array_equal(windows.avg_pool2d(x, k, stride),
                                  np.moveaxis(np.array(total), (0, 1), (-2, -1)))
    assert windows.avg_pool2d(x.astype(np.int32), k, stride).dtype == np.float64
    # the adjoint: <avg(x), g> == <x, avg_grad(g)>
    g = rng.standard_normal(mx.shape)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose((windows.avg_pool2d(x64, k, stride) * g).sum(),
                               (x64 * windows.avg_pool2d_grad(g, k, 9, 7, stride)).sum())
    with pytest.raises(ValueError):
        windows.max_pool2d(x[..., :1], 2)


def lenet_like(x, W1, b1, W2, b2, F, c):
    h = nn.max_pool2d(nn.relu(nn.conv2d(x, W1, b1)), 2)
    h = nn.avg_pool2d(nn.relu(nn.conv2d(h, W2, b2, stride=1, padding=1)), 2)
    return F @ h.reshape(4 * 2 * 2) + c


def small_vgg(x, W1, b1, W2):
    h = nn.relu(nn.conv2d(x, W1, b1, padding=1))
    return nn.max_pool2d(nn.conv2d(h, W2, stride=2, padding=1), 3, stride=1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_cnns_are_the_per_example_function(backend, dtype):
    rng = np.random.default_rng(11)

    def r(*shape):
        return (rng.standard_normal(shape) / 2).astype(dtype)
    cases = [(lenet_like, r(9, 1, 12, 12), (r(3, 1, 3, 3), r(3), r(4, 3, 3, 3), r(4),
                                            r(5, 16), r(5))),
             (small_vgg, r(6, 2, 8, 8), (r(4, 2, 3, 3), r(4), r(3, 4, 3, 3)))]
    for fn, x, params in cases:
        k = hydra.compile(fn, varying="x", backend=backend)
        got = k(x, *params)
        want = np.stack([fn(x[i], *params) for i in range(len(x))])
        assert got.dtype == want.dtype == dtype
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def dense_relu(x, W1, b1, F, c):
    h = nn.relu(nn.conv2d(x, W1, b1, padding=1))
    h = nn.relu(F @ h.reshape(3 * 4 * 4) + c)
    return nn.relu(c + F @ np.tanh(h))  # the bias first: the same layer


def test_layer_steps_are_the_ops_bit_for_bit():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((7, 2, 4, 4)).astype(np.float32)
    x[0] = 0.0  # ties at 0: relu(-0.0) and relu(0.0) are +0.0
    x[1, 0, 0, 0] = np.nan
    W1 = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b1 = np.zeros(3, np.float32)
    b1[0] = -0.0
    F = rng.standard_normal((48, 48)).astype(np.float32)
    c = rng.standard_normal(48).astype(np.float32)
    k = hydra.compile(dense_relu, varying="x", backend="cpu")
    got = k(x, W1, b1, F, c)
    steps = [ln for ln in k.dump_ir("llvm", x, W1, b1, F, c).splitlines() if "layer step" in ln]
    ref = hydra.compile(dense_relu, varying="x", backend="numpy")(x, W1, b1, F, c)
    np.testing.assert_array_equal(got.view(np.int32), ref.view(np.int32))
    assert len(steps) == 3, steps


def conv_pool(x, W1, b1, W2, b2):
    h = nn.max_pool2d(nn.relu(nn.conv2d(x, W1, b1, padding=1)), 2)
    return nn.max_pool2d(nn.relu(nn.conv2d(h, W2, b2, padding=1)), 2)


@pytest.mark.parametrize("wino", [False, True])
def test_conv_relu_pool_is_one_step_bit_for_bit(wino, monkeypatch):
    monkeypatch.setattr(windows, "WINOGRAD_CHANNELS", 1 if wino else 10 ** 9)
    monkeypatch.setattr(windows, "WINOGRAD_WIDTH", 1 if wino else 10 ** 9)
    monkeypatch.setattr(windows, "COLUMN_BYTES", 1)  # chunks of two output rows
    monkeypatch.setattr(windows, "MIN_COLUMNS", 1)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((6, 2, 8, 8)).astype(np.float32)
    x[0] = 0.0  # ties at 0 in every window
    x[1, 0, 3, 3] = np.nan
    W1, W2 = (rng.standard_normal((o, c, 3, 3)).astype(np.float32) for o, c in ((3, 2), (4, 3)))
    b1, b2 = np.zeros(3, np.float32), rng.standard_normal(4).astype(np.float32)
    b1[0] = -0.0
    k = hydra.compile(conv_pool, varying="x", backend="cpu")
    got = k(x, W1, b1, W2, b2)
    ref = hydra.compile(conv_pool, varying="x", backend="numpy")(x, W1, b1, W2, b2)
    np.testing.assert_array_equal(got.view(np.int32), ref.view(np.int32))
    want = np.stack([conv_pool(x[i], W1, b1, W2, b2) for i in range(6)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    text = k.dump_ir("llvm", x, W1, b1, W2, b2)
    assert text.count("layer step (convolution, 2x2 max pool of each chunk") == 2, text


def by_hand(x, W1, b1, F, c):
    h = np.maximum(nn.conv2d(x, W1, b1, padding=1), 0.0)
    return np.maximum(0.0, F @ h.reshape(48) + c)


def test_layer_steps_take_np_maximum_too():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 2, 4, 4))
    x[0] = -0.0
    args = (x, rng.standard_normal((3, 2, 3, 3)), -np.zeros(3), rng.standard_normal((7, 48)),
            -np.zeros(7))
    k = hydra.compile(by_hand, varying="x", backend="cpu")
    got = k(*args)
    ref = hydra.compile(by_hand, varying="x", backend="numpy")(*args)
    np.testing.assert_array_equal(got.view(np.int64), ref.view(np.int64))
    text = k.dump_ir("llvm", *args)
    assert text.count("layer step") == 2 and "fused step" not in text, text


def pooled_by_hand(x):
    w = x.reshape(3, 4, 2, 3, 2)
    m = w.max(axis=(2, 4))
    return m, x.reshape(3, 4, 2, 3, 2).mean(axis=(-3, -1)), w.max(axis=(2, 3))  # not a pool


def test_hand_written_pools_are_pool_steps():
    x = np.random.default_rng(6).standard_normal((9, 3, 8, 6)).astype(np.float32)
    k = hydra.compile(pooled_by_hand, varying="x", backend="cpu")
    got = k(x)
    want = [np.stack([pooled_by_hand(x[i])[j] for i in range(9)]) for j in range(3)]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)  # summation order
    assert got[1].dtype == np.float32
    np.testing.assert_array_equal(got[2], want[2])
    text = k.dump_ir("llvm", x)
    assert text.count("pool step (max_pool2d") == 1 and text.count("pool step (avg_pool2d") == 1
