"""Every scalar operation's adjoint rule (hydra.grad, SPEC section 11) against float64
central differences, on numpy and cpu at 1, 3 and 17 lanes: each kernel compiles once
per backend (the lane count is not part of its key), and each operation has its own
parameters, so each gradient checks one rule.  Kinks exactly as SPEC section 11."""

import math

import numpy as np
import pytest

import hydra
from tests.gradcheck import check

BACKENDS = ["numpy", "cpu"]
LANES = [1, 3, 17]


def unary(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15, x16, x17,
          x18, x19, x20, x21, x22, x23):
    return (math.sqrt(x0) + math.exp(x1) + math.log(x2) + math.log2(x3) + math.log10(x4)
            + math.sin(x5) + math.cos(x6) + math.tan(x7) + math.asin(x8) + math.acos(x9)
            + math.atan(x10) + math.sinh(x11) + math.cosh(x12) + math.tanh(x13)
            + math.asinh(x14) + math.acosh(x15) + math.atanh(x16) + math.expm1(x17)
            + math.log1p(x18) + math.erf(x19) + math.erfc(x20) + math.fabs(x21)
            + np.exp2(x22) + np.cbrt(x23))


#: (low, high) of each parameter of ``unary``: inside the function's domain
UNARY_DOMAINS = [(0.1, 3), (-2, 2), (0.1, 3), (0.1, 3), (0.1, 3), (-3, 3), (-3, 3),
                 (-1, 1), (-0.9, 0.9), (-0.9, 0.9), (-3, 3), (-2, 2), (-2, 2), (-2, 2),
                 (-3, 3), (1.1, 3), (-0.9, 0.9), (-2, 2), (-0.9, 3), (-2, 2), (-2, 2),
                 (0.1, 3), (-2, 2), (0.1, 3)]


def binary(a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7, a8, b8,
           a9, b9, a10, b10, a11, b11, a12, b12, a13, a14):
    return ((a0 + b0) + (a1 - b1) + a2 * b2 + a3 / b3 + a4 ** b4 + max(a5, b5)
            + min(a6, b6) + a7 % b7 + math.atan2(a8, b8) + math.hypot(a9, b9)
            + math.pow(a10, b10) + math.copysign(a11, b11) + math.fmod(a12, b12)
            + abs(a13) + (-a14 if a14 < 10.0 else a14))


BINARY_DOMAINS = [(-2, 2)] * 6 + [(0.5, 2), (0.5, 2), (0.5, 2), (-1, 1)] + [(-2, 2)] * 4 \
    + [(0.5, 3), (0.7, 2)] + [(-2, 2)] * 4 + [(0.5, 2), (-1, 1)] + [(-2, 2), (-2, 2)] \
    + [(0.5, 3), (0.7, 2)] + [(-2, 2), (-2, 2)]


def select_cast(x, y):
    z = x if y > 0.0 else y * x  # a conditional expression (select or if)
    return z * 2.0 + float(int(x)) + float(np.floor(y))  # no gradient through int, floor


def float_casts(x, y):
    return float(np.float32(x)) * 3.0 + np.float32(y) * np.float32(2.0)


def _draw(domains, lanes, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(lo, hi, lanes) for lo, hi in domains]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,domains", [(unary, UNARY_DOMAINS), (binary, BINARY_DOMAINS),
                                        (select_cast, [(-2, 2), (-2, 2)])])
def test_each_rule_against_finite_differences(backend, fn, domains):
    n = len(domains)
    names = fn.__code__.co_varnames[:n]
    k = hydra.compile(hydra.grad(fn, argnums=tuple(range(n))), varying=names,
                      backend=backend)
    for lanes in LANES:
        args = _draw(domains, lanes, lanes)
        grads = k(*args)
        lane_args = [[a[i] for a in args] for i in range(lanes)]
        assert check(fn, grads, lane_args, list(range(n))) > 0


def f32(x, y):
    return math.sin(x) * y + math.sqrt(x * x + 1.0) / y


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_against_float64_differences(backend):
    k = hydra.compile(hydra.value_and_grad(f32, argnums=(0, 1)), varying=("x", "y"),
                      backend=backend)
    for lanes in LANES:
        x, y = (a.astype(np.float32) for a in _draw([(-2, 2), (0.5, 2)], lanes, 7))
        value, (dx, dy) = k(x, y)
        assert value.dtype == dx.dtype == dy.dtype == np.float32
        lane_args = [[float(x[i]), float(y[i])] for i in range(lanes)]
        check(f32, (dx, dy), lane_args, [0, 1], rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_between_float_types(backend):
    k = hydra.compile(hydra.grad(float_casts, argnums=(0, 1)), varying=("x", "y"),
                      backend=backend)
    dx, dy = k(np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(np.broadcast_to(dx, (3,)), 3.0)
    np.testing.assert_array_equal(np.broadcast_to(dy, (3,)), 2.0)


def kinks(a, b, c, d, e, f):
    return abs(a) + math.sqrt(b) + max(c, d) + math.hypot(e, f)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kinks_are_those_of_the_spec(backend):
    k = hydra.compile(hydra.grad(kinks, argnums=(0, 1, 2, 3, 4, 5)),
                      varying=("a", "b", "c", "d", "e", "f"), backend=backend)
    z = np.zeros(3)
    ga, gb, gc, gd, ge, gf = k(z, z, np.ones(3), np.ones(3), z, z)
    np.testing.assert_array_equal(ga, 0.0)       # abs'(0) = 0
    np.testing.assert_array_equal(gb, np.inf)    # sqrt'(0) = +inf
    np.testing.assert_array_equal(gc, 0.5)       # a tie of max: half each
    np.testing.assert_array_equal(gd, 0.5)
    np.testing.assert_array_equal(ge, 0.0)       # the Euclidean norm at 0
    np.testing.assert_array_equal(gf, 0.0)


def pow_at_zero(x, y):
    return x ** y


def test_pow_at_a_zero_base_gives_no_nan():
    g = hydra.grad(pow_at_zero, argnums=(0, 1))
    assert g(0.0, 2.0) == (0.0, 0.0)
    assert g(0.0, 0.0) == (0.0, 0.0)
    assert g(2.0, 3.0) == (12.0, pytest.approx(8.0 * math.log(2.0)))


def np_extrema(a, b):
    return np.maximum(a, b) + np.minimum(a, 2.0 * b)


def relu3(x):
    return hydra.nn.relu(x) * 3.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_extrema_split_ties_and_relu_has_its_own_rule(backend):
    k = hydra.compile(hydra.grad(np_extrema, argnums=(0, 1)), varying=("a", "b"),
                      backend=backend)
    da, db = k(np.array([1.0, 2.0, 0.5]), np.array([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(da, [1.5, 1.5, 1.0])
    np.testing.assert_array_equal(db, [0.5, 1.0, 1.0])
    r = hydra.compile(hydra.grad(relu3), varying="x", backend=backend)
    np.testing.assert_array_equal(r(np.array([-1.0, 0.0, 2.0])), [0.0, 0.0, 3.0])
