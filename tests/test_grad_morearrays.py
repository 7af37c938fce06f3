"""hydra.grad of the NumPy-coverage operations and the other array operations whose
adjoints are in ``hydra.grad.morearrays``, on numpy and cpu at 1, 3 and 17 lanes,
against float64 central differences of the per-example function (a few kernels, each
using many operations, to keep compiles few)."""

import math

import numpy as np
import pytest

import hydra
from tests.gradcheck import check, check_arrays

BACKENDS = ["numpy", "cpu"]
LANES = [1, 3, 17]
C6 = np.linspace(0.5, 2.0, 6)


def statistics(x, M):
    s = (np.cumsum(x) * C6).sum() + np.sin(np.cumsum(M, axis=1)).sum() \
        + np.sin(np.cumsum(M)).sum() + np.cumsum(M, axis=0)[2, 1]
    v = np.var(x) + np.std(M, axis=0, ddof=1).sum() + np.var(M, axis=1, keepdims=True).sum() \
        + np.std(x)
    n = np.linalg.norm(x) + np.linalg.norm(M) + np.linalg.norm(M, axis=1).sum() \
        + np.linalg.norm(x, 1) + np.linalg.norm(x, np.inf) + np.linalg.norm(M.T, "fro") \
        + np.linalg.norm(x, 3) + np.linalg.norm(M, -np.inf, axis=0, keepdims=True).sum() \
        + np.linalg.norm(M, 1) + np.linalg.norm(M, -np.inf) \
        + np.linalg.norm(M, np.inf, axis=(1, 0), keepdims=True).sum()
    p = np.prod(x) + np.prod(M, axis=0).sum() + np.sin(np.cumprod(x)).sum() \
        + np.cumprod(M, axis=1).sum()
    return float(s + v + n + p)


def rearranged(x, M):
    a = np.sin(np.diff(x)).sum() + np.sin(np.diff(M, n=2, axis=1)).sum() \
        + (np.roll(x, 2) * C6).sum() + np.sin(np.roll(M, (1, -1), axis=(0, 1))).sum() \
        + np.sin(np.roll(M, 5)).sum()
    b = np.sin(np.tile(x, (2, 1))).sum() + (np.tile(M, 2) * np.tile(M, (2, 1, 1))[1]
                                           .repeat(2, axis=1)).sum() \
        + np.sin(np.repeat(x, 2)).sum() + np.sin(np.repeat(M, (1, 0, 3), axis=0)).sum()
    c = np.trace(M) ** 2 + np.trace(M, 1) * x[0] + (np.diag(x[:3], 1)[:3] * M).sum() \
        + np.sin(np.diag(M, -1)).sum() + np.sin(np.diag(M, 2)).sum()
    d = np.sin(np.pad(x, (1, 2))).sum() + (np.pad(M, 1, mode="edge") ** 2).sum() \
        + (np.pad(x, (3, 2), mode="reflect") * np.linspace(1.0, 2.0, 11)).sum()
    f = np.sin(np.full(3, x[0] * x[1])).sum() + (np.full_like(x, x[2]) * C6).sum()
    h = np.sin(np.flip(M, axis=1)).sum() + (x[::2] * x[5:0:-2]).sum() \
        + np.sin(M[::-1, 1::2]).sum() + x[4:7:3].sum() + x[0:0:2].sum()
    return float(a + b + c + d + f + h)


