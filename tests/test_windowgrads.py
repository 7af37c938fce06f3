"""The window operations' adjoints at speed (``hydra/windowgrads.py``: conv2d's as
GEMMs over all lanes; ``hydra/executor/windowsteps.py``: max_pool2d's as one native
pass) against their definitions: the sums by the loops of their definition (SPEC
section 8's tolerance), max-pooling's bit for bit, on one image, on a stack of them
and through ``hydra.grad`` on the numpy and cpu backends."""

import numpy as np
import pytest

import hydra
from hydra import windowgrads, windows
from hydra.backends.machinecode import background
from hydra.types import FLOAT32, FLOAT64, ArrayType


def grad_weight_loops(x, g, kh, kw, stride, padding):
    """d<g, conv2d(x, W)>/dW by its definition, one image [C, H, W]."""
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    o, ho, wo = g.shape
    out = np.zeros((o, x.shape[0], kh, kw))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            out[:, :, i, j] = np.einsum("ohw,chw->oc", g.astype(np.float64), patch)
    return out


def grad_input_loops(g, w, height, width, stride, padding):
    """d<g, conv2d(x, w)>/dx by its definition: each output's g spread over its window."""
    o, c, kh, kw = w.shape
    _, ho, wo = g.shape
    out = np.zeros((c, height + 2 * padding, width + 2 * padding))
    for a in range(ho):
        for b in range(wo):
            out[:, a * stride:a * stride + kh, b * stride:b * stride + kw] += np.einsum(
                "o,ocij->cij", g[:, a, b].astype(np.float64), w)
    return out[:, padding:padding + height, padding:padding + width]


def max_pool_grad_loops(x, g, k, stride):
    """Each window's g to its first maximum in row-major order (argmax: a NaN first)."""
    s = k if stride is None else stride
    out = np.zeros(x.shape, np.result_type(x, g))
    for c in range(x.shape[0]):
        for a in range(g.shape[1]):
            for b in range(g.shape[2]):
                win = x[c, a * s:a * s + k, b * s:b * s + k].ravel()
                m = int(np.argmax(win))
                out[c, a * s + m // k, b * s + m % k] += g[c, a, b]
    return out


CONVS = [((1, 10, 10), 8, 3, 1, 0), ((2, 8, 7), 3, 3, 1, 1), ((3, 11, 9), 4, 3, 2, 1),
         ((2, 9, 9), 5, 5, 2, 2), ((4, 6, 6), 2, 1, 1, 0)]


@pytest.mark.parametrize("shape, o, k, stride, padding", CONVS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_adjoints_are_their_definitions(shape, o, k, stride, padding, dtype):
    rng = np.random.default_rng(sum(shape) + o + k)
    x = rng.standard_normal((5,) + shape).astype(dtype)
    w = rng.standard_normal((o, shape[0], k, k)).astype(dtype)
    g = rng.standard_normal(windows.conv2d(x, w, None, stride, padding).shape).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    dw = windowgrads.conv2d_grad_weight(x, g, k, k, stride, padding)
    dx = windowgrads.conv2d_grad_input(g, w, shape[1], shape[2], stride, padding)
    assert dw.dtype == dtype and dx.dtype == dtype and dx.flags.c_contiguous
    for n in range(5):
        want_w = grad_weight_loops(x[n], g[n], k, k, stride, padding)
        want_x = grad_input_loops(g[n], w, shape[1], shape[2], stride, padding)
        np.testing.assert_allclose(dw[n], want_w, rtol=tol, atol=tol * np.abs(want_w).max())
        np.testing.assert_allclose(dx[n], want_x, rtol=tol, atol=tol * np.abs(want_x).max())
        # one image (no leading axes) is the same definition
        np.testing.assert_allclose(windowgrads.conv2d_grad_weight(x[n], g[n], k, k, stride,
                                                                  padding), dw[n],
                                   rtol=tol, atol=tol * np.abs(want_w).max())
    # the adjoint identities: <conv2d(x, w), g> = <w, dW> = <x, dX>
    y = windows.conv2d(x.astype(np.float64), w.astype(np.float64), None, stride, padding)
    inner = float((y * g).sum())
    assert np.isclose(float((dw.sum(0) * w).sum()), inner, rtol=1e-4)
    assert np.isclose(float((dx * x).sum()), inner, rtol=1e-4)


def test_a_uniform_image_against_per_lane_adjoints_broadcasts():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 7))
    g = rng.standard_normal((6, 3, 5, 5))
    got = windowgrads.conv2d_grad_weight(x, g, 3, 3)
    assert got.shape == (6, 3, 2, 3, 3)
    for n in range(6):
        np.testing.assert_allclose(got[n], grad_weight_loops(x, g[n], 3, 3, 1, 0), rtol=1e-12,
                                   atol=1e-12)
    back = windowgrads.conv2d_grad_weight(np.stack([x] * 4), g[0], 3, 3)  # and the other way
    np.testing.assert_allclose(back, np.stack([got[0]] * 4), rtol=1e-12, atol=1e-12)


