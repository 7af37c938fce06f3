"""More lane-local programs against the per-lane oracle: lanes that finished a loop
never trap, deep returns, 2-D shared arrays, return conventions, loop variables after
their loop, keyword calls, module-level NumPy constants, nested tuples, captured arrays
and the intrinsics reached through the ``hydra`` module."""

import numpy as np
import pytest

import hydra
from conftest import LANE_COUNTS, check_against_oracle
from hydra import lane, nlanes

FACTOR = 3


def loop_loads(a, n):
    # lanes that left the loop (i == n, maybe past the end of a) must not trap
    i = 0
    s = 0
    while i < n:
        s += a[i]
        i += 1
    t = 0
    for j in range(n):
        t += 100 // (n - j)
    return s, t, a[n - 1] if n > 0 else -1


def deep_return(x):
    for i in range(4):
        for j in range(4):
            k = 0
            while k < 4:
                if i * 16 + j * 4 + k == x:
                    return i, j, k
                if k == 3 and j == x % 4:
                    break
                k += 1
            if j > i + x % 3:
                continue
    return -1, -1, -1


def two_d(g, i, o):
    s = 0.0
    for r in range(g.shape[0]):
        for c in range(g.shape[1]):
            if (r + c + i) % 3 == 0:
                s += g[r, c]
    o[lane(), i % 2] = s if lane() == 0 else g[1, 2]
    return s


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_finished_lanes_never_trap_and_deep_returns(backend, lanes):
    lanes = backend.lanes(lanes)
    check_against_oracle(loop_loads, [np.arange(5) * 3, np.arange(lanes) % 6], lanes, ("n",),
                         backend)
    check_against_oracle(deep_return, [np.arange(lanes) % 70], lanes, ("x",), backend)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_two_dimensional_shared_arrays(backend, lanes):
    lanes = backend.lanes(lanes)
    g = np.arange(12.0).reshape(3, 4)
    check_against_oracle(two_d, [g, np.arange(lanes), np.zeros((lanes, 2))], lanes, ("i",),
                         backend)


def constants():
    return 3, 2.5, True, nlanes()


def test_return_conventions(backend):
    got = hydra.compile(constants, lanes=5, backend=backend)()
    assert got == (3, 2.5, True, 5)
    assert [type(v) for v in got] == [int, float, bool, int]
    got = hydra.compile(lambda x: (x, x + 1.0), varying="x", backend=backend)(np.arange(3))
    assert isinstance(got, tuple) and got[0].dtype == np.int64 and got[1].dtype == np.float64
    one = hydra.compile(lambda x: x * 2, varying="x", backend=backend)(np.array([4]))
    assert isinstance(one, np.ndarray) and one.shape == (1,) and one[0] == 8


F32 = np.float32(1.5)
CAPTURED = np.zeros(1000)


def loop_variable_after_loop(x):
    i = -1
    for i in range(x):  # noqa: B007  (its value after the loop is the point)
        pass
    j = 10
    for j in range(x, 0, -1):
        if j == 2:
            break
    return i, j


def keyword_helper(x):
    return helper_kw(b=x, a=2) + helper_kw(x, b=1)


def helper_kw(a, b):
    return a * FACTOR + b


def numpy_constant(x):
    return x * F32, x + FACTOR


def nested_tuples(x):
    t = ((x, x + 1), (x * 2, (x * 3,)))
    (a, b), (c, (d,)) = t
    return t[1][1][0] + a + b + c + d, t[0]


def array_augmented(a, x):
    a[lane()] += x
    a[lane()] *= 2


def write_captured(x):
    CAPTURED[lane()] = x * 2.0
    return CAPTURED[lane()]


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_more_python(backend, lanes):
    lanes = backend.lanes(lanes)
    x = np.arange(lanes, dtype=np.int64)
    check_against_oracle(loop_variable_after_loop, [x % 5], lanes, ("x",), backend)
    check_against_oracle(keyword_helper, [x], lanes, ("x",), backend)
    got = check_against_oracle(numpy_constant, [x.astype(np.float32)], lanes, ("x",), backend)
    assert got[0].dtype == got[1].dtype == np.float32
    check_against_oracle(nested_tuples, [x], lanes, ("x",), backend)
    check_against_oracle(array_augmented, [x * 1.5, x * 1.0], lanes, ("x",), backend)


def test_writes_to_a_captured_array_land_in_it(backend):
    CAPTURED[:] = 0
    got = hydra.compile(write_captured, varying="x", backend=backend)(np.arange(3.0))
    np.testing.assert_array_equal(got, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(CAPTURED[:4], [0.0, 2.0, 4.0, 0.0])


def via_module(x):
    return x * hydra.nlanes() + hydra.lane()


def test_intrinsics_through_the_module(backend):
    x = np.arange(5, dtype=np.int64)
    got = check_against_oracle(via_module, [x], 5, ("x",), backend)
    np.testing.assert_array_equal(got, x * 5 + np.arange(5))


def test_the_verifier_runs_after_every_pass():
    # conftest turns it on before hydra is imported; without it IR bugs pass silently
    assert hydra.api.CHECK_IR


def compare_out_of_range(x):
    return x == -1, x != -1, x < -1, x > -1, -1 < x, x <= 5000000000, x == 4294967295


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint64, np.int8, np.uint8])
def test_comparisons_with_python_ints_out_of_range(backend, dtype):
    # NumPy 2 compares by value: a uint32 is never -1, whatever its bits
    x = np.array([0, 5, np.iinfo(dtype).max], dtype=dtype)
    check_against_oracle(compare_out_of_range, [x], 3, ("x",), backend)
