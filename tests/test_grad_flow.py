"""hydra.grad through lane-divergent control flow (SPEC section 11) on numpy and cpu at
1, 3 and 17 lanes, against float64 central differences of the per-example function:
per-lane trip counts (lanes of 0, 1 and 50 trips in one loop), break, continue, early
return, if/elif, nested loops with per-lane counts, for loops."""

import math

import numpy as np
import pytest

import hydra
from tests.gradcheck import check

BACKENDS = ["numpy", "cpu"]
LANES = [1, 3, 17]


def trips(x, n):
    s = x
    i = 0
    while i < n:
        s = math.sin(s) * 1.1 + x * 0.1
        i += 1
    return s * s


def exits(x, y, n):
    s = 0.0
    for i in range(n):
        if s > 4.0:
            break
        if i % 3 == 1:
            continue
        s += math.exp(x * 0.1 * i) * y
        if s < -5.0:
            return s * x
    if x > 0.5:
        s = s * x
    elif x > -0.5:
        s = s + x * x
    else:
        s = s - y
    return s


def nested(x, n):
    s = x
    for i in range(n):
        j = 0
        while j < i:
            s = s * 0.9 + math.cos(s * x) * 0.2
            j += 1
        s = s + x * 0.01
    return s


def _lanes(lanes, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, lanes)
    y = rng.uniform(-1.0, 2.0, lanes)
    n = rng.integers(0, 9, lanes)
    return x, y, n


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_lane_trip_counts_0_1_and_50(backend):
    k = hydra.compile(hydra.value_and_grad(trips), varying=("x", "n"), backend=backend)
    x = np.array([0.3, -0.7, 0.9, 0.2, 1.3, -0.1])
    n = np.array([0, 1, 50, 0, 50, 1])
    value, dx = k(x, n)
    np.testing.assert_allclose(value, [trips(a, b) for a, b in zip(x, n)], rtol=1e-12)
    np.testing.assert_allclose(dx[[0, 3]], 2 * x[[0, 3]])  # no trip: d(x*x)/dx
    check(trips, [dx], list(zip(x, n)), [0])
    for lanes in LANES:
        x, _, n = _lanes(lanes, lanes)
        _, dx = k(x, n)
        check(trips, [dx], list(zip(x, n)), [0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_continue_return_and_elif(backend):
    k = hydra.compile(hydra.grad(exits, argnums=(0, 1)), varying=("x", "y", "n"),
                      backend=backend)
    for lanes in LANES:
        x, y, n = _lanes(lanes, 10 + lanes)
        dx, dy = k(x, y, n)
        check(exits, [dx, dy], list(zip(x, y, n)), [0, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_loops_with_per_lane_counts(backend):
    k = hydra.compile(hydra.grad(nested), varying=("x", "n"), backend=backend)
    for lanes in LANES:
        x, _, n = _lanes(lanes, 20 + lanes)
        check(nested, [k(x, n)], list(zip(x, n)), [0])


def newton_sqrt(a):
    """A loop whose trip count depends on the differentiated value itself."""
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_data_dependent_while_loop(backend):
    k = hydra.compile(hydra.grad(newton_sqrt), varying="a", backend=backend)
    a = np.linspace(0.5, 30.0, 17)
    np.testing.assert_allclose(k(a), 0.5 / np.sqrt(a), rtol=1e-6)


def uniform_loop(x, n):
    s = x
    for _ in range(n):
        s = s * x
    return s


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_uniform_loop_and_a_uniform_parameter(backend):
    k = hydra.compile(hydra.grad(uniform_loop), varying="x", backend=backend)
    x = np.array([0.5, 1.5, -2.0])
    np.testing.assert_allclose(k(x, 4), 5 * x ** 4)
    w = hydra.compile(hydra.grad(uniform_loop), lanes=3, backend=backend)
    np.testing.assert_allclose(np.broadcast_to(w(1.5, 4), (3,)), 5 * 1.5 ** 4)


def printing(x):
    print("x is", x)
    return x * x


def test_print_runs_once_in_the_forward_sweep(capsys):
    k = hydra.compile(hydra.grad(printing), varying="x", backend="numpy")
    np.testing.assert_array_equal(k(np.array([1.0, 2.0])), [2.0, 4.0])
    assert capsys.readouterr().out == "x is 1.0\nx is 2.0\n"


def search_then_loop(x, a, t):
    j = 0
    while j < len(a) and a[j] < t:  # an integer loop: nothing to record
        j += 1
    s = x
    for i in range(j):
        s = s * x + a[i]
    return s


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_integer_loop_records_nothing(backend):
    from hydra.types import ArrayType, FLOAT64
    k = hydra.compile(hydra.grad(search_then_loop), varying=("x", "t"), backend=backend)
    text = k.dump_ir("ssa", types=[FLOAT64, ArrayType(FLOAT64, 1), FLOAT64])
    assert text.count("tape_push") == 1
    a = np.array([0.1, 0.5, 0.9, 1.5])
    x, t = np.array([0.3, 1.2, -0.7]), np.array([0.0, 0.6, 2.0])
    check(search_then_loop, [k(x, a, t)], [(xi, a, ti) for xi, ti in zip(x, t)], [0])


def aux_loop(x, n):
    s, t = x, x
    for _ in range(n):
        t = t * 0.5 + 1.0  # only the aux output depends on this loop: no tape
    for _ in range(n):
        s = math.sin(s) * x
    return s, t


def test_a_loop_the_value_does_not_depend_on_records_nothing():
    from hydra.types import FLOAT64, INT64
    k = hydra.compile(hydra.grad(aux_loop, has_aux=True), varying=("x", "n"),
                      backend="numpy")
    assert k.dump_ir("ssa", types=[FLOAT64, INT64]).count("tape_push") == 1
    x, n = np.array([0.3, 0.9]), np.array([2, 5])
    dx, aux = k(x, n)
    np.testing.assert_allclose(aux, [aux_loop(a, b)[1] for a, b in zip(x, n)])
    check(lambda a, b: aux_loop(a, b)[0], [dx], list(zip(x, n)), [0])
