"""Lane-local programs against the per-lane oracle (the plain Python function) at lane
counts 1, 3, 8, 17 and 1000, on every available backend: control flow, divergence,
helpers, closures, tuples, arrays, NumPy scalar types and math."""

import math

import numpy as np
import pytest

import hydra
from conftest import LANE_COUNTS, TRANSCENDENTAL_ULPS, check_against_oracle
from hydra import lane, nlanes


def data(lanes: int, dtype=np.float64, lo=-10, hi=10, seed=0):
    rng = np.random.default_rng(seed + lanes)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, lanes).astype(dtype)
    return rng.integers(lo, hi, lanes).astype(dtype)


# --- control flow ----------------------------------------------------------------------

def nested_control(x, n):
    acc = 0
    i = 0
    while i < n:
        if (x + i) % 3 == 0:
            for j in range(i):
                if j % 2:
                    acc += j
                else:
                    acc -= 1
        elif x % 2 == 0:
            acc += 2 * i
        else:
            k = x
            while k > 0:
                k -= 3
                acc += 1
        i += 1
    return acc


def break_continue_return(x):
    total = 0
    for i in range(12):
        if i == x:
            continue
        j = 0
        while True:
            j += 1
            if j > i:
                break
            if (i * j + x) % 7 == 0:
                return -total - j
            if j % 3 == 0:
                continue
            total += j
        if total > 40 + x:
            break
    return total


def guard(a, i, n):
    return i < n and a[i] > 0


def short_circuit(i, a):
    n = len(a)
    ok = i < n and a[i] > 0
    ok2 = i >= n or a[i] < 5
    ok3 = not (i >= n or a[i] == 0) and a[i] % 2 == 1
    if guard(a, i, n) and a[i] > 2:
        return ok, ok2, ok3, 1
    return ok, ok2, ok3, 0


def mandelbrot(c_re, c_im, max_iter):
    z_re = c_re * 0.0
    z_im = c_im * 0.0
    n = 0
    while n < max_iter and z_re * z_re + z_im * z_im <= 4.0:
        z_re, z_im = z_re * z_re - z_im * z_im + c_re, 2.0 * z_re * z_im + c_im
        n += 1
    return n


def collatz(x):
    steps = 0
    while x != 1:
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        steps += 1
    return steps


def elif_chain(x):
    if x < -5:
        r = 1
    elif x < 0:
        r = 2
    elif x == 0:
        r = 3
    elif x < 5:
        r = 4
    else:
        r = 5
    return r


def cond_and_chained(x):
    a = x * 2 if x > 0 else -x
    b = 1 if -3 < x <= 4 else (2 if x > 4 else 3)
    c = 0 < x < 10 != x
    return a, b, c


