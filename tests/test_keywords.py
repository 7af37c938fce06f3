"""Keyword arguments and default parameter values (issue 11, item 13): at the kernel's
call and in helpers it calls, bound as Python binds them, with Python's own errors."""

import inspect

import numpy as np
import pytest
from conftest import check_against_oracle

import hydra


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def helper(a, b=2, *, scale=3.0):
    return (a + b) * scale


def kernel(x, scale=1.0, *, off=0):
    return helper(x, scale=scale) + helper(x, b=off) + helper(a=x, b=1, scale=0.5) + off


def test_keyword_and_default_arguments_of_the_kernel(backend):
    xs = np.linspace(-1.0, 2.0, backend.lanes(17))
    k = hydra.compile(kernel, varying="x", backend=backend)
    for args, kwargs in [((xs,), {}), ((), {"x": xs, "scale": 2.0}), ((xs, 2.0), {"off": 1}),
                         ((), {"off": -3, "x": xs})]:
        want = np.array([kernel(*(a[i] if a is xs else a for a in args),
                                **{n: v[i] if v is xs else v for n, v in kwargs.items()})
                         for i in range(len(xs))])
        np.testing.assert_array_equal(k(*args, **kwargs), want)
    check_against_oracle(kernel, [xs, np.float32(0.5)], varying="x", backend=backend)


@pytest.mark.parametrize("args,kwargs", [
    ((), {}),                                    # missing
    ((np.arange(3.0), 1.0, 2), {}),              # too many positional
    ((np.arange(3.0),), {"y": 1}),               # unexpected keyword
    ((np.arange(3.0),), {"x": np.arange(3.0)}),  # duplicate
    ((np.arange(3.0), 1.0, 2.0), {"off": 1}),
])
def test_bad_calls_are_type_errors_in_pythons_words(backend, args, kwargs):
    with pytest.raises(TypeError) as python:
        kernel(*args, **kwargs)
    k = hydra.compile(kernel, varying="x", backend=backend)
    with pytest.raises(TypeError) as info:
        k(*args, **kwargs)
    assert str(info.value) == str(python.value)
    assert str(info.value).startswith("kernel() ")


def calls_helper_without_b(x):
    return needs_two(x)


def calls_helper_with_unknown(x):
    return helper(x, c=1)


def calls_helper_twice_a(x):
    return helper(x, a=x)


def needs_two(a, b):
    return a + b


@pytest.mark.parametrize("fn,message", [
    (calls_helper_without_b, "needs_two() missing 1 required positional argument: 'b'"),
    (calls_helper_with_unknown, "helper() got an unexpected keyword argument 'c'"),
    (calls_helper_twice_a, "helper() got multiple values for argument 'a'"),
])
def test_bad_helper_calls_are_compile_errors_and_type_errors(fn, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fn(1.0)  # plain Python words it so
    k = hydra.compile(fn, varying="x", backend="numpy")
    with pytest.raises(TypeError) as info:
        k(np.arange(3.0))
    assert isinstance(info.value, hydra.CompileError)
    assert info.value.message == message
    assert info.value.line == line_of(fn, "return")


WEIGHTS = np.array([1.0, 10.0, 100.0])
HALF = np.float32(0.5)


def weighted(x, i=1, w=WEIGHTS, bias=HALF):
    return x * w[i] + bias


def uses_weighted(x):
    return weighted(x) + weighted(x, 2, bias=np.float32(1.0))


def test_helper_defaults_are_constants(backend):
    xs = np.arange(backend.lanes(8), dtype=np.float32)
    got = hydra.compile(uses_weighted, varying="x", backend=backend)(xs)
    assert got.dtype == np.float64  # WEIGHTS is float64
    check_against_oracle(uses_weighted, [xs], varying="x", backend=backend)
    # the kernel's own defaults go in as arguments
    check_against_oracle(weighted, [xs, 0, WEIGHTS, np.float32(2.0)], varying="x",
                         backend=backend)
    np.testing.assert_array_equal(
        hydra.compile(weighted, varying="x", backend=backend)(xs), xs * 10.0 + 0.5)


def test_spmd_keeps_keywords_for_options():
    got = hydra.spmd(3, kernel, np.arange(3.0), 2.0, varying="x", backend="numpy")
    np.testing.assert_array_equal(got, [kernel(x, 2.0) for x in np.arange(3.0)])
    with pytest.raises(TypeError, match=r"hydra.spmd takes its keyword arguments as options, "
                                        r"and 'scale' is a parameter of kernel, not an "
                                        r"option: pass it by position"):
        hydra.spmd(3, kernel, np.arange(3.0), varying="x", backend="numpy", scale=2.0)
    with pytest.raises(TypeError, match=r"unknown option\(s\) 'colour'; the options are threads"):
        hydra.spmd(3, kernel, np.arange(3.0), varying="x", backend="numpy", colour=2.0)


def test_dump_ir_fills_in_defaults():
    k = hydra.compile(kernel, varying="x", backend="numpy")
    text = k.dump_ir("ssa", np.arange(3.0))
    assert "func kernel(%x: v float64, %scale: u float64, %off: u int64)" in text