def awkward_images(rng, shape, dtype):
    """Few distinct values (ties in most windows), -0.0 beside 0.0, infinities, NaNs."""
    x = rng.integers(-2, 3, shape).astype(dtype)
    x[x == 1] = -0.0
    x.flat[::17] = np.inf
    x.flat[5::23] = -np.inf
    return x


@pytest.mark.parametrize("k, stride", [(2, None), (3, 1), (3, 2), (2, 3)])
def test_max_pool_adjoint_is_its_definition_bit_for_bit(k, stride):
    rng = np.random.default_rng(k * 10 + (stride or 0))
    x = awkward_images(rng, (4, 3, 9, 8), np.float32)
    x.flat[7::41] = np.nan
    g = rng.standard_normal((4,) + windows.max_pool2d(x[0], k, stride).shape).astype(np.float32)
    got = windowgrads.max_pool2d_grad(x, g, k, stride)
    for n in range(4):
        want = max_pool_grad_loops(x[n], g[n], k, stride)
        assert got[n].tobytes() == want.tobytes()


def pool_loss(x, v):
    return np.sum(hydra.nn.max_pool2d(x, 2) * v) + np.sum(hydra.nn.max_pool2d(x * 2.0, 3, 1))


pool_grad = hydra.grad(pool_loss)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_native_max_pool_adjoint_is_the_host_rule_bit_for_bit(dtype, monkeypatch):
    monkeypatch.setattr(background, "ENABLED", False)  # the loop built at the first call
    t = {np.float32: FLOAT32, np.float64: FLOAT64}[dtype]
    cpu = hydra.compile(pool_grad, varying=("x", "v"), backend="cpu")
    steps = cpu.dump_ir("steps", types=[ArrayType(t, 3, (2, 6, 7)), ArrayType(t, 3, (2, 3, 3))])
    assert steps.count("(windowsteps.pool_grad_step)") == 2
    ref = hydra.compile(pool_grad, varying=("x", "v"), backend="numpy")
    rng = np.random.default_rng(3)
    for lanes, nan in ((1, False), (13, False), (40, True)):
        x = awkward_images(rng, (lanes, 2, 6, 7), dtype)
        v = rng.standard_normal((lanes, 2, 3, 3)).astype(dtype)
        if nan:  # argmax's first NaN: the native step gives these to the host rule
            x[3, 1, 2, 2] = np.nan
        got, want = cpu(x, v), ref(x, v)
        assert got.dtype == dtype and got.tobytes() == want.tobytes()
        for n in (0, lanes - 1):
            first = max_pool_grad_loops(x[n], v[n], 2, None)
            second = max_pool_grad_loops(x[n] * 2.0, np.ones((2, 4, 5), dtype), 3, 1) * 2.0
            assert got[n].tobytes() == (first + second).astype(dtype).tobytes()


def avg_loss(x, v):
    overlapping = hydra.nn.avg_pool2d(x, 3, 1)
    return np.sum(hydra.nn.avg_pool2d(x, 2) * v) + np.sum(overlapping * x[:, :4, :5])


avg_grad = hydra.grad(avg_loss)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_native_avg_pool_adjoint_is_the_host_rule_bit_for_bit(dtype, monkeypatch):
    monkeypatch.setattr(background, "ENABLED", False)
    t = {np.float32: FLOAT32, np.float64: FLOAT64}[dtype]
    cpu = hydra.compile(avg_grad, varying=("x", "v"), backend="cpu")
    steps = cpu.dump_ir("steps", types=[ArrayType(t, 3, (2, 6, 7)), ArrayType(t, 3, (2, 3, 3))])
    assert steps.count("(windowsteps.avg_pool_grad_step)") == 2  # apart and overlapping
    ref = hydra.compile(avg_grad, varying=("x", "v"), backend="numpy")
    rng = np.random.default_rng(4)
    for lanes in (1, 17):
        x = rng.standard_normal((lanes, 2, 6, 7)).astype(dtype)
        v = rng.standard_normal((lanes, 2, 3, 3)).astype(dtype)
        got, want = cpu(x, v), ref(x, v)
        assert got.dtype == dtype and got.tobytes() == want.tobytes()
        n = lanes - 1  # and the definition: each window's g / (k*k) on its pixels
        spread = np.zeros((2, 6, 7))
        for a in range(3):
            for b in range(3):
                spread[:, 2 * a:2 * a + 2, 2 * b:2 * b + 2] += v[n, :, a, b, None, None] / 4
        third = np.zeros((2, 6, 7))
        for a in range(4):
            for b in range(5):
                third[:, a:a + 3, b:b + 3] += x[n, :, a, b, None, None] / 9
        third[:, :4, :5] += windows.avg_pool2d(x[n].astype(np.float64), 3, 1)
        np.testing.assert_allclose(got[n], spread + third, rtol=1e-5, atol=1e-5)
