"""Scalar operations where Python and NumPy differ, on every backend against the
undecorated function run lane by lane (the oracle): arithmetic on Python bools and on
NumPy bools; ``int()``, ``round()`` and ``math.floor`` of NaN, infinities and floats
beyond int64, which raise as Python does, naming the line and the lane; an integer
raised to a negative integer power, which raises as NumPy does."""

import inspect
import math
import re

import numpy as np
import pytest
from conftest import check_against_oracle

import hydra
from hydra import lane

# --- bool arithmetic ---------------------------------------------------------------------


def numpy_bools(x):  # comparisons of NumPy values: NumPy bools, + is or, * is and
    return (x > 0) + (x > 1), (x > 0) * (x > 1), (x > 0) + True, abs(x > 1)


def python_bools(x, n):  # comparisons of Python ints: Python bools, which add as ints
    i = lane()
    total = 0
    for j in range(n):
        total += (i > j) + (j > 1)
    return (i > 0) + (i > 1), (i > 0) * (i > 1), total, True + (i > 2), -(i > 0), +(i > 1)


def mixed_bools(x):  # a NumPy bool with numbers stays a number of their type
    c = x > 0
    return c + 1, c * 2.5, c * x, c - x, (x > 0) ** (x > 1), (x > 0) << (x > 1), c / c


def conversions_to_bool(x):
    return (bool(x) + bool(x - 1), np.bool_(x) + np.bool_(x - 1),
            math.isnan(x) + math.isnan(x), np.isnan(x) + np.isnan(x),
            (not x > 0) + (not x > 1))


def bool_arguments(x, flag, npflag):
    return flag + flag, npflag + npflag, flag * npflag, (x > 0) + flag


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_bools_add_as_or_and_multiply_as_and(backend, dtype):
    x = np.array([-1.0, 0.5, 2.0, 1.0, 0.0, 3.5, -0.0, 7.0], dtype)
    got = check_against_oracle(numpy_bools, [x], varying="x", backend=backend)
    assert [g.dtype for g in got] == [np.bool_] * 4
    np.testing.assert_array_equal(got[0], x > 0)
    np.testing.assert_array_equal(got[1], x > 1)


def test_python_bools_add_as_ints(backend):
    n = backend.lanes(17)
    got = check_against_oracle(python_bools, [np.zeros(n), 4], varying="x", backend=backend)
    assert [g.dtype for g in got] == [np.int64] * 6
    np.testing.assert_array_equal(got[0], np.minimum(np.arange(n), 2))


def test_bools_with_numbers_promote_as_numpy(backend):
    x = np.array([-1.0, 0.5, 2.0, 1.0, 0.0, 3.5], np.float32)
    got = check_against_oracle(mixed_bools, [x], varying="x", backend=backend)
    assert [g.dtype for g in got] == [np.int64, np.float64, np.float32, np.float32, np.int8,
                                      np.int8, np.float64]


def test_bool_conversions_keep_python_and_numpy_apart(backend):
    x = np.array([0.0, 1.0, 2.0, np.nan, -3.0])
    got = check_against_oracle(conversions_to_bool, [x], varying="x", backend=backend)
    assert [g.dtype for g in got] == [np.int64, np.bool_, np.int64, np.bool_, np.int64]


def test_bool_arguments(backend):
    x = np.array([-1.0, 2.0, 0.5])
    got = check_against_oracle(bool_arguments, [x, True, np.True_], varying="x",
                               backend=backend)
    assert got[:3] == (2, True, True) and type(got[0]) is int and type(got[1]) is bool
    np.testing.assert_array_equal(got[3], [True, True, True])


def subtracts_numpy_bools(x):
    return (x > 0) - (x > 1)


def negates_a_numpy_bool(x):
    return -(x > 0)


@pytest.mark.parametrize("fn,text,message", [
    (subtracts_numpy_bools, "(x > 0) - (x > 1)", "numpy boolean subtract, the `-` operator, "
     "is not supported, use the bitwise_xor, the `^` operator, or the logical_xor function "
     "instead."),
    (negates_a_numpy_bool, "-(x > 0)", "The numpy boolean negative, the `-` operator, is not "
     "supported, use the `~` operator or the logical_not function instead."),
])
def test_what_numpy_refuses_on_bools_is_a_type_error(fn, text, message):
    with pytest.raises(TypeError) as info:
        hydra.compile(fn, varying="x", backend="numpy")(np.array([1.0, 2.0], np.float32))
    e = info.value
    assert isinstance(e, hydra.CompileError) and e.message == message
    assert e.line == line_of(fn, text)
    with pytest.raises(TypeError, match=message.split(",")[0]):
        fn(np.float32(1.0))  # the oracle


# --- int(), round(), math.floor of floats -----------------------------------------------


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def to_int(x):
    return int(x)


def rounded(x):
    return round(x), math.floor(x), math.ceil(x), math.trunc(x)


def guarded_to_int(x):
    if x == x and abs(x) < 1e18:
        return int(x)  # NaN and huge lanes never get here
    return -1