def mixed_truth(x, y):
    # ``(x & 1) and y > 0`` is an int or a bool in Python: only its truth counts here
    r = 0
    if (x & 1) and y > 0.0:
        r += 1
    if not (x % 3 or y):
        r += 10
    while (x & 3) and r < 5:
        r += 2
    assert (x & 1) or x % 2 == 0 or y
    return r + (100 if (x & 4) or (y and x) else 0)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_mixed_types_in_conditions(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.int64, -8, 8)
    y = np.where(np.arange(lanes) % 3 == 0, 0.0, data(lanes, np.float64))
    check_against_oracle(mixed_truth, [x, y], lanes, ("x", "y"), backend)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_nested_control(backend, lanes):
    lanes = backend.lanes(lanes)
    check_against_oracle(nested_control, [data(lanes, np.int64, 0, 9), 6], lanes, ("x",),
                         backend)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_break_continue_return(backend, lanes):
    lanes = backend.lanes(lanes)
    check_against_oracle(break_continue_return, [data(lanes, np.int64, 0, 12)], lanes, ("x",),
                         backend)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_short_circuit_guards_out_of_bounds(backend, lanes):
    lanes = backend.lanes(lanes)
    a = np.array([3, 0, 4, -1, 6], dtype=np.int64)
    i = np.arange(lanes, dtype=np.int64) % 9
    check_against_oracle(short_circuit, [i, a], lanes, ("i",), backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_mandelbrot(backend, lanes, dtype):
    lanes = backend.lanes(lanes)
    re = np.linspace(-2.0, 0.6, lanes).astype(dtype)
    im = np.linspace(-1.1, 1.1, lanes)[::-1].astype(dtype)
    got = check_against_oracle(mandelbrot, [re, im, 60], lanes, ("c_re", "c_im"), backend)
    assert got.dtype == np.int64


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_collatz(backend, lanes):
    lanes = backend.lanes(lanes)
    x = np.arange(1, lanes + 1, dtype=np.int64) * 7
    check_against_oracle(collatz, [x], lanes, ("x",), backend)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_elif_conditional_chained(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.int64, -8, 12)
    check_against_oracle(elif_chain, [x], lanes, ("x",), backend)
    check_against_oracle(cond_and_chained, [x], lanes, ("x",), backend)


# --- tuples, augmented assignment, helpers, closures -----------------------------------

def swap_sort(a, b, c):
    if a > b:
        a, b = b, a
    if b > c:
        b, c = c, b
    if a > b:
        a, b = b, a
    return a, b, c


def divmod_like(x, y):
    return x // y, x % y


def tuples(x):
    t = (x, x + 1, x * 2)
    a, b, c = swap_sort(t[2], t[0], -t[1])
    q, r = divmod_like(x, 3)
    pair = (q, r) if x > 0 else (r, q)
    return a + pair[0], b - pair[1], c


def augmented(x):
    y = x
    y += 3
    y *= 2
    y -= x
    y //= 3
    y %= 7
    y <<= 2
    y >>= 1
    y |= 1
    y ^= 6
    y &= 13
    z = float(x)
    z /= 4.0
    z **= 2
    return y, z


def first_multiple(x, k):
    i = x
    while True:
        if i % k == 0:
            return i
        if i > x + 100:
            return -1
        i += 1


def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


def helpers(x):
    return first_multiple(x, 7) + clamp(x, -3, 3) + first_multiple(clamp(x, 0, 50), 5)


SCALE = 3
OFFSET = 0.5
TABLE = np.array([1.5, -2.0, 4.25, 8.0, 0.125])


def make_closure(k, bias):
    g = lambda v: v * k + bias  # noqa: E731

    def f(x):
        return g(x) + SCALE * TABLE[x % 5] + OFFSET
    return f


square = lambda v: v * v  # noqa: E731


def uses_lambda(x):
    return square(x) + square(x + 1)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_tuples_and_augmented(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.int64, -20, 20)
    check_against_oracle(tuples, [x], lanes, ("x",), backend)
    check_against_oracle(augmented, [x], lanes, ("x",), backend)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_helpers_closures_lambdas_globals(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.int64, -20, 60)
    check_against_oracle(helpers, [x], lanes, ("x",), backend)
    check_against_oracle(make_closure(2, 7), [x], lanes, ("x",), backend)
    check_against_oracle(uses_lambda, [x], lanes, ("x",), backend)
    check_against_oracle(lambda x: x * 3 - 1 if x > 2 else x, [x], lanes, ("x",), backend)
    for closure in two_closures_on_one_line(3):
        check_against_oracle(closure, [x], lanes, ("x",), backend)


def two_closures_on_one_line(c):
    """Same parameters and free names: only the columns tell their sources apart (the
    second compiled as the first before)."""
    return (lambda x: x + c), (lambda x: x * c)


# --- arguments and results -------------------------------------------------------------

def mixed(x, s, a):
    return x * s + a[lane() % len(a)], s * 2, a.shape[0] + s


def shared_write(out, x):
    out[lane()] = x * 2 + 1
    out[lane() + nlanes()] = -x


def local_array(x, k):
    buf = np.zeros(k)
    for i in range(k):
        buf[i] = x * i
    ibuf = np.zeros(k, np.int32)
    ibuf[x % k] += 5
    s = 0.0
    for i in range(k - 1, -1, -1):
        s += buf[i] + ibuf[i]
    return s


def returns_nothing(x, out):
    if x > 0:
        out[lane()] = x
        return
    out[lane()] = -1


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_uniform_and_varying_arguments(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.int64)
    a = np.array([10, 20, 30], dtype=np.int64)
    got = check_against_oracle(mixed, [x, 5, a], lanes, ("x",), backend)
    assert isinstance(got, tuple) and isinstance(got[0], np.ndarray)
    assert got[1] == 10 and isinstance(got[1], int)
    assert got[2] == 8


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_shared_array_writes_land_in_place(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.float64)
    out = np.zeros(2 * lanes)
    check_against_oracle(shared_write, [out, x], lanes, ("x",), backend)


def test_shared_array_write_is_the_callers_array(backend):
    out = np.zeros(6)
    x = np.arange(3.0)
    assert hydra.compile(shared_write, varying="x", backend=backend)(out, x) is None
    np.testing.assert_array_equal(out, [1.0, 3.0, 5.0, -0.0, -1.0, -2.0])


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_local_arrays_and_none_result(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.int64, 0, 30)
    check_against_oracle(local_array, [x, 6], lanes, ("x",), backend)
    out = np.zeros(lanes, np.int64)
    got = check_against_oracle(returns_nothing, [x - 10, out], lanes, ("x",), backend)
    assert got is None


def per_lane_rows(rows, k):
    s = rows[0] * 0
    for j in range(rows.shape[0]):
        s += rows[j] * (j + k)
    return s


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_varying_array_argument(backend, lanes):
    lanes = backend.lanes(lanes)
    rows = np.arange(lanes * 4, dtype=np.float32).reshape(lanes, 4)
    got = check_against_oracle(per_lane_rows, [rows, 2], lanes, ("rows",), backend)
    assert got.dtype == np.float32


# --- NumPy scalar types, weak literals, math -------------------------------------------

def hash32(x):
    h = np.uint32(2166136261)
    for i in range(4):
        h ^= (x >> np.uint32(8 * i)) & np.uint32(255)
        h *= np.uint32(16777619)
    h ^= h >> 13
    h = h * 0x5BD1E995
    return h


def weak(x):
    return x * 2.0 + 1, x / 3, -x + 0.25


def int32_math(x):
    y = x * 3 + 7
    return y // 2, y % 5, y >> 1, -y


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_uint32_hash_wraps(backend, lanes):
    lanes = backend.lanes(lanes)
    x = (np.arange(lanes, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    got = check_against_oracle(hash32, [x], lanes, ("x",), backend)
    assert got.dtype == np.uint32


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_weak_literals_keep_float32(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.float32)
    got = check_against_oracle(weak, [x], lanes, ("x",), backend)
    assert [g.dtype for g in got] == [np.float32] * 3
    xi = data(lanes, np.int32, -1000, 1000)
    got = check_against_oracle(int32_math, [xi], lanes, ("x",), backend)
    assert [g.dtype for g in got] == [np.int32] * 4


# Each function's result is returned on its own: a sum of several would turn a 1-ulp
# difference of one function into many ulps of the sum (cancellation).
def scalar_math(x, y):
    return (math.sqrt(abs(x)), math.floor(x), math.ceil(y), np.sqrt(abs(y)), np.fabs(x),
            math.exp(x / 10), math.log(abs(y) + 1), math.sin(x), math.cos(y),
            np.exp(y / 10), np.log1p(abs(x)), np.tanh(x), math.atan2(x, y),
            math.hypot(x, y), math.pow(abs(x), 0.5), abs(x) ** 1.5, abs(y) ** 0.5)


def numpy_math(x, y):
    # math.* of a float32 gives a Python float in Python but stays float32 in hydra
    # (as in Numba): the float32 oracle uses NumPy's functions, which agree.
    return (np.sqrt(abs(x)), np.floor(x), np.ceil(y), np.exp(y / 10), np.log1p(abs(x)),
            np.sin(x), np.cos(y), np.arctan2(x, y), np.hypot(x, y), x * 0.5)


def conversions(x, y):
    i = int(x)
    f = float(i) * 0.5
    return i, f, abs(i - 3), min(i, 2), max(x, y), min(x, y, 0.5), bool(i), int(y * 2.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_math(backend, lanes, dtype):
    lanes = backend.lanes(lanes)
    x, y = data(lanes, dtype, seed=1), data(lanes, dtype, seed=2)
    if dtype == np.float64:
        check_against_oracle(scalar_math, [x, y], lanes, ("x", "y"), backend,
                             ulps=TRANSCENDENTAL_ULPS)
    got = check_against_oracle(numpy_math, [x, y], lanes, ("x", "y"), backend,
                               ulps=TRANSCENDENTAL_ULPS)
    assert [g.dtype for g in got] == [dtype] * 10


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_conversions_abs_min_max(backend, lanes):
    lanes = backend.lanes(lanes)
    x, y = data(lanes, np.float64, seed=1), data(lanes, np.float64, seed=2)
    check_against_oracle(conversions, [x, y], lanes, ("x", "y"), backend)


# --- for loops -------------------------------------------------------------------------

def ranges(x, lo, step):
    s = 0
    for i in range(x):
        s += i
    for i in range(x, lo, -1):
        s += 2 * i
    for i in range(lo, x + 10, step):
        s -= i
    for i in range(20, -x, -step):
        s += i * 3
    for i in range(x, -5, -(x % 3 + 1)):
        s ^= i
    return s


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_for_loops_varying_bounds_and_steps(backend, lanes):
    lanes = backend.lanes(lanes)
    x = data(lanes, np.int64, -3, 15)
    check_against_oracle(ranges, [x, -2, 3], lanes, ("x",), backend)


def signed_zeros(x, n):
    return 0.0 * x, -0.0 * n, -0.0, x * -0.0


def test_signed_zeros_are_distinct_constants(backend):
    x = np.array([1.0, -2.0, 0.0])
    check_against_oracle(signed_zeros, [x, 3], 3, ("x",), backend)
