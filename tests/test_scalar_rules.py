"""Scalar operations where Python and NumPy differ, on every backend against the
undecorated function run lane by lane (the oracle): arithmetic on Python bools and on
NumPy bools."""

import inspect
import math

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


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)