def elementwise(x, y):
    return float(np.logaddexp(x, y).sum() + np.logaddexp2(x, y * 2.0).sum()
                 + np.float_power(np.abs(x) + 0.5, y).sum() + np.sin(np.deg2rad(x * 30.0)).sum()
                 + np.sin(np.rad2deg(y) / 40.0).sum() + np.cos(np.degrees(x) / 50.0).sum()
                 + np.cos(np.radians(y * 20.0)).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_statistics_scans_and_rearrangements(backend):
    rng = np.random.default_rng(7)
    ks = [hydra.compile(hydra.grad(f, argnums=(0, 1)), varying=("x", "M"), backend=backend)
          for f in (statistics, rearranged)]
    e = hydra.compile(hydra.grad(elementwise, argnums=(0, 1)), varying=("x", "y"),
                      backend=backend)
    for lanes in LANES:
        X, M = rng.normal(size=(lanes, 6)), rng.normal(size=(lanes, 3, 4))
        picked = sorted({0, lanes - 1})
        for f, k in zip((statistics, rearranged), ks):
            dx, dM = k(X, M)
            check_arrays(f, (dx[picked], dM[picked]), [(X[j], M[j]) for j in picked], [0, 1])
        Y = rng.normal(size=(lanes, 6))
        dx, dy = e(X, Y)
        check_arrays(elementwise, (dx[picked], dy[picked]), [(X[j], Y[j]) for j in picked],
                     [0, 1])


XP = np.array([-1.0, -0.2, 0.3, 1.1, 2.0])
W23 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def gathers(x, M, i, fp):
    a = np.sin(np.take(x, (0, 3, 3, -1))).sum() + np.take(M, i, axis=1).sum() ** 2 \
        + np.take(M, 5) + (np.take(x, np.array([[1, 2], [2, 0]])) ** 2).sum() \
        + np.take(x, i) * x[1]
    b = (np.sort(x) * C6).sum() + np.sin(np.sort(M, axis=0)).sum() \
        + (np.sort(M, axis=None)[:4] ** 2).sum() + (np.sort(M) * C6[:4]).sum() \
        + np.sin(np.take(M, np.array((i, 1, i)), axis=1)).sum()
    c = np.sin(np.einsum("ij,j->i", M, x[:4])).sum() + np.einsum("ij->", M * M) \
        + np.einsum("ij,kj->ik", M, M)[0, 2] + np.sin(np.einsum("i,j->ij", x[:2], x)).sum() \
        + np.sin(np.tensordot(M, x[:4], axes=1)).sum() \
        + np.tensordot(W23, M, axes=(1, 0)).sum() + np.tensordot(M, M) \
        + np.sin(np.einsum("ij,ij->j", M, M)).sum() + np.einsum("ii", M[:, :3]) ** 2 \
        + np.sin(np.einsum("ii->i", M[:, 1:])).sum() \
        + np.sin(np.einsum("...j,j", M, x[:4])).sum() \
        + np.sin(np.einsum("ij,...j->...i", M, M)).sum() \
        + np.sin(np.einsum("ji,jj", M, M[:, :3])).sum()
    d = np.sin(np.interp(x, XP, fp)).sum() + np.interp(x[0] * 2.0, XP, fp) ** 2 \
        + np.interp(x[1], XP, fp, left=0.5, right=-0.5) + (np.interp(M, XP, fp) * M).sum()
    f = (np.sin(np.linspace(x[0], x[1], 5))).sum() \
        + (np.linspace(x[2], x[3], 4, endpoint=False) * C6[:4]).sum()
    return float(a + b + c + d + f)


def gammas(x):
    if x > 0.0:
        return math.lgamma(x) + math.gamma(x / 2.0)
    return math.gamma(x) * 2.0 + math.lgamma(x - 1.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gathers_sorts_contractions_interpolation_and_gamma(backend):
    rng = np.random.default_rng(8)
    k = hydra.compile(hydra.grad(gathers, argnums=(0, 1, 3)), varying=("x", "M", "i"),
                      backend=backend)
    gm = hydra.compile(hydra.grad(gammas), varying="x", backend=backend)
    for lanes in LANES:
        X, M = rng.uniform(-2.5, 2.5, size=(lanes, 6)), rng.normal(size=(lanes, 3, 4))
        fp = rng.normal(size=5)
        i = rng.integers(-4, 4, lanes)
        picked = sorted({0, lanes - 1})
        dx, dM, dfp = k(X, M, i, fp)
        check_arrays(gathers, (dx[picked], dM[picked], dfp[picked]),
                     [(X[j], M[j], int(i[j]), fp) for j in picked], [0, 1, 3])
        xs = np.concatenate([rng.uniform(0.05, 9.0, lanes - lanes // 2),
                             rng.uniform(-4.9, -0.1, lanes // 2)])
        xs = np.where(np.abs(xs - np.round(xs)) < 0.05, xs + 0.1, xs)  # off the poles
        check(gammas, [gm(xs)], [(x,) for x in xs], [0])


def products(x):
    return float(np.prod(x) + np.cumprod(x).sum())


def spreads(v):
    return float(np.linalg.norm(v) + np.std(v) + np.linalg.norm(v, 3))


def test_products_are_exact_at_zeros_and_norms_have_gradient_0_at_0():
    d = hydra.grad(products)
    np.testing.assert_array_equal(d(np.array([2.0, 0.0, 3.0])), [1.0, 14.0, 0.0])
    np.testing.assert_array_equal(d(np.array([0.0, 0.0, 3.0])), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(d(np.array([2.0, 0.5, 3.0])), [4.5, 14.0, 2.0], rtol=1e-15)
    s = hydra.grad(spreads)
    np.testing.assert_array_equal(s(np.zeros(3)), [0.0, 0.0, 0.0])
    # equal elements: std's gradient is 0 too (the deviations' norm at 0)
    np.testing.assert_allclose(s(np.ones(3)), 3.0 ** -0.5 + 3.0 ** (-2.0 / 3.0), rtol=1e-14)


def branches(x, M):
    if x[0] > 0.0:  # the rules under a per-lane branch, in a loop with per-lane trips
        for _ in range(int(x[1] > 0.0) + 1):
            M = np.cumsum(np.sort(M, axis=1), axis=0) * 0.5
    else:
        M = np.pad(np.diff(M, axis=0), ((0, 1), (0, 0))) + np.linalg.norm(x)
        M = np.pad(M, ((0, 0), (2, 1)), mode="edge")[:, 1:5]
    return float(np.std(M, axis=0).sum() * x[2] + np.sin(np.take(M, 5) * np.prod(x[:3]))
                 + np.einsum("ij,j->i", M, np.linspace(x[3], x[4], 4)).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_and_per_lane_control_flow(backend):
    rng = np.random.default_rng(9)
    grad = hydra.grad(branches, argnums=(0, 1))
    X, M = rng.normal(size=(17, 6)), rng.normal(size=(17, 3, 4))
    dx, dM = hydra.compile(grad, varying=("x", "M"), backend="numpy")(X, M)
    picked = [0, 5, 16]
    check_arrays(branches, (dx[picked], dM[picked]), [(X[j], M[j]) for j in picked], [0, 1])
    k = hydra.compile(grad, varying=("x", "M"), backend=backend)
    dx32, dM32 = k(X.astype(np.float32), M.astype(np.float32))
    assert dx32.dtype == dM32.dtype == np.float32
    np.testing.assert_allclose(dx32, dx, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(dM32, dM, rtol=2e-3, atol=2e-3)


def cubes(x):
    return float((np.cumsum(x) ** 3).sum() + (np.sort(x) ** 3 * C6).sum() + np.prod(x)
                 + np.var(x) ** 2 + np.cumprod(x).sum() + (np.take(x, (1, 1, 4)) ** 3).sum()
                 + (x[::-2] ** 3).sum())


d_cubes = hydra.grad(cubes)


def curvature(x):
    return float((d_cubes(x) * C6).sum())


@pytest.mark.parametrize("backend", ["numpy"])  # the rules' IR is the same on cpu, whose
def test_a_gradient_of_a_gradient_through_the_rules(backend):  # compile costs ~6 s here
    rng = np.random.default_rng(10)
    first = hydra.compile(d_cubes, varying="x", backend=backend)
    second = hydra.compile(hydra.grad(curvature), varying="x", backend=backend)
    X = rng.normal(size=(5, 6))
    got, h = second(X), 1e-6
    for j in range(6):
        step = np.zeros(6)
        step[j] = h
        fd = ((first(X + step) - first(X - step)) * C6).sum(axis=1) / (2 * h)
        np.testing.assert_allclose(got[:, j], fd, rtol=1e-5, atol=1e-6)


B35 = np.array([[0.5, -1.0, 0.25, 2.0, 1.5], [1.0, 0.75, -0.5, 0.0, -2.0],
                [-1.5, 0.5, 1.0, 0.25, 0.5]])


def shapes(x, M, A, v):
    a = np.sin(x[None, :] * M[..., 1:]).sum() + (M[..., 0] ** 2).sum() \
        + (M[None, 1, ..., None] ** 3).sum() + x[..., 2] * x[np.newaxis][0, 1]
    b = np.sin(A @ B35).sum() + np.sin(v @ A).sum() + np.cos(A @ v[:3]).sum() \
        + np.sin(np.matmul(A[0], B35)).sum() + np.sin(np.dot(A, v[:3])).sum() \
        + np.sin(np.dot(A, B35)).sum()
    c = np.linalg.norm(M, 2) + np.linalg.norm(M, -2) * 0.5 + np.linalg.norm(M, "nuc") \
        + np.linalg.norm(M.T @ M, "nuc", axis=(1, 0)) + np.linalg.norm(A, 2, axis=(2, 1)).sum()
    d = np.sin(np.einsum("...ij,...kj->...ik", A, A[:1])).sum() \
        + np.sin(np.einsum("...i,...i", M[:, :1], x[:4])).sum()  # axes that broadcast
    h = np.zeros((3, 4))  # stores with ... and None into a lane's own array
    h[..., 1] = x[:3] * 2.0
    h[None, 2] = M[0, :4] * x[0]
    h[0, 1:3, ...] = M[1, 1:3] ** 2
    return float(a + b + c + d + (np.sin(h) * A[0, :3, :1]).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_axes_ellipsis_stacks_singular_value_norms_and_einsum_broadcasts(backend):
    rng = np.random.default_rng(11)
    k = hydra.compile(hydra.grad(shapes, argnums=(0, 1, 2, 3)), varying=("x", "M", "A", "v"),
                      backend=backend)
    for lanes in LANES:
        X, M = rng.normal(size=(lanes, 5)), rng.normal(size=(lanes, 4, 6))
        A, v = rng.normal(size=(lanes, 2, 4, 3)), rng.normal(size=(lanes, 4))
        picked = sorted({0, lanes - 1})[:1 if lanes == 1 else 2]
        gs = k(X, M, A, v)
        check_arrays(shapes, [g[picked] for g in gs], [(X[j], M[j], A[j], v[j]) for j in picked],
                     [0, 1, 2, 3])
    # a norm at 0 has gradient 0, as the vector norms
    z = hydra.grad(lambda M: float(np.linalg.norm(M, 2) + np.linalg.norm(M, "nuc")))
    np.testing.assert_array_equal(z(np.zeros((2, 3))), np.zeros((2, 3)))


CW = np.linspace(-1.0, 1.0, 18).reshape(2, 1, 3, 3)
CX = np.linspace(0.5, -0.5, 25).reshape(1, 5, 5)


def layers(w, x):
    h = np.tanh(hydra.nn.conv2d(x, w, padding=1))
    p = hydra.nn.max_pool2d(h, 2)
    a = hydra.nn.avg_pool2d(h, 2)
    return float((p * p).sum() + np.sin(hydra.nn.conv2d(x, w, stride=2)).sum()
                 + (a ** 3).sum())


d_layers = hydra.grad(layers, argnums=(0, 1))


def layers_curvature(w, x):
    dw, dx = d_layers(w, x)
    return float((dw * CW).sum() + (np.sin(dx) * CX).sum())


def scattered(x, i):
    return float((np.take(x, (0, 2, 2)) ** 3).sum() * x[i]
                 + (np.diag(np.outer(x, x)) ** 2).sum()
                 + (np.interp(x, XP[:3], x[:3]) ** 2).sum()
                 + np.sin(np.repeat(x, (2, 0, 1, 3, 1))).sum()
                 + (np.pad(x, (2, 3), mode="reflect") ** 3 * np.linspace(0.5, 1.0, 10)).sum())


d_scattered = hydra.grad(scattered)


def scattered_curvature(x, i):
    return float((d_scattered(x, i) * C6[:5]).sum())


@pytest.mark.parametrize("backend", ["numpy"])  # the same IR on cpu compiles for ~23 s here
def test_a_gradient_of_a_gradient_through_the_layers_and_scatter_adds(backend):
    """conv2d's, max_pool2d's and avg_pool2d's adjoints and the scatter-add (np.add.at)
    of a gather's adjoint have rules of their own: second derivatives against
    differences of the first (float64, per lane)."""
    rng = np.random.default_rng(12)
    h = 1e-6
    first = hydra.compile(d_layers, varying="x", backend="numpy")
    second = hydra.compile(hydra.grad(layers_curvature, argnums=(0, 1)), varying="x",
                           backend=backend)
    w, X = rng.normal(size=(2, 1, 3, 3)), rng.normal(size=(3, 1, 5, 5))
    gw, gx = second(w, X)

    def curvature(w, X):
        dw, dx = first(w, X)
        return (dw * CW).sum(axis=(1, 2, 3, 4)) + (np.sin(dx) * CX).sum(axis=(1, 2, 3))
    for idx in list(np.ndindex(w.shape))[::2]:
        step = np.zeros_like(w)
        step[idx] = h
        fd = (curvature(w + step, X) - curvature(w - step, X)) / (2 * h)
        np.testing.assert_allclose(gw[(slice(None),) + idx], fd, rtol=1e-5, atol=1e-6)
    for idx in list(np.ndindex(X.shape[1:]))[::3]:
        step = np.zeros_like(X)
        step[(slice(None),) + idx] = h
        fd = (curvature(w, X + step) - curvature(w, X - step)) / (2 * h)
        np.testing.assert_allclose(gx[(slice(None),) + idx], fd, rtol=1e-5, atol=1e-6)
    first = hydra.compile(d_scattered, varying=("x", "i"), backend="numpy")
    second = hydra.compile(hydra.grad(scattered_curvature), varying=("x", "i"), backend=backend)
    X, i = rng.normal(size=(4, 5)), rng.integers(0, 5, 4)
    got = second(X, i)
    for j in range(5):
        step = np.zeros(5)
        step[j] = h
        fd = ((first(X + step, i) - first(X - step, i)) * C6[:5]).sum(axis=1) / (2 * h)
        np.testing.assert_allclose(got[:, j], fd, rtol=1e-5, atol=1e-6)
    fn = first.prepare(first.bind(X, i))[0]
    fns = {op.attrs["fn"] for op in fn.walk() if op.opcode == "array"}
    assert "scatter_add" in fns and "einsum" not in fns  # no one-hot contraction


def stacked(w, x):
    return float(np.sin(hydra.nn.conv2d(x, w)).sum())


d_stacked = hydra.grad(stacked)


def test_a_gradient_of_a_gradient_through_a_stack_of_images_is_refused():
    from hydra.errors import CompileError
    w = np.full((2, 1, 3, 3), 0.1)
    with pytest.raises(CompileError, match=r"a gradient of a gradient through conv2d's "
                                           r"weights is written for one lane's images") as e:
        hydra.grad(lambda w, x: float((d_stacked(w, x) ** 2).sum()))(w, np.ones((2, 1, 5, 5)))
    assert e.value.loc.line == stacked.__code__.co_firstlineno + 1