def test_int_of_floats_in_range(backend):
    x = np.array([1.9, -1.9, -0.5, 0.0, -0.0, 3e9, -(2.0 ** 63), 2.0 ** 63 - 1024, 1e18, 7.5])
    got = check_against_oracle(to_int, [x], varying="x", backend=backend)
    assert got.dtype == np.int64 and got[6] == -2 ** 63
    check_against_oracle(to_int, [x[:6].astype(np.float32)], varying="x", backend=backend)
    check_against_oracle(rounded, [x[:6] + 0.25], varying="x", backend=backend)
    check_against_oracle(guarded_to_int, [np.array([1.5, np.nan, np.inf, -2.5, 1e300])],
                         varying="x", backend=backend)


NAN = "cannot convert float NaN to integer"
INFINITY = "cannot convert float infinity to integer"
BEYOND = "cannot convert a float beyond int64 to integer (hydra's Python ints are 64-bit)"


@pytest.mark.parametrize("values,error,words,lane_", [
    ([1.0, 2.0, math.nan, 3.0], ValueError, NAN, 2),
    # NaN is checked first: Python, lane by lane, would stop at lane 1's infinity
    ([1.0, math.inf, 2.0, math.nan], ValueError, NAN, 3),
    ([1.0, 2.0, 3.0, -math.inf], OverflowError, INFINITY, 3),
    ([1e20, 2.0, 3.0, math.inf], OverflowError, INFINITY, 3),  # then infinities
    ([1e20, 2.0, 3.0, 4.0], OverflowError, BEYOND, 0),
    ([1.0, 2.0 ** 63, 3.0, 4.0], OverflowError, BEYOND, 1),
    ([-(2.0 ** 63), 2.0, -(2.0 ** 63) * 1.5, 4.0], OverflowError, BEYOND, 2),
])
def test_int_of_nan_infinity_and_beyond_int64_raises(backend, values, error, words, lane_):
    k = hydra.compile(to_int, varying="x", backend=backend)
    for dtype in (np.float64, np.float32):
        with pytest.raises(error) as info:
            k(np.array(values, dtype))
        e = info.value
        assert isinstance(e, hydra.HydraError) and e.lane == lane_
        line = line_of(to_int, "return int(x)")
        assert str(e) == f"{__file__}:{line}: {words} (lane {lane_})\n    return int(x)"


def test_python_raises_so_too():
    with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
        int(np.float32("nan"))
    with pytest.raises(OverflowError, match="cannot convert float infinity to integer"):
        int(-np.inf)


@pytest.mark.parametrize("x,error,words", [(math.nan, ValueError, NAN),
                                           (math.inf, OverflowError, INFINITY),
                                           (-1e300, OverflowError, BEYOND)])
def test_round_and_floor_raise_as_int_does(backend, x, error, words):
    k = hydra.compile(rounded, varying="x", backend=backend)
    with pytest.raises(error, match=re.escape(f"{words} (lane 1)")) as info:
        k(np.array([0.5, x, 1.0]))
    assert info.value.loc.line == line_of(rounded, "round(x)")


# --- integer powers ------------------------------------------------------------------------


def power(x, e):
    return x ** e


def guarded_power(x, e):
    return x ** e if e >= 0 else -x


def inverse(x):
    i = x + 1
    return i ** -1


def test_negative_integer_exponent_raises_as_numpy(backend):
    x = np.array([2, 3, -4, 5, 6], np.int64)
    k = hydra.compile(power, varying=("x", "e"), backend=backend)
    for e, bad in (([3, 0, 2, -1, -2], 3), ([-5, 1, 2, 3, 4], 0)):
        with pytest.raises(ValueError) as info:
            k(x, np.array(e, np.int64))
        assert info.value.lane == bad
        assert str(info.value) == (f"{__file__}:{line_of(power, 'x ** e')}: Integers to "
                                   f"negative integer powers are not allowed. (lane {bad})"
                                   f"\n    return x ** e")
        with pytest.raises(ValueError, match="Integers to negative integer powers"):
            np.int64(2) ** np.int64(-1)  # NumPy, as the oracle raises
    k32 = hydra.compile(power, varying=("x", "e"), backend=backend)
    with pytest.raises(ValueError, match=r"\(lane 1\)"):
        k32(x.astype(np.int32), np.array([1, -1, 2, 3, 4], np.int32))
    check_against_oracle(power, [x, np.array([3, 0, 2, 1, 20])], varying=("x", "e"),
                         backend=backend)
    check_against_oracle(guarded_power, [x, np.array([3, -1, 2, -7, 0])], varying=("x", "e"),
                         backend=backend)
    # unsigned exponents and float bases never raise
    check_against_oracle(power, [x.astype(np.uint32), np.array([3, 0, 2, 1, 7], np.uint32)],
                         varying=("x", "e"), backend=backend)
    check_against_oracle(power, [x * 1.5, np.array([3, -1, 2, -2, 0])], varying=("x", "e"),
                         backend=backend)


def constant_power(x):
    return x + 10 ** -2


def test_constant_negative_exponent_is_a_compile_error():
    for fn, text, hint in ((inverse, "i ** -1", "1 / i"), (constant_power, "10 ** -2",
                                                          "1 / 10 ** 2")):
        with pytest.raises(hydra.CompileError) as info:
            hydra.compile(fn, varying="x", backend="numpy")(np.arange(3))
        e = info.value
        assert e.message == "Integers to negative integer powers are not allowed."
        assert e.hint == f"for the float that Python's ** gives, write {hint}"
        assert e.line == line_of(fn, text)
