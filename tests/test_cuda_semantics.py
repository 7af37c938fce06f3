"""The cuda backend against the numpy reference on the corners of the semantics:
wrapping integers, shifts by any count, integer powers, Python floor division and
modulo, float division by zero, float->int casts, min/max with NaN, math domain
errors.  Each program runs both ways the backend has: as one kernel (lane-local)
and as host-driven phases (what a sync point forces)."""

import math

import numpy as np
import pytest

import hydra
from conftest import assert_same_value, device_math_ulps
from hydra.backends import available

pytestmark = pytest.mark.skipif(not available("cuda"), reason="numba.cuda unusable here")


@pytest.fixture(params=["one-kernel", "phases"])
def strategy(request, monkeypatch):
    if request.param == "phases":
        import hydra.backends.cuda.backend as backend
        monkeypatch.setattr(backend, "fits", lambda fn: "forced by the test")
    return request.param


def same(fn, *args, varying=("x",), **options):
    want = hydra.compile(fn, varying=varying, backend="numpy", **options)(*args)
    got = hydra.compile(fn, varying=varying, backend="cuda", **options)(*args)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    ulps = device_math_ulps(fn, "cuda")
    for g, w in zip(got, want):
        if ulps:
            assert_same_value(g, w, f"{fn.__name__} on cuda", ulps)
        else:
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w), strict=True)
    return got


def wrap32(x, y):
    a = x * np.int32(1 << 20)
    b = a + y
    return b, a * b, -a, ~a, abs(np.int32(-2147483647) - np.int32(1) + x * 0)


def test_int32_wraps(strategy):
    x = np.arange(-5, 12, dtype=np.int32) * np.int32(977)
    same(wrap32, x, np.int32(2147483000), varying=("x",))


def shifts(x, s):
    return x << s, x >> s, np.uint8(200) >> (s & 7), (x & 255) << 60


def test_shifts_by_any_count(strategy):
    same(shifts, np.array([-7, 5, 1 << 40, -1, 3, 9, 2], dtype=np.int64),
         np.array([0, 1, 63, 64, 70, -1, -70], dtype=np.int64), varying=("x", "s"))


def powers(x, e):
    return x ** e, np.int32(x) ** np.int32(e), float(x) ** (e * 0.5)


def test_integer_powers_wrap(strategy):
    same(powers, np.array([3, -2, 0, 7, 10, -1], dtype=np.int64),
         np.array([40, 3, 0, 2, 21, 7], dtype=np.int64), varying=("x", "e"))


def test_negative_integer_exponent_raises_as_numpy(strategy):
    e = np.array([40, 3, 0, -2, 21, -7], dtype=np.int64)
    for backend in ("numpy", "cuda"):
        k = hydra.compile(powers, varying=("x", "e"), backend=backend)
        with pytest.raises(ValueError, match=r"Integers to negative integer powers are not "
                                             r"allowed\. \(lane 3\)"):
            k(np.arange(6, dtype=np.int64), e)


def divisions(x, y, f):
    return x // y, x % y, f // (y * 0.0), f % (y * 0.0), f / (y - y), -f // 3.0, f % -2.5


def test_floor_division_modulo_and_float_zero_division(strategy):
    same(divisions, np.array([7, -7, 7, -7, 0, -9], dtype=np.int64),
         np.array([2, 2, -2, -2, 5, 4], dtype=np.int64),
         np.array([1.5, -2.0, 0.0, 7.25, -0.0, 3.0]), varying=("x", "y", "f"))


def casts(f):  # NumPy's casts; int(f) raises for NaN and beyond int64 (test_scalar_rules)
    return (np.int64(f), np.int32(f), np.uint8(np.int64(f) & 255), bool(f), np.float32(f),
            np.int8(f), np.int16(f), np.uint16(f), np.uint8(f), np.int32(np.float32(f)))


def unsigned_casts(f):
    return np.uint32(f), np.uint64(f)


def test_unsigned_casts_in_range(strategy):
    # out of range, NumPy's own uint32 results depend on the array's length (SIMD
    # paths differ); in range and -1.0 they are stable
    same(unsigned_casts, np.array([1.9, -1.0, 3e9, 300.7, 0.0, 2.0 ** 63 + 4096.0]),
         varying=("f",))


def test_casts(strategy):
    same(casts, np.array([1.9, -1.9, 1e300, -1e300, math.nan, 0.0, -0.5, 3e9, 300.7, -300.2,
                          -1.0, 70000.5, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, math.inf]),
         varying=("f",))


def minmax(a, b):
    return min(a, b), max(a, b), min(b, a), max(b, a)


def test_min_max_are_selects_even_with_nan(strategy):
    same(minmax, np.array([1.0, math.nan, 2.0, math.nan, -0.0]),
         np.array([math.nan, 1.0, 2.0, math.nan, 0.0]), varying=("a", "b"))


def domains(x):
    return (math.sqrt(x), math.log(x), math.acos(x), math.erf(x), np.float32(x) ** 0.5,
            math.isnan(math.sqrt(x)), math.atan2(x, -1.0), np.floor(x))


def test_math_domain_errors_give_nan_as_numpy(strategy):
    same(domains, np.array([-1.0, 0.0, 0.5, 4.0, math.inf, -math.inf, math.nan]))


def booleans(x, y):
    c = x > 2
    d = not c
    return c & (y < 1), c | d, c ^ d, (x & 1) == 1 and y != 0


def test_bool_ops(strategy):
    same(booleans, np.arange(6), np.array([0, 1, 2, 0, 1, 2]), varying=("x", "y"))
